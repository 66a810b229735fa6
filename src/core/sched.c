/* Schedule engine: ops with dependencies, posted when ready. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/clock.h"
#include "src/common/log.h"
#include "src/core/p2p.h"
#include "src/core/sched.h"
#include "src/common/status.h"

/* How often a blocked wait looks for dead peers. */
#define ZC_SCHED_SLICE_MS 100

typedef enum { ZC_OP_P2P, ZC_OP_COPY, ZC_OP_CALL, ZC_OP_WIRE } zc_op_kind_t;
typedef enum { ZC_OP_WAITING, ZC_OP_POSTED, ZC_OP_DONE } zc_op_state_t;

/* What a packed send carries instead when its schedule fails first. */
typedef struct {
    int64_t marker;        /* ZC_SCHED_NOTICE_MARKER */
    int32_t status;        /* the sender's zc_status_t */
    int32_t rank;          /* the peer it failed on, or -1 */
} zc_sched_notice_t;

/* A notice in the place of a message a wire carries: framed as its chunk. */
typedef struct {
    char header[ZC_WIRE_HEADER];
    zc_sched_notice_t notice;
} zc_sched_framed_notice_t;

/* What a pass reads of every open op comes first: one cache line. */
typedef struct {
    zc_op_state_t state;
    zc_op_kind_t kind;
    int dep[2];
    zc_request_h req;
    zc_request_kind_t dir;
    void *buf;
    const void *src;       /* copies */
    size_t bytes;
    const size_t *bytes_at; /* packed sends: the size, when posted */
    int peer;              /* calls: their `i` */
    int rail;
    unsigned flags;        /* zc_p2p_post_flags */
    uint64_t tag;
    zc_sched_fn_t fn;      /* calls, with `buf` as their `arg` */
    zc_wire_t *wire;       /* wires, and messages between nodes carried by one */
    zc_sched_framed_notice_t notice; /* packed sends: sent instead on failure */
} zc_op_t;

struct zc_sched {
    zc_comm_h comm;
    zc_op_t *ops;
    int nops, cap;
    int first_open;        /* every op before it is done */
    void **buffers;
    int nbuffers;
    zc_status_t error;     /* sticky: building or running failed */
    unsigned call;         /* the collective's sequence (zc_sched_set_call) */
    int wired;             /* messages between nodes go as wires */
};

zc_status_t zc_sched_create(zc_comm_h comm, zc_sched_t **sched)
{
    zc_sched_t *s = calloc(1, sizeof(*s));

    if (!s)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate a schedule");
    s->comm = comm;
    *sched = s;
    return ZC_OK;
}

static int zc_sched_add(zc_sched_t *s, const zc_op_t *op)
{
    /* Dependencies point backwards, so one pass in index order posts
     * everything that became ready. */
    for (int d = 0; d < 2; d++)
        if (op->dep[d] >= s->nops) {
            s->error = zc_error(ZC_ERR_INTERNAL, "schedule op %d depends on a later op %d",
                                s->nops, op->dep[d]);
            return -1;
        }
    if (s->nops == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        zc_op_t *ops = realloc(s->ops, sizeof(*ops) * (size_t)cap);
        if (!ops) {
            s->error = zc_error(ZC_ERR_NO_MEMORY, "cannot grow a schedule to %d ops", cap);
            return -1;
        }
        s->ops = ops;
        s->cap = cap;
    }
    s->ops[s->nops] = *op;
    return s->nops++;
}

int zc_sched_p2p(zc_sched_t *s, zc_request_kind_t kind, void *buf, size_t bytes, int peer,
                 uint64_t tag, int rail, int dep0, int dep1)
{
    zc_op_t op = {.kind = ZC_OP_P2P, .dir = kind, .buf = buf, .bytes = bytes, .peer = peer,
                  .tag = tag, .rail = rail, .dep = {dep0, dep1}};
    return zc_sched_add(s, &op);
}

int zc_sched_send_packed(zc_sched_t *s, const void *buf, const size_t *bytes, int peer,
                         uint64_t tag, int rail, int dep0, int dep1)
{
    zc_op_t op = {.kind = ZC_OP_P2P, .dir = ZC_REQ_SEND, .buf = (void *)buf, .bytes_at = bytes,
                  .peer = peer, .tag = tag, .rail = rail, .flags = ZC_P2P_EAGER,
                  .dep = {dep0, dep1}};
    return zc_sched_add(s, &op);
}

