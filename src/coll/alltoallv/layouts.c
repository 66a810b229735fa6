/* zc_remap_alltoallv_layouts: a plan's tokens from one layout to another
 * along the runs of zc_plan_move_runs(), and what its stream form shares
 * (layouts.h).
 *
 * The runs of a pair of ranks are the same list at both ends (the k-th run
 * one sends is the k-th the other receives), so both ends cut the pair's
 * bytes into the same messages without telling each other: a run of at
 * least ZC_MOVE_ALONE_BYTES is a message of its own that leaves the send
 * buffer and lands in the receive buffer where it belongs, and the pair's
 * smaller runs are packed into one message, in order, and unpacked at the
 * other end; that is the only copy, and it happens where the layouts
 * interleave finely.  The ranks first agree on a fingerprint of the plan,
 * the layouts and the token size (src/core/agree.h), since ranks that
 * disagree would cut different messages.  The data then moves as
 * zc_remap_alltoallv's does: runs to itself as copies, pairwise-exchange
 * steps, the large messages between nodes striped over every rail by rate
 * (and over the others when one goes out) and at most ZC_ALLTOALLV_WINDOW
 * steps with one in flight. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/coll/alltoallv/layouts.h"
#include "src/core/memtype.h"
#include "src/core/sched.h"
#include "src/core/wire.h"
#include "src/common/hash.h"
#include "src/common/status.h"

/* Tag layout below the class: 12 bits of call sequence, 1 bit for the
 * agreement, then 19 bits of message: 0 the packed one, (k + 1) << 4 |
 * chunk for run k travelling alone (ZC_MOVE_ALONE_RUNS keeps k + 1 below
 * 2^15), the round for the agreement. */
#define ZC_MOVE_AGREE_BIT (1u << 19)
#define ZC_MOVE_CHUNK_BITS 4

static uint64_t zc_move_tag(const zc_move_t *m, int sender, unsigned msg)
{
    return ZC_TAG(sender, ZC_TAG_CLASS_MOVE, (m->seq & 0xfffu) << 20 | msg);
}

uint64_t zc_move_agree_tag(const void *ctx, int sender, int round)
{
    return zc_move_tag(ctx, sender, ZC_MOVE_AGREE_BIT | (unsigned)round);
}

zc_status_t zc_move_verdict(void *arg, int unused)
{
    const zc_agree_range_t *r = arg;

    (void)unused;
    if (r->lo == r->hi)
        return ZC_OK;
    if (r->lo == 0)
        return zc_error(ZC_ERR_MISMATCH, "rank %lld refused its own arguments to this call; "
                        "no data moved", (long long)r->lo_rank);
    return zc_error(ZC_ERR_MISMATCH, "plan: ranks %lld and %lld passed different plans, layouts "
                    "or token sizes (or forms: host and stream); no data moved",
                    (long long)r->lo_rank, (long long)r->hi_rank);
}

/* ---- arguments and runs --------------------------------------------------- */

static const char *zc_layout_name(zc_layout_t layout)
{
    return layout == ZC_LAYOUT_LOADER ? "loader" : layout == ZC_LAYOUT_ATTENTION ? "attention"
                                                                                 : "linear";
}

static zc_status_t zc_move_check(const struct zc_plan *plan, zc_layout_t from, zc_layout_t to,
                                 const void *sendbuf, const void *recvbuf,
                                 int64_t elems_per_token, size_t elem, const zc_move_t *m)
{
    int me = m->comm->rank;

    ZC_ARG_CHECK(plan != NULL, "plan: is NULL");
    ZC_CHECK(zc_plan_layout_check(from, "from"));
    ZC_CHECK(zc_plan_layout_check(to, "to"));
    ZC_ARG_CHECK(elem != 0, "dtype: not a zc_datatype_t");
    ZC_ARG_CHECK(elems_per_token > 0, "elems_per_token: %lld is not positive",
                 (long long)elems_per_token);
    if (plan->nranks != m->comm->size)
        return zc_error(ZC_ERR_MISMATCH, "plan: has %d ranks, the communicator %d", plan->nranks,
                        m->comm->size);
    int64_t stok = zc_plan_layout_tokens(plan, from, me), rtok = zc_plan_layout_tokens(plan, to, me);
    int64_t most = stok > rtok ? stok : rtok;
    ZC_ARG_CHECK((uint64_t)elems_per_token <= (uint64_t)PTRDIFF_MAX / elem / (uint64_t)(most + 1),
                 "elems_per_token: %lld elements x %lld tokens overflow the address space",
                 (long long)elems_per_token, (long long)most);
    ZC_ARG_CHECK(sendbuf != NULL || stok == 0,
                 "sendbuf: is NULL, but rank %d holds %lld tokens of the %s layout", me,
                 (long long)stok, zc_layout_name(from));
    ZC_ARG_CHECK(recvbuf != NULL || rtok == 0,
                 "recvbuf: is NULL, but rank %d holds %lld tokens of the %s layout", me,
                 (long long)rtok, zc_layout_name(to));
    return zc_check_disjoint(sendbuf, (size_t)stok * m->token, "sendbuf", recvbuf,
                             (size_t)rtok * m->token, "recvbuf");
}

