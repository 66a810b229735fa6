/* Point-to-point over UCX: byte-exact transfers of every size class, order,
 * count mismatches, bad arguments, and a killed peer. */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"
#include "src/core/comm.h"
#include "src/core/p2p.h"
#include "src/core/sched.h"
#include "src/common/status.h"
#include "transport/ucx/ucx_lane.h"
#include "pattern.h"
#include "tap.h"
#include "zcomm.h"

#define CASE_TIMEOUT_S 120



static int init(int rank, int nranks, int timeout_ms, zc_comm_h *comm)
{
    zc_config_t config = ZC_CONFIG_INITIALIZER;

    config.timeout_ms = timeout_ms;
    /* Rank 0 makes the id: the parent that forks stays single-threaded. */
    MP_CHECK(mp_comm_init(rank, nranks, &config, comm) == ZC_OK, "init");
    return 0;
}

static const size_t sizes[] = {0, 1, 2, 7, 63, 4095, 4097, 65537, (1 << 20) + 3, 64 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Rank 0 sends every size to rank 1 and gets it back with zc_sendrecv. */
static int rank_sizes(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    if (init(rank, nranks, 30000, &comm))
        return 1;
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = sizes[s];
        uint8_t *buf = malloc(n + 1), *back = malloc(n + 1);
        zc_request_h req;
        MP_CHECK(buf && back, "malloc %zu", n);
        if (rank == 0) {
            pattern_fill(buf, n, 0, (int)s);
            MP_CHECK(zc_send(buf, (int64_t)n, ZC_BYTE, ZC_MEM_HOST, 1, comm, &req) == ZC_OK, "send");
            MP_CHECK(zc_wait(&req) == ZC_OK && req == NULL, "send %zu B completes", n);
            MP_CHECK(zc_sendrecv(buf, 0, 1, back, (int64_t)n, 1, ZC_BYTE, ZC_MEM_HOST, comm) ==
                         ZC_OK, "sendrecv back");
            MP_CHECK(pattern_first_wrong(back, n, 1, (int)s) == n, "echo of %zu B byte-exact", n);
        } else {
            memset(buf, 0, n + 1);
            MP_CHECK(zc_recv(buf, (int64_t)n, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req) == ZC_OK, "recv");
            MP_CHECK(zc_wait(&req) == ZC_OK, "recv %zu B completes", n);
            MP_CHECK(pattern_first_wrong(buf, n, 0, (int)s) == n, "%zu B byte-exact (wrong at %zu)", n,
                     pattern_first_wrong(buf, n, 0, (int)s));
            MP_CHECK(buf[n] == 0, "nothing written past %zu B", n);
            pattern_fill(back, n, 1, (int)s);
            MP_CHECK(zc_sendrecv(back, (int64_t)n, 0, buf, 0, 0, ZC_BYTE, ZC_MEM_HOST, comm) ==
                         ZC_OK, "sendrecv echo");
        }
        free(buf);
        free(back);
    }
    zc_comm_destroy(comm);
    return 0;
}

/* Every rank sends to its right neighbour and receives from its left, in
 * float32 with an odd count, several rounds. */
static int rank_ring(int rank, int nranks, void *arg)
{
    const int64_t count = *(int64_t *)arg;
    zc_comm_h comm;
    if (init(rank, nranks, 30000, &comm))
        return 1;
    uint8_t *out = malloc((size_t)count * 4), *in = malloc((size_t)count * 4);
    int right = (rank + 1) % nranks, left = (rank - 1 + nranks) % nranks;
    for (int round = 0; round < 3; round++) {
        pattern_fill(out, (size_t)count * 4, rank, round);
        MP_CHECK(zc_sendrecv(out, count, right, in, count, left, ZC_FLOAT32, ZC_MEM_HOST, comm) ==
                     ZC_OK, "ring sendrecv round %d", round);
        MP_CHECK(pattern_first_wrong(in, (size_t)count * 4, left, round) == (size_t)count * 4,
                 "ring round %d byte-exact", round);
        /* Barrier messages must never match a data receive. */
        MP_CHECK(zc_barrier(comm) == ZC_OK, "barrier after round %d", round);
    }
    free(out);
    free(in);
    zc_comm_destroy(comm);
    return 0;
}

/* Many messages in flight between one pair arrive in posting order, and
 * zc_test completes them without zc_wait.  Twice, with more requests than
 * a communicator keeps for reuse (p2p.c): the second round's come from the
 * first's, and carry nothing of them.  Messages of 8 bytes leave in place
 * (ucx_transport.c) until the receiver's shared-memory FIFO is full, then
 * queue in UCX: the order holds across that change too. */
typedef struct {
    int count;
    size_t len;
} order_case_t;

static int rank_order(int rank, int nranks, void *arg)
{
    const order_case_t *c = arg;
    zc_comm_h comm;
    if (init(rank, nranks, 30000, &comm))
        return 1;
    uint8_t *bufs = malloc((size_t)c->count * c->len);
    zc_request_h *reqs = malloc((size_t)c->count * sizeof(*reqs));
    MP_CHECK(bufs && reqs, "malloc");
    for (int round = 0; round < 2; round++) {
        memset(bufs, 0, (size_t)c->count * c->len);
        for (int i = 0; i < c->count; i++) {
            uint8_t *buf = bufs + (size_t)i * c->len;
            if (rank == 0) {
                pattern_fill(buf, c->len, round, i);
                MP_CHECK(zc_send(buf, (int64_t)c->len, ZC_BYTE, ZC_MEM_HOST, 1, comm,
                                 &reqs[i]) == ZC_OK, "send");
            } else {
                MP_CHECK(zc_recv(buf, (int64_t)c->len, ZC_BYTE, ZC_MEM_HOST, 0, comm,
                                 &reqs[i]) == ZC_OK, "recv");
            }
        }
        for (int pending = c->count; pending > 0;) {
            pending = 0;
            for (int i = 0; i < c->count; i++) {
                if (!reqs[i])
                    continue;
                zc_status_t st = zc_test(&reqs[i]);
                MP_CHECK(st == ZC_OK || st == ZC_INPROGRESS, "zc_test: %s", zc_strerror(st));
                pending += st == ZC_INPROGRESS;
            }
        }
        if (rank == 1)
            for (int i = 0; i < c->count; i++)
                MP_CHECK(pattern_first_wrong(bufs + (size_t)i * c->len, c->len, round, i) ==
                             c->len, "round %d: message %d in order", round, i);
        MP_CHECK(zc_barrier(comm) == ZC_OK, "barrier");
    }
    free(bufs);
    free(reqs);
    zc_comm_destroy(comm);
    return 0;
}

