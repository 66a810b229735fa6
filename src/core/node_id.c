/* Node identity: which ranks share a node.  Like NCCL's host hash, the host
 * name plus the kernel's boot id, so that two containers or two reboots of
 * a host with the same name are not mistaken for each other; ZC_NODE_ID
 * overrides it so one machine can play several nodes. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "src/core/comm.h"
#include "src/common/env.h"
#include "src/common/file.h"
#include "src/common/hash.h"

/* The host name and the kernel's boot id; the boot id alone names the
 * kernel, and so the cores, that ranks in other UTS namespaces (containers,
 * the emulated cluster's nodes) share.  Without a boot id the host stands
 * for the kernel. */
static void zc_host_identity(char *name, size_t len, char *kernel, size_t kernel_len)
{
    char host[256] = "", *boot_id = zc_file_first_line("/proc/sys/kernel/random/boot_id");

    gethostname(host, sizeof(host) - 1);
    snprintf(name, len, "%s:%s", host, boot_id ? boot_id : "");
    snprintf(kernel, kernel_len, "%s", boot_id && boot_id[0] ? boot_id : name);
    free(boot_id);
}

void zc_node_identity(const char *configured, char *name, size_t len, uint64_t *node_hash,
                      uint64_t *host_hash, uint64_t *kernel_hash)
{
    char host[ZC_NODE_NAME_MAX * 2], kernel[ZC_NODE_NAME_MAX * 2];
    const char *node = configured && *configured ? configured : zc_env_get("ZC_NODE_ID");

    zc_host_identity(host, sizeof(host), kernel, sizeof(kernel));
    *host_hash = zc_fnv1a_str(ZC_FNV1A_INIT, host);
    *kernel_hash = zc_fnv1a_str(ZC_FNV1A_INIT, kernel);
    if (node && *node) {
        snprintf(name, len, "%s", node);
        *node_hash = zc_fnv1a_str(ZC_FNV1A_INIT, node);
    } else {
        snprintf(name, len, "%s", host);
        *node_hash = *host_hash;
    }
}
