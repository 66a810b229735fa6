/* zc_remap_alltoallv: variable-count all-to-all with 64-bit counts.
 *
 * Two phases.  The agreement (unless ZC_ALLTOALLV_CHECK=0) tells every
 * rank whether both ends of every block name the same size, so that a
 * disagreement anywhere fails the call on every rank before any data
 * reaches a receive buffer: nobody waits for a block its peer will not
 * send.  Up to ZC_ALLTOALLV_ROWS_MAX ranks it is one round of whole count
 * rows inside the schedule, and blocks of at most ZC_A2AV_INLINE_BYTES
 * travel in the same message as the rows (staged, copied out once the
 * rows agree): a call of small blocks costs one round.  With the same
 * number of ranks on every node that round is relayed: one message per
 * partner on each other node, then one per rank of the node
 * (zc_a2av_rows_relayed), fewer messages than the blocks themselves, so
 * ZC_ALLTOALLV_CHECK=0 keeps the round and only stops holding the larger
 * blocks for its verdict.  Larger communicators agree in two rounds of
 * pairwise sizes and verdicts, inside the call, before the schedule is
 * built.
 *
 * The data phase is a schedule (sched.h) that zc_test and zc_wait
 * progress: the self block is a copy, blocks inside a node go over shared
 * memory, and blocks between nodes of at least ZC_ALLTOALLV_SPLIT_BYTES
 * are striped transfers (src/core/wire.c): chunks sent on every NIC at once,
 * each rail's share in proportion to its rate (src/core/rail_rates.h), and
 * sent again on the others when one goes out mid-call.  Every rank has a
 * lane on every rail, so chunks go straight to their destination: no proxy
 * hop is needed.  Steps follow the pairwise-exchange
 * order (step i sends to rank + i, receives from rank - i), so at any time
 * every rank sends to a different peer, and at most ZC_ALLTOALLV_WINDOW
 * steps with a large block are in flight. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/coll/alltoallv/alltoallv.h"
#include "src/core/comm.h"
#include "src/core/memtype.h"
#include "src/coll/routed/route.h"
#include "src/core/sched.h"
#include "src/common/status.h"

/* Tag layout below the class: stage, call sequence, slice (a block split
 * over the rails: its chunk number; 0 otherwise). */
enum { ZC_A2AV_SIZES, ZC_A2AV_VERDICT, ZC_A2AV_DATA, ZC_A2AV_ACK };
#define ZC_A2AV_CHUNK_BITS 8

static uint64_t zc_a2av_tag(int sender, int stage, unsigned seq, int slice)
{
    uint32_t low = (uint32_t)stage << 30 | (seq & 0x3fffffu) << 8 | (uint32_t)slice;
    return ZC_TAG(sender, ZC_TAG_CLASS_ALLTOALLV, low);
}

/* Blocks up to this size ride with the count rows (one eager message per
 * pair); larger ones move after the agreement.  A constant, not a
 * setting: both ends must draw the line at the same size. */
#define ZC_A2AV_INLINE_KIB 8
#define ZC_A2AV_INLINE_BYTES (ZC_A2AV_INLINE_KIB * 1024)

/* The caller's arguments, in bytes. */
typedef struct {
    zc_comm_h comm;
    const char *sendbuf;
    char *recvbuf;
    const int64_t *sendcounts, *sdispls, *recvcounts, *rdispls;
    size_t elem;
    unsigned seq;
} zc_a2av_args_t;

static size_t zc_a2av_send_bytes(const zc_a2av_args_t *a, int peer)
{
    return (size_t)a->sendcounts[peer] * a->elem;
}

static size_t zc_a2av_recv_bytes(const zc_a2av_args_t *a, int peer)
{
    return (size_t)a->recvcounts[peer] * a->elem;
}

/* Where the block for `peer` starts in sendbuf. */
static const char *zc_a2av_send_at(const zc_a2av_args_t *a, int peer)
{
    return a->sendbuf + (size_t)a->sdispls[peer] * a->elem;
}

/* ---- argument checks ---------------------------------------------------- */

typedef struct {
    uintptr_t begin, end;
    int peer;
    int recv;           /* 1: a block of recvbuf */
} zc_a2av_extent_t;

static int zc_a2av_extent_cmp(const void *a, const void *b)
{
    const zc_a2av_extent_t *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->peer - y->peer;
}

zc_status_t zc_alltoallv_check_counts(const int64_t *counts, const int64_t *displs, int n,
                                      size_t elem, const void *buf, const char *counts_name,
                                      const char *displs_name, const char *buf_name)
{
    ZC_ARG_CHECK(counts != NULL, "%s: is NULL", counts_name);
    ZC_ARG_CHECK(displs != NULL, "%s: is NULL", displs_name);
    for (int j = 0; j < n; j++) {
        ZC_ARG_CHECK(counts[j] >= 0, "%s[%d]: %lld is negative", counts_name, j,
                     (long long)counts[j]);
        ZC_ARG_CHECK(displs[j] >= 0, "%s[%d]: %lld is negative", displs_name, j,
                     (long long)displs[j]);
        ZC_ARG_CHECK((uint64_t)counts[j] + (uint64_t)displs[j] <= (uint64_t)PTRDIFF_MAX / elem,
                     "%s[%d] + %s[%d]: %lld + %lld elements overflow the address space",
                     displs_name, j, counts_name, j, (long long)displs[j], (long long)counts[j]);
        ZC_ARG_CHECK(buf != NULL || counts[j] == 0, "%s: is NULL but %s[%d] is %lld", buf_name,
                     counts_name, j, (long long)counts[j]);
    }
    return ZC_OK;
}

/* The usual layout passes in one look, without sorting (the sort was 1%
 * of a crowded rank's samples in a small alltoallv): receive blocks in rank
 * order at rising addresses, all of them outside the span of the send
 * blocks.  Zero means "look closer", not "overlap". */
