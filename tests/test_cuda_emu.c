/* The CUDA kernels of kernels/cuda/attn_cuda.cu (scalar) and attn_mma.cu
 * (tensor cores), compiled by the host C++ compiler against the CUDA
 * emulation in tests/cuda_emu (its README.md says what it models), run on
 * every build, GPU or not.
 *
 * Every kernel (forward, backward with its delta, merge, conversions,
 * fill/add and the zigzag range copy) runs on test_gpu's shapes and on
 * adversarial ones: head dims 1, 33, 129 and 200, empty segments, rows
 * that see no key, GQA groups of 4 and 8, ragged segments that end
 * mid-block, masks that cross tiles top-left and bottom-right, and windows
 * (flash-attention's window_size): of 1, of exactly a tile of either
 * kernel family, wider than the sequence, local (both sides), a left or a
 * right bound alone, the full mask given as (-1, -1), over length-1 and
 * empty segments and rows the window leaves without keys.  The reference
 * decides visibility from the positions alone, not the kernels' ranges.
 * Each call
 * runs on the kernels zc_attn_fwd/bwd_stream pick (attn_gpu.c: the
 * tensor-core ones for bf16 and fp16 at head dims that are multiples of 8,
 * here 40 to 256, the scalar ones for fp32 and odd head dims) with their
 * block map in launch order.  Each case runs twice, once with a block's
 * threads in thread order and once in a seeded random order; the two runs
 * must agree bit for bit (a missing barrier or a shared-memory race shows
 * up as a difference, or as NaN: shared memory, cp.async destinations
 * before their wait and outputs start as NaN).  Results are compared with
 * a float64 reference on the same rounded inputs in fp32, bf16 and fp16
 * storage, and with the CPU kernels (kernels/cpu) in fp32 and bf16, within
 * test_gpu's tolerances (1e-5 normwise for fp32 storage, 2.5e-2 for 16-bit
 * storage); rows that see no key must give exactly out = 0, lse = -inf
 * and keys no row sees exactly dk = dv = 0; the tensor-core kernels'
 * ldmatrix reads must be free of bank conflicts.  The emulation's own
 * checks (a barrier reached by part of a block, threads at different
 * barriers, a shuffle reached by part of a warp, launch limits) are tested
 * on small broken kernels, and mma.sync, ldmatrix and cp.async against
 * the PTX ISA's layouts (tests/cuda_emu/emu_selftest.cc).
 *
 * Tried by hand before this test went in (not committed), and each made
 * it fail:
 *  - removing the __syncthreads() after zk_load_kv in zk_fwd (tiles read
 *    before every warp loaded them: NaN from the poisoned shared memory),
 *    95 of 265 cases;
 *  - removing the one before it ("the previous tile is consumed": a fast
 *    warp overwrites the tile others still read), 84 cases;
 *  - removing the __syncthreads() before the dK/dV update in zk_bwd, 89;
 *  - mapping a query head to its kv head as h % hk instead of h / group,
 *    the 21 GQA cases.
 * Removing the barrier before zk_bwd's final dK/dV store changes nothing,
 * rightly: each thread stores only the elements it accumulated.
 * On the tensor-core kernels (of 271 cases):
 *  - a wrong fragment lane mapping (a[1] and a[2] of P's A operand
 *    swapped in zm_acc_to_a), 47 cases;
 *  - a missing cp.async wait (the forward's wait before its K tile), 28;
 *    the backward's wait before its step, 30;
 *  - missing barriers: the forward's barrier before a K tile, 44, or
 *    before a V tile, 44 (each both makes the other threads' copies
 *    visible and ends the reads of the buffer the next copy overwrites);
 *    the backward's barrier between writing dS^T and reading it for dQ,
 *    44; its wait and barrier before each step, 30; prefetching the next
 *    K tile into the buffer still being read (one buffer instead of two),
 *    20;
 *  - a wrong swizzle: tiles written unswizzled and read swizzled, 50; no
 *    swizzle at all (consistent, so the values are right), 1: the bank
 *    conflict check, 19332096 conflicts.
 * Under windows: dropping the left side of the tensor-core forward's
 * per-element mask (keys left of a row's band kept), 15 (out and lse of
 * every window case with a left bound that crosses a tile); counting a
 * block's work as the keys before its band's end (the causal prefix), the
 * launch order's window check.
 * Issuing the forward's next V copy above the barrier before the V tile
 * changes nothing, rightly: the barrier before the K tile of the same
 * iteration already follows every read of that buffer.
 *
 * What it cannot see: memory-ordering bugs (stores are visible at once),
 * timing, the tensor cores' own summation order, and CUDA's own math
 * functions (exp2f, log2f: host libm here; nvcc also contracts a * b + c
 * into FMA), so results on a GPU differ from these in the last bits;
 * tests/test_gpu covers that on hardware. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu/attn_cuda_emu.h"
#include "cuda_emu/cuda_emu.h"
#include "cuda_emu/emu_selftest.h"
#include "kernels/attn_math.h"
#include "kernels/cuda/attn_gpu.h"
#include "tap.h"
#include "zcomm.h"

#define MAX_SEG 4
#define SEED    0x5eedc0ffeeull

/* ---- data ------------------------------------------------------------------ */

static uint32_t rng_state = 12345;

static float frand(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1 << 24) * 2.0f - 1.0f;
}

static uint16_t f32_to_f16(float f)
{
    _Float16 h = (_Float16)f; /* the compiler's IEEE conversion, round to nearest even */
    uint16_t u;

    memcpy(&u, &h, sizeof u);
    return u;
}

static float f16_to_f32(uint16_t u)
{
    _Float16 h;

    memcpy(&h, &u, sizeof h);
    return (float)h;
}

/* Element i of a tensor of `dtype` as float, and a float stored as `dtype`. */
static float load(const void *p, zc_datatype_t dtype, size_t i)
{
    if (dtype == ZC_FLOAT32)
        return ((const float *)p)[i];
    if (dtype == ZC_FLOAT16)
        return f16_to_f32(((const uint16_t *)p)[i]);
    return zc_bf16_to_float(((const uint16_t *)p)[i]);
}

static void store(void *p, zc_datatype_t dtype, size_t i, float x)
{
    if (dtype == ZC_FLOAT32)
        ((float *)p)[i] = x;
    else if (dtype == ZC_FLOAT16)
        ((uint16_t *)p)[i] = f32_to_f16(x);
    else
        ((uint16_t *)p)[i] = zc_float_to_bf16(x);
}

/* n values of `dtype`, all NaN (as a GPU buffer holds anything). */
static void *nan_buffer(size_t n, zc_datatype_t dtype)
{
    void *p = malloc(n * zc_datatype_size(dtype) + 1);

    for (size_t i = 0; i < n; i++)
        store(p, dtype, i, NAN);
    return p;
}

static float *as_f32(const void *p, zc_datatype_t dtype, size_t n)
{
    float *f = malloc(n * sizeof(float) + 1);

    for (size_t i = 0; i < n; i++)
        f[i] = load(p, dtype, i);
    return f;
}

