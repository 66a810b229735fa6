/* Cluster description files for the cost model: "key value" lines, '#'
 * starts a comment.  Every key of zc_cluster_t is required once but
 * nic_rates (a list, one rate per NIC, where they differ); the step
 * keys of zc_step_model_t (src/plan/cost.h) are optional, at most once:
 * zc_cluster_load checks and drops them, zc_cluster_load_step keeps them. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/plan/cost.h"
#include "src/plan/plan.h"
#include "src/common/abi.h"
#include "src/common/rate.h"
#include "src/common/status.h"

#define ZC_CL_INT(f)    {#f, offsetof(zc_cluster_t, f), 0}
#define ZC_CL_DOUBLE(f) {#f, offsetof(zc_cluster_t, f), 1}

static const struct {
    const char *key;
    size_t offset;
    int is_double;
} zc_cluster_keys[] = {
    ZC_CL_INT(gpus_per_node), ZC_CL_INT(nics_per_node), ZC_CL_DOUBLE(nic_gbps),
    ZC_CL_DOUBLE(intra_gbytes), ZC_CL_DOUBLE(attn_tflops), ZC_CL_DOUBLE(linear_tflops),
    ZC_CL_INT(layers), ZC_CL_INT(hidden), ZC_CL_INT(heads), ZC_CL_INT(head_dim),
    ZC_CL_INT(kv_heads), ZC_CL_INT(ffn_hidden), ZC_CL_INT(bytes_per_elem),
};

#define ZC_NKEYS (sizeof(zc_cluster_keys) / sizeof(zc_cluster_keys[0]))

#define ZC_ST_INT(f)    {#f, offsetof(zc_step_model_t, f), 0}
#define ZC_ST_DOUBLE(f) {#f, offsetof(zc_step_model_t, f), 1}

/* dkv_bytes and cp_max are the software's, not the cluster's: no keys. */
static const struct {
    const char *key;
    size_t offset;
    int is_double;
} zc_step_keys[] = {
    ZC_ST_INT(vocab), ZC_ST_DOUBLE(hbm_gbytes), ZC_ST_DOUBLE(routed_efficiency),
    ZC_ST_INT(grad_bytes),
};

#define ZC_NSTEP (sizeof(zc_step_keys) / sizeof(zc_step_keys[0]))

/* Parse `val` as the value of `key` into field: a positive number, or a
 * positive int. */
static zc_status_t zc_cluster_value(const char *path, int lineno, const char *key,
                                    const char *val, int is_double, void *field)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(val, &end);
    if (errno || *end || v <= 0 || (!is_double && (v > INT_MAX || v != (int)v)))
        return zc_error(ZC_ERR_INVALID_ARG, "path: %s:%d: %s must be a positive %s, not %s",
                        path, lineno, key, is_double ? "number" : "integer", val);
    if (is_double)
        *(double *)field = v;
    else
        *(int *)field = (int)v;
    return ZC_OK;
}

/* nic_rates: one rate per NIC ("0.2,0.2,0.1,0.05", or with units:
 * 200mbit,...), counted against nics_per_node once the file is read. */
static zc_status_t zc_cluster_nic_rates(const char *path, int lineno, const char *val,
                                        zc_cluster_t *c)
{
    char what[300];
    int n = 0;

    snprintf(what, sizeof(what), "path: %s:%d: nic_rates", path, lineno);
    if (c->nic_rates[0] > 0)
        return zc_error(ZC_ERR_INVALID_ARG, "%s is given twice", what);
    return zc_rate_list_parse(val, what, c->nic_rates, ZC_PLAN_MAX_RAILS, &n);
}

