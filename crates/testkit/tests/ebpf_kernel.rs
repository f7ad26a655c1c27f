//! netsift's eBPF against libpcap 1.10.3 and the interpreter, in the running kernel (needs root;
//! fails saying so without it).
//!
//! **Kernel agreement** (`corpus_verdicts_equal_libpcap_in_the_kernel`): every EN10MB
//! expression of libpcap's filter test suite (`corpus::cases`) that netsift compiles, at both
//! optimisation levels, is translated to eBPF and loaded twice:
//!
//! - as SCHED_CLS returning the classic value unchanged, with `len` read from `wire_len`, run
//!   through `BPF_PROG_TEST_RUN` with the packet's wire length in the context: the kernel's
//!   return value must equal libpcap's `bpf_filter` result exactly (0 or the snap length);
//! - as XDP returning XDP_PASS / XDP_DROP: the verdict must be libpcap's for the packet as XDP
//!   sees it (its length is its captured length);
//! - as SOCKET_FILTER (`LD_ABS`/`LD_IND`), run on the packet behind a fake 14-byte Ethernet
//!   header, which the kernel's test harness consumes: the program sees the packet from its
//!   first byte, as a socket filter on an AF_PACKET `SOCK_RAW` socket does, and must return
//!   libpcap's value for it (its length is its captured length).
//!
//! Every packet of every shared Ethernet capture is run through all three, except those the
//! kernel's test harness cannot take (counted and printed): shorter than 14 bytes (XDP and
//! SCHED_CLS);
//! for SCHED_CLS, IPv4 frames shorter than 34 and IPv6 frames shorter than 54 bytes (the
//! harness wants the network header), frames longer than 3,712 bytes, and records whose wire
//! length is below their captured length or above 65,536 (the context refuses those); for
//! XDP, frames longer
//! than the 3,520 bytes it keeps linear; for SOCKET_FILTER, frames longer than 3,698 bytes.
//! Where a record's wire length is one the SCHED_CLS context refuses, the test run and
//! libpcap are both given the nearest length it takes. Ancillary loads (`inbound`, `ifindex`) are translated
//! with libpcap's capture-file meaning (out of bounds, reject), since the kernel's packet type
//! of a test packet is not a capture's.
//!
//! **Random programs** (`random_programs_agree_with_the_interpreter`): validator-approved
//! random classic programs (odd offsets, ancillary offsets, loops) on random packets, as
//! SCHED_CLS (direct access and `LD_ABS`), XDP and SOCKET_FILTER, against the interpreter.
//!
//! About 35-45 s on 2 cores, the two tests side by side (22 million test runs; loading is cheap,
//! about 70 µs a program; random loops that never end cost the whole budget on each run).

use std::collections::BTreeMap;
use std::time::Instant;

use netsift_bpf::{Filter, Program as Classic, Rules, compile};
use netsift_ebpf::compile::{self as ebpf, Access, Ancillary, Len, Return};
use netsift_ebpf::{LoadOptions, LoadedProgram, ProgType, SkbContext, TestRun, tc_act, xdp_action};
use netsift_lang::{Context, compile as front};
use netsift_testkit::progen::{random_program, random_program_wide};
use netsift_testkit::{corpus, oracle, rng::Rng};

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!(
            "the eBPF kernel agreement tests load programs with bpf(2) and need root (CAP_BPF, \
             CAP_NET_ADMIN, CAP_PERFMON); run them as root (CI does)"
        );
    }
}

/// libpcap's DLT_EN10MB.
const EN10MB: i32 = 1;

/// Translate and load, or fail with the listing.
fn load(classic: &Classic, opts: &ebpf::Options, what: &str) -> (LoadedProgram, String) {
    let prog = ebpf::from_classic(classic, opts).unwrap_or_else(|e| {
        panic!(
            "{what}: translation for {} failed: {e}\nclassic:\n{}",
            opts.prog_type,
            netsift_bpf::asm::dump(classic, netsift_bpf::asm::Format::Asm)
        )
    });
    let loaded = prog
        .load(&LoadOptions {
            name: "netsift_corpus".into(),
            ..Default::default()
        })
        .unwrap_or_else(|e| {
            panic!(
                "{what}: the kernel refuses the {} program: {e}\nclassic:\n{}\neBPF:\n{prog}",
                opts.prog_type,
                netsift_bpf::asm::dump(classic, netsift_bpf::asm::Format::Asm)
            )
        });
    (loaded, prog.to_string())
}