/* Test `req` until it finishes or `ms` pass; its last status. */
static zc_status_t test_for(zc_request_h *req, int ms)
{
    struct timespec t0, t;
    zc_status_t st;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        st = zc_p2p_test(req);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (st == ZC_INPROGRESS &&
             (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
    return st;
}

/* A send inside the node: its size, whether it is flagged ZC_P2P_EAGER,
 * and whether it should complete before its receive is posted. */
typedef struct {
    size_t bytes;
    int flagged, eager;
} eager_case_t;

/* A send completes before its receive is posted (the receiver waits for a
 * "go" that the sender sends only then) where it goes eager: flagged
 * ZC_P2P_EAGER up to UCX's own limit, unflagged below 128 KiB; an
 * unflagged 128 KiB send waits for its receive (UCX's rendezvous), which
 * shows the flag and the size are what make the difference.  Either way
 * the bytes arrive exact. */
static int rank_eager_send(int rank, int nranks, void *arg)
{
    const eager_case_t *c = arg;
    static uint8_t buf[128 << 10];
    uint64_t data_tag = ZC_TAG(0, ZC_TAG_CLASS_P2P, 1), go_tag = ZC_TAG(0, ZC_TAG_CLASS_P2P, 2);
    char go = 1;
    zc_request_h req, go_req;
    zc_comm_h comm;

    /* UCX's own thresholds and one whole message (this rank's process
     * only), whatever the caller exported */
    unsetenv("UCX_RNDV_THRESH");
    unsetenv("UCX_RNDV_SEND_NBR_THRESH");
    unsetenv("ZC_HOST_SPLIT_BYTES");
    if (init(rank, nranks, 30000, &comm))
        return 1;
    if (rank == 0) {
        pattern_fill(buf, c->bytes, 0, 0);
        MP_CHECK(zc_p2p_post_flags(comm, ZC_REQ_SEND, buf, c->bytes, 1, data_tag, ZC_RAIL_AUTO,
                                   c->flagged ? ZC_P2P_EAGER : 0, &req) == ZC_OK,
                 "post the send");
        zc_status_t st = test_for(&req, c->eager ? 20000 : 300);
        if (c->eager)
            MP_CHECK(st == ZC_OK, "the eager send is done before its receive exists: %s",
                     zc_strerror(st));
        else
            MP_CHECK(st == ZC_INPROGRESS, "the send waits for its receive: %s",
                     zc_strerror(st));
        MP_CHECK(zc_p2p_post(comm, ZC_REQ_SEND, &go, 1, 1, go_tag, ZC_RAIL_AUTO, &go_req) ==
                         ZC_OK && zc_p2p_wait(&go_req) == ZC_OK, "go");
        if (!c->eager)
            MP_CHECK(zc_p2p_wait(&req) == ZC_OK, "the send completes once received");
    } else {
        MP_CHECK(zc_p2p_post(comm, ZC_REQ_RECV, &go, 1, 0, go_tag, ZC_RAIL_AUTO, &go_req) ==
                         ZC_OK && zc_p2p_wait(&go_req) == ZC_OK, "wait for go");
        MP_CHECK(zc_p2p_post(comm, ZC_REQ_RECV, buf, c->bytes, 0, data_tag, ZC_RAIL_AUTO,
                             &req) == ZC_OK && zc_p2p_wait(&req) == ZC_OK, "receive");
        MP_CHECK(pattern_first_wrong(buf, c->bytes, 0, 0) == c->bytes, "%zu bytes exact",
                 c->bytes);
    }
    MP_CHECK(zc_barrier(comm) == ZC_OK, "barrier");
    zc_comm_destroy(comm);
    return 0;
}

/* A receive posted for another size than sent is ZC_ERR_MISMATCH. */
static int rank_mismatch(int rank, int nranks, void *arg)
{
    uint8_t buf[256] = {0};
    zc_comm_h comm;
    zc_request_h req;
    if (init(rank, nranks, 10000, &comm))
        return 1;
    if (rank == 0) {
        MP_CHECK(zc_send(buf, 100, ZC_BYTE, ZC_MEM_HOST, 1, comm, &req) == ZC_OK, "send");
        (void)zc_wait(&req);
        MP_CHECK(zc_send(buf, 100, ZC_BYTE, ZC_MEM_HOST, 1, comm, &req) == ZC_OK, "send");
        (void)zc_wait(&req);
    } else {
        MP_CHECK(zc_recv(buf, 50, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req) == ZC_OK, "recv");
        zc_status_t st = zc_wait(&req);
        MP_CHECK(st == ZC_ERR_MISMATCH, "short receive gave %s", zc_strerror(st));
        MP_CHECK(strstr(zc_get_last_error(), "count: rank 0 sent more than the 50 bytes"),
                 "detail names count: %s", zc_get_last_error());
        MP_CHECK(zc_recv(buf, 200, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req) == ZC_OK, "recv");
        st = zc_wait(&req);
        MP_CHECK(st == ZC_ERR_MISMATCH, "long receive gave %s", zc_strerror(st));
        MP_CHECK(strstr(zc_get_last_error(), "count: rank 0 sent less than the 200 bytes"),
                 "detail names count: %s", zc_get_last_error());
    }
    MP_CHECK(zc_barrier(comm) == ZC_OK, "barrier");
    zc_comm_destroy(comm);
    return 0;
}

/* A message between ranks of one host larger than ZC_HOST_SPLIT_BYTES
 * travels in two halves on two lanes (ucx_transport.c), the first longer
 * than the threshold.  With it at 4096: sizes on both sides of it (4097:
 * an empty second half) and of the halves' rounding, all in flight at once
 * in both directions, three rounds, each byte-exact with nothing written
 * past its end. */
static const size_t split_sizes[] = {4095,     4096,       4097,       4096 + 63,  4096 + 64,
                                     8192,     8192 + 1,   8192 + 127, 8192 + 128, 3 * 4096 + 5,
                                     100,      1 << 20,    (1 << 20) + 3};
#define NSPLIT (sizeof(split_sizes) / sizeof(split_sizes[0]))

static int rank_split_sizes(int rank, int nranks, void *arg)
{
    uint8_t *out[NSPLIT], *in[NSPLIT];
    zc_request_h sreq[NSPLIT], rreq[NSPLIT];
    zc_comm_h comm;
    const int peer = 1 - rank;
    (void)arg;

    setenv("ZC_HOST_SPLIT_BYTES", "4096", 1);
    if (init(rank, nranks, 30000, &comm))
        return 1;
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < NSPLIT; i++) {
            out[i] = malloc(split_sizes[i]);
            in[i] = calloc(1, split_sizes[i] + 1);
            MP_CHECK(out[i] && in[i], "malloc %zu", split_sizes[i]);
            pattern_fill(out[i], split_sizes[i], rank, round * (int)NSPLIT + (int)i);
            MP_CHECK(zc_recv(in[i], (int64_t)split_sizes[i], ZC_BYTE, ZC_MEM_HOST, peer, comm,
                             &rreq[i]) == ZC_OK, "recv %zu", split_sizes[i]);
        }
        for (size_t i = 0; i < NSPLIT; i++)
            MP_CHECK(zc_send(out[i], (int64_t)split_sizes[i], ZC_BYTE, ZC_MEM_HOST, peer, comm,
                             &sreq[i]) == ZC_OK, "send %zu", split_sizes[i]);
        for (size_t i = 0; i < NSPLIT; i++) {
            size_t n = split_sizes[i];
            MP_CHECK(zc_wait(&sreq[i]) == ZC_OK, "round %d: send of %zu B", round, n);
            MP_CHECK(zc_wait(&rreq[i]) == ZC_OK, "round %d: receive of %zu B", round, n);
            MP_CHECK(pattern_first_wrong(in[i], n, peer, round * (int)NSPLIT + (int)i) == n,
                     "round %d: %zu B byte-exact (wrong at %zu)", round, n,
                     pattern_first_wrong(in[i], n, peer, round * (int)NSPLIT + (int)i));
            MP_CHECK(in[i][n] == 0, "round %d: nothing written past %zu B", round, n);
            free(out[i]);
            free(in[i]);
        }
    }
    zc_comm_destroy(comm);
    return 0;
}

