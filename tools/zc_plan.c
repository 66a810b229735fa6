/* zc_plan(1): build the plan of a batch, print it and price it. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/plan/cost.h"
#include "zcomm.h"
#include "zc_plan_dataset.h"

static const char *zone_name[] = {"local", "intra", "inter"};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zc_plan --nodes N --gpus-per-node P --capacity L\n"
            "               [--lengths FILE|-] [--dataset arxiv|github|prolong64k --total TOKENS"
            " [--seed S]]\n"
            "               [--cluster FILE [--model 3b|7b] [--dkv-bytes B] [--cp-size C]]\n"
            "               [--window LEFT,RIGHT | --full] [--rails R] [--json] [--compare]"
            " [LENGTH...]\n");
}

static const char *layout_name[] = {"zigzag", "contiguous"};

/* The plan's mask in words. */
static void mask_text(const zc_plan_info_t *in, char *buf, size_t len)
{
    if (in->window_left == -1 && in->window_right == 0)
        snprintf(buf, len, "causal");
    else if (in->window_left == -1 && in->window_right == -1)
        snprintf(buf, len, "full");
    else
        snprintf(buf, len, "window (%d, %d)", in->window_left, in->window_right);
}

/* --window LEFT,RIGHT: two integers >= -1. */
static int parse_window(const char *s, zc_plan_opts_t *opts)
{
    long long left, right;
    char *end, *comma = strchr(s, ',');

    if (!comma)
        goto bad;
    errno = 0;
    left = strtoll(s, &end, 10);
    if (errno || end != comma || end == s)
        goto bad;
    right = strtoll(comma + 1, &end, 10);
    if (errno || *end || end == comma + 1 || left < -1 || right < -1 || left > INT_MAX ||
        right > INT_MAX)
        goto bad;
    opts->flags |= ZC_PLAN_WINDOW;
    opts->window_left = (int)left;
    opts->window_right = (int)right;
    return 0;
bad:
    fprintf(stderr, "zc_plan: --window: '%s' is not LEFT,RIGHT (keys each side, -1 for all)\n",
            s);
    return -1;
}

/* The paper's model sizes (section 5: LLaMA with multi-head attention).
 * 3B: open_llama_3b's config.json; 7B: Llama-2-7b's config.json; both the
 * LLaMA tokenizer's 32000 rows.  And a model trained with a sliding window:
 * Mistral-7B-v0.1's config.json (8 KV heads, FFN 14336, sliding_window
 * 4096: pair it with --window 4095,0). */
static const struct {
    const char *name;
    int layers, hidden, heads, head_dim, kv_heads, ffn_hidden, vocab;
} models[] = {
    {"3b", 26, 3200, 32, 100, 32, 8640, 32000},
    {"7b", 32, 4096, 32, 128, 32, 11008, 32000},
    {"mistral-7b", 32, 4096, 32, 128, 8, 14336, 32000},
};

static int parse_int(const char *opt, const char *s, long long min, long long *v)
{
    char *end;

    errno = 0;
    *v = strtoll(s, &end, 10);
    if (errno || end == s || *end || *v < min) {
        fprintf(stderr, "zc_plan: %s: '%s' is not an integer >= %lld\n", opt, s, min);
        return -1;
    }
    return 0;
}

