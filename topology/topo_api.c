/* Public topology API: where the topology comes from, the steps that turn
 * a source into the final GPU and NIC lists, and the queries. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/common/abi.h"
#include "src/common/env.h"
#include "src/common/status.h"
#include "topology/topo.h"

/* Live machine: hwloc, then CUDA and verbs where they work. */
static zc_status_t zc_topo_load_live(zc_topo_t *topo)
{
    zc_status_t status;

    ZC_CHECK(zc_topo_discover_hwloc(topo, NULL, "live machine"));
    status = zc_topo_cuda_match(topo);
    if (status == ZC_ERR_UNSUPPORTED)
        zc_log_info("%s; GPUs from PCI alone", zc_get_last_error());
    else if (status < 0)
        return status;
    status = zc_topo_verbs_update(topo);
    if (status == ZC_ERR_UNSUPPORTED) {
        /* Worth a warning only when there are NICs whose rate we now miss. */
        if (topo->num_nics > 0)
            zc_log_warn("%s; using hwloc's OpenFabrics devices (no port rate)",
                        zc_get_last_error());
        else
            zc_log_info("%s; using hwloc's OpenFabrics devices", zc_get_last_error());
    } else if (status < 0) {
        return status;
    }
    zc_error_clear();
    return ZC_OK;
}

/* An XML file: hwloc export (<topology>) or NCCL topology (<system>).
 * Reading it ourselves first gives one clear error for a missing or
 * malformed file whichever format it claims to be. */
static zc_status_t zc_topo_load_file(const char *path, const char *argname, unsigned flags,
                                     zc_topo_t **topo)
{
    zc_xml_doc_t *doc;
    zc_status_t status;
    zc_topo_t *t = NULL;

    ZC_CHECK(zc_xml_parse_file(path, argname, &doc));
    const zc_xml_node_t *root = zc_xml_root(doc);
    if (strcmp(root->name, "topology") == 0) {
        ZC_CHECK_GOTO(zc_topo_alloc("hwloc-xml", flags, &t), status, err);
        /* hwloc parses the file again; ours is not kept for it. */
        zc_xml_free(doc);
        doc = NULL;
        ZC_CHECK_GOTO(zc_topo_discover_hwloc(t, path, argname), status, err);
    } else if (strcmp(root->name, "system") == 0) {
        ZC_CHECK_GOTO(zc_topo_alloc("nccl-xml", flags, &t), status, err);
        ZC_CHECK_GOTO(zc_topo_from_nccl_xml(t, root), status, err);
    } else {
        status = zc_error(ZC_ERR_TOPOLOGY,
                          "%s: %s is neither an hwloc export (<topology>) nor an NCCL "
                          "topology (<system>): its root is <%s>",
                          argname, path, root->name);
        goto err;
    }
    zc_xml_free(doc);
    *topo = t;
    return ZC_OK;

err:
    zc_topo_free(t);
    zc_xml_free(doc);
    return status;
}

/* ZC_IB_HCA and, unless ZC_TOPO_ALL_PORTS, port state decide which NICs
 * stay; the ones left are what the assignment may use. */
static zc_status_t zc_topo_select_nics(zc_topo_t *topo)
{
    zc_topo_filter_t filter;

    ZC_CHECK(zc_topo_filter_parse(zc_env_get("ZC_IB_HCA"), "ZC_IB_HCA", &filter));
    for (int i = 0; i < topo->num_nics;) {
        const zc_topo_nic_t *nic = &topo->nics[i].info;
        int usable = nic->state == ZC_PORT_ACTIVE || nic->state == ZC_PORT_UNKNOWN ||
                     (topo->flags & ZC_TOPO_ALL_PORTS);
        if (!zc_topo_filter_match(&filter, nic->name, nic->port)) {
            zc_log_debug("NIC %s:%d left out by ZC_IB_HCA", nic->name, nic->port);
            zc_topo_remove_nic(topo, i);
        } else if (!usable) {
            zc_log_info("NIC %s:%d left out: port is %s", nic->name, nic->port,
                        zc_port_state_name(nic->state));
            zc_topo_remove_nic(topo, i);
        } else {
            i++;
        }
    }
    return ZC_OK;
}

static zc_status_t zc_topo_finish(zc_topo_t *topo)
{
    zc_topo_sort(topo);
    ZC_CHECK(zc_topo_select_nics(topo));
    ZC_CHECK(zc_topo_netdev_override(topo, zc_env_get("ZC_NIC_NETDEV"), "ZC_NIC_NETDEV"));
    ZC_CHECK(zc_topo_compute_paths(topo));
    return zc_topo_assign(topo);
}

