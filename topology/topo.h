/* Internal model of a node's topology, shared by the sources (hwloc,
 * NCCL XML), the refinements (verbs, CUDA, filter, netdev) and the answers
 * (path classes, assignment).
 *
 * The sources reduce the machine to a forest of PCI nodes: a host bridge at
 * each root, PCI-to-PCI bridges inside, GPU and NIC functions as leaves.
 * Everything after loading works on that forest only, so hwloc exports and
 * NCCL files give the same answers for the same tree. */
#ifndef ZC_TOPO_H
#define ZC_TOPO_H

#include <stddef.h>

#include "zcomm.h"

typedef enum {
    ZC_TOPO_NODE_HOST_BRIDGE, /* root of a PCI hierarchy, attached to a CPU locality */
    ZC_TOPO_NODE_BRIDGE,      /* PCI-to-PCI bridge: root port or switch port */
    ZC_TOPO_NODE_DEVICE       /* a GPU or NIC function */
} zc_topo_node_kind_t;

typedef struct {
    zc_topo_node_kind_t kind;
    int parent;   /* -1 for a host bridge */
    int locality; /* host bridges: index into zc_topo::locality_numa */
} zc_topo_node_t;

typedef struct {
    zc_topo_gpu_t info;
    int node;     /* its device node */
} zc_topo_gpu_rec_t;

typedef struct {
    zc_topo_nic_t info;
    int node;     /* its device node */
} zc_topo_nic_rec_t;

struct zc_topo {
    const char *source;          /* static string: "live", "hwloc-xml", "nccl-xml" */
    unsigned flags;              /* ZC_TOPO_* load flags */

    zc_topo_node_t *nodes;
    int num_nodes;

    /* Localities are the CPU sides host bridges hang off (a NUMA node, or a
     * set of them): two host bridges of one locality are NODE apart, of two
     * localities SYS apart. */
    int *locality_numa;          /* NUMA OS index of each locality, -1 if several */
    int num_localities;

    zc_topo_gpu_rec_t *gpus;
    int num_gpus;
    zc_topo_nic_rec_t *nics;
    int num_nics;

    /* Answers, computed once the lists are final. */
    zc_path_t *paths;            /* num_gpus x num_nics, row-major */
    int *gpu_nic;                /* assigned NIC of each GPU, -1 if none */
    int *nic_gpus;               /* number of GPUs assigned to each NIC */
};

typedef struct zc_topo zc_topo_t;

/* ---- model (topo_model.c) ---- */
zc_status_t zc_topo_alloc(const char *source, unsigned flags, zc_topo_t **topo);
void zc_topo_free(zc_topo_t *topo);
/* Append a node; *index is its index. */
zc_status_t zc_topo_add_node(zc_topo_t *topo, zc_topo_node_kind_t kind, int parent,
                             int locality, int *index);
zc_status_t zc_topo_add_locality(zc_topo_t *topo, int numa, int *index);
zc_status_t zc_topo_add_gpu(zc_topo_t *topo, const zc_topo_gpu_t *info, int node);
zc_status_t zc_topo_add_nic(zc_topo_t *topo, const zc_topo_nic_t *info, int node);
/* Remove NIC i, keeping the order of the others. */
void zc_topo_remove_nic(zc_topo_t *topo, int i);
/* GPUs by CUDA index then PCI bus id, NICs by name (digits compared as
 * numbers: mlx5_10 after mlx5_9) then port. */
void zc_topo_sort(zc_topo_t *topo);
/* NUMA node of a node's locality, -1 if unknown. */
int zc_topo_node_numa(const zc_topo_t *topo, int node);
/* "dddd:bb:dd.f" in lower case into buf (ZC_TOPO_PCI_LEN bytes). */
void zc_topo_format_pci(char *buf, unsigned domain, unsigned bus, unsigned dev, unsigned func);
/* Copy a string into a fixed field, truncating. */
void zc_topo_copy_name(char *dst, size_t size, const char *src);
/* The port number of "name:port" (the `n` characters after the colon):
 * 1..255, or -1 when it is not one. */
