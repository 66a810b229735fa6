/* Status detail and the checking macros every source file uses. */
#ifndef ZC_STATUS_H
#define ZC_STATUS_H

#include "zcomm.h"
#include "src/common/log.h"

/* Record the detail of an error for zc_get_last_error() and log it at debug
 * level with the caller's file:line; returns `status` so callers can write
 * `return zc_error(ZC_ERR_INVALID_ARG, "count: ...")`. */
#define zc_error(status, ...) zc_error_at(__FILE__, __LINE__, (status), __VA_ARGS__)
zc_status_t zc_error_at(const char *file, int line, zc_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Clear the calling thread's detail string (start of a public call). */
void zc_error_clear(void);

/* Propagate a failure, leaving a file:line breadcrumb at trace level. */
#define ZC_CHECK(call)                                                        \
    do {                                                                      \
        zc_status_t zc_check_st_ = (call);                                    \
        if (zc_check_st_ < 0) {                                               \
            zc_log_trace("%s failed: %s", #call, zc_strerror(zc_check_st_));  \
            return zc_check_st_;                                              \
        }                                                                     \
    } while (0)

#define ZC_CHECK_GOTO(call, st, label)                                        \
    do {                                                                      \
        (st) = (call);                                                        \
        if ((st) < 0) {                                                       \
            zc_log_trace("%s failed: %s", #call, zc_strerror(st));            \
            goto label;                                                       \
        }                                                                     \
    } while (0)

/* Argument checks: each names the argument in the detail. */
#define ZC_ARG_CHECK(cond, ...)                                               \
    do {                                                                      \
        if (!(cond))                                                          \
            return zc_error(ZC_ERR_INVALID_ARG, __VA_ARGS__);                 \
    } while (0)

#endif
