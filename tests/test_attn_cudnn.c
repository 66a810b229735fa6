/* The cuDNN attention backend (kernels/cudnn/attn_cudnn.h) where it can be
 * tested without a GPU: the ZC_ATTN_BACKEND switch, the routing decision
 * (shape -> cudnn or native, with the reason), the graph-cache keys and
 * table (its bound), its lookup by threads (a build does not hold up the
 * callers of graphs already built), the argument checks, the cuDNN status conversion and
 * the feature bit, and every kind of graph as cuDNN takes it: tensors,
 * operations and the operation graph finalized without a handle, and
 * cuDNN's engine heuristics asked, without a GPU, whether an engine takes
 * the graph on an H100 (tests/fixtures/cudnn/h100-sxm.json, with the CUDA
 * toolkit's stub driver where there is no driver): every direction, dtype,
 * GQA or not, head dim 64 and 128 and mask (full, top-left, bottom-right),
 * and the window bands (a sliding window top-left and bottom-right, a local
 * window, a window of 1, a left or a right bound alone), forward and
 * backward.  Windows route as causal does (by alignment), and fall back
 * where a row would see no key.  With a CUDA device and cuDNN built in, the
 * forward and backward also run against the CPU kernels (bf16, GQA, full,
 * diagonal and bottom-right blocks, segments without keys, varlen,
 * windows), and blocks cuDNN cannot express are checked to fall back
 * untouched; without them those cases SKIP with the reason.  The engine
 * checks see a graph's pattern, not its values: building the left bound
 * with >= instead of >, or applying it before the right bound, still finds
 * an engine (tried); the values are the GPU cases' to check. */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cudnn/attn_cudnn.h"
#include "tap.h"
#include "zcomm.h"
#ifdef HAVE_CUDNN
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#endif

static int has(const char *needle)
{
    return strstr(zc_get_last_error(), needle) != NULL;
}

/* ---- a shape ------------------------------------------------------------- */

typedef struct {
    zc_attn_args_t a;
    int32_t cu_q[5], cu_kv[5], q_start[4], kv_start[4];
    float delta_dummy;
} shape_t;

/* Two segments of 100 and 128 tokens, bf16, 8 query heads over 2 kv
 * heads, head dim 64, causal on the diagonal, a ring's forward block. */
static void shape_init(shape_t *s)
{
#ifdef ZC_ATTN_ARGS_INITIALIZER
    static const zc_attn_args_t init = ZC_ATTN_ARGS_INITIALIZER;
#else
    static const zc_attn_args_t init;
#endif
    static char dummy[16];

    memset(s, 0, sizeof(*s));
    s->a = init;
    s->a.batch = 2;
    s->a.num_heads_q = 8;
    s->a.num_heads_kv = 2;
    s->a.head_dim = 64;
    s->cu_q[1] = s->cu_kv[1] = 100;
    s->cu_q[2] = s->cu_kv[2] = 228;
    s->q_start[0] = s->kv_start[0] = 0;
    s->q_start[1] = s->kv_start[1] = 4096;
    s->a.cu_seqlens_q = s->cu_q;
    s->a.cu_seqlens_kv = s->cu_kv;
    s->a.q_start = s->q_start;
    s->a.kv_start = s->kv_start;
    s->a.causal = 1;
    s->a.scale = 0.125f;
    s->a.flags = ZC_ATTN_ACCUMULATE;
    s->a.dtype = ZC_BFLOAT16;
    s->a.out_dtype = ZC_FLOAT32;
    s->a.grad_dtype = ZC_FLOAT32;
    /* host stand-ins: the decision and the checks never read them */
    s->a.q = s->a.k = s->a.v = dummy;
    s->a.out = dummy;
    s->a.lse = &s->delta_dummy;
    s->a.dout = dummy;
    s->a.delta = &s->delta_dummy;
    s->a.dq = s->a.dk = s->a.dv = dummy;
}

/* The shape as LLaMA CP's blocks: bottom-right aligned, queries 0..59 of
 * keys 0..99 at offset 40, queries 0..99 of 128 keys at offset 28. */
static void shape_bottom_right(shape_t *s)
{
    shape_init(s);
    s->cu_q[1] = 60;
    s->cu_q[2] = 160;
    s->q_start[0] = 40;
    s->q_start[1] = 4096 + 28;
}

static zc_attn_route_t decide(int pass, const shape_t *s, zc_cudnn_key_t *key, char *reason)
{
    return zc_cudnn_attn_route(pass, &s->a, key, reason, 256);
}

/* Native for `why`, with a reason naming `needle`. */
static void native(int pass, const shape_t *s, zc_attn_route_t why, const char *needle,
                   const char *what)
{
    zc_cudnn_key_t key;
    char reason[256];
    zc_attn_route_t r = decide(pass, s, &key, reason);

    if (!ok(r == why && strstr(reason, needle) != NULL, "%s: %s, reason names '%s'", what,
            zc_attn_route_name(why), needle))
        diag("decided %s, reason '%s'", zc_attn_route_name(r), reason);
}

static int cudnn(int pass, const shape_t *s, zc_cudnn_key_t *key, const char *what)
{
    char reason[256];
    zc_attn_route_t r = decide(pass, s, key, reason);

    if (!ok(r == ZC_ATTN_ON_CUDNN && reason[0] == '\0', "%s: cuDNN", what))
        diag("reason: %s", reason);
    return r == ZC_ATTN_ON_CUDNN;
}

/* ---- the switch ---------------------------------------------------------- */

static void test_switch(void)
{
    int known;
    size_t n;
    const zc_env_var_t *vars = zc_env_vars(&n);
    const zc_env_var_t *v = NULL;

    ok(zc_attn_backend_parse(NULL, &known) == ZC_ATTN_BACKEND_NATIVE && known,
       "ZC_ATTN_BACKEND unset: native");
    ok(zc_attn_backend_parse("native", &known) == ZC_ATTN_BACKEND_NATIVE && known,
       "ZC_ATTN_BACKEND=native");
    ok(zc_attn_backend_parse("cudnn", &known) == ZC_ATTN_BACKEND_CUDNN && known,
       "ZC_ATTN_BACKEND=cudnn");
    ok(zc_attn_backend_parse("CuDNN", &known) == ZC_ATTN_BACKEND_CUDNN && known,
       "ZC_ATTN_BACKEND=CuDNN: any case");
    ok(zc_attn_backend_parse("flash", &known) == ZC_ATTN_BACKEND_NATIVE && !known,
       "ZC_ATTN_BACKEND=flash: unknown, native");
    ok(strcmp(zc_attn_backend_name(ZC_ATTN_BACKEND_CUDNN), "cudnn") == 0 &&
           strcmp(zc_attn_backend_name(ZC_ATTN_BACKEND_NATIVE), "native") == 0,
       "backend names");
    setenv("ZC_ATTN_BACKEND", "cudnn", 1);
    ok(zc_attn_backend() == ZC_ATTN_BACKEND_CUDNN, "zc_attn_backend reads ZC_ATTN_BACKEND");
    for (size_t i = 0; i < n; i++)
        if (strcmp(vars[i].name, "ZC_ATTN_BACKEND") == 0)
            v = &vars[i];
    ok(v && v->default_value && strcmp(v->default_value, "native") == 0,
       "ZC_ATTN_BACKEND in the ZC_* table (zc_info -e), default native");
#ifdef HAVE_CUDNN
    ok((zc_get_features() & ZC_FEATURE_CUDNN) != 0, "ZC_FEATURE_CUDNN set: cuDNN backend built");
    ok(zc_cudnn_version() >= 90000, "cuDNN 9 at run time (%zu)", zc_cudnn_version());
#else
    ok((zc_get_features() & ZC_FEATURE_CUDNN) == 0, "ZC_FEATURE_CUDNN clear: no cuDNN backend");
    ok(zc_cudnn_version() == 0, "no cuDNN version without cuDNN");
#endif
}

