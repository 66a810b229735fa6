/* Internal view of a plan (zc_plan_h) and the steps that build it:
 * partition (Alg. 1 + 2) -> zigzag layout -> proxies -> remap -> the index
 * of its layouts by the batch's order (for moves between them). */
#ifndef ZC_PLAN_H
#define ZC_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/attn_math.h"
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
    zc_ring_layout_t layout; /* set by zc_plan_pick_layouts */
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
    /* Unique among the process's plans, never reused: what a cache of
     * things derived from a plan is keyed by (a freed plan's address may
     * come back as another plan's). */
    uint64_t serial;
    int nnodes, ppn, nranks;
    int64_t capacity;
    size_t nseqs;
    int64_t *lengths;        /* copy of the input */
    int64_t total;
    zc_plan_opts_t opts;     /* the caller's, completed with defaults to the full size */
    int rails;               /* opts.rails resolved: the routed hops' slices */
    zc_attn_mask_t mask;     /* opts' mask resolved: what the plan balances */
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
    double *pairs;           /* visible (query, key) pairs per rank in layout A */

    zc_plan_hop_t *hops;     /* grouped by ring */
    size_t *hop_off;         /* [nrings + 1] */
    int *proxy_pool;

    zc_plan_transfer_t *transfers;
    size_t ntransfers;
    double remap_objective;

    int64_t *seq_start;      /* [nseqs + 1]: first token of each sequence in the batch */
    struct zc_plan_span *spans[2]; /* attention, linear layout: pieces by batch order */
    size_t nspans[2];
};

/* A piece of a layout as the batch's order sees it: tokens [start, start +
 * count) of the batch are tokens [offset, offset + count) of rank `rank`'s
 * buffer. */
typedef struct zc_plan_span {
    int64_t start, offset, count;
    int rank;
} zc_plan_span_t;

/* ---- ring layouts (src/plan/zigzag.c) ---- */
/* Tokens held by ring position i of an even ring: zigzag chunks i and
 * 2G-1-i (a contiguous ring uses the same shares). */
int64_t zc_zigzag_share(int64_t n, int g, int i);
/* Chunks of a ring of g positions in `layout`, and the position holding
 * chunk c. */
static inline int zc_ring_chunks(zc_ring_layout_t layout, int g)
{
    return layout == ZC_RING_LAYOUT_CONTIGUOUS ? g : 2 * g;
}

static inline int zc_ring_chunk_pos(zc_ring_layout_t layout, int g, int c)
{
    return layout == ZC_RING_LAYOUT_ZIGZAG && c >= g ? 2 * g - 1 - c : c;
}

/* Any ring, even or not: position i holds share[i] tokens.  Zigzag: chunk
 * i, its first ceil(share[i] / 2) tokens' worth, and chunk 2G-1-i, the
 * other floor(share[i] / 2) (for the shares of an even ring, the chunks of
 * zc_zigzag_chunk); contiguous: chunk i, all of it.  Chunks lie in index
 * order.  Writes the chunks' bounds (count + 1 of them, at most 2G + 1)
 * and returns their count. */
int zc_ring_bounds(const int64_t *share, int g, zc_ring_layout_t layout, int64_t *bounds);
/* Build plan->pieces and plan->before from the partition, each ring in the
 * layout zc_plan_pick_layouts chose. */
zc_status_t zc_plan_layout(struct zc_plan *plan);

/* ---- attention work under the mask (src/plan/mask_cost.c) ---- */
/* Visible (query, key) pairs, exact: sums of them stay exact to 2^127. */
typedef unsigned __int128 zc_pairs_t;
/* Pairs of the queries at positions [qb, qe) of a sequence of len tokens
 * against all its keys; a whole sequence is [0, len). */
zc_pairs_t zc_mask_pairs(zc_attn_mask_t mask, int64_t len, int64_t qb, int64_t qe);
/* The pairs of each position of a ring in `layout` into pairs[0..g);
 * `bounds` is scratch of 2G + 1 entries. */
void zc_ring_pairs(zc_attn_mask_t mask, const int64_t *share, int g, zc_ring_layout_t layout,
                   int64_t *bounds, double *pairs);
/* The ring's layout under the mask: zigzag for causal; otherwise
 * contiguous unless zigzag cuts the busiest position's pairs to below 7/8
 * of contiguous's (zc_plan_create(3), "Masks").  Scratch as above. */
zc_ring_layout_t zc_ring_layout_pick(zc_attn_mask_t mask, const int64_t *share, int g,
                                     int64_t *bounds, double *pairs);
/* Every ring's layout: zigzag for an even split (TE CP's layout, whatever
 * the mask), else zc_ring_layout_pick's. */
zc_status_t zc_plan_pick_layouts(struct zc_plan *plan);
/* The farthest ring distance r < g at which some position's queries see
 * keys held by the position r before it (0: none but its own): passing KV
 * one way round, a ring needs reach + 1 steps, and a block need not go
 * further than reach hops.  `bounds` is scratch of 2G + 1 entries. */
int zc_ring_reach(zc_attn_mask_t mask, const int64_t *share, int g, zc_ring_layout_t layout,
                  int64_t *bounds);

/* ---- partition (src/plan/partition.c: the driver of the paper's Alg. 1
 * (src/plan/alg1_inter_node.c) and Alg. 2 (src/plan/alg2_intra_node.c);
 * src/plan/fill.c: the fill partitioner for what they cannot place;
 * zc_partition_free in src/plan/bins.c, below both) ---- */
/* total: the lengths' sum (zc_plan_create has it checked). */
/* `mask` prices the sequences (Alg. 2's and the fill step's shares). */
zc_status_t zc_partition(int nnodes, int ppn, int64_t capacity, const int64_t *lengths,
                         size_t count, int64_t total, unsigned flags, zc_attn_mask_t mask,
                         zc_part_t *part);
zc_status_t zc_partition_fill(int nnodes, int ppn, int64_t capacity, const int64_t *lengths,
                              size_t count, zc_attn_mask_t mask, zc_part_t *part);
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

/* ---- moves between layouts (src/plan/runs.c) ---- */
/* plan->seq_start and the spans of the attention and linear layouts, sorted
 * by start; after the remap. */
zc_status_t zc_plan_index(struct zc_plan *plan);
/* Tokens `rank` holds in `layout` (a valid one). */
int64_t zc_plan_layout_tokens(const struct zc_plan *plan, zc_layout_t layout, int rank);
/* The runs of zc_plan_move_runs() in arrays the caller frees (valid
 * arguments). */
zc_status_t zc_plan_runs(const struct zc_plan *plan, int rank, zc_layout_t from, zc_layout_t to,
                         zc_plan_run_t **send, size_t *nsend, zc_plan_run_t **recv,
                         size_t *nrecv);
/* ZC_OK when `layout` is a zc_layout_t, else ZC_ERR_INVALID_ARG naming `arg`. */
zc_status_t zc_plan_layout_check(zc_layout_t layout, const char *arg);
/* A hash of what a plan is built from (its dimensions, options and
 * lengths): equal plans have equal fingerprints. */
uint64_t zc_plan_fingerprint(const struct zc_plan *plan);

/* ---- checker (src/plan/check.c) ---- */
zc_status_t zc_plan_check_internal(const struct zc_plan *plan);

#endif
