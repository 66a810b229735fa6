/* Attention work under the plan's mask (kernels/attn_math.h), as the
 * partitioners and the cost model count it: the visible (query, key) pairs
 * of a sequence or of a ring position, the layout of a ring that balances
 * them, and how far the ring must pass its KV (its reach).  zc_plan_create(3),
 * "Masks", gives the reasoning. */
#include "config.h"

#include <stdlib.h>

#include "src/common/status.h"
#include "src/plan/plan.h"

/* A zigzag layout must lower the busiest position's pairs below this
 * fraction of a contiguous one's to be chosen for a non-causal mask. */
#define ZC_ZIGZAG_GAIN_NUM 7
#define ZC_ZIGZAG_GAIN_DEN 8

/* sum of (x + k) over x in [u, v), 0 <= u, v: n (u + v - 1) / 2 + n k,
 * halving whichever factor is even (no 128-bit division) */
static __int128 zc_series(int64_t u, int64_t v, int64_t k)
{
    int64_t n = v > u ? v - u : 0, s = u + v - 1;

    if (n == 0)
        return 0;
    return (n % 2 == 0 ? (__int128)(n / 2) * s : (__int128)n * (s / 2)) + (__int128)n * k;
}

static int64_t zc_clamp64(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

zc_pairs_t zc_mask_pairs(zc_attn_mask_t m, int64_t len, int64_t qb, int64_t qe)
{
    /* an unbounded side reaches the sequence's end; every query sees itself
     * (both sides >= 0), so query x sees min(len - 1, x + r) -
     * max(0, x - l) + 1 keys */
    const int64_t l = m.left < 0 || m.left > len ? len : m.left;
    const int64_t r = m.right < 0 || m.right > len ? len : m.right;
    const int64_t t_right = zc_clamp64(len - r, qb, qe); /* from here, x + r >= len */
    const int64_t t_left = zc_clamp64(l, qb, qe);        /* from here, x - l >= 0 */
    __int128 pairs;

    if (qe <= qb)
        return 0;
    pairs = (__int128)(qe - qb) + zc_series(qb, t_right, r) +
            (__int128)(qe - t_right) * (len - 1) - zc_series(t_left, qe, -l);
    return (zc_pairs_t)pairs;
}

void zc_ring_pairs(zc_attn_mask_t m, const int64_t *share, int g, zc_ring_layout_t layout,
                   int64_t *bounds, double *pairs)
{
    int n = zc_ring_bounds(share, g, layout, bounds);

    for (int i = 0; i < g; i++)
        pairs[i] = 0;
    for (int c = 0; c < n; c++)
        pairs[zc_ring_chunk_pos(layout, g, c)] +=
            (double)zc_mask_pairs(m, bounds[n], bounds[c], bounds[c + 1]);
}

static double zc_most(const double *x, int n)
{
    double most = 0;

    for (int i = 0; i < n; i++)
        most = x[i] > most ? x[i] : most;
    return most;
}

zc_ring_layout_t zc_ring_layout_pick(zc_attn_mask_t m, const int64_t *share, int g,
                                     int64_t *bounds, double *pairs)
{
    double zig, con;

    if (zc_attn_mask_is_causal(m))
        return ZC_RING_LAYOUT_ZIGZAG;
    zc_ring_pairs(m, share, g, ZC_RING_LAYOUT_ZIGZAG, bounds, pairs);
    zig = zc_most(pairs, g);
    zc_ring_pairs(m, share, g, ZC_RING_LAYOUT_CONTIGUOUS, bounds, pairs);
    con = zc_most(pairs, g);
    return ZC_ZIGZAG_GAIN_DEN * zig < ZC_ZIGZAG_GAIN_NUM * con ? ZC_RING_LAYOUT_ZIGZAG
                                                              : ZC_RING_LAYOUT_CONTIGUOUS;
}

/* Each ring's layout: zigzag for an even split (TE CP's layout, whatever
 * the mask), else the one zc_ring_layout_pick balances. */
zc_status_t zc_plan_pick_layouts(struct zc_plan *plan)
{
    int gmax = 1;
    int64_t *bounds;
    double *pairs;

    for (int r = 0; r < plan->nrings; r++)
        gmax = plan->rings[r].nranks > gmax ? plan->rings[r].nranks : gmax;
    bounds = malloc((2 * (size_t)gmax + 1) * sizeof(*bounds));
    pairs = malloc((size_t)gmax * sizeof(*pairs));
    if (!bounds || !pairs) {
        free(bounds);
        free(pairs);
        return zc_error(ZC_ERR_NO_MEMORY, "plan layout: cannot allocate a ring of %d", gmax);
    }
    for (int r = 0; r < plan->nrings; r++) {
        zc_part_ring_t *pr = &plan->part.seqs[plan->rings[r].seq];

        pr->layout = plan->opts.flags & ZC_PLAN_EVEN_SPLIT
                         ? ZC_RING_LAYOUT_ZIGZAG
                         : zc_ring_layout_pick(plan->mask, pr->share, pr->nranks, bounds, pairs);
    }
    free(bounds);
    free(pairs);
    return ZC_OK;
}

/* The first of the n chunks whose keys reach past position x. */
static int zc_chunk_after(const int64_t *bounds, int n, int64_t x)
{
    int lo = 0, hi = n;

    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;

        if (bounds[mid + 1] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

int zc_ring_reach(zc_attn_mask_t m, const int64_t *share, int g, zc_ring_layout_t layout,
                  int64_t *bounds)
{
    int n = zc_ring_bounds(share, g, layout, bounds), reach = 0;
    int64_t len = bounds[n];

    /* last chunks first: under causal masks they see the most */
    for (int c = n - 1; c >= 0 && reach < g - 1; c--) {
        int64_t qb = bounds[c], qe = bounds[c + 1];
        int64_t ka = m.left < 0 ? 0 : zc_clamp64(qb - m.left, 0, len);
        int64_t ke = m.right < 0 ? len : zc_clamp64(qe + m.right, 0, len);
        int at = zc_ring_chunk_pos(layout, g, c);

        if (qb == qe)
            continue;
        for (int k = zc_chunk_after(bounds, n, ka); k < n && bounds[k] < ke; k++) {
            int d = (at - zc_ring_chunk_pos(layout, g, k) + g) % g;

            if (bounds[k] < bounds[k + 1] && d > reach)
                reach = d;
        }
    }
    return reach;
}
