/* Agreement on a fingerprint by dissemination (see agree.h). */
#include "config.h"

#include <stdio.h>

#include "src/core/agree.h"
#include "src/common/status.h"

/* Enough for 2^32 ranks; tags carry at most 2^24. */
#define ZC_AGREE_MAX_ROUNDS 32
/* Up to this many ranks, every rank sends its fingerprint to every other
 * at once: one round of n - 1 messages, where the dissemination takes
 * ceil(log2 n) rounds one after the other, and on a crowded machine each
 * round waits for the peer's turn on a core.  (The messages fit in[].) */
#define ZC_AGREE_DIRECT_MAX (ZC_AGREE_MAX_ROUNDS + 1)

typedef struct {
    zc_agree_range_t range;  /* what this rank has heard so far; sent each round */
    zc_agree_range_t mine;   /* its own, what the one direct round sends */
    zc_agree_range_t in[ZC_AGREE_MAX_ROUNDS];
} zc_agree_t;

/* Ties go to the lower rank, so that every rank ends with the same range. */
static zc_status_t zc_agree_merge(void *arg, int round)
{
    zc_agree_t *a = arg;
    const zc_agree_range_t *in = &a->in[round];

    if (in->lo < a->range.lo || (in->lo == a->range.lo && in->lo_rank < a->range.lo_rank)) {
        a->range.lo = in->lo;
        a->range.lo_rank = in->lo_rank;
    }
    if (in->hi > a->range.hi || (in->hi == a->range.hi && in->hi_rank < a->range.hi_rank)) {
        a->range.hi = in->hi;
        a->range.hi_rank = in->hi_rank;
    }
    zc_rail_view_merge(&a->range.rails, &in->rails);
    return ZC_OK;
}

/* Every fingerprint straight to every rank, merged as it comes in. */
static int zc_agree_direct(zc_sched_t *s, zc_comm_h comm, zc_agree_t *a, zc_agree_tag_fn tag,
                           const void *ctx)
{
    int n = comm->size, me = comm->rank, last = ZC_SCHED_NONE;

    a->mine = a->range;
    for (int i = 1; i < n; i++) {
        int to = (me + i) % n, from = (me - i + n) % n;
        int got = zc_sched_p2p(s, ZC_REQ_RECV, &a->in[i - 1], sizeof(a->in[i - 1]), from,
                               tag(ctx, from, 0), ZC_RAIL_AUTO, ZC_SCHED_NONE, ZC_SCHED_NONE);

        zc_sched_p2p(s, ZC_REQ_SEND, &a->mine, sizeof(a->mine), to, tag(ctx, me, 0),
                     ZC_RAIL_AUTO, ZC_SCHED_NONE, ZC_SCHED_NONE);
        last = zc_sched_join(s, last, zc_sched_call(s, zc_agree_merge, a, i - 1, got,
                                                    ZC_SCHED_NONE));
    }
    return last;
}

int zc_agree_sched(zc_sched_t *s, zc_comm_h comm, uint64_t mine, zc_agree_tag_fn tag,
                   const void *ctx, zc_agree_range_t **range)
{
    zc_agree_t *a = zc_sched_buffer(s, sizeof(*a));
    int n = comm->size, me = comm->rank, last = ZC_SCHED_NONE, round = 0;

    *range = a ? &a->range : NULL;
    if (!a)
        return ZC_SCHED_NONE;
    a->range = (zc_agree_range_t){.lo = mine, .hi = mine, .lo_rank = me, .hi_rank = me};
    zc_rail_view_mine(comm, &a->range.rails);
    if (n <= ZC_AGREE_DIRECT_MAX)
        return zc_agree_direct(s, comm, a, tag, ctx);
    for (int dist = 1; dist < n; dist <<= 1, round++) {
        int to = (me + dist) % n, from = (me - dist + n) % n;
        /* The range goes out as it stands after the previous round, and
         * changes only once it is out. */
        int got = zc_sched_p2p(s, ZC_REQ_RECV, &a->in[round], sizeof(a->in[round]), from,
                               tag(ctx, from, round), ZC_RAIL_AUTO, ZC_SCHED_NONE, ZC_SCHED_NONE);
        int sent = zc_sched_p2p(s, ZC_REQ_SEND, &a->range, sizeof(a->range), to,
                                tag(ctx, me, round), ZC_RAIL_AUTO, last, ZC_SCHED_NONE);
        last = zc_sched_call(s, zc_agree_merge, a, round, got, sent);
    }
    return last;
}

zc_status_t zc_agree(zc_comm_h comm, uint64_t mine, zc_agree_tag_fn tag, const void *ctx,
                     unsigned call, zc_agree_range_t *range)
{
    zc_agree_range_t *result;
    zc_sched_t *s;

    ZC_CHECK(zc_sched_create(comm, &s));
    zc_sched_set_call(s, call);
    (void)zc_agree_sched(s, comm, mine, tag, ctx, &result);
    zc_status_t st = zc_sched_wait(s);
    if (st == ZC_OK)
        *range = *result;
    zc_sched_destroy(s);
    return st;
}

zc_status_t zc_agree_refuse(zc_comm_h comm, zc_status_t refusal, zc_agree_tag_fn tag,
                            const void *ctx, unsigned call)
{
    char why[256];
    zc_agree_range_t range;

    snprintf(why, sizeof(why), "%s", zc_get_last_error());
    (void)zc_agree(comm, 0, tag, ctx, call, &range);
    return zc_error(refusal, "%s", why);
}
