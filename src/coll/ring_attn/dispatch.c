/* Where a kernel call of the engine runs (src/coll/ring_attn/compute.c
 * makes them: packed segments with global positions, in libzcomm's
 * zc_attn_args_t form, accumulating into the fp32 out/lse, dq and the
 * step's dK/dV): on libzcomm's kernels, the CPU's or the stream engine
 * device's (counted in the stats by where they ran), or on the caller's
 * kernel table (zc_attn_kernels(3)) as flash-attention varlen calls.
 *
 * Parts.  Every causal segment of an engine call is bottom-right aligned:
 * its lq queries see the first lk keys, query i the first i + 1 + (lk -
 * lq) (compute.c's blocks and slices).  A table with
 * ZC_ATTN_KERNELS_BOTTOM_RIGHT takes such a call as it is.  For any other,
 * a call with an offset lk - lq > 0 is split in two parts, one call each:
 * the keys before the offset, which every query sees (causal 0), and the
 * last lq keys, top-left with equal lengths (causal 1).  Each part is kept
 * in the built-in form too, the padding of its segments included, so that
 * a part the table refuses (ZC_ERR_UNSUPPORTED) runs on libzcomm's kernels
 * as it is.
 *
 * Compaction.  The table gets only the segments with queries and keys,
 * packed: rows that sit between them in the engine's buffers (rows of
 * other rounds, rows that see nothing) are gathered out into a staging
 * buffer, as are the lse rows (always: flash-attention's [heads, tokens]
 * layout); a side without such gaps is passed in place.  Its outputs go
 * to staging too and come back through the row maps: the forward's partial
 * output and lse merged into the accumulators (the stable merge of
 * ZC_ATTN_ACCUMULATE), the backward's dq, dk, dv added to them in fp32
 * (kernels/attn_rows.h), on the host or on the device's compute stream.
 *
 * Windows.  Blocks of a window that some row's window cuts on the left
 * (ZC_RA_WINDOW, compute.c) are beyond the table's contract: they run on
 * libzcomm's kernels, counted in stats table_banded; the other blocks of a
 * windowed or full call are causal or full and go to the table.
 *
 * Failure.  A table that returns an error (not ZC_ERR_UNSUPPORTED) makes
 * the rank skip every later kernel call of the call, but not its
 * transfers, so that no peer waits; at the end every rank learns, in one
 * agreement, the lowest failing rank and its status, and returns it. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_rows.h"
#include "src/common/abi.h"
#include "src/common/clock.h"
#include "src/core/agree.h"
#include "src/coll/ring_attn/ring_attn.h"
#include "src/coll/ring_attn/stream_engine.h"
#include "src/common/status.h"

#define ZC_RA_TABLE_ALIGN 256

zc_status_t zc_ra_table_read(const zc_ring_attn_args_t *a, int backward, zc_attn_kernels_t *t)
{
    static const zc_attn_kernels_t defaults = ZC_ATTN_KERNELS_INITIALIZER;
    const unsigned known = ZC_ATTN_KERNELS_BOTTOM_RIGHT | ZC_ATTN_KERNELS_FLOAT32_OUT;

    *t = defaults;
    if (!a->kernels)
        return ZC_OK;
    ZC_CHECK(zc_abi_read(t, sizeof(*t), sizeof(*t), a->kernels, a->kernels->size,
                         ZC_ATTN_KERNELS_SIZE_V1, "kernels", "ZC_ATTN_KERNELS_INITIALIZER"));
    t->size = sizeof(*t);
    ZC_ARG_CHECK((backward ? (void *)t->bwd : (void *)t->fwd) != NULL, "kernels->%s: NULL",
                 backward ? "bwd" : "fwd");
    ZC_ARG_CHECK((t->flags & ~known) == 0, "kernels->flags: unknown bits 0x%x",
                 t->flags & ~known);
    return ZC_OK;
}

/* ---- libzcomm's kernels ------------------------------------------------ */

