/* The stream-ordered kernel calls (zc_attn_*_stream, zc_zigzag_*_stream):
 * argument checks, device-memory checks, the kernels that run a call
 * (tensor cores or scalar, zc_attn_gpu_mma) and the geometry they need
 * (block maps in launch order, copies of the host index arrays, zigzag
 * ranges), then the launchers of attn_cuda.cu and attn_mma.cu.  The
 * geometry is written into a pinned slot of the staging pool (staging.h),
 * copied to the device on the call's stream and the slot released on that
 * stream after the kernels: no allocation and no pageable copy per call
 * (the ring engine makes one per ring round).  Built in every
 * configuration: without CUDA, or without a device, each call checks its
 * arguments and returns ZC_ERR_UNSUPPORTED. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_check.h"
#include "kernels/attn_math.h"
#include "kernels/cuda/attn_cuda.h"
#include "kernels/cuda/attn_gpu.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/zigzag.h"
#include "src/common/status.h"
#ifdef HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_mem.h"
#include "kernels/cuda/staging.h"
#endif

typedef enum { ZC_GPU_FWD, ZC_GPU_BWD, ZC_GPU_DELTA } zc_gpu_pass_t;

static int zc_gpu_dtype_ok(zc_datatype_t dtype)
{
    return dtype == ZC_FLOAT32 || dtype == ZC_BFLOAT16 || dtype == ZC_FLOAT16;
}

int64_t zc_attn_gpu_blocks(const int32_t *cu, int batch, int rows, int32_t *blocks)
{
    int64_t n = 0;

    for (int b = 0; b < batch; b++) {
        int64_t count = ((int64_t)cu[b + 1] - cu[b] + rows - 1) / rows;
        for (int64_t i = 0; i < count; i++, n++) {
            if (blocks) {
                blocks[2 * n] = b;
                blocks[2 * n + 1] = (int32_t)i;
            }
        }
    }
    return n;
}

int zc_attn_gpu_mma(const zc_attn_args_t *args, int backward)
{
    const void *t[4] = {args->q, args->k, args->v, backward ? args->dout : NULL};
    const int d = args->head_dim;

    if (!(args->dtype == ZC_BFLOAT16 || args->dtype == ZC_FLOAT16) || d % 8 != 0 ||
        d > ZC_ATTN_MAX_HEAD_DIM)
        return 0;
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)t[i] % 16 != 0)
            return 0;
    return 1;
}

int zc_attn_gpu_block_rows(int backward, int mma, int d)
{
    if (mma)
        return backward ? ZC_ATTN_MMA_BK(d) : ZC_ATTN_MMA_BQ;
    return backward ? ZC_ATTN_CUDA_BK : ZC_ATTN_CUDA_BQ;
}

typedef struct {
    int64_t work, index;
    int32_t seg, block;
} zc_gpu_block_t;

static int zc_gpu_block_cmp(const void *a, const void *b)
{
    const zc_gpu_block_t *x = a, *y = b;

    if (x->work != y->work)
        return x->work > y->work ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

zc_status_t zc_attn_gpu_order(const zc_attn_args_t *args, int backward, int rows,
                              int32_t *blocks, int64_t n)
{
    zc_gpu_block_t *w = malloc(sizeof(*w) * (size_t)(n > 0 ? n : 1));
    const zc_attn_mask_t mask = zc_attn_args_mask(args);

    if (!w)
        return zc_error(ZC_ERR_NO_MEMORY, "the block order of %lld blocks", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        const int b = blocks[2 * i];
        const int64_t lq = args->cu_seqlens_q[b + 1] - args->cu_seqlens_q[b];
        const int64_t lk = args->cu_seqlens_kv[b + 1] - args->cu_seqlens_kv[b];
        const int64_t qs = args->q_start ? args->q_start[b] : 0;
        const int64_t kvs = args->kv_start ? args->kv_start[b] : 0;
        const int64_t first = (int64_t)blocks[2 * i + 1] * rows;
        int64_t lo, hi, unused;

        /* the rows that see some key of a backward block, the keys some
         * row of a forward block sees (attn_math.h's bounds are monotone) */
        if (backward) {
            const int64_t last = (first + rows < lk ? first + rows : lk) - 1;
            zc_attn_mask_rows(mask, first, qs, kvs, lq, &lo, &unused);
            zc_attn_mask_rows(mask, last, qs, kvs, lq, &unused, &hi);
        } else {
            const int64_t last = (first + rows < lq ? first + rows : lq) - 1;
            zc_attn_mask_keys(mask, first, qs, kvs, lk, &lo, &unused);
            zc_attn_mask_keys(mask, last, qs, kvs, lk, &unused, &hi);
        }
        const int64_t work = hi > lo ? hi - lo : 0;
        w[i] = (zc_gpu_block_t){work, i, blocks[2 * i], blocks[2 * i + 1]};
    }
    qsort(w, (size_t)n, sizeof(*w), zc_gpu_block_cmp);
    for (int64_t i = 0; i < n; i++) {
        blocks[2 * i] = w[i].seg;
        blocks[2 * i + 1] = w[i].block;
    }
    free(w);
    return ZC_OK;
}

