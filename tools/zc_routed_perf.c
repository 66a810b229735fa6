/* zc_routed_perf: one transfer between a rank pair on two nodes, direct on
 * the sender's NIC versus routed over every NIC (zc_routed_sendrecv), in
 * nccl-tests style, with each NIC's share of the routed bytes and the
 * routed time the Zeppelin paper's routing equation predicts from the
 * measured intra-node and direct inter-node costs (x1 = x2 = rails):
 *   b_intra n (x1-1)/x1 + b_inter max(n/x1, n/x2) + b_intra n (x2-1)/x2
 * The equation adds the three steps; the pipeline overlaps them, so the
 * bound it can reach is the largest of the three. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_common.h"

#define TOOL "zc_routed_perf"
#define MAX_RAILS 16

typedef struct {
    int src, dst;
    char mode[16];   /* routed, direct, both */
} routed_opts_t;


static int parse_extra(int opt, const char *arg, void *ctx)
{
    routed_opts_t *o = ctx;
    switch (opt) {
    case 's': o->src = atoi(arg); return 0;
    case 'r': o->dst = atoi(arg); return 0;
    case 'm':
        if (strcmp(arg, "routed") && strcmp(arg, "direct") && strcmp(arg, "both"))
            return 1;
        snprintf(o->mode, sizeof(o->mode), "%s", arg);
        return 0;
    }
    return 1;
}


/* One transfer of `count` elements from src to dst, routed or direct. */
static void transfer(zc_comm_h comm, int routed, int src, int dst, size_t count,
                     zc_datatype_t dtype, void *send, void *recv)
{
    int rank;
    zc_request_h req;
    zc_status_t st = ZC_OK;

    zc_comm_rank(comm, &rank);
    if (routed) {
        zc_transfer_t t = {src, dst, (int64_t)count};
        st = zc_routed_sendrecv(&t, 1, send, recv, dtype, ZC_MEM_HOST, comm, &req);
        if (st == ZC_OK)
            st = zc_wait(&req);
    } else if (rank == src) {
        st = zc_send(send, (int64_t)count, dtype, ZC_MEM_HOST, dst, comm, &req);
        if (st == ZC_OK)
            st = zc_wait(&req);
    } else if (rank == dst) {
        st = zc_recv(recv, (int64_t)count, dtype, ZC_MEM_HOST, src, comm, &req);
        if (st == ZC_OK)
            st = zc_wait(&req);
    }
    if (st != ZC_OK)
        zc_perf_die(TOOL, routed ? "routed transfer" : "direct transfer", st);
}

/* Seconds per transfer of `bytes`, the slowest rank's view. */
static double timed(zc_comm_h comm, const zc_perf_opts_t *o, int routed, int src, int dst,
                    size_t count, void *send, void *recv)
{
    for (int i = 0; i < o->warmup; i++)
        transfer(comm, routed, src, dst, count, o->dtype, send, recv);
    zc_status_t st = zc_barrier(comm);
    if (st != ZC_OK)
        zc_perf_die(TOOL, "barrier", st);
    double t0 = zc_perf_now();
    for (int i = 0; i < o->iters; i++)
        transfer(comm, routed, src, dst, count, o->dtype, send, recv);
    return zc_perf_max(comm, (zc_perf_now() - t0) / o->iters);
}

static int64_t checked(zc_comm_h comm, const zc_perf_opts_t *o, int routed, int src, int dst,
                       size_t count, void *send, void *recv)
{
    int rank;
    size_t elem = zc_datatype_size(o->dtype);
    int salt = (int)(count % 100003) + routed;

    zc_comm_rank(comm, &rank);
    if (!o->check)
        return 0;
    zc_perf_fill(send, count * elem, src, salt);
    transfer(comm, routed, src, dst, count, o->dtype, send, recv);
    return zc_perf_sum(comm, rank == dst ? zc_perf_check(recv, count * elem, elem, src, salt) : 0);
}

/* Each rail's bytes during the routed loop, summed over the source node. */
static void print_rail_split(zc_comm_h comm, int nrails, const uint64_t *before, double seconds,
                             int iters, int src)
{
    int rank, node, src_node;
    uint64_t total = 0, share[MAX_RAILS];

    zc_comm_rank(comm, &rank);
    zc_comm_node(comm, &node);
    zc_comm_rank_node(comm, src, &src_node);
    for (int k = 0; k < nrails; k++) {
        uint64_t sent, received;
        zc_comm_rail_bytes(comm, k, &sent, &received);
        share[k] = (uint64_t)zc_perf_sum(comm, node == src_node ? (int64_t)(sent - before[k]) : 0);
        total += share[k];
    }
    if (rank != 0 || total == 0)
        return;
    printf("#   per NIC:");
    for (int k = 0; k < nrails; k++)
        printf("  nic%d %5.1f%% %.3f GB/s", k, 100.0 * (double)share[k] / (double)total,
               (double)share[k] / iters / seconds / 1e9);
    printf("\n");
}

