/* The stream engine of zc_ring_attn_fwd_stream/bwd_stream (see
 * src/coll/ring_attn/stream_engine.h): the host engine's ring groups, gathers and local
 * zone (same groups, same routed calls, same kernel segments), enqueued on
 * a compute stream and a communication stream.
 *
 * The order of the communication stream.  NCCL matches the sends and
 * receives of two ranks in the order they are enqueued, so every rank
 * walks one sequence: groups in plan order, in each the hops step by step
 * (backward: KV into step s + 1, then dK/dV after step s), each hop as one
 * group of its direct transfers followed by its routed call.  A rank
 * enqueues the hops of the groups it is in and the routed calls of every
 * group (it may be a proxy of any, and a call that does not concern it
 * enqueues nothing).  Either stream waits only on events recorded before
 * it in that sequence, so no two streams of any ranks can wait on each
 * other.
 *
 * A backward call keeps the forward queue order here (inter-node,
 * intra-node, local): ZC_RING_ATTN_BWD_ORDER=reverse applies to the host
 * engine only, whose backward computes on the caller's thread between
 * transfers; here both streams overlap whatever the order, and the order
 * was measured on the host engine alone (BENCHMARKS.md).
 *
 * A ring group at position p of G.  Forward: p's K|V is packed into
 * kv[0]; hop s + 1 (send kv[s % 2] on, receive kv[(s + 1) % 2]) waits
 * until step s - 1 has computed on the buffer it receives into, and step s
 * waits for hop s, so each hop moves while the previous step computes.
 * Backward: the same KV hops; step s computes into a zeroed fp32 partial
 * dp[s % 2], adds the accumulator din[(s - 1) % 2] received after step
 * s - 1, and hop dK/dV s sends the sum on, as the host engine does
 * (src/coll/ring_attn/ring.c).  After the last step one more hop brings every
 * owner's accumulator home.
 *
 * Reach (src/coll/ring_attn/groups.c): under a window or the full mask a
 * Zeppelin ring moves owner o's KV only as far as g->last[o], as the host
 * engine does.  Every rank derives the same reaches from the plan and the
 * agreed mask, so a hop that carries nothing is left out of the NCCL
 * groups on both of its ends, and the routed calls list only the hops
 * that carry; a position past an owner's reach computes nothing at that
 * step.  An accumulator whose chain ends before the ring closes goes home
 * directly from its last position, in the same NCCL group as that step's
 * dK/dV hop on both ends (the sender's step and the owner's receive are
 * the same step, so the groups of every rank still match step by step).
 *
 * LLaMA CP mode: one group of sends and receives all-gathers K and V (and,
 * backward, one more reduce-scatters dK/dV); copies on the compute stream
 * put the gathered rows in sequence order.
 *
 * Memory: the accumulators, ring buffers and gathers are taken from the
 * arena the communicator keeps (stream_keep.c), the ring groups and the
 * routed-call list from its layouts (state.c): a call of a shape seen
 * before allocates nothing. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/abi.h"
#include "src/common/clock.h"
#include "src/coll/ring_attn/stream_engine.h"
#include "src/common/status.h"

typedef struct {
    zc_ra_ctx_t *ra;
    const zc_ds_ops_t *ops;
    void *dev;
    zc_ras_keep_t *keep;      /* the memory it takes */
    int next_event;
    void *kv[2];              /* ring: packed K|V blocks */
    float *dp[2], *din[2];    /* ring backward: dK|dV partials sent, accumulators received */
    float *home;              /* ring backward: this rank's accumulator sent home directly */
} zc_ras_t;

/* Record a new event on `on`. */
static zc_status_t zc_ras_signal(zc_ras_t *s, zc_ds_stream_t on, int *event)
{
    *event = s->next_event++;
    return s->ops->record(s->dev, on, *event);
}

