/* The UCX backend's state, shared by its files: ucx_transport.c (the ops
 * table: posting, completion, progress) and ucx_rails.c (endpoints and the
 * health of each rail: which are out, the probes that tell, the notices
 * that spread it).  ucx_transport.c calls into ucx_rails.c, never the
 * other way. */
#ifndef ZC_UCX_INTERNAL_H
#define ZC_UCX_INTERNAL_H

#include <stdint.h>
#include <ucp/api/ucp.h>

#include "transport/transport.h"
#include "transport/ucx/ucx_lane.h"

/* lane 0, a lane per rail, and the split lane */
#define ZC_UCX_MAX_LANES (2 + ZC_PLAN_MAX_RAILS)
/* Rail notices and probes waiting to be handled (ucx_rails.c). */
#define ZC_UCX_AM_EVENTS 64
/* Striped transfers this rank received whole, remembered for a sender
 * that lost the last acknowledgements (ucx_rails.c, zc_ucx_xfer_query). */
#define ZC_UCX_DONE_RING 65536
#define ZC_UCX_QUERIES 16
#define ZC_UCX_WHY_LEN 96
#define ZC_UCX_DEVICES_LEN 256  /* a rail's device list (src/core/rails.h: 160) */

/* What a UCX callback points at.  It outlives an abandoned zc_request:
 * the callback frees it when UCX finally lets go of the operation. */
typedef struct {
    ucp_ep_h ep;     /* NULL where the lane does not reach the peer, or once closed */
    zc_transport_t *tp;
    int lane, peer;
    int probe;       /* the rail messages' own endpoint (zc_ucx_probe_conn) */
    int failed;
    int closing;     /* peers that exit first break the link: not news */
    int abandoned;   /* a send on it was given up: close it by force */
    /* (lane 0) a receive met a message of the other kind, split or
     * whole: split receives from this peer fail from then on */
    int split_broken;
} zc_ucx_conn_t;

typedef struct zc_ucx_op {
    struct zc_ucx_op *next_free;  /* in the transport's pool */
    zc_request_h req;      /* NULL once abandoned */
    void *ucx_req;
    zc_transport_t *tp;    /* its lane's counters, and the pool it returns to */
    int lane;
    zc_ucx_conn_t *conn;   /* the endpoint to the peer on its lane (sends travel on it) */
    size_t bytes;          /* its part of the request's */
    int half;              /* of a split message: 1 the first (lane 0), 2 the second; 0 whole */
    /* The other half of a split request, while both are unfinished: the
     * request is done when the last of the two finishes. */
    struct zc_ucx_op *twin;
    /* Inside its ucp_tag_*_nbx call, where UCX may run the callback: the
     * post, not the callback, then puts the record back (`finished`). */
    int posting, finished;
    /* A receive of a message without a rail from another node (its lane
     * follows the rails' health): in tp->auto_recvs while posted, with
     * what a move to another lane posts again. */
    struct zc_ucx_op *auto_prev, *auto_next;
    void *buf;
    uint64_t tag;
    int moving;            /* cancelled to be posted on another lane */
} zc_ucx_op_t;

/* A probe of rail `rail` to a rank: asked on that rail and on another
 * (`via`); the answers tell a dead rail from a slow or dead peer. */
typedef struct {
    int active;
    int peer;
    int via;               /* the other rail asked, -1: none */
    uint32_t nonce;
    int answered_rail, answered_via;
    int after_error;       /* a UCX error on the rail started it, not a stall */
    int64_t deadline_ms;
    char why[ZC_UCX_WHY_LEN];
} zc_ucx_probe_t;

/* Rail k between this node and node n, as this rank sees it. */
typedef struct {
    int out;               /* held out: nothing goes on it */
    int ever_out;          /* was out once: messages without a rail keep off it */
    int64_t next_probe_ms; /* (out) when to ask again whether it is back */
    uint32_t back_nonce;   /* the last such question */
    int probe_turn;        /* which of the node's ranks the next one asks */
    zc_ucx_probe_t probe;  /* (not out) a question whether it is dead */
    int patience_ms;       /* how long a probe waits for the answer on it (0: the stall time) */
} zc_ucx_rail_t;

/* A rail message (an active message on any lane) as it arrived. */
typedef struct {
    uint8_t type;          /* zc_ucx_am_type_t */
    uint8_t rail;          /* the rail it is about */
    uint8_t via;           /* PING/PONG: the rail it travels on */
    uint8_t reserved;
    int32_t src;           /* the sender's rank */
    int32_t node_a, node_b;/* OUT/BACK: the two nodes the rail joins */
    uint32_t nonce;
    uint64_t key;          /* QUERY/ANSWER: the transfer; ANSWER: node_a 1 if received */
    char why[ZC_UCX_WHY_LEN];
} zc_ucx_am_msg_t;

/* A lane's handler argument. */
typedef struct {
    zc_transport_t *tp;
    int lane;
} zc_ucx_am_lane_t;

