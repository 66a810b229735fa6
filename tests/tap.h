/* Minimal TAP producer for the test programs (header-only).
 *
 *   tap_plan(n);  ok(cond, "name %d", i);  tap_skip(n, "reason");
 *   return tap_done();   // exit status: 0 when every test passed
 *
 * tap_skip_all("reason") prints "1..0 # SKIP reason" for a whole program. */
#ifndef ZC_TESTS_TAP_H
#define ZC_TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_count_;
static int tap_failed_;
static int tap_planned_ = -1;

static inline void tap_plan(int n)
{
    tap_planned_ = n;
    printf("1..%d\n", n);
    fflush(stdout);
}

__attribute__((format(printf, 2, 3)))
static inline int ok(int cond, const char *fmt, ...)
{
    va_list ap;

    tap_count_++;
    printf("%s %d - ", cond ? "ok" : "not ok", tap_count_);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (!cond)
        tap_failed_++;
    return cond;
}

__attribute__((format(printf, 1, 2)))
static inline void diag(const char *fmt, ...)
{
    va_list ap;

    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static inline void tap_skip(int n, const char *reason)
{
    for (int i = 0; i < n; i++) {
        tap_count_++;
        printf("ok %d # SKIP %s\n", tap_count_, reason);
    }
    fflush(stdout);
}

static inline void tap_skip_all(const char *reason)
{
    printf("1..0 # SKIP %s\n", reason);
    fflush(stdout);
    exit(0);
}

static inline int tap_done(void)
{
    if (tap_planned_ < 0)
        printf("1..%d\n", tap_count_);
    else if (tap_planned_ != tap_count_)
        printf("# planned %d tests but ran %d\n", tap_planned_, tap_count_);
    fflush(stdout);
    return (tap_failed_ || (tap_planned_ >= 0 && tap_planned_ != tap_count_)) ? 1 : 0;
}

#endif
