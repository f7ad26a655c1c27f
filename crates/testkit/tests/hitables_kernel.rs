//! HiTables against the kernel: for the ClassBench acl1, fw1 and ipc1 10K sets, the original
//! rule set (converted with `from_classbench`) and its HiTables rewrite are loaded into the
//! `INPUT` chain of a network namespace — with `iptables-restore` (nf_tables backend) and, as
//! an `nft -f` script, with `nft` — and the set's whole trace (90,000 to 97,000 headers) is sent
//! across a veth pair as real TCP, UDP and other IPv4 packets. Every rule's packet counter
//! (summed per `cbN` comment: the rewrite has copies of a rule in several leaves) and the
//! policy's must be what the iptables evaluator predicts, for both rule sets and both loaders.
//! Every ClassBench rule ends evaluation (`ACCEPT` or `DROP`), so a rule counts exactly the
//! packets it decides: equal counts mean the kernel decides the same packets by the same
//! original rules, hence with the same verdicts, in both sets.
//!
//! Packets may only use 198.18.0.0/15, so the sets' addresses are compressed first
//! (`netsift_testkit::hitables::compress`); that the compressed set classifies every compressed
//! header as the original set classifies the header is checked with the linear engine, on the
//! whole trace, before the kernel is involved. The sender waits for a marker packet after each
//! chunk of frames, so the counters are read once every frame has been through `INPUT`; `b`'s
//! receive counter must also account for every frame sent.
//!
//! Needs root, iproute2, iptables (nf_tables backend) and nftables (`scripts/test` installs
//! them); the failure message says which is missing. Each set's namespace is deleted on drop,
//! also when the test fails. About a minute on 2 cores (the original sets take 10K-rule walks).

use std::time::{Duration, Instant};

use netsift_classify::iptables::{self, ConvertOptions, Policy, Protocols, Ruleset};
use netsift_classify::linear::Linear;
use netsift_classify::{Classifier, Field, Header, Range, classbench, hitables as ht};
use netsift_testkit::hitables::{self, DeliverOptions, Kernel, MARKER_COMMENT};

fn kernel() -> Kernel {
    Kernel::new()
        .unwrap_or_else(|e| panic!("cannot set up the namespace for HiTables in the kernel: {e}"))
}

