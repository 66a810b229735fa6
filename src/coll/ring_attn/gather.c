/* LLaMA CP mode (the paper's baseline, LLaMA 3's context parallelism): each
 * ring's members all-gather their K and V, then attend locally; the
 * backward gathers again, computes the dK/dV partials of every gathered key
 * and reduce-scatters them (fp32) to their owners.  Transfers are direct
 * and nothing overlaps them: the communication sits on the critical path,
 * which is what the mode is there to show.
 *
 * Gathered blocks arrive owner after owner; they are put back in sequence
 * order (each sequence whole, positions 0..n-1), so that every query piece
 * meets its sequence's keys as one segment. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "src/coll/ring_attn/ring_attn.h"
#include "src/common/status.h"

enum { ZC_RA_SLOT_GK = 0, ZC_RA_SLOT_GV, ZC_RA_SLOT_SK, ZC_RA_SLOT_SV, ZC_RA_SLOT_DSEQ,
       ZC_RA_SLOT_DOWN, ZC_RA_SLOT_DRECV };

static int zc_ra_ring_index(const zc_ra_group_t *g, int ring)
{
    int lo = 0, hi = g->nrings - 1;

    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (g->rings[mid] < ring)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

zc_status_t zc_ra_permute(const zc_ra_group_t *g, const zc_ra_gathered_t *lay, size_t row_bytes,
                          const void *from, void *to, int to_sequences, zc_ra_copy_t copy,
                          void *arg)
{
    for (int o = 0; o < g->G; o++) {
        const zc_ra_member_t *m = &g->members[o];
        int64_t row = lay->owner_row[o];

        for (size_t i = 0; i < m->npieces; row += m->pieces[i].end - m->pieces[i].begin, i++) {
            const zc_plan_piece_t *pc = &m->pieces[i];
            int64_t srow = lay->seq_row[zc_ra_ring_index(g, pc->ring)] + pc->begin;
            size_t len = (size_t)(pc->end - pc->begin) * row_bytes;
            int64_t dst = to_sequences ? srow : row, src = to_sequences ? row : srow;

            if (len > 0)
                ZC_CHECK(copy(arg, (char *)to + (size_t)dst * row_bytes,
                              (const char *)from + (size_t)src * row_bytes, len));
        }
    }
    return ZC_OK;
}


/* All-gather K and V of group gi, sequence-major, into *k, *v. */
static zc_status_t zc_ra_allgather(zc_ra_ctx_t *ctx, int gi, const zc_ra_gathered_t *lay,
                                   void **k, void **v)
{
    const zc_ra_group_t *g = &ctx->groups[gi];
    const zc_ra_member_t *me = &g->members[g->pos];
    size_t row = (size_t)ctx->row_kv * ctx->elem, bytes = (size_t)lay->total * row;
    const char *own_k = (const char *)ctx->args->k + (size_t)me->row0 * row;
    const char *own_v = (const char *)ctx->args->v + (size_t)me->row0 * row;
    zc_ra_xchg_t x = {0};
    void *gk, *gv;

    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_GK, bytes, &gk));
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_GV, bytes, &gv));
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_SK, bytes, k));
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_SV, bytes, v));
    for (int o = 0; o < g->G; o++) {
        size_t at = (size_t)lay->owner_row[o] * row, n = (size_t)g->members[o].tokens * row;
        int peer = g->members[o].rank;

        if (o == g->pos)
            continue;
        ZC_CHECK(zc_ra_post(ctx, &x, ZC_REQ_RECV, (char *)gk + at, n, peer,
                            ZC_RA_KIND_GATHER_K, 0, gi));
        ZC_CHECK(zc_ra_post(ctx, &x, ZC_REQ_RECV, (char *)gv + at, n, peer,
                            ZC_RA_KIND_GATHER_V, 0, gi));
        ZC_CHECK(zc_ra_post(ctx, &x, ZC_REQ_SEND, (void *)own_k, (size_t)me->tokens * row, peer,
                            ZC_RA_KIND_GATHER_K, 0, gi));
        ZC_CHECK(zc_ra_post(ctx, &x, ZC_REQ_SEND, (void *)own_v, (size_t)me->tokens * row, peer,
                            ZC_RA_KIND_GATHER_V, 0, gi));
    }
    if (me->tokens > 0) { /* an empty rank may have no buffers at all */
        memcpy((char *)gk + (size_t)lay->owner_row[g->pos] * row, own_k, (size_t)me->tokens * row);
        memcpy((char *)gv + (size_t)lay->owner_row[g->pos] * row, own_v, (size_t)me->tokens * row);
    }
    ZC_CHECK(zc_ra_wait(ctx, &x));
    ZC_CHECK(zc_ra_permute(g, lay, row, gk, *k, 1, zc_ra_copy_cb, ctx));
    return zc_ra_permute(g, lay, row, gv, *v, 1, zc_ra_copy_cb, ctx);
}