zc_status_t zc_topo_load(const char *xml_path, unsigned flags, zc_topo_h *topo)
{
    const char *argname = "xml_path";
    zc_topo_t *t = NULL;
    zc_status_t status;

    zc_error_clear();
    ZC_ARG_CHECK(topo != NULL, "topo: NULL output pointer");
    ZC_ARG_CHECK((flags & ~ZC_TOPO_ALL_PORTS) == 0, "flags: unknown bits 0x%x",
                 flags & ~ZC_TOPO_ALL_PORTS);
    ZC_ARG_CHECK(xml_path == NULL || *xml_path != '\0', "xml_path: empty path");
    if (!xml_path && (xml_path = zc_env_get("ZC_TOPO_FILE")) != NULL) {
        argname = "ZC_TOPO_FILE";
    } else if (!xml_path) {
        /* HWLOC_XMLFILE is hwloc's variable, not in our table; reading it
         * here lets it name an NCCL file too, and errors name it. */
        const char *hwloc_file = getenv("HWLOC_XMLFILE");
        if (hwloc_file && *hwloc_file) {
            xml_path = hwloc_file;
            argname = "HWLOC_XMLFILE";
        }
    }

    if (xml_path) {
        ZC_CHECK(zc_topo_load_file(xml_path, argname, flags, &t));
    } else {
        ZC_CHECK(zc_topo_alloc("live", flags, &t));
        ZC_CHECK_GOTO(zc_topo_load_live(t), status, err);
    }
    ZC_CHECK_GOTO(zc_topo_finish(t), status, err);
    *topo = t;
    return ZC_OK;

err:
    zc_topo_free(t);
    return status;
}

void zc_topo_destroy(zc_topo_h topo)
{
    zc_topo_free(topo);
}

zc_status_t zc_topo_source(zc_topo_h topo, const char **source)
{
    zc_error_clear();
    ZC_ARG_CHECK(topo != NULL, "topo: NULL handle");
    ZC_ARG_CHECK(source != NULL, "source: NULL output pointer");
    *source = topo->source;
    return ZC_OK;
}

zc_status_t zc_topo_gpu_count(zc_topo_h topo, int *count)
{
    zc_error_clear();
    ZC_ARG_CHECK(topo != NULL, "topo: NULL handle");
    ZC_ARG_CHECK(count != NULL, "count: NULL output pointer");
    *count = topo->num_gpus;
    return ZC_OK;
}

zc_status_t zc_topo_nic_count(zc_topo_h topo, int *count)
{
    zc_error_clear();
    ZC_ARG_CHECK(topo != NULL, "topo: NULL handle");
    ZC_ARG_CHECK(count != NULL, "count: NULL output pointer");
    *count = topo->num_nics;
    return ZC_OK;
}

#define ZC_TOPO_CHECK_GPU(topo, gpu)                                                    \
    ZC_ARG_CHECK((topo) != NULL, "topo: NULL handle");                                  \
    ZC_ARG_CHECK((gpu) >= 0 && (gpu) < (topo)->num_gpus,                                \
                 "gpu: %d is not in [0, %d)", (gpu), (topo)->num_gpus)

#define ZC_TOPO_CHECK_NIC(topo, nic)                                                    \
    ZC_ARG_CHECK((topo) != NULL, "topo: NULL handle");                                  \
    ZC_ARG_CHECK((nic) >= 0 && (nic) < (topo)->num_nics,                                \
                 "nic: %d is not in [0, %d)", (nic), (topo)->num_nics)

zc_status_t zc_topo_gpu_info(zc_topo_h topo, int gpu, zc_topo_gpu_t *info)
{
    zc_error_clear();
    ZC_TOPO_CHECK_GPU(topo, gpu);
    ZC_ARG_CHECK(info != NULL, "info: NULL output pointer");
    ZC_CHECK(zc_abi_out_check(info->size, ZC_TOPO_GPU_SIZE_V1, "info",
                              "ZC_TOPO_GPU_INITIALIZER"));
    zc_abi_write(info, &topo->gpus[gpu].info, sizeof(*info));
    return ZC_OK;
}

zc_status_t zc_topo_nic_info(zc_topo_h topo, int nic, zc_topo_nic_t *info)
{
    zc_error_clear();
    ZC_TOPO_CHECK_NIC(topo, nic);
    ZC_ARG_CHECK(info != NULL, "info: NULL output pointer");
    ZC_CHECK(zc_abi_out_check(info->size, ZC_TOPO_NIC_SIZE_V1, "info",
                              "ZC_TOPO_NIC_INITIALIZER"));
    zc_abi_write(info, &topo->nics[nic].info, sizeof(*info));
    return ZC_OK;
}

zc_status_t zc_topo_path(zc_topo_h topo, int gpu, int nic, zc_path_t *path)
{
    zc_error_clear();
    ZC_TOPO_CHECK_GPU(topo, gpu);
    ZC_TOPO_CHECK_NIC(topo, nic);
    ZC_ARG_CHECK(path != NULL, "path: NULL output pointer");
    *path = topo->paths[(size_t)gpu * topo->num_nics + nic];
    return ZC_OK;
}

zc_status_t zc_topo_assignment(zc_topo_h topo, int gpu, zc_topo_assignment_t *assignment)
{
    zc_error_clear();
    ZC_TOPO_CHECK_GPU(topo, gpu);
    ZC_ARG_CHECK(assignment != NULL, "assignment: NULL output pointer");
    int nic = topo->gpu_nic[gpu];
    zc_topo_assignment_t a = {nic, nic, ZC_PATH_SYS, 0};
    if (nic >= 0) {
        a.path = topo->paths[(size_t)gpu * topo->num_nics + nic];
        a.nic_gpus = topo->nic_gpus[nic];
    }
    *assignment = a;
    return ZC_OK;
}

const char *zc_port_state_name(zc_port_state_t state)
{
    switch (state) {
    case ZC_PORT_DOWN:    return "DOWN";
    case ZC_PORT_INIT:    return "INIT";
    case ZC_PORT_ARMED:   return "ARMED";
    case ZC_PORT_ACTIVE:  return "ACTIVE";
    case ZC_PORT_UNKNOWN: break;
    }
    return "UNKNOWN";
}
