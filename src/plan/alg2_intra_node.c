/* Algorithm 2 of the Zeppelin paper, "Intra-Node Partitioning" (section
 * 3.1, Sequence Partitioner), on every node after Algorithm 1
 * (src/plan/alg1_inter_node.c): the node's fragments of inter-node (z2)
 * sequences split evenly over its P devices (line 4); threshold s0 = L;
 * every sequence of z1 = { |s| >= s0 } cut into ceil(c(s) / c_avg)
 * fragments, c_avg = sum(z1 c(s)) / P, given to devices round robin, where
 * c(s) is the sequence's attention work: its visible (query, key) pairs
 * under the plan's mask (the paper's |s|^2 has the causal mask's shape; a
 * window's work is about |s| w, so its rings take devices in proportion to
 * tokens); every sequence of z0 whole on the least-loaded device; a z0
 * sequence that does not fit lowers s0 to max(z0) and the node restarts.
 * The fragments of a ring are its positions (src/plan/zigzag.c).  The
 * driver is src/plan/partition.c.
 *
 * Open cases decided here (the whole list is in src/plan/partition.c):
 *  (d) a z2 sequence that gets a single node (k = 1) needs no inter-node
 *      link: it is split over the P devices of that node like Alg. 2 line 4
 *      does, and its zone is reported as intra (local when P = 1).
 *  (e) intra-node fragments that would push a device over L: Alg. 2's
 *      round-robin devices are kept when they have room; otherwise the g
 *      devices with most room; otherwise g grows up to P.  If even g = P
 *      does not fit: the fill partitioner.
 *  (g) an intra-node sequence whose share of the work gives g = 1 fragment is
 *      local: a ring of one device needs no communication.
 *  (i) zero-length sequences are local on the least-loaded device and hold
 *      no piece.
 * Inside a ring, the positions holding one token more (remainders of the
 * 2G-chunk cut) go to the least-loaded devices, so that a node's even split
 * is never more than one token above its mean.
 *
 * Cost: O(n_v P log P) per round on a node of n_v sequences; a round per
 * lowering of s0. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/plan/partition.h"
#include "src/plan/plan.h"
#include "src/common/status.h"

static zc_zone_t zc_zone_of(int nnodes_spanned, int nranks)
{
    if (nnodes_spanned > 1)
        return ZC_ZONE_INTER;
    return nranks > 1 ? ZC_ZONE_INTRA : ZC_ZONE_LOCAL;
}

/* Give a ring's positions [first, first + n) to the devices `devs` (ranks),
 * the positions with the larger zigzag share to the least-loaded devices;
 * adds the shares to `loads` (indexed by rank).  Returns the largest load.
 * `share` is scratch for n positions. */
static int64_t zc_assign_positions(int64_t len, int g, int first, int n, int *devs,
                                   int64_t *loads, int *ring, int64_t *share)
{
    for (int p = 0; p < n; p++)
        share[p] = zc_zigzag_share(len, g, first + p);
    return zc_give_positions(share, n, devs, loads, ring + first);
}

/* Largest load a ring placement would produce, without changing loads. */
static int64_t zc_try_positions(int64_t len, int g, int *devs, int64_t *loads, int *ring,
                                int64_t *share)
{
    int64_t hi = zc_assign_positions(len, g, 0, g, devs, loads, ring, share);

    zc_take_positions(share, g, ring, loads);
    return hi;
}

/* ---- Algorithm 2 ---------------------------------------------------------- */

/* Place one z1 sequence of node `node` over g devices, case (e). */
static zc_status_t zc_place_intra(zc_partitioner_t *pt, int node, size_t s, int g, int *cursor,
                                  int64_t *loads, int *devs, int64_t *share, int *placed)
{
    int P = pt->ppn, base = node * P;
    int64_t len = pt->len[s];
    int *ring;

    *placed = 0;
    ZC_CHECK(zc_pool_reserve(pt, s, P));
    ring = zc_ring_ranks(pt, s);
    /* Alg. 2: fragments round robin from the cursor */
    for (int i = 0; i < g; i++)
        devs[i] = base + (*cursor + i) % P;
    if (zc_try_positions(len, g, devs, loads, ring, share) > pt->capacity) {
        /* the g devices with most room, then more devices */
        for (;; g++) {
            for (int i = 0; i < P; i++)
                devs[i] = base + i;
            zc_sort_by_load(devs, P, loads);
            if (zc_try_positions(len, g, devs, loads, ring, share) <= pt->capacity)
                break;
            if (g == P)
                return ZC_OK; /* not placed: case (e), the fill partitioner */
        }
    } else {
        *cursor = (*cursor + g) % P;
    }
    zc_assign_positions(len, g, 0, g, devs, loads, ring, share);
    pt->ring_n[s] = g;
    pt->zone[s] = zc_zone_of(1, g);
    *placed = 1;
    return ZC_OK;
}

