/* zc_alltoallv_perf: zc_remap_alltoallv in nccl-tests alltoallv style.
 *
 * The counts come from a spread (-S: rank i sends in proportion to
 * 1 + (S - 1) i / (n - 1), the same to every rank), a matrix file (-M: n x n
 * weights, row i what rank i sends to each rank), or the planner's remap of
 * a batch drawn from a dataset (-P: zc_plan_create on the communicator's
 * nodes, counts from zc_plan_remap_counts, one token of each size's
 * `elements per token`).  Each row's size is the largest per-rank send
 * volume (its whole send buffer, the self block included, as nccl-tests
 * counts alltoall); algbw = that size / the slowest rank's time, busbw =
 * algbw (n - 1) / n.
 *
 * Built with MPI (tools/zc_alltoallv_mpi_perf), -B mpi times MPI_Alltoallv
 * with exactly the same counts and displacements, and -B both (the
 * default) times both in the same run, one row each, with their ratio. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ZC_A2AV_PERF_MPI
#include <limits.h>
#include <mpi.h>
#define TOOL "zc_alltoallv_mpi_perf"
#else
#define TOOL "zc_alltoallv_perf"
#endif

#include "perf_common.h"
#include "zc_plan_dataset.h"

typedef struct {
    double skew;            /* -S */
    const char *matrix;     /* -M */
    const char *dataset;    /* -P */
    int64_t capacity;       /* -C: tokens per rank for -P */
    int64_t total;          /* -T: tokens of the -P batch (0: half the cluster) */
    int inverse;            /* -D inverse */
    unsigned seed;          /* -s */
    int run_zc, run_mpi;    /* -B */
    int agreement;          /* -A: also time zc without the count agreement */
} a2av_opts_t;

static int parse_extra(int opt, const char *arg, void *ctx)
{
    a2av_opts_t *o = ctx;
    char *end;

    switch (opt) {
    case 'S': o->skew = strtod(arg, &end); return *end || o->skew < 1.0;
    case 'M': o->matrix = arg; return 0;
    case 'P': o->dataset = arg; return zc_dataset_find(arg) < 0;
    case 'C': o->capacity = strtoll(arg, &end, 10); return *end || o->capacity < 1;
    case 'T': o->total = strtoll(arg, &end, 10); return *end || o->total < 1;
    case 'D': o->inverse = strcmp(arg, "inverse") == 0; return !o->inverse && strcmp(arg, "forward");
    case 's': o->seed = (unsigned)strtoul(arg, &end, 10); return *end != '\0';
    case 'A': o->agreement = 1; return 0;
    case 'B':
        o->run_zc = strcmp(arg, "mpi") != 0;
        o->run_mpi = strcmp(arg, "zc") != 0;
        return strcmp(arg, "zc") && strcmp(arg, "mpi") && strcmp(arg, "both");
    }
    return 1;
}



/* ---- the count matrix (the same on every rank) ------------------------- */

/* units[i * n + j]: what rank i sends to rank j, in weights (-S, -M) or
 * tokens (-P). */
typedef struct {
    int n;
    int64_t *units;
    int tokens;             /* units are tokens: counts = units x elements per token */
    zc_plan_h plan;
} a2av_matrix_t;

static void matrix_spread(a2av_matrix_t *m, double skew)
{
    /* Weights in thousandths so the spread survives integer scaling. */
    for (int i = 0; i < m->n; i++)
        for (int j = 0; j < m->n; j++)
            m->units[i * m->n + j] =
                (int64_t)(1000.0 * (1.0 + (skew - 1.0) * i / (m->n > 1 ? m->n - 1 : 1)));
}

static void matrix_file(a2av_matrix_t *m, const char *path)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    int64_t k = 0, want = (int64_t)m->n * m->n;

    if (!f) {
        fprintf(stderr, TOOL ": -M %s: cannot open it\n", path);
        exit(2);
    }
    while (getline(&line, &cap, f) >= 0) {
        char *p = line, *end;
        if (*p == '#')
            continue;
        for (;;) {
            long long v = strtoll(p, &end, 10);
            if (end == p)
                break;
            if (v < 0 || k >= want) {
                fprintf(stderr, TOOL ": -M %s: need %lld non-negative counts (an %d x %d "
                        "matrix for %d ranks)\n", path, (long long)want, m->n, m->n, m->n);
                exit(2);
            }
            m->units[k++] = v;
            p = end;
        }
    }
    free(line);
    fclose(f);
    if (k != want) {
        fprintf(stderr, TOOL ": -M %s: %lld counts, need %lld (%d x %d for %d ranks)\n", path,
                (long long)k, (long long)want, m->n, m->n, m->n);
        exit(2);
    }
}

