/* zc_routed_sendrecv: one inter-node transfer spread over every rail.
 *
 * Slice k of a transfer from rank s (node A) to rank d (node B) goes
 *   s --shm--> p_k --rail k--> q_k --shm--> d
 * where p_k and q_k are the ranks of A and B that sit on rail k (s itself
 * or d itself when they do: then that hop disappears).  Slice k's share of
 * the transfer is rail k's weight (src/core/rail_rates.h: its rate, 0 when
 * out).  Every slice moves in chunks, so dispatch, wire and combine of
 * different chunks overlap; the wire hop is a striped transfer
 * (src/core/wire.c): acknowledged chunk by chunk, and sent again on the
 * other rails if rail k goes out mid-call, each chunk taken once.  Every
 * rank computes the same routes from the same transfer list and the same
 * weights, so nobody needs to be told; the schedule first checks that the
 * lists are the same and settles the weights (agree.h), and builds its data
 * ops only once every rank knows they are. */
#include "config.h"

#include <string.h>

#include "src/core/agree.h"
#include "src/core/comm.h"
#include "src/common/hash.h"
#include "src/core/memtype.h"
#include "src/coll/routed/route.h"
#include "src/core/sched.h"
#include "src/common/status.h"

/* Tag layout below the class: stage, call sequence, rail, chunk, transfer. */
enum { ZC_ROUTED_DIRECT, ZC_ROUTED_DISPATCH, ZC_ROUTED_WIRE, ZC_ROUTED_COMBINE };
#define ZC_ROUTED_CHUNK_SHIFT 12
#define ZC_ROUTED_CHUNK_BITS 10
/* A wire hop's acknowledgements: stage DIRECT with a chunk number no
 * direct transfer (0) or agreement round (1 + round) uses. */
#define ZC_ROUTED_ACK_CHUNK 1023

static uint64_t zc_routed_tag(int sender, int stage, unsigned seq, int rail, int chunk, int xfer)
{
    uint32_t low = (uint32_t)stage << 30 | (seq & 15u) << 26 | (uint32_t)rail << 22 |
                   (uint32_t)chunk << 12 | (uint32_t)xfer;
    return ZC_TAG(sender, ZC_TAG_CLASS_ROUTED, low);
}

/* The agreement's messages: stage DIRECT with chunk 1 + round, which no
 * direct transfer uses (they are all chunk 0). */
static uint64_t zc_routed_agree_tag(const void *seq, int sender, int round)
{
    return zc_routed_tag(sender, ZC_ROUTED_DIRECT, *(const unsigned *)seq, 0, 1 + round, 0);
}

typedef struct {
    zc_comm_h comm;
    zc_sched_t *sched;
    int gate;              /* op every data op waits for: the verdict, or NONE */
    unsigned seq;
    size_t elem;
    size_t chunk;          /* bytes per chunk, a multiple of elem */
    int64_t min_routed;    /* bytes below which a transfer goes direct */
    int64_t chunk_setting; /* ZC_ROUTED_CHUNK */
    uint32_t weights[ZC_MAX_RAILS]; /* the rails' shares of every split transfer */
    /* The call's arguments (the list copied: the data ops may be built
     * after the call returned, once the agreement is in). */
    const zc_transfer_t *transfers;
    int ntransfers;
    const char *sendbuf;
    char *recvbuf;
    zc_agree_range_t *range; /* the agreement's outcome, or NULL */
} zc_routed_ctx_t;

/* What this rank does for slice `k` of transfer `x`: bytes [off, off+len).
 * The wire hop p -> q is a striped transfer (src/core/wire.c) whose home
 * is rail k: its chunks go there while it is not out, on the other rails
 * when it is (or while it lags far behind its weight, unless the weights
 * are pinned or equal); p stages each chunk the source dispatched to it, q
 * hands each on to the destination as it arrives (or is itself the
 * destination). */
