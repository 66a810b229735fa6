/* The ring attention engine's buffers, shared by its parts below the
 * public calls (src/coll/ring_attn/ring_attn.c) and by both engines (host
 * and stream): the sizes of K|V and dK|dV rows, the staging slots kept for
 * a call, copies (memcpy, or the stream engine's device copy), and the way
 * back from the fp32 accumulators to the caller's dtype (out or dq, dk and
 * dv), with the arguments of the backward's delta over the caller's out
 * and dout.  Zeppelin paper, section 3.2 (the attention engine).
 *
 * It calls no other file of the engine: ring_attn.c -> groups.c, ring.c,
 * gather.c (-> ring.c) and stream_engine.c -> buffers.c. */
#include "config.h"

#include <string.h>

#include "src/coll/ring_attn/ring_attn.h"
#include "src/coll/ring_attn/stream_engine.h"
#include "src/common/status.h"

size_t zc_ra_kv_bytes(const zc_ra_ctx_t *ctx, int64_t tokens)
{
    return 2 * (size_t)tokens * (size_t)ctx->row_kv * ctx->elem;
}

size_t zc_ra_dkv_bytes(const zc_ra_ctx_t *ctx, int64_t tokens)
{
    return 2 * (size_t)tokens * (size_t)ctx->row_kv * sizeof(float);
}

zc_status_t zc_ra_scratch(zc_ra_ctx_t *ctx, int slot, size_t bytes, void **buf)
{
    if (bytes > ctx->scratch_bytes[slot]) {
        void *p;

        zc_host_free(ctx->scratch[slot]);
        ctx->scratch[slot] = NULL;
        ctx->scratch_bytes[slot] = 0;
        /* The K|V blocks a ring passes on are sent from these slots, and
         * a shared-memory copy from huge pages is faster (zc_host_alloc). */
        if (zc_host_alloc(bytes, &p) != ZC_OK)
            return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate %zu bytes of "
                            "staging", bytes);
        ctx->scratch[slot] = p;
        ctx->scratch_bytes[slot] = bytes;
    }
    *buf = ctx->scratch[slot];
    return ZC_OK;
}

zc_status_t zc_ra_copy(zc_ra_ctx_t *ctx, void *dst, const void *src, size_t bytes)
{
    if (ctx->ds)
        return ctx->ds->copy(ctx->ds_dev, dst, src, bytes);
    memcpy(dst, src, bytes);
    return ZC_OK;
}

zc_status_t zc_ra_copy_cb(void *ctx, void *dst, const void *src, size_t bytes)
{
    return zc_ra_copy(ctx, dst, src, bytes);
}

zc_status_t zc_ra_round(zc_ra_ctx_t *ctx, const float *src, int64_t count, void *dst)
{
    if (ctx->ds)
        return ctx->ds->convert(ctx->ds_dev, src, ZC_FLOAT32, count, ctx->args->dtype, dst);
    return zc_attn_convert(src, ZC_FLOAT32, count, ctx->args->dtype, dst);
}

zc_status_t zc_ra_round_acc(zc_ra_ctx_t *ctx)
{
    const zc_ring_attn_args_t *a = ctx->args;

    if (ctx->tokens == 0)
        return ZC_OK;
    return zc_ra_round(ctx, ctx->backward ? ctx->dq_acc : ctx->out_acc, ctx->tokens * ctx->row_q,
                       ctx->backward ? a->dq : a->out);
}

zc_status_t zc_ra_store_dkv(zc_ra_ctx_t *ctx, const float *dk, const float *dv, int64_t tokens,
                            int64_t row0)
{
    int64_t count = tokens * ctx->row_kv;
    size_t at = (size_t)(row0 * ctx->row_kv) * ctx->elem;

    if (count == 0)
        return ZC_OK;
    ZC_CHECK(zc_ra_round(ctx, dk, count, (char *)ctx->args->dk + at));
    return zc_ra_round(ctx, dv, count, (char *)ctx->args->dv + at);
}

zc_attn_args_t zc_ra_delta_args(const zc_ra_ctx_t *ctx, int32_t cu_q[2], int32_t cu_kv[2])
{
    const zc_ring_attn_args_t *a = ctx->args;

    cu_q[0] = cu_kv[0] = cu_kv[1] = 0;
    cu_q[1] = (int32_t)ctx->tokens;
    return (zc_attn_args_t){.size = sizeof(zc_attn_args_t), .batch = 1,
                            .num_heads_q = a->num_heads_q, .num_heads_kv = a->num_heads_kv,
                            .head_dim = a->head_dim,
                            .cu_seqlens_q = cu_q, .cu_seqlens_kv = cu_kv, .scale = ctx->scale,
                            .dtype = a->dtype, .out_dtype = a->dtype, .grad_dtype = a->dtype,
                            .out = a->out, .dout = a->dout, .delta = ctx->delta};
}
