/* The planner under masks beyond causal (zc_plan_create(3), "Masks"): the
 * visible-pair counts against a brute force over the mask's definition
 * (kernels/attn_math.h), Algorithm 2's shares driven by them, each ring's
 * layout against the balance rule recomputed here, the reach of a ring
 * against every pair of positions, what the cost model makes of it (rounds
 * and bytes of Zeppelin's rings against TE CP's), and the options' checks.
 * The exactly-full and random property tests run for every mask in
 * tests/test_plan_partition.c. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/attn_math.h"
#include "src/common/abi.h"
#include "src/plan/cost.h"
#include "src/plan/plan.h"
#include "tap.h"

/* Visible pairs of queries [qb, qe) of a sequence of len, one at a time. */
static double brute_pairs(zc_attn_mask_t m, int64_t len, int64_t qb, int64_t qe)
{
    double n = 0;

    for (int64_t x = qb; x < qe; x++)
        for (int64_t k = 0; k < len; k++)
            n += zc_attn_mask_sees(m, x, k);
    return n;
}

/* The same through the row ranges: O(1) a query, for long sequences. */
static double range_pairs(zc_attn_mask_t m, int64_t len, int64_t qb, int64_t qe)
{
    double n = 0;

    for (int64_t x = qb; x < qe; x++) {
        int64_t lo, hi;

        zc_attn_mask_keys(m, x, 0, 0, len, &lo, &hi);
        n += (double)(hi - lo);
    }
    return n;
}

static const int64_t mask_set[][2] = {
    {-1, 0}, {-1, -1}, {0, 0}, {1, 0}, {3, 2}, {-1, 3}, {5, -1}, {100, 0}, {1000, 1000}, {0, 7},
};
#define NMASK ((int)(sizeof(mask_set) / sizeof(mask_set[0])))

static void test_pairs(void)
{
    static const int64_t lens[] = {0, 1, 2, 7, 20, 64, 101};
    int bad = 0, cases = 0;
    zc_attn_mask_t m = zc_attn_mask_make(4095, 0);
    int64_t L = 131072;
    zc_pairs_t want = (zc_pairs_t)4096 * 4097 / 2 + (zc_pairs_t)(L - 4096) * 4096;

    for (int i = 0; i < NMASK; i++)
        for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
            for (int64_t qb = 0; qb <= lens[l]; qb += 1 + lens[l] / 9)
                for (int64_t qe = qb; qe <= lens[l]; qe += 1 + lens[l] / 7) {
                    zc_attn_mask_t mk = zc_attn_mask_make(mask_set[i][0], mask_set[i][1]);
                    double got = (double)zc_mask_pairs(mk, lens[l], qb, qe);

                    cases++;
                    if (got != brute_pairs(mk, lens[l], qb, qe) && bad++ == 0)
                        diag("mask (%lld, %lld), len %lld, queries [%lld, %lld): %.0f, brute "
                             "force %.0f", (long long)mk.left, (long long)mk.right,
                             (long long)lens[l], (long long)qb, (long long)qe, got,
                             brute_pairs(mk, lens[l], qb, qe));
                }
    ok(bad == 0, "zc_mask_pairs = a brute force over the mask, %d cases of 10 masks (windows "
       "of 1, one- and two-sided, wider than the sequence, causal, full), lengths 0..101", cases);
    ok(zc_mask_pairs(m, L, 0, L) == want,
       "a window of 4096 over 131072 tokens: 4096 * 4097 / 2 + (131072 - 4096) * 4096 pairs");
    ok(zc_mask_pairs(zc_attn_mask_make(-1, -1), L, 0, L) == (zc_pairs_t)L * L &&
           zc_mask_pairs(zc_attn_mask_make(-1, 0), L, 0, L) == (zc_pairs_t)L * (L + 1) / 2,
       "full: L^2 pairs; causal: L (L + 1) / 2");
    ok((double)zc_mask_pairs(m, 70000, 12345, 54321) == range_pairs(m, 70000, 12345, 54321),
       "a window's pairs of queries [12345, 54321) of 70000: as the kernels' row ranges count");
}

/* ---- plans under a mask ---------------------------------------------------- */

static zc_status_t plan_with(int N, int P, int64_t L, const int64_t *len, size_t n, int window,
                             int left, int right, unsigned flags, zc_plan_h *plan)
{
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;

    opts.flags = flags | (window ? ZC_PLAN_WINDOW : 0);
    opts.window_left = window ? left : 0;
    opts.window_right = window ? right : 0;
    return zc_plan_create(N, P, L, len, n, &opts, plan);
}