/* The remap of a batch of `dataset` (-T tokens, default half the
 * cluster's capacity: a batch that fills every device leaves nothing to
 * rebalance). */
static void matrix_plan(a2av_matrix_t *m, zc_comm_h comm, const a2av_opts_t *o)
{
    int nnodes;
    zc_rng_t rng = {o->seed};
    int64_t *lengths;
    const zc_plan_transfer_t *t;
    size_t nt;

    zc_comm_node_count(comm, &nnodes);
    if (m->n % nnodes) {
        fprintf(stderr, TOOL ": -P needs the same number of ranks on every node\n");
        exit(2);
    }
    int64_t total = o->total ? o->total : o->capacity * m->n / 2;
    size_t count = zc_dataset_sample(zc_dataset_find(o->dataset), total, &rng, &lengths);
    zc_status_t st = zc_plan_create(nnodes, m->n / nnodes, o->capacity, lengths, count, NULL,
                                    &m->plan);
    if (st != ZC_OK)
        zc_perf_die(TOOL, "zc_plan_create", st);
    free(lengths);
    for (int r = 0; r < m->n; r++) {
        zc_plan_rank_t pr;
        zc_plan_rank(m->plan, r, &pr);
        /* the self block: what the rank keeps */
        m->units[r * m->n + r] = pr.tokens < pr.linear_tokens ? pr.tokens : pr.linear_tokens;
    }
    zc_plan_remap_transfers(m->plan, &t, &nt);
    for (size_t k = 0; k < nt; k++) {
        if (o->inverse)
            m->units[t[k].to * m->n + t[k].from] = t[k].tokens;
        else
            m->units[t[k].from * m->n + t[k].to] = t[k].tokens;
    }
    m->tokens = 1;
}

static int64_t row_sum(const a2av_matrix_t *m, int i)
{
    int64_t s = 0;
    for (int j = 0; j < m->n; j++)
        s += m->units[i * m->n + j];
    return s;
}

static int64_t max_row(const a2av_matrix_t *m)
{
    int64_t best = 0;
    for (int i = 0; i < m->n; i++)
        best = row_sum(m, i) > best ? row_sum(m, i) : best;
    return best;
}

/* Elements rank i sends to rank j in the row of `elems` (the largest send
 * buffer, in elements). */
static int64_t block_count(const a2av_matrix_t *m, int i, int j, int64_t elems)
{
    int64_t top = max_row(m), u = m->units[i * m->n + j];

    if (top == 0)
        return 0;
    if (m->tokens)
        return u * (elems / top > 0 ? elems / top : 1);
    return (int64_t)((double)u * (double)elems / (double)top);
}

static void print_matrix_summary(const a2av_matrix_t *m, zc_comm_h comm, const a2av_opts_t *o)
{
    int rank, node_i, node_j;
    int64_t total = 0, self = 0, inter = 0;

    zc_comm_rank(comm, &rank);
    if (rank != 0)
        return;
    for (int i = 0; i < m->n; i++)
        for (int j = 0; j < m->n; j++) {
            int64_t u = m->units[i * m->n + j];
            zc_comm_rank_node(comm, i, &node_i);
            zc_comm_rank_node(comm, j, &node_j);
            total += u;
            self += i == j ? u : 0;
            inter += node_i != node_j ? u : 0;
        }
    if (o->dataset)
        printf("# counts: %s remap of a %s batch of %lld tokens (seed %u, %lld tokens per rank "
               "at most)\n", o->inverse ? "inverse" : "forward", o->dataset,
               (long long)(o->total ? o->total : o->capacity * m->n / 2), o->seed,
               (long long)o->capacity);
    else if (o->matrix)
        printf("# counts: matrix file %s\n", o->matrix);
    else
        printf("# counts: spread, rank i sends in proportion to 1 + (%g - 1) i / (n - 1)\n",
               o->skew);
    printf("# of all bytes: %.1f%% stay on their rank, %.1f%% cross nodes; largest send buffer "
           "%.2fx the mean\n", total ? 100.0 * (double)self / (double)total : 0.0,
           total ? 100.0 * (double)inter / (double)total : 0.0,
           total ? (double)max_row(m) * m->n / (double)total : 0.0);
}

/* The bytes that leave the busiest node for other nodes in a row: divided
 * by the node's NIC bandwidth, the time no alltoallv can beat. */
