/* The partitioner's driver: zc_partition() runs the Zeppelin paper's
 * Algorithm 1 (inter-node, src/plan/alg1_inter_node.c) and Algorithm 2
 * (intra-node, src/plan/alg2_intra_node.c) of section 3.1 as the paper
 * writes them (thresholds lowered until every sequence fits, with every
 * case the pseudo-code leaves open decided as listed below and in
 * zc_plan_create(3)) and turns their result into the partition
 * (zc_part_t).  A batch they cannot place without splitting sequences
 * evenly over a whole node or the whole cluster (the last resorts the
 * pseudo-code leaves, cases (e) and (f)) goes to the fill partitioner
 * instead (src/plan/fill.c); so does every batch that fills the cluster to
 * the last token, where lowering the thresholds ends at the TE CP layout.
 * zc_partition() picks, and builds the even split asked for with
 * ZC_PLAN_EVEN_SPLIT (one global ring per sequence, the TE CP layout).
 *
 * Conventions that make the result deterministic: sequences are sorted by
 * length, longest first, ties by input order; "least loaded" ties go to the
 * lowest index; all arithmetic is integer (src/plan/bins.c).
 *
 * Open cases and their decisions (those of one algorithm are written in
 * its file too):
 *  (a) total tokens > N*P*L (including one sequence longer than the whole
 *      cluster): ZC_ERR_CAPACITY, nothing is built (zc_plan_create).
 *  (b) empty batch: a valid plan with no rings and no pieces.
 *  (c) more inter-node fragments than empty node buckets: k least-loaded
 *      nodes, k growing up to N (src/plan/alg1_inter_node.c).
 *  (d) a z2 sequence that gets a single node is intra (local when P = 1)
 *      (src/plan/alg2_intra_node.c).
 *  (e) intra-node fragments that would push a device over L: other
 *      devices, more devices up to P, else the fill partitioner
 *      (src/plan/alg2_intra_node.c).
 *  (f) Alg. 1 cannot place z2 even with k = N: the fill partitioner
 *      (src/plan/alg1_inter_node.c).
 *  (g) an intra-node sequence of g = 1 fragment is local
 *      (src/plan/alg2_intra_node.c).
 *  (h) N = 1: s1 = P*L can only catch a sequence of exactly P*L tokens, which
 *      (d) makes intra; there is no inter-node zone.  P = 1: every ring
 *      inside a node has one device, so (d) and (g) make it local.
 *  (i) zero-length sequences are local on the least-loaded device and hold
 *      no piece (src/plan/alg2_intra_node.c).
 *  (k) each lowering of s1 restarts Alg. 1, O(z2 N) per round: after
 *      ZC_PAPER_MAX_ROUNDS rounds (src/plan/alg1_inter_node.c), beyond
 *      ZC_PAPER_MAX_NODES nodes, and for a batch that fills every device
 *      (where the lowering always ends in case f), the fill partitioner
 *      places the batch directly.  At 16384 GPUs the paper's order takes
 *      hundreds of rounds and seconds.
 * Inside a ring, the positions holding one token more (remainders of the
 * 2G-chunk cut) always go to the least-loaded devices, so that a node's or a
 * cluster's even split is never more than one token above its mean.
 *
 * Cost: O(n log n) to sort; each lowering of s1 (s0) re-places the
 * sequences of its level, O(n log N) with a heap of nodes plus O(N + k log k)
 * per z2 sequence (O(N log N) when it needs more nodes than Alg. 1 asked
 * for), O(n_v P log P) per node; there are at most as many lowerings as
 * distinct lengths, few in practice. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/plan/partition.h"
#include "src/plan/plan.h"
#include "src/common/status.h"

#define ZC_PAPER_MAX_NODES 128

/* The paper's algorithms; *placed = 0 (and nothing in part) when they give
 * up (cases e and f). */
