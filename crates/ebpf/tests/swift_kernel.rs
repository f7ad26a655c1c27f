//! Swift in the kernel against netsift's Swift reader (needs root: every test fails, saying
//! so, without it).
//!
//! - Table 5-like and random Swift filters, written into the maps of the XDP and SCHED_CLS
//!   programs, run with `BPF_PROG_TEST_RUN` on every packet of the shared Ethernet captures
//!   (and on cut copies): the kernel's verdict is the reader's.
//! - FTPCap on the FTP workload: the tracker's passes mirrored into the kernel after every
//!   event, each packet compared after the update it caused; updates are map writes only (the
//!   program's file descriptor and the program itself never change).

use std::path::{Path, PathBuf};

use netsift_capture::{CaptureReader, LinkType};
use netsift_ebpf::swift::{KernelSwift, MAX_INSTS, SwiftMirror, check_pass};
use netsift_ebpf::{ProgType, tc_act, xdp_action};
use netsift_swift::Writer;
use netsift_swift::isa::{Inst, Mode, Op, Outcome};

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!(
            "this test loads eBPF programs and needs root (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON); \
             run it as root (CI does)"
        );
    }
}

fn data_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("NETSIFT_SHARED_DATA") {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data")
}

/// Every packet of every shared Ethernet capture (bytes only), plus cut copies of a sample.
fn ethernet_packets() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for sub in ["captures/tcpdump", "captures/libpcap"] {
        let d = data_dir().join(sub);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&d)
            .unwrap_or_else(|e| panic!("the shared captures are missing ({}): {e}", d.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        for f in files {
            let Ok(mut r) = CaptureReader::open(&f) else {
                continue;
            };
            for p in r.packets().map_while(|p| p.ok()) {
                if p.link_type == LinkType::ETHERNET {
                    out.push(p.data);
                }
            }
        }
    }
    assert!(
        out.len() > 5000,
        "only {} Ethernet packets found",
        out.len()
    );
    let cut: Vec<Vec<u8>> = out
        .iter()
        .step_by(37)
        .flat_map(|p| {
            [15, 23, 30, 34, 36, 38, 40, 47, 54]
                .into_iter()
                .filter(|&n| n < p.len())
                .map(|n| p[..n].to_vec())
                .collect::<Vec<_>>()
        })
        .collect();
    println!(
        "{} Ethernet packets of the shared captures, {} cut copies",
        out.len(),
        cut.len()
    );
    out.extend(cut);
    // VLAN-tagged copies (802.1Q, 802.1ad + 802.1Q, and three tags, which L1A does not walk)
    // and IPv6 copies of IPv4 packets (the transport segment behind a 40-byte header), so
    // that L1A addressing meets every case; then cut copies of those.
    let mut extra = Vec::new();
    for p in out.iter().step_by(11).filter(|p| p.len() >= 14) {
        let tags: &[&[u16]] = &[&[0x8100], &[0x88a8, 0x8100], &[0x9100, 0x8100, 0x8100]];
        let tags = tags[extra.len() % 3];
        let mut q = p[..12].to_vec();
        for (k, &t) in tags.iter().enumerate() {
            q.extend_from_slice(&t.to_be_bytes());
            q.extend_from_slice(&(100 + k as u16).to_be_bytes());
        }
        q.extend_from_slice(&p[12..]);
        extra.push(q);
        if p[12..14] == [0x08, 0x00] && p.len() >= 34 {
            let ihl = 4 * usize::from(p[14] & 0xf);
            let l4 = p.get(14 + ihl..).unwrap_or(&[]);
            let mut q = p[..12].to_vec();
            q.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            q.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            q.extend_from_slice(&[p[23], 64]);
            for half in [&p[26..30], &p[30..34]] {
                q.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0]);
                q.extend_from_slice(half);
            }
            q.extend_from_slice(l4);
            extra.push(q);
        }
    }
    let cut_extra: Vec<Vec<u8>> = extra
        .iter()
        .step_by(7)
        .flat_map(|p| {
            [16, 19, 20, 23, 40, 57, 60, 66, 70]
                .into_iter()
                .filter(|&n| n < p.len())
                .map(|n| p[..n].to_vec())
                .collect::<Vec<_>>()
        })
        .collect();
    let is = |p: &Vec<u8>, t: u16| {
        let mut at = 12;
        while let Some(b) = p.get(at..at + 2) {
            let ty = u16::from_be_bytes([b[0], b[1]]);
            if !matches!(ty, 0x8100 | 0x88a8 | 0x9100) {
                return ty == t;
            }
            at += 4;
        }
        false
    };
    out.extend(extra);
    out.extend(cut_extra);
    let vlan = out
        .iter()
        .filter(|p| {
            p.len() >= 14 && matches!(p[12..14], [0x81, 0x00] | [0x88, 0xa8] | [0x91, 0x00])
        })
        .count();
    let ip6 = out.iter().filter(|p| is(p, 0x86dd)).count();
    println!(
        "with the synthetic copies: {} packets, {vlan} VLAN-tagged, {ip6} IPv6",
        out.len()
    );
    out
}

