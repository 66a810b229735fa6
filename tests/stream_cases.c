/* The stream-call test cases for any memory: see stream_cases.h. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "move_common.h"
#include "mp.h"
#include "pattern.h"
#include "stream_cases.h"

/* Device copies of `n` host bytes (uploaded) and room for `n` more. */
static int sc_pair(const sc_memory_t *m, const unsigned char *host, size_t n, void **in,
                   void **out)
{
    *in = m->alloc(n);
    *out = m->alloc(n);
    return *in && *out && m->upload(*in, host, n) == 0 ? 0 : -1;
}

int sc_p2p(int rank, int nranks, void *arg)
{
    static const size_t sizes[] = {0, 1, 4097, (1 << 20) + 3};
    const sc_memory_t *m = arg;
    int to = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks, peer = rank ^ 1;
    zc_comm_h comm;
    void *s;

    if (m->init(rank, nranks, 30000, &comm, &s))
        return 1;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        unsigned char *host = malloc(n + 1);
        void *sb, *rb;

        MP_CHECK(host, "alloc");
        pattern_fill(host, n, rank, (int)i);
        MP_CHECK(sc_pair(m, host, n, &sb, &rb) == 0, "buffers");
        MP_CHECK(zc_sendrecv_stream(sb, (int64_t)n, to, rb, (int64_t)n, from, ZC_BYTE, comm,
                                    s) == ZC_OK && zc_stream_synchronize(comm, s) == ZC_OK,
                 "sendrecv_stream %zu", n);
        MP_CHECK(m->download(host, rb, n) == 0 && pattern_first_wrong(host, n, from, (int)i) == n,
                 "sendrecv %zu bytes byte-exact", n);
        /* pairs: even ranks send first, odd ranks receive first */
        if (peer < nranks) {
            zc_status_t a, b;

            if (rank % 2 == 0) {
                a = zc_send_stream(sb, (int64_t)n, ZC_BYTE, peer, comm, s);
                b = zc_recv_stream(rb, (int64_t)n, ZC_BYTE, peer, comm, s);
            } else {
                a = zc_recv_stream(rb, (int64_t)n, ZC_BYTE, peer, comm, s);
                b = zc_send_stream(sb, (int64_t)n, ZC_BYTE, peer, comm, s);
            }
            MP_CHECK(a == ZC_OK && b == ZC_OK && zc_stream_synchronize(comm, s) == ZC_OK,
                     "send/recv_stream %zu", n);
            MP_CHECK(m->download(host, rb, n) == 0 &&
                         pattern_first_wrong(host, n, peer, (int)i) == n,
                     "send/recv %zu bytes byte-exact", n);
        }
        m->release(sb), m->release(rb), free(host);
    }
    zc_comm_destroy(comm);
    return 0;
}

int sc_alltoallv(int rank, int nranks, void *arg)
{
    const sc_memory_t *m = arg;
    int64_t sc[64], sd[64], rc[64], rd[64], stot = 0, rtot = 0;
    zc_request_h req;
    zc_comm_h comm;
    zc_status_t st;
    void *s, *gs, *gr;

    MP_CHECK(nranks <= 64, "at most 64 ranks");
    if (m->init(rank, nranks, 30000, &comm, &s))
        return 1;
    for (int p = 0; p < nranks; p++) {
        sc[p] = (rank * 7 + p * 3) % 4 * 40000 + (p == rank ? 17 : 0); /* some blocks empty */
        rc[p] = (p * 7 + rank * 3) % 4 * 40000 + (p == rank ? 17 : 0);
        sd[p] = stot, rd[p] = rtot;
        stot += sc[p], rtot += rc[p];
    }
    unsigned char *hs = malloc((size_t)stot + 1), *hr = calloc((size_t)rtot + 1, 1);
    unsigned char *dr = calloc((size_t)rtot + 1, 1);
    MP_CHECK(hs && hr && dr, "alloc");
    pattern_fill(hs, (size_t)stot, rank, 0);
    gs = m->alloc((size_t)stot);
    gr = m->alloc((size_t)rtot);
    MP_CHECK(gs && gr && m->upload(gs, hs, (size_t)stot) == 0, "buffers");
    MP_CHECK(zc_remap_alltoallv(hs, sc, sd, hr, rc, rd, ZC_BYTE, ZC_MEM_HOST, comm, &req) ==
                 ZC_OK && zc_wait(&req) == ZC_OK, "host alltoallv");
    MP_CHECK(zc_remap_alltoallv_stream(gs, sc, sd, gr, rc, rd, ZC_BYTE, comm, s) == ZC_OK &&
                 zc_stream_synchronize(comm, s) == ZC_OK, "device alltoallv");
    MP_CHECK(m->download(dr, gr, (size_t)rtot) == 0 && memcmp(dr, hr, (size_t)rtot) == 0,
             "device result equals host result");
    if (rank == nranks - 1)
        rc[0] += 1; /* the last rank expects one byte more from rank 0 */
    st = zc_remap_alltoallv_stream(gs, sc, sd, gr, rc, rd, ZC_BYTE, comm, s);
    MP_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "rank 0"),
             "a count mismatch returned %s", zc_strerror(st));
    m->release(gs), m->release(gr), free(hs), free(hr), free(dr);
    zc_comm_destroy(comm);
    return 0;
}

