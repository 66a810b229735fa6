/* GPU timing of one attention call over a whole batch: see zc_attn_gpu_bench.h. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zc_attn_gpu_bench.h"

double zab_flops(const int32_t *cu, int batch, int hq, int d)
{
    double f = 0;

    for (int b = 0; b < batch; b++) {
        double s = cu[b + 1] - cu[b];

        f += 2.0 * s * s * d * hq;
    }
    return f;
}

#ifdef HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/attn_gpu.h"
#include "kernels/cudnn/attn_cudnn.h"

static zc_status_t zab_cuda(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return ZC_OK;
    fprintf(stderr, "# %s: %s\n", what, cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? ZC_ERR_NO_MEMORY : ZC_ERR_SYSTEM;
}

zc_status_t zab_device(int index)
{
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        return ZC_ERR_UNSUPPORTED;
    return zab_cuda(cudaSetDevice(index % n), "cudaSetDevice");
}

/* The batch's device tensors. */
typedef struct {
    void *q, *k, *v, *dout, *out_io;
    float *out, *lse, *delta, *dq, *dk, *dv;
    size_t qn, kn, rows;
} zab_bufs_t;

static void zab_free(zab_bufs_t *b)
{
    void *all[] = {b->q, b->k, b->v, b->dout, b->out_io, b->out, b->lse, b->delta,
                   b->dq, b->dk, b->dv};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cudaFree(all[i]);
}

