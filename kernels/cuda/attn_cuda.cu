/* Flash attention forward and backward on scalar fp32 arithmetic (the
 * kernels of fp32 storage, odd head dims and unaligned tensors: bf16 and
 * fp16 run on tensor cores, attn_mma.cu), the delta, the LSE merge,
 * conversions and the zigzag range copy on CUDA (sm_80, sm_90).
 *
 * The per-row math is kernels/attn_math.h, the same functions the CPU
 * kernels run: online-softmax rescale, row lse, the stable merge, bf16
 * rounding and the mask's key and row ranges, so both paths share one
 * definition of every edge case (empty rows, -inf, NaN, the window's
 * alignment).
 *
 * Forward: a block of 4 warps owns 16 query rows of one head (4 rows per
 * warp) and walks the keys some of them see (a window's band: from its
 * first row's first key to its last row's last) in tiles of 32, one key
 * per lane for the scores, the output rows spread over the lanes (head
 * dim / 32 values per lane) for P V.  Backward: a block owns 32 keys of one kv head and
 * walks the query rows of the heads of its group that see them, four
 * rows at a time (one per warp): each warp makes its row's P and dS (one
 * key per lane) and its dQ partial (added with atomics into fp32), then the
 * whole block adds the four rows into dK and dV, which stay in shared
 * memory until the end, each element owned by one thread.  Storage is
 * fp32, bf16 or fp16; accumulation is fp32.  Products never reach keys a
 * row does not see, so a NaN behind the mask stays there, as on the CPU. */
#include "config.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/attn_math.h"
#include "kernels/cuda/attn_cuda.h"
#include "kernels/cuda/attn_kernel.cuh"
#include "zcomm.h"

#define ZK_ROWS    (ZC_ATTN_CUDA_BQ / ZK_WARPS)
#define ZK_BK      ZC_ATTN_CUDA_BK
#define ZK_FULL    0xffffffffu

static_assert(ZK_BK == 32, "one key per lane");

__device__ __forceinline__ float zk_warp_max(float x)
{
    for (int o = 16; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(ZK_FULL, x, o));
    return x;
}

__device__ __forceinline__ float zk_warp_sum(float x)
{
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(ZK_FULL, x, o);
    return x;
}

/* The keys [lo, hi) of a row within the tile [j0, j0 + nc), as tile
 * indices [*ta, *tb) (empty: *ta == *tb). */
__device__ __forceinline__ void zk_tile_range(int64_t lo, int64_t hi, int64_t j0, int nc, int *ta,
                                              int *tb)
{
    int64_t x, y;

    zc_attn_mask_clamp(lo - j0, hi - j0, nc, &x, &y);
    *ta = (int)x;
    *tb = (int)y;
}

__device__ __forceinline__ float zk_dot(const float *x, const float *y, int d)
{
    float acc = 0.0f;

    for (int e = 0; e < d; e++)
        acc = fmaf(x[e], y[e], acc);
    return acc;
}

/* Column stride of K/V tiles read one row per lane: odd, so the lanes of a
 * warp hit 32 different banks. */
__host__ __device__ __forceinline__ int zk_col_stride(int d)
{
    return d | 1;
}

/* Keys [j0, j0 + nc) of a segment starting at token k0, kv head hk, into
 * fp32 tiles sk and sv of row stride zk_col_stride(d). */
__device__ __forceinline__ void zk_load_kv(const zc_attn_cuda_t &a, int64_t k0, int64_t j0, int nc,
                                           int hk, float *sk, float *sv)
{
    const int d = a.d, ks = zk_col_stride(d);

    for (int idx = threadIdx.x; idx < nc * d; idx += ZK_THREADS) {
        int j = idx / d, e = idx - j * d;
        int64_t at = ((k0 + j0 + j) * a.hk + hk) * (int64_t)d + e;
        sk[j * ks + e] = zk_load(a.k, a.dtype, at);
        sv[j * ks + e] = zk_load(a.v, a.dtype, at);
    }
}

