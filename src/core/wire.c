/* A striped transfer between two ranks on different nodes (wire.h).
 *
 * Chunks.  The payload is cut into chunks of spec.chunk bytes; chunk c
 * travels as one message of a 16-byte header {magic, call sequence,
 * transfer id, c} followed by its bytes, tagged spec.tag + (c << shift).
 * The sender stages every chunk (a copy of the caller's buffer, or the
 * chunk a source rank dispatched to this proxy) and decides its rail alone:
 *   - a transfer with a home rail (a routed slice) sends there while it is
 *     not out (routed transfers stay rail-aligned); while the home rail
 *     lags far behind the rate its share was cut for (a NIC slowed
 *     mid-call: rail_rates.h, zc_rail_lagging), chunks that find no room
 *     there go on another rail, one at a time per rail, so that the call
 *     does not wait for the slow rail's whole share;
 *   - a transfer without one (an alltoallv block) sends each chunk on the
 *     rail that is not out whose unacknowledged bytes drain first at its
 *     rate: shares follow the rates chunk by chunk;
 *   - with pinned rates or ZC_RAIL_STRIPE=equal, chunk c has a fixed rail
 *     (a weighted round robin over the pinned or equal rates), so shares
 *     are exactly those, and nothing moves off a slow rail.
 * A rail that is out is never chosen.  The receiver listens on the rails
 * chunks may come on with receives whose tag leaves the chunk number free,
 * into staging of its own: it does not need to know which rail a chunk
 * takes.
 *
 * Acknowledgements.  The receiver answers every chunk it accepted, and
 * every copy it dropped, with {magic, sequence, id, c, rail} on the rail it
 * came on (the first rail not out if that one is out or cannot take it),
 * over that rail's control connection (ZC_P2P_CONTROL), so that it does
 * not queue behind data going the other way.  A send completes when
 * UCX took its bytes, not when they arrived, so the sender keeps a chunk's
 * staging until its acknowledgement: it alone can send it again.
 *
 * Failover.  A rail that takes a chunk and acknowledges nothing for
 * ZC_RAIL_STALL_MS, or whose endpoint UCX reports failed, is reported to
 * the transport, which probes it (transport/ucx/ucx_rails.c) and takes it
 * out if the peer answers on another rail.  Every chunk sent on a rail
 * that is out and not acknowledged goes again on the rails left, from its
 * staging; the receiver then listens on every rail not out.  With no rail
 * left to the node nothing moves, and the schedule fails as without rails
 * (ZC_ERR_TIMEOUT, or ZC_ERR_PEER_FAILED when the peer is gone).
 *
 * Exactly once.  The receiver keeps a bit per chunk: the first copy of a
 * chunk is copied into place (or sent on to the destination), later ones
 * only acknowledged again.  A chunk of another call that reaches a receive
 * by its tag (the routed tag holds 4 bits of the call sequence; a chunk
 * held up on a rail that later came back) fails the header's 32-bit
 * sequence and id, and is dropped.  Weights that change between calls
 * change only which rail each chunk takes, never the chunks themselves.
 *
 * Late completions.  No receive on a rail targets the caller's buffer, and
 * no send reads it: both ends stage.  A copy into place happens in the
 * caller's thread, before the task ends.  At the end the receiver cancels
 * the receives it still has posted; one UCX already matched (a copy coming
 * in) is waited for, or, once its rail is out, left to UCX, and its staging
 * with it: that staging is never freed (it lives until the process exits,
 * as the staging of any operation abandoned to UCX), so a late write lands
 * in memory nobody else uses.  The sender ends once every chunk is
 * acknowledged and UCX has finished every send (those on a rail that went
 * out finish as cancelled when the transport closed their endpoints).
 * A sender whose every chunk UCX has taken is handed (zc_wire_handed): a
 * schedule's message counts as sent from then on, and the wire, which
 * alone can send it again, lives on until its acknowledgement
 * (sched.c, zc_sched_linger_poll). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/clock.h"
#include "src/common/log.h"
#include "src/common/status.h"
#include "src/core/p2p.h"
#include "src/core/rail_rates.h"
#include "src/core/wire.h"

#define ZC_WIRE_MAGIC 0x5a435731u      /* "ZCW1": a chunk */
#define ZC_WIRE_ACK_MAGIC 0x5a434b31u  /* "ZCK1": its acknowledgement */
/* Unacknowledged chunks a sender keeps on a rail: on its home rail (the
 * routed transfer's window), and striped on the fastest rail (a slower
 * one in proportion to its rate, at least two: one in flight while the
 * other's acknowledgement comes back). */
#define ZC_WIRE_HOME_DEPTH 4
#define ZC_WIRE_STRIPE_DEPTH 4
/* Receives a receiver keeps posted on each rail it listens on: as many as
 * the sender keeps chunks unacknowledged there, so that a chunk sent as a
 * rendezvous finds its receive posted even while this rank waits for a
 * core; a one-chunk transfer needs one (a copy of another call that takes
 * it is dropped, and the receive posted again). */
#define ZC_WIRE_RECV_DEPTH 4

typedef struct {
    uint32_t magic, seq, id, chunk;
} zc_wire_hdr_t;

typedef struct {
    uint32_t magic, seq, id, chunk, rail, reserved;
} zc_wire_ack_msg_t;

#define ZC_WIRE_HDR sizeof(zc_wire_hdr_t)
_Static_assert(sizeof(zc_wire_hdr_t) == ZC_WIRE_HEADER, "wire.h names the header's size");

