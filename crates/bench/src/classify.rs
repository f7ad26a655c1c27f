//! The `classify` suite: lookups per second of every classification engine on the ClassBench
//! 10K sets (acl1, fw1, ipc1), each header of the set's trace in turn, single core; the linear
//! scan is the baseline measured in the same run. Every engine's answers are checked against the
//! trace's answer column before it is timed.

use std::fmt::Write as _;
use std::time::Instant;

use netsift_classify::{Header, classbench, engine, pacuts};

/// The sets of the suite, with the best published engine's lookups per second on this kind of
/// machine (the shared data's README: TupleMerge for acl1 and ipc1, CutSplit for fw1).
pub const SETS: [(&str, f64, &str); 3] = [
    ("acl1_10K", 6.7e6, "TupleMerge"),
    ("fw1_10K", 13.4e6, "CutSplit"),
    ("ipc1_10K", 4.4e6, "TupleMerge"),
];

/// One measurement.
#[derive(Clone, Debug)]
pub struct Row {
    /// The rule set.
    pub set: &'static str,
    /// The engine (`pacuts-batch` for [`pacuts::PaCuts::classify_all`]).
    pub engine: String,
    /// Build time, milliseconds.
    pub build_ms: f64,
    /// Memory, bytes.
    pub memory: usize,
    /// Lookups per second (best of `rounds` passes over the trace).
    pub lookups: f64,
}

/// Best lookups per second of `f` over `headers` in `rounds` timed passes (at least 50 ms
/// each).
fn rate(headers: &[Header], rounds: usize, mut f: impl FnMut(&[Header]) -> usize) -> f64 {
    let mut best = 0f64;
    for _ in 0..rounds {
        let t = Instant::now();
        let mut n = 0usize;
        let mut sink = 0usize;
        while t.elapsed().as_secs_f64() < 0.05 {
            sink = sink.wrapping_add(f(std::hint::black_box(headers)));
            n += headers.len();
        }
        std::hint::black_box(sink);
        best = best.max(n as f64 / t.elapsed().as_secs_f64());
    }
    best
}

/// Measure every engine on every set.
pub fn measure(rounds: usize) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (set, _, _) in SETS {
        let (rules, trace) = classbench::load_pair(set)?;
        let headers: Vec<Header> = trace.iter().map(|t| t.header).collect();
        for kind in engine::Kind::CONCRETE {
            let b = engine::build(kind, &rules);
            for t in &trace {
                if b.engine.classify(&t.header).map(|r| r + 1) != t.answer {
                    return Err(format!("{set}: {kind} misclassifies {}", t.header));
                }
            }
            let lookups = rate(&headers, rounds, |hs| {
                hs.iter()
                    .map(|h| b.engine.classify(h).unwrap_or(0))
                    .fold(0, usize::wrapping_add)
            });
            rows.push(Row {
                set,
                engine: kind.to_string(),
                build_ms: b.build_time.as_secs_f64() * 1e3,
                memory: b.memory,
                lookups,
            });
        }
        let t0 = Instant::now();
        let pa = pacuts::PaCuts::new(&rules, pacuts::Params::default());
        let build_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut out = vec![None; headers.len()];
        pa.classify_all(&headers, &mut out);
        if trace
            .iter()
            .zip(&out)
            .any(|(t, o)| o.map(|r| r + 1) != t.answer)
        {
            return Err(format!("{set}: pacuts batched lookups misclassify"));
        }
        let lookups = rate(&headers, rounds, |hs| {
            pa.classify_all(hs, &mut out);
            out.len()
        });
        rows.push(Row {
            set,
            engine: "pacuts-batch".into(),
            build_ms,
            memory: pa.memory(),
            lookups,
        });
    }
    Ok(rows)
}

/// The suite's report; with `csv`, also the rows as CSV (set, engine, build_ms, memory_bytes,
/// lookups_per_s, reference_lookups_per_s) for `scripts/plot-classify.py`.
pub fn suite(csv: Option<&std::path::Path>) -> Result<String, String> {
    let rows = measure(5)?;
    if let Some(path) = csv {
        let mut text = String::from(
            "set,engine,build_ms,memory_bytes,lookups_per_s,reference_lookups_per_s\n",
        );
        for r in &rows {
            let reference = SETS.iter().find(|s| s.0 == r.set).map_or(0.0, |s| s.1);
            let _ = writeln!(
                text,
                "{},{},{:.3},{},{:.0},{:.0}",
                r.set, r.engine, r.build_ms, r.memory, r.lookups, reference
            );
        }
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite classify: ClassBench 10K sets, each trace looped, single core; baseline: linear \
         (this run); reference: the best published engine on this kind of machine (data README)\n"
    );
    let _ = writeln!(
        out,
        "{:<9} {:<13} {:>9} {:>9} {:>8} {:>9} {:>13}",
        "set", "engine", "build ms", "KB", "Mpps", "x linear", "x reference"
    );
    for (set, reference, who) in SETS {
        let linear = rows
            .iter()
            .find(|r| r.set == set && r.engine == "linear")
            .map_or(f64::NAN, |r| r.lookups);
        for r in rows.iter().filter(|r| r.set == set) {
            let _ = writeln!(
                out,
                "{:<9} {:<13} {:>9.1} {:>9} {:>8.2} {:>8.1}x {:>12.2}x",
                set,
                r.engine,
                r.build_ms,
                r.memory.div_ceil(1024),
                r.lookups / 1e6,
                r.lookups / linear,
                r.lookups / reference
            );
        }
        let _ = writeln!(
            out,
            "{:<9} (reference: {who} {:.1} Mpps)",
            "",
            reference / 1e6
        );
    }
    Ok(out)
}