/* ---- the decision -------------------------------------------------------- */

static void test_decide(void)
{
    shape_t s;
    zc_cudnn_key_t key;

    ok(zc_cudnn_bucket(1) == 64 && zc_cudnn_bucket(64) == 64 && zc_cudnn_bucket(65) == 128 &&
           zc_cudnn_bucket(1000) == 1024 && zc_cudnn_bucket((int64_t)1 << 40) == 0,
       "length buckets: powers of two from 64");

    shape_init(&s);
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "bf16 GQA causal diagonal forward"))
        ok(key.direction == ZC_CUDNN_FWD && key.dtype == ZC_BFLOAT16 && key.heads_q == 8 &&
               key.heads_kv == 2 && key.head_dim == 64 && key.mask == ZC_CUDNN_MASK_CAUSAL &&
               key.segments == 2 && key.max_q == 128 && key.max_kv == 128,
           "its key: fwd bf16 8/2 d64 causal, 2 segments, buckets 128");
    s.a.dtype = ZC_FLOAT16;
    cudnn(ZC_CUDNN_FWD, &s, &key, "fp16 forward");
    s.a.dtype = ZC_FLOAT32;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_DTYPE, "dtype float32", "fp32");

    shape_init(&s);
    s.a.head_dim = 200;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_HEAD_DIM, "head_dim 200", "head dim 200");
    s.a.head_dim = 36;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_HEAD_DIM, "head_dim 36",
           "head dim 36 (not a multiple of 8)");
    s.a.head_dim = 136;
    native(ZC_CUDNN_BWD, &s, ZC_ATTN_NATIVE_HEAD_DIM, "head_dim 136", "head dim 136 (past 128)");
    s.a.head_dim = 128;
    s.a.out_dtype = ZC_BFLOAT16; /* the backward's O: the final output, bf16 */
    cudnn(ZC_CUDNN_BWD, &s, &key, "head dim 128 backward");
    s.a.out_dtype = ZC_FLOAT32;
    s.a.head_dim = 8;
    cudnn(ZC_CUDNN_FWD, &s, &key, "head dim 8");

    shape_init(&s);
    s.a.num_heads_kv = 8;
    cudnn(ZC_CUDNN_FWD, &s, &key, "MHA (8/8)");
    s.a.num_heads_kv = 1;
    cudnn(ZC_CUDNN_FWD, &s, &key, "MQA (8/1)");

    /* masks by global positions */
    shape_init(&s);
    s.q_start[0] = 1000;
    s.q_start[1] = 8000;
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "causal, every key before every query"))
        ok(key.mask == ZC_CUDNN_MASK_FULL, "  ... a full graph");
    shape_init(&s);
    s.a.causal = 0;
    s.q_start[0] = 0;
    s.kv_start[0] = 5000;
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "not causal"))
        ok(key.mask == ZC_CUDNN_MASK_FULL, "  ... a full graph");
    shape_init(&s);
    s.q_start[0] = s.kv_start[0] = 300;
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "diagonal blocks elsewhere in their sequences"))
        ok(key.mask == ZC_CUDNN_MASK_CAUSAL, "  ... a top-left causal graph");
    shape_bottom_right(&s);
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "bottom-right aligned segments (offsets 40 and 28)"))
        ok(key.mask == ZC_CUDNN_MASK_BOTTOM_RIGHT && key.segments == 2,
           "  ... a bottom-right causal graph");
    s.a.out_dtype = ZC_BFLOAT16;
    cudnn(ZC_CUDNN_BWD, &s, &key, "  ... its backward");
    /* what the ring engine splits: an offset that is neither */
    shape_init(&s);
    s.q_start[1] += 32;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_SHAPE, "segment 1: 128 queries from position 4128",
           "causal block at offset 32 with as many keys as queries");
    s.a.out_dtype = ZC_BFLOAT16;
    native(ZC_CUDNN_BWD, &s, ZC_ATTN_NATIVE_SHAPE, "neither top-left nor bottom-right",
           "  ... its backward");
    shape_init(&s);
    s.q_start[0] = 1000;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_SHAPE, "segment 0 sees every key and segment 1",
           "one full, one diagonal segment");
    shape_init(&s);
    s.cu_q[1] = 60;
    s.cu_q[2] = 160;
    s.q_start[0] = 40;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_SHAPE, "alignment differs",
           "one bottom-right, one top-left-only segment");
    shape_init(&s);
    s.kv_start[1] += 1;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_SHAPE, "neither",
           "a segment whose first query sees no key");
    shape_init(&s);
    s.q_start[0] = 0;
    s.kv_start[0] = 100;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_SHAPE, "segment 0", "a segment masked out entirely");

    /* varlen: segments without queries, or without keys, are left out */
    shape_init(&s);
    s.a.batch = 3;
    s.cu_q[1] = 0;    /* segment 0: no queries */
    s.cu_q[2] = 128;
    s.cu_q[3] = 200;
    s.cu_kv[3] = 300;
    s.q_start[2] = s.kv_start[2] = 9000;
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "a segment without queries"))
        ok(key.segments == 2 && key.max_q == 128 && key.max_kv == 128,
           "  ... left out of the graph (2 segments, q<=128, kv<=128)");
    shape_init(&s);
    s.a.batch = 3;
    s.cu_kv[1] = 0;   /* segment 0: 100 queries and no key */
    s.cu_kv[2] = 128;
    s.cu_q[3] = 300;
    s.cu_kv[3] = 200;
    s.q_start[2] = s.kv_start[2] = 9000;
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "queries with no key (a ring step's rows that see nothing)"))
        ok(key.segments == 2 && key.mask == ZC_CUDNN_MASK_CAUSAL,
           "  ... left out of the graph (2 segments of 3)");
    s.a.out_dtype = ZC_BFLOAT16;
    cudnn(ZC_CUDNN_BWD, &s, &key, "  ... its backward");
    shape_init(&s);
    s.a.batch = 3;
    s.cu_q[3] = s.cu_kv[3] = 300;
    s.q_start[2] = s.kv_start[2] = 9000;
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "3 segments"))
        ok(key.segments == 4, "  ... the graph's segment count bucketed to 4");
    shape_init(&s);
    s.a.batch = 0;
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "empty batch"))
        ok(key.segments == 0, "  ... nothing for cuDNN (0 segments)");

    /* storage types */
    shape_init(&s);
    s.a.out_dtype = ZC_BFLOAT16;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_DTYPE, "ZC_ATTN_ACCUMULATE",
           "accumulating into a bf16 out");
    s.a.flags = 0;
    cudnn(ZC_CUDNN_FWD, &s, &key, "bf16 out, not accumulating");
    s.a.out_dtype = ZC_FLOAT16;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_DTYPE, "out_dtype float16", "fp16 out of bf16 inputs");
    shape_init(&s);
    s.a.out_dtype = ZC_BFLOAT16;
    s.a.delta = NULL;
    cudnn(ZC_CUDNN_BWD, &s, &key, "backward with the final O, no delta (the ring engine's)");
    s.a.out = NULL;
    s.a.delta = &s.delta_dummy;
    native(ZC_CUDNN_BWD, &s, ZC_ATTN_NATIVE_SHAPE, "out: NULL", "backward without O");
    shape_init(&s);
    s.a.out_dtype = ZC_FLOAT32;
    native(ZC_CUDNN_BWD, &s, ZC_ATTN_NATIVE_SHAPE, "out: float32",
           "backward with O in another dtype");
    shape_init(&s);
    s.a.out_dtype = ZC_BFLOAT16;
    s.a.grad_dtype = ZC_BFLOAT16;
    native(ZC_CUDNN_BWD, &s, ZC_ATTN_NATIVE_DTYPE, "grad_dtype bfloat16",
           "accumulating into bf16 gradients");
    s.a.flags = 0;
    cudnn(ZC_CUDNN_BWD, &s, &key, "bf16 gradients, not accumulating");
    shape_init(&s);
    native(ZC_CUDNN_DELTA, &s, ZC_ATTN_NATIVE_SHAPE, "pass 2", "the delta pass");
}