/* `on` waits for `event` (-1: nothing to wait for). */
static zc_status_t zc_ras_after(zc_ras_t *s, zc_ds_stream_t on, int event)
{
    return event < 0 ? ZC_OK : s->ops->wait(s->dev, on, event);
}

/* The communication stream waits for everything the compute stream has
 * been given so far. */
static zc_status_t zc_ras_handoff(zc_ras_t *s)
{
    int event;

    ZC_CHECK(zc_ras_signal(s, ZC_DS_COMPUTE, &event));
    return zc_ras_after(s, ZC_DS_COMM, event);
}

/* And the reverse: the compute stream waits for every transfer so far. */
static zc_status_t zc_ras_handback(zc_ras_t *s)
{
    int event;

    ZC_CHECK(zc_ras_signal(s, ZC_DS_COMM, &event));
    return zc_ras_after(s, ZC_DS_COMPUTE, event);
}

/* A group of transfers that nothing overlaps (LLaMA CP): after all the
 * compute so far, and before all that follows. */
static zc_status_t zc_ras_exchange(zc_ras_t *s, const zc_device_op_t *ops, int n)
{
    ZC_CHECK(zc_ras_handoff(s));
    if (n > 0)
        ZC_CHECK(s->ops->group(s->dev, ops, n));
    return zc_ras_handback(s);
}

/* ---- ring groups ---------------------------------------------------------- */

/* Routed call `call` of the list (-1: none): the rank's own buffers when it
 * is the call's source or destination, NULL as a proxy or a bystander. */
static zc_status_t zc_ras_routed(zc_ras_t *s, int call, const void *sendbuf, void *recvbuf)
{
    const zc_ra_routed_t *c;

    if (call < 0)
        return ZC_OK;
    c = &s->ra->routed[call];
    return s->ops->routed(s->dev, c->transfers, c->ntransfers, sendbuf, recvbuf);
}

/* One hop of group gi for a member: its direct transfers as one group
 * with `more` (the accumulators that go home directly), then the routed
 * call.  Zero bytes: no transfer (both sides know it from the layout). */
static zc_status_t zc_ras_hop(zc_ras_t *s, int gi, int call, const void *sendbuf,
                              size_t send_bytes, void *recvbuf, size_t recv_bytes,
                              const zc_device_op_t *more, int nmore)
{
    zc_ra_ctx_t *ra = s->ra;
    const zc_ra_group_t *g = &ra->groups[gi];
    int p = g->pos, G = g->G, prev = (p + G - 1) % G;
    int routed_out = g->routed[p] && send_bytes > 0, routed_in = g->routed[prev] && recv_bytes > 0;
    zc_device_op_t ops[4];
    int n = 0;

    if (!routed_in && recv_bytes > 0)
        ops[n++] = (zc_device_op_t){ZC_REQ_RECV, recvbuf, recv_bytes, g->members[prev].rank};
    if (!routed_out && send_bytes > 0)
        ops[n++] = (zc_device_op_t){ZC_REQ_SEND, (void *)sendbuf, send_bytes,
                                    g->members[(p + 1) % G].rank};
    ra->stats.bytes_sent += send_bytes;
    for (int i = 0; i < nmore; i++) {
        ops[n++] = more[i];
        if (more[i].kind == ZC_REQ_SEND)
            ra->stats.bytes_sent += more[i].bytes;
    }
    if (n > 0)
        ZC_CHECK(s->ops->group(s->dev, ops, n));
    return zc_ras_routed(s, call, routed_out ? sendbuf : NULL, routed_in ? recvbuf : NULL);
}

/* A group this rank is not in: only the routed calls, in the order its
 * members make them, in case the rank proxies one of them (the planner's
 * inter-node rings span whole nodes, so with its plans the proxies are
 * members and these calls enqueue nothing). */
