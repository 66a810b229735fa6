/* Logging gated by ZC_LOG_LEVEL, written to ZC_LOG_FILE (default stderr). */
#ifndef ZC_LOG_H
#define ZC_LOG_H

typedef enum {
    ZC_LOG_NONE = 0,
    ZC_LOG_ERROR,
    ZC_LOG_WARN,
    ZC_LOG_INFO,
    ZC_LOG_DEBUG,
    ZC_LOG_TRACE
} zc_log_level_t;

/* The level from ZC_LOG_LEVEL, read once. */
zc_log_level_t zc_log_level(void);
/* Rank shown in every line once a communicator knows it (-1: unknown). */
void zc_log_set_rank(int rank);
void zc_log_at(zc_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define zc_log(level, ...)                                                    \
    do {                                                                      \
        if ((level) <= zc_log_level())                                        \
            zc_log_at((level), __FILE__, __LINE__, __VA_ARGS__);              \
    } while (0)

#define zc_log_error(...) zc_log(ZC_LOG_ERROR, __VA_ARGS__)
#define zc_log_warn(...)  zc_log(ZC_LOG_WARN, __VA_ARGS__)
#define zc_log_info(...)  zc_log(ZC_LOG_INFO, __VA_ARGS__)
#define zc_log_debug(...) zc_log(ZC_LOG_DEBUG, __VA_ARGS__)
#define zc_log_trace(...) zc_log(ZC_LOG_TRACE, __VA_ARGS__)

#endif
