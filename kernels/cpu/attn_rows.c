/* Row-mapped copies of kernels/attn_rows.h on host memory, compact row by
 * compact row on the CPU thread pool (each row's work is its own, so the
 * result does not depend on the threads). */
#include "config.h"

#include <string.h>

#include "kernels/attn_math.h"
#include "kernels/attn_rows.h"
#include "kernels/cpu/thread_pool.h"
#include "src/common/status.h"

static float zc_rows_load(const void *p, zc_datatype_t dtype, int64_t i)
{
    return dtype == ZC_FLOAT32 ? ((const float *)p)[i]
                               : zc_bf16_to_float(((const uint16_t *)p)[i]);
}

static void zc_rows_body(void *ctx, int64_t begin, int64_t end, int thread)
{
    const zc_attn_rows_t *r = ctx;
    const int64_t n = r->cu[r->nseg];

    (void)thread;
    for (int64_t i = begin; i < end; i++) {
        int s = zc_attn_rows_segment(r->cu, r->nseg, i);
        int64_t at = r->row[s] + i - r->cu[s];

        switch (r->op) {
        case ZC_ROWS_GATHER:
            memcpy((char *)r->dst + (size_t)i * r->row_bytes,
                   (const char *)r->src + (size_t)at * r->row_bytes, r->row_bytes);
            break;
        case ZC_ROWS_GATHER_LSE:
            for (int h = 0; h < r->heads; h++)
                ((float *)r->dst)[h * n + i] = ((const float *)r->src)[at * r->heads + h];
            break;
        case ZC_ROWS_MERGE:
            for (int h = 0; h < r->heads; h++) {
                float part[ZC_ATTN_MAX_HEAD_DIM];
                int64_t from = (i * r->heads + h) * r->head_dim;

                for (int d = 0; d < r->head_dim; d++)
                    part[d] = zc_rows_load(r->src, r->dtype, from + d);
                zc_attn_merge_row((float *)r->dst + (at * r->heads + h) * r->head_dim,
                                  &r->dst_lse[at * r->heads + h], part, r->src_lse[h * n + i],
                                  r->head_dim);
            }
            break;
        case ZC_ROWS_ADD:
            for (int64_t e = 0; e < r->row_elems; e++)
                ((float *)r->dst)[at * r->row_elems + e] +=
                    zc_rows_load(r->src, r->dtype, i * r->row_elems + e);
            break;
        }
    }
}

zc_status_t zc_attn_rows(const zc_attn_rows_t *r)
{
    ZC_ARG_CHECK(r->nseg > 0, "nseg: %d, must be positive", r->nseg);
    ZC_ARG_CHECK(r->op == ZC_ROWS_GATHER || r->op == ZC_ROWS_GATHER_LSE ||
                     r->dtype == ZC_FLOAT32 || r->dtype == ZC_BFLOAT16,
                 "dtype: %s, the host takes float32 or bfloat16", zc_datatype_name(r->dtype));
    ZC_ARG_CHECK(r->op != ZC_ROWS_MERGE || (r->head_dim >= 1 &&
                                              r->head_dim <= ZC_ATTN_MAX_HEAD_DIM),
                 "head_dim: %d, must be in 1..%d", r->head_dim, ZC_ATTN_MAX_HEAD_DIM);
    zc_cpu_parallel_for(r->cu[r->nseg], 64, zc_rows_body, (void *)r);
    return ZC_OK;
}