enum { ZC_CHUNK_NEW, ZC_CHUNK_FILLING, ZC_CHUNK_READY, ZC_CHUNK_SENT, ZC_CHUNK_DONE };

/* A staging buffer: header, then one chunk. */
typedef struct {
    char *buf;
    int chunk;             /* the chunk it holds, -1: none */
    int pins;              /* sends (or a drain) of it UCX still holds */
    zc_request_h req;      /* the receive into it (a fill, or a chunk), or NULL */
    int rail;              /* (receiver) the rail of `req` */
} zc_wire_slot_t;

/* A send in flight: a chunk (sender), a drain or an acknowledgement
 * (receiver).  The list moves its entries; what UCX reads does not. */
typedef struct {
    zc_request_h req;
    int slot;              /* the slot it reads, -1: an acknowledgement */
    int chunk, rail;
    zc_wire_ack_msg_t *ack; /* an acknowledgement's message (malloc'd) */
} zc_wire_send_t;

struct zc_wire {
    zc_comm_h comm;
    zc_wire_spec_t spec;
    zc_rail_meter_t *meters; /* the rails' meters its chunks feed; NULL: unmetered (spec) */
    int sending;
    int nchunks;
    int ndone;             /* chunks acknowledged (sender) or received (receiver) */
    uint8_t *state;        /* [nchunks]: ZC_CHUNK_* (receiver: NEW or DONE) */
    int *chunk_slot;       /* (sender) [nchunks]: the slot holding it, -1 */
    int *chunk_rail;       /* (sender) [nchunks]: the rail of its last send */
    int *chunk_pref;       /* (sender, fixed shares) [nchunks]: its rail; NULL: none */
    int64_t *sent_ns;      /* (sender) [nchunks]: when it left */
    zc_wire_slot_t *slots;
    int nslots, cap_slots;
    zc_wire_send_t *sends; /* (sender: chunks; receiver: drains, acknowledgements) */
    int nsends, cap_sends;
    /* (sender) one acknowledgement receive per rail */
    zc_request_h ack_req[ZC_MAX_RAILS];
    zc_wire_ack_msg_t ack_in[ZC_MAX_RAILS];
    int next_fill;         /* (sender) the next chunk to stage */
    int inflight[ZC_MAX_RAILS];        /* (sender) chunks unacknowledged there */
    size_t inflight_bytes[ZC_MAX_RAILS];
    int64_t last_ack_ns[ZC_MAX_RAILS];
    int64_t suspect_ns[ZC_MAX_RAILS];  /* when the rail was last reported */
    int64_t failed_ns[ZC_MAX_RAILS];   /* (sender) when a send there last failed */
    int64_t progress_ns;   /* (sender) when the last acknowledgement came */
    int ever_out;          /* a rail it used went out: listen and send everywhere */
    int confirmed;         /* (sender) the receiver said it has every chunk */
    int64_t last_new_ns;   /* (receiver) when the last new chunk came */
    int ending;            /* every chunk in: cancelling what is left */
    int leaked;            /* UCX may still write into its staging: never freed */
};

static size_t zc_wire_len(const zc_wire_t *w, int c)
{
    size_t off = (size_t)c * w->spec.chunk;

    return w->spec.bytes - off < w->spec.chunk ? w->spec.bytes - off : w->spec.chunk;
}

size_t zc_wire_chunk(zc_comm_h comm, size_t bytes, size_t elem, int bits)
{
    size_t chunk = bytes / ((size_t)comm->nrails * ZC_WIRE_CHUNKS_PER_RAIL);
    size_t most = (size_t)comm->settings.routed_chunk;
    size_t fit = (bytes + ((size_t)1 << bits) - 1) >> bits;

    chunk = chunk > most ? most : chunk;
    chunk = chunk < ZC_WIRE_MIN_CHUNK ? ZC_WIRE_MIN_CHUNK : chunk;
    chunk = chunk < fit ? fit : chunk;
    return (chunk + elem - 1) / elem * elem;
}

void zc_wire_frame(void *buf, uint32_t seq, uint32_t id)
{
    zc_wire_hdr_t hdr = {ZC_WIRE_MAGIC, seq, id, 0};

    memcpy(buf, &hdr, sizeof(hdr));
}

static uint64_t zc_wire_tag(const zc_wire_t *w, uint64_t base, int c)
{
    return base + ((uint64_t)c << w->spec.chunk_shift);
}

static int zc_wire_rail_live(const zc_wire_t *w, int rail)
{
    return w->comm->host_ops->rail_live(w->comm->host, rail, w->spec.peer);
}

static int zc_wire_stall_ms(const zc_wire_t *w)
{
    int stall = w->comm->settings.rail_stall_ms, cap = w->comm->timeout_ms / 4 + 1;

    return stall < cap ? stall : cap;
}

/* ---- slots and sends ------------------------------------------------------ */

/* A free slot, made if every one is taken and the cap allows; -1: none. */
static int zc_wire_slot_get(zc_wire_t *w)
{
    for (int i = 0; i < w->nslots; i++)
        if (w->slots[i].chunk < 0 && !w->slots[i].pins && !w->slots[i].req)
            return i;
    if (w->nslots == w->cap_slots)
        return -1;
    zc_wire_slot_t *s = &w->slots[w->nslots];
    if (!(s->buf = malloc(ZC_WIRE_HDR + w->spec.chunk)))
        return -1;
    s->chunk = -1;
    return w->nslots++;
}

