/* zc_remap_alltoallv across nodes: random count matrices byte-exact, a
 * large block split over every rail, the plan's forward and inverse
 * remap, count mismatches failing on every rank without a hang, bad
 * arguments. */
#include "config.h"

#include "a2av_common.h"
#include "mn_common.h"
#include "src/core/comm.h"

/* Run layout `l` with fresh buffers; check the receive side. */
static void run_checked(zc_comm_h comm, const a2av_layout_t *l, zc_datatype_t dtype, int salt)
{
    size_t elem = zc_datatype_size(dtype);
    char *send = malloc(l->send_elems * elem + 1), *recv = malloc(l->recv_elems * elem + 1);
    char why[160] = "";

    memset(send, 0x5a, l->send_elems * elem + 1);
    memset(recv, A2AV_GAP_BYTE, l->recv_elems * elem + 1);
    a2av_fill(send, l, elem, salt);
    zc_status_t st = a2av_run(send, recv, l, dtype, comm, salt % 2);
    MN_CHECK(st == ZC_OK, "alltoallv: %s", zc_strerror(st));
    if (st == ZC_OK)
        MN_CHECK(a2av_check(recv, l, elem, salt, 8, why, sizeof(why)) == 0, "%s", why);
    free(send);
    free(recv);
}

static void case_random(zc_comm_h comm)
{
    static const zc_datatype_t types[] = {ZC_BYTE, ZC_FLOAT32, ZC_INT64};
    char name[160];

    for (int seed = 1; seed <= 6; seed++) {
        int64_t *m = a2av_matrix(mn_size, (uint64_t)seed, seed % 2 ? 3000 : 60000, seed % mn_size);
        a2av_layout_t l;
        a2av_layout(&l, m, mn_size, mn_rank, (uint64_t)seed, seed % 3 ? 29 : 0, 0);
        /* the communicator's copy of ZC_ALLTOALLV_WINDOW (parsed at its creation) */
        comm->settings.alltoallv_window = seed % 3 == 1 ? 2 : 0;
        run_checked(comm, &l, types[seed % 3], seed);
        free(m);
    }
    comm->settings.alltoallv_window = 2;
    snprintf(name, sizeof(name),
             "6 random count matrices (zeros, a silent rank, gaps, 3 types, window 0 or 2) "
             "byte-exact, gaps untouched");
    mn_report(comm, name);
}

/* Rank 0 sends 4 MiB + 3 B to the last rank (other node): every rail of
 * rank 0 carries a share (chunk by chunk as acknowledgements come, so at
 * equal rates about a quarter: at least an eighth is asserted). */
static void case_rails(zc_comm_h comm, int nrails)
{
    int64_t *m = calloc((size_t)mn_size * (size_t)mn_size, sizeof(*m));
    uint64_t before[16], after, unused;
    a2av_layout_t l;

    m[mn_size - 1] = (4 << 20) + 3;
    a2av_layout(&l, m, mn_size, mn_rank, 9, 0, 0);
    for (int k = 0; k < nrails && k < 16; k++)
        zc_comm_rail_bytes(comm, k, &before[k], &unused);
    run_checked(comm, &l, ZC_BYTE, 77);
    for (int k = 0; mn_rank == 0 && k < nrails && k < 16; k++) {
        zc_comm_rail_bytes(comm, k, &after, &unused);
        MN_CHECK(after - before[k] >= (uint64_t)m[mn_size - 1] / (2 * (uint64_t)nrails),
                 "rail %d carried %llu of %lld bytes", k, (unsigned long long)(after - before[k]),
                 (long long)m[mn_size - 1]);
    }
    free(m);
    mn_report(comm, "4 MiB + 3 B between nodes split over every rail, byte-exact");
}

/* A batch of the ArXiv-like mix on 2 nodes x 4 ranks, 16 Ki tokens each. */
static void case_plan(zc_comm_h comm, int nnodes)
{
    static const int64_t lengths[] = {30000, 14000, 9000, 6000, 4000, 3000, 2500, 2000, 1800,
                                      1200, 900, 700, 500, 300, 200, 100, 64, 33, 7};
    zc_plan_h plan;
    char why[200] = "";

    zc_status_t st = zc_plan_create(nnodes, mn_size / nnodes, 16384, lengths,
                                    sizeof(lengths) / sizeof(lengths[0]), NULL, &plan);
    MN_CHECK(st == ZC_OK, "plan: %s", zc_strerror(st));
    if (st == ZC_OK) {
        MN_CHECK(a2av_plan_roundtrip(plan, mn_rank, 16, comm, why, sizeof(why)) == 0, "%s", why);
        zc_plan_destroy(plan);
    }
    mn_report(comm, "plan remap: forward gives the planner's linear pieces, inverse gives the "
                    "bytes back");
}

/* Block src -> dst: the receiver expects `expect`, the sender sends
 * `sends`; every rank must fail with ZC_ERR_MISMATCH, the two ends naming
 * the block; then the right counts go through. */