static int zc_a2av_apart_in_order(const zc_a2av_args_t *a)
{
    uintptr_t send_lo = UINTPTR_MAX, send_hi = 0, recv_lo = UINTPTR_MAX, recv_hi = 0;

    for (int j = 0; j < a->comm->size; j++) {
        uintptr_t send = (uintptr_t)zc_a2av_send_at(a, j);
        uintptr_t recv = (uintptr_t)a->recvbuf + (size_t)a->rdispls[j] * a->elem;
        if (a->sendcounts[j] > 0) {
            uintptr_t end = send + zc_a2av_send_bytes(a, j);
            send_lo = send < send_lo ? send : send_lo;
            send_hi = end > send_hi ? end : send_hi;
        }
        if (a->recvcounts[j] > 0) {
            if (recv < recv_hi)
                return 0;
            recv_lo = recv_lo == UINTPTR_MAX ? recv : recv_lo;
            recv_hi = recv + zc_a2av_recv_bytes(a, j);
        }
    }
    return send_hi <= recv_lo || recv_hi <= send_lo;
}

/* No two receive blocks may overlap, and no receive block may overlap a
 * send block (the blocks move in no defined order).  Send blocks may
 * overlap each other: they are only read. */
static zc_status_t zc_a2av_check_overlap(const zc_a2av_args_t *a)
{
    int n = a->comm->size, m = 0;

    if (zc_a2av_apart_in_order(a))
        return ZC_OK;
    zc_a2av_extent_t *ext = malloc(sizeof(*ext) * 2 * (size_t)n + 1);
    zc_status_t st = ZC_OK;
    uintptr_t send_end = 0, recv_end = 0;
    int send_peer = -1, recv_peer = -1;

    if (!ext)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate %d block extents", 2 * n);
    for (int j = 0; j < n; j++) {
        uintptr_t send = (uintptr_t)a->sendbuf + (size_t)a->sdispls[j] * a->elem;
        uintptr_t recv = (uintptr_t)a->recvbuf + (size_t)a->rdispls[j] * a->elem;
        if (a->sendcounts[j] > 0)
            ext[m++] = (zc_a2av_extent_t){send, send + zc_a2av_send_bytes(a, j), j, 0};
        if (a->recvcounts[j] > 0)
            ext[m++] = (zc_a2av_extent_t){recv, recv + zc_a2av_recv_bytes(a, j), j, 1};
    }
    qsort(ext, (size_t)m, sizeof(*ext), zc_a2av_extent_cmp);
    /* Sweep in address order, remembering how far the send and the
     * receive blocks seen so far reach. */
    for (int i = 0; i < m && st == ZC_OK; i++) {
        const zc_a2av_extent_t *e = &ext[i];
        if (e->recv && e->begin < recv_end)
            st = zc_error(ZC_ERR_INVALID_ARG,
                          "rdispls: the receive blocks of ranks %d and %d overlap", recv_peer,
                          e->peer);
        else if (e->recv && e->begin < send_end)
            st = zc_error(ZC_ERR_INVALID_ARG,
                          "recvbuf: the receive block of rank %d overlaps the send block of "
                          "rank %d (no in-place alltoallv)", e->peer, send_peer);
        else if (!e->recv && e->begin < recv_end)
            st = zc_error(ZC_ERR_INVALID_ARG,
                          "recvbuf: the receive block of rank %d overlaps the send block of "
                          "rank %d (no in-place alltoallv)", recv_peer, e->peer);
        if (e->recv && e->end > recv_end)
            recv_end = e->end, recv_peer = e->peer;
        if (!e->recv && e->end > send_end)
            send_end = e->end, send_peer = e->peer;
    }
    free(ext);
    return st;
}

static zc_status_t zc_a2av_check(const zc_a2av_args_t *a, zc_datatype_t dtype,
                                 zc_memtype_t memtype)
{
    int n = a->comm->size;

    ZC_ARG_CHECK(a->elem != 0, "dtype: %d is not a zc_datatype_t", (int)dtype);
    ZC_CHECK(zc_alltoallv_check_counts(a->sendcounts, a->sdispls, n, a->elem, a->sendbuf,
                                       "sendcounts", "sdispls", "sendbuf"));
    ZC_CHECK(zc_alltoallv_check_counts(a->recvcounts, a->rdispls, n, a->elem, a->recvbuf,
                                       "recvcounts", "rdispls", "recvbuf"));
    ZC_CHECK(zc_memtype_check_host_path(a->sendbuf, memtype, "sendbuf"));
    ZC_CHECK(zc_memtype_check_host_path(a->recvbuf, memtype, "recvbuf"));
    return zc_a2av_check_overlap(a);
}

/* ---- agreement ---------------------------------------------------------- */

/* Up to ZC_ALLTOALLV_ROWS_MAX ranks every rank sends its whole count rows
 * to every other (16 n bytes each) and checks every block itself: one
 * round.  Beyond, the pairs swap their two sizes and then every rank sends
 * its verdict to every other: two rounds of 16 and 40 bytes, O(n) bytes per
 * rank instead of O(n^2). */

/* A disagreement: block src -> dst, the bytes each end names. */
typedef struct {
    int64_t src, dst;
    int64_t sent, expected;
} zc_a2av_bad_t;

/* What a rank knows after the agreement. */
typedef struct {
    int64_t blocks;          /* blocks that disagree, over all ranks */
    zc_a2av_bad_t mine;      /* the first one this rank is an end of */
    zc_a2av_bad_t any;       /* the first one anywhere */
    int have_mine;
} zc_a2av_findings_t;

/* Remember `bad` when it is this rank's first own disagreement. */
static void zc_a2av_mine(zc_a2av_findings_t *f, int me, zc_a2av_bad_t bad)
{
    if (!f->have_mine && (bad.src == me || bad.dst == me)) {
        f->mine = bad;
        f->have_mine = 1;
    }
}

static void zc_a2av_found(zc_a2av_findings_t *f, int me, zc_a2av_bad_t bad)
{
    if (f->blocks++ == 0)
        f->any = bad;
    zc_a2av_mine(f, me, bad);
}

/* One round: send out + j * out_stride to and receive in + j * len from
 * every other rank j. */
