/* zc_remap_alltoallv on one host: 4 forked ranks emulating 2 nodes of 2
 * (config.node_id), with 4 rails on the loopback interface when the
 * emulated cluster's node topology can be generated, so that the split
 * over rails runs without root.  Random count matrices byte-exact (zeros,
 * a silent rank, gaps, displacements beyond 2^31), the plan's forward and
 * inverse remap, count mismatches failing on every rank without a hang,
 * every bad argument, and a rank that dies. */
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "a2av_common.h"
#include "move_common.h"
#include "mp.h"
#include "src/core/comm.h"
#include "rails_lo.h"
#include "tap.h"
#include "zcomm.h"

#define NRANKS 4
#define CASE_TIMEOUT_S 60


static int have_rails;

/* Ranks 0 .. n/2-1 on one emulated node, the others on another, unless
 * `one_node` is set. */
static int init_nodes(int rank, int nranks, int timeout_ms, int one_node, zc_comm_h *comm)
{
    zc_config_t config = ZC_CONFIG_INITIALIZER;

    config.timeout_ms = timeout_ms;
    config.node_id = rank < nranks / 2 || one_node ? "a2av-node-a" : "a2av-node-b";
    /* Rank 0 makes the id: the parent that forks stays single-threaded. */
    MP_CHECK(mp_comm_init(rank, nranks, &config, comm) == ZC_OK, "init");
    return 0;
}

static int init(int rank, int nranks, int timeout_ms, zc_comm_h *comm)
{
    return init_nodes(rank, nranks, timeout_ms, 0, comm);
}

/* Run layout `l` of `matrix` with fresh buffers, check the receive side. */
static int run_checked(zc_comm_h comm, const a2av_layout_t *l, zc_datatype_t dtype, int salt,
                       int poll)
{
    size_t elem = zc_datatype_size(dtype);
    char *send = malloc(l->send_elems * elem + 1), *recv = malloc(l->recv_elems * elem + 1);
    char why[160] = "";

    MP_CHECK(send && recv, "malloc");
    memset(send, 0x5a, l->send_elems * elem + 1);
    memset(recv, A2AV_GAP_BYTE, l->recv_elems * elem + 1);
    a2av_fill(send, l, elem, salt);
    zc_status_t st = a2av_run(send, recv, l, dtype, comm, poll);
    MP_CHECK(st == ZC_OK, "rank %d: alltoallv: %s", l->rank, zc_strerror(st));
    MP_CHECK(a2av_check(recv, l, elem, salt, 8, why, sizeof(why)) == 0, "rank %d: %s", l->rank,
             why);
    MP_CHECK((uint8_t)recv[l->recv_elems * elem] == A2AV_GAP_BYTE, "past the extent written");
    free(send);
    free(recv);
    return 0;
}

/* Random matrices: several seeds, data types, windows, zc_wait and zc_test. */
static int rank_random(int rank, int nranks, void *arg)
{
    static const zc_datatype_t types[] = {ZC_BYTE, ZC_FLOAT32, ZC_INT64, ZC_BFLOAT16};
    zc_comm_h comm;
    (void)arg;

    if (init(rank, nranks, 20000, &comm))
        return 1;
    for (int seed = 1; seed <= 12; seed++) {
        int64_t *m = a2av_matrix(nranks, (uint64_t)seed, seed % 3 ? 5000 : 200000, seed % nranks);
        a2av_layout_t l;
        MP_CHECK(m, "matrix");
        a2av_layout(&l, m, nranks, rank, (uint64_t)seed, seed % 2 ? 37 : 0, 0);
        /* the communicator's copy of ZC_ALLTOALLV_WINDOW, _SPLIT_BYTES and
         * _ROWS_MAX (parsed at init), the same on every rank */
        comm->settings.alltoallv_window = seed % 4;
        comm->settings.alltoallv_split_bytes = seed % 2 ? 1 : 65536;
        comm->settings.alltoallv_rows_max = seed % 3 ? 64 : 0;
        if (run_checked(comm, &l, types[seed % 4], seed, seed % 5 == 0))
            return 1;
        free(m);
    }
    /* All blocks empty: completes, moves nothing. */
    int64_t zero[NRANKS] = {0};
    zc_request_h req;
    MP_CHECK(zc_remap_alltoallv(NULL, zero, zero, NULL, zero, zero, ZC_BYTE, ZC_MEM_HOST, comm,
                                &req) == ZC_OK && zc_wait(&req) == ZC_OK, "all-empty alltoallv");
    zc_comm_destroy(comm);
    return 0;
}

