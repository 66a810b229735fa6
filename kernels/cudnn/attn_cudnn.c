/* The cuDNN backend of the per-block attention (attn_cudnn.h): cuDNN's
 * flash-attention pattern graphs built through the C backend API
 * (cudnn_graph.h), cached per shape, executed on the caller's stream.
 * Built only with cuDNN (HAVE_CUDNN).  Run on an H100 with cuDNN 9.19:
 * the forward right, the backward graph without an engine (attn_cudnn.h).
 *
 * The graphs are the documented "fused flash attention" patterns (the
 * same operation graphs cudnn-frontend's sdpa nodes emit), not the fused
 * SDPA operation descriptors of cuDNN 9.x (CUDNN_BACKEND_OPERATION_SDPA_*),
 * whose backend attributes have no causal mask:
 *
 *   forward:  S = (Q K^T) * scale; padding mask (row < seq_len_q,
 *             col < seq_len_kv); causal mask (row >= col: cuDNN's
 *             top-left diagonal, the only causal form it runs right);
 *             m = max S; E = exp(S - m); l = sum E; stats = m + log l;
 *             O = (E / l) V
 *   backward: D = rowsum(dO * O), the caller's delta; S as above;
 *             P = exp(S - stats);
 *             dV = P^T dO; dP = dO V^T; dS = P (dP - D) scale;
 *             dQ = dS K; dK = dS^T Q  (GQA: dK, dV per query head,
 *             reduced over each group)
 *
 * Tensors are [segment, head, row, dim] views of libzcomm's packed
 * [token, head, dim] layout: ragged offsets (int32 element offsets of
 * each segment) over a padded maximum length per segment, and the
 * matmuls' M/N/K overrides and the padding mask take each segment's own
 * length. */
#include "config.h"

#include <float.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cudnn_graph.h>

#include "kernels/cuda/attn_cuda.h"
#include "kernels/cuda/cuda_mem.h"
#include "kernels/cuda/staging.h"
#include "kernels/cudnn/attn_cudnn.h"
#include "kernels/cudnn/cudnn_stats.h"
#include "src/common/log.h"
#include "src/common/status.h"

/* ---- status ------------------------------------------------------------- */

zc_status_t zc_cudnn_status(int status, const char *what)
{
    zc_status_t st;

    if (status == CUDNN_STATUS_SUCCESS)
        return ZC_OK;
    switch (CUDNN_STATUS_CATEGORY(status)) {
    case CUDNN_STATUS_NOT_SUPPORTED:
        st = ZC_ERR_UNSUPPORTED;
        break;
    case CUDNN_STATUS_INTERNAL_ERROR:
        st = status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                     status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
                 ? ZC_ERR_NO_MEMORY
                 : ZC_ERR_INTERNAL;
        break;
    case CUDNN_STATUS_EXECUTION_FAILED:
    case 1000: /* not initialized, library loading, version mismatch */
        st = ZC_ERR_SYSTEM;
        break;
    default: /* bad parameters: a graph libzcomm built wrong */
        st = ZC_ERR_INTERNAL;
        break;
    }
    return zc_error(st, "cuDNN %s: %s (status %d)", what,
                    cudnnGetErrorString((cudnnStatus_t)status), status);
}

size_t zc_cudnn_version(void)
{
    return cudnnGetVersion();
}

#define ZC_CUDNN(call, what)                                                  \
    do {                                                                      \
        cudnnStatus_t zc_cudnn_st_ = (call);                                  \
        if (zc_cudnn_st_ != CUDNN_STATUS_SUCCESS)                             \
            return zc_cudnn_status((int)zc_cudnn_st_, (what));                \
    } while (0)

