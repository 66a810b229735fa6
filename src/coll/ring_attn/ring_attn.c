/* zc_ring_attn_fwd / zc_ring_attn_bwd: the attention engine of the
 * zeppelin paper (section 3.2) on a plan's zone queues.
 *
 * A call checks its arguments, agrees with every rank on the plan and the
 * attention shape (a fingerprint's minimum and maximum over all ranks; a
 * rank whose own arguments were refused takes part with a poisoned one, so
 * that nobody waits for it), builds the ring groups, and runs them in the
 * order inter-node -> intra-node (src/coll/ring_attn/ring.c, or src/coll/ring_attn/gather.c in
 * LLaMA CP mode), then the local sequences with no communication, then
 * finishes the routed calls it forwards for.  A backward call may run in
 * the paper's reverse order instead (Fig. 12c: local -> intra-node ->
 * inter-node; ZC_RING_ATTN_BWD_ORDER), which every rank must agree on: it
 * is part of the fingerprint.  out (forward) and dq
 * (backward) accumulate in fp32 over this rank's rows and are rounded to
 * the caller's dtype once at the end. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/abi.h"
#include "src/core/agree.h"
#include "src/common/clock.h"
#include "src/common/hash.h"
#include "kernels/attn_check.h"
#include "kernels/attn_math.h"
#include "src/core/memtype.h"
#include "src/plan/plan.h"
#include "src/coll/ring_attn/ring_attn.h"
#include "src/coll/ring_attn/stream_engine.h"
#include "src/common/status.h"

/* ---- argument checks ------------------------------------------------------ */

static zc_status_t zc_ra_check_buffers(const zc_ring_attn_args_t *a, int backward)
{
    ZC_ARG_CHECK(a->q != NULL, "q: NULL");
    ZC_ARG_CHECK(a->k != NULL, "k: NULL");
    ZC_ARG_CHECK(a->v != NULL, "v: NULL");
    ZC_ARG_CHECK(a->out != NULL, "out: NULL");
    ZC_ARG_CHECK(a->lse != NULL, "lse: NULL");
    if (!backward)
        return ZC_OK;
    ZC_ARG_CHECK(a->dout != NULL, "dout: NULL");
    ZC_ARG_CHECK(a->dq != NULL, "dq: NULL");
    ZC_ARG_CHECK(a->dk != NULL, "dk: NULL");
    ZC_ARG_CHECK(a->dv != NULL, "dv: NULL");
    return ZC_OK;
}

zc_status_t zc_ra_check_tensors(const zc_ring_attn_args_t *a, int backward,
                                zc_status_t (*check)(const void *buf, zc_memtype_t memtype,
                                                     const char *arg))
{
    const void *tensors[] = {a->q, a->k, a->v, a->out, a->lse, a->dout, a->dq, a->dk, a->dv};
    static const char *names[] = {"q", "k", "v", "out", "lse", "dout", "dq", "dk", "dv"};

    for (int i = 0; i < (backward ? 9 : 5); i++)
        ZC_CHECK(check(tensors[i], a->memtype, names[i]));
    return ZC_OK;
}

/* The host engine: CPU kernels on host memory. */
static zc_status_t zc_ra_host_check(zc_comm_h comm, const zc_ring_attn_args_t *a, int backward)
{
    (void)comm;
    ZC_ARG_CHECK(a->dtype == ZC_FLOAT32 || a->dtype == ZC_BFLOAT16,
                 "dtype: %s, must be float32 or bfloat16", zc_datatype_name(a->dtype));
    return zc_ra_check_tensors(a, backward, zc_memtype_check_host_path);
}

const zc_ring_attn_args_t *zc_ra_args_read(const zc_ring_attn_args_t *user,
                                           zc_ring_attn_args_t *local)
{
    static const zc_ring_attn_args_t defaults = ZC_RING_ATTN_ARGS_INITIALIZER;

    *local = defaults;
    if (!user || user->size < ZC_RING_ATTN_ARGS_SIZE_V1 ||
        zc_abi_read(local, sizeof(*local), sizeof(*local), user, user->size,
                    ZC_RING_ATTN_ARGS_SIZE_V1, "args", "ZC_RING_ATTN_ARGS_INITIALIZER") != ZC_OK)
        return user; /* refused by zc_ra_check_args, inside the agreement */
    local->size = sizeof(*local);
    return local;
}