/* Large blocks between the nodes go over every rail. */
static int rank_rails(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    int nrails;
    uint64_t before[16], after[16], unused;
    int64_t m[NRANKS * NRANKS] = {0};
    a2av_layout_t l;
    (void)arg;

    if (init(rank, nranks, 20000, &comm))
        return 1;
    zc_comm_rail_count(comm, &nrails);
    MP_CHECK(nrails == 4, "4 rails, got %d", nrails);
    m[0 * nranks + 2] = (1 << 20) + 3;  /* rank 0 (node a) -> rank 2 (node b) */
    a2av_layout(&l, m, nranks, rank, 7, 0, 0);
    comm->settings.alltoallv_split_bytes = 65536;
    for (int k = 0; k < nrails; k++)
        zc_comm_rail_bytes(comm, k, &before[k], &unused);
    if (run_checked(comm, &l, ZC_BYTE, 99, 0))
        return 1;
    for (int k = 0; rank == 0 && k < nrails; k++) {
        zc_comm_rail_bytes(comm, k, &after[k], &unused);
        MP_CHECK(after[k] - before[k] >= (uint64_t)m[2] / 4,
                 "rail %d carried %llu of %lld bytes", k,
                 (unsigned long long)(after[k] - before[k]), (long long)m[2]);
    }
    zc_comm_destroy(comm);
    return 0;
}

/* Displacements beyond 2^31 elements, in sparse (untouched) mappings. */
static int rank_far(int rank, int nranks, void *arg)
{
    const int64_t base = ((int64_t)1 << 31) + 5;
    zc_comm_h comm;
    a2av_layout_t l;
    char why[160] = "";
    (void)arg;

    if (init(rank, nranks, 20000, &comm))
        return 1;
    int64_t *m = a2av_matrix(nranks, 42, 3000, -1);
    a2av_layout(&l, m, nranks, rank, 42, 11, base);
    size_t send_len = l.send_elems + 64, recv_len = l.recv_elems + 64;
    char *send = mmap(NULL, send_len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    char *recv = mmap(NULL, recv_len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    MP_CHECK(send != MAP_FAILED && recv != MAP_FAILED, "sparse mappings");
    /* Only the pages near the blocks are ever touched. */
    memset(recv + base - 64, A2AV_GAP_BYTE, l.recv_elems - (size_t)base + 128);
    a2av_fill(send, &l, 1, 3);
    MP_CHECK(a2av_run(send, recv, &l, ZC_BYTE, comm, 0) == ZC_OK, "far alltoallv");
    MP_CHECK(a2av_check(recv, &l, 1, 3, 8, why, sizeof(why)) == 0, "%s", why);
    munmap(send, send_len);
    munmap(recv, recv_len);
    free(m);
    zc_comm_destroy(comm);
    return 0;
}

/* The plan's remap: forward gives the linear layout the planner describes,
 * inverse gives the attention buffer back byte for byte. */
static int rank_plan(int rank, int nranks, void *arg)
{
    static const int64_t lengths[] = {9000, 2500, 1700, 800, 600, 300, 120, 77, 5};
    zc_plan_h plan;
    zc_comm_h comm;
    char why[200] = "";
    (void)arg;

    if (init(rank, nranks, 20000, &comm))
        return 1;
    MP_CHECK(zc_plan_create(2, nranks / 2, 4096, lengths, sizeof(lengths) / sizeof(lengths[0]),
                            NULL, &plan) == ZC_OK, "plan");
    MP_CHECK(a2av_plan_roundtrip(plan, rank, 3, comm, why, sizeof(why)) == 0, "rank %d: %s",
             rank, why);
    zc_plan_destroy(plan);
    zc_comm_destroy(comm);
    return 0;
}

/* One move of `plan`, checked token by token. */
static int move_checked(zc_comm_h comm, zc_plan_h plan, zc_layout_t from, zc_layout_t to,
                        int64_t elems, zc_datatype_t dtype, int salt, const char *name)
{
    size_t token = (size_t)elems * zc_datatype_size(dtype);
    int rank = comm->rank;
    zc_request_h req;
    move_case_t c;

    MP_CHECK(move_case(plan, from, to, rank, token, salt, &c) == 0, "the case's buffers");
    char *recv = malloc((size_t)c.nr * token + 1);
    MP_CHECK(recv, "malloc");
    memset(recv, A2AV_GAP_BYTE, (size_t)c.nr * token + 1);
    zc_status_t st = zc_remap_alltoallv_layouts(plan, from, to, c.ns ? c.send : NULL,
                                                c.nr ? recv : NULL, elems, dtype, ZC_MEM_HOST,
                                                comm, &req);
    if (st == ZC_OK)
        st = zc_wait(&req);
    MP_CHECK(st == ZC_OK, "rank %d, %s, move %d -> %d: %s (%s)", rank, name, from, to,
             zc_strerror(st), zc_get_last_error());
    int64_t wrong = move_first_wrong(recv, c.rid, c.nr, token, salt);
    if (wrong >= 0)
        diag("rank %d, %s, move %d -> %d, %zu-byte tokens: token %lld is not batch token %lld",
             rank, name, from, to, token, (long long)wrong, (long long)c.rid[wrong]);
    MP_CHECK(wrong < 0, "rank %d, %.40s: a wrong token", rank, name);
    MP_CHECK((uint8_t)recv[(size_t)c.nr * token] == A2AV_GAP_BYTE, "past the extent written");
    move_case_free(&c);
    free(recv);
    return 0;
}

/* Every move between the loader, attention and linear layouts of plans of
 * every kind, token by token, with tokens of 12 B (every run packed) and
 * of 4100 B (runs of 16 tokens and more travel alone, split over the rails
 * between nodes); windows 0 to 2. */
static int rank_layouts(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    (void)arg;

    if (init(rank, nranks, 20000, &comm))
        return 1;
    for (int k = 0; k < MOVE_PLANS; k++) {
        const char *name;
        zc_plan_h plan;

        MP_CHECK(move_plan(k, nranks, &plan, &name) == ZC_OK, "plan %d: %s", k,
                 zc_get_last_error());
        comm->settings.alltoallv_window = k % 3;
        for (int from = 0; from < 3; from++)
            for (int to = 0; to < 3; to++)
                if (move_checked(comm, plan, from, to, 12, ZC_BYTE, k, name) ||
                    move_checked(comm, plan, from, to, 1025, ZC_FLOAT32, k + 9, name))
                    return 1;
        zc_plan_destroy(plan);
    }
    zc_comm_destroy(comm);
    return 0;
}

/* Ranks that disagree fail together, before any data moves, and the
 * communicator works afterwards: another plan on one rank, another token
 * size on one, a refused buffer on one; a plan of another size on all. */
static int rank_layouts_mismatch(int rank, int nranks, void *arg)
{
    static const int64_t other[] = {5, 5};
    zc_plan_h plan, wrong, big;
    zc_request_h req;
    zc_comm_h comm;
    const char *name;
    char send[64 * 1024], recv[64 * 1024];
    zc_status_t st;
    (void)arg;

    if (init(rank, nranks, 20000, &comm))
        return 1;
    MP_CHECK(move_plan(0, nranks, &plan, &name) == ZC_OK &&
                 zc_plan_create(2, nranks / 2, 20, other, 2, NULL, &wrong) == ZC_OK &&
                 zc_plan_create(2, nranks, 20, other, 2, NULL, &big) == ZC_OK, "plans");
    memset(recv, 0x5a, sizeof(recv));
    st = zc_remap_alltoallv_layouts(rank == 3 ? wrong : plan, ZC_LAYOUT_LOADER,
                                    ZC_LAYOUT_ATTENTION, send, recv, 1, ZC_BYTE, ZC_MEM_HOST,
                                    comm, &req);
    if (st == ZC_OK)
        st = zc_wait(&req);
    MP_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "different plans") &&
                 strstr(zc_get_last_error(), "no data moved") && (uint8_t)recv[0] == 0x5a,
             "rank %d, another plan on rank 3: %s (%s)", rank, zc_strerror(st),
             zc_get_last_error());
    st = zc_remap_alltoallv_layouts(plan, ZC_LAYOUT_LOADER, ZC_LAYOUT_ATTENTION, send, recv,
                                    rank == 1 ? 2 : 1, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    if (st == ZC_OK)
        st = zc_wait(&req);
    MP_CHECK(st == ZC_ERR_MISMATCH, "rank %d, another token size on rank 1: %s", rank,
             zc_strerror(st));
    st = zc_remap_alltoallv_layouts(plan, ZC_LAYOUT_LOADER, ZC_LAYOUT_ATTENTION,
                                    rank == 2 ? NULL : send, recv, 1, ZC_BYTE, ZC_MEM_HOST, comm,
                                    &req);
    if (st == ZC_OK)
        st = zc_wait(&req);
    if (rank == 2)
        MP_CHECK(st == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "sendbuf: is NULL"),
                 "the refusing rank names sendbuf: %s", zc_get_last_error());
    else
        MP_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "rank 2 refused"),
                 "rank %d learns that rank 2 refused: %s", rank, zc_get_last_error());
    st = zc_remap_alltoallv_layouts(big, ZC_LAYOUT_LOADER, ZC_LAYOUT_ATTENTION, send, recv, 1,
                                    ZC_BYTE, ZC_MEM_HOST, comm, &req);
    MP_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "plan: has 8 ranks"),
             "a plan of 8 ranks on 4: %s", zc_get_last_error());
    if (move_checked(comm, plan, ZC_LAYOUT_LOADER, ZC_LAYOUT_LINEAR, 3, ZC_BYTE, 1, name))
        return 1;
    zc_plan_destroy(plan), zc_plan_destroy(wrong), zc_plan_destroy(big);
    zc_comm_destroy(comm);
    return 0;
}

