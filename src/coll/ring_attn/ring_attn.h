/* Ring attention engine (zc_ring_attn_fwd/bwd), internal view shared by
 * its parts:
 *   src/coll/ring_attn/ring_attn.c     public calls: checks, agreement, accumulators, zones
 *   src/coll/ring_attn/groups.c   plan -> layout: ring groups, the routed-call list, gathers
 *   src/coll/ring_attn/state.c    what a communicator keeps between calls: layouts, and
 *                                 the stream engine's streams, events and memory
 *   src/coll/ring_attn/xfer.c     transfers: direct hops, routed calls, progress, waits
 *   src/coll/ring_attn/compute.c  one block: pieces -> kernel segments by global position
 *   src/coll/ring_attn/dispatch.c where a kernel call runs: libzcomm's kernels or the
 *                                 caller's kernel table
 *   src/coll/ring_attn/ring.c     ring pipelines (Zeppelin and TE CP modes)
 *   src/coll/ring_attn/gather.c   all-gather / reduce-scatter (LLaMA CP mode)
 *   src/coll/ring_attn/buffers.c  staging, copies, row sizes, fp32 -> the caller's dtype
 * and the stream-ordered engine of the device path (src/coll/ring_attn/stream_engine.h),
 * which shares the checks, the groups and the kernel segments. */
#ifndef ZC_RING_ATTN_H
#define ZC_RING_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/attn_math.h"
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
    ZC_RA_KIND_SCATTER_DV,
    ZC_RA_KIND_VERDICT      /* agreement on a kernel table's failure, after the call */
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
    int *last;                /* [G]: the last step at which owner o's KV is held, its
                               * reach (zc_ra_reach): G - 1 goes all the way round, 0
                               * stays home.  A hop carries only KV some later member
                               * of its chain sees, on either engine
                               * (src/coll/ring_attn/ring.c, stream_engine.c) */
} zc_ra_group_t;

/* A zc_routed_sendrecv call: every rank makes them all, in list order. */
typedef struct {
    zc_transfer_t *transfers;
    int ntransfers;
    int mine;                 /* this rank is the src or dst of one of them */
    /* the host engine's, set again by every call (zc_ra_layout_use) */
    int ready;                /* mine: buffers given; otherwise always */
    const void *sendbuf;
    void *recvbuf;
    int *notify;              /* decremented when done (mine) */
} zc_ra_routed_t;

/* Where everything of one gathered group (LLaMA CP) sits. */
typedef struct {
    int64_t *owner_row;       /* [G + 1]: first row of each owner, owner-major */
    int64_t *seq_row;         /* [nrings]: first row of each sequence, sequence-major */
    zc_plan_piece_t *seqs;    /* [nrings]: each sequence whole, as one piece (owns the block) */
    int64_t total;
} zc_ra_gathered_t;

/* What a layout is derived from, besides the communicator's rank. */
typedef struct {
    uint64_t plan;            /* the plan's serial */
    int64_t row_kv;           /* K|V row: the routed calls' byte counts */
    size_t elem;
    int mode, backward, reverse;
    int64_t mask_left, mask_right; /* the call's mask: what the hops skip */
} zc_ra_layout_key_t;

/* The ring groups of a call, the routed-call list every rank makes and,
 * in LLaMA CP mode, each group's gathered layout (src/coll/ring_attn/groups.c);
 * kept by the communicator across calls (src/coll/ring_attn/state.c). */
typedef struct {
    zc_ra_layout_key_t key;
    uint64_t last_use;
    zc_ra_group_t *groups;    /* run order: inter-node groups first, then intra-node;
                               * reversed when key.reverse */
    int ngroups;
    int *group_rings;         /* every group's ring ids, group after group */
    int ngroup_rings;
    zc_ra_routed_t *routed;   /* every rank's list, in call order */
    int nrouted;
    zc_ra_gathered_t *gathered; /* [ngroups], LLaMA CP mode only */
} zc_ra_layout_t;

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

/* The caller's kernel table of a call (src/coll/ring_attn/dispatch.c). */
typedef struct {
    int on;                   /* args->kernels given */
    zc_attn_kernels_t kernels; /* its copy, read once */
    zc_status_t failed;       /* this rank's table failed: the first status... */
    char why[256];            /* ...and what it was given */
    zc_status_t verdict;      /* the failure every rank returns, its transfers all done */
    void *host;               /* staging of the host engine */
    size_t host_bytes;
} zc_ra_table_t;

