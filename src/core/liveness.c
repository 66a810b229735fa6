/* Which communicators are live (a destroyed or forged handle is refused,
 * not dereferenced) and which of a communicator's peers are dead.  Below
 * point-to-point and the schedules, which ask it; the communicator's
 * creation and destruction register and unregister. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "src/common/clock.h"
#include "src/core/comm.h"
#include "src/common/status.h"

#define ZC_PID_CHECK_MS 10

/* Live communicators, so that a destroyed or forged handle is refused
 * instead of dereferenced. */
static pthread_mutex_t zc_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zc_comm *zc_live_comms;
/* Counts unregistrations (written under the lock).  Each thread keeps the
 * communicator it last found live, and the count then: until any
 * communicator is destroyed, that one is still live, and checking it again
 * takes neither the lock nor the walk (every send, receive and wait checks
 * its communicator).  A destroy this thread has not been told of races the
 * call, which the lock did not make safe either (zcomm(7), THREAD SAFETY). */
static uint64_t zc_live_epoch;
static __thread const struct zc_comm *zc_live_seen;
static __thread uint64_t zc_live_seen_epoch;

zc_status_t zc_comm_check(zc_comm_h comm)
{
    struct zc_comm *c;
    uint64_t epoch;

    if (!comm)
        return zc_error(ZC_ERR_INVALID_ARG, "comm: is NULL");
    if (comm == zc_live_seen &&
        __atomic_load_n(&zc_live_epoch, __ATOMIC_ACQUIRE) == zc_live_seen_epoch)
        return ZC_OK;
    pthread_mutex_lock(&zc_live_lock);
    for (c = zc_live_comms; c && c != comm; c = c->next_live)
        ;
    epoch = zc_live_epoch;
    pthread_mutex_unlock(&zc_live_lock);
    if (!c || c->magic != ZC_COMM_MAGIC)
        return zc_error(ZC_ERR_INVALID_ARG, "comm: not a live communicator (destroyed?)");
    zc_live_seen = comm;
    zc_live_seen_epoch = epoch;
    return ZC_OK;
}

void zc_comm_register(struct zc_comm *comm)
{
    pthread_mutex_lock(&zc_live_lock);
    comm->next_live = zc_live_comms;
    zc_live_comms = comm;
    pthread_mutex_unlock(&zc_live_lock);
}

int zc_comm_unregister(struct zc_comm *comm)
{
    int found = 0;

    pthread_mutex_lock(&zc_live_lock);
    for (struct zc_comm **p = &zc_live_comms; *p; p = &(*p)->next_live) {
        if (*p == comm) {
            *p = comm->next_live;
            __atomic_store_n(&zc_live_epoch, zc_live_epoch + 1, __ATOMIC_RELEASE);
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&zc_live_lock);
    return found;
}

int zc_comm_peer_watchable(zc_comm_h comm, int peer)
{
    const zc_rank_info_t *me = &comm->ranks[comm->rank], *other = &comm->ranks[peer];

    return other->node_hash == me->node_hash && other->host_hash == me->host_hash &&
           other->pid_ns == me->pid_ns;
}

int zc_comm_peer_failed_at(zc_comm_h comm, int peer, int64_t now_ms)
{
    if (comm->host_ops->peer_failed(comm->host, peer))
        return 1;
    /* Peers reached over shared memory have no connection to break: their
     * pid tells if they live.  A system call is dear next to a poll of
     * shared memory, so a waiting rank asks at most once per
     * ZC_PID_CHECK_MS (at once per millisecond these were 7% of a small
     * alltoallv's system calls; a death is still seen within 10 ms, where
     * timeouts are seconds). */
    int64_t *seen = &comm->pid_seen_ms[peer];
    if (*seen < 0)
        return 1;
    if (!zc_comm_peer_watchable(comm, peer))
        return 0;
    if (now_ms < 0)
        now_ms = zc_now_ms();
    if (now_ms - *seen < ZC_PID_CHECK_MS)
        return 0;
    *seen = now_ms;
    if (kill(comm->ranks[peer].pid, 0) != 0 && errno == ESRCH)
        *seen = -1;
    return *seen < 0;
}

int zc_comm_peer_failed(zc_comm_h comm, int peer)
{
    return zc_comm_peer_failed_at(comm, peer, -1);
}
