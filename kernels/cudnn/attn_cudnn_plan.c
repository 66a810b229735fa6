/* The host side of the cuDNN backend (attn_cudnn.h), built in every
 * configuration: the ZC_ATTN_BACKEND switch, the fallback decision, the
 * graph-cache keys and table, the argument checks.  Plain C, no cuDNN:
 * tests/test_attn_cudnn runs it without a GPU. */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/attn_check.h"
#include "kernels/cudnn/attn_cudnn.h"
#include "src/common/env.h"
#include "src/common/log.h"
#include "src/common/status.h"

/* ---- ZC_ATTN_BACKEND ---------------------------------------------------- */

const char *zc_attn_backend_name(zc_attn_backend_t backend)
{
    return backend == ZC_ATTN_BACKEND_CUDNN ? "cudnn" : "native";
}

zc_attn_backend_t zc_attn_backend_parse(const char *value, int *known)
{
    *known = 1;
    if (value == NULL || strcasecmp(value, "native") == 0)
        return ZC_ATTN_BACKEND_NATIVE;
    if (strcasecmp(value, "cudnn") == 0)
        return ZC_ATTN_BACKEND_CUDNN;
    *known = 0;
    return ZC_ATTN_BACKEND_NATIVE;
}

static atomic_int zc_attn_backend_cached = -1;

zc_attn_backend_t zc_attn_backend(void)
{
    int b = atomic_load(&zc_attn_backend_cached);

    if (b < 0) {
        const char *value = zc_env_get("ZC_ATTN_BACKEND");
        int known;

        b = (int)zc_attn_backend_parse(value, &known);
        if (!known)
            zc_log_warn("ZC_ATTN_BACKEND=%s is not native or cudnn; using native", value);
        atomic_store(&zc_attn_backend_cached, b);
    }
    return (zc_attn_backend_t)b;
}

/* ---- the decision ------------------------------------------------------- */

int zc_cudnn_bucket(int64_t n)
{
    int64_t b = ZC_CUDNN_MIN_BUCKET;

    while (b < n) {
        b *= 2;
        if (b > INT32_MAX / 2)
            return 0;
    }
    return (int)b;
}

__attribute__((format(printf, 4, 5)))
static zc_attn_route_t zc_cudnn_native(zc_attn_route_t why, char *reason, size_t len,
                                       const char *fmt, ...)
{
    if (reason && len) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(reason, len, fmt, ap);
        va_end(ap);
    }
    return why;
}

const char *zc_attn_route_name(zc_attn_route_t route)
{
    static const char *names[ZC_ATTN_NROUTES] = {
        "cuDNN", "native: chosen", "native: dtype", "native: head dim", "native: shape",
        "native: no engine", "native: cuDNN failed"};

    return route >= 0 && route < ZC_ATTN_NROUTES ? names[route] : "?";
}

/* The graph masks that give segment (qs, lq) x (ks, lk) its visibility
 * under `mask`: bit 0 the top-left band (queries and keys start together:
 * query i's diagonal is key i), bit 1 the bottom-right band (the last
 * query's diagonal is the last key: query i's is i + lk - lq), bit 2 none
 * (every query sees every key: the first row's keys end at lk, the last
 * row's start at 0).  A single query of a single key it sees is all
 * three.  0 also where a row sees no key (the first or the last: the rows
 * without keys of a band are a prefix and a suffix): cuDNN's fused softmax
 * does not promise them out = 0 and stats -inf. */
static int zc_cudnn_masks(zc_attn_mask_t mask, int64_t qs, int64_t lq, int64_t ks, int64_t lk)
{
    int64_t first_lo, first_hi, last_lo, last_hi;

    zc_attn_mask_keys(mask, 0, qs, ks, lk, &first_lo, &first_hi);
    zc_attn_mask_keys(mask, lq - 1, qs, ks, lk, &last_lo, &last_hi);
    if (first_lo >= first_hi || last_lo >= last_hi)
        return 0;
    return (qs == ks ? 1 : 0) | (qs >= ks && qs - ks == lk - lq ? 2 : 0) |
           (last_lo == 0 && first_hi == lk ? 4 : 0);
}

