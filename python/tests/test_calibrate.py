"""zc_train_perf's calibration to the paper's Cluster A
(python/examples/_calibrate.py): the paper's ratios from its figures, the
model's scaling with the NIC rate, the rate it chooses and corrects, the
FFN width that scales the linear layers, and the NIC and rate arguments;
no cluster, no root (tc is a fake here; zc_cluster runs the real one)."""
import math
import os
import sys

import tap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import _calibrate as cal  # noqa: E402


def near(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b))


# The paper's ratios, from its numbers (Fig. 11a's rounds, LLaMA 3B's
# layer, Cluster A's NICs and the cost model's rates), computed here anew.
linear_s = 6 * 123.9e6 * 4096 / 200e12
p16, p32 = cal.paper_ratios(4), cal.paper_ratios(8)
tap.ok(p16["flop_per_byte"] == 160e12 / 25e9 == p32["flop_per_byte"],
       "paper: 6400 attention FLOPs per NIC byte at any size", p16)
tap.ok(near(p16["attn_per_linear"], 15 * 6.59e-3 / linear_s) and
       near(p32["attn_per_linear"], 31 * 6.59e-3 / linear_s),
       "paper: TE CP attention per linear time is 15 (16 GPUs) and 31 (32) of Fig. 11a's "
       "rounds over a layer's linear time", (p16, p32))
tap.ok(near(p16["allreduce_per_linear"], 2 * 15 / 16 * 4 * 123.9e6 / 100e9 / linear_s),
       "paper: the all-reduce is NCCL's ring of fp32 gradients over a node's 4 NICs",
       p16)


def step(**kw):
    args = dict(lengths=[3000, 900, 200, 4092], ranks=4, nodes=2, nics=4, layers=1, heads=4,
                kv_heads=2, head_dim=64, attn_bytes=2, params=1.5e6, wire_bytes=4,
                fwd_flops=8e9, bwd_flops=6e9, linear_s=1.2)
    args.update(kw)
    return cal.Step(**args)


s = step()
a, b = cal.model(s, 2e6), cal.model(s, 4e6)
tap.ok(near(a["flop_per_byte"], 2 * b["flop_per_byte"]) and
       near(a["allreduce_per_linear"], 2 * b["allreduce_per_linear"]),
       "model: attention FLOPs per byte and the all-reduce fall as 1 / rate", (a, b))
tap.ok(a["attn_per_linear"] >= b["attn_per_linear"] > 0,
       "model: TE CP's attention time does not grow with the rate", (a, b))
slow = cal.model(s, 1e3)["attn_per_linear"] * s.linear_s
tap.ok(slow > 100 * cal.model(s, 1e12)["attn_per_linear"] * s.linear_s,
       "model: at a crawling NIC TE CP's attention is its transfers, at a fast one its compute")
f = sum(cal.attn_fwd_flop(n, 4, 64) for n in s.lengths)
fast = cal.model(s, 1e15)["attn_per_linear"] * s.linear_s
tap.ok(near(fast, (f / 8e9 + 2.5 * f / 6e9) / 4, 1e-3),
       "model: with free transfers, TE CP's attention is the rank's share of the FLOPs at its "
       "rates", (fast, (f / 8e9 + 2.5 * f / 6e9) / 4))
tap.ok(near(cal.model(step(layers=3), 2e6)["attn_per_linear"], 3 * a["attn_per_linear"]),
       "model: every layer's attention counts against the linear time of all layers")

paper = cal.paper_ratios(4)
kbit = cal.choose_rate(s, paper)
w = cal.worst(cal.model(s, kbit * 125.0), paper)
tap.ok(all(cal.worst(cal.model(s, k * 125.0), paper) >= w - 1e-12
           for k in (kbit * 0.97, kbit * 1.03, kbit / 2, kbit * 2)),
       "choose_rate: no nearby rate brings the worst ratio closer to the paper's",
       (kbit, w))

got = {k: 2 * v for k, v in paper.items()}
new, lin = cal.correct(1000, got, paper)
tap.ok(new == 2000 and near(lin, 1.0),
       "correct: every ratio 2x the paper's -> twice the rate, the same linear layers",
       (new, lin))
