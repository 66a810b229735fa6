/* Cost model: the modeled time of one training step (forward and backward,
 * all layers, gradient all-reduce, optimizer) of a batch laid out by a plan
 * or by a baseline.  zc_plan_step_cost (src/plan/cost.h) gives every term,
 * zc_plan_cost(3) the public sum of attention, linear and remap.
 *
 *  - attention: the (query, key) pairs the plan's mask leaves visible
 *    (causal by default; src/plan/mask_cost.c) x 4 * heads * head_dim FLOPs
 *    forward, 2.5x that backward, at attn_tflops;
 *  - a ring of G ranks runs G rounds; each overlaps 1/G of a rank's pairs
 *    with sending its KV block (2 * kv_heads * head_dim * bytes_per_elem per
 *    token) to the next rank.  Zeppelin's rings (the partition and zeppelin
 *    methods) run only the rounds their mask needs: reach + 1 of them
 *    (zc_ring_reach: 1 + ceil((w - 1) / c) under a sliding window of w on a
 *    contiguous ring of c-token positions, G under causal or full), every
 *    block passing reach hops; the baselines run all G rounds, masked, as
 *    Transformer Engine does.  Backward sends KV and then dK/dV (as many
 *    hops back), whose elements are dkv_bytes wide (libzcomm's engine
 *    accumulates and sends them in fp32: 4; Transformer Engine sends them
 *    in the activations' dtype).  A round lasts max(compute, slowest hop); rings on a device run
 *    one after the other, inter, intra, then local (the engine's order);
 *  - a hop inside a node moves at intra_gbytes; a direct inter-node hop at
 *    one NIC's rate; a routed hop (the plan's hops, below
 *    ZC_ROUTED_MIN_BYTES direct as the runtime sends it) by Eq. (1) over
 *    exactly the routes the runtime takes (zc_plan_ring_hops): its bytes
 *    cut per rail by zc_route_slice (in proportion to the plan's rail
 *    rates, equal without), the slices whose send proxy is not the source
 *    dispatched over NVLink, each slice on its own rail's NIC at that NIC's
 *    rate (the rails run in parallel: the slowest slice), the slices whose receive
 *    proxy is not the destination combined over NVLink; that sum divided by
 *    the routed efficiency (measured: Eq. (1) / the hop's real time);
 *  - the baselines (TE CP, LLaMA CP, TE CP + routing) run context-parallel
 *    groups of at most cp_max GPUs (whole nodes, enough for the longest
 *    sequence), the batch's sequences packed longest first into the group
 *    with the fewest tokens, data-parallel over the groups;
 *  - LLaMA CP all-gathers the group's whole KV before attention and, in the
 *    backward, gathers it again and reduce-scatters dK/dV, none overlapped,
 *    as NCCL's ring runs them: every link of the ring carries (g-1)/g of
 *    the data, one ring per NIC, so a node's NICs together move (g-1)/g of
 *    it (not the (N-1)/N a hierarchical gather would);
 *  - linear modules: 2 * (hidden * head_dim * (2 heads + 2 kv_heads) + 3 *
 *    hidden * ffn_hidden) FLOPs per token and layer forward, plus the
 *    output head's 2 * vocab * hidden, 3x with backward, at linear_tflops,
 *    on the busiest rank's tokens;
 *  - remap: the plan's transfer matrix priced in seconds (hidden * bytes
 *    per token; a rank's share of the sum of its node's NIC rates across
 *    nodes), four
 *    remaps per layer (forward and inverse, forward and backward pass);
 *  - gradient all-reduce over every rank (data and context parallel):
 *    2 (n-1)/n * params * grad_bytes over a node's NICs together (NCCL's
 *    rings, one per NIC), or over intra_gbytes on one node;
 *  - optimizer: ZC_ADAM_BYTES per parameter at hbm_gbytes, every rank.
 * The slowest device sets each phase's time; phases do not overlap. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/common/abi.h"
#include "src/common/env.h"
#include "src/plan/cost.h"
#include "src/plan/plan.h"
#include "src/plan/routing.h"
#include "src/common/status.h"

typedef struct {
    const zc_cluster_t *c;
    const zc_step_model_t *step;
    zc_attn_mask_t mask;    /* the plan's */
    int skip;               /* rings run only the rounds their mask needs */
    int ppn;
    double kv_bytes;        /* per token, in the activations' dtype */
    double dkv_ratio;       /* dK/dV bytes per KV byte */
    double pair_flops;      /* forward, per (query, key) pair */
    double intra_bps, nic_bps;
    double rail_bps[ZC_PLAN_MAX_RAILS]; /* NIC k's rate (cluster nic_rates, else nic_gbps) */
    const uint32_t *rail_weight;        /* the plan's: how its hops are sliced */
    double *fwd, *bwd;      /* attention seconds per device, one layer (of the group priced) */
    double *pairs;          /* scratch: visible pairs per ring position */
    int64_t *bounds;        /* scratch: 2G + 1 chunk bounds */
    int64_t *share;         /* scratch: tokens per ring position */
    double bytes_intra, bytes_inter;
    double ring_t;          /* the slowest ring so far (fwd + bwd) and its rounds */
    int rounds;
    double round_fwd, round_bwd, hop_wire;
} zc_pricer_t;