static zc_status_t zc_wire_send_add(zc_wire_t *w, zc_wire_send_t **out)
{
    if (w->nsends == w->cap_sends) {
        int cap = w->cap_sends ? 2 * w->cap_sends : 16;
        zc_wire_send_t *sends = realloc(w->sends, sizeof(*sends) * (size_t)cap);
        if (!sends)
            return zc_error(ZC_ERR_NO_MEMORY, "cannot track %d sends of a striped transfer", cap);
        w->sends = sends;
        w->cap_sends = cap;
    }
    *out = &w->sends[w->nsends++];
    memset(*out, 0, sizeof(**out));
    return ZC_OK;
}

/* The sends that finished: their slots unpinned; `done` decides what each
 * means.  A send whose request could not be freed in place stays listed. */
static zc_status_t zc_wire_sends_reap(zc_wire_t *w, int *moved,
                                      zc_status_t (*done)(zc_wire_t *, zc_wire_send_t *,
                                                          zc_status_t))
{
    for (int i = 0; i < w->nsends;) {
        zc_wire_send_t *s = &w->sends[i];
        if (!s->req->done) {
            i++;
            continue;
        }
        zc_status_t st = s->req->status;
        zc_wire_send_t sent = *s;
        /* off the list before `done` may fail: a listed send without its
         * request would be abandoned again by zc_wire_destroy */
        w->sends[i] = w->sends[--w->nsends];
        zc_p2p_free(&sent.req);
        free(sent.ack);
        if (sent.slot >= 0)
            w->slots[sent.slot].pins--;
        *moved = 1;
        ZC_CHECK(done(w, &sent, st));
    }
    return ZC_OK;
}

/* ---- sender --------------------------------------------------------------- */

/* Stage chunks into free slots: copied from spec.src, or received from the
 * proxy's source. */
static zc_status_t zc_wire_fill(zc_wire_t *w, int *moved)
{
    const zc_wire_spec_t *sp = &w->spec;

    while (w->next_fill < w->nchunks) {
        int c = w->next_fill, i = zc_wire_slot_get(w);
        if (i < 0)
            return ZC_OK;
        zc_wire_slot_t *s = &w->slots[i];
        zc_wire_hdr_t hdr = {ZC_WIRE_MAGIC, sp->seq, sp->id, (uint32_t)c};
        memcpy(s->buf, &hdr, sizeof(hdr));
        s->chunk = c;
        w->chunk_slot[c] = i;
        if (sp->src) {
            memcpy(s->buf + ZC_WIRE_HDR, sp->src + (size_t)c * sp->chunk, zc_wire_len(w, c));
            w->state[c] = ZC_CHUNK_READY;
        } else {
            ZC_CHECK(zc_p2p_post(w->comm, ZC_REQ_RECV, s->buf + ZC_WIRE_HDR, zc_wire_len(w, c),
                                 sp->fill_peer, zc_wire_tag(w, sp->fill_tag, c), ZC_RAIL_AUTO,
                                 &s->req));
            w->state[c] = ZC_CHUNK_FILLING;
        }
        w->next_fill++;
        *moved = 1;
    }
    return ZC_OK;
}

/* Fills that arrived make their chunks ready. */
static zc_status_t zc_wire_fills_reap(zc_wire_t *w, int *moved)
{
    for (int i = 0; i < w->nslots; i++) {
        zc_wire_slot_t *s = &w->slots[i];
        if (!s->req || !s->req->done)
            continue;
        zc_status_t st = s->req->status;
        zc_p2p_free(&s->req);
        if (st != ZC_OK)
            return zc_error(st, "a striped transfer's source, rank %d, failed to hand over "
                            "chunk %d (%s)", w->spec.fill_peer, s->chunk, zc_strerror(st));
        w->state[s->chunk] = ZC_CHUNK_READY;
        *moved = 1;
    }
    return ZC_OK;
}

/* A send that could not even be posted on `rail` (its endpoint could not
 * be made again: the link is down here, or UCX failed it) is that rail's
 * failure, like a send that failed, while another rail to the peer is
 * live: the rail is probed, and the chunk goes elsewhere meanwhile.
 * Returns whether it was taken so. */
static int zc_wire_rail_refused(zc_wire_t *w, int rail, zc_status_t st)
{
    char why[96];
    int other = 0;

    if (st == ZC_ERR_NO_MEMORY || st == ZC_ERR_INVALID_ARG)
        return 0;
    for (int r = 0; r < w->comm->nrails; r++)
        other |= r != rail && zc_wire_rail_live(w, r);
    if (!other)
        return 0;
    w->failed_ns[rail] = zc_now_ns();
    w->ever_out = 1;
    snprintf(why, sizeof(why), "a send to rank %d could not start: %s", w->spec.peer,
             zc_get_last_error());
    w->comm->host_ops->rail_suspect(w->comm->host, rail, w->spec.peer, why);
    return 1;
}

/* The rail for chunk c of `len` bytes, -1: none now.  Its own rail (the
 * home rail, or its fixed one) while that is not out, unless it lags and
 * has no room (then another, with at most one chunk of this transfer
 * unacknowledged there); else the rail not out whose unacknowledged bytes
 * and this chunk would drain first at its rate, if it has room (a depth in
 * proportion to its rate, at least two); else the rail with room that
 * would deliver it first, if no later than every byte still owed
 * (`unsent` and the unacknowledged) would drain at the rails' summed
 * rates (so a slow rail takes its share while there is much to move, and
 * no chunk near the end that the others would finish sooner); else none.
 * A rail whose send just failed waits for the probe's verdict. */
