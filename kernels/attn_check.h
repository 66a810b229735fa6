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

/* The mask a caller's fields give (zc_attn_fwd(3), "Masks"): without
 * `window` set (the flag named `flag`), window_left and window_right must
 * be 0 (their defaults) and `causal` alone decides, (-1, 0) or (-1, -1);
 * with it, the window (each side -1 for unbounded or a count of keys), and
 * `causal`, when set, also hides every key right of its query: the window's
 * right side must then be -1 or 0.  `prefix` goes before the fields' names
 * in the messages ("opts->" for the plan's options). */
static inline zc_status_t zc_attn_mask_resolve(int causal, int window, int left, int right,
                                               const char *prefix, const char *flag,
                                               zc_attn_mask_t *mask)
{
    if (!window) {
        ZC_ARG_CHECK(left == 0, "%swindow_left: %d without %s in flags (set the flag to use a "
                     "window)", prefix, left, flag);
        ZC_ARG_CHECK(right == 0, "%swindow_right: %d without %s in flags (set the flag to use "
                     "a window)", prefix, right, flag);
        *mask = zc_attn_mask_make(-1, causal ? 0 : -1);
        return ZC_OK;
    }
    ZC_ARG_CHECK(left >= -1, "%swindow_left: %d, must be -1 (unbounded) or a count of keys >= 0",
                 prefix, left);
    ZC_ARG_CHECK(right >= -1, "%swindow_right: %d, must be -1 (unbounded) or a count of keys "
                 ">= 0", prefix, right);
    ZC_ARG_CHECK(!causal || right <= 0, "%swindow_right: %d with causal set, which hides every "
                 "key right of its query (pass causal = 0, or window_right 0 or -1)", prefix,
                 right);
    *mask = zc_attn_mask_make(left, causal ? 0 : right);
    return ZC_OK;
}

/* The mask of ring attention's args: causal unless ZC_ATTN_WINDOW, with
 * it the window alone. */
static inline zc_status_t zc_attn_ring_mask(const zc_ring_attn_args_t *a, zc_attn_mask_t *mask)
{
    ZC_ARG_CHECK((a->flags & ~ZC_ATTN_WINDOW) == 0, "flags: unknown bits 0x%x",
                 a->flags & ~ZC_ATTN_WINDOW);
    return zc_attn_mask_resolve(!(a->flags & ZC_ATTN_WINDOW), (a->flags & ZC_ATTN_WINDOW) != 0,
                                a->window_left, a->window_right, "", "ZC_ATTN_WINDOW", mask);
}

/* What every attention kernel call must satisfy whatever its storage
 * types: heads, head dim, scale, flags, mask and both cu_seqlens (*tq, *tk
 * get their totals, *mask the call's mask).  The dtypes are the caller's to
 * check. */
static inline zc_status_t zc_attn_check_call(const zc_attn_args_t *args, int64_t *tq,
                                             int64_t *tk, zc_attn_mask_t *mask)
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
    ZC_ARG_CHECK((args->flags & ~(ZC_ATTN_ACCUMULATE | ZC_ATTN_WINDOW)) == 0,
                 "flags: unknown bits 0x%x", args->flags & ~(ZC_ATTN_ACCUMULATE | ZC_ATTN_WINDOW));
    ZC_CHECK(zc_attn_mask_resolve(args->causal, (args->flags & ZC_ATTN_WINDOW) != 0,
                                  args->window_left, args->window_right, "", "ZC_ATTN_WINDOW",
                                  mask));
    ZC_CHECK(zc_attn_check_seqlens(args->cu_seqlens_q, args->batch, "cu_seqlens_q", tq));
    return zc_attn_check_seqlens(args->cu_seqlens_kv, args->batch, "cu_seqlens_kv", tk);
}

/* The mask of args that zc_attn_check_call accepted (the kernels' block
 * maps and launches read it again, after the checks). */
static inline zc_attn_mask_t zc_attn_args_mask(const zc_attn_args_t *args)
{
    zc_attn_mask_t mask = zc_attn_mask_make(-1, args->causal ? 0 : -1);

    (void)zc_attn_mask_resolve(args->causal, (args->flags & ZC_ATTN_WINDOW) != 0,
                               args->window_left, args->window_right, "", "ZC_ATTN_WINDOW",
                               &mask);
    return mask;
}

#endif