int zc_sched_recv_up_to(zc_sched_t *s, void *buf, size_t capacity, int peer, uint64_t tag,
                        int dep0, int dep1)
{
    zc_op_t op = {.kind = ZC_OP_P2P, .dir = ZC_REQ_RECV, .buf = buf, .bytes = capacity,
                  .peer = peer, .tag = tag, .rail = ZC_RAIL_AUTO, .flags = ZC_P2P_UP_TO,
                  .dep = {dep0, dep1}};
    return zc_sched_add(s, &op);
}

int zc_sched_copy(zc_sched_t *s, void *dst, const void *src, size_t bytes, int dep0, int dep1)
{
    zc_op_t op = {.kind = ZC_OP_COPY, .buf = dst, .src = src, .bytes = bytes,
                  .dep = {dep0, dep1}};
    return zc_sched_add(s, &op);
}

int zc_sched_join(zc_sched_t *s, int a, int b)
{
    static char nothing;

    if (a == ZC_SCHED_NONE || b == ZC_SCHED_NONE)
        return a == ZC_SCHED_NONE ? b : a;
    return zc_sched_copy(s, &nothing, &nothing, 0, a, b);
}

int zc_sched_call(zc_sched_t *s, zc_sched_fn_t fn, void *arg, int i, int dep0, int dep1)
{
    zc_op_t op = {.kind = ZC_OP_CALL, .fn = fn, .buf = arg, .peer = i, .dep = {dep0, dep1}};
    return zc_sched_add(s, &op);
}

int zc_sched_wire(zc_sched_t *s, const zc_wire_spec_t *spec, int sending, int dep0, int dep1)
{
    zc_op_t op = {.kind = ZC_OP_WIRE, .peer = spec->peer, .dep = {dep0, dep1}};
    zc_status_t st = zc_wire_create(s->comm, spec, sending, &op.wire);
    int i;

    if (st != ZC_OK) {
        s->error = st;
        return -1;
    }
    if ((i = zc_sched_add(s, &op)) < 0)
        zc_wire_destroy(op.wire);
    return i;
}

void zc_sched_set_call(zc_sched_t *s, unsigned call)
{
    s->call = call;
    s->wired = s->comm->nrails >= 2;
}

/* Whether `op`, a message, goes as a one-chunk wire: between nodes, no rail
 * named, small enough, with rails to fail over to. */
static int zc_sched_wires(const zc_sched_t *s, const zc_op_t *op)
{
    zc_comm_h comm = s->comm;

    return s->wired && op->rail == ZC_RAIL_AUTO && op->bytes <= ZC_SCHED_WIRE_MAX &&
           comm->rank_node[op->peer] != comm->node;
}

/* The one-chunk wire of message `op` (its size read by now): its tag, an
 * acknowledgement tag of its own (the receiver's rank, the class with its
 * top bit set), the call's sequence and the tag's low half in the header. */
static zc_status_t zc_sched_post_wire(zc_sched_t *s, zc_op_t *op)
{
    zc_comm_h comm = s->comm;
    int sending = op->dir == ZC_REQ_SEND, sender = sending ? comm->rank : op->peer;
    int receiver = sending ? op->peer : comm->rank;
    uint64_t cls = op->tag >> 32 & 0xffu, low = op->tag & 0xffffffffu;
    zc_wire_spec_t spec = {
        .peer = op->peer, .bytes = op->bytes, .chunk = op->bytes, .tag = op->tag,
        .ack_tag = ZC_TAG(receiver, 0x80u | cls, low), .seq = s->call, .id = (uint32_t)low,
        .home = comm->rank_rail[sender], .up_to = !sending && (op->flags & ZC_P2P_UP_TO),
        .unmetered = 1,
        .src = sending ? op->buf : NULL, .dst = sending ? NULL : op->buf,
    };

    return zc_wire_create(comm, &spec, sending, &op->wire);
}

/* ---- messages handed to UCX, still owed their acknowledgement ---------- */

struct zc_sched_linger {
    zc_wire_t *wire;
    int peer;
    unsigned call;         /* its schedule's (zc_sched_set_call) */
    int64_t since_ms;      /* when its schedule counted it sent */
};

