/* Ring attention engine (zc_ring_attn_fwd/bwd), internal view shared by
 * its parts:
 *   src/coll/ring_attn/ring_attn.c     public calls: checks, agreement, accumulators, zones
 *   src/coll/ring_attn/groups.c   plan -> ring groups and the routed-call list
 *   src/coll/ring_attn/xfer.c     transfers: direct hops, routed calls, progress, waits
 *   src/coll/ring_attn/compute.c  one block: pieces -> kernel segments by global position
 *   src/coll/ring_attn/ring.c     ring pipelines (Zeppelin and TE CP modes)
 *   src/coll/ring_attn/gather.c   all-gather / reduce-scatter (LLaMA CP mode)
 *   src/coll/ring_attn/buffers.c  staging, copies, row sizes, fp32 -> the caller's dtype
 * and the stream-ordered engine of the device path (src/coll/ring_attn/stream_engine.h),
 * which shares the checks, the groups and the kernel segments. */
#ifndef ZC_RING_ATTN_H
#define ZC_RING_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/comm.h"
#include "zcomm.h"

/* Routed calls of one communicator in flight at once: their tags carry a
 * 4-bit call sequence (src/coll/routed/routed.c), so at most half of its values. */
#define ZC_RA_ROUTED_WINDOW 8

/* Staging slots; each phase (a group's ring or gather, the local zone)
 * numbers its own, and reuses a slot only once nothing of the previous
 * phase is in flight. */
#define ZC_RA_SCRATCH_SLOTS 8

/* What a transfer carries; part of its tag. */
typedef enum {
    ZC_RA_KIND_CHECK = 1,   /* agreement on the plan and shape */
    ZC_RA_KIND_KV,          /* ring: K|V of one owner (dtype) */
    ZC_RA_KIND_DKV,         /* ring: dK|dV accumulators of one owner (fp32) */
    ZC_RA_KIND_GATHER_K,    /* all-gather of K, of V */
    ZC_RA_KIND_GATHER_V,
    ZC_RA_KIND_SCATTER_DK,  /* reduce-scatter of dK, of dV (fp32) */
    ZC_RA_KIND_SCATTER_DV
} zc_ra_kind_t;

/* One member of a ring group: its pieces of the group, contiguous in its
 * buffer because a group is a run of consecutive rings of one zone. */
typedef struct {
    int rank;
    const zc_plan_piece_t *pieces;
    size_t npieces;
    int64_t row0;             /* first row of those pieces in its buffer */
    int64_t tokens;
} zc_ra_member_t;

/* A ring group: consecutive rings of one zone whose ranks form the same
 * cycle (every ring of the TE CP layout is a rotation of the global ring),
 * run as one ring pass with one message per hop. */
typedef struct {
    zc_zone_t zone;
    int G;
    const int *rings;         /* the plan's ring ids, ascending */
    int nrings;
    zc_ra_member_t *members;  /* [G], ring order: position i sends to i + 1 */
    int pos;                  /* this rank's position, -1 when not a member */
    unsigned char *routed;    /* [G]: hop i -> i+1 goes through zc_routed_sendrecv */
    int64_t max_tokens;       /* largest member share */
    int *kv_call;             /* [G]: routed call carrying the KV into step s, or -1 */
    int *dkv_call;            /* [G]: routed call carrying dK/dV after step s, or -1 */
} zc_ra_group_t;

/* A zc_routed_sendrecv call: every rank makes them all, in list order. */
typedef struct {
    zc_transfer_t *transfers;
    int ntransfers;
    int mine;                 /* this rank is the src or dst of one of them */
    int ready;                /* mine: buffers given; otherwise always */
    const void *sendbuf;
    void *recvbuf;
    int *notify;              /* decremented when done (mine) */
} zc_ra_routed_t;

/* A request in flight; *pending drops by one when it completes. */
typedef struct {
    zc_request_h req;
    int *pending;
    int routed;               /* routed call index, or -1 */
} zc_ra_item_t;

/* A hop's transfers (send and receive, direct or routed): done at 0. */
typedef struct {
    int pending;
} zc_ra_xchg_t;

/* KV side of one block: pieces in buffer order and their rows. */
typedef struct {
    const zc_plan_piece_t *pieces;
    size_t npieces;
    const void *k, *v;        /* row 0 of the pieces (dtype) */
    float *dk, *dv;           /* backward: fp32 accumulators of the same rows */
} zc_ra_kv_t;

struct zc_ds_ops;

