/* The communicator: who is where, and the transports that reach them. */
#ifndef ZC_COMM_H
#define ZC_COMM_H

#include <stdint.h>
#include <sys/types.h>

#include "src/core/rail_rates.h"
#include "src/core/rails.h"
#include "transport/transport.h"
#include "zcomm.h"

#define ZC_NODE_NAME_MAX 64

/* What every rank tells every other at init (fixed size, bootstrap blob). */
typedef struct {
    uint64_t node_hash;        /* hash of the node identity (ZC_NODE_ID or host) */
    uint64_t host_hash;        /* hash of the real host (host name + boot id) */
    uint64_t kernel_hash;      /* hash of the kernel's boot id: the ranks that share
                                * this machine's cores, whatever node they play */
    uint64_t pid_ns;           /* inode of the pid namespace */
    int32_t pid;
    int32_t reserved;
    char node_name[ZC_NODE_NAME_MAX];
} zc_rank_info_t;

/* The communicator's copy of the per-communicator ZC_* variables
 * (src/common/env_table.c), parsed once at its creation and overridden by
 * the caller's zc_config_t: what the collectives read, never getenv.  The
 * ones of ZC_ENV_SAME were checked to agree on every rank (settings.c). */
typedef struct {
    int timeout_ms;                /* ZC_TIMEOUT, config.timeout_ms */
    int64_t routed_min_bytes;      /* ZC_ROUTED_MIN_BYTES */
    int64_t routed_chunk;          /* ZC_ROUTED_CHUNK */
    int alltoallv_check;           /* ZC_ALLTOALLV_CHECK */
    int64_t alltoallv_split_bytes; /* ZC_ALLTOALLV_SPLIT_BYTES */
    int64_t alltoallv_rows_max;    /* ZC_ALLTOALLV_ROWS_MAX */
    int64_t alltoallv_window;      /* ZC_ALLTOALLV_WINDOW */
    int ring_attn_check;           /* ZC_RING_ATTN_CHECK */
    int64_t ring_attn_slice_mflop; /* ZC_RING_ATTN_SLICE_MFLOP */
    int ring_attn_bwd_reverse;     /* ZC_RING_ATTN_BWD_ORDER is reverse */
    int wait_spin_us;              /* ZC_WAIT_SPIN_US */
    int64_t host_split_bytes;      /* ZC_HOST_SPLIT_BYTES */
    int rail_stripe_equal;         /* ZC_RAIL_STRIPE is equal */
    int rail_stall_ms;             /* ZC_RAIL_STALL_MS */
    int rail_probe_ms;             /* ZC_RAIL_PROBE_MS */
} zc_comm_settings_t;

struct zc_comm {
    uint64_t magic;
    int rank;
    int size;
    int node;
    int nnodes;
    int local_rank;
    int local_size;
    int timeout_ms;
    /* More ranks of this communicator on this machine (its kernel) than
     * the cores they can use (cpus.c): a wait yields the core after every
     * empty poll (idle.c). */
    int crowded;
    zc_comm_settings_t settings;
    zc_rank_info_t *ranks;     /* [size] */
    int *rank_node;            /* [size]: node index of each rank */
    /* [size]: when each watchable peer's pid was last looked at (ms; -1:
     * it is gone), so that waits cost one kill(2) per peer per 10 ms at most. */
    int64_t *pid_seen_ms;
    /* Rails for inter-node traffic: the same count on every node (0: no
     * striping, UCX chooses), and the rail each rank sends on. */
    int nrails;
    int *rank_rail;            /* [size] */
    zc_rails_t rails;          /* this node's NICs behind rails 0..nrails-1 */
    zc_rail_rates_t rates;     /* their rates and the weights calls slice by */
    const zc_transport_ops_t *host_ops;
    zc_transport_t *host;
    struct zc_device *device;  /* device-memory backend (NCCL), made by the first
                                * stream call; released with the comm (device.h) */
    /* What ring attention keeps between calls (src/coll/ring_attn/state.c:
     * ring layouts, the stream engine's streams, events and memory), made
     * by its first call.  zc_comm_destroy releases it after the device
     * backend, whose enqueued transfers may use that memory until then. */
    void *ring_attn;
    void (*ring_attn_release)(void *state);
    /* Messages between nodes that their schedules counted sent, kept with
     * their staging until the receiver acknowledges them (sched.c,
     * zc_sched_linger_poll): only they can be sent again if a rail goes out.
     * Every wait polls them, a point-to-point one too (zc_comm_progress,
     * through linger_poll, which is zc_sched_linger_poll: a rank that waits
     * in zc_barrier for a peer that waits for such a message sends it
     * again). */
    struct zc_sched_linger *linger;
    int nlinger, cap_linger;
    void (*linger_poll)(struct zc_comm *comm);
    uint32_t barrier_seq;
    unsigned coll_seq;         /* numbers collective calls, for their tags */
    /* Finished requests kept for reuse (p2p.c): a message costs no malloc
     * and free of its own. */
    struct zc_request *free_reqs;
    int nfree_reqs;
    struct zc_comm *next_live; /* registry of live communicators */
};

#define ZC_COMM_MAGIC 0x7a636f6d6d2d6f6bULL  /* "zcomm-ok" */

/* Liveness (liveness.c).  ZC_OK if `comm` is a live communicator, else
 * ZC_ERR_INVALID_ARG naming it. */
zc_status_t zc_comm_check(zc_comm_h comm);
/* Non-zero if `peer` shares this node, host and pid namespace, so that
 * its pid tells whether it lives. */
int zc_comm_peer_watchable(zc_comm_h comm, int peer);
/* Non-zero if `peer` is known dead (its connection failed, or its process
 * is gone when it shares this host and pid namespace). */
int zc_comm_peer_failed(zc_comm_h comm, int peer);
/* The same with the clock already read (zc_now_ms; -1: read it if needed),
 * for a look at many peers. */
int zc_comm_peer_failed_at(zc_comm_h comm, int peer, int64_t now_ms);
/* Progress (idle.c) every lane of the host transport, then the messages
 * lingering on the communicator (linger_poll): what every wait that
 * progresses does. */
void zc_comm_progress(zc_comm_h comm);
/* Progress the host transport until a progress moves nothing (bounded):
 * a wait about to give up on a dead peer first takes what that peer sent
 * before it ended. */
void zc_comm_drain(zc_comm_h comm);
/* Wait (idle.c) up to `timeout_ms` for the host transport to move:
 * ZC_WAIT_SPIN_US of polling, then a progress of every lane and, if that
 * moved nothing, a sleep on its event fds.  Non-zero when a poll or that
 * progress moved something: what moved has been progressed, and the caller
 * may look without another progress of every lane; zero after a sleep,
 * which does not progress what woke it. */
int zc_comm_idle(zc_comm_h comm, int timeout_ms);
/* Set how `comm`'s waits share the cores (crowded), once every rank's
 * zc_rank_info_t is known. */
void zc_comm_idle_init(zc_comm_h comm);
/* Add a communicator to the live ones (magic set); remove it: non-zero if
 * it was live. */
void zc_comm_register(struct zc_comm *comm);
int zc_comm_unregister(struct zc_comm *comm);

/* The node identity string of this process (config, ZC_NODE_ID or host),
 * and the hashes of the node, the host and the kernel (zc_rank_info_t). */
void zc_node_identity(const char *configured, char *name, size_t len, uint64_t *node_hash,
                      uint64_t *host_hash, uint64_t *kernel_hash);

#endif
