/* CUDA helpers callable from C (built only with --with-cuda). */
#ifndef ZC_CUDA_DEVICE_H
#define ZC_CUDA_DEVICE_H

#include <stddef.h>

#ifdef __CUDACC__
#define ZC_HOST_DEVICE __host__ __device__
#else
#define ZC_HOST_DEVICE
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices the runtime sees: 0 with no device or no NVIDIA
 * driver installed; -1 when CUDA cannot count them for another reason (a
 * driver too old for the runtime, a driver/library mismatch), and then
 * `why` (len bytes) says which. */
int zc_cuda_device_probe(char *why, size_t len);
/* Non-zero if `ptr` is device (or managed) memory. */
int zc_cuda_pointer_is_device(const void *ptr);
/* Fill `n` device bytes with zc_pattern_byte(i, seed) on `stream`. */
int zc_cuda_fill_pattern(void *buf, size_t n, unsigned seed, void *stream);

#ifdef __cplusplus
}
#endif

/* The test pattern, the same on host and device. */
static inline ZC_HOST_DEVICE unsigned char zc_pattern_byte(size_t i, unsigned seed)
{
    unsigned long long x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ ((unsigned long long)seed << 32);
    return (unsigned char)(x >> 56 ^ x >> 13 ^ x);
}

#endif
