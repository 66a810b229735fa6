/* Per-row math of blockwise (flash) attention, written once for the CPU
 * kernels (C) and the CUDA kernels (nvcc): the online-softmax rescale, the
 * log-sum-exp of a finished row, the stable merge of two partial results and
 * the bfloat16 conversions.  Every CPU test exercises these formulas, so the
 * GPU kernels inherit a tested definition of each edge case:
 *
 *  - scores are kept in base 2 (s2 = q.k * scale * log2(e)), so one exp2 per
 *    element replaces exp and a multiply;
 *  - a row with no visible key has l = 0, its output is 0 and its lse is
 *    -inf, the neutral element of the merge (its stored output is ignored);
 *  - NaN and Inf are never masked: they reach the rows a naive reference
 *    would reach.
 */
#ifndef ZC_KERNELS_ATTN_MATH_H
#define ZC_KERNELS_ATTN_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ZC_HOST_DEVICE __host__ __device__
#else
#define ZC_HOST_DEVICE
#endif

#define ZC_ATTN_LOG2E 1.44269504088896340736f
#define ZC_ATTN_LN2   0.69314718055994530942f
/* Largest head dimension the kernels accept. */
#define ZC_ATTN_MAX_HEAD_DIM 256

/* __float_as_uint and friends exist only in nvcc's device pass. */
ZC_HOST_DEVICE static inline uint32_t zc_attn_float_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    union { float f; uint32_t u; } x = { f };
    return x.u;
#endif
}

ZC_HOST_DEVICE static inline float zc_attn_bits_float(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    union { uint32_t u; float f; } x = { u };
    return x.f;
#endif
}

/* 2^f for f in [-1/2, 1/2]: degree-7 Taylor polynomial of exp(f ln 2),
 * error below 1e-8 relative.  The SIMD paths expand it with their own
 * multiply-add (FMA) and broadcast (SET1); kernels reduce x = n + f first. */
#define ZC_ATTN_EXP2_POLY(FMA, SET1, f)                                                 \
    FMA(FMA(FMA(FMA(FMA(FMA(FMA(SET1(1.5252733804059840e-05f), f,                       \
                                SET1(1.5403530393381606e-04f)), f,                      \
                            SET1(1.3333558146428443e-03f)), f,                          \
                        SET1(9.6181291076284772e-03f)), f,                              \
                    SET1(5.5504108664821580e-02f)), f,                                  \
                SET1(2.4022650695910071e-01f)), f,                                      \
            SET1(6.9314718055994531e-01f)), f,                                          \
        SET1(1.0f))

/* bfloat16 -> float is exact. */
ZC_HOST_DEVICE static inline float zc_bf16_to_float(uint16_t h)
{
    return zc_attn_bits_float((uint32_t)h << 16);
}

/* float -> bfloat16, round to nearest even; overflow gives +-inf like any
 * IEEE rounding, a NaN stays a (quiet) NaN with its sign. */
