//! `netsift bench offload`: hardware-assisted filtering (Deri et al.) on the emulated NIC.
//!
//! 1. **Table 1 of the paper**, per frame size (64 … 1518 bytes), in one run:
//!    - *Test 1* (every frame matches the one rule, `udp dst port 5060`, and goes to user
//!      space): the host's cost per frame with a **software filter** (the capture copies every
//!      frame into a ring slot, then the filter runs on it) and with a **hardware filter** (the
//!      NIC steers the frame; the host only copies it), and the capture rate each sustains on
//!      one core as a percentage of 10 GbE line rate (capped at 100%).
//!    - *Test 2* (no frame matches): the host's CPU load at line rate with the software filter
//!      (copy + filter + reject, every frame) and with the hardware filter (the NIC drops every
//!      frame: no host work, "none").
//!
//!    The emulated NIC's own classification cost (key parse + table lookup, work a real NIC does
//!    in silicon) and, with root, the kernel's cost of the same drop as an XDP program
//!    (`BPF_PROG_TEST_RUN`, the kernel timing `repeat` runs) are reported beside it.
//! 2. **Rule install/remove latency** for tables of 1, 1,000 and 30,000 rules (precise 5-tuple
//!    rules, as RTC-Mon installs per call, and wildcard rules), on an `ntuple:30000` table, and
//!    through the rules text interface (`+(…)` / `-(id)` lines parsed and applied).

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

use netsift_bpf::{Filter, Rules};
use netsift_capture::generate::FrameBuilder;
use netsift_offload::compile::{Options, compile as offload};
use netsift_offload::nic::EmulatedNic;
use netsift_offload::{Action, Family, Match, Profile, Rule, RuleId, RuleTable, text};

/// 10 GbE line rate in frames per second for `size`-byte frames (preamble, SFD and inter-frame
/// gap: 20 bytes more on the wire).
fn line_rate_pps(size: usize) -> f64 {
    10e9 / ((size as f64 + 20.0) * 8.0)
}

/// UDP frames of `size` bytes (including the 4-byte FCS a NIC strips) to `dport`, from varying
/// sources.
fn frames(size: usize, dport: u16, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            FrameBuilder::new()
                .ipv4([198, 18, (i >> 8) as u8, i as u8], [198, 19, 0, 1])
                .udp(10_000 + (i % 1000) as u16, dport)
                .pad_to(size - 4)
                .build()
        })
        .collect()
}