/* A window on the shape (zc_attn_args_t's fields, causal off). */
static void set_window(shape_t *s, int left, int right)
{
    s->a.causal = 0;
    s->a.flags |= ZC_ATTN_WINDOW;
    s->a.window_left = left;
    s->a.window_right = right;
}

/* Windows (flash-attention's window_size) as cuDNN bands, by the same
 * alignments as causal. */
static void test_decide_window(void)
{
    shape_t s;
    zc_cudnn_key_t key;

    shape_init(&s);
    set_window(&s, 63, 0);
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "sliding window of 64 on diagonal blocks"))
        ok(key.mask == ZC_CUDNN_MASK_CAUSAL && key.left == 63 && key.right == 0,
           "  ... a top-left band (63, 0)");
    s.a.out_dtype = ZC_BFLOAT16;
    if (cudnn(ZC_CUDNN_BWD, &s, &key, "  ... its backward"))
        ok(key.direction == ZC_CUDNN_BWD && key.left == 63 && key.right == 0,
           "  ... the same band backward");
    shape_init(&s);
    set_window(&s, 20, 20);
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "local window (20, 20)"))
        ok(key.mask == ZC_CUDNN_MASK_CAUSAL && key.left == 20 && key.right == 20,
           "  ... a top-left band (20, 20)");
    shape_init(&s);
    set_window(&s, 0, 0);
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "window of 1 (0, 0)"))
        ok(key.mask == ZC_CUDNN_MASK_CAUSAL && key.left == 0 && key.right == 0,
           "  ... the diagonal alone");
    shape_init(&s);
    set_window(&s, -1, 5);
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "a right bound alone (-1, 5)"))
        ok(key.mask == ZC_CUDNN_MASK_CAUSAL && key.left == -1 && key.right == 5,
           "  ... a top-left band (-1, 5)");
    /* bottom-right: LLaMA CP's blocks under a window */
    shape_bottom_right(&s);
    set_window(&s, 50, 0);
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "bottom-right blocks under a window of 51"))
        ok(key.mask == ZC_CUDNN_MASK_BOTTOM_RIGHT && key.left == 50 && key.right == 0,
           "  ... a bottom-right band (50, 0)");
    /* full, as a window */
    shape_init(&s);
    set_window(&s, -1, -1);
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "the full mask as a window (-1, -1)"))
        ok(key.mask == ZC_CUDNN_MASK_FULL && key.left == -1 && key.right == -1,
           "  ... a full graph");
    shape_init(&s);
    set_window(&s, 500, 500);
    if (cudnn(ZC_CUDNN_FWD, &s, &key, "a window wider than every segment"))
        ok(key.mask == ZC_CUDNN_MASK_FULL && key.left == -1 && key.right == -1,
           "  ... a full graph");
    /* what no graph expresses */
    shape_init(&s);
    set_window(&s, 10, 0);
    s.cu_kv[1] = 50; /* segment 0: 100 queries of 50 keys, rows 60.. see none */
    s.cu_kv[2] = 178;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_SHAPE, "rows that see no key",
           "a window whose last rows see no key");
    shape_init(&s);
    set_window(&s, 10, 10);
    s.q_start[1] += 5;
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_SHAPE, "segment 1",
           "a window on a block at offset 5");
    shape_init(&s);
    set_window(&s, 10, 0);
    s.q_start[0] = 200; /* segment 0 past its keys: every row sees none */
    native(ZC_CUDNN_FWD, &s, ZC_ATTN_NATIVE_SHAPE, "segment 0", "a segment the window hides");
}

/* ---- the graph cache ----------------------------------------------------- */

