/* zc_attn_perf: GFLOP/s of the CPU flash-attention kernels, nccl-tests
 * style: one row per sequence length from -b to -e (times -f), forward and
 * backward time and rate, and #wrong from sampled rows checked against a
 * double-precision reference (-c 1).  FLOPs count the visible (query, key)
 * pairs, 4*D*H per pair forward (causal: the visible half, 2*S^2*D*H per
 * sequence; a window of w: about 4*S*w*D*H), backward 2.5x.
 *
 * -G: the GPU instead (zc_attn_gpu_bench.h), every way of running one
 * attention call on the same shapes in one run: one cuDNN SDPA call over
 * the whole batch (the baseline), libzcomm's cuDNN backend as a ring block
 * calls it, its tensor-core kernels and its scalar kernels; forward and
 * backward, causal and full, head dims 64 and 128, fixed lengths and THD
 * batches drawn from the paper's length distributions, all with the same
 * tokens per call; one line per way with its TFLOP/s, the ratio of the
 * baseline's time to its own and its error against the float64 reference
 * of sampled rows. */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_math.h"
#include "kernels/cudnn/attn_cudnn.h"
#include "perf_common.h"
#include "zc_attn_gpu_bench.h"
#include "zc_attn_ref.h"
#include "zc_plan_dataset.h"
#include "zcomm.h"

/* The options given on the command line: -G's defaults differ. */
enum { GIVEN_B = 1, GIVEN_F = 2, GIVEN_H = 4, GIVEN_K = 8, GIVEN_D = 16, GIVEN_C = 32,
       GIVEN_N = 64, GIVEN_T = 128, GIVEN_DTYPE = 256 };

typedef struct {
    int64_t min_len, max_len;
    double factor;
    int batch, heads, kv_heads, dim, causal, iters, warmup, check;
    int window, window_left, window_right;  /* -W: ZC_ATTN_WINDOW */
    zc_datatype_t dtype;
    int run_fwd, run_bwd;
    int gpu;                 /* -G */
    char datasets[64];       /* -T: THD batches from these distributions */
    char shapes[128];        /* -S: only these rows of -G ("": all) */
    unsigned given;          /* GIVEN_* */
} opts_t;

static void usage(const char *prog)
{
    printf("usage: %s [options]\n"
           "  -b minlen   first sequence length (default 4096)\n"
           "  -e maxlen   last sequence length (default: minlen; -G without -b: 16384)\n"
           "  -f factor   length multiplier between rows (default 2; -G: 4)\n"
           "  -N batch    sequences per call (default 1); -G: every row has the tokens of\n"
           "              batch sequences of maxlen, shorter lengths in more sequences\n"
           "  -H heads    query heads (default 8; -G: 2048 / dim)\n"
           "  -K heads    key/value heads (default: query heads)\n"
           "  -D dim      head dimension (default 128; -G: 64 and 128)\n"
           "  -d type     float or bfloat16 (default float); -G: bfloat16 (default) or float16\n"
           "  -C 0|1      causal (default 1; -G: both)\n"
           "  -W L,R      window: keys left and right a query sees, -1 for all\n"
           "              (4095,0: a sliding window of 4096; -1,-1 with -C 0: full)\n"
           "  -m mode     fwd, bwd or both (default both)\n"
           "  -n iters    timed iterations (default 5; -G: 3)\n"
           "  -w iters    warmup iterations (default 1)\n"
           "  -c 0|1      check sampled rows against a double reference (default 1)\n"
           "  -G          the GPU: one cuDNN SDPA call over the batch, libzcomm's cuDNN backend,\n"
           "              its tensor-core kernels and its scalar kernels on the same shapes\n"
           "  -T LIST     with -G, THD batches drawn from these length distributions (arxiv,\n"
           "              github, prolong64k, comma-separated, all or none; default all)\n"
           "  -S LIST     with -G, only these rows: 4k, 16k (the fixed lengths' names),\n"
           "              arxiv, github, prolong64k, comma-separated\n"
           "Threads: ZC_NUM_THREADS; SIMD path: ZC_CPU_ISA (auto, avx512, avx2, scalar).\n",
           prog);
}

