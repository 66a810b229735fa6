/* zc_ring_attn_fwd/bwd on one host: 1, 2, 4 and 8 forked ranks, two
 * emulated nodes from 2 ranks on (config.node_id, rails on the loopback
 * when the cluster's node topology can be made, and ZC_ROUTED_MIN_BYTES
 * low enough that inter-node hops really go through the routing proxies).
 *
 * Batches: two drawn from each distribution of
 * $ZC_SHARED_DIR/data/length-distributions.tsv, scaled to this machine
 * (1k tokens of the table -> 32 tokens; batches of 256 and 160 tokens per
 * rank: lengths 1 to 8192 cut to the batch, sums of 160 to 2048; the
 * full-size ones exactly fill every rank, so the planner cuts sequences
 * into uneven rings), and
 * four adversarial ones (a single sequence; sequences shorter than the
 * ring; lengths not divisible by 2G; fewer tokens than ranks, the empty
 * ranks passing NULL buffers).  Each in fp32 (4 query heads, 1 KV
 * head, head dim 32) and bf16 (4/2 heads, head dim 40), each mode:
 * Zeppelin plan, routing only (the Zeppelin engine on the TE CP layout),
 * TE CP and LLaMA CP, with blocks whole, cut very fine or cut at the
 * default size (ZC_RING_ATTN_SLICE_MFLOP), the host engine's backward in
 * either queue order (ZC_RING_ATTN_BWD_ORDER, alternating so that every
 * mode meets both).
 *
 * The reference is single-process attention on the whole batch
 * (zc_attn_fwd/zc_attn_bwd on full sequences), made from the batch's seed;
 * the parent computes it once before forking (every rank would compute the
 * same), and each rank compares its own rows of out, lse, dq, dk and dv:
 * |x - ref| <= tol * (|ref| + max|ref|), tol 1e-5 (fp32) or 2.5e-2 (bf16),
 * the worst case printed.  Rows past the plan's tokens stay untouched.
 *
 * Every case runs twice: on the host engine (zc_ring_attn_fwd/bwd), then on
 * the stream engine of zc_ring_attn_fwd_stream/bwd_stream with the device
 * emulated on the host (tests/stream_emu.h): the same results, no two
 * operations of its two streams touching the same bytes unordered, and
 * transfers that overlap kernels in the ring modes (none in LLaMA CP).
 * Then NaN/Inf inputs (same NaN/Inf pattern as the reference, the rest
 * within tolerance) and bad arguments. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mp.h"
#include "src/core/comm.h"
#include "rails_lo.h"
#include "ring_attn_cases.h"
#include "device_emu.h"
#include "stream_emu.h"
#include "tap.h"
#include "tools/zc_ring_attn_data.h"
#include "zcomm.h"

#define MAX_BATCHES 10
#define NSHAPES 2
#define MAX_CASES (MAX_BATCHES * NSHAPES * NMODES)
#define MAX_RANKS 8
#define MAX_SEQS 256
#define TOKENS_PER_K 32      /* 1k tokens of the distributions -> 32 tokens */
#define TOKENS_PER_RANK 256  /* batch size per rank */
#define PAD_ROWS 3           /* rows past the plan's tokens, must stay untouched */
#define CASE_TIMEOUT_S 120

typedef struct {
    int hq, hkv, d;
    zc_datatype_t dtype;
} shape_t;

static const shape_t shapes[NSHAPES] = {{4, 1, 32, ZC_FLOAT32}, {4, 2, 40, ZC_BFLOAT16}};

typedef struct {
    char name[96];
    int64_t lengths[MAX_SEQS];
    size_t n;
    int64_t capacity;
} batch_t;

/* What one rank found in one case (shared memory, read by the parent). */
typedef struct {
    int ran;
    int failed;
    double worst[RAD_NRESULTS];
    char why[160];
    int kernels, transfers, overlapped; /* stream engine, forward */
    /* stream engine, both passes: blocks whose bf16/fp16 d64/d128 form
     * would not run on cuDNN, and the stats' routes (ZC_ATTN_BACKEND=cudnn) */
    int what_if_native;
    char what_if_why[320];
    int64_t calls, on_cudnn, native, native_dtype;
} result_t;