template <int DE>
__global__ void __launch_bounds__(ZK_THREADS) zk_fwd(zc_attn_cuda_t a)
{
    extern __shared__ float zk_smem[];
    const int d = a.d, ks = zk_col_stride(d);
    float *sq = zk_smem;                     /* [BQ][d] */
    float *sk = sq + ZC_ATTN_CUDA_BQ * d;    /* [BK][ks] */
    float *sv = sk + ZK_BK * ks;             /* [BK][ks] */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int h = blockIdx.y, hk = h / (a.hq / a.hk);
    const zk_seg_t seg = zk_segment(a, blockIdx.x);
    const int64_t q0 = seg.q0, lq = seg.lq, k0 = seg.k0, lk = seg.lk;
    const int64_t i0 = (int64_t)seg.block * ZC_ATTN_CUDA_BQ;
    const int nr = lq - i0 < ZC_ATTN_CUDA_BQ ? (int)(lq - i0) : ZC_ATTN_CUDA_BQ;
    int64_t key_lo, key_hi, unused;
    float o[ZK_ROWS][DE], m[ZK_ROWS], l[ZK_ROWS];

    /* the keys some of the rows see: the first row's first to the last's last */
    zk_keys(a, seg, i0, &key_lo, &unused);
    zk_keys(a, seg, i0 + nr - 1, &unused, &key_hi);
    for (int idx = threadIdx.x; idx < nr * d; idx += ZK_THREADS) {
        int r = idx / d, e = idx - r * d;
        sq[idx] = zk_load(a.q, a.dtype, ((q0 + i0 + r) * a.hq + h) * (int64_t)d + e);
    }
#pragma unroll
    for (int r = 0; r < ZK_ROWS; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int e = 0; e < DE; e++)
            o[r][e] = 0.0f;
    }
    for (int64_t j0 = key_lo; j0 < key_hi; j0 += ZK_BK) {
        const int nc = lk - j0 < ZK_BK ? (int)(lk - j0) : ZK_BK;
        float p[ZK_ROWS];
        int ta[ZK_ROWS], tb[ZK_ROWS], jmin = nc, jmax = 0;

        __syncthreads(); /* the previous tile is consumed (and Q is loaded) */
        zk_load_kv(a, k0, j0, nc, hk, sk, sv);
        __syncthreads();
        /* Scores and the online softmax; every branch is uniform per warp. */
#pragma unroll
        for (int r = 0; r < ZK_ROWS; r++) {
            const int row = warp * ZK_ROWS + r;
            float s = -INFINITY, m_new, alpha;
            int64_t lo, hi;

            p[r] = 0.0f;
            ta[r] = tb[r] = 0;
            if (row < nr) {
                zk_keys(a, seg, i0 + row, &lo, &hi);
                zk_tile_range(lo, hi, j0, nc, &ta[r], &tb[r]);
            }
            if (ta[r] == tb[r])
                continue;
            const bool sees = lane >= ta[r] && lane < tb[r];
            if (sees)
                s = zk_dot(sq + row * d, sk + lane * ks, d) * a.scale2;
            m_new = fmaxf(m[r], zk_warp_max(s));
            alpha = zc_attn_rescale(m[r], m_new);
            p[r] = sees ? exp2f(s - m_new) : 0.0f;
            l[r] = l[r] * alpha + zk_warp_sum(p[r]);
            m[r] = m_new;
#pragma unroll
            for (int e = 0; e < DE; e++)
                o[r][e] *= alpha;
            jmin = ta[r] < jmin ? ta[r] : jmin;
            jmax = tb[r] > jmax ? tb[r] : jmax;
        }
        /* O += P V over the keys each row sees. */
        for (int j = jmin; j < jmax; j++) {
            float vj[DE];
#pragma unroll
            for (int e = 0; e < DE; e++)
                vj[e] = lane + 32 * e < d ? sv[j * ks + lane + 32 * e] : 0.0f;
#pragma unroll
            for (int r = 0; r < ZK_ROWS; r++) {
                float pj = __shfl_sync(ZK_FULL, p[r], j);
                if (j >= ta[r] && j < tb[r])
#pragma unroll
                    for (int e = 0; e < DE; e++)
                        o[r][e] = fmaf(pj, vj[e], o[r][e]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ZK_ROWS; r++) {
        const int row = warp * ZK_ROWS + r;
        if (row >= nr)
            continue;
        const int64_t orow = (q0 + i0 + row) * a.hq + h;
        const float lse = zc_attn_row_lse(m[r], l[r]);
        const float inv = l[r] == 0.0f ? 0.0f : 1.0f / l[r];

        if (a.flags & ZC_ATTN_ACCUMULATE) {
            float *out = (float *)a.out + orow * d;
            float acc_lse = a.lse[orow], w_acc, w_part;
            float merged = zc_attn_merge_lse(acc_lse, lse, &w_acc, &w_part);
#pragma unroll
            for (int e = 0; e < DE; e++) {
                int x = lane + 32 * e;
                if (x < d)
                    out[x] = zc_attn_merge_value(out[x], o[r][e] * inv, acc_lse, lse, w_acc,
                                                 w_part);
            }
            __syncwarp(); /* every lane has read the old lse */
            if (lane == 0)
                a.lse[orow] = merged;
        } else {
#pragma unroll
            for (int e = 0; e < DE; e++) {
                int x = lane + 32 * e;
                if (x < d)
                    zk_store(a.out, a.out_dtype, orow * d + x, o[r][e] * inv);
            }
            if (lane == 0)
                a.lse[orow] = lse;
        }
    }
}

template <int DE>
__global__ void __launch_bounds__(ZK_THREADS) zk_bwd(zc_attn_cuda_t a)
{
    extern __shared__ float zk_smem[];
    const int d = a.d, ks = zk_col_stride(d);
    float *sk = zk_smem;                 /* [BK][ks] */
    float *sv = sk + ZK_BK * ks;         /* [BK][ks] */
    float *sdk = sv + ZK_BK * ks;        /* [BK][d] */
    float *sdv = sdk + ZK_BK * d;        /* [BK][d] */
    float *sq = sdv + ZK_BK * d;         /* [WARPS][d] */
    float *sdo = sq + ZK_WARPS * d;      /* [WARPS][d] */
    float *sp = sdo + ZK_WARPS * d;      /* [WARPS][BK] */
    float *sds = sp + ZK_WARPS * ZK_BK;  /* [WARPS][BK] */
    int *srange = (int *)(sds + ZK_WARPS * ZK_BK); /* [WARPS][2]: the keys its row sees */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int hk = blockIdx.y, group = a.hq / a.hk;
    const zk_seg_t seg = zk_segment(a, blockIdx.x);
    const int64_t q0 = seg.q0, k0 = seg.k0, lk = seg.lk;
    const int64_t j0 = (int64_t)seg.block * ZK_BK;
    const int nc = lk - j0 < ZK_BK ? (int)(lk - j0) : ZK_BK;
    int64_t i_first, i_end, unused;

    /* the rows that see some of these keys */
    zk_rows(a, seg, j0, &i_first, &unused);
    zk_rows(a, seg, j0 + nc - 1, &unused, &i_end);
    zk_load_kv(a, k0, j0, nc, hk, sk, sv);
    for (int idx = threadIdx.x; idx < nc * d; idx += ZK_THREADS) {
        sdk[idx] = 0.0f;
        sdv[idx] = 0.0f;
    }
    for (int h = hk * group; h < (hk + 1) * group; h++) {
        for (int64_t ib = i_first; ib < i_end; ib += ZK_WARPS) {
            const int64_t i = ib + warp;
            const int64_t row = (q0 + i) * a.hq + h;
            int ta = 0, tb = 0;

            __syncthreads(); /* K/V are loaded, the previous rows are added */
            if (i < i_end && a.lse[row] != -INFINITY) { /* -inf: the row saw no key */
                int64_t lo, hi;
                zk_keys(a, seg, i, &lo, &hi);
                zk_tile_range(lo, hi, j0, nc, &ta, &tb);
            }
            if (ta < tb) {
                const float lse2 = a.lse[row] * ZC_ATTN_LOG2E, delta = a.delta[row];
                float p = 0.0f, ds = 0.0f, acc[DE];

                for (int x = lane; x < d; x += 32) {
                    sq[warp * d + x] = zk_load(a.q, a.dtype, row * d + x);
                    sdo[warp * d + x] = zk_load(a.dout, a.dtype, row * d + x);
                }
                __syncwarp();
                if (lane >= ta && lane < tb) {
                    float s = zk_dot(sq + warp * d, sk + lane * ks, d);
                    float dp = zk_dot(sdo + warp * d, sv + lane * ks, d);
                    p = exp2f(s * a.scale2 - lse2);
                    ds = p * (dp - delta) * a.scale;
                }
                sp[warp * ZK_BK + lane] = p;
                sds[warp * ZK_BK + lane] = ds;
                /* dQ partial = dS K over the keys the row sees */
#pragma unroll
                for (int e = 0; e < DE; e++)
                    acc[e] = 0.0f;
                for (int j = ta; j < tb; j++) {
                    float dsj = __shfl_sync(ZK_FULL, ds, j);
#pragma unroll
                    for (int e = 0; e < DE; e++)
                        if (lane + 32 * e < d)
                            acc[e] = fmaf(dsj, sk[j * ks + lane + 32 * e], acc[e]);
                }
#pragma unroll
                for (int e = 0; e < DE; e++)
                    if (lane + 32 * e < d)
                        atomicAdd(&a.dq[row * d + lane + 32 * e], acc[e]);
            }
            if (lane == 0) {
                srange[2 * warp] = ta;
                srange[2 * warp + 1] = tb;
            }
            __syncthreads();
            /* dV += P^T dO and dK += dS^T Q over the rows that see each key */
            for (int idx = threadIdx.x; idx < nc * d; idx += ZK_THREADS) {
                int j = idx / d, x = idx - j * d;
                float dv = sdv[idx], dk = sdk[idx];
#pragma unroll
                for (int w = 0; w < ZK_WARPS; w++) {
                    if (j >= srange[2 * w] && j < srange[2 * w + 1]) {
                        dv = fmaf(sp[w * ZK_BK + j], sdo[w * d + x], dv);
                        dk = fmaf(sds[w * ZK_BK + j], sq[w * d + x], dk);
                    }
                }
                sdv[idx] = dv;
                sdk[idx] = dk;
            }
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < nc * d; idx += ZK_THREADS) {
        int j = idx / d, x = idx - j * d;
        int64_t at = ((k0 + j0 + j) * a.hk + hk) * (int64_t)d + x;
        if (a.flags & ZC_ATTN_ACCUMULATE) {
            ((float *)a.dk)[at] += sdk[idx];
            ((float *)a.dv)[at] += sdv[idx];
        } else {
            zk_store(a.dk, a.grad_dtype, at, sdk[idx]);
            zk_store(a.dv, a.grad_dtype, at, sdv[idx]);
        }
    }
}

/* One warp per row. */
__global__ void __launch_bounds__(ZK_THREADS)
zk_delta(const void *dout, int dtype, const void *out, int out_dtype, float *delta, int64_t rows,
         int d)
{
    const int64_t row = (int64_t)blockIdx.x * ZK_WARPS + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    float sum = 0.0f;

    if (row >= rows)
        return;
    for (int x = lane; x < d; x += 32)
        sum = fmaf(zk_load(dout, dtype, row * d + x), zk_load(out, out_dtype, row * d + x), sum);
    sum = zk_warp_sum(sum);
    if (lane == 0)
        delta[row] = sum;
}

__global__ void __launch_bounds__(ZK_THREADS)
zk_merge(const float *part_out, const float *part_lse, int64_t rows, int d, float *out,
         float *lse)
{
    const int64_t row = (int64_t)blockIdx.x * ZK_WARPS + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;

    if (row >= rows)
        return;
    float acc_lse = lse[row], pl = part_lse[row], w_acc, w_part;
    float merged = zc_attn_merge_lse(acc_lse, pl, &w_acc, &w_part);
    for (int x = lane; x < d; x += 32)
        out[row * d + x] = zc_attn_merge_value(out[row * d + x], part_out[row * d + x], acc_lse,
                                               pl, w_acc, w_part);
    __syncwarp();
    if (lane == 0)
        lse[row] = merged;
}

__global__ void zk_convert(const void *src, int src_dtype, int64_t count, void *dst,
                           int dst_dtype)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;

    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
        zk_store(dst, dst_dtype, i, zk_load(src, src_dtype, i));
}

/* The ring engine's element-wise steps (fp32): fill, and dst += src. */
__global__ void zk_fill(float *dst, int64_t count, float value)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;

    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
        dst[i] = value;
}

__global__ void zk_add(float *dst, const float *src, int64_t count)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;

    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
        dst[i] += src[i];
}

