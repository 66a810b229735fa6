/* Routing, the paper's Eq. (1) (section 3.3): which ranks forward a
 * transfer between nodes, and how it is cut into slices and chunks.  Pure
 * arithmetic, so the planner and both runtime paths compute the same
 * routes (see routing.h). */
#include "config.h"

#include "src/plan/routing.h"

int zc_route_pick(const int *node_of, const int *rail_of, int n, int end, int rail, int salt)
{
    int node = node_of[end], on_rail = 0, on_node = 0, pick;

    if (rail_of[end] == rail)
        return end;
    for (int r = 0; r < n; r++) {
        if (node_of[r] != node)
            continue;
        on_node++;
        on_rail += rail_of[r] == rail;
    }
    pick = (salt + rail) % (on_rail ? on_rail : on_node);
    for (int r = 0; r < n; r++) {
        if (node_of[r] != node || (on_rail && rail_of[r] != rail))
            continue;
        if (pick-- == 0)
            return r;
    }
    return end;  /* not reached: `end` is on its own node */
}

/* Every rail's length under `weights` (none of them NULL here). */
static void zc_route_lengths(int64_t count, int nrails, const uint32_t *weights, int64_t *len)
{
    unsigned __int128 sum = 0;
    uint64_t frac[ZC_PLAN_MAX_RAILS];
    int64_t given = 0;

    for (int k = 0; k < nrails; k++)
        sum += weights[k];
    for (int k = 0; k < nrails; k++) {
        unsigned __int128 share = (unsigned __int128)(uint64_t)count * weights[k];
        len[k] = (int64_t)(share / sum);
        frac[k] = (uint64_t)(share % sum);
        given += len[k];
    }
    /* The remainder is below the number of rails with a fractional share. */
    for (int64_t left = count - given; left > 0; left--) {
        int best = -1;
        for (int k = 0; k < nrails; k++)
            if (frac[k] > 0 && (best < 0 || frac[k] > frac[best]))
                best = k;
        len[best]++;
        frac[best] = 0;
    }
}

void zc_route_slice(int64_t count, int nrails, const uint32_t *weights, int k, int64_t *offset,
                    int64_t *length)
{
    int64_t len[ZC_PLAN_MAX_RAILS], off = 0;
    uint32_t equal[ZC_PLAN_MAX_RAILS];
    int any = 0;

    for (int r = 0; weights && r < nrails; r++)
        any |= weights[r] != 0;
    if (!any) {
        for (int r = 0; r < nrails; r++)
            equal[r] = 1;
        weights = equal;
    }
    zc_route_lengths(count, nrails, weights, len);
    for (int r = 0; r < k; r++)
        off += len[r];
    *offset = off;
    *length = len[k];
}

size_t zc_route_chunk(size_t bytes, size_t elem, int64_t chunk)
{
    size_t need = bytes / ZC_ROUTED_MAX_CHUNKS + 1;
    size_t c = (size_t)(chunk > 0 ? chunk : 1) > need ? (size_t)chunk : need;

    return (c + elem - 1) / elem * elem;
}
