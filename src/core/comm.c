/* Communicator creation (unique id, out-of-band, environment), queries,
 * barrier and destruction. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/common/abi.h"
#include "src/core/bootstrap.h"
#include "src/common/rate.h"
#include "src/core/comm.h"
#include "src/core/device.h"
#include "src/common/env.h"
#include "src/core/launch_env.h"
#include "src/common/log.h"
#include "src/core/p2p.h"
#include "src/core/sched.h"
#include "src/core/settings.h"
#include "src/common/status.h"

/* A bootstrap root nobody joins gives up after this many timeouts. */
#define ZC_ROOT_IDLE_FACTOR 10

_Static_assert(sizeof(zc_bootstrap_id_t) <= ZC_UNIQUE_ID_BYTES, "unique id too small");

static zc_status_t zc_config_timeout(const zc_config_t *config, int *timeout_ms)
{
    int64_t value;

    if (config && config->timeout_ms > 0) {
        *timeout_ms = config->timeout_ms;
        return ZC_OK;
    }
    ZC_CHECK(zc_env_get_int("ZC_TIMEOUT", &value));
    if (value <= 0 || value > INT32_MAX)
        return zc_error(ZC_ERR_INVALID_ARG, "ZC_TIMEOUT=%lld must be a positive number of ms",
                        (long long)value);
    *timeout_ms = (int)value;
    return ZC_OK;
}

/* Read the caller's config (its size's worth, the defaults past it) into
 * *local and point *config at it; a NULL config stays NULL. */
static zc_status_t zc_config_check(const zc_config_t **configp, zc_config_t *local)
{
    const zc_config_t defaults = ZC_CONFIG_INITIALIZER;
    const zc_config_t *config = *configp;

    *local = defaults;
    if (!config)
        return ZC_OK;
    ZC_CHECK(zc_abi_read(local, sizeof(*local), sizeof(*local), config, config->size,
                         ZC_CONFIG_SIZE_V1, "config", "ZC_CONFIG_INITIALIZER"));
    local->size = sizeof(*local);
    *configp = config = local;
    if (config->timeout_ms < 0)
        return zc_error(ZC_ERR_INVALID_ARG, "config: timeout_ms %d is negative",
                        config->timeout_ms);
    return ZC_OK;
}

