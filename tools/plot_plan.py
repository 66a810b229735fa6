#!/usr/bin/env python3
"""Draw one batch's plan from `zc_plan --json`: devices x tokens, each piece
coloured by its zone (local, intra-node, inter-node), labelled with its
sequence, and outlined in the colour of its ring.

  zc_plan --nodes 2 --gpus-per-node 4 --capacity 1024 --rails 4 --json \\
      885 2548 1036 302 1392 2029 | plot_plan.py OUT.png [TITLE]

Needs matplotlib (Debian: python3-matplotlib)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.patches as mpatches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

ZONE_COLORS = {"local": "#9ecae1", "intra": "#fdae6b", "inter": "#e6550d"}


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    plan = json.load(sys.stdin)
    c = plan["cluster"]
    nranks = c["nodes"] * c["gpus_per_node"]
    fig, ax = plt.subplots(figsize=(10, 0.45 * nranks + 1.6), dpi=100)
    fill = [0] * nranks
    ring_colors = {}
    for p in plan["pieces"]:
        r, n = p["rank"], p["end"] - p["begin"]
        ring = p.get("ring", -1)
        edge = "k"
        if p["zone"] != "local" and ring is not None and ring >= 0:
            edge = ring_colors.setdefault(ring, "C%d" % (len(ring_colors) % 10))
        ax.add_patch(mpatches.Rectangle((fill[r], r - 0.38), n, 0.76,
                                        facecolor=ZONE_COLORS[p["zone"]], edgecolor=edge,
                                        linewidth=2.2 if edge != "k" else 0.6))
        if n >= 0.04 * c["capacity"]:
            ax.text(fill[r] + n / 2, r, "s%d" % p["seq"], ha="center", va="center", fontsize=7)
        fill[r] += n
    for node in range(1, c["nodes"]):
        ax.axhline(node * c["gpus_per_node"] - 0.5, color="k", linewidth=1.2, linestyle="--")
    ax.axvline(c["capacity"], color="0.3", linewidth=0.8, linestyle=":")
    ax.set_xlim(0, max(max(fill), c["capacity"]) * 1.02)
    ax.set_ylim(nranks - 0.5, -0.5)
    ax.set_yticks(range(nranks))
    ax.set_yticklabels(["node %d gpu %d" % (r // c["gpus_per_node"], r % c["gpus_per_node"])
                        for r in range(nranks)], fontsize=7)
    ax.set_xlabel("tokens in the device's attention buffer (dotted: capacity %d)"
                  % c["capacity"])
    handles = [mpatches.Patch(color=v, label=k) for k, v in ZONE_COLORS.items()]
    handles += [mpatches.Patch(facecolor="white", edgecolor=col, linewidth=2,
                               label="ring %d (%s, seq %d)" % (
                                   rg["id"], rg["zone"], rg["seq"]))
                for rg in plan.get("rings", []) for ring, col in ring_colors.items()
                if rg["id"] == ring]
    ax.legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(argv[1] if len(argv) > 1 else
                 "%d sequences on %d nodes x %d devices" % (len(plan["sequences"]), c["nodes"],
                                                            c["gpus_per_node"]), fontsize=9)
    fig.tight_layout()
    fig.savefig(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
