/* zc_plan_move_runs against a per-token reference: for plans of every kind
 * (1-token sequences, a sequence on every rank, ranks with no tokens, empty
 * sequences, the paper's datasets, Zeppelin's plan and the even split of
 * TE CP) on 1 to 12 ranks, every rank's runs of every move between the
 * loader, attention and linear layouts are exactly the token-by-token
 * mapping, sorted and merged as documented, and the two ends of every pair
 * list the same runs; then the count query, a short array, bad arguments. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "tools/zc_plan_dataset.h"
#include "zcomm.h"

/* Where every token of the batch sits in one layout, and the reverse. */
typedef struct {
    int *rank;           /* [total]: by batch token */
    int64_t *offset;     /* [total] */
    int64_t **token;     /* [nranks][tokens of the rank]: batch token at each offset */
    int64_t *tokens;     /* [nranks] */
} where_t;

static void where_free(where_t *w, int nranks)
{
    for (int r = 0; w->token && r < nranks; r++)
        free(w->token[r]);
    free(w->token);
    free(w->rank);
    free(w->offset);
    free(w->tokens);
}

/* Token by token, from the pieces (or the even split of the loader). */
static int where_of(zc_plan_h plan, zc_layout_t layout, const int64_t *seq_start, int64_t total,
                    int nranks, where_t *w)
{
    w->rank = malloc((size_t)(total + 1) * sizeof(int));
    w->offset = malloc((size_t)(total + 1) * sizeof(int64_t));
    w->token = calloc((size_t)nranks, sizeof(int64_t *));
    w->tokens = calloc((size_t)nranks, sizeof(int64_t));
    if (!w->rank || !w->offset || !w->token || !w->tokens)
        return -1;
    for (int r = 0; r < nranks; r++) {
        const zc_plan_piece_t *p;
        size_t n = 0;
        int64_t lo = r * total / nranks, hi = (r + 1) * total / nranks;

        w->token[r] = malloc((size_t)(total + 1) * sizeof(int64_t));
        if (!w->token[r])
            return -1;
        if (layout == ZC_LAYOUT_LOADER) {
            for (int64_t g = lo; g < hi; g++)
                w->token[r][w->tokens[r]++] = g;
            continue;
        }
        if ((layout == ZC_LAYOUT_ATTENTION ? zc_plan_rank_pieces(plan, r, &p, &n)
                                           : zc_plan_rank_linear_pieces(plan, r, &p, &n)) != ZC_OK)
            return -1;
        for (size_t k = 0; k < n; k++)
            for (int64_t t = p[k].begin; t < p[k].end; t++)
                w->token[r][w->tokens[r]++] = seq_start[p[k].seq] + t;
    }
    for (int64_t g = 0; g < total; g++)
        w->rank[g] = -1;
    for (int r = 0; r < nranks; r++)
        for (int64_t o = 0; o < w->tokens[r]; o++) {
            int64_t g = w->token[r][o];
            if (g < 0 || g >= total || w->rank[g] != -1)
                return -1;  /* not a layout: a token twice, or outside the batch */
            w->rank[g] = r;
            w->offset[g] = o;
        }
    return 0;
}

static int by_peer_then_peer_offset(const void *x, const void *y)
{
    const zc_plan_run_t *a = x, *b = y;
    if (a->peer != b->peer)
        return a->peer - b->peer;
    return (a->peer_offset > b->peer_offset) - (a->peer_offset < b->peer_offset);
}

static int by_peer_then_offset(const void *x, const void *y)
{
    const zc_plan_run_t *a = x, *b = y;
    if (a->peer != b->peer)
        return a->peer - b->peer;
    return (a->offset > b->offset) - (a->offset < b->offset);
}

/* The reference: one run per token of `mine` (rank r's buffer in one
 * layout) to where `other` has it, sorted, then neighbours merged. */
static size_t reference(const where_t *mine, const where_t *other, int r,
                        int (*order)(const void *, const void *), zc_plan_run_t **out)
{
    size_t n = (size_t)mine->tokens[r], m = 0;
    zc_plan_run_t *runs = malloc((n + 1) * sizeof(*runs));

    for (size_t o = 0; o < n; o++) {
        int64_t g = mine->token[r][o];
        runs[o] = (zc_plan_run_t){(int64_t)o, other->offset[g], 1, other->rank[g]};
    }
    qsort(runs, n, sizeof(*runs), order);
    for (size_t k = 0; k < n; k++) {
        zc_plan_run_t *last = m ? &runs[m - 1] : NULL;
        if (last && last->peer == runs[k].peer && last->offset + last->count == runs[k].offset &&
            last->peer_offset + last->count == runs[k].peer_offset)
            last->count++;
        else
            runs[m++] = runs[k];
    }
    *out = runs;
    return m;
}

