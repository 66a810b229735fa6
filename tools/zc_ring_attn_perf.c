/* zc_ring_attn_perf: ring attention forward and backward on batches drawn
 * from the paper's datasets, every mode side by side in one run: TE CP
 * (even split, direct hops), LLaMA CP (even split, KV all-gather),
 * routing (even split, Zeppelin engine with routed inter-node hops) and
 * Zeppelin (hierarchical plan + zone engine + routing).  One row per
 * (dataset, total context, mode) in nccl-tests style: time per iteration
 * of the forward and the backward (the slowest rank's, median over the
 * iterations, modes interleaved iteration by iteration), tokens/s, attention
 * TFLOP/s, the share of the time spent waiting for communication that
 * compute did not hide, bytes sent per rank, #wrong against the
 * single-process reference (-c 1), and the speedup over TE CP.
 *
 * -G runs the device forms (zc_ring_attn_fwd_stream/bwd_stream) on GPU
 * memory instead, one device per rank, each pass timed up to
 * zc_stream_synchronize; "exposed" is then not known (the stream engine
 * overlaps on the device) and printed as 0.  Each row is followed by where
 * its blocks ran (ZC_ATTN_BACKEND: on cuDNN, natively and why), and, in
 * bf16, "vs_sdpa" gives one cuDNN SDPA call over the whole batch on rank
 * 0's GPU (forward + backward, zc_attn_gpu_bench.h) divided by the mode's
 * time: 1.0 is a ring as fast as one attention call on one GPU.
 *
 * -T runs every mode a second time through a kernel table of libzcomm's
 * own CPU kernels (tools/zc_attn_table.h, zc_attn_kernels(3)), interleaved
 * with it: the same kernels, so "vs_own" (the mode's time without the
 * table over its time through it) is what the table's calls, gathers and
 * merges cost.  Host memory only (the stream forms' kernel table is
 * timed by tools/zc_attn_torch_baseline.py --kernel).
 *
 * --window L,R (-W) and --full (-F) run every mode under that mask
 * (flash-attention's window_size, -1 unbounded) instead of causal: the
 * plans balanced for it, TE CP passing every block round its ring and
 * masking it as TransformerEngine does, Zeppelin's rings moving each KV
 * block only as far as a window sees it; MB/rank is then the point. */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_common.h"
#include "zc_attn_gpu_bench.h"
#include "zc_attn_table.h"
#include "zc_plan_dataset.h"
#include "zc_ring_attn_data.h"
#include "zc_ring_attn_device.h"

#define TOOL "zc_ring_attn_perf"

enum { MODE_TE, MODE_LLAMA, MODE_ROUTING, MODE_ZEPPELIN, NMODES };

static const struct {
    const char *name;
    zc_ring_attn_mode_t mode;
    unsigned plan_flags;
} modes[NMODES] = {
    {"te_cp", ZC_RING_ATTN_TE_CP, ZC_PLAN_EVEN_SPLIT},
    {"llama_cp", ZC_RING_ATTN_LLAMA_CP, ZC_PLAN_EVEN_SPLIT},
    {"routing", ZC_RING_ATTN_ZEPPELIN, ZC_PLAN_EVEN_SPLIT},
    {"zeppelin", ZC_RING_ATTN_ZEPPELIN, 0},
};

typedef struct {
    char datasets[64];      /* -D: names, comma-separated, or "all" */
    int scale;              /* -s: lengths divided by this */
    int hq, hkv, head_dim;  /* -H -K -A */
    char modes[64];         /* -m: names, comma-separated, or "all" */
    double capacity;        /* -L: device capacity, times the mean tokens per rank */
    uint64_t seed;          /* -S */
    int verbose;            /* -v: every rank's compute and wait */
    int device;             /* -G: the stream forms on GPU memory */
    int table;              /* -T: each mode also through a kernel table of our kernels */
    int masked;             /* -W or -F: the mask below, else causal */
    int left, right;        /* the window, -1 unbounded */
} ra_opts_t;

