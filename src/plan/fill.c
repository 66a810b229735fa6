/* The fill partitioner: Algorithms 1 and 2 of the Zeppelin paper (section
 * 3.1) with a fill step the paper leaves open, for the batches the paper's
 * algorithms as written (src/plan/partition.c, alg1_inter_node.c,
 * alg2_intra_node.c) cannot place: above all batches
 * that fill every device, as training frameworks pack them, where lowering
 * the thresholds ends at the TE CP layout.
 *
 * Conventions that make the result deterministic: sequences are sorted by
 * length, longest first, ties by input order; "least loaded" ties go to the
 * lowest index; all arithmetic is integer (src/plan/bins.c).
 *
 * The two levels run the same three steps on their bins (nodes of P*L
 * tokens, then the devices of one node, L tokens each):
 *   1. whole sequences first, longest first, on the least-loaded bin where
 *      they fit (z01 of Alg. 1, z0 of Alg. 2, and inside a node the pieces
 *      of sequences cut between nodes): they cannot stretch, rings can;
 *   2. rings for the long sequences: a z2 sequence (at least s1 = P*L
 *      tokens) over k nodes as Alg. 1 says, a z1 sequence (at least
 *      s0 = L) over the g devices its share of the node's attention work
 *      asks for (Alg. 2: its visible pairs under the plan's mask),
 *      with the zigzag shares of an even ring where the chosen bins have
 *      room, else poured into the bins with most room, most room first
 *      (an uneven ring): the rings absorb what step 1 left over;
 *   3. the fill step: what did not fit whole in step 1 is poured, in the
 *      order it was set aside, into the bins' leftover room, most room
 *      first.  A sequence poured over several bins is cut there and forms a
 *      ring over exactly the devices that hold it, with the shares they hold
 *      (src/plan/zigzag.c lays out such uneven rings).
 * The paper places z2 before z01 and lowers s1 (s0) when a sequence does
 * not fit.  On a batch that fills the cluster that repeats until every
 * sequence is on one global ring, the TE CP layout; the fill step keeps the
 * thresholds at P*L and L and cuts only what must be cut.  Placing whole
 * sequences before the rings leaves the leftover room to the sequences
 * that can stretch: on exactly-full batches of the paper's datasets this
 * models about 8 % faster than the paper's order (zc_plan_quality(1),
 * BENCHMARKS.md).  Because step 3 walks the bins once in one order, each
 * bin boundary is crossed by at most one cut sequence: at most N - 1
 * sequences cross nodes besides the z2 ones, and at most P - 1 cut
 * sequences cross devices inside one node.  No bin is filled past its
 * capacity, and every batch whose total fits is placed.
 *
 * Open cases and their decisions:
 *  (a) total tokens > N*P*L (including one sequence longer than the whole
 *      cluster): ZC_ERR_CAPACITY, nothing is built (zc_plan_create).
 *  (b) empty batch: a valid plan with no rings and no pieces.
 *  (c) more inter-node fragments than empty node buckets: the k fragments of
 *      a z2 sequence go to the k least-loaded nodes (empty nodes are the
 *      least loaded, so this is Alg. 1's "empty buckets" while they last).
 *      The ring is node-contiguous; its start is rotated so that the chunks'
 *      remainder tokens land on the least-loaded nodes.  If one of them
 *      would exceed P*L, the sequence is poured instead into the nodes with
 *      the most room, most room first, so that it spans as few nodes as it
 *      can; the ring visits them by index (ZC_PLAN_SEQ_UNEVEN).
 *  (d) a z2 sequence that gets a single node (k = 1) needs no inter-node
 *      link: it is split over the P devices of that node like Alg. 2 line 4
 *      does, and its zone is reported as intra (local when P = 1).
 *  (e) a z1 sequence whose g round-robin devices lack room: the g devices
 *      with most room; otherwise a ring poured into the fewest devices with
 *      most room that hold it, g growing up to P (ZC_PLAN_SEQ_UNEVEN).
 *  (f) the even split (one global ring per sequence, TE CP layout) is only
 *      built when asked for with ZC_PLAN_EVEN_SPLIT; it is never a fallback.
 *  (g) an intra-node sequence whose share of the work gives g = 1 fragment is
 *      local: a ring of one device needs no communication.
 *  (h) N = 1: s1 = P*L can only catch a sequence of exactly P*L tokens, which
 *      (d) makes intra; there is no inter-node zone.  P = 1: every ring
 *      inside a node has one device, so (d) and (g) make it local.
 *  (i) zero-length sequences are local on the least-loaded device and hold
 *      no piece.
 *  (j) Alg. 2 line 4 spreads a node's fragment of a z2 sequence over all P
 *      devices; fragments of a sequence cut by step 3 at node level are
 *      placed like whole sequences instead (whole on one device where they
 *      fit), so that such a ring spans only the devices it needs.
 * Inside an even ring, the positions holding one token more (remainders of
 * the 2G-chunk cut) go to the least-loaded devices, so that a node's or a
 * cluster's even split is never more than one token above its mean.
 *
 * Cost: sorting the batch O(n log n); step 1 of Alg. 1 O(n log N) with a
 * heap of nodes; step 2 O(N + k log k) per z2 sequence (selections of its k
 * nodes, k <= N, doubling at most log N times when poured); Alg. 2
 * O(n_v P log P) for the n_v items of node v; the pours O(items + bins + N
 * log N).  Total O(n log n + n P log P + z2 N log N) for n sequences. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/plan/plan.h"
#include "src/common/status.h"

/* A sequence's share of one node, in ring order; a sequence has one per
 * node it spans, consecutive in zc_filler_t.frags. */
