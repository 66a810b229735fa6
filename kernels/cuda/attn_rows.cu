/* The row-mapped copies of kernels/attn_rows.h on CUDA: one grid-stride
 * kernel per operation, each thread finding the segment of its compact
 * row by binary search (zc_attn_rows_segment), the merge done by the
 * functions of kernels/attn_math.h that the CPU kernels and
 * kernels/cpu/attn_rows.c use.  Launched through cudaLaunchKernelEx, so
 * that tests/test_attn_rows runs them on the CPU (tests/cuda_emu). */
#include "config.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/attn_math.h"
#include "kernels/attn_rows.h"
#include "kernels/cuda/attn_rows_cuda.h"
#include "kernels/cuda/elem.cuh"
#include "zcomm.h"

#define ZR_THREADS 256

/* The buffer row of compact row i. */
__device__ __forceinline__ int64_t zr_row(const zc_attn_rows_t &r, int64_t i)
{
    int s = zc_attn_rows_segment(r.cu, r.nseg, i);

    return r.row[s] + i - r.cu[s];
}

/* Rows of `words` units of T. */
template <typename T>
__global__ void zr_gather(const zc_attn_rows_t r, int64_t n, int64_t words)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;

    for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < n * words;
         u += stride) {
        const int64_t i = u / words, w = u % words;

        ((T *)r.dst)[u] = ((const T *)r.src)[zr_row(r, i) * words + w];
    }
}

__global__ void zr_gather_lse(const zc_attn_rows_t r, int64_t n)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;

    for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < n * r.heads;
         u += stride) {
        const int64_t i = u / r.heads;
        const int h = (int)(u % r.heads);

        ((float *)r.dst)[h * n + i] = ((const float *)r.src)[zr_row(r, i) * r.heads + h];
    }
}

/* One thread per (row, head): the row's head_dim values in turn. */
__global__ void zr_merge(const zc_attn_rows_t r, int64_t n)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;

    for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < n * r.heads;
         u += stride) {
        const int64_t i = u / r.heads;
        const int h = (int)(u % r.heads);
        const int64_t at = zr_row(r, i) * r.heads + h;
        const float part_lse = r.src_lse[h * n + i];
        float *out = (float *)r.dst + at * r.head_dim;
        const float acc_lse = r.dst_lse[at];
        float w_acc, w_part;
        const float merged = zc_attn_merge_lse(acc_lse, part_lse, &w_acc, &w_part);

        for (int d = 0; d < r.head_dim; d++)
            out[d] = zc_attn_merge_value(out[d], zk_load(r.src, r.dtype, u * r.head_dim + d),
                                         acc_lse, part_lse, w_acc, w_part);
        r.dst_lse[at] = merged;
    }
}

__global__ void zr_add(const zc_attn_rows_t r, int64_t n)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;

    for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < n * r.row_elems;
         u += stride) {
        const int64_t i = u / r.row_elems, e = u % r.row_elems;

        ((float *)r.dst)[zr_row(r, i) * r.row_elems + e] += zk_load(r.src, r.dtype, u);
    }
}

template <typename... Params, typename... Args>
static cudaError_t zr_run(void (*kernel)(Params...), int64_t units, cudaStream_t stream,
                          Args... args)
{
    cudaLaunchConfig_t cfg = {};
    int64_t blocks = (units + ZR_THREADS - 1) / ZR_THREADS;
    cudaError_t err, last;

    cfg.gridDim = dim3((unsigned)(blocks > 4096 ? 4096 : blocks));
    cfg.blockDim = dim3(ZR_THREADS);
    cfg.stream = stream;
    err = cudaLaunchKernelEx(&cfg, kernel, args...);
    last = cudaGetLastError();
    return err != cudaSuccess ? err : last;
}

extern "C" int zc_attn_rows_cuda(const zc_attn_rows_t *r, int64_t n, void *stream)
{
    const cudaStream_t s = (cudaStream_t)stream;

    if (r->nseg == 0 || n == 0)
        return cudaSuccess;
    switch (r->op) {
    case ZC_ROWS_GATHER:
        if (r->row_bytes % 4 == 0)
            return (int)zr_run(zr_gather<uint32_t>, n * (int64_t)(r->row_bytes / 4), s, *r, n,
                               (int64_t)(r->row_bytes / 4));
        return (int)zr_run(zr_gather<uint16_t>, n * (int64_t)(r->row_bytes / 2), s, *r, n,
                           (int64_t)(r->row_bytes / 2));
    case ZC_ROWS_GATHER_LSE:
        return (int)zr_run(zr_gather_lse, n * r->heads, s, *r, n);
    case ZC_ROWS_MERGE:
        return (int)zr_run(zr_merge, n * r->heads, s, *r, n);
    default:
        return (int)zr_run(zr_add, n * r->row_elems, s, *r, n);
    }
}
