/* A communicator's settings: the per-communicator ZC_* variables of the
 * table (src/common/env_table.c) parsed once when it is created, the
 * caller's zc_config_t over them, and the agreement of the ones every rank
 * must share (ZC_ENV_SAME) over the bootstrap.  Collectives read
 * comm->settings, never the environment. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/env.h"
#include "src/common/status.h"
#include "src/core/settings.h"

/* One zc_config_t field over a variable: 0 keeps the variable,
 * ZC_CONFIG_ZERO sets 0, anything else is checked against its range. */
static zc_status_t zc_settings_override(zc_env_values_t *v, zc_env_id_t id, int64_t field,
                                        const char *field_name)
{
    char what[96];

    if (field == 0)
        return ZC_OK;
    if (field == ZC_CONFIG_ZERO)
        field = 0;
    snprintf(what, sizeof(what), "config: %s %" PRId64, field_name, field);
    ZC_CHECK(zc_env_check(id, field, what));
    v->value[id] = field;
    return ZC_OK;
}

zc_status_t zc_comm_settings_read(const zc_config_t *config, zc_comm_settings_t *s)
{
    zc_env_values_t v;

    ZC_CHECK(zc_env_parse(&v));
    if (config) {
        /* timeout_ms: 0 keeps ZC_TIMEOUT, a negative one is refused (comm.c) */
        if (config->timeout_ms > 0)
            v.value[ZC_ENV_TIMEOUT] = config->timeout_ms;
#define ZC_SETTINGS_FIELD(id, field) \
        ZC_CHECK(zc_settings_override(&v, id, (int64_t)config->field, #field))
        ZC_SETTINGS_FIELD(ZC_ENV_ROUTED_MIN_BYTES, routed_min_bytes);
        ZC_SETTINGS_FIELD(ZC_ENV_ROUTED_CHUNK, routed_chunk);
        ZC_SETTINGS_FIELD(ZC_ENV_ALLTOALLV_CHECK, alltoallv_check);
        ZC_SETTINGS_FIELD(ZC_ENV_ALLTOALLV_SPLIT_BYTES, alltoallv_split_bytes);
        ZC_SETTINGS_FIELD(ZC_ENV_ALLTOALLV_ROWS_MAX, alltoallv_rows_max);
        ZC_SETTINGS_FIELD(ZC_ENV_ALLTOALLV_WINDOW, alltoallv_window);
        ZC_SETTINGS_FIELD(ZC_ENV_RING_ATTN_CHECK, ring_attn_check);
        ZC_SETTINGS_FIELD(ZC_ENV_RING_ATTN_SLICE_MFLOP, ring_attn_slice_mflop);
        ZC_SETTINGS_FIELD(ZC_ENV_WAIT_SPIN_US, wait_spin_us);
        ZC_SETTINGS_FIELD(ZC_ENV_HOST_SPLIT_BYTES, host_split_bytes);
#undef ZC_SETTINGS_FIELD
        if (config->ring_attn_bwd_order != 0) {
            ZC_ARG_CHECK(config->ring_attn_bwd_order == ZC_BWD_ORDER_FORWARD ||
                             config->ring_attn_bwd_order == ZC_BWD_ORDER_REVERSE,
                         "config: ring_attn_bwd_order %d is not ZC_BWD_ORDER_FORWARD (1) or "
                         "ZC_BWD_ORDER_REVERSE (2)", config->ring_attn_bwd_order);
            v.value[ZC_ENV_RING_ATTN_BWD_ORDER] = config->ring_attn_bwd_order - 1;
        }
    }
    memset(s, 0, sizeof(*s));
    s->timeout_ms = (int)v.value[ZC_ENV_TIMEOUT];
    s->routed_min_bytes = v.value[ZC_ENV_ROUTED_MIN_BYTES];
    s->routed_chunk = v.value[ZC_ENV_ROUTED_CHUNK];
    s->alltoallv_check = (int)v.value[ZC_ENV_ALLTOALLV_CHECK];
    s->alltoallv_split_bytes = v.value[ZC_ENV_ALLTOALLV_SPLIT_BYTES];
    s->alltoallv_rows_max = v.value[ZC_ENV_ALLTOALLV_ROWS_MAX];
    s->alltoallv_window = v.value[ZC_ENV_ALLTOALLV_WINDOW];
    s->ring_attn_check = (int)v.value[ZC_ENV_RING_ATTN_CHECK];
    s->ring_attn_slice_mflop = v.value[ZC_ENV_RING_ATTN_SLICE_MFLOP];
    s->ring_attn_bwd_reverse = v.value[ZC_ENV_RING_ATTN_BWD_ORDER] == 1;
    s->wait_spin_us = (int)v.value[ZC_ENV_WAIT_SPIN_US];
    s->host_split_bytes = v.value[ZC_ENV_HOST_SPLIT_BYTES];
    s->rail_stripe_equal = v.value[ZC_ENV_RAIL_STRIPE] == 1;
    s->rail_stall_ms = (int)v.value[ZC_ENV_RAIL_STALL_MS];
    s->rail_probe_ms = (int)v.value[ZC_ENV_RAIL_PROBE_MS];
    return ZC_OK;
}

/* The settings back as the table's values, by zc_env_id_t. */
static void zc_settings_values(const zc_comm_settings_t *s, int64_t *value)
{
    value[ZC_ENV_TIMEOUT] = s->timeout_ms;
    value[ZC_ENV_ROUTED_MIN_BYTES] = s->routed_min_bytes;
    value[ZC_ENV_ROUTED_CHUNK] = s->routed_chunk;
    value[ZC_ENV_ALLTOALLV_CHECK] = s->alltoallv_check;
    value[ZC_ENV_ALLTOALLV_SPLIT_BYTES] = s->alltoallv_split_bytes;
    value[ZC_ENV_ALLTOALLV_ROWS_MAX] = s->alltoallv_rows_max;
    value[ZC_ENV_ALLTOALLV_WINDOW] = s->alltoallv_window;
    value[ZC_ENV_RING_ATTN_CHECK] = s->ring_attn_check;
    value[ZC_ENV_RING_ATTN_SLICE_MFLOP] = s->ring_attn_slice_mflop;
    value[ZC_ENV_RING_ATTN_BWD_ORDER] = s->ring_attn_bwd_reverse;
    value[ZC_ENV_WAIT_SPIN_US] = s->wait_spin_us;
    value[ZC_ENV_HOST_SPLIT_BYTES] = s->host_split_bytes;
    value[ZC_ENV_RAIL_STRIPE] = s->rail_stripe_equal;
    value[ZC_ENV_RAIL_STALL_MS] = s->rail_stall_ms;
    value[ZC_ENV_RAIL_PROBE_MS] = s->rail_probe_ms;
}

static const char *zc_settings_show(zc_env_id_t id, int64_t value, char *buf, size_t len)
{
    if (zc_env_spec(id)->type == ZC_ENV_CHOICE)
        return zc_env_choice_name(id, value, buf, len);
    snprintf(buf, len, "%" PRId64, value);
    return buf;
}

zc_status_t zc_comm_settings_agree(const zc_comm_settings_t *s, zc_bootstrap_t *bs, int rank,
                                   int nranks)
{
    int64_t mine[ZC_ENV_NCOMM], *all = malloc(sizeof(mine) * (size_t)nranks);
    zc_status_t st;

    if (!all)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the settings of %d ranks", nranks);
    zc_settings_values(s, mine);
    st = zc_bootstrap_allgather(bs, mine, all, sizeof(mine));
    for (int id = 0; st == ZC_OK && id < ZC_ENV_NCOMM; id++) {
        if (!(zc_env_spec((zc_env_id_t)id)->flags & ZC_ENV_SAME))
            continue;
        /* every rank scans the same table in the same order: all of them
         * name the same variable */
        for (int r = 0; r < nranks; r++) {
            int64_t theirs = all[(size_t)r * ZC_ENV_NCOMM + (size_t)id];
            int64_t first = all[id];
            char a[32], b[32], c[32];

            if (theirs == first)
                continue;
            st = zc_error(ZC_ERR_MISMATCH,
                          "%s: ranks disagree (rank 0 has %s, rank %d has %s; this rank %d has "
                          "%s): it must be the same on every rank (environment or zc_config_t)",
                          zc_env_spec((zc_env_id_t)id)->name,
                          zc_settings_show((zc_env_id_t)id, first, a, sizeof(a)), r,
                          zc_settings_show((zc_env_id_t)id, theirs, b, sizeof(b)), rank,
                          zc_settings_show((zc_env_id_t)id, mine[id], c, sizeof(c)));
            break;
        }
    }
    free(all);
    return st;
}
