/* How a rank waits for its transfers: it polls the host transport for a
 * short, bounded time and then sleeps on the transport's event fds.  The
 * poll catches the answers that come within microseconds (small messages,
 * the next step of a schedule) without the cost of a wake-up; the bound
 * keeps waiting ranks off the cores that compute.
 *
 * Only on a machine of more ranks than cores does the poll hand the core
 * over between polls (sched_yield): there what a rank waits for is mostly
 * another rank's turn on its core.  Elsewhere a yield hands the core to
 * whatever else runs there, and under Linux's fair scheduler a busy thread
 * then keeps it for a whole slice: with both cores loaded by stress-ng, a
 * 2-rank ping-pong's half round trip took 51-2040 us from 8 B to 64 KiB
 * with a yield after every poll past the first 4 us, 1.3-28 us without
 * (BENCHMARKS.md, "Point-to-point", the no-yield round). */
#include "config.h"

#include <sched.h>

#include "src/common/clock.h"
#include "src/core/comm.h"
#include "src/core/cpus.h"

/* The spin reads the clock about this often: often enough to keep its
 * bound, seldom enough to stay out of the way (a read costs 45 ns on the
 * test VM; perf put the reads at 14% of a 512-byte exchange's user time
 * with one every 4th poll, 7.5% with this pace). */
#define ZC_IDLE_CLOCK_EVERY_SEC 1e-6
#define ZC_IDLE_CLOCK_MAX_POLLS 64

/* The cores the ranks can run on (cpus.c: the machine's, cut to a
 * container's cgroup cpuset), not this process's affinity: a launcher that
 * binds each rank to its own core (mpirun) leaves a rank one core it
 * shares with nobody.  And the machine's ranks, not the node's: the
 * emulated cluster's nodes (and containers) share one kernel's cores. */
void zc_comm_idle_init(zc_comm_h comm)
{
    const uint64_t kernel = comm->ranks[comm->rank].kernel_hash;
    long ncpus = zc_cpus_usable("");
    int sharing = 0;

    for (int r = 0; r < comm->size; r++)
        sharing += comm->ranks[r].kernel_hash == kernel;
    comm->crowded = sharing > ncpus;
}

int zc_comm_idle(zc_comm_h comm, int timeout_ms)
{
    if (comm->settings.wait_spin_us > 0) {
        const double spin_sec = comm->settings.wait_spin_us * 1e-6;
        double start = 0;
        unsigned first = 0, next = 4;

        /* The spin counts from the first clock read, at the 4th poll; each
         * read sets when the next comes from the polls' measured pace. */
        for (unsigned polls = 1;; polls++) {
            if (comm->host_ops->poll(comm->host))
                return 1;  /* something moved: the caller looks */
            /* Open MPI yields between polls when oversubscribed too; perf
             * counted 8 polls, each a system call per rail, per yield of a
             * crowded rank that yielded only after 4 us. */
            if (comm->crowded)
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
        }
    }
    return comm->host_ops->wait_event(comm->host, timeout_ms) > 0;
}

void zc_comm_progress(zc_comm_h comm)
{
    comm->host_ops->progress(comm->host);
    if (comm->nlinger)
        comm->linger_poll(comm);
}

/* Enough for every message a peer's last moments can leave queued (each
 * progress takes up to a few events), and still a bound where live peers
 * keep sending. */
#define ZC_DRAIN_MAX_PROGRESS 1024

void zc_comm_drain(zc_comm_h comm)
{
    for (int i = 0; i < ZC_DRAIN_MAX_PROGRESS && comm->host_ops->progress(comm->host) > 0; i++)
        ;
}
