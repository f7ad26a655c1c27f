#!/usr/bin/env python3
"""Plot `netsift bench classify` (lookups per second per engine and rule set, log scale, with the
best published engine's figure as a marker).

usage: NETSIFT_BENCH_CSV=classify.csv netsift bench classify
       scripts/plot-classify.py classify.csv docs/img/classify.png
Needs matplotlib (pip install matplotlib).
"""
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = list(csv.DictReader(open(sys.argv[1])))
sets = list(dict.fromkeys(r["set"] for r in rows))
engines = list(dict.fromkeys(r["engine"] for r in rows))
fig, ax = plt.subplots(figsize=(10, 4))
w = 0.8 / len(engines)
for i, e in enumerate(engines):
    ys = [next((float(r["lookups_per_s"]) / 1e6 for r in rows if r["set"] == s and r["engine"] == e), 0) for s in sets]
    ax.bar([j + i * w for j in range(len(sets))], ys, w, label=e)
for j, s in enumerate(sets):
    ref = float(next(r["reference_lookups_per_s"] for r in rows if r["set"] == s)) / 1e6
    ax.hlines(ref, j - w / 2, j + 0.8 - w / 2, colors="black", linestyles="dashed",
              label="best published" if j == 0 else None)
ax.set_xticks([j + 0.4 - w / 2 for j in range(len(sets))])
ax.set_xticklabels(sets)
ax.set_yscale("log")
ax.set_ylabel("M lookups/s (single core)")
ax.set_title("Rule-set classification, ClassBench 10K traces")
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