void zc_zigzag_ranges(const int32_t *cu_seqlens, int batch, size_t token_bytes, int ring_size,
                      int position, int pack, int64_t *ranges, int *n)
{
    int64_t share = 0;

    *n = 0;
    for (int b = 0; b < batch; b++) {
        const int64_t len = (int64_t)cu_seqlens[b + 1] - cu_seqlens[b];
        const int chunks[2] = {position, 2 * ring_size - 1 - position};

        for (int c = 0; c < 2; c++) {
            int64_t begin, end;
            zc_zigzag_chunk(len, ring_size, chunks[c], &begin, &end);
            if (end == begin)
                continue;
            int64_t seq = (cu_seqlens[b] + begin) * (int64_t)token_bytes;
            int64_t *r = ranges + 3 * *n;
            r[0] = pack ? seq : share;
            r[1] = pack ? share : seq;
            r[2] = (end - begin) * (int64_t)token_bytes;
            share += r[2];
            ++*n;
        }
    }
}

/* ---- argument checks ------------------------------------------------------ */

/* The tensors of a call: each must be present when it has rows, then be
 * device memory.  All NULL checks come before the device checks, so an
 * argument error is reported as such even where there is no device. */
typedef struct {
    const void *p;
    int64_t rows;
    const char *name;
} zc_gpu_tensor_t;

static zc_status_t zc_gpu_tensors(const zc_gpu_tensor_t *t, int n)
{
    for (int i = 0; i < n; i++)
        ZC_ARG_CHECK(t[i].p != NULL || t[i].rows == 0, "%s: NULL", t[i].name);
    /* Every call needs a device, empty or not. */
    ZC_CHECK(zc_memtype_check_device(NULL, ""));
    for (int i = 0; i < n; i++)
        if (t[i].rows)
            ZC_CHECK(zc_memtype_check_device(t[i].p, t[i].name));
    return ZC_OK;
}

static zc_status_t zc_gpu_dtype(zc_datatype_t dtype, const char *name)
{
    ZC_ARG_CHECK(zc_gpu_dtype_ok(dtype), "%s: %s, must be float32, bfloat16 or float16", name,
                 zc_datatype_name(dtype));
    return ZC_OK;
}