static void zc_rank_info_self(const zc_config_t *config, zc_rank_info_t *info)
{
    struct stat st;

    memset(info, 0, sizeof(*info));
    zc_node_identity(config ? config->node_id : NULL, info->node_name, sizeof(info->node_name),
                     &info->node_hash, &info->host_hash, &info->kernel_hash);
    info->pid = (int32_t)getpid();
    info->pid_ns = stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Nodes are numbered by their lowest rank; local ranks by rank order. */
static void zc_comm_place_nodes(struct zc_comm *comm)
{
    comm->nnodes = 0;
    comm->local_rank = 0;
    comm->local_size = 0;
    for (int r = 0; r < comm->size; r++) {
        int node = -1;
        for (int q = 0; q < r && node < 0; q++)
            if (comm->ranks[q].node_hash == comm->ranks[r].node_hash &&
                strcmp(comm->ranks[q].node_name, comm->ranks[r].node_name) == 0)
                node = comm->rank_node[q];
        comm->rank_node[r] = node >= 0 ? node : comm->nnodes++;
    }
    comm->node = comm->rank_node[comm->rank];
    for (int r = 0; r < comm->size; r++) {
        if (comm->rank_node[r] != comm->node)
            continue;
        comm->local_rank += r < comm->rank;
        comm->local_size++;
    }
}

/* What each rank tells the others about its rails. */
typedef struct {
    int32_t count, mine;
    uint32_t kbps[ZC_MAX_RAILS];   /* configured rates (0: unknown) */
} zc_rails_blob_t;

/* Rails are striped only when every node has them, over as many as the
 * node with the fewest has; a single node needs none.  Their configured
 * rates are combined (rail_rates.h).  A bad ZC_RAIL_RATES fails only this
 * rank, after the allgather (the others then fail to connect to it). */
static zc_status_t zc_comm_agree_rails(struct zc_comm *comm, zc_bootstrap_t *bs)
{
    zc_rails_blob_t mine = {0}, *all = malloc(sizeof(*all) * (size_t)comm->size);
    uint32_t *kbps = malloc(sizeof(uint32_t) * ZC_MAX_RAILS * (size_t)comm->size);
    double gbps[ZC_MAX_RAILS];
    zc_status_t local = ZC_OK, st;

    if (!all || !kbps) {
        free(all);
        free(kbps);
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the rail table");
    }
    if (comm->nnodes > 1)
        zc_rails_discover(comm->local_rank, &comm->rails);
    else
        memset(&comm->rails, 0, sizeof(comm->rails));
    mine.count = comm->rails.count;
    mine.mine = comm->rails.mine;
    local = zc_rail_rates_local(&comm->rails, gbps);
    for (int k = 0; local == ZC_OK && k < ZC_MAX_RAILS; k++)
        mine.kbps[k] = zc_rate_weight(gbps[k]);
    st = zc_bootstrap_allgather(bs, &mine, all, sizeof(mine));
    if (st == ZC_OK) {
        comm->nrails = comm->nnodes > 1 ? ZC_MAX_RAILS : 0;
        for (int r = 0; r < comm->size; r++)
            comm->nrails = all[r].count < comm->nrails ? all[r].count : comm->nrails;
        for (int r = 0; r < comm->size; r++) {
            comm->rank_rail[r] = comm->nrails ? all[r].mine % comm->nrails : -1;
            memcpy(kbps + (size_t)r * ZC_MAX_RAILS, all[r].kbps, sizeof(all[r].kbps));
        }
        zc_rail_rates_combine(comm, kbps);
    }
    free(all);
    free(kbps);
    return st != ZC_OK ? st : local;
}

static void zc_comm_free(struct zc_comm *comm)
{
    if (!comm)
        return;
    zc_device_release(comm);
    zc_sched_linger_end(comm);
    if (comm->ring_attn_release)
        comm->ring_attn_release(comm->ring_attn);
    if (comm->host)
        comm->host_ops->destroy(comm->host);
    free(comm->ranks);
    free(comm->rank_node);
    free(comm->pid_seen_ms);
    free(comm->rank_rail);
    while (comm->free_reqs) {
        struct zc_request *req = comm->free_reqs;
        comm->free_reqs = req->next_free;
        free(req);
    }
    comm->magic = 0;
    free(comm);
}

static int zc_comm_watchable(const void *comm, int peer)
{
    return zc_comm_peer_watchable((zc_comm_h)comm, peer);
}

static zc_status_t zc_comm_allgather(void *bs, const void *send, void *recv, size_t len)
{
    return zc_bootstrap_allgather(bs, send, recv, len);
}

/* The host transport's endpoints to every rank, as this communicator
 * placed the ranks on nodes and rails. */
static zc_status_t zc_comm_connect(struct zc_comm *comm, zc_bootstrap_t *bs)
{
    zc_transport_world_t world = {
        .rank = comm->rank, .size = comm->size, .node = comm->node,
        .local_size = comm->local_size, .timeout_ms = comm->timeout_ms,
        .rank_node = comm->rank_node, .nrails = comm->nrails, .rank_rail = comm->rank_rail,
        .peer_watchable = zc_comm_watchable, .peer_ctx = comm,
        .allgather = zc_comm_allgather, .allgather_ctx = bs,
        .allgather_max = ZC_BOOTSTRAP_MAX_BLOB,
        .split_bytes = (size_t)comm->settings.host_split_bytes,
        .rail_stall_ms = comm->settings.rail_stall_ms < comm->timeout_ms / 4
                             ? comm->settings.rail_stall_ms
                             : comm->timeout_ms / 4 + 1,
        .rail_probe_ms = comm->settings.rail_probe_ms,
    };

    for (int k = 0; k < comm->nrails; k++)
        world.rail_devices[k] = comm->rails.devices[k];
    return comm->host_ops->create(&world, &comm->host);
}

/* Everything after the bootstrap is up is the same for every init flavour. */
static zc_status_t zc_comm_create(zc_bootstrap_t *bs, int nranks, int rank,
                                  const zc_config_t *config, const zc_comm_settings_t *settings,
                                  zc_comm_h *comm_out)
{
    zc_rank_info_t mine;
    struct zc_comm *comm = calloc(1, sizeof(*comm));
    int32_t *ready = NULL;
    zc_status_t st;

    if (!comm)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the communicator");
    comm->rank = rank;
    comm->size = nranks;
    comm->settings = *settings;
    comm->timeout_ms = settings->timeout_ms;
    comm->host_ops = &zc_transport_ucx;
    comm->linger_poll = zc_sched_linger_poll;
    comm->ranks = calloc((size_t)nranks, sizeof(*comm->ranks));
    comm->rank_node = calloc((size_t)nranks, sizeof(int));
    comm->rank_rail = calloc((size_t)nranks, sizeof(int));
    comm->pid_seen_ms = calloc((size_t)nranks, sizeof(int64_t));
    ready = calloc((size_t)nranks, sizeof(int32_t));
    if (!comm->ranks || !comm->rank_node || !comm->rank_rail || !comm->pid_seen_ms || !ready) {
        st = zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the rank table");
        goto err;
    }
    zc_rank_info_self(config, &mine);
    ZC_CHECK_GOTO(zc_bootstrap_allgather(bs, &mine, comm->ranks, sizeof(mine)), st, err);
    /* values every rank must share, from each rank's environment or config */
    ZC_CHECK_GOTO(zc_comm_settings_agree(&comm->settings, bs, rank, nranks), st, err);
    zc_comm_place_nodes(comm);
    zc_comm_idle_init(comm);
    ZC_CHECK_GOTO(zc_comm_agree_rails(comm, bs), st, err);
    ZC_CHECK_GOTO(zc_comm_connect(comm, bs), st, err);
    /* Nobody returns (and may destroy or exit) before every rank has its
     * endpoints: connecting to a rank that is gone fails. */
    ZC_CHECK_GOTO(zc_bootstrap_allgather(bs, &mine.pid, ready, sizeof(mine.pid)), st, err);
    free(ready);
    comm->magic = ZC_COMM_MAGIC;
    zc_comm_register(comm);
    zc_log_set_rank(rank);
    zc_log_info("communicator up: rank %d of %d, node %d of %d (%s), local rank %d of %d%s",
                rank, nranks, comm->node, comm->nnodes, mine.node_name, comm->local_rank,
                comm->local_size, comm->crowded ? "; more ranks on this machine than cores: "
                                                  "waits yield between polls" : "");
    *comm_out = comm;
    return ZC_OK;

err:
    free(ready);
    zc_comm_free(comm);
    return st;
}

static int zc_root_idle_ms(int timeout_ms)
{
    return timeout_ms > INT32_MAX / ZC_ROOT_IDLE_FACTOR ? INT32_MAX
                                                         : ZC_ROOT_IDLE_FACTOR * timeout_ms;
}

zc_status_t zc_get_unique_id(zc_unique_id_t *id)
{
    uint8_t secret[ZC_BOOTSTRAP_SECRET_BYTES];
    zc_bootstrap_id_t bid;
    zc_sockaddr_t addr;
    int timeout_ms = 0;  /* set by zc_config_timeout; gcc cannot see it through ZC_CHECK */

    zc_error_clear();
    ZC_ARG_CHECK(id != NULL, "id: is NULL");
    ZC_CHECK(zc_socket_ifaddr(zc_env_get("ZC_SOCKET_IFNAME"), &addr));
    ZC_CHECK(zc_bootstrap_random_secret(secret));
    ZC_CHECK(zc_config_timeout(NULL, &timeout_ms));
    zc_bootstrap_id_init(&bid, secret, &addr);
    /* Ids travel by the caller's means, which may take a while. */
    ZC_CHECK(zc_bootstrap_root_start(&bid, zc_root_idle_ms(timeout_ms)));
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, &bid, sizeof(bid));
    return ZC_OK;
}