zc_status_t zc_ra_check_args(zc_comm_h comm, zc_plan_h plan, const zc_ring_attn_args_t *a,
                             int backward, zc_ra_engine_check_t engine, int64_t *tokens)
{
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    zc_attn_kernels_t table;
    zc_plan_rank_t mine;
    zc_attn_mask_t mask = zc_attn_mask_make(-1, 0);

    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK(a != NULL, "args: NULL");
    /* a size zc_ra_args_read accepted is sizeof: this refuses the others */
    ZC_CHECK(zc_abi_read(&(zc_ring_attn_args_t){0}, sizeof(*a), sizeof(*a), a, a->size,
                         ZC_RING_ATTN_ARGS_SIZE_V1, "args", "ZC_RING_ATTN_ARGS_INITIALIZER"));
    if (a->stats)
        ZC_CHECK(zc_abi_out_check(a->stats->size, ZC_RING_ATTN_STATS_SIZE_V1, "args->stats",
                                  "ZC_RING_ATTN_STATS_INITIALIZER"));
    ZC_ARG_CHECK(a->mode >= ZC_RING_ATTN_ZEPPELIN && a->mode <= ZC_RING_ATTN_LLAMA_CP,
                 "mode: %d is not a zc_ring_attn_mode_t", (int)a->mode);
    ZC_ARG_CHECK(a->num_heads_q > 0, "num_heads_q: %d, must be positive", a->num_heads_q);
    ZC_ARG_CHECK(a->num_heads_kv > 0, "num_heads_kv: %d, must be positive", a->num_heads_kv);
    ZC_ARG_CHECK(a->num_heads_q % a->num_heads_kv == 0,
                 "num_heads_q: %d is not a multiple of num_heads_kv (%d)", a->num_heads_q,
                 a->num_heads_kv);
    ZC_ARG_CHECK(a->head_dim >= 1 && a->head_dim <= ZC_ATTN_MAX_HEAD_DIM,
                 "head_dim: %d, must be in 1..%d", a->head_dim, ZC_ATTN_MAX_HEAD_DIM);
    ZC_ARG_CHECK(isfinite(a->scale), "scale: %g is not finite", (double)a->scale);
    /* any mask, whatever the plan's: the plan balances, the call computes */
    ZC_CHECK(zc_attn_ring_mask(a, &mask));
    ZC_CHECK(zc_ra_table_read(a, backward, &table));
    ZC_CHECK(zc_plan_info(plan, &info));
    if (info.nranks != comm->size)
        return zc_error(ZC_ERR_MISMATCH, "plan: built for %d ranks, the communicator has %d",
                        info.nranks, comm->size);
    for (size_t s = 0; s < info.nseqs; s++) {
        zc_plan_seq_t seq;

        ZC_CHECK(zc_plan_seq(plan, s, &seq));
        if (seq.length > INT32_MAX)
            return zc_error(ZC_ERR_UNSUPPORTED, "plan: sequence %zu has %lld tokens, the "
                            "attention kernels take positions below 2^31", s,
                            (long long)seq.length);
    }
    ZC_CHECK(zc_plan_rank(plan, comm->rank, &mine));
    ZC_ARG_CHECK(a->tokens >= mine.tokens,
                 "tokens: buffers of %lld rows, the plan puts %lld on rank %d",
                 (long long)a->tokens, (long long)mine.tokens, comm->rank);
    if (mine.tokens > INT32_MAX)
        return zc_error(ZC_ERR_UNSUPPORTED, "plan: %lld tokens on rank %d, the attention "
                        "kernels take at most 2^31 - 1", (long long)mine.tokens, comm->rank);
    if (mine.tokens > 0)
        ZC_CHECK(zc_ra_check_buffers(a, backward));
    *tokens = mine.tokens;
    /* last: an argument error is reported as such even where the memory
     * cannot be used (no device) */
    return engine(comm, a, backward);
}

/* ---- agreement ------------------------------------------------------------ */

/* What every rank must share: the plan's inputs and the attention shape. */
static uint64_t zc_ra_fingerprint(zc_plan_h plan, const zc_ring_attn_args_t *a, int backward,
                                  int on_streams, int reverse)
{
    /* the queue order fixes the routed-call list and the tags, and a kernel
     * table adds an agreement at the end: ranks that differ on either
     * would wait on each other; the mask fixes which hops go */
    int shape[12] = {(int)a->mode, a->num_heads_q, a->num_heads_kv, a->head_dim, (int)a->dtype,
                     backward, on_streams, reverse, a->kernels != NULL, (int)a->flags,
                     a->window_left, a->window_right};

    /* 0 is the poisoned fingerprint of a rank that refused its arguments */
    return zc_fnv1a(zc_plan_fingerprint(plan), shape, sizeof(shape)) | 1;
}

/* The agreement's messages, one per round. */
static uint64_t zc_ra_agree_tag(const void *ctx, int sender, int round)
{
    return zc_ra_tag(ctx, sender, ZC_RA_KIND_CHECK, round, 0);
}

