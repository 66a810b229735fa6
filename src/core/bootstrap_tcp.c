/* Bootstrap over TCP: a root thread gathers one blob per rank per round and
 * sends every rank the whole table.
 *
 * Protocol (all messages fixed-size headers, blobs bounded):
 *   rank -> root   hello {magic, version, secret, nranks, rank, timeout}
 *   rank -> root   round {magic, len} + len bytes         (once per allgather)
 *   root -> rank   reply {status, reason, nranks, len} + nranks * len bytes
 *   rank -> root   round {magic, ZC_BS_BYE}                (in destroy)
 * A hello with the wrong secret gets a REFUSED reply and does not count;
 * ranks that disagree on nranks or len get MISMATCH, all of them; a rank
 * that is missing when the timeout expires turns into TIMEOUT for all, one
 * that closes its connection early into PEER_FAILED. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/core/bootstrap.h"
#include "src/core/bootstrap_impl.h"
#include "src/common/clock.h"
#include "src/common/log.h"
#include "src/common/status.h"

#define ZC_BS_MAGIC 0x7a63627aU  /* "zcbz" */
#define ZC_BS_VERSION 1U
#define ZC_BS_BYE UINT64_MAX
/* How long one connection may take to present its hello. */
#define ZC_BS_HELLO_MS 5000
/* Extra time the root waits for a round after the ranks' timeout, and a
 * rank for the root's verdict after the root's own. */
#define ZC_BS_GRACE_MS 2000

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint8_t secret[ZC_BOOTSTRAP_SECRET_BYTES];
    int32_t nranks;
    int32_t rank;
    int32_t timeout_ms;
    uint32_t reserved;
} zc_bs_hello_t;

typedef struct {
    uint32_t magic;
    uint32_t reserved;
    uint64_t len;
} zc_bs_round_t;

typedef struct {
    int32_t status;
    int32_t nranks;
    uint64_t len;
    char reason[112];
} zc_bs_reply_t;

typedef struct {
    zc_bootstrap_t base;
    int fd;
    int timeout_ms;
    char root[64];
} zc_bs_tcp_t;

typedef struct {
    zc_bootstrap_id_t id;
    int listen_fd;
    int idle_ms;
    int nranks;
    int timeout_ms;
    int *fds;
} zc_bs_root_t;

zc_status_t zc_bootstrap_random_secret(uint8_t secret[ZC_BOOTSTRAP_SECRET_BYTES])
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t n = -1;

    if (fd >= 0) {
        n = read(fd, secret, ZC_BOOTSTRAP_SECRET_BYTES);
        close(fd);
    }
    if (n != ZC_BOOTSTRAP_SECRET_BYTES)
        return zc_error(ZC_ERR_SYSTEM, "cannot read /dev/urandom: %s", strerror(errno));
    return ZC_OK;
}

/* Constant-time, so the secret cannot be guessed byte by byte. */
static int zc_secret_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0;

    for (int i = 0; i < ZC_BOOTSTRAP_SECRET_BYTES; i++)
        diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

static void zc_bs_reply(int fd, zc_status_t status, int nranks, uint64_t len, const char *reason)
{
    zc_bs_reply_t reply = {.status = status, .nranks = nranks, .len = len};

    if (reason)
        strncpy(reply.reason, reason, sizeof(reply.reason) - 1);
    (void)zc_socket_send_all(fd, &reply, sizeof(reply), zc_now_ms() + ZC_BS_HELLO_MS);
}

/* Replies go to rank 0 last: the root usually lives in rank 0's process,
 * which may exit as soon as it has its answer, taking the root along. */
static void zc_bs_root_fail(zc_bs_root_t *root, zc_status_t status, const char *reason)
{
    zc_log_warn("bootstrap root: %s", reason);
    for (int r = root->nranks - 1; r >= 0; r--)
        if (root->fds[r] >= 0)
            zc_bs_reply(root->fds[r], status, root->nranks, 0, reason);
}

/* Check one hello; on success the connection becomes rank hello.rank.
 * ZC_ERR_MISMATCH when it names another nranks: the root has told every
 * rank and gives up. */