static zc_status_t zc_gpu_check(const zc_attn_args_t *args, zc_gpu_pass_t pass, int64_t *tq,
                                int64_t *tk)
{
    const int acc = args && (args->flags & ZC_ATTN_ACCUMULATE);
    const int needs_out = pass != ZC_GPU_BWD || (args && !args->delta);

    zc_attn_mask_t mask;

    ZC_CHECK(zc_attn_check_call(args, tq, tk, &mask));
    /* The forward's grid has one row of blocks per query head (the
     * backward one per kv head, never more). */
    if (args->num_heads_q > ZC_ATTN_CUDA_MAX_HEADS)
        return zc_error(ZC_ERR_UNSUPPORTED,
                        "num_heads_q: %d, the CUDA kernels take at most %d heads (grid y)",
                        args->num_heads_q, ZC_ATTN_CUDA_MAX_HEADS);
    ZC_CHECK(zc_gpu_dtype(args->dtype, "dtype"));
    if (needs_out)
        ZC_CHECK(zc_gpu_dtype(args->out_dtype, "out_dtype"));
    ZC_ARG_CHECK(pass != ZC_GPU_FWD || !acc || args->out_dtype == ZC_FLOAT32,
                 "out_dtype: ZC_ATTN_ACCUMULATE needs float32, got %s",
                 zc_datatype_name(args->out_dtype));
    if (pass == ZC_GPU_BWD) {
        ZC_CHECK(zc_gpu_dtype(args->grad_dtype, "grad_dtype"));
        ZC_ARG_CHECK(!acc || args->grad_dtype == ZC_FLOAT32,
                     "grad_dtype: ZC_ATTN_ACCUMULATE needs float32, got %s",
                     zc_datatype_name(args->grad_dtype));
    }
    if (pass == ZC_GPU_FWD) {
        const int64_t kv = *tq ? *tk : 0;
        const zc_gpu_tensor_t t[] = {{args->q, *tq, "q"}, {args->out, *tq, "out"},
                                     {args->lse, *tq, "lse"}, {args->k, kv, "k"},
                                     {args->v, kv, "v"}};
        return zc_gpu_tensors(t, 5);
    }
    if (pass == ZC_GPU_DELTA) {
        const zc_gpu_tensor_t t[] = {{args->dout, *tq, "dout"}, {args->out, *tq, "out"},
                                     {args->delta, *tq, "delta"}};
        return zc_gpu_tensors(t, 3);
    }
    const zc_gpu_tensor_t t[] = {
        {args->q, *tq, "q"},   {args->dout, *tq, "dout"}, {args->lse, *tq, "lse"},
        {args->dq, *tq, "dq"}, {args->out, needs_out ? *tq : 0, "out"},
        {args->delta, args->delta ? *tq : 0, "delta"},
        {args->k, *tk, "k"},   {args->v, *tk, "v"},       {args->dk, *tk, "dk"},
        {args->dv, *tk, "dv"}};
    return zc_gpu_tensors(t, 10);
}

#ifdef HAVE_CUDA
/* ---- launches ------------------------------------------------------------ */

/* Device copies of the host index arrays and the block map, in one
 * staging slot released on the stream after the kernels
 * (zc_cuda_staging_finish). */
typedef struct {
    zc_cuda_staging_slot_t *geometry;
    zc_attn_cuda_t k;
    int mma; /* the tensor-core kernels run it */
} zc_gpu_call_t;

/* Forward blocks are query rows, backward blocks key rows, longest first;
 * mma: the tensor-core kernels run the call. */
