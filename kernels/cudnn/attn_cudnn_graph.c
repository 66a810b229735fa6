/* The operation graphs of the cuDNN backend: see attn_cudnn_graph.h.
 *
 *   forward:  S = (Q K^T) scale; padding mask (row < seq_len_q and
 *             col < seq_len_kv, else -inf); the band (below); m = max S;
 *             E = exp(S - m); l = sum E;
 *             stats = m + log l; O = (E / l) V
 *   backward: softmax_sum = rowsum(dO * O) * 1 (fp32 workspace); S and the
 *             padding mask as above; P = exp(mask(S - stats)) (fp32);
 *             dV = P^T dO; dS = (dO V^T - softmax_sum) P scale (fp32);
 *             dK = dS^T Q; dQ_accum = dS K (fp32 workspace, K a reshape of
 *             the one K^T input); dQ = identity(dQ_accum); with GQA, dK and
 *             dV per query head in the io type, summed over each group.
 * The band, as cudnn-frontend's SDPA builds it (its diagonal band mask
 * nodes): with r the row index, plus seq_len_kv - seq_len_q when
 * bottom-right aligned, a right bound keeps r + right >= col (causal:
 * right 0, and no addition), then a left bound keeps col + left + 1 >
 * r, each a select of -inf.  It comes after the stats subtraction in the
 * backward, as in the frontend: the fused backward engines look for it
 * there. */
#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cudnn/attn_cudnn_graph.h"
#include "src/common/status.h"

