/* Monotonic milliseconds (and nanoseconds) and deadlines. */
#ifndef ZC_CLOCK_H
#define ZC_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t zc_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t zc_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline double zc_now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Milliseconds left until `deadline`, never negative. */
static inline int zc_ms_left(int64_t deadline)
{
    int64_t left = deadline - zc_now_ms();
    return left < 0 ? 0 : (left > INT32_MAX ? INT32_MAX : (int)left);
}

#endif
