/* Flash attention forward and backward on tensor cores (sm_80, sm_90), for
 * bfloat16 and float16 storage with fp32 accumulation, organised as
 * FlashAttention-2 is (Dao, 2023), from mma.sync m16n8k16, ldmatrix and
 * cp.async only (attn_mma.cuh):
 *
 *  - operands are staged in shared memory in the storage type, 16 bytes per
 *    cp.async, in tiles whose rows hold DP (64, 128 or 256) elements: the
 *    head dim d, zero-filled above it, so every multiple of 8 up to 256 runs
 *    (DP 64 and 128 are the fast cases); rows past a segment are zero-filled;
 *  - each 16-byte chunk c of tile row r sits at chunk c ^ (r mod 8) of its
 *    row (zm_swz), so the 8 rows of every ldmatrix matrix fall in 8
 *    different bank slots: conflict-free reads, which the emulation counts;
 *  - forward: a block of 4 warps owns 64 query rows of one head, each warp
 *    16 of them; it walks the keys some of the rows see (a window's band:
 *    from the first row's first key to the last row's last) in tiles of BN
 *    (64, or 32 at DP 256), K and V double-buffered (the next tile's copy is issued as soon
 *    as the barrier that ends the previous tile's reads is passed); S = Q K^T
 *    on tensor cores, the online softmax in base 2 on S in registers (the
 *    scale times log2(e) multiplied into the scores, exp2 per element, row
 *    max and sum over the 4 lanes of a row), then P, rounded to the storage
 *    type, is the A operand of P V straight from the registers that held S
 *    (the mma's C and A layouts coincide), V read with ldmatrix.trans; the
 *    row sum divides once at the end;
 *  - backward, in FlashAttention-2's order: the delta (rowsum dO * O) is its
 *    own kernel first (attn_cuda.cu); a block owns BK keys (64, or 32 at DP
 *    256) of one kv head, K and V loaded once, and walks the query rows of
 *    the heads of its group that see them (the first key's first row to the
 *    last key's last), BM (64, or 32 above DP 64) rows a step, Q, dO, lse
 *    and delta double-buffered.  Each warp owns 16 keys
 *    (at DP 256 two warps share them, each with half the head dim) and makes
 *    S^T = K Q^T and dP^T = V dO^T, P^T from the lse, dS^T = P^T (dP^T -
 *    delta) scale, then dV += P^T dO and dK += dS^T Q from registers: dK and
 *    dV stay in registers to the end.  dS^T goes through shared memory for
 *    dQ = dS K, split over the warps and added with atomics into fp32.
 *
 * Masks (causal, full, windows) come from kernels/attn_math.h's key and
 * row ranges, as in the scalar kernels, and only where a tile crosses a
 * bound: tiles every row sees whole run unmasked, tiles no row sees are
 * never loaded, on either side of a window's band.  Rows that see no key
 * give out = 0 and lse = -inf exactly; keys no row sees give dk = dv = 0.
 * Unlike the scalar kernels, a NaN or Inf in K or V behind the mask of a
 * tile that is partly visible reaches that tile's rows (0 * NaN in the
 * matrix product), as in FlashAttention and cuDNN. */
#include "config.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/attn_math.h"
#include "kernels/cuda/attn_cuda.h"
#include "kernels/cuda/attn_kernel.cuh"
#include "kernels/cuda/attn_mma.cuh"
#include "zcomm.h"

#define ZM_FULL 0xffffffffu

/* Element offset of 16-byte chunk c of row r in a tile of C chunks per row
 * (C = 4 or a multiple of 8): the XOR swizzle that puts the 8 rows of an
 * ldmatrix matrix (one chunk of 8 consecutive rows) into the 8 slots of a
 * 128-byte bank line. */
template <int C> __device__ __forceinline__ int zm_swz(int r, int c)
{
    static_assert(C == 4 || C % 8 == 0, "swizzle of 4 or a multiple of 8 chunks");
    if (C == 4)
        return r * 32 + ((c ^ ((r >> 1) & 3)) << 3);
    return r * C * 8 + ((c ^ (r & 7)) << 3);
}

/* cp.async of the rows [0, R) of a tile of DP columns from a [token][heads]
 * [d] tensor: tile row r is token tok0 + r at `head`; rows from `valid` on
 * and columns from d on are zero-filled.  Not committed. */
