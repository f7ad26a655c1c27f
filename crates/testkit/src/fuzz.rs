//! Bodies of the fuzz targets in `fuzz/`, kept here so that ordinary tests can replay inputs
//! (seeds from the shared captures, and every crash ever found) without cargo-fuzz or nightly.
//!
//! Each function must return normally for every input; a panic is a bug.

use std::io::Cursor;

use netsift_bpf::{Filter, Insn, Program, Rules, asm, validate};
use netsift_capture::CaptureReader;

use crate::oracle;

/// Read `data` as a capture file (pcap or pcapng) to the end or to its first error.
pub fn capture_read(data: &[u8]) {
    let Ok(mut reader) = CaptureReader::new(Cursor::new(data)) else {
        return;
    };
    let mut n = 0usize;
    while let Some(item) = reader.next_packet() {
        match item {
            Ok(p) => {
                assert!(p.data.len() <= data.len(), "packet larger than the file");
                n += 1;
            }
            Err(e) => {
                let _ = e.to_string();
                break;
            }
        }
        assert!(n <= data.len(), "more packets than bytes: the reader loops");
    }
}

/// Parse `data` as program text in every format; whatever parses must print and parse back to
/// the same program.
pub fn bpf_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for format in [asm::Format::Decimal, asm::Format::C, asm::Format::Asm] {
        if let Ok(p) = asm::parse(text, format) {
            let known = p.insns().iter().all(Insn::is_known_opcode);
            // `unimp` lines lose k, so only programs of known opcodes round-trip through -d.
            if format != asm::Format::Asm || known {
                for out in [asm::Format::Decimal, asm::Format::C] {
                    let back = asm::parse(&asm::dump(&p, out), out)
                        .unwrap_or_else(|e| panic!("re-parse of {out:?} failed: {e}"));
                    assert_eq!(back, p, "{out:?} round trip");
                }
                // -d keeps only the fields an opcode uses.
                if known {
                    let back = asm::parse(&asm::dump(&p, asm::Format::Asm), asm::Format::Asm)
                        .unwrap_or_else(|e| panic!("re-parse of -d failed: {e}"));
                    let canonical: Vec<Insn> = p.insns().iter().map(Insn::canonical).collect();
                    assert_eq!(back.insns(), canonical, "-d round trip");
                }
            }
        }
    }
    let _ = asm::parse_any(text);
}

