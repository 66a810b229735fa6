/* Minimal TAP producer for the test programs (header-only).
 *
 *   tap_plan(n);  ok(cond, "name %d", i);  tap_skip(n, "reason");
 *   tap_todo(cond, "why it fails today", "name");  // a known failure
 *   return tap_done();   // exit status: 0 when every test passed
 *
 * tap_skip_all("reason") prints "1..0 # SKIP reason" for a whole program.
 *
 * One case by name: ZC_TEST_CASE=TEXT runs only the multi-rank cases
 * (mp.h) whose name contains TEXT or whose number is TEXT; the others
 * print as skipped.  A failing multi-rank case carries each failed rank's
 * detail on its TAP line. */
#ifndef ZC_TESTS_TAP_H
#define ZC_TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count_;
static int tap_failed_;
static int tap_planned_ = -1;

static inline void tap_plan(int n)
{
    tap_planned_ = n;
    printf("1..%d\n", n);
    fflush(stdout);
}

/* Set by mp.h: a multi-rank case posted under ZC_TEST_CASE, run (or
 * skipped) by the ok() that names it; and the failed ranks' details of the
 * last case, printed on its line when it fails. */
static int (*tap_pending_)(void);
static char tap_note_[2048];

/* Non-zero when ZC_TEST_CASE selects the case numbered `n` named `name`. */
static inline int tap_selected(int n, const char *name)
{
    const char *want = getenv("ZC_TEST_CASE");
    char num[16];

    if (!want || !*want)
        return 1;
    snprintf(num, sizeof(num), "%d", n);
    return strcmp(want, num) == 0 || strstr(name, want) != NULL;
}

__attribute__((format(printf, 2, 3)))
static inline int ok(int cond, const char *fmt, ...)
{
    char name[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(name, sizeof(name), fmt, ap);
    va_end(ap);
    tap_count_++;
    if (tap_pending_) {
        int (*run)(void) = tap_pending_;
        tap_pending_ = NULL;
        if (!tap_selected(tap_count_, name)) {
            printf("ok %d - %s # SKIP not selected by ZC_TEST_CASE\n", tap_count_, name);
            fflush(stdout);
            return 1;
        }
        cond = run() == 0;
    }
    printf("%s %d - %s", cond ? "ok" : "not ok", tap_count_, name);
    if (!cond && tap_note_[0])
        printf(" -- %s", tap_note_);
    printf("\n");
    tap_note_[0] = '\0';
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

/* A known failure, said as TAP's TODO: "not ok ... # TODO why" does not
 * fail the program; "ok ... # TODO why" does, as automake's driver counts
 * an unexpected pass (XPASS), so that the TODO is taken out once fixed. */
static inline int tap_todo(int cond, const char *why, const char *name)
{
    tap_count_++;
    printf("%s %d - %s # TODO %s\n", cond ? "ok" : "not ok", tap_count_, name, why);
    fflush(stdout);
    if (cond)
        tap_failed_++;
    return cond;
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
