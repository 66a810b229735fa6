/* Values of the variables of env_table.c: integers as strtoll base 0 reads
 * them, checked against the table's range, and the choice words; every
 * error names the variable and what it accepts. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/env.h"
#include "src/common/status.h"

int zc_parse_int64(const char *str, int64_t *value)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(str, &end, 0);
    if (errno || end == str || *end != '\0')
        return -1;
    *value = v;
    return 0;
}

static const zc_env_spec_t *zc_env_lookup(const char *name)
{
    size_t n;
    const zc_env_spec_t *specs = zc_env_specs(&n);

    for (size_t i = 0; i < n; i++)
        if (strcmp(specs[i].name, name) == 0)
            return &specs[i];
    return NULL;
}

static zc_status_t zc_env_range_error(const zc_env_spec_t *v, const char *what)
{
    return zc_error(ZC_ERR_INVALID_ARG, "%s: out of range, %s takes %" PRId64 " to %" PRId64,
                    what, v->name, v->min, v->max);
}

zc_status_t zc_env_get_int(const char *name, int64_t *value)
{
    const zc_env_spec_t *v = zc_env_lookup(name);
    const char *str = zc_env_get(name);
    int64_t x;

    if (!str)
        return zc_error(ZC_ERR_INVALID_ARG, "%s is not set and has no default", name);
    if (zc_parse_int64(str, &x) != 0)
        return zc_error(ZC_ERR_INVALID_ARG,
                        "%s=%s is not an integer (decimal, 0x hex or 0 octal)", name, str);
    if (v && v->type == ZC_ENV_INT && (x < v->min || x > v->max)) {
        char what[160];
        snprintf(what, sizeof(what), "%s=%s", name, str);
        return zc_env_range_error(v, what);
    }
    *value = x;
    return ZC_OK;
}

zc_status_t zc_env_check(zc_env_id_t id, int64_t value, const char *what)
{
    const zc_env_spec_t *v = zc_env_spec(id);
    int64_t max = v->max;

    if (v->type == ZC_ENV_CHOICE) {
        max = 0;
        for (const char *p = v->choices; *p; p++)
            max += *p == '|';
        if (value < 0 || value > max)
            return zc_error(ZC_ERR_INVALID_ARG, "%s: %" PRId64 " is not one of %s's %" PRId64
                            " choices (%s)", what, value, v->name, max + 1, v->choices);
        return ZC_OK;
    }
    if (value < v->min || value > max)
        return zc_env_range_error(v, what);
    return ZC_OK;
}

const char *zc_env_choice_name(zc_env_id_t id, int64_t index, char *buf, size_t len)
{
    const char *p = zc_env_spec(id)->choices;

    for (int64_t i = 0; i < index && p; i++)
        if ((p = strchr(p, '|')) != NULL)
            p++;
    if (!p || len == 0)
        return "?";
    size_t n = strcspn(p, "|");
    if (n >= len)
        n = len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

/* The index of `word` among the '|'-separated choices, or -1. */
static int64_t zc_env_choice_index(const char *choices, const char *word)
{
    size_t wlen = strlen(word);
    int64_t i = 0;

    for (const char *p = choices; p; i++) {
        size_t n = strcspn(p, "|");
        if (n == wlen && strncmp(p, word, n) == 0)
            return i;
        p = p[n] ? p + n + 1 : NULL;
    }
    return -1;
}

zc_status_t zc_env_parse(zc_env_values_t *out)
{
    for (int id = 0; id < ZC_ENV_NCOMM; id++) {
        const zc_env_spec_t *v = zc_env_spec((zc_env_id_t)id);
        const char *str = zc_env_get(v->name);

        if (v->type == ZC_ENV_CHOICE) {
            int64_t i = str ? zc_env_choice_index(v->choices, str) : -1;
            if (i < 0)
                return zc_error(ZC_ERR_INVALID_ARG, "%s=%s: must be one of %s", v->name,
                                str ? str : "", v->choices);
            out->value[id] = i;
        } else {
            ZC_CHECK(zc_env_get_int(v->name, &out->value[id]));
        }
    }
    return ZC_OK;
}
