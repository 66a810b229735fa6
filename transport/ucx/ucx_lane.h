/* A lane: one UCX context and worker, restricted to some transports and
 * devices.  The host path has one lane inside a node (shared memory) and
 * one per rail between nodes (that NIC only), because UCX's own multi-rail
 * stops at two rails and would not keep transfers rail-aligned. */
#ifndef ZC_UCX_LANE_H
#define ZC_UCX_LANE_H

#include <ucp/api/ucp.h>

#include "zcomm.h"

typedef struct {
    ucp_context_h context;
    ucp_worker_h worker;
    int event_fd;
    char name[32];             /* for messages: "intra", "rail 2" */
} zc_ucx_lane_t;

/* `tls`, `devices` and `rndv_scheme` are UCX_TLS, UCX_NET_DEVICES and
 * UCX_RNDV_SCHEME values; NULL leaves UCX's own (or the user's UCX_*
 * variables) in force. */
zc_status_t zc_ucx_lane_open(zc_ucx_lane_t *lane, const char *name, const char *tls,
                             const char *devices, const char *rndv_scheme, int nranks);
void zc_ucx_lane_close(zc_ucx_lane_t *lane);
/* `tls` (a UCX_TLS value) without tcp, in `buf`: for a lane that only
 * reaches ranks of its own host, where a tcp interface UCX activates costs
 * a system call (epoll) in progress calls, which doubled a small message's
 * round trip (BENCHMARKS.md, "Point-to-point").  NULL, and lists that
 * exclude ("^...") or name nothing but tcp, come back as they are. */
const char *zc_ucx_tls_but_tcp(const char *tls, char *buf, size_t len);
/* The UCX settings (names without UCX_, at most 2) a lane of transports
 * `tls` (a UCX_TLS value) takes unless the user's environment sets them:
 * with tcp and no other network transport, no zero copy, and eager
 * messages up to 256 KiB when no shared memory shares the lane either. */
int zc_ucx_tcp_settings(const char *tls, const char **keys, const char **values);
/* A UCX status of an operation (not of setup) as a zc_status_t. */
zc_status_t zc_ucx_status(ucs_status_t status);
/* A peer failed in this process: UCX's error lines that follow are
 * consequences, logged at info (see ucx_lane.c). */
void zc_ucx_note_peer_failure(void);

#endif
