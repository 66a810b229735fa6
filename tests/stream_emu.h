/* A host emulation of the device the stream-ordered ring attention engine
 * runs on (src/coll/ring_attn/stream_engine.h), so that its schedule is tested where
 * there is no GPU:
 *   - every operation runs at once, in the order the engine enqueues it,
 *     on the CPU kernels; groups of sends and receives and the routed
 *     calls (zc_routed_sendrecv_stream) run on the communicator's
 *     emulated device backend (device_emu.h, installed by the caller),
 *     with NCCL's matching rules, so that a mismatch or a deadlock in the
 *     schedule fails or times out here as it would there;
 *   - a race detector follows the streams with vector clocks (events
 *     recorded and waited on) and reports the first pair of operations of
 *     different streams that touch the same bytes, at least one writing,
 *     without an event ordering them; allocation and free count as writes
 *     of the compute stream, the caller's tensors as written before the
 *     call.  The emulated device is the communicator's for as long as the
 *     engine keeps its state (stream_keep.c): the communication stream
 *     and the memory outlive a call, and a call may run on any of
 *     EMU_CALLER_STREAMS caller streams, so that a call that reuses the
 *     memory of an earlier call on another stream without waiting for it
 *     is a race here.  (An access is forgotten once every stream used so
 *     far is ordered after it: a stream's first call is checked against
 *     what was not yet ordered when it started.);
 *   - it counts the transfers that may run while a kernel computes
 *     (neither ordered before nor after it), which ring modes need and the
 *     LLaMA CP gather does not have;
 *   - every forward and backward block goes through the cuDNN backend's
 *     decision (zc_cudnn_attn_route): as issued, for the route the stats
 *     count when ZC_ATTN_BACKEND=cudnn (as the CUDA device would, cuDNN
 *     built in and its engines taking every graph), and in bfloat16 and
 *     float16 at head dims 64 and 128, whose fallbacks the report counts;
 *   - it counts what the engine asks of it across calls (emu_counts), and
 *     can make any one operation fail (emu_fail_at). */
#ifndef ZC_TEST_STREAM_EMU_H
#define ZC_TEST_STREAM_EMU_H

#include <stdint.h>

#include "zcomm.h"

#define EMU_CALLER_STREAMS 3

typedef struct {
    int kernels;       /* attention kernel calls */
    int transfers;     /* groups and routed calls */
    int overlapped;    /* transfers concurrent with at least one kernel */
    int events;        /* events recorded */
    int what_if_native;  /* bf16/fp16 d64/d128 versions of blocks that would run natively */
    char what_if_why[320]; /* the first of them, and why */
} emu_report_t;

/* Everything of the emulated devices of this process so far. */
typedef struct {
    int64_t ops;       /* device operations asked for */
    int allocs, frees; /* device memory */
    int live;          /* allocations not freed */
    int leaked;        /* not freed because an abandoned receive may still land in them */
    int devices, releases; /* emulated devices made, and released by the engine */
} emu_counts_t;

extern emu_counts_t emu_counts;

/* The n-th device operation from now fails (1: the next) with
 * ZC_ERR_TRANSPORT, as a CUDA or NCCL call failing at enqueue would,
 * without doing anything; 0: none. */
void emu_fail_at(int64_t n);

/* zc_ring_attn_fwd/bwd (host tensors, float32 or bfloat16) through the
 * stream engine on the emulated device (comm's device backend must be
 * device_emu_install's), its compute stream the caller's stream `stream`
 * (0..EMU_CALLER_STREAMS-1; emu_ring_attn: 0).  A race, an event waited on
 * before its record, a transfer left unordered before the end of the call
 * or more than one allocation kept after it is ZC_ERR_INTERNAL with the
 * details in zc_get_last_error(). */
zc_status_t emu_ring_attn(zc_comm_h comm, zc_plan_h plan, const zc_ring_attn_args_t *args,
                          int backward, emu_report_t *report);
zc_status_t emu_ring_attn_on(zc_comm_h comm, zc_plan_h plan, const zc_ring_attn_args_t *args,
                             int backward, int stream, emu_report_t *report);

#endif
