/* Endpoints, and the health of each rail between this node and another.
 *
 * A rail is out between two nodes when it stops carrying data while the
 * peer still answers on another rail.  The evidence comes from above (a
 * striped transfer, src/core/wire.c, that saw no acknowledgement on a rail
 * for ZC_RAIL_STALL_MS) or from UCX (an error on the rail's endpoint), and
 * a probe settles it: an active message PING asked on the suspect rail and
 * on another; the peer's PONG on the other alone says the rail is dead (it
 * goes out), a PONG on the rail says it is only slow (it stays), no answer
 * at all says the peer is at fault (after a UCX error: gone, and waits
 * report ZC_ERR_PEER_FAILED; after a stall: nothing changes, and the
 * collective's own timeout decides, as without rails).
 *
 * A rank that takes a rail out closes its endpoints on it to that node
 * (what UCX still holds on them is cancelled, and nothing sent there
 * before can arrive after) and tells every rank of both nodes (OUT), which
 * do the same.  While it is out, every rank that holds it out asks a rank
 * of the other node on it every ZC_RAIL_PROBE_MS (a PING on fresh
 * endpoints); the first PONG brings it back, for every rank of both nodes
 * (BACK).  ZC_LOG_LEVEL=info shows each rail going out or back, and why.
 *
 * A probe waits ZC_RAIL_STALL_MS for the answer on the rail, twice as long
 * after each time the rail came back (up to a quarter of ZC_TIMEOUT).  Over
 * tcp a PING queued behind a slow NIC's data, or lost and sent again after
 * TCP's retransmission timeout (1 s, then 2 s, on a young connection), is
 * late, not gone; a rail taken out while it still carries data costs every
 * message without a rail in flight on it (its call fails).  The default
 * stall time outlasts two such timeouts; a rail that comes back was slow or
 * briefly down, and is given longer next time.
 *
 * Striped transfers use a rail only while it is not out.  A message
 * without a rail (point-to-point, agreements, small transfers) goes on the
 * sender's rail until that rail has been out once to the peer's node,
 * then for good on the next rail that never was: both ends apply the same
 * rule to the same history, and a message sent on a rail just before it
 * went out can only be lost (its call fails as today), never taken by a
 * later receive, since no message without a rail uses that rail again. */
#include "config.h"

#include <net/if.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/clock.h"
#include "src/common/log.h"
#include "src/common/status.h"
#include "transport/ucx/ucx_internal.h"

#define ZC_UCX_AM_RAIL 7           /* the active message id of rail messages */
#define ZC_UCX_RAILS_LOOK_MS 10    /* probe deadlines and periods are looked at this often */

typedef enum {
    ZC_UCX_AM_PING = 1,   /* is `rail` alive? answer on `via` */
    ZC_UCX_AM_PONG,       /* the answer, on `via` */
    ZC_UCX_AM_OUT,        /* `rail` between node_a and node_b is out */
    ZC_UCX_AM_BACK,       /* it is back */
    ZC_UCX_AM_SUSPECT,    /* (local) UCX reported an error on `rail` to `src` */
    ZC_UCX_AM_QUERY,      /* did you receive transfer `key` from me whole? */
    ZC_UCX_AM_ANSWER      /* node_a: 1 yes, 0 no */
} zc_ucx_am_type_t;

static zc_ucx_rail_t *zc_ucx_rail(zc_transport_t *tp, int rail, int node)
{
    return &tp->rails[(size_t)rail * (size_t)tp->nnodes + (size_t)node];
}

/* ---- endpoints ------------------------------------------------------------ */

int zc_ucx_lane_reaches(const zc_transport_t *tp, int l, int r)
{
    const zc_transport_world_t *w = &tp->w;

    if (l == tp->split_lane)
        return r != w->rank && w->peer_watchable(w->peer_ctx, r);
    return w->nrails == 0 || (l == 0) == (w->rank_node[r] == w->node);
}

