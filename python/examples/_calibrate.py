"""zc_train_perf's emulated cluster calibrated to the paper's Cluster A at
run time: the NIC rate that gives this machine's ranks the paper's balance
of attention, linear layers and communication.

A training step on Cluster A is shaped by three ratios (BENCHMARKS.md,
"Training step"): how many attention FLOPs a GPU computes in the time one
NIC moves a byte, how long TE CP's attention takes against the linear
layers, and how long the gradient all-reduce takes against them.  The
first and the last depend on the NIC rate alone once the ranks' compute
rates are known; the second on the NIC rate where TE CP waits on its hops.
The ranks' rates move with whatever else the machine runs, so they are
measured right before each batch, all ranks at once, and the emulated NICs
(tc tbf on each node's veths, tests/cluster/zc_cluster) are set to the
rate that brings the three ratios closest to the paper's.

Why the NICs and not a pacing of libzcomm's own sends: tbf shapes the
wire in the kernel, whatever the sending process is doing, as a NIC does;
a pacing inside the library would run on the same loaded cores it is meant
to be independent of, and would be a test mode in the code under test.

Pure arithmetic here (no torch); zc_train_perf.py measures and applies."""
import json
import math
import os
import subprocess

# ---- the paper's Cluster A and LLaMA 3B (Figs. 10 and 11, section 5) ----
# 8 A800 per node, 4 x 200 Gb/s RoCE NICs per node; the achieved rates and
# the fp32 gradient all-reduce are the cost model's, with its sources
# (tools/zc_plan_clusters/cluster-a.conf).
PAPER_ATTN_FLOPS = 160e12              # FlashAttention-2 on an A800 (assumed)
PAPER_LINEAR_FLOPS = 200e12            # dense GEMMs on an A800 (assumed)
PAPER_NIC_BYTES = 25e9
PAPER_FLOP_PER_BYTE = PAPER_ATTN_FLOPS / PAPER_NIC_BYTES          # 6400
PAPER_ROUND_S = (2.18 + 4.41) * 1e-3   # a TE CP forward + backward ring round, Fig. 11a
PAPER_LAYER_PARAMS = 123.9e6           # 3B: hidden 3200, MHA 32 x 100, FFN 8640
PAPER_TOKENS_PER_GPU = 4096
PAPER_LINEAR_S = 6 * PAPER_LAYER_PARAMS * PAPER_TOKENS_PER_GPU / PAPER_LINEAR_FLOPS  # a layer
PAPER_GRAD_BYTES = 4                   # Megatron-LM all-reduces bf16 models' gradients in fp32
PAPER_NICS_PER_NODE = 4
GPUS_PER_RANK = 4      # 4 ranks stand for the paper's 16 GPUs, 8 for its 32

TBF_GOODPUT = 0.95     # payload share of a tbf rate (headers; zc_cluster --check)
TBF_BURST, TBF_LATENCY = "128kb", "50ms"   # zc_cluster's defaults
WITHIN = 1.5           # the calibration's goal: every ratio within this factor

RATIOS = ("flop_per_byte", "attn_per_linear", "allreduce_per_linear")
LABELS = {"flop_per_byte": "attention FLOP per NIC byte (rates)",
          "attn_per_linear": "TE CP attention time / linear time",
          "allreduce_per_linear": "all-reduce time / linear time"}


def paper_ratios(ranks):
    """The three ratios on Cluster A at the GPU count `ranks` stand for:
    TE CP's ring has one round per other GPU (its hops, 4K tokens of KV
    each, are the same at any ring size), and NCCL's ring all-reduce of
    fp32 gradients sends 2 (G - 1) / G of them out of every node over its
    4 NICs (the cost model's, src/plan/cost.c)."""
    gpus = GPUS_PER_RANK * ranks
    allreduce = (2 * (gpus - 1) / gpus * PAPER_GRAD_BYTES * PAPER_LAYER_PARAMS
                 / (PAPER_NICS_PER_NODE * PAPER_NIC_BYTES))
    return {"flop_per_byte": PAPER_FLOP_PER_BYTE,
            "attn_per_linear": (gpus - 1) * PAPER_ROUND_S / PAPER_LINEAR_S,
            "allreduce_per_linear": allreduce / PAPER_LINEAR_S}


