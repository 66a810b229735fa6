/* Blocking TCP helpers with deadlines, for the bootstrap only. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "src/common/clock.h"
#include "src/common/socket.h"
#include "src/common/status.h"

static socklen_t zc_socklen(const zc_sockaddr_t *addr)
{
    return addr->sa.sa_family == AF_INET6 ? sizeof(addr->in6) : sizeof(addr->in);
}

const char *zc_socket_str(const zc_sockaddr_t *addr, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port;

    if (addr->sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &addr->in6.sin6_addr, host, sizeof(host));
        port = ntohs(addr->in6.sin6_port);
    } else {
        inet_ntop(AF_INET, &addr->in.sin_addr, host, sizeof(host));
        port = ntohs(addr->in.sin_port);
    }
    snprintf(buf, len, "%s:%d", host, port);
    return buf;
}

zc_status_t zc_socket_ifaddr(const char *ifname, zc_sockaddr_t *addr)
{
    struct ifaddrs *ifas, *ifa, *loopback = NULL, *found = NULL;

    if (getifaddrs(&ifas) != 0)
        return zc_error(ZC_ERR_SYSTEM, "getifaddrs failed: %s", strerror(errno));
    for (ifa = ifas; ifa && !found; ifa = ifa->ifa_next) {
        if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP))
            continue;
        if (ifa->ifa_addr->sa_family != AF_INET && ifa->ifa_addr->sa_family != AF_INET6)
            continue;
        if (ifname) {
            if (strcmp(ifa->ifa_name, ifname) == 0)
                found = ifa;
        } else if (ifa->ifa_flags & IFF_LOOPBACK) {
            if (!loopback)
                loopback = ifa;
        } else if (ifa->ifa_addr->sa_family == AF_INET) {
            found = ifa;  /* IPv4 first, as every launcher's MASTER_ADDR is */
        }
    }
    if (!found)
        found = ifname ? NULL : loopback;
    if (!found) {
        freeifaddrs(ifas);
        return zc_error(ZC_ERR_INVALID_ARG, "ZC_SOCKET_IFNAME: no interface %s with an address is up",
                        ifname ? ifname : "(any)");
    }
    memset(addr, 0, sizeof(*addr));
    memcpy(addr, found->ifa_addr,
           found->ifa_addr->sa_family == AF_INET6 ? sizeof(addr->in6) : sizeof(addr->in));
    freeifaddrs(ifas);
    return ZC_OK;
}

zc_status_t zc_socket_resolve(const char *host, int port, zc_sockaddr_t *addr)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    int rc;

    if (port <= 0 || port > 65535)
        return zc_error(ZC_ERR_INVALID_ARG, "port %d is out of range 1..65535", port);
    rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0)
        return zc_error(ZC_ERR_INVALID_ARG, "cannot resolve %s: %s", host, gai_strerror(rc));
    memset(addr, 0, sizeof(*addr));
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (addr->sa.sa_family == AF_INET6)
        addr->in6.sin6_port = htons((uint16_t)port);
    else
        addr->in.sin_port = htons((uint16_t)port);
    return ZC_OK;
}

zc_status_t zc_socket_listen(zc_sockaddr_t *addr, int *fd_out)
{
    socklen_t len = zc_socklen(addr);
    int one = 1;
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return zc_error(ZC_ERR_SYSTEM, "socket failed: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, &addr->sa, len) != 0 || listen(fd, 1024) != 0 ||
        getsockname(fd, &addr->sa, &len) != 0) {
        char str[64];
        zc_status_t st = zc_error(ZC_ERR_SYSTEM, "cannot listen on %s: %s",
                                  zc_socket_str(addr, str, sizeof(str)), strerror(errno));
        close(fd);
        return st;
    }
    *fd_out = fd;
    return ZC_OK;
}

static zc_status_t zc_socket_poll(int fd, short events, int64_t deadline)
{
    struct pollfd pfd = {.fd = fd, .events = events};

    for (;;) {
        int rc = poll(&pfd, 1, zc_ms_left(deadline));
        if (rc > 0)
            return ZC_OK;
        if (rc == 0)
            return ZC_ERR_TIMEOUT;
        if (errno != EINTR)
            return zc_error(ZC_ERR_SYSTEM, "poll failed: %s", strerror(errno));
    }
}

zc_status_t zc_socket_connect(const zc_sockaddr_t *addr, int64_t deadline, int *fd_out)
{
    char str[64];
    int one = 1;

    zc_socket_str(addr, str, sizeof(str));
    for (;;) {
        int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return zc_error(ZC_ERR_SYSTEM, "socket failed: %s", strerror(errno));
        if (connect(fd, &addr->sa, zc_socklen(addr)) == 0) {
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            *fd_out = fd;
            return ZC_OK;
        }
        int err = errno;
        close(fd);
        /* Refused or unreachable: the root may not listen yet; retry. */
        if (err != ECONNREFUSED && err != ETIMEDOUT && err != EHOSTUNREACH &&
            err != ENETUNREACH && err != EINTR && err != ECONNRESET)
            return zc_error(ZC_ERR_SYSTEM, "connect to %s failed: %s", str, strerror(err));
        if (zc_ms_left(deadline) == 0)
            return zc_error(ZC_ERR_TIMEOUT, "nobody listens at %s (last error: %s)", str,
                            strerror(err));
        usleep(20000);
    }
}

zc_status_t zc_socket_accept(int listen_fd, int64_t deadline, int *fd_out)
{
    int one = 1;

    for (;;) {
        zc_status_t st = zc_socket_poll(listen_fd, POLLIN, deadline);
        if (st != ZC_OK)
            return st;
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            *fd_out = fd;
            return ZC_OK;
        }
        if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
            return zc_error(ZC_ERR_SYSTEM, "accept failed: %s", strerror(errno));
    }
}

zc_status_t zc_socket_send_all(int fd, const void *buf, size_t len, int64_t deadline)
{
    const char *p = buf;

    while (len > 0) {
        zc_status_t st = zc_socket_poll(fd, POLLOUT, deadline);
        if (st != ZC_OK)
            return st;
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            if (errno == EPIPE || errno == ECONNRESET)
                return ZC_ERR_PEER_FAILED;
            return zc_error(ZC_ERR_SYSTEM, "send failed: %s", strerror(errno));
        }
        p += n;
        len -= (size_t)n;
    }
    return ZC_OK;
}

zc_status_t zc_socket_recv_all(int fd, void *buf, size_t len, int64_t deadline)
{
    char *p = buf;

    while (len > 0) {
        zc_status_t st = zc_socket_poll(fd, POLLIN, deadline);
        if (st != ZC_OK)
            return st;
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n == 0)
            return ZC_ERR_PEER_FAILED;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            if (errno == ECONNRESET)
                return ZC_ERR_PEER_FAILED;
            return zc_error(ZC_ERR_SYSTEM, "recv failed: %s", strerror(errno));
        }
        p += n;
        len -= (size_t)n;
    }
    return ZC_OK;
}
