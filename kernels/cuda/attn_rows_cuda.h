/* Launcher of the row-mapped copies on CUDA (attn_rows.cu), callable from
 * C; zc_attn_rows_stream (attn_rows_gpu.c) stages the host arrays and
 * calls it.  Built only with --with-cuda. */
#ifndef ZC_KERNELS_CUDA_ATTN_ROWS_CUDA_H
#define ZC_KERNELS_CUDA_ATTN_ROWS_CUDA_H

#include <stdint.h>

#include "kernels/attn_rows.h"

#ifdef __cplusplus
extern "C" {
#endif

/* r's cu and row are device arrays; n = cu[nseg], read on the host.
 * Returns a cudaError_t as int (0: launched). */
int zc_attn_rows_cuda(const zc_attn_rows_t *r, int64_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif
