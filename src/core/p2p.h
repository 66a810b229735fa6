/* Point-to-point requests, for the public calls and the collectives. */
#ifndef ZC_P2P_H
#define ZC_P2P_H

#include "src/core/comm.h"

/* A zeroed request of `comm`, from the communicator's pool of finished
 * ones when it has one (NULL: out of memory).  Point-to-point and the
 * schedules make their requests with it; finishing one returns it. */
zc_request_h zc_request_new(zc_comm_h comm);
/* Post a send or receive of `bytes` with a full 64-bit `tag` (ZC_TAG) on
 * `rail` (ZC_RAIL_AUTO: the sender's own; ignored inside a node). */
zc_status_t zc_p2p_post(zc_comm_h comm, zc_request_kind_t kind, void *buf, size_t bytes, int peer,
                        uint64_t tag, int rail, zc_request_h *req);
/* The same with `flags`: ZC_P2P_UP_TO lets a receive bring fewer bytes
 * than `bytes` (a capacity), for messages whose size only the sender
 * knows. */
#define ZC_P2P_UP_TO 0x1u
/* ZC_P2P_EAGER asks the transport to complete a send as soon as its bytes
 * are copied out, without waiting for the receiver (no rendezvous), up to
 * the transport's own limit: for short staged messages whose sender
 * has more to do once they are gone. */
#define ZC_P2P_EAGER 0x2u
/* ZC_P2P_CONTROL: a short send on a rail that must not wait behind the
 * data queued there (a striped transfer's acknowledgement): the transport
 * sends it over the rail's own control connection, where its probes go. */
#define ZC_P2P_CONTROL 0x4u
zc_status_t zc_p2p_post_flags(zc_comm_h comm, zc_request_kind_t kind, void *buf, size_t bytes,
                              int peer, uint64_t tag, int rail, unsigned flags,
                              zc_request_h *req);
/* The same with what a striped transfer (wire.c) needs: a receive that
 * matches any tag differing from `tag` in `tag_mask` bits only (it may
 * bring fewer bytes; the request then holds the tag and the bytes that
 * came), and `framing` bytes of each message that are not data (left out
 * of zc_comm_rail_bytes). */
zc_status_t zc_p2p_post_framed(zc_comm_h comm, zc_request_kind_t kind, void *buf, size_t bytes,
                               int peer, uint64_t tag, uint64_t tag_mask, int rail,
                               size_t framing, unsigned flags, zc_request_h *req);
/* Ask the transport to cancel a receive: it completes (with an error)
 * unless its message already began to arrive; then it finishes. */
void zc_p2p_cancel(zc_request_h req);
/* Free a request that is done, without touching the last error. */
void zc_p2p_free(zc_request_h *req);
/* Progress once; ZC_INPROGRESS or the final status (then *req is freed). */
zc_status_t zc_p2p_test(zc_request_h *req);
/* Block until done, the peer fails or the comm's timeout passes; frees. */
zc_status_t zc_p2p_wait(zc_request_h *req);
/* Wait for all; after the first failure the rest are abandoned with the
 * same status instead of each waiting out its own timeout.  Frees all. */
zc_status_t zc_p2p_wait_all(zc_request_h *reqs, int n);
/* Give up on a request and free it. */
void zc_p2p_abandon(zc_request_h *req, zc_status_t status);

#endif