/* Alg. 2 on one node; *placed = 0 when case (e) gives up. */
static zc_status_t zc_alg2_node(zc_partitioner_t *pt, int node, const size_t *z01, size_t nz,
                                int64_t *base_load, int *devs, int64_t *share, int *placed)
{
    int P = pt->ppn;
    size_t pool_mark = pt->pool_len;
    int64_t *loads = pt->dev_load; /* indexed by rank; this node's slice only */
    int64_t s0 = pt->capacity;

    for (;;) {
        size_t m = 0;
        zc_pairs_t sum = 0;
        int cursor = 0, again = 0;

        pt->pool_len = pool_mark;
        memcpy(loads + node * P, base_load, (size_t)P * sizeof(*loads));
        while (m < nz && pt->len[z01[m]] >= s0 && pt->len[z01[m]] > 0) {
            sum += zc_mask_pairs(pt->mask, pt->len[z01[m]], 0, pt->len[z01[m]]);
            m++;
        }
        /* z1: ceil(c(s) / c_avg) fragments, c_avg = sum(c(s)) / P */
        for (size_t k = 0; k < m; k++) {
            size_t s = z01[k];
            zc_pairs_t gg = (zc_mask_pairs(pt->mask, pt->len[s], 0, pt->len[s]) * (unsigned)P +
                             sum - 1) / sum;
            int g = gg > (unsigned)P ? P : (int)gg;

            ZC_CHECK(zc_place_intra(pt, node, s, g, &cursor, loads, devs, share, placed));
            if (!*placed)
                return ZC_OK;
        }
        /* z0: whole on the least-loaded device; one that does not fit lowers s0 */
        for (size_t k = m; k < nz; k++) {
            size_t s = z01[k];
            int d = zc_least_loaded(loads + node * P, P);

            if (pt->len[s] + loads[node * P + d] > pt->capacity) {
                s0 = pt->len[z01[m]]; /* max(z0) */
                again = 1;
                break;
            }
            ZC_CHECK(zc_pool_reserve(pt, s, 1));
            zc_ring_ranks(pt, s)[0] = node * P + d;
            loads[node * P + d] += pt->len[s];
            pt->zone[s] = ZC_ZONE_LOCAL;
        }
        if (!again)
            break;
    }
    pt->s0[node] = s0;
    return ZC_OK;
}

/* Alg. 2 line 4 for every node: split the node's z2 fragments over its P
 * devices, then place its z01 sequences.  *placed = 0 when a node gives
 * up (case e). */
zc_status_t zc_alg2(zc_partitioner_t *pt, int *placed)
{
    int N = pt->nnodes, P = pt->ppn;
    size_t *z01 = malloc((pt->nseqs ? pt->nseqs : 1) * sizeof(*z01));
    int64_t *base = malloc((size_t)P * sizeof(*base));
    int *devs = malloc((size_t)P * sizeof(*devs));
    int64_t *share = malloc((size_t)P * sizeof(*share));
    size_t *first = calloc((size_t)N + 1, sizeof(*first));
    size_t *fill = malloc((size_t)N * sizeof(*fill));
    zc_status_t st = ZC_OK;

    *placed = 1;
    if (!z01 || !base || !devs || !share || !first || !fill) {
        st = zc_error(ZC_ERR_NO_MEMORY, "partition: cannot allocate node lists");
        goto out;
    }
    memset(pt->dev_load, 0, (size_t)N * P * sizeof(*pt->dev_load));
    /* z2 rings: the pool holds their node per position; make them ranks */
    for (size_t k = 0; k < pt->nseqs; k++) {
        size_t s = pt->order[k];
        int kk = pt->inter_k[s], g = kk * P;
        int *ring;

        if (kk == 0)
            continue;
        ring = zc_ring_ranks(pt, s);
        for (int b = 0; b < kk; b++) {
            int node = ring[b * P];

            for (int i = 0; i < P; i++)
                devs[i] = node * P + i;
            zc_assign_positions(pt->len[s], g, b * P, P, devs, pt->dev_load, ring, share);
        }
        pt->zone[s] = zc_zone_of(kk, g);
    }
    /* z01 of every node, longest first: a counting sort by node */
    for (size_t k = 0; k < pt->nseqs; k++)
        if (pt->inter_k[pt->order[k]] == 0)
            first[pt->seq_node[pt->order[k]] + 1]++;
    for (int n = 0; n < N; n++)
        first[n + 1] += first[n];
    memcpy(fill, first, (size_t)N * sizeof(*fill));
    for (size_t k = 0; k < pt->nseqs; k++)
        if (pt->inter_k[pt->order[k]] == 0)
            z01[fill[pt->seq_node[pt->order[k]]]++] = pt->order[k];
    for (int n = 0; n < N && *placed; n++) {
        memcpy(base, pt->dev_load + n * P, (size_t)P * sizeof(*base));
        ZC_CHECK_GOTO(zc_alg2_node(pt, n, z01 + first[n], first[n + 1] - first[n], base, devs,
                                   share, placed), st, out);
    }
out:
    free(z01);
    free(base);
    free(devs);
    free(share);
    free(first);
    free(fill);
    return st;
}