/* Arguments every rank gets wrong alike: each returns its own refusal. */
static int rank_layouts_bad_args(int rank, int nranks, void *arg)
{
    zc_plan_h plan;
    zc_request_h req;
    zc_comm_h comm;
    const char *name;
    char buf[1 << 16];
    (void)arg;

    if (init(rank, nranks, 20000, &comm))
        return 1;
    MP_CHECK(move_plan(0, nranks, &plan, &name) == ZC_OK, "plan");
    struct {
        zc_plan_h plan;
        int from, to;
        char *send, *recv;
        int64_t elems;
        int dtype, memtype;
        zc_request_h *req;
        zc_status_t st;
        const char *says;
    } cases[] = {
        {NULL, 0, 1, buf, buf + 32768, 1, ZC_BYTE, ZC_MEM_HOST, &req, ZC_ERR_INVALID_ARG,
         "plan: is NULL"},
        {plan, 3, 1, buf, buf + 32768, 1, ZC_BYTE, ZC_MEM_HOST, &req, ZC_ERR_INVALID_ARG,
         "from: 3 is not a zc_layout_t"},
        {plan, 0, -1, buf, buf + 32768, 1, ZC_BYTE, ZC_MEM_HOST, &req, ZC_ERR_INVALID_ARG,
         "to: -1"},
        {plan, 0, 1, buf, buf + 32768, 0, ZC_BYTE, ZC_MEM_HOST, &req, ZC_ERR_INVALID_ARG,
         "elems_per_token: 0"},
        {plan, 0, 1, buf, buf + 32768, 1, 99, ZC_MEM_HOST, &req, ZC_ERR_INVALID_ARG, "dtype"},
        {plan, 0, 1, buf, buf + 32768, INT64_MAX / 2, ZC_BYTE, ZC_MEM_HOST, &req,
         ZC_ERR_INVALID_ARG, "overflow"},
        {plan, 0, 1, buf, buf + 8, 1, ZC_BYTE, ZC_MEM_HOST, &req, ZC_ERR_INVALID_ARG,
         "overlap"},
        {plan, 0, 1, buf, buf + 32768, 1, ZC_BYTE, ZC_MEM_HOST, NULL, ZC_ERR_INVALID_ARG,
         "request: is NULL"},
        {plan, 0, 1, buf, buf + 32768, 1, ZC_BYTE, 7, &req, ZC_ERR_INVALID_ARG, "memtype"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        zc_status_t st = zc_remap_alltoallv_layouts(
            cases[i].plan, (zc_layout_t)cases[i].from, (zc_layout_t)cases[i].to, cases[i].send,
            cases[i].recv, cases[i].elems, (zc_datatype_t)cases[i].dtype,
            (zc_memtype_t)cases[i].memtype, comm, cases[i].req);
        MP_CHECK(st == cases[i].st && strstr(zc_get_last_error(), cases[i].says),
                 "case %zu: %s (%s), expected \"%s\"", i, zc_strerror(st), zc_get_last_error(),
                 cases[i].says);
    }
    MP_CHECK(zc_remap_alltoallv_layouts(plan, 0, 1, buf, buf + 32768, 1, ZC_BYTE, ZC_MEM_HOST,
                                        NULL, &req) == ZC_ERR_INVALID_ARG &&
                 strstr(zc_get_last_error(), "comm"), "a NULL comm is named");
    if (move_checked(comm, plan, ZC_LAYOUT_ATTENTION, ZC_LAYOUT_LOADER, 5, ZC_BYTE, 2, name))
        return 1;
    zc_plan_destroy(plan);
    zc_comm_destroy(comm);
    return 0;
}

/* One call whose block src -> dst disagrees (the sender says `sent`
 * elements of a byte, the receiver `expected`): every rank fails with
 * ZC_ERR_MISMATCH, the two ends of the block name it, the others learn of
 * it; then the same communicator runs agreed counts byte-exact. */
static int mismatch_once(zc_comm_h comm, int rank, int nranks, int src, int dst, int64_t sent,
                         int64_t expected)
{
    const char *moved = comm->settings.alltoallv_check ? "no data moved" : "may have moved";
    char sends[64], expects[64];
    a2av_layout_t l;
    int64_t *m = a2av_matrix(nranks, 5, 100, -1);

    MP_CHECK(m, "matrix");
    m[src * nranks + dst] = expected;
    a2av_layout(&l, m, nranks, rank, 5, 3, 0);
    if (rank == src)
        l.sc[dst] = sent;
    char *send = calloc(l.send_elems + 8, 1), *recv = calloc(l.recv_elems + 8, 1);
    zc_status_t st = a2av_run(send, recv, &l, ZC_BYTE, comm, 0);
    const char *why = zc_get_last_error();
    snprintf(sends, sizeof(sends), "sends %lld bytes to rank %d", (long long)sent, dst);
    snprintf(expects, sizeof(expects), "expects %lld bytes from rank %d", (long long)expected,
             src);
    MP_CHECK(st == ZC_ERR_MISMATCH, "rank %d: %s instead of a mismatch", rank, zc_strerror(st));
    MP_CHECK(strstr(why, "1 block(s) disagree") != NULL, "one block counted: %s", why);
    MP_CHECK(strstr(why, moved) != NULL, "says \"%s\": %s", moved, why);
    if (rank == src)
        MP_CHECK(strstr(why, "sendcounts[") && strstr(why, sends), "sender names the block: %s",
                 why);
    else if (rank == dst)
        MP_CHECK(strstr(why, "recvcounts[") && strstr(why, expects),
                 "receiver names the block: %s", why);
    else
        MP_CHECK(strstr(why, "counts:") != NULL, "others learn of it: %s", why);
    m[src * nranks + dst] = 9;
    a2av_layout(&l, m, nranks, rank, 5, 3, 0);
    if (run_checked(comm, &l, ZC_BYTE, 17, 0))
        return 1;
    free(send);
    free(recv);
    free(m);
    return 0;
}

/* Mismatched counts, on 2 nodes of 2 ranks.  arg bit 0: sizes 0 vs 7
 * inside a node (the receiver would wait forever without the agreement),
 * else 5 vs 4 between nodes; bit 1: the two-round agreement of large
 * communicators instead of whole rows; bit 2: ZC_ALLTOALLV_CHECK=0 (the
 * rows still travel, with the small blocks, and still catch it). */
static int rank_mismatch(int rank, int nranks, void *arg)
{
    int zero = *(int *)arg & 1;
    zc_comm_h comm;

    if (init(rank, nranks, 20000, &comm))
        return 1;
    if (*(int *)arg & 2)
        comm->settings.alltoallv_rows_max = 0; /* ZC_ALLTOALLV_ROWS_MAX=0 */
    if (*(int *)arg & 4)
        comm->settings.alltoallv_check = 0; /* ZC_ALLTOALLV_CHECK=0 */
    if (mismatch_once(comm, rank, nranks, zero ? 2 : 0, zero ? 3 : 2, zero ? 0 : 5, zero ? 7 : 4))
        return 1;
    zc_comm_destroy(comm);
    return 0;
}

/* Ranks on nodes for the relayed count rows: the node of each rank. */
typedef struct {
    const char *name;
    int nranks;
    int node[6];
} node_layout_t;

static const node_layout_t relay_layouts[] = {
    {"3 nodes of 2 ranks", 6, {0, 0, 1, 1, 2, 2}},
    {"2 nodes of 3 ranks, interleaved", 6, {0, 1, 0, 1, 0, 1}},
    {"nodes of 3 and 2 ranks (rows direct)", 5, {0, 0, 1, 0, 1}},
};

/* With the same number of ranks on every node the count rows and the
 * inline blocks travel over one rank per node pair (alltoallv.c): random
 * blocks on both sides of the inline size byte-exact, with zc_wait and
 * zc_test; a block between two ranks of different nodes that are not
 * partners (it travels over a third rank) disagreeing is found on every
 * rank.  Uneven nodes send the rows direct, with the same results. */
static int rank_relay(int rank, int nranks, void *arg)
{
    const node_layout_t *nl = arg;
    zc_config_t config = ZC_CONFIG_INITIALIZER;
    char node_id[32];
    zc_comm_h comm;

    snprintf(node_id, sizeof(node_id), "a2av-relay-%d", nl->node[rank]);
    config.timeout_ms = 20000;
    config.node_id = node_id;
    MP_CHECK(mp_comm_init(rank, nranks, &config, &comm) == ZC_OK, "init");
    for (int seed = 1; seed <= 6; seed++) {
        /* float32 blocks of up to 3000 elements (12000 bytes) or 40 */
        int64_t *m = a2av_matrix(nranks, (uint64_t)seed + 100, seed % 2 ? 3000 : 40,
                                 seed % 3 ? -1 : seed % nranks);
        a2av_layout_t l;
        MP_CHECK(m, "matrix");
        a2av_layout(&l, m, nranks, rank, (uint64_t)seed, seed % 2 ? 11 : 0, 0);
        if (run_checked(comm, &l, ZC_FLOAT32, seed, seed % 3 == 0))
            return 1;
        free(m);
    }
    /* rank 0 -> rank 3: another node, and not rank 0's partner there */
    if (mismatch_once(comm, rank, nranks, 0, 3, 6, 8))
        return 1;
    zc_comm_destroy(comm);
    return 0;
}

/* Without the agreement the data path alone still moves matching counts. */
static int rank_unchecked(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    a2av_layout_t l;
    (void)arg;

    if (init(rank, nranks, 20000, &comm))
        return 1;
    comm->settings.alltoallv_check = 0; /* ZC_ALLTOALLV_CHECK=0 */
    int64_t *m = a2av_matrix(nranks, 11, 70000, 1);
    a2av_layout(&l, m, nranks, rank, 11, 5, 0);
    if (run_checked(comm, &l, ZC_INT32, 23, 0))
        return 1;
    free(m);
    zc_comm_destroy(comm);
    return 0;
}

/* Blocks of 64 KiB from ranks 1 and 2 land in rank 0's recvbuf while
 * rank 3 has not entered the call; rank 3 enters once rank 0 has seen
 * every byte, and the call then completes on every rank.  The agreement
 * is off (ZC_ALLTOALLV_CHECK=0), so nothing waits for rank 3's rows.
 * *arg 0: 2 nodes (rank 2 on the other node): the larger blocks do not
 * wait for the verdict.  1: one node, window 1, and rank 3 also sends
 * rank 0 a 64 KiB block (rank 0's first step): steps inside a node are
 * not held back by the window. */
#define UNHELD_BYTES 65536
static int rank_unheld(int rank, int nranks, void *arg)
{
    int one_node = *(int *)arg, from3 = one_node;
    int64_t sc[NRANKS] = {0}, sd[NRANKS] = {0}, rc[NRANKS] = {0}, rd[NRANKS] = {0};
    static char send[UNHELD_BYTES], recv[3 * UNHELD_BYTES], want[3 * UNHELD_BYTES];
    const size_t early = 2 * UNHELD_BYTES, all = (size_t)(2 + from3) * UNHELD_BYTES;
    zc_request_h req, go;
    zc_comm_h comm;
    char token = 0;

    if (init_nodes(rank, nranks, 20000, one_node, &comm))
        return 1;
    comm->settings.alltoallv_check = 0; /* ZC_ALLTOALLV_CHECK=0 */
    comm->settings.alltoallv_split_bytes = UNHELD_BYTES;
    comm->settings.alltoallv_window = one_node ? 1 : 2;
    for (int i = 0; i < UNHELD_BYTES; i++) {
        send[i] = (char)(rank * 31 + i * 7);
        for (int src = 1; src <= 3; src++)
            want[(size_t)(src - 1) * UNHELD_BYTES + i] = (char)(src * 31 + i * 7);
    }
    if (rank == 1 || rank == 2 || (rank == 3 && from3))
        sc[0] = UNHELD_BYTES;
    if (rank == 0)
        for (int src = 1; src <= 2 + from3; src++) {
            rc[src] = UNHELD_BYTES;
            rd[src] = (int64_t)(src - 1) * UNHELD_BYTES;
        }
    if (rank == 3) {
        MP_CHECK(zc_recv(&token, 1, ZC_BYTE, ZC_MEM_HOST, 0, comm, &go) == ZC_OK &&
                     zc_wait(&go) == ZC_OK, "rank 3: the go from rank 0");
    }
    MP_CHECK(zc_remap_alltoallv(send, sc, sd, recv, rc, rd, ZC_BYTE, ZC_MEM_HOST, comm, &req) ==
                 ZC_OK, "rank %d: alltoallv: %s", rank, zc_get_last_error());
    if (rank == 0) {
        /* zc_test progresses; at least 20 s (the comm's timeout) of polls */
        zc_status_t st = ZC_INPROGRESS;
        for (int polls = 0; memcmp(recv, want, early) && polls < 20000 &&
                            (st = zc_test(&req)) == ZC_INPROGRESS;
             polls++)
            usleep(1000);
        MP_CHECK(memcmp(recv, want, early) == 0,
                 "rank 0: the 64 KiB blocks of ranks 1 and 2 did not land before rank 3 "
                 "entered (%s)", zc_strerror(st));
        MP_CHECK(st == ZC_INPROGRESS, "rank 0: the call ended (%s) before rank 3 entered",
                 zc_strerror(st));
        MP_CHECK(zc_send(&token, 1, ZC_BYTE, ZC_MEM_HOST, 3, comm, &go) == ZC_OK &&
                     zc_wait(&go) == ZC_OK, "rank 0: the go to rank 3");
    }
    MP_CHECK(zc_wait(&req) == ZC_OK, "rank %d: alltoallv: %s", rank, zc_get_last_error());
    MP_CHECK(rank != 0 || memcmp(recv, want, all) == 0, "rank 0: wrong bytes");
    zc_comm_destroy(comm);
    return 0;
}

/* Every bad argument is refused locally, named, and leaves *request alone. */
static int rank_bad_args(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    int64_t c[NRANKS] = {1, 1, 1, 1}, d[NRANKS] = {0, 1, 2, 3}, bad[NRANKS];
    char s[16] = "abcd", r[16];
    zc_request_h req = NULL;
    zc_plan_h plan;
    static const int64_t lengths[] = {100, 50};
    (void)arg;

    if (init(rank, nranks, 20000, &comm))
        return 1;
#define BAD(st_want, name, ...)                                                     \
    MP_CHECK(zc_remap_alltoallv(__VA_ARGS__) == (st_want) &&                       \
                 strstr(zc_get_last_error(), name) != NULL && req == NULL,          \
             "%s refused (%s)", name, zc_get_last_error())
    BAD(ZC_ERR_INVALID_ARG, "sendcounts", s, NULL, d, r, c, d, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    BAD(ZC_ERR_INVALID_ARG, "sdispls", s, c, NULL, r, c, d, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    BAD(ZC_ERR_INVALID_ARG, "recvcounts", s, c, d, r, NULL, d, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    BAD(ZC_ERR_INVALID_ARG, "rdispls", s, c, d, r, c, NULL, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    BAD(ZC_ERR_INVALID_ARG, "request", s, c, d, r, c, d, ZC_BYTE, ZC_MEM_HOST, comm, NULL);
    BAD(ZC_ERR_INVALID_ARG, "comm", s, c, d, r, c, d, ZC_BYTE, ZC_MEM_HOST, NULL, &req);
    BAD(ZC_ERR_INVALID_ARG, "dtype", s, c, d, r, c, d, ZC_DTYPE_COUNT, ZC_MEM_HOST, comm, &req);
    BAD(ZC_ERR_INVALID_ARG, "sendbuf", NULL, c, d, r, c, d, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    BAD(ZC_ERR_INVALID_ARG, "recvbuf", s, c, d, NULL, c, d, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    memcpy(bad, c, sizeof(bad));
    bad[2] = -1;
    BAD(ZC_ERR_INVALID_ARG, "sendcounts[2]", s, bad, d, r, c, d, ZC_BYTE, ZC_MEM_HOST, comm,
        &req);
    BAD(ZC_ERR_INVALID_ARG, "recvcounts[2]", s, c, d, r, bad, d, ZC_BYTE, ZC_MEM_HOST, comm,
        &req);
    BAD(ZC_ERR_INVALID_ARG, "sdispls[2]", s, c, bad, r, c, d, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    BAD(ZC_ERR_INVALID_ARG, "rdispls[2]", s, c, d, r, c, bad, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    memcpy(bad, d, sizeof(bad));
    bad[3] = INT64_MAX - 1;
    BAD(ZC_ERR_INVALID_ARG, "overflow", s, c, bad, r, c, d, ZC_FLOAT32, ZC_MEM_HOST, comm, &req);
    bad[3] = 1;  /* the blocks from ranks 1 and 3 both land at element 1 */
    BAD(ZC_ERR_INVALID_ARG, "rdispls: the receive blocks of ranks 1 and 3 overlap", s, c, d, r,
        c, bad, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    /* Overlapping send blocks are fine (only read): counts are checked
     * first, so a NULL request shows the call got past them. */
    BAD(ZC_ERR_INVALID_ARG, "request", s, c, bad, r, c, d, ZC_BYTE, ZC_MEM_HOST, comm, NULL);
    BAD(ZC_ERR_INVALID_ARG, "no in-place", s, c, d, s + 2, c, d, ZC_BYTE, ZC_MEM_HOST, comm,
        &req);
    BAD(ZC_ERR_UNSUPPORTED, "memtype", s, c, d, r, c, d, ZC_BYTE, ZC_MEM_CUDA, comm, &req);
#undef BAD
    MP_CHECK(zc_plan_create(1, 2, 1000, lengths, 2, NULL, &plan) == ZC_OK, "2-rank plan");
    MP_CHECK(zc_remap_alltoallv_plan(plan, ZC_REMAP_FORWARD, s, r, 1, ZC_BYTE, ZC_MEM_HOST, comm,
                                     &req) == ZC_ERR_MISMATCH &&
                 strstr(zc_get_last_error(), "plan") && req == NULL,
             "a plan of 2 ranks on 4 is a mismatch (%s)", zc_get_last_error());
    MP_CHECK(zc_remap_alltoallv_plan(plan, ZC_REMAP_FORWARD, s, r, 0, ZC_BYTE, ZC_MEM_HOST, comm,
                                     &req) == ZC_ERR_INVALID_ARG &&
                 strstr(zc_get_last_error(), "elems_per_token"), "elems_per_token 0 refused");
    MP_CHECK(zc_remap_alltoallv_plan(NULL, ZC_REMAP_FORWARD, s, r, 1, ZC_BYTE, ZC_MEM_HOST, comm,
                                     &req) == ZC_ERR_INVALID_ARG &&
                 strstr(zc_get_last_error(), "plan"), "NULL plan refused");
    zc_plan_destroy(plan);
    zc_comm_destroy(comm);
    return 0;
}

/* Rank 3 dies before the call: every other rank returns
 * ZC_ERR_PEER_FAILED naming it, including rank 0, whose messages all come
 * from live ranks: rank 1, which relays rank 3's rows to it, sends a
 * notice.  The survivors stay alive until all three have returned (arg: a
 * shared count), so that rank 0 cannot learn it from rank 1's exit. */
static int rank_dead_peer(int rank, int nranks, void *arg)
{
    int *returned = arg;
    zc_comm_h comm;
    a2av_layout_t l;

    if (init(rank, nranks, 20000, &comm))
        return 1;
    zc_barrier(comm);
    if (rank == nranks - 1)
        raise(SIGKILL);
    int64_t *m = a2av_matrix(nranks, 3, 1000, -1);
    a2av_layout(&l, m, nranks, rank, 3, 0, 0);
    char *send = calloc(l.send_elems + 1, 1), *recv = calloc(l.recv_elems + 1, 1);
    zc_status_t st = a2av_run(send, recv, &l, ZC_BYTE, comm, 0);
    const char *why = zc_get_last_error();
    /* rank 0 waits only on rank 1, which relays rank 3's rows: rank 1's
     * failure notice, not rank 0's timeout, ends its call */
    __atomic_add_fetch(returned, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(returned, __ATOMIC_ACQUIRE) < nranks - 1)
        usleep(1000);  /* the case's deadline bounds it */
    MP_CHECK(st == ZC_ERR_PEER_FAILED && strstr(why, "rank 3") &&
                 (rank != 0 || strstr(why, "rank 1 could not forward")),
             "rank %d: %s: %s", rank, zc_strerror(st), why);
    free(send);
    free(recv);
    free(m);
    zc_comm_destroy(comm);
    return 0;
}

/* A rank dies once its data phase has started (the call returned): the
 * others' zc_wait fails within the timeout, never reporting success.  On
 * one node: the UCX of Debian 12 may abort in its TCP rendezvous when a
 * peer dies (tcp_ep.c assertion), which is not libzcomm's to test here;
 * the survivors also skip zc_comm_destroy for the same reason. */
static int rank_dies_mid_transfer(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    a2av_layout_t l;
    int64_t m[NRANKS * NRANKS];
    zc_request_h req;
    (void)arg;

    if (init_nodes(rank, nranks, 3000, 1, &comm))
        return 1;
    for (int i = 0; i < nranks * nranks; i++)
        m[i] = (4 << 20) + i;  /* large enough for rendezvous everywhere */
    a2av_layout(&l, m, nranks, rank, 13, 0, 0);
    char *send = calloc(l.send_elems, 1), *recv = calloc(l.recv_elems, 1);
    MP_CHECK(send && recv, "calloc");
    MP_CHECK(zc_remap_alltoallv(send, l.sc, l.sd, recv, l.rc, l.rd, ZC_BYTE, ZC_MEM_HOST, comm,
                                &req) == ZC_OK, "the call starts the data phase");
    if (rank == nranks - 1)
        raise(SIGKILL);
    zc_status_t st = zc_wait(&req);
    /* An error, whichever: the dead rank, or a survivor that already gave
     * up and left (then UCX reports an I/O error). */
    MP_CHECK(st == ZC_ERR_PEER_FAILED || st == ZC_ERR_TIMEOUT || st == ZC_ERR_TRANSPORT,
             "rank %d: %s", rank, zc_strerror(st));
    free(send);
    free(recv);
    return 0;
}

static int run_case(mp_rank_fn fn, void *arg)
{
    return mp_run(NRANKS, CASE_TIMEOUT_S, fn, arg);
}

int main(void)
{
    static int kinds[6] = {0, 1, 2, 3, 4, 5};
    char topo[64];

    setenv("ZC_SOCKET_IFNAME", "lo", 0);
    have_rails = rails_on_loopback(topo, sizeof(topo));
    tap_plan(22);
    if (!have_rails)
        diag("no node topology (tests/cluster/zc_cluster --topo-xml): no rails, no splitting");
    ok(run_case(rank_random, NULL) == 0,
       "12 random count matrices (zeros, a silent rank, gaps, 4 types, windows 0-3, split or "
       "not, one- or two-round agreement, zc_wait and zc_test) byte-exact, gaps untouched; "
       "all-empty call");
    if (have_rails)
        ok(run_case(rank_rails, NULL) == 0,
           "a 1 MiB + 3 B block between nodes is split over all 4 rails");
    else
        tap_skip(1, "no rails");
    ok(run_case(rank_far, NULL) == 0, "displacements beyond 2^31 elements byte-exact");
    ok(run_case(rank_plan, NULL) == 0,
       "plan remap: forward gives the planner's linear pieces, inverse gives the bytes back");
    ok(run_case(rank_layouts, NULL) == 0,
       "zc_remap_alltoallv_layouts: every move between the loader, attention and linear "
       "layouts of %d plans (1-token sequences, a sequence on every rank, ranks with no "
       "tokens, even split) is the token-by-token mapping, with tokens of 12 B (packed) and "
       "4100 B (runs alone, split over the rails)", MOVE_PLANS);
    ok(run_case(rank_layouts_mismatch, NULL) == 0,
       "zc_remap_alltoallv_layouts: another plan, token size or a refused buffer on one rank "
       "is ZC_ERR_MISMATCH on every rank (the refusing rank its own error), no data moved; "
       "then the communicator moves tokens right");
    ok(run_case(rank_layouts_bad_args, NULL) == 0,
       "zc_remap_alltoallv_layouts: every bad argument returns its status and names it");
    for (int k = 0; k < 6; k++)
        ok(run_case(rank_mismatch, &kinds[k]) == 0,
           "%s: ZC_ERR_MISMATCH on every rank, both ends named, no hang; the comm works "
           "afterwards (%s)",
           k & 1 ? "0 vs 7 elements inside a node" : "5 vs 4 elements between nodes",
           k & 4 ? "ZC_ALLTOALLV_CHECK=0: the rows that carry small blocks catch it"
                 : k & 2 ? "two-round agreement" : "one-round agreement");
    for (size_t k = 0; k < sizeof(relay_layouts) / sizeof(relay_layouts[0]); k++)
        ok(mp_run(relay_layouts[k].nranks, CASE_TIMEOUT_S, rank_relay,
                  (void *)&relay_layouts[k]) == 0,
           "%s: random blocks around the inline size byte-exact; a mismatch between ranks "
           "of two nodes that are not partners fails every rank, both ends named",
           relay_layouts[k].name);
    ok(run_case(rank_unchecked, NULL) == 0, "ZC_ALLTOALLV_CHECK=0: matching counts byte-exact");
    ok(run_case(rank_unheld, &kinds[0]) == 0,
       "ZC_ALLTOALLV_CHECK=0: 64 KiB blocks land before the last rank enters the call, which "
       "then completes");
    ok(run_case(rank_unheld, &kinds[1]) == 0,
       "one node, window 1: 64 KiB blocks of later steps land while the first step waits for "
       "a rank that has not entered the call; then every block is exact");
    ok(run_case(rank_bad_args, NULL) == 0,
       "every bad argument returns its status and names the argument");
    mp_killed_rank = NRANKS - 1;
    int *returned = mp_shared(sizeof(int));
    ok(returned && run_case(rank_dead_peer, returned) == 0,
       "a dead rank: every other rank returns ZC_ERR_PEER_FAILED naming it, rank 0 through the "
       "notice of the rank that relays for it");
    ok(run_case(rank_dies_mid_transfer, NULL) == 0,
       "a rank dies during the data phase (one node): zc_wait fails on the others within the "
       "timeout");
    mp_killed_rank = -1;
    if (have_rails)
        unlink(getenv("ZC_TOPO_FILE"));
    return tap_done();
}
