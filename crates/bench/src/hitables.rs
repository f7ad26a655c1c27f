//! The `hitables` suite of `netsift bench` (the HiTables paper's Fig. 5b): ClassBench rule sets
//! and their HiTables rewrites in the `INPUT` chain of a network namespace, loaded with
//! iptables-nft and with nft, and the packets per second they let through. The rig — address
//! compression, frames, the namespace, delivery closed by markers, reading and comparing the
//! kernel's counters — is [`netsift_testkit::hitables`], which the equivalence test
//! (`crates/testkit/tests/hitables_kernel.rs`) shares.
//!
//! # Measuring
//!
//! [`Kernel::deliver`] times from the first frame to the last marker: the time to send and
//! classify the frames, on one CPU (see the rig's documentation). [`suite`] reports frames per
//! second of whole passes over the sample (at least [`SuiteConfig::min_time`] of them, the best
//! of [`SuiteConfig::reps`] runs: on a shared VM the spread between runs comes from other work,
//! and the fastest run is the one least disturbed), for an empty `INPUT` (T_IO), the original and
//! the rewritten set. Every run's counters are compared with the evaluator's prediction before
//! its rate is used: a rate only counts when the kernel classified every frame as it should.

use std::fmt::Write as _;
use std::time::Duration;

use netsift_classify::Header;
use netsift_classify::iptables::{self, Evaluator, Packet, Policy, Ruleset};
use netsift_testkit::hitables::{
    Counts, DeliverOptions, Kernel, check_tools, compare, compress, decisions, frame, settle, tally,
};

/// How rule sets were loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `iptables-restore` (nf_tables backend).
    Iptables,
    /// `nft -f` of [`Ruleset::to_nft`].
    Nft,
}

impl Backend {
    /// `iptables-nft` or `nft`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Iptables => "iptables-nft",
            Backend::Nft => "nft",
        }
    }
}

/// The rule sets of the `hitables` suite.
pub const SUITE_SETS: [&str; 3] = ["acl1_10K", "fw1_10K", "ipc1_10K"];

/// How the suite measures.
#[derive(Clone, Copy, Debug)]
pub struct SuiteConfig {
    /// Trace headers per set (spread evenly over the trace).
    pub headers: usize,
    /// Timed runs per rule set and loader (the fastest is reported).
    pub reps: usize,
    /// Each run sends whole passes over the headers until this much time has passed.
    pub min_time: Duration,
    /// And stops within a pass after this much.
    pub max_time: Duration,
}

impl Default for SuiteConfig {
    fn default() -> SuiteConfig {
        SuiteConfig {
            headers: 4000,
            reps: 5,
            min_time: Duration::from_millis(500),
            max_time: Duration::from_secs(20),
        }
    }
}

/// One row of the suite: a set, a loader, packets per second through `INPUT`.
#[derive(Clone, Debug)]
pub struct KernelRow {
    /// The ClassBench set.
    pub set: String,
    /// The loader.
    pub backend: Backend,
    /// Rules of the original set.
    pub rules_in: usize,
    /// Rules of the rewritten set.
    pub rules_out: usize,
    /// Rules examined per packet by the evaluator (the simulation's path length), the original
    /// and the rewritten set, mean over the sample.
    pub visited: [f64; 2],
    /// Whether the machine was idle before each of the three measurements ([`settle`]); the
    /// rates of a row measured on a busy machine are less reliable.
    pub quiet: bool,
    /// Packets per second (the best run): `INPUT` empty (T_IO), the original set, the
    /// rewritten set.
    pub pps: [f64; 3],
}

impl KernelRow {
    /// `T_orig / T_mod`: the rewritten set's rate over the original's.
    pub fn speedup(&self) -> f64 {
        self.pps[2] / self.pps[1]
    }

    /// `(T_orig − T_IO) / (T_mod − T_IO)` (the paper's speedup of the classification alone,
    /// with T the time per packet); `None` when the rewritten set is not measurably slower than
    /// the empty chain.
    pub fn net_speedup(&self) -> Option<f64> {
        let t = self.pps.map(|p| 1.0 / p);
        let (orig, modified) = (t[1] - t[0], t[2] - t[0]);
        (orig > 0.0 && modified > 0.0).then(|| orig / modified)
    }
}

