/* Remap solver (paper section 3.4, Eq. (2)): move tokens from the attention
 * layout A to the balanced layout B with the integral transfer matrix M that
 * minimises the largest per-rank transfer cost, T_ij = b_intra inside a
 * node and b_inter across nodes.
 *
 * Eq. (2) counts a rank's sends (rows of T*M); libzcomm counts the larger of
 * a rank's sends and receives, so one plan is optimal for the forward remap
 * and for its inverse (the transpose).  A rank only sends (surplus) or only
 * receives (deficit): this is a bottleneck transportation problem.
 *
 * Exact combinatorial solution.  A rank moving w tokens, y of them across
 * nodes, costs b_intra*w + (b_inter - b_intra)*y.  Think of the flow network
 *   sender -> its node's hub (intra, uncapacitated) -> receiver
 *   sender -> one global hub (inter, y tokens) -> receiver.
 * Routing a node's own tokens through the global hub never helps, so a node
 * whose senders hold e > 0 more tokens than its receivers lack must ship
 * exactly e tokens across (and take none in), a node lacking e tokens must
 * take exactly e in, and nothing else couples the nodes: the max-flow
 * feasibility test of "cost <= C" splits into one test per node.  A node's
 * best choice of which ranks carry its e inter-node tokens is the e smallest
 * of the marginal costs b_intra*w_i + delta*k (k = 1..w_i, delta = b_inter -
 * b_intra), found by bisection on the cost level and trimmed to exactly e
 * tokens; the objective is the largest of these levels and of every rank's
 * b_intra*w_i.  Pairing what each rank sends with what each rank receives,
 * inside each node and then across nodes (north-west corner, by rank),
 * gives an integral M with that objective, which is the integral optimum
 * and at most delta above the LP optimum.  O(d log) time, no LP solver. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/plan/plan.h"
#include "src/common/status.h"

/* Inter-node tokens rank i would carry at cost level v. */
static int64_t zc_level_tokens(double c, int64_t w, double delta, double v)
{
    double y = floor((v - c) / delta + 1e-9);

    if (y <= 0)
        return 0;
    return y >= (double)w ? w : (int64_t)y;
}

/* Choose y[i] (0 <= y[i] <= w[i], sum = need) for the n ranks idx[] of one
 * node minimising max_i (c_i + delta*y_i) over the ranks with y_i > 0. */
static void zc_node_inter(const int *idx, int n, const int64_t *w, double b_intra, double delta,
                          int64_t need, int64_t *y)
{
    double lo = INFINITY, hi = 0;
    int64_t have = 0;

    for (int k = 0; k < n; k++)
        y[idx[k]] = 0;
    if (need == 0)
        return;
    if (delta <= 0) {
        /* every token costs the same: fill in rank order */
        for (int k = 0; k < n && have < need; k++) {
            int64_t t = w[idx[k]] < need - have ? w[idx[k]] : need - have;

            y[idx[k]] = t;
            have += t;
        }
        return;
    }
    for (int k = 0; k < n; k++) {
        double c = b_intra * (double)w[idx[k]];

        lo = c < lo ? c : lo;
        hi = c + delta * (double)need > hi ? c + delta * (double)need : hi;
    }
    /* smallest level v with enough tokens: count(lo) < need <= count(hi) */
    for (int it = 0; it < 200 && hi - lo > 1e-12 * (fabs(hi) + 1e-300); it++) {
        double mid = lo + (hi - lo) / 2;
        int64_t cnt = 0;

        for (int k = 0; k < n; k++)
            cnt += zc_level_tokens(b_intra * (double)w[idx[k]], w[idx[k]], delta, mid);
        if (cnt >= need)
            hi = mid;
        else
            lo = mid;
        if (mid == lo && mid == hi)
            break;
    }
    for (int k = 0; k < n; k++) {
        y[idx[k]] = zc_level_tokens(b_intra * (double)w[idx[k]], w[idx[k]], delta, hi);
        have += y[idx[k]];
    }
    /* trim the tokens that tie at the top level: highest level first, then
     * highest rank, so that the result is deterministic */
    while (have > need) {
        int best = -1;
        double top = -INFINITY;

        for (int k = 0; k < n; k++) {
            double l = b_intra * (double)w[idx[k]] + delta * (double)y[idx[k]];

            if (y[idx[k]] > 0 && l >= top) {
                top = l;
                best = idx[k];
            }
        }
        y[best]--;
        have--;
    }
}

