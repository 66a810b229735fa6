/* Link rates and their weights (see rate.h). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "src/common/rate.h"

static const struct {
    const char *unit;
    double gbps;   /* Gbit/s per unit */
} zc_rate_units[] = {
    {"bit", 1e-9}, {"kbit", 1e-6}, {"mbit", 1e-3}, {"gbit", 1.0}, {"tbit", 1e3},
    {"bps", 8e-9}, {"kbps", 8e-6}, {"mbps", 8e-3}, {"gbps", 8.0},
};

zc_status_t zc_rate_parse(const char *text, const char *what, double *gbps)
{
    char *end;
    double v;

    errno = 0;
    v = text ? strtod(text, &end) : 0;
    if (!text || end == text || errno || !isfinite(v) || v <= 0)
        return zc_error(ZC_ERR_INVALID_ARG, "%s: \"%s\" is not a positive rate (e.g. 200mbit, "
                        "25gbit, or 100 for Gbit/s)", what, text ? text : "");
    if (*end == '\0') {
        *gbps = v;
        return ZC_OK;
    }
    for (size_t u = 0; u < sizeof(zc_rate_units) / sizeof(zc_rate_units[0]); u++) {
        if (strcasecmp(end, zc_rate_units[u].unit) == 0) {
            *gbps = v * zc_rate_units[u].gbps;
            return ZC_OK;
        }
    }
    return zc_error(ZC_ERR_INVALID_ARG, "%s: \"%s\" has an unknown unit \"%s\" (bit, kbit, mbit, "
                    "gbit, tbit or bps, kbps, mbps, gbps)", what, text, end);
}

zc_status_t zc_rate_list_parse(const char *text, const char *what, double *gbps, int max,
                               int *n)
{
    char buf[512], *save = NULL;
    int count = 0;

    if (!text || !*text || strlen(text) >= sizeof(buf))
        return zc_error(ZC_ERR_INVALID_ARG, "%s: \"%s\" is not a list of rates", what,
                        text ? text : "");
    memcpy(buf, text, strlen(text) + 1);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char entry[64];
        if (count == max)
            return zc_error(ZC_ERR_INVALID_ARG, "%s: more than %d rates in \"%s\"", what, max,
                            text);
        snprintf(entry, sizeof(entry), "%s[%d]", what, count);
        ZC_CHECK(zc_rate_parse(t, entry, &gbps[count]));
        count++;
    }
    if (count == 0)
        return zc_error(ZC_ERR_INVALID_ARG, "%s: \"%s\" is not a list of rates", what, text);
    *n = count;
    return ZC_OK;
}

uint32_t zc_rate_weight(double gbps)
{
    double kbps = gbps * 1e6;

    if (!(gbps > 0))
        return 0;
    if (kbps >= (double)UINT32_MAX)
        return UINT32_MAX;
    return kbps < 1.5 ? 1 : (uint32_t)llround(kbps);
}