/* The whole grid copies each range in turn, 16 bytes at a time when the
 * range is aligned: a grid sized for the bytes, so one long range (a whole
 * sequence's chunk) spreads over every SM rather than one block. */
__global__ void zk_copy_ranges(const char *src, char *dst, const int64_t *ranges, int nranges)
{
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;

    for (int k = 0; k < nranges; k++) {
        const int64_t *r = ranges + 3 * (int64_t)k;
        const char *from = src + r[0];
        char *to = dst + r[1];
        const int64_t len = r[2];

        if ((((uintptr_t)from | (uintptr_t)to | (uintptr_t)len) & 15) == 0) {
            for (int64_t i = first; i < len / 16; i += stride)
                ((uint4 *)to)[i] = ((const uint4 *)from)[i];
        } else {
            for (int64_t i = first; i < len; i += stride)
                to[i] = from[i];
        }
    }
}

/* ---- launchers ---------------------------------------------------------- */

static unsigned zk_row_blocks(int64_t rows)
{
    return (unsigned)((rows + ZK_WARPS - 1) / ZK_WARPS);
}

extern "C" size_t zc_attn_cuda_smem(int backward, int d)
{
    size_t ks = (size_t)zk_col_stride(d), floats;

    if (backward)
        floats = 2 * ZK_BK * ks + 2 * ZK_BK * (size_t)d + 2 * ZK_WARPS * (size_t)d +
                 2 * ZK_WARPS * ZK_BK + 2 * ZK_WARPS /* srange */;
    else
        floats = ZC_ATTN_CUDA_BQ * (size_t)d + 2 * ZK_BK * ks;
    return floats * sizeof(float);
}

