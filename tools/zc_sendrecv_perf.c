/* zc_sendrecv_perf: point-to-point bandwidth in the style of nccl-tests'
 * sendrecv_perf.  Every rank sends to rank+1 and receives from rank-1 (a
 * ring); with -u, even ranks only send to the next odd rank (one way, as
 * ucx_perftest -t tag_bw measures), and -W keeps that many messages in
 * flight (tag_bw streams its sends; the default, one, waits for each);
 * with -P, rank pairs 2k, 2k+1 ping-pong and the time is half a round trip
 * (as ucx_perftest -t tag_lat measures latency).  -H takes the buffers
 * from zc_host_alloc (huge pages) instead of malloc. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_common.h"

#define TOOL "zc_sendrecv_perf"


#define MAX_WINDOW 64

typedef struct {
    int one_way;
    int window;   /* one-way messages in flight */
    int ping_pong;
    int huge;     /* buffers from zc_host_alloc */
} sendrecv_opts_t;

static int parse_extra(int opt, const char *arg, void *ctx)
{
    sendrecv_opts_t *o = ctx;
    char *end;

    if (opt == 'u' || opt == 'P' || opt == 'H') {
        *(opt == 'u' ? &o->one_way : opt == 'P' ? &o->ping_pong : &o->huge) = 1;
        return 0;
    }
    long w = strtol(arg, &end, 0);
    if (*end || w < 1 || w > MAX_WINDOW) {
        fprintf(stderr, TOOL ": -W takes 1 to %d, not '%s'\n", MAX_WINDOW, arg);
        return -1;
    }
    o->window = (int)w;
    return 0;
}

/* One way from rank 2k to 2k+1: `messages` messages of the same buffer
 * with up to `window` in flight, the oldest waited for and its slot given
 * to the next, as ucx_perftest -t tag_bw streams (the receiver's land on
 * one buffer too: bandwidth, as ucx_perftest measures it).  A window
 * drained between batches instead leaves a gap as long as the sender's
 * wake-up each time: under load a fifth of the bandwidth at 4 MiB
 * (BENCHMARKS.md, "Point-to-point"). */
static zc_status_t one_way(const void *send, void *recv, size_t count, zc_datatype_t dtype,
                           int rank, int size, int window, long messages, zc_comm_h comm)
{
    zc_request_h req[MAX_WINDOW];
    zc_status_t st = ZC_OK;
    long posted = 0, done = 0;
    int sender = rank % 2 == 0;

    if (sender && rank + 1 == size)
        return ZC_OK;
    while (done < posted || (st == ZC_OK && posted < messages)) {
        if (st == ZC_OK && posted < messages && posted - done < window) {
            zc_request_h *r = &req[posted % window];
            st = sender ? zc_send(send, (int64_t)count, dtype, ZC_MEM_HOST, rank + 1, comm, r)
                        : zc_recv(recv, (int64_t)count, dtype, ZC_MEM_HOST, rank - 1, comm, r);
            posted += st == ZC_OK;  /* a failed post made no request */
            continue;
        }
        zc_status_t w = zc_wait(&req[done++ % window]);
        if (st == ZC_OK)
            st = w;
    }
    return st;
}

/* 2k sends to 2k+1, which sends back, each message waited for. */
static zc_status_t ping_pong(const void *send, void *recv, size_t count, zc_datatype_t dtype,
                             int rank, int size, zc_comm_h comm)
{
    const int peer = rank ^ 1;
    zc_status_t st = ZC_OK;
    zc_request_h req;

    if (peer >= size)
        return ZC_OK;
    for (int step = 0; step < 2 && st == ZC_OK; step++) {
        if ((step == 0) == (rank % 2 == 0))
            st = zc_send(send, (int64_t)count, dtype, ZC_MEM_HOST, peer, comm, &req);
        else
            st = zc_recv(recv, (int64_t)count, dtype, ZC_MEM_HOST, peer, comm, &req);
        if (st == ZC_OK)
            st = zc_wait(&req);
    }
    return st;
}

/* One exchange: ring, one way between rank pairs (2k -> 2k+1), or a
 * ping-pong between them. */
static zc_status_t exchange(const void *send, void *recv, size_t count, zc_datatype_t dtype,
                            int rank, int size, const sendrecv_opts_t *o, zc_comm_h comm)
{
    if (o->one_way)
        return one_way(send, recv, count, dtype, rank, size, o->window, o->window, comm);
    if (o->ping_pong)
        return ping_pong(send, recv, count, dtype, rank, size, comm);
    return zc_sendrecv(send, (int64_t)count, (rank + 1) % size, recv, (int64_t)count,
                       (rank - 1 + size) % size, dtype, ZC_MEM_HOST, comm);
}

/* Both buffers from zc_host_alloc (-H) or from malloc; 0, or -1 with a
 * message. */