/* Keep the wire of message `op`, handed to UCX, on the communicator;
 * zero (it stays with the op) when out of memory. */
static int zc_sched_linger(zc_sched_t *s, zc_op_t *op)
{
    zc_comm_h comm = s->comm;

    if (comm->nlinger == comm->cap_linger) {
        int cap = comm->cap_linger ? 2 * comm->cap_linger : 16;
        struct zc_sched_linger *l = realloc(comm->linger, sizeof(*l) * (size_t)cap);
        if (!l)
            return 0;
        comm->linger = l;
        comm->cap_linger = cap;
    }
    comm->linger[comm->nlinger++] =
        (struct zc_sched_linger){op->wire, op->peer, s->call, zc_now_ms()};
    op->wire = NULL;
    return 1;
}

/* Free lingering message i (`why`: why it was never acknowledged, or NULL). */
static void zc_sched_linger_drop(zc_comm_h comm, int i, int64_t now, const char *why)
{
    struct zc_sched_linger *l = &comm->linger[i];

    if (why)
        zc_log_debug("a message to rank %d, sent %lld ms ago, was never acknowledged (%s)",
                     l->peer, (long long)(now - l->since_ms), why);
    zc_wire_destroy(l->wire);
    *l = comm->linger[--comm->nlinger];
}

/* A peer known dead is dropped before its wire is polled: a wire that
 * polled on would report its rail stalled and probe a rank that is gone. */
void zc_sched_linger_poll(zc_comm_h comm)
{
    int64_t now = comm->nlinger ? zc_now_ms() : 0;

    for (int i = 0; i < comm->nlinger;) {
        struct zc_sched_linger *l = &comm->linger[i];
        int moved = 0;
        if (zc_comm_peer_failed_at(comm, l->peer, now)) {
            zc_sched_linger_drop(comm, i, now, "its receiver failed");
            continue;
        }
        zc_status_t st = zc_wire_poll(l->wire, &moved);
        if (st == ZC_INPROGRESS && now - l->since_ms <= 2 * (int64_t)comm->timeout_ms) {
            i++;
            continue;
        }
        zc_sched_linger_drop(comm, i, now, st == ZC_OK ? NULL
                                           : st == ZC_INPROGRESS ? "given up"
                                                                 : zc_get_last_error());
        zc_error_clear();
    }
}

void zc_sched_linger_end(zc_comm_h comm)
{
    int stall = 3 * comm->settings.rail_stall_ms;
    int64_t deadline = zc_now_ms() + (stall < comm->timeout_ms ? stall : comm->timeout_ms);

    while (comm->nlinger && zc_now_ms() < deadline) {
        zc_comm_progress(comm);
        if (comm->nlinger)
            (void)zc_comm_idle(comm, 10);
    }
    for (int i = 0; i < comm->nlinger; i++)
        zc_wire_destroy(comm->linger[i].wire);
    free(comm->linger);
    comm->linger = NULL;
    comm->nlinger = comm->cap_linger = 0;
}

void *zc_sched_buffer(zc_sched_t *s, size_t bytes)
{
    void **list = realloc(s->buffers, sizeof(void *) * (size_t)(s->nbuffers + 1));
    void *buf = list ? malloc(bytes ? bytes : 1) : NULL;

    if (list)
        s->buffers = list;
    if (!buf) {
        s->error = zc_error(ZC_ERR_NO_MEMORY, "cannot allocate %zu bytes of staging", bytes);
        return NULL;
    }
    s->buffers[s->nbuffers++] = buf;
    return buf;
}

void zc_sched_destroy(zc_sched_t *s)
{
    int unfinished = 0;

    if (!s)
        return;
    for (int i = 0; i < s->nops; i++) {
        if (s->ops[i].req) {
            unfinished += !s->ops[i].req->done;
            zc_p2p_abandon(&s->ops[i].req, ZC_ERR_INTERNAL);
        }
        zc_wire_destroy(s->ops[i].wire);
    }
    /* A receive UCX has already matched cannot be cancelled and may still
     * write into its staging slot: such buffers are never freed. */
    if (unfinished)
        zc_log_debug("schedule abandoned with %d operations in flight: keeping %d staging buffers",
                     unfinished, s->nbuffers);
    for (int i = 0; i < s->nbuffers && !unfinished; i++)
        free(s->buffers[i]);
    free(s->buffers);
    free(s->ops);
    free(s);
}