#define ZC_CD_SET(desc, name, type, n, ptr)                                   \
    ZC_CUDNN(cudnnBackendSetAttribute((desc), (name), (type), (n), (ptr)),    \
             "cudnnBackendSetAttribute(" #name ")")

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

void zc_cd_graph_destroy(void *graph)
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

/* ---- tensors -------------------------------------------------------------- */

#define ZC_CD_VIRT 0x1
#define ZC_CD_BYVAL 0x2

typedef struct {
    int64_t dims[4], strides[4];
} zc_cd_shape_t;

/* A 4-d tensor; uid 0 takes the next virtual id. */
static zc_status_t zc_cd_tensor(zc_cd_graph_t *g, int64_t uid, cudnnDataType_t type,
                                const zc_cd_shape_t *s, int flags, cudnnBackendDescriptor_t ragged,
                                cudnnBackendDescriptor_t *t)
{
    int64_t align = 16;
    bool virt = (flags & ZC_CD_VIRT) != 0, byval = (flags & ZC_CD_BYVAL) != 0;

    if (uid == 0)
        uid = g->next_virtual++;
    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, t));
    ZC_CD_SET(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    ZC_CD_SET(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, s->dims);
    ZC_CD_SET(*t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, s->strides);
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

/* Packed [b, h, r, c]. */
static zc_cd_shape_t zc_cd_packed(int64_t b, int64_t h, int64_t r, int64_t c)
{
    return (zc_cd_shape_t){{b, h, r, c}, {h * r * c, r * c, c, 1}};
}

/* A virtual tensor of packed dims [b, h, r, c]. */
static zc_status_t zc_cd_virtual(zc_cd_graph_t *g, cudnnDataType_t type, int64_t b, int64_t h,
                                 int64_t r, int64_t c, cudnnBackendDescriptor_t *t)
{
    zc_cd_shape_t s = zc_cd_packed(b, h, r, c);

    return zc_cd_tensor(g, 0, type, &s, ZC_CD_VIRT, NULL, t);
}

/* A virtual tensor shaped like x's [b, h, sq, sk] scores. */
typedef struct {
    int64_t b, hq, hk, sq, sk, d;
    cudnnDataType_t io;
    cudnnBackendDescriptor_t rag_q, rag_kv, rag_stats, seq_q, seq_kv, scale, neg, one;
    cudnnBackendDescriptor_t right, left; /* the band's by-value bounds, where it has them */
} zc_cd_common_t;

static zc_status_t zc_cd_scores_like(zc_cd_graph_t *g, const zc_cd_common_t *c,
                                     cudnnDataType_t type, cudnnBackendDescriptor_t *t)
{
    return zc_cd_virtual(g, type, c->b, c->hq, c->sq, c->sk, t);
}

/* [b, h, s, d] over packed [token, h, d] rows; transposed: [b, h, d, s]. */
static zc_cd_shape_t zc_cd_thd(const zc_cd_common_t *c, int64_t h, int64_t s, int transposed)
{
    zc_cd_shape_t t = {{c->b, h, s, c->d}, {s * h * c->d, c->d, h * c->d, 1}};

    if (transposed) {
        t.dims[2] = c->d;
        t.dims[3] = s;
        t.strides[2] = 1;
        t.strides[3] = h * c->d;
    }
    return t;
}

static zc_status_t zc_cd_rows_tensor(zc_cd_graph_t *g, const zc_cd_common_t *c,
                                     cudnnDataType_t type, int64_t uid, int64_t h, int64_t s,
                                     int transposed, cudnnBackendDescriptor_t ragged,
                                     cudnnBackendDescriptor_t *t)
{
    zc_cd_shape_t shape = zc_cd_thd(c, h, s, transposed);

    return zc_cd_tensor(g, uid, type, &shape, 0, ragged, t);
}

/* The [b, hq, sq, 1] fp32 rows of libzcomm's [token, head] layout (stats,
 * softmax_sum), through the stats' ragged offsets. */
static zc_status_t zc_cd_lse_rows(zc_cd_graph_t *g, const zc_cd_common_t *c, int64_t uid,
                                  cudnnBackendDescriptor_t *t)
{
    zc_cd_shape_t s = {{c->b, c->hq, c->sq, 1}, {c->hq * c->sq, 1, c->hq, 1}};

    return zc_cd_tensor(g, uid, CUDNN_DATA_FLOAT, &s, 0, c->rag_stats, t);
}

/* A virtual [b, hq, sq, 1] fp32 row tensor. */
static zc_status_t zc_cd_row_virtual(zc_cd_graph_t *g, const zc_cd_common_t *c,
                                     cudnnBackendDescriptor_t *t)
{
    return zc_cd_virtual(g, CUDNN_DATA_FLOAT, c->b, c->hq, c->sq, 1, t);
}

/* ---- operations ----------------------------------------------------------- */

/* y = mode(x, b, t): b and t NULL where the mode takes fewer inputs; axis
 * >= 0 where the mode has one (GEN_INDEX, and the broadcast of a
 * per-segment length in the mask's index arithmetic). */
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

/* A new virtual y = mode(x, b) shaped like the scores. */
static zc_status_t zc_cd_pw_scores(zc_cd_graph_t *g, const zc_cd_common_t *c,
                                   cudnnPointwiseMode_t mode, cudnnDataType_t type,
                                   cudnnDataType_t prec, int64_t axis, cudnnBackendDescriptor_t x,
                                   cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                                   cudnnBackendDescriptor_t *y)
{
    ZC_CHECK(zc_cd_scores_like(g, c, type, y));
    return zc_cd_pointwise(g, mode, prec, axis, x, b, t, *y);
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

/* y = x viewed through another shape (a transpose by strides). */
static zc_status_t zc_cd_reshape(zc_cd_graph_t *g, cudnnBackendDescriptor_t x,
                                 cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t op;

    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, &op));
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    ZC_CD_SET(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    return zc_cd_op(g, op);
}

/* ---- the pieces both graphs share ------------------------------------------ */

static zc_status_t zc_cd_common(zc_cd_graph_t *g, const zc_cudnn_key_t *key, zc_cd_common_t *c)
{
    zc_cd_shape_t rag = {{key->segments + 1, 1, 1, 1}, {1, 1, 1, 1}};
    zc_cd_shape_t seq = {{key->segments, 1, 1, 1}, {1, 1, 1, 1}};
    zc_cd_shape_t one = {{1, 1, 1, 1}, {1, 1, 1, 1}};

    c->io = key->dtype == ZC_FLOAT16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    c->b = key->segments;
    c->hq = key->heads_q;
    c->hk = key->heads_kv;
    c->sq = key->max_q;
    c->sk = key->max_kv;
    c->d = key->head_dim;
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_RAG_Q, CUDNN_DATA_INT32, &rag, 0, NULL, &c->rag_q));
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_RAG_KV, CUDNN_DATA_INT32, &rag, 0, NULL, &c->rag_kv));
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_RAG_STATS, CUDNN_DATA_INT32, &rag, 0, NULL, &c->rag_stats));
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_SEQ_Q, CUDNN_DATA_INT32, &seq, 0, NULL, &c->seq_q));
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_SEQ_KV, CUDNN_DATA_INT32, &seq, 0, NULL, &c->seq_kv));
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_SCALE, CUDNN_DATA_FLOAT, &one, ZC_CD_BYVAL, NULL, &c->scale));
    ZC_CHECK(zc_cd_tensor(g, ZC_CD_ONE, CUDNN_DATA_FLOAT, &one, ZC_CD_BYVAL, NULL, &c->one));
    c->right = c->left = NULL;
    if (zc_cudnn_key_right_bound(key))
        ZC_CHECK(zc_cd_tensor(g, ZC_CD_RIGHT, CUDNN_DATA_INT32, &one, ZC_CD_BYVAL, NULL,
                              &c->right));
    if (zc_cudnn_key_left_bound(key))
        ZC_CHECK(zc_cd_tensor(g, ZC_CD_LEFT, CUDNN_DATA_INT32, &one, ZC_CD_BYVAL, NULL,
                              &c->left));
    return zc_cd_tensor(g, ZC_CD_NEG, CUDNN_DATA_FLOAT, &one, ZC_CD_BYVAL, NULL, &c->neg);
}

