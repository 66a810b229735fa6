/* CPU flash attention: the public entry points.  Each call checks its
 * arguments, packs K^T (and V^T) into BK-wide blocks and, where the storage
 * is bf16 or the head dim is not a multiple of 16, the other tensors into
 * padded fp32 rows, then hands blocks to the SIMD path's kernels on the
 * thread pool: forward per (query block, head), backward per (key block,
 * kv head) so dk/dv need no synchronisation and dq partials are added under
 * a striped lock.
 *
 * Calls go one way: this driver -> the SIMD paths
 * (attn_cpu_{scalar,avx2,avx512}.c) -> the row outputs they share
 * (attn_cpu_store.c: out/lse, dk/dv and the dq locks). */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_check.h"
#include "kernels/attn_math.h"
#include "kernels/cpu/attn_cpu.h"
#include "kernels/cpu/thread_pool.h"
#include "src/common/env.h"
#include "src/common/log.h"
#include "src/common/status.h"

/* Workspace larger than this is freed after the call instead of kept. */
#define ZC_ATTN_WS_KEEP  ((size_t)256 << 20)
#define ZC_ATTN_ALIGN    64

/* ---- SIMD path selection ----------------------------------------------- */

static atomic_int zc_attn_isa = ZC_ATTN_ISA_AUTO;

int zc_attn_cpu_isa_supported(zc_attn_isa_t isa)
{
    switch (isa) {
    case ZC_ATTN_ISA_SCALAR:
        return 1;
#if defined(__x86_64__) && defined(__GNUC__)
    case ZC_ATTN_ISA_AVX2:
        return zc_attn_cpu_kernels_avx2.fwd_block != NULL && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma");
    case ZC_ATTN_ISA_AVX512:
        return zc_attn_cpu_kernels_avx512.fwd_block != NULL &&
               __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma");
#endif
    default:
        return 0;
    }
}

const char *zc_attn_cpu_isa_name(zc_attn_isa_t isa)
{
    switch (isa) {
    case ZC_ATTN_ISA_AUTO:   return "auto";
    case ZC_ATTN_ISA_SCALAR: return "scalar";
    case ZC_ATTN_ISA_AVX2:   return "avx2";
    case ZC_ATTN_ISA_AVX512: return "avx512";
    }
    return "unknown";
}

static zc_attn_isa_t zc_attn_isa_best(void)
{
    if (zc_attn_cpu_isa_supported(ZC_ATTN_ISA_AVX512))
        return ZC_ATTN_ISA_AVX512;
    if (zc_attn_cpu_isa_supported(ZC_ATTN_ISA_AVX2))
        return ZC_ATTN_ISA_AVX2;
    return ZC_ATTN_ISA_SCALAR;
}

static zc_attn_isa_t zc_attn_isa_from_env(void)
{
    const char *want = zc_env_get("ZC_CPU_ISA");

    for (zc_attn_isa_t isa = ZC_ATTN_ISA_SCALAR; isa <= ZC_ATTN_ISA_AVX512; isa++) {
        if (want == NULL || strcmp(want, zc_attn_cpu_isa_name(isa)) != 0)
            continue;
        if (zc_attn_cpu_isa_supported(isa))
            return isa;
        zc_log_warn("ZC_CPU_ISA=%s: this CPU lacks it, using %s", want,
                    zc_attn_cpu_isa_name(zc_attn_isa_best()));
        return zc_attn_isa_best();
    }
    if (want && strcmp(want, "auto") != 0)
        zc_log_warn("ZC_CPU_ISA=%s is not auto, avx512, avx2 or scalar; using auto", want);
    return zc_attn_isa_best();
}

zc_attn_isa_t zc_attn_cpu_get_isa(void)
{
    int isa = atomic_load(&zc_attn_isa);

    if (isa == ZC_ATTN_ISA_AUTO) {
        isa = zc_attn_isa_from_env();
        atomic_store(&zc_attn_isa, isa);
        zc_log_debug("cpu attention kernels: %s path", zc_attn_cpu_isa_name(isa));
    }
    return (zc_attn_isa_t)isa;
}

