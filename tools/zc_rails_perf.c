/* zc_rails_perf: transfers between two nodes striped over the rails in
 * proportion to their rates against the same transfers in equal shares,
 * interleaved call by call in one run (zc_comm_set_rail_rates with equal
 * rates is the equal striping; unpinned, the rates the calls agree on),
 * as a size sweep or as a timeline of every call while a NIC changes
 * under it (tests/cluster/zc_cluster --event).
 *
 *   routed     one zc_routed_sendrecv from rank -s on the first node to
 *              rank -r on another: goodput = bytes / time
 *   alltoallv  zc_remap_alltoallv where every rank of the first node sends
 *              a block of `bytes` / (ranks of the first node x ranks of the
 *              second) to each rank of the second node and back: goodput =
 *              the bytes crossing one way (`bytes`) / time */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_common.h"

#define TOOL "zc_rails_perf"
#define MAX_RAILS 16

typedef struct {
    char op[16];       /* routed, alltoallv */
    char stripe[16];   /* both, rate, equal */
    double timeline;   /* seconds of calls back to back (0: a size sweep) */
    int src, dst;
} rails_opts_t;

static int parse_extra(int opt, const char *arg, void *ctx)
{
    rails_opts_t *o = ctx;

    switch (opt) {
    case 'o':
        if (strcmp(arg, "routed") && strcmp(arg, "alltoallv"))
            return 1;
        snprintf(o->op, sizeof(o->op), "%s", arg);
        return 0;
    case 'S':
        if (strcmp(arg, "both") && strcmp(arg, "rate") && strcmp(arg, "equal"))
            return 1;
        snprintf(o->stripe, sizeof(o->stripe), "%s", arg);
        return 0;
    case 'T':
        o->timeline = atof(arg);
        return o->timeline <= 0;
    case 's':
        o->src = atoi(arg);
        return 0;
    case 'r':
        o->dst = atoi(arg);
        return 0;
    }
    return 1;
}

typedef struct {
    zc_comm_h comm;
    const rails_opts_t *ro;
    int rank, size, nrails, node0, node1;
    int *node;            /* [size] */
    size_t elem;
    char *send, *recv;
    int64_t *counts;      /* [4][size]: sendcounts, sdispls, recvcounts, rdispls */
} bench_t;

/* Equal shares (every rail pinned to the same rate) or the rates'. */
static void stripe(bench_t *b, int equal)
{
    double ones[MAX_RAILS];
    zc_status_t st;

    for (int k = 0; k < b->nrails; k++)
        ones[k] = 1.0;
    st = equal ? zc_comm_set_rail_rates(b->comm, ones, b->nrails)
               : zc_comm_set_rail_rates(b->comm, NULL, 0);
    if (st != ZC_OK)
        zc_perf_die(TOOL, "zc_comm_set_rail_rates", st);
}

/* The alltoallv's counts for `bytes` crossing one way. */
static void a2av_counts(bench_t *b, size_t bytes)
{
    int64_t *sc = b->counts, *sd = sc + b->size, *rc = sd + b->size, *rd = rc + b->size;
    int me = b->node[b->rank], senders = 0, peers = 0;

    for (int r = 0; r < b->size; r++) {
        senders += b->node[r] == b->node0;
        peers += b->node[r] == b->node1;
    }
    size_t pairs = (size_t)(senders ? senders : 1) * (size_t)(peers ? peers : 1);
    int64_t block = (int64_t)(bytes / b->elem / pairs);
    for (int r = 0; r < b->size; r++) {
        int crosses = (me == b->node0 && b->node[r] == b->node1) ||
                      (me == b->node1 && b->node[r] == b->node0);
        sc[r] = rc[r] = crosses ? block : 0;
        sd[r] = rd[r] = (int64_t)r * block;
    }
}

static void call(bench_t *b, size_t bytes)
{
    const rails_opts_t *ro = b->ro;
    size_t count = bytes / b->elem;
    zc_request_h req;
    zc_status_t st;

    if (strcmp(ro->op, "routed") == 0) {
        zc_transfer_t t = {ro->src, ro->dst, (int64_t)count};
        st = zc_routed_sendrecv(&t, 1, b->send, b->recv, ZC_BYTE, ZC_MEM_HOST, b->comm, &req);
    } else {
        int64_t *sc = b->counts, *sd = sc + b->size, *rc = sd + b->size, *rd = rc + b->size;
        a2av_counts(b, bytes);
        st = zc_remap_alltoallv(b->send, sc, sd, b->recv, rc, rd, ZC_BYTE, ZC_MEM_HOST, b->comm,
                                &req);
    }
    if (st == ZC_OK)
        st = zc_wait(&req);
    if (st != ZC_OK)
        zc_perf_die(TOOL, ro->op, st);
}