static int parse_extra(int opt, const char *arg, void *ctx)
{
    ra_opts_t *o = ctx;

    switch (opt) {
    case 'D': snprintf(o->datasets, sizeof(o->datasets), "%s", arg); return 0;
    case 's': o->scale = atoi(arg); return o->scale < 1;
    case 'H': o->hq = atoi(arg); return o->hq < 1;
    case 'K': o->hkv = atoi(arg); return o->hkv < 1;
    case 'A': o->head_dim = atoi(arg); return o->head_dim < 1;
    case 'm': snprintf(o->modes, sizeof(o->modes), "%s", arg); return 0;
    case 'L': o->capacity = atof(arg); return o->capacity < 1.0;
    case 'S': o->seed = strtoull(arg, NULL, 0); return 0;
    case 'v': o->verbose = 1; return 0;
    case 'G': o->device = 1; return 0;
    case 'T': o->table = 1; return 0;
    case 'F': o->masked = 1, o->left = o->right = -1; return 0;
    case 'W': o->masked = 1; return sscanf(arg, "%d,%d", &o->left, &o->right) != 2 ||
                                    o->left < -1 || o->right < -1;
    }
    return 1;
}


/* Attention FLOPs of the batch under its mask, forward: 4 D H per visible
 * (query, key) pair (causal: 2 S^2 D H per sequence). */
static double batch_flops(const rad_batch_t *b)
{
    double pairs = 0;
    int window = (b->flags & ZC_ATTN_WINDOW) != 0;
    int64_t left = window ? b->window_left : -1, right = window ? b->window_right : 0;

    for (size_t s = 0; s < b->nseqs; s++) {
        int64_t n = b->lengths[s];

        if (!window) {
            pairs += (double)n * (double)(n + 1) / 2;
            continue;
        }
        for (int64_t i = 0; i < n; i++) {
            int64_t lo = left < 0 || i - left < 0 ? 0 : i - left;
            int64_t hi = right < 0 || i + right > n - 1 ? n - 1 : i + right;

            pairs += (double)(hi - lo + 1);
        }
    }
    return 4.0 * pairs * b->d * b->hq;
}

typedef struct {
    double fwd, bwd;        /* seconds per iteration: median over iterations of the slowest rank */
    double exposed;         /* wait / total, mean over ranks and iterations */
    double sent;            /* bytes sent per rank and iteration, mean */
    int64_t wrong;
} result_t;

/* One mode's plan and buffers on this rank, and what its iterations saw. */
typedef struct {
    int on;
    zc_plan_h plan;
    rad_local_t local;
    rad_device_t dev;       /* -G */
    zc_ring_attn_args_t args;
    zc_ring_attn_stats_t stats;
    double *fwd, *bwd;      /* [iters] */
    double exposed, sent, compute, wait, total;
    int64_t blocks[8];      /* this rank's blocks: on cuDNN, native, and native_* */
} mode_run_t;

static void plan_line(zc_comm_h comm, zc_plan_h plan, const char *mode)
{
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    int rank, zones[3] = {0, 0, 0};

    zc_comm_rank(comm, &rank);
    if (rank != 0 || zc_plan_info(plan, &info) != ZC_OK)
        return;
    for (int r = 0; r < info.nrings; r++) {
        zc_plan_ring_t ring;
        if (zc_plan_ring(plan, r, &ring) == ZC_OK)
            zones[ring.zone]++;
    }
    zones[ZC_ZONE_LOCAL] = (int)info.nseqs - info.nrings;
    printf("#   %s plan: %d inter-node rings, %d intra-node rings, %d local sequences%s\n", mode,
           zones[ZC_ZONE_INTER], zones[ZC_ZONE_INTRA], zones[ZC_ZONE_LOCAL],
           info.flags & ZC_PLAN_CUT ? " (some cut to fill)" : "");
}

/* -T: the same kernels through a kernel table, the engine's calls as they are */
static zc_own_table_t own_table;

