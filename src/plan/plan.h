/* Internal view of a plan (zc_plan_h) and the steps that build it:
 * partition (Alg. 1 + 2) -> zigzag layout -> proxies -> remap. */
#ifndef ZC_PLAN_H
#define ZC_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/zigzag.h"
#include "zcomm.h"

/* One ring (or one local sequence) as the partitioner decides it: the ranks
 * in ring order and the tokens each holds.  A local sequence is a "ring" of
 * one rank with no chunks. */
typedef struct {
    size_t seq;
    zc_zone_t zone;
    int nranks;
    int *ranks;              /* points into zc_part_t.rank_pool */
    int64_t *share;          /* tokens of each position; into zc_part_t.share_pool */
    unsigned cut;            /* ZC_PLAN_SEQ_* */
} zc_part_ring_t;

/* Output of the partitioner: one entry per sequence, in input order. */
typedef struct {
    zc_part_ring_t *seqs;    /* [nseqs] */
    int *rank_pool;          /* storage of every ranks array */
    int64_t *share_pool;     /* storage of every share array */
    int64_t s1;
    int64_t *s0;             /* [nnodes] */
    unsigned flags;          /* ZC_PLAN_CUT */
} zc_part_t;

struct zc_plan {
    int nnodes, ppn, nranks;
    int64_t capacity;
    size_t nseqs;
    int64_t *lengths;        /* copy of the input */
    int64_t total;
    zc_plan_opts_t opts;     /* the caller's, completed with defaults to the full size */
    int rails;               /* opts.rails resolved: the routed hops' slices */
    uint32_t rail_weight[ZC_PLAN_MAX_RAILS]; /* zc_plan_set_rail_rates as weights
                                                (zc_rate_weight), all 0: equal slices */
    zc_part_t part;

    int nrings;
    zc_plan_ring_t *rings;   /* [nrings], ranks point into part.rank_pool */
    int *seq_ring;           /* [nseqs]: ring id or -1 */

    zc_plan_piece_t *pieces; /* attention layout, grouped by rank */
    size_t *piece_off;       /* [nranks + 1] */
    zc_plan_piece_t *lpieces;/* linear layout, grouped by rank */
    size_t *lpiece_off;      /* [nranks + 1] */
    int64_t *before, *after; /* tokens per rank: A and B */

    zc_plan_hop_t *hops;     /* grouped by ring */
    size_t *hop_off;         /* [nrings + 1] */
    int *proxy_pool;

    zc_plan_transfer_t *transfers;
    size_t ntransfers;
    double remap_objective;
};

/* ---- zigzag chunk arithmetic (src/plan/zigzag.c) ---- */
/* Tokens held by ring position i: chunks i and 2G-1-i. */
int64_t zc_zigzag_share(int64_t n, int g, int i);
/* Causal (query, key) pairs of the queries [b, e): query q sees keys 0..q. */
double zc_causal_pairs(int64_t b, int64_t e);
/* Causal (query, key) pairs of ring position i (its two chunks' queries
 * against every earlier key of the sequence). */
double zc_zigzag_pairs(int64_t n, int g, int i);
/* Any ring, even or not: ring position i of `share[i]` tokens holds chunk i,
 * its first ceil(share[i] / 2) tokens' worth, and chunk 2G-1-i, the other
 * floor(share[i] / 2); chunks lie in index order.  For the shares of an
 * even ring this is zc_zigzag_chunk.  Writes the 2G + 1 chunk bounds. */
void zc_ring_bounds(const int64_t *share, int g, int64_t *bounds);
/* The causal pairs of each position of such a ring into pairs[0..g);
 * `bounds` is scratch of 2G + 1 entries. */
void zc_ring_pairs(const int64_t *share, int g, int64_t *bounds, double *pairs);
/* Build plan->pieces and plan->before from the partition. */
zc_status_t zc_plan_layout(struct zc_plan *plan);

/* ---- partition (src/plan/partition.c: the driver of the paper's Alg. 1
 * (src/plan/alg1_inter_node.c) and Alg. 2 (src/plan/alg2_intra_node.c);
 * src/plan/fill.c: the fill partitioner for what they cannot place;
 * zc_partition_free in src/plan/bins.c, below both) ---- */
