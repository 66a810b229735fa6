/* GPU timing of attention over one packed batch: see zc_attn_gpu_bench.h. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_math.h"
#include "src/common/status.h"
#include "zc_attn_gpu_bench.h"
#include "zc_attn_ref.h"

const char *const zab_way_name[ZAB_NWAYS] = {"sdpa", "cudnn", "mma", "scalar"};

double zab_flops(const int32_t *cu, int batch, const zab_case_t *c)
{
    const zc_attn_mask_t mask = zc_attn_mask_make(c->window ? c->window_left : -1,
                                                  c->causal ? 0 : c->window ? c->window_right
                                                                            : -1);
    double f = 0;

    for (int b = 0; b < batch; b++) {
        const int64_t s = cu[b + 1] - cu[b];

        if (!c->window) {
            f += 4.0 * (double)s * (double)s * c->d * c->hq;
            continue;
        }
        for (int64_t i = 0; i < s; i++) {
            int64_t lo, hi;
            zc_attn_mask_keys(mask, i, 0, 0, s, &lo, &hi);
            f += 4.0 * (double)(hi - lo) * c->d * c->hq;
        }
    }
    return c->causal && !c->window ? f / 2 : f;
}

#ifdef HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/attn_gpu.h"
#include "kernels/cudnn/attn_cudnn.h"

#define ZAB_SAMPLES 32 /* query rows and key rows compared with the reference */

struct zab_batch {
    int32_t *cu;
    int batch;
    int64_t tokens;
    int width_q, width_kv;
    zc_datatype_t dtype;
    void *q, *k, *v, *dout;        /* device, dtype */
    float *host_q, *host_k, *host_v, *host_dout; /* as the device has them, or NULL */
    cudaStream_t stream;
};

/* One case's device results and the reference rows they are compared with. */
typedef struct {
    size_t qn, kn, rows;
    float *out, *lse, *ninf, *dq, *dk, *dv; /* fp32 accumulators; ninf: rows of -inf */
    void *out_io;                           /* the backward's out, in the io type */
    zar_call_t ref;                         /* the reference's view of the call */
    int64_t qtok[ZAB_SAMPLES], ktok[ZAB_SAMPLES];
    int qh[ZAB_SAMPLES], kh[ZAB_SAMPLES];
    double *ref_out, *ref_dq, *ref_dk, *ref_dv; /* ZAB_SAMPLES rows of d */
    double ref_lse[ZAB_SAMPLES];
} zab_run_t;

static zc_status_t zab_cuda(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return ZC_OK;
    return zc_error(e == cudaErrorMemoryAllocation ? ZC_ERR_NO_MEMORY : ZC_ERR_SYSTEM,
                    "%s: %s", what, cudaGetErrorString(e));
}

zc_status_t zab_device(int index)
{
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        return ZC_ERR_UNSUPPORTED;
    return zab_cuda(cudaSetDevice(index % n), "cudaSetDevice");
}

/* n random values of b's dtype on the device at *dev, and as fp32 at
 * *host when `keep` (the values the device has, rounded). */
