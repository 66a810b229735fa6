/* Flash-attention block kernels, written once over a small vector
 * vocabulary and compiled once per SIMD path.  The including file defines,
 * under its own target options:
 *
 *   zv_t, ZV_W                 vector of ZV_W floats
 *   zv_load/zv_store(p)        unaligned; zv_set1(x), zv_zero()
 *   zv_fmadd(a, b, c)          a * b + c; zv_mul, zv_sub, zv_add, zv_max
 *   zv_hmax(v), zv_hsum(v)     horizontal max / sum
 *   zv_exp2(v)                 2^v with exp2(-inf) = 0, NaN kept
 *   zv_keep_range(v, a, b, fill)  lanes outside [a, b) replaced by fill
 *   ZK_R, ZK_CV                register tile: rows x vectors of the GEMM
 *   ZK_NAME(x)                 x with the path's suffix
 *
 * Layout of one tile: S/P and dP/dS are [BQ][BK], output and gradient
 * accumulators are [rows][dp] fp32 in the thread's scratch.  The mask
 * (attn_math.h) gives every row a range of visible keys, both ends
 * non-decreasing down the rows: a query block visits only the key tiles
 * between its first row's first key and its last row's last, a key block
 * only the query tiles that see it, so tiles no query sees are never
 * computed.  Tiles whose rows all see all keys take the register-blocked
 * GEMM over whole tiles; diagonal, window-edge and segment-edge tiles
 * restrict every product to the visible keys of each row (or visible rows
 * of each key), so a NaN behind the mask never meets a zero weight. */
#ifndef ZK_NAME
#error "include attn_cpu_kernel.h from a SIMD path file"
#endif

#include <math.h>
#include <string.h>

#include "kernels/attn_math.h"
#include "kernels/cpu/attn_cpu.h"
#include "kernels/cpu/attn_cpu_store.h"

#define ZK_BQ ZC_ATTN_BQ
#define ZK_BK ZC_ATTN_BK

/* C[r][0:MC*ZV_W] (=|+=) sum_{k0<=k<k1} A(r, k) * B[k][0:MC*ZV_W], r < MR,
 * with A(r, k) = a[r * a_rs + k * a_ks].  Called with constant MR and MC so
 * the accumulators live in registers. */
