/* Algorithm 1 (inter-node) and Algorithm 2 (intra-node) of the Zeppelin
 * paper, section 3.1, as the paper writes them: thresholds lowered until
 * every sequence fits, with every case the pseudo-code leaves open decided
 * here (and in zc_plan_create(3)).  A batch they cannot place without
 * splitting sequences evenly over a whole node or the whole cluster (the
 * last resorts the pseudo-code leaves, cases (e) and (f)) goes to the fill
 * partitioner instead (src/plan/fill.c); so does every batch that fills the
 * cluster to the last token, where lowering the thresholds ends at the TE
 * CP layout.  zc_partition() picks, and builds the even split asked for
 * with ZC_PLAN_EVEN_SPLIT.
 *
 * Conventions that make the result deterministic: sequences are sorted by
 * length, longest first, ties by input order; "least loaded" ties go to the
 * lowest index; all arithmetic is integer (src/plan/bins.c).
 *
 * Open cases and their decisions:
 *  (a) total tokens > N*P*L (including one sequence longer than the whole
 *      cluster): ZC_ERR_CAPACITY, nothing is built (zc_plan_create).
 *  (b) empty batch: a valid plan with no rings and no pieces.
 *  (c) more inter-node fragments than empty node buckets: the k fragments of
 *      a z2 sequence go to the k least-loaded nodes (empty nodes are the
 *      least loaded, so this is Alg. 1's "empty buckets" while they last);
 *      if one of them would exceed P*L, k grows by one (smaller fragments)
 *      up to N.  The ring is node-contiguous; its start is rotated so that
 *      the chunks' remainder tokens land on the least-loaded nodes.
 *  (d) a z2 sequence that gets a single node (k = 1) needs no inter-node
 *      link: it is split over the P devices of that node like Alg. 2 line 4
 *      does, and its zone is reported as intra (local when P = 1).
 *  (e) intra-node fragments that would push a device over L: Alg. 2's
 *      round-robin devices are kept when they have room; otherwise the g
 *      devices with most room; otherwise g grows up to P.  If even g = P
 *      does not fit: the fill partitioner.
 *  (f) Alg. 1 cannot place z2 even with k = N: the fill partitioner.
 *  (g) an intra-node sequence whose quadratic share gives g = 1 fragment is
 *      local: a ring of one device needs no communication.
 *  (h) N = 1: s1 = P*L can only catch a sequence of exactly P*L tokens, which
 *      (d) makes intra; there is no inter-node zone.  P = 1: every ring
 *      inside a node has one device, so (d) and (g) make it local.
 *  (i) zero-length sequences are local on the least-loaded device and hold
 *      no piece.
 *  (k) each lowering of s1 restarts Alg. 1, O(z2 N) per round: after
 *      ZC_PAPER_MAX_ROUNDS rounds, beyond ZC_PAPER_MAX_NODES nodes, and for
 *      a batch that fills every device (where the lowering always ends in
 *      case f), the fill partitioner places the batch directly.  At 16384
 *      GPUs the paper's order takes hundreds of rounds and seconds.
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

#include "src/plan/plan.h"
#include "src/common/status.h"

#define ZC_PAPER_MAX_ROUNDS 64
#define ZC_PAPER_MAX_NODES 128

typedef struct {
    int nnodes, ppn;
    int64_t capacity;
    const int64_t *len;
    size_t nseqs;
    size_t *order;          /* longest first, ties by input order */
    int *pool;              /* ring ranks of every sequence */
    size_t pool_len, pool_cap;
    size_t *ring_off;       /* [nseqs] offset in pool */
    int *ring_n;            /* [nseqs] ring size */
    zc_zone_t *zone;        /* [nseqs] */
    int *seq_node;          /* [nseqs] Alg. 1 node of a z01 sequence, -1 for z2 */
    int *inter_k;           /* [nseqs] nodes of a z2 sequence, 0 for z01 */
    int64_t *node_load;     /* [nnodes] */
    int64_t *dev_load;      /* [nnodes * ppn] */
    int64_t s1;
    int64_t *s0;            /* [nnodes] */
    unsigned flags;
} zc_partitioner_t;

