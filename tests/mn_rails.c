/* Rails at different rates, and a rail that goes down and comes back, on
 * the emulated cluster (tests/test_multinode.sh: 2 nodes x 4 NICs at 200,
 * 200, 100 and 50 Mbit/s x 4 ranks, ZC_LOG_LEVEL=info): the rates the
 * communicator starts from, each rail's share of a routed transfer and of
 * an alltoallv block, equal shares when pinned alike, ZC_ERR_MISMATCH when
 * pinned differently, every byte of a routed transfer and of an alltoallv
 * whose NIC goes down mid-call, later calls without that rail, the rail
 * used again once it is back, and small blocks whose sender's NIC is down
 * when they leave (sent again after the sender's call has returned).  No
 * time is asserted: waits are bounded generously and only decide when to
 * stop looking. */
#include "config.h"

#include <pthread.h>
#include <unistd.h>

#include "mn_common.h"

#define NRAILS 4
#define DOWN_RAIL 1
#define BIG (48u << 20)
/* The NIC goes down this long after the call starts (its data phase runs
 * for about a second at 550 Mbit/s). */
#define DOWN_AFTER_US 250000
/* Calls (200 ms apart) that wait for the rail to come back, at most. */
#define BACK_TRIES 200

static const double configured[NRAILS] = {0.2, 0.2, 0.1, 0.05};

/* Bytes this rank sent on each rail so far. */
static void rail_sent(zc_comm_h comm, uint64_t *sent)
{
    uint64_t received;

    for (int k = 0; k < NRAILS; k++)
        zc_comm_rail_bytes(comm, k, &sent[k], &received);
}

/* One routed transfer from rank 0 to the last rank, checked; its status. */
static zc_status_t routed(zc_comm_h comm, size_t bytes, int salt)
{
    zc_transfer_t t = {0, mn_size - 1, (int64_t)bytes};
    uint8_t *send = malloc(bytes + 1), *recv = malloc(bytes + 1);
    zc_request_h req;

    pattern_fill(send, bytes, mn_rank, salt);
    memset(recv, 0xee, bytes);
    zc_status_t st = zc_routed_sendrecv(&t, 1, send, recv, ZC_BYTE, ZC_MEM_HOST, comm, &req);
    if (st == ZC_OK)
        st = zc_wait(&req);
    if (st == ZC_OK && mn_rank == mn_size - 1) {
        size_t wrong = pattern_first_wrong(recv, bytes, 0, salt);
        MN_CHECK(wrong == bytes, "%zu routed bytes from rank 0: wrong at %zu", bytes, wrong);
    }
    free(send);
    free(recv);
    return st;
}

/* An alltoallv in which rank `src` sends `bytes` to rank `dst`, checked;
 * its status. */
static zc_status_t alltoallv_pair(zc_comm_h comm, int src, int dst, size_t bytes, int salt)
{
    int64_t *c = calloc(4 * (size_t)mn_size, sizeof(int64_t));
    int64_t *sc = c, *sd = c + mn_size, *rc = sd + mn_size, *rd = rc + mn_size;
    uint8_t *send = malloc(bytes), *recv = malloc(bytes);
    zc_request_h req;

    if (mn_rank == src)
        sc[dst] = (int64_t)bytes;
    if (mn_rank == dst)
        rc[src] = (int64_t)bytes;
    pattern_fill(send, bytes, mn_rank, salt);
    memset(recv, 0xee, bytes);
    zc_status_t st = zc_remap_alltoallv(send, sc, sd, recv, rc, rd, ZC_BYTE, ZC_MEM_HOST, comm,
                                        &req);
    if (st == ZC_OK)
        st = zc_wait(&req);
    if (st == ZC_OK && mn_rank == dst) {
        size_t wrong = pattern_first_wrong(recv, bytes, src, salt);
        MN_CHECK(wrong == bytes, "%zu alltoallv bytes from rank %d: wrong at %zu", bytes, src,
                 wrong);
    }
    free(c);
    free(send);
    free(recv);
    return st;
}

