/* What the host and stream forms of zc_remap_alltoallv_layouts share: the
 * argument checks and this rank's runs, the agreement, and the rule that
 * turns the runs of a pair of ranks into messages. */
#ifndef ZC_COLL_LAYOUTS_H
#define ZC_COLL_LAYOUTS_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/agree.h"
#include "src/core/comm.h"
#include "src/plan/plan.h"

/* Runs of at least this many bytes travel alone, from the send buffer
 * straight into the receive buffer; the smaller runs of a pair travel
 * packed, in one message.  A constant, not a setting: both ends of a pair
 * must draw the line at the same size. */
#define ZC_MOVE_ALONE_BYTES ((size_t)64 * 1024)
/* A pair's runs that may travel alone: the first ones, as many as the
 * tags number (src/coll/alltoallv/layouts.c); the later ones are packed. */
#define ZC_MOVE_ALONE_RUNS ((1u << 15) - 1)

/* One call, checked, with this rank's runs grouped by peer. */
typedef struct {
    zc_comm_h comm;
    const char *sendbuf;
    char *recvbuf;
    size_t token;                /* bytes per token */
    zc_plan_run_t *send, *recv;  /* zc_plan_runs() */
    size_t *send_at, *recv_at;   /* [nranks + 1]: each peer's first run */
    uint64_t fingerprint;        /* plan, layouts and token size */
    unsigned seq;                /* the call's collective sequence number */
} zc_move_t;

/* Check the arguments that do not depend on the memory type and find this
 * rank's runs for the host form or (`on_streams`) the stream form; the
 * call's sequence number is taken whatever happens (every rank takes one,
 * for the agreement's tags).  `comm` must be valid. */
zc_status_t zc_move_prepare(zc_plan_h plan, zc_layout_t from, zc_layout_t to,
                            const void *sendbuf, void *recvbuf, int64_t elems_per_token,
                            zc_datatype_t dtype, zc_comm_h comm, int on_streams, zc_move_t *m);
void zc_move_free(zc_move_t *m);

/* Whether run `k` (0-based) of a pair, of `bytes`, travels alone. */
static inline int zc_move_alone(size_t bytes, size_t k)
{
    return bytes >= ZC_MOVE_ALONE_BYTES && k < ZC_MOVE_ALONE_RUNS;
}

/* The agreement's tags (ctx: the zc_move_t) and its verdict on the range
 * (arg: the zc_agree_range_t): ZC_ERR_MISMATCH naming the ranks, or the
 * one that refused its arguments. */
uint64_t zc_move_agree_tag(const void *ctx, int sender, int round);
zc_status_t zc_move_verdict(void *arg, int unused);

#endif
