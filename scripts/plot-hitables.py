#!/usr/bin/env python3
"""Plot the HiTables kernel throughput (the HiTables paper's Fig. 5b).

usage: scripts/plot-hitables.py HITABLES.csv OUT.png
  HITABLES.csv  the rows written by `NETSIFT_BENCH_CSV=HITABLES.csv netsift bench hitables`
Draws packets per second through the INPUT chain per ClassBench set: the original and the
rewritten set for each loader (iptables-nft, nft), log scale, with the empty chain's rate (T_IO)
as a tick above each pair. Needs matplotlib.
"""
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

src, out = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(src)))
sets = list(dict.fromkeys(r["set"] for r in rows))
loaders = list(dict.fromkeys(r["loader"] for r in rows))
bars = [(l, kind) for l in loaders for kind in ("original", "rewritten")]
colors = {"original": ["#c44e52", "#e08a8c"], "rewritten": ["#4c72b0", "#8fb0dc"]}

fig, ax = plt.subplots(figsize=(8, 4.2))
w = 0.8 / len(bars)
for i, (loader, kind) in enumerate(bars):
    xs, ys = [], []
    for j, s in enumerate(sets):
        r = next((r for r in rows if r["set"] == s and r["loader"] == loader), None)
        if r is None:
            continue
        xs.append(j + i * w)
        ys.append(float(r[f"pps_{kind}"]))
        if kind == "rewritten":
            # The empty chain's rate over the loader's pair of bars.
            ax.hlines(float(r["pps_empty"]), j + (i - 1) * w - w / 2, j + i * w + w / 2,
                      colors="black", linestyles="dotted", linewidth=1)
    c = colors[kind][loaders.index(loader) % 2]
    b = ax.bar(xs, ys, w, label=f"{kind} ({loader})", color=c)
    ax.bar_label(b, labels=[f"{y / 1000:.0f}k" for y in ys], fontsize=7)
ax.set_xticks([j + w * (len(bars) - 1) / 2 for j in range(len(sets))], sets)
ax.set_yscale("log")
ax.set_ylabel("packets per second through INPUT")
ax.set_title("HiTables in the kernel: original against rewritten rule sets\n"
             "(dotted: the empty chain, T_IO)", fontsize=10)
ax.legend(fontsize=7, loc="upper left", ncol=2)
ax.set_ylim(bottom=5e3, top=ax.get_ylim()[1] * 3)
fig.tight_layout()
fig.savefig(out, dpi=120)
for r in rows:
    print(r["set"], r["loader"], r["pps_original"], r["pps_rewritten"], r["speedup"])
