/* zc_status_t names and the per-thread detail of the last error. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "src/common/status.h"

#define ZC_DETAIL_MAX 512

static __thread char zc_last_error[ZC_DETAIL_MAX];

const char *zc_strerror(zc_status_t status)
{
    switch (status) {
    case ZC_OK:              return "success";
    case ZC_INPROGRESS:      return "operation in progress";
    case ZC_ERR_INVALID_ARG: return "invalid argument";
    case ZC_ERR_NO_MEMORY:   return "out of memory";
    case ZC_ERR_SYSTEM:      return "system call failed";
    case ZC_ERR_TRANSPORT:   return "transport error";
    case ZC_ERR_TIMEOUT:     return "timed out";
    case ZC_ERR_PEER_FAILED: return "peer failed";
    case ZC_ERR_UNSUPPORTED: return "unsupported operation";
    case ZC_ERR_TOPOLOGY:    return "topology error";
    case ZC_ERR_INTERNAL:    return "internal error";
    case ZC_ERR_CAPACITY:    return "capacity exceeded";
    case ZC_ERR_MISMATCH:    return "ranks disagree";
    case ZC_ERR_REFUSED:     return "connection refused";
    }
    return "unknown status";
}

const char *zc_get_last_error(void)
{
    return zc_last_error;
}

void zc_error_clear(void)
{
    zc_last_error[0] = '\0';
}

zc_status_t zc_error_at(const char *file, int line, zc_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(zc_last_error, sizeof(zc_last_error), fmt, ap);
    va_end(ap);
    zc_log_at(ZC_LOG_DEBUG, file, line, "%s: %s", zc_strerror(status), zc_last_error);
    return status;
}
