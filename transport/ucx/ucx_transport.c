/* UCX backend for host memory.
 *
 * Lanes (ucx_lane.h): lane 0 reaches the ranks of this node over shared
 * memory (or every rank, when there are no rails); lane 1 + k reaches
 * other nodes over rail k's NIC only.  A message between two nodes travels
 * on one rail at both ends: by default the sender's own rail, so a receiver
 * posts on its peer's rail; routed transfers name the rail.
 *
 * A message larger than split_bytes between two ranks of one host travels
 * in two halves at once, each copied by another side: the first on lane
 * 0, whose rendezvous the receiver pulls (a process_vm_readv with cma),
 * the second on the split lane, whose rendezvous the sender pushes
 * (UCX_RNDV_SCHEME=put_zcopy: process_vm_writev).  A single copy by one
 * process leaves the other core idle; two halves copied on both cores at
 * once take about half the time, and under load each side's share of its
 * core moves half the bytes (BENCHMARKS.md, "Point-to-point").
 *
 * Both sides split by the message's size, which must agree.  When the two
 * sizes lie on either side of split_bytes, the halves on two lanes could
 * pair up wrongly.  A first half is therefore always longer than
 * split_bytes, and a whole message never: a lane 0 receive that
 * meets the other kind (a whole one a first half, a split one a whole
 * message) knows it from the length, and fails with ZC_ERR_MISMATCH like
 * any other count mismatch; and since the second halves left on the split
 * lane can then no longer be paired safely, split receives from that peer
 * end for good (every one unfinished then, or posted later, fails too).
 * No wrong message is ever delivered.  (A tag bit for the first half,
 * matched with a mask, was tried: UCX keeps masked receives in one list
 * it searches for every message instead of its hash of full tags.)
 *
 * Waits sleep on the lanes' event fds instead of spinning: two cores run
 * every rank of a node on a small test machine, and on real nodes the
 * cores belong to compute.  (The communicator polls `progress` for a
 * bounded ZC_WAIT_SPIN_US first: src/core/idle.c.)
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/clock.h"
#include "src/common/env.h"
#include "src/common/log.h"
#include "src/common/status.h"
#include "transport/transport.h"
#include "transport/ucx/ucx_internal.h"

/* The first half of a split message is its size halved, rounded down to
 * this (and longer than split_bytes: the second half may be empty). */
#define ZC_UCX_SPLIT_ALIGN 64
#define ZC_UCX_IDLE_LANES_EVERY 64
#define ZC_UCX_OP_POOL_MAX 256
/* Whole messages on lane 0 below this size go eager (see zc_ucx_start). */
#define ZC_UCX_LANE0_EAGER_BYTES (128u << 10)
/* Sends up to this size first try to leave in place (zc_ucx_send_in_place).
 * Not a limit of UCX's, which decides what fits (a shared-memory FIFO
 * element, about 100 bytes; a socket's short message, several KiB): above
 * it the try would only cost a failed call per message. */
#define ZC_UCX_IN_PLACE_TRY_BYTES (8u << 10)

/* Transports destroyed while UCX still held abandoned operations of theirs:
 * kept, and reachable, until the process exits. */
static zc_transport_t *zc_ucx_kept;
static pthread_mutex_t zc_ucx_kept_lock = PTHREAD_MUTEX_INITIALIZER;
/* Rail lanes left open at destroy (zc_ucx_rail_unsafe_to_close), kept
 * reachable until exit. */
typedef struct zc_ucx_kept_lane {
    zc_ucx_lane_t lane;
    struct zc_ucx_kept_lane *next;
} zc_ucx_kept_lane_t;
static zc_ucx_kept_lane_t *zc_ucx_kept_lanes;

/* Whether messages with `peer` above split_bytes travel split. */
static int zc_ucx_split_peer(zc_transport_t *tp, int peer)
{
    return tp->split_lane >= 0 && zc_ucx_conn(tp, tp->split_lane, peer)->ep;
}

/* Which lane carries a message with `peer`: the intra-node lane, or the
 * rail's lane (`rail` < 0: the sender's own rail, or where the rails'
 * health moved it: zc_ucx_auto_rail). */
static zc_status_t zc_ucx_pick_lane(zc_transport_t *tp, int peer, int rail, int sending,
                                    int *lane)
{
    const zc_transport_world_t *w = &tp->w;

    if (w->nrails == 0 || w->rank_node[peer] == w->node) {
        *lane = 0;
        return ZC_OK;
    }
    if (rail < 0)
        rail = zc_ucx_auto_rail(tp, peer, sending);
    if (rail >= w->nrails)
        return zc_error(ZC_ERR_INVALID_ARG, "rail: %d is out of range 0..%d", rail,
                        w->nrails - 1);
    *lane = 1 + rail;
    return ZC_OK;
}

/* An operation UCX is done with: its lane has one fewer, and the record
 * goes back to the pool. */