/* Count where a block ran, and why not on cuDNN. */
static void zc_ra_count(zc_ring_attn_stats_t *st, zc_attn_route_t route)
{
    int64_t *why[ZC_ATTN_NROUTES] = {
        [ZC_ATTN_NATIVE_CHOSEN] = &st->native_chosen, [ZC_ATTN_NATIVE_DTYPE] = &st->native_dtype,
        [ZC_ATTN_NATIVE_HEAD_DIM] = &st->native_head_dim,
        [ZC_ATTN_NATIVE_SHAPE] = &st->native_shape,
        [ZC_ATTN_NATIVE_NO_ENGINE] = &st->native_no_engine,
        [ZC_ATTN_NATIVE_FAILED] = &st->native_failed};

    st->kernel_calls++;
    if (route == ZC_ATTN_ON_CUDNN) {
        st->blocks_cudnn++;
        return;
    }
    st->blocks_native++;
    if (route > 0 && route < ZC_ATTN_NROUTES)
        (*why[route])++;
}

static zc_status_t zc_ra_builtin(zc_ra_ctx_t *ctx, const zc_attn_args_t *a)
{
    zc_attn_route_t route = ZC_ATTN_NATIVE_CHOSEN;
    zc_status_t st;
    double t0 = zc_now_sec();

    if (ctx->ds)
        st = ctx->ds->attn(ctx->ds_dev, ctx->backward ? ZC_DS_BWD : ZC_DS_FWD, a, &route);
    else
        st = ctx->backward ? zc_attn_bwd(a) : zc_attn_fwd(a);
    ctx->stats.compute_seconds += zc_now_sec() - t0;
    zc_ra_count(&ctx->stats, route);
    return st;
}

/* ---- parts ------------------------------------------------------------ */

/* One part of an engine call, in the built-in form, with its arrays. */
typedef struct {
    zc_attn_args_t a;
    int32_t *mem;             /* cu_q, cu_kv [n + 1], q_start, kv_start [n] */
} zc_ra_part_t;

static int zc_ra_offset(const zc_attn_args_t *a, int b)
{
    return (a->q_start ? a->q_start[b] : 0) - (a->kv_start ? a->kv_start[b] : 0);
}

/* Does causal call `a` have a segment with queries, keys and an offset? */
static int zc_ra_has_offset(const zc_attn_args_t *a)
{
    for (int b = 0; b < a->batch; b++)
        if (a->cu_seqlens_q[b + 1] > a->cu_seqlens_q[b] &&
            a->cu_seqlens_kv[b + 1] > a->cu_seqlens_kv[b] && zc_ra_offset(a, b) != 0)
            return 1;
    return 0;
}

/* Part `which` of causal call `a`: 0 the keys before each segment's offset
 * (every query sees them: a call without causality), 1 the last lq keys
 * (top-left).  The other keys of a segment become a segment without
 * queries, so rows and keys keep their places. */
static zc_status_t zc_ra_split(const zc_attn_args_t *a, int which, zc_ra_part_t *p)
{
    int n = 0;
    int32_t *cu_q, *cu_kv, *qs, *ks;

    p->mem = malloc((size_t)(8 * a->batch + 2) * sizeof(int32_t));
    if (!p->mem)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot split a call of %d segments",
                        a->batch);
    cu_q = p->mem;
    cu_kv = cu_q + 2 * a->batch + 1;
    qs = cu_kv + 2 * a->batch + 1;
    ks = qs + 2 * a->batch;
    cu_q[0] = cu_kv[0] = 0;
    for (int b = 0; b < a->batch; b++) {
        int32_t lq = a->cu_seqlens_q[b + 1] - a->cu_seqlens_q[b];
        int32_t lk = a->cu_seqlens_kv[b + 1] - a->cu_seqlens_kv[b];
        int32_t d = lq > 0 && lk > 0 ? lk - lq : 0;
        /* this part's keys of the segment, after pad_before others */
        int32_t pad_before = which == 0 ? 0 : d, mine = which == 0 ? d : lk - d;

        if (lq > 0 && lk > 0 && (d < 0 || zc_ra_offset(a, b) != d)) {
            free(p->mem);
            return zc_error(ZC_ERR_INTERNAL, "ring attention: causal segment %d of a call (%d "
                            "queries, %d keys, offset %d) is not bottom-right aligned", b, lq,
                            lk, zc_ra_offset(a, b));
        }

        if (pad_before > 0) {
            cu_q[n + 1] = cu_q[n];
            cu_kv[n + 1] = cu_kv[n] + pad_before;
            qs[n] = ks[n] = 0;
            n++;
        }
        cu_q[n + 1] = cu_q[n] + lq;
        cu_kv[n + 1] = cu_kv[n] + mine;
        qs[n] = ks[n] = 0;
        n++;
        if (lk - pad_before - mine > 0) {
            cu_q[n + 1] = cu_q[n];
            cu_kv[n + 1] = cu_kv[n] + lk - pad_before - mine;
            qs[n] = ks[n] = 0;
            n++;
        }
    }
    p->a = *a;
    p->a.batch = n;
    p->a.cu_seqlens_q = cu_q;
    p->a.cu_seqlens_kv = cu_kv;
    p->a.q_start = qs;
    p->a.kv_start = ks;
    p->a.causal = which;
    return ZC_OK;
}

