#!/usr/bin/env python3
"""Plot a criterion benchmark group of netsift against its baseline.

usage: scripts/plot-bench.py GROUP PACKETS OUT.png   (PACKETS 1: per iteration; log scale when
the values span more than three orders of magnitude)
Reads target/criterion/GROUP/<filter>_<engine>/new/estimates.json (written by
`cargo bench -p netsift-bench --bench GROUP`) and draws ns/packet per filter and engine.
Needs matplotlib (pip install matplotlib).
"""
import json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

group, packets, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
root = os.path.join("target", "criterion", group)
data = {}
for d in sorted(os.listdir(root)):
    est = os.path.join(root, d, "new", "estimates.json")
    if "_" not in d or not os.path.exists(est):
        continue
    name, engine = d.rsplit("_", 1)
    with open(est) as f:
        data.setdefault(name, {})[engine] = json.load(f)["median"]["point_estimate"] / packets
order = list(data)
engines = sorted({e for v in data.values() for e in v})
fig, ax = plt.subplots(figsize=(9, 4))
w = 0.8 / len(engines)
for i, e in enumerate(engines):
    xs = [j + i * w for j in range(len(order))]
    ys = [data[n].get(e, 0) for n in order]
    bars = ax.bar(xs, ys, w, label=e)
    ax.bar_label(bars, fmt="%.1f", fontsize=7)
ax.set_xticks([j + w * (len(engines) - 1) / 2 for j in range(len(order))], order, rotation=20)
vals = [v for d in data.values() for v in d.values() if v > 0]
if vals and max(vals) / min(vals) > 1000:
    ax.set_yscale("log")
if packets == 1:
    ax.set_ylabel("ns per iteration (median)")
    ax.set_title(f"{group}")
else:
    ax.set_ylabel("ns per packet (median)")
    ax.set_title(f"{group}: {packets} packets per iteration")
ax.legend()
fig.tight_layout()
fig.savefig(out, dpi=110)
for n in order:
    print(n, {e: round(v, 2) for e, v in data[n].items()})
