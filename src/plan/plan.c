/* The plan handle: argument checks, the build pipeline (partition ->
 * zigzag layout -> proxies -> remap) and the read-only queries. */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "src/plan/plan.h"
#include "src/common/abi.h"
#include "src/common/status.h"

#define ZC_PLAN_KNOWN_FLAGS ZC_PLAN_EVEN_SPLIT

static zc_status_t zc_plan_check_args(int nnodes, int ppn, int64_t capacity,
                                      const int64_t *lengths, size_t count,
                                      const zc_plan_opts_t *user_opts,
                                      zc_plan_opts_t *opts, zc_plan_h *plan, int64_t *total)
{
    static const zc_plan_opts_t defaults = ZC_PLAN_OPTS_INITIALIZER;
    int64_t sum = 0;

    ZC_ARG_CHECK(plan != NULL, "plan: output pointer is NULL");
    ZC_ARG_CHECK(nnodes >= 1, "nnodes: %d, need at least one node", nnodes);
    ZC_ARG_CHECK(ppn >= 1, "gpus_per_node: %d, need at least one device per node", ppn);
    ZC_ARG_CHECK(nnodes <= INT_MAX / ppn, "nnodes: %d nodes of %d devices overflow a rank",
                 nnodes, ppn);
    ZC_ARG_CHECK(capacity >= 1, "capacity: %lld tokens per device, need at least 1",
                 (long long)capacity);
    ZC_ARG_CHECK(capacity <= INT64_MAX / ((int64_t)nnodes * ppn),
                 "capacity: %lld tokens per device overflow the cluster's capacity",
                 (long long)capacity);
    ZC_ARG_CHECK(count == 0 || lengths != NULL, "lengths: NULL with count %zu", count);
    *opts = defaults;
    if (user_opts) {
        /* Only the caller's size is read, the defaults past it.  The first
         * layout (ZC_PLAN_OPTS_SIZE_V1) ended after flags, and its padding
         * is where rails lies now: from a caller shorter than today's
         * layout, nothing past flags is read. */
        ZC_CHECK(zc_abi_read(opts, sizeof(*opts),
                             user_opts->size < sizeof(*opts) ? offsetof(zc_plan_opts_t, rails)
                                                             : sizeof(*opts),
                             user_opts, user_opts->size, ZC_PLAN_OPTS_SIZE_V1, "opts",
                             "ZC_PLAN_OPTS_INITIALIZER"));
        opts->size = sizeof(*opts);
        ZC_ARG_CHECK(opts->b_intra > 0, "opts->b_intra: %g, must be positive", opts->b_intra);
        ZC_ARG_CHECK(opts->b_inter >= opts->b_intra,
                     "opts->b_inter: %g is below b_intra %g (inter-node links are the slower)",
                     opts->b_inter, opts->b_intra);
        ZC_ARG_CHECK((opts->flags & ~ZC_PLAN_KNOWN_FLAGS) == 0, "opts->flags: unknown bits 0x%x",
                     opts->flags & ~ZC_PLAN_KNOWN_FLAGS);
        ZC_ARG_CHECK(opts->rails >= 0 && opts->rails <= ZC_PLAN_MAX_RAILS,
                     "opts->rails: %d is out of range 0..%d (0: one per GPU)", opts->rails,
                     ZC_PLAN_MAX_RAILS);
        ZC_ARG_CHECK(opts->reserved == 0, "opts->reserved: %d, must be 0", opts->reserved);
    }
    for (size_t i = 0; i < count; i++) {
        ZC_ARG_CHECK(lengths[i] >= 0, "lengths[%zu]: %lld is negative", i, (long long)lengths[i]);
        if (lengths[i] > INT64_MAX - sum)
            return zc_error(ZC_ERR_CAPACITY, "lengths: the batch's total overflows 64 bits");
        sum += lengths[i];
    }
    *total = sum;
    return ZC_OK;
}

static zc_status_t zc_plan_rings(struct zc_plan *plan)
{
    int id = 0;

    plan->seq_ring = malloc((plan->nseqs ? plan->nseqs : 1) * sizeof(*plan->seq_ring));
    plan->rings = malloc((plan->nseqs ? plan->nseqs : 1) * sizeof(*plan->rings));
    if (!plan->seq_ring || !plan->rings)
        return zc_error(ZC_ERR_NO_MEMORY, "plan: cannot allocate %zu rings", plan->nseqs);
    for (size_t s = 0; s < plan->nseqs; s++) {
        const zc_part_ring_t *pr = &plan->part.seqs[s];
        zc_plan_ring_t *r;

        if (pr->zone == ZC_ZONE_LOCAL) {
            plan->seq_ring[s] = -1;
            continue;
        }
        plan->seq_ring[s] = id;
        r = &plan->rings[id++];
        r->seq = s;
        r->zone = pr->zone;
        r->nranks = pr->nranks;
        r->ranks = pr->ranks;
        r->tokens = pr->share;
        r->nnodes = 1;
        /* rings are node-contiguous: count node changes around the cycle */
        for (int i = 1; i < pr->nranks; i++)
            r->nnodes += pr->ranks[i] / plan->ppn != pr->ranks[i - 1] / plan->ppn;
        if (r->nnodes > 1 && pr->ranks[0] / plan->ppn == pr->ranks[pr->nranks - 1] / plan->ppn)
            r->nnodes--;
    }
    plan->nrings = id;
    return ZC_OK;
}

