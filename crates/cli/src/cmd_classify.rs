//! `netsift classify`: classify the headers of a ClassBench trace against a rule set, compare
//! with the trace's answer column, and report speed, build time and memory. An iptables rule
//! set (`iptables-save` output, e.g. one `netsift hitables` wrote) is simulated instead: its
//! chains evaluated from `--chain` as the kernel would, the deciding rule's `cb<N>` comment
//! compared with the answer, and the rules visited per header reported.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use netsift::classify::{classbench, engine};

/// Flags of `netsift classify`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The rule set: ClassBench format, or `iptables-save` output (simulated).
    #[arg(long, value_name = "FILE")]
    rules: PathBuf,
    /// For an iptables rule set: the built-in chain headers enter.
    #[arg(long, default_value = "FORWARD")]
    chain: String,
    /// The header trace (ClassBench format; a sixth column is the expected 1-based rule).
    #[arg(long, value_name = "FILE")]
    trace: PathBuf,
    /// The engine.
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
    /// Also time the lookups (the trace looped for about a second) and print the figures.
    #[arg(long)]
    stats: bool,
}

/// The engines of `netsift classify`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum EngineArg {
    /// Every rule in order (the reference).
    Linear,
    /// A HiCuts decision tree.
    Hicuts,
    /// A HyperCuts decision tree (several fields cut per node).
    Hypercuts,
    /// PaCuts: rule groups, a direct table and 16-way split trees, SIMD leaves.
    Pacuts,
    /// The fastest engine for the rule set, measured at build time.
    Auto,
}

impl From<EngineArg> for engine::Kind {
    fn from(e: EngineArg) -> engine::Kind {
        match e {
            EngineArg::Linear => engine::Kind::Linear,
            EngineArg::Hicuts => engine::Kind::HiCuts,
            EngineArg::Hypercuts => engine::Kind::HyperCuts,
            EngineArg::Pacuts => engine::Kind::PaCuts,
            EngineArg::Auto => engine::Kind::Auto,
        }
    }
}

/// Run `netsift classify`.
pub fn run(args: Args) -> Result<ExitCode> {
    let rules = match crate::rulefile::read(&args.rules)? {
        crate::rulefile::RuleFile::ClassBench(rules) => rules,
        crate::rulefile::RuleFile::Iptables(rs) => return simulate(&args, &rs),
    };
    let trace = read_trace(&args.trace)?;
    let built = engine::build(args.engine.into(), &rules);
    let engine = &built.engine;
    let mut tally = Tally::default();
    for (i, t) in trace.iter().enumerate() {
        let got = engine.classify(&t.header).map(|r| r + 1);
        tally.check(&args.trace, i, t, got, "");
    }
    let (mismatches, unanswered) = (tally.mismatches, tally.unanswered);
    println!(
        "{} rules, {} headers: {} mismatches{}",
        rules.len(),
        trace.len(),
        mismatches,
        if unanswered > 0 {
            format!(" ({unanswered} without an answer)")
        } else {
            String::new()
        }
    );
    if args.stats {
        let mut n = 0usize;
        let mut sink = 0usize;
        let t = Instant::now();
        while t.elapsed().as_secs_f64() < 1.0 {
            for h in &trace {
                sink = sink.wrapping_add(
                    engine
                        .classify(std::hint::black_box(&h.header))
                        .unwrap_or(0),
                );
            }
            n += trace.len();
        }
        std::hint::black_box(sink);
        let secs = t.elapsed().as_secs_f64();
        if !built.trial.is_empty() {
            let trial: Vec<String> = built
                .trial
                .iter()
                .map(|(k, t)| format!("{k} {:.0} ns", t.as_secs_f64() * 1e9))
                .collect();
            println!("auto: {} (trial: {})", built.kind, trial.join(", "));
        }
        println!(
            "engine {}: built in {:.1} ms, {} KB, {:.2} M lookups/s",
            built.kind,
            built.build_time.as_secs_f64() * 1e3,
            built.memory.div_ceil(1024),
            n as f64 / secs / 1e6
        );
    }
    Ok(if mismatches == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `netsift classify` on an iptables rule set: every header evaluated through the chains.
fn simulate(args: &Args, rs: &netsift::classify::iptables::Ruleset) -> Result<ExitCode> {
    use netsift::classify::iptables::Packet;
    if !matches!(args.engine, EngineArg::Linear | EngineArg::Auto) {
        bail!(
            "{}: an iptables rule set is evaluated chain by chain (--engine linear or auto)",
            args.rules.display()
        );
    }
    let trace = read_trace(&args.trace)?;
    let ev = rs.evaluator()?;
    // The ClassBench rule a rule stands for: its comment `cb<N>`.
    let cb = |chain: usize, rule: usize| {
        rs.chains[chain].rules[rule]
            .comments()
            .find_map(|c| c.strip_prefix("cb").and_then(|n| n.parse::<usize>().ok()))
    };
    let mut tally = Tally::default();
    let mut visited = 0usize;
    let t0 = Instant::now();
    for (i, t) in trace.iter().enumerate() {
        let e = ev.evaluate(&args.chain, &Packet::new(t.header))?;
        visited += e.rules_visited();
        let got = e.decided_by.and_then(|s| cb(s.chain, s.rule));
        tally.check(&args.trace, i, t, got, &format!(" ({:?})", e.verdict));
    }
    let (mismatches, unanswered) = (tally.mismatches, tally.unanswered);
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{} rules in {} chains, {} headers: {} mismatches{}; {:.1} rules visited per header",
        rs.chains.iter().map(|c| c.rules.len()).sum::<usize>(),
        rs.chains.len(),
        trace.len(),
        mismatches,
        if unanswered > 0 {
            format!(" ({unanswered} without an answer)")
        } else {
            String::new()
        },
        visited as f64 / trace.len() as f64
    );
    if args.stats {
        println!(
            "simulator: {:.3} M headers/s",
            trace.len() as f64 / secs.max(1e-9) / 1e6
        );
    }
    Ok(if mismatches == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A ClassBench trace; an error names the file, or says it has no headers.
fn read_trace(path: &std::path::Path) -> Result<Vec<classbench::TraceEntry>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let trace = classbench::parse_trace(&text).with_context(|| path.display().to_string())?;
    if trace.is_empty() {
        bail!("{}: no headers", path.display());
    }
    Ok(trace)
}

/// Answers compared with a trace's answer column; the first ten mismatches go to stderr.
#[derive(Default)]
struct Tally {
    mismatches: usize,
    unanswered: usize,
}

impl Tally {
    fn check(
        &mut self,
        path: &std::path::Path,
        i: usize,
        t: &classbench::TraceEntry,
        got: Option<usize>,
        extra: &str,
    ) {
        match t.answer {
            None => self.unanswered += 1,
            Some(a) if got != Some(a) => {
                self.mismatches += 1;
                if self.mismatches <= 10 {
                    eprintln!(
                        "{}:{}: {}: rule {} expected, {} found{extra}",
                        path.display(),
                        i + 1,
                        t.header,
                        a,
                        got.map_or("none".to_string(), |g| g.to_string())
                    );
                }
            }
            Some(_) => {}
        }
    }
}
