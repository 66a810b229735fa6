/* Between cuDNN's softmax stats [segment, head, row] (rows padded to the
 * graph's max_q) and libzcomm's logsumexp [token, head] (attn_cudnn.h).
 * Device arrays: qbeg[seg] is the segment's first token, qlen[seg] its
 * length.  Each returns a cudaError_t as int (0: launched). */
#ifndef ZC_KERNELS_CUDNN_CUDNN_STATS_H
#define ZC_KERNELS_CUDNN_CUDNN_STATS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* lse[(qbeg[s] + r) * heads + h] = stats[(s * heads + h) * max_q + r], r < qlen[s]. */
int zc_cudnn_stats_to_lse(const float *stats, const int32_t *qbeg, const int32_t *qlen,
                          int segments, int heads, int max_q, float *lse, void *stream);
/* The reverse; padded rows of stats get 0. */
int zc_cudnn_lse_to_stats(const float *lse, const int32_t *qbeg, const int32_t *qlen,
                          int segments, int heads, int max_q, float *stats, void *stream);

#ifdef __cplusplus
}
#endif

#endif