/* Random values rounded to `dtype`: the storage and its exact fp32 copy. */
static void *random_tensor(size_t n, zc_datatype_t dtype, float **exact)
{
    void *p = malloc(n * zc_datatype_size(dtype) + 1);

    for (size_t i = 0; i < n; i++)
        store(p, dtype, i, frand());
    *exact = as_f32(p, dtype, n);
    return p;
}

/* max |a - b| / max |b| over finite b, the normwise relative error; a NaN
 * anywhere, or a mismatch of infinities, is an infinite error. */
static double rel_err(const float *a, const double *b, size_t n)
{
    double diff = 0.0, ref = 0.0;

    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] == b[i] ? 0.0 : fabs((double)a[i] - b[i]);
        if (d != d || isinf(d))
            return INFINITY;
        if (d > diff)
            diff = d;
        if (isfinite(b[i]) && fabs(b[i]) > ref)
            ref = fabs(b[i]);
    }
    return diff / (ref > 0.0 ? ref : 1.0);
}

static double max_abs(const float *x, size_t n)
{
    double m = 0.0;

    for (size_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* rel_err against fp32 values */
static double rel_err_f(const float *a, const float *b, size_t n)
{
    double *bd = malloc(n * sizeof(double) + 1), e;

    for (size_t i = 0; i < n; i++)
        bd[i] = b[i];
    e = rel_err(a, bd, n);
    free(bd);
    return e;
}

static double tolerance(zc_datatype_t dtype)
{
    return dtype == ZC_FLOAT32 ? 1e-5 : 2.5e-2;
}

/* ---- shapes -------------------------------------------------------------- */

typedef struct {
    const char *name;
    int batch;
    int32_t lq[MAX_SEG], lk[MAX_SEG], q_start[MAX_SEG], kv_start[MAX_SEG];
    int hq, hk, d;
    int causal;
    int window, left, right; /* ZC_ATTN_WINDOW and its bounds (-1: unbounded) */
} shape_t;

static const shape_t shapes[] = {
    /* test_gpu's */
    {"gpu-1", 3, {1, 37, 200}, {1, 50, 200}, {0, 13, 0}, {0, 0, 0}, 4, 2, 64, 1, 0, 0, 0},
    {"gpu-2", 2, {64, 129}, {64, 129}, {0, 0}, {0, 0}, 4, 4, 128, 1, 0, 0, 0},
    {"gpu-3", 2, {96, 33}, {160, 33}, {160, 0}, {0, 33}, 8, 1, 40, 1, 0, 0, 0},
    {"gpu-4", 1, {150}, {150}, {0}, {0}, 2, 1, 256, 1, 0, 0, 0},
    {"gpu-5", 2, {70, 5}, {90, 300}, {0}, {0}, 2, 2, 96, 0, 0, 0, 0},
    /* adversarial */
    {"d=1", 2, {40, 17}, {40, 23}, {0, 6}, {0, 0}, 2, 1, 1, 1, 0, 0, 0},
    {"d=33 gqa4", 2, {50, 19}, {70, 19}, {20, 0}, {0, 0}, 8, 2, 33, 1, 0, 0, 0},
    {"d=129", 2, {20, 45}, {45, 20}, {25, 0}, {0, 0}, 2, 2, 129, 1, 0, 0, 0},
    {"d=200 full", 2, {40, 9}, {33, 70}, {0}, {0}, 4, 1, 200, 0, 0, 0, 0},
    {"empty segments", 4, {0, 20, 5, 0}, {10, 0, 37, 0}, {0}, {0}, 4, 1, 48, 1, 0, 0, 0},
    {"rows see no key", 2, {40, 35}, {40, 35}, {0, 3}, {20, 30}, 8, 2, 64, 1, 0, 0, 0},
    /* windows (flash-attention's window_size): bands crossing tiles on both
     * sides, top-left and bottom-right aligned */
    {"window 1", 2, {130, 70}, {130, 90}, {0, 20}, {0, 0}, 4, 2, 64, 0, 1, 0, 0},
    {"window 1 scalar", 2, {50, 40}, {50, 45}, {0, 5}, {0, 0}, 2, 1, 33, 0, 1, 0, 0},
    {"causal window = mma tile", 2, {200, 64}, {200, 64}, {0, 0}, {0, 0}, 4, 2, 64, 1, 1, 63,
     0},
    {"causal window = scalar tile", 1, {100}, {100}, {0}, {0}, 2, 2, 33, 1, 1, 31, 0},
    {"local window bottom-right", 2, {96, 130}, {160, 130}, {64, 0}, {0, 0}, 4, 1, 128, 0, 1,
     20, 20},
    {"window wider than sequence", 2, {70, 33}, {90, 33}, {20, 0}, {0, 0}, 2, 2, 64, 0, 1,
     1000, 1000},
    {"causal window wider", 1, {150}, {150}, {0}, {0}, 2, 1, 40, 1, 1, 500, 0},
    {"window 1 and empty segments", 4, {1, 0, 5, 1}, {1, 3, 0, 40}, {0, 0, 0, 39}, {0}, 4, 2,
     64, 0, 1, 2, 1},
    {"full by window gqa4", 2, {70, 5}, {90, 33}, {0}, {0}, 8, 2, 128, 0, 1, -1, -1},
    {"left bound only", 2, {150, 40}, {150, 70}, {0, 30}, {0, 0}, 2, 1, 64, 0, 1, 40, -1},
    {"right bound only", 2, {150, 40}, {150, 70}, {0, 0}, {0, 30}, 2, 1, 48, 0, 1, -1, 5},
    {"window d=256", 1, {140}, {140}, {0}, {0}, 2, 1, 256, 0, 1, 70, 10},
    {"window rows see no key", 2, {40, 35}, {60, 35}, {300, 0}, {0, 30}, 4, 2, 64, 0, 1, 50,
     3},
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

typedef struct {
    const shape_t *s;
    zc_datatype_t dtype;
    int32_t cuq[MAX_SEG + 1], cuk[MAX_SEG + 1];
    int64_t tq, tk;
    size_t nq, nk, nl;
    void *q, *k, *v, *dout;   /* storage */
    float *fq, *fk, *fv, *fdo; /* exact fp32 copies */
} case_t;

static void case_init(case_t *c, const shape_t *s, zc_datatype_t dtype)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->dtype = dtype;
    for (int b = 0; b < s->batch; b++) {
        c->cuq[b + 1] = c->cuq[b] + s->lq[b];
        c->cuk[b + 1] = c->cuk[b] + s->lk[b];
    }
    c->tq = c->cuq[s->batch];
    c->tk = c->cuk[s->batch];
    c->nq = (size_t)c->tq * s->hq * s->d;
    c->nk = (size_t)c->tk * s->hk * s->d;
    c->nl = (size_t)c->tq * s->hq;
    c->q = random_tensor(c->nq, dtype, &c->fq);
    c->k = random_tensor(c->nk, dtype, &c->fk);
    c->v = random_tensor(c->nk, dtype, &c->fv);
    c->dout = random_tensor(c->nq, dtype, &c->fdo);
}

static void case_free(case_t *c)
{
    void *p[] = {c->q, c->k, c->v, c->dout, c->fq, c->fk, c->fv, c->fdo};

    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
        free(p[i]);
}

/* The shape's mask as the API resolves it: causal hides every key right of
 * its query, a window bounds either side. */
static zc_attn_mask_t shape_mask(const shape_t *s)
{
    return zc_attn_mask_make(s->window ? s->left : -1,
                             s->causal ? 0 : s->window ? s->right : -1);
}

/* Whether query i of segment b sees its key j, from the positions and the
 * definition (zc_attn_fwd(3), "Masks"), independent of the kernels'
 * ranges. */
static int sees(const shape_t *s, int b, int64_t i, int64_t j)
{
    const zc_attn_mask_t m = shape_mask(s);
    const int64_t p = s->q_start[b] + i, k = s->kv_start[b] + j;

    return (m.left < 0 || k >= p - m.left) && (m.right < 0 || k <= p + m.right);
}

/* Whether no row sees more than one key (a window of 1): then p = 1 and
 * dS = dP - delta vanishes, so dq and dk are rounding noise of two fp32
 * sums, comparable only in absolute terms. */
static int one_key_rows(const shape_t *s)
{
    for (int b = 0; b < s->batch; b++)
        for (int64_t i = 0; i < s->lq[b]; i++) {
            int n = 0;
            for (int64_t j = 0; j < s->lk[b]; j++)
                n += sees(s, b, i, j);
            if (n > 1)
                return 0;
        }
    return 1;
}

static int row_sees_any(const shape_t *s, int b, int64_t i)
{
    for (int64_t j = 0; j < s->lk[b]; j++)
        if (sees(s, b, i, j))
            return 1;
    return 0;
}

/* ---- float64 reference -------------------------------------------------------- */

/* Forward: out [tq][hq][d], lse [tq][hq] (-inf and out 0 for a row that
 * sees no key). */
static void ref_fwd(const case_t *c, double *out, double *lse)
{
    const shape_t *s = c->s;
    const int d = s->d, group = s->hq / s->hk;
    const double scale = 1.0 / sqrt((double)d);
    double *p = malloc(sizeof(double) * (c->tk + 1));

    for (int b = 0; b < s->batch; b++)
        for (int64_t i = 0; i < s->lq[b]; i++)
            for (int h = 0; h < s->hq; h++) {
                const int64_t row = (c->cuq[b] + i) * s->hq + h;
                const float *q = c->fq + row * d;
                double m = -INFINITY, l = 0.0;
                int any = 0;
                for (int64_t j = 0; j < s->lk[b]; j++) {
                    if (!sees(s, b, i, j))
                        continue;
                    any = 1;
                    const float *k = c->fk + ((c->cuk[b] + j) * s->hk + h / group) * d;
                    double dot = 0.0;
                    for (int e = 0; e < d; e++)
                        dot += (double)q[e] * k[e];
                    p[j] = dot * (double)(float)scale;
                    m = p[j] > m ? p[j] : m;
                }
                for (int64_t j = 0; j < s->lk[b]; j++)
                    if (sees(s, b, i, j))
                        l += (p[j] = exp(p[j] - m));
                for (int e = 0; e < d; e++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < s->lk[b]; j++)
                        if (sees(s, b, i, j))
                            acc += p[j] * c->fv[((c->cuk[b] + j) * s->hk + h / group) * d + e];
                    out[row * d + e] = any ? acc / l : 0.0;
                }
                lse[row] = any ? m + log(l) : -INFINITY;
            }
    free(p);
}

/* Backward from out (fp32 values of the stored out) and lse (as stored):
 * delta, dq, dk, dv. */
static void ref_bwd(const case_t *c, const float *out, const float *lse, double *delta,
                    double *dq, double *dk, double *dv)
{
    const shape_t *s = c->s;
    const int d = s->d, group = s->hq / s->hk;
    const float scale = 1.0f / sqrtf((float)d);

    memset(dq, 0, c->nq * sizeof(double));
    memset(dk, 0, c->nk * sizeof(double));
    memset(dv, 0, c->nk * sizeof(double));
    for (int64_t r = 0; r < (int64_t)c->nl; r++) {
        double acc = 0.0;
        for (int e = 0; e < d; e++)
            acc += (double)c->fdo[r * d + e] * out[r * d + e];
        delta[r] = acc;
    }
    for (int b = 0; b < s->batch; b++)
        for (int64_t i = 0; i < s->lq[b]; i++)
            for (int h = 0; h < s->hq; h++) {
                const int64_t row = (c->cuq[b] + i) * s->hq + h;
                const float *q = c->fq + row * d, *dout = c->fdo + row * d;
                if (lse[row] == -INFINITY)
                    continue;
                for (int64_t j = 0; j < s->lk[b]; j++) {
                    if (!sees(s, b, i, j))
                        continue;
                    const int64_t kr = ((c->cuk[b] + j) * s->hk + h / group) * d;
                    double sc = 0.0, dp = 0.0, p, ds;
                    for (int e = 0; e < d; e++) {
                        sc += (double)q[e] * c->fk[kr + e];
                        dp += (double)dout[e] * c->fv[kr + e];
                    }
                    p = exp(sc * scale - lse[row]);
                    ds = p * (dp - delta[row]) * scale;
                    for (int e = 0; e < d; e++) {
                        dq[row * d + e] += ds * c->fk[kr + e];
                        dk[kr + e] += ds * q[e];
                        dv[kr + e] += p * dout[e];
                    }
                }
            }
}

/* ---- emulated launches ---------------------------------------------------------- */

typedef struct {
    int32_t *blocks;
    int nblocks;
    int mma; /* the tensor-core kernels run the call */
} blocks_t;

/* The call's arguments as the public API takes them (host pointers). */
static zc_attn_args_t case_args(const case_t *c)
{
    const shape_t *s = c->s;
    zc_attn_args_t a = {.size = sizeof(zc_attn_args_t), .batch = s->batch,
                        .num_heads_q = s->hq, .num_heads_kv = s->hk, .head_dim = s->d,
                        .cu_seqlens_q = c->cuq, .cu_seqlens_kv = c->cuk,
                        .q_start = s->q_start, .kv_start = s->kv_start, .causal = s->causal,
                        .scale = 1.0f / sqrtf((float)s->d),
                        .flags = s->window ? ZC_ATTN_WINDOW : 0u, .dtype = c->dtype,
                        .out_dtype = c->dtype, .grad_dtype = c->dtype, .q = c->q, .k = c->k,
                        .v = c->v, .dout = c->dout, .window_left = s->window ? s->left : 0,
                        .window_right = s->window ? s->right : 0};
    return a;
}

/* The block map of the kernels zc_attn_fwd/bwd_stream would run, in their
 * launch order. */
static blocks_t make_blocks(const case_t *c, int backward)
{
    const zc_attn_args_t args = case_args(c);
    const int32_t *cu = backward ? c->cuk : c->cuq;
    blocks_t bl;

    bl.mma = zc_attn_gpu_mma(&args, backward);
    const int rows = zc_attn_gpu_block_rows(backward, bl.mma, c->s->d);
    int64_t n = zc_attn_gpu_blocks(cu, c->s->batch, rows, NULL);
    bl.blocks = malloc(sizeof(int32_t) * 2 * (size_t)n + 1);
    bl.nblocks = (int)zc_attn_gpu_blocks(cu, c->s->batch, rows, bl.blocks);
    if (zc_attn_gpu_order(&args, backward, rows, bl.blocks, n) != ZC_OK)
        bl.nblocks = -1;
    return bl;
}

static zc_attn_cuda_t kernel_args(const case_t *c, const blocks_t *bl)
{
    const shape_t *s = c->s;
    const float scale = 1.0f / sqrtf((float)s->d);
    zc_attn_cuda_t a = {.hq = s->hq, .hk = s->hk, .d = s->d, .mask = shape_mask(s),
                        .scale = scale, .scale2 = scale * ZC_ATTN_LOG2E, .dtype = c->dtype,
                        .out_dtype = c->dtype, .grad_dtype = c->dtype, .cu_q = c->cuq,
                        .cu_kv = c->cuk, .q_start = s->q_start, .kv_start = s->kv_start,
                        .blocks = bl->blocks, .nblocks = bl->nblocks, .q = c->q, .k = c->k,
                        .v = c->v, .dout = c->dout};
    return a;
}

static int fwd_kernel(const zc_attn_cuda_t *a, int mma)
{
    return mma ? zc_attn_mma_fwd(a, NULL) : zc_attn_cuda_fwd(a, NULL);
}

static int bwd_kernel(const zc_attn_cuda_t *a, int mma)
{
    return mma ? zc_attn_mma_bwd(a, NULL) : zc_attn_cuda_bwd(a, NULL);
}

static int launched(int err, const char *what)
{
    if (err != 0)
        diag("%s: launch failed (%d): %s", what, err, zc_emu_last_error());
    return err == 0;
}

/* Forward outputs of one schedule. */
typedef struct {
    void *out;
    float *lse;
} fwd_out_t;

static int run_fwd(const case_t *c, zc_emu_schedule_t sched, fwd_out_t *r)
{
    blocks_t bl = make_blocks(c, 0);
    zc_attn_cuda_t a = kernel_args(c, &bl);
    int good;

    r->out = nan_buffer(c->nq, c->dtype);
    r->lse = nan_buffer(c->nl, ZC_FLOAT32);
    a.out = r->out;
    a.lse = r->lse;
    zc_emu_set_schedule(sched, SEED);
    good = launched(fwd_kernel(&a, bl.mma), "forward");
    free(bl.blocks);
    return good;
}

/* Backward outputs of one schedule, as zc_attn_bwd_stream makes them: the
 * delta kernel, dq zeroed in fp32 and added into by the backward kernel,
 * then converted to the gradient dtype. */
typedef struct {
    float *delta, *dq32;
    void *dq, *dk, *dv;
} bwd_out_t;

static int run_bwd(const case_t *c, const void *out, const float *lse, zc_emu_schedule_t sched,
                   bwd_out_t *r)
{
    blocks_t bl = make_blocks(c, 1);
    zc_attn_cuda_t a = kernel_args(c, &bl);
    int good;

    r->delta = nan_buffer(c->nl, ZC_FLOAT32);
    r->dq32 = calloc(c->nq + 1, sizeof(float));
    r->dq = nan_buffer(c->nq, c->dtype);
    r->dk = nan_buffer(c->nk, c->dtype);
    r->dv = nan_buffer(c->nk, c->dtype);
    a.out = (void *)out;
    a.lse = (float *)lse;
    a.delta = r->delta;
    a.dq = r->dq32;
    a.dk = r->dk;
    a.dv = r->dv;
    zc_emu_set_schedule(sched, SEED);
    good = launched(zc_attn_cuda_delta(c->dout, c->dtype, out, c->dtype, r->delta,
                                       (int64_t)c->nl, c->s->d, NULL), "delta") &&
           launched(bwd_kernel(&a, bl.mma), "backward") &&
           launched(zc_attn_cuda_convert(r->dq32, ZC_FLOAT32, (int64_t)c->nq, r->dq, c->dtype,
                                         NULL), "dq conversion");
    free(bl.blocks);
    return good;
}

static void bwd_free(bwd_out_t *r)
{
    free(r->delta), free(r->dq32), free(r->dq), free(r->dk), free(r->dv);
}

/* ---- attention cases ---------------------------------------------------------------- */

/* Rows that see no key: out exactly 0 and lse -inf. */
static int empty_rows_exact(const case_t *c, const void *out, const float *lse)
{
    const shape_t *s = c->s;

    for (int b = 0; b < s->batch; b++)
        for (int64_t i = 0; i < s->lq[b]; i++) {
            if (row_sees_any(s, b, i))
                continue;
            for (int h = 0; h < s->hq; h++) {
                const int64_t row = (c->cuq[b] + i) * s->hq + h;
                if (lse[row] != -INFINITY)
                    return 0;
                for (int e = 0; e < s->d; e++)
                    if (load(out, c->dtype, row * s->d + e) != 0.0f)
                        return 0;
            }
        }
    return 1;
}

/* Keys that no row sees: dk = dv = 0 exactly. */
static int unseen_keys_exact(const case_t *c, const void *dk, const void *dv)
{
    const shape_t *s = c->s;

    for (int b = 0; b < s->batch; b++)
        for (int64_t j = 0; j < s->lk[b]; j++) {
            int seen = 0;
            for (int64_t i = 0; i < s->lq[b] && !seen; i++)
                seen = sees(s, b, i, j);
            for (int e = 0; !seen && e < s->hk * s->d; e++) {
                const size_t at = (size_t)(c->cuk[b] + j) * s->hk * s->d + e;
                if (load(dk, c->dtype, at) != 0.0f || load(dv, c->dtype, at) != 0.0f)
                    return 0;
            }
        }
    return 1;
}

static int same_bytes(const void *a, const void *b, size_t n)
{
    return memcmp(a, b, n) == 0;
}

static void test_attention(const shape_t *s, zc_datatype_t dtype)
{
    const char *tn = zc_datatype_name(dtype);
    const size_t es = zc_datatype_size(dtype);
    case_t c;
    fwd_out_t f[2];
    bwd_out_t g[2];
    double *rout, *rlse, *rdelta, *rdq, *rdk, *rdv;
    float *got, *lse_in;
    void *out_in;
    int ran;

    case_init(&c, s, dtype);
    rout = malloc(c.nq * sizeof(double) + 1), rlse = malloc(c.nl * sizeof(double) + 1);
    rdelta = malloc(c.nl * sizeof(double) + 1), rdq = malloc(c.nq * sizeof(double) + 1);
    rdk = malloc(c.nk * sizeof(double) + 1), rdv = malloc(c.nk * sizeof(double) + 1);
    ref_fwd(&c, rout, rlse);
    {
        const zc_attn_args_t args = case_args(&c);
        diag("%s %s: %s forward, %s backward", s->name, tn,
             zc_attn_gpu_mma(&args, 0) ? "tensor-core" : "scalar",
             zc_attn_gpu_mma(&args, 1) ? "tensor-core" : "scalar");
    }

    /* forward */
    ran = run_fwd(&c, ZC_EMU_THREAD_ORDER, &f[0]) & run_fwd(&c, ZC_EMU_RANDOM, &f[1]);
    ok(ran && same_bytes(f[0].out, f[1].out, c.nq * es) &&
           same_bytes(f[0].lse, f[1].lse, c.nl * 4),
       "%s %s fwd: thread order and random schedule agree bit for bit", s->name, tn);
    got = as_f32(f[0].out, dtype, c.nq);
    double eo = rel_err(got, rout, c.nq), el = rel_err(f[0].lse, rlse, c.nl);
    ok(ran && eo <= tolerance(dtype) && el <= tolerance(dtype),
       "%s %s fwd: out and lse match float64 (%.3g, %.3g)", s->name, tn, eo, el);
    ok(ran && empty_rows_exact(&c, f[0].out, f[0].lse),
       "%s %s fwd: rows that see no key are out = 0, lse = -inf", s->name, tn);
    if (dtype != ZC_FLOAT16) {
        /* The CPU kernels on the same inputs */
        void *cout = nan_buffer(c.nq, dtype);
        float *clse = nan_buffer(c.nl, ZC_FLOAT32), *cgot;
        zc_attn_args_t a = case_args(&c);
        a.out = cout;
        a.lse = clse;
        zc_status_t st = zc_attn_fwd(&a);
        cgot = as_f32(cout, dtype, c.nq);
        eo = rel_err_f(got, cgot, c.nq), el = rel_err_f(f[0].lse, clse, c.nl);
        ok(st == ZC_OK && ran && eo <= tolerance(dtype) && el <= tolerance(dtype),
           "%s %s fwd: out and lse match the CPU kernels (%.3g, %.3g)", s->name, tn, eo, el);
        free(cout), free(clse), free(cgot);
    }
    free(got);

    /* backward, from the reference's out (stored in dtype) and lse, so that
     * only the backward is under test */
    out_in = malloc(c.nq * es + 1);
    lse_in = malloc(c.nl * sizeof(float) + 1);
    for (size_t i = 0; i < c.nq; i++)
        store(out_in, dtype, i, (float)rout[i]);
    for (size_t i = 0; i < c.nl; i++)
        lse_in[i] = (float)rlse[i];
    float *fout = as_f32(out_in, dtype, c.nq);
    ref_bwd(&c, fout, lse_in, rdelta, rdq, rdk, rdv);
    ran = run_bwd(&c, out_in, lse_in, ZC_EMU_THREAD_ORDER, &g[0]) &
          run_bwd(&c, out_in, lse_in, ZC_EMU_RANDOM, &g[1]);
    ok(ran && same_bytes(g[0].delta, g[1].delta, c.nl * 4) &&
           same_bytes(g[0].dq32, g[1].dq32, c.nq * 4) && same_bytes(g[0].dk, g[1].dk, c.nk * es) &&
           same_bytes(g[0].dv, g[1].dv, c.nk * es),
       "%s %s bwd: thread order and random schedule agree bit for bit", s->name, tn);
    double ed = rel_err(g[0].delta, rdelta, c.nl);
    float *gdq = as_f32(g[0].dq, dtype, c.nq), *gdk = as_f32(g[0].dk, dtype, c.nk);
    float *gdv = as_f32(g[0].dv, dtype, c.nk);
    double eq = rel_err(gdq, rdq, c.nq), ek = rel_err(gdk, rdk, c.nk), ev = rel_err(gdv, rdv, c.nk);
    ok(ran && ed <= 1e-5 && eq <= tolerance(dtype) && ek <= tolerance(dtype) &&
           ev <= tolerance(dtype),
       "%s %s bwd: delta, dq, dk, dv match float64 (%.3g, %.3g, %.3g, %.3g)", s->name, tn, ed,
       eq, ek, ev);
    ok(ran && unseen_keys_exact(&c, g[0].dk, g[0].dv),
       "%s %s bwd: keys no row sees get dk = dv = 0", s->name, tn);
    if (dtype != ZC_FLOAT16) {
        void *cdq = nan_buffer(c.nq, dtype), *cdk = nan_buffer(c.nk, dtype);
        void *cdv = nan_buffer(c.nk, dtype);
        zc_attn_args_t a = case_args(&c);
        a.out = out_in;
        a.lse = lse_in;
        a.dq = cdq;
        a.dk = cdk;
        a.dv = cdv;
        zc_status_t st = zc_attn_bwd(&a);
        float *cq = as_f32(cdq, dtype, c.nq), *ck = as_f32(cdk, dtype, c.nk);
        float *cv = as_f32(cdv, dtype, c.nk);
        eq = rel_err_f(gdq, cq, c.nq), ek = rel_err_f(gdk, ck, c.nk);
        ev = rel_err_f(gdv, cv, c.nk);
        if (one_key_rows(s) && max_abs(cv, c.nk) > 0.0) {
            /* dq, dk ~ 0: their differences against the scale of dv */
            const double dv_max = max_abs(cv, c.nk);
            eq *= max_abs(cq, c.nq) / dv_max;
            ek *= max_abs(ck, c.nk) / dv_max;
        }
        ok(st == ZC_OK && ran && eq <= tolerance(dtype) && ek <= tolerance(dtype) &&
               ev <= tolerance(dtype),
           "%s %s bwd: dq, dk, dv match the CPU kernels (%.3g, %.3g, %.3g)", s->name, tn, eq, ek,
           ev);
        free(cdq), free(cdk), free(cdv), free(cq), free(ck), free(cv);
    }
    free(gdq), free(gdk), free(gdv), free(fout), free(out_in), free(lse_in);
    for (int i = 0; i < 2; i++) {
        free(f[i].out), free(f[i].lse);
        bwd_free(&g[i]);
    }
    free(rout), free(rlse), free(rdelta), free(rdq), free(rdk), free(rdv);
    case_free(&c);
}

/* A ring step: the forward over the keys in two calls with
 * ZC_ATTN_ACCUMULATE (fp32 out from 0 / -inf, the second call's keys placed
 * by kv_start), and the backward over the same two calls adding into fp32
 * dq, dk, dv that start non-zero, equal one call over all keys. */
static void test_accumulate(const shape_t *s, zc_datatype_t dtype)
{
    const char *tn = zc_datatype_name(dtype);
    case_t c;
    double *rout, *rlse, *rdelta, *rdq, *rdk, *rdv;
    int good = 1, same = 1;
    float *res[2][5];

    case_init(&c, s, dtype);
    rout = malloc(c.nq * sizeof(double) + 1), rlse = malloc(c.nl * sizeof(double) + 1);
    rdelta = malloc(c.nl * sizeof(double) + 1), rdq = malloc(c.nq * sizeof(double) + 1);
    rdk = malloc(c.nk * sizeof(double) + 1), rdv = malloc(c.nk * sizeof(double) + 1);
    ref_fwd(&c, rout, rlse);
    float *fout = malloc(c.nq * sizeof(float) + 1), *flse = malloc(c.nl * sizeof(float) + 1);
    for (size_t i = 0; i < c.nq; i++)
        fout[i] = (float)rout[i];
    for (size_t i = 0; i < c.nl; i++)
        flse[i] = (float)rlse[i];
    ref_bwd(&c, fout, flse, rdelta, rdq, rdk, rdv);

    for (int sched = 0; sched < 2; sched++) {
        float *out = calloc(c.nq + 1, sizeof(float)), *lse = malloc(c.nl * sizeof(float) + 1);
        float *dq = malloc(c.nq * sizeof(float) + 1), *dk = malloc(c.nk * sizeof(float) + 1);
        float *dv = malloc(c.nk * sizeof(float) + 1), *delta = nan_buffer(c.nl, ZC_FLOAT32);
        for (size_t i = 0; i < c.nl; i++)
            lse[i] = -INFINITY;
        for (size_t i = 0; i < c.nq; i++)
            dq[i] = 0.5f;
        for (size_t i = 0; i < c.nk; i++)
            dk[i] = 0.25f, dv[i] = -0.25f;
        zc_emu_set_schedule(sched ? ZC_EMU_RANDOM : ZC_EMU_THREAD_ORDER, SEED);
        good &= launched(zc_attn_cuda_delta(c.dout, dtype, fout, ZC_FLOAT32, delta,
                                            (int64_t)c.nl, s->d, NULL), "delta");
        for (int half = 0; half < 2; half++) {
            /* keys [0, split) then [split, lk) of every segment */
            int32_t cuk[MAX_SEG + 1] = {0}, kvs[MAX_SEG];
            const char *kb = c.k, *vb = c.v;
            void *kh = malloc(c.nk * zc_datatype_size(dtype) + 1);
            void *vh = malloc(c.nk * zc_datatype_size(dtype) + 1);
            const size_t tok = (size_t)s->hk * s->d * zc_datatype_size(dtype);
            for (int b = 0; b < s->batch; b++) {
                const int32_t split = s->lk[b] * 2 / 5, from = half ? split : 0;
                const int32_t len = half ? s->lk[b] - split : split;
                cuk[b + 1] = cuk[b] + len;
                kvs[b] = s->kv_start[b] + from;
                memcpy((char *)kh + cuk[b] * tok, kb + (c.cuk[b] + from) * tok, len * tok);
                memcpy((char *)vh + cuk[b] * tok, vb + (c.cuk[b] + from) * tok, len * tok);
            }
            case_t hc = c;
            hc.k = kh, hc.v = vh;
            memcpy(hc.cuk, cuk, sizeof cuk);
            blocks_t bq = make_blocks(&hc, 0), bk = make_blocks(&hc, 1);
            zc_attn_cuda_t a = kernel_args(&hc, &bq);
            a.kv_start = kvs;
            a.k = kh, a.v = vh;
            a.flags = ZC_ATTN_ACCUMULATE;
            a.out_dtype = a.grad_dtype = ZC_FLOAT32;
            a.out = out, a.lse = lse;
            good &= launched(fwd_kernel(&a, bq.mma), "accumulating forward");
            a.blocks = bk.blocks, a.nblocks = bk.nblocks;
            /* the backward reads the final out and lse (the reference's) */
            a.out = fout, a.lse = flse, a.delta = delta;
            float *dkh = malloc(c.nk * sizeof(float) + 1), *dvh = malloc(c.nk * sizeof(float) + 1);
            const size_t ftok = (size_t)s->hk * s->d;
            for (int b = 0; b < s->batch; b++) {
                const int32_t from = half ? s->lk[b] * 2 / 5 : 0;
                memcpy(dkh + cuk[b] * ftok, dk + (c.cuk[b] + from) * ftok,
                       (cuk[b + 1] - cuk[b]) * ftok * sizeof(float));
                memcpy(dvh + cuk[b] * ftok, dv + (c.cuk[b] + from) * ftok,
                       (cuk[b + 1] - cuk[b]) * ftok * sizeof(float));
            }
            a.dq = dq, a.dk = dkh, a.dv = dvh;
            good &= launched(bwd_kernel(&a, bk.mma), "accumulating backward");
            for (int b = 0; b < s->batch; b++) {
                const int32_t from = half ? s->lk[b] * 2 / 5 : 0;
                memcpy(dk + (c.cuk[b] + from) * ftok, dkh + cuk[b] * ftok,
                       (cuk[b + 1] - cuk[b]) * ftok * sizeof(float));
                memcpy(dv + (c.cuk[b] + from) * ftok, dvh + cuk[b] * ftok,
                       (cuk[b + 1] - cuk[b]) * ftok * sizeof(float));
            }
            free(kh), free(vh), free(dkh), free(dvh), free(bq.blocks), free(bk.blocks);
        }
        res[sched][0] = out, res[sched][1] = lse, res[sched][2] = dq, res[sched][3] = dk;
        res[sched][4] = dv;
        free(delta);
    }
    const size_t n[5] = {c.nq, c.nl, c.nq, c.nk, c.nk};
    for (int i = 0; i < 5; i++)
        same &= same_bytes(res[0][i], res[1][i], n[i] * sizeof(float));
    for (size_t i = 0; i < c.nq; i++)
        rdq[i] += 0.5;
    for (size_t i = 0; i < c.nk; i++)
        rdk[i] += 0.25, rdv[i] -= 0.25;
    /* fp32 accumulation whatever the storage: the scalar kernels' out and
     * gradients are within fp32's tolerance of the reference on the rounded
     * inputs; the tensor-core kernels round P and dS to the storage type
     * for their second products (as FlashAttention-2 does), so theirs are
     * within the storage type's, and the lse within fp32's either way */
    const zc_attn_args_t args = case_args(&c);
    const double tol = zc_attn_gpu_mma(&args, 0) || zc_attn_gpu_mma(&args, 1) ? tolerance(dtype)
                                                                              : 1e-5;
    double eo = rel_err(res[0][0], rout, c.nq), el = rel_err(res[0][1], rlse, c.nl);
    double eq = rel_err(res[0][2], rdq, c.nq), ek = rel_err(res[0][3], rdk, c.nk);
    double ev = rel_err(res[0][4], rdv, c.nk);
    ok(good && same, "%s %s accumulate: thread order and random schedule agree bit for bit",
       s->name, tn);
    ok(good && eo <= tol && el <= 1e-5 && eq <= tol && ek <= tol && ev <= tol,
       "%s %s accumulate: two key halves equal one call within %g (out %.3g, lse %.3g, dq %.3g, "
       "dk %.3g, dv %.3g)", s->name, tn, tol, eo, el, eq, ek, ev);
    for (int sched = 0; sched < 2; sched++)
        for (int i = 0; i < 5; i++)
            free(res[sched][i]);
    free(fout), free(flse);
    free(rout), free(rlse), free(rdelta), free(rdq), free(rdk), free(rdv);
    case_free(&c);
}

/* ---- merge, conversions, element-wise, zigzag ------------------------------------- */

static void test_merge(void)
{
    enum { ROWS = 333, D = 72 };
    static float po[ROWS * D], pl[ROWS], o[ROWS * D], l[ROWS], co[ROWS * D], cl[ROWS];
    float *eo[2], *el[2];

    for (int i = 0; i < ROWS * D; i++)
        po[i] = frand(), o[i] = frand();
    for (int r = 0; r < ROWS; r++) {
        pl[r] = r % 7 == 0 ? -INFINITY : 3.0f * frand();
        l[r] = r % 5 == 0 ? -INFINITY : 3.0f * frand();
    }
    o[5 * D + 3] = NAN; /* garbage under an empty row (lse -inf) is never read */
    memcpy(co, o, sizeof o), memcpy(cl, l, sizeof l);
    int good = zc_attn_merge(po, pl, ROWS, 1, D, co, cl) == ZC_OK;
    for (int s = 0; s < 2; s++) {
        eo[s] = malloc(sizeof o), el[s] = malloc(sizeof l);
        memcpy(eo[s], o, sizeof o), memcpy(el[s], l, sizeof l);
        zc_emu_set_schedule(s ? ZC_EMU_RANDOM : ZC_EMU_THREAD_ORDER, SEED);
        good &= launched(zc_attn_cuda_merge(po, pl, ROWS, D, eo[s], el[s], NULL), "merge");
    }
    ok(good && same_bytes(eo[0], eo[1], sizeof o) && same_bytes(el[0], el[1], sizeof l),
       "merge: thread order and random schedule agree bit for bit");
    ok(good && rel_err_f(eo[0], co, ROWS * D) <= 1e-6 && rel_err_f(el[0], cl, ROWS) <= 1e-6,
       "merge matches the CPU kernel, empty rows on either side included (%.3g, %.3g)",
       rel_err_f(eo[0], co, ROWS * D), rel_err_f(el[0], cl, ROWS));
    for (int s = 0; s < 2; s++)
        free(eo[s]), free(el[s]);
}

static void test_convert(void)
{
    static const zc_datatype_t types[] = {ZC_FLOAT32, ZC_BFLOAT16, ZC_FLOAT16};
    enum { N = 70000 }; /* more than one block's stride */
    float *src = malloc(N * sizeof(float));
    int exact = 1;

    /* random values over many binades, every special, and ties of both
     * 16-bit formats */
    for (int i = 0; i < N; i++)
        src[i] = ldexpf(frand(), (int)(frand() * 30.0f));
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65520.0f,
                             65519.996f, 1e-8f, -3e-8f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 1e-40f,
                             3.4e38f, 1.00390625f, 1.01171875f, 1.0f + 1.0f / 2048.0f,
                             1.0f + 3.0f / 2048.0f};
    memcpy(src, special, sizeof special);
    for (int si = 0; si < 3; si++)
        for (int di = 0; di < 3; di++) {
            const zc_datatype_t st = types[si], dt = types[di];
            void *in = malloc(N * zc_datatype_size(st)), *want = malloc(N * zc_datatype_size(dt));
            void *got = nan_buffer(N, dt);
            for (int i = 0; i < N; i++)
                store(in, st, i, src[i]);
            for (int i = 0; i < N; i++)
                store(want, dt, i, load(in, st, i));
            zc_emu_set_schedule(ZC_EMU_RANDOM, SEED);
            int good = launched(zc_attn_cuda_convert(in, st, N, got, dt, NULL), "convert");
            /* NaN payloads may differ; a NaN must stay a NaN */
            for (int i = 0; good && i < N; i++) {
                float w = load(want, dt, i), g = load(got, dt, i);
                if (w != w ? g == g : memcmp((char *)want + i * zc_datatype_size(dt),
                                             (char *)got + i * zc_datatype_size(dt),
                                             zc_datatype_size(dt)) != 0) {
                    diag("convert %s -> %s: element %d (%a): got %a, want %a",
                         zc_datatype_name(st), zc_datatype_name(dt), i, (double)src[i],
                         (double)g, (double)w);
                    good = 0;
                }
            }
            exact &= good;
            free(in), free(want), free(got);
        }
    ok(exact, "conversions between fp32, bf16 and fp16: bit-exact round to nearest even, "
              "specials and ties included");
    free(src);
}

