/* An emulated device backend (src/core/device.h) for the tests: the stream calls
 * run at once on host memory, and a group of sends and receives runs over
 * UCX with NCCL's rules, so that the schedules of the stream-ordered
 * collectives are tested where there is no GPU:
 *   - the k-th send from a to b meets b's k-th receive from a (one tag per
 *     sender, which UCX matches in posting order), and a size mismatch is
 *     an error;
 *   - a send completes only once its receive has (the receiver
 *     acknowledges each receive as it lands), so that a group waiting on a
 *     peer's later group hangs here as it would on NCCL: such a deadlock
 *     ends in ZC_ERR_TIMEOUT naming the group instead of passing because
 *     UCX buffered the data;
 *   - a group waiting on a peer that is gone ends in ZC_ERR_PEER_FAILED,
 *     as the NCCL backend's waits do (device_nccl.c). */
#ifndef ZC_TEST_DEVICE_EMU_H
#define ZC_TEST_DEVICE_EMU_H

#include "src/core/device.h"

/* Make the emulated backend comm's device backend (before any stream call
 * on comm); released with comm. */
zc_status_t device_emu_install(zc_comm_h comm);

/* One group of sends and receives of `comm` under the rules above. */
zc_status_t device_emu_group(zc_comm_h comm, const zc_device_op_t *ops, int nops);

#endif