/// The fuzz encoding of a program and a packet: the first byte (mod 64) counts 8-byte
/// instructions (little-endian `code`, `jt`, `jf`, `k`), the rest is the packet.
fn split_program(data: &[u8]) -> Option<(Program, &[u8])> {
    let (&n, rest) = data.split_first()?;
    let n = usize::from(n % 64).min(rest.len() / 8);
    let (code, packet) = rest.split_at(n * 8);
    let insns: Vec<Insn> = code
        .chunks_exact(8)
        .map(|c| Insn {
            code: u16::from_le_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    Some((Program::new(insns), packet))
}

/// Split `data` into a program (8-byte instructions, count in the first byte) and a packet;
/// validate the program under both rule sets and run it. Programs the kernel accepts (forward
/// jumps, initialised scratch memory) must give libpcap's `bpf_filter` result.
pub fn bpf_run(data: &[u8]) {
    let Some((program, packet)) = split_program(data) else {
        return;
    };
    let wire_len = packet.len() as u32 + u32::from(data[0] & 0x3);
    let kernel_ok = validate(&program, Rules::Kernel).is_ok();
    match Filter::new(program.clone(), Rules::Libpcap) {
        Ok(f) => {
            let ours = f.run(packet, wire_len);
            assert!(
                oracle::validate(&program),
                "netsift accepts what libpcap rejects"
            );
            if kernel_ok {
                let theirs = oracle::filter(&program, packet, wire_len);
                assert_eq!(Some(ours), theirs, "verdict differs from libpcap");
            }
        }
        Err(_) => assert!(!kernel_ok, "kernel rules accept what libpcap rules reject"),
    }
}

/// Link types the fuzzers compile for: the common ones and one of each family with its own
/// lowering (802.11 with and without radio headers, PPP, LLC, ARCnet, raw ATM, SS7, pflog,
/// Frame Relay, ipnet, BACnet).
const LANG_LINK_TYPES: [netsift_wire::LinkType; 20] = [
    netsift_wire::LinkType::ETHERNET,
    netsift_wire::LinkType::RAW,
    netsift_wire::LinkType::LINUX_SLL,
    netsift_wire::LinkType::LINUX_SLL2,
    netsift_wire::LinkType::NULL,
    netsift_wire::LinkType::LOOP,
    netsift_wire::LinkType::IPV4,
    netsift_wire::LinkType::IPV6,
    netsift_wire::LinkType::IEEE802_11,
    netsift_wire::LinkType::IEEE802_11_RADIOTAP,
    netsift_wire::LinkType::IEEE802_11_PRISM,
    netsift_wire::LinkType::PPI,
    netsift_wire::LinkType::PPP,
    netsift_wire::LinkType::FDDI,
    netsift_wire::LinkType(7),
    netsift_wire::LinkType(123),
    netsift_wire::LinkType(140),
    netsift_wire::LinkType::PFLOG,
    netsift_wire::LinkType::FRELAY,
    netsift_wire::LinkType(165),
];

/// Fixed packets the compiled filters run on (an Ethernet/IPv4/TCP frame and its prefixes).
fn sample_packets() -> Vec<Vec<u8>> {
    let frame: Vec<u8> = vec![
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00, 0x45, 0, 0, 40, 0, 1, 0, 0, 64, 6, 0, 0,
        10, 0, 0, 1, 192, 168, 1, 1, 0x30, 0x39, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff,
        0xff, 0, 0, 0, 0,
    ];
    let mut v: Vec<Vec<u8>> = (0..=frame.len())
        .step_by(7)
        .map(|n| frame[..n].to_vec())
        .collect();
    v.push(frame);
    v
}

/// Parse `data` as a filter expression, lower it for every supported link type, compile it
/// with and without optimisation and run it: nothing may panic, the unoptimised program must
/// follow `Pred::eval`, and the optimised one must agree wherever the unoptimised one reads only
/// bytes that are present.
pub fn lang_compile(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.len() > 4096 {
        return;
    }
    let Ok(ast) = netsift_lang::parse(text) else {
        return;
    };
    let packets = sample_packets();
    for lt in LANG_LINK_TYPES {
        let ctx = netsift_lang::Context::new(lt);
        let Ok(pred) = netsift_lang::lower(ast.as_ref(), text, &ctx) else {
            continue;
        };
        let o0 = netsift_bpf::compile::compile(
            &pred,
            &netsift_bpf::compile::Options {
                optimize: false,
                snaplen: 100,
            },
        );
        let opts = netsift_bpf::compile::Options {
            optimize: true,
            snaplen: 100,
        };
        let o1 = netsift_bpf::compile::compile(&pred, &opts);
        let (Ok(p0), o1) = (o0, o1) else {
            continue;
        };
        let f0 = Filter::new(p0, Rules::Libpcap).expect("the compiler emits valid programs");
        let f1 = o1
            .ok()
            .map(|p| Filter::new(p, Rules::Libpcap).expect("the compiler emits valid programs"));
        for p in &packets {
            let e = pred.eval(p, 60);
            let v0 = f0.run(p, 60);
            assert_eq!(
                v0,
                if e == Some(true) { 100 } else { 0 },
                "-O0 differs from Pred::eval: {text:?} on {lt}, packet {p:02x?}"
            );
            if let (Some(f1), Some(_)) = (&f1, e) {
                assert_eq!(
                    f1.run(p, 60),
                    v0,
                    "-O differs from -O0 on a packet -O0 reads completely"
                );
            }
        }
    }
}

/// Compile `data` as an expression with netsift and with libpcap (Ethernet, unoptimised):
/// both must accept or both reject it, and agree on the sample packets. Inputs with names are
/// skipped (libpcap would ask DNS about them).
pub fn lang_vs_libpcap(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.len() > 1024 || text.contains('\0') {
        return;
    }
    let Ok(tokens) = netsift_lang::lexer::tokenize(text) else {
        return;
    };
    if tokens
        .iter()
        .any(|t| matches!(t.tok, netsift_lang::lexer::Tok::Id))
    {
        return;
    }
    // After `geneve`, a primitive reached on a path where Geneve did not match reads scratch
    // registers nobody wrote: uninitialised stack memory in libpcap (zero in netsift).
    let undefined = tokens
        .iter()
        .any(|t| t.tok == netsift_lang::lexer::Tok::Kw(netsift_lang::lexer::Kw::Geneve));
    for lt in LANG_LINK_TYPES {
        lang_vs_libpcap_for(text, lt, undefined);
    }
}

/// [`lang_vs_libpcap`] for one link type.
fn lang_vs_libpcap_for(text: &str, lt: netsift_wire::LinkType, undefined: bool) {
    // Lowered for `-O0` as `netsift compile -O0` lowers (the default leaves out tests the
    // filter's structure decides, and with them reads libpcap's unoptimised code makes).
    let ctx = netsift_lang::Context {
        optimize: false,
        ..netsift_lang::Context::new(lt)
    };
    let ours = match netsift_lang::compile(text, &ctx).map(|p| {
        netsift_bpf::compile::compile(
            &p,
            &netsift_bpf::compile::Options {
                optimize: false,
                snaplen: 262_144,
            },
        )
    }) {
        Ok(Err(e)) if matches!(e.kind(), netsift_bpf::compile::CompileErrorKind::TooLong(_)) => {
            // netsift enforces the kernel's 4096-instruction limit; libpcap does not.
            return;
        }
        Ok(r) => r.ok(),
        // netsift limits nesting to 256 levels (bounded recursion); libpcap's parser stack
        // allows 10000.
        Err(e) if e.kind() == netsift_lang::ErrorKind::Limit => return,
        Err(_) => None,
    };
    let theirs = oracle::compile(lt.dlt() as i32, 262_144, text, false).ok();
    assert_eq!(
        ours.is_some(),
        theirs.is_some(),
        "netsift and libpcap disagree on whether {text:?} compiles for {lt}"
    );
    if let (Some(ours), Some(theirs), false) = (ours, theirs, undefined) {
        let f = Filter::new(ours, Rules::Libpcap).expect("valid");
        for p in sample_packets() {
            assert_eq!(
                Some(f.run(&p, 60)),
                oracle::filter(&theirs, &p, 60),
                "verdicts differ for {text:?} on {lt}"
            );
        }
    }
}

/// Decode `data` as a program and a packet (the `bpf_run` encoding): when the libpcap rules
/// accept the program, the JIT must compile it and return the interpreter's value on the packet
/// and on every prefix of it.
pub fn jit_vs_interp(data: &[u8]) {
    let Some((program, packet)) = split_program(data) else {
        return;
    };
    let Ok(interp) = Filter::new(program.clone(), Rules::Libpcap) else {
        return;
    };
    let jit = netsift_jit::JitFilter::new(program, Rules::Libpcap)
        .expect("every program the validator accepts compiles");
    let wire_len = packet.len() as u32 + u32::from(data[0] & 0x3);
    // A looping program may run a million instructions per packet: try fewer lengths.
    let cuts: Vec<usize> = if interp.has_loops() {
        vec![0, packet.len() / 2, packet.len()]
    } else {
        (0..=packet.len()).collect()
    };
    let mut want = Vec::new();
    for &cut in &cuts {
        let p = &packet[..cut];
        let v = interp.run(p, wire_len);
        assert_eq!(
            jit.run(p, wire_len),
            v,
            "JIT and interpreter differ on {cut} bytes"
        );
        want.push(v);
    }
    let mut got = Vec::new();
    jit.run_batch(cuts.iter().map(|&cut| (&packet[..cut], wire_len)), &mut got);
    assert_eq!(got, want, "the batch entry differs");
}

/// Decode `data` as a classic program and a packet (as `jit_vs_interp`): the program translated
/// to eBPF (SCHED_CLS, classic return values) must pass the kernel's verifier and return what
/// the interpreter returns on the packet and its prefixes the kernel's test runs take. Needs
/// root (without it, nothing is checked); programs with loops are left to the unit tests (they
/// may run a million instructions a packet).
pub fn ebpf_vs_interp(data: &[u8]) {
    use netsift_ebpf::compile::{self, Ancillary, Return};
    use netsift_ebpf::{ErrorKind, LoadOptions, ProgType};
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let Some((program, packet)) = split_program(data) else {
        return;
    };
    let Ok(interp) = Filter::new(program.clone(), Rules::Libpcap) else {
        return;
    };
    if interp.has_loops() {
        return;
    }
    let mut opts = compile::Options::new(ProgType::SchedCls);
    opts.result = Return::Classic;
    opts.ancillary = Ancillary::Absent;
    let ebpf = match compile::from_classic(&program, &opts) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::Unsupported => return,
        Err(e) => panic!("a valid program does not translate: {e}"),
    };
    let loaded = ebpf
        .load(&LoadOptions::default())
        .unwrap_or_else(|e| panic!("the verifier refuses a translation: {e}\n{ebpf}"));
    for cut in [14, packet.len() / 2, packet.len()] {
        let p = &packet[..cut.min(packet.len())];
        if !ProgType::SchedCls.test_run_takes(p) {
            continue;
        }
        let got = loaded.run(p).expect("test run");
        assert_eq!(got, interp.run(p, p.len() as u32), "{} bytes", p.len());
    }
}

/// Compile `data` as an expression (Ethernet) to classic BPF without optimisation and, when
/// Swift can express it, to Swift passes: the two must give the same value on the sample
/// packets, on their prefixes, and with the reader's index on and off (`run` and `run_batch`).
pub fn swift_vs_interp(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.len() > 1024 {
        return;
    }
    let ctx = netsift_lang::Context::new(netsift_wire::LinkType::ETHERNET);
    let Ok(pred) = netsift_lang::compile(text, &ctx) else {
        return;
    };
    let Ok(prog) = netsift_bpf::compile::compile(
        &pred,
        &netsift_bpf::compile::Options {
            optimize: false,
            snaplen: 262_144,
        },
    ) else {
        return;
    };
    // What Swift cannot express is refused with a reason, never a panic.
    let Ok(spec) = netsift_swift::from_pred::from_pred(&pred) else {
        return;
    };
    let interp = Filter::new(prog, Rules::Libpcap).expect("netsift's own programs are valid");
    let (mut w, mut r) = netsift_swift::open(262_144);
    spec.load(&mut w).expect("a spec from from_pred loads");
    let mut batch = w.reader();
    let mut out = Vec::new();
    let mut packets = sample_packets();
    // Packets carrying the expression's own numbers as addresses and ports, so that host and
    // port tests can hold.
    let nums: Vec<u32> = text
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .filter_map(|w| {
            w.parse::<u32>().ok().or_else(|| {
                w.parse::<std::net::Ipv4Addr>()
                    .ok()
                    .map(|a| u32::from_be_bytes(a.octets()))
            })
        })
        .take(4)
        .collect();
    let full = packets.last().cloned().unwrap_or_default();
    for &n in &nums {
        let mut p = full.clone();
        p[26..30].copy_from_slice(&n.to_be_bytes());
        p[36..38].copy_from_slice(&(n as u16).to_be_bytes());
        packets.push(p);
    }
    for p in &packets {
        let wire = 60;
        let a = interp.run(p, wire);
        let b = r.run(p, wire);
        batch.run_batch([(&p[..], wire)], &mut out);
        assert_eq!(
            a, b,
            "{text:?}: interpreter {a}, Swift {b} (run_batch {}) on {p:?}",
            out[0]
        );
        assert_eq!(
            b, out[0],
            "{text:?}: Swift run and run_batch differ on {p:?}"
        );
    }
}

/// The link types [`flow_parse`] picks from by its input's first byte (modulo their number): the
/// eight the flow-key parser walks, and PPP, which it does not.
pub const FLOW_LINK_TYPES: [netsift_wire::LinkType; 9] = [
    netsift_wire::LinkType::ETHERNET,
    netsift_wire::LinkType::LINUX_SLL,
    netsift_wire::LinkType::LINUX_SLL2,
    netsift_wire::LinkType::NULL,
    netsift_wire::LinkType::LOOP,
    netsift_wire::LinkType::RAW,
    netsift_wire::LinkType::IPV4,
    netsift_wire::LinkType::IPV6,
    netsift_wire::LinkType::PPP,
];

/// The flow-key parser on `data`'s bytes: its first byte picks the link type (one of the eight
/// the parser walks, or another) and the walk (software or a NIC's), the rest is the packet.
/// Nothing may panic, and every key keeps the parser's contract: the layers in order inside the
/// packet, a NIC's walk at most two tags deep and never through MPLS, ports only where the
/// protocol carries them and the packet is not a later fragment, the flow hash the same both
/// ways, and the NIC walk's addresses the software walk's where both reach the same network
/// header (on IPv4 the whole key: the walks differ only in the IPv6 extension headers they
/// skip and how many).
pub fn flow_parse(data: &[u8]) {
    use netsift_wire::flow::{self, Fragment, Options};
    let Some((&pick, packet)) = data.split_first() else {
        return;
    };
    let link = FLOW_LINK_TYPES[usize::from(pick) % FLOW_LINK_TYPES.len()];
    let soft = flow::parse_with(link, packet, &Options::SOFTWARE);
    let nic = flow::parse_with(link, packet, &Options::NIC);
    for f in [&soft, &nic].into_iter().flatten() {
        assert!(
            f.network <= f.transport,
            "{link:?}: network after transport: {f:?}"
        );
        assert!(
            f.payload <= f.end && f.end <= packet.len(),
            "{link:?}: {f:?}"
        );
        assert!(
            f.transport <= packet.len() || f.key.ports.is_none(),
            "{f:?}"
        );
        if f.key.ports.is_some() {
            assert!(flow::has_ports(f.key.proto), "ports for {:?}", f.key.proto);
            assert_ne!(f.fragment, Fragment::Later, "ports on a later fragment");
        }
        assert_eq!(
            f.key.symmetric_hash(),
            f.key.reversed().symmetric_hash(),
            "the flow hash depends on the direction"
        );
    }
    if let Some(n) = &nic {
        assert!(n.vlan_tags <= 2 && n.mpls_labels == 0, "{n:?}");
        // Where both walks reach the same network header they read the same addresses; on
        // IPv4 (no extension headers, whose walks the two bound differently) the whole key.
        if let Some(s) = &soft
            && n.network == s.network
        {
            assert_eq!(
                (n.key.src, n.key.dst),
                (s.key.src, s.key.dst),
                "{link:?}: the NIC and software walks read different addresses"
            );
            if n.key.src.is_ipv4() {
                assert_eq!(n.key, s.key, "{link:?}: the NIC and software keys differ");
            }
        }
    }
}

/// Feed `data`, cut into frames (a length byte, then that many bytes), to an FTPCap tracker and
/// a Swift filter following it: nothing may panic; every data connection it opens is one it
/// had not open, and every pass it adds is removed again when that connection closes.
pub fn ftpcap_tracker(data: &[u8]) {
    use netsift_swift::ftpcap::{Event, SwiftFtpCap, Tracker};
    let (w, mut r) = netsift_swift::open(65_535);
    let mut cap = SwiftFtpCap::new(w).expect("an empty filter");
    let mut tracker = Tracker::new();
    let mut open = std::collections::HashSet::new();
    let mut rest = data;
    while let Some((&n, tail)) = rest.split_first() {
        let n = usize::from(n).min(tail.len());
        let (frame, tail) = tail.split_at(n);
        rest = tail;
        let _ = r.run(frame, frame.len() as u32);
        if let Some(e) = tracker.observe(frame) {
            match e {
                Event::Open(c) => assert!(open.insert(c), "{c:?} opened twice"),
                Event::Close(c) => assert!(open.remove(&c), "{c:?} closed but not open"),
            }
            cap.apply(&e).expect("one pass per connection fits");
        }
        assert_eq!(cap.connections(), open.len());
        assert_eq!(tracker.open_connections(), open.len());
    }
}

/// Parse `data` as a ClassBench rule set followed (after a line `--`) by a trace: nothing may
/// panic, and when both parse, every engine (HiCuts, HyperCuts, PaCuts one by one, batched and
/// without SIMD) gives every header the rule the linear scan gives.
pub fn classbench_parse(data: &[u8]) {
    use netsift_classify::{Classifier, Header, classbench, engine, linear::Linear, pacuts};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (rules, trace) = text.split_once("\n--\n").unwrap_or((text, ""));
    let rules = classbench::parse_rules(rules);
    let trace = classbench::parse_trace(trace);
    let (Ok(rules), Ok(trace)) = (rules, trace) else {
        return;
    };
    if rules.len() > 200 {
        return;
    }
    let lin = Linear::new(&rules);
    let engines: Vec<engine::Built> = [engine::Kind::HiCuts, engine::Kind::HyperCuts]
        .into_iter()
        .map(|k| engine::build(k, &rules))
        .collect();
    let pa = pacuts::PaCuts::new(&rules, pacuts::Params::default());
    let portable = pa.clone().without_simd();
    let headers: Vec<Header> = trace.iter().map(|t| t.header).collect();
    let mut batch = vec![None; headers.len()];
    pa.classify_all(&headers, &mut batch);
    for (h, b) in headers.iter().zip(&batch) {
        let want = lin.classify(h);
        for e in &engines {
            assert_eq!(e.engine.classify(h), want, "{}: {h}", e.kind);
        }
        assert_eq!(pa.classify(h), want, "pacuts: {h}");
        assert_eq!(portable.classify(h), want, "pacuts portable: {h}");
        assert_eq!(*b, want, "pacuts batched: {h}");
    }
}

/// Parse `data` as a ClassBench seed file: nothing may panic; when it parses, a small set
/// generated from it writes out and reads back the same, and a trace over it gives each header
/// its first matching rule.
pub fn classbench_seed(data: &[u8]) {
    use netsift_classify::{Classifier, classbench, generate, linear::Linear};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(seed) = generate::parse_seed(text) else {
        return;
    };
    let rules = generate::generate(&seed, 50, 1, generate::Options::default());
    let Ok(written) = generate::write_rules(&rules) else {
        return;
    };
    let back = classbench::parse_rules(&written).expect("a generated set reads back");
    assert_eq!(
        back.iter().map(|r| r.fields).collect::<Vec<_>>(),
        rules.iter().map(|r| r.fields).collect::<Vec<_>>()
    );
    let trace = generate::trace(&rules, 100, 2, generate::TraceOptions::default());
    let lin = Linear::new(&rules);
    for t in &trace {
        assert_eq!(
            t.answer,
            lin.classify(&t.header).map(|r| r + 1),
            "{}",
            t.header
        );
    }
}

/// Parse `data` as `iptables-save` output: nothing may panic; when it parses, it writes out and
/// reads back the same, its nft translation does not panic, and its HiTables rewrite decides
/// every header (made from the input's bytes and the rules' corners) like the original, by the
/// same rule.
pub fn iptables_hitables(data: &[u8]) {
    use netsift_classify::Header;
    use netsift_classify::hitables::{self, Params};
    use netsift_classify::iptables::{self, Packet};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(rs) = iptables::parse(text) else {
        return;
    };
    let back = iptables::parse(&rs.to_restore()).expect("written text reads back");
    assert_eq!(back, rs, "round trip");
    let _ = rs.to_nft();
    if rs.chains.iter().map(|c| c.rules.len()).sum::<usize>() > 300 {
        return;
    }
    let p = Params {
        binth: 2,
        fanout: 4,
        min_run: 2,
        ..Params::default()
    };
    let Ok((new, _)) = hitables::rewrite(&rs, &p) else {
        return;
    };
    let (Ok(eo), Ok(en)) = (rs.evaluator(), new.evaluator()) else {
        panic!("a valid set and its rewrite evaluate");
    };
    // Headers: the rules' box corners, and words of the input.
    let mut headers: Vec<Header> = rs
        .chains
        .iter()
        .flat_map(|c| c.rules.iter().filter_map(|r| r.boxes()))
        .flatten()
        .take(100)
        .flat_map(|b| {
            [
                Header(std::array::from_fn(|d| b.fields[d].lo), 0),
                Header(std::array::from_fn(|d| b.fields[d].hi), 0),
            ]
        })
        .collect();
    for w in data.chunks(12).take(50) {
        let mut a = [0u8; 12];
        a[..w.len()].copy_from_slice(w);
        let x = |i: usize| u32::from_le_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]);
        headers.push(Header(
            [x(0), x(4), x(8) & 0xffff, x(8) >> 16, u32::from(a[1])],
            0,
        ));
    }
    for c in rs.chains.iter().filter(|c| c.policy.is_some()) {
        for h in &headers {
            let (a, b) = (
                eo.evaluate(&c.name, &Packet::new(*h)),
                en.evaluate(&c.name, &Packet::new(*h)),
            );
            let (Ok(a), Ok(b)) = (a, b) else {
                continue;
            };
            assert_eq!(a.verdict, b.verdict, "{} {h}", c.name);
            assert_eq!(
                a.decided_by.map(|s| &rs.chains[s.chain].rules[s.rule]),
                b.decided_by.map(|s| &new.chains[s.chain].rules[s.rule]),
                "{} {h}",
                c.name
            );
        }
    }
}

