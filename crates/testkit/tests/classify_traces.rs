//! Every ClassBench trace of the shared data against its rule set: the trace's last column is
//! the 1-based index of the first matching rule, and every engine must give it for every header.

use std::fs;

use netsift_classify::{Classifier, Header, classbench, engine, hicuts, linear::Linear, pacuts};
use netsift_testkit::data;

/// The nine (rule set, trace) pairs of `classbench/ehzuf-HyperSplit`.
fn pairs() -> Vec<(
    String,
    Vec<netsift_classify::Rule>,
    Vec<classbench::TraceEntry>,
)> {
    let root = data::dir().join("classbench/ehzuf-HyperSplit");
    let mut out = Vec::new();
    for set in [
        "acl1", "acl1_1K", "acl1_10K", "fw1", "fw1_1K", "fw1_10K", "ipc1", "ipc1_1K", "ipc1_10K",
    ] {
        let rules = fs::read_to_string(root.join("rules").join(set))
            .unwrap_or_else(|e| panic!("{set}: {e}"));
        let trace = fs::read_to_string(root.join("traces").join(format!("{set}_trace")))
            .unwrap_or_else(|e| panic!("{set}_trace: {e}"));
        let rules = classbench::parse_rules(&rules).unwrap_or_else(|e| panic!("{set}: {e}"));
        let trace = classbench::parse_trace(&trace).unwrap_or_else(|e| panic!("{set}_trace: {e}"));
        out.push((set.to_string(), rules, trace));
    }
    out
}

#[test]
fn linear_gives_every_traces_answer() {
    let mut total = 0;
    for (set, rules, trace) in pairs() {
        assert!(!rules.is_empty() && !trace.is_empty(), "{set}: empty");
        let engine = Linear::new(&rules);
        for (i, t) in trace.iter().enumerate() {
            let answer = t
                .answer
                .unwrap_or_else(|| panic!("{set}_trace line {}: no answer", i + 1));
            assert_eq!(
                engine.classify(&t.header).map(|r| r + 1),
                Some(answer),
                "{set}_trace line {}: {}",
                i + 1,
                t.header
            );
        }
        println!(
            "{set}: {} rules, {} headers, 0 mismatches",
            rules.len(),
            trace.len()
        );
        total += trace.len();
    }
    assert!(total > 300_000, "only {total} headers");
}

#[test]
fn hicuts_gives_every_traces_answer() {
    for (set, rules, trace) in pairs() {
        let t0 = std::time::Instant::now();
        let tree = hicuts::HiCuts::new(&rules, hicuts::Params::default());
        let built = t0.elapsed();
        for (i, t) in trace.iter().enumerate() {
            assert_eq!(
                tree.classify(&t.header).map(|r| r + 1),
                t.answer,
                "{set}_trace line {}: {}",
                i + 1,
                t.header
            );
        }
        println!(
            "{set}: HiCuts {} nodes, {} KB, built in {:.1} ms, 0 mismatches",
            tree.nodes(),
            tree.memory() / 1024,
            built.as_secs_f64() * 1e3
        );
    }
}

#[test]
fn hypercuts_pacuts_and_auto_give_every_traces_answer() {
    for (set, rules, trace) in pairs() {
        for kind in [
            engine::Kind::HyperCuts,
            engine::Kind::PaCuts,
            engine::Kind::Auto,
        ] {
            let b = engine::build(kind, &rules);
            for (i, t) in trace.iter().enumerate() {
                assert_eq!(
                    b.engine.classify(&t.header).map(|r| r + 1),
                    t.answer,
                    "{set}_trace line {}: {kind} ({}): {}",
                    i + 1,
                    b.kind,
                    t.header
                );
            }
            println!(
                "{set}: {kind} -> {}, {} KB, built in {:.1} ms, 0 mismatches",
                b.kind,
                b.memory / 1024,
                b.build_time.as_secs_f64() * 1e3
            );
        }
    }
}

#[test]
fn pacuts_batched_and_portable_lookups_give_every_traces_answer() {
    for (set, rules, trace) in pairs() {
        let fast = pacuts::PaCuts::new(&rules, pacuts::Params::default());
        let portable = fast.clone().without_simd();
        let headers: Vec<Header> = trace.iter().map(|t| t.header).collect();
        for e in [&fast, &portable] {
            let mut out = vec![None; headers.len()];
            e.classify_all(&headers, &mut out);
            for (i, (t, o)) in trace.iter().zip(&out).enumerate() {
                assert_eq!(
                    o.map(|r| r + 1),
                    t.answer,
                    "{set}_trace line {} (simd {}): {}",
                    i + 1,
                    e.simd(),
                    t.header
                );
            }
        }
        for (i, t) in trace.iter().enumerate() {
            assert_eq!(
                portable.classify(&t.header).map(|r| r + 1),
                t.answer,
                "{set}_trace line {} portable: {}",
                i + 1,
                t.header
            );
        }
    }
}

/// The neurocuts ClassBench sets carry the generator's sixth field, TCP flags (value/mask):
/// every engine agrees with linear on headers at every rule's corners with the rule's flags,
/// with no flags and with others.
#[test]
fn every_engine_agrees_on_the_six_field_sets_with_tcp_flags() {
    let root = data::dir().join("classbench/neurocuts-classbench");
    let mut with_flags = 0;
    for set in [
        "acl1_1k", "fw1_1k", "ipc1_1k", "acl1_10k", "fw1_10k", "ipc1_10k",
    ] {
        let text = fs::read_to_string(root.join(set)).unwrap_or_else(|e| panic!("{set}: {e}"));
        let rules = classbench::parse_rules(&text).unwrap_or_else(|e| panic!("{set}: {e}"));
        with_flags += rules.iter().filter(|r| !r.flags.is_any()).count();
        let lin = Linear::new(&rules);
        let mut headers = Vec::new();
        for (i, r) in rules
            .iter()
            .enumerate()
            .step_by(if rules.len() > 2000 { 7 } else { 1 })
        {
            for (k, flags) in [r.flags.value, 0, 0x1200, 0x0200 | (i as u16 & 0xff)]
                .into_iter()
                .enumerate()
            {
                let corner = |d: usize| {
                    let f = r.fields[d];
                    if (k + d) % 2 == 0 { f.lo } else { f.hi }
                };
                headers.push(Header(std::array::from_fn(corner), flags));
            }
        }
        let want: Vec<Option<usize>> = headers.iter().map(|h| lin.classify(h)).collect();
        for kind in [
            engine::Kind::HiCuts,
            engine::Kind::HyperCuts,
            engine::Kind::PaCuts,
        ] {
            let b = engine::build(kind, &rules);
            for (h, w) in headers.iter().zip(&want) {
                assert_eq!(b.engine.classify(h), *w, "{set}: {kind}: {h}");
            }
        }
        let pa = pacuts::PaCuts::new(&rules, pacuts::Params::default());
        let mut out = vec![None; headers.len()];
        pa.classify_all(&headers, &mut out);
        assert_eq!(out, want, "{set}: pacuts batched");
        pa.without_simd().classify_all(&headers, &mut out);
        assert_eq!(out, want, "{set}: pacuts portable");
        let hits = want.iter().filter(|w| w.is_some()).count();
        println!(
            "{set}: {} rules, {} headers ({hits} matched), all engines agree",
            rules.len(),
            headers.len()
        );
    }
    assert!(with_flags > 9_000, "only {with_flags} rules test TCP flags");
}