void zc_plan_destroy(zc_plan_h plan)
{
    if (!plan)
        return;
    zc_partition_free(&plan->part);
    free(plan->lengths);
    free(plan->rings);
    free(plan->seq_ring);
    free(plan->pieces);
    free(plan->piece_off);
    if (plan->lpieces != plan->pieces) {
        free(plan->lpieces);
        free(plan->lpiece_off);
    }
    free(plan->before);
    free(plan->after);
    free(plan->hops);
    free(plan->hop_off);
    free(plan->proxy_pool);
    free(plan->transfers);
    free(plan);
}

zc_status_t zc_plan_create(int nnodes, int gpus_per_node, int64_t capacity,
                           const int64_t *lengths, size_t count, const zc_plan_opts_t *opts,
                           zc_plan_h *plan_p)
{
    zc_plan_opts_t local;
    struct zc_plan *plan;
    int64_t total = 0;
    zc_status_t st;

    zc_error_clear();
    ZC_CHECK(zc_plan_check_args(nnodes, gpus_per_node, capacity, lengths, count, opts, &local,
                                plan_p, &total));
    if (total > (int64_t)nnodes * gpus_per_node * capacity) {
        for (size_t i = 0; i < count; i++)
            if (lengths[i] > (int64_t)nnodes * gpus_per_node * capacity)
                return zc_error(ZC_ERR_CAPACITY,
                                "lengths[%zu]: %lld tokens exceed the whole cluster's %d x %d x "
                                "%lld", i, (long long)lengths[i], nnodes, gpus_per_node,
                                (long long)capacity);
        return zc_error(ZC_ERR_CAPACITY,
                        "lengths: the batch's %lld tokens exceed nnodes x gpus_per_node x "
                        "capacity = %d x %d x %lld", (long long)total, nnodes, gpus_per_node,
                        (long long)capacity);
    }
    plan = calloc(1, sizeof(*plan));
    if (!plan)
        return zc_error(ZC_ERR_NO_MEMORY, "plan: cannot allocate the handle");
    plan->nnodes = nnodes;
    plan->ppn = gpus_per_node;
    plan->nranks = nnodes * gpus_per_node;
    plan->capacity = capacity;
    plan->nseqs = count;
    plan->total = total;
    plan->opts = local;
    plan->rails = plan->opts.rails ? plan->opts.rails
                                   : (gpus_per_node < ZC_PLAN_MAX_RAILS ? gpus_per_node
                                                                        : ZC_PLAN_MAX_RAILS);
    plan->lengths = malloc((count ? count : 1) * sizeof(*plan->lengths));
    if (!plan->lengths) {
        st = zc_error(ZC_ERR_NO_MEMORY, "plan: cannot copy %zu lengths", count);
        goto err_destroy;
    }
    if (count)
        memcpy(plan->lengths, lengths, count * sizeof(*lengths));
    ZC_CHECK_GOTO(zc_partition(nnodes, gpus_per_node, capacity, plan->lengths, count, total,
                               plan->opts.flags, &plan->part), st, err_destroy);
    ZC_CHECK_GOTO(zc_plan_rings(plan), st, err_destroy);
    ZC_CHECK_GOTO(zc_plan_layout(plan), st, err_destroy);
    ZC_CHECK_GOTO(zc_plan_proxies(plan), st, err_destroy);
    ZC_CHECK_GOTO(zc_plan_remap(plan), st, err_destroy);
    *plan_p = plan;
    return ZC_OK;

err_destroy:
    zc_plan_destroy(plan);
    return st;
}

zc_status_t zc_plan_check(zc_plan_h plan)
{
    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    return zc_plan_check_internal(plan);
}