zc_status_t zc_attn_cpu_set_isa(zc_attn_isa_t isa)
{
    if (isa != ZC_ATTN_ISA_AUTO && !zc_attn_cpu_isa_supported(isa))
        return zc_error(ZC_ERR_UNSUPPORTED, "isa: this CPU has no %s", zc_attn_cpu_isa_name(isa));
    atomic_store(&zc_attn_isa, isa == ZC_ATTN_ISA_AUTO ? (int)zc_attn_isa_from_env() : (int)isa);
    return ZC_OK;
}

static const zc_attn_cpu_kernels_t *zc_attn_kernels(void)
{
    switch (zc_attn_cpu_get_isa()) {
    case ZC_ATTN_ISA_AVX512: return &zc_attn_cpu_kernels_avx512;
    case ZC_ATTN_ISA_AVX2:   return &zc_attn_cpu_kernels_avx2;
    default:                 return &zc_attn_cpu_kernels_scalar;
    }
}

/* ---- argument checks ---------------------------------------------------- */

/* What the checks find out about a call. */
typedef struct {
    int64_t total_q;
    int64_t total_kv;
    zc_attn_mask_t mask;
} zc_attn_totals_t;

static int zc_attn_dtype_ok(zc_datatype_t dtype)
{
    return dtype == ZC_FLOAT32 || dtype == ZC_BFLOAT16;
}

static zc_status_t zc_attn_check_common(const zc_attn_args_t *args, zc_attn_totals_t *totals)
{
    ZC_CHECK(zc_attn_check_call(args, &totals->total_q, &totals->total_kv, &totals->mask));
    ZC_ARG_CHECK(zc_attn_dtype_ok(args->dtype), "dtype: %s, must be float32 or bfloat16",
                 zc_datatype_name(args->dtype));
    return ZC_OK;
}

static zc_status_t zc_attn_check_fwd(const zc_attn_args_t *args, zc_attn_totals_t *totals)
{
    ZC_CHECK(zc_attn_check_common(args, totals));
    ZC_ARG_CHECK(zc_attn_dtype_ok(args->out_dtype), "out_dtype: %s, must be float32 or bfloat16",
                 zc_datatype_name(args->out_dtype));
    ZC_ARG_CHECK(!(args->flags & ZC_ATTN_ACCUMULATE) || args->out_dtype == ZC_FLOAT32,
                 "out_dtype: ZC_ATTN_ACCUMULATE needs float32, got %s",
                 zc_datatype_name(args->out_dtype));
    if (totals->total_q == 0)
        return ZC_OK;
    ZC_ARG_CHECK(args->q != NULL, "q: NULL");
    ZC_ARG_CHECK(args->out != NULL, "out: NULL");
    ZC_ARG_CHECK(args->lse != NULL, "lse: NULL");
    if (totals->total_kv == 0)
        return ZC_OK;
    ZC_ARG_CHECK(args->k != NULL, "k: NULL");
    ZC_ARG_CHECK(args->v != NULL, "v: NULL");
    return ZC_OK;
}

static zc_status_t zc_attn_check_delta(const zc_attn_args_t *args, int64_t total_q)
{
    if (total_q == 0)
        return ZC_OK;
    ZC_ARG_CHECK(zc_attn_dtype_ok(args->out_dtype), "out_dtype: %s, must be float32 or bfloat16",
                 zc_datatype_name(args->out_dtype));
    ZC_ARG_CHECK(args->out != NULL, "out: NULL (needed for delta)");
    ZC_ARG_CHECK(args->dout != NULL, "dout: NULL");
    return ZC_OK;
}

