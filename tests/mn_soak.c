/* Soak: many training-step-shaped iterations on one communicator, to show
 * that nothing accumulates (tests/test_multinode.sh runs a short one; the
 * 1000-iteration run of docs/TESTING.md passes the count as argv[1]).
 *
 * Each iteration draws an exactly-full batch from one of the paper's three
 * datasets (a new seed every time, so plans, rings and remap counts vary),
 * plans it, and runs what a step runs around attention: the remap of the
 * rank's query rows from the attention layout to the linear layout and
 * back (zc_remap_alltoallv_plan), then zc_ring_attn_fwd and _bwd.  Every
 * rank checks its own rows against the single-process reference (the
 * ring attention) and the bytes (the remap: the forward lands exactly the
 * plan's linear pieces, the inverse gives back the input).
 *
 * Every `sample` iterations each rank reads its resident set, its open
 * file descriptors and how many of them are sockets (UCX's tcp endpoints
 * and the bootstrap); rank 0 prints the maximum over the ranks as
 * "# soak ..." lines.  File descriptors and sockets must not grow after
 * the warm-up (the first sample): a leak of either fails the run.  The
 * resident set is reported, not judged: the allocator keeps freed memory
 * at its own discretion. */
#include "config.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mn_common.h"
#include "tools/zc_plan_dataset.h"
#include "tools/zc_ring_attn_data.h"

#define TOKENS_PER_RANK 128
#define SCALE 64
#define DEFAULT_ITERS 30

typedef struct {
    int64_t rss_kb, fds, sockets;
} usage_t;

static usage_t usage_now(void)
{
    usage_t u = {0, 0, 0};
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    DIR *d;
    struct dirent *e;

    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    u.rss_kb = resident * (sysconf(_SC_PAGESIZE) / 1024);
    if ((d = opendir("/proc/self/fd")) != NULL) {
        while ((e = readdir(d)) != NULL) {
            char path[300], target[64];
            ssize_t n;

            if (e->d_name[0] == '.')
                continue;
            u.fds++;
            snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
            n = readlink(path, target, sizeof(target) - 1);
            if (n > 0 && strncmp(target, "socket:", 7) == 0)
                u.sockets++;
        }
        closedir(d);
        u.fds--; /* the directory stream's own */
    }
    return u;
}

/* Rank 0 gets the maximum of each field over the ranks. */
static usage_t usage_max(zc_comm_h comm, usage_t mine)
{
    int64_t v[3] = {mine.rss_kb, mine.fds, mine.sockets};
    zc_request_h req;

    if (mn_rank != 0) {
        MN_CHECK(zc_send(v, 3, ZC_INT64, ZC_MEM_HOST, 0, comm, &req) == ZC_OK &&
                     zc_wait(&req) == ZC_OK, "usage to rank 0");
        return mine;
    }
    for (int r = 1; r < mn_size; r++) {
        int64_t w[3] = {0, 0, 0};
        MN_CHECK(zc_recv(w, 3, ZC_INT64, ZC_MEM_HOST, r, comm, &req) == ZC_OK &&
                     zc_wait(&req) == ZC_OK, "usage from rank %d", r);
        for (int i = 0; i < 3; i++)
            v[i] = w[i] > v[i] ? w[i] : v[i];
    }
    return (usage_t){v[0], v[1], v[2]};
}