static void case_mismatch(zc_comm_h comm, int src, int dst, int64_t sends, int64_t expect)
{
    int64_t *m = a2av_matrix(mn_size, 5, 100, -1);
    a2av_layout_t l;
    char name[160], want[64];

    m[src * mn_size + dst] = expect;
    a2av_layout(&l, m, mn_size, mn_rank, 5, 3, 0);
    if (mn_rank == src)
        l.sc[dst] = sends;
    char *send = calloc(l.send_elems + 8, 1), *recv = calloc(l.recv_elems + 8, 1);
    zc_status_t st = a2av_run(send, recv, &l, ZC_BYTE, comm, 0);
    const char *why = zc_get_last_error();
    MN_CHECK(st == ZC_ERR_MISMATCH, "%s instead of a mismatch", zc_strerror(st));
    if (mn_rank == src) {
        snprintf(want, sizeof(want), "sends %lld bytes to rank %d", (long long)sends, dst);
        MN_CHECK(strstr(why, "sendcounts[") && strstr(why, want), "sender: %s", why);
    } else if (mn_rank == dst) {
        snprintf(want, sizeof(want), "expects %lld bytes from rank %d", (long long)expect, src);
        MN_CHECK(strstr(why, "recvcounts[") && strstr(why, want), "receiver: %s", why);
    } else {
        MN_CHECK(strstr(why, "counts:") != NULL, "bystander: %s", why);
    }
    free(send);
    free(recv);
    m[src * mn_size + dst] = sends;
    a2av_layout(&l, m, mn_size, mn_rank, 5, 3, 0);
    run_checked(comm, &l, ZC_BYTE, 31);
    free(m);
    snprintf(name, sizeof(name),
             "rank %d sends %lld, rank %d expects %lld: ZC_ERR_MISMATCH on every rank, both ends "
             "named, no hang; the comm works afterwards (%s agreement)", src, (long long)sends,
             dst, (long long)expect, getenv("ZC_ALLTOALLV_ROWS_MAX") ? "two-round" : "one-round");
    mn_report(comm, name);
}

static void case_bad_args(zc_comm_h comm)
{
    int64_t *c = calloc((size_t)mn_size, sizeof(*c)), *d = calloc((size_t)mn_size, sizeof(*d));
    char s[4] = "ab", r[4];
    zc_request_h req = NULL;

    c[0] = 1;
    MN_CHECK(zc_remap_alltoallv(s, NULL, d, r, c, d, ZC_BYTE, ZC_MEM_HOST, comm, &req) ==
                 ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "sendcounts"),
             "NULL sendcounts refused");
    c[0] = -3;
    MN_CHECK(zc_remap_alltoallv(s, c, d, r, c, d, ZC_BYTE, ZC_MEM_HOST, comm, &req) ==
                 ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "sendcounts[0]"),
             "negative count refused");
    c[0] = 1;
    MN_CHECK(zc_remap_alltoallv(s, c, d, NULL, c, d, ZC_BYTE, ZC_MEM_HOST, comm, &req) ==
                 ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "recvbuf"),
             "NULL recvbuf refused");
    MN_CHECK(zc_remap_alltoallv(s, c, d, r, c, d, ZC_BYTE, ZC_MEM_CUDA, comm, &req) ==
                 ZC_ERR_UNSUPPORTED, "CUDA memory on the host path is unsupported");
    MN_CHECK(req == NULL, "no request written on failure");
    free(c);
    free(d);
    mn_report(comm, "bad arguments return their status naming the argument");
}

int main(void)
{
    zc_comm_h comm = mn_init();
    int nrails = 0, nnodes = 0;

    zc_comm_rail_count(comm, &nrails);
    zc_comm_node_count(comm, &nnodes);
    if (mn_rank == 0)
        printf("# %d ranks, %d nodes, %d rails\n", mn_size, nnodes, nrails);
    if (mn_size > 256) {
        if (mn_rank == 0)
            printf("# more than 256 ranks: not supported by this test\n");
        return mn_finish(comm);
    }
    case_random(comm);
    if (nrails > 1 && nnodes > 1)
        case_rails(comm, nrails);
    if (mn_size % nnodes == 0)
        case_plan(comm, nnodes);
    /* Between the first and the last rank (other nodes), and from nothing. */
    case_mismatch(comm, 0, mn_size - 1, 5, 4);
    case_mismatch(comm, mn_size - 1, mn_size / 2 - 1 > 0 ? mn_size / 2 - 1 : 0, 0, 7);
    int64_t rows_max = comm->settings.alltoallv_rows_max;
    comm->settings.alltoallv_rows_max = 0;  /* the agreement of large communicators */
    case_mismatch(comm, 1 % mn_size, mn_size - 2 > 0 ? mn_size - 2 : 0, 3, 0);
    comm->settings.alltoallv_rows_max = rows_max;
    case_bad_args(comm);
    return mn_finish(comm);
}
