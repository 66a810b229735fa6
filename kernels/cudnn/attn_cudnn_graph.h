/* The operation graphs of the cuDNN backend (attn_cudnn.h), built through
 * cuDNN's C backend API (cudnn_graph.h): tensors, operations, operation
 * graph, engine heuristics, execution plan.  Built only with cuDNN.
 *
 * Why the C backend API and not cudnn-frontend's C++ graph API.  The
 * frontend emits, op by op, the patterns cuDNN's fused engines match, and
 * tracks them from version to version; a hand-built graph that misses the
 * pattern finds no engine, and that was only seen on a GPU (the backward
 * on an H100, BENCHMARKS.md).  But the question "does an engine take this
 * graph" can be put to cuDNN itself without a GPU: a device-properties
 * descriptor made from the JSON of a GPU (CUDNN_BACKEND_DEVICEPROP_
 * DESCRIPTOR, cuDNN 9.8+) lets the heuristics run on the host, the CUDA
 * toolkit's stub driver standing in for libcuda, and the runtime-compiled
 * attention engines then say which op of the graph they could not place
 * (zc_cudnn_engine_check; tests/test_attn_cudnn runs it in CI on an H100's
 * description for every graph the ring engine can ask for).  That check is
 * stronger than the frontend's graph.validate(), which only applies the
 * frontend's own rules, and it keeps the library pure C: no C++ runtime in
 * libzcomm, no header package pinned to the cuDNN release beside it.  The
 * graphs below follow the frontend's SDPA nodes (cudnn-frontend,
 * include/cudnn_frontend/node/scaled_dot_product_flash_attention.h) op by
 * op, so that a pattern change in a later cuDNN shows up in that check.
 *
 * Tensors are [segment, head, row, dim] views of libzcomm's packed
 * [token, head, dim] rows through ragged offsets (int32 element offsets of
 * each segment's first row), over a maximum length per segment; the
 * matmuls' M/N/K overrides and the padding mask take each segment's own
 * length.  The softmax stats are libzcomm's [token, head] LSE rows, viewed
 * as [segment, head, row, 1] with strides {-, 1, heads, 1} and a ragged
 * offset of the first token times the heads. */
#ifndef ZC_KERNELS_CUDNN_ATTN_CUDNN_GRAPH_H
#define ZC_KERNELS_CUDNN_ATTN_CUDNN_GRAPH_H

#include <stdint.h>

#include <cudnn_graph.h>

#include "kernels/cudnn/attn_cudnn.h"
#include "zcomm.h"

#define ZC_CD_MAX_DESC 256
#define ZC_CD_MAX_OPS 64

/* Unique ids of the variant pack: what a call binds. */
enum {
    ZC_CD_Q = 1, ZC_CD_KT, ZC_CD_V, ZC_CD_O, ZC_CD_STATS, ZC_CD_SCALE, ZC_CD_SEQ_Q,
    ZC_CD_SEQ_KV, ZC_CD_NEG, ZC_CD_ONE, ZC_CD_DO, ZC_CD_DQ, ZC_CD_DK, ZC_CD_DV, ZC_CD_RAG_Q,
    ZC_CD_RAG_KV, ZC_CD_RAG_STATS, ZC_CD_DSUM, ZC_CD_DQ_ACCUM, ZC_CD_RIGHT, ZC_CD_LEFT,
    ZC_CD_VIRTUAL = 100
};

/* One graph: every descriptor it made (kept alive with its plan). */
typedef struct {
    cudnnBackendDescriptor_t all[ZC_CD_MAX_DESC];
    int nall;
    cudnnBackendDescriptor_t ops[ZC_CD_MAX_OPS];
    int nops;
    int64_t next_virtual;
    cudnnBackendDescriptor_t plan;
    int64_t workspace;        /* cuDNN's own workspace, bytes */
} zc_cd_graph_t;

/* The tensors and operations of key's graph into g (no handle, no device). */
zc_status_t zc_cd_graph_ops(zc_cd_graph_t *g, const zc_cudnn_key_t *key);
/* Then its operation graph, engine and execution plan on `handle`. */
zc_status_t zc_cd_graph_plan(zc_cd_graph_t *g, cudnnHandle_t handle);
void zc_cd_graph_destroy(void *graph);

/* A cuDNN status as a zc_status_t (attn_cudnn.h's zc_cudnn_status). */
#define ZC_CUDNN(call, what)                                                  \
    do {                                                                      \
        cudnnStatus_t zc_cudnn_st_ = (call);                                  \
        if (zc_cudnn_st_ != CUDNN_STATUS_SUCCESS)                             \
            return zc_cudnn_status((int)zc_cudnn_st_, (what));                \
    } while (0)

#endif
