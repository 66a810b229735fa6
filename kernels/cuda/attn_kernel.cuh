/* What the scalar (attn_cuda.cu) and the tensor-core (attn_mma.cu)
 * attention kernels share: the segment of a block, the mask's ranges, and
 * the launch through cudaLaunchKernelEx. */
#ifndef ZC_KERNELS_CUDA_ATTN_KERNEL_CUH
#define ZC_KERNELS_CUDA_ATTN_KERNEL_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/attn_math.h"
#include "kernels/cuda/attn_cuda.h"
#include "kernels/cuda/elem.cuh"
#include "zcomm.h"

/* Both kernel families run blocks of 4 warps. */
#define ZK_WARPS   4
#define ZK_THREADS (ZK_WARPS * 32)

/* The segment of block map entry `entry` (blocks[2 * entry]) and its block
 * index in the segment: token offsets, lengths and global start positions. */
struct zk_seg_t {
    int block;
    int64_t q0, lq, k0, lk, qs, kvs;
};

__device__ __forceinline__ zk_seg_t zk_segment(const zc_attn_cuda_t &a, int64_t entry)
{
    const int b = a.blocks[2 * entry];
    zk_seg_t s;

    s.block = a.blocks[2 * entry + 1];
    s.q0 = a.cu_q[b];
    s.lq = a.cu_q[b + 1] - s.q0;
    s.k0 = a.cu_kv[b];
    s.lk = a.cu_kv[b + 1] - s.k0;
    s.qs = a.q_start ? a.q_start[b] : 0;
    s.kvs = a.kv_start ? a.kv_start[b] : 0;
    return s;
}

/* Keys [*lo, *hi) of the segment that its row i sees, and rows [*lo, *hi)
 * that see its key j: attn_math.h's ranges, non-decreasing in i and j. */
__device__ __forceinline__ void zk_keys(const zc_attn_cuda_t &a, const zk_seg_t &s, int64_t i,
                                        int64_t *lo, int64_t *hi)
{
    zc_attn_mask_keys(a.mask, i, s.qs, s.kvs, s.lk, lo, hi);
}

__device__ __forceinline__ void zk_rows(const zc_attn_cuda_t &a, const zk_seg_t &s, int64_t j,
                                        int64_t *lo, int64_t *hi)
{
    zc_attn_mask_rows(a.mask, j, s.qs, s.kvs, s.lq, lo, hi);
}

/* The keys some row of [i0, i1] sees, [*lo, *hi) (empty when lo >= hi),
 * and those every one of them sees, [*all_lo, *all_hi): the band's tiles
 * and the ones inside it that need no mask. */
__device__ __forceinline__ void zk_band_keys(const zc_attn_cuda_t &a, const zk_seg_t &s,
                                             int64_t i0, int64_t i1, int64_t *lo, int64_t *hi,
                                             int64_t *all_lo, int64_t *all_hi)
{
    zk_keys(a, s, i0, lo, all_hi);
    zk_keys(a, s, i1, all_lo, hi);
}

/* Every launch goes through cudaLaunchKernelEx, not <<<...>>>: the same
 * launch in plain C++, which the host compiler reads too, so that
 * tests/test_cuda_emu runs these kernels on the CPU. */
template <typename... Params, typename... Args>
static cudaError_t zk_run(void (*kernel)(Params...), dim3 grid, unsigned threads, size_t smem,
                          cudaStream_t stream, Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cudaError_t err, last;

    cfg.gridDim = grid;
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    err = cudaLaunchKernelEx(&cfg, kernel, args...);
    last = cudaGetLastError(); /* clears the error, as the <<<>>> form's check did */
    return err != cudaSuccess ? err : last;
}

template <typename K>
static cudaError_t zk_launch(K kernel, dim3 grid, size_t smem, const zc_attn_cuda_t *a,
                             cudaStream_t stream)
{
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)smem);

    if (err != cudaSuccess)
        return err;
    return zk_run(kernel, grid, ZK_THREADS, smem, stream, *a);
}

#endif
