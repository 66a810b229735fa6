/* One step of ring attention: this rank's query pieces against the key
 * pieces it holds at this step, turned into blocks, and the blocks into
 * kernel calls.
 *
 * Units.  A sequence's pieces on either side are contiguous rows in
 * position order but not contiguous positions (zigzag chunks i and
 * 2G-1-i), so each sequence is first tried as one unit with virtual
 * positions: query t sees c(t) keys (those at or before its position), and
 * when c(t) = min(c(t0) + t - t0, c(last)) from the first query t0 that
 * sees any key, positions q_start = c(t0) - 1, kv_start = 0 reproduce that
 * mask exactly.  That holds for every zigzag ring step (the diagonal block
 * of the own chunks, and the full blocks of the other steps).  Otherwise
 * (the gathered whole sequences of LLaMA CP mode) every query piece against
 * every key piece is its own unit with its true positions.  Queries that
 * see no key are in no unit.
 *
 * Other masks (kernels/attn_math.h: a window, or full).  Every query piece
 * against every key piece of its sequence is a unit, trimmed to the rows
 * that see a key of it and the keys one of those rows sees; a pair that
 * sees nothing issues nothing.  Where the window's left side cuts none of
 * the unit's keys, row i sees the first min(d + i + 1, K) of them (d from
 * its right side, or every key): the causal form above with virtual
 * positions, so that it splits into bottom-right and full parts like a
 * causal unit and a kernel table takes it.  Otherwise it is banded: a
 * ZC_RA_WINDOW block at its true positions, on libzcomm's kernels with the
 * window (src/coll/ring_attn/dispatch.c).
 *
 * Blocks (zc_ra_blocks, the one place that decides what a kernel call is).
 * A unit whose row i sees min(d + i + 1, K) of its K keys (d = q_start -
 * kv_start >= 0) is split where its rows start to see every key: the rows
 * before, and the first that does, are bottom-right aligned against the
 * keys they see (K' - rows = d; top-left with equal lengths when d = 0),
 * the rows after fully visible; a unit of several rows whose first row
 * sees every key is fully visible (a single such row goes where it saves
 * a call, see zc_ra_split_round).  A block is one kernel call of one mask: FULL, CAUSAL (every
 * segment top-left with equal lengths) or BOTTOM_RIGHT; full and causal
 * segments never share one.  Within a call a query row and a key row
 * belong to one segment only, so a sequence's units go into successive
 * rounds.  A block is given as varlen arrays: segment b's query rows start
 * at q_row0 + cu_q[b] and its first used_q[b] of them are in it (the rest
 * up to cu_q[b + 1] are not: rows of other units, or rows that see
 * nothing), the same for keys; flash-attention 3's cu_seqlens + seqused,
 * TransformerEngine's cu_seqlens_padded + cu_seqlens, and cuDNN's ragged
 * offsets + sequence lengths.  The kernels of zc_attn_args_t take packed
 * segments: the unused rows become segments of queries without keys or
 * keys without queries, which change nothing there and which cuDNN leaves
 * out of its graph.
 *
 * A call is cut into slices of ZC_RING_ATTN_SLICE_MFLOP while transfers
 * are in flight (host engine), and they progress between slices; a
 * slice's causal segments keep only the keys its rows see, so that it is
 * still bottom-right aligned.  The stream engine (ctx->ds) enqueues each
 * block as one call: its transfers need no help. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/coll/ring_attn/ring_attn.h"
#include "src/common/status.h"

/* A slice is a multiple of this many query rows: every kernel call packs
 * K^T (and V^T) of all its keys, which costs about as much as 500 query
 * rows of causal work against them (measured: 64-row slices of a 4096-key
 * block double the forward's time, 1024-row slices add 1%). */
#define ZC_RA_SLICE_ROWS 512

/* Rows of one segment (or one unit of work) and their first positions. */
typedef struct {
    int64_t q_off, q_len;     /* rows of this rank's buffer */
    int64_t kv_off, kv_len;   /* rows of the block's keys */
    int64_t q_pos, kv_pos;
    int round;
    int band;                 /* under the window at true positions (ZC_RA_WINDOW) */
} zc_ra_seg_t;

typedef struct {
    zc_ra_seg_t *v;
    int n, cap;
} zc_ra_segs_t;