static int zc_wire_pick_rail(zc_wire_t *w, int c, size_t len, size_t unsent)
{
    int own = w->spec.home >= 0 ? w->spec.home : w->chunk_pref ? w->chunk_pref[c] : -1;
    int best = -1, nrails = w->comm->nrails, spill = 0;
    double best_t = 0, rate[ZC_MAX_RAILS], fastest = 0;
    int64_t now = zc_now_ns(), stall = (int64_t)zc_wire_stall_ms(w) * 1000000;

    if (own >= 0 && zc_wire_rail_live(w, own) && now - w->failed_ns[own] >= stall) {
        int depth = w->spec.home >= 0 ? ZC_WIRE_HOME_DEPTH : ZC_WIRE_STRIPE_DEPTH;
        if (w->inflight[own] < depth)
            return own;
        if (!w->spec.home_kbps ||
            !zc_rail_lagging(w->comm, own, w->spec.home_kbps, w->spec.chunk))
            return -1;
        spill = 1;
    }
    uint32_t now_kbps[ZC_MAX_RAILS];
    zc_rail_rates_now(w->comm, now_kbps);
    for (int r = 0; r < nrails; r++) {
        rate[r] = zc_wire_rail_live(w, r) ? now_kbps[r] : 0;
        fastest = rate[r] > fastest ? rate[r] : fastest;
    }
    int best_full = 0, open = -1;
    double open_t = 0, sum = 0, owed = (double)unsent;
    for (int r = 0; r < nrails; r++) {
        int depth = (int)(ZC_WIRE_STRIPE_DEPTH * rate[r] / (fastest > 0 ? fastest : 1) + 0.5);
        if ((spill && r == own) || rate[r] <= 0 || now - w->failed_ns[r] < stall)
            continue;
        sum += rate[r];
        owed += (double)w->inflight_bytes[r];
        int full = w->inflight[r] >= (spill ? 1 : depth > 2 ? depth : 2);
        if (spill && full)
            continue;
        double t = (double)(w->inflight_bytes[r] + len) / rate[r];
        if (best < 0 || t < best_t) {
            best = r;
            best_t = t;
            best_full = full;
        }
        if (!full && (open < 0 || t < open_t)) {
            open = r;
            open_t = t;
        }
    }
    if (best >= 0 && !best_full)
        return best;
    return open >= 0 && sum > 0 && open_t <= owed / sum ? open : -1;
}

/* An acknowledgement receive on `rail`, if none is posted there. */
static zc_status_t zc_wire_ack_listen(zc_wire_t *w, int rail)
{
    if (w->ack_req[rail])
        return ZC_OK;
    return zc_p2p_post_framed(w->comm, ZC_REQ_RECV, &w->ack_in[rail], sizeof(w->ack_in[rail]),
                              w->spec.peer, w->spec.ack_tag, 0, rail, sizeof(w->ack_in[rail]),
                              0, &w->ack_req[rail]);
}

static zc_status_t zc_wire_send_ready(zc_wire_t *w, int *moved)
{
    size_t unsent = 0;  /* (the bytes of every chunk not sent, this one's too) */

    for (int c = 0; c < w->nchunks; c++)
        unsent += w->state[c] < ZC_CHUNK_SENT ? zc_wire_len(w, c) : 0;
    for (int c = 0; c < w->nchunks; c++) {
        if (w->state[c] != ZC_CHUNK_READY)
            continue;
        size_t len = zc_wire_len(w, c);
        int rail = zc_wire_pick_rail(w, c, len, unsent), i = w->chunk_slot[c];
        zc_wire_send_t *s;
        if (rail < 0 && !w->chunk_pref)
            return ZC_OK;  /* (no chunk would find room) */
        if (rail < 0)
            continue;      /* (another chunk's rail may have room) */
        ZC_CHECK(zc_wire_ack_listen(w, rail));
        ZC_CHECK(zc_wire_send_add(w, &s));
        s->slot = i;
        s->chunk = c;
        s->rail = rail;
        zc_status_t st = zc_p2p_post_framed(w->comm, ZC_REQ_SEND, w->slots[i].buf,
                                            ZC_WIRE_HDR + len, w->spec.peer,
                                            zc_wire_tag(w, w->spec.tag, c), 0, rail, ZC_WIRE_HDR,
                                            0, &s->req);
        if (st != ZC_OK) {
            w->nsends--;
            if (!zc_wire_rail_refused(w, rail, st))
                return st;
            continue;  /* (another rail, or this one after the probe's verdict) */
        }
        w->slots[i].pins++;
        unsent -= len;
        w->state[c] = ZC_CHUNK_SENT;
        w->chunk_rail[c] = rail;
        w->sent_ns[c] = zc_now_ns();
        if (w->inflight[rail]++ == 0)
            w->last_ack_ns[rail] = w->sent_ns[c];
        w->inflight_bytes[rail] += len;
        zc_rail_meter_sent(w->meters, rail);
        *moved = 1;
    }
    return ZC_OK;
}

/* Chunk c is no longer counted on its rail (acknowledged, or to go again). */
static void zc_wire_uncount(zc_wire_t *w, int c)
{
    int r = w->chunk_rail[c];

    w->inflight[r]--;
    w->inflight_bytes[r] -= zc_wire_len(w, c);
}

/* A chunk's send finished.  One that failed (the rail's endpoint broke, or
 * closed when the rail went out) goes again, on another rail for a while:
 * a copy that did arrive is dropped there. */