/* The segment count a graph is built for: the next power of two, so that
 * a new batch with a few more or fewer segments finds its graph built
 * (the extra entries get length 0). */
static int zc_cudnn_segments_bucket(int n)
{
    int b = 1;

    while (b < n)
        b *= 2;
    return b;
}

zc_attn_route_t zc_cudnn_attn_route(int pass, const zc_attn_args_t *a, zc_cudnn_key_t *key,
                                    char *reason, size_t len)
{
    int backward = pass == ZC_CUDNN_BWD;
    int acc = (a->flags & ZC_ATTN_ACCUMULATE) != 0;
    const zc_attn_mask_t mask = zc_attn_args_mask(a);
    const int banded = mask.left >= 0 || mask.right >= 0;
    int segments = 0, masks = banded ? 7 : 4, full_seg = -1, causal_seg = -1;
    int64_t max_q = 0, max_kv = 0;

    if (reason && len)
        reason[0] = '\0';
    if (pass != ZC_CUDNN_FWD && pass != ZC_CUDNN_BWD)
        return zc_cudnn_native(ZC_ATTN_NATIVE_SHAPE, reason, len, "pass %d: only the forward "
                               "and backward run on cuDNN (cuDNN computes its own delta)", pass);
    if (a->dtype != ZC_BFLOAT16 && a->dtype != ZC_FLOAT16)
        return zc_cudnn_native(ZC_ATTN_NATIVE_DTYPE, reason, len, "dtype %s: cuDNN SDPA takes "
                               "bfloat16 or float16", zc_datatype_name(a->dtype));
    if (a->head_dim % ZC_CUDNN_HEAD_DIM_STEP != 0 || a->head_dim > ZC_CUDNN_MAX_HEAD_DIM)
        return zc_cudnn_native(ZC_ATTN_NATIVE_HEAD_DIM, reason, len, "head_dim %d: cuDNN SDPA "
                               "takes multiples of %d up to %d", a->head_dim,
                               ZC_CUDNN_HEAD_DIM_STEP, ZC_CUDNN_MAX_HEAD_DIM);
    if (a->num_heads_kv <= 0 || a->num_heads_q % a->num_heads_kv != 0)
        return zc_cudnn_native(ZC_ATTN_NATIVE_SHAPE, reason, len, "num_heads_q %d, num_heads_kv "
                               "%d: not a GQA shape", a->num_heads_q, a->num_heads_kv);
    if (!backward) {
        if (acc ? a->out_dtype != ZC_FLOAT32
                : a->out_dtype != ZC_FLOAT32 && a->out_dtype != a->dtype)
            return zc_cudnn_native(ZC_ATTN_NATIVE_DTYPE, reason, len, "out_dtype %s with dtype "
                                   "%s%s", zc_datatype_name(a->out_dtype),
                                   zc_datatype_name(a->dtype),
                                   acc ? " and ZC_ATTN_ACCUMULATE (fp32 expected)" : "");
    } else {
        if (a->out == NULL || a->out_dtype != a->dtype)
            return zc_cudnn_native(ZC_ATTN_NATIVE_SHAPE, reason, len, "out: %s; the cuDNN "
                                   "backward takes the final output O in the input dtype (it "
                                   "computes rowsum(dO * O) itself)",
                                   a->out ? zc_datatype_name(a->out_dtype) : "NULL");
        if (acc ? a->grad_dtype != ZC_FLOAT32
                : a->grad_dtype != ZC_FLOAT32 && a->grad_dtype != a->dtype)
            return zc_cudnn_native(ZC_ATTN_NATIVE_DTYPE, reason, len, "grad_dtype %s with dtype "
                                   "%s%s", zc_datatype_name(a->grad_dtype),
                                   zc_datatype_name(a->dtype),
                                   acc ? " and ZC_ATTN_ACCUMULATE (fp32 expected)" : "");
    }
    for (int b = 0; b < a->batch; b++) {
        int64_t lq = a->cu_seqlens_q[b + 1] - a->cu_seqlens_q[b];
        int64_t lk = a->cu_seqlens_kv[b + 1] - a->cu_seqlens_kv[b];
        int64_t qs = a->q_start ? a->q_start[b] : 0;
        int64_t ks = a->kv_start ? a->kv_start[b] : 0;

        /* rows without keys, or keys without rows, change nothing: left
         * out of the graph (their stats stay -inf, their gradients 0) */
        if (lq == 0 || lk == 0)
            continue;
        if (banded) {
            int m = zc_cudnn_masks(mask, qs, lq, ks, lk);

            if (m == 0)
                return zc_cudnn_native(ZC_ATTN_NATIVE_SHAPE, reason, len, "segment %d: %" PRId64
                                       " queries from position %" PRId64 ", %" PRId64 " keys "
                                       "from %" PRId64 ": neither top-left nor bottom-right "
                                       "aligned, nor fully visible, or rows that see no key",
                                       b, lq, qs, lk, ks);
            if (m == 4 && full_seg < 0)
                full_seg = b;
            if (!(m & 4) && causal_seg < 0)
                causal_seg = b;
            if ((masks & m) == 0)
                return full_seg >= 0 && causal_seg >= 0
                           ? zc_cudnn_native(ZC_ATTN_NATIVE_SHAPE, reason, len, "segment %d "
                                             "sees every key and segment %d a band: one "
                                             "call takes one mask", full_seg, causal_seg)
                           : zc_cudnn_native(ZC_ATTN_NATIVE_SHAPE, reason, len, "segment %d: "
                                             "its band's alignment differs from the segments' "
                                             "before it (one top-left, one bottom-right)", b);
            masks &= m;
        }
        segments++;
        if (lq > max_q)
            max_q = lq;
        if (lk > max_kv)
            max_kv = lk;
    }
    {
        int64_t tq = a->batch ? a->cu_seqlens_q[a->batch] : 0;
        int64_t tk = a->batch ? a->cu_seqlens_kv[a->batch] : 0;
        int64_t hd = (int64_t)a->num_heads_q * a->head_dim;

        /* the ragged offsets are int32 element counts */
        if (tq * hd > INT32_MAX || tk * (int64_t)a->num_heads_kv * a->head_dim > INT32_MAX)
            return zc_cudnn_native(ZC_ATTN_NATIVE_SHAPE, reason, len, "%" PRId64 " query and %"
                                   PRId64 " key tokens: offsets past int32", tq, tk);
    }
    memset(key, 0, sizeof(*key));
    key->direction = pass;
    key->dtype = a->dtype;
    key->heads_q = a->num_heads_q;
    key->heads_kv = a->num_heads_kv;
    key->head_dim = a->head_dim;
    key->mask = masks & 4 ? ZC_CUDNN_MASK_FULL
                : masks & 1 ? ZC_CUDNN_MASK_CAUSAL
                            : ZC_CUDNN_MASK_BOTTOM_RIGHT;
    key->left = key->mask == ZC_CUDNN_MASK_FULL ? -1 : (int)mask.left;
    key->right = key->mask == ZC_CUDNN_MASK_FULL ? -1 : (int)mask.right;
    key->segments = segments ? zc_cudnn_segments_bucket(segments) : 0;
    key->max_q = segments ? zc_cudnn_bucket(max_q) : 0;
    key->max_kv = segments ? zc_cudnn_bucket(max_kv) : 0;
    if (segments && (!key->max_q || !key->max_kv))
        return zc_cudnn_native(ZC_ATTN_NATIVE_SHAPE, reason, len, "segments longer than %d "
                               "tokens", INT32_MAX / 4);
    return ZC_ATTN_ON_CUDNN;
}