typedef struct {
    zc_comm_h comm;
    zc_plan_h plan;
    const zc_ring_attn_args_t *args;
    int backward;
    int reverse;              /* backward in the paper's reverse queue order (Fig. 12c):
                               * local, then the groups last to first
                               * (ZC_RING_ATTN_BWD_ORDER; host engine only) */
    float scale;
    size_t elem;              /* bytes of one element of dtype */
    int64_t row_q, row_kv;    /* elements of one token of q, of k */
    unsigned seq;             /* call sequence, in the tags */
    uint32_t rail_weights[ZC_MAX_RAILS]; /* the routed calls' per-rail shares (zc_ra_begin) */

    const zc_plan_piece_t *pieces; /* this rank's, buffer order */
    size_t npieces;
    int64_t tokens;           /* this rank's rows in the plan */
    size_t local_first;       /* first local piece */
    int64_t local_row0;

    zc_ra_group_t *groups;    /* run order: inter-node groups first, then intra-node;
                               * reversed when `reverse` */
    int ngroups;
    int *group_rings;         /* every group's ring ids, group after group */
    int ngroup_rings;

    zc_ra_routed_t *routed;   /* every rank's list, in call order */
    int nrouted, routed_next, routed_inflight;
    zc_ra_item_t *items;
    int nitems, cap_items;
    int sends_abandoned;      /* an error left sends behind: keep their buffers */

    /* accumulators over this rank's rows */
    float *out_acc;           /* fwd: fp32 out (the caller's out when dtype is fp32) */
    float *delta;             /* bwd: rowsum(dout * out) */
    float *dq_acc;            /* bwd: fp32 dq (the caller's dq when dtype is fp32) */

    void *scratch[ZC_RA_SCRATCH_SLOTS]; /* staging, reused by every group */
    size_t scratch_bytes[ZC_RA_SCRATCH_SLOTS];

    double slice_flops;       /* work between two progress calls, 0: no cuts */
    zc_ring_attn_stats_t stats;

    /* stream engine: the device the kernels are enqueued on (NULL: the
     * CPU kernels, called in place) */
    const struct zc_ds_ops *ds;
    void *ds_dev;
} zc_ra_ctx_t;

/* ---- src/coll/ring_attn/ring_attn.c: what both engines share ---- */
/* `check` on each tensor of a call (forward: q, k, v, out, lse; backward
 * also dout, dq, dk, dv), with args->memtype and the tensor's name. */
zc_status_t zc_ra_check_tensors(const zc_ring_attn_args_t *args, int backward,
                                zc_status_t (*check)(const void *buf, zc_memtype_t memtype,
                                                     const char *arg));
/* The engine's own checks of a call's tensors: dtype and memory type. */
typedef zc_status_t (*zc_ra_engine_check_t)(const zc_ring_attn_args_t *args, int backward);
/* The caller's args read (its size's worth, the defaults past it) into
 * *local, which is returned; the caller's pointer when its size is refused
 * (zc_ra_check_args then says why, inside the agreement). */
const zc_ring_attn_args_t *zc_ra_args_read(const zc_ring_attn_args_t *user,
                                           zc_ring_attn_args_t *local);
/* This rank's arguments against the plan and the communicator, then
 * `engine`'s checks; *tokens gets this rank's rows. */
zc_status_t zc_ra_check_args(zc_comm_h comm, zc_plan_h plan, const zc_ring_attn_args_t *args,
                             int backward, zc_ra_engine_check_t engine, int64_t *tokens);
/* A call's start on every rank (ctx->comm, plan, args and backward set):
 * the checks, the backward queue order (ctx->reverse, host engine only),
 * the agreement of every rank on the plan, the shape, the engine
 * (`on_streams`: the stream engine, whose transfers are NCCL's) and the
 * order (ZC_RING_ATTN_CHECK), then the shape fields of ctx. */
zc_status_t zc_ra_begin(zc_ra_ctx_t *ctx, zc_ra_engine_check_t engine, int on_streams);

/* ---- src/coll/ring_attn/groups.c ---- */
zc_status_t zc_ra_groups_build(zc_ra_ctx_t *ctx);
void zc_ra_groups_free(zc_ra_ctx_t *ctx);

/* ---- src/coll/ring_attn/xfer.c ---- */
uint64_t zc_ra_tag(const zc_ra_ctx_t *ctx, int sender, zc_ra_kind_t kind, int step, int group);
/* Direct send or receive; x->pending counts it.  Zero bytes: nothing. */
zc_status_t zc_ra_post(zc_ra_ctx_t *ctx, zc_ra_xchg_t *x, zc_request_kind_t dir, void *buf,
                       size_t bytes, int peer, zc_ra_kind_t kind, int step, int group);
/* One ring hop of group g: send to the next member, receive from the
 * previous one, each direct or through routed call `call`. */
zc_status_t zc_ra_hop(zc_ra_ctx_t *ctx, zc_ra_xchg_t *x, int g, zc_ra_kind_t kind, int step,
                      int call, const void *sendbuf, size_t send_bytes, void *recvbuf,
                      size_t recv_bytes);
/* Test everything in flight once and post the routed calls that may go. */
zc_status_t zc_ra_progress(zc_ra_ctx_t *ctx);
/* Non-zero while anything is in flight or waiting to be posted. */
int zc_ra_busy(const zc_ra_ctx_t *ctx);
/* Block (without spinning) until x is done; counted as exposed wait. */
zc_status_t zc_ra_wait(zc_ra_ctx_t *ctx, zc_ra_xchg_t *x);
/* Finish every routed call (this rank may be a proxy of any). */
zc_status_t zc_ra_drain(zc_ra_ctx_t *ctx);
/* After an error: give up on everything in flight. */
void zc_ra_abandon(zc_ra_ctx_t *ctx);

