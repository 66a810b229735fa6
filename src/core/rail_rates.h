/* The rate of each rail and the weights that transfers between nodes are
 * sliced by (ZC_RAIL_STRIPE).
 *
 * Rates start as configured: each node's ZC_RAIL_RATES, else its verbs
 * ports' rates, the lowest over the nodes (a rail is as fast as its slowest
 * end), the same on every rank from the communicator's creation.  Then
 * every rank measures the rate each rail delivers to it (the bytes its
 * peers acknowledged over the time it had bytes in flight there,
 * src/core/wire.c); a rail whose measured rate strays from the others'
 * (relative to the configured rates) by more than a quarter takes its
 * measured share, the others keep their configured ones.
 *
 * Who decides: no rank alone.  Every agreement (agree.h: a routed call's,
 * a ring attention call's) carries each rank's view of the rails, merged
 * the same way on every rank: for each rail the youngest measurement any
 * rank holds, and the rails any rank holds out.  The weights of that call
 * are a function of the merged view alone, so every rank that takes part
 * slices alike; rates pinned with zc_comm_set_rail_rates replace it and are
 * part of the agreement's fingerprint, so ranks pinned differently fail the
 * call with ZC_ERR_MISMATCH before any data moves. */
#ifndef ZC_RAIL_RATES_H
#define ZC_RAIL_RATES_H

#include <stdint.h>

#include "src/core/rails.h"

/* A measurement this old is no longer reported. */
#define ZC_RAIL_RATE_FRESH_MS 10000

/* One rank's view of the rails, as agreements carry and merge it. */
typedef struct {
    uint32_t kbps[ZC_MAX_RAILS];    /* a rate measured lately, kbit/s; 0: none */
    uint16_t age_ds[ZC_MAX_RAILS];  /* its age in deciseconds; UINT16_MAX: none */
    uint32_t out;                   /* bit k: some rank holds rail k out */
    uint32_t reserved;
} zc_rail_view_t;

/* This rank's measurement of one rail. */
typedef struct {
    int inflight;            /* chunks on the rail not yet acknowledged */
    int64_t busy_since_ns;   /* when inflight last left 0 */
    int64_t busy_ns;         /* busy time toward the next sample */
    uint64_t bytes;          /* bytes acknowledged toward it */
    uint32_t kbps;           /* the last sample; 0: none yet */
    int64_t sample_ms;       /* when it was taken */
    int64_t last_ack_ns;     /* the last acknowledgement (or the busy start) */
    int64_t gap_ns;          /* between the last two acknowledgements */
} zc_rail_meter_t;

typedef struct {
    uint32_t configured[ZC_MAX_RAILS]; /* kbit/s, the same on every rank */
    uint32_t pinned[ZC_MAX_RAILS];     /* zc_comm_set_rail_rates; all 0: none */
    uint32_t equal;                    /* their mean: each rail's weight in equal shares */
    uint32_t used[ZC_MAX_RAILS];       /* weights of the last call */
    zc_rail_meter_t meter[ZC_MAX_RAILS];
} zc_rail_rates_t;

struct zc_comm;

/* This node's configured rate of each of its rails, Gbit/s (0: unknown):
 * ZC_RAIL_RATES (one per rail), else each NIC's port rate; a bad
 * ZC_RAIL_RATES is ZC_ERR_INVALID_ARG naming it. */
zc_status_t zc_rail_rates_local(const zc_rails_t *rails, double *gbps);
/* comm->rates.configured from every rank's local rates (`all`, nranks x
 * ZC_MAX_RAILS, kbit/s): per rail the lowest known; unknown ones the mean
 * of the known (100 Gbit/s when none is known).  `used` starts there. */
void zc_rail_rates_combine(struct zc_comm *comm, const uint32_t *all);

/* This rank's view, for an agreement. */
void zc_rail_view_mine(struct zc_comm *comm, zc_rail_view_t *view);
/* Merge `from` into `into` (idempotent and commutative). */
void zc_rail_view_merge(zc_rail_view_t *into, const zc_rail_view_t *from);
/* The weights of a call that agreed on `view` into w[nrails] (also
 * comm->rates.used): pinned, or by ZC_RAIL_STRIPE equal or measured else
 * configured rates, 0 for a rail out; all 0 (every rail out) become equal. */
void zc_rail_weights(struct zc_comm *comm, const zc_rail_view_t *view, uint32_t *w);
/* The weights of a call without an agreement (every rank the same
 * without talking): pinned, else configured, or equal. */
void zc_rail_weights_unagreed(struct zc_comm *comm, uint32_t *w);
/* What ranks must share for their weights to agree: ZC_RAIL_STRIPE and the
 * pinned rates, hashed into `h`. */
uint64_t zc_rail_fingerprint(struct zc_comm *comm, uint64_t h);
/* Whether the weights follow the rates (neither pinned nor
 * ZC_RAIL_STRIPE=equal): only then may a transfer move chunks off a rail
 * that lags (wire.c); otherwise every rail keeps its share. */
int zc_rail_adaptive(const struct zc_comm *comm);
/* Whether `rail` delivers this rank's chunks of `chunk` bytes far slower
 * than `kbps`: it owes acknowledgements and the last came (or the last
 * two came apart) longer ago than four chunks' time at that rate plus
 * 100 ms.  A rail shared with other ranks' traffic seems slower, so the
 * margin is wide. */
int zc_rail_lagging(struct zc_comm *comm, int rail, uint32_t kbps, size_t chunk);
/* The rate this rank expects of each rail now, kbit/s, into rate[nrails]:
 * pinned, equal, else configured, or its own fresh measurement where that
 * strays from the others' by more than the deadband (as the weights of a
 * call, from this rank's view alone), for choices that are this rank's
 * alone (the rail of each chunk of a striped block). */
void zc_rail_rates_now(struct zc_comm *comm, uint32_t *rate);

/* Metering, on `meters` (a communicator's rates.meter; NULL: the wire is
 * not metered, and nothing is recorded): a chunk went out on `rail`; one
 * was acknowledged there (its bytes); one will not be (sent again
 * elsewhere). */
void zc_rail_meter_sent(zc_rail_meter_t *meters, int rail);
void zc_rail_meter_acked(zc_rail_meter_t *meters, int rail, size_t bytes);
void zc_rail_meter_lost(zc_rail_meter_t *meters, int rail);

#endif