int sc_routed(int rank, int nranks, void *arg)
{
    const sc_memory_t *m = arg;
    const int half = nranks / 2;
    const int64_t count = (1 << 20) + 3;
    const size_t bytes = (size_t)count + 64;
    zc_transfer_t t[128];
    zc_request_h req;
    zc_comm_h comm;
    int n = 0, src = -1;
    void *s, *gs, *gr;

    MP_CHECK(nranks % 2 == 0 && nranks <= 128, "an even number of ranks, at most 128");
    if (m->init(rank, nranks, 30000, &comm, &s))
        return 1;
    /* rank i <-> i + half, between the nodes; the pair of rank 1 sends
     * nothing one way; every rank is the src and the dst of one */
    for (int i = 0; i < half; i++) {
        t[n++] = (zc_transfer_t){i, i + half, i == 1 ? 0 : count - i % 32};
        t[n++] = (zc_transfer_t){i + half, i, count + i % 32};
    }
    for (int i = 0; i < n; i++)
        if (t[i].dst == rank)
            src = t[i].src;
    unsigned char *hs = malloc(bytes), *hr = calloc(bytes, 1), *dr = calloc(bytes, 1);
    MP_CHECK(hs && hr && dr, "alloc");
    pattern_fill(hs, bytes, rank, 50);
    gs = m->alloc(bytes);
    gr = m->alloc(bytes);
    MP_CHECK(gs && gr && m->upload(gs, hs, bytes) == 0, "buffers");
    MP_CHECK(zc_routed_sendrecv(t, n, hs, hr, ZC_BYTE, ZC_MEM_HOST, comm, &req) == ZC_OK &&
                 zc_wait(&req) == ZC_OK, "host routed");
    MP_CHECK(zc_routed_sendrecv_stream(t, n, gs, gr, ZC_BYTE, comm, s) == ZC_OK &&
                 zc_stream_synchronize(comm, s) == ZC_OK, "device routed");
    for (int i = 0; i < n; i++) {
        size_t len = (size_t)t[i].count;

        if (t[i].dst != rank)
            continue;
        MP_CHECK(m->download(dr, gr, len) == 0 && memcmp(dr, hr, len) == 0 &&
                     pattern_first_wrong(dr, len, src, 50) == len,
                 "%zu bytes from rank %d: device equals host and the sender's data", len, src);
    }
    /* A list that differs on one rank: refused on every rank before NCCL
     * sees a send without its receive. */
    if (rank == 0)
        t[0].count--;
    zc_status_t st = zc_routed_sendrecv_stream(t, n, gs, gr, ZC_BYTE, comm, s);
    MP_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "different transfer lists"),
             "disagreeing lists returned %s (%s)", zc_strerror(st), zc_get_last_error());
    if (rank == 0)
        t[0].count++;
    MP_CHECK(zc_routed_sendrecv_stream(t, n, gs, gr, ZC_BYTE, comm, s) == ZC_OK &&
                 zc_stream_synchronize(comm, s) == ZC_OK, "device routed after a refused call");
    m->release(gs), m->release(gr), free(hs), free(hr), free(dr);
    zc_comm_destroy(comm);
    return 0;
}

