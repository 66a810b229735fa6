/* Random inputs and the float64 reference of sampled rows of one attention
 * call, for the checks of zc_attn_perf (CPU and -G) and zc_ring_attn_perf
 * -G: self-attention over packed sequences cu[batch + 1] (a sequence's
 * queries and keys are the same tokens; causal: query i sees keys 0..i of
 * its sequence; a window as zc_attn_args_t's ZC_ATTN_WINDOW, causal hiding
 * the keys right of the query), tensors [token, head, dim] as host fp32
 * copies.  A row
 * costs one pass over its sequence, so a check of a few dozen rows stays
 * cheap beside the attention it checks. */
#ifndef ZC_TOOLS_ZC_ATTN_REF_H
#define ZC_TOOLS_ZC_ATTN_REF_H

#include <stdint.h>

#include "zcomm.h"

typedef struct {
    const int32_t *cu;
    int batch, hq, hkv, d, causal;
    int window, window_left, window_right; /* ZC_ATTN_WINDOW's; -1: unbounded */
    double scale;
    const float *q, *k, *v, *dout; /* the inputs */
    const float *out, *lse;        /* the forward's results that the backward takes */
} zar_call_t;

/* n standard normal values of dtype at dst (host), drawn from *seed. */
void zar_random(void *dst, zc_datatype_t dtype, int64_t n, uint64_t *seed);

/* The i-th of n sampled rows of `tokens` tokens and `heads` heads: spread
 * over the tokens (the first and the last among them), heads hashed. */
void zar_sample(int64_t tokens, int heads, int n, int i, int64_t *token, int *head);

/* Query row `token` of head h: out[d] and *lse (natural log, scaled scores). */
void zar_fwd_row(const zar_call_t *c, int64_t token, int h, double *out, double *lse);
/* dq[d] of query row `token`, head h, from c->out and c->lse of that row
 * (the backward's definition: its inputs as given). */
void zar_dq_row(const zar_call_t *c, int64_t token, int h, double *dq);
/* dk[d] and dv[d] of key row `token`, kv head hk, from c->out and c->lse
 * of every query row that sees it. */
void zar_dkv_row(const zar_call_t *c, int64_t token, int hk, double *dk, double *dv);

#endif