/* Pair senders' and receivers' amounts in rank order (north-west corner). */
static size_t zc_remap_pair(const int *snd, int64_t *sq, int ns, const int *rcv, int64_t *rq,
                            int nrv, zc_plan_transfer_t *out)
{
    size_t m = 0;
    int i = 0, j = 0;

    while (i < ns && j < nrv) {
        int64_t t = sq[i] < rq[j] ? sq[i] : rq[j];

        if (t > 0) {
            out[m].from = snd[i];
            out[m].to = rcv[j];
            out[m].tokens = t;
            m++;
        }
        sq[i] -= t;
        rq[j] -= t;
        if (sq[i] == 0)
            i++;
        if (rq[j] == 0)
            j++;
    }
    return m;
}

static int zc_transfer_cmp(const void *x, const void *y)
{
    const zc_plan_transfer_t *a = x, *b = y;

    if (a->from != b->from)
        return a->from < b->from ? -1 : 1;
    return (a->to > b->to) - (a->to < b->to);
}

zc_status_t zc_remap_objective(int nranks, int ppn, const zc_plan_transfer_t *t, size_t count,
                               double b_intra, double b_inter, double *objective)
{
    double *send = calloc((size_t)nranks, sizeof(*send));
    double *recv = calloc((size_t)nranks, sizeof(*recv));
    double best = 0;

    if (!send || !recv) {
        free(send);
        free(recv);
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the remap costs of %d ranks", nranks);
    }
    for (size_t k = 0; k < count; k++) {
        double c = (t[k].from / ppn == t[k].to / ppn ? b_intra : b_inter) * (double)t[k].tokens;

        send[t[k].from] += c;
        recv[t[k].to] += c;
    }
    for (int i = 0; i < nranks; i++) {
        if (send[i] > best)
            best = send[i];
        if (recv[i] > best)
            best = recv[i];
    }
    free(send);
    free(recv);
    *objective = best;
    return ZC_OK;
}

zc_status_t zc_remap_solve(int nranks, int ppn, const int64_t *before, const int64_t *after,
                           double b_intra, double b_inter, zc_plan_transfer_t **transfers,
                           size_t *count, double *objective)
{
    size_t d = (size_t)nranks;
    int64_t *w = malloc((d + 1) * sizeof(*w)), *y = malloc((d + 1) * sizeof(*y));
    int64_t *sq = malloc((d + 1) * sizeof(*sq)), *rq = malloc((d + 1) * sizeof(*rq));
    int *snd = malloc((d + 1) * sizeof(*snd)), *rcv = malloc((d + 1) * sizeof(*rcv));
    int *idx = malloc(((size_t)ppn + 1) * sizeof(*idx));
    zc_plan_transfer_t *t = malloc((2 * d + 1) * sizeof(*t));
    size_t m = 0;
    int ns, nrv;
    zc_status_t st = ZC_OK;

    if (!w || !y || !sq || !rq || !snd || !rcv || !idx || !t) {
        st = zc_error(ZC_ERR_NO_MEMORY, "remap: cannot allocate %d ranks", nranks);
        goto out;
    }
    for (int i = 0; i < nranks; i++)
        w[i] = before[i] > after[i] ? before[i] - after[i] : after[i] - before[i];
    /* per node: which ranks carry its net excess (or deficit) across */
    for (int node = 0; node < nranks / ppn; node++) {
        int64_t e = 0;
        int n = 0;

        for (int i = node * ppn; i < (node + 1) * ppn; i++)
            e += before[i] - after[i];
        for (int i = node * ppn; i < (node + 1) * ppn; i++) {
            y[i] = 0;
            if ((e > 0 && before[i] > after[i]) || (e < 0 && before[i] < after[i]))
                idx[n++] = i;
        }
        zc_node_inter(idx, n, w, b_intra, b_inter - b_intra, e > 0 ? e : -e, y);
        /* intra-node pairs: what stays inside the node */
        ns = nrv = 0;
        for (int i = node * ppn; i < (node + 1) * ppn; i++) {
            if (before[i] > after[i] && w[i] > y[i]) {
                snd[ns] = i;
                sq[ns++] = w[i] - y[i];
            } else if (before[i] < after[i] && w[i] > y[i]) {
                rcv[nrv] = i;
                rq[nrv++] = w[i] - y[i];
            }
        }
        m += zc_remap_pair(snd, sq, ns, rcv, rq, nrv, t + m);
    }
    /* inter-node pairs: surplus nodes' carriers to deficit nodes' carriers */
    ns = nrv = 0;
    for (int i = 0; i < nranks; i++) {
        if (y[i] == 0)
            continue;
        if (before[i] > after[i]) {
            snd[ns] = i;
            sq[ns++] = y[i];
        } else {
            rcv[nrv] = i;
            rq[nrv++] = y[i];
        }
    }
    m += zc_remap_pair(snd, sq, ns, rcv, rq, nrv, t + m);
    qsort(t, m, sizeof(*t), zc_transfer_cmp);
    ZC_CHECK_GOTO(zc_remap_objective(nranks, ppn, t, m, b_intra, b_inter, objective), st, out);
    *transfers = t;
    *count = m;
    t = NULL;
out:
    free(w);
    free(y);
    free(sq);
    free(rq);
    free(snd);
    free(rcv);
    free(idx);
    free(t);
    return st;
}

