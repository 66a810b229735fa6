/* Partitioner properties (Alg. 1 + Alg. 2, ring layouts, proxies) over
 * thousands of seeded random batches from the paper's three distributions
 * and adversarial ones, for every mask a plan balances (causal, full,
 * sliding windows, a local window), plus one test per open case decided in
 * src/plan/partition.c, alg1_inter_node.c and alg2_intra_node.c. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/plan/plan.h"
#include "src/plan/routing.h"
#include "src/common/status.h"
#include "tap.h"
#include "tools/zc_plan_dataset.h"

/* The masks the property tests run for: (left, right) of ZC_PLAN_WINDOW,
 * the first the default (no flag: causal). */
static const struct {
    const char *name;
    int window, left, right;
} masks[] = {
    {"causal", 0, 0, 0},
    {"full", 1, -1, -1},
    {"window 4096", 1, 4095, 0},
    {"window 1", 1, 0, 0},
    {"local 128+128", 1, 128, 128},
};
#define NMASKS ((int)(sizeof(masks) / sizeof(masks[0])))

/* The options every plan of the property tests is built with: mask `cur`. */
static int cur;

static zc_plan_opts_t mask_opts(void)
{
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;

    if (masks[cur].window) {
        opts.flags |= ZC_PLAN_WINDOW;
        opts.window_left = masks[cur].left;
        opts.window_right = masks[cur].right;
    }
    return opts;
}

static zc_status_t create(int N, int P, int64_t L, const int64_t *len, size_t n,
                          zc_plan_h *plan)
{
    zc_plan_opts_t opts = mask_opts();

    return zc_plan_create(N, P, L, len, n, &opts, plan);
}

/* The properties a valid plan has; returns a description of the first
 * violation or NULL:
 *  - zc_plan_check: every token placed once, no device over L, remap;
 *  - zones follow the thresholds, except where the fill step cut;
 *  - an uncut ring is an even ring; a zigzag ring's position i holds chunks
 *    i and 2G-1-i of the sizes its tokens[i] gives (an uncut one: those of
 *    zc_zigzag_chunk), a contiguous ring's position i the i-th run of
 *    tokens[i]; causal rings and even splits are zigzag;
 *  - the fill step's bounds: at most N - 1 sequences shorter than s1 cross
 *    nodes, at most P - 1 sequences are cut over the devices of one node;
 *  - one routed hop per node crossing, cut into one slice per rail (the
 *    default rails: one per GPU, at most 16); slice k leaves and arrives
 *    on rail k (device g sits on rail g * rails / P), through the hop's own
 *    end where that end sits on rail k. */