/* at[p]: the first of `runs` (sorted by peer) with peer p; at[n]: the count. */
static void zc_move_index(const zc_plan_run_t *runs, size_t count, int n, size_t *at)
{
    size_t k = 0;

    for (int p = 0; p <= n; p++) {
        while (k < count && runs[k].peer < p)
            k++;
        at[p] = k;
    }
}

zc_status_t zc_move_prepare(zc_plan_h plan, zc_layout_t from, zc_layout_t to,
                            const void *sendbuf, void *recvbuf, int64_t elems_per_token,
                            zc_datatype_t dtype, zc_comm_h comm, int on_streams, zc_move_t *m)
{
    size_t elem = zc_datatype_size(dtype), nsend, nrecv;
    int n = comm->size;

    *m = (zc_move_t){.comm = comm, .sendbuf = sendbuf, .recvbuf = recvbuf,
                     .seq = comm->coll_seq++};
    m->token = elem * (size_t)(elems_per_token > 0 ? elems_per_token : 0);
    ZC_CHECK(zc_move_check(plan, from, to, sendbuf, recvbuf, elems_per_token, elem, m));
    ZC_CHECK(zc_plan_runs(plan, comm->rank, from, to, &m->send, &nsend, &m->recv, &nrecv));
    m->send_at = malloc(2 * ((size_t)n + 1) * sizeof(*m->send_at));
    if (!m->send_at)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the runs of %d ranks", n);
    m->recv_at = m->send_at + n + 1;
    zc_move_index(m->send, nsend, n, m->send_at);
    zc_move_index(m->recv, nrecv, n, m->recv_at);
    /* what shapes the messages, so that ranks cutting different ones never
     * wait for each other's */
    int64_t shape[6] = {(int64_t)from, (int64_t)to, (int64_t)m->token, on_streams,
                        comm->nrails, comm->settings.alltoallv_split_bytes};
    m->fingerprint = zc_fnv1a(zc_plan_fingerprint(plan), shape, sizeof(shape)) | 1;
    return ZC_OK;
}

void zc_move_free(zc_move_t *m)
{
    free(m->send);
    free(m->recv);
    free(m->send_at);
    m->send = m->recv = NULL;
    m->send_at = m->recv_at = NULL;
}

/* ---- the host schedule ---------------------------------------------------- */

typedef struct {
    const zc_move_t *m;
    zc_sched_t *sched;
    const zc_plan_run_t *send, *recv; /* the runs, in the schedule's staging */
    int agreed;  /* op every data op waits for: the verdict, or NONE */
    int gate;    /* op the current step's ops wait for (the window), or NONE */
    int last;    /* join of the current step's ops */
} zc_move_build_t;

static void zc_move_join(zc_move_build_t *b, int op)
{
    if (op >= 0)
        b->last = zc_sched_join(b->sched, b->last, op);
}

/* The packed message of a pair: its runs that do not travel alone, in
 * order, between the caller's buffer and the message. */
typedef struct {
    char *buf;                  /* sendbuf (packing) or recvbuf (unpacking) */
    char *msg;
    const zc_plan_run_t *runs;  /* all of the pair's runs */
    size_t nruns, token;
} zc_move_packed_t;

static zc_status_t zc_move_pack(void *arg, int unpack)
{
    const zc_move_packed_t *p = arg;
    char *msg = p->msg;

    for (size_t k = 0; k < p->nruns; k++) {
        size_t bytes = (size_t)p->runs[k].count * p->token;
        char *mine = p->buf + (size_t)p->runs[k].offset * p->token;

        if (zc_move_alone(bytes, k))
            continue;
        memcpy(unpack ? mine : msg, unpack ? msg : mine, bytes);
        msg += bytes;
    }
    return ZC_OK;
}