#define ZC_CD_SET(desc, name, type, n, ptr)                                   \
    ZC_CUDNN(cudnnBackendSetAttribute((desc), (name), (type), (n), (ptr)),    \
             "cudnnBackendSetAttribute(" #name ")")

/* ---- graph building ----------------------------------------------------- */

#define ZC_CD_MAX_DESC 192
#define ZC_CD_MAX_OPS 48

/* One built graph: every descriptor it made (kept alive with its plan). */
typedef struct {
    cudnnBackendDescriptor_t all[ZC_CD_MAX_DESC];
    int nall;
    cudnnBackendDescriptor_t ops[ZC_CD_MAX_OPS];
    int nops;
    int64_t next_virtual;
    cudnnBackendDescriptor_t plan;
    int64_t workspace;
} zc_cd_graph_t;

/* Unique ids of the variant pack. */
enum {
    ZC_CD_Q = 1, ZC_CD_K, ZC_CD_V, ZC_CD_O, ZC_CD_STATS, ZC_CD_SCALE, ZC_CD_SEQ_Q, ZC_CD_SEQ_KV,
    ZC_CD_NEG, ZC_CD_DO, ZC_CD_DQ, ZC_CD_DK, ZC_CD_DV, ZC_CD_RAG_Q, ZC_CD_RAG_KV,
    ZC_CD_DSUM, ZC_CD_KT,
    ZC_CD_VIRTUAL = 100
};

static void zc_cd_graph_destroy(void *graph)
{
    zc_cd_graph_t *g = graph;

    if (!g)
        return;
    if (g->plan)
        cudnnBackendDestroyDescriptor(g->plan);
    for (int i = g->nall - 1; i >= 0; i--)
        cudnnBackendDestroyDescriptor(g->all[i]);
    free(g);
}

static zc_status_t zc_cd_new(zc_cd_graph_t *g, cudnnBackendDescriptorType_t type,
                             cudnnBackendDescriptor_t *d)
{
    if (g->nall == ZC_CD_MAX_DESC)
        return zc_error(ZC_ERR_INTERNAL, "cuDNN graph: more than %d descriptors", ZC_CD_MAX_DESC);
    ZC_CUDNN(cudnnBackendCreateDescriptor(type, d), "cudnnBackendCreateDescriptor");
    g->all[g->nall++] = *d;
    return ZC_OK;
}

static zc_status_t zc_cd_op(zc_cd_graph_t *g, cudnnBackendDescriptor_t op)
{
    if (g->nops == ZC_CD_MAX_OPS)
        return zc_error(ZC_ERR_INTERNAL, "cuDNN graph: more than %d operations", ZC_CD_MAX_OPS);
    ZC_CUDNN(cudnnBackendFinalize(op), "cudnnBackendFinalize(operation)");
    g->ops[g->nops++] = op;
    return ZC_OK;
}

#define ZC_CD_VIRT 0x1
#define ZC_CD_BYVAL 0x2

/* A 4-d tensor; uid 0 takes the next virtual id. */
static zc_status_t zc_cd_tensor(zc_cd_graph_t *g, int64_t uid, cudnnDataType_t type,
                                const int64_t dims[4], const int64_t strides[4], int flags,
                                cudnnBackendDescriptor_t ragged, cudnnBackendDescriptor_t *t)
{
    int64_t align = 16;
    bool virt = (flags & ZC_CD_VIRT) != 0, byval = (flags & ZC_CD_BYVAL) != 0;

    if (uid == 0)
        uid = g->next_virtual++;
    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, t));
    ZC_CD_SET(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    ZC_CD_SET(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    ZC_CD_SET(*t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    ZC_CD_SET(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    ZC_CD_SET(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    ZC_CD_SET(*t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
    if (byval)
        ZC_CD_SET(*t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byval);
    if (ragged)
        ZC_CD_SET(*t, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                  &ragged);
    ZC_CUDNN(cudnnBackendFinalize(*t), "cudnnBackendFinalize(tensor)");
    return ZC_OK;
}

/* A virtual tensor of dims [b, h, r, c], packed. */
static zc_status_t zc_cd_virtual(zc_cd_graph_t *g, cudnnDataType_t type, int64_t b, int64_t h,
                                 int64_t r, int64_t c, cudnnBackendDescriptor_t *t)
{
    const int64_t dims[4] = {b, h, r, c};
    const int64_t strides[4] = {h * r * c, r * c, c, 1};

    return zc_cd_tensor(g, 0, type, dims, strides, ZC_CD_VIRT, NULL, t);
}

/* y = mode(x, b, t): b and t NULL where the mode takes fewer inputs;
 * axis >= 0 for GEN_INDEX. */
static zc_status_t zc_cd_pointwise(zc_cd_graph_t *g, cudnnPointwiseMode_t mode,
                                   cudnnDataType_t prec, int64_t axis,
                                   cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                   cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t pw, op;

    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw));
    ZC_CD_SET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    ZC_CD_SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0)
        ZC_CD_SET(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    ZC_CUDNN(cudnnBackendFinalize(pw), "cudnnBackendFinalize(pointwise)");
    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op));
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
              &pw);
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b)
        ZC_CD_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (t)
        ZC_CD_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    return zc_cd_op(g, op);
}

static zc_status_t zc_cd_reduction(zc_cd_graph_t *g, cudnnReduceTensorOp_t mode,
                                   cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t red, op;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;

    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, &red));
    ZC_CD_SET(red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    ZC_CD_SET(red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    ZC_CUDNN(cudnnBackendFinalize(red), "cudnnBackendFinalize(reduction)");
    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, &op));
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &red);
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    return zc_cd_op(g, op);
}

/* c = a b, with the per-segment M, N, K overrides (NULL: none). */
static zc_status_t zc_cd_matmul(zc_cd_graph_t *g, cudnnBackendDescriptor_t a,
                                cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
                                cudnnBackendDescriptor_t m, cudnnBackendDescriptor_t n,
                                cudnnBackendDescriptor_t k)
{
    cudnnBackendDescriptor_t mm, op;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;

    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, &mm));
    ZC_CD_SET(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    ZC_CUDNN(cudnnBackendFinalize(mm), "cudnnBackendFinalize(matmul)");
    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, &op));
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    if (m)
        ZC_CD_SET(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC,
                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m);
    if (n)
        ZC_CD_SET(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC,
                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n);
    if (k)
        ZC_CD_SET(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC,
                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k);
    return zc_cd_op(g, op);
}

/* The inputs every graph shares. */
typedef struct {
    cudnnBackendDescriptor_t rag_q, rag_kv, seq_q, seq_kv, scale, neg;
    cudnnDataType_t io;
    int64_t b, hq, hk, sq, sk, d;
} zc_cd_common_t;