static const char *plan_properties(zc_plan_h plan, const int64_t *len, size_t n)
{
    static char why[256];
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    int *dev_cuts, cross = 0;

    if (zc_plan_check(plan) != ZC_OK) {
        snprintf(why, sizeof(why), "check: %s", zc_get_last_error());
        return why;
    }
    zc_plan_info(plan, &info);
    if (info.flags & ZC_PLAN_EVEN_SPLIT)
        return NULL;
    /* zones consistent with the thresholds */
    for (size_t s = 0; s < n; s++) {
        zc_plan_seq_t q;
        zc_plan_rank_t rk;

        zc_plan_seq(plan, s, &q);
        zc_plan_rank(plan, q.rank, &rk);
        if (q.zone == ZC_ZONE_INTER && len[s] < info.s1 && !(q.cut & ZC_PLAN_SEQ_CUT_NODES)) {
            snprintf(why, sizeof(why), "seq %zu (%lld) inter below s1 %lld, not cut", s,
                     (long long)len[s], (long long)info.s1);
            return why;
        }
        if (len[s] < info.s1 && len[s] < rk.s0 && q.zone != ZC_ZONE_LOCAL && !q.cut) {
            snprintf(why, sizeof(why), "seq %zu (%lld) below s0 %lld is not local", s,
                     (long long)len[s], (long long)rk.s0);
            return why;
        }
        cross += q.zone == ZC_ZONE_INTER && len[s] < info.s1;
    }
    if (cross > (info.nnodes > 1 ? info.nnodes - 1 : 0)) {
        snprintf(why, sizeof(why), "%d sequences below s1 cross nodes on %d nodes", cross,
                 info.nnodes);
        return why;
    }
    dev_cuts = calloc((size_t)info.nnodes, sizeof(*dev_cuts));
    for (int r = 0; r < info.nrings; r++) {
        zc_plan_ring_t ring;
        zc_plan_seq_t q;
        const zc_plan_hop_t *hops;
        size_t nh, ncross = 0;
        int64_t bounds[2 * 1024 + 1], sum = 0;
        zc_ring_layout_t layout = ZC_RING_LAYOUT_CONTIGUOUS;
        int g, zigzag;

        zc_plan_ring(plan, r, &ring);
        zc_plan_seq(plan, ring.seq, &q);
        zc_plan_ring_layout(plan, r, &layout);
        g = ring.nranks;
        zigzag = layout == ZC_RING_LAYOUT_ZIGZAG;
        if (!zigzag && ((info.window_left == -1 && info.window_right == 0) ||
                        (info.flags & ZC_PLAN_EVEN_SPLIT))) {
            snprintf(why, sizeof(why), "ring %d: contiguous under causal or an even split", r);
            return why;
        }
        for (int i = 0; i < g; i++)
            sum += ring.tokens[i];
        if (sum != len[ring.seq] || g > 1024) {
            snprintf(why, sizeof(why), "ring %d: tokens sum to %lld of %lld (G %d)", r,
                     (long long)sum, (long long)len[ring.seq], g);
            free(dev_cuts);
            return why;
        }
        zc_ring_bounds(ring.tokens, g, layout, bounds);
        for (int i = 0; i < g && !q.cut; i++)
            if (ring.tokens[i] != zc_zigzag_share(len[ring.seq], g, i)) {
                snprintf(why, sizeof(why), "ring %d: uncut, position %d holds %lld", r, i,
                         (long long)ring.tokens[i]);
                free(dev_cuts);
                return why;
            }
        /* devices of one node that hold a piece of a cut sequence */
        if (q.cut & ZC_PLAN_SEQ_CUT_DEVICES)
            for (int i = 0; i < g; i++)
                if (i + 1 < g && ring.ranks[i + 1] / info.gpus_per_node ==
                                     ring.ranks[i] / info.gpus_per_node &&
                    (i == 0 || ring.ranks[i - 1] / info.gpus_per_node !=
                                   ring.ranks[i] / info.gpus_per_node))
                    dev_cuts[ring.ranks[i] / info.gpus_per_node]++;
        for (int i = 0; i < g; i++) {
            const zc_plan_piece_t *p;
            size_t np;
            int seen = 0;

            zc_plan_rank_pieces(plan, ring.ranks[i], &p, &np);
            for (size_t k = 0; k < np; k++) {
                int64_t b, e;

                if (p[k].ring != r)
                    continue;
                if (q.cut || !zigzag) {
                    b = bounds[p[k].chunk];
                    e = bounds[p[k].chunk + 1];
                } else {
                    zc_zigzag_chunk(len[ring.seq], g, p[k].chunk, &b, &e);
                }
                if ((p[k].chunk != i && (!zigzag || p[k].chunk != 2 * g - 1 - i)) ||
                    p[k].begin != b || p[k].end != e || p[k].seq != ring.seq) {
                    snprintf(why, sizeof(why), "ring %d position %d holds chunk %d [%lld,%lld)",
                             r, i, p[k].chunk, (long long)p[k].begin, (long long)p[k].end);
                    free(dev_cuts);
                    return why;
                }
                seen++;
            }
            if (seen > (zigzag ? 2 : 1)) {
                snprintf(why, sizeof(why), "ring %d position %d holds %d chunks", r, i, seen);
                free(dev_cuts);
                return why;
            }
        }
        /* routes: one hop per node boundary, one slice per rail */
        for (int i = 0; i < ring.nranks; i++)
            ncross += ring.ranks[i] / info.gpus_per_node !=
                      ring.ranks[(i + 1) % ring.nranks] / info.gpus_per_node;
        zc_plan_ring_hops(plan, r, &hops, &nh);
        if (nh != ncross) {
            snprintf(why, sizeof(why), "ring %d has %zu hops for %zu node crossings", r, nh,
                     ncross);
            free(dev_cuts);
            return why;
        }
        for (size_t h = 0; h < nh; h++) {
            int P = info.gpus_per_node, R = P < ZC_PLAN_MAX_RAILS ? P : ZC_PLAN_MAX_RAILS;
            int src = hops[h].src_rank, dst = hops[h].dst_rank;

            if (hops[h].x_send != R || hops[h].x_recv != R) {
                snprintf(why, sizeof(why), "ring %d hop %zu: x %d/%d for %d rails", r, h,
                         hops[h].x_send, hops[h].x_recv, R);
                free(dev_cuts);
                return why;
            }
            for (int k = 0; k < R; k++) {
                int sp = hops[h].send_proxies[k], rp = hops[h].recv_proxies[k];

                if (sp / P != hops[h].src_node || rp / P != hops[h].dst_node ||
                    sp / P != src / P || rp / P != dst / P || (sp % P) * R / P != k ||
                    (rp % P) * R / P != k || ((src % P) * R / P == k && sp != src) ||
                    ((dst % P) * R / P == k && rp != dst)) {
                    snprintf(why, sizeof(why), "ring %d hop %d->%d slice %d: %d->%d is not "
                             "on rail %d", r, src, dst, k, sp, rp, k);
                    free(dev_cuts);
                    return why;
                }
            }
        }
    }
    for (int v = 0; v < info.nnodes; v++)
        if (dev_cuts[v] > info.gpus_per_node - 1) {
            snprintf(why, sizeof(why), "node %d: %d sequences cut over its %d devices", v,
                     dev_cuts[v], info.gpus_per_node);
            free(dev_cuts);
            return why;
        }
    free(dev_cuts);
    return NULL;
}

