/* zc_status_t names, the last-error detail, data types, version, env table. */
#include "config.h"

#include <string.h>

#include "src/common/env.h"
#include "src/common/status.h"
#include "tap.h"

int main(void)
{
    static const zc_status_t all[] = {
        ZC_OK, ZC_INPROGRESS, ZC_ERR_INVALID_ARG, ZC_ERR_NO_MEMORY, ZC_ERR_SYSTEM,
        ZC_ERR_TRANSPORT, ZC_ERR_TIMEOUT, ZC_ERR_PEER_FAILED, ZC_ERR_UNSUPPORTED,
        ZC_ERR_TOPOLOGY, ZC_ERR_INTERNAL, ZC_ERR_CAPACITY, ZC_ERR_MISMATCH, ZC_ERR_REFUSED,
    };
    size_t n = sizeof(all) / sizeof(all[0]);
    int distinct = 1;

    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(zc_strerror(all[i]), zc_strerror(all[j])) == 0)
                distinct = 0;
    ok(distinct, "every status has its own name");
    ok(strcmp(zc_strerror((zc_status_t)-999), "unknown status") == 0, "unknown status named so");
    ok(ZC_OK == 0 && ZC_INPROGRESS == 1 && ZC_ERR_INVALID_ARG < 0, "status values as documented");

    ok(strcmp(zc_get_last_error(), "") == 0, "no detail before any error");
    ok(zc_error(ZC_ERR_INVALID_ARG, "count: %d is negative", -3) == ZC_ERR_INVALID_ARG,
       "zc_error returns its status");
    ok(strcmp(zc_get_last_error(), "count: -3 is negative") == 0, "detail is the formatted message");
    zc_error_clear();
    ok(strcmp(zc_get_last_error(), "") == 0, "detail cleared");

    ok(zc_datatype_size(ZC_BYTE) == 1 && zc_datatype_size(ZC_FLOAT32) == 4 &&
       zc_datatype_size(ZC_FLOAT16) == 2 && zc_datatype_size(ZC_BFLOAT16) == 2 &&
       zc_datatype_size(ZC_INT32) == 4 && zc_datatype_size(ZC_INT64) == 8,
       "datatype sizes");
    ok(zc_datatype_size((zc_datatype_t)77) == 0, "unknown datatype has size 0");
    ok(zc_get_version() == ZC_VERSION, "zc_get_version matches the header");

    size_t nvars = 0;
    const zc_env_var_t *vars = zc_env_vars(&nvars);
    int helped = nvars > 0, unique = 1;
    for (size_t i = 0; i < nvars; i++) {
        if (!vars[i].name || !*vars[i].name || !vars[i].help || !*vars[i].help)
            helped = 0;
        for (size_t j = 0; j < i; j++)
            if (strcmp(vars[i].name, vars[j].name) == 0)
                unique = 0;
    }
    ok(helped, "every environment variable has a name and help (%zu)", nvars);
    ok(unique, "every environment variable is listed once");

    int64_t v = 0;
    setenv("ZC_TIMEOUT", "1234", 1);
    ok(zc_env_get_int("ZC_TIMEOUT", &v) == ZC_OK && v == 1234, "integer variable read");
    setenv("ZC_TIMEOUT", "12x", 1);
    ok(zc_env_get_int("ZC_TIMEOUT", &v) == ZC_ERR_INVALID_ARG &&
       strstr(zc_get_last_error(), "ZC_TIMEOUT") != NULL,
       "malformed integer refused, naming the variable");
    unsetenv("ZC_TIMEOUT");
    ok(zc_env_get_int("ZC_TIMEOUT", &v) == ZC_OK && v == 60000, "default from the table");
    return tap_done();
}