static zc_status_t zc_ra_segs_add(zc_ra_segs_t *s, const zc_ra_seg_t *seg)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 32;
        zc_ra_seg_t *v = realloc(s->v, (size_t)cap * sizeof(*v));

        if (!v)
            return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate %d segments", cap);
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = *seg;
    return ZC_OK;
}

/* Keys of pieces kp[0..nk) at or before position x. */
static int64_t zc_ra_visible(const zc_plan_piece_t *kp, size_t nk, int64_t x)
{
    int64_t c = 0;

    for (size_t j = 0; j < nk; j++) {
        int64_t n = x - kp[j].begin + 1, len = kp[j].end - kp[j].begin;
        c += n < 0 ? 0 : n > len ? len : n;
    }
    return c;
}

/* One sequence as a single segment with virtual positions, if its mask
 * allows (see the top of the file).  *fits = 0 otherwise. */
static zc_status_t zc_ra_seq_merged(zc_ra_segs_t *units, const zc_plan_piece_t *qp, size_t nq,
                                    int64_t qrow, const zc_plan_piece_t *kp, size_t nk,
                                    int64_t krow, int *fits)
{
    int64_t t = 0, t0 = -1, c0 = 0, total_q = 0;
    int64_t last = zc_ra_visible(kp, nk, qp[nq - 1].end - 1);

    *fits = 1;
    for (size_t i = 0; i < nq; i++) {
        for (int64_t x = qp[i].begin; x < qp[i].end; x++, t++) {
            int64_t c = zc_ra_visible(kp, nk, x), want;

            if (t0 < 0) {
                if (c > 0) {
                    t0 = t;
                    c0 = c;
                }
                continue;
            }
            want = c0 + (t - t0) < last ? c0 + (t - t0) : last;
            if (c != want) {
                *fits = 0;
                return ZC_OK;
            }
        }
    }
    total_q = t;
    if (t0 < 0)
        return ZC_OK; /* every key comes after every query */
    return zc_ra_segs_add(units, &(zc_ra_seg_t){.q_off = qrow + t0, .q_len = total_q - t0,
                                                .kv_off = krow, .kv_len = last,
                                                .q_pos = c0 - 1, .kv_pos = 0, .round = 0});
}

/* Every (query piece, key piece) pair that sees anything, one round each. */
static zc_status_t zc_ra_seq_pairs(zc_ra_segs_t *units, const zc_plan_piece_t *qp, size_t nq,
                                   int64_t qrow, const zc_plan_piece_t *kp, size_t nk,
                                   int64_t krow)
{
    int round = 0;

    for (size_t i = 0; i < nq; qrow += qp[i].end - qp[i].begin, i++) {
        int64_t kr = krow;

        for (size_t j = 0; j < nk; kr += kp[j].end - kp[j].begin, j++) {
            int64_t klen = kp[j].end - kp[j].begin;
            int64_t seen = qp[i].end - kp[j].begin;       /* keys the last query sees */
            int64_t skip = kp[j].begin - qp[i].begin;     /* queries before the first key */

            if (seen <= 0)
                continue;
            skip = skip < 0 ? 0 : skip;
            ZC_CHECK(zc_ra_segs_add(units, &(zc_ra_seg_t){
                                               .q_off = qrow + skip,
                                               .q_len = qp[i].end - qp[i].begin - skip,
                                               .kv_off = kr, .kv_len = seen < klen ? seen : klen,
                                               .q_pos = qp[i].begin + skip,
                                               .kv_pos = kp[j].begin, .round = round++}));
        }
    }
    return ZC_OK;
}

/* Every (query piece, key piece) pair of one sequence under mask m (not
 * causal), trimmed, in the causal form or banded (see the top of the
 * file), one round each. */
