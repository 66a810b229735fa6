/* Communicator creation by unique id, out-of-band allgather and launcher
 * environment; node grouping; the bootstrap's refusals and timeouts; bad
 * arguments. */
#include "config.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

#include "mp.h"
#include "tap.h"
#include "zcomm.h"

#define CASE_TIMEOUT_S 60

static zc_unique_id_t the_id;

/* This case's id, made by its rank 0 (see mp_case_id). */
#define CASE_ID(rank) MP_CHECK(mp_case_id((rank), &the_id, sizeof(the_id), mp_make_id) == 0, "case id")

/* Every rank checks what the communicator says about it. */
static int check_comm(zc_comm_h comm, int rank, int nranks, int ranks_per_node)
{
    int v;

    MP_CHECK(zc_comm_rank(comm, &v) == ZC_OK && v == rank, "rank %d", v);
    MP_CHECK(zc_comm_size(comm, &v) == ZC_OK && v == nranks, "size %d", v);
    MP_CHECK(zc_comm_node_count(comm, &v) == ZC_OK && v == (nranks + ranks_per_node - 1) / ranks_per_node,
             "node count %d", v);
    MP_CHECK(zc_comm_node(comm, &v) == ZC_OK && v == rank / ranks_per_node, "node %d", v);
    MP_CHECK(zc_comm_local_rank(comm, &v) == ZC_OK && v == rank % ranks_per_node,
             "local rank %d", v);
    MP_CHECK(zc_comm_local_size(comm, &v) == ZC_OK && v == ranks_per_node, "local size %d", v);
    for (int r = 0; r < nranks; r++)
        MP_CHECK(zc_comm_rank_node(comm, r, &v) == ZC_OK && v == r / ranks_per_node,
                 "rank %d on node %d", r, v);
    MP_CHECK(zc_barrier(comm) == ZC_OK, "barrier");
    return 0;
}

static int rank_by_id(int rank, int nranks, void *arg)
{
    int ranks_per_node = arg ? *(int *)arg : nranks;
    char node[32];
    zc_comm_h comm;
    zc_config_t config = ZC_CONFIG_INITIALIZER;

    CASE_ID(rank);
    snprintf(node, sizeof(node), "node%d", rank / ranks_per_node);
    config.node_id = node;
    MP_CHECK(zc_comm_init_rank(&comm, nranks, &the_id, rank, &config) == ZC_OK, "init");
    if (check_comm(comm, rank, nranks, ranks_per_node))
        return 1;
    zc_comm_destroy(comm);
    return 0;
}

/* A UCC-style out-of-band allgather over memory shared by the forked ranks. */
typedef struct {
    pthread_barrier_t barrier;
    char data[1 << 20];
} oob_shared_t;

static oob_shared_t *oob_shm;

static int oob_allgather(const void *sendbuf, void *recvbuf, size_t len, void *ctx)
{
    int rank = ((int *)ctx)[0], size = ((int *)ctx)[1];

    if (len * (size_t)size > sizeof(oob_shm->data))
        return -1;
    memcpy(oob_shm->data + len * (size_t)rank, sendbuf, len);
    pthread_barrier_wait(&oob_shm->barrier);
    memcpy(recvbuf, oob_shm->data, len * (size_t)size);
    pthread_barrier_wait(&oob_shm->barrier);
    return 0;
}

static int rank_by_oob(int rank, int nranks, void *arg)
{
    int ctx[2] = {rank, nranks};
    zc_oob_t oob = {.struct_size = sizeof(zc_oob_t), .allgather = oob_allgather, .ctx = ctx,
                    .rank = rank, .size = nranks};
    zc_comm_h comm;

    MP_CHECK(zc_comm_init_oob(&comm, &oob, NULL) == ZC_OK, "init oob");
    if (check_comm(comm, rank, nranks, nranks))
        return 1;
    zc_comm_destroy(comm);
    return 0;
}

static int oob_case(int nranks)
{
    pthread_barrierattr_t attr;

    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&oob_shm->barrier, &attr, (unsigned)nranks);
    int failed = mp_run_now(nranks, CASE_TIMEOUT_S, rank_by_oob, NULL);
    pthread_barrier_destroy(&oob_shm->barrier);
    return failed;
}

/* A port nobody listens on right now, for the env-launched roots. */
static int port_free(int port)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY),
                               .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), ok = fd >= 0 &&
        bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0;

    if (fd >= 0)
        close(fd);
    return ok;
}

