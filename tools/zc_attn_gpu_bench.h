/* GPU timing of attention over one packed (THD) batch, for zc_attn_perf -G
 * and zc_ring_attn_perf -G: every sequence one segment, its queries and
 * keys the same tokens, random bf16 or fp16 inputs, and four ways of
 * running the call, one after the other on the same device buffers and
 * one stream, timed with CUDA events:
 *   ZAB_SDPA    one cuDNN SDPA call (the backend's graph alone, its results
 *               left in the backend's scratch): the baseline;
 *   ZAB_CUDNN   libzcomm's cuDNN backend as the ring engine calls it per
 *               block (fp32 out/lse merged, fp32 gradients added);
 *   ZAB_MMA     libzcomm's tensor-core kernels (kernels/cuda/attn_mma.cu),
 *               the same arguments;
 *   ZAB_SCALAR  its scalar kernels (attn_cuda.cu), forced.
 * The backward of every way starts from one scalar forward's out (in the
 * io type) and lse; the native backward computes its delta in the timed
 * call, as cuDNN computes rowsum(dO * O) in its graph.  Each way's first
 * call, from cleared accumulators, is compared with the float64 reference
 * of sampled rows (zc_attn_ref.h).  Built with CUDA; without it zab_open
 * returns ZC_ERR_UNSUPPORTED. */
#ifndef ZC_TOOLS_ZC_ATTN_GPU_BENCH_H
#define ZC_TOOLS_ZC_ATTN_GPU_BENCH_H

#include <stdint.h>

#include "zcomm.h"

enum { ZAB_SDPA, ZAB_CUDNN, ZAB_MMA, ZAB_SCALAR, ZAB_NWAYS };
/* "sdpa", "cudnn", "mma", "scalar" */
extern const char *const zab_way_name[ZAB_NWAYS];

typedef struct zab_batch zab_batch_t;

/* One call's shape on a batch, and what to do with it. */
typedef struct {
    int hq, hkv, d, causal;
    int window, window_left, window_right; /* ZC_ATTN_WINDOW and its bounds (zc_attn_args_t) */
    int warmup, iters;
    unsigned ways;      /* 1u << ZAB_* */
    int fwd, bwd;       /* the passes to time */
    int check;          /* compare each way with the reference (the batch kept it) */
} zab_case_t;

/* Per pass (0 forward, 1 backward) and way. */
typedef struct {
    double ms[2][ZAB_NWAYS];  /* per call; 0: did not run */
    double err[2][ZAB_NWAYS]; /* max |x - ref| / max |ref| over the sampled rows
                                 (forward: out, and lse against max(1, |lse|);
                                 backward: dq, dk, dv); -1: not compared */
    int failed[2][ZAB_NWAYS]; /* it ran into an error (not a shape it declines) */
    char why[2][ZAB_NWAYS][200]; /* why a way did not run */
} zab_result_t;

/* Make device `index` current; ZC_ERR_UNSUPPORTED when there is none. */
zc_status_t zab_device(int index);

/* The batch cu[batch + 1] (token offsets) on the current device: random
 * inputs of dtype (bf16 or fp16), width_q values (heads x head dim) per
 * query token and width_kv per key token, enough for every case run on
 * it; `reference`: keep their host copies for zab_case_t.check. */
zc_status_t zab_open(const int32_t *cu, int batch, int width_q, int width_kv,
                     zc_datatype_t dtype, int reference, zab_batch_t **out);
/* Time case c on b (c->hq * c->d <= width_q, c->hkv * c->d <= width_kv).
 * A way that cannot take the shape (cuDNN's limits, the tensor-core
 * kernels' dtype and head dims) is skipped with its reason in r->why; one
 * that fails is too, with r->failed set.  ZC_OK unless the batch's own
 * buffers could not be had. */
zc_status_t zab_time(zab_batch_t *b, const zab_case_t *c, zab_result_t *r);
void zab_close(zab_batch_t *b);

/* Attention FLOPs of case c's forward over the batch, as BENCHMARKS.md
 * counts them: 4 s^2 d h per sequence, halved when causal; under a window
 * 4 d h per (query, key) pair it sees; the backward counts 2.5 times
 * that. */
double zab_flops(const int32_t *cu, int batch, const zab_case_t *c);

#endif
