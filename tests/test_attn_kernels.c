/* CPU attention kernels against a naive double-precision reference written
 * here: forward (out, lse) and the three gradients, varlen, GQA, causal,
 * full and sliding-window masks (ZC_ATTN_WINDOW) with global offsets, fp32
 * and bf16, every SIMD path, the split-KV merge and per-block backward a
 * ring performs, NaN/Inf propagation, bad arguments.
 *
 * Tolerances (error = max |x - ref| / max |ref| per tensor; lse absolute):
 *   fp32: out, lse 2e-5; dq, dk, dv 5e-5
 *   bf16 storage (inputs bf16, out and gradients rounded to bf16 once):
 *         out 1e-2, lse 2e-3 (fp32), dq, dk, dv 2.5e-2 (TransformerEngine's)
 * The worst errors measured are printed as diagnostics at the end; on the
 * 2-core Zen 5 they were fp32: out 1.2e-6, lse 4.2e-6, dq 1.5e-6, dk 2.3e-6,
 * dv 2.1e-6; bf16: out 3.2e-3, lse 3.0e-6, dq 3.8e-3, dk 4.5e-3, dv 3.4e-3.
 * Split-KV merges and per-block backward match the unsplit call within
 * 2e-7 (fp32 accumulation either way). */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_check.h"
#include "kernels/attn_math.h"
#include "kernels/cpu/attn_cpu.h"
#include "tap.h"
#include "zcomm.h"

#define MAX_BATCH 4

/* ---- deterministic random numbers ---------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int rng_int(int lo, int hi) /* inclusive */
{
    return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1));
}