static void zc_ucx_auto_unlink(zc_ucx_op_t *op)
{
    zc_transport_t *tp = op->tp;

    if (!op->auto_prev && tp->auto_recvs != op)
        return;  /* not in the list */
    if (op->auto_prev)
        op->auto_prev->auto_next = op->auto_next;
    else
        tp->auto_recvs = op->auto_next;
    if (op->auto_next)
        op->auto_next->auto_prev = op->auto_prev;
    op->auto_prev = op->auto_next = NULL;
}

static void zc_ucx_op_release(zc_ucx_op_t *op)
{
    zc_transport_t *tp = op->tp;

    zc_ucx_auto_unlink(op);
    tp->pending[op->lane]--;
    if (op->twin)
        op->twin->twin = NULL;
    if (tp->nfree_ops >= ZC_UCX_OP_POOL_MAX) {
        free(op);
        return;
    }
    op->next_free = tp->free_ops;
    tp->free_ops = op;
    tp->nfree_ops++;
}

/* Stop a posted operation from reporting to its request: UCX finishes it
 * alone (a receive cancelled, a send left to its endpoint's forced
 * close), and its lane counts it as stranded until then. */
static void zc_ucx_op_detach(zc_ucx_op_t *op)
{
    zc_transport_t *tp = op->tp;
    int receive = op->req->kind == ZC_REQ_RECV;

    op->req = NULL;
    if (op->moving && !op->ucx_req)
        return;  /* cancelled already, waiting to move: released instead (zc_ucx_reposts) */
    tp->stranded[op->lane]++;
    /* Receives can be cancelled (which may run the callback right here:
     * `op` is not touched after).  A send cannot: UCX may read its buffer
     * until the endpoint closes, and a flush would wait for it forever, so
     * destroy closes that endpoint by force (which also completes it). */
    if (receive)
        ucp_request_cancel(tp->lanes[op->lane].worker, op->ucx_req);
    else
        op->conn->abandoned = 1;
}

/* A UCX error of `op` as a zc_status_t: any failure but a count mismatch on
 * an endpoint that failed is the peer's. */
static zc_status_t zc_ucx_op_error(const zc_ucx_op_t *op, ucs_status_t status)
{
    zc_status_t st = zc_ucx_status(status);

    return st < 0 && st != ZC_ERR_MISMATCH && op->conn && op->conn->failed ? ZC_ERR_PEER_FAILED
                                                                           : st;
}

/* A split receive from a peer whose messages can no longer be paired into
 * halves (see the top of this file). */
static zc_status_t zc_ucx_split_broken(const zc_request_h req)
{
    return zc_error(ZC_ERR_MISMATCH,
                    "count: a receive of %zu bytes from rank %d: an earlier receive from it "
                    "had another size than sent, across ZC_HOST_SPLIT_BYTES, and its split "
                    "messages can no longer be matched", req->bytes, req->peer);
}

/* Whether `op` moved what its request posted: a send, a receive of its
 * whole length, or one that takes up to it. */
static int zc_ucx_length_as_posted(const zc_ucx_op_t *op, size_t received)
{
    return op->req->kind == ZC_REQ_SEND || received == op->bytes || op->req->up_to;
}

/* One operation's outcome as the request's status, with its detail;
 * `other_kind`: a lane 0 receive met a split message's first half where
 * it posted a whole one, or the reverse (`received` is then the sender's
 * length). */
static zc_status_t zc_ucx_op_status(const zc_ucx_op_t *op, ucs_status_t status, size_t received,
                                    int other_kind)
{
    zc_request_h req = op->req;
    zc_status_t st = zc_ucx_op_error(op, status);
    zc_ucx_conn_t *conn0 = zc_ucx_conn(op->tp, 0, req->peer);

    if (other_kind) {
        conn0->split_broken = 1;
        return zc_error(ZC_ERR_MISMATCH,
                        "count: rank %d sent a message %s ZC_HOST_SPLIT_BYTES (%zu), the %zu "
                        "bytes posted are %s it", req->peer, op->half ? "of at most" : "above",
                        op->tp->w.split_bytes, req->bytes, op->half ? "above" : "at most");
    }
    if (op->half && req->kind == ZC_REQ_RECV && conn0->split_broken && st >= 0)
        return zc_ucx_split_broken(req);

    /* Only UCX cancels an operation that was not abandoned: it purges
     * what was in flight on an endpoint that failed (or that a peer
     * reset), whatever status it gives. */
    if (status == UCS_ERR_CANCELED)
        st = ZC_ERR_PEER_FAILED;
    if (st == ZC_ERR_PEER_FAILED)
        zc_ucx_note_peer_failure();
    if (st == ZC_ERR_MISMATCH ||
        (st == ZC_OK && !zc_ucx_length_as_posted(op, received)))
        return zc_error(ZC_ERR_MISMATCH, "count: rank %d sent %s than the %zu bytes posted",
                        req->peer, status == UCS_ERR_MESSAGE_TRUNCATED ? "more" : "less",
                        req->bytes);
    if (st < 0)
        zc_error(st, "ucx: %s with rank %d failed: %s",
                 req->kind == ZC_REQ_SEND ? "send" : "receive", req->peer,
                 ucs_status_string(status));
    return st;
}

