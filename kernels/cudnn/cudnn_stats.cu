/* The stats layout kernels of the cuDNN backend (cudnn_stats.h). */
#include <cuda_runtime.h>

#include "kernels/cudnn/cudnn_stats.h"

__global__ void zc_cudnn_stats_kernel(const float *src, const int32_t *qbeg,
                                      const int32_t *qlen, int heads, int max_q, int64_t n,
                                      float *dst, int to_lse)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int r = (int)(i % max_q);
        int64_t sh = i / max_q;
        int h = (int)(sh % heads);
        int s = (int)(sh / heads);
        int64_t tok = (int64_t)qbeg[s] + r;

        if (r >= qlen[s]) {
            if (!to_lse)
                dst[i] = 0.0f;
            continue;
        }
        if (to_lse)
            dst[tok * heads + h] = src[i];
        else
            dst[i] = src[tok * heads + h];
    }
}

static int zc_cudnn_stats_launch(const float *src, const int32_t *qbeg, const int32_t *qlen,
                                 int segments, int heads, int max_q, float *dst, void *stream,
                                 int to_lse)
{
    int64_t n = (int64_t)segments * heads * max_q;
    int64_t blocks = (n + 255) / 256;

    if (n == 0)
        return 0;
    if (blocks > 65536)
        blocks = 65536;
    zc_cudnn_stats_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(
        src, qbeg, qlen, heads, max_q, n, dst, to_lse);
    return (int)cudaGetLastError();
}

extern "C" int zc_cudnn_stats_to_lse(const float *stats, const int32_t *qbeg,
                                     const int32_t *qlen, int segments, int heads, int max_q,
                                     float *lse, void *stream)
{
    return zc_cudnn_stats_launch(stats, qbeg, qlen, segments, heads, max_q, lse, stream, 1);
}

extern "C" int zc_cudnn_lse_to_stats(const float *lse, const int32_t *qbeg, const int32_t *qlen,
                                     int segments, int heads, int max_q, float *stats,
                                     void *stream)
{
    return zc_cudnn_stats_launch(lse, qbeg, qlen, segments, heads, max_q, stats, stream, 0);
}