/// Parse `data` as a rules-text script (the NIC rules interface): nothing may panic; every
/// rule the text syntax writes reads back the same; applying the script to tables of every
/// profile and serving it as a control session answers every command line once.
pub fn offload_text(data: &[u8]) {
    use netsift_offload::text::{self, Command};
    use netsift_offload::{Profile, RuleTable};
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(script) = text::parse(src) {
        for l in &script.commands {
            if let Command::Add(rule) = l.command
                && let Ok(line) = text::format_rule(&rule)
            {
                let back = text::parse_line(1, &line).expect("a written rule reads back");
                assert_eq!(back, Some(Command::Add(rule)), "round trip of {line:?}");
            }
        }
        for profile in [
            "software",
            "82599",
            "82599-fdir-perfect",
            "ntuple:4",
            "mlx5",
        ] {
            let mut table = RuleTable::for_profile(profile.parse::<Profile>().expect("profile"));
            let results = script.apply(&mut table);
            assert_eq!(results.len(), script.commands.len());
        }
    }
    let mut table = RuleTable::new();
    let mut out = Vec::new();
    let session = text::serve(src.as_bytes(), &mut out, &mut table).expect("in-memory I/O");
    let replies = out.iter().filter(|&&b| b == b'\n').count() as u64;
    assert_eq!(
        replies,
        session.applied + session.refused + u64::from(session.quit),
        "one reply per command"
    );
}

