/* Host-side geometry of the CUDA kernels (attn_gpu.c), shared with the
 * tests: it is plain C and runs without a device. */
#ifndef ZC_KERNELS_CUDA_ATTN_GPU_H
#define ZC_KERNELS_CUDA_ATTN_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "zcomm.h"

/* Query heads the CUDA forward takes: one row of blocks per head in grid y,
 * whose limit is 65535. */
#define ZC_ATTN_CUDA_MAX_HEADS 65535

/* (segment, block index in the segment) of every block of `rows` rows over
 * the segments of cu[batch + 1], written to blocks[2 * n]; returns n.
 * blocks may be NULL to count. */
int64_t zc_attn_gpu_blocks(const int32_t *cu, int batch, int rows, int32_t *blocks);

/* Whether the tensor-core kernels (attn_mma.cu) run a call's forward
 * (backward 0) or backward (1): bf16 or fp16 storage, a head dim that is a
 * multiple of 8 up to 256, and q, k, v (and dout) 16-byte aligned, as
 * their cp.async needs; the scalar kernels run the others. */
int zc_attn_gpu_mma(const zc_attn_args_t *args, int backward);

/* Query rows per forward block, or keys per backward block, of the kernels
 * that run the call (mma: zc_attn_gpu_mma's answer). */
int zc_attn_gpu_block_rows(int backward, int mma, int d);

/* Reorder the n blocks of blocks[2 * n] (zc_attn_gpu_blocks' map of the
 * call's query blocks, or key blocks when backward) so the longest start
 * first: forward blocks by the keys some of their rows see, backward
 * blocks by the query rows that see some of their keys, under the call's
 * mask; ties keep their order.
 * ZC_ERR_NO_MEMORY (blocks unchanged) when its scratch cannot be had. */
zc_status_t zc_attn_gpu_order(const zc_attn_args_t *args, int backward, int rows,
                              int32_t *blocks, int64_t n);

/* The byte ranges (src offset, dst offset, length) a zigzag pack (or
 * unpack) copies: at most 2 * batch, empty chunks left out; *n is set. */
void zc_zigzag_ranges(const int32_t *cu_seqlens, int batch, size_t token_bytes, int ring_size,
                      int position, int pack, int64_t *ranges, int *n);

/* CUDA builds: ZC_ERR_UNSUPPORTED naming head_dim when the current device
 * has less shared memory per block than the forward (or backward) kernels
 * (scalar or tensor-core, whichever needs more) need at head dim d;
 * checked before anything is enqueued. */
zc_status_t zc_attn_gpu_smem_check(int backward, int d);

/* CUDA builds: the kernels of zc_attn_fwd_stream (pass 0),
 * zc_attn_bwd_stream (1) and zc_attn_bwd_delta_stream (2) without their
 * argument, memory and shared-memory checks, for a caller that made them
 * once for all its calls (the stream ring engine, kernel call after kernel
 * call on its own segments and staging). */
zc_status_t zc_attn_gpu_launch(int pass, const zc_attn_args_t *args, void *stream);

/* zc_attn_gpu_launch on the kernels zc_attn_gpu_mma picks (AUTO) or on the
 * scalar ones whatever the call (SCALAR: zc_attn_perf's baseline). */
typedef enum { ZC_GPU_KERNELS_AUTO = 0, ZC_GPU_KERNELS_SCALAR = 1 } zc_gpu_kernels_t;
zc_status_t zc_attn_gpu_launch_with(int pass, const zc_attn_args_t *args,
                                    zc_gpu_kernels_t kernels, void *stream);

#endif