static char *read_all(FILE *f)
{
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);

    while (buf) {
        size_t r = fread(buf + n, 1, cap - n - 1, f);

        n += r;
        if (r == 0)
            break;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap * 2);

            if (!b) {
                free(buf);
                return NULL;
            }
            buf = b;
            cap *= 2;
        }
    }
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* The fill step's cuts (zc_plan_create(3)), one line per cut sequence. */
static void print_cuts(zc_plan_h plan, const zc_plan_info_t *in)
{
    if (!(in->flags & ZC_PLAN_CUT))
        return;
    printf("\n# fill step: sequences cut to use leftover room (rank:tokens above)\n");
    for (size_t s = 0; s < in->nseqs; s++) {
        zc_plan_seq_t q;
        zc_plan_ring_t ring;

        zc_plan_seq(plan, s, &q);
        if (!q.cut || zc_plan_ring(plan, q.ring, &ring) != ZC_OK)
            continue;
        printf("seq %zu (%lld tokens) over %d devices of %d node%s:", s, (long long)q.length,
               ring.nranks, ring.nnodes, ring.nnodes > 1 ? "s" : "");
        if (q.cut & ZC_PLAN_SEQ_UNEVEN)
            printf(" its ring's even split had no room, poured into the %s with most room;",
                   ring.nnodes > 1 ? "nodes" : "devices");
        if (q.cut & ZC_PLAN_SEQ_CUT_NODES)
            printf(" fit whole in no node's leftover room, cut over consecutive nodes;");
        if (q.cut & ZC_PLAN_SEQ_CUT_DEVICES)
            printf(" fit whole in no device's leftover room, cut over consecutive devices;");
        printf("\n");
    }
}

static void print_text(zc_plan_h plan, const zc_plan_info_t *in)
{
    const zc_plan_transfer_t *t;
    size_t nt;

    char mask[64];

    mask_text(in, mask, sizeof(mask));
    printf("# plan: %d nodes x %d GPUs, capacity %lld tokens/GPU, %zu sequences, %lld tokens, "
           "%s mask\n", in->nnodes, in->gpus_per_node, (long long)in->capacity, in->nseqs,
           (long long)in->total_tokens, mask);
    printf("# thresholds: s1 = %lld%s%s\n", (long long)in->s1,
           in->flags & ZC_PLAN_CUT ? "  (fill step: some sequences cut, see below)" : "",
           in->flags & ZC_PLAN_EVEN_SPLIT ? "  (even split requested)" : "");
    printf("\n%-6s %12s %10s %14s\n", "node", "tokens", "s0", "attn pairs");
    for (int n = 0; n < in->nnodes; n++) {
        int64_t tok = 0, s0 = 0;
        double pairs = 0;

        for (int d = 0; d < in->gpus_per_node; d++) {
            zc_plan_rank_t rk;

            zc_plan_rank(plan, n * in->gpus_per_node + d, &rk);
            tok += rk.tokens;
            pairs += rk.attn_pairs;
            s0 = rk.s0;
        }
        printf("%-6d %12lld %10lld %14.4g\n", n, (long long)tok, (long long)s0, pairs);
    }
    printf("\n%-6s %-5s %10s %10s %14s  %s\n", "rank", "node", "tokens", "linear", "attn pairs",
           "zones (inter/intra/local pieces)");
    for (int r = 0; r < in->nranks; r++) {
        zc_plan_rank_t rk;
        const zc_plan_piece_t *p;
        size_t np, z[3] = {0, 0, 0};

        zc_plan_rank(plan, r, &rk);
        zc_plan_rank_pieces(plan, r, &p, &np);
        for (size_t k = 0; k < np; k++)
            z[p[k].zone]++;
        printf("%-6d %-5d %10lld %10lld %14.4g  %zu/%zu/%zu\n", r, rk.node,
               (long long)rk.tokens, (long long)rk.linear_tokens, rk.attn_pairs, z[2], z[1], z[0]);
    }
    printf("\n%-6s %10s %-6s %6s %-10s  %s\n", "seq", "length", "zone", "ring", "layout",
           "ranks (ring order)");
    for (size_t s = 0; s < in->nseqs; s++) {
        zc_plan_seq_t q;
        zc_plan_ring_t ring;
        zc_ring_layout_t layout;

        zc_plan_seq(plan, s, &q);
        printf("%-6zu %10lld %-6s %6d ", s, (long long)q.length, zone_name[q.zone], q.ring);
        if (q.ring < 0) {
            printf("%-10s  %d\n", "-", q.rank);
            continue;
        }
        zc_plan_ring(plan, q.ring, &ring);
        zc_plan_ring_layout(plan, q.ring, &layout);
        printf("%-10s  ", layout_name[layout]);
        for (int i = 0; i < ring.nranks && i < 16; i++)
            if (q.cut)
                printf("%s%d:%lld", i ? "," : "", ring.ranks[i], (long long)ring.tokens[i]);
            else
                printf("%s%d", i ? "," : "", ring.ranks[i]);
        printf("%s\n", ring.nranks > 16 ? ",..." : "");
    }
    print_cuts(plan, in);
    printf("\n# routes of the inter-node hops: one slice per rail (zc_plan_hop_slice of the "
           "hop's bytes), send proxy -> receive proxy on that rail\n");
    for (int r = 0; r < in->nrings; r++) {
        const zc_plan_hop_t *h;
        size_t nh;

        zc_plan_ring_hops(plan, r, &h, &nh);
        for (size_t k = 0; k < nh; k++) {
            printf("ring %d: %d (node %d) -> %d (node %d): %d rails:", r, h[k].src_rank,
                   h[k].src_node, h[k].dst_rank, h[k].dst_node, h[k].x_send);
            for (int x = 0; x < h[k].x_send; x++)
                printf(" %d->%d", h[k].send_proxies[x], h[k].recv_proxies[x]);
            printf("\n");
        }
    }
    zc_plan_remap_transfers(plan, &t, &nt);
    printf("\n# remap: %zu transfers, objective %.6g (largest per-rank cost)\n", nt,
           in->remap_objective);
    for (size_t k = 0; k < nt; k++)
        printf("  %d -> %d: %lld tokens\n", t[k].from, t[k].to, (long long)t[k].tokens);
}