template <int R, int DP>
__device__ __forceinline__ void zm_load_tile(uint16_t *tile, const void *tensor, int64_t tok0,
                                             int valid, int heads, int head, int d)
{
    constexpr int C = DP / 8;
    const uint16_t *base = (const uint16_t *)tensor;

    for (int idx = threadIdx.x; idx < R * C; idx += ZK_THREADS) {
        const int r = idx / C, c = idx % C;
        const bool in = r < valid && c * 8 < d;
        const uint16_t *src = in ? base + ((tok0 + r) * heads + head) * (int64_t)d + c * 8 : base;
        zk_cp_async(tile + zm_swz<C>(r, c), src, in ? 16 : 0);
    }
}

/* The A operand (16 x 16, rows r0.., chunk pair kk) of a row-major tile. */
template <int C>
__device__ __forceinline__ void zm_load_a(uint32_t a[4], const uint16_t *tile, int r0, int kk)
{
    const int lane = threadIdx.x & 31;
    zk_ldmatrix<4, false>(a, tile + zm_swz<C>(r0 + (lane & 15), 2 * kk + (lane >> 4)));
}

/* B operands of two n-tiles (rows n0..n0+15 of the tile as the n index,
 * chunk pair kk as k): b[0..1] for rows n0.., b[2..3] for n0 + 8.. */
template <int C>
__device__ __forceinline__ void zm_load_b(uint32_t b[4], const uint16_t *tile, int n0, int kk)
{
    const int lane = threadIdx.x & 31;
    zk_ldmatrix<4, false>(b, tile + zm_swz<C>(n0 + (lane & 7) + ((lane >> 4) << 3),
                                              2 * kk + ((lane >> 3) & 1)));
}

/* B operands of two n-tiles from a tile stored k-major (rows k0..k0+15 are
 * k, chunk pair np the n index): b[0..1] for columns 16 np.., b[2..3] for
 * 16 np + 8.. (ldmatrix.trans). */
template <int C>
__device__ __forceinline__ void zm_load_bt(uint32_t b[4], const uint16_t *tile, int k0, int np)
{
    const int lane = threadIdx.x & 31;
    zk_ldmatrix<4, true>(b, tile + zm_swz<C>(k0 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                             2 * np + (lane >> 4)));
}

/* The A operand of the k-step over columns 16 kk.. of an accumulator held
 * as n-tiles of C fragments (rows g and g + 8): the two layouts coincide,
 * rounded to the storage type. */
