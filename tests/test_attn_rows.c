/* The row-mapped copies around a kernel table's call (kernels/attn_rows.h):
 * GATHER, GATHER_LSE, MERGE and ADD on the host (kernels/cpu/attn_rows.c)
 * against a plain loop over the segments, and the CUDA kernels
 * (kernels/cuda/attn_rows.cu, compiled against tests/cuda_emu) against the
 * host, bit for bit, in thread order and in a random one: segments with
 * gaps between them and out of order on the buffer side, one row, many
 * segments (the binary search), float32 and bfloat16, float16 on the
 * device; rows of the buffer outside the segments untouched.  The merge's
 * edge cases: an accumulator or a part with lse -inf (empty) takes the
 * other side exactly. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu/cuda_emu.h"
#include "kernels/attn_math.h"
#include "kernels/attn_rows.h"
#define zc_attn_rows_cuda zc_emu_attn_rows_cuda
#include "kernels/cuda/attn_rows_cuda.h"
#include "tap.h"
#include "zcomm.h"

#define MAX_SEG 300

static uint64_t rng = 88172645463325252ull;

static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static float uniform(void)
{
    return (float)(next() % 20001) / 10000.0f - 1.0f;
}

/* The layout: nseg segments of 1..maxlen rows, placed on the buffer side
 * in a shuffled order with gaps of 0..2 rows; *span gets its rows. */
typedef struct {
    int nseg;
    int32_t cu[MAX_SEG + 1];
    int64_t row[MAX_SEG];
    int64_t span;
} layout_t;

static void make_layout(layout_t *l, int nseg, int maxlen)
{
    int order[MAX_SEG];
    int64_t at = 0;

    l->nseg = nseg;
    l->cu[0] = 0;
    for (int s = 0; s < nseg; s++) {
        l->cu[s + 1] = l->cu[s] + 1 + (int32_t)(next() % (uint32_t)maxlen);
        order[s] = s;
    }
    for (int s = nseg - 1; s > 0; s--) {
        int j = (int)(next() % (uint32_t)(s + 1)), t = order[s];
        order[s] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < nseg; i++) {
        int s = order[i];
        at += next() % 3;
        l->row[s] = at;
        at += l->cu[s + 1] - l->cu[s];
    }
    l->span = at + 1;
}

static void fill(void *p, zc_datatype_t dtype, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        float x = uniform();
        if (dtype == ZC_FLOAT32)
            ((float *)p)[i] = x;
        else /* float16 and bfloat16 alike: any 16-bit pattern of a small value */
            ((uint16_t *)p)[i] = dtype == ZC_BFLOAT16 ? zc_float_to_bf16(x)
                                                      : (uint16_t)(0x3000 + next() % 0x0c00);
    }
}

static float load(const void *p, zc_datatype_t dtype, int64_t i)
{
    if (dtype == ZC_FLOAT32)
        return ((const float *)p)[i];
    if (dtype == ZC_BFLOAT16)
        return zc_bf16_to_float(((const uint16_t *)p)[i]);
    /* float16: the small normal values fill() makes */
    uint16_t h = ((const uint16_t *)p)[i];
    return ldexpf(1.0f + (float)(h & 0x3ff) / 1024.0f, ((h >> 10) & 0x1f) - 15);
}

/* The plain loop each op must equal. */
static void reference(const zc_attn_rows_t *r)
{
    int64_t n = r->cu[r->nseg];

    for (int s = 0; s < r->nseg; s++)
        for (int64_t i = r->cu[s]; i < r->cu[s + 1]; i++) {
            int64_t at = r->row[s] + i - r->cu[s];

            switch (r->op) {
            case ZC_ROWS_GATHER:
                memcpy((char *)r->dst + i * r->row_bytes, (const char *)r->src + at * r->row_bytes,
                       r->row_bytes);
                break;
            case ZC_ROWS_GATHER_LSE:
                for (int h = 0; h < r->heads; h++)
                    ((float *)r->dst)[h * n + i] = ((const float *)r->src)[at * r->heads + h];
                break;
            case ZC_ROWS_MERGE:
                for (int h = 0; h < r->heads; h++) {
                    float part[ZC_ATTN_MAX_HEAD_DIM];
                    for (int d = 0; d < r->head_dim; d++)
                        part[d] = load(r->src, r->dtype, (i * r->heads + h) * r->head_dim + d);
                    zc_attn_merge_row((float *)r->dst + (at * r->heads + h) * r->head_dim,
                                      &r->dst_lse[at * r->heads + h], part,
                                      r->src_lse[h * n + i], r->head_dim);
                }
                break;
            case ZC_ROWS_ADD:
                for (int64_t e = 0; e < r->row_elems; e++)
                    ((float *)r->dst)[at * r->row_elems + e] +=
                        load(r->src, r->dtype, i * r->row_elems + e);
                break;
            }
        }
}

static const char *op_name(zc_rows_op_t op)
{
    static const char *names[] = {"GATHER", "GATHER_LSE", "MERGE", "ADD"};
    return names[op];
}

/* One op on one layout: the reference, the host and (every dtype) the
 * emulated device from the same inputs; returns what differed or NULL. */