/* Rank 0 sends `bytes` to rank ranks/2 (node 1). */
static zc_status_t alltoallv(zc_comm_h comm, size_t bytes, int salt)
{
    return alltoallv_pair(comm, 0, mn_size / 2, bytes, salt);
}

/* Every rank's `mine` (n int64 each) into all[size][n]: an alltoallv, whose
 * messages between nodes are acknowledged and fail over like the data's
 * (a point-to-point message on a rail that just went out can be lost). */
static void allgather(zc_comm_h comm, const int64_t *mine, int64_t *all, int n)
{
    int64_t *c = calloc(4 * (size_t)mn_size, sizeof(int64_t));
    int64_t *sc = c, *sd = c + mn_size, *rc = sd + mn_size, *rd = rc + mn_size;
    zc_request_h req;

    for (int r = 0; r < mn_size; r++) {
        sc[r] = rc[r] = n;
        rd[r] = (int64_t)r * n;
    }
    zc_status_t st = zc_remap_alltoallv(mine, sc, sd, all, rc, rd, ZC_INT64, ZC_MEM_HOST, comm,
                                        &req);
    if (st == ZC_OK)
        st = zc_wait(&req);
    MN_CHECK(st == ZC_OK, "the allgather of the counters: %s", zc_strerror(st));
    free(c);
}

/* The bytes node 0's ranks sent on each rail since `before` (their own
 * counts), on every rank. */
static void node0_shares(zc_comm_h comm, const uint64_t *before, uint64_t *delta)
{
    uint64_t after[NRAILS];
    int64_t mine[NRAILS], *all = calloc((size_t)mn_size * NRAILS, sizeof(int64_t));
    int node = 0, rnode;

    zc_comm_node(comm, &node);
    rail_sent(comm, after);
    for (int k = 0; k < NRAILS; k++)
        mine[k] = node == 0 ? (int64_t)(after[k] - before[k]) : 0;
    allgather(comm, mine, all, NRAILS);
    for (int k = 0; k < NRAILS; k++) {
        delta[k] = 0;
        for (int r = 0; r < mn_size; r++)
            delta[k] += zc_comm_rank_node(comm, r, &rnode) == ZC_OK && rnode == 0
                            ? (uint64_t)all[(size_t)r * NRAILS + (size_t)k] : 0;
    }
    free(all);
}

/* mn_report over the allgather: rank 0 prints the case with every rank's
 * failures summed. */
static void report(zc_comm_h comm, const char *name)
{
    int64_t *all = calloc((size_t)mn_size, sizeof(int64_t)), total = 0;

    allgather(comm, &mn_failures, all, 1);
    for (int r = 0; r < mn_size; r++)
        total += all[r];
    if (mn_rank == 0) {
        mn_cases++;
        mn_failed_cases += total != 0;
        printf("%s %d - %s\n", total ? "not ok" : "ok", mn_cases, name);
        fflush(stdout);
    }
    mn_failures = 0;
    free(all);
}

/* The link of this node's rail `rail` up or down (rank 0, node 0; with two
 * nodes the veth pair goes down at both ends). */
static void set_link(int rail, const char *state)
{
    char dev[64], cmd[160];

    if (!mn_rail_netdev(rail, dev, sizeof(dev))) {
        fprintf(stderr, "# no netdev for rail %d in ZC_NIC_NETDEV\n", rail);
        return;
    }
    snprintf(cmd, sizeof(cmd), "ip link set dev %s %s", dev, state);
    if (system(cmd) != 0)
        fprintf(stderr, "# %s failed\n", cmd);
}

static void *take_down(void *arg)
{
    usleep(DOWN_AFTER_US);
    set_link(*(int *)arg, "down");
    return NULL;
}

/* Run `call` while rank 0 takes `rail` down mid-call. */
static zc_status_t with_rail_down(zc_comm_h comm, zc_status_t (*call)(zc_comm_h, size_t, int),
                                  int rail, int salt)
{
    pthread_t saboteur;

    zc_barrier(comm);
    if (mn_rank == 0)
        pthread_create(&saboteur, NULL, take_down, &rail);
    zc_status_t st = call(comm, BIG, salt);
    if (mn_rank == 0)
        pthread_join(saboteur, NULL);
    return st;
}

