/* zc_routed_sendrecv_stream: the routed transfer of device memory, as
 * groups of NCCL sends and receives enqueued on the caller's CUDA stream
 * (src/core/device.h).
 *
 * The routed transfer keeps the routes of the host path (src/coll/routed/route.h):
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

#include "src/coll/routed/route.h"
#include "src/common/status.h"
#include "src/core/device.h"

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

            zc_route_slice(t->count, comm->nrails, NULL, k, &off, &len);
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

zc_status_t zc_routed_stream_post(const zc_transfer_t *transfers, int ntransfers,
                                  const void *sendbuf, void *recvbuf, zc_datatype_t dtype,
                                  zc_comm_h comm, void *stream, int agree)
{
    zc_routed_plan_t rp = {.comm = comm, .sendbuf = sendbuf, .recvbuf = recvbuf};
    zc_group_t g = {0};
    int64_t min_routed, chunk;
    zc_device_t *dev;
    size_t elem;
    int steps = 0;
    zc_status_t st;

    ZC_CHECK(zc_comm_check(comm));
    /* NCCL hangs on sends and receives that do not pair up: the ranks
     * first agree on the list over the host path (a rank that refuses its
     * own arguments takes part as a refusal, so nobody waits for it). */
    st = zc_route_check(transfers, ntransfers, sendbuf, recvbuf, dtype, comm);
    if (st == ZC_OK)
        st = zc_stream_begin(comm, sendbuf, "sendbuf", recvbuf, "recvbuf", &dev);
    ZC_CHECK(agree ? zc_routed_agree(comm, st, transfers, ntransfers, dtype) : st);
    min_routed = comm->settings.routed_min_bytes;
    chunk = comm->settings.routed_chunk;
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

zc_status_t zc_routed_sendrecv_stream(const zc_transfer_t *transfers, int ntransfers,
                                      const void *sendbuf, void *recvbuf, zc_datatype_t dtype,
                                      zc_comm_h comm, void *stream)
{
    zc_error_clear();
    return zc_routed_stream_post(transfers, ntransfers, sendbuf, recvbuf, dtype, comm, stream, 1);
}
