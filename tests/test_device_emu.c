/* The stream-ordered transfer calls (zc_sendrecv_stream, zc_send_stream,
 * zc_recv_stream, zc_remap_alltoallv_stream, zc_routed_sendrecv_stream) on
 * the emulated device backend (device_emu.h): the same code that enqueues
 * NCCL groups on a GPU machine, its groups run over UCX with NCCL's
 * matching rules.  2, 4 and 8 forked ranks on two emulated nodes, rails on
 * the loopback: byte-exact results, equal to the host path where there is
 * one; a count mismatch refused on every rank; and, first, that the
 * emulation is as strict as NCCL: two ranks whose first groups are sends
 * to each other, with the receives in their second groups, deadlock
 * (ZC_ERR_TIMEOUT) instead of passing through UCX's buffering. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device_emu.h"
#include "mp.h"
#include "rails_lo.h"
#include "src/comm.h"
#include "tap.h"
#include "zcomm.h"

#define CASE_TIMEOUT_S 120

static zc_unique_id_t the_id;
static int have_rails;

static int make_id(void *id)
{
    return zc_get_unique_id(id) == ZC_OK ? 0 : -1;
}

/* Ranks of the first half on node a, the rest on node b; the emulated
 * device installed. */
static int init(int rank, int nranks, int timeout_ms, zc_comm_h *comm)
{
    zc_config_t config = ZC_CONFIG_INITIALIZER;

    config.timeout_ms = timeout_ms;
    config.node_id = rank < nranks / 2 ? "emu-node-a" : "emu-node-b";
    MP_CHECK(mp_case_id(rank, &the_id, sizeof(the_id), make_id) == 0, "case id");
    MP_CHECK(zc_comm_init_rank(comm, nranks, &the_id, rank, &config) == ZC_OK, "init: %s",
             zc_get_last_error());
    MP_CHECK(device_emu_install(*comm) == ZC_OK, "install: %s", zc_get_last_error());
    return 0;
}

static unsigned char pattern(size_t i, unsigned seed)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 32);
    return (unsigned char)(x >> 56 ^ x >> 13 ^ x);
}

static void fill(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(i, seed);
}

static int matches(const unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pattern(i, seed))
            return 0;
    return 1;
}

/* Sends crossing in separate groups (each rank's first group a send to
 * the other, its receive in a second group): NCCL would hang, so must
 * this.  With *one_group, the same exchange as one group passes. */
static int rank_crossing_sends(int rank, int nranks, void *arg)
{
    const int one_group = *(const int *)arg;
    char out = (char)rank, in = -1;
    zc_device_op_t ops[2] = {{ZC_REQ_SEND, &out, 1, 1 - rank}, {ZC_REQ_RECV, &in, 1, 1 - rank}};
    zc_comm_h comm;
    zc_status_t st;

    if (init(rank, nranks, one_group ? 30000 : 1500, &comm))
        return 1;
    if (one_group) {
        MP_CHECK(device_emu_group(comm, ops, 2) == ZC_OK && in == 1 - rank, "one group: %s",
                 zc_get_last_error());
    } else {
        st = device_emu_group(comm, &ops[0], 1);
        MP_CHECK(st == ZC_ERR_TIMEOUT && strstr(zc_get_last_error(), "do not match"),
                 "rank %d: crossing sends returned %s (%s), expected a timeout", rank,
                 zc_strerror(st), zc_get_last_error());
    }
    zc_comm_destroy(comm);
    return 0;
}