typedef struct {
    size_t seq;
    int node;
    int block;              /* even z2 ring: its block of P positions; else -1 */
    int spread;             /* z2: over all P devices (Alg. 2 line 4) */
    int64_t tokens;
    int npos;               /* positions placed on the node's devices */
    size_t pos;             /* first of its P slots in pos_rank / pos_share */
} zc_frag_t;

typedef struct {
    int nnodes, ppn;
    int64_t capacity;
    const int64_t *len;
    size_t nseqs;
    size_t *order;          /* longest first, ties by input order */
    zc_frag_t *frags;
    size_t nfrags, frags_cap;
    size_t *frag_off;       /* [nseqs] first fragment */
    int *frag_n;            /* [nseqs] fragments */
    unsigned *cut;          /* [nseqs] ZC_PLAN_SEQ_* */
    int *pos_rank;          /* [nfrags * P] */
    int64_t *pos_share;     /* [nfrags * P] */
    int64_t *node_load;     /* [nnodes] */
    int64_t *dev_load;      /* [nnodes * ppn] */
    int64_t s1;
    int64_t *s0;            /* [nnodes] */
    unsigned flags;
    zc_attn_mask_t mask;    /* prices a sequence: its visible pairs */
} zc_filler_t;

/* Append a fragment of `seq` on `node`; the fragments of one sequence must
 * be added one after the other. */
static zc_status_t zc_frag_add(zc_filler_t *pt, size_t seq, int node, int64_t tokens,
                               int block, int spread)
{
    zc_frag_t *f;

    if (pt->nfrags == pt->frags_cap) {
        size_t cap = pt->frags_cap ? 2 * pt->frags_cap : 1024;
        zc_frag_t *p = realloc(pt->frags, cap * sizeof(*p));

        if (!p)
            return zc_error(ZC_ERR_NO_MEMORY, "partition: cannot grow the fragments to %zu",
                            cap);
        pt->frags = p;
        pt->frags_cap = cap;
    }
    if (pt->frag_n[seq] == 0)
        pt->frag_off[seq] = pt->nfrags;
    pt->frag_n[seq]++;
    f = &pt->frags[pt->nfrags++];
    f->seq = seq;
    f->node = node;
    f->block = block;
    f->spread = spread;
    f->tokens = tokens;
    f->npos = 0;
    f->pos = 0;
    pt->node_load[node] += tokens;
    return ZC_OK;
}

/* Step 3's pour: `tokens` into the bins idx[*at..n) of capacity `cap`,
 * filling each before the next; *at stays on a bin that keeps room.
 * Writes the bins touched and their takes (n entries at most) and returns
 * their count; the caller adds the takes to `loads` before the next pour.
 * Returns -1 when the bins lack room, which the callers' totals rule out. */
