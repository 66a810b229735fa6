/* Agreement of every rank of a communicator on a 64-bit fingerprint of
 * what they were given, so that a collective whose ranks got different
 * arguments fails on all of them before its data moves, instead of losing
 * or mixing data.  Every rank learns the smallest and the largest
 * fingerprint: up to 33 ranks in one round, a 136-byte message from every
 * rank to every other; beyond, in ceil(log2 n) dissemination rounds of one
 * 136-byte message each way (min and max are idempotent, so the overlapping
 * partial results of a non-power-of-two size do no harm).  The same
 * messages carry every rank's view of the rails (rail_rates.h), merged as
 * idempotently: the caller slices its transfers between nodes by that
 * merged view.
 *
 * Fingerprint 0 is, by convention, a rank that refused its own arguments
 * and takes part only so that nobody waits for it: real fingerprints have
 * their low bit set. */
#ifndef ZC_AGREE_H
#define ZC_AGREE_H

#include <stdint.h>

#include "src/core/comm.h"
#include "src/core/sched.h"

typedef struct {
    uint64_t lo, hi;          /* smallest and largest fingerprint */
    int64_t lo_rank, hi_rank; /* the lowest rank that has each */
    zc_rail_view_t rails;     /* every rank's view of the rails, merged */
} zc_agree_range_t;

/* The tag of the message `sender` sends in `round` (0, 1, ...), in the
 * caller's tag class; `ctx` is the caller's. */
typedef uint64_t (*zc_agree_tag_fn)(const void *ctx, int sender, int round);

/* Add the rounds to `sched`, starting at once; returns the op after which
 * `*range` (owned by the schedule) holds the range over every rank, or
 * ZC_SCHED_NONE when there is nothing to wait for (one rank).  Out of
 * memory, `*range` is NULL and the schedule has failed. */
int zc_agree_sched(zc_sched_t *sched, zc_comm_h comm, uint64_t mine, zc_agree_tag_fn tag,
                   const void *ctx, zc_agree_range_t **range);

/* The same, blocking, in a schedule of its own for the collective of call
 * sequence `call` (zc_sched_set_call). */
zc_status_t zc_agree(zc_comm_h comm, uint64_t mine, zc_agree_tag_fn tag, const void *ctx,
                     unsigned call, zc_agree_range_t *range);

/* For a rank that refused its own arguments to a collective: take part
 * with fingerprint 0, so that the other ranks fail with ZC_ERR_MISMATCH
 * instead of waiting for it and the call sequence stays in step; then
 * return `refusal` with its detail as it was. */
zc_status_t zc_agree_refuse(zc_comm_h comm, zc_status_t refusal, zc_agree_tag_fn tag,
                            const void *ctx, unsigned call);

#endif