static zc_status_t zc_bs_root_hello(zc_bs_root_t *root, int fd, int64_t deadline)
{
    zc_bs_hello_t hello;
    char reason[112];
    int64_t hello_deadline = zc_now_ms() + ZC_BS_HELLO_MS;

    if (hello_deadline > deadline)
        hello_deadline = deadline;
    if (zc_socket_recv_all(fd, &hello, sizeof(hello), hello_deadline) != ZC_OK ||
        hello.magic != ZC_BS_MAGIC) {
        zc_log_warn("bootstrap root: dropped a connection that sent no valid hello");
        goto out_close;
    }
    if (hello.version != ZC_BS_VERSION || !zc_secret_equal(hello.secret, root->id.secret)) {
        zc_log_warn("bootstrap root: refused a connection with a wrong secret or version");
        zc_bs_reply(fd, ZC_ERR_REFUSED, 0, 0, "the unique id's secret does not match the root's");
        goto out_close;
    }
    if (root->nranks == 0) {
        if (hello.nranks < 1 || hello.nranks > ZC_BOOTSTRAP_MAX_RANKS) {
            zc_bs_reply(fd, ZC_ERR_INVALID_ARG, 0, 0, "nranks is out of range");
            goto out_close;
        }
        root->fds = malloc(sizeof(int) * (size_t)hello.nranks);
        if (!root->fds)
            goto out_close;
        for (int r = 0; r < hello.nranks; r++)
            root->fds[r] = -1;
        root->nranks = hello.nranks;
        root->timeout_ms = hello.timeout_ms > 0 ? hello.timeout_ms : 60000;
    }
    if (hello.nranks != root->nranks) {
        /* No communicator can come out of this: tell the ranks already in
         * as well, rather than leave them to time out.  That also keeps the
         * outcome the same whoever came first: when the newcomer hosts the
         * root (rank 0 made the id), it exits on its answer and takes the
         * root along, so the others must have theirs before it.  Rank 0
         * last, as in zc_bs_root_fail. */
        snprintf(reason, sizeof(reason), "rank %d says nranks=%d but others said %d", hello.rank,
                 hello.nranks, root->nranks);
        if (hello.rank != 0)
            zc_bs_reply(fd, ZC_ERR_MISMATCH, root->nranks, 0, reason);
        zc_bs_root_fail(root, ZC_ERR_MISMATCH, reason);
        if (hello.rank == 0)
            zc_bs_reply(fd, ZC_ERR_MISMATCH, root->nranks, 0, reason);
        close(fd);
        return ZC_ERR_MISMATCH;
    }
    if (hello.rank < 0 || hello.rank >= root->nranks || root->fds[hello.rank] >= 0) {
        snprintf(reason, sizeof(reason), "rank %d is out of range or already taken", hello.rank);
        zc_bs_reply(fd, ZC_ERR_INVALID_ARG, root->nranks, 0, reason);
        goto out_close;
    }
    root->fds[hello.rank] = fd;
    return ZC_OK;

out_close:
    close(fd);
    return ZC_OK;
}

/* Gather every rank's hello.  The clock starts at the first valid one. */
static zc_status_t zc_bs_root_register(zc_bs_root_t *root)
{
    int joined = 0;
    int64_t deadline = zc_now_ms() + root->idle_ms;

    while (root->nranks == 0 || joined < root->nranks) {
        int fd;
        zc_status_t st = zc_socket_accept(root->listen_fd, deadline, &fd);
        if (st == ZC_ERR_TIMEOUT && root->nranks == 0) {
            zc_log_warn("bootstrap root: no rank arrived within %d ms; giving up", root->idle_ms);
            return st;
        }
        if (st == ZC_ERR_TIMEOUT) {
            char reason[112];
            snprintf(reason, sizeof(reason), "only %d of %d ranks arrived within %d ms", joined,
                     root->nranks, root->timeout_ms);
            zc_bs_root_fail(root, ZC_ERR_TIMEOUT, reason);
            return st;
        }
        if (st != ZC_OK)
            return st;
        int had_nranks = root->nranks != 0;
        if (zc_bs_root_hello(root, fd, deadline) != ZC_OK)
            return ZC_ERR_MISMATCH;
        if (!had_nranks && root->nranks != 0)
            deadline = zc_now_ms() + root->timeout_ms;
        joined = 0;
        for (int r = 0; r < root->nranks; r++)
            joined += root->fds[r] >= 0;
    }
    return ZC_OK;
}

/* One allgather round; ZC_INPROGRESS while more rounds may follow, ZC_OK
 * when every rank said goodbye. */
