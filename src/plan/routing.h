/* Routes of a routed transfer (zeppelin paper, section 3.3), computed the
 * same way by every rank and by both paths that execute them: the host
 * schedule (src/coll/routed/routed.c) and the stream-ordered NCCL path
 * (src/core/stream.c).  Slice k of a transfer from rank s (node A) to rank
 * d (node B) goes s -> p_k -> q_k -> d, where p_k and q_k are the proxies
 * of rail k on A and B. */
#ifndef ZC_ROUTE_H
#define ZC_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/comm.h"

/* Pipeline chunks per slice, at most (the host path's tag has 10 bits). */
#define ZC_ROUTED_MAX_CHUNKS 1024

/* Arguments of a routed call (the list, its counts, the buffers this rank
 * needs, which must not overlap), the same for both paths; memory types
 * are the caller's. */
zc_status_t zc_route_check(const zc_transfer_t *transfers, int ntransfers, const void *sendbuf,
                           const void *recvbuf, zc_datatype_t dtype, zc_comm_h comm);

/* zc_routed_sendrecv, and with `agree` 0 without checking that every rank
 * has the same list: for callers whose lists every rank derived from
 * inputs they already agreed on (ring attention's plan). */
zc_status_t zc_routed_post(const zc_transfer_t *transfers, int ntransfers, const void *sendbuf,
                           void *recvbuf, zc_datatype_t dtype, zc_memtype_t memtype,
                           zc_comm_h comm, int agree, zc_request_h *request);

/* The proxy rule, pure so that the planner (src/plan/proxy.c) names the same
 * ranks as the runtime: of the n ranks, those with node_of[i] ==
 * node_of[end] form `end`'s node (in index order); the proxy of rail `rail`
 * is `end` itself if rail_of[end] == rail, else the node's ranks on the
 * rail taken round-robin by (salt + rail), else (no rank of the node on the
 * rail: every rank has a lane on every rail) any rank of the node, the same
 * way.  Returns an index in [0, n); salt >= 0. */
int zc_route_pick(const int *node_of, const int *rail_of, int n, int end, int rail, int salt);

/* The rank that forwards rail `rail` of transfer `t` on the node of `end`
 * (t->src or t->dst): zc_route_pick over the communicator's nodes and rails,
 * salted by t->src.  The salt is the transfer's source rank, not its index
 * in the call's list, so a transfer's routes depend on the transfer alone
 * (a rank is the source of at most one transfer per call, so they still
 * spread), which is what lets a plan's hops (zc_plan_ring_hops) name them. */
int zc_route_proxy(zc_comm_h comm, const zc_transfer_t *t, int end, int rail);

/* Non-zero when transfer `t` of `bytes` is split over the rails: it crosses
 * nodes, there are rails, and it is at least `min_routed` bytes. */
int zc_route_is_split(zc_comm_h comm, const zc_transfer_t *t, size_t bytes, int64_t min_routed);

/* Slice `k` of `count` elements over `nrails` rails: equal slices in whole
 * elements, the remainder one element each to the first rails.  The one
 * slice rule: zc_plan_slice and the cost model (src/plan/cost.c) call it too. */
void zc_route_slice(int64_t count, int nrails, int k, int64_t *offset, int64_t *length);

/* Pipeline chunk in bytes for a transfer of `bytes`: `chunk` (from
 * ZC_ROUTED_CHUNK) grown so there are at most ZC_ROUTED_MAX_CHUNKS, in
 * whole elements of `elem` bytes. */
size_t zc_route_chunk(size_t bytes, size_t elem, int64_t chunk);

#endif