/* A port (and the one after it, which torchrun's flavour uses) that is free
 * now and below the ephemeral range, so that no outgoing connection of
 * another test can take it before the root listens. */
static int free_port(void)
{
    unsigned seed = (unsigned)getpid() * 2654435761u;

    for (int i = 0; i < 200; i++) {
        int port = 20000 + (int)((seed += 40503u) % 12000u);
        if (port_free(port) && port_free(port + 1))
            return port;
    }
    return 0;
}

typedef struct {
    const char *rank_var, *size_var, *local_var, *addr_var, *port_var;
    int port;
} env_flavour_t;

static int rank_by_env(int rank, int nranks, void *arg)
{
    const env_flavour_t *f = arg;
    char value[32];
    zc_comm_h comm;

    snprintf(value, sizeof(value), "%d", rank);
    setenv(f->rank_var, value, 1);
    setenv(f->local_var, value, 1);
    snprintf(value, sizeof(value), "%d", nranks);
    setenv(f->size_var, value, 1);
    setenv(f->addr_var, "127.0.0.1", 1);
    snprintf(value, sizeof(value), "%d", f->port);
    setenv(f->port_var, value, 1);
    MP_CHECK(zc_comm_init_env(&comm, NULL) == ZC_OK, "init env via %s", f->rank_var);
    if (check_comm(comm, rank, nranks, nranks))
        return 1;
    zc_comm_destroy(comm);
    return 0;
}

/* Results the ranks of one case share with each other and the parent. */
typedef struct {
    volatile int intruder_done;
    volatile int started;       /* the rank meant to knock first has started */
    volatile int status[8];
    volatile int detail_ok[8];  /* the status's detail says what it should */
} case_shared_t;

static case_shared_t *shared;

static int rank_wrong_secret(int rank, int nranks, void *arg)
{
    zc_unique_id_t forged;
    zc_comm_h comm;
    zc_config_t config = ZC_CONFIG_INITIALIZER;

    CASE_ID(rank);
    forged = the_id;
    config.timeout_ms = 20000;
    if (rank == nranks - 1) {
        /* An intruder with a forged secret must be refused and not count. */
        forged.internal[8] ^= 0x5a;
        zc_status_t st = zc_comm_init_rank(&comm, 2, &forged, 1, &config);
        shared->intruder_done = 1;
        MP_CHECK(st == ZC_ERR_REFUSED, "forged secret gave %s", zc_strerror(st));
        MP_CHECK(strstr(zc_get_last_error(), "secret") != NULL, "detail names the secret");
        return 0;
    }
    /* Rank 1 joins only after the intruder was turned away, so the root
     * is still registering when the intruder knocks. */
    while (rank == 1 && !shared->intruder_done)
        usleep(1000);
    MP_CHECK(zc_comm_init_rank(&comm, 2, &the_id, rank, &config) == ZC_OK, "init");
    zc_comm_destroy(comm);
    return 0;
}

static int rank_missing_peer(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    zc_config_t config = ZC_CONFIG_INITIALIZER;

    CASE_ID(rank);
    config.timeout_ms = 1500;
    /* nranks + 1 are expected; the last never comes. */
    zc_status_t st = zc_comm_init_rank(&comm, nranks + 1, &the_id, rank, &config);
    MP_CHECK(st == ZC_ERR_TIMEOUT, "missing rank gave %s", zc_strerror(st));
    return 0;
}

/* Two ranks say different nranks: the root tells both ZC_ERR_MISMATCH,
 * whichever it hears first.  `arg` points to the rank that should knock
 * first; the other waits a little after it starts.  That only tilts the
 * order (nothing here depends on winning it), so both orders get run: the
 * root lives in rank 0, which used to exit on its own answer and leave
 * rank 1 with a dead root when rank 1 came first. */
static int rank_nranks_mismatch(int rank, int nranks, void *arg)
{
    int first = *(int *)arg;
    zc_comm_h comm;
    zc_config_t config = ZC_CONFIG_INITIALIZER;

    (void)nranks;
    if (mp_case_id(rank, &the_id, sizeof(the_id), mp_make_id) != 0)
        return 1;
    /* Far above what this case needs: a timeout would be a failure. */
    config.timeout_ms = 30000;
    if (rank == first) {
        shared->started = 1;
    } else {
        while (!shared->started)
            usleep(1000);
        usleep(20000);
    }
    shared->status[rank] = zc_comm_init_rank(&comm, rank == 0 ? 2 : 3, &the_id, rank, &config);
    shared->detail_ok[rank] = strstr(zc_get_last_error(), "nranks") != NULL;
    return 0;
}

