/* UCX backend for host memory: one context and worker per communicator,
 * tag-matched messages, endpoints with peer-failure detection, and waits
 * that sleep on the worker's event fd instead of spinning (two cores run
 * every rank of a node here, and on real nodes the cores belong to compute).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "src/clock.h"
#include "src/comm.h"
#include "src/env.h"
#include "src/log.h"
#include "src/status.h"
#include "transport/transport.h"

/* What a UCX callback points at.  It outlives an abandoned zc_request:
 * the callback frees it when UCX finally lets go of the operation. */
typedef struct {
    zc_request_h req;      /* NULL once abandoned */
    void *ucx_req;
} zc_ucx_op_t;

typedef struct {
    ucp_ep_h ep;
    int failed;
    int closing;     /* peers that exit first break the link: not news */
} zc_ucx_peer_t;

struct zc_transport {
    zc_comm_h comm;
    ucp_context_h context;
    ucp_worker_h worker;
    int event_fd;
    zc_ucx_peer_t *peers;
};

static zc_status_t zc_ucx_status(ucs_status_t status)
{
    switch (status) {
    case UCS_OK:                     return ZC_OK;
    case UCS_INPROGRESS:             return ZC_INPROGRESS;
    case UCS_ERR_NO_MEMORY:          return ZC_ERR_NO_MEMORY;
    case UCS_ERR_MESSAGE_TRUNCATED:  return ZC_ERR_MISMATCH;
    case UCS_ERR_CANCELED:           return ZC_ERR_TIMEOUT;
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT:   return ZC_ERR_TIMEOUT;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:        return ZC_ERR_PEER_FAILED;
    case UCS_ERR_UNSUPPORTED:        return ZC_ERR_UNSUPPORTED;
    default:                         return ZC_ERR_TRANSPORT;
    }
}

static void zc_ucx_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    zc_ucx_peer_t *peer = arg;

    /* Waits turn this into ZC_ERR_PEER_FAILED with a detail; a peer that
     * destroyed its communicator first also breaks the link, so this is
     * no warning by itself. */
    if (!peer->failed && !peer->closing)
        zc_log_info("ucx: connection to a peer failed: %s", ucs_status_string(status));
    peer->failed = 1;
}

static void zc_ucx_complete(zc_ucx_op_t *op, ucs_status_t status, size_t received)
{
    zc_request_h req = op->req;

    if (req) {
        req->status = zc_ucx_status(status);
        if (req->status == ZC_ERR_MISMATCH || (req->status == ZC_OK && req->kind == ZC_REQ_RECV &&
                                               received != req->bytes))
            req->status = zc_error(ZC_ERR_MISMATCH,
                                   "count: rank %d sent %s than the %zu bytes posted",
                                   req->peer, status == UCS_ERR_MESSAGE_TRUNCATED ? "more" : "less",
                                   req->bytes);
        else if (req->status < 0)
            zc_error(req->status, "ucx: %s with rank %d failed: %s",
                     req->kind == ZC_REQ_SEND ? "send" : "receive", req->peer,
                     ucs_status_string(status));
        req->done = 1;
        req->backend = NULL;
    }
    if (op->ucx_req)
        ucp_request_free(op->ucx_req);
    free(op);
}

static void zc_ucx_send_cb(void *ucx_req, ucs_status_t status, void *user_data)
{
    zc_ucx_op_t *op = user_data;

    op->ucx_req = ucx_req;
    zc_ucx_complete(op, status, 0);
}

static void zc_ucx_recv_cb(void *ucx_req, ucs_status_t status, const ucp_tag_recv_info_t *info,
                           void *user_data)
{
    zc_ucx_op_t *op = user_data;

    op->ucx_req = ucx_req;
    zc_ucx_complete(op, status, status == UCS_OK ? info->length : 0);
}

/* Shared tail of isend/irecv: immediate completion, error or pending. */
static zc_status_t zc_ucx_post(zc_ucx_op_t *op, ucs_status_ptr_t sp, zc_request_h req)
{
    if (UCS_PTR_IS_ERR(sp)) {
        ucs_status_t status = UCS_PTR_STATUS(sp);
        free(op);
        return zc_error(zc_ucx_status(status), "ucx: posting to rank %d failed: %s", req->peer,
                        ucs_status_string(status));
    }
    if (sp == NULL) {            /* a send completed in place; no callback */
        zc_ucx_complete(op, UCS_OK, 0);
        return ZC_OK;
    }
    if (req->done) {             /* the callback already ran inside the post */
        return ZC_OK;
    }
    op->ucx_req = sp;
    req->backend = op;
    return ZC_OK;
}