template <typename T>
__device__ __forceinline__ void zm_acc_to_a(uint32_t a[4], const float (*acc)[4], int kk)
{
    a[0] = zk_pack<T>(acc[2 * kk][0], acc[2 * kk][1]);
    a[1] = zk_pack<T>(acc[2 * kk][2], acc[2 * kk][3]);
    a[2] = zk_pack<T>(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
    a[3] = zk_pack<T>(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
}

/* acc[2 np] and acc[2 np + 1] += a times the two n-tiles load_b(b, np)
 * gives, for np < NP: a row of 16 x 16 A against NP pairs of B tiles. */
template <typename T, int NP, typename LoadB>
__device__ __forceinline__ void zm_mma_row(float (*acc)[4], const uint32_t a[4], LoadB load_b)
{
#pragma unroll
    for (int np = 0; np < NP; np++) {
        uint32_t b[4];
        load_b(b, np);
        zk_mma<T>(acc[2 * np], a, b);
        zk_mma<T>(acc[2 * np + 1], a, b + 2);
    }
}

__device__ __forceinline__ float zm_quad_max(float x)
{
    x = fmaxf(x, __shfl_xor_sync(ZM_FULL, x, 1));
    return fmaxf(x, __shfl_xor_sync(ZM_FULL, x, 2));
}

__device__ __forceinline__ float zm_quad_sum(float x)
{
    x += __shfl_xor_sync(ZM_FULL, x, 1);
    return x + __shfl_xor_sync(ZM_FULL, x, 2);
}

/* ---- forward ------------------------------------------------------------ */

template <typename T, int DP>
__global__ void __launch_bounds__(ZK_THREADS) zm_fwd(zc_attn_cuda_t a)
{
    constexpr int BQ = ZC_ATTN_MMA_BQ, BN = DP > 128 ? 32 : 64, C = DP / 8;
    constexpr int NT = BN / 8, DT = DP / 8; /* n-tiles of S and of O */
    extern __shared__ float zk_smem[];
    uint16_t *sq = (uint16_t *)zk_smem;   /* [BQ][DP] */
    uint16_t *sk = sq + BQ * DP;          /* [2][BN][DP] */
    uint16_t *sv = sk + 2 * BN * DP;      /* [2][BN][DP] */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = (int)(blockIdx.x % (unsigned)a.hq), hk = h / (a.hq / a.hk);
    const zk_seg_t s = zk_segment(a, blockIdx.x / (unsigned)a.hq);
    const int64_t i0 = (int64_t)s.block * BQ;
    const int nr = s.lq - i0 < BQ ? (int)(s.lq - i0) : BQ;
    const int row0 = warp * 16 + g; /* this lane's rows: row0 and row0 + 8 */
    /* the keys some row sees bound the tiles, [key_lo, key_hi); those every
     * row sees, [all_lo, all_hi), need no mask */
    int64_t key_lo, key_hi, all_lo, all_hi, lo[2], hi[2];
    zk_band_keys(a, s, i0, i0 + nr - 1, &key_lo, &key_hi, &all_lo, &all_hi);
    const int ntiles = key_hi > key_lo ? (int)((key_hi - key_lo + BN - 1) / BN) : 0;
    float o[DT][4], m[2], l[2];

    for (int r = 0; r < 2; r++) {
        zk_keys(a, s, i0 + row0 + 8 * r, &lo[r], &hi[r]);
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
#pragma unroll
    for (int n = 0; n < DT; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    if (ntiles > 0) {
        zm_load_tile<BQ, DP>(sq, a.q, s.q0 + i0, nr, a.hq, h, a.d);
        const int first = (int)(s.lk - key_lo < BN ? s.lk - key_lo : BN);
        zm_load_tile<BN, DP>(sk, a.k, s.k0 + key_lo, first, a.hk, hk, a.d);
        zk_cp_async_commit();
        zm_load_tile<BN, DP>(sv, a.v, s.k0 + key_lo, first, a.hk, hk, a.d);
        zk_cp_async_commit();
    }
    for (int tile = 0; tile < ntiles; tile++) {
        const int64_t j0 = key_lo + (int64_t)tile * BN, jn = j0 + BN;
        const bool whole = j0 >= all_lo && jn <= all_hi;
        const int next = (int)(s.lk - jn < BN ? s.lk - jn : BN);
        const uint16_t *tk = sk + (tile & 1) * BN * DP, *tv = sv + (tile & 1) * BN * DP;
        float sc[NT][4];

        /* Q and this K tile are here, for every thread; every warp is done
         * with the previous tile, so the other K buffer is free */
        zk_cp_async_wait<1>();
        __syncthreads();
        if (tile + 1 < ntiles)
            zm_load_tile<BN, DP>(sk + ((tile + 1) & 1) * BN * DP, a.k, s.k0 + jn, next, a.hk, hk,
                                 a.d);
        zk_cp_async_commit();
#pragma unroll
        for (int n = 0; n < NT; n++)
            sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < DP / 16; kk++) {
            uint32_t qa[4];
            zm_load_a<C>(qa, sq, warp * 16, kk);
            zm_mma_row<T, NT / 2>(sc, qa, [&](uint32_t b[4], int np) {
                zm_load_b<C>(b, tk, np * 16, kk);
            });
        }
        /* base-2 scores, masked where the tile crosses a bound */
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int64_t j = j0 + n * 8 + 2 * t + (e & 1);
                const bool seen = whole || (j >= lo[e >> 1] && j < hi[e >> 1]);
                sc[n][e] = seen ? sc[n][e] * a.scale2 : -INFINITY;
            }
        /* the online softmax, row by row (r = 0: row0, r = 1: row0 + 8) */
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = -INFINITY, sum = 0.0f;
#pragma unroll
            for (int n = 0; n < NT; n++)
                mx = fmaxf(mx, fmaxf(sc[n][2 * r], sc[n][2 * r + 1]));
            const float m_new = fmaxf(m[r], zm_quad_max(mx));
            const float alpha = zc_attn_rescale(m[r], m_new);
            const float base = m_new == -INFINITY ? 0.0f : m_new; /* exp2(-inf) = 0 */
#pragma unroll
            for (int n = 0; n < NT; n++) {
                sc[n][2 * r] = exp2f(sc[n][2 * r] - base);
                sc[n][2 * r + 1] = exp2f(sc[n][2 * r + 1] - base);
                sum += sc[n][2 * r] + sc[n][2 * r + 1];
            }
            l[r] = l[r] * alpha + sum; /* this lane's columns; the quad adds up at the end */
            m[r] = m_new;
#pragma unroll
            for (int n = 0; n < DT; n++) {
                o[n][2 * r] *= alpha;
                o[n][2 * r + 1] *= alpha;
            }
        }
        /* this V tile is here; every warp is done with the previous one */
        zk_cp_async_wait<1>();
        __syncthreads();
        if (tile + 1 < ntiles)
            zm_load_tile<BN, DP>(sv + ((tile + 1) & 1) * BN * DP, a.v, s.k0 + jn, next, a.hk, hk,
                                 a.d);
        zk_cp_async_commit();
        /* O += P V, P from the registers that held S */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t pa[4];
            zm_acc_to_a<T>(pa, sc, kk);
            zm_mma_row<T, DT / 2>(o, pa, [&](uint32_t b[4], int np) {
                zm_load_bt<C>(b, tv, kk * 16, np);
            });
        }
    }
    /* out = O / l, lse; or merged into fp32 out/lse (ZC_ATTN_ACCUMULATE) */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const float lsum = zm_quad_sum(l[r]);
        const bool valid = row0 + 8 * r < nr;
        const int64_t orow = (s.q0 + i0 + row0 + 8 * r) * a.hq + h;
        const float lse = zc_attn_row_lse(m[r], lsum);
        const float inv = lsum == 0.0f ? 0.0f : 1.0f / lsum;
        float acc_lse = 0.0f, w_acc = 0.0f, w_part = 0.0f, merged = 0.0f;

        if (valid && (a.flags & ZC_ATTN_ACCUMULATE)) {
            acc_lse = a.lse[orow];
            merged = zc_attn_merge_lse(acc_lse, lse, &w_acc, &w_part);
        }
        __syncwarp(); /* the quad has read the old lse */
        if (!valid)
            continue;
#pragma unroll
        for (int n = 0; n < DT; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int x = n * 8 + 2 * t + e;
                const float v = lsum == 0.0f ? 0.0f : o[n][2 * r + e] * inv;
                if (x >= a.d)
                    continue;
                if (a.flags & ZC_ATTN_ACCUMULATE) {
                    float *out = (float *)a.out + orow * a.d + x;
                    *out = zc_attn_merge_value(*out, v, acc_lse, lse, w_acc, w_part);
                } else {
                    zk_store(a.out, a.out_dtype, orow * a.d + x, v);
                }
            }
        if (t == 0)
            a.lse[orow] = a.flags & ZC_ATTN_ACCUMULATE ? merged : lse;
    }
}