static void zc_routed_slice(zc_routed_ctx_t *ctx, int x, const zc_transfer_t *t, int k,
                            size_t off, size_t len, const char *sendbuf, char *recvbuf)
{
    zc_comm_h comm = ctx->comm;
    zc_sched_t *s = ctx->sched;
    int me = comm->rank;
    int p = zc_route_proxy(comm, t, t->src, k), q = zc_route_proxy(comm, t, t->dst, k);
    size_t chunk = ctx->chunk;
    int nchunks = (int)((len + chunk - 1) / chunk);
    zc_wire_spec_t wire = {
        .bytes = len, .chunk = chunk, .chunk_shift = ZC_ROUTED_CHUNK_SHIFT,
        .chunk_bits = ZC_ROUTED_CHUNK_BITS, .seq = ctx->seq, .id = (uint32_t)x << 8 | (uint32_t)k,
        .home = k, .tag = zc_routed_tag(p, ZC_ROUTED_WIRE, ctx->seq, k, 0, x),
        /* (both ends: the weights are the call's, the mode is agreed) */
        .home_kbps = zc_rail_adaptive(comm) ? ctx->weights[k] : 0,
        .ack_tag = zc_routed_tag(q, ZC_ROUTED_DIRECT, ctx->seq, k, ZC_ROUTED_ACK_CHUNK, x),
    };

    if (me != t->src && me != t->dst && me != p && me != q)
        return;
    for (int c = 0; c < nchunks; c++) {
        size_t coff = off + (size_t)c * chunk;
        size_t clen = len - (size_t)c * chunk < chunk ? len - (size_t)c * chunk : chunk;

        /* dispatch: s -> p over shared memory */
        if (me == t->src && p != t->src)
            zc_sched_p2p(s, ZC_REQ_SEND, (char *)sendbuf + coff, clen, p,
                         zc_routed_tag(me, ZC_ROUTED_DISPATCH, ctx->seq, k, c, x), ZC_RAIL_AUTO,
                         ZC_SCHED_NONE, ctx->gate);
        /* combine: q -> d over shared memory */
        if (me == t->dst && q != t->dst)
            zc_sched_p2p(s, ZC_REQ_RECV, recvbuf + coff, clen, q,
                         zc_routed_tag(q, ZC_ROUTED_COMBINE, ctx->seq, k, c, x), ZC_RAIL_AUTO,
                         ZC_SCHED_NONE, ctx->gate);
    }
    if (me == p) {
        wire.peer = q;
        wire.src = p == t->src ? sendbuf + off : NULL;
        wire.fill_peer = t->src;
        wire.fill_tag = zc_routed_tag(t->src, ZC_ROUTED_DISPATCH, ctx->seq, k, 0, x);
        zc_sched_wire(s, &wire, 1, ctx->gate, ZC_SCHED_NONE);
    }
    if (me == q) {
        wire.peer = p;
        wire.dst = q == t->dst ? recvbuf + off : NULL;
        wire.drain_peer = t->dst;
        wire.drain_tag = zc_routed_tag(q, ZC_ROUTED_COMBINE, ctx->seq, k, 0, x);
        zc_sched_wire(s, &wire, 0, ctx->gate, ZC_SCHED_NONE);
    }
}

/* Transfer `x`: direct, or one slice per rail. */
static void zc_routed_transfer(zc_routed_ctx_t *ctx, int x, const zc_transfer_t *t,
                               const char *sendbuf, char *recvbuf)
{
    zc_comm_h comm = ctx->comm;
    int me = comm->rank, nrails = comm->nrails;
    size_t bytes = (size_t)t->count * ctx->elem;

    if (t->src == t->dst) {
        if (me == t->src)
            zc_sched_copy(ctx->sched, recvbuf, sendbuf, bytes, ZC_SCHED_NONE, ctx->gate);
        return;
    }
    if (!zc_route_is_split(comm, t, bytes, ctx->min_routed)) {
        if (me == t->src)
            zc_sched_p2p(ctx->sched, ZC_REQ_SEND, (void *)sendbuf, bytes, t->dst,
                         zc_routed_tag(me, ZC_ROUTED_DIRECT, ctx->seq, 0, 0, x), ZC_RAIL_AUTO,
                         ZC_SCHED_NONE, ctx->gate);
        if (me == t->dst)
            zc_sched_p2p(ctx->sched, ZC_REQ_RECV, recvbuf, bytes, t->src,
                         zc_routed_tag(t->src, ZC_ROUTED_DIRECT, ctx->seq, 0, 0, x),
                         ZC_RAIL_AUTO, ZC_SCHED_NONE, ctx->gate);
        return;
    }
    for (int k = 0; k < nrails; k++) {
        int64_t off, len;
        zc_route_slice(t->count, nrails, ctx->weights, k, &off, &len);
        if (len)
            zc_routed_slice(ctx, x, t, k, (size_t)off * ctx->elem, (size_t)len * ctx->elem,
                            sendbuf, recvbuf);
    }
}

