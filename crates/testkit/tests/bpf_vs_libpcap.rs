//! The classic BPF machine against libpcap 1.10: interpreter verdicts (on random programs and on
//! every program libpcap compiles from its own test suite, over every shared capture), validator
//! agreement, and `bpf_image` text.

use netsift_bpf::{Filter, Insn, Program, Rules, asm, code::*, validate};
use netsift_testkit::progen::random_program;
use netsift_testkit::{corpus, data, oracle, rng::Rng};

#[test]
fn random_programs_agree_with_bpf_filter() {
    let mut rng = Rng::new(0x05ee_db9f);
    let mut packets: Vec<Vec<u8>> = (0..24).map(|i| rng.bytes(i * 5)).collect();
    packets.push(vec![0x45; 60]);
    let (mut programs, mut runs) = (0, 0u64);
    for case in 0..4000 {
        let program = random_program(&mut rng);
        validate(&program, Rules::Kernel)
            .unwrap_or_else(|e| panic!("case {case}: generator made an invalid program: {e}"));
        assert!(
            oracle::validate(&program),
            "case {case}: libpcap rejects a kernel-valid program"
        );
        let filter = Filter::new(program.clone(), Rules::Kernel).unwrap();
        for p in &packets {
            for wire_len in [p.len() as u32, p.len() as u32 + 100] {
                let theirs = oracle::filter(&program, p, wire_len).unwrap();
                let ours = filter.run(p, wire_len);
                assert_eq!(
                    ours,
                    theirs,
                    "case {case}, packet of {} bytes, wire length {wire_len}:\n{}",
                    p.len(),
                    asm::dump(&program, asm::Format::Asm)
                );
                runs += 1;
            }
        }
        programs += 1;
    }
    println!(
        "random programs: {programs} programs x {} packets: {runs} runs, 0 differences",
        packets.len() * 2
    );
}

#[test]
fn large_constant_shifts_match_libpcap() {
    // libpcap's validator allows `lsh #33`; its interpreter (x86-64) shifts by the low 5 bits.
    for k in [31u32, 32, 33, 63, 64, 255] {
        for op in [LSH, RSH] {
            let p = Program::new(vec![
                Insn::stmt(LD | IMM, 0x8000_0001),
                Insn::stmt(ALU | op | K, k),
                Insn::stmt(RET | A, 0),
            ]);
            let ours = Filter::new(p.clone(), Rules::Libpcap).unwrap().run(&[], 0);
            assert_eq!(Some(ours), oracle::filter(&p, &[], 0), "op {op:#x} k {k}");
        }
    }
}

#[test]
fn validators_agree_on_random_instruction_soup() {
    let mut rng = Rng::new(42);
    let known: Vec<u16> = (0..=0xffu16)
        .filter(|&c| Insn::stmt(c, 0).is_known_opcode())
        .collect();
    let mut accepted = 0;
    for _ in 0..200_000 {
        let n = 1 + rng.below(6) as usize;
        let mut insns: Vec<Insn> = (0..n)
            .map(|_| Insn {
                code: match rng.below(3) {
                    0 => *rng.pick(&known),
                    1 => rng.below(0xb2) as u16,
                    _ => rng.next_u32() as u16,
                },
                jt: rng.below(4) as u8,
                jf: rng.below(4) as u8,
                k: if rng.chance(1, 2) {
                    rng.below(20) as u32
                } else {
                    rng.next_u32()
                },
            })
            .collect();
        if rng.chance(3, 4) {
            insns.push(Insn::stmt(*rng.pick(&[RET | K, RET | A]), 0));
        }
        let p = Program::new(insns);
        let ours = validate(&p, Rules::Libpcap).is_ok();
        let theirs = oracle::validate(&p);
        if ours {
            accepted += 1;
            assert!(
                theirs,
                "netsift accepts what libpcap rejects: {:?}",
                p.insns()
            );
        } else if theirs {
            // The only programs libpcap accepts and netsift rejects use opcodes outside the
            // kernel's table, on which libpcap's own interpreter would abort().
            assert!(
                p.insns().iter().any(|i| !i.is_known_opcode()),
                "libpcap accepts what netsift rejects: {:?} ({})",
                p.insns(),
                validate(&p, Rules::Libpcap).unwrap_err()
            );
        }
    }
    assert!(
        accepted > 1000,
        "too few valid programs generated: {accepted}"
    );
}

#[test]
fn images_match_bpf_image() {
    let mut rng = Rng::new(7);
    let ks = [
        0u32,
        1,
        12,
        0x800,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        0xffff_f000,
        0xffff_f02c,
        0xffff_f03c,
        0xffff_f040,
        0xffff_f001,
    ];
    for code in 0..=0xffu16 {
        for &k in &ks {
            for n in [0usize, 7, 300] {
                let insn = Insn::jump(code, k, rng.below(256) as u8, rng.below(256) as u8);
                assert_eq!(
                    asm::image(&insn, n),
                    oracle::image(&insn, n),
                    "{insn:?} at {n}"
                );
            }
        }
    }
}

/// The link types the issue requires (DLT names of libpcap's tables).
const LINK_TYPES: [&str; 4] = ["EN10MB", "RAW", "LINUX_SLL", "NULL"];

#[test]
fn libpcap_test_suite_programs_agree_on_every_shared_capture() {
    // Packets of every shared capture, as libpcap reads them, grouped by DLT.
    let by_dlt = corpus::captures_by_dlt();
    let rows = data::libpcap_table("accept.tsv");
    let mut report = String::new();
    let mut total_runs = 0u64;
    for name in LINK_TYPES {
        let dlt = oracle::dlt_from_name(name).unwrap_or_else(|| panic!("libpcap knows no {name}"));
        let (files, packets) = by_dlt
            .get(&dlt)
            .map(|(files, packets)| (*files, packets.as_slice()))
            .unwrap_or_default();
        assert!(!packets.is_empty(), "no shared capture of link type {name}");
        let (mut compiled, mut rejected, mut runs) = (0, 0, 0u64);
        let mut out = Vec::new();
        for row in rows.iter().filter(|r| r.get("dlt") == name) {
            let snaplen = row.get("snaplen").parse().unwrap_or(262_144);
            let optimize = row.get("optimize") == "1";
            let program = match oracle::compile(dlt, snaplen, row.get("expr"), optimize) {
                Ok(p) => p,
                Err(_) => {
                    rejected += 1;
                    continue;
                }
            };
            compiled += 1;
            let filter = Filter::new(program.clone(), Rules::Libpcap).unwrap_or_else(|e| {
                panic!(
                    "{}: libpcap's program fails netsift's validator: {e}",
                    row.get("label")
                )
            });
            filter.run_batch(packets.iter().map(|(d, l)| (d.as_slice(), *l)), &mut out);
            for (i, ((d, l), ours)) in packets.iter().zip(&out).enumerate() {
                let theirs = oracle::filter(&program, d, *l).unwrap();
                assert_eq!(
                    *ours,
                    theirs,
                    "{} ({}): packet {i} of {name}: netsift {ours}, libpcap {theirs}",
                    row.get("label"),
                    row.get("expr")
                );
            }
            runs += packets.len() as u64;
        }
        total_runs += runs;
        report += &format!(
            "{name}: {compiled} programs ({rejected} expressions libpcap 1.10.3 rejects) x {} packets \
             from {} captures = {runs} verdicts, 0 disagreements\n",
            packets.len(),
            files
        );
    }
    println!("{report}total: {total_runs} verdicts equal to libpcap's");
}
