//! `netsift classify`: classify the headers of a ClassBench trace against a rule set, compare
//! with the trace's answer column, and report speed, build time and memory.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use netsift::classify::{classbench, engine};

/// Flags of `netsift classify`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The rule set (ClassBench format).
    #[arg(long, value_name = "FILE")]
    rules: PathBuf,
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
    let text = std::fs::read_to_string(&args.rules)
        .with_context(|| format!("cannot read {}", args.rules.display()))?;
    let rules = classbench::parse_rules(&text).with_context(|| args.rules.display().to_string())?;
    let text = std::fs::read_to_string(&args.trace)
        .with_context(|| format!("cannot read {}", args.trace.display()))?;
    let trace = classbench::parse_trace(&text).with_context(|| args.trace.display().to_string())?;
    if trace.is_empty() {
        bail!("{}: no headers", args.trace.display());
    }
    let built = engine::build(args.engine.into(), &rules);
    let engine = &built.engine;
    let mut mismatches = 0usize;
    let mut unanswered = 0usize;
    for (i, t) in trace.iter().enumerate() {
        let got = engine.classify(&t.header).map(|r| r + 1);
        match t.answer {
            None => unanswered += 1,
            Some(a) if got != Some(a) => {
                mismatches += 1;
                if mismatches <= 10 {
                    eprintln!(
                        "{}:{}: {}: rule {} expected, {} found",
                        args.trace.display(),
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