static int ring_size(zc_plan_h plan, size_t seq)
{
    zc_plan_seq_t q;
    zc_plan_ring_t ring;

    zc_plan_seq(plan, seq, &q);
    if (q.ring < 0)
        return 1;
    zc_plan_ring(plan, q.ring, &ring);
    return ring.nranks;
}

/* Algorithm 2 cuts z1 into ceil(P c(s) / sum c) positions, c the pairs:
 * one node of 8 x 1000 tokens, z1 = {3000, 1000}. */
static void test_alg2_shares(void)
{
    const int64_t len[2] = {3000, 1000};
    zc_attn_mask_t w = zc_attn_mask_make(99, 0);
    double c0 = range_pairs(w, 3000, 0, 3000), c1 = range_pairs(w, 1000, 0, 1000);
    int g0 = (int)((8 * c0 + (c0 + c1) - 1) / (c0 + c1)); /* exact: integers below 2^53 */
    int g1 = (int)((8 * c1 + (c0 + c1) - 1) / (c0 + c1));
    zc_plan_h causal = NULL, window = NULL;

    ok(plan_with(1, 8, 1000, len, 2, 0, 0, 0, 0, &causal) == ZC_OK &&
           plan_with(1, 8, 1000, len, 2, 1, 99, 0, 0, &window) == ZC_OK,
       "plans of {3000, 1000} on 8 x 1000, causal and window 100");
    ok(causal && ring_size(causal, 0) == 8,
       "causal: the 3000-token sequence takes ceil(8 * 4501500 / 5002000) = 8 devices (%d)",
       causal ? ring_size(causal, 0) : -1);
    ok(window && g0 == 7 && g1 == 2 && ring_size(window, 0) == g0 && ring_size(window, 1) == g1,
       "window of 100: its work is about linear, the rings take ceil(8 c / sum c) = %d and %d "
       "devices, about in proportion to tokens (%d, %d)", g0, g1,
       window ? ring_size(window, 0) : -1, window ? ring_size(window, 1) : -1);
    zc_plan_destroy(causal);
    zc_plan_destroy(window);
}

/* The test's own layout arithmetic: chunk bounds of a ring's shares. */
static int chunk_bounds(const int64_t *share, int g, int zigzag, int64_t *b)
{
    int n = zigzag ? 2 * g : g;

    b[0] = 0;
    for (int c = 0; c < n; c++) {
        int64_t len = !zigzag ? share[c] : c < g ? share[c] - share[c] / 2
                                                 : share[2 * g - 1 - c] / 2;

        b[c + 1] = b[c] + len;
    }
    return n;
}

static int chunk_owner(int g, int zigzag, int c)
{
    return zigzag && c >= g ? 2 * g - 1 - c : c;
}

/* The busiest position's pairs of a ring in a layout. */
static double busiest(zc_attn_mask_t m, const int64_t *share, int g, int zigzag)
{
    int64_t b[2 * 64 + 1];
    double pos[64] = {0}, most = 0;
    int n = chunk_bounds(share, g, zigzag, b);

    for (int c = 0; c < n; c++)
        pos[chunk_owner(g, zigzag, c)] += range_pairs(m, b[n], b[c], b[c + 1]);
    for (int i = 0; i < g; i++)
        most = pos[i] > most ? pos[i] : most;
    return most;
}

/* Every ring of a plan laid out as the rule says: zigzag for causal and
 * even splits, else contiguous unless zigzag's busiest position has under
 * 7/8 of contiguous's pairs. */
static const char *layouts_follow_rule(zc_plan_h plan, zc_attn_mask_t m, int even)
{
    static char why[160];
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;

    zc_plan_info(plan, &info);
    for (int r = 0; r < info.nrings; r++) {
        zc_plan_ring_t ring;
        zc_ring_layout_t got;
        int zig;

        zc_plan_ring(plan, r, &ring);
        zc_plan_ring_layout(plan, r, &got);
        if (ring.nranks > 64)
            continue;
        zig = even || (m.left < 0 && m.right == 0) ||
              8 * busiest(m, ring.tokens, ring.nranks, 1) <
                  7 * busiest(m, ring.tokens, ring.nranks, 0);
        if (got != (zig ? ZC_RING_LAYOUT_ZIGZAG : ZC_RING_LAYOUT_CONTIGUOUS)) {
            snprintf(why, sizeof(why), "ring %d of %d: %s, the rule says %s", r, ring.nranks,
                     got == ZC_RING_LAYOUT_ZIGZAG ? "zigzag" : "contiguous",
                     zig ? "zigzag" : "contiguous");
            return why;
        }
    }
    return NULL;
}

