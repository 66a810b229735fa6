/* Launcher environment parsing: each launcher's names, ZC_* precedence,
 * rendezvous port and secret, malformed values. */
#include "config.h"

#include <string.h>

#include "src/core/launch_env.h"
#include "tap.h"

static const char *const all_vars[] = {
    "ZC_RANK", "ZC_SIZE", "ZC_LOCAL_RANK", "ZC_MASTER_ADDR", "ZC_MASTER_PORT", "ZC_SECRET",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_JOB_ID", "SLURM_STEP_ID", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_KVSNAME",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof(all_vars) / sizeof(all_vars[0]); i++)
        unsetenv(all_vars[i]);
}

/* Set "NAME=VALUE" pairs, NULL-terminated. */
static void set_env(const char *const *pairs)
{
    for (; *pairs; pairs += 2)
        setenv(pairs[0], pairs[1], 1);
}

static int parsed(const char *const *pairs, zc_launch_info_t *info)
{
    clear_env();
    set_env(pairs);
    memset(info, 0xee, sizeof(*info));
    return zc_launch_info_read(info);
}

int main(void)
{
    zc_launch_info_t a, b;

    const char *const ompi[] = {"OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "8",
                                "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_MCA_ess_base_jobid",
                                "12345", NULL};
    ok(parsed(ompi, &a) == ZC_OK && a.rank == 3 && a.size == 8 && a.local_rank == 1 &&
       strcmp(a.launcher, "mpirun") == 0, "mpirun: rank, size, local rank");
    ok(strcmp(a.master_addr, "127.0.0.1") == 0, "mpirun without MASTER_ADDR: 127.0.0.1");
    ok(a.master_port >= 20000 && a.master_port < 50000, "mpirun: port %d from the job id",
       a.master_port);
    const char *const ompi_other_rank[] = {"OMPI_COMM_WORLD_RANK", "5", "OMPI_COMM_WORLD_SIZE",
                                           "8", "OMPI_MCA_ess_base_jobid", "12345", NULL};
    ok(parsed(ompi_other_rank, &b) == ZC_OK && b.master_port == a.master_port &&
       memcmp(a.secret, b.secret, sizeof(a.secret)) == 0,
       "every rank of a job derives the same port and secret");
    const char *const ompi_other_job[] = {"OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE",
                                          "8", "OMPI_MCA_ess_base_jobid", "54321", NULL};
    ok(parsed(ompi_other_job, &b) == ZC_OK &&
       memcmp(a.secret, b.secret, sizeof(a.secret)) != 0, "another job derives another secret");

    const char *const slurm[] = {"SLURM_PROCID", "2", "SLURM_NTASKS", "4", "SLURM_LOCALID", "0",
                                 "SLURM_JOB_ID", "77", "SLURM_STEP_ID", "0", NULL};
    ok(parsed(slurm, &a) == ZC_OK && a.rank == 2 && a.size == 4 && a.local_rank == 0 &&
       strcmp(a.launcher, "srun") == 0, "srun: rank, size, local rank");

    const char *const pmi[] = {"PMI_RANK", "1", "PMI_SIZE", "2", "MASTER_PORT", "4242", NULL};
    ok(parsed(pmi, &a) == ZC_OK && a.rank == 1 && a.size == 2 && a.local_rank == -1 &&
       a.master_port == 4243 && strcmp(a.launcher, "PMI") == 0,
       "PMI: rank, size, no local rank, MASTER_PORT + 1");

    const char *const torchrun[] = {"RANK", "0", "WORLD_SIZE", "16", "LOCAL_RANK", "0",
                                    "MASTER_ADDR", "node17", "MASTER_PORT", "29500", NULL};
    ok(parsed(torchrun, &a) == ZC_OK && a.rank == 0 && a.size == 16 &&
       strcmp(a.master_addr, "node17") == 0 && a.master_port == 29501 &&
       strcmp(a.launcher, "torchrun") == 0,
       "torchrun: rank, size, MASTER_ADDR, MASTER_PORT + 1 (its store owns MASTER_PORT)");

    const char *const zc_over[] = {"ZC_RANK", "1", "ZC_SIZE", "2", "ZC_MASTER_ADDR", "10.0.0.1",
                                   "ZC_MASTER_PORT", "5000", "RANK", "7", "WORLD_SIZE", "9",
                                   "MASTER_ADDR", "elsewhere", "MASTER_PORT", "6000",
                                   "OMPI_COMM_WORLD_RANK", "4", "OMPI_COMM_WORLD_SIZE", "9", NULL};
    ok(parsed(zc_over, &a) == ZC_OK && a.rank == 1 && a.size == 2 &&
       strcmp(a.master_addr, "10.0.0.1") == 0 && a.master_port == 5000 &&
       strcmp(a.launcher, "ZC") == 0, "ZC_* variables take precedence over every launcher's");
    const char *const ompi_over_torch[] = {"OMPI_COMM_WORLD_RANK", "4", "OMPI_COMM_WORLD_SIZE",
                                           "9", "RANK", "7", "WORLD_SIZE", "9", "MASTER_PORT",
                                           "6000", NULL};
    ok(parsed(ompi_over_torch, &a) == ZC_OK && a.rank == 7 && strcmp(a.launcher, "torchrun") == 0,
       "torchrun (the inner launcher) before mpirun");
    const char *const torch_in_srun[] = {"SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_LOCALID",
                                         "0", "RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1",
                                         "MASTER_PORT", "6000", NULL};
    ok(parsed(torch_in_srun, &a) == ZC_OK && a.rank == 5 && a.size == 8 && a.local_rank == 1,
       "srun + torchrun: rank, size and local rank all from torchrun");
    const char *const zc_rank_only[] = {"ZC_RANK", "3", "RANK", "5", "WORLD_SIZE", "8",
                                        "MASTER_PORT", "6000", NULL};
    ok(parsed(zc_rank_only, &a) == ZC_OK && a.rank == 3 && a.size == 8,
       "ZC_RANK overrides the rank alone, the size stays the launcher's");

    const char *const secret[] = {"ZC_RANK", "0", "ZC_SIZE", "1", "ZC_MASTER_PORT", "5000",
                                  "ZC_SECRET", "000102030405060708090a0b0c0d0e0f", NULL};
    ok(parsed(secret, &a) == ZC_OK && a.secret[0] == 0 && a.secret[15] == 15, "ZC_SECRET parsed");

    static const struct {
        const char *const pairs[9];
        const char *word;
        const char *what;
    } bad[] = {
        {{"ZC_SIZE", "2", "ZC_MASTER_PORT", "1", NULL}, "ZC_RANK", "no rank"},
        {{"ZC_RANK", "0", "ZC_MASTER_PORT", "1", NULL}, "ZC_SIZE", "no size"},
        {{"ZC_RANK", "x", "ZC_SIZE", "2", "ZC_MASTER_PORT", "1", NULL}, "ZC_RANK", "rank not a number"},
        {{"RANK", "-1", "WORLD_SIZE", "2", "MASTER_PORT", "1", NULL}, "RANK", "negative rank"},
        {{"ZC_RANK", "2", "ZC_SIZE", "2", "ZC_MASTER_PORT", "1", NULL}, "rank 2", "rank == size"},
        {{"ZC_RANK", "0", "ZC_SIZE", "0", "ZC_MASTER_PORT", "1", NULL}, "ZC_SIZE", "size 0"},
        {{"ZC_RANK", "0", "ZC_SIZE", "2", NULL}, "ZC_MASTER_PORT", "no port and no job id"},
        {{"ZC_RANK", "0", "ZC_SIZE", "2", "ZC_MASTER_PORT", "70000", NULL}, "ZC_MASTER_PORT",
         "port out of range"},
        {{"ZC_RANK", "0", "ZC_SIZE", "2", "ZC_MASTER_PORT", "1", "ZC_SECRET", "abc", NULL},
         "ZC_SECRET", "short secret"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        zc_status_t st = parsed(bad[i].pairs, &a);
        ok(st == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), bad[i].word) != NULL,
           "%s: refused, naming %s (%s)", bad[i].what, bad[i].word, zc_get_last_error());
    }
    ok(a.rank == (int)0xeeeeeeee, "nothing written on failure");
    clear_env();
    return tap_done();
}