static int have_rails;
static batch_t batches[MAX_BATCHES];
static int nbatches;
static rad_batch_t refs[MAX_BATCHES][NSHAPES];
static int active_shapes = NSHAPES; /* the non-finite case runs fp32 only */
static int stream_engine;           /* the stream engine on the emulated device */
static result_t *results;           /* [MAX_CASES][MAX_RANKS] */

/* ---- batches ------------------------------------------------------------ */

typedef struct {
    char name[32];
    double lo[16], hi[16], w[16];
    int nbins;
} dist_t;

/* The distributions file: a header row of bins ("lt1k", "1k-2k", ...),
 * then one row of shares per dataset.  Returns how many were read. */
static int read_distributions(dist_t *d, int max)
{
    const char *dir = getenv("ZC_SHARED_DIR");
    char path[1024], line[1024];
    double lo[16], hi[16];
    int nbins = 0, n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/data/length-distributions.tsv", dir ? dir : "../shared");
    if (!(f = fopen(path, "r")))
        return 0;
    while (n < max && fgets(line, sizeof(line), f)) {
        char *save = NULL, *tok = strtok_r(line, "\t\n", &save);
        int col = 0;

        if (!tok || tok[0] == '#')
            continue;
        if (strcmp(tok, "dataset") == 0) {
            while ((tok = strtok_r(NULL, "\t\n", &save)) && nbins < 16) {
                char *dash = strchr(tok, '-');
                lo[nbins] = strncmp(tok, "lt", 2) == 0 ? 0 : atof(tok);
                hi[nbins] = strncmp(tok, "lt", 2) == 0 ? atof(tok + 2) : dash ? atof(dash + 1) : 0;
                nbins++;
            }
            continue;
        }
        snprintf(d[n].name, sizeof(d[n].name), "%s", tok);
        while ((tok = strtok_r(NULL, "\t\n", &save)) && col < nbins) {
            d[n].lo[col] = lo[col];
            d[n].hi[col] = hi[col];
            d[n].w[col++] = atof(tok);
        }
        d[n].nbins = col;
        n += col == nbins && nbins > 0;
    }
    fclose(f);
    return n;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A bin by its share, a length uniform in it (scaled), until `total`. */
static void sample_batch(const dist_t *d, int64_t total, uint64_t seed, batch_t *b)
{
    double wsum = 0;
    int64_t sum = 0;

    for (int i = 0; i < d->nbins; i++)
        wsum += d->w[i];
    b->n = 0;
    while (sum < total && b->n < MAX_SEQS) {
        double u = (double)(rng_next(&seed) >> 11) / 9007199254740992.0 * wsum;
        int bin = 0;
        while (bin < d->nbins - 1 && (u -= d->w[bin]) >= 0)
            bin++;
        int64_t lo = (int64_t)(d->lo[bin] * TOKENS_PER_K), hi = (int64_t)(d->hi[bin] * TOKENS_PER_K);
        lo = lo < 1 ? 1 : lo;
        int64_t len = hi > lo ? lo + (int64_t)(rng_next(&seed) % (uint64_t)(hi - lo)) : lo;
        if (len > total - sum)
            len = total - sum;
        b->lengths[b->n++] = len;
        sum += len;
    }
}

/* A batch with 25% headroom, or exactly full (every rank at capacity, as
 * frameworks pack batches: the planner's fill step cuts sequences into
 * uneven rings there). */
static void add_batch(const char *name, const int64_t *lengths, size_t n, int nranks, int full)
{
    batch_t *b = &batches[nbatches++];
    int64_t total = 0;

    snprintf(b->name, sizeof(b->name), "%.95s", name);
    for (size_t i = 0; i < n; i++)
        total += b->lengths[i] = lengths[i];
    b->n = n;
    b->capacity = full ? total / nranks : (total * 5 / 4 + nranks - 1) / nranks + 8;
}

static void make_batches(int nranks)
{
    dist_t dists[8];
    int nd = read_distributions(dists, 8);
    int64_t total = (int64_t)TOKENS_PER_RANK * nranks, len[MAX_SEQS];
    batch_t tmp;
    size_t n = 0;
    char name[96];

    nbatches = 0;
    for (int i = 0; i < 2 * nd && i < 6; i++) {
        int d = i % nd;
        /* two batches per distribution: the full size and five eighths */
        sample_batch(&dists[d], i < nd ? total : total * 5 / 8,
                     1000 + (uint64_t)nranks * 10 + (uint64_t)i, &tmp);
        int64_t longest = 0;
        for (size_t j = 0; j < tmp.n; j++)
            longest = tmp.lengths[j] > longest ? tmp.lengths[j] : longest;
        snprintf(name, sizeof(name), "%.31s (%zu seqs, longest %lld%s)", dists[d].name, tmp.n,
                 (long long)longest, i < nd ? ", exactly full" : "");
        /* the full-size batch fills every rank exactly: total is a multiple */
        add_batch(name, tmp.lengths, tmp.n, nranks, i < nd);
    }
    /* one sequence only, not a multiple of 2G */
    len[0] = total - 3;
    snprintf(name, sizeof(name), "one sequence of %lld", (long long)len[0]);
    add_batch(name, len, 1, nranks, 0);
    /* sequences shorter than the ring (and than 2G), some of one token */
    n = 0;
    for (int64_t l = 1; n < 12; l = l % (2 * nranks + 1) + 1 + (int64_t)(n % 3))
        len[n++] = l;
    add_batch("sequences shorter than 2G", len, n, nranks, 0);
    /* lengths k * 2G + r, r in 1..2G-1 */
    n = 0;
    for (int k = 0; k < 4; k++)
        len[n++] = (int64_t)(2 * nranks) * (k + 1) + 1 + (k * 5) % (2 * nranks > 1 ? 2 * nranks - 1 : 1);
    add_batch("lengths not divisible by 2G", len, n, nranks, 0);
    /* fewer tokens than ranks: most ranks hold nothing and pass NULL */
    len[0] = 1;
    len[1] = 2;
    add_batch("3 tokens, empty ranks with NULL buffers", len, 2, nranks, 0);
}

/* ---- one case on one rank ----------------------------------------------- */

static zc_status_t make_plan(int nranks, const batch_t *b, unsigned flags, zc_plan_h *plan)
{
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    int nnodes = nranks >= 2 ? 2 : 1;

    opts.flags = flags;
    return zc_plan_create(nnodes, nranks / nnodes, b->capacity, b->lengths, b->n, &opts, plan);
}

static void run_case(zc_comm_h comm, int rank, int nranks, int bi, int si, int mi, result_t *r)
{
    const rad_batch_t *ref = &refs[bi][si];
    zc_ring_attn_args_t args = ZC_RING_ATTN_ARGS_INITIALIZER;
    zc_plan_h plan = NULL;
    rad_local_t l = {0};
    zc_status_t st;
    int64_t wrong;

    r->ran = 1;
    if (make_plan(nranks, &batches[bi], modes[mi].plan_flags, &plan) != ZC_OK)
        CASE_FAIL("plan: %s", zc_get_last_error());
    if (rad_local_make(ref, plan, rank, PAD_ROWS, &l) != 0)
        CASE_FAIL("out of memory");
    rad_local_args(ref, &l, &args);
    args.mode = modes[mi].mode;
    if (l.rows == 0) {
        zc_ring_attn_args_t empty = ZC_RING_ATTN_ARGS_INITIALIZER;

        empty.mode = args.mode;
        empty.num_heads_q = args.num_heads_q;
        empty.num_heads_kv = args.num_heads_kv;
        empty.head_dim = args.head_dim;
        empty.dtype = args.dtype;
        args = empty; /* a rank without rows needs no buffer */
    }
    if (stream_engine) {
        emu_report_t rep, brep;
        zc_ring_attn_stats_t fst = ZC_RING_ATTN_STATS_INITIALIZER, bst = fst;

        args.stats = &fst;
        if ((st = emu_ring_attn(comm, plan, &args, 0, &rep)) != ZC_OK)
            CASE_FAIL("stream forward: %s: %s", zc_strerror(st), zc_get_last_error());
        r->kernels = rep.kernels;
        r->transfers = rep.transfers;
        r->overlapped = rep.overlapped;
        args.stats = &bst;
        if ((st = emu_ring_attn(comm, plan, &args, 1, &brep)) != ZC_OK)
            CASE_FAIL("stream backward: %s: %s", zc_strerror(st), zc_get_last_error());
        args.stats = NULL;
        r->what_if_native = rep.what_if_native + brep.what_if_native;
        snprintf(r->what_if_why, sizeof(r->what_if_why), "%s",
                 rep.what_if_native ? rep.what_if_why : brep.what_if_why);
        r->calls = fst.kernel_calls + bst.kernel_calls;
        r->on_cudnn = fst.blocks_cudnn + bst.blocks_cudnn;
        r->native = fst.blocks_native + bst.blocks_native;
        r->native_dtype = fst.native_dtype + bst.native_dtype;
    } else {
        if ((st = zc_ring_attn_fwd(comm, plan, &args)) != ZC_OK)
            CASE_FAIL("zc_ring_attn_fwd: %s: %s", zc_strerror(st), zc_get_last_error());
        if ((st = zc_ring_attn_bwd(comm, plan, &args)) != ZC_OK)
            CASE_FAIL("zc_ring_attn_bwd: %s: %s", zc_strerror(st), zc_get_last_error());
    }
    wrong = rad_local_check(ref, &l, 1, rad_tolerance(ref->dtype), r->worst);
    if (wrong < 0)
        CASE_FAIL("rank %d: rows past the plan's tokens were written", rank);
    if (wrong > 0)
        CASE_FAIL("rank %d: %lld elements off (worst out %.3g lse %.3g dq %.3g dk %.3g dv %.3g)",
                  rank, (long long)wrong, r->worst[0], r->worst[1], r->worst[2], r->worst[3],
                  r->worst[4]);
out:
    rad_local_free(&l);
    zc_plan_destroy(plan);
}

/* The host engine's backward queue order of case (bi, si, mi). */
static const char *bwd_order(int bi, int si, int mi)
{
    return (bi + si + mi) % 2 ? "reverse" : "forward";
}

static int rank_cases(int rank, int nranks, void *arg)
{
    zc_comm_h comm;

    (void)arg;
    setenv("ZC_NUM_THREADS", "1", 1);  /* up to 8 ranks share 2 cores */
    if (comm_init(rank, nranks, &comm) != 0 || (stream_engine && device_emu_install(comm))) {
        fprintf(stderr, "# rank %d: init: %s\n", rank, zc_get_last_error());
        return 1;
    }
    for (int bi = 0; bi < nbatches; bi++)
        for (int si = 0; si < active_shapes; si++)
            for (int mi = 0; mi < NMODES; mi++) {
                int c = (bi * NSHAPES + si) * NMODES + mi;
                /* blocks whole, cut very fine, or cut at the default size */
                static const int64_t slices[3] = {0, 1, 1024};
                /* the communicator's copy of ZC_RING_ATTN_SLICE_MFLOP and
                 * ZC_RING_ATTN_BWD_ORDER (parsed at init), alike on every rank */
                comm->settings.ring_attn_slice_mflop = slices[(bi + mi) % 3];
                comm->settings.ring_attn_bwd_reverse = strcmp(bwd_order(bi, si, mi), "reverse") == 0;
                run_case(comm, rank, nranks, bi, si, mi, &results[c * MAX_RANKS + rank]);
            }
    zc_comm_destroy(comm);
    return 0;
}

/* ---- the parent ------------------------------------------------------------ */

static double worst_fp32, worst_bf16;
static char worst_fp32_what[160], worst_bf16_what[160];

/* The stream engine's overlap: a ring rank with kernels and transfers has
 * a transfer that may run while a kernel computes (the KV of step 1 moves
 * during step 0); the LLaMA CP gather and scatter never overlap. */
static int overlap_ok(zc_ring_attn_mode_t mode, const result_t *res)
{
    if (mode == ZC_RING_ATTN_LLAMA_CP)
        return res->overlapped == 0;
    return res->kernels == 0 || res->transfers == 0 || res->overlapped > 0;
}

/* The stream engine's blocks with ZC_ATTN_BACKEND=cudnn, as the stats
 * count them: each on cuDNN or native; every bf16 one on cuDNN (head dim
 * 40 is a multiple of 8), every fp32 one native for its dtype. */
static int routes_ok(zc_datatype_t dtype, const result_t *res)
{
    if (res->on_cudnn + res->native != res->calls)
        return 0;
    if (dtype == ZC_FLOAT32)
        return res->on_cudnn == 0 && res->native_dtype == res->calls;
    return res->native == 0;
}

/* Print one TAP line per case from every rank's result. */
static void report(int nranks, int ranks_failed, const char *prefix)
{
    static const char *names[RAD_NRESULTS] = {"out", "lse", "dq", "dk", "dv"};

    for (int bi = 0; bi < nbatches; bi++)
        for (int si = 0; si < active_shapes; si++)
            for (int mi = 0; mi < NMODES; mi++) {
                int c = (bi * NSHAPES + si) * NMODES + mi, bad = ranks_failed != 0;
                double worst[RAD_NRESULTS] = {0};
                const char *why = ranks_failed ? "a rank crashed or timed out" : "";

                static char overlap_why[320];

                for (int r = 0; r < nranks; r++) {
                    const result_t *res = &results[c * MAX_RANKS + r];
                    if (!res->ran || res->failed) {
                        bad = 1;
                        why = res->ran ? res->why : "not run";
                    } else if (stream_engine && res->what_if_native > 0) {
                        bad = 1;
                        snprintf(overlap_why, sizeof(overlap_why), "rank %d: %d bf16/fp16 d64/d128 "
                                 "blocks would run natively, first: %.200s", r,
                                 res->what_if_native, res->what_if_why);
                        why = overlap_why;
                    } else if (stream_engine && !routes_ok(shapes[si].dtype, res)) {
                        bad = 1;
                        snprintf(overlap_why, sizeof(overlap_why), "rank %d: %lld blocks, %lld on "
                                 "cuDNN, %lld native (%lld for the dtype)", r,
                                 (long long)res->calls, (long long)res->on_cudnn,
                                 (long long)res->native, (long long)res->native_dtype);
                        why = overlap_why;
                    } else if (stream_engine && !overlap_ok(modes[mi].mode, res)) {
                        bad = 1;
                        snprintf(overlap_why, sizeof(overlap_why), "rank %d: %d of %d transfers "
                                 "overlap its %d kernels", r, res->overlapped, res->transfers,
                                 res->kernels);
                        why = overlap_why;
                    }
                    for (int w = 0; w < RAD_NRESULTS; w++)
                        worst[w] = res->worst[w] > worst[w] ? res->worst[w] : worst[w];
                }
                double all = 0;
                int at = 0;
                for (int w = 0; w < RAD_NRESULTS; w++)
                    if (worst[w] > all)
                        all = worst[w], at = w;
                double *keep = shapes[si].dtype == ZC_FLOAT32 ? &worst_fp32 : &worst_bf16;
                if (!bad && all > *keep) {
                    *keep = all;
                    snprintf(shapes[si].dtype == ZC_FLOAT32 ? worst_fp32_what : worst_bf16_what,
                             sizeof(worst_fp32_what), "%s of %.96s, %d ranks, %s", names[at],
                             batches[bi].name, nranks, modes[mi].name);
                }
                ok(!bad,
                   "%s%d ranks, %s, %s, %s%s%s: out, lse, dq, dk, dv match (worst %.2g)%s%s%s",
                   prefix, nranks, batches[bi].name, zc_datatype_name(shapes[si].dtype),
                   modes[mi].name, stream_engine ? "" : ", bwd ",
                   stream_engine ? "" : bwd_order(bi, si, mi), all,
                   stream_engine ? "; no stream race, transfers overlap as the mode wants, every "
                                   "block on cuDNN's decision as bf16/fp16 d64/d128" : "",
                   bad ? ": " : "", bad ? why : "");
            }
}

static int run_ranks(int nranks, mp_rank_fn fn, void *arg)
{
    return mp_run(nranks, CASE_TIMEOUT_S, fn, arg);
}

/* What the stream engine's forward schedules look like, every batch and
 * shape of the last run, per mode (BENCHMARKS.md quotes it). */
static void schedule_summary(int nranks)
{
    for (int mi = 0; mi < NMODES; mi++) {
        long kernels = 0, transfers = 0, overlapped = 0;

        for (int c = 0; c < MAX_CASES; c++) {
            if (c % NMODES != mi)
                continue;
            for (int r = 0; r < nranks; r++) {
                kernels += results[c * MAX_RANKS + r].kernels;
                transfers += results[c * MAX_RANKS + r].transfers;
                overlapped += results[c * MAX_RANKS + r].overlapped;
            }
        }
        diag("stream schedule, %d ranks, %s forward: %ld kernel calls, %ld transfers, %ld of "
             "them concurrent with a kernel", nranks, modes[mi].name, kernels, transfers,
             overlapped);
    }
}

static void test_batches(int nranks)
{
    make_batches(nranks);
    for (int bi = 0; bi < nbatches; bi++)
        for (int si = 0; si < NSHAPES; si++) {
            rad_batch_t *b = &refs[bi][si];
            if (rad_batch_init(b, batches[bi].lengths, batches[bi].n, shapes[si].hq,
                               shapes[si].hkv, shapes[si].d, shapes[si].dtype,
                               (uint64_t)(nranks * 100 + bi * 10 + si)) != 0 ||
                rad_batch_reference(b, 1) != ZC_OK)
                diag("reference of %s failed: %s", batches[bi].name, zc_get_last_error());
        }
    for (stream_engine = 0; stream_engine < 2; stream_engine++) {
        memset(results, 0, sizeof(result_t) * MAX_CASES * MAX_RANKS);
        report(nranks, run_ranks(nranks, rank_cases, NULL),
               stream_engine ? "stream engine, emulated device: " : "");
    }
    stream_engine = 0;
    schedule_summary(nranks);
    for (int bi = 0; bi < nbatches; bi++)
        for (int si = 0; si < NSHAPES; si++)
            rad_batch_free(&refs[bi][si]);
}

/* NaN in a key, +Inf in a value, NaN in dout: fp32, 4 ranks, every mode. */
static void test_nonfinite(void)
{
    static const int64_t lengths[] = {97, 64, 33};
    rad_batch_t *b = &refs[0][0];
    int nranks = 4;

    nbatches = 0;
    add_batch("NaN in k, +Inf in v, NaN in dout", lengths, 3, nranks, 0);
    rad_batch_init(b, lengths, 3, shapes[0].hq, shapes[0].hkv, shapes[0].d, ZC_FLOAT32, 77);
    rad_batch_poke(b, 1, (b->offset[0] + 40) * b->hkv * b->d + 3, NAN);
    rad_batch_poke(b, 2, (b->offset[1] + 10) * b->hkv * b->d + b->d + 1, INFINITY);
    rad_batch_poke(b, 3, (b->offset[2] + 5) * b->hq * b->d, NAN);
    rad_batch_reference(b, 1);
    memset(results, 0, sizeof(result_t) * MAX_CASES * MAX_RANKS);
    active_shapes = 1;
    report(nranks, run_ranks(nranks, rank_cases, NULL), "non-finite inputs propagate as in the "
           "reference: ");
    active_shapes = NSHAPES;
    rad_batch_free(b);
}

/* ---- bad arguments ----------------------------------------------------------- */

static int rank_bad(int rank, int nranks, void *arg)
{
    static const int64_t lengths[] = {50, 30, 20, 7}, other[] = {50, 30, 20, 8};
    zc_ring_attn_args_t a = ZC_RING_ATTN_ARGS_INITIALIZER, bad;
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_ring_attn_stats_t stats = ZC_RING_ATTN_STATS_INITIALIZER;
    zc_plan_h plan, small, diff, windowed;
    zc_plan_rank_t mine;
    zc_comm_h comm;
    float *buf;

    (void)arg;
    setenv("ZC_NUM_THREADS", "1", 1);
    MP_CHECK(comm_init(rank, nranks, &comm) == 0 && device_emu_install(comm) == 0, "init");
    MP_CHECK(zc_plan_create(2, nranks / 2, 40, lengths, 4, &opts, &plan) == ZC_OK, "plan");
    MP_CHECK(zc_plan_create(1, nranks / 2, 80, lengths, 4, &opts, &small) == ZC_OK, "plan");
    MP_CHECK(zc_plan_create(2, nranks / 2, 40, rank == 0 ? other : lengths, 4, &opts, &diff) ==
                 ZC_OK, "plan");
    opts.flags = ZC_PLAN_WINDOW, opts.window_left = 7;
    MP_CHECK(zc_plan_create(2, nranks / 2, 40, lengths, 4, &opts, &windowed) == ZC_OK, "plan");
    zc_plan_rank(plan, rank, &mine);
    MP_CHECK(mine.tokens > 0, "every rank holds tokens");
    /* room for 16 rows more than the plan needs: the plan that differs on
     * rank 0 fits too, so that only the agreement can refuse it */
    int64_t rows = mine.tokens + 16;
    buf = calloc((size_t)rows * 9 * 16, sizeof(float));
    a.num_heads_q = 2;
    a.num_heads_kv = 2;
    a.head_dim = 8;
    a.tokens = rows;
    a.q = buf, a.k = buf + rows * 16, a.v = buf + rows * 32;
    a.out = buf + rows * 48, a.lse = buf + rows * 64;
    a.dout = buf + rows * 80, a.dq = buf + rows * 96;
    a.dk = buf + rows * 112, a.dv = buf + rows * 128;

    bad = a, bad.num_heads_q = 3;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_INVALID_ARG, "num_heads_q");
    bad = a, bad.num_heads_kv = rank == 0 ? 1 : 2;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_MISMATCH, "disagree");
    bad = a, bad.tokens = rank == 1 ? mine.tokens - 1 : rows;
    EXPECT(zc_ring_attn_bwd(comm, plan, &bad), rank == 1 ? ZC_ERR_INVALID_ARG : ZC_ERR_MISMATCH,
           rank == 1 ? "tokens" : "refused");
    /* rank 0 on the stream engine, the others on the host engine: their
     * transfers could never meet, so the agreement refuses it */
    EXPECT(rank == 0 ? emu_ring_attn(comm, plan, &a, 0, NULL) : zc_ring_attn_fwd(comm, plan, &a),
           ZC_ERR_MISMATCH, "host or stream");
    /* backward queue orders that differ: the routed-call lists and tags
     * would differ, so the agreement refuses it; a bad value is refused
     * on its rank, nobody waiting for it */
    comm->settings.ring_attn_bwd_reverse = rank == 0; /* as if the init had not agreed */
    EXPECT(zc_ring_attn_bwd(comm, plan, &a), ZC_ERR_MISMATCH, "ZC_RING_ATTN_BWD_ORDER");
    comm->settings.ring_attn_bwd_reverse = 0;
    EXPECT(zc_ring_attn_fwd(comm, small, &a), ZC_ERR_MISMATCH, "plan");
    EXPECT(zc_ring_attn_fwd(comm, diff, &a), ZC_ERR_MISMATCH, "plan");
    bad = a, bad.q = NULL;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_INVALID_ARG, "q");
    bad = a, bad.dq = NULL;
    EXPECT(zc_ring_attn_bwd(comm, plan, &bad), ZC_ERR_INVALID_ARG, "dq");
    EXPECT(zc_ring_attn_fwd(comm, plan, NULL), ZC_ERR_INVALID_ARG, "args");
    EXPECT(zc_ring_attn_fwd(comm, NULL, &a), ZC_ERR_INVALID_ARG, "plan");
    EXPECT(zc_ring_attn_fwd(NULL, plan, &a), ZC_ERR_INVALID_ARG, "comm");
    bad = a, bad.size = 8;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_INVALID_ARG, "ZC_RING_ATTN_ARGS_INITIALIZER");
    bad = a, bad.dtype = ZC_FLOAT16;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_INVALID_ARG, "dtype");
    bad = a, bad.head_dim = 300;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_INVALID_ARG, "head_dim");
    bad = a, bad.mode = (zc_ring_attn_mode_t)7;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_INVALID_ARG, "mode");
    bad = a, bad.scale = INFINITY;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_INVALID_ARG, "scale");
    bad = a, bad.memtype = ZC_MEM_CUDA;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_UNSUPPORTED, "memtype");
    /* masks other than causal run on both forms (tests/test_ring_attn_mask),
     * on a plan balanced for any mask; ranks that differ on the mask would
     * skip different hops, so the agreement refuses that */
    bad = a, bad.flags = ZC_ATTN_WINDOW, bad.window_left = rank == 0 ? 15 : 16;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_MISMATCH, "disagree");
    bad = a, bad.flags = ZC_ATTN_WINDOW, bad.window_left = 15;
    MP_CHECK(zc_ring_attn_fwd(comm, windowed, &bad) == ZC_OK &&
                 zc_ring_attn_bwd(comm, windowed, &bad) == ZC_OK,
             "a window runs on the host forms: %s", zc_get_last_error());
    MP_CHECK(zc_ring_attn_fwd(comm, windowed, &a) == ZC_OK,
             "the causal mask on a plan balanced for a window runs: %s", zc_get_last_error());
    bad = a, bad.window_left = 15;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_INVALID_ARG, "window_left");
    bad = a, bad.flags = ZC_ATTN_WINDOW, bad.window_right = -2;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_INVALID_ARG, "window_right");
    bad = a, bad.flags = 1u << 7;
    EXPECT(zc_ring_attn_fwd(comm, plan, &bad), ZC_ERR_INVALID_ARG, "flags");
    bad = a, bad.flags = ZC_ATTN_WINDOW, bad.window_left = -1, bad.window_right = 0;
    MP_CHECK(zc_ring_attn_fwd(comm, plan, &bad) == ZC_OK, "the causal mask as a window runs: %s",
             zc_get_last_error());

    /* the communicator still works, and the stats add up */
    a.stats = &stats;
    MP_CHECK(zc_ring_attn_fwd(comm, plan, &a) == ZC_OK, "valid forward after the errors");
    MP_CHECK(stats.total_seconds > 0 && stats.compute_seconds > 0 && stats.kernel_calls > 0 &&
                 stats.compute_seconds + stats.wait_seconds <= stats.total_seconds,
             "forward stats: total %g compute %g wait %g calls %lld", stats.total_seconds,
             stats.compute_seconds, stats.wait_seconds, (long long)stats.kernel_calls);
    MP_CHECK(zc_ring_attn_bwd(comm, plan, &a) == ZC_OK, "valid backward after the errors");
    free(buf);
    zc_plan_destroy(plan);
    zc_plan_destroy(small);
    zc_plan_destroy(diff);
    zc_plan_destroy(windowed);
    zc_comm_destroy(comm);
    return 0;
}