/* ---- balanced layout and the plan's remap -------------------------------- */

static __thread const int64_t *zc_balance_key;

static int zc_balance_cmp(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;

    if (zc_balance_key[a] != zc_balance_key[b])
        return zc_balance_key[a] > zc_balance_key[b] ? -1 : 1;
    return (a > b) - (a < b);
}

zc_status_t zc_remap_balanced(int nranks, const int64_t *before, int64_t *after)
{
    int64_t total = 0, q, r;
    int *idx = malloc((size_t)nranks * sizeof(*idx));

    if (!idx)
        return zc_error(ZC_ERR_NO_MEMORY, "remap: cannot allocate %d ranks", nranks);
    for (int i = 0; i < nranks; i++) {
        total += before[i];
        idx[i] = i;
    }
    q = total / nranks;
    r = total % nranks;
    zc_balance_key = before;
    qsort(idx, (size_t)nranks, sizeof(*idx), zc_balance_cmp);
    for (int k = 0; k < nranks; k++)
        after[idx[k]] = q + (k < r ? 1 : 0);
    free(idx);
    return ZC_OK;
}

/* Append the pieces covering tokens [a, b) of rank r's attention buffer. */
static zc_status_t zc_lpieces_append(struct zc_plan *plan, int r, int64_t a, int64_t b,
                                     size_t *n, size_t *cap)
{
    size_t first = plan->piece_off[r], n_r = plan->piece_off[r + 1] - first;
    int64_t off = 0;

    /* a rank that keeps its whole buffer (every rank of a full batch): copy */
    if (a == 0 && b >= plan->before[r] && *n + n_r <= *cap) {
        memcpy(plan->lpieces + *n, plan->pieces + first, n_r * sizeof(*plan->pieces));
        *n += n_r;
        return ZC_OK;
    }
    for (size_t k = first; k < plan->piece_off[r + 1] && off < b; k++) {
        const zc_plan_piece_t *p = &plan->pieces[k];
        int64_t len = p->end - p->begin, lo = a > off ? a : off, hi = b < off + len ? b : off + len;

        if (lo < hi) {
            zc_plan_piece_t *q;

            if (*n == *cap) {
                size_t c = *cap ? 2 * *cap : 256;
                zc_plan_piece_t *np = realloc(plan->lpieces, c * sizeof(*np));

                if (!np)
                    return zc_error(ZC_ERR_NO_MEMORY, "remap: cannot grow the linear layout");
                plan->lpieces = np;
                *cap = c;
            }
            q = &plan->lpieces[(*n)++];
            *q = *p;
            q->begin = p->begin + (lo - off);
            q->end = p->begin + (hi - off);
        }
        off += len;
    }
    return ZC_OK;
}

static int zc_transfer_to_cmp(const void *x, const void *y)
{
    const zc_plan_transfer_t *a = x, *b = y;

    if (a->to != b->to)
        return a->to < b->to ? -1 : 1;
    return (a->from > b->from) - (a->from < b->from);
}

/* Linear layout of each rank: the tokens it keeps (its buffer's prefix),
 * then what it receives, by source rank.  A sender ships its buffer's tail,
 * by destination rank: exactly the order zc_plan_remap_counts() describes. */
