/* A multi-rank case's communicator on the emulated device (device_emu.h):
 * ranks of the first half on node a, the rest on node b (config.node_id),
 * the emulated backend installed before any stream call.  For the rank
 * functions of mp.h: 0, or 1 with the failure reported. */
#ifndef ZC_TESTS_EMU_COMM_H
#define ZC_TESTS_EMU_COMM_H

#include "device_emu.h"
#include "mp.h"

static inline int emu_comm_init(int rank, int nranks, int timeout_ms, zc_comm_h *comm)
{
    zc_config_t config = ZC_CONFIG_INITIALIZER;

    config.timeout_ms = timeout_ms;
    config.node_id = rank < nranks / 2 ? "emu-node-a" : "emu-node-b";
    MP_CHECK(mp_comm_init(rank, nranks, &config, comm) == ZC_OK, "init");
    MP_CHECK(device_emu_install(*comm) == ZC_OK, "install: %s", zc_get_last_error());
    return 0;
}

#endif
