/* Rail rates and the weights of a call (see rail_rates.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/common/clock.h"
#include "src/common/env.h"
#include "src/common/hash.h"
#include "src/common/rate.h"
#include "src/core/comm.h"
#include "src/core/rail_rates.h"

/* A sample needs this much busy time and these many bytes behind it; a
 * rank reports the mean of its last two samples, or the newest alone when
 * it is more than twice or less than half the one before. */
#define ZC_RAIL_SAMPLE_NS (300 * 1000000LL)
#define ZC_RAIL_SAMPLE_BYTES (1u << 20)
/* A rail whose measured rate, relative to its configured one, is within
 * this fraction of the rails' median ratio keeps its configured share:
 * measurement noise (a core shared by busy ranks delays acknowledgements)
 * moves no slice; a rail cut to a tenth does. */
#define ZC_RAIL_DEADBAND 0.25

zc_status_t zc_rail_rates_local(const zc_rails_t *rails, double *gbps)
{
    const char *env = zc_env_get("ZC_RAIL_RATES");
    int n = 0;

    for (int k = 0; k < ZC_MAX_RAILS; k++)
        gbps[k] = k < rails->count && rails->rate_gbps[k] > 0 ? rails->rate_gbps[k] : 0;
    if (!env || rails->count == 0)
        return ZC_OK;
    ZC_CHECK(zc_rate_list_parse(env, "ZC_RAIL_RATES", gbps, ZC_MAX_RAILS, &n));
    if (n != rails->count)
        return zc_error(ZC_ERR_INVALID_ARG, "ZC_RAIL_RATES: %d rates for the %d rails of this "
                        "node (one per rail, in rail order)", n, rails->count);
    return ZC_OK;
}

void zc_rail_rates_combine(struct zc_comm *comm, const uint32_t *all)
{
    zc_rail_rates_t *r = &comm->rates;
    uint64_t known_sum = 0;  /* of the lowest known rates */
    int known = 0;

    for (int k = 0; k < comm->nrails; k++) {
        uint32_t low = 0;
        for (int rank = 0; rank < comm->size; rank++) {
            uint32_t v = all[(size_t)rank * ZC_MAX_RAILS + (size_t)k];
            if (v && (!low || v < low))
                low = v;
        }
        r->configured[k] = low;
        known_sum += low;
        known += low != 0;
    }
    r->equal = known ? (uint32_t)(known_sum / (uint64_t)known) : zc_rate_weight(100.0);
    for (int k = 0; k < comm->nrails; k++) {
        if (!r->configured[k])
            r->configured[k] = r->equal;
        r->used[k] = comm->settings.rail_stripe_equal ? r->equal : r->configured[k];
    }
}

void zc_rail_view_mine(struct zc_comm *comm, zc_rail_view_t *view)
{
    int64_t now = zc_now_ms();

    memset(view, 0, sizeof(*view));
    for (int k = 0; k < ZC_MAX_RAILS; k++) {
        const zc_rail_meter_t *m = &comm->rates.meter[k];
        int64_t age = now - m->sample_ms;
        view->age_ds[k] = UINT16_MAX;
        if (k < comm->nrails && m->kbps && age < ZC_RAIL_RATE_FRESH_MS) {
            view->kbps[k] = m->kbps;
            view->age_ds[k] = (uint16_t)(age / 100);
        }
    }
    if (comm->nrails > 0)
        view->out = comm->host_ops->rails_out(comm->host);
}

void zc_rail_view_merge(zc_rail_view_t *into, const zc_rail_view_t *from)
{
    into->out |= from->out;
    for (int k = 0; k < ZC_MAX_RAILS; k++) {
        /* the younger measurement; of two as young, the faster */
        if (from->age_ds[k] < into->age_ds[k] ||
            (from->age_ds[k] == into->age_ds[k] && from->kbps[k] > into->kbps[k])) {
            into->age_ds[k] = from->age_ds[k];
            into->kbps[k] = from->kbps[k];
        }
    }
}

static int zc_rail_pinned(const struct zc_comm *comm)
{
    for (int k = 0; k < comm->nrails; k++)
        if (comm->rates.pinned[k])
            return 1;
    return 0;
}

/* The rate of rail k before outs: pinned, equal, or `measured` (0: none)
 * else configured. */
static uint32_t zc_rail_base(const struct zc_comm *comm, int k, uint32_t measured)
{
    if (zc_rail_pinned(comm))
        return comm->rates.pinned[k];
    if (comm->settings.rail_stripe_equal)
        return comm->rates.equal;
    return measured ? measured : comm->rates.configured[k];
}

static int zc_rail_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The measured rates `kbps` (0: none) as the rates to slice by: each rail's
 * configured rate, times its ratio of measured to configured over the
 * rails' median ratio where that is off by more than the deadband. */
static void zc_rail_deadband(const struct zc_comm *comm, const uint32_t *kbps, uint32_t *rate)
{
    double ratio[ZC_MAX_RAILS], sorted[ZC_MAX_RAILS], median;
    int n = 0;

    for (int k = 0; k < comm->nrails; k++) {
        rate[k] = 0;
        if (kbps && kbps[k])
            sorted[n++] = ratio[k] = (double)kbps[k] / comm->rates.configured[k];
    }
    if (n == 0)
        return;
    qsort(sorted, (size_t)n, sizeof(double), zc_rail_cmp);
    median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    for (int k = 0; k < comm->nrails; k++) {
        double rel = kbps && kbps[k] ? ratio[k] / median : 1.0;
        if (rel < 1 - ZC_RAIL_DEADBAND || rel > 1 + ZC_RAIL_DEADBAND) {
            double v = comm->rates.configured[k] * rel;
            rate[k] = v < 1 ? 1 : (v > UINT32_MAX ? UINT32_MAX : (uint32_t)v);
        }
    }
}