static zc_status_t zc_wire_chunk_sent(zc_wire_t *w, zc_wire_send_t *s, zc_status_t st)
{
    char why[96];

    if (st == ZC_OK)
        return ZC_OK;
    w->failed_ns[s->rail] = zc_now_ns();
    w->ever_out = 1;  /* its acknowledgements may be lost too */
    if (w->state[s->chunk] == ZC_CHUNK_SENT && w->chunk_rail[s->chunk] == s->rail) {
        zc_wire_uncount(w, s->chunk);
        zc_rail_meter_lost(w->meters, s->rail);
        w->state[s->chunk] = ZC_CHUNK_READY;
    }
    snprintf(why, sizeof(why), "a chunk's send to rank %d failed: %s", w->spec.peer,
             zc_strerror(st));
    w->comm->host_ops->rail_suspect(w->comm->host, s->rail, w->spec.peer, why);
    return ZC_OK;
}

static void zc_wire_slot_release(zc_wire_t *w, int c)
{
    int i = w->chunk_slot[c];

    w->chunk_slot[c] = -1;
    w->slots[i].chunk = -1;  /* reused once its last send is done (pins) */
}

/* Acknowledgements that came: their chunks done, their slots free. */
static zc_status_t zc_wire_acks_reap(zc_wire_t *w, int *moved)
{
    const zc_wire_spec_t *sp = &w->spec;

    for (int r = 0; r < w->comm->nrails; r++) {
        zc_request_h req = w->ack_req[r];
        if (!req || !req->done)
            continue;
        zc_status_t st = req->status;
        zc_p2p_free(&w->ack_req[r]);
        const zc_wire_ack_msg_t *a = &w->ack_in[r];
        int c = (int)a->chunk;
        if (st == ZC_OK && a->magic == ZC_WIRE_ACK_MAGIC && a->seq == sp->seq &&
            a->id == sp->id && c >= 0 && c < w->nchunks &&
            (w->state[c] == ZC_CHUNK_SENT || w->state[c] == ZC_CHUNK_READY)) {
            /* (a chunk waiting to go again may have arrived after all) */
            if (w->state[c] == ZC_CHUNK_SENT) {
                zc_wire_uncount(w, c);
                zc_rail_meter_acked(w->meters, w->chunk_rail[c], zc_wire_len(w, c));
                w->last_ack_ns[w->chunk_rail[c]] = zc_now_ns();
            }
            w->state[c] = ZC_CHUNK_DONE;
            zc_wire_slot_release(w, c);
            w->ndone++;
            w->progress_ns = zc_now_ns();
        }
        *moved = 1;
        if (w->ndone < w->nchunks && st == ZC_OK)
            ZC_CHECK(zc_wire_ack_listen(w, r));
    }
    return ZC_OK;
}

/* Chunks sent on a rail that went out go again on the others. */
static void zc_wire_resend_out(zc_wire_t *w, int *moved)
{
    for (int r = 0; r < w->comm->nrails; r++) {
        if (!w->inflight[r] || zc_wire_rail_live(w, r))
            continue;
        w->ever_out = 1;
        for (int c = 0; c < w->nchunks; c++) {
            if (w->state[c] != ZC_CHUNK_SENT || w->chunk_rail[c] != r)
                continue;
            zc_wire_uncount(w, c);
            zc_rail_meter_lost(w->meters, r);
            w->state[c] = ZC_CHUNK_READY;
            *moved = 1;
        }
    }
    /* acknowledgements may now come on any rail not out */
    for (int r = 0; w->ever_out && r < w->comm->nrails; r++)
        if (zc_wire_rail_live(w, r))
            (void)zc_wire_ack_listen(w, r);
}

/* A rail that takes chunks and acknowledges none for the stall time is
 * reported (the transport probes it); from then on acknowledgements are
 * awaited on every rail not out (a receiver whose rail could not take
 * one sends it on another). */
static void zc_wire_stalls(zc_wire_t *w)
{
    int64_t now = zc_now_ns(), stall = (int64_t)zc_wire_stall_ms(w) * 1000000;
    char why[96];

    for (int r = 0; r < w->comm->nrails; r++) {
        if (!w->inflight[r] || now - w->last_ack_ns[r] < stall || now - w->suspect_ns[r] < stall)
            continue;
        w->suspect_ns[r] = now;
        w->ever_out = 1;
        snprintf(why, sizeof(why), "no acknowledgement from rank %d for %lld ms", w->spec.peer,
                 (long long)((now - w->last_ack_ns[r]) / 1000000));
        w->comm->host_ops->rail_suspect(w->comm->host, r, w->spec.peer, why);
    }
}

/* After a rail went out, acknowledgements may have been lost with it, the
 * last ones too, after which the receiver ends and answers no copy: a
 * sender that hears nothing for the stall time asks whether it received
 * everything (the transport keeps the answer), and ends if it did. */
static void zc_wire_ask_done(zc_wire_t *w, int *moved)
{
    int64_t stall = (int64_t)zc_wire_stall_ms(w) * 1000000;
    uint64_t key = (uint64_t)w->spec.seq << 32 | w->spec.id;

    if (!w->ever_out || w->confirmed || zc_now_ns() - w->progress_ns < stall)
        return;
    if (w->comm->host_ops->xfer_query(w->comm->host, w->spec.peer, key) != 1)
        return;
    w->confirmed = 1;
    for (int c = 0; c < w->nchunks; c++) {
        if (w->state[c] == ZC_CHUNK_DONE)
            continue;
        if (w->state[c] == ZC_CHUNK_SENT)
            zc_wire_uncount(w, c);
        w->state[c] = ZC_CHUNK_DONE;
        if (w->chunk_slot[c] >= 0)
            zc_wire_slot_release(w, c);
        w->ndone++;
    }
    *moved = 1;
}