static void print_json(zc_plan_h plan, const zc_plan_info_t *in, const zc_plan_opts_t *opts,
                       const zc_cluster_t *cl, const zc_step_cost_t *cost)
{
    const zc_plan_transfer_t *t;
    size_t nt;

    printf("{\"cluster\": {\"nodes\": %d, \"gpus_per_node\": %d, \"capacity\": %lld, "
           "\"b_intra\": %.9g, \"b_inter\": %.9g, \"rails\": %d%s%s%s},\n", in->nnodes,
           in->gpus_per_node, (long long)in->capacity, opts->b_intra, opts->b_inter, opts->rails,
           cl ? ", \"name\": \"" : "",
           cl ? cl->name : "", cl ? "\"" : "");
    printf(" \"s1\": %lld, \"cut\": %s, \"window\": [%d, %d],\n \"sequences\": [",
           (long long)in->s1, in->flags & ZC_PLAN_CUT ? "true" : "false", in->window_left,
           in->window_right);
    for (size_t s = 0; s < in->nseqs; s++) {
        zc_plan_seq_t q;

        zc_plan_seq(plan, s, &q);
        printf("%s%lld", s ? ", " : "", (long long)q.length);
    }
    printf("],\n \"cuts\": [");
    for (size_t s = 0; s < in->nseqs; s++) {
        zc_plan_seq_t q;

        zc_plan_seq(plan, s, &q);
        printf("%s%u", s ? ", " : "", q.cut);
    }
    printf("],\n \"rings\": [");
    for (int r = 0; r < in->nrings; r++) {
        zc_plan_ring_t ring;
        zc_ring_layout_t layout;

        zc_plan_ring(plan, r, &ring);
        zc_plan_ring_layout(plan, r, &layout);
        printf("%s\n  {\"id\": %d, \"zone\": \"%s\", \"seq\": %zu, \"layout\": \"%s\", "
               "\"ranks\": [", r ? "," : "", r, zone_name[ring.zone], ring.seq,
               layout_name[layout]);
        for (int i = 0; i < ring.nranks; i++)
            printf("%s%d", i ? ", " : "", ring.ranks[i]);
        printf("], \"tokens\": [");
        for (int i = 0; i < ring.nranks; i++)
            printf("%s%lld", i ? ", " : "", (long long)ring.tokens[i]);
        printf("]}");
    }
    printf("],\n \"pieces\": [");
    for (int r = 0, first = 1; r < in->nranks; r++) {
        const zc_plan_piece_t *p;
        size_t np;

        zc_plan_rank_pieces(plan, r, &p, &np);
        for (size_t k = 0; k < np; k++, first = 0) {
            printf("%s\n  {\"seq\": %zu, \"rank\": %d, \"begin\": %lld, \"end\": %lld, "
                   "\"zone\": \"%s\", \"ring\": ", first ? "" : ",", p[k].seq, r,
                   (long long)p[k].begin, (long long)p[k].end, zone_name[p[k].zone]);
            if (p[k].ring < 0)
                printf("null, \"chunk\": null}");
            else
                printf("%d, \"chunk\": %d}", p[k].ring, p[k].chunk);
        }
    }
    printf("],\n \"remap\": {\"before\": [");
    for (int r = 0; r < in->nranks; r++) {
        zc_plan_rank_t rk;

        zc_plan_rank(plan, r, &rk);
        printf("%s%lld", r ? ", " : "", (long long)rk.tokens);
    }
    printf("], \"after\": [");
    for (int r = 0; r < in->nranks; r++) {
        zc_plan_rank_t rk;

        zc_plan_rank(plan, r, &rk);
        printf("%s%lld", r ? ", " : "", (long long)rk.linear_tokens);
    }
    zc_plan_remap_transfers(plan, &t, &nt);
    printf("],\n  \"transfers\": [");
    for (size_t k = 0; k < nt; k++)
        printf("%s{\"from\": %d, \"to\": %d, \"tokens\": %lld}", k ? ", " : "", t[k].from,
               t[k].to, (long long)t[k].tokens);
    printf("], \"objective\": %.9g}", in->remap_objective);
    if (cost)
        printf(",\n \"cost\": {\"attention\": %.6g, \"attn_fwd\": %.6g, \"attn_bwd\": %.6g, "
               "\"linear\": %.6g, \"remap\": %.6g, \"allreduce\": %.6g, \"optimizer\": %.6g, "
               "\"total\": %.6g}", cost->attn_fwd + cost->attn_bwd, cost->attn_fwd,
               cost->attn_bwd, cost->linear, cost->remap, cost->allreduce, cost->optimizer,
               cost->total);
    printf("}\n");
}

