/* Bootstrap: allgathers of small per-rank blobs before the transport is up.
 *
 * Two ways to do it: over TCP through a root (zc_get_unique_id or the rank 0
 * of zc_comm_init_env), or through the caller's out-of-band allgather. */
#ifndef ZC_BOOTSTRAP_H
#define ZC_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "src/common/socket.h"
#include "zcomm.h"

#define ZC_BOOTSTRAP_SECRET_BYTES 16
/* Largest blob one rank may contribute to one allgather. */
#define ZC_BOOTSTRAP_MAX_BLOB (64 * 1024)
/* Most ranks a TCP root will serve. */
#define ZC_BOOTSTRAP_MAX_RANKS (1 << 20)

/* What zc_unique_id_t carries (fits in ZC_UNIQUE_ID_BYTES). */
typedef struct {
    uint32_t magic;
    uint32_t version;
    uint8_t secret[ZC_BOOTSTRAP_SECRET_BYTES];
    zc_sockaddr_t root;
} zc_bootstrap_id_t;

typedef struct zc_bootstrap zc_bootstrap_t;

/* Fill an id for a root at `root` with `secret`. */
void zc_bootstrap_id_init(zc_bootstrap_id_t *id, const uint8_t secret[ZC_BOOTSTRAP_SECRET_BYTES],
                          const zc_sockaddr_t *root);

/* Start a root that listens on `id->root` (port 0: any; a wildcard address:
 * every interface) in a thread of this process; on return `id` holds the
 * bound address.  The root serves one
 * communicator and exits when its ranks are done or time out, or when no
 * rank at all arrives within `idle_ms` (an id nobody used). */
zc_status_t zc_bootstrap_root_start(zc_bootstrap_id_t *id, int idle_ms);

/* Join the root of `id` as `rank` of `nranks`. */
zc_status_t zc_bootstrap_tcp_create(const zc_bootstrap_id_t *id, int nranks, int rank,
                                    int timeout_ms, zc_bootstrap_t **bs);
/* Use the caller's allgather. */
zc_status_t zc_bootstrap_oob_create(const zc_oob_t *oob, zc_bootstrap_t **bs);

/* Every rank contributes `len` bytes (the same len everywhere, at most
 * ZC_BOOTSTRAP_MAX_BLOB); `recv` gets nranks * len bytes in rank order. */
zc_status_t zc_bootstrap_allgather(zc_bootstrap_t *bs, const void *send, void *recv, size_t len);
void zc_bootstrap_destroy(zc_bootstrap_t *bs);

/* Fill `secret` from the system's random source. */
zc_status_t zc_bootstrap_random_secret(uint8_t secret[ZC_BOOTSTRAP_SECRET_BYTES]);

#endif