static zc_status_t zc_wire_send_poll(zc_wire_t *w, int *moved)
{
    ZC_CHECK(zc_wire_sends_reap(w, moved, zc_wire_chunk_sent));
    ZC_CHECK(zc_wire_acks_reap(w, moved));
    zc_wire_ask_done(w, moved);
    if (w->ndone < w->nchunks) {
        zc_wire_resend_out(w, moved);
        ZC_CHECK(zc_wire_fills_reap(w, moved));
        ZC_CHECK(zc_wire_fill(w, moved));
        ZC_CHECK(zc_wire_send_ready(w, moved));
        zc_wire_stalls(w);
        return ZC_INPROGRESS;
    }
    /* every chunk acknowledged: the acknowledgement receives go, and the
     * sends UCX still holds finish (a rail that went out cancelled its).
     * Once the receiver said it has everything, a copy sent again after a
     * failover may never be taken (a rendezvous waits for a receive that
     * ended): left to UCX with its staging, which is then never freed. */
    for (int i = 0; w->confirmed && i < w->nsends; i++) {
        w->leaked |= !w->sends[i].req->done;
        zc_p2p_abandon(&w->sends[i].req, ZC_ERR_INTERNAL);
    }
    if (w->confirmed)
        w->nsends = 0;
    for (int r = 0; r < w->comm->nrails; r++)
        if (w->ack_req[r])
            zc_p2p_cancel(w->ack_req[r]);
    for (int r = 0; r < w->comm->nrails; r++)
        if (w->ack_req[r] && w->ack_req[r]->done)
            zc_p2p_free(&w->ack_req[r]);
    for (int r = 0; r < w->comm->nrails; r++)
        if (w->ack_req[r])
            return ZC_INPROGRESS;
    return w->nsends ? ZC_INPROGRESS : ZC_OK;
}

/* ---- receiver ------------------------------------------------------------- */

/* Receives the receiver keeps posted on `rail`: on the home rail, or
 * every rail not out once the home rail is out (or quiet for twice the
 * stall time with chunks owed), or every rail when striped; one on the
 * others where chunks may move off a lagging home rail. */
static int zc_wire_listens(zc_wire_t *w, int rail)
{
    int home = w->spec.home, depth = w->nchunks > 1 ? ZC_WIRE_RECV_DEPTH : 1;

    if (!zc_wire_rail_live(w, rail))
        return 0;
    if (home < 0 || rail == home)
        return depth;
    if (!w->ever_out && (!zc_wire_rail_live(w, home) ||
                         zc_now_ns() - w->last_new_ns >
                             2 * (int64_t)zc_wire_stall_ms(w) * 1000000))
        w->ever_out = 1;
    return w->ever_out ? depth : w->spec.home_kbps ? 1 : 0;
}

/* Keep ZC_WIRE_RECV_DEPTH receives posted on every rail listened on. */
static zc_status_t zc_wire_listen(zc_wire_t *w, int *moved)
{
    int posted[ZC_MAX_RAILS] = {0};
    uint64_t mask = (((uint64_t)1 << w->spec.chunk_bits) - 1) << w->spec.chunk_shift;

    for (int i = 0; i < w->nslots; i++)
        if (w->slots[i].req)
            posted[w->slots[i].rail]++;
    for (int r = 0; r < w->comm->nrails; r++) {
        while (posted[r] < zc_wire_listens(w, r)) {
            int i = zc_wire_slot_get(w);
            if (i < 0)
                return ZC_OK;
            zc_wire_slot_t *s = &w->slots[i];
            /* (any length up to a whole chunk: the header says which it is) */
            ZC_CHECK(zc_p2p_post_framed(w->comm, ZC_REQ_RECV, s->buf, ZC_WIRE_HDR + w->spec.chunk,
                                        w->spec.peer, w->spec.tag, mask, r, ZC_WIRE_HDR,
                                        ZC_P2P_UP_TO, &s->req));
            s->rail = r;
            posted[r]++;
            *moved = 1;
        }
    }
    return ZC_OK;
}

/* Acknowledge chunk c on `rail`. */
static zc_status_t zc_wire_ack_on(zc_wire_t *w, int c, int rail)
{
    zc_wire_send_t *s;
    zc_wire_ack_msg_t *msg = malloc(sizeof(*msg));

    if (!msg)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate an acknowledgement");
    *msg = (zc_wire_ack_msg_t){ZC_WIRE_ACK_MAGIC, w->spec.seq, w->spec.id, (uint32_t)c,
                               (uint32_t)rail, 0};
    zc_status_t st = zc_wire_send_add(w, &s);
    if (st == ZC_OK) {
        s->slot = -1;
        s->chunk = c;
        s->rail = rail;
        s->ack = msg;
        st = zc_p2p_post_framed(w->comm, ZC_REQ_SEND, msg, sizeof(*msg), w->spec.peer,
                                w->spec.ack_tag, 0, rail, sizeof(*msg),
                                ZC_P2P_EAGER | ZC_P2P_CONTROL, &s->req);
        if (st != ZC_OK)
            w->nsends--;
    }
    if (st != ZC_OK)
        free(msg);
    return st;
}

/* Acknowledge chunk c, which came on `rail`: there, or on the first rail
 * not out if that one is out or cannot take it (a rail whose endpoint
 * cannot be made again); with none, the sender times out. */