static int same_runs(const zc_plan_run_t *a, size_t na, const zc_plan_run_t *b, size_t nb)
{
    if (na != nb)
        return 0;
    for (size_t k = 0; k < na; k++)
        if (a[k].peer != b[k].peer || a[k].offset != b[k].offset ||
            a[k].peer_offset != b[k].peer_offset || a[k].count != b[k].count)
            return 0;
    return 1;
}

typedef struct {
    zc_plan_run_t *send, *recv;
    size_t nsend, nrecv;
} runs_t;

static int get_runs(zc_plan_h plan, int r, zc_layout_t from, zc_layout_t to, runs_t *out)
{
    if (zc_plan_move_runs(plan, r, from, to, NULL, &out->nsend, NULL, &out->nrecv) != ZC_OK)
        return -1;
    out->send = malloc((out->nsend + 1) * sizeof(zc_plan_run_t));
    out->recv = malloc((out->nrecv + 1) * sizeof(zc_plan_run_t));
    return zc_plan_move_runs(plan, r, from, to, out->send, &out->nsend, out->recv, &out->nrecv) ==
                   ZC_OK ? 0 : -1;
}

/* The runs rank a sends b (its send runs with peer b) are the runs b
 * receives from a, offsets swapped. */
static int pair_agrees(const runs_t *all, int a, int b)
{
    const runs_t *s = &all[a], *r = &all[b];
    size_t i = 0, j = 0;

    while (i < s->nsend && s->send[i].peer != b)
        i++;
    while (j < r->nrecv && r->recv[j].peer != a)
        j++;
    for (; i < s->nsend && s->send[i].peer == b; i++, j++)
        if (j >= r->nrecv || r->recv[j].peer != a || r->recv[j].count != s->send[i].count ||
            r->recv[j].offset != s->send[i].peer_offset ||
            r->recv[j].peer_offset != s->send[i].offset)
            return 0;
    return j >= r->nrecv || r->recv[j].peer != a;
}

/* What a plan of an adversarial set must show, or the case tests less
 * than it says. */
typedef enum { SHOWS_NOTHING, SHOWS_RING_OF_ALL, SHOWS_EMPTY_RANK } premise_t;

static int premise_holds(zc_plan_h plan, int nranks, premise_t premise)
{
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    zc_plan_ring_t ring;
    zc_plan_rank_t rank;
    int held = premise == SHOWS_NOTHING;

    zc_plan_info(plan, &info);
    for (int g = 0; g < info.nrings && premise == SHOWS_RING_OF_ALL; g++)
        held |= zc_plan_ring(plan, g, &ring) == ZC_OK && ring.nranks == nranks;
    for (int r = 0; r < nranks && premise == SHOWS_EMPTY_RANK; r++)
        held |= zc_plan_rank(plan, r, &rank) == ZC_OK &&
                (rank.tokens == 0 || rank.linear_tokens == 0 ||
                 (r + 1) * info.total_tokens / nranks == r * info.total_tokens / nranks);
    return held;
}

/* Every move of every rank of one plan; returns the failures and says why. */
static int check_plan(const char *name, int nnodes, int ppn, int64_t capacity,
                      const int64_t *lengths, size_t count, unsigned flags, premise_t premise)
{
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    int nranks = nnodes * ppn, bad = 0;
    int64_t *seq_start = malloc((count + 1) * sizeof(int64_t));
    where_t where[3] = {{0}};
    runs_t *all = calloc((size_t)nranks, sizeof(*all));
    zc_plan_h plan;

    opts.flags = flags;
    seq_start[0] = 0;
    for (size_t s = 0; s < count; s++)
        seq_start[s + 1] = seq_start[s] + lengths[s];
    if (zc_plan_create(nnodes, ppn, capacity, lengths, count, &opts, &plan) != ZC_OK) {
        diag("%s: zc_plan_create: %s", name, zc_get_last_error());
        return 1;
    }
    if (!premise_holds(plan, nranks, premise)) {
        diag("%s: the plan does not show what the case is about", name);
        bad++;
    }
    for (int l = 0; l < 3; l++)
        if (where_of(plan, (zc_layout_t)l, seq_start, seq_start[count], nranks, &where[l])) {
            diag("%s: layout %d does not place every token once", name, l);
            bad++;
        }
    for (int from = 0; from < 3 && bad == 0; from++)
        for (int to = 0; to < 3; to++) {
            for (int r = 0; r < nranks; r++) {
                zc_plan_run_t *ws, *wr;
                size_t nws = reference(&where[from], &where[to], r, by_peer_then_peer_offset, &ws);
                size_t nwr = reference(&where[to], &where[from], r, by_peer_then_offset, &wr);

                if (get_runs(plan, r, (zc_layout_t)from, (zc_layout_t)to, &all[r])) {
                    diag("%s: rank %d, move %d -> %d: %s", name, r, from, to,
                         zc_get_last_error());
                    bad++;
                } else if (!same_runs(all[r].send, all[r].nsend, ws, nws) ||
                           !same_runs(all[r].recv, all[r].nrecv, wr, nwr)) {
                    diag("%s: rank %d, move %d -> %d: %zu/%zu runs, the tokens say %zu/%zu", name,
                         r, from, to, all[r].nsend, all[r].nrecv, nws, nwr);
                    bad++;
                }
                free(ws);
                free(wr);
            }
            for (int a = 0; a < nranks && !bad; a++)
                for (int b = 0; b < nranks; b++)
                    if (!pair_agrees(all, a, b)) {
                        diag("%s: move %d -> %d: ranks %d and %d list different runs", name,
                             from, to, a, b);
                        bad++;
                    }
            for (int r = 0; r < nranks; r++) {
                free(all[r].send);
                free(all[r].recv);
                all[r] = (runs_t){0};
            }
        }
    for (int l = 0; l < 3; l++)
        where_free(&where[l], nranks);
    free(all);
    free(seq_start);
    zc_plan_destroy(plan);
    return bad;
}

