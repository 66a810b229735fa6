/* zc_attn_perf -G: libzcomm's CUDA attention kernels on one GPU, the
 * tensor-core kernels beside the scalar ones and cuDNN's SDPA (through
 * libzcomm's cuDNN backend) on the same shapes in the same run. */
#ifndef ZC_ATTN_PERF_GPU_H
#define ZC_ATTN_PERF_GPU_H

typedef struct {
    int iters, warmup;
    int dims[2], ndims;      /* head dims: 64 and 128 */
    int hidden;              /* heads = hidden / head dim */
    long long tokens;        /* tokens per call */
    int causal_only, full_only;
    const char *only;        /* one shape by name, or NULL for all */
} zc_attn_gpu_opts_t;

/* Runs every shape, prints one table; returns the number of results that
 * disagree with the scalar kernels beyond the bf16 tolerance, or -1 when
 * there is no GPU (or the build has no CUDA). */
int zc_attn_perf_gpu(const zc_attn_gpu_opts_t *o);

#endif