static zc_status_t zc_attn_check_bwd(const zc_attn_args_t *args, zc_attn_totals_t *totals)
{
    ZC_CHECK(zc_attn_check_common(args, totals));
    ZC_ARG_CHECK(zc_attn_dtype_ok(args->grad_dtype),
                 "grad_dtype: %s, must be float32 or bfloat16",
                 zc_datatype_name(args->grad_dtype));
    ZC_ARG_CHECK(!(args->flags & ZC_ATTN_ACCUMULATE) || args->grad_dtype == ZC_FLOAT32,
                 "grad_dtype: ZC_ATTN_ACCUMULATE needs float32, got %s",
                 zc_datatype_name(args->grad_dtype));
    if (totals->total_q > 0) {
        ZC_ARG_CHECK(args->q != NULL, "q: NULL");
        ZC_ARG_CHECK(args->dout != NULL, "dout: NULL");
        ZC_ARG_CHECK(args->lse != NULL, "lse: NULL");
        ZC_ARG_CHECK(args->dq != NULL, "dq: NULL");
        if (args->delta == NULL)
            ZC_CHECK(zc_attn_check_delta(args, totals->total_q));
    }
    if (totals->total_kv > 0) {
        ZC_ARG_CHECK(args->k != NULL, "k: NULL");
        ZC_ARG_CHECK(args->v != NULL, "v: NULL");
        ZC_ARG_CHECK(args->dk != NULL, "dk: NULL");
        ZC_ARG_CHECK(args->dv != NULL, "dv: NULL");
    }
    return ZC_OK;
}

/* ---- packing ------------------------------------------------------------- */

/* Everything a packing or scheduling pass needs; one per call. */
typedef struct {
    zc_attn_cpu_job_t job;
    const zc_attn_cpu_kernels_t *kernels;
    zc_attn_totals_t totals;
    int64_t *qb_off;            /* [batch + 1] first query block of each segment */
    int32_t *qb_seg;            /* segment of each query block */
    int64_t total_qb;
    int32_t *kb_seg;            /* segment of each key block */
    float *scratch;             /* per thread */
    size_t scratch_stride;
    /* packing pass */
    const void *src;
    zc_datatype_t src_dtype;
    int heads;
    float *dst;
    /* delta pass */
    float *delta_out;
} zc_attn_call_t;

static int zc_attn_needs_rows(const zc_attn_args_t *args)
{
    return args->dtype != ZC_FLOAT32 || args->head_dim % ZC_ATTN_DPAD != 0;
}

/* fp32 rows, padded to dp with zeros: tokens [begin, end) of `src`. */
static void zc_attn_pack_rows_body(void *ctx, int64_t begin, int64_t end, int thread)
{
    const zc_attn_call_t *call = ctx;
    const int d = call->job.d, dp = call->job.dp, heads = call->heads;

    for (int64_t row = begin * heads; row < end * heads; row++) {
        float *dst = call->dst + row * dp;

        for (int i = 0; i < d; i++)
            dst[i] = zc_attn_load(call->src, call->src_dtype, row * d + i);
        for (int i = d; i < dp; i++)
            dst[i] = 0.0f;
    }
}

/* K^T (or V^T) blocks [d][BK] of items (head, key block), zero beyond the
 * segment's last key. */
static void zc_attn_pack_t_body(void *ctx, int64_t begin, int64_t end, int thread)
{
    const zc_attn_call_t *call = ctx;
    const zc_attn_args_t *args = call->job.args;
    const int d = call->job.d, hk = call->job.hk;

    for (int64_t item = begin; item < end; item++) {
        const int h = (int)(item % hk);
        const int64_t g = item / hk;
        const int b = call->kb_seg[g];
        const int64_t j0 = (g - call->job.kb_off[b]) * ZC_ATTN_BK;
        const int64_t t0 = args->cu_seqlens_kv[b] + j0;
        const int64_t lk = args->cu_seqlens_kv[b + 1] - args->cu_seqlens_kv[b];
        const int nc = lk - j0 < ZC_ATTN_BK ? (int)(lk - j0) : ZC_ATTN_BK;
        float *dst = call->dst + ((int64_t)h * call->job.total_kb + g) * d * ZC_ATTN_BK;

        for (int j = 0; j < nc; j++) {
            const int64_t src = ((t0 + j) * hk + h) * d;

            for (int i = 0; i < d; i++)
                dst[i * ZC_ATTN_BK + j] = zc_attn_load(call->src, call->src_dtype, src + i);
        }
        for (int i = 0; i < d; i++)
            for (int j = nc; j < ZC_ATTN_BK; j++)
                dst[i * ZC_ATTN_BK + j] = 0.0f;
    }
}

