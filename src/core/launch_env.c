/* Rank, size and rendezvous point from the launcher's environment.
 *
 * Every launcher names the same facts differently; this file is the only
 * place that knows the names.  The rank, size and local rank come from one
 * launcher, the innermost that set a rank and a size; ZC_* variables
 * override each of them.  The rendezvous port is ZC_MASTER_PORT, else
 * MASTER_PORT + 1 (torchrun's store owns MASTER_PORT itself), else one
 * derived from the job id. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/env.h"
#include "src/common/hash.h"
#include "src/core/launch_env.h"
#include "src/common/status.h"

typedef struct {
    const char *launcher;
    const char *rank;
    const char *size;
    const char *local_rank;
} zc_launcher_vars_t;

/* Launchers, inner first: torchrun started by srun, or mpirun inside an
 * allocation, leaves the outer launcher's variables behind too. */
static const zc_launcher_vars_t zc_launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

/* Variables that name the job identically on every rank of it. */
static const char *const zc_job_vars[] = {
    "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "SLURM_JOB_ID", "SLURM_STEP_ID",
    "PMI_KVSNAME", "TORCHELASTIC_RUN_ID",
};

static const char *zc_getenv(const char *name)
{
    const char *value = getenv(name);
    return (value && *value) ? value : NULL;
}

static zc_status_t zc_parse_int(const char *name, const char *str, int min, int *out)
{
    int64_t v;

    if (zc_parse_int64(str, &v) != 0 || v < min || v > INT32_MAX)
        return zc_error(ZC_ERR_INVALID_ARG, "%s=%s is not an integer >= %d", name, str, min);
    *out = (int)v;
    return ZC_OK;
}

/* The launcher that set both a rank and a size, inner first; NULL if none. */
static const zc_launcher_vars_t *zc_find_launcher(void)
{
    for (size_t i = 0; i < sizeof(zc_launchers) / sizeof(zc_launchers[0]); i++)
        if (zc_getenv(zc_launchers[i].rank) && zc_getenv(zc_launchers[i].size))
            return &zc_launchers[i];
    return NULL;
}

/* ZC_<name> if set, else the launcher's variable; *name says which. */
static const char *zc_launch_var(const char *zc_name, const char *launcher_name,
                                 const char **name)
{
    *name = zc_name;
    if (zc_getenv(zc_name))
        return zc_getenv(zc_name);
    *name = launcher_name;
    return launcher_name ? zc_getenv(launcher_name) : NULL;
}

static zc_status_t zc_parse_secret(const char *hex, uint8_t *secret)
{
    if (strlen(hex) != 2 * ZC_BOOTSTRAP_SECRET_BYTES)
        return zc_error(ZC_ERR_INVALID_ARG, "ZC_SECRET must be %d hex digits",
                        2 * ZC_BOOTSTRAP_SECRET_BYTES);
    for (int i = 0; i < ZC_BOOTSTRAP_SECRET_BYTES; i++) {
        unsigned byte;
        if (sscanf(hex + 2 * i, "%2x", &byte) != 1)
            return zc_error(ZC_ERR_INVALID_ARG, "ZC_SECRET has a non-hex digit");
        secret[i] = (uint8_t)byte;
    }
    return ZC_OK;
}

zc_status_t zc_launch_info_read(zc_launch_info_t *out)
{
    zc_launch_info_t info = {.local_rank = -1};
    const char *name = NULL, *value;
    uint64_t job = ZC_FNV1A_INIT;
    int have_job = 0;

    const zc_launcher_vars_t *launcher = zc_find_launcher();

    value = zc_launch_var("ZC_RANK", launcher ? launcher->rank : NULL, &name);
    if (!value)
        return zc_error(ZC_ERR_INVALID_ARG,
                        "no rank in the environment: set ZC_RANK or launch with mpirun, srun or "
                        "torchrun");
    ZC_CHECK(zc_parse_int(name, value, 0, &info.rank));
    info.launcher = zc_getenv("ZC_RANK") || !launcher ? "ZC" : launcher->launcher;

    value = zc_launch_var("ZC_SIZE", launcher ? launcher->size : NULL, &name);
    if (!value)
        return zc_error(ZC_ERR_INVALID_ARG, "no size in the environment: set ZC_SIZE");
    ZC_CHECK(zc_parse_int(name, value, 1, &info.size));
    if (info.rank >= info.size)
        return zc_error(ZC_ERR_INVALID_ARG, "rank %d is not below size %d", info.rank,
                        info.size);

    value = zc_launch_var("ZC_LOCAL_RANK", launcher ? launcher->local_rank : NULL, &name);
    if (value)
        ZC_CHECK(zc_parse_int(name, value, 0, &info.local_rank));

    value = zc_env_get("ZC_MASTER_ADDR");
    if (!value)
        value = zc_getenv("MASTER_ADDR");
    snprintf(info.master_addr, sizeof(info.master_addr), "%s", value ? value : "127.0.0.1");

    for (size_t i = 0; i < sizeof(zc_job_vars) / sizeof(zc_job_vars[0]); i++) {
        if (zc_getenv(zc_job_vars[i])) {
            job = zc_fnv1a_str(zc_fnv1a_str(job, zc_job_vars[i]), zc_getenv(zc_job_vars[i]));
            have_job = 1;
        }
    }

    value = zc_env_get("ZC_MASTER_PORT");
    name = "ZC_MASTER_PORT";
    if (!value) {
        value = zc_getenv("MASTER_PORT");
        name = "MASTER_PORT";
    }
    if (value) {
        ZC_CHECK(zc_parse_int(name, value, 1, &info.master_port));
        /* torchrun's own rendezvous store listens on MASTER_PORT. */
        if (strcmp(name, "MASTER_PORT") == 0)
            info.master_port++;
        if (info.master_port > 65535)
            return zc_error(ZC_ERR_INVALID_ARG, "%s=%s is not a port", name, value);
    } else if (have_job) {
        /* Same on every rank of the job, different across jobs. */
        info.master_port = 20000 + (int)(job % 30000);
    } else {
        return zc_error(ZC_ERR_INVALID_ARG,
                        "no rendezvous port: set ZC_MASTER_PORT (or MASTER_PORT)");
    }

    value = zc_env_get("ZC_SECRET");
    if (value) {
        ZC_CHECK(zc_parse_secret(value, info.secret));
    } else {
        /* Not secret, only distinct per job: keeps other jobs out by mistake. */
        char text[320];
        snprintf(text, sizeof(text), "%s:%d:%d", info.master_addr, info.master_port, info.size);
        uint64_t h1 = zc_fnv1a_str(job, text), h2 = zc_fnv1a_str(h1 ^ 0x9e3779b97f4a7c15ULL, text);
        memcpy(info.secret, &h1, 8);
        memcpy(info.secret + 8, &h2, 8);
    }
    *out = info;
    return ZC_OK;
}