static void zc_ucx_complete(zc_ucx_op_t *op, ucs_status_t status, size_t received,
                            int other_kind)
{
    zc_request_h req = op->req;

    /* Every message's outcome comes here: a whole one that arrived or left
     * as posted is done without the look at errors and halves below. */
    if (req && status == UCS_OK && !op->half && !other_kind &&
        zc_ucx_length_as_posted(op, received)) {
        req->backend = NULL;
        req->done = 1;
    } else if (req) {
        zc_status_t st = zc_ucx_op_status(op, status, received, other_kind);
        zc_ucx_op_t *twin = op->twin;
        if (req->status == ZC_OK && st < 0) {  /* a split request keeps its first error */
            req->status = st;
            req->detail = strdup(zc_get_last_error());
        }
        if (twin) {
            op->twin = twin->twin = NULL;
            /* A half waits for its twin, which consumes the other half of
             * the sender's message, even after an error (a count mismatch
             * of two split messages); but once halves can no longer be
             * paired, a receive's other half is cancelled (a send cannot be
             * taken back). */
            if (st < 0 && req->kind == ZC_REQ_RECV && !twin->posting &&
                zc_ucx_conn(op->tp, 0, req->peer)->split_broken) {
                zc_ucx_op_detach(twin);
                twin = NULL;
            }
        }
        req->backend = twin;
        req->done = twin == NULL;
    } else {
        op->tp->stranded[op->lane]--;  /* an abandoned operation finished after all */
    }
    if (op->ucx_req)
        ucp_request_free(op->ucx_req);
    op->ucx_req = NULL;
    if (op->posting)
        op->finished = 1;
    else
        zc_ucx_op_release(op);
}

static void zc_ucx_send_cb(void *ucx_req, ucs_status_t status, void *user_data)
{
    zc_ucx_op_t *op = user_data;

    op->ucx_req = ucx_req;
    zc_ucx_complete(op, status, 0, 0);
}

static void zc_ucx_recv_cb(void *ucx_req, ucs_status_t status, const ucp_tag_recv_info_t *info,
                           void *user_data)
{
    zc_ucx_op_t *op = user_data;
    zc_transport_t *tp = op->tp;

    op->ucx_req = ucx_req;
    if (status == UCS_ERR_CANCELED && op->moving && op->req) {
        /* cancelled to move to another lane: posted there by the next
         * progress, outside UCX's callback */
        ucp_request_free(ucx_req);
        op->ucx_req = NULL;
        zc_ucx_auto_unlink(op);
        op->auto_next = tp->reposts;
        tp->reposts = op;
        return;
    }
    /* (a split message's second half counts where its first does; the
     * library's framing counts nowhere) */
    if (status == UCS_OK) {
        size_t framing = op->req ? op->req->framing : 0;
        tp->received[op->lane == tp->split_lane ? 0 : op->lane] +=
            info->length - (framing < info->length ? framing : info->length);
        if (op->req) {
            op->req->recv_tag = info->sender_tag;
            op->req->recv_bytes = info->length;
        }
    }
    /* (UCX gives the sender's length, also when it truncated; the cheap
     * tests first: this runs for every message) */
    int other_kind = (status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED) &&
                     (info->length > tp->w.split_bytes) != (op->half == 1) && op->lane == 0 &&
                     tp->split_lane >= 0 && op->req && zc_ucx_split_peer(tp, op->req->peer);
    zc_ucx_complete(op, status, status == UCS_OK ? info->length : 0, other_kind);
}

/* The tail of every post: an error, a send completed in place, or an
 * operation under way (whose callback may already have run). */
static zc_status_t zc_ucx_post(zc_ucx_op_t *op, ucs_status_ptr_t sp, int peer)
{
    op->posting = 0;
    if (UCS_PTR_IS_ERR(sp)) {
        ucs_status_t status = UCS_PTR_STATUS(sp);
        zc_status_t st = zc_ucx_op_error(op, status);
        zc_ucx_op_release(op);
        return zc_error(st, "ucx: posting to rank %d failed: %s", peer,
                        ucs_status_string(status));
    }
    if (sp == NULL)              /* a send completed in place; no callback */
        zc_ucx_complete(op, UCS_OK, 0, 0);
    else if (op->finished)       /* the callback already ran inside the post */
        zc_ucx_op_release(op);
    else
        op->ucx_req = sp;
    return ZC_OK;
}

/* A record for an operation of `bytes` on `lane` (posting until its post
 * returns). */
static zc_status_t zc_ucx_new_op(zc_transport_t *tp, int lane, zc_request_h req, size_t bytes,
                                 zc_ucx_op_t **op_out)
{
    zc_ucx_op_t *op = tp->free_ops;

    if (op) {
        tp->free_ops = op->next_free;
        tp->nfree_ops--;
        *op = (zc_ucx_op_t){0};
    } else if (!(op = calloc(1, sizeof(*op)))) {
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate a request");
    }
    op->req = req;
    op->tp = tp;
    op->lane = lane;
    op->bytes = bytes;
    op->posting = 1;
    tp->pending[lane]++;
    *op_out = op;
    return ZC_OK;
}

