/* A host emulation of the stream engine's device: see stream_emu.h. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_emu.h"
#include "src/core/comm.h"
#include "src/coll/ring_attn/stream_engine.h"
#include "src/common/status.h"
#include "stream_emu.h"

#define EMU_MAX_RANGES 12
/* Vector clock slots: the communication stream, then the caller streams. */
#define EMU_COMM 0
#define EMU_NSTREAMS (1 + EMU_CALLER_STREAMS)

emu_counts_t emu_counts;
static int64_t emu_fail_countdown; /* 0: no failure to inject */

void emu_fail_at(int64_t n)
{
    emu_fail_countdown = n;
}

/* Bytes one operation reads or writes. */
typedef struct {
    const char *p;
    size_t n;
    int write;
} emu_range_t;

/* A logged access, until no later operation can race with it. */
typedef struct {
    emu_range_t r;
    int stream;
    int64_t index;
    const char *what;
} emu_access_t;

/* What the overlap count needs of each kernel and transfer. */
typedef struct {
    int stream;
    int64_t index;
    int64_t knows;  /* the other stream's operations known done before it */
} emu_op_t;

/* The emulated device of one communicator, kept by the engine between
 * calls (the `dev` of its operations). */
typedef struct {
    zc_comm_h comm;
    int cur;                                      /* this call's compute stream slot */
    int64_t clk[EMU_NSTREAMS];                    /* operations enqueued per stream */
    int64_t know[EMU_NSTREAMS][EMU_NSTREAMS];     /* [s][t]: t's ops done before s's next */
    int64_t (*events)[EMU_NSTREAMS];              /* each event's snapshot, -1: unrecorded */
    int nevents;
    emu_access_t *log;
    size_t nlog, cap_log;
    emu_range_t *allocs;                          /* live allocations */
    int nallocs;
    size_t cap_allocs;
    int abandoned;                                /* a transfer failed: receives may land */
    zc_status_t race;                             /* the first ordering fault, kept */
    char why[512];
    /* this call's */
    emu_op_t *kernels, *transfers;
    int nkernels, ntransfers, cap_kernels, cap_transfers, records;
    int what_if_native;                           /* emu_what_if's fallbacks */
    char what_if_why[320];
} emu_t;

/* The slot of one of the engine's streams in this call. */
static int emu_slot(const emu_t *e, zc_ds_stream_t stream)
{
    return stream == ZC_DS_COMM ? EMU_COMM : e->cur;
}

/* Counted; the injected failure when its turn comes. */
static zc_status_t emu_op(const char *what)
{
    emu_counts.ops++;
    if (emu_fail_countdown > 0 && --emu_fail_countdown == 0)
        return zc_error(ZC_ERR_TRANSPORT, "emulated device: %s failed: injected (operation "
                        "%lld)", what, (long long)emu_counts.ops);
    return ZC_OK;
}

/* ---- the race detector ------------------------------------------------- */

static void emu_fault(emu_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emu_fault(emu_t *e, const char *fmt, ...)
{
    va_list ap;

    if (e->race != ZC_OK)
        return;
    e->race = ZC_ERR_INTERNAL;
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof(e->why), fmt, ap);
    va_end(ap);
}

static int emu_push(void **v, size_t elem, size_t n, size_t *cap)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : 64;
    void *p = realloc(*v, c * elem);
    if (!p)
        return -1;
    *v = p;
    *cap = c;
    return 0;
}

static void emu_note(emu_t *e, emu_op_t **v, int *n, int *cap, int stream)
{
    size_t c = (size_t)*cap;

    if (emu_push((void **)v, sizeof(**v), (size_t)*n, &c) != 0) {
        emu_fault(e, "out of memory");
        return;
    }
    *cap = (int)c;
    (*v)[(*n)++] = (emu_op_t){stream, e->clk[stream],
                              e->know[stream][stream == EMU_COMM ? e->cur : EMU_COMM]};
}

/* Drop the accesses that every stream used so far is ordered after (know
 * only grows). */
static void emu_prune(emu_t *e)
{
    size_t keep = 0;

    for (size_t i = 0; i < e->nlog; i++) {
        const emu_access_t *a = &e->log[i];
        int known = 1;

        for (int s = 0; s < EMU_NSTREAMS; s++)
            if (s != a->stream && e->clk[s] > 0 && e->know[s][a->stream] < a->index)
                known = 0;
        if (!known)
            e->log[keep++] = *a;
    }
    e->nlog = keep;
}