/* ---- compaction ------------------------------------------------------- */

/* The segments of a part with queries and keys, packed. */
typedef struct {
    int n;
    int32_t *cu_q, *cu_kv;    /* [n + 1] */
    int64_t *q_row, *kv_row;  /* [n]: rows of the part's q (out, dout, dq) and k (v, dk, dv) */
    int max_q, max_kv;
    int q_gaps, kv_gaps;      /* rows between the segments on that side */
} zc_ra_compact_t;

static void zc_ra_compact_free(zc_ra_compact_t *c)
{
    free(c->q_row); /* the arrays' one allocation */
    memset(c, 0, sizeof(*c));
}

static zc_status_t zc_ra_compact(const zc_attn_args_t *a, int bottom_right, zc_ra_compact_t *c)
{
    void *mem = malloc((size_t)(a->batch + 1) * (2 * sizeof(int32_t) + 2 * sizeof(int64_t)));

    memset(c, 0, sizeof(*c));
    if (!mem)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot pack a call of %d segments",
                        a->batch);
    c->q_row = mem;
    c->kv_row = c->q_row + a->batch + 1;
    c->cu_q = (int32_t *)(c->kv_row + a->batch + 1);
    c->cu_kv = c->cu_q + a->batch + 1;
    c->cu_q[0] = c->cu_kv[0] = 0;
    for (int b = 0; b < a->batch; b++) {
        int32_t q0 = a->cu_seqlens_q[b], lq = a->cu_seqlens_q[b + 1] - q0;
        int32_t k0 = a->cu_seqlens_kv[b], lk = a->cu_seqlens_kv[b + 1] - k0;
        int n = c->n;

        if (lq == 0 || lk == 0)
            continue;
        if (a->causal && (zc_ra_offset(a, b) != lk - lq || lk < lq ||
                          (lk > lq && !bottom_right))) {
            zc_ra_compact_free(c);
            return zc_error(ZC_ERR_INTERNAL, "ring attention: causal segment %d of a call "
                            "(%d queries from position %d, %d keys from %d) is not %s", b, lq,
                            a->q_start ? a->q_start[b] : 0, lk, a->kv_start ? a->kv_start[b] : 0,
                            bottom_right ? "bottom-right aligned" : "top-left with equal lengths");
        }
        if (n > 0) {
            c->q_gaps |= q0 != c->q_row[n - 1] + (c->cu_q[n] - c->cu_q[n - 1]);
            c->kv_gaps |= k0 != c->kv_row[n - 1] + (c->cu_kv[n] - c->cu_kv[n - 1]);
        }
        c->q_row[n] = q0;
        c->kv_row[n] = k0;
        c->cu_q[n + 1] = c->cu_q[n] + lq;
        c->cu_kv[n + 1] = c->cu_kv[n] + lk;
        c->max_q = lq > c->max_q ? lq : c->max_q;
        c->max_kv = lk > c->max_kv ? lk : c->max_kv;
        c->n++;
    }
    return ZC_OK;
}

/* ---- one table call --------------------------------------------------- */

static zc_status_t zc_ra_rows(zc_ra_ctx_t *ctx, const zc_attn_rows_t *r)
{
    return ctx->ds ? ctx->ds->rows(ctx->ds_dev, r) : zc_attn_rows(r);
}

/* Staging for one call: host memory kept in ctx, or device memory of the
 * stream engine, freed once the compute stream is past its last use. */