/// Why the test harness cannot take a packet for SCHED_CLS, if it cannot.
fn tc_skip(d: &[u8]) -> Option<&'static str> {
    if d.len() < 14 {
        Some("SCHED_CLS and XDP: shorter than an Ethernet header")
    } else if d.len() > 3712 {
        Some("SCHED_CLS: longer than 3,712 bytes")
    } else if !ProgType::SchedCls.test_run_takes(d) {
        Some("SCHED_CLS: IPv4 < 34 or IPv6 < 54 bytes")
    } else {
        None
    }
}

/// The wire length a SCHED_CLS test run can be given for a packet: the context takes no less
/// than the packet's length and no more than 65,536.
fn tc_wire_len(d: &[u8], wire: u32) -> u32 {
    wire.clamp(d.len() as u32, 65_536)
}

fn xdp_skip(d: &[u8]) -> Option<&'static str> {
    if d.len() < 14 {
        Some("SCHED_CLS and XDP: shorter than an Ethernet header")
    } else if !ProgType::Xdp.test_run_takes(d) {
        Some("XDP: longer than 3,520 bytes")
    } else {
        None
    }
}

#[test]
fn corpus_verdicts_equal_libpcap_in_the_kernel() {
    require_root();
    let t0 = Instant::now();
    let by_dlt = corpus::packets_by_dlt();
    let packets = by_dlt
        .get(&EN10MB)
        .unwrap_or_else(|| panic!("no Ethernet packets in the shared captures"));
    let mut skipped: BTreeMap<&str, u64> = BTreeMap::new();
    let tc_ok: Vec<bool> = packets
        .iter()
        .map(|(d, _)| {
            let s = tc_skip(d);
            if let Some(why) = s {
                *skipped.entry(why).or_default() += 1;
            }
            s.is_none()
        })
        .collect();
    let xdp_ok: Vec<bool> = packets
        .iter()
        .map(|(d, _)| {
            let s = xdp_skip(d);
            if let Some(why) = s.filter(|w| !w.contains("shorter")) {
                *skipped.entry(why).or_default() += 1;
            }
            s.is_none()
        })
        .collect();
    // A socket filter sees what follows the test packet's Ethernet header: give it a fake one
    // (Ethertype 0x88b5, reserved for experiments, so that no network header is required).
    let sock_ok: Vec<bool> = packets
        .iter()
        .map(|(d, _)| {
            let ok = d.len() + 14 <= 3712;
            if !ok {
                *skipped
                    .entry("SOCKET_FILTER: longer than 3,698 bytes")
                    .or_default() += 1;
            }
            ok
        })
        .collect();
    let truncated = packets
        .iter()
        .filter(|(d, w)| *w as usize != d.len())
        .count();
    let clamped = packets
        .iter()
        .zip(&tc_ok)
        .filter(|((d, w), ok)| **ok && tc_wire_len(d, *w) != *w)
        .count();
    let cases: Vec<corpus::Case> = corpus::cases()
        .into_iter()
        .filter(|c| c.dlt == "EN10MB")
        .collect();
    let (mut programs, mut not_compiled, mut tc_runs, mut xdp_runs, mut sock_runs) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut interp_runs = 0u64;
    let mut exprs = 0u64;
    for case in &cases {
        let mut ctx = Context::new(corpus::link_type(&case.dlt));
        ctx.snaplen = case.snaplen;
        let Ok(pred) = front(&case.expr, &ctx) else {
            not_compiled += 1;
            continue;
        };
        let mut compiled_any = false;
        for optimize in [false, true] {
            let what = format!("[EN10MB] {:?} -O{}", case.expr, u8::from(optimize));
            let copts = compile::Options {
                optimize,
                snaplen: case.snaplen,
            };
            let Ok(classic) = compile::compile(&pred, &copts) else {
                continue;
            };
            let theirs = oracle::compile(EN10MB, case.snaplen as i32, &case.expr, optimize)
                .unwrap_or_else(|e| panic!("{what}: libpcap rejects what netsift compiles: {e}"));
            compiled_any = true;
            programs += 1;
            let interp = Filter::new(classic.clone(), Rules::Libpcap).unwrap();

            let mut tc_opts = ebpf::Options::new(ProgType::SchedCls);
            tc_opts.result = Return::Classic;
            tc_opts.ancillary = Ancillary::Absent;
            tc_opts.len = Len::Wire;
            let (tc, tc_listing) = load(&classic, &tc_opts, &what);
            let mut xdp_opts = ebpf::Options::new(ProgType::Xdp);
            xdp_opts.ancillary = Ancillary::Absent;
            let (xdp, xdp_listing) = load(&classic, &xdp_opts, &what);
            let mut sock_opts = ebpf::Options::new(ProgType::SocketFilter);
            sock_opts.ancillary = Ancillary::Absent;
            let (sock, sock_listing) = load(&classic, &sock_opts, &what);

            let mut framed = Vec::with_capacity(4096);
            for (i, (d, wire)) in packets.iter().enumerate() {
                let want = oracle::filter(&theirs, d, *wire).unwrap();
                let mine = interp.run(d, *wire);
                assert_eq!(
                    mine, want,
                    "{what}: packet {i}: interpreter {mine}, libpcap {want}"
                );
                interp_runs += 1;
                if tc_ok[i] {
                    // libpcap is given the wire length the kernel gets (they differ for 412
                    // packets: fuzzed records claiming more than 64 KiB, or less than they hold).
                    let wire = tc_wire_len(d, *wire);
                    let want = oracle::filter(&theirs, d, wire).unwrap();
                    let ctx = SkbContext {
                        wire_len: wire,
                        ..Default::default()
                    }
                    .to_bytes();
                    let got = tc
                        .test_run(&TestRun {
                            data: d,
                            repeat: 1,
                            ctx: Some(&ctx),
                        })
                        .unwrap_or_else(|e| panic!("{what}: packet {i}: {e}"))
                        .retval;
                    assert_eq!(
                        got,
                        want,
                        "{what}: packet {i} ({} of {wire} bytes): SCHED_CLS returns {got}, \
                         libpcap {want}\nclassic:\n{}\neBPF:\n{tc_listing}",
                        d.len(),
                        netsift_bpf::asm::dump(&classic, netsift_bpf::asm::Format::Asm)
                    );
                    tc_runs += 1;
                }
                if xdp_ok[i] {
                    let want = oracle::filter(&theirs, d, d.len() as u32).unwrap();
                    let want = if want == 0 {
                        xdp_action::DROP
                    } else {
                        xdp_action::PASS
                    };
                    let got = xdp
                        .run(d)
                        .unwrap_or_else(|e| panic!("{what}: packet {i}: {e}"));
                    assert_eq!(
                        got,
                        want,
                        "{what}: packet {i} ({} bytes): XDP returns {got}, want {want} \
                         (XDP_PASS = 2, XDP_DROP = 1)\nclassic:\n{}\neBPF:\n{xdp_listing}",
                        d.len(),
                        netsift_bpf::asm::dump(&classic, netsift_bpf::asm::Format::Asm)
                    );
                    xdp_runs += 1;
                }
                if sock_ok[i] {
                    let want = oracle::filter(&theirs, d, d.len() as u32).unwrap();
                    framed.clear();
                    framed.extend_from_slice(&[0; 12]);
                    framed.extend_from_slice(&[0x88, 0xb5]);
                    framed.extend_from_slice(d);
                    let got = sock
                        .run(&framed)
                        .unwrap_or_else(|e| panic!("{what}: packet {i}: {e}"));
                    assert_eq!(
                        got,
                        want,
                        "{what}: packet {i} ({} bytes): SOCKET_FILTER returns {got}, libpcap \
                         {want}\nclassic:\n{}\neBPF:\n{sock_listing}",
                        d.len(),
                        netsift_bpf::asm::dump(&classic, netsift_bpf::asm::Format::Asm)
                    );
                    sock_runs += 1;
                }
            }
        }
        if compiled_any {
            exprs += 1;
        }
    }
    let tc_packets = tc_ok.iter().filter(|&&b| b).count();
    let xdp_packets = xdp_ok.iter().filter(|&&b| b).count();
    let sock_packets = sock_ok.iter().filter(|&&b| b).count();
    println!(
        "eBPF in the kernel = libpcap 1.10.3: {} EN10MB expressions, {exprs} compiled by netsift \
         ({not_compiled} rejected), {programs} programs (-O0 and -O1), each loaded as SCHED_CLS, \
         XDP and SOCKET_FILTER; {} Ethernet packets ({truncated} cut short by the capture's \
         snap length): {tc_packets} run as SCHED_CLS ({clamped} with a wire length clamped to \
         what the test harness takes), {xdp_packets} as XDP, {sock_packets} as SOCKET_FILTER; \
         {tc_runs} SCHED_CLS runs (exact return values), {xdp_runs} XDP runs (verdicts), \
         {sock_runs} SOCKET_FILTER runs (exact return values), {interp_runs} interpreter runs; \
         0 disagreements; {:.1} s",
        cases.len(),
        packets.len(),
        t0.elapsed().as_secs_f64()
    );
    for (why, n) in &skipped {
        println!("  packets not run: {why}: {n}");
    }
    assert!(exprs > 400, "the corpus is smaller than expected: {exprs}");
}