static inline __attribute__((always_inline)) void
ZK_NAME(zk_micro)(int MR, int MC, int k0, int k1, const float *restrict a, ptrdiff_t a_rs,
                  ptrdiff_t a_ks, const float *restrict b, ptrdiff_t ldb, float *restrict c,
                  ptrdiff_t ldc, int zero_c)
{
    zv_t acc[ZK_R][ZK_CV];

#pragma GCC unroll 16
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 16
        for (int v = 0; v < MC; v++)
            acc[r][v] = zero_c ? zv_zero() : zv_load(c + r * ldc + v * ZV_W);
    for (int k = k0; k < k1; k++) {
        zv_t bv[ZK_CV];

#pragma GCC unroll 16
        for (int v = 0; v < MC; v++)
            bv[v] = zv_load(b + k * ldb + v * ZV_W);
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            zv_t av = zv_set1(a[r * a_rs + k * a_ks]);

#pragma GCC unroll 16
            for (int v = 0; v < MC; v++)
                acc[r][v] = zv_fmadd(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 16
        for (int v = 0; v < MC; v++)
            zv_store(c + r * ldc + v * ZV_W, acc[r][v]);
}

static inline __attribute__((always_inline)) void
ZK_NAME(zk_gemm_rows)(int MR, int ncols, int k0, int k1, const float *a, ptrdiff_t a_rs,
                      ptrdiff_t a_ks, const float *b, ptrdiff_t ldb, float *c, ptrdiff_t ldc,
                      int zero_c)
{
    int n = 0;

    for (; n + ZK_CV * ZV_W <= ncols; n += ZK_CV * ZV_W)
        ZK_NAME(zk_micro)(MR, ZK_CV, k0, k1, a, a_rs, a_ks, b + n, ldb, c + n, ldc, zero_c);
    for (; n < ncols; n += ZV_W)
        ZK_NAME(zk_micro)(MR, 1, k0, k1, a, a_rs, a_ks, b + n, ldb, c + n, ldc, zero_c);
}

/* C[rows][ncols] (=|+=) A[rows][k0:k1] * B[k0:k1][ncols]; ncols is a
 * multiple of ZV_W. */
static void ZK_NAME(zk_gemm)(int rows, int ncols, int k0, int k1, const float *a, ptrdiff_t a_rs,
                             ptrdiff_t a_ks, const float *b, ptrdiff_t ldb, float *c,
                             ptrdiff_t ldc, int zero_c)
{
    int r = 0;

    for (; r + ZK_R <= rows; r += ZK_R)
        ZK_NAME(zk_gemm_rows)(ZK_R, ncols, k0, k1, a + r * a_rs, a_rs, a_ks, b, ldb,
                              c + r * ldc, ldc, zero_c);
#if ZK_R > 4
    for (; r + 4 <= rows; r += 4)
        ZK_NAME(zk_gemm_rows)(4, ncols, k0, k1, a + r * a_rs, a_rs, a_ks, b, ldb,
                              c + r * ldc, ldc, zero_c);
#endif
    for (; r < rows; r++)
        ZK_NAME(zk_gemm_rows)(1, ncols, k0, k1, a + r * a_rs, a_rs, a_ks, b, ldb, c + r * ldc,
                              ldc, zero_c);
}

/* Length of the run of rows starting at r that share their key range
 * [lo, hi): one GEMM per run keeps whole tiles (and edge tiles with equal
 * ranges) register-blocked. */
static inline int ZK_NAME(zk_run)(const int *lo, const int *hi, int n, int r)
{
    int run = 1;

    while (r + run < n && lo[r + run] == lo[r] && hi[r + run] == hi[r])
        run++;
    return run;
}

/* Online-softmax update of one row of scores s[0:BK], keys [lo, hi)
 * visible: s becomes p = exp2(s * scale2 - m_new) (0 outside); returns the
 * factor that rescales the row's previous output. */
static float ZK_NAME(zk_row_softmax)(float *s, int lo, int hi, float scale2, float *m, float *l)
{
    zv_t vmax = zv_set1(-INFINITY);
    zv_t vsum = zv_zero();
    zv_t vm;
    float m_new, alpha;

    for (int j = 0; j < ZK_BK; j += ZV_W) {
        zv_t x = zv_keep_range(zv_mul(zv_load(s + j), zv_set1(scale2)), lo - j, hi - j, -INFINITY);

        zv_store(s + j, x);
        vmax = zv_max(vmax, x);
    }
    m_new = fmaxf(*m, zv_hmax(vmax));
    alpha = zc_attn_rescale(*m, m_new);
    vm = zv_set1(m_new);
    for (int j = 0; j < ZK_BK; j += ZV_W) {
        zv_t p = zv_exp2(zv_sub(zv_load(s + j), vm));

        zv_store(s + j, p);
        vsum = zv_add(vsum, p);
    }
    *l = *l * alpha + zv_hsum(vsum);
    *m = m_new;
    return alpha;
}

static void ZK_NAME(zk_row_scale)(float *o, int dp, float alpha)
{
    zv_t va = zv_set1(alpha);

    for (int j = 0; j < dp; j += ZV_W)
        zv_store(o + j, zv_mul(zv_load(o + j), va));
}

/* What a tile of the mask holds: no visible (row, key), some, or all. */
enum { ZK_TILE_EMPTY, ZK_TILE_PARTIAL, ZK_TILE_FULL };

/* Visible keys [lo[r], hi[r]) of each row r < nr of a tile, keys of the
 * block [j0, j0 + nc) counted from j0. */
static int ZK_NAME(zk_tile_ranges)(const zc_attn_cpu_job_t *job, int b, int64_t i0, int nr,
                                   int64_t j0, int nc, int64_t lk, int *lo, int *hi)
{
    int full = nr == ZK_BQ && nc == ZK_BK, any = 0;

    for (int r = 0; r < nr; r++) {
        int64_t a, e;

        zc_attn_keys_seen(job, b, i0 + r, lk, &a, &e);
        zc_attn_mask_clamp(a - j0, e - j0, nc, &a, &e);
        lo[r] = (int)a;
        hi[r] = (int)e;
        full = full && lo[r] == 0 && hi[r] == ZK_BK;
        any = any || hi[r] > lo[r];
    }
    return full ? ZK_TILE_FULL : any ? ZK_TILE_PARTIAL : ZK_TILE_EMPTY;
}

static void ZK_NAME(zk_fwd_block)(const zc_attn_cpu_job_t *job, int b, int h, int qb,
                                  float *scratch)
{
    const zc_attn_args_t *args = job->args;
    const int d = job->d, dp = job->dp, hk = h / job->group;
    const int64_t q0 = args->cu_seqlens_q[b], lq = args->cu_seqlens_q[b + 1] - q0;
    const int64_t k0 = args->cu_seqlens_kv[b], lk = args->cu_seqlens_kv[b + 1] - k0;
    const int64_t i0 = (int64_t)qb * ZK_BQ;
    const int nr = lq - i0 < ZK_BQ ? (int)(lq - i0) : ZK_BQ;
    const float *qrow = job->q.base + (q0 + i0) * job->q.tok + h * job->q.head;
    float *s = scratch;
    float *o = s + ZK_BQ * ZK_BK;
    float *m = o + ZK_BQ * dp;
    float *l = m + ZK_BQ;
    int64_t key_begin, key_end, unused;
    int lo[ZK_BQ], hi[ZK_BQ];

    /* the keys of the block's rows: from its first row's first key to its
     * last row's last */
    zc_attn_keys_seen(job, b, i0, lk, &key_begin, &unused);
    zc_attn_keys_seen(job, b, i0 + nr - 1, lk, &unused, &key_end);
    memset(o, 0, sizeof(float) * nr * dp);
    for (int r = 0; r < nr; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    for (int64_t j0 = key_begin / ZK_BK * ZK_BK; j0 < key_end; j0 += ZK_BK) {
        const int nc = lk - j0 < ZK_BK ? (int)(lk - j0) : ZK_BK;
        const int64_t kb = j0 / ZK_BK;
        const float *kt = job->kt + ((int64_t)hk * job->total_kb + job->kb_off[b] + kb) * d * ZK_BK;
        const float *vrow = job->v.base + (k0 + j0) * job->v.tok + hk * job->v.head;

        if (ZK_NAME(zk_tile_ranges)(job, b, i0, nr, j0, nc, lk, lo, hi) == ZK_TILE_EMPTY)
            continue;
        ZK_NAME(zk_gemm)(nr, ZK_BK, 0, d, qrow, job->q.tok, 1, kt, ZK_BK, s, ZK_BK, 1);
        for (int r = 0; r < nr; r++) {
            float alpha;

            if (hi[r] == lo[r])
                continue;
            alpha = ZK_NAME(zk_row_softmax)(s + r * ZK_BK, lo[r], hi[r], job->scale2, &m[r],
                                            &l[r]);
            if (alpha != 1.0f)
                ZK_NAME(zk_row_scale)(o + r * dp, dp, alpha);
        }
        for (int r = 0, run; r < nr; r += run) {
            run = ZK_NAME(zk_run)(lo, hi, nr, r);
            if (hi[r] > lo[r])
                ZK_NAME(zk_gemm)(run, dp, lo[r], hi[r], s + r * ZK_BK, ZK_BK, 1, vrow,
                                 job->v.tok, o + r * dp, dp, 0);
        }
    }
    for (int r = 0; r < nr; r++)
        zc_attn_cpu_store_out(job, q0 + i0 + r, h, o + r * dp, m[r], l[r]);
}

/* Gradient of one row of a tile: p = exp2(s * scale2 - lse2) and
 * ds = p * (dp - delta) * scale for the visible keys [lo, hi), exactly 0
 * outside. */
static void ZK_NAME(zk_row_grad)(float *s, float *dpv, int lo, int hi, float scale2, float lse2,
                                 float delta, float scale)
{
    const zv_t vs2 = zv_set1(scale2), vl = zv_set1(lse2);
    const zv_t vd = zv_set1(delta), vsc = zv_set1(scale);

    for (int j = 0; j < ZK_BK; j += ZV_W) {
        zv_t p = zv_exp2(zv_sub(zv_mul(zv_load(s + j), vs2), vl));
        zv_t ds = zv_mul(zv_mul(p, zv_sub(zv_load(dpv + j), vd)), vsc);

        zv_store(s + j, zv_keep_range(p, lo - j, hi - j, 0.0f));
        zv_store(dpv + j, zv_keep_range(ds, lo - j, hi - j, 0.0f));
    }
}

/* dq[t0 + r][h] += tile[r] for r < rows, under the rows' lock. */
static void ZK_NAME(zk_add_dq)(const zc_attn_cpu_job_t *job, int64_t t0, int rows, int h,
                               const float *tile)
{
    const int d = job->d;

    zc_attn_cpu_dq_lock(job, t0, h);
    for (int r = 0; r < rows; r++) {
        float *dst = job->dq + ((t0 + r) * job->hq + h) * d;
        const float *src = tile + r * job->dp;
        int i = 0;

        for (; i + ZV_W <= d; i += ZV_W)
            zv_store(dst + i, zv_add(zv_load(dst + i), zv_load(src + i)));
        for (; i < d; i++)
            dst[i] += src[i];
    }
    zc_attn_cpu_dq_unlock(job, t0, h);
}

/* Rows [rlo[j], rhi[j]) of a tile (from i0, nr rows) that see each of its
 * keys j < nc (from j0). */
static void ZK_NAME(zk_tile_rows)(const zc_attn_cpu_job_t *job, int b, int64_t i0, int nr,
                                  int64_t j0, int nc, int64_t lq, int *rlo, int *rhi)
{
    for (int j = 0; j < nc; j++) {
        int64_t a, e;

        zc_attn_rows_seeing(job, b, j0 + j, lq, &a, &e);
        zc_attn_mask_clamp(a - i0, e - i0, nr, &a, &e);
        rlo[j] = (int)a;
        rhi[j] = (int)e;
    }
}

static void ZK_NAME(zk_bwd_block)(const zc_attn_cpu_job_t *job, int b, int hk, int kb,
                                  float *scratch)
{
    const zc_attn_args_t *args = job->args;
    const int d = job->d, dp = job->dp;
    const int64_t q0 = args->cu_seqlens_q[b], lq = args->cu_seqlens_q[b + 1] - q0;
    const int64_t k0 = args->cu_seqlens_kv[b], lk = args->cu_seqlens_kv[b + 1] - k0;
    const int64_t j0 = (int64_t)kb * ZK_BK;
    const int nc = lk - j0 < ZK_BK ? (int)(lk - j0) : ZK_BK;
    const int64_t blk = (int64_t)hk * job->total_kb + job->kb_off[b] + kb;
    const float *kt = job->kt + blk * d * ZK_BK;
    const float *vt = job->vt + blk * d * ZK_BK;
    const float *krow = job->k.base + (k0 + j0) * job->k.tok + hk * job->k.head;
    float *s = scratch;                     /* S, then P */
    float *dpv = s + ZK_BQ * ZK_BK;         /* dP, then dS */
    float *dq = dpv + ZK_BQ * ZK_BK;        /* [BQ][dp] */
    float *dk = dq + ZK_BQ * dp;            /* [BK][dp] */
    float *dv = dk + ZK_BK * dp;            /* [BK][dp] */
    int64_t row_begin, row_end, unused;
    int vlo[ZK_BQ], vhi[ZK_BQ], clo[ZK_BQ], chi[ZK_BQ], rlo[ZK_BK], rhi[ZK_BK];

    /* the rows that see the block: from those of its first key to those of
     * its last */
    zc_attn_rows_seeing(job, b, j0, lq, &row_begin, &unused);
    zc_attn_rows_seeing(job, b, j0 + nc - 1, lq, &unused, &row_end);
    memset(dk, 0, sizeof(float) * ZK_BK * dp);
    memset(dv, 0, sizeof(float) * ZK_BK * dp);
    for (int h = hk * job->group; h < (hk + 1) * job->group; h++) {
        for (int64_t i0 = row_begin / ZK_BQ * ZK_BQ; i0 < row_end; i0 += ZK_BQ) {
            const int nr = lq - i0 < ZK_BQ ? (int)(lq - i0) : ZK_BQ;
            const float *qrow = job->q.base + (q0 + i0) * job->q.tok + h * job->q.head;
            const float *dorow = job->dout.base + (q0 + i0) * job->dout.tok + h * job->dout.head;
            int tile = ZK_NAME(zk_tile_ranges)(job, b, i0, nr, j0, nc, lk, vlo, vhi);

            if (tile == ZK_TILE_EMPTY)
                continue;
            ZK_NAME(zk_gemm)(nr, ZK_BK, 0, d, qrow, job->q.tok, 1, kt, ZK_BK, s, ZK_BK, 1);
            ZK_NAME(zk_gemm)(nr, ZK_BK, 0, d, dorow, job->dout.tok, 1, vt, ZK_BK, dpv, ZK_BK, 1);
            for (int r = 0; r < nr; r++) {
                const int64_t row = (q0 + i0 + r) * job->hq + h;
                const float lse = args->lse[row];

                /* a row whose final lse is -inf saw no key at all */
                clo[r] = vlo[r];
                chi[r] = lse == -INFINITY ? vlo[r] : vhi[r];
                ZK_NAME(zk_row_grad)(s + r * ZK_BK, dpv + r * ZK_BK, clo[r], chi[r],
                                     job->scale2, lse * ZC_ATTN_LOG2E, job->delta[row],
                                     job->scale);
            }
            /* dV += P^T dO and dK += dS^T Q over the rows that see each key */
            if (tile == ZK_TILE_FULL) {
                ZK_NAME(zk_gemm)(ZK_BK, dp, 0, nr, s, 1, ZK_BK, dorow, job->dout.tok, dv, dp, 0);
                ZK_NAME(zk_gemm)(ZK_BK, dp, 0, nr, dpv, 1, ZK_BK, qrow, job->q.tok, dk, dp, 0);
            } else {
                ZK_NAME(zk_tile_rows)(job, b, i0, nr, j0, nc, lq, rlo, rhi);
                for (int j = 0, run; j < nc; j += run) {
                    run = ZK_NAME(zk_run)(rlo, rhi, nc, j);
                    if (rhi[j] == rlo[j])
                        continue;
                    ZK_NAME(zk_gemm)(run, dp, rlo[j], rhi[j], s + j, 1, ZK_BK, dorow,
                                     job->dout.tok, dv + j * dp, dp, 0);
                    ZK_NAME(zk_gemm)(run, dp, rlo[j], rhi[j], dpv + j, 1, ZK_BK, qrow,
                                     job->q.tok, dk + j * dp, dp, 0);
                }
            }
            /* dQ partial = dS K over the keys each row sees */
            for (int r = 0, run; r < nr; r += run) {
                run = ZK_NAME(zk_run)(clo, chi, nr, r);
                if (chi[r] > clo[r])
                    ZK_NAME(zk_gemm)(run, dp, clo[r], chi[r], dpv + r * ZK_BK, ZK_BK, 1, krow,
                                     job->k.tok, dq + r * dp, dp, 1);
                else
                    memset(dq + r * dp, 0, sizeof(float) * dp * run);
            }
            ZK_NAME(zk_add_dq)(job, q0 + i0, nr, h, dq);
        }
    }
    zc_attn_cpu_store_dkv(job, k0 + j0, nc, hk, dk, dv);
}

const zc_attn_cpu_kernels_t ZK_NAME(zc_attn_cpu_kernels) = {
    .name = ZK_PATH_NAME,
    .fwd_block = ZK_NAME(zk_fwd_block),
    .bwd_block = ZK_NAME(zk_bwd_block),
};