/* total: the lengths' sum (zc_plan_create has it checked). */
zc_status_t zc_partition(int nnodes, int ppn, int64_t capacity, const int64_t *lengths,
                         size_t count, int64_t total, unsigned flags, zc_part_t *part);
zc_status_t zc_partition_fill(int nnodes, int ppn, int64_t capacity, const int64_t *lengths,
                              size_t count, zc_part_t *part);
void zc_partition_free(zc_part_t *part);

/* ---- bins: nodes or devices with token loads (src/plan/bins.c) ---- */
/* order[0..count): sequence indices, longest first, ties by index. */
void zc_sort_longest_first(size_t *order, const int64_t *lengths, size_t count);
/* idx[0..n) by (load ascending, index ascending). */
void zc_sort_by_load(int *idx, int n, const int64_t *loads);
/* The k least-loaded of idx[0..n), sorted, into idx[0..k): O(n + k log k). */
void zc_select_least(int *idx, int n, int k, const int64_t *loads);
int zc_least_loaded(const int64_t *loads, int n);
/* A min-heap of bin indices keyed by (load, index). */
void zc_heap_build(int *h, int n, const int64_t *loads);
void zc_heap_sift_down(int *h, int n, int i, const int64_t *loads);
int zc_int_cmp(const void *a, const void *b);
/* ceil(a * b / c) without overflow, for a, b >= 0 and c > 0. */
int64_t zc_ceil_muldiv(int64_t a, int64_t b, int64_t c);
/* Tokens of block b (positions [b*ppn, b*ppn+ppn)) of an even ring of g. */
int64_t zc_block_tokens(int64_t len, int g, int ppn, int b);
/* An even ring of a sequence of len over the k nodes chosen[0..k)
 * (chosen[0] the least loaded): sorts chosen by index, writes each block's
 * tokens to frag[0..k) and the rotation *rot (block b on node
 * chosen[(*rot + b) % k]) that gives the lowest peak node load, which it
 * returns. */
int64_t zc_even_ring_nodes(const int64_t *loads, int *chosen, int k, int64_t len, int ppn,
                           int64_t *frag, int *rot);
/* Give n ring positions of shares share[0..n) (within one token of each
 * other) to the devices devs[0..n), the larger shares to the least loaded;
 * adds them to loads (by rank), writes each position's rank, returns the
 * largest load.  zc_take_positions undoes it. */
int64_t zc_give_positions(const int64_t *share, int n, int *devs, int64_t *loads, int *rank);
void zc_take_positions(const int64_t *share, int n, const int *rank, int64_t *loads);

/* ---- proxies (src/plan/proxy.c) ---- */
/* The hops of every inter-node ring with the routes the runtime takes
 * (zc_route_pick, zc_route_slice in src/plan/routing.h) over plan->rails rails. */
zc_status_t zc_plan_proxies(struct zc_plan *plan);
/* Rail of device `local` of a node with `ppn` devices and `rails` rails:
 * local * rails / ppn, the cost model's NIC sharing (zc_cluster_t). */
int zc_plan_rail_of(int local, int ppn, int rails);

/* ---- remap (src/plan/remap_lp.c) ---- */
/* Bottleneck transportation: from `before` to `after` (equal sums) on
 * nranks ranks grouped ppn per node, minimise the largest per-rank cost
 * (b_intra per token inside a node, b_inter across).  Writes the nonzero
 * transfers (caller frees *transfers) ordered by (from, to). */
zc_status_t zc_remap_solve(int nranks, int ppn, const int64_t *before, const int64_t *after,
                           double b_intra, double b_inter, zc_plan_transfer_t **transfers,
                           size_t *count, double *objective);
/* *objective = the largest per-rank cost (send or receive) of a set of
 * transfers. */
zc_status_t zc_remap_objective(int nranks, int ppn, const zc_plan_transfer_t *t, size_t count,
                               double b_intra, double b_inter, double *objective);
/* Balanced layout: floor/ceil of the mean, the extra tokens to the ranks
 * holding most (ties: lowest rank), which minimises what moves. */
zc_status_t zc_remap_balanced(int nranks, const int64_t *before, int64_t *after);
zc_status_t zc_plan_remap(struct zc_plan *plan);

/* ---- checker (src/plan/check.c) ---- */
zc_status_t zc_plan_check_internal(const struct zc_plan *plan);

#endif