/// Where L1A addressing puts offset 0 of `p` (as `netsift_swift` computes it), if anywhere.
fn l1a_base(p: &[u8]) -> Option<usize> {
    let be16 = |at: usize| p.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let mut at = 12;
    for _ in 0..2 {
        if !matches!(be16(at)?, 0x8100 | 0x88a8 | 0x9100) {
            break;
        }
        at += 4;
    }
    match be16(at)? {
        0x0800 => Some(at + 2 + 4 * usize::from(p.get(at + 2)? & 0xf)),
        0x86dd => Some(at + 2 + 40),
        _ => None,
    }
}

/// Random filters (each run, updated, and run again).
const ROUNDS: usize = 600;

const TYPES: [ProgType; 2] = [ProgType::Xdp, ProgType::SchedCls];

fn accepted(t: ProgType, v: u32) -> bool {
    match t {
        ProgType::Xdp => {
            assert!(
                v == xdp_action::PASS || v == xdp_action::DROP,
                "XDP returned {v}"
            );
            v == xdp_action::PASS
        }
        _ => {
            assert!(v == tc_act::OK || v == tc_act::SHOT, "tc returned {v}");
            v == tc_act::OK
        }
    }
}

static ACCEPTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Compares the kernel with the reader of `w` on `packets`; returns the runs made.
fn compare(
    ks: &KernelSwift,
    w: &Writer,
    t: ProgType,
    packets: &[Vec<u8>],
    what: &str,
    failures: &mut Vec<String>,
) -> usize {
    let mut r = w.reader();
    let mut runs = 0;
    for p in packets.iter().filter(|p| t.test_run_takes(p)) {
        let want = r.run(p, p.len() as u32) != 0;
        let got = accepted(t, ks.program().run(p).expect("test run"));
        runs += 1;
        ACCEPTED.fetch_add(usize::from(got), std::sync::atomic::Ordering::Relaxed);
        if want != got && failures.len() < 20 {
            failures.push(format!(
                "{what} ({t:?}): kernel {got}, Swift {want} on {} bytes {:02x?}",
                p.len(),
                &p[..p.len().min(64)]
            ));
        }
    }
    runs
}