/* [b, h, s, d] over packed [token, h, d] rows (transposed: [b, h, d, s]). */
static zc_status_t zc_cd_bhsd(zc_cd_graph_t *g, const zc_cd_common_t *c, int64_t uid, int64_t h,
                              int64_t s, int transposed, cudnnBackendDescriptor_t ragged,
                              cudnnBackendDescriptor_t *t)
{
    int64_t dims[4] = {c->b, h, s, c->d};
    int64_t strides[4] = {s * h * c->d, c->d, h * c->d, 1};

    if (transposed) {
        dims[2] = c->d;
        dims[3] = s;
        strides[2] = 1;
        strides[3] = h * c->d;
    }
    return zc_cd_tensor(g, uid, c->io, dims, strides, 0, ragged, t);
}

static zc_status_t zc_cd_common(zc_cd_graph_t *g, const zc_cudnn_key_t *key, zc_cd_common_t *c)
{
    const int64_t rag_dims[4] = {key->segments + 1, 1, 1, 1};
    const int64_t seq_dims[4] = {key->segments, 1, 1, 1};
    const int64_t one[4] = {1, 1, 1, 1};

    c->io = key->dtype == ZC_FLOAT16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    c->b = key->segments;
    c->hq = key->heads_q;
    c->hk = key->heads_kv;
    c->sq = key->max_q;
    c->sk = key->max_kv;
    c->d = key->head_dim;
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_RAG_Q, CUDNN_DATA_INT32, rag_dims, one, 0, NULL, &c->rag_q));
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_RAG_KV, CUDNN_DATA_INT32, rag_dims, one, 0, NULL, &c->rag_kv));
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_SEQ_Q, CUDNN_DATA_INT32, seq_dims, one, 0, NULL, &c->seq_q));
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_SEQ_KV, CUDNN_DATA_INT32, seq_dims, one, 0, NULL, &c->seq_kv));
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_SCALE, CUDNN_DATA_FLOAT, one, one, ZC_CD_BYVAL, NULL, &c->scale));
    return zc_cd_tensor(g, ZC_CD_NEG, CUDNN_DATA_FLOAT, one, one, ZC_CD_BYVAL, NULL, &c->neg);
}

/* S = (Q K^T) * scale, padding and (causal) masks: the masked scores. */
static zc_status_t zc_cd_scores(zc_cd_graph_t *g, const zc_cd_common_t *c, int causal,
                                cudnnBackendDescriptor_t q, cudnnBackendDescriptor_t kt,
                                cudnnBackendDescriptor_t *scores)
{
    cudnnBackendDescriptor_t s, s2, ri, ci, rm, cm, pm, s3;

    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_FLOAT, c->b, c->hq, c->sq, c->sk, &s));
    ZC_CHECK(zc_cd_matmul(g, q, kt, s, c->seq_q, c->seq_kv, NULL));
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_FLOAT, c->b, c->hq, c->sq, c->sk, &s2));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, s, c->scale, NULL, s2));
    /* padding: row < seq_len_q and col < seq_len_kv */
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_INT32, c->b, c->hq, c->sq, c->sk, &ri));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, 2, s2, NULL, NULL, ri));
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_INT32, c->b, c->hq, c->sq, c->sk, &ci));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, 3, s2, NULL, NULL, ci));
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_BOOLEAN, c->b, c->hq, c->sq, c->sk, &rm));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_INT32, -1, ri, c->seq_q, NULL,
                             rm));
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_BOOLEAN, c->b, c->hq, c->sq, c->sk, &cm));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_INT32, -1, ci, c->seq_kv, NULL,
                             cm));
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_BOOLEAN, c->b, c->hq, c->sq, c->sk, &pm));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_LOGICAL_AND, CUDNN_DATA_BOOLEAN, -1, rm, cm, NULL,
                             pm));
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_FLOAT, c->b, c->hq, c->sq, c->sk, &s3));
    /* y = t ? x : b */
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, s2, c->neg,
                             pm, s3));
    if (causal) {
        cudnnBackendDescriptor_t ri2, ci2, keep, s4;

        ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_INT32, c->b, c->hq, c->sq, c->sk, &ri2));
        ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, 2, s3, NULL, NULL,
                                 ri2));
        ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_INT32, c->b, c->hq, c->sq, c->sk, &ci2));
        ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, 3, s3, NULL, NULL,
                                 ci2));
        ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_BOOLEAN, c->b, c->hq, c->sq, c->sk, &keep));
        ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_INT32, -1, ri2, ci2, NULL,
                                 keep));
        ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_FLOAT, c->b, c->hq, c->sq, c->sk, &s4));
        ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, s3,
                                 c->neg, keep, s4));
        s3 = s4;
    }
    *scores = s3;
    return ZC_OK;
}

/* [b, h, s, 1] fp32 rows (stats, row sums). */
static zc_status_t zc_cd_rows(zc_cd_graph_t *g, const zc_cd_common_t *c, int64_t uid,
                              cudnnBackendDescriptor_t *t)
{
    const int64_t dims[4] = {c->b, c->hq, c->sq, 1};
    const int64_t strides[4] = {c->hq * c->sq, c->sq, 1, 1};

    return zc_cd_tensor(g, uid, CUDNN_DATA_FLOAT, dims, strides, uid ? 0 : ZC_CD_VIRT, NULL, t);
}

