/* Ring groups and the routed-call list of one zc_ring_attn call, built
 * from the plan alone so that every rank derives the same ones.
 *
 * A group is a run of consecutive rings of one zone (inter-node first, then
 * intra-node, rings by id: the plan's buffer order) whose ranks form the
 * same cycle.  The rings of a group share every hop, so one message per
 * hop carries the KV of all their sequences, as TransformerEngine's CP
 * does for a packed batch over its one global ring.  The groups are in
 * run order: a backward call in reverse order (ctx->reverse) stores them
 * last to first, so that the routed-call list and the group numbers in the
 * tags follow the order the groups run in on every rank.
 *
 * In Zeppelin mode the inter-node hops of a ring (zc_plan_ring_hops) go
 * through zc_routed_sendrecv, which every rank of the communicator must
 * call in the same order, with the same transfer list, whether it is in
 * the ring or not (it may be a proxy).  The list of those calls is fixed
 * here: per group, forward KV into steps 1..G-1; backward KV into step s+1
 * then dK/dV after step s, in the order a member posts them.
 *
 * Reach.  Under a mask other than causal (a window, or full), in the
 * Zeppelin and routing rings, owner o's KV goes only as far as the last
 * member of its chain o + 1, o + 2, ... whose queries see one of its keys
 * (g->last[o], its reach); the hops past it carry nothing, and a routed
 * call lists only the hops that carry.  Rings join a group only with the
 * same reaches, so that no hop carries one ring's KV further than that
 * ring's window reaches for another's sake.  Every rank derives the reaches
 * from the plan and the call's mask, which the agreement covers, so both
 * sides of a hop skip it alike, on the host engine and on the stream
 * engine, whose NCCL groups then match as they do round a whole ring
 * (src/coll/ring_attn/stream_engine.c).  A chain passes through a member
 * that sees nothing of it only to reach one further that does (a zigzag
 * ring, or a window open on both sides: the ring runs one way).  TE CP passes every
 * block all the way round, masked, as TransformerEngine does; the causal
 * mask keeps the whole ring too (every zigzag member sees every owner).
 *
 * All of it is a layout (zc_ra_layout_t) derived from the plan, the rank,
 * the mode, the pass, the queue order, the mask and the K|V row size
 * alone (the same for either engine), so a communicator keeps it across
 * calls (src/coll/ring_attn/state.c); with it, in LLaMA CP mode, where
 * each group's gathered rows go. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/coll/ring_attn/ring_attn.h"
#include "src/common/status.h"
#include "src/plan/plan.h"

/* Same cycle: b is a rotation of a. */
static int zc_ra_same_cycle(const zc_plan_ring_t *a, const zc_plan_ring_t *b)
{
    int shift = -1;

    if (a->nranks != b->nranks)
        return 0;
    for (int i = 0; i < b->nranks && shift < 0; i++)
        if (b->ranks[i] == a->ranks[0])
            shift = i;
    if (shift < 0)
        return 0;
    for (int i = 0; i < a->nranks; i++)
        if (b->ranks[(i + shift) % b->nranks] != a->ranks[i])
            return 0;
    return 1;
}

static int zc_ra_member_pos(const zc_ra_group_t *g, int rank)
{
    for (int i = 0; i < g->G; i++)
        if (g->members[i].rank == rank)
            return i;
    return -1;
}

/* Does any query of pieces qp see a key of pieces kp under mask m (same
 * ring and sequence, positions in the sequence)? */
static int zc_ra_pieces_see(const zc_plan_piece_t *qp, size_t nq, const zc_plan_piece_t *kp,
                            size_t nk, zc_attn_mask_t m)
{
    for (size_t i = 0; i < nq; i++)
        for (size_t j = 0; j < nk; j++) {
            int64_t lq = qp[i].end - qp[i].begin, lk = kp[j].end - kp[j].begin;
            int64_t first_lo, first_hi, last_lo, last_hi;

            if (qp[i].ring != kp[j].ring || qp[i].seq != kp[j].seq || lq == 0 || lk == 0)
                continue;
            /* its rows see the keys [first row's lo, last row's hi) */
            zc_attn_mask_keys(m, 0, qp[i].begin, kp[j].begin, lk, &first_lo, &first_hi);
            zc_attn_mask_keys(m, lq - 1, qp[i].begin, kp[j].begin, lk, &last_lo, &last_hi);
            if (first_lo < last_hi)
                return 1;
        }
    return 0;
}