static ucs_status_ptr_t zc_ucx_start(zc_transport_t *tp, zc_ucx_op_t *op, void *buf,
                                     uint64_t tag)
{
    ucp_request_param_t param = {0};

    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_DATATYPE;
    param.user_data = op;
    param.datatype = ucp_dt_make_contig(1);
    if (op->req->kind == ZC_REQ_SEND) {
        /* UCX then sends eager up to UCX_RNDV_SEND_NBR_THRESH (256 KiB by
         * default) on every lane, shared memory included.  On lane 0
         * (shared memory inside the node; tcp too without rails) every
         * whole message below 128 KiB goes so: UCX 1.13 starts a
         * rendezvous there at 8 KiB, where its round trip costs more than
         * the copy it saves (cma), most of all where ranks outnumber
         * cores and each turn of the handshake waits for a core.  On one
         * node of 8 ranks an alltoallv of 8-64 KiB blocks (the 8 KiB ones
         * ride with their count rows) went 1.3-2x faster (BENCHMARKS.md,
         * "Remap alltoallv", "One node: eager below 128 KiB").  The halves
         * of a split message keep their rendezvous: it is the split. */
        if (op->req->eager ||
            (op->lane == 0 && !op->half && op->bytes < ZC_UCX_LANE0_EAGER_BYTES))
            param.op_attr_mask |= UCP_OP_ATTR_FLAG_FAST_CMPL;
        param.cb.send = zc_ucx_send_cb;
        return ucp_tag_send_nbx(op->conn->ep, buf, op->bytes, tag, &param);
    }
    /* UCX 1.13 does not report the length of a receive that completes in
     * place, so always take the callback, which does. */
    param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = zc_ucx_recv_cb;
    return ucp_tag_recv_nbx(tp->lanes[op->lane].worker, buf, op->bytes, tag,
                            ~op->req->tag_mask, &param);
}

/* Whether `req` on `lane` travels split (both sides decide alike: same
 * size, same peers). */
static int zc_ucx_splits(zc_transport_t *tp, int lane, const zc_request_h req)
{
    return lane == 0 && req->bytes > tp->w.split_bytes && !req->up_to &&
           zc_ucx_split_peer(tp, req->peer);
}

/* A small whole send (at most ZC_UCX_IN_PLACE_TRY_BYTES, not split) that
 * UCX can copy out at once, into the peer's FIFO or the socket, leaves
 * without an operation record or a callback: with
 * UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL, UCX either sends it in place or does
 * nothing and returns UCS_ERR_NO_RESOURCE (too large to go in place, or no
 * room now) or an error that the full post meets again and reports.  The
 * record, its callback and its release were a good part of what libzcomm
 * added to UCX's own 8-byte ping-pong (BENCHMARKS.md, "Latency at 8-64
 * B"). */
static int zc_ucx_send_in_place(zc_ucx_conn_t *conn, zc_request_h req, const void *buf,
                                uint64_t tag)
{
    const ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL};

    if (ucp_tag_send_nbx(conn->ep, buf, req->bytes, tag, &param) != NULL)
        return 0;
    req->done = 1;
    return 1;
}

/* Post `req` on `lane`: whole, or in two halves on lane 0 and the split
 * lane that run at once. */
static zc_status_t zc_ucx_start_request(zc_transport_t *tp, zc_request_h req, void *buf,
                                        int lane, uint64_t tag)
{
    zc_ucx_op_t *op, *second;
    const size_t bytes = req->bytes;

    if (!zc_ucx_splits(tp, lane, req)) {
        ZC_CHECK(zc_ucx_new_op(tp, lane, req, bytes, &op));
        op->conn = zc_ucx_conn(tp, lane, req->peer);
        req->backend = op;
        return zc_ucx_post(op, zc_ucx_start(tp, op, buf, tag), req->peer);
    }
    if (req->kind == ZC_REQ_RECV && zc_ucx_conn(tp, 0, req->peer)->split_broken)
        return zc_ucx_split_broken(req);
    size_t half = bytes / 2 & ~(size_t)(ZC_UCX_SPLIT_ALIGN - 1);
    if (half <= tp->w.split_bytes)
        half = tp->w.split_bytes + 1;  /* longer than any whole message (see the top) */
    ZC_CHECK(zc_ucx_new_op(tp, 0, req, half, &op));
    if (zc_ucx_new_op(tp, tp->split_lane, req, bytes - half, &second) != ZC_OK) {
        op->posting = 0;
        zc_ucx_op_release(op);
        return ZC_ERR_NO_MEMORY;
    }
    op->conn = zc_ucx_conn(tp, 0, req->peer);
    second->conn = zc_ucx_conn(tp, tp->split_lane, req->peer);
    op->half = 1;
    second->half = 2;
    op->twin = second;
    second->twin = op;
    req->backend = op;
    zc_status_t st = zc_ucx_post(op, zc_ucx_start(tp, op, buf, tag), req->peer);
    /* The second half is posted after a count mismatch of the first (it
     * takes the other half of the message sent), not when the first could
     * not be posted, failed otherwise or broke the pairing. */
    if (st != ZC_OK || (req->status < 0 && (req->status != ZC_ERR_MISMATCH ||
                                            zc_ucx_conn(tp, 0, req->peer)->split_broken))) {
        /* an error of the first half's post is the caller's */
        second->posting = 0;
        zc_ucx_op_release(second);
        req->backend = NULL;
        req->done = st == ZC_OK;
        return st;
    }
    st = zc_ucx_post(second, zc_ucx_start(tp, second, (char *)buf + half, tag), req->peer);
    if (st != ZC_OK && req->backend == op)
        zc_ucx_op_detach(op);  /* the request is not posted: the first half goes alone */
    return st;
}

