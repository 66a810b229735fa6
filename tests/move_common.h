/* Shared by the tests of zc_remap_alltoallv_layouts (test_alltoallv: the
 * host form; stream_cases.c: the stream form, on the emulated device and
 * on GPUs): plans of every kind on 2 nodes, the batch token at each place
 * of a rank's buffer in a layout, token by token from the plan's pieces,
 * and tokens whose bytes say which token they are. */
#ifndef ZC_TESTS_MOVE_COMMON_H
#define ZC_TESTS_MOVE_COMMON_H

#include <stdint.h>
#include <stdlib.h>

#include "zcomm.h"

#define MOVE_PLANS 6

/* Plan `k` of MOVE_PLANS on 2 nodes of nranks / 2: mixed lengths with an
 * empty sequence and 1-token ones, 1-token sequences only, a sequence
 * ringing over every rank, fewer tokens than ranks; each with Zeppelin's
 * plan or (odd k) the even split of TE CP.  Its name in *name. */
static inline zc_status_t move_plan(int k, int nranks, zc_plan_h *plan, const char **name)
{
    static const int64_t mixed[] = {150, 37, 1, 6400, 9, 0, 20, 2100, 3, 1, 17, 900};
    static const int64_t ones[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    static const int64_t long_one[] = {3, 9000, 5};
    static const int64_t few[] = {2, 1};
    static const struct {
        const char *name;
        const int64_t *lengths;
        size_t count;
        int64_t capacity_percent;
    } sets[] = {{"mixed lengths", mixed, 12, 125},
                {"1-token sequences", ones, 13, 125},
                {"a sequence on every rank", long_one, 3, 101},
                {"fewer tokens than ranks", few, 2, 125},
                {"mixed lengths, even split", mixed, 12, 100},
                {"a sequence on every rank, even split", long_one, 3, 100}};
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    int64_t total = 0;

    for (size_t i = 0; i < sets[k].count; i++)
        total += sets[k].lengths[i];
    opts.flags = k >= 4 ? ZC_PLAN_EVEN_SPLIT : 0;
    *name = sets[k].name;
    return zc_plan_create(2, nranks / 2, total * sets[k].capacity_percent / 100 / nranks +
                                             2 * (int64_t)sets[k].count + 2,
                          sets[k].lengths, sets[k].count, &opts, plan);
}

/* ids[o]: the batch token at offset o of `rank`'s buffer in `layout`
 * (room for the batch); returns their count, -1 on failure. */
static inline int64_t move_ids(zc_plan_h plan, zc_layout_t layout, int rank, int64_t *ids)
{
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    const zc_plan_piece_t *p;
    zc_plan_seq_t seq;
    size_t n;
    int64_t count = 0;

    if (zc_plan_info(plan, &info) != ZC_OK)
        return -1;
    if (layout == ZC_LAYOUT_LOADER) {
        int64_t t = info.total_tokens, r = info.nranks;
        for (int64_t g = rank * t / r; g < (rank + 1) * t / r; g++)
            ids[count++] = g;
        return count;
    }
    if ((layout == ZC_LAYOUT_ATTENTION ? zc_plan_rank_pieces(plan, rank, &p, &n)
                                       : zc_plan_rank_linear_pieces(plan, rank, &p, &n)) != ZC_OK)
        return -1;
    for (size_t k = 0; k < n; k++) {
        int64_t start = 0;
        for (size_t s = 0; s < p[k].seq; s++) {
            if (zc_plan_seq(plan, s, &seq) != ZC_OK)
                return -1;
            start += seq.length;
        }
        for (int64_t t = p[k].begin; t < p[k].end; t++)
            ids[count++] = start + t;
    }
    return count;
}

/* Byte b of batch token g in case `salt`. */
static inline uint8_t move_byte(int64_t g, size_t b, int salt)
{
    return (uint8_t)(g * 131 + (int64_t)b * 7 + salt * 29 + (g >> 8) + 1);
}

static inline void move_fill(char *buf, const int64_t *ids, int64_t n, size_t token, int salt)
{
    for (int64_t o = 0; o < n; o++)
        for (size_t b = 0; b < token; b++)
            buf[(size_t)o * token + b] = (char)move_byte(ids[o], b, salt);
}

/* The first token of `buf` that is not batch token ids[o], or -1. */
static inline int64_t move_first_wrong(const char *buf, const int64_t *ids, int64_t n,
                                       size_t token, int salt)
{
    for (int64_t o = 0; o < n; o++)
        for (size_t b = 0; b < token; b++)
            if ((uint8_t)buf[(size_t)o * token + b] != move_byte(ids[o], b, salt))
                return o;
    return -1;
}

/* One rank's side of a move of a plan: the batch token at each place of
 * its buffers of both layouts, and its send buffer (one byte more) holding
 * its tokens of `from`. */
typedef struct {
    int64_t *sid, *rid;
    int64_t ns, nr;
    char *send;
} move_case_t;

static inline void move_case_free(move_case_t *c)
{
    free(c->sid);
    free(c->rid);
    free(c->send);
}

/* 0, or -1 (and nothing to free) when out of memory or the plan refuses. */
static inline int move_case(zc_plan_h plan, zc_layout_t from, zc_layout_t to, int rank,
                            size_t token, int salt, move_case_t *c)
{
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;

    *c = (move_case_t){NULL, NULL, 0, 0, NULL};
    if (zc_plan_info(plan, &info) != ZC_OK)
        return -1;
    c->sid = malloc((size_t)(info.total_tokens + 1) * sizeof(int64_t));
    c->rid = malloc((size_t)(info.total_tokens + 1) * sizeof(int64_t));
    if (c->sid && c->rid) {
        c->ns = move_ids(plan, from, rank, c->sid);
        c->nr = move_ids(plan, to, rank, c->rid);
        c->send = c->ns >= 0 && c->nr >= 0 ? malloc((size_t)c->ns * token + 1) : NULL;
    }
    if (!c->send) {
        move_case_free(c);
        return -1;
    }
    move_fill(c->send, c->sid, c->ns, token, salt);
    return 0;
}

#endif
