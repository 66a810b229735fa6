/* A striped transfer: bytes that one rank sends to a rank on another node
 * over the rails, chunk by chunk, acknowledged, and sent again on another
 * rail when theirs goes out; each end an op of its schedule (sched.h:
 * zc_sched_wire, and every message a schedule sends between nodes).  The
 * protocol is described at the top of wire.c. */
#ifndef ZC_WIRE_H
#define ZC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/comm.h"

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
    int up_to;               /* one chunk, of at most `bytes` at the receiver (the sender's
                              * `bytes` are what it sends): a message whose size only its
                              * sender knows */
    int home;                /* the rail of every chunk while it is not out; -1: every rail
                              * that is not, in proportion to their rates */
    /* Its chunks do not feed the rails' rates (rail_rates.h): a
     * schedule's message, whose acknowledgement times a small message's
     * latency, not the rail's rate, and may be read long after it came
     * (sched.c keeps its wire past the call: the rail would look busy
     * while idle).  A routed slice's or a block's chunks do. */
    int unmetered;
    uint32_t home_kbps;      /* the home rail's rate its share was cut for, kbit/s: while it
                              * lags far behind that (rail_rates.h), chunks may go on the
                              * other rails too, and the receiver listens on them; 0: never */
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

typedef struct zc_wire zc_wire_t;

/* Bytes of the header in front of every chunk. */
#define ZC_WIRE_HEADER 16

/* This rank's end of `spec` (the sending one when `sending`); nothing
 * moves until it is polled.  A payload of 0 bytes is one empty chunk. */
zc_status_t zc_wire_create(zc_comm_h comm, const zc_wire_spec_t *spec, int sending,
                           zc_wire_t **wire);
/* The chunk both ends cut a payload of `bytes` into when it goes over
 * every rail (home -1): about ZC_WIRE_CHUNKS_PER_RAIL chunks a rail, so
 * that each rail's share follows its rate rather than the count of chunks,
 * from 64 KiB up to ZC_ROUTED_CHUNK, few enough for a chunk number of
 * `bits` bits, and a multiple of `elem`. */
#define ZC_WIRE_CHUNKS_PER_RAIL 8
#define ZC_WIRE_MIN_CHUNK ((size_t)64 << 10)
size_t zc_wire_chunk(zc_comm_h comm, size_t bytes, size_t elem, int bits);
/* Progress once: ZC_INPROGRESS, ZC_OK once this end is done, or an error
 * (ZC_ERR_MISMATCH: the ends cut the transfer differently); *moved is set
 * when anything happened. */
zc_status_t zc_wire_poll(zc_wire_t *wire, int *moved);
/* Whether the sending end has handed every chunk to UCX, none of them to
 * go again (yet): what a message waits for before its schedule counts it
 * sent, leaving the acknowledgements and any resend to later polls. */
int zc_wire_handed(const zc_wire_t *wire);
/* Give up what is unfinished and free it (staging UCX may still write
 * into is kept). */
void zc_wire_destroy(zc_wire_t *wire);
/* The header of a one-chunk transfer's chunk into buf[ZC_WIRE_HEADER]: for
 * a message sent in that chunk's place without a wire (a failure notice,
 * sched.c). */
void zc_wire_frame(void *buf, uint32_t seq, uint32_t id);

#endif
