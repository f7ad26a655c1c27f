//! `netsift hitables`: rewrite an iptables rule set (or a ClassBench set, converted) into an
//! equivalent one whose chains encode decision trees; optionally check it against the original
//! on a header trace and report path lengths.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use netsift::classify::classbench;
use netsift::classify::hitables::{self, Params};
use netsift::classify::iptables::{Packet, Protocols, Ruleset};

use crate::rulefile;

/// Flags of `netsift hitables`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The rule set: `iptables-save` output, or a ClassBench set (converted: rule i gets ACCEPT
    /// or DROP and the comment `cb<i>`).
    #[arg(long, value_name = "FILE")]
    rules: PathBuf,
    /// Write the rewritten set here (default: standard output).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Write `nft -f` input instead of `iptables-restore` input.
    #[arg(long)]
    nft: bool,
    /// The chain a ClassBench set goes into, and the chain a trace is evaluated from.
    #[arg(long, default_value = "FORWARD")]
    chain: String,
    /// Rules a leaf may hold before it is split.
    #[arg(long, default_value_t = Params::default().binth)]
    binth: usize,
    /// Most children of a tree node (2 to 64).
    #[arg(long, default_value_t = Params::default().fanout)]
    fanout: usize,
    /// Space factor: copies of a node's rules in its children, per rule.
    #[arg(long, default_value_t = Params::default().spfac)]
    spfac: usize,
    /// Shortest run of rules that gets a tree (the paper's minimum transformation length).
    #[arg(long, default_value_t = Params::default().min_run)]
    min_run: usize,
    /// A tree's rules are at most this many times its run's rules.
    #[arg(long, default_value_t = Params::default().max_expansion)]
    max_expansion: f64,
    /// The deepest nesting of chains the output may have (nf_tables, used by iptables-nft and
    /// nft, refuses more than 15; legacy iptables has no limit).
    #[arg(long, default_value_t = Params::default().max_depth)]
    max_depth: usize,
    /// Let rules of every protocol be transformable (default: `-p tcp` and `-p udp` only).
    #[arg(long)]
    all_protocols: bool,
    /// Check the rewritten set against the original on this ClassBench trace (same verdict and
    /// same deciding rule for every header) and report path lengths (rules visited).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Print what the rewrite did on standard error.
    #[arg(long)]
    stats: bool,
}

/// Run `netsift hitables`.
pub fn run(args: Args) -> Result<ExitCode> {
    let file = rulefile::read(&args.rules)?;
    let original = rulefile::as_iptables(file, &args.chain, &args.rules)?;
    let params = Params {
        binth: args.binth,
        fanout: args.fanout,
        spfac: args.spfac,
        min_run: args.min_run,
        max_expansion: args.max_expansion,
        max_depth: args.max_depth,
        protocols: if args.all_protocols {
            Protocols::Any
        } else {
            Protocols::tcp_udp()
        },
        prefix: None,
    };
    if !(args.max_expansion >= 1.0 && args.max_expansion.is_finite()) {
        bail!("--max-expansion must be a number of at least 1");
    }
    let (rewritten, report) =
        hitables::rewrite(&original, &params).with_context(|| args.rules.display().to_string())?;
    let text = if args.nft {
        rewritten
            .to_nft()
            .context("the rewritten set has no nft translation")?
    } else {
        rewritten.to_restore()
    };
    match &args.output {
        Some(p) => {
            std::fs::write(p, &text).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => {
            use std::io::Write as _;
            std::io::stdout().write_all(text.as_bytes())?;
        }
    }
    if args.stats {
        eprintln!(
            "hitables: {} rules -> {} ({:.2}x), {} chains added, {} tree(s), {:.1} ms",
            report.input_rules,
            report.output_rules,
            report.output_rules as f64 / report.input_rules.max(1) as f64,
            report.chains_added,
            report.trees.len(),
            report.time.as_secs_f64() * 1e3
        );
        for t in &report.trees {
            eprintln!(
                "  {} rules {}..{}: {} transformable, {} leaves, depth {}, {} rules emitted",
                t.chain,
                t.first + 1,
                t.first + t.rules,
                t.transformable,
                t.leaves,
                t.depth,
                t.emitted
            );
        }
    }
    if let Some(trace) = &args.trace {
        return check(&original, &rewritten, &args.chain, trace);
    }
    Ok(ExitCode::SUCCESS)
}

/// Evaluate every header of `trace` through both sets; report path lengths and differences.
fn check(
    original: &Ruleset,
    rewritten: &Ruleset,
    chain: &str,
    trace: &PathBuf,
) -> Result<ExitCode> {
    let text = std::fs::read_to_string(trace)
        .with_context(|| format!("cannot read {}", trace.display()))?;
    let entries = classbench::parse_trace(&text).with_context(|| trace.display().to_string())?;
    let (eo, en) = (original.evaluator()?, rewritten.evaluator()?);
    let (mut po, mut pn) = (
        Vec::with_capacity(entries.len()),
        Vec::with_capacity(entries.len()),
    );
    let mut differ = 0usize;
    for (i, t) in entries.iter().enumerate() {
        let p = Packet::new(t.header);
        let a = eo.evaluate(chain, &p)?;
        let b = en.evaluate(chain, &p)?;
        po.push(a.rules_visited());
        pn.push(b.rules_visited());
        let ra = a
            .decided_by
            .map(|s| &original.chains[s.chain].rules[s.rule]);
        let rb = b
            .decided_by
            .map(|s| &rewritten.chains[s.chain].rules[s.rule]);
        if a.verdict != b.verdict || ra != rb {
            differ += 1;
            if differ <= 10 {
                eprintln!(
                    "{}:{}: {}: original {:?}, rewritten {:?}",
                    trace.display(),
                    i + 1,
                    t.header,
                    a.verdict,
                    b.verdict
                );
            }
        }
    }
    let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len().max(1) as f64;
    let pct = |v: &mut Vec<usize>, f: f64| {
        v.sort_unstable();
        v.get(((v.len().max(1) - 1) as f64 * f) as usize)
            .copied()
            .unwrap_or(0)
    };
    let (mo, mn) = (mean(&po), mean(&pn));
    println!(
        "{} headers: {} differ; rules visited: original mean {:.1} (p99 {}), rewritten mean {:.1} \
         (p99 {}), speedup {:.1}x",
        entries.len(),
        differ,
        mo,
        pct(&mut po, 0.99),
        mn,
        pct(&mut pn, 0.99),
        mo / mn.max(1e-9)
    );
    Ok(if differ == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
