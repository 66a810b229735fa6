/* How a rank waits for its transfers: it polls the host transport for a
 * short, bounded time, handing the core to any runnable thread between
 * polls, and then sleeps on the transport's event fds.  The poll catches
 * the answers that come within microseconds (small messages, the next
 * step of a schedule) without the cost of a wake-up; the bound and the
 * yield keep waiting ranks off the cores that compute, which on a node of
 * more ranks than cores are the same cores. */
#include "config.h"

#include <sched.h>
#include <unistd.h>

#include "src/common/clock.h"
#include "src/core/comm.h"

#define ZC_IDLE_POLL_ONLY_SEC 4e-6
/* The spin reads the clock about this often: often enough to keep its
 * bounds, seldom enough to stay out of the way (a read costs 45 ns on the
 * test VM; perf put the reads at 14% of a 512-byte exchange's user time
 * with one every 4th poll, 7.5% with this pace). */
#define ZC_IDLE_CLOCK_EVERY_SEC 1e-6
#define ZC_IDLE_CLOCK_MAX_POLLS 64

/* The node's cores, not this process's affinity: a launcher that binds
 * each rank to its own core (mpirun) leaves a rank one core it shares with
 * nobody. */
void zc_comm_idle_init(zc_comm_h comm)
{
    long ncpus = sysconf(_SC_NPROCESSORS_ONLN);

    comm->crowded = ncpus > 0 && comm->local_size > ncpus;
}

int zc_comm_idle(zc_comm_h comm, int timeout_ms)
{
    if (comm->settings.wait_spin_us > 0) {
        const double spin_sec = comm->settings.wait_spin_us * 1e-6;
        /* A rank yields the core after every empty poll: from the first on
         * a crowded node, where what it waits for is mostly other ranks'
         * turn on this core (Open MPI yields between polls when
         * oversubscribed too; perf counted 8 polls, each a system call per
         * rail, per yield without); elsewhere after ZC_IDLE_POLL_ONLY_SEC,
         * because a message between ranks of a node arrives in about a
         * microsecond and sched_yield is a system call (so is, on some
         * virtual machines, reading the clock). */
        int yielding = comm->crowded;
        double start = 0;
        unsigned first = 0, next = 4;

        /* The spin counts from the first clock read, at the 4th poll; each
         * read sets when the next comes from the polls' measured pace. */
        for (unsigned polls = 1;; polls++) {
            if (comm->host_ops->poll(comm->host))
                return 1;  /* something moved: the caller looks */
            if (yielding)
                sched_yield();
            if (polls < next)
                continue;
            double now = zc_now_sec();
            if (!first) {
                start = now;
                first = polls;
                next = polls + 4;
                continue;
            }
            double spent = now - start;
            if (spent >= spin_sec)
                break;
            double per_poll = spent / (polls - first);
            double step = per_poll > 0 ? ZC_IDLE_CLOCK_EVERY_SEC / per_poll : 1;
            next = polls + (step < 1 ? 1 : step > ZC_IDLE_CLOCK_MAX_POLLS
                                                ? ZC_IDLE_CLOCK_MAX_POLLS : (unsigned)step);
            yielding |= spent > ZC_IDLE_POLL_ONLY_SEC;
        }
    }
    return comm->host_ops->wait_event(comm->host, timeout_ms) > 0;
}