struct zc_transport {
    zc_transport_world_t w;  /* who is where (the communicator's) */
    int nlanes;
    zc_ucx_lane_t lanes[ZC_UCX_MAX_LANES];
    int split_lane;        /* the put lane of split messages' second halves, or -1 */
    /* [nlanes][size] endpoints of the data, then [nlanes][size] of the
     * rail messages on rails (their own connections: a probe does not wait
     * behind the data queued on a slow rail); ep NULL where a lane does
     * not reach */
    zc_ucx_conn_t *conns;
    /* Every lane's worker addresses, kept to connect again. */
    char *addrs[ZC_UCX_MAX_LANES];
    size_t addr_stride[ZC_UCX_MAX_LANES];
    uint64_t sent[ZC_UCX_MAX_LANES];
    uint64_t received[ZC_UCX_MAX_LANES];
    /* Abandoned operations UCX has not finished: a worker destroyed under
     * them aborts in UCX 1.13 (a matched rendezvous cannot be cancelled),
     * so such a lane is left to the process's exit. */
    int stranded[ZC_UCX_MAX_LANES];
    /* Operations UCX has not finished, per lane: progress looks at the
     * lanes without any only every ZC_UCX_IDLE_LANES_EVERY calls (and
     * before every sleep), since progressing a tcp lane is a system call
     * (epoll) even when nothing arrived.  (A lane must still be progressed
     * now and then with nothing posted on it: a peer's connection setup
     * waits for it.)  Probes in flight count too. */
    int pending[ZC_UCX_MAX_LANES];
    unsigned progress_calls;
    int next_rail;         /* where the next poll starts its look for a busy rail (0-based) */
    /* Finished operation records kept for reuse: a message costs no
     * malloc and free of its own. */
    zc_ucx_op_t *free_ops;
    int nfree_ops;
    /* Receives of messages without a rail from other nodes, posted. */
    zc_ucx_op_t *auto_recvs;
    zc_ucx_op_t *reposts;  /* cancelled to move: posted again by the next progress */
    /* Rails (ucx_rails.c). */
    int nnodes;
    zc_ucx_rail_t *rails;  /* [nrails][nnodes] */
    int *peer_dead;        /* [size]: a probe found the rank gone */
    zc_ucx_am_lane_t am_lane[ZC_UCX_MAX_LANES];
    zc_ucx_am_msg_t am_events[ZC_UCX_AM_EVENTS];
    unsigned am_head, am_tail;
    uint32_t next_nonce;
    int64_t next_rails_look_ms; /* probes' deadlines and periods are looked at from then */
    /* Transfers received whole (peer, key), newest at done_next - 1. */
    struct {
        int32_t peer;
        uint64_t key;
    } *done_ring;
    unsigned done_next;
    /* Questions to peers whether they received a transfer whole. */
    struct {
        int peer;           /* -1: free */
        uint64_t key;
        int answer;         /* -1: none yet */
        int64_t asked_ms;
    } queries[ZC_UCX_QUERIES];
    struct zc_transport *next_kept;  /* in zc_ucx_kept, once destroyed with kept lanes */
};

static inline zc_ucx_conn_t *zc_ucx_conn(zc_transport_t *tp, int lane, int peer)
{
    return &tp->conns[(size_t)lane * (size_t)tp->w.size + (size_t)peer];
}

static inline zc_ucx_conn_t *zc_ucx_probe_conn(zc_transport_t *tp, int lane, int peer)
{
    return &tp->conns[((size_t)tp->nlanes + (size_t)lane) * (size_t)tp->w.size + (size_t)peer];
}

/* ---- ucx_rails.c ---------------------------------------------------------- */

/* The rail state and every lane's handler of rail messages. */
zc_status_t zc_ucx_rails_init(zc_transport_t *tp);
void zc_ucx_rails_fini(zc_transport_t *tp);
/* Endpoints of lane `l` to the peers it reaches (its addresses kept). */
zc_status_t zc_ucx_connect_lane(zc_transport_t *tp, int l);
/* The endpoint to `peer` on `lane`, connected again if it was closed or
 * failed. */
zc_status_t zc_ucx_conn_usable(zc_transport_t *tp, int lane, int peer, zc_ucx_conn_t **conn);
/* The same for a rail's control connection (the rail messages' endpoint,
 * which data does not queue on): probes, and ZC_P2P_CONTROL sends. */
zc_status_t zc_ucx_control_usable(zc_transport_t *tp, int lane, int peer, zc_ucx_conn_t **conn);
/* The rail a message without one takes to or from `peer` on another node:
 * the sender's own, unless that was ever out to the peer's node; then the
 * next one after it never out and not out now (else one not out now). */
int zc_ucx_auto_rail(zc_transport_t *tp, int peer, int sending);
/* Whether `rail` reaches the node of `peer` now (not held out). */
int zc_ucx_rail_live(zc_transport_t *tp, int rail, int peer);
uint32_t zc_ucx_rails_out(zc_transport_t *tp);
/* Whether rail `rail`'s worker is better left until exit: a rail went out
 * in this communicator's life (its endpoints were closed and made again,
 * on any rail, by both ends: handshakes may still be pending), or its link
 * is down here.  UCX 1.13 aborts destroying a worker that still holds a
 * connection handshake it could not send (ucp_request_send_state_ff: "got
 * REP message"). */
int zc_ucx_rail_unsafe_to_close(zc_transport_t *tp, int rail);
/* A stall or a UCX error on `rail` to `peer`: ask whether the rail or the
 * peer is at fault (a probe), and take the rail out if it is the rail. */
void zc_ucx_rail_suspect(zc_transport_t *tp, int rail, int peer, int after_error,
                         const char *why);
/* Handle rail messages that arrived, probes that ended or are due; non-zero
 * when a rail went out (messages without a rail may move: the caller
 * posts their receives again where zc_ucx_auto_rail says). */
int zc_ucx_rails_progress(zc_transport_t *tp);
/* A probe found `peer` gone. */
int zc_ucx_peer_dead(zc_transport_t *tp, int peer);
void zc_ucx_xfer_done(zc_transport_t *tp, int peer, uint64_t key);
int zc_ucx_xfer_query(zc_transport_t *tp, int peer, uint64_t key);
/* Whether `lane` reaches `peer` at all (lane 0: this node, a rail lane:
 * the other nodes, the split lane: peers watched by pid). */
int zc_ucx_lane_reaches(const zc_transport_t *tp, int l, int r);

#endif