static zc_status_t zc_routed_check(const zc_transfer_t *transfers, int ntransfers,
                                   const void *sendbuf, void *recvbuf, zc_datatype_t dtype,
                                   zc_memtype_t memtype, zc_comm_h comm, zc_request_h *request,
                                   int64_t *min_routed, int64_t *chunk)
{
    ZC_ARG_CHECK(request != NULL, "request: is NULL");
    ZC_CHECK(zc_route_check(transfers, ntransfers, sendbuf, recvbuf, dtype, comm));
    ZC_CHECK(zc_memtype_check_host_path(sendbuf, memtype, "sendbuf"));
    ZC_CHECK(zc_memtype_check_host_path(recvbuf, memtype, "recvbuf"));
    /* the communicator's copy, parsed at its creation and the same on every rank */
    *min_routed = comm->settings.routed_min_bytes;
    *chunk = comm->settings.routed_chunk;
    return ZC_OK;
}

/* What every rank must have alike: the list, the dtype and the settings
 * that shape routes, chunks and tags. */
static uint64_t zc_routed_fingerprint(const zc_transfer_t *transfers, int ntransfers,
                                      zc_datatype_t dtype, int64_t min_routed, int64_t chunk)
{
    int64_t head[4] = {ntransfers, (int64_t)dtype, min_routed, chunk};
    uint64_t h = zc_fnv1a(ZC_FNV1A_INIT, head, sizeof(head));

    for (int x = 0; x < ntransfers; x++) {
        int64_t t[3] = {transfers[x].src, transfers[x].dst, transfers[x].count};
        h = zc_fnv1a(h, t, sizeof(t));
    }
    return h | 1;  /* 0 is a rank that refused its arguments (agree.h) */
}

/* The host path's: the list's, and what the rails' weights depend on. */
static uint64_t zc_routed_host_fingerprint(zc_routed_ctx_t *ctx, zc_datatype_t dtype)
{
    return zc_rail_fingerprint(ctx->comm, zc_routed_fingerprint(ctx->transfers, ctx->ntransfers,
                                                                dtype, ctx->min_routed,
                                                                ctx->chunk_setting)) | 1;
}

/* Runs once the agreement is done, before any data op. */
static zc_status_t zc_routed_verdict(void *arg, int unused)
{
    const zc_agree_range_t *r = arg;

    (void)unused;
    if (r->lo == r->hi)
        return ZC_OK;
    if (r->lo == 0)
        return zc_error(ZC_ERR_MISMATCH,
                        "transfers: rank %lld refused its own arguments to this call; no data "
                        "moved", (long long)r->lo_rank);
    return zc_error(ZC_ERR_MISMATCH,
                    "transfers: ranks %lld and %lld passed different transfer lists (or dtypes, "
                    "ZC_ROUTED_MIN_BYTES, ZC_ROUTED_CHUNK, ZC_RAIL_STRIPE or rail rates pinned "
                    "with zc_comm_set_rail_rates); no data moved",
                    (long long)r->lo_rank, (long long)r->hi_rank);
}

/* The data ops of every transfer, sliced by ctx->weights. */
static void zc_routed_build(zc_routed_ctx_t *ctx)
{
    for (int x = 0; x < ctx->ntransfers; x++) {
        const zc_transfer_t *t = &ctx->transfers[x];
        /* Chunks of whole elements, few enough for the tag's chunk field. */
        ctx->chunk = zc_route_chunk((size_t)t->count * ctx->elem, ctx->elem, ctx->chunk_setting);
        zc_routed_transfer(ctx, x, t, ctx->sendbuf, ctx->recvbuf);
    }
}