fn check_set(set: &str, policy: Policy) {
    if let Err(e) = hitables::check_tools() {
        panic!("this test loads rule sets into the kernel of a namespace, and {e}");
    }
    let t0 = Instant::now();
    let (rules, trace) = classbench::load_pair(set).unwrap_or_else(|e| panic!("{set}: {e}"));
    let c = hitables::compress(&rules).unwrap_or_else(|e| panic!("{set}: {e}"));
    // The compression keeps every classification: the whole trace, linear engine.
    let (orig, comp) = (Linear::new(&rules), Linear::new(&c.rules));
    for t in &trace {
        let h = c.header(&t.header);
        assert!(
            h.0[..2]
                .iter()
                .all(|&a| (hitables::BASE..hitables::BASE + hitables::SPAN).contains(&a)),
            "{set}: {} maps to {h}, outside 198.18.0.0 - 198.19.254.255",
            t.header
        );
        let want = orig.classify(&t.header);
        assert_eq!(want.map(|r| r + 1), t.answer, "{set}: {}", t.header);
        assert_eq!(
            comp.classify(&h),
            want,
            "{set}: {} (compressed {h}) is classified differently",
            t.header
        );
    }
    // The policy gets the packets of the set's last rule, when that rule matches everything (all
    // three sets end with one; 15 or 16 headers of their traces), so that the policy's counter
    // is checked too.
    let mut kept = c.rules.clone();
    if kept
        .last()
        .is_some_and(|r| Field::ALL.iter().all(|&f| r.range(f) == Range::any(f)))
    {
        kept.pop();
    }
    let conv = iptables::from_classbench(
        &kept,
        &ConvertOptions {
            chain: "INPUT".into(),
            policy,
            transformable_protocols: Protocols::tcp_udp(),
        },
    );
    let original = conv.ruleset;
    let (rewritten, report) = ht::rewrite(&original, &ht::Params::default())
        .unwrap_or_else(|e| panic!("{set}: rewrite: {e}"));
    let headers: Vec<Header> = trace.iter().map(|t| c.header(&t.header)).collect();
    let want = hitables::expected(&original, "INPUT", &headers)
        .unwrap_or_else(|e| panic!("{set}: original: {e}"));
    let want_rw = hitables::expected(&rewritten, "INPUT", &headers)
        .unwrap_or_else(|e| panic!("{set}: rewritten: {e}"));
    assert_eq!(
        want_rw, want,
        "{set}: the evaluator tells the two sets apart"
    );
    assert!(
        want.policy.unwrap_or(0) > 0,
        "{set}: no header reaches the policy"
    );
    println!(
        "{set}: {} rules ({} left out as inexact, {} opaque), addresses {}; rewritten: {} rules \
         in {} chains; {} headers, {} decided by the {} policy; prepared in {:.1} s",
        rules.len(),
        conv.inexact.len(),
        conv.opaque.len(),
        hitables::describe(&c),
        report.output_rules,
        rewritten.chains.len(),
        headers.len(),
        want.policy.unwrap_or(0),
        policy.name(),
        t0.elapsed().as_secs_f64()
    );

    let k = kernel();
    let frames: Vec<Vec<u8>> = headers
        .iter()
        .map(|h| hitables::frame(h, k.a_mac, k.b_mac))
        .collect();
    let sets: [(&str, &Ruleset); 2] = [("original", &original), ("rewritten", &rewritten)];
    for nft in [false, true] {
        for (which, rs) in sets {
            let t = Instant::now();
            let what = format!(
                "{set} {which} ({})",
                if nft { "nft -f" } else { "iptables-restore" }
            );
            let loaded = if nft {
                k.load_nft(rs)
            } else {
                k.load_iptables(rs)
            };
            loaded.unwrap_or_else(|e| panic!("{what}: {e}"));
            let load_s = t.elapsed().as_secs_f64();
            let before = k.link_counters().unwrap();
            // One pass, however slow the machine.
            let once = DeliverOptions {
                max_time: Duration::from_secs(600),
                ..DeliverOptions::default()
            };
            let d = k
                .deliver(&frames, &once)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let after = k.link_counters().unwrap();
            assert!(
                d.complete && d.frames == frames.len() as u64,
                "{what}: {d:?}"
            );
            assert_eq!(
                after[0] - before[0],
                d.frames + d.markers,
                "{what}: `b` received {} frames of {} sent",
                after[0] - before[0],
                d.frames + d.markers
            );
            assert_eq!(
                (after[1] - before[1], after[2] - before[2]),
                (0, 0),
                "{what}: the veth pair dropped frames"
            );
            let got = if nft {
                k.nft_counts()
            } else {
                k.iptables_counts()
            }
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            hitables::compare(&got, &want, d.frames, d.markers)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            println!(
                "{what}: loaded in {load_s:.1} s, {} packets in {:.2} s, every count as predicted \
                 ({} rules counted packets)",
                d.frames,
                d.secs,
                got.nonzero_without(&[MARKER_COMMENT]).len()
            );
        }
    }
    println!("{set}: done in {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn acl1_10k_original_and_rewritten_agree_in_the_kernel() {
    check_set("acl1_10K", Policy::Drop);
}

#[test]
fn fw1_10k_original_and_rewritten_agree_in_the_kernel() {
    check_set("fw1_10K", Policy::Accept);
}

#[test]
fn ipc1_10k_original_and_rewritten_agree_in_the_kernel() {
    check_set("ipc1_10K", Policy::Drop);
}