static zc_status_t zc_ra_staging(zc_ra_ctx_t *ctx, size_t bytes, char **buf)
{
    void *p;

    if (ctx->ds) {
        ZC_CHECK(ctx->ds->alloc(ctx->ds_dev, bytes ? bytes : 1, &p));
        *buf = p;
        return ZC_OK;
    }
    if (bytes > ctx->table.host_bytes) {
        free(ctx->table.host);
        ctx->table.host_bytes = 0;
        ctx->table.host = malloc(bytes);
        if (!ctx->table.host)
            return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate %zu bytes of "
                            "kernel table staging", bytes);
        ctx->table.host_bytes = bytes;
    }
    *buf = ctx->table.host;
    return ZC_OK;
}

static size_t zc_ra_take(size_t *off, size_t bytes)
{
    size_t at = *off;

    *off += (bytes + ZC_RA_TABLE_ALIGN - 1) / ZC_RA_TABLE_ALIGN * ZC_RA_TABLE_ALIGN;
    return at;
}

/* Rows of `side` (q or kv) of tensor `t` (row_bytes per row) as the call
 * sees them: in place when that side has no gaps, else gathered into
 * staging at `at`. */
static zc_status_t zc_ra_input(zc_ra_ctx_t *ctx, const zc_ra_compact_t *c, int kv_side,
                               const void *t, size_t row_bytes, char *at, const void **in)
{
    const int32_t *cu = kv_side ? c->cu_kv : c->cu_q;
    const int64_t *row = kv_side ? c->kv_row : c->q_row;

    if (!(kv_side ? c->kv_gaps : c->q_gaps)) {
        *in = (const char *)t + (size_t)row[0] * row_bytes;
        return ZC_OK;
    }
    *in = at;
    return zc_ra_rows(ctx, &(zc_attn_rows_t){.op = ZC_ROWS_GATHER, .nseg = c->n, .cu = cu,
                                             .row = row, .row_bytes = row_bytes, .src = t,
                                             .dst = at});
}

static const char *zc_ra_table_pass(const zc_ra_ctx_t *ctx)
{
    return ctx->backward ? "kernels->bwd" : "kernels->fwd";
}

/* The table's status: ZC_OK, *refused for ZC_ERR_UNSUPPORTED, or the
 * failure kept in ctx (the call goes on, computing nothing more). */
static void zc_ra_table_status(zc_ra_ctx_t *ctx, zc_status_t st, const zc_attn_varlen_t *call,
                               int *refused)
{
    if (st == ZC_OK)
        return;
    if (st == ZC_ERR_UNSUPPORTED) {
        *refused = 1;
        return;
    }
    ctx->table.failed = st < 0 ? st : ZC_ERR_INVALID_ARG;
    snprintf(ctx->table.why, sizeof(ctx->table.why), "%s: returned %s%s on a call of %d "
             "segments (%lld query rows, %lld keys, causal %d)", zc_ra_table_pass(ctx),
             st < 0 ? zc_strerror(st) : "a status that is not an error",
             st < 0 ? "" : " (expected ZC_OK, ZC_ERR_UNSUPPORTED or an error)", call->batch,
             (long long)call->total_q, (long long)call->total_kv, call->causal);
    zc_error_clear(); /* the table may have left one of ours behind */
}

