/* FNV-1a, 64 bits: the hash of names (node identity, job identity) and of
 * the ring attention's agreement fingerprints. */
#ifndef ZC_HASH_H
#define ZC_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ZC_FNV1A_INIT 0xcbf29ce484222325ULL

/* `len` bytes of `data` folded into `hash`. */
static inline uint64_t zc_fnv1a(uint64_t hash, const void *data, size_t len)
{
    for (size_t i = 0; i < len; i++)
        hash = (hash ^ ((const uint8_t *)data)[i]) * 0x100000001b3ULL;
    return hash;
}

/* A string (NULL: nothing) folded into `hash`. */
static inline uint64_t zc_fnv1a_str(uint64_t hash, const char *str)
{
    return str ? zc_fnv1a(hash, str, strlen(str)) : hash;
}

#endif