/* ---- the graph cache ---------------------------------------------------- */

uint64_t zc_cudnn_key_hash(const zc_cudnn_key_t *key)
{
    const int fields[] = {key->direction, key->dtype,    key->heads_q,
                          key->heads_kv,  key->head_dim, key->mask,
                          key->segments,  key->max_q,    key->max_kv,
                          key->left,      key->right};
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the fields */

    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        for (int byte = 0; byte < 4; byte++) {
            h ^= (uint64_t)(((uint32_t)fields[i] >> (8 * byte)) & 0xffu);
            h *= 1099511628211ull;
        }
    return h;
}

int zc_cudnn_key_equal(const zc_cudnn_key_t *a, const zc_cudnn_key_t *b)
{
    return a->direction == b->direction && a->dtype == b->dtype && a->heads_q == b->heads_q &&
           a->heads_kv == b->heads_kv && a->head_dim == b->head_dim && a->mask == b->mask &&
           a->segments == b->segments && a->max_q == b->max_q && a->max_kv == b->max_kv &&
           a->left == b->left && a->right == b->right;
}

const char *zc_cudnn_key_str(const zc_cudnn_key_t *key, char *buf, size_t len)
{
    static const char *masks[] = {"full", "causal", "bottom-right"};
    char band[48] = "";

    if (key->mask != ZC_CUDNN_MASK_FULL && (key->left != -1 || key->right != 0))
        snprintf(band, sizeof band, " window=(%d,%d)", key->left, key->right);
    snprintf(buf, len, "%s %s hq=%d hkv=%d d=%d %s%s seg=%d q<=%d kv<=%d",
             key->direction == ZC_CUDNN_BWD ? "bwd" : "fwd",
             zc_datatype_name((zc_datatype_t)key->dtype), key->heads_q, key->heads_kv,
             key->head_dim, key->mask >= 0 && key->mask <= 2 ? masks[key->mask] : "?", band,
             key->segments, key->max_q, key->max_kv);
    return buf;
}