/* Ring exchange of every size class, and a send/recv pair in order. */
static int rank_p2p(int rank, int nranks, void *arg)
{
    static const size_t sizes[] = {0, 1, 4097, (1 << 20) + 3};
    int to = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;
    zc_comm_h comm;
    (void)arg;

    if (init(rank, nranks, 30000, &comm))
        return 1;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        unsigned char *sb = malloc(n + 1), *rb = calloc(n + 1, 1);

        MP_CHECK(sb && rb, "alloc");
        fill(sb, n, (unsigned)(rank * 16 + i));
        MP_CHECK(zc_sendrecv_stream(sb, (int64_t)n, to, rb, (int64_t)n, from, ZC_BYTE, comm,
                                    NULL) == ZC_OK, "sendrecv_stream %zu: %s", n,
                 zc_get_last_error());
        MP_CHECK(zc_stream_synchronize(comm, NULL) == ZC_OK, "synchronize");
        MP_CHECK(matches(rb, n, (unsigned)(from * 16 + i)), "%zu bytes byte-exact", n);
        /* even ranks send first, odd ranks receive first: no crossing */
        int peer = rank ^ 1;
        if (peer < nranks) {
            zc_status_t a, b;
            if (rank % 2 == 0) {
                a = zc_send_stream(sb, (int64_t)n, ZC_BYTE, peer, comm, NULL);
                b = zc_recv_stream(rb, (int64_t)n, ZC_BYTE, peer, comm, NULL);
            } else {
                a = zc_recv_stream(rb, (int64_t)n, ZC_BYTE, peer, comm, NULL);
                b = zc_send_stream(sb, (int64_t)n, ZC_BYTE, peer, comm, NULL);
            }
            MP_CHECK(a == ZC_OK && b == ZC_OK, "send/recv_stream: %s", zc_get_last_error());
            MP_CHECK(matches(rb, n, (unsigned)(peer * 16 + i)), "send/recv %zu bytes", n);
        }
        free(sb), free(rb);
    }
    zc_comm_destroy(comm);
    return 0;
}

/* The same counts on the host path and the device path give the same
 * bytes (some blocks empty); then counts that disagree are refused on
 * every rank. */
static int rank_alltoallv(int rank, int nranks, void *arg)
{
    int64_t sc[8], sd[8], rc[8], rd[8], stot = 0, rtot = 0;
    zc_request_h req;
    zc_comm_h comm;
    zc_status_t st;
    (void)arg;

    if (init(rank, nranks, 30000, &comm))
        return 1;
    for (int p = 0; p < nranks; p++) {
        sc[p] = (rank * 7 + p * 3) % 4 * 40000 + (p == rank ? 17 : 0);
        rc[p] = (p * 7 + rank * 3) % 4 * 40000 + (p == rank ? 17 : 0);
        sd[p] = stot, rd[p] = rtot;
        stot += sc[p], rtot += rc[p];
    }
    unsigned char *hs = malloc((size_t)stot + 1), *hr = calloc((size_t)rtot + 1, 1);
    unsigned char *dr = calloc((size_t)rtot + 1, 1);
    MP_CHECK(hs && hr && dr, "alloc");
    fill(hs, (size_t)stot, (unsigned)rank);
    MP_CHECK(zc_remap_alltoallv(hs, sc, sd, hr, rc, rd, ZC_BYTE, ZC_MEM_HOST, comm, &req) ==
                 ZC_OK && zc_wait(&req) == ZC_OK, "host alltoallv");
    MP_CHECK(zc_remap_alltoallv_stream(hs, sc, sd, dr, rc, rd, ZC_BYTE, comm, NULL) == ZC_OK,
             "device alltoallv: %s", zc_get_last_error());
    MP_CHECK(memcmp(dr, hr, (size_t)rtot) == 0, "device result equals host result");
    if (rank == nranks - 1)
        rc[0] += 1; /* the last rank expects one byte more from rank 0 */
    st = zc_remap_alltoallv_stream(hs, sc, sd, dr, rc, rd, ZC_BYTE, comm, NULL);
    MP_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "rank 0"),
             "mismatch: %s (%s)", zc_strerror(st), zc_get_last_error());
    free(hs), free(hr), free(dr);
    zc_comm_destroy(comm);
    return 0;
}

/* Routed transfers between the nodes (split over every rail, pipelined in
 * chunks, proxies staging), inside a node and to itself, one empty: the
 * device path equals the host path and the senders' data. */
