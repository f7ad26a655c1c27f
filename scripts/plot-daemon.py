#!/usr/bin/env python3
"""Plot `netsift bench daemon` output: CPU per frame, libpcap (own sockets) against netsiftd.

usage: netsift bench daemon > daemon.txt; scripts/plot-daemon.py daemon.txt OUT.png
For each application and K, two stacked bars: the applications' CPU, the daemon's, and the
kernel's share (the receive thread's CPU over a run nobody captures; a negative difference,
noise, is drawn as 0). Needs matplotlib (pip install matplotlib).
"""
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

src, out = sys.argv[1], sys.argv[2]
rows = []
for line in open(src):
    f = line.split()
    if len(f) >= 12 and f[0] in ("pcapcount", "tcpdump") and f[1].isdigit():
        app, k = f[0], int(f[1])
        netsiftd = f[2] == "netsiftd"
        # captured dropped process (daemon) kernel total "process vs" "total vs" start+stop
        nums = f[-9:]
        process, daemon, kernel = float(nums[2]), nums[3], float(nums[4])
        daemon = 0.0 if daemon == "-" else float(daemon)
        rows.append((app, k, "netsiftd" if netsiftd else "libpcap", process - daemon, daemon,
                     max(kernel, 0.0), nums[7]))
if not rows:
    sys.exit(f"{src}: no result rows (the output of `netsift bench daemon`)")
fig, ax = plt.subplots(figsize=(10, 4.5))
labels, x = [], 0
for app, k, cap, apps, daemon, kernel, ratio in rows:
    ax.bar(x, apps, color="tab:blue", label="applications" if x == 0 else None)
    ax.bar(x, daemon, bottom=apps, color="tab:orange", label="daemon" if x == 0 else None)
    ax.bar(x, kernel, bottom=apps + daemon, color="tab:gray", label="kernel" if x == 0 else None)
    if cap == "netsiftd":
        ax.text(x, apps + daemon + kernel + 15, ratio, ha="center", fontsize=7)
    labels.append(f"{app}\nK={k}\n{cap}")
    x += 1
ax.set_xticks(range(len(labels)), labels, fontsize=6)
ax.set_ylabel("CPU ns per frame sent (median)")
ax.set_title("K applications on one link: own libpcap sockets vs one netsiftd (label: total ratio)")
ax.legend()
fig.tight_layout()
fig.savefig(out, dpi=110)
