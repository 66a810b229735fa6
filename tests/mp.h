/* Multi-rank test cases: each rank is its own forked process; the parent
 * waits for all with a deadline, kills stragglers, and reports whether every
 * rank exited 0.  Ranks report failures on stderr, through their exit
 * status, and (MP_CHECK) in a shared slot that the case's TAP line shows.
 * Under ZC_TEST_CASE, mp_run only posts the case and the ok() that names
 * it runs or skips it (tap.h).  Header-only, for the test programs. */
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

#include "tap.h"
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

/* Each rank's failure detail (MP_CHECK), shared with the parent. */
#define MP_DETAIL_LEN 240
static char (*mp_detail)[MP_DETAIL_LEN];
static int mp_self = -1;  /* this process's rank inside a case; -1 in the parent */

/* Append "rank r: what" to the case's note for its TAP line. */
static inline void mp_note(int r, const char *what)
{
    size_t n = strlen(tap_note_);

    snprintf(tap_note_ + n, sizeof(tap_note_) - n, "%srank %d: %s", n ? "; " : "", r, what);
}

/* Run fn in nranks processes now.  Returns the number of ranks that failed
 * (non-zero exit, signal, or still running after timeout_s). */
static inline int mp_run_now(int nranks, int timeout_s, mp_rank_fn fn, void *arg)
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
    if (!mp_detail)
        mp_detail = mmap(NULL, 256 * sizeof(*mp_detail), PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(mp_detail, 0, (size_t)nranks * sizeof(*mp_detail));
    tap_note_[0] = '\0';
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm((unsigned)timeout_s + 5);  /* never outlive the case */
            mp_self = r;
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
                        char how[64];
                        snprintf(how, sizeof(how), "%s %d", WIFEXITED(status) ? "exit" : "signal",
                                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                        fprintf(stderr, "# rank %d: %s\n", r, how);
                        mp_note(r, mp_detail[r][0] ? mp_detail[r] : how);
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
                    mp_note(r, "still running at the deadline, killed");
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

/* The case mp_run posted under ZC_TEST_CASE, for the ok() that names it. */
static struct {
    int nranks, timeout_s, killed;
    mp_rank_fn fn;
    void *arg;
} mp_pending;

static inline int mp_run_pending(void)
{
    int saved = mp_killed_rank, failed;

    mp_killed_rank = mp_pending.killed;
    failed = mp_run_now(mp_pending.nranks, mp_pending.timeout_s, mp_pending.fn, mp_pending.arg);
    mp_killed_rank = saved;
    return failed;
}

/* mp_run_now, or under ZC_TEST_CASE the case posted for the next ok()
 * (then -1: callers compare the count with 0 inside that ok()).  Cases
 * whose result is looked at otherwise call mp_run_now. */
static inline int mp_run(int nranks, int timeout_s, mp_rank_fn fn, void *arg)
{
    const char *only = getenv("ZC_TEST_CASE");

    if (!only || !*only)
        return mp_run_now(nranks, timeout_s, fn, arg);
    mp_pending.nranks = nranks;
    mp_pending.timeout_s = timeout_s;
    mp_pending.killed = mp_killed_rank;
    mp_pending.fn = fn;
    mp_pending.arg = arg;
    tap_pending_ = mp_run_pending;
    return -1;
}

/* A rank's check: print what failed and count it. */
#define MP_CHECK(cond, ...)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            char mp_what_[MP_DETAIL_LEN / 2];                                 \
            snprintf(mp_what_, sizeof(mp_what_), __VA_ARGS__);                \
            fprintf(stderr, "# rank check failed at %s:%d: %s (%s)\n", __FILE__, \
                    __LINE__, mp_what_, zc_get_last_error());                 \
            if (mp_detail && mp_self >= 0 && !mp_detail[mp_self][0])          \
                snprintf(mp_detail[mp_self], MP_DETAIL_LEN, "%s:%d: %s (%s)", \
                         strrchr(__FILE__, '/') ? strrchr(__FILE__, '/') + 1 : __FILE__, \
                         __LINE__, mp_what_, zc_get_last_error());            \
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