static zc_status_t zc_ras_bystander(zc_ras_t *s, const zc_ra_group_t *g)
{
    for (int st = 0; st < g->G; st++) {
        if (st + 1 < g->G)
            ZC_CHECK(zc_ras_routed(s, g->kv_call[st + 1], NULL, NULL));
        if (s->ra->backward)
            ZC_CHECK(zc_ras_routed(s, g->dkv_call[st], NULL, NULL));
    }
    return ZC_OK;
}

/* KV hop into step st + 1 once the last step that computed on the buffer
 * it receives into is done with it; only as far as the owners' reach. */
static zc_status_t zc_ras_kv_hop(zc_ras_t *s, int gi, int st, const int computed[2],
                                 int arrived[2])
{
    zc_ra_ctx_t *ra = s->ra;
    const zc_ra_group_t *g = &ra->groups[gi];
    size_t out, in;

    zc_ra_kv_step_bytes(ra, g, st, &out, &in);
    ZC_CHECK(zc_ras_after(s, ZC_DS_COMM, computed[(st + 1) % 2]));
    ZC_CHECK(zc_ras_hop(s, gi, g->kv_call[st + 1], s->kv[st % 2], out, s->kv[(st + 1) % 2], in,
                        NULL, 0));
    return zc_ras_signal(s, ZC_DS_COMM, &arrived[(st + 1) % 2]);
}

static zc_status_t zc_ras_ring_fwd(zc_ras_t *s, int gi)
{
    zc_ra_ctx_t *ra = s->ra;
    const zc_ra_group_t *g = &ra->groups[gi];
    const zc_ra_member_t *me = &g->members[g->pos];
    int computed[2] = {-1, -1}, arrived[2] = {-1, -1};

    ZC_CHECK(zc_ra_pack_own(ra, g, s->kv[0]));
    ZC_CHECK(zc_ras_handoff(s));
    for (int st = 0; st < g->G; st++) {
        zc_ra_kv_t block = zc_ra_block(ra, zc_ra_owner(g, st), s->kv[st % 2], NULL);

        if (st + 1 < g->G)
            ZC_CHECK(zc_ras_kv_hop(s, gi, st, computed, arrived));
        if (!zc_ra_holds(g, g->pos, st))
            continue; /* past its owner's reach: nothing arrived */
        ZC_CHECK(zc_ras_after(s, ZC_DS_COMPUTE, arrived[st % 2]));
        ZC_CHECK(zc_ra_compute(ra, me->pieces, me->npieces, me->row0, &block));
        ZC_CHECK(zc_ras_signal(s, ZC_DS_COMPUTE, &computed[st % 2]));
    }
    /* every hop done before the buffers serve the next group (the last
     * steps may have computed nothing, and so waited for none of them) */
    return zc_ras_handback(s);
}

