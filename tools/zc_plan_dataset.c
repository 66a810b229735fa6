/* Length distributions of ArXiv, GitHub and ProLong64k from Table 2 of the
 * Zeppelin paper (also in ../shared/data/length-distributions.tsv): the
 * share of sequences per length bin, bins in units of k = 1024 tokens. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zc_plan_dataset.h"

#define ZC_NBINS 9

static const int64_t zc_bin_edges[ZC_NBINS + 1] = {
    1, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144,
};

static const struct {
    const char *name;
    double share[ZC_NBINS];
} zc_datasets[] = {
    {"arxiv", {0.032, 0.03, 0.08, 0.219, 0.338, 0.224, 0.077, 0, 0}},
    {"github", {0, 0.34, 0.095, 0.104, 0.107, 0.102, 0.088, 0.064, 0.045}},
    {"prolong64k", {0.231, 0.042, 0.021, 0.012, 0.013, 0.008, 0.673, 0, 0}},
};

#define ZC_NDATASETS ((int)(sizeof(zc_datasets) / sizeof(zc_datasets[0])))

uint64_t zc_rng_next(zc_rng_t *rng)
{
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int64_t zc_rng_range(zc_rng_t *rng, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(zc_rng_next(rng) % (uint64_t)(hi - lo));
}

int zc_dataset_find(const char *name)
{
    for (int i = 0; i < ZC_NDATASETS; i++)
        if (strcmp(zc_datasets[i].name, name) == 0)
            return i;
    return -1;
}

const char *zc_dataset_name(int dataset)
{
    return dataset >= 0 && dataset < ZC_NDATASETS ? zc_datasets[dataset].name : NULL;
}

int zc_dataset_count(void)
{
    return ZC_NDATASETS;
}

size_t zc_dataset_sample(int dataset, int64_t total, zc_rng_t *rng, int64_t **lengths)
{
    size_t n = 0, cap = 64;
    int64_t *out = malloc(cap * sizeof(*out)), sum = 0;
    double wsum = 0;

    if (!out)
        return 0;
    for (int b = 0; b < ZC_NBINS; b++)
        wsum += zc_datasets[dataset].share[b];
    while (sum < total) {
        double u = (double)(zc_rng_next(rng) >> 11) / 9007199254740992.0 * wsum;
        int b = 0;
        int64_t len;

        while (b < ZC_NBINS - 1 && (u -= zc_datasets[dataset].share[b]) >= 0)
            b++;
        while (zc_datasets[dataset].share[b] == 0)
            b--; /* rounding landed past the last non-empty bin */
        len = zc_rng_range(rng, zc_bin_edges[b], zc_bin_edges[b + 1]);
        if (len > total - sum)
            len = total - sum;
        if (n == cap) {
            int64_t *p = realloc(out, 2 * cap * sizeof(*p));

            if (!p) {
                free(out);
                return 0;
            }
            out = p;
            cap *= 2;
        }
        out[n++] = len;
        sum += len;
    }
    *lengths = out;
    return n;
}

int zc_lengths_parse(const char *text, int64_t **lengths, size_t *count, char *err,
                     size_t errlen)
{
    size_t n = 0, cap = 16;
    int64_t *out = malloc(cap * sizeof(*out));
    const char *p = text;

    if (!out) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (;;) {
        char *end;
        long long v;

        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        errno = 0;
        v = strtoll(p, &end, 10);
        if (end == p || (*end && !isspace((unsigned char)*end))) {
            snprintf(err, errlen, "length %zu: '%.*s' is not an integer", n + 1,
                     (int)strcspn(p, " \t\r\n"), p);
            goto err;
        }
        if (errno == ERANGE || v < 0) {
            snprintf(err, errlen, "length %zu: %.*s is %s", n + 1, (int)(end - p), p,
                     v < 0 ? "negative" : "out of range");
            goto err;
        }
        if (n == cap) {
            int64_t *q = realloc(out, 2 * cap * sizeof(*q));

            if (!q) {
                snprintf(err, errlen, "out of memory");
                goto err;
            }
            out = q;
            cap *= 2;
        }
        out[n++] = v;
        p = end;
    }
    *lengths = out;
    *count = n;
    return 0;
err:
    free(out);
    return -1;
}