/* Two plans from the same input are identical. */
static int plans_equal(zc_plan_h a, zc_plan_h b)
{
    zc_plan_info_t ia = ZC_PLAN_INFO_INITIALIZER, ib = ZC_PLAN_INFO_INITIALIZER;
    const zc_plan_transfer_t *ta, *tb;
    size_t na, nb;

    memset(&ia, 0, sizeof(ia));
    memset(&ib, 0, sizeof(ib));
    zc_plan_info(a, &ia);
    zc_plan_info(b, &ib);
    if (memcmp(&ia, &ib, sizeof(ia)) != 0)
        return 0;
    for (int r = 0; r < ia.nranks; r++) {
        const zc_plan_piece_t *pa, *pb;

        zc_plan_rank_pieces(a, r, &pa, &na);
        zc_plan_rank_pieces(b, r, &pb, &nb);
        if (na != nb)
            return 0;
        for (size_t k = 0; k < na; k++)
            if (pa[k].seq != pb[k].seq || pa[k].begin != pb[k].begin ||
                pa[k].end != pb[k].end || pa[k].zone != pb[k].zone ||
                pa[k].ring != pb[k].ring || pa[k].chunk != pb[k].chunk)
                return 0;
    }
    zc_plan_remap_transfers(a, &ta, &na);
    zc_plan_remap_transfers(b, &tb, &nb);
    return na == nb && (na == 0 || memcmp(ta, tb, na * sizeof(*ta)) == 0);
}

static void random_batches(void)
{
    static const int nodes[] = {1, 2, 3, 4, 8};
    static const int gpus[] = {1, 2, 4, 8};
    static const int64_t caps[] = {4096, 8192, 16384, 65536};
    zc_rng_t rng = {20260401};
    /* the other masks change the shares, not the placement code: fewer */
    int bad = 0, nondet = 0, cuts = 0, runs = cur == 0 ? 3000 : 1000;
    const char *first = NULL;

    for (int t = 0; t < runs; t++) {
        int N = nodes[zc_rng_range(&rng, 0, 5)], P = gpus[zc_rng_range(&rng, 0, 4)];
        int64_t L = caps[zc_rng_range(&rng, 0, 4)], cap = (int64_t)N * P * L, total;
        int ds = (int)zc_rng_range(&rng, 0, zc_dataset_count());
        int64_t *len;
        size_t n;
        zc_plan_h p1, p2;
        zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
        const char *why;

        /* a quarter of the batches exactly full, the rest 30..100 % */
        total = t % 4 == 0 ? cap : cap * zc_rng_range(&rng, 30, 101) / 100;
        n = zc_dataset_sample(ds, total, &rng, &len);
        if (create(N, P, L, len, n, &p1) != ZC_OK) {
            if (!first)
                first = zc_get_last_error();
            bad++;
            free(len);
            continue;
        }
        why = plan_properties(p1, len, n);
        if (why) {
            if (bad++ == 0)
                diag("batch %d (N=%d P=%d L=%lld %s, %zu seqs): %s", t, N, P, (long long)L,
                     zc_dataset_name(ds), n, why);
        }
        zc_plan_info(p1, &info);
        cuts += (info.flags & ZC_PLAN_CUT) != 0;
        if (t % 10 == 0) {
            create(N, P, L, len, n, &p2);
            nondet += !plans_equal(p1, p2);
            zc_plan_destroy(p2);
        }
        zc_plan_destroy(p1);
        free(len);
    }
    if (first)
        diag("first failure: %s", first);
    diag("%d random batches, %d cut some sequence to fill", runs, cuts);
    ok(bad == 0, "%s: %d random batches: placed once, within L, zones, layouts, proxies (%d "
       "bad)", masks[cur].name, runs, bad);
    ok(nondet == 0, "%s: the same batch gives the same plan (%d differ)", masks[cur].name,
       nondet);
}