static zc_status_t zc_ucx_isend(zc_transport_t *tp, const void *buf, size_t bytes, int peer,
                                uint64_t tag, int rail, zc_request_h req)
{
    int lane = 0;

    ZC_CHECK(zc_ucx_pick_lane(tp, peer, rail, 1, &lane));
    zc_ucx_conn_t *conn = zc_ucx_conn(tp, lane, peer);
    if (zc_ucx_peer_dead(tp, peer) || (lane == 0 && conn->failed))
        return zc_error(ZC_ERR_PEER_FAILED, "rank %d failed earlier", peer);
    /* a rail's endpoint closed or failed is connected again: the rail may
     * be back, or the peer will fail it again */
    if (lane > 0 && lane <= tp->w.nrails && req->control)
        ZC_CHECK(zc_ucx_control_usable(tp, lane, peer, &conn));
    else if (lane > 0)
        ZC_CHECK(zc_ucx_conn_usable(tp, lane, peer, &conn));
    if (!conn->ep)
        return zc_error(ZC_ERR_UNSUPPORTED, "rank %d has no endpoint on the %s lane", peer,
                        tp->lanes[lane].name);
    tp->sent[lane] += bytes - (req->framing < bytes ? req->framing : bytes);
    if (bytes <= ZC_UCX_IN_PLACE_TRY_BYTES && !zc_ucx_splits(tp, lane, req) &&
        zc_ucx_send_in_place(conn, req, buf, tag))
        return ZC_OK;
    return zc_ucx_start_request(tp, req, (void *)buf, lane, tag);
}

/* A receive of a message without a rail from another node: where the
 * rails' health says (zc_ucx_auto_rail), unless the message already waits
 * on the sender's own rail (it left before that rail went out); listed,
 * so that it can move when a rail goes out before the message comes. */
static zc_status_t zc_ucx_irecv_auto(zc_transport_t *tp, void *buf, int peer, uint64_t tag,
                                     zc_request_h req)
{
    int lane = 1 + zc_ucx_auto_rail(tp, peer, 0), home = 1 + tp->w.rank_rail[peer];
    ucp_tag_recv_info_t info;

    if (lane != home && ucp_tag_probe_nb(tp->lanes[home].worker, tag, ~req->tag_mask, 0, &info))
        lane = home;
    ZC_CHECK(zc_ucx_start_request(tp, req, buf, lane, tag));
    zc_ucx_op_t *op = req->backend;
    if (!req->done && op) {
        op->buf = buf;
        op->tag = tag;
        op->auto_next = tp->auto_recvs;
        if (tp->auto_recvs)
            tp->auto_recvs->auto_prev = op;
        tp->auto_recvs = op;
    }
    return ZC_OK;
}

static zc_status_t zc_ucx_irecv(zc_transport_t *tp, void *buf, size_t bytes, int peer,
                                uint64_t tag, int rail, zc_request_h req)
{
    int lane = 0;

    (void)bytes;  /* req->bytes */
    if (rail < 0 && tp->w.nrails > 0 && tp->w.rank_node[peer] != tp->w.node)
        return zc_ucx_irecv_auto(tp, buf, peer, tag, req);
    ZC_CHECK(zc_ucx_pick_lane(tp, peer, rail, 0, &lane));
    return zc_ucx_start_request(tp, req, buf, lane, tag);
}

/* A rail went out: the receives of messages without a rail that would now
 * go on another lane are cancelled there (the matched ones finish where
 * they are), then posted again (zc_ucx_reposts). */
static void zc_ucx_move_auto_recvs(zc_transport_t *tp)
{
    zc_ucx_op_t *next;

    for (zc_ucx_op_t *op = tp->auto_recvs; op; op = next) {
        next = op->auto_next;  /* a cancel may unlink `op` */
        if (op->req && op->ucx_req && !op->moving &&
            op->lane != 1 + zc_ucx_auto_rail(tp, op->req->peer, 0)) {
            op->moving = 1;
            ucp_request_cancel(op->tp->lanes[op->lane].worker, op->ucx_req);
        }
    }
}

/* Post the moved receives on their new lanes. */
static void zc_ucx_reposts(zc_transport_t *tp)
{
    while (tp->reposts) {
        zc_ucx_op_t *op = tp->reposts;
        zc_request_h req = op->req;
        void *buf = op->buf;
        uint64_t tag = op->tag;
        tp->reposts = op->auto_next;
        op->auto_next = NULL;
        zc_ucx_op_release(op);
        if (!req)
            continue;  /* abandoned meanwhile */
        req->backend = NULL;
        zc_status_t st = zc_ucx_irecv_auto(tp, buf, req->peer, tag, req);
        if (st != ZC_OK && !req->done) {
            req->status = st;
            req->detail = strdup(zc_get_last_error());
            req->done = 1;
        }
    }
}

