/* Path classes between two PCI devices, by walking the PCI tree ourselves
 * (hwloc_get_common_ancestor_obj does not handle I/O objects).
 *
 * NCCL's classes on the tree the sources build:
 *   PIX   the lowest common ancestor is a PCI-to-PCI bridge (a switch's
 *         upstream port, or a root port) and each side has at most one bridge
 *         below it (its switch downstream port): one PCIe switch;
 *   PXB   the common ancestor is a PCI-to-PCI bridge but more bridges are on
 *         the way: several switches, still without the host bridge;
 *   PHB   the common ancestor is the host bridge;
 *   NODE  different host bridges of one CPU locality (NUMA node);
 *   SYS   different localities, in one socket or across sockets. */
#include "config.h"

#include <stdlib.h>

#include "src/common/status.h"
#include "topology/topo.h"

/* Longest chain of bridges we follow; real trees are under 10 deep, and a
 * loop in a broken model must not hang us. */
#define ZC_TOPO_MAX_DEPTH 64

/* Ancestors of `node` from its parent up to its host bridge; returns the
 * count (0 if the device hangs off no host bridge). */
static int zc_topo_ancestors(const zc_topo_t *topo, int node, int *chain)
{
    int n = 0;

    for (int p = topo->nodes[node].parent; p >= 0 && n < ZC_TOPO_MAX_DEPTH;
         p = topo->nodes[p].parent)
        chain[n++] = p;
    return n;
}

zc_path_t zc_topo_node_path(const zc_topo_t *topo, int a, int b)
{
    int ca[ZC_TOPO_MAX_DEPTH], cb[ZC_TOPO_MAX_DEPTH];
    int na = zc_topo_ancestors(topo, a, ca);
    int nb = zc_topo_ancestors(topo, b, cb);

    if (na == 0 || nb == 0)
        return ZC_PATH_SYS;

    /* Walk both chains from their roots down while they agree; the last
     * agreeing node is the lowest common ancestor. */
    int ia = na - 1, ib = nb - 1;
    if (ca[ia] != cb[ib]) {
        int la = topo->nodes[ca[ia]].locality, lb = topo->nodes[cb[ib]].locality;
        return la == lb ? ZC_PATH_NODE : ZC_PATH_SYS;
    }
    while (ia > 0 && ib > 0 && ca[ia - 1] == cb[ib - 1]) {
        ia--;
        ib--;
    }
    if (topo->nodes[ca[ia]].kind == ZC_TOPO_NODE_HOST_BRIDGE)
        return ZC_PATH_PHB;
    /* ia and ib are the numbers of bridges strictly below the ancestor. */
    return (ia <= 1 && ib <= 1) ? ZC_PATH_PIX : ZC_PATH_PXB;
}

zc_status_t zc_topo_compute_paths(zc_topo_t *topo)
{
    size_t cells = (size_t)topo->num_gpus * (size_t)topo->num_nics;

    free(topo->paths);
    topo->paths = calloc(cells ? cells : 1, sizeof(*topo->paths));
    if (!topo->paths)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the %dx%d path matrix",
                        topo->num_gpus, topo->num_nics);
    for (int g = 0; g < topo->num_gpus; g++)
        for (int n = 0; n < topo->num_nics; n++)
            topo->paths[(size_t)g * topo->num_nics + n] =
                zc_topo_node_path(topo, topo->gpus[g].node, topo->nics[n].node);
    return ZC_OK;
}

const char *zc_path_name(zc_path_t path)
{
    switch (path) {
    case ZC_PATH_PIX:  return "PIX";
    case ZC_PATH_PXB:  return "PXB";
    case ZC_PATH_PHB:  return "PHB";
    case ZC_PATH_NODE: return "NODE";
    case ZC_PATH_SYS:  return "SYS";
    }
    return "?";
}