/* Counts that differ between the two sides, with messages above T = 64 KiB
 * (ZC_HOST_SPLIT_BYTES) split in halves.  `arg`:
 * - "split-split": 2T sent, 3T posted: both split, the receive fails with
 *   ZC_ERR_MISMATCH and uses up both halves; the next split message of
 *   the right size arrives byte-exact.
 * - "whole-split": 2T sent (split: T + 1 bytes and T - 1), T posted
 *   (whole): the whole receive meets the first half, ZC_ERR_MISMATCH
 *   naming the threshold; a split receive from that peer then fails
 *   (halves can no longer be paired), the send ends (ZC_OK, or a timeout
 *   where its second half went by rendezvous and is never taken), and a
 *   whole message still arrives byte-exact.
 * - "split-whole": T sent (whole), T + 1 posted (split): the same from the
 *   other side.
 * - "off": ZC_HOST_SPLIT_BYTES=0, 2T sent, T posted: ZC_ERR_MISMATCH,
 *   "sent more". */
static int rank_split_mismatch(int rank, int nranks, void *arg)
{
    enum { T = 65536, SMALL = 100 };
    const char *mode = arg;
    const int off = strcmp(mode, "off") == 0, both = strcmp(mode, "split-split") == 0;
    const int64_t sent = strcmp(mode, "split-whole") == 0 ? T : 2 * T;
    const int64_t posted = both ? 3 * T : strcmp(mode, "split-whole") == 0 ? T + 1 : T;
    static uint8_t buf[3 * T + 1];
    zc_comm_h comm;
    zc_request_h req;
    zc_status_t st;

    setenv("ZC_HOST_SPLIT_BYTES", off ? "0" : "65536", 1);
    if (init(rank, nranks, 1000, &comm))
        return 1;
    if (rank == 0) {
        pattern_fill(buf, (size_t)sent, 0, 1);
        MP_CHECK(zc_send(buf, sent, ZC_BYTE, ZC_MEM_HOST, 1, comm, &req) == ZC_OK, "send");
        st = zc_wait(&req);
        if (strcmp(mode, "whole-split") == 0)
            MP_CHECK(st == ZC_OK || st == ZC_ERR_TIMEOUT, "a split send whose second half is "
                     "never taken gave %s", zc_strerror(st));
        /* the next message: split again (split-split), or a whole one */
        int64_t next = both ? 2 * T : SMALL;
        pattern_fill(buf, (size_t)next, 0, 2);
        MP_CHECK(zc_send(buf, next, ZC_BYTE, ZC_MEM_HOST, 1, comm, &req) == ZC_OK, "send");
        MP_CHECK((st = zc_wait(&req)) == ZC_OK, "the next send gave %s", zc_strerror(st));
    } else {
        MP_CHECK(zc_recv(buf, posted, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req) == ZC_OK, "recv");
        st = zc_wait(&req);
        const char *detail = zc_get_last_error();
        MP_CHECK(st == ZC_ERR_MISMATCH, "%lld B posted for %lld B sent gave %s", (long long)posted,
                 (long long)sent, zc_strerror(st));
        MP_CHECK(strstr(detail, off ? "sent more than" : both ? "sent less than"
                                                             : "ZC_HOST_SPLIT_BYTES (65536)"),
                 "the detail says why: %s", detail);
        if (!off && !both) {
            /* split receives from rank 0 are over; whole ones go on */
            st = zc_recv(buf, 2 * T, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req);
            MP_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "earlier receive"),
                     "a split receive after it gave %s: %s", zc_strerror(st),
                     zc_get_last_error());
        }
        int64_t next = both ? 2 * T : SMALL;
        memset(buf, 0, sizeof(buf));
        MP_CHECK(zc_recv(buf, next, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req) == ZC_OK, "recv");
        /* zc_test, not zc_wait: rank 0 may send it only after its own 1 s
         * timeout (whole-split), later than this rank's would end */
        for (int ms = 0; (st = zc_test(&req)) == ZC_INPROGRESS && ms < 60000; ms++)
            usleep(1000);
        MP_CHECK(st == ZC_OK, "the next receive gave %s", zc_strerror(st));
        MP_CHECK(pattern_first_wrong(buf, (size_t)next, 0, 2) == (size_t)next && buf[next] == 0,
                 "the next message (%lld B) arrived byte-exact", (long long)next);
    }
    MP_CHECK(zc_barrier(comm) == ZC_OK, "barrier");
    zc_comm_destroy(comm);
    return 0;
}

#define EXPECT_ARG(call, word)                                                \
    do {                                                                      \
        zc_status_t st_ = (call);                                             \
        MP_CHECK(st_ == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), word), \
                 "%s gave %s", #call, zc_strerror(st_));                      \
    } while (0)