/// `data` = a length byte, a filter expression of that length, then an Ethernet frame: the
/// expression's NIC rules, for every profile, must never drop the frame (or a prefix of it)
/// when the filter accepts it; nothing may panic.
pub fn offload_compile(data: &[u8]) {
    use netsift_offload::compile::{Options, compile};
    use netsift_offload::{Action, FlowKey, Profile};
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n).min(rest.len());
    let (expr, frame) = rest.split_at(n);
    let Ok(expr) = std::str::from_utf8(expr) else {
        return;
    };
    let ctx = netsift_lang::Context::new(netsift_wire::LinkType::ETHERNET);
    let Ok(pred) = netsift_lang::compile(expr, &ctx) else {
        return;
    };
    let Ok(program) = netsift_bpf::compile::compile(&pred, &Default::default()) else {
        return;
    };
    let filter = Filter::new(program, Rules::Libpcap).expect("compiled programs are valid");
    for profile in [
        "software",
        "82599",
        "82599-fdir-perfect",
        "ntuple:16",
        "mlx5",
    ] {
        let mut opts = Options::new(profile.parse::<Profile>().expect("profile"));
        opts.max_terms = 256;
        let o = compile(&pred, &opts).expect("compiles");
        for cut in [frame.len(), frame.len() / 2, 34, 14] {
            let f = &frame[..cut.min(frame.len())];
            let drop = FlowKey::from_frame(f)
                .and_then(|k| o.table().lookup(&k).map(|r| r.action == Action::Drop))
                .unwrap_or(false);
            if drop {
                assert_eq!(
                    filter.run(f, frame.len() as u32),
                    0,
                    "{profile}: `{expr}` dropped a frame the filter accepts"
                );
            }
        }
    }
}

