/* One cell of the fault matrix (tests/fault_matrix.sh): every rank repeats
 * one call while a fault strikes 300 ms in (a NIC going down: 1.5 s in, so
 * that calls with every NIC up come first), and reports what it got.
 *
 *   mn_fault_matrix CALL FAULT
 *     CALL   sendrecv   zc_sendrecv, a ring over all ranks, 8 MiB
 *            routed     zc_routed_sendrecv, each rank 8 MiB to its partner
 *                       on the other node
 *            alltoallv  zc_remap_alltoallv, 8 MiB per rank spread evenly
 *            ring_fwd   zc_ring_attn_fwd on a planned batch
 *            ring_bwd   zc_ring_attn_bwd (after one forward)
 *     FAULT  kill       the last rank SIGKILLs itself
 *            stop       the last rank SIGSTOPs itself (a child of it sends
 *                       SIGCONT 3 x ZC_TIMEOUT later)
 *            nicdown    the last rank sets its node's rail-1 veth down (one
 *                       NIC of two, or of four on a cluster of four: the
 *                       collectives fail over to the rails left)
 *            alldown    the last rank sets every veth of its node down
 *            slow       the last rank cuts its node's rail-1 tbf rate to 10%
 *            disagree   the last rank passes other arguments (one call)
 *
 * The calls repeat until 4 s after the fault (by rank 0's clock, sent to
 * every rank between two calls in a routed transfer, which fails over as
 * the calls do) or until one fails.  Each rank prints one line
 *   RESULT call=C fault=F rank=R role=victim|survivor status=S ms=T calls=N wrong=W
 *          up_ms=U hit_ms=H after_ms=A
 * where T is the time from the fault (for a disagreement: the call's
 * start) to the call's return (the failing one, or the last), W counts
 * wrong bytes or elements in calls that returned ZC_OK, U is the mean time
 * of the calls that ended before the fault (every NIC up), H the time of
 * the call the fault struck (the first to end after it) and A the mean of
 * the calls after that one (0 where there were none).  Exit 0 unless wrong
 * data came back with ZC_OK (3) or the setup failed (1): judging statuses
 * is the driver's job. */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mn_common.h"
#include "tools/zc_plan_dataset.h"
#include "tools/zc_ring_attn_data.h"

#define BYTES (8u << 20)
#define FAULT_AFTER_MS 300
/* The NICs go down later: calls with every NIC up to compare with. */
#define NIC_DOWN_AFTER_MS 1500
#define RUN_AFTER_FAULT_MS 4000
#define TOKENS_PER_RANK 512

static const char *call, *fault;
static int victim, timeout_ms, nrails, fault_after_ms;

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *saboteur(void *arg)
{
    char dev[64], cmd[256];

    (void)arg;
    usleep((useconds_t)fault_after_ms * 1000);
    if (strcmp(fault, "kill") == 0) {
        raise(SIGKILL);
    } else if (strcmp(fault, "stop") == 0) {
        pid_t parent = getpid();
        if (fork() == 0) {
            usleep((useconds_t)timeout_ms * 3000);
            kill(parent, SIGCONT);
            _exit(0);
        }
        raise(SIGSTOP);
    } else if (strcmp(fault, "alldown") == 0) {
        for (int k = 0; k < nrails && mn_rail_netdev(k, dev, sizeof(dev)); k++) {
            snprintf(cmd, sizeof(cmd), "ip link set dev %s down", dev);
            if (system(cmd) != 0)
                fprintf(stderr, "# %s failed\n", cmd);
        }
    } else if (mn_rail_netdev(1, dev, sizeof(dev))) {
        if (strcmp(fault, "nicdown") == 0)
            snprintf(cmd, sizeof(cmd), "ip link set dev %s down", dev);
        else  /* slow: zc_cluster's tbf at a tenth of its default rate */
            snprintf(cmd, sizeof(cmd),
                     "tc qdisc change dev %s root tbf rate 20mbit burst 128kb latency 50ms", dev);
        if (system(cmd) != 0)
            fprintf(stderr, "# %s failed\n", cmd);
    }
    return NULL;
}

