/* Routes of a routed transfer, the paper's Eq. (1) (section 3.3), computed
 * the same way by the planner, by every rank and by both paths that execute
 * them: the host schedule (src/coll/routed/routed.c) and the stream-ordered
 * NCCL path (src/coll/routed/routed_stream.c).  Slice k of a transfer from rank s (node A) to rank
 * d (node B) goes s -> p_k -> q_k -> d, where p_k and q_k are the proxies
 * of rail k on A and B. */
#ifndef ZC_ROUTE_H
#define ZC_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "zcomm.h"

/* Pipeline chunks per slice, at most (the host path's tag has 10 bits). */
#define ZC_ROUTED_MAX_CHUNKS 1024

/* The proxy rule, pure so that the planner (src/plan/proxy.c) names the same
 * ranks as the runtime: of the n ranks, those with node_of[i] ==
 * node_of[end] form `end`'s node (in index order); the proxy of rail `rail`
 * is `end` itself if rail_of[end] == rail, else the node's ranks on the
 * rail taken round-robin by (salt + rail), else (no rank of the node on the
 * rail: every rank has a lane on every rail) any rank of the node, the same
 * way.  Returns an index in [0, n); salt >= 0. */
int zc_route_pick(const int *node_of, const int *rail_of, int n, int end, int rail, int salt);

/* Slice `k` of `count` elements over `nrails` rails in proportion to
 * `weights` (NULL: equal weights): each rail floor(count * w_k / sum) whole
 * elements, the remainder one element each to the rails with the largest
 * fractional shares, the first rails on ties (so equal weights give n / x
 * each and one more to the first n % x rails).  A rail of weight 0 gets
 * nothing; all weights 0 count as equal.  Slices are contiguous, in rail
 * order.  The one slice rule: zc_plan_slice, zc_plan_hop_slice and the cost
 * model (src/plan/cost.c) call it too. */
void zc_route_slice(int64_t count, int nrails, const uint32_t *weights, int k, int64_t *offset,
                    int64_t *length);

/* Pipeline chunk in bytes for a transfer of `bytes`: `chunk` (from
 * ZC_ROUTED_CHUNK) grown so there are at most ZC_ROUTED_MAX_CHUNKS, in
 * whole elements of `elem` bytes. */
size_t zc_route_chunk(size_t bytes, size_t elem, int64_t chunk);

#endif