static int rank_bad_args(int rank, int nranks, void *arg)
{
    uint8_t buf[16];
    zc_comm_h comm;
    zc_request_h req = NULL, null_req = NULL;
    if (init(rank, nranks, 5000, &comm))
        return 1;
    EXPECT_ARG(zc_send(buf, 1, ZC_BYTE, ZC_MEM_HOST, 0, comm, NULL), "request");
    EXPECT_ARG(zc_send(buf, -1, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req), "count");
    EXPECT_ARG(zc_recv(buf, INT64_MAX, ZC_FLOAT32, ZC_MEM_HOST, 0, comm, &req), "count");
    EXPECT_ARG(zc_send(buf, 1, (zc_datatype_t)99, ZC_MEM_HOST, 0, comm, &req), "dtype");
    EXPECT_ARG(zc_send(buf, 1, ZC_BYTE, (zc_memtype_t)7, 0, comm, &req), "memtype");
    EXPECT_ARG(zc_send(buf, 1, ZC_BYTE, ZC_MEM_HOST, nranks, comm, &req), "peer");
    EXPECT_ARG(zc_recv(buf, 1, ZC_BYTE, ZC_MEM_HOST, -1, comm, &req), "peer");
    EXPECT_ARG(zc_recv(NULL, 4, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req), "buf");
    EXPECT_ARG(zc_send(buf, 1, ZC_BYTE, ZC_MEM_HOST, 0, NULL, &req), "comm");
    EXPECT_ARG(zc_wait(NULL), "request");
    EXPECT_ARG(zc_wait(&null_req), "request");
    EXPECT_ARG(zc_test(&null_req), "request");
    EXPECT_ARG(zc_sendrecv(buf, 1, 5, buf, 1, 0, ZC_BYTE, ZC_MEM_HOST, comm), "peer");
    /* zc_routed_sendrecv's checks (src/plan/routing.c), on every machine */
    zc_transfer_t t = {rank, (rank + 1) % nranks, 4}, two[2] = {t, t};
    zc_transfer_t src_out = {nranks, 0, 4}, dst_twice[2] = {{0, rank, 1}, {1 % nranks, rank, 1}};
    zc_transfer_t huge = {rank, (rank + 1) % nranks, INT64_MAX};
    EXPECT_ARG(zc_routed_sendrecv(NULL, 1, buf, buf, ZC_BYTE, ZC_MEM_HOST, comm, &req),
               "transfers");
    EXPECT_ARG(zc_routed_sendrecv(&t, ZC_ROUTED_MAX_TRANSFERS + 1, buf, buf, ZC_BYTE,
                                  ZC_MEM_HOST, comm, &req), "ntransfers");
    EXPECT_ARG(zc_routed_sendrecv(&t, 1, buf, buf, (zc_datatype_t)99, ZC_MEM_HOST, comm, &req),
               "dtype");
    EXPECT_ARG(zc_routed_sendrecv(&src_out, 1, buf, buf, ZC_BYTE, ZC_MEM_HOST, comm, &req),
               "transfers[0].src");
    EXPECT_ARG(zc_routed_sendrecv(&t, 1, NULL, buf, ZC_BYTE, ZC_MEM_HOST, comm, &req),
               "sendbuf");
    EXPECT_ARG(zc_routed_sendrecv(two, 2, buf, buf, ZC_BYTE, ZC_MEM_HOST, comm, &req),
               "src of more than one");
    EXPECT_ARG(zc_routed_sendrecv(dst_twice, 2, buf, buf, ZC_BYTE, ZC_MEM_HOST, comm, &req),
               "dst of more than one");
    EXPECT_ARG(zc_routed_sendrecv(&huge, 1, buf, buf, ZC_FLOAT32, ZC_MEM_HOST, comm, &req),
               "count");
    zc_status_t st = zc_send(buf, 1, ZC_BYTE, ZC_MEM_CUDA, 0, comm, &req);
    MP_CHECK(st == ZC_ERR_UNSUPPORTED && strstr(zc_get_last_error(), "memtype"),
             "CUDA memory on the host path gave %s", zc_strerror(st));
    MP_CHECK(req == NULL, "no request written on failure");
    /* A request whose communicator is destroyed is refused, not followed. */
    MP_CHECK(zc_recv(buf, 1, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req) == ZC_OK, "recv from self");
    zc_comm_destroy(comm);
    EXPECT_ARG(zc_wait(&req), "destroyed");
    MP_CHECK(req == NULL, "request released");
    EXPECT_ARG(zc_send(buf, 1, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req), "destroyed");
    return 0;
}

/* Refused with ZC_ERR_INVALID_ARG, the detail naming both buffers. */
#define EXPECT_OVERLAP(call)                                                  \
    do {                                                                      \
        zc_status_t st_ = (call);                                             \
        MP_CHECK(st_ == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "sendbuf, recvbuf") && \
                     strstr(zc_get_last_error(), "overlap"),                  \
                 "%s gave %s", #call, zc_strerror(st_));                      \
    } while (0)

static uint64_t sent_so_far(zc_comm_h comm)
{
    uint64_t sent = 0, received;

    (void)zc_comm_rail_bytes(comm, -1, &sent, &received);
    return sent;
}

/* zc_sendrecv of 1 MiB in place (a swap with sendbuf == recvbuf, as the
 * issue found: ZC_OK and wrong bytes), or overlapping by half or by one
 * byte, is refused on both ranks before anything is posted; the next
 * exchange between adjacent buffers then gets its own bytes, not a refused
 * call's (they would match first: same tag). */
static int rank_aliased_sendrecv(int rank, int nranks, void *arg)
{
    const int64_t n = 1 << 20;
    int peer = 1 - rank;
    zc_comm_h comm;
    (void)arg;

    if (init(rank, nranks, 30000, &comm))
        return 1;
    uint8_t *buf = malloc(2 * (size_t)n);
    MP_CHECK(buf != NULL, "malloc");
    pattern_fill(buf, 2 * (size_t)n, rank, 1);
    uint64_t sent = sent_so_far(comm);
    EXPECT_OVERLAP(zc_sendrecv(buf, n, peer, buf, n, peer, ZC_BYTE, ZC_MEM_HOST, comm));
    EXPECT_OVERLAP(zc_sendrecv(buf, n, peer, buf + n / 2, n, peer, ZC_BYTE, ZC_MEM_HOST, comm));
    EXPECT_OVERLAP(zc_sendrecv(buf + n - 1, n, peer, buf, n, peer, ZC_BYTE, ZC_MEM_HOST, comm));
    EXPECT_OVERLAP(zc_sendrecv(buf, n / 4, peer, buf, n / 4, peer, ZC_FLOAT32, ZC_MEM_HOST,
                               comm));
    MP_CHECK(sent_so_far(comm) == sent, "refused calls sent %llu bytes",
             (unsigned long long)(sent_so_far(comm) - sent));
    MP_CHECK(pattern_first_wrong(buf, 2 * (size_t)n, rank, 1) == 2 * (size_t)n,
             "refused calls left the buffer alone");
    pattern_fill(buf, (size_t)n, rank, 2);
    MP_CHECK(zc_sendrecv(buf, n, peer, buf + n, n, peer, ZC_BYTE, ZC_MEM_HOST, comm) == ZC_OK,
             "adjacent buffers accepted");
    MP_CHECK(pattern_first_wrong(buf + n, (size_t)n, peer, 2) == (size_t)n,
             "the next exchange got its own bytes (wrong at %zu)",
             pattern_first_wrong(buf + n, (size_t)n, peer, 2));
    free(buf);
    zc_comm_destroy(comm);
    return 0;
}

/* Post a routed call and wait for it: the status of whichever failed. */
static zc_status_t routed(const zc_transfer_t *t, int n, const void *send, void *recv,
                          zc_comm_h comm)
{
    zc_request_h req = NULL;
    zc_status_t st = zc_routed_sendrecv(t, n, send, recv, ZC_BYTE, ZC_MEM_HOST, comm, &req);

    return st == ZC_OK ? zc_wait(&req) : st;
}

/* A transfer list that differs between ranks (the issue's: rank 0 says
 * 0 -> 1, rank 1 says 0 -> 0, any third rank has none) fails on every rank
 * with ZC_ERR_MISMATCH before the data moves, at every size (the issue saw
 * ZC_OK with the message dropped at 1000 bytes, a timeout at 4 MiB); the
 * same communicator then moves a list they agree on byte-exact. */