static void test_keys(void)
{
    shape_t s;
    zc_cudnn_key_t base, k, keys[16];
    zc_cudnn_cache_t cache = {0};
    zc_cudnn_entry_t *e0, *e;
    int nkeys = 0, distinct = 1, hashes = 1, entries = 1;
    char buf[160];

    shape_init(&s);
    decide(ZC_CUDNN_FWD, &s, &base, buf);
    keys[nkeys++] = base;
    /* every field changed alone, through a shape */
    s.a.out_dtype = ZC_BFLOAT16; /* the backward's O */
    decide(ZC_CUDNN_BWD, &s, &keys[nkeys++], buf);
    s.a.out_dtype = ZC_FLOAT32;
    s.a.dtype = ZC_FLOAT16;
    decide(ZC_CUDNN_FWD, &s, &keys[nkeys++], buf);
    shape_init(&s);
    s.a.num_heads_q = 16;
    decide(ZC_CUDNN_FWD, &s, &keys[nkeys++], buf);
    shape_init(&s);
    s.a.num_heads_kv = 4;
    decide(ZC_CUDNN_FWD, &s, &keys[nkeys++], buf);
    shape_init(&s);
    s.a.head_dim = 128;
    decide(ZC_CUDNN_FWD, &s, &keys[nkeys++], buf);
    shape_init(&s);
    s.a.causal = 0;
    decide(ZC_CUDNN_FWD, &s, &keys[nkeys++], buf);
    shape_init(&s);
    s.a.batch = 1;
    decide(ZC_CUDNN_FWD, &s, &keys[nkeys++], buf);
    shape_init(&s);
    s.cu_q[2] = 100 + 129; /* a query segment of 129: bucket 256 */
    decide(ZC_CUDNN_FWD, &s, &keys[nkeys++], buf);
    shape_init(&s);
    s.cu_kv[2] = 100 + 300;
    decide(ZC_CUDNN_FWD, &s, &keys[nkeys++], buf);
    for (int i = 0; i < nkeys; i++)
        for (int j = i + 1; j < nkeys; j++) {
            if (zc_cudnn_key_equal(&keys[i], &keys[j])) {
                distinct = 0;
                diag("keys %d and %d equal: %s", i, j, zc_cudnn_key_str(&keys[i], buf, 160));
            }
            if (zc_cudnn_key_hash(&keys[i]) == zc_cudnn_key_hash(&keys[j]))
                hashes = 0;
        }
    ok(distinct, "%d shapes differing in one field each: %d distinct keys", nkeys, nkeys);
    ok(hashes, "  ... and distinct hashes");

    /* the same shape through other lengths in the bucket, scale, starts,
     * pointers */
    shape_init(&s);
    s.cu_q[1] = s.cu_kv[1] = 70;
    s.cu_q[2] = s.cu_kv[2] = 70 + 65;
    s.a.scale = 0.3f;
    s.q_start[1] = s.kv_start[1] = 77;
    s.a.q = NULL;
    decide(ZC_CUDNN_FWD, &s, &k, buf);
    ok(zc_cudnn_key_equal(&k, &base) && zc_cudnn_key_hash(&k) == zc_cudnn_key_hash(&base),
       "same shape, other lengths in the bucket, scale and positions: the same key");

    for (int i = 0; i < nkeys; i++) {
        e = zc_cudnn_cache_get(&cache, &keys[i]);
        if (!e || e->state != 0 || e->graph || !zc_cudnn_key_equal(&e->key, &keys[i]))
            entries = 0;
    }
    ok(entries && cache.count == (size_t)nkeys, "cache: one new entry per key (%zu)",
       cache.count);
    e0 = zc_cudnn_cache_find(&cache, &base);
    ok(e0 && zc_cudnn_cache_get(&cache, &k) == e0 && cache.count == (size_t)nkeys,
       "cache: the same shape finds the same entry, nothing added");
    e0->state = -1;
    /* grow past several resizes: entries stay put */
    for (int i = 0; i < 200; i++) {
        zc_cudnn_key_t m = base;

        m.max_q = 64 << (i % 8);
        m.segments = 100 + i;
        zc_cudnn_cache_get(&cache, &m);
    }
    ok(zc_cudnn_cache_find(&cache, &base) == e0 && e0->state == -1 &&
           cache.count == (size_t)nkeys + 200,
       "cache: entries keep their place and state as it grows (%zu entries, %zu slots)",
       cache.count, cache.nslots);
    k = base;
    k.head_dim = 96;
    ok(zc_cudnn_cache_find(&cache, &k) == NULL, "cache: find does not create");
    /* the bound: the least recently used goes first, the rest stay found */
    {
        size_t before = cache.count;
        int found = 1;

        zc_cudnn_cache_get(&cache, &base); /* base: the most recent now */
        for (int i = 0; i < 5; i++)
            ok(zc_cudnn_cache_evict(&cache, NULL) == 1, "cache: eviction %d", i + 1);
        ok(cache.count == before - 5 && zc_cudnn_cache_find(&cache, &base) == e0,
           "cache: 5 evicted, the most recently used kept in place");
        /* keys[0] is base; keys[1..5] were the least recently used */
        for (int i = 1; i < nkeys; i++)
            found &= (zc_cudnn_cache_find(&cache, &keys[i]) != NULL) == (i > 5);
        for (int i = 0; i < 200; i++) {
            zc_cudnn_key_t m = base;

            m.max_q = 64 << (i % 8);
            m.segments = 100 + i;
            found &= zc_cudnn_cache_find(&cache, &m) != NULL;
        }
        ok(found, "cache: the 5 least recently used gone, every other entry still found after "
           "the holes were closed");
        while (zc_cudnn_cache_evict(&cache, NULL))
            ;
        ok(cache.count == 0 && zc_cudnn_cache_evict(&cache, NULL) == 0,
           "cache: evicted to empty, then nothing to evict");
    }
    zc_cudnn_cache_clear(&cache, NULL);
    ok(cache.count == 0 && cache.slots == NULL, "cache: cleared");
    ok(strcmp(zc_cudnn_key_str(&base, buf, sizeof(buf)),
              "fwd bfloat16 hq=8 hkv=2 d=64 causal seg=2 q<=128 kv<=128") == 0,
       "key text: %s", buf);
}

/* ---- the graphs, as cuDNN sees them without a GPU ------------------------- */

#define GRAPH_CASES 48

#ifdef HAVE_CUDNN
/* cuDNN's runtime-compiled engines load libcuda.so.1 even to say whether
 * they take a graph; without a driver, the CUDA toolkit's stub (next to
 * libcudart, in stubs/) stands in: its soname is libcuda.so.1, so cuDNN's
 * dlopen finds it loaded.  Returns what was loaded, or NULL. */
static const char *load_driver(char *path, size_t len)
{
    Dl_info info;
    char dir[1024];

    if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL))
        return "libcuda.so.1 (the driver)";
    if (!dladdr((void *)cudaGetDeviceCount, &info) || !info.dli_fname)
        return NULL;
    snprintf(dir, sizeof(dir), "%s", info.dli_fname);
    snprintf(path, len, "%s/stubs/libcuda.so", dirname(dir));
    return dlopen(path, RTLD_NOW | RTLD_GLOBAL) ? path : NULL;
}

/* The file's text (static buffer), or NULL. */
static const char *read_text(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n ? buf : NULL;
}
#endif

/* The window graphs: each band, top-left or bottom-right, forward (even
 * i) and backward, bf16 with GQA at head dim 128, fp16 without at 64. */
static const struct {
    int mask, left, right;
} window_bands[] = {
    {ZC_CUDNN_MASK_CAUSAL, 4095, 0},       /* Mistral's sliding window */
    {ZC_CUDNN_MASK_BOTTOM_RIGHT, 4095, 0}, /* ... on LLaMA CP's blocks */
    {ZC_CUDNN_MASK_CAUSAL, 128, 128},      /* a local window */
    {ZC_CUDNN_MASK_BOTTOM_RIGHT, 0, 0},    /* a window of 1 */
    {ZC_CUDNN_MASK_CAUSAL, 511, -1},       /* a left bound alone */
    {ZC_CUDNN_MASK_CAUSAL, -1, 64},        /* a right bound alone */
};
#define WINDOW_CASES (2 * (int)(sizeof(window_bands) / sizeof(window_bands[0])))