/* ---- the call ------------------------------------------------------------- */

static zc_status_t zc_ra_accumulators(zc_ra_ctx_t *ctx, float **owned)
{
    const zc_ring_attn_args_t *a = ctx->args;
    size_t rows = (size_t)(ctx->tokens * ctx->row_q), lse = (size_t)ctx->tokens * a->num_heads_q;
    float *acc = a->dtype == ZC_FLOAT32 ? (ctx->backward ? a->dq : a->out) : NULL;

    *owned = NULL;
    if (!acc) {
        acc = *owned = malloc((rows ? rows : 1) * sizeof(float));
        if (!acc)
            return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate %zu floats", rows);
    }
    memset(acc, 0, rows * sizeof(float));
    if (!ctx->backward) {
        ctx->out_acc = acc;
        for (size_t i = 0; i < lse; i++)
            a->lse[i] = -INFINITY;
        return ZC_OK;
    }
    ctx->dq_acc = acc;
    ctx->delta = malloc((lse ? lse : 1) * sizeof(float));
    if (!ctx->delta)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate %zu floats", lse);
    if (ctx->tokens > 0) {
        int32_t cu_q[2], cu_kv[2];
        zc_attn_args_t d = zc_ra_delta_args(ctx, cu_q, cu_kv);

        ZC_CHECK(zc_attn_bwd_delta(&d));
    }
    return ZC_OK;
}

/* The local zone: whole sequences of this rank, no communication. */
static zc_status_t zc_ra_local(zc_ra_ctx_t *ctx)
{
    const zc_plan_piece_t *lp = ctx->pieces + ctx->local_first;
    size_t n = ctx->npieces - ctx->local_first, row = (size_t)ctx->row_kv * ctx->elem;
    int64_t tokens = ctx->tokens - ctx->local_row0;
    zc_ra_kv_t kv = {.pieces = lp, .npieces = n,
                     .k = (const char *)ctx->args->k + (size_t)ctx->local_row0 * row,
                     .v = (const char *)ctx->args->v + (size_t)ctx->local_row0 * row};
    void *dkv = NULL;

    if (n == 0)
        return ZC_OK;
    if (ctx->backward) {
        size_t half = (size_t)tokens * (size_t)ctx->row_kv;

        ZC_CHECK(zc_ra_scratch(ctx, 0, zc_ra_dkv_bytes(ctx, tokens), &dkv));
        memset(dkv, 0, 2 * half * sizeof(float));
        kv.dk = dkv;
        kv.dv = (float *)dkv + half;
    }
    ZC_CHECK(zc_ra_compute(ctx, lp, n, ctx->local_row0, &kv));
    if (ctx->backward)
        ZC_CHECK(zc_ra_store_dkv(ctx, kv.dk, kv.dv, tokens, ctx->local_row0));
    return ZC_OK;
}

static zc_status_t zc_ra_run(zc_ra_ctx_t *ctx)
{
    const zc_ring_attn_args_t *a = ctx->args;
    int64_t mflop = ctx->comm->settings.ring_attn_slice_mflop;

    ctx->slice_flops = mflop > 0 ? (double)mflop * 1e6 : 0;
    if (ctx->reverse)
        ZC_CHECK(zc_ra_local(ctx));
    for (int g = 0; g < ctx->ngroups; g++) {
        if (a->mode == ZC_RING_ATTN_LLAMA_CP)
            ZC_CHECK(ctx->backward ? zc_ra_gather_bwd(ctx, g) : zc_ra_gather_fwd(ctx, g));
        else
            ZC_CHECK(ctx->backward ? zc_ra_ring_bwd(ctx, g) : zc_ra_ring_fwd(ctx, g));
    }
    if (!ctx->reverse)
        ZC_CHECK(zc_ra_local(ctx));
    ZC_CHECK(zc_ra_drain(ctx));
    if (a->dtype != ZC_FLOAT32)
        ZC_CHECK(zc_ra_round_acc(ctx));
    return ZC_OK;
}