static zc_status_t zc_bs_root_round(zc_bs_root_t *root)
{
    /* Between two rounds a rank sets up its transport, which under load
     * can take longer than a short timeout: a root that gave up after the
     * timeout alone left that rank "lost the connection" (test_p2p case
     * 14 in a CI run).  The ranks wait a grace longer still, for the
     * root's verdict (zc_bs_tcp_allgather). */
    int64_t deadline = zc_now_ms() + root->timeout_ms + ZC_BS_GRACE_MS;
    zc_bs_round_t hdr;
    uint64_t len = 0;
    int byes = 0;
    char reason[112];
    char *table;

    for (int r = 0; r < root->nranks; r++) {
        zc_status_t st = zc_socket_recv_all(root->fds[r], &hdr, sizeof(hdr), deadline);
        if (st != ZC_OK || hdr.magic != ZC_BS_MAGIC) {
            snprintf(reason, sizeof(reason), "rank %d %s during bootstrap", r,
                     st == ZC_ERR_TIMEOUT ? "did not answer in time" : "failed or left");
            close(root->fds[r]);
            root->fds[r] = -1;
            zc_bs_root_fail(root, st == ZC_ERR_TIMEOUT ? ZC_ERR_TIMEOUT : ZC_ERR_PEER_FAILED,
                            reason);
            return ZC_ERR_PEER_FAILED;
        }
        if (hdr.len == ZC_BS_BYE) {
            byes++;
        } else if (r - byes == 0) {
            len = hdr.len;
        } else if (hdr.len != len) {
            snprintf(reason, sizeof(reason), "rank %d sent %llu bytes, others %llu", r,
                     (unsigned long long)hdr.len, (unsigned long long)len);
            zc_bs_root_fail(root, ZC_ERR_MISMATCH, reason);
            return ZC_ERR_MISMATCH;
        }
    }
    if (byes == root->nranks)
        return ZC_OK;
    if (byes != 0) {
        zc_bs_root_fail(root, ZC_ERR_MISMATCH, "some ranks left while others gathered");
        return ZC_ERR_MISMATCH;
    }
    if (len > ZC_BOOTSTRAP_MAX_BLOB) {
        zc_bs_root_fail(root, ZC_ERR_INVALID_ARG, "a bootstrap blob is over the size limit");
        return ZC_ERR_INVALID_ARG;
    }
    table = malloc(len * (size_t)root->nranks + 1);
    if (!table) {
        zc_bs_root_fail(root, ZC_ERR_NO_MEMORY, "the bootstrap root is out of memory");
        return ZC_ERR_NO_MEMORY;
    }
    for (int r = 0; r < root->nranks; r++) {
        if (zc_socket_recv_all(root->fds[r], table + len * (size_t)r, len, deadline) != ZC_OK) {
            snprintf(reason, sizeof(reason), "rank %d failed while sending its blob", r);
            free(table);
            zc_bs_root_fail(root, ZC_ERR_PEER_FAILED, reason);
            return ZC_ERR_PEER_FAILED;
        }
    }
    for (int r = root->nranks - 1; r >= 0; r--) {  /* rank 0 last, as above */
        zc_bs_reply_t reply = {.status = ZC_OK, .nranks = root->nranks, .len = len};
        if (zc_socket_send_all(root->fds[r], &reply, sizeof(reply), deadline) != ZC_OK ||
            zc_socket_send_all(root->fds[r], table, len * (size_t)root->nranks, deadline) != ZC_OK)
            zc_log_warn("bootstrap root: could not send the table to rank %d", r);
    }
    free(table);
    return ZC_INPROGRESS;
}

static void *zc_bs_root_main(void *arg)
{
    zc_bs_root_t *root = arg;
    zc_status_t st = zc_bs_root_register(root);

    /* Everybody is in: nobody else may join this communicator. */
    close(root->listen_fd);
    if (st == ZC_OK)
        while ((st = zc_bs_root_round(root)) == ZC_INPROGRESS)
            ;
    for (int r = 0; r < root->nranks; r++)
        if (root->fds[r] >= 0)
            close(root->fds[r]);
    free(root->fds);
    free(root);
    return NULL;
}

void zc_bootstrap_id_init(zc_bootstrap_id_t *id, const uint8_t secret[ZC_BOOTSTRAP_SECRET_BYTES],
                          const zc_sockaddr_t *root)
{
    memset(id, 0, sizeof(*id));
    id->magic = ZC_BS_MAGIC;
    id->version = ZC_BS_VERSION;
    memcpy(id->secret, secret, ZC_BOOTSTRAP_SECRET_BYTES);
    id->root = *root;
}

zc_status_t zc_bootstrap_root_start(zc_bootstrap_id_t *id, int idle_ms)
{
    zc_bs_root_t *root = calloc(1, sizeof(*root));
    pthread_attr_t attr;
    pthread_t thread;
    zc_status_t st;

    if (!root)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the bootstrap root");
    ZC_CHECK_GOTO(zc_socket_listen(&id->root, &root->listen_fd), st, err_free);
    root->id = *id;
    root->idle_ms = idle_ms;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&thread, &attr, zc_bs_root_main, root);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        st = zc_error(ZC_ERR_SYSTEM, "cannot start the bootstrap root thread: %s", strerror(rc));
        goto err_close;
    }
    return ZC_OK;

