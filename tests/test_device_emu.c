/* The stream-ordered transfer calls (zc_sendrecv_stream, zc_send_stream,
 * zc_recv_stream, zc_remap_alltoallv_stream, zc_routed_sendrecv_stream) on
 * the emulated device backend (device_emu.h): the same code that enqueues
 * NCCL groups on a GPU machine, its groups run over UCX with NCCL's
 * matching rules, and the same cases tests/test_gpu runs there
 * (stream_cases.h).  2, 4 and 8 forked ranks on two emulated nodes, rails on
 * the loopback: byte-exact results, equal to the host path where there is
 * one; a count mismatch refused on every rank; and, first, that the
 * emulation is as strict as NCCL: two ranks whose first groups are sends
 * to each other, with the receives in their second groups, deadlock
 * (ZC_ERR_TIMEOUT) instead of passing through UCX's buffering. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emu_comm.h"
#include "move_common.h"
#include "rails_lo.h"
#include "stream_cases.h"
#include "src/core/comm.h"
#include "tap.h"
#include "zcomm.h"

#define CASE_TIMEOUT_S 120

static int have_rails;



/* Both ranks of a crossing case hold their communicators until both have
 * their result: one that timed out first and left would otherwise be a
 * failed peer to the other, still waiting (under load that was seen:
 * "peer failed" where the timeout was expected). */
typedef struct {
    int one_group;
    int *waiting;  /* shared across the ranks: how many have no result yet */
} crossing_t;

static void crossing_rendezvous(int *waiting)
{
    __atomic_sub_fetch(waiting, 1, __ATOMIC_ACQ_REL);
    for (int i = 0; i < 60000 && __atomic_load_n(waiting, __ATOMIC_ACQUIRE) > 0; i++)
        usleep(1000);
}

/* Sends crossing in separate groups (each rank's first group a send to
 * the other, its receive in a second group): NCCL would hang, so must
 * this.  With one_group, the same exchange as one group passes. */
static int rank_crossing_sends(int rank, int nranks, void *arg)
{
    const crossing_t *c = arg;
    char out = (char)rank, in = -1;
    zc_device_op_t ops[2] = {{ZC_REQ_SEND, &out, 1, 1 - rank}, {ZC_REQ_RECV, &in, 1, 1 - rank}};
    zc_comm_h comm;
    zc_status_t st;

    if (emu_comm_init(rank, nranks, c->one_group ? 30000 : 1500, &comm))
        return 1;
    st = device_emu_group(comm, ops, c->one_group ? 2 : 1);
    crossing_rendezvous(c->waiting);
    if (c->one_group) {
        MP_CHECK(st == ZC_OK && in == 1 - rank, "one group: %s", zc_get_last_error());
    } else {
        MP_CHECK(st == ZC_ERR_TIMEOUT && strstr(zc_get_last_error(), "do not match"),
                 "rank %d: crossing sends returned %s (%s), expected a timeout", rank,
                 zc_strerror(st), zc_get_last_error());
    }
    zc_comm_destroy(comm);
    return 0;
}

/* The shared stream-call cases (stream_cases.h) on the emulated device's
 * host memory. */
static int emu_init(int rank, int nranks, int timeout_ms, zc_comm_h *comm, void **stream)
{
    int nrails = 0;

    *stream = NULL;
    if (emu_comm_init(rank, nranks, timeout_ms, comm))
        return 1;
    zc_comm_rail_count(*comm, &nrails);
    MP_CHECK(!have_rails || nrails == 4, "4 rails (got %d)", nrails);
    return 0;
}

static void *host_alloc(size_t bytes)
{
    return malloc(bytes ? bytes : 1);
}

static int host_copy(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    return 0;
}

static const sc_memory_t host_memory = {emu_init, host_alloc, host_copy, host_copy, free};

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
    static crossing_t crossing[2] = {{0, NULL}, {1, NULL}};
    for (int g = 0; g < 2; g++) {
        crossing[g].waiting = mp_shared(sizeof(int));
        *crossing[g].waiting = 2;
    }
    ok(mp_run(2, CASE_TIMEOUT_S, rank_crossing_sends, &crossing[0]) == 0,
       "emulated NCCL: sends crossing in separate groups deadlock (ZC_ERR_TIMEOUT naming the "
       "group) instead of passing through UCX's buffering");
    ok(mp_run(2, CASE_TIMEOUT_S, rank_crossing_sends, &crossing[1]) == 0,
       "emulated NCCL: the same exchange as one group passes");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        int n = sizes[i];
        void *mem = (void *)&host_memory;

        ok(mp_run(n, CASE_TIMEOUT_S, sc_p2p, mem) == 0,
           "%d ranks: zc_sendrecv_stream ring and zc_send/recv_stream pairs, 0 B to 1 MiB + 3 "
           "B, byte-exact", n);
        ok(mp_run(n, CASE_TIMEOUT_S, sc_alltoallv, mem) == 0,
           "%d ranks: zc_remap_alltoallv_stream equals the host path; a count mismatch is "
           "ZC_ERR_MISMATCH on every rank", n);
        ok(mp_run(n, CASE_TIMEOUT_S, sc_routed, mem) == 0,
           "%d ranks on 2 nodes, %d rails: zc_routed_sendrecv_stream (ZC_ROUTED_MIN_BYTES=1, "
           "64 KiB chunks) equals the host path and the senders' data; a list that differs on "
           "one rank is ZC_ERR_MISMATCH on every rank", n, have_rails ? 4 : 0);
        ok(mp_run(n, CASE_TIMEOUT_S, sc_layouts, mem) == 0,
           "%d ranks on 2 nodes: zc_remap_alltoallv_layouts_stream equals the host form and the "
           "batch for every move of %d plans, packed and alone runs; another plan on one rank "
           "is ZC_ERR_MISMATCH on every rank", n, MOVE_PLANS);
    }
    if (have_rails)
        unlink(topo);
    return tap_done();
}