/* Every multiset of lengths 1..N*P*L summing to at most N*P*L on tiny
 * clusters: reaches every path of the fill step. */
static int exhaustive_rec(int N, int P, int64_t L, int64_t *len, size_t n, int64_t maxlen,
                          int64_t room, int *cuts, int *count)
{
    int bad = 0;

    if (n > 0) {
        zc_plan_h plan;
        zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;

        (*count)++;
        if (create(N, P, L, len, n, &plan) != ZC_OK)
            return 1;
        bad += plan_properties(plan, len, n) != NULL;
        zc_plan_info(plan, &info);
        *cuts += (info.flags & ZC_PLAN_CUT) != 0;
        zc_plan_destroy(plan);
    }
    for (int64_t l = maxlen < room ? maxlen : room; l >= 1 && n < 12; l--) {
        len[n] = l;
        bad += exhaustive_rec(N, P, L, len, n + 1, l, room - l, cuts, count);
    }
    return bad;
}

static void exhaustive_small(void)
{
    static const int shapes[][3] = {{1, 3, 5}, {2, 2, 4}, {3, 2, 3}, {2, 3, 3}};
    int64_t len[16];

    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int N = shapes[i][0], P = shapes[i][1], L = shapes[i][2], fb = 0, count = 0;
        int64_t cap = (int64_t)N * P * L;
        int bad = exhaustive_rec(N, P, L, len, 0, cap, cap, &fb, &count);

        ok(bad == 0, "%s: every batch on %d x %d devices of %d tokens fits (%d batches, %d "
           "with cuts, %d bad)", masks[cur].name, N, P, L, count, fb, bad);
    }
}

static zc_plan_h make(int N, int P, int64_t L, const int64_t *len, size_t n)
{
    zc_plan_h plan = NULL;

    if (create(N, P, L, len, n, &plan) != ZC_OK)
        diag("create failed: %s", zc_get_last_error());
    return plan;
}

static zc_zone_t zone_of(zc_plan_h plan, size_t s)
{
    zc_plan_seq_t q;

    zc_plan_seq(plan, s, &q);
    return q.zone;
}