#define ZC_BWD_COMPUTE 2.5  /* backward attention FLOPs / forward */

static double zc_attn_seconds(const zc_pricer_t *pr, double pairs)
{
    return pairs * pr->pair_flops / (pr->c->attn_tflops * 1e12);
}

static double zc_max(double a, double b)
{
    return a > b ? a : b;
}

/* The busiest position's pairs of a ring in `layout`. */
static double zc_ring_most(zc_pricer_t *pr, const int64_t *share, int g, zc_ring_layout_t layout)
{
    double most = 0;

    zc_ring_pairs(pr->mask, share, g, layout, pr->bounds, pr->pairs);
    for (int i = 0; i < g; i++)
        most = zc_max(most, pr->pairs[i]);
    return most;
}

/* The busiest position's pairs of an even zigzag ring of a sequence. */
static double zc_even_ring_most(zc_pricer_t *pr, int64_t len, int g)
{
    for (int i = 0; i < g; i++)
        pr->share[i] = zc_zigzag_share(len, g, i);
    return zc_ring_most(pr, pr->share, g, ZC_RING_LAYOUT_ZIGZAG);
}

/* Seconds of one hop moving `bytes` from a to b: inside the node, direct,
 * or routed over `hop`'s slices and proxies (Eq. (1): dispatch, multi-NIC
 * transfer, combine, one after the other, over the routed efficiency).
 * *wire: the inter-node step alone, the largest slice on its NIC. */
static double zc_hop_seconds(zc_pricer_t *pr, int a, int b, int64_t bytes,
                             const zc_plan_hop_t *hop, double *wire_out)
{
    double dispatch = 0, wire = 0, combine = 0;

    *wire_out = 0;
    if (a / pr->ppn == b / pr->ppn)
        return (double)bytes / pr->intra_bps;
    if (!hop || bytes < ZC_ROUTED_MIN_BYTES_DEFAULT)
        return *wire_out = (double)bytes / pr->nic_bps;
    for (int k = 0; k < hop->x_send; k++) {
        int64_t off, len;

        zc_route_slice(bytes, hop->x_send, pr->rail_weight, k, &off, &len);
        dispatch += hop->send_proxies[k] != a ? (double)len : 0;
        combine += hop->recv_proxies[k] != b ? (double)len : 0;
        wire = zc_max(wire, (double)len / pr->rail_bps[k]);
    }
    *wire_out = wire;
    return ((dispatch + combine) / pr->intra_bps + wire) / pr->step->routed_efficiency;
}

/* Price one ring of G ranks holding share[i] tokens each (even or cut by
 * the fill step) in `layout`; `hops` are its routed inter-node hops in ring
 * order, NULL for direct transfers.  It runs n rounds (G, or reach + 1
 * where rings skip what the mask hides).  A round lasts as long as its
 * busiest position: 1/n of the largest position's pairs (a cut ring's
 * uneven shares cost here), or the slowest hop; backward's hop is KV then
 * dK/dV, two calls on the same links. */
