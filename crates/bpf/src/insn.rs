//! The classic BPF instruction: encoding, opcode constants, and programs.
//!
//! [`Insn`] has exactly the layout of C's `struct bpf_insn` (`u16 code; u8 jt; u8 jf; u32 k`), so
//! a `&[Insn]` can be handed to libpcap or to the kernel's `SO_ATTACH_FILTER` without conversion.
//! The opcode is built from the bit fields of the original BSD macros; [`code`] has them all,
//! under their C names minus the `BPF_` prefix.

use std::fmt;

/// Opcode bit fields of classic BPF, named as in `<pcap/bpf.h>` without the `BPF_` prefix.
///
/// An opcode is `class | size | mode` for loads, `class | op | src` for ALU and jumps,
/// `class | rval` for returns and `class | miscop` for register transfers.
pub mod code {
    /// Instruction class: load into A.
    pub const LD: u16 = 0x00;
    /// Instruction class: load into X.
    pub const LDX: u16 = 0x01;
    /// Instruction class: store A into scratch memory.
    pub const ST: u16 = 0x02;
    /// Instruction class: store X into scratch memory.
    pub const STX: u16 = 0x03;
    /// Instruction class: arithmetic and logic on A.
    pub const ALU: u16 = 0x04;
    /// Instruction class: jumps.
    pub const JMP: u16 = 0x05;
    /// Instruction class: return.
    pub const RET: u16 = 0x06;
    /// Instruction class: register transfers.
    pub const MISC: u16 = 0x07;

    /// Load size: 32-bit word.
    pub const W: u16 = 0x00;
    /// Load size: 16-bit half word.
    pub const H: u16 = 0x08;
    /// Load size: byte.
    pub const B: u16 = 0x10;

    /// Addressing mode: immediate `#k`.
    pub const IMM: u16 = 0x00;
    /// Addressing mode: packet at absolute offset `[k]`.
    pub const ABS: u16 = 0x20;
    /// Addressing mode: packet at indexed offset `[x + k]`.
    pub const IND: u16 = 0x40;
    /// Addressing mode: scratch memory `M[k]`.
    pub const MEM: u16 = 0x60;
    /// Addressing mode: packet length `#len`.
    pub const LEN: u16 = 0x80;
    /// Addressing mode: IP header length `4*([k]&0xf)` (only `ldxb`).
    pub const MSH: u16 = 0xa0;

    /// ALU operation: add.
    pub const ADD: u16 = 0x00;
    /// ALU operation: subtract.
    pub const SUB: u16 = 0x10;
    /// ALU operation: multiply.
    pub const MUL: u16 = 0x20;
    /// ALU operation: unsigned divide.
    pub const DIV: u16 = 0x30;
    /// ALU operation: bitwise or.
    pub const OR: u16 = 0x40;
    /// ALU operation: bitwise and.
    pub const AND: u16 = 0x50;
    /// ALU operation: shift left.
    pub const LSH: u16 = 0x60;
    /// ALU operation: logical shift right.
    pub const RSH: u16 = 0x70;
    /// ALU operation: two's complement negation.
    pub const NEG: u16 = 0x80;
    /// ALU operation: unsigned modulo (Linux and libpcap addition).
    pub const MOD: u16 = 0x90;
    /// ALU operation: exclusive or (Linux and libpcap addition).
    pub const XOR: u16 = 0xa0;

    /// Jump operation: unconditional, offset in `k`.
    pub const JA: u16 = 0x00;
    /// Jump operation: `A == operand`.
    pub const JEQ: u16 = 0x10;
    /// Jump operation: `A > operand` (unsigned).
    pub const JGT: u16 = 0x20;
    /// Jump operation: `A >= operand` (unsigned).
    pub const JGE: u16 = 0x30;
    /// Jump operation: `A & operand != 0`.
    pub const JSET: u16 = 0x40;

    /// Operand source: the constant `k`.
    pub const K: u16 = 0x00;
    /// Operand source: the index register X.
    pub const X: u16 = 0x08;
    /// Return value source: the accumulator (`ret a`).
    pub const A: u16 = 0x10;

    /// Register transfer: X = A.
    pub const TAX: u16 = 0x00;
    /// Register transfer: A = X.
    pub const TXA: u16 = 0x80;

    /// Number of 32-bit words of scratch memory (`BPF_MEMWORDS`).
    pub const MEMWORDS: u32 = 16;
    /// Largest program the Linux kernel accepts (`BPF_MAXINSNS`).
    pub const MAXINSNS: usize = 4096;
    /// Base of the Linux ancillary-data load offsets (`SKF_AD_OFF`, i.e. -0x1000).
    pub const SKF_AD_OFF: u32 = 0xffff_f000;

    /// The class bits of an opcode.
    pub const fn class(code: u16) -> u16 {
        code & 0x07
    }
    /// The size bits of a load opcode.
    pub const fn size(code: u16) -> u16 {
        code & 0x18
    }
    /// The mode bits of a load opcode.
    pub const fn mode(code: u16) -> u16 {
        code & 0xe0
    }
    /// The operation bits of an ALU or jump opcode.
    pub const fn op(code: u16) -> u16 {
        code & 0xf0
    }
    /// The source bit of an ALU or jump opcode.
    pub const fn src(code: u16) -> u16 {
        code & 0x08
    }
    /// The return-value bits of a `ret` opcode.
    pub const fn rval(code: u16) -> u16 {
        code & 0x18
    }
    /// The operation bits of a register-transfer opcode.
    pub const fn miscop(code: u16) -> u16 {
        code & 0xf8
    }
}