static double rng_normal(void)
{
    double u1 = ((rng_next() >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (rng_next() >> 11) / 9007199254740992.0;

    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* ---- a test case: shapes, inputs as stored, and the reference ------------- */

typedef struct {
    int batch, hq, hk, d, causal;
    int window, left, right;    /* ZC_ATTN_WINDOW and its (left, right) */
    zc_datatype_t dtype;
    int32_t cu_q[MAX_BATCH + 1], cu_k[MAX_BATCH + 1];
    int32_t q_start[MAX_BATCH], kv_start[MAX_BATCH];
    float scale;
    int64_t nq, nk;             /* elements of q-like and kv-like tensors */
    double *q, *k, *v, *dout;   /* stored values, exactly */
    void *q_s, *k_s, *v_s, *dout_s;
    double *ref_out, *ref_lse, *ref_dq, *ref_dk, *ref_dv;
} tcase_t;

static size_t dsize(zc_datatype_t dt)
{
    return dt == ZC_FLOAT32 ? 4 : 2;
}

static double get_elem(const void *p, zc_datatype_t dt, int64_t i)
{
    return dt == ZC_FLOAT32 ? ((const float *)p)[i] : zc_bf16_to_float(((const uint16_t *)p)[i]);
}

static void set_elem(void *p, zc_datatype_t dt, int64_t i, double x)
{
    if (dt == ZC_FLOAT32)
        ((float *)p)[i] = (float)x;
    else
        ((uint16_t *)p)[i] = zc_float_to_bf16((float)x);
}

/* Random tensor stored in dt; *vals gets the stored values. */
static void make_tensor(int64_t n, zc_datatype_t dt, double sigma, double **vals, void **stored)
{
    *vals = malloc(sizeof(double) * (n ? n : 1));
    *stored = malloc(dsize(dt) * (n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        set_elem(*stored, dt, i, sigma * rng_normal());
        (*vals)[i] = get_elem(*stored, dt, i);
    }
}

/* Change one stored element (and its exact value). */
static void poke(tcase_t *c, double *vals, void *stored, int64_t i, double x)
{
    set_elem(stored, c->dtype, i, x);
    vals[i] = get_elem(stored, c->dtype, i);
}

/* The mask as zcomm.h states it: positions q = q_start + i, k = kv_start
 * + j; causal hides k > q; a window hides k < q - left and k > q + right
 * (a side of -1 hides nothing). */
static int visible(const tcase_t *c, int b, int i, int j)
{
    const int64_t q = (int64_t)c->q_start[b] + i, k = (int64_t)c->kv_start[b] + j;

    if (c->causal && k > q)
        return 0;
    if (c->window && c->left >= 0 && k < q - c->left)
        return 0;
    if (c->window && c->right >= 0 && k > q + c->right)
        return 0;
    return 1;
}

/* Give a case a window before its reference is computed. */
static void case_window(tcase_t *c, int left, int right)
{
    c->window = 1;
    c->left = left;
    c->right = right;
}

static void reference(tcase_t *c)
{
    const int g = c->hq / c->hk, d = c->d;
    const int64_t tq = c->cu_q[c->batch];

    c->ref_out = calloc(c->nq ? c->nq : 1, sizeof(double));
    c->ref_lse = calloc(tq * c->hq + 1, sizeof(double));
    c->ref_dq = calloc(c->nq ? c->nq : 1, sizeof(double));
    c->ref_dk = calloc(c->nk ? c->nk : 1, sizeof(double));
    c->ref_dv = calloc(c->nk ? c->nk : 1, sizeof(double));
    for (int b = 0; b < c->batch; b++) {
        const int lq = c->cu_q[b + 1] - c->cu_q[b], lk = c->cu_k[b + 1] - c->cu_k[b];
        double *s = malloc(sizeof(double) * (lk + 1));

        for (int h = 0; h < c->hq; h++) {
            const int hk = h / g;

            for (int i = 0; i < lq; i++) {
                const int64_t row = (int64_t)(c->cu_q[b] + i) * c->hq + h;
                const double *qi = c->q + row * d, *doi = c->dout + row * d;
                double *oi = c->ref_out + row * d, *dqi = c->ref_dq + row * d;
                double m = -INFINITY, l = 0, lse, delta = 0;
                int any = 0;

                for (int j = 0; j < lk; j++) {
                    const double *kj = c->k + ((int64_t)(c->cu_k[b] + j) * c->hk + hk) * d;
                    double dot = 0;

                    if (!visible(c, b, i, j))
                        continue;
                    for (int x = 0; x < d; x++)
                        dot += qi[x] * kj[x];
                    s[j] = dot * c->scale;
                    if (s[j] > m)
                        m = s[j];
                    any = 1;
                }
                if (!any) {
                    c->ref_lse[row] = -INFINITY;
                    continue;
                }
                for (int j = 0; j < lk; j++) {
                    const double *vj = c->v + ((int64_t)(c->cu_k[b] + j) * c->hk + hk) * d;
                    double p;

                    if (!visible(c, b, i, j))
                        continue;
                    p = exp(s[j] - m);
                    l += p;
                    for (int x = 0; x < d; x++)
                        oi[x] += p * vj[x];
                }
                for (int x = 0; x < d; x++)
                    oi[x] /= l;
                lse = m + log(l);
                c->ref_lse[row] = lse;
                for (int x = 0; x < d; x++)
                    delta += doi[x] * oi[x];
                for (int j = 0; j < lk; j++) {
                    const int64_t krow = (int64_t)(c->cu_k[b] + j) * c->hk + hk;
                    const double *kj = c->k + krow * d, *vj = c->v + krow * d;
                    double p, dp = 0, ds;

                    if (!visible(c, b, i, j))
                        continue;
                    p = exp(s[j] - lse);
                    for (int x = 0; x < d; x++)
                        dp += doi[x] * vj[x];
                    ds = p * (dp - delta) * c->scale;
                    for (int x = 0; x < d; x++) {
                        dqi[x] += ds * kj[x];
                        c->ref_dk[krow * d + x] += ds * qi[x];
                        c->ref_dv[krow * d + x] += p * doi[x];
                    }
                }
            }
        }
        free(s);
    }
}

/* Shapes: lengths per segment, then inputs and reference. */
static void case_init(tcase_t *c, int batch, const int *lq, const int *lk, int hq, int hk, int d,
                      int causal, const int *q_start, const int *kv_start, zc_datatype_t dtype,
                      double q_sigma)
{
    memset(c, 0, sizeof(*c));
    c->batch = batch;
    c->hq = hq;
    c->hk = hk;
    c->d = d;
    c->causal = causal;
    c->dtype = dtype;
    c->scale = 1.0f / sqrtf((float)d);
    for (int b = 0; b < batch; b++) {
        c->cu_q[b + 1] = c->cu_q[b] + lq[b];
        c->cu_k[b + 1] = c->cu_k[b] + lk[b];
        c->q_start[b] = q_start ? q_start[b] : 0;
        c->kv_start[b] = kv_start ? kv_start[b] : 0;
    }
    c->nq = (int64_t)c->cu_q[batch] * hq * d;
    c->nk = (int64_t)c->cu_k[batch] * hk * d;
    make_tensor(c->nq, dtype, q_sigma, &c->q, &c->q_s);
    make_tensor(c->nk, dtype, 1.0, &c->k, &c->k_s);
    make_tensor(c->nk, dtype, 1.0, &c->v, &c->v_s);
    make_tensor(c->nq, dtype, 1.0, &c->dout, &c->dout_s);
}

static void case_free(tcase_t *c)
{
    free(c->q), free(c->k), free(c->v), free(c->dout);
    free(c->q_s), free(c->k_s), free(c->v_s), free(c->dout_s);
    free(c->ref_out), free(c->ref_lse), free(c->ref_dq), free(c->ref_dk), free(c->ref_dv);
}

/* ---- kernel results ---------------------------------------------------------- */

typedef struct {
    void *out, *dq, *dk, *dv;
    float *lse;
    zc_datatype_t out_dtype, grad_dtype;
    zc_status_t st_fwd, st_bwd;
} result_t;

static void case_args(const tcase_t *c, zc_attn_args_t *a)
{
    memset(a, 0, sizeof(*a));
    a->size = sizeof(*a);
    a->batch = c->batch;
    a->num_heads_q = c->hq;
    a->num_heads_kv = c->hk;
    a->head_dim = c->d;
    a->cu_seqlens_q = c->cu_q;
    a->cu_seqlens_kv = c->cu_k;
    a->q_start = c->q_start;
    a->kv_start = c->kv_start;
    a->causal = c->causal;
    if (c->window) {
        a->flags |= ZC_ATTN_WINDOW;
        a->window_left = c->left;
        a->window_right = c->right;
    }
    a->scale = c->scale;
    a->dtype = c->dtype;
    a->out_dtype = c->dtype;
    a->grad_dtype = c->dtype;
    a->q = c->q_s;
    a->k = c->k_s;
    a->v = c->v_s;
    a->dout = c->dout_s;
}

static void run_case(const tcase_t *c, result_t *r)
{
    const int64_t tq = c->cu_q[c->batch];
    zc_attn_args_t a;

    case_args(c, &a);
    r->out_dtype = r->grad_dtype = c->dtype;
    r->out = malloc(dsize(c->dtype) * (c->nq + 1));
    r->lse = malloc(sizeof(float) * (tq * c->hq + 1));
    r->dq = malloc(dsize(c->dtype) * (c->nq + 1));
    r->dk = malloc(dsize(c->dtype) * (c->nk + 1));
    r->dv = malloc(dsize(c->dtype) * (c->nk + 1));
    a.out = r->out;
    a.lse = r->lse;
    a.dq = r->dq;
    a.dk = r->dk;
    a.dv = r->dv;
    r->st_fwd = zc_attn_fwd(&a);
    r->st_bwd = r->st_fwd == ZC_OK ? zc_attn_bwd(&a) : r->st_fwd;
}

static void result_free(result_t *r)
{
    free(r->out), free(r->lse), free(r->dq), free(r->dk), free(r->dv);
}

/* max |x - ref| / max |ref|; NaN/Inf must sit where the reference has them. */
static double tensor_err(const void *x, zc_datatype_t dt, const double *ref, int64_t n,
                         int *pattern_ok)
{
    double num = 0, den = 0;

    for (int64_t i = 0; i < n; i++) {
        double v = get_elem(x, dt, i);

        if (isnan(ref[i]) || isnan(v)) {
            *pattern_ok &= isnan(ref[i]) && isnan(v);
            continue;
        }
        if (isinf(ref[i]) || isinf(v)) {
            *pattern_ok &= v == ref[i];
            continue;
        }
        if (fabs(v - ref[i]) > num)
            num = fabs(v - ref[i]);
        if (fabs(ref[i]) > den)
            den = fabs(ref[i]);
    }
    return den > 0 ? num / den : num;
}

static double lse_err(const float *lse, const double *ref, int64_t n, int *pattern_ok)
{
    double err = 0;

    for (int64_t i = 0; i < n; i++) {
        if (isnan(ref[i]) || isnan(lse[i]) || isinf(ref[i]) || isinf(lse[i])) {
            *pattern_ok &= (isnan(ref[i]) && isnan(lse[i])) || lse[i] == ref[i];
            continue;
        }
        if (fabs(lse[i] - ref[i]) > err)
            err = fabs(lse[i] - ref[i]);
    }
    return err;
}

/* Worst errors seen, per dtype (0: fp32, 1: bf16) and tensor. */
enum { E_OUT, E_LSE, E_DQ, E_DK, E_DV, E_COUNT };
static const char *err_names[E_COUNT] = {"out", "lse", "dq", "dk", "dv"};
static const double tol[2][E_COUNT] = {
    {2e-5, 2e-5, 5e-5, 5e-5, 5e-5},
    {1e-2, 2e-3, 2.5e-2, 2.5e-2, 2.5e-2},
};
static double worst[2][E_COUNT];

typedef struct {
    double e[E_COUNT];
    int pattern_ok;
} errs_t;

static void compare(const tcase_t *c, const result_t *r, errs_t *e)
{
    const int64_t rows = (int64_t)c->cu_q[c->batch] * c->hq;
    const int ti = c->dtype == ZC_BFLOAT16;

    e->pattern_ok = 1;
    e->e[E_OUT] = tensor_err(r->out, r->out_dtype, c->ref_out, c->nq, &e->pattern_ok);
    e->e[E_LSE] = lse_err(r->lse, c->ref_lse, rows, &e->pattern_ok);
    e->e[E_DQ] = tensor_err(r->dq, r->grad_dtype, c->ref_dq, c->nq, &e->pattern_ok);
    e->e[E_DK] = tensor_err(r->dk, r->grad_dtype, c->ref_dk, c->nk, &e->pattern_ok);
    e->e[E_DV] = tensor_err(r->dv, r->grad_dtype, c->ref_dv, c->nk, &e->pattern_ok);
    for (int k = 0; k < E_COUNT; k++)
        if (e->e[k] > worst[ti][k])
            worst[ti][k] = e->e[k];
}

static int within(const tcase_t *c, const errs_t *e, int first, int last)
{
    const int ti = c->dtype == ZC_BFLOAT16;

    for (int k = first; k <= last; k++)
        if (!(e->e[k] <= tol[ti][k]))
            return 0;
    return e->pattern_ok;
}

static void describe(const tcase_t *c, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s b=%d hq=%d hk=%d d=%d %s", c->dtype == ZC_FLOAT32 ? "fp32" : "bf16",
                     c->batch, c->hq, c->hk, c->d, c->causal ? "causal" : "full");

    if (c->window && n < (int)len)
        n += snprintf(buf + n, len - n, " window(%d,%d)", c->left, c->right);
    if (n < (int)len)
        n += snprintf(buf + n, len - n, " lens");

    for (int b = 0; b < c->batch && n < (int)len; b++)
        n += snprintf(buf + n, len - n, " %d/%d@%+d", c->cu_q[b + 1] - c->cu_q[b],
                      c->cu_k[b + 1] - c->cu_k[b], c->q_start[b] - c->kv_start[b]);
}

/* Run, compare, report fwd and bwd as two test points. */
static void check_case(tcase_t *c, const char *what)
{
    char desc[256];
    result_t r;
    errs_t e;

    reference(c);
    run_case(c, &r);
    describe(c, desc, sizeof(desc));
    if (r.st_fwd != ZC_OK || r.st_bwd != ZC_OK) {
        ok(0, "%s fwd %s: status %d/%d %s", what, desc, r.st_fwd, r.st_bwd, zc_get_last_error());
        ok(0, "%s bwd %s", what, desc);
        result_free(&r);
        return;
    }
    compare(c, &r, &e);
    ok(within(c, &e, E_OUT, E_LSE), "%s fwd %s: out %.2e lse %.2e", what, desc, e.e[E_OUT],
       e.e[E_LSE]);
    ok(within(c, &e, E_DQ, E_DV), "%s bwd %s: dq %.2e dk %.2e dv %.2e", what, desc, e.e[E_DQ],
       e.e[E_DK], e.e[E_DV]);
    result_free(&r);
}

/* ---- random shapes --------------------------------------------------------- */

static void test_random(int count, zc_datatype_t dtype)
{
    static const int dims[] = {64, 128, 256, 40, 72, 8};
    static const int ratios[] = {1, 2, 4};

    for (int n = 0; n < count; n++) {
        int lq[MAX_BATCH], lk[MAX_BATCH], qs[MAX_BATCH], ks[MAX_BATCH];
        int batch = rng_int(1, 3), hk = rng_int(1, 2), ratio = ratios[rng_int(0, 2)];
        int d = dims[n % 6], causal = rng_int(0, 3) != 0;
        int maxlen = d >= 256 ? 160 : 300;
        tcase_t c;

        for (int b = 0; b < batch; b++) {
            lq[b] = rng_int(1, maxlen);
            lk[b] = rng_int(0, 2) == 0 ? lq[b] : rng_int(1, maxlen);
            ks[b] = rng_int(0, 1000);
            /* causal offsets from masked-out to full, through partial overlaps */
            qs[b] = ks[b] + rng_int(-lq[b] - 8, lk[b] + 8);
            if (rng_int(0, 2) == 0)
                qs[b] = ks[b] + lk[b] - lq[b]; /* bottom-right aligned */
        }
        case_init(&c, batch, lq, lk, hk * ratio, hk, d, causal, qs, ks, dtype,
                  n % 5 == 4 ? 4.0 : 1.0);
        check_case(&c, "random");
        case_free(&c);
    }
}

/* Random shapes under random masks: windows from 1 key to wider than the
 * sequence, one-sided and two-sided, with or without causal, empty
 * segments, offsets from masked out to full. */
static void test_random_masks(int count, zc_datatype_t dtype)
{
    static const int dims[] = {64, 40, 128, 8};
    static const int ratios[] = {1, 2, 4};

    for (int n = 0; n < count; n++) {
        int lq[MAX_BATCH], lk[MAX_BATCH], qs[MAX_BATCH], ks[MAX_BATCH];
        int batch = rng_int(1, 3), hk = rng_int(1, 2), ratio = ratios[rng_int(0, 2)];
        int d = dims[n % 4], causal = rng_int(0, 1), left, right;
        const int lefts[] = {-1, 0, 1, 63, 64, rng_int(2, 400)};
        const int rights[] = {-1, 0, 1, rng_int(2, 100)};
        tcase_t c;

        for (int b = 0; b < batch; b++) {
            lq[b] = rng_int(0, 5) == 0 ? rng_int(0, 1) : rng_int(1, 260);
            lk[b] = rng_int(0, 2) == 0 ? lq[b] : rng_int(0, 260);
            ks[b] = rng_int(0, 1000);
            qs[b] = ks[b] + rng_int(-lq[b] - 80, lk[b] + 80);
        }
        left = lefts[rng_int(0, 5)];
        right = causal ? rng_int(-1, 0) : rights[rng_int(0, 3)];
        case_init(&c, batch, lq, lk, hk * ratio, hk, d, causal, qs, ks, dtype, 1.0);
        case_window(&c, left, right);
        check_case(&c, "random mask");
        case_free(&c);
    }
}

/* ---- windows: the edges one at a time --------------------------------------- */

/* out 0, lse -inf and zero gradients for every row (no key visible). */
static int nothing_visible(const tcase_t *c)
{
    result_t r;
    int zero = 1;

    run_case(c, &r);
    zero = r.st_fwd == ZC_OK && r.st_bwd == ZC_OK;
    for (int64_t x = 0; x < c->nq; x++)
        zero &= get_elem(r.out, r.out_dtype, x) == 0 && get_elem(r.dq, r.grad_dtype, x) == 0;
    for (int64_t x = 0; x < (int64_t)c->cu_q[c->batch] * c->hq; x++)
        zero &= r.lse[x] == -INFINITY;
    for (int64_t x = 0; x < c->nk; x++)
        zero &= get_elem(r.dk, r.grad_dtype, x) == 0 && get_elem(r.dv, r.grad_dtype, x) == 0;
    result_free(&r);
    return zero;
}

static void test_windows(void)
{
    static const struct {
        const char *name;
        int batch, lq[MAX_BATCH], lk[MAX_BATCH], qs[MAX_BATCH], ks[MAX_BATCH];
        int hq, hk, d, causal, left, right, bf16;
    } cases[] = {
        {"window of 1", 1, {100}, {100}, {0}, {0}, 2, 1, 64, 0, 0, 0, 0},
        {"window of 1, causal", 1, {130}, {130}, {0}, {0}, 2, 2, 64, 1, 0, -1, 1},
        {"window of a tile (64 keys)", 1, {300}, {300}, {0}, {0}, 4, 2, 128, 1, 63, 0, 0},
        {"window of a tile and one", 1, {300}, {300}, {0}, {0}, 4, 2, 128, 0, 64, 0, 0},
        {"window of two tiles each side", 1, {300}, {300}, {0}, {0}, 6, 2, 72, 0, 64, 64, 1},
        {"window of 200 behind, 9 ahead", 1, {333}, {333}, {0}, {0}, 2, 1, 40, 0, 199, 9, 0},
        {"window wider than the sequence", 1, {300}, {300}, {0}, {0}, 2, 1, 64, 0, 1000, 0, 0},
        {"window wider than the sequence, both sides", 1, {200}, {200}, {0}, {0}, 2, 1, 64, 0,
         1000, 1000, 0},
        {"causal with lookahead", 1, {200}, {200}, {0}, {0}, 2, 1, 64, 0, -1, 10, 0},
        {"anti-causal", 1, {200}, {200}, {0}, {0}, 2, 1, 64, 0, 0, -1, 0},
        {"full through the window", 2, {150, 77}, {90, 77}, {0, 0}, {0, 0}, 4, 4, 32, 0, -1, -1,
         0},
        {"causal and an unbounded window", 1, {150}, {150}, {0}, {0}, 2, 1, 64, 1, -1, -1, 0},
        {"sequences of length 1", 3, {1, 1, 1}, {1, 5, 1}, {0, 4, 7}, {0, 0, 0}, 2, 1, 16, 0,
         0, 0, 0},
        {"empty sequences", 4, {0, 70, 5, 0}, {3, 70, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, 4, 2,
         64, 0, 10, 3, 0},
        {"GQA 8:1", 1, {260}, {260}, {0}, {0}, 8, 1, 40, 1, 31, 0, 1},
        {"ring block at the window's edge", 1, {128}, {192}, {1100}, {1000}, 4, 2, 64, 1, 100,
         0, 0},
        {"ring block ahead, window to the right", 1, {120}, {140}, {0}, {115}, 2, 1, 64, 0, -1,
         8, 0},
        {"bottom-right aligned", 1, {50}, {300}, {250}, {0}, 2, 1, 64, 1, 63, 0, 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tcase_t c;

        case_init(&c, cases[i].batch, cases[i].lq, cases[i].lk, cases[i].hq, cases[i].hk,
                  cases[i].d, cases[i].causal, cases[i].qs, cases[i].ks,
                  cases[i].bf16 ? ZC_BFLOAT16 : ZC_FLOAT32, 1.0);
        case_window(&c, cases[i].left, cases[i].right);
        check_case(&c, cases[i].name);
        case_free(&c);
    }
    /* a ring block wholly behind the window: nothing to see, rows stay
     * empty (out 0, lse -inf), keys get no gradient */
    {
        int lq = 100, lk = 150, qs = 1000, ks = 700;
        tcase_t c;

        case_init(&c, 1, &lq, &lk, 4, 2, 64, 1, &qs, &ks, ZC_FLOAT32, 1.0);
        case_window(&c, 149, 0);
        ok(nothing_visible(&c), "ring block behind the window: out 0, lse -inf, gradients 0");
        case_free(&c);
    }
}

/* ---- long sequences -------------------------------------------------------- */

static void test_long(void)
{
    tcase_t c;
    int l1 = 2048, l2 = 3000, l3[2] = {1500, 1};

    case_init(&c, 1, &l1, &l1, 2, 1, 128, 1, NULL, NULL, ZC_FLOAT32, 1.0);
    check_case(&c, "long");
    case_free(&c);
    case_init(&c, 1, &l2, &l2, 1, 1, 64, 1, NULL, NULL, ZC_BFLOAT16, 1.0);
    check_case(&c, "long");
    case_free(&c);
    case_init(&c, 2, l3, l3, 4, 4, 64, 0, NULL, NULL, ZC_FLOAT32, 1.0);
    check_case(&c, "long");
    case_free(&c);
}

/* ---- explicit causal geometry of ring steps ------------------------------- */

static void test_offsets(void)
{
    static const struct {
        const char *name;
        int lq, lk, qs, ks;
    } geo[] = {
        {"full (kv block before q block)", 192, 128, 1000, 800},
        {"diagonal (same block)", 200, 200, 512, 512},
        {"masked (kv block after q block)", 100, 150, 0, 100},
        {"partial overlap", 130, 300, 70, 0},
        {"q inside kv span", 64, 256, 128, 0},
    };

    for (size_t i = 0; i < sizeof(geo) / sizeof(geo[0]); i++) {
        for (int dt = 0; dt < 2; dt++) {
            tcase_t c;

            case_init(&c, 1, &geo[i].lq, &geo[i].lk, 4, 2, 128, 1, &geo[i].qs, &geo[i].ks,
                      dt ? ZC_BFLOAT16 : ZC_FLOAT32, 1.0);
            check_case(&c, geo[i].name);
            if (i == 2) {
                /* nothing visible: out 0, lse -inf, zero gradients */
                result_t r;
                int zero = 1;

                run_case(&c, &r);
                for (int64_t x = 0; x < c.nq; x++)
                    zero &= get_elem(r.out, r.out_dtype, x) == 0 && get_elem(r.dq, r.grad_dtype, x) == 0;
                for (int64_t x = 0; x < (int64_t)geo[i].lq * 4; x++)
                    zero &= r.lse[x] == -INFINITY;
                for (int64_t x = 0; x < c.nk; x++)
                    zero &= get_elem(r.dk, r.grad_dtype, x) == 0 && get_elem(r.dv, r.grad_dtype, x) == 0;
                ok(zero, "masked block: out 0, lse -inf, gradients 0 (%s)", dt ? "bf16" : "fp32");
                result_free(&r);
            }
            case_free(&c);
        }
    }
}

/* ---- split KV: merge and per-block backward as a ring does them ------------ */

static double max_diff(const float *a, const float *b, int64_t n)
{
    double m = 0, den = 0;

    for (int64_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > m || a[i] != a[i])
            m = a[i] != a[i] ? INFINITY : fabs((double)a[i] - b[i]);
        if (fabs(b[i]) > den)
            den = fabs(b[i]);
    }
    return den > 0 ? m / den : m;
}

static void test_split_kv(zc_datatype_t dtype, int window, int left, int right)
{
    /* one sequence of 700 tokens on a "rank" that holds all queries; its keys
     * arrive in three blocks, in ring order (not position order) */
    const int L = 700, hq = 4, hk = 2, d = 64;
    const int cuts[4] = {0, 230, 450, 700};
    const int order[3] = {2, 0, 1};
    char dn[48];
    const int64_t nq = (int64_t)L * hq * d, nk = (int64_t)L * hk * d, rows = (int64_t)L * hq;
    float *out = malloc(nq * 4), *lse = malloc(rows * 4);
    float *acc = malloc(nq * 4), *acc_lse = malloc(rows * 4);
    float *mrg = malloc(nq * 4), *mrg_lse = malloc(rows * 4);
    float *part = malloc(nq * 4), *part_lse = malloc(rows * 4), *delta = malloc(rows * 4);
    float *dq = malloc(nq * 4), *dk = malloc(nk * 4), *dv = malloc(nk * 4);
    float *dq_s = calloc(nq, 4), *dk_s = malloc(nk * 4), *dv_s = malloc(nk * 4);
    double e_acc, e_mrg, e_dq, e_dk, e_dv;
    zc_attn_args_t a;
    zc_status_t st = ZC_OK;
    tcase_t c;

    snprintf(dn, sizeof(dn), "%s %s(%d,%d)", dtype == ZC_FLOAT32 ? "fp32" : "bf16",
             window ? "window" : "causal", window ? left : -1, window ? right : 0);
    case_init(&c, 1, &L, &L, hq, hk, d, !window || right == 0, NULL, NULL, dtype, 1.0);
    if (window)
        case_window(&c, left, right);
    case_args(&c, &a);
    a.out_dtype = ZC_FLOAT32;
    a.grad_dtype = ZC_FLOAT32;
    a.out = out;
    a.lse = lse;
    a.dq = dq;
    a.dk = dk;
    a.dv = dv;
    st |= zc_attn_fwd(&a);
    st |= zc_attn_bwd(&a);

    for (int64_t i = 0; i < nq; i++)
        acc[i] = mrg[i] = NAN; /* an empty accumulator's output is ignored */
    for (int64_t i = 0; i < rows; i++)
        acc_lse[i] = mrg_lse[i] = -INFINITY;
    for (int s = 0; s < 3; s++) {
        const int blk = order[s];
        int32_t cu_k[2] = {0, cuts[blk + 1] - cuts[blk]};
        int32_t kv_start = cuts[blk];
        zc_attn_args_t h = a;

        h.cu_seqlens_kv = cu_k;
        h.kv_start = &kv_start;
        h.k = (const char *)c.k_s + (int64_t)cuts[blk] * hk * d * dsize(dtype);
        h.v = (const char *)c.v_s + (int64_t)cuts[blk] * hk * d * dsize(dtype);
        h.flags = a.flags | ZC_ATTN_ACCUMULATE;
        h.out = acc;
        h.lse = acc_lse;
        st |= zc_attn_fwd(&h);
        h.flags = a.flags;
        h.out = part;
        h.lse = part_lse;
        st |= zc_attn_fwd(&h);
        st |= zc_attn_merge(part, part_lse, L, hq, d, mrg, mrg_lse);
    }
    e_acc = fmax(max_diff(acc, out, nq), max_diff(acc_lse, lse, rows));
    e_mrg = fmax(max_diff(mrg, out, nq), max_diff(mrg_lse, lse, rows));
    ok(st == ZC_OK && e_acc < 1e-5, "split kv %s: fwd accumulating 3 blocks = unsplit (%.2e)", dn,
       e_acc);
    ok(st == ZC_OK && e_mrg < 1e-5, "split kv %s: zc_attn_merge of 3 partials = unsplit (%.2e)",
       dn, e_mrg);

    /* backward per block with the final out/lse and one delta, dq accumulated */
    a.delta = delta;
    st |= zc_attn_bwd_delta(&a);
    for (int s = 0; s < 3; s++) {
        const int blk = order[s];
        const int64_t off = (int64_t)cuts[blk] * hk * d;
        int32_t cu_k[2] = {0, cuts[blk + 1] - cuts[blk]};
        int32_t kv_start = cuts[blk];
        zc_attn_args_t h = a;

        h.cu_seqlens_kv = cu_k;
        h.kv_start = &kv_start;
        h.k = (const char *)c.k_s + off * dsize(dtype);
        h.v = (const char *)c.v_s + off * dsize(dtype);
        h.flags = a.flags | ZC_ATTN_ACCUMULATE;
        h.dq = dq_s;
        h.dk = dk_s + off;
        h.dv = dv_s + off;
        memset(dk_s + off, 0, (cuts[blk + 1] - cuts[blk]) * hk * d * 4);
        memset(dv_s + off, 0, (cuts[blk + 1] - cuts[blk]) * hk * d * 4);
        st |= zc_attn_bwd(&h);
    }
    e_dq = max_diff(dq_s, dq, nq);
    e_dk = max_diff(dk_s, dk, nk);
    e_dv = max_diff(dv_s, dv, nk);
    ok(st == ZC_OK && e_dq < 1e-5 && e_dk < 1e-5 && e_dv < 1e-5,
       "split kv %s: per-block bwd with final lse = unsplit (dq %.2e dk %.2e dv %.2e)", dn, e_dq,
       e_dk, e_dv);
    case_free(&c);
    free(out), free(lse), free(acc), free(acc_lse), free(mrg), free(mrg_lse), free(part);
    free(part_lse), free(delta), free(dq), free(dk), free(dv), free(dq_s), free(dk_s), free(dv_s);
}

/* ---- every SIMD path --------------------------------------------------------- */

static void test_paths(void)
{
    static const zc_attn_isa_t isas[] = {ZC_ATTN_ISA_SCALAR, ZC_ATTN_ISA_AVX2, ZC_ATTN_ISA_AVX512};
    static const char *names[3] = {"fp32 d128", "bf16 gqa3 d72", "fp32 d40 window(70,9)"};
    int l1[2] = {300, 77}, k1[2] = {250, 130}, qs[2] = {100, 0}, ks[2] = {0, 40};
    tcase_t cs[3];
    result_t base[3];

    case_init(&cs[0], 2, l1, k1, 4, 2, 128, 1, qs, ks, ZC_FLOAT32, 1.0);
    case_init(&cs[1], 2, l1, k1, 6, 2, 72, 1, qs, ks, ZC_BFLOAT16, 1.0);
    case_init(&cs[2], 2, l1, k1, 4, 2, 40, 0, qs, ks, ZC_FLOAT32, 1.0);
    case_window(&cs[2], 70, 9);
    for (int n = 0; n < 3; n++)
        reference(&cs[n]);
    for (size_t i = 0; i < 3; i++) {
        if (!zc_attn_cpu_isa_supported(isas[i])) {
            tap_skip(4, "path not built in or not supported by this CPU");
            continue;
        }
        ok(zc_attn_cpu_set_isa(isas[i]) == ZC_OK && zc_attn_cpu_get_isa() == isas[i],
           "path %s selected", zc_attn_cpu_isa_name(isas[i]));
        for (int n = 0; n < 3; n++) {
            result_t r;
            errs_t e;
            double diff = 0;

            run_case(&cs[n], &r);
            compare(&cs[n], &r, &e);
            if (i == 0) {
                base[n] = r;
            } else {
                int64_t rows = (int64_t)cs[n].cu_q[2] * cs[n].hq;
                int pat = 1;
                double *bd = malloc(sizeof(double) * (cs[n].nq + cs[n].nk + rows));

                for (int64_t x = 0; x < cs[n].nq; x++)
                    bd[x] = get_elem(base[n].out, base[n].out_dtype, x);
                diff = tensor_err(r.out, r.out_dtype, bd, cs[n].nq, &pat);
                for (int64_t x = 0; x < cs[n].nk; x++)
                    bd[x] = get_elem(base[n].dk, base[n].grad_dtype, x);
                diff = fmax(diff, tensor_err(r.dk, r.grad_dtype, bd, cs[n].nk, &pat));
                free(bd);
            }
            ok(r.st_fwd == ZC_OK && r.st_bwd == ZC_OK && within(&cs[n], &e, E_OUT, E_DV),
               "path %s %s: out %.2e lse %.2e dq %.2e dk %.2e dv %.2e; vs scalar %.2e",
               zc_attn_cpu_isa_name(isas[i]), names[n], e.e[E_OUT],
               e.e[E_LSE], e.e[E_DQ], e.e[E_DK], e.e[E_DV], diff);
            if (i != 0)
                result_free(&r);
        }
    }
    for (int n = 0; n < 3; n++) {
        result_free(&base[n]);
        case_free(&cs[n]);
    }
    zc_attn_cpu_set_isa(ZC_ATTN_ISA_AUTO);
}

/* ---- NaN and Inf reach exactly the rows a naive reference reaches ----------- */

static void test_nonfinite(void)
{
    static const struct {
        const char *what;
        int tensor, row;
        double value;
    } pokes[] = {
        {"NaN in v (diagonal tile)", 2, 5, NAN},
        {"NaN in q", 0, 70, NAN},
        {"+Inf in k", 1, 100, INFINITY},
        {"-Inf in v", 2, 3, -INFINITY},
        {"NaN in dout", 3, 9, NAN},
    };
    int l = 150;

    for (size_t i = 0; i < sizeof(pokes) / sizeof(pokes[0]); i++) {
        tcase_t c;
        result_t r;
        errs_t e;
        double *vals[4];
        void *stored[4];
        int heads;

        case_init(&c, 1, &l, &l, 2, 1, 64, 1, NULL, NULL, ZC_FLOAT32, 1.0);
        vals[0] = c.q, vals[1] = c.k, vals[2] = c.v, vals[3] = c.dout;
        stored[0] = c.q_s, stored[1] = c.k_s, stored[2] = c.v_s, stored[3] = c.dout_s;
        heads = pokes[i].tensor == 1 || pokes[i].tensor == 2 ? c.hk : c.hq;
        poke(&c, vals[pokes[i].tensor], stored[pokes[i].tensor],
             (int64_t)pokes[i].row * heads * c.d + 7, pokes[i].value);
        reference(&c);
        run_case(&c, &r);
        compare(&c, &r, &e);
        ok(r.st_fwd == ZC_OK && r.st_bwd == ZC_OK && within(&c, &e, E_OUT, E_DV),
           "%s: NaN/Inf pattern as the reference, finite values within tolerance", pokes[i].what);
        result_free(&r);
        case_free(&c);
    }
}

/* ---- shared per-row math -------------------------------------------------------- */

static void test_math(void)
{
    float wa, wb, lse, out[2] = {NAN, NAN}, part[2] = {1, 2};
    uint16_t b;
    float src[4] = {1.0f, 3.14159265f, -2.5e-3f, 65504.0f}, back[4];
    uint16_t mid[4];

    ok(zc_float_to_bf16(1.0f) == 0x3f80 && zc_float_to_bf16(-0.0f) == 0x8000 &&
       zc_float_to_bf16(1.0f + 0x1p-8f) == 0x3f80 && zc_float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82 &&
       zc_float_to_bf16(INFINITY) == 0x7f80 && zc_float_to_bf16(FLT_MAX) == 0x7f80,
       "bf16: round to nearest even, overflow to inf");
    b = zc_float_to_bf16(NAN);
    ok(isnan(zc_bf16_to_float(b)) && zc_bf16_to_float(zc_float_to_bf16(-1.5f)) == -1.5f,
       "bf16: NaN stays NaN, exact values round-trip");
    lse = zc_attn_merge_lse(-INFINITY, -INFINITY, &wa, &wb);
    ok(lse == -INFINITY && wa == 0 && wb == 0, "merge: two empty rows stay empty");
    lse = zc_attn_merge_lse(logf(2.0f), logf(6.0f), &wa, &wb);
    ok(fabsf(lse - logf(8.0f)) < 1e-6f && fabsf(wa - 0.25f) < 1e-6f && fabsf(wb - 0.75f) < 1e-6f,
       "merge: log(2)+log(6) -> log(8), weights 1/4, 3/4");
    lse = -INFINITY;
    zc_attn_merge_row(out, &lse, part, 0.5f, 2);
    ok(lse == 0.5f && out[0] == 1 && out[1] == 2,
       "merge: an empty accumulator's garbage (NaN) is ignored");
    ok(zc_attn_convert(src, ZC_FLOAT32, 4, ZC_BFLOAT16, mid) == ZC_OK &&
       zc_attn_convert(mid, ZC_BFLOAT16, 4, ZC_FLOAT32, back) == ZC_OK && back[0] == 1.0f &&
       fabsf(back[1] - 3.140625f) == 0 && fabsf(back[3] - 65536.0f) == 0,
       "zc_attn_convert: fp32 -> bf16 -> fp32");
}

/* ---- bad arguments ----------------------------------------------------------------- */

static void expect_status(zc_status_t st, zc_status_t want, const char *name, const char *what)
{
    const char *msg = zc_get_last_error();
    size_t len = strlen(name);

    ok(st == want && strncmp(msg, name, len) == 0 && (msg[len] == ':' || msg[len] == '['),
       "bad argument %s: %s naming '%s' (got %d: %s)", what, zc_strerror(want), name, st, msg);
}

static void expect_invalid(zc_status_t st, const char *name, const char *what)
{
    expect_status(st, ZC_ERR_INVALID_ARG, name, what);
}

/* The mask the kernels' launches read back from accepted args
 * (zc_attn_args_mask, after zc_attn_check_call): causal with a window
 * hides the keys right of the query; without ZC_ATTN_WINDOW causal alone
 * decides. */
static int args_mask_is(const zc_attn_args_t *a, int causal, unsigned flags, int left, int right,
                        int64_t want_left, int64_t want_right)
{
    zc_attn_args_t x = *a;
    zc_attn_mask_t m, checked;
    int64_t tq, tk;

    x.causal = causal, x.flags = flags, x.window_left = left, x.window_right = right;
    m = zc_attn_args_mask(&x);
    return zc_attn_check_call(&x, &tq, &tk, &checked) == ZC_OK && m.left == checked.left &&
           m.right == checked.right && m.left == want_left && m.right == want_right;
}

static void test_args_mask(const zc_attn_args_t *a)
{
    ok(args_mask_is(a, 1, ZC_ATTN_WINDOW, 7, 0, 7, 0) &&
           args_mask_is(a, 1, ZC_ATTN_WINDOW, 7, -1, 7, 0),
       "args mask: causal with a window of 8 is (7, 0), whatever the right side");
    ok(args_mask_is(a, 0, ZC_ATTN_WINDOW, -1, 0, -1, 0) &&
           args_mask_is(a, 0, ZC_ATTN_WINDOW, 3, 5, 3, 5),
       "args mask: without causal the window alone, (-1, 0) and (3, 5)");
    ok(args_mask_is(a, 0, ZC_ATTN_WINDOW, -1, -1, -1, -1) &&
           args_mask_is(a, 1, ZC_ATTN_WINDOW, -1, -1, -1, 0),
       "args mask: (-1, -1) is full alone, causal with causal set");
    ok(args_mask_is(a, 1, 0, 0, 0, -1, 0) && args_mask_is(a, 0, 0, 0, 0, -1, -1),
       "args mask: without ZC_ATTN_WINDOW, causal (-1, 0) or full (-1, -1)");
}

static void test_bad_args(void)
{
    int l = 10;
    int32_t bad_cu[3] = {0, 5, 3}, bad0[2] = {1, 10};
    tcase_t c;
    result_t r;
    zc_attn_args_t a, x;
    /* out, lse, dq, dk, dv of 10 tokens, 4 query and 2 kv heads of 64 (fp32) */
    const size_t bytes[5] = {10 * 4 * 64 * 4, 10 * 4 * 4, 10 * 4 * 64 * 4, 10 * 2 * 64 * 4,
                             10 * 2 * 64 * 4};
    void *outs[5];
    int untouched = 1;

    case_init(&c, 1, &l, &l, 4, 2, 64, 1, NULL, NULL, ZC_FLOAT32, 1.0);
    run_case(&c, &r);
    case_args(&c, &a);
    a.out = r.out, a.lse = r.lse, a.dq = r.dq, a.dk = r.dk, a.dv = r.dv;
    outs[0] = r.out, outs[1] = r.lse, outs[2] = r.dq, outs[3] = r.dk, outs[4] = r.dv;
    for (int i = 0; i < 5; i++)
        memset(outs[i], 0xa5, bytes[i]); /* any write of a failed call shows */

    expect_invalid(zc_attn_fwd(NULL), "args", "NULL args");
    x = a, x.num_heads_kv = 3;
    expect_invalid(zc_attn_fwd(&x), "num_heads_q", "heads not a multiple");
    x = a, x.num_heads_kv = 0;
    expect_invalid(zc_attn_fwd(&x), "num_heads_kv", "zero kv heads");
    x = a, x.head_dim = 0;
    expect_invalid(zc_attn_fwd(&x), "head_dim", "head_dim 0");
    x = a, x.head_dim = 257;
    expect_invalid(zc_attn_bwd(&x), "head_dim", "head_dim 257");
    x = a, x.q = NULL;
    expect_invalid(zc_attn_fwd(&x), "q", "NULL q");
    x = a, x.v = NULL;
    expect_invalid(zc_attn_fwd(&x), "v", "NULL v");
    x = a, x.lse = NULL;
    expect_invalid(zc_attn_fwd(&x), "lse", "NULL lse");
    x = a, x.cu_seqlens_q = NULL;
    expect_invalid(zc_attn_fwd(&x), "cu_seqlens_q", "NULL cu_seqlens_q");
    x = a, x.batch = 2, x.cu_seqlens_q = bad_cu;
    expect_invalid(zc_attn_fwd(&x), "cu_seqlens_q", "decreasing cu_seqlens_q");
    x = a, x.cu_seqlens_kv = bad0;
    expect_invalid(zc_attn_fwd(&x), "cu_seqlens_kv", "cu_seqlens_kv[0] != 0");
    x = a, x.batch = -1;
    expect_invalid(zc_attn_fwd(&x), "batch", "negative batch");
    x = a, x.dtype = ZC_INT32;
    expect_invalid(zc_attn_fwd(&x), "dtype", "int32 dtype");
    x = a, x.out_dtype = ZC_FLOAT16;
    expect_invalid(zc_attn_fwd(&x), "out_dtype", "fp16 out");
    x = a, x.out_dtype = ZC_BFLOAT16, x.flags = ZC_ATTN_ACCUMULATE;
    expect_invalid(zc_attn_fwd(&x), "out_dtype", "accumulating into bf16");
    x = a, x.scale = NAN;
    expect_invalid(zc_attn_fwd(&x), "scale", "NaN scale");
    x = a, x.flags = 0x80;
    expect_invalid(zc_attn_fwd(&x), "flags", "unknown flag");
    x = a, x.dq = NULL;
    expect_invalid(zc_attn_bwd(&x), "dq", "NULL dq");
    x = a, x.dv = NULL;
    expect_invalid(zc_attn_bwd(&x), "dv", "NULL dv");
    x = a, x.out = NULL;
    expect_invalid(zc_attn_bwd(&x), "out", "NULL out without delta");
    x = a, x.grad_dtype = ZC_BFLOAT16, x.flags = ZC_ATTN_ACCUMULATE;
    expect_invalid(zc_attn_bwd(&x), "grad_dtype", "accumulating into bf16 gradients");
    x = a, x.delta = NULL;
    expect_invalid(zc_attn_bwd_delta(&x), "delta", "NULL delta");
    x = a, x.flags = ZC_ATTN_WINDOW, x.window_left = -2;
    expect_invalid(zc_attn_fwd(&x), "window_left", "window_left -2");
    x = a, x.flags = ZC_ATTN_WINDOW, x.window_right = -3;
    expect_invalid(zc_attn_bwd(&x), "window_right", "window_right -3");
    x = a, x.flags = ZC_ATTN_WINDOW, x.window_right = 4;
    expect_invalid(zc_attn_fwd(&x), "window_right", "causal with keys right of the query");
    x = a, x.window_left = 8;
    expect_invalid(zc_attn_fwd(&x), "window_left", "a window without ZC_ATTN_WINDOW");
    x = a, x.window_right = 2;
    expect_invalid(zc_attn_bwd_delta(&x), "window_right", "a window without ZC_ATTN_WINDOW");
    expect_invalid(zc_attn_merge(r.out, r.lse, -1, 4, 64, r.out, r.lse), "tokens",
                   "merge: negative tokens");
    expect_invalid(zc_attn_merge(NULL, r.lse, 10, 4, 64, r.out, r.lse), "part_out",
                   "merge: NULL part_out");
    expect_invalid(zc_attn_convert(r.out, ZC_INT64, 4, ZC_FLOAT32, r.dq), "src_dtype",
                   "convert: int64");
    for (int i = 0; i < 5; i++)
        for (size_t b = 0; b < bytes[i]; b++)
            untouched &= ((const unsigned char *)outs[i])[b] == 0xa5;
    ok(untouched, "failed calls leave out, lse, dq, dk and dv untouched");
    x = a, x.batch = 0, x.q = NULL, x.cu_seqlens_q = NULL, x.cu_seqlens_kv = NULL;
    ok(zc_attn_fwd(&x) == ZC_OK && zc_attn_bwd(&x) == ZC_OK, "batch 0 is a no-op");
    test_args_mask(&a);
    result_free(&r);
    case_free(&c);
}

int main(void)
{
    tap_plan(6 + 36 + 2 * 14 + 2 * 10 + 2 * 24 + 2 * 8 + 2 * 18 + 1 + 6 + (5 * 2 * 2 + 2) +
             5 * 3 + 3 * 4 + 5);

    test_math();                        /* 6 */
    test_bad_args();                    /* 36 */
    test_random(14, ZC_FLOAT32);        /* 28 */
    test_random(10, ZC_BFLOAT16);       /* 20 */
    test_random_masks(24, ZC_FLOAT32);  /* 48 */
    test_random_masks(8, ZC_BFLOAT16);  /* 16 */
    test_windows();                     /* 37 */
    test_long();                        /* 6 */
    test_offsets();                     /* 22 */
    test_split_kv(ZC_FLOAT32, 0, 0, 0); /* 3 each */
    test_split_kv(ZC_BFLOAT16, 0, 0, 0);
    test_split_kv(ZC_FLOAT32, 1, 150, 0);
    test_split_kv(ZC_FLOAT32, 1, 100, 100);
    test_split_kv(ZC_BFLOAT16, 1, 0, -1);
    test_paths();                       /* 12 */
    test_nonfinite();                   /* 5 */

    for (int t = 0; t < 2; t++)
        for (int k = 0; k < E_COUNT; k++)
            diag("worst %s %s error %.3e (tolerance %.1e)", t ? "bf16" : "fp32", err_names[k],
                 worst[t][k], tol[t][k]);
    return tap_done();
}