static int parse(int argc, char **argv, opts_t *o)
{
    int c;

    *o = (opts_t){.min_len = 4096, .max_len = 0, .factor = 2, .batch = 1, .heads = 8,
                  .kv_heads = 0, .dim = 128, .causal = 1, .iters = 5, .warmup = 1, .check = 1,
                  .dtype = ZC_FLOAT32, .run_fwd = 1, .run_bwd = 1};
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};

    while ((c = getopt_long(argc, argv, "b:e:f:N:H:K:D:d:C:W:m:n:w:c:GT:S:h", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 'b': o->min_len = atoll(optarg), o->given |= GIVEN_B; break;
        case 'e': o->max_len = atoll(optarg); break;
        case 'f': o->factor = atof(optarg), o->given |= GIVEN_F; break;
        case 'N': o->batch = atoi(optarg); break;
        case 'H': o->heads = atoi(optarg), o->given |= GIVEN_H; break;
        case 'K': o->kv_heads = atoi(optarg), o->given |= GIVEN_K; break;
        case 'D': o->dim = atoi(optarg), o->given |= GIVEN_D; break;
        case 'C': o->causal = atoi(optarg), o->given |= GIVEN_C; break;
        case 'W':
            o->window = 1;
            if (sscanf(optarg, "%d,%d", &o->window_left, &o->window_right) != 2)
                return -1;
            break;
        case 'n': o->iters = atoi(optarg), o->given |= GIVEN_N; break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'c': o->check = atoi(optarg); break;
        case 'G': o->gpu = 1; break;
        case 'T':
            snprintf(o->datasets, sizeof(o->datasets), "%s", optarg);
            o->given |= GIVEN_T;
            break;
        case 'S': snprintf(o->shapes, sizeof(o->shapes), "%s", optarg); break;
        case 'd':
            o->given |= GIVEN_DTYPE;
            if (strcmp(optarg, "float") == 0)
                o->dtype = ZC_FLOAT32;
            else if (strcmp(optarg, "bfloat16") == 0 || strcmp(optarg, "bf16") == 0)
                o->dtype = ZC_BFLOAT16;
            else if (strcmp(optarg, "float16") == 0 || strcmp(optarg, "fp16") == 0)
                o->dtype = ZC_FLOAT16;
            else
                return -1;
            break;
        case 'm':
            if (strcmp(optarg, "fwd") != 0 && strcmp(optarg, "bwd") != 0 &&
                strcmp(optarg, "both") != 0)
                return -1;
            o->run_fwd = strcmp(optarg, "bwd") != 0;
            o->run_bwd = strcmp(optarg, "fwd") != 0;
            break;
        case 'h':
            usage(argv[0]);
            exit(0);
        default:
            return -1;
        }
    }
    if (optind < argc)
        return -1;
    if (o->gpu) { /* -G's defaults: 4k and 16k, every distribution, bf16, 3 timed calls */
        if (!(o->given & GIVEN_B))
            o->max_len = o->max_len ? o->max_len : 16384;
        if (!(o->given & GIVEN_F))
            o->factor = 4;
        if (!(o->given & GIVEN_N))
            o->iters = 3;
        if (!(o->given & GIVEN_T))
            snprintf(o->datasets, sizeof(o->datasets), "all");
        if (!(o->given & GIVEN_DTYPE))
            o->dtype = ZC_BFLOAT16;
    }
    if (o->max_len < o->min_len)
        o->max_len = o->min_len;
    if (o->kv_heads <= 0)
        o->kv_heads = o->heads;
    if (o->min_len < 1 || o->max_len > INT32_MAX || o->factor <= 1 || o->batch < 1 ||
        o->heads < 1 || o->iters < 1 || o->warmup < 0 || o->dim < 1 || o->dim > 256 ||
        (o->causal != 0 && o->causal != 1))
        return -1;
    /* fp16 on the GPU only; the GPU takes bf16 and fp16 (the tensor cores' and cuDNN's) */
    if (o->gpu ? o->dtype == ZC_FLOAT32 : o->dtype == ZC_FLOAT16)
        return -1;
    if (!o->gpu && (o->datasets[0] || o->shapes[0]))
        return -1;
    if (o->gpu && o->batch * o->max_len > INT32_MAX)
        return -1;
    /* the GPU's heads follow the head dim unless -H says: checked per dim */
    if ((!o->gpu || (o->given & GIVEN_H)) && o->heads % o->kv_heads != 0)
        return -1;
    return 0;
}