/* ---- backward ------------------------------------------------------------ */

/* Shapes of the backward at padded head dim DP. */
template <int DP> struct zm_bwd_shape {
    static constexpr int DSPLIT = DP > 128 ? 2 : 1; /* warps sharing 16 keys */
    static constexpr int KW = ZK_WARPS / DSPLIT;   /* warps along the keys */
    static constexpr int BK = 16 * KW;             /* keys per block */
    static constexpr int BM = DP > 64 ? 32 : 64;   /* query rows per step */
    static constexpr int C = DP / 8;
    static constexpr size_t smem = (2 * BK * DP + 4 * BM * DP + BK * BM) * 2 + 4 * BM * 4;
};

/* Query rows [i, i + BM) of head h into step buffer `buf`: Q and dO by
 * cp.async (not committed), lse (base 2; +inf where the row is past the
 * segment or saw no key, so that its P is 0) and delta by plain stores. */
template <int DP>
__device__ __forceinline__ void zm_bwd_rows(const zc_attn_cuda_t &a, const zk_seg_t &s, int h,
                                            int64_t i, uint16_t *sq, uint16_t *sdo, float *slse,
                                            float *sdelta)
{
    constexpr int BM = zm_bwd_shape<DP>::BM;
    const int rows = s.lq - i < BM ? (int)(s.lq - i) : BM;

    zm_load_tile<BM, DP>(sq, a.q, s.q0 + i, rows, a.hq, h, a.d);
    zm_load_tile<BM, DP>(sdo, a.dout, s.q0 + i, rows, a.hq, h, a.d);
    for (int r = threadIdx.x; r < BM; r += ZK_THREADS) {
        const int64_t row = (s.q0 + i + r) * a.hq + h;
        const float lse = r < rows ? a.lse[row] : -INFINITY;
        slse[r] = lse == -INFINITY ? INFINITY : lse * ZC_ATTN_LOG2E;
        sdelta[r] = r < rows ? a.delta[row] : 0.0f;
    }
}

