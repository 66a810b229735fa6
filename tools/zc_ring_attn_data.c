/* Ring attention test data: see zc_ring_attn_data.h. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_math.h"
#include "zc_attn_ref.h"
#include "zc_plan_dataset.h"
#include "zc_ring_attn_data.h"

static uint64_t rad_mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static float rad_load(const void *p, zc_datatype_t dtype, int64_t i)
{
    return dtype == ZC_FLOAT32 ? ((const float *)p)[i] : zc_bf16_to_float(((const uint16_t *)p)[i]);
}

static void rad_store(void *p, zc_datatype_t dtype, int64_t i, float v)
{
    if (dtype == ZC_FLOAT32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = zc_float_to_bf16(v);
}

size_t rad_sample(int dataset, int64_t total, int64_t scale, uint64_t seed, int64_t **lengths)
{
    zc_rng_t rng = {seed};
    int64_t *raw = NULL, sum = 0;
    size_t n = zc_dataset_sample(dataset, total * scale, &rng, &raw), kept = 0;

    for (size_t i = 0; i < n && sum < total; i++) {
        int64_t len = raw[i] / scale > 0 ? raw[i] / scale : 1;

        raw[kept++] = len < total - sum ? len : total - sum;
        sum += raw[kept - 1];
    }
    if (kept > 0 && sum < total)
        raw[kept - 1] += total - sum;
    *lengths = raw;
    return kept;
}

size_t rad_row_bytes(const rad_batch_t *b, int kv)
{
    return (size_t)(kv ? b->hkv : b->hq) * (size_t)b->d * zc_datatype_size(b->dtype);
}

static void *rad_fill(int64_t count, zc_datatype_t dtype, uint64_t seed)
{
    void *p = malloc((size_t)(count ? count : 1) * zc_datatype_size(dtype));

    for (int64_t i = 0; p && i < count; i++)
        rad_store(p, dtype, i, (float)((double)(rad_mix(seed + (uint64_t)i) >> 11) /
                                       4503599627370496.0 - 1.0));
    return p;
}

int rad_batch_init(rad_batch_t *b, const int64_t *lengths, size_t n, int hq, int hkv, int d,
                   zc_datatype_t dtype, uint64_t seed)
{
    size_t elem = zc_datatype_size(dtype);
    int64_t rq, rk;

    memset(b, 0, sizeof(*b));
    b->hq = hq;
    b->hkv = hkv;
    b->d = d;
    b->dtype = dtype;
    b->nseqs = n;
    b->lengths = malloc((n ? n : 1) * sizeof(int64_t));
    b->offset = malloc((n ? n : 1) * sizeof(int64_t));
    if (!b->lengths || !b->offset)
        return -1;
    for (size_t s = 0; s < n; s++) {
        b->lengths[s] = lengths[s];
        b->offset[s] = b->total;
        b->total += lengths[s];
    }
    rq = b->total * hq * d;
    rk = b->total * hkv * d;
    seed = rad_mix(seed);
    b->q = rad_fill(rq, dtype, seed * 4 + 0);
    b->k = rad_fill(rk, dtype, seed * 4 + 1);
    b->v = rad_fill(rk, dtype, seed * 4 + 2);
    b->dout = rad_fill(rq, dtype, seed * 4 + 3);
    b->out = malloc((size_t)(rq ? rq : 1) * elem);
    b->dq = malloc((size_t)(rq ? rq : 1) * elem);
    b->dk = malloc((size_t)(rk ? rk : 1) * elem);
    b->dv = malloc((size_t)(rk ? rk : 1) * elem);
    b->lse = malloc((size_t)(b->total ? b->total * hq : 1) * sizeof(float));
    return b->q && b->k && b->v && b->dout && b->out && b->dq && b->dk && b->dv && b->lse ? 0
                                                                                         : -1;
}

void rad_batch_poke(rad_batch_t *b, int which, int64_t index, float value)
{
    void *t[4] = {b->q, b->k, b->v, b->dout};

    rad_store(t[which], b->dtype, index, value);
}

static double rad_max_abs(const void *p, zc_datatype_t dtype, int64_t n)
{
    double m = 0;

    for (int64_t i = 0; i < n; i++) {
        double x = fabs((double)rad_load(p, dtype, i));
        if (isfinite(x) && x > m)
            m = x;
    }
    return m;
}

static void rad_batch_maxima(rad_batch_t *b, int backward);

zc_status_t rad_batch_reference(rad_batch_t *b, int backward)
{
    int32_t *cu = malloc((b->nseqs + 1) * sizeof(int32_t));
    zc_attn_args_t a = ZC_ATTN_ARGS_INITIALIZER;
    zc_status_t st;

    if (!cu)
        return ZC_ERR_NO_MEMORY;
    cu[0] = 0;
    for (size_t s = 0; s < b->nseqs; s++)
        cu[s + 1] = cu[s] + (int32_t)b->lengths[s];
    a.batch = (int)b->nseqs;
    a.num_heads_q = b->hq;
    a.num_heads_kv = b->hkv;
    a.head_dim = b->d;
    a.cu_seqlens_q = cu;
    a.cu_seqlens_kv = cu;
    a.causal = !(b->flags & ZC_ATTN_WINDOW);
    a.flags = b->flags & ZC_ATTN_WINDOW;
    a.window_left = b->window_left;
    a.window_right = b->window_right;
    a.scale = 1.0f / sqrtf((float)b->d);
    a.dtype = a.out_dtype = a.grad_dtype = b->dtype;
    a.q = b->q;
    a.k = b->k;
    a.v = b->v;
    a.out = b->out;
    a.lse = b->lse;
    a.dout = b->dout;
    a.dq = b->dq;
    a.dk = b->dk;
    a.dv = b->dv;
    st = zc_attn_fwd(&a);
    if (st == ZC_OK && backward)
        st = zc_attn_bwd(&a);
    free(cu);
    rad_batch_maxima(b, backward);
    return st;
}

/* A whole tensor of dtype as fp32 (NULL when out of memory). */
static float *rad_fp32(const void *src, zc_datatype_t dtype, int64_t n)
{
    float *f = malloc((size_t)(n ? n : 1) * sizeof(float));

    if (f && zc_attn_convert(src, dtype, n, ZC_FLOAT32, f) != ZC_OK) {
        free(f);
        return NULL;
    }
    return f;
}