got = dict(paper, attn_per_linear=3 * paper["attn_per_linear"])
new, lin = cal.correct(1000, got, paper)
tap.ok(new == 1000 and near(lin, 3.0),
       "correct: attention per linear time alone 3x -> the same rate, 3x the linear time",
       (new, lin))
got = dict(paper, flop_per_byte=paper["flop_per_byte"] / 2,
           allreduce_per_linear=paper["allreduce_per_linear"] * 2)
new, lin = cal.correct(1000, got, paper)
tap.ok(new == 1000 and near(lin, 1.0),
       "correct: the two wire ratios off in opposite directions -> the rate between them",
       (new, lin))

got = {"flop_per_byte": paper["flop_per_byte"] * 0.75,
       "attn_per_linear": paper["attn_per_linear"] * 0.19,
       "allreduce_per_linear": paper["allreduce_per_linear"] * 0.3}
new, lin = cal.correct(1000, got, paper, cal.RATIOS)
tap.ok(new == round(1000 * math.sqrt(0.75 * 0.19)),
       "correct over all three ratios: the rate between the highest and the lowest", new)

tap.ok(cal.nic_devices({"ZC_NIC_NETDEV": "mlx5_0=zcc1-r0,mlx5_1=zcc1-r1"}) ==
       ["zcc1-r0", "zcc1-r1"] and cal.nic_devices({}) == [],
       "nic_devices: the interfaces of ZC_NIC_NETDEV, none without it")
try:
    cal.nic_devices({"ZC_NIC_NETDEV": "mlx5_0"})
    tap.ok(False, "nic_devices: an entry without an interface is refused")
except ValueError as e:
    tap.ok("mlx5_0" in str(e), "nic_devices: an entry without an interface is refused", e)

tap.ok((cal.parse_rate("auto"), cal.parse_rate("OFF"), cal.parse_rate("20mbit"),
        cal.parse_rate("12500kbit"), cal.parse_rate("1.5gbit")) ==
       ("auto", "off", 20000, 12500, 1500000),
       "parse_rate: auto, off and tc rates in kbit/s")
for bad in ("fast", "20", "-3mbit", "0kbit"):
    try:
        cal.parse_rate(bad)
        tap.ok(False, "parse_rate refuses %r" % bad)
    except ValueError as e:
        tap.ok("--nic-rate" in str(e), "parse_rate refuses %r, naming --nic-rate" % bad, e)

ran = []


class Done:
    def __init__(self, code, out="", err=""):
        self.returncode, self.stdout, self.stderr = code, out, err


def fake(code, err="", shown=None):
    """tc: `code` for the change; the show lists a tbf at `shown` bytes/s
    (default: the rate just set)."""
    def run(cmd, **kw):
        ran.append(cmd)
        if cmd[:2] == ["tc", "-j"]:
            rate = shown if shown is not None else int(ran[-2][8][:-4]) * 125
            return Done(0, '[{"kind":"tbf","handle":"8001:","root":true,'
                           '"options":{"rate":%d,"burst":131071,"lat":50000}}]' % rate)
        return Done(code, "", err)
    return run


tap.ok(cal.set_nic_rate(["a", "b"], 9000, run=fake(0)) == "" and ran == [
    c for d in ("a", "b") for c in (
        ["tc", "qdisc", "change", "dev", d, "root", "tbf", "rate", "9000kbit", "burst", "128kb",
         "latency", "50ms"], ["tc", "-j", "qdisc", "show", "dev", d])],
    "set_nic_rate: one tc qdisc change per NIC, zc_cluster's burst and latency, read back",
    ran)
ran.clear()
err = cal.set_nic_rate(["a", "b"], 9000, run=fake(2, "RTNETLINK answers: Operation not "
                                                      "permitted"))
tap.ok("not permitted" in err and "dev a" in err and len(ran) == 1,
       "set_nic_rate: tc's failure is returned with its command, and stops there", err)
ran.clear()
err = cal.set_nic_rate(["a"], 9000, run=fake(0, shown=25000000))
tap.ok("25000000" in err and "1125000" in err,
       "set_nic_rate: a rate that reads back other than set is a failure, with both", err)

print("# model at the chosen rate: %s (%.0f kbit/s)" % (cal.model(s, kbit * 125.0), kbit))
sys.exit(tap.done())