static void zc_attn_rows_setup(zc_attn_call_t *call, zc_attn_rows_t *rows, const void *src,
                               int heads, int64_t tokens, float *packed)
{
    const zc_attn_args_t *args = call->job.args;

    if (!zc_attn_needs_rows(args)) {
        rows->base = src;
        rows->tok = (int64_t)heads * call->job.d;
        rows->head = call->job.d;
        return;
    }
    call->src = src;
    call->src_dtype = args->dtype;
    call->heads = heads;
    call->dst = packed;
    zc_cpu_parallel_for(tokens, 64, zc_attn_pack_rows_body, call);
    rows->base = packed;
    rows->tok = (int64_t)heads * call->job.dp;
    rows->head = call->job.dp;
}

static void zc_attn_pack_t(zc_attn_call_t *call, const void *src, float *dst)
{
    call->src = src;
    call->src_dtype = call->job.args->dtype;
    call->dst = dst;
    zc_cpu_parallel_for(call->job.total_kb * call->job.hk, 4, zc_attn_pack_t_body, call);
}

/* ---- workspace ------------------------------------------------------------ */

static pthread_mutex_t zc_attn_lock = PTHREAD_MUTEX_INITIALIZER;
static void *zc_attn_ws;
static size_t zc_attn_ws_size;

/* Reserve `bytes` at *offset (aligned); returns the offset. */
static size_t zc_attn_reserve(size_t *offset, size_t bytes)
{
    size_t at = *offset;

    *offset += (bytes + ZC_ATTN_ALIGN - 1) / ZC_ATTN_ALIGN * ZC_ATTN_ALIGN;
    return at;
}

/* Called with zc_attn_lock held; the workspace is reused across calls. */
static void *zc_attn_ws_get(size_t bytes)
{
    void *p;

    if (bytes <= zc_attn_ws_size)
        return zc_attn_ws;
    free(zc_attn_ws);
    zc_attn_ws = NULL;
    zc_attn_ws_size = 0;
    if (posix_memalign(&p, ZC_ATTN_ALIGN, bytes) != 0)
        return NULL;
    zc_attn_ws = p;
    zc_attn_ws_size = bytes;
    return p;
}

static void zc_attn_ws_trim(void)
{
    if (zc_attn_ws_size > ZC_ATTN_WS_KEEP) {
        free(zc_attn_ws);
        zc_attn_ws = NULL;
        zc_attn_ws_size = 0;
    }
}

/* Workspace offsets of one call. */
typedef struct {
    size_t qb_off, qb_seg, kb_off, kb_seg, kt, vt, qrows, krows, vrows, dorows, delta, dq,
        scratch, total;
} zc_attn_ws_plan_t;