zc_status_t rad_batch_reference64(rad_batch_t *b)
{
    int64_t rq = b->total * b->hq * b->d, rk = b->total * b->hkv * b->d;
    int32_t *cu = malloc((b->nseqs + 1) * sizeof(int32_t));
    float *q = rad_fp32(b->q, b->dtype, rq), *k = rad_fp32(b->k, b->dtype, rk);
    float *v = rad_fp32(b->v, b->dtype, rk), *dout = rad_fp32(b->dout, b->dtype, rq);
    float *out = malloc((size_t)(rq ? rq : 1) * sizeof(float));
    double *row = malloc(2 * (size_t)b->d * sizeof(double));
    zar_call_t c = {0};
    zc_status_t st = ZC_ERR_NO_MEMORY;

    if (!cu || !q || !k || !v || !dout || !out || !row)
        goto done;
    cu[0] = 0;
    for (size_t s = 0; s < b->nseqs; s++)
        cu[s + 1] = cu[s] + (int32_t)b->lengths[s];
    c = (zar_call_t){.cu = cu, .batch = (int)b->nseqs, .hq = b->hq, .hkv = b->hkv, .d = b->d,
                     .causal = !(b->flags & ZC_ATTN_WINDOW),
                     .window = (b->flags & ZC_ATTN_WINDOW) != 0,
                     .window_left = b->window_left, .window_right = b->window_right,
                     .scale = 1.0 / sqrt((double)b->d), .q = q, .k = k, .v = v, .dout = dout,
                     .out = out, .lse = b->lse};
    for (int64_t t = 0; t < b->total; t++)
        for (int h = 0; h < b->hq; h++) {
            double lse;

            zar_fwd_row(&c, t, h, row, &lse);
            for (int x = 0; x < b->d; x++)
                out[(t * b->hq + h) * b->d + x] = (float)row[x];
            b->lse[t * b->hq + h] = (float)lse;
        }
    /* the backward takes the dtype's out, as a caller's forward gives it */
    zc_attn_convert(out, ZC_FLOAT32, rq, b->dtype, b->out);
    zc_attn_convert(b->out, b->dtype, rq, ZC_FLOAT32, out);
    for (int64_t t = 0; t < b->total; t++) {
        for (int h = 0; h < b->hq; h++) {
            zar_dq_row(&c, t, h, row);
            for (int x = 0; x < b->d; x++)
                rad_store(b->dq, b->dtype, (t * b->hq + h) * b->d + x, (float)row[x]);
        }
        for (int h = 0; h < b->hkv; h++) {
            zar_dkv_row(&c, t, h, row, row + b->d);
            for (int x = 0; x < b->d; x++) {
                rad_store(b->dk, b->dtype, (t * b->hkv + h) * b->d + x, (float)row[x]);
                rad_store(b->dv, b->dtype, (t * b->hkv + h) * b->d + x, (float)row[b->d + x]);
            }
        }
    }
    rad_batch_maxima(b, 1);
    st = ZC_OK;
done:
    free(cu);
    free(q);
    free(k);
    free(v);
    free(dout);
    free(out);
    free(row);
    return st;
}