static zc_status_t zc_cd_forward(zc_cd_graph_t *g, const zc_cudnn_key_t *key)
{
    zc_cd_common_t c;
    cudnnBackendDescriptor_t q, kt, v, o, stats, s, mx, sub, ex, sum, lg, p;

    ZC_CHECK(zc_cd_common(g, key, &c));
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_Q, c.hq, c.sq, 0, c.rag_q, &q));
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_K, c.hk, c.sk, 1, c.rag_kv, &kt));
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_V, c.hk, c.sk, 0, c.rag_kv, &v));
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_O, c.hq, c.sq, 0, c.rag_q, &o));
    ZC_CHECK(zc_cd_rows(g, &c, ZC_CD_STATS, &stats));
    ZC_CHECK(zc_cd_scores(g, &c, key->mask == ZC_CUDNN_MASK_CAUSAL, q, kt, &s));
    /* softmax with its stats */
    ZC_CHECK(zc_cd_rows(g, &c, 0, &mx));
    ZC_CHECK(zc_cd_reduction(g, CUDNN_REDUCE_TENSOR_MAX, s, mx));
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_FLOAT, c.b, c.hq, c.sq, c.sk, &sub));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, -1, s, mx, NULL, sub));
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_FLOAT, c.b, c.hq, c.sq, c.sk, &ex));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, -1, sub, NULL, NULL, ex));
    ZC_CHECK(zc_cd_rows(g, &c, 0, &sum));
    ZC_CHECK(zc_cd_reduction(g, CUDNN_REDUCE_TENSOR_ADD, ex, sum));
    ZC_CHECK(zc_cd_rows(g, &c, 0, &lg));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, -1, sum, NULL, NULL, lg));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, -1, mx, lg, NULL, stats));
    ZC_CHECK(zc_cd_virtual(g, c.io, c.b, c.hq, c.sq, c.sk, &p));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, -1, ex, sum, NULL, p));
    return zc_cd_matmul(g, p, v, o, c.seq_q, NULL, c.seq_kv);
}

/* The transpose of virtual x [b, h, r, c] (packed) as [b, h, c, r]: a
 * reshape into a virtual tensor with swapped dims and strides (a graph
 * takes one descriptor per uid). */
static zc_status_t zc_cd_transposed(zc_cd_graph_t *g, cudnnBackendDescriptor_t x,
                                    cudnnDataType_t type, int64_t b, int64_t h, int64_t r,
                                    int64_t c, cudnnBackendDescriptor_t *t)
{
    const int64_t dims[4] = {b, h, c, r};
    const int64_t strides[4] = {h * r * c, r * c, 1, c};
    cudnnBackendDescriptor_t op;

    ZC_CHECK(zc_cd_tensor(g, 0, type, dims, strides, ZC_CD_VIRT, NULL, t));
    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, &op));
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, t);
    return zc_cd_op(g, op);
}

/* out = a b into [b, hq, rows, d]; with GQA through a per-query-head
 * product reduced over each group of heads into the kv-head tensor `out`. */
static zc_status_t zc_cd_grad(zc_cd_graph_t *g, const zc_cd_common_t *c,
                              cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                              cudnnBackendDescriptor_t out, int64_t rows,
                              cudnnBackendDescriptor_t m, cudnnBackendDescriptor_t k)
{
    cudnnBackendDescriptor_t full;

    if (c->hq == c->hk)
        return zc_cd_matmul(g, a, b, out, m, NULL, k);
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_FLOAT, c->b, c->hq, rows, c->d, &full));
    ZC_CHECK(zc_cd_matmul(g, a, b, full, m, NULL, k));
    return zc_cd_reduction(g, CUDNN_REDUCE_TENSOR_ADD, full, out);
}

static zc_status_t zc_cd_backward(zc_cd_graph_t *g, const zc_cudnn_key_t *key)
{
    zc_cd_common_t c;
    cudnnBackendDescriptor_t q, kt, k, vt, dout, dq, dk, dv, stats;
    cudnnBackendDescriptor_t dsum, s, sub, p, pt, dp, dd, ds0, ds, dst;

    ZC_CHECK(zc_cd_common(g, key, &c));
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_Q, c.hq, c.sq, 0, c.rag_q, &q));
    /* K twice, as K^T for S and as K for dQ: two uids for the same memory */
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_KT, c.hk, c.sk, 1, c.rag_kv, &kt));
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_K, c.hk, c.sk, 0, c.rag_kv, &k));
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_V, c.hk, c.sk, 1, c.rag_kv, &vt));
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_DO, c.hq, c.sq, 0, c.rag_q, &dout));
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_DQ, c.hq, c.sq, 0, c.rag_q, &dq));
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_DK, c.hk, c.sk, 0, c.rag_kv, &dk));
    ZC_CHECK(zc_cd_bhsd(g, &c, ZC_CD_DV, c.hk, c.sk, 0, c.rag_kv, &dv));
    ZC_CHECK(zc_cd_rows(g, &c, ZC_CD_STATS, &stats));
    /* D = rowsum(dO * O): the caller's delta, laid out as the stats */
    ZC_CHECK(zc_cd_rows(g, &c, ZC_CD_DSUM, &dsum));
    /* P = exp(S - stats) */
    ZC_CHECK(zc_cd_scores(g, &c, key->mask == ZC_CUDNN_MASK_CAUSAL, q, kt, &s));
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_FLOAT, c.b, c.hq, c.sq, c.sk, &sub));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, -1, s, stats, NULL, sub));
    ZC_CHECK(zc_cd_virtual(g, c.io, c.b, c.hq, c.sq, c.sk, &p));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, -1, sub, NULL, NULL, p));
    /* dV = P^T dO */
    ZC_CHECK(zc_cd_transposed(g, p, c.io, c.b, c.hq, c.sq, c.sk, &pt));
    ZC_CHECK(zc_cd_grad(g, &c, pt, dout, dv, c.sk, c.seq_kv, c.seq_q));
    /* dS = P (dO V^T - D) scale */
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_FLOAT, c.b, c.hq, c.sq, c.sk, &dp));
    ZC_CHECK(zc_cd_matmul(g, dout, vt, dp, c.seq_q, c.seq_kv, NULL));
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_FLOAT, c.b, c.hq, c.sq, c.sk, &dd));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, -1, dp, dsum, NULL, dd));
    ZC_CHECK(zc_cd_virtual(g, CUDNN_DATA_FLOAT, c.b, c.hq, c.sq, c.sk, &ds0));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, p, dd, NULL, ds0));
    ZC_CHECK(zc_cd_virtual(g, c.io, c.b, c.hq, c.sq, c.sk, &ds));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, ds0, c.scale, NULL, ds));
    /* dQ = dS K; dK = dS^T Q */
    ZC_CHECK(zc_cd_matmul(g, ds, k, dq, c.seq_q, NULL, c.seq_kv));
    ZC_CHECK(zc_cd_transposed(g, ds, c.io, c.b, c.hq, c.sq, c.sk, &dst));
    return zc_cd_grad(g, &c, dst, q, dk, c.sk, c.seq_kv, c.seq_q);
}