static zc_status_t zc_a2av_swap(const zc_a2av_args_t *a, int stage, const void *out,
                                size_t out_stride, void *in, size_t len)
{
    zc_comm_h comm = a->comm;
    zc_sched_t *s;
    zc_status_t st;

    ZC_CHECK(zc_sched_create(comm, &s));
    zc_sched_set_call(s, a->seq);
    for (int i = 1; i < comm->size; i++) {
        int to = (comm->rank + i) % comm->size, from = (comm->rank - i + comm->size) % comm->size;
        zc_sched_p2p(s, ZC_REQ_RECV, (char *)in + len * (size_t)from, len, from,
                     zc_a2av_tag(from, stage, a->seq, 0), ZC_RAIL_AUTO, ZC_SCHED_NONE,
                     ZC_SCHED_NONE);
        zc_sched_p2p(s, ZC_REQ_SEND, (char *)out + out_stride * (size_t)to, len, to,
                     zc_a2av_tag(comm->rank, stage, a->seq, 0), ZC_RAIL_AUTO, ZC_SCHED_NONE,
                     ZC_SCHED_NONE);
    }
    st = zc_sched_wait(s);
    zc_sched_destroy(s);
    return st;
}

/* rows[r * 2n + j]: bytes rank r sends to j; rows[r * 2n + n + j]: bytes
 * rank r expects from j.  Fills this rank's own rows. */
static void zc_a2av_my_rows(const zc_a2av_args_t *a, int64_t *rows)
{
    int n = a->comm->size;
    int64_t *mine = rows + (size_t)a->comm->rank * 2 * (size_t)n;

    for (int j = 0; j < n; j++) {
        mine[j] = (int64_t)zc_a2av_send_bytes(a, j);
        mine[n + j] = (int64_t)zc_a2av_recv_bytes(a, j);
    }
}

/* Every block of every rank's rows (as zc_a2av_my_rows lays them out). */
static void zc_a2av_check_rows(const int64_t *rows, int n, int me, zc_a2av_findings_t *f)
{
    size_t row = 2 * (size_t)n;

    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int64_t sent = rows[(size_t)i * row + (size_t)j];
            int64_t expected = rows[(size_t)j * row + (size_t)n + (size_t)i];
            if (sent != expected)
                zc_a2av_found(f, me, (zc_a2av_bad_t){i, j, sent, expected});
        }
}

/* One round: every rank gets every row and checks every block. */
static zc_status_t zc_a2av_agree_rows(const zc_a2av_args_t *a, zc_a2av_findings_t *f)
{
    int n = a->comm->size, me = a->comm->rank;
    size_t row = 2 * (size_t)n;
    int64_t *rows = malloc(sizeof(*rows) * row * (size_t)n);
    zc_status_t st;

    if (!rows)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the count rows of %d ranks", n);
    zc_a2av_my_rows(a, rows);
    st = zc_a2av_swap(a, ZC_A2AV_SIZES, rows + (size_t)me * row, 0, rows, sizeof(*rows) * row);
    if (st == ZC_OK)
        zc_a2av_check_rows(rows, n, me, f);
    free(rows);
    return st;
}

/* What a pair swaps: the sizes of the two blocks between them. */
typedef struct {
    int64_t to_you, from_you;
} zc_a2av_pair_t;

/* A rank's verdict in the second round: the blocks it sends that
 * disagree (so that every block is counted once), and its first one. */
typedef struct {
    int64_t blocks;
    zc_a2av_bad_t first;
} zc_a2av_verdict_t;

/* Two rounds: the pairs compare, then everyone hears every verdict. */
static zc_status_t zc_a2av_agree_pairs(const zc_a2av_args_t *a, zc_a2av_findings_t *f)
{
    int n = a->comm->size, me = a->comm->rank;
    zc_a2av_pair_t *theirs = malloc(sizeof(*theirs) * (size_t)n);
    zc_a2av_pair_t *mine = calloc((size_t)n, sizeof(*mine));  /* calloc: gcc cannot see n > 0 */
    zc_a2av_verdict_t *verdicts = malloc(sizeof(*verdicts) * (size_t)n), v = {0};
    zc_status_t st = ZC_OK;

    if (!theirs || !mine || !verdicts) {
        st = zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the count agreement of %d ranks", n);
        goto out;
    }
    for (int j = 0; j < n; j++)
        mine[j] = (zc_a2av_pair_t){(int64_t)zc_a2av_send_bytes(a, j),
                                   (int64_t)zc_a2av_recv_bytes(a, j)};
    ZC_CHECK_GOTO(zc_a2av_swap(a, ZC_A2AV_SIZES, mine, sizeof(*mine), theirs, sizeof(*theirs)),
                  st, out);
    theirs[me] = mine[me];
    for (int j = 0; j < n; j++) {
        if (mine[j].to_you != theirs[j].from_you) {
            zc_a2av_bad_t bad = {me, j, mine[j].to_you, theirs[j].from_you};
            if (v.blocks++ == 0)
                v.first = bad;
            zc_a2av_mine(f, me, bad);
        }
        if (j != me && mine[j].from_you != theirs[j].to_you)
            zc_a2av_mine(f, me, (zc_a2av_bad_t){j, me, theirs[j].to_you, mine[j].from_you});
    }
    ZC_CHECK_GOTO(zc_a2av_swap(a, ZC_A2AV_VERDICT, &v, 0, verdicts, sizeof(v)), st, out);
    verdicts[me] = v;
    for (int j = 0; j < n; j++) {
        if (verdicts[j].blocks && f->blocks == 0)
            f->any = verdicts[j].first;
        f->blocks += verdicts[j].blocks;
    }
out:
    free(theirs);
    free(mine);
    free(verdicts);
    return st;
}

/* The findings as a status: ZC_ERR_MISMATCH naming the block and both
 * sizes on its two ranks, the first disagreement anywhere on the others;
 * `moved` says what became of the data. */