static const char *emu_stream_name(int slot)
{
    static const char *names[EMU_NSTREAMS] = {"comm", "caller 0", "caller 1", "caller 2"};

    return names[slot];
}

/* One operation on `stream` (a slot) touching `r`: check it against every
 * access of the other streams not ordered before it, then log it. */
static void emu_access(emu_t *e, int stream, const char *what, const emu_range_t *r, int nr)
{
    int64_t index = ++e->clk[stream];

    for (size_t i = 0; i < e->nlog; i++) {
        const emu_access_t *a = &e->log[i];
        if (a->stream == stream || a->index <= e->know[stream][a->stream])
            continue;
        for (int k = 0; k < nr; k++) {
            if (r[k].n == 0 || !(r[k].write || a->r.write))
                continue;
            if (r[k].p < a->r.p + a->r.n && a->r.p < r[k].p + r[k].n)
                emu_fault(e, "race: %s (%s stream, op %lld) and %s (%s stream, op %lld) touch "
                          "the same bytes with no event between them", what,
                          emu_stream_name(stream), (long long)index, a->what,
                          emu_stream_name(a->stream), (long long)a->index);
        }
    }
    if (e->nlog + (size_t)nr > 4096)
        emu_prune(e);
    for (int k = 0; k < nr; k++) {
        if (r[k].n == 0)
            continue;
        if (emu_push((void **)&e->log, sizeof(*e->log), e->nlog, &e->cap_log) != 0) {
            emu_fault(e, "out of memory");
            return;
        }
        e->log[e->nlog++] = (emu_access_t){r[k], stream, index, what};
    }
}

/* ---- the device operations -------------------------------------------- */

static zc_status_t emu_alloc(void *dev, size_t bytes, void **ptr)
{
    emu_t *e = dev;
    void *p;

    ZC_CHECK(emu_op("alloc"));
    p = malloc(bytes);
    if (!p)
        return zc_error(ZC_ERR_NO_MEMORY, "emulated device: cannot allocate %zu bytes", bytes);
    memset(p, 0xa5, bytes); /* device memory starts as garbage */
    if (emu_push((void **)&e->allocs, sizeof(*e->allocs), (size_t)e->nallocs, &e->cap_allocs)) {
        free(p);
        return zc_error(ZC_ERR_NO_MEMORY, "emulated device: cannot track allocations");
    }
    e->allocs[e->nallocs++] = (emu_range_t){p, bytes, 1};
    emu_counts.allocs++;
    emu_counts.live++;
    emu_access(e, e->cur, "alloc", &(emu_range_t){p, bytes, 1}, 1);
    *ptr = p;
    return ZC_OK;
}

/* Memory the engine gave back: freed, unless a failed transfer may still
 * write into it (then kept, and counted). */
static void emu_drop(emu_t *e, int i)
{
    if (e->abandoned)
        emu_counts.leaked++;
    else
        free((void *)e->allocs[i].p);
    emu_counts.frees++;
    emu_counts.live--;
    e->allocs[i] = e->allocs[--e->nallocs];
}

static void emu_free(void *dev, void *ptr)
{
    emu_t *e = dev;

    for (int i = 0; i < e->nallocs; i++) {
        if (e->allocs[i].p != ptr)
            continue;
        emu_access(e, e->cur, "free", &e->allocs[i], 1);
        emu_drop(e, i);
        return;
    }
    emu_fault(e, "free of %p, which the engine did not allocate", ptr);
}

static void emu_release(void *dev, void *const *blocks, int nblocks, int ended)
{
    emu_t *e = dev;

    (void)ended; /* every operation ran when it was enqueued */
    emu_counts.releases++;
    for (int b = 0; b < nblocks; b++) {
        int i = 0;

        while (i < e->nallocs && e->allocs[i].p != blocks[b])
            i++;
        if (i < e->nallocs)
            emu_drop(e, i);
        else
            fprintf(stderr, "# emulated device: release of %p, which the engine did not "
                    "allocate\n", blocks[b]);
    }
    if (e->nallocs > 0)
        fprintf(stderr, "# emulated device: released with %d allocations the engine did not "
                "give back\n", e->nallocs);
    free(e->allocs);
    free(e->events);
    free(e->log);
    free(e->kernels);
    free(e->transfers);
    free(e);
}

