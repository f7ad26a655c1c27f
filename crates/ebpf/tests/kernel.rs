//! The loader and the translation against the running kernel (needs root: every test fails,
//! saying so, without it).
//!
//! - Hand-written classic programs (out-of-bounds loads, division by zero, scratch memory,
//!   `ldxb 4*([k]&0xf)`, shifts, large constants, `len`, loops) translated for SCHED_CLS, XDP
//!   and SOCKET_FILTER and run with `BPF_PROG_TEST_RUN` on packets of many lengths: the kernel
//!   returns what netsift's interpreter returns (SOCKET_FILTER on the packet after its
//!   Ethernet header, which is what the kernel's test harness shows a socket filter).
//! - Maps: array, hash, LPM trie and per-CPU array from user space, and a program counting
//!   packets in a per-CPU map.
//! - A program the verifier rejects: the error carries its log.
//! - Attachment in a private network namespace: a socket filter on a UDP socket, XDP and tcx
//!   on its loopback interface, each dropping everything while attached and nothing after.

use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::time::Duration;

use netsift_bpf::code::*;
use netsift_bpf::{Filter, Insn as C, Program as Classic, Rules};
use netsift_ebpf::compile::{self, Access, Ancillary, Return};
use netsift_ebpf::{
    Cond, ErrorKind, Insn, LoadOptions, LoadedProgram, Map, MapSpec, MapType, ProgType, Program,
    Reg, Size, TcxDirection, UpdateFlag, XdpMode, tc_act, xdp_action,
};

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!(
            "this test loads eBPF programs and needs root (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON); \
             run it as root (CI does)"
        );
    }
}

/// Largest packet XDP test runs keep linear (longer ones get fragments).
const XDP_MAX: usize = 3520;

/// Deterministic packets: an IPv4/TCP frame cut at many lengths, and random bytes.
fn packets() -> Vec<Vec<u8>> {
    let mut frame = vec![0u8; 1600];
    let mut seed = 0x1234_5678u32;
    for b in frame.iter_mut() {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
        *b = (seed >> 16) as u8;
    }
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    frame[14] = 0x45;
    frame[20..22].copy_from_slice(&[0, 0]);
    frame[23] = 6;
    frame[34..36].copy_from_slice(&[0x04, 0xd2]);
    frame[36..38].copy_from_slice(&[0x00, 0x50]);
    let mut out: Vec<Vec<u8>> = [
        14, 15, 16, 17, 18, 20, 21, 22, 23, 24, 33, 34, 35, 36, 37, 38, 40, 54, 60, 64, 100, 255,
        256, 257, 1514, 1600,
    ]
    .iter()
    .map(|&n| frame[..n].to_vec())
    .collect();
    // IHL variants (X from `ldxb 4*([14]&0xf)`: 0 to 60).
    for ihl in [0u8, 1, 5, 6, 15] {
        let mut f = frame[..100].to_vec();
        f[14] = 0x40 | ihl;
        out.push(f);
    }
    // All-zero and all-ones frames, and one of XDP's maximum length.
    out.push(vec![0; 60]);
    out.push(vec![0xff; 60]);
    let mut big = vec![0u8; XDP_MAX];
    big[XDP_MAX - 1] = 7;
    out.push(big);
    out
}