static zc_status_t zc_ras_ring_bwd(zc_ras_t *s, int gi)
{
    zc_ra_ctx_t *ra = s->ra;
    const zc_ra_group_t *g = &ra->groups[gi];
    const zc_ra_member_t *me = &g->members[g->pos], *from = zc_ra_home_from(g);
    int computed[2] = {-1, -1}, arrived[2] = {-1, -1}, returned[2] = {-1, -1}, summed;
    int last = g->last[g->pos];
    const float *home;

    ZC_CHECK(zc_ra_pack_own(ra, g, s->kv[0]));
    ZC_CHECK(zc_ras_handoff(s));
    for (int st = 0; st < g->G; st++) {
        const zc_ra_member_t *owner = zc_ra_owner(g, st);
        size_t dbytes = zc_ra_dkv_bytes(ra, owner->tokens), out, in;
        zc_ra_kv_t block = zc_ra_block(ra, owner, s->kv[st % 2], s->dp[st % 2]);
        zc_device_op_t more[2];
        int nmore = 0;

        if (st + 1 < g->G)
            ZC_CHECK(zc_ras_kv_hop(s, gi, st, computed, arrived));
        if (zc_ra_holds(g, g->pos, st)) {
            /* dp[st % 2] left with the last dK/dV hop of its parity */
            ZC_CHECK(zc_ras_after(s, ZC_DS_COMPUTE, returned[st % 2]));
            ZC_CHECK(zc_ras_after(s, ZC_DS_COMPUTE, arrived[st % 2]));
            ZC_CHECK(s->ops->fill(s->dev, s->dp[st % 2], dbytes / sizeof(float), 0.0f));
            ZC_CHECK(zc_ra_compute(ra, me->pieces, me->npieces, me->row0, &block));
            ZC_CHECK(zc_ras_signal(s, ZC_DS_COMPUTE, &computed[st % 2]));
            if (st > 0) {
                /* it holds a block at st > 0: the accumulator came along */
                ZC_CHECK(zc_ras_after(s, ZC_DS_COMPUTE, returned[(st - 1) % 2]));
                ZC_CHECK(s->ops->add(s->dev, s->dp[st % 2], s->din[(st - 1) % 2],
                                     dbytes / sizeof(float)));
            }
            if (st == 0 && last == 0) /* nobody else sees this rank's keys */
                ZC_CHECK(zc_ra_store_dkv(ra, s->dp[0], s->dp[0] + (size_t)me->tokens *
                                                                      (size_t)ra->row_kv,
                                         me->tokens, me->row0));
            if (zc_ra_dkv_home(g, g->pos, st))
                more[nmore++] = (zc_device_op_t){ZC_REQ_SEND, s->dp[st % 2], dbytes, owner->rank};
        }
        if (from && st == last)
            more[nmore++] = (zc_device_op_t){ZC_REQ_RECV, s->home,
                                             zc_ra_dkv_bytes(ra, me->tokens), from->rank};
        if (g->G == 1)
            break;
        /* the accumulator of owner p - st goes on (only from a position its
         * KV reached); p - 1 sends that of p - 1 - st */
        zc_ra_dkv_step_bytes(ra, g, st, &out, &in);
        ZC_CHECK(zc_ras_signal(s, ZC_DS_COMPUTE, &summed));
        ZC_CHECK(zc_ras_after(s, ZC_DS_COMM, summed));
        ZC_CHECK(zc_ras_hop(s, gi, g->dkv_call[st], s->dp[st % 2], out, s->din[st % 2], in, more,
                            nmore));
        ZC_CHECK(zc_ras_signal(s, ZC_DS_COMM, &returned[st % 2]));
    }
    /* every hop done: the accumulator is home, and the buffers serve the
     * next group */
    ZC_CHECK(zc_ras_handback(s));
    if (last == 0)
        return ZC_OK;
    home = from ? s->home : s->din[(g->G - 1) % 2]; /* directly, or the hop after step G - 1 */
    return zc_ra_store_dkv(ra, home, home + (size_t)me->tokens * (size_t)ra->row_kv, me->tokens,
                            me->row0);
}

/* ---- LLaMA CP: gather and scatter --------------------------------------- */