static int mismatch_case(int first)
{
    memset((void *)shared, 0, sizeof(*shared));
    int failed = mp_run_now(2, CASE_TIMEOUT_S, rank_nranks_mismatch, &first);

    for (int r = 0; r < 2; r++) {
        if (shared->status[r] != ZC_ERR_MISMATCH || !shared->detail_ok[r]) {
            diag("rank %d: %s%s", r, zc_strerror(shared->status[r]),
                 shared->detail_ok[r] ? "" : ", detail does not name nranks");
            failed++;
        }
    }
    return failed;
}

static void bad_arguments(void)
{
    zc_comm_h comm = NULL;
    zc_config_t config = ZC_CONFIG_INITIALIZER;
    zc_oob_t oob = ZC_OOB_INITIALIZER;
    int v;

    ok(zc_get_unique_id(NULL) == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "id"),
       "zc_get_unique_id(NULL) refused");
    ok(zc_comm_init_rank(NULL, 1, &the_id, 0, NULL) == ZC_ERR_INVALID_ARG &&
       strstr(zc_get_last_error(), "comm"), "init_rank: NULL comm refused");
    ok(zc_comm_init_rank(&comm, 1, NULL, 0, NULL) == ZC_ERR_INVALID_ARG &&
       strstr(zc_get_last_error(), "id"), "init_rank: NULL id refused");
    ok(zc_comm_init_rank(&comm, 0, &the_id, 0, NULL) == ZC_ERR_INVALID_ARG &&
       strstr(zc_get_last_error(), "nranks"), "init_rank: nranks 0 refused");
    ok(zc_comm_init_rank(&comm, 2, &the_id, 2, NULL) == ZC_ERR_INVALID_ARG &&
       strstr(zc_get_last_error(), "rank"), "init_rank: rank == nranks refused");
    ok(zc_comm_init_rank(&comm, 2, &the_id, -1, NULL) == ZC_ERR_INVALID_ARG,
       "init_rank: rank -1 refused");
    config.size = 3;
    ok(zc_comm_init_rank(&comm, 1, &the_id, 0, &config) == ZC_ERR_INVALID_ARG &&
       strstr(zc_get_last_error(), "config"), "init_rank: config without its size refused");
    zc_unique_id_t garbage;
    memset(&garbage, 0x42, sizeof(garbage));
    ok(zc_comm_init_rank(&comm, 1, &garbage, 0, NULL) == ZC_ERR_INVALID_ARG &&
       strstr(zc_get_last_error(), "id"), "init_rank: an id that is not one refused");
    ok(zc_comm_init_oob(&comm, NULL, NULL) == ZC_ERR_INVALID_ARG, "init_oob: NULL oob refused");
    oob.size = 1;
    ok(zc_comm_init_oob(&comm, &oob, NULL) == ZC_ERR_INVALID_ARG &&
       strstr(zc_get_last_error(), "allgather"), "init_oob: NULL callback refused");
    oob.allgather = oob_allgather;
    oob.rank = 1;
    ok(zc_comm_init_oob(&comm, &oob, NULL) == ZC_ERR_INVALID_ARG &&
       strstr(zc_get_last_error(), "rank"), "init_oob: rank out of range refused");
    ok(comm == NULL, "no communicator written on failure");
    ok(zc_comm_rank(NULL, &v) == ZC_ERR_INVALID_ARG, "query on NULL comm refused");
    zc_comm_destroy(NULL);
    ok(1, "zc_comm_destroy(NULL) is a no-op");

    unsetenv("ZC_RANK");
    unsetenv("RANK");
    ok(zc_comm_init_env(&comm, NULL) == ZC_ERR_INVALID_ARG &&
       strstr(zc_get_last_error(), "ZC_RANK"), "init_env without a rank refused, naming ZC_RANK");
}

/* The per-rank queries refuse ranks, rails and outputs they do not have. */
#define QUERY_REFUSED(call, word)                                                         \
    MP_CHECK((call) == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), (word)) != NULL, \
             "%s: expected an invalid argument naming %s", #call, (word))

