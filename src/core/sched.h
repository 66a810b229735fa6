/* Schedules: the collectives (routed transfer, alltoallv, ring attention)
 * as a list of sends, receives and local copies with dependencies, posted
 * as soon as what they depend on is done and progressed under one request.
 * A schedule owns its staging buffers. */
#ifndef ZC_SCHED_H
#define ZC_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/comm.h"
#include "src/core/wire.h"

typedef struct zc_sched zc_sched_t;

#define ZC_SCHED_NONE (-1)  /* no dependency */

zc_status_t zc_sched_create(zc_comm_h comm, zc_sched_t **sched);
/* A send or receive posted once ops `dep0` and `dep1` are done; returns its
 * index, or -1 when out of memory (the schedule then fails at start). */
int zc_sched_p2p(zc_sched_t *sched, zc_request_kind_t kind, void *buf, size_t bytes, int peer,
                 uint64_t tag, int rail, int dep0, int dep1);
/* A receive of at most `capacity` bytes (the sender alone knows how many). */
int zc_sched_recv_up_to(zc_sched_t *sched, void *buf, size_t capacity, int peer, uint64_t tag,
                        int dep0, int dep1);
/* A send of `*bytes` bytes, read when it is posted: a message that an op
 * it depends on packs at run time, in the schedule's staging.  It goes
 * eager (ZC_P2P_EAGER), so it is done once copied out.  If the schedule
 * fails before posting it, a failure notice goes in its place (same peer
 * and tag), so that a receiver waiting for what this rank forwards learns
 * why at once instead of at its timeout: the message's first 8 bytes must
 * never read ZC_SCHED_NOTICE_MARKER. */
int zc_sched_send_packed(zc_sched_t *sched, const void *buf, const size_t *bytes, int peer,
                         uint64_t tag, int rail, int dep0, int dep1);
#define ZC_SCHED_NOTICE_MARKER INT64_MIN
/* ZC_OK when the message received at `msg` from `from` is not a failure
 * notice, else the sender's status, naming the rank it failed on. */
zc_status_t zc_sched_notice_check(const void *msg, int from);
/* A local memcpy, run once its dependencies are done. */
int zc_sched_copy(zc_sched_t *sched, void *dst, const void *src, size_t bytes, int dep0,
                  int dep1);
/* An op done once ops `a` and `b` are (ZC_SCHED_NONE: only the other):
 * for waiting on more ops than two.  Returns the op, or -1 out of memory. */
int zc_sched_join(zc_sched_t *sched, int a, int b);
/* A local step run once its dependencies are done: fn(arg, i).  A status
 * other than ZC_OK fails the schedule right there, so nothing that waits
 * for this op is ever posted: how a collective that finds its ranks
 * disagree stops before its data moves.  fn may add ops to the schedule
 * (they go after every op there is, and may depend on this one): how a
 * collective builds what depends on its agreement's outcome. */
typedef zc_status_t (*zc_sched_fn_t)(void *arg, int i);
int zc_sched_call(zc_sched_t *sched, zc_sched_fn_t fn, void *arg, int i, int dep0, int dep1);
/* This rank's end (the sending one when `sending`) of a striped transfer
 * (src/core/wire.c), run once ops dep0 and dep1 are done. */
int zc_sched_wire(zc_sched_t *sched, const zc_wire_spec_t *spec, int sending, int dep0,
                  int dep1);
/* The collective's call sequence, the same on every rank: from then on
 * the schedule sends each message between nodes (at most
 * ZC_SCHED_WIRE_MAX bytes, no rail named) as a one-chunk striped transfer,
 * acknowledged and sent again on another rail if its rail goes out; a
 * larger one, or without it, goes as a plain message, lost with its rail.
 * Both ends of every message must set it alike.  Such a send is done for
 * its schedule once UCX has taken it, as a plain one is; its transfer
 * lingers on the communicator until acknowledged (zc_sched_linger_poll). */
void zc_sched_set_call(zc_sched_t *sched, unsigned call);
#define ZC_SCHED_WIRE_MAX (1u << 20)
/* Poll the messages of finished sends still owed their acknowledgement:
 * one whose rail went out goes again on another; one acknowledged, whose
 * receiver failed, or unacknowledged for twice the comm's timeout (its
 * receiver has given up) is freed.  Every pass of a schedule, and every
 * point-to-point wait, that progresses the transport runs it. */
void zc_sched_linger_poll(zc_comm_h comm);
/* At the communicator's end: poll them until none is left or, at most,
 * for the time a rail takes to be found out and the message sent again
 * (three ZC_RAIL_STALL_MS, within the timeout), then free the rest. */
void zc_sched_linger_end(zc_comm_h comm);
/* Staging memory freed with the schedule; NULL when out of memory. */
void *zc_sched_buffer(zc_sched_t *sched, size_t bytes);
/* Hand the schedule to a request (zc_test/zc_wait progress it); on
 * failure the schedule is destroyed. */
zc_status_t zc_sched_start(zc_sched_t *sched, zc_request_h *request);
void zc_sched_destroy(zc_sched_t *sched);

/* Progress once (ZC_INPROGRESS, ZC_OK or the first error), and
 * block until done, the comm's timeout without progress, or a dead peer
 * (what zc_test and zc_wait call through the request's driver). */
zc_status_t zc_sched_test(zc_sched_t *sched);
zc_status_t zc_sched_wait(zc_sched_t *sched);

#endif
