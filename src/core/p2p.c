/* Point-to-point: argument checks, requests, and the blocking wait. */
#include "config.h"

#include <stdlib.h>

#include "src/common/clock.h"
#include "src/core/memtype.h"
#include "src/core/p2p.h"
#include "src/common/status.h"

/* How often a blocked wait looks for dead peers. */
#define ZC_WAIT_SLICE_MS 100
/* Finished requests a communicator keeps for reuse, at most. */
#define ZC_REQ_POOL_MAX 256

zc_request_h zc_request_new(zc_comm_h comm)
{
    zc_request_h req = comm->free_reqs;

    if (!req)
        return calloc(1, sizeof(*req));
    comm->free_reqs = req->next_free;
    comm->nfree_reqs--;
    *req = (struct zc_request){0};
    return req;
}

/* Back to its communicator's pool (which is live: a request of a
 * destroyed one is freed where that is found, zc_request_check). */
static void zc_request_release(zc_request_h req)
{
    zc_comm_h comm = req->comm;

    if (req->detail)
        free(req->detail);
    if (comm->nfree_reqs >= ZC_REQ_POOL_MAX) {
        free(req);
        return;
    }
    req->next_free = comm->free_reqs;
    comm->free_reqs = req;
    comm->nfree_reqs++;
}

zc_status_t zc_p2p_post_flags(zc_comm_h comm, zc_request_kind_t kind, void *buf, size_t bytes,
                              int peer, uint64_t tag, int rail, unsigned flags,
                              zc_request_h *req_out)
{
    return zc_p2p_post_framed(comm, kind, buf, bytes, peer, tag, 0, rail, 0, flags, req_out);
}

void zc_p2p_cancel(zc_request_h req)
{
    if (!req->done)
        req->comm->host_ops->cancel(req->comm->host, req);
}

void zc_p2p_free(zc_request_h *req)
{
    if ((*req)->driver)
        (*req)->driver->destroy((*req)->sched);
    zc_request_release(*req);
    *req = NULL;
}

zc_status_t zc_p2p_post_framed(zc_comm_h comm, zc_request_kind_t kind, void *buf, size_t bytes,
                               int peer, uint64_t tag, uint64_t tag_mask, int rail,
                               size_t framing, unsigned flags, zc_request_h *req_out)
{
    zc_request_h req = zc_request_new(comm);
    zc_status_t st;

    if (!req)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate a request");
    req->comm = comm;
    req->kind = kind;
    req->peer = peer;
    req->bytes = bytes;
    req->tag_mask = tag_mask;
    req->framing = framing;
    req->up_to = kind == ZC_REQ_RECV && ((flags & ZC_P2P_UP_TO) || tag_mask);
    req->eager = kind == ZC_REQ_SEND && (flags & ZC_P2P_EAGER);
    req->control = kind == ZC_REQ_SEND && (flags & ZC_P2P_CONTROL);
    if (kind == ZC_REQ_SEND)
        st = comm->host_ops->isend(comm->host, buf, bytes, peer, tag, rail, req);
    else
        st = comm->host_ops->irecv(comm->host, buf, bytes, peer, tag, rail, req);
    if (st != ZC_OK) {
        zc_request_release(req);
        return st;
    }
    *req_out = req;
    return ZC_OK;
}

zc_status_t zc_p2p_post(zc_comm_h comm, zc_request_kind_t kind, void *buf, size_t bytes, int peer,
                        uint64_t tag, int rail, zc_request_h *req)
{
    return zc_p2p_post_flags(comm, kind, buf, bytes, peer, tag, rail, 0, req);
}

static zc_status_t zc_p2p_finish(zc_request_h *req)
{
    zc_status_t st = (*req)->status;

    /* zc_test and zc_wait clear the last error on entry: a failure found
     * while progressing an earlier call keeps its detail with the request,
     * or at least this one */
    if (st < 0 && (*req)->detail)
        zc_error(st, "%s", (*req)->detail);
    else if (st < 0 && !*zc_get_last_error())
        zc_error(st, "request %s rank %d failed: %s",
                 (*req)->kind == ZC_REQ_SEND ? "to" : "from", (*req)->peer, zc_strerror(st));
    if ((*req)->driver)
        (*req)->driver->destroy((*req)->sched);
    zc_request_release(*req);
    *req = NULL;
    return st;
}

