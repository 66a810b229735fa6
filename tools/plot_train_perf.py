#!/usr/bin/env python3
"""Plot zc_train_perf's --json output like the paper's Figs. 8 and 10.

  plot_train_perf.py OUT.png RUN.json [RUN.json ...]

One row of panels per run (e.g. 2 and 4 ranks per node): left, the speedup
of every method over TE CP per dataset (Fig. 8's bars); middle, the
ablation stacked as in Fig. 10 (TE CP, + routing, + partitioner and zone
engine, + remap), each segment the step's speedup gained by adding that
component; right, where the step's time goes per method (attention fwd/bwd,
linear, remap, all-reduce, optimizer), stacked.  Needs matplotlib
(Debian: python3-matplotlib)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"te_cp": "TE CP", "llama_cp": "LLaMA CP", "routing": "TE CP + routing",
          "zeppelin_noremap": "Zeppelin w/o remap", "zeppelin": "Zeppelin"}
COLORS = {"te_cp": "0.55", "llama_cp": "C1", "routing": "C2", "zeppelin_noremap": "C9",
          "zeppelin": "C0"}
PARTS = (("attn_fwd", "attention fwd"), ("attn_bwd", "attention bwd"), ("linear", "linear"),
         ("remap", "remap fwd+inv"), ("allreduce", "grad all-reduce"), ("optim", "optimizer"))


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, runs = argv[0], [json.load(open(p)) for p in argv[1:]]
    fig, axes = plt.subplots(len(runs), 3, figsize=(15, 3.8 * len(runs)), dpi=100,
                             squeeze=False)
    for row, run in zip(axes, runs):
        rows = run["rows"]
        datasets = list(dict.fromkeys(r["dataset"] for r in rows))
        methods = list(dict.fromkeys(r["method"] for r in rows))
        by = {(r["dataset"], r["method"]): r for r in rows}
        where = "%d ranks on %d nodes, load %.0f" % (run["ranks"], run["nodes"],
                                                      run["loadavg"][0])
        ax = row[0]
        width = 0.8 / len(methods)
        for i, m in enumerate(methods):
            xs = [d + (i - (len(methods) - 1) / 2) * width for d in range(len(datasets))]
            ys = [by[(ds, m)]["vs_te"] or 0 for ds in datasets]
            ax.bar(xs, ys, width, label=LABELS.get(m, m), color=COLORS.get(m))
            for x, y in zip(xs, ys):
                ax.text(x, y, "%.2f" % y, ha="center", va="bottom", fontsize=6)
        ax.axhline(1, color="k", linewidth=0.5)
        ax.set_xticks(range(len(datasets)))
        ax.set_xticklabels(datasets)
        ax.set_ylabel("step speedup over TE CP")
        ax.set_title("Training step (cf. Fig. 8): " + where, fontsize=9)
        ax.legend(fontsize=7)

        ax = row[1]
        chain = [m for m in ("te_cp", "routing", "zeppelin_noremap", "zeppelin") if m in methods]
        names = {"te_cp": "TE CP", "routing": "+ routing",
                 "zeppelin_noremap": "+ partitioner & engine", "zeppelin": "+ remap"}
        bottoms = [0.0] * len(datasets)
        for m in chain:
            tops = [by[(ds, m)]["vs_te"] or 0 for ds in datasets]
            heights = [t - b for t, b in zip(tops, bottoms)]
            ax.bar(range(len(datasets)), heights, 0.5, bottom=bottoms, label=names[m],
                   color=COLORS.get(m), edgecolor="k", linewidth=0.3)
            for d, (t, h) in enumerate(zip(tops, heights)):
                ax.text(d + 0.27, t, "%.2fx" % t, va="center", fontsize=6)
            bottoms = tops
        ax.set_xticks(range(len(datasets)))
        ax.set_xticklabels(datasets)
        ax.set_ylabel("speedup over TE CP")
        ax.set_title("Ablation (cf. Fig. 10)", fontsize=9)
        ax.legend(fontsize=7)

        ax = row[2]
        labels, x = [], 0
        for ds in datasets:
            for m in methods:
                parts = dict(by[(ds, m)]["parts_ms"])
                parts["remap"] = parts.get("remap_fwd", 0) + parts.get("remap_inv", 0)
                bottom = 0.0
                for j, (k, name) in enumerate(PARTS):
                    v = parts.get(k, 0) / 1e3
                    ax.bar(x, v, 0.8, bottom=bottom, color="C%d" % j,
                           label=name if x == 0 else None)
                    bottom += v
                labels.append("%s\n%s" % (ds[:6], LABELS.get(m, m).replace("Zeppelin", "Zep")
                                          .replace(" + routing", "+R")))
                x += 1
            x += 0.5
        ticks = []
        x = 0
        for ds in datasets:
            for m in methods:
                ticks.append(x)
                x += 1
            x += 0.5
        ax.set_xticks(ticks)
        ax.set_xticklabels(labels, fontsize=5, rotation=90)
        ax.set_ylabel("seconds per step (mean over ranks)")
        ax.set_title("Time split", fontsize=9)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