static void zc_price_ring(zc_pricer_t *pr, int g, const int *ranks, const int64_t *share,
                          zc_ring_layout_t layout, const zc_plan_hop_t *hops)
{
    double comm = 0, bcomm = 0, wire = 0, cr, bcr, rf, rb;
    int n = pr->skip ? zc_ring_reach(pr->mask, share, g, layout, pr->bounds) + 1 : g;
    size_t h = 0;

    cr = zc_attn_seconds(pr, zc_ring_most(pr, share, g, layout)) / n;
    bcr = ZC_BWD_COMPUTE * cr;
    for (int i = 0; i < g && g > 1; i++) {
        int a = ranks[i], b = ranks[(i + 1) % g];
        /* whole bytes: the runtime slices bytes (ring attention's routed
         * calls are ZC_BYTE), so the cost model does too */
        int64_t nbytes = share[i] * (int64_t)pr->kv_bytes;
        int64_t dbytes = (int64_t)((double)nbytes * pr->dkv_ratio);
        int inter = a / pr->ppn != b / pr->ppn;
        const zc_plan_hop_t *hop = inter && hops ? &hops[h] : NULL;
        double w, wd, s = zc_hop_seconds(pr, a, b, nbytes, hop, &w);

        h += inter;
        comm = zc_max(comm, s);
        bcomm = zc_max(bcomm, s + zc_hop_seconds(pr, a, b, dbytes, hop, &wd));
        wire = zc_max(wire, w);
        *(inter ? &pr->bytes_inter : &pr->bytes_intra) +=
            (double)(n - 1) * (2.0 * (double)nbytes + (double)dbytes);
    }
    rf = n > 1 ? zc_max(cr, comm) : cr;
    rb = n > 1 ? zc_max(bcr, bcomm) : bcr;
    for (int i = 0; i < g; i++) {
        pr->fwd[ranks[i]] += cr + (n - 1) * rf;
        pr->bwd[ranks[i]] += bcr + (n - 1) * rb;
    }
    if (g > 1 && cr + bcr + (n - 1) * (rf + rb) > pr->ring_t) {
        pr->ring_t = cr + bcr + (n - 1) * (rf + rb);
        pr->rounds = n;
        pr->round_fwd = rf;
        pr->round_bwd = rb;
        pr->hop_wire = wire;
    }
}

static void zc_price_local(zc_pricer_t *pr, int64_t len, int rank)
{
    double t = zc_attn_seconds(pr, (double)zc_mask_pairs(pr->mask, len, 0, len));

    pr->fwd[rank] += t;
    pr->bwd[rank] += ZC_BWD_COMPUTE * t;
}

/* Attention of a plan's layout: its rings (routed or direct) and locals. */
static void zc_price_plan_attention(zc_pricer_t *pr, const struct zc_plan *plan, int routed)
{
    for (int r = 0; r < plan->nrings; r++) {
        const zc_plan_ring_t *ring = &plan->rings[r];

        zc_price_ring(pr, ring->nranks, ring->ranks, ring->tokens,
                      plan->part.seqs[ring->seq].layout,
                      routed ? plan->hops + plan->hop_off[r] : NULL);
    }
    for (size_t s = 0; s < plan->nseqs; s++)
        if (plan->seq_ring[s] < 0 && plan->lengths[s] > 0)
            zc_price_local(pr, plan->lengths[s], plan->part.seqs[s].ranks[0]);
}

/* LLaMA CP on an even-split plan: the whole KV all-gathered before
 * attention; backward gathers it again and reduce-scatters dK/dV.  NCCL's
 * ring over the plan's g ranks: each link carries (g-1)/g of the data, one
 * ring per NIC, so it takes (g-1)/g of the bytes over a node's NICs
 * together (over NVLink on one node). */
static void zc_price_llama(zc_pricer_t *pr, const struct zc_plan *plan)
{
    int g = plan->nranks, N = plan->nnodes;
    double kv = 0, compute = 0, gather, bw, moved;

    for (size_t s = 0; s < plan->nseqs; s++) {
        kv += (double)plan->lengths[s] * pr->kv_bytes;
        compute += zc_attn_seconds(pr, zc_even_ring_most(pr, plan->lengths[s], g));
    }
    bw = N > 1 ? pr->nic_bps * pr->c->nics_per_node : pr->intra_bps;
    gather = kv * (g - 1) / g / bw;
    for (int r = 0; r < g; r++) {
        pr->fwd[r] += compute + gather;
        pr->bwd[r] += ZC_BWD_COMPUTE * compute + gather * (1 + pr->dkv_ratio);
    }
    /* every one of the ring's g links carries (g-1)/g of each collective;
     * N of them cross nodes */
    moved = kv * (g - 1) / g * (2 + pr->dkv_ratio);
    pr->bytes_inter += N > 1 ? moved * N : 0;
    pr->bytes_intra += moved * (N > 1 ? g - N : g);
}