/* One call's seconds, the slowest rank's (every rank gets it). */
static double timed_call(bench_t *b, size_t bytes)
{
    zc_status_t st = zc_barrier(b->comm);
    if (st != ZC_OK)
        zc_perf_die(TOOL, "barrier", st);
    double t0 = zc_perf_now();
    call(b, bytes);
    return zc_perf_max(b->comm, zc_perf_now() - t0);
}

/* This rank's bytes sent on each rail so far. */
static void rail_sent(bench_t *b, uint64_t *sent)
{
    uint64_t unused;

    for (int k = 0; k < b->nrails; k++)
        if (zc_comm_rail_bytes(b->comm, k, &sent[k], &unused) != ZC_OK)
            sent[k] = 0;
}

/* The weights of the last routed call, and the share of each rail in what
 * this rank sent since `before`. */
static void print_rates(bench_t *b, const uint64_t *before)
{
    double rates[MAX_RAILS], total = 0;
    uint64_t after[MAX_RAILS];

    if (b->rank != 0 || zc_comm_rail_rates(b->comm, rates, b->nrails) != ZC_OK)
        return;
    printf(" rates");
    for (int k = 0; k < b->nrails; k++)
        printf(" %.0f", rates[k] * 1e3);
    printf(" Mbit/s; shares");
    rail_sent(b, after);
    for (int k = 0; k < b->nrails; k++)
        total += (double)(after[k] - before[k]);
    for (int k = 0; k < b->nrails; k++)
        printf(" %.0f%%", total > 0 ? 100.0 * (double)(after[k] - before[k]) / total : 0);
}

/* Sizes from -b to -e: -n calls per striping, interleaved. */
static void sweep(bench_t *b, const zc_perf_opts_t *o)
{
    int both = strcmp(b->ro->stripe, "both") == 0, eq_only = strcmp(b->ro->stripe, "equal") == 0;

    if (b->rank == 0)
        printf("# %10s %8s %12s %12s %12s %12s %8s\n", "bytes", "calls", "rate ms", "rate Mbit/s",
               "equal ms", "equal Mbit/s", "rate/eq");
    for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes = zc_perf_next_size(o, bytes)) {
        double t[2] = {0, 0};
        int n[2] = {0, 0};
        for (int i = 0; i < o->warmup; i++) {
            stripe(b, i % 2 && both);
            call(b, bytes);
        }
        for (int i = 0; i < o->iters * (both ? 2 : 1); i++) {
            int equal = both ? i % 2 : eq_only;
            stripe(b, equal);
            t[equal] += timed_call(b, bytes);
            n[equal]++;
        }
        if (b->rank != 0)
            continue;
        double ms[2], mbit[2];
        for (int e = 0; e < 2; e++) {
            ms[e] = n[e] ? t[e] / n[e] * 1e3 : 0;
            mbit[e] = n[e] ? (double)bytes * 8 / (t[e] / n[e]) / 1e6 : 0;
        }
        printf("  %10zu %8d %12.1f %12.1f %12.1f %12.1f %8.2f\n", bytes, o->iters, ms[0], mbit[0],
               ms[1], mbit[1], mbit[1] > 0 ? mbit[0] / mbit[1] : 0);
        fflush(stdout);
    }
}

/* Rank 0's `more` on every rank. */
static int64_t go_on(bench_t *b, int64_t more)
{
    zc_request_h req;
    zc_status_t st = ZC_OK;

    for (int r = 1; r < b->size && b->rank == 0 && st == ZC_OK; r++)
        if ((st = zc_send(&more, 1, ZC_INT64, ZC_MEM_HOST, r, b->comm, &req)) == ZC_OK)
            st = zc_wait(&req);
    if (b->rank != 0 && (st = zc_recv(&more, 1, ZC_INT64, ZC_MEM_HOST, 0, b->comm, &req)) == ZC_OK)
        st = zc_wait(&req);
    if (st != ZC_OK)
        zc_perf_die(TOOL, "the go-on message", st);
    return more;
}

/* Calls back to back for ro->timeline seconds (rank 0's clock decides for
 * every rank), each printed with its end time. */
