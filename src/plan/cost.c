/* Cost model: the modeled time of one training iteration (forward and
 * backward, all layers) of a batch laid out by a plan or by a baseline.
 *
 *  - attention: causal (query, key) pairs x 4 * heads * head_dim FLOPs
 *    forward, 2.5x that backward, at attn_tflops;
 *  - a ring of G ranks runs G rounds; each overlaps 1/G of a rank's pairs
 *    with sending its KV block (2 * kv_heads * head_dim * bytes per token)
 *    to the next rank; backward sends KV and dKV.  A round lasts
 *    max(compute, slowest hop); rings on a device run one after the other,
 *    inter, intra, then local (the attention engine's order);
 *  - a hop inside a node moves at intra_gbytes; a direct inter-node hop at
 *    one NIC's rate; a routed hop (the plan's hops, below
 *    ZC_ROUTED_MIN_BYTES direct as the runtime sends it) by Eq. (1) over
 *    exactly the routes the runtime takes (zc_plan_ring_hops): its bytes
 *    cut per rail by zc_route_slice, the slices whose send proxy is not the
 *    source dispatched over NVLink, each slice on its own rail's NIC (the
 *    rails run in parallel: the largest slice), the slices whose receive
 *    proxy is not the destination combined over NVLink;
 *  - linear modules: 2 * (4 * hidden * heads * head_dim + 3 * hidden *
 *    ffn_hidden) FLOPs per token forward, 3x with backward, at
 *    linear_tflops, on the busiest rank's tokens;
 *  - remap: the plan's transfer matrix priced in seconds (hidden * bytes
 *    per token; a rank's share of its node's NICs across nodes), four
 *    remaps per layer (forward and inverse, forward and backward pass).
 * The slowest device sets each phase's time; phases do not overlap. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/common/abi.h"
#include "src/common/env.h"
#include "src/plan/plan.h"
#include "src/plan/routing.h"
#include "src/common/status.h"

typedef struct {
    const zc_cluster_t *c;
    int ppn, nranks;
    double kv_bytes;        /* per token */
    double pair_flops;      /* forward, per (query, key) pair */
    double intra_bps, nic_bps;
    double *dev;            /* attention seconds per device, one layer */
    double *pairs;          /* scratch: causal pairs per ring position */
    int64_t *bounds;        /* scratch: 2G + 1 chunk bounds */
    int64_t *share;         /* scratch: tokens per ring position */
    double bytes_intra, bytes_inter;
} zc_pricer_t;

#define ZC_BWD_COMPUTE 2.5  /* backward attention FLOPs / forward */
#define ZC_BWD_COMM    2.0  /* backward ring moves KV and dKV */

static double zc_attn_seconds(const zc_pricer_t *pr, double pairs)
{
    return pairs * pr->pair_flops / (pr->c->attn_tflops * 1e12);
}

/* The busiest ring position's causal pairs (zigzag keeps them within a
 * few tokens' worth of each other). */
static double zc_ring_max_pairs(int64_t len, int g)
{
    double pairs = 0;

    for (int i = 0; i < g; i++) {
        double p = zc_zigzag_pairs(len, g, i);

        pairs = p > pairs ? p : pairs;
    }
    return pairs;
}

/* Seconds of one hop moving `bytes` from a to b: inside the node, direct,
 * or routed over `hop`'s slices and proxies (Eq. (1): dispatch, multi-NIC
 * transfer, combine, one after the other). */
static double zc_hop_seconds(zc_pricer_t *pr, int a, int b, int64_t bytes, const zc_plan_hop_t *hop)
{
    double dispatch = 0, wire = 0, combine = 0;

    if (a / pr->ppn == b / pr->ppn)
        return (double)bytes / pr->intra_bps;
    if (!hop || bytes < ZC_ROUTED_MIN_BYTES_DEFAULT)
        return (double)bytes / pr->nic_bps;
    for (int k = 0; k < hop->x_send; k++) {
        int64_t off, len;

        zc_route_slice(bytes, hop->x_send, k, &off, &len);
        dispatch += hop->send_proxies[k] != a ? (double)len : 0;
        combine += hop->recv_proxies[k] != b ? (double)len : 0;
        wire = (double)len > wire ? (double)len : wire;
    }
    return (dispatch + combine) / pr->intra_bps + wire / pr->nic_bps;
}

/* Price one ring of G ranks holding share[i] tokens each (even or cut by
 * the fill step); `hops` are its routed inter-node hops in ring order, NULL
 * for direct transfers.  A round lasts as long as its busiest position:
 * 1/G of the largest position's pairs (a cut ring's uneven shares cost
 * here), or the slowest hop. */
