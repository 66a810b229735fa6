/* Structs that cross the API and can grow (zcomm.h, "Structs that grow").
 *
 * A struct the caller fills starts with its size (zc_oob_t: struct_size),
 * set by its ZC_*_INITIALIZER.  The library accepts any size from the first
 * layout's (ZC_*_SIZE_V1 below: the end of the original fields) up: it
 * copies min(size, sizeof) bytes over a local copy that holds the defaults,
 * so an older caller gets the newer fields' defaults; bytes a newer caller
 * passes past this library's sizeof must be zero (the fields this library
 * does not know left at their defaults), else ZC_ERR_UNSUPPORTED, as Linux
 * does for clone3 and openat2.
 *
 * A struct the library fills also starts with its size, set by the caller
 * before the call: the library writes at most that many bytes (never past
 * it), from the first layout's size up, and on return `size` holds the
 * bytes it wrote (min(size, sizeof)). */
#ifndef ZC_ABI_H
#define ZC_ABI_H

#include <stddef.h>
#include <string.h>

#include "src/common/status.h"
#include "zcomm.h"

/* End of a field: the size of a first layout ending with it. */
#define ZC_ABI_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* First layouts of the structs the caller fills. */
#define ZC_CONFIG_SIZE_V1       ZC_ABI_END(zc_config_t, node_id)
#define ZC_OOB_SIZE_V1          ZC_ABI_END(zc_oob_t, size)
#define ZC_ATTN_ARGS_SIZE_V1    ZC_ABI_END(zc_attn_args_t, dv)
#define ZC_RING_ATTN_ARGS_SIZE_V1 ZC_ABI_END(zc_ring_attn_args_t, stats)
#define ZC_ATTN_KERNELS_SIZE_V1 ZC_ABI_END(zc_attn_kernels_t, flags)
#define ZC_CLUSTER_SIZE_V1      ZC_ABI_END(zc_cluster_t, bytes_per_elem)
/* zc_plan_opts_t's layouts end in padding where the next layout put a
 * field: the first ended after flags (32 on LP64, rails in its padding), the
 * second after reserved (40, window_left in its padding).  A caller's bytes
 * are read only up to the end of its layout's last field
 * (zc_plan_opts_read_limit). */
#define ZC_ABI_PADDED(type, end) \
    (((end) + _Alignof(type) - 1) / _Alignof(type) * _Alignof(type))
#define ZC_PLAN_OPTS_SIZE_V1 ZC_ABI_PADDED(zc_plan_opts_t, offsetof(zc_plan_opts_t, rails))
#define ZC_PLAN_OPTS_SIZE_V2 ZC_ABI_PADDED(zc_plan_opts_t, offsetof(zc_plan_opts_t, window_left))

/* Bytes of a zc_plan_opts_t of `size` that hold fields. */
static inline size_t zc_plan_opts_read_limit(size_t size)
{
    if (size < ZC_PLAN_OPTS_SIZE_V2)
        return offsetof(zc_plan_opts_t, rails);
    if (size < sizeof(zc_plan_opts_t))
        return offsetof(zc_plan_opts_t, window_left);
    return sizeof(zc_plan_opts_t);
}

/* First layouts of the structs the library fills. */
#define ZC_TOPO_GPU_SIZE_V1     ZC_ABI_END(zc_topo_gpu_t, cuda_device)
#define ZC_TOPO_NIC_SIZE_V1     ZC_ABI_END(zc_topo_nic_t, netdev)
#define ZC_PLAN_INFO_SIZE_V1    ZC_ABI_END(zc_plan_info_t, remap_objective)
#define ZC_COST_SIZE_V1         ZC_ABI_END(zc_cost_t, bytes_inter)
#define ZC_RING_ATTN_STATS_SIZE_V1 ZC_ABI_END(zc_ring_attn_stats_t, kernel_calls)

/* Read a caller-filled struct: `local` (local_size bytes) holds the
 * defaults; the caller's `size` bytes at `user` are checked and copied over
 * it (at most `copy_max` bytes, normally local_size).  `name` is the
 * argument's name, `init` the initializer macro to suggest. */
static inline zc_status_t zc_abi_read(void *local, size_t local_size, size_t copy_max,
                                      const void *user, size_t size, size_t min_size,
                                      const char *name, const char *init)
{
    if (size < min_size)
        return zc_error(ZC_ERR_INVALID_ARG,
                        "%s: size %zu is below %zu, the first layout's (initialise it with %s)",
                        name, size, min_size, init);
    if (size > local_size) {
        for (size_t i = local_size; i < size; i++)
            if (((const unsigned char *)user)[i] != 0)
                return zc_error(ZC_ERR_UNSUPPORTED,
                                "%s: size %zu, byte %zu is set, and this libzcomm knows only "
                                "%zu bytes of it (a newer field, not supported here)",
                                name, size, i, local_size);
    }
    memcpy(local, user, size < copy_max ? size : copy_max);
    return ZC_OK;
}

/* Check the size the caller set in a struct the library fills. */
static inline zc_status_t zc_abi_out_check(size_t size, size_t min_size, const char *name,
                                           const char *init)
{
    if (size < min_size)
        return zc_error(ZC_ERR_INVALID_ARG,
                        "%s: size %zu is below %zu, the first layout's (set it with %s)",
                        name, size, min_size, init);
    return ZC_OK;
}

/* Write `full` (full_size bytes, its leading size_t ignored) into the
 * caller's struct `user`, whose leading size_t the caller set (checked by
 * zc_abi_out_check): at most that many bytes, and `size` becomes the count
 * written. */
static inline void zc_abi_write(void *user, const void *full, size_t full_size)
{
    size_t size, n;

    memcpy(&size, user, sizeof(size));
    n = size < full_size ? size : full_size;
    memcpy((char *)user + sizeof(size_t), (const char *)full + sizeof(size_t),
           n - sizeof(size_t));
    memcpy(user, &n, sizeof(n));
}

#endif