/* Does the call's ring skip what its mask hides (see the top)? */
static int zc_ra_skips(const zc_ra_ctx_t *ctx)
{
    return !zc_attn_mask_is_causal(ctx->mask) && ctx->args->mode == ZC_RING_ATTN_ZEPPELIN;
}

/* Ring r's pieces on `rank`: one run of its buffer (ordered by ring). */
static void zc_ra_ring_pieces(const zc_ra_ctx_t *ctx, int r, int rank,
                              const zc_plan_piece_t **pieces, size_t *n)
{
    const zc_plan_piece_t *all;
    size_t count, i = 0;

    *pieces = NULL;
    *n = 0;
    if (zc_plan_rank_pieces(ctx->plan, rank, &all, &count) != ZC_OK)
        return;
    while (i < count && all[i].ring != r)
        i++;
    *pieces = all + i;
    while (i + *n < count && all[i + *n].ring == r)
        (*n)++;
}

/* Each member's reach as the owner of its KV in ring r, by rank. */
static void zc_ra_ring_reach(const zc_ra_ctx_t *ctx, int r, const zc_plan_ring_t *ring,
                             int *by_rank)
{
    int G = ring->nranks;

    for (int o = 0; o < G; o++) {
        const zc_plan_piece_t *kp, *qp;
        size_t nk, nq;
        int last = G - 1;

        if (zc_ra_skips(ctx)) {
            zc_ra_ring_pieces(ctx, r, ring->ranks[o], &kp, &nk);
            for (; last > 0; last--) {
                zc_ra_ring_pieces(ctx, r, ring->ranks[(o + last) % G], &qp, &nq);
                if (zc_ra_pieces_see(qp, nq, kp, nk, ctx->mask))
                    break;
            }
        }
        by_rank[ring->ranks[o]] = last;
    }
}

static int zc_ra_same_reach(const zc_plan_ring_t *ring, const int *a, const int *b)
{
    for (int i = 0; i < ring->nranks; i++)
        if (a[ring->ranks[i]] != b[ring->ranks[i]])
            return 0;
    return 1;
}

/* Groups of one zone, appended; ring_group[r] gets each ring's group.
 * reach and first_reach: room for every rank. */
static zc_status_t zc_ra_zone_groups(const zc_ra_ctx_t *ctx, zc_ra_layout_t *lay, zc_zone_t zone,
                                     int nrings, int *ring_group, int *reach, int *first_reach)
{
    zc_plan_ring_t first = {0}, ring;

    for (int r = 0; r < nrings; r++) {
        ZC_CHECK(zc_plan_ring(ctx->plan, r, &ring));
        if (ring.zone != zone)
            continue;
        zc_ra_ring_reach(ctx, r, &ring, reach);
        if (lay->ngroups == 0 || lay->groups[lay->ngroups - 1].zone != zone ||
            !zc_ra_same_cycle(&first, &ring) || !zc_ra_same_reach(&ring, reach, first_reach)) {
            zc_ra_group_t *g = &lay->groups[lay->ngroups++];

            first = ring;
            for (int i = 0; i < ring.nranks; i++)
                first_reach[ring.ranks[i]] = reach[ring.ranks[i]];
            g->zone = zone;
            g->G = ring.nranks;
            g->members = calloc((size_t)g->G, sizeof(*g->members));
            g->routed = calloc((size_t)g->G, 1);
            g->kv_call = malloc((size_t)g->G * sizeof(*g->kv_call));
            g->dkv_call = malloc((size_t)g->G * sizeof(*g->dkv_call));
            g->last = malloc((size_t)g->G * sizeof(*g->last));
            g->rings = lay->group_rings + lay->ngroup_rings;
            if (!g->members || !g->routed || !g->kv_call || !g->dkv_call || !g->last)
                return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate a group of %d",
                                g->G);
            for (int i = 0; i < g->G; i++) {
                g->members[i].rank = ring.ranks[i];
                g->kv_call[i] = g->dkv_call[i] = -1;
                g->last[i] = reach[ring.ranks[i]];
            }
            g->pos = zc_ra_member_pos(g, ctx->comm->rank);
            if (zone == ZC_ZONE_INTER && ctx->args->mode == ZC_RING_ATTN_ZEPPELIN) {
                const zc_plan_hop_t *hops;
                size_t nhops;

                ZC_CHECK(zc_plan_ring_hops(ctx->plan, r, &hops, &nhops));
                for (size_t h = 0; h < nhops; h++) {
                    int p = zc_ra_member_pos(g, hops[h].src_rank);
                    if (p >= 0 && g->members[(p + 1) % g->G].rank == hops[h].dst_rank)
                        g->routed[p] = 1;
                }
            }
        }
        ring_group[r] = lay->ngroups - 1;
        lay->group_rings[lay->ngroup_rings++] = r;
        lay->groups[lay->ngroups - 1].nrings++;
    }
    return ZC_OK;
}