typedef struct {
    zc_comm_h comm;
    zc_plan_h plan;
    const zc_ring_attn_args_t *args;
    int backward;
    int reverse;              /* backward in the paper's reverse queue order (Fig. 12c):
                               * local, then the groups last to first
                               * (ZC_RING_ATTN_BWD_ORDER; host engine only) */
    float scale;
    zc_attn_mask_t mask;      /* the call's (args' flags and window) */
    size_t elem;              /* bytes of one element of dtype */
    int64_t row_q, row_kv;    /* elements of one token of q, of k */
    unsigned seq;             /* call sequence, in the tags */
    uint32_t rail_weights[ZC_MAX_RAILS]; /* the routed calls' per-rail shares (zc_ra_begin) */

    const zc_plan_piece_t *pieces; /* this rank's, buffer order */
    size_t npieces;
    int64_t tokens;           /* this rank's rows in the plan */
    size_t local_first;       /* first local piece */
    int64_t local_row0;

    /* the communicator's layout of this call (zc_ra_layout_use), and its
     * groups and routed calls */
    zc_ra_layout_t *layout;
    zc_ra_group_t *groups;
    int ngroups;
    zc_ra_routed_t *routed;
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

    zc_ra_table_t table;
} zc_ra_ctx_t;

/* ---- src/coll/ring_attn/ring_attn.c: what both engines share ---- */
/* `check` on each tensor of a call (forward: q, k, v, out, lse; backward
 * also dout, dq, dk, dv), with args->memtype and the tensor's name. */
zc_status_t zc_ra_check_tensors(const zc_ring_attn_args_t *args, int backward,
                                zc_status_t (*check)(const void *buf, zc_memtype_t memtype,
                                                     const char *arg));
/* The engine's own checks of a call on comm: its tensors' dtype and memory
 * type, the device it runs on. */
typedef zc_status_t (*zc_ra_engine_check_t)(zc_comm_h comm, const zc_ring_attn_args_t *args,
                                            int backward);
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
/* The layout of ctx's call (after zc_ra_begin's checks set its shape). */
zc_status_t zc_ra_layout_build(const zc_ra_ctx_t *ctx, zc_ra_layout_t **layout);
zc_ra_layout_key_t zc_ra_layout_key(const zc_ra_ctx_t *ctx);
void zc_ra_layout_free(zc_ra_layout_t *layout);

/* ---- src/coll/ring_attn/state.c ---- */
/* Layouts a communicator keeps; past it the least recently used goes. */
#define ZC_RA_LAYOUTS 8

/* What ring attention keeps on a communicator between calls (comm->ring_attn). */
typedef struct {
    zc_ra_layout_t *layouts[ZC_RA_LAYOUTS];
    int nlayouts;
    uint64_t clock;
    int64_t layouts_built;    /* builds, not uses (the tests count them) */
    /* the stream engine's (src/coll/ring_attn/stream_engine.h), made by its
     * first call, and how it goes */
    void *stream;
    void (*stream_release)(void *stream);
} zc_ra_state_t;

/* comm's state, made on first use. */
zc_status_t zc_ra_state_get(zc_comm_h comm, zc_ra_state_t **state);
/* The stream engine's state goes now (after an error), the rest stays. */
void zc_ra_state_drop_stream(zc_ra_state_t *state);
/* ctx->layout, groups and routed calls for ctx's call: the communicator's
 * layout of the same key, or one built now (dropping the least recently
 * used past ZC_RA_LAYOUTS); the host engine's fields of its routed calls
 * set for a new call. */
zc_status_t zc_ra_layout_use(zc_ra_ctx_t *ctx);

/* Owner o's position at step s as seen from position p: p - s mod G. */
int zc_ra_owner_at(const zc_ra_group_t *g, int p, int s);
/* Does position p of group g hold a block at step s (owner p - s's KV
 * reaches it)?  Both engines compute a step only there. */
int zc_ra_holds(const zc_ra_group_t *g, int p, int s);
/* Does position p of group g send a KV hop into step s (s >= 1)?  It
 * holds owner p - (s - 1), whose KV goes on while s <= its reach. */
int zc_ra_kv_hop(const zc_ra_group_t *g, int p, int s);
/* Does position p send dK/dV to p + 1 after step s?  While the owner's
 * KV goes further, and after step G - 1 (the hop home); an accumulator
 * whose chain ends earlier goes home directly (zc_ra_dkv_home). */
int zc_ra_dkv_hop(const zc_ra_group_t *g, int p, int s);
/* Does position p send owner p - s's dK/dV home directly after step s? */
int zc_ra_dkv_home(const zc_ra_group_t *g, int p, int s);

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
/* The mask of one block: every segment fully visible, every segment
 * top-left causal with as many keys as queries, every segment
 * bottom-right causal (its last query sees its last key), or every segment
 * under the call's window at its true positions (pos_q, pos_kv). */