/// Compile `data` as an FPL program (16-word MBuf): the parser and checker never panic; a
/// program they accept runs natively and interpreted on the sample packets (twice, keeping
/// registers and memory) with the same results, registers and memory.
pub fn fpl_compile(data: &[u8]) {
    use netsift_fpl::{NREGS, Program, Registry};
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    if src.len() > 4096 {
        return;
    }
    let Ok(program) = Program::compile(src, &Registry::standard(), 16) else {
        return;
    };
    let _ = program.report().to_string();
    let native = program.native().expect("a checked program has native code");
    let (mut m1, mut m2) = (vec![0u64; 16], vec![0u64; 16]);
    let (mut r1, mut r2) = ([0u64; NREGS], [0u64; NREGS]);
    for _ in 0..2 {
        for p in sample_packets() {
            let a = program.run_interp(&p, p.len() as u32, &mut m1, &mut r1);
            let b = native.run(&p, p.len() as u32, &mut m2, &mut r2);
            assert_eq!(a, b, "result of {src:?}");
            assert_eq!(r1, r2, "registers of {src:?}");
            assert_eq!(m1, m2, "memory of {src:?}");
        }
    }
}

/// Parse `data` as FFPF graphs and as an authorisation policy: nothing panics; every parsed
/// flow prints (`Display`) as text that parses back to the same flow; checking it against the
/// standard classes (no instantiation: classes open files and devices) never panics, and the
/// policy, when it parses, decides about every flow that checks.
pub fn graph_parse(data: &[u8]) {
    use netsift_graph::lang;
    use netsift_graph::policy::Policy;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let registry = netsift_graph::standard_registry();
    let policy = Policy::parse(text).ok();
    let Ok(flows) = lang::parse(text) else {
        if let Err(e) = lang::parse(text) {
            let _ = e.render(text);
        }
        return;
    };
    for flow in &flows {
        let printed = flow.to_string();
        let again = lang::parse(&printed).expect("a printed flow parses");
        assert_eq!(again.len(), 1, "{printed:?}");
        assert_eq!(again[0].to_string(), printed, "round trip of {printed:?}");
        if let Ok(resolved) = lang::check(flow, &registry)
            && let Some(p) = &policy
        {
            let _ = p.check("nobody", flow, &resolved, Some(1));
        }
    }
}