static zc_status_t zc_gpu_begin(const zc_attn_args_t *args, int backward, int mma,
                                void *stream, zc_gpu_call_t *call)
{
    const int batch = args->batch;
    const int block_rows = zc_attn_gpu_block_rows(backward, mma, args->head_dim);
    const int32_t *cu_blocks = backward ? args->cu_seqlens_kv : args->cu_seqlens_q;
    const int64_t nblocks = zc_attn_gpu_blocks(cu_blocks, batch, block_rows, NULL);
    const int heads = backward ? args->num_heads_kv : args->num_heads_q;
    const size_t n = 2 * ((size_t)batch + 1) + 2 * (size_t)batch + 2 * (size_t)nblocks;
    int32_t *host, *dev;
    zc_status_t st;

    /* the tensor-core kernels' grid is one block per (map entry, head) */
    ZC_ARG_CHECK(nblocks <= (mma ? INT32_MAX / heads : INT32_MAX),
                 "cu_seqlens: %lld blocks of %d heads are too many", (long long)nblocks, heads);
    ZC_CHECK(zc_cuda_staging_acquire(n * sizeof(int32_t), &call->geometry));
    host = zc_cuda_staging_host(call->geometry);
    memcpy(host, args->cu_seqlens_q, ((size_t)batch + 1) * sizeof(int32_t));
    memcpy(host + batch + 1, args->cu_seqlens_kv, ((size_t)batch + 1) * sizeof(int32_t));
    for (int b = 0; b < batch; b++) {
        host[2 * (batch + 1) + b] = args->q_start ? args->q_start[b] : 0;
        host[2 * (batch + 1) + batch + b] = args->kv_start ? args->kv_start[b] : 0;
    }
    zc_attn_gpu_blocks(cu_blocks, batch, block_rows, host + 2 * (batch + 1) + 2 * batch);
    st = zc_attn_gpu_order(args, backward, block_rows, host + 2 * (batch + 1) + 2 * batch,
                           nblocks);
    if (st == ZC_OK)
        st = zc_cuda_staging_stage(call->geometry, n * sizeof(int32_t), stream);
    if (st != ZC_OK) {
        (void)zc_cuda_staging_release(call->geometry, stream);
        return st;
    }
    dev = zc_cuda_staging_dev(call->geometry);
    call->k = (zc_attn_cuda_t){
        .hq = args->num_heads_q, .hk = args->num_heads_kv, .d = args->head_dim,
        .mask = zc_attn_args_mask(args), .scale = args->scale,
        .scale2 = args->scale * ZC_ATTN_LOG2E, .flags = args->flags, .dtype = args->dtype,
        .out_dtype = args->out_dtype, .grad_dtype = args->grad_dtype,
        .cu_q = dev, .cu_kv = dev + batch + 1, .q_start = dev + 2 * (batch + 1),
        .kv_start = dev + 2 * (batch + 1) + batch, .blocks = dev + 2 * (batch + 1) + 2 * batch,
        .nblocks = (int)nblocks, .q = args->q, .k = args->k, .v = args->v, .out = args->out,
        .lse = args->lse, .dout = args->dout, .delta = args->delta, .dk = args->dk,
        .dv = args->dv};
    call->mma = mma;
    return ZC_OK;
}

static int zc_gpu_uses_mma(const zc_attn_args_t *args, int backward, zc_gpu_kernels_t kernels)
{
    return kernels == ZC_GPU_KERNELS_AUTO && zc_attn_gpu_mma(args, backward);
}

static zc_status_t zc_gpu_fwd(const zc_attn_args_t *args, zc_gpu_kernels_t kernels,
                              void *stream)
{
    zc_gpu_call_t call;
    zc_status_t st;

    ZC_CHECK(zc_gpu_begin(args, 0, zc_gpu_uses_mma(args, 0, kernels), stream, &call));
    st = zc_cuda_status(call.mma ? zc_attn_mma_fwd(&call.k, stream)
                                 : zc_attn_cuda_fwd(&call.k, stream),
                        "the attention forward kernel");
    return zc_cuda_staging_finish(call.geometry, stream, st);
}

static zc_status_t zc_gpu_delta(const zc_attn_args_t *args, int64_t tq, float *delta,
                                void *stream)
{
    return zc_cuda_status(zc_attn_cuda_delta(args->dout, args->dtype, args->out, args->out_dtype,
                                             delta, tq * args->num_heads_q, args->head_dim,
                                             stream),
                          "the attention delta kernel");
}