static zc_status_t zc_a2av_verdict(const zc_a2av_findings_t *fp, int me, const char *moved)
{
    const zc_a2av_findings_t f = *fp;

    if (f.blocks == 0)
        return ZC_OK;
    if (f.have_mine && f.mine.src == me)
        return zc_error(ZC_ERR_MISMATCH,
                        "sendcounts[%lld]: rank %d sends %lld bytes to rank %lld, which expects "
                        "%lld (its recvcounts[%d]); %lld block(s) disagree, %s",
                        (long long)f.mine.dst, me, (long long)f.mine.sent, (long long)f.mine.dst,
                        (long long)f.mine.expected, me, (long long)f.blocks, moved);
    if (f.have_mine)
        return zc_error(ZC_ERR_MISMATCH,
                        "recvcounts[%lld]: rank %d expects %lld bytes from rank %lld, which sends "
                        "%lld (its sendcounts[%d]); %lld block(s) disagree, %s",
                        (long long)f.mine.src, me, (long long)f.mine.expected,
                        (long long)f.mine.src, (long long)f.mine.sent, me, (long long)f.blocks,
                        moved);
    return zc_error(ZC_ERR_MISMATCH,
                    "counts: rank %lld sends %lld bytes to rank %lld, which expects %lld; "
                    "%lld block(s) disagree, none of this rank, %s",
                    (long long)f.any.src, (long long)f.any.sent, (long long)f.any.dst,
                    (long long)f.any.expected, (long long)f.blocks, moved);
}

/* What the verdict says became of the data: nothing moved when the data
 * waited for it; without the agreement (ZC_ALLTOALLV_CHECK=0) the larger
 * blocks did not wait. */
#define ZC_A2AV_STR(x) #x
#define ZC_A2AV_KIB_STR(x) ZC_A2AV_STR(x) " KiB"
#define ZC_A2AV_HELD "no data moved"
#define ZC_A2AV_UNHELD                                                                  \
    "blocks over " ZC_A2AV_KIB_STR(ZC_A2AV_INLINE_KIB) " may have moved (ZC_ALLTOALLV_CHECK=0)"

/* Both ends of every block agree on its size, else ZC_ERR_MISMATCH on
 * every rank (zc_a2av_verdict). */
static zc_status_t zc_a2av_agree(const zc_a2av_args_t *a)
{
    zc_a2av_findings_t f = {0};

    if (a->comm->size <= a->comm->settings.alltoallv_rows_max)
        ZC_CHECK(zc_a2av_agree_rows(a, &f));
    else
        ZC_CHECK(zc_a2av_agree_pairs(a, &f));
    return zc_a2av_verdict(&f, a->comm->rank, ZC_A2AV_HELD);
}

zc_status_t zc_alltoallv_agree(zc_comm_h comm, unsigned seq, const int64_t *sendcounts,
                               const int64_t *recvcounts, size_t elem)
{
    zc_a2av_args_t a = {.comm = comm, .sendcounts = sendcounts, .recvcounts = recvcounts,
                        .elem = elem, .seq = seq};
    return zc_a2av_agree(&a);
}

/* ---- data schedule ------------------------------------------------------ */

typedef struct {
    zc_sched_t *sched;
    int64_t split_bytes;  /* inter-node blocks from this size on go over every rail */
    int64_t inline_bytes; /* blocks up to this size went with the rows (0: none) */
    int agreed;           /* op every data op waits for: the agreement, or NONE */
    int gate;             /* op the next step's ops wait for (window), or NONE */
    int last;             /* join of everything posted in the current step */
} zc_a2av_build_t;

/* Add `op` to the current step's join: a chain of zero-byte copies, each
 * done once both of its inputs are, so that the last one marks the whole
 * step done for the window. */
static void zc_a2av_join(zc_a2av_build_t *b, int op)
{
    if (op >= 0)
        b->last = zc_sched_join(b->sched, b->last, op);
}

/* One block between this rank and `peer` in direction `kind`. */
static void zc_a2av_block(const zc_a2av_args_t *a, zc_a2av_build_t *b, zc_request_kind_t kind,
                          int peer)
{
    zc_comm_h comm = a->comm;
    int me = comm->rank, sender = kind == ZC_REQ_SEND ? me : peer;
    int64_t count = kind == ZC_REQ_SEND ? a->sendcounts[peer] : a->recvcounts[peer];
    size_t bytes = (size_t)count * a->elem;
    int nrails = comm->nrails;

    if (bytes == 0 || (int64_t)bytes <= b->inline_bytes)
        return;  /* the agreement made sure the peer skips it too, or carried it */
    char *buf = kind == ZC_REQ_SEND ? (char *)zc_a2av_send_at(a, peer)
                                    : a->recvbuf + (size_t)a->rdispls[peer] * a->elem;
    if (nrails < 2 || comm->rank_node[peer] == comm->node || (int64_t)bytes < b->split_bytes) {
        zc_a2av_join(b, zc_sched_p2p(b->sched, kind, buf, bytes, peer,
                                     zc_a2av_tag(sender, ZC_A2AV_DATA, a->seq, 0), ZC_RAIL_AUTO,
                                     b->gate, b->agreed));
        return;
    }
    /* A striped transfer (src/core/wire.c): its chunks over every rail not
     * out, in proportion to their rates, sent again on the others if one
     * goes out. */
    int receiver = kind == ZC_REQ_SEND ? peer : me;
    zc_wire_spec_t wire = {
        .peer = peer, .bytes = bytes, .chunk = zc_wire_chunk(comm, bytes, a->elem, ZC_A2AV_CHUNK_BITS),
        .tag = zc_a2av_tag(sender, ZC_A2AV_DATA, a->seq, 0), .chunk_shift = 0,
        .chunk_bits = ZC_A2AV_CHUNK_BITS,
        .ack_tag = zc_a2av_tag(receiver, ZC_A2AV_ACK, a->seq, 0),
        .seq = a->seq, .id = (uint32_t)sender, .home = -1,
        .src = kind == ZC_REQ_SEND ? buf : NULL, .dst = kind == ZC_REQ_RECV ? buf : NULL,
    };
    zc_a2av_join(b, zc_sched_wire(b->sched, &wire, kind == ZC_REQ_SEND, b->gate, b->agreed));
}

/* ---- agreement inside the schedule, small blocks inline -------------- */

/* A block that came with its sender's rows: where it waits, where it goes. */
typedef struct {
    const char *staged;
    char *dst;
    size_t bytes;
} zc_a2av_inline_t;