zc_status_t zc_comm_init_rank(zc_comm_h *comm, int nranks, const zc_unique_id_t *id, int rank,
                              const zc_config_t *config)
{
    zc_bootstrap_id_t bid;
    zc_bootstrap_t *bs;
    zc_config_t cfg;
    zc_comm_settings_t settings;
    int timeout_ms;
    zc_status_t st;

    zc_error_clear();
    ZC_ARG_CHECK(comm != NULL, "comm: is NULL");
    ZC_ARG_CHECK(id != NULL, "id: is NULL");
    ZC_ARG_CHECK(nranks >= 1 && nranks <= ZC_BOOTSTRAP_MAX_RANKS,
                 "nranks: %d is out of range 1..%d", nranks, ZC_BOOTSTRAP_MAX_RANKS);
    ZC_ARG_CHECK(rank >= 0 && rank < nranks, "rank: %d is out of range 0..%d", rank, nranks - 1);
    ZC_CHECK(zc_config_check(&config, &cfg));
    ZC_CHECK(zc_comm_settings_read(config, &settings));
    timeout_ms = settings.timeout_ms;
    memcpy(&bid, id->internal, sizeof(bid));
    ZC_CHECK(zc_bootstrap_tcp_create(&bid, nranks, rank, timeout_ms, &bs));
    st = zc_comm_create(bs, nranks, rank, config, &settings, comm);
    zc_bootstrap_destroy(bs);
    return st;
}