/* The buffers and arguments of the point-to-point and data collectives. */
typedef struct {
    char *send, *recv;
    int64_t *counts, *displs, *rcounts;
    zc_transfer_t *t;
    int nt;
} data_args_t;

static int data_setup(data_args_t *d, int disagree)
{
    int half = mn_size / 2;

    d->send = malloc(BYTES);
    d->recv = malloc(BYTES);
    d->counts = malloc(sizeof(int64_t) * (size_t)mn_size);
    d->rcounts = malloc(sizeof(int64_t) * (size_t)mn_size);
    d->displs = malloc(sizeof(int64_t) * (size_t)mn_size);
    d->t = malloc(sizeof(zc_transfer_t) * (size_t)mn_size);
    if (!d->send || !d->recv || !d->counts || !d->rcounts || !d->displs || !d->t)
        return -1;
    pattern_fill(d->send, BYTES, mn_rank, 21);
    for (int r = 0; r < mn_size; r++) {
        d->counts[r] = d->rcounts[r] = (int64_t)(BYTES / (unsigned)mn_size);
        d->displs[r] = (int64_t)r * d->counts[r];
        d->t[r] = (zc_transfer_t){r, (r + half) % mn_size, BYTES};
    }
    d->nt = mn_size;
    if (disagree) {  /* one element less to rank 0, in every call's terms */
        d->rcounts[0]--;
        d->t[0].count--;
    }
    return 0;
}