#ifdef HAVE_CUDNN
/* Graph shape i of GRAPH_CASES: every direction, dtype, GQA (hq over hq
 * / 4) or not, head dim 64 and 128, and mask (full, top-left,
 * bottom-right; the bands causal), at the given segments and buckets. */
static zc_cudnn_key_t graph_case(int i, int hq, int segments, int max_q, int max_kv)
{
    const int mask = (i >> 4) % 3;

    return (zc_cudnn_key_t){.direction = i & 1 ? ZC_CUDNN_BWD : ZC_CUDNN_FWD,
                            .dtype = i & 2 ? ZC_FLOAT16 : ZC_BFLOAT16,
                            .heads_q = hq,
                            .heads_kv = i & 4 ? hq : hq / 4,
                            .head_dim = i & 8 ? 128 : 64,
                            .mask = mask,
                            .segments = segments,
                            .max_q = max_q,
                            .max_kv = max_kv,
                            .left = -1,
                            .right = mask == ZC_CUDNN_MASK_FULL ? -1 : 0};
}

static zc_cudnn_key_t window_case(int i, int hq, int segments, int max_q, int max_kv)
{
    zc_cudnn_key_t k = graph_case(i & 1 ? 1 : 0, hq, segments, max_q, max_kv);
    const int band = i / 2;

    k.dtype = band % 2 ? ZC_FLOAT16 : ZC_BFLOAT16;
    k.heads_kv = band % 2 ? hq : hq / 4;
    k.head_dim = band % 2 ? 64 : 128;
    k.mask = window_bands[band].mask;
    k.left = window_bands[band].left;
    k.right = window_bands[band].right;
    return k;
}
#endif

static void test_graphs(void)
{
#ifdef HAVE_CUDNN
    const char *srcdir = getenv("ZC_TEST_SRCDIR");
    char path[1024], stub[1024];
    const char *device, *driver;

    /* every direction, mask, dtype, GQA or not, two head dims, odd
     * segment counts and buckets: cuDNN's descriptors take the graph */
    for (int i = 0; i < GRAPH_CASES + WINDOW_CASES; i++) {
        /* small, odd segment counts and buckets */
        zc_cudnn_key_t k = i < GRAPH_CASES
                               ? graph_case(i, 8, 1 + i % 3, 64 << (i % 2), 64 << (i % 3))
                               : window_case(i - GRAPH_CASES, 8, 1 + i % 3, 64 << (i % 2),
                                             64 << (i % 3));
        char buf[160];
        int nops = 0;
        zc_status_t st = zc_cudnn_ops_check(&k, &nops);

        if (!ok(st == ZC_OK && nops > 10, "cuDNN accepts the graph %s (%d operations)",
                zc_cudnn_key_str(&k, buf, sizeof(buf)), nops))
            diag("%s", zc_get_last_error());
    }
    /* and an engine takes it on an H100, asked without a GPU */
    snprintf(path, sizeof(path), "%s/fixtures/cudnn/h100-sxm.json", srcdir ? srcdir : "tests");
    device = read_text(path);
    driver = load_driver(stub, sizeof(stub));
    if (!device || !driver || zc_cudnn_version() < 90800) {
        tap_skip(GRAPH_CASES + WINDOW_CASES, !device ? "no tests/fixtures/cudnn/h100-sxm.json (ZC_TEST_SRCDIR)"
                              : !driver ? "neither libcuda.so.1 nor the toolkit's stub driver"
                                        : "cuDNN before 9.8 has no device descriptions");
        return;
    }
    diag("engine checks on an H100's description, driver: %s", driver);
    for (int i = 0; i < GRAPH_CASES + WINDOW_CASES; i++) {
        /* a ring's sizes: 4 segments of up to 4k queries and 8k keys */
        zc_cudnn_key_t k = i < GRAPH_CASES ? graph_case(i, 16, 4, 4096, 8192)
                                           : window_case(i - GRAPH_CASES, 16, 4, 4096, 8192);
        char buf[160];
        int engines = 0;
        zc_status_t st = zc_cudnn_engine_check(&k, device, &engines);

        if (!ok(st == ZC_OK && engines > 0, "an engine takes the graph %s on an H100 (%d)",
                zc_cudnn_key_str(&k, buf, sizeof(buf)), engines))
            diag("%s", zc_get_last_error());
    }
#else
    zc_cudnn_key_t k = {0};
    int engines;

    ok(zc_cudnn_ops_check(&k, NULL) == ZC_ERR_UNSUPPORTED &&
           zc_cudnn_engine_check(&k, "{}", &engines) == ZC_ERR_UNSUPPORTED,
       "no graphs without cuDNN");
    tap_skip(2 * (GRAPH_CASES + WINDOW_CASES) - 1, "libzcomm built without cuDNN");
#endif
}

/* ---- argument checks and statuses ---------------------------------------- */

static void bad(zc_status_t st, const char *name, const char *what)
{
    if (!ok(st == ZC_ERR_INVALID_ARG && has(name), "%s: invalid argument naming '%s'", what,
            name))
        diag("got %s: %s", zc_strerror(st), zc_get_last_error());
}

