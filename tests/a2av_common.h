/* Shared by the zc_remap_alltoallv tests (test_alltoallv on one host,
 * mn_alltoallv on the emulated cluster): count matrices every rank draws
 * alike from a seed, each rank's buffer layout with gaps, data that tells
 * every block apart, and the check of a receive buffer, gaps included.
 * Header-only. */
#ifndef ZC_TESTS_A2AV_COMMON_H
#define ZC_TESTS_A2AV_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zcomm.h"

#define A2AV_GAP_BYTE 0xee  /* what the gaps of a receive buffer hold */

static inline uint64_t a2av_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* counts[i * n + j]: elements rank i sends to rank j.  About a third of
 * the blocks are empty and rank `silent` sends nothing at all. */
static inline int64_t *a2av_matrix(int n, uint64_t seed, int64_t max_count, int silent)
{
    int64_t *counts = calloc((size_t)n * (size_t)n, sizeof(*counts));
    uint64_t state = seed;

    for (int i = 0; counts && i < n; i++)
        for (int j = 0; j < n; j++) {
            uint64_t r = a2av_rand(&state);
            counts[i * n + j] = i == silent || r % 3 == 0 ? 0
                                                         : (int64_t)(r >> 8) % (max_count + 1);
        }
    return counts;
}

/* One rank's alltoallv arguments and the buffer extents they need. */
typedef struct {
    int n, rank;
    int64_t sc[256], sd[256], rc[256], rd[256];
    size_t send_elems, recv_elems;
} a2av_layout_t;

/* Blocks in a shuffled order with random gaps (up to max_gap elements)
 * before each, starting at element `base` (64-bit displacements). */
static inline void a2av_place(int n, const int64_t *counts, int64_t *displs, uint64_t *state,
                              int64_t max_gap, int64_t base, size_t *extent)
{
    int order[256];
    int64_t at = base;

    for (int j = 0; j < n; j++)
        order[j] = j;
    for (int j = n - 1; j > 0; j--) {
        int k = (int)(a2av_rand(state) % (uint64_t)(j + 1)), t = order[j];
        order[j] = order[k];
        order[k] = t;
    }
    for (int j = 0; j < n; j++) {
        at += max_gap ? (int64_t)(a2av_rand(state) % (uint64_t)(max_gap + 1)) : 0;
        displs[order[j]] = at;
        at += counts[order[j]];
    }
    *extent = (size_t)(at + (max_gap ? 1 : 0));
}

static inline void a2av_layout(a2av_layout_t *l, const int64_t *matrix, int n, int rank,
                               uint64_t seed, int64_t max_gap, int64_t base)
{
    uint64_t state = seed ^ ((uint64_t)(unsigned)rank * 0x51ed2701ULL + 1);

    l->n = n;
    l->rank = rank;
    for (int j = 0; j < n; j++) {
        l->sc[j] = matrix[rank * n + j];
        l->rc[j] = matrix[j * n + rank];
    }
    a2av_place(n, l->sc, l->sd, &state, max_gap, base, &l->send_elems);
    a2av_place(n, l->rc, l->rd, &state, max_gap, base, &l->recv_elems);
}

/* Byte i of the block `src` sends to `dst` in case `salt`. */
static inline uint8_t a2av_byte(size_t i, int src, int dst, int salt)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)(unsigned)src << 48) ^
                 ((uint64_t)(unsigned)dst << 36) ^ ((uint64_t)(unsigned)salt << 20);
    return (uint8_t)(x >> 56 ^ x >> 23 ^ x);
}

static inline void a2av_fill(char *sendbuf, const a2av_layout_t *l, size_t elem, int salt)
{
    for (int j = 0; j < l->n; j++) {
        uint8_t *block = (uint8_t *)sendbuf + (size_t)l->sd[j] * elem;
        for (size_t i = 0; i < (size_t)l->sc[j] * elem; i++)
            block[i] = a2av_byte(i, l->rank, j, salt);
    }
}

/* Wrong bytes of a receive buffer: every block byte-exact, and the
 * `guard` bytes around each block (inside the extent) still gaps.  The
 * first problem goes to `why`. */
static inline int64_t a2av_check(const char *recvbuf, const a2av_layout_t *l, size_t elem,
                                 int salt, size_t guard, char *why, size_t len)
{
    int64_t wrong = 0;
    size_t extent = l->recv_elems * elem;

    for (int j = 0; j < l->n; j++) {
        const uint8_t *buf = (const uint8_t *)recvbuf;
        size_t begin = (size_t)l->rd[j] * elem, bytes = (size_t)l->rc[j] * elem;
        for (size_t i = 0; i < bytes; i++)
            if (buf[begin + i] != a2av_byte(i, j, l->rank, salt) && wrong++ == 0)
                snprintf(why, len, "block from rank %d wrong at byte %zu of %zu", j, i, bytes);
        /* The bytes just outside the block belong to no other block when
         * they are gaps; blocks may also touch, then the neighbour owns them. */
        for (size_t g = 1; g <= guard; g++) {
            size_t at[2] = {begin - g, begin + bytes + g - 1};
            for (int side = 0; side < 2; side++) {
                int owned = 0;
                if ((side == 0 && begin < g) || at[side] >= extent)
                    continue;
                for (int k = 0; k < l->n && !owned; k++)
                    owned = at[side] >= (size_t)l->rd[k] * elem &&
                            at[side] < (size_t)(l->rd[k] + l->rc[k]) * elem;
                if (!owned && buf[at[side]] != A2AV_GAP_BYTE && wrong++ == 0)
                    snprintf(why, len, "gap byte %zu next to the block from rank %d written",
                             at[side], j);
            }
        }
    }
    return wrong;
}

