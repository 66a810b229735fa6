/* NCCL topology XML source: the <system><cpu><pci>... files users give
 * NCCL_TOPO_FILE on cloud VMs whose PCIe tree is hidden.
 *
 * In those files a <pci> element with <pci> children stands for a whole
 * PCIe switch (NCCL folds the upstream and downstream ports into one
 * node), and a <cpu> for a NUMA node with its root complex.  The model gets
 * the hwloc shape back: a host bridge per <cpu>, a bridge per switch and a
 * downstream bridge above each child, so the same path walk gives NCCL's
 * answers: PIX under one switch, PXB across nested switches, PHB under one
 * <cpu>, SYS across <cpu>s (the file cannot tell NODE apart). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/status.h"
#include "topology/topo.h"

#define ZC_NCCL_VENDOR_NVIDIA 0x10de

static int zc_nccl_is(const zc_xml_node_t *node, const char *name)
{
    return strcmp(node->name, name) == 0;
}

static const zc_xml_node_t *zc_nccl_child(const zc_xml_node_t *node, const char *name)
{
    for (const zc_xml_node_t *c = node->first_child; c; c = c->next_sibling)
        if (zc_nccl_is(c, name))
            return c;
    return NULL;
}

/* PCI class as 0xCCSS (class, subclass) from "0x030200"; -1 if absent. */
static int zc_nccl_class(const zc_xml_node_t *pci)
{
    const char *cls = zc_xml_attr(pci, "class");

    return cls ? (int)(strtoul(cls, NULL, 16) >> 8) : -1;
}

static zc_status_t zc_nccl_busid(const zc_xml_node_t *pci, char *out)
{
    const char *busid = zc_xml_attr(pci, "busid");
    unsigned domain, bus, dev, func;

    if (!busid || sscanf(busid, "%x:%x:%x.%x", &domain, &bus, &dev, &func) != 4)
        return zc_error(ZC_ERR_TOPOLOGY, "NCCL topology: <pci> without a valid busid (\"%s\")",
                        busid ? busid : "");
    zc_topo_format_pci(out, domain, bus, dev, func);
    return ZC_OK;
}

/* "16.0 GT/s PCIe" x link_width lanes, in GB/s; 0 if unknown. */
static double zc_nccl_link_gbs(const zc_xml_node_t *pci)
{
    const char *speed = zc_xml_attr(pci, "link_speed");
    const char *width = zc_xml_attr(pci, "link_width");

    if (!speed || !width || atof(speed) <= 0 || atoi(width) <= 0)
        return 0.0;
    return zc_topo_pcie_gbs(atof(speed), atoi(width));
}

static int zc_nccl_is_gpu(const zc_xml_node_t *pci)
{
    const char *vendor = zc_xml_attr(pci, "vendor");

    if (zc_nccl_child(pci, "gpu"))
        return 1;
    return (zc_nccl_class(pci) >> 8) == 0x03 &&
           (!vendor || strtoul(vendor, NULL, 16) == ZC_NCCL_VENDOR_NVIDIA);
}

static void zc_nccl_link_layer(int cls, zc_topo_nic_t *nic)
{
    if (cls == 0x0207)
        zc_topo_copy_name(nic->link_layer, sizeof(nic->link_layer), "InfiniBand");
    else if (cls == 0x0200)
        zc_topo_copy_name(nic->link_layer, sizeof(nic->link_layer), "Ethernet");
}

/* NICs of a <nic> element (its <net> children) on device node `node`;
 * `pci` is the enclosing <pci>, NULL for a NIC straight under a <cpu>. */
static zc_status_t zc_nccl_nics(zc_topo_t *topo, const zc_xml_node_t *pci,
                                const zc_xml_node_t *nic_elem, int node)
{
    zc_topo_nic_t base = {.numa = zc_topo_node_numa(topo, node), .rate_gbps = -1, .port = 1};
    int found = 0;

    if (pci) {
        ZC_CHECK(zc_nccl_busid(pci, base.pci));
        base.link_gbs = zc_nccl_link_gbs(pci);
        zc_nccl_link_layer(zc_nccl_class(pci), &base);
    }
    for (const zc_xml_node_t *c = nic_elem ? nic_elem->first_child : NULL; c; c = c->next_sibling) {
        if (!zc_nccl_is(c, "net"))
            continue;
        zc_topo_nic_t nic = base;
        const char *name = zc_xml_attr(c, "name");
        const char *port = zc_xml_attr(c, "port");
        const char *speed = zc_xml_attr(c, "speed"); /* Mbit/s */
        zc_topo_copy_name(nic.name, sizeof(nic.name), name ? name : base.pci);
        if (port && atoi(port) > 0)
            nic.port = atoi(port);
        if (speed && atof(speed) > 0)
            nic.rate_gbps = atof(speed) / 1000.0;
        ZC_CHECK(zc_topo_add_nic(topo, &nic, node));
        found++;
    }
    if (!found) {
        /* A network function without <nic>: NCCL would name it by bus id. */
        zc_topo_copy_name(base.name, sizeof(base.name), base.pci[0] ? base.pci : "nic");
        ZC_CHECK(zc_topo_add_nic(topo, &base, node));
    }
    return ZC_OK;
}

