/* Device copies of one rank's ring attention buffers (zc_ring_attn_data.h),
 * for zc_ring_attn_perf -G and the GPU tests: the inputs uploaded, room
 * for the outputs, and the results downloaded for the check.  Without
 * CUDA every call returns ZC_ERR_UNSUPPORTED. */
#ifndef ZC_RING_ATTN_DEVICE_H
#define ZC_RING_ATTN_DEVICE_H

#include "zc_ring_attn_data.h"
#include "zcomm.h"

typedef struct {
    void *q, *k, *v, *dout, *out, *dq, *dk, *dv;
    float *lse;
    size_t q_bytes, kv_bytes, lse_bytes;
} rad_device_t;

/* Make device `index` modulo the visible devices current; *count gets how
 * many there are (0: none, and ZC_ERR_UNSUPPORTED). */
zc_status_t rad_device_select(int index, int *count);
/* Upload l's inputs (its rows and padding) and allocate its outputs; args'
 * tensors then point at them, with memtype ZC_MEM_CUDA. */
zc_status_t rad_device_make(const rad_batch_t *b, const rad_local_t *l, rad_device_t *d,
                            zc_ring_attn_args_t *args);
/* out, lse, dq, dk, dv back into l (after the stream is synchronized). */
zc_status_t rad_device_download(const rad_device_t *d, rad_local_t *l);
void rad_device_free(rad_device_t *d);

#endif
