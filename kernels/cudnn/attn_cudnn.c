/* The cuDNN backend of the per-block attention (attn_cudnn.h): the graphs
 * of attn_cudnn_graph.h, cached per device and shape, executed on the
 * caller's stream.  Built only with cuDNN (HAVE_CUDNN).
 *
 * Per device: a handle, the graph cache (bounded: ZC_CUDNN_MAX_GRAPHS,
 * the least recently used going first) and one scratch buffer kept across
 * calls (grown, never shrunk), all behind the device's own lock, so that
 * one device never holds up another.  A graph is built (heuristics, kernel
 * compilation: milliseconds to seconds) outside that lock, on a second
 * handle of the device behind a lock of its own, then put in the cache
 * (zc_cudnn_cache_lookup): the calls of graphs already built go on during
 * a build.  A plan built on one handle runs on the other: an execution
 * plan carries its device's properties, not its handle (cuDNN 9.8 even
 * builds plans without a handle, cudnn-frontend's deviceless compilation,
 * and runs them on any handle of such a device).  The scratch is ordered
 * across streams by an event:
 * a call on another stream than the previous one waits for that one's end
 * of use, so that no call allocates device memory once the largest shape
 * has run (the int32 arrays go through the pinned staging pool).
 *
 * A call writes its results into the scratch first, then folds them into
 * the caller's tensors: the forward's output (fp32) and stats are merged
 * into out/lse like a native partial; the backward's dQ comes from the
 * fp32 dQ_accum workspace, dK and dV from fp32 outputs (with GQA from the
 * io-type outputs cuDNN's fused backward insists on), added into the
 * caller's fp32 gradients.  Rows of segments left out of the graph (no
 * keys) keep stats -inf and gradients 0.  So a cuDNN failure before the
 * fold leaves nothing written, and the caller can run the block natively. */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "kernels/cuda/attn_cuda.h"
#include "kernels/cuda/cuda_mem.h"
#include "kernels/cuda/staging.h"
#include "kernels/cudnn/attn_cudnn.h"
#include "kernels/cudnn/attn_cudnn_graph.h"
#include "src/common/log.h"
#include "src/common/status.h"

/* ---- per device ------------------------------------------------------- */

#define ZC_CUDNN_MAX_DEVICES 64

typedef struct {
    pthread_mutex_t lock;
    pthread_mutex_t build_lock;
    int ready;
    cudnnHandle_t handle;
    cudnnHandle_t build_handle; /* for builds, under build_lock */
    zc_cudnn_cache_t cache;
    void *scratch;            /* device memory kept across calls */
    size_t scratch_bytes;
    void *done;               /* event: the latest call's end of use of the scratch */
    void *done_on;            /* the stream it was recorded on */
} zc_cudnn_device_t;

static pthread_mutex_t zc_cudnn_devices_lock = PTHREAD_MUTEX_INITIALIZER;
static zc_cudnn_device_t zc_cudnn_devices[ZC_CUDNN_MAX_DEVICES];

/* The current device's state, its lock taken. */
static zc_status_t zc_cudnn_device_lock(zc_cudnn_device_t **out)
{
    int dev = 0;
    zc_cudnn_device_t *d = NULL;

    ZC_CHECK(zc_cuda_status(cudaGetDevice(&dev), "cudaGetDevice"));
    if (dev < 0 || dev >= ZC_CUDNN_MAX_DEVICES)
        return zc_error(ZC_ERR_UNSUPPORTED, "cuDNN backend: device %d past the %d it serves",
                        dev, ZC_CUDNN_MAX_DEVICES);
    d = &zc_cudnn_devices[dev];
    pthread_mutex_lock(&zc_cudnn_devices_lock);
    if (!d->ready) {
        pthread_mutex_init(&d->lock, NULL);
        pthread_mutex_init(&d->build_lock, NULL);
        d->ready = 1;
    }
    pthread_mutex_unlock(&zc_cudnn_devices_lock);
    pthread_mutex_lock(&d->lock);
    if (!d->handle) {
        cudnnStatus_t cs = cudnnCreate(&d->handle);

        if (cs != CUDNN_STATUS_SUCCESS) {
            d->handle = NULL;
            pthread_mutex_unlock(&d->lock);
            return zc_cudnn_status((int)cs, "cudnnCreate");
        }
    }
    *out = d;
    return ZC_OK;
}

