/* Opening and closing one UCX context + worker (a lane). */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucs/debug/log_def.h>

#include "src/common/log.h"
#include "src/common/status.h"
#include "transport/ucx/ucx_lane.h"

/* UCX_RNDV_THRESH of a tcp lane without shared memory (zc_ucx_tcp_settings) */
#define ZC_UCX_TCP_RNDV_THRESH "256K"

zc_status_t zc_ucx_status(ucs_status_t status)
{
    /* Link and endpoint failures (UCS_ERR_FIRST_LINK_FAILURE to
     * UCS_ERR_LAST_ENDPOINT_FAILURE) are a peer gone: UCX 1.13's tcp
     * reports a connection the peer reset (its process was killed) as
     * UCS_ERR_ENDPOINT_TIMEOUT at once, not after any timeout. */
    if (status <= UCS_ERR_FIRST_LINK_FAILURE && status >= UCS_ERR_LAST_ENDPOINT_FAILURE)
        return ZC_ERR_PEER_FAILED;
    switch (status) {
    case UCS_OK:                     return ZC_OK;
    case UCS_INPROGRESS:             return ZC_INPROGRESS;
    case UCS_ERR_NO_MEMORY:          return ZC_ERR_NO_MEMORY;
    case UCS_ERR_MESSAGE_TRUNCATED:  return ZC_ERR_MISMATCH;
    case UCS_ERR_CANCELED:
    case UCS_ERR_TIMED_OUT:          return ZC_ERR_TIMEOUT;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_IO_ERROR:           /* a broken connection, in practice */
    /* Operations only meet this (attaching a peer's segment) once the
     * peer's process is gone: its segment went with it. */
    case UCS_ERR_SHMEM_SEGMENT:
        return ZC_ERR_PEER_FAILED;
    case UCS_ERR_UNSUPPORTED:        return ZC_ERR_UNSUPPORTED;
    default:                         return ZC_ERR_TRANSPORT;
    }
}

/* ---- UCX's own log lines --------------------------------------------- */

static volatile int zc_ucx_failures_seen;

void zc_ucx_note_peer_failure(void)
{
    zc_ucx_failures_seen = 1;
}

/* UCX prints its ERROR and WARN lines on stderr by itself; after a peer
 * fails it prints dozens (the failed connection, then "unexpected
 * tag-receive descriptor ... was not matched" for every message the dead
 * or leaving peer had sent).  They go through ZC_LOG_LEVEL instead:
 * ERROR at warn (at info once a peer failed: a consequence, not news),
 * WARN at info, the rest at debug.  FATAL stays UCX's. */
static ucs_log_func_rc_t zc_ucx_log_handler(const char *file, unsigned line,
                                            const char *function, ucs_log_level_t level,
                                            const ucs_log_component_config_t *comp_conf,
                                            const char *message, va_list ap)
{
    zc_log_level_t zl;
    char text[512];
    const char *base = strrchr(file, '/');

    (void)function;
    (void)comp_conf;
    if (level == UCS_LOG_LEVEL_FATAL)
        return UCS_LOG_FUNC_RC_CONTINUE;
    if (level == UCS_LOG_LEVEL_ERROR)
        zl = zc_ucx_failures_seen ? ZC_LOG_INFO : ZC_LOG_WARN;
    else if (level == UCS_LOG_LEVEL_WARN)
        zl = ZC_LOG_INFO;
    else
        zl = ZC_LOG_DEBUG;
    if (zl <= zc_log_level()) {
        va_list copy;
        va_copy(copy, ap);
        vsnprintf(text, sizeof(text), message, copy);
        va_end(copy);
        zc_log_at(zl, base ? base + 1 : file, (int)line, "ucx %s: %s",
                  ucs_log_level_names[level], text);
    }
    return UCS_LOG_FUNC_RC_STOP;
}

static void zc_ucx_log_install(void)
{
    /* A user who sets UCX_LOG_LEVEL asked for UCX's own output. */
    if (!getenv("UCX_LOG_LEVEL"))
        ucs_log_push_handler(zc_ucx_log_handler);
}

/* ---- lanes ------------------------------------------------------------ */

/* What a UCX_TLS list names: tcp, shared-memory transports (self
 * aside), others (rc, ud, dc, all...: UCX may pick them).  A list that
 * excludes ("^...") names nothing here. */
typedef struct {
    int tcp, shm, other;
} zc_ucx_tls_kinds_t;