typedef struct {
    void *q, *k, *v, *out, *dout, *dq, *dk, *dv;
    float *lse;
} bufs_t;

/* n random normal values of dtype in a new buffer. */
static void *fill_random(int64_t n, zc_datatype_t dtype)
{
    static uint64_t seed = 88172645463325252ull;
    void *p = malloc((size_t)n * zc_datatype_size(dtype));

    if (p)
        zar_random(p, dtype, n, &seed);
    return p;
}

/* n values of dtype as fp32: p itself, or a converted copy in *copy. */
static const float *as_float(const void *p, zc_datatype_t dtype, int64_t n, float **copy)
{
    *copy = NULL;
    if (dtype == ZC_FLOAT32)
        return p;
    *copy = malloc(sizeof(float) * (size_t)n);
    if (*copy)
        zc_attn_convert(p, dtype, n, ZC_FLOAT32, *copy);
    return *copy;
}

/* Output, lse and dq of sampled rows against the float64 reference
 * (zc_attn_ref.h): rows whose largest error exceeds the dtype's tolerance
 * (relative to the row's scale). */
static int check_rows(const opts_t *o, const zc_attn_args_t *a, int64_t len)
{
    const int d = o->dim;
    const int64_t tokens = o->batch * len, nq = tokens * o->heads * d;
    const int64_t nk = tokens * o->kv_heads * d;
    const double tol = o->dtype == ZC_FLOAT32 ? 1e-4 : 3e-2;
    float *copy[6];
    zar_call_t c = {.cu = a->cu_seqlens_q, .batch = o->batch, .hq = o->heads, .hkv = o->kv_heads,
                    .d = d, .causal = o->causal, .window = o->window,
                    .window_left = o->window_left, .window_right = o->window_right,
                    .scale = a->scale,
                    .q = as_float(a->q, o->dtype, nq, &copy[0]),
                    .k = as_float(a->k, o->dtype, nk, &copy[1]),
                    .v = as_float(a->v, o->dtype, nk, &copy[2]),
                    .dout = as_float(a->dout, o->dtype, nq, &copy[3]),
                    .out = as_float(a->out, a->out_dtype, nq, &copy[4]), .lse = a->lse};
    const float *dq = as_float(a->dq, a->grad_dtype, nq, &copy[5]);
    double *ref = malloc(sizeof(double) * d), *dqref = malloc(sizeof(double) * d);
    int wrong = 0;

    if (!c.q || !c.k || !c.v || !c.dout || !c.out || !dq || !ref || !dqref) {
        fprintf(stderr, "zc_attn_perf: out of memory for the check\n");
        exit(2);
    }
    for (int n = 0; n < 16; n++) {
        int64_t t;
        int h;
        double lse, emax = 0, omax = 0, dqmax = 0, dqerr = 0;

        zar_sample(tokens, o->heads, 16, n, &t, &h);
        const int64_t row = t * o->heads + h;
        zar_fwd_row(&c, t, h, ref, &lse);
        for (int x = 0; x < d; x++) {
            omax = fmax(omax, fabs(ref[x]));
            emax = fmax(emax, fabs(ref[x] - c.out[row * d + x]));
        }
        if (o->run_bwd) {
            zar_dq_row(&c, t, h, dqref);
            for (int x = 0; x < d; x++) {
                dqmax = fmax(dqmax, fabs(dqref[x]));
                dqerr = fmax(dqerr, fabs(dqref[x] - dq[row * d + x]));
            }
        }
        if (!(emax <= tol * fmax(omax, 1e-30)) ||
            !(fabs(lse - c.lse[row]) <= tol * fmax(1, fabs(lse))) ||
            !(dqerr <= tol * fmax(dqmax, 1e-2)))
            wrong++;
    }
    for (int i = 0; i < 6; i++)
        free(copy[i]);
    free(ref), free(dqref);
    return wrong;
}