/// Median over `samples` rounds of the ns per frame of `f` over all `frames`.
fn ns_per_frame(frames: &[Vec<u8>], samples: usize, mut f: impl FnMut(&[u8]) -> u64) -> f64 {
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            let mut sink = 0u64;
            for fr in frames {
                sink = sink.wrapping_add(f(fr));
            }
            black_box(sink);
            t.elapsed().as_secs_f64() * 1e9 / frames.len() as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// A capture ring: frames are copied into slots, as a capture that hands frames to user space.
struct Ring {
    slots: Vec<[u8; 2048]>,
    next: usize,
}

impl Ring {
    fn new() -> Ring {
        Ring {
            slots: vec![[0u8; 2048]; 4096],
            next: 0,
        }
    }

    fn copy(&mut self, frame: &[u8]) -> &[u8] {
        let i = self.next;
        self.next = (i + 1) % self.slots.len();
        let slot = &mut self.slots[i];
        let n = frame.len().min(slot.len());
        slot[..n].copy_from_slice(&frame[..n]);
        &slot[..n]
    }
}

const RULE_EXPR: &str = "udp dst port 5060";

fn table1(out: &mut String) -> Result<(), String> {
    let ctx = netsift_lang::Context::new(netsift_capture::LinkType::ETHERNET);
    let pred = netsift_lang::compile(RULE_EXPR, &ctx).map_err(|e| e.to_string())?;
    let prog =
        netsift_bpf::compile::compile(&pred, &Default::default()).map_err(|e| e.to_string())?;
    let filter = Filter::new(prog.clone(), Rules::Libpcap).map_err(|e| e.to_string())?;
    // The hardware filter: the rule as the compiler makes it for an 82599-like n-tuple NIC.
    let compiled = offload(&pred, &Options::new(Profile::Ntuple { rules: 1024 }))
        .map_err(|e| e.to_string())?;
    let mut nic = EmulatedNic::new(4, compiled.into_table());
    let xdp = kernel_drop(&pred);
    let _ = writeln!(
        out,
        "1. Table 1 (Deri et al.): one rule `{RULE_EXPR}`; host ns per frame on one core, capture \
         rate and CPU load at 10 GbE line rate\n"
    );
    let _ = writeln!(
        out,
        "{:>6} {:>10} | {:>9} {:>9} {:>7} {:>7} | {:>9} {:>8} {:>8} | {:>9} {:>9}",
        "frame",
        "line Mpps",
        "t1 sw ns",
        "t1 hw ns",
        "sw rate",
        "hw rate",
        "t2 sw ns",
        "sw load",
        "hw load",
        "NIC emu ns",
        "XDP ns"
    );
    let mut ring = Ring::new();
    for size in [64usize, 128, 256, 512, 1024, 1518] {
        let matching = frames(size, 5060, 2048);
        let other = frames(size, 9, 2048);
        // Check the paths agree before timing them.
        for f in &matching {
            if filter.run(f, f.len() as u32) == 0 || nic.receive(f, f.len() as u32).is_dropped() {
                return Err(format!("{size}: a matching frame was rejected"));
            }
        }
        for f in &other {
            if filter.run(f, f.len() as u32) != 0 || !nic.receive(f, f.len() as u32).is_dropped() {
                return Err(format!("{size}: a non-matching frame was accepted"));
            }
        }
        // Test 1: software = copy + filter; hardware = copy (the NIC classified).
        let t1_sw = ns_per_frame(&matching, 9, |f| {
            let s = ring.copy(f);
            u64::from(filter.run(s, s.len() as u32))
        });
        let t1_hw = ns_per_frame(&matching, 9, |f| ring.copy(f).len() as u64);
        // Test 2: software = copy + filter (rejects); hardware = nothing on the host.
        let t2_sw = ns_per_frame(&other, 9, |f| {
            let s = ring.copy(f);
            u64::from(filter.run(s, s.len() as u32))
        });
        let nic_ns = ns_per_frame(&other, 9, |f| {
            u64::from(nic.receive(f, f.len() as u32).is_dropped())
        });
        let line = line_rate_pps(size);
        let rate = |ns: f64| (1e9 / ns / line * 100.0).min(100.0);
        let load = |ns: f64| (ns * line / 1e9 * 100.0).min(100.0);
        let xdp_ns = match &xdp {
            Some(p) => kernel_ns(p, &other[0]).map_or("-".into(), |ns| format!("{ns:.1}")),
            None => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:>6} {:>10.2} | {:>9.1} {:>9.1} {:>6.1}% {:>6.1}% | {:>9.1} {:>7.1}% {:>8} | {:>9.1} {:>9}",
            size,
            line / 1e6,
            t1_sw,
            t1_hw,
            rate(t1_sw),
            rate(t1_hw),
            t2_sw,
            load(t2_sw),
            "none",
            nic_ns,
            xdp_ns
        );
    }
    let _ = writeln!(
        out,
        "\n(t1: every frame matches and is captured; t2: no frame matches. sw = the capture copies \
         every frame and runs the filter; hw = the NIC filters, the host copies only what it \
         delivers. NIC emu = the emulator's classification cost, done by the NIC in hardware; \
         XDP = the kernel dropping the frame in an XDP program, BPF_PROG_TEST_RUN, root only.)\n"
    );
    Ok(())
}

/// The filter as an XDP program (drop what it rejects), when the kernel lets us load one.
fn kernel_drop(pred: &netsift_lang::Pred) -> Option<netsift_ebpf::LoadedProgram> {
    let opts = netsift_ebpf::compile::Options::new(netsift_ebpf::ProgType::Xdp);
    let prog = netsift_ebpf::compile::from_pred(pred, &Default::default(), &opts).ok()?;
    prog.load(&netsift_ebpf::LoadOptions::default()).ok()
}

/// Kernel-timed ns per run of `prog` on `frame`.
fn kernel_ns(prog: &netsift_ebpf::LoadedProgram, frame: &[u8]) -> Option<f64> {
    let mut run = netsift_ebpf::TestRun::new(frame);
    run.repeat = 100_000;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let out = prog.test_run(&run).ok()?;
        best = best.min(f64::from(out.duration_ns));
    }
    Some(best)
}