zc_status_t zc_cudnn_ops_check(const zc_cudnn_key_t *key, int *nops)
{
    zc_cd_graph_t *g = calloc(1, sizeof(*g));
    zc_status_t st;

    if (!g)
        return zc_error(ZC_ERR_NO_MEMORY, "cuDNN backend: graph");
    g->next_virtual = ZC_CD_VIRTUAL;
    st = key->direction == ZC_CUDNN_BWD ? zc_cd_backward(g, key) : zc_cd_forward(g, key);
    if (nops)
        *nops = g->nops;
    if (st == ZC_OK) {
        /* the operation graph too: it links the operations through their
         * tensors' uids (cuDNN checks shapes and types edge by edge) */
        cudnnBackendDescriptor_t graph;
        cudnnStatus_t cs;

        st = zc_cd_new(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph);
        if (st == ZC_OK) {
            cs = cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops);
            if (cs == CUDNN_STATUS_SUCCESS)
                cs = cudnnBackendFinalize(graph);
            st = zc_cudnn_status((int)cs, "operation graph (no handle)");
        }
    }
    zc_cd_graph_destroy(g);
    return st;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* The operation graph of `key`, its engine by heuristics, its plan. */
static zc_status_t zc_cd_build(cudnnHandle_t handle, const zc_cudnn_key_t *key, zc_cd_graph_t *g)
{
    cudnnBackendDescriptor_t graph, heur, cfgs[8];
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    int64_t ncfg = 0;
    zc_status_t st = ZC_ERR_UNSUPPORTED;

    g->next_virtual = ZC_CD_VIRTUAL;
    ZC_CHECK(key->direction == ZC_CUDNN_BWD ? zc_cd_backward(g, key) : zc_cd_forward(g, key));
    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    ZC_CD_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    ZC_CD_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops);
    ZC_CUDNN(cudnnBackendFinalize(graph), "cudnnBackendFinalize(operation graph)");
    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    ZC_CD_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    ZC_CD_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    ZC_CUDNN(cudnnBackendFinalize(heur), "cudnnBackendFinalize(engine heuristics)");
    for (int i = 0; i < 8; i++)
        ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
    ZC_CUDNN(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 8, &ncfg, cfgs),
             "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)");
    for (int64_t i = 0; i < ncfg && i < 8; i++) {
        cudnnBackendDescriptor_t plan;
        cudnnStatus_t cs;

        ZC_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan),
                 "cudnnBackendCreateDescriptor(execution plan)");
        cs = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE,
                                      1, &handle);
        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendFinalize(plan);
        if (cs == CUDNN_STATUS_SUCCESS) {
            int64_t n = 0;

            cs = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                          CUDNN_TYPE_INT64, 1, &n, &g->workspace);
        }
        if (cs == CUDNN_STATUS_SUCCESS) {
            g->plan = plan;
            zc_error_clear();
            return ZC_OK;
        }
        st = zc_cudnn_status((int)cs, "execution plan");
        cudnnBackendDestroyDescriptor(plan);
    }
    if (ncfg == 0)
        return zc_error(ZC_ERR_UNSUPPORTED, "cuDNN: no engine for this graph");
    return st;
}
#pragma GCC diagnostic pop

/* ---- handles and caches, per device ------------------------------------- */

#define ZC_CUDNN_MAX_DEVICES 64

static pthread_mutex_t zc_cudnn_lock = PTHREAD_MUTEX_INITIALIZER;
static cudnnHandle_t zc_cudnn_handles[ZC_CUDNN_MAX_DEVICES];
static zc_cudnn_cache_t zc_cudnn_caches[ZC_CUDNN_MAX_DEVICES];

