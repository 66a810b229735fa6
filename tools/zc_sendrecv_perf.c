/* zc_sendrecv_perf: point-to-point bandwidth in the style of nccl-tests'
 * sendrecv_perf.  Every rank sends to rank+1 and receives from rank-1 (a
 * ring); with -u, even ranks only send to the next odd rank (one way, as
 * ucx_perftest -t tag_bw measures). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_common.h"

#define TOOL "zc_sendrecv_perf"


typedef struct {
    int one_way;
} sendrecv_opts_t;

static int parse_extra(int opt, const char *arg, void *ctx)
{
    ((sendrecv_opts_t *)ctx)->one_way = 1;
    return 0;
}

/* One exchange: ring, or one way between rank pairs (2k -> 2k+1). */
static zc_status_t exchange(const void *send, void *recv, size_t count, zc_datatype_t dtype,
                            int rank, int size, int one_way, zc_comm_h comm)
{
    zc_request_h req;

    if (!one_way)
        return zc_sendrecv(send, (int64_t)count, (rank + 1) % size, recv, (int64_t)count,
                           (rank - 1 + size) % size, dtype, ZC_MEM_HOST, comm);
    if (rank % 2 == 0 && rank + 1 < size) {
        zc_status_t st = zc_send(send, (int64_t)count, dtype, ZC_MEM_HOST, rank + 1, comm, &req);
        return st == ZC_OK ? zc_wait(&req) : st;
    }
    if (rank % 2 == 1) {
        zc_status_t st = zc_recv(recv, (int64_t)count, dtype, ZC_MEM_HOST, rank - 1, comm, &req);
        return st == ZC_OK ? zc_wait(&req) : st;
    }
    return ZC_OK;
}


int main(int argc, char **argv)
{
    sendrecv_opts_t extra = {0};
    zc_perf_opts_t opts;
    int rank, size;

    zc_perf_parse(argc, argv, TOOL, "  -u        one way: rank 2k sends to 2k+1 (default: ring)\n",
                  "u", parse_extra, &extra, &opts);
    zc_comm_h comm = zc_perf_init(TOOL);
    zc_comm_rank(comm, &rank);
    zc_comm_size(comm, &size);
    size_t elem = zc_datatype_size(opts.dtype);
    char *send = malloc(opts.max_bytes + elem), *recv = malloc(opts.max_bytes + elem);
    if (!send || !recv) {
        fprintf(stderr, TOOL ": cannot allocate 2 x %zu bytes\n", opts.max_bytes);
        return 1;
    }
    memset(send, 0, opts.max_bytes + elem);
    int from = (rank - 1 + size) % size;
    int receives = extra.one_way ? rank % 2 == 1 : 1;
    if (extra.one_way && rank == 0 && size % 2)
        fprintf(stderr, TOOL ": -u with an odd number of ranks leaves rank %d idle\n", size - 1);
    zc_perf_print_header(comm, TOOL, &opts);

    for (size_t bytes = opts.min_bytes; bytes <= opts.max_bytes;
         bytes = zc_perf_next_size(&opts, bytes)) {
        size_t count = bytes / elem;
        size_t moved = count * elem;
        zc_status_t st;
        int64_t wrong = 0;

        for (int i = 0; i < opts.warmup; i++)
            if ((st = exchange(send, recv, count, opts.dtype, rank, size, extra.one_way, comm)))
                zc_perf_die(TOOL, "warm-up", st);
        if ((st = zc_barrier(comm)))
            zc_perf_die(TOOL, "barrier", st);
        double t0 = zc_perf_now();
        for (int i = 0; i < opts.iters; i++)
            if ((st = exchange(send, recv, count, opts.dtype, rank, size, extra.one_way, comm)))
                zc_perf_die(TOOL, "exchange", st);
        double seconds = (zc_perf_now() - t0) / opts.iters;
        if (opts.check) {
            /* One more exchange of known data, outside the timing. */
            zc_perf_fill(send, moved, rank, (int)(bytes % 1000003));
            if ((st = exchange(send, recv, count, opts.dtype, rank, size, extra.one_way, comm)))
                zc_perf_die(TOOL, "check", st);
            if (receives)
                wrong = zc_perf_check(recv, moved, elem, from, (int)(bytes % 1000003));
        }
        seconds = zc_perf_max(comm, seconds);
        wrong = zc_perf_sum(comm, wrong);
        zc_perf_print_row(comm, moved, count, opts.dtype, seconds, 1.0, wrong);
    }
    int status = zc_perf_print_summary(comm);
    free(send);
    free(recv);
    zc_comm_destroy(comm);
    return status;
}
