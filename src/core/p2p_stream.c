/* Stream-ordered transfers of device memory: point-to-point, the routed
 * transfer and the remap alltoallv, as groups of NCCL sends and receives
 * enqueued on the caller's CUDA stream (src/core/device.h).
 *
 * The routed transfer keeps the routes of the host path (src/plan/routing.h):
 * slice k of a transfer between nodes goes src -> p_k -> q_k -> dst, in
 * chunks.  Step t of the pipeline is one group holding, for every slice,
 * the dispatch of chunk t, the wire hop of chunk t-1 and the combine of
 * chunk t-2; the stream orders the steps, so a proxy forwards a chunk one
 * step after receiving it and two staging slots per proxy suffice.  Every
 * rank walks the same steps, transfers and rails in the same order, so the
 * sends and receives of each pair of ranks match in order, as NCCL wants.
 * Which NIC carries the wire hop is NCCL's choice. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/coll/alltoallv/alltoallv.h"
#include "src/core/comm.h"
#include "src/core/device.h"
#include "src/common/env.h"
#include "src/core/memtype.h"
#include "src/plan/routing.h"
#include "src/common/status.h"

/* Ops of one group, grown as needed; the first failure sticks. */
typedef struct {
    zc_device_op_t *ops;
    int n, cap;
    zc_status_t error;
} zc_group_t;

static void zc_group_add(zc_group_t *g, zc_request_kind_t kind, const void *buf, size_t bytes,
                         int peer)
{
    if (g->error != ZC_OK)
        return;
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 16;
        zc_device_op_t *ops = realloc(g->ops, sizeof(*ops) * (size_t)cap);
        if (!ops) {
            g->error = zc_error(ZC_ERR_NO_MEMORY, "cannot grow a group to %d ops", cap);
            return;
        }
        g->ops = ops;
        g->cap = cap;
    }
    g->ops[g->n++] = (zc_device_op_t){kind, (void *)buf, bytes, peer};
}

/* Enqueue the group and empty it for the next one. */
static zc_status_t zc_group_flush(zc_group_t *g, zc_device_t *dev, void *stream)
{
    zc_status_t st = g->error != ZC_OK ? g->error : zc_device_group(dev, g->ops, g->n, stream);

    g->n = 0;
    return st;
}

/* Device buffers (NULL for empty ones), then the communicator's backend;
 * `sname` and `rname` name the buffers in messages. */
static zc_status_t zc_stream_begin(zc_comm_h comm, const void *sendbuf, const char *sname,
                                   const void *recvbuf, const char *rname, zc_device_t **dev)
{
    ZC_CHECK(zc_device_check_memory(comm, sendbuf, sname));
    ZC_CHECK(zc_device_check_memory(comm, recvbuf, rname));
    return zc_device_get(comm, dev);
}

zc_status_t zc_comm_cuda_init(zc_comm_h comm)
{
    zc_device_t *dev;

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    return zc_stream_begin(comm, NULL, "", NULL, "", &dev);
}

zc_status_t zc_stream_synchronize(zc_comm_h comm, void *stream)
{
    zc_device_t *dev;

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    ZC_CHECK(zc_stream_begin(comm, NULL, "", NULL, "", &dev));
    return zc_device_sync(dev, stream);
}

/* ---- point-to-point -------------------------------------------------- */

/* One side of a point-to-point call: `buf`, `count` and `peer` are named
 * with `prefix` ("send", "recv" or ""); peer -1 means no side when
 * `optional`. */
static zc_status_t zc_stream_side(const void *buf, int64_t count, size_t elem, int peer,
                                  int optional, zc_comm_h comm, const char *prefix,
                                  const char *peer_name, size_t *bytes)
{
    ZC_ARG_CHECK(count >= 0, "%scount: %lld is negative", prefix, (long long)count);
    ZC_ARG_CHECK((uint64_t)count <= (uint64_t)INT64_MAX / elem,
                 "%scount: %lld elements of %zu bytes overflow", prefix, (long long)count, elem);
    ZC_ARG_CHECK(buf != NULL || count == 0, "%sbuf: is NULL with count %lld", prefix,
                 (long long)count);
    if (optional && peer == -1)
        ZC_ARG_CHECK(count == 0, "%scount: %lld with no %s (-1)", prefix, (long long)count,
                     peer_name);
    else
        ZC_ARG_CHECK(peer >= 0 && peer < comm->size, "%s: %d is out of range 0..%d%s",
                     peer_name, peer, comm->size - 1, optional ? " (or -1: none)" : "");
    *bytes = (size_t)count * elem;
    return ZC_OK;
}

