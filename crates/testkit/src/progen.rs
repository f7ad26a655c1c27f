//! Random classic BPF programs that the validators accept, for differential tests of the
//! engines (interpreter, JIT) against each other and against libpcap.

use netsift_bpf::code::*;
use netsift_bpf::{Insn, Program};

use crate::rng::Rng;

/// A random program the kernel accepts: known opcodes, forward jumps, scratch cells written
/// before they are read (all 16 are stored first), small packet offsets.
pub fn random_program(rng: &mut Rng) -> Program {
    let body_len = 1 + rng.below(30) as usize;
    let mut insns: Vec<Insn> = (0..16).map(|i| Insn::stmt(ST, i)).collect();
    let start = insns.len();
    let total = start + body_len + 2;
    for pc in start..start + body_len {
        let k_small = rng.below(80) as u32;
        let k = if rng.chance(1, 4) {
            rng.next_u32()
        } else {
            k_small
        };
        let remaining = (total - pc - 1) as u64;
        let off = |rng: &mut Rng| rng.below(remaining.min(256)) as u8;
        let insn = match rng.below(12) {
            0 => Insn::stmt(
                *rng.pick(&[LD | W | ABS, LD | H | ABS, LD | B | ABS]),
                k_small,
            ),
            1 => Insn::stmt(
                *rng.pick(&[LD | W | IND, LD | H | IND, LD | B | IND]),
                k_small,
            ),
            2 => Insn::stmt(*rng.pick(&[LD | IMM, LDX | W | IMM]), k),
            3 => Insn::stmt(*rng.pick(&[LD | MEM, LDX | W | MEM, ST, STX]), k_small & 15),
            4 => Insn::stmt(
                *rng.pick(&[LD | W | LEN, LDX | W | LEN, MISC | TAX, MISC | TXA]),
                0,
            ),
            5 => Insn::stmt(LDX | B | MSH, k_small),
            6 | 7 => {
                let op = *rng.pick(&[ADD, SUB, MUL, DIV, MOD, AND, OR, XOR, LSH, RSH, NEG]);
                let src = if op == NEG { K } else { *rng.pick(&[K, X]) };
                let mut k = k;
                if src == K && (op == DIV || op == MOD) && k == 0 {
                    k = 1;
                }
                if src == K && (op == LSH || op == RSH) {
                    k &= 31;
                }
                Insn::stmt(ALU | op | src, k)
            }
            8 => Insn::stmt(JMP | JA, u32::from(off(rng))),
            9 => Insn::stmt(*rng.pick(&[RET | K, RET | A]), k),
            _ => {
                let op = *rng.pick(&[JEQ, JGT, JGE, JSET]);
                let src = *rng.pick(&[K, X]);
                Insn::jump(JMP | op | src, k, off(rng), off(rng))
            }
        };
        insns.push(insn);
    }
    insns.push(Insn::stmt(RET | A, 0));
    insns.push(Insn::stmt(RET | K, 0xffff));
    Program::new(insns)
}

/// A random program for [`netsift_bpf::Rules::Libpcap`], which also exercises what the kernel
/// rules leave out of [`random_program`]: runs of `jeq` (the JIT's binary searches), constant
/// offsets near and past 2^31 and ancillary offsets, and (when `loops`) backward jumps.
pub fn random_program_wide(rng: &mut Rng, loops: bool) -> Program {
    let mut insns = random_program(rng).into_insns();
    let ret_a = insns.len() - 2;
    // A jeq chain on A into the two returns, placed before the final returns.
    if rng.chance(1, 2) {
        let n = 4 + rng.below(12) as usize;
        let base = insns.len() - 2;
        let mut chain = Vec::new();
        for j in 0..n {
            let v = if rng.chance(1, 3) {
                rng.next_u32()
            } else {
                rng.below(8) as u32
            };
            let to_ret = (n - j - 1) as u8; // jt: to `ret a` right after the chain
            let jf = if j + 1 == n { to_ret + 1 } else { 0 };
            chain.push(Insn::jump(JMP | JEQ | K, v, to_ret, jf));
        }
        let _ = base;
        let tail = insns.split_off(insns.len() - 2);
        // Re-aim jumps that pointed at the returns: they still do, as the chain sits between.
        insns.extend(chain);
        insns.extend(tail);
    }
    // Odd offsets.
    for insn in insns.iter_mut() {
        if matches!(class(insn.code), LD | LDX)
            && matches!(mode(insn.code), ABS | IND | MSH)
            && rng.chance(1, 12)
        {
            insn.k = *rng.pick(&[
                0x7fff_fff0,
                0x8000_0000,
                0xffff_fffc,
                SKF_AD_OFF + 4,
                SKF_AD_OFF + 48,
                1_000_000,
            ]);
        }
    }
    if loops && rng.chance(1, 2) {
        // A bounded or unbounded backward jump somewhere in the body.
        let at = 16 + rng.below((ret_a.saturating_sub(16)).max(1) as u64) as usize;
        if at < insns.len() - 2 {
            let back = rng.below(at as u64 + 1) as usize;
            insns[at] = Insn::stmt(JMP | JA, (back as i64 - at as i64 - 1) as i32 as u32);
        }
    }
    Program::new(insns)
}