template <typename T, int DP>
__global__ void __launch_bounds__(ZK_THREADS) zm_bwd(zc_attn_cuda_t a)
{
    using shape = zm_bwd_shape<DP>;
    constexpr int KW = shape::KW, BK = shape::BK, BM = shape::BM, C = shape::C;
    constexpr int DPW = DP / shape::DSPLIT, DTW = DPW / 8; /* dK/dV columns per warp */
    constexpr int MT = BM / 8;                             /* n-tiles of S^T */
    constexpr int QW = BM / 16, DQW = DP / (ZK_WARPS / QW), DQT = DQW / 8; /* dQ split */
    extern __shared__ float zk_smem[];
    uint16_t *sk = (uint16_t *)zk_smem;     /* [BK][DP] */
    uint16_t *sv = sk + BK * DP;            /* [BK][DP] */
    uint16_t *sq = sv + BK * DP;            /* [2][BM][DP] */
    uint16_t *sdo = sq + 2 * BM * DP;       /* [2][BM][DP] */
    uint16_t *sds = sdo + 2 * BM * DP;      /* [BK][BM]: dS^T */
    float *slse = (float *)(sds + BK * BM); /* [2][BM] */
    float *sdelta = slse + 2 * BM;          /* [2][BM] */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int kw = warp % KW, dw = warp / KW;     /* this warp's 16 keys, its dK/dV columns */
    const int qw = warp % QW, qs = warp / QW;     /* its dQ rows and columns */
    const int hk = (int)(blockIdx.x % (unsigned)a.hk), group = a.hq / a.hk;
    const zk_seg_t s = zk_segment(a, blockIdx.x / (unsigned)a.hk);
    const int64_t j0 = (int64_t)s.block * BK;
    const int nc = s.lk - j0 < BK ? (int)(s.lk - j0) : BK;
    /* the rows that see some of these keys, [i_first, i_end) */
    int64_t i_first, i_end, unused;
    zk_rows(a, s, j0, &i_first, &unused);
    zk_rows(a, s, j0 + nc - 1, &unused, &i_end);
    const int per_head = i_end > i_first ? (int)((i_end - i_first + BM - 1) / BM) : 0;
    const int steps = group * per_head;
    const int64_t key0 = j0 + kw * 16 + g; /* this lane's keys: key0 and key0 + 8 */
    float dv[DTW][4], dk[DTW][4];

#pragma unroll
    for (int n = 0; n < DTW; n++)
        for (int e = 0; e < 4; e++)
            dv[n][e] = dk[n][e] = 0.0f;
    zm_load_tile<BK, DP>(sk, a.k, s.k0 + j0, nc, a.hk, hk, a.d);
    zm_load_tile<BK, DP>(sv, a.v, s.k0 + j0, nc, a.hk, hk, a.d);
    if (steps > 0)
        zm_bwd_rows<DP>(a, s, hk * group, i_first, sq, sdo, slse, sdelta);
    zk_cp_async_commit();
    for (int step = 0; step < steps; step++) {
        const int buf = step & 1, h = hk * group + step / per_head;
        const int64_t i = i_first + (int64_t)(step % per_head) * BM;
        const uint16_t *tq = sq + buf * BM * DP, *tdo = sdo + buf * BM * DP;
        const float *tlse = slse + buf * BM, *tdelta = sdelta + buf * BM;
        /* every key of the block is seen by every row of the step: the
         * step's last row sees the block's first key and its first row the
         * last (the mask's bounds grow with the row) */
        const bool whole = j0 + BK <= s.lk &&
                           zc_attn_mask_sees(a.mask, s.qs + i + BM - 1, s.kvs + j0) &&
                           zc_attn_mask_sees(a.mask, s.qs + i, s.kvs + j0 + BK - 1);
        float st[MT][4], dpt[MT][4];

        /* this step's rows are here for every thread; every warp is done
         * with the previous step (its buffers and dS^T) */
        zk_cp_async_wait<0>();
        __syncthreads();
        if (step + 1 < steps) {
            const int hn = hk * group + (step + 1) / per_head;
            const int64_t in = i_first + (int64_t)((step + 1) % per_head) * BM;
            const int nb = (buf ^ 1) * BM;
            zm_bwd_rows<DP>(a, s, hn, in, sq + nb * DP, sdo + nb * DP, slse + nb, sdelta + nb);
        }
        zk_cp_async_commit();
        /* S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys */
#pragma unroll
        for (int n = 0; n < MT; n++)
            for (int e = 0; e < 4; e++)
                st[n][e] = dpt[n][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < DP / 16; kk++) {
            uint32_t ka[4], va[4];
            zm_load_a<C>(ka, sk, kw * 16, kk);
            zm_load_a<C>(va, sv, kw * 16, kk);
            zm_mma_row<T, MT / 2>(st, ka, [&](uint32_t b[4], int np) {
                zm_load_b<C>(b, tq, np * 16, kk);
            });
            zm_mma_row<T, MT / 2>(dpt, va, [&](uint32_t b[4], int np) {
                zm_load_b<C>(b, tdo, np * 16, kk);
            });
        }
        /* P^T from the lse, dS^T = P^T (dP^T - delta) scale */
#pragma unroll
        for (int n = 0; n < MT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int c = n * 8 + 2 * t + (e & 1);
                const int64_t key = key0 + 8 * (e >> 1);
                /* rows past the segment have P = 0 from their lse */
                const bool seen = whole || (key < s.lk && zc_attn_mask_sees(a.mask, s.qs + i + c,
                                                                            s.kvs + key));
                const float p = seen ? exp2f(st[n][e] * a.scale2 - tlse[c]) : 0.0f;
                st[n][e] = p;
                dpt[n][e] = p * (dpt[n][e] - tdelta[c]) * a.scale;
            }
        /* dV += P^T dO, dK += dS^T Q over this warp's columns */
#pragma unroll
        for (int kq = 0; kq < BM / 16; kq++) {
            uint32_t pa[4], da[4];
            zm_acc_to_a<T>(pa, st, kq);
            zm_acc_to_a<T>(da, dpt, kq);
            zm_mma_row<T, DTW / 2>(dv, pa, [&](uint32_t b[4], int np) {
                zm_load_bt<C>(b, tdo, kq * 16, dw * (DTW / 2) + np);
            });
            zm_mma_row<T, DTW / 2>(dk, da, [&](uint32_t b[4], int np) {
                zm_load_bt<C>(b, tq, kq * 16, dw * (DTW / 2) + np);
            });
        }
        /* dS^T into shared memory, [key][query], for dQ */
        if (dw == 0)
#pragma unroll
            for (int n = 0; n < MT; n++)
                for (int r = 0; r < 2; r++)
                    *(uint32_t *)(sds + zm_swz<BM / 8>(kw * 16 + g + 8 * r, n) + 2 * t) =
                        zk_pack<T>(dpt[n][2 * r], dpt[n][2 * r + 1]);
        __syncthreads();
        /* dQ += dS K: this warp's 16 rows and DQW columns, over all BK keys */
        {
            float dq[DQT][4];
#pragma unroll
            for (int n = 0; n < DQT; n++)
                dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
#pragma unroll
            for (int kb = 0; kb < BK / 16; kb++) {
                uint32_t sa[4];
                /* A = dS (rows: queries) from dS^T: ldmatrix.trans */
                zk_ldmatrix<4, true>(sa, sds + zm_swz<BM / 8>(kb * 16 + (lane & 7) +
                                                                  ((lane >> 4) << 3),
                                                              2 * qw + ((lane >> 3) & 1)));
                zm_mma_row<T, DQT / 2>(dq, sa, [&](uint32_t b[4], int np) {
                    zm_load_bt<C>(b, sk, kb * 16, qs * (DQT / 2) + np);
                });
            }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int64_t qi = i + qw * 16 + g + 8 * r;
                if (qi >= s.lq)
                    continue;
                float *dst = a.dq + ((s.q0 + qi) * a.hq + h) * (int64_t)a.d;
#pragma unroll
                for (int n = 0; n < DQT; n++)
                    for (int e = 0; e < 2; e++) {
                        const int x = qs * DQW + n * 8 + 2 * t + e;
                        if (x < a.d)
                            atomicAdd(dst + x, dq[n][2 * r + e]);
                    }
            }
        }
    }
    /* dK and dV of this warp's keys and columns */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int64_t j = key0 + 8 * r;
        if (j - j0 >= nc)
            continue;
        const int64_t at = ((s.k0 + j) * a.hk + hk) * (int64_t)a.d;
