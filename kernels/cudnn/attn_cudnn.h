/* The cuDNN backend of the per-block attention (kernels/cudnn): cuDNN's
 * fused flash attention through the C backend API (cudnn_graph.h), one
 * operation graph per shape (attn_cudnn_graph.h says why the C API and
 * not cudnn-frontend), for the stream ring engine.
 *
 * What runs on cuDNN, and what on the native CUDA kernels (kernels/cuda),
 * is decided by a pure function of the call's shape (zc_cudnn_attn_route),
 * so that it is tested without a GPU:
 *   - forward and backward passes; the backward takes the final output O
 *     and LSE of its rows and computes rowsum(dO * O) in the graph;
 *   - bfloat16 and float16 q, k, v (float32 runs natively);
 *   - head dims that are multiples of 8 up to 128;
 *   - GQA/MQA (num_heads_kv divides num_heads_q);
 *   - one mask per call: full (no mask, or a mask under which every query
 *     of every segment sees every key), or a band about the diagonal,
 *     top-left aligned (every segment's queries and keys start together) or
 *     bottom-right aligned (every segment's q_start - kv_start equals its
 *     key length minus its query length, LLaMA CP's blocks): causal is the
 *     band (-1, 0), a sliding window (left, 0), a local window (left,
 *     right), flash-attention's window_size, as cudnn-frontend's SDPA
 *     expresses them (a right bound, then a left bound, each a pointwise
 *     comparison of row and column indices and a select of -inf), where
 *     the cuDNN at run time takes them (zc_cudnn_version_gap); the ring
 *     engine issues only such calls (src/coll/ring_attn/compute.c);
 *   - variable lengths: one graph call over every segment with queries and
 *     keys, packed as they are (THD), through ragged offsets (first token
 *     times heads times head dim) and per-segment lengths, under maximum
 *     lengths bucketed to powers of two (at least 64) and a segment count
 *     bucketed to a power of two, so that a new batch finds its graph.
 * The logsumexp the ring merge needs is cuDNN's softmax stats (natural
 * log, fp32), read and written in libzcomm's own [token, head] layout
 * through ragged offsets of its own.
 *
 * Results (errors against the CPU reference in zc_ring_attn_fwd_stream(3)):
 * the forward writes the block's output in fp32 and its stats, merged into
 * out/lse (ZC_ATTN_ACCUMULATE) as the native kernels' partial results are;
 * the backward's dQ comes from cuDNN's fp32 dQ_accum, dK and dV in fp32
 * (with GQA in the input type: cuDNN sums a group's heads in it), added
 * into the caller's fp32 gradients.
 *
 * The graph cache is keyed by zc_cudnn_key_t (direction, dtype, heads, kv
 * heads, head dim, mask, bucketed segments and lengths): the scale is a
 * by-value scalar of each call, the lengths and ragged offsets device
 * tensors.  A graph that cuDNN cannot build (no engine for this GPU or
 * shape) is remembered as such, and its calls fall back to the native
 * kernels with one INFO line per shape.
 *
 * Built in (HAVE_CUDNN) when configure finds cuDNN (--with-cudnn, default
 * on when found with CUDA); without it zc_cudnn_attn_launch returns
 * ZC_ERR_UNSUPPORTED and the decision and cache key functions still work. */
#ifndef ZC_KERNELS_CUDNN_ATTN_CUDNN_H
#define ZC_KERNELS_CUDNN_ATTN_CUDNN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "zcomm.h"

/* The per-block attention backend of the stream engine (ZC_ATTN_BACKEND). */
typedef enum { ZC_ATTN_BACKEND_NATIVE = 0, ZC_ATTN_BACKEND_CUDNN = 1 } zc_attn_backend_t;

/* ZC_ATTN_BACKEND, read once per process ("native" when unset; an unknown
 * word warns once and means native). */
zc_attn_backend_t zc_attn_backend(void);
/* The same from a value (NULL: the default); *known is 0 for a word that
 * is neither native nor cudnn. */
zc_attn_backend_t zc_attn_backend_parse(const char *value, int *known);
const char *zc_attn_backend_name(zc_attn_backend_t backend);