static void timeline(bench_t *b, const zc_perf_opts_t *o)
{
    int both = strcmp(b->ro->stripe, "both") == 0, eq_only = strcmp(b->ro->stripe, "equal") == 0;
    double start = zc_perf_now();
    int64_t more = 1;
    struct timespec wall;

    clock_gettime(CLOCK_REALTIME, &wall);
    if (b->rank == 0)
        printf("# started at %lld.%09ld (wall clock)\n", (long long)wall.tv_sec, wall.tv_nsec);

    if (b->rank == 0)
        printf("# %8s %6s %10s %12s\n", "end s", "stripe", "ms", "Mbit/s");
    for (int i = 0; more; i++) {
        int equal = both ? i % 2 : eq_only;
        uint64_t before[MAX_RAILS];
        stripe(b, equal);
        rail_sent(b, before);
        double s = timed_call(b, o->max_bytes);
        if (b->rank == 0) {
            printf("  %8.3f %6s %10.1f %12.1f", zc_perf_now() - start, equal ? "equal" : "rate",
                   s * 1e3, (double)o->max_bytes * 8 / s / 1e6);
            print_rates(b, before);
            printf("\n");
            fflush(stdout);
        }
        more = go_on(b, zc_perf_now() - start < b->ro->timeline);
    }
}

int main(int argc, char **argv)
{
    rails_opts_t ro = {.op = "routed", .stripe = "both", .src = 0, .dst = -1};
    zc_perf_opts_t o;
    bench_t b = {.ro = &ro};
    double load[3] = {0, 0, 0};

    zc_perf_parse(argc, argv, TOOL,
                  "  -o OP     routed (default) or alltoallv\n"
                  "  -S MODE   striping: both (interleaved, default), rate or equal\n"
                  "  -T SEC    a timeline of -e byte calls for SEC seconds, not a sweep\n"
                  "  -s RANK   routed: source rank (default 0)\n"
                  "  -r RANK   routed: destination rank (default: the last)\n",
                  "o:S:T:s:r:", parse_extra, &ro, &o);
    b.comm = zc_perf_init(TOOL);
    zc_comm_rank(b.comm, &b.rank);
    zc_comm_size(b.comm, &b.size);
    zc_comm_rail_count(b.comm, &b.nrails);
    if (ro.dst < 0)
        ro.dst = b.size - 1;
    if (b.nrails < 1 || b.nrails > MAX_RAILS) {
        fprintf(stderr, TOOL ": %d rails: needs nodes with 1 to %d NICs\n", b.nrails, MAX_RAILS);
        return 2;
    }
    b.node = calloc((size_t)b.size, sizeof(int));
    b.counts = calloc(4 * (size_t)b.size, sizeof(int64_t));
    b.elem = 1;
    if (!b.node || !b.counts || ro.src < 0 || ro.dst >= b.size) {
        fprintf(stderr, TOOL ": -s %d -r %d of %d ranks\n", ro.src, ro.dst, b.size);
        return 2;
    }
    for (int r = 0; r < b.size; r++)
        zc_comm_rank_node(b.comm, r, &b.node[r]);
    b.node0 = b.node[ro.src];
    b.node1 = b.node[ro.dst];
    if (b.node0 == b.node1) {
        fprintf(stderr, TOOL ": -s %d -r %d: need ranks of two nodes\n", ro.src, ro.dst);
        return 2;
    }
    /* the alltoallv's blocks lie at rank * block: room for every rank's */
    size_t room = o.max_bytes * (size_t)b.size + 1;
    b.send = malloc(room);
    b.recv = malloc(room);
    if (!b.send || !b.recv) {
        fprintf(stderr, TOOL ": cannot allocate 2 x %zu bytes\n", room);
        return 1;
    }
    memset(b.send, 1, room);
    if (b.rank == 0) {
        getloadavg(load, 3);
        printf("# %s: %s between node %d and node %d, %d ranks, %d rails, striping %s; load "
               "average %.2f %.2f %.2f\n", TOOL, ro.op, b.node0, b.node1, b.size, b.nrails,
               ro.stripe, load[0], load[1], load[2]);
    }
    if (ro.timeline > 0)
        timeline(&b, &o);
    else
        sweep(&b, &o);
    stripe(&b, 0);
    zc_comm_destroy(b.comm);
    free(b.node);
    free(b.counts);
    free(b.send);
    free(b.recv);
    return 0;
}