/* S = (Q K^T) scale with the padding mask: row < seq_len_q and col <
 * seq_len_kv keep their score, the rest get -inf. */
static zc_status_t zc_cd_scores(zc_cd_graph_t *g, const zc_cd_common_t *c,
                                cudnnBackendDescriptor_t q, cudnnBackendDescriptor_t kt,
                                cudnnBackendDescriptor_t *scores)
{
    const cudnnDataType_t f = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32, b = CUDNN_DATA_BOOLEAN;
    cudnnBackendDescriptor_t s, s2, ri, ci, rm, cm, pm;

    ZC_CHECK(zc_cd_scores_like(g, c, f, &s));
    ZC_CHECK(zc_cd_matmul(g, q, kt, s, c->seq_q, c->seq_kv, NULL));
    ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_MUL, f, f, -1, s, c->scale, NULL, &s2));
    ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_GEN_INDEX, i32, i32, 2, s2, NULL, NULL, &ri));
    ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_GEN_INDEX, i32, i32, 3, s2, NULL, NULL, &ci));
    ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_CMP_LT, b, b, -1, ri, c->seq_q, NULL, &rm));
    ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_CMP_LT, b, b, -1, ci, c->seq_kv, NULL, &cm));
    ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_LOGICAL_AND, b, b, -1, rm, cm, NULL, &pm));
    /* y = t ? x : b */
    return zc_cd_pw_scores(g, c, CUDNN_POINTWISE_BINARY_SELECT, f, f, -1, s2, c->neg, pm, scores);
}

/* One side of key's band on x, into *y (zc_cudnn_key_t.left, .right; the
 * by-value bound tensors hold right and left + 1): the right side keeps
 * r + right >= col, the left side col + left + 1 > r, with r the row
 * index, plus seq_len_kv - seq_len_q when bottom-right aligned: the
 * lengths those of the padding mask and the matmuls (the only per-segment
 * offset cuDNN's fused engines express).  Each side makes its own indices
 * from its input, as the frontend's nodes do. */