ZC_HOST_DEVICE static inline uint16_t zc_float_to_bf16(float f)
{
    uint32_t u = zc_attn_float_bits(f);

    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Online softmax: the factor that rescales a row's running sum and output
 * when its running maximum moves from m_old to m_new (base 2).  A row that
 * has seen nothing yet (m_old = -inf) has nothing to rescale; writing the
 * factor as 0 there avoids exp2(-inf - -inf) = NaN. */
ZC_HOST_DEVICE static inline float zc_attn_rescale(float m_old, float m_new)
{
    return m_old == -INFINITY ? 0.0f : exp2f(m_old - m_new);
}

/* Natural-log log-sum-exp of a finished row from its base-2 running max m2
 * and running sum l of exp2(s2 - m2); -inf for a row that saw no key. */
ZC_HOST_DEVICE static inline float zc_attn_row_lse(float m2, float l)
{
    return l == 0.0f ? -INFINITY : (m2 + log2f(l)) * ZC_ATTN_LN2;
}

/* Stable merge of two partial results of one row over disjoint key sets:
 * returns lse = log(exp(lse_a) + exp(lse_b)) and the weights with which the
 * partial outputs combine, out = w_a * out_a + w_b * out_b.  A side with
 * lse = -inf (no key) gets weight exactly 0 and the callers must select the
 * other output rather than multiply, so garbage in an empty partial never
 * leaks; a NaN lse gives NaN weights (it came from a NaN input). */
ZC_HOST_DEVICE static inline float zc_attn_merge_lse(float lse_a, float lse_b,
                                                     float *w_a, float *w_b)
{
    float hi, lse;

    if (lse_a == -INFINITY && lse_b == -INFINITY) {
        *w_a = 0.0f;
        *w_b = 0.0f;
        return -INFINITY;
    }
    if (lse_b == -INFINITY) {
        *w_a = 1.0f;
        *w_b = 0.0f;
        return lse_a;
    }
    if (lse_a == -INFINITY) {
        *w_a = 0.0f;
        *w_b = 1.0f;
        return lse_b;
    }
    hi = lse_a > lse_b ? lse_a : lse_b;
    if (lse_a != lse_a || lse_b != lse_b)
        hi = lse_a + lse_b; /* NaN */
    lse = hi + log1pf(expf(-fabsf(lse_a - lse_b)));
    *w_a = expf(lse_a - lse);
    *w_b = expf(lse_b - lse);
    return lse;
}

/* One element of the merge of a partial output into an accumulated one,
 * with the weights zc_attn_merge_lse gave for (acc_lse, part_lse).  Only an
 * empty side (lse = -inf) is skipped; any other weight multiplies, so a NaN
 * in a partial reaches the result even when its weight underflows to 0. */
ZC_HOST_DEVICE static inline float zc_attn_merge_value(float acc, float part, float acc_lse,
                                                       float part_lse, float w_acc, float w_part)
{
    if (part_lse == -INFINITY)
        return acc_lse == -INFINITY ? 0.0f : acc;
    if (acc_lse == -INFINITY)
        return part;
    return w_acc * acc + w_part * part;
}

/* Merge one partial output row into an accumulated row (both fp32). */
ZC_HOST_DEVICE static inline void zc_attn_merge_row(float *out, float *lse, const float *part_out,
                                                    float part_lse, int head_dim)
{
    float w_acc, w_part;
    float merged = zc_attn_merge_lse(*lse, part_lse, &w_acc, &w_part);

    for (int d = 0; d < head_dim; d++)
        out[d] = zc_attn_merge_value(out[d], part_out[d], *lse, part_lse, w_acc, w_part);
    *lse = merged;
}

/* The attention mask, in flash-attention's window_size convention: a query
 * at global position p sees the key at global position k when
 *
 *     (left < 0 || k >= p - left)  &&  (right < 0 || k <= p + right),
 *
 * -1 meaning unbounded on that side:
 *     full (both directions)                      (-1, -1)
 *     causal                                      (-1,  0)
 *     sliding causal window of w keys (itself in)  (w - 1, 0)
 *     local window, w keys each side               (w, w)
 * A window wider than the sequence is the unbounded mask of that side.
 *
 * Positions are global: query row i of a segment whose queries start at
 * q_start sits at q_start + i, its key j at kv_start + j.  Both starts 0
 * align the mask top-left (query i on key i); flash-attention's bottom-right
 * alignment of lq queries over lk keys is q_start = lk - lq.  A ring step
 * passes the positions of the blocks it holds, so a block pair is full,
 * partial or empty by itself.  Every kernel reads its mask through the two
 * range functions below; a row whose range is empty has l = 0 (out 0, lse
 * -inf), a key no row sees gets dk = dv = 0. */
typedef struct {
    int64_t left;   /* keys before the query's position it sees; -1: all */
    int64_t right;  /* keys after it; -1: all */
} zc_attn_mask_t;

ZC_HOST_DEVICE static inline zc_attn_mask_t zc_attn_mask_make(int64_t left, int64_t right)
{
    zc_attn_mask_t m;

    m.left = left;
    m.right = right;
    return m;
}

ZC_HOST_DEVICE static inline int zc_attn_mask_sees(zc_attn_mask_t m, int64_t q_pos,
                                                   int64_t k_pos)
{
    return (m.left < 0 || k_pos >= q_pos - m.left) && (m.right < 0 || k_pos <= q_pos + m.right);
}

ZC_HOST_DEVICE static inline int zc_attn_mask_is_causal(zc_attn_mask_t m)
{
    return m.left < 0 && m.right == 0;
}

/* [a, b) clamped into [0, n], empty as *lo == *hi. */
ZC_HOST_DEVICE static inline void zc_attn_mask_clamp(int64_t a, int64_t b, int64_t n,
                                                     int64_t *lo, int64_t *hi)
{
    *lo = a < 0 ? 0 : a > n ? n : a;
    *hi = b < *lo ? *lo : b > n ? n : b;
}

/* Keys [*lo, *hi) of a segment's lk keys that its query row i sees.  Both
 * bounds are non-decreasing in i, so the keys of rows [i0, i1] are
 * [lo(i0), hi(i1)) and any key in there is seen by some of them. */
ZC_HOST_DEVICE static inline void zc_attn_mask_keys(zc_attn_mask_t m, int64_t i, int64_t q_start,
                                                    int64_t kv_start, int64_t lk, int64_t *lo,
                                                    int64_t *hi)
{
    const int64_t p = i + q_start - kv_start; /* the row's position among the keys */

    zc_attn_mask_clamp(m.left < 0 ? 0 : p - m.left, m.right < 0 ? lk : p + m.right + 1, lk, lo,
                       hi);
}

/* Rows [*lo, *hi) of a segment's lq rows that see its key j (non-decreasing
 * in j, like zc_attn_mask_keys): a key sees its rows as a query its keys,
 * under the mask mirrored (the rows right of a key are its window's left
 * side). */
ZC_HOST_DEVICE static inline void zc_attn_mask_rows(zc_attn_mask_t m, int64_t j, int64_t q_start,
                                                    int64_t kv_start, int64_t lq, int64_t *lo,
                                                    int64_t *hi)
{
    zc_attn_mask_keys(zc_attn_mask_make(m.right, m.left), j, kv_start, q_start, lq, lo, hi);
}

#endif /* ZC_KERNELS_ATTN_MATH_H */
