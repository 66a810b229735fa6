/* Link rates: parsing a rate ("200mbit", "25gbit", "12.5gbps", "100": Gbit/s)
 * and the integer weights that rails are sliced by (kbit/s). */
#ifndef ZC_RATE_H
#define ZC_RATE_H

#include <stddef.h>
#include <stdint.h>

#include "src/common/status.h"

/* A rate as Gbit/s (1e9 bit/s, one direction): a positive number with an
 * optional unit bit, kbit, mbit, gbit, tbit (bits per second) or bps, kbps,
 * mbps, gbps (bytes per second), any case, like tc(8); without one,
 * Gbit/s like a verbs port's rate.  ZC_ERR_INVALID_ARG naming `what`. */
zc_status_t zc_rate_parse(const char *text, const char *what, double *gbps);

/* A list of rates separated by commas into gbps[max]: their number in *n.
 * ZC_ERR_INVALID_ARG naming `what` (and the entry) for a bad entry, an
 * empty list or more than `max`. */
zc_status_t zc_rate_list_parse(const char *text, const char *what, double *gbps, int max,
                               int *n);

/* The weight of a rate: kbit/s, rounded, at least 1 for a positive rate
 * and at most UINT32_MAX (4.29 Pbit/s); 0 for none. */
uint32_t zc_rate_weight(double gbps);

#endif