/* Every rank's pieces of every group: one pass over each rank's pieces. */
static void zc_ra_member_pieces(const zc_ra_ctx_t *ctx, zc_ra_layout_t *lay,
                                const int *ring_group)
{
    int nranks = ctx->comm->size;

    for (int rank = 0; rank < nranks; rank++) {
        const zc_plan_piece_t *pieces;
        size_t n;
        int64_t row = 0;

        if (zc_plan_rank_pieces(ctx->plan, rank, &pieces, &n) != ZC_OK)
            continue;
        for (size_t i = 0; i < n; row += pieces[i].end - pieces[i].begin, i++) {
            zc_ra_group_t *g;
            zc_ra_member_t *m;
            int pos;

            if (pieces[i].ring < 0)
                continue;
            g = &lay->groups[ring_group[pieces[i].ring]];
            pos = zc_ra_member_pos(g, rank);
            if (pos < 0)
                continue; /* not reached: a rank holds pieces of its rings only */
            m = &g->members[pos];
            if (m->npieces == 0) {
                m->pieces = &pieces[i];
                m->row0 = row;
            }
            m->npieces++;
            m->tokens += pieces[i].end - pieces[i].begin;
            if (m->tokens > g->max_tokens)
                g->max_tokens = m->tokens;
        }
    }
}

int zc_ra_owner_at(const zc_ra_group_t *g, int p, int s)
{
    return ((p - s) % g->G + g->G) % g->G;
}

int zc_ra_holds(const zc_ra_group_t *g, int p, int s)
{
    return s <= g->last[zc_ra_owner_at(g, p, s)];
}

int zc_ra_kv_hop(const zc_ra_group_t *g, int p, int s)
{
    return s <= g->last[zc_ra_owner_at(g, p, s - 1)];
}

int zc_ra_dkv_hop(const zc_ra_group_t *g, int p, int s)
{
    int last = g->last[zc_ra_owner_at(g, p, s)];

    return s < last || (s == g->G - 1 && last == s);
}

int zc_ra_dkv_home(const zc_ra_group_t *g, int p, int s)
{
    int last = g->last[zc_ra_owner_at(g, p, s)];

    return s == last && s > 0 && s < g->G - 1;
}

/* Append the routed call of group g carrying `kind` for step s; its
 * transfers are the group's routed hops with a non-zero payload.  Returns
 * its index, -1 when it moves nothing (then nobody calls it). */
static zc_status_t zc_ra_add_call(const zc_ra_ctx_t *ctx, zc_ra_layout_t *lay, int gi,
                                  zc_ra_kind_t kind, int s, int *index)
{
    zc_ra_group_t *g = &lay->groups[gi];
    zc_ra_routed_t *c = &lay->routed[lay->nrouted];
    int me = ctx->comm->rank;

    *index = -1;
    c->transfers = malloc((size_t)g->G * sizeof(*c->transfers));
    if (!c->transfers)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate a routed call");
    c->ntransfers = 0;
    for (int p = 0; p < g->G; p++) {
        /* KV into step s: position p holds the block of p - (s - 1);
         * dK/dV after step s: the accumulators of p - s */
        int owner = kind == ZC_RA_KIND_KV ? p - (s - 1) : p - s;
        int64_t tokens = g->members[((owner % g->G) + g->G) % g->G].tokens;
        size_t bytes = kind == ZC_RA_KIND_KV ? zc_ra_kv_bytes(ctx, tokens)
                                             : zc_ra_dkv_bytes(ctx, tokens);
        zc_transfer_t *t = &c->transfers[c->ntransfers];

        if (!g->routed[p] || bytes == 0 ||
            !(kind == ZC_RA_KIND_KV ? zc_ra_kv_hop(g, p, s) : zc_ra_dkv_hop(g, p, s)))
            continue;
        t->src = g->members[p].rank;
        t->dst = g->members[(p + 1) % g->G].rank;
        t->count = (int64_t)bytes;
        c->mine |= t->src == me || t->dst == me;
        c->ntransfers++;
    }
    if (c->ntransfers == 0) {
        free(c->transfers);
        memset(c, 0, sizeof(*c));
        return ZC_OK;
    }
    *index = lay->nrouted++;
    return ZC_OK;
}