/* All-gather K and V of group gi, sequence-major, into *k, *v. */
static zc_status_t zc_ras_allgather(zc_ras_t *s, int gi, const zc_ra_gathered_t *lay, void **k,
                                    void **v)
{
    zc_ra_ctx_t *ra = s->ra;
    const zc_ra_group_t *g = &ra->groups[gi];
    const zc_ra_member_t *me = &g->members[g->pos];
    size_t row = (size_t)ra->row_kv * ra->elem, bytes = (size_t)lay->total * row;
    size_t mine = (size_t)me->tokens * row, at_me = (size_t)lay->owner_row[g->pos] * row;
    const char *own_k = (const char *)ra->args->k + (size_t)me->row0 * row;
    const char *own_v = (const char *)ra->args->v + (size_t)me->row0 * row;
    zc_device_op_t *ops;
    void *gk, *gv;
    int n = 0;
    zc_status_t st = ZC_OK;

    ZC_CHECK(zc_ras_keep_take(s->keep, bytes, &gk));
    ZC_CHECK(zc_ras_keep_take(s->keep, bytes, &gv));
    ZC_CHECK(zc_ras_keep_take(s->keep, bytes, k));
    ZC_CHECK(zc_ras_keep_take(s->keep, bytes, v));
    ops = malloc(4 * (size_t)g->G * sizeof(*ops));
    if (!ops)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate a gather of %d", g->G);
    for (int o = 0; o < g->G; o++) {
        size_t at = (size_t)lay->owner_row[o] * row, len = (size_t)g->members[o].tokens * row;
        int peer = g->members[o].rank;

        if (o == g->pos)
            continue;
        if (len > 0) {
            ops[n++] = (zc_device_op_t){ZC_REQ_RECV, (char *)gk + at, len, peer};
            ops[n++] = (zc_device_op_t){ZC_REQ_RECV, (char *)gv + at, len, peer};
        }
        if (mine > 0) {
            ops[n++] = (zc_device_op_t){ZC_REQ_SEND, (void *)own_k, mine, peer};
            ops[n++] = (zc_device_op_t){ZC_REQ_SEND, (void *)own_v, mine, peer};
            ra->stats.bytes_sent += 2 * mine;
        }
    }
    if (mine > 0) {
        ZC_CHECK_GOTO(zc_ra_copy(ra, (char *)gk + at_me, own_k, mine), st, out);
        ZC_CHECK_GOTO(zc_ra_copy(ra, (char *)gv + at_me, own_v, mine), st, out);
    }
    ZC_CHECK_GOTO(zc_ras_exchange(s, ops, n), st, out);
    ZC_CHECK_GOTO(zc_ra_permute(g, lay, row, gk, *k, 1, zc_ra_copy_cb, ra), st, out);
    st = zc_ra_permute(g, lay, row, gv, *v, 1, zc_ra_copy_cb, ra);
out:
    free(ops);
    return st;
}

static zc_status_t zc_ras_gather_fwd(zc_ras_t *s, int gi)
{
    zc_ra_ctx_t *ra = s->ra;
    const zc_ra_group_t *g = &ra->groups[gi];
    const zc_ra_member_t *me = &g->members[g->pos];
    const zc_ra_gathered_t *lay;
    zc_ra_kv_t kv = {0};
    void *k, *v;
    zc_ras_mark_t mark = zc_ras_keep_mark(s->keep);

    lay = &ra->layout->gathered[gi];
    ZC_CHECK(zc_ras_allgather(s, gi, lay, &k, &v));
    kv = (zc_ra_kv_t){.pieces = lay->seqs, .npieces = (size_t)g->nrings, .k = k, .v = v};
    ZC_CHECK(zc_ra_compute(ra, me->pieces, me->npieces, me->row0, &kv));
    zc_ras_keep_back(s->keep, mark); /* the gather is over: nothing of it is in flight */
    return ZC_OK;
}