static void zc_rail_weights_out(struct zc_comm *comm, uint32_t out, const uint32_t *kbps,
                                uint32_t *w)
{
    uint32_t measured[ZC_MAX_RAILS];
    int any = 0;

    zc_rail_deadband(comm, kbps, measured);
    for (int k = 0; k < comm->nrails; k++) {
        w[k] = out & (1u << k) ? 0 : zc_rail_base(comm, k, measured[k]);
        any |= w[k] != 0;
    }
    for (int k = 0; !any && k < comm->nrails; k++)
        w[k] = comm->rates.equal;
    memcpy(comm->rates.used, w, sizeof(*w) * (size_t)comm->nrails);
}

void zc_rail_weights(struct zc_comm *comm, const zc_rail_view_t *view, uint32_t *w)
{
    zc_rail_weights_out(comm, view->out, view->kbps, w);
}

void zc_rail_weights_unagreed(struct zc_comm *comm, uint32_t *w)
{
    zc_rail_weights_out(comm, 0, NULL, w);
}

uint64_t zc_rail_fingerprint(struct zc_comm *comm, uint64_t h)
{
    h = zc_fnv1a(h, &comm->settings.rail_stripe_equal, sizeof(comm->settings.rail_stripe_equal));
    return zc_fnv1a(h, comm->rates.pinned, sizeof(comm->rates.pinned));
}

void zc_rail_rates_now(struct zc_comm *comm, uint32_t *rate)
{
    uint32_t fresh[ZC_MAX_RAILS], measured[ZC_MAX_RAILS];
    int64_t now = zc_now_ms();

    for (int k = 0; k < comm->nrails; k++) {
        const zc_rail_meter_t *m = &comm->rates.meter[k];
        fresh[k] = m->kbps && now - m->sample_ms < ZC_RAIL_RATE_FRESH_MS ? m->kbps : 0;
    }
    zc_rail_deadband(comm, fresh, measured);
    for (int k = 0; k < comm->nrails; k++)
        rate[k] = zc_rail_base(comm, k, measured[k]);
}

int zc_rail_adaptive(const struct zc_comm *comm)
{
    return !zc_rail_pinned(comm) && !comm->settings.rail_stripe_equal;
}

int zc_rail_lagging(struct zc_comm *comm, int rail, uint32_t kbps, size_t chunk)
{
    const zc_rail_meter_t *m = &comm->rates.meter[rail];
    int64_t since = zc_now_ns() - m->last_ack_ns, gap = m->gap_ns > since ? m->gap_ns : since;

    if (m->inflight <= 0 || !kbps)
        return 0;
    /* chunk bytes at kbps kbit/s: bytes * 8 / (kbps * 1e3) s */
    return (double)gap > 4 * (double)chunk * 8e6 / (double)kbps + 100e6;
}

/* Busy time up to `now` into the meter. */
static void zc_rail_meter_tick(zc_rail_meter_t *m, int64_t now)
{
    if (m->inflight > 0) {
        m->busy_ns += now - m->busy_since_ns;
        m->busy_since_ns = now;
    }
}

void zc_rail_meter_sent(zc_rail_meter_t *meters, int rail)
{
    zc_rail_meter_t *m;

    if (!meters)
        return;
    m = &meters[rail];
    if (m->inflight++ == 0) {
        m->busy_since_ns = m->last_ack_ns = zc_now_ns();
        m->gap_ns = 0;
    }
}

void zc_rail_meter_acked(zc_rail_meter_t *meters, int rail, size_t bytes)
{
    zc_rail_meter_t *m;
    int64_t now;

    if (!meters)
        return;
    m = &meters[rail];
    now = zc_now_ns();
    zc_rail_meter_tick(m, now);
    m->inflight -= m->inflight > 0;
    m->bytes += bytes;
    m->gap_ns = now - m->last_ack_ns;
    m->last_ack_ns = now;
    if (m->busy_ns >= ZC_RAIL_SAMPLE_NS && m->bytes >= ZC_RAIL_SAMPLE_BYTES) {
        double kbps = (double)m->bytes * 8e6 / (double)m->busy_ns;
        int fresh = m->kbps && now / 1000000 - m->sample_ms < ZC_RAIL_RATE_FRESH_MS;
        /* the mean of the last two, unless the rate moved by more than
         * twice (a NIC cut or restored): then the new one alone */
        if (fresh && kbps < 2.0 * m->kbps && 2.0 * kbps > m->kbps)
            kbps = (kbps + m->kbps) / 2;
        m->kbps = kbps >= (double)UINT32_MAX ? UINT32_MAX : (kbps < 1 ? 1 : (uint32_t)kbps);
        m->sample_ms = now / 1000000;
        m->busy_ns = 0;
        m->bytes = 0;
    }
}

void zc_rail_meter_lost(zc_rail_meter_t *meters, int rail)
{
    zc_rail_meter_t *m;

    if (!meters)
        return;
    m = &meters[rail];
    zc_rail_meter_tick(m, zc_now_ns());
    m->inflight -= m->inflight > 0;
}