void zc_p2p_abandon(zc_request_h *req, zc_status_t status)
{
    zc_comm_h comm = (*req)->comm;

    if (!(*req)->done)
        comm->host_ops->abandon(comm->host, *req, status);
    (void)zc_p2p_finish(req);
}

/* Done, or a reason to stop waiting: the peer is dead.  The transport is
 * progressed first when `progress`. */
static int zc_p2p_settled(zc_request_h req, int progress)
{
    zc_comm_h comm = req->comm;

    /* A send that completed in place is done before any progress (which
     * would put a poll of every lane between this exchange and the next). */
    if (req->done)
        return 1;
    if (progress)
        zc_comm_progress(comm);
    if (req->done)
        return 1;
    if (zc_comm_peer_failed(comm, req->peer)) {
        /* A peer that sent its last message and ended may be seen dead
         * before that message is taken (its pid gone after it wrote to
         * shared memory; its connection's close read in the progress that
         * read its last data): what it left is taken first. */
        zc_comm_drain(comm);
        if (req->done)
            return 1;
        comm->host_ops->abandon(comm->host, req,
                                zc_error(ZC_ERR_PEER_FAILED, "rank %d failed during a %s",
                                         req->peer, req->kind == ZC_REQ_SEND ? "send to it"
                                                                             : "receive from it"));
        return 1;
    }
    return 0;
}

zc_status_t zc_p2p_test(zc_request_h *req)
{
    return zc_p2p_settled(*req, 1) ? zc_p2p_finish(req) : ZC_INPROGRESS;
}

zc_status_t zc_p2p_wait(zc_request_h *req)
{
    zc_comm_h comm = (*req)->comm;
    int64_t deadline = -1;

    /* After a wait that moved something (a poll of the spin, or the
     * progress before a sleep), what moved has been progressed: look
     * without another progress of every lane.  The clock is read only for
     * a request that is not done at the first look (a small send that
     * completed in place, or a receive whose message was there). */
    for (int progress = 1; !zc_p2p_settled(*req, progress);) {
        int left = comm->timeout_ms;
        if (deadline < 0)
            deadline = zc_now_ms() + comm->timeout_ms;
        else
            left = zc_ms_left(deadline);
        if (left == 0) {
            /* Named from this rank's side: the peer is who it waits for. */
            zc_status_t st = zc_error(ZC_ERR_TIMEOUT,
                                      "a %s of %zu bytes %s rank %d did not complete within %d ms",
                                      (*req)->kind == ZC_REQ_SEND ? "send" : "receive",
                                      (*req)->bytes, (*req)->kind == ZC_REQ_SEND ? "to" : "from",
                                      (*req)->peer, comm->timeout_ms);
            zc_p2p_abandon(req, st);
            return st;
        }
        progress = !zc_comm_idle(comm, left < ZC_WAIT_SLICE_MS ? left : ZC_WAIT_SLICE_MS);
    }
    return zc_p2p_finish(req);
}

zc_status_t zc_p2p_wait_all(zc_request_h *reqs, int n)
{
    zc_status_t first = ZC_OK;

    for (int i = 0; i < n; i++) {
        if (!reqs[i])
            continue;
        if (first == ZC_OK)
            first = zc_p2p_wait(&reqs[i]);
        else
            zc_p2p_abandon(&reqs[i], first);
    }
    return first;
}

/* ---- public calls ---------------------------------------------------- */

static zc_status_t zc_p2p_check(const void *buf, int64_t count, zc_datatype_t dtype,
                                zc_memtype_t memtype, int peer, zc_comm_h comm, size_t *bytes)
{
    int64_t elem = (int64_t)zc_datatype_size(dtype), total;

    ZC_CHECK(zc_comm_check(comm));
    ZC_ARG_CHECK(count >= 0, "count: %lld is negative", (long long)count);
    ZC_ARG_CHECK(elem != 0, "dtype: %d is not a zc_datatype_t", (int)dtype);
    /* (A multiply that flags overflow, not a 64-bit division: every
     * message comes through here.) */
    ZC_ARG_CHECK(!__builtin_mul_overflow(count, elem, &total),
                 "count: %lld elements of %lld bytes overflow", (long long)count,
                 (long long)elem);
    ZC_ARG_CHECK(buf != NULL || count == 0, "buf: is NULL with count %lld", (long long)count);
    ZC_ARG_CHECK(peer >= 0 && peer < comm->size, "peer: %d is out of range 0..%d", peer,
                 comm->size - 1);
    ZC_CHECK(zc_memtype_check_p2p(buf, memtype, "buf"));
    *bytes = (size_t)total;
    return ZC_OK;
}