zc_status_t zc_ra_begin(zc_ra_ctx_t *ctx, zc_ra_engine_check_t engine, int on_streams)
{
    const zc_ring_attn_args_t *args = ctx->args;
    zc_comm_h comm = ctx->comm;
    zc_status_t local;

    ZC_CHECK(zc_comm_check(comm));
    ctx->seq = comm->coll_seq++;
    local = zc_ra_check_args(comm, ctx->plan, args, ctx->backward, engine, &ctx->tokens);
    /* the stream engine keeps the forward order (src/coll/ring_attn/stream_engine.c); the
     * communicator's ZC_RING_ATTN_BWD_ORDER was parsed and agreed on at its creation */
    if (local == ZC_OK && ctx->backward && !on_streams)
        ctx->reverse = comm->settings.ring_attn_bwd_reverse; /* ZC_RING_ATTN_BWD_ORDER */
    if (comm->settings.ring_attn_check) {
        zc_agree_range_t range;

        if (local != ZC_OK)
            return zc_agree_refuse(comm, local, zc_ra_agree_tag, ctx, ctx->seq);
        ZC_CHECK(zc_agree(comm,
                          zc_rail_fingerprint(comm, zc_ra_fingerprint(ctx->plan, args,
                                                                      ctx->backward, on_streams,
                                                                      ctx->reverse)) | 1,
                          zc_ra_agree_tag, ctx, ctx->seq, &range));
        if (range.lo != range.hi)
            return zc_error(ZC_ERR_MISMATCH, "plan: ranks disagree on the plan, the attention "
                            "arguments, the form (host or stream), ZC_RING_ATTN_BWD_ORDER or "
                            "whether they pass a kernel table, or the rail rates pinned with "
                            "zc_comm_set_rail_rates%s",
                            range.lo == 0 ? " (another rank refused its own)" : "");
        /* the routed calls' slices, from the view of the rails just agreed */
        zc_rail_weights(comm, &range.rails, ctx->rail_weights);
    } else if (local != ZC_OK) {
        return local;
    } else {
        zc_rail_weights_unagreed(comm, ctx->rail_weights);
    }
    ctx->table.on = args->kernels != NULL;
    ZC_CHECK(zc_ra_table_read(args, ctx->backward, &ctx->table.kernels));
    ctx->elem = zc_datatype_size(args->dtype);
    ctx->row_q = (int64_t)args->num_heads_q * args->head_dim;
    ctx->row_kv = (int64_t)args->num_heads_kv * args->head_dim;
    ctx->scale = args->scale != 0.0f ? args->scale : 1.0f / sqrtf((float)args->head_dim);
    ZC_CHECK(zc_attn_ring_mask(args, &ctx->mask));
    ZC_CHECK(zc_plan_rank_pieces(ctx->plan, comm->rank, &ctx->pieces, &ctx->npieces));
    for (ctx->local_first = 0; ctx->local_first < ctx->npieces &&
                               ctx->pieces[ctx->local_first].zone != ZC_ZONE_LOCAL;
         ctx->local_first++)
        ctx->local_row0 += ctx->pieces[ctx->local_first].end - ctx->pieces[ctx->local_first].begin;
    /* the groups in run order: reversed when ctx->reverse */
    return zc_ra_layout_use(ctx);
}

static zc_status_t zc_ring_attn(zc_comm_h comm, zc_plan_h plan,
                                const zc_ring_attn_args_t *user_args, int backward)
{
    zc_ring_attn_args_t local;
    const zc_ring_attn_args_t *args = zc_ra_args_read(user_args, &local);
    zc_ra_ctx_t ctx = {.comm = comm, .plan = plan, .args = args, .backward = backward};
    double t0 = zc_now_sec();
    float *owned = NULL;
    zc_status_t st;

    zc_error_clear();
    ZC_CHECK(zc_ra_begin(&ctx, zc_ra_host_check, 0));
    ZC_CHECK_GOTO(zc_ra_accumulators(&ctx, &owned), st, out);
    ZC_CHECK_GOTO(zc_ra_run(&ctx), st, out);
    ZC_CHECK_GOTO(zc_ra_table_verdict(&ctx), st, out);
    ctx.stats.total_seconds = zc_now_sec() - t0;
    if (args->stats)
        zc_abi_write(args->stats, &ctx.stats, sizeof(ctx.stats));
out:
    if (st != ZC_OK)
        zc_ra_abandon(&ctx);
    free(ctx.items);
    free(ctx.delta);
    free(ctx.table.host);
    free(owned);
    for (int i = 0; i < ZC_RA_SCRATCH_SLOTS && !ctx.sends_abandoned; i++)
        zc_host_free(ctx.scratch[i]);
    if (ctx.sends_abandoned)
        zc_log_warn("ring attention: after an error, the staging buffers stay allocated while "
                    "the transport may still read abandoned sends");
    return st;
}

zc_status_t zc_ring_attn_fwd(zc_comm_h comm, zc_plan_h plan, const zc_ring_attn_args_t *args)
{
    return zc_ring_attn(comm, plan, args, 0);
}

zc_status_t zc_ring_attn_bwd(zc_comm_h comm, zc_plan_h plan, const zc_ring_attn_args_t *args)
{
    return zc_ring_attn(comm, plan, args, 1);
}