zc_status_t zc_comm_init_oob(zc_comm_h *comm, const zc_oob_t *user_oob,
                             const zc_config_t *config)
{
    const zc_oob_t *oob, defaults = ZC_OOB_INITIALIZER;
    zc_oob_t local = defaults;
    zc_bootstrap_t *bs;
    zc_config_t cfg;
    zc_comm_settings_t settings;
    zc_status_t st;

    zc_error_clear();
    ZC_ARG_CHECK(comm != NULL, "comm: is NULL");
    ZC_ARG_CHECK(user_oob != NULL, "oob: is NULL");
    ZC_CHECK(zc_abi_read(&local, sizeof(local), sizeof(local), user_oob, user_oob->struct_size,
                         ZC_OOB_SIZE_V1, "oob", "ZC_OOB_INITIALIZER"));
    local.struct_size = sizeof(local);
    oob = &local;
    ZC_ARG_CHECK(oob->allgather != NULL, "oob: allgather callback is NULL");
    ZC_ARG_CHECK(oob->size >= 1 && oob->size <= ZC_BOOTSTRAP_MAX_RANKS,
                 "oob: size %d is out of range 1..%d", oob->size, ZC_BOOTSTRAP_MAX_RANKS);
    ZC_ARG_CHECK(oob->rank >= 0 && oob->rank < oob->size, "oob: rank %d is out of range 0..%d",
                 oob->rank, oob->size - 1);
    ZC_CHECK(zc_config_check(&config, &cfg));
    ZC_CHECK(zc_comm_settings_read(config, &settings));
    ZC_CHECK(zc_bootstrap_oob_create(oob, &bs));
    st = zc_comm_create(bs, oob->size, oob->rank, config, &settings, comm);
    zc_bootstrap_destroy(bs);
    return st;
}

zc_status_t zc_comm_init_env(zc_comm_h *comm, const zc_config_t *config)
{
    zc_launch_info_t info;
    zc_bootstrap_id_t bid;
    zc_bootstrap_t *bs;
    zc_sockaddr_t master;
    zc_config_t cfg;
    zc_comm_settings_t settings;
    int timeout_ms;
    zc_status_t st;

    zc_error_clear();
    ZC_ARG_CHECK(comm != NULL, "comm: is NULL");
    ZC_CHECK(zc_config_check(&config, &cfg));
    ZC_CHECK(zc_comm_settings_read(config, &settings));
    timeout_ms = settings.timeout_ms;
    ZC_CHECK(zc_launch_info_read(&info));
    ZC_CHECK(zc_socket_resolve(info.master_addr, info.master_port, &master));
    zc_bootstrap_id_init(&bid, info.secret, &master);
    if (info.rank == 0) {
        /* Rank 0 is the root, listening on every interface at the port. */
        zc_bootstrap_id_t listen_id = bid;
        if (master.sa.sa_family == AF_INET6)
            listen_id.root.in6.sin6_addr = in6addr_any;
        else
            listen_id.root.in.sin_addr.s_addr = htonl(INADDR_ANY);
        ZC_CHECK(zc_bootstrap_root_start(&listen_id, zc_root_idle_ms(timeout_ms)));
    }
    zc_log_info("init from %s environment: rank %d of %d, root %s:%d", info.launcher, info.rank,
                info.size, info.master_addr, info.master_port);
    ZC_CHECK(zc_bootstrap_tcp_create(&bid, info.size, info.rank, timeout_ms, &bs));
    st = zc_comm_create(bs, info.size, info.rank, config, &settings, comm);
    zc_bootstrap_destroy(bs);
    return st;
}

void zc_comm_destroy(zc_comm_h comm)
{
    if (!comm)
        return;
    if (!zc_comm_unregister(comm)) {
        zc_log_warn("zc_comm_destroy: %p is not a live communicator", (void *)comm);
        return;
    }
    zc_comm_free(comm);
}