static void test_checks(void)
{
    shape_t s;
    zc_attn_route_t route = ZC_ATTN_ON_CUDNN;
    zc_status_t st;

    shape_init(&s);
    ok(zc_cudnn_attn_check(ZC_CUDNN_FWD, &s.a) == ZC_OK, "a ring block's forward args pass");
    ok(zc_cudnn_attn_check(ZC_CUDNN_BWD, &s.a) == ZC_OK, "a ring block's backward args pass");
    bad(zc_cudnn_attn_check(ZC_CUDNN_FWD, NULL), "args", "NULL args");
    bad(zc_cudnn_attn_check(ZC_CUDNN_DELTA, &s.a), "pass", "the delta pass");
    s.a.q = NULL;
    bad(zc_cudnn_attn_check(ZC_CUDNN_FWD, &s.a), "q", "NULL q");
    shape_init(&s);
    s.a.out = NULL;
    bad(zc_cudnn_attn_check(ZC_CUDNN_FWD, &s.a), "out", "forward without out");
    s.a.delta = NULL;
    bad(zc_cudnn_attn_check(ZC_CUDNN_BWD, &s.a), "out", "backward without out or delta");
    shape_init(&s);
    s.a.dout = NULL;
    bad(zc_cudnn_attn_check(ZC_CUDNN_BWD, &s.a), "dout", "backward without dout");
    shape_init(&s);
    s.a.dk = NULL;
    bad(zc_cudnn_attn_check(ZC_CUDNN_BWD, &s.a), "dk", "backward without dk");
    shape_init(&s);
    s.a.head_dim = 0;
    bad(zc_cudnn_attn_check(ZC_CUDNN_FWD, &s.a), "head_dim", "head dim 0");
    shape_init(&s);
    s.a.num_heads_kv = 3;
    bad(zc_cudnn_attn_check(ZC_CUDNN_FWD, &s.a), "num_heads_q", "8 heads over 3");
    shape_init(&s);
    s.a.dtype = ZC_INT32;
    bad(zc_cudnn_attn_check(ZC_CUDNN_FWD, &s.a), "dtype", "int32 tensors");
    shape_init(&s);
    s.cu_q[2] = 50;
    bad(zc_cudnn_attn_check(ZC_CUDNN_FWD, &s.a), "cu_seqlens_q", "decreasing cu_seqlens_q");

    /* a launch that falls back touches nothing: host stand-ins are safe */
    shape_init(&s);
    s.a.head_dim = 200;
    st = zc_cudnn_attn_launch(ZC_CUDNN_FWD, &s.a, NULL, &route);
#ifdef HAVE_CUDNN
    ok(st == ZC_OK && route == ZC_ATTN_NATIVE_HEAD_DIM,
       "launch of an unsupported shape: native for its head dim, nothing enqueued");
#else
    ok(st == ZC_ERR_UNSUPPORTED && has("without cuDNN") && route == ZC_ATTN_NATIVE_CHOSEN,
       "launch without cuDNN built in: ZC_ERR_UNSUPPORTED, native");
#endif
    bad(zc_cudnn_attn_launch(ZC_CUDNN_FWD, NULL, NULL, &route), "args", "launch, NULL args");

    ok(zc_cudnn_status(0, "x") == ZC_OK, "cuDNN success: ZC_OK");
#ifdef HAVE_CUDNN
    st = zc_cudnn_status(3000, "cudnnBackendFinalize(operation graph)");
    ok(st == ZC_ERR_UNSUPPORTED && has("cuDNN cudnnBackendFinalize(operation graph)") &&
           has("NOT_SUPPORTED"),
       "CUDNN_STATUS_NOT_SUPPORTED: ZC_ERR_UNSUPPORTED with cudnnGetErrorString's text");
    if (st != ZC_ERR_UNSUPPORTED || !has("NOT_SUPPORTED"))
        diag("%s", zc_get_last_error());
    ok(zc_cudnn_status(3002, "x") == ZC_ERR_UNSUPPORTED, "NOT_SUPPORTED_SHAPE: unsupported");
    ok(zc_cudnn_status(2000, "x") == ZC_ERR_INTERNAL && has("BAD_PARAM"),
       "BAD_PARAM: ZC_ERR_INTERNAL (a graph built wrong)");
    ok(zc_cudnn_status(4004, "x") == ZC_ERR_NO_MEMORY, "device allocation: ZC_ERR_NO_MEMORY");
    ok(zc_cudnn_status(5000, "x") == ZC_ERR_SYSTEM && has("EXECUTION_FAILED"),
       "EXECUTION_FAILED: ZC_ERR_SYSTEM");
    ok(zc_cudnn_status(1001, "x") == ZC_ERR_SYSTEM, "NOT_INITIALIZED: ZC_ERR_SYSTEM");
#else
    ok(zc_cudnn_status(3000, "x") == ZC_ERR_UNSUPPORTED, "any status without cuDNN: unsupported");
    tap_skip(5, "libzcomm built without cuDNN: no cudnnGetErrorString");
#endif
}

/* ---- on a GPU: against the CPU kernels ----------------------------------- */

#ifdef HAVE_CUDNN
static uint64_t rng = 0x2545f4914f6cdd1dull;

static float rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void *upload(const void *src, size_t bytes)
{
    void *d = NULL;

    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess)
        return NULL;
    cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice);
    return d;
}

static double max_err(const float *x, const float *ref, size_t n)
{
    double e = 0, m = 1e-30;

    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)ref[i]);

        if (!isfinite(x[i]) && isfinite(ref[i]))
            return INFINITY;
        e = fmax(e, fabs((double)x[i] - ref[i]));
        m = fmax(m, r);
    }
    return e / m;
}

/* One forward and backward of shape s (its lengths, starts and heads) in
 * bf16 on cuDNN and on the CPU kernels; errors relative to max |ref|.
 * on_cudnn: whether both are to run on cuDNN, or to fall back to the native
 * kernels (zc_cudnn_attn_route's shapes) with nothing done. */
