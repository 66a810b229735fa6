/* Transfers of a zc_ring_attn call: direct sends and receives with
 * ZC_TAG_CLASS_RING tags, the routed calls of inter-node hops, and the
 * progress that moves them while the kernels compute.
 *
 * The UCX workers are single-threaded and the CPU kernels occupy the
 * caller's thread, so transfers progress between kernel calls:
 * src/coll/ring_attn/compute.c cuts a block into slices of ZC_RING_ATTN_SLICE_MFLOP
 * while anything is in flight and calls zc_ra_progress between them.  A
 * rank waits only when the data of its next step has not arrived; that
 * time is the exposed communication of the stats.
 *
 * Routed calls go out in the list order fixed by src/coll/ring_attn/groups.c, at
 * most ZC_RA_ROUTED_WINDOW at once: a call this rank only forwards for (or
 * has no part in) is posted as soon as the window allows, one it sends or
 * receives in once the ring pipeline hands it its buffers. */
#include "config.h"

#include <stdlib.h>

#include "src/common/clock.h"
#include "src/core/p2p.h"
#include "src/coll/ring_attn/ring_attn.h"
#include "src/coll/routed/route.h"
#include "src/common/status.h"

/* A blocked wait sleeps on the transport's events at most this long, so a
 * completion handled inside the transport's own progress is seen soon. */
#define ZC_RA_WAIT_SLICE_MS 1

uint64_t zc_ra_tag(const zc_ra_ctx_t *ctx, int sender, zc_ra_kind_t kind, int step, int group)
{
    /* call sequence, kind, step, group; wrap-around is harmless because
     * messages between two ranks match in posting order */
    uint32_t low = (ctx->seq & 0xffu) << 24 | ((uint32_t)kind & 0xfu) << 20 |
                   ((uint32_t)step & 0xffu) << 12 | ((uint32_t)group & 0xfffu);
    return ZC_TAG(sender, ZC_TAG_CLASS_RING, low);
}

static zc_status_t zc_ra_track(zc_ra_ctx_t *ctx, zc_request_h req, int *pending, int routed)
{
    if (ctx->nitems == ctx->cap_items) {
        int cap = ctx->cap_items ? 2 * ctx->cap_items : 16;
        zc_ra_item_t *items = realloc(ctx->items, (size_t)cap * sizeof(*items));

        if (!items) {
            zc_p2p_abandon(&req, ZC_ERR_NO_MEMORY);
            ctx->sends_abandoned = 1;
            return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot track %d requests", cap);
        }
        ctx->items = items;
        ctx->cap_items = cap;
    }
    ctx->items[ctx->nitems++] = (zc_ra_item_t){.req = req, .pending = pending, .routed = routed};
    return ZC_OK;
}

zc_status_t zc_ra_post(zc_ra_ctx_t *ctx, zc_ra_xchg_t *x, zc_request_kind_t dir, void *buf,
                       size_t bytes, int peer, zc_ra_kind_t kind, int step, int group)
{
    int sender = dir == ZC_REQ_SEND ? ctx->comm->rank : peer;
    zc_request_h req;

    if (bytes == 0)
        return ZC_OK;
    ZC_CHECK(zc_p2p_post(ctx->comm, dir, buf, bytes, peer,
                         zc_ra_tag(ctx, sender, kind, step, group), ZC_RAIL_AUTO, &req));
    ZC_CHECK(zc_ra_track(ctx, req, &x->pending, -1));
    x->pending++;
    if (dir == ZC_REQ_SEND)
        ctx->stats.bytes_sent += bytes;
    return ZC_OK;
}

/* Post the routed calls that may go, in list order. */
static zc_status_t zc_ra_pump(zc_ra_ctx_t *ctx)
{
    while (ctx->routed_next < ctx->nrouted && ctx->routed_inflight < ZC_RA_ROUTED_WINDOW &&
           ctx->routed[ctx->routed_next].ready) {
        zc_ra_routed_t *c = &ctx->routed[ctx->routed_next];
        zc_request_h req;

        /* The lists come from the plan every rank agreed on (zc_ra_begin):
         * no agreement per call, which would also hold each call until
         * every rank has posted it. */
        ZC_CHECK(zc_routed_post(c->transfers, c->ntransfers, c->sendbuf, c->recvbuf, ZC_BYTE,
                                ZC_MEM_HOST, ctx->comm, ctx->rail_weights, &req));
        ZC_CHECK(zc_ra_track(ctx, req, c->notify, ctx->routed_next));
        ctx->routed_inflight++;
        ctx->routed_next++;
    }
    return ZC_OK;
}