void zc_cudnn_attn_release(void)
{
    for (int i = 0; i < ZC_CUDNN_MAX_DEVICES; i++) {
        zc_cudnn_device_t *d = &zc_cudnn_devices[i];

        if (!d->ready)
            continue;
        pthread_mutex_lock(&d->build_lock);
        pthread_mutex_lock(&d->lock);
        zc_cudnn_cache_clear(&d->cache, zc_cd_graph_destroy);
        if (d->handle)
            cudnnDestroy(d->handle);
        if (d->build_handle)
            cudnnDestroy(d->build_handle);
        d->handle = d->build_handle = NULL;
        if (d->done)
            zc_cuda_event_sync(d->done);
        zc_cuda_free(d->scratch);
        zc_cuda_event_destroy(d->done);
        d->scratch = NULL;
        d->scratch_bytes = 0;
        d->done = d->done_on = NULL;
        pthread_mutex_unlock(&d->lock);
        pthread_mutex_unlock(&d->build_lock);
    }
}

/* Build key's graph on the device's build handle (zc_cudnn_build_t; under
 * its build lock): NULL where cuDNN cannot build it (one INFO line per
 * shape). */
static zc_status_t zc_cudnn_build(void *arg, const zc_cudnn_key_t *key, void **out)
{
    zc_cudnn_device_t *d = arg;
    zc_cd_graph_t *g;
    char shape[160];
    zc_status_t st;

    *out = NULL;
    if (!d->build_handle) {
        cudnnStatus_t cs = cudnnCreate(&d->build_handle);

        if (cs != CUDNN_STATUS_SUCCESS) {
            d->build_handle = NULL;
            return zc_cudnn_status((int)cs, "cudnnCreate");
        }
    }
    g = calloc(1, sizeof(*g));
    if (!g)
        return zc_error(ZC_ERR_NO_MEMORY, "cuDNN backend: graph");
    st = zc_cd_graph_ops(g, key);
    if (st == ZC_OK)
        st = zc_cd_graph_plan(g, d->build_handle);
    if (st != ZC_OK) {
        zc_cd_graph_destroy(g);
        zc_log_info("ZC_ATTN_BACKEND=cudnn: %s runs on the native kernels: %s",
                    zc_cudnn_key_str(key, shape, sizeof(shape)), zc_get_last_error());
        zc_error_clear();
        return ZC_OK;
    }
    zc_log_debug("cuDNN SDPA graph built: %s, workspace %lld bytes",
                 zc_cudnn_key_str(key, shape, sizeof(shape)), (long long)g->workspace);
    *out = g;
    return ZC_OK;
}

/* The built graph of key, or *graph NULL where cuDNN cannot build it.
 * Under the device's lock, which the build releases meanwhile. */
static zc_status_t zc_cudnn_graph(zc_cudnn_device_t *d, const zc_cudnn_key_t *key,
                                  zc_cd_graph_t **graph)
{
    const zc_cudnn_cache_locks_t locks = {&d->lock, &d->build_lock, ZC_CUDNN_MAX_GRAPHS};
    zc_cudnn_entry_t *e;

    *graph = NULL;
    ZC_CHECK(zc_cudnn_cache_lookup(&d->cache, &locks, key, zc_cudnn_build, zc_cd_graph_destroy,
                                   d, &e));
    *graph = e->state > 0 ? e->graph : NULL;
    return ZC_OK;
}

/* `bytes` of the device's scratch for work enqueued on `stream` (ordered
 * after the previous call's use, whatever its stream).  Under the lock. */
