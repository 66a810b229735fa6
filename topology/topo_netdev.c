/* The network interface UCX uses for each NIC.  hwloc gives the one beside
 * the OpenFabrics device (ib0 next to mlx5_0); the emulated cluster has no
 * such pairs, so ZC_NIC_NETDEV overrides them:
 *   ZC_NIC_NETDEV=mlx5_0=veth0,mlx5_1=veth1      (or mlx5_0:2=veth3 for a port)
 * NIC names match exactly; a name no NIC has is logged and ignored, so one
 * setting can serve nodes with fewer NICs. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/common/status.h"
#include "topology/topo.h"

static zc_status_t zc_netdev_apply(zc_topo_t *topo, const char *item, size_t len,
                                   const char *argname)
{
    const char *eq = memchr(item, '=', len);
    char name[ZC_TOPO_NAME_LEN], netdev[ZC_TOPO_NAME_LEN];
    int port = -1, applied = 0;

    if (!eq || eq == item || (size_t)(eq - item) + 1 == len)
        return zc_error(ZC_ERR_INVALID_ARG, "%s: \"%.*s\" is not nic=netdev", argname,
                        (int)len, item);
    size_t name_len = (size_t)(eq - item), dev_len = len - name_len - 1;
    if (name_len >= sizeof(name) || dev_len >= sizeof(netdev))
        return zc_error(ZC_ERR_INVALID_ARG, "%s: name too long in \"%.*s\"", argname, (int)len,
                        item);
    memcpy(name, item, name_len);
    name[name_len] = '\0';
    memcpy(netdev, eq + 1, dev_len);
    netdev[dev_len] = '\0';
    char *colon = strchr(name, ':');
    if (colon) {
        if ((port = zc_topo_parse_port(colon + 1, strlen(colon + 1))) < 0)
            return zc_error(ZC_ERR_INVALID_ARG, "%s: bad port in \"%.*s\"", argname, (int)len,
                            item);
        *colon = '\0';
    }
    for (int i = 0; i < topo->num_nics; i++) {
        zc_topo_nic_t *nic = &topo->nics[i].info;
        if (strcmp(nic->name, name) == 0 && (port < 0 || nic->port == port)) {
            zc_topo_copy_name(nic->netdev, sizeof(nic->netdev), netdev);
            applied++;
        }
    }
    if (!applied)
        zc_log_info("%s: no NIC %.*s here; ignored", argname, (int)name_len, item);
    return ZC_OK;
}

zc_status_t zc_topo_netdev_override(zc_topo_t *topo, const char *spec, const char *argname)
{
    while (spec && *spec) {
        size_t len = strcspn(spec, ",");
        if (len == 0)
            return zc_error(ZC_ERR_INVALID_ARG, "%s: empty item", argname);
        ZC_CHECK(zc_netdev_apply(topo, spec, len, argname));
        spec += len;
        if (*spec == ',')
            spec++;
    }
    return ZC_OK;
}
