//! Choosing and building an engine by name, and `auto`: the fastest engine for a rule set,
//! measured on headers drawn from the rules themselves.

use std::fmt;
use std::time::{Duration, Instant};

use crate::{Classifier, Header, Rule, hicuts, hypercuts, linear, pacuts};

/// The engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Every rule in order (the reference).
    Linear,
    /// HiCuts trees.
    HiCuts,
    /// HyperCuts trees.
    HyperCuts,
    /// PaCuts (netsift's fast engine).
    PaCuts,
    /// The fastest of the engines that suit the rule set, measured at build time.
    Auto,
}

impl Kind {
    /// Every concrete engine (not `Auto`).
    pub const CONCRETE: [Kind; 4] = [Kind::Linear, Kind::HiCuts, Kind::HyperCuts, Kind::PaCuts];

    /// The engine's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Linear => "linear",
            Kind::HiCuts => "hicuts",
            Kind::HyperCuts => "hypercuts",
            Kind::PaCuts => "pacuts",
            Kind::Auto => "auto",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A built engine with its figures.
pub struct Built {
    /// The engine.
    pub engine: Box<dyn Classifier + Send + Sync>,
    /// Which engine it is (never `Auto`).
    pub kind: Kind,
    /// Time to build it (for `Auto`, including the trial of the others).
    pub build_time: Duration,
    /// Bytes it holds.
    pub memory: usize,
    /// For `Auto`: each candidate and its measured time per lookup.
    pub trial: Vec<(Kind, Duration)>,
}

impl fmt::Debug for Built {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Built")
            .field("kind", &self.kind)
            .field("build_time", &self.build_time)
            .field("memory", &self.memory)
            .field("trial", &self.trial)
            .finish_non_exhaustive()
    }
}

/// Rule sets up to this size also try the linear scan in `Auto`.
pub const AUTO_LINEAR_MAX: usize = 64;
/// Rule sets up to this size also try HiCuts and HyperCuts in `Auto` (larger sets take them
/// seconds and megabytes to build, and PaCuts wins there on every measured set).
pub const AUTO_TREES_MAX: usize = 256;

/// Build engine `kind` for `rules` with default parameters.
pub fn build(kind: Kind, rules: &[Rule]) -> Built {
    let t0 = Instant::now();
    let (engine, memory): (Box<dyn Classifier + Send + Sync>, usize) = match kind {
        Kind::Linear => {
            let e = linear::Linear::new(rules);
            let m = e.memory();
            (Box::new(e), m)
        }
        Kind::HiCuts => {
            let e = hicuts::HiCuts::new(rules, hicuts::Params::default());
            let m = e.memory();
            (Box::new(e), m)
        }
        Kind::HyperCuts => {
            let e = hypercuts::HyperCuts::new(rules, hypercuts::Params::default());
            let m = e.memory();
            (Box::new(e), m)
        }
        Kind::PaCuts => {
            let e = pacuts::PaCuts::new(rules, pacuts::Params::default());
            let m = e.memory();
            (Box::new(e), m)
        }
        Kind::Auto => return auto(rules),
    };
    Built {
        engine,
        kind,
        build_time: t0.elapsed(),
        memory,
        trial: Vec::new(),
    }
}

/// Headers for trials: a point inside each of up to `n` rules (spread over the set), at its
/// low corner, its high corner or in between.
pub fn sample_headers(rules: &[Rule], n: usize) -> Vec<Header> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    if rules.is_empty() {
        return vec![Header([0; 5], 0)];
    }
    (0..n)
        .map(|i| {
            let r = &rules[i * rules.len() / n.max(1) % rules.len()];
            Header(
                std::array::from_fn(|d| {
                    let f = r.fields[d];
                    match next() % 3 {
                        0 => f.lo,
                        1 => f.hi,
                        _ => f.lo + (next() % (u64::from(f.hi - f.lo) + 1)) as u32,
                    }
                }),
                0,
            )
        })
        .collect()
}

fn auto(rules: &[Rule]) -> Built {
    let t0 = Instant::now();
    let mut kinds = vec![Kind::PaCuts];
    if rules.len() <= AUTO_LINEAR_MAX {
        kinds.push(Kind::Linear);
    }
    if rules.len() <= AUTO_TREES_MAX {
        kinds.extend([Kind::HiCuts, Kind::HyperCuts]);
    }
    let sample = sample_headers(rules, 4096);
    let mut trial = Vec::new();
    let mut best: Option<(Duration, Built)> = None;
    for k in kinds {
        let b = build(k, rules);
        // Best of three passes over the sample, per lookup.
        let mut t = Duration::MAX;
        for _ in 0..3 {
            let s = Instant::now();
            let mut sink = 0usize;
            for h in &sample {
                sink = sink.wrapping_add(b.engine.classify(std::hint::black_box(h)).unwrap_or(0));
            }
            std::hint::black_box(sink);
            t = t.min(s.elapsed() / sample.len() as u32);
        }
        trial.push((k, t));
        if best.as_ref().is_none_or(|(bt, _)| t < *bt) {
            best = Some((t, b));
        }
    }
    let (_, mut b) = best.expect("PaCuts is always a candidate");
    b.build_time = t0.elapsed();
    b.trial = trial;
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Rng, corner_headers, random_rules};

    #[test]
    fn every_engine_and_auto_agree_with_linear() {
        let mut rng = Rng(0x0dd_ba11);
        for n in [0usize, 1, 5, 60, 300, 2500] {
            let rules = random_rules(&mut rng, n);
            let lin = build(Kind::Linear, &rules);
            let headers = corner_headers(&mut rng, &rules, 500);
            for k in Kind::CONCRETE.into_iter().chain([Kind::Auto]) {
                let b = build(k, &rules);
                assert_ne!(b.kind, Kind::Auto);
                assert!(b.memory > 0 || n == 0, "{k}: no memory reported");
                if k == Kind::Auto {
                    assert!(!b.trial.is_empty());
                    assert!(b.trial.iter().any(|t| t.0 == b.kind));
                }
                for h in &headers {
                    assert_eq!(
                        b.engine.classify(h),
                        lin.engine.classify(h),
                        "{k} n={n}: {h}"
                    );
                }
            }
        }
    }
}