static int rank_query_args(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    uint64_t sent, received;
    int v;
    (void)nranks, (void)arg;

    CASE_ID(rank);
    MP_CHECK(zc_comm_init_rank(&comm, 1, &the_id, 0, NULL) == ZC_OK, "init");
    QUERY_REFUSED(zc_comm_rank_node(comm, 1, &v), "rank");
    QUERY_REFUSED(zc_comm_rank_node(comm, 0, NULL), "node");
    QUERY_REFUSED(zc_comm_rank_rail(comm, -1, &v), "rank");
    QUERY_REFUSED(zc_comm_rank_rail(comm, 0, NULL), "rail");
    QUERY_REFUSED(zc_comm_rail_count(comm, NULL), "nrails");
    QUERY_REFUSED(zc_comm_rail_bytes(comm, 1, &sent, &received), "rail");
    QUERY_REFUSED(zc_comm_rail_bytes(comm, -1, NULL, &received), "sent");
    MP_CHECK(zc_comm_rail_count(comm, &v) == ZC_OK && v == 0, "one node: no rails");
    MP_CHECK(zc_comm_rank_rail(comm, 0, &v) == ZC_OK && v == -1, "no rail for rank 0");
    MP_CHECK(zc_comm_rail_bytes(comm, -1, &sent, &received) == ZC_OK,
             "bytes inside the node");
    zc_comm_destroy(comm);
    return 0;
}

/* A UCX_TLS that names no transport here (UCX takes the name and fails
 * only in ucp_init, "No such device") is a setting refused, naming it, not
 * a transport failure. */
static int rank_bogus_tls(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    (void)nranks, (void)arg;

    setenv("UCX_TLS", "bogus", 1);
    CASE_ID(rank);
    /* UCX prints its own complaint, expected here, to stdout: hidden. */
    int saved = dup(1), devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    zc_status_t st = zc_comm_init_rank(&comm, 1, &the_id, 0, NULL);
    dup2(saved, 1);
    close(saved);
    close(devnull);
    MP_CHECK(st == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "UCX_TLS=bogus rejected"),
             "UCX_TLS=bogus gave %s", zc_strerror(st));
    return 0;
}

/* A thread that queries a communicator, lets the main thread destroy it,
 * and queries it again. */
typedef struct {
    zc_comm_h comm;
    pthread_barrier_t queried, destroyed;
    zc_status_t before, after;
} destroy_race_t;

static void *query_around_destroy(void *arg)
{
    destroy_race_t *r = arg;
    int v;

    r->before = zc_comm_rank(r->comm, &v);
    pthread_barrier_wait(&r->queried);
    pthread_barrier_wait(&r->destroyed);
    r->after = zc_comm_rank(r->comm, &v);
    return NULL;
}

/* Destroys `comm` between a thread's two queries of it: ZC_OK if the first
 * passed and the second was refused with ZC_ERR_INVALID_ARG. */
static zc_status_t destroy_between_queries(zc_comm_h comm)
{
    destroy_race_t r = {.comm = comm, .before = ZC_ERR_INTERNAL, .after = ZC_ERR_INTERNAL};
    pthread_t thread;

    pthread_barrier_init(&r.queried, NULL, 2);
    pthread_barrier_init(&r.destroyed, NULL, 2);
    if (pthread_create(&thread, NULL, query_around_destroy, &r) != 0) {
        zc_comm_destroy(comm);
        return ZC_ERR_SYSTEM;
    }
    pthread_barrier_wait(&r.queried);
    zc_comm_destroy(comm);
    pthread_barrier_wait(&r.destroyed);
    pthread_join(thread, NULL);
    pthread_barrier_destroy(&r.queried);
    pthread_barrier_destroy(&r.destroyed);
    return r.before == ZC_OK && r.after == ZC_ERR_INVALID_ARG ? ZC_OK : ZC_ERR_INTERNAL;
}

/* Each thread remembers the last communicator it found live until any is
 * destroyed (liveness.c): a handle a thread used just before its destroy
 * is refused after it, in that thread or another, and destroying one
 * communicator leaves another that was just used live. */