/// Every variant of `prog` (tc and XDP with classic returns and with verdicts, tc through
/// `LD_ABS`, socket filter) against the interpreter on every packet. Returns the runs made.
fn agree(name: &str, prog: &[C]) -> usize {
    require_root();
    let classic = Classic::new(prog.to_vec());
    let interp = Filter::new(classic.clone(), Rules::Libpcap)
        .unwrap_or_else(|e| panic!("{name}: invalid test program: {e}"));
    let variants: [(ProgType, Access, Return); 6] = [
        (ProgType::SchedCls, Access::Direct, Return::Classic),
        (ProgType::SchedCls, Access::Direct, Return::Verdict),
        (ProgType::SchedCls, Access::LdAbs, Return::Classic),
        (ProgType::Xdp, Access::Direct, Return::Classic),
        (ProgType::Xdp, Access::Direct, Return::Verdict),
        (ProgType::SocketFilter, Access::LdAbs, Return::Verdict),
    ];
    let mut runs = 0;
    for (t, access, result) in variants {
        let mut opts = compile::Options::new(t);
        opts.access = access;
        opts.result = result;
        opts.ancillary = Ancillary::Absent;
        let ebpf = compile::from_classic(&classic, &opts)
            .unwrap_or_else(|e| panic!("{name} ({t} {access:?} {result:?}): {e}"));
        let loaded = ebpf
            .load(&LoadOptions::default())
            .unwrap_or_else(|e| panic!("{name} ({t} {access:?} {result:?}): {e}\n{ebpf}"));
        for p in packets() {
            if !t.test_run_takes(&p) {
                continue;
            }
            let got = loaded.run(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            let (want, seen) = match t {
                ProgType::SocketFilter => (interp.run(&p[14..], p.len() as u32 - 14), "after 14"),
                _ => (interp.run(&p, p.len() as u32), "whole"),
            };
            let want = match (t, result) {
                (ProgType::SchedCls, Return::Verdict) => {
                    if want == 0 {
                        tc_act::SHOT
                    } else {
                        tc_act::OK
                    }
                }
                (ProgType::Xdp, Return::Verdict) => {
                    if want == 0 {
                        xdp_action::DROP
                    } else {
                        xdp_action::PASS
                    }
                }
                _ => want,
            };
            assert_eq!(
                got,
                want,
                "{name} ({t} {access:?} {result:?}) on a {}-byte packet ({seen}): kernel {got}, \
                 interpreter {want}\nclassic:\n{}\neBPF:\n{ebpf}",
                p.len(),
                netsift_bpf::asm::dump(&classic, netsift_bpf::asm::Format::Asm)
            );
            runs += 1;
        }
    }
    runs
}

fn s(code: u16, k: u32) -> C {
    C::stmt(code, k)
}

fn j(code: u16, k: u32, jt: u8, jf: u8) -> C {
    C::jump(code, k, jt, jf)
}

const RET_A: C = C::stmt(RET | A, 0);

#[test]
fn absolute_loads_in_and_out_of_bounds() {
    for k in [
        0, 1, 12, 13, 14, 20, 22, 30, 34, 59, 60, 99, 100, 255, 1510, 1512, 1513, 3519,
    ] {
        for size in [B, H, W] {
            agree(
                &format!("ld{size:x} [{k}]"),
                &[s(LD | size | ABS, k), RET_A],
            );
        }
    }
    // Offsets the verifier cannot express (beyond 64 KiB) and the ancillary area reject.
    for k in [
        0xffff,
        0x10000,
        0x7fff_fffe,
        0x8000_0000,
        SKF_AD_OFF + 4,
        0xffff_ffff,
    ] {
        agree(&format!("ld [{k:#x}]"), &[s(LD | W | ABS, k), RET_A]);
    }
    // A straight-line run: the hoisted check covers the largest load, the result is the same.
    agree(
        "run of loads",
        &[
            s(LD | H | ABS, 12),
            s(ST, 0),
            s(LD | B | ABS, 40),
            s(ST, 1),
            s(LD | W | ABS, 30),
            s(LDX | W | MEM, 0),
            s(ALU | ADD | X, 0),
            s(LDX | W | MEM, 1),
            s(ALU | ADD | X, 0),
            RET_A,
        ],
    );
    // A path that checked less than another joins it: the join must check again.
    agree(
        "join",
        &[
            s(LD | B | ABS, 14),
            j(JMP | JSET | K, 1, 0, 2),
            s(LD | B | ABS, 50),
            s(LD | B | ABS, 20),
            s(LD | B | ABS, 40),
            RET_A,
        ],
    );
}

#[test]
fn indexed_loads_and_msh() {
    for x in [0u32, 1, 14, 60, 100, 1500, 0xfff0, 0xffff_fff0] {
        for k in [0u32, 2, 14, 40, 0x8000, 0xffff_fff0] {
            for size in [B, H, W] {
                agree(
                    &format!("ldx #{x}; ld{size:x} [x + {k}]"),
                    &[s(LDX | W | IMM, x), s(LD | size | IND, k), RET_A],
                );
            }
        }
    }
    // X from the packet: unbounded for the translator (the check against 64 KiB stays).
    agree(
        "ldx from packet",
        &[
            s(LD | H | ABS, 16),
            s(MISC | TAX, 0),
            s(LD | B | IND, 0),
            RET_A,
        ],
    );
    // libpcap's transport port load.
    for k in [14u32, 16, 18, 1000] {
        agree(
            &format!("msh port {k}"),
            &[
                s(LDX | B | MSH, 14),
                s(LD | H | IND, k),
                j(JMP | JEQ | K, 0x50, 0, 1),
                s(RET | K, 96),
                s(RET | K, 0),
            ],
        );
    }
    agree(
        "msh out of bounds",
        &[s(LDX | B | MSH, 3000), s(MISC | TXA, 0), RET_A],
    );
    agree(
        "msh far",
        &[s(LDX | B | MSH, 0x10000), s(MISC | TXA, 0), RET_A],
    );
}

#[test]
fn arithmetic_division_and_shifts() {
    let ops = [ADD, SUB, MUL, DIV, MOD, AND, OR, XOR, LSH, RSH];
    for op in ops {
        for x in [0u32, 1, 3, 31, 32, 33, 0x8000_0000, 0xffff_ffff] {
            // A from the packet, X constant: division by X = 0 rejects, shifts by 32+ give 0.
            agree(
                &format!("alu {op:#x} x={x}"),
                &[
                    s(LD | W | ABS, 26),
                    s(LDX | W | IMM, x),
                    s(ALU | op | X, 0),
                    RET_A,
                ],
            );
            if !(x == 0 && (op == DIV || op == MOD)) {
                agree(
                    &format!("alu {op:#x} k={x}"),
                    &[s(LD | W | ABS, 26), s(ALU | op | K, x), RET_A],
                );
            }
        }
    }
    agree("neg", &[s(LD | W | ABS, 26), s(ALU | NEG, 0), RET_A]);
    // X from the packet (may be 0).
    agree(
        "div by packet byte",
        &[
            s(LD | B | ABS, 40),
            s(MISC | TAX, 0),
            s(LD | IMM, 1000),
            s(ALU | DIV | X, 0),
            RET_A,
        ],
    );
    agree(
        "mod by zero",
        &[
            s(LDX | W | IMM, 0),
            s(LD | IMM, 7),
            s(ALU | MOD | X, 0),
            RET_A,
        ],
    );
}

#[test]
fn jumps_with_large_constants_and_x() {
    for (op, k) in [
        (JEQ, 0xffff_ffffu32),
        (JGT, 0x7fff_ffff),
        (JGT, 0xffff_fffe),
        (JGE, 0x8000_0000),
        (JSET, 0x8000_0000),
        (JSET, 0x0000_0001),
    ] {
        for ld in [LD | W | ABS, LD | H | ABS] {
            let prog = [
                s(ld, 26),
                j(JMP | op | K, k, 0, 1),
                s(RET | K, 1),
                s(RET | K, 0),
            ];
            agree(&format!("j{op:#x} #{k:#x}"), &prog);
            // Inverted layout: the true branch falls through (JSET has no inverse).
            let prog = [
                s(ld, 26),
                j(JMP | op | K, k, 1, 0),
                s(RET | K, 1),
                s(RET | K, 2),
            ];
            agree(&format!("j{op:#x} #{k:#x} inverted"), &prog);
        }
        let prog = [
            s(LD | W | ABS, 26),
            s(LDX | W | IMM, k),
            j(JMP | op | X, 0, 1, 2),
            s(RET | K, 5),
            s(RET | K, 6),
            s(RET | K, 7),
        ];
        agree(&format!("j{op:#x} x={k:#x}"), &prog);
    }
    // Both targets equal, and a jump over unreachable code.
    agree(
        "equal targets",
        &[
            s(LD | B | ABS, 14),
            j(JMP | JEQ | K, 0x45, 1, 1),
            s(RET | K, 9),
            RET_A,
        ],
    );
    agree("ja", &[j(JMP | JA, 1, 0, 0), s(RET | K, 9), s(RET | K, 3)]);
}

#[test]
fn scratch_memory_len_and_returns() {
    agree(
        "scratch",
        &[
            s(LD | H | ABS, 12),
            s(ST, 3),
            s(LDX | W | IMM, 5),
            s(STX, 15),
            s(LD | W | MEM, 15),
            s(LDX | W | MEM, 3),
            s(ALU | ADD | X, 0),
            RET_A,
        ],
    );
    // Libpcap's rules let a cell be read before it is written: it reads 0.
    agree(
        "unwritten scratch",
        &[s(LD | W | MEM, 7), s(ALU | ADD | K, 1), RET_A],
    );
    agree("len", &[s(LD | W | LEN, 0), RET_A]);
    agree("ldx len", &[s(LDX | W | LEN, 0), s(MISC | TXA, 0), RET_A]);
    agree("ret 0", &[s(RET | K, 0)]);
    agree("ret big", &[s(RET | K, 0xffff_ffff)]);
    agree("ret a zero", &[s(LD | IMM, 0), RET_A]);
}

#[test]
fn loops_run_under_may_goto() {
    // A loop walking the packet 8 bytes at a time until a zero byte (libpcap's protochain
    // walks extension headers the same way), and one that never ends: rejected.
    agree(
        "walk",
        &[
            s(LDX | W | IMM, 0),
            s(LD | B | IND, 14),
            j(JMP | JEQ | K, 0, 4, 0),
            s(MISC | TXA, 0),
            s(ALU | ADD | K, 8),
            s(MISC | TAX, 0),
            j(JMP | JA, (-6i32) as u32, 0, 0),
            s(MISC | TXA, 0),
            RET_A,
        ],
    );
    // A counting loop that ends exactly at the interpreter's budget of 2^20 instructions
    // (3 per round plus 2), and one round more: accepted, then rejected.
    let rounds = (netsift_bpf::LOOP_BUDGET - 1) / 3;
    for n in [rounds, rounds + 1] {
        let prog = [
            s(LD | IMM, 0),
            s(ALU | ADD | K, 1),
            j(JMP | JEQ | K, n, 1, 0),
            j(JMP | JA, (-3i32) as u32, 0, 0),
            RET_A,
        ];
        let f = Filter::new(Classic::new(prog.to_vec()), Rules::Libpcap).unwrap();
        assert_eq!(f.run(&[0; 60], 60), if n == rounds { n } else { 0 });
        agree(&format!("count to {n}"), &prog);
    }
    agree(
        "endless",
        &[
            s(LD | B | ABS, 14),
            j(JMP | JA, (-2i32) as u32, 0, 0),
            RET_A,
        ],
    );
}

#[test]
fn corpus_style_filters_from_the_compiler() {
    use netsift_lang::{Context, compile as front};
    let ctx = Context::new(netsift_wire::LinkType::ETHERNET);
    for expr in [
        "ip",
        "tcp port 80",
        "host 198.18.0.1 and not port 22",
        "ip6 protochain 6",
        "len > 100 and ether[0] & 1 = 0",
        "tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn",
        "vlan 10 and udp",
        "ip[2:2] - 20 > ip[0] & 0xf",
    ] {
        let pred = front(expr, &ctx).unwrap();
        for optimize in [false, true] {
            let classic = netsift_bpf::compile::compile(
                &pred,
                &netsift_bpf::compile::Options {
                    optimize,
                    snaplen: 262_144,
                },
            )
            .unwrap();
            agree(&format!("{expr} -O{}", u8::from(optimize)), classic.insns());
        }
    }
}

#[test]
fn long_programs_keep_jumps_in_range() {
    // 4,000 X-relative loads with X unknown, each stored: 9 eBPF instructions each, so jumps
    // to a single rejection at the end would need more than the 16-bit offset field holds.
    let mut prog = vec![s(LDX | W | LEN, 0)];
    for i in 0..4000 {
        prog.push(s(LD | W | IND, i % 64));
        prog.push(s(ST, i % 16));
    }
    prog.push(j(JMP | JEQ | K, 0x45, 0, 1));
    prog.push(s(RET | K, 1));
    prog.push(s(RET | K, 0));
    let classic = Classic::new(prog.clone());
    let p = compile::from_classic(&classic, &compile::Options::new(ProgType::Xdp)).unwrap();
    assert!(p.len() > 32_767, "{}", p.len());
    agree("4000 indexed loads", &prog);
    // Rejections placed after code that does not fall through, too.
    let mut prog = vec![s(LDX | W | LEN, 0)];
    for i in 0..1300 {
        prog.push(s(LD | B | IND, i % 64));
        prog.push(j(JMP | JEQ | K, 0x45, 1, 0));
        prog.push(s(RET | K, 7));
    }
    prog.push(s(RET | K, 0));
    agree("1300 returns", &prog);
}

#[test]
fn ancillary_loads_read_the_context() {
    require_root();
    // `ld ifindex` and `ld #len` in a test run on the namespace's loopback (ifindex 1).
    let prog = Classic::new(vec![s(LD | W | ABS, SKF_AD_OFF + 8), RET_A]);
    for t in [ProgType::SchedCls, ProgType::SocketFilter] {
        let mut opts = compile::Options::new(t);
        opts.result = Return::Classic;
        let p = compile::from_classic(&prog, &opts).unwrap();
        let l = p.load(&LoadOptions::default()).unwrap();
        assert_eq!(l.run(&[0u8; 60]).unwrap(), 1, "{t}");
    }
    // skb->protocol, converted to host order as the kernel's classic BPF does.
    let prog = Classic::new(vec![s(LD | H | ABS, SKF_AD_OFF), RET_A]);
    let mut opts = compile::Options::new(ProgType::SchedCls);
    opts.result = Return::Classic;
    let l = compile::from_classic(&prog, &opts)
        .unwrap()
        .load(&LoadOptions::default())
        .unwrap();
    let mut frame = [0u8; 60];
    frame[12..14].copy_from_slice(&[0x86, 0xdd]);
    assert_eq!(l.run(&frame).unwrap(), 0x86dd);
    // The packet type the kernel gave the test packet (eth_type_trans on the namespace's
    // loopback, whose address is all zeros): PACKET_HOST for its own address,
    // PACKET_MULTICAST for a group address, PACKET_OTHERHOST for another unicast one.
    let prog = Classic::new(vec![s(LD | H | ABS, SKF_AD_OFF + 4), RET_A]);
    for t in [ProgType::SchedCls, ProgType::SocketFilter] {
        let mut opts = compile::Options::new(t);
        opts.result = Return::Classic;
        let l = compile::from_classic(&prog, &opts)
            .unwrap()
            .load(&LoadOptions::default())
            .unwrap();
        let mut frame = [0u8; 60];
        assert_eq!(l.run(&frame).unwrap(), 0, "{t}: PACKET_HOST");
        frame[..6].copy_from_slice(&[0x01, 0x00, 0x5e, 0, 0, 1]);
        assert_eq!(l.run(&frame).unwrap(), 2, "{t}: PACKET_MULTICAST");
        frame[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        assert_eq!(l.run(&frame).unwrap(), 3, "{t}: PACKET_OTHERHOST");
    }
    // XDP has no packet type: refused with the reason.
    let prog = Classic::new(vec![s(LD | H | ABS, SKF_AD_OFF + 4), RET_A]);
    let e = compile::from_classic(&prog, &compile::Options::new(ProgType::Xdp)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.to_string().contains("SKF_AD_PKTTYPE"), "{e}");
    // `len` as the wire length (tc test runs set it through the context).
    let prog = Classic::new(vec![s(LD | W | LEN, 0), RET_A]);
    let mut opts = compile::Options::new(ProgType::SchedCls);
    opts.result = Return::Classic;
    opts.len = compile::Len::Wire;
    let l = compile::from_classic(&prog, &opts)
        .unwrap()
        .load(&LoadOptions::default())
        .unwrap();
    let ctx = netsift_ebpf::SkbContext {
        wire_len: 1514,
        ..Default::default()
    }
    .to_bytes();
    let out = l
        .test_run(&netsift_ebpf::TestRun {
            data: &[0u8; 60],
            repeat: 1,
            ctx: Some(&ctx),
        })
        .unwrap();
    assert_eq!(out.retval, 1514);
}

#[test]
fn verifier_rejection_carries_the_log() {
    require_root();
    // A direct packet load without a bounds check.
    let p = Program::new(
        ProgType::Xdp,
        vec![
            Insn::load(Size::W, Reg::R2, Reg::R1, 0),
            Insn::load(Size::B, Reg::R0, Reg::R2, 0),
            Insn::exit(),
        ],
    );
    let e = p
        .load(&LoadOptions {
            name: "bad".into(),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Verifier);
    let log = e.verifier_log().unwrap();
    assert!(log.contains("invalid access to packet"), "{log}");
    let text = e.to_string();
    assert!(
        text.starts_with(
            "loading XDP program \"bad\": rejected by the verifier (Permission denied"
        ) && text.contains("verifier log:")
            && text.contains("invalid access to packet"),
        "{text}"
    );
    // Statistics on success.
    let ok = Program::new(
        ProgType::Xdp,
        vec![Insn::mov64_imm(Reg::R0, 2), Insn::exit()],
    )
    .load(&LoadOptions {
        stats: true,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(ok.verified_insns(), Some(2));
    // An empty program never reaches the kernel.
    let e = Program::new(ProgType::Xdp, vec![])
        .load(&LoadOptions::default())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidProgram);
}

#[test]
fn translation_listing() {
    // The exact code for `ldh [12]; jeq #0x800; ret`: prologue, one check, be16, JMP32.
    let prog = Classic::new(vec![
        s(LD | H | ABS, 12),
        j(JMP | JEQ | K, 0x800, 0, 1),
        s(RET | K, 262_144),
        s(RET | K, 0),
    ]);
    let p = compile::from_classic(&prog, &compile::Options::new(ProgType::Xdp)).unwrap();
    assert_eq!(
        p.to_string(),
        " 0: (bf) r6 = r1
 1: (b4) w7 = 0
 2: (b4) w8 = 0
 3: (61) r9 = *(u32 *)(r6 +0)
 4: (61) r5 = *(u32 *)(r6 +4)
 5: (bf) r0 = r9
 6: (07) r0 += 14
 7: (2d) if r0 > r5 goto pc+5
 8: (69) r7 = *(u16 *)(r9 +12)
 9: (dc) r7 = be16 r7
10: (56) if w7 != 0x800 goto pc+2
11: (b4) w0 = 2
12: (95) exit
13: (b4) w0 = 1
14: (95) exit
"
    );
    let mut opts = compile::Options::new(ProgType::SocketFilter);
    opts.access = Access::Auto;
    let p = compile::from_classic(&prog, &opts).unwrap();
    assert_eq!(
        p.to_string(),
        "0: (bf) r6 = r1
1: (b4) w7 = 0
2: (b4) w8 = 0
3: (28) r0 = *(u16 *)skb[12]
4: (bc) w7 = w0
5: (56) if w7 != 0x800 goto pc+2
6: (b4) w0 = 262144
7: (95) exit
8: (b4) w0 = 0
9: (95) exit
"
    );
}

#[test]
fn option_errors() {
    let prog = Classic::new(vec![s(RET | K, 1)]);
    let cases = [
        (ProgType::SocketFilter, Access::Direct, Return::Verdict),
        (ProgType::Xdp, Access::LdAbs, Return::Verdict),
        (ProgType::SchedCls, Access::LdAbs, Return::Verdict),
    ];
    for (t, access, result) in cases {
        let mut opts = compile::Options::new(t);
        opts.access = access;
        opts.result = result;
        let e = compile::from_classic(&prog, &opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    }
    // Invalid classic programs are refused with the validator's message.
    let bad = Classic::new(vec![s(LD | W | ABS, 0)]);
    let e = compile::from_classic(&bad, &compile::Options::new(ProgType::Xdp)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidProgram);
    assert!(
        e.to_string()
            .contains("translating classic BPF to eBPF: invalid BPF program"),
        "{e}"
    );
}

#[test]
fn maps_from_user_space() {
    require_root();
    // Array: every index exists; out of range is an error.
    let a = Map::create(&MapSpec::new(MapType::Array, 4, 8, 4)).unwrap();
    assert_eq!(a.lookup(&1u32.to_ne_bytes()).unwrap(), Some(vec![0; 8]));
    a.update(&1u32.to_ne_bytes(), &42u64.to_ne_bytes(), UpdateFlag::Any)
        .unwrap();
    assert_eq!(
        a.lookup(&1u32.to_ne_bytes()).unwrap(),
        Some(42u64.to_ne_bytes().to_vec())
    );
    assert!(
        a.update(&9u32.to_ne_bytes(), &[0; 8], UpdateFlag::Any)
            .is_err()
    );
    // Wrong sizes are caught before the kernel is asked.
    let e = a.lookup(&[0u8; 3]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(
        e.to_string().contains("3 bytes given, the map's are 4"),
        "{e}"
    );

    // Hash: insert, no-exist/exist flags, delete, iterate.
    let h = Map::create(&MapSpec::new(MapType::Hash, 4, 4, 16)).unwrap();
    for k in 0u32..5 {
        h.update(
            &k.to_ne_bytes(),
            &(k * 10).to_ne_bytes(),
            UpdateFlag::NoExist,
        )
        .unwrap();
    }
    assert_eq!(
        h.update(&1u32.to_ne_bytes(), &[0; 4], UpdateFlag::NoExist)
            .unwrap_err()
            .kind(),
        ErrorKind::Busy
    );
    assert_eq!(
        h.update(&99u32.to_ne_bytes(), &[0; 4], UpdateFlag::Exist)
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    assert!(h.delete(&3u32.to_ne_bytes()).unwrap());
    assert!(!h.delete(&3u32.to_ne_bytes()).unwrap());
    assert_eq!(h.lookup(&3u32.to_ne_bytes()).unwrap(), None);
    let mut keys: Vec<u32> = h
        .keys()
        .unwrap()
        .iter()
        .map(|k| u32::from_ne_bytes(k[..4].try_into().unwrap()))
        .collect();
    keys.sort();
    assert_eq!(keys, [0, 1, 2, 4]);

    // LPM trie: the longest prefix wins.
    let t = Map::create(&MapSpec::new(MapType::LpmTrie, 8, 4, 16)).unwrap();
    let key = |len: u32, a: [u8; 4]| {
        let mut k = len.to_ne_bytes().to_vec();
        k.extend(a);
        k
    };
    t.update(
        &key(15, [198, 18, 0, 0]),
        &1u32.to_ne_bytes(),
        UpdateFlag::Any,
    )
    .unwrap();
    t.update(
        &key(24, [198, 18, 7, 0]),
        &2u32.to_ne_bytes(),
        UpdateFlag::Any,
    )
    .unwrap();
    let look = |a: [u8; 4]| t.lookup(&key(32, a)).unwrap().map(|v| v[0]);
    assert_eq!(look([198, 18, 7, 9]), Some(2));
    assert_eq!(look([198, 19, 1, 1]), Some(1));
    assert_eq!(look([10, 0, 0, 1]), None);

    // Per-CPU array: one 8-byte slot per possible CPU.
    let cpus = netsift_ebpf::possible_cpus().unwrap();
    let p = Map::create(&MapSpec::new(MapType::PercpuArray, 4, 4, 1)).unwrap();
    assert_eq!(p.value_len(), 8 * cpus);
    let v: Vec<u8> = (0..cpus as u64)
        .flat_map(|c| (c + 1).to_ne_bytes())
        .collect();
    p.update(&0u32.to_ne_bytes(), &v, UpdateFlag::Any).unwrap();
    assert_eq!(p.lookup(&0u32.to_ne_bytes()).unwrap(), Some(v));
    // Array entries cannot be deleted.
    assert_eq!(
        a.delete(&0u32.to_ne_bytes()).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

/// A SCHED_CLS program that counts its runs in slot 0 of a per-CPU array (lookup, add, exit).
fn counting_program(map: &Map) -> Program {
    let mut insns = vec![
        Insn::store_imm(Size::W, Reg::R10, -4, 0),
        Insn::mov64_reg(Reg::R2, Reg::R10),
        Insn::alu64_imm(netsift_ebpf::Alu::Add, Reg::R2, -4),
    ];
    insns.extend(map.ld_map(Reg::R1));
    insns.extend([
        Insn::call(netsift_ebpf::helper::MAP_LOOKUP_ELEM),
        Insn::jmp_imm(Cond::Eq, Reg::R0, 0, 3),
        Insn::load(Size::DW, Reg::R1, Reg::R0, 0),
        Insn::alu64_imm(netsift_ebpf::Alu::Add, Reg::R1, 1),
        Insn::store(Size::DW, Reg::R0, 0, Reg::R1),
        Insn::mov64_imm(Reg::R0, tc_act::OK as i32),
        Insn::exit(),
    ]);
    Program::new(ProgType::SchedCls, insns)
}

#[test]
fn a_program_counts_in_a_percpu_map() {
    require_root();
    let map = Map::create(&MapSpec::new(MapType::PercpuArray, 4, 8, 1)).unwrap();
    let prog = counting_program(&map)
        .load(&LoadOptions::default())
        .unwrap();
    let out = prog
        .test_run(&netsift_ebpf::TestRun {
            data: &[0u8; 64],
            repeat: 1000,
            ctx: None,
        })
        .unwrap();
    assert_eq!(out.retval, tc_act::OK);
    let v = map.lookup(&0u32.to_ne_bytes()).unwrap().unwrap();
    let total: u64 = v
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .sum();
    assert_eq!(total, 1000);
}

/// Run `f` on a thread in a new network namespace whose loopback is up.
fn in_netns<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    require_root();
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: unshare affects only this thread, which is discarded afterwards.
            assert_eq!(
                unsafe { libc::unshare(libc::CLONE_NEWNET) },
                0,
                "unshare(CLONE_NEWNET)"
            );
            set_up("lo");
            f()
        })
        .join()
        .unwrap()
    })
}

fn set_up(name: &str) {
    // SAFETY: an ioctl on a fresh socket with a zeroed ifreq naming the interface.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        assert!(fd >= 0);
        let mut req: libc::ifreq = std::mem::zeroed();
        for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        assert_eq!(libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req), 0);
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        assert_eq!(libc::ioctl(fd, libc::SIOCSIFFLAGS, &mut req), 0);
        libc::close(fd);
    }
}

/// Whether a datagram sent to `rx` over loopback arrives within 200 ms.
fn delivered(tx: &UdpSocket, rx: &UdpSocket) -> bool {
    tx.send_to(b"netsift", rx.local_addr().unwrap()).unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 64];
    rx.recv(&mut buf).is_ok()
}

fn constant(t: ProgType, v: i32) -> LoadedProgram {
    Program::new(t, vec![Insn::mov64_imm(Reg::R0, v), Insn::exit()])
        .load(&LoadOptions::default())
        .unwrap()
}

#[test]
fn attach_socket_filter_xdp_and_tcx() {
    in_netns(|| {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(delivered(&tx, &rx));

        // Socket filter: keep 0 bytes = drop, for this socket only.
        let keep_none = constant(ProgType::SocketFilter, 0);
        netsift_ebpf::attach_socket_filter(rx.as_fd(), &keep_none).unwrap();
        assert!(!delivered(&tx, &rx));
        assert!(netsift_ebpf::detach_socket_filter(rx.as_fd()).unwrap());
        assert!(delivered(&tx, &rx));
        assert!(!netsift_ebpf::detach_socket_filter(rx.as_fd()).unwrap());
        let e = netsift_ebpf::attach_socket_filter(rx.as_fd(), &constant(ProgType::Xdp, 2))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);

        // XDP (generic on loopback): drop while the link is open.
        let lo = netsift_ebpf::ifindex("lo").unwrap();
        assert_eq!(lo, 1);
        let xdp = constant(ProgType::Xdp, xdp_action::DROP as i32);
        let link = netsift_ebpf::Link::xdp(&xdp, lo, XdpMode::Auto).unwrap();
        assert_eq!(link.kind(), netsift_ebpf::LinkKind::Xdp { native: false });
        assert!(!delivered(&tx, &rx));
        // A second program on the same interface is refused.
        let e = netsift_ebpf::Link::xdp(&xdp, lo, XdpMode::Generic).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        link.detach();
        assert!(delivered(&tx, &rx));

        // tcx ingress: TC_ACT_SHOT while attached.
        let shot = constant(ProgType::SchedCls, tc_act::SHOT as i32);
        let link = netsift_ebpf::Link::tcx(&shot, lo, TcxDirection::Ingress).unwrap();
        assert!(!delivered(&tx, &rx));
        drop(link);
        assert!(delivered(&tx, &rx));
        let link = netsift_ebpf::Link::tcx(&shot, lo, TcxDirection::Egress).unwrap();
        assert!(!delivered(&tx, &rx));
        drop(link);
        assert!(delivered(&tx, &rx));

        assert_eq!(
            netsift_ebpf::ifindex("netsift-none").unwrap_err().kind(),
            ErrorKind::NotFound
        );
    });
}

