/* Test data: byte i of what rank `src` sends in case `salt`, different per
 * byte, sender and case, so that misplaced, stale or swapped data shows.
 * Header-only, for the test programs. */
#ifndef ZC_TESTS_PATTERN_H
#define ZC_TESTS_PATTERN_H

#include <stddef.h>
#include <stdint.h>

static inline uint8_t pattern_byte(size_t i, int src, int salt)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)(unsigned)src << 44) ^
                 ((uint64_t)(unsigned)salt << 24);
    return (uint8_t)(x >> 56 ^ x >> 21 ^ x);
}

static inline void pattern_fill(void *buf, size_t n, int src, int salt)
{
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)buf)[i] = pattern_byte(i, src, salt);
}

/* Offset of the first wrong byte, or n. */
static inline size_t pattern_first_wrong(const void *buf, size_t n, int src, int salt)
{
    for (size_t i = 0; i < n; i++)
        if (((const uint8_t *)buf)[i] != pattern_byte(i, src, salt))
            return i;
    return n;
}

#endif
