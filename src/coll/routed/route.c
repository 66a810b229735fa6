/* A routed call's routes on a communicator, and its argument checks: the
 * pure rules of src/plan/routing.c applied to the communicator's nodes and
 * rails (see route.h). */
#include "config.h"

#include "src/coll/routed/route.h"
#include "src/common/status.h"
#include "src/core/memtype.h"

int zc_route_proxy(zc_comm_h comm, const zc_transfer_t *t, int end, int rail)
{
    return zc_route_pick(comm->rank_node, comm->rank_rail, comm->size, end, rail, t->src);
}

int zc_route_is_split(zc_comm_h comm, const zc_transfer_t *t, size_t bytes, int64_t min_routed)
{
    return comm->nrails > 0 && comm->rank_node[t->src] != comm->rank_node[t->dst] &&
           (int64_t)bytes >= min_routed;
}

zc_status_t zc_route_check(const zc_transfer_t *transfers, int ntransfers, const void *sendbuf,
                           const void *recvbuf, zc_datatype_t dtype, zc_comm_h comm)
{
    size_t elem = zc_datatype_size(dtype), send_bytes = 0, recv_bytes = 0;
    int sends = 0, recvs = 0;

    ZC_CHECK(zc_comm_check(comm));
    ZC_ARG_CHECK(ntransfers >= 0 && ntransfers <= ZC_ROUTED_MAX_TRANSFERS,
                 "ntransfers: %d is out of range 0..%d", ntransfers, ZC_ROUTED_MAX_TRANSFERS);
    ZC_ARG_CHECK(transfers != NULL || ntransfers == 0, "transfers: is NULL");
    ZC_ARG_CHECK(elem != 0, "dtype: %d is not a zc_datatype_t", (int)dtype);
    for (int i = 0; i < ntransfers; i++) {
        const zc_transfer_t *t = &transfers[i];
        ZC_ARG_CHECK(t->src >= 0 && t->src < comm->size, "transfers[%d].src: %d is out of range",
                     i, t->src);
        ZC_ARG_CHECK(t->dst >= 0 && t->dst < comm->size, "transfers[%d].dst: %d is out of range",
                     i, t->dst);
        ZC_ARG_CHECK(t->count >= 0 && (uint64_t)t->count <= (uint64_t)INT64_MAX / elem,
                     "transfers[%d].count: %lld is negative or overflows", i,
                     (long long)t->count);
        if (t->src == comm->rank) {
            ZC_ARG_CHECK(++sends == 1, "transfers: rank %d is the src of more than one", t->src);
            ZC_ARG_CHECK(sendbuf != NULL || t->count == 0, "sendbuf: is NULL");
            send_bytes = (size_t)t->count * elem;
        }
        if (t->dst == comm->rank) {
            ZC_ARG_CHECK(++recvs == 1, "transfers: rank %d is the dst of more than one", t->dst);
            ZC_ARG_CHECK(recvbuf != NULL || t->count == 0, "recvbuf: is NULL");
            recv_bytes = (size_t)t->count * elem;
        }
    }
    return zc_check_disjoint(sendbuf, send_bytes, "sendbuf", recvbuf, recv_bytes, "recvbuf");
}