static zc_status_t emu_record(void *dev, zc_ds_stream_t stream, int event)
{
    emu_t *e = dev;
    int s = emu_slot(e, stream);

    ZC_CHECK(emu_op("record"));
    if (event >= e->nevents) {
        int n = event + 64;
        int64_t(*ev)[EMU_NSTREAMS] = realloc(e->events, (size_t)n * sizeof(*ev));
        if (!ev)
            return zc_error(ZC_ERR_NO_MEMORY, "emulated device: %d events", n);
        for (int i = e->nevents; i < n; i++)
            for (int t = 0; t < EMU_NSTREAMS; t++)
                ev[i][t] = -1;
        e->events = ev;
        e->nevents = n;
    }
    for (int t = 0; t < EMU_NSTREAMS; t++)
        e->events[event][t] = t == s ? e->clk[s] : e->know[s][t];
    e->records++;
    return ZC_OK;
}

static zc_status_t emu_wait(void *dev, zc_ds_stream_t stream, int event)
{
    emu_t *e = dev;
    int s = emu_slot(e, stream);

    ZC_CHECK(emu_op("wait"));
    if (event >= e->nevents || e->events[event][0] < 0) {
        emu_fault(e, "event %d waited on before it was recorded", event);
        return zc_error(ZC_ERR_INTERNAL, "emulated device: event %d waited on before it was "
                        "recorded", event);
    }
    for (int t = 0; t < EMU_NSTREAMS; t++)
        if (t != s && e->events[event][t] > e->know[s][t])
            e->know[s][t] = e->events[event][t];
    return ZC_OK;
}

/* A group or routed call that failed may leave receives that still land. */
static zc_status_t emu_transfer_done(emu_t *e, zc_status_t st)
{
    if (st != ZC_OK)
        e->abandoned = 1;
    return st;
}

static zc_status_t emu_group(void *dev, const zc_device_op_t *ops, int nops)
{
    emu_t *e = dev;
    emu_range_t *r;

    ZC_CHECK(emu_op("group"));
    r = calloc((size_t)nops, sizeof(*r));
    if (!r)
        return zc_error(ZC_ERR_NO_MEMORY, "emulated device: a group of %d", nops);
    for (int i = 0; i < nops; i++)
        r[i] = (emu_range_t){ops[i].buf, ops[i].bytes, ops[i].kind == ZC_REQ_RECV};
    /* the ops of one group run concurrently too */
    for (int i = 0; i < nops; i++)
        for (int j = 0; j < i; j++)
            if ((r[i].write || r[j].write) && r[i].n && r[j].n && r[i].p < r[j].p + r[j].n &&
                r[j].p < r[i].p + r[i].n)
                emu_fault(e, "race: ops %d and %d of one group touch the same bytes", j, i);
    emu_access(e, EMU_COMM, "group", r, nops);
    free(r);
    emu_note(e, &e->transfers, &e->ntransfers, &e->cap_transfers, EMU_COMM);
    return emu_transfer_done(e, zc_device_group(e->comm->device, ops, nops, NULL));
}

static zc_status_t emu_routed(void *dev, const zc_transfer_t *t, int n, const void *sendbuf,
                              void *recvbuf)
{
    emu_t *e = dev;
    emu_range_t r[2] = {{0}};

    ZC_CHECK(emu_op("routed"));
    for (int i = 0; i < n; i++) {
        if (t[i].src == e->comm->rank)
            r[0] = (emu_range_t){sendbuf, (size_t)t[i].count, 0};
        if (t[i].dst == e->comm->rank)
            r[1] = (emu_range_t){recvbuf, (size_t)t[i].count, 1};
    }
    emu_access(e, EMU_COMM, "routed call", r, 2);
    emu_note(e, &e->transfers, &e->ntransfers, &e->cap_transfers, EMU_COMM);
    /* the device form, on the emulated device backend of the communicator */
    return emu_transfer_done(e, zc_routed_sendrecv_stream(t, n, sendbuf, recvbuf, ZC_BYTE,
                                                          e->comm, NULL));
}