typedef enum { ZC_RA_FULL, ZC_RA_CAUSAL, ZC_RA_BOTTOM_RIGHT, ZC_RA_WINDOW } zc_ra_mask_t;

/* One kernel call of a step, in varlen form: segment b's query rows start
 * at q_row0 + cu_q[b] (rows of this rank's buffer) and the first used_q[b]
 * of them are in the block, its keys at kv_row0 + cu_kv[b] (rows of the
 * step's keys) and used_kv[b] of them; a causal segment's offset is
 * used_kv[b] - used_q[b] >= 0.  The rows up to cu[b + 1] past the used
 * ones are not in the block. */
typedef struct {
    zc_ra_mask_t mask;
    int batch;
    int64_t q_row0, kv_row0;
    int32_t *cu_q, *cu_kv;     /* [batch + 1], from 0, non-decreasing */
    int32_t *used_q, *used_kv; /* [batch], at least 1 each */
    int32_t *pos_q, *pos_kv;   /* [batch], ZC_RA_WINDOW: the positions in their sequence
                                * of the first used query and key */
} zc_ra_block_t;

typedef struct {
    zc_ra_block_t *v;
    int n, cap;
} zc_ra_blocks_t;

/* The blocks of a step: this rank's query pieces (rows from q_row0)
 * against the key pieces of kv, under `mask` by global positions; every
 * query row that sees a key is in exactly one segment per key range it
 * sees (see the top of compute.c).  zc_ra_blocks_free frees them. */
zc_status_t zc_ra_blocks(const zc_plan_piece_t *qp, size_t nq, int64_t q_row0,
                         const zc_ra_kv_t *kv, zc_attn_mask_t mask, zc_ra_blocks_t *blocks);
void zc_ra_blocks_free(zc_ra_blocks_t *blocks);
/* Attention of this rank's query pieces (rows from q_row0 of its buffer)
 * against the pieces of kv, under ctx->mask by global positions, accumulated into
 * the fp32 out/lse (forward) or dq and kv's dK/dV (backward). */
zc_status_t zc_ra_compute(zc_ra_ctx_t *ctx, const zc_plan_piece_t *qp, size_t nq, int64_t q_row0,
                          const zc_ra_kv_t *kv);

/* ---- src/coll/ring_attn/dispatch.c ---- */
/* Kernel call `a` of the engine (ZC_ATTN_ACCUMULATE into the call's
 * accumulators) on libzcomm's kernels or ctx's kernel table, timed and
 * counted in the stats. */
zc_status_t zc_ra_dispatch(zc_ra_ctx_t *ctx, const zc_attn_args_t *a);
/* args->kernels read into *t (its size's worth; defaults when NULL) and
 * checked for pass `backward`. */
zc_status_t zc_ra_table_read(const zc_ring_attn_args_t *a, int backward, zc_attn_kernels_t *t);
/* After a call's whole schedule (every rank's transfers matched), with a
 * kernel table: the status of the lowest rank whose table failed, on every
 * rank (also kept in ctx->table.verdict), else ZC_OK. */
zc_status_t zc_ra_table_verdict(zc_ra_ctx_t *ctx);

/* ---- src/coll/ring_attn/ring.c, src/coll/ring_attn/gather.c ---- */
/* acc[i] += in[i] (fp32 dK/dV sums of the host engine). */
void zc_ra_add(float *acc, const float *in, size_t n);
/* This rank's K|V rows of group g, packed into buf for the first hop
 * (either engine). */
zc_status_t zc_ra_pack_own(zc_ra_ctx_t *ctx, const zc_ra_group_t *g, void *buf);
/* Bytes this rank sends to the next member and receives from the
 * previous one in group g's KV hop into step s + 1, and in its dK/dV hop
 * after step s: 0 past the owner's reach (either engine). */
void zc_ra_kv_step_bytes(const zc_ra_ctx_t *ctx, const zc_ra_group_t *g, int s, size_t *out,
                         size_t *in);
void zc_ra_dkv_step_bytes(const zc_ra_ctx_t *ctx, const zc_ra_group_t *g, int s, size_t *out,
                          size_t *in);
/* The member that sends this rank's dK/dV accumulator of group g home
 * directly, after step g->last[g->pos] (zc_ra_dkv_home), or NULL when it
 * comes round the ring (or never leaves). */
const zc_ra_member_t *zc_ra_home_from(const zc_ra_group_t *g);
/* The member whose KV position p of group g holds at step s (p - s). */
const zc_ra_member_t *zc_ra_owner(const zc_ra_group_t *g, int s);
/* The block of `owner` in a packed K|V buffer (and its fp32 dK|dV). */
zc_ra_kv_t zc_ra_block(const zc_ra_ctx_t *ctx, const zc_ra_member_t *owner, void *kv, float *dkv);

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
