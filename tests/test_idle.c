/* How a waiting rank shares the cores (src/core/idle.c): which
 * communicators count as crowded (more ranks on one machine than the
 * cores they can use, zc_cpus_usable: tests/test_cpus; whatever nodes they
 * play),
 * and what zc_comm_idle returns: non-zero exactly when it has progressed
 * something that moved, so that a wait may look without progressing. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mp.h"
#include "src/core/comm.h"
#include "src/core/cpus.h"
#include "tap.h"
#include "transport/transport.h"
#include "zcomm.h"

#define CASE_TIMEOUT_S 120
/* A crowded case forks one rank more than the usable cores; past this
 * many cores it is skipped rather than fork a crowd. */
#define CROWD_MAX_RANKS 17

typedef struct {
    int one_node;  /* every rank on one node, else one node per rank */
    int expect;    /* the crowded flag every rank must see */
} crowd_case_t;

static int rank_crowded(int rank, int nranks, void *arg)
{
    const crowd_case_t *c = arg;
    zc_config_t config = ZC_CONFIG_INITIALIZER;
    char node[32];
    zc_comm_h comm;

    snprintf(node, sizeof(node), "idle-node-%d", c->one_node ? 0 : rank);
    config.node_id = node;
    config.timeout_ms = 60000;
    MP_CHECK(mp_comm_init(rank, nranks, &config, &comm) == ZC_OK, "init");
    MP_CHECK(comm->local_size == (c->one_node ? nranks : 1), "%d ranks on this node",
             comm->local_size);
    MP_CHECK(comm->crowded == c->expect, "%d ranks (%d on this node) on a machine of %ld "
             "usable cores: crowded %d", nranks, comm->local_size, zc_cpus_usable(""),
             comm->crowded);
    zc_comm_destroy(comm);
    return 0;
}

/* Shared by the two ranks of the idle case: rank 1 has posted its receive. */
static volatile int *recv_posted;

/* Rank 1 posts a receive, then lets rank 0 send, and from then on only
 * zc_comm_idle progresses the transport: the receive must be found done
 * right after a call that returned non-zero, never after one that
 * returned zero (a wait would then look without progressing and miss
 * it until the next sleep's end).  `arg`: ZC_WAIT_SPIN_US, so that the
 * message arrives during the spin (large) or during a sleep (0). */
static int rank_idle_moved(int rank, int nranks, void *arg)
{
    zc_config_t config = ZC_CONFIG_INITIALIZER;
    uint64_t word = 0x5eed1d1e;
    zc_comm_h comm;
    zc_request_h req;

    config.timeout_ms = 60000;
    config.wait_spin_us = *(int *)arg ? *(int *)arg : ZC_CONFIG_ZERO;
    MP_CHECK(mp_comm_init(rank, nranks, &config, &comm) == ZC_OK, "init");
    MP_CHECK(comm->settings.wait_spin_us == *(int *)arg, "ZC_WAIT_SPIN_US is %d",
             comm->settings.wait_spin_us);
    MP_CHECK(zc_barrier(comm) == ZC_OK, "barrier");
    if (rank == 0) {
        for (int ms = 0; !__atomic_load_n(recv_posted, __ATOMIC_ACQUIRE); ms++) {
            MP_CHECK(ms < 60000, "rank 1 did not post its receive within 60 s");
            usleep(1000);
        }
        usleep(20000);  /* let rank 1 be inside zc_comm_idle (not needed to pass) */
        MP_CHECK(zc_send(&word, 1, ZC_INT64, ZC_MEM_HOST, 1, comm, &req) == ZC_OK, "send");
        MP_CHECK(zc_wait(&req) == ZC_OK, "send completes");
    } else {
        uint64_t got = 0;
        int calls = 0, nonzero = 0;

        MP_CHECK(zc_recv(&got, 1, ZC_INT64, ZC_MEM_HOST, 0, comm, &req) == ZC_OK, "recv");
        __atomic_store_n(recv_posted, 1, __ATOMIC_RELEASE);
        while (!req->done && calls < 100000) {
            int moved = zc_comm_idle(comm, 100);
            calls++;
            nonzero += moved != 0;
            MP_CHECK(moved || !req->done, "the receive completed inside call %d of "
                     "zc_comm_idle, which returned 0", calls);
        }
        MP_CHECK(req->done, "the receive is not done after %d calls (%d non-zero)", calls,
                 nonzero);
        MP_CHECK(zc_wait(&req) == ZC_OK && got == word, "the word arrived: %#llx",
                 (unsigned long long)got);
    }
    MP_CHECK(zc_barrier(comm) == ZC_OK, "final barrier");
    zc_comm_destroy(comm);
    return 0;
}