/// XDP with `redirect`: the packets the filter accepts go to `bpf_redirect_map` (XDP_REDIRECT
/// when the devmap entry is set, XDP_PASS when it is not), the others are dropped — for
/// constant returns (`ret #k`) and for `ret a`.
#[test]
fn xdp_redirect_on_accept() {
    use netsift_ebpf::compile::{Redirect, RedirectKey};
    require_root();
    let devmap = Map::create(&MapSpec::new(MapType::DevMap, 4, 4, 2)).unwrap();
    // Entry 0: the loopback interface (index 1 in every namespace); entry 1 unset.
    devmap
        .update(&0u32.to_ne_bytes(), &1u32.to_ne_bytes(), UpdateFlag::Any)
        .unwrap();
    use std::os::fd::AsRawFd;
    let fd = devmap.as_fd().as_raw_fd();
    let programs: [(&str, Vec<C>); 2] = [
        (
            "ip and tcp (ret #k)",
            vec![
                s(LD | H | ABS, 12),
                j(JMP | JEQ | K, 0x800, 0, 3),
                s(LD | B | ABS, 23),
                j(JMP | JEQ | K, 6, 0, 1),
                s(RET | K, 262_144),
                s(RET | K, 0),
            ],
        ),
        ("ldb [40] (ret a)", vec![s(LD | B | ABS, 40), s(RET | A, 0)]),
    ];
    let mut redirected = 0;
    for (name, prog) in programs {
        let classic = Classic::new(prog);
        let interp = Filter::new(classic.clone(), Rules::Libpcap).unwrap();
        for (key, accept) in [
            (RedirectKey::Fixed(0), xdp_action::REDIRECT),
            (RedirectKey::Fixed(1), xdp_action::PASS),
        ] {
            let mut opts = compile::Options::new(ProgType::Xdp);
            opts.redirect = Some(Redirect { map_fd: fd, key });
            let ebpf = compile::from_classic(&classic, &opts).unwrap();
            let loaded = ebpf
                .load(&LoadOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}\n{ebpf}"));
            for p in packets() {
                if !ProgType::Xdp.test_run_takes(&p) {
                    continue;
                }
                let want = if interp.run(&p, p.len() as u32) == 0 {
                    xdp_action::DROP
                } else {
                    accept
                };
                let got = loaded.run(&p).unwrap();
                assert_eq!(got, want, "{name} {key:?} on a {}-byte packet", p.len());
                redirected += usize::from(got == xdp_action::REDIRECT);
            }
        }
    }
    assert!(redirected > 10, "only {redirected} packets redirected");
}