/// A small reproducible generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random instruction of the supported subset, with values taken from `p` (a packet of the
/// corpus) often enough that tests hold.
fn random_inst(rng: &mut Rng, p: &[u8]) -> Inst {
    // Every opcode, the word compares twice as often.
    let ops: Vec<Op> = Op::ALL
        .iter()
        .chain(&[Op::Leq, Op::LeqM])
        .copied()
        .collect();
    let op = ops[rng.below(ops.len() as u64) as usize];
    let mode = [Mode::D, Mode::D, Mode::L1, Mode::L2, Mode::L1A, Mode::L1A][rng.below(6) as usize];
    let off = match (op, mode) {
        (Op::Ip4Proto | Op::Ip4ProtoNoFrag | Op::Ip6Proto | Op::Ip4ProtoPorts, Mode::D) => {
            [14, 14, 14, 18, 0, 1][rng.below(6) as usize]
        }
        (Op::HostEither | Op::NetBoth | Op::NetEither, Mode::D) => {
            [26, 26, 22, 30][rng.below(4) as usize]
        }
        (_, Mode::D) => rng.below(64) as u16,
        _ => rng.below(24) as u16,
    };
    let mut i = Inst::new(op, mode, off);
    if matches!(mode, Mode::L1 | Mode::L2) {
        i = i.with_nl([14, 14, 14, 18, 0, 60][rng.below(6) as usize]);
    }
    let base = match mode {
        Mode::D => usize::from(off),
        Mode::L1A => l1a_base(p).unwrap_or(34) + usize::from(off),
        _ => {
            let nl = i.p[6] as usize;
            let ihl = p.get(nl).map_or(20, |b| 4 * usize::from(b & 0xf));
            nl + ihl + usize::from(off)
        }
    };
    let field = |at: usize, size: usize| -> u32 {
        (0..size).fold(0u32, |v, k| {
            (v << 8) | u32::from(p.get(at + k).copied().unwrap_or(0))
        })
    };
    let val = |rng: &mut Rng, at: usize, size: usize| -> u32 {
        if rng.below(3) == 0 {
            (rng.next() as u32) & (u32::MAX >> (32 - 8 * size as u32))
        } else {
            field(at, size)
        }
    };
    let n = rng.below(4) as usize + usize::from(rng.below(5) != 0);
    match op {
        Op::Eq8 | Op::Eq16 | Op::Eq32 => {
            let s = [1, 2, 4][op as usize - 1];
            for _ in 0..n {
                let _ = i.add_value(val(rng, base, s));
            }
        }
        Op::Meq8 | Op::Meq16 | Op::Meq32 => {
            let s = [1, 2, 4][op as usize - 4];
            let m = (rng.next() as u32) | 0xf0;
            i.set_param(0, m);
            for _ in 0..n {
                let _ = i.add_value(val(rng, base, s) & m);
            }
        }
        Op::Rng8 | Op::Rng16 | Op::Rng32 | Op::LenRng => {
            let s = match op {
                Op::Rng8 => 1,
                Op::Rng16 => 2,
                _ => 4,
            };
            let pairs = rng.below(4) as usize;
            for k in 0..pairs {
                let v = if op == Op::LenRng {
                    p.len() as u32
                } else {
                    val(rng, base, s)
                };
                let lo = v.saturating_sub(rng.below(3) as u32);
                let hi = v
                    .saturating_add(rng.below(3) as u32)
                    .saturating_sub(rng.below(2) as u32);
                i.set_param(2 * k, lo);
                i.set_param(2 * k + 1, hi);
            }
            i = i.with_count(2 * pairs + rng.below(2) as usize);
        }
        Op::Set8 | Op::Set16 | Op::Set32 => {
            i.set_param(0, 1 << rng.below(16));
            i = i.with_count(1);
        }
        Op::Ip4Proto | Op::Ip4ProtoNoFrag | Op::Ip6Proto => {
            for _ in 0..n {
                let _ = i.add_value([6, 17, 1, 58, rng.below(256) as u32][rng.below(5) as usize]);
            }
        }
        Op::PortEither => {
            for _ in 0..n + rng.below(6) as usize {
                let at = base + 2 * rng.below(2) as usize;
                let _ = i.add_value(val(rng, at, 2));
            }
        }
        Op::Ip4ProtoPorts => {
            i.set_param(0, [6, 17][rng.below(2) as usize]);
            let l4 = 14 + p.get(14).map_or(20, |b| 4 * usize::from(b & 0xf));
            for _ in 0..n {
                let at = l4 + 2 * rng.below(2) as usize;
                let _ = i.add_value(val(rng, at, 2));
            }
        }
        Op::HostEither => {
            for _ in 0..n {
                let at = base + 4 * rng.below(2) as usize;
                let _ = i.add_value(val(rng, at, 4));
            }
        }
        Op::NetBoth | Op::NetEither => {
            let m = [0xffff_ff00, 0xffff_0000, 0xff00_0000, u32::MAX][rng.below(4) as usize];
            let (s, d) = (val(rng, base, 4), val(rng, base + 4, 4));
            i = i.with_count(if op == Op::NetBoth { 4 } else { 2 });
            i.set_param(0, m);
            i.set_param(1, s & m);
            i.set_param(2, m);
            i.set_param(3, d & m);
            if op == Op::NetEither && rng.below(2) == 0 {
                i.set_param(1, d & m);
            }
        }
        Op::Leq => {
            // Up to seven words (a count above seven compares seven), sometimes one changed.
            let n = [0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 9, 15][rng.below(12) as usize];
            // In L1/L2 modes `P[6]` stays `nl` (and is the seventh word compared).
            let room = if matches!(mode, Mode::L1 | Mode::L2) {
                6
            } else {
                7
            };
            for k in 0..n.min(room) {
                i.set_param(k, field(base + 4 * k, 4));
            }
            if rng.below(3) == 0 {
                let k = rng.below(room as u64) as usize;
                i.set_param(k, i.p[k] ^ (1 << rng.below(32)));
            }
            i = i.with_count(n);
        }
        Op::LeqM => {
            let pairs = rng.below(4) as usize;
            for k in 0..pairs {
                let m =
                    [u32::MAX, 0xffff_0000, 0x00ff_00ff, rng.next() as u32][rng.below(4) as usize];
                i.set_param(2 * k, m);
                i.set_param(2 * k + 1, val(rng, base + 4 * k, 4) & m);
            }
            i = i.with_count(2 * pairs + rng.below(2) as usize);
        }
        Op::Nop => {}
    }
    i.negate(rng.below(5) == 0)
}