static zc_ucx_tls_kinds_t zc_ucx_tls_kinds(const char *tls)
{
    zc_ucx_tls_kinds_t k = {0, 0, 0};
    char buf[256], *save = NULL;

    if (!tls || tls[0] == '^' || strlen(tls) >= sizeof(buf))
        return k;
    snprintf(buf, sizeof(buf), "%s", tls);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "tcp") == 0)
            k.tcp = 1;
        else if (!strcmp(t, "sm") || !strcmp(t, "shm") || !strcmp(t, "posix") ||
                 !strcmp(t, "sysv") || !strcmp(t, "cma") || !strcmp(t, "xpmem") ||
                 !strcmp(t, "knem"))
            k.shm = 1;
        else if (strcmp(t, "self"))
            k.other = 1;
    }
    return k;
}

int zc_ucx_tcp_settings(const char *tls, const char **keys, const char **values)
{
    zc_ucx_tls_kinds_t k = zc_ucx_tls_kinds(tls);
    int n = 0;

    if (!k.tcp || k.other)
        return 0;
    /* UCX 1.13's tcp completes a zero-copy active message twice when the
     * peer's socket breaks under it (uct_tcp_ep_sendv: the purge in
     * uct_tcp_ep_handle_send_err completes it, then sendv again), which
     * aborts the process on `comp->count > 0` in uct_iface.h or
     * completes a request twice: a survivor of a killed peer died with
     * it.  Over tcp the copy costs little next to the socket. */
    if (!getenv("UCX_ZCOPY_THRESH")) {
        keys[n] = "ZCOPY_THRESH";
        values[n++] = "inf";
    }
    /* So a rendezvous over tcp saves no copy, but costs a round trip
     * whose control messages queue behind the data on a busy NIC: eager
     * up to 256 KiB, where UCX itself stops sending eager a message that
     * asks for fast completion (UCX_RNDV_SEND_NBR_THRESH).  A relayed
     * alltoallv's 32 KiB messages went from 0.93-0.97x of MPI_Alltoallv
     * to 1.02x (BENCHMARKS.md, "Remap alltoallv").  Not where shared
     * memory shares the lane: there a rendezvous is one copy (cma). */
    if (!getenv("UCX_RNDV_THRESH") && !k.shm) {
        keys[n] = "RNDV_THRESH";
        values[n++] = ZC_UCX_TCP_RNDV_THRESH;
    }
    return n;
}

const char *zc_ucx_tls_but_tcp(const char *tls, char *buf, size_t len)
{
    char copy[256], *save = NULL;
    size_t used = 0;

    if (!tls || tls[0] == '^' || strlen(tls) >= sizeof(copy) || len == 0)
        return tls;
    snprintf(copy, sizeof(copy), "%s", tls);
    buf[0] = '\0';
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (strcmp(t, "tcp") != 0 && used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "," : "", t);
    return buf[0] && used < len ? buf : tls;
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
                             const char *devices, const char *rndv_scheme, int nranks)
{
    ucp_params_t params = {0};
    ucp_worker_params_t wparams = {0};
    ucp_config_t *config;
    ucs_status_t us;
    zc_status_t st = ZC_OK;

    static pthread_once_t log_once = PTHREAD_ONCE_INIT;

    memset(lane, 0, sizeof(*lane));
    lane->event_fd = -1;
    snprintf(lane->name, sizeof(lane->name), "%s", name);
    pthread_once(&log_once, zc_ucx_log_install);
    us = ucp_config_read(NULL, NULL, &config);
    if (us != UCS_OK)
        return zc_error(ZC_ERR_TRANSPORT, "ucx: cannot read its configuration: %s",
                        ucs_status_string(us));
    if (tls)
        st = zc_ucx_config_set(config, "TLS", tls, name);
    if (st == ZC_OK && devices)
        st = zc_ucx_config_set(config, "NET_DEVICES", devices, name);
    if (st == ZC_OK && rndv_scheme)
        st = zc_ucx_config_set(config, "RNDV_SCHEME", rndv_scheme, name);
    const char *keys[2], *values[2];
    int nset = zc_ucx_tcp_settings(tls ? tls : getenv("UCX_TLS"), keys, values);
    for (int i = 0; i < nset && st == ZC_OK; i++)
        st = zc_ucx_config_set(config, keys[i], values[i], name);
    if (st != ZC_OK) {
        ucp_config_release(config);
        return st;
    }
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    /* active messages carry the rails' probes and notices (ucx_rails.c) */
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP | UCP_FEATURE_AM;
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