/* A run travelling alone: between nodes, from ZC_ALLTOALLV_SPLIT_BYTES on,
 * a striped transfer over the rails by their rates, sent again on the
 * others if one goes out (src/core/wire.c), as zc_remap_alltoallv's
 * blocks; its acknowledgements take the class's acknowledgement tags
 * (sched.c's one-chunk wires' convention). */
static void zc_move_post_alone(zc_move_build_t *b, zc_request_kind_t kind, char *buf,
                               size_t bytes, int peer, int sender, unsigned msg)
{
    zc_comm_h comm = b->m->comm;
    uint64_t tag = zc_move_tag(b->m, sender, msg);
    int send = kind == ZC_REQ_SEND, receiver = send ? peer : comm->rank;

    if (comm->nrails < 2 || comm->rank_node[peer] == comm->node ||
        (int64_t)bytes < comm->settings.alltoallv_split_bytes) {
        zc_move_join(b, zc_sched_p2p(b->sched, kind, buf, bytes, peer, tag, ZC_RAIL_AUTO,
                                     b->gate, b->agreed));
        return;
    }
    zc_wire_spec_t wire = {
        .peer = peer, .bytes = bytes, .chunk = zc_wire_chunk(comm, bytes, 1, ZC_MOVE_CHUNK_BITS),
        .tag = tag, .chunk_shift = 0, .chunk_bits = ZC_MOVE_CHUNK_BITS,
        .ack_tag = ZC_TAG(receiver, 0x80u | ZC_TAG_CLASS_MOVE, (uint32_t)tag),
        .seq = b->m->seq, .id = (uint32_t)tag, .home = -1,
        .src = send ? buf : NULL, .dst = send ? NULL : buf,
    };
    zc_move_join(b, zc_sched_wire(b->sched, &wire, send, b->gate, b->agreed));
}

/* Every message between this rank and `peer` in direction `kind`. */
static void zc_move_pair(zc_move_build_t *b, zc_request_kind_t kind, int peer)
{
    const zc_move_t *m = b->m;
    int send = kind == ZC_REQ_SEND, sender = send ? m->comm->rank : peer;
    const size_t *at = send ? m->send_at : m->recv_at;
    const zc_plan_run_t *runs = (send ? b->send : b->recv) + at[peer];
    size_t n = at[peer + 1] - at[peer], packed = 0;
    char *buf = send ? (char *)m->sendbuf : m->recvbuf;

    for (size_t k = 0; k < n; k++) {
        size_t bytes = (size_t)runs[k].count * m->token;

        if (zc_move_alone(bytes, k))
            zc_move_post_alone(b, kind, buf + (size_t)runs[k].offset * m->token, bytes, peer,
                               sender, (unsigned)(k + 1) << 4);
        else
            packed += bytes;
    }
    if (packed == 0)
        return;
    zc_move_packed_t *p = zc_sched_buffer(b->sched, sizeof(*p) + packed);
    if (!p)
        return;  /* the schedule fails at start */
    *p = (zc_move_packed_t){buf, (char *)(p + 1), runs, n, m->token};
    uint64_t tag = zc_move_tag(m, sender, 0);
    if (send) {
        int packing = zc_sched_call(b->sched, zc_move_pack, p, 0, b->gate, b->agreed);
        zc_move_join(b, zc_sched_p2p(b->sched, kind, p->msg, packed, peer, tag, ZC_RAIL_AUTO,
                                     packing, ZC_SCHED_NONE));
    } else {
        int got = zc_sched_p2p(b->sched, kind, p->msg, packed, peer, tag, ZC_RAIL_AUTO, b->gate,
                               b->agreed);
        zc_move_join(b, zc_sched_call(b->sched, zc_move_pack, p, 1, got, ZC_SCHED_NONE));
    }
}

/* Whether the pair's bytes in this direction cross nodes in a message the
 * window counts (as zc_remap_alltoallv's blocks of at least
 * ZC_ALLTOALLV_SPLIT_BYTES). */
static int zc_move_far_and_large(const zc_move_t *m, const size_t *at,
                                 const zc_plan_run_t *runs, int peer)
{
    int64_t tokens = 0;

    if (m->comm->rank_node[peer] == m->comm->node)
        return 0;
    for (size_t k = at[peer]; k < at[peer + 1]; k++)
        tokens += runs[k].count;
    return (int64_t)((size_t)tokens * m->token) >= m->comm->settings.alltoallv_split_bytes;
}

