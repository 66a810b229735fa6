/* Rails from the topology: which NICs carry inter-node traffic. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "src/common/log.h"
#include "src/core/rails.h"
#include "src/common/status.h"

/* What UCX should open for one NIC: its verbs port when it is active and
 * present on this machine (a topology file may describe another), its
 * network interface (tcp) when it has one. */
static int zc_rail_devices(const zc_topo_nic_t *nic, char *out, size_t len)
{
    char sysfs[128];
    snprintf(sysfs, sizeof(sysfs), "/sys/class/infiniband/%s", nic->name);
    int active_ib = nic->state == ZC_PORT_ACTIVE && strcmp(nic->link_layer, "InfiniBand") == 0 &&
                    access(sysfs, F_OK) == 0;

    out[0] = '\0';
    if (active_ib)
        snprintf(out, len, "%s:%d", nic->name, nic->port);
    if (nic->netdev[0])
        snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] ? "," : "", nic->netdev);
    return out[0] != '\0';
}

void zc_rails_discover(int local_rank, zc_rails_t *rails)
{
    zc_topo_h topo;
    int nics = 0, gpus = 0, first_rail[ZC_MAX_RAILS];

    memset(rails, 0, sizeof(*rails));
    rails->mine = -1;
    if (zc_topo_load(NULL, 0, &topo) != ZC_OK) {
        zc_log_info("no topology (%s): one UCX lane for every peer", zc_get_last_error());
        zc_error_clear();
        return;
    }
    zc_topo_nic_count(topo, &nics);
    zc_topo_gpu_count(topo, &gpus);
    if (nics > ZC_MAX_RAILS)
        nics = ZC_MAX_RAILS;
    for (int n = 0; n < nics; n++) {
        zc_topo_nic_t nic = ZC_TOPO_NIC_INITIALIZER;
        if (zc_topo_nic_info(topo, n, &nic) == ZC_OK &&
            zc_rail_devices(&nic, rails->devices[rails->count], ZC_RAIL_DEVICES_LEN)) {
            rails->rate_gbps[rails->count] = nic.rate_gbps > 0 ? nic.rate_gbps : 0;
            first_rail[n] = rails->count++;
        } else
            first_rail[n] = -1;
    }
    if (rails->count > 0) {
        zc_topo_assignment_t as;
        if (gpus > 0 && zc_topo_assignment(topo, local_rank % gpus, &as) == ZC_OK &&
            as.nic >= 0 && first_rail[as.nic] >= 0)
            rails->mine = first_rail[as.nic];
        else
            rails->mine = local_rank % rails->count;
        zc_log_info("%d rails; local rank %d uses rail %d (%s)", rails->count, local_rank,
                    rails->mine, rails->devices[rails->mine]);
    }
    zc_topo_destroy(topo);
}
