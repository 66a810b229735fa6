/* Host-side argument checks shared by the CPU and GPU attention entry
 * points (C only; the CUDA sources never see them). */
#ifndef ZC_KERNELS_ATTN_CHECK_H
#define ZC_KERNELS_ATTN_CHECK_H

#include <stdint.h>

#include "src/status.h"

/* cu_seqlens of `batch` segments: present, starting at 0, non-decreasing;
 * *total is its last entry (0 for an empty batch, where it may be NULL). */
static inline zc_status_t zc_attn_check_seqlens(const int32_t *cu, int batch, const char *name,
                                                int64_t *total)
{
    *total = 0;
    if (batch == 0)
        return ZC_OK;
    ZC_ARG_CHECK(cu != NULL, "%s: NULL with batch %d", name, batch);
    ZC_ARG_CHECK(cu[0] == 0, "%s[0]: %d, must be 0", name, (int)cu[0]);
    for (int b = 0; b < batch; b++)
        ZC_ARG_CHECK(cu[b + 1] >= cu[b], "%s: decreases at %d (%d then %d)", name, b + 1,
                     (int)cu[b], (int)cu[b + 1]);
    *total = cu[batch];
    return ZC_OK;
}

#endif