static void zc_attn_plan_ws(zc_attn_call_t *call, int backward, zc_attn_ws_plan_t *plan)
{
    const zc_attn_args_t *args = call->job.args;
    const int rows = zc_attn_needs_rows(args);
    const size_t dp = call->job.dp, hq = call->job.hq, hk = call->job.hk;
    const size_t tq = call->totals.total_q, tk = call->totals.total_kv;
    const size_t tblock = hk * call->job.total_kb * call->job.d * ZC_ATTN_BK * sizeof(float);
    size_t off = 0;

    memset(plan, 0, sizeof(*plan));
    plan->qb_off = zc_attn_reserve(&off, (args->batch + 1) * sizeof(int64_t));
    plan->qb_seg = zc_attn_reserve(&off, call->total_qb * sizeof(int32_t));
    plan->kb_off = zc_attn_reserve(&off, (args->batch + 1) * sizeof(int64_t));
    plan->kb_seg = zc_attn_reserve(&off, call->job.total_kb * sizeof(int32_t));
    plan->kt = zc_attn_reserve(&off, tblock);
    plan->vt = backward ? zc_attn_reserve(&off, tblock) : 0;
    plan->qrows = rows ? zc_attn_reserve(&off, tq * hq * dp * sizeof(float)) : 0;
    plan->vrows = rows && !backward ? zc_attn_reserve(&off, tk * hk * dp * sizeof(float)) : 0;
    plan->krows = rows && backward ? zc_attn_reserve(&off, tk * hk * dp * sizeof(float)) : 0;
    plan->dorows = rows && backward ? zc_attn_reserve(&off, tq * hq * dp * sizeof(float)) : 0;
    plan->delta = backward && !args->delta ? zc_attn_reserve(&off, tq * hq * sizeof(float)) : 0;
    plan->dq = backward ? zc_attn_reserve(&off, tq * hq * call->job.d * sizeof(float)) : 0;
    call->scratch_stride = (ZC_ATTN_SCRATCH_FLOATS(dp) * sizeof(float) + ZC_ATTN_ALIGN - 1) /
                           ZC_ATTN_ALIGN * ZC_ATTN_ALIGN / sizeof(float);
    plan->scratch = zc_attn_reserve(&off, zc_cpu_pool_threads() * call->scratch_stride *
                                              sizeof(float));
    plan->total = off;
}

/* Geometry of the call: blocks per segment and the segment of each block. */
static void zc_attn_index_blocks(zc_attn_call_t *call, char *ws, const zc_attn_ws_plan_t *plan)
{
    const zc_attn_args_t *args = call->job.args;
    int64_t *qb_off = (int64_t *)(ws + plan->qb_off);
    int64_t *kb_off = (int64_t *)(ws + plan->kb_off);
    int32_t *qb_seg = (int32_t *)(ws + plan->qb_seg);
    int32_t *kb_seg = (int32_t *)(ws + plan->kb_seg);

    qb_off[0] = kb_off[0] = 0;
    for (int b = 0; b < args->batch; b++) {
        int64_t lq = args->cu_seqlens_q[b + 1] - args->cu_seqlens_q[b];
        int64_t lk = args->cu_seqlens_kv[b + 1] - args->cu_seqlens_kv[b];

        qb_off[b + 1] = qb_off[b] + (lq + ZC_ATTN_BQ - 1) / ZC_ATTN_BQ;
        kb_off[b + 1] = kb_off[b] + (lk + ZC_ATTN_BK - 1) / ZC_ATTN_BK;
        for (int64_t g = qb_off[b]; g < qb_off[b + 1]; g++)
            qb_seg[g] = b;
        for (int64_t g = kb_off[b]; g < kb_off[b + 1]; g++)
            kb_seg[g] = b;
    }
    call->qb_off = qb_off;
    call->qb_seg = qb_seg;
    call->job.kb_off = kb_off;
    call->kb_seg = kb_seg;
}

/* Sets everything but the packed tensors; counts blocks for the plan. */
static void zc_attn_call_init(zc_attn_call_t *call, const zc_attn_args_t *args,
                              const zc_attn_totals_t *totals)
{
    memset(call, 0, sizeof(*call));
    call->job.args = args;
    call->job.mask = totals->mask;
    call->job.hq = args->num_heads_q;
    call->job.hk = args->num_heads_kv;
    call->job.group = args->num_heads_q / args->num_heads_kv;
    call->job.d = args->head_dim;
    call->job.dp = (args->head_dim + ZC_ATTN_DPAD - 1) / ZC_ATTN_DPAD * ZC_ATTN_DPAD;
    call->job.scale = args->scale;
    call->job.scale2 = args->scale * ZC_ATTN_LOG2E;
    call->totals = *totals;
    call->kernels = zc_attn_kernels();
    for (int b = 0; b < args->batch; b++) {
        int64_t lq = args->cu_seqlens_q[b + 1] - args->cu_seqlens_q[b];
        int64_t lk = args->cu_seqlens_kv[b + 1] - args->cu_seqlens_kv[b];

        call->total_qb += (lq + ZC_ATTN_BQ - 1) / ZC_ATTN_BQ;
        call->job.total_kb += (lk + ZC_ATTN_BK - 1) / ZC_ATTN_BK;
    }
}