/* dK/dV partials of every gathered key back to their owners, summed there. */
static zc_status_t zc_ras_scatter(zc_ras_t *s, int gi, const zc_ra_gathered_t *lay,
                                  float *down, float *drecv)
{
    zc_ra_ctx_t *ra = s->ra;
    const zc_ra_group_t *g = &ra->groups[gi];
    const zc_ra_member_t *me = &g->members[g->pos];
    size_t half = (size_t)lay->total * (size_t)ra->row_kv;
    size_t mine = (size_t)me->tokens * (size_t)ra->row_kv;
    float *dk = down + (size_t)lay->owner_row[g->pos] * (size_t)ra->row_kv;
    zc_device_op_t *ops = malloc(4 * (size_t)g->G * sizeof(*ops));
    int n = 0, slot = 0;
    zc_status_t st = ZC_OK;

    if (!ops)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate a scatter of %d",
                        g->G);
    for (int o = 0; o < g->G; o++) {
        size_t at = (size_t)lay->owner_row[o] * (size_t)ra->row_kv;
        size_t len = (size_t)g->members[o].tokens * (size_t)ra->row_kv * sizeof(float);
        float *in = drecv + 2 * mine * (size_t)slot;
        int peer = g->members[o].rank;

        if (o == g->pos)
            continue;
        slot++;
        if (mine > 0) {
            ops[n++] = (zc_device_op_t){ZC_REQ_RECV, in, mine * sizeof(float), peer};
            ops[n++] = (zc_device_op_t){ZC_REQ_RECV, in + mine, mine * sizeof(float), peer};
        }
        if (len > 0) {
            ops[n++] = (zc_device_op_t){ZC_REQ_SEND, down + at, len, peer};
            ops[n++] = (zc_device_op_t){ZC_REQ_SEND, down + half + at, len, peer};
            ra->stats.bytes_sent += 2 * len;
        }
    }
    ZC_CHECK_GOTO(zc_ras_exchange(s, ops, n), st, out);
    for (int i = 0; i < slot && mine > 0; i++) {
        ZC_CHECK_GOTO(s->ops->add(s->dev, dk, drecv + 2 * mine * (size_t)i, mine), st, out);
        ZC_CHECK_GOTO(s->ops->add(s->dev, dk + half, drecv + 2 * mine * (size_t)i + mine, mine),
                      st, out);
    }
    st = zc_ra_store_dkv(ra, dk, dk + half, me->tokens, me->row0);
out:
    free(ops);
    return st;
}

static zc_status_t zc_ras_gather_bwd(zc_ras_t *s, int gi)
{
    zc_ra_ctx_t *ra = s->ra;
    const zc_ra_group_t *g = &ra->groups[gi];
    const zc_ra_member_t *me = &g->members[g->pos];
    size_t half, mine, frow = (size_t)ra->row_kv * sizeof(float);
    const zc_ra_gathered_t *lay;
    zc_ra_kv_t kv;
    void *k, *v, *dseq, *down, *drecv;
    zc_ras_mark_t mark = zc_ras_keep_mark(s->keep);

    lay = &ra->layout->gathered[gi];
    ZC_CHECK(zc_ras_allgather(s, gi, lay, &k, &v));
    half = (size_t)lay->total * (size_t)ra->row_kv;
    mine = (size_t)me->tokens * (size_t)ra->row_kv;
    ZC_CHECK(zc_ras_keep_take(s->keep, 2 * half * sizeof(float), &dseq));
    ZC_CHECK(zc_ras_keep_take(s->keep, 2 * half * sizeof(float), &down));
    ZC_CHECK(zc_ras_keep_take(s->keep,
                              2 * mine * (size_t)(g->G > 1 ? g->G - 1 : 1) * sizeof(float),
                              &drecv));
    ZC_CHECK(s->ops->fill(s->dev, dseq, 2 * half, 0.0f));
    kv = (zc_ra_kv_t){.pieces = lay->seqs, .npieces = (size_t)g->nrings, .k = k, .v = v,
                      .dk = dseq, .dv = (float *)dseq + half};
    ZC_CHECK(zc_ra_compute(ra, me->pieces, me->npieces, me->row0, &kv));
    /* back to owner-major, then every owner's rows to their owner */
    ZC_CHECK(zc_ra_permute(g, lay, frow, dseq, down, 0, zc_ra_copy_cb, ra));
    ZC_CHECK(zc_ra_permute(g, lay, frow, (float *)dseq + half, (float *)down + half, 0,
                           zc_ra_copy_cb, ra));
    ZC_CHECK(zc_ras_scatter(s, gi, lay, down, drecv));
    zc_ras_keep_back(s->keep, mark); /* the scatter waited for its transfers */
    return ZC_OK;
}

/* ---- the call ------------------------------------------------------------- */