/// Every `len / n`-th header.
fn spread(headers: &[Header], n: usize) -> Vec<Header> {
    let step = (headers.len() / n.max(1)).max(1);
    headers.iter().step_by(step).take(n).copied().collect()
}

/// Measures one set (see [`suite`]); `log` gets a line per measurement.
pub fn measure(
    set: &str,
    cfg: &SuiteConfig,
    log: &mut dyn FnMut(&str),
) -> Result<Vec<KernelRow>, String> {
    let (rules, trace) = netsift_classify::classbench::load_pair(set)?;
    let c = compress(&rules).map_err(|e| format!("{set}: {e}"))?;
    let conv = iptables::from_classbench(
        &c.rules,
        &iptables::ConvertOptions {
            chain: "INPUT".into(),
            policy: Policy::Drop,
            transformable_protocols: iptables::Protocols::tcp_udp(),
        },
    );
    let (rewritten, report) = netsift_classify::hitables::rewrite(
        &conv.ruleset,
        &netsift_classify::hitables::Params::default(),
    )
    .map_err(|e| format!("{set}: {e}"))?;
    let all: Vec<Header> = trace.iter().map(|t| c.header(&t.header)).collect();
    let headers = spread(&all, cfg.headers);
    let empty = Ruleset::new_filter();
    let sets = [&empty, &conv.ruleset, &rewritten];
    let mut decided = Vec::new();
    for rs in sets {
        decided.push(decisions(rs, "INPUT", &headers).map_err(|e| format!("{set}: {e}"))?);
    }
    let mut visited = [0.0; 2];
    for (v, rs) in visited.iter_mut().zip([&conv.ruleset, &rewritten]) {
        let ev = Evaluator::new(rs).map_err(|e| e.to_string())?;
        let mut steps = 0usize;
        for h in &headers {
            steps += ev
                .evaluate("INPUT", &Packet::new(*h))
                .map_err(|e| format!("{set}: {h}: {e}"))?
                .rules_visited();
        }
        *v = steps as f64 / headers.len().max(1) as f64;
    }
    let k = Kernel::new()?;
    let frames: Vec<Vec<u8>> = headers.iter().map(|h| frame(h, k.a_mac, k.b_mac)).collect();
    let opts = DeliverOptions {
        chunk: 256,
        min_time: cfg.min_time,
        max_time: cfg.max_time,
        warm_up: true,
    };
    let mut rows = Vec::new();
    for backend in [Backend::Iptables, Backend::Nft] {
        let mut pps = [0.0; 3];
        let mut quiet = true;
        for (i, rs) in sets.iter().enumerate() {
            let what = format!(
                "{set} {} ({})",
                ["empty", "original", "rewritten"][i],
                backend.name()
            );
            match backend {
                Backend::Iptables => k.load_iptables(rs),
                Backend::Nft => k.load_nft(rs),
            }
            .map_err(|e| format!("{what}: {e}"))?;
            let max_wait = Duration::from_secs(10);
            let waited = settle(max_wait);
            quiet &= waited < max_wait;
            log(&format!(
                "{what}: loaded; the machine was idle after {:.1} s",
                waited.as_secs_f64()
            ));
            let mut want = Counts::default();
            let (mut delivered, mut markers) = (0, 0);
            let mut rates = Vec::new();
            for _ in 0..cfg.reps.max(1) {
                let before = k.link_counters()?;
                let d = k
                    .deliver(&frames, &opts)
                    .map_err(|e| format!("{what}: {e}"))?;
                let after = k.link_counters()?;
                if after[1] != before[1] || after[2] != before[2] {
                    return Err(format!("{what}: the veth pair dropped frames"));
                }
                want.merge(&tally(&decided[i], d.sent_indices(frames.len())));
                delivered += d.frames + d.warm_up_frames;
                markers += d.markers;
                rates.push(d.pps());
                log(&format!(
                    "{what}: {} packets ({} passes{}) in {:.2} s: {:.0} pps",
                    d.frames,
                    d.passes,
                    if d.complete { "" } else { ", the last cut" },
                    d.secs,
                    d.pps()
                ));
            }
            let got = match backend {
                Backend::Iptables => k.iptables_counts(),
                Backend::Nft => k.nft_counts(),
            }?;
            compare(&got, &want, delivered, markers).map_err(|e| format!("{what}: {e}"))?;
            pps[i] = rates.iter().copied().fold(0.0, f64::max);
        }
        rows.push(KernelRow {
            set: set.to_string(),
            backend,
            rules_in: report.input_rules,
            rules_out: report.output_rules,
            visited,
            quiet,
            pps,
        });
    }
    Ok(rows)
}