/* Hybrid DP (ByteScale-like): a sequence longer than one device's capacity
 * gets a ring CP group of ceil(len / L) consecutive ranks (direct hops);
 * shorter ones run data-parallel, whole, on the device with the least
 * attention time so far (FLOP balance, longest first).  Writes tokens. */
static zc_status_t zc_price_hybrid(zc_pricer_t *pr, const struct zc_plan *plan,
                                   int64_t *tokens)
{
    size_t *order = malloc((plan->nseqs ? plan->nseqs : 1) * sizeof(*order));
    int *ranks = malloc((size_t)plan->nranks * sizeof(*ranks));
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
                ranks[i] = (cursor + i) % plan->nranks;
                pr->share[i] = zc_zigzag_share(len, g, i);
                tokens[ranks[i]] += pr->share[i];
            }
            cursor = (cursor + g) % plan->nranks;
            zc_price_ring(pr, g, ranks, pr->share, ZC_RING_LAYOUT_ZIGZAG, NULL);
        } else if (len > 0) {
            int best = 0;

            for (int r = 1; r < plan->nranks; r++)
                if (pr->fwd[r] + pr->bwd[r] < pr->fwd[best] + pr->bwd[best])
                    best = r;
            zc_price_local(pr, len, best);
            tokens[best] += len;
        }
    }
    free(order);
    free(ranks);
    return ZC_OK;
}

/* Pack the batch into nranks / cp groups of cp ranks: longest first, each
 * into the group with the fewest tokens that has room (cp * capacity).
 * group[s] is sequence s's group; returns 0 if some sequence fits none. */
static int zc_pack_groups(const struct zc_plan *plan, int cp, const size_t *order, int *group,
                          int64_t *load)
{
    int ngroups = plan->nranks / cp;
    int64_t room = (int64_t)cp * plan->capacity;

    memset(load, 0, (size_t)ngroups * sizeof(*load));
    for (size_t k = 0; k < plan->nseqs; k++) {
        size_t s = order[k];
        int best = -1;

        for (int q = 0; q < ngroups; q++)
            if (load[q] + plan->lengths[s] <= room && (best < 0 || load[q] < load[best]))
                best = q;
        if (best < 0)
            return 0;
        group[s] = best;
        load[best] += plan->lengths[s];
    }
    return 1;
}

/* The baselines' layouts: even-split plans of cp ranks each (whole nodes,
 * cp dividing nranks, the largest at most cp_max that can hold the batch,
 * else the smallest that can), priced into pr at each group's ranks. */
