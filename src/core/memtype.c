/* Memory-type checks, so that device pointers never reach host copies and
 * each memory goes to a backend that can move it: host memory to UCX,
 * device memory to NCCL on the stream path, or to UCX for point-to-point
 * when the UCX found at run time moves CUDA memory. */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

#include "src/common/log.h"
#include "src/core/memtype.h"
#include "src/common/status.h"

static pthread_once_t zc_ucx_once = PTHREAD_ONCE_INIT;
static int zc_ucx_cuda;

/* A throwaway UCP context tells which memory types this UCX supports. */
static void zc_ucx_probe(void)
{
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
    ucp_context_attr_t attr = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    ucp_config_t *config;
    ucp_context_h ctx;

    if (ucp_config_read(NULL, NULL, &config) != UCS_OK)
        return;
    if (ucp_init(&params, config, &ctx) == UCS_OK) {
        if (ucp_context_query(ctx, &attr) == UCS_OK)
            zc_ucx_cuda = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
        ucp_cleanup(ctx);
    }
    ucp_config_release(config);
    zc_log_debug("UCX %s CUDA memory", zc_ucx_cuda ? "moves" : "does not move");
}

int zc_ucx_moves_cuda(void)
{
    pthread_once(&zc_ucx_once, zc_ucx_probe);
    return zc_ucx_cuda;
}

zc_status_t zc_memtype_check_host_path(const void *buf, zc_memtype_t memtype, const char *arg)
{
    switch (memtype) {
    case ZC_MEM_HOST:
        return zc_memtype_check_host(buf, arg);
    case ZC_MEM_CUDA:
        ZC_CHECK(zc_memtype_check_device(buf, arg));
        return zc_error(ZC_ERR_UNSUPPORTED,
                        "memtype: ZC_MEM_CUDA buffers take the stream-ordered device path "
                        "(zc_*_stream, NCCL), not this host-path call");
    }
    return zc_error(ZC_ERR_INVALID_ARG, "memtype: %d is not a zc_memtype_t", (int)memtype);
}

zc_status_t zc_memtype_check_p2p(const void *buf, zc_memtype_t memtype, const char *arg)
{
    if (memtype == ZC_MEM_HOST)  /* first: every host message comes through here */
        return zc_memtype_check_host(buf, arg);
    if (memtype == ZC_MEM_CUDA && zc_ucx_moves_cuda()) {
        ZC_CHECK(zc_memtype_check_device(buf, arg));
        return ZC_OK;
    }
    return zc_memtype_check_host_path(buf, memtype, arg);
}

zc_status_t zc_check_disjoint(const void *sendbuf, size_t send_bytes, const char *send_arg,
                              const void *recvbuf, size_t recv_bytes, const char *recv_arg)
{
    uintptr_t s = (uintptr_t)sendbuf, r = (uintptr_t)recvbuf;

    /* Empty ranges share no byte, wherever they point. */
    if (send_bytes == 0 || recv_bytes == 0 || s + send_bytes <= r || r + recv_bytes <= s)
        return ZC_OK;
    return zc_error(ZC_ERR_INVALID_ARG,
                    "%s, %s: the %zu bytes sent and the %zu bytes received overlap (no exchange "
                    "in place: use separate buffers)", send_arg, recv_arg, send_bytes, recv_bytes);
}