def attn_fwd_flop(length, heads, head_dim):
    """Causal attention forward of one sequence: 4 S^2 D H, halved."""
    return 2.0 * length * length * head_dim * heads


class Step:
    """What a TE CP step of one batch asks of each rank, and the rates the
    ranks were measured at: everything model() needs but the NIC rate."""

    def __init__(self, lengths, ranks, nodes, nics, layers, heads, kv_heads, head_dim,
                 attn_bytes, params, wire_bytes, fwd_flops, bwd_flops, linear_s):
        self.lengths, self.ranks, self.nodes, self.nics = lengths, ranks, nodes, nics
        self.layers = layers
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.attn_bytes, self.params, self.wire_bytes = attn_bytes, params, wire_bytes
        self.fwd_flops, self.bwd_flops, self.linear_s = fwd_flops, bwd_flops, linear_s

    def attn_flops(self):
        """The ranks' attention rate, forward and backward together."""
        f = sum(attn_fwd_flop(n, self.heads, self.head_dim) for n in self.lengths)
        return 3.5 * f / (f / self.fwd_flops + 2.5 * f / self.bwd_flops)


def te_cp_attention_s(step, nic_bytes):
    """TE CP's attention forward + backward on one rank: every sequence a
    ring over all ranks, each step computing one block while the next
    block's KV crosses a node boundary on one NIC (the slowest hop of the
    step); the backward's hops carry dK/dV too (fp32), and come home after
    one more hop."""
    n, wire = step.ranks, nic_bytes * TBF_GOODPUT  # one layer's; model() counts the layers
    kv = 2 * step.kv_heads * step.head_dim
    total = 0.0
    for length in step.lengths:
        f = attn_fwd_flop(length, step.heads, step.head_dim) / n / n
        c_f, c_b = f / step.fwd_flops, 2.5 * f / step.bwd_flops
        tokens = length / n
        m_f = tokens * kv * step.attn_bytes / wire
        m_b = tokens * kv * (step.attn_bytes + 4) / wire
        total += c_f + (n - 1) * max(c_f, m_f)
        total += c_b + (n - 1) * max(c_b, m_b) + tokens * kv * 4 / wire
    return total


def allreduce_s(step, nic_bytes):
    """The hierarchical all-reduce's inter-node part: each node sends
    2 (reduce-scatter, all-gather) x P (nodes - 1) / nodes gradients over
    its NICs; the steps inside a node are shared-memory copies."""
    node_bytes = 2 * step.wire_bytes * step.params * (step.nodes - 1) / step.nodes
    return node_bytes / (step.nics * nic_bytes * TBF_GOODPUT)


def model(step, nic_bytes):
    """The three ratios of `step` at `nic_bytes` per second per NIC."""
    return {"flop_per_byte": step.attn_flops() / nic_bytes,
            "attn_per_linear": step.layers * te_cp_attention_s(step, nic_bytes) / step.linear_s,
            "allreduce_per_linear": allreduce_s(step, nic_bytes) / step.linear_s}


def worst(ratios, paper):
    """The largest factor between a ratio and the paper's."""
    return max(max(ratios[k] / paper[k], paper[k] / ratios[k]) for k in RATIOS)


def choose_rate(step, paper):
    """The NIC rate (bytes/s, whole kbit/s) that brings the three ratios
    closest to the paper's: the smallest worst factor over a grid of
    rates 1% apart, 100 kbit/s to 100 Gbit/s.  Every ratio falls as the
    rate grows, so the best rate balances the ones above the paper's
    against the ones below."""
    best = None
    for i in range(int(math.log(1e6) / math.log(1.01)) + 1):
        kbit = round(100 * 1.01 ** i)
        ratios = model(step, kbit * 125.0)
        w = worst(ratios, paper)
        if best is None or w < best[0]:
            best = (w, kbit)
    return best[1]


