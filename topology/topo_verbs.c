/* libibverbs refinement of the NICs hwloc found: port state, link layer and
 * rate.  Verbs is optional twice over: configured out, or present but
 * without a usable device (no RDMA hardware, no kernel driver); both leave
 * the hwloc view untouched and are reported as ZC_ERR_UNSUPPORTED so the
 * caller can log the fallback. */
#include "config.h"

#include <errno.h>
#include <string.h>

#ifdef HAVE_VERBS
#include <infiniband/verbs.h>
#endif

#include "src/common/status.h"
#include "topology/topo.h"

#ifdef HAVE_VERBS

/* Gbit/s per lane of ibv_port_attr.active_speed, and lanes of active_width,
 * as NCCL counts them. */
static double zc_verbs_lane_gbps(uint8_t speed)
{
    switch (speed) {
    case 1:   return 2.5;   /* SDR */
    case 2:   return 5.0;   /* DDR */
    case 4:   return 10.0;  /* QDR */
    case 8:   return 10.0;  /* FDR10 */
    case 16:  return 14.0;  /* FDR */
    case 32:  return 25.0;  /* EDR */
    case 64:  return 50.0;  /* HDR */
    case 128: return 100.0; /* NDR */
    default:  return -1.0;
    }
}

static int zc_verbs_lanes(uint8_t width)
{
    switch (width) {
    case 1:  return 1;
    case 2:  return 4;
    case 4:  return 8;
    case 8:  return 12;
    case 16: return 2;
    default: return 0;
    }
}

static void zc_verbs_fill_port(zc_topo_nic_t *nic, const struct ibv_port_attr *attr)
{
    double lane = zc_verbs_lane_gbps(attr->active_speed);
    int lanes = zc_verbs_lanes(attr->active_width);

    nic->state = (attr->state >= IBV_PORT_DOWN && attr->state <= IBV_PORT_ACTIVE)
                     ? (zc_port_state_t)attr->state
                     : ZC_PORT_DOWN;
    zc_topo_copy_name(nic->link_layer, sizeof(nic->link_layer),
                      attr->link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
    nic->rate_gbps = (lane > 0 && lanes > 0) ? lane * lanes : -1.0;
}

/* Record of (name, port), or -1. */
static int zc_verbs_find(const zc_topo_t *topo, const char *name, int port)
{
    for (int i = 0; i < topo->num_nics; i++)
        if (strcmp(topo->nics[i].info.name, name) == 0 &&
            (port < 0 || topo->nics[i].info.port == port))
            return i;
    return -1;
}

/* Update every port of one verbs device that hwloc also knows. */
static zc_status_t zc_verbs_update_device(zc_topo_t *topo, struct ibv_device *dev)
{
    const char *name = ibv_get_device_name(dev);
    int known = zc_verbs_find(topo, name, -1);
    struct ibv_device_attr dattr;
    struct ibv_context *ctx;

    if (known < 0) {
        zc_log_debug("verbs device %s is not in the hwloc topology; skipped", name);
        return ZC_OK;
    }
    ctx = ibv_open_device(dev);
    if (!ctx) {
        zc_log_info("cannot open verbs device %s: %m; keeping hwloc's view of it", name);
        return ZC_OK;
    }
    if (ibv_query_device(ctx, &dattr) != 0) {
        zc_log_info("ibv_query_device(%s) failed: %m; keeping hwloc's view of it", name);
        ibv_close_device(ctx);
        return ZC_OK;
    }
    zc_status_t status = ZC_OK;
    for (int port = 1; port <= dattr.phys_port_cnt; port++) {
        struct ibv_port_attr pattr;
        if (ibv_query_port(ctx, (uint8_t)port, &pattr) != 0) {
            zc_log_info("ibv_query_port(%s, %d) failed: %m", name, port);
            continue;
        }
        int i = zc_verbs_find(topo, name, port);
        if (i < 0) {
            /* A port hwloc did not list: a copy of the device's record. */
            zc_topo_nic_t nic = topo->nics[known].info;
            int node = topo->nics[known].node;
            nic.port = port;
            nic.netdev[0] = '\0';
            ZC_CHECK_GOTO(zc_topo_add_nic(topo, &nic, node), status, out);
            i = topo->num_nics - 1;
        }
        zc_verbs_fill_port(&topo->nics[i].info, &pattr);
    }
out:
    ibv_close_device(ctx);
    return status;
}

zc_status_t zc_topo_verbs_update(zc_topo_t *topo)
{
    int count = 0;
    struct ibv_device **list = ibv_get_device_list(&count);
    zc_status_t status = ZC_OK;

    if (!list || count == 0) {
        int err = errno;
        if (list)
            ibv_free_device_list(list);
        return zc_error(ZC_ERR_UNSUPPORTED, "libibverbs lists no device (%s)",
                        list ? "no RDMA device" : strerror(err));
    }
    for (int i = 0; i < count && status == ZC_OK; i++)
        status = zc_verbs_update_device(topo, list[i]);
    ibv_free_device_list(list);
    return status;
}

#else /* !HAVE_VERBS */

zc_status_t zc_topo_verbs_update(zc_topo_t *topo)
{
    (void)topo;
    return zc_error(ZC_ERR_UNSUPPORTED, "libzcomm was built without libibverbs");
}

#endif