/* Both sides as one group; a side whose peer is ZC_NO_SIDE is not part of
 * the call (zc_send_stream, zc_recv_stream). */
#define ZC_NO_SIDE (-2)

static zc_status_t zc_stream_p2p(const void *sendbuf, int64_t sendcount, int dst, void *recvbuf,
                                 int64_t recvcount, int src, zc_datatype_t dtype, int optional,
                                 zc_comm_h comm, void *stream)
{
    size_t elem = zc_datatype_size(dtype), sbytes = 0, rbytes = 0;
    const char *sp = optional ? "send" : "", *rp = optional ? "recv" : "";
    zc_device_op_t ops[2];
    zc_device_t *dev;
    int n = 0;

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    ZC_ARG_CHECK(elem != 0, "dtype: %d is not a zc_datatype_t", (int)dtype);
    if (dst != ZC_NO_SIDE)
        ZC_CHECK(zc_stream_side(sendbuf, sendcount, elem, dst, optional, comm, sp,
                                optional ? "dst" : "peer", &sbytes));
    if (src != ZC_NO_SIDE)
        ZC_CHECK(zc_stream_side(recvbuf, recvcount, elem, src, optional, comm, rp,
                                optional ? "src" : "peer", &rbytes));
    /* Only zc_sendrecv_stream has both sides (the others have 0 bytes on
     * one); addresses alone tell, no device needed. */
    ZC_CHECK(zc_check_disjoint(sendbuf, sbytes, "sendbuf", recvbuf, rbytes, "recvbuf"));
    ZC_CHECK(zc_stream_begin(comm, sendbuf, optional ? "sendbuf" : "buf", recvbuf,
                             optional ? "recvbuf" : "buf", &dev));
    if (src >= 0)
        ops[n++] = (zc_device_op_t){ZC_REQ_RECV, recvbuf, rbytes, src};
    if (dst >= 0)
        ops[n++] = (zc_device_op_t){ZC_REQ_SEND, (void *)sendbuf, sbytes, dst};
    return zc_device_group(dev, ops, n, stream);
}

zc_status_t zc_send_stream(const void *buf, int64_t count, zc_datatype_t dtype, int peer,
                           zc_comm_h comm, void *stream)
{
    return zc_stream_p2p(buf, count, peer, NULL, 0, ZC_NO_SIDE, dtype, 0, comm, stream);
}

zc_status_t zc_recv_stream(void *buf, int64_t count, zc_datatype_t dtype, int peer,
                           zc_comm_h comm, void *stream)
{
    return zc_stream_p2p(NULL, 0, ZC_NO_SIDE, buf, count, peer, dtype, 0, comm, stream);
}

zc_status_t zc_sendrecv_stream(const void *sendbuf, int64_t sendcount, int dst, void *recvbuf,
                               int64_t recvcount, int src, zc_datatype_t dtype, zc_comm_h comm,
                               void *stream)
{
    return zc_stream_p2p(sendbuf, sendcount, dst, recvbuf, recvcount, src, dtype, 1, comm,
                         stream);
}

/* ---- routed transfer --------------------------------------------------- */

typedef struct {
    const zc_transfer_t *t;
    int k;                 /* rail */
    int p, q;              /* proxies of the source and destination node */
    size_t off, len;       /* bytes of the transfer in this slice */
    size_t chunk;
    int nchunks;
    char *slots_p, *slots_q; /* two chunks of staging at a proxy, or NULL */
} zc_slice_t;

typedef struct {
    zc_comm_h comm;
    zc_device_t *dev;
    const char *sendbuf;
    char *recvbuf;
    zc_slice_t *slices;
    int nslices;
    void **staging;        /* device allocations, freed after the last step */
    int nstaging;
} zc_routed_plan_t;

static zc_status_t zc_routed_stage(zc_routed_plan_t *rp, size_t bytes, void *stream, char **out)
{
    void *p;

    ZC_CHECK(zc_device_alloc(rp->dev, bytes, stream, &p));
    rp->staging[rp->nstaging++] = p;
    *out = p;
    return ZC_OK;
}

