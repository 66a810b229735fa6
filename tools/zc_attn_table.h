/* A kernel table (zc_attn_kernels(3)) on libzcomm's own CPU kernels, host
 * memory: each call of the table's contract turned back into a
 * zc_attn_fwd/zc_attn_bwd call (a causal segment's queries placed at
 * keys - queries, so that it is bottom-right aligned), the lse transposed
 * between the table's [heads, tokens] and the kernels' [tokens, heads].
 * With ZC_ATTN_KERNELS_BOTTOM_RIGHT | ZC_ATTN_KERNELS_FLOAT32_OUT the
 * engine gives it exactly the calls it makes of these kernels itself, so a
 * ring call through it has the same bits as one without a table
 * (tests/test_ring_attn_table); zc_ring_attn_perf -K times what the table
 * costs.  Memory other than host: ZC_ERR_UNSUPPORTED. */
#ifndef ZC_TOOLS_ATTN_TABLE_H
#define ZC_TOOLS_ATTN_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "zcomm.h"

typedef struct {
    zc_attn_kernels_t kernels;  /* args->kernels = &t->kernels */
    /* optional: called first with every call, its status other than ZC_OK
     * returned instead of computing (tests count, check and refuse) */
    zc_status_t (*before)(void *arg, int backward, const zc_attn_varlen_t *call);
    void *arg;
    int32_t *starts;            /* scratch */
    float *lse;
    size_t cap_starts, cap_lse;
} zc_own_table_t;

void zc_own_table_init(zc_own_table_t *t, unsigned flags);
void zc_own_table_free(zc_own_table_t *t);

#endif