/* A table's mask column: causal, full, or the window ("c4095,0" with
 * causal, "w20,20" without). */
static void mask_label(int causal, int window, int left, int right, char *buf, size_t len)
{
    if (window)
        snprintf(buf, len, "%s%d,%d", causal ? "c" : "w", left, right);
    else
        snprintf(buf, len, "%s", causal ? "causal" : "full");
}

/* The keys [*lo, *hi) of its sequence that query i sees, for the FLOP
 * count: causal and the window as zcomm.h documents them together (causal
 * hides the keys right of the query). */
static void visible_keys(const opts_t *o, int64_t i, int64_t len, int64_t *lo, int64_t *hi)
{
    const int64_t right = o->causal ? 0 : o->window ? o->window_right : -1;

    zc_attn_mask_keys(zc_attn_mask_make(o->window ? o->window_left : -1, right), i, 0, 0, len,
                      lo, hi);
}

static int run_len(const opts_t *o, int64_t len, double *fwd_rate, double *bwd_rate)
{
    const int64_t nq = o->batch * len * o->heads * o->dim;
    const int64_t nk = o->batch * len * o->kv_heads * o->dim;
    double pairs = 0, flops;
    char mask[32];
    int32_t *cu = malloc(sizeof(int32_t) * (o->batch + 1));
    bufs_t bf = {0};
    zc_attn_args_t a;
    double t_fwd = 0, t_bwd = 0, t0;
    int wrong = 0;
    zc_status_t st = ZC_OK;

    for (int b = 0; b <= o->batch; b++)
        cu[b] = (int32_t)(b * len);
    for (int64_t i = 0; i < len; i++) {
        int64_t lo, hi;

        visible_keys(o, i, len, &lo, &hi);
        pairs += (double)(hi - lo);
    }
    flops = 4.0 * o->batch * o->heads * pairs * o->dim;
    bf.q = fill_random(nq, o->dtype);
    bf.k = fill_random(nk, o->dtype);
    bf.v = fill_random(nk, o->dtype);
    bf.dout = fill_random(nq, o->dtype);
    bf.out = calloc(nq, zc_datatype_size(o->dtype));
    bf.dq = calloc(nq, zc_datatype_size(o->dtype));
    bf.dk = calloc(nk, zc_datatype_size(o->dtype));
    bf.dv = calloc(nk, zc_datatype_size(o->dtype));
    bf.lse = calloc(o->batch * len * o->heads, sizeof(float));
    if (!cu || !bf.q || !bf.k || !bf.v || !bf.dout || !bf.out || !bf.dq || !bf.dk ||
        !bf.dv || !bf.lse) {
        fprintf(stderr, "zc_attn_perf: out of memory at length %lld\n", (long long)len);
        exit(2);
    }
    memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    a.batch = o->batch;
    a.num_heads_q = o->heads;
    a.num_heads_kv = o->kv_heads;
    a.head_dim = o->dim;
    a.cu_seqlens_q = cu;
    a.cu_seqlens_kv = cu;
    a.causal = o->causal;
    if (o->window) {
        a.flags = ZC_ATTN_WINDOW;
        a.window_left = o->window_left;
        a.window_right = o->window_right;
    }
    a.scale = 1.0f / sqrtf((float)o->dim);
    a.dtype = a.out_dtype = a.grad_dtype = o->dtype;
    a.q = bf.q, a.k = bf.k, a.v = bf.v, a.out = bf.out, a.lse = bf.lse;
    a.dout = bf.dout, a.dq = bf.dq, a.dk = bf.dk, a.dv = bf.dv;

    /* the backward needs a forward's out and lse either way */
    for (int it = 0; it < o->warmup + (o->run_fwd ? o->iters : 1); it++) {
        t0 = zc_perf_now();
        st |= zc_attn_fwd(&a);
        if (it >= o->warmup)
            t_fwd += zc_perf_now() - t0;
    }
    for (int it = 0; o->run_bwd && it < o->warmup + o->iters; it++) {
        t0 = zc_perf_now();
        st |= zc_attn_bwd(&a);
        if (it >= o->warmup)
            t_bwd += zc_perf_now() - t0;
    }
    if (st != ZC_OK) {
        fprintf(stderr, "zc_attn_perf: %s: %s\n", zc_strerror(st), zc_get_last_error());
        exit(2);
    }
    if (o->check)
        wrong = check_rows(o, &a, len);
    t_fwd /= o->run_fwd ? o->iters : 1;
    t_bwd /= o->iters;
    *fwd_rate = o->run_fwd ? flops / t_fwd * 1e-9 : 0;
    *bwd_rate = o->run_bwd ? 2.5 * flops / t_bwd * 1e-9 : 0;
    mask_label(o->causal, o->window, o->window_left, o->window_right, mask, sizeof(mask));
    printf("%8d %5d %5d %8lld %5d %9s %11s %10.2f %9.1f %10.2f %9.1f ", o->batch, o->heads,
           o->kv_heads, (long long)len, o->dim, zc_datatype_name(o->dtype), mask,
           o->run_fwd ? t_fwd * 1e3 : 0.0, *fwd_rate,
           o->run_bwd ? t_bwd * 1e3 : 0.0, *bwd_rate);
    if (o->check)
        printf("%6d\n", wrong);
    else
        printf("%6s\n", "N/A");
    free(cu), free(bf.q), free(bf.k), free(bf.v), free(bf.dout), free(bf.out);
    free(bf.dq), free(bf.dk), free(bf.dv), free(bf.lse);
    return wrong;
}

