/* The ops table of a host-memory transport backend (UCX).  The device
 * backend (NCCL) implements the ops of src/core/device.h instead.  Backend status codes are converted to
 * zc_status_t inside the backend; the core never sees them. */
#ifndef ZC_TRANSPORT_H
#define ZC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "zcomm.h"

typedef struct zc_transport zc_transport_t;

/* Tags: 24 bits of source rank, 8 bits of class, 32 bits for the class. */
#define ZC_TAG_CLASS_P2P     0u
#define ZC_TAG_CLASS_BARRIER 1u
#define ZC_TAG_CLASS_ROUTED  2u
#define ZC_TAG_CLASS_ALLTOALLV 3u
#define ZC_TAG_CLASS_RING    4u
#define ZC_TAG_CLASS_DEVICE  5u  /* device backend setup (NCCL id) */
#define ZC_TAG_CLASS_MOVE    6u  /* zc_remap_alltoallv_layouts */
#define ZC_TAG(src, cls, low) \
    (((uint64_t)(uint32_t)(src) << 40) | ((uint64_t)((cls) & 0xffu) << 32) | (uint32_t)(low))

#define ZC_RAIL_AUTO (-1)

/* A request is one send or receive, or a whole schedule (src/core/sched.h). */
typedef struct {
    zc_status_t (*test)(void *sched);   /* progress once: ZC_INPROGRESS or final */
    zc_status_t (*wait)(void *sched);   /* block until final */
    void (*destroy)(void *sched);
} zc_request_driver_t;

typedef enum { ZC_REQ_SEND, ZC_REQ_RECV, ZC_REQ_SCHED } zc_request_kind_t;

struct zc_request {
    zc_comm_h comm;
    zc_request_kind_t kind;
    int peer;
    size_t bytes;          /* posted size */
    int up_to;             /* a receive may bring fewer bytes than posted */
    int eager;             /* a send that completes once copied out (ZC_P2P_EAGER) */
    int control;           /* a short send on a rail's control connection (ZC_P2P_CONTROL) */
    int done;              /* set by the backend on completion */
    zc_status_t status;    /* final status once done */
    /* The detail of its error, kept for the zc_test or zc_wait that
     * reports it (which clear the thread's detail on entry; the backend's
     * callback may have run inside the post).  malloc'd, or NULL. */
    char *detail;
    void *backend;         /* backend's own request */
    /* ZC_REQ_SCHED: the schedule it runs and how to drive it (set by
     * src/core/sched.c, so that point-to-point calls it without knowing
     * schedules: the dependency points from schedules to requests only). */
    void *sched;
    const zc_request_driver_t *driver;
    struct zc_request *next_free;  /* in its communicator's pool, once finished */
    /* Striped transfers (src/core/wire.c): a receive matching any tag
     * that differs from its own in `tag_mask` bits only, the tag and the
     * bytes it got; the bytes of each message that are the library's
     * framing, left out of the rails' counts (zc_comm_rail_bytes). */
    uint64_t tag_mask;
    uint64_t recv_tag;
    size_t recv_bytes;
    size_t framing;
};

/* The ranks a host transport connects, as the communicator placed them.
 * The arrays belong to the caller and outlive the transport. */
typedef struct {
    int rank, size;
    int node;                  /* this rank's node */
    int local_size;            /* ranks on this node */
    int timeout_ms;            /* how long to wait for a peer */
    const int *rank_node;      /* [size]: node of each rank */
    /* Rails for traffic between nodes: the same count on every node (0:
     * one lane, UCX chooses), the rail each rank sends on, and the UCX
     * device list of each rail on this node ("veth0", "mlx5_0:1"). */
    int nrails;
    const int *rank_rail;      /* [size] */
    const char *rail_devices[ZC_PLAN_MAX_RAILS];
    /* Messages between ranks of one host larger than this travel in two
     * halves, one copied by each side (0: never); the same on every rank. */
    size_t split_bytes;
    /* Rails' health: how long a probe waits for answers, and how often a
     * rail held out is asked whether it is back (ZC_RAIL_STALL_MS capped
     * at a quarter of the timeout, ZC_RAIL_PROBE_MS). */
    int rail_stall_ms, rail_probe_ms;
    /* Non-zero if `peer`'s process can be watched by its pid (same host
     * and pid namespace): its death is seen without UCX's error handling. */
    int (*peer_watchable)(const void *ctx, int peer);
    const void *peer_ctx;
    /* Every rank contributes `len` bytes; `recv` gets size * len in rank
     * order (the bootstrap, before any endpoint exists). */
    zc_status_t (*allgather)(void *ctx, const void *send, void *recv, size_t len);
    void *allgather_ctx;
    size_t allgather_max;      /* largest `len` it takes */
} zc_transport_world_t;

