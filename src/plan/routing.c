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

void zc_route_slice(int64_t count, int nrails, int k, int64_t *offset, int64_t *length)
{
    int64_t per = count / nrails, extra = count % nrails;

    *offset = per * k + (k < extra ? k : extra);
    *length = per + (k < extra);
}

size_t zc_route_chunk(size_t bytes, size_t elem, int64_t chunk)
{
    size_t need = bytes / ZC_ROUTED_MAX_CHUNKS + 1;
    size_t c = (size_t)(chunk > 0 ? chunk : 1) > need ? (size_t)chunk : need;

    return (c + elem - 1) / elem * elem;
}