static zc_status_t zc_ucx_isend(zc_transport_t *tp, const void *buf, size_t bytes, int peer,
                                uint64_t tag, zc_request_h req)
{
    zc_ucx_op_t *op = calloc(1, sizeof(*op));
    ucp_request_param_t param = {0};

    if (!op)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate a send");
    if (tp->peers[peer].failed) {
        free(op);
        return zc_error(ZC_ERR_PEER_FAILED, "rank %d failed earlier", peer);
    }
    op->req = req;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_DATATYPE;
    param.cb.send = zc_ucx_send_cb;
    param.user_data = op;
    param.datatype = ucp_dt_make_contig(1);
    return zc_ucx_post(op, ucp_tag_send_nbx(tp->peers[peer].ep, buf, bytes, tag, &param), req);
}

static zc_status_t zc_ucx_irecv(zc_transport_t *tp, void *buf, size_t bytes, int peer,
                                uint64_t tag, zc_request_h req)
{
    zc_ucx_op_t *op = calloc(1, sizeof(*op));
    ucp_request_param_t param = {0};

    if (!op)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate a receive");
    op->req = req;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_DATATYPE;
    /* UCX 1.13 does not report the length of a receive that completes in
     * place, so always take the callback, which does. */
    param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = zc_ucx_recv_cb;
    param.user_data = op;
    param.datatype = ucp_dt_make_contig(1);
    return zc_ucx_post(op, ucp_tag_recv_nbx(tp->worker, buf, bytes, tag, UINT64_MAX, &param),
                       req);
}

static void zc_ucx_progress(zc_transport_t *tp)
{
    while (ucp_worker_progress(tp->worker))
        ;
}

static void zc_ucx_wait_event(zc_transport_t *tp, int timeout_ms)
{
    struct pollfd pfd = {.fd = tp->event_fd, .events = POLLIN};
    ucs_status_t status;

    zc_ucx_progress(tp);
    status = ucp_worker_arm(tp->worker);
    if (status == UCS_ERR_BUSY)  /* events arrived meanwhile: go progress them */
        return;
    if (status != UCS_OK) {
        zc_log_debug("ucx: ucp_worker_arm: %s", ucs_status_string(status));
        return;
    }
    (void)poll(&pfd, 1, timeout_ms);
}

static void zc_ucx_abandon(zc_transport_t *tp, zc_request_h req, zc_status_t status)
{
    zc_ucx_op_t *op = req->backend;

    if (!op || req->done)
        return;
    /* Detach first: cancelling may run the callback right here. */
    op->req = NULL;
    req->backend = NULL;
    /* Receives can be cancelled; a send's buffer may still be read by UCX
     * until the endpoint closes, which destroy does before returning. */
    if (req->kind == ZC_REQ_RECV)
        ucp_request_cancel(tp->worker, op->ucx_req);
    req->status = status;
    req->done = 1;
}

static int zc_ucx_peer_failed(zc_transport_t *tp, int peer)
{
    return tp->peers[peer].failed;
}

static zc_status_t zc_ucx_exchange_addresses(zc_transport_t *tp, zc_bootstrap_t *bs,
                                             char **table_out, size_t *stride_out)
{
    ucp_address_t *addr;
    size_t addr_len;
    uint64_t my_len, max_len = 0, *lens;
    char *mine = NULL, *table = NULL;
    int n = tp->comm->size;
    ucs_status_t us;
    zc_status_t st;

    us = ucp_worker_get_address(tp->worker, &addr, &addr_len);
    if (us != UCS_OK)
        return zc_error(ZC_ERR_TRANSPORT, "ucx: cannot get the worker address: %s",
                        ucs_status_string(us));
    lens = malloc(sizeof(uint64_t) * (size_t)n);
    if (!lens) {
        st = zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the address lengths");
        goto out;
    }
    my_len = addr_len;
    ZC_CHECK_GOTO(zc_bootstrap_allgather(bs, &my_len, lens, sizeof(my_len)), st, out);
    for (int r = 0; r < n; r++)
        max_len = lens[r] > max_len ? lens[r] : max_len;
    if (max_len + sizeof(uint64_t) > ZC_BOOTSTRAP_MAX_BLOB) {
        st = zc_error(ZC_ERR_UNSUPPORTED, "ucx: worker addresses of %llu bytes are too long",
                      (unsigned long long)max_len);
        goto out;
    }
    mine = calloc(1, max_len);
    table = malloc(max_len * (size_t)n);
    if (!mine || !table) {
        st = zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the address table");
        goto out;
    }
    memcpy(mine, addr, addr_len);
    ZC_CHECK_GOTO(zc_bootstrap_allgather(bs, mine, table, max_len), st, out);
    *table_out = table;
    *stride_out = max_len;
    table = NULL;
out:
    free(table);
    free(mine);
    free(lens);
    ucp_worker_release_address(tp->worker, addr);
    return st;
}

