/* Ring attention test data, shared by zc_ring_attn_perf(1) and the tests:
 * a batch's whole q, k, v and dout made from a seed (so that every rank can
 * build all of it), each rank's rows in a plan's attention layout, the
 * single-process reference under the batch's mask (zc_attn_fwd/zc_attn_bwd
 * on whole sequences, or float64 row by row) and the comparison with it. */
#ifndef ZC_RING_ATTN_DATA_H
#define ZC_RING_ATTN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "zcomm.h"

/* The five results compared: out, lse, dq, dk, dv. */
enum { RAD_OUT, RAD_LSE, RAD_DQ, RAD_DK, RAD_DV, RAD_NRESULTS };

typedef struct {
    int hq, hkv, d;
    zc_datatype_t dtype;
    size_t nseqs;
    int64_t *lengths;          /* copy */
    int64_t *offset;           /* [nseqs]: first row of each sequence */
    int64_t total;
    void *q, *k, *v, *dout;    /* whole batch, dtype */
    void *out, *dq, *dk, *dv;  /* reference, dtype */
    float *lse;
    double max_abs[RAD_NRESULTS]; /* of each finite reference result */
    /* the mask, as zc_ring_attn_args_t's (0 after rad_batch_init: causal) */
    unsigned flags;            /* ZC_ATTN_WINDOW */
    int window_left, window_right;
} rad_batch_t;

/* Inputs uniform in [-1, 1) from `seed` (rounded to bfloat16 for that
 * dtype); 0 on success, -1 when out of memory. */
int rad_batch_init(rad_batch_t *b, const int64_t *lengths, size_t n, int hq, int hkv, int d,
                   zc_datatype_t dtype, uint64_t seed);
/* A batch of dataset `dataset` (zc_plan_dataset.h) scaled down by
 * `scale`: lengths drawn for total * scale tokens, each divided by scale
 * (at least 1), the batch cut or topped up to exactly `total` tokens.
 * Returns the count (0 when out of memory); *lengths is malloc'ed. */
size_t rad_sample(int dataset, int64_t total, int64_t scale, uint64_t seed, int64_t **lengths);

/* Put `value` at element `index` of tensor `which` (0 q, 1 k, 2 v, 3 dout). */
void rad_batch_poke(rad_batch_t *b, int which, int64_t index, float value);
/* The reference forward (and backward) under b's mask: ZC_OK or the
 * kernel's status. */
zc_status_t rad_batch_reference(rad_batch_t *b, int backward);
/* The same in float64, row by row (tools/zc_attn_ref.h), rounded to the
 * dtype: the backward from the reference's own out and lse.  Costs a pass
 * over its sequence per row and head: for the tests' small batches. */
zc_status_t rad_batch_reference64(rad_batch_t *b);
void rad_batch_free(rad_batch_t *b);

/* Bytes of one row of q (kv = 0) or of k (kv = 1). */
size_t rad_row_bytes(const rad_batch_t *b, int kv);
/* The rows of `pieces` from a whole-batch tensor, packed in piece order. */
void rad_gather(const rad_batch_t *b, const zc_plan_piece_t *pieces, size_t n, const void *whole,
                size_t row_bytes, void *local);

/* Compare this rank's rows of result `which` with the reference: the
 * worst of |x - ref| / (|ref| + max|ref|) over the rows (NaN, Inf and their
 * signs must match exactly, else the error is infinite) and how many
 * elements exceed `tol`. */
double rad_compare(const rad_batch_t *b, int which, const zc_plan_piece_t *pieces, size_t n,
                   const void *local, double tol, int64_t *wrong);

/* Default tolerance of a dtype: 1e-5 for float32, 2.5e-2 for bfloat16. */
double rad_tolerance(zc_datatype_t dtype);

/* One rank's buffers in a plan's attention layout: its rows of q, k, v,
 * dout (from the batch) and room for the results, `pad` rows longer than
 * the plan gives the rank, the padding (and the results) filled with
 * RAD_PAD_BYTE. */
#define RAD_PAD_BYTE 0x7b
typedef struct {
    void *q, *k, *v, *dout, *out, *dq, *dk, *dv;
    float *lse;
    int64_t rows, pad;
    const zc_plan_piece_t *pieces; /* the rank's pieces (the plan's) */
    size_t npieces;
} rad_local_t;

/* 0 on success, -1 when out of memory or `rank` is not the plan's. */
int rad_local_make(const rad_batch_t *b, zc_plan_h plan, int rank, int64_t pad, rad_local_t *l);
void rad_local_free(rad_local_t *l);
/* Shape, dtype, mask, row count and buffers of `l` into zc_ring_attn args. */
void rad_local_args(const rad_batch_t *b, const rad_local_t *l, zc_ring_attn_args_t *args);
/* Compare the results (forward only: out and lse) with the reference:
 * worst[] gets each one's worst error; returns the elements over `tol`,
 * or -1 when a padding row was written. */
int64_t rad_local_check(const rad_batch_t *b, const rad_local_t *l, int backward, double tol,
                        double worst[RAD_NRESULTS]);

#endif
