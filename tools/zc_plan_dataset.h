/* Batches sampled from the paper's length distributions (Table 2), shared
 * by zc_plan(1), the planner tests and the planner benchmarks. */
#ifndef ZC_PLAN_DATASET_H
#define ZC_PLAN_DATASET_H

#include <stddef.h>
#include <stdint.h>

/* Deterministic generator (splitmix64): the same seed, the same batch. */
typedef struct {
    uint64_t state;
} zc_rng_t;

uint64_t zc_rng_next(zc_rng_t *rng);
/* Uniform in [lo, hi). */
int64_t zc_rng_range(zc_rng_t *rng, int64_t lo, int64_t hi);

/* Index of a dataset by name ("arxiv", "github", "prolong64k"), -1 if unknown. */
int zc_dataset_find(const char *name);
const char *zc_dataset_name(int dataset);
int zc_dataset_count(void);
/* Draw lengths (a bin by its weight, then uniformly inside it) until they
 * sum to exactly `total` tokens (the last one is cut).  Returns the number
 * of lengths written (0 on allocation failure); *lengths is malloc'ed. */
size_t zc_dataset_sample(int dataset, int64_t total, zc_rng_t *rng, int64_t **lengths);
/* Parse whitespace-separated non-negative integers.  Returns 0 and sets
 * *lengths (malloc'ed) and *count, or -1 with a message in err. */
int zc_lengths_parse(const char *text, int64_t **lengths, size_t *count, char *err,
                     size_t errlen);

#endif