/* Progress one lane until it has nothing more to do. */
static int zc_ucx_progress_lane(zc_transport_t *tp, int l)
{
    int events = 0;
    unsigned n;

    while ((n = ucp_worker_progress(tp->lanes[l].worker)) != 0)
        events += (int)n;
    return events;
}

/* Progress the lanes with operations, and the others too when `idle_too`.
 * The split lane (the last) goes first: its step of a split message, a
 * receiver's answer to the sender's rendezvous or the sender's copy, lets
 * the other side copy while lane 0's step here copies too. */
static int zc_ucx_progress_lanes(zc_transport_t *tp, int idle_too)
{
    const int split = tp->split_lane;
    int events = 0;

    if (split >= 0 && (tp->pending[split] || idle_too))
        events += zc_ucx_progress_lane(tp, split);
    for (int l = 0; l < tp->nlanes; l++)
        if (l != split && (tp->pending[l] || idle_too))
            events += zc_ucx_progress_lane(tp, l);
    /* the rail messages that came, and the probes due */
    if (zc_ucx_rails_progress(tp))
        zc_ucx_move_auto_recvs(tp);
    if (tp->reposts) {
        zc_ucx_reposts(tp);
        events++;
    }
    return events;
}

static int zc_ucx_progress(zc_transport_t *tp)
{
    return zc_ucx_progress_lanes(tp, ++tp->progress_calls % ZC_UCX_IDLE_LANES_EVERY == 0);
}

/* A wait's spin polls the intra-node lanes (shared memory, no system call)
 * and one rail lane with operations, the rails in turn, each once (not
 * until it has nothing more: the spin comes back): progressing a tcp lane
 * is an epoll system call even when nothing came, and a spin over every
 * rail spends most of its polls in the kernel (BENCHMARKS.md, "Remap
 * alltoallv": small sizes).  Every ZC_UCX_IDLE_LANES_EVERY-th call, counted
 * with `progress`'s, drains every lane instead, idle ones too.  `progress`,
 * which ring attention calls between kernels and the waits after a sleep,
 * still advances every busy lane. */
static int zc_ucx_poll(zc_transport_t *tp)
{
    const int nrails = tp->w.nrails;
    int events = 0;

    if (++tp->progress_calls % ZC_UCX_IDLE_LANES_EVERY == 0)
        return zc_ucx_progress_lanes(tp, 1);
    if (tp->split_lane >= 0 && tp->pending[tp->split_lane])  /* first: see progress_lanes */
        events += (int)ucp_worker_progress(tp->lanes[tp->split_lane].worker);
    events += (int)ucp_worker_progress(tp->lanes[0].worker);
    for (int i = 0; i < nrails; i++) {
        int l = 1 + (tp->next_rail + i) % nrails;
        if (tp->pending[l]) {
            tp->next_rail = l % nrails;  /* the one after l, next time */
            return events + (int)ucp_worker_progress(tp->lanes[l].worker);
        }
    }
    return events;
}

/* Sleep until a lane has events or `timeout_ms` passes: on the lanes with
 * operations only (arming one is several system calls; the others are
 * progressed before every sleep), or on every lane when `every_lane`.  The
 * events the progress before the sleep handled; none if it slept. */
static int zc_ucx_sleep(zc_transport_t *tp, int timeout_ms, int every_lane)
{
    struct pollfd pfds[ZC_UCX_MAX_LANES];
    nfds_t nfds = 0;
    int busy = 0, events;

    if ((events = zc_ucx_progress_lanes(tp, 1)) != 0)
        return events;  /* something moved: let the caller look before sleeping */
    for (int l = 0; l < tp->nlanes; l++)
        busy += tp->pending[l] > 0;
    for (int l = 0; l < tp->nlanes; l++) {
        if (busy && !tp->pending[l] && !every_lane)
            continue;
        ucs_status_t status = ucp_worker_arm(tp->lanes[l].worker);
        if (status == UCS_ERR_BUSY)  /* events arrived meanwhile: go progress */
            return 0;
        if (status != UCS_OK) {
            zc_log_debug("ucx: ucp_worker_arm: %s", ucs_status_string(status));
            return 0;
        }
        pfds[nfds].fd = tp->lanes[l].event_fd;
        pfds[nfds++].events = POLLIN;
    }
    (void)poll(pfds, nfds, timeout_ms);
    return 0;
}

static int zc_ucx_wait_event(zc_transport_t *tp, int timeout_ms)
{
    return zc_ucx_sleep(tp, timeout_ms, 0);
}

static void zc_ucx_cancel(zc_transport_t *tp, zc_request_h req)
{
    zc_ucx_op_t *op = req->backend;

    if (req->kind == ZC_REQ_RECV && !req->done && op && op->ucx_req && !op->twin)
        ucp_request_cancel(tp->lanes[op->lane].worker, op->ucx_req);
}