#pragma unroll
        for (int n = 0; n < DTW; n++)
            for (int e = 0; e < 2; e++) {
                const int x = dw * DPW + n * 8 + 2 * t + e;
                if (x >= a.d)
                    continue;
                if (a.flags & ZC_ATTN_ACCUMULATE) {
                    ((float *)a.dk)[at + x] += dk[n][2 * r + e];
                    ((float *)a.dv)[at + x] += dv[n][2 * r + e];
                } else {
                    zk_store(a.dk, a.grad_dtype, at + x, dk[n][2 * r + e]);
                    zk_store(a.dv, a.grad_dtype, at + x, dv[n][2 * r + e]);
                }
            }
    }
}

/* ---- launchers ------------------------------------------------------------- */

extern "C" size_t zc_attn_mma_smem(int backward, int d)
{
    const int dp = ZC_ATTN_MMA_DP(d), bn = dp > 128 ? 32 : 64;

    if (backward)
        return dp == 64 ? zm_bwd_shape<64>::smem
                        : dp == 128 ? zm_bwd_shape<128>::smem : zm_bwd_shape<256>::smem;
    return (size_t)(ZC_ATTN_MMA_BQ + 4 * bn) * dp * 2;
}

template <int DP> struct zm_pick_fwd {
    template <typename T> static decltype(&zm_fwd<T, DP>) kernel() { return &zm_fwd<T, DP>; }
};
template <int DP> struct zm_pick_bwd {
    template <typename T> static decltype(&zm_bwd<T, DP>) kernel() { return &zm_bwd<T, DP>; }
};