/* A checked public send or receive: P2P tags name the sender. */
static zc_status_t zc_p2p_start(zc_comm_h comm, zc_request_kind_t kind, void *buf, size_t bytes,
                                int peer, zc_request_h *request)
{
    int sender = kind == ZC_REQ_SEND ? comm->rank : peer;

    return zc_p2p_post(comm, kind, buf, bytes, peer, ZC_TAG(sender, ZC_TAG_CLASS_P2P, 0),
                       ZC_RAIL_AUTO, request);
}

zc_status_t zc_send(const void *buf, int64_t count, zc_datatype_t dtype, zc_memtype_t memtype,
                    int peer, zc_comm_h comm, zc_request_h *request)
{
    size_t bytes;

    zc_error_clear();
    ZC_ARG_CHECK(request != NULL, "request: is NULL");
    ZC_CHECK(zc_p2p_check(buf, count, dtype, memtype, peer, comm, &bytes));
    return zc_p2p_start(comm, ZC_REQ_SEND, (void *)buf, bytes, peer, request);
}

zc_status_t zc_recv(void *buf, int64_t count, zc_datatype_t dtype, zc_memtype_t memtype, int peer,
                    zc_comm_h comm, zc_request_h *request)
{
    size_t bytes;

    zc_error_clear();
    ZC_ARG_CHECK(request != NULL, "request: is NULL");
    ZC_CHECK(zc_p2p_check(buf, count, dtype, memtype, peer, comm, &bytes));
    return zc_p2p_start(comm, ZC_REQ_RECV, buf, bytes, peer, request);
}

static zc_status_t zc_request_check(zc_request_h *request)
{
    ZC_ARG_CHECK(request != NULL, "request: is NULL");
    ZC_ARG_CHECK(*request != NULL, "request: *request is NULL (already completed?)");
    zc_status_t st = zc_comm_check((*request)->comm);
    if (st != ZC_OK) {
        /* Its communicator is gone, and with it the operation: release. */
        free((*request)->detail);
        free(*request);
        *request = NULL;
        return zc_error(st, "request: its communicator was destroyed");
    }
    return ZC_OK;
}

zc_status_t zc_test(zc_request_h *request)
{
    zc_error_clear();
    ZC_CHECK(zc_request_check(request));
    if ((*request)->kind != ZC_REQ_SCHED)
        return zc_p2p_test(request);
    (*request)->status = (*request)->driver->test((*request)->sched);
    return (*request)->status == ZC_INPROGRESS ? ZC_INPROGRESS : zc_p2p_finish(request);
}

zc_status_t zc_wait(zc_request_h *request)
{
    zc_error_clear();
    ZC_CHECK(zc_request_check(request));
    if ((*request)->kind != ZC_REQ_SCHED)
        return zc_p2p_wait(request);
    (*request)->status = (*request)->driver->wait((*request)->sched);
    return zc_p2p_finish(request);
}

zc_status_t zc_sendrecv(const void *sendbuf, int64_t sendcount, int dst, void *recvbuf,
                        int64_t recvcount, int src, zc_datatype_t dtype, zc_memtype_t memtype,
                        zc_comm_h comm)
{
    size_t sbytes, rbytes;
    zc_request_h reqs[2];

    zc_error_clear();
    ZC_CHECK(zc_p2p_check(recvbuf, recvcount, dtype, memtype, src, comm, &rbytes));
    ZC_CHECK(zc_p2p_check(sendbuf, sendcount, dtype, memtype, dst, comm, &sbytes));
    /* Checked before anything is posted: a refused call sends nothing. */
    ZC_CHECK(zc_check_disjoint(sendbuf, sbytes, "sendbuf", recvbuf, rbytes, "recvbuf"));
    ZC_CHECK(zc_p2p_start(comm, ZC_REQ_RECV, recvbuf, rbytes, src, &reqs[0]));
    zc_status_t st = zc_p2p_start(comm, ZC_REQ_SEND, (void *)sendbuf, sbytes, dst, &reqs[1]);
    if (st != ZC_OK) {
        zc_p2p_abandon(&reqs[0], st);
        return st;
    }
    return zc_p2p_wait_all(reqs, 2);
}
