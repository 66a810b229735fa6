/* Ring layouts.  Zigzag (paper section 3.2): a ring of G ranks cuts each of
 * its sequences into 2G chunks and ring position i holds chunks i and
 * 2G-1-i, which gives every position the same share of the causal mask.  A
 * ring cut by the fill partitioner (src/plan/fill.c) holds uneven shares:
 * each position still holds its two mirrored chunks, half its share each,
 * so its causal work stays close to share / n of the sequence's.
 * Contiguous: position i holds the i-th run of the sequence, its share
 * long, which balances a sliding window or the full mask as well while a
 * window's KV needs only the positions just before (src/plan/mask_cost.c
 * picks per ring).  This file owns the chunk arithmetic and turns a
 * partition into per-rank pieces, each ring in its layout. */
#include "config.h"

#include <stdlib.h>

#include "src/plan/plan.h"
#include "src/common/status.h"

int64_t zc_zigzag_share(int64_t n, int g, int i)
{
    int64_t b0, e0, b1, e1;

    zc_zigzag_chunk(n, g, i, &b0, &e0);
    zc_zigzag_chunk(n, g, 2 * g - 1 - i, &b1, &e1);
    return (e0 - b0) + (e1 - b1);
}

/* Tokens of chunk c of a ring of g positions holding share[]: a zigzag
 * position's front chunk takes the odd token. */
static int64_t zc_ring_chunk_len(const int64_t *share, int g, zc_ring_layout_t layout, int c)
{
    if (layout == ZC_RING_LAYOUT_CONTIGUOUS)
        return share[c];
    return c < g ? share[c] - share[c] / 2 : share[2 * g - 1 - c] / 2;
}

int zc_ring_bounds(const int64_t *share, int g, zc_ring_layout_t layout, int64_t *bounds)
{
    int n = zc_ring_chunks(layout, g);

    bounds[0] = 0;
    for (int c = 0; c < n; c++)
        bounds[c + 1] = bounds[c] + zc_ring_chunk_len(share, g, layout, c);
    return n;
}

static void zc_layout_add(zc_plan_piece_t *pieces, size_t *fill, int rank, size_t seq,
                          int64_t begin, int64_t end, zc_zone_t zone, int ring, int chunk)
{
    zc_plan_piece_t *p = &pieces[fill[rank]++];

    p->seq = seq;
    p->begin = begin;
    p->end = end;
    p->zone = zone;
    p->ring = ring;
    p->chunk = chunk;
}

/* The pieces of sequence s, by chunk; with pieces == NULL only count them. */
static void zc_layout_seq(struct zc_plan *plan, size_t s, zc_plan_piece_t *pieces, size_t *fill)
{
    const zc_part_ring_t *pr = &plan->part.seqs[s];
    int64_t n = plan->lengths[s], b = 0;
    int g = pr->nranks, nchunks = zc_ring_chunks(pr->layout, g);

    if (n == 0)
        return;
    if (pr->zone == ZC_ZONE_LOCAL) {
        if (pieces)
            zc_layout_add(pieces, fill, pr->ranks[0], s, 0, n, ZC_ZONE_LOCAL, -1, -1);
        else
            fill[pr->ranks[0]]++;
        return;
    }
    for (int c = 0; c < nchunks; c++) {
        int rank = pr->ranks[zc_ring_chunk_pos(pr->layout, g, c)];
        int64_t e = b + zc_ring_chunk_len(pr->share, g, pr->layout, c);

        if (b == e)
            continue; /* sequences shorter than their chunks leave some empty */
        if (pieces)
            zc_layout_add(pieces, fill, rank, s, b, e, pr->zone, plan->seq_ring[s], c);
        else
            fill[rank]++;
        b = e;
    }
}

/* Walk every piece of the partition; with pieces == NULL only count them.
 * The walk visits the zones in a rank's buffer order (inter-node rings, then
 * intra-node, then local: the order the attention engine runs its queues),
 * each by sequence, hence ring id, and each ring's chunks ascending, so every
 * rank's pieces come out in buffer order with no sort. */
static void zc_layout_walk(struct zc_plan *plan, zc_plan_piece_t *pieces, size_t *fill)
{
    for (int zone = ZC_ZONE_INTER; zone >= ZC_ZONE_LOCAL; zone--)
        for (size_t s = 0; s < plan->nseqs; s++)
            if (plan->part.seqs[s].zone == (zc_zone_t)zone)
                zc_layout_seq(plan, s, pieces, fill);
}

zc_status_t zc_plan_layout(struct zc_plan *plan)
{
    int nr = plan->nranks;
    size_t *count = calloc((size_t)nr + 1, sizeof(*count));
    size_t total = 0;

    if (!count)
        return zc_error(ZC_ERR_NO_MEMORY, "plan layout: cannot allocate counts");
    zc_layout_walk(plan, NULL, count);
    plan->piece_off = malloc(((size_t)nr + 1) * sizeof(*plan->piece_off));
    plan->before = calloc((size_t)nr, sizeof(*plan->before));
    if (!plan->piece_off || !plan->before)
        goto err_nomem;
    for (int r = 0; r < nr; r++) {
        plan->piece_off[r] = total;
        total += count[r];
    }
    plan->piece_off[nr] = total;
    plan->pieces = malloc((total ? total : 1) * sizeof(*plan->pieces));
    if (!plan->pieces)
        goto err_nomem;
    for (int r = 0; r < nr; r++)
        count[r] = plan->piece_off[r];
    zc_layout_walk(plan, plan->pieces, count);
    for (int r = 0; r < nr; r++) {
        size_t b = plan->piece_off[r], e = plan->piece_off[r + 1];

        for (size_t k = b; k < e; k++)
            plan->before[r] += plan->pieces[k].end - plan->pieces[k].begin;
    }
    free(count);
    return ZC_OK;

err_nomem:
    free(count);
    return zc_error(ZC_ERR_NO_MEMORY, "plan layout: cannot allocate %zu pieces", total);
}
