/* zc_remap_solver_perf(1): time the planner per batch (partition + zigzag
 * layout + proxies + remap, i.e. zc_plan_create) and the exact remap solver
 * against GLPK's simplex on the same instances. */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/plan/plan.h"
#include "zc_plan_dataset.h"
#include "zc_plan_lp_reference.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: zc_remap_solver_perf [-n iters] [-s seed] [-d dataset] [-g max GLPK ranks]"
               " [-c capacity/token-per-GPU percent]\n");
}

int main(int argc, char **argv)
{
    static const int gpus[] = {16, 32, 64, 128, 256, 1024, 2048, 4096, 8192, 16384};
    int iters = 20, ds = 0, glpk_max = 1024, headroom = 125, opt, wrong = 0;
    unsigned long long seed = 1;

    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};

    while ((opt = getopt_long(argc, argv, "n:s:d:g:c:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n': iters = atoi(optarg); break;
        case 's': seed = strtoull(optarg, NULL, 10); break;
        case 'd': ds = zc_dataset_find(optarg); break;
        case 'g': glpk_max = atoi(optarg); break;
        case 'c': headroom = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (iters < 1 || ds < 0 || headroom < 100) {
        usage(stderr);
        return 2;
    }
    printf("# planner and remap solver; dataset %s, 8 GPUs per node, capacity %d %% of the "
           "per-GPU context, b_inter/b_intra = 10, %d iterations\n", zc_dataset_name(ds),
           headroom, iters);
    printf("# %6s %10s %6s %12s %12s %12s %12s %9s %9s\n", "ranks", "tokens", "seqs",
           "plan(ms)", "solver(ms)", "glpk(ms)", "objective", "vs LP", "speedup");
    for (size_t g = 0; g < sizeof(gpus) / sizeof(gpus[0]); g++) {
        int d = gpus[g], N = d / 8;
        int64_t per_gpu = d == 16 ? 4096 : 4096; /* 16 GPUs: 64k tokens in all */
        int64_t total = per_gpu * d, cap = per_gpu * headroom / 100;
        zc_rng_t rng = {seed};
        int64_t *len;
        size_t n = zc_dataset_sample(ds, total, &rng, &len);
        zc_plan_h plan;
        zc_plan_transfer_t *t;
        size_t nt;
        double t0, tplan, tsolve, tlp = -1, obj = 0, lp = 0;
        int it;

        t0 = now();
        for (it = 0; it < iters; it++) {
            if (zc_plan_create(N, 8, cap, len, n, NULL, &plan) != ZC_OK) {
                fprintf(stderr, "zc_remap_solver_perf: %s\n", zc_get_last_error());
                return 1;
            }
            if (it + 1 < iters)
                zc_plan_destroy(plan);
            if (now() - t0 > 30)
                break;
        }
        tplan = (now() - t0) / (it < iters ? it + 1 : iters);
        t0 = now();
        for (it = 0; it < iters; it++) {
            zc_remap_solve(d, 8, plan->before, plan->after, 1, 10, &t, &nt, &obj);
            free(t);
            if (now() - t0 > 30)
                break;
        }
        tsolve = (now() - t0) / (it < iters ? it + 1 : iters);
        if (d <= glpk_max) {
            t0 = now();
            if (zc_lp_remap(d, 8, plan->before, plan->after, 1, 10, 0, &lp) == 0)
                tlp = now() - t0;
        }
        if (tlp >= 0 && (obj < lp - 1e-6 * (lp + 1) || obj > lp + 10 + 1e-6 * (lp + 1)))
            wrong++;
        printf("  %6d %10lld %6zu %12.3f %12.3f ", d, (long long)total, n, tplan * 1e3,
               tsolve * 1e3);
        if (tlp >= 0)
            printf("%12.1f %12.6g %9.3g %8.0fx\n", tlp * 1e3, obj, obj - lp, tlp / tsolve);
        else
            printf("%12s %12.6g %9s %9s\n", d <= glpk_max ? "timeout" : "-", obj, "-", "-");
        fflush(stdout);
        zc_plan_destroy(plan);
        free(len);
    }
    printf("# objective differs from GLPK's LP optimum by more than one token: %d\n", wrong);
    return wrong ? 1 : 0;
}
