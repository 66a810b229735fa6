/* Host stand-in for <cuda_fp16.h> (see cuda_runtime.h): the half type and
 * its IEEE conversions, round to nearest even, as the device does. */
#ifndef ZC_TESTS_CUDA_EMU_CUDA_FP16_H
#define ZC_TESTS_CUDA_EMU_CUDA_FP16_H

#include <stdint.h>
#include <string.h>

struct __half {
    uint16_t x;
};

/* half -> float is exact: normal, subnormal, inf and NaN (payload kept). */
static inline float __half2float(__half h)
{
    const uint32_t sign = (uint32_t)(h.x & 0x8000u) << 16;
    uint32_t exp = (h.x >> 10) & 0x1fu, man = h.x & 0x3ffu, u;
    float f;

    if (exp == 0x1f) {
        u = sign | 0x7f800000u | man << 13;
    } else if (exp != 0) {
        u = sign | (exp + 112) << 23 | man << 13;
    } else if (man == 0) {
        u = sign;
    } else { /* subnormal: normalize */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400u));
        u = sign | (uint32_t)(112 - e) << 23 | (man & 0x3ffu) << 13;
    }
    memcpy(&f, &u, sizeof f);
    return f;
}

/* float -> half, round to nearest even; overflow is inf, NaN stays a quiet
 * NaN. */
static inline __half __float2half_rn(float f)
{
    uint32_t u, sign, abs;
    __half h;

    memcpy(&u, &f, sizeof u);
    sign = (u >> 16) & 0x8000u;
    abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) {
        h.x = (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    } else if (abs >= 0x477ff000u) { /* rounds to 65536 or more: inf */
        h.x = (uint16_t)(sign | 0x7c00u);
    } else if (abs >= 0x38800000u) { /* normal half */
        uint32_t r = abs - 0x38000000u;    /* rebias 127 -> 15 */
        r += 0xfffu + ((r >> 13) & 1u);    /* round to nearest even */
        h.x = (uint16_t)(sign | (r >> 13));
    } else if (abs > 0x33000000u) {        /* subnormal half (above half of the least) */
        uint32_t man = (abs & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(abs >> 23); /* 14 .. 24 */
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        q += rem > half || (rem == half && (q & 1u));
        h.x = (uint16_t)(sign | q);
    } else { /* 2^-25 or less: rounds to zero (the tie goes to even, 0) */
        h.x = (uint16_t)sign;
    }
    return h;
}

#endif