/* Passes, numbered as zc_attn_gpu_launch's. */
#define ZC_CUDNN_FWD 0
#define ZC_CUDNN_BWD 1
#define ZC_CUDNN_DELTA 2

/* zc_cudnn_key_t.mask */
#define ZC_CUDNN_MASK_FULL 0
#define ZC_CUDNN_MASK_CAUSAL 1       /* top-left band: query i's diagonal is key i */
#define ZC_CUDNN_MASK_BOTTOM_RIGHT 2 /* its diagonal is key i + seq_len_kv - seq_len_q */

/* Largest head dim, and its granularity, cuDNN's SDPA takes here. */
#define ZC_CUDNN_MAX_HEAD_DIM 128
#define ZC_CUDNN_HEAD_DIM_STEP 8
/* Smallest length bucket. */
#define ZC_CUDNN_MIN_BUCKET 64

/* One graph's shape: every field is part of the key. */
typedef struct {
    int direction;   /* ZC_CUDNN_FWD or ZC_CUDNN_BWD */
    int dtype;       /* ZC_BFLOAT16 or ZC_FLOAT16 */
    int heads_q;
    int heads_kv;
    int head_dim;
    int mask;        /* ZC_CUDNN_MASK_* */
    int segments;    /* segments with queries: the graph's batch */
    int max_q;       /* bucketed maximum query length of a segment */
    int max_kv;      /* bucketed maximum key length */
    int left, right; /* the band of a CAUSAL or BOTTOM_RIGHT mask: keys before and after the
                        diagonal a query sees, -1 unbounded (causal: -1, 0); FULL: -1, -1 */
} zc_cudnn_key_t;

/* Whether key's graph bounds its band right of the diagonal (right > 0),
 * and on the left: each bound is a by-value int32 of the graph. */
static inline int zc_cudnn_key_right_bound(const zc_cudnn_key_t *key)
{
    return key->mask != ZC_CUDNN_MASK_FULL && key->right > 0;
}

static inline int zc_cudnn_key_left_bound(const zc_cudnn_key_t *key)
{
    return key->mask != ZC_CUDNN_MASK_FULL && key->left >= 0;
}

/* The dtype of the graph's dK and dV: fp32 without GQA; with GQA the
 * io type, which cuDNN's fused backward wants for the sum over a group. */
static inline int zc_cudnn_kv_grad_fp32(const zc_cudnn_key_t *key)
{
    return key->heads_q == key->heads_kv;
}

/* The length bucket of n: the next power of two, at least
 * ZC_CUDNN_MIN_BUCKET; 0 above INT32_MAX / 2. */
int zc_cudnn_bucket(int64_t n);

/* Where a block of attention runs, and why not on cuDNN
 * (zc_ring_attn_stats_t counts them). */
typedef enum {
    ZC_ATTN_ON_CUDNN = 0,
    ZC_ATTN_NATIVE_CHOSEN,    /* ZC_ATTN_BACKEND=native, no cuDNN built in, the host engine */
    ZC_ATTN_NATIVE_DTYPE,     /* float32 inputs, or an out/grad dtype cuDNN does not write */
    ZC_ATTN_NATIVE_HEAD_DIM,  /* not a multiple of 8 up to 128 */
    ZC_ATTN_NATIVE_SHAPE,     /* heads, a mask no graph expresses, int32 offsets, no O */
    ZC_ATTN_NATIVE_NO_ENGINE, /* cuDNN has no engine for the graph (or this cuDNN version) */
    ZC_ATTN_NATIVE_FAILED,    /* cuDNN failed when enqueued: the block re-ran natively */
    ZC_ATTN_NROUTES
} zc_attn_route_t;

const char *zc_attn_route_name(zc_attn_route_t route);

