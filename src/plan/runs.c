/* Moves of a plan's tokens between its layouts (zc_plan_move_runs).  Each
 * plan layout is indexed once by the batch's order (zc_plan_index: its
 * pieces as spans sorted by their first token); a rank's runs are then its
 * own pieces in one layout cut where the other layout's spans begin and
 * end, sorted by the receiver's buffer and merged where adjacent at both
 * ends.  That costs O(n log n) in n = the rank's pieces + the other
 * layout's spans it meets + ranks, never anything per token. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/plan/plan.h"
#include "src/common/status.h"

enum { ZC_SPANS_ATTENTION, ZC_SPANS_LINEAR };

/* floor(r * total / nranks) without overflow: where rank r's tokens start
 * in the loader layout. */
static int64_t zc_loader_start(const struct zc_plan *plan, int r)
{
    int64_t q = plan->total / plan->nranks, rem = plan->total % plan->nranks;

    return q * r + rem * r / plan->nranks;
}

int64_t zc_plan_layout_tokens(const struct zc_plan *plan, zc_layout_t layout, int rank)
{
    if (layout == ZC_LAYOUT_ATTENTION)
        return plan->before[rank];
    if (layout == ZC_LAYOUT_LINEAR)
        return plan->after[rank];
    return zc_loader_start(plan, rank + 1) - zc_loader_start(plan, rank);
}

zc_status_t zc_plan_layout_check(zc_layout_t layout, const char *arg)
{
    ZC_ARG_CHECK((unsigned)layout <= ZC_LAYOUT_LINEAR,
                 "%s: %d is not a zc_layout_t (ZC_LAYOUT_LOADER, ZC_LAYOUT_ATTENTION or "
                 "ZC_LAYOUT_LINEAR)", arg, (int)layout);
    return ZC_OK;
}

/* ---- the index ------------------------------------------------------------ */

/* The pieces of `rank`, pieces[off[rank] .. off[rank + 1]), as spans in
 * buffer order into out. */
static size_t zc_rank_spans(const struct zc_plan *plan, const zc_plan_piece_t *pieces,
                            const size_t *off, int rank, zc_plan_span_t *out)
{
    int64_t at = 0;
    size_t n = 0;

    for (size_t k = off[rank]; k < off[rank + 1]; k++) {
        const zc_plan_piece_t *p = &pieces[k];

        out[n++] = (zc_plan_span_t){plan->seq_start[p->seq] + p->begin, at, p->end - p->begin,
                                    rank};
        at += p->end - p->begin;
    }
    return n;
}

static int zc_span_cmp(const void *x, const void *y)
{
    const zc_plan_span_t *a = x, *b = y;

    return (a->start > b->start) - (a->start < b->start);
}

static zc_status_t zc_index_layout(struct zc_plan *plan, int which, const zc_plan_piece_t *pieces,
                                   const size_t *off)
{
    size_t total = off[plan->nranks], n = 0;
    zc_plan_span_t *spans = malloc((total ? total : 1) * sizeof(*spans));

    if (!spans)
        return zc_error(ZC_ERR_NO_MEMORY, "plan index: cannot allocate %zu spans", total);
    for (int r = 0; r < plan->nranks; r++)
        n += zc_rank_spans(plan, pieces, off, r, spans + n);
    qsort(spans, n, sizeof(*spans), zc_span_cmp);
    plan->spans[which] = spans;
    plan->nspans[which] = n;
    return ZC_OK;
}

zc_status_t zc_plan_index(struct zc_plan *plan)
{
    plan->seq_start = malloc((plan->nseqs + 1) * sizeof(*plan->seq_start));
    if (!plan->seq_start)
        return zc_error(ZC_ERR_NO_MEMORY, "plan index: cannot allocate %zu sequences",
                        plan->nseqs);
    plan->seq_start[0] = 0;
    for (size_t s = 0; s < plan->nseqs; s++)
        plan->seq_start[s + 1] = plan->seq_start[s] + plan->lengths[s];
    ZC_CHECK(zc_index_layout(plan, ZC_SPANS_ATTENTION, plan->pieces, plan->piece_off));
    return zc_index_layout(plan, ZC_SPANS_LINEAR, plan->lpieces, plan->lpiece_off);
}

/* ---- runs ----------------------------------------------------------------- */