/* Takes the kernel lock and the workspace, indexes the blocks and packs K^T
 * (and V^T for the backward); on failure the lock is released. */
static zc_status_t zc_attn_begin(zc_attn_call_t *call, int backward, zc_attn_ws_plan_t *plan,
                                 char **ws)
{
    const zc_attn_args_t *args = call->job.args;

    pthread_mutex_lock(&zc_attn_lock);
    zc_attn_plan_ws(call, backward, plan);
    *ws = zc_attn_ws_get(plan->total);
    if (*ws == NULL) {
        pthread_mutex_unlock(&zc_attn_lock);
        return zc_error(ZC_ERR_NO_MEMORY, "attention workspace of %zu bytes", plan->total);
    }
    zc_attn_index_blocks(call, *ws, plan);
    zc_attn_pack_t(call, args->k, (float *)(*ws + plan->kt));
    call->job.kt = (const float *)(*ws + plan->kt);
    if (backward) {
        zc_attn_pack_t(call, args->v, (float *)(*ws + plan->vt));
        call->job.vt = (const float *)(*ws + plan->vt);
    }
    call->scratch = (float *)(*ws + plan->scratch);
    return ZC_OK;
}

static void zc_attn_end(void)
{
    zc_attn_ws_trim();
    pthread_mutex_unlock(&zc_attn_lock);
}

/* ---- forward ---------------------------------------------------------------- */

/* Units in decreasing order of causal cost: last query block first (under
 * a window, blocks cost about the same and the order does not matter). */
static void zc_attn_fwd_body(void *ctx, int64_t begin, int64_t end, int thread)
{
    const zc_attn_call_t *call = ctx;
    const int hq = call->job.hq;
    float *scratch = call->scratch + thread * call->scratch_stride;

    for (int64_t u = begin; u < end; u++) {
        const int64_t g = call->total_qb - 1 - u / hq;
        const int b = call->qb_seg[g];

        call->kernels->fwd_block(&call->job, b, (int)(u % hq), (int)(g - call->qb_off[b]),
                                 scratch);
    }
}

zc_status_t zc_attn_fwd(const zc_attn_args_t *args)
{
    zc_attn_totals_t totals;
    zc_attn_ws_plan_t plan;
    zc_attn_call_t call;
    char *ws;

    zc_error_clear();
    ZC_ATTN_ARGS_READ(args);
    ZC_CHECK(zc_attn_check_fwd(args, &totals));
    if (totals.total_q == 0)
        return ZC_OK;
    zc_attn_call_init(&call, args, &totals);
    ZC_CHECK(zc_attn_begin(&call, 0, &plan, &ws));
    zc_attn_rows_setup(&call, &call.job.q, args->q, call.job.hq, totals.total_q,
                       (float *)(ws + plan.qrows));
    zc_attn_rows_setup(&call, &call.job.v, args->v, call.job.hk, totals.total_kv,
                       (float *)(ws + plan.vrows));
    zc_cpu_parallel_for(call.total_qb * call.job.hq, 1, zc_attn_fwd_body, &call);
    zc_attn_end();
    return ZC_OK;
}

/* ---- backward ----------------------------------------------------------------- */

static void zc_attn_delta_body(void *ctx, int64_t begin, int64_t end, int thread)
{
    const zc_attn_call_t *call = ctx;
    const zc_attn_args_t *args = call->job.args;
    const int d = call->job.d;

    for (int64_t row = begin; row < end; row++) {
        float sum = 0.0f;

        for (int i = 0; i < d; i++)
            sum += zc_attn_load(args->dout, args->dtype, row * d + i) *
                   zc_attn_load(args->out, args->out_dtype, row * d + i);
        call->delta_out[row] = sum;
    }
}