static zc_status_t zc_ra_seq_masked(zc_ra_segs_t *units, const zc_plan_piece_t *qp, size_t nq,
                                    int64_t qrow, const zc_plan_piece_t *kp, size_t nk,
                                    int64_t krow, zc_attn_mask_t m)
{
    int round = 0;

    for (size_t i = 0; i < nq; qrow += qp[i].end - qp[i].begin, i++) {
        int64_t kr = krow, lq = qp[i].end - qp[i].begin;

        for (size_t j = 0; j < nk; kr += kp[j].end - kp[j].begin, j++) {
            int64_t lk = kp[j].end - kp[j].begin, qs = qp[i].begin, ks = kp[j].begin;
            int64_t a, b, c, e, lo, hi, first_hi, last_lo;
            zc_ra_seg_t u;

            if (lq == 0 || lk == 0)
                continue;
            /* rows [a, b) see a key of the piece, keys [c, e) are seen */
            zc_attn_mask_rows(m, 0, qs, ks, lq, &a, &hi);
            zc_attn_mask_rows(m, lk - 1, qs, ks, lq, &lo, &b);
            if (a >= b)
                continue;
            zc_attn_mask_keys(m, a, qs, ks, lk, &c, &first_hi);
            zc_attn_mask_keys(m, b - 1, qs, ks, lk, &last_lo, &e);
            if (c >= e)
                continue;
            u = (zc_ra_seg_t){.q_off = qrow + a, .q_len = b - a, .kv_off = kr + c,
                              .kv_len = e - c, .round = round++};
            if (last_lo > c) {           /* the left side cuts: banded */
                u.band = 1;
                u.q_pos = qs + a;
                u.kv_pos = ks + c;
            } else if (first_hi >= e) {  /* every row sees every key */
                u.q_pos = e - c - 1;
            } else {                     /* row a sees first_hi - c keys */
                u.q_pos = first_hi - c - 1;
            }
            ZC_CHECK(zc_ra_segs_add(units, &u));
        }
    }
    return ZC_OK;
}