static void zc_ucx_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    zc_ucx_conn_t *conn = arg;
    zc_transport_t *tp = conn->tp;

    if (ep != conn->ep)
        return;  /* an endpoint closed and replaced since */
    if (conn->probe) {
        conn->failed = 1;  /* connected again when the rail's link is up */
        return;
    }
    /* Waits turn this into ZC_ERR_PEER_FAILED with a detail; a peer that
     * destroyed its communicator first also breaks the link, so this is
     * no warning by itself. */
    if (!conn->failed && !conn->closing) {
        zc_log_info("ucx: connection to rank %d on the %s lane failed: %s", conn->peer,
                    tp->lanes[conn->lane].name, ucs_status_string(status));
        zc_ucx_note_peer_failure();
        /* On a rail: the rail or the peer?  Asked from the next progress
         * (no sending inside UCX's callback). */
        if (conn->lane >= 1 && conn->lane <= tp->w.nrails &&
            tp->am_head - tp->am_tail < ZC_UCX_AM_EVENTS) {
            zc_ucx_am_msg_t *ev = &tp->am_events[tp->am_head++ % ZC_UCX_AM_EVENTS];
            memset(ev, 0, sizeof(*ev));
            ev->type = ZC_UCX_AM_SUSPECT;
            ev->rail = (uint8_t)(conn->lane - 1);
            ev->src = conn->peer;
            snprintf(ev->why, sizeof(ev->why), "ucx error: %s", ucs_status_string(status));
        }
    }
    conn->failed = 1;
}

/* A new endpoint of `conn` from the kept address table. */
static zc_status_t zc_ucx_ep_create(zc_transport_t *tp, zc_ucx_conn_t *conn)
{
    const zc_transport_world_t *w = &tp->w;
    int l = conn->lane, r = conn->peer;
    ucp_ep_params_t ep_params = {0};

    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address = (const ucp_address_t *)(tp->addrs[l] + tp->addr_stride[l] * (size_t)r);
    /* Peer-failure handling keeps UCX off its single-copy shared memory
     * path (cma), which measured 4x slower on a 2-core test machine; peers
     * on this host in this pid namespace are watched through their pid
     * instead (see zc_comm_peer_failed), so only the others need it. */
    ep_params.err_mode = w->peer_watchable(w->peer_ctx, r) ? UCP_ERR_HANDLING_MODE_NONE
                                                          : UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb = zc_ucx_ep_error;
    ep_params.err_handler.arg = conn;
    conn->failed = conn->closing = conn->abandoned = 0;
    ucs_status_t us = ucp_ep_create(tp->lanes[l].worker, &ep_params, &conn->ep);
    if (us != UCS_OK) {
        conn->ep = NULL;
        /* a connection that cannot be made again is as broken as the one
         * it replaces: zc_ucx_peer_failed counts it */
        conn->failed = 1;
        /* UCX's unreachable (connecting again to a rank that is gone) is
         * the peer's failure */
        return zc_error(zc_ucx_status(us) == ZC_ERR_PEER_FAILED ? ZC_ERR_PEER_FAILED
                                                                : ZC_ERR_TRANSPORT,
                        "ucx: %s lane: cannot connect to rank %d: %s", tp->lanes[l].name, r,
                        ucs_status_string(us));
    }
    return ZC_OK;
}

/* Close `conn`'s endpoint by force: UCX cancels what it holds on it. */
static void zc_ucx_ep_drop(zc_ucx_conn_t *conn)
{
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucp_ep_h ep = conn->ep;

    if (!ep)
        return;
    conn->closing = 1;
    conn->ep = NULL;
    ucs_status_ptr_t sp = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(sp))
        ucp_request_free(sp);  /* UCX finishes the close on its own */
}

/* Whether this node's end of `rail` is up: every network interface its
 * devices name (UCX_NET_DEVICES syntax; verbs ports have a ':') is up and
 * running.  A connection UCX opens over a link that is down blocks the
 * process for seconds (the kernel's neighbour discovery), so a rail is not
 * probed while it is. */
static int zc_ucx_rail_link_up(const zc_transport_t *tp, int rail)
{
    char devs[ZC_UCX_DEVICES_LEN], *save = NULL;
    int fd, up = 1;

    if (!tp->w.rail_devices[rail] || (fd = socket(AF_INET, SOCK_DGRAM, 0)) < 0)
        return 1;
    snprintf(devs, sizeof(devs), "%s", tp->w.rail_devices[rail]);
    for (char *d = strtok_r(devs, ",", &save); d && up; d = strtok_r(NULL, ",", &save)) {
        struct ifreq ifr;
        if (strchr(d, ':') || strlen(d) >= sizeof(ifr.ifr_name))
            continue;
        memset(&ifr, 0, sizeof(ifr));
        memcpy(ifr.ifr_name, d, strlen(d));
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
            up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
    }
    close(fd);
    return up;
}

static int zc_ucx_conn_intact(const zc_ucx_conn_t *conn)
{
    return conn->ep && !conn->failed;
}

