/* The GPU path on a machine with CUDA devices: the CUDA kernels against
 * the CPU reference (tolerances of the attention issue: 1e-5 relative for
 * fp32 storage, 2.5e-2 for bf16/fp16), the layout kernels byte-exact, and
 * the NCCL transfers (point-to-point, remap alltoallv, routed; one rank per
 * device, or 4 ranks sharing a single device) against the host path on the
 * same data, the
 * stream-ordered ring attention in every mode against the single-process
 * reference, and a peer that dies turning into an error instead of a
 * hang.
 *
 * The device count is asked in a child process first: this process must
 * not start CUDA before it forks its rank processes.  Without a device, or
 * without an NVIDIA driver at all (as on the build machines), the whole
 * program is skipped; a driver that is there but cannot serve this CUDA
 * runtime (too old for CUDA 13, a driver/library mismatch) bails out
 * naming it, rather than skipping as if there were no GPU. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cuda/attn_gpu.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/staging.h"
#include "mp.h"
#include "stream_cases.h"
#include "src/core/memtype.h"
#include "tap.h"
#include "tools/zc_ring_attn_data.h"
#include "tools/zc_ring_attn_device.h"
#include "zcomm.h"

#ifndef HAVE_CUDA
int main(void)
{
    tap_skip_all("built without CUDA");
}
#else
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_device.h"

#define CASE_TIMEOUT_S 120

static int ndev;

/* ---- helpers ---------------------------------------------------------------- */

/* The device count (at most 100), or -1 when CUDA cannot count them. */
static int probe_devices(void)
{
    int status;
    pid_t pid = fork();

    if (pid == 0)
        _exit(zc_cuda_unusable() ? 255 : zc_cuda_devices() > 100 ? 100 : zc_cuda_devices());
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status) == 255 ? -1 : WEXITSTATUS(status);
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;

    return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
}