static zc_status_t zc_ra_routed_build(const zc_ra_ctx_t *ctx, zc_ra_layout_t *lay)
{
    int ncalls = 0;

    for (int gi = 0; gi < lay->ngroups; gi++) {
        const zc_ra_group_t *g = &lay->groups[gi];
        int any = 0;

        for (int p = 0; p < g->G; p++)
            any |= g->routed[p];
        if (any)
            ncalls += 2 * g->G;
    }
    if (ncalls == 0)
        return ZC_OK;
    lay->routed = calloc((size_t)ncalls, sizeof(*lay->routed));
    if (!lay->routed)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate %d routed calls",
                        ncalls);
    for (int gi = 0; gi < lay->ngroups; gi++) {
        zc_ra_group_t *g = &lay->groups[gi];
        int any = 0;

        for (int p = 0; p < g->G; p++)
            any |= g->routed[p];
        if (!any)
            continue;
        for (int s = 0; s < g->G; s++) {
            if (s + 1 < g->G)
                ZC_CHECK(zc_ra_add_call(ctx, lay, gi, ZC_RA_KIND_KV, s + 1, &g->kv_call[s + 1]));
            if (ctx->backward)
                ZC_CHECK(zc_ra_add_call(ctx, lay, gi, ZC_RA_KIND_DKV, s, &g->dkv_call[s]));
        }
    }
    return ZC_OK;
}

/* The groups last to first, before the routed calls are listed: every
 * rank posts those in list order, so the list must follow the run order
 * (a forward-ordered list under a reversed run leaves each rank waiting on
 * a call of a group it has not reached). */
static void zc_ra_groups_reverse(zc_ra_layout_t *lay)
{
    for (int i = 0, j = lay->ngroups - 1; i < j; i++, j--) {
        zc_ra_group_t t = lay->groups[i];

        lay->groups[i] = lay->groups[j];
        lay->groups[j] = t;
    }
}

/* Where group g's gathered rows go (LLaMA CP): owner-major as they
 * arrive, sequence-major as they are attended. */
static zc_status_t zc_ra_gathered_layout(const zc_ra_ctx_t *ctx, const zc_ra_group_t *g,
                                         zc_ra_gathered_t *lay)
{
    size_t bytes = (size_t)(g->G + 1 + g->nrings) * sizeof(int64_t) +
                   (size_t)g->nrings * sizeof(zc_plan_piece_t);

    lay->seqs = malloc(bytes);
    if (!lay->seqs)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate the layout of a "
                        "gather of %d rings", g->nrings);
    lay->owner_row = (int64_t *)(lay->seqs + g->nrings);
    lay->seq_row = lay->owner_row + g->G + 1;
    lay->owner_row[0] = 0;
    for (int o = 0; o < g->G; o++)
        lay->owner_row[o + 1] = lay->owner_row[o] + g->members[o].tokens;
    lay->total = 0;
    for (int i = 0; i < g->nrings; i++) {
        zc_plan_ring_t ring;
        zc_plan_seq_t seq;

        ZC_CHECK(zc_plan_ring(ctx->plan, g->rings[i], &ring));
        ZC_CHECK(zc_plan_seq(ctx->plan, ring.seq, &seq));
        lay->seqs[i] = (zc_plan_piece_t){.seq = ring.seq, .begin = 0, .end = seq.length,
                                         .zone = g->zone, .ring = g->rings[i], .chunk = -1};
        lay->seq_row[i] = lay->total;
        lay->total += seq.length;
    }
    if (lay->total > INT32_MAX)
        return zc_error(ZC_ERR_UNSUPPORTED, "ring attention: LLaMA CP gathers %lld tokens in one "
                        "ring, the attention kernels take at most 2^31 - 1",
                        (long long)lay->total);
    if (lay->total != lay->owner_row[g->G])
        return zc_error(ZC_ERR_INTERNAL, "ring attention: group of %d rings holds %lld tokens, "
                        "its sequences %lld", g->nrings, (long long)lay->owner_row[g->G],
                        (long long)lay->total);
    return ZC_OK;
}

