/* Remap solver: balanced layout, transfers that conserve tokens, the
 * alltoallv counts, and optimality against GLPK (LP bound on many random
 * instances, exact MIP optimum on small ones). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/plan/plan.h"
#include "src/common/status.h"
#include "tap.h"
#include "tools/zc_plan_dataset.h"
#include "tools/zc_plan_lp_reference.h"

static void random_layout(zc_rng_t *rng, int d, int64_t *before, int64_t *after)
{
    int mode = (int)zc_rng_range(rng, 0, 3);

    for (int i = 0; i < d; i++) {
        /* uniform, skewed (few heavy ranks), or sparse */
        before[i] = mode == 0 ? zc_rng_range(rng, 0, 5000)
                    : mode == 1 ? (zc_rng_range(rng, 0, 8) == 0 ? zc_rng_range(rng, 4000, 9000)
                                                                : zc_rng_range(rng, 0, 1500))
                                : (zc_rng_range(rng, 0, 3) == 0 ? zc_rng_range(rng, 0, 60) : 0);
    }
    zc_remap_balanced(d, before, after);
}

static int transfers_ok(int d, const int64_t *before, const int64_t *after,
                        const zc_plan_transfer_t *t, size_t n)
{
    int64_t *net = calloc((size_t)d, sizeof(*net));
    int good = 1;

    for (size_t k = 0; k < n; k++) {
        good &= t[k].tokens > 0 && before[t[k].from] > after[t[k].from] &&
                before[t[k].to] < after[t[k].to];
        good &= k == 0 || t[k - 1].from < t[k].from ||
                (t[k - 1].from == t[k].from && t[k - 1].to < t[k].to);
        net[t[k].from] -= t[k].tokens;
        net[t[k].to] += t[k].tokens;
    }
    for (int i = 0; i < d; i++)
        good &= before[i] + net[i] == after[i];
    free(net);
    return good;
}

static void solver_vs_glpk(void)
{
    zc_rng_t rng = {77};
    int runs = 400, bad = 0, lp_bad = 0, mip_bad = 0, mip_runs = 0, lp_runs = 0;

    for (int t = 0; t < runs; t++) {
        static const int ppns[] = {1, 2, 4, 8};
        int ppn = ppns[zc_rng_range(&rng, 0, 4)];
        int d = ppn * (int)zc_rng_range(&rng, 1, 64 / ppn + 1);
        double bi = 1.0, be = (double)zc_rng_range(&rng, 1, 30);
        int64_t before[64], after[64];
        zc_plan_transfer_t *tr;
        size_t n;
        double obj, lp;

        if (t % 5 == 0)
            be = 1.0 + (double)zc_rng_range(&rng, 0, 1000) / 997.0; /* non-integral ratio */
        random_layout(&rng, d, before, after);
        if (zc_remap_solve(d, ppn, before, after, bi, be, &tr, &n, &obj) != ZC_OK) {
            bad++;
            continue;
        }
        double recomputed = -1;
        bad += !transfers_ok(d, before, after, tr, n) ||
               zc_remap_objective(d, ppn, tr, n, bi, be, &recomputed) != ZC_OK ||
               fabs(obj - recomputed) > 1e-9 * (obj + 1);
#ifdef HAVE_GLPK
        if (zc_lp_remap(d, ppn, before, after, bi, be, 0, &lp) == 0) {
            lp_runs++;
            /* integral optimum: at least the LP bound, within one token's cost of it */
            if (obj < lp - 1e-6 * (lp + 1) || obj > lp + be + 1e-6 * (lp + 1)) {
                if (lp_bad++ == 0)
                    diag("d=%d ppn=%d be=%g: solver %.9g, LP %.9g", d, ppn, be, obj, lp);
            }
        }
        if (d <= 12 && t % 2 == 0) {
            double mip;

            if (zc_lp_remap(d, ppn, before, after, bi, be, 1, &mip) == 0) {
                mip_runs++;
                if (fabs(mip - obj) > 1e-6 * (mip + 1) && mip_bad++ == 0)
                    diag("d=%d ppn=%d be=%g: solver %.9g, MIP %.9g", d, ppn, be, obj, mip);
            }
        }
#else
        (void)lp;
#endif
        free(tr);
    }
    ok(bad == 0, "%d random instances: transfers surplus->deficit, balanced, objective as "
       "reported (%d bad)", runs, bad);
#ifdef HAVE_GLPK
    ok(lp_bad == 0 && lp_runs > runs / 2,
       "objective within one token's cost of GLPK's LP optimum (%d of %d differ)", lp_bad,
       lp_runs);
    ok(mip_bad == 0 && mip_runs > 10, "objective equals GLPK's integral optimum (%d of %d differ)",
       mip_bad, mip_runs);
#else
    tap_skip(2, "built without GLPK");
#endif
}