/* One call; *wrong gets the wrong bytes when it returned ZC_OK. */
static zc_status_t data_call(zc_comm_h comm, data_args_t *d, int disagree, int64_t *wrong)
{
    int half = mn_size / 2, from;
    zc_request_h req;
    zc_status_t st;

    memset(d->recv, 0, BYTES);
    if (strcmp(call, "sendrecv") == 0) {
        int64_t n = BYTES - (disagree ? 1 : 0);
        st = zc_sendrecv(d->send, BYTES, (mn_rank + 1) % mn_size, d->recv, n,
                         (mn_rank - 1 + mn_size) % mn_size, ZC_BYTE, ZC_MEM_HOST, comm);
        from = (mn_rank - 1 + mn_size) % mn_size;
        if (st == ZC_OK)
            *wrong += pattern_first_wrong(d->recv, (size_t)n, from, 21) != (size_t)n;
        return st;
    }
    if (strcmp(call, "routed") == 0)
        st = zc_routed_sendrecv(d->t, d->nt, d->send, d->recv, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    else
        st = zc_remap_alltoallv(d->send, d->counts, d->displs, d->recv, d->rcounts, d->displs,
                                ZC_BYTE, ZC_MEM_HOST, comm, &req);
    if (st == ZC_OK)
        st = zc_wait(&req);
    if (st != ZC_OK)
        return st;
    if (strcmp(call, "routed") == 0) {
        from = (mn_rank - half + mn_size) % mn_size;
        *wrong += pattern_first_wrong(d->recv, BYTES, from, 21) != BYTES;
    } else {
        size_t blk = BYTES / (unsigned)mn_size;
        for (int r = 0; r < mn_size; r++)
            for (size_t i = 0; i < blk; i += 509)
                *wrong += ((uint8_t *)d->recv)[(size_t)r * blk + i] !=
                          pattern_byte((size_t)mn_rank * blk + i, r, 21);
    }
    return ZC_OK;
}

/* Ring attention on one exactly-full batch.  A disagreeing victim draws
 * another batch for the forward; for the backward it runs the forward
 * with the others and then asks for TE CP's direct hops instead of
 * Zeppelin's routed ones (another mode, same buffers). */
typedef struct {
    rad_batch_t ref;
    rad_local_t l;
    zc_plan_h plan;
    zc_ring_attn_args_t args;
} ring_args_t;

static int ring_setup(zc_comm_h comm, ring_args_t *r, int disagree)
{
    int nnodes = 0, rails = 0;
    int64_t *lengths = NULL, total = (int64_t)TOKENS_PER_RANK * mn_size;
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;

    zc_comm_node_count(comm, &nnodes);
    zc_comm_rail_count(comm, &rails);
    int other_batch = disagree && strcmp(call, "ring_fwd") == 0;
    size_t count = rad_sample(0, total, 16, other_batch ? 77 : 7, &lengths);
    if (count == 0 || rad_batch_init(&r->ref, lengths, count, 4, 2, 64, ZC_FLOAT32, 5) != 0 ||
        rad_batch_reference(&r->ref, 1) != ZC_OK)
        return -1;
    free(lengths);
    opts.rails = rails;
    if (zc_plan_create(nnodes, mn_size / nnodes, TOKENS_PER_RANK, r->ref.lengths, r->ref.nseqs,
                       &opts, &r->plan) != ZC_OK)
        return -1;
    if (rad_local_make(&r->ref, r->plan, mn_rank, 0, &r->l) != 0)
        return -1;
    r->args = (zc_ring_attn_args_t)ZC_RING_ATTN_ARGS_INITIALIZER;
    rad_local_args(&r->ref, &r->l, &r->args);
    return 0;
}

static zc_status_t ring_call(zc_comm_h comm, ring_args_t *r, int backward, int disagree,
                             int64_t *wrong)
{
    double worst[RAD_NRESULTS];
    zc_status_t st = backward ? zc_ring_attn_bwd(comm, r->plan, &r->args)
                              : zc_ring_attn_fwd(comm, r->plan, &r->args);

    if (st == ZC_OK && !disagree)
        *wrong += rad_local_check(&r->ref, &r->l, backward,
                                  rad_tolerance(r->ref.dtype), worst);
    return st;
}

/* Rank 0's clock decides for every rank whether another call follows
 * (ranks that stopped on their own clocks would leave the others in a
 * call without them).  An alltoallv from rank 0 to every rank carries it:
 * point-to-point messages do not fail over, so one on the rail that goes
 * down would fail the cell for the wrong reason. */
static zc_status_t go_on(zc_comm_h comm, int64_t deadline, int *more)
{
    int64_t *sc = calloc(4 * (size_t)mn_size, sizeof(int64_t));
    int32_t *flags = calloc((size_t)mn_size, sizeof(int32_t)), got = 0;
    zc_request_h req;
    zc_status_t st = ZC_ERR_NO_MEMORY;
    int32_t v = now_ms() < deadline;

    *more = 0;
    if (sc && flags) {
        int64_t *sd = sc + mn_size, *rc = sd + mn_size, *rd = rc + mn_size;
        for (int r = 0; r < mn_size; r++) {
            sc[r] = mn_rank == 0 && r != 0;
            sd[r] = r;
            flags[r] = v;
        }
        rc[0] = mn_rank != 0;
        st = zc_remap_alltoallv(flags, sc, sd, &got, rc, rd, ZC_INT32, ZC_MEM_HOST, comm, &req);
        if (st == ZC_OK)
            st = zc_wait(&req);
        *more = st == ZC_OK && (mn_rank == 0 ? v : got);
    }
    free(sc);
    free(flags);
    return st;
}

static const char *status_name(zc_status_t st)
{
    switch (st) {
    case ZC_OK: return "OK";
    case ZC_ERR_PEER_FAILED: return "PEER_FAILED";
    case ZC_ERR_TIMEOUT: return "TIMEOUT";
    case ZC_ERR_MISMATCH: return "MISMATCH";
    case ZC_ERR_TRANSPORT: return "TRANSPORT";
    case ZC_ERR_INVALID_ARG: return "INVALID_ARG";
    default: return "OTHER";
    }
}

int main(int argc, char **argv)
{
    const char *tv = getenv("ZC_TIMEOUT");
    int ring, disagree, calls = 0, n_up = 0, n_after = 0;
    int64_t wrong = 0, t_fault, t_end, up_ms = 0, hit_ms = -1, after_ms = 0;
    data_args_t d = {0};
    ring_args_t r;
    pthread_t thread;
    zc_status_t st = ZC_OK;

    if (argc != 3) {
        fprintf(stderr, "usage: mn_fault_matrix sendrecv|routed|alltoallv|ring_fwd|ring_bwd "
                        "kill|stop|nicdown|alldown|slow|disagree\n");
        return 1;
    }
    call = argv[1];
    fault = argv[2];
    timeout_ms = tv ? atoi(tv) : 60000;
    setenv("ZC_ROUTED_MIN_BYTES", "4096", 1);  /* ring hops routed through the proxies */
    zc_comm_h comm = mn_init();
    zc_comm_rail_count(comm, &nrails);
    victim = mn_size - 1;
    ring = strncmp(call, "ring_", 5) == 0;
    disagree = strcmp(fault, "disagree") == 0 && mn_rank == victim;
    if (ring ? ring_setup(comm, &r, disagree) != 0 : data_setup(&d, disagree) != 0) {
        fprintf(stderr, "# rank %d: setup failed (%s)\n", mn_rank, zc_get_last_error());
        return 1;
    }
    if (ring && strcmp(call, "ring_bwd") == 0) {
        if ((st = zc_ring_attn_fwd(comm, r.plan, &r.args)) != ZC_OK) {
            fprintf(stderr, "# rank %d: forward before the backward: %s\n", mn_rank,
                    zc_get_last_error());
            return 1;
        }
        if (disagree)
            r.args.mode = ZC_RING_ATTN_TE_CP;
    }
    zc_barrier(comm);
    /* a disagreement is there from the call's start */
    fault_after_ms = strcmp(fault, "disagree") == 0 ? 0
                     : strstr(fault, "down")          ? NIC_DOWN_AFTER_MS
                                                      : FAULT_AFTER_MS;
    t_fault = now_ms() + fault_after_ms;
    if (mn_rank == victim && !disagree)
        pthread_create(&thread, NULL, saboteur, NULL);
    int more = strcmp(fault, "disagree") != 0;
    do {
        int64_t t0 = now_ms();
        st = ring ? ring_call(comm, &r, strcmp(call, "ring_bwd") == 0, disagree, &wrong)
                  : data_call(comm, &d, disagree, &wrong);
        int64_t t1 = now_ms();
        calls++;
        if (st == ZC_OK && t1 < t_fault) {
            up_ms += t1 - t0;
            n_up++;
        } else if (st == ZC_OK && hit_ms < 0) {
            hit_ms = t1 - t0;
        } else if (st == ZC_OK) {
            after_ms += t1 - t0;
            n_after++;
        }
        if (st == ZC_OK && more)
            st = go_on(comm, t_fault + RUN_AFTER_FAULT_MS, &more);
    } while (st == ZC_OK && more);
    t_end = now_ms();
    fprintf(stderr, "# rank %d: %s after %d calls: %s\n", mn_rank, zc_strerror(st), calls,
            st == ZC_OK ? "" : zc_get_last_error());
    printf("RESULT call=%s fault=%s rank=%d role=%s status=%s ms=%lld calls=%d wrong=%lld "
           "up_ms=%lld hit_ms=%lld after_ms=%lld\n",
           call, fault, mn_rank, mn_rank == victim ? "victim" : "survivor", status_name(st),
           (long long)(t_end - t_fault), calls, (long long)wrong,
           (long long)(n_up ? up_ms / n_up : 0), (long long)(hit_ms < 0 ? 0 : hit_ms),
           (long long)(n_after ? after_ms / n_after : 0));
    fflush(stdout);
    /* Nobody leaves while another rank may still wait for it (a failed
     * barrier is what the faults are about: not reported). */
    (void)zc_barrier(comm);
    zc_comm_destroy(comm);
    return wrong ? 3 : 0;
}