static void test_fill_add(void)
{
    enum { N = 300000 };
    float *a = nan_buffer(N, ZC_FLOAT32), *b = malloc(N * sizeof(float));
    int good;

    for (int i = 0; i < N; i++)
        b[i] = (float)i;
    zc_emu_set_schedule(ZC_EMU_RANDOM, SEED);
    good = launched(zc_cuda_fill_f32(a, N, 1.5f, NULL), "fill") &&
           launched(zc_cuda_add_f32(a, b, N, NULL), "add");
    for (int i = 0; good && i < N; i++)
        good = a[i] == 1.5f + (float)i;
    ok(good, "fill and add: every element once");
    free(a), free(b);
}

static void test_zigzag(void)
{
    static const int32_t cu[] = {0, 3, 3, 100, 1111, 40000};
    const int batch = 5;
    const size_t tbs[] = {12, 16, 1};
    int exact = 1;

    for (size_t t = 0; t < sizeof(tbs) / sizeof(tbs[0]); t++) {
        const size_t tb = tbs[t], bytes = (size_t)cu[batch] * tb;
        unsigned char *seq = malloc(bytes), *want = malloc(bytes), *share = malloc(bytes);
        unsigned char *back = malloc(bytes);
        int64_t ranges[6 * 5];
        int n;

        for (size_t i = 0; i < bytes; i++)
            seq[i] = (unsigned char)(i * 2654435761u >> 13);
        for (int g = 1; g <= 4; g++) {
            memset(back, 0xee, bytes);
            for (int pos = 0; pos < g; pos++) {
                zc_zigzag_ranges(cu, batch, tb, g, pos, 1, ranges, &n);
                memset(share, 0xee, bytes), memset(want, 0xee, bytes);
                for (int r = 0; r < n; r++)
                    memcpy(want + ranges[3 * r + 1], seq + ranges[3 * r], (size_t)ranges[3 * r + 2]);
                zc_emu_set_schedule(ZC_EMU_RANDOM, SEED + (uint64_t)pos);
                exact &= launched(zc_cuda_copy_ranges(seq, share, ranges, n, (int64_t)bytes,
                                                      NULL), "zigzag pack");
                exact &= memcmp(share, want, bytes) == 0;
                zc_zigzag_ranges(cu, batch, tb, g, pos, 0, ranges, &n);
                exact &= launched(zc_cuda_copy_ranges(share, back, ranges, n, (int64_t)bytes,
                                                      NULL), "zigzag unpack");
            }
            exact &= memcmp(back, seq, bytes) == 0;
        }
        free(seq), free(want), free(share), free(back);
    }
    ok(exact, "zigzag pack copies exactly the host ranges and nothing else; unpacking every "
              "share rebuilds the batch (aligned and unaligned tokens)");
}