/* ---- -G ------------------------------------------------------------- */

/* What the rows of -G add up to. */
typedef struct {
    double log_x[2][ZAB_NWAYS]; /* sums of log(baseline time / the way's time) */
    int nx[2][ZAB_NWAYS];
    int wrong, failed;
} gpu_tally_t;

static int gpu_heads(const opts_t *o, int d)
{
    return o->given & GIVEN_H ? o->heads : 2048 / d > 0 ? 2048 / d : 1;
}

static int gpu_kv_heads(const opts_t *o, int d)
{
    return o->given & GIVEN_K ? o->kv_heads : gpu_heads(o, d);
}

/* The head dims every row runs at. */
static int gpu_dims(const opts_t *o, int *dims)
{
    if (o->given & GIVEN_D) {
        dims[0] = o->dim;
        return 1;
    }
    dims[0] = 64, dims[1] = 128;
    return 2;
}

/* One line per pass and way of one case. */
static void gpu_print(const opts_t *o, const char *name, const int32_t *cu, int batch,
                      const zab_case_t *c, const zab_result_t *r, gpu_tally_t *t)
{
    const double flops = zab_flops(cu, batch, c);
    char mask[32];
    const double tol = o->dtype == ZC_BFLOAT16 ? 3e-2 : 1e-2;

    for (int pass = 0; pass < 2; pass++) {
        const double base = r->ms[pass][ZAB_SDPA];

        if (!(pass ? c->bwd : c->fwd))
            continue;
        for (int w = 0; w < ZAB_NWAYS; w++) {
            const double ms = r->ms[pass][w], err = r->err[pass][w];

            mask_label(c->causal, c->window, c->window_left, c->window_right, mask,
                       sizeof(mask));
            printf("  %-11s %5d %6d %4d/%-3d %4d %-11s %-4s %-6s", name, batch, cu[batch], c->hq,
                   c->hkv, c->d, mask, pass ? "bwd" : "fwd", zab_way_name[w]);
            if (ms > 0) {
                printf(" %9.3f %8.1f", ms, (pass ? 2.5 : 1.0) * flops / (ms * 1e-3) * 1e-12);
                if (base > 0)
                    printf(" %7.2f", base / ms);
                else
                    printf(" %7s", "-");
                if (err >= 0)
                    printf(" %8.1e", err);
                else
                    printf(" %8s", "-");
            } else {
                printf(" %9s %8s %7s %8s", "-", "-", "-", "-");
            }
            if (r->why[pass][w][0])
                printf("  %s: %s", r->failed[pass][w] ? "FAILED" : "not run", r->why[pass][w]);
            printf("\n");
            if (ms > 0 && base > 0) {
                t->log_x[pass][w] += log(base / ms);
                t->nx[pass][w]++;
            }
            t->wrong += err >= 0 && !(err <= tol);
            t->failed += r->failed[pass][w];
        }
    }
    fflush(stdout);
}

