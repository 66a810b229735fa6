/* Routing proxies (paper section 3.3): every inter-node hop of a ring
 * (rank a on node A sends its KV block to rank b on node B) is split into
 * x slices routed a -> send proxy k (NVLink) -> receive proxy k (NIC of
 * rail k) -> b (NVLink).  x1 = x2 = min(ring GPUs on A, ring GPUs on B), so
 * every sender has exactly one receiver; proxy k of both nodes is the device
 * with the same local index, which keeps each slice on one rail. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "status.h"

zc_status_t zc_plan_slice(int64_t n, int x, int k, int64_t *offset, int64_t *length)
{
    __int128 b, e;

    ZC_ARG_CHECK(n >= 0, "n: %lld tokens is negative", (long long)n);
    ZC_ARG_CHECK(x >= 1, "x: %d proxies, need at least one", x);
    ZC_ARG_CHECK(k >= 0 && k < x, "k: slice %d of %d", k, x);
    ZC_ARG_CHECK(offset != NULL, "offset: NULL");
    ZC_ARG_CHECK(length != NULL, "length: NULL");
    b = (__int128)n * k / x;
    e = (__int128)n * (k + 1) / x;
    *offset = (int64_t)b;
    *length = (int64_t)(e - b);
    return ZC_OK;
}

/* Proxy order on a hop: devices in the ring on both nodes first, then on
 * either node, then the others (local and intra-node GPUs also route, as the
 * paper says), each group by local index. */
static int zc_proxy_pick(const unsigned char *on_src, const unsigned char *on_dst, int ppn,
                         int x, int *local)
{
    int n = 0;

    for (int want = 2; want >= 0 && n < x; want--)
        for (int d = 0; d < ppn && n < x; d++)
            if (on_src[d] + on_dst[d] == want)
                local[n++] = d;
    return n;
}

/* Marks in `on` the devices of the node of ring position i that hold a
 * position of the ring: rings are node-contiguous, so they are the run of
 * positions around i on that node (wrapping, for a ring that starts and ends
 * on one node).  Returns how many; O(run length + P), so the hops of a ring
 * cost O(G) in all, not O(G) each. */
static int zc_run_members(const zc_plan_ring_t *r, int i, int ppn, unsigned char *on)
{
    int G = r->nranks, node = r->ranks[i] / ppn, g = 0, steps = 0;

    memset(on, 0, (size_t)ppn);
    for (int j = i; steps < G && r->ranks[j] / ppn == node; j = (j + G - 1) % G, steps++)
        if (!on[r->ranks[j] % ppn]) {
            on[r->ranks[j] % ppn] = 1;
            g++;
        }
    for (int j = (i + 1) % G; steps < G && r->ranks[j] / ppn == node; j = (j + 1) % G, steps++)
        if (!on[r->ranks[j] % ppn]) {
            on[r->ranks[j] % ppn] = 1;
            g++;
        }
    return g;
}

zc_status_t zc_plan_proxies(struct zc_plan *plan)
{
    int P = plan->ppn;
    size_t nhops = 0, h = 0, pp = 0;
    unsigned char *on_src = NULL, *on_dst = NULL;
    int *local = NULL;
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
    plan->proxy_pool = malloc((nhops ? nhops : 1) * 2 * (size_t)P * sizeof(*plan->proxy_pool));
    on_src = malloc((size_t)P);
    on_dst = malloc((size_t)P);
    local = malloc((size_t)P * sizeof(*local));
    if (!plan->hops || !plan->proxy_pool || !on_src || !on_dst || !local) {
        st = zc_error(ZC_ERR_NO_MEMORY, "proxies: cannot allocate %zu hops", nhops);
        goto out;
    }
    for (int r = 0; r < plan->nrings; r++) {
        const zc_plan_ring_t *ring = &plan->rings[r];

        if (ring->nnodes < 2)
            continue;
        for (int i = 0; i < ring->nranks; i++) {
            int a = ring->ranks[i], b = ring->ranks[(i + 1) % ring->nranks];
            zc_plan_hop_t *hop;
            int ga, gb, x;

            if (a / P == b / P)
                continue;
            hop = &plan->hops[h++];
            ga = zc_run_members(ring, i, P, on_src);
            gb = zc_run_members(ring, (i + 1) % ring->nranks, P, on_dst);
            x = ga < gb ? ga : gb;
            x = zc_proxy_pick(on_src, on_dst, P, x, local);
            hop->src_rank = a;
            hop->dst_rank = b;
            hop->src_node = a / P;
            hop->dst_node = b / P;
            hop->x_send = x;
            hop->x_recv = x;
            hop->send_proxies = plan->proxy_pool + pp;
            for (int k = 0; k < x; k++)
                plan->proxy_pool[pp++] = hop->src_node * P + local[k];
            hop->recv_proxies = plan->proxy_pool + pp;
            for (int k = 0; k < x; k++)
                plan->proxy_pool[pp++] = hop->dst_node * P + local[k];
        }
    }
out:
    free(on_src);
    free(on_dst);
    free(local);
    return st;
}
