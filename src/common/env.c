/* Integer values of the variables of env_table.c, with errors that name
 * the variable. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "src/common/env.h"
#include "src/common/status.h"

int zc_parse_int64(const char *str, int64_t *value)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(str, &end, 10);
    if (errno || end == str || *end != '\0')
        return -1;
    *value = v;
    return 0;
}

zc_status_t zc_env_get_int(const char *name, int64_t *value)
{
    const char *str = zc_env_get(name);

    if (!str)
        return zc_error(ZC_ERR_INVALID_ARG, "%s is not set and has no default", name);
    if (zc_parse_int64(str, value) != 0)
        return zc_error(ZC_ERR_INVALID_ARG, "%s=%s is not an integer", name, str);
    return ZC_OK;
}
