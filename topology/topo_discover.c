/* hwloc source: GPUs (PCI class 03xx, NVIDIA vendor), NICs (OpenFabrics OS
 * devices, one per port) and the PCI tree above them, from the live machine
 * or an hwloc XML export (1.x and 2.x formats both load in hwloc 2). */
#include "config.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/status.h"
#include "topology/topo.h"

#define ZC_PCI_VENDOR_NVIDIA 0x10de
#define ZC_PCI_CLASS_DISPLAY 0x03     /* base class of VGA (0300) and 3D (0302) */
#define ZC_PCI_CLASS_ETHERNET 0x0200
#define ZC_PCI_CLASS_INFINIBAND 0x0207
#define ZC_TOPO_MAX_PORTS 16

/* hwloc objects already turned into model nodes, and the CPU-side
 * localities (nodesets) already seen. */
typedef struct {
    zc_topo_t *topo;
    hwloc_topology_t hw;
    hwloc_obj_t *objs;           /* objs[i] is model node i */
    hwloc_bitmap_t *nodesets;    /* nodesets[i] is locality i */
} zc_discover_t;

static zc_status_t zc_discover_locality(zc_discover_t *ds, hwloc_obj_t io_obj, int *locality)
{
    hwloc_obj_t cpu_side = hwloc_get_non_io_ancestor_obj(ds->hw, io_obj);
    hwloc_const_nodeset_t nodeset = cpu_side ? cpu_side->nodeset : NULL;
    int n = ds->topo->num_localities, numa = -1;
    zc_status_t status;

    for (int i = 0; i < n; i++) {
        if (nodeset && hwloc_bitmap_isequal(ds->nodesets[i], nodeset)) {
            *locality = i;
            return ZC_OK;
        }
    }
    hwloc_bitmap_t *grown = realloc(ds->nodesets, (size_t)(n + 1) * sizeof(*grown));
    if (!grown)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot record a NUMA locality");
    ds->nodesets = grown;
    hwloc_bitmap_t copy = nodeset ? hwloc_bitmap_dup(nodeset) : hwloc_bitmap_alloc();
    if (!copy)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot record a NUMA locality");
    if (nodeset && hwloc_bitmap_weight(nodeset) == 1)
        numa = hwloc_bitmap_first(nodeset);
    ZC_CHECK_GOTO(zc_topo_add_locality(ds->topo, numa, locality), status, err_free);
    ds->nodesets[n] = copy;
    return ZC_OK;

err_free:
    hwloc_bitmap_free(copy);
    return status;
}

static zc_status_t zc_discover_add(zc_discover_t *ds, hwloc_obj_t obj, zc_topo_node_kind_t kind,
                                   int parent, int locality, int *index)
{
    hwloc_obj_t *grown = realloc(ds->objs, (size_t)(ds->topo->num_nodes + 1) * sizeof(*grown));

    if (!grown)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot record a PCI object");
    ds->objs = grown;
    ds->objs[ds->topo->num_nodes] = obj;
    return zc_topo_add_node(ds->topo, kind, parent, locality, index);
}

/* Model node of a PCI device or bridge, creating it and its ancestors. */
static zc_status_t zc_discover_node(zc_discover_t *ds, hwloc_obj_t obj, int *index)
{
    int parent = -1, locality = -1;
    zc_topo_node_kind_t kind;

    for (int i = 0; i < ds->topo->num_nodes; i++) {
        if (ds->objs[i] == obj) {
            *index = i;
            return ZC_OK;
        }
    }
    if (obj->type == HWLOC_OBJ_BRIDGE && obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
        kind = ZC_TOPO_NODE_HOST_BRIDGE;
        ZC_CHECK(zc_discover_locality(ds, obj, &locality));
    } else {
        kind = obj->type == HWLOC_OBJ_BRIDGE ? ZC_TOPO_NODE_BRIDGE : ZC_TOPO_NODE_DEVICE;
        hwloc_obj_t up = obj->parent;
        if (up && (up->type == HWLOC_OBJ_BRIDGE || up->type == HWLOC_OBJ_PCI_DEVICE)) {
            ZC_CHECK(zc_discover_node(ds, up, &parent));
        } else {
            /* An export without host bridge objects: give the object a host
             * bridge of its own on its CPU side. */
            ZC_CHECK(zc_discover_locality(ds, obj, &locality));
            ZC_CHECK(zc_discover_add(ds, NULL, ZC_TOPO_NODE_HOST_BRIDGE, -1, locality, &parent));
            locality = -1;
        }
    }
    return zc_discover_add(ds, obj, kind, parent, locality, index);
}

static void zc_discover_pci_id(hwloc_obj_t pci, char *buf)
{
    zc_topo_format_pci(buf, pci->attr->pcidev.domain, pci->attr->pcidev.bus,
                       pci->attr->pcidev.dev, pci->attr->pcidev.func);
}

static zc_status_t zc_discover_gpus(zc_discover_t *ds)
{
    for (hwloc_obj_t pci = hwloc_get_next_pcidev(ds->hw, NULL); pci;
         pci = hwloc_get_next_pcidev(ds->hw, pci)) {
        zc_topo_gpu_t gpu = {.numa = -1, .cuda_device = -1};
        int node;

        if (pci->attr->pcidev.vendor_id != ZC_PCI_VENDOR_NVIDIA ||
            (pci->attr->pcidev.class_id >> 8) != ZC_PCI_CLASS_DISPLAY)
            continue;
        ZC_CHECK(zc_discover_node(ds, pci, &node));
        zc_discover_pci_id(pci, gpu.pci);
        gpu.numa = zc_topo_node_numa(ds->topo, node);
        gpu.link_gbs = pci->attr->pcidev.linkspeed;
        ZC_CHECK(zc_topo_add_gpu(ds->topo, &gpu, node));
    }
    return ZC_OK;
}

