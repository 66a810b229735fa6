/* Rank, size and rendezvous point from the launcher's environment. */
#ifndef ZC_LAUNCH_ENV_H
#define ZC_LAUNCH_ENV_H

#include <stdint.h>

#include "src/core/bootstrap.h"
#include "zcomm.h"

typedef struct {
    int rank;
    int size;
    int local_rank;            /* -1 when no launcher says */
    const char *launcher;      /* "ZC", "mpirun", "srun", "PMI" or "torchrun" */
    char master_addr[256];
    int master_port;
    uint8_t secret[ZC_BOOTSTRAP_SECRET_BYTES];
} zc_launch_info_t;

/* ZC_* variables first, then Open MPI, Slurm, PMI, torchrun.  Missing or
 * malformed values are ZC_ERR_INVALID_ARG naming the variable. */
zc_status_t zc_launch_info_read(zc_launch_info_t *info);

#endif