static zc_status_t zab_input(zab_batch_t *b, int64_t n, uint64_t seed, void **dev, float **host,
                             int keep)
{
    const size_t bytes = (size_t)n * zc_datatype_size(b->dtype);
    void *h = malloc(bytes ? bytes : 1);
    zc_status_t st = ZC_ERR_NO_MEMORY;

    if (h) {
        zar_random(h, b->dtype, n, &seed);
        st = zab_cuda(cudaMalloc(dev, bytes ? bytes : 1), "cudaMalloc");
        if (st == ZC_OK)
            st = zab_cuda(cudaMemcpy(*dev, h, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
        if (st == ZC_OK && keep) {
            *host = malloc((size_t)(n ? n : 1) * sizeof(float));
            st = *host ? zc_attn_convert(h, b->dtype, n, ZC_FLOAT32, *host)
                       : zc_error(ZC_ERR_NO_MEMORY, "the reference's copy of the inputs");
        }
    }
    free(h);
    return st;
}

zc_status_t zab_open(const int32_t *cu, int batch, int width_q, int width_kv,
                     zc_datatype_t dtype, int reference, zab_batch_t **out)
{
    zab_batch_t *b = calloc(1, sizeof(*b));
    zc_status_t st;

    *out = NULL;
    if (!b || !(b->cu = malloc(sizeof(int32_t) * ((size_t)batch + 1)))) {
        free(b);
        return zc_error(ZC_ERR_NO_MEMORY, "the batch");
    }
    memcpy(b->cu, cu, sizeof(int32_t) * ((size_t)batch + 1));
    b->batch = batch;
    b->tokens = cu[batch];
    b->width_q = width_q, b->width_kv = width_kv;
    b->dtype = dtype;
    /* distinct streams of the generator, far apart */
    if ((st = zab_cuda(cudaStreamCreate(&b->stream), "cudaStreamCreate")) != ZC_OK ||
        (st = zab_input(b, b->tokens * width_q, 0x9e3779b97f4a7c15ull, &b->q, &b->host_q,
                        reference)) != ZC_OK ||
        (st = zab_input(b, b->tokens * width_kv, 0xbf58476d1ce4e5b9ull, &b->k, &b->host_k,
                        reference)) != ZC_OK ||
        (st = zab_input(b, b->tokens * width_kv, 0x94d049bb133111ebull, &b->v, &b->host_v,
                        reference)) != ZC_OK ||
        (st = zab_input(b, b->tokens * width_q, 0x2545f4914f6cdd1dull, &b->dout, &b->host_dout,
                        reference)) != ZC_OK) {
        zab_close(b);
        return st;
    }
    *out = b;
    return ZC_OK;
}

void zab_close(zab_batch_t *b)
{
    if (!b)
        return;
    cudaFree(b->q), cudaFree(b->k), cudaFree(b->v), cudaFree(b->dout);
    free(b->host_q), free(b->host_k), free(b->host_v), free(b->host_dout);
    if (b->stream)
        cudaStreamDestroy(b->stream);
    free(b->cu);
    free(b);
}

static void zab_run_free(zab_run_t *o)
{
    void *dev[] = {o->out, o->lse, o->ninf, o->dq, o->dk, o->dv, o->out_io};

    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
        cudaFree(dev[i]);
    free(o->ref_out), free(o->ref_dq), free(o->ref_dk), free(o->ref_dv);
    free((void *)o->ref.out), free((void *)o->ref.lse);
}

static zc_status_t zab_run_alloc(const zab_batch_t *b, const zab_case_t *c, zab_run_t *o)
{
    float **f32[] = {&o->out, &o->lse, &o->ninf, &o->dq, &o->dk, &o->dv};
    const size_t n32[] = {o->qn, o->rows, o->rows, o->qn, o->kn, o->kn};
    float *ninf = malloc(o->rows * sizeof(float) + 1);
    zc_status_t st = ninf ? ZC_OK : zc_error(ZC_ERR_NO_MEMORY, "the lse's start");

    for (size_t i = 0; st == ZC_OK && i < sizeof(f32) / sizeof(f32[0]); i++)
        st = zab_cuda(cudaMalloc((void **)f32[i], n32[i] * sizeof(float) + 1), "cudaMalloc");
    if (st == ZC_OK)
        st = zab_cuda(cudaMalloc(&o->out_io, o->qn * zc_datatype_size(b->dtype) + 1),
                      "cudaMalloc");
    for (size_t i = 0; st == ZC_OK && i < o->rows; i++)
        ninf[i] = -INFINITY;
    if (st == ZC_OK)
        st = zab_cuda(cudaMemcpy(o->ninf, ninf, o->rows * sizeof(float), cudaMemcpyHostToDevice),
                      "cudaMemcpy");
    free(ninf);
    if (st == ZC_OK && c->check) {
        const size_t rows = (size_t)ZAB_SAMPLES * (size_t)c->d * sizeof(double);

        o->ref_out = malloc(rows), o->ref_dq = malloc(rows);
        o->ref_dk = malloc(rows), o->ref_dv = malloc(rows);
        if (!o->ref_out || !o->ref_dq || !o->ref_dk || !o->ref_dv)
            st = zc_error(ZC_ERR_NO_MEMORY, "the reference rows");
    }
    return st;
}

/* The accumulators' start: out 0 and lse -inf (the ring's empty partial
 * result), or gradients 0. */
static void zab_clear(const zab_run_t *o, int pass, cudaStream_t s)
{
    if (pass == 0) {
        cudaMemsetAsync(o->out, 0, o->qn * sizeof(float), s);
        cudaMemcpyAsync(o->lse, o->ninf, o->rows * sizeof(float), cudaMemcpyDeviceToDevice, s);
        return;
    }
    cudaMemsetAsync(o->dq, 0, o->qn * sizeof(float), s);
    cudaMemsetAsync(o->dk, 0, o->kn * sizeof(float), s);
    cudaMemsetAsync(o->dv, 0, o->kn * sizeof(float), s);
}

/* Whether `way` takes pass of a; if not, why (a limit of the way, not a
 * failure). */
static int zab_takes(int way, int pass, const zc_attn_args_t *a, char *why, size_t len)
{
    if (way == ZAB_SDPA || way == ZAB_CUDNN) {
#ifdef HAVE_CUDNN
        zc_cudnn_key_t key;
        char reason[160];

        if (zc_cudnn_attn_route(pass, a, &key, reason, sizeof(reason)) == ZC_ATTN_ON_CUDNN)
            return 1;
        snprintf(why, len, "not a cuDNN shape: %s", reason);
#else
        snprintf(why, len, "libzcomm was built without cuDNN");
#endif
        return 0;
    }
    if (way == ZAB_MMA && !zc_attn_gpu_mma(a, pass)) {
        snprintf(why, len, "the tensor-core kernels take bf16/fp16 at head dims that are "
                 "multiples of 8 up to 256");
        return 0;
    }
    return 1;
}

/* One call of `way`; a cuDNN call that ran natively (no engine, or cuDNN
 * failed) is an error: the shape is one cuDNN takes. */
static zc_status_t zab_call(int way, int pass, const zc_attn_args_t *a, cudaStream_t s)
{
    zc_attn_route_t route = ZC_ATTN_ON_CUDNN;
    zc_status_t st;

    if (way == ZAB_SDPA)
        return zc_cudnn_attn_graph_only(pass, a, s);
    if (way != ZAB_CUDNN)
        return zc_attn_gpu_launch_with(pass, a,
                                       way == ZAB_MMA ? ZC_GPU_KERNELS_AUTO
                                                      : ZC_GPU_KERNELS_SCALAR, s);
    st = zc_cudnn_attn_launch(pass, a, s, &route);
    if (st == ZC_OK && route != ZC_ATTN_ON_CUDNN)
        st = zc_error(ZC_ERR_UNSUPPORTED, "cuDNN backend: ran natively (%s)",
                      zc_attn_route_name(route));
    return st;
}

/* max |x - ref| and max |ref| of a tensor's sampled rows; NaN counts as
 * an infinite difference. */
typedef struct {
    double diff, ref;
} zab_norm_t;

static void zab_norm_add(zab_norm_t *n, const float *x, const double *ref, int count)
{
    for (int i = 0; i < count; i++) {
        const double e = fabs((double)x[i] - ref[i]);

        if (!(e <= n->diff))
            n->diff = e == e ? e : INFINITY;
        n->ref = fmax(n->ref, fabs(ref[i]));
    }
}

static double zab_norm_err(const zab_norm_t *n, double floor)
{
    return n->diff / fmax(n->ref, floor);
}

/* d floats of a device tensor from row `row`. */
static int zab_fetch(float *host, const float *dev, int64_t row, int d)
{
    return cudaMemcpy(host, dev + row * d, (size_t)d * sizeof(float), cudaMemcpyDeviceToHost) ==
           cudaSuccess;
}

/* The error of the way's results on the sampled rows (it just ran once
 * from cleared accumulators); -1 when they cannot be read. */
static double zab_err(const zab_run_t *o, const zab_case_t *c, int pass, cudaStream_t s)
{
    const int d = c->d;
    float row[2][256], lse;
    zab_norm_t n[3] = {{0, 0}, {0, 0}, {0, 0}};

    if (cudaStreamSynchronize(s) != cudaSuccess)
        return -1;
    for (int i = 0; i < ZAB_SAMPLES; i++) {
        const int64_t qr = o->qtok[i] * c->hq + o->qh[i], kr = o->ktok[i] * c->hkv + o->kh[i];

        if (pass == 0) {
            if (!zab_fetch(row[0], o->out, qr, d) || !zab_fetch(&lse, o->lse, qr, 1))
                return -1;
            zab_norm_add(&n[0], row[0], o->ref_out + (size_t)i * d, d);
            zab_norm_add(&n[1], &lse, &o->ref_lse[i], 1);
            continue;
        }
        if (!zab_fetch(row[0], o->dq, qr, d))
            return -1;
        zab_norm_add(&n[0], row[0], o->ref_dq + (size_t)i * d, d);
        if (!zab_fetch(row[0], o->dk, kr, d) || !zab_fetch(row[1], o->dv, kr, d))
            return -1;
        zab_norm_add(&n[1], row[0], o->ref_dk + (size_t)i * d, d);
        zab_norm_add(&n[2], row[1], o->ref_dv + (size_t)i * d, d);
    }
    if (pass == 0) /* lse against max(1, |lse|): it is a log */
        return fmax(zab_norm_err(&n[0], 1e-30), zab_norm_err(&n[1], 1));
    return fmax(zab_norm_err(&n[0], 1e-30),
                fmax(zab_norm_err(&n[1], 1e-30), zab_norm_err(&n[2], 1e-30)));
}

/* Time `way` on pass of a: its first call runs from cleared accumulators
 * and is the one compared with the reference (and a warmup call), then
 * warmup - 1 more, then `iters` timed calls. */
static void zab_way(const zab_batch_t *b, const zab_run_t *o, const zab_case_t *c, int way,
                    int pass, const zc_attn_args_t *a, zab_result_t *r)
{
    const int first_timed = c->warmup > 1 ? c->warmup : 1, calls = first_timed + c->iters;
    char *why = r->why[pass][way];
    const size_t len = sizeof(r->why[pass][way]);
    cudaEvent_t t0 = NULL, t1 = NULL;
    zc_status_t st = ZC_OK;
    float ms = 0;

    if (!zab_takes(way, pass, a, why, len))
        return;
    if ((way == ZAB_MMA || way == ZAB_SCALAR) && (st = zc_attn_gpu_smem_check(pass, c->d)) != ZC_OK)
        goto out;
    if ((st = zab_cuda(cudaEventCreate(&t0), "cudaEventCreate")) != ZC_OK ||
        (st = zab_cuda(cudaEventCreate(&t1), "cudaEventCreate")) != ZC_OK)
        goto out;
    for (int it = 0; it < calls && st == ZC_OK; it++) {
        if (it == 0)
            zab_clear(o, pass, b->stream);
        if (it == first_timed)
            cudaEventRecord(t0, b->stream);
        st = zab_call(way, pass, a, b->stream);
        if (st == ZC_OK && it == 0 && c->check && way != ZAB_SDPA)
            r->err[pass][way] = zab_err(o, c, pass, b->stream);
    }
    if (st == ZC_OK) {
        cudaEventRecord(t1, b->stream);
        st = zab_cuda(cudaEventSynchronize(t1), "the timed calls");
    }
    if (st == ZC_OK)
        cudaEventElapsedTime(&ms, t0, t1);
out:
    if (st == ZC_OK) {
        r->ms[pass][way] = ms / c->iters;
    } else {
        r->failed[pass][way] = 1;
        snprintf(why, len, "%s: %s", zc_strerror(st), zc_get_last_error());
        cudaStreamSynchronize(b->stream);
        cudaGetLastError();
    }
    if (t0)
        cudaEventDestroy(t0);
    if (t1)
        cudaEventDestroy(t1);
}

/* The sampled rows and their forward reference. */
static void zab_ref_fwd(const zab_batch_t *b, const zab_case_t *c, zab_run_t *o)
{
    o->ref = (zar_call_t){.cu = b->cu, .batch = b->batch, .hq = c->hq, .hkv = c->hkv, .d = c->d,
                          .causal = c->causal, .window = c->window,
                          .window_left = c->window_left, .window_right = c->window_right,
                          .scale = 1.0f / sqrtf((float)c->d), .q = b->host_q,
                          .k = b->host_k, .v = b->host_v, .dout = b->host_dout};
    for (int i = 0; i < ZAB_SAMPLES; i++) {
        zar_sample(b->tokens, c->hq, ZAB_SAMPLES, i, &o->qtok[i], &o->qh[i]);
        zar_sample(b->tokens, c->hkv, ZAB_SAMPLES, ZAB_SAMPLES - 1 - i, &o->ktok[i], &o->kh[i]);
        zar_fwd_row(&o->ref, o->qtok[i], o->qh[i], o->ref_out + (size_t)i * c->d,
                    &o->ref_lse[i]);
    }
}

/* The backward's reference from the out and lse it takes. */
static zc_status_t zab_ref_bwd(const zab_batch_t *b, const zab_case_t *c, zab_run_t *o)
{
    const size_t es = zc_datatype_size(b->dtype);
    void *io = malloc(o->qn * es + 1);
    float *out = malloc(o->qn * sizeof(float) + 1), *lse = malloc(o->rows * sizeof(float) + 1);
    zc_status_t st = io && out && lse ? ZC_OK : zc_error(ZC_ERR_NO_MEMORY, "the reference");

    if (st == ZC_OK)
        st = zab_cuda(cudaMemcpy(io, o->out_io, o->qn * es, cudaMemcpyDeviceToHost), "out");
    if (st == ZC_OK)
        st = zab_cuda(cudaMemcpy(lse, o->lse, o->rows * sizeof(float), cudaMemcpyDeviceToHost),
                      "lse");
    if (st == ZC_OK)
        st = zc_attn_convert(io, b->dtype, (int64_t)o->qn, ZC_FLOAT32, out);
    free(io);
    if (st != ZC_OK) {
        free(out), free(lse);
        return st;
    }
    o->ref.out = out, o->ref.lse = lse;
    for (int i = 0; i < ZAB_SAMPLES; i++) {
        zar_dq_row(&o->ref, o->qtok[i], o->qh[i], o->ref_dq + (size_t)i * c->d);
        zar_dkv_row(&o->ref, o->ktok[i], o->kh[i], o->ref_dk + (size_t)i * c->d,
                    o->ref_dv + (size_t)i * c->d);
    }
    return ZC_OK;
}

zc_status_t zab_time(zab_batch_t *b, const zab_case_t *c, zab_result_t *r)
{
    zab_run_t o = {.qn = (size_t)b->tokens * c->hq * c->d, .kn = (size_t)b->tokens * c->hkv * c->d,
                   .rows = (size_t)b->tokens * c->hq};
    zc_attn_args_t a = ZC_ATTN_ARGS_INITIALIZER;
    zc_status_t st;

    memset(r, 0, sizeof(*r));
    for (int p = 0; p < 2; p++)
        for (int w = 0; w < ZAB_NWAYS; w++)
            r->err[p][w] = -1;
    if (c->check && !b->host_q)
        return zc_error(ZC_ERR_INVALID_ARG, "check: the batch kept no reference copy");
    if (c->d < 1 || c->d > 256 || c->hq < 1 || c->hkv < 1 || c->hq % c->hkv != 0 ||
        c->hq * c->d > b->width_q || c->hkv * c->d > b->width_kv)
        return zc_error(ZC_ERR_INVALID_ARG, "heads %d/%d, head dim %d: not a shape of the batch "
                        "(%d and %d values per token, head dims up to 256)", c->hq, c->hkv, c->d,
                        b->width_q, b->width_kv);
    if ((st = zab_run_alloc(b, c, &o)) != ZC_OK)
        goto out;
    if (c->check)
        zab_ref_fwd(b, c, &o);
    a.batch = b->batch;
    a.num_heads_q = c->hq;
    a.num_heads_kv = c->hkv;
    a.head_dim = c->d;
    a.cu_seqlens_q = a.cu_seqlens_kv = b->cu;
    a.causal = c->causal;
    a.scale = 1.0f / sqrtf((float)c->d);
    a.flags = ZC_ATTN_ACCUMULATE | (c->window ? ZC_ATTN_WINDOW : 0u);
    a.window_left = c->window ? c->window_left : 0;
    a.window_right = c->window ? c->window_right : 0;
    a.dtype = b->dtype;
    a.out_dtype = a.grad_dtype = ZC_FLOAT32;
    a.q = b->q, a.k = b->k, a.v = b->v, a.out = o.out, a.lse = o.lse;
    for (int w = 0; c->fwd && w < ZAB_NWAYS; w++)
        if (c->ways & (1u << w))
            zab_way(b, &o, c, w, 0, &a, r);
    if (!c->bwd)
        goto out;
    /* the backward's out and lse: one scalar forward, out in the io type */
    zab_clear(&o, 0, b->stream);
    st = zc_attn_gpu_smem_check(0, c->d);
    if (st == ZC_OK)
        st = zc_attn_gpu_launch_with(0, &a, ZC_GPU_KERNELS_SCALAR, b->stream);
    if (st == ZC_OK)
        st = zc_attn_convert_stream(o.out, ZC_FLOAT32, (int64_t)o.qn, b->dtype, o.out_io,
                                    b->stream);
    if (st == ZC_OK)
        st = zab_cuda(cudaStreamSynchronize(b->stream), "the backward's forward");
    if (st == ZC_OK && c->check)
        st = zab_ref_bwd(b, c, &o);
    if (st != ZC_OK) {
        for (int w = 0; w < ZAB_NWAYS; w++)
            if (c->ways & (1u << w)) {
                r->failed[1][w] = 1;
                snprintf(r->why[1][w], sizeof(r->why[1][w]), "the backward's inputs: %s: %s",
                         zc_strerror(st), zc_get_last_error());
            }
        st = ZC_OK;
        goto out;
    }
    a.out = o.out_io;
    a.out_dtype = b->dtype;
    a.dout = b->dout;
    a.dq = o.dq, a.dk = o.dk, a.dv = o.dv;
    for (int w = 0; w < ZAB_NWAYS; w++)
        if (c->ways & (1u << w))
            zab_way(b, &o, c, w, 1, &a, r);
out:
    cudaStreamSynchronize(b->stream);
    zab_run_free(&o);
    return st;
}
#else
zc_status_t zab_device(int index)
{
    (void)index;
    return ZC_ERR_UNSUPPORTED;
}

zc_status_t zab_open(const int32_t *cu, int batch, int width_q, int width_kv,
                     zc_datatype_t dtype, int reference, zab_batch_t **out)
{
    (void)cu, (void)batch, (void)width_q, (void)width_kv, (void)dtype, (void)reference;
    *out = NULL;
    return zc_error(ZC_ERR_UNSUPPORTED, "built without CUDA");
}

zc_status_t zab_time(zab_batch_t *b, const zab_case_t *c, zab_result_t *r)
{
    (void)b, (void)c;
    memset(r, 0, sizeof(*r));
    return zc_error(ZC_ERR_UNSUPPORTED, "built without CUDA");
}

void zab_close(zab_batch_t *b)
{
    (void)b;
}
#endif