static void print_wire_bytes(const a2av_matrix_t *m, zc_comm_h comm, int64_t elems, size_t elem)
{
    int rank, nnodes, node_i, node_j;
    int64_t *out;

    zc_comm_rank(comm, &rank);
    zc_comm_node_count(comm, &nnodes);
    if (rank != 0 || nnodes < 2 || !(out = calloc((size_t)nnodes, sizeof(*out))))
        return;
    for (int i = 0; i < m->n; i++)
        for (int j = 0; j < m->n; j++) {
            zc_comm_rank_node(comm, i, &node_i);
            zc_comm_rank_node(comm, j, &node_j);
            if (node_i != node_j)
                out[node_i] += block_count(m, i, j, elems) * (int64_t)elem;
        }
    int64_t top = 0;
    for (int k = 0; k < nnodes; k++)
        top = out[k] > top ? out[k] : top;
    printf("#   busiest node sends %lld bytes to other nodes\n", (long long)top);
    free(out);
}

/* ---- one size ---------------------------------------------------------- */

typedef struct {
    int64_t *sc, *sd, *rc, *rd;     /* this rank's arguments, elements */
    size_t send_elems, recv_elems;
    char *send, *recv;
} a2av_args_t;

static void args_for(a2av_args_t *a, const a2av_matrix_t *m, int rank, int64_t elems)
{
    int64_t s = 0, r = 0;

    for (int j = 0; j < m->n; j++) {
        a->sc[j] = block_count(m, rank, j, elems);
        a->rc[j] = block_count(m, j, rank, elems);
        a->sd[j] = s;
        a->rd[j] = r;
        s += a->sc[j];
        r += a->rc[j];
    }
    a->send_elems = (size_t)s;
    a->recv_elems = (size_t)r;
}

static void run_zc(zc_comm_h comm, a2av_args_t *a, zc_datatype_t dtype)
{
    zc_request_h req;
    zc_status_t st = zc_remap_alltoallv(a->send, a->sc, a->sd, a->recv, a->rc, a->rd, dtype,
                                        ZC_MEM_HOST, comm, &req);
    if (st == ZC_OK)
        st = zc_wait(&req);
    if (st != ZC_OK)
        zc_perf_die(TOOL, "zc_remap_alltoallv", st);
}

#ifdef ZC_A2AV_PERF_MPI
/* MPI_Alltoallv in bytes (int counts: every block and displacement must
 * stay below 2 GiB). */
typedef struct {
    int *sc, *sd, *rc, *rd;
} mpi_args_t;

static void mpi_args_for(mpi_args_t *b, const a2av_args_t *a, int n, size_t elem)
{
    for (int j = 0; j < n; j++) {
        int64_t v[4] = {a->sc[j], a->sd[j], a->rc[j], a->rd[j]};
        int *out[4] = {&b->sc[j], &b->sd[j], &b->rc[j], &b->rd[j]};
        for (int k = 0; k < 4; k++) {
            if ((uint64_t)v[k] * elem > INT_MAX) {
                fprintf(stderr, TOOL ": a block or displacement of %lld bytes does not fit "
                        "MPI_Alltoallv's int counts\n", (long long)((uint64_t)v[k] * elem));
                exit(2);
            }
            *out[k] = (int)((uint64_t)v[k] * elem);
        }
    }
}

static void run_mpi(const mpi_args_t *b, const a2av_args_t *a)
{
    int rc = MPI_Alltoallv(a->send, b->sc, b->sd, MPI_BYTE, a->recv, b->rc, b->rd, MPI_BYTE,
                           MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, TOOL ": MPI_Alltoallv failed: %d\n", rc);
        exit(1);
    }
}
#endif

/* -A: a second communicator over the same ranks with the count agreement
 * off (zc_config_t.alltoallv_check), the way nccl-tests makes a communicator
 * per configuration: rank 0's unique id reaches the others over `comm`. */
static zc_comm_h comm_without_agreement(zc_comm_h comm, int rank, int size)
{
    zc_config_t config = ZC_CONFIG_INITIALIZER;
    zc_unique_id_t id;
    zc_comm_h nocheck;
    zc_request_h req;
    zc_status_t st = ZC_OK;

    if (rank == 0) {
        st = zc_get_unique_id(&id);
        for (int r = 1; r < size && st == ZC_OK; r++)
            if ((st = zc_send(&id, sizeof(id), ZC_BYTE, ZC_MEM_HOST, r, comm, &req)) == ZC_OK)
                st = zc_wait(&req);
    } else if ((st = zc_recv(&id, sizeof(id), ZC_BYTE, ZC_MEM_HOST, 0, comm, &req)) == ZC_OK) {
        st = zc_wait(&req);
    }
    if (st != ZC_OK)
        zc_perf_die(TOOL, "sharing a unique id for the communicator without the agreement", st);
    config.alltoallv_check = ZC_CONFIG_ZERO;
    if ((st = zc_comm_init_rank(&nocheck, size, &id, rank, &config)) != ZC_OK)
        zc_perf_die(TOOL, "zc_comm_init_rank (ZC_ALLTOALLV_CHECK=0)", st);
    return nocheck;
}

