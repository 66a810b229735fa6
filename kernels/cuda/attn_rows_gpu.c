/* zc_attn_rows_stream (kernels/attn_rows.h): the segment arrays staged to
 * the device in one slot of the staging pool, released on the stream after
 * the kernel that reads them.  Built only with --with-cuda. */
#include "config.h"

#include <string.h>

#include "kernels/attn_rows.h"
#include "kernels/cuda/attn_rows_cuda.h"
#include "kernels/cuda/cuda_mem.h"
#include "kernels/cuda/staging.h"
#include "src/common/status.h"

zc_status_t zc_attn_rows_stream(const zc_attn_rows_t *r, void *stream)
{
    size_t rows = (size_t)r->nseg * sizeof(int64_t), cu = ((size_t)r->nseg + 1) * sizeof(int32_t);
    zc_cuda_staging_slot_t *slot;
    zc_attn_rows_t dev = *r;
    char *host;
    zc_status_t st;

    ZC_ARG_CHECK(r->nseg > 0, "nseg: %d, must be positive", r->nseg);
    ZC_CHECK(zc_cuda_staging_acquire(rows + cu, &slot));
    host = zc_cuda_staging_host(slot);
    memcpy(host, r->row, rows); /* first: int64 alignment */
    memcpy(host + rows, r->cu, cu);
    st = zc_cuda_staging_stage(slot, rows + cu, stream);
    if (st == ZC_OK) {
        dev.row = zc_cuda_staging_dev(slot);
        dev.cu = (const int32_t *)((const char *)dev.row + rows);
        st = zc_cuda_status(zc_attn_rows_cuda(&dev, r->cu[r->nseg], stream),
                            "the attention row copies");
    }
    return zc_cuda_staging_finish(slot, stream, st);
}