static zc_status_t zc_nccl_pci(zc_topo_t *topo, const zc_xml_node_t *pci, int parent);

/* A switch: a bridge node, and a downstream port bridge above each child. */
static zc_status_t zc_nccl_switch(zc_topo_t *topo, const zc_xml_node_t *pci, int parent)
{
    int upstream;

    ZC_CHECK(zc_topo_add_node(topo, ZC_TOPO_NODE_BRIDGE, parent, -1, &upstream));
    for (const zc_xml_node_t *c = pci->first_child; c; c = c->next_sibling) {
        int downstream;
        if (!zc_nccl_is(c, "pci"))
            continue;
        ZC_CHECK(zc_topo_add_node(topo, ZC_TOPO_NODE_BRIDGE, upstream, -1, &downstream));
        ZC_CHECK(zc_nccl_pci(topo, c, downstream));
    }
    return ZC_OK;
}

static zc_status_t zc_nccl_pci(zc_topo_t *topo, const zc_xml_node_t *pci, int parent)
{
    int cls = zc_nccl_class(pci), node;

    if (zc_nccl_child(pci, "pci") || (cls >> 8) == 0x06)
        return zc_nccl_switch(topo, pci, parent);

    int is_gpu = zc_nccl_is_gpu(pci);
    const zc_xml_node_t *nic = zc_nccl_child(pci, "nic");
    if (!is_gpu && !nic && (cls >> 8) != 0x02)
        return ZC_OK; /* storage and the like: not ours */

    ZC_CHECK(zc_topo_add_node(topo, ZC_TOPO_NODE_DEVICE, parent, -1, &node));
    if (is_gpu) {
        zc_topo_gpu_t gpu = {.numa = zc_topo_node_numa(topo, node), .cuda_device = -1};
        ZC_CHECK(zc_nccl_busid(pci, gpu.pci));
        gpu.link_gbs = zc_nccl_link_gbs(pci);
        return zc_topo_add_gpu(topo, &gpu, node);
    }
    return zc_nccl_nics(topo, pci, nic, node);
}

static zc_status_t zc_nccl_cpu(zc_topo_t *topo, const zc_xml_node_t *cpu)
{
    const char *numaid = zc_xml_attr(cpu, "numaid");
    int locality, host;

    ZC_CHECK(zc_topo_add_locality(topo, numaid ? atoi(numaid) : -1, &locality));
    ZC_CHECK(zc_topo_add_node(topo, ZC_TOPO_NODE_HOST_BRIDGE, -1, locality, &host));
    for (const zc_xml_node_t *c = cpu->first_child; c; c = c->next_sibling) {
        if (zc_nccl_is(c, "pci")) {
            ZC_CHECK(zc_nccl_pci(topo, c, host));
        } else if (zc_nccl_is(c, "nic")) {
            int node;
            ZC_CHECK(zc_topo_add_node(topo, ZC_TOPO_NODE_DEVICE, host, -1, &node));
            ZC_CHECK(zc_nccl_nics(topo, NULL, c, node));
        }
    }
    return ZC_OK;
}

zc_status_t zc_topo_from_nccl_xml(zc_topo_t *topo, const zc_xml_node_t *system)
{
    if (!zc_nccl_is(system, "system"))
        return zc_error(ZC_ERR_TOPOLOGY, "NCCL topology: root element is <%s>, not <system>",
                        system->name);
    for (const zc_xml_node_t *c = system->first_child; c; c = c->next_sibling)
        if (zc_nccl_is(c, "cpu"))
            ZC_CHECK(zc_nccl_cpu(topo, c));
    return ZC_OK;
}