static const char *run(zc_rows_op_t op, const layout_t *l, zc_datatype_t dtype, int heads,
                       int head_dim, int host_too)
{
    int64_t n = l->cu[l->nseg];
    size_t es = zc_datatype_size(dtype), row_elems = (size_t)heads * (size_t)head_dim;
    size_t compact_bytes, buf_bytes, lse_c = (size_t)n * (size_t)heads * sizeof(float);
    size_t lse_b = (size_t)l->span * (size_t)heads * sizeof(float);
    static const char *why;
    void *src, *dst[3], *src_lse = NULL, *dst_lse[3] = {NULL, NULL, NULL};
    zc_attn_rows_t r = {.op = op, .nseg = l->nseg, .cu = l->cu, .row = l->row, .heads = heads,
                        .head_dim = head_dim, .row_elems = (int64_t)row_elems,
                        .row_bytes = row_elems * es, .dtype = dtype};

    switch (op) {
    case ZC_ROWS_GATHER:
        compact_bytes = (size_t)n * row_elems * es, buf_bytes = (size_t)l->span * row_elems * es;
        break;
    case ZC_ROWS_GATHER_LSE:
        compact_bytes = lse_c, buf_bytes = lse_b;
        break;
    default:
        compact_bytes = (size_t)n * row_elems * es;
        buf_bytes = (size_t)l->span * row_elems * sizeof(float);
        break;
    }
    int gather = op == ZC_ROWS_GATHER || op == ZC_ROWS_GATHER_LSE;
    size_t src_bytes = gather ? buf_bytes : compact_bytes, dst_bytes = gather ? compact_bytes
                                                                              : buf_bytes;
    src = malloc(src_bytes);
    fill(src, op == ZC_ROWS_GATHER_LSE ? ZC_FLOAT32 : gather ? dtype : dtype,
         src_bytes / (op == ZC_ROWS_GATHER_LSE ? 4 : es));
    for (int k = 0; k < 3; k++) {
        dst[k] = malloc(dst_bytes);
        if (k == 0)
            fill(dst[0], ZC_FLOAT32, dst_bytes / 4);
        else
            memcpy(dst[k], dst[0], dst_bytes);
    }
    if (op == ZC_ROWS_MERGE) {
        src_lse = malloc(lse_c);
        fill(src_lse, ZC_FLOAT32, lse_c / 4);
        /* empty sides: every 7th part, every 5th accumulated row */
        for (size_t i = 0; i < lse_c / 4; i += 7)
            ((float *)src_lse)[i] = -INFINITY;
        for (int k = 0; k < 3; k++) {
            dst_lse[k] = malloc(lse_b);
            if (k == 0) {
                fill(dst_lse[0], ZC_FLOAT32, lse_b / 4);
                for (size_t i = 0; i < lse_b / 4; i += 5)
                    ((float *)dst_lse[0])[i] = -INFINITY;
            } else {
                memcpy(dst_lse[k], dst_lse[0], lse_b);
            }
        }
    }
    r.src = src;
    r.src_lse = src_lse;
    why = NULL;
    r.dst = dst[0];
    r.dst_lse = dst_lse[0];
    reference(&r);
    if (host_too) {
        r.dst = dst[1];
        r.dst_lse = dst_lse[1];
        if (zc_attn_rows(&r) != ZC_OK)
            why = "host: refused";
        else if (memcmp(dst[1], dst[0], dst_bytes) || (dst_lse[1] && memcmp(dst_lse[1],
                                                                              dst_lse[0], lse_b)))
            why = "host differs from the plain loop";
    }
    r.dst = dst[2];
    r.dst_lse = dst_lse[2];
    if (!why && zc_emu_attn_rows_cuda(&r, n, NULL) != 0)
        why = zc_emu_last_error();
    else if (!why && (memcmp(dst[2], dst[0], dst_bytes) ||
                      (dst_lse[2] && memcmp(dst_lse[2], dst_lse[0], lse_b))))
        why = "the CUDA kernel differs from the plain loop";
    free(src);
    free(src_lse);
    for (int k = 0; k < 3; k++) {
        free(dst[k]);
        free(dst_lse[k]);
    }
    return why;
}

int main(void)
{
    static const struct { int nseg, maxlen, heads, head_dim; } shapes[] = {
        {1, 1, 1, 1}, {1, 40, 3, 5}, {7, 9, 4, 8}, {MAX_SEG, 4, 2, 3}, {20, 70, 2, 64}};
    static const zc_datatype_t dtypes[] = {ZC_FLOAT32, ZC_BFLOAT16, ZC_FLOAT16};
    layout_t l;

    for (int order = 0; order < 2; order++) {
        zc_emu_set_schedule(order ? ZC_EMU_RANDOM : ZC_EMU_THREAD_ORDER, 1234);
        for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
            make_layout(&l, shapes[si].nseg, shapes[si].maxlen);
            for (int op = ZC_ROWS_GATHER; op <= ZC_ROWS_ADD; op++)
                for (int di = 0; di < 3; di++) {
                    const char *why;

                    if (op == ZC_ROWS_GATHER_LSE && di > 0)
                        continue; /* lse is float32 */
                    why = run((zc_rows_op_t)op, &l, dtypes[di], shapes[si].heads,
                              shapes[si].head_dim, dtypes[di] != ZC_FLOAT16);
                    ok(why == NULL, "%s, %s, %d segments of up to %d rows, %d heads of %d, %s: "
                       "host and CUDA kernel (threads %s) equal the plain loop%s%s",
                       op_name((zc_rows_op_t)op), zc_datatype_name(dtypes[di]), l.nseg,
                       shapes[si].maxlen, shapes[si].heads, shapes[si].head_dim,
                       dtypes[di] == ZC_FLOAT16 ? "(device only)" : "on the host too",
                       order ? "in a random order" : "in order", why ? ": " : "",
                       why ? why : "");
                }
        }
    }
    zc_attn_rows_t r = {.op = ZC_ROWS_ADD, .nseg = 1, .cu = l.cu, .row = l.row, .row_elems = 1,
                        .dtype = ZC_FLOAT16};
    ok(zc_attn_rows(&r) == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "dtype"),
       "the host refuses float16, naming dtype");
    return tap_done();
}
