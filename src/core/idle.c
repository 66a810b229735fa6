/* How a rank waits for its transfers: it polls the host transport for a
 * short, bounded time, handing the core to any runnable thread between
 * polls, and then sleeps on the transport's event fds.  The poll catches
 * the answers that come within microseconds (small messages, the next
 * step of a schedule) without the cost of a wake-up; the bound and the
 * yield keep waiting ranks off the cores that compute, which on a node of
 * more ranks than cores are the same cores. */
#include "config.h"

#include <sched.h>

#include "src/common/clock.h"
#include "src/core/comm.h"

#define ZC_IDLE_POLL_ONLY_SEC 4e-6

void zc_comm_idle(zc_comm_h comm, int timeout_ms)
{
    if (comm->settings.wait_spin_us > 0) {
        double start = zc_now_sec(), spent;
        /* The first microseconds poll only: a message between ranks of a
         * node arrives in about one, and sched_yield is a system call (so
         * is, on some virtual machines, reading the clock). */
        for (unsigned polls = 1;; polls++) {
            if (comm->host_ops->progress(comm->host))
                return;  /* something moved: the caller looks */
            if (polls % 4)
                continue;
            if ((spent = zc_now_sec() - start) * 1e6 >= comm->settings.wait_spin_us)
                break;
            if (spent > ZC_IDLE_POLL_ONLY_SEC)
                sched_yield();
        }
    }
    comm->host_ops->wait_event(comm->host, timeout_ms);
}
