/* Opening and closing one UCX context + worker (a lane). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/status.h"
#include "transport/ucx/ucx_lane.h"

zc_status_t zc_ucx_status(ucs_status_t status)
{
    switch (status) {
    case UCS_OK:                     return ZC_OK;
    case UCS_INPROGRESS:             return ZC_INPROGRESS;
    case UCS_ERR_NO_MEMORY:          return ZC_ERR_NO_MEMORY;
    case UCS_ERR_MESSAGE_TRUNCATED:  return ZC_ERR_MISMATCH;
    case UCS_ERR_CANCELED:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT:   return ZC_ERR_TIMEOUT;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_IO_ERROR:           /* a broken connection, in practice */
        return ZC_ERR_PEER_FAILED;
    case UCS_ERR_UNSUPPORTED:        return ZC_ERR_UNSUPPORTED;
    default:                         return ZC_ERR_TRANSPORT;
    }
}

static zc_status_t zc_ucx_config_set(ucp_config_t *config, const char *key, const char *value,
                                     const char *lane)
{
    ucs_status_t us = ucp_config_modify(config, key, value);

    if (us != UCS_OK)
        return zc_error(ZC_ERR_INVALID_ARG, "ucx: %s lane: UCX_%s=%s rejected: %s", lane, key,
                        value, ucs_status_string(us));
    return ZC_OK;
}

zc_status_t zc_ucx_lane_open(zc_ucx_lane_t *lane, const char *name, const char *tls,
                             const char *devices, int nranks)
{
    ucp_params_t params = {0};
    ucp_worker_params_t wparams = {0};
    ucp_config_t *config;
    ucs_status_t us;
    zc_status_t st = ZC_OK;

    memset(lane, 0, sizeof(*lane));
    lane->event_fd = -1;
    snprintf(lane->name, sizeof(lane->name), "%s", name);
    us = ucp_config_read(NULL, NULL, &config);
    if (us != UCS_OK)
        return zc_error(ZC_ERR_TRANSPORT, "ucx: cannot read its configuration: %s",
                        ucs_status_string(us));
    if (tls)
        st = zc_ucx_config_set(config, "TLS", tls, name);
    if (st == ZC_OK && devices)
        st = zc_ucx_config_set(config, "NET_DEVICES", devices, name);
    if (st != ZC_OK) {
        ucp_config_release(config);
        return st;
    }
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.estimated_num_eps = (size_t)nranks;
    us = ucp_init(&params, config, &lane->context);
    ucp_config_release(config);
    /* UCX accepts any transport name and only finds at init that none of
     * them is here (UCX_TLS=bogus): that is a setting refused, like one
     * ucp_config_modify rejects, not a transport that failed. */
    if (us == UCS_ERR_NO_DEVICE && (tls || getenv("UCX_TLS")))
        return zc_error(ZC_ERR_INVALID_ARG,
                        "ucx: %s lane: UCX_TLS=%s%s%s rejected: nothing it names is available "
                        "here (ucp_init: %s)", name, tls ? tls : getenv("UCX_TLS"),
                        devices ? ", UCX_NET_DEVICES=" : "", devices ? devices : "",
                        ucs_status_string(us));
    if (us != UCS_OK)
        return zc_error(ZC_ERR_TRANSPORT, "ucx: %s lane: ucp_init failed: %s", name,
                        ucs_status_string(us));
    /* One thread at a time drives a communicator, not always the same one
     * (see zcomm(7)). */
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    us = ucp_worker_create(lane->context, &wparams, &lane->worker);
    if (us == UCS_OK)
        us = ucp_worker_get_efd(lane->worker, &lane->event_fd);
    if (us != UCS_OK) {
        st = zc_error(ZC_ERR_TRANSPORT, "ucx: %s lane: cannot create a worker: %s", name,
                      ucs_status_string(us));
        zc_ucx_lane_close(lane);
    }
    return st;
}

void zc_ucx_lane_close(zc_ucx_lane_t *lane)
{
    if (lane->worker)
        ucp_worker_destroy(lane->worker);
    if (lane->context)
        ucp_cleanup(lane->context);
    memset(lane, 0, sizeof(*lane));
    lane->event_fd = -1;
}