/* The runs into the schedule's staging: it outlives the call. */
static const zc_plan_run_t *zc_move_keep(zc_sched_t *sched, const zc_plan_run_t *runs, size_t n)
{
    zc_plan_run_t *kept = zc_sched_buffer(sched, n * sizeof(*runs));

    if (kept && n)
        memcpy(kept, runs, n * sizeof(*runs));
    return kept;
}

static void zc_move_steps(zc_move_build_t *b, int *joins)
{
    const zc_move_t *m = b->m;
    zc_comm_h comm = m->comm;
    int n = comm->size, me = comm->rank, large = 0;
    int64_t window = comm->settings.alltoallv_window;

    for (size_t k = m->send_at[me]; k < m->send_at[me + 1]; k++)
        zc_sched_copy(b->sched, m->recvbuf + (size_t)b->send[k].peer_offset * m->token,
                      m->sendbuf + (size_t)b->send[k].offset * m->token,
                      (size_t)b->send[k].count * m->token, b->agreed, ZC_SCHED_NONE);
    /* Step i: receive from rank - i, send to rank + i, receives first. */
    for (int i = 1; i < n; i++) {
        int from = (me - i + n) % n, to = (me + i) % n;
        int small = !zc_move_far_and_large(m, m->recv_at, b->recv, from) &&
                    !zc_move_far_and_large(m, m->send_at, b->send, to);

        b->gate = !small && window > 0 && large >= window ? joins[large - window]
                                                          : ZC_SCHED_NONE;
        b->last = ZC_SCHED_NONE;
        zc_move_pair(b, ZC_REQ_RECV, from);
        zc_move_pair(b, ZC_REQ_SEND, to);
        if (!small)
            joins[large++] = b->last;
    }
}

static zc_status_t zc_move_schedule(const zc_move_t *m, zc_request_h *request)
{
    zc_comm_h comm = m->comm;
    zc_move_build_t b = {.m = m, .agreed = ZC_SCHED_NONE, .gate = ZC_SCHED_NONE};
    int *joins = malloc((size_t)comm->size * sizeof(*joins));
    zc_status_t st;

    if (!joins)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the steps of %d ranks", comm->size);
    st = zc_sched_create(comm, &b.sched);
    if (st != ZC_OK) {
        free(joins);
        return st;
    }
    zc_sched_set_call(b.sched, m->seq);
    b.send = zc_move_keep(b.sched, m->send, m->send_at[comm->size]);
    b.recv = zc_move_keep(b.sched, m->recv, m->recv_at[comm->size]);
    if (comm->settings.alltoallv_check) {
        zc_agree_range_t *range;
        int agreed = zc_agree_sched(b.sched, comm, m->fingerprint, zc_move_agree_tag, m, &range);

        b.agreed = zc_sched_call(b.sched, zc_move_verdict, range, 0, agreed, ZC_SCHED_NONE);
    }
    if (b.send && b.recv)  /* else out of memory: the schedule fails at start */
        zc_move_steps(&b, joins);
    free(joins);
    return zc_sched_start(b.sched, request);
}

zc_status_t zc_remap_alltoallv_layouts(zc_plan_h plan, zc_layout_t from, zc_layout_t to,
                                       const void *sendbuf, void *recvbuf,
                                       int64_t elems_per_token, zc_datatype_t dtype,
                                       zc_memtype_t memtype, zc_comm_h comm,
                                       zc_request_h *request)
{
    zc_move_t m;
    zc_status_t st;

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    st = zc_move_prepare(plan, from, to, sendbuf, recvbuf, elems_per_token, dtype, comm, 0, &m);
    if (st == ZC_OK && !request)
        st = zc_error(ZC_ERR_INVALID_ARG, "request: is NULL");
    if (st == ZC_OK)
        st = zc_memtype_check_host_path(sendbuf, memtype, "sendbuf");
    if (st == ZC_OK)
        st = zc_memtype_check_host_path(recvbuf, memtype, "recvbuf");
    if (st == ZC_OK)
        st = zc_move_schedule(&m, request);
    else if (comm->settings.alltoallv_check)  /* the others fail at once, not at the timeout */
        st = zc_agree_refuse(comm, st, zc_move_agree_tag, &m, m.seq);
    zc_move_free(&m);
    return st;
}