/// What netsiftd and its applications read from each other: requests and replies (text) and
/// shared-memory buffers. Messages: parsing never panics, and a parsed request encodes to text
/// that parses back to the same request. Buffers: `data` laid into a PBuf, an IBuf and a
/// control page (with valid magic words and small sizes taken from `data`, so that the layout
/// checks pass and the bytes behind them are arbitrary) is attached and read until it gives
/// nothing more, without a panic and without reading outside the mappings.
pub fn daemon_proto(data: &[u8]) {
    use netsift_daemon::proto::{Reply, Request};
    match Request::parse(data) {
        Ok(r) => assert_eq!(Request::parse(r.encode().as_bytes()), Ok(r)),
        Err(e) => {
            let _ = e.to_string();
        }
    }
    let _ = Reply::parse(data);
    daemon_shm(data);
}

fn daemon_shm(data: &[u8]) {
    use netsift_graph::buffer::Reader;
    use netsift_graph::shm::{Mem, Peers, Region};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    if data.len() < 16 {
        return;
    }
    let byte = |i: usize| u64::from(data[i % data.len()]);
    let word = |i: usize| -> u64 { (0..8).fold(0u64, |w, k| w | byte(i * 8 + k) << (8 * k)) };
    // A memory file of `words` words: `data` cycled from `from`, then `set` words on top; the
    // returned mapping is a second one (the first is dropped), as another process would have.
    let region = |words: usize, from: usize, set: &[(usize, u64)]| -> Option<Region> {
        let r = Arc::new(Region::create("netsift-fuzz", words * 8, Peers::ReadWrite).ok()?);
        let m: Mem<AtomicU64> = Mem::in_region(&r, 0, words)?;
        for (i, w) in m.iter().enumerate() {
            w.store(word(from + i), Ordering::Relaxed);
        }
        for &(i, v) in set {
            m.get(i)?.store(v, Ordering::Relaxed);
        }
        Region::map(r.fd().try_clone_to_owned().ok()?, true).ok()
    };
    let slots = 1 + byte(0) % 32;
    let slot_size = 1 + byte(1) * 3;
    let slot_bytes = slot_size.div_ceil(8) * 8;
    let max_len = slot_size + byte(2) % 3 * slot_bytes;
    let pbuf_words = 16 + slots * 4 + slots * slot_bytes / 8;
    let Some(pbuf) = region(
        pbuf_words as usize,
        3,
        &[
            (0, u64::from_le_bytes(*b"nsPBUF01")),
            (1, byte(3) % 3),
            (2, slots),
            (3, slot_size),
            (4, max_len),
            (5, byte(4) % 2),
        ],
    ) else {
        return;
    };
    let entries = 1 + byte(5) % 16;
    let Some(ibuf) = region(
        (32 + entries * 4) as usize,
        7,
        &[
            (0, u64::from_le_bytes(*b"nsIBUF01")),
            (1, entries),
            // W_i: near the entries, or anything.
            (
                16,
                if byte(6) % 2 == 0 {
                    byte(7) % 40
                } else {
                    word(9)
                },
            ),
        ],
    ) else {
        return;
    };
    let Some(ctrl) = region(
        16,
        11,
        &[(0, byte(8) % 40), (4, u64::from_le_bytes(*b"nsCTRL01"))],
    ) else {
        return;
    };
    let Ok(mut r) = Reader::attach(pbuf, ibuf, ctrl) else {
        return;
    };
    let _ = r.available();
    for _ in 0..64 {
        match r.next() {
            Some(p) => {
                let _ = p.data.iter().map(|&b| u64::from(b)).sum::<u64>();
            }
            None => break,
        }
    }
    r.release();
    let _ = r.next_owned();
    let _ = r.is_finished();
    let _ = r.stats();
}