static void test_layouts(void)
{
    const int64_t one = 65536;
    static const struct {
        const char *name;
        int window, left, right;
        zc_ring_layout_t want;
    } cases[] = {
        {"causal", 0, 0, 0, ZC_RING_LAYOUT_ZIGZAG},
        {"full", 1, -1, -1, ZC_RING_LAYOUT_CONTIGUOUS},
        {"window of 4096", 1, 4095, 0, ZC_RING_LAYOUT_CONTIGUOUS},
        {"window of 1", 1, 0, 0, ZC_RING_LAYOUT_CONTIGUOUS},
        {"window wider than the sequence", 1, 100000, 0, ZC_RING_LAYOUT_ZIGZAG},
        {"local window 512 + 512", 1, 512, 512, ZC_RING_LAYOUT_CONTIGUOUS},
    };
    static const int64_t lens[] = {9000, 7000, 5000, 4000, 700, 64, 1, 0, 3000};
    int bad = 0;
    const char *why = NULL;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        zc_plan_h plan = NULL;
        zc_ring_layout_t got = (zc_ring_layout_t)-1;

        plan_with(2, 8, 4096, &one, 1, cases[i].window, cases[i].left, cases[i].right, 0,
                  &plan);
        zc_plan_ring_layout(plan, 0, &got);
        ok(got == cases[i].want, "one 64K sequence on 16 GPUs, %s: %s ring", cases[i].name,
           cases[i].want == ZC_RING_LAYOUT_ZIGZAG ? "zigzag" : "contiguous");
        zc_plan_destroy(plan);
        plan_with(2, 8, 4096, &one, 1, cases[i].window, cases[i].left, cases[i].right,
                  ZC_PLAN_EVEN_SPLIT, &plan);
        got = (zc_ring_layout_t)-1;
        zc_plan_ring_layout(plan, 0, &got);
        bad += got != ZC_RING_LAYOUT_ZIGZAG;
        zc_plan_destroy(plan);
    }
    ok(bad == 0, "ZC_PLAN_EVEN_SPLIT (TE CP's layout) is zigzag under every mask");
    /* the rule on every ring of mixed batches, every mask, even and cut rings */
    bad = 0;
    for (int i = 0; i < NMASK && !why; i++)
        for (int shape = 0; shape < 3 && !why; shape++) {
            static const int nps[3][3] = {{2, 8, 4096}, {1, 4, 8192}, {3, 2, 7000}};
            zc_attn_mask_t m = zc_attn_mask_make(mask_set[i][0], mask_set[i][1]);
            zc_plan_h plan = NULL;

            if (plan_with(nps[shape][0], nps[shape][1], nps[shape][2], lens, 9, 1, (int)m.left,
                          (int)m.right, 0, &plan) != ZC_OK) {
                why = zc_get_last_error();
                break;
            }
            why = layouts_follow_rule(plan, m, 0);
            zc_plan_destroy(plan);
        }
    ok(why == NULL, "every ring of mixed batches on 3 shapes, 10 masks: the layout the balance "
       "rule recomputed here picks (%s)", why ? why : "ok");
}

/* Reach: the farthest ring distance from a position to a position whose
 * keys it sees, against every pair of positions. */
static int brute_reach(zc_attn_mask_t m, const int64_t *share, int g, int zigzag)
{
    int64_t b[2 * 64 + 1];
    int n = chunk_bounds(share, g, zigzag, b), reach = 0;

    for (int qc = 0; qc < n; qc++)
        for (int kc = 0; kc < n; kc++) {
            int d = (chunk_owner(g, zigzag, qc) - chunk_owner(g, zigzag, kc) + g) % g, seen = 0;

            for (int64_t x = b[qc]; x < b[qc + 1] && !seen; x++)
                for (int64_t k = b[kc]; k < b[kc + 1] && !seen; k++)
                    seen = zc_attn_mask_sees(m, x, k);
            if (seen && d > reach)
                reach = d;
        }
    return reach;
}