typedef struct {
    zc_comm_h comm;
    const zc_perf_opts_t *o;
    a2av_args_t *a;
#ifdef ZC_A2AV_PERF_MPI
    mpi_args_t *b;
#endif
} a2av_run_t;

/* What a row times. */
enum { MODE_ZC, MODE_ZC_NOCHECK, MODE_MPI, MODE_COUNT };
static const char *const mode_names[MODE_COUNT] = {"zc", "zc-nochk", "mpi"};

static void run_once(const a2av_run_t *r, int use_mpi)
{
#ifdef ZC_A2AV_PERF_MPI
    if (use_mpi) {
        run_mpi(r->b, r->a);
        return;
    }
#endif
    (void)use_mpi;
    run_zc(r->comm, r->a, r->o->dtype);
}

static void barrier(const a2av_run_t *r, int use_mpi)
{
#ifdef ZC_A2AV_PERF_MPI
    if (use_mpi) {
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
#endif
    zc_status_t st = zc_barrier(r->comm);
    if (st != ZC_OK)
        zc_perf_die(TOOL, "zc_barrier", st);
}

/* Seconds per call, the slowest rank's. */
static double timed(const a2av_run_t *r, int use_mpi)
{
    for (int i = 0; i < r->o->warmup; i++)
        run_once(r, use_mpi);
    barrier(r, use_mpi);
    double t0 = zc_perf_now();
    for (int i = 0; i < r->o->iters; i++)
        run_once(r, use_mpi);
    return zc_perf_max(r->comm, (zc_perf_now() - t0) / r->o->iters);
}

/* Block (i -> j) of test data; wrong elements summed at rank 0. */
static int64_t checked(const a2av_run_t *r, int use_mpi, int rank, int n, int salt)
{
    size_t elem = zc_datatype_size(r->o->dtype);
    a2av_args_t *a = r->a;
    int64_t wrong = 0;

    if (!r->o->check)
        return 0;
    for (int j = 0; j < n; j++)
        zc_perf_fill(a->send + (size_t)a->sd[j] * elem, (size_t)a->sc[j] * elem, rank,
                     salt * 1024 + j);
    memset(a->recv, 0, a->recv_elems * elem);
    run_once(r, use_mpi);
    for (int j = 0; j < n; j++)
        wrong += zc_perf_check(a->recv + (size_t)a->rd[j] * elem, (size_t)a->rc[j] * elem, elem,
                               j, salt * 1024 + rank);
    return zc_perf_sum(r->comm, wrong);
}

int main(int argc, char **argv)
{
    a2av_opts_t ao = {.skew = 1.0, .capacity = 8192, .seed = 1, .run_zc = 1};
    zc_perf_opts_t o;
    int rank, size;

#ifdef ZC_A2AV_PERF_MPI
    ao.run_mpi = 1;
    MPI_Init(&argc, &argv);
#endif
    zc_perf_parse(argc, argv, TOOL,
                  "  -S SKEW   counts: rank i sends in proportion to 1 + (SKEW-1) i/(n-1)\n"
                  "            (default 1: every block the same)\n"
                  "  -M FILE   counts: an n x n matrix of weights, row i what rank i sends\n"
                  "  -P DATA   counts: the planner's remap of a batch of DATA (arxiv, github,\n"
                  "            prolong64k); sizes scale the elements per token\n"
                  "  -C TOKENS -P: tokens per rank at most (default 8192)\n"
                  "  -T TOKENS -P: tokens of the batch (default: half of ranks x -C)\n"
                  "  -D DIR    -P: forward or inverse remap (default forward)\n"
                  "  -s SEED   -P: batch seed (default 1)\n"
                  "  -A        also time zc_remap_alltoallv without its count agreement\n"
                  "            (ZC_ALLTOALLV_CHECK=0) and print the agreement's cost\n"
#ifdef ZC_A2AV_PERF_MPI
                  "  -B WHAT   zc, mpi or both (default both: the same counts, one row each)\n"
#endif
                  ,
#ifdef ZC_A2AV_PERF_MPI
                  "S:M:P:C:T:D:s:AB:",
#else
                  "S:M:P:C:T:D:s:A",
#endif
                  parse_extra, &ao, &o);
    zc_comm_h comm = zc_perf_init(TOOL);
    zc_comm_rank(comm, &rank);
    zc_comm_size(comm, &size);

    a2av_matrix_t m = {.n = size, .units = calloc((size_t)size * (size_t)size, sizeof(int64_t))};
    a2av_args_t a = {.sc = calloc((size_t)size, 8), .sd = calloc((size_t)size, 8),
                     .rc = calloc((size_t)size, 8), .rd = calloc((size_t)size, 8)};
    if (!m.units || !a.sc || !a.sd || !a.rc || !a.rd) {
        fprintf(stderr, TOOL ": out of memory\n");
        return 1;
    }
    if (ao.dataset)
        matrix_plan(&m, comm, &ao);
    else if (ao.matrix)
        matrix_file(&m, ao.matrix);
    else
        matrix_spread(&m, ao.skew);
    print_matrix_summary(&m, comm, &ao);
    zc_perf_print_header(comm, TOOL, &o);

    size_t elem = zc_datatype_size(o.dtype);
    a2av_run_t r = {.comm = comm, .o = &o, .a = &a};
#ifdef ZC_A2AV_PERF_MPI
    mpi_args_t b = {calloc((size_t)size, sizeof(int)), calloc((size_t)size, sizeof(int)),
                    calloc((size_t)size, sizeof(int)), calloc((size_t)size, sizeof(int))};
    r.b = &b;
#endif
    double bus = size > 1 ? (double)(size - 1) / size : 1.0;
    zc_comm_h nocheck = ao.agreement && ao.run_zc ? comm_without_agreement(comm, rank, size)
                                                  : NULL;
    int salt = 0;
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes = zc_perf_next_size(&o, bytes)) {
        args_for(&a, &m, rank, (int64_t)(bytes / elem));
        /* The row's size: the largest send buffer this sweep step made. */
        int64_t top = 0;
        for (int i = 0; i < size; i++) {
            int64_t s = 0;
            for (int j = 0; j < size; j++)
                s += block_count(&m, i, j, (int64_t)(bytes / elem));
            top = s > top ? s : top;
        }
        a.send = malloc(a.send_elems * elem + 1);
        a.recv = malloc(a.recv_elems * elem + 1);
        if (!a.send || !a.recv) {
            fprintf(stderr, TOOL ": cannot allocate %zu + %zu bytes\n", a.send_elems * elem,
                    a.recv_elems * elem);
            return 1;
        }
        memset(a.send, 1, a.send_elems * elem);
#ifdef ZC_A2AV_PERF_MPI
        mpi_args_for(&b, &a, size, elem);
#endif
        double t[MODE_COUNT] = {0};
        int run[MODE_COUNT] = {ao.run_zc, ao.run_zc && ao.agreement, ao.run_mpi};
        for (int mode = 0; mode < MODE_COUNT; mode++) {
            if (!run[mode])
                continue;
            r.comm = mode == MODE_ZC_NOCHECK ? nocheck : comm;
            t[mode] = timed(&r, mode == MODE_MPI);
            int64_t wrong = checked(&r, mode == MODE_MPI, rank, size, ++salt);
            r.comm = comm;
            if (rank == 0 && run[MODE_ZC] + run[MODE_ZC_NOCHECK] + run[MODE_MPI] > 1)
                printf("%-9s", mode_names[mode]);
            zc_perf_print_row(comm, (size_t)top * elem, (size_t)top, o.dtype, t[mode], bus,
                              wrong);
        }
        print_wire_bytes(&m, comm, (int64_t)(bytes / elem), elem);
        if (rank == 0 && t[MODE_ZC] > 0 && t[MODE_ZC_NOCHECK] > 0)
            printf("#   count agreement: %+.0f us (%+.1f%%)\n",
                   (t[MODE_ZC] - t[MODE_ZC_NOCHECK]) * 1e6,
                   100.0 * (t[MODE_ZC] / t[MODE_ZC_NOCHECK] - 1.0));
        if (rank == 0 && t[MODE_ZC] > 0 && t[MODE_MPI] > 0)
            printf("#   zc_remap_alltoallv vs MPI_Alltoallv: %.2fx (MPI time / zc time)\n",
                   t[MODE_MPI] / t[MODE_ZC]);
        free(a.send);
        free(a.recv);
    }
    int status = zc_perf_print_summary(comm);
    if (m.plan)
        zc_plan_destroy(m.plan);
    if (nocheck)
        zc_comm_destroy(nocheck);
    zc_comm_destroy(comm);
#ifdef ZC_A2AV_PERF_MPI
    MPI_Finalize();
#endif
    return status;
}