/* What the verdict op needs once every row is in (schedule staging: the
 * caller's count arrays may be gone by then). */
typedef struct {
    int n, me;
    int held;                   /* the larger blocks wait for the verdict */
    int64_t *rows;              /* [n][2n], as zc_a2av_my_rows lays them out */
    const char **their_rows;    /* [n]: where each peer's row landed (NULL: mine) */
    zc_a2av_inline_t *blocks;   /* [n]: staged filled once the messages are in */
} zc_a2av_rows_ctx_t;

static size_t zc_a2av_inline_size(size_t bytes)
{
    return bytes <= ZC_A2AV_INLINE_BYTES ? bytes : 0;
}

static size_t zc_a2av_align8(size_t bytes)
{
    return (bytes + 7) & ~(size_t)7;
}

/* Write an entry of the agreement's messages at `out`: a count row, then
 * a block; returns its length (the next entry starts 8-aligned). */
static size_t zc_a2av_put_entry(char *out, const void *row, size_t row_bytes, const void *block,
                                size_t block_bytes)
{
    memcpy(out, row, row_bytes);
    memcpy(out + row_bytes, block, block_bytes);
    return row_bytes + block_bytes;
}

/* The inline size of the block that the rank whose row lies at `row`
 * sends to `dst`, by that row (a received row: read unaligned). */
static size_t zc_a2av_row_inline(const char *row, int dst)
{
    int64_t bytes;

    memcpy(&bytes, row + sizeof(bytes) * (size_t)dst, sizeof(bytes));
    return bytes > 0 ? zc_a2av_inline_size((size_t)bytes) : 0;
}

static zc_status_t zc_a2av_rows_verdict(void *arg, int unused)
{
    zc_a2av_rows_ctx_t *c = arg;
    zc_a2av_findings_t f = {0};
    size_t row = 2 * (size_t)c->n;

    (void)unused;
    for (int j = 0; j < c->n; j++)
        if (c->their_rows[j])
            memcpy(c->rows + (size_t)j * row, c->their_rows[j], sizeof(*c->rows) * row);
    zc_a2av_check_rows(c->rows, c->n, c->me, &f);
    ZC_CHECK(zc_a2av_verdict(&f, c->me, c->held ? ZC_A2AV_HELD : ZC_A2AV_UNHELD));
    for (int j = 0; j < c->n; j++)
        if (c->blocks[j].bytes)
            memcpy(c->blocks[j].dst, c->blocks[j].staged, c->blocks[j].bytes);
    return ZC_OK;
}

/* The verdict's tables in schedule staging, followed by `extra` bytes
 * (returned in *extra_mem, 8-aligned): this rank's rows, and for every
 * peer where its inline block goes and how long this rank expects it. */
static zc_a2av_rows_ctx_t *zc_a2av_rows_ctx(const zc_a2av_args_t *a, zc_a2av_build_t *b,
                                            size_t extra, char **extra_mem)
{
    int n = a->comm->size;
    size_t tables = sizeof(zc_a2av_rows_ctx_t) + sizeof(int64_t) * 2 * (size_t)n * (size_t)n +
                    (sizeof(char *) + sizeof(zc_a2av_inline_t)) * (size_t)n;
    char *mem = zc_sched_buffer(b->sched, zc_a2av_align8(tables) + extra);

    if (!mem)
        return NULL;
    zc_a2av_rows_ctx_t *c = (zc_a2av_rows_ctx_t *)mem;
    c->n = n;
    c->me = a->comm->rank;
    c->held = a->comm->settings.alltoallv_check;
    c->rows = (int64_t *)(c + 1);
    c->their_rows = (const char **)(c->rows + 2 * (size_t)n * (size_t)n);
    c->blocks = (zc_a2av_inline_t *)(c->their_rows + n);
    zc_a2av_my_rows(a, c->rows);
    for (int j = 0; j < n; j++) {
        c->their_rows[j] = NULL;
        c->blocks[j] = (zc_a2av_inline_t){
            NULL, a->recvbuf + (size_t)a->rdispls[j] * a->elem,
            j == c->me ? 0 : zc_a2av_inline_size(zc_a2av_recv_bytes(a, j))};
    }
    *extra_mem = mem + zc_a2av_align8(tables);
    return c;
}

/* The one round of the agreement as schedule ops, direct: to every peer
 * this rank's count rows followed by its block for that peer when the
 * block is inline.  Returns the verdict op, or -1 when out of memory. */
static int zc_a2av_rows_direct(const zc_a2av_args_t *a, zc_a2av_build_t *b)
{
    int n = a->comm->size, me = a->comm->rank;
    size_t row_bytes = sizeof(int64_t) * 2 * (size_t)n, staged = 0;
    char *next;

    /* A peer whose count disagrees sends another inline size than this
     * rank expects: receive up to the largest, let the rows tell. */
    for (int j = 0; j < n; j++)
        if (j != me)
            staged += zc_a2av_align8(row_bytes + zc_a2av_inline_size(zc_a2av_send_bytes(a, j))) +
                      row_bytes + ZC_A2AV_INLINE_BYTES;
    zc_a2av_rows_ctx_t *c = zc_a2av_rows_ctx(a, b, staged, &next);
    if (!c)
        return -1;
    const int64_t *mine = c->rows + (size_t)me * 2 * (size_t)n;
    for (int i = 1; i < n; i++) {
        int from = (me - i + n) % n, to = (me + i) % n;
        /* from's rows, then its block */
        c->their_rows[from] = next;
        c->blocks[from].staged = next + row_bytes;
        zc_a2av_join(b, zc_sched_recv_up_to(b->sched, next, row_bytes + ZC_A2AV_INLINE_BYTES,
                                            from, zc_a2av_tag(from, ZC_A2AV_SIZES, a->seq, 0),
                                            ZC_SCHED_NONE, ZC_SCHED_NONE));
        next += row_bytes + ZC_A2AV_INLINE_BYTES;
        /* to: my rows and my block for it */
        size_t len = zc_a2av_put_entry(next, mine, row_bytes, zc_a2av_send_at(a, to),
                                       zc_a2av_inline_size(zc_a2av_send_bytes(a, to)));
        zc_sched_p2p(b->sched, ZC_REQ_SEND, next, len, to,
                     zc_a2av_tag(me, ZC_A2AV_SIZES, a->seq, 0), ZC_RAIL_AUTO, ZC_SCHED_NONE,
                     ZC_SCHED_NONE);
        next += zc_a2av_align8(len);
    }
    return zc_sched_call(b->sched, zc_a2av_rows_verdict, c, 0, b->last, ZC_SCHED_NONE);
}