static void zc_price_ring(zc_pricer_t *pr, int g, const int *ranks, const int64_t *share,
                          const zc_plan_hop_t *hops)
{
    double comm = 0, cr, t, most = 0;
    size_t h = 0;

    zc_ring_pairs(share, g, pr->bounds, pr->pairs);
    for (int i = 0; i < g; i++)
        most = pr->pairs[i] > most ? pr->pairs[i] : most;
    cr = zc_attn_seconds(pr, most) / g;
    for (int i = 0; i < g && g > 1; i++) {
        int a = ranks[i], b = ranks[(i + 1) % g];
        /* whole bytes: the runtime slices bytes (ring attention's routed
         * calls are ZC_BYTE), so the cost model does too */
        int64_t nbytes = share[i] * (int64_t)pr->kv_bytes;
        double bytes = (double)nbytes, s;
        int inter = a / pr->ppn != b / pr->ppn;

        s = zc_hop_seconds(pr, a, b, nbytes, inter && hops ? &hops[h] : NULL);
        h += inter;
        comm = s > comm ? s : comm;
        *(inter ? &pr->bytes_inter : &pr->bytes_intra) += bytes * (g - 1) * (1 + ZC_BWD_COMM);
    }
    t = cr + (g - 1) * (cr > comm ? cr : comm);
    t += ZC_BWD_COMPUTE * cr +
         (g - 1) * (ZC_BWD_COMPUTE * cr > ZC_BWD_COMM * comm ? ZC_BWD_COMPUTE * cr
                                                             : ZC_BWD_COMM * comm);
    for (int i = 0; i < g; i++)
        pr->dev[ranks[i]] += t;
}

static void zc_price_local(zc_pricer_t *pr, int64_t len, int rank)
{
    pr->dev[rank] += (1 + ZC_BWD_COMPUTE) * zc_attn_seconds(pr, zc_causal_pairs(0, len));
}

/* Attention of a plan's layout: its rings (routed or direct) and locals. */
static void zc_price_plan_attention(zc_pricer_t *pr, const struct zc_plan *plan, int routed)
{
    for (int r = 0; r < plan->nrings; r++) {
        const zc_plan_ring_t *ring = &plan->rings[r];

        zc_price_ring(pr, ring->nranks, ring->ranks, ring->tokens,
                      routed ? plan->hops + plan->hop_off[r] : NULL);
    }
    for (size_t s = 0; s < plan->nseqs; s++)
        if (plan->seq_ring[s] < 0 && plan->lengths[s] > 0)
            zc_price_local(pr, plan->lengths[s], plan->part.seqs[s].ranks[0]);
}

/* LLaMA CP: even split, KV all-gathered (and dKV reduce-scattered) over all
 * ranks before attention, not overlapped.  NCCL's all-gather uses every
 * NIC of a node: the (N-1)/N of the KV a node lacks enters over all its NICs,
 * the (P-1)/P its devices lack inside the node over NVLink. */
static void zc_price_llama(zc_pricer_t *pr, const struct zc_plan *plan)
{
    int g = pr->nranks, N = plan->nnodes, P = plan->ppn;

    for (size_t s = 0; s < plan->nseqs; s++) {
        int64_t len = plan->lengths[s];
        double kv = (double)len * pr->kv_bytes, t;
        double inter = kv * (N - 1) / N / (pr->nic_bps * pr->c->nics_per_node);
        double intra = kv * (P - 1) / P / pr->intra_bps;

        t = (1 + ZC_BWD_COMPUTE) * zc_attn_seconds(pr, zc_ring_max_pairs(len, g)) +
            2 * (inter > intra ? inter : intra);
        for (int r = 0; r < g; r++)
            pr->dev[r] += t;
        pr->bytes_inter += 2 * kv * (N - 1);
        pr->bytes_intra += 2 * kv * (P - 1) / P * g;
    }
}

/* Hybrid DP (ByteScale-like): a sequence longer than one device's capacity
 * gets a ring CP group of ceil(len / L) consecutive ranks (direct hops);
 * shorter ones run data-parallel, whole, on the device with the least
 * attention time so far (FLOP balance, longest first).  Writes tokens. */