static zc_status_t zc_plan_linear_layout(struct zc_plan *plan)
{
    int d = plan->nranks;
    int64_t *send_off, *tx_off;
    zc_plan_transfer_t *by_to;
    size_t n = 0, cap = 0, k = 0;
    zc_status_t st = ZC_OK;

    if (plan->ntransfers == 0) {
        /* nothing moves (every rank of a full batch keeps its buffer): the
         * linear layout is the attention layout, shared, not copied */
        plan->lpieces = plan->pieces;
        plan->lpiece_off = plan->piece_off;
        return ZC_OK;
    }
    send_off = malloc((size_t)d * sizeof(*send_off));
    tx_off = malloc((plan->ntransfers + 1) * sizeof(*tx_off));
    by_to = malloc((plan->ntransfers + 1) * sizeof(*by_to));
    plan->lpiece_off = malloc(((size_t)d + 1) * sizeof(*plan->lpiece_off));
    /* every cut at a rank's keep boundary or a transfer's end splits at most
     * one piece in two: this many pieces at most, one allocation */
    cap = plan->piece_off[d] + plan->ntransfers + (size_t)d + 1;
    plan->lpieces = malloc(cap * sizeof(*plan->lpieces));
    if (!send_off || !tx_off || !by_to || !plan->lpiece_off || !plan->lpieces) {
        st = zc_error(ZC_ERR_NO_MEMORY, "remap: cannot allocate the linear layout");
        goto out;
    }
    /* source offset of every transfer in its sender's buffer */
    for (int r = 0; r < d; r++)
        send_off[r] = plan->before[r] < plan->after[r] ? plan->before[r] : plan->after[r];
    for (size_t t = 0; t < plan->ntransfers; t++) {
        by_to[t] = plan->transfers[t];
        by_to[t].tokens = (int64_t)t; /* remember the index, restored below */
    }
    for (size_t t = 0; t < plan->ntransfers; t++) {
        tx_off[t] = send_off[plan->transfers[t].from];
        send_off[plan->transfers[t].from] += plan->transfers[t].tokens;
    }
    qsort(by_to, plan->ntransfers, sizeof(*by_to), zc_transfer_to_cmp);
    for (int r = 0; r < d; r++) {
        int64_t keep = plan->before[r] < plan->after[r] ? plan->before[r] : plan->after[r];

        plan->lpiece_off[r] = n;
        ZC_CHECK_GOTO(zc_lpieces_append(plan, r, 0, keep, &n, &cap), st, out);
        for (; k < plan->ntransfers && by_to[k].to == r; k++) {
            size_t t = (size_t)by_to[k].tokens;

            ZC_CHECK_GOTO(zc_lpieces_append(plan, plan->transfers[t].from, tx_off[t],
                                            tx_off[t] + plan->transfers[t].tokens, &n, &cap),
                          st, out);
        }
    }
    plan->lpiece_off[d] = n;
out:
    free(send_off);
    free(tx_off);
    free(by_to);
    return st;
}

zc_status_t zc_plan_remap(struct zc_plan *plan)
{
    plan->after = malloc((size_t)plan->nranks * sizeof(*plan->after));
    if (!plan->after)
        return zc_error(ZC_ERR_NO_MEMORY, "remap: cannot allocate %d ranks", plan->nranks);
    ZC_CHECK(zc_remap_balanced(plan->nranks, plan->before, plan->after));
    ZC_CHECK(zc_remap_solve(plan->nranks, plan->ppn, plan->before, plan->after,
                            plan->opts.b_intra, plan->opts.b_inter, &plan->transfers,
                            &plan->ntransfers, &plan->remap_objective));
    return zc_plan_linear_layout(plan);
}

zc_status_t zc_plan_remap_counts(zc_plan_h plan, int rank, zc_remap_dir_t dir,
                                 int64_t *sendcounts, int64_t *sdispls, int64_t *recvcounts,
                                 int64_t *rdispls)
{
    int64_t keep, soff, roff;
    int64_t *fsc, *fsd, *frc, *frd;

    zc_error_clear();
    ZC_ARG_CHECK(plan != NULL, "plan: NULL");
    ZC_ARG_CHECK(rank >= 0 && rank < plan->nranks, "rank: %d, the plan has %d ranks", rank,
                 plan->nranks);
    ZC_ARG_CHECK(dir == ZC_REMAP_FORWARD || dir == ZC_REMAP_INVERSE,
                 "dir: %d is neither ZC_REMAP_FORWARD nor ZC_REMAP_INVERSE", (int)dir);
    ZC_ARG_CHECK(sendcounts && sdispls && recvcounts && rdispls,
                 "%s: NULL", !sendcounts ? "sendcounts" : !sdispls ? "sdispls"
                             : !recvcounts ? "recvcounts" : "rdispls");
    /* the inverse is the forward remap with send and receive swapped */
    fsc = dir == ZC_REMAP_FORWARD ? sendcounts : recvcounts;
    fsd = dir == ZC_REMAP_FORWARD ? sdispls : rdispls;
    frc = dir == ZC_REMAP_FORWARD ? recvcounts : sendcounts;
    frd = dir == ZC_REMAP_FORWARD ? rdispls : sdispls;
    keep = plan->before[rank] < plan->after[rank] ? plan->before[rank] : plan->after[rank];
    memset(fsc, 0, (size_t)plan->nranks * sizeof(*fsc));
    memset(frc, 0, (size_t)plan->nranks * sizeof(*frc));
    fsc[rank] = frc[rank] = keep;
    for (size_t t = 0; t < plan->ntransfers; t++) {
        if (plan->transfers[t].from == rank)
            fsc[plan->transfers[t].to] = plan->transfers[t].tokens;
        if (plan->transfers[t].to == rank)
            frc[plan->transfers[t].from] = plan->transfers[t].tokens;
    }
    /* self block first, then peers by rank */
    fsd[rank] = frd[rank] = 0;
    soff = roff = keep;
    for (int r = 0; r < plan->nranks; r++) {
        if (r == rank)
            continue;
        fsd[r] = soff;
        soff += fsc[r];
        frd[r] = roff;
        roff += frc[r];
    }
    return ZC_OK;
}