static zc_status_t zc_pool_reserve(zc_partitioner_t *pt, size_t seq, int n)
{
    if (pt->pool_len + (size_t)n > pt->pool_cap) {
        size_t cap = pt->pool_cap ? pt->pool_cap : 1024;
        int *p;

        while (cap < pt->pool_len + (size_t)n)
            cap *= 2;
        p = realloc(pt->pool, cap * sizeof(*p));
        if (!p)
            return zc_error(ZC_ERR_NO_MEMORY, "partition: cannot grow the ring pool to %zu", cap);
        pt->pool = p;
        pt->pool_cap = cap;
    }
    pt->ring_off[seq] = pt->pool_len;
    pt->ring_n[seq] = n;
    pt->pool_len += (size_t)n;
    return ZC_OK;
}

static int *zc_ring_ranks(zc_partitioner_t *pt, size_t seq)
{
    return pt->pool + pt->ring_off[seq];
}

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

/* ---- Algorithm 1: inter-node --------------------------------------------- */

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
static int zc_alg1(zc_partitioner_t *pt)
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

/* ---- Algorithm 2: intra-node --------------------------------------------- */

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
        unsigned __int128 sumsq = 0;
        int cursor = 0, again = 0;

        pt->pool_len = pool_mark;
        memcpy(loads + node * P, base_load, (size_t)P * sizeof(*loads));
        while (m < nz && pt->len[z01[m]] >= s0 && pt->len[z01[m]] > 0) {
            sumsq += (unsigned __int128)pt->len[z01[m]] * (unsigned __int128)pt->len[z01[m]];
            m++;
        }
        /* z1: ceil(|s|^2 / c_avg) fragments, c_avg = sum(|s|^2) / P */
        for (size_t k = 0; k < m; k++) {
            size_t s = z01[k];
            unsigned __int128 sq = (unsigned __int128)pt->len[s] * (unsigned __int128)pt->len[s];
            unsigned __int128 gg = (sq * (unsigned)P + sumsq - 1) / sumsq;
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
static zc_status_t zc_alg2(zc_partitioner_t *pt, int *placed)
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

/* The paper's algorithms; *placed = 0 (and nothing in part) when they give
 * up (cases e and f). */
static zc_status_t zc_partition_paper(int nnodes, int ppn, int64_t capacity,
                                      const int64_t *lengths, size_t count, zc_part_t *part,
                                      int *placed)
{
    zc_partitioner_t pt = {
        .nnodes = nnodes, .ppn = ppn, .capacity = capacity, .len = lengths, .nseqs = count,
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

void zc_partition_free(zc_part_t *part)
{
    free(part->seqs);
    free(part->rank_pool);
    free(part->share_pool);
    free(part->s0);
    memset(part, 0, sizeof(*part));
}

zc_status_t zc_partition(int nnodes, int ppn, int64_t capacity, const int64_t *lengths,
                         size_t count, int64_t total, unsigned flags, zc_part_t *part)
{
    int placed = 0;

    memset(part, 0, sizeof(*part));
    if (flags & ZC_PLAN_EVEN_SPLIT)
        return zc_even_split(nnodes, ppn, lengths, count, part);
    if (nnodes <= ZC_PAPER_MAX_NODES && total < (int64_t)nnodes * ppn * capacity)
        ZC_CHECK(zc_partition_paper(nnodes, ppn, capacity, lengths, count, part, &placed));
    if (placed)
        return ZC_OK;
    zc_log_debug("partition: %zu sequences on %d x %d x %lld: the fill partitioner", count,
                 nnodes, ppn, (long long)capacity);
    return zc_partition_fill(nnodes, ppn, capacity, lengths, count, part);
}
