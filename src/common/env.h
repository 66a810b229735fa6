/* Environment variables: every one is declared in the typed table of
 * env_table.c (name, default, type, range or choices, scope, help); the
 * getters fall back to that default.
 *
 * Per-communicator variables (ZC_ENV_COMM) are parsed once, when a
 * communicator is created (zc_env_parse into its copy, src/core/comm.h);
 * the variables of ZC_ENV_SAME must have the same value on every rank, and
 * communicator creation checks that they do.  Process-wide variables
 * (ZC_ENV_PROCESS: logging, CPU kernels) are read by their module once per
 * process; the topology ones (ZC_ENV_TOPO) by every zc_topo_load. */
#ifndef ZC_ENV_H
#define ZC_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "zcomm.h"

/* ZC_ROUTED_MIN_BYTES when unset (the table's default in env_table.c, which
 * tests/test_plan_args checks against this): transfers between nodes
 * smaller than this go direct.  A number here so that the cost model
 * (src/plan/cost.c), which reads no environment, prices small hops as they run
 * by default. */
#define ZC_ROUTED_MIN_BYTES_DEFAULT 65536

typedef enum {
    ZC_ENV_STRING = 0,  /* any text */
    ZC_ENV_INT,         /* strtoll base 0 (decimal, 0x hex, 0 octal), within [min, max] */
    ZC_ENV_CHOICE       /* one of the '|'-separated words of `choices`; its index */
} zc_env_type_t;

/* Scope and agreement flags of a variable. */
#define ZC_ENV_PROCESS 0x1u  /* read once per process */
#define ZC_ENV_COMM    0x2u  /* parsed once per communicator, at its creation */
#define ZC_ENV_SAME    0x4u  /* must have the same value on every rank (checked at init) */
#define ZC_ENV_LAUNCH  0x8u  /* read by the communicator's bootstrap only */
#define ZC_ENV_TOPO    0x10u /* read by every zc_topo_load (topology) */

/* The per-communicator variables, in the table's order (indices into it). */
typedef enum {
    ZC_ENV_TIMEOUT = 0,
    ZC_ENV_ROUTED_MIN_BYTES,
    ZC_ENV_ROUTED_CHUNK,
    ZC_ENV_ALLTOALLV_CHECK,
    ZC_ENV_ALLTOALLV_SPLIT_BYTES,
    ZC_ENV_ALLTOALLV_ROWS_MAX,
    ZC_ENV_ALLTOALLV_WINDOW,
    ZC_ENV_RING_ATTN_CHECK,
    ZC_ENV_RING_ATTN_SLICE_MFLOP,
    ZC_ENV_RING_ATTN_BWD_ORDER,
    ZC_ENV_WAIT_SPIN_US,
    ZC_ENV_HOST_SPLIT_BYTES,
    ZC_ENV_RAIL_STRIPE,
    ZC_ENV_RAIL_STALL_MS,
    ZC_ENV_RAIL_PROBE_MS,
    ZC_ENV_NCOMM                /* the per-communicator ones come first */
} zc_env_id_t;

typedef struct {
    const char *name;
    const char *default_value;  /* NULL: none */
    zc_env_type_t type;
    int64_t min, max;           /* ZC_ENV_INT: the accepted range */
    const char *choices;        /* ZC_ENV_CHOICE: "forward|reverse" */
    unsigned flags;             /* ZC_ENV_PROCESS, ZC_ENV_COMM, ZC_ENV_SAME, ZC_ENV_LAUNCH */
    const char *help;
} zc_env_spec_t;

/* The typed table; *count is set.  Entry i < ZC_ENV_NCOMM is zc_env_id_t i. */
const zc_env_spec_t *zc_env_specs(size_t *count);
const zc_env_spec_t *zc_env_spec(zc_env_id_t id);

/* The parsed values of the per-communicator variables: integers, and the
 * index of a ZC_ENV_CHOICE's word. */
typedef struct {
    int64_t value[ZC_ENV_NCOMM];
} zc_env_values_t;

/* Parse every per-communicator variable from the environment (or its
 * default) into `out`: ZC_ERR_INVALID_ARG naming the variable and its range
 * or choices for a malformed or out-of-range value. */
zc_status_t zc_env_parse(zc_env_values_t *out);
/* Check one value of `id` against its range; `what` names it in the error
 * ("ZC_TIMEOUT=0x10", "config: timeout_ms"). */
zc_status_t zc_env_check(zc_env_id_t id, int64_t value, const char *what);
/* The word of a ZC_ENV_CHOICE value into buf ("reverse"). */
const char *zc_env_choice_name(zc_env_id_t id, int64_t index, char *buf, size_t len);

/* The variable's value, or its table default (NULL if it has none). */
const char *zc_env_get(const char *name);
/* Integer value (strtoll base 0; within the table's range for an integer
 * variable); a malformed or out-of-range value is ZC_ERR_INVALID_ARG naming
 * the variable and its range. */
zc_status_t zc_env_get_int(const char *name, int64_t *value);
/* A whole integer as strtoll base 0 reads it (decimal, 0x hex, 0 octal; a
 * sign; no trailing text); 0, or -1. */
int zc_parse_int64(const char *str, int64_t *value);

#endif