/* The remap of this rank's q rows there and back; returns wrong bytes. */
static int64_t remap_round_trip(zc_comm_h comm, zc_plan_h plan, const rad_batch_t *ref,
                                const rad_local_t *l, const zc_plan_rank_t *mine)
{
    const zc_plan_piece_t *lin;
    size_t nlin, row = rad_row_bytes(ref, 0);
    int64_t elems = (int64_t)(row / zc_datatype_size(ref->dtype)), wrong = 0;
    char *linear = malloc((size_t)(mine->linear_tokens ? mine->linear_tokens : 1) * row);
    char *expect = malloc((size_t)(mine->linear_tokens ? mine->linear_tokens : 1) * row);
    char *back = malloc((size_t)(mine->tokens ? mine->tokens : 1) * row);
    zc_request_h req;

    if (!linear || !expect || !back) {
        MN_CHECK(0, "out of memory");
        goto out;
    }
    MN_CHECK(zc_remap_alltoallv_plan(plan, ZC_REMAP_FORWARD, l->q, linear, elems, ref->dtype,
                                     ZC_MEM_HOST, comm, &req) == ZC_OK && zc_wait(&req) == ZC_OK,
             "remap forward");
    zc_plan_rank_linear_pieces(plan, mn_rank, &lin, &nlin);
    rad_gather(ref, lin, nlin, ref->q, row, expect);
    for (int64_t i = 0; i < mine->linear_tokens * (int64_t)row; i++)
        wrong += linear[i] != expect[i];
    MN_CHECK(zc_remap_alltoallv_plan(plan, ZC_REMAP_INVERSE, linear, back, elems, ref->dtype,
                                     ZC_MEM_HOST, comm, &req) == ZC_OK && zc_wait(&req) == ZC_OK,
             "remap inverse");
    for (int64_t i = 0; i < mine->tokens * (int64_t)row; i++)
        wrong += back[i] != ((const char *)l->q)[i];
out:
    free(linear);
    free(expect);
    free(back);
    return wrong;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : DEFAULT_ITERS;
    int sample = iters >= 1000 ? 100 : 10;
    int nnodes = 0, nrails = 0;
    int64_t wrong_attn = 0, wrong_remap = 0;
    usage_t first = {0, 0, 0}, last = {0, 0, 0}, peak = {0, 0, 0};
    zc_comm_h comm;
    char name[200];

    setenv("ZC_ROUTED_MIN_BYTES", "4096", 1);  /* routed hops through the proxies */
    comm = mn_init();
    zc_comm_node_count(comm, &nnodes);
    zc_comm_rail_count(comm, &nrails);
    int ppn = mn_size / nnodes;
    int64_t total = (int64_t)TOKENS_PER_RANK * mn_size;

    for (int it = 0; it < iters; it++) {
        int dataset = it % zc_dataset_count();
        int64_t *lengths = NULL;
        size_t count = rad_sample(dataset, total, SCALE, 9000 + (uint64_t)it, &lengths);
        zc_ring_attn_args_t args = ZC_RING_ATTN_ARGS_INITIALIZER;
        zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
        double worst[RAD_NRESULTS];
        zc_plan_rank_t mine;
        zc_plan_h plan = NULL;
        rad_batch_t ref;
        rad_local_t l;

        MN_CHECK(count > 0 && rad_batch_init(&ref, lengths, count, 2, 1, 16, ZC_FLOAT32,
                                              500 + (uint64_t)it) == 0, "out of memory");
        MN_CHECK(rad_batch_reference(&ref, 1) == ZC_OK, "reference");
        opts.rails = nrails;
        /* exactly full: every rank at its capacity, as frameworks pack */
        MN_CHECK(zc_plan_create(nnodes, ppn, TOKENS_PER_RANK, ref.lengths, ref.nseqs, &opts,
                                &plan) == ZC_OK, "zc_plan_create, iteration %d", it);
        if (plan) {
            zc_plan_rank(plan, mn_rank, &mine);
            MN_CHECK(rad_local_make(&ref, plan, mn_rank, 0, &l) == 0, "out of memory");
            wrong_remap += remap_round_trip(comm, plan, &ref, &l, &mine);
            rad_local_args(&ref, &l, &args);
            MN_CHECK(zc_ring_attn_fwd(comm, plan, &args) == ZC_OK, "fwd, iteration %d", it);
            MN_CHECK(zc_ring_attn_bwd(comm, plan, &args) == ZC_OK, "bwd, iteration %d", it);
            wrong_attn += rad_local_check(&ref, &l, 1, rad_tolerance(ref.dtype), worst);
            rad_local_free(&l);
            zc_plan_destroy(plan);
        }
        rad_batch_free(&ref);
        free(lengths);
        if ((it + 1) % sample == 0) {
            last = usage_max(comm, usage_now());
            if (it + 1 == sample)
                first = last;
            peak.rss_kb = last.rss_kb > peak.rss_kb ? last.rss_kb : peak.rss_kb;
            if (mn_rank == 0)
                printf("# soak iteration %d: rss %lld KiB, fds %lld, sockets %lld (max over "
                       "%d ranks)\n", it + 1, (long long)last.rss_kb, (long long)last.fds,
                       (long long)last.sockets, mn_size);
            fflush(stdout);
        }
    }
    MN_CHECK(wrong_attn == 0, "%lld attention elements off the reference", (long long)wrong_attn);
    snprintf(name, sizeof(name), "soak: %d iterations of ring attention fwd + bwd on exactly-full "
             "batches match the reference", iters);
    mn_report(comm, name);
    MN_CHECK(wrong_remap == 0, "%lld remapped bytes wrong", (long long)wrong_remap);
    snprintf(name, sizeof(name), "soak: %d remaps forward land the plan's linear pieces, inverse "
             "gives the input back, byte-exact", iters);
    mn_report(comm, name);
    if (mn_rank == 0)
        MN_CHECK(last.fds == first.fds && last.sockets == first.sockets,
                 "fds %lld -> %lld, sockets %lld -> %lld", (long long)first.fds,
                 (long long)last.fds, (long long)first.sockets, (long long)last.sockets);
    snprintf(name, sizeof(name), "soak: open file descriptors and sockets flat after the first "
             "%d iterations (peak rss %lld KiB)", sample, (long long)peak.rss_kb);
    mn_report(comm, name);
    return mn_finish(comm);
}