/* Value h of token `pos` of sequence `seq`, for the plan's remap: tells
 * every token of the batch apart wherever the layouts put it. */
static inline float a2av_token_value(size_t seq, int64_t pos, int h)
{
    return (float)(seq * 1000003u + (uint64_t)pos * 7u + (uint64_t)h);
}

/* Write (check == 0) or check the values of the plan pieces `p` laid out
 * one after the other in `buf`, `hidden` floats per token; returns the
 * wrong values. */
static inline int64_t a2av_pieces(const zc_plan_piece_t *p, size_t n, float *buf, int hidden,
                                  int check)
{
    size_t at = 0;
    int64_t wrong = 0;

    for (size_t i = 0; i < n; i++)
        for (int64_t pos = p[i].begin; pos < p[i].end; pos++, at++)
            for (int h = 0; h < hidden; h++) {
                float want = a2av_token_value(p[i].seq, pos, h);
                float *got = &buf[at * (size_t)hidden + (size_t)h];
                if (!check)
                    *got = want;
                else
                    wrong += memcmp(got, &want, sizeof(want)) != 0;
            }
    return wrong;
}

static inline zc_status_t a2av_plan_run(zc_plan_h plan, zc_remap_dir_t dir, const void *send,
                                        void *recv, int hidden, zc_comm_h comm)
{
    zc_request_h req;
    zc_status_t st = zc_remap_alltoallv_plan(plan, dir, send, recv, hidden, ZC_FLOAT32,
                                             ZC_MEM_HOST, comm, &req);
    return st == ZC_OK ? zc_wait(&req) : st;
}

/* The plan's remap on `rank`: the forward remap of the attention layout
 * must give the planner's linear pieces, and the inverse must give the
 * attention buffer back byte for byte, with nothing written past it.
 * Returns 0, or 1 with the first problem in `why`. */
static inline int a2av_plan_roundtrip(zc_plan_h plan, int rank, int hidden, zc_comm_h comm,
                                      char *why, size_t len)
{
    zc_plan_rank_t pr;
    const zc_plan_piece_t *ap, *lp;
    size_t na, nl;
    zc_status_t st;
    int bad = 1;

    if (zc_plan_rank(plan, rank, &pr) != ZC_OK || zc_plan_rank_pieces(plan, rank, &ap, &na) ||
        zc_plan_rank_linear_pieces(plan, rank, &lp, &nl)) {
        snprintf(why, len, "plan queries: %s", zc_get_last_error());
        return 1;
    }
    size_t abytes = (size_t)pr.tokens * (size_t)hidden * sizeof(float);
    size_t lbytes = (size_t)pr.linear_tokens * (size_t)hidden * sizeof(float);
    float *attn = malloc(abytes + 4), *lin = malloc(lbytes + 4), *back = malloc(abytes + 4);
    if (!attn || !lin || !back) {
        snprintf(why, len, "malloc");
        goto out;
    }
    a2av_pieces(ap, na, attn, hidden, 0);
    memset(lin, A2AV_GAP_BYTE, lbytes + 4);
    memset(back, A2AV_GAP_BYTE, abytes + 4);
    if ((st = a2av_plan_run(plan, ZC_REMAP_FORWARD, attn, lin, hidden, comm)) != ZC_OK)
        snprintf(why, len, "forward: %s (%s)", zc_strerror(st), zc_get_last_error());
    else if (a2av_pieces(lp, nl, lin, hidden, 1) != 0)
        snprintf(why, len, "the linear buffer does not hold the planner's linear pieces");
    else if ((st = a2av_plan_run(plan, ZC_REMAP_INVERSE, lin, back, hidden, comm)) != ZC_OK)
        snprintf(why, len, "inverse: %s (%s)", zc_strerror(st), zc_get_last_error());
    else if (memcmp(attn, back, abytes) != 0 || ((uint8_t *)back)[abytes] != A2AV_GAP_BYTE)
        snprintf(why, len, "inverse(forward(x)) != x");
    else
        bad = 0;
out:
    free(attn);
    free(lin);
    free(back);
    return bad;
}

/* Post and complete one alltoallv of layout `l` (zc_wait, or a zc_test
 * loop when `poll` is set). */
static inline zc_status_t a2av_run(const char *sendbuf, char *recvbuf, const a2av_layout_t *l,
                                   zc_datatype_t dtype, zc_comm_h comm, int poll)
{
    zc_request_h req = NULL;
    zc_status_t st = zc_remap_alltoallv(sendbuf, l->sc, l->sd, recvbuf, l->rc, l->rd, dtype,
                                        ZC_MEM_HOST, comm, &req);

    if (st != ZC_OK)
        return st;
    if (!poll)
        return zc_wait(&req);
    while ((st = zc_test(&req)) == ZC_INPROGRESS)
        ;
    return st;
}

#endif