static zc_status_t zc_ra_layout_fill(const zc_ra_ctx_t *ctx, zc_ra_layout_t *lay)
{
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    int *ring_group = NULL, *reach;
    zc_status_t st;

    ZC_CHECK(zc_plan_info(ctx->plan, &info));
    lay->groups = calloc((size_t)(info.nrings ? info.nrings : 1), sizeof(*lay->groups));
    lay->group_rings = malloc((size_t)(info.nrings ? info.nrings : 1) * sizeof(int));
    /* then the reaches of a ring and of its group's first, by rank */
    ring_group = malloc(((size_t)(info.nrings ? info.nrings : 1) + 2 * (size_t)ctx->comm->size) *
                        sizeof(*ring_group));
    if (!lay->groups || !lay->group_rings || !ring_group) {
        free(ring_group);
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate %d rings", info.nrings);
    }
    reach = ring_group + (info.nrings ? info.nrings : 1);
    ZC_CHECK_GOTO(zc_ra_zone_groups(ctx, lay, ZC_ZONE_INTER, info.nrings, ring_group, reach,
                                    reach + ctx->comm->size), st, out);
    ZC_CHECK_GOTO(zc_ra_zone_groups(ctx, lay, ZC_ZONE_INTRA, info.nrings, ring_group, reach,
                                    reach + ctx->comm->size), st, out);
    zc_ra_member_pieces(ctx, lay, ring_group);
    if (ctx->reverse)
        zc_ra_groups_reverse(lay);
    ZC_CHECK_GOTO(zc_ra_routed_build(ctx, lay), st, out);
    if (ctx->args->mode == ZC_RING_ATTN_LLAMA_CP) {
        lay->gathered = calloc((size_t)(lay->ngroups ? lay->ngroups : 1),
                               sizeof(*lay->gathered));
        if (!lay->gathered)
            ZC_CHECK_GOTO(zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate %d "
                                   "gathers", lay->ngroups), st, out);
        for (int gi = 0; gi < lay->ngroups; gi++)
            ZC_CHECK_GOTO(zc_ra_gathered_layout(ctx, &lay->groups[gi], &lay->gathered[gi]), st,
                          out);
    }
out:
    free(ring_group);
    return st;
}

zc_status_t zc_ra_layout_build(const zc_ra_ctx_t *ctx, zc_ra_layout_t **out)
{
    zc_ra_layout_t *lay = calloc(1, sizeof(*lay));
    zc_status_t st;

    if (!lay)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate a layout");
    lay->key = zc_ra_layout_key(ctx);
    st = zc_ra_layout_fill(ctx, lay);
    if (st != ZC_OK) {
        zc_ra_layout_free(lay);
        return st;
    }
    *out = lay;
    return ZC_OK;
}

zc_ra_layout_key_t zc_ra_layout_key(const zc_ra_ctx_t *ctx)
{
    return (zc_ra_layout_key_t){.plan = ctx->plan->serial, .row_kv = ctx->row_kv,
                                .elem = ctx->elem, .mode = (int)ctx->args->mode,
                                .backward = ctx->backward, .reverse = ctx->reverse,
                                .mask_left = ctx->mask.left, .mask_right = ctx->mask.right};
}

void zc_ra_layout_free(zc_ra_layout_t *lay)
{
    if (!lay)
        return;
    for (int gi = 0; gi < lay->ngroups; gi++) {
        free(lay->groups[gi].members);
        free(lay->groups[gi].routed);
        free(lay->groups[gi].kv_call);
        free(lay->groups[gi].dkv_call);
        free(lay->groups[gi].last);
        if (lay->gathered)
            free(lay->gathered[gi].seqs);
    }
    free(lay->gathered);
    free(lay->groups);
    free(lay->group_rings);
    for (int i = 0; i < lay->nrouted; i++)
        free(lay->routed[i].transfers);
    free(lay->routed);
    free(lay);
}
