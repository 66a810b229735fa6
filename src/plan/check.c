/* Plan checker: the invariants every consumer of a plan relies on.  Used by
 * zc_plan_check(), by the tests on every random plan, and by zc_plan(1). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/plan/plan.h"
#include "src/common/status.h"

typedef struct {
    size_t seq;
    int64_t begin, end;
    int rank;
} zc_check_piece_t;

static int zc_check_piece_cmp(const void *x, const void *y)
{
    const zc_check_piece_t *a = x, *b = y;

    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return (a->begin > b->begin) - (a->begin < b->begin);
}

/* Every token of every sequence in exactly one piece; ranks' token counts
 * equal `tokens` and stay within the capacity. */
static zc_status_t zc_check_layout(const struct zc_plan *plan, const char *what,
                                   const zc_plan_piece_t *pieces, const size_t *off,
                                   const int64_t *tokens)
{
    size_t n = off[plan->nranks], k = 0;
    zc_check_piece_t *all = malloc((n ? n : 1) * sizeof(*all));
    zc_status_t st = ZC_OK;

    if (!all)
        return zc_error(ZC_ERR_NO_MEMORY, "check: cannot allocate %zu pieces", n);
    for (int r = 0; r < plan->nranks; r++) {
        int64_t sum = 0;

        for (size_t i = off[r]; i < off[r + 1]; i++) {
            const zc_plan_piece_t *p = &pieces[i];

            if (p->seq >= plan->nseqs || p->begin < 0 || p->end <= p->begin ||
                p->end > plan->lengths[p->seq]) {
                st = zc_error(ZC_ERR_INTERNAL, "%s: rank %d holds a bad piece of sequence %zu "
                              "[%lld, %lld)", what, r, p->seq, (long long)p->begin,
                              (long long)p->end);
                goto out;
            }
            all[k].seq = p->seq;
            all[k].begin = p->begin;
            all[k].end = p->end;
            all[k++].rank = r;
            sum += p->end - p->begin;
        }
        if (sum != tokens[r]) {
            st = zc_error(ZC_ERR_INTERNAL, "%s: rank %d holds %lld tokens, its count says %lld",
                          what, r, (long long)sum, (long long)tokens[r]);
            goto out;
        }
        if (sum > plan->capacity) {
            st = zc_error(ZC_ERR_CAPACITY, "%s: rank %d holds %lld tokens, capacity is %lld",
                          what, r, (long long)sum, (long long)plan->capacity);
            goto out;
        }
    }
    qsort(all, n, sizeof(*all), zc_check_piece_cmp);
    k = 0;
    for (size_t s = 0; s < plan->nseqs; s++) {
        int64_t at = 0;

        for (; k < n && all[k].seq == s; k++) {
            if (all[k].begin != at) {
                st = zc_error(ZC_ERR_INTERNAL, "%s: sequence %zu token %lld is %s", what, s,
                              (long long)(all[k].begin < at ? all[k].begin : at),
                              all[k].begin < at ? "placed twice" : "not placed");
                goto out;
            }
            at = all[k].end;
        }
        if (at != plan->lengths[s]) {
            st = zc_error(ZC_ERR_INTERNAL, "%s: sequence %zu has %lld of %lld tokens placed",
                          what, s, (long long)at, (long long)plan->lengths[s]);
            goto out;
        }
    }
out:
    free(all);
    return st;
}

static zc_status_t zc_check_rings(const struct zc_plan *plan)
{
    unsigned char *seen = calloc((size_t)plan->nranks, 1);
    zc_status_t st = ZC_OK;

    if (!seen)
        return zc_error(ZC_ERR_NO_MEMORY, "check: cannot allocate %d ranks", plan->nranks);
    for (int id = 0; id < plan->nrings; id++) {
        const zc_plan_ring_t *r = &plan->rings[id];
        zc_zone_t want = r->nnodes > 1 ? ZC_ZONE_INTER
                         : r->nranks > 1 ? ZC_ZONE_INTRA : ZC_ZONE_LOCAL;

        if (r->zone != want || plan->seq_ring[r->seq] != id) {
            st = zc_error(ZC_ERR_INTERNAL, "rings: ring %d (%d ranks, %d nodes) has zone %d",
                          id, r->nranks, r->nnodes, (int)r->zone);
            goto out;
        }
        for (int i = 0; i < r->nranks; i++) {
            if (r->ranks[i] < 0 || r->ranks[i] >= plan->nranks || seen[r->ranks[i]]) {
                st = zc_error(ZC_ERR_INTERNAL, "rings: ring %d position %d has rank %d twice "
                              "or out of range", id, i, r->ranks[i]);
                goto out;
            }
            seen[r->ranks[i]] = 1;
        }
        for (int i = 0; i < r->nranks; i++)
            seen[r->ranks[i]] = 0;
    }
out:
    free(seen);
    return st;
}

static zc_status_t zc_check_remap(const struct zc_plan *plan)
{
    int64_t *net = calloc((size_t)plan->nranks, sizeof(*net));
    int64_t lo = INT64_MAX, hi = 0;
    zc_status_t st = ZC_OK;

    if (!net)
        return zc_error(ZC_ERR_NO_MEMORY, "check: cannot allocate %d ranks", plan->nranks);
    for (size_t t = 0; t < plan->ntransfers; t++) {
        const zc_plan_transfer_t *x = &plan->transfers[t];

        if (x->tokens <= 0 || x->from == x->to || plan->before[x->from] <= plan->after[x->from] ||
            plan->before[x->to] >= plan->after[x->to]) {
            st = zc_error(ZC_ERR_INTERNAL, "remap: transfer %d -> %d of %lld tokens is not "
                          "from a surplus to a deficit", x->from, x->to, (long long)x->tokens);
            goto out;
        }
        net[x->from] -= x->tokens;
        net[x->to] += x->tokens;
    }
    for (int r = 0; r < plan->nranks; r++) {
        if (plan->before[r] + net[r] != plan->after[r]) {
            st = zc_error(ZC_ERR_INTERNAL, "remap: rank %d ends with %lld tokens, not %lld", r,
                          (long long)(plan->before[r] + net[r]), (long long)plan->after[r]);
            goto out;
        }
        lo = plan->after[r] < lo ? plan->after[r] : lo;
        hi = plan->after[r] > hi ? plan->after[r] : hi;
    }
    if (plan->nranks > 0 && hi - lo > 1)
        st = zc_error(ZC_ERR_INTERNAL, "remap: linear layout spans %lld..%lld tokens per rank",
                      (long long)lo, (long long)hi);
out:
    free(net);
    return st;
}

zc_status_t zc_plan_check_internal(const struct zc_plan *plan)
{
    ZC_CHECK(zc_check_rings(plan));
    ZC_CHECK(zc_check_layout(plan, "attention layout", plan->pieces, plan->piece_off,
                             plan->before));
    ZC_CHECK(zc_check_remap(plan));
    ZC_CHECK(zc_check_layout(plan, "linear layout", plan->lpieces, plan->lpiece_off,
                             plan->after));
    return ZC_OK;
}