static zc_status_t zc_partition_paper(int nnodes, int ppn, int64_t capacity,
                                      const int64_t *lengths, size_t count, zc_attn_mask_t mask,
                                      zc_part_t *part, int *placed)
{
    zc_partitioner_t pt = {
        .nnodes = nnodes, .ppn = ppn, .capacity = capacity, .len = lengths, .nseqs = count,
        .mask = mask,
    };
    size_t n = count ? count : 1;
    int nr = nnodes * ppn;
    zc_status_t st = ZC_OK;
    int r;

    *placed = 0;
    pt.order = malloc(n * sizeof(*pt.order));
    pt.ring_off = calloc(n, sizeof(*pt.ring_off));
    pt.ring_n = calloc(n, sizeof(*pt.ring_n));
    pt.zone = calloc(n, sizeof(*pt.zone));
    pt.seq_node = calloc(n, sizeof(*pt.seq_node));
    pt.inter_k = calloc(n, sizeof(*pt.inter_k));
    pt.node_load = calloc((size_t)nnodes, sizeof(*pt.node_load));
    pt.dev_load = calloc((size_t)nr, sizeof(*pt.dev_load));
    pt.s0 = calloc((size_t)nnodes, sizeof(*pt.s0));
    if (!pt.order || !pt.ring_off || !pt.ring_n || !pt.zone || !pt.seq_node || !pt.inter_k ||
        !pt.node_load || !pt.dev_load || !pt.s0) {
        st = zc_error(ZC_ERR_NO_MEMORY, "partition: cannot allocate for %zu sequences", count);
        goto out;
    }
    zc_sort_longest_first(pt.order, lengths, count);
    r = zc_alg1(&pt);
    if (r < 0) {
        st = (zc_status_t)r;
        goto out;
    }
    if (r == 0)
        goto out; /* case (f) */
    ZC_CHECK_GOTO(zc_alg2(&pt, placed), st, out);
    if (!*placed)
        goto out; /* case (e) */
    part->seqs = calloc(n, sizeof(*part->seqs));
    part->share_pool = malloc((pt.pool_len ? pt.pool_len : 1) * sizeof(*part->share_pool));
    if (!part->seqs || !part->share_pool) {
        st = zc_error(ZC_ERR_NO_MEMORY, "partition: cannot allocate the result");
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        zc_part_ring_t *pr = &part->seqs[i];

        pr->seq = i;
        pr->zone = pt.zone[i];
        pr->nranks = pt.ring_n[i];
        pr->ranks = pt.pool + pt.ring_off[i];
        pr->share = part->share_pool + pt.ring_off[i];
        for (int p = 0; p < pr->nranks; p++)
            pr->share[p] = zc_zigzag_share(lengths[i], pr->nranks, p);
    }
    part->rank_pool = pt.pool;
    pt.pool = NULL;
    part->s1 = pt.s1;
    part->s0 = pt.s0;
    pt.s0 = NULL;
out:
    if (st != ZC_OK || !*placed)
        zc_partition_free(part);
    free(pt.order);
    free(pt.pool);
    free(pt.ring_off);
    free(pt.ring_n);
    free(pt.zone);
    free(pt.seq_node);
    free(pt.inter_k);
    free(pt.node_load);
    free(pt.dev_load);
    free(pt.s0);
    return st;
}

/* ---- ZC_PLAN_EVEN_SPLIT: one global ring per sequence (TE CP) ----------- */

static zc_status_t zc_even_split(int nnodes, int ppn, const int64_t *lengths, size_t count,
                                 zc_part_t *part)
{
    int g = nnodes * ppn, cursor = 0;
    size_t n = count ? count : 1, npos = count * (size_t)g;
    size_t *order = malloc(n * sizeof(*order));

    part->seqs = calloc(n, sizeof(*part->seqs));
    part->rank_pool = malloc((npos ? npos : 1) * sizeof(*part->rank_pool));
    part->share_pool = malloc((npos ? npos : 1) * sizeof(*part->share_pool));
    part->s0 = calloc((size_t)nnodes, sizeof(*part->s0));
    if (!order || !part->seqs || !part->rank_pool || !part->share_pool || !part->s0) {
        free(order);
        zc_partition_free(part);
        return zc_error(ZC_ERR_NO_MEMORY, "partition: cannot allocate %zu ring positions", npos);
    }
    zc_sort_longest_first(order, lengths, count);
    for (size_t k = 0; k < count; k++) {
        size_t s = order[k];
        int64_t len = lengths[s], rem = len % (2 * (int64_t)g);
        zc_part_ring_t *pr = &part->seqs[s];
        int e0, ne, rot;

        pr->seq = s;
        pr->ranks = part->rank_pool + s * (size_t)g;
        pr->share = part->share_pool + s * (size_t)g;
        /* ring positions holding one token more: [0, rem) or [2G-rem, G) */
        e0 = rem <= g ? 0 : (int)(2 * g - rem);
        ne = (int)(len % g);
        /* rotate the global ring so those positions start at the cursor:
         * the remainders go round robin, loads stay within one token */
        rot = ((cursor - e0) % g + g) % g;
        for (int p = 0; p < g; p++) {
            pr->ranks[p] = (p + rot) % g;
            pr->share[p] = zc_zigzag_share(len, g, p);
        }
        cursor = (cursor + ne) % g;
        pr->nranks = g;
        pr->zone = nnodes > 1 ? ZC_ZONE_INTER : g > 1 ? ZC_ZONE_INTRA : ZC_ZONE_LOCAL;
    }
    free(order);
    return ZC_OK;
}

zc_status_t zc_partition(int nnodes, int ppn, int64_t capacity, const int64_t *lengths,
                         size_t count, int64_t total, unsigned flags, zc_attn_mask_t mask,
                         zc_part_t *part)
{
    int placed = 0;

    memset(part, 0, sizeof(*part));
    if (flags & ZC_PLAN_EVEN_SPLIT)
        return zc_even_split(nnodes, ppn, lengths, count, part);
    if (nnodes <= ZC_PAPER_MAX_NODES && total < (int64_t)nnodes * ppn * capacity)
        ZC_CHECK(zc_partition_paper(nnodes, ppn, capacity, lengths, count, mask, part,
                                    &placed));
    if (placed)
        return ZC_OK;
    zc_log_debug("partition: %zu sequences on %d x %d x %lld: the fill partitioner", count,
                 nnodes, ppn, (long long)capacity);
    return zc_partition_fill(nnodes, ppn, capacity, lengths, count, mask, part);
}
