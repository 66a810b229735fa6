/* Algorithm 1 of the Zeppelin paper, "Inter-Node Partitioning" (section
 * 3.1, Sequence Partitioner): threshold s1 = P*L; every sequence of
 * z2 = { |s| >= s1 } split evenly over ceil(|s| / s_avg) node buckets,
 * s_avg = sum(z2) / N (lines 7-10); every sequence of z01 whole on the
 * least-loaded node (lines 11-15); a z01 sequence that does not fit its
 * node lowers s1 to max(z01) and the algorithm restarts.  The driver is
 * src/plan/partition.c, Algorithm 2 src/plan/alg2_intra_node.c.
 *
 * Open cases decided here (the whole list is in src/plan/partition.c):
 *  (c) more inter-node fragments than empty node buckets: the k fragments of
 *      a z2 sequence go to the k least-loaded nodes (empty nodes are the
 *      least loaded, so this is Alg. 1's "empty buckets" while they last);
 *      if one of them would exceed P*L, k grows by one (smaller fragments)
 *      up to N.  The ring is node-contiguous; its start is rotated so that
 *      the chunks' remainder tokens land on the least-loaded nodes.
 *  (f) Alg. 1 cannot place z2 even with k = N: the fill partitioner.
 *  (k) each lowering of s1 restarts Alg. 1, O(z2 N) per round: after
 *      ZC_PAPER_MAX_ROUNDS rounds the fill partitioner places the batch
 *      (partition.c sends batches beyond ZC_PAPER_MAX_NODES nodes, and
 *      those that fill every device, there directly).
 *
 * Cost per round (each lowering of s1): O(n log N) with a heap of nodes
 * plus O(N + k log k) per z2 sequence (O(N log N) when it needs more
 * nodes than Alg. 1 asked for). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/plan/partition.h"
#include "src/plan/plan.h"
#include "src/common/status.h"

#define ZC_PAPER_MAX_ROUNDS 64

/* Place z2 sequence s over k >= k0 nodes, case (c).  Writes the ring's
 * nodes in ring order into the pool (one entry per position, the node index
 * for now; Alg. 2 replaces it by the rank).  Returns 0 when it cannot fit. */
static int zc_place_inter(zc_partitioner_t *pt, size_t s, int k0, int *nodes, int64_t *frag)
{
    int N = pt->nnodes, P = pt->ppn;
    int64_t len = pt->len[s], cap = (int64_t)P * pt->capacity;
    int *chosen = malloc((size_t)N * sizeof(*chosen));

    if (!chosen)
        return -1;
    for (int i = 0; i < N; i++)
        nodes[i] = i;
    for (int k = k0; k <= N; k++) {
        int g = k * P, rot;
        int64_t hi;

        /* the k least-loaded nodes: a selection for the first try, one full
         * sort when the sequence needs more nodes than Alg. 1 asked for */
        if (k == k0)
            zc_select_least(nodes, N, k, pt->node_load);
        else if (k == k0 + 1)
            zc_sort_by_load(nodes, N, pt->node_load);
        /* necessary: the most loaded of the k takes at least the smallest
         * fragment; skips hopeless k in O(1) */
        if (pt->node_load[nodes[k - 1]] + (int64_t)P * (len / g) > cap)
            continue;
        memcpy(chosen, nodes, (size_t)k * sizeof(*chosen));
        hi = zc_even_ring_nodes(pt->node_load, chosen, k, len, P, frag, &rot);
        if (hi <= cap) {
            int *ring;

            if (zc_pool_reserve(pt, s, g) < 0) {
                free(chosen);
                return -1;
            }
            ring = zc_ring_ranks(pt, s);
            for (int b = 0; b < k; b++) {
                int node = chosen[(rot + b) % k];

                pt->node_load[node] += frag[b];
                for (int p = b * P; p < (b + 1) * P; p++)
                    ring[p] = node;
            }
            pt->inter_k[s] = k;
            free(chosen);
            return 1;
        }
    }
    free(chosen);
    return 0;
}

/* Returns 1 on success, 0 when z2 cannot be placed (case f), <0 on error. */
int zc_alg1(zc_partitioner_t *pt)
{
    int N = pt->nnodes, P = pt->ppn;
    int64_t cap = (int64_t)P * pt->capacity;
    int *nodes = malloc((size_t)N * sizeof(*nodes));
    int64_t *frag = malloc((size_t)N * sizeof(*frag));
    int rc = 1;

    if (!nodes || !frag) {
        rc = zc_error(ZC_ERR_NO_MEMORY, "partition: cannot allocate %d nodes", N);
        goto out;
    }
    pt->s1 = cap;
    for (int round = 0;; round++) {
        size_t m = 0;
        int64_t sum2 = 0;
        int again = 0;

        if (round == ZC_PAPER_MAX_ROUNDS)
            goto out_fill; /* case (k) */
        pt->pool_len = 0;
        memset(pt->node_load, 0, (size_t)N * sizeof(*pt->node_load));
        while (m < pt->nseqs && pt->len[pt->order[m]] >= pt->s1 && pt->len[pt->order[m]] > 0)
            sum2 += pt->len[pt->order[m++]];
        /* z2: split each over ceil(|s| / s_avg) nodes, s_avg = sum(z2) / N */
        for (size_t k = 0; k < m; k++) {
            size_t s = pt->order[k];
            int64_t kk = zc_ceil_muldiv(pt->len[s], N, sum2);
            int r = zc_place_inter(pt, s, (int)(kk < N ? kk : N), nodes, frag);

            if (r < 0) {
                rc = zc_error(ZC_ERR_NO_MEMORY, "partition: out of memory");
                goto out;
            }
            if (r == 0)
                goto out_fill; /* case (f) */
            pt->seq_node[s] = -1;
        }
        /* z01: least-loaded node; a sequence that does not fit lowers s1 */
        zc_heap_build(nodes, N, pt->node_load);
        for (size_t k = m; k < pt->nseqs; k++) {
            size_t s = pt->order[k];
            int n = nodes[0];

            if (pt->len[s] + pt->node_load[n] > cap) {
                pt->s1 = pt->len[pt->order[m]]; /* max(z01) */
                again = 1;
                break;
            }
            pt->node_load[n] += pt->len[s];
            zc_heap_sift_down(nodes, N, 0, pt->node_load);
            pt->seq_node[s] = n;
            pt->inter_k[s] = 0;
        }
        if (!again)
            break;
    }
out:
    free(nodes);
    free(frag);
    return rc;
out_fill:
    rc = 0;
    goto out;
}
