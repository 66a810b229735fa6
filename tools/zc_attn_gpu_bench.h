/* GPU timing of one attention call over a whole packed (THD) batch, for
 * zc_attn_perf -G and zc_ring_attn_perf -G: causal, every sequence one
 * segment, random inputs, cudaEvent timing on one stream.  Three ways:
 *   ZAB_GRAPH   one cuDNN SDPA call (the graph alone, results left in the
 *               backend's scratch): the baseline;
 *   ZAB_CUDNN   libzcomm's cuDNN backend as the ring engine calls it per
 *               block (fp32 out/lse merge, fp32 gradients added);
 *   ZAB_NATIVE  the native CUDA kernels, the same arguments.
 * Built with CUDA; without it every call returns ZC_ERR_UNSUPPORTED. */
#ifndef ZC_TOOLS_ZC_ATTN_GPU_BENCH_H
#define ZC_TOOLS_ZC_ATTN_GPU_BENCH_H

#include <stdint.h>

#include "zcomm.h"

enum { ZAB_GRAPH, ZAB_CUDNN, ZAB_NATIVE, ZAB_NWAYS };

typedef struct {
    double fwd_ms[ZAB_NWAYS], bwd_ms[ZAB_NWAYS]; /* per call; 0: not run */
    double err_out, err_dq;  /* max |cudnn - native| / max |native|, -1: not compared */
    char why[ZAB_NWAYS][160]; /* what failed, for a way not run */
} zab_result_t;

/* Make device `index` current; ZC_ERR_UNSUPPORTED when there is none. */
zc_status_t zab_device(int index);
/* Time `iters` calls (after `warmup`) of each way of the batch cu[batch + 1]
 * (token offsets), heads hq/hkv, head dim d, dtype bf16 or fp16. */
zc_status_t zab_time(const int32_t *cu, int batch, int hq, int hkv, int d, zc_datatype_t dtype,
                     int warmup, int iters, zab_result_t *res);
/* Causal attention FLOPs of the batch, forward (4 s^2 d h, halved);
 * the backward counts 2.5 times that. */
double zab_flops(const int32_t *cu, int batch, int hq, int d);

#endif