static int rank_routed(int rank, int nranks, void *arg)
{
    const int half = nranks / 2;
    const int64_t count = (1 << 20) + 3;
    zc_transfer_t t[8];
    zc_request_h req;
    zc_comm_h comm;
    int n = 0, src = -1, nrails;
    (void)arg;

    if (init(rank, nranks, 30000, &comm))
        return 1;
    /* rank i <-> i + half (between the nodes); the pair of rank 1 sends
     * nothing one way; every rank is the src and the dst of one */
    for (int i = 0; i < half; i++) {
        t[n++] = (zc_transfer_t){i, i + half, i == 1 ? 0 : count - i};
        t[n++] = (zc_transfer_t){i + half, i, count + i};
    }
    for (int i = 0; i < n; i++)
        if (t[i].dst == rank)
            src = t[i].src;
    unsigned char *hs = malloc((size_t)count + 8), *hr = calloc((size_t)count + 8, 1);
    unsigned char *dr = calloc((size_t)count + 8, 1);
    MP_CHECK(hs && hr && dr, "alloc");
    fill(hs, (size_t)count + 8, (unsigned)rank + 50);
    zc_comm_rail_count(comm, &nrails);
    MP_CHECK(!have_rails || nrails == 4, "4 rails (got %d)", nrails);
    MP_CHECK(zc_routed_sendrecv(t, n, hs, hr, ZC_BYTE, ZC_MEM_HOST, comm, &req) == ZC_OK &&
                 zc_wait(&req) == ZC_OK, "host routed: %s", zc_get_last_error());
    MP_CHECK(zc_routed_sendrecv_stream(t, n, hs, dr, ZC_BYTE, comm, NULL) == ZC_OK,
             "device routed: %s", zc_get_last_error());
    for (int i = 0; i < n; i++) {
        size_t len = (size_t)t[i].count;
        if (t[i].dst != rank)
            continue;
        MP_CHECK(memcmp(dr, hr, len) == 0 && matches(dr, len, (unsigned)src + 50),
                 "%zu bytes from rank %d: device equals host and the sender's data", len, src);
    }
    free(hs), free(hr), free(dr);
    zc_comm_destroy(comm);
    return 0;
}

int main(void)
{
    static const int sizes[] = {2, 4, 8};
    char topo[64];

    setenv("ZC_SOCKET_IFNAME", "lo", 0);
    setenv("ZC_ROUTED_MIN_BYTES", "1", 1);
    setenv("ZC_ROUTED_CHUNK", "65536", 1);
    have_rails = rails_on_loopback(topo, sizeof(topo));
    if (!have_rails)
        diag("no node topology (tests/cluster/zc_cluster --topo-xml): routed transfers go "
             "direct");
    ok(mp_run(2, CASE_TIMEOUT_S, rank_crossing_sends, &(int){0}) == 0,
       "emulated NCCL: sends crossing in separate groups deadlock (ZC_ERR_TIMEOUT naming the "
       "group) instead of passing through UCX's buffering");
    ok(mp_run(2, CASE_TIMEOUT_S, rank_crossing_sends, &(int){1}) == 0,
       "emulated NCCL: the same exchange as one group passes");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        int n = sizes[i];
        ok(mp_run(n, CASE_TIMEOUT_S, rank_p2p, NULL) == 0,
           "%d ranks: zc_sendrecv_stream ring and zc_send/recv_stream pairs, 0 B to 1 MiB + 3 "
           "B, byte-exact", n);
        ok(mp_run(n, CASE_TIMEOUT_S, rank_alltoallv, NULL) == 0,
           "%d ranks: zc_remap_alltoallv_stream equals the host path; a count mismatch is "
           "ZC_ERR_MISMATCH on every rank", n);
        ok(mp_run(n, CASE_TIMEOUT_S, rank_routed, NULL) == 0,
           "%d ranks on 2 nodes: zc_routed_sendrecv_stream (split over %d rails, chunked, "
           "proxies staging) equals the host path and the senders' data", n,
           have_rails ? 4 : 0);
    }
    if (have_rails)
        unlink(topo);
    return tap_done();
}