static zc_status_t zc_cd_bound(zc_cd_graph_t *g, const zc_cd_common_t *c,
                               const zc_cudnn_key_t *key, int left, cudnnBackendDescriptor_t x,
                               cudnnBackendDescriptor_t *y)
{
    const cudnnDataType_t f = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32, b = CUDNN_DATA_BOOLEAN;
    const int br = key->mask == ZC_CUDNN_MASK_BOTTOM_RIGHT;
    cudnnBackendDescriptor_t ri, ci, keep;

    ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_GEN_INDEX, i32, f, 2, x, NULL, NULL, &ri));
    ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_GEN_INDEX, i32, f, 3, x, NULL, NULL, &ci));
    if (!left) {
        if (br) {
            ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_ADD, i32, i32, 3, ri, c->seq_kv, NULL,
                                     &ri));
            ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_SUB, i32, i32, 3, ri, c->seq_q, NULL,
                                     &ri));
        }
        if (c->right)
            ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_ADD, i32, i32, 3, ri, c->right, NULL,
                                     &ri));
        ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_CMP_GE, b, b, -1, ri, ci, NULL, &keep));
    } else {
        ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_ADD, i32, i32, 3, ci, c->left, NULL, &ci));
        if (br) {
            ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_SUB, i32, i32, 3, ci, c->seq_kv, NULL,
                                     &ci));
            ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_ADD, i32, i32, 3, ci, c->seq_q, NULL,
                                     &ci));
        }
        ZC_CHECK(zc_cd_pw_scores(g, c, CUDNN_POINTWISE_CMP_GT, b, b, -1, ci, ri, NULL, &keep));
    }
    return zc_cd_pw_scores(g, c, CUDNN_POINTWISE_BINARY_SELECT, f, f, -1, x, c->neg, keep, y);
}

/* key's band on x: its right side, then its left, as the frontend orders
 * them.  A full graph returns x. */
static zc_status_t zc_cd_band(zc_cd_graph_t *g, const zc_cd_common_t *c,
                              const zc_cudnn_key_t *key, cudnnBackendDescriptor_t x,
                              cudnnBackendDescriptor_t *y)
{
    *y = x;
    if (key->mask == ZC_CUDNN_MASK_FULL)
        return ZC_OK;
    if (key->right >= 0)
        ZC_CHECK(zc_cd_bound(g, c, key, 0, *y, y));
    if (key->left >= 0)
        ZC_CHECK(zc_cd_bound(g, c, key, 1, *y, y));
    return ZC_OK;
}

/* ---- forward -------------------------------------------------------------- */

