/* Faults during a routed transfer on the emulated cluster:
 *   mn_faults kill     rank 1 (a proxy of rail 1) dies mid-transfer
 *   mn_faults nicdown  rail 2 of node 1 goes down mid-transfer
 * Every surviving rank must return from zc_wait within the timeout
 * (ZC_TIMEOUT), and the destination must report an error, never success
 * with missing data.  Each rank exits 0 when it behaved; the script checks
 * the exit of every rank. */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mn_common.h"

static const char *mode;
static char netdev[64];

static void *saboteur(void *arg)
{
    usleep(150000);
    if (strcmp(mode, "kill") == 0) {
        raise(SIGKILL);
    } else {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "ip link set dev %s down", netdev);
        if (system(cmd) != 0)
            fprintf(stderr, "# %s failed\n", cmd);
    }
    return NULL;
}

/* The network device of rail `rail` from ZC_NIC_NETDEV (nic=dev,...). */
static int rail_netdev(int rail, char *out, size_t len)
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

int main(int argc, char **argv)
{
    zc_comm_h comm = mn_init();
    int nrails, local, node, victim = 1, saboteur_rank;
    const int64_t count = 32 << 20;
    zc_request_h req;
    pthread_t thread;

    mode = argc > 1 ? argv[1] : "kill";
    zc_comm_rail_count(comm, &nrails);
    zc_comm_local_rank(comm, &local);
    zc_comm_node(comm, &node);
    saboteur_rank = strcmp(mode, "kill") == 0 ? victim : mn_size / 2;
    if (nrails < 3 || mn_size < 4) {
        fprintf(stderr, "# needs 3 rails and 4 ranks\n");
        return 1;
    }
    if (mn_rank == saboteur_rank && strcmp(mode, "nicdown") == 0 &&
        !rail_netdev(2, netdev, sizeof(netdev))) {
        fprintf(stderr, "# no netdev for rail 2 in ZC_NIC_NETDEV\n");
        return 1;
    }
    char *send = malloc((size_t)count), *recv = malloc((size_t)count);
    zc_transfer_t t = {0, mn_size - 1, count};
    pattern_fill(send, (size_t)count, mn_rank, 7);
    zc_barrier(comm);
    if (zc_routed_sendrecv(&t, 1, send, recv, ZC_BYTE, ZC_MEM_HOST, comm, &req) != ZC_OK) {
        fprintf(stderr, "# rank %d: post failed: %s\n", mn_rank, zc_get_last_error());
        return 1;
    }
    if (mn_rank == saboteur_rank)
        pthread_create(&thread, NULL, saboteur, NULL);
    zc_status_t st = zc_wait(&req);
    fprintf(stderr, "# rank %d (%s): zc_wait: %s (%s)\n", mn_rank, mode, zc_strerror(st),
            zc_get_last_error());
    int status;
    if (mn_rank == t.dst && st == ZC_OK)
        status = pattern_first_wrong(recv, (size_t)count, 0, 7) == (size_t)count ? 0 : 1;
    else if (mn_rank == t.dst)
        status = st == ZC_ERR_PEER_FAILED || st == ZC_ERR_TIMEOUT ? 0 : 1;
    else  /* survivors: their finished part, or a clean error; returning is the point */
        status = st == ZC_OK || st == ZC_ERR_PEER_FAILED || st == ZC_ERR_TIMEOUT ||
                         st == ZC_ERR_TRANSPORT
                     ? 0
                     : 1;
    if (mn_rank == saboteur_rank)
        pthread_join(thread, NULL);
    zc_comm_destroy(comm);
    free(send);
    free(recv);
    return status;
}