/// One classic BPF instruction, laid out exactly as C's `struct bpf_insn`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Insn {
    /// The opcode (see [`code`]).
    pub code: u16,
    /// Jump offset, relative to the next instruction, when the condition holds.
    pub jt: u8,
    /// Jump offset, relative to the next instruction, when the condition fails.
    pub jf: u8,
    /// The generic operand: constant, offset, scratch index or jump offset.
    pub k: u32,
}

impl Insn {
    /// A non-jump instruction (C's `BPF_STMT`).
    pub const fn stmt(code: u16, k: u32) -> Insn {
        Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    /// A jump instruction (C's `BPF_JUMP`).
    pub const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
        Insn { code, jt, jf, k }
    }

    /// Whether this is a conditional jump (any `BPF_JMP` other than `ja`).
    pub const fn is_conditional_jump(&self) -> bool {
        code::class(self.code) == code::JMP && code::op(self.code) != code::JA
    }

    /// Whether this instruction is one that Linux and libpcap can execute: the opcode is one of the
    /// exact values of the kernel's table of allowed codes. libpcap's own validator only checks
    /// classes and modes, but its interpreter aborts on any other value, so netsift accepts
    /// exactly this set everywhere.
    pub const fn is_known_opcode(&self) -> bool {
        use code::*;
        matches!(
            self.code,
            // ALU with K and X operands, and negation.
            0x04 | 0x0c
                | 0x14
                | 0x1c
                | 0x24
                | 0x2c
                | 0x34
                | 0x3c
                | 0x44
                | 0x4c
                | 0x54
                | 0x5c
                | 0x64
                | 0x6c
                | 0x74
                | 0x7c
                | 0x84
                | 0x94
                | 0x9c
                | 0xa4
                | 0xac
        ) || matches!(
            self.code,
            c if c == LD | W | ABS
                || c == LD | H | ABS
                || c == LD | B | ABS
                || c == LD | W | IND
                || c == LD | H | IND
                || c == LD | B | IND
                || c == LD | W | LEN
                || c == LD | IMM
                || c == LD | MEM
                || c == LDX | W | IMM
                || c == LDX | W | MEM
                || c == LDX | W | LEN
                || c == LDX | B | MSH
                || c == ST
                || c == STX
                || c == MISC | TAX
                || c == MISC | TXA
                || c == RET | K
                || c == RET | A
                || c == JMP | JA
                || c == JMP | JEQ | K
                || c == JMP | JEQ | X
                || c == JMP | JGT | K
                || c == JMP | JGT | X
                || c == JMP | JGE | K
                || c == JMP | JGE | X
                || c == JMP | JSET | K
                || c == JMP | JSET | X
        )
    }
}

impl Insn {
    /// This instruction with the fields its opcode ignores set to zero: `jt`/`jf` of everything
    /// but conditional jumps, and `k` where the operand is X, A or the length. Two instructions
    /// with equal canonical forms behave identically; the `-d` text keeps only canonical fields.
    pub const fn canonical(&self) -> Insn {
        use code::*;
        let c = self.code;
        let uses_k = match class(c) {
            ALU => src(c) == K && op(c) != NEG,
            JMP => src(c) == K,
            RET => rval(c) == K,
            LD | LDX => mode(c) != LEN,
            MISC => false,
            _ => true,
        };
        let k = if uses_k { self.k } else { 0 };
        if self.is_conditional_jump() {
            Insn {
                code: c,
                jt: self.jt,
                jf: self.jf,
                k,
            }
        } else {
            Insn {
                code: c,
                jt: 0,
                jf: 0,
                k,
            }
        }
    }
}

impl fmt::Display for Insn {
    /// The `-ddd` form: `code jt jf k`, all decimal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {} {}", self.code, self.jt, self.jf, self.k)
    }
}

/// A classic BPF program: a sequence of instructions, not necessarily valid.
///
/// Validation ([`crate::validate`]) turns a program into something that can run; a `Program` on
/// its own is just data, e.g. what an assembler parsed or a compiler produced.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Program {
    insns: Vec<Insn>,
}

impl Program {
    /// A program made of these instructions.
    pub fn new(insns: Vec<Insn>) -> Program {
        Program { insns }
    }

    /// The program that accepts every packet whole: `ret #snaplen`.
    pub fn accept_all(snaplen: u32) -> Program {
        Program::new(vec![Insn::stmt(code::RET | code::K, snaplen)])
    }

    /// The instructions.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// The instructions, owned.
    pub fn into_insns(self) -> Vec<Insn> {
        self.insns
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// Whether the program has no instructions (which no validator accepts).
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }
}

impl From<Vec<Insn>> for Program {
    fn from(insns: Vec<Insn>) -> Program {
        Program::new(insns)
    }
}

impl FromIterator<Insn> for Program {
    fn from_iter<I: IntoIterator<Item = Insn>>(iter: I) -> Program {
        Program::new(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_struct_bpf_insn() {
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        assert_eq!(std::mem::align_of::<Insn>(), 4);
    }

    #[test]
    fn known_opcodes_are_the_kernel_table() {
        let known: Vec<u16> = (0..=u16::MAX)
            .filter(|&c| Insn::stmt(c, 0).is_known_opcode())
            .collect();
        // 21 ALU + 13 loads + 2 stores + 2 misc + 2 ret + 9 jumps.
        assert_eq!(known.len(), 49, "{known:x?}");
        assert!(Insn::stmt(0x28, 12).is_known_opcode()); // ldh [12]
        assert!(Insn::stmt(0xb1, 14).is_known_opcode()); // ldxb 4*([14]&0xf)
        assert!(Insn::stmt(0x30, 0).is_known_opcode()); // ldb [k]
        assert!(!Insn::stmt(0x10, 0).is_known_opcode()); // ld b imm: libpcap aborts
        assert!(!Insn::stmt(0x0e, 0).is_known_opcode()); // ret x
    }
}