/* `conn` connected again if it was closed or failed; not over a rail whose
 * link is down here (a connection UCX opens over it blocks the process for
 * seconds, the kernel's neighbour discovery). */
static zc_status_t zc_ucx_conn_renew(zc_transport_t *tp, zc_ucx_conn_t *conn)
{
    if (zc_ucx_conn_intact(conn))
        return ZC_OK;
    if (conn->lane >= 1 && conn->lane <= tp->w.nrails &&
        !zc_ucx_rail_link_up(tp, conn->lane - 1))
        return zc_error(ZC_ERR_PEER_FAILED, "rail %d: the link of this node is down",
                        conn->lane - 1);
    zc_ucx_ep_drop(conn);
    return zc_ucx_ep_create(tp, conn);
}

zc_status_t zc_ucx_conn_usable(zc_transport_t *tp, int lane, int peer, zc_ucx_conn_t **out)
{
    zc_ucx_conn_t *conn = zc_ucx_conn(tp, lane, peer);

    if (!zc_ucx_lane_reaches(tp, lane, peer))
        return zc_error(ZC_ERR_UNSUPPORTED, "rank %d has no endpoint on the %s lane", peer,
                        tp->lanes[lane].name);
    ZC_CHECK(zc_ucx_conn_renew(tp, conn));
    *out = conn;
    return ZC_OK;
}

zc_status_t zc_ucx_control_usable(zc_transport_t *tp, int lane, int peer, zc_ucx_conn_t **out)
{
    zc_ucx_conn_t *conn = zc_ucx_probe_conn(tp, lane, peer);

    ZC_CHECK(zc_ucx_conn_renew(tp, conn));
    *out = conn;
    return ZC_OK;
}

/* Allgather of one lane's worker addresses, padded to the longest. */
static zc_status_t zc_ucx_exchange_addresses(zc_transport_t *tp, zc_ucx_lane_t *lane,
                                             char **table_out, size_t *stride_out)
{
    ucp_address_t *addr;
    size_t addr_len;
    uint64_t my_len, max_len = 0, *lens;
    char *mine = NULL, *table = NULL;
    int n = tp->w.size;
    ucs_status_t us;
    zc_status_t st;

    us = ucp_worker_get_address(lane->worker, &addr, &addr_len);
    if (us != UCS_OK)
        return zc_error(ZC_ERR_TRANSPORT, "ucx: %s lane: cannot get the worker address: %s",
                        lane->name, ucs_status_string(us));
    lens = malloc(sizeof(uint64_t) * (size_t)n);
    if (!lens) {
        st = zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the address lengths");
        goto out;
    }
    my_len = addr_len;
    ZC_CHECK_GOTO(tp->w.allgather(tp->w.allgather_ctx, &my_len, lens, sizeof(my_len)), st, out);
    for (int r = 0; r < n; r++)
        max_len = lens[r] > max_len ? lens[r] : max_len;
    if (max_len > tp->w.allgather_max) {
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
    ZC_CHECK_GOTO(tp->w.allgather(tp->w.allgather_ctx, mine, table, max_len), st, out);
    *table_out = table;
    *stride_out = max_len;
    table = NULL;
out:
    free(table);
    free(mine);
    free(lens);
    ucp_worker_release_address(lane->worker, addr);
    return st;
}

zc_status_t zc_ucx_connect_lane(zc_transport_t *tp, int l)
{
    ZC_CHECK(zc_ucx_exchange_addresses(tp, &tp->lanes[l], &tp->addrs[l], &tp->addr_stride[l]));
    for (int r = 0; r < tp->w.size; r++) {
        if (!zc_ucx_lane_reaches(tp, l, r))
            continue;
        ZC_CHECK(zc_ucx_ep_create(tp, zc_ucx_conn(tp, l, r)));
        if (l >= 1 && l <= tp->w.nrails)
            ZC_CHECK(zc_ucx_ep_create(tp, zc_ucx_probe_conn(tp, l, r)));
    }
    return ZC_OK;
}

/* ---- rail messages -------------------------------------------------------- */

static ucs_status_t zc_ucx_am_cb(void *arg, const void *header, size_t header_length, void *data,
                                 size_t length, const ucp_am_recv_param_t *param)
{
    zc_transport_t *tp = ((zc_ucx_am_lane_t *)arg)->tp;

    (void)data;
    (void)length;
    (void)param;
    /* handled by the next progress, outside UCX's callback */
    if (header_length == sizeof(zc_ucx_am_msg_t) &&
        tp->am_head - tp->am_tail < ZC_UCX_AM_EVENTS)
        memcpy(&tp->am_events[tp->am_head++ % ZC_UCX_AM_EVENTS], header,
               sizeof(zc_ucx_am_msg_t));
    return UCS_OK;
}

/* A rail message UCX finished sending: its copy goes. */
static void zc_ucx_am_sent(void *request, ucs_status_t status, void *copy)
{
    (void)status;
    free(copy);
    ucp_request_free(request);
}

/* Send `msg` to `peer` on `lane`, without waiting for it: on a rail over
 * the rail messages' own endpoint.  UCX may read the header after the
 * call returns (this UCX cannot be told to copy it), so it sends a copy
 * that lives until the send is done. */
static zc_status_t zc_ucx_am_send(zc_transport_t *tp, int lane, int peer, zc_ucx_am_msg_t *msg)
{
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS |
                                                 UCP_OP_ATTR_FIELD_CALLBACK |
                                                 UCP_OP_ATTR_FIELD_USER_DATA,
                                 .flags = UCP_AM_SEND_FLAG_EAGER};
    zc_ucx_conn_t *conn;
    zc_ucx_am_msg_t *copy;

    if (lane >= 1 && lane <= tp->w.nrails) {
        ZC_CHECK(zc_ucx_control_usable(tp, lane, peer, &conn));
    } else {
        ZC_CHECK(zc_ucx_conn_usable(tp, lane, peer, &conn));
    }
    msg->src = tp->w.rank;
    if (!(copy = malloc(sizeof(*copy))))
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate a rail message");
    *copy = *msg;
    param.cb.send = zc_ucx_am_sent;
    param.user_data = copy;
    ucs_status_ptr_t sp = ucp_am_send_nbx(conn->ep, ZC_UCX_AM_RAIL, copy, sizeof(*copy), NULL, 0,
                                          &param);
    if (UCS_PTR_IS_ERR(sp)) {
        free(copy);
        return zc_error(ZC_ERR_PEER_FAILED, "ucx: a rail message to rank %d on the %s lane: %s",
                        peer, tp->lanes[lane].name, ucs_status_string(UCS_PTR_STATUS(sp)));
    }
    if (!sp)
        free(copy);  /* sent in place; else zc_ucx_am_sent frees it */
    return ZC_OK;
}