/* The kernel instance for the head dim: DE = values per lane. */
template <template <int> class Pick>
static cudaError_t zk_dispatch(const zc_attn_cuda_t *a, dim3 grid, size_t smem,
                               cudaStream_t stream)
{
    if (a->d <= 32)
        return zk_launch(Pick<1>::kernel(), grid, smem, a, stream);
    if (a->d <= 64)
        return zk_launch(Pick<2>::kernel(), grid, smem, a, stream);
    if (a->d <= 128)
        return zk_launch(Pick<4>::kernel(), grid, smem, a, stream);
    return zk_launch(Pick<8>::kernel(), grid, smem, a, stream);
}

template <int DE> struct zk_pick_fwd {
    static decltype(&zk_fwd<DE>) kernel() { return &zk_fwd<DE>; }
};
template <int DE> struct zk_pick_bwd {
    static decltype(&zk_bwd<DE>) kernel() { return &zk_bwd<DE>; }
};

extern "C" int zc_attn_cuda_fwd(const zc_attn_cuda_t *a, void *stream)
{
    if (a->nblocks == 0)
        return cudaSuccess;
    return (int)zk_dispatch<zk_pick_fwd>(a, dim3((unsigned)a->nblocks, (unsigned)a->hq),
                                          zc_attn_cuda_smem(0, a->d), (cudaStream_t)stream);
}