/* ---- launch order ------------------------------------------------------------ */

/* zc_attn_gpu_order: the longest blocks first, ties in map order, every
 * block once; causal query blocks grow with their index, key blocks shrink. */
static void test_order(void)
{
    const int32_t cu[] = {0, 200, 200, 330}, qs[] = {0, 0, 70}, ks[] = {0, 0, 0};
    zc_attn_args_t a = {.size = sizeof(zc_attn_args_t), .batch = 3, .num_heads_q = 1,
                        .num_heads_kv = 1, .head_dim = 64, .cu_seqlens_q = cu,
                        .cu_seqlens_kv = cu, .q_start = qs, .kv_start = ks, .causal = 1};
    int32_t b[2 * 16];
    int64_t n;
    int good = 1;

    for (int backward = 0; backward < 2; backward++) {
        n = zc_attn_gpu_blocks(cu, 3, 64, b);
        good &= n == 7 && zc_attn_gpu_order(&a, backward, 64, b, n) == ZC_OK;
        /* segment 0: 200 rows, blocks 0-3; segment 2: 130 rows from 70,
         * blocks 0-2; forward work = keys the last row sees (64, 128, 192,
         * 200; 130 each), backward work = rows from the first that sees the
         * block's first key (200, 136, 72, 8; 130, 130, 72) */
        static const int32_t fwd[] = {0, 3, 0, 2, 2, 0, 2, 1, 2, 2, 0, 1, 0, 0};
        static const int32_t bwd[] = {0, 0, 0, 1, 2, 0, 2, 1, 0, 2, 2, 2, 0, 3};
        good &= memcmp(b, backward ? bwd : fwd, sizeof fwd) == 0;
        if (!good)
            for (int i = 0; i < n; i++)
                diag("%s block %d: segment %d, block %d", backward ? "backward" : "forward", i,
                     b[2 * i], b[2 * i + 1]);
    }
    ok(good, "launch order: the blocks with the most keys (forward) or rows (backward) first");

    /* a causal window of 64 over one segment of 256: a forward block's
     * work is the band of keys its rows see (64, then 127 for the rest),
     * a backward block's the band of rows that see its keys (127, 127,
     * 127, 64), not the causal prefix */
    {
        const int32_t cw[] = {0, 256}, zero[] = {0};
        static const int32_t fwd[] = {0, 1, 0, 2, 0, 3, 0, 0};
        static const int32_t bwd[] = {0, 0, 0, 1, 0, 2, 0, 3};
        zc_attn_args_t w = a;

        w.batch = 1, w.cu_seqlens_q = w.cu_seqlens_kv = cw, w.q_start = w.kv_start = zero;
        w.flags = ZC_ATTN_WINDOW, w.window_left = 63, w.window_right = 0;
        good = 1;
        for (int backward = 0; backward < 2; backward++) {
            n = zc_attn_gpu_blocks(cw, 1, 64, b);
            good &= n == 4 && zc_attn_gpu_order(&w, backward, 64, b, n) == ZC_OK &&
                    memcmp(b, backward ? bwd : fwd, sizeof fwd) == 0;
        }
        ok(good, "launch order under a window: the blocks' bands of keys or rows, longest first");
    }
}