/* n random values in [-1, 1) of dtype at a new device buffer. */
static zc_status_t zab_random(size_t n, zc_datatype_t dtype, uint64_t seed, void **dev)
{
    float *f = malloc(n * sizeof(float));
    void *h = malloc(n * zc_datatype_size(dtype));
    zc_status_t st = ZC_ERR_NO_MEMORY;

    if (f && h) {
        for (size_t i = 0; i < n; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            f[i] = (float)((seed >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
        }
        zc_attn_convert(f, ZC_FLOAT32, (int64_t)n, dtype, h);
        st = zab_cuda(cudaMalloc(dev, n * zc_datatype_size(dtype)), "cudaMalloc");
        if (st == ZC_OK)
            st = zab_cuda(cudaMemcpy(*dev, h, n * zc_datatype_size(dtype),
                                     cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    free(f);
    free(h);
    return st;
}

static zc_status_t zab_alloc(zab_bufs_t *b, zc_datatype_t dtype)
{
    zc_status_t st = ZC_OK;
    void **f32[] = {(void **)&b->out, (void **)&b->dq, (void **)&b->dk, (void **)&b->dv,
                    (void **)&b->lse, (void **)&b->delta};
    size_t n32[] = {b->qn, b->qn, b->kn, b->kn, b->rows, b->rows};

    if ((st = zab_random(b->qn, dtype, 1, &b->q)) != ZC_OK ||
        (st = zab_random(b->kn, dtype, 2, &b->k)) != ZC_OK ||
        (st = zab_random(b->kn, dtype, 3, &b->v)) != ZC_OK ||
        (st = zab_random(b->qn, dtype, 4, &b->dout)) != ZC_OK ||
        (st = zab_cuda(cudaMalloc(&b->out_io, b->qn * zc_datatype_size(dtype)), "cudaMalloc")))
        return st;
    for (size_t i = 0; i < sizeof(f32) / sizeof(f32[0]); i++)
        if ((st = zab_cuda(cudaMalloc(f32[i], n32[i] * sizeof(float)), "cudaMalloc")) != ZC_OK)
            return st;
    return ZC_OK;
}

/* The forward's starting point: out 0, lse -inf (the ring's accumulators);
 * the backward's: gradients 0. */
static void zab_reset(const zab_bufs_t *b, int backward)
{
    if (!backward) {
        float *ninf = malloc(b->rows * sizeof(float));

        cudaMemset(b->out, 0, b->qn * sizeof(float));
        for (size_t i = 0; ninf && i < b->rows; i++)
            ninf[i] = -INFINITY;
        if (ninf)
            cudaMemcpy(b->lse, ninf, b->rows * sizeof(float), cudaMemcpyHostToDevice);
        free(ninf);
        return;
    }
    cudaMemset(b->dq, 0, b->qn * sizeof(float));
    cudaMemset(b->dk, 0, b->kn * sizeof(float));
    cudaMemset(b->dv, 0, b->kn * sizeof(float));
}

/* One call of `way` for pass (0 forward, 1 backward). */
static zc_status_t zab_call(int way, int pass, const zc_attn_args_t *a, cudaStream_t stream,
                            char *why, size_t len)
{
    zc_attn_route_t route = ZC_ATTN_ON_CUDNN;
    zc_status_t st;

    if (way == ZAB_GRAPH)
        st = zc_cudnn_attn_graph_only(pass, a, stream);
    else if (way == ZAB_CUDNN)
        st = zc_cudnn_attn_launch(pass, a, stream, &route);
    else
        st = zc_attn_gpu_launch(pass, a, stream);
    if (st == ZC_OK && route != ZC_ATTN_ON_CUDNN)
        st = ZC_ERR_UNSUPPORTED, snprintf(why, len, "ran natively (%s)",
                                          zc_attn_route_name(route));
    else if (st != ZC_OK)
        snprintf(why, len, "%s: %s", zc_strerror(st), zc_get_last_error());
    return st;
}

static double zab_timed(int way, int pass, const zc_attn_args_t *a, const zab_bufs_t *b,
                        cudaStream_t stream, int warmup, int iters, char *why, size_t len)
{
    cudaEvent_t t0, t1;
    float ms = 0;
    int ok = 1;

    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    for (int it = 0; it < warmup + iters && ok; it++) {
        if (it == warmup)
            cudaEventRecord(t0, stream);
        if (way != ZAB_GRAPH && it < warmup)
            zab_reset(b, pass);
        ok = zab_call(way, pass, a, stream, why, len) == ZC_OK;
    }
    cudaEventRecord(t1, stream);
    if (ok && cudaEventSynchronize(t1) == cudaSuccess)
        cudaEventElapsedTime(&ms, t0, t1);
    else if (ok)
        snprintf(why, len, "%s", cudaGetErrorString(cudaGetLastError())), ok = 0;
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return ok ? ms / iters : 0;
}

/* max |x - ref| / max |ref| of n device floats. */
static double zab_diff(const float *x, const float *ref, size_t n)
{
    float *hx = malloc(n * sizeof(float)), *hr = malloc(n * sizeof(float));
    double e = 0, m = 1e-30;

    if (!hx || !hr || cudaMemcpy(hx, x, n * 4, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(hr, ref, n * 4, cudaMemcpyDeviceToHost) != cudaSuccess) {
        free(hx), free(hr);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)hx[i] - hr[i]));
        m = fmax(m, fabs((double)hr[i]));
    }
    free(hx), free(hr);
    return e / m;
}

zc_status_t zab_time(const int32_t *cu, int batch, int hq, int hkv, int d, zc_datatype_t dtype,
                     int warmup, int iters, zab_result_t *res)
{
    zab_bufs_t b = {0};
    zc_attn_args_t a = ZC_ATTN_ARGS_INITIALIZER;
    cudaStream_t stream;
    float *keep_out = NULL, *keep_dq = NULL;
    int32_t cu_delta[2] = {0, cu[batch]};
    zc_status_t st;

    memset(res, 0, sizeof(*res));
    res->err_out = res->err_dq = -1;
    b.qn = (size_t)cu[batch] * hq * d;
    b.kn = (size_t)cu[batch] * hkv * d;
    b.rows = (size_t)cu[batch] * hq;
    if ((st = zab_cuda(cudaStreamCreate(&stream), "cudaStreamCreate")) != ZC_OK)
        return st;
    if ((st = zab_alloc(&b, dtype)) != ZC_OK)
        goto out;
    a.batch = batch;
    a.num_heads_q = hq;
    a.num_heads_kv = hkv;
    a.head_dim = d;
    a.cu_seqlens_q = a.cu_seqlens_kv = cu;
    a.causal = 1;
    a.scale = 1.0f / sqrtf((float)d);
    a.flags = ZC_ATTN_ACCUMULATE;
    a.dtype = dtype;
    a.out_dtype = a.grad_dtype = ZC_FLOAT32;
    a.q = b.q, a.k = b.k, a.v = b.v, a.out = b.out, a.lse = b.lse;
    for (int w = 0; w < ZAB_NWAYS; w++)
        res->fwd_ms[w] = zab_timed(w, 0, &a, &b, stream, warmup, iters, res->why[w],
                                   sizeof(res->why[w]));
    /* the backward's inputs: one native forward's out (in the io type) and
     * lse, and its delta; the native one kept to compare the cuDNN one to */
    if (cudaMalloc((void **)&keep_out, b.qn * 4) != cudaSuccess ||
        cudaMalloc((void **)&keep_dq, b.qn * 4) != cudaSuccess) {
        st = ZC_ERR_NO_MEMORY;
        goto out;
    }
    zab_reset(&b, 0);
    if (zc_cudnn_attn_launch(0, &a, stream, &(zc_attn_route_t){0}) == ZC_OK) {
        cudaMemcpyAsync(keep_out, b.out, b.qn * 4, cudaMemcpyDeviceToDevice, stream);
        zab_reset(&b, 0);
    }
    st = zc_attn_gpu_launch(0, &a, stream);
    if (st == ZC_OK && res->fwd_ms[ZAB_CUDNN] > 0) {
        cudaStreamSynchronize(stream);
        res->err_out = zab_diff(keep_out, b.out, b.qn);
    }
    if (st == ZC_OK)
        st = zc_attn_convert_stream(b.out, ZC_FLOAT32, (int64_t)b.qn, dtype, b.out_io, stream);
    a.out = b.out_io;
    a.out_dtype = dtype;
    a.dout = b.dout;
    a.delta = b.delta;
    a.dq = b.dq, a.dk = b.dk, a.dv = b.dv;
    if (st == ZC_OK) {
        zc_attn_args_t dl = a;

        dl.batch = 1;
        dl.cu_seqlens_q = dl.cu_seqlens_kv = cu_delta;
        st = zc_attn_gpu_launch(2, &dl, stream);
    }
    if (st != ZC_OK)
        goto out;
    for (int w = 0; w < ZAB_NWAYS; w++)
        res->bwd_ms[w] = zab_timed(w, 1, &a, &b, stream, warmup, iters, res->why[w],
                                   sizeof(res->why[w]));
    if (res->bwd_ms[ZAB_CUDNN] > 0) {
        zab_reset(&b, 1);
        zc_cudnn_attn_launch(1, &a, stream, &(zc_attn_route_t){0});
        cudaMemcpyAsync(keep_dq, b.dq, b.qn * 4, cudaMemcpyDeviceToDevice, stream);
        zab_reset(&b, 1);
        zc_attn_gpu_launch(1, &a, stream);
        cudaStreamSynchronize(stream);
        res->err_dq = zab_diff(keep_dq, b.dq, b.qn);
    }
out:
    cudaStreamSynchronize(stream);
    cudaFree(keep_out);
    cudaFree(keep_dq);
    zab_free(&b);
    cudaStreamDestroy(stream);
    return st;
}
#else
zc_status_t zab_device(int index)
{
    (void)index;
    return ZC_ERR_UNSUPPORTED;
}

zc_status_t zab_time(const int32_t *cu, int batch, int hq, int hkv, int d, zc_datatype_t dtype,
                     int warmup, int iters, zab_result_t *res)
{
    (void)cu, (void)batch, (void)hq, (void)hkv, (void)d, (void)dtype, (void)warmup, (void)iters;
    memset(res, 0, sizeof(*res));
    return ZC_ERR_UNSUPPORTED;
}
#endif