static void rates_now(zc_comm_h comm, double *rates)
{
    MN_CHECK(zc_comm_rail_rates(comm, rates, NRAILS) == ZC_OK, "zc_comm_rail_rates");
}

int main(void)
{
    zc_comm_h comm = mn_init();
    int nrails = 0;
    double rates[NRAILS], pin[NRAILS];
    uint64_t before[NRAILS], d[NRAILS];

    zc_comm_rail_count(comm, &nrails);
    if (nrails != NRAILS || mn_size < 4) {
        if (mn_rank == 0)
            printf("1..0 # SKIP needs 4 rails (zc_cluster -K 4 --rate ...), got %d\n", nrails);
        zc_comm_destroy(comm);
        return 0;
    }

    rates_now(comm, rates);
    for (int k = 0; k < NRAILS; k++)
        MN_CHECK(rates[k] - configured[k] < 1e-6 && configured[k] - rates[k] < 1e-6,
                 "rail %d starts at %g Gbit/s, not %g", k, rates[k], configured[k]);
    report(comm, "the rails start at their ZC_RAIL_RATES (200, 200, 100, 50 Mbit/s)");

    /* Weights follow the rates: rail 0 (200) carries about four times rail
     * 3 (50); asserted at twice, whatever measurement noise moves. */
    rail_sent(comm, before);
    MN_CHECK(routed(comm, 8u << 20, 1) == ZC_OK, "routed transfer");
    node0_shares(comm, before, d);
    rates_now(comm, rates);
    MN_CHECK(d[0] >= 2 * d[3] && d[1] >= 2 * d[3] && d[2] > d[3],
             "node 0's rails carried %llu %llu %llu %llu bytes of a routed transfer at %g %g %g "
             "%g Gbit/s", (unsigned long long)d[0], (unsigned long long)d[1],
             (unsigned long long)d[2], (unsigned long long)d[3], rates[0], rates[1], rates[2],
             rates[3]);
    rail_sent(comm, before);
    MN_CHECK(alltoallv(comm, 8u << 20, 2) == ZC_OK, "alltoallv");
    node0_shares(comm, before, d);
    /* (chunk by chunk, as acknowledgements come: a busy core delays them,
     * so only what equal shares could not do is asserted) */
    uint64_t total = d[0] + d[1] + d[2] + d[3];
    MN_CHECK(d[0] + d[1] > total / 2 && d[3] < total / 5,
             "node 0's rails carried %llu %llu %llu %llu bytes of an alltoallv block",
             (unsigned long long)d[0], (unsigned long long)d[1], (unsigned long long)d[2],
             (unsigned long long)d[3]);
    report(comm, "weights follow the rates: 200 Mbit/s rails carry at least twice the 50 "
              "Mbit/s rail's share of a routed transfer, more than half of an alltoallv block "
              "and the 50 Mbit/s rail under a fifth, byte-exact");

    /* Pinned alike: equal shares, exactly the equal slices. */
    for (int k = 0; k < NRAILS; k++)
        pin[k] = 1.0;
    MN_CHECK(zc_comm_set_rail_rates(comm, pin, NRAILS) == ZC_OK, "pin equal rates");
    uint64_t empty[NRAILS];
    /* less the bytes of a call that moves nothing (its agreement's) */
    rail_sent(comm, before);
    MN_CHECK(routed(comm, 0, 3) == ZC_OK, "routed transfer of nothing");
    node0_shares(comm, before, empty);
    rail_sent(comm, before);
    MN_CHECK(routed(comm, (8u << 20) + 3, 3) == ZC_OK, "routed transfer, equal shares");
    node0_shares(comm, before, d);
    for (int k = 0; k < NRAILS; k++) {
        int64_t off, len;
        zc_plan_slice((8 << 20) + 3, NRAILS, k, &off, &len);
        MN_CHECK(d[k] - empty[k] == (uint64_t)len, "rail %d carried %llu bytes (and %llu of "
                 "the agreement), the equal slice is %lld", k,
                 (unsigned long long)(d[k] - empty[k]), (unsigned long long)empty[k],
                 (long long)len);
    }
    /* an alltoallv block too: its 32 chunks round robin, 8 on each rail */
    rail_sent(comm, before);
    MN_CHECK(alltoallv(comm, 0, 4) == ZC_OK, "alltoallv of nothing");
    node0_shares(comm, before, empty);
    rail_sent(comm, before);
    MN_CHECK(alltoallv(comm, 8u << 20, 4) == ZC_OK, "alltoallv, equal shares");
    node0_shares(comm, before, d);
    for (int k = 0; k < NRAILS; k++)
        MN_CHECK(d[k] - empty[k] == (2u << 20), "rail %d carried %llu bytes of an alltoallv "
                 "block (and %llu of its agreement), the equal share is %u", k,
                 (unsigned long long)(d[k] - empty[k]), (unsigned long long)empty[k], 2u << 20);
    report(comm, "rates pinned alike on every rank (zc_comm_set_rail_rates): equal slices of "
              "a routed transfer, equal shares of an alltoallv block");

    /* Pinned differently on one rank: every rank refuses, nothing moves. */
    pin[3] = mn_rank == 1 ? 2.0 : 1.0;
    MN_CHECK(zc_comm_set_rail_rates(comm, pin, NRAILS) == ZC_OK, "pin");
    {
        zc_transfer_t t = {0, mn_size - 1, 4 << 20};
        uint8_t *send = calloc(4 << 20, 1), *recv = malloc(4 << 20);
        zc_request_h req;
        memset(recv, 0xee, 4 << 20);
        zc_status_t st = zc_routed_sendrecv(&t, 1, send, recv, ZC_BYTE, ZC_MEM_HOST, comm, &req);
        if (st == ZC_OK)
            st = zc_wait(&req);
        MN_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "zc_comm_set_rail_rates"),
                 "rates pinned differently gave %s", zc_strerror(st));
        MN_CHECK(recv[0] == 0xee && recv[(4 << 20) - 1] == 0xee, "bytes arrived from a refused "
                 "call");
        free(send);
        free(recv);
    }
    MN_CHECK(zc_comm_set_rail_rates(comm, NULL, 0) == ZC_OK, "unpin");
    MN_CHECK(routed(comm, 1u << 20, 4) == ZC_OK, "routed transfer after unpinning");
    report(comm, "ranks that pin different rates: ZC_ERR_MISMATCH on every rank naming "
              "zc_comm_set_rail_rates, nothing moved; unpinned, the next call moves");

    /* A NIC down mid-call: every byte, ZC_OK, on every rank; the rail had
     * begun its share (it went down mid-call) and did not finish it. */
    rates_now(comm, rates);
    rail_sent(comm, before);
    MN_CHECK(with_rail_down(comm, routed, DOWN_RAIL, 5) == ZC_OK, "routed transfer with rail %d "
             "going down", DOWN_RAIL);
    node0_shares(comm, before, d);
    MN_CHECK(d[DOWN_RAIL] > 0 && (double)d[DOWN_RAIL] < BIG * rates[DOWN_RAIL] /
                                                          (rates[0] + rates[1] + rates[2] +
                                                           rates[3]),
             "rail %d carried %llu bytes of its share of %u", DOWN_RAIL,
             (unsigned long long)d[DOWN_RAIL], BIG);
    report(comm, "routed transfer, 48 MiB: rail 1's NIC goes down mid-call (after part of "
              "its share); every rank ZC_OK, every byte");

    /* Later calls keep off it, and so does an alltoallv. */
    rail_sent(comm, before);
    MN_CHECK(alltoallv(comm, 8u << 20, 6) == ZC_OK, "alltoallv without rail %d", DOWN_RAIL);
    node0_shares(comm, before, d);
    MN_CHECK(d[DOWN_RAIL] == 0, "rail %d carried %llu bytes while down", DOWN_RAIL,
             (unsigned long long)d[DOWN_RAIL]);
    MN_CHECK(routed(comm, 8u << 20, 7) == ZC_OK, "routed transfer without rail %d", DOWN_RAIL);
    rates_now(comm, rates);
    MN_CHECK(rates[DOWN_RAIL] == 0, "the routed call split rail %d at %g Gbit/s while it is out",
             DOWN_RAIL, rates[DOWN_RAIL]);
    report(comm, "later calls keep off the rail that is out: its weight is 0, it carries "
              "no byte, every byte arrives");

    /* Back up: used again once a probe finds it. */
    zc_barrier(comm);
    if (mn_rank == 0)
        set_link(DOWN_RAIL, "up");
    /* every rank stops alike: the rates are the ones the calls agreed on,
     * and the number of tries is bounded (not the time, which differs) */
    int tries = 0;
    do {
        MN_CHECK(routed(comm, 1u << 20, 8 + tries) == ZC_OK, "routed transfer while rail %d "
                 "comes back", DOWN_RAIL);
        rates_now(comm, rates);
        usleep(200000);
    } while (rates[DOWN_RAIL] == 0 && ++tries < BACK_TRIES);
    MN_CHECK(rates[DOWN_RAIL] > 0, "rail %d not back after %d tries", DOWN_RAIL, tries);
    rail_sent(comm, before);
    MN_CHECK(routed(comm, 8u << 20, 99) == ZC_OK, "routed transfer with rail %d back", DOWN_RAIL);
    node0_shares(comm, before, d);
    MN_CHECK(d[DOWN_RAIL] > 0, "rail %d carried nothing after it came back", DOWN_RAIL);
    report(comm, "the rail, back up, is used again after a probe: weight above 0, bytes on "
              "it, byte-exact");

    /* An alltoallv block whose NIC goes down mid-call (another rail). */
    rail_sent(comm, before);
    MN_CHECK(with_rail_down(comm, alltoallv, 2, 10) == ZC_OK, "alltoallv with rail 2 going "
             "down");
    node0_shares(comm, before, d);
    MN_CHECK(d[2] > 0, "rail 2 carried nothing: it went down before the call's data");
    zc_barrier(comm);
    if (mn_rank == 0)
        set_link(2, "up");
    report(comm, "alltoallv, a 48 MiB block between nodes: rail 2's NIC goes down mid-call; "
              "every rank ZC_OK, every byte");

    /* Messages their senders' calls count sent once UCX took them: the
     * rank of node 0 on rail 3 takes that NIC down under itself, then
     * sends a small block to its partner on node 1, so that its messages
     * (the agreement's and the block) go into a link that is down and
     * only the copy it keeps after its call can bring them. */
    int lone = -1, node = -1, rail = -1;
    for (int r = 0; r < mn_size && lone < 0; r++) {
        zc_comm_rank_node(comm, r, &node);
        zc_comm_rank_rail(comm, r, &rail);
        lone = node == 0 && rail == 3 ? r : -1;
    }
    MN_CHECK(lone >= 0, "no rank of node 0 on rail 3");
    rail_sent(comm, before);
    if (mn_rank == lone)
        set_link(3, "down");
    MN_CHECK(alltoallv_pair(comm, lone, lone + mn_size / 2, 1000, 11) == ZC_OK, "alltoallv of "
             "1000 bytes from rank %d with rail 3 down", lone);
    MN_CHECK(alltoallv_pair(comm, lone, lone + mn_size / 2, 1000, 12) == ZC_OK, "alltoallv of "
             "1000 bytes from rank %d after rail 3 went down", lone);
    rail_sent(comm, d);
    MN_CHECK(mn_rank != lone || d[3] > before[3], "rank %d sent nothing on rail 3 while it went "
             "down", lone);
    report(comm, "small alltoallv blocks whose sender's NIC is down when they go (counted sent "
              "once UCX took them): sent again from the copy kept after the call, every rank "
              "ZC_OK, every byte");
    return mn_finish(comm);
}