static zc_status_t zc_gpu_bwd(const zc_attn_args_t *args, int64_t tq, zc_gpu_kernels_t kernels,
                              void *stream)
{
    const size_t dq_bytes = (size_t)tq * args->num_heads_q * args->head_dim * sizeof(float);
    const int dq_direct = args->grad_dtype == ZC_FLOAT32;
    float *delta = NULL, *dq = NULL;
    zc_gpu_call_t call;
    zc_status_t st;
    void *p;

    ZC_CHECK(zc_gpu_begin(args, 1, zc_gpu_uses_mma(args, 1, kernels), stream, &call));
    /* dq partials are added into fp32: the caller's buffer or ours */
    if (dq_direct) {
        dq = args->dq;
    } else {
        ZC_CHECK_GOTO(zc_cuda_alloc_async(dq_bytes, stream, &p), st, out);
        dq = p;
    }
    if (!dq_direct || !(args->flags & ZC_ATTN_ACCUMULATE))
        ZC_CHECK_GOTO(zc_cuda_zero_async(dq, dq_bytes, stream), st, out);
    call.k.dq = dq;
    if (!args->delta && tq > 0) {
        ZC_CHECK_GOTO(zc_cuda_alloc_async((size_t)tq * args->num_heads_q * sizeof(float), stream,
                                          &p), st, out);
        delta = p;
        ZC_CHECK_GOTO(zc_gpu_delta(args, tq, delta, stream), st, out);
        call.k.delta = delta;
    }
    ZC_CHECK_GOTO(zc_cuda_status(call.mma ? zc_attn_mma_bwd(&call.k, stream)
                                          : zc_attn_cuda_bwd(&call.k, stream),
                                 "the attention backward kernel"), st, out);
    if (!dq_direct)
        ZC_CHECK_GOTO(zc_cuda_status(zc_attn_cuda_convert(dq, ZC_FLOAT32, (int64_t)(dq_bytes / 4),
                                                          args->dq, args->grad_dtype, stream),
                                     "the dq conversion kernel"), st, out);
    st = ZC_OK;
out:
    if (!dq_direct)
        zc_cuda_free_async(dq, stream);
    zc_cuda_free_async(delta, stream);
    return zc_cuda_staging_finish(call.geometry, stream, st);
}

/* The kernels need this much shared memory per block; say so clearly when
 * the device has less (sm_80: 163 KB, sm_90: 227 KB; other parts less). */