void zc_cudnn_attn_release(void)
{
    pthread_mutex_lock(&zc_cudnn_lock);
    for (int i = 0; i < ZC_CUDNN_MAX_DEVICES; i++) {
        zc_cudnn_cache_clear(&zc_cudnn_caches[i], zc_cd_graph_destroy);
        if (zc_cudnn_handles[i])
            cudnnDestroy(zc_cudnn_handles[i]);
        zc_cudnn_handles[i] = NULL;
    }
    pthread_mutex_unlock(&zc_cudnn_lock);
}

/* Under the lock: the current device's handle and the built graph of key,
 * or *graph NULL where cuDNN cannot build it (logged once per shape). */
static zc_status_t zc_cudnn_graph(const zc_cudnn_key_t *key, cudnnHandle_t *handle,
                                  zc_cd_graph_t **graph)
{
    int dev = 0;
    zc_cudnn_entry_t *e;
    char shape[160];

    *graph = NULL;
    ZC_CHECK(zc_cuda_status(cudaGetDevice(&dev), "cudaGetDevice"));
    if (dev < 0 || dev >= ZC_CUDNN_MAX_DEVICES)
        return zc_error(ZC_ERR_UNSUPPORTED, "cuDNN backend: device %d past the %d it serves",
                        dev, ZC_CUDNN_MAX_DEVICES);
    if (!zc_cudnn_handles[dev])
        ZC_CUDNN(cudnnCreate(&zc_cudnn_handles[dev]), "cudnnCreate");
    *handle = zc_cudnn_handles[dev];
    e = zc_cudnn_cache_get(&zc_cudnn_caches[dev], key);
    if (!e)
        return zc_error(ZC_ERR_NO_MEMORY, "cuDNN backend: graph cache entry");
    if (e->state == 0) {
        zc_cd_graph_t *g = calloc(1, sizeof(*g));
        zc_status_t st;

        if (!g)
            return zc_error(ZC_ERR_NO_MEMORY, "cuDNN backend: graph");
        st = zc_cd_build(*handle, key, g);
        if (st == ZC_OK) {
            e->graph = g;
            e->state = 1;
            zc_log_debug("cuDNN SDPA graph built: %s, workspace %lld bytes",
                         zc_cudnn_key_str(key, shape, sizeof(shape)), (long long)g->workspace);
        } else {
            zc_cd_graph_destroy(g);
            e->state = -1;
            zc_log_info("ZC_ATTN_BACKEND=cudnn: %s runs on the native kernels: %s",
                        zc_cudnn_key_str(key, shape, sizeof(shape)), zc_get_last_error());
            zc_error_clear();
        }
    }
    *graph = e->state > 0 ? e->graph : NULL;
    return ZC_OK;
}

/* ---- one call ----------------------------------------------------------- */

/* The reasons already logged (one INFO line each), by hash. */
static uint64_t zc_cudnn_logged[64];
static int zc_cudnn_nlogged;

static void zc_cudnn_log_fallback(const char *reason)
{
    uint64_t h = 1469598103934665603ull;

    for (const char *p = reason; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (int i = 0; i < zc_cudnn_nlogged; i++)
        if (zc_cudnn_logged[i] == h)
            return;
    if (zc_cudnn_nlogged == 64)
        return; /* 64 reasons said: the rest would only repeat them */
    zc_cudnn_logged[zc_cudnn_nlogged++] = h;
    zc_log_info("ZC_ATTN_BACKEND=cudnn: falling back to the native kernels: %s%s", reason,
                zc_cudnn_nlogged == 64 ? " (the last such line)" : "");
}

static size_t zc_align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

static zc_status_t zc_cudnn_execute(cudnnHandle_t handle, const zc_cd_graph_t *g,
                                    const int64_t *uids, void **ptrs, int n, void *workspace,
                                    void *stream)
{
    cudnnBackendDescriptor_t pack = NULL;
    cudnnStatus_t cs;

    ZC_CUDNN(cudnnSetStream(handle, (cudaStream_t)stream), "cudnnSetStream");
    ZC_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack),
             "cudnnBackendCreateDescriptor(variant pack)");
    cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n,
                                  uids);
    if (cs == CUDNN_STATUS_SUCCESS)
        cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                      CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (cs == CUDNN_STATUS_SUCCESS)
        cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                      CUDNN_TYPE_VOID_PTR, 1, &workspace);
    if (cs == CUDNN_STATUS_SUCCESS)
        cs = cudnnBackendFinalize(pack);
    if (cs == CUDNN_STATUS_SUCCESS)
        cs = cudnnBackendExecute(handle, g->plan, pack);
    cudnnBackendDestroyDescriptor(pack);
    return zc_cudnn_status((int)cs, "cudnnBackendExecute");
}

/* Device scratch of one call, carved from one allocation: the cuDNN
 * outputs in the input type, the stats-layout rows, the fp32 staging of an
 * accumulation, cuDNN's workspace.  (The int32 arrays go through the
 * pinned staging pool, kernels/cuda/staging.h.) */
typedef struct {
    size_t o, dq, dk, dv, stats, dsum, f32, lse, ws, bytes;
} zc_cudnn_layout_t;

