/* A kernel table on libzcomm's own CPU kernels: see zc_attn_table.h. */
#include "config.h"

#include <stdlib.h>

#include "tools/zc_attn_table.h"

static int zc_own_grow(void **p, size_t *cap, size_t n, size_t elem)
{
    void *q;

    if (n <= *cap)
        return 0;
    q = realloc(*p, n * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* lse [a][b] -> [b][a]. */
static void zc_own_transpose(const float *src, float *dst, int64_t a, int64_t b)
{
    for (int64_t i = 0; i < a; i++)
        for (int64_t j = 0; j < b; j++)
            dst[j * a + i] = src[i * b + j];
}

static zc_status_t zc_own_call(zc_own_table_t *t, int backward, const zc_attn_varlen_t *c)
{
    zc_attn_args_t a = ZC_ATTN_ARGS_INITIALIZER;
    int64_t lse_n = c->total_q * c->num_heads_q;
    zc_status_t st;

    if (t->before && (st = t->before(t->arg, backward, c)) != ZC_OK)
        return st;
    if (c->memtype != ZC_MEM_HOST)
        return ZC_ERR_UNSUPPORTED;
    if (zc_own_grow((void **)&t->starts, &t->cap_starts, 2 * (size_t)c->batch, sizeof(int32_t)) ||
        zc_own_grow((void **)&t->lse, &t->cap_lse, lse_n > 0 ? (size_t)lse_n : 1, sizeof(float)))
        return ZC_ERR_NO_MEMORY;
    for (int b = 0; b < c->batch; b++) {
        int32_t lq = c->host_cu_seqlens_q[b + 1] - c->host_cu_seqlens_q[b];
        int32_t lk = c->host_cu_seqlens_kv[b + 1] - c->host_cu_seqlens_kv[b];

        t->starts[b] = c->causal ? lk - lq : 0; /* query i sees keys 0 .. i + lk - lq */
        t->starts[c->batch + b] = 0;
    }
    a.batch = c->batch;
    a.num_heads_q = c->num_heads_q;
    a.num_heads_kv = c->num_heads_kv;
    a.head_dim = c->head_dim;
    a.cu_seqlens_q = c->host_cu_seqlens_q;
    a.cu_seqlens_kv = c->host_cu_seqlens_kv;
    a.q_start = t->starts;
    a.kv_start = t->starts + c->batch;
    a.causal = c->causal;
    a.scale = c->scale;
    a.dtype = c->dtype;
    a.out_dtype = backward ? c->dtype : c->out_dtype;
    a.grad_dtype = c->out_dtype;
    a.q = c->q;
    a.k = c->k;
    a.v = c->v;
    a.out = c->out;
    a.lse = t->lse;
    if (!backward) {
        st = zc_attn_fwd(&a);
        if (st == ZC_OK)
            zc_own_transpose(t->lse, c->lse, c->total_q, c->num_heads_q);
        return st;
    }
    zc_own_transpose(c->lse, t->lse, c->num_heads_q, c->total_q);
    a.dout = c->dout;
    a.dq = c->dq;
    a.dk = c->dk;
    a.dv = c->dv;
    return zc_attn_bwd(&a);
}

static zc_status_t zc_own_fwd(void *ctx, const zc_attn_varlen_t *call)
{
    return zc_own_call(ctx, 0, call);
}

static zc_status_t zc_own_bwd(void *ctx, const zc_attn_varlen_t *call)
{
    return zc_own_call(ctx, 1, call);
}

void zc_own_table_init(zc_own_table_t *t, unsigned flags)
{
    static const zc_attn_kernels_t init = ZC_ATTN_KERNELS_INITIALIZER;

    *t = (zc_own_table_t){.kernels = init};
    t->kernels.ctx = t;
    t->kernels.fwd = zc_own_fwd;
    t->kernels.bwd = zc_own_bwd;
    t->kernels.flags = flags;
}

void zc_own_table_free(zc_own_table_t *t)
{
    free(t->starts);
    free(t->lse);
    t->starts = NULL;
    t->lse = NULL;
    t->cap_starts = t->cap_lse = 0;
}