static int64_t room(int64_t total, int nranks, int percent)
{
    int64_t c = (total * percent / 100 + nranks - 1) / nranks + 2;
    return c > 0 ? c : 1;
}

static void adversarial(void)
{
    static const int shapes[][2] = {{1, 1}, {1, 2}, {2, 2}, {2, 4}, {4, 2}, {1, 5}, {3, 2}};
    int64_t varlen[] = {150, 37, 1, 64, 9, 0, 20, 91, 3, 1, 17};
    int64_t ones[40], two_one[] = {2, 1}, one[] = {1}, zeros[] = {0, 0}, spans[] = {3, 700, 5};
    struct {
        const char *name;
        const int64_t *lengths;
        size_t count;
        premise_t premise;  /* on more than 2 ranks (on 1, or even split, anything) */
    } sets[] = {
        {"mixed lengths with an empty sequence", varlen, 11, SHOWS_NOTHING},
        {"40 1-token sequences", ones, 40, SHOWS_NOTHING},
        {"a sequence on every rank", spans, 3, SHOWS_RING_OF_ALL},
        {"fewer tokens than ranks (2, 1)", two_one, 2, SHOWS_EMPTY_RANK},
        {"one token", one, 1, SHOWS_EMPTY_RANK},
        {"no tokens (two empty sequences)", zeros, 2, SHOWS_EMPTY_RANK},
    };
    int bad = 0, plans = 0;

    for (int i = 0; i < 40; i++)
        ones[i] = 1;
    for (size_t s = 0; s < sizeof(sets) / sizeof(sets[0]); s++)
        for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++)
            for (unsigned flags = 0; flags <= ZC_PLAN_EVEN_SPLIT; flags += ZC_PLAN_EVEN_SPLIT) {
                int n = shapes[k][0] * shapes[k][1];
                int64_t total = 0;
                char name[160];

                for (size_t q = 0; q < sets[s].count; q++)
                    total += sets[s].lengths[q];
                /* tight for the long sequence, so that it rings over every rank */
                int64_t cap = flags ? room(total, n, 100) + 2 * (int64_t)sets[s].count
                                    : room(total, n, s == 2 ? 100 : 125);
                snprintf(name, sizeof(name), "%s, %dx%d, %s", sets[s].name, shapes[k][0],
                         shapes[k][1], flags ? "even split" : "zeppelin");
                bad += check_plan(name, shapes[k][0], shapes[k][1], cap, sets[s].lengths,
                                  sets[s].count, flags,
                                  n > 2 ? sets[s].premise : SHOWS_NOTHING) != 0;
                plans++;
            }
    ok(bad == 0, "%d adversarial plans (1-token sequences, a sequence on every rank, ranks "
       "with no tokens, no tokens at all; zeppelin and even split; 1 to 8 ranks): every rank's "
       "runs of all 9 moves are the token-by-token mapping, merged, and both ends of every "
       "pair list the same runs", plans);
}