zc_status_t zc_plan_info(zc_plan_h plan, zc_plan_info_t *out)
{
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;

    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK(out != NULL, "info: NULL");
    ZC_CHECK(zc_abi_out_check(out->size, ZC_PLAN_INFO_SIZE_V1, "info",
                              "ZC_PLAN_INFO_INITIALIZER"));
    info.nnodes = plan->nnodes;
    info.gpus_per_node = plan->ppn;
    info.nranks = plan->nranks;
    info.capacity = plan->capacity;
    info.nseqs = plan->nseqs;
    info.nrings = plan->nrings;
    info.total_tokens = plan->total;
    info.s1 = plan->part.s1;
    info.flags = plan->part.flags | (plan->opts.flags & ZC_PLAN_EVEN_SPLIT);
    info.remap_objective = plan->remap_objective;
    zc_abi_write(out, &info, sizeof(info));
    return ZC_OK;
}

zc_status_t zc_plan_seq(zc_plan_h plan, size_t seq, zc_plan_seq_t *out)
{
    const zc_part_ring_t *pr;

    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK(seq < plan->nseqs, "seq: %zu, the plan has %zu sequences", seq, plan->nseqs);
    ZC_ARG_CHECK(out != NULL, "out: NULL");
    pr = &plan->part.seqs[seq];
    out->length = plan->lengths[seq];
    out->zone = pr->zone;
    out->ring = plan->seq_ring[seq];
    out->rank = pr->ranks[0];
    out->node = pr->ranks[0] / plan->ppn;
    out->cut = pr->cut;
    return ZC_OK;
}

zc_status_t zc_plan_ring(zc_plan_h plan, int ring, zc_plan_ring_t *out)
{
    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK(ring >= 0 && ring < plan->nrings, "ring: %d, the plan has %d rings", ring,
                 plan->nrings);
    ZC_ARG_CHECK(out != NULL, "out: NULL");
    *out = plan->rings[ring];
    return ZC_OK;
}

zc_status_t zc_plan_rank(zc_plan_h plan, int rank, zc_plan_rank_t *out)
{
    double pairs = 0;

    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK(rank >= 0 && rank < plan->nranks, "rank: %d, the plan has %d ranks", rank,
                 plan->nranks);
    ZC_ARG_CHECK(out != NULL, "out: NULL");
    for (size_t k = plan->piece_off[rank]; k < plan->piece_off[rank + 1]; k++)
        pairs += zc_causal_pairs(plan->pieces[k].begin, plan->pieces[k].end);
    out->tokens = plan->before[rank];
    out->linear_tokens = plan->after[rank];
    out->attn_pairs = pairs;
    out->node = rank / plan->ppn;
    out->s0 = plan->part.s0[rank / plan->ppn];
    return ZC_OK;
}

static zc_status_t zc_plan_get_pieces(zc_plan_h plan, int rank, const zc_plan_piece_t *all,
                                      const size_t *off, const zc_plan_piece_t **pieces,
                                      size_t *count)
{
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK(rank >= 0 && rank < plan->nranks, "rank: %d, the plan has %d ranks", rank,
                 plan->nranks);
    ZC_ARG_CHECK(pieces != NULL, "pieces: NULL");
    ZC_ARG_CHECK(count != NULL, "count: NULL");
    *pieces = all + off[rank];
    *count = off[rank + 1] - off[rank];
    return ZC_OK;
}

zc_status_t zc_plan_rank_pieces(zc_plan_h plan, int rank, const zc_plan_piece_t **pieces,
                                size_t *count)
{
    zc_error_clear();
    return zc_plan_get_pieces(plan, rank, plan ? plan->pieces : NULL,
                              plan ? plan->piece_off : NULL, pieces, count);
}

zc_status_t zc_plan_rank_linear_pieces(zc_plan_h plan, int rank, const zc_plan_piece_t **pieces,
                                       size_t *count)
{
    zc_error_clear();
    return zc_plan_get_pieces(plan, rank, plan ? plan->lpieces : NULL,
                              plan ? plan->lpiece_off : NULL, pieces, count);
}

zc_status_t zc_plan_ring_hops(zc_plan_h plan, int ring, const zc_plan_hop_t **hops,
                              size_t *count)
{
    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK(ring >= 0 && ring < plan->nrings, "ring: %d, the plan has %d rings", ring,
                 plan->nrings);
    ZC_ARG_CHECK(hops != NULL, "hops: NULL");
    ZC_ARG_CHECK(count != NULL, "count: NULL");
    *hops = plan->hops + plan->hop_off[ring];
    *count = plan->hop_off[ring + 1] - plan->hop_off[ring];
    return ZC_OK;
}

zc_status_t zc_plan_remap_transfers(zc_plan_h plan, const zc_plan_transfer_t **transfers,
                                    size_t *count)
{
    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK(transfers != NULL, "transfers: NULL");
    ZC_ARG_CHECK(count != NULL, "count: NULL");
    *transfers = plan->transfers;
    *count = plan->ntransfers;
    return ZC_OK;
}