static int zc_pour(const int64_t *loads, const int *idx, int n, int *at, int64_t cap,
                   int64_t tokens, int *bin, int64_t *take)
{
    int m = 0;

    while (tokens > 0) {
        int64_t room;

        if (*at >= n)
            return -1;
        room = cap - loads[idx[*at]];
        if (room <= 0) {
            ++*at;
            continue;
        }
        bin[m] = idx[*at];
        take[m] = room < tokens ? room : tokens;
        tokens -= take[m];
        if (take[m++] == room)
            ++*at;
    }
    return m;
}

/* ---- Algorithm 1: inter-node --------------------------------------------- */

/* Place z2 sequence s as an even ring over its k0 least-loaded nodes,
 * case (c).  Returns 1 when placed, 0 when they lack room, <0 on error. */
static int zc_fill_place_inter(zc_filler_t *pt, size_t s, int k, int *nodes, int *chosen,
                          int64_t *frag)
{
    int N = pt->nnodes, P = pt->ppn, g = k * P, rot;
    int64_t len = pt->len[s], cap = (int64_t)P * pt->capacity, hi;

    for (int i = 0; i < N; i++)
        nodes[i] = i;
    zc_select_least(nodes, N, k, pt->node_load);
    /* necessary: the most loaded of the k takes at least the smallest
     * fragment; skips a hopeless try in O(1) */
    if (pt->node_load[nodes[k - 1]] + (int64_t)P * (len / g) > cap)
        return 0;
    memcpy(chosen, nodes, (size_t)k * sizeof(*chosen));
    hi = zc_even_ring_nodes(pt->node_load, chosen, k, len, P, frag, &rot);
    if (hi > cap)
        return 0;
    for (int b = 0; b < k; b++)
        if (zc_frag_add(pt, s, chosen[(rot + b) % k], frag[b], b, 1) != ZC_OK)
            return -1;
    return 1;
}

/* Case (c) when the even split lacks room: poured into the nodes with most
 * room, most room first, so that it spans as few nodes as it can; the
 * candidates are the k least-loaded nodes, k doubling from Alg. 1's until
 * their room holds the sequence.  The ring visits its nodes by index. */
static zc_status_t zc_pour_inter(zc_filler_t *pt, size_t s, int k, int *nodes, int *bin,
                                 int64_t *take)
{
    int N = pt->nnodes, at = 0, m;
    int64_t cap = (int64_t)pt->ppn * pt->capacity, room;

    for (;; k = 2 * k < N ? 2 * k : N) {
        for (int i = 0; i < N; i++)
            nodes[i] = i;
        zc_select_least(nodes, N, k, pt->node_load);
        room = 0;
        for (int i = 0; i < k; i++)
            room += cap - pt->node_load[nodes[i]];
        if (room >= pt->len[s])
            break;
        if (k == N)
            return zc_error(ZC_ERR_INTERNAL, "partition: no room left for sequence %zu", s);
    }
    m = zc_pour(pt->node_load, nodes, k, &at, cap, pt->len[s], bin, take);
    /* by node index: a node-contiguous ring that walks the nodes in order */
    for (int i = 0; i < N; i++)
        nodes[i] = -1;
    for (int i = 0; i < m; i++)
        nodes[bin[i]] = i;
    for (int v = 0; v < N; v++)
        if (nodes[v] >= 0)
            ZC_CHECK(zc_frag_add(pt, s, v, take[nodes[v]], -1, 1));
    pt->cut[s] |= ZC_PLAN_SEQ_UNEVEN;
    return ZC_OK;
}

/* Step 3 at node level: sequence s poured over the nodes idx[*at..N) as
 * fragments. */
static zc_status_t zc_pour_nodes(zc_filler_t *pt, size_t s, const int *idx, int *at,
                                 int *bin, int64_t *take)
{
    int m = zc_pour(pt->node_load, idx, pt->nnodes, at, (int64_t)pt->ppn * pt->capacity,
                    pt->len[s], bin, take);

    if (m < 0)
        return zc_error(ZC_ERR_INTERNAL, "partition: no room left for sequence %zu", s);
    for (int i = 0; i < m; i++)
        ZC_CHECK(zc_frag_add(pt, s, bin[i], take[i], -1, 0));
    return ZC_OK;
}