/// The `hitables` suite of `netsift bench` (the HiTables paper's Fig. 5b): for each of
/// [`SUITE_SETS`], packets per second through the `INPUT` chain of a namespace with the chain
/// empty (T_IO), with the original set and with its HiTables rewrite, each loaded with
/// `iptables-restore` (nf_tables backend) and with `nft -f`; same packets, same run. Every run's
/// counters are checked against the evaluator before its rate counts. When `csv` is given, the
/// rows are written there too (for `scripts/plot-hitables.py`).
pub fn suite(cfg: &SuiteConfig, csv: Option<&std::path::Path>) -> Result<String, String> {
    let version = check_tools()?;
    let mut rows = Vec::new();
    for set in SUITE_SETS {
        rows.extend(measure(set, cfg, &mut |line| eprintln!("{line}"))?);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite hitables: ClassBench sets (addresses compressed into 198.18.0.0/15), {} trace \
         headers each as TCP/UDP/IPv4 frames on a veth pair into the INPUT chain of a namespace; \
         {}; best of {} runs of whole passes for at least {:.1} s; INPUT policy DROP\n",
        cfg.headers,
        version,
        cfg.reps,
        cfg.min_time.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "{:<9} {:<12} {:>6} {:>9} {:>7} {:>8} {:>10} {:>10} {:>10} {:>9} {:>12}",
        "set",
        "loader",
        "rules",
        "rewritten",
        "visited",
        "(rewr.)",
        "empty pps",
        "orig pps",
        "hitab pps",
        "speedup",
        "net speedup"
    );
    for r in &rows {
        let _ = writeln!(
            out,
            "{:<9} {:<12} {:>6} {:>9} {:>7.0} {:>8.1} {:>10.0} {:>10.0} {:>10.0} {:>8.1}x {:>11}{}",
            r.set,
            r.backend.name(),
            r.rules_in,
            r.rules_out,
            r.visited[0],
            r.visited[1],
            r.pps[0],
            r.pps[1],
            r.pps[2],
            r.speedup(),
            r.net_speedup()
                .map_or("n/a".to_string(), |x| format!("{x:.1}x")),
            if r.quiet { "" } else { "  (busy)" }
        );
    }
    let _ = writeln!(
        out,
        "\nvisited: rules examined per packet by the evaluator, original (rewritten); speedup: \
         T_orig / T_mod (rates of the rewritten over the original set); net speedup: \
         (T_orig - T_IO) / (T_mod - T_IO), T the time per packet and T_IO the empty chain's. A \
         run sends the frames in chunks of 256 from a thread pinned to one CPU, each chunk \
         followed by a marker datagram that the first INPUT rule accepts: the time is until the \
         last marker arrives, when every frame before it has been classified.{}",
        if rows.iter().all(|r| r.quiet) {
            ""
        } else {
            " (busy): other processes kept the machine busy before a measurement of the row \
             (waited 10 s for it to be idle); its rates are less reliable."
        }
    );
    if let Some(path) = csv {
        let mut s = String::from(
            "set,loader,rules,rewritten_rules,visited_original,visited_rewritten,pps_empty,pps_original,pps_rewritten,speedup,net_speedup\n",
        );
        for r in &rows {
            let _ = writeln!(
                s,
                "{},{},{},{},{:.1},{:.1},{:.0},{:.0},{:.0},{:.3},{}",
                r.set,
                r.backend.name(),
                r.rules_in,
                r.rules_out,
                r.visited[0],
                r.visited[1],
                r.pps[0],
                r.pps[1],
                r.pps[2],
                r.speedup(),
                r.net_speedup().map_or(String::new(), |x| format!("{x:.3}"))
            );
        }
        std::fs::write(path, s).map_err(|e| format!("{}: {e}", path.display()))?;
        let _ = writeln!(out, "\nrows written to {}", path.display());
    }
    Ok(out)
}