static void open_cases(void)
{
    zc_plan_h plan;
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    zc_plan_ring_t ring;
    zc_plan_seq_t q;

    /* (a) does not fit */
    {
        int64_t len[] = {30, 30, 30};
        int64_t huge[] = {5, 41};

        ok(zc_plan_create(2, 2, 25, len, 3, NULL, &plan) == ZC_OK, "(a) 90 tokens fit 2x2x25");
        zc_plan_destroy(plan);
        len[2] = 20;
        ok(zc_plan_create(1, 2, 40, len, 3, NULL, &plan) == ZC_OK, "(a) exactly full fits");
        zc_plan_destroy(plan);
        len[2] = 21;
        plan = (zc_plan_h)1;
        ok(zc_plan_create(1, 2, 40, len, 3, NULL, &plan) == ZC_ERR_CAPACITY &&
           plan == (zc_plan_h)1 && strstr(zc_get_last_error(), "lengths"),
           "(a) one token too many: ZC_ERR_CAPACITY, no plan (%s)", zc_get_last_error());
        ok(zc_plan_create(1, 2, 20, huge, 2, NULL, &plan) == ZC_ERR_CAPACITY &&
           strstr(zc_get_last_error(), "lengths[1]"),
           "(a) a sequence longer than the cluster is named (%s)", zc_get_last_error());
    }
    /* (b) empty batch */
    plan = make(2, 4, 100, NULL, 0);
    zc_plan_info(plan, &info);
    ok(plan && info.nrings == 0 && info.nseqs == 0 && zc_plan_check(plan) == ZC_OK,
       "(b) empty batch: valid plan without rings");
    zc_plan_destroy(plan);
    /* (c) + (d): three sequences want three single-node buckets on two nodes */
    {
        int64_t len[] = {12, 12, 12};

        plan = make(2, 2, 10, len, 3);
        ok(plan && zone_of(plan, 0) == ZC_ZONE_INTRA && zone_of(plan, 1) == ZC_ZONE_INTRA &&
           zone_of(plan, 2) == ZC_ZONE_INTER && zc_plan_check(plan) == ZC_OK,
           "(c)(d) more fragments than empty nodes: two single-node rings (intra), the third "
           "spread over both nodes (inter)");
        zc_plan_destroy(plan);
    }
    /* (e) round-robin device full: the fragment count grows */
    {
        int64_t len[] = {10, 8, 1};

        plan = make(1, 2, 10, len, 3);
        zc_plan_seq(plan, 1, &q);
        zc_plan_ring(plan, q.ring, &ring);
        zc_plan_info(plan, &info);
        ok(plan && q.zone == ZC_ZONE_INTRA && ring.nranks == 2 && !(info.flags & ZC_PLAN_CUT) &&
           zc_plan_check(plan) == ZC_OK,
           "(e) a one-fragment sequence that overflows its device is spread over two");
        zc_plan_destroy(plan);
    }
    /* where the paper's algorithms give up: the fill partitioner */
    {
        int64_t dev[] = {9, 9, 6, 6}, uneven[] = {11, 7, 7, 5}, node[] = {9, 7, 4};

        plan = make(1, 3, 10, uneven, 4);
        zc_plan_seq(plan, 0, &q);
        zc_plan_ring(plan, q.ring, &ring);
        ok(plan && q.zone == ZC_ZONE_INTRA && q.cut == ZC_PLAN_SEQ_UNEVEN &&
           zc_plan_check(plan) == ZC_OK && !plan_properties(plan, uneven, 4),
           "fill: a z1 ring with no even room is poured into the devices with most room "
           "(%d devices)", plan ? ring.nranks : -1);
        zc_plan_destroy(plan);
        plan = make(1, 3, 10, dev, 4);
        zc_plan_seq(plan, 3, &q);
        zc_plan_info(plan, &info);
        ok(plan && q.zone == ZC_ZONE_INTRA && q.cut == ZC_PLAN_SEQ_CUT_DEVICES &&
           (info.flags & ZC_PLAN_CUT) && zone_of(plan, 0) == ZC_ZONE_LOCAL &&
           zc_plan_check(plan) == ZC_OK && !plan_properties(plan, dev, 4),
           "fill: the sequence that fits whole on no device is cut over devices, the "
           "longest stay whole");
        zc_plan_destroy(plan);
        plan = make(2, 1, 10, node, 3);
        zc_plan_seq(plan, 2, &q);
        zc_plan_ring(plan, q.ring, &ring);
        ok(plan && q.zone == ZC_ZONE_INTER && ring.nranks == 2 && ring.nnodes == 2 &&
           q.cut == ZC_PLAN_SEQ_CUT_NODES && zone_of(plan, 0) == ZC_ZONE_LOCAL &&
           zone_of(plan, 1) == ZC_ZONE_LOCAL && zc_plan_check(plan) == ZC_OK,
           "fill: 9 + 7 + 4 on two nodes of 10: the 4 rings over exactly its two devices");
        zc_plan_destroy(plan);
    }
    /* (f) forced even split */
    {
        int64_t len[] = {7, 5, 3, 1};
        zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
        int all = 1;

        opts.flags = ZC_PLAN_EVEN_SPLIT;
        ok(zc_plan_create(2, 2, 4, len, 4, &opts, &plan) == ZC_OK, "(f) even split builds");
        for (size_t s = 0; s < 4; s++) {
            zc_plan_seq(plan, s, &q);
            zc_plan_ring(plan, q.ring, &ring);
            all &= q.zone == ZC_ZONE_INTER && ring.nranks == 4;
        }
        ok(all && zc_plan_check(plan) == ZC_OK, "(f) even split: every sequence on all 4 ranks");
        zc_plan_destroy(plan);
    }
    /* (g) quadratic share of one fragment: local */
    {
        int64_t len[] = {10, 10};

        plan = make(1, 2, 10, len, 2);
        zc_plan_seq(plan, 0, &q);
        ok(plan && q.zone == ZC_ZONE_LOCAL && zone_of(plan, 1) == ZC_ZONE_LOCAL && q.ring == -1,
           "(g) intra-zone sequences with one fragment each are local");
        zc_plan_destroy(plan);
    }
    /* (h) N = 1 and P = 1 */
    {
        int64_t full[] = {32};
        int64_t two[] = {4, 4};

        plan = make(1, 4, 8, full, 1);
        zc_plan_seq(plan, 0, &q);
        zc_plan_info(plan, &info);
        ok(plan && q.zone == ZC_ZONE_INTRA && info.s1 == 32 && zc_plan_check(plan) == ZC_OK,
           "(h) N = 1: a sequence of exactly P*L is intra over the node");
        zc_plan_destroy(plan);
        plan = make(1, 1, 8, two, 2);
        ok(plan && zone_of(plan, 0) == ZC_ZONE_LOCAL && zone_of(plan, 1) == ZC_ZONE_LOCAL,
           "(h) N = P = 1: everything local");
        zc_plan_destroy(plan);
        plan = make(3, 1, 8, (int64_t[]){20, 4}, 2);
        zc_plan_seq(plan, 0, &q);
        zc_plan_ring(plan, q.ring, &ring);
        ok(plan && q.zone == ZC_ZONE_INTER && ring.nnodes == 3 && zc_plan_check(plan) == ZC_OK,
           "(h) P = 1: a long sequence spans nodes (%d)", plan ? ring.nnodes : -1);
        zc_plan_destroy(plan);
    }
    /* (i) zero-length sequences */
    {
        int64_t len[] = {0, 5, 0};
        const zc_plan_piece_t *p;
        size_t np, total = 0;

        plan = make(1, 2, 4, len, 3);
        for (int r = 0; r < 2; r++) {
            zc_plan_rank_pieces(plan, r, &p, &np);
            for (size_t k = 0; k < np; k++)
                total += p[k].seq != 1;
        }
        ok(plan && zone_of(plan, 0) == ZC_ZONE_LOCAL && total == 0 &&
           zc_plan_check(plan) == ZC_OK, "(i) zero-length sequences hold no piece");
        zc_plan_destroy(plan);
    }
}

