/* zc_attn_perf -G: see zc_attn_perf_gpu.h.
 *
 * Every row is one shape, head dim and mask, forward or backward, timed
 * with CUDA events over the same device buffers for the three
 * implementations, one after the other on one stream: the tensor-core
 * kernels (attn_mma.cu), the scalar ones (attn_cuda.cu, forced) and cuDNN's
 * fused SDPA through libzcomm's backend (kernels/cudnn: its layout
 * conversions included, as the ring engine pays them).  The backward of
 * all three starts from the scalar forward's out and lse, and its time
 * includes the delta pass.  The results of the tensor-core kernels and of
 * cuDNN are compared with the scalar kernels' (normwise relative error;
 * test_gpu checks the scalar kernels against the CPU ones).
 *
 * Shapes, FlashAttention's benchmark convention: a fixed number of tokens
 * per call (16k), heads = hidden (2048) / head dim; "4k" and "16k" are
 * sequences of that length, "arxiv", "github" and "prolong64k" varlen
 * packs sampled from the paper's length distributions (Table 2;
 * tools/zc_plan_dataset.c), cut to the same total.  FLOPs: 4 L^2 d h per
 * sequence forward, half of it causal, backward 2.5x the forward. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zc_attn_perf_gpu.h"
#include "zc_plan_dataset.h"
#include "zcomm.h"

#ifndef HAVE_CUDA
int zc_attn_perf_gpu(const zc_attn_gpu_opts_t *o)
{
    (void)o;
    fprintf(stderr, "zc_attn_perf: -G: built without CUDA\n");
    return -1;
}
#else
#include <cuda_runtime.h>

#include "kernels/attn_math.h"
#include "kernels/cuda/attn_gpu.h"
#ifdef HAVE_CUDNN
#include "kernels/cudnn/attn_cudnn.h"
#endif

/* The three implementations, in table order. */
enum { IMPL_MMA, IMPL_SCALAR, IMPL_CUDNN, NIMPL };
static const char *const impl_name[NIMPL] = {"mma", "scalar", "cudnn"};

#define GPU_TOL 2.5e-2 /* bf16 storage, as test_gpu */

typedef struct {
    void *out, *dq, *dk, *dv;
    float *lse;
} gpu_outs_t;

typedef struct {
    zc_attn_args_t a;
    int32_t *cu;
    int nseq;
    double fwd_flops;
    void *q, *k, *v, *dout;
    float *delta;
    gpu_outs_t o[NIMPL];
    cudaStream_t stream;
} gpu_case_t;

static int cuda_ok(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        fprintf(stderr, "zc_attn_perf: %s: %s\n", what, cudaGetErrorString(e));
    return e == cudaSuccess;
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;

    return cuda_ok(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc") ? p : NULL;
}

/* n bf16 values of a standard normal, generated on the host. */
static void *dev_random(int64_t n, uint64_t *rng)
{
    uint16_t *h = malloc((size_t)n * 2 + 2);
    void *d = dev_alloc((size_t)n * 2);

    for (int64_t i = 0; h && i < n; i++) {
        double u1, u2;
        *rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
        u1 = ((*rng >> 11) + 1.0) / 9007199254740993.0;
        *rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
        u2 = (*rng >> 11) / 9007199254740992.0;
        h[i] = zc_float_to_bf16((float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2)));
    }
    if (!h || !d || !cuda_ok(cudaMemcpy(d, h, (size_t)n * 2, cudaMemcpyHostToDevice), "upload")) {
        free(h);
        cudaFree(d);
        return NULL;
    }
    free(h);
    return d;
}

/* Normwise relative error of device tensor x against y (bf16 or fp32). */
static double dev_rel_err(const void *x, const void *y, int64_t n, int fp32)
{
    const size_t es = fp32 ? 4 : 2;
    char *hx = malloc((size_t)n * es + 1), *hy = malloc((size_t)n * es + 1);
    double diff = 0, ref = 0;

    if (!hx || !hy || !cuda_ok(cudaMemcpy(hx, x, (size_t)n * es, cudaMemcpyDeviceToHost), "dl") ||
        !cuda_ok(cudaMemcpy(hy, y, (size_t)n * es, cudaMemcpyDeviceToHost), "dl")) {
        free(hx), free(hy);
        return INFINITY;
    }
    for (int64_t i = 0; i < n; i++) {
        double a = fp32 ? ((float *)hx)[i] : zc_bf16_to_float(((uint16_t *)hx)[i]);
        double b = fp32 ? ((float *)hy)[i] : zc_bf16_to_float(((uint16_t *)hy)[i]);
        if (!(a == b) && !(fabs(a - b) <= diff)) /* NaN counts as infinite */
            diff = a == a && b == b ? fabs(a - b) : INFINITY;
        if (isfinite(b) && fabs(b) > ref)
            ref = fabs(b);
    }
    free(hx), free(hy);
    return diff / (ref > 0 ? ref : 1);
}