static zc_status_t zc_price_baseline(zc_pricer_t *pr, const struct zc_plan *plan,
                                     zc_cost_method_t method, int64_t *tokens, int *cp_out)
{
    size_t n = plan->nseqs ? plan->nseqs : 1;
    size_t *order = malloc(n * sizeof(*order));
    int *group = malloc(n * sizeof(*group));
    int64_t *lens = malloc(n * sizeof(*lens));
    int64_t *load = malloc((size_t)plan->nranks * sizeof(*load));
    int cp = 0;
    zc_status_t st = ZC_OK;

    if (!order || !group || !lens || !load) {
        st = zc_error(ZC_ERR_NO_MEMORY, "cost: cannot allocate the baseline's groups");
        goto out;
    }
    zc_sort_longest_first(order, plan->lengths, plan->nseqs);
    /* largest fitting size at most cp_max first, then the smallest above */
    for (int c = plan->nranks; c >= plan->ppn && !cp; c -= plan->ppn)
        if (plan->nranks % c == 0 && c <= pr->step->cp_max && zc_pack_groups(plan, c, order, group, load))
            cp = c;
    for (int c = plan->ppn; c <= plan->nranks && !cp; c += plan->ppn)
        if (plan->nranks % c == 0 && zc_pack_groups(plan, c, order, group, load))
            cp = c;
    if (!cp) {
        /* one group of every rank holds what the plan holds */
        cp = plan->nranks;
        memset(group, 0, n * sizeof(*group));
    }
    for (int q = 0; q < plan->nranks / cp; q++) {
        zc_plan_opts_t opts = plan->opts;
        zc_plan_h even = NULL;
        double *fwd = pr->fwd, *bwd = pr->bwd;
        size_t m = 0;

        for (size_t s = 0; s < plan->nseqs; s++)
            if (group[s] == q)
                lens[m++] = plan->lengths[s];
        if (m == 0)
            continue;
        opts.flags |= ZC_PLAN_EVEN_SPLIT;
        ZC_CHECK_GOTO(zc_plan_create(cp / plan->ppn, plan->ppn, plan->capacity, lens, m, &opts,
                                     &even), st, out);
        pr->fwd += (size_t)q * cp;
        pr->bwd += (size_t)q * cp;
        if (method == ZC_COST_LLAMA_CP)
            zc_price_llama(pr, even);
        else
            zc_price_plan_attention(pr, even, method == ZC_COST_ROUTING);
        pr->fwd = fwd;
        pr->bwd = bwd;
        memcpy(tokens + (size_t)q * cp, even->before, (size_t)cp * sizeof(*tokens));
        zc_plan_destroy(even);
    }
    *cp_out = cp;
out:
    free(order);
    free(group);
    free(lens);
    free(load);
    return st;
}

const char *zc_cost_method_name(zc_cost_method_t method)
{
    static const char *names[ZC_COST_METHOD_COUNT] = {
        "te-cp", "llama-cp", "hybrid-dp", "te-cp+routing", "zeppelin-no-remap", "zeppelin",
    };

    return (unsigned)method < ZC_COST_METHOD_COUNT ? names[method] : "unknown";
}

void zc_step_defaults(zc_step_model_t *step)
{
    memset(step, 0, sizeof(*step));
    step->routed_efficiency = 1.0;
    step->grad_bytes = 4;
    step->dkv_bytes = 4;
    step->cp_max = ZC_STEP_CP_MAX;
}

double zc_step_params(const zc_cluster_t *c, const zc_step_model_t *step)
{
    double layer = (double)c->hidden * c->head_dim * (2.0 * c->heads + 2.0 * c->kv_heads) +
                   3.0 * c->hidden * (double)c->ffn_hidden + 2.0 * c->hidden;

    return layer * c->layers + 2.0 * (double)step->vocab * c->hidden + c->hidden;
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
    for (int k = 0; k < ZC_PLAN_MAX_RAILS; k++)
        ZC_ARG_CHECK(c->nic_rates[k] >= 0 && c->nic_rates[k] < 1e9 && (k < rails || !c->nic_rates[k]),
                     "cluster: nic_rates[%d] is %g Gbit/s (a rate of one of its %d NICs, or 0)",
                     k, c->nic_rates[k], c->nics_per_node);
    ZC_ARG_CHECK(c->nics_per_node == rails,
                 "cluster: %d NICs per node, the plan routes over %d rails (create it with "
                 "zc_plan_opts_t.rails = %d)", c->nics_per_node, rails, c->nics_per_node);
    return ZC_OK;
}

static zc_status_t zc_step_check(const zc_step_model_t *step)
{
    ZC_ARG_CHECK(step != NULL, "step: NULL");
    ZC_ARG_CHECK(step->vocab >= 0, "step: vocab %d is negative", step->vocab);
    ZC_ARG_CHECK(step->hbm_gbytes >= 0, "step: hbm_gbytes %g is negative", step->hbm_gbytes);
    ZC_ARG_CHECK(step->routed_efficiency > 0 && step->routed_efficiency <= 1,
                 "step: routed_efficiency %g is not in (0, 1]", step->routed_efficiency);
    ZC_ARG_CHECK(step->grad_bytes >= 1, "step: grad_bytes %d is not positive", step->grad_bytes);
    ZC_ARG_CHECK(step->dkv_bytes >= 1, "step: dkv_bytes %d is not positive", step->dkv_bytes);
    ZC_ARG_CHECK(step->cp_max >= 1, "step: cp_max %d is not positive", step->cp_max);
    return ZC_OK;
}