static zc_status_t zc_cudnn_scratch(zc_cudnn_device_t *d, size_t bytes, void *stream,
                                    void **ptr)
{
    if (!d->done)
        ZC_CHECK(zc_cuda_event_create(&d->done));
    if (bytes > d->scratch_bytes) {
        void *mem;

        /* grown rarely (a larger shape): the old one goes once no call
         * uses it any more */
        if (d->done_on)
            ZC_CHECK(zc_cuda_event_sync(d->done));
        zc_cuda_free(d->scratch);
        d->scratch = NULL;
        d->scratch_bytes = 0;
        ZC_CHECK(zc_cuda_alloc(bytes + bytes / 4, &mem));
        d->scratch = mem;
        d->scratch_bytes = bytes + bytes / 4;
        d->done_on = NULL;
    }
    if (d->done_on && d->done_on != stream)
        ZC_CHECK(zc_cuda_stream_wait_event(stream, d->done));
    *ptr = d->scratch;
    return ZC_OK;
}

/* The end of this call's use of the scratch. */
static zc_status_t zc_cudnn_scratch_done(zc_cudnn_device_t *d, void *stream)
{
    d->done_on = stream;
    return zc_cuda_event_record(d->done, stream);
}

/* ---- one call ----------------------------------------------------------- */

/* The reasons already logged (one line each), by hash. */
static uint64_t zc_cudnn_logged[64];
static int zc_cudnn_nlogged;
static pthread_mutex_t zc_cudnn_log_lock = PTHREAD_MUTEX_INITIALIZER;