static zc_status_t zc_fill_nodes(zc_filler_t *pt)
{
    int N = pt->nnodes, P = pt->ppn, at = 0;
    int64_t cap = (int64_t)P * pt->capacity, sum2 = 0;
    int *nodes = malloc((size_t)N * sizeof(*nodes));
    int *chosen = malloc((size_t)N * sizeof(*chosen));
    int64_t *frag = malloc((size_t)N * sizeof(*frag));
    int *bin = malloc((size_t)N * sizeof(*bin));
    size_t *deferred = malloc((pt->nseqs ? pt->nseqs : 1) * sizeof(*deferred));
    size_t m = 0, nd = 0;
    zc_status_t st = ZC_OK;

    if (!nodes || !chosen || !frag || !bin || !deferred) {
        st = zc_error(ZC_ERR_NO_MEMORY, "partition: cannot allocate %d nodes", N);
        goto out;
    }
    pt->s1 = cap;
    while (m < pt->nseqs && pt->len[pt->order[m]] >= pt->s1 && pt->len[pt->order[m]] > 0)
        sum2 += pt->len[pt->order[m++]];
    /* 1. z01 first, as they cannot stretch: whole on the least-loaded node
     * where they fit */
    zc_heap_build(nodes, N, pt->node_load);
    for (size_t k = m; k < pt->nseqs; k++) {
        size_t s = pt->order[k];
        int n = nodes[0];

        if (pt->len[s] + pt->node_load[n] > cap) {
            deferred[nd++] = s;
            continue;
        }
        ZC_CHECK_GOTO(zc_frag_add(pt, s, n, pt->len[s], -1, 0), st, out);
        zc_heap_sift_down(nodes, N, 0, pt->node_load);
    }
    /* 2. z2: split each over ceil(|s| / s_avg) nodes, s_avg = sum(z2) / N;
     * evenly where the k least-loaded nodes have room, else poured */
    for (size_t k = 0; k < m; k++) {
        size_t s = pt->order[k];
        int64_t kk = zc_ceil_muldiv(pt->len[s], N, sum2);
        int r = zc_fill_place_inter(pt, s, (int)(kk < N ? kk : N), nodes, chosen, frag);

        if (r < 0) {
            st = ZC_ERR_NO_MEMORY;
            goto out;
        }
        if (r == 0)
            ZC_CHECK_GOTO(zc_pour_inter(pt, s, (int)(kk < N ? kk : N), nodes, bin, frag), st,
                          out);
    }
    /* 3. fill: the rest poured over the nodes, most room first */
    for (int i = 0; i < N; i++)
        nodes[i] = i;
    zc_sort_by_load(nodes, N, pt->node_load);
    for (size_t k = 0; k < nd; k++) {
        size_t s = deferred[k];

        ZC_CHECK_GOTO(zc_pour_nodes(pt, s, nodes, &at, bin, frag), st, out);
        if (pt->frag_n[s] > 1)
            pt->cut[s] |= ZC_PLAN_SEQ_CUT_NODES;
    }
out:
    free(nodes);
    free(chosen);
    free(frag);
    free(bin);
    free(deferred);
    return st;
}

/* ---- Algorithm 2: intra-node --------------------------------------------- */

/* Alg. 2 line 4, case (j): a node's fragment of a z2 ring over all P devices;
 * an even ring keeps its zigzag shares, a poured one splits evenly. */
static void zc_place_spread(zc_filler_t *pt, zc_frag_t *f, int *devs)
{
    int P = pt->ppn, node = f->node;
    int64_t *share = pt->pos_share + f->pos;

    for (int i = 0; i < P; i++) {
        devs[i] = node * P + i;
        if (f->block >= 0)
            share[i] = zc_zigzag_share(pt->len[f->seq], pt->frag_n[f->seq] * P,
                                       f->block * P + i);
        else
            share[i] = f->tokens / P + (i < f->tokens % P);
    }
    zc_give_positions(share, P, devs, pt->dev_load, pt->pos_rank + f->pos);
    f->npos = P;
}