/* A layout as a move sees it: every rank's spans by start (they cover the
 * batch), and one rank's in its buffer order. */
typedef struct {
    const zc_plan_span_t *all;
    size_t nall;
    const zc_plan_span_t *mine;
    size_t nmine;
    zc_plan_span_t *owned;  /* freed by zc_view_free */
} zc_layout_view_t;

static zc_status_t zc_view_loader(const struct zc_plan *plan, int rank, zc_layout_view_t *v)
{
    zc_plan_span_t *spans = malloc(((size_t)plan->nranks + 1) * sizeof(*spans));
    size_t n = 0;

    if (!spans)
        return zc_error(ZC_ERR_NO_MEMORY, "move: cannot allocate %d spans", plan->nranks);
    *v = (zc_layout_view_t){.all = spans, .mine = spans, .owned = spans};
    for (int r = 0; r < plan->nranks; r++) {
        int64_t lo = zc_loader_start(plan, r), hi = zc_loader_start(plan, r + 1);

        if (hi == lo)
            continue;
        if (r == rank) {
            v->mine = spans + n;
            v->nmine = 1;
        }
        spans[n++] = (zc_plan_span_t){lo, 0, hi - lo, r};
    }
    v->nall = n;
    return ZC_OK;
}

static zc_status_t zc_view(const struct zc_plan *plan, zc_layout_t layout, int rank,
                           zc_layout_view_t *v)
{
    int which = layout == ZC_LAYOUT_ATTENTION ? ZC_SPANS_ATTENTION : ZC_SPANS_LINEAR;
    const zc_plan_piece_t *pieces = which == ZC_SPANS_ATTENTION ? plan->pieces : plan->lpieces;
    const size_t *off = which == ZC_SPANS_ATTENTION ? plan->piece_off : plan->lpiece_off;
    size_t n = off[rank + 1] - off[rank];

    if (layout == ZC_LAYOUT_LOADER)
        return zc_view_loader(plan, rank, v);
    *v = (zc_layout_view_t){.all = plan->spans[which], .nall = plan->nspans[which]};
    v->owned = malloc((n ? n : 1) * sizeof(*v->owned));
    if (!v->owned)
        return zc_error(ZC_ERR_NO_MEMORY, "move: cannot allocate %zu spans", n);
    v->nmine = zc_rank_spans(plan, pieces, off, rank, v->owned);
    v->mine = v->owned;
    return ZC_OK;
}

/* Cut each span of `mine` where the spans of `other` begin and end: one run
 * per overlap, offset in mine's buffer, peer_offset in the other's.  Every
 * boundary of `other` falls in at most one span of `mine`, so there are at
 * most nmine + nother runs. */
static size_t zc_cut(const zc_plan_span_t *mine, size_t nmine, const zc_plan_span_t *other,
                     size_t nother, zc_plan_run_t *out)
{
    size_t n = 0;

    for (size_t i = 0; i < nmine; i++) {
        int64_t lo = mine[i].start, end = lo + mine[i].count;
        size_t a = 0, b = nother;

        while (b - a > 1) { /* the last span of `other` starting at or before lo */
            size_t m = a + (b - a) / 2;

            if (other[m].start <= lo)
                a = m;
            else
                b = m;
        }
        for (size_t k = a; lo < end && k < nother; k++) {
            const zc_plan_span_t *o = &other[k];
            int64_t hi = o->start + o->count < end ? o->start + o->count : end;

            out[n++] = (zc_plan_run_t){mine[i].offset + (lo - mine[i].start),
                                       o->offset + (lo - o->start), hi - lo, o->rank};
            lo = hi;
        }
    }
    return n;
}

/* Sends by (peer, place in the peer's buffer), receives by (peer, place
 * in this rank's): both ends of a pair list its runs in the receiver's
 * order. */
static int zc_send_order(const void *x, const void *y)
{
    const zc_plan_run_t *a = x, *b = y;

    if (a->peer != b->peer)
        return a->peer < b->peer ? -1 : 1;
    return (a->peer_offset > b->peer_offset) - (a->peer_offset < b->peer_offset);
}

static int zc_recv_order(const void *x, const void *y)
{
    const zc_plan_run_t *a = x, *b = y;

    if (a->peer != b->peer)
        return a->peer < b->peer ? -1 : 1;
    return (a->offset > b->offset) - (a->offset < b->offset);
}

