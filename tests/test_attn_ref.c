/* The float64 reference of the attention benchmarks (tools/zc_attn_ref.c),
 * which decides zc_attn_perf's #wrong and -G's error column, against the
 * CPU kernels in fp32 on every row of varlen batches: forward rows (out,
 * lse), dq rows from the kernels' out and lse, and dk/dv rows of every key,
 * causal and full, with GQA; and the sampled rows it picks. */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "tap.h"
#include "tools/zc_attn_ref.h"
#include "zcomm.h"

/* max |x - ref| / max |ref| */
typedef struct {
    double diff, ref;
} norm_t;

static void norm_add(norm_t *n, const float *x, const double *ref, int count)
{
    for (int i = 0; i < count; i++) {
        const double e = fabs(x[i] - ref[i]);

        n->diff = e > n->diff || e != e ? e : n->diff;
        n->ref = fmax(n->ref, fabs(ref[i]));
    }
}

static double norm_err(const norm_t *n)
{
    return n->diff / fmax(n->ref, 1e-30);
}

static void one_batch(const int32_t *cu, int batch, int hq, int hkv, int d, int causal)
{
    const int64_t t = cu[batch], nq = t * hq * d, nk = t * hkv * d;
    float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk);
    float *v = malloc(sizeof(float) * nk), *dout = malloc(sizeof(float) * nq);
    float *out = malloc(sizeof(float) * nq), *lse = malloc(sizeof(float) * t * hq);
    float *dq = malloc(sizeof(float) * nq), *dk = malloc(sizeof(float) * nk);
    float *dv = malloc(sizeof(float) * nk);
    double *r1 = malloc(sizeof(double) * d), *r2 = malloc(sizeof(double) * d), rl;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    zc_attn_args_t a = ZC_ATTN_ARGS_INITIALIZER;
    norm_t no = {0, 0}, nl = {0, 0}, ndq = {0, 0}, ndk = {0, 0}, ndv = {0, 0};
    zc_status_t st;

    zar_random(q, ZC_FLOAT32, nq, &seed);
    zar_random(k, ZC_FLOAT32, nk, &seed);
    zar_random(v, ZC_FLOAT32, nk, &seed);
    zar_random(dout, ZC_FLOAT32, nq, &seed);
    a.batch = batch, a.num_heads_q = hq, a.num_heads_kv = hkv, a.head_dim = d;
    a.cu_seqlens_q = a.cu_seqlens_kv = cu;
    a.causal = causal;
    a.scale = 1.0f / sqrtf((float)d);
    a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse;
    a.dout = dout, a.dq = dq, a.dk = dk, a.dv = dv;
    st = zc_attn_fwd(&a);
    if (st == ZC_OK)
        st = zc_attn_bwd(&a);
    ok(st == ZC_OK, "%d sequences, %d/%d heads, d %d, %s: the CPU kernels ran (%s)", batch, hq,
       hkv, d, causal ? "causal" : "full", zc_get_last_error());

    zar_call_t c = {.cu = cu, .batch = batch, .hq = hq, .hkv = hkv, .d = d, .causal = causal,
                    .scale = a.scale, .q = q, .k = k, .v = v, .dout = dout, .out = out,
                    .lse = lse};
    for (int64_t i = 0; i < t; i++)
        for (int h = 0; h < hq; h++) {
            const float l = lse[i * hq + h];

            zar_fwd_row(&c, i, h, r1, &rl);
            norm_add(&no, out + (i * hq + h) * d, r1, d);
            norm_add(&nl, &l, &rl, 1);
            zar_dq_row(&c, i, h, r1);
            norm_add(&ndq, dq + (i * hq + h) * d, r1, d);
        }
    for (int64_t j = 0; j < t; j++)
        for (int h = 0; h < hkv; h++) {
            zar_dkv_row(&c, j, h, r1, r2);
            norm_add(&ndk, dk + (j * hkv + h) * d, r1, d);
            norm_add(&ndv, dv + (j * hkv + h) * d, r2, d);
        }
    ok(norm_err(&no) < 1e-5 && norm_err(&nl) < 1e-5,
       "%s, %d/%d heads: every forward row (out %.1e, lse %.1e) as the CPU kernels'",
       causal ? "causal" : "full", hq, hkv, norm_err(&no), norm_err(&nl));
    ok(norm_err(&ndq) < 1e-5, "%s, %d/%d heads: every dq row (%.1e) as the CPU kernels'",
       causal ? "causal" : "full", hq, hkv, norm_err(&ndq));
    ok(norm_err(&ndk) < 1e-5 && norm_err(&ndv) < 1e-5,
       "%s, %d/%d heads: every dk and dv row (%.1e, %.1e) as the CPU kernels'",
       causal ? "causal" : "full", hq, hkv, norm_err(&ndk), norm_err(&ndv));
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
    free(r1), free(r2);
}

int main(void)
{
    /* lengths 1, 7, 33, 64 and 5: a one-token sequence, odd and even ones */
    const int32_t cu[] = {0, 1, 8, 41, 105, 110};
    int first = 0, last = 0, inside = 1, heads = 1;

    tap_plan(1 + 4 * 4);
    for (int i = 0; i < 16; i++) {
        int64_t t;
        int h;

        zar_sample(110, 3, 16, i, &t, &h);
        first |= t == 0, last |= t == 109;
        inside &= t >= 0 && t < 110;
        heads &= h >= 0 && h < 3;
    }
    ok(first && last && inside && heads,
       "zar_sample: 16 rows of 110 tokens and 3 heads, the first and last token among them, "
       "all in range");
    for (int causal = 0; causal < 2; causal++) {
        one_batch(cu, 5, 4, 2, 16, causal);
        one_batch(cu, 5, 3, 3, 24, causal);
    }
    return tap_done();
}
