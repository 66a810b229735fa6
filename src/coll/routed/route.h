/* A routed call on a communicator: its routes (the rules of
 * src/plan/routing.h on the communicator's nodes and rails), its argument
 * checks, and the entry the ring attention engine calls. */
#ifndef ZC_COLL_ROUTE_H
#define ZC_COLL_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/comm.h"
#include "src/plan/routing.h"

/* Arguments of a routed call (the list, its counts, the buffers this rank
 * needs, which must not overlap), the same for both paths; memory types
 * are the caller's. */
zc_status_t zc_route_check(const zc_transfer_t *transfers, int ntransfers, const void *sendbuf,
                           const void *recvbuf, zc_datatype_t dtype, zc_comm_h comm);

/* zc_routed_sendrecv (`weights` NULL: the rails' weights come out of its
 * agreement), and with `weights` (ZC_MAX_RAILS) without checking that
 * every rank has the same list, sliced by them: for callers whose lists
 * and weights every rank derived from inputs they already agreed on (ring
 * attention's plan and its agreement's view of the rails). */
zc_status_t zc_routed_post(const zc_transfer_t *transfers, int ntransfers, const void *sendbuf,
                           void *recvbuf, zc_datatype_t dtype, zc_memtype_t memtype,
                           zc_comm_h comm, const uint32_t *weights, zc_request_h *request);

/* zc_routed_sendrecv_stream, and with `agree` 0 without the agreement
 * (as zc_routed_post). */
zc_status_t zc_routed_stream_post(const zc_transfer_t *transfers, int ntransfers,
                                  const void *sendbuf, void *recvbuf, zc_datatype_t dtype,
                                  zc_comm_h comm, void *stream, int agree);

/* The stream form's agreement, blocking, over the host path: every rank
 * passes its list (or, with `local` not ZC_OK, the refusal of its own
 * arguments, returned as it was); lists, dtypes or routing settings that
 * differ give ZC_ERR_MISMATCH on every rank, as the host form's do. */
zc_status_t zc_routed_agree(zc_comm_h comm, zc_status_t local, const zc_transfer_t *transfers,
                            int ntransfers, zc_datatype_t dtype);

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

#endif
