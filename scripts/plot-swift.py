#!/usr/bin/env python3
"""Plot the Swift update-latency and FTPCap results.

usage: scripts/plot-swift.py UPDATE.txt FTPCAP.csv OUTDIR
  UPDATE.txt  the output of `netsift bench update`
  FTPCAP.csv  the per-connection misses written by `NETSIFT_BENCH_CSV=FTPCAP.csv netsift bench ftpcap`
Writes OUTDIR/swift-update.png (median add time against N, with the recompile times) and
OUTDIR/ftpcap.png (packets missed per data connection, in start order, per updater; the Swift
paper's Figs. 5-8). Needs matplotlib.
"""
import csv, re, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

upd, ftp, out = sys.argv[1], sys.argv[2], sys.argv[3]

def seconds(tok):
    m = re.match(r"([0-9.]+)\s*(ns|us|µs|ms|s)", tok)
    if not m:
        return None
    v, u = float(m.group(1)), m.group(2)
    return v * {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}[u]

text = open(upd).read()
swift = {}
recompile = {"netsift": {}, "libpcap": {}}
for line in text.splitlines():
    m = re.match(r"\s*(\d+)\s+(swift-pass|swift-child)\s+([0-9.]+ \S+)\s+([0-9.]+ \S+)", line)
    if m:
        swift.setdefault(m.group(2), {})[int(m.group(1))] = (seconds(m.group(3)), seconds(m.group(4)))
        continue
    m = re.match(r"\s*(\d+)\s+\d+\s+(\S+)\s+([0-9.]+ \S+?)\*?\s+(\S+)\s+([0-9.]+ \S+?)\s", line)
    if m:
        n = int(m.group(1))
        a, b = seconds(m.group(3)), seconds(m.group(5))
        if a:
            recompile["netsift"][n] = a
        if b:
            recompile["libpcap"][n] = b

fig, ax = plt.subplots(figsize=(7, 4))
for form, d in swift.items():
    ns = sorted(d)
    ax.plot(ns, [d[n][0] * 1e6 for n in ns], "o-", label=f"{form} add (median)")
    ax.plot(ns, [d[n][1] * 1e6 for n in ns], "x:", label=f"{form} add (p99)")
for who, d in recompile.items():
    ns = sorted(d)
    if ns:
        ax.plot(ns, [d[n] * 1e6 for n in ns], "s--", label=f"recompile ({who})")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("connections already in the filter (N)")
ax.set_ylabel("time of one update (µs)")
ax.set_title("Swift: one data connection added, against recompiling")
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(f"{out}/swift-update.png", dpi=120)

rows = list(csv.reader(open(ftp)))
head, rows = rows[0], rows[1:]
fig, ax = plt.subplots(figsize=(7, 4))
for j, name in enumerate(head[1:], start=1):
    xs = [int(r[0]) for r in rows]
    ys = [int(r[j]) for r in rows]
    ax.plot(xs, ys, ".-" if "swift" in name else ".", label=name, markersize=3)
ax.set_xlabel("data connection (in start order)")
ax.set_ylabel("packets sent before the first captured")
ax.set_title("FTPCap replay: packets missed per data connection")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(f"{out}/ftpcap.png", dpi=120)