/* A failure notice in the place of packed send `op`: framed as the chunk of
 * the wire its receiver waits on (on the sender's rail while it is not
 * out, else the first one that is not), or plain. */
static zc_status_t zc_sched_post_notice(zc_sched_t *s, zc_op_t *op)
{
    zc_comm_h comm = s->comm;
    int rail = comm->rank_rail[comm->rank];

    if (!zc_sched_wires(s, op))
        return zc_p2p_post_flags(comm, ZC_REQ_SEND, &op->notice.notice, sizeof(op->notice.notice),
                                 op->peer, op->tag, op->rail, ZC_P2P_EAGER, &op->req);
    for (int k = 0; !comm->host_ops->rail_live(comm->host, rail, op->peer) && k < comm->nrails;
         k++)
        rail = k;
    zc_wire_frame(op->notice.header, s->call, (uint32_t)op->tag);
    return zc_p2p_post_framed(comm, ZC_REQ_SEND, &op->notice, sizeof(op->notice), op->peer,
                              op->tag, 0, rail, ZC_WIRE_HEADER, ZC_P2P_EAGER, &op->req);
}

/* The schedule fails with `st` (on `rank`, or -1): every packed send not
 * yet posted sends a notice in its place, eager and not waited for (a
 * notice still in flight is abandoned with the schedule). */
static zc_status_t zc_sched_fail(zc_sched_t *s, zc_status_t st, int rank)
{
    char detail[256] = "";
    int tried = 0;

    s->error = st;
    /* the call's messages still lingering are not sent again: it failed
     * on this rank, and fails on the ranks that wait for them (a
     * receiver that gave up on them would never acknowledge them) */
    for (int i = 0; i < s->comm->nlinger;)
        if (s->comm->linger[i].call == s->call)
            zc_sched_linger_drop(s->comm, i, 0, NULL);
        else
            i++;
    for (int i = s->first_open; i < s->nops; i++) {
        zc_op_t *op = &s->ops[i];
        if (op->state != ZC_OP_WAITING || !op->bytes_at)
            continue;
        if (!tried++)
            snprintf(detail, sizeof(detail), "%s", zc_get_last_error());
        op->notice.notice = (zc_sched_notice_t){ZC_SCHED_NOTICE_MARKER, (int32_t)st, rank};
        if (zc_sched_post_notice(s, op) == ZC_OK)
            op->state = ZC_OP_POSTED;
    }
    if (tried) {
        s->comm->host_ops->progress(s->comm->host);
        zc_error(st, "%s", detail);  /* what failed, not a notice's post */
    }
    return st;
}

zc_status_t zc_sched_notice_check(const void *msg, int from)
{
    zc_sched_notice_t n;

    memcpy(&n, msg, sizeof(n));
    if (n.marker != ZC_SCHED_NOTICE_MARKER)
        return ZC_OK;
    if (n.rank < 0)
        return zc_error((zc_status_t)n.status, "rank %d could not forward its part of this "
                        "collective (%s)", from, zc_strerror((zc_status_t)n.status));
    return zc_error((zc_status_t)n.status, "rank %d could not forward its part of this "
                    "collective (%s: rank %d)", from, zc_strerror((zc_status_t)n.status), n.rank);
}

static int zc_op_ready(const zc_sched_t *s, const zc_op_t *op)
{
    for (int d = 0; d < 2; d++)
        if (op->dep[d] >= 0 && s->ops[op->dep[d]].state != ZC_OP_DONE)
            return 0;
    return 1;
}

/* One pass: progress the transport when `progress`, post what became
 * ready, finish what completed.  An op is posted before its completion is
 * looked at, so a send that completed in place is finished in the same
 * visit, and ops after it that depend on it go in the same pass: after a
 * pass nothing is left to do until the transport moves again.  *moved
 * tells whether anything happened (for the timeout, which counts from the
 * last progress). */
