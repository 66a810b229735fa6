/* libFuzzer target: the lengths parser of zc_plan(1) and the planner on
 * what it accepts.  Any input must either be refused with a message or give
 * lengths from which zc_plan_create() builds a plan that zc_plan_check()
 * accepts, or a clear ZC_ERR_CAPACITY; never a crash, a leak or a hang.
 * Build and run with tests/fuzz/run.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/zc_plan_dataset.h"
#include "zcomm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), err[256];
    int64_t *lengths = NULL, total = 0;
    size_t count = 0;

    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    if (zc_lengths_parse(text, &lengths, &count, err, sizeof(err)) != 0) {
        if (err[0] == '\0')
            abort();  /* a refusal must say why */
        free(text);
        return 0;
    }
    for (size_t i = 0; i < count && total < (int64_t)1 << 40; i++)
        total += lengths[i] > ((int64_t)1 << 40) ? ((int64_t)1 << 40) : lengths[i];
    /* Small clusters, capacity with a little headroom or none at all. */
    if (count > 0 && count <= 4096 && total < ((int64_t)1 << 32)) {
        zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
        int nodes = 1 + (int)(size % 3), gpus = 1 + (int)((size / 3) % 4);
        int64_t capacity = total / (nodes * gpus) + 1 + (int64_t)(size % 7);
        zc_plan_h plan;
        zc_status_t st = zc_plan_create(nodes, gpus, capacity, lengths, count, &opts, &plan);
        if (st == ZC_OK) {
            if (zc_plan_check(plan) != ZC_OK)
                abort();
            zc_plan_destroy(plan);
        } else if (st != ZC_ERR_CAPACITY) {
            abort();
        }
    }
    free(lengths);
    free(text);
    return 0;
}