/* Every head dim and mask of one batch. */
static void gpu_row(const opts_t *o, const char *name, const int32_t *cu, int batch,
                    gpu_tally_t *t)
{
    int dims[2], nd = gpu_dims(o, dims), wq = 0, wkv = 0;
    zab_batch_t *b;
    zc_status_t st;

    if (o->shapes[0] && !zc_perf_listed(o->shapes, name))
        return;
    for (int i = 0; i < nd; i++) {
        const int q = gpu_heads(o, dims[i]) * dims[i], kv = gpu_kv_heads(o, dims[i]) * dims[i];

        wq = q > wq ? q : wq;
        wkv = kv > wkv ? kv : wkv;
    }
    if ((st = zab_open(cu, batch, wq, wkv, o->dtype, o->check, &b)) != ZC_OK) {
        printf("# %s: FAILED: %s: %s\n", name, zc_strerror(st), zc_get_last_error());
        t->failed++;
        return;
    }
    for (int i = 0; i < nd; i++)
        for (int causal = 1; causal >= 0; causal--) {
            /* with -W, one case: the window, causal only if -C 1 says */
            const int once = o->window && !(o->given & GIVEN_C);
            zab_case_t c = {.hq = gpu_heads(o, dims[i]), .hkv = gpu_kv_heads(o, dims[i]),
                            .d = dims[i], .causal = once ? 0 : causal, .window = o->window,
                            .window_left = o->window_left, .window_right = o->window_right,
                            .warmup = o->warmup,
                            .iters = o->iters, .ways = (1u << ZAB_NWAYS) - 1,
                            .fwd = o->run_fwd, .bwd = o->run_bwd, .check = o->check};
            zab_result_t r;

            if (((o->given & GIVEN_C) && causal != o->causal) || (once && causal))
                continue;
            if ((st = zab_time(b, &c, &r)) != ZC_OK) {
                printf("# %s d=%d: FAILED: %s: %s\n", name, c.d, zc_strerror(st),
                       zc_get_last_error());
                t->failed++;
                continue;
            }
            gpu_print(o, name, cu, batch, &c, &r, t);
        }
    zab_close(b);
}

