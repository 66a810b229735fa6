/* Route computation shared by the host and the stream-ordered routed
 * transfer (see src/plan/routing.h). */
#include "config.h"

#include "src/core/memtype.h"
#include "src/plan/routing.h"
#include "src/common/status.h"

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

int zc_route_proxy(zc_comm_h comm, const zc_transfer_t *t, int end, int rail)
{
    return zc_route_pick(comm->rank_node, comm->rank_rail, comm->size, end, rail, t->src);
}

int zc_route_is_split(zc_comm_h comm, const zc_transfer_t *t, size_t bytes, int64_t min_routed)
{
    return comm->nrails > 0 && comm->rank_node[t->src] != comm->rank_node[t->dst] &&
           (int64_t)bytes >= min_routed;
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
