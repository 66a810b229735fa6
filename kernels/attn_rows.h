/* Row-mapped copies between a compact attention call and the buffers it
 * came from: what the ring attention engine does around a kernel table's
 * call (src/coll/ring_attn/kernel_table.c), on the host (kernels/cpu/attn_rows.c)
 * or enqueued on a stream (kernels/cuda/attn_rows.cu).
 *
 * The compact side has n = cu[nseg] rows, segment s owning rows
 * [cu[s], cu[s+1]); the buffer side holds segment s at rows row[s] .. row[s]
 * + (cu[s+1] - cu[s]) - 1, anywhere, the segments never sharing a row.  So
 * row(i) = row[s] + i - cu[s] for the compact row i of segment s.  The
 * operations:
 *   GATHER      dst[i] = src[row(i)]                  (rows of row_bytes)
 *   GATHER_LSE  dst[h * n + i] = src[row(i) * heads + h]          (fp32:
 *               libzcomm's [tokens, heads] lse into flash-attention's
 *               [heads, tokens])
 *   MERGE       the partial output src[i] (dtype, [heads][head_dim]) with
 *               lse src_lse[h * n + i] merged into dst[row(i)] (fp32) and
 *               dst_lse[row(i) * heads + h] (the stable merge of
 *               kernels/attn_math.h, as ZC_ATTN_ACCUMULATE merges)
 *   ADD         dst[row(i)] += src[i]       (row_elems fp32 += dtype)
 * Host arrays cu and row; the stream form copies them to the device. */
#ifndef ZC_KERNELS_ATTN_ROWS_H
#define ZC_KERNELS_ATTN_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "zcomm.h"

typedef enum { ZC_ROWS_GATHER, ZC_ROWS_GATHER_LSE, ZC_ROWS_MERGE, ZC_ROWS_ADD } zc_rows_op_t;

typedef struct {
    zc_rows_op_t op;
    int nseg;
    const int32_t *cu;        /* [nseg + 1] from 0 */
    const int64_t *row;       /* [nseg] */
    int heads, head_dim;      /* GATHER_LSE, MERGE */
    int64_t row_elems;        /* ADD */
    size_t row_bytes;         /* GATHER */
    zc_datatype_t dtype;      /* MERGE, ADD: of src */
    const void *src;
    void *dst;
    const float *src_lse;     /* MERGE */
    float *dst_lse;           /* MERGE */
} zc_attn_rows_t;

/* Host memory (float32 and bfloat16). */
zc_status_t zc_attn_rows(const zc_attn_rows_t *r);

/* CUDA builds: device memory (float16 too), enqueued on `stream`. */
zc_status_t zc_attn_rows_stream(const zc_attn_rows_t *r, void *stream);

/* The segment of compact row i: the last s with cu[s] <= i. */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline int zc_attn_rows_segment(const int32_t *cu, int nseg, int64_t i)
{
    int lo = 0, hi = nseg - 1;

    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;

        if (cu[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

#endif
