/* The modes the ring attention tests run: a zc_ring_attn_mode_t and the
 * plan flags it needs ("routing" is the Zeppelin engine on the TE CP
 * layout, so that its hops are routed without the planner's zones). */
#ifndef ZC_TESTS_RING_ATTN_MODES_H
#define ZC_TESTS_RING_ATTN_MODES_H

#include "zcomm.h"

typedef struct {
    const char *name;
    zc_ring_attn_mode_t mode;
    unsigned plan_flags;
} mode_cfg_t;

enum { MODE_ZEPPELIN, MODE_ROUTING, MODE_TE_CP, MODE_LLAMA_CP, NMODES };

static const mode_cfg_t modes[NMODES] = {
    {"zeppelin", ZC_RING_ATTN_ZEPPELIN, 0},
    {"routing", ZC_RING_ATTN_ZEPPELIN, ZC_PLAN_EVEN_SPLIT},
    {"te_cp", ZC_RING_ATTN_TE_CP, ZC_PLAN_EVEN_SPLIT},
    {"llama_cp", ZC_RING_ATTN_LLAMA_CP, ZC_PLAN_EVEN_SPLIT},
};

#endif
