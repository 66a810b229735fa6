/* Faults during a routed transfer on the emulated cluster:
 *   mn_faults kill     rank 1 (a proxy of rail 1) dies mid-transfer
 *   mn_faults nicdown  rail 2 of node 1 goes down mid-transfer
 *   mn_faults random SEED [routed|alltoallv|mixed|cycle]
 *                      repeated 32 MiB zc_routed_sendrecv and/or
 *                      zc_remap_alltoallv calls; the rank and the moment
 *                      that SEED picks (the same on every rank) SIGKILLs
 *                      itself.  Every survivor must get ZC_ERR_PEER_FAILED
 *                      or ZC_ERR_TIMEOUT (exit 0), never abort, never a
 *                      wrong byte (exit 3), never another status (exit 2).
 *                      Driven by tests/fault_soak.sh.
 * Every surviving rank must return from zc_wait within the timeout
 * (ZC_TIMEOUT), and the destination must report an error, never success
 * with missing data.  Each rank exits 0 when it behaved; the script checks
 * the exit of every rank. */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mn_common.h"

static const char *mode;
static char netdev[64];

static void *saboteur(void *arg)
{
    usleep(150000);
    if (strcmp(mode, "kill") == 0) {
        raise(SIGKILL);
    } else {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "ip link set dev %s down", netdev);
        if (system(cmd) != 0)
            fprintf(stderr, "# %s failed\n", cmd);
    }
    return NULL;
}


/* splitmix64: the same numbers from the same seed on every rank. */
static uint64_t mix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned kill_delay_us;

static void *random_killer(void *arg)
{
    (void)arg;
    usleep(kill_delay_us);
    raise(SIGKILL);
    return NULL;
}