typedef struct {
    const char *name;
    /* Collective over `world`'s allgather: every rank creates its endpoints. */
    zc_status_t (*create)(const zc_transport_world_t *world, zc_transport_t **tp);
    /* Flushes what was sent, then frees everything; never blocks past the
     * communicator's timeout. */
    void (*destroy)(zc_transport_t *tp);
    /* `rail` picks the NIC for a peer on another node: ZC_RAIL_AUTO is the
     * sender's own rail (so a receiver names its peer's). */
    zc_status_t (*isend)(zc_transport_t *tp, const void *buf, size_t bytes, int peer,
                         uint64_t tag, int rail, zc_request_h req);
    zc_status_t (*irecv)(zc_transport_t *tp, void *buf, size_t bytes, int peer, uint64_t tag,
                         int rail, zc_request_h req);
    /* Advance every lane with operations without blocking; the number of
     * events it handled. */
    int (*progress)(zc_transport_t *tp);
    /* The cheaper look of a wait's spin, called in a tight loop: progress
     * the part of the transport a small message most likely moved on,
     * covering all of it over a few calls; the number of events. */
    int (*poll)(zc_transport_t *tp);
    /* Sleep until something may have completed, or `timeout_ms`.  It
     * progresses every lane first and does not sleep if that moved
     * something: the number of events that progress handled (0: it slept,
     * found events pending without handling them, or could not arm a lane
     * and returned at once). */
    int (*wait_event)(zc_transport_t *tp, int timeout_ms);
    /* Give up on `req`: the backend completes it with `status` and stops
     * touching its buffer. */
    void (*abandon)(zc_transport_t *tp, zc_request_h req, zc_status_t status);
    /* Cancel a receive not yet matched: it completes with an error (a
     * matched one, or a send, completes as it would). */
    void (*cancel)(zc_transport_t *tp, zc_request_h req);
    /* Non-zero once the backend saw `peer`'s connection fail. */
    int (*peer_failed)(zc_transport_t *tp, int peer);
    /* Bytes posted for sending and bytes received on `rail` (-1: inside
     * the node, or everything when there are no rails). */
    void (*rail_bytes)(zc_transport_t *tp, int rail, uint64_t *sent, uint64_t *received);
    /* Rails (transport/ucx/ucx_rails.c).  Bit k set: this rank holds rail
     * k out to some node. */
    uint32_t (*rails_out)(zc_transport_t *tp);
    /* Whether `rail` reaches `peer`'s node now (not held out). */
    int (*rail_live)(zc_transport_t *tp, int rail, int peer);
    /* Data owed on `rail` to `peer` moved for too long: the backend asks
     * whether the rail or the peer is at fault and takes the rail out (for
     * this rank and every rank of both nodes) if it is the rail. */
    void (*rail_suspect)(zc_transport_t *tp, int rail, int peer, const char *why);
    /* Striped transfers' ends: this rank received all of transfer `key`
     * from `peer` (remembered for a while); and, from the sending side,
     * whether `peer` received all of `key`: 1 yes, 0 no, -1 not known yet
     * (the peer is asked; call again). */
    void (*xfer_done)(zc_transport_t *tp, int peer, uint64_t key);
    int (*xfer_query)(zc_transport_t *tp, int peer, uint64_t key);
} zc_transport_ops_t;

extern const zc_transport_ops_t zc_transport_ucx;

#endif