/* The slices this rank takes part in, with their staging. */
static zc_status_t zc_routed_plan(zc_routed_plan_t *rp, const zc_transfer_t *transfers,
                                  int ntransfers, size_t elem, int64_t min_routed, int64_t chunk,
                                  void *stream)
{
    zc_comm_h comm = rp->comm;
    int me = comm->rank, cap = ntransfers * (comm->nrails > 0 ? comm->nrails : 1);

    rp->slices = calloc((size_t)cap + 1, sizeof(*rp->slices));
    rp->staging = calloc(2 * (size_t)cap + 1, sizeof(void *));
    if (!rp->slices || !rp->staging)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate %d routed slices", cap);
    for (int x = 0; x < ntransfers; x++) {
        const zc_transfer_t *t = &transfers[x];
        size_t bytes = (size_t)t->count * elem;

        if (!zc_route_is_split(comm, t, bytes, min_routed)) /* also src == dst */
            continue;
        for (int k = 0; k < comm->nrails; k++) {
            zc_slice_t *s = &rp->slices[rp->nslices];
            int64_t off, len;

            zc_route_slice(t->count, comm->nrails, k, &off, &len);
            *s = (zc_slice_t){.t = t, .k = k, .off = (size_t)off * elem,
                              .len = (size_t)len * elem,
                              .chunk = zc_route_chunk(bytes, elem, chunk)};
            s->p = zc_route_proxy(comm, t, t->src, k);
            s->q = zc_route_proxy(comm, t, t->dst, k);
            if (len == 0 || (me != t->src && me != t->dst && me != s->p && me != s->q))
                continue;
            s->nchunks = (int)((s->len + s->chunk - 1) / s->chunk);
            if (me == s->p && s->p != t->src)
                ZC_CHECK(zc_routed_stage(rp, 2 * s->chunk, stream, &s->slots_p));
            if (me == s->q && s->q != t->dst)
                ZC_CHECK(zc_routed_stage(rp, 2 * s->chunk, stream, &s->slots_q));
            rp->nslices++;
        }
    }
    return ZC_OK;
}

/* Step `step` of slice `s`: dispatch of chunk step, wire of step-1,
 * combine of step-2, as far as this rank is involved. */
static void zc_routed_step(const zc_routed_plan_t *rp, const zc_slice_t *s, int step,
                           zc_group_t *g)
{
    const zc_transfer_t *t = s->t;
    int me = rp->comm->rank;

    for (int stage = 0; stage < 3; stage++) {
        int c = step - stage;
        if (c < 0 || c >= s->nchunks)
            continue;
        size_t at = s->off + (size_t)c * s->chunk;
        size_t n = s->len - (size_t)c * s->chunk < s->chunk ? s->len - (size_t)c * s->chunk
                                                            : s->chunk;
        const char *src_chunk = rp->sendbuf + at;
        char *dst_chunk = rp->recvbuf + at;
        char *slot_p = s->slots_p ? s->slots_p + (size_t)(c % 2) * s->chunk : NULL;
        char *slot_q = s->slots_q ? s->slots_q + (size_t)(c % 2) * s->chunk : NULL;

        if (stage == 0 && s->p != t->src) { /* dispatch: src -> p */
            if (me == t->src)
                zc_group_add(g, ZC_REQ_SEND, src_chunk, n, s->p);
            if (me == s->p)
                zc_group_add(g, ZC_REQ_RECV, slot_p, n, t->src);
        } else if (stage == 1) {            /* wire: p -> q */
            if (me == s->p)
                zc_group_add(g, ZC_REQ_SEND, s->p == t->src ? src_chunk : slot_p, n, s->q);
            if (me == s->q)
                zc_group_add(g, ZC_REQ_RECV, s->q == t->dst ? dst_chunk : slot_q, n, s->p);
        } else if (stage == 2 && s->q != t->dst) { /* combine: q -> dst */
            if (me == s->q)
                zc_group_add(g, ZC_REQ_SEND, slot_q, n, t->dst);
            if (me == t->dst)
                zc_group_add(g, ZC_REQ_RECV, dst_chunk, n, s->q);
        }
    }
}

/* Transfers that are not split: a device copy to itself, else direct. */
static zc_status_t zc_routed_direct(const zc_routed_plan_t *rp, const zc_transfer_t *transfers,
                                    int ntransfers, size_t elem, int64_t min_routed,
                                    void *stream, zc_group_t *g)
{
    zc_comm_h comm = rp->comm;
    int me = comm->rank;

    for (int x = 0; x < ntransfers; x++) {
        const zc_transfer_t *t = &transfers[x];
        size_t bytes = (size_t)t->count * elem;

        if (t->src == t->dst) {
            if (me == t->src)
                ZC_CHECK(zc_device_copy(rp->dev, rp->recvbuf, rp->sendbuf, bytes, stream));
        } else if (!zc_route_is_split(comm, t, bytes, min_routed)) {
            if (me == t->src)
                zc_group_add(g, ZC_REQ_SEND, rp->sendbuf, bytes, t->dst);
            if (me == t->dst)
                zc_group_add(g, ZC_REQ_RECV, rp->recvbuf, bytes, t->src);
        }
    }
    return ZC_OK;
}

