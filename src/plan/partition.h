/* The paper's partitioner, internal to src/plan: the state that
 * Algorithm 1 and Algorithm 2 of the Zeppelin paper (section 3.1,
 * "Sequence Partitioner") share, and the calls between its files:
 *   src/plan/partition.c        the driver: zc_partition() chooses the paper's
 *                               algorithms, the fill partitioner
 *                               (src/plan/fill.c) or the even split, and
 *                               builds the result (zc_part_t)
 *   src/plan/alg1_inter_node.c  Algorithm 1, inter-node partitioning:
 *                               threshold s1, z2 over nodes, z01 to nodes
 *   src/plan/alg2_intra_node.c  Algorithm 2, intra-node partitioning:
 *                               threshold s0, z1 rings, z0 on devices
 * Calls go down only: partition.c -> alg1_inter_node.c, alg2_intra_node.c
 * -> bins.c, zigzag.c; the ring pool helpers below are inline.  The open
 * cases (a) to (k) are listed in src/plan/partition.c. */
#ifndef ZC_PLAN_PARTITION_H
#define ZC_PLAN_PARTITION_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "src/common/status.h"
#include "src/plan/plan.h"

/* One run of the paper's algorithms over a batch. */
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
    zc_attn_mask_t mask;    /* prices a sequence: its visible pairs (Alg. 2's c) */
} zc_partitioner_t;

/* Room in the ring pool for the n positions of sequence seq's ring. */
static inline zc_status_t zc_pool_reserve(zc_partitioner_t *pt, size_t seq, int n)
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

static inline int *zc_ring_ranks(zc_partitioner_t *pt, size_t seq)
{
    return pt->pool + pt->ring_off[seq];
}

/* Algorithm 1 over the sorted batch: s1, and the node of every z01
 * sequence or the nodes of every z2 ring (in the pool, one node per
 * position).  Returns 1 on success, 0 when z2 cannot be placed (case f),
 * <0 on error. */
int zc_alg1(zc_partitioner_t *pt);
/* Algorithm 2 on every node after Algorithm 1: the ranks of every ring,
 * s0 of every node.  *placed = 0 when a node gives up (case e). */
zc_status_t zc_alg2(zc_partitioner_t *pt, int *placed);

#endif