/* Relayed: with the same number of ranks (ppn) on every node, the round
 * takes two hops.  Rank (node a, index i) sends its partner (node b,
 * index i) on every other node one message: its rows, then its inline
 * blocks for the ranks of node b in index order.  Once its partners'
 * messages are in, it sends every other rank of its node one message of
 * entries (rows, then the block for that rank): its own, then each
 * partner's in node order.  Every rank still sees every row and gets
 * every inline block, but a pair of nodes exchanges ppn messages each
 * way instead of ppn^2.  The second hop goes eager
 * (zc_sched_send_packed): in shared memory a rendezvous would hold the
 * sender until a rank that is itself waiting for its partners posts the
 * receive.  A rank whose partner fails sends the ranks of its node a
 * failure notice in place of its second hop, so that they fail as fast as
 * it does (zc_a2av_relay_notice).  Between nodes a small alltoallv costs
 * its messages (on TCP a system call at each end and a poll of the rail),
 * inside a node they are shared memory (BENCHMARKS.md, "Remap
 * alltoallv"). */
typedef struct {
    zc_a2av_rows_ctx_t *c;
    int nnodes, ppn, node, local;
    const int *member;      /* [node * ppn + index]: the rank */
    size_t row_bytes;
    char **from_partner;    /* [nnodes]: (b, local)'s message (NULL: b == node) */
    char **from_local;      /* [ppn]: (node, l)'s message (NULL: l == local) */
    char **to_local;        /* [ppn]: the message to (node, l) */
    size_t *to_local_bytes; /* [ppn]: its length so far */
} zc_a2av_relay_t;

/* Entries are 8-aligned: a row, then a block padded to 8. */
static size_t zc_a2av_entry_size(const zc_a2av_relay_t *r, size_t block)
{
    return r->row_bytes + zc_a2av_align8(block);
}

/* Ranks in node order, or NULL when the nodes differ in size or there is
 * nothing to relay (one node, or one rank per node). */
static int *zc_a2av_node_members(zc_comm_h comm, zc_sched_t *sched, int *ppn)
{
    int n = comm->size, nnodes = comm->nnodes;

    if (nnodes < 2 || n % nnodes || n / nnodes < 2)
        return NULL;
    *ppn = n / nnodes;
    int *member = zc_sched_buffer(sched, sizeof(int) * 2 * (size_t)n);
    if (!member)
        return NULL;
    int *filled = member + n;
    memset(filled, 0, sizeof(int) * (size_t)nnodes);
    for (int r = 0; r < n; r++) {
        int node = comm->rank_node[r];
        if (filled[node] == *ppn)
            return NULL;
        member[node * *ppn + filled[node]++] = r;
    }
    return member;
}

/* Where the block for index `l` of the receiving node lies in a partner's
 * message, and its length. */
static const char *zc_a2av_partner_block(const zc_a2av_relay_t *r, const char *msg, int l,
                                         size_t *bytes)
{
    const char *p = msg + r->row_bytes;

    for (int k = 0; k < l; k++)
        p += zc_a2av_align8(zc_a2av_row_inline(msg, r->member[r->node * r->ppn + k]));
    *bytes = zc_a2av_row_inline(msg, r->member[r->node * r->ppn + l]);
    return p;
}

/* After the partners' messages: append each partner's entry for every
 * other rank of this node to the message for it. */
static zc_status_t zc_a2av_relay_pack(void *arg, int unused)
{
    zc_a2av_relay_t *r = arg;

    (void)unused;
    for (int l = 0; l < r->ppn; l++) {
        if (l == r->local)
            continue;
        for (int b = 0; b < r->nnodes; b++) {
            if (b == r->node)
                continue;
            size_t bytes;
            const char *block = zc_a2av_partner_block(r, r->from_partner[b], l, &bytes);
            r->to_local_bytes[l] += zc_a2av_align8(
                zc_a2av_put_entry(r->to_local[l] + r->to_local_bytes[l], r->from_partner[b],
                                  r->row_bytes, block, bytes));
        }
    }
    return ZC_OK;
}

/* A rank of the node whose schedule failed before it could forward its
 * partners' entries sends a notice instead (zc_sched_send_packed): fail
 * with its status now, not at this rank's timeout.  A message of entries
 * starts with a count, never the notice's marker. */
static zc_status_t zc_a2av_relay_notice(void *arg, int l)
{
    const zc_a2av_relay_t *r = arg;

    return zc_sched_notice_check(r->from_local[l], r->member[r->node * r->ppn + l]);
}

/* Every message in: find each rank's row and this rank's block in them,
 * then the verdict. */
static zc_status_t zc_a2av_relay_verdict(void *arg, int unused)
{
    zc_a2av_relay_t *r = arg;
    zc_a2av_rows_ctx_t *c = r->c;
    size_t bytes;

    for (int b = 0; b < r->nnodes; b++) {
        if (b == r->node)
            continue;
        int src = r->member[b * r->ppn + r->local];
        c->their_rows[src] = r->from_partner[b];
        c->blocks[src].staged = zc_a2av_partner_block(r, r->from_partner[b], r->local, &bytes);
    }
    for (int l = 0; l < r->ppn; l++) {
        const char *entry = r->from_local[l];
        if (l == r->local)
            continue;
        /* its sender's own entry first, then its partners' in node order */
        for (int k = 0; k < r->nnodes; k++) {
            int b = k == 0 ? r->node : k - 1 + (k - 1 >= r->node);
            int src = r->member[b * r->ppn + l];
            c->their_rows[src] = entry;
            c->blocks[src].staged = entry + r->row_bytes;
            entry += zc_a2av_entry_size(r, zc_a2av_row_inline(entry, c->me));
        }
    }
    return zc_a2av_rows_verdict(c, unused);
}