static int rank_routed_disagree(int rank, int nranks, void *arg)
{
    const int64_t n = *(const int64_t *)arg;
    zc_transfer_t mine[1] = {{0, rank == 0 ? 1 : 0, n}}, agreed = {0, 1, n};
    zc_comm_h comm;

    if (init(rank, nranks, 30000, &comm))
        return 1;
    uint8_t *send = malloc((size_t)n), *recv = malloc((size_t)n);
    MP_CHECK(send && recv, "malloc");
    pattern_fill(send, (size_t)n, rank, 1);
    memset(recv, 0xee, (size_t)n);
    uint64_t sent = sent_so_far(comm);
    zc_status_t st = routed(mine, rank < 2 ? 1 : 0, send, recv, comm);
    MP_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "different transfer lists"),
             "disagreeing lists gave %s", zc_strerror(st));
    /* The agreement's own messages are a few dozen bytes. */
    MP_CHECK(sent_so_far(comm) - sent < (uint64_t)n, "%llu bytes went out",
             (unsigned long long)(sent_so_far(comm) - sent));
    MP_CHECK(recv[0] == 0xee && recv[n - 1] == 0xee, "nothing received");
    pattern_fill(send, (size_t)n, rank, 2);
    MP_CHECK(routed(&agreed, 1, send, recv, comm) == ZC_OK, "the agreed list");
    if (rank == 1)
        MP_CHECK(pattern_first_wrong(recv, (size_t)n, 0, 2) == (size_t)n,
                 "the agreed list's bytes (wrong at %zu)", pattern_first_wrong(recv, (size_t)n, 0, 2));
    free(send);
    free(recv);
    zc_comm_destroy(comm);
    return 0;
}

/* zc_routed_sendrecv of 3 MiB in place (a swap with sendbuf == recvbuf)
 * is refused: on both ranks when both do it; when only rank 0 does, rank 0
 * gets ZC_ERR_INVALID_ARG and rank 1, instead of waiting for data that
 * never comes, ZC_ERR_MISMATCH naming rank 0.  Nothing moves, and the
 * swap with separate buffers then works byte-exact. */
static int rank_routed_aliased(int rank, int nranks, void *arg)
{
    const int64_t n = 3 << 20;
    zc_transfer_t swap[2] = {{0, 1, n}, {1, 0, n}};
    zc_comm_h comm;
    (void)arg;

    if (init(rank, nranks, 30000, &comm))
        return 1;
    uint8_t *send = malloc((size_t)n), *recv = malloc((size_t)n);
    MP_CHECK(send && recv, "malloc");
    pattern_fill(send, (size_t)n, rank, 1);
    memset(recv, 0xee, (size_t)n);
    EXPECT_OVERLAP(routed(swap, 2, send, send, comm));
    if (rank == 0) {
        EXPECT_OVERLAP(routed(swap, 2, send, send + n - 1, comm));
    } else {
        zc_status_t st = routed(swap, 2, send, recv, comm);
        MP_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "rank 0 refused"),
                 "the peer of a refused call gave %s", zc_strerror(st));
    }
    MP_CHECK(pattern_first_wrong(send, (size_t)n, rank, 1) == (size_t)n, "sendbuf left alone");
    MP_CHECK(recv[0] == 0xee && recv[n - 1] == 0xee, "nothing received");
    MP_CHECK(routed(swap, 2, send, recv, comm) == ZC_OK, "the swap with separate buffers");
    MP_CHECK(pattern_first_wrong(recv, (size_t)n, 1 - rank, 1) == (size_t)n,
             "swapped bytes (wrong at %zu)", pattern_first_wrong(recv, (size_t)n, 1 - rank, 1));
    free(send);
    free(recv);
    zc_comm_destroy(comm);
    return 0;
}

/* A receive that times out says which rank it waited for, from this
 * rank's side ("a receive of N bytes from rank R"), not as if the peer
 * were the receiver.  One rank receiving from itself what it never sends:
 * it can only time out, so the short timeout decides nothing but the
 * case's length. */
static int rank_timeout_detail(int rank, int nranks, void *arg)
{
    uint8_t buf[64];
    zc_comm_h comm;
    zc_request_h req;
    (void)arg;

    if (init(rank, nranks, 200, &comm))
        return 1;
    MP_CHECK(zc_recv(buf, sizeof(buf), ZC_BYTE, ZC_MEM_HOST, 0, comm, &req) == ZC_OK, "recv");
    zc_status_t st = zc_wait(&req);
    MP_CHECK(st == ZC_ERR_TIMEOUT &&
                 strstr(zc_get_last_error(), "a receive of 64 bytes from rank 0 did not complete"),
             "an unmatched receive gave %s", zc_strerror(st));
    zc_comm_destroy(comm);
    return 0;
}

static zc_status_t step_that_fails(void *arg, int i)
{
    (void)arg;
    return zc_error(ZC_ERR_MISMATCH, "step %d found a disagreement", i);
}

/* A schedule whose step fails in the pass of zc_sched_start (as a
 * collective's verdict does when every message is already in): zc_wait
 * and zc_test, which clear the last error, still report the step's status
 * and its message. */
static int rank_sched_fails_at_start(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    (void)arg;

    if (init(rank, nranks, 20000, &comm))
        return 1;
    for (int poll = 0; poll < 2; poll++) {
        zc_sched_t *s;
        zc_request_h req;
        MP_CHECK(zc_sched_create(comm, &s) == ZC_OK, "create");
        zc_sched_call(s, step_that_fails, NULL, 7, ZC_SCHED_NONE, ZC_SCHED_NONE);
        MP_CHECK(zc_sched_start(s, &req) == ZC_OK, "start");
        zc_status_t st = poll ? zc_test(&req) : zc_wait(&req);
        MP_CHECK(st == ZC_ERR_MISMATCH && req == NULL, "%s gave %s", poll ? "zc_test" : "zc_wait",
                 zc_strerror(st));
        MP_CHECK(strcmp(zc_get_last_error(), "step 7 found a disagreement") == 0,
                 "%s says \"%s\"", poll ? "zc_test" : "zc_wait", zc_get_last_error());
    }
    zc_comm_destroy(comm);
    return 0;
}

/* Rank 1 dies; rank 0's pending receive (and a later send) must end with an
 * error within the timeout instead of hanging. */
static int rank_killed_peer(int rank, int nranks, void *arg)
{
    static uint8_t buf[1 << 20];
    zc_comm_h comm;
    zc_request_h req;
    if (arg)
        setenv("UCX_TLS", (const char *)arg, 1);
    if (init(rank, nranks, 4000, &comm))
        return 1;
    MP_CHECK(zc_barrier(comm) == ZC_OK, "barrier");
    if (rank == 1) {
        usleep(100000);
        raise(SIGKILL);
    }
    MP_CHECK(zc_recv(buf, sizeof(buf), ZC_BYTE, ZC_MEM_HOST, 1, comm, &req) == ZC_OK, "recv");
    zc_status_t st = zc_wait(&req);
    MP_CHECK(st == ZC_ERR_PEER_FAILED || st == ZC_ERR_TIMEOUT, "receive from a dead peer gave %s",
             zc_strerror(st));
    fprintf(stderr, "# receive from a killed peer (%s): %s, %s\n", arg ? (char *)arg : "default",
            zc_strerror(st), zc_get_last_error());
    zc_comm_destroy(comm);
    return 0;
}

/* Rank 1 SIGKILLs itself in the middle of repeated 32 MiB exchanges with
 * rank 0 (shared memory; `arg` "tcp": UCX_TLS=tcp).  ZC_TIMEOUT is 60 s,
 * longer than the case can take, so a timeout is wrong here: the survivor
 * must report the death as ZC_ERR_PEER_FAILED, never as a timeout ("timed
 * out ... Connection reset by remote peer") nor as ZC_ERR_TRANSPORT
 * ("Shared memory error"), and never abort. */