static int alloc_buffers(int huge, size_t bytes, void **send, void **recv)
{
    if (huge) {
        if (zc_host_alloc(bytes, send) == ZC_OK && zc_host_alloc(bytes, recv) == ZC_OK)
            return 0;
        fprintf(stderr, TOOL ": %s\n", zc_get_last_error());
        return -1;
    }
    *send = malloc(bytes);
    *recv = malloc(bytes);
    if (*send && *recv)
        return 0;
    fprintf(stderr, TOOL ": cannot allocate 2 x %zu bytes\n", bytes);
    return -1;
}

static void free_buffers(int huge, void *send, void *recv)
{
    if (huge) {
        zc_host_free(send);
        zc_host_free(recv);
    } else {
        free(send);
        free(recv);
    }
}

int main(int argc, char **argv)
{
    sendrecv_opts_t extra = {0, 1, 0, 0};
    zc_perf_opts_t opts;
    int rank, size;

    zc_perf_parse(argc, argv, TOOL,
                  "  -u        one way: rank 2k sends to 2k+1 (default: ring)\n"
                  "  -W N      with -u: keep N messages in flight (default 1); the timed\n"
                  "            messages (iterations x N) are one stream; time and bandwidth\n"
                  "            are per message\n"
                  "  -P        ping-pong between ranks 2k and 2k+1; time is half a round\n"
                  "            trip (ucx_perftest -t tag_lat's latency)\n"
                  "  -H        buffers from zc_host_alloc (huge pages; default: malloc)\n",
                  "uW:PH", parse_extra, &extra, &opts);
    if (extra.window > 1 && !extra.one_way) {
        fprintf(stderr, TOOL ": -W needs -u\n");
        return 2;
    }
    if (extra.ping_pong && extra.one_way) {
        fprintf(stderr, TOOL ": -P and -u exclude each other\n");
        return 2;
    }
    zc_comm_h comm = zc_perf_init(TOOL);
    zc_comm_rank(comm, &rank);
    zc_comm_size(comm, &size);
    size_t elem = zc_datatype_size(opts.dtype);
    void *send = NULL, *recv = NULL;
    if (alloc_buffers(extra.huge, opts.max_bytes + elem, &send, &recv) != 0)
        return 1;
    memset(send, 0, opts.max_bytes + elem);
    int from = extra.ping_pong ? rank ^ 1 : (rank - 1 + size) % size;
    int receives = extra.one_way ? rank % 2 == 1 : !extra.ping_pong || (rank ^ 1) < size;
    if ((extra.one_way || extra.ping_pong) && rank == 0 && size % 2)
        fprintf(stderr, TOOL ": -%c with an odd number of ranks leaves rank %d idle\n",
                extra.one_way ? 'u' : 'P', size - 1);
    zc_perf_print_header(comm, TOOL, &opts);

    for (size_t bytes = opts.min_bytes; bytes <= opts.max_bytes;
         bytes = zc_perf_next_size(&opts, bytes)) {
        size_t count = bytes / elem;
        size_t moved = count * elem;
        zc_status_t st;
        int64_t wrong = 0;

        for (int i = 0; i < opts.warmup; i++)
            if ((st = exchange(send, recv, count, opts.dtype, rank, size, &extra, comm)))
                zc_perf_die(TOOL, "warm-up", st);
        if ((st = zc_barrier(comm)))
            zc_perf_die(TOOL, "barrier", st);
        double t0 = zc_perf_now();
        if (extra.one_way) {  /* iters x window messages, one stream */
            if ((st = one_way(send, recv, count, opts.dtype, rank, size, extra.window,
                              (long)opts.iters * extra.window, comm)))
                zc_perf_die(TOOL, "exchange", st);
        } else {
            for (int i = 0; i < opts.iters; i++)
                if ((st = exchange(send, recv, count, opts.dtype, rank, size, &extra, comm)))
                    zc_perf_die(TOOL, "exchange", st);
        }
        double seconds = (zc_perf_now() - t0) / opts.iters /
                         (extra.ping_pong ? 2 : extra.window);
        if (opts.check) {
            /* One more exchange of known data, outside the timing. */
            zc_perf_fill(send, moved, rank, (int)(bytes % 1000003));
            if ((st = exchange(send, recv, count, opts.dtype, rank, size, &extra, comm)))
                zc_perf_die(TOOL, "check", st);
            if (receives)
                wrong = zc_perf_check(recv, moved, elem, from, (int)(bytes % 1000003));
        }
        seconds = zc_perf_max(comm, seconds);
        wrong = zc_perf_sum(comm, wrong);
        zc_perf_print_row(comm, moved, count, opts.dtype, seconds, 1.0, wrong);
    }
    int status = zc_perf_print_summary(comm);
    free_buffers(extra.huge, send, recv);
    zc_comm_destroy(comm);
    return status;
}