/* ---- the emulation's own checks --------------------------------------------------- */

static void test_selftest(void)
{
    const char *why = "";
    int err;

    err = zc_emu_selftest_partial_barrier(&why);
    ok(err != 0 && strstr(why, "part of the block"),
       "a barrier that one thread skips is a launch error (%s)", why);
    err = zc_emu_selftest_divergent_barriers(&why);
    ok(err != 0 && strstr(why, "different barriers"),
       "threads at two different barriers are a launch error (%s)", why);
    err = zc_emu_selftest_partial_shuffle(&why);
    ok(err != 0 && strstr(why, "part of warp"),
       "a shuffle that one lane skips is a launch error (%s)", why);
    ok(zc_emu_selftest_race() != 0,
       "a shared-memory race without its barrier gives different results in the two schedules");
    err = zc_emu_selftest_limits(&why);
    ok(err == 0, "launch limits: 65536 blocks in y, 1025 threads and 64 KiB of shared memory "
                 "without the attribute are refused (%s)", why);
    ok(zc_emu_selftest_shuffles() == 0, "__shfl_sync and __shfl_xor_sync move the right lanes");
    err = zc_emu_selftest_mma(&why);
    ok(err == 0, "mma.sync m16n8k16 bf16/fp16: A B + C for the PTX ISA's fragment layouts, "
                 "and from shared memory through ldmatrix x4 and x2.trans %s", why);
    err = zc_emu_selftest_ldmatrix(&why);
    ok(err == 0, "ldmatrix x1, x2, x4, plain and .trans: every lane gets the PTX ISA's elements "
                 "%s", why);
    ok(zc_emu_selftest_cp_async() == 0,
       "cp.async: NaN until the wait_group that covers it, then the bytes, zero-filled past "
       "src_bytes; wait_group 1 leaves the newest group in flight");
    uint64_t plain = 0, swizzled = 1;
    err = zc_emu_selftest_bank_conflicts(&plain, &swizzled);
    ok(err == 0 && plain == 28 && swizzled == 0,
       "ldmatrix bank conflicts: 28 for 4 matrices of rows 128 bytes apart, 0 swizzled "
       "(%llu, %llu)", (unsigned long long)plain, (unsigned long long)swizzled);
}