/* Every term of the step, the cluster and step already checked. */
static zc_status_t zc_step_price(const struct zc_plan *plan, const zc_cluster_t *c,
                                 const zc_step_model_t *step, zc_cost_method_t method,
                                 zc_step_cost_t *cost)
{
    zc_pricer_t pr;
    int64_t *tokens = NULL, busiest = 0;
    double fwd = 0, bwd = 0, lin_flops, remap = 0, bw;
    int n = plan->nranks, cp = n;
    zc_status_t st = ZC_OK;

    memset(cost, 0, sizeof(*cost));
    memset(&pr, 0, sizeof(pr));
    pr.c = c;
    pr.step = step;
    pr.mask = plan->mask;
    /* Zeppelin's engine runs only the rounds the mask needs; the baselines
     * run every round, masked */
    pr.skip = method == ZC_COST_PARTITION || method == ZC_COST_ZEPPELIN;
    pr.ppn = plan->ppn;
    pr.kv_bytes = 2.0 * c->kv_heads * c->head_dim * c->bytes_per_elem;
    pr.dkv_ratio = (double)step->dkv_bytes / c->bytes_per_elem;
    pr.pair_flops = 4.0 * c->heads * c->head_dim;
    pr.intra_bps = c->intra_gbytes * 1e9;
    pr.nic_bps = c->nic_gbps * 1e9 / 8;
    for (int k = 0; k < ZC_PLAN_MAX_RAILS; k++)
        pr.rail_bps[k] = (c->nic_rates[k] > 0 ? c->nic_rates[k] : c->nic_gbps) * 1e9 / 8;
    pr.rail_weight = plan->rail_weight;
    pr.fwd = calloc((size_t)n, sizeof(*pr.fwd));
    pr.bwd = calloc((size_t)n, sizeof(*pr.bwd));
    pr.pairs = malloc((size_t)n * sizeof(*pr.pairs));
    pr.bounds = malloc((2 * (size_t)n + 1) * sizeof(*pr.bounds));
    pr.share = malloc((size_t)n * sizeof(*pr.share));
    tokens = calloc((size_t)n, sizeof(*tokens));
    if (!pr.fwd || !pr.bwd || !pr.pairs || !pr.bounds || !pr.share || !tokens) {
        st = zc_error(ZC_ERR_NO_MEMORY, "cost: cannot allocate %d ranks", n);
        goto out;
    }
    switch (method) {
    case ZC_COST_TE_CP:
    case ZC_COST_ROUTING:
    case ZC_COST_LLAMA_CP:
        ZC_CHECK_GOTO(zc_price_baseline(&pr, plan, method, tokens, &cp), st, out);
        break;
    case ZC_COST_PARTITION:
    case ZC_COST_ZEPPELIN:
        zc_price_plan_attention(&pr, plan, 1);
        memcpy(tokens, method == ZC_COST_ZEPPELIN ? plan->after : plan->before,
               (size_t)n * sizeof(*tokens));
        break;
    case ZC_COST_HYBRID_DP:
        ZC_CHECK_GOTO(zc_price_hybrid(&pr, plan, tokens), st, out);
        break;
    default:
        break;
    }
    for (int r = 0; r < n; r++) {
        fwd = zc_max(fwd, pr.fwd[r]);
        bwd = zc_max(bwd, pr.bwd[r]);
        busiest = tokens[r] > busiest ? tokens[r] : busiest;
    }
    lin_flops = 2.0 * c->layers *
                    ((double)c->hidden * c->head_dim * (2.0 * c->heads + 2.0 * c->kv_heads) +
                     3.0 * c->hidden * (double)c->ffn_hidden) +
                2.0 * (double)step->vocab * c->hidden;
    if (method == ZC_COST_ZEPPELIN) {
        double tok_bytes = (double)c->hidden * c->bytes_per_elem;
        /* libzcomm's alltoallv stripes its blocks between nodes over the
         * NICs in proportion to their rates: a rank's share of their sum */
        double nic_share = 0;
        for (int k = 0; k < c->nics_per_node; k++)
            nic_share += pr.rail_bps[k] / plan->ppn;

        ZC_CHECK_GOTO(zc_remap_objective(n, plan->ppn, plan->transfers, plan->ntransfers,
                                         tok_bytes / pr.intra_bps, tok_bytes / nic_share, &remap),
                      st, out);
        remap *= 4.0 * c->layers;
        for (size_t t = 0; t < plan->ntransfers; t++)
            *(plan->transfers[t].from / plan->ppn == plan->transfers[t].to / plan->ppn
                  ? &pr.bytes_intra : &pr.bytes_inter) +=
                4.0 * c->layers * (double)plan->transfers[t].tokens * tok_bytes;
    }
    cost->params = zc_step_params(c, step);
    /* NCCL's ring all-reduce (the paper's NCCL 2.14): 2 (n-1)/n of the
     * bytes through every link, one ring per NIC in parallel */
    bw = plan->nnodes > 1 ? pr.nic_bps * c->nics_per_node : pr.intra_bps;
    cost->allreduce = n > 1 ? 2.0 * (n - 1) / n * cost->params * step->grad_bytes / bw : 0;
    cost->optimizer = step->hbm_gbytes > 0 ? cost->params * ZC_ADAM_BYTES /
                                                 (step->hbm_gbytes * 1e9) : 0;
    cost->attn_fwd = fwd * c->layers;
    cost->attn_bwd = bwd * c->layers;
    cost->linear = 3.0 * lin_flops * (double)busiest / (c->linear_tflops * 1e12);
    cost->remap = remap;
    cost->total = cost->attn_fwd + cost->attn_bwd + cost->linear + cost->remap +
                  cost->allreduce + cost->optimizer;
    cost->bytes_intra = pr.bytes_intra * c->layers;
    cost->bytes_inter = pr.bytes_inter * c->layers;
    cost->rounds = pr.rounds;
    cost->round_fwd = pr.round_fwd;
    cost->round_bwd = pr.round_bwd;
    cost->hop_wire = pr.hop_wire;
    cost->cp_size = cp;
out:
    free(pr.fwd);
    free(pr.bwd);
    free(pr.pairs);
    free(pr.bounds);
    free(pr.share);
    free(tokens);
    return st;
}

