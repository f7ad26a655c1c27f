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

/// Split `data` into a program (8-byte instructions, count in the first byte) and a packet;
/// validate the program under both rule sets and run it. Programs the kernel accepts (forward
/// jumps, initialised scratch memory) must give libpcap's `bpf_filter` result.
pub fn bpf_run(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
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
    let program = Program::new(insns);
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