static zc_status_t zc_price_hybrid(zc_pricer_t *pr, const struct zc_plan *plan,
                                   int64_t *tokens)
{
    size_t *order = malloc((plan->nseqs ? plan->nseqs : 1) * sizeof(*order));
    int *ranks = malloc((size_t)pr->nranks * sizeof(*ranks));
    int cursor = 0;

    if (!order || !ranks) {
        free(order);
        free(ranks);
        return zc_error(ZC_ERR_NO_MEMORY, "cost: cannot allocate the hybrid layout");
    }
    for (size_t s = 0; s < plan->nseqs; s++)
        order[s] = s;
    /* longest first, stable (insertion sort is fine for a cost estimate) */
    for (size_t i = 1; i < plan->nseqs; i++)
        for (size_t j = i; j > 0 && plan->lengths[order[j - 1]] < plan->lengths[order[j]]; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (size_t k = 0; k < plan->nseqs; k++) {
        int64_t len = plan->lengths[order[k]];

        if (len > plan->capacity) {
            int g = (int)((len + plan->capacity - 1) / plan->capacity);

            for (int i = 0; i < g; i++) {
                ranks[i] = (cursor + i) % pr->nranks;
                pr->share[i] = zc_zigzag_share(len, g, i);
                tokens[ranks[i]] += pr->share[i];
            }
            cursor = (cursor + g) % pr->nranks;
            zc_price_ring(pr, g, ranks, pr->share, NULL);
        } else if (len > 0) {
            int best = 0;

            for (int r = 1; r < pr->nranks; r++)
                if (pr->dev[r] < pr->dev[best])
                    best = r;
            zc_price_local(pr, len, best);
            tokens[best] += len;
        }
    }
    free(order);
    free(ranks);
    return ZC_OK;
}

const char *zc_cost_method_name(zc_cost_method_t method)
{
    static const char *names[ZC_COST_METHOD_COUNT] = {
        "te-cp", "llama-cp", "hybrid-dp", "te-cp+routing", "zeppelin-no-remap", "zeppelin",
    };

    return (unsigned)method < ZC_COST_METHOD_COUNT ? names[method] : "unknown";
}

/* Read the caller's cluster (its size's worth, the defaults past it) into
 * *c and check it. */
static zc_status_t zc_cluster_check(const zc_cluster_t *user, zc_cluster_t *c, int ppn,
                                    int rails)
{
    static const zc_cluster_t defaults = ZC_CLUSTER_INITIALIZER;

    *c = defaults;
    ZC_ARG_CHECK(user != NULL, "cluster: NULL");
    ZC_CHECK(zc_abi_read(c, sizeof(*c), sizeof(*c), user, user->size, ZC_CLUSTER_SIZE_V1,
                         "cluster", "ZC_CLUSTER_INITIALIZER or zc_cluster_load"));
    c->size = sizeof(*c);
    ZC_ARG_CHECK(c->gpus_per_node == ppn, "cluster: %d GPUs per node, the plan has %d",
                 c->gpus_per_node, ppn);
    ZC_ARG_CHECK(c->nics_per_node >= 1 && c->nic_gbps > 0 && c->intra_gbytes > 0 &&
                 c->attn_tflops > 0 && c->linear_tflops > 0 && c->layers >= 1 &&
                 c->hidden >= 1 && c->heads >= 1 && c->head_dim >= 1 && c->kv_heads >= 1 &&
                 c->ffn_hidden >= 1 && c->bytes_per_elem >= 1,
                 "cluster: every rate and model dimension must be positive");
    /* The plan's hops are cut per rail; priced on other NICs they would be
     * routes that never run. */
    ZC_ARG_CHECK(c->nics_per_node == rails,
                 "cluster: %d NICs per node, the plan routes over %d rails (create it with "
                 "zc_plan_opts_t.rails = %d)", c->nics_per_node, rails, c->nics_per_node);
    return ZC_OK;
}

zc_status_t zc_plan_cost(zc_plan_h plan, const zc_cluster_t *user_cluster,
                         zc_cost_method_t method, zc_cost_t *user_cost)
{
    zc_cluster_t cluster;
    const zc_cluster_t *c = &cluster;
    zc_cost_t cost_local = ZC_COST_INITIALIZER, *cost = &cost_local;
    zc_pricer_t pr;
    zc_plan_h even = NULL;
    const struct zc_plan *layout = plan;
    int64_t *tokens = NULL, busiest = 0;
    double attn = 0, lin_flops, remap = 0;
    zc_status_t st = ZC_OK;

    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_CHECK(zc_cluster_check(user_cluster, &cluster, plan->ppn, plan->rails));
    ZC_ARG_CHECK((unsigned)method < ZC_COST_METHOD_COUNT, "method: %d is unknown", (int)method);
    ZC_ARG_CHECK(user_cost != NULL, "cost: NULL");
    ZC_CHECK(zc_abi_out_check(user_cost->size, ZC_COST_SIZE_V1, "cost", "ZC_COST_INITIALIZER"));
    memset(&pr, 0, sizeof(pr));
    pr.c = c;
    pr.ppn = plan->ppn;
    pr.nranks = plan->nranks;
    pr.kv_bytes = 2.0 * c->kv_heads * c->head_dim * c->bytes_per_elem;
    pr.pair_flops = 4.0 * c->heads * c->head_dim;
    pr.intra_bps = c->intra_gbytes * 1e9;
    pr.nic_bps = c->nic_gbps * 1e9 / 8;
    pr.dev = calloc((size_t)plan->nranks, sizeof(*pr.dev));
    pr.pairs = malloc((size_t)plan->nranks * sizeof(*pr.pairs));
    pr.bounds = malloc((2 * (size_t)plan->nranks + 1) * sizeof(*pr.bounds));
    pr.share = malloc((size_t)plan->nranks * sizeof(*pr.share));
    tokens = calloc((size_t)plan->nranks, sizeof(*tokens));
    if (!pr.dev || !pr.pairs || !pr.bounds || !pr.share || !tokens) {
        st = zc_error(ZC_ERR_NO_MEMORY, "cost: cannot allocate %d ranks", plan->nranks);
        goto out;
    }
    if (method == ZC_COST_TE_CP || method == ZC_COST_LLAMA_CP || method == ZC_COST_ROUTING) {
        zc_plan_opts_t opts = plan->opts;

        opts.flags |= ZC_PLAN_EVEN_SPLIT;
        ZC_CHECK_GOTO(zc_plan_create(plan->nnodes, plan->ppn, plan->capacity, plan->lengths,
                                     plan->nseqs, &opts, &even), st, out);
        layout = even;
    }
    switch (method) {
    case ZC_COST_TE_CP:
    case ZC_COST_ROUTING:
    case ZC_COST_PARTITION:
    case ZC_COST_ZEPPELIN:
        zc_price_plan_attention(&pr, layout, method != ZC_COST_TE_CP);
        memcpy(tokens, method == ZC_COST_ZEPPELIN ? layout->after : layout->before,
               (size_t)plan->nranks * sizeof(*tokens));
        break;
    case ZC_COST_LLAMA_CP:
        zc_price_llama(&pr, layout);
        memcpy(tokens, layout->before, (size_t)plan->nranks * sizeof(*tokens));
        break;
    case ZC_COST_HYBRID_DP:
        ZC_CHECK_GOTO(zc_price_hybrid(&pr, plan, tokens), st, out);
        break;
    default:
        break;
    }
    for (int r = 0; r < plan->nranks; r++) {
        attn = pr.dev[r] > attn ? pr.dev[r] : attn;
        busiest = tokens[r] > busiest ? tokens[r] : busiest;
    }
    lin_flops = 2.0 * (4.0 * c->hidden * (double)c->heads * c->head_dim +
                       3.0 * c->hidden * (double)c->ffn_hidden);
    if (method == ZC_COST_ZEPPELIN) {
        double tok_bytes = (double)c->hidden * c->bytes_per_elem;
        double nic_share = pr.nic_bps * c->nics_per_node / plan->ppn;

        ZC_CHECK_GOTO(zc_remap_objective(plan->nranks, plan->ppn, plan->transfers,
                                         plan->ntransfers, tok_bytes / pr.intra_bps,
                                         tok_bytes / nic_share, &remap), st, out);
        remap *= 4.0 * c->layers;
        for (size_t t = 0; t < plan->ntransfers; t++)
            *(plan->transfers[t].from / plan->ppn == plan->transfers[t].to / plan->ppn
                  ? &pr.bytes_intra : &pr.bytes_inter) +=
                4.0 * (double)plan->transfers[t].tokens * tok_bytes;
    }
    cost->attention = attn * c->layers;
    cost->linear = 3.0 * lin_flops * (double)busiest * c->layers / (c->linear_tflops * 1e12);
    cost->remap = remap;
    cost->total = cost->attention + cost->linear + cost->remap;
    cost->bytes_intra = pr.bytes_intra * c->layers;
    cost->bytes_inter = pr.bytes_inter * c->layers;
    zc_abi_write(user_cost, cost, sizeof(*cost));
out:
    zc_plan_destroy(even);
    free(pr.dev);
    free(pr.pairs);
    free(pr.bounds);
    free(pr.share);
    free(tokens);
    return st;
}
