/* GPU -> NIC assignment.
 *
 * Each GPU may only use its nearest NICs (the ones at its best path class).
 * Among those the load is balanced: a GPU in index order first takes the
 * least loaded candidate (the lower index on ties), then loads are evened
 * out along alternating paths (GPU g moves from NIC x to its candidate y,
 * another GPU from y to z, ...) until no NIC carries two more GPUs than a
 * NIC some chain could hand one to.  At the end no GPU shares a NIC while
 * one of its equally near NICs has fewer GPUs by two or more, in
 * particular while one is free, and GPUs never collapse onto NIC 0 just
 * because it comes first.  Sizes are tiny (at most a few dozen of each). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/common/status.h"
#include "topology/topo.h"

typedef struct {
    zc_topo_t *topo;
    zc_path_t *best;      /* best class of each GPU */
    int *from_nic;        /* BFS: NIC we reached this NIC from, -1 at the source */
    int *via_gpu;         /* BFS: GPU that moves from from_nic to this NIC */
    int *queue;
} zc_assign_t;

static int zc_assign_candidate(const zc_assign_t *as, int gpu, int nic)
{
    const zc_topo_t *t = as->topo;

    return t->paths[(size_t)gpu * t->num_nics + nic] == as->best[gpu];
}

static void zc_assign_greedy(zc_assign_t *as)
{
    zc_topo_t *t = as->topo;

    for (int g = 0; g < t->num_gpus; g++) {
        zc_path_t best = ZC_PATH_SYS;
        for (int n = 0; n < t->num_nics; n++)
            if (t->paths[(size_t)g * t->num_nics + n] < best)
                best = t->paths[(size_t)g * t->num_nics + n];
        as->best[g] = best;
        int pick = -1;
        for (int n = 0; n < t->num_nics; n++)
            if (zc_assign_candidate(as, g, n) && (pick < 0 || t->nic_gpus[n] < t->nic_gpus[pick]))
                pick = n;
        t->gpu_nic[g] = pick;
        t->nic_gpus[pick]++;
    }
}

/* One balancing step from NIC `src`; 1 if loads moved. */
static int zc_assign_shift_from(zc_assign_t *as, int src)
{
    zc_topo_t *t = as->topo;
    int head = 0, tail = 0;

    for (int n = 0; n < t->num_nics; n++)
        as->from_nic[n] = -2; /* unvisited */
    as->from_nic[src] = -1;
    as->queue[tail++] = src;
    while (head < tail) {
        int x = as->queue[head++];
        for (int g = 0; g < t->num_gpus; g++) {
            if (t->gpu_nic[g] != x)
                continue;
            for (int y = 0; y < t->num_nics; y++) {
                if (as->from_nic[y] != -2 || !zc_assign_candidate(as, g, y))
                    continue;
                as->from_nic[y] = x;
                as->via_gpu[y] = g;
                if (t->nic_gpus[y] <= t->nic_gpus[src] - 2) {
                    /* Move one GPU along each hop back to the source. */
                    t->nic_gpus[y]++;
                    t->nic_gpus[src]--;
                    for (int n = y; as->from_nic[n] >= 0; n = as->from_nic[n])
                        t->gpu_nic[as->via_gpu[n]] = n;
                    return 1;
                }
                as->queue[tail++] = y;
            }
        }
    }
    return 0;
}

static void zc_assign_balance(zc_assign_t *as)
{
    zc_topo_t *t = as->topo;
    int moved;

    /* Every shift lowers the sum of squared loads, so this ends. */
    do {
        moved = 0;
        for (int n = 0; n < t->num_nics && !moved; n++)
            if (t->nic_gpus[n] >= 2)
                moved = zc_assign_shift_from(as, n);
    } while (moved);
}

zc_status_t zc_topo_assign(zc_topo_t *topo)
{
    int gpus = topo->num_gpus, nics = topo->num_nics;
    zc_assign_t as = {topo, NULL, NULL, NULL, NULL};
    zc_status_t status = ZC_OK;

    free(topo->gpu_nic);
    free(topo->nic_gpus);
    topo->gpu_nic = malloc((size_t)(gpus ? gpus : 1) * sizeof(int));
    topo->nic_gpus = calloc((size_t)(nics ? nics : 1), sizeof(int));
    if (!topo->gpu_nic || !topo->nic_gpus)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the GPU-NIC assignment");
    if (nics == 0) {
        for (int g = 0; g < gpus; g++)
            topo->gpu_nic[g] = -1;
        return ZC_OK;
    }
    as.best = malloc((size_t)(gpus ? gpus : 1) * sizeof(*as.best));
    as.from_nic = malloc((size_t)nics * sizeof(int));
    as.via_gpu = malloc((size_t)nics * sizeof(int));
    as.queue = malloc((size_t)nics * sizeof(int));
    if (!as.best || !as.from_nic || !as.via_gpu || !as.queue) {
        status = zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the GPU-NIC assignment");
        goto out;
    }
    zc_assign_greedy(&as);
    zc_assign_balance(&as);
out:
    free(as.best);
    free(as.from_nic);
    free(as.via_gpu);
    free(as.queue);
    return status;
}