static int zc_a2av_rows_relayed(const zc_a2av_args_t *a, zc_a2av_build_t *b, const int *member,
                                int ppn)
{
    zc_comm_h comm = a->comm;
    int n = comm->size, me = comm->rank, nnodes = comm->nnodes, node = comm->rank_node[me];
    size_t row_bytes = sizeof(int64_t) * 2 * (size_t)n;
    size_t partner_cap = row_bytes + (size_t)ppn * ZC_A2AV_INLINE_BYTES;
    size_t local_cap = (size_t)nnodes * (row_bytes + ZC_A2AV_INLINE_BYTES);
    size_t tables = zc_a2av_align8(sizeof(zc_a2av_relay_t) +
                                   sizeof(char *) * (size_t)(nnodes + 2 * ppn) +
                                   sizeof(size_t) * (size_t)ppn);
    /* each partner's message and mine to it; each local rank's and mine */
    size_t staged = tables + 2 * (size_t)(nnodes - 1) * partner_cap +
                    2 * (size_t)(ppn - 1) * local_cap;
    char *next;
    zc_a2av_rows_ctx_t *c = zc_a2av_rows_ctx(a, b, staged, &next);

    if (!c)
        return -1;
    zc_a2av_relay_t *r = (zc_a2av_relay_t *)next;
    *r = (zc_a2av_relay_t){.c = c, .nnodes = nnodes, .ppn = ppn, .node = node,
                           .member = member, .row_bytes = row_bytes};
    r->from_partner = (char **)(r + 1);
    r->from_local = r->from_partner + nnodes;
    r->to_local = r->from_local + ppn;
    r->to_local_bytes = (size_t *)(r->to_local + ppn);
    next += tables;
    while (member[node * ppn + r->local] != me)
        r->local++;
    const char *mine = (const char *)(c->rows + (size_t)me * 2 * (size_t)n);
    uint64_t to_partner = zc_a2av_tag(me, ZC_A2AV_SIZES, a->seq, 0);
    uint64_t to_node = zc_a2av_tag(me, ZC_A2AV_SIZES, a->seq, 1);

    /* The local messages' receives first: they come in after the others. */
    for (int l = 0; l < ppn; l++) {
        int peer = member[node * ppn + l];
        r->from_local[l] = r->to_local[l] = NULL;
        if (l == r->local)
            continue;
        r->from_local[l] = next;
        int in = zc_sched_recv_up_to(b->sched, next, local_cap, peer,
                                     zc_a2av_tag(peer, ZC_A2AV_SIZES, a->seq, 1), ZC_SCHED_NONE,
                                     ZC_SCHED_NONE);
        zc_a2av_join(b, zc_sched_call(b->sched, zc_a2av_relay_notice, r, l, in, ZC_SCHED_NONE));
        next += local_cap;
    }
    /* Phase one, with the partners. */
    int locals = b->last;
    b->last = ZC_SCHED_NONE;
    for (int k = 0; k < nnodes; k++) {
        r->from_partner[k] = NULL;
        if (k == node)
            continue;
        int partner = member[k * ppn + r->local];
        r->from_partner[k] = next;
        zc_a2av_join(b, zc_sched_recv_up_to(b->sched, next, partner_cap, partner,
                                            zc_a2av_tag(partner, ZC_A2AV_SIZES, a->seq, 0),
                                            ZC_SCHED_NONE, ZC_SCHED_NONE));
        next += partner_cap;
        char *out = next;
        memcpy(out, mine, row_bytes);
        out += row_bytes;
        for (int l = 0; l < ppn; l++) {
            int dst = member[k * ppn + l];
            size_t bytes = zc_a2av_inline_size(zc_a2av_send_bytes(a, dst));
            memcpy(out, zc_a2av_send_at(a, dst), bytes);
            out += zc_a2av_align8(bytes);
        }
        zc_sched_p2p(b->sched, ZC_REQ_SEND, next, (size_t)(out - next), partner, to_partner,
                     ZC_RAIL_AUTO, ZC_SCHED_NONE, ZC_SCHED_NONE);
        next += partner_cap;
    }
    int partners = b->last;
    /* Phase two: my entry now, the partners' once they are in. */
    for (int l = 0; l < ppn; l++) {
        if (l == r->local)
            continue;
        int peer = member[node * ppn + l];
        r->to_local[l] = next;
        r->to_local_bytes[l] = zc_a2av_align8(
            zc_a2av_put_entry(next, mine, row_bytes, zc_a2av_send_at(a, peer),
                              zc_a2av_inline_size(zc_a2av_send_bytes(a, peer))));
        next += local_cap;
    }
    int packed = zc_sched_call(b->sched, zc_a2av_relay_pack, r, 0, partners, ZC_SCHED_NONE);
    for (int l = 0; l < ppn; l++)
        if (l != r->local)
            zc_sched_send_packed(b->sched, r->to_local[l], &r->to_local_bytes[l],
                                 member[node * ppn + l], to_node, ZC_RAIL_AUTO, packed,
                                 ZC_SCHED_NONE);
    zc_a2av_join(b, locals);
    return zc_sched_call(b->sched, zc_a2av_relay_verdict, r, 0, b->last, ZC_SCHED_NONE);
}

/* The one round of the agreement as schedule ops: relayed where the
 * nodes allow it, else direct; the verdict op checks every block of
 * every rank and copies the inline blocks out.  Returns the verdict op,
 * or -1 when out of memory. */
static int zc_a2av_rows_sched(const zc_a2av_args_t *a, zc_a2av_build_t *b)
{
    int ppn = 0;
    const int *member = zc_a2av_node_members(a->comm, b->sched, &ppn);

    b->last = ZC_SCHED_NONE;
    b->inline_bytes = ZC_A2AV_INLINE_BYTES;
    return member ? zc_a2av_rows_relayed(a, b, member, ppn) : zc_a2av_rows_direct(a, b);
}

