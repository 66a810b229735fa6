/* Launchers of the CUDA attention and layout kernels (attn_cuda.cu, and
 * the tensor-core attention kernels of attn_mma.cu), callable from C.  The
 * public entry points (attn_gpu.c) check arguments and build the
 * device-side geometry; these only launch.  Each returns a
 * cudaError_t as int (0: launched).  Built only with --with-cuda. */
#ifndef ZC_KERNELS_CUDA_ATTN_CUDA_H
#define ZC_KERNELS_CUDA_ATTN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/attn_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The scalar kernels (attn_cuda.cu): query rows per forward block and keys
 * per backward block. */
#define ZC_ATTN_CUDA_BQ 16
#define ZC_ATTN_CUDA_BK 32

/* The tensor-core kernels (attn_mma.cu) take bf16 and fp16 storage at head
 * dims that are multiples of 8 up to 256, padded to DP = 64, 128 or 256:
 * query rows per forward block, key rows per backward block. */
#define ZC_ATTN_MMA_DP(d) ((d) <= 64 ? 64 : (d) <= 128 ? 128 : 256)
#define ZC_ATTN_MMA_BQ 64
#define ZC_ATTN_MMA_BK(d) (ZC_ATTN_MMA_DP(d) > 128 ? 32 : 64)

/* One kernel call.  Index arrays are device memory: cu_q/cu_kv
 * [batch + 1], q_start/kv_start [batch] or NULL, blocks [nblocks][2] =
 * (segment, block index in the segment) of the forward query blocks or the
 * backward key blocks, of the rows of the kernel family that runs. */
typedef struct {
    int hq, hk, d;
    zc_attn_mask_t mask;         /* the call's (zc_attn_check_call), kernels/attn_math.h */
    float scale, scale2;         /* scale2 = scale * log2(e) */
    unsigned flags;              /* ZC_ATTN_ACCUMULATE */
    int dtype, out_dtype, grad_dtype;
    const int32_t *cu_q, *cu_kv, *q_start, *kv_start;
    const int32_t *blocks;
    int nblocks;
    const void *q, *k, *v;
    void *out;
    float *lse;
    const void *dout;
    const float *delta;
    float *dq;                   /* backward: fp32 accumulation, zeroed or accumulating */
    void *dk, *dv;
} zc_attn_cuda_t;

/* Dynamic shared memory of a forward or backward block for head dim d. */
size_t zc_attn_cuda_smem(int backward, int d);
int zc_attn_cuda_fwd(const zc_attn_cuda_t *a, void *stream);
int zc_attn_cuda_bwd(const zc_attn_cuda_t *a, void *stream);
/* The same for the tensor-core kernels (a->dtype bf16 or fp16, a->d a
 * multiple of 8 up to 256, q, k, v and dout 16-byte aligned): one block per
 * (block map entry, head), entry-major, so the map's order is the launch
 * order. */
size_t zc_attn_mma_smem(int backward, int d);
int zc_attn_mma_fwd(const zc_attn_cuda_t *a, void *stream);
int zc_attn_mma_bwd(const zc_attn_cuda_t *a, void *stream);
/* delta[r] = sum_x dout[r][x] * out[r][x] over `rows` rows of d. */
int zc_attn_cuda_delta(const void *dout, int dtype, const void *out, int out_dtype, float *delta,
                       int64_t rows, int d, void *stream);
int zc_attn_cuda_merge(const float *part_out, const float *part_lse, int64_t rows, int d,
                       float *out, float *lse, void *stream);
int zc_attn_cuda_convert(const void *src, int src_dtype, int64_t count, void *dst, int dst_dtype,
                         void *stream);
/* fp32 element-wise: dst[i] = value; dst[i] += src[i]. */
int zc_cuda_fill_f32(float *dst, int64_t count, float value, void *stream);
int zc_cuda_add_f32(float *dst, const float *src, int64_t count, void *stream);
/* Byte ranges ranges[i] = (src offset, dst offset, length), device memory;
 * `bytes` is their total length (it sizes the grid). */
int zc_cuda_copy_ranges(const void *src, void *dst, const int64_t *ranges, int nranges,
                        int64_t bytes, void *stream);

#ifdef __cplusplus
}
#endif

#endif