extern "C" int zc_attn_cuda_bwd(const zc_attn_cuda_t *a, void *stream)
{
    if (a->nblocks == 0)
        return cudaSuccess;
    return (int)zk_dispatch<zk_pick_bwd>(a, dim3((unsigned)a->nblocks, (unsigned)a->hk),
                                          zc_attn_cuda_smem(1, a->d), (cudaStream_t)stream);
}

extern "C" int zc_attn_cuda_delta(const void *dout, int dtype, const void *out, int out_dtype,
                                  float *delta, int64_t rows, int d, void *stream)
{
    if (rows == 0)
        return cudaSuccess;
    return (int)zk_run(zk_delta, zk_row_blocks(rows), ZK_THREADS, 0, (cudaStream_t)stream, dout,
                       dtype, out, out_dtype, delta, rows, d);
}

extern "C" int zc_attn_cuda_merge(const float *part_out, const float *part_lse, int64_t rows,
                                  int d, float *out, float *lse, void *stream)
{
    if (rows == 0)
        return cudaSuccess;
    return (int)zk_run(zk_merge, zk_row_blocks(rows), ZK_THREADS, 0, (cudaStream_t)stream,
                       part_out, part_lse, rows, d, out, lse);
}

/* Grid of a grid-stride loop over `count` elements. */
static unsigned zk_stride_blocks(int64_t count)
{
    int64_t blocks = (count + 255) / 256;

    return (unsigned)(blocks > 4096 ? 4096 : blocks);
}

extern "C" int zc_attn_cuda_convert(const void *src, int src_dtype, int64_t count, void *dst,
                                    int dst_dtype, void *stream)
{
    if (count == 0)
        return cudaSuccess;
    return (int)zk_run(zk_convert, zk_stride_blocks(count), 256, 0, (cudaStream_t)stream, src,
                       src_dtype, count, dst, dst_dtype);
}

extern "C" int zc_cuda_fill_f32(float *dst, int64_t count, float value, void *stream)
{
    if (count == 0)
        return cudaSuccess;
    return (int)zk_run(zk_fill, zk_stride_blocks(count), 256, 0, (cudaStream_t)stream, dst, count,
                       value);
}

extern "C" int zc_cuda_add_f32(float *dst, const float *src, int64_t count, void *stream)
{
    if (count == 0)
        return cudaSuccess;
    return (int)zk_run(zk_add, zk_stride_blocks(count), 256, 0, (cudaStream_t)stream, dst, src,
                       count);
}

extern "C" int zc_cuda_copy_ranges(const void *src, void *dst, const int64_t *ranges,
                                   int nranges, int64_t bytes, void *stream)
{
    if (nranges == 0 || bytes == 0)
        return cudaSuccess;
    /* a thread per 16 bytes, up to the grid-stride cap */
    return (int)zk_run(zk_copy_ranges, zk_stride_blocks((bytes + 15) / 16), 256, 0,
                       (cudaStream_t)stream, (const char *)src, (char *)dst, ranges, nranges);
}