/* The lengths of shape `name` summing to `tokens`; NULL if unknown. */
static int64_t *shape_lengths(const char *name, int64_t tokens, int *n)
{
    int64_t *len = NULL;
    int ds = zc_dataset_find(name);

    if (ds >= 0) {
        zc_rng_t rng = {0x2545f4914f6cdd1dull};
        size_t count = zc_dataset_sample(ds, tokens, &rng, &len);
        *n = (int)count;
        return count ? len : NULL;
    }
    const int64_t l = strcmp(name, "4k") == 0 ? 4096 : strcmp(name, "16k") == 0 ? 16384 : 0;
    if (l == 0 || tokens < l)
        return NULL;
    *n = (int)(tokens / l);
    len = malloc(sizeof(*len) * (size_t)*n);
    for (int i = 0; len && i < *n; i++)
        len[i] = l;
    return len;
}

static void case_free(gpu_case_t *c)
{
    void *p[] = {c->q, c->k, c->v, c->dout, c->delta};

    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
        cudaFree(p[i]);
    for (int i = 0; i < NIMPL; i++) {
        cudaFree(c->o[i].out), cudaFree(c->o[i].lse), cudaFree(c->o[i].dq);
        cudaFree(c->o[i].dk), cudaFree(c->o[i].dv);
    }
    free(c->cu);
    if (c->stream)
        cudaStreamDestroy(c->stream);
}

static int case_make(gpu_case_t *c, const int64_t *len, int nseq, int d, int heads, int causal)
{
    uint64_t rng = 88172645463325252ull;
    int64_t tq = 0;

    memset(c, 0, sizeof(*c));
    c->cu = malloc(sizeof(int32_t) * ((size_t)nseq + 1));
    if (!c->cu)
        return 0;
    c->cu[0] = 0;
    for (int i = 0; i < nseq; i++) {
        c->cu[i + 1] = c->cu[i] + (int32_t)len[i];
        c->fwd_flops += 4.0 * (double)len[i] * (double)len[i] * d * heads * (causal ? 0.5 : 1);
    }
    tq = c->cu[nseq];
    c->nseq = nseq;
    const int64_t n = tq * heads * d;
    c->q = dev_random(n, &rng), c->k = dev_random(n, &rng), c->v = dev_random(n, &rng);
    c->dout = dev_random(n, &rng);
    c->delta = dev_alloc((size_t)tq * heads * 4);
    int good = c->q && c->k && c->v && c->dout && c->delta &&
               cuda_ok(cudaStreamCreate(&c->stream), "cudaStreamCreate");
    for (int i = 0; good && i < NIMPL; i++) {
        gpu_outs_t *o = &c->o[i];
        o->out = dev_alloc((size_t)n * 2), o->lse = dev_alloc((size_t)tq * heads * 4);
        o->dq = dev_alloc((size_t)n * 2), o->dk = dev_alloc((size_t)n * 2);
        o->dv = dev_alloc((size_t)n * 2);
        good = o->out && o->lse && o->dq && o->dk && o->dv;
    }
    c->a = (zc_attn_args_t){.size = sizeof(zc_attn_args_t), .batch = nseq, .num_heads_q = heads,
                            .num_heads_kv = heads, .head_dim = d, .cu_seqlens_q = c->cu,
                            .cu_seqlens_kv = c->cu, .causal = causal,
                            .scale = 1.0f / sqrtf((float)d), .dtype = ZC_BFLOAT16,
                            .out_dtype = ZC_BFLOAT16, .grad_dtype = ZC_BFLOAT16,
                            .q = c->q, .k = c->k, .v = c->v,
                            .dout = c->dout};
    return good;
}

/* One call of pass (0 forward, 1 backward) on implementation `impl`;
 * *skipped where cuDNN falls back (nothing enqueued). */