/* The lane a rail message to `peer` takes: inside the node lane 0, else
 * the rail messages without one take. */
static int zc_ucx_notice_lane(zc_transport_t *tp, int peer)
{
    return tp->w.rank_node[peer] == tp->w.node ? 0 : 1 + zc_ucx_auto_rail(tp, peer, 1);
}

/* Tell every rank of this node and of `node` (but this one) that `rail`
 * between them went out or came back. */
static void zc_ucx_rail_tell(zc_transport_t *tp, zc_ucx_am_type_t type, int rail, int node,
                             const char *why)
{
    zc_ucx_am_msg_t msg = {.type = (uint8_t)type, .rail = (uint8_t)rail,
                           .node_a = tp->w.node, .node_b = node};

    snprintf(msg.why, sizeof(msg.why), "%s", why);
    for (int r = 0; r < tp->w.size; r++) {
        int n = tp->w.rank_node[r];
        if (r == tp->w.rank || (n != node && n != tp->w.node))
            continue;
        if (zc_ucx_am_send(tp, zc_ucx_notice_lane(tp, r), r, &msg) != ZC_OK)
            zc_log_debug("ucx: cannot tell rank %d that rail %d to node %d %s", r, rail, node,
                         type == ZC_UCX_AM_OUT ? "is out" : "is back");
    }
}

/* Notice `m` (from another node) again to the other ranks of this node. */
static void zc_ucx_rail_tell_node(zc_transport_t *tp, const zc_ucx_am_msg_t *m)
{
    zc_ucx_am_msg_t msg = *m;

    for (int r = 0; r < tp->w.size; r++)
        if (r != tp->w.rank && tp->w.rank_node[r] == tp->w.node &&
            zc_ucx_am_send(tp, 0, r, &msg) != ZC_OK)
            zc_error_clear();
}

static void zc_ucx_probe_end(zc_transport_t *tp, int rail, zc_ucx_probe_t *p)
{
    if (!p->active)
        return;
    p->active = 0;
    tp->pending[1 + rail]--;
    if (p->via >= 0)
        tp->pending[1 + p->via]--;
}