static void *dev_upload(const void *host, size_t bytes)
{
    void *p = dev_alloc(bytes);

    if (p && cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static int download(void *host, const void *dev, size_t bytes)
{
    if (bytes == 0)
        return 1;
    return cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}

static uint32_t rng_state = 12345;

static float frand(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1 << 24) * 2.0f - 1.0f;
}

/* max |a - b| / max |b|, the normwise relative error. */
static double rel_err(const float *a, const float *b, size_t n)
{
    double diff = 0.0, ref = 0.0;

    for (size_t i = 0; i < n; i++) {
        double d = a[i] == b[i] ? 0.0 : fabs((double)a[i] - (double)b[i]); /* -inf == -inf */
        if (d > diff || d != d)
            diff = d;
        if (isfinite(b[i]) && fabs(b[i]) > ref)
            ref = fabs(b[i]);
    }
    return diff / (ref > 0.0 ? ref : 1.0);
}

static double tolerance(zc_datatype_t dtype)
{
    return dtype == ZC_FLOAT32 ? 1e-5 : 2.5e-2;
}

/* Round fp32 values to `dtype` and back on the device (the kernels' own
 * conversion), so both paths start from the same numbers; returns the
 * device copy in `dtype`. */
static void *dev_in_dtype(float *host, size_t n, zc_datatype_t dtype)
{
    float *f32 = dev_upload(host, n * sizeof(float));
    void *d = dev_alloc(n * zc_datatype_size(dtype));

    if (!f32 || !d)
        return NULL;
    if (zc_attn_convert_stream(f32, ZC_FLOAT32, (int64_t)n, dtype, d, NULL) != ZC_OK ||
        zc_attn_convert_stream(d, dtype, (int64_t)n, ZC_FLOAT32, f32, NULL) != ZC_OK ||
        cudaDeviceSynchronize() != cudaSuccess || !download(host, f32, n * sizeof(float)))
        return NULL;
    cudaFree(f32);
    return d;
}

/* A device tensor in `dtype` read back as fp32. */
static int download_f32(float *host, const void *dev, size_t n, zc_datatype_t dtype)
{
    float *f32 = dev_alloc(n * sizeof(float));
    int good = f32 && zc_attn_convert_stream(dev, dtype, (int64_t)n, ZC_FLOAT32, f32, NULL) ==
                          ZC_OK && cudaDeviceSynchronize() == cudaSuccess &&
               download(host, f32, n * sizeof(float));

    cudaFree(f32);
    return good;
}

/* ---- kernels against the CPU reference -------------------------------------- */

typedef struct {
    int batch;
    int32_t lq[3], lk[3], q_start[3], kv_start[3];
    int hq, hk, d;
    int causal;
    int window, left, right; /* ZC_ATTN_WINDOW and its bounds (-1: unbounded) */
} shape_t;

static const shape_t shapes[] = {
    {3, {1, 37, 200}, {1, 50, 200}, {0, 13, 0}, {0, 0, 0}, 4, 2, 64, 1, 0, 0, 0},
    {2, {64, 129}, {64, 129}, {0, 0}, {0, 0}, 4, 4, 128, 1, 0, 0, 0},
    {2, {96, 33}, {160, 33}, {160, 0}, {0, 33}, 8, 1, 40, 1, 0, 0, 0},
    {1, {150}, {150}, {0}, {0}, 2, 1, 256, 1, 0, 0, 0},
    {2, {70, 5}, {90, 300}, {0}, {0}, 2, 2, 96, 0, 0, 0, 0},
    /* tests/test_attn_kernels' fixed shapes: its long sequences ... */
    {1, {2048}, {2048}, {0}, {0}, 2, 1, 128, 1, 0, 0, 0},
    {1, {3000}, {3000}, {0}, {0}, 1, 1, 64, 1, 0, 0, 0},
    {2, {1500, 1}, {1500, 1}, {0}, {0}, 4, 4, 64, 0, 0, 0, 0},
    /* ... and the causal geometry of ring steps: kv block before, on and
     * after the q block, partial overlap, q inside the kv span */
    {1, {192}, {128}, {1000}, {800}, 4, 2, 128, 1, 0, 0, 0},
    {1, {200}, {200}, {512}, {512}, 4, 2, 128, 1, 0, 0, 0},
    {1, {100}, {150}, {0}, {100}, 4, 2, 128, 1, 0, 0, 0},
    {1, {130}, {300}, {70}, {0}, 4, 2, 128, 1, 0, 0, 0},
    {1, {64}, {256}, {128}, {0}, 4, 2, 128, 1, 0, 0, 0},
    /* the tensor-core kernels (bf16, fp16): a head dim that is a multiple
     * of 8 but not 16, GQA, a bottom-right mask crossing tile edges, a
     * segment with keys only; head dim 256 over many tiles */
    {3, {300, 0, 77}, {520, 40, 77}, {220, 0, 0}, {0, 0, 0}, 8, 2, 72, 1, 0, 0, 0},
    {1, {700}, {700}, {0}, {0}, 2, 1, 256, 1, 0, 0, 0},
    /* windows (flash-attention's window_size): a causal sliding window of
     * 1024 over many tiles, a local window on bottom-right aligned blocks,
     * a window of 2, one wider than the sequence, the full mask as (-1, -1) */
    {1, {2048}, {2048}, {0}, {0}, 4, 2, 128, 1, 1, 1023, 0},
    {2, {300, 130}, {300, 200}, {0, 70}, {0, 0}, 4, 1, 64, 0, 1, 40, 40},
    {1, {500}, {500}, {0}, {0}, 2, 2, 256, 0, 1, 1, 0},
    {1, {150}, {150}, {0}, {0}, 2, 1, 64, 0, 1, 1000, 1000},
    {2, {70, 5}, {90, 300}, {0}, {0}, 2, 2, 96, 0, 1, -1, -1},
};

static int total(const int32_t *len, int batch, int32_t *cu)
{
    cu[0] = 0;
    for (int b = 0; b < batch; b++)
        cu[b + 1] = cu[b] + len[b];
    return cu[batch];
}

static void test_attention(const shape_t *s, zc_datatype_t dtype)
{
    int32_t cuq[4], cuk[4];
    const int tq = total(s->lq, s->batch, cuq), tk = total(s->lk, s->batch, cuk);
    const size_t nq = (size_t)tq * s->hq * s->d, nk = (size_t)tk * s->hk * s->d;
    const size_t nl = (size_t)tq * s->hq;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *dout = malloc(nq * 4);
    float *out = malloc(nq * 4), *lse = malloc(nl * 4), *dq = malloc(nq * 4);
    float *dk = malloc(nk * 4), *dv = malloc(nk * 4), *got = malloc((nq > nk ? nq : nk) * 4);
    float *glse = malloc(nl * 4);
    const char *tn = zc_datatype_name(dtype);
    zc_attn_args_t a = {.size = sizeof(zc_attn_args_t), .batch = s->batch, .num_heads_q = s->hq, .num_heads_kv = s->hk,
                        .head_dim = s->d, .cu_seqlens_q = cuq, .cu_seqlens_kv = cuk,
                        .q_start = s->q_start, .kv_start = s->kv_start, .causal = s->causal,
                        .scale = 1.0f / sqrtf((float)s->d),
                        .flags = s->window ? ZC_ATTN_WINDOW : 0u, .dtype = ZC_FLOAT32,
                        .out_dtype = ZC_FLOAT32, .grad_dtype = ZC_FLOAT32,
                        .window_left = s->window ? s->left : 0,
                        .window_right = s->window ? s->right : 0};
    zc_attn_args_t g = a;
    void *gq, *gk, *gv, *gdo, *gout, *gdq, *gdk, *gdv;
    float *gl;
    double e; /* each error computed before its ok(): arguments have no set order */

    for (size_t i = 0; i < nq; i++)
        q[i] = frand(), dout[i] = frand();
    for (size_t i = 0; i < nk; i++)
        k[i] = frand(), v[i] = frand();
    gq = dev_in_dtype(q, nq, dtype);
    gk = dev_in_dtype(k, nk, dtype);
    gv = dev_in_dtype(v, nk, dtype);
    gdo = dev_in_dtype(dout, nq, dtype);
    /* CPU reference on the rounded values, fp32 throughout */
    a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse, a.dout = dout, a.dq = dq, a.dk = dk,
    a.dv = dv;
    ok(zc_attn_fwd(&a) == ZC_OK && zc_attn_bwd(&a) == ZC_OK, "cpu reference d=%d %s", s->d, tn);

    gout = dev_alloc(nq * zc_datatype_size(dtype));
    gl = dev_alloc(nl * 4);
    g.dtype = g.out_dtype = g.grad_dtype = dtype;
    g.q = gq, g.k = gk, g.v = gv, g.out = gout, g.lse = gl;
    ok(zc_attn_fwd_stream(&g, NULL) == ZC_OK && cudaDeviceSynchronize() == cudaSuccess,
       "fwd runs d=%d hq=%d hk=%d %s%s on the %s kernels (%s)", s->d, s->hq, s->hk, tn,
       s->window ? " window" : "", zc_attn_gpu_mma(&g, 0) ? "tensor-core" : "scalar",
       zc_get_last_error());
    e = download_f32(got, gout, nq, dtype) ? rel_err(got, out, nq) : INFINITY;
    ok(e <= tolerance(dtype), "fwd out matches the cpu within %g (%.3g)", tolerance(dtype), e);
    e = download(glse, gl, nl * 4) ? rel_err(glse, lse, nl) : INFINITY;
    ok(e <= tolerance(dtype), "fwd lse matches the cpu (%.3g)", e);

    /* backward from the cpu's out and lse, so only the backward differs */
    cudaFree(gout);
    gout = dev_in_dtype(out, nq, dtype);
    cudaMemcpy(gl, lse, nl * 4, cudaMemcpyHostToDevice);
    gdq = dev_alloc(nq * zc_datatype_size(dtype));
    gdk = dev_alloc(nk * zc_datatype_size(dtype));
    gdv = dev_alloc(nk * zc_datatype_size(dtype));
    a.out = out;
    ok(zc_attn_bwd(&a) == ZC_OK, "cpu backward from the rounded out");
    g.out = gout, g.dout = gdo, g.dq = gdq, g.dk = gdk, g.dv = gdv;
    ok(zc_attn_bwd_stream(&g, NULL) == ZC_OK && cudaDeviceSynchronize() == cudaSuccess,
       "bwd runs (%s)", zc_get_last_error());
    e = download_f32(got, gdq, nq, dtype) ? rel_err(got, dq, nq) : INFINITY;
    ok(e <= tolerance(dtype), "bwd dq within %g (%.3g)", tolerance(dtype), e);
    e = download_f32(got, gdk, nk, dtype) ? rel_err(got, dk, nk) : INFINITY;
    ok(e <= tolerance(dtype), "bwd dk (%.3g)", e);
    e = download_f32(got, gdv, nk, dtype) ? rel_err(got, dv, nk) : INFINITY;
    ok(e <= tolerance(dtype), "bwd dv (%.3g)", e);
    void *ptrs[] = {gq, gk, gv, gdo, gout, gl, gdq, gdk, gdv};
    for (size_t i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++)
        cudaFree(ptrs[i]);
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
    free(got), free(glse);
}

/* Forward over two halves of the keys with ZC_ATTN_ACCUMULATE, as a ring
 * step does, equals the forward over all keys. */
static void test_accumulate(void)
{
    enum { L = 300, H = 2, D = 64, HALF = 130 };
    int32_t cu[2] = {0, L}, cu1[2] = {0, HALF}, cu2[2] = {0, L - HALF};
    int32_t zero[1] = {0}, off[1] = {HALF};
    float *q = malloc(sizeof(float) * L * H * D), *kv = malloc(sizeof(float) * L * H * D);
    float *ref = malloc(sizeof(float) * L * H * D), *got = malloc(sizeof(float) * L * H * D);
    float ref_lse[L * H], init_lse[L * H];
    zc_attn_args_t a = {.size = sizeof(zc_attn_args_t), .batch = 1, .num_heads_q = H, .num_heads_kv = H, .head_dim = D,
                        .cu_seqlens_q = cu, .cu_seqlens_kv = cu, .causal = 1, .scale = 0.125f,
                        .dtype = ZC_FLOAT32, .out_dtype = ZC_FLOAT32, .q = q, .k = kv, .v = kv,
                        .out = ref, .lse = ref_lse};
    size_t n = (size_t)L * H * D;

    for (size_t i = 0; i < n; i++)
        q[i] = frand(), kv[i] = frand();
    for (int i = 0; i < L * H; i++)
        init_lse[i] = -INFINITY;
    zc_attn_fwd(&a);
    float *gq = dev_upload(q, n * 4), *gkv = dev_upload(kv, n * 4), *go = dev_alloc(n * 4);
    float *gl = dev_upload(init_lse, sizeof(init_lse));
    cudaMemset(go, 0, n * 4);
    a.q = gq, a.out = go, a.lse = gl, a.flags = ZC_ATTN_ACCUMULATE;
    a.cu_seqlens_kv = cu1, a.k = a.v = gkv, a.q_start = zero, a.kv_start = zero;
    zc_status_t st = zc_attn_fwd_stream(&a, NULL);
    a.cu_seqlens_kv = cu2, a.k = a.v = gkv + (size_t)HALF * H * D, a.kv_start = off;
    if (st == ZC_OK)
        st = zc_attn_fwd_stream(&a, NULL);
    double e = st == ZC_OK && cudaDeviceSynchronize() == cudaSuccess && download(got, go, n * 4)
                   ? rel_err(got, ref, n)
                   : INFINITY;
    ok(e <= 1e-5, "two accumulated key halves equal one forward (%.3g)", e);
    cudaFree(gq), cudaFree(gkv), cudaFree(go), cudaFree(gl);
    free(q), free(kv), free(ref), free(got);
}

static void test_merge_convert(void)
{
    enum { ROWS = 333, D = 72 };
    float po[ROWS * D], pl[ROWS], o[ROWS * D], l[ROWS], got[ROWS * D], gotl[ROWS];
    uint16_t bf[ROWS * D], gbf[ROWS * D];

    for (int i = 0; i < ROWS * D; i++)
        po[i] = frand(), o[i] = frand();
    for (int r = 0; r < ROWS; r++) {
        pl[r] = r % 7 == 0 ? -INFINITY : 3.0f * frand();
        l[r] = r % 5 == 0 ? -INFINITY : 3.0f * frand();
    }
    float *gpo = dev_upload(po, sizeof(po)), *gpl = dev_upload(pl, sizeof(pl));
    float *go = dev_upload(o, sizeof(o)), *gl = dev_upload(l, sizeof(l));
    ok(zc_attn_merge(po, pl, ROWS, 1, D, o, l) == ZC_OK &&
       zc_attn_merge_stream(gpo, gpl, ROWS, 1, D, go, gl, NULL) == ZC_OK &&
       download(got, go, sizeof(got)) && download(gotl, gl, sizeof(gotl)) &&
       rel_err(got, o, ROWS * D) <= 1e-6 && rel_err(gotl, l, ROWS) <= 1e-6,
       "merge matches the cpu, empty rows included");
    /* Both sides convert the same fp32 values (the cpu's merge result):
     * the two merges agree within 1e-6 only, and a value next to a bf16
     * rounding tie would round differently. */
    void *gbfd = dev_alloc(sizeof(gbf));
    float *gsame = dev_upload(o, sizeof(o));
    ok(zc_attn_convert(o, ZC_FLOAT32, ROWS * D, ZC_BFLOAT16, bf) == ZC_OK &&
       zc_attn_convert_stream(gsame, ZC_FLOAT32, ROWS * D, ZC_BFLOAT16, gbfd, NULL) == ZC_OK &&
       download(gbf, gbfd, sizeof(gbf)) && memcmp(gbf, bf, sizeof(bf)) == 0,
       "fp32 -> bf16 conversion bit-exact with the cpu");
    cudaFree(gpo), cudaFree(gpl), cudaFree(go), cudaFree(gl), cudaFree(gbfd), cudaFree(gsame);
}

static void test_zigzag(void)
{
    static const int32_t cu[] = {0, 3, 3, 100, 1111, 4000};
    const int batch = 5, tb = 12;
    const size_t bytes = (size_t)cu[batch] * tb;
    unsigned char *seq = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
    int64_t ranges[6 * 5];
    int n, exact = 1;
    void *gseq, *gshare = dev_alloc(bytes), *gback = dev_alloc(bytes);

    for (size_t i = 0; i < bytes; i++)
        seq[i] = zc_pattern_byte(i, 99);
    gseq = dev_upload(seq, bytes);
    for (int g = 1; g <= 4; g++) {
        cudaMemset(gback, 0, bytes);
        for (int pos = 0; pos < g; pos++) {
            zc_zigzag_ranges(cu, batch, tb, g, pos, 1, ranges, &n);
            for (int r = 0; r < n; r++)
                memcpy(want + ranges[3 * r + 1], seq + ranges[3 * r], (size_t)ranges[3 * r + 2]);
            exact &= zc_zigzag_pack_stream(gseq, cu, batch, tb, g, pos, gshare, NULL) == ZC_OK &&
                     download(got, gshare, bytes) &&
                     memcmp(got, want, (size_t)(ranges[3 * (n - 1) + 1] + ranges[3 * n - 1])) ==
                         0 &&
                     zc_zigzag_unpack_stream(gshare, cu, batch, tb, g, pos, gback, NULL) == ZC_OK;
        }
        exact &= download(got, gback, bytes) && memcmp(got, seq, bytes) == 0;
    }
    ok(exact, "zigzag pack matches the host ranges; unpacking every share rebuilds the batch");
    cudaFree(gseq), cudaFree(gshare), cudaFree(gback);
    free(seq), free(want), free(got);
}

/* ---- NCCL transfers (one process per rank, one device each) ---------------- */


/* A rank on its device (rank modulo the devices), the first half of the
 * ranks on one emulated node, the NCCL communicator up.  Ranks that share a
 * device each tell NCCL they are a host of their own (NCCL_HOSTID): NCCL
 * refuses two ranks of one host on one GPU, and between hosts it moves the
 * bytes over its network transport, so one GPU still runs every case. */
static int rank_init(int rank, int nranks, int timeout_ms, zc_comm_h *comm, cudaStream_t *s)
{
    zc_config_t config = ZC_CONFIG_INITIALIZER;

    if (nranks > ndev) {
        char host[32];

        snprintf(host, sizeof(host), "zc-test-gpu-rank-%d", rank);
        setenv("NCCL_HOSTID", host, 1);
    }
    config.timeout_ms = timeout_ms;
    config.node_id = rank < nranks / 2 ? "gpu-node-a" : "gpu-node-b";
    MP_CHECK(cudaSetDevice(rank % ndev) == cudaSuccess, "cudaSetDevice");
    MP_CHECK(cudaStreamCreate(s) == cudaSuccess, "cudaStreamCreate");
    MP_CHECK(mp_comm_init(rank, nranks, &config, comm) == ZC_OK, "init");
    MP_CHECK(zc_comm_cuda_init(*comm) == ZC_OK, "zc_comm_cuda_init");
    return 0;
}

/* The shared stream-call cases (stream_cases.h) on device memory. */
static int gpu_init(int rank, int nranks, int timeout_ms, zc_comm_h *comm, void **stream)
{
    cudaStream_t s;

    if (rank_init(rank, nranks, timeout_ms, comm, &s))
        return 1;
    *stream = s;
    return 0;
}

static int gpu_upload(void *dst, const void *host, size_t bytes)
{
    return bytes && cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess;
}

static int gpu_download(void *host, const void *src, size_t bytes)
{
    return !download(host, src, bytes);
}

static void gpu_release(void *buf)
{
    cudaFree(buf);
}

static const sc_memory_t gpu_memory = {gpu_init, dev_alloc, gpu_upload, gpu_download,
                                       gpu_release};

/* Ring attention on device memory, every mode, fp32 and bf16, on two
 * emulated nodes: out, lse, dq, dk, dv against the single-process
 * reference within the attention tolerances, as the host engine is. */
static const struct {
    const char *name;
    zc_ring_attn_mode_t mode;
    unsigned plan_flags;
} ra_modes[] = {{"zeppelin", ZC_RING_ATTN_ZEPPELIN, 0},
                {"routing", ZC_RING_ATTN_ZEPPELIN, ZC_PLAN_EVEN_SPLIT},
                {"te_cp", ZC_RING_ATTN_TE_CP, ZC_PLAN_EVEN_SPLIT},
                {"llama_cp", ZC_RING_ATTN_LLAMA_CP, ZC_PLAN_EVEN_SPLIT}};

static int ring_attn_case(zc_comm_h comm, cudaStream_t s, int rank, int nranks,
                          const rad_batch_t *b, int mi)
{
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_ring_attn_args_t args = ZC_RING_ATTN_ARGS_INITIALIZER;
    zc_plan_h plan;
    rad_local_t l = {0};
    rad_device_t dev;
    double worst[RAD_NRESULTS];
    int64_t capacity = (b->total * 5 / 4 + nranks - 1) / nranks + 8;

    opts.flags = ra_modes[mi].plan_flags;
    MP_CHECK(zc_plan_create(2, nranks / 2, capacity, b->lengths, b->nseqs, &opts, &plan) == ZC_OK,
             "plan: %s", zc_get_last_error());
    MP_CHECK(rad_local_make(b, plan, rank, 0, &l) == 0, "alloc");
    rad_local_args(b, &l, &args);
    args.mode = ra_modes[mi].mode;
    MP_CHECK(rad_device_make(b, &l, &dev, &args) == ZC_OK, "device buffers");
    MP_CHECK(zc_ring_attn_fwd_stream(comm, plan, &args, s) == ZC_OK, "%s forward: %s",
             ra_modes[mi].name, zc_get_last_error());
    MP_CHECK(zc_ring_attn_bwd_stream(comm, plan, &args, s) == ZC_OK, "%s backward: %s",
             ra_modes[mi].name, zc_get_last_error());
    MP_CHECK(zc_stream_synchronize(comm, s) == ZC_OK, "synchronize: %s", zc_get_last_error());
    MP_CHECK(rad_device_download(&dev, &l) == ZC_OK, "download");
    MP_CHECK(rad_local_check(b, &l, 1, rad_tolerance(b->dtype), worst) == 0,
             "%s %s: worst out %.3g lse %.3g dq %.3g dk %.3g dv %.3g", ra_modes[mi].name,
             zc_datatype_name(b->dtype), worst[0], worst[1], worst[2], worst[3], worst[4]);
    rad_device_free(&dev);
    rad_local_free(&l);
    zc_plan_destroy(plan);
    return 0;
}

static int rank_ring_attn(int rank, int nranks, void *arg)
{
    static const int64_t lengths[] = {700, 301, 77, 1200, 33, 5, 2};
    static const zc_datatype_t dtypes[] = {ZC_FLOAT32, ZC_BFLOAT16};
    zc_comm_h comm;
    cudaStream_t s;
    (void)arg;

    setenv("ZC_ROUTED_MIN_BYTES", "1024", 1);
    if (rank_init(rank, nranks, 60000, &comm, &s))
        return 1;
    for (size_t di = 0; di < 2; di++) {
        rad_batch_t b;

        MP_CHECK(rad_batch_init(&b, lengths, sizeof(lengths) / sizeof(lengths[0]), 4, 2, 64,
                                dtypes[di], 11) == 0 && rad_batch_reference(&b, 1) == ZC_OK,
                 "reference");
        for (int mi = 0; mi < 4; mi++)
            if (ring_attn_case(comm, s, rank, nranks, &b, mi))
                return 1;
        rad_batch_free(&b);
    }
    zc_comm_destroy(comm);
    return 0;
}

/* Rank 1 leaves after one exchange with rank 0; rank 0's next receive
 * from it enqueues (the pair is connected) and its synchronize must end in
 * an error within the timeout, and stay failed.  The exchange comes first
 * because NCCL connects a pair inside the first call between them and
 * needs the peer's matching call for that: a receive from a peer that left
 * before any transfer fails or times out at enqueue. */
static int rank_peer_dies(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    cudaStream_t s;
    void *buf, *buf2;
    (void)arg;

    if (rank_init(rank, nranks, 5000, &comm, &s))
        return 1;
    buf = dev_alloc(1 << 20);
    buf2 = dev_alloc(1 << 20);
    MP_CHECK(buf && buf2 &&
                 zc_sendrecv_stream(buf, 1 << 20, 1 - rank, buf2, 1 << 20, 1 - rank, ZC_BYTE,
                                    comm, s) == ZC_OK &&
                 zc_stream_synchronize(comm, s) == ZC_OK,
             "one exchange while both ranks are there");
    /* Rank 1 leaves only once rank 0's side of the exchange is done too: a
     * rank whose NCCL transfer completed may still have bytes in flight to
     * its peer (over NCCL's sockets the sender is done when the kernel has
     * them), and leaving then fails the peer's exchange, not the wait this
     * case is about. */
    MP_CHECK(zc_barrier(comm) == ZC_OK, "both exchanges done");
    if (rank == 1)
        _exit(0);
    MP_CHECK(zc_recv_stream(buf, 1 << 20, ZC_BYTE, 1, comm, s) == ZC_OK, "enqueue");
    zc_status_t st = zc_stream_synchronize(comm, s);
    MP_CHECK(st == ZC_ERR_PEER_FAILED || st == ZC_ERR_TIMEOUT || st == ZC_ERR_TRANSPORT,
             "a dead peer is an error, not a hang (%s)", zc_strerror(st));
    MP_CHECK(zc_send_stream(buf, 1, ZC_BYTE, 1, comm, s) == st, "the error sticks");
    zc_comm_destroy(comm);
    return 0;
}

int main(void)
{
    ndev = probe_devices();
    if (ndev < 0) {
        /* No more forks: this process may start CUDA to say why. */
        printf("Bail out! CUDA cannot count the devices: %s\n",
               zc_cuda_unusable() ? zc_cuda_unusable() : "the probe process died");
        return 1;
    }
    if (ndev == 0)
        tap_skip_all("no CUDA device");
    diag("%d CUDA device(s)", ndev);
    {
        /* With one device, 4 ranks share it (2 emulated nodes of 2). */
        int n = ndev > 8 ? 8 : ndev >= 2 ? ndev : 4;
        setenv("ZC_ROUTED_MIN_BYTES", "1", 1);
        setenv("ZC_ROUTED_CHUNK", "65536", 1);
        ok(mp_run(n, CASE_TIMEOUT_S, sc_p2p, (void *)&gpu_memory) == 0,
           "%d ranks: ring sendrecv and send/recv pairs on device memory", n);
        ok(mp_run(n, CASE_TIMEOUT_S, sc_alltoallv, (void *)&gpu_memory) == 0,
           "%d ranks: alltoallv on device memory equals the host path; a count mismatch is "
           "ZC_ERR_MISMATCH on every rank", n);
        ok(mp_run(n - n % 2, CASE_TIMEOUT_S, sc_routed, (void *)&gpu_memory) == 0,
           "%d ranks on 2 emulated nodes: routed transfer equals the host path; lists that "
           "differ are ZC_ERR_MISMATCH on every rank", n - n % 2);
        ok(mp_run(n - n % 2, CASE_TIMEOUT_S, sc_layouts, (void *)&gpu_memory) == 0,
           "%d ranks on 2 emulated nodes: every move between a plan's layouts on device memory "
           "equals the host form and the batch; another plan on one rank is ZC_ERR_MISMATCH on "
           "every rank", n - n % 2);
        ok(mp_run(n - n % 2, CASE_TIMEOUT_S, rank_ring_attn, NULL) == 0,
           "%d ranks on 2 emulated nodes: zc_ring_attn_fwd/bwd_stream in every mode, fp32 and "
           "bf16, match the single-process reference", n - n % 2);
        ok(mp_run(2, CASE_TIMEOUT_S, rank_peer_dies, NULL) == 0,
           "a peer that leaves ends the wait with an error");
    }
    /* From here on this process uses CUDA itself: no more forks. */
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        test_attention(&shapes[i], ZC_FLOAT32);
        test_attention(&shapes[i], ZC_BFLOAT16);
        test_attention(&shapes[i], ZC_FLOAT16);
    }
    test_accumulate();
    test_merge_convert();
    test_zigzag();
    /* the staging pool's pinned slots and events freed, for leak checkers */
    zc_cuda_staging_teardown();
    return tap_done();
}
#endif