static void zc_cudnn_log_once(zc_log_level_t level, const char *what, const char *reason)
{
    uint64_t h = 1469598103934665603ull;
    int said = 0;

    for (const char *p = reason; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    pthread_mutex_lock(&zc_cudnn_log_lock);
    for (int i = 0; i < zc_cudnn_nlogged; i++)
        said |= zc_cudnn_logged[i] == h;
    if (!said && zc_cudnn_nlogged < 64)
        zc_cudnn_logged[zc_cudnn_nlogged++] = h;
    else
        said = 1; /* 64 reasons said: the rest would only repeat them */
    pthread_mutex_unlock(&zc_cudnn_log_lock);
    if (!said)
        zc_log(level, "ZC_ATTN_BACKEND=cudnn: %s: %s", what, reason);
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

/* Where a call's results sit in the scratch. */
typedef struct {
    size_t o, stats, dsum, dqacc, dq, dk, dv, f32, ws, bytes;
} zc_cudnn_layout_t;

static void zc_cudnn_layout(const zc_cudnn_key_t *key, int64_t tq, int64_t tk,
                            int64_t workspace, zc_cudnn_layout_t *l)
{
    int backward = key->direction == ZC_CUDNN_BWD, kv32 = zc_cudnn_kv_grad_fp32(key);
    size_t qn = (size_t)(tq * key->heads_q * key->head_dim);
    size_t kn = (size_t)(tk * key->heads_kv * key->head_dim);
    size_t rows = (size_t)(tq * key->heads_q), es = 2, f = sizeof(float), off = 0;

#define ZC_CUDNN_TAKE(field, n) (l->field = off, off += zc_align256((size_t)(n)))
    ZC_CUDNN_TAKE(o, backward ? 0 : qn * f);
    ZC_CUDNN_TAKE(stats, backward ? 0 : rows * f);
    ZC_CUDNN_TAKE(dsum, backward ? rows * f : 0);
    ZC_CUDNN_TAKE(dqacc, backward ? qn * f : 0);
    ZC_CUDNN_TAKE(dq, backward ? qn * es : 0);
    ZC_CUDNN_TAKE(dk, backward ? kn * (kv32 ? f : es) : 0);
    ZC_CUDNN_TAKE(dv, backward ? kn * (kv32 ? f : es) : 0);
    ZC_CUDNN_TAKE(f32, backward && !kv32 ? kn * f : 0);
#undef ZC_CUDNN_TAKE
    l->ws = off;
    l->bytes = off + (size_t)workspace;
}

/* The int32 arrays of the graph's segments (the non-empty ones), padded to
 * key->segments with empty entries: ragged offsets of q, k/v and the
 * stats, then the lengths.  Returns the count of int32 written. */
static size_t zc_cudnn_segment_arrays(const zc_attn_args_t *a, const zc_cudnn_key_t *key,
                                      int32_t *host)
{
    int nb = key->segments, hq = a->num_heads_q, hk = a->num_heads_kv, d = a->head_dim;
    size_t n1 = (size_t)nb + 1;
    int32_t *rq = host, *rk = rq + n1, *rs = rk + n1, *lq = rs + n1, *lk = lq + n1;
    int32_t tq = a->cu_seqlens_q[a->batch], tk = a->cu_seqlens_kv[a->batch];
    int j = 0;

    for (int b = 0; b < a->batch; b++) {
        int32_t q0 = a->cu_seqlens_q[b], q1 = a->cu_seqlens_q[b + 1];
        int32_t k0 = a->cu_seqlens_kv[b], k1 = a->cu_seqlens_kv[b + 1];

        if (q1 == q0 || k1 == k0)
            continue;
        rq[j] = q0 * hq * d;
        rk[j] = k0 * hk * d;
        rs[j] = q0 * hq;
        lq[j] = q1 - q0;
        lk[j] = k1 - k0;
        j++;
    }
    for (; j <= nb; j++) {
        rq[j] = tq * hq * d;
        rk[j] = tk * hk * d;
        rs[j] = tq * hq;
        if (j < nb)
            lq[j] = lk[j] = 0;
    }
    return 3 * n1 + 2 * (size_t)nb;
}

#define ZC_CUDNN_LAUNCH(call, what) zc_cuda_status((call), (what))

/* What a call does with cuDNN's results: fold them into args' tensors, or
 * leave them in the scratch (the graph alone, for benchmarks). */
typedef enum { ZC_CUDNN_FOLD, ZC_CUDNN_GRAPH_ONLY } zc_cudnn_fold_t;

static zc_status_t zc_cudnn_forward(const zc_attn_args_t *a, const zc_cudnn_key_t *key,
                                    cudnnHandle_t handle, const zc_cd_graph_t *g, char *base,
                                    const zc_cudnn_layout_t *l, int64_t *uids, void **ptrs,
                                    int n, void *stream, zc_cudnn_fold_t fold,
                                    zc_attn_route_t *route)
{
    int acc = (a->flags & ZC_ATTN_ACCUMULATE) != 0;
    int64_t tq = a->cu_seqlens_q[a->batch], rows = tq * a->num_heads_q;
    int64_t qn = rows * a->head_dim;
    float *o = (float *)(base + l->o), *stats = (float *)(base + l->stats);

    (void)key;
    uids[n] = ZC_CD_O, ptrs[n++] = o;
    uids[n] = ZC_CD_STATS, ptrs[n++] = stats;
    if (fold == ZC_CUDNN_GRAPH_ONLY)
        return zc_cudnn_execute(handle, g, uids, ptrs, n, g->workspace ? base + l->ws : NULL,
                                stream);
    /* rows the graph leaves out: empty (lse -inf, output 0) */
    ZC_CHECK(ZC_CUDNN_LAUNCH(zc_cuda_fill_f32(stats, rows, -INFINITY, stream), "zk_fill"));
    if (!acc)
        ZC_CHECK(zc_cuda_zero_async(o, (size_t)qn * sizeof(float), stream));
    ZC_CHECK(zc_cudnn_execute(handle, g, uids, ptrs, n, g->workspace ? base + l->ws : NULL,
                              stream));
    *route = ZC_ATTN_ON_CUDNN;
    if (acc)
        return ZC_CUDNN_LAUNCH(zc_attn_cuda_merge(o, stats, rows, a->head_dim, (float *)a->out,
                                                  a->lse, stream), "zc_attn_cuda_merge");
    ZC_CHECK(ZC_CUDNN_LAUNCH(zc_attn_cuda_convert(o, ZC_FLOAT32, qn, a->out, a->out_dtype,
                                                  stream), "zc_attn_cuda_convert"));
    return zc_cuda_copy_async(a->lse, stats, (size_t)rows * sizeof(float), stream);
}

/* grad (grad_dtype) = or += part (part_dtype), through fp32 staging f32
 * when part is not fp32 and grad accumulates. */
static zc_status_t zc_cudnn_fold(const zc_attn_args_t *a, void *grad, const void *part,
                                 zc_datatype_t part_dtype, int64_t count, float *f32,
                                 void *stream)
{
    if (!(a->flags & ZC_ATTN_ACCUMULATE))
        return ZC_CUDNN_LAUNCH(zc_attn_cuda_convert(part, part_dtype, count, grad, a->grad_dtype,
                                                    stream), "zc_attn_cuda_convert");
    if (part_dtype != ZC_FLOAT32) {
        ZC_CHECK(ZC_CUDNN_LAUNCH(zc_attn_cuda_convert(part, part_dtype, count, f32, ZC_FLOAT32,
                                                      stream), "zc_attn_cuda_convert"));
        part = f32;
    }
    return ZC_CUDNN_LAUNCH(zc_cuda_add_f32(grad, part, count, stream), "zc_cuda_add_f32");
}

static zc_status_t zc_cudnn_backward(const zc_attn_args_t *a, const zc_cudnn_key_t *key,
                                     cudnnHandle_t handle, const zc_cd_graph_t *g, char *base,
                                     const zc_cudnn_layout_t *l, int64_t *uids, void **ptrs,
                                     int n, void *stream, zc_cudnn_fold_t fold,
                                     zc_attn_route_t *route)
{
    int64_t tq = a->cu_seqlens_q[a->batch], tk = a->cu_seqlens_kv[a->batch];
    int64_t qn = tq * a->num_heads_q * a->head_dim, kn = tk * a->num_heads_kv * a->head_dim;
    int kv32 = zc_cudnn_kv_grad_fp32(key);
    zc_datatype_t kvt = kv32 ? ZC_FLOAT32 : a->dtype;
    size_t kvbytes = (size_t)kn * zc_datatype_size(kvt);
    float *dqacc = (float *)(base + l->dqacc), *f32 = (float *)(base + l->f32);

    uids[n] = ZC_CD_O, ptrs[n++] = a->out;
    uids[n] = ZC_CD_STATS, ptrs[n++] = a->lse; /* the final lse, [token, head] */
    uids[n] = ZC_CD_DO, ptrs[n++] = (void *)a->dout;
    uids[n] = ZC_CD_DSUM, ptrs[n++] = base + l->dsum;
    uids[n] = ZC_CD_DQ_ACCUM, ptrs[n++] = dqacc;
    uids[n] = ZC_CD_DQ, ptrs[n++] = base + l->dq;
    uids[n] = ZC_CD_DK, ptrs[n++] = base + l->dk;
    uids[n] = ZC_CD_DV, ptrs[n++] = base + l->dv;
    if (fold == ZC_CUDNN_GRAPH_ONLY)
        return zc_cudnn_execute(handle, g, uids, ptrs, n, g->workspace ? base + l->ws : NULL,
                                stream);
    /* keys and rows the graph leaves out add 0; dQ_accum starts at 0 */
    ZC_CHECK(zc_cuda_zero_async(dqacc, (size_t)qn * sizeof(float), stream));
    ZC_CHECK(zc_cuda_zero_async(base + l->dk, kvbytes, stream));
    ZC_CHECK(zc_cuda_zero_async(base + l->dv, kvbytes, stream));
    ZC_CHECK(zc_cudnn_execute(handle, g, uids, ptrs, n, g->workspace ? base + l->ws : NULL,
                              stream));
    *route = ZC_ATTN_ON_CUDNN;
    ZC_CHECK(zc_cudnn_fold(a, a->dq, dqacc, ZC_FLOAT32, qn, NULL, stream));
    ZC_CHECK(zc_cudnn_fold(a, a->dk, base + l->dk, kvt, kn, f32, stream));
    return zc_cudnn_fold(a, a->dv, base + l->dv, kvt, kn, f32, stream);
}

/* One call on cuDNN; *route is ZC_ATTN_ON_CUDNN once cuDNN ran (a later
 * error leaves the call half done), ZC_ATTN_NATIVE_FAILED before. */
static zc_status_t zc_cudnn_run(int pass, const zc_attn_args_t *a, const zc_cudnn_key_t *key,
                                zc_cudnn_device_t *d, const zc_cd_graph_t *g, void *stream,
                                zc_cudnn_fold_t fold, zc_attn_route_t *route)
{
    int64_t tq = a->cu_seqlens_q[a->batch], tk = a->cu_seqlens_kv[a->batch];
    size_t n1 = (size_t)key->segments + 1, nint = 5 * n1;
    float scale = a->scale, neg = -INFINITY, one = 1.0f;
    int32_t right = key->right, left_plus_1 = key->left + 1; /* the graph's band bounds */
    zc_cuda_staging_slot_t *slot;
    zc_cudnn_layout_t l;
    int64_t uids[24];
    void *ptrs[24];
    char *base;
    int32_t *dints;
    int n = 0;
    zc_status_t st;

    *route = ZC_ATTN_NATIVE_FAILED;
    zc_cudnn_layout(key, tq, tk, g->workspace, &l);
    ZC_CHECK(zc_cuda_staging_acquire(nint * sizeof(int32_t), &slot));
    zc_cudnn_segment_arrays(a, key, zc_cuda_staging_host(slot));
    st = zc_cudnn_scratch(d, l.bytes, stream, (void **)&base);
    if (st == ZC_OK)
        st = zc_cuda_staging_stage(slot, nint * sizeof(int32_t), stream);
    if (st != ZC_OK)
        return zc_cuda_staging_finish(slot, stream, st);
    dints = zc_cuda_staging_dev(slot);
#define ZC_CUDNN_BIND(uid, ptr) (uids[n] = (uid), ptrs[n] = (void *)(ptr), n++)
    ZC_CUDNN_BIND(ZC_CD_Q, a->q);
    ZC_CUDNN_BIND(ZC_CD_KT, a->k);
    ZC_CUDNN_BIND(ZC_CD_V, a->v);
    ZC_CUDNN_BIND(ZC_CD_SCALE, &scale);
    ZC_CUDNN_BIND(ZC_CD_NEG, &neg);
    ZC_CUDNN_BIND(ZC_CD_ONE, &one);
    if (zc_cudnn_key_right_bound(key))
        ZC_CUDNN_BIND(ZC_CD_RIGHT, &right);
    if (zc_cudnn_key_left_bound(key))
        ZC_CUDNN_BIND(ZC_CD_LEFT, &left_plus_1);
    ZC_CUDNN_BIND(ZC_CD_RAG_Q, dints);
    ZC_CUDNN_BIND(ZC_CD_RAG_KV, dints + n1);
    ZC_CUDNN_BIND(ZC_CD_RAG_STATS, dints + 2 * n1);
    ZC_CUDNN_BIND(ZC_CD_SEQ_Q, dints + 3 * n1);
    ZC_CUDNN_BIND(ZC_CD_SEQ_KV, dints + 3 * n1 + (n1 - 1));
#undef ZC_CUDNN_BIND
    st = pass == ZC_CUDNN_FWD ? zc_cudnn_forward(a, key, d->handle, g, base, &l, uids, ptrs, n,
                                                 stream, fold, route)
                              : zc_cudnn_backward(a, key, d->handle, g, base, &l, uids, ptrs,
                                                  n, stream, fold, route);
    /* after everything that reads the slot and the scratch is enqueued,
     * error paths too */
    if (st == ZC_OK)
        st = zc_cudnn_scratch_done(d, stream);
    else
        zc_cudnn_scratch_done(d, stream);
    return zc_cuda_staging_finish(slot, stream, st);
}

/* What this cuDNN at run time cannot do with key's graph (NULL: nothing):
 * the version gates of cudnn-frontend's support checks. */
static const char *zc_cudnn_version_gap(const zc_cudnn_key_t *key)
{
    size_t v = cudnnGetVersion();

    if (v < 90000)
        return "cuDNN before 9.0";
    if (key->mask == ZC_CUDNN_MASK_BOTTOM_RIGHT && v < 90600)
        return "a bottom-right causal mask with packed segments needs cuDNN 9.6";
    if (key->mask != ZC_CUDNN_MASK_FULL) {
        const int causal = key->right == 0; /* the band's right side is the diagonal */

        if (key->left >= 0 && v < 90200)
            return "a sliding window (a left bound) needs cuDNN 9.2";
        if (key->right > 0 && v < 90600)
            return "a window right of the diagonal needs cuDNN 9.6";
        if (!causal && v < 91002)
            return "a band that is not causal needs cuDNN 9.10.2";
        if (!causal && key->left >= 0 && key->max_kv > 1024 && v == 91400)
            return "cuDNN 9.14.0 has a known bug with non-causal sliding windows over more than "
                   "1024 keys";
    }
    if (key->direction == ZC_CUDNN_BWD && v >= 91000 && v < 91002)
        return "cuDNN 9.10.0 and 9.10.1 have a known backward bug";
    return NULL;
}

/* pass of args on cuDNN, its results folded or not. */
static zc_status_t zc_cudnn_call(int pass, const zc_attn_args_t *args, void *stream,
                                 zc_cudnn_fold_t fold, zc_attn_route_t *route)
{
    zc_cudnn_key_t key;
    zc_cudnn_device_t *d = NULL;
    zc_cd_graph_t *g = NULL;
    const char *gap;
    char reason[256];
    zc_status_t st;

    *route = ZC_ATTN_NATIVE_CHOSEN;
    ZC_CHECK(zc_cudnn_attn_check(pass, args));
    *route = zc_cudnn_attn_route(pass, args, &key, reason, sizeof(reason));
    if (*route == ZC_ATTN_ON_CUDNN && key.segments == 0) {
        /* nothing for cuDNN: the native kernels write the empty outputs */
        *route = ZC_ATTN_NATIVE_SHAPE;
        snprintf(reason, sizeof(reason), "no segment with queries and keys");
    }
    if (*route == ZC_ATTN_ON_CUDNN && (gap = zc_cudnn_version_gap(&key)) != NULL) {
        *route = ZC_ATTN_NATIVE_NO_ENGINE;
        snprintf(reason, sizeof(reason), "%s", gap);
    }
    if (*route != ZC_ATTN_ON_CUDNN) {
        if (fold == ZC_CUDNN_GRAPH_ONLY)
            return zc_error(ZC_ERR_UNSUPPORTED, "cuDNN backend: %s", reason);
        zc_cudnn_log_once(ZC_LOG_INFO, "falling back to the native kernels", reason);
        return ZC_OK;
    }
    *route = ZC_ATTN_NATIVE_FAILED;
    ZC_CHECK(zc_cudnn_device_lock(&d));
    st = zc_cudnn_graph(d, &key, &g);
    if (st == ZC_OK && !g) {
        *route = ZC_ATTN_NATIVE_NO_ENGINE;
        if (fold == ZC_CUDNN_GRAPH_ONLY)
            st = zc_error(ZC_ERR_UNSUPPORTED, "cuDNN backend: no engine for the graph");
    } else if (st == ZC_OK) {
        st = zc_cudnn_run(pass, args, &key, d, g, stream, fold, route);
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

zc_status_t zc_cudnn_attn_launch(int pass, const zc_attn_args_t *args, void *stream,
                                 zc_attn_route_t *route)
{
    return zc_cudnn_call(pass, args, stream, ZC_CUDNN_FOLD, route);
}

zc_status_t zc_cudnn_attn_graph_only(int pass, const zc_attn_args_t *args, void *stream)
{
    zc_attn_route_t route;

    return zc_cudnn_call(pass, args, stream, ZC_CUDNN_GRAPH_ONLY, &route);
}