static void zc_attn_delta(zc_attn_call_t *call, float *delta)
{
    call->delta_out = delta;
    zc_cpu_parallel_for(call->totals.total_q * call->job.hq, 256, zc_attn_delta_body, call);
}

zc_status_t zc_attn_bwd_delta(const zc_attn_args_t *args)
{
    zc_attn_totals_t totals;
    zc_attn_call_t call;

    zc_error_clear();
    ZC_ATTN_ARGS_READ(args);
    ZC_CHECK(zc_attn_check_common(args, &totals));
    ZC_CHECK(zc_attn_check_delta(args, totals.total_q));
    ZC_ARG_CHECK(totals.total_q == 0 || args->delta != NULL, "delta: NULL");
    if (totals.total_q == 0)
        return ZC_OK;
    zc_attn_call_init(&call, args, &totals);
    zc_attn_delta(&call, args->delta);
    return ZC_OK;
}

static void zc_attn_bwd_body(void *ctx, int64_t begin, int64_t end, int thread)
{
    const zc_attn_call_t *call = ctx;
    const int hk = call->job.hk;
    float *scratch = call->scratch + thread * call->scratch_stride;

    for (int64_t u = begin; u < end; u++) {
        const int64_t g = u / hk;
        const int b = call->kb_seg[g];

        call->kernels->bwd_block(&call->job, b, (int)(u % hk), (int)(g - call->job.kb_off[b]),
                                 scratch);
    }
}

static void zc_attn_dq_zero_body(void *ctx, int64_t begin, int64_t end, int thread)
{
    const zc_attn_call_t *call = ctx;

    memset(call->job.dq + begin, 0, (end - begin) * sizeof(float));
}

/* dq from the call's fp32 sum: stored, or added (ZC_ATTN_ACCUMULATE). */
static void zc_attn_dq_store_body(void *ctx, int64_t begin, int64_t end, int thread)
{
    const zc_attn_call_t *call = ctx;
    const zc_attn_args_t *args = call->job.args;

    if (args->flags & ZC_ATTN_ACCUMULATE) {
        for (int64_t i = begin; i < end; i++)
            ((float *)args->dq)[i] += call->job.dq[i];
        return;
    }
    for (int64_t i = begin; i < end; i++)
        zc_attn_store(args->dq, args->grad_dtype, i, call->job.dq[i]);
}

zc_status_t zc_attn_bwd(const zc_attn_args_t *args)
{
    zc_attn_totals_t totals;
    zc_attn_ws_plan_t plan;
    zc_attn_call_t call;
    int64_t dq_count;
    char *ws;

    zc_error_clear();
    ZC_ATTN_ARGS_READ(args);
    ZC_CHECK(zc_attn_check_bwd(args, &totals));
    if (totals.total_q == 0 && totals.total_kv == 0)
        return ZC_OK;
    zc_attn_call_init(&call, args, &totals);
    dq_count = totals.total_q * call.job.hq * call.job.d;
    ZC_CHECK(zc_attn_begin(&call, 1, &plan, &ws));
    zc_attn_rows_setup(&call, &call.job.q, args->q, call.job.hq, totals.total_q,
                       (float *)(ws + plan.qrows));
    zc_attn_rows_setup(&call, &call.job.dout, args->dout, call.job.hq, totals.total_q,
                       (float *)(ws + plan.dorows));
    zc_attn_rows_setup(&call, &call.job.k, args->k, call.job.hk, totals.total_kv,
                       (float *)(ws + plan.krows));
    call.job.delta = args->delta;
    if (call.job.delta == NULL && totals.total_q > 0) {
        zc_attn_delta(&call, (float *)(ws + plan.delta));
        call.job.delta = (const float *)(ws + plan.delta);
    }
    /* dq partials are summed in our fp32 buffer from 0, then stored or
     * added once: an accumulating call adds this call's dq as one sum, as a
     * caller adding the dq of a non-accumulating call would (a ring's kernel
     * table gives the same bits as these kernels) */
    call.job.dq = (float *)(ws + plan.dq);
    zc_cpu_parallel_for(dq_count, 1 << 14, zc_attn_dq_zero_body, &call);
    zc_cpu_parallel_for(call.job.total_kb * call.job.hk, 1, zc_attn_bwd_body, &call);
    zc_cpu_parallel_for(dq_count, 1 << 14, zc_attn_dq_store_body, &call);
    zc_attn_end();
    return ZC_OK;
}