static zc_status_t zc_ra_table_run(zc_ra_ctx_t *ctx, const zc_attn_args_t *a,
                                   const zc_ra_compact_t *c, int *refused)
{
    const zc_ring_attn_args_t *args = ctx->args;
    zc_datatype_t odt = ctx->table.kernels.flags & ZC_ATTN_KERNELS_FLOAT32_OUT ? ZC_FLOAT32
                                                                               : args->dtype;
    size_t es = ctx->elem, os = zc_datatype_size(odt);
    size_t qrow = (size_t)ctx->row_q * es, krow = (size_t)ctx->row_kv * es;
    size_t oqrow = (size_t)ctx->row_q * os, okrow = (size_t)ctx->row_kv * os;
    int64_t T = c->cu_q[c->n], Tk = c->cu_kv[c->n];
    int hq = args->num_heads_q;
    size_t off = 0, o_q, o_k, o_v, o_out, o_lse, o_dout = 0, o_dq = 0, o_dk = 0, o_dv = 0;
    zc_attn_varlen_t call = {.size = sizeof(call), .batch = c->n, .num_heads_q = hq,
                             .num_heads_kv = args->num_heads_kv, .head_dim = args->head_dim,
                             .causal = a->causal != 0, .scale = a->scale, .dtype = args->dtype,
                             .out_dtype = odt, .memtype = args->memtype,
                             .cu_seqlens_q = c->cu_q, .cu_seqlens_kv = c->cu_kv,
                             .host_cu_seqlens_q = c->cu_q, .host_cu_seqlens_kv = c->cu_kv,
                             .max_seqlen_q = c->max_q, .max_seqlen_kv = c->max_kv,
                             .total_q = T, .total_kv = Tk};
    zc_attn_rows_t q_rows = {.nseg = c->n, .cu = c->cu_q, .row = c->q_row, .heads = hq,
                             .head_dim = args->head_dim, .dtype = odt};
    zc_attn_rows_t kv_rows = {.op = ZC_ROWS_ADD, .nseg = c->n, .cu = c->cu_kv, .row = c->kv_row,
                              .row_elems = ctx->row_kv, .dtype = odt};
    zc_status_t st;
    char *buf = NULL;

    o_q = zc_ra_take(&off, c->q_gaps ? (size_t)T * qrow : 0);
    o_k = zc_ra_take(&off, c->kv_gaps ? (size_t)Tk * krow : 0);
    o_v = zc_ra_take(&off, c->kv_gaps ? (size_t)Tk * krow : 0);
    o_lse = zc_ra_take(&off, (size_t)T * hq * sizeof(float));
    if (!ctx->backward) {
        o_out = zc_ra_take(&off, (size_t)T * oqrow);
    } else {
        o_out = zc_ra_take(&off, c->q_gaps ? (size_t)T * qrow : 0);
        o_dout = zc_ra_take(&off, c->q_gaps ? (size_t)T * qrow : 0);
        o_dq = zc_ra_take(&off, (size_t)T * oqrow);
        o_dk = zc_ra_take(&off, (size_t)Tk * okrow);
        o_dv = zc_ra_take(&off, (size_t)Tk * okrow);
    }
    ZC_CHECK(zc_ra_staging(ctx, off, &buf));
    ZC_CHECK_GOTO(zc_ra_input(ctx, c, 0, a->q, qrow, buf + o_q, &call.q), st, out);
    ZC_CHECK_GOTO(zc_ra_input(ctx, c, 1, a->k, krow, buf + o_k, &call.k), st, out);
    ZC_CHECK_GOTO(zc_ra_input(ctx, c, 1, a->v, krow, buf + o_v, &call.v), st, out);
    call.lse = (float *)(buf + o_lse);
    if (!ctx->backward) {
        call.out = buf + o_out;
    } else {
        const void *out_in;

        ZC_CHECK_GOTO(zc_ra_input(ctx, c, 0, a->out, qrow, buf + o_out, &out_in), st, out);
        ZC_CHECK_GOTO(zc_ra_input(ctx, c, 0, a->dout, qrow, buf + o_dout, &call.dout), st, out);
        call.out = (void *)out_in;
        q_rows.op = ZC_ROWS_GATHER_LSE;
        q_rows.src = a->lse;
        q_rows.dst = call.lse;
        ZC_CHECK_GOTO(zc_ra_rows(ctx, &q_rows), st, out);
        call.dq = buf + o_dq;
        call.dk = buf + o_dk;
        call.dv = buf + o_dv;
    }
    if (ctx->ds)
        st = ctx->ds->kernels(ctx->ds_dev, ctx->backward, &ctx->table.kernels, &call);
    else
        st = (ctx->backward ? ctx->table.kernels.bwd
                            : ctx->table.kernels.fwd)(ctx->table.kernels.ctx, &call);
    zc_ra_table_status(ctx, st, &call, refused);
    st = ZC_OK;
    if (*refused || ctx->table.failed != ZC_OK)
        goto out;
    if (!ctx->backward) {
        q_rows.op = ZC_ROWS_MERGE;
        q_rows.src = call.out;
        q_rows.src_lse = call.lse;
        q_rows.dst = a->out;
        q_rows.dst_lse = a->lse;
        st = zc_ra_rows(ctx, &q_rows);
        goto out;
    }
    q_rows = (zc_attn_rows_t){.op = ZC_ROWS_ADD, .nseg = c->n, .cu = c->cu_q, .row = c->q_row,
                              .row_elems = ctx->row_q, .dtype = odt, .src = call.dq,
                              .dst = a->dq};
    ZC_CHECK_GOTO(zc_ra_rows(ctx, &q_rows), st, out);
    kv_rows.src = call.dk;
    kv_rows.dst = a->dk;
    ZC_CHECK_GOTO(zc_ra_rows(ctx, &kv_rows), st, out);
    kv_rows.src = call.dv;
    kv_rows.dst = a->dv;
    st = zc_ra_rows(ctx, &kv_rows);
out:
    if (ctx->ds)
        ctx->ds->free(ctx->ds_dev, buf);
    return st;
}