/* The data schedule, after the agreement of `agree_in_sched` (rows mode)
 * or with none left to do.  Without the agreement (ZC_ALLTOALLV_CHECK=0)
 * the rows round still carries the small blocks, as it is their fastest
 * path, but the larger ones do not wait for its verdict. */
static zc_status_t zc_a2av_schedule(const zc_a2av_args_t *a, int agree_in_sched,
                                    zc_request_h *request)
{
    zc_comm_h comm = a->comm;
    int n = comm->size, me = comm->rank;
    int64_t window = comm->settings.alltoallv_window;
    zc_a2av_build_t b = {.gate = ZC_SCHED_NONE, .agreed = ZC_SCHED_NONE,
                         .split_bytes = comm->settings.alltoallv_split_bytes};
    int *joins = malloc(sizeof(*joins) * (size_t)n);

    if (!joins)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the steps of %d ranks", n);
    zc_status_t st = zc_sched_create(comm, &b.sched);
    if (st != ZC_OK) {
        free(joins);
        return st;
    }
    zc_sched_set_call(b.sched, a->seq);
    if (agree_in_sched) {
        int verdict = zc_a2av_rows_sched(a, &b);  /* -1 (no memory) fails the schedule at start */
        if (comm->settings.alltoallv_check)
            b.agreed = verdict;
    }
    if (zc_a2av_send_bytes(a, me))
        zc_sched_copy(b.sched, a->recvbuf + (size_t)a->rdispls[me] * a->elem,
                      zc_a2av_send_at(a, me), zc_a2av_send_bytes(a, me),
                      b.agreed, ZC_SCHED_NONE);
    /* Step i: receive from rank - i, send to rank + i; the receive is
     * posted first so the matching send never lands unexpected.  The
     * window holds back the steps with a large block between nodes only,
     * which compete for the NICs: a step whose blocks are all below the
     * split size costs only its latency, and one inside a node copies in
     * shared memory, where holding it back only serialises the copies
     * (BENCHMARKS.md, "One node"); both start at once. */
    int large = 0;
    for (int i = 1; i < n; i++) {
        int from = (me - i + n) % n, to = (me + i) % n;
        int small = (comm->rank_node[from] == comm->node ||
                     (int64_t)zc_a2av_recv_bytes(a, from) < b.split_bytes) &&
                    (comm->rank_node[to] == comm->node ||
                     (int64_t)zc_a2av_send_bytes(a, to) < b.split_bytes);
        b.gate = !small && window > 0 && large >= window ? joins[large - window] : ZC_SCHED_NONE;
        b.last = ZC_SCHED_NONE;
        zc_a2av_block(a, &b, ZC_REQ_RECV, from);
        zc_a2av_block(a, &b, ZC_REQ_SEND, to);
        if (!small)
            joins[large++] = b.last;
    }
    free(joins);
    return zc_sched_start(b.sched, request);
}

/* ---- public calls ------------------------------------------------------- */

zc_status_t zc_remap_alltoallv(const void *sendbuf, const int64_t *sendcounts,
                               const int64_t *sdispls, void *recvbuf, const int64_t *recvcounts,
                               const int64_t *rdispls, zc_datatype_t dtype, zc_memtype_t memtype,
                               zc_comm_h comm, zc_request_h *request)
{
    zc_error_clear();
    zc_a2av_args_t a = {.comm = comm, .sendbuf = sendbuf, .recvbuf = recvbuf,
                        .sendcounts = sendcounts, .sdispls = sdispls, .recvcounts = recvcounts,
                        .rdispls = rdispls, .elem = zc_datatype_size(dtype)};

    ZC_ARG_CHECK(request != NULL, "request: is NULL");
    ZC_CHECK(zc_comm_check(comm));
    ZC_CHECK(zc_a2av_check(&a, dtype, memtype));
    a.seq = comm->coll_seq++;
    int rows = comm->size <= comm->settings.alltoallv_rows_max;
    if (comm->settings.alltoallv_check && !rows)
        ZC_CHECK(zc_a2av_agree(&a));
    return zc_a2av_schedule(&a, rows, request);
}

zc_status_t zc_remap_alltoallv_plan(zc_plan_h plan, zc_remap_dir_t dir, const void *sendbuf,
                                    void *recvbuf, int64_t elems_per_token, zc_datatype_t dtype,
                                    zc_memtype_t memtype, zc_comm_h comm, zc_request_h *request)
{
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    int64_t *counts;
    zc_status_t st;

    zc_error_clear();
    ZC_ARG_CHECK(request != NULL, "request: is NULL");
    ZC_ARG_CHECK(plan != NULL, "plan: is NULL");
    ZC_CHECK(zc_comm_check(comm));
    ZC_ARG_CHECK(elems_per_token > 0, "elems_per_token: %lld is not positive",
                 (long long)elems_per_token);
    ZC_CHECK(zc_plan_info(plan, &info));
    if (info.nranks != comm->size)
        return zc_error(ZC_ERR_MISMATCH, "plan: has %d ranks, the communicator %d", info.nranks,
                        comm->size);
    counts = malloc(sizeof(*counts) * 4 * (size_t)comm->size);
    if (!counts)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the counts of %d ranks", comm->size);
    int64_t *sc = counts, *sd = sc + comm->size, *rc = sd + comm->size, *rd = rc + comm->size;
    ZC_CHECK_GOTO(zc_plan_remap_counts(plan, comm->rank, dir, sc, sd, rc, rd), st, out);
    /* Tokens to elements; a token count is at most the plan's capacity. */
    for (int j = 0; j < 4 * comm->size; j++) {
        if (counts[j] > INT64_MAX / elems_per_token) {
            st = zc_error(ZC_ERR_INVALID_ARG,
                          "elems_per_token: %lld x %lld tokens overflows a 64-bit count",
                          (long long)elems_per_token, (long long)counts[j]);
            goto out;
        }
        counts[j] *= elems_per_token;
    }
    st = zc_remap_alltoallv(sendbuf, sc, sd, recvbuf, rc, rd, dtype, memtype, comm, request);
out:
    free(counts);
    return st;
}