zc_status_t zc_plan_step_cost(zc_plan_h plan, const zc_cluster_t *user_cluster,
                              const zc_step_model_t *step, zc_cost_method_t method,
                              zc_step_cost_t *cost)
{
    zc_cluster_t cluster;

    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_CHECK(zc_cluster_check(user_cluster, &cluster, plan->ppn, plan->rails));
    ZC_CHECK(zc_step_check(step));
    ZC_ARG_CHECK((unsigned)method < ZC_COST_METHOD_COUNT, "method: %d is unknown", (int)method);
    ZC_ARG_CHECK(cost != NULL, "cost: NULL");
    return zc_step_price(plan, &cluster, step, method, cost);
}

zc_status_t zc_plan_cost(zc_plan_h plan, const zc_cluster_t *user_cluster,
                         zc_cost_method_t method, zc_cost_t *user_cost)
{
    zc_cluster_t cluster;
    zc_step_model_t step;
    zc_step_cost_t sc;
    zc_cost_t cost = ZC_COST_INITIALIZER;

    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_CHECK(zc_cluster_check(user_cluster, &cluster, plan->ppn, plan->rails));
    ZC_ARG_CHECK((unsigned)method < ZC_COST_METHOD_COUNT, "method: %d is unknown", (int)method);
    ZC_ARG_CHECK(user_cost != NULL, "cost: NULL");
    ZC_CHECK(zc_abi_out_check(user_cost->size, ZC_COST_SIZE_V1, "cost", "ZC_COST_INITIALIZER"));
    zc_step_defaults(&step);
    ZC_CHECK(zc_step_price(plan, &cluster, &step, method, &sc));
    /* the public struct has no field for the rest of the step: its total
     * stays attention + linear + remap (zc_plan_cost(3)) */
    cost.attention = sc.attn_fwd + sc.attn_bwd;
    cost.linear = sc.linear;
    cost.remap = sc.remap;
    cost.total = cost.attention + cost.linear + cost.remap;
    cost.bytes_intra = sc.bytes_intra;
    cost.bytes_inter = sc.bytes_inter;
    zc_abi_write(user_cost, &cost, sizeof(cost));
    return ZC_OK;
}