static void gpu_case(const shape_t *shape, const char *name, int on_cudnn)
{
    zc_attn_args_t a = shape->a;
    int64_t tq = a.cu_seqlens_q[a.batch], tk = a.cu_seqlens_kv[a.batch];
    size_t qn = (size_t)tq * a.num_heads_q * a.head_dim, kn = (size_t)tk * a.num_heads_kv * a.head_dim;
    size_t rows = (size_t)tq * a.num_heads_q;
    float *f = malloc((qn * 2 + kn * 2) * sizeof(float));
    uint16_t *h = malloc((qn * 2 + kn * 2) * sizeof(uint16_t));
    float *out = calloc(qn, sizeof(float)), *lse = malloc(rows * sizeof(float));
    float *delta = malloc(rows * sizeof(float)), *dq = calloc(qn, 4), *dk = calloc(kn, 4),
          *dv = calloc(kn, 4);
    float *g_out = malloc(qn * 4), *g_lse = malloc(rows * 4), *g_dq = malloc(qn * 4),
          *g_dk = malloc(kn * 4), *g_dv = malloc(kn * 4);
    uint16_t *out16 = malloc(qn * 2);
    void *d_in, *d_out, *d_lse, *d_delta, *d_dq, *d_dk, *d_dv, *d_out16;
    zc_attn_route_t route = ZC_ATTN_NATIVE_CHOSEN;
    zc_status_t st;
    double e_out, e_lse = 0, e_dq, e_dk, e_dv;

    for (size_t i = 0; i < qn * 2 + kn * 2; i++)
        f[i] = rnd();
    zc_attn_convert(f, ZC_FLOAT32, (int64_t)(qn * 2 + kn * 2), ZC_BFLOAT16, h);
    /* q | dout | k | v, bf16 */
    a.q = h;
    a.dout = h + qn;
    a.k = h + 2 * qn;
    a.v = h + 2 * qn + kn;
    a.flags = shape->a.flags & ZC_ATTN_WINDOW;
    a.out = out;
    a.lse = lse;
    a.out_dtype = ZC_FLOAT32;
    a.grad_dtype = ZC_FLOAT32;
    zc_attn_fwd(&a);
    zc_attn_convert(out, ZC_FLOAT32, (int64_t)qn, ZC_BFLOAT16, out16);
    a.out = out16;
    a.out_dtype = ZC_BFLOAT16;
    a.delta = delta;
    zc_attn_bwd_delta(&a);
    a.dq = dq;
    a.dk = dk;
    a.dv = dv;
    zc_attn_bwd(&a);

    d_in = upload(h, (qn * 2 + kn * 2) * 2);
    d_out = upload(out, qn * 4);
    d_lse = upload(lse, rows * 4);
    d_delta = upload(delta, rows * 4);
    d_out16 = upload(out16, qn * 2);
    d_dq = upload(dq, qn * 4);
    d_dk = upload(dk, kn * 4);
    d_dv = upload(dv, kn * 4);
    a.q = d_in;
    a.dout = (uint16_t *)d_in + qn;
    a.k = (uint16_t *)d_in + 2 * qn;
    a.v = (uint16_t *)d_in + 2 * qn + kn;
    /* forward into fp32 out, not accumulating */
    a.out = d_out;
    a.out_dtype = ZC_FLOAT32;
    a.lse = d_lse;
    cudaMemset(d_out, 0, qn * 4);
    st = zc_cudnn_attn_launch(ZC_CUDNN_FWD, &a, NULL, &route);
    cudaDeviceSynchronize();
    cudaMemcpy(g_out, d_out, qn * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(g_lse, d_lse, rows * 4, cudaMemcpyDeviceToHost);
    e_out = max_err(g_out, out, qn);
    for (size_t i = 0; i < rows; i++)
        e_lse = fmax(e_lse, fabs((double)g_lse[i] - lse[i]));
    if (!on_cudnn) {
        int untouched = 1;

        for (size_t i = 0; i < qn; i++)
            untouched &= g_out[i] == 0.0f;
        ok(st == ZC_OK && route != ZC_ATTN_ON_CUDNN && untouched,
           "%s: forward falls back to the native kernels, out untouched (%s)", name,
           zc_strerror(st));
    } else if (st != ZC_OK || route != ZC_ATTN_ON_CUDNN) {
        ok(0, "%s: cuDNN forward ran (%s, %s)", name, zc_strerror(st),
           zc_attn_route_name(route));
        diag("%s", zc_get_last_error());
    } else {
        ok(e_out < 1e-2 && e_lse < 2e-3, "%s: cuDNN forward vs CPU: out %.2e, lse %.2e", name,
           e_out, e_lse);
    }
    /* backward, gradients accumulated into zeroed fp32 buffers */
    cudaMemcpy(d_lse, lse, rows * 4, cudaMemcpyHostToDevice);
    cudaMemset(d_dq, 0, qn * 4);
    cudaMemset(d_dk, 0, kn * 4);
    cudaMemset(d_dv, 0, kn * 4);
    a.out = d_out16;
    a.out_dtype = ZC_BFLOAT16;
    a.delta = d_delta;
    a.dq = d_dq;
    a.dk = d_dk;
    a.dv = d_dv;
    a.flags = ZC_ATTN_ACCUMULATE | (shape->a.flags & ZC_ATTN_WINDOW);
    st = zc_cudnn_attn_launch(ZC_CUDNN_BWD, &a, NULL, &route);
    cudaDeviceSynchronize();
    cudaMemcpy(g_dq, d_dq, qn * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(g_dk, d_dk, kn * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(g_dv, d_dv, kn * 4, cudaMemcpyDeviceToHost);
    e_dq = max_err(g_dq, dq, qn);
    e_dk = max_err(g_dk, dk, kn);
    e_dv = max_err(g_dv, dv, kn);
    if (!on_cudnn) {
        ok(st == ZC_OK && route != ZC_ATTN_ON_CUDNN,
           "%s: backward falls back to the native kernels (%s)", name, zc_strerror(st));
    } else if (st != ZC_OK || route != ZC_ATTN_ON_CUDNN) {
        ok(0, "%s: cuDNN backward ran (%s, %s)", name, zc_strerror(st),
           zc_attn_route_name(route));
        diag("%s", zc_get_last_error());
    } else {
        ok(e_dq < 2.5e-2 && e_dk < 2.5e-2 && e_dv < 2.5e-2,
           "%s: cuDNN backward vs CPU: dq %.2e, dk %.2e, dv %.2e", name, e_dq, e_dk, e_dv);
    }
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_lse);
    cudaFree(d_delta);
    cudaFree(d_out16);
    cudaFree(d_dq);
    cudaFree(d_dk);
    cudaFree(d_dv);
    free(f);
    free(h);
    free(out);
    free(lse);
    free(delta);
    free(dq);
    free(dk);
    free(dv);
    free(g_out);
    free(g_lse);
    free(g_dq);
    free(g_dk);
    free(g_dv);
    free(out16);
}
#endif

#define GPU_CASES 22

static void test_gpu(void)
{
#ifdef HAVE_CUDNN
    shape_t s;

    if (zc_cuda_devices() <= 0) {
        tap_skip(GPU_CASES, "no CUDA device: the cuDNN runs against the CPU kernels need a GPU");
        return;
    }
    shape_init(&s);
    gpu_case(&s, "bf16 GQA 8/2 d64 causal diagonal, 100+128 tokens", 1);
    shape_init(&s);
    s.q_start[1] += 40;
    gpu_case(&s, "causal block at offset 40 with as many keys as queries", 0);
    shape_init(&s);
    s.a.causal = 0;
    s.a.num_heads_kv = 8;
    s.a.head_dim = 128;
    gpu_case(&s, "full MHA d128", 1);
    shape_init(&s);
    s.q_start[0] = 500;
    s.a.num_heads_kv = 1;
    gpu_case(&s, "MQA, one full and one diagonal segment", 0);
    shape_init(&s);
    s.q_start[0] = 1000;
    s.q_start[1] = 8000;
    s.a.num_heads_kv = 1;
    gpu_case(&s, "MQA, causal, every key before every query (a full graph)", 1);
    shape_init(&s);
    s.q_start[0] = s.kv_start[0] = 300;
    gpu_case(&s, "causal diagonal blocks elsewhere in their sequences", 1);
    shape_bottom_right(&s);
    gpu_case(&s, "bottom-right aligned segments (60 of 100 keys, 100 of 128)", 1);
    shape_init(&s);
    s.a.batch = 3;
    s.cu_kv[1] = 0;
    s.cu_kv[2] = 128;
    s.cu_q[3] = 300;
    s.cu_kv[3] = 200;
    s.q_start[2] = s.kv_start[2] = 9000;
    gpu_case(&s, "100 queries without keys between two diagonal segments", 1);
    shape_init(&s);
    set_window(&s, 63, 0);
    gpu_case(&s, "a sliding window of 64 on diagonal blocks", 1);
    shape_init(&s);
    set_window(&s, 20, 20);
    gpu_case(&s, "a local window (20, 20) on diagonal blocks", 1);
    shape_bottom_right(&s);
    set_window(&s, 50, 0);
    gpu_case(&s, "bottom-right aligned segments under a window of 51", 1);
    zc_cudnn_attn_release();
#else
    tap_skip(GPU_CASES, "libzcomm built without cuDNN");
#endif
}

/* ---- builds outside the cache's lock ------------------------------------ */

/* Graphs are tokens here; one key's build waits until the test lets it
 * finish, so that what others can do meanwhile is seen without timing. */
typedef struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    int building, go, builds, destroyed, other_done, fail;
    int inserted_meanwhile;     /* the slow build puts another caller's graph in first */
    pthread_mutex_t lock, build_lock;
    zc_cudnn_cache_locks_t locks;
    zc_cudnn_cache_t cache;
    zc_cudnn_key_t slow, other;
    zc_cudnn_entry_t *got[3];
    zc_status_t st[3];
} lk_t;

static lk_t lk = {.m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER,
                  .lock = PTHREAD_MUTEX_INITIALIZER, .build_lock = PTHREAD_MUTEX_INITIALIZER};
static int lk_token_other; /* the graph another caller put in */

static zc_status_t lk_build(void *arg, const zc_cudnn_key_t *key, void **graph)
{
    lk_t *t = arg;

    pthread_mutex_lock(&t->m);
    t->builds++;
    if (t->fail) {
        pthread_mutex_unlock(&t->m);
        return ZC_ERR_NO_MEMORY;
    }
    if (zc_cudnn_key_equal(key, &t->slow)) {
        t->building = 1;
        pthread_cond_broadcast(&t->c);
        while (!t->go)
            pthread_cond_wait(&t->c, &t->m);
    }
    pthread_mutex_unlock(&t->m);
    if (t->inserted_meanwhile) { /* the cache's lock is free during a build */
        zc_cudnn_entry_t *e;

        if (pthread_mutex_trylock(&t->lock) != 0)
            return ZC_ERR_INTERNAL; /* held: this thread's own, it would never come free */
        e = zc_cudnn_cache_get(&t->cache, key);
        e->graph = &lk_token_other;
        e->state = 1;
        pthread_mutex_unlock(&t->lock);
    }
    *graph = malloc(16);
    return *graph ? ZC_OK : ZC_ERR_NO_MEMORY;
}

static void lk_destroy(void *graph)
{
    lk.destroyed++;
    if (graph != &lk_token_other)
        free(graph);
}

/* Thread i looks up `key` as a backend call would: under the lock. */
static void lk_lookup(int i, const zc_cudnn_key_t *key)
{
    pthread_mutex_lock(&lk.lock);
    lk.st[i] = zc_cudnn_cache_lookup(&lk.cache, &lk.locks, key, lk_build, lk_destroy, &lk,
                                     &lk.got[i]);
    pthread_mutex_unlock(&lk.lock);
}

static void *lk_slow(void *arg)
{
    lk_lookup((int)(intptr_t)arg, &lk.slow);
    return NULL;
}

static void *lk_other(void *arg)
{
    (void)arg;
    lk_lookup(1, &lk.other);
    pthread_mutex_lock(&lk.m);
    lk.other_done = 1;
    pthread_cond_broadcast(&lk.c);
    pthread_mutex_unlock(&lk.m);
    return NULL;
}

/* Wait (a guard against a hang, not a timing) until *flag is set. */
static int lk_wait(int *flag)
{
    struct timespec until;
    int rc = 0;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&lk.m);
    while (!*flag && rc == 0)
        rc = pthread_cond_timedwait(&lk.c, &lk.m, &until);
    pthread_mutex_unlock(&lk.m);
    return *flag;
}

