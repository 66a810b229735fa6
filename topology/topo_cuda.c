/* CUDA devices matched to hwloc's PCI GPUs by PCI bus id (Debian's hwloc
 * has no CUDA or NVML plugin).  Without CUDA, or when the runtime finds no
 * device (no driver), the GPU list stays the PCI one. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "src/common/status.h"
#include "topology/topo.h"

#ifdef HAVE_CUDA

static int zc_cuda_find(const zc_topo_t *topo, const char *busid)
{
    for (int i = 0; i < topo->num_gpus; i++)
        if (strcmp(topo->gpus[i].info.pci, busid) == 0)
            return i;
    return -1;
}

zc_status_t zc_topo_cuda_match(zc_topo_t *topo)
{
    int count = 0, matched = 0;
    cudaError_t err = cudaGetDeviceCount(&count);

    if (err != cudaSuccess || count <= 0)
        return zc_error(ZC_ERR_UNSUPPORTED, "CUDA sees no device (%s)",
                        err != cudaSuccess ? cudaGetErrorString(err) : "count is 0");
    for (int d = 0; d < count; d++) {
        char raw[32], busid[ZC_TOPO_PCI_LEN];
        unsigned domain, bus, dev, func;
        if (cudaDeviceGetPCIBusId(raw, (int)sizeof(raw), d) != cudaSuccess ||
            sscanf(raw, "%x:%x:%x.%x", &domain, &bus, &dev, &func) != 4)
            continue;
        /* CUDA may print an 8-digit domain in upper case; hwloc's form is ours. */
        zc_topo_format_pci(busid, domain, bus, dev, func);
        int g = zc_cuda_find(topo, busid);
        if (g < 0) {
            zc_log_warn("CUDA device %d (%s) is not a PCI GPU hwloc knows; left out", d, busid);
            continue;
        }
        topo->gpus[g].info.cuda_device = d;
        matched++;
    }
    /* GPUs CUDA does not see (CUDA_VISIBLE_DEVICES) are not ours to use. */
    int kept = 0;
    for (int i = 0; i < topo->num_gpus; i++)
        if (topo->gpus[i].info.cuda_device >= 0)
            topo->gpus[kept++] = topo->gpus[i];
    topo->num_gpus = kept;
    zc_log_debug("CUDA: %d devices, %d matched to PCI GPUs", count, matched);
    return ZC_OK;
}

#else /* !HAVE_CUDA */

zc_status_t zc_topo_cuda_match(zc_topo_t *topo)
{
    (void)topo;
    return zc_error(ZC_ERR_UNSUPPORTED, "libzcomm was built without CUDA");
}

#endif