static void datasets(void)
{
    static const int shapes[][2] = {{2, 2}, {2, 4}, {1, 8}, {4, 3}};
    int bad = 0, plans = 0;

    for (int d = 0; d < zc_dataset_count(); d++)
        for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++)
            for (unsigned flags = 0; flags <= ZC_PLAN_EVEN_SPLIT; flags += ZC_PLAN_EVEN_SPLIT) {
                zc_rng_t rng = {(uint64_t)(100 * d + (int)k + 7)};
                int64_t *lengths;
                /* the paper's lengths over 64: short sequences and long rings */
                size_t count = zc_dataset_sample(d, 24000 * 64, &rng, &lengths);
                int n = shapes[k][0] * shapes[k][1];
                char name[96];

                for (size_t q = 0; q < count; q++)
                    lengths[q] = (lengths[q] + 63) / 64;
                int64_t total = 0;
                for (size_t q = 0; q < count; q++)
                    total += lengths[q];
                snprintf(name, sizeof(name), "%s, %dx%d, %s", zc_dataset_name(d), shapes[k][0],
                         shapes[k][1], flags ? "even split" : "zeppelin");
                bad += check_plan(name, shapes[k][0], shapes[k][1],
                                  flags ? room(total, n, 100) + 2 * (int64_t)count
                                        : room(total, n, 125),
                                  lengths, count, flags, SHOWS_NOTHING) != 0;
                plans++;
                free(lengths);
            }
    ok(bad == 0, "%d plans of the three datasets (about 24k tokens, 4 to 12 ranks, zeppelin "
       "and even split): every move's runs are the token-by-token mapping", plans);
}

static void queries_and_refusals(void)
{
    int64_t lengths[] = {30, 1, 12, 7};
    zc_plan_run_t send[64], recv[64], keep = {-1, -1, -1, -1};
    zc_plan_h plan;
    size_t ns = 0, nr = 0, ns2, nr2;
    zc_status_t st;

    if (zc_plan_create(2, 2, 20, lengths, 4, NULL, &plan) != ZC_OK) {
        ok(0, "plan");
        return;
    }
    st = zc_plan_move_runs(plan, 1, ZC_LAYOUT_LOADER, ZC_LAYOUT_ATTENTION, NULL, &ns, NULL, &nr);
    ok(st == ZC_OK && ns > 0 && nr > 0 && ns < 64 && nr < 64,
       "NULL arrays ask for the counts (%zu send, %zu receive runs)", ns, nr);
    ns2 = 64, nr2 = 64;
    ok(zc_plan_move_runs(plan, 1, ZC_LAYOUT_LOADER, ZC_LAYOUT_ATTENTION, send, &ns2, recv,
                         &nr2) == ZC_OK && ns2 == ns && nr2 == nr,
       "larger arrays get that many runs, and the counts");
    send[0] = keep;
    ns2 = ns - 1, nr2 = 64;
    st = zc_plan_move_runs(plan, 1, ZC_LAYOUT_LOADER, ZC_LAYOUT_ATTENTION, send, &ns2,
                                       recv, &nr2);
    ok(st == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "send: room for") &&
           ns2 == ns - 1 && nr2 == 64 && send[0].peer == -1,
       "a send array one short: ZC_ERR_INVALID_ARG naming send, nothing written (%s)",
       zc_get_last_error());
    nr2 = 0, ns2 = 64;
    ok(zc_plan_move_runs(plan, 1, ZC_LAYOUT_LOADER, ZC_LAYOUT_ATTENTION, send, &ns2, recv,
                         &nr2) == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "recv:"),
       "a receive array too short: ZC_ERR_INVALID_ARG naming recv");
    ok(zc_plan_move_runs(NULL, 0, 0, 1, NULL, &ns, NULL, &nr) == ZC_ERR_INVALID_ARG &&
           strstr(zc_get_last_error(), "plan"), "a NULL plan is named");
    ok(zc_plan_move_runs(plan, 4, 0, 1, NULL, &ns, NULL, &nr) == ZC_ERR_INVALID_ARG &&
           strstr(zc_get_last_error(), "rank: 4"), "rank 4 of 4 is named");
    ok(zc_plan_move_runs(plan, 0, (zc_layout_t)3, 1, NULL, &ns, NULL, &nr) ==
           ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "from: 3"),
       "a bad `from` layout is named");
    ok(zc_plan_move_runs(plan, 0, 1, (zc_layout_t)-1, NULL, &ns, NULL, &nr) ==
           ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "to: -1"),
       "a bad `to` layout is named");
    ok(zc_plan_move_runs(plan, 0, 0, 1, NULL, NULL, NULL, &nr) == ZC_ERR_INVALID_ARG &&
           strstr(zc_get_last_error(), "nsend"), "a NULL nsend is named");
    zc_plan_destroy(plan);
}

int main(void)
{
    tap_plan(11);
    adversarial();
    datasets();
    queries_and_refusals();
    return tap_done();
}