static zc_status_t zc_cd_forward(zc_cd_graph_t *g, const zc_cudnn_key_t *key)
{
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    zc_cd_common_t c;
    cudnnBackendDescriptor_t q, kt, v, o, stats, s, sm, mx, sub, ex, sum, lg, p;

    ZC_CHECK(zc_cd_common(g, key, &c));
    ZC_CHECK(zc_cd_rows_tensor(g, &c, c.io, ZC_CD_Q, c.hq, c.sq, 0, c.rag_q, &q));
    ZC_CHECK(zc_cd_rows_tensor(g, &c, c.io, ZC_CD_KT, c.hk, c.sk, 1, c.rag_kv, &kt));
    ZC_CHECK(zc_cd_rows_tensor(g, &c, c.io, ZC_CD_V, c.hk, c.sk, 0, c.rag_kv, &v));
    ZC_CHECK(zc_cd_rows_tensor(g, &c, f, ZC_CD_O, c.hq, c.sq, 0, c.rag_q, &o));
    ZC_CHECK(zc_cd_lse_rows(g, &c, ZC_CD_STATS, &stats));
    ZC_CHECK(zc_cd_scores(g, &c, q, kt, &s));
    ZC_CHECK(zc_cd_band(g, &c, key, s, &sm));
    /* softmax, and its stats m + log l */
    ZC_CHECK(zc_cd_row_virtual(g, &c, &mx));
    ZC_CHECK(zc_cd_reduction(g, CUDNN_REDUCE_TENSOR_MAX, sm, mx));
    ZC_CHECK(zc_cd_pw_scores(g, &c, CUDNN_POINTWISE_SUB, f, f, -1, sm, mx, NULL, &sub));
    ZC_CHECK(zc_cd_pw_scores(g, &c, CUDNN_POINTWISE_EXP, f, f, -1, sub, NULL, NULL, &ex));
    ZC_CHECK(zc_cd_row_virtual(g, &c, &sum));
    ZC_CHECK(zc_cd_reduction(g, CUDNN_REDUCE_TENSOR_ADD, ex, sum));
    ZC_CHECK(zc_cd_row_virtual(g, &c, &lg));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_LOG, f, -1, sum, NULL, NULL, lg));
    ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_ADD, f, -1, mx, lg, NULL, stats));
    /* the second matmul takes P in the io type */
    ZC_CHECK(zc_cd_pw_scores(g, &c, CUDNN_POINTWISE_DIV, c.io, f, -1, ex, sum, NULL, &p));
    return zc_cd_matmul(g, p, v, o, c.seq_q, NULL, c.seq_kv);
}

/* ---- backward ------------------------------------------------------------- */

/* x [b, hq, sq, sk] as its transpose [b, hq, sk, sq] in the io type. */
static zc_status_t zc_cd_transpose_scores(zc_cd_graph_t *g, const zc_cd_common_t *c,
                                          cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t *t)
{
    zc_cd_shape_t s = {{c->b, c->hq, c->sk, c->sq},
                       {c->hq * c->sq * c->sk, c->sq * c->sk, 1, c->sk}};

    ZC_CHECK(zc_cd_tensor(g, 0, c->io, &s, ZC_CD_VIRT, NULL, t));
    return zc_cd_reshape(g, x, *t);
}

/* grad = xt y into the kv-head tensor `grad` [b, hk, sk, d]: with GQA, a
 * per-query-head product in the io type summed over each group (the fused
 * engines want that sum in the io type too: "reduction output datatype in
 * flash bprop should be fp16/bf16"). */
static zc_status_t zc_cd_kv_grad(zc_cd_graph_t *g, const zc_cd_common_t *c,
                                 cudnnBackendDescriptor_t xt, cudnnBackendDescriptor_t y,
                                 cudnnBackendDescriptor_t grad)
{
    cudnnBackendDescriptor_t full;

    if (c->hq == c->hk)
        return zc_cd_matmul(g, xt, y, grad, c->seq_kv, NULL, c->seq_q);
    ZC_CHECK(zc_cd_virtual(g, c->io, c->b, c->hq, c->sk, c->d, &full));
    ZC_CHECK(zc_cd_matmul(g, xt, y, full, c->seq_kv, NULL, c->seq_q));
    return zc_cd_reduction(g, CUDNN_REDUCE_TENSOR_ADD, full, grad);
}