zc_cudnn_entry_t *zc_cudnn_cache_find(const zc_cudnn_cache_t *cache, const zc_cudnn_key_t *key)
{
    uint64_t h = zc_cudnn_key_hash(key);

    if (cache->nslots == 0)
        return NULL;
    for (size_t i = h & (cache->nslots - 1);; i = (i + 1) & (cache->nslots - 1)) {
        zc_cudnn_entry_t *e = cache->slots[i];

        if (!e)
            return NULL;
        if (e->hash == h && zc_cudnn_key_equal(&e->key, key))
            return e;
    }
}

static int zc_cudnn_cache_grow(zc_cudnn_cache_t *cache)
{
    size_t n = cache->nslots ? cache->nslots * 2 : 16;
    zc_cudnn_entry_t **slots = calloc(n, sizeof(*slots));

    if (!slots)
        return -1;
    for (size_t i = 0; i < cache->nslots; i++) {
        zc_cudnn_entry_t *e = cache->slots[i];
        size_t j;

        if (!e)
            continue;
        for (j = e->hash & (n - 1); slots[j]; j = (j + 1) & (n - 1))
            ;
        slots[j] = e;
    }
    free(cache->slots);
    cache->slots = slots;
    cache->nslots = n;
    return 0;
}

zc_cudnn_entry_t *zc_cudnn_cache_get(zc_cudnn_cache_t *cache, const zc_cudnn_key_t *key)
{
    zc_cudnn_entry_t *e = zc_cudnn_cache_find(cache, key);
    size_t i;

    cache->clock++;
    if (e) {
        e->last_use = cache->clock;
        return e;
    }
    if ((cache->count + 1) * 2 > cache->nslots && zc_cudnn_cache_grow(cache) != 0)
        return NULL;
    e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->key = *key;
    e->hash = zc_cudnn_key_hash(key);
    e->last_use = cache->clock;
    for (i = e->hash & (cache->nslots - 1); cache->slots[i]; i = (i + 1) & (cache->nslots - 1))
        ;
    cache->slots[i] = e;
    cache->count++;
    return e;
}

