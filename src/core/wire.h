/* A striped transfer: bytes that one rank sends to a rank on another node
 * over the rails, chunk by chunk, acknowledged, and sent again on another
 * rail when theirs goes out; each end a task of its schedule (sched.h).
 * The protocol is described at the top of wire.c. */
#ifndef ZC_WIRE_H
#define ZC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/sched.h"

/* What both ends must be given alike. */
typedef struct {
    int peer;                /* the rank at the other end (another node) */
    size_t bytes;            /* the payload, > 0 */
    size_t chunk;            /* bytes of every chunk but the last */
    /* The data's tag with chunk number 0: chunk c's is tag + (c << chunk_shift),
     * the number in chunk_bits bits (the chunks must fit). */
    uint64_t tag;
    int chunk_shift, chunk_bits;
    uint64_t ack_tag;        /* the receiver's acknowledgements, sent to the sender */
    uint32_t seq, id;        /* what every chunk's header names: the call and the transfer */
    int home;                /* the rail of every chunk while it is not out; -1: every rail
                              * that is not, in proportion to their rates */
    /* The sender's payload: `src`, or (NULL) chunk c received from
     * fill_peer with tag fill_tag + (c << chunk_shift) into its staging. */
    const char *src;
    int fill_peer;
    uint64_t fill_tag;
    /* Where the receiver puts it: `dst`, or (NULL) chunk c sent on to
     * drain_peer with tag drain_tag + (c << chunk_shift). */
    char *dst;
    int drain_peer;
    uint64_t drain_tag;
} zc_wire_spec_t;

/* Add this rank's end of `spec` (the sending one when `sending`) to
 * `sched`, run once ops dep0 and dep1 are done; its op index, -1 when out
 * of memory (the schedule then fails at start). */
int zc_wire_sched(zc_sched_t *sched, zc_comm_h comm, const zc_wire_spec_t *spec, int sending,
                  int dep0, int dep1);

#endif