zc_status_t zc_ra_gather_fwd(zc_ra_ctx_t *ctx, int gi)
{
    const zc_ra_group_t *g = &ctx->groups[gi];
    const zc_ra_member_t *me;
    const zc_ra_gathered_t *lay;
    zc_ra_kv_t kv = {0};
    void *k, *v;

    if (g->pos < 0)
        return ZC_OK;
    me = &g->members[g->pos];
    lay = &ctx->layout->gathered[gi];
    ZC_CHECK(zc_ra_allgather(ctx, gi, lay, &k, &v));
    kv.pieces = lay->seqs;
    kv.npieces = (size_t)g->nrings;
    kv.k = k;
    kv.v = v;
    return zc_ra_compute(ctx, me->pieces, me->npieces, me->row0, &kv);
}

zc_status_t zc_ra_gather_bwd(zc_ra_ctx_t *ctx, int gi)
{
    const zc_ra_group_t *g = &ctx->groups[gi];
    const zc_ra_member_t *me;
    const zc_ra_gathered_t *lay;
    zc_ra_kv_t kv = {0};
    zc_ra_xchg_t x = {0};
    size_t half, mine, frow = (size_t)ctx->row_kv * sizeof(float);
    float *dseq, *down, *drecv, *dk, *dv;
    void *k, *v, *mem;
    int slot = 0;

    if (g->pos < 0)
        return ZC_OK;
    me = &g->members[g->pos];
    lay = &ctx->layout->gathered[gi];
    ZC_CHECK(zc_ra_allgather(ctx, gi, lay, &k, &v));
    half = (size_t)lay->total * (size_t)ctx->row_kv;
    mine = (size_t)me->tokens * (size_t)ctx->row_kv;
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_DSEQ, 2 * half * sizeof(float), &mem));
    dseq = mem;
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_DOWN, 2 * half * sizeof(float), &mem));
    down = mem;
    ZC_CHECK(zc_ra_scratch(ctx, ZC_RA_SLOT_DRECV,
                           2 * mine * (size_t)(g->G > 1 ? g->G - 1 : 1) * sizeof(float), &mem));
    drecv = mem;
    memset(dseq, 0, 2 * half * sizeof(float));
    kv = (zc_ra_kv_t){.pieces = lay->seqs, .npieces = (size_t)g->nrings, .k = k, .v = v,
                      .dk = dseq, .dv = dseq + half};
    ZC_CHECK(zc_ra_compute(ctx, me->pieces, me->npieces, me->row0, &kv));
    /* back to owner-major, then every owner's rows to their owner */
    ZC_CHECK(zc_ra_permute(g, lay, frow, dseq, down, 0, zc_ra_copy_cb, ctx));
    ZC_CHECK(zc_ra_permute(g, lay, frow, dseq + half, down + half, 0, zc_ra_copy_cb, ctx));
    for (int o = 0; o < g->G; o++) {
        size_t at = (size_t)lay->owner_row[o] * (size_t)ctx->row_kv;
        size_t n = (size_t)g->members[o].tokens * frow;
        int peer = g->members[o].rank;

        if (o == g->pos)
            continue;
        ZC_CHECK(zc_ra_post(ctx, &x, ZC_REQ_RECV, drecv + 2 * mine * (size_t)slot,
                            mine * sizeof(float), peer, ZC_RA_KIND_SCATTER_DK, 0, gi));
        ZC_CHECK(zc_ra_post(ctx, &x, ZC_REQ_RECV, drecv + 2 * mine * (size_t)slot + mine,
                            mine * sizeof(float), peer, ZC_RA_KIND_SCATTER_DV, 0, gi));
        ZC_CHECK(zc_ra_post(ctx, &x, ZC_REQ_SEND, down + at, n, peer, ZC_RA_KIND_SCATTER_DK, 0,
                            gi));
        ZC_CHECK(zc_ra_post(ctx, &x, ZC_REQ_SEND, down + half + at, n, peer,
                            ZC_RA_KIND_SCATTER_DV, 0, gi));
        slot++;
    }
    ZC_CHECK(zc_ra_wait(ctx, &x));
    dk = down + (size_t)lay->owner_row[g->pos] * (size_t)ctx->row_kv;
    dv = dk + half;
    for (int o = 0; o < slot; o++) {
        zc_ra_add(dk, drecv + 2 * mine * (size_t)o, mine);
        zc_ra_add(dv, drecv + 2 * mine * (size_t)o + mine, mine);
    }
    return zc_ra_store_dkv(ctx, dk, dv, me->tokens, me->row0);
}