/// A hostile client of a running netsiftd (one daemon in this process, started on the first
/// call and kept): `data` is a script of operations on a few connections — raw messages
/// (arbitrary bytes, or requests from a small dictionary), messages carrying descriptors (the
/// daemon's own memory files back to it, `/dev/null`, a pipe), opening flows and then writing
/// `data` into their control pages and MBufs, truncating or growing every memory file it was
/// given, closing connections mid-way. After each script the daemon must still run and answer a
/// fresh connection, and a flow opened then must deliver exactly its packets.
pub fn daemon_client(data: &[u8]) {
    use netsift_daemon::client::{Client, Flow, OpenOptions};
    use netsift_daemon::proto::Request;
    use netsift_daemon::sock::Conn;
    use netsift_daemon::{Config, Daemon};
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
    use std::sync::OnceLock;

    // The daemon runs for the life of the process (held here, so nothing leaks).
    type Running = (
        std::path::PathBuf,
        std::sync::Mutex<netsift_daemon::Background>,
    );
    static DAEMON: OnceLock<Running> = OnceLock::new();
    let (socket, _) = DAEMON.get_or_init(|| {
        let path =
            std::env::temp_dir().join(format!("netsift-fuzz-daemon-{}.sock", std::process::id()));
        let mut cfg = Config::new(&path);
        // Whoever runs the fuzzer may open flows (the default policy allows root only).
        cfg.policy = netsift_graph::policy::Policy::allow_all();
        let d = Daemon::bind(cfg).expect("start the daemon");
        (path, std::sync::Mutex::new(d.spawn()))
    });
    const TEXTS: [&str; 8] = [
        "(gen,1,50)",
        "(gen,2,100) -> (bpf,\"tcp\") -> (packetcount,,8)",
        "(gen,3,100) -> (flowcount,,4096)",
        "(gen,4,100) -> (topk,4,,4096)",
        "(gen,5,10) -> (nosuch)",
        "(gen,6,10) -> (bpf,\"tcp port\")",
        "(gen,7,100000) -> (sampler,2,,64)",
        "(gen,8,10) -> (strsearch,\"GET\",,64)",
    ];
    let mut conns: Vec<Conn> = Vec::new();
    let mut clients: Vec<Client> = Vec::new();
    let mut flows: Vec<Flow> = Vec::new();
    let mut got_fds: Vec<OwnedFd> = Vec::new();
    let devnull = std::fs::File::open("/dev/null").ok();
    let mut i = 0;
    let mut next = |n: usize| -> usize {
        let b = data.get(i).copied().unwrap_or(0) as usize;
        i += 1;
        b % n.max(1)
    };
    for _ in 0..data.len().min(64) {
        match next(10) {
            0 => {
                if conns.len() < 8
                    && let Ok(c) = Conn::connect(socket)
                {
                    conns.push(c);
                }
            }
            1 | 2 => {
                // A message: bytes of `data`, or a request from the dictionary.
                let Some(c) = conns.get(next(8)) else {
                    continue;
                };
                let msg = if next(2) == 0 {
                    let len = next(256);
                    let from = next(data.len().max(1));
                    data.iter()
                        .cycle()
                        .skip(from)
                        .take(len)
                        .copied()
                        .collect::<Vec<u8>>()
                } else {
                    let req = match next(5) {
                        0 => Request::List,
                        1 => Request::Stats(next(8) as u64),
                        2 => Request::Close(next(8) as u64),
                        3 => Request::Pause(next(8) as u64),
                        _ => Request::Open {
                            options: OpenOptions::default(),
                            graph: TEXTS[next(TEXTS.len())].to_string(),
                        },
                    };
                    req.encode().into_bytes()
                };
                let fds: Vec<BorrowedFd<'_>> = match next(4) {
                    0 => got_fds.iter().take(next(4)).map(AsFd::as_fd).collect(),
                    1 => devnull.iter().map(AsFd::as_fd).collect(),
                    _ => Vec::new(),
                };
                let _ = c.try_send(&msg, &fds);
            }
            3 => {
                // Read a reply (keeping the descriptors it carries).
                let Some(c) = conns.get(next(8)) else {
                    continue;
                };
                if let Ok(Some((_, fds))) = c.recv(false) {
                    got_fds.extend(fds.into_iter().take(16));
                    got_fds.truncate(64);
                }
            }
            4 => {
                if clients.len() < 4
                    && let Ok(c) = Client::connect(socket)
                {
                    clients.push(c);
                }
            }
            5 => {
                let Some(c) = clients.get(next(4)) else {
                    continue;
                };
                if flows.len() < 6
                    && let Ok(f) = c.open(TEXTS[next(4)], &OpenOptions::default())
                {
                    flows.push(f);
                }
            }
            6 => {
                // Write `data` into a flow's control page and MBufs.
                let k = next(6);
                let Some(f) = flows.get_mut(k) else { continue };
                if let Some(r) = f.reader().shared_regions() {
                    let words = r.ctrl.len() / 8;
                    if let Some(ctrl) =
                        netsift_graph::shm::Mem::<std::sync::atomic::AtomicU64>::in_region(
                            &std::sync::Arc::new(
                                netsift_graph::shm::Region::map(
                                    r.ctrl.fd().try_clone_to_owned().expect("dup"),
                                    true,
                                )
                                .expect("map the control page"),
                            ),
                            0,
                            words,
                        )
                    {
                        for k in 0..next(words) + 1 {
                            let v = (0..8).fold(0u64, |w, _| w << 8 | next(256) as u64);
                            ctrl[(k * 7) % words].store(v, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
                for idx in 0..8 {
                    if let Some(m) = f.mbuf(idx) {
                        for k in 0..4 {
                            m.set(next(m.len() / 8 + 1), (next(256) as u64) << (k * 8));
                        }
                    }
                }
            }
            7 => {
                // Resize every memory file held: the daemon's seals refuse it.
                for fd in
                    got_fds
                        .iter()
                        .map(AsRawFd::as_raw_fd)
                        .chain(flows.iter_mut().filter_map(|f| {
                            f.reader().shared_regions().map(|r| r.ctrl.fd().as_raw_fd())
                        }))
                {
                    // SAFETY: descriptors this process holds; a failure is the expected outcome.
                    unsafe {
                        libc::ftruncate(fd, [0, 1, 1 << 20][next(3)]);
                    }
                }
            }
            8 => {
                if !conns.is_empty() {
                    let k = next(conns.len());
                    conns.swap_remove(k);
                }
            }
            _ => {
                if !flows.is_empty() {
                    let k = next(flows.len());
                    flows.swap_remove(k);
                }
            }
        }
    }
    drop((conns, flows, clients));
    // The daemon still answers, and serves a flow exactly.
    let c = Client::connect(socket).expect("the daemon accepts after the script");
    c.list().expect("the daemon answers after the script");
    let mut f = c
        .open("(gen,11,500) -> (bpf,\"udp\")", &OpenOptions::default())
        .expect("a flow after the script");
    let want = crate::reference::mixed_accepted(11, 500, "udp");
    let got = crate::daemon::drain(&mut f, std::time::Duration::from_secs(30));
    assert_eq!(got, want, "a flow after the script got other packets");
}