static zc_status_t zc_wire_ack(zc_wire_t *w, int c, int rail)
{
    zc_status_t st = ZC_OK;

    if (zc_wire_rail_live(w, rail) && (st = zc_wire_ack_on(w, c, rail)) == ZC_OK)
        return ZC_OK;
    if (st == ZC_ERR_NO_MEMORY || st == ZC_ERR_INVALID_ARG)
        return st;
    for (int r = 0; r < w->comm->nrails; r++) {
        if (r == rail || !zc_wire_rail_live(w, r))
            continue;
        st = zc_wire_ack_on(w, c, r);
        if (st == ZC_OK || st == ZC_ERR_NO_MEMORY || st == ZC_ERR_INVALID_ARG)
            return st;
    }
    return ZC_OK;
}

/* One chunk received into slot i: checked, taken once, acknowledged. */
static zc_status_t zc_wire_take(zc_wire_t *w, int i)
{
    const zc_wire_spec_t *sp = &w->spec;
    zc_wire_slot_t *s = &w->slots[i];
    zc_wire_hdr_t hdr;
    uint64_t mask = ((uint64_t)1 << sp->chunk_bits) - 1;
    int c = (int)((s->req->recv_tag >> sp->chunk_shift) & mask);
    size_t got = s->req->recv_bytes;

    memcpy(&hdr, s->buf, sizeof(hdr));
    if (got < ZC_WIRE_HDR || hdr.magic != ZC_WIRE_MAGIC || hdr.seq != sp->seq ||
        hdr.id != sp->id || hdr.chunk != (uint32_t)c) {
        zc_log_debug("striped transfer from rank %d: a chunk of another call or transfer "
                     "dropped", sp->peer);
        return ZC_OK;
    }
    if (c >= w->nchunks || (sp->up_to ? got > ZC_WIRE_HDR + sp->bytes
                                      : got != ZC_WIRE_HDR + zc_wire_len(w, c)))
        return zc_error(ZC_ERR_MISMATCH, "count: rank %d sent chunk %d of %zu bytes, this rank "
                        "expects %d chunks of %zu bytes (%zu in all): the ranks cut the transfer "
                        "differently", sp->peer, c, got - ZC_WIRE_HDR, w->nchunks, sp->chunk,
                        sp->bytes);
    if (w->state[c] == ZC_CHUNK_NEW) {
        w->state[c] = ZC_CHUNK_DONE;
        w->ndone++;
        w->last_new_ns = zc_now_ns();
        if (sp->dst) {
            memcpy(sp->dst + (size_t)c * sp->chunk, s->buf + ZC_WIRE_HDR, got - ZC_WIRE_HDR);
        } else {
            zc_wire_send_t *d;
            ZC_CHECK(zc_wire_send_add(w, &d));
            d->slot = i;
            d->chunk = c;
            zc_status_t st = zc_p2p_post(w->comm, ZC_REQ_SEND, s->buf + ZC_WIRE_HDR,
                                         zc_wire_len(w, c), sp->drain_peer,
                                         zc_wire_tag(w, sp->drain_tag, c), ZC_RAIL_AUTO, &d->req);
            if (st != ZC_OK) {
                w->nsends--;
                return st;
            }
            s->pins++;
        }
    }
    return zc_wire_ack(w, c, s->rail);
}

static zc_status_t zc_wire_recvs_reap(zc_wire_t *w, int *moved)
{
    for (int i = 0; i < w->nslots; i++) {
        zc_wire_slot_t *s = &w->slots[i];
        if (!s->req || !s->req->done)
            continue;
        zc_status_t st = s->req->status;
        if (st == ZC_ERR_MISMATCH) {
            zc_p2p_free(&s->req);
            return zc_error(st, "count: rank %d sent a chunk larger than the %zu bytes this "
                            "rank cut the transfer into", w->spec.peer, w->spec.chunk);
        }
        /* other errors are a rail's, or a cancel's: the chunk comes again */
        st = st == ZC_OK && !w->ending ? zc_wire_take(w, i) : ZC_OK;
        zc_p2p_free(&s->req);
        ZC_CHECK(st);
        *moved = 1;
    }
    return ZC_OK;
}

/* A drain or an acknowledgement finished. */
static zc_status_t zc_wire_recv_sent(zc_wire_t *w, zc_wire_send_t *s, zc_status_t st)
{
    if (s->slot < 0 || st == ZC_OK)
        return ZC_OK;  /* an acknowledgement lost with its rail: the chunk comes again */
    return zc_error(st, "a striped transfer could not hand chunk %d on to rank %d (%s)",
                    s->chunk, w->spec.drain_peer, zc_strerror(st));
}

static zc_status_t zc_wire_recv_poll(zc_wire_t *w, int *moved)
{
    ZC_CHECK(zc_wire_recvs_reap(w, moved));
    ZC_CHECK(zc_wire_sends_reap(w, moved, zc_wire_recv_sent));
    if (w->ndone < w->nchunks)
        return zc_wire_listen(w, moved) == ZC_OK ? ZC_INPROGRESS : ZC_ERR_NO_MEMORY;
    /* every chunk in: remembered for a sender that lost the last
     * acknowledgements (zc_wire_ask_done); the receives left are
     * cancelled (one a copy already matched finishes, or stays with UCX
     * once its rail is out) */
    int left = 0;
    if (!w->ending)
        w->comm->host_ops->xfer_done(w->comm->host, w->spec.peer,
                                     (uint64_t)w->spec.seq << 32 | w->spec.id);
    w->ending = 1;
    for (int i = 0; i < w->nslots; i++) {
        zc_wire_slot_t *s = &w->slots[i];
        if (!s->req)
            continue;
        zc_p2p_cancel(s->req);
        if (!s->req->done && !zc_wire_rail_live(w, s->rail)) {
            zc_p2p_abandon(&s->req, ZC_ERR_PEER_FAILED);
            w->leaked = 1;
        }
        left += s->req && !s->req->done;
    }
    ZC_CHECK(zc_wire_recvs_reap(w, moved));
    return left || w->nsends ? ZC_INPROGRESS : ZC_OK;
}