/* ---- merge and conversion ---------------------------------------------------- */

typedef struct {
    const float *part_out;
    const float *part_lse;
    float *out;
    float *lse;
    int head_dim;
    const void *src;
    zc_datatype_t src_dtype;
    void *dst;
    zc_datatype_t dst_dtype;
} zc_attn_rows_op_t;

static void zc_attn_merge_body(void *ctx, int64_t begin, int64_t end, int thread)
{
    const zc_attn_rows_op_t *op = ctx;

    for (int64_t row = begin; row < end; row++)
        zc_attn_merge_row(op->out + row * op->head_dim, &op->lse[row],
                          op->part_out + row * op->head_dim, op->part_lse[row], op->head_dim);
}

zc_status_t zc_attn_merge(const float *part_out, const float *part_lse, int64_t tokens,
                          int num_heads, int head_dim, float *out, float *lse)
{
    zc_attn_rows_op_t op = {.part_out = part_out, .part_lse = part_lse, .out = out, .lse = lse,
                            .head_dim = head_dim};

    zc_error_clear();
    ZC_ARG_CHECK(tokens >= 0, "tokens: %lld is negative", (long long)tokens);
    ZC_ARG_CHECK(num_heads > 0, "num_heads: %d, must be positive", num_heads);
    ZC_ARG_CHECK(head_dim > 0, "head_dim: %d, must be positive", head_dim);
    if (tokens == 0)
        return ZC_OK;
    ZC_ARG_CHECK(part_out != NULL, "part_out: NULL");
    ZC_ARG_CHECK(part_lse != NULL, "part_lse: NULL");
    ZC_ARG_CHECK(out != NULL, "out: NULL");
    ZC_ARG_CHECK(lse != NULL, "lse: NULL");
    zc_cpu_parallel_for(tokens * num_heads, 256, zc_attn_merge_body, &op);
    return ZC_OK;
}

static void zc_attn_convert_body(void *ctx, int64_t begin, int64_t end, int thread)
{
    const zc_attn_rows_op_t *op = ctx;

    if (op->src_dtype == op->dst_dtype) {
        size_t size = zc_datatype_size(op->src_dtype);

        memmove((char *)op->dst + begin * size, (const char *)op->src + begin * size,
                (end - begin) * size);
        return;
    }
    for (int64_t i = begin; i < end; i++)
        zc_attn_store(op->dst, op->dst_dtype, i, zc_attn_load(op->src, op->src_dtype, i));
}

zc_status_t zc_attn_convert(const void *src, zc_datatype_t src_dtype, int64_t count,
                            zc_datatype_t dst_dtype, void *dst)
{
    zc_attn_rows_op_t op = {.src = src, .src_dtype = src_dtype, .dst = dst,
                            .dst_dtype = dst_dtype};

    zc_error_clear();
    ZC_ARG_CHECK(zc_attn_dtype_ok(src_dtype), "src_dtype: %s, must be float32 or bfloat16",
                 zc_datatype_name(src_dtype));
    ZC_ARG_CHECK(zc_attn_dtype_ok(dst_dtype), "dst_dtype: %s, must be float32 or bfloat16",
                 zc_datatype_name(dst_dtype));
    ZC_ARG_CHECK(count >= 0, "count: %lld is negative", (long long)count);
    if (count == 0)
        return ZC_OK;
    ZC_ARG_CHECK(src != NULL, "src: NULL");
    ZC_ARG_CHECK(dst != NULL, "dst: NULL");
    zc_cpu_parallel_for(count, 1 << 16, zc_attn_convert_body, &op);
    return ZC_OK;
}