static zc_status_t zc_sched_pass(zc_sched_t *s, int progress, int *moved)
{
    int open = -1;  /* the first op not done */

    if (progress)
        zc_comm_progress(s->comm);
    for (int i = s->first_open; i < s->nops; i++) {
        zc_op_t *op = &s->ops[i];
        if (op->state == ZC_OP_WAITING && zc_op_ready(s, op)) {
            if (op->kind == ZC_OP_COPY) {
                memmove(op->buf, op->src, op->bytes);
                op->state = ZC_OP_DONE;
            } else if (op->kind == ZC_OP_WIRE) {
                op->state = ZC_OP_POSTED;  /* polled below */
            } else if (op->kind == ZC_OP_CALL) {
                zc_status_t st = op->fn(op->buf, op->peer);
                op = &s->ops[i];  /* the call may have added ops (and moved the array) */
                if (st == ZC_OK && s->error)
                    st = s->error;  /* it ran out of memory adding them */
                if (st != ZC_OK)
                    return zc_sched_fail(s, st, -1);
                op->state = ZC_OP_DONE;
            } else {
                if (op->bytes_at)
                    op->bytes = *op->bytes_at;
                zc_status_t st = zc_sched_wires(s, op)
                                     ? zc_sched_post_wire(s, op)
                                     : zc_p2p_post_flags(s->comm, op->dir, op->buf, op->bytes,
                                                         op->peer, op->tag, op->rail, op->flags,
                                                         &op->req);
                if (st != ZC_OK)
                    return zc_sched_fail(s, st, op->peer);
                op->state = ZC_OP_POSTED;
            }
            *moved = 1;
        }
        if (op->state == ZC_OP_POSTED && op->wire) {
            zc_status_t st = zc_wire_poll(op->wire, moved);
            if (st < 0)
                return zc_sched_fail(s, st, op->peer);
            /* a message is sent once UCX took it; a routed slice or a
             * block (ZC_OP_WIRE) once its receiver has it */
            if (st == ZC_INPROGRESS && op->kind == ZC_OP_P2P && zc_wire_handed(op->wire) &&
                zc_sched_linger(s, op))
                st = ZC_OK;
            if (st == ZC_OK) {
                zc_wire_destroy(op->wire);
                op->wire = NULL;
                op->state = ZC_OP_DONE;
                *moved = 1;
            }
        }
        if (op->state == ZC_OP_POSTED && op->req && op->req->done) {
            zc_status_t st = op->req->status;
            /* A transport error with a dead peer is its failure (e.g. UCX's
             * "Shared memory error" for a killed rank of this node). */
            if (st == ZC_ERR_TRANSPORT && zc_comm_peer_failed(s->comm, op->peer)) {
                char detail[256];
                snprintf(detail, sizeof(detail), "%s", zc_get_last_error());
                st = zc_error(ZC_ERR_PEER_FAILED, "rank %d failed during a collective (%s)",
                              op->peer, detail);
            }
            zc_p2p_abandon(&op->req, st);  /* done: only frees it */
            if (st != ZC_OK)
                return zc_sched_fail(s, st, op->peer);
            op->state = ZC_OP_DONE;
            *moved = 1;
        }
        if (op->state != ZC_OP_DONE && open < 0)
            open = i;
    }
    s->first_open = open < 0 ? s->nops : open;
    return open < 0 ? ZC_OK : ZC_INPROGRESS;
}

zc_status_t zc_sched_test(zc_sched_t *s)
{
    int moved = 0;

    if (s->error)
        return s->error;
    return zc_sched_pass(s, 1, &moved);
}

/* The timeout: it names the peer of the first posted send or receive
 * (ops before it are done, and a local step's `peer` is no rank). */
static zc_status_t zc_sched_timeout(zc_sched_t *s)
{
    /* what is still open, for a debug log */
    for (int i = s->first_open; i < s->nops && zc_log_level() >= ZC_LOG_DEBUG; i++)
        if (s->ops[i].kind == ZC_OP_P2P && s->ops[i].state == ZC_OP_POSTED)
            zc_log_debug("timed out with a %s of %zu bytes %s rank %d open (tag 0x%llx)",
                         s->ops[i].dir == ZC_REQ_SEND ? "send" : "receive", s->ops[i].bytes,
                         s->ops[i].dir == ZC_REQ_SEND ? "to" : "from", s->ops[i].peer,
                         (unsigned long long)s->ops[i].tag);
    for (int i = s->first_open; i < s->nops; i++)
        if ((s->ops[i].kind == ZC_OP_P2P || s->ops[i].kind == ZC_OP_WIRE) &&
            s->ops[i].state == ZC_OP_POSTED)
            return zc_sched_fail(s, zc_error(ZC_ERR_TIMEOUT,
                                             "a collective made no progress for %d ms (waiting "
                                             "on rank %d)", s->comm->timeout_ms,
                                             s->ops[i].peer),
                                 s->ops[i].peer);
    return zc_sched_fail(s, zc_error(ZC_ERR_TIMEOUT, "a collective made no progress for %d ms",
                                     s->comm->timeout_ms), -1);
}