static void zc_place_one(zc_filler_t *pt, zc_frag_t *f, int rank, int64_t tokens)
{
    pt->pos_rank[f->pos + (size_t)f->npos] = rank;
    pt->pos_share[f->pos + (size_t)f->npos] = tokens;
    f->npos++;
    pt->dev_load[rank] += tokens;
}

/* Alg. 2 for a z1 sequence, case (e): an even ring over g devices, round
 * robin from the cursor where they have room, else over the g devices with
 * most room; else a ring poured into the devices with most room, most room
 * first, over the fewest that hold it (ZC_PLAN_SEQ_UNEVEN).  Returns 1 when
 * placed. */
static int zc_place_ring(zc_filler_t *pt, zc_frag_t *f, int g, int *cursor, int *devs,
                         int *bin, int64_t *take)
{
    int P = pt->ppn, base = f->node * P;
    int64_t *share = pt->pos_share + f->pos, *loads = pt->dev_load;
    int *rank = pt->pos_rank + f->pos;

    for (int i = 0; i < g; i++)
        share[i] = zc_zigzag_share(f->tokens, g, i);
    /* Alg. 2: fragments round robin from the cursor */
    for (int i = 0; i < g; i++)
        devs[i] = base + (*cursor + i) % P;
    if (zc_give_positions(share, g, devs, loads, rank) <= pt->capacity) {
        *cursor = (*cursor + g) % P;
        f->npos = g;
        return 1;
    }
    zc_take_positions(share, g, rank, loads);
    for (int i = 0; i < P; i++)
        devs[i] = base + i;
    zc_sort_by_load(devs, P, loads);
    if (zc_give_positions(share, g, devs, loads, rank) <= pt->capacity) {
        f->npos = g;
        return 1;
    }
    zc_take_positions(share, g, rank, loads);
    /* devs are still sorted by load: the loads are back as they were */
    for (; g <= P; g++) {
        int at = 0, m = zc_pour(loads, devs, g, &at, pt->capacity, f->tokens, bin, take);

        if (m < 0)
            continue;
        for (int i = 0; i < m; i++)
            zc_place_one(pt, f, bin[i], take[i]);
        pt->cut[f->seq] |= ZC_PLAN_SEQ_UNEVEN;
        return 1;
    }
    return 0;
}