static zc_status_t zc_cd_backward(zc_cd_graph_t *g, const zc_cudnn_key_t *key)
{
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    zc_cd_common_t c;
    cudnnBackendDescriptor_t q, kt, vt, o, dout, dq, dk, dv, stats, dsum, dqacc;
    cudnnBackendDescriptor_t dod, dor, s, sub, sm, p, pt, dp, dd, ds0, ds, dst, k;
    cudnnDataType_t kvgrad;

    ZC_CHECK(zc_cd_common(g, key, &c));
    kvgrad = zc_cudnn_kv_grad_fp32(key) ? f : c.io;
    ZC_CHECK(zc_cd_rows_tensor(g, &c, c.io, ZC_CD_Q, c.hq, c.sq, 0, c.rag_q, &q));
    ZC_CHECK(zc_cd_rows_tensor(g, &c, c.io, ZC_CD_KT, c.hk, c.sk, 1, c.rag_kv, &kt));
    ZC_CHECK(zc_cd_rows_tensor(g, &c, c.io, ZC_CD_V, c.hk, c.sk, 1, c.rag_kv, &vt));
    ZC_CHECK(zc_cd_rows_tensor(g, &c, c.io, ZC_CD_O, c.hq, c.sq, 0, c.rag_q, &o));
    ZC_CHECK(zc_cd_rows_tensor(g, &c, c.io, ZC_CD_DO, c.hq, c.sq, 0, c.rag_q, &dout));
    ZC_CHECK(zc_cd_rows_tensor(g, &c, c.io, ZC_CD_DQ, c.hq, c.sq, 0, c.rag_q, &dq));
    ZC_CHECK(zc_cd_rows_tensor(g, &c, kvgrad, ZC_CD_DK, c.hk, c.sk, 0, c.rag_kv, &dk));
    ZC_CHECK(zc_cd_rows_tensor(g, &c, kvgrad, ZC_CD_DV, c.hk, c.sk, 0, c.rag_kv, &dv));
    ZC_CHECK(zc_cd_lse_rows(g, &c, ZC_CD_STATS, &stats));
    /* softmax_sum = rowsum(dO * O) * 1, a dense fp32 workspace in the
     * stats' layout: the delta computed in the graph */
    {
        zc_cd_shape_t prod = {{c.b, c.hq, c.sq, c.d}, {c.hq * c.sq * c.d, c.sq * c.d, c.hq * c.d, 1}};

        ZC_CHECK(zc_cd_tensor(g, 0, f, &prod, ZC_CD_VIRT, NULL, &dod));
        ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_MUL, f, -1, dout, o, NULL, dod));
        ZC_CHECK(zc_cd_row_virtual(g, &c, &dor));
        ZC_CHECK(zc_cd_reduction(g, CUDNN_REDUCE_TENSOR_ADD, dod, dor));
        ZC_CHECK(zc_cd_lse_rows(g, &c, ZC_CD_DSUM, &dsum));
        ZC_CHECK(zc_cd_pointwise(g, CUDNN_POINTWISE_MUL, f, -1, dor, c.one, NULL, dsum));
    }
    /* P = exp(mask(S - stats)), fp32 */
    ZC_CHECK(zc_cd_scores(g, &c, q, kt, &s));
    ZC_CHECK(zc_cd_pw_scores(g, &c, CUDNN_POINTWISE_SUB, f, f, -1, s, stats, NULL, &sub));
    ZC_CHECK(zc_cd_band(g, &c, key, sub, &sm));
    ZC_CHECK(zc_cd_pw_scores(g, &c, CUDNN_POINTWISE_EXP, f, f, -1, sm, NULL, NULL, &p));
    /* dV = P^T dO */
    ZC_CHECK(zc_cd_transpose_scores(g, &c, p, &pt));
    ZC_CHECK(zc_cd_kv_grad(g, &c, pt, dout, dv));
    /* dS = (dO V^T - softmax_sum) P scale, fp32 */
    ZC_CHECK(zc_cd_scores_like(g, &c, f, &dp));
    ZC_CHECK(zc_cd_matmul(g, dout, vt, dp, c.seq_q, c.seq_kv, NULL));
    ZC_CHECK(zc_cd_pw_scores(g, &c, CUDNN_POINTWISE_SUB, f, f, -1, dp, dsum, NULL, &dd));
    ZC_CHECK(zc_cd_pw_scores(g, &c, CUDNN_POINTWISE_MUL, f, f, -1, dd, p, NULL, &ds0));
    ZC_CHECK(zc_cd_pw_scores(g, &c, CUDNN_POINTWISE_MUL, f, f, -1, ds0, c.scale, NULL, &ds));
    /* dK = dS^T Q */
    ZC_CHECK(zc_cd_transpose_scores(g, &c, ds, &dst));
    ZC_CHECK(zc_cd_kv_grad(g, &c, dst, q, dk));
    /* dQ_accum = dS K, K the reshape of K^T; dQ = identity(dQ_accum) */
    {
        zc_cd_shape_t ks = zc_cd_thd(&c, c.hk, c.sk, 0);
        zc_cd_shape_t qs = zc_cd_thd(&c, c.hq, c.sq, 0);

        ZC_CHECK(zc_cd_tensor(g, 0, c.io, &ks, ZC_CD_VIRT, c.rag_kv, &k));
        ZC_CHECK(zc_cd_reshape(g, kt, k));
        ZC_CHECK(zc_cd_tensor(g, ZC_CD_DQ_ACCUM, f, &qs, 0, c.rag_q, &dqacc));
        ZC_CHECK(zc_cd_matmul(g, ds, k, dqacc, c.seq_q, NULL, c.seq_kv));
        return zc_cd_pointwise(g, CUDNN_POINTWISE_IDENTITY, f, -1, dqacc, NULL, NULL, dq);
    }
}