static void rad_batch_maxima(rad_batch_t *b, int backward)
{
    b->max_abs[RAD_OUT] = rad_max_abs(b->out, b->dtype, b->total * b->hq * b->d);
    b->max_abs[RAD_LSE] = rad_max_abs(b->lse, ZC_FLOAT32, b->total * b->hq);
    if (backward) {
        b->max_abs[RAD_DQ] = rad_max_abs(b->dq, b->dtype, b->total * b->hq * b->d);
        b->max_abs[RAD_DK] = rad_max_abs(b->dk, b->dtype, b->total * b->hkv * b->d);
        b->max_abs[RAD_DV] = rad_max_abs(b->dv, b->dtype, b->total * b->hkv * b->d);
    }
}

void rad_batch_free(rad_batch_t *b)
{
    free(b->lengths);
    free(b->offset);
    free(b->q);
    free(b->k);
    free(b->v);
    free(b->dout);
    free(b->out);
    free(b->dq);
    free(b->dk);
    free(b->dv);
    free(b->lse);
    memset(b, 0, sizeof(*b));
}

void rad_gather(const rad_batch_t *b, const zc_plan_piece_t *pieces, size_t n, const void *whole,
                size_t row_bytes, void *local)
{
    char *to = local;

    for (size_t i = 0; i < n; i++) {
        size_t len = (size_t)(pieces[i].end - pieces[i].begin) * row_bytes;

        memcpy(to, (const char *)whole + (size_t)(b->offset[pieces[i].seq] + pieces[i].begin) *
                                             row_bytes, len);
        to += len;
    }
}

double rad_compare(const rad_batch_t *b, int which, const zc_plan_piece_t *pieces, size_t n,
                   const void *local, double tol, int64_t *wrong)
{
    const void *ref[RAD_NRESULTS] = {b->out, b->lse, b->dq, b->dk, b->dv};
    int per_row = which == RAD_LSE ? b->hq : (which == RAD_DK || which == RAD_DV ? b->hkv : b->hq) *
                                                 b->d;
    zc_datatype_t dtype = which == RAD_LSE ? ZC_FLOAT32 : b->dtype;
    double worst = 0, scale = b->max_abs[which];
    int64_t row = 0;

    *wrong = 0;
    for (size_t i = 0; i < n; i++) {
        for (int64_t t = pieces[i].begin; t < pieces[i].end; t++, row++) {
            int64_t at = (b->offset[pieces[i].seq] + t) * per_row;

            for (int e = 0; e < per_row; e++) {
                double x = rad_load(local, dtype, row * per_row + e);
                double r = rad_load(ref[which], dtype, at + e);
                double err;

                if (isnan(r) || isnan(x) || isinf(r) || isinf(x))
                    err = (isnan(r) && isnan(x)) || x == r ? 0 : INFINITY;
                else if (fabs(r) + scale > 0)
                    err = fabs(x - r) / (fabs(r) + scale);
                else
                    err = x == r ? 0 : INFINITY;
                if (err > worst)
                    worst = err;
                *wrong += err > tol;
            }
        }
    }
    return worst;
}

double rad_tolerance(zc_datatype_t dtype)
{
    return dtype == ZC_FLOAT32 ? 1e-5 : 2.5e-2;
}

