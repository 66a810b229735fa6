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

/* The byte ranges (src offset, dst offset, length) a zigzag pack (or
 * unpack) copies: at most 2 * batch, empty chunks left out; *n is set. */
void zc_zigzag_ranges(const int32_t *cu_seqlens, int batch, size_t token_bytes, int ring_size,
                      int position, int pack, int64_t *ranges, int *n);

/* CUDA builds: ZC_ERR_UNSUPPORTED naming head_dim when the current device
 * has less shared memory per block than the forward (or backward) kernel
 * needs at head dim d; checked before anything is enqueued. */
zc_status_t zc_attn_gpu_smem_check(int backward, int d);

/* CUDA builds: the kernels of zc_attn_fwd_stream (pass 0),
 * zc_attn_bwd_stream (1) and zc_attn_bwd_delta_stream (2) without their
 * argument, memory and shared-memory checks, for a caller that made them
 * once for all its calls (the stream ring engine, kernel call after kernel
 * call on its own segments and staging). */
zc_status_t zc_attn_gpu_launch(int pass, const zc_attn_args_t *args, void *stream);

#endif