/* The local zone: whole sequences of this rank, no communication. */
static zc_status_t zc_ras_local(zc_ras_t *s)
{
    zc_ra_ctx_t *ra = s->ra;
    const zc_plan_piece_t *lp = ra->pieces + ra->local_first;
    size_t n = ra->npieces - ra->local_first, row = (size_t)ra->row_kv * ra->elem;
    int64_t tokens = ra->tokens - ra->local_row0;
    size_t half = (size_t)tokens * (size_t)ra->row_kv;
    zc_ra_kv_t kv = {.pieces = lp, .npieces = n,
                     .k = (const char *)ra->args->k + (size_t)ra->local_row0 * row,
                     .v = (const char *)ra->args->v + (size_t)ra->local_row0 * row};
    void *dkv;

    if (n == 0)
        return ZC_OK;
    if (!ra->backward)
        return zc_ra_compute(ra, lp, n, ra->local_row0, &kv);
    ZC_CHECK(zc_ras_keep_take(s->keep, 2 * half * sizeof(float), &dkv));
    ZC_CHECK(s->ops->fill(s->dev, dkv, 2 * half, 0.0f));
    kv.dk = dkv;
    kv.dv = (float *)dkv + half;
    ZC_CHECK(zc_ra_compute(ra, lp, n, ra->local_row0, &kv));
    return zc_ra_store_dkv(ra, kv.dk, kv.dv, tokens, ra->local_row0);
}

/* fp32 out and lse (forward), or dq and delta (backward), over this
 * rank's rows; the caller's out or dq serves when it is fp32. */
static zc_status_t zc_ras_accumulators(zc_ras_t *s)
{
    zc_ra_ctx_t *ra = s->ra;
    const zc_ring_attn_args_t *a = ra->args;
    size_t rows = (size_t)(ra->tokens * ra->row_q), lse = (size_t)ra->tokens * a->num_heads_q;
    float *acc = a->dtype == ZC_FLOAT32 ? (ra->backward ? a->dq : a->out) : NULL;
    void *mem;

    if (!acc) {
        ZC_CHECK(zc_ras_keep_take(s->keep, rows * sizeof(float), &mem));
        acc = mem;
    }
    if (rows > 0)
        ZC_CHECK(s->ops->fill(s->dev, acc, rows, 0.0f));
    if (!ra->backward) {
        ra->out_acc = acc;
        return lse > 0 ? s->ops->fill(s->dev, a->lse, lse, -INFINITY) : ZC_OK;
    }
    ra->dq_acc = acc;
    ZC_CHECK(zc_ras_keep_take(s->keep, lse * sizeof(float), &mem));
    ra->delta = mem;
    if (ra->tokens > 0) {
        int32_t cu_q[2], cu_kv[2];
        zc_attn_args_t d = zc_ra_delta_args(ra, cu_q, cu_kv);
        zc_attn_route_t route;

        ZC_CHECK(s->ops->attn(s->dev, ZC_DS_DELTA, &d, &route));
    }
    return ZC_OK;
}

/* The ring buffers, sized for the largest group this rank is in, and the
 * one an accumulator comes home to directly (backward, under a reach). */
static zc_status_t zc_ras_ring_buffers(zc_ras_t *s)
{
    zc_ra_ctx_t *ra = s->ra;
    int64_t most = -1;
    int home = 0;

    for (int gi = 0; gi < ra->ngroups; gi++)
        if (ra->groups[gi].pos >= 0) {
            if (ra->groups[gi].max_tokens > most)
                most = ra->groups[gi].max_tokens;
            home |= zc_ra_home_from(&ra->groups[gi]) != NULL;
        }
    if (most < 0 || ra->args->mode == ZC_RING_ATTN_LLAMA_CP)
        return ZC_OK;
    for (int i = 0; i < 2; i++) {
        void *mem;

        ZC_CHECK(zc_ras_keep_take(s->keep, zc_ra_kv_bytes(ra, most), &s->kv[i]));
        if (!ra->backward)
            continue;
        ZC_CHECK(zc_ras_keep_take(s->keep, zc_ra_dkv_bytes(ra, most), &mem));
        s->dp[i] = mem;
        ZC_CHECK(zc_ras_keep_take(s->keep, zc_ra_dkv_bytes(ra, most), &mem));
        s->din[i] = mem;
    }
    if (ra->backward && home) {
        void *mem;

        ZC_CHECK(zc_ras_keep_take(s->keep, zc_ra_dkv_bytes(ra, most), &mem));
        s->home = mem;
    }
    return ZC_OK;
}