static size_t emu_rows(const int32_t *cu, int batch)
{
    return batch > 0 ? (size_t)cu[batch] : 0;
}

/* Where the CUDA device would run block a with ZC_ATTN_BACKEND=cudnn: the
 * cuDNN backend's own decision on exactly these arguments (no engine is
 * asked: that needs cuDNN, and tests/test_attn_cudnn asks it for every
 * graph shape). */
static zc_attn_route_t emu_route(zc_ds_pass_t pass, const zc_attn_args_t *a, char *why,
                                 size_t len)
{
    zc_cudnn_key_t key;
    zc_attn_route_t r = zc_cudnn_attn_route((int)pass, a, &key, why, len);

    return r == ZC_ATTN_ON_CUDNN && key.segments == 0 ? ZC_ATTN_NATIVE_SHAPE : r;
}

/* The same block in bfloat16 and float16 at head dims 64 and 128: the
 * first that would not run on cuDNN is kept in the report. */
static void emu_what_if(emu_t *e, zc_ds_pass_t pass, const zc_attn_args_t *a)
{
    static const zc_datatype_t dtypes[2] = {ZC_BFLOAT16, ZC_FLOAT16};
    static const int dims[2] = {64, 128};

    for (int t = 0; t < 2; t++)
        for (int h = 0; h < 2; h++) {
            zc_attn_args_t w = *a;
            char why[256];

            w.dtype = dtypes[t];
            w.head_dim = dims[h];
            if (pass == ZC_DS_BWD)
                w.out_dtype = w.dtype;
            if (emu_route(pass, &w, why, sizeof(why)) == ZC_ATTN_ON_CUDNN)
                continue;
            if (e->what_if_native++ == 0)
                snprintf(e->what_if_why, sizeof(e->what_if_why), "%s d%d %s block of %d "
                         "segments: %s", zc_datatype_name(w.dtype), w.head_dim,
                         pass == ZC_DS_BWD ? "backward" : "forward", a->batch, why);
        }
}

static zc_status_t emu_attn(void *dev, zc_ds_pass_t pass, const zc_attn_args_t *a,
                            zc_attn_route_t *route)
{
    emu_t *e = dev;
    size_t nq = emu_rows(a->cu_seqlens_q, a->batch), nk = emu_rows(a->cu_seqlens_kv, a->batch);
    size_t es = zc_datatype_size(a->dtype), rq = (size_t)a->num_heads_q * (size_t)a->head_dim;
    size_t rk = (size_t)a->num_heads_kv * (size_t)a->head_dim, hq = (size_t)a->num_heads_q;
    size_t gs = zc_datatype_size(a->grad_dtype), os = zc_datatype_size(a->out_dtype);
    emu_range_t r[EMU_MAX_RANGES];
    int n = 0;

    *route = ZC_ATTN_NATIVE_CHOSEN;
    ZC_CHECK(emu_op(pass == ZC_DS_DELTA ? "delta" : "attention"));
    if (pass == ZC_DS_DELTA) {
        r[n++] = (emu_range_t){a->dout, nq * rq * es, 0};
        r[n++] = (emu_range_t){a->out, nq * rq * os, 0};
        r[n++] = (emu_range_t){(const char *)a->delta, nq * hq * sizeof(float), 1};
        emu_access(e, e->cur, "delta", r, n);
        return zc_attn_bwd_delta(a);
    }
    if (zc_attn_backend() == ZC_ATTN_BACKEND_CUDNN)
        *route = emu_route(pass, a, NULL, 0);
    emu_what_if(e, pass, a);
    r[n++] = (emu_range_t){a->q, nq * rq * es, 0};
    r[n++] = (emu_range_t){a->k, nk * rk * es, 0};
    r[n++] = (emu_range_t){a->v, nk * rk * es, 0};
    if (pass == ZC_DS_FWD) {
        r[n++] = (emu_range_t){a->out, nq * rq * os, 1};
        r[n++] = (emu_range_t){(const char *)a->lse, nq * hq * sizeof(float), 1};
    } else {
        r[n++] = (emu_range_t){a->out, nq * rq * os, 0};
        r[n++] = (emu_range_t){(const char *)a->lse, nq * hq * sizeof(float), 0};
        r[n++] = (emu_range_t){a->dout, nq * rq * es, 0};
        r[n++] = (emu_range_t){(const char *)a->delta, nq * hq * sizeof(float), 0};
        r[n++] = (emu_range_t){a->dq, nq * rq * gs, 1};
        r[n++] = (emu_range_t){a->dk, nk * rk * gs, 1};
        r[n++] = (emu_range_t){a->dv, nk * rk * gs, 1};
    }
    emu_access(e, e->cur, pass == ZC_DS_FWD ? "attention forward" : "attention backward", r, n);
    emu_note(e, &e->kernels, &e->nkernels, &e->cap_kernels, e->cur);
    return pass == ZC_DS_FWD ? zc_attn_fwd(a) : zc_attn_bwd(a);
}

