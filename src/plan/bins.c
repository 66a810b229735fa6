/* Bins for the partitioners (the paper's: src/plan/partition.c,
 * alg1_inter_node.c, alg2_intra_node.c; the fill partitioner:
 * src/plan/fill.c): nodes or devices with token loads, ordered, selected
 * and heaped by (load, index), and the zigzag positions of even rings
 * handed to them.  Every tie goes to the lowest index, so every rank builds
 * the same plan.  Also the release of a partitioner's result
 * (zc_partition_free), which every partitioner calls on failure: it sits
 * here, below all of them. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/plan/plan.h"

/* qsort has no context argument: the sort keys live in thread-local
 * variables so that threads may build plans concurrently. */
static __thread const int64_t *zc_sort_lens;
static __thread const int64_t *zc_sort_loads;

static int zc_len_desc_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;

    if (zc_sort_lens[x] != zc_sort_lens[y])
        return zc_sort_lens[x] > zc_sort_lens[y] ? -1 : 1;
    return (x > y) - (x < y);
}

int zc_int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

/* Sort `idx` by (load ascending, index ascending). */
static int zc_load_asc_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    if (zc_sort_loads[x] != zc_sort_loads[y])
        return zc_sort_loads[x] < zc_sort_loads[y] ? -1 : 1;
    return (x > y) - (x < y);
}

void zc_sort_by_load(int *idx, int n, const int64_t *loads)
{
    zc_sort_loads = loads;
    qsort(idx, (size_t)n, sizeof(*idx), zc_load_asc_cmp);
}

int zc_least_loaded(const int64_t *loads, int n)
{
    int best = 0;

    for (int i = 1; i < n; i++)
        if (loads[i] < loads[best])
            best = i;
    return best;
}

void zc_sort_longest_first(size_t *order, const int64_t *lengths, size_t count)
{
    for (size_t i = 0; i < count; i++)
        order[i] = i;
    zc_sort_lens = lengths;
    qsort(order, count, sizeof(*order), zc_len_desc_cmp);
}

/* The k least-loaded of n items (ties: lowest index), sorted, into idx[0..k):
 * quickselect then a sort of the k, O(n + k log k); the (load, index) keys
 * are distinct, so the result does not depend on the pivots. */
static int zc_key_less(const int64_t *loads, int a, int b)
{
    return loads[a] < loads[b] || (loads[a] == loads[b] && a < b);
}

void zc_select_least(int *idx, int n, int k, const int64_t *loads)
{
    int lo = 0, hi = n - 1;

    while (lo < hi && k < n) {
        int pivot = idx[lo + (hi - lo) / 2], i = lo, j = hi;

        while (i <= j) {
            while (zc_key_less(loads, idx[i], pivot))
                i++;
            while (zc_key_less(loads, pivot, idx[j]))
                j--;
            if (i <= j) {
                int t = idx[i];
                idx[i++] = idx[j];
                idx[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
    zc_sort_by_load(idx, k, loads);
}

/* Min-heap of node indices keyed by (load, index): the least-loaded node
 * of Alg. 1's z01 loop in O(log N) instead of a scan. */
void zc_heap_sift_down(int *h, int n, int i, const int64_t *loads)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;

        if (l < n && zc_key_less(loads, h[l], h[m]))
            m = l;
        if (r < n && zc_key_less(loads, h[r], h[m]))
            m = r;
        if (m == i)
            return;
        int t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

void zc_heap_build(int *h, int n, const int64_t *loads)
{
    for (int i = 0; i < n; i++)
        h[i] = i;
    for (int i = n / 2 - 1; i >= 0; i--)
        zc_heap_sift_down(h, n, i, loads);
}

/* ceil(a * b / c) without overflow, for a, b, c >= 0 and c > 0. */
int64_t zc_ceil_muldiv(int64_t a, int64_t b, int64_t c)
{
    unsigned __int128 p = (unsigned __int128)a * (unsigned __int128)b;

    return (int64_t)((p + (unsigned __int128)c - 1) / (unsigned __int128)c);
}

/* Node fragment of ring block b (positions [b*P, b*P+P)). */
int64_t zc_block_tokens(int64_t len, int g, int ppn, int b)
{
    int64_t t = 0;

    for (int p = b * ppn; p < (b + 1) * ppn; p++)
        t += zc_zigzag_share(len, g, p);
    return t;
}

/* Give n ring positions with shares share[0..n) (within one token of each
 * other) to the devices devs[0..n): the larger shares to the least-loaded
 * devices, each group in position order.  Adds the shares to `loads`
 * (indexed by rank), writes each position's rank, returns the largest
 * load. */
int64_t zc_give_positions(const int64_t *share, int n, int *devs, int64_t *loads, int *rank)
{
    int64_t base = INT64_MAX, hi = 0;
    int d = 0;

    for (int p = 0; p < n; p++)
        base = share[p] < base ? share[p] : base;
    zc_sort_by_load(devs, n, loads);
    for (int pass = 0; pass < 2; pass++) {
        for (int p = 0; p < n; p++) {
            if ((share[p] > base) != (pass == 0))
                continue;
            rank[p] = devs[d];
            loads[devs[d]] += share[p];
            hi = loads[devs[d]] > hi ? loads[devs[d]] : hi;
            d++;
        }
    }
    return hi;
}

void zc_take_positions(const int64_t *share, int n, const int *rank, int64_t *loads)
{
    for (int p = 0; p < n; p++)
        loads[rank[p]] -= share[p];
}


int64_t zc_even_ring_nodes(const int64_t *loads, int *chosen, int k, int64_t len, int ppn,
                           int64_t *frag, int *rot)
{
    int g = k * ppn, first = chosen[0], best = 0, home = 0;
    int64_t hi = INT64_MAX;

    /* ring order: the chosen nodes by index, rotated; block 0 holds the
     * chunks' extra tokens first, so by default it goes on the least loaded
     * node; small rings try every rotation for the lowest peak */
    qsort(chosen, (size_t)k, sizeof(*chosen), zc_int_cmp);
    for (int b = 0; b < k; b++) {
        if (chosen[b] == first)
            home = b;
        frag[b] = zc_block_tokens(len, g, ppn, b);
    }
    for (int r = 0; r < k; r++) {
        int cand = k <= 64 ? r : home;
        int64_t peak = 0;

        for (int b = 0; b < k; b++) {
            int64_t l = loads[chosen[(cand + b) % k]] + frag[b];

            peak = l > peak ? l : peak;
        }
        if (peak < hi) {
            hi = peak;
            best = cand;
        }
        if (k > 64)
            break;
    }
    *rot = best;
    return hi;
}

void zc_partition_free(zc_part_t *part)
{
    free(part->seqs);
    free(part->rank_pool);
    free(part->share_pool);
    free(part->s0);
    memset(part, 0, sizeof(*part));
}