zc_status_t zc_ra_hop(zc_ra_ctx_t *ctx, zc_ra_xchg_t *x, int gi, zc_ra_kind_t kind, int step,
                      int call, const void *sendbuf, size_t send_bytes, void *recvbuf,
                      size_t recv_bytes)
{
    const zc_ra_group_t *g = &ctx->groups[gi];
    int p = g->pos, G = g->G;
    int next = g->members[(p + 1) % G].rank, prev = g->members[(p + G - 1) % G].rank;
    int routed_out = g->routed[p] && send_bytes > 0;
    int routed_in = g->routed[(p + G - 1) % G] && recv_bytes > 0;

    if (routed_out || routed_in) {
        zc_ra_routed_t *c = call >= 0 ? &ctx->routed[call] : NULL;

        if (!c || !c->mine)
            return zc_error(ZC_ERR_INTERNAL, "ring attention: group %d step %d has no routed "
                            "call for rank %d", gi, step, ctx->comm->rank);
        c->sendbuf = routed_out ? sendbuf : NULL;
        c->recvbuf = routed_in ? recvbuf : NULL;
        c->notify = &x->pending;
        c->ready = 1;
        x->pending++;
        if (routed_out)
            ctx->stats.bytes_sent += send_bytes;
    }
    if (!routed_in)
        ZC_CHECK(zc_ra_post(ctx, x, ZC_REQ_RECV, recvbuf, recv_bytes, prev, kind, step, gi));
    if (!routed_out)
        ZC_CHECK(zc_ra_post(ctx, x, ZC_REQ_SEND, (void *)sendbuf, send_bytes, next, kind, step,
                            gi));
    return zc_ra_pump(ctx);
}

/* Test everything in flight once; *moved tells whether anything finished. */
static zc_status_t zc_ra_pass(zc_ra_ctx_t *ctx, int *moved)
{
    ZC_CHECK(zc_ra_pump(ctx));
    for (int i = 0; i < ctx->nitems;) {
        zc_ra_item_t *it = &ctx->items[i];
        zc_status_t st = zc_test(&it->req);

        if (st == ZC_INPROGRESS) {
            i++;
            continue;
        }
        /* zc_test released the request, whatever its status */
        if (it->pending)
            (*it->pending)--;
        if (it->routed >= 0)
            ctx->routed_inflight--;
        ctx->items[i] = ctx->items[--ctx->nitems];
        if (st != ZC_OK)
            return st;
        *moved = 1;
    }
    return *moved ? zc_ra_pump(ctx) : ZC_OK;
}

zc_status_t zc_ra_progress(zc_ra_ctx_t *ctx)
{
    int moved = 0;

    return zc_ra_pass(ctx, &moved);
}

int zc_ra_busy(const zc_ra_ctx_t *ctx)
{
    /* a routed call waiting for this rank's own later step needs nothing */
    return ctx->nitems > 0 ||
           (ctx->routed_next < ctx->nrouted && ctx->routed[ctx->routed_next].ready);
}

/* Every routed call posted and every request done. */
static int zc_ra_all_done(const zc_ra_ctx_t *ctx, const void *arg)
{
    (void)arg;
    return ctx->nitems == 0 && ctx->routed_next == ctx->nrouted;
}

/* Block until done() holds; the time is exposed communication. */
static zc_status_t zc_ra_wait_until(zc_ra_ctx_t *ctx,
                                    int (*done)(const zc_ra_ctx_t *, const void *),
                                    const void *arg)
{
    zc_comm_h comm = ctx->comm;
    double t0 = zc_now_sec();
    int64_t deadline = zc_now_ms() + comm->timeout_ms;
    zc_status_t st = ZC_OK;

    for (;;) {
        int moved = 0, left;

        ZC_CHECK_GOTO(zc_ra_pass(ctx, &moved), st, out);
        if (done(ctx, arg))
            break;
        if (moved) {
            deadline = zc_now_ms() + comm->timeout_ms;
            continue;
        }
        left = zc_ms_left(deadline);
        if (left == 0) {
            st = zc_error(ZC_ERR_TIMEOUT, "ring attention: rank %d made no progress for %d ms "
                          "(%d requests in flight, routed call %d of %d)", comm->rank,
                          comm->timeout_ms, ctx->nitems, ctx->routed_next, ctx->nrouted);
            goto out;
        }
        zc_comm_idle(comm, left < ZC_RA_WAIT_SLICE_MS ? left : ZC_RA_WAIT_SLICE_MS);
    }
out:
    ctx->stats.wait_seconds += zc_now_sec() - t0;
    return st;
}

static int zc_ra_xchg_done(const zc_ra_ctx_t *ctx, const void *arg)
{
    (void)ctx;
    return ((const zc_ra_xchg_t *)arg)->pending == 0;
}

zc_status_t zc_ra_wait(zc_ra_ctx_t *ctx, zc_ra_xchg_t *x)
{
    if (x->pending == 0)
        return ZC_OK;
    return zc_ra_wait_until(ctx, zc_ra_xchg_done, x);
}

zc_status_t zc_ra_drain(zc_ra_ctx_t *ctx)
{
    if (zc_ra_all_done(ctx, NULL))
        return ZC_OK;
    return zc_ra_wait_until(ctx, zc_ra_all_done, NULL);
}

void zc_ra_abandon(zc_ra_ctx_t *ctx)
{
    /* UCX may still read an abandoned send's buffer until the endpoint
     * closes: the caller keeps the staging memory alive */
    if (ctx->nitems > 0)
        ctx->sends_abandoned = 1;
    for (int i = 0; i < ctx->nitems; i++)
        zc_p2p_abandon(&ctx->items[i].req, ZC_ERR_INTERNAL);
    ctx->nitems = 0;
}