#[test]
fn swift_filters_in_the_kernel_agree_with_the_reader() {
    require_root();
    let packets = ethernet_packets();
    let mut failures = Vec::new();
    let mut runs = 0usize;
    let mut filters = 0usize;
    let mut kernels: Vec<KernelSwift> = TYPES
        .iter()
        .map(|&t| KernelSwift::load(t, 64).expect("load Swift program"))
        .collect();
    for k in &kernels {
        println!(
            "{:?}: {} instructions, {} verified",
            k.program().prog_type(),
            k.program().len(),
            k.program().verified_insns().unwrap_or(0)
        );
    }
    let fds: Vec<_> = kernels.iter().map(|k| k.program_fd()).collect();
    // Filters as the paper's Table 5 and FTPCap write them.
    let exprs = [
        "",
        "ip",
        "tcp",
        "ip and tcp port 80",
        "ip src net 192.168.0.0/16 and tcp dst port 23",
        "udp port 53 or tcp port 22",
        "host 10.0.0.1 or host 192.168.1.1 or net 172.16.0.0/12",
        "tcp dst portrange 1000-2000",
        "not ip",
        "icmp or arp",
        "ip6 and tcp",
    ];
    let ctx = netsift_lang::Context::new(netsift_wire::LinkType::ETHERNET);
    let mut specs = Vec::new();
    for e in exprs {
        let pred = netsift_lang::compile(e, &ctx).expect("compiles");
        let spec = netsift_swift::from_pred::from_pred(&pred).expect("Swift says it");
        specs.push((e.to_string(), spec));
    }
    // Passes `netsift_swift::build` writes with L1A addressing and payload words (VLAN- and
    // IPv6-aware ports, "GET " / "HTTP" at the start of the TCP payload).
    use netsift_swift::build;
    let hand: [(&str, Vec<Vec<Inst>>); 4] = [
        (
            "any_port 80, 443, 53",
            vec![vec![build::any_port(&[80, 443, 53])]],
        ),
        (
            "ip6 and any_port 22 or 80",
            vec![vec![build::ip6_proto(&[6, 17]), build::any_port(&[22, 80])]],
        ),
        (
            "tcp payload GET or HTTP",
            vec![
                vec![build::ip4_proto(&[6]), build::tcp_payload(&[0x4745_5420])],
                vec![
                    build::ip4_proto(&[6]),
                    build::tcp_payload(&[0x4854_5450, 0x2f31_2e31]),
                ],
            ],
        ),
        (
            "not any_port 80",
            vec![vec![build::not(build::any_port(&[80]))]],
        ),
    ];
    for (e, passes) in hand {
        let mut spec = build::FilterSpec::new();
        for p in passes {
            spec.pass(p);
        }
        specs.push((e.to_string(), spec));
    }
    for (e, spec) in &specs {
        let (mut w, _) = netsift_swift::open(96);
        spec.load(&mut w).expect("loads");
        let list = w.list();
        if let Err(err) = list.iter().try_for_each(|(_, p)| check_pass(p)) {
            println!("{e:?}: refused: {err}");
            continue;
        }
        filters += 1;
        for (k, &t) in kernels.iter_mut().zip(&TYPES) {
            let mut m = SwiftMirror::new();
            k.clear().unwrap();
            m.sync(k, &w).unwrap();
            runs += compare(k, &w, t, &packets, e, &mut failures);
        }
    }
    // Random filters: 1-4 passes of 1-4 instructions (one in eight of 5 to MAX_INSTS), then a
    // pass added and one deleted.
    let mut rng = Rng(0x5eed_0123_4567_89ab);
    let sample: Vec<&Vec<u8>> = packets.iter().filter(|p| p.len() >= 60).collect();
    // The reader's outcome of each new kind of instruction on the packet it was drawn from
    // (true, false, abort): each kind must hold and fail, or the comparison proves little.
    let mut kinds = [[0usize; 3]; 4];
    let names = ["L1A", "Leq", "LeqM", "long passes"];
    let tally = |i: &Inst, p: &[u8], kinds: &mut [[usize; 3]; 4]| {
        let o = match netsift_swift::isa::eval(i, p, p.len() as u32) {
            Outcome::True => 0,
            Outcome::False => 1,
            Outcome::Abort => 2,
        };
        if i.mode() == Mode::L1A {
            kinds[0][o] += 1;
        }
        match i.op() {
            Some(Op::Leq) => kinds[1][o] += 1,
            Some(Op::LeqM) => kinds[2][o] += 1,
            _ => {}
        }
    };
    let mut long = 0;
    for round in 0..ROUNDS {
        let (mut w, _) = netsift_swift::open(96);
        let mut ids = Vec::new();
        for _ in 0..1 + rng.below(4) {
            let p = sample[rng.below(sample.len() as u64) as usize];
            let len = if rng.below(8) == 0 {
                long += 1;
                5 + rng.below(MAX_INSTS as u64 - 4)
            } else {
                1 + rng.below(4)
            };
            let insts: Vec<Inst> = (0..len)
                .map(|_| {
                    let i = random_inst(&mut rng, p);
                    tally(&i, p, &mut kinds);
                    // A long pass keeps the instructions that hold on `p` and one in six
                    // of the others (the rest become `Nop`s), so that its end is reached.
                    let holds = netsift_swift::isa::eval(&i, p, p.len() as u32) == Outcome::True;
                    if len <= 4 || holds || rng.below(6) == 0 {
                        i
                    } else {
                        Inst::new(Op::Nop, Mode::D, 0)
                    }
                })
                .collect();
            if len > 4 {
                let r = insts.iter().fold(Outcome::True, |r, i| match r {
                    Outcome::True => netsift_swift::isa::eval(i, p, p.len() as u32),
                    r => r,
                });
                kinds[3][[Outcome::True, Outcome::False, Outcome::Abort]
                    .iter()
                    .position(|&x| x == r)
                    .unwrap()] += 1;
            }
            ids.push(w.new_pass(&insts).unwrap());
        }
        let mut mirrors: Vec<SwiftMirror> = kernels
            .iter_mut()
            .map(|k| {
                k.clear().unwrap();
                let mut m = SwiftMirror::new();
                m.sync(k, &w).unwrap();
                m
            })
            .collect();
        // A third of the packets each round keeps the test short; every packet is covered
        // over the rounds.
        let part: Vec<Vec<u8>> = packets.iter().skip(round % 3).step_by(3).cloned().collect();
        let what = format!("random filter {round}: {:?}", w.list());
        for ((k, m), &t) in kernels.iter_mut().zip(&mut mirrors).zip(&TYPES) {
            runs += compare(k, &w, t, &part, &what, &mut failures);
            let _ = m;
        }
        filters += 1;
        // Update: delete the first pass, add another; compare again on a smaller part.
        w.del_pass(ids[0]).unwrap();
        let p = sample[rng.below(sample.len() as u64) as usize];
        let insts: Vec<Inst> = (0..1 + rng.below(3))
            .map(|_| random_inst(&mut rng, p))
            .collect();
        w.new_pass(&insts).unwrap();
        let part: Vec<Vec<u8>> = part.iter().step_by(4).cloned().collect();
        let what = format!("random filter {round} updated: {:?}", w.list());
        for ((k, m), &t) in kernels.iter_mut().zip(&mut mirrors).zip(&TYPES) {
            let writes = k.map_writes();
            let touched = m.sync(k, &w).unwrap();
            assert_eq!(touched, 2);
            assert!(k.map_writes() - writes <= 5);
            runs += compare(k, &w, t, &part, &what, &mut failures);
        }
        filters += 1;
    }
    for (k, fd) in kernels.iter().zip(fds) {
        assert_eq!(k.program_fd(), fd, "updates must not reload the program");
    }
    for (name, [t, f, a]) in names.iter().zip(kinds) {
        println!("{name}: {t} true, {f} false, {a} abort on their own packet");
        assert!(t > 20 && f > 20, "{name}: {t} true, {f} false");
    }
    println!("{long} passes of 5 to {MAX_INSTS} instructions");
    let too_long = vec![Inst::new(Op::Nop, Mode::D, 0); MAX_INSTS + 1];
    assert!(check_pass(&too_long).is_err());
    assert!(kernels[0].add_pass(&too_long).is_err());
    let acc = ACCEPTED.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "{filters} filters, {runs} kernel runs ({acc} accepted), {} disagreements",
        failures.len()
    );
    // Both verdicts occur often: the comparison is not vacuous.
    assert!(
        acc > runs / 20 && acc < runs - runs / 20,
        "{acc} of {runs} accepted"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn ftpcap_in_the_kernel_follows_the_data_connections() {
    require_root();
    // The paper's workload: 10 servers x 20 passive-mode data connections in 500 Kpps of
    // background traffic.
    let trace = netsift_bench::ftp::FtpWorkload::paper().generate();
    let mut failures = Vec::new();
    let mut runs = 0;
    let mut updates = 0;
    let mut accepts = 0;
    for t in TYPES {
        let mut ks = KernelSwift::load(t, 1024).unwrap();
        let fd = ks.program_fd();
        let insns = ks.program().len();
        let (w, _) = netsift_swift::open(96);
        let mut cap = netsift_swift::ftpcap::SwiftFtpCap::new(w).unwrap();
        let mut tracker = netsift_swift::ftpcap::Tracker::new();
        let mut mirror = SwiftMirror::new();
        mirror.sync(&mut ks, cap.writer()).unwrap();
        let mut reader = cap.writer().reader();
        let mut max_conns = 0;
        for p in &trace.packets {
            if let Some(ev) = tracker.observe(&p.data) {
                cap.apply(&ev).unwrap();
                let before = ks.map_writes();
                let n = mirror.sync(&mut ks, cap.writer()).unwrap();
                assert_eq!(n, 1, "one pass per event");
                assert!(
                    ks.map_writes() - before <= 3,
                    "an event is at most three map writes"
                );
                updates += 1;
                max_conns = max_conns.max(cap.connections());
            }
            if !t.test_run_takes(&p.data) {
                continue;
            }
            let want = reader.run(&p.data, p.data.len() as u32) != 0;
            let got = accepted(t, ks.program().run(&p.data).unwrap());
            runs += 1;
            accepts += usize::from(got);
            if want != got && failures.len() < 20 {
                failures.push(format!(
                    "FTPCap {t:?}: kernel {got}, Swift {want} on {:02x?}",
                    p.data
                ));
            }
        }
        assert_eq!(ks.program_fd(), fd);
        assert_eq!(ks.program().len(), insns);
        assert!(max_conns >= 2, "the workload overlaps data connections");
        println!("FTPCap {t:?}: {runs} runs so far, {updates} updates, up to {max_conns} open");
    }
    println!(
        "FTPCap: {runs} kernel runs ({accepts} accepted), {} disagreements",
        failures.len()
    );
    assert!(
        accepts > 100 && accepts < runs - 100,
        "{accepts} of {runs} accepted"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Updates while packets flow: one thread adds and removes data connections (into holes below
/// `hwm`, at the end, and deleting the last slot) while another runs packets through the
/// program; the control channel and a connection that stays open are accepted on every run,
/// and a connection never added is never accepted.
#[test]
fn updates_while_packets_flow_miss_nothing() {
    require_root();
    use netsift_swift::ftpcap::DataConn;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let conn = |i: u16| DataConn {
        from: [198, 18, 20, (i % 250) as u8 + 1],
        to: [198, 18, 10, 1],
        port: 50_000 + i,
    };
    // A TCP segment of a connection, from the listening side.
    let packet = |c: &DataConn| {
        let mut p = vec![0u8; 60];
        p[12..14].copy_from_slice(&[8, 0]);
        p[14] = 0x45;
        p[16..18].copy_from_slice(&46u16.to_be_bytes());
        p[22] = 64;
        p[23] = 6;
        p[26..30].copy_from_slice(&c.to);
        p[30..34].copy_from_slice(&c.from);
        p[34..36].copy_from_slice(&c.port.to_be_bytes());
        p[36..38].copy_from_slice(&40_000u16.to_be_bytes());
        p[46] = 0x50;
        p
    };
    for t in TYPES {
        let mut ks = KernelSwift::load(t, 64).unwrap();
        let control = netsift_swift::build::ip4_proto_ports(6, &[21]);
        ks.add_pass(&[control]).unwrap();
        let first = ks.add_pass(&conn(1000).pass()).unwrap();
        let stable = conn(1);
        ks.add_pass(&stable.pass()).unwrap();
        ks.del_pass(first).unwrap(); // a hole below hwm
        // The lowest free slot is taken first, as `Writer::new_pass` does.
        let probe = ks.add_pass(&conn(1001).pass()).unwrap();
        assert_eq!(probe, netsift_ebpf::swift::KernelPass(1));
        assert_eq!(ks.add_pass(&conn(1002).pass()).unwrap().0, 3);
        ks.del_pass(probe).unwrap();
        ks.del_pass(netsift_ebpf::swift::KernelPass(3)).unwrap();
        assert_eq!((ks.passes(), ks.hwm()), (2, 3));
        let mut ctrl = packet(&conn(7));
        ctrl[34..36].copy_from_slice(&21u16.to_be_bytes());
        let (p_stable, p_never) = (packet(&stable), packet(&conn(999)));
        let prog = ks.shared_program();
        let stop = AtomicBool::new(false);
        let done = AtomicU64::new(0);
        let (runs, misses, updates) = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let (mut runs, mut misses) = (0u64, Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    for (p, want) in [(&ctrl, true), (&p_stable, true), (&p_never, false)] {
                        let got = accepted(t, prog.run(p).unwrap());
                        runs += 1;
                        done.store(runs, Ordering::Relaxed);
                        if got != want && misses.len() < 10 {
                            misses.push(format!("{t:?}: accepted {got} on {:02x?}", &p[..40]));
                        }
                    }
                }
                (runs, misses)
            });
            let mut open = Vec::new();
            let mut k = 0u32;
            // At least 3,000 updates, and until the reader has made 200,000 runs.
            while k < 3_000 || done.load(Ordering::Relaxed) < 200_000 {
                k += 1;
                let c = conn(2 + (k % 40) as u16);
                if open.len() < 6 {
                    open.push(ks.add_pass(&c.pass()).unwrap());
                } else {
                    // Alternately the oldest (a hole) and the newest (the last slot).
                    let i = if k % 2 == 0 { 0 } else { open.len() - 1 };
                    ks.del_pass(open.remove(i)).unwrap();
                }
            }
            stop.store(true, Ordering::Relaxed);
            let (runs, misses) = reader.join().unwrap();
            (runs, misses, k)
        });
        println!("{t:?}: {runs} runs during {updates} updates");
        assert!(misses.is_empty(), "{}", misses.join("\n"));
    }
}