int zc_topo_parse_port(const char *s, size_t n);
/* PCIe bandwidth in GB/s of `lanes` lanes at `gts` GT/s (8b/10b below
 * 8 GT/s, 128b/130b from there, as hwloc computes it). */
double zc_topo_pcie_gbs(double gts, int lanes);

/* ---- sources ---- */
/* hwloc: the live machine (xml_path NULL) or an hwloc XML export.
 * `argname` names the origin of xml_path in error details. */
zc_status_t zc_topo_discover_hwloc(zc_topo_t *topo, const char *xml_path, const char *argname);
/* NCCL topology XML (<system><cpu><pci>...). */
struct zc_xml_node;
zc_status_t zc_topo_from_nccl_xml(zc_topo_t *topo, const struct zc_xml_node *system);

/* ---- refinements of a live topology ---- */
/* Port state, link layer and rate from libibverbs.  ZC_ERR_UNSUPPORTED
 * (nothing changed) when verbs is configured out or lists no device. */
zc_status_t zc_topo_verbs_update(zc_topo_t *topo);
/* Keep only the GPUs CUDA sees, with their CUDA index.  ZC_ERR_UNSUPPORTED
 * (nothing changed) when CUDA is configured out or sees no device. */
zc_status_t zc_topo_cuda_match(zc_topo_t *topo);

/* ---- NIC filter, NCCL_IB_HCA syntax (topo_filter.c) ---- */
#define ZC_TOPO_FILTER_MAX 32
typedef struct {
    int exclude;                 /* leading '^' */
    int exact;                   /* leading '=' (after '^') */
    int count;
    struct {
        char name[ZC_TOPO_NAME_LEN];
        int port;                /* -1: any port */
    } items[ZC_TOPO_FILTER_MAX];
} zc_topo_filter_t;

/* Parse `spec`; an empty or NULL spec is a filter that keeps everything.
 * `argname` names the origin of spec in error details. */
zc_status_t zc_topo_filter_parse(const char *spec, const char *argname, zc_topo_filter_t *filter);
/* 1 if the NIC port passes the filter. */
int zc_topo_filter_match(const zc_topo_filter_t *filter, const char *name, int port);

/* ---- network interface binding (topo_netdev.c) ---- */
/* Apply a "nic[:port]=netdev,..." override to the NICs. */
zc_status_t zc_topo_netdev_override(zc_topo_t *topo, const char *spec, const char *argname);

/* ---- answers ---- */
/* Path class between two device nodes (topo_pci_path.c). */
zc_path_t zc_topo_node_path(const zc_topo_t *topo, int a, int b);
/* Fill topo->paths. */
zc_status_t zc_topo_compute_paths(zc_topo_t *topo);
/* Fill topo->gpu_nic and topo->nic_gpus from topo->paths (topo_assign.c). */
zc_status_t zc_topo_assign(zc_topo_t *topo);

/* ---- minimal XML reader (topo_xml.c) ---- */
typedef struct zc_xml_node {
    const char *name;
    const char **attrs;          /* name, value, name, value, ... */
    int num_attrs;
    struct zc_xml_node *parent;
    struct zc_xml_node *first_child;
    struct zc_xml_node *next_sibling;
    struct zc_xml_node *last_child;
} zc_xml_node_t;

typedef struct zc_xml_doc zc_xml_doc_t;

/* Parse a whole file; ZC_ERR_INVALID_ARG if it cannot be read (detail names
 * `argname`), ZC_ERR_TOPOLOGY if it is not well-formed XML (with the line). */
zc_status_t zc_xml_parse_file(const char *path, const char *argname, zc_xml_doc_t **doc);
const zc_xml_node_t *zc_xml_root(const zc_xml_doc_t *doc);
void zc_xml_free(zc_xml_doc_t *doc);
/* Value of an attribute, NULL if absent. */
const char *zc_xml_attr(const zc_xml_node_t *node, const char *name);

#endif