/* ---- the wire ------------------------------------------------------------- */

int zc_wire_handed(const zc_wire_t *w)
{
    if (!w->sending || w->next_fill < w->nchunks || w->nsends)
        return 0;
    for (int c = 0; c < w->nchunks; c++)
        if (w->state[c] != ZC_CHUNK_SENT && w->state[c] != ZC_CHUNK_DONE)
            return 0;
    return 1;
}

zc_status_t zc_wire_poll(zc_wire_t *w, int *moved)
{
    return w->sending ? zc_wire_send_poll(w, moved) : zc_wire_recv_poll(w, moved);
}

void zc_wire_destroy(zc_wire_t *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->nslots; i++) {
        if (w->slots[i].req) {
            w->leaked |= !w->slots[i].req->done;
            zc_p2p_abandon(&w->slots[i].req, ZC_ERR_INTERNAL);
        }
        w->leaked |= w->slots[i].pins > 0;
    }
    for (int i = 0; i < w->nsends; i++) {
        int unfinished = !w->sends[i].req->done;
        w->leaked |= unfinished;
        zc_p2p_abandon(&w->sends[i].req, ZC_ERR_INTERNAL);
        if (!unfinished)
            free(w->sends[i].ack);
    }
    for (int r = 0; r < ZC_MAX_RAILS; r++) {
        if (w->ack_req[r]) {
            w->leaked |= !w->ack_req[r]->done;
            zc_p2p_abandon(&w->ack_req[r], ZC_ERR_INTERNAL);
        }
    }
    if (w->leaked) {
        zc_log_debug("striped transfer with rank %d abandoned with operations in flight: "
                     "keeping its staging", w->spec.peer);
        return;
    }
    for (int i = 0; i < w->nslots; i++)
        free(w->slots[i].buf);
    free(w->slots);
    free(w->sends);
    free(w->state);
    free(w->chunk_slot);
    free(w->chunk_rail);
    free(w->chunk_pref);
    free(w->sent_ns);
    free(w);
}

/* Fixed shares (pinned rates, or equal): chunk c's rail by a smooth
 * weighted round robin over the rates, so that staging in chunk order
 * feeds every rail its share from the start. */
static zc_status_t zc_wire_fixed_shares(zc_wire_t *w)
{
    uint32_t wt[ZC_MAX_RAILS];
    double credit[ZC_MAX_RAILS] = {0}, total = 0;
    int nrails = w->comm->nrails;

    if (!(w->chunk_pref = malloc(sizeof(int) * (size_t)w->nchunks)))
        return ZC_ERR_NO_MEMORY;
    zc_rail_rates_now(w->comm, wt);  /* (pinned or equal) */
    for (int r = 0; r < nrails; r++)
        total += wt[r];
    for (int c = 0; c < w->nchunks; c++) {
        int best = 0;
        for (int r = 0; r < nrails; r++) {
            credit[r] += wt[r];
            if (credit[r] > credit[best])
                best = r;
        }
        credit[best] -= total;
        w->chunk_pref[c] = best;
    }
    return ZC_OK;
}

zc_status_t zc_wire_create(zc_comm_h comm, const zc_wire_spec_t *spec, int sending,
                           zc_wire_t **out)
{
    zc_wire_t *w = calloc(1, sizeof(*w));
    size_t chunk = spec->chunk ? spec->chunk : 1;
    int n = spec->bytes && !spec->up_to ? (int)((spec->bytes + chunk - 1) / chunk) : 1;
    int depth = spec->home >= 0 ? ZC_WIRE_HOME_DEPTH : ZC_WIRE_STRIPE_DEPTH;

    if (!w)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate a striped transfer");
    w->comm = comm;
    w->spec = *spec;
    w->meters = spec->unmetered ? NULL : comm->rates.meter;
    w->spec.chunk = spec->up_to ? (spec->bytes ? spec->bytes : 1) : chunk;
    w->sending = sending;
    w->nchunks = n;
    /* a sender's slots: its depth on every rail, and the ones sends on a
     * rail that went out may pin; a receiver's: its receives on every
     * rail, and the drains in flight */
    w->cap_slots = sending ? depth * (comm->nrails + 1) + ZC_WIRE_HOME_DEPTH
                           : ZC_WIRE_RECV_DEPTH * 2 * comm->nrails + 2;
    w->slots = calloc((size_t)w->cap_slots, sizeof(*w->slots));
    w->state = calloc((size_t)n, 1);
    w->chunk_slot = malloc(sizeof(int) * (size_t)n);
    w->chunk_rail = calloc((size_t)n, sizeof(int));
    w->sent_ns = calloc((size_t)n, sizeof(int64_t));
    w->last_new_ns = w->progress_ns = zc_now_ns();
    if (!w->slots || !w->state || !w->chunk_slot || !w->chunk_rail || !w->sent_ns) {
        zc_wire_destroy(w);
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate a striped transfer of %d chunks", n);
    }
    for (int c = 0; c < n; c++)
        w->chunk_slot[c] = -1;
    if (sending && spec->home < 0 && n > 1 && comm->nrails > 1 && !zc_rail_adaptive(comm) &&
        zc_wire_fixed_shares(w) != ZC_OK) {
        zc_wire_destroy(w);
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate a striped transfer of %d chunks", n);
    }
    *out = w;
    return ZC_OK;
}