static int rank_killed_mid_transfer(int rank, int nranks, void *arg)
{
    const size_t n = 32u << 20;
    zc_comm_h comm;
    zc_status_t st = ZC_OK;
    if (arg)
        setenv("UCX_TLS", (const char *)arg, 1);
    if (init(rank, nranks, 60000, &comm))
        return 1;
    char *send = malloc(n), *recv = malloc(n);
    MP_CHECK(send && recv, "malloc");
    memset(send, rank + 1, n);
    MP_CHECK(zc_barrier(comm) == ZC_OK, "barrier");
    for (int i = 0; st == ZC_OK && i < 1000; i++) {
        if (rank == 1 && i == 3) {
            /* Mid-transfer: the exchange is posted, the data moving. */
            zc_request_h req[2];
            MP_CHECK(zc_recv(recv, (int64_t)n, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req[0]) == ZC_OK &&
                         zc_send(send, (int64_t)n, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req[1]) ==
                             ZC_OK, "post");
            zc_test(&req[0]);
            usleep(2000);
            zc_test(&req[1]);
            raise(SIGKILL);
        }
        st = zc_sendrecv(send, (int64_t)n, 1 - rank, recv, (int64_t)n, 1 - rank, ZC_BYTE,
                         ZC_MEM_HOST, comm);
    }
    MP_CHECK(rank == 0 && st == ZC_ERR_PEER_FAILED, "a peer killed mid-transfer gave %s (%s)",
             zc_strerror(st), zc_get_last_error());
    fprintf(stderr, "# peer killed mid-transfer (%s): %s, %s\n", arg ? (char *)arg : "default",
            zc_strerror(st), zc_get_last_error());
    zc_comm_destroy(comm);
    free(send);
    free(recv);
    return 0;
}

typedef struct {
    const char *tls;  /* UCX_TLS, or NULL: shared memory */
    int sched;        /* the receives as one schedule, each after the one before */
} last_words_case_t;

#define LAST_WORDS_MSGS 32
#define LAST_WORDS_BYTES (2u << 10)

/* Rank 1 sends its last messages (eager: done once copied out) and ends,
 * destroying its communicator, without a word more; rank 0 posts its
 * receives only once it knows rank 1 is dead.  What rank 1 sent is there
 * and must be taken, byte-exact: a wait gives up on a dead peer only after
 * taking everything that peer left (a schedule's wait used to fail at the
 * first pass that moved nothing, with messages still in the transport:
 * ZC_ERR_PEER_FAILED in 8 of 12 schedule cases). */
static int rank_last_words(int rank, int nranks, void *arg)
{
    const last_words_case_t *c = arg;
    static uint8_t buf[LAST_WORDS_MSGS][LAST_WORDS_BYTES];
    zc_request_h req[LAST_WORDS_MSGS];
    zc_comm_h comm;

    unsetenv("UCX_RNDV_THRESH");
    unsetenv("ZC_HOST_SPLIT_BYTES");
    if (c->tls)
        setenv("UCX_TLS", c->tls, 1);
    if (init(rank, nranks, 20000, &comm))
        return 1;
    MP_CHECK(zc_barrier(comm) == ZC_OK, "barrier");
    if (rank == 1) {
        for (int m = 0; m < LAST_WORDS_MSGS; m++) {
            pattern_fill(buf[m], LAST_WORDS_BYTES, 1, m);
            MP_CHECK(zc_p2p_post_flags(comm, ZC_REQ_SEND, buf[m], LAST_WORDS_BYTES, 0,
                                       ZC_TAG(0, ZC_TAG_CLASS_P2P, m), ZC_RAIL_AUTO, ZC_P2P_EAGER,
                                       &req[m]) == ZC_OK, "post send %d", m);
        }
        MP_CHECK(zc_p2p_wait_all(req, LAST_WORDS_MSGS) == ZC_OK, "sends done");
        /* A done send may still sit in UCX's buffers: the destroy flushes
         * them (and says nothing to rank 0) */
        zc_comm_destroy(comm);
        _exit(0);
    }
    for (int ms = 0; !zc_comm_peer_failed(comm, 1); ms++) {
        MP_CHECK(ms < 20000, "rank 1 still lives after 20 s");
        usleep(1000);
    }
    zc_status_t st;
    if (c->sched) {
        zc_sched_t *s;
        zc_request_h sreq;
        MP_CHECK(zc_sched_create(comm, &s) == ZC_OK, "create");
        for (int m = 0, dep = ZC_SCHED_NONE; m < LAST_WORDS_MSGS; m++)
            dep = zc_sched_p2p(s, ZC_REQ_RECV, buf[m], LAST_WORDS_BYTES, 1,
                               ZC_TAG(0, ZC_TAG_CLASS_P2P, m), ZC_RAIL_AUTO, dep, ZC_SCHED_NONE);
        MP_CHECK(zc_sched_start(s, &sreq) == ZC_OK, "start");
        st = zc_wait(&sreq);
    } else {
        for (int m = 0; m < LAST_WORDS_MSGS; m++)
            MP_CHECK(zc_p2p_post(comm, ZC_REQ_RECV, buf[m], LAST_WORDS_BYTES, 1,
                                 ZC_TAG(0, ZC_TAG_CLASS_P2P, m), ZC_RAIL_AUTO, &req[m]) == ZC_OK,
                     "post receive %d", m);
        st = zc_p2p_wait_all(req, LAST_WORDS_MSGS);
    }
    MP_CHECK(st == ZC_OK, "the receives of what the dead peer sent gave %s (%s)",
             zc_strerror(st), zc_get_last_error());
    for (int m = 0; m < LAST_WORDS_MSGS; m++)
        MP_CHECK(pattern_first_wrong(buf[m], LAST_WORDS_BYTES, 1, m) == LAST_WORDS_BYTES,
                 "message %d byte-exact", m);
    zc_comm_destroy(comm);
    return 0;
}

/* UCX's own warnings go through ZC_LOG_LEVEL: rank 1's eager messages
 * that rank 0 never receives make UCX warn "unexpected tag-receive
 * descriptor ... was not matched" when rank 0's worker goes; at the
 * default level rank 0's stderr must not show them, at ZC_LOG_LEVEL=info
 * (`arg`) it shows them in libzcomm's format. */