err_close:
    close(root->listen_fd);
err_free:
    free(root);
    return st;
}

static zc_status_t zc_bs_tcp_allgather(zc_bootstrap_t *base, const void *send, void *recv,
                                       size_t len)
{
    zc_bs_tcp_t *bs = (zc_bs_tcp_t *)base;
    zc_bs_round_t hdr = {.magic = ZC_BS_MAGIC, .len = len};
    zc_bs_reply_t reply;
    int64_t deadline = zc_now_ms() + bs->timeout_ms + 2 * ZC_BS_GRACE_MS;
    zc_status_t st;

    st = zc_socket_send_all(bs->fd, &hdr, sizeof(hdr), deadline);
    if (st == ZC_OK)
        st = zc_socket_send_all(bs->fd, send, len, deadline);
    /* Even when sending failed, the root may have left its verdict (a
     * refusal, a mismatch) before closing: read it. */
    zc_status_t recv_st = zc_socket_recv_all(bs->fd, &reply, sizeof(reply), deadline);
    if (st == ZC_OK || (recv_st == ZC_OK && reply.status != ZC_OK))
        st = recv_st;
    if (st == ZC_ERR_TIMEOUT)
        return zc_error(st, "bootstrap root %s did not answer within %d ms", bs->root,
                        bs->timeout_ms);
    if (st != ZC_OK)
        return zc_error(st == ZC_ERR_PEER_FAILED ? st : ZC_ERR_SYSTEM,
                        "lost the connection to bootstrap root %s", bs->root);
    reply.reason[sizeof(reply.reason) - 1] = '\0';
    if (reply.status != ZC_OK)
        return zc_error((zc_status_t)reply.status, "bootstrap root %s: %s", bs->root,
                        reply.reason);
    if (reply.len != len || reply.nranks != base->size)
        return zc_error(ZC_ERR_INTERNAL, "bootstrap root %s sent a table of the wrong size",
                        bs->root);
    st = zc_socket_recv_all(bs->fd, recv, len * (size_t)base->size, deadline);
    if (st != ZC_OK)
        return zc_error(st == ZC_ERR_TIMEOUT ? st : ZC_ERR_PEER_FAILED,
                        "lost the connection to bootstrap root %s", bs->root);
    return ZC_OK;
}

static void zc_bs_tcp_destroy(zc_bootstrap_t *base)
{
    zc_bs_tcp_t *bs = (zc_bs_tcp_t *)base;
    zc_bs_round_t bye = {.magic = ZC_BS_MAGIC, .len = ZC_BS_BYE};

    (void)zc_socket_send_all(bs->fd, &bye, sizeof(bye), zc_now_ms() + ZC_BS_HELLO_MS);
    close(bs->fd);
    free(bs);
}

zc_status_t zc_bootstrap_tcp_create(const zc_bootstrap_id_t *id, int nranks, int rank,
                                    int timeout_ms, zc_bootstrap_t **bs_out)
{
    zc_bs_hello_t hello = {.magic = ZC_BS_MAGIC, .version = ZC_BS_VERSION, .nranks = nranks,
                           .rank = rank, .timeout_ms = timeout_ms};
    zc_bs_tcp_t *bs;
    zc_status_t st;

    if (id->magic != ZC_BS_MAGIC || id->version != ZC_BS_VERSION)
        return zc_error(ZC_ERR_INVALID_ARG, "id: not a libzcomm unique id (or another version)");
    bs = calloc(1, sizeof(*bs));
    if (!bs)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the bootstrap");

    bs->base.size = nranks;
    bs->base.allgather = zc_bs_tcp_allgather;
    bs->base.destroy = zc_bs_tcp_destroy;
    bs->timeout_ms = timeout_ms;
    zc_socket_str(&id->root, bs->root, sizeof(bs->root));
    memcpy(hello.secret, id->secret, sizeof(hello.secret));
    ZC_CHECK_GOTO(zc_socket_connect(&id->root, zc_now_ms() + timeout_ms, &bs->fd), st, err_free);
    st = zc_socket_send_all(bs->fd, &hello, sizeof(hello), zc_now_ms() + timeout_ms);
    if (st != ZC_OK) {
        st = zc_error(st, "cannot greet bootstrap root %s", bs->root);
        goto err_close;
    }
    *bs_out = &bs->base;
    return ZC_OK;

err_close:
    close(bs->fd);
err_free:
    free(bs);
    return st;
}