static void zc_cudnn_layout(int backward, int acc, int64_t qn, int64_t kn, int64_t rows,
                            int64_t lse_rows, size_t es, int64_t workspace, zc_cudnn_layout_t *l)
{
    size_t off = 0;

#define ZC_CUDNN_TAKE(field, n) (l->field = off, off += zc_align256((size_t)(n)))
    ZC_CUDNN_TAKE(o, backward ? 0 : (size_t)qn * es);
    ZC_CUDNN_TAKE(dq, backward ? (size_t)qn * es : 0);
    ZC_CUDNN_TAKE(dk, backward ? (size_t)kn * es : 0);
    ZC_CUDNN_TAKE(dv, backward ? (size_t)kn * es : 0);
    ZC_CUDNN_TAKE(stats, (size_t)rows * sizeof(float));
    ZC_CUDNN_TAKE(dsum, backward ? (size_t)rows * sizeof(float) : 0);
    ZC_CUDNN_TAKE(f32, acc ? (size_t)(qn > kn ? qn : kn) * sizeof(float) : 0);
    ZC_CUDNN_TAKE(lse, acc && !backward ? (size_t)lse_rows * sizeof(float) : 0);
#undef ZC_CUDNN_TAKE
    l->ws = off;
    l->bytes = off + (size_t)workspace;
}

static zc_status_t zc_cudnn_run(int pass, const zc_attn_args_t *a, const zc_cudnn_key_t *key,
                                cudnnHandle_t handle, const zc_cd_graph_t *g, void *stream)
{
    int backward = pass == ZC_CUDNN_BWD, acc = (a->flags & ZC_ATTN_ACCUMULATE) != 0;
    int nb = key->segments, hq = a->num_heads_q, hk = a->num_heads_kv, d = a->head_dim;
    int64_t tq = a->cu_seqlens_q[a->batch], tk = a->cu_seqlens_kv[a->batch];
    int64_t qn = tq * hq * d, kn = tk * hk * d, rows = (int64_t)nb * hq * key->max_q;
    size_t es = zc_datatype_size(a->dtype), n1 = (size_t)nb + 1, nint = 5 * n1;
    int32_t *host, *rq, *rk, *lq, *lk, *qb;
    zc_cuda_staging_slot_t *slot;
    char *base = NULL;
    zc_cudnn_layout_t l;
    float scale = a->scale, neg = -FLT_MAX;
    zc_status_t st = ZC_OK;

    zc_cudnn_layout(backward, acc, qn, kn, rows, tq * hq, es, g->workspace, &l);
    /* ragged offsets (elements), lengths and first tokens of the segments
     * with queries, written into a pinned staging slot */
    ZC_CHECK(zc_cuda_staging_acquire(nint * sizeof(int32_t), &slot));
    host = zc_cuda_staging_host(slot);
    memset(host, 0, nint * sizeof(int32_t));
    rq = host;
    rk = rq + n1;
    lq = rk + n1;
    lk = lq + n1;
    qb = lk + n1;
    for (int b = 0, j = 0; b < a->batch; b++) {
        int32_t q0 = a->cu_seqlens_q[b], q1 = a->cu_seqlens_q[b + 1];
        int32_t k0 = a->cu_seqlens_kv[b], k1 = a->cu_seqlens_kv[b + 1];

        if (q1 == q0)
            continue;
        rq[j] = q0 * hq * d;
        rk[j] = k0 * hk * d;
        lq[j] = q1 - q0;
        lk[j] = k1 - k0;
        qb[j] = q0;
        j++;
    }
    rq[nb] = (int32_t)qn;
    rk[nb] = (int32_t)kn;
    ZC_CHECK_GOTO(zc_cuda_alloc_async(l.bytes, stream, (void **)&base), st, out);
    {
        int32_t *dints = zc_cuda_staging_dev(slot);
        int32_t *d_rq = dints, *d_rk = d_rq + n1, *d_lq = d_rk + n1, *d_lk = d_lq + n1;
        int32_t *d_qb = d_lk + n1;
        float *stats = (float *)(base + l.stats), *f32 = (float *)(base + l.f32);
        void *ws = g->workspace ? base + l.ws : NULL;
        int64_t uids[18];
        void *ptrs[18];
        int n = 0;

#define ZC_CUDNN_BIND(uid, ptr) (uids[n] = (uid), ptrs[n] = (void *)(ptr), n++)
        ZC_CHECK_GOTO(zc_cuda_staging_stage(slot, nint * sizeof(int32_t), stream), st, out);
        ZC_CUDNN_BIND(ZC_CD_Q, a->q);
        ZC_CUDNN_BIND(ZC_CD_K, a->k);
        ZC_CUDNN_BIND(ZC_CD_V, a->v);
        ZC_CUDNN_BIND(ZC_CD_STATS, stats);
        ZC_CUDNN_BIND(ZC_CD_SCALE, &scale);
        ZC_CUDNN_BIND(ZC_CD_NEG, &neg);
        ZC_CUDNN_BIND(ZC_CD_SEQ_Q, d_lq);
        ZC_CUDNN_BIND(ZC_CD_SEQ_KV, d_lk);
        ZC_CUDNN_BIND(ZC_CD_RAG_Q, d_rq);
        ZC_CUDNN_BIND(ZC_CD_RAG_KV, d_rk);
        if (!backward) {
            void *o = !acc && a->out_dtype == a->dtype ? a->out : base + l.o;
            float *lse = acc ? (float *)(base + l.lse) : a->lse;

            ZC_CUDNN_BIND(ZC_CD_O, o);
            ZC_CHECK_GOTO(zc_cudnn_execute(handle, g, uids, ptrs, n, ws, stream), st, out);
            ZC_CHECK_GOTO(zc_cuda_status(zc_cudnn_stats_to_lse(stats, d_qb, d_lq, nb, hq,
                                                               key->max_q, lse, stream),
                                         "zc_cudnn_stats_to_lse"), st, out);
            if (acc) {
                /* the block merged into out/lse like a native partial */
                ZC_CHECK_GOTO(zc_cuda_status(zc_attn_cuda_convert(o, a->dtype, qn, f32,
                                                                  ZC_FLOAT32, stream),
                                             "zc_attn_cuda_convert"), st, out);
                ZC_CHECK_GOTO(zc_cuda_status(zc_attn_cuda_merge(f32, lse, tq * hq, d,
                                                                (float *)a->out, a->lse,
                                                                stream),
                                             "zc_attn_cuda_merge"), st, out);
            } else if (o != a->out) {
                ZC_CHECK_GOTO(zc_cuda_status(zc_attn_cuda_convert(o, a->dtype, qn, a->out,
                                                                  a->out_dtype, stream),
                                             "zc_attn_cuda_convert"), st, out);
            }
        } else {
            void *grads[3] = {a->dq, a->dk, a->dv};
            void *parts[3] = {base + l.dq, base + l.dk, base + l.dv};
            int64_t counts[3] = {qn, kn, kn};
            float *dsum = (float *)(base + l.dsum);

            ZC_CUDNN_BIND(ZC_CD_KT, a->k);
            ZC_CUDNN_BIND(ZC_CD_DO, a->dout);
            ZC_CUDNN_BIND(ZC_CD_DSUM, dsum);
            ZC_CUDNN_BIND(ZC_CD_DQ, parts[0]);
            ZC_CUDNN_BIND(ZC_CD_DK, parts[1]);
            ZC_CUDNN_BIND(ZC_CD_DV, parts[2]);
            ZC_CHECK_GOTO(zc_cuda_status(zc_cudnn_lse_to_stats(a->lse, d_qb, d_lq, nb, hq,
                                                               key->max_q, stats, stream),
                                         "zc_cudnn_lse_to_stats"), st, out);
            ZC_CHECK_GOTO(zc_cuda_status(zc_cudnn_lse_to_stats(a->delta, d_qb, d_lq, nb, hq,
                                                               key->max_q, dsum, stream),
                                         "zc_cudnn_lse_to_stats"), st, out);
            /* keys of segments without queries (left out of the graph) get 0 */
            ZC_CHECK_GOTO(zc_cuda_zero_async(parts[0], l.stats - l.dq, stream), st, out);
            ZC_CHECK_GOTO(zc_cudnn_execute(handle, g, uids, ptrs, n, ws, stream), st, out);
            for (int i = 0; i < 3; i++) {
                if (acc) {
                    ZC_CHECK_GOTO(zc_cuda_status(zc_attn_cuda_convert(parts[i], a->dtype,
                                                                      counts[i], f32,
                                                                      ZC_FLOAT32, stream),
                                                 "zc_attn_cuda_convert"), st, out);
                    ZC_CHECK_GOTO(zc_cuda_status(zc_cuda_add_f32(grads[i], f32, counts[i],
                                                                 stream),
                                                 "zc_cuda_add_f32"), st, out);
                } else {
                    ZC_CHECK_GOTO(zc_cuda_status(zc_attn_cuda_convert(parts[i], a->dtype,
                                                                      counts[i], grads[i],
                                                                      a->grad_dtype, stream),
                                                 "zc_attn_cuda_convert"), st, out);
                }
            }
        }
#undef ZC_CUDNN_BIND
    }
out:
    zc_cuda_free_async(base, stream);
    /* after everything that reads the slot is enqueued, error paths too */
    return zc_cuda_staging_finish(slot, stream, st);
}