static void mode_setup(zc_comm_h comm, const ra_opts_t *o, const rad_batch_t *b,
                       const int64_t *lengths, size_t count, int64_t capacity, int m, int iters,
                       int table, mode_run_t *run)
{
    zc_plan_opts_t popts = ZC_PLAN_OPTS_INITIALIZER;
    zc_ring_attn_args_t init = ZC_RING_ATTN_ARGS_INITIALIZER;
    int rank, size, nnodes;
    zc_status_t st;

    zc_comm_rank(comm, &rank);
    zc_comm_size(comm, &size);
    zc_comm_node_count(comm, &nnodes);
    popts.flags = modes[m].plan_flags;
    if (o->masked) { /* balanced for the mask (an even split stays TE CP's zigzag) */
        popts.flags |= ZC_PLAN_WINDOW;
        popts.window_left = o->left;
        popts.window_right = o->right;
    }
    /* the plan's hops then name the routes this communicator runs */
    zc_comm_rail_count(comm, &popts.rails);
    st = zc_plan_create(nnodes, size / nnodes, capacity, lengths, count, &popts, &run->plan);
    if (st != ZC_OK)
        zc_perf_die(TOOL, "zc_plan_create", st);
    if (rad_local_make(b, run->plan, rank, 0, &run->local) != 0)
        zc_perf_die(TOOL, "allocation", ZC_ERR_NO_MEMORY);
    run->args = init;
    rad_local_args(b, &run->local, &run->args);
    run->args.mode = modes[m].mode;
    run->args.kernels = table ? &own_table.kernels : NULL;
    run->stats.size = sizeof(run->stats);
    run->args.stats = &run->stats;
    if (o->device && (st = rad_device_make(b, &run->local, &run->dev, &run->args)))
        zc_perf_die(TOOL, "device buffers", st);
    run->fwd = calloc((size_t)iters, sizeof(double));
    run->bwd = calloc((size_t)iters, sizeof(double));
    if (!run->fwd || !run->bwd)
        zc_perf_die(TOOL, "allocation", ZC_ERR_NO_MEMORY);
    run->on = 1;
}

/* One iteration of one mode: forward, then backward, each started by a
 * barrier and timed by its slowest rank (known at rank 0). */
static zc_status_t mode_pass(zc_comm_h comm, const mode_run_t *run, int device, int backward)
{
    zc_status_t st;

    if (!device)
        return backward ? zc_ring_attn_bwd(comm, run->plan, &run->args)
                        : zc_ring_attn_fwd(comm, run->plan, &run->args);
    st = backward ? zc_ring_attn_bwd_stream(comm, run->plan, &run->args, NULL)
                  : zc_ring_attn_fwd_stream(comm, run->plan, &run->args, NULL);
    return st != ZC_OK ? st : zc_stream_synchronize(comm, NULL);
}

static void mode_iter(zc_comm_h comm, mode_run_t *run, int device, int it)
{
    for (int pass = 0; pass < 2; pass++) {
        zc_status_t st;
        double t0;

        zc_barrier(comm);
        t0 = zc_perf_now();
        st = mode_pass(comm, run, device, pass);
        if (st != ZC_OK)
            zc_perf_die(TOOL, pass ? "zc_ring_attn_bwd" : "zc_ring_attn_fwd", st);
        t0 = zc_perf_max(comm, zc_perf_now() - t0);
        if (it < 0)
            continue; /* warm-up */
        (pass ? run->bwd : run->fwd)[it] = t0;
        run->exposed += run->stats.total_seconds > 0
                            ? run->stats.wait_seconds / run->stats.total_seconds : 0;
        run->sent += (double)run->stats.bytes_sent;
        run->compute += run->stats.compute_seconds;
        run->wait += run->stats.wait_seconds;
        run->total += run->stats.total_seconds;
        {
            const int64_t counts[8] = {
                run->stats.blocks_cudnn, run->stats.blocks_native, run->stats.native_chosen,
                run->stats.native_dtype, run->stats.native_head_dim, run->stats.native_shape,
                run->stats.native_no_engine, run->stats.native_failed};

            for (int i = 0; i < 8; i++)
                run->blocks[i] += counts[i];
        }
    }
}

