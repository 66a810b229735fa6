/* Routes of a plan's inter-node hops (paper section 3.3), as the runtime
 * runs them.  A hop (rank a on node A sends its block to rank b on node B)
 * is one transfer of zc_routed_sendrecv (the ring attention engine posts
 * each hop as one): its payload is cut into one slice per rail with
 * zc_route_slice (in proportion to the plan's rail rates, if it has them),
 * and slice k goes a -> p_k -> q_k -> b with p_k, q_k the
 * proxies zc_route_pick names for rail k on A and on B.  The plan applies
 * the same two functions to the communicator it assumes (rank r on node
 * r / P, its GPU g = r % P on rail g * rails / P, the cost model's NIC
 * sharing), so its hops are the runtime's routes on such a communicator;
 * zc_plan_slice(3) lists where a run can differ. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/common/rate.h"
#include "src/plan/plan.h"
#include "src/plan/routing.h"
#include "src/common/status.h"

zc_status_t zc_plan_slice(int64_t n, int x, int k, int64_t *offset, int64_t *length)
{
    zc_error_clear();
    ZC_ARG_CHECK(n >= 0, "n: %lld elements is negative", (long long)n);
    ZC_ARG_CHECK(x >= 1, "x: %d rails, need at least one", x);
    ZC_ARG_CHECK(k >= 0 && k < x, "k: slice %d of %d", k, x);
    ZC_ARG_CHECK(offset != NULL, "offset: NULL");
    ZC_ARG_CHECK(length != NULL, "length: NULL");
    zc_route_slice(n, x, NULL, k, offset, length);
    return ZC_OK;
}

zc_status_t zc_plan_set_rail_rates(zc_plan_h plan, const double *gbps, int n)
{
    uint32_t w[ZC_PLAN_MAX_RAILS] = {0};

    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK((gbps == NULL && n == 0) || n == plan->rails,
                 "n: %d rates for the plan's %d rails (NULL and 0: none)", n, plan->rails);
    for (int k = 0; gbps && k < n; k++) {
        ZC_ARG_CHECK(gbps[k] > 0 && gbps[k] < 1e9, "gbps[%d]: %g is not a positive rate", k,
                     gbps[k]);
        w[k] = zc_rate_weight(gbps[k]);
    }
    memcpy(plan->rail_weight, w, sizeof(w));
    return ZC_OK;
}

zc_status_t zc_plan_hop_slice(zc_plan_h plan, int64_t n, int k, int64_t *offset,
                              int64_t *length)
{
    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK(n >= 0, "n: %lld elements is negative", (long long)n);
    ZC_ARG_CHECK(k >= 0 && k < plan->rails, "k: slice %d of %d", k, plan->rails);
    ZC_ARG_CHECK(offset != NULL, "offset: NULL");
    ZC_ARG_CHECK(length != NULL, "length: NULL");
    zc_route_slice(n, plan->rails, plan->rail_weight, k, offset, length);
    return ZC_OK;
}

int zc_plan_rail_of(int local, int ppn, int rails)
{
    return (int)((int64_t)local * rails / ppn);
}

zc_status_t zc_plan_proxies(struct zc_plan *plan)
{
    int P = plan->ppn, R = plan->rails;
    size_t nhops = 0, h = 0, pp = 0;
    int *node_of = NULL, *rail_of = NULL;
    zc_status_t st = ZC_OK;

    plan->hop_off = calloc((size_t)plan->nrings + 1, sizeof(*plan->hop_off));
    if (!plan->hop_off)
        return zc_error(ZC_ERR_NO_MEMORY, "proxies: cannot allocate %d rings", plan->nrings);
    for (int r = 0; r < plan->nrings; r++) {
        const zc_plan_ring_t *ring = &plan->rings[r];

        plan->hop_off[r] = nhops;
        if (ring->nnodes < 2)
            continue;
        for (int i = 0; i < ring->nranks; i++)
            nhops += ring->ranks[i] / P != ring->ranks[(i + 1) % ring->nranks] / P;
    }
    plan->hop_off[plan->nrings] = nhops;
    plan->hops = malloc((nhops ? nhops : 1) * sizeof(*plan->hops));
    plan->proxy_pool = malloc((nhops ? nhops : 1) * 2 * (size_t)R * sizeof(*plan->proxy_pool));
    /* One node of the assumed communicator: every node looks the same, so
     * zc_route_pick runs on local indices (O(P) a proxy, not O(G)). */
    node_of = calloc((size_t)P, sizeof(*node_of));
    rail_of = malloc((size_t)P * sizeof(*rail_of));
    if (!plan->hops || !plan->proxy_pool || !node_of || !rail_of) {
        st = zc_error(ZC_ERR_NO_MEMORY, "proxies: cannot allocate %zu hops", nhops);
        goto out;
    }
    for (int g = 0; g < P; g++)
        rail_of[g] = zc_plan_rail_of(g, P, R);
    for (int r = 0; r < plan->nrings; r++) {
        const zc_plan_ring_t *ring = &plan->rings[r];

        if (ring->nnodes < 2)
            continue;
        for (int i = 0; i < ring->nranks; i++) {
            int a = ring->ranks[i], b = ring->ranks[(i + 1) % ring->nranks];
            zc_plan_hop_t *hop;

            if (a / P == b / P)
                continue;
            hop = &plan->hops[h++];
            hop->src_rank = a;
            hop->dst_rank = b;
            hop->src_node = a / P;
            hop->dst_node = b / P;
            hop->x_send = R;
            hop->x_recv = R;
            /* the runtime salts both ends with the transfer's source rank */
            hop->send_proxies = plan->proxy_pool + pp;
            for (int k = 0; k < R; k++)
                plan->proxy_pool[pp++] =
                    hop->src_node * P + zc_route_pick(node_of, rail_of, P, a % P, k, a);
            hop->recv_proxies = plan->proxy_pool + pp;
            for (int k = 0; k < R; k++)
                plan->proxy_pool[pp++] =
                    hop->dst_node * P + zc_route_pick(node_of, rail_of, P, b % P, k, a);
        }
    }
out:
    free(node_of);
    free(rail_of);
    return st;
}