void rad_local_free(rad_local_t *l)
{
    free(l->q);
    free(l->k);
    free(l->v);
    free(l->dout);
    free(l->out);
    free(l->dq);
    free(l->dk);
    free(l->dv);
    free(l->lse);
    memset(l, 0, sizeof(*l));
}

int rad_local_make(const rad_batch_t *b, zc_plan_h plan, int rank, int64_t pad, rad_local_t *l)
{
    size_t rq = rad_row_bytes(b, 0), rk = rad_row_bytes(b, 1), len;
    size_t rl = (size_t)b->hq * sizeof(float);
    const zc_plan_piece_t *pieces;
    zc_plan_rank_t mine;
    size_t n;

    memset(l, 0, sizeof(*l));
    if (zc_plan_rank_pieces(plan, rank, &pieces, &n) != ZC_OK || zc_plan_rank(plan, rank, &mine) != ZC_OK)
        return -1;
    l->rows = mine.tokens;
    l->pad = pad;
    len = (size_t)(l->rows + pad);
    len = len ? len : 1;
    l->q = malloc(len * rq);
    l->k = malloc(len * rk);
    l->v = malloc(len * rk);
    l->dout = malloc(len * rq);
    l->out = malloc(len * rq);
    l->dq = malloc(len * rq);
    l->dk = malloc(len * rk);
    l->dv = malloc(len * rk);
    l->lse = malloc(len * rl);
    if (!l->q || !l->k || !l->v || !l->dout || !l->out || !l->dq || !l->dk || !l->dv || !l->lse) {
        rad_local_free(l);
        return -1;
    }
    rad_gather(b, pieces, n, b->q, rq, l->q);
    rad_gather(b, pieces, n, b->k, rk, l->k);
    rad_gather(b, pieces, n, b->v, rk, l->v);
    rad_gather(b, pieces, n, b->dout, rq, l->dout);
    l->pieces = pieces;
    l->npieces = n;
    memset(l->out, RAD_PAD_BYTE, len * rq);
    memset(l->dq, RAD_PAD_BYTE, len * rq);
    memset(l->dk, RAD_PAD_BYTE, len * rk);
    memset(l->dv, RAD_PAD_BYTE, len * rk);
    memset(l->lse, RAD_PAD_BYTE, len * rl);
    return 0;
}

void rad_local_args(const rad_batch_t *b, const rad_local_t *l, zc_ring_attn_args_t *args)
{
    args->num_heads_q = b->hq;
    args->num_heads_kv = b->hkv;
    args->head_dim = b->d;
    args->dtype = b->dtype;
    args->flags = b->flags;
    args->window_left = b->window_left;
    args->window_right = b->window_right;
    args->tokens = l->rows + l->pad;
    args->q = l->q;
    args->k = l->k;
    args->v = l->v;
    args->out = l->out;
    args->lse = l->lse;
    args->dout = l->dout;
    args->dq = l->dq;
    args->dk = l->dk;
    args->dv = l->dv;
}

static int rad_pad_intact(const void *buf, int64_t rows, int64_t pad, size_t row_bytes)
{
    const unsigned char *p = (const unsigned char *)buf + (size_t)rows * row_bytes;

    for (size_t i = 0; i < (size_t)pad * row_bytes; i++)
        if (p[i] != RAD_PAD_BYTE)
            return 0;
    return 1;
}

int64_t rad_local_check(const rad_batch_t *b, const rad_local_t *l, int backward, double tol,
                        double worst[RAD_NRESULTS])
{
    const void *got[RAD_NRESULTS] = {l->out, l->lse, l->dq, l->dk, l->dv};
    size_t rows[RAD_NRESULTS] = {rad_row_bytes(b, 0), (size_t)b->hq * sizeof(float),
                                 rad_row_bytes(b, 0), rad_row_bytes(b, 1), rad_row_bytes(b, 1)};
    int64_t wrong = 0;

    for (int w = 0; w < RAD_NRESULTS; w++) {
        int64_t bad = 0;

        worst[w] = 0;
        if (w >= RAD_DQ && !backward)
            continue;
        if (!rad_pad_intact(got[w], l->rows, l->pad, rows[w]))
            return -1;
        worst[w] = rad_compare(b, w, l->pieces, l->npieces, got[w], tol, &bad);
        wrong += bad;
    }
    return wrong;
}