zc_status_t zc_routed_sendrecv_stream(const zc_transfer_t *transfers, int ntransfers,
                                      const void *sendbuf, void *recvbuf, zc_datatype_t dtype,
                                      zc_comm_h comm, void *stream)
{
    zc_routed_plan_t rp = {.comm = comm, .sendbuf = sendbuf, .recvbuf = recvbuf};
    zc_group_t g = {0};
    int64_t min_routed, chunk;
    zc_device_t *dev;
    size_t elem;
    int steps = 0;
    zc_status_t st;

    zc_error_clear();
    ZC_CHECK(zc_route_check(transfers, ntransfers, sendbuf, recvbuf, dtype, comm));
    ZC_CHECK(zc_env_get_int("ZC_ROUTED_MIN_BYTES", &min_routed));
    ZC_CHECK(zc_env_get_int("ZC_ROUTED_CHUNK", &chunk));
    ZC_CHECK(zc_stream_begin(comm, sendbuf, "sendbuf", recvbuf, "recvbuf", &dev));
    rp.dev = dev;
    elem = zc_datatype_size(dtype);
    ZC_CHECK_GOTO(zc_routed_plan(&rp, transfers, ntransfers, elem, min_routed, chunk, stream),
                  st, out);
    /* Step 0 also carries every direct transfer. */
    ZC_CHECK_GOTO(zc_routed_direct(&rp, transfers, ntransfers, elem, min_routed, stream, &g), st,
                  out);
    for (int i = 0; i < rp.nslices; i++)
        steps = rp.slices[i].nchunks + 2 > steps ? rp.slices[i].nchunks + 2 : steps;
    for (int step = 0; step < (steps > 0 ? steps : 1); step++) {
        for (int i = 0; i < rp.nslices; i++)
            zc_routed_step(&rp, &rp.slices[i], step, &g);
        ZC_CHECK_GOTO(zc_group_flush(&g, dev, stream), st, out);
    }
    st = ZC_OK;
out:
    for (int i = 0; i < rp.nstaging; i++)
        zc_device_free(dev, rp.staging[i], stream);
    free(rp.staging);
    free(rp.slices);
    free(g.ops);
    return st;
}

/* ---- remap alltoallv ------------------------------------------------------ */

zc_status_t zc_remap_alltoallv_stream(const void *sendbuf, const int64_t *sendcounts,
                                      const int64_t *sdispls, void *recvbuf,
                                      const int64_t *recvcounts, const int64_t *rdispls,
                                      zc_datatype_t dtype, zc_comm_h comm, void *stream)
{
    size_t elem = zc_datatype_size(dtype);
    zc_group_t g = {0};
    zc_device_t *dev;
    int64_t check;
    int me;

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    ZC_ARG_CHECK(elem != 0, "dtype: %d is not a zc_datatype_t", (int)dtype);
    ZC_CHECK(zc_alltoallv_check_counts(sendcounts, sdispls, comm->size, elem, sendbuf,
                                       "sendcounts", "sdispls", "sendbuf"));
    ZC_CHECK(zc_alltoallv_check_counts(recvcounts, rdispls, comm->size, elem, recvbuf,
                                       "recvcounts", "rdispls", "recvbuf"));
    ZC_CHECK(zc_env_get_int("ZC_ALLTOALLV_CHECK", &check));
    ZC_CHECK(zc_stream_begin(comm, sendbuf, "sendbuf", recvbuf, "recvbuf", &dev));
    if (check)
        ZC_CHECK(zc_alltoallv_agree(comm, comm->coll_seq++, sendcounts, recvcounts, elem));
    me = comm->rank;
    ZC_CHECK(zc_device_copy(dev, (char *)recvbuf + rdispls[me] * elem,
                            (const char *)sendbuf + sdispls[me] * elem,
                            (size_t)recvcounts[me] * elem, stream));
    for (int r = 0; r < comm->size; r++) {
        if (r == me)
            continue;
        if (recvcounts[r] > 0)
            zc_group_add(&g, ZC_REQ_RECV, (char *)recvbuf + rdispls[r] * elem,
                         (size_t)recvcounts[r] * elem, r);
        if (sendcounts[r] > 0)
            zc_group_add(&g, ZC_REQ_SEND, (const char *)sendbuf + sdispls[r] * elem,
                         (size_t)sendcounts[r] * elem, r);
    }
    zc_status_t st = zc_group_flush(&g, dev, stream);
    free(g.ops);
    return st;
}