static void adversarial(void)
{
    static const int shapes[][3] = {{2, 8, 4096}, {4, 8, 4096}, {3, 4, 1000}, {16, 8, 4096}};

    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int N = shapes[i][0], P = shapes[i][1];
        int64_t L = shapes[i][2], cap = (int64_t)N * P * L;
        int64_t *len = malloc((size_t)cap * sizeof(*len));
        const char *why;
        zc_plan_h plan;
        zc_plan_seq_t q;
        size_t n;

        len[0] = cap; /* one huge sequence: the whole cluster */
        plan = make(N, P, L, len, 1);
        zc_plan_seq(plan, 0, &q);
        why = plan ? plan_properties(plan, len, 1) : "no plan";
        ok(!why && q.zone == (N > 1 ? ZC_ZONE_INTER : ZC_ZONE_INTRA),
           "%s: one sequence of %lld tokens on %dx%d: %s", masks[cur].name, (long long)cap, N,
           P, why ? why : "ok");
        zc_plan_destroy(plan);

        n = (size_t)(N * P * 3); /* all equal, exactly full */
        for (size_t k = 0; k < n; k++)
            len[k] = L / 3 + ((int64_t)k < L % 3 * N * P / 3 ? 1 : 0);
        for (size_t k = 0; k < n; k++)
            len[k] = cap / (int64_t)n + ((int64_t)k < cap % (int64_t)n ? 1 : 0);
        plan = make(N, P, L, len, n);
        why = plan ? plan_properties(plan, len, n) : "no plan";
        ok(!why, "%s: %zu equal sequences filling %dx%d: %s", masks[cur].name, n, N, P,
           why ? why : "ok");
        zc_plan_destroy(plan);

        n = (size_t)cap < 20000 ? (size_t)cap : 20000; /* all tiny */
        for (size_t k = 0; k < n; k++)
            len[k] = 1;
        plan = make(N, P, L, len, n);
        why = plan ? plan_properties(plan, len, n) : "no plan";
        ok(!why, "%s: %zu one-token sequences on %dx%d: %s", masks[cur].name, n, N, P,
           why ? why : "ok");
        zc_plan_destroy(plan);
        free(len);
    }
}

/* Plan `len` exactly filling N x P x L; "" when every property holds and
 * every device holds exactly L tokens, else why not. */
static const char *full_plan_ok(int N, int P, int64_t L, const int64_t *len, size_t n,
                                int *cut)
{
    static char why[300];
    const char *w;
    zc_plan_h plan, again;

    if (create(N, P, L, len, n, &plan) != ZC_OK) {
        snprintf(why, sizeof(why), "create: %s", zc_get_last_error());
        return why;
    }
    w = plan_properties(plan, len, n);
    for (int r = 0; !w && r < N * P; r++) {
        zc_plan_rank_t rk;

        zc_plan_rank(plan, r, &rk);
        if (rk.tokens != L) {
            snprintf(why, sizeof(why), "rank %d holds %lld of %lld", r, (long long)rk.tokens,
                     (long long)L);
            w = why;
        }
    }
    if (!w && create(N, P, L, len, n, &again) == ZC_OK) {
        w = plans_equal(plan, again) ? NULL : "not deterministic";
        zc_plan_destroy(again);
    }
    if (cut) {
        zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;

        zc_plan_info(plan, &info);
        *cut += (info.flags & ZC_PLAN_CUT) != 0;
    }
    zc_plan_destroy(plan);
    return w;
}