static zc_status_t emu_copy(void *dev, void *dst, const void *src, size_t bytes)
{
    emu_t *e = dev;
    emu_range_t r[2] = {{src, bytes, 0}, {dst, bytes, 1}};

    ZC_CHECK(emu_op("copy"));
    emu_access(e, e->cur, "copy", r, 2);
    memcpy(dst, src, bytes);
    return ZC_OK;
}

static zc_status_t emu_fill(void *dev, float *dst, size_t count, float value)
{
    emu_t *e = dev;

    ZC_CHECK(emu_op("fill"));
    emu_access(e, e->cur, "fill", &(emu_range_t){(char *)dst, count * sizeof(float), 1}, 1);
    for (size_t i = 0; i < count; i++)
        dst[i] = value;
    return ZC_OK;
}

static zc_status_t emu_add(void *dev, float *dst, const float *src, size_t count)
{
    emu_t *e = dev;
    emu_range_t r[2] = {{(const char *)src, count * sizeof(float), 0},
                        {(char *)dst, count * sizeof(float), 1}};

    ZC_CHECK(emu_op("add"));
    emu_access(e, e->cur, "add", r, 2);
    for (size_t i = 0; i < count; i++)
        dst[i] += src[i];
    return ZC_OK;
}

static zc_status_t emu_convert(void *dev, const void *src, zc_datatype_t src_dtype, int64_t count,
                               zc_datatype_t dst_dtype, void *dst)
{
    emu_t *e = dev;
    emu_range_t r[2] = {{src, (size_t)count * zc_datatype_size(src_dtype), 0},
                        {dst, (size_t)count * zc_datatype_size(dst_dtype), 1}};

    ZC_CHECK(emu_op("convert"));
    emu_access(e, e->cur, "convert", r, 2);
    return zc_attn_convert(src, src_dtype, count, dst_dtype, dst);
}

/* A kernel table's call: one operation of the compute stream reading its
 * inputs and writing its outputs, the table handed this device as its
 * stream (it runs at once, as everything here). */
static zc_status_t emu_kernels(void *dev, int backward, const zc_attn_kernels_t *table,
                               zc_attn_varlen_t *call)
{
    emu_t *e = dev;
    size_t es = zc_datatype_size(call->dtype), os = zc_datatype_size(call->out_dtype);
    size_t rq = (size_t)call->num_heads_q * (size_t)call->head_dim;
    size_t rk = (size_t)call->num_heads_kv * (size_t)call->head_dim;
    size_t nq = (size_t)call->total_q, nk = (size_t)call->total_kv;
    size_t lse = nq * (size_t)call->num_heads_q * sizeof(float);
    emu_range_t r[EMU_MAX_RANGES] = {
        {call->q, nq * rq * es, 0}, {call->k, nk * rk * es, 0}, {call->v, nk * rk * es, 0},
        {call->out, nq * rq * (backward ? es : os), !backward},
        {(const char *)call->lse, lse, !backward}};
    int n = 5;

    if (backward) {
        r[n++] = (emu_range_t){call->dout, nq * rq * es, 0};
        r[n++] = (emu_range_t){call->dq, nq * rq * os, 1};
        r[n++] = (emu_range_t){call->dk, nk * rk * os, 1};
        r[n++] = (emu_range_t){call->dv, nk * rk * os, 1};
    }
    emu_access(e, e->cur, backward ? "kernel table backward" : "kernel table forward", r, n);
    emu_note(e, &e->kernels, &e->nkernels, &e->cap_kernels, e->cur);
    call->stream = dev;
    return (backward ? table->bwd : table->fwd)(table->ctx, call);
}