def nic_devices(environ=None):
    """The network interfaces of this node's NICs (ZC_NIC_NETDEV, as
    zc_cluster sets it: mlx5_0=zccXXXX-nic0,...), [] when not set."""
    value = (environ if environ is not None else os.environ).get("ZC_NIC_NETDEV", "")
    devices = []
    for entry in value.split(","):
        name, _, dev = entry.strip().partition("=")
        if dev:
            devices.append(dev)
        elif name:
            raise ValueError("ZC_NIC_NETDEV: entry %r is not NIC=INTERFACE" % entry)
    return devices


def tbf_command(device, kbit):
    return ["tc", "qdisc", "change", "dev", device, "root", "tbf", "rate", "%dkbit" % kbit,
            "burst", TBF_BURST, "latency", TBF_LATENCY]


def set_nic_rate(devices, kbit, run=subprocess.run):
    """Set every NIC of this node to `kbit` kbit/s per direction and read
    the rate back: "" when done, else what failed (the node's send side is
    its own veth end; a bridged cluster's switch side keeps its rate, which
    zc_cluster's default 200mbit leaves above any rate chosen here)."""
    for dev in devices:
        for cmd in (tbf_command(dev, kbit), ["tc", "-j", "qdisc", "show", "dev", dev]):
            try:
                r = run(cmd, capture_output=True, text=True)
            except OSError as e:
                return "%s: %s" % (" ".join(cmd), e)
            if r.returncode != 0:
                return "%s: %s" % (" ".join(cmd), (r.stderr or r.stdout).strip() or
                                   "exit %d" % r.returncode)
        try:
            rate = [q["options"]["rate"] for q in json.loads(r.stdout) if q.get("kind") == "tbf"]
        except (ValueError, KeyError, TypeError):
            rate = []
        if rate != [kbit * 125]:
            return "%s: tbf rate %s bytes/s after the change, not %d" % (
                dev, rate or "unknown", kbit * 125)
    return ""


def parse_rate(text):
    """--nic-rate: "auto", "off", or a tc rate (12500kbit, 20mbit, 1gbit)
    as kbit/s."""
    t = text.strip().lower()
    if t in ("auto", "off"):
        return t
    units = (("gbit", 1e6), ("mbit", 1e3), ("kbit", 1.0))
    for unit, scale in units:
        if t.endswith(unit):
            try:
                value = float(t[:-len(unit)])
            except ValueError:
                break
            if value > 0:
                return max(1, round(value * scale))
    raise ValueError("--nic-rate: %r, expected auto, off or a rate such as 20mbit, "
                     "12500kbit or 1gbit" % text)


def table(paper, modeled, achieved=None):
    """The ratio lines: paper, modeled at the chosen rate, achieved in the
    run (TE CP's row) and its factor from the paper's."""
    lines = ["#   %-38s %9s %9s %9s %7s" % ("ratio", "paper", "modeled", "achieved",
                                             "factor")]
    for k in RATIOS:
        got = achieved.get(k) if achieved else None
        factor = max(got / paper[k], paper[k] / got) if got else None
        lines.append("#   %-38s %9.3g %9.3g %9s %7s" % (
            LABELS[k], paper[k], modeled[k], "%.3g" % got if got else "-",
            "%.2fx" % factor if factor else "-"))
    return lines


WIRE = ("flop_per_byte", "allreduce_per_linear")  # the ratios only the NIC rate moves


def correct(kbit, got, paper, over=WIRE):
    """From the ratios `got` that a step measured at `kbit`: the rate that
    centres the ratios named in `over` on the paper's, and the factor by
    which the linear layers' time should grow (< 1: shrink) to bring TE
    CP's attention per linear time to the paper's at that rate.  Every
    ratio is taken to fall as 1 / rate (exact for the first and the last;
    for the second wherever TE CP waits on its hops, as it does at these
    rates).  Over WIRE, the rate balances the two it alone can move and
    the second is left to the linear layers (the FLOP mix: the FFN width,
    fitted once); over all three, with the model fixed, it balances all."""
    err = {k: math.log(got[k] / paper[k]) for k in RATIOS if got.get(k)}
    used = [err[k] for k in over if k in err]
    shift = (max(used) + min(used)) / 2 if used else 0.0
    new = max(1, round(kbit * math.exp(shift)))
    linear = math.exp(err["attn_per_linear"] - shift) if "attn_per_linear" in err else 1.0
    return new, linear