/* Rail `rail` to `node` goes out: its endpoints there close. */
static void zc_ucx_rail_out(zc_transport_t *tp, int rail, int node, const char *why)
{
    zc_ucx_rail_t *r = zc_ucx_rail(tp, rail, node);

    if (r->out)
        return;
    zc_ucx_probe_end(tp, rail, &r->probe);
    r->out = r->ever_out = 1;
    r->next_probe_ms = zc_now_ms() + tp->w.rail_probe_ms;
    for (int p = 0; p < tp->w.size; p++)
        if (tp->w.rank_node[p] == node)
            zc_ucx_ep_drop(zc_ucx_conn(tp, 1 + rail, p));
    zc_ucx_note_peer_failure();  /* UCX's error lines about it are consequences */
    zc_log_info("rail %d to node %d out: %s", rail, node, why);
}

static int zc_ucx_patience_ms(const zc_transport_t *tp, const zc_ucx_rail_t *r)
{
    return r->patience_ms > tp->w.rail_stall_ms ? r->patience_ms : tp->w.rail_stall_ms;
}

static void zc_ucx_rail_back(zc_transport_t *tp, int rail, int node, const char *why)
{
    zc_ucx_rail_t *r = zc_ucx_rail(tp, rail, node);
    int cap = tp->w.timeout_ms / 4, longer = 2 * zc_ucx_patience_ms(tp, r);

    if (!r->out)
        return;
    r->out = 0;
    r->patience_ms = longer < cap ? longer : cap;
    /* The control connections the outage broke are made again now that
     * the node answers on it: a probe does not make them (zc_ucx_rail_suspect). */
    for (int p = 0; p < tp->w.size; p++)
        if (tp->w.rank_node[p] == node &&
            zc_ucx_conn_renew(tp, zc_ucx_probe_conn(tp, 1 + rail, p)) != ZC_OK)
            zc_error_clear();
    zc_log_info("rail %d to node %d back: %s", rail, node, why);
}

void zc_ucx_rail_suspect(zc_transport_t *tp, int rail, int peer, int after_error,
                         const char *why)
{
    int node = tp->w.rank_node[peer];
    zc_ucx_rail_t *r = zc_ucx_rail(tp, rail, node);
    zc_ucx_probe_t *p = &r->probe;
    zc_ucx_am_msg_t ping = {.type = ZC_UCX_AM_PING, .rail = (uint8_t)rail};
    int via = -1, others = 0;

    if (r->out || p->active || node == tp->w.node)
        return;
    /* A probe asks over the control connections as they are: one that UCX
     * broke is not made again here, since its peer may be leaving, and
     * UCX 1.13 aborts a process whose blocking connect meets a peer closing
     * its sockets (tcp_ep.c:478), or may reach whichever process took a
     * dead peer's port.  They are made again where the rail is the cause:
     * asking a rail held out whether it is back, and once it is. */
    for (int k = 1; k < tp->w.nrails; k++) {
        int j = (rail + k) % tp->w.nrails;
        if (zc_ucx_rail(tp, j, node)->out)
            continue;
        others++;
        if (via < 0 && zc_ucx_conn_intact(zc_ucx_probe_conn(tp, 1 + j, peer)))
            via = j;
    }
    if (others == 0)
        return;  /* no other rail to that node: nothing to fail over to */
    if (via < 0) {
        /* its connections broke on every other rail too: the peer, not
         * the rail */
        if (after_error && !tp->peer_dead[peer]) {
            tp->peer_dead[peer] = 1;
            zc_log_info("rank %d is gone: %s on rail %d, and its control connections on "
                        "every other rail broke", peer, why, rail);
        }
        return;
    }
    *p = (zc_ucx_probe_t){.active = 1, .peer = peer, .via = via, .nonce = ++tp->next_nonce,
                          .answered_rail = 0, .answered_via = 0, .after_error = after_error,
                          .deadline_ms = zc_now_ms() + zc_ucx_patience_ms(tp, r)};
    snprintf(p->why, sizeof(p->why), "%s", why);
    tp->pending[1 + rail]++;
    tp->pending[1 + via]++;
    ping.nonce = p->nonce;
    ping.via = (uint8_t)via;
    if (zc_ucx_am_send(tp, 1 + via, peer, &ping) != ZC_OK)
        zc_error_clear();  /* no answer comes: the deadline decides */
    ping.via = (uint8_t)rail;
    if (zc_ucx_conn_intact(zc_ucx_probe_conn(tp, 1 + rail, peer)) &&
        zc_ucx_am_send(tp, 1 + rail, peer, &ping) != ZC_OK)
        zc_error_clear();
    zc_log_debug("rail %d to rank %d suspect (%s): asking on rails %d and %d", rail, peer, why,
                 rail, via);
}

