#!/usr/bin/env python3
"""The tables of BENCHMARKS.md from the logs of tools/bench/run_all.sh.

  tables.py DIR > DIR/results.md

DIR holds run_all.sh's `machine` file and one SECTION.log per section
(train: also the zc_train_perf JSON files).  Prints a header with the date,
the commit and the machine, then, per section present, its table with the
load average at the section's start and end, in BENCHMARKS.md's layout.
Ratios are the tools' own, to the baseline each measured in the same run."""
import glob
import json
import os
import re
import statistics
import sys

# lscpu's family and model -> AMD's name for the core (AMD's processor
# programming references: family 19h models 00h-0Fh Zen 3, 10h-1Fh and
# 60h-7Fh Zen 4, 1Ah Zen 5).
ZEN = [(25, range(0x00, 0x10), "Zen 3"), (25, range(0x20, 0x60), "Zen 3"),
       (25, range(0x10, 0x20), "Zen 4"), (25, range(0x60, 0x80), "Zen 4"),
       (25, range(0xa0, 0xb0), "Zen 4"),
       (26, range(0x00, 0x100), "Zen 5")]


def zen(family, model):
    for f, models, name in ZEN:
        if family == f and model in models:
            return name
    return "family %d model %d" % (family, model)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def loads(text):
    got = re.findall(r"# load average at (start|end): ([\d.]+) ([\d.]+) ([\d.]+)", text)
    return ", ".join("%s %s" % (w, a) for w, a, _, _ in got)


def perf_rows(text, label=None):
    """nccl-tests rows (size count type time algbw busbw wrong), with the
    mode label zc_routed_perf and zc_alltoallv_mpi_perf put before them."""
    rows = []
    pat = r"^%s\s+(\d+)\s+\d+\s+\S+\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+(\d+)" % (
        re.escape(label) if label else "")
    for m in re.finditer(pat, text, re.M):
        rows.append({"bytes": int(m.group(1)), "us": float(m.group(2)),
                     "gbs": float(m.group(3)), "wrong": int(m.group(4))})
    return rows


