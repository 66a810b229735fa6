/* Random inputs and the float64 reference of sampled rows: see zc_attn_ref.h. */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "zc_attn_ref.h"

static double zar_uniform(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (double)(*s >> 11) / 9007199254740992.0;
}

void zar_random(void *dst, zc_datatype_t dtype, int64_t n, uint64_t *seed)
{
    enum { CHUNK = 4096 };
    float f[CHUNK];
    const size_t es = zc_datatype_size(dtype);

    for (int64_t at = 0; at < n; at += CHUNK) {
        const int64_t m = n - at < CHUNK ? n - at : CHUNK;

        for (int64_t i = 0; i < m; i++) {
            const double u1 = 1.0 - zar_uniform(seed), u2 = zar_uniform(seed); /* u1 in (0, 1] */

            f[i] = (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
        }
        zc_attn_convert(f, ZC_FLOAT32, m, dtype, (char *)dst + (size_t)at * es);
    }
}

void zar_sample(int64_t tokens, int heads, int n, int i, int64_t *token, int *head)
{
    *token = n > 1 ? (int64_t)((double)i * (double)(tokens - 1) / (n - 1)) : 0;
    *head = (int)(((uint64_t)i * 2654435761u + (uint64_t)*token) % (uint64_t)heads);
}

/* The sequence holding token t. */
static int zar_seq(const zar_call_t *c, int64_t t)
{
    int lo = 0, hi = c->batch - 1;

    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;

        if (c->cu[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static double zar_dot(const float *a, const float *b, int d)
{
    double s = 0;

    for (int x = 0; x < d; x++)
        s += (double)a[x] * b[x];
    return s;
}

/* How far left and right of itself a query sees (-1: unbounded), written
 * out here rather than taken from kernels/attn_math.h, so that the reference
 * does not share the kernels' definition. */
static void zar_reach(const zar_call_t *c, int64_t *left, int64_t *right)
{
    *left = c->window ? c->window_left : -1;
    *right = c->causal ? 0 : c->window ? c->window_right : -1;
}

/* The keys query `token` sees: [first, end) of the token index. */
static void zar_keys(const zar_call_t *c, int64_t token, int64_t *first, int64_t *end)
{
    const int s = zar_seq(c, token);
    int64_t left, right;

    zar_reach(c, &left, &right);
    *first = left >= 0 && token - left > c->cu[s] ? token - left : c->cu[s];
    *end = right >= 0 && token + right + 1 < c->cu[s + 1] ? token + right + 1 : c->cu[s + 1];
}

#define ZAR_ROW(t, heads, h, c) ((((int64_t)(t) * (heads)) + (h)) * (c)->d)

void zar_fwd_row(const zar_call_t *c, int64_t token, int h, double *out, double *lse)
{
    const int hk = h / (c->hq / c->hkv);
    const float *q = c->q + ZAR_ROW(token, c->hq, h, c);
    int64_t first, end;
    double m = -INFINITY, l = 0;

    zar_keys(c, token, &first, &end);
    for (int x = 0; x < c->d; x++)
        out[x] = 0;
    for (int64_t j = first; j < end; j++)
        m = fmax(m, zar_dot(q, c->k + ZAR_ROW(j, c->hkv, hk, c), c->d) * c->scale);
    for (int64_t j = first; j < end; j++) {
        const float *v = c->v + ZAR_ROW(j, c->hkv, hk, c);
        const double p = exp(zar_dot(q, c->k + ZAR_ROW(j, c->hkv, hk, c), c->d) * c->scale - m);

        l += p;
        for (int x = 0; x < c->d; x++)
            out[x] += p * v[x];
    }
    for (int x = 0; x < c->d; x++)
        out[x] /= l;
    *lse = m + log(l);
}

/* dS of query row i (head h) and key row j, scale included, and P. */
static double zar_ds(const zar_call_t *c, int64_t i, int h, int64_t j, int hk, double *p)
{
    const int64_t qi = ZAR_ROW(i, c->hq, h, c), kj = ZAR_ROW(j, c->hkv, hk, c);
    const double delta = zar_dot(c->dout + qi, c->out + qi, c->d);

    *p = exp(zar_dot(c->q + qi, c->k + kj, c->d) * c->scale - c->lse[i * c->hq + h]);
    return *p * (zar_dot(c->dout + qi, c->v + kj, c->d) - delta) * c->scale;
}

void zar_dq_row(const zar_call_t *c, int64_t token, int h, double *dq)
{
    const int hk = h / (c->hq / c->hkv);
    int64_t first, end;
    double p;

    zar_keys(c, token, &first, &end);
    for (int x = 0; x < c->d; x++)
        dq[x] = 0;
    for (int64_t j = first; j < end; j++) {
        const double ds = zar_ds(c, token, h, j, hk, &p);
        const float *k = c->k + ZAR_ROW(j, c->hkv, hk, c);

        for (int x = 0; x < c->d; x++)
            dq[x] += ds * k[x];
    }
}

void zar_dkv_row(const zar_call_t *c, int64_t token, int hk, double *dk, double *dv)
{
    const int g = c->hq / c->hkv, s = zar_seq(c, token);
    int64_t left, right, first, end;
    double p;

    /* the rows that see key `token`: the mask mirrored */
    zar_reach(c, &left, &right);
    first = right >= 0 && token - right > c->cu[s] ? token - right : c->cu[s];
    end = left >= 0 && token + left + 1 < c->cu[s + 1] ? token + left + 1 : c->cu[s + 1];
    for (int x = 0; x < c->d; x++)
        dk[x] = dv[x] = 0;
    for (int h = hk * g; h < (hk + 1) * g; h++)
        for (int64_t i = first; i < end; i++) {
            const double ds = zar_ds(c, i, h, token, hk, &p);
            const float *q = c->q + ZAR_ROW(i, c->hq, h, c);
            const float *dout = c->dout + ZAR_ROW(i, c->hq, h, c);

            for (int x = 0; x < c->d; x++) {
                dk[x] += ds * q[x];
                dv[x] += p * dout[x];
            }
        }
}