/* A probe's deadline passed, or the rail itself answered. */
static int zc_ucx_probe_settle(zc_transport_t *tp, int rail, int node)
{
    zc_ucx_rail_t *r = zc_ucx_rail(tp, rail, node);
    zc_ucx_probe_t p = r->probe;
    char why[ZC_UCX_WHY_LEN * 2];

    zc_ucx_probe_end(tp, rail, &r->probe);
    if (p.answered_rail) {
        zc_log_debug("rail %d to rank %d answers: slow, not out (%s)", rail, p.peer, p.why);
        return 0;
    }
    if (p.answered_via) {
        snprintf(why, sizeof(why), "%s; rank %d answers on rail %d", p.why, p.peer, p.via);
        zc_ucx_rail_out(tp, rail, node, why);
        zc_ucx_rail_tell(tp, ZC_UCX_AM_OUT, rail, node, why);
        return 1;
    }
    if (p.after_error) {
        tp->peer_dead[p.peer] = 1;
        zc_log_info("rank %d is gone: %s on rail %d, and no answer on rail %d", p.peer, p.why,
                    rail, p.via);
    }
    return 0;
}

/* A PONG: the answer to a probe, or a rail held out answering. */
static void zc_ucx_pong(zc_transport_t *tp, const zc_ucx_am_msg_t *m)
{
    int node = tp->w.rank_node[m->src];
    zc_ucx_rail_t *r = zc_ucx_rail(tp, m->rail, node);
    char why[64];

    if (r->out && m->nonce == r->back_nonce && m->via == m->rail) {
        snprintf(why, sizeof(why), "rank %d answered a probe on it", m->src);
        zc_ucx_rail_back(tp, m->rail, node, why);
        zc_ucx_rail_tell(tp, ZC_UCX_AM_BACK, m->rail, node, why);
        tp->pending[1 + m->rail]--;
        r->back_nonce = 0;
    } else if (r->probe.active && m->nonce == r->probe.nonce) {
        if (m->via == m->rail)
            r->probe.answered_rail = 1;
        else
            r->probe.answered_via = 1;
    }
}

/* ---- the ends of striped transfers --------------------------------------- */

void zc_ucx_xfer_done(zc_transport_t *tp, int peer, uint64_t key)
{
    unsigned i = tp->done_next++ % ZC_UCX_DONE_RING;

    tp->done_ring[i].peer = peer;
    tp->done_ring[i].key = key;
}

/* A sender asks whether this rank received its transfer whole. */
static void zc_ucx_xfer_answer(zc_transport_t *tp, const zc_ucx_am_msg_t *m)
{
    zc_ucx_am_msg_t answer = {.type = ZC_UCX_AM_ANSWER, .key = m->key};
    unsigned n = tp->done_next < ZC_UCX_DONE_RING ? tp->done_next : ZC_UCX_DONE_RING;

    for (unsigned i = 0; i < n && !answer.node_a; i++)
        answer.node_a = tp->done_ring[i].peer == m->src && tp->done_ring[i].key == m->key;
    if (zc_ucx_am_send(tp, zc_ucx_notice_lane(tp, m->src), m->src, &answer) != ZC_OK)
        zc_error_clear();
}

static void zc_ucx_xfer_ask(zc_transport_t *tp, int q, int peer, uint64_t key, int64_t now)
{
    zc_ucx_am_msg_t ask = {.type = ZC_UCX_AM_QUERY, .key = key};

    tp->queries[q].peer = peer;
    tp->queries[q].key = key;
    tp->queries[q].answer = -1;
    tp->queries[q].asked_ms = now;
    if (zc_ucx_am_send(tp, zc_ucx_notice_lane(tp, peer), peer, &ask) != ZC_OK)
        zc_error_clear();
}

int zc_ucx_xfer_query(zc_transport_t *tp, int peer, uint64_t key)
{
    int64_t now = zc_now_ms();
    int free_q = -1;

    for (int q = 0; q < ZC_UCX_QUERIES; q++) {
        if (tp->queries[q].peer == peer && tp->queries[q].key == key) {
            int answer = tp->queries[q].answer;
            if (answer == 1)
                tp->queries[q].peer = -1;
            else if (now - tp->queries[q].asked_ms > tp->w.rail_stall_ms)
                zc_ucx_xfer_ask(tp, q, peer, key, now);  /* no, or no answer: ask again */
            return answer;
        }
        if (tp->queries[q].peer < 0 || now - tp->queries[q].asked_ms > tp->w.timeout_ms)
            free_q = q;
    }
    if (free_q >= 0)
        zc_ucx_xfer_ask(tp, free_q, peer, key, now);
    return -1;
}