static void zc_ucx_abandon(zc_transport_t *tp, zc_request_h req, zc_status_t status)
{
    zc_ucx_op_t *op = req->backend;

    (void)tp;
    if (!op || req->done)
        return;
    /* Detach both halves first: cancelling one may run its callback. */
    zc_ucx_op_t *twin = op->twin;
    req->backend = NULL;
    zc_ucx_op_detach(op);
    if (twin)
        zc_ucx_op_detach(twin);
    req->status = status;
    req->done = 1;
}

/* A peer on another node is failed once a probe found it gone, or every
 * rail's endpoint to it failed: one rail's error alone may be the rail's
 * (ucx_rails.c asks).  Inside the node, or with one rail, any error is the
 * peer's, as there is nothing else to ask. */
static int zc_ucx_peer_failed(zc_transport_t *tp, int peer)
{
    int rails = tp->w.nrails, failed = 0;

    if (zc_ucx_peer_dead(tp, peer))
        return 1;
    if (rails < 2 || tp->w.rank_node[peer] == tp->w.node) {
        for (int l = 0; l < tp->nlanes; l++)
            if (zc_ucx_conn(tp, l, peer)->failed)
                return 1;
        return 0;
    }
    for (int k = 0; k < rails; k++)
        failed += zc_ucx_conn(tp, 1 + k, peer)->failed;
    return failed == rails;
}

static int zc_ucx_rail_live_op(zc_transport_t *tp, int rail, int peer)
{
    return tp->w.nrails == 0 || zc_ucx_rail_live(tp, rail, peer);
}

static uint32_t zc_ucx_rails_out_op(zc_transport_t *tp)
{
    return zc_ucx_rails_out(tp);
}

static void zc_ucx_rail_suspect_op(zc_transport_t *tp, int rail, int peer, const char *why)
{
    if (tp->w.nrails > 1)
        zc_ucx_rail_suspect(tp, rail, peer, 0, why);
}

static void zc_ucx_xfer_done_op(zc_transport_t *tp, int peer, uint64_t key)
{
    if (tp->done_ring)
        zc_ucx_xfer_done(tp, peer, key);
}

static int zc_ucx_xfer_query_op(zc_transport_t *tp, int peer, uint64_t key)
{
    return tp->done_ring ? zc_ucx_xfer_query(tp, peer, key) : -1;
}

static void zc_ucx_rail_bytes(zc_transport_t *tp, int rail, uint64_t *sent, uint64_t *received)
{
    int lane = rail < 0 ? 0 : 1 + rail;

    *sent = lane < tp->nlanes ? tp->sent[lane] : 0;
    *received = lane < tp->nlanes ? tp->received[lane] : 0;
}

static void zc_ucx_close_endpoints(zc_transport_t *tp)
{
    int64_t deadline = zc_now_ms() + tp->w.timeout_ms;
    size_t n = 2 * (size_t)tp->nlanes * (size_t)tp->w.size;  /* data and probe endpoints */
    void **closing = calloc(n, sizeof(void *));

    /* Flush first, so that every message this rank sent is delivered
     * before its process may exit; force-close what failed. */
    for (size_t i = 0; i < n; i++) {
        ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS};
        zc_ucx_conn_t *conn = &tp->conns[i];
        if (!conn->ep)
            continue;
        conn->closing = 1;
        param.flags = conn->failed || conn->abandoned ? UCP_EP_CLOSE_FLAG_FORCE : 0;
        ucs_status_ptr_t sp = ucp_ep_close_nbx(conn->ep, &param);
        if (UCS_PTR_IS_PTR(sp)) {
            if (closing)
                closing[i] = sp;
            else
                ucp_request_free(sp);  /* no memory to track it: let UCX finish alone */
        }
        conn->ep = NULL;
    }
    for (size_t i = 0; closing && i < n; i++) {
        while (closing[i] && ucp_request_check_status(closing[i]) == UCS_INPROGRESS) {
            if (zc_ms_left(deadline) == 0) {
                zc_log_warn("ucx: closing an endpoint to rank %zu timed out",
                            i % (size_t)tp->w.size);
                break;
            }
            /* Closing requests count in no lane's operations: an
             * abandoned operation left on one lane must not make this
             * sleep ignore the others. */
            zc_ucx_sleep(tp, 50, 1);
        }
        if (closing[i])
            ucp_request_free(closing[i]);
    }
    free(closing);
}

