/* Blocking TCP helpers with deadlines, for the bootstrap only. */
#ifndef ZC_SOCKET_H
#define ZC_SOCKET_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "zcomm.h"

typedef union {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
} zc_sockaddr_t;

/* Address of interface `ifname` (NULL: the first non-loopback interface that
 * is up, else loopback), port 0. */
zc_status_t zc_socket_ifaddr(const char *ifname, zc_sockaddr_t *addr);
/* Resolve "host" (name or numeric) and port. */
zc_status_t zc_socket_resolve(const char *host, int port, zc_sockaddr_t *addr);
/* Listen on `addr` (port 0: any free port); *addr gets the bound port. */
zc_status_t zc_socket_listen(zc_sockaddr_t *addr, int *fd);
/* Connect, retrying while nobody listens yet, until `deadline` (ms). */
zc_status_t zc_socket_connect(const zc_sockaddr_t *addr, int64_t deadline, int *fd);
/* Accept one connection, waiting until `deadline`; ZC_ERR_TIMEOUT after. */
zc_status_t zc_socket_accept(int listen_fd, int64_t deadline, int *fd);
/* Send or receive exactly `len` bytes before `deadline`.  A closed peer is
 * ZC_ERR_PEER_FAILED. */
zc_status_t zc_socket_send_all(int fd, const void *buf, size_t len, int64_t deadline);
zc_status_t zc_socket_recv_all(int fd, void *buf, size_t len, int64_t deadline);
/* "a.b.c.d:port" for messages. */
const char *zc_socket_str(const zc_sockaddr_t *addr, char *buf, size_t len);

#endif