/* One rail message; non-zero when a rail went out. */
static int zc_ucx_rail_message(zc_transport_t *tp, const zc_ucx_am_msg_t *m)
{
    const zc_transport_world_t *w = &tp->w;
    zc_ucx_am_msg_t pong;
    char why[ZC_UCX_WHY_LEN * 2];
    int other;

    if (m->src < 0 || m->src >= w->size || m->rail >= w->nrails || m->via >= w->nrails)
        return 0;
    zc_log_debug("rail message %d about rail %d from rank %d", m->type, m->rail, m->src);
    /* questions about transfers need no rail (rail 0 is always in range) */
    switch (m->type) {
    case ZC_UCX_AM_PING:
        pong = *m;
        pong.type = ZC_UCX_AM_PONG;
        if (zc_ucx_am_send(tp, 1 + m->via, m->src, &pong) != ZC_OK)
            zc_error_clear();
        return 0;
    case ZC_UCX_AM_PONG:
        zc_ucx_pong(tp, m);
        return 0;
    case ZC_UCX_AM_SUSPECT:
        zc_ucx_rail_suspect(tp, m->rail, m->src, 1, m->why);
        return 0;
    case ZC_UCX_AM_QUERY:
        zc_ucx_xfer_answer(tp, m);
        return 0;
    case ZC_UCX_AM_ANSWER:
        for (int q = 0; q < ZC_UCX_QUERIES; q++)
            if (tp->queries[q].peer == m->src && tp->queries[q].key == m->key)
                tp->queries[q].answer = m->node_a == 1;
        return 0;
    case ZC_UCX_AM_OUT:
    case ZC_UCX_AM_BACK:
        if (m->node_a < 0 || m->node_a >= tp->nnodes || m->node_b < 0 ||
            m->node_b >= tp->nnodes || (m->node_a != w->node && m->node_b != w->node))
            return 0;
        other = m->node_a == w->node ? m->node_b : m->node_a;
        snprintf(why, sizeof(why), "rank %d saw: %s", m->src, m->why);
        if ((m->type == ZC_UCX_AM_BACK) != zc_ucx_rail(tp, m->rail, other)->out)
            return 0;  /* known already */
        /* A notice from another node came over a rail: this node's other
         * ranks hear it again over shared memory, in case theirs was lost
         * (a rank told twice ignores the second). */
        if (w->rank_node[m->src] != w->node)
            zc_ucx_rail_tell_node(tp, m);
        if (m->type == ZC_UCX_AM_BACK) {
            zc_ucx_rail_back(tp, m->rail, other, why);
            return 0;
        }
        zc_ucx_rail_out(tp, m->rail, other, why);
        return 1;
    }
    return 0;
}

/* Ask a rank of `node` on `rail`, held out, whether it is back. */
static void zc_ucx_rail_ask_back(zc_transport_t *tp, int rail, int node, int64_t now)
{
    zc_ucx_rail_t *r = zc_ucx_rail(tp, rail, node);
    zc_ucx_am_msg_t ping = {.type = ZC_UCX_AM_PING, .rail = (uint8_t)rail, .via = (uint8_t)rail};
    int members = 0, pick;

    r->next_probe_ms = now + tp->w.rail_probe_ms;
    if (!zc_ucx_rail_link_up(tp, rail))
        return;
    for (int p = 0; p < tp->w.size; p++)
        members += tp->w.rank_node[p] == node;
    pick = r->probe_turn++ % members;
    for (int p = 0; p < tp->w.size; p++) {
        if (tp->w.rank_node[p] != node || pick-- != 0)
            continue;
        /* the one before goes unanswered: a fresh question */
        if (!r->back_nonce)
            tp->pending[1 + rail]++;
        r->back_nonce = ping.nonce = ++tp->next_nonce;
        if (zc_ucx_am_send(tp, 1 + rail, p, &ping) != ZC_OK)
            zc_error_clear();
        return;
    }
}