/* Exactly-full batches, as frameworks pack them: every device at L. */
static void full_batches(void)
{
    static const int nodes[] = {1, 2, 3, 4, 8, 16};
    static const int gpus[] = {1, 2, 4, 8};
    static const int64_t caps[] = {1000, 4096, 8192};
    zc_rng_t rng = {20261124};
    int bad = 0, cuts = 0, runs = 3000;

    for (int t = 0; t < runs; t++) {
        int N = nodes[zc_rng_range(&rng, 0, 6)], P = gpus[zc_rng_range(&rng, 0, 4)];
        int64_t L = caps[zc_rng_range(&rng, 0, 3)];
        int ds = (int)zc_rng_range(&rng, 0, zc_dataset_count());
        int64_t *len;
        size_t n = zc_dataset_sample(ds, (int64_t)N * P * L, &rng, &len);
        const char *why = full_plan_ok(N, P, L, len, n, &cuts);

        if (why && bad++ == 0)
            diag("full batch %d (N=%d P=%d L=%lld %s, %zu seqs): %s", t, N, P, (long long)L,
                 zc_dataset_name(ds), n, why);
        free(len);
    }
    diag("%d exactly-full batches, %d cut some sequence", runs, cuts);
    ok(bad == 0, "%s: %d exactly-full batches of the three datasets: every device at L, "
       "placed once, zones, cut bounds, deterministic (%d bad)", masks[cur].name, runs, bad);
}

/* Adversarial exactly-full batches on N x P x L. */
static void full_adversarial(void)
{
    static const int shapes[][3] = {{2, 8, 4096}, {4, 8, 1000}, {3, 4, 1000}, {8, 2, 512},
                                    {1, 8, 4096}, {5, 3, 7}};

    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int N = shapes[i][0], P = shapes[i][1];
        int64_t L = shapes[i][2], cap = (int64_t)N * P * L, left;
        int64_t *len = malloc((size_t)cap * sizeof(*len));
        zc_rng_t rng = {i + 1};
        const char *why;
        size_t n = 0;

        /* all of length L + 1, the last one what is left */
        for (left = cap; left > 0; left -= len[n++])
            len[n] = left < L + 1 ? left : L + 1;
        why = full_plan_ok(N, P, L, len, n, NULL);
        ok(!why, "%s: %dx%dx%lld: %zu sequences of L + 1: %s", masks[cur].name, N, P,
           (long long)L, n, why ? why : "ok");
        /* one of N*P*L - 1 and one token */
        len[0] = cap - 1;
        len[1] = 1;
        why = full_plan_ok(N, P, L, len, 2, NULL);
        ok(!why, "%s: %dx%dx%lld: N*P*L - 1 plus one token: %s", masks[cur].name, N, P,
           (long long)L, why ? why : "ok");
        /* one-token sequences only */
        for (n = 0; n < (size_t)cap; n++)
            len[n] = 1;
        why = full_plan_ok(N, P, L, len, n, NULL);
        ok(!why, "%s: %dx%dx%lld: %zu one-token sequences: %s", masks[cur].name, N, P,
           (long long)L, n, why ? why : "ok");
        /* multiples of L, the last one cut to fill */
        for (n = 0, left = cap; left > 0; left -= len[n++]) {
            len[n] = L * zc_rng_range(&rng, 1, 2 * P + 1);
            len[n] = len[n] < left ? len[n] : left;
        }
        why = full_plan_ok(N, P, L, len, n, NULL);
        ok(!why, "%s: %dx%dx%lld: %zu multiples of L: %s", masks[cur].name, N, P, (long long)L,
           n, why ? why : "ok");
        free(len);
    }
}

/* The routes of a plan's hops, worked by hand from the runtime's rule
 * (src/plan/routing.c: a rank on the rail forwards its own slice, else the node's
 * ranks on rail k in turn by src + k, else any rank of the node), and the
 * slice rule (remainder to the first rails, as zc_route_slice cuts). */