int main(void)
{
    static const zc_datatype_t dtypes[] = {ZC_FLOAT32, ZC_BFLOAT16, ZC_FLOAT16};
    uint64_t blocks, switches;

    uint64_t mma0, ld0, conflicts0, mma1, ld1, conflicts1;

    test_selftest();
    test_order();
    zc_emu_tensor_counters(&mma0, &ld0, &conflicts0);
    for (size_t i = 0; i < NSHAPES; i++)
        for (int t = 0; t < 3; t++)
            test_attention(&shapes[i], dtypes[t]);
    for (int t = 0; t < 3; t++) {
        test_accumulate(&shapes[0], dtypes[t]);
        test_accumulate(&shapes[6], dtypes[t]);
    }
    zc_emu_tensor_counters(&mma1, &ld1, &conflicts1);
    ok(mma1 > mma0 && ld1 > ld0 && conflicts1 == conflicts0,
       "the tensor-core kernels' ldmatrix reads are free of bank conflicts (%llu mma.sync, %llu "
       "ldmatrix, %llu conflicts)", (unsigned long long)(mma1 - mma0),
       (unsigned long long)(ld1 - ld0), (unsigned long long)(conflicts1 - conflicts0));
    test_merge();
    test_convert();
    test_fill_add();
    test_zigzag();
    zc_emu_counters(&blocks, &switches);
    diag("%llu blocks, %llu thread switches emulated", (unsigned long long)blocks,
         (unsigned long long)switches);
    return tap_done();
}