static zc_status_t zc_ras_run(zc_ras_t *s)
{
    zc_ra_ctx_t *ra = s->ra;
    const zc_ring_attn_args_t *a = ra->args;

    ZC_CHECK(zc_ras_keep_begin(s->keep));
    ZC_CHECK(zc_ras_accumulators(s));
    ZC_CHECK(zc_ras_ring_buffers(s));
    for (int gi = 0; gi < ra->ngroups; gi++) {
        if (ra->groups[gi].pos < 0)
            ZC_CHECK(zc_ras_bystander(s, &ra->groups[gi]));
        else if (a->mode == ZC_RING_ATTN_LLAMA_CP)
            ZC_CHECK(ra->backward ? zc_ras_gather_bwd(s, gi) : zc_ras_gather_fwd(s, gi));
        else
            ZC_CHECK(ra->backward ? zc_ras_ring_bwd(s, gi) : zc_ras_ring_fwd(s, gi));
    }
    ZC_CHECK(zc_ras_local(s));
    if (a->dtype != ZC_FLOAT32)
        ZC_CHECK(zc_ra_round_acc(ra));
    return ZC_OK;
}

/* After a failure (see stream_engine.h): the device backend aborted, the
 * stream state gone; the failure's message stays the last error. */
static void zc_ras_fail(zc_comm_h comm, zc_status_t st)
{
    zc_ra_state_t *state = comm->ring_attn;
    char why[512];

    snprintf(why, sizeof(why), "%s", zc_get_last_error());
    if (comm->device)
        zc_device_abort(comm->device, st);
    if (state)
        zc_ra_state_drop_stream(state);
    if (strcmp(why, zc_get_last_error()) != 0)
        (void)zc_error(st, "%s", why);
}

zc_status_t zc_ra_stream_run(zc_ra_ctx_t *ctx, zc_ras_keep_t *keep)
{
    zc_ras_t s = {.ra = ctx, .ops = zc_ras_keep_ops(keep), .dev = zc_ras_keep_dev(keep),
                  .keep = keep, .next_event = ZC_DS_EVENT_END + 1};
    double t0 = zc_now_sec();
    zc_status_t st, end;

    ctx->ds = s.ops;
    ctx->ds_dev = s.dev;
    ctx->slice_flops = 0; /* a round is one kernel call: the streams overlap it */
    st = zc_ras_run(&s);

    /* Whatever was enqueued, the caller's stream ends after all of it, and
     * the next call's after that (ZC_DS_EVENT_END). */
    end = zc_ras_handback(&s);
    if (end == ZC_OK)
        end = zc_ras_keep_end(keep);
    st = st != ZC_OK ? st : end;
    if (st == ZC_OK) /* everything enqueued: a kernel table's failure is every rank's */
        st = zc_ra_table_verdict(ctx);
    ctx->out_acc = ctx->dq_acc = ctx->delta = NULL;
    if (st != ZC_OK) {
        /* a kernel table's failure left no transfer unmatched */
        if (ctx->table.verdict == ZC_OK)
            zc_ras_fail(ctx->comm, st);
        return st;
    }
    /* the kernels run later: only the enqueueing was timed */
    ctx->stats.compute_seconds = ctx->stats.wait_seconds = 0;
    ctx->stats.total_seconds = zc_now_sec() - t0;
    if (ctx->args->stats)
        zc_abi_write(ctx->args->stats, &ctx->stats, sizeof(ctx->stats));
    return ZC_OK;
}
