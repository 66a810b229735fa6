/* Logging: one line per message, "host:pid rank R LEVEL file:line msg". */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "src/common/env.h"
#include "src/common/log.h"

static pthread_once_t zc_log_once = PTHREAD_ONCE_INIT;
static zc_log_level_t zc_log_current = ZC_LOG_WARN;
static FILE *zc_log_stream;
static char zc_log_host[64];
static int zc_log_rank = -1;

static const char *const zc_log_names[] = {"NONE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

static void zc_log_init(void)
{
    const char *level = zc_env_get("ZC_LOG_LEVEL");
    const char *path = zc_env_get("ZC_LOG_FILE");
    int saved_errno = errno;

    for (int i = ZC_LOG_NONE; i <= ZC_LOG_TRACE; i++)
        if (level && strcasecmp(level, zc_log_names[i]) == 0)
            zc_log_current = (zc_log_level_t)i;

    zc_log_stream = stderr;
    gethostname(zc_log_host, sizeof(zc_log_host) - 1);
    if (path && *path) {
        /* %h and %p let every rank of a job write its own file. */
        char name[4096];
        size_t n = 0;
        for (const char *p = path; *p && n < sizeof(name) - 32; p++) {
            if (p[0] == '%' && p[1] == 'p') {
                n += (size_t)snprintf(name + n, sizeof(name) - n, "%d", (int)getpid());
                p++;
            } else if (p[0] == '%' && p[1] == 'h') {
                n += (size_t)snprintf(name + n, sizeof(name) - n, "%s", zc_log_host);
                p++;
            } else {
                name[n++] = *p;
            }
        }
        name[n] = '\0';
        FILE *f = fopen(name, "a");
        if (f) {
            setvbuf(f, NULL, _IOLBF, 0);
            zc_log_stream = f;
        } else {
            fprintf(stderr, "libzcomm: cannot open ZC_LOG_FILE %s: %s; logging to stderr\n", name,
                    strerror(errno));
        }
    }
    errno = saved_errno;
}

zc_log_level_t zc_log_level(void)
{
    pthread_once(&zc_log_once, zc_log_init);
    return zc_log_current;
}

void zc_log_set_rank(int rank)
{
    zc_log_rank = rank;
}

void zc_log_at(zc_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    int saved_errno = errno;

    if (level > zc_log_level())
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    fprintf(zc_log_stream, "%s:%d rank %d zcomm %s %s:%d %s\n", zc_log_host, (int)getpid(),
            zc_log_rank, zc_log_names[level], base ? base + 1 : file, line, msg);
    errno = saved_errno;
}