static void known_instances(void)
{
    /* one node: everything intra, cost = b_intra * the largest amount */
    int64_t b1[] = {10, 0, 0, 2}, a1[4];
    /* two nodes of two: node 0 has all the surplus; 6 tokens must cross */
    int64_t b2[] = {9, 9, 0, 0}, a2[4];
    zc_plan_transfer_t *t;
    size_t n;
    double obj;

    zc_remap_balanced(4, b1, a1);
    ok(a1[0] == 3 && a1[3] == 3 && a1[1] == 3 && a1[2] == 3, "balanced layout: 12 over 4 is 3");
    zc_remap_solve(4, 4, b1, a1, 1, 10, &t, &n, &obj);
    ok(obj == 7 && transfers_ok(4, b1, a1, t, n), "one node: objective 7 (%g)", obj);
    free(t);
    zc_remap_balanced(4, b2, a2);
    zc_remap_solve(4, 2, b2, a2, 1, 10, &t, &n, &obj);
    /* B = {5, 5, 4, 4}: each sender ships 4 tokens across -> 4 * 10 = 40 */
    ok(obj == 40 && transfers_ok(4, b2, a2, t, n), "two nodes: objective 40 (%g)", obj);
    free(t);
}

static void plan_counts(void)
{
    int64_t len[] = {9000, 3000, 2500, 700, 650, 12000, 40, 3};
    zc_plan_h plan;
    int d, good = 1, inverse = 1;
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;

    if (zc_plan_create(2, 4, 4096, len, 8, NULL, &plan) != ZC_OK) {
        ok(0, "plan: %s", zc_get_last_error());
        return;
    }
    zc_plan_info(plan, &info);
    d = info.nranks;
    {
        int64_t sc[8][8], sd[8][8], rc[8][8], rd[8][8], isc[8], isd[8], irc[8], ird[8];

        for (int r = 0; r < d; r++)
            zc_plan_remap_counts(plan, r, ZC_REMAP_FORWARD, sc[r], sd[r], rc[r], rd[r]);
        for (int r = 0; r < d; r++) {
            zc_plan_rank_t rk;
            int64_t s = 0, q = 0;

            zc_plan_rank(plan, r, &rk);
            for (int p = 0; p < d; p++) {
                good &= sc[r][p] == rc[p][r]; /* what r sends p, p receives from r */
                s += sc[r][p];
                q += rc[r][p];
            }
            good &= s == rk.tokens && q == rk.linear_tokens;
            zc_plan_remap_counts(plan, r, ZC_REMAP_INVERSE, isc, isd, irc, ird);
            for (int p = 0; p < d; p++)
                inverse &= isc[p] == rc[r][p] && isd[p] == rd[r][p] && irc[p] == sc[r][p] &&
                           ird[p] == sd[r][p];
        }
    }
    ok(good, "forward counts: sends match receives, cover A and B");
    ok(inverse, "inverse counts are the forward ones with send and receive swapped");
    ok(zc_plan_check(plan) == ZC_OK, "linear layout pieces tile every sequence");
    zc_plan_destroy(plan);
}

int main(void)
{
    known_instances();
    solver_vs_glpk();
    plan_counts();
    return tap_done();
}