zc_status_t zc_cd_graph_ops(zc_cd_graph_t *g, const zc_cudnn_key_t *key)
{
    g->next_virtual = ZC_CD_VIRTUAL;
    return key->direction == ZC_CUDNN_BWD ? zc_cd_backward(g, key) : zc_cd_forward(g, key);
}

/* ---- the operation graph, its engine, its plan ----------------------------- */

/* The operation graph of g's operations (handle NULL: checked without one). */
static zc_status_t zc_cd_opgraph(zc_cd_graph_t *g, cudnnHandle_t handle,
                                 cudnnBackendDescriptor_t *graph)
{
    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph));
    if (handle)
        ZC_CD_SET(*graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    ZC_CD_SET(*graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops,
              g->ops);
    ZC_CUDNN(cudnnBackendFinalize(*graph), "cudnnBackendFinalize(operation graph)");
    return ZC_OK;
}

#define ZC_CD_MAX_CFGS 8

/* Heuristics mode A, as TransformerEngine uses, for `graph` (on `devprop`
 * when not NULL): the engine configurations into cfgs, their count. */
static zc_status_t zc_cd_heuristics(zc_cd_graph_t *g, cudnnBackendDescriptor_t graph,
                                    cudnnBackendDescriptor_t devprop,
                                    cudnnBackendDescriptor_t cfgs[ZC_CD_MAX_CFGS], int64_t *ncfg)
{
    cudnnBackendDescriptor_t heur;
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;

    *ncfg = 0;
    ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    ZC_CD_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
              &graph);
    ZC_CD_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (devprop)
        ZC_CD_SET(heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                  &devprop);
    ZC_CUDNN(cudnnBackendFinalize(heur), "cudnnBackendFinalize(engine heuristics)");
    for (int i = 0; i < ZC_CD_MAX_CFGS; i++)
        ZC_CHECK(zc_cd_new(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
    ZC_CUDNN(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, ZC_CD_MAX_CFGS, ncfg, cfgs),
             "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)");
    if (*ncfg > ZC_CD_MAX_CFGS)
        *ncfg = ZC_CD_MAX_CFGS;
    return ZC_OK;
}

/* cuDNN's own account of why nothing took the graph (its last error and
 * warnings: the op an engine could not place), or "" */
static const char *zc_cd_why(char *buf, size_t len)
{
    buf[0] = '\0';
    cudnnGetLastErrorString(buf, len);
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            *p = ' ';
    return buf;
}