def size(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return "%d %s" % (b // n, unit)
    return "%d B" % b


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def sec_topology(text):
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) == 6 and f[0].endswith(".xml"):
            rows.append([f[0], f[1], f[3], f[5]])
    return table(["file", "zc_topo median ms", "lstopo median ms", "ratio"], rows)


def sec_cluster(text):
    alone = re.findall(r"^\s+(mlx5_\d+)\s+\S+\s+([\d.]+) Mbit\s+([\d.]+) Mbit\s+([\d.]+)$",
                       text, re.M)
    together = dict(re.findall(r"^\s+(mlx5_\d+)\s+\S+\s+([\d.]+) Mbit$", text, re.M))
    rows = [[nic, conf, got, ratio, together.get(nic, "-")] for nic, conf, got, ratio in alone]
    agg = re.search(r"aggregate ([\d.]+) Mbit/s = ([\d.]+) x one NIC", text)
    if agg:
        rows.append(["all 4", "", "", "", "%s = **%sx** one NIC" % agg.groups()])
    return table(["NIC", "tbf rate, Mbit/s", "alone", "alone / rate", "all at once"], rows)


def sec_p2p(text):
    rows = []
    for m in re.finditer(r"median ratio at (\d+) bytes: ([\d.]+) \(ucx_perftest (\S+), "
                         r"median ([\d.]+) (\S+)\)", text):
        b, ratio, mode, base, unit = m.groups()
        kind = "bandwidth (tag_bw)" if unit.startswith("MiB") else "latency (tag_lat)"
        rows.append([kind, size(int(b)), "%s %s (%s)" % (base, unit, mode), "**%s**" % ratio])
    return table(["measure", "size", "ucx_perftest median", "libzcomm / ucx_perftest"], rows)


def sec_routed(text):
    direct = {r["bytes"]: r for r in perf_rows(text, "direct")}
    routed = {r["bytes"]: r for r in perf_rows(text, "routed")}
    eq = re.findall(r"measured/equation ([\d.]+)", text)
    rows = []
    for i, b in enumerate(sorted(routed)):
        d, r = direct.get(b), routed[b]
        rows.append([size(b), "%.1f ms" % (d["us"] / 1e3) if d else "-",
                     "%.1f ms" % (r["us"] / 1e3),
                     "**%.2fx**" % (d["us"] / r["us"]) if d else "-",
                     eq[i] if i < len(eq) else "-", d["wrong"] + r["wrong"] if d else r["wrong"]])
    return table(["size", "direct (1 NIC)", "routed (4 NICs)", "speedup", "measured / Eq. (1)",
                  "#wrong"], rows)


def sec_rails(text):
    rows = []
    for op, part in re.findall(r"^# zc_rails_perf: (\w+) .*?\n((?:.*\n)*?)(?=# zc_rails_perf|\|)", text, re.M):
        for line in part.splitlines():
            f = line.split()
            if len(f) == 7 and f[0].isdigit():
                rows.append([op, size(int(f[0])), "%s / %s" % (f[3], f[5]), "**%sx**" % f[6]])
    lines = table(["call", "size", "by rate / equal shares, Mbit/s", "rate / equal"], rows)
    faults = [line for line in text.splitlines() if line.startswith("|")]
    return lines + [""] + faults


def verbatim(text):
    """A tool's own table, as it printed it."""
    keep = [line for line in text.splitlines()
            if line.strip() and not line.startswith("# load average") and
            not line.startswith("# status")]
    return ["```"] + keep + ["```"]


def sec_alltoallv(text):
    zc = perf_rows(text, "zc")
    mpi = perf_rows(text, "mpi")
    rows = [[size(z["bytes"]), "%.1f" % z["us"], "%.1f" % m["us"], "**%.2f**" % (m["us"] / z["us"]),
             z["wrong"] + m["wrong"]] for z, m in zip(zc, mpi)]
    return table(["size per rank", "zc us", "MPI us", "MPI / zc", "#wrong"], rows)


def sec_attn(text):
    zc, th = [], []
    cur = None
    for line in text.splitlines():
        m = re.match(r"# round \d+ (\S+)", line)
        if m:
            cur = zc if m.group(1) == "zc_attn_perf" else th
            continue
        f = line.split()
        if cur is not None and len(f) >= 11 and f[0].isdigit():
            cur.append((float(f[8]), float(f[10])))  # fwd, bwd GFLOP/s
    rows = []
    for i, name in ((0, "forward"), (1, "backward")):
        a, b = [r[i] for r in zc], [r[i] for r in th]
        if a and b:
            rows.append([name, "%.1f" % median(a), "%.1f" % median(b),
                         "**%.1fx**" % (median(a) / median(b))])
    return table(["(1, 8, 4096, 128) fp32 causal", "zc_attn GFLOP/s (median)",
                  "torch 1.13 GFLOP/s", "ratio"], rows)


def sec_ring(text):
    rows = []
    for part in re.split(r"^# ranks per node ", text, flags=re.M)[1:]:
        r = part.split()[0]
        per = {}
        for m in re.finditer(r"^\s+(\w+)\s+\d+\s+\d+\s+(\w+)\s.*\s([\d.]+)$", part, re.M):
            per.setdefault(m.group(2), []).append("%s %s" % (m.group(1), m.group(3)))
        avg = re.search(r"Avg speedup over te_cp: (.*)", part)
        wrong = re.search(r"Out of bounds values : (\d+)", part)
        for mode in ("llama_cp", "routing", "zeppelin"):
            mean = re.search(mode + r" ([\d.]+)x", avg.group(1)) if avg else None
            rows.append([r, mode, ", ".join(x.split()[1] for x in per.get(mode, [])),
                         "**%sx**" % mean.group(1) if mean else "-",
                         wrong.group(1) if wrong else "-"])
    return table(["ranks per node", "mode", "over TE CP: arxiv, github, prolong64k", "mean",
                  "#wrong"], rows)


def sec_train(text, out):
    rows, cal = [], []
    for path in sorted(glob.glob(os.path.join(out, "train-*.json"))):
        name = os.path.basename(path)[len("train-"):-len(".json")]
        run = json.load(open(path))
        start = re.search(r"# run train-%s.*?\n# load average ([\d.]+)" % re.escape(name), text,
                          re.S)
        by = {}
        for row in run["rows"]:
            by.setdefault(row["method"], []).append(row)
        for method in [m for m in run["config"]["methods"] if m != "te_cp"]:
            got = by.get(method, [])
            rows.append([name, run["config"]["ffn"], "%s-%.1f" % (
                start.group(1) if start else "?", run["loadavg"][0]), method,
                         ", ".join("%.2f" % r["vs_te"] for r in got),
                         "**%.2fx**" % run["avg_speedup"].get(method, float("nan")),
                         sum(r["wrong"] for r in got)])
        for ds, rec in run.get("calibration", {}).items():
            a = rec.get("achieved", {})
            cal.append([name, ds, ", ".join("%.2f" % (k / 1e3) for k in rec.get("kbits", []))] + [
                "%.3g (%.3g)" % (a[k], rec["paper"][k]) if k in a else "-"
                for k in ("flop_per_byte", "attn_per_linear", "allreduce_per_linear")])
    out_lines = table(["run", "FFN", "load, start-end", "method",
                       "over TE CP: arxiv, github, prolong64k", "mean", "#wrong"], rows)
    out_lines += [""] + table(["run", "dataset", "NIC Mbit/s", "attention FLOP per NIC byte "
                               "(paper)", "TE CP attention / linear (paper)",
                               "all-reduce / linear (paper)"], cal)
    return out_lines


def sec_planner(text):
    out = [line for line in text.splitlines() if line.startswith("|")]
    times = {}
    for part in re.split(r"^# planning time: ", text, flags=re.M)[1:]:
        key = tuple(part.split()[1::2][:2])  # dataset, capacity
        for m in re.finditer(r"^\s+(\d+)\s+\d+\s+\d+\s+([\d.]+)", part, re.M):
            times.setdefault(key, {})[int(m.group(1))] = m.group(2)
    if times:
        gpus = sorted({g for t in times.values() for g in t})
        out += [""] + table(["dataset", "capacity %"] + [str(g) for g in gpus],
                            [[d, c] + [t.get(g, "-") for g in gpus]
                             for (d, c), t in sorted(times.items())])
    return out


def sec_model(text):
    """zc_plan --compare against the paper's figures: model / paper."""
    def speedups(label):
        got = {}
        for part in re.split(r"^# %s " % label, text, flags=re.M)[1:]:
            head = part.split("\n", 1)[0].split()
            key = (int(head[1]), head[3])  # gpus, dataset
            for m in re.finditer(r"^(\S+)\s+(?:[\d.]+\s+){7}([\d.]+)x", part, re.M):
                got.setdefault(key, {}).setdefault(m.group(1), []).append(float(m.group(2)))
        return got

    layer = {}
    for fig in ("fig11a", "fig11c"):
        if "# %s\n" % fig not in text:
            continue
        part = re.split(r"^# (?:fig|7b|3b)", text.split("# %s\n" % fig, 1)[1], flags=re.M)[0]
        for m in re.finditer(r"^(\S+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$",
                             part, re.M):
            layer[(fig, m.group(1))] = [float(m.group(i)) for i in (2, 4, 5, 6)]
    seven, three = speedups("7b"), speedups("3b")
    zep7 = [statistics.mean(v["zeppelin"]) for v in seven.values() if "zeppelin" in v]
    route3 = [statistics.mean(v["te-cp+routing"]) for v in three.values()
              if "te-cp+routing" in v]
    # (quantity, the paper's figure, the model's value or None)
    checks = [
        ("TE CP forward round, 3B, 16 GPUs, one 64K sequence (Fig. 11a), ms", 2.18,
         ("fig11a", "te-cp", 1)),
        ("TE CP backward round (same), ms", 4.41, ("fig11a", "te-cp", 2)),
        ("routed hop, inter-node step (Fig. 11b), ms", 0.411, ("fig11a", "te-cp+routing", 3)),
        ("routed forward round (Fig. 11b; the one calibration), ms", 1.3,
         ("fig11a", "te-cp+routing", 1)),
        ("TE CP attention per layer, 2 x 32K (Fig. 11c), ms", 105.44, ("fig11c", "te-cp", 0)),
        ("Zeppelin attention per layer (same), ms", 21.50, ("fig11c", "zeppelin", 0)),
        ("7B, 16-64 GPUs, 3 datasets: Zeppelin over TE CP, mean", 2.80,
         statistics.mean(zep7) if zep7 else None),
        ("same, the largest", 6.60, max(zep7) if zep7 else None),
        ("3B, 32 GPUs: routing alone over TE CP, mean of 3 datasets", 1.6,
         statistics.mean(route3) if route3 else None)]
    rows = []
    for what, paper, got in checks:
        if isinstance(got, tuple):
            v = layer.get(got[:2])
            got = v[got[2]] if v else None
        if got is not None:
            rows.append([what, "%g" % paper, "%.3g" % got, "**%.2f**" % (got / paper)])
    return table(["figure", "paper", "model", "model / paper"], rows)


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[0]
    machine = {}
    for line in open(os.path.join(out, "machine")):
        k, _, v = line.strip().partition(" ")
        machine[k] = v
    m = re.search(r"family (\d+) model (\d+)", machine.get("cpu", ""))
    core = zen(int(m.group(1)), int(m.group(2))) if m else "?"
    print("# libzcomm benchmarks, %s, commit %s" % (machine.get("date"), machine.get("commit")))
    print()
    print("Machine: %s (%s), %s; %s; UCX %s, %s, torch %s, gcc %s." % (
        machine.get("cpu"), core, machine.get("memory"), machine.get("os"), machine.get("ucx"),
        machine.get("mpi"), machine.get("torch"), machine.get("gcc")))
    for name in ("topology", "cluster", "p2p", "routed", "rails", "alltoallv", "packed", "attn",
                 "ring", "masks", "train", "planner", "model"):
        path = os.path.join(out, name + ".log")
        if not os.path.exists(path):
            continue
        text = open(path).read()
        print()
        print("## %s (load average: %s)" % (name, loads(text)))
        print()
        status = re.search(r"# status (\d+), (\d+) s", text)
        if status and status.group(1) != "0":
            print("**The section failed (status %s); see %s.**" % (status.group(1), path))
            print()
        fn = globals().get("sec_" + name, verbatim)
        lines = fn(text, out) if name == "train" else fn(text)
        print("\n".join(lines))
        if status:
            print()
            print("(%s s)" % status.group(2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