/* One move of `plan` in both forms: the stream form's tokens equal the
 * host form's and the batch tokens the layout puts there. */
static int sc_move(const sc_memory_t *m, zc_comm_h comm, int rank, void *s, zc_plan_h plan,
                   zc_layout_t from, zc_layout_t to, int64_t elems, zc_datatype_t dtype, int salt)
{
    size_t token = (size_t)elems * zc_datatype_size(dtype);
    zc_request_h req;
    move_case_t c;

    MP_CHECK(move_case(plan, from, to, rank, token, salt, &c) == 0, "the case's buffers");
    size_t sbytes = (size_t)c.ns * token, rbytes = (size_t)c.nr * token;
    char *hr = calloc(rbytes + 1, 1), *dr = calloc(rbytes + 1, 1);
    void *gs = m->alloc(sbytes), *gr = m->alloc(rbytes);
    MP_CHECK(hr && dr && gs && gr, "buffers");
    MP_CHECK(m->upload(gs, c.send, sbytes) == 0, "upload");
    MP_CHECK(zc_remap_alltoallv_layouts(plan, from, to, c.send, hr, elems, dtype, ZC_MEM_HOST,
                                        comm, &req) == ZC_OK && zc_wait(&req) == ZC_OK,
             "host move %d -> %d", from, to);
    MP_CHECK(zc_remap_alltoallv_layouts_stream(plan, from, to, c.ns ? gs : NULL,
                                               c.nr ? gr : NULL, elems, dtype, comm, s) == ZC_OK &&
                 zc_stream_synchronize(comm, s) == ZC_OK,
             "device move %d -> %d", from, to);
    MP_CHECK(m->download(dr, gr, rbytes) == 0 && memcmp(dr, hr, rbytes) == 0 &&
                 move_first_wrong(dr, c.rid, c.nr, token, salt) < 0,
             "rank %d, move %d -> %d of %zu-byte tokens: device equals host and the batch",
             rank, from, to, token);
    m->release(gs), m->release(gr), free(hr), free(dr);
    move_case_free(&c);
    return 0;
}

int sc_layouts(int rank, int nranks, void *arg)
{
    const sc_memory_t *m = arg;
    zc_plan_h plan, other;
    zc_comm_h comm;
    const char *name;
    void *s;

    if (m->init(rank, nranks, 30000, &comm, &s))
        return 1;
    for (int k = 0; k < MOVE_PLANS; k++) {
        MP_CHECK(move_plan(k, nranks, &plan, &name) == ZC_OK, "plan %d", k);
        for (int from = 0; from < 3; from++)
            for (int to = 0; to < 3; to++)
                if (sc_move(m, comm, rank, s, plan, from, to, 12, ZC_BYTE, k) ||
                    sc_move(m, comm, rank, s, plan, from, to, 1025, ZC_FLOAT32, k + 9))
                    return 1;
        if (k)
            zc_plan_destroy(plan);
    }
    /* Another plan on the last rank: refused on every rank before NCCL
     * sees a send without its receive; then the first plan moves again. */
    MP_CHECK(move_plan(0, nranks, &plan, &name) == ZC_OK &&
                 move_plan(1, nranks, &other, &name) == ZC_OK, "plans");
    void *gs = m->alloc(1 << 16), *gr = m->alloc(1 << 16);
    zc_status_t st = zc_remap_alltoallv_layouts_stream(rank == nranks - 1 ? other : plan,
                                                       ZC_LAYOUT_LOADER, ZC_LAYOUT_ATTENTION,
                                                       gs, gr, 1, ZC_BYTE, comm, s);
    MP_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "different plans"),
             "another plan on one rank returned %s (%s)", zc_strerror(st), zc_get_last_error());
    m->release(gs), m->release(gr);
    if (sc_move(m, comm, rank, s, plan, ZC_LAYOUT_LINEAR, ZC_LAYOUT_LOADER, 1025, ZC_FLOAT32, 3))
        return 1;
    zc_plan_destroy(plan), zc_plan_destroy(other);
    zc_comm_destroy(comm);
    return 0;
}