static int rank_use_after_destroy(int rank, int nranks, void *arg)
{
    zc_comm_h comm, other, third;
    zc_unique_id_t other_id, third_id;
    int v;

    CASE_ID(rank);
    MP_CHECK(zc_get_unique_id(&other_id) == ZC_OK && zc_get_unique_id(&third_id) == ZC_OK,
             "more ids");
    MP_CHECK(zc_comm_init_rank(&comm, 1, &the_id, 0, NULL) == ZC_OK, "init");
    MP_CHECK(zc_comm_init_rank(&other, 1, &other_id, 0, NULL) == ZC_OK, "init another");
    MP_CHECK(zc_comm_rank(comm, &v) == ZC_OK, "query");
    zc_comm_destroy(comm);
    MP_CHECK(zc_comm_rank(comm, &v) == ZC_ERR_INVALID_ARG, "query after destroy refused");
    MP_CHECK(strstr(zc_get_last_error(), "destroyed") != NULL, "detail says destroyed");
    MP_CHECK(zc_barrier(comm) == ZC_ERR_INVALID_ARG, "barrier after destroy refused");
    MP_CHECK(zc_comm_rank(other, &v) == ZC_OK, "query the other");
    MP_CHECK(zc_comm_init_rank(&third, 1, &third_id, 0, NULL) == ZC_OK, "init a third");
    zc_comm_destroy(third);
    MP_CHECK(zc_comm_rank(other, &v) == ZC_OK && v == 0,
             "the other, used just before, is still live after a destroy");
    MP_CHECK(destroy_between_queries(other) == ZC_OK,
             "a thread's handle destroyed by another thread is refused on its next call");
    MP_CHECK(zc_comm_rank(other, &v) == ZC_ERR_INVALID_ARG, "and in this thread");
    return 0;
}

int main(void)
{
    static const int sizes[] = {1, 2, 4, 8};
    static const env_flavour_t flavours[] = {
        {"ZC_RANK", "ZC_SIZE", "ZC_LOCAL_RANK", "ZC_MASTER_ADDR", "ZC_MASTER_PORT", 0},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
         "MASTER_ADDR", "ZC_MASTER_PORT", 0},
        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "MASTER_ADDR", "MASTER_PORT", 0},
        {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "ZC_MASTER_ADDR", "MASTER_PORT", 0},
        {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", 0},
    };

    setenv("ZC_SOCKET_IFNAME", "lo", 0);
    oob_shm = mp_shared(sizeof(*oob_shm));
    shared = mp_shared(sizeof(*shared));

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        ok(mp_run(sizes[i], CASE_TIMEOUT_S, rank_by_id, NULL) == 0, "init by unique id, %d ranks",
           sizes[i]);
    }
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        ok(oob_case(sizes[i]) == 0, "init by out-of-band allgather, %d ranks", sizes[i]);
    for (size_t i = 0; i < sizeof(flavours) / sizeof(flavours[0]); i++) {
        env_flavour_t f = flavours[i];
        f.port = free_port();
        int n = i == 0 ? 8 : 4;
        ok(mp_run(n, CASE_TIMEOUT_S, rank_by_env, &f) == 0, "init from %s/%s, %d ranks",
           f.rank_var, f.size_var, n);
    }

    int per_node = 2;
    ok(mp_run(8, CASE_TIMEOUT_S, rank_by_id, &per_node) == 0,
       "8 ranks as 4 nodes by node id: node, local rank and size per rank");

    ok(mp_run(3, CASE_TIMEOUT_S, rank_wrong_secret, NULL) == 0,
       "a wrong secret is refused with ZC_ERR_REFUSED and the real ranks still connect");
    ok(mp_run(2, CASE_TIMEOUT_S, rank_missing_peer, NULL) == 0,
       "a rank that never arrives ends init with ZC_ERR_TIMEOUT");
    for (int first = 0; first < 2; first++)
        ok(mismatch_case(first) == 0,
           "ranks that disagree on nranks get ZC_ERR_MISMATCH, both (rank %d knocks first)",
           first);
    ok(mp_run(1, CASE_TIMEOUT_S, rank_bogus_tls, NULL) == 0,
       "UCX_TLS naming no available transport is ZC_ERR_INVALID_ARG naming the setting");
    ok(mp_run(1, CASE_TIMEOUT_S, rank_use_after_destroy, NULL) == 0,
       "calls on a destroyed communicator are refused, right after a use, in this thread or "
       "another; one used before another's destroy stays live");
    ok(mp_run(1, CASE_TIMEOUT_S, rank_query_args, NULL) == 0,
       "zc_comm_rank_node, zc_comm_rank_rail, zc_comm_rail_count and zc_comm_rail_bytes refuse "
       "ranks, rails and outputs they do not have, naming them");

    bad_arguments();
    return tap_done();
}