static zc_status_t launch(gpu_case_t *c, int impl, int pass, int *skipped)
{
    zc_attn_args_t a = c->a;
    const gpu_outs_t *o = &c->o[impl], *ref = &c->o[IMPL_SCALAR];

    *skipped = 0;
    a.out = pass ? ref->out : o->out;
    a.lse = pass ? ref->lse : o->lse;
    a.dq = o->dq, a.dk = o->dk, a.dv = o->dv;
    if (impl != IMPL_CUDNN)
        return zc_attn_gpu_launch_with(pass, &a,
                                       impl == IMPL_MMA ? ZC_ATTN_KERNELS_AUTO
                                                        : ZC_ATTN_KERNELS_SCALAR,
                                       c->stream);
#ifdef HAVE_CUDNN
    if (pass) { /* cuDNN's backward takes the delta */
        zc_status_t st;
        a.delta = c->delta;
        if ((st = zc_attn_gpu_launch(2, &a, c->stream)) != ZC_OK)
            return st;
    }
    return zc_cudnn_attn_launch(pass, &a, c->stream, skipped);
#else
    *skipped = 1;
    return ZC_OK;
#endif
}

/* Milliseconds per call, or a negative value: -1 failed, -2 skipped. */
static double time_impl(gpu_case_t *c, int impl, int pass, const zc_attn_gpu_opts_t *opt)
{
    cudaEvent_t t0, t1;
    float ms = 0;
    int skipped = 0;
    zc_status_t st = ZC_OK;

    if (!cuda_ok(cudaEventCreate(&t0), "cudaEventCreate") ||
        !cuda_ok(cudaEventCreate(&t1), "cudaEventCreate"))
        return -1;
    for (int i = 0; i < opt->warmup && st == ZC_OK && !skipped; i++)
        st = launch(c, impl, pass, &skipped);
    cudaEventRecord(t0, c->stream);
    for (int i = 0; i < opt->iters && st == ZC_OK && !skipped; i++)
        st = launch(c, impl, pass, &skipped);
    cudaEventRecord(t1, c->stream);
    if (st == ZC_OK && cuda_ok(cudaEventSynchronize(t1), "the timed calls"))
        cudaEventElapsedTime(&ms, t0, t1);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    if (st != ZC_OK) {
        fprintf(stderr, "zc_attn_perf: %s %s: %s: %s\n", impl_name[impl], pass ? "bwd" : "fwd",
                zc_strerror(st), zc_get_last_error());
        return -1;
    }
    return skipped ? -2 : ms / opt->iters;
}

/* Largest error of an implementation's results against the scalar ones. */
static double impl_err(const gpu_case_t *c, int impl, int pass)
{
    const int64_t n = (int64_t)c->cu[c->nseq] * c->a.num_heads_q * c->a.head_dim;
    const gpu_outs_t *o = &c->o[impl], *r = &c->o[IMPL_SCALAR];
    double e;

    if (!pass) {
        e = dev_rel_err(o->out, r->out, n, 0);
        double el = dev_rel_err(o->lse, r->lse, n / c->a.head_dim, 1);
        return e > el ? e : el;
    }
    e = dev_rel_err(o->dq, r->dq, n, 0);
    double ek = dev_rel_err(o->dk, r->dk, n, 0), ev = dev_rel_err(o->dv, r->dv, n, 0);
    e = e > ek ? e : ek;
    return e > ev ? e : ev;
}

static void print_rate(double ms, double flops)
{
    if (ms == -2)
        printf(" %8s %7s", "fallback", "-");
    else if (ms < 0)
        printf(" %8s %7s", "failed", "-");
    else
        printf(" %8.3f %7.1f", ms, flops / (ms * 1e-3) * 1e-12);
}