/* The bytes a row-mapped copy reads and writes, on the compute stream. */
static zc_status_t emu_row_copy(void *dev, const zc_attn_rows_t *op)
{
    int64_t n = op->cu[op->nseg], span = 0;
    size_t es = op->op == ZC_ROWS_GATHER ? op->row_bytes
                : op->op == ZC_ROWS_GATHER_LSE ? (size_t)op->heads * sizeof(float)
                : op->op == ZC_ROWS_MERGE ? (size_t)op->heads * (size_t)op->head_dim *
                                                zc_datatype_size(op->dtype)
                                          : (size_t)op->row_elems * zc_datatype_size(op->dtype);
    size_t buf_row = op->op == ZC_ROWS_MERGE ? (size_t)op->heads * (size_t)op->head_dim * 4
                     : op->op == ZC_ROWS_ADD ? (size_t)op->row_elems * sizeof(float) : es;
    int out_compact = op->op == ZC_ROWS_GATHER || op->op == ZC_ROWS_GATHER_LSE;
    emu_range_t r[4];
    int k = 0;

    for (int s = 0; s < op->nseg; s++) {
        int64_t end = op->row[s] + op->cu[s + 1] - op->cu[s];
        span = end > span ? end : span;
    }
    /* the buffer side as one range up to its last row: a superset */
    r[k++] = (emu_range_t){out_compact ? op->dst : op->src, (size_t)n * es, out_compact};
    r[k++] = (emu_range_t){out_compact ? op->src : op->dst, (size_t)span * buf_row, !out_compact};
    if (op->op == ZC_ROWS_MERGE) {
        r[k++] = (emu_range_t){(const char *)op->src_lse,
                               (size_t)n * (size_t)op->heads * sizeof(float), 0};
        r[k++] = (emu_range_t){(const char *)op->dst_lse,
                               (size_t)span * (size_t)op->heads * sizeof(float), 1};
    }
    emu_access(dev, ((emu_t *)dev)->cur, "row copy", r, k);
    return zc_attn_rows(op);
}

static const zc_ds_ops_t emu_ops = {
    .alloc = emu_alloc, .free = emu_free, .release = emu_release, .record = emu_record,
    .wait = emu_wait, .group = emu_group, .routed = emu_routed, .attn = emu_attn,
    .copy = emu_copy, .fill = emu_fill, .add = emu_add, .convert = emu_convert,
    .kernels = emu_kernels, .rows = emu_row_copy,
};

static zc_status_t emu_make(zc_comm_h comm, void **dev)
{
    emu_t *e = calloc(1, sizeof(*e));

    if (!e)
        return zc_error(ZC_ERR_NO_MEMORY, "emulated device: no memory");
    e->comm = comm;
    emu_counts.devices++;
    *dev = e;
    return ZC_OK;
}

/* ---- a call ------------------------------------------------------------- */

/* The emulated device holds host memory: the host engine's dtypes. */
static zc_status_t emu_check(zc_comm_h comm, const zc_ring_attn_args_t *a, int backward)
{
    (void)comm, (void)backward;
    ZC_ARG_CHECK(a->dtype == ZC_FLOAT32 || a->dtype == ZC_BFLOAT16,
                 "dtype: %s, must be float32 or bfloat16", zc_datatype_name(a->dtype));
    return ZC_OK;
}

/* The caller's tensors, written on its stream before the call. */
static void emu_caller(emu_t *e, const zc_ring_attn_args_t *a, int64_t tokens)
{
    size_t es = zc_datatype_size(a->dtype), t = (size_t)tokens;
    size_t rq = t * (size_t)a->num_heads_q * (size_t)a->head_dim * es;
    size_t rk = t * (size_t)a->num_heads_kv * (size_t)a->head_dim * es;
    emu_range_t r[EMU_MAX_RANGES] = {
        {a->q, a->q ? rq : 0, 1}, {a->k, a->k ? rk : 0, 1}, {a->v, a->v ? rk : 0, 1},
        {a->out, a->out ? rq : 0, 1},
        {(const char *)a->lse, a->lse ? t * (size_t)a->num_heads_q * sizeof(float) : 0, 1},
        {a->dout, a->dout ? rq : 0, 1}, {a->dq, a->dq ? rq : 0, 1}, {a->dk, a->dk ? rk : 0, 1},
        {a->dv, a->dv ? rk : 0, 1}};

    emu_access(e, e->cur, "the caller's work before the call", r, 9);
}