static void test_reach(void)
{
    uint64_t s = 12345;
    int bad = 0, cases = 0;
    int64_t share[16], bounds[2 * 16 + 1];

    for (int t = 0; t < 400; t++) {
        int g = 1 + (int)(t % 9), zig = t % 2;
        zc_attn_mask_t m = zc_attn_mask_make(mask_set[t % NMASK][0], mask_set[t % NMASK][1]);

        for (int i = 0; i < g; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            share[i] = (int64_t)(s >> 60) + (t % 3 == 0 ? 0 : 5);
        }
        cases++;
        if (zc_ring_reach(m, share, g, zig ? ZC_RING_LAYOUT_ZIGZAG : ZC_RING_LAYOUT_CONTIGUOUS,
                          bounds) != brute_reach(m, share, g, zig) &&
            bad++ == 0)
            diag("reach differs: G %d, %s, mask (%lld, %lld)", g, zig ? "zigzag" : "contiguous",
                 (long long)m.left, (long long)m.right);
    }
    ok(bad == 0, "zc_ring_reach = every pair of positions checked, %d rings (1..9 positions, "
       "empty chunks, both layouts, 10 masks)", cases);
}

/* ---- the cost model under a mask --------------------------------------------- */

static const char cluster_text[] =
    "name mask\ngpus_per_node 8\nnics_per_node 4\nnic_gbps 200\nintra_gbytes 400\n"
    "attn_tflops 160\nlinear_tflops 200\nlayers 2\nhidden 1024\nheads 8\nhead_dim 128\n"
    "kv_heads 8\nffn_hidden 4096\nbytes_per_elem 2\n";

static void test_cost(void)
{
    const int64_t one = 65536;
    char path[] = "/tmp/test_plan_mask_cluster.XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    zc_cluster_t cl = ZC_CLUSTER_INITIALIZER;
    zc_step_model_t step;
    zc_step_cost_t te[3], zp[3];
    static const int wins[3][3] = {{0, 0, 0}, {1, 4095, 0}, {1, 8191, 0}};
    int built = f != NULL;

    if (f) {
        fputs(cluster_text, f);
        fclose(f);
    }
    built = built && zc_cluster_load_step(path, &cl, &step) == ZC_OK;
    unlink(path);
    for (int i = 0; i < 3 && built; i++) {
        zc_plan_h plan = NULL;
        zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;

        opts.rails = 4;
        opts.flags = wins[i][0] ? ZC_PLAN_WINDOW : 0;
        opts.window_left = wins[i][1];
        opts.window_right = wins[i][2];
        built = zc_plan_create(2, 8, 4096, &one, 1, &opts, &plan) == ZC_OK &&
                zc_plan_step_cost(plan, &cl, &step, ZC_COST_TE_CP, &te[i]) == ZC_OK &&
                zc_plan_step_cost(plan, &cl, &step, ZC_COST_ZEPPELIN, &zp[i]) == ZC_OK;
        zc_plan_destroy(plan);
    }
    if (!ok(built, "plans and costs of one 64K sequence on 16 GPUs: causal, windows 4096 and "
            "8192 (%s)", zc_get_last_error())) {
        tap_skip(4, "no cost");
        return;
    }
    ok(te[0].rounds == 16 && zp[0].rounds == 16 && te[1].rounds == 16 && te[2].rounds == 16,
       "causal rings and TE CP's under any mask run all 16 rounds (%d %d %d %d)", te[0].rounds,
       zp[0].rounds, te[1].rounds, te[2].rounds);
    ok(zp[1].rounds == 2 && zp[2].rounds == 3,
       "Zeppelin's contiguous ring of 4096-token positions: 2 rounds under a window of 4096, "
       "3 under 8192 (%d, %d)", zp[1].rounds, zp[2].rounds);
    ok(zp[1].bytes_intra + zp[1].bytes_inter > 0 &&
           (zp[1].bytes_intra + zp[1].bytes_inter) * 15 == te[1].bytes_intra + te[1].bytes_inter,
       "window 4096: Zeppelin's ring moves 1/15 of TE CP's bytes (each block one hop, not 15)");
    ok(zp[1].attn_fwd < te[1].attn_fwd && zp[1].attn_fwd < zp[0].attn_fwd &&
           te[1].attn_fwd <= te[0].attn_fwd,
       "window 4096: Zeppelin's attention below TE CP's and below causal; TE CP's, bound by "
       "its 16 transfers, not above causal (%.3g, %.3g, %.3g, %.3g s)", zp[1].attn_fwd,
       te[1].attn_fwd, zp[0].attn_fwd, te[0].attn_fwd);
}

/* ---- the plan's mask: pairs, info, options -------------------------------- */