int main(int argc, char **argv)
{
    routed_opts_t ro = {.src = 0, .dst = -1, .mode = "both"};
    zc_perf_opts_t o;
    int rank, size, nrails, src_node, dst_node;

    zc_perf_parse(argc, argv, TOOL,
                  "  -s RANK   source rank (default 0)\n"
                  "  -r RANK   destination rank (default: the last rank)\n"
                  "  -m MODE   routed, direct or both (default both)\n",
                  "s:r:m:", parse_extra, &ro, &o);
    zc_comm_h comm = zc_perf_init(TOOL);
    zc_comm_rank(comm, &rank);
    zc_comm_size(comm, &size);
    zc_comm_rail_count(comm, &nrails);
    if (ro.dst < 0)
        ro.dst = size - 1;
    if (ro.src < 0 || ro.src >= size || ro.dst < 0 || ro.dst >= size || ro.src == ro.dst) {
        fprintf(stderr, TOOL ": -s %d -r %d: need two distinct ranks of %d\n", ro.src, ro.dst,
                size);
        return 2;
    }
    zc_comm_rank_node(comm, ro.src, &src_node);
    zc_comm_rank_node(comm, ro.dst, &dst_node);
    /* A rank on the source's node, for the intra-node cost of the equation. */
    int intra_peer = -1;
    for (int r = 0; r < size && intra_peer < 0; r++) {
        int node;
        zc_comm_rank_node(comm, r, &node);
        if (r != ro.src && node == src_node)
            intra_peer = r;
    }
    if (nrails > MAX_RAILS)
        nrails = MAX_RAILS;
    size_t elem = zc_datatype_size(o.dtype);
    char *send = malloc(o.max_bytes + elem), *recv = malloc(o.max_bytes + elem);
    if (!send || !recv) {
        fprintf(stderr, TOOL ": cannot allocate 2 x %zu bytes\n", o.max_bytes);
        return 1;
    }
    memset(send, 1, o.max_bytes);
    if (rank == 0)
        printf("# rank %d (node %d) -> rank %d (node %d), %d rails; mode %s\n", ro.src, src_node,
               ro.dst, dst_node, nrails, ro.mode);
    zc_perf_print_header(comm, TOOL, &o);
    int do_direct = strcmp(ro.mode, "routed") != 0, do_routed = strcmp(ro.mode, "direct") != 0;

    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes = zc_perf_next_size(&o, bytes)) {
        size_t count = bytes / elem, moved = count * elem;
        double direct = 0, routed = 0, intra = 0;
        if (do_direct) {
            direct = timed(comm, &o, 0, ro.src, ro.dst, count, send, recv);
            int64_t wrong = checked(comm, &o, 0, ro.src, ro.dst, count, send, recv);
            if (rank == 0)
                printf("%-7s", "direct");
            zc_perf_print_row(comm, moved, count, o.dtype, direct, 1.0, wrong);
        }
        if (do_routed) {
            uint64_t before[MAX_RAILS], received;
            for (int k = 0; k < nrails; k++)
                zc_comm_rail_bytes(comm, k, &before[k], &received);
            routed = timed(comm, &o, 1, ro.src, ro.dst, count, send, recv);
            print_rail_split(comm, nrails, before, routed, o.iters + o.warmup, ro.src);
            int64_t wrong = checked(comm, &o, 1, ro.src, ro.dst, count, send, recv);
            if (rank == 0)
                printf("%-7s", "routed");
            zc_perf_print_row(comm, moved, count, o.dtype, routed, 1.0, wrong);
        }
        if (do_direct && do_routed && intra_peer >= 0)
            intra = timed(comm, &o, 0, ro.src, intra_peer, count, send, recv);
        if (do_direct && do_routed && rank == 0 && routed > 0) {
            double x = nrails > 0 ? nrails : 1;
            double hop = intra * (x - 1) / x, wire = direct / x;
            double sum = hop + wire + hop, bound = wire > hop ? wire : hop;
            printf("#   routed speedup %.2fx (ideal %.0fx); equation: %.0f us (intra %.0f us,"
                   " wire %.0f us, intra %.0f us), pipelined bound %.0f us; measured/equation"
                   " %.2f\n",
                   direct / routed, x, sum * 1e6, hop * 1e6, wire * 1e6, hop * 1e6, bound * 1e6,
                   routed / sum);
        }
    }
    int status = zc_perf_print_summary(comm);
    free(send);
    free(recv);
    zc_comm_destroy(comm);
    return status;
}