/* Every query: a live comm, a non-NULL output, then the answer. */
#define ZC_COMM_QUERY(fn, field)                                              \
    zc_status_t fn(zc_comm_h comm, int *out)                                  \
    {                                                                         \
        zc_error_clear();                                                     \
        ZC_CHECK(zc_comm_check(comm));                                        \
        ZC_ARG_CHECK(out != NULL, #fn ": output is NULL");                    \
        *out = comm->field;                                                   \
        return ZC_OK;                                                         \
    }

ZC_COMM_QUERY(zc_comm_rank, rank)
ZC_COMM_QUERY(zc_comm_size, size)
ZC_COMM_QUERY(zc_comm_node, node)
ZC_COMM_QUERY(zc_comm_node_count, nnodes)
ZC_COMM_QUERY(zc_comm_local_rank, local_rank)
ZC_COMM_QUERY(zc_comm_local_size, local_size)

/* Per-rank tables: `name` is the output's, for the message. */
#define ZC_COMM_RANK_QUERY(fn, table, name)                                   \
    zc_status_t fn(zc_comm_h comm, int rank, int *name)                       \
    {                                                                         \
        zc_error_clear();                                                     \
        ZC_CHECK(zc_comm_check(comm));                                        \
        ZC_ARG_CHECK(rank >= 0 && rank < comm->size,                          \
                     "rank: %d is out of range 0..%d", rank, comm->size - 1);  \
        ZC_ARG_CHECK(name != NULL, #name ": is NULL");                        \
        *name = comm->table[rank];                                            \
        return ZC_OK;                                                         \
    }

ZC_COMM_RANK_QUERY(zc_comm_rank_node, rank_node, node)
ZC_COMM_RANK_QUERY(zc_comm_rank_rail, rank_rail, rail)

zc_status_t zc_comm_rail_count(zc_comm_h comm, int *nrails)
{
    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    ZC_ARG_CHECK(nrails != NULL, "nrails: is NULL");
    *nrails = comm->nrails;
    return ZC_OK;
}

zc_status_t zc_comm_rail_bytes(zc_comm_h comm, int rail, uint64_t *sent, uint64_t *received)
{
    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    ZC_ARG_CHECK(rail >= -1 && rail < comm->nrails, "rail: %d is out of range -1..%d", rail,
                 comm->nrails - 1);
    ZC_ARG_CHECK(sent != NULL && received != NULL, "sent, received: NULL output");
    comm->host_ops->rail_bytes(comm->host, rail, sent, received);
    return ZC_OK;
}

zc_status_t zc_comm_rail_rates(zc_comm_h comm, double *gbps, int n)
{
    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    ZC_ARG_CHECK(n == comm->nrails, "n: %d, the communicator has %d rails", n, comm->nrails);
    ZC_ARG_CHECK(gbps != NULL || n == 0, "gbps: is NULL");
    for (int k = 0; k < n; k++)
        gbps[k] = comm->rates.used[k] * 1e-6;
    return ZC_OK;
}

zc_status_t zc_comm_set_rail_rates(zc_comm_h comm, const double *gbps, int n)
{
    uint32_t pinned[ZC_MAX_RAILS] = {0};

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    if (gbps == NULL && n == 0) {
        memset(comm->rates.pinned, 0, sizeof(comm->rates.pinned));
        return ZC_OK;
    }
    ZC_ARG_CHECK(n == comm->nrails, "n: %d, the communicator has %d rails", n, comm->nrails);
    ZC_ARG_CHECK(gbps != NULL, "gbps: is NULL with n %d", n);
    for (int k = 0; k < n; k++) {
        ZC_ARG_CHECK(gbps[k] > 0 && gbps[k] < 1e9, "gbps[%d]: %g is not a positive rate", k,
                     gbps[k]);
        pinned[k] = zc_rate_weight(gbps[k]);
    }
    memcpy(comm->rates.pinned, pinned, sizeof(pinned));
    return ZC_OK;
}

/* Dissemination barrier: log2(size) rounds of empty messages. */
zc_status_t zc_barrier(zc_comm_h comm)
{
    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    uint32_t seq = comm->barrier_seq++;

    for (int dist = 1; dist < comm->size; dist <<= 1) {
        int to = (comm->rank + dist) % comm->size;
        int from = (comm->rank - dist + comm->size) % comm->size;
        zc_request_h reqs[2];

        ZC_CHECK(zc_p2p_post(comm, ZC_REQ_RECV, NULL, 0, from,
                             ZC_TAG(from, ZC_TAG_CLASS_BARRIER, seq), ZC_RAIL_AUTO, &reqs[0]));
        zc_status_t st = zc_p2p_post(comm, ZC_REQ_SEND, NULL, 0, to,
                                     ZC_TAG(comm->rank, ZC_TAG_CLASS_BARRIER, seq), ZC_RAIL_AUTO,
                                     &reqs[1]);
        if (st != ZC_OK) {
            zc_p2p_abandon(&reqs[0], st);
            return st;
        }
        ZC_CHECK(zc_p2p_wait_all(reqs, 2));
    }
    return ZC_OK;
}
