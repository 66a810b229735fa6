/* zc_plan_quality(1): the plan's modeled quality on exactly-full batches.
 * For each cluster file, GPU count and dataset, samples batches of exactly
 * GPUs x L tokens and prices (zc_plan_cost, Zeppelin) the plan with
 * capacity L against the same batch planned with 25 % headroom and against
 * the TE CP layout; counts the fill step's cuts and the rings that span
 * every rank. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zc_plan_dataset.h"
#include "zcomm.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: zc_plan_quality [-n seeds] [-L tokens per GPU] [-g GPUs,...] "
               "CLUSTER_FILE...\n");
}

typedef struct {
    double full, head, tecp;     /* modeled seconds */
    double routed;               /* TE CP's layout with routed hops: the even-split fallback */
    int cut_nodes, cut_devs, global_rings;
} quality_t;

static int measure(const zc_cluster_t *cl, int gpus, int64_t L, const int64_t *len, size_t n,
                   quality_t *q)
{
    int N = gpus / cl->gpus_per_node, P = cl->gpus_per_node;
    zc_plan_h full = NULL, head = NULL;
    zc_cost_t c = ZC_COST_INITIALIZER;
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    int rc = -1;

    opts.rails = cl->nics_per_node; /* hops split over the NICs zc_plan_cost prices */
    if (zc_plan_create(N, P, L, len, n, &opts, &full) != ZC_OK ||
        zc_plan_create(N, P, L + L / 4, len, n, &opts, &head) != ZC_OK)
        goto out;
    {
        const struct {
            zc_plan_h plan;
            zc_cost_method_t method;
            double *out;
        } prices[] = {{full, ZC_COST_ZEPPELIN, &q->full}, {head, ZC_COST_ZEPPELIN, &q->head},
                      {full, ZC_COST_TE_CP, &q->tecp}, {full, ZC_COST_ROUTING, &q->routed}};

        for (size_t i = 0; i < sizeof(prices) / sizeof(prices[0]); i++) {
            if (zc_plan_cost(prices[i].plan, cl, prices[i].method, &c) != ZC_OK)
                goto out;
            *prices[i].out = c.total;
        }
    }
    zc_plan_info(full, &info);
    q->cut_nodes = q->cut_devs = q->global_rings = 0;
    for (size_t s = 0; s < n; s++) {
        zc_plan_seq_t seq;

        zc_plan_seq(full, s, &seq);
        q->cut_nodes += (seq.cut & ZC_PLAN_SEQ_CUT_NODES) != 0;
        q->cut_devs += (seq.cut & ZC_PLAN_SEQ_CUT_DEVICES) != 0;
    }
    for (int r = 0; r < info.nrings; r++) {
        zc_plan_ring_t ring;

        zc_plan_ring(full, r, &ring);
        q->global_rings += ring.nranks == gpus && gpus > P;
    }
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "zc_plan_quality: %s\n", zc_get_last_error());
    zc_plan_destroy(full);
    zc_plan_destroy(head);
    return rc;
}

int main(int argc, char **argv)
{
    int gpus[16] = {16, 32, 64, 128}, ngpus = 4, seeds = 20, opt, bad = 0;
    int64_t L = 4096;

    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};

    while ((opt = getopt_long(argc, argv, "n:L:g:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n': seeds = atoi(optarg); break;
        case 'L': L = atoll(optarg); break;
        case 'g':
            ngpus = 0;
            for (char *t = strtok(optarg, ","); t && ngpus < 16; t = strtok(NULL, ","))
                gpus[ngpus++] = atoi(t);
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (seeds < 1 || L < 1 || ngpus < 1 || optind >= argc) {
        usage(stderr);
        return 2;
    }
    printf("# exactly-full batches of GPUs x %lld tokens, %d seeds each; modeled iteration "
           "(zc_plan_cost, zeppelin)\n", (long long)L, seeds);
    printf("# full/headroom: mean over seeds of full / the same batch at capacity 1.25 L; "
           "full/TE CP: mean and worst seed\n");
    printf("| cluster | GPUs | dataset | full/headroom | full/TE CP mean | full/TE CP worst | "
           "headroom/TE CP mean | even split + routing/TE CP | cut over nodes | "
           "cut over devices | rings over all GPUs |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int f = optind; f < argc; f++) {
        zc_cluster_t cl = ZC_CLUSTER_INITIALIZER;

        if (zc_cluster_load(argv[f], &cl) != ZC_OK) {
            fprintf(stderr, "zc_plan_quality: %s: %s\n", argv[f], zc_get_last_error());
            return 1;
        }
        for (int g = 0; g < ngpus; g++) {
            if (gpus[g] < cl.gpus_per_node || gpus[g] % cl.gpus_per_node) {
                fprintf(stderr, "zc_plan_quality: %d GPUs is not a multiple of %d\n", gpus[g],
                        cl.gpus_per_node);
                return 2;
            }
            for (int ds = 0; ds < zc_dataset_count(); ds++) {
                double fh = 0, ft = 0, ht = 0, rt = 0, worst = 0, cn = 0, cd = 0, gr = 0;

                for (int s = 1; s <= seeds; s++) {
                    zc_rng_t rng = {(uint64_t)s};
                    int64_t *len;
                    size_t n = zc_dataset_sample(ds, (int64_t)gpus[g] * L, &rng, &len);
                    quality_t q;

                    if (!n || measure(&cl, gpus[g], L, len, n, &q) != 0) {
                        free(len);
                        return 1;
                    }
                    fh += q.full / q.head;
                    ft += q.full / q.tecp;
                    ht += q.head / q.tecp;
                    rt += q.routed / q.tecp;
                    worst = q.full / q.tecp > worst ? q.full / q.tecp : worst;
                    cn += q.cut_nodes;
                    cd += q.cut_devs;
                    gr += q.global_rings;
                    free(len);
                }
                bad += fh / seeds > 1.15 || worst > 1.0;
                printf("| %s | %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f | %.1f | %.1f |\n",
                       cl.name, gpus[g], zc_dataset_name(ds), fh / seeds, ft / seeds, worst,
                       ht / seeds, rt / seeds, cn / seeds, cd / seeds, gr / seeds);
                fflush(stdout);
            }
        }
    }
    printf("# rows over 1.15 full/headroom or worse than TE CP on some seed: %d\n", bad);
    return 0;
}