static void zc_ucx_destroy(zc_transport_t *tp)
{
    if (!tp)
        return;
    if (tp->conns)
        zc_ucx_close_endpoints(tp);
    while (tp->free_ops) {
        zc_ucx_op_t *op = tp->free_ops;
        tp->free_ops = op->next_free;
        free(op);
    }
    int kept = 0;
    for (int l = 0; l < tp->nlanes; l++) {
        zc_ucx_kept_lane_t *keep;
        if (l >= 1 && l <= tp->w.nrails && zc_ucx_rail_unsafe_to_close(tp, l - 1) &&
            (keep = malloc(sizeof(*keep)))) {
            /* its worker is left to the exit (its endpoints are closed) */
            zc_log_info("ucx: %s lane's worker kept until exit: a rail went out, or its link "
                        "is down", tp->lanes[l].name);
            keep->lane = tp->lanes[l];
            pthread_mutex_lock(&zc_ucx_kept_lock);
            keep->next = zc_ucx_kept_lanes;
            zc_ucx_kept_lanes = keep;
            pthread_mutex_unlock(&zc_ucx_kept_lock);
            continue;
        }
        if (tp->stranded[l] > 0) {
            zc_log_info("ucx: %s lane kept until exit: %d abandoned operations are unfinished",
                        tp->lanes[l].name, tp->stranded[l]);
            kept = 1;
        } else {
            zc_ucx_lane_close(&tp->lanes[l]);
        }
    }
    /* Unfinished operations point at the transport's counters and
     * connections: they stay with the lanes kept for them. */
    if (kept) {
        pthread_mutex_lock(&zc_ucx_kept_lock);
        tp->next_kept = zc_ucx_kept;
        zc_ucx_kept = tp;
        pthread_mutex_unlock(&zc_ucx_kept_lock);
        return;
    }
    zc_ucx_rails_fini(tp);
    free(tp->conns);
    free(tp);
}

static zc_status_t zc_ucx_open_lanes(zc_transport_t *tp)
{
    const zc_transport_world_t *w = &tp->w;
    /* The user's UCX_TLS wins over ours. */
    const char *user_tls = getenv("UCX_TLS");
    const char *tls = user_tls ? NULL : zc_env_get(w->nrails ? "ZC_UCX_INTRA_TLS" : "ZC_UCX_TLS");

    ZC_CHECK(zc_ucx_lane_open(&tp->lanes[0], w->nrails ? "intra" : "all", tls, NULL, NULL,
                              w->nrails ? w->local_size : w->size));
    for (int k = 0; k < w->nrails; k++) {
        char name[32];
        snprintf(name, sizeof(name), "rail %d", k);
        ZC_CHECK(zc_ucx_lane_open(&tp->lanes[1 + k], name, zc_env_get("ZC_UCX_NET_TLS"),
                                  w->rail_devices[k], NULL, w->size));
    }
    /* Lane 0's transports but tcp, with the sender doing the rendezvous
     * copy. */
    if (tp->split_lane >= 0) {
        char split_tls[256];
        ZC_CHECK(zc_ucx_lane_open(&tp->lanes[tp->split_lane], "split",
                                  zc_ucx_tls_but_tcp(tls ? tls : user_tls, split_tls,
                                                     sizeof(split_tls)),
                                  NULL, "put_zcopy", w->local_size));
    }
    return ZC_OK;
}

static zc_status_t zc_ucx_create(const zc_transport_world_t *world, zc_transport_t **tp_out)
{
    zc_transport_t *tp = calloc(1, sizeof(*tp));
    zc_status_t st;

    if (!tp)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the UCX transport");
    tp->w = *world;
    tp->split_lane = world->split_bytes > 0 ? 1 + world->nrails : -1;
    tp->nlanes = 1 + world->nrails + (tp->split_lane >= 0);
    st = zc_ucx_open_lanes(tp);
    if (st != ZC_OK)
        goto err;
    tp->conns = calloc(2 * (size_t)tp->nlanes * (size_t)world->size, sizeof(*tp->conns));
    if (!tp->conns) {
        st = zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the UCX endpoints");
        goto err;
    }
    for (int l = 0; l < tp->nlanes; l++) {
        for (int r = 0; r < world->size; r++) {
            *zc_ucx_conn(tp, l, r) = (zc_ucx_conn_t){.tp = tp, .lane = l, .peer = r};
            *zc_ucx_probe_conn(tp, l, r) = (zc_ucx_conn_t){.tp = tp, .lane = l, .peer = r,
                                                          .probe = 1};
        }
    }
    /* the handlers of rail messages, before any peer can send one */
    ZC_CHECK_GOTO(zc_ucx_rails_init(tp), st, err);
    for (int l = 0; l < tp->nlanes; l++)
        ZC_CHECK_GOTO(zc_ucx_connect_lane(tp, l), st, err);
    *tp_out = tp;
    return ZC_OK;

err:
    zc_ucx_destroy(tp);
    return st;
}

const zc_transport_ops_t zc_transport_ucx = {
    .name = "ucx",
    .create = zc_ucx_create,
    .destroy = zc_ucx_destroy,
    .isend = zc_ucx_isend,
    .irecv = zc_ucx_irecv,
    .progress = zc_ucx_progress,
    .poll = zc_ucx_poll,
    .wait_event = zc_ucx_wait_event,
    .abandon = zc_ucx_abandon,
    .cancel = zc_ucx_cancel,
    .peer_failed = zc_ucx_peer_failed,
    .rail_bytes = zc_ucx_rail_bytes,
    .rails_out = zc_ucx_rails_out_op,
    .rail_live = zc_ucx_rail_live_op,
    .rail_suspect = zc_ucx_rail_suspect_op,
    .xfer_done = zc_ucx_xfer_done_op,
    .xfer_query = zc_ucx_xfer_query_op,
};