static int step_cost(zc_plan_h plan, const zc_cluster_t *cl, const zc_step_model_t *step,
                     zc_cost_method_t m, zc_step_cost_t *c)
{
    if (zc_plan_step_cost(plan, cl, step, m, c) != ZC_OK) {
        fprintf(stderr, "zc_plan: cost: %s\n", zc_get_last_error());
        return -1;
    }
    return 0;
}

/* The whole step per method, then the slowest ring of one layer. */
static int compare(zc_plan_h plan, const zc_plan_info_t *in, const zc_cluster_t *cl,
                   const zc_step_model_t *step)
{
    zc_step_cost_t base, c[ZC_COST_METHOD_COUNT];
    char mask[64];

    if (step_cost(plan, cl, step, ZC_COST_TE_CP, &base))
        return -1;
    mask_text(in, mask, sizeof(mask));
    printf("\n# modeled training step on %s (seconds): %.3g B parameters, %d layers, "
           "dK/dV %d bytes, baselines' CP group %d GPUs, %s mask\n", cl->name,
           base.params / 1e9, cl->layers, step->dkv_bytes, base.cp_size, mask);
    printf("%-18s %9s %9s %9s %9s %9s %9s %9s %8s\n", "method", "attn-fwd", "attn-bwd",
           "linear", "remap", "allreduce", "optimizer", "total", "speedup");
    for (int m = 0; m < ZC_COST_METHOD_COUNT; m++) {
        if (step_cost(plan, cl, step, (zc_cost_method_t)m, &c[m]))
            return -1;
        printf("%-18s %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %7.2fx\n",
               zc_cost_method_name(m), c[m].attn_fwd, c[m].attn_bwd, c[m].linear, c[m].remap,
               c[m].allreduce, c[m].optimizer, c[m].total, base.total / c[m].total);
    }
    printf("\n# one layer (ms): attention fwd + bwd; the slowest ring's rounds, a forward "
           "and a backward round, its inter-node hop's wire step; MB the layer's attention "
           "and remap move (fwd + bwd, all GPUs) inside nodes and between them\n");
    printf("%-18s %10s %7s %10s %10s %10s %10s %10s\n", "method", "attn/layer", "rounds",
           "fwd-round", "bwd-round", "hop-wire", "MB-intra", "MB-inter");
    for (int m = 0; m < ZC_COST_METHOD_COUNT; m++)
        printf("%-18s %10.3f %7d %10.3f %10.3f %10.3f %10.1f %10.1f\n", zc_cost_method_name(m),
               (c[m].attn_fwd + c[m].attn_bwd) / cl->layers * 1e3, c[m].rounds,
               c[m].round_fwd * 1e3, c[m].round_bwd * 1e3, c[m].hop_wire * 1e3,
               c[m].bytes_intra / cl->layers / 1e6, c[m].bytes_inter / cl->layers / 1e6);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"nodes", required_argument, NULL, 'N'},
        {"gpus-per-node", required_argument, NULL, 'P'},
        {"capacity", required_argument, NULL, 'L'},
        {"lengths", required_argument, NULL, 'l'},
        {"dataset", required_argument, NULL, 'd'},
        {"total", required_argument, NULL, 't'},
        {"seed", required_argument, NULL, 's'},
        {"cluster", required_argument, NULL, 'c'},
        {"rails", required_argument, NULL, 'R'},
        {"json", no_argument, NULL, 'j'},
        {"compare", no_argument, NULL, 'C'},
        {"model", required_argument, NULL, 'M'},
        {"dkv-bytes", required_argument, NULL, 'D'},
        {"cp-size", required_argument, NULL, 'G'},
        {"window", required_argument, NULL, 'W'},
        {"full", no_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long long nodes = 0, gpus = 0, cap = 0, total = 0, seed = 1, rails = 0, v;
    long long dkv_bytes = 0, cp_size = 0;
    const char *lengths_file = NULL, *cluster_file = NULL;
    int dataset = -1, json = 0, cmp = 0, opt, rc = 1, model = -1, masks = 0;
    int64_t *len = NULL;
    size_t n = 0;
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_cluster_t cl = ZC_CLUSTER_INITIALIZER;
    zc_step_model_t step;
    zc_step_cost_t cost;
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    zc_plan_h plan = NULL;
    char err[256];

    zc_step_defaults(&step);
    memset(&cost, 0, sizeof(cost));
    /* "-3" would read as an option: name it as the bad length it is */
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1] >= '0' && argv[i][1] <= '9' &&
            (i == 1 || argv[i - 1][0] != '-' || strchr(argv[i - 1], '=') ||
             strcmp(argv[i - 1], "--json") == 0 || strcmp(argv[i - 1], "--compare") == 0 ||
             strcmp(argv[i - 1], "--full") == 0)) {
            fprintf(stderr, "zc_plan: length: '%s' is negative\n", argv[i]);
            return 2;
        }
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'N': if (parse_int("--nodes", optarg, 1, &nodes)) return 2; break;
        case 'P': if (parse_int("--gpus-per-node", optarg, 1, &gpus)) return 2; break;
        case 'L': if (parse_int("--capacity", optarg, 1, &cap)) return 2; break;
        case 't': if (parse_int("--total", optarg, 1, &total)) return 2; break;
        case 's': if (parse_int("--seed", optarg, 0, &seed)) return 2; break;
        case 'l': lengths_file = optarg; break;
        case 'c': cluster_file = optarg; break;
        case 'R': if (parse_int("--rails", optarg, 1, &rails)) return 2; break;
        case 'j': json = 1; break;
        case 'C': cmp = 1; break;
        case 'D': if (parse_int("--dkv-bytes", optarg, 1, &dkv_bytes)) return 2; break;
        case 'G': if (parse_int("--cp-size", optarg, 1, &cp_size)) return 2; break;
        case 'W': if (parse_window(optarg, &opts)) return 2; masks++; break;
        case 'F':
            opts.flags |= ZC_PLAN_WINDOW;
            opts.window_left = opts.window_right = -1;
            masks++;
            break;
        case 'M':
            model = -1;
            for (size_t k = 0; k < sizeof(models) / sizeof(models[0]); k++)
                if (strcmp(optarg, models[k].name) == 0)
                    model = (int)k;
            if (model < 0) {
                fprintf(stderr, "zc_plan: --model: unknown '%s' (3b, 7b, mistral-7b)\n", optarg);
                return 2;
            }
            break;
        case 'd':
            dataset = zc_dataset_find(optarg);
            if (dataset < 0) {
                fprintf(stderr, "zc_plan: --dataset: unknown '%s' (arxiv, github, prolong64k)\n",
                        optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (masks > 1) {
        fprintf(stderr, "zc_plan: give the mask once: --window or --full\n");
        return 2;
    }
    if (!nodes || !gpus || !cap) {
        fprintf(stderr, "zc_plan: --nodes, --gpus-per-node and --capacity are required\n");
        usage(stderr);
        return 2;
    }
    if ((dataset >= 0) + (lengths_file != NULL) + (optind < argc) != 1) {
        fprintf(stderr, "zc_plan: give the lengths once: --lengths, --dataset or arguments\n");
        return 2;
    }
    if (dataset >= 0) {
        zc_rng_t rng = {(uint64_t)seed};

        if (!total) {
            fprintf(stderr, "zc_plan: --dataset needs --total TOKENS\n");
            return 2;
        }
        n = zc_dataset_sample(dataset, total, &rng, &len);
        if (n == 0) {
            fprintf(stderr, "zc_plan: --dataset: out of memory\n");
            return 1;
        }
    } else if (lengths_file) {
        FILE *f = strcmp(lengths_file, "-") ? fopen(lengths_file, "r") : stdin;
        char *text;

        if (!f) {
            fprintf(stderr, "zc_plan: --lengths: cannot open %s: %s\n", lengths_file,
                    strerror(errno));
            return 2;
        }
        text = read_all(f);
        if (f != stdin)
            fclose(f);
        if (!text || zc_lengths_parse(text, &len, &n, err, sizeof(err))) {
            fprintf(stderr, "zc_plan: %s: %s\n", lengths_file, text ? err : "out of memory");
            free(text);
            return 2;
        }
        free(text);
    } else {
        len = malloc((size_t)(argc - optind + 1) * sizeof(*len));
        if (!len) {
            fprintf(stderr, "zc_plan: out of memory\n");
            return 1;
        }
        for (int i = optind; i < argc; i++) {
            if (parse_int("length", argv[i], 0, &v)) {
                rc = 2;
                goto out;
            }
            len[n++] = v;
        }
    }
    if (!cluster_file && (model >= 0 || dkv_bytes || cp_size)) {
        fprintf(stderr, "zc_plan: --model, --dkv-bytes and --cp-size need --cluster FILE\n");
        rc = 2;
        goto out;
    }
    if (cluster_file) {
        if (zc_cluster_load_step(cluster_file, &cl, &step) != ZC_OK) {
            fprintf(stderr, "zc_plan: --cluster: %s\n", zc_get_last_error());
            goto out;
        }
        if (cl.gpus_per_node != gpus) {
            fprintf(stderr, "zc_plan: --cluster %s has %d GPUs per node, --gpus-per-node is %lld\n",
                    cluster_file, cl.gpus_per_node, gpus);
            goto out;
        }
        /* remap costs per token: intra link, and a GPU's share of the NICs */
        /* the plan's hops split over the cluster's NICs, as the runtime's
         * routes do over the communicator's rails */
        if (rails && rails != cl.nics_per_node) {
            fprintf(stderr, "zc_plan: --rails %lld, but --cluster %s has %d NICs per node\n",
                    rails, cluster_file, cl.nics_per_node);
            goto out;
        }
        rails = cl.nics_per_node;
        if (model >= 0) {
            cl.layers = models[model].layers;
            cl.hidden = models[model].hidden;
            cl.heads = models[model].heads;
            cl.head_dim = models[model].head_dim;
            cl.kv_heads = models[model].kv_heads;
            cl.ffn_hidden = models[model].ffn_hidden;
            step.vocab = models[model].vocab;
        }
        if (dkv_bytes)
            step.dkv_bytes = dkv_bytes > INT_MAX ? INT_MAX : (int)dkv_bytes;
        if (cp_size)
            step.cp_max = cp_size > INT_MAX ? INT_MAX : (int)cp_size;
        opts.b_intra = 1.0 / (cl.intra_gbytes * 1e9);
        opts.b_inter = 1.0 / (cl.nic_gbps * 1e9 / 8 * cl.nics_per_node / cl.gpus_per_node);
        if (opts.b_inter < opts.b_intra)
            opts.b_inter = opts.b_intra;
    } else if (cmp) {
        fprintf(stderr, "zc_plan: --compare needs --cluster FILE\n");
        goto out;
    }
    opts.rails = rails > INT_MAX ? INT_MAX : (int)rails; /* zc_plan_create checks the range */
    if (zc_plan_create((int)nodes, (int)gpus, cap, len, n, &opts, &plan) != ZC_OK) {
        fprintf(stderr, "zc_plan: %s\n", zc_get_last_error());
        goto out;
    }
    if (zc_plan_check(plan) != ZC_OK) {
        fprintf(stderr, "zc_plan: plan check failed: %s\n", zc_get_last_error());
        goto out;
    }
    /* a cluster whose NICs differ in rate: its routed hops cut by them */
    if (cluster_file && cl.nic_rates[0] > 0 &&
        zc_plan_set_rail_rates(plan, cl.nic_rates, cl.nics_per_node) != ZC_OK) {
        fprintf(stderr, "zc_plan: --cluster %s: nic_rates: %s\n", cluster_file,
                zc_get_last_error());
        goto out;
    }
    zc_plan_info(plan, &info);
    if (cluster_file && zc_plan_step_cost(plan, &cl, &step, ZC_COST_ZEPPELIN, &cost) != ZC_OK) {
        fprintf(stderr, "zc_plan: cost: %s\n", zc_get_last_error());
        goto out;
    }
    if (json) {
        print_json(plan, &info, &opts, cluster_file ? &cl : NULL, cluster_file ? &cost : NULL);
    } else {
        print_text(plan, &info);
        if (cluster_file && !cmp)
            printf("\n# modeled training step on %s: attention %.4f s (fwd %.4f, bwd %.4f), "
                   "linear %.4f s, remap %.4f s, all-reduce %.4f s, optimizer %.4f s, "
                   "total %.4f s\n", cl.name, cost.attn_fwd + cost.attn_bwd, cost.attn_fwd,
                   cost.attn_bwd, cost.linear, cost.remap, cost.allreduce, cost.optimizer,
                   cost.total);
    }
    if (cmp && !json && compare(plan, &info, &cl, &step))
        goto out;
    rc = 0;
out:
    zc_plan_destroy(plan);
    free(len);
    return rc;
}