static int run_case(const char *shape, int d, int causal, const zc_attn_gpu_opts_t *opt)
{
    const int heads = opt->hidden / d;
    int nseq = 0, wrong = 0;
    int64_t *len = shape_lengths(shape, opt->tokens, &nseq);
    gpu_case_t c;

    if (!len) {
        fprintf(stderr, "zc_attn_perf: shape %s: no lengths for %lld tokens\n", shape,
                opt->tokens);
        return 1;
    }
    if (!case_make(&c, len, nseq, d, heads, causal) ||
        zc_attn_gpu_smem_check(0, d) != ZC_OK || zc_attn_gpu_smem_check(1, d) != ZC_OK) {
        fprintf(stderr, "zc_attn_perf: shape %s d=%d: %s\n", shape, d, zc_get_last_error());
        case_free(&c);
        free(len);
        return 1;
    }
    for (int pass = 0; pass < 2; pass++) {
        const double flops = c.fwd_flops * (pass ? 2.5 : 1.0);
        double ms[NIMPL], err[NIMPL] = {0, 0, 0};
        /* the scalar kernels first: every backward starts from their forward */
        const int order[NIMPL] = {IMPL_SCALAR, IMPL_MMA, IMPL_CUDNN};

        for (int i = 0; i < NIMPL; i++)
            ms[order[i]] = time_impl(&c, order[i], pass, opt);
        for (int i = 0; i < NIMPL; i++)
            if (i != IMPL_SCALAR && ms[i] >= 0 && ms[IMPL_SCALAR] >= 0) {
                err[i] = impl_err(&c, i, pass);
                wrong += !(err[i] <= GPU_TOL);
            }
        wrong += ms[IMPL_MMA] == -1 || ms[IMPL_SCALAR] == -1 || ms[IMPL_CUDNN] == -1;
        printf("%-11s %4d %5d %4d %6s %4s", shape, nseq, d, heads, causal ? "yes" : "no",
               pass ? "bwd" : "fwd");
        for (int i = 0; i < NIMPL; i++)
            print_rate(ms[i], flops);
        if (ms[IMPL_CUDNN] > 0 && ms[IMPL_MMA] > 0)
            printf(" %9.2f", ms[IMPL_CUDNN] / ms[IMPL_MMA]);
        else
            printf(" %9s", "-");
        if (ms[IMPL_SCALAR] > 0 && ms[IMPL_MMA] > 0)
            printf(" %10.1f", ms[IMPL_SCALAR] / ms[IMPL_MMA]);
        else
            printf(" %10s", "-");
        printf(" %9.2g %9.2g\n", err[IMPL_MMA], err[IMPL_CUDNN]);
        fflush(stdout);
    }
    case_free(&c);
    free(len);
    return wrong;
}

int zc_attn_perf_gpu(const zc_attn_gpu_opts_t *o)
{
    static const char *const shapes[] = {"4k", "16k", "arxiv", "github", "prolong64k"};
    struct cudaDeviceProp prop;
    int ndev = 0, driver = 0, runtime = 0, wrong = 0;

    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "zc_attn_perf: -G: no CUDA device\n");
        return -1;
    }
    cudaGetDeviceProperties(&prop, 0);
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    printf("# zc_attn_perf -G: libzcomm %d.%d.%d on %s (sm_%d%d), driver %d, CUDA runtime %d",
           zc_get_version() / 10000, zc_get_version() / 100 % 100, zc_get_version() % 100,
           prop.name, prop.major, prop.minor, driver, runtime);
#ifdef HAVE_CUDNN
    printf(", cuDNN %zu", zc_cudnn_version());
#else
    printf(", no cuDNN in this build");
#endif
    printf("\n# bf16, %lld tokens per call, heads = %d / head dim, %d timed + %d warmup calls; "
           "TFLOP/s: fwd 4 L^2 d h (causal half), bwd 2.5x\n"
           "# mma: tensor-core kernels; scalar: the scalar kernels; cudnn: cuDNN SDPA through "
           "libzcomm's backend; err: normwise error against scalar\n",
           o->tokens, o->hidden, o->iters, o->warmup);
    printf("# %-9s %4s %5s %4s %6s %4s %8s %7s %8s %7s %8s %7s %9s %10s %9s %9s\n", "shape",
           "seqs", "dim", "hds", "causal", "pass", "mma(ms)", "TFLOP/s", "scal(ms)", "TFLOP/s",
           "cdnn(ms)", "TFLOP/s", "mma/cudnn", "mma/scalar", "err(mma)", "err(cdnn)");
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        if (o->only && strcmp(o->only, shapes[s]) != 0)
            continue;
        for (int di = 0; di < o->ndims; di++)
            for (int causal = 1; causal >= 0; causal--) {
                if ((causal && o->full_only) || (!causal && o->causal_only))
                    continue;
                wrong += run_case(shapes[s], o->dims[di], causal, o);
            }
    }
    printf("# mma/cudnn is the speed of the tensor-core kernels relative to cuDNN (>= 0.5 is "
           "the goal); results out of tolerance (%g): %d %s\n", GPU_TOL, wrong,
           wrong ? "ERROR" : "OK");
    return wrong;
}
#endif
