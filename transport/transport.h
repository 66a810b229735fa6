/* The ops table every transport backend provides (UCX for host memory,
 * NCCL for device memory).  Backend status codes are converted to
 * zc_status_t inside the backend; the core never sees them. */
#ifndef ZC_TRANSPORT_H
#define ZC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/bootstrap.h"
#include "zcomm.h"

typedef struct zc_transport zc_transport_t;

/* Tags: 24 bits of source rank, 8 bits of class, 32 bits for the class. */
#define ZC_TAG_CLASS_P2P     0u
#define ZC_TAG_CLASS_BARRIER 1u
#define ZC_TAG_CLASS_ROUTED  2u
#define ZC_TAG_CLASS_ALLTOALLV 3u
#define ZC_TAG_CLASS_RING    4u
#define ZC_TAG_CLASS_DEVICE  5u  /* device backend setup (NCCL id) */
#define ZC_TAG(src, cls, low) \
    (((uint64_t)(uint32_t)(src) << 40) | ((uint64_t)((cls) & 0xffu) << 32) | (uint32_t)(low))

#define ZC_RAIL_AUTO (-1)

/* A request is one send or receive, or a whole schedule (src/core/sched.h). */
typedef enum { ZC_REQ_SEND, ZC_REQ_RECV, ZC_REQ_SCHED } zc_request_kind_t;

struct zc_request {
    zc_comm_h comm;
    zc_request_kind_t kind;
    int peer;
    size_t bytes;          /* posted size */
    int done;              /* set by the backend on completion */
    zc_status_t status;    /* final status once done */
    void *backend;         /* backend's own request */
    struct zc_sched *sched; /* ZC_REQ_SCHED: the schedule it runs */
};

typedef struct {
    const char *name;
    /* Collective over the bootstrap: every rank creates its endpoints. */
    zc_status_t (*create)(zc_comm_h comm, zc_bootstrap_t *bs, zc_transport_t **tp);
    /* Flushes what was sent, then frees everything; never blocks past the
     * communicator's timeout. */
    void (*destroy)(zc_transport_t *tp);
    /* `rail` picks the NIC for a peer on another node: ZC_RAIL_AUTO is the
     * sender's own rail (so a receiver names its peer's). */
    zc_status_t (*isend)(zc_transport_t *tp, const void *buf, size_t bytes, int peer,
                         uint64_t tag, int rail, zc_request_h req);
    zc_status_t (*irecv)(zc_transport_t *tp, void *buf, size_t bytes, int peer, uint64_t tag,
                         int rail, zc_request_h req);
    /* Advance without blocking. */
    void (*progress)(zc_transport_t *tp);
    /* Sleep until something may have completed, or `timeout_ms`. */
    void (*wait_event)(zc_transport_t *tp, int timeout_ms);
    /* Give up on `req`: the backend completes it with `status` and stops
     * touching its buffer. */
    void (*abandon)(zc_transport_t *tp, zc_request_h req, zc_status_t status);
    /* Non-zero once the backend saw `peer`'s connection fail. */
    int (*peer_failed)(zc_transport_t *tp, int peer);
    /* Bytes posted for sending and bytes received on `rail` (-1: inside
     * the node, or everything when there are no rails). */
    void (*rail_bytes)(zc_transport_t *tp, int rail, uint64_t *sent, uint64_t *received);
} zc_transport_ops_t;

extern const zc_transport_ops_t zc_transport_ucx;

#endif