/* Where the blocks of one iteration ran, summed over the ranks. */
static void blocks_line(zc_comm_h comm, const mode_run_t *run, int iters, const char *mode)
{
    int64_t all[8];
    int rank;

    for (int i = 0; i < 8; i++)
        all[i] = zc_perf_sum(comm, run->blocks[i]) / iters;
    zc_comm_rank(comm, &rank);
    if (rank == 0)
        printf("#   %s blocks per iteration (all ranks, fwd + bwd): %lld on cuDNN, %lld native "
               "(chosen %lld, dtype %lld, head dim %lld, shape %lld, no engine %lld, cuDNN "
               "failed %lld)\n", mode, (long long)all[0], (long long)all[1], (long long)all[2],
               (long long)all[3], (long long)all[4], (long long)all[5], (long long)all[6],
               (long long)all[7]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static result_t mode_finish(zc_comm_h comm, const zc_perf_opts_t *po, const ra_opts_t *o,
                            const rad_batch_t *b, int m, mode_run_t *run)
{
    result_t res = {0};
    double worst[RAD_NRESULTS];
    int size;

    zc_comm_size(comm, &size);
    if (o->verbose) {
        int rank;
        zc_comm_rank(comm, &rank);
        /* the stream forms' calls only enqueue: their time is the cost of a call */
        fprintf(stderr, "# rank %d, %s: per fwd+bwd %.3f ms in the calls%s, compute %.3f ms, "
                "wait %.3f ms\n", rank, modes[m].name, run->total / po->iters * 1e3,
                o->device ? " (enqueueing)" : "", run->compute / po->iters * 1e3,
                run->wait / po->iters * 1e3);
    }
    if (!run->args.kernels)
        blocks_line(comm, run, po->iters, modes[m].name);
    res.fwd = median(run->fwd, po->iters);
    res.bwd = median(run->bwd, po->iters);
    /* means over this rank's passes, then over the ranks */
    res.exposed = (double)zc_perf_sum(comm, llround(run->exposed / (2 * po->iters) * 1e6)) /
                  1e6 / size;
    res.sent = (double)zc_perf_sum(comm, llround(run->sent / (2 * po->iters))) / size;
    if (o->device && po->check && rad_device_download(&run->dev, &run->local) != ZC_OK)
        zc_perf_die(TOOL, "download", ZC_ERR_TRANSPORT);
    if (po->check) {
        int64_t wrong = rad_local_check(b, &run->local, 1,
                                        rad_tolerance(b->dtype), worst);
        res.wrong = zc_perf_sum(comm, wrong < 0 ? 1 : wrong);
    }
    rad_device_free(&run->dev);
    rad_local_free(&run->local);
    zc_plan_destroy(run->plan);
    free(run->fwd);
    free(run->bwd);
    memset(run, 0, sizeof(*run));
    return res;
}

/* One cuDNN SDPA call over the whole batch on this GPU, forward +
 * backward, seconds; 0 where it cannot run (fp32, no cuDNN), said why. */
static double sdpa_seconds(const ra_opts_t *o, const zc_perf_opts_t *po, const int64_t *lengths,
                           size_t count)
{
    int32_t *cu = malloc((count + 1) * sizeof(int32_t));
    zab_case_t c = {.hq = o->hq, .hkv = o->hkv, .d = o->head_dim, .causal = 1,
                    .warmup = po->warmup, .iters = po->iters, .ways = 1u << ZAB_SDPA, .fwd = 1,
                    .bwd = 1};
    zab_batch_t *b = NULL;
    zab_result_t r;
    double s = 0;

    if (!cu || po->dtype == ZC_FLOAT32) {
        free(cu);
        return 0;
    }
    cu[0] = 0;
    for (size_t i = 0; i < count; i++)
        cu[i + 1] = cu[i] + (int32_t)lengths[i];
    if (zab_open(cu, (int)count, o->hq * o->head_dim, o->hkv * o->head_dim, po->dtype, 0, &b) !=
            ZC_OK ||
        zab_time(b, &c, &r) != ZC_OK)
        printf("#   one cuDNN SDPA call over the batch did not run: %s\n", zc_get_last_error());
    else if (r.ms[0][ZAB_SDPA] > 0 && r.ms[1][ZAB_SDPA] > 0)
        s = (r.ms[0][ZAB_SDPA] + r.ms[1][ZAB_SDPA]) * 1e-3;
    else
        printf("#   one cuDNN SDPA call over the batch did not run: %s\n",
               r.why[0][ZAB_SDPA][0] ? r.why[0][ZAB_SDPA] : r.why[1][ZAB_SDPA]);
    zab_close(b);
    free(cu);
    return s;
}

int main(int argc, char **argv)
{
    ra_opts_t o = {.datasets = "all", .scale = 16, .hq = 8, .hkv = 8, .head_dim = 64,
                   .modes = "all", .capacity = 1.25, .seed = 1};
    zc_perf_opts_t po;
    zc_comm_h comm;
    int rank, size, nnodes;
    double speedup_sum[NMODES] = {0};
    int speedup_rows = 0;
    int64_t wrong_total = 0;

    static const struct option longopts[] = {
        {"window", required_argument, NULL, 'W'}, {"full", no_argument, NULL, 'F'}, {NULL, 0, NULL, 0}};

    zc_perf_parse_long(argc, argv, TOOL,
                  "  -D LIST   datasets: arxiv, github, prolong64k, comma-separated, or all\n"
                  "  -s N      divide every sampled length by N (default 16)\n"
                  "  -H N      query heads (default 8)\n"
                  "  -K N      key/value heads (default 8)\n"
                  "  -A N      head dimension (default 64)\n"
                  "  -m LIST   modes: te_cp, llama_cp, routing, zeppelin, or all\n"
                  "  -L F      device capacity: F times the mean tokens per rank (default 1.25)\n"
                  "  -S SEED   batch seed (default 1)\n"
                  "  -v        print every rank's compute and wait times (stderr)\n"
                  "  -G        GPU memory and the stream forms, one device per rank\n"
                  "  -T        each mode also through a kernel table of libzcomm's own kernels\n"
                  "  -W, --window L,R  the mask: keys left and right of a query it sees, -1 "
                  "unbounded\n"
                  "                    ((w - 1, 0): a sliding window of w keys)\n"
                  "  -F, --full        the full mask (every key of the sequence)\n"
                  "  -b/-e/-f  total context in tokens per batch (K = 1024)\n",
                  "D:s:H:K:A:m:L:S:vGTW:F", longopts, parse_extra, &o, &po);
    if (po.min_bytes == 8 && po.max_bytes == (size_t)64 << 20)
        po.min_bytes = po.max_bytes = 16384; /* no -b/-e: one batch of 16K tokens */
    if (o.hq % o.hkv != 0 || (po.dtype != ZC_FLOAT32 && po.dtype != ZC_BFLOAT16)) {
        fprintf(stderr, TOOL ": -H must be a multiple of -K; -d float or bfloat16\n");
        return 2;
    }
    if (o.table && o.device) {
        fprintf(stderr, TOOL ": -T runs host memory (its table is libzcomm's CPU kernels); the "
                "stream forms' table: tools/zc_attn_torch_baseline.py --kernel\n");
        return 2;
    }
    zc_own_table_init(&own_table, ZC_ATTN_KERNELS_BOTTOM_RIGHT | ZC_ATTN_KERNELS_FLOAT32_OUT);
    comm = zc_perf_init(TOOL);
    if (o.device) {
        int local, ndev;
        zc_status_t st;

        zc_comm_local_rank(comm, &local);
        st = rad_device_select(local, &ndev);
        if (st != ZC_OK)
            fprintf(stderr, TOOL ": -G: %s\n", ndev == 0 ? "no CUDA device (or built without "
                                                            "CUDA)" : "cannot select a device");
        /* every rank stops if one cannot run */
        if (zc_perf_sum(comm, st != ZC_OK) > 0) {
            zc_comm_destroy(comm);
            return 2;
        }
    }
    zc_comm_rank(comm, &rank);
    zc_comm_size(comm, &size);
    zc_comm_node_count(comm, &nnodes);
    if (rank == 0) {
        printf("# %s: libzcomm %s, %d ranks on %d nodes\n", TOOL, ZC_VERSION_STRING, size,
               nnodes);
        printf("# heads %d/%d, head dim %d, %s, lengths / %d, capacity %.2f x mean, iters %d, "
               "warmup %d, check %d, %s\n", o.hq, o.hkv, o.head_dim, zc_datatype_name(po.dtype),
               o.scale, o.capacity, po.iters, po.warmup, po.check,
               o.device ? "GPU (stream forms)" : "CPU");
        if (o.masked)
            printf("# mask: window (%d, %d)%s\n", o.left, o.right,
                   o.left < 0 && o.right < 0 ? ", full" : "");
        else
            printf("# mask: causal\n");
        printf("#\n# %-10s %8s %5s %-15s %9s %9s %10s %8s %8s %9s %7s %6s %7s\n", "dataset",
               "tokens", "seqs", "mode", "fwd(ms)", "bwd(ms)", "tokens/s", "TFLOP/s", "exposed",
               "MB/rank", "#wrong", "vs_te", o.table ? "vs_own" : "vs_sdpa");
        fflush(stdout);
    }
    for (size_t total = po.min_bytes; total <= po.max_bytes; total = zc_perf_next_size(&po, total))
        for (int d = 0; d < zc_dataset_count(); d++) {
            double base = 0, times[2 * NMODES] = {0};
            int64_t *lengths;
            size_t count;
            rad_batch_t b;

            if (!zc_perf_listed(o.datasets, zc_dataset_name(d)))
                continue;
            count = rad_sample(d, (int64_t)total, o.scale, o.seed + (uint64_t)d * 7919 + total,
                               &lengths);
            if (count == 0 || rad_batch_init(&b, lengths, count, o.hq, o.hkv, o.head_dim,
                                             po.dtype, o.seed + total) != 0)
                zc_perf_die(TOOL, "allocation", ZC_ERR_NO_MEMORY);
            if (o.masked) {
                b.flags = ZC_ATTN_WINDOW;
                b.window_left = o.left;
                b.window_right = o.right;
            }
            if (po.check && rad_batch_reference(&b, 1) != ZC_OK)
                zc_perf_die(TOOL, "reference", ZC_ERR_INTERNAL);
            int64_t capacity = (int64_t)ceil(o.capacity * (double)total / size) + 1;
            double flops = batch_flops(&b) * 3.5; /* forward + backward (2.5x) */
            /* runs[m]: mode m; runs[NMODES + m] (-T): it through the kernel table */
            mode_run_t runs[2 * NMODES] = {{0}};

            for (int i = 0; i < (o.table ? 2 : 1) * NMODES; i++)
                if (zc_perf_listed(o.modes, modes[i % NMODES].name)) {
                    mode_setup(comm, &o, &b, lengths, count, capacity, i % NMODES, po.iters,
                               i >= NMODES, &runs[i]);
                    if (i == MODE_ZEPPELIN)
                        plan_line(comm, runs[i].plan, modes[i].name);
                }
            /* modes interleaved iteration by iteration, so that a slow spell
             * of a shared machine hits them alike; medians below */
            for (int it = -po.warmup; it < po.iters; it++)
                for (int i = 0; i < 2 * NMODES; i++)
                    if (runs[i].on)
                        mode_iter(comm, &runs[i], o.device, it);
            double sdpa = o.device && rank == 0 ? sdpa_seconds(&o, &po, lengths, count) : 0;
            zc_barrier(comm);
            for (int i = 0; i < 2 * NMODES; i++) {
                int m = i % NMODES;

                if (!runs[i].on)
                    continue;
                result_t r = mode_finish(comm, &po, &o, &b, m, &runs[i]);
                times[i] = r.fwd + r.bwd;
                if (i == MODE_TE)
                    base = times[i];
                wrong_total += r.wrong;
                if (rank != 0)
                    continue;
                char vs[16] = "-", vs_last[16] = "-", name[32];
                if (base > 0)
                    snprintf(vs, sizeof(vs), "%.2f", base / times[i]);
                if (sdpa > 0)
                    snprintf(vs_last, sizeof(vs_last), "%.2f", sdpa / times[i]);
                if (i >= NMODES && times[m] > 0)
                    snprintf(vs_last, sizeof(vs_last), "%.2f", times[m] / times[i]);
                snprintf(name, sizeof(name), "%s%s", modes[m].name, i >= NMODES ? "+table" : "");
                printf("  %-10s %8zu %5zu %-15s %9.2f %9.2f %10.0f %8.4f %7.1f%% %9.2f %7lld %6s "
                       "%7s\n", zc_dataset_name(d), total, count, name, r.fwd * 1e3,
                       r.bwd * 1e3, (double)total / times[i], flops / times[i] / 1e12,
                       r.exposed * 100, r.sent / 1e6, po.check ? (long long)r.wrong : -1LL, vs,
                       vs_last);
                fflush(stdout);
            }
            if (base > 0) {
                for (int m = 0; m < NMODES; m++)
                    speedup_sum[m] += times[m] > 0 ? base / times[m] : 0;
                speedup_rows++;
            }
            rad_batch_free(&b);
            free(lengths);
        }
    if (rank == 0) {
        printf("# Out of bounds values : %lld %s\n", (long long)wrong_total,
               wrong_total ? "FAILED" : "OK");
        if (speedup_rows > 0) {
            printf("# Avg speedup over te_cp:");
            for (int m = 1; m < NMODES; m++)
                if (zc_perf_listed(o.modes, modes[m].name))
                    printf(" %s %.2fx", modes[m].name, speedup_sum[m] / speedup_rows);
            printf("\n");
        }
    }
    zc_own_table_free(&own_table);
    zc_comm_destroy(comm);
    return wrong_total ? 1 : 0;
}
