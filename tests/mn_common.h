/* Helpers of the multi-node rank programs (tests/mn_*.c): each runs in
 * every rank of an emulated cluster (or of mpirun), checks collectives
 * case by case and prints TAP from rank 0 with the failures of all ranks
 * summed.  Header-only. */
#ifndef ZC_TESTS_MN_COMMON_H
#define ZC_TESTS_MN_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pattern.h"
#include "zcomm.h"

static int mn_rank, mn_size, mn_cases, mn_failed_cases;
static int64_t mn_failures;  /* of the current case, this rank */

#define MN_CHECK(cond, ...)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "# rank %d: check failed at %s:%d: ", mn_rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, " (%s)\n", zc_get_last_error());                 \
            mn_failures++;                                                    \
        }                                                                     \
    } while (0)

/* End a case: rank 0 sums every rank's failures and prints the TAP line. */
static inline void mn_report(zc_comm_h comm, const char *name)
{
    int64_t total = mn_failures;
    zc_request_h req;

    zc_barrier(comm);
    if (mn_rank == 0) {
        for (int r = 1; r < mn_size; r++) {
            int64_t theirs = 1;
            if (zc_recv(&theirs, 1, ZC_INT64, ZC_MEM_HOST, r, comm, &req) != ZC_OK ||
                zc_wait(&req) != ZC_OK)
                theirs = 1;
            total += theirs;
        }
        mn_cases++;
        mn_failed_cases += total != 0;
        printf("%s %d - %s\n", total ? "not ok" : "ok", mn_cases, name);
        fflush(stdout);
    } else if (zc_send(&mn_failures, 1, ZC_INT64, ZC_MEM_HOST, 0, comm, &req) != ZC_OK ||
               zc_wait(&req) != ZC_OK) {
        fprintf(stderr, "# rank %d: cannot report to rank 0\n", mn_rank);
    }
    mn_failures = 0;
}

static inline zc_comm_h mn_init(void)
{
    zc_comm_h comm;
    zc_status_t st = zc_comm_init_env(&comm, NULL);

    if (st != ZC_OK) {
        fprintf(stderr, "# cannot create the communicator: %s: %s\n", zc_strerror(st),
                zc_get_last_error());
        exit(1);
    }
    zc_comm_rank(comm, &mn_rank);
    zc_comm_size(comm, &mn_size);
    return comm;
}

/* The network device of rail `rail` on this rank's node, from
 * ZC_NIC_NETDEV ("nic=dev,..." as tests/cluster/zc_cluster sets it). */
static inline int mn_rail_netdev(int rail, char *out, size_t len)
{
    const char *list = getenv("ZC_NIC_NETDEV");

    for (int k = 0; list && *list; k++) {
        const char *eq = strchr(list, '='), *end = strchr(list, ',');
        if (!eq)
            return 0;
        size_t n = end ? (size_t)(end - eq - 1) : strlen(eq + 1);
        if (k == rail) {
            snprintf(out, len, "%.*s", (int)n, eq + 1);
            return 1;
        }
        list = end ? end + 1 : "";
    }
    return 0;
}

/* Print the plan line last (TAP allows it at the end); exit status. */
static inline int mn_finish(zc_comm_h comm)
{
    zc_comm_destroy(comm);
    if (mn_rank != 0)
        return 0;
    printf("1..%d\n", mn_cases);
    return mn_failed_cases ? 1 : 0;
}

#endif