/* The first posted op whose peer is dead, or -1 (`now_ms`: the clock, read
 * once for the whole look). */
static int zc_sched_dead_peer(zc_sched_t *s, int64_t now_ms)
{
    for (int i = s->first_open; i < s->nops; i++)
        if (s->ops[i].state == ZC_OP_POSTED &&
            zc_comm_peer_failed_at(s->comm, s->ops[i].peer, now_ms))
            return s->ops[i].peer;
    return -1;
}

zc_status_t zc_sched_wait(zc_sched_t *s)
{
    int64_t deadline = -1;  /* set by the first look that finds nothing moved */

    if (s->error)
        return s->error;
    /* Only a pass after a sleep progresses every busy lane: otherwise the
     * spin's polls progress the lanes one at a time, and a progress of
     * every lane would cost a system call per rail (perf: half of a small
     * alltoallv's epoll_wait calls came from the passes; BENCHMARKS.md,
     * "Remap alltoallv").  A pass leaves nothing to do until the transport
     * moves, so a pass that moved something goes straight back to waiting,
     * and the clock is read once, by a pass that moved nothing (a crowded
     * rank passes some 15 times per small alltoallv: at a read or more per
     * pass and per posted op, the reads were 2% of its samples). */
    for (int progress = 0, drained = 0;;) {
        int moved = 0, dead, left = s->comm->timeout_ms;
        zc_status_t st = zc_sched_pass(s, progress, &moved);
        if (st != ZC_INPROGRESS)
            return st;
        if (moved) {
            deadline = -1;
            drained = 0;
        } else {
            int64_t now = zc_now_ms();
            if (deadline < 0)
                deadline = now + s->comm->timeout_ms;
            if ((dead = zc_sched_dead_peer(s, now)) >= 0) {
                /* A peer that sent its last message and ended may be seen
                 * dead before that message is taken: the collective fails
                 * on it only when a pass after draining the transport
                 * (zc_comm_drain) moved nothing. */
                if (!drained) {
                    zc_comm_drain(s->comm);
                    drained = 1;
                    progress = 0;
                    continue;
                }
                return zc_sched_fail(s, zc_error(ZC_ERR_PEER_FAILED,
                                                 "rank %d failed or left during a collective",
                                                 dead),
                                     dead);
            }
            left = deadline - now > 0 ? (int)(deadline - now) : 0;
            if (left == 0)
                return zc_sched_timeout(s);
        }
        progress = !zc_comm_idle(s->comm, left < ZC_SCHED_SLICE_MS ? left : ZC_SCHED_SLICE_MS);
    }
}

static zc_status_t zc_sched_drive_test(void *s)
{
    return zc_sched_test(s);
}

static zc_status_t zc_sched_drive_wait(void *s)
{
    return zc_sched_wait(s);
}

static void zc_sched_drive_destroy(void *s)
{
    zc_sched_destroy(s);
}

static const zc_request_driver_t zc_sched_driver = {
    .test = zc_sched_drive_test, .wait = zc_sched_drive_wait, .destroy = zc_sched_drive_destroy,
};

zc_status_t zc_sched_start(zc_sched_t *s, zc_request_h *request)
{
    zc_request_h req;
    int moved = 0;

    if (s->error) {
        zc_status_t st = s->error;
        zc_sched_destroy(s);
        return st;
    }
    req = zc_request_new(s->comm);
    if (!req) {
        zc_sched_destroy(s);
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate a request");
    }
    req->comm = s->comm;
    req->kind = ZC_REQ_SCHED;
    req->peer = -1;
    req->sched = s;
    req->driver = &zc_sched_driver;
    /* Post what can go now.  A failure here (the verdict of a collective
     * whose messages are all in) surfaces in zc_wait or zc_test, which
     * clear the last error: the request keeps its message, as a failed
     * point-to-point request does. */
    if (zc_sched_pass(s, 1, &moved) < 0)
        req->detail = strdup(zc_get_last_error());
    *request = req;
    return ZC_OK;
}