int zc_cudnn_cache_evict(zc_cudnn_cache_t *cache, void (*destroy)(void *graph))
{
    size_t mask = cache->nslots - 1, victim = 0, hole;
    int found = 0;

    for (size_t i = 0; i < cache->nslots; i++)
        if (cache->slots[i] && (!found || cache->slots[i]->last_use <
                                              cache->slots[victim]->last_use)) {
            victim = i;
            found = 1;
        }
    if (!found)
        return 0;
    if (cache->slots[victim]->graph && destroy)
        destroy(cache->slots[victim]->graph);
    free(cache->slots[victim]);
    cache->slots[victim] = NULL;
    cache->count--;
    /* linear probing: move back every entry of the run after the hole
     * that may not stay behind it */
    hole = victim;
    for (size_t i = (victim + 1) & mask; cache->slots[i]; i = (i + 1) & mask) {
        size_t home = cache->slots[i]->hash & mask;

        /* the entry at i may fill the hole when its home is not in (hole, i] */
        if ((i > hole && (home <= hole || home > i)) || (i < hole && home <= hole && home > i)) {
            cache->slots[hole] = cache->slots[i];
            cache->slots[i] = NULL;
            hole = i;
        }
    }
    return 1;
}

void zc_cudnn_cache_clear(zc_cudnn_cache_t *cache, void (*destroy)(void *graph))
{
    for (size_t i = 0; i < cache->nslots; i++) {
        zc_cudnn_entry_t *e = cache->slots[i];

        if (!e)
            continue;
        if (e->graph && destroy)
            destroy(e->graph);
        free(e);
    }
    free(cache->slots);
    cache->slots = NULL;
    cache->nslots = 0;
    cache->count = 0;
}

/* Key's graph built: into the cache, or destroyed for one already there
 * (someone else's). */
static zc_status_t zc_cudnn_cache_put(zc_cudnn_cache_t *cache, size_t max,
                                      const zc_cudnn_key_t *key, void *graph,
                                      void (*destroy)(void *graph))
{
    zc_cudnn_entry_t *e = zc_cudnn_cache_find(cache, key);

    if (e && e->state != 0) {
        if (graph && destroy)
            destroy(graph);
        return ZC_OK;
    }
    while (!e && cache->count >= max && zc_cudnn_cache_evict(cache, destroy))
        ;
    e = zc_cudnn_cache_get(cache, key);
    if (!e) {
        if (graph && destroy)
            destroy(graph);
        return zc_error(ZC_ERR_NO_MEMORY, "cuDNN backend: graph cache entry");
    }
    e->graph = graph;
    e->state = graph ? 1 : -1;
    return ZC_OK;
}

zc_status_t zc_cudnn_cache_lookup(zc_cudnn_cache_t *cache, const zc_cudnn_cache_locks_t *locks,
                                  const zc_cudnn_key_t *key, zc_cudnn_build_t build,
                                  void (*destroy)(void *graph), void *arg,
                                  zc_cudnn_entry_t **out)
{
    zc_cudnn_entry_t *e = zc_cudnn_cache_find(cache, key);
    zc_status_t st = ZC_OK;

    if (!e || e->state == 0) {
        /* built outside `lock`, so that the callers of graphs already
         * built go on; in before the next build starts, so that the next
         * caller of the key finds it */
        pthread_mutex_unlock(locks->lock);
        pthread_mutex_lock(locks->build_lock);
        pthread_mutex_lock(locks->lock);
        e = zc_cudnn_cache_find(cache, key); /* built while we waited for our turn? */
        if (!e || e->state == 0) {
            void *graph = NULL;

            pthread_mutex_unlock(locks->lock);
            st = build(arg, key, &graph);
            pthread_mutex_lock(locks->lock);
            if (st == ZC_OK)
                st = zc_cudnn_cache_put(cache, locks->max, key, graph, destroy);
        }
        pthread_mutex_unlock(locks->build_lock);
        if (st != ZC_OK)
            return st;
    }
    *out = zc_cudnn_cache_get(cache, key); /* the most recently used now */
    return ZC_OK;
}