/* The network interface beside an OpenFabrics device (ib0 next to mlx5_0),
 * preferring the one whose "Port" info matches the port. */
static void zc_discover_netdev(hwloc_obj_t pci, int port, char *netdev)
{
    const char *first = NULL;

    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE || c->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK)
            continue;
        const char *p = hwloc_obj_get_info_by_name(c, "Port");
        if (p && atoi(p) == port) {
            first = c->name;
            break;
        }
        if (!first)
            first = c->name;
    }
    zc_topo_copy_name(netdev, ZC_TOPO_NAME_LEN, first);
}

static zc_status_t zc_discover_nic_ports(zc_discover_t *ds, hwloc_obj_t osdev)
{
    hwloc_obj_t pci = osdev->parent;
    zc_topo_nic_t nic = {.numa = -1, .rate_gbps = -1};
    int node, nports = 0;

    if (!pci || pci->type != HWLOC_OBJ_PCI_DEVICE) {
        zc_log_debug("OpenFabrics device %s has no PCI parent; skipped", osdev->name);
        return ZC_OK;
    }
    ZC_CHECK(zc_discover_node(ds, pci, &node));
    zc_topo_copy_name(nic.name, sizeof(nic.name), osdev->name);
    zc_discover_pci_id(pci, nic.pci);
    nic.numa = zc_topo_node_numa(ds->topo, node);
    nic.link_gbs = pci->attr->pcidev.linkspeed;
    /* hwloc has no link layer; the PCI class tells an InfiniBand function
     * from an Ethernet (RoCE) one. */
    if (pci->attr->pcidev.class_id == ZC_PCI_CLASS_INFINIBAND)
        zc_topo_copy_name(nic.link_layer, sizeof(nic.link_layer), "InfiniBand");
    else if (pci->attr->pcidev.class_id == ZC_PCI_CLASS_ETHERNET)
        zc_topo_copy_name(nic.link_layer, sizeof(nic.link_layer), "Ethernet");

    for (int port = 1; port <= ZC_TOPO_MAX_PORTS; port++) {
        char key[32];
        snprintf(key, sizeof(key), "Port%dState", port);
        const char *state = hwloc_obj_get_info_by_name(osdev, key);
        if (!state)
            continue;
        nic.port = port;
        nic.state = (zc_port_state_t)atoi(state);
        if (nic.state < ZC_PORT_UNKNOWN || nic.state > ZC_PORT_ACTIVE)
            nic.state = ZC_PORT_UNKNOWN;
        zc_discover_netdev(pci, port, nic.netdev);
        ZC_CHECK(zc_topo_add_nic(ds->topo, &nic, node));
        nports++;
    }
    if (nports == 0) {
        /* No port information (an old export): one port of unknown state. */
        nic.port = 1;
        nic.state = ZC_PORT_UNKNOWN;
        zc_discover_netdev(pci, 1, nic.netdev);
        ZC_CHECK(zc_topo_add_nic(ds->topo, &nic, node));
    }
    return ZC_OK;
}

static zc_status_t zc_discover_nics(zc_discover_t *ds)
{
    for (hwloc_obj_t os = hwloc_get_next_osdev(ds->hw, NULL); os;
         os = hwloc_get_next_osdev(ds->hw, os)) {
        if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
            ZC_CHECK(zc_discover_nic_ports(ds, os));
    }
    return ZC_OK;
}

static zc_status_t zc_discover_load(hwloc_topology_t hw, const char *xml_path,
                                    const char *argname)
{
    /* Bridges and every PCI device are needed to walk paths; hwloc drops
     * I/O objects by default. */
    if (hwloc_topology_set_io_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_ALL) != 0)
        return zc_error(ZC_ERR_TOPOLOGY, "hwloc cannot keep I/O objects");
    if (xml_path && hwloc_topology_set_xml(hw, xml_path) != 0)
        return zc_error(ZC_ERR_TOPOLOGY, "%s: hwloc cannot read %s as an hwloc XML export",
                        argname, xml_path);
    if (hwloc_topology_load(hw) != 0)
        return zc_error(ZC_ERR_TOPOLOGY, "%s%shwloc cannot load the topology%s%s",
                        xml_path ? argname : "", xml_path ? ": " : "",
                        xml_path ? " of " : "", xml_path ? xml_path : "");
    return ZC_OK;
}

zc_status_t zc_topo_discover_hwloc(zc_topo_t *topo, const char *xml_path, const char *argname)
{
    zc_discover_t ds = {topo, NULL, NULL, NULL};
    zc_status_t status;

    if (hwloc_topology_init(&ds.hw) != 0)
        return zc_error(ZC_ERR_TOPOLOGY, "hwloc_topology_init failed");
    ZC_CHECK_GOTO(zc_discover_load(ds.hw, xml_path, argname), status, out);
    ZC_CHECK_GOTO(zc_discover_gpus(&ds), status, out);
    ZC_CHECK_GOTO(zc_discover_nics(&ds), status, out);
    zc_log_debug("hwloc %s: %d GPUs, %d NIC ports, %d PCI nodes", xml_path ? xml_path : "(live)",
                 topo->num_gpus, topo->num_nics, topo->num_nodes);
    status = ZC_OK;
out:
    for (int i = 0; ds.nodesets && i < topo->num_localities; i++)
        hwloc_bitmap_free(ds.nodesets[i]);
    free(ds.nodesets);
    free(ds.objs);
    hwloc_topology_destroy(ds.hw);
    return status;
}
