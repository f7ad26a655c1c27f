//! Try PaCuts parameters on the ClassBench sets: `PA_BINTH=8 PA_SPFAC=2 … cargo run --release
//! --example pacuts_tune -- acl1_10K fw1_10K ipc1_10K` (rule sets from `NETSIFT_DATA` or
//! `../shared/data`).

use std::time::Instant;

use netsift_classify::pacuts::{PaCuts, Params};
use netsift_classify::{Classifier, classbench};

fn env(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn main() {
    let data = std::env::var("NETSIFT_DATA").unwrap_or_else(|_| "../shared/data".into());
    let d = Params::default();
    let p = Params {
        binth: env("PA_BINTH", d.binth),
        spfac: env("PA_SPFAC", d.spfac),
        small_ip_bits: env("PA_SMALL_IP", d.small_ip_bits.into()) as u8,
        small_port_bits: env("PA_SMALL_PORT", d.small_port_bits.into()) as u8,
        min_group: env("PA_MIN_GROUP", d.min_group),
        budget_per_rule: env("PA_BUDGET", d.budget_per_rule),
        fanout: env("PA_FANOUT", d.fanout),
        table_bits: env("PA_TABLE_BITS", d.table_bits.into()) as u8,
        table_min_rules: env("PA_TABLE_MIN", d.table_min_rules),
    };
    for set in std::env::args().skip(1) {
        let dir = format!("{data}/classbench/ehzuf-HyperSplit");
        let rules = classbench::parse_rules(
            &std::fs::read_to_string(format!("{dir}/rules/{set}")).expect("rules"),
        )
        .expect("parse");
        let trace = classbench::parse_trace(
            &std::fs::read_to_string(format!("{dir}/traces/{set}_trace")).expect("trace"),
        )
        .expect("parse");
        let t0 = Instant::now();
        let e = PaCuts::new(&rules, p);
        let build = t0.elapsed();
        let bad = trace
            .iter()
            .filter(|t| e.classify(&t.header).map(|r| r + 1) != t.answer)
            .count();
        let (mut pn, mut ps) = (0, 0);
        for t in &trace {
            let (a, b) = e.path(&t.header);
            pn += a;
            ps += b;
        }
        let mut best = f64::MAX;
        for _ in 0..20 {
            let t = Instant::now();
            let mut sink = 0usize;
            for h in &trace {
                sink = sink.wrapping_add(e.classify(std::hint::black_box(&h.header)).unwrap_or(0));
            }
            std::hint::black_box(sink);
            best = best.min(t.elapsed().as_secs_f64() / trace.len() as f64);
        }
        let hs: Vec<_> = trace.iter().map(|t| t.header).collect();
        let mut out = vec![None; hs.len()];
        let mut bbest = f64::MAX;
        for _ in 0..20 {
            let t = Instant::now();
            e.classify_all(std::hint::black_box(&hs), &mut out);
            std::hint::black_box(&out);
            bbest = bbest.min(t.elapsed().as_secs_f64() / trace.len() as f64);
        }
        let bad_batch = trace
            .iter()
            .zip(&out)
            .filter(|(t, o)| o.map(|r| r + 1) != t.answer)
            .count();
        println!("{set:9} batch {:6.2} Mpps bad {bad_batch}", 1e-6 / bbest);
        let s = e.stats();
        println!(
            "{set:9} {:6.2} Mpps {:5} KB {:5.1} ms  path {:.1} nodes {:.1} slots bad {bad} groups {:?} nodes {} depth {} leaves {} slots {}",
            1e-6 / best,
            e.memory() / 1024,
            build.as_secs_f64() * 1e3,
            pn as f64 / trace.len() as f64,
            ps as f64 / trace.len() as f64,
            s.groups,
            s.nodes,
            s.depth,
            s.leaves,
            s.slots
        );
    }
}
