/* The topology model: growable arrays of PCI nodes, GPUs and NICs. */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/status.h"
#include "topology/topo.h"

zc_status_t zc_topo_alloc(const char *source, unsigned flags, zc_topo_t **topo)
{
    zc_topo_t *t = calloc(1, sizeof(*t));

    if (!t)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate a topology");
    t->source = source;
    t->flags = flags;
    *topo = t;
    return ZC_OK;
}

void zc_topo_free(zc_topo_t *topo)
{
    if (!topo)
        return;
    free(topo->nodes);
    free(topo->locality_numa);
    free(topo->gpus);
    free(topo->nics);
    free(topo->paths);
    free(topo->gpu_nic);
    free(topo->nic_gpus);
    free(topo);
}

/* Grow an array of `size`-byte elements to hold one more; the arrays are
 * small (a node has tens of PCI objects), so growing one by one is fine. */
static zc_status_t zc_topo_grow(void **array, int count, size_t size)
{
    void *grown = realloc(*array, (size_t)(count + 1) * size);

    if (!grown)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot grow the topology model");
    *array = grown;
    return ZC_OK;
}

zc_status_t zc_topo_add_node(zc_topo_t *topo, zc_topo_node_kind_t kind, int parent,
                             int locality, int *index)
{
    ZC_CHECK(zc_topo_grow((void **)&topo->nodes, topo->num_nodes, sizeof(*topo->nodes)));
    topo->nodes[topo->num_nodes] = (zc_topo_node_t){kind, parent, locality};
    *index = topo->num_nodes++;
    return ZC_OK;
}

zc_status_t zc_topo_add_locality(zc_topo_t *topo, int numa, int *index)
{
    ZC_CHECK(zc_topo_grow((void **)&topo->locality_numa, topo->num_localities,
                          sizeof(*topo->locality_numa)));
    topo->locality_numa[topo->num_localities] = numa;
    *index = topo->num_localities++;
    return ZC_OK;
}

zc_status_t zc_topo_add_gpu(zc_topo_t *topo, const zc_topo_gpu_t *info, int node)
{
    ZC_CHECK(zc_topo_grow((void **)&topo->gpus, topo->num_gpus, sizeof(*topo->gpus)));
    topo->gpus[topo->num_gpus++] = (zc_topo_gpu_rec_t){*info, node};
    return ZC_OK;
}

zc_status_t zc_topo_add_nic(zc_topo_t *topo, const zc_topo_nic_t *info, int node)
{
    ZC_CHECK(zc_topo_grow((void **)&topo->nics, topo->num_nics, sizeof(*topo->nics)));
    topo->nics[topo->num_nics++] = (zc_topo_nic_rec_t){*info, node};
    return ZC_OK;
}

void zc_topo_remove_nic(zc_topo_t *topo, int i)
{
    memmove(&topo->nics[i], &topo->nics[i + 1],
            (size_t)(topo->num_nics - i - 1) * sizeof(*topo->nics));
    topo->num_nics--;
}

/* Names compared with digit runs as numbers, so mlx5_10 sorts after mlx5_9. */
static int zc_topo_natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            unsigned long x = strtoul(a, (char **)&a, 10);
            unsigned long y = strtoul(b, (char **)&b, 10);
            if (x != y)
                return x < y ? -1 : 1;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return (unsigned char)*a - (unsigned char)*b;
}

static int zc_topo_gpu_cmp(const void *pa, const void *pb)
{
    const zc_topo_gpu_rec_t *a = pa, *b = pb;

    if (a->info.cuda_device != b->info.cuda_device)
        return a->info.cuda_device < b->info.cuda_device ? -1 : 1;
    return strcmp(a->info.pci, b->info.pci);
}

static int zc_topo_nic_cmp(const void *pa, const void *pb)
{
    const zc_topo_nic_rec_t *a = pa, *b = pb;
    int c = zc_topo_natural_cmp(a->info.name, b->info.name);

    return c ? c : a->info.port - b->info.port;
}

void zc_topo_sort(zc_topo_t *topo)
{
    if (topo->num_gpus > 1)
        qsort(topo->gpus, (size_t)topo->num_gpus, sizeof(*topo->gpus), zc_topo_gpu_cmp);
    if (topo->num_nics > 1)
        qsort(topo->nics, (size_t)topo->num_nics, sizeof(*topo->nics), zc_topo_nic_cmp);
}

int zc_topo_node_numa(const zc_topo_t *topo, int node)
{
    while (node >= 0 && topo->nodes[node].kind != ZC_TOPO_NODE_HOST_BRIDGE)
        node = topo->nodes[node].parent;
    if (node < 0)
        return -1;
    return topo->locality_numa[topo->nodes[node].locality];
}

void zc_topo_format_pci(char *buf, unsigned domain, unsigned bus, unsigned dev, unsigned func)
{
    snprintf(buf, ZC_TOPO_PCI_LEN, "%04x:%02x:%02x.%x", domain & 0xffffu, bus & 0xffu,
             dev & 0x1fu, func & 0x7u);
}

void zc_topo_copy_name(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

double zc_topo_pcie_gbs(double gts, int lanes)
{
    double encoding = gts < 8.0 ? 8.0 / 10.0 : 128.0 / 130.0;

    return gts * encoding * lanes / 8.0;
}

int zc_topo_parse_port(const char *s, size_t n)
{
    char digits[16], *end;
    long v;

    if (n == 0 || n >= sizeof(digits))
        return -1;
    memcpy(digits, s, n);
    digits[n] = '\0';
    v = strtol(digits, &end, 10);
    return *end != '\0' || v < 1 || v > 255 ? -1 : (int)v;
}