/* Where a call of pass `pass` runs: ZC_ATTN_ON_CUDNN (*key filled, the
 * graph's shape) or why not (`reason`, when not NULL, gets the detail,
 * e.g. "head_dim 200: cuDNN takes multiples of 8 up to 128").  Segments
 * without queries or without keys are left out of the graph; the others
 * of a call whose mask is not full must all be top-left aligned (queries
 * and keys start together) or all bottom-right aligned (q_start - kv_start
 * = kv length - q length), or all see every key, and have no row that sees
 * no key.  Pure: reads only args and the host arrays it points to; args
 * must have passed the kernels' checks. */
zc_attn_route_t zc_cudnn_attn_route(int pass, const zc_attn_args_t *args, zc_cudnn_key_t *key,
                                    char *reason, size_t len);

/* The key as bytes for the cache: a hash, and equality. */
uint64_t zc_cudnn_key_hash(const zc_cudnn_key_t *key);
int zc_cudnn_key_equal(const zc_cudnn_key_t *a, const zc_cudnn_key_t *b);
/* "fwd bf16 hq=8 hkv=2 d=64 causal seg=2 q<=128 kv<=128" into buf. */
const char *zc_cudnn_key_str(const zc_cudnn_key_t *key, char *buf, size_t len);

/* The graph cache: an open hash table from key to an entry, whose `graph`
 * the backend owns (NULL until built) and `state` says whether it was
 * built (1), could not be (-1: fall back), or not yet (0).  Entries never
 * move; one goes away only through zc_cudnn_cache_evict (the least
 * recently used, to keep the cache bounded) or zc_cudnn_cache_clear.  Not
 * locked (the backend holds its lock around it; zc_cudnn_cache_lookup
 * releases it while it builds). */
#define ZC_CUDNN_MAX_GRAPHS 64  /* per device; past it the least recently used goes */

typedef struct {
    zc_cudnn_key_t key;
    uint64_t hash;
    uint64_t last_use;          /* the cache's clock at the latest get */
    int state;
    void *graph;
} zc_cudnn_entry_t;

typedef struct {
    zc_cudnn_entry_t **slots;   /* pointers: entries stay put when it grows */
    size_t nslots;
    size_t count;
    uint64_t clock;             /* counts gets */
} zc_cudnn_cache_t;

/* The entry of `key`, created (state 0, graph NULL) if absent; NULL only
 * when out of memory. */
zc_cudnn_entry_t *zc_cudnn_cache_get(zc_cudnn_cache_t *cache, const zc_cudnn_key_t *key);
/* The entry of `key` or NULL, without creating it. */
zc_cudnn_entry_t *zc_cudnn_cache_find(const zc_cudnn_cache_t *cache, const zc_cudnn_key_t *key);
/* Remove the least recently used entry (none when empty), calling
 * destroy(entry->graph) when it was built; returns 1 if one went. */
int zc_cudnn_cache_evict(zc_cudnn_cache_t *cache, void (*destroy)(void *graph));
/* Free every entry, calling destroy(entry->graph) on the built ones. */
void zc_cudnn_cache_clear(zc_cudnn_cache_t *cache, void (*destroy)(void *graph));

/* The locks of a cache shared by threads: `lock` guards the cache (and
 * what its callers do with an entry's graph), `build_lock` lets one build
 * run at a time; `max` bounds the entries. */
typedef struct {
    pthread_mutex_t *lock;
    pthread_mutex_t *build_lock;
    size_t max;
} zc_cudnn_cache_locks_t;

/* Build key's graph into *graph (NULL: it cannot be built, its calls fall
 * back), or an error (nothing of it kept). */
typedef zc_status_t (*zc_cudnn_build_t)(void *arg, const zc_cudnn_key_t *key, void **graph);

/* The entry of `key`, built when the cache has none.  Called with
 * locks->lock held, and returns with it held.  A build runs with `lock`
 * released and `build_lock` held: callers of graphs already built go on
 * meanwhile, and a caller of the same new key waits for the build and
 * takes its result.  The graph built goes in unless one is there already
 * (then it is destroyed), past `max` entries the least recently used going
 * first; the entry returned is the most recently used.  When build fails,
 * nothing goes in and its status is returned. */