/* Runs once the agreement is in, before any data op: the verdict, then
 * the data ops, sliced by the rails' weights the agreement settled. */
static zc_status_t zc_routed_agreed(void *arg, int unused)
{
    zc_routed_ctx_t *ctx = arg;

    ZC_CHECK(zc_routed_verdict(ctx->range, unused));
    zc_rail_weights(ctx->comm, &ctx->range->rails, ctx->weights);
    ctx->gate = ZC_SCHED_NONE;  /* the data ops come after this op */
    zc_routed_build(ctx);
    return ZC_OK;
}

zc_status_t zc_routed_agree(zc_comm_h comm, zc_status_t local, const zc_transfer_t *transfers,
                            int ntransfers, zc_datatype_t dtype)
{
    unsigned seq = comm->coll_seq++;
    zc_agree_range_t range;

    if (local != ZC_OK)
        return zc_agree_refuse(comm, local, zc_routed_agree_tag, &seq, seq);
    ZC_CHECK(zc_agree(comm,
                      zc_routed_fingerprint(transfers, ntransfers, dtype,
                                            comm->settings.routed_min_bytes,
                                            comm->settings.routed_chunk),
                      zc_routed_agree_tag, &seq, seq, &range));
    return zc_routed_verdict(&range, 0);
}

zc_status_t zc_routed_post(const zc_transfer_t *transfers, int ntransfers, const void *sendbuf,
                           void *recvbuf, zc_datatype_t dtype, zc_memtype_t memtype,
                           zc_comm_h comm, const uint32_t *weights, zc_request_h *request)
{
    zc_routed_ctx_t local = {.comm = comm, .gate = ZC_SCHED_NONE}, *ctx = &local;
    zc_sched_t *s;
    zc_status_t st;

    ZC_CHECK(zc_comm_check(comm));
    local.seq = comm->coll_seq++;
    st = zc_routed_check(transfers, ntransfers, sendbuf, recvbuf, dtype, memtype, comm, request,
                         &local.min_routed, &local.chunk_setting);
    if (st != ZC_OK)
        return !weights ? zc_agree_refuse(comm, st, zc_routed_agree_tag, &local.seq, local.seq)
                        : st;
    local.elem = zc_datatype_size(dtype);
    local.transfers = transfers;
    local.ntransfers = ntransfers;
    local.sendbuf = sendbuf;
    local.recvbuf = recvbuf;
    ZC_CHECK(zc_sched_create(comm, &s));
    zc_sched_set_call(s, local.seq);
    local.sched = s;
    if (weights) {
        memcpy(local.weights, weights, sizeof(local.weights));
        zc_routed_build(&local);
        return zc_sched_start(s, request);
    }
    /* The context and the list live in the schedule until its data ops
     * are built, once the agreement is in. */
    ctx = zc_sched_buffer(s, sizeof(*ctx));
    zc_transfer_t *list = zc_sched_buffer(s, sizeof(*list) * (size_t)(ntransfers ? ntransfers : 1));
    if (ctx && list) {
        *ctx = local;
        memcpy(list, transfers, sizeof(*list) * (size_t)ntransfers);
        ctx->transfers = list;
        int agreed = zc_agree_sched(s, comm, zc_routed_host_fingerprint(ctx, dtype),
                                    zc_routed_agree_tag, &ctx->seq, &ctx->range);
        if (ctx->range)
            zc_sched_call(s, zc_routed_agreed, ctx, 0, agreed, ZC_SCHED_NONE);
    }
    return zc_sched_start(s, request);
}

zc_status_t zc_routed_sendrecv(const zc_transfer_t *transfers, int ntransfers, const void *sendbuf,
                               void *recvbuf, zc_datatype_t dtype, zc_memtype_t memtype,
                               zc_comm_h comm, zc_request_h *request)
{
    zc_error_clear();
    return zc_routed_post(transfers, ntransfers, sendbuf, recvbuf, dtype, memtype, comm, NULL,
                          request);
}