int main(void)
{
    static const int sizes[] = {1, 2, 4, 8};
    char topo[64] = "";
    dist_t probe[1];

    setenv("ZC_SOCKET_IFNAME", "lo", 0);
    /* the emulated device routes every block as a CUDA device with cuDNN
     * would (tests/stream_emu.h); the host engine ignores it */
    setenv("ZC_ATTN_BACKEND", "cudnn", 1);
    setenv("ZC_ROUTED_MIN_BYTES", "1024", 1); /* the test's hops are small: route them anyway */
    have_rails = rails_on_loopback(topo, sizeof(topo));
    if (!have_rails)
        diag("no node topology (tests/cluster/zc_cluster --topo-xml): routed hops go direct");
    results = mp_shared(sizeof(result_t) * MAX_CASES * MAX_RANKS);
    if (!results)
        tap_skip_all("no shared memory");
    if (read_distributions(probe, 1) == 0)
        diag("no %s/data/length-distributions.tsv: the sampled batches are skipped",
             getenv("ZC_SHARED_DIR") ? getenv("ZC_SHARED_DIR") : "../shared");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        if (read_distributions(probe, 1) == 0)
            tap_skip(2 * 6 * NSHAPES * NMODES, "no length distributions (ZC_SHARED_DIR)");
        test_batches(sizes[i]);
    }
    test_nonfinite();
    ok(run_ranks(4, rank_bad, NULL) == 0,
       "bad arguments: head counts, buffers too small, a plan of another size, plans or heads "
       "that differ across ranks, one rank on the stream engine, backward queue orders that "
       "differ or are neither forward nor reverse, NULL pointers, dtype, "
       "head_dim, mode, scale, memtype, masks other than causal on the stream forms, masks "
       "that differ across ranks; each names its argument, nothing hangs, the communicator "
       "works afterwards");
    diag("worst fp32 error %.3g (%s); worst bf16 error %.3g (%s)", worst_fp32, worst_fp32_what,
         worst_bf16, worst_bf16_what);
    if (have_rails)
        unlink(topo);
    return tap_done();
}
