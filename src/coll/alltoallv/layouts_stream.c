/* zc_remap_alltoallv_layouts_stream: the move between a plan's layouts on
 * device memory, enqueued on the caller's stream with nothing that waits
 * for it: the runs to itself as device copies, the small runs of each pair
 * packed into stream-ordered staging by device copies, one group of NCCL
 * sends and receives (a pair's packed message first, then its runs that
 * travel alone, the same order at both ends: the k-th send from a to b
 * meets b's k-th receive from a), then the unpacking copies.  No kernel:
 * runs are copied whole, never token by token. */
#include "config.h"

#include <stdlib.h>

#include "src/coll/alltoallv/layouts.h"
#include "src/common/status.h"
#include "src/core/device.h"

/* Bytes of the runs of `peer` that do not travel alone. */
static size_t zc_move_packed_bytes(const zc_move_t *m, const zc_plan_run_t *runs,
                                   const size_t *at, int peer)
{
    size_t bytes = 0;

    for (size_t k = at[peer]; k < at[peer + 1]; k++) {
        size_t b = (size_t)runs[k].count * m->token;

        bytes += zc_move_alone(b, k - at[peer]) ? 0 : b;
    }
    return bytes;
}

/* Copies between the caller's buffer and a pair's packed message, or the
 * group's ops of its runs that travel alone. */
typedef struct {
    const zc_move_t *m;
    zc_device_t *dev;
    void *stream;
    zc_group_t group;
    zc_status_t st;     /* the first failure of a copy */
} zc_move_enqueue_t;

static void zc_move_copy(zc_move_enqueue_t *e, void *dst, const void *src, size_t bytes)
{
    if (e->st == ZC_OK)
        e->st = zc_device_copy(e->dev, dst, src, bytes, e->stream);
}

/* The runs of `peer` in direction `kind`: pack (send) or unpack (receive)
 * the small ones at `msg` when `copies`, else add the ones that travel
 * alone to the group. */
static void zc_move_runs_of(zc_move_enqueue_t *e, zc_request_kind_t kind, int peer, char *msg,
                            int copies)
{
    const zc_move_t *m = e->m;
    int send = kind == ZC_REQ_SEND;
    const size_t *at = send ? m->send_at : m->recv_at;
    const zc_plan_run_t *runs = send ? m->send : m->recv;
    char *buf = send ? (char *)m->sendbuf : m->recvbuf;

    for (size_t k = at[peer]; k < at[peer + 1]; k++) {
        size_t bytes = (size_t)runs[k].count * m->token;
        char *mine = buf + (size_t)runs[k].offset * m->token;
        int alone = zc_move_alone(bytes, k - at[peer]);

        if (copies && !alone) {
            zc_move_copy(e, send ? msg : mine, send ? mine : msg, bytes);
            msg += bytes;
        } else if (!copies && alone) {
            zc_group_add(&e->group, kind, mine, bytes, peer);
        }
    }
}

static zc_status_t zc_move_enqueue(const zc_move_t *m, zc_device_t *dev, void *stream)
{
    int n = m->comm->size, me = m->comm->rank;
    zc_move_enqueue_t e = {.m = m, .dev = dev, .stream = stream};
    size_t staged = 0;
    char *stage = NULL, *at;

    for (int p = 0; p < n; p++)
        if (p != me)
            staged += zc_move_packed_bytes(m, m->send, m->send_at, p) +
                      zc_move_packed_bytes(m, m->recv, m->recv_at, p);
    if (staged)
        ZC_CHECK(zc_device_alloc(dev, staged, stream, (void **)&stage));
    for (size_t k = m->send_at[me]; k < m->send_at[me + 1]; k++)
        zc_move_copy(&e, m->recvbuf + (size_t)m->send[k].peer_offset * m->token,
                     m->sendbuf + (size_t)m->send[k].offset * m->token,
                     (size_t)m->send[k].count * m->token);
    at = stage;
    for (int p = 0; p < n; p++) {
        size_t out = p == me ? 0 : zc_move_packed_bytes(m, m->send, m->send_at, p);
        size_t in = p == me ? 0 : zc_move_packed_bytes(m, m->recv, m->recv_at, p);

        if (p == me)
            continue;
        zc_move_runs_of(&e, ZC_REQ_SEND, p, at, 1);
        if (in)
            zc_group_add(&e.group, ZC_REQ_RECV, at + out, in, p);
        zc_move_runs_of(&e, ZC_REQ_RECV, p, NULL, 0);
        if (out)
            zc_group_add(&e.group, ZC_REQ_SEND, at, out, p);
        zc_move_runs_of(&e, ZC_REQ_SEND, p, NULL, 0);
        at += out + in;
    }
    if (e.st == ZC_OK)
        e.st = zc_group_flush(&e.group, dev, stream);
    at = stage;
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        at += zc_move_packed_bytes(m, m->send, m->send_at, p);
        zc_move_runs_of(&e, ZC_REQ_RECV, p, at, 1);
        at += zc_move_packed_bytes(m, m->recv, m->recv_at, p);
    }
    zc_device_free(dev, stage, stream);
    free(e.group.ops);
    return e.st;
}

zc_status_t zc_remap_alltoallv_layouts_stream(zc_plan_h plan, zc_layout_t from, zc_layout_t to,
                                              const void *sendbuf, void *recvbuf,
                                              int64_t elems_per_token, zc_datatype_t dtype,
                                              zc_comm_h comm, void *stream)
{
    zc_agree_range_t range;
    zc_device_t *dev;
    zc_move_t m;
    zc_status_t st;

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    st = zc_move_prepare(plan, from, to, sendbuf, recvbuf, elems_per_token, dtype, comm, 1, &m);
    if (st == ZC_OK)
        st = zc_device_check_memory(comm, sendbuf, "sendbuf");
    if (st == ZC_OK)
        st = zc_device_check_memory(comm, recvbuf, "recvbuf");
    if (comm->settings.alltoallv_check) {
        if (st != ZC_OK)  /* the others fail at once, not at the timeout */
            st = zc_agree_refuse(comm, st, zc_move_agree_tag, &m, m.seq);
        else if ((st = zc_agree(comm, m.fingerprint, zc_move_agree_tag, &m, m.seq, &range)) == ZC_OK)
            st = zc_move_verdict(&range, 0);
    }
    if (st == ZC_OK)
        st = zc_device_get(comm, &dev);
    if (st == ZC_OK)
        st = zc_move_enqueue(&m, dev, stream);
    zc_move_free(&m);
    return st;
}