/* One part: the table, or libzcomm's kernels where the table refuses it. */
static zc_status_t zc_ra_table_part(zc_ra_ctx_t *ctx, const zc_attn_args_t *a)
{
    zc_ra_compact_t c;
    zc_status_t st;
    int refused = 0;
    double t0;

    ZC_CHECK(zc_ra_compact(a, ctx->table.kernels.flags & ZC_ATTN_KERNELS_BOTTOM_RIGHT, &c));
    if (c.n == 0) {
        zc_ra_compact_free(&c);
        return ZC_OK;
    }
    t0 = zc_now_sec();
    st = zc_ra_table_run(ctx, a, &c, &refused);
    ctx->stats.compute_seconds += zc_now_sec() - t0;
    zc_ra_compact_free(&c);
    ZC_CHECK(st);
    if (refused) {
        ctx->stats.table_refused++;
        return zc_ra_builtin(ctx, a);
    }
    if (ctx->table.failed == ZC_OK) {
        ctx->stats.kernel_calls++;
        ctx->stats.blocks_table++;
    }
    return ZC_OK;
}

zc_status_t zc_ra_dispatch(zc_ra_ctx_t *ctx, const zc_attn_args_t *a)
{
    zc_ra_part_t part;
    zc_status_t st = ZC_OK;

    if (!ctx->table.on)
        return zc_ra_builtin(ctx, a);
    if (ctx->table.failed != ZC_OK)
        return ZC_OK; /* a table failed: compute nothing more, move everything */
    if (a->flags & ZC_ATTN_WINDOW) {
        /* banded (compute.c): beyond flash-attention's causal or full */
        ctx->stats.table_banded++;
        return zc_ra_builtin(ctx, a);
    }
    if (!a->causal || (ctx->table.kernels.flags & ZC_ATTN_KERNELS_BOTTOM_RIGHT) ||
        !zc_ra_has_offset(a))
        return zc_ra_table_part(ctx, a);
    for (int which = 0; which < 2 && st == ZC_OK && ctx->table.failed == ZC_OK; which++) {
        ZC_CHECK(zc_ra_split(a, which, &part));
        st = zc_ra_table_part(ctx, &part.a);
        free(part.mem);
    }
    return st;
}

/* ---- the verdict -------------------------------------------------------- */

static uint64_t zc_ra_verdict_tag(const void *ctx, int sender, int round)
{
    return zc_ra_tag(ctx, sender, ZC_RA_KIND_VERDICT, round, 0);
}

zc_status_t zc_ra_table_verdict(zc_ra_ctx_t *ctx)
{
    zc_agree_range_t range;
    uint64_t mine = UINT64_MAX;
    int rank;
    zc_status_t failed;

    if (!ctx->table.on)
        return ZC_OK;
    if (ctx->table.failed != ZC_OK)
        mine = (uint64_t)ctx->comm->rank << 32 | (uint32_t)-ctx->table.failed;
    ZC_CHECK(zc_agree(ctx->comm, mine, zc_ra_verdict_tag, ctx, ctx->seq, &range));
    if (range.lo == UINT64_MAX)
        return ZC_OK;
    rank = (int)(range.lo >> 32);
    failed = -(zc_status_t)(range.lo & 0xffffffffu);
    ctx->table.verdict = failed;
    if (rank == ctx->comm->rank)
        return zc_error(failed, "%s", ctx->table.why);
    return zc_error(failed, "kernels: the kernel table of rank %d failed (%s); the call failed "
                    "on every rank", rank, zc_strerror(failed));
}