/* Pieces of one sequence are adjacent; ring then sequence orders them. */
static int zc_ra_seq_cmp(const zc_plan_piece_t *a, const zc_plan_piece_t *b)
{
    if (a->ring != b->ring)
        return a->ring < b->ring ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

static size_t zc_ra_seq_run(const zc_plan_piece_t *p, size_t n, size_t i, int64_t *rows)
{
    size_t j = i;

    *rows = 0;
    while (j < n && zc_ra_seq_cmp(&p[j], &p[i]) == 0) {
        *rows += p[j].end - p[j].begin;
        j++;
    }
    return j - i;
}

static zc_status_t zc_ra_units(zc_ra_segs_t *units, const zc_plan_piece_t *qp, size_t nq,
                               int64_t q_row0, const zc_ra_kv_t *kv, zc_attn_mask_t mask,
                               int *rounds)
{
    size_t i = 0, j = 0;
    int64_t qrow = q_row0, krow = 0;

    *rounds = 0;
    while (i < nq && j < kv->npieces) {
        int64_t qrows, krows;
        size_t qn = zc_ra_seq_run(qp, nq, i, &qrows);
        size_t kn = zc_ra_seq_run(kv->pieces, kv->npieces, j, &krows);
        int cmp = zc_ra_seq_cmp(&qp[i], &kv->pieces[j]), fits, first = units->n;

        if (cmp == 0 && !zc_attn_mask_is_causal(mask)) {
            ZC_CHECK(zc_ra_seq_masked(units, &qp[i], qn, qrow, &kv->pieces[j], kn, krow, mask));
            if (units->n - first > *rounds)
                *rounds = units->n - first;
        } else if (cmp == 0) {
            ZC_CHECK(zc_ra_seq_merged(units, &qp[i], qn, qrow, &kv->pieces[j], kn, krow, &fits));
            if (!fits)
                ZC_CHECK(zc_ra_seq_pairs(units, &qp[i], qn, qrow, &kv->pieces[j], kn, krow));
            if (units->n - first > *rounds)
                *rounds = units->n - first;
        }
        if (cmp <= 0) {
            i += qn;
            qrow += qrows;
        }
        if (cmp >= 0) {
            j += kn;
            krow += krows;
        }
    }
    return ZC_OK;
}

/* ---- blocks ---------------------------------------------------------- */

/* Append one block of `n` parts (segments as spans, in row order). */
static zc_status_t zc_ra_block_add(zc_ra_blocks_t *out, zc_ra_mask_t mask,
                                   const zc_ra_seg_t *parts, int n)
{
    zc_ra_block_t *bl;
    int32_t *ints;

    if (n == 0)
        return ZC_OK;
    if (out->n == out->cap) {
        int cap = out->cap ? 2 * out->cap : 8;
        zc_ra_block_t *v = realloc(out->v, (size_t)cap * sizeof(*v));

        if (!v)
            return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate %d blocks", cap);
        out->v = v;
        out->cap = cap;
    }
    ints = malloc((6 * (size_t)n + 2) * sizeof(int32_t));
    if (!ints)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate a block of %d", n);
    bl = &out->v[out->n++];
    *bl = (zc_ra_block_t){.mask = mask, .batch = n, .q_row0 = parts[0].q_off,
                          .kv_row0 = parts[0].kv_off, .cu_q = ints, .cu_kv = ints + n + 1,
                          .used_q = ints + 2 * n + 2, .used_kv = ints + 3 * n + 2,
                          .pos_q = ints + 4 * n + 2, .pos_kv = ints + 5 * n + 2};
    for (int i = 0; i < n; i++) {
        bl->cu_q[i] = (int32_t)(parts[i].q_off - bl->q_row0);
        bl->cu_kv[i] = (int32_t)(parts[i].kv_off - bl->kv_row0);
        bl->used_q[i] = (int32_t)parts[i].q_len;
        bl->used_kv[i] = (int32_t)parts[i].kv_len;
        bl->pos_q[i] = (int32_t)parts[i].q_pos;
        bl->pos_kv[i] = (int32_t)parts[i].kv_pos;
    }
    bl->cu_q[n] = bl->cu_q[n - 1] + bl->used_q[n - 1];
    bl->cu_kv[n] = bl->cu_kv[n - 1] + bl->used_kv[n - 1];
    return ZC_OK;
}

void zc_ra_blocks_free(zc_ra_blocks_t *blocks)
{
    for (int i = 0; i < blocks->n; i++)
        free(blocks->v[i].cu_q);
    free(blocks->v);
    memset(blocks, 0, sizeof(*blocks));
}

/* The parts of the units of round r: each unit's bottom-right (or
 * top-left) rows into causal, its fully visible rows into full. */
/* Rows of unit s that go to the causal part: those that do not see every
 * key and the first that does (kept with them, so that a diagonal block
 * stays one top-left call); none when the first row already sees every key
 * and more rows follow (every zigzag step but the diagonal: one full part
 * rather than a row and the rest).  A single row that sees every key
 * exactly could go either way: -1. */
static int64_t zc_ra_causal_rows(const zc_ra_seg_t *s)
{
    /* row i sees min(d + i + 1, K) keys */
    int64_t d = s->q_pos - s->kv_pos, K = s->kv_len;
    int64_t rc = K - d < s->q_len ? K - d : s->q_len;

    if (d + 1 >= K && rc == s->q_len && rc > 0)
        return -1;
    return d + 1 >= K || rc < 0 ? 0 : rc;
}

/* The parts of the units of round r: each unit's bottom-right (or
 * top-left) rows into causal, its fully visible rows into full.  A row
 * that may go either way joins the full part when there is one or when
 * the causal part is top-left (cuDNN takes those, not offsets), else the
 * causal part: one call fewer. */
static zc_status_t zc_ra_split_round(const zc_ra_segs_t *units, int r, zc_ra_segs_t *causal,
                                     zc_ra_segs_t *full, int *top_left)
{
    int has_full = 0, causal_top_left = 1, either_full;

    for (int u = 0; u < units->n; u++) {
        const zc_ra_seg_t *s = &units->v[u];
        int64_t rc = zc_ra_causal_rows(s);

        if (s->round != r || s->band || rc < 0)
            continue;
        has_full |= rc < s->q_len;
        causal_top_left &= rc == 0 || s->q_pos == s->kv_pos;
    }
    either_full = has_full || causal_top_left;
    causal->n = full->n = 0;
    *top_left = 1;
    for (int u = 0; u < units->n; u++) {
        const zc_ra_seg_t *s = &units->v[u];
        int64_t d = s->q_pos - s->kv_pos, K = s->kv_len, rc = zc_ra_causal_rows(s);

        if (s->round != r || s->band)
            continue;
        if (rc < 0)
            rc = either_full ? 0 : s->q_len;
        if (rc > 0) {
            ZC_CHECK(zc_ra_segs_add(causal, &(zc_ra_seg_t){.q_off = s->q_off, .q_len = rc,
                                                           .kv_off = s->kv_off,
                                                           .kv_len = d + rc}));
            *top_left &= d == 0;
        }
        if (rc < s->q_len)
            ZC_CHECK(zc_ra_segs_add(full, &(zc_ra_seg_t){.q_off = s->q_off + rc,
                                                         .q_len = s->q_len - rc,
                                                         .kv_off = s->kv_off, .kv_len = K}));
    }
    return ZC_OK;
}

zc_status_t zc_ra_blocks(const zc_plan_piece_t *qp, size_t nq, int64_t q_row0,
                         const zc_ra_kv_t *kv, zc_attn_mask_t mask, zc_ra_blocks_t *out)
{
    zc_ra_segs_t units = {0}, causal = {0}, full = {0}, band = {0};
    zc_status_t st = ZC_OK;
    int rounds, top_left;

    memset(out, 0, sizeof(*out));
    ZC_CHECK_GOTO(zc_ra_units(&units, qp, nq, q_row0, kv, mask, &rounds), st, out);
    for (int r = 0; r < rounds; r++) {
        ZC_CHECK_GOTO(zc_ra_split_round(&units, r, &causal, &full, &top_left), st, out);
        ZC_CHECK_GOTO(zc_ra_block_add(out, top_left ? ZC_RA_CAUSAL : ZC_RA_BOTTOM_RIGHT,
                                      causal.v, causal.n), st, out);
        ZC_CHECK_GOTO(zc_ra_block_add(out, ZC_RA_FULL, full.v, full.n), st, out);
        band.n = 0;
        for (int u = 0; u < units.n; u++)
            if (units.v[u].round == r && units.v[u].band)
                ZC_CHECK_GOTO(zc_ra_segs_add(&band, &units.v[u]), st, out);
        ZC_CHECK_GOTO(zc_ra_block_add(out, ZC_RA_WINDOW, band.v, band.n), st, out);
    }
out:
    free(units.v);
    free(causal.v);
    free(full.v);
    free(band.v);
    if (st != ZC_OK)
        zc_ra_blocks_free(out);
    return st;
}

/* ---- kernel calls ------------------------------------------------------ */

/* Block bl as packed segments for the kernels: each segment with the
 * positions of its mask, then its unused rows as a segment of queries
 * without keys and one of keys without queries. */
static zc_status_t zc_ra_block_segs(const zc_ra_block_t *bl, zc_ra_segs_t *segs)
{
    segs->n = 0;
    for (int b = 0; b < bl->batch; b++) {
        int64_t q0 = bl->q_row0 + bl->cu_q[b], k0 = bl->kv_row0 + bl->cu_kv[b];
        int64_t lq = bl->used_q[b], lk = bl->used_kv[b];
        int64_t pad_q = bl->cu_q[b + 1] - bl->cu_q[b] - lq;
        int64_t pad_kv = bl->cu_kv[b + 1] - bl->cu_kv[b] - lk;

        /* causal: row i sees i + lk - lq + 1 keys; full: all lk; a
         * window: its true positions */
        zc_ra_seg_t s = {.q_off = q0, .q_len = lq, .kv_off = k0, .kv_len = lk,
                         .q_pos = bl->mask == ZC_RA_FULL ? lk - 1 : lk - lq};

        if (bl->mask == ZC_RA_WINDOW) {
            s.q_pos = bl->pos_q[b];
            s.kv_pos = bl->pos_kv[b];
            s.band = 1;
        }
        ZC_CHECK(zc_ra_segs_add(segs, &s));
        if (pad_q > 0)
            ZC_CHECK(zc_ra_segs_add(segs, &(zc_ra_seg_t){.q_off = q0 + lq, .q_len = pad_q,
                                                         .kv_off = k0 + lk}));
        if (pad_kv > 0)
            ZC_CHECK(zc_ra_segs_add(segs, &(zc_ra_seg_t){.q_off = q0 + lq + pad_q,
                                                         .kv_off = k0 + lk, .kv_len = pad_kv}));
    }
    return ZC_OK;
}

/* Causal pairs of rows [a, b) of a segment: row t sees clamp(d + t, 0, K)
 * keys, d = q_pos - kv_pos + 1. */
static double zc_ra_pairs(const zc_ra_seg_t *s, int64_t a, int64_t b)
{
    int64_t d = s->q_pos - s->kv_pos + 1, K = s->kv_len;
    int64_t lo = d + a, hi = d + b - 1, l1, h1, l2;
    double sum = 0;

    if (hi < lo || K == 0)
        return 0;
    l1 = lo > 1 ? lo : 1;
    h1 = hi < K - 1 ? hi : K - 1;
    if (h1 >= l1)
        sum += (double)(l1 + h1) * (double)(h1 - l1 + 1) / 2;
    l2 = lo > K ? lo : K;
    if (hi >= l2)
        sum += (double)K * (double)(hi - l2 + 1);
    return sum;
}

/* The work of rows [a, b) of a segment, for the slices: its causal pairs,
 * or, banded, every key of every row (a bound: the window hides some). */
static double zc_ra_work(const zc_ra_seg_t *s, int64_t a, int64_t b)
{
    return s->band ? (double)(b - a) * (double)s->kv_len : zc_ra_pairs(s, a, b);
}

typedef struct {
    int32_t *cu_q, *cu_kv, *q_start, *kv_start;
    int cap;
} zc_ra_call_arrays_t;

/* One kernel call over segments [i0, i1], rows [r0, ...) of i0 and
 * [..., r1) of i1; a causal segment cut short keeps the keys its rows
 * see, the rest of its keys going into a segment without queries. */
static zc_status_t zc_ra_kernel(zc_ra_ctx_t *ctx, const zc_ra_kv_t *kv, const zc_ra_segs_t *segs,
                                zc_ra_mask_t mask, int i0, int64_t r0, int i1, int64_t r1,
                                zc_ra_call_arrays_t *arr)
{
    const zc_ring_attn_args_t *args = ctx->args;
    int64_t base_q = segs->v[i0].q_off + r0, base_kv = segs->v[i0].kv_off;
    zc_attn_args_t a = ZC_ATTN_ARGS_INITIALIZER;
    int n = 0, causal = mask == ZC_RA_CAUSAL || mask == ZC_RA_BOTTOM_RIGHT;

    arr->cu_q[0] = arr->cu_kv[0] = 0;
    for (int b = i0; b <= i1; b++) {
        const zc_ra_seg_t *s = &segs->v[b];
        int64_t qs = b == i0 ? r0 : 0, qe = b == i1 ? r1 : s->q_len, keys = s->kv_len;

        if (causal && s->q_len > 0 && s->q_pos - s->kv_pos + qe < keys)
            keys = s->q_pos - s->kv_pos + qe;
        arr->cu_q[n + 1] = arr->cu_q[n] + (int32_t)(qe - qs);
        arr->cu_kv[n + 1] = arr->cu_kv[n] + (int32_t)keys;
        arr->q_start[n] = (int32_t)(s->q_pos + qs);
        arr->kv_start[n] = (int32_t)s->kv_pos;
        n++;
        if (keys < s->kv_len) {
            arr->cu_q[n + 1] = arr->cu_q[n];
            arr->cu_kv[n + 1] = arr->cu_kv[n] + (int32_t)(s->kv_len - keys);
            arr->q_start[n] = arr->kv_start[n] = 0;
            n++;
        }
    }
    a.batch = n;
    a.num_heads_q = args->num_heads_q;
    a.num_heads_kv = args->num_heads_kv;
    a.head_dim = args->head_dim;
    a.cu_seqlens_q = arr->cu_q;
    a.cu_seqlens_kv = arr->cu_kv;
    a.q_start = arr->q_start;
    a.kv_start = arr->kv_start;
    a.causal = causal;
    a.scale = ctx->scale;
    a.flags = ZC_ATTN_ACCUMULATE;
    if (mask == ZC_RA_WINDOW) {
        a.flags |= ZC_ATTN_WINDOW;
        a.window_left = (int)ctx->mask.left;
        a.window_right = (int)ctx->mask.right;
    }
    a.dtype = args->dtype;
    a.out_dtype = ZC_FLOAT32;
    a.grad_dtype = ZC_FLOAT32;
    a.q = (const char *)args->q + (size_t)(base_q * ctx->row_q) * ctx->elem;
    a.k = (const char *)kv->k + (size_t)(base_kv * ctx->row_kv) * ctx->elem;
    a.v = (const char *)kv->v + (size_t)(base_kv * ctx->row_kv) * ctx->elem;
    a.lse = args->lse + base_q * args->num_heads_q;
    if (!ctx->backward) {
        a.out = ctx->out_acc + base_q * ctx->row_q;
    } else {
        /* the final output and lse of these rows: cuDNN's backward takes
         * O and computes rowsum(dO * O) itself; the native kernels take
         * the delta computed once per call */
        a.out = (char *)args->out + (size_t)(base_q * ctx->row_q) * ctx->elem;
        a.out_dtype = args->dtype;
        a.dout = (const char *)args->dout + (size_t)(base_q * ctx->row_q) * ctx->elem;
        a.delta = ctx->delta + base_q * args->num_heads_q;
        a.dq = ctx->dq_acc + base_q * ctx->row_q;
        a.dk = kv->dk + base_kv * ctx->row_kv;
        a.dv = kv->dv + base_kv * ctx->row_kv;
    }
    return zc_ra_dispatch(ctx, &a);
}

/* Run one block's segments as kernel calls of about `budget` pairs each,
 * cutting a segment between ZC_RA_SLICE_ROWS-row blocks when it does not
 * fit. */
static zc_status_t zc_ra_run_block(zc_ra_ctx_t *ctx, const zc_ra_kv_t *kv,
                                   const zc_ra_segs_t *segs, zc_ra_mask_t mask, double pair_flops)
{
    zc_ra_call_arrays_t arr = {0};
    int i0 = 0;
    int64_t r0 = 0;
    zc_status_t st = ZC_OK;
    /* the stream engine's transfers run on their own stream: no progress here */
    int host_xfers = ctx->ds == NULL;

    arr.cap = 2 * segs->n + 1;
    arr.cu_q = malloc((size_t)arr.cap * sizeof(int32_t));
    arr.cu_kv = malloc((size_t)arr.cap * sizeof(int32_t));
    arr.q_start = malloc((size_t)arr.cap * sizeof(int32_t));
    arr.kv_start = malloc((size_t)arr.cap * sizeof(int32_t));
    if (!arr.cu_q || !arr.cu_kv || !arr.q_start || !arr.kv_start) {
        st = zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate %d segments", arr.cap);
        goto out;
    }
    while (i0 < segs->n) {
        double budget = ctx->slice_flops > 0 && host_xfers && zc_ra_busy(ctx)
                            ? ctx->slice_flops / pair_flops : -1;
        double work = 0;
        int i1 = i0;
        int64_t r1 = segs->v[i0].q_len, start = r0;

        /* extend the call segment by segment; the one that overflows is
         * cut between row blocks (a call takes at least one block) */
        for (;; i1++, start = 0) {
            const zc_ra_seg_t *s = &segs->v[i1];
            double w = zc_ra_work(s, start, s->q_len);

            r1 = s->q_len;
            if (budget >= 0 && work + w > budget) {
                int64_t cut = start;

                while (cut < s->q_len) {
                    int64_t next = cut + ZC_RA_SLICE_ROWS < s->q_len ? cut + ZC_RA_SLICE_ROWS
                                                                       : s->q_len;

                    if (work + zc_ra_work(s, start, next) > budget && (work > 0 || cut > start))
                        break;
                    cut = next;
                }
                r1 = cut;
                if (r1 == start && i1 > i0) /* nothing of it fits: end before it */
                    r1 = segs->v[--i1].q_len;
                break;
            }
            work += w;
            if (i1 + 1 == segs->n)
                break;
        }
        ZC_CHECK_GOTO(zc_ra_kernel(ctx, kv, segs, mask, i0, r0, i1, r1, &arr), st, out);
        if (r1 < segs->v[i1].q_len) {
            i0 = i1;
            r0 = r1;
        } else {
            i0 = i1 + 1;
            r0 = 0;
        }
        if (host_xfers && zc_ra_busy(ctx))
            ZC_CHECK_GOTO(zc_ra_progress(ctx), st, out);
    }
out:
    free(arr.cu_q);
    free(arr.cu_kv);
    free(arr.q_start);
    free(arr.kv_start);
    return st;
}

zc_status_t zc_ra_compute(zc_ra_ctx_t *ctx, const zc_plan_piece_t *qp, size_t nq, int64_t q_row0,
                          const zc_ra_kv_t *kv)
{
    const zc_ring_attn_args_t *args = ctx->args;
    double pair_flops = (ctx->backward ? 10.0 : 4.0) * args->head_dim * args->num_heads_q;
    zc_ra_blocks_t blocks;
    zc_ra_segs_t segs = {0};
    zc_status_t st;

    ZC_CHECK(zc_ra_blocks(qp, nq, q_row0, kv, ctx->mask, &blocks));
    for (int i = 0; i < blocks.n; i++) {
        ZC_CHECK_GOTO(zc_ra_block_segs(&blocks.v[i], &segs), st, out);
        ZC_CHECK_GOTO(zc_ra_run_block(ctx, kv, &segs, blocks.v[i].mask, pair_flops), st, out);
    }
    st = ZC_OK;
out:
    zc_ra_blocks_free(&blocks);
    free(segs.v);
    return st;
}