static void lk_go(void)
{
    pthread_mutex_lock(&lk.m);
    lk.go = 1;
    pthread_cond_broadcast(&lk.c);
    pthread_mutex_unlock(&lk.m);
}

static void test_lookup(void)
{
    pthread_t a, b, c;
    int served, built;

    lk.locks = (zc_cudnn_cache_locks_t){&lk.lock, &lk.build_lock, 4};
    lk.slow = lk.other = (zc_cudnn_key_t){.direction = ZC_CUDNN_FWD, .dtype = ZC_BFLOAT16,
                                          .heads_q = 8, .heads_kv = 2, .head_dim = 64,
                                          .mask = ZC_CUDNN_MASK_CAUSAL, .segments = 2,
                                          .max_q = 128, .max_kv = 128, .left = -1,
                                          .right = 0};
    lk.slow.head_dim = 128;
    lk_lookup(1, &lk.other);
    ok(lk.st[1] == ZC_OK && lk.got[1] && lk.got[1]->state == 1 && lk.builds == 1,
       "lookup: a new key is built and put in");
    pthread_create(&a, NULL, lk_slow, (void *)(intptr_t)0);
    built = lk_wait(&lk.building);
    pthread_create(&b, NULL, lk_other, NULL);
    served = built && lk_wait(&lk.other_done);
    ok(built && served && !lk.go && lk.st[1] == ZC_OK && lk.got[1]->state == 1,
       "lookup: while a new graph builds, a graph already built is served (the cache's lock "
       "is not held during a build)");
    pthread_create(&c, NULL, lk_slow, (void *)(intptr_t)2);
    lk_go();
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    ok(lk.st[0] == ZC_OK && lk.st[2] == ZC_OK && lk.got[0] == lk.got[2] &&
           lk.got[0]->state == 1 && lk.builds == 2 && lk.destroyed == 0,
       "lookup: two callers of the same new key: one build, one entry (%d builds)",
       lk.builds);

    /* another caller's graph went in during our build: ours is discarded */
    lk.inserted_meanwhile = 1;
    lk.other.segments = 4;
    lk_lookup(1, &lk.other);
    lk.inserted_meanwhile = 0;
    ok(lk.st[1] == ZC_OK && lk.got[1]->graph == &lk_token_other && lk.destroyed == 1,
       "lookup: a graph put in during the build is kept, the one built discarded");
    lk.fail = 1;
    lk.other.segments = 8;
    lk_lookup(1, &lk.other);
    lk.fail = 0;
    pthread_mutex_lock(&lk.lock);
    ok(lk.st[1] == ZC_ERR_NO_MEMORY && !zc_cudnn_cache_find(&lk.cache, &lk.other),
       "lookup: a build that fails puts nothing in and says why");
    pthread_mutex_unlock(&lk.lock);
    for (int i = 0; i < 6; i++) {
        lk.other.segments = 16 << i;
        lk_lookup(1, &lk.other);
    }
    ok(lk.cache.count == 4 && lk.got[1] == zc_cudnn_cache_find(&lk.cache, &lk.other),
       "lookup: bounded to 4 entries, the least recently used going first (%zu)",
       lk.cache.count);
    zc_cudnn_cache_clear(&lk.cache, lk_destroy);
}

int main(void)
{
    test_switch();
    test_decide();
    test_decide_window();
    test_keys();
    test_lookup();
    test_graphs();
    test_checks();
    test_gpu();
    return tap_done();
}