static zc_status_t zc_cluster_line(const char *path, int lineno, char *line, zc_cluster_t *c,
                                   zc_step_model_t *step, unsigned char *seen)
{
    char *key = strtok(line, " \t\r\n"), *val = strtok(NULL, " \t\r\n");

    if (!key)
        return ZC_OK;
    if (!val || strtok(NULL, " \t\r\n"))
        return zc_error(ZC_ERR_INVALID_ARG, "path: %s:%d: expected \"key value\"", path, lineno);
    if (strcmp(key, "name") == 0) {
        snprintf(c->name, sizeof(c->name), "%s", val);
        return ZC_OK;
    }
    if (strcmp(key, "nic_rates") == 0)
        return zc_cluster_nic_rates(path, lineno, val, c);
    for (size_t k = 0; k < ZC_NKEYS + ZC_NSTEP; k++) {
        int mine = k < ZC_NKEYS;
        const char *name = mine ? zc_cluster_keys[k].key : zc_step_keys[k - ZC_NKEYS].key;

        if (strcmp(key, name) != 0)
            continue;
        if (seen[k])
            return zc_error(ZC_ERR_INVALID_ARG, "path: %s:%d: %s is given twice", path, lineno,
                            key);
        seen[k] = 1;
        if (mine)
            return zc_cluster_value(path, lineno, key, val, zc_cluster_keys[k].is_double,
                                    (char *)c + zc_cluster_keys[k].offset);
        return zc_cluster_value(path, lineno, key, val, zc_step_keys[k - ZC_NKEYS].is_double,
                                (char *)step + zc_step_keys[k - ZC_NKEYS].offset);
    }
    return zc_error(ZC_ERR_INVALID_ARG, "path: %s:%d: unknown key %s", path, lineno, key);
}

zc_status_t zc_cluster_load_step(const char *path, zc_cluster_t *cluster, zc_step_model_t *step)
{
    unsigned char seen[ZC_NKEYS + ZC_NSTEP] = {0};
    zc_cluster_t c;
    zc_step_model_t st_local;
    char line[512];
    int lineno = 0;
    zc_status_t st = ZC_OK;
    FILE *f;

    zc_error_clear();
    ZC_ARG_CHECK(path != NULL, "path: NULL");
    ZC_ARG_CHECK(cluster != NULL, "cluster: NULL");
    ZC_ARG_CHECK(step != NULL, "step: NULL");
    ZC_CHECK(zc_abi_out_check(cluster->size, ZC_CLUSTER_SIZE_V1, "cluster",
                              "ZC_CLUSTER_INITIALIZER"));
    f = fopen(path, "r");
    if (!f)
        return zc_error(ZC_ERR_INVALID_ARG, "path: cannot open %s: %m", path);
    memset(&c, 0, sizeof(c));
    c.size = sizeof(c);
    zc_step_defaults(&st_local);
    while (fgets(line, sizeof(line), f)) {
        char *hash = strchr(line, '#');

        lineno++;
        if (hash)
            *hash = '\0';
        ZC_CHECK_GOTO(zc_cluster_line(path, lineno, line, &c, &st_local, seen), st, out);
    }
    for (size_t k = 0; k < ZC_NKEYS; k++)
        if (!seen[k]) {
            st = zc_error(ZC_ERR_INVALID_ARG, "path: %s lacks the key %s", path,
                          zc_cluster_keys[k].key);
            goto out;
        }
    for (int k = 0; c.nic_rates[0] > 0 && k < ZC_PLAN_MAX_RAILS; k++)
        if ((k < c.nics_per_node) != (c.nic_rates[k] > 0)) {
            st = zc_error(ZC_ERR_INVALID_ARG, "path: %s: nic_rates lists %s rates than the %d "
                          "NICs of nics_per_node", path, k < c.nics_per_node ? "fewer" : "more",
                          c.nics_per_node);
            goto out;
        }
    /* an efficiency above 1 would be a routed hop faster than its wire */
    if (st_local.routed_efficiency > 1) {
        st = zc_error(ZC_ERR_INVALID_ARG, "path: %s: routed_efficiency %g is above 1", path,
                      st_local.routed_efficiency);
        goto out;
    }
    zc_abi_write(cluster, &c, sizeof(c));
    *step = st_local;
out:
    fclose(f);
    return st;
}

zc_status_t zc_cluster_load(const char *path, zc_cluster_t *cluster)
{
    zc_step_model_t step;

    return zc_cluster_load_step(path, cluster, &step);
}
