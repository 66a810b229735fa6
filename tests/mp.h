/* Multi-rank test cases: each rank is its own forked process; the parent
 * waits for all with a deadline, kills stragglers, and reports whether every
 * rank exited 0.  Ranks report failures on stderr and through their exit
 * status.  Header-only, for the test programs. */
#ifndef ZC_TESTS_MP_H
#define ZC_TESTS_MP_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zcomm.h"

typedef int (*mp_rank_fn)(int rank, int nranks, void *arg);

/* A rank that a case kills on purpose (SIGKILL); -1: none. */
static int mp_killed_rank = -1;

/* Each case's unique id is made by its rank 0 and published here, so the
 * bootstrap root thread lives in a rank: the parent that forks the ranks
 * must have no other thread (a fork copies locks a thread may hold). */
typedef struct {
    volatile int ready;
    char id[128];
} mp_id_slot_t;

static mp_id_slot_t *mp_id_slot;

/* Rank 0: make an id with `make` and publish it; others: wait for it. */
static inline int mp_case_id(int rank, void *id, size_t len, int (*make)(void *id))
{
    if (rank == 0) {
        if (make(id) != 0)
            return -1;
        memcpy(mp_id_slot->id, id, len);
        __atomic_store_n(&mp_id_slot->ready, 1, __ATOMIC_RELEASE);
        return 0;
    }
    for (int i = 0; i < 60000 && !__atomic_load_n(&mp_id_slot->ready, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
    if (!mp_id_slot->ready)
        return -1;
    memcpy(id, mp_id_slot->id, len);
    return 0;
}

/* Run fn in nranks processes.  Returns the number of ranks that failed
 * (non-zero exit, signal, or still running after timeout_s). */
static inline int mp_run(int nranks, int timeout_s, mp_rank_fn fn, void *arg)
{
    pid_t pids[256];
    int failed = 0;
    time_t deadline = time(NULL) + timeout_s;

    if (nranks > 256)
        return nranks;
    if (!mp_id_slot)
        mp_id_slot = mmap(NULL, sizeof(*mp_id_slot), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    mp_id_slot->ready = 0;
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm((unsigned)timeout_s + 5);  /* never outlive the case */
            _exit(fn(r, nranks, arg) == 0 ? 0 : 1);
        }
        if (pids[r] < 0)
            pids[r] = 0, failed++;
    }
    for (int left = nranks - failed; left > 0;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            for (int r = 0; r < nranks; r++) {
                if (pids[r] == pid) {
                    int meant = r == mp_killed_rank && WIFSIGNALED(status) &&
                                WTERMSIG(status) == SIGKILL;
                    if (!meant && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
                        fprintf(stderr, "# rank %d: %s %d\n", r,
                                WIFEXITED(status) ? "exit" : "signal",
                                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                        failed++;
                    }
                    pids[r] = 0;
                    left--;
                }
            }
            continue;
        }
        if (time(NULL) > deadline) {
            for (int r = 0; r < nranks; r++) {
                if (pids[r] > 0) {
                    fprintf(stderr, "# rank %d: still running after %d s, killed\n", r, timeout_s);
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], NULL, 0);
                    failed++;
                    left--;
                }
            }
            break;
        }
        usleep(2000);
    }
    return failed;
}

/* A rank's check: print what failed and count it. */
#define MP_CHECK(cond, ...)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "# rank check failed at %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, " (%s)\n", zc_get_last_error());                 \
            return 1;                                                         \
        }                                                                     \
    } while (0)

static inline int mp_make_id(void *id)
{
    return zc_get_unique_id(id) == ZC_OK ? 0 : -1;
}

/* The case's communicator, its unique id made by rank 0 (mp_case_id);
 * ZC_OK or the status of zc_comm_init_rank (ZC_ERR_INTERNAL when the id
 * could not be shared). */
static inline zc_status_t mp_comm_init(int rank, int nranks, const zc_config_t *config,
                                       zc_comm_h *comm)
{
    zc_unique_id_t id;

    if (mp_case_id(rank, &id, sizeof(id), mp_make_id) != 0)
        return ZC_ERR_INTERNAL;
    return zc_comm_init_rank(comm, nranks, &id, rank, config);
}

/* Anonymous shared memory, inherited by the ranks. */
static inline void *mp_shared(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

#endif