zc_status_t zc_cudnn_attn_launch(int pass, const zc_attn_args_t *args, void *stream,
                                 int *fallback)
{
    zc_cudnn_key_t key;
    char reason[256];
    cudnnHandle_t handle = NULL;
    zc_cd_graph_t *g = NULL;
    zc_status_t st;

    *fallback = 0;
    ZC_CHECK(zc_cudnn_attn_check(pass, args));
    pthread_mutex_lock(&zc_cudnn_lock);
    if (!zc_cudnn_attn_decide(pass, args, &key, reason, sizeof(reason))) {
        zc_cudnn_log_fallback(reason);
        pthread_mutex_unlock(&zc_cudnn_lock);
        *fallback = 1;
        return ZC_OK;
    }
    if (key.segments == 0) {
        pthread_mutex_unlock(&zc_cudnn_lock);
        *fallback = 1; /* nothing for cuDNN: the native kernels write the empty outputs */
        return ZC_OK;
    }
    st = zc_cudnn_graph(&key, &handle, &g);
    if (st == ZC_OK && !g)
        *fallback = 1;
    else if (st == ZC_OK)
        st = zc_cudnn_run(pass, args, &key, handle, g, stream);
    pthread_mutex_unlock(&zc_cudnn_lock);
    return st;
}