static int rank_ucx_log(int rank, int nranks, void *arg)
{
    char path[64], text[8192];
    uint64_t word = 42;
    zc_comm_h comm;
    zc_request_h req;
    int saved = -1;

    snprintf(path, sizeof(path), "/tmp/test_p2p_ucxlog.%d", (int)getpid());
    if (rank == 0) {
        if (arg)
            setenv("ZC_LOG_LEVEL", (const char *)arg, 1);
        fflush(stderr);
        saved = dup(2);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        MP_CHECK(fd >= 0 && saved >= 0 && dup2(fd, 2) == 2, "redirect stderr");
        close(fd);
    }
    if (init(rank, nranks, 20000, &comm))
        return 1;
    if (rank == 1)
        for (int i = 0; i < 3; i++) {
            MP_CHECK(zc_send(&word, 1, ZC_INT64, ZC_MEM_HOST, 0, comm, &req) == ZC_OK, "send");
            MP_CHECK(zc_wait(&req) == ZC_OK, "send completes");
        }
    MP_CHECK(zc_barrier(comm) == ZC_OK, "barrier");
    zc_comm_destroy(comm);
    if (rank == 1)
        return 0;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    text[len] = '\0';
    if (f)
        fclose(f);
    unlink(path);
    if (!arg) {
        MP_CHECK(!strstr(text, "UCX  WARN") && !strstr(text, "UCX  ERROR") &&
                     !strstr(text, "not matched"),
                 "UCX printed at the default level: %.80s", text);
    } else {
        MP_CHECK(strstr(text, "not matched") && !strstr(text, "UCX  WARN"),
                 "UCX's warning at ZC_LOG_LEVEL=%s: %.80s", (const char *)arg, text);
    }
    return 0;
}

/* Over 2^31 bytes in one message: 64-bit counts end to end. */
static int rank_huge(int rank, int nranks, void *arg)
{
    const size_t n = ((size_t)1 << 31) + 13;
    zc_comm_h comm;
    zc_request_h req;
    if (init(rank, nranks, 120000, &comm))
        return 1;
    uint64_t *buf = malloc(n + 8);
    MP_CHECK(buf != NULL, "malloc 2 GiB");
    size_t words = n / 8;
    if (rank == 0) {
        for (size_t i = 0; i < words; i++)
            buf[i] = i * 0x9e3779b97f4a7c15ULL;
        memset((char *)buf + words * 8, 0xab, n - words * 8);
        MP_CHECK(zc_send(buf, (int64_t)n, ZC_BYTE, ZC_MEM_HOST, 1, comm, &req) == ZC_OK, "send");
    } else {
        memset(buf, 0, n);
        MP_CHECK(zc_recv(buf, (int64_t)n, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req) == ZC_OK, "recv");
    }
    MP_CHECK(zc_wait(&req) == ZC_OK, "2 GiB transfer completes");
    if (rank == 1) {
        for (size_t i = 0; i < words; i++)
            MP_CHECK(buf[i] == i * 0x9e3779b97f4a7c15ULL, "word %zu wrong", i);
        for (size_t i = words * 8; i < n; i++)
            MP_CHECK(((uint8_t *)buf)[i] == 0xab, "tail byte %zu wrong", i);
    }
    free(buf);
    zc_comm_destroy(comm);
    return 0;
}

/* How UCX's statuses of an operation read: a connection the peer reset is
 * a failed peer, whatever UCX calls it (1.13's tcp says "Endpoint
 * timeout" at once; a killed rank of this node can make an operation fail
 * with "Shared memory error"); only libzcomm's own wait times out. */
static int ucx_statuses_read_right(void)
{
    static const ucs_status_t peer[] = {UCS_ERR_ENDPOINT_TIMEOUT, UCS_ERR_CONNECTION_RESET,
                                        UCS_ERR_SHMEM_SEGMENT, UCS_ERR_IO_ERROR,
                                        UCS_ERR_UNREACHABLE, UCS_ERR_NOT_CONNECTED,
                                        UCS_ERR_FIRST_LINK_FAILURE,
                                        UCS_ERR_LAST_ENDPOINT_FAILURE};
    int bad = 0;

    for (size_t i = 0; i < sizeof(peer) / sizeof(peer[0]); i++)
        if (zc_ucx_status(peer[i]) != ZC_ERR_PEER_FAILED) {
            diag("UCX %s reads as %s", ucs_status_string(peer[i]),
                 zc_strerror(zc_ucx_status(peer[i])));
            bad++;
        }
    bad += zc_ucx_status(UCS_ERR_MESSAGE_TRUNCATED) != ZC_ERR_MISMATCH;
    bad += zc_ucx_status(UCS_OK) != ZC_OK;
    return bad;
}

/* The split lane's transports: a UCX_TLS list without tcp. */
static int split_lane_tls_right(void)
{
    static const char *cases[][2] = {
        {"self,sm,tcp", "self,sm"}, {"tcp,sm", "sm"}, {"sm,cma", "sm,cma"},
        {"tcp", "tcp"}, {"^tcp", "^tcp"}, {"rc,tcp,self", "rc,self"},
    };
    char buf[64];
    int bad = zc_ucx_tls_but_tcp(NULL, buf, sizeof(buf)) != NULL;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = zc_ucx_tls_but_tcp(cases[i][0], buf, sizeof(buf));
        if (strcmp(got, cases[i][1]) != 0) {
            diag("UCX_TLS %s without tcp: %s, not %s", cases[i][0], got, cases[i][1]);
            bad++;
        }
    }
    return bad;
}

/* The settings a lane takes for tcp (UCX_TLS): no zero copy without
 * another network transport, eager up to 256 KiB without shared memory
 * either; the user's own UCX_ZCOPY_THRESH / UCX_RNDV_THRESH win. */
static int tcp_settings_right(void)
{
    static const struct {
        const char *tls, *user_var, *want; /* want: "KEY=VALUE ..." */
    } cases[] = {
        {"tcp", NULL, "ZCOPY_THRESH=inf RNDV_THRESH=256K "},
        {"self,tcp", NULL, "ZCOPY_THRESH=inf RNDV_THRESH=256K "},
        {"self,sm,tcp", NULL, "ZCOPY_THRESH=inf "},
        {"tcp", "UCX_RNDV_THRESH", "ZCOPY_THRESH=inf "},
        {"tcp", "UCX_ZCOPY_THRESH", "RNDV_THRESH=256K "},
        {"rc,tcp", NULL, ""},
        {"^rc", NULL, ""},
        {"self,sm", NULL, ""},
        {NULL, NULL, ""},
    };
    static const char *const vars[] = {"UCX_ZCOPY_THRESH", "UCX_RNDV_THRESH"};
    char *saved[2];
    int bad = 0;

    /* the cases set these themselves: the caller's own are put back after */
    for (int v = 0; v < 2; v++) {
        saved[v] = getenv(vars[v]) ? strdup(getenv(vars[v])) : NULL;
        unsetenv(vars[v]);
    }
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *keys[2], *values[2];
        char got[128] = "";
        if (cases[i].user_var)
            setenv(cases[i].user_var, "8K", 1);
        int n = zc_ucx_tcp_settings(cases[i].tls, keys, values);
        for (int k = 0; k < n; k++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s=%s ", keys[k], values[k]);
        if (cases[i].user_var)
            unsetenv(cases[i].user_var);
        if (strcmp(got, cases[i].want) != 0) {
            diag("UCX_TLS %s%s%s: \"%s\", not \"%s\"", cases[i].tls ? cases[i].tls : "unset",
                 cases[i].user_var ? " with " : "", cases[i].user_var ? cases[i].user_var : "",
                 got, cases[i].want);
            bad++;
        }
    }
    for (int v = 0; v < 2; v++) {
        if (saved[v])
            setenv(vars[v], saved[v], 1);
        free(saved[v]);
    }
    return bad;
}

