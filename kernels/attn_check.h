/* Host-side argument checks shared by the CPU and GPU attention entry
 * points (C only; the CUDA sources never see them). */
#ifndef ZC_KERNELS_ATTN_CHECK_H
#define ZC_KERNELS_ATTN_CHECK_H

#include <math.h>
#include <stdint.h>

#include "kernels/attn_math.h"
#include "src/common/abi.h"
#include "src/common/status.h"
#include "zcomm.h"

/* The caller's args read into *local: its size's worth, the defaults past
 * it (src/common/abi.h).  Every public entry point taking a zc_attn_args_t
 * reads it so, then uses only *local. */
static inline zc_status_t zc_attn_args_read(const zc_attn_args_t *user, zc_attn_args_t *local)
{
    static const zc_attn_args_t defaults = ZC_ATTN_ARGS_INITIALIZER;

    *local = defaults;
    ZC_ARG_CHECK(user != NULL, "args: NULL");
    ZC_CHECK(zc_abi_read(local, sizeof(*local), sizeof(*local), user, user->size,
                         ZC_ATTN_ARGS_SIZE_V1, "args", "ZC_ATTN_ARGS_INITIALIZER"));
    local->size = sizeof(*local);
    return ZC_OK;
}

/* Read `args` (a parameter of the enclosing public call) into a local copy
 * and point args at it. */
#define ZC_ATTN_ARGS_READ(args)                                                   \
    zc_attn_args_t zc_attn_args_local_;                                           \
    ZC_CHECK(zc_attn_args_read((args), &zc_attn_args_local_));                    \
    (args) = &zc_attn_args_local_

/* cu_seqlens of `batch` segments: present, starting at 0, non-decreasing;
 * *total is its last entry (0 for an empty batch, where it may be NULL). */
static inline zc_status_t zc_attn_check_seqlens(const int32_t *cu, int batch, const char *name,
                                                int64_t *total)
{
    *total = 0;
    if (batch == 0)
        return ZC_OK;
    ZC_ARG_CHECK(cu != NULL, "%s: NULL with batch %d", name, batch);
    ZC_ARG_CHECK(cu[0] == 0, "%s[0]: %d, must be 0", name, (int)cu[0]);
    for (int b = 0; b < batch; b++)
        ZC_ARG_CHECK(cu[b + 1] >= cu[b], "%s: decreases at %d (%d then %d)", name, b + 1,
                     (int)cu[b], (int)cu[b + 1]);
    *total = cu[batch];
    return ZC_OK;
}

/* What every attention kernel call must satisfy whatever its storage
 * types: heads, head dim, scale, flags and both cu_seqlens (*tq, *tk get
 * their totals).  The dtypes are the caller's to check. */
static inline zc_status_t zc_attn_check_shape(const zc_attn_args_t *args, int64_t *tq,
                                              int64_t *tk)
{
    ZC_ARG_CHECK(args != NULL, "args: NULL");
    ZC_ARG_CHECK(args->batch >= 0, "batch: %d is negative", args->batch);
    ZC_ARG_CHECK(args->num_heads_q > 0, "num_heads_q: %d, must be positive", args->num_heads_q);
    ZC_ARG_CHECK(args->num_heads_kv > 0, "num_heads_kv: %d, must be positive",
                 args->num_heads_kv);
    ZC_ARG_CHECK(args->num_heads_q % args->num_heads_kv == 0,
                 "num_heads_q: %d is not a multiple of num_heads_kv (%d)", args->num_heads_q,
                 args->num_heads_kv);
    ZC_ARG_CHECK(args->head_dim > 0 && args->head_dim <= ZC_ATTN_MAX_HEAD_DIM,
                 "head_dim: %d, must be in 1..%d", args->head_dim, ZC_ATTN_MAX_HEAD_DIM);
    ZC_ARG_CHECK(isfinite(args->scale), "scale: %g is not finite", (double)args->scale);
    ZC_ARG_CHECK((args->flags & ~ZC_ATTN_ACCUMULATE) == 0, "flags: unknown bits 0x%x",
                 args->flags & ~ZC_ATTN_ACCUMULATE);
    ZC_CHECK(zc_attn_check_seqlens(args->cu_seqlens_q, args->batch, "cu_seqlens_q", tq));
    return zc_attn_check_seqlens(args->cu_seqlens_kv, args->batch, "cu_seqlens_kv", tk);
}

#endif