static void zc_ucx_close_endpoints(zc_transport_t *tp)
{
    int64_t deadline = zc_now_ms() + tp->comm->timeout_ms;
    void **closing = calloc((size_t)tp->comm->size, sizeof(void *));

    /* Flush first, so that every message this rank sent is delivered
     * before its process may exit; force-close what failed or timed out. */
    for (int r = 0; r < tp->comm->size; r++) {
        ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS};
        if (!tp->peers[r].ep)
            continue;
        tp->peers[r].closing = 1;
        param.flags = tp->peers[r].failed ? UCP_EP_CLOSE_FLAG_FORCE : 0;
        ucs_status_ptr_t sp = ucp_ep_close_nbx(tp->peers[r].ep, &param);
        if (UCS_PTR_IS_PTR(sp)) {
            if (closing)
                closing[r] = sp;
            else
                ucp_request_free(sp);  /* no memory to track it: let UCX finish alone */
        }
        tp->peers[r].ep = NULL;
    }
    for (int r = 0; closing && r < tp->comm->size; r++) {
        while (closing[r] && ucp_request_check_status(closing[r]) == UCS_INPROGRESS) {
            if (zc_ms_left(deadline) == 0) {
                zc_log_warn("ucx: closing the endpoint to rank %d timed out", r);
                break;
            }
            zc_ucx_wait_event(tp, 50);
        }
        if (closing[r])
            ucp_request_free(closing[r]);
    }
    free(closing);
}

static void zc_ucx_destroy(zc_transport_t *tp)
{
    if (!tp)
        return;
    if (tp->peers)
        zc_ucx_close_endpoints(tp);
    free(tp->peers);
    if (tp->worker)
        ucp_worker_destroy(tp->worker);
    if (tp->context)
        ucp_cleanup(tp->context);
    free(tp);
}

static zc_status_t zc_ucx_create(zc_comm_h comm, zc_bootstrap_t *bs, zc_transport_t **tp_out)
{
    ucp_params_t params = {0};
    ucp_worker_params_t wparams = {0};
    ucp_config_t *config;
    ucs_status_t us;
    zc_transport_t *tp;
    char *table = NULL;
    size_t stride = 0;
    zc_status_t st = ZC_OK;

    tp = calloc(1, sizeof(*tp));
    if (!tp)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the UCX transport");
    tp->comm = comm;
    tp->peers = calloc((size_t)comm->size, sizeof(*tp->peers));
    if (!tp->peers) {
        st = zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the UCX peers");
        goto err;
    }

    us = ucp_config_read(NULL, NULL, &config);
    if (us != UCS_OK) {
        st = zc_error(ZC_ERR_TRANSPORT, "ucx: cannot read its configuration: %s",
                      ucs_status_string(us));
        goto err;
    }
    /* The user's UCX_TLS wins; otherwise the transports this path needs. */
    if (!getenv("UCX_TLS"))
        ucp_config_modify(config, "TLS", zc_env_get("ZC_UCX_TLS"));
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.estimated_num_eps = (size_t)comm->size;
    us = ucp_init(&params, config, &tp->context);
    ucp_config_release(config);
    if (us != UCS_OK) {
        st = zc_error(ZC_ERR_TRANSPORT, "ucx: ucp_init failed: %s", ucs_status_string(us));
        goto err;
    }
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    us = ucp_worker_create(tp->context, &wparams, &tp->worker);
    if (us == UCS_OK)
        us = ucp_worker_get_efd(tp->worker, &tp->event_fd);
    if (us != UCS_OK) {
        st = zc_error(ZC_ERR_TRANSPORT, "ucx: cannot create a worker: %s", ucs_status_string(us));
        goto err;
    }

    ZC_CHECK_GOTO(zc_ucx_exchange_addresses(tp, bs, &table, &stride), st, err);
    for (int r = 0; r < comm->size; r++) {
        ucp_ep_params_t ep_params = {0};
        ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                               UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                               UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep_params.address = (const ucp_address_t *)(table + stride * (size_t)r);
        /* Peer-failure handling keeps UCX off its single-copy shared
         * memory path (cma), a 4x loss here; peers on this host in this
         * pid namespace are watched through their pid instead (see
         * zc_comm_peer_failed), so only the others need it. */
        ep_params.err_mode = zc_comm_peer_watchable(comm, r) ? UCP_ERR_HANDLING_MODE_NONE
                                                              : UCP_ERR_HANDLING_MODE_PEER;
        ep_params.err_handler.cb = zc_ucx_ep_error;
        ep_params.err_handler.arg = &tp->peers[r];
        us = ucp_ep_create(tp->worker, &ep_params, &tp->peers[r].ep);
        if (us != UCS_OK) {
            st = zc_error(ZC_ERR_TRANSPORT, "ucx: cannot connect to rank %d: %s", r,
                          ucs_status_string(us));
            goto err;
        }
    }
    free(table);
    *tp_out = tp;
    return ZC_OK;

err:
    free(table);
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
    .wait_event = zc_ucx_wait_event,
    .abandon = zc_ucx_abandon,
    .peer_failed = zc_ucx_peer_failed,
};