static int run_random(zc_comm_h comm, uint64_t seed, const char *what)
{
    uint64_t x = seed;
    const size_t bytes = 32u << 20;
    int victim = (int)(mix(&x) % (uint64_t)mn_size), half = mn_size / 2;
    pthread_t thread;
    zc_status_t st = ZC_OK;
    int calls = 0, wrong = 0;

    /* Up to ~3 s into the calls: before the first byte, mid-transfer, or
     * between two calls. */
    kill_delay_us = (unsigned)(mix(&x) % 3000000u);
    int64_t *counts = malloc(sizeof(int64_t) * (size_t)mn_size);
    int64_t *displs = malloc(sizeof(int64_t) * (size_t)mn_size);
    zc_transfer_t *t = malloc(sizeof(*t) * (size_t)mn_size);
    char *send = malloc(bytes), *recv = malloc(bytes);
    if (!counts || !displs || !t || !send || !recv)
        return 1;
    /* Routed: every rank sends 32 MiB to its partner on the other node. */
    for (int r = 0; r < mn_size; r++) {
        t[r].src = r;
        t[r].dst = (r + half) % mn_size;
        t[r].count = (int64_t)bytes;
        counts[r] = (int64_t)(bytes / (size_t)mn_size);
        displs[r] = (int64_t)((size_t)r * (bytes / (size_t)mn_size));
    }
    pattern_fill(send, bytes, mn_rank, 11);
    fprintf(stderr, "# seed %llu: %s, victim rank %d after %u ms\n", (unsigned long long)seed,
            what, victim, kill_delay_us / 1000);
    zc_barrier(comm);
    if (mn_rank == victim)
        pthread_create(&thread, NULL, random_killer, NULL);
    int64_t t0 = 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t0 = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    for (calls = 0; st == ZC_OK && calls < 1000; calls++) {
        int routed = strcmp(what, "routed") == 0 ||
                     (strcmp(what, "mixed") == 0 && mix(&x) % 2 == 0);
        zc_request_h req;
        memset(recv, 0, bytes);
        if (routed)
            st = zc_routed_sendrecv(t, mn_size, send, recv, ZC_BYTE, ZC_MEM_HOST, comm, &req);
        else
            st = zc_remap_alltoallv(send, counts, displs, recv, counts, displs, ZC_BYTE,
                                    ZC_MEM_HOST, comm, &req);
        if (st == ZC_OK)
            st = zc_wait(&req);
        if (st != ZC_OK)
            break;
        /* A call that returned ZC_OK delivered every byte. */
        if (routed) {
            int src = (mn_rank - half + mn_size) % mn_size;
            wrong += pattern_first_wrong(recv, bytes, src, 11) != bytes;
        } else {
            size_t blk = bytes / (size_t)mn_size;
            for (int r = 0; r < mn_size; r++)
                for (size_t i = 0; i < blk; i += 4093)
                    wrong += ((uint8_t *)recv)[(size_t)r * blk + i] !=
                             pattern_byte((size_t)mn_rank * blk + i, r, 11);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - t0;
    fprintf(stderr, "# rank %d (random): after %d calls, %lld ms: %s (%s)%s\n", mn_rank, calls,
            (long long)ms, zc_strerror(st), st == ZC_OK ? "" : zc_get_last_error(),
            wrong ? " WRONG BYTES" : "");
    printf("RESULT seed=%llu rank=%d status=%s calls=%d ms=%lld wrong=%d\n",
           (unsigned long long)seed, mn_rank,
           st == ZC_ERR_PEER_FAILED ? "PEER_FAILED" : st == ZC_ERR_TIMEOUT ? "TIMEOUT"
           : st == ZC_OK ? "OK" : st == ZC_ERR_TRANSPORT ? "TRANSPORT" : "OTHER",
           calls, (long long)ms, wrong);
    fflush(stdout);
    zc_comm_destroy(comm);
    if (wrong)
        return 3;
    return st == ZC_ERR_PEER_FAILED || st == ZC_ERR_TIMEOUT ? 0 : 2;
}

/* The ranks start an epoch together: each, its child of epoch e ended,
 * leaves a file in ZC_FAULT_SYNC (a directory every node sees) and waits
 * until every rank's is there (at most 5 minutes).  Without it a rank whose
 * child failed fast (ZC_ERR_PEER_FAILED) would start the next bootstrap a
 * whole timeout before one whose child ended by ZC_ERR_TIMEOUT, and the
 * two bootstraps would each time out waiting for the other. */
static void epoch_barrier(int e, const char *rank, int size)
{
    const char *dir = getenv("ZC_FAULT_SYNC");
    char path[512];
    FILE *f;

    if (!dir || !rank || size <= 0)
        return;
    snprintf(path, sizeof(path), "%s/epoch%d.rank%s", dir, e, rank);
    if ((f = fopen(path, "w")))
        fclose(f);
    for (int waited_ms = 0; waited_ms < 300000; waited_ms += 50) {
        int here = 0;

        for (int r = 0; r < size; r++) {
            snprintf(path, sizeof(path), "%s/epoch%d.rank%d", dir, e, r);
            here += access(path, F_OK) == 0;
        }
        if (here == size)
            return;
        usleep(50000);
    }
}

/* `random`: ZC_FAULT_EPOCHS kills in one cluster run (default 1).  Each
 * epoch is a fresh communicator in fresh child processes (bootstrap port
 * ZC_MASTER_PORT + epoch), seed SEED + epoch; MODE "cycle" takes routed,
 * alltoallv and mixed by seed; the epochs start together (epoch_barrier).
 * The parent reports how its child ended: "CHILD seed=S rank=R exit=N" (a
 * signal as 128 + it). */
static int run_random_epochs(int argc, char **argv)
{
    static const char *const modes[] = {"routed", "alltoallv", "mixed"};
    uint64_t seed0 = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
    const char *what = argc > 3 ? argv[3] : "mixed";
    const char *ev = getenv("ZC_FAULT_EPOCHS"), *pv = getenv("ZC_MASTER_PORT");
    const char *rv = getenv("ZC_RANK"), *sv = getenv("ZC_SIZE");
    int epochs = ev ? atoi(ev) : 1, port = pv ? atoi(pv) : 0, bad = 0;

    for (int e = 0; e < (epochs > 0 ? epochs : 1); e++) {
        uint64_t seed = seed0 + (uint64_t)e;
        const char *mode_e = strcmp(what, "cycle") == 0 ? modes[seed % 3] : what;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            char buf[16];
            if (port > 0 && e > 0) {
                snprintf(buf, sizeof(buf), "%d", port + e);
                setenv("ZC_MASTER_PORT", buf, 1);
            }
            alarm(240);  /* a survivor that hangs ends as SIGALRM (142) */
            zc_comm_h comm = mn_init();
            int rc = run_random(comm, seed, mode_e);
            fflush(NULL);
            _exit(rc);
        }
        int wstatus = 0, code;
        if (pid < 0 || waitpid(pid, &wstatus, 0) != pid)
            code = 255;
        else
            code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
        printf("CHILD seed=%llu rank=%s exit=%d\n", (unsigned long long)seed, rv ? rv : "?",
               code);
        fflush(stdout);
        bad += code != 0 && code != 128 + SIGKILL;
        if (e + 1 < epochs)
            epoch_barrier(e, rv, sv ? atoi(sv) : 0);
    }
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "random") == 0)
        return run_random_epochs(argc, argv);
    zc_comm_h comm = mn_init();
    int nrails, local, node, victim = 1, saboteur_rank;
    const int64_t count = 32 << 20;
    zc_request_h req;
    pthread_t thread;

    mode = argc > 1 ? argv[1] : "kill";
    zc_comm_rail_count(comm, &nrails);
    zc_comm_local_rank(comm, &local);
    zc_comm_node(comm, &node);
    saboteur_rank = strcmp(mode, "kill") == 0 ? victim : mn_size / 2;
    if (nrails < 3 || mn_size < 4) {
        fprintf(stderr, "# needs 3 rails and 4 ranks\n");
        return 1;
    }
    if (mn_rank == saboteur_rank && strcmp(mode, "nicdown") == 0 &&
        !mn_rail_netdev(2, netdev, sizeof(netdev))) {
        fprintf(stderr, "# no netdev for rail 2 in ZC_NIC_NETDEV\n");
        return 1;
    }
    char *send = malloc((size_t)count), *recv = malloc((size_t)count);
    zc_transfer_t t = {0, mn_size - 1, count};
    pattern_fill(send, (size_t)count, mn_rank, 7);
    zc_barrier(comm);
    if (zc_routed_sendrecv(&t, 1, send, recv, ZC_BYTE, ZC_MEM_HOST, comm, &req) != ZC_OK) {
        fprintf(stderr, "# rank %d: post failed: %s\n", mn_rank, zc_get_last_error());
        return 1;
    }
    if (mn_rank == saboteur_rank)
        pthread_create(&thread, NULL, saboteur, NULL);
    zc_status_t st = zc_wait(&req);
    fprintf(stderr, "# rank %d (%s): zc_wait: %s (%s)\n", mn_rank, mode, zc_strerror(st),
            zc_get_last_error());
    int status;
    if (mn_rank == t.dst && st == ZC_OK)
        status = pattern_first_wrong(recv, (size_t)count, 0, 7) == (size_t)count ? 0 : 1;
    else if (mn_rank == t.dst)
        status = st == ZC_ERR_PEER_FAILED || st == ZC_ERR_TIMEOUT ? 0 : 1;
    else  /* survivors: their finished part, or a clean error; returning is the point
           * (a dead peer is never a transport error; a NIC down may be) */
        status = st == ZC_OK || st == ZC_ERR_PEER_FAILED || st == ZC_ERR_TIMEOUT ||
                         (st == ZC_ERR_TRANSPORT && strcmp(mode, "nicdown") == 0)
                     ? 0
                     : 1;
    if (mn_rank == saboteur_rank)
        pthread_join(thread, NULL);
    zc_comm_destroy(comm);
    free(send);
    free(recv);
    return status;
}