static int same(const int *got, const int *want, int n)
{
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            return 0;
    return 1;
}

static void route_cases(void)
{
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    const zc_plan_hop_t *hops;
    zc_plan_ring_t ring;
    zc_plan_h plan = NULL;
    size_t nh = 0;
    int64_t off[4], len[4], one = 1600, two = 40;
    int slices_ok = 1;

    /* Cluster A's shape: 8 GPUs, 4 NICs (GPU g on rail g / 2); one sequence
     * on the even ring 0..15: hops 7 -> 8 and 15 -> 0. */
    opts.flags = ZC_PLAN_EVEN_SPLIT;
    opts.rails = 4;
    ok(zc_plan_create(2, 8, 100, &one, 1, &opts, &plan) == ZC_OK &&
           zc_plan_ring(plan, 0, &ring) == ZC_OK && ring.nranks == 16 &&
           zc_plan_ring_hops(plan, 0, &hops, &nh) == ZC_OK && nh == 2,
       "8 GPUs x 4 rails: the even ring has two inter-node hops");
    if (nh == 2) {
        static const int s0[] = {1, 2, 5, 7}, r0[] = {8, 10, 13, 14};
        static const int s1[] = {9, 10, 13, 15}, r1[] = {0, 2, 5, 6};

        ok(hops[0].src_rank == 7 && hops[0].dst_rank == 8 && hops[0].x_send == 4 &&
               hops[0].x_recv == 4 && same(hops[0].send_proxies, s0, 4) &&
               same(hops[0].recv_proxies, r0, 4),
           "hop 7 -> 8: 4 slices (not x = 8), proxies 1,2,5,7 -> 8,10,13,14 (salt 7)");
        ok(hops[1].src_rank == 15 && hops[1].dst_rank == 0 && same(hops[1].send_proxies, s1, 4) &&
               same(hops[1].recv_proxies, r1, 4),
           "hop 15 -> 0: proxies 9,10,13,15 -> 0,2,5,6 (salt 15)");
    }
    zc_plan_destroy(plan);
    plan = NULL;
    nh = 0;

    /* More rails than GPUs: 2 GPUs on rails 0 and 2 of 4; rails 1 and 3
     * have no rank, any rank of the node forwards them (by src + k). */
    ok(zc_plan_create(2, 2, 10, &two, 1, &opts, &plan) == ZC_OK &&
           zc_plan_ring_hops(plan, 0, &hops, &nh) == ZC_OK && nh == 2,
       "2 GPUs x 4 rails: two hops");
    if (nh == 2) {
        static const int s0[] = {0, 0, 1, 0}, r0[] = {2, 2, 3, 2};

        ok(hops[0].src_rank == 1 && hops[0].dst_rank == 2 && hops[0].x_send == 4 &&
               same(hops[0].send_proxies, s0, 4) && same(hops[0].recv_proxies, r0, 4),
           "hop 1 -> 2 over 4 rails: proxies 0,0,1,0 -> 2,2,3,2");
    }
    zc_plan_destroy(plan);

    /* The slice rule: 10 over 3 is 4,3,3 (the runtime's; was 3,3,4), and
     * zc_plan_slice is zc_route_slice for every count and rail count. */
    for (int k = 0; k < 3; k++)
        zc_plan_slice(10, 3, k, &off[k], &len[k]);
    ok(off[0] == 0 && len[0] == 4 && off[1] == 4 && len[1] == 3 && off[2] == 7 && len[2] == 3,
       "zc_plan_slice: 10 elements over 3 rails are 4, 3, 3");
    for (int64_t n = 0; n < 200; n++)
        for (int x = 1; x <= ZC_PLAN_MAX_RAILS; x++)
            for (int k = 0, end = 0; k < x; k++) {
                int64_t o, l, ro, rl;

                slices_ok &= zc_plan_slice(n, x, k, &o, &l) == ZC_OK;
                zc_route_slice(n, x, NULL, k, &ro, &rl);
                slices_ok &= o == ro && l == rl && o == end && l >= n / x && l <= n / x + 1 &&
                             (k + 1 < x || o + l == n);
                end = (int)(o + l);
            }
    ok(slices_ok, "zc_plan_slice equals zc_route_slice: contiguous, n / x or one more, "
       "covering n (n < 200, 1..16 rails)");
}

int main(void)
{
    for (cur = 0; cur < NMASKS; cur++) {
        random_batches();
        full_batches();
        full_adversarial();
        exhaustive_small();
        adversarial();
    }
    cur = 0;
    open_cases();
    route_cases();
    return tap_done();
}