/* A rank alone has nothing that can arrive: a spin and a sleep that move
 * nothing return zero. */
static int rank_idle_quiet(int rank, int nranks, void *arg)
{
    zc_config_t config = ZC_CONFIG_INITIALIZER;
    zc_comm_h comm;

    config.wait_spin_us = *(int *)arg ? *(int *)arg : ZC_CONFIG_ZERO;
    MP_CHECK(mp_comm_init(rank, nranks, &config, &comm) == ZC_OK, "init");
    MP_CHECK(comm->settings.wait_spin_us == *(int *)arg, "ZC_WAIT_SPIN_US is %d",
             comm->settings.wait_spin_us);
    for (int i = 0; i < 3; i++)
        MP_CHECK(zc_comm_idle(comm, 5) == 0, "call %d of zc_comm_idle with nothing in flight "
                 "returned non-zero", i + 1);
    zc_comm_destroy(comm);
    return 0;
}

int main(void)
{
    const long ncpus = zc_cpus_usable("");
    static crowd_case_t calm = {1, 0}, crowd = {1, 1}, spread = {0, 1};
    static int spin_long = 1000000, spin_none = 0;

    setenv("ZC_SOCKET_IFNAME", "lo", 0);
    recv_posted = mp_shared(sizeof(*recv_posted));
    if (!recv_posted || ncpus < 1)
        tap_skip_all("no shared memory or no online core count");
    ok(mp_run(1, CASE_TIMEOUT_S, rank_crowded, &calm) == 0,
       "a rank alone on its node is not crowded");
    if (ncpus + 1 <= CROWD_MAX_RANKS) {
        ok(mp_run((int)ncpus, CASE_TIMEOUT_S, rank_crowded, &calm) == 0,
           "%ld ranks on a machine of %ld usable cores: none crowded", ncpus, ncpus);
        ok(mp_run((int)ncpus + 1, CASE_TIMEOUT_S, rank_crowded, &crowd) == 0,
           "%ld ranks on one node of %ld usable cores: crowded on every rank", ncpus + 1, ncpus);
        ok(mp_run((int)ncpus + 1, CASE_TIMEOUT_S, rank_crowded, &spread) == 0,
           "%ld ranks, each playing its own node on this machine: crowded on every rank (they "
           "share its cores, as the emulated cluster's nodes do)", ncpus + 1);
    } else {
        tap_skip(3, "more usable cores than a crowded case forks ranks");
    }
    static int spin_short = 2000;
    ok(mp_run(1, CASE_TIMEOUT_S, rank_idle_quiet, &spin_short) == 0,
       "zc_comm_idle with nothing in flight returns zero after a spin");
    ok(mp_run(1, CASE_TIMEOUT_S, rank_idle_quiet, &spin_none) == 0,
       "zc_comm_idle with nothing in flight and no spin returns zero");
    *recv_posted = 0;
    ok(mp_run(2, CASE_TIMEOUT_S, rank_idle_moved, &spin_long) == 0,
       "zc_comm_idle is non-zero when its spin moved the receive it completed");
    *recv_posted = 0;
    ok(mp_run(2, CASE_TIMEOUT_S, rank_idle_moved, &spin_none) == 0,
       "zc_comm_idle without a spin is non-zero when the progress before its sleep completed "
       "the receive, zero after a sleep");
    return tap_done();
}
