/* A communicator's settings (zc_comm_settings_t, comm.h): the
 * per-communicator ZC_* variables parsed once at its creation, the
 * caller's zc_config_t over them, and the check that the ones every rank
 * must share agree. */
#ifndef ZC_SETTINGS_H
#define ZC_SETTINGS_H

#include "src/core/bootstrap.h"
#include "src/core/comm.h"

/* The settings of a communicator about to be created: the environment
 * parsed once (zc_env_parse), then the caller's config (NULL: none) over
 * it; ZC_ERR_INVALID_ARG naming the variable or the config field and its
 * range.  Called before any bootstrap, so that a bad value fails at once
 * on its rank alone. */
zc_status_t zc_comm_settings_read(const zc_config_t *config, zc_comm_settings_t *settings);

/* Every rank's values of the ZC_ENV_SAME variables over the bootstrap:
 * ZC_ERR_MISMATCH on every rank naming the first variable that differs
 * (with this rank's value and another's) when they do not agree. */
zc_status_t zc_comm_settings_agree(const zc_comm_settings_t *settings, zc_bootstrap_t *bs,
                                   int rank, int nranks);

#endif
