/* Ring pipelines of one group (Zeppelin and TE CP modes).
 *
 * Position p of a ring of G holds at step s the KV block of owner p - s.
 * Forward: the block for step s + 1 is posted (send the current block to
 * p + 1, receive the next from p - 1) before step s computes, so the hop
 * overlaps the kernels; out/lse merge in fp32 (src/coll/ring_attn/compute.c).
 *
 * Backward: the KV blocks travel the same way (G - 1 hops).  Step s
 * computes into a zeroed fp32 dK/dV partial of owner p - s, then adds the
 * accumulator of that owner arriving from p - 1 (sent after its step s - 1)
 * and sends the sum on; after step G - 1 one more hop brings every owner's
 * accumulator home.  Computing into a fresh partial, rather than into the
 * arriving accumulator, lets that hop overlap the step's kernels, and the
 * accumulators stay fp32 all the way round (rounding a partial per hop is
 * the classic ring-attention precision bug).
 *
 * Reach (src/coll/ring_attn/groups.c).  Owner o's KV goes only as far as
 * g->last[o]: a position computes a step only when it holds a block, a hop
 * goes only when the block goes further (both sides know it from the
 * plan), and an accumulator whose chain ends before the ring closes goes
 * home directly from its last position; the owner posts that receive
 * first of all, so no wait depends on its place in the pipeline. */
#include "config.h"

#include <string.h>

#include "src/coll/ring_attn/ring_attn.h"
#include "src/common/status.h"

/* Scratch slots of the ring pipelines. */
enum { ZC_RA_SLOT_KV0, ZC_RA_SLOT_KV1, ZC_RA_SLOT_DP0, ZC_RA_SLOT_DP1, ZC_RA_SLOT_DIN0,
       ZC_RA_SLOT_DIN1, ZC_RA_SLOT_HOME };

const zc_ra_member_t *zc_ra_owner(const zc_ra_group_t *g, int s)
{
    return &g->members[zc_ra_owner_at(g, g->pos, s)];
}

void zc_ra_kv_step_bytes(const zc_ra_ctx_t *ctx, const zc_ra_group_t *g, int s, size_t *out,
                         size_t *in)
{
    int p = g->pos;

    *out = zc_ra_kv_hop(g, p, s + 1) ? zc_ra_kv_bytes(ctx, zc_ra_owner(g, s)->tokens) : 0;
    *in = zc_ra_kv_hop(g, (p + g->G - 1) % g->G, s + 1)
              ? zc_ra_kv_bytes(ctx, zc_ra_owner(g, s + 1)->tokens) : 0;
}

void zc_ra_dkv_step_bytes(const zc_ra_ctx_t *ctx, const zc_ra_group_t *g, int s, size_t *out,
                          size_t *in)
{
    int p = g->pos;

    *out = zc_ra_dkv_hop(g, p, s) ? zc_ra_dkv_bytes(ctx, zc_ra_owner(g, s)->tokens) : 0;
    *in = zc_ra_dkv_hop(g, (p + g->G - 1) % g->G, s)
              ? zc_ra_dkv_bytes(ctx, zc_ra_owner(g, s + 1)->tokens) : 0;
}

const zc_ra_member_t *zc_ra_home_from(const zc_ra_group_t *g)
{
    int last = g->last[g->pos], from = (g->pos + last) % g->G;

    return zc_ra_dkv_home(g, from, last) ? &g->members[from] : NULL;
}

/* The KV hop into step s + 1: this rank's block goes on, the next arrives,
 * each only where its owner's reach goes that far. */
static zc_status_t zc_ra_kv_step(zc_ra_ctx_t *ctx, int gi, zc_ra_xchg_t *x, int s, void *cur,
                                 void *next)
{
    const zc_ra_group_t *g = &ctx->groups[gi];
    size_t out, in;

    zc_ra_kv_step_bytes(ctx, g, s, &out, &in);
    return zc_ra_hop(ctx, x, gi, ZC_RA_KIND_KV, s + 1, g->kv_call[s + 1], cur, out, next, in);
}

zc_status_t zc_ra_pack_own(zc_ra_ctx_t *ctx, const zc_ra_group_t *g, void *buf)
{
    const zc_ra_member_t *me = &g->members[g->pos];
    size_t row = (size_t)ctx->row_kv * ctx->elem, bytes = (size_t)me->tokens * row;

    if (bytes == 0)
        return ZC_OK;
    ZC_CHECK(zc_ra_copy(ctx, buf, (const char *)ctx->args->k + (size_t)me->row0 * row, bytes));
    return zc_ra_copy(ctx, (char *)buf + bytes, (const char *)ctx->args->v + (size_t)me->row0 * row,
                      bytes);
}

zc_ra_kv_t zc_ra_block(const zc_ra_ctx_t *ctx, const zc_ra_member_t *owner, void *kv,
                       float *dkv)
{
    size_t half = (size_t)owner->tokens * (size_t)ctx->row_kv;

    return (zc_ra_kv_t){.pieces = owner->pieces, .npieces = owner->npieces, .k = kv,
                        .v = (char *)kv + half * ctx->elem, .dk = dkv,
                        .dv = dkv ? dkv + half : NULL};
}