static void emu_summary(const emu_t *e, emu_report_t *rep)
{
    rep->kernels = e->nkernels;
    rep->what_if_native = e->what_if_native;
    snprintf(rep->what_if_why, sizeof(rep->what_if_why), "%s", e->what_if_why);
    rep->transfers = e->ntransfers;
    rep->events = e->records;
    rep->overlapped = 0;
    for (int c = 0; c < e->ntransfers; c++) {
        const emu_op_t *t = &e->transfers[c];
        for (int k = 0; k < e->nkernels; k++) {
            const emu_op_t *q = &e->kernels[k];
            /* neither ordered before the other */
            if (q->index > t->knows && t->index > q->knows) {
                rep->overlapped++;
                break;
            }
        }
    }
}

/* A new call on caller stream `stream`: its own counts, the events of the
 * previous call but ZC_DS_EVENT_END unrecorded (each is recorded before it
 * is waited on within a call). */
static void emu_call_start(emu_t *e, int stream)
{
    e->cur = 1 + stream;
    e->race = ZC_OK;
    e->nkernels = e->ntransfers = e->records = e->what_if_native = 0;
    e->what_if_why[0] = '\0';
    for (int i = ZC_DS_EVENT_END + 1; i < e->nevents; i++)
        for (int t = 0; t < EMU_NSTREAMS; t++)
            e->events[i][t] = -1;
}

zc_status_t emu_ring_attn_on(zc_comm_h comm, zc_plan_h plan, const zc_ring_attn_args_t *args,
                             int backward, int stream, emu_report_t *report)
{
    zc_ra_ctx_t ctx = {.comm = comm, .plan = plan, .args = args, .backward = backward};
    zc_ras_keep_t *keep;
    emu_t *e;
    zc_status_t st;

    zc_error_clear();
    if (stream < 0 || stream >= EMU_CALLER_STREAMS)
        return zc_error(ZC_ERR_INVALID_ARG, "stream: %d, the emulated device has %d", stream,
                        EMU_CALLER_STREAMS);
    ZC_CHECK(zc_ra_begin(&ctx, emu_check, 1));
    if (!comm->device)
        return zc_error(ZC_ERR_INVALID_ARG, "comm: no emulated device (device_emu_install)");
    ZC_CHECK(zc_ras_keep_get(comm, &emu_ops, emu_make, &keep));
    e = zc_ras_keep_dev(keep);
    emu_call_start(e, stream);
    emu_caller(e, args, ctx.tokens);
    st = zc_ra_stream_run(&ctx, keep);
    if (st != ZC_OK) { /* the engine released its state, e with it */
        if (report)
            memset(report, 0, sizeof(*report));
        return st;
    }
    if (e->know[e->cur][EMU_COMM] < e->clk[EMU_COMM])
        emu_fault(e, "the call returned with %lld transfers not ordered before the rest of "
                  "the caller's stream", (long long)(e->clk[EMU_COMM] -
                                                     e->know[e->cur][EMU_COMM]));
    if (e->nallocs > 1)
        emu_fault(e, "the call returned with %d device allocations kept (the engine keeps at "
                  "most one between calls)", e->nallocs);
    if (e->nallocs != zc_ras_keep_blocks(keep))
        emu_fault(e, "%d device allocations live, the engine holds %d", e->nallocs,
                  zc_ras_keep_blocks(keep));
    if (e->race != ZC_OK)
        st = zc_error(e->race, "stream schedule: %s", e->why);
    if (report)
        emu_summary(e, report);
    return st;
}

zc_status_t emu_ring_attn(zc_comm_h comm, zc_plan_h plan, const zc_ring_attn_args_t *args,
                          int backward, emu_report_t *report)
{
    return emu_ring_attn_on(comm, plan, args, backward, 0, report);
}