/// `n` distinct precise IPv4 UDP rules (an RTP flow each), dropping.
fn precise_rules(n: usize) -> Vec<Rule> {
    (0..n)
        .map(|i| {
            let m = Match::new(Family::V4)
                .with_proto(17)
                .try_src(
                    std::net::IpAddr::from([198, 18, (i >> 8) as u8, i as u8]),
                    Family::V4.full_mask(),
                )
                .and_then(|m| {
                    m.try_dst(
                        std::net::IpAddr::from([198, 19, 0, 1]),
                        Family::V4.full_mask(),
                    )
                })
                .map(|m| {
                    m.with_src_port(16_384 + (i % 16_000) as u16)
                        .with_dst_port(5004)
                })
                .unwrap_or_else(|_| Match::new(Family::V4));
            Rule::new(RuleId(i as u32 + 1), m, Action::Queue((i % 4) as u16))
        })
        .collect()
}

/// `n` distinct wildcard rules (a /24 source and a destination port each).
fn wildcard_rules(n: usize) -> Vec<Rule> {
    (0..n)
        .map(|i| {
            let m = Match::new(Family::V4)
                .with_proto(17)
                .try_src(
                    std::net::IpAddr::from([10, (i >> 8) as u8, i as u8, 0]),
                    Family::V4.prefix_mask(24),
                )
                .map(|m| m.with_dst_port(1 + (i % 60_000) as u16))
                .unwrap_or_else(|_| Match::new(Family::V4));
            Rule::new(RuleId(i as u32 + 1), m, Action::Drop).with_priority((i % 8) as u8)
        })
        .collect()
}

/// ns per add and per remove of `rules` into an empty table (median of `rounds`).
fn add_remove_ns(rules: &[Rule], rounds: usize) -> Result<(f64, f64), String> {
    let mut adds = Vec::new();
    let mut removes = Vec::new();
    for _ in 0..rounds {
        let mut t = RuleTable::for_profile(Profile::Ntuple { rules: 30_000 });
        let start = Instant::now();
        for r in rules {
            t.add(*r).map_err(|e| e.to_string())?;
        }
        adds.push(start.elapsed().as_secs_f64() * 1e9 / rules.len() as f64);
        let start = Instant::now();
        for r in rules {
            t.remove(r.id).map_err(|e| e.to_string())?;
        }
        removes.push(start.elapsed().as_secs_f64() * 1e9 / rules.len() as f64);
    }
    adds.sort_by(f64::total_cmp);
    removes.sort_by(f64::total_cmp);
    Ok((adds[adds.len() / 2], removes[removes.len() / 2]))
}

/// ns per line of a rules-text script adding then removing `rules` (parse + apply).
fn text_ns(rules: &[Rule]) -> Result<f64, String> {
    let mut script = String::new();
    for r in rules {
        script.push_str(&text::format_rule(r).map_err(|e| e.to_string())?);
        script.push('\n');
    }
    for r in rules {
        let _ = writeln!(script, "-({})", r.id);
    }
    let mut t = RuleTable::for_profile(Profile::Ntuple { rules: 30_000 });
    let start = Instant::now();
    let parsed = text::parse(&script).map_err(|e| e.to_string())?;
    let results = parsed.apply(&mut t);
    let ns = start.elapsed().as_secs_f64() * 1e9 / (2 * rules.len()) as f64;
    if results.len() != 2 * rules.len() || !t.is_empty() {
        return Err("the rules text script did not apply cleanly".into());
    }
    Ok(ns)
}

fn latency(out: &mut String) -> Result<(), String> {
    let _ = writeln!(
        out,
        "2. Rule install/remove latency (ntuple:30000 table; ns per rule, median of rounds)\n"
    );
    let _ = writeln!(
        out,
        "{:>7} {:>13} {:>13} {:>13} {:>13} {:>13}",
        "rules", "precise add", "precise del", "wildcard add", "wildcard del", "text +/- line"
    );
    for n in [1usize, 1_000, 30_000] {
        let rounds = if n == 1 { 2001 } else { 5 };
        let (pa, pr) = add_remove_ns(&precise_rules(n), rounds)?;
        let (wa, wr) = add_remove_ns(&wildcard_rules(n), rounds)?;
        let tx = text_ns(&precise_rules(n))?;
        let _ = writeln!(
            out,
            "{n:>7} {pa:>13.0} {pr:>13.0} {wa:>13.0} {wr:>13.0} {tx:>13.0}"
        );
    }
    Ok(())
}

/// The offload suite.
pub fn suite() -> Result<String, String> {
    let mut out =
        String::from("suite offload: hardware-assisted filtering on the emulated NIC\n\n");
    table1(&mut out)?;
    latency(&mut out)?;
    Ok(out)
}