zc_status_t zc_attn_gpu_smem_check(int backward, int d)
{
    int dev = 0, limit = 0;
    size_t need = zc_attn_cuda_smem(backward, d), mma;

    if (d % 8 == 0 && d <= ZC_ATTN_MAX_HEAD_DIM && (mma = zc_attn_mma_smem(backward, d)) > need)
        need = mma;
    ZC_CHECK(zc_cuda_status(cudaGetDevice(&dev), "cudaGetDevice"));
    ZC_CHECK(zc_cuda_status(cudaDeviceGetAttribute(&limit,
                                                   cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
                            "cudaDeviceGetAttribute"));
    if (need > (size_t)limit)
        return zc_error(ZC_ERR_UNSUPPORTED,
                        "head_dim: %d needs %zu bytes of shared memory per block, device %d has "
                        "%d", d, need, dev, limit);
    return ZC_OK;
}

zc_status_t zc_attn_gpu_launch_with(int pass, const zc_attn_args_t *args,
                                    zc_gpu_kernels_t kernels, void *stream)
{
    int64_t tq = args->batch > 0 ? args->cu_seqlens_q[args->batch] : 0;
    int64_t tk = args->batch > 0 ? args->cu_seqlens_kv[args->batch] : 0;

    if (pass == ZC_GPU_FWD)
        return tq == 0 ? ZC_OK : zc_gpu_fwd(args, kernels, stream);
    if (pass == ZC_GPU_BWD)
        return tq == 0 && tk == 0 ? ZC_OK : zc_gpu_bwd(args, tq, kernels, stream);
    return tq == 0 ? ZC_OK : zc_gpu_delta(args, tq, args->delta, stream);
}

zc_status_t zc_attn_gpu_launch(int pass, const zc_attn_args_t *args, void *stream)
{
    return zc_attn_gpu_launch_with(pass, args, ZC_GPU_KERNELS_AUTO, stream);
}
#endif /* HAVE_CUDA */

/* ---- public calls ------------------------------------------------------------ */

zc_status_t zc_attn_fwd_stream(const zc_attn_args_t *args, void *stream)
{
    int64_t tq, tk;

    zc_error_clear();
    ZC_ATTN_ARGS_READ(args);
    ZC_CHECK(zc_gpu_check(args, ZC_GPU_FWD, &tq, &tk));
    if (tq == 0)
        return ZC_OK;
#ifdef HAVE_CUDA
    ZC_CHECK(zc_attn_gpu_smem_check(0, args->head_dim));
    return zc_gpu_fwd(args, ZC_GPU_KERNELS_AUTO, stream);
#else
    (void)stream;
    return zc_error(ZC_ERR_INTERNAL, "unreachable without CUDA");
#endif
}

zc_status_t zc_attn_bwd_stream(const zc_attn_args_t *args, void *stream)
{
    int64_t tq, tk;

    zc_error_clear();
    ZC_ATTN_ARGS_READ(args);
    ZC_CHECK(zc_gpu_check(args, ZC_GPU_BWD, &tq, &tk));
    if (tq == 0 && tk == 0)
        return ZC_OK;
#ifdef HAVE_CUDA
    ZC_CHECK(zc_attn_gpu_smem_check(1, args->head_dim));
    return zc_gpu_bwd(args, tq, ZC_GPU_KERNELS_AUTO, stream);
#else
    (void)stream;
    return zc_error(ZC_ERR_INTERNAL, "unreachable without CUDA");
#endif
}

zc_status_t zc_attn_bwd_delta_stream(const zc_attn_args_t *args, void *stream)
{
    int64_t tq, tk;

    zc_error_clear();
    ZC_ATTN_ARGS_READ(args);
    ZC_CHECK(zc_gpu_check(args, ZC_GPU_DELTA, &tq, &tk));
    if (tq == 0)
        return ZC_OK;
#ifdef HAVE_CUDA
    return zc_gpu_delta(args, tq, args->delta, stream);
#else
    (void)stream;
    return zc_error(ZC_ERR_INTERNAL, "unreachable without CUDA");
#endif
}

zc_status_t zc_attn_merge_stream(const float *part_out, const float *part_lse, int64_t tokens,
                                 int num_heads, int head_dim, float *out, float *lse,
                                 void *stream)
{
    zc_error_clear();
    ZC_ARG_CHECK(tokens >= 0, "tokens: %lld is negative", (long long)tokens);
    ZC_ARG_CHECK(num_heads > 0, "num_heads: %d, must be positive", num_heads);
    ZC_ARG_CHECK(head_dim > 0, "head_dim: %d, must be positive", head_dim);
    const zc_gpu_tensor_t t[] = {{part_out, tokens, "part_out"}, {part_lse, tokens, "part_lse"},
                                 {out, tokens, "out"}, {lse, tokens, "lse"}};
    ZC_CHECK(zc_gpu_tensors(t, 4));
#ifdef HAVE_CUDA
    return zc_cuda_status(zc_attn_cuda_merge(part_out, part_lse, tokens * num_heads, head_dim, out,
                                             lse, stream),
                          "the merge kernel");
#else
    (void)stream;
    return zc_error(ZC_ERR_INTERNAL, "unreachable without CUDA");
#endif
}

zc_status_t zc_attn_convert_stream(const void *src, zc_datatype_t src_dtype, int64_t count,
                                   zc_datatype_t dst_dtype, void *dst, void *stream)
{
    zc_error_clear();
    ZC_CHECK(zc_gpu_dtype(src_dtype, "src_dtype"));
    ZC_CHECK(zc_gpu_dtype(dst_dtype, "dst_dtype"));
    ZC_ARG_CHECK(count >= 0, "count: %lld is negative", (long long)count);
    const zc_gpu_tensor_t t[] = {{src, count, "src"}, {dst, count, "dst"}};
    ZC_CHECK(zc_gpu_tensors(t, 2));
#ifdef HAVE_CUDA
    if (src_dtype == dst_dtype)
        return zc_cuda_copy_async(dst, src, (size_t)count * zc_datatype_size(src_dtype), stream);
    return zc_cuda_status(zc_attn_cuda_convert(src, src_dtype, count, dst, dst_dtype, stream),
                          "the conversion kernel");
#else
    (void)stream;
    return zc_error(ZC_ERR_INTERNAL, "unreachable without CUDA");
#endif
}

#ifdef HAVE_CUDA
/* Bytes the ranges copy (they size the copy kernel's grid). */
static int64_t zc_ranges_bytes(const int64_t *ranges, int n)
{
    int64_t bytes = 0;

    for (int i = 0; i < n; i++)
        bytes += ranges[3 * i + 2];
    return bytes;
}
#endif

static zc_status_t zc_zigzag_stream(const void *from, const char *from_name, void *to,
                                    const char *to_name, const int32_t *cu_seqlens, int batch,
                                    size_t token_bytes, int ring_size, int position, int pack,
                                    void *stream)
{
    int64_t total;

    zc_error_clear();
    ZC_ARG_CHECK(batch >= 0, "batch: %d is negative", batch);
    ZC_CHECK(zc_attn_check_seqlens(cu_seqlens, batch, "cu_seqlens", &total));
    ZC_ARG_CHECK(token_bytes > 0, "token_bytes: is 0");
    ZC_ARG_CHECK(ring_size >= 1, "ring_size: %d, must be at least 1", ring_size);
    ZC_ARG_CHECK(position >= 0 && position < ring_size, "position: %d is out of range 0..%d",
                 position, ring_size - 1);
    const zc_gpu_tensor_t t[] = {{from, total, from_name}, {to, total, to_name}};
    ZC_CHECK(zc_gpu_tensors(t, 2));
#ifdef HAVE_CUDA
    zc_cuda_staging_slot_t *slot;
    int64_t *ranges;
    zc_status_t st;
    int n;

    ZC_CHECK(zc_cuda_staging_acquire(sizeof(int64_t) * 6 * ((size_t)batch + 1), &slot));
    ranges = zc_cuda_staging_host(slot);
    zc_zigzag_ranges(cu_seqlens, batch, token_bytes, ring_size, position, pack, ranges, &n);
    st = n ? zc_cuda_staging_stage(slot, sizeof(int64_t) * 3 * (size_t)n, stream) : ZC_OK;
    if (st == ZC_OK)
        st = zc_cuda_status(zc_cuda_copy_ranges(from, to, zc_cuda_staging_dev(slot), n,
                                                zc_ranges_bytes(ranges, n), stream),
                            "the zigzag kernel");
    return zc_cuda_staging_finish(slot, stream, st);
#else
    (void)pack;
    (void)stream;
    return zc_error(ZC_ERR_INTERNAL, "unreachable without CUDA");
#endif
}

zc_status_t zc_zigzag_pack_stream(const void *seq, const int32_t *cu_seqlens, int batch,
                                  size_t token_bytes, int ring_size, int position, void *share,
                                  void *stream)
{
    return zc_zigzag_stream(seq, "seq", share, "share", cu_seqlens, batch, token_bytes, ring_size,
                            position, 1, stream);
}

zc_status_t zc_zigzag_unpack_stream(const void *share, const int32_t *cu_seqlens, int batch,
                                    size_t token_bytes, int ring_size, int position, void *seq,
                                    void *stream)
{
    return zc_zigzag_stream(share, "share", seq, "seq", cu_seqlens, batch, token_bytes, ring_size,
                            position, 0, stream);
}