fn random_packets(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let len = 14 + rng.below(140) as usize;
            let mut d = vec![0u8; len];
            for b in &mut d {
                *b = if rng.chance(1, 3) {
                    rng.below(16) as u8
                } else {
                    rng.next_u32() as u8
                };
            }
            d
        })
        .collect()
}

#[test]
fn random_programs_agree_with_the_interpreter() {
    require_root();
    let t0 = Instant::now();
    let mut rng = Rng::new(0xeb9f_0001);
    let variants = [
        (ProgType::SchedCls, Access::Direct),
        (ProgType::SchedCls, Access::LdAbs),
        (ProgType::Xdp, Access::Direct),
        (ProgType::SocketFilter, Access::LdAbs),
    ];
    let (mut programs, mut runs) = (0u64, 0u64);
    for case in 0..1500 {
        let packets = random_packets(&mut rng, 24);
        // One program in ten may loop; a packet that makes it loop for ever costs the whole
        // budget of 2^20 instructions (milliseconds) per run.
        let (p, rules) = match case % 10 {
            0..=3 => (random_program(&mut rng), Rules::Kernel),
            4..=8 => (random_program_wide(&mut rng, false), Rules::Libpcap),
            _ => (random_program_wide(&mut rng, true), Rules::Libpcap),
        };
        let Ok(interp) = Filter::new(p.clone(), rules) else {
            continue;
        };
        programs += 1;
        for (t, access) in variants {
            let mut opts = ebpf::Options::new(t);
            opts.access = access;
            opts.result = Return::Classic;
            opts.ancillary = Ancillary::Absent;
            let what = format!("random program {case} ({t}, {access:?})");
            let (loaded, listing) = load(&p, &opts, &what);
            for d in &packets {
                if !t.test_run_takes(d) {
                    continue;
                }
                let got = loaded.run(d).unwrap_or_else(|e| panic!("{what}: {e}"));
                let want = match t {
                    ProgType::SocketFilter => interp.run(&d[14..], d.len() as u32 - 14),
                    _ => interp.run(d, d.len() as u32),
                };
                assert_eq!(
                    got,
                    want,
                    "{what}: {}-byte packet {d:02x?}: kernel {got}, interpreter {want}\n\
                     classic:\n{}\neBPF:\n{listing}",
                    d.len(),
                    netsift_bpf::asm::dump(&p, netsift_bpf::asm::Format::Asm)
                );
                runs += 1;
            }
        }
    }
    // The verdict mapping, on one program: SCHED_CLS and XDP verdicts follow the classic value.
    let p = Classic::new(vec![
        netsift_bpf::Insn::stmt(
            netsift_bpf::code::LD | netsift_bpf::code::B | netsift_bpf::code::ABS,
            14,
        ),
        netsift_bpf::Insn::stmt(netsift_bpf::code::RET | netsift_bpf::code::A, 0),
    ]);
    let (tc, _) = load(&p, &ebpf::Options::new(ProgType::SchedCls), "verdicts");
    let (xdp, _) = load(&p, &ebpf::Options::new(ProgType::Xdp), "verdicts");
    let mut frame = vec![0u8; 60];
    assert_eq!(tc.run(&frame).unwrap(), tc_act::SHOT);
    assert_eq!(xdp.run(&frame).unwrap(), xdp_action::DROP);
    frame[14] = 1;
    assert_eq!(tc.run(&frame).unwrap(), tc_act::OK);
    assert_eq!(xdp.run(&frame).unwrap(), xdp_action::PASS);
    println!(
        "eBPF in the kernel = interpreter: {programs} random programs x 4 program types, {runs} \
         runs, {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
