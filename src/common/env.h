/* Environment variables: every one is declared in the table in env_table.c, with
 * its default and help line; these getters fall back to that default. */
#ifndef ZC_ENV_H
#define ZC_ENV_H

#include <stdint.h>

#include "zcomm.h"

/* ZC_ROUTED_MIN_BYTES when unset (the table's default in env_table.c, which
 * tests/test_plan_args checks against this): transfers between nodes
 * smaller than this go direct.  A number here so that the cost model
 * (src/plan/cost.c), which reads no environment, prices small hops as they run
 * by default. */
#define ZC_ROUTED_MIN_BYTES_DEFAULT 65536

/* The variable's value, or its table default (NULL if it has none). */
const char *zc_env_get(const char *name);
/* Integer value; a malformed value is ZC_ERR_INVALID_ARG naming the variable. */
zc_status_t zc_env_get_int(const char *name, int64_t *value);
/* A whole base-10 integer (no sign limits beyond int64); 0, or -1. */
int zc_parse_int64(const char *str, int64_t *value);

#endif