zc_status_t zc_cd_graph_plan(zc_cd_graph_t *g, cudnnHandle_t handle)
{
    cudnnBackendDescriptor_t graph, cfgs[ZC_CD_MAX_CFGS];
    int64_t ncfg = 0;
    zc_status_t st = ZC_ERR_UNSUPPORTED;
    char why[1024];

    ZC_CHECK(zc_cd_opgraph(g, handle, &graph));
    ZC_CHECK(zc_cd_heuristics(g, graph, NULL, cfgs, &ncfg));
    for (int64_t i = 0; i < ncfg; i++) {
        cudnnBackendDescriptor_t plan;
        cudnnStatus_t cs;
        int64_t n = 0;

        ZC_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan),
                 "cudnnBackendCreateDescriptor(execution plan)");
        cs = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE,
                                      1, &handle);
        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendFinalize(plan);
        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                          CUDNN_TYPE_INT64, 1, &n, &g->workspace);
        if (cs == CUDNN_STATUS_SUCCESS) {
            g->plan = plan;
            zc_error_clear();
            return ZC_OK;
        }
        st = zc_cudnn_status((int)cs, "execution plan");
        cudnnBackendDestroyDescriptor(plan);
    }
    if (ncfg == 0)
        return zc_error(ZC_ERR_UNSUPPORTED, "cuDNN: no engine for this graph: %s",
                        zc_cd_why(why, sizeof(why)));
    return st;
}

/* ---- without a GPU -------------------------------------------------------- */

zc_status_t zc_cudnn_ops_check(const zc_cudnn_key_t *key, int *nops)
{
    zc_cd_graph_t *g = calloc(1, sizeof(*g));
    cudnnBackendDescriptor_t graph;
    zc_status_t st;

    if (!g)
        return zc_error(ZC_ERR_NO_MEMORY, "cuDNN backend: graph");
    st = zc_cd_graph_ops(g, key);
    if (nops)
        *nops = g->nops;
    /* the operation graph too: it links the operations through their
     * tensors' uids (cuDNN checks shapes and types edge by edge) */
    if (st == ZC_OK)
        st = zc_cd_opgraph(g, NULL, &graph);
    zc_cd_graph_destroy(g);
    return st;
}

zc_status_t zc_cudnn_engine_check(const zc_cudnn_key_t *key, const char *device_json,
                                  int *nengines)
{
    zc_cd_graph_t *g;
    cudnnBackendDescriptor_t graph, devprop, cfgs[ZC_CD_MAX_CFGS];
    int64_t ncfg = 0;
    zc_status_t st;
    char why[1024];

    *nengines = 0;
    if (cudnnGetVersion() < 90800)
        return zc_error(ZC_ERR_UNSUPPORTED, "cuDNN %zu: device descriptions need cuDNN 9.8",
                        cudnnGetVersion());
    g = calloc(1, sizeof(*g));
    if (!g)
        return zc_error(ZC_ERR_NO_MEMORY, "cuDNN backend: graph");
    st = zc_cd_graph_ops(g, key);
    if (st == ZC_OK)
        st = zc_cd_opgraph(g, NULL, &graph);
    if (st == ZC_OK)
        st = zc_cd_new(g, CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &devprop);
    if (st == ZC_OK) {
        cudnnStatus_t cs = cudnnBackendSetAttribute(devprop,
                                                    CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                                    CUDNN_TYPE_CHAR, (int64_t)strlen(device_json),
                                                    device_json);

        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendFinalize(devprop);
        if (cs != CUDNN_STATUS_SUCCESS)
            st = zc_error(ZC_ERR_INVALID_ARG, "device_json: cuDNN refused the device "
                          "description: %s", zc_cd_why(why, sizeof(why)));
    }
    if (st == ZC_OK)
        st = zc_cd_heuristics(g, graph, devprop, cfgs, &ncfg);
    if (st == ZC_OK && ncfg == 0)
        st = zc_error(ZC_ERR_UNSUPPORTED, "cuDNN: no engine for this graph on the device "
                      "described: %s", zc_cd_why(why, sizeof(why)));
    *nengines = (int)ncfg;
    zc_cd_graph_destroy(g);
    return st;
}