static int gpu_main(const opts_t *o)
{
    const int64_t tokens = (int64_t)o->batch * o->max_len;
    int dims[2], nd = gpu_dims(o, dims);
    gpu_tally_t t = {0};

    for (int i = 0; i < nd; i++)
        if (gpu_heads(o, dims[i]) % gpu_kv_heads(o, dims[i]) != 0) {
            fprintf(stderr, "zc_attn_perf: -K %d does not divide the %d heads at head dim %d\n",
                    gpu_kv_heads(o, dims[i]), gpu_heads(o, dims[i]), dims[i]);
            return 1;
        }
    if (zab_device(0) != ZC_OK) {
        printf("zc_attn_perf -G: no CUDA device: skipped\n");
        return 0;
    }
    printf("# zc_attn_perf -G: libzcomm %s, cuDNN %zu, %s, %lld tokens per call, %d timed + %d "
           "warmup calls\n", ZC_VERSION_STRING, zc_cudnn_version(), zc_datatype_name(o->dtype),
           (long long)tokens, o->iters, o->warmup);
    printf("# ways: sdpa = one cuDNN SDPA call over the batch (the baseline); cudnn = libzcomm's "
           "cuDNN backend, as a ring block (fp32 out/lse merged, fp32 gradients added); mma = "
           "its tensor-core kernels; scalar = its scalar kernels, the same arguments\n"
           "# TFLOP/s: forward 4 s^2 d h per sequence, causal half, a window 4 d h per visible "
           "(query, key) pair, backward 2.5x; x: the "
           "baseline's time / the way's; err: max |x - ref| / max |ref| over %s sampled rows "
           "(fwd: out, lse; bwd: dq, dk, dv) against float64\n", o->check ? "32" : "no");
    printf("# %-11s %5s %6s %8s %4s %-11s %-4s %-6s %9s %8s %7s %8s\n", "shape", "seqs",
           "tokens", "heads", "dim", "mask", "pass", "way", "ms", "TFLOP/s", "x", "err");
    for (double len = (double)o->min_len; len <= (double)o->max_len; len *= o->factor) {
        const int64_t l = (int64_t)len, n = tokens / l;
        int32_t *cu = malloc(sizeof(int32_t) * (size_t)(n + 1));
        char name[32];

        if (l % 1024 == 0)
            snprintf(name, sizeof(name), "%lldk", (long long)l / 1024);
        else
            snprintf(name, sizeof(name), "%lld", (long long)l);
        for (int64_t i = 0; cu && i <= n; i++)
            cu[i] = (int32_t)(i * l);
        if (cu)
            gpu_row(o, name, cu, (int)n, &t);
        free(cu);
    }
    for (int ds = 0; ds < zc_dataset_count(); ds++) {
        zc_rng_t rng = {7 + (uint64_t)ds};
        int64_t *lengths = NULL;
        size_t n;
        int32_t *cu;

        if (!zc_perf_listed(o->datasets, zc_dataset_name(ds)))
            continue;
        n = zc_dataset_sample(ds, tokens, &rng, &lengths);
        cu = malloc(sizeof(int32_t) * (n + 1));
        if (cu && n) {
            cu[0] = 0;
            for (size_t i = 0; i < n; i++)
                cu[i + 1] = cu[i] + (int32_t)lengths[i];
            gpu_row(o, zc_dataset_name(ds), cu, (int)n, &t);
        }
        free(cu);
        free(lengths);
    }
    for (int pass = 0; pass < 2; pass++) {
        printf("# %s, geometric mean of x:", pass ? "bwd" : "fwd");
        for (int w = 1; w < ZAB_NWAYS; w++)
            if (t.nx[pass][w])
                printf(" %s %.2f", zab_way_name[w], exp(t.log_x[pass][w] / t.nx[pass][w]));
            else
                printf(" %s -", zab_way_name[w]);
        printf("\n");
    }
    printf("# Out of bounds values : %d %s\n", t.wrong, t.wrong ? "ERROR" : "OK");
    printf("# Failed calls : %d %s\n", t.failed, t.failed ? "ERROR" : "OK");
    return t.failed ? 2 : t.wrong ? 1 : 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    const char *isa = getenv("ZC_CPU_ISA"), *threads = getenv("ZC_NUM_THREADS");
    double sum_fwd = 0, sum_bwd = 0, fwd, bwd;
    int rows = 0, wrong = 0;

    if (parse(argc, argv, &o) != 0) {
        usage(argv[0]);
        return 1;
    }
    if (o.gpu)
        return gpu_main(&o);
    printf("# zc_attn_perf: CPU flash attention, libzcomm %d.%d.%d\n",
           zc_get_version() / 10000, zc_get_version() / 100 % 100, zc_get_version() % 100);
    printf("# threads %s, SIMD path %s, %d timed + %d warmup iterations\n",
           threads ? threads : "(online cores)", isa ? isa : "auto", o.iters, o.warmup);
    printf("# %6s %5s %5s %8s %5s %9s %11s %10s %9s %10s %9s %6s\n", "batch", "heads", "kvh",
           "seqlen", "dim", "type", "mask", "fwd(ms)", "GFLOP/s", "bwd(ms)", "GFLOP/s",
           "#wrong");
    for (double len = (double)o.min_len; len <= (double)o.max_len; len *= o.factor) {
        wrong += run_len(&o, (int64_t)len, &fwd, &bwd);
        sum_fwd += fwd;
        sum_bwd += bwd;
        rows++;
    }
    printf("# Out of bounds values : %d %s\n", wrong, wrong ? "ERROR" : "OK");
    printf("# Avg GFLOP/s : fwd %.1f  bwd %.1f\n", sum_fwd / rows, sum_bwd / rows);
    return wrong ? 1 : 0;
}