static int zc_frag_len_cmp(const void *a, const void *b)
{
    const zc_frag_t *x = *(zc_frag_t *const *)a, *y = *(zc_frag_t *const *)b;

    if (x->tokens != y->tokens)
        return x->tokens > y->tokens ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* A whole sequence of the node at or above s0: Alg. 2's z1. */
static int zc_is_z1(const zc_filler_t *pt, const zc_frag_t *f, int64_t s0)
{
    return f->tokens >= s0 && f->tokens > 0 && pt->frag_n[f->seq] == 1;
}

/* One node: its z2 fragments over all devices, then its other fragments
 * (whole sequences and pieces of cut ones), longest first: z0 sequences and
 * pieces whole, z1 rings around them, the fill step for the rest. */
static zc_status_t zc_fill_node_devices(zc_filler_t *pt, int node, zc_frag_t **items, size_t ni,
                                zc_frag_t **deferred, int *devs, int *bin, int64_t *take)
{
    int P = pt->ppn, cursor = 0, at = 0;
    int64_t s0 = pt->capacity, *loads = pt->dev_load + node * P;
    zc_pairs_t sum = 0;
    size_t nd = 0, first = 0;

    for (size_t k = 0; k < ni; k++)
        if (items[k]->spread)
            zc_place_spread(pt, items[k], devs);
    /* the rest longest first */
    for (size_t k = 0; k < ni; k++)
        if (!items[k]->spread)
            items[first++] = items[k];
    ni = first;
    qsort(items, ni, sizeof(*items), zc_frag_len_cmp);
    for (size_t k = 0; k < ni; k++)
        if (zc_is_z1(pt, items[k], s0))
            sum += zc_mask_pairs(pt->mask, items[k]->tokens, 0, items[k]->tokens);
    /* z0 and pieces of cut sequences first, as they cannot stretch: whole
     * on the least-loaded device where they fit */
    for (size_t k = 0; k < ni; k++) {
        zc_frag_t *f = items[k];
        int d;

        if (zc_is_z1(pt, f, s0))
            continue;
        d = zc_least_loaded(loads, P);
        if (f->tokens + loads[d] > pt->capacity)
            deferred[nd++] = f;
        else
            zc_place_one(pt, f, node * P + d, f->tokens);
    }
    /* z1: ceil(c(s) / c_avg) fragments, c_avg = sum(c(s)) / P, c(s) the
     * sequence's visible pairs under the mask (|s|^2 in the paper) */
    for (size_t k = 0; k < ni; k++) {
        zc_frag_t *f = items[k];
        zc_pairs_t gg;

        if (!zc_is_z1(pt, f, s0))
            continue;
        gg = (zc_mask_pairs(pt->mask, f->tokens, 0, f->tokens) * (unsigned)P + sum - 1) / sum;
        if (!zc_place_ring(pt, f, gg > (unsigned)P ? P : (int)gg, &cursor, devs, bin, take))
            deferred[nd++] = f;
    }
    /* fill: the rest poured over the devices, most room first */
    for (int i = 0; i < P; i++)
        devs[i] = node * P + i;
    zc_sort_by_load(devs, P, pt->dev_load);
    for (size_t k = 0; k < nd; k++) {
        zc_frag_t *f = deferred[k];

        int m = zc_pour(pt->dev_load, devs, P, &at, pt->capacity, f->tokens, bin, take);

        if (m < 0)
            return zc_error(ZC_ERR_INTERNAL, "partition: node %d has no room left for "
                            "sequence %zu", node, f->seq);
        for (int i = 0; i < m; i++)
            zc_place_one(pt, f, bin[i], take[i]);
        if (f->npos > 1)
            pt->cut[f->seq] |= ZC_PLAN_SEQ_CUT_DEVICES;
    }
    pt->s0[node] = s0;
    return ZC_OK;
}

/* Alg. 2 for every node, then each sequence's ring: its fragments'
 * positions in fragment order. */
static zc_status_t zc_fill_devices(zc_filler_t *pt)
{
    int N = pt->nnodes, P = pt->ppn;
    size_t nf = pt->nfrags;
    zc_frag_t **items = malloc((nf ? nf : 1) * sizeof(*items));
    zc_frag_t **deferred = malloc((nf ? nf : 1) * sizeof(*deferred));
    size_t *first = calloc((size_t)N + 1, sizeof(*first));
    size_t *fill = malloc((size_t)N * sizeof(*fill));
    int *devs = malloc((size_t)P * sizeof(*devs));
    int *bin = malloc((size_t)P * sizeof(*bin));
    int64_t *take = malloc((size_t)P * sizeof(*take));
    zc_status_t st = ZC_OK;

    if (!items || !deferred || !first || !fill || !devs || !bin || !take) {
        st = zc_error(ZC_ERR_NO_MEMORY, "partition: cannot allocate node lists");
        goto out;
    }
    pt->pos_rank = malloc((nf ? nf : 1) * (size_t)P * sizeof(*pt->pos_rank));
    pt->pos_share = malloc((nf ? nf : 1) * (size_t)P * sizeof(*pt->pos_share));
    if (!pt->pos_rank || !pt->pos_share) {
        st = zc_error(ZC_ERR_NO_MEMORY, "partition: cannot allocate %zu fragments", nf);
        goto out;
    }
    /* the fragments of every node, in creation order: a counting sort */
    for (size_t i = 0; i < nf; i++) {
        pt->frags[i].pos = i * (size_t)P;
        first[pt->frags[i].node + 1]++;
    }
    for (int n = 0; n < N; n++)
        first[n + 1] += first[n];
    memcpy(fill, first, (size_t)N * sizeof(*fill));
    for (size_t i = 0; i < nf; i++)
        items[fill[pt->frags[i].node]++] = &pt->frags[i];
    for (int n = 0; n < N; n++)
        ZC_CHECK_GOTO(zc_fill_node_devices(pt, n, items + first[n], first[n + 1] - first[n], deferred,
                                   devs, bin, take), st, out);
out:
    free(items);
    free(deferred);
    free(first);
    free(fill);
    free(devs);
    free(bin);
    free(take);
    return st;
}

/* The partition's result: each sequence's ring, its fragments' positions
 * concatenated, and its zone from the nodes and devices it spans. */
static void zc_rings_out(zc_filler_t *pt, zc_part_t *part)
{
    size_t at = 0;

    for (size_t s = 0; s < pt->nseqs; s++) {
        zc_part_ring_t *pr = &part->seqs[s];
        int g = 0;

        pr->ranks = part->rank_pool + at;
        pr->share = part->share_pool + at;
        for (int i = 0; i < pt->frag_n[s]; i++) {
            const zc_frag_t *f = &pt->frags[pt->frag_off[s] + (size_t)i];

            memcpy(pr->ranks + g, pt->pos_rank + f->pos, (size_t)f->npos * sizeof(int));
            memcpy(pr->share + g, pt->pos_share + f->pos, (size_t)f->npos * sizeof(int64_t));
            g += f->npos;
        }
        pr->nranks = g;
        pr->cut = pt->cut[s];
        pr->zone = pt->frag_n[s] > 1 ? ZC_ZONE_INTER : g > 1 ? ZC_ZONE_INTRA : ZC_ZONE_LOCAL;
        at += (size_t)g;
        if (pt->cut[s])
            pt->flags |= ZC_PLAN_CUT;
    }
}


zc_status_t zc_partition_fill(int nnodes, int ppn, int64_t capacity, const int64_t *lengths,
                              size_t count, zc_attn_mask_t mask, zc_part_t *part)
{
    zc_filler_t pt = {
        .nnodes = nnodes, .ppn = ppn, .capacity = capacity, .len = lengths, .nseqs = count,
        .mask = mask,
    };
    size_t n = count ? count : 1, npos;
    int nr = nnodes * ppn;
    zc_status_t st = ZC_OK;

    memset(part, 0, sizeof(*part));
    pt.order = malloc(n * sizeof(*pt.order));
    pt.frag_off = calloc(n, sizeof(*pt.frag_off));
    pt.frag_n = calloc(n, sizeof(*pt.frag_n));
    pt.cut = calloc(n, sizeof(*pt.cut));
    pt.node_load = calloc((size_t)nnodes, sizeof(*pt.node_load));
    pt.dev_load = calloc((size_t)nr, sizeof(*pt.dev_load));
    pt.s0 = calloc((size_t)nnodes, sizeof(*pt.s0));
    part->seqs = calloc(n, sizeof(*part->seqs));
    if (!pt.order || !pt.frag_off || !pt.frag_n || !pt.cut || !pt.node_load || !pt.dev_load ||
        !pt.s0 || !part->seqs) {
        st = zc_error(ZC_ERR_NO_MEMORY, "partition: cannot allocate for %zu sequences", count);
        goto out;
    }
    zc_sort_longest_first(pt.order, lengths, count);
    ZC_CHECK_GOTO(zc_fill_nodes(&pt), st, out);
    ZC_CHECK_GOTO(zc_fill_devices(&pt), st, out);
    npos = 0;
    for (size_t i = 0; i < pt.nfrags; i++)
        npos += (size_t)pt.frags[i].npos;
    part->rank_pool = malloc((npos ? npos : 1) * sizeof(*part->rank_pool));
    part->share_pool = malloc((npos ? npos : 1) * sizeof(*part->share_pool));
    if (!part->rank_pool || !part->share_pool) {
        st = zc_error(ZC_ERR_NO_MEMORY, "partition: cannot allocate %zu ring positions", npos);
        goto out;
    }
    zc_rings_out(&pt, part);
    for (size_t i = 0; i < count; i++)
        part->seqs[i].seq = i;
    part->s1 = pt.s1;
    part->s0 = pt.s0;
    pt.s0 = NULL;
    part->flags = pt.flags;
out:
    if (st != ZC_OK)
        zc_partition_free(part);
    free(pt.order);
    free(pt.frags);
    free(pt.frag_off);
    free(pt.frag_n);
    free(pt.cut);
    free(pt.pos_rank);
    free(pt.pos_share);
    free(pt.node_load);
    free(pt.dev_load);
    free(pt.s0);
    return st;
}