/* ---- argument checks ---------------------------------------------------- */

zc_status_t zc_cudnn_attn_check(int pass, const zc_attn_args_t *a)
{
    int64_t tq = 0, tk = 0;
    zc_attn_mask_t mask;

    ZC_ARG_CHECK(pass == ZC_CUDNN_FWD || pass == ZC_CUDNN_BWD,
                 "pass: %d, the cuDNN backend runs the forward (0) and the backward (1)", pass);
    ZC_CHECK(zc_attn_check_call(a, &tq, &tk, &mask));
    ZC_ARG_CHECK(a->dtype == ZC_FLOAT32 || a->dtype == ZC_BFLOAT16 || a->dtype == ZC_FLOAT16,
                 "dtype: %s, must be float32, bfloat16 or float16", zc_datatype_name(a->dtype));
    if (tq == 0 && tk == 0)
        return ZC_OK;
    ZC_ARG_CHECK(a->q != NULL, "q: NULL");
    ZC_ARG_CHECK(a->k != NULL, "k: NULL");
    ZC_ARG_CHECK(a->v != NULL, "v: NULL");
    ZC_ARG_CHECK(a->lse != NULL, "lse: NULL");
    if (pass == ZC_CUDNN_FWD)
        ZC_ARG_CHECK(a->out != NULL, "out: NULL");
    if (pass == ZC_CUDNN_BWD) {
        ZC_ARG_CHECK(a->delta != NULL || a->out != NULL, "out: NULL, and no delta given");
        ZC_ARG_CHECK(a->dout != NULL, "dout: NULL");
        ZC_ARG_CHECK(a->dq != NULL, "dq: NULL");
        ZC_ARG_CHECK(a->dk != NULL, "dk: NULL");
        ZC_ARG_CHECK(a->dv != NULL, "dv: NULL");
    }
    return ZC_OK;
}

#ifndef HAVE_CUDNN
/* ---- without cuDNN ------------------------------------------------------ */

zc_status_t zc_cudnn_attn_launch(int pass, const zc_attn_args_t *args, void *stream,
                                 zc_attn_route_t *route)
{
    (void)stream;
    *route = ZC_ATTN_NATIVE_CHOSEN;
    ZC_CHECK(zc_cudnn_attn_check(pass, args));
    return zc_error(ZC_ERR_UNSUPPORTED, "cuDNN backend: libzcomm was built without cuDNN");
}

zc_status_t zc_cudnn_attn_graph_only(int pass, const zc_attn_args_t *args, void *stream)
{
    (void)pass, (void)args, (void)stream;
    return zc_error(ZC_ERR_UNSUPPORTED, "cuDNN backend: libzcomm was built without cuDNN");
}

zc_status_t zc_cudnn_status(int status, const char *what)
{
    if (status == 0)
        return ZC_OK;
    return zc_error(ZC_ERR_UNSUPPORTED, "cuDNN %s: status %d (libzcomm was built without "
                    "cuDNN)", what, status);
}

size_t zc_cudnn_version(void)
{
    return 0;
}

zc_status_t zc_cudnn_ops_check(const zc_cudnn_key_t *key, int *nops)
{
    (void)key;
    if (nops)
        *nops = 0;
    return zc_error(ZC_ERR_UNSUPPORTED, "cuDNN backend: libzcomm was built without cuDNN");
}

zc_status_t zc_cudnn_engine_check(const zc_cudnn_key_t *key, const char *device_json,
                                  int *nengines)
{
    (void)key, (void)device_json;
    *nengines = 0;
    return zc_error(ZC_ERR_UNSUPPORTED, "cuDNN backend: libzcomm was built without cuDNN");
}

void zc_cudnn_attn_release(void)
{
}
#endif