/* Merge neighbours that continue each other at both ends. */
static size_t zc_merge(zc_plan_run_t *runs, size_t n)
{
    size_t m = 0;

    for (size_t i = 0; i < n; i++) {
        zc_plan_run_t *last = m ? &runs[m - 1] : NULL;

        if (last && last->peer == runs[i].peer && last->offset + last->count == runs[i].offset &&
            last->peer_offset + last->count == runs[i].peer_offset)
            last->count += runs[i].count;
        else
            runs[m++] = runs[i];
    }
    return m;
}

/* The runs of `mine` against `other` in `order`, in a new array. */
static zc_status_t zc_runs_between(const zc_layout_view_t *mine, const zc_layout_view_t *other,
                                   int (*order)(const void *, const void *),
                                   zc_plan_run_t **runs, size_t *count)
{
    size_t room = mine->nmine + other->nall;
    zc_plan_run_t *r = malloc((room ? room : 1) * sizeof(*r));
    size_t n;

    if (!r)
        return zc_error(ZC_ERR_NO_MEMORY, "move: cannot allocate %zu runs", room);
    n = zc_cut(mine->mine, mine->nmine, other->all, other->nall, r);
    qsort(r, n, sizeof(*r), order);
    *runs = r;
    *count = zc_merge(r, n);
    return ZC_OK;
}

zc_status_t zc_plan_runs(const struct zc_plan *plan, int rank, zc_layout_t from, zc_layout_t to,
                         zc_plan_run_t **send, size_t *nsend, zc_plan_run_t **recv,
                         size_t *nrecv)
{
    zc_layout_view_t src = {0}, dst = {0};
    zc_plan_run_t *s = NULL;
    zc_status_t st;

    ZC_CHECK_GOTO(zc_view(plan, from, rank, &src), st, out);
    ZC_CHECK_GOTO(zc_view(plan, to, rank, &dst), st, out);
    ZC_CHECK_GOTO(zc_runs_between(&src, &dst, zc_send_order, &s, nsend), st, out);
    ZC_CHECK_GOTO(zc_runs_between(&dst, &src, zc_recv_order, recv, nrecv), st, out);
    *send = s;
    s = NULL;
out:
    free(s);
    free(src.owned);
    free(dst.owned);
    return st;
}

/* ---- the public call ------------------------------------------------------ */

/* ZC_ERR_INVALID_ARG when `out` (not NULL) has room for fewer than `count`. */
static zc_status_t zc_runs_room(const zc_plan_run_t *out, size_t room, size_t count,
                                const char *arg, const char *room_arg)
{
    ZC_ARG_CHECK(!out || room >= count,
                 "%s: room for %zu runs (*%s), the move has %zu (pass %s NULL to ask for the "
                 "count)", arg, room, room_arg, count, arg);
    return ZC_OK;
}

zc_status_t zc_plan_move_runs(zc_plan_h plan, int rank, zc_layout_t from, zc_layout_t to,
                              zc_plan_run_t *send, size_t *nsend, zc_plan_run_t *recv,
                              size_t *nrecv)
{
    zc_plan_run_t *s = NULL, *r = NULL;
    size_t ns = 0, nr = 0;
    zc_status_t st;

    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK(rank >= 0 && rank < plan->nranks, "rank: %d, the plan has %d ranks", rank,
                 plan->nranks);
    ZC_CHECK(zc_plan_layout_check(from, "from"));
    ZC_CHECK(zc_plan_layout_check(to, "to"));
    ZC_ARG_CHECK(nsend != NULL, "nsend: NULL");
    ZC_ARG_CHECK(nrecv != NULL, "nrecv: NULL");
    ZC_CHECK(zc_plan_runs(plan, rank, from, to, &s, &ns, &r, &nr));
    /* both rooms first: nothing is written unless everything fits */
    ZC_CHECK_GOTO(zc_runs_room(send, *nsend, ns, "send", "nsend"), st, out);
    ZC_CHECK_GOTO(zc_runs_room(recv, *nrecv, nr, "recv", "nrecv"), st, out);
    if (send && ns)
        memcpy(send, s, ns * sizeof(*s));
    if (recv && nr)
        memcpy(recv, r, nr * sizeof(*r));
    *nsend = ns;
    *nrecv = nr;
out:
    free(s);
    free(r);
    return st;
}
