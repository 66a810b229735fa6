/* The cuDNN backend of the per-block attention (kernels/cudnn): cuDNN's
 * fused flash attention (SDPA) through the C backend API (cudnn_graph.h),
 * one operation graph per shape, for the stream ring engine.
 *
 * What runs on cuDNN, and what falls back to the native CUDA kernels
 * (kernels/cuda), is decided by a pure function of the call's shape
 * (zc_cudnn_attn_decide), so that it is tested without a GPU:
 *   - forward and backward passes; the delta pass (rowsum(dO * O)) is
 *     always native, and the backward takes that delta instead of O (the
 *     ring engine's backward calls carry no O);
 *   - bfloat16 and float16 q, k, v (float32 falls back);
 *   - head dims that are multiples of 8 up to 128;
 *   - GQA/MQA (num_heads_kv divides num_heads_q);
 *   - masks: full (no mask, or causal with every key of every segment at
 *     or before its first query: a ring's full blocks), or cuDNN's
 *     top-left causal mask (query i sees key j <= i) where every segment's
 *     queries and keys start together (q_start == kv_start: a ring's
 *     diagonal blocks).  A causal segment with another offset, or a full
 *     one beside a causal one, falls back: cuDNN 9.19 ran a graph that
 *     added the offset to the row index on an H100, with wrong results;
 *   - variable lengths: one graph call over every segment with queries,
 *     packed as they are (THD), through ragged offsets (cu_seqlens * heads
 *     * head_dim) and padding masks (per-segment lengths), under maximum
 *     lengths bucketed to powers of two (at least 64).
 * The logsumexp the ring merge needs is cuDNN's softmax stats (natural
 * log, fp32), moved between cuDNN's [segment, head, row] layout and
 * libzcomm's [token, head] by two small kernels (cudnn_stats.cu).
 *
 * Results: the forward writes a block's output in the input type and its
 * stats, then merges them into out/lse (ZC_ATTN_ACCUMULATE) exactly as the
 * native kernels' partial results are merged; the backward's dq, dk, dv
 * come out of cuDNN in the input type and are added (or converted) into
 * the caller's gradients.  cuDNN's per-block gradients are thus rounded
 * to bf16/fp16 before the fp32 accumulation, as TransformerEngine's ring
 * attention does; the native kernels accumulate in fp32 throughout.
 *
 * The graph cache is keyed by zc_cudnn_key_t (direction, dtype, heads, kv
 * heads, head dim, mask, segments, bucketed lengths): the scale is a
 * by-value scalar of each call, the lengths and ragged offsets device
 * tensors.
 * A graph that cuDNN cannot build (no engine for this GPU or shape) is
 * remembered as such, and its calls fall back to the native kernels with
 * one INFO line per shape.
 *
 * Built in (HAVE_CUDNN) when configure finds cuDNN (--with-cudnn, default
 * on when found with CUDA); without it zc_cudnn_attn_launch returns
 * ZC_ERR_UNSUPPORTED and the decision and cache key functions still work.
 * On an H100 with cuDNN 9.19 (2026-11-27) the forward matched the CPU
 * kernels; cuDNN found no engine for the backward graph, whose blocks so
 * run on the native kernels (BENCHMARKS.md, "GPU path on an H100"). */
#ifndef ZC_KERNELS_CUDNN_ATTN_CUDNN_H
#define ZC_KERNELS_CUDNN_ATTN_CUDNN_H

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
#define ZC_CUDNN_MASK_CAUSAL 1 /* query i sees keys 0..i + q_start[b] - kv_start[b] */

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
} zc_cudnn_key_t;

/* The length bucket of n: the next power of two, at least
 * ZC_CUDNN_MIN_BUCKET; 0 above INT32_MAX / 2. */
int zc_cudnn_bucket(int64_t n);

/* Decide where a call of pass `pass` runs: 1 on cuDNN (*key filled, the
 * graph's shape), 0 on the native kernels (`reason`, when not NULL, gets
 * why, e.g. "head_dim 200: cuDNN takes multiples of 8 up to 128").  Pure:
 * reads only args and the host arrays it points to (cu_seqlens, starts);
 * args must have passed the kernels' argument checks. */
int zc_cudnn_attn_decide(int pass, const zc_attn_args_t *args, zc_cudnn_key_t *key,
                         char *reason, size_t len);

/* The key as bytes for the cache: a hash, and equality. */
uint64_t zc_cudnn_key_hash(const zc_cudnn_key_t *key);
int zc_cudnn_key_equal(const zc_cudnn_key_t *a, const zc_cudnn_key_t *b);
/* "fwd bf16 hq=8 hkv=2 d=64 causal seg=2 q<=128 kv<=128" into buf. */
const char *zc_cudnn_key_str(const zc_cudnn_key_t *key, char *buf, size_t len);

/* The graph cache: a growing open hash table from key to an entry, whose
 * `graph` the backend owns (NULL until built) and `state` says whether it
 * was built (1), could not be (-1: fall back), or not yet (0).  Entries
 * never move or go away before zc_cudnn_cache_clear; not locked (the
 * backend holds its lock around it). */
typedef struct {
    zc_cudnn_key_t key;
    uint64_t hash;
    int used;
    int state;
    void *graph;
} zc_cudnn_entry_t;

typedef struct {
    zc_cudnn_entry_t **slots;   /* pointers: entries stay put when it grows */
    size_t nslots;
    size_t count;
} zc_cudnn_cache_t;

/* The entry of `key`, created (state 0, graph NULL) if absent; NULL only
 * when out of memory. */
zc_cudnn_entry_t *zc_cudnn_cache_get(zc_cudnn_cache_t *cache, const zc_cudnn_key_t *key);
/* The entry of `key` or NULL, without creating it. */
zc_cudnn_entry_t *zc_cudnn_cache_find(const zc_cudnn_cache_t *cache, const zc_cudnn_key_t *key);
/* Free every entry, calling destroy(entry->graph) on the built ones. */
void zc_cudnn_cache_clear(zc_cudnn_cache_t *cache, void (*destroy)(void *graph));

/* The arguments of one call of the backend: pass 0 or 1, and the
 * pointers that pass needs (see zc_attn_fwd_stream(3)); ZC_ERR_INVALID_ARG
 * naming what is wrong. */
zc_status_t zc_cudnn_attn_check(int pass, const zc_attn_args_t *args);

/* Enqueue pass `pass` of `args` on `stream` through cuDNN when
 * zc_cudnn_attn_decide says so: ZC_OK.  Where it says native, or cuDNN
 * has no engine for the graph, *fallback is set to 1 (one INFO line per
 * shape) and nothing is enqueued: the caller runs the native kernels.
 * Any cuDNN error is a zc_status_t carrying cudnnGetErrorString's text.
 * Without cuDNN built in: ZC_ERR_UNSUPPORTED. */
zc_status_t zc_cudnn_attn_launch(int pass, const zc_attn_args_t *args, void *stream,
                                 int *fallback);

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

/* Free the cached graphs and the cuDNN handles (tests, leak checks). */
void zc_cudnn_attn_release(void);

#endif