int zc_ucx_rails_progress(zc_transport_t *tp)
{
    int64_t now;
    int moved = 0;

    while (tp->am_tail != tp->am_head)
        moved |= zc_ucx_rail_message(tp, &tp->am_events[tp->am_tail++ % ZC_UCX_AM_EVENTS]);
    if (tp->w.nrails == 0 || (now = zc_now_ms()) < tp->next_rails_look_ms)
        return moved;
    tp->next_rails_look_ms = now + ZC_UCX_RAILS_LOOK_MS;
    for (int k = 0; k < tp->w.nrails; k++) {
        for (int n = 0; n < tp->nnodes; n++) {
            zc_ucx_rail_t *r = zc_ucx_rail(tp, k, n);
            if (r->probe.active && (r->probe.answered_rail || now >= r->probe.deadline_ms))
                moved |= zc_ucx_probe_settle(tp, k, n);
            if (r->out && now >= r->next_probe_ms)
                zc_ucx_rail_ask_back(tp, k, n, now);
        }
    }
    return moved;
}

/* ---- the rail of each message --------------------------------------------- */

int zc_ucx_rail_live(zc_transport_t *tp, int rail, int peer)
{
    return !zc_ucx_rail(tp, rail, tp->w.rank_node[peer])->out;
}

int zc_ucx_rail_unsafe_to_close(zc_transport_t *tp, int rail)
{
    for (int k = 0; k < tp->w.nrails; k++)
        for (int n = 0; n < tp->nnodes; n++)
            if (zc_ucx_rail(tp, k, n)->ever_out)
                return 1;
    return !zc_ucx_rail_link_up(tp, rail);
}

uint32_t zc_ucx_rails_out(zc_transport_t *tp)
{
    uint32_t out = 0;

    for (int k = 0; k < tp->w.nrails; k++)
        for (int n = 0; n < tp->nnodes; n++)
            out |= zc_ucx_rail(tp, k, n)->out ? 1u << k : 0;
    return out;
}

int zc_ucx_auto_rail(zc_transport_t *tp, int peer, int sending)
{
    const zc_transport_world_t *w = &tp->w;
    int home = w->rank_rail[sending ? w->rank : peer], node = w->rank_node[peer];

    if (!zc_ucx_rail(tp, home, node)->ever_out)
        return home;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 1; k < w->nrails; k++) {
            const zc_ucx_rail_t *r = zc_ucx_rail(tp, (home + k) % w->nrails, node);
            if (!r->out && (pass == 1 || !r->ever_out))
                return (home + k) % w->nrails;
        }
    return home;
}

int zc_ucx_peer_dead(zc_transport_t *tp, int peer)
{
    return tp->peer_dead && tp->peer_dead[peer];
}

/* ---- setup ------------------------------------------------------------------ */

zc_status_t zc_ucx_rails_init(zc_transport_t *tp)
{
    const zc_transport_world_t *w = &tp->w;

    for (int r = 0; r < w->size; r++)
        tp->nnodes = w->rank_node[r] + 1 > tp->nnodes ? w->rank_node[r] + 1 : tp->nnodes;
    tp->rails = calloc((size_t)(w->nrails ? w->nrails : 1) * (size_t)tp->nnodes,
                       sizeof(*tp->rails));
    tp->peer_dead = calloc((size_t)w->size, sizeof(int));
    tp->done_ring = w->nrails ? calloc(ZC_UCX_DONE_RING, sizeof(*tp->done_ring)) : NULL;
    if (!tp->rails || !tp->peer_dead || (w->nrails && !tp->done_ring))
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the rail state");
    for (int q = 0; q < ZC_UCX_QUERIES; q++)
        tp->queries[q].peer = -1;
    for (int l = 0; l < tp->nlanes; l++) {
        ucp_am_handler_param_t param = {0};
        if (l == tp->split_lane)
            continue;
        tp->am_lane[l] = (zc_ucx_am_lane_t){tp, l};
        param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                           UCP_AM_HANDLER_PARAM_FIELD_ARG;
        param.id = ZC_UCX_AM_RAIL;
        param.cb = zc_ucx_am_cb;
        param.arg = &tp->am_lane[l];
        ucs_status_t us = ucp_worker_set_am_recv_handler(tp->lanes[l].worker, &param);
        if (us != UCS_OK)
            return zc_error(ZC_ERR_TRANSPORT, "ucx: %s lane: cannot set the rail messages' "
                            "handler: %s", tp->lanes[l].name, ucs_status_string(us));
    }
    return ZC_OK;
}

void zc_ucx_rails_fini(zc_transport_t *tp)
{
    for (int l = 0; l < ZC_UCX_MAX_LANES; l++)
        free(tp->addrs[l]);
    free(tp->rails);
    free(tp->peer_dead);
    free(tp->done_ring);
}