/* ---- src/coll/ring_attn/compute.c ---- */
/* Attention of this rank's query pieces (rows from q_row0 of its buffer)
 * against the pieces of kv, causal by global positions, accumulated into
 * the fp32 out/lse (forward) or dq and kv's dK/dV (backward). */
zc_status_t zc_ra_compute(zc_ra_ctx_t *ctx, const zc_plan_piece_t *qp, size_t nq, int64_t q_row0,
                          const zc_ra_kv_t *kv);

/* ---- src/coll/ring_attn/ring.c, src/coll/ring_attn/gather.c ---- */
/* acc[i] += in[i] (fp32 dK/dV sums of the host engine). */
void zc_ra_add(float *acc, const float *in, size_t n);
/* This rank's K|V rows of group g, packed into buf for the first hop
 * (either engine). */
zc_status_t zc_ra_pack_own(zc_ra_ctx_t *ctx, const zc_ra_group_t *g, void *buf);
/* The member whose KV position p of group g holds at step s (p - s). */
const zc_ra_member_t *zc_ra_owner(const zc_ra_group_t *g, int s);
/* The block of `owner` in a packed K|V buffer (and its fp32 dK|dV). */
zc_ra_kv_t zc_ra_block(const zc_ra_ctx_t *ctx, const zc_ra_member_t *owner, void *kv, float *dkv);

/* Where everything of one gathered group (LLaMA CP) sits. */
typedef struct {
    int64_t *owner_row;       /* [G + 1]: first row of each owner, owner-major */
    int64_t *seq_row;         /* [nrings]: first row of each sequence, sequence-major */
    zc_plan_piece_t *seqs;    /* [nrings]: each sequence whole, as one piece */
    int64_t total;
} zc_ra_gathered_t;

/* The layout of group g's gathered rows (host memory, kept in ctx). */
zc_status_t zc_ra_gathered_layout(zc_ra_ctx_t *ctx, const zc_ra_group_t *g,
                                  zc_ra_gathered_t *lay);
typedef zc_status_t (*zc_ra_copy_t)(void *arg, void *dst, const void *src, size_t bytes);
/* Rows of `row_bytes` from the owner-major to the sequence-major layout
 * (or back), one `copy` per piece. */
zc_status_t zc_ra_permute(const zc_ra_group_t *g, const zc_ra_gathered_t *lay, size_t row_bytes,
                          const void *from, void *to, int to_sequences, zc_ra_copy_t copy,
                          void *arg);

zc_status_t zc_ra_ring_fwd(zc_ra_ctx_t *ctx, int g);
zc_status_t zc_ra_ring_bwd(zc_ra_ctx_t *ctx, int g);
zc_status_t zc_ra_gather_fwd(zc_ra_ctx_t *ctx, int g);
zc_status_t zc_ra_gather_bwd(zc_ra_ctx_t *ctx, int g);

/* ---- src/coll/ring_attn/buffers.c: below every other part ---- */
/* Bytes of `tokens` rows of K and V together in dtype, or in fp32. */
size_t zc_ra_kv_bytes(const zc_ra_ctx_t *ctx, int64_t tokens);
size_t zc_ra_dkv_bytes(const zc_ra_ctx_t *ctx, int64_t tokens);
/* `bytes` from src to dst: memcpy, or the stream engine's device copy;
 * zc_ra_copy_cb is the same as a zc_ra_copy_t (arg: the ctx). */
zc_status_t zc_ra_copy(zc_ra_ctx_t *ctx, void *dst, const void *src, size_t bytes);
zc_status_t zc_ra_copy_cb(void *ctx, void *dst, const void *src, size_t bytes);
/* `count` fp32 values to the caller's dtype at dst (either engine); the
 * fp32 out (forward) or dq (backward) accumulator to the caller's. */
zc_status_t zc_ra_round(zc_ra_ctx_t *ctx, const float *src, int64_t count, void *dst);
zc_status_t zc_ra_round_acc(zc_ra_ctx_t *ctx);
/* dK/dV fp32 rows -> the caller's dk/dv (dtype) at row `row0` (either
 * engine). */
zc_status_t zc_ra_store_dkv(zc_ra_ctx_t *ctx, const float *dk, const float *dv, int64_t tokens,
                            int64_t row0);
/* The arguments of delta = rowsum(dout * out) over this rank's rows
 * (ctx->delta), for zc_attn_bwd_delta; cu_q and cu_kv are filled here. */
zc_attn_args_t zc_ra_delta_args(const zc_ra_ctx_t *ctx, int32_t cu_q[2], int32_t cu_kv[2]);
/* Staging buffer `slot` of at least `bytes`, kept for the whole call;
 * grow a slot only while none of its bytes are in flight. */
zc_status_t zc_ra_scratch(zc_ra_ctx_t *ctx, int slot, size_t bytes, void **buf);

#endif