static void test_rank_pairs(void)
{
    static const int64_t lens[] = {13000, 6000, 4000, 700, 64, 1, 0, 5000};
    int bad = 0;

    for (int i = 0; i < NMASK; i++) {
        zc_attn_mask_t m = zc_attn_mask_make(mask_set[i][0], mask_set[i][1]);
        zc_plan_h plan = NULL;
        double want = 0, got = 0;

        if (plan_with(2, 4, 4096, lens, 8, 1, (int)m.left, (int)m.right, 0, &plan) != ZC_OK) {
            bad++;
            continue;
        }
        for (size_t s = 0; s < 8; s++)
            want += range_pairs(m, lens[s], 0, lens[s]);
        for (int r = 0; r < 8; r++) {
            zc_plan_rank_t rk;

            zc_plan_rank(plan, r, &rk);
            got += rk.attn_pairs;
        }
        bad += got != want;
        zc_plan_destroy(plan);
    }
    ok(bad == 0, "the ranks' attn_pairs add up to every sequence's visible pairs, 10 masks");
}

static void expect(zc_status_t st, zc_status_t want, const char *word, const char *what)
{
    ok(st == want && strstr(zc_get_last_error(), word) != NULL, "%s: %s naming %s (%s)", what,
       zc_strerror(want), word, zc_get_last_error());
}

static void test_options(void)
{
    const int64_t len[2] = {300, 100};
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    zc_plan_h plan = NULL;
    zc_ring_layout_t layout;
    union {
        unsigned char bytes[sizeof(zc_plan_opts_t)];
        zc_plan_opts_t opts;
    } old;

    ok(zc_plan_create(2, 2, 200, len, 2, NULL, &plan) == ZC_OK &&
           zc_plan_info(plan, &info) == ZC_OK && info.window_left == -1 &&
           info.window_right == 0 && !(info.flags & ZC_PLAN_WINDOW),
       "no options: the causal mask, (-1, 0) in the info");
    zc_plan_destroy(plan);
    opts.flags = ZC_PLAN_WINDOW;
    opts.window_left = 63;
    opts.window_right = 5;
    ok(zc_plan_create(2, 2, 200, len, 2, &opts, &plan) == ZC_OK &&
           zc_plan_info(plan, &info) == ZC_OK && info.window_left == 63 &&
           info.window_right == 5 && (info.flags & ZC_PLAN_WINDOW),
       "ZC_PLAN_WINDOW (63, 5): in the info");
    expect(zc_plan_ring_layout(plan, 99, &layout), ZC_ERR_INVALID_ARG, "ring", "layout of ring 99");
    expect(zc_plan_ring_layout(plan, 0, NULL), ZC_ERR_INVALID_ARG, "layout", "NULL layout");
    expect(zc_plan_ring_layout(NULL, 0, &layout), ZC_ERR_INVALID_ARG, "plan", "NULL plan");
    zc_plan_destroy(plan);
    plan = NULL;
    opts.window_left = -2;
    expect(zc_plan_create(2, 2, 200, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG,
           "opts->window_left", "window_left -2");
    opts.window_left = 0, opts.window_right = -5;
    expect(zc_plan_create(2, 2, 200, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG,
           "opts->window_right", "window_right -5");
    opts.flags = 0, opts.window_right = 0, opts.window_left = 4;
    expect(zc_plan_create(2, 2, 200, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG,
           "opts->window_left", "a window without ZC_PLAN_WINDOW");
    ok(plan == NULL, "no plan from refused options");
    /* a caller of the second layout (size 40: rails, reserved) has padding
     * where window_left lies now: not read */
    memset(old.bytes, 0xa5, sizeof(old.bytes));
    old.opts = (zc_plan_opts_t)ZC_PLAN_OPTS_INITIALIZER;
    memset(old.bytes + offsetof(zc_plan_opts_t, window_left), 0xa5,
           sizeof(old.bytes) - offsetof(zc_plan_opts_t, window_left));
    old.opts.size = ZC_PLAN_OPTS_SIZE_V2;
    ok(ZC_PLAN_OPTS_SIZE_V2 == 40 && zc_plan_create(2, 2, 200, len, 2, &old.opts, &plan) == ZC_OK &&
           zc_plan_info(plan, &info) == ZC_OK && info.window_left == -1 && info.window_right == 0,
       "options of the second layout (size 40, garbage past reserved): accepted, causal (%s)",
       zc_get_last_error());
    zc_plan_destroy(plan);
}

int main(void)
{
    tap_plan(4 + 3 + 8 + 1 + 5 + 1 + 10);
    test_pairs();       /* 4 */
    test_alg2_shares(); /* 3 */
    test_layouts();     /* 8 */
    test_reach();       /* 1 */
    test_cost();        /* 5 */
    test_rank_pairs();  /* 1 */
    test_options();     /* 10 */
    return tap_done();
}
