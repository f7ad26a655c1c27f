//! Try HiTables parameters on the ClassBench 10K sets: `HT_BINTH=8 HT_FANOUT=8 … cargo run
//! --release --example hitables_tune -- acl1_10K fw1_10K ipc1_10K`.

use std::time::Instant;

use netsift_classify::classbench;
use netsift_classify::hitables::{Params, rewrite};
use netsift_classify::iptables::{ConvertOptions, Packet, from_classbench};

fn env<T: std::str::FromStr>(k: &str, d: T) -> T {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn main() {
    let d = Params::default();
    let p = Params {
        binth: env("HT_BINTH", d.binth),
        fanout: env("HT_FANOUT", d.fanout),
        spfac: env("HT_SPFAC", d.spfac),
        min_run: env("HT_MIN_RUN", d.min_run),
        max_expansion: env("HT_EXPANSION", d.max_expansion),
        ..d
    };
    for set in std::env::args().skip(1) {
        let (rules, trace) = classbench::load_pair(&set).expect("data");
        let conv = from_classbench(&rules, &ConvertOptions::default());
        let t0 = Instant::now();
        let (new, report) = rewrite(&conv.ruleset, &p).expect("rewrite");
        let took = t0.elapsed();
        let (eo, en) = (conv.ruleset.evaluator().unwrap(), new.evaluator().unwrap());
        let (mut po, mut pn, mut bad) = (0usize, 0usize, 0usize);
        let mut lens = Vec::new();
        let mut by_chain: std::collections::HashMap<usize, usize> = Default::default();
        for t in trace.iter().step_by(env("HT_STEP", 1)) {
            let pk = Packet::new(t.header);
            let a = eo.evaluate("FORWARD", &pk).unwrap();
            let b = en.evaluate("FORWARD", &pk).unwrap();
            po += a.rules_visited();
            pn += b.rules_visited();
            lens.push(b.rules_visited());
            for st in &b.path {
                *by_chain.entry(st.chain).or_default() += 1;
            }
            let ra = a
                .decided_by
                .map(|s| &conv.ruleset.chains[s.chain].rules[s.rule]);
            let rb = b.decided_by.map(|s| &new.chains[s.chain].rules[s.rule]);
            if a.verdict != b.verdict || ra != rb {
                bad += 1;
            }
        }
        println!(
            "{set:9} depth {:?} in {} out {} ({:.2}x) chains +{} trees {} time {:.0} ms  path {:.1} -> {:.1} ({:.1}x)  differ {bad}  opaque {} inexact {}",
            new.jump_depth(),
            report.input_rules,
            report.output_rules,
            report.output_rules as f64 / report.input_rules as f64,
            report.chains_added,
            report.trees.len(),
            took.as_secs_f64() * 1e3,
            po as f64 / trace.len() as f64 * env("HT_STEP", 1) as f64,
            pn as f64 / trace.len() as f64 * env("HT_STEP", 1) as f64,
            po as f64 / pn as f64,
            conv.opaque.len(),
            conv.inexact.len(),
        );
        lens.sort_unstable();
        let q = |f: f64| lens[((lens.len() - 1) as f64 * f) as usize];
        if let Ok(out) = std::env::var("HT_WRITE") {
            std::fs::write(format!("{out}/{set}.orig"), conv.ruleset.to_restore()).unwrap();
            std::fs::write(format!("{out}/{set}.new"), new.to_restore()).unwrap();
            std::fs::write(format!("{out}/{set}.nft"), new.to_nft().unwrap()).unwrap();
        }
        println!(
            "   path p50 {} p90 {} p99 {} max {}",
            q(0.5),
            q(0.9),
            q(0.99),
            q(1.0)
        );
        let mut top: Vec<_> = by_chain.into_iter().collect();
        top.sort_by_key(|x| std::cmp::Reverse(x.1));
        for (c, n) in top.iter().take(5) {
            println!(
                "   chain {} ({} rules): {} steps",
                new.chains[*c].name,
                new.chains[*c].rules.len(),
                n
            );
        }
        for t in &report.trees {
            println!(
                "   tree {}@{} rules {} exact {} leaves {} depth {} emitted {}",
                t.chain, t.first, t.rules, t.transformable, t.leaves, t.depth, t.emitted
            );
        }
    }
}