zc_status_t zc_ra_ring_fwd(zc_ra_ctx_t *ctx, int gi)
{
    const zc_ra_group_t *g = &ctx->groups[gi];
    const zc_ra_member_t *me;
    size_t cap;
    void *kv[2];
    zc_ra_xchg_t x[2] = {{0}, {0}};

    if (g->pos < 0)
        return ZC_OK; /* not a member: its routed calls go out on their own */
    me = &g->members[g->pos];
    cap = zc_ra_kv_bytes(ctx, g->max_tokens);
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_KV0, cap, &kv[0]));
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_KV1, cap, &kv[1]));
    ZC_CHECK(zc_ra_pack_own(ctx, g, kv[0]));
    for (int s = 0; s < g->G; s++) {
        const zc_ra_member_t *owner = zc_ra_owner(g, s);
        zc_ra_kv_t block = zc_ra_block(ctx, owner, kv[s % 2], NULL);

        ZC_CHECK(zc_ra_wait(ctx, &x[s % 2]));
        if (s + 1 < g->G)
            ZC_CHECK(zc_ra_kv_step(ctx, gi, &x[(s + 1) % 2], s, kv[s % 2], kv[(s + 1) % 2]));
        if (zc_ra_holds(g, g->pos, s))
            ZC_CHECK(zc_ra_compute(ctx, me->pieces, me->npieces, me->row0, &block));
    }
    return ZC_OK;
}

void zc_ra_add(float *acc, const float *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] += in[i];
}

zc_status_t zc_ra_ring_bwd(zc_ra_ctx_t *ctx, int gi)
{
    const zc_ra_group_t *g = &ctx->groups[gi];
    const zc_ra_member_t *me, *from;
    size_t cap, dcap;
    void *kv[2], *dp[2], *din[2], *home_buf = NULL;
    zc_ra_xchg_t kx[2] = {{0}, {0}}, dx[2] = {{0}, {0}}, hx = {0};
    const float *home = NULL;
    int last;

    if (g->pos < 0)
        return ZC_OK;
    me = &g->members[g->pos];
    cap = zc_ra_kv_bytes(ctx, g->max_tokens);
    dcap = zc_ra_dkv_bytes(ctx, g->max_tokens);
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_KV0, cap, &kv[0]));
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_KV1, cap, &kv[1]));
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_DP0, dcap, &dp[0]));
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_DP1, dcap, &dp[1]));
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_DIN0, dcap, &din[0]));
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_DIN1, dcap, &din[1]));
    last = g->last[g->pos];
    from = zc_ra_home_from(g);
    if (from) {
        ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_HOME, dcap, &home_buf));
        ZC_CHECK(zc_ra_post(ctx, &hx, ZC_REQ_RECV, home_buf,
                            zc_ra_dkv_bytes(ctx, me->tokens), from->rank, ZC_RA_KIND_DKV,
                            last, gi));
        home = home_buf;
    }
    ZC_CHECK(zc_ra_pack_own(ctx, g, kv[0]));
    for (int s = 0; s < g->G; s++) {
        const zc_ra_member_t *owner = zc_ra_owner(g, s);
        size_t dbytes = zc_ra_dkv_bytes(ctx, owner->tokens);
        zc_ra_kv_t block = zc_ra_block(ctx, owner, kv[s % 2], dp[s % 2]);
        size_t out, in;

        ZC_CHECK(zc_ra_wait(ctx, &kx[s % 2]));
        if (s + 1 < g->G)
            ZC_CHECK(zc_ra_kv_step(ctx, gi, &kx[(s + 1) % 2], s, kv[s % 2], kv[(s + 1) % 2]));
        if (zc_ra_holds(g, g->pos, s)) {
            ZC_CHECK(zc_ra_wait(ctx, &dx[s % 2])); /* dp[s % 2] sent two steps ago */
            memset(dp[s % 2], 0, dbytes);
            ZC_CHECK(zc_ra_compute(ctx, me->pieces, me->npieces, me->row0, &block));
            if (s > 0) {
                /* it holds a block at s > 0: the accumulator came along */
                ZC_CHECK(zc_ra_wait(ctx, &dx[(s - 1) % 2]));
                zc_ra_add(dp[s % 2], din[(s - 1) % 2], dbytes / sizeof(float));
            }
            if (s == 0 && last == 0) /* nobody else sees this rank's keys */
                ZC_CHECK(zc_ra_store_dkv(ctx, dp[0], (float *)dp[0] + (size_t)me->tokens *
                                                                        (size_t)ctx->row_kv,
                                         me->tokens, me->row0));
            if (zc_ra_dkv_home(g, g->pos, s))
                ZC_CHECK(zc_ra_post(ctx, &dx[s % 2], ZC_REQ_SEND, dp[s % 2], dbytes,
                                    owner->rank, ZC_RA_KIND_DKV, s, gi));
        }
        /* the accumulator of owner p - s goes on (only from a position its
         * KV reached); p - 1 sends that of p - 1 - s */
        zc_ra_dkv_step_bytes(ctx, g, s, &out, &in);
        if (g->G > 1)
            ZC_CHECK(zc_ra_hop(ctx, &dx[s % 2], gi, ZC_RA_KIND_DKV, s, g->dkv_call[s], dp[s % 2],
                               out, din[s % 2], in));
    }
    /* every hop of this group done before its buffers serve the next one */
    for (int i = 0; i < 2; i++) {
        ZC_CHECK(zc_ra_wait(ctx, &kx[i]));
        ZC_CHECK(zc_ra_wait(ctx, &dx[i]));
    }
    ZC_CHECK(zc_ra_wait(ctx, &hx));
    if (last == 0)
        return ZC_OK;
    if (!home)
        home = din[(g->G - 1) % 2]; /* the hop after step G - 1 */
    return zc_ra_store_dkv(ctx, home, home + (size_t)me->tokens * (size_t)ctx->row_kv,
                           me->tokens, me->row0);
}