zc_status_t zc_cudnn_cache_lookup(zc_cudnn_cache_t *cache, const zc_cudnn_cache_locks_t *locks,
                                  const zc_cudnn_key_t *key, zc_cudnn_build_t build,
                                  void (*destroy)(void *graph), void *arg,
                                  zc_cudnn_entry_t **entry);

/* The arguments of one call of the backend: pass 0 or 1, and the
 * pointers that pass needs (see zc_attn_fwd_stream(3)); ZC_ERR_INVALID_ARG
 * naming what is wrong. */
zc_status_t zc_cudnn_attn_check(int pass, const zc_attn_args_t *args);

/* Enqueue pass `pass` of `args` on `stream` through cuDNN: ZC_OK and
 * *route ZC_ATTN_ON_CUDNN.  Where zc_cudnn_attn_route says native, or
 * cuDNN has no engine for the graph, *route says why (one INFO line per
 * reason) and nothing is enqueued: the caller runs the native kernels.
 * A cuDNN failure (building the plan or enqueueing it) is a zc_status_t
 * carrying cuDNN's text with *route ZC_ATTN_NATIVE_FAILED: nothing of the
 * call was written, so that the caller may run the native kernels
 * instead.  Any other error (*route ZC_ATTN_ON_CUDNN) left the call half
 * done.  Without cuDNN built in: ZC_ERR_UNSUPPORTED. */
zc_status_t zc_cudnn_attn_launch(int pass, const zc_attn_args_t *args, void *stream,
                                 zc_attn_route_t *route);

/* The cuDNN graph of pass `pass` of args alone, on `stream`: its results
 * stay in the backend's scratch (nothing of args is written but what the
 * graph reads), nothing merged or added.  For benchmarks: one cuDNN SDPA
 * call, the baseline a block on cuDNN is measured against (zc_attn_perf
 * -G).  ZC_ERR_UNSUPPORTED naming the reason where the backend would not
 * run args on cuDNN, or without cuDNN. */
zc_status_t zc_cudnn_attn_graph_only(int pass, const zc_attn_args_t *args, void *stream);

/* A cuDNN status (cudnnStatus_t as int) as a zc_status_t, with the
 * error's text in the last error: "cuDNN <what>: <cudnnGetErrorString>".
 * ZC_OK for 0.  Not-supported statuses are ZC_ERR_UNSUPPORTED, allocation
 * failures ZC_ERR_NO_MEMORY, bad parameters and internal errors
 * ZC_ERR_INTERNAL, execution failures ZC_ERR_SYSTEM.  Without cuDNN built
 * in: ZC_ERR_UNSUPPORTED for every non-zero status. */
zc_status_t zc_cudnn_status(int status, const char *what);

/* cuDNN's version at run time (cudnnGetVersion), 0 without cuDNN. */
size_t zc_cudnn_version(void);

/* Build and finalize the tensors, operations and operation graph of
 * key's graph without a handle or a device (no engine: that needs a GPU),
 * and free them: ZC_OK when cuDNN accepts every descriptor and links every
 * operation to its inputs; *nops (may be NULL) gets the operation count.
 * For tests.  Without cuDNN: ZC_ERR_UNSUPPORTED. */
zc_status_t zc_cudnn_ops_check(const zc_cudnn_key_t *key, int *nops);

/* Ask cuDNN's engine heuristics, without a GPU, whether an engine takes
 * key's graph on the GPU that `device_json` describes (cuDNN's device
 * properties JSON, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION; cuDNN 9.8+):
 * ZC_OK and *nengines > 0 when one does; ZC_ERR_UNSUPPORTED with cuDNN's
 * reasons (the op each engine could not place) when none does.  The
 * runtime-compiled engines load libcuda.so.1: without a driver, the
 * caller loads the CUDA toolkit's stub first (tests/test_attn_cudnn).
 * Without cuDNN: ZC_ERR_UNSUPPORTED. */
zc_status_t zc_cudnn_engine_check(const zc_cudnn_key_t *key, const char *device_json,
                                  int *nengines);

/* Free the cached graphs and the cuDNN handles (tests, leak checks). */
void zc_cudnn_attn_release(void);

#endif