/* The kernel instance for the storage type and padded head dim; one block
 * per (map entry, head), entry-major. */
template <template <int> class Pick>
static cudaError_t zm_dispatch(const zc_attn_cuda_t *a, int heads, size_t smem,
                               cudaStream_t stream)
{
    const dim3 grid((unsigned)((int64_t)a->nblocks * heads));
    const bool f16 = a->dtype == ZC_FLOAT16;

    switch (ZC_ATTN_MMA_DP(a->d)) {
    case 64:
        return f16 ? zk_launch(Pick<64>::template kernel<zk_f16>(), grid, smem, a, stream)
                   : zk_launch(Pick<64>::template kernel<zk_bf16>(), grid, smem, a, stream);
    case 128:
        return f16 ? zk_launch(Pick<128>::template kernel<zk_f16>(), grid, smem, a, stream)
                   : zk_launch(Pick<128>::template kernel<zk_bf16>(), grid, smem, a, stream);
    default:
        return f16 ? zk_launch(Pick<256>::template kernel<zk_f16>(), grid, smem, a, stream)
                   : zk_launch(Pick<256>::template kernel<zk_bf16>(), grid, smem, a, stream);
    }
}

extern "C" int zc_attn_mma_fwd(const zc_attn_cuda_t *a, void *stream)
{
    if (a->nblocks == 0)
        return cudaSuccess;
    return (int)zm_dispatch<zm_pick_fwd>(a, a->hq, zc_attn_mma_smem(0, a->d),
                                         (cudaStream_t)stream);
}

extern "C" int zc_attn_mma_bwd(const zc_attn_cuda_t *a, void *stream)
{
    if (a->nblocks == 0)
        return cudaSuccess;
    return (int)zm_dispatch<zm_pick_bwd>(a, a->hk, zc_attn_mma_smem(1, a->d),
                                         (cudaStream_t)stream);
}
