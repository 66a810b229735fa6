/* zc_attn_perf: GFLOP/s of the CPU flash-attention kernels, nccl-tests
 * style: one row per sequence length from -b to -e (times -f), forward and
 * backward time and rate, and #wrong from sampled rows checked against a
 * double-precision reference (-c 1).  FLOPs count the visible (query, key)
 * pairs, 4*D*H per pair forward (causal: the visible half, 2*S^2*D*H per
 * sequence; a window of w: about 4*S*w*D*H), backward 2.5x. */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_math.h"
#include "perf_common.h"
#include "zcomm.h"

typedef struct {
    int64_t min_len, max_len;
    double factor;
    int batch, heads, kv_heads, dim, causal, iters, warmup, check;
    int window, window_left, window_right;  /* -W: ZC_ATTN_WINDOW */
    zc_datatype_t dtype;
    int run_fwd, run_bwd;
} opts_t;

static void usage(const char *prog)
{
    printf("usage: %s [options]\n"
           "  -b minlen   first sequence length (default 4096)\n"
           "  -e maxlen   last sequence length (default: minlen)\n"
           "  -f factor   length multiplier between rows (default 2)\n"
           "  -N batch    sequences per call (default 1)\n"
           "  -H heads    query heads (default 8)\n"
           "  -K heads    key/value heads (default: query heads)\n"
           "  -D dim      head dimension (default 128)\n"
           "  -d type     float or bfloat16 (default float)\n"
           "  -C 0|1      causal (default 1)\n"
           "  -W L,R      window: keys left and right a query sees, -1 for all\n"
           "              (4095,0: a sliding window of 4096; -1,-1 with -C 0: full)\n"
           "  -m mode     fwd, bwd or both (default both)\n"
           "  -n iters    timed iterations (default 5)\n"
           "  -w iters    warmup iterations (default 1)\n"
           "  -c 0|1      check sampled rows against a double reference (default 1)\n"
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

    while ((c = getopt_long(argc, argv, "b:e:f:N:H:K:D:d:C:W:m:n:w:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b': o->min_len = atoll(optarg); break;
        case 'e': o->max_len = atoll(optarg); break;
        case 'f': o->factor = atof(optarg); break;
        case 'N': o->batch = atoi(optarg); break;
        case 'H': o->heads = atoi(optarg); break;
        case 'K': o->kv_heads = atoi(optarg); break;
        case 'D': o->dim = atoi(optarg); break;
        case 'C': o->causal = atoi(optarg); break;
        case 'W':
            o->window = 1;
            if (sscanf(optarg, "%d,%d", &o->window_left, &o->window_right) != 2)
                return -1;
            break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'c': o->check = atoi(optarg); break;
        case 'd':
            if (strcmp(optarg, "float") == 0)
                o->dtype = ZC_FLOAT32;
            else if (strcmp(optarg, "bfloat16") == 0 || strcmp(optarg, "bf16") == 0)
                o->dtype = ZC_BFLOAT16;
            else
                return -1;
            break;
        case 'm':
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
    if (o->max_len < o->min_len)
        o->max_len = o->min_len;
    if (o->kv_heads <= 0)
        o->kv_heads = o->heads;
    if (o->min_len < 1 || o->factor <= 1 || o->batch < 1 || o->iters < 1 || o->warmup < 0)
        return -1;
    return 0;
}

static uint64_t rng = 88172645463325252ull;

static float rand_normal(void)
{
    double u1, u2;

    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    u1 = ((rng >> 11) + 1.0) / 9007199254740993.0;
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    u2 = (rng >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

typedef struct {
    void *q, *k, *v, *out, *dout, *dq, *dk, *dv;
    float *lse;
    float *tmp;   /* fp32 staging for the random inputs */
} bufs_t;

static void *fill_random(int64_t n, zc_datatype_t dtype, float *tmp)
{
    void *p = malloc(n * zc_datatype_size(dtype));

    for (int64_t i = 0; i < n; i++)
        tmp[i] = rand_normal();
    if (p)
        zc_attn_convert(tmp, ZC_FLOAT32, n, dtype, p);
    return p;
}

static double elem(const void *p, zc_datatype_t dtype, int64_t i)
{
    return dtype == ZC_FLOAT32 ? ((const float *)p)[i] : zc_bf16_to_float(((const uint16_t *)p)[i]);
}

/* The keys [*lo, *hi) of its sequence that query i sees, for the reference
 * and the FLOP count: causal and the window as zcomm.h documents them
 * together (causal hides the keys right of the query; the library refuses
 * a window reaching right with causal set). */
static void visible_keys(const opts_t *o, int64_t i, int64_t len, int64_t *lo, int64_t *hi)
{
    int64_t right = o->causal ? 0 : o->window ? o->window_right : -1;

    zc_attn_mask_keys(zc_attn_mask_make(o->window ? o->window_left : -1, right), i, 0, 0, len,
                      lo, hi);
}

/* Output and dq of sampled rows against a double reference: rows whose
 * largest error exceeds the dtype's tolerance (relative to the row's scale). */
static int check_rows(const opts_t *o, const zc_attn_args_t *a, int64_t len)
{
    const int d = o->dim, g = o->heads / o->kv_heads;
    const double tol = o->dtype == ZC_FLOAT32 ? 1e-4 : 3e-2;
    double *s = malloc(sizeof(double) * len), *orow = malloc(sizeof(double) * d);
    double *dqrow = malloc(sizeof(double) * d);
    int wrong = 0;

    for (int n = 0; n < 16; n++) {
        const int b = n % o->batch, h = (n * 5) % o->heads, hk = h / g;
        const int64_t i = (int64_t)(((uint64_t)n * 2654435761u) % (uint64_t)len);
        const int64_t row = (b * len + i) * o->heads + h;
        int64_t j0, nvis;
        double m = -INFINITY, l = 0, lse, delta = 0, emax = 0, omax = 0, dqmax = 0, dqerr = 0;

        visible_keys(o, i, len, &j0, &nvis);
        for (int x = 0; x < d; x++)
            orow[x] = dqrow[x] = 0;
        for (int64_t j = j0; j < nvis; j++) {
            const int64_t krow = (b * len + j) * o->kv_heads + hk;
            double dot = 0;

            for (int x = 0; x < d; x++)
                dot += elem(a->q, o->dtype, row * d + x) * elem(a->k, o->dtype, krow * d + x);
            s[j] = dot * a->scale;
            m = s[j] > m ? s[j] : m;
        }
        for (int64_t j = j0; j < nvis; j++) {
            const int64_t krow = (b * len + j) * o->kv_heads + hk;
            double p = exp(s[j] - m);

            l += p;
            for (int x = 0; x < d; x++)
                orow[x] += p * elem(a->v, o->dtype, krow * d + x);
        }
        lse = m + log(l);
        for (int x = 0; x < d; x++) {
            orow[x] /= l;
            omax = fmax(omax, fabs(orow[x]));
            emax = fmax(emax, fabs(orow[x] - elem(a->out, a->out_dtype, row * d + x)));
            delta += orow[x] * elem(a->dout, o->dtype, row * d + x);
        }
        if (o->run_bwd) {
            for (int64_t j = j0; j < nvis; j++) {
                const int64_t krow = (b * len + j) * o->kv_heads + hk;
                double dp = 0, ds;

                for (int x = 0; x < d; x++)
                    dp += elem(a->dout, o->dtype, row * d + x) *
                          elem(a->v, o->dtype, krow * d + x);
                ds = exp(s[j] - lse) * (dp - delta) * a->scale;
                for (int x = 0; x < d; x++)
                    dqrow[x] += ds * elem(a->k, o->dtype, krow * d + x);
            }
            for (int x = 0; x < d; x++) {
                dqmax = fmax(dqmax, fabs(dqrow[x]));
                dqerr = fmax(dqerr, fabs(dqrow[x] - elem(a->dq, a->grad_dtype, row * d + x)));
            }
        }
        if (!(emax <= tol * fmax(omax, 1e-30)) || fabs(lse - a->lse[row]) > tol * fmax(1, fabs(lse)) ||
            !(dqerr <= tol * fmax(dqmax, 1e-2)))
            wrong++;
    }
    free(s), free(orow), free(dqrow);
    return wrong;
}

static int run_len(const opts_t *o, int64_t len, double *fwd_rate, double *bwd_rate)
{
    const int64_t nq = o->batch * len * o->heads * o->dim;
    const int64_t nk = o->batch * len * o->kv_heads * o->dim;
    double pairs = 0, flops;
    int32_t *cu = malloc(sizeof(int32_t) * (o->batch + 1));
    bufs_t bf = {0};
    zc_attn_args_t a;
    double t_fwd = 0, t_bwd = 0, t0;
    int wrong = 0;
    char mask[32];
    zc_status_t st = ZC_OK;

    for (int b = 0; b <= o->batch; b++)
        cu[b] = (int32_t)(b * len);
    for (int64_t i = 0; i < len; i++) {
        int64_t lo, hi;

        visible_keys(o, i, len, &lo, &hi);
        pairs += (double)(hi - lo);
    }
    flops = 4.0 * o->batch * o->heads * pairs * o->dim;
    bf.tmp = malloc(sizeof(float) * (nq > nk ? nq : nk));
    bf.q = fill_random(nq, o->dtype, bf.tmp);
    bf.k = fill_random(nk, o->dtype, bf.tmp);
    bf.v = fill_random(nk, o->dtype, bf.tmp);
    bf.dout = fill_random(nq, o->dtype, bf.tmp);
    bf.out = calloc(nq, zc_datatype_size(o->dtype));
    bf.dq = calloc(nq, zc_datatype_size(o->dtype));
    bf.dk = calloc(nk, zc_datatype_size(o->dtype));
    bf.dv = calloc(nk, zc_datatype_size(o->dtype));
    bf.lse = calloc(o->batch * len * o->heads, sizeof(float));
    if (!cu || !bf.tmp || !bf.q || !bf.k || !bf.v || !bf.dout || !bf.out || !bf.dq || !bf.dk ||
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
    if (o->window)
        snprintf(mask, sizeof(mask), "%s%d,%d", o->causal ? "c" : "w", o->window_left,
                 o->window_right);
    else
        snprintf(mask, sizeof(mask), "%s", o->causal ? "causal" : "full");
    t_fwd /= o->run_fwd ? o->iters : 1;
    t_bwd /= o->iters;
    *fwd_rate = o->run_fwd ? flops / t_fwd * 1e-9 : 0;
    *bwd_rate = o->run_bwd ? 2.5 * flops / t_bwd * 1e-9 : 0;
    printf("%8d %5d %5d %8lld %5d %9s %11s %10.2f %9.1f %10.2f %9.1f ", o->batch, o->heads,
           o->kv_heads, (long long)len, o->dim, zc_datatype_name(o->dtype), mask,
           o->run_fwd ? t_fwd * 1e3 : 0.0, *fwd_rate,
           o->run_bwd ? t_bwd * 1e3 : 0.0, *bwd_rate);
    if (o->check)
        printf("%6d\n", wrong);
    else
        printf("%6s\n", "N/A");
    free(cu), free(bf.tmp), free(bf.q), free(bf.k), free(bf.v), free(bf.dout), free(bf.out);
    free(bf.dq), free(bf.dk), free(bf.dv), free(bf.lse);
    return wrong;
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