static int run_case(int nranks, mp_rank_fn fn, void *arg)
{
    return mp_run(nranks, CASE_TIMEOUT_S, fn, arg);
}

int main(void)
{
    setenv("ZC_SOCKET_IFNAME", "lo", 0);
    ok(run_case(2, rank_sizes, NULL) == 0,
       "2 ranks: 0 B, 1 B, odd sizes up to 64 MiB byte-exact both ways");
    static order_case_t order_cases[] = {{300, 3000}, {2000, 8}};
    for (int i = 0; i < 2; i++)
        ok(run_case(2, rank_order, &order_cases[i]) == 0,
           "%d messages of %zu B in flight arrive in order, twice (requests reused); zc_test",
           order_cases[i].count, order_cases[i].len);
    static int64_t ring_counts[] = {2, 100003};
    for (int i = 0; i < 2; i++) {
        ok(run_case(4, rank_ring, &ring_counts[i]) == 0,
           "4-rank ring of %lld float32 with barriers byte-exact", (long long)ring_counts[i]);
        ok(run_case(8, rank_ring, &ring_counts[i]) == 0,
           "8-rank ring of %lld float32 with barriers byte-exact", (long long)ring_counts[i]);
    }
    static eager_case_t eager_cases[] = {
        {128 << 10, 1, 1}, {128 << 10, 0, 0}, {(128 << 10) - 1, 0, 1}, {16 << 10, 0, 1}};
    ok(run_case(2, rank_eager_send, &eager_cases[0]) == 0,
       "a send of 128 KiB flagged ZC_P2P_EAGER (shared memory) completes before its receive is "
       "posted, byte-exact");
    ok(run_case(2, rank_eager_send, &eager_cases[1]) == 0,
       "the same send unflagged waits for its receive (the rendezvous the flag skips)");
    for (int i = 2; i < 4; i++)
        ok(run_case(2, rank_eager_send, &eager_cases[i]) == 0,
           "an unflagged send of %zu bytes (shared memory, below 128 KiB) completes before its "
           "receive is posted, byte-exact", eager_cases[i].bytes);
    ok(run_case(2, rank_mismatch, NULL) == 0, "a receive of another size is ZC_ERR_MISMATCH");
    ok(run_case(2, rank_split_sizes, NULL) == 0,
       "messages split in halves (ZC_HOST_SPLIT_BYTES=4096): sizes around the threshold and the "
       "halves' rounding, mixed with whole ones, all in flight both ways, byte-exact");
    static const char *split_mismatch[][2] = {
        {"split-split", "both split (2 x 64 KiB sent, 3 x posted): ZC_ERR_MISMATCH, both halves "
                        "used up, the next split message byte-exact"},
        {"whole-split", "a whole receive (64 KiB) meets a split message (128 KiB): "
                        "ZC_ERR_MISMATCH naming ZC_HOST_SPLIT_BYTES, later split receives from "
                        "that peer refused, the send ends, whole messages go on"},
        {"split-whole", "a split receive (64 KiB + 1) meets a whole message (64 KiB): the same "
                        "from the other side"},
        {"off", "ZC_HOST_SPLIT_BYTES=0: the same counts are a plain ZC_ERR_MISMATCH"},
    };
    for (int i = 0; i < 4; i++)
        ok(run_case(2, rank_split_mismatch, (void *)split_mismatch[i][0]) == 0,
           "count mismatch, split at 64 KiB, %s", split_mismatch[i][1]);
    ok(split_lane_tls_right() == 0,
       "the split lane's UCX_TLS is the list without tcp (kept as is when tcp is all of it)");
    ok(tcp_settings_right() == 0,
       "tcp lanes send without zero copy, and eager up to 256 KiB where no shared memory "
       "shares the lane, unless UCX_ZCOPY_THRESH / UCX_RNDV_THRESH are set");
    ok(run_case(2, rank_bad_args, NULL) == 0, "every bad argument returns its status and names it");
    ok(run_case(2, rank_aliased_sendrecv, NULL) == 0,
       "zc_sendrecv with overlapping buffers (1 MiB in place, half, one byte) is refused on both "
       "ranks and sends nothing; adjacent buffers work");
    static int64_t disagree_sizes[] = {1000, 4 << 20};
    for (int i = 0; i < 2; i++)
        ok(run_case(2, rank_routed_disagree, &disagree_sizes[i]) == 0,
           "zc_routed_sendrecv lists that disagree (%lld B): ZC_ERR_MISMATCH on both ranks, "
           "nothing moved; an agreed list then works", (long long)disagree_sizes[i]);
    ok(run_case(3, rank_routed_disagree, &disagree_sizes[0]) == 0,
       "zc_routed_sendrecv: a third rank with no list fails the call on all 3 ranks");
    ok(run_case(2, rank_routed_aliased, NULL) == 0,
       "zc_routed_sendrecv of 3 MiB in place is refused; a peer that passed separate buffers "
       "gets ZC_ERR_MISMATCH naming the refusing rank; nothing moves");
    ok(run_case(1, rank_timeout_detail, NULL) == 0,
       "a receive that times out names the rank it waited for, from this rank's side");
    ok(run_case(1, rank_sched_fails_at_start, NULL) == 0,
       "a schedule that fails as it starts: zc_wait and zc_test report its status and message");
    mp_killed_rank = 1;
    ok(run_case(2, rank_killed_peer, NULL) == 0, "a killed peer (shared memory) gives an error");
    ok(run_case(2, rank_killed_peer, "tcp") == 0, "a killed peer (tcp) gives an error");
    ok(ucx_statuses_read_right() == 0,
       "UCX's connection reset, endpoint timeout and shared memory error are ZC_ERR_PEER_FAILED");
    ok(run_case(2, rank_killed_mid_transfer, NULL) == 0,
       "a peer killed mid-transfer (shared memory) is ZC_ERR_PEER_FAILED, not a timeout or a "
       "transport error");
    ok(run_case(2, rank_killed_mid_transfer, "tcp") == 0,
       "a peer killed mid-transfer (tcp) is ZC_ERR_PEER_FAILED, not a timeout");
    static const last_words_case_t last_words[] = {{NULL, 0}, {NULL, 1}, {"tcp", 0}, {"tcp", 1}};
    for (int i = 0; i < 4; i++)
        ok(run_case(2, rank_last_words, (void *)&last_words[i]) == 0,
           "%d messages a peer sent (%s) before it ended, received once it is seen dead%s: "
           "ZC_OK, byte-exact", LAST_WORDS_MSGS, last_words[i].tls ? "tcp" : "shared memory",
           last_words[i].sched ? " (a schedule)" : "");
    ok(run_case(2, rank_ucx_log, NULL) == 0,
       "UCX's warnings (\"not matched\") are not printed at the default log level");
    ok(run_case(2, rank_ucx_log, "info") == 0,
       "UCX's warnings are logged through ZC_LOG_LEVEL=info");
    mp_killed_rank = -1;
    ok(run_case(2, rank_huge, NULL) == 0, "2 GiB + 13 B in one message byte-exact");
    return tap_done();
}
