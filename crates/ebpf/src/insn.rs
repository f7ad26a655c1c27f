//! The eBPF instruction: encoding, opcode constants and constructors.
//!
//! An [`Insn`] is one 8-byte slot of `struct bpf_insn` (`u8 code; u8 dst:4, src:4; s16 off;
//! s32 imm`). The one 16-byte instruction, `ld_imm64` (`BPF_LD | BPF_DW | BPF_IMM`), takes two
//! slots: the first carries the low 32 bits of the constant in `imm`, the second (code 0) the
//! high 32 bits; [`Insn::ld_imm64`] returns both. Register fields are kept as plain numbers so
//! that any slot can be represented (the kernel also uses `src` for pseudo values such as
//! [`op::PSEUDO_MAP_FD`]); the typed constructors take a [`Reg`].
//!
//! Arithmetic comes in two widths: the `ALU64` class works on whole 64-bit registers, the
//! `ALU` class on their low 32 bits and zero-extends the result. Jumps likewise: `JMP`
//! compares 64-bit values (an immediate is sign-extended first), `JMP32` the low 32 bits.
//! Classic BPF's 32-bit accumulator maps onto the 32-bit forms.

use std::fmt;

/// Opcode fields, named as in `<linux/bpf.h>` without the `BPF_` prefix.
pub mod op {
    /// Class: load from an immediate or, in the legacy forms, from the socket buffer.
    pub const LD: u8 = 0x00;
    /// Class: load from memory into a register.
    pub const LDX: u8 = 0x01;
    /// Class: store an immediate to memory.
    pub const ST: u8 = 0x02;
    /// Class: store a register to memory.
    pub const STX: u8 = 0x03;
    /// Class: 32-bit arithmetic (zero-extends the result).
    pub const ALU: u8 = 0x04;
    /// Class: 64-bit jumps, calls and exit.
    pub const JMP: u8 = 0x05;
    /// Class: jumps comparing the low 32 bits.
    pub const JMP32: u8 = 0x06;
    /// Class: 64-bit arithmetic.
    pub const ALU64: u8 = 0x07;

    /// Size: 32-bit word.
    pub const W: u8 = 0x00;
    /// Size: 16-bit half word.
    pub const H: u8 = 0x08;
    /// Size: byte.
    pub const B: u8 = 0x10;
    /// Size: 64-bit double word.
    pub const DW: u8 = 0x18;

    /// Mode: immediate (`ld_imm64`).
    pub const IMM: u8 = 0x00;
    /// Mode: legacy packet load at an absolute offset (socket filters and tc only).
    pub const ABS: u8 = 0x20;
    /// Mode: legacy packet load at a register plus an offset.
    pub const IND: u8 = 0x40;
    /// Mode: memory at a register plus an offset.
    pub const MEM: u8 = 0x60;
    /// Mode: sign-extending memory load.
    pub const MEMSX: u8 = 0x80;
    /// Mode: atomic read-modify-write.
    pub const ATOMIC: u8 = 0xc0;

    /// Source: the immediate.
    pub const K: u8 = 0x00;
    /// Source: the `src` register.
    pub const X: u8 = 0x08;

    /// ALU operation: add.
    pub const ADD: u8 = 0x00;
    /// ALU operation: subtract.
    pub const SUB: u8 = 0x10;
    /// ALU operation: multiply.
    pub const MUL: u8 = 0x20;
    /// ALU operation: unsigned divide (by zero gives 0).
    pub const DIV: u8 = 0x30;
    /// ALU operation: or.
    pub const OR: u8 = 0x40;
    /// ALU operation: and.
    pub const AND: u8 = 0x50;
    /// ALU operation: shift left.
    pub const LSH: u8 = 0x60;
    /// ALU operation: logical shift right.
    pub const RSH: u8 = 0x70;
    /// ALU operation: negate.
    pub const NEG: u8 = 0x80;
    /// ALU operation: unsigned modulo (by zero leaves the destination unchanged).
    pub const MOD: u8 = 0x90;
    /// ALU operation: exclusive or.
    pub const XOR: u8 = 0xa0;
    /// ALU operation: move.
    pub const MOV: u8 = 0xb0;
    /// ALU operation: arithmetic shift right.
    pub const ARSH: u8 = 0xc0;
    /// ALU operation: byte order conversion (`imm` is the width: 16, 32 or 64).
    pub const END: u8 = 0xd0;
    /// Byte order conversion to little endian (source bit of `END`).
    pub const TO_LE: u8 = 0x00;
    /// Byte order conversion to big endian (source bit of `END`).
    pub const TO_BE: u8 = 0x08;

    /// Jump: always (`off`; in the `JMP32` class, `imm` is the offset: `gotol`).
    pub const JA: u8 = 0x00;
    /// Jump if equal.
    pub const JEQ: u8 = 0x10;
    /// Jump if greater (unsigned).
    pub const JGT: u8 = 0x20;
    /// Jump if greater or equal (unsigned).
    pub const JGE: u8 = 0x30;
    /// Jump if `dst & src` is not zero.
    pub const JSET: u8 = 0x40;
    /// Jump if not equal.
    pub const JNE: u8 = 0x50;
    /// Jump if greater (signed).
    pub const JSGT: u8 = 0x60;
    /// Jump if greater or equal (signed).
    pub const JSGE: u8 = 0x70;
    /// Call a helper (`imm` is its number) or, with `src` [`PSEUDO_CALL`], a subprogram.
    pub const CALL: u8 = 0x80;
    /// Return `r0`.
    pub const EXIT: u8 = 0x90;
    /// Jump if less (unsigned).
    pub const JLT: u8 = 0xa0;
    /// Jump if less or equal (unsigned).
    pub const JLE: u8 = 0xb0;
    /// Jump if less (signed).
    pub const JSLT: u8 = 0xc0;
    /// Jump if less or equal (signed).
    pub const JSLE: u8 = 0xd0;
    /// Conditional pseudo jump; with `src` 0 it is `may_goto` (Linux 6.9).
    pub const JCOND: u8 = 0xe0;

    /// `src` of `ld_imm64`: the immediate is a map file descriptor.
    pub const PSEUDO_MAP_FD: u8 = 1;
    /// `src` of `ld_imm64`: the immediate is a map file descriptor and the second slot an
    /// offset into its value.
    pub const PSEUDO_MAP_VALUE: u8 = 2;
    /// `src` of `call`: a call to a subprogram at a relative offset.
    pub const PSEUDO_CALL: u8 = 1;

    /// The class bits of an opcode.
    pub const fn class(code: u8) -> u8 {
        code & 0x07
    }
    /// The size bits of a load or store opcode.
    pub const fn size(code: u8) -> u8 {
        code & 0x18
    }
    /// The mode bits of a load or store opcode.
    pub const fn mode(code: u8) -> u8 {
        code & 0xe0
    }
    /// The operation bits of an ALU or jump opcode.
    pub const fn op(code: u8) -> u8 {
        code & 0xf0
    }
    /// The source bit of an ALU or jump opcode.
    pub const fn src(code: u8) -> u8 {
        code & 0x08
    }
}

/// Helper function numbers (`enum bpf_func_id`), for [`Insn::call`].
pub mod helper {
    /// `void *bpf_map_lookup_elem(map, key)`.
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    /// `long bpf_map_update_elem(map, key, value, flags)`.
    pub const MAP_UPDATE_ELEM: i32 = 2;
    /// `long bpf_map_delete_elem(map, key)`.
    pub const MAP_DELETE_ELEM: i32 = 3;
    /// `u64 bpf_ktime_get_ns(void)`.
    pub const KTIME_GET_NS: i32 = 5;
    /// `u32 bpf_get_prandom_u32(void)`.
    pub const GET_PRANDOM_U32: i32 = 7;
    /// `u32 bpf_get_smp_processor_id(void)`.
    pub const GET_SMP_PROCESSOR_ID: i32 = 8;
    /// `long bpf_skb_load_bytes(skb, offset, to, len)`.
    pub const SKB_LOAD_BYTES: i32 = 26;
    /// `long bpf_skb_pull_data(skb, len)`: makes `len` bytes linear (direct access).
    pub const SKB_PULL_DATA: i32 = 39;
    /// `long bpf_redirect_map(map, key, flags)`.
    pub const REDIRECT_MAP: i32 = 51;
    /// `u64 bpf_xdp_get_buff_len(xdp)`.
    pub const XDP_GET_BUFF_LEN: i32 = 188;
}

/// An eBPF register. `R0` holds return values, `R1`-`R5` arguments (clobbered by calls),
/// `R6`-`R9` survive calls, `R10` is the read-only frame pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum Reg {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    R10,
}

impl Reg {
    /// The register's number.
    pub const fn num(self) -> u8 {
        self as u8
    }
}

/// Width of a memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    /// 1 byte.
    B,
    /// 2 bytes.
    H,
    /// 4 bytes.
    W,
    /// 8 bytes.
    DW,
}

impl Size {
    /// The size bits of the opcode.
    pub const fn code(self) -> u8 {
        match self {
            Size::B => op::B,
            Size::H => op::H,
            Size::W => op::W,
            Size::DW => op::DW,
        }
    }

    /// Number of bytes.
    pub const fn bytes(self) -> u32 {
        match self {
            Size::B => 1,
            Size::H => 2,
            Size::W => 4,
            Size::DW => 8,
        }
    }
}

/// A binary arithmetic or logic operation (negation and byte swaps have their own
/// constructors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Alu {
    Add,
    Sub,
    Mul,
    Div,
    Or,
    And,
    Lsh,
    Rsh,
    Mod,
    Xor,
    Mov,
    Arsh,
}

impl Alu {
    /// The operation bits of the opcode.
    pub const fn code(self) -> u8 {
        match self {
            Alu::Add => op::ADD,
            Alu::Sub => op::SUB,
            Alu::Mul => op::MUL,
            Alu::Div => op::DIV,
            Alu::Or => op::OR,
            Alu::And => op::AND,
            Alu::Lsh => op::LSH,
            Alu::Rsh => op::RSH,
            Alu::Mod => op::MOD,
            Alu::Xor => op::XOR,
            Alu::Mov => op::MOV,
            Alu::Arsh => op::ARSH,
        }
    }
}

/// A jump condition. Unsigned unless the name says signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cond {
    /// `==`.
    Eq,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `dst & src != 0`.
    Set,
    /// `!=`.
    Ne,
    /// `>` (signed).
    Sgt,
    /// `>=` (signed).
    Sge,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `<` (signed).
    Slt,
    /// `<=` (signed).
    Sle,
}

impl Cond {
    /// The operation bits of the opcode.
    pub const fn code(self) -> u8 {
        match self {
            Cond::Eq => op::JEQ,
            Cond::Gt => op::JGT,
            Cond::Ge => op::JGE,
            Cond::Set => op::JSET,
            Cond::Ne => op::JNE,
            Cond::Sgt => op::JSGT,
            Cond::Sge => op::JSGE,
            Cond::Lt => op::JLT,
            Cond::Le => op::JLE,
            Cond::Slt => op::JSLT,
            Cond::Sle => op::JSLE,
        }
    }

    /// The opposite condition, when eBPF has one (`Set` has none).
    pub const fn negate(self) -> Option<Cond> {
        Some(match self {
            Cond::Eq => Cond::Ne,
            Cond::Ne => Cond::Eq,
            Cond::Gt => Cond::Le,
            Cond::Le => Cond::Gt,
            Cond::Ge => Cond::Lt,
            Cond::Lt => Cond::Ge,
            Cond::Sgt => Cond::Sle,
            Cond::Sle => Cond::Sgt,
            Cond::Sge => Cond::Slt,
            Cond::Slt => Cond::Sge,
            Cond::Set => return None,
        })
    }
}

/// One eBPF instruction slot, as `struct bpf_insn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Insn {
    /// The opcode (see [`op`]).
    pub code: u8,
    /// Destination register number (0-10).
    pub dst: u8,
    /// Source register number (0-10), or a pseudo value for `ld_imm64` and `call`.
    pub src: u8,
    /// Signed offset: memory displacement or jump distance (in slots, from the next one).
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

impl Insn {
    /// An instruction from its raw fields.
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    /// `dst op= imm` on 64 bits (`imm` sign-extended).
    pub const fn alu64_imm(alu: Alu, dst: Reg, imm: i32) -> Insn {
        Insn::new(op::ALU64 | alu.code() | op::K, dst.num(), 0, 0, imm)
    }

    /// `dst op= src` on 64 bits.
    pub const fn alu64_reg(alu: Alu, dst: Reg, src: Reg) -> Insn {
        Insn::new(op::ALU64 | alu.code() | op::X, dst.num(), src.num(), 0, 0)
    }

    /// `wdst op= imm` on the low 32 bits; the result is zero-extended.
    pub const fn alu32_imm(alu: Alu, dst: Reg, imm: i32) -> Insn {
        Insn::new(op::ALU | alu.code() | op::K, dst.num(), 0, 0, imm)
    }

    /// `wdst op= wsrc` on the low 32 bits; the result is zero-extended.
    pub const fn alu32_reg(alu: Alu, dst: Reg, src: Reg) -> Insn {
        Insn::new(op::ALU | alu.code() | op::X, dst.num(), src.num(), 0, 0)
    }

    /// `dst = imm` (sign-extended to 64 bits).
    pub const fn mov64_imm(dst: Reg, imm: i32) -> Insn {
        Insn::alu64_imm(Alu::Mov, dst, imm)
    }

    /// `dst = src`.
    pub const fn mov64_reg(dst: Reg, src: Reg) -> Insn {
        Insn::alu64_reg(Alu::Mov, dst, src)
    }

    /// `wdst = imm` (the 32 bits of `imm`, zero-extended).
    pub const fn mov32_imm(dst: Reg, imm: i32) -> Insn {
        Insn::alu32_imm(Alu::Mov, dst, imm)
    }

    /// `wdst = wsrc` (zero-extended).
    pub const fn mov32_reg(dst: Reg, src: Reg) -> Insn {
        Insn::alu32_reg(Alu::Mov, dst, src)
    }

    /// `dst = -dst` on 64 bits.
    pub const fn neg64(dst: Reg) -> Insn {
        Insn::new(op::ALU64 | op::NEG, dst.num(), 0, 0, 0)
    }

    /// `wdst = -wdst` on 32 bits.
    pub const fn neg32(dst: Reg) -> Insn {
        Insn::new(op::ALU | op::NEG, dst.num(), 0, 0, 0)
    }

    /// `dst = htobe{bits}(dst)`: the low `bits` (16, 32 or 64) bits in big-endian order, the
    /// rest cleared. A byte swap on little-endian machines, a truncation on big-endian ones.
    pub const fn to_be(dst: Reg, bits: i32) -> Insn {
        Insn::new(op::ALU | op::END | op::TO_BE, dst.num(), 0, 0, bits)
    }

    /// `dst = htole{bits}(dst)`, the counterpart of [`Insn::to_be`].
    pub const fn to_le(dst: Reg, bits: i32) -> Insn {
        Insn::new(op::ALU | op::END | op::TO_LE, dst.num(), 0, 0, bits)
    }

    /// `dst = *(size *)(base + off)`, zero-extended.
    pub const fn load(size: Size, dst: Reg, base: Reg, off: i16) -> Insn {
        Insn::new(
            op::LDX | op::MEM | size.code(),
            dst.num(),
            base.num(),
            off,
            0,
        )
    }

    /// `*(size *)(base + off) = src`.
    pub const fn store(size: Size, base: Reg, off: i16, src: Reg) -> Insn {
        Insn::new(
            op::STX | op::MEM | size.code(),
            base.num(),
            src.num(),
            off,
            0,
        )
    }

    /// `*(size *)(base + off) = imm`.
    pub const fn store_imm(size: Size, base: Reg, off: i16, imm: i32) -> Insn {
        Insn::new(op::ST | op::MEM | size.code(), base.num(), 0, off, imm)
    }

    /// Legacy packet load `r0 = ntoh(*(size *)skb[imm])` (socket filters and tc; needs the
    /// context in `r6`; clobbers `r1`-`r5`; ends the program with 0 when out of bounds).
    pub const fn ld_abs(size: Size, imm: i32) -> Insn {
        Insn::new(op::LD | op::ABS | size.code(), 0, 0, 0, imm)
    }

    /// Legacy packet load `r0 = ntoh(*(size *)skb[src + imm])`, as [`Insn::ld_abs`].
    pub const fn ld_ind(size: Size, src: Reg, imm: i32) -> Insn {
        Insn::new(op::LD | op::IND | size.code(), 0, src.num(), 0, imm)
    }

    /// `dst = imm` for a full 64-bit constant: two slots.
    pub const fn ld_imm64(dst: Reg, imm: u64) -> [Insn; 2] {
        [
            Insn::new(
                op::LD | op::DW | op::IMM,
                dst.num(),
                0,
                0,
                imm as u32 as i32,
            ),
            Insn::new(0, 0, 0, 0, (imm >> 32) as u32 as i32),
        ]
    }

    /// `dst = map` for the map behind file descriptor `fd` (the kernel replaces the descriptor
    /// by the map's address at load time): two slots.
    pub const fn ld_map_fd(dst: Reg, fd: i32) -> [Insn; 2] {
        [
            Insn::new(
                op::LD | op::DW | op::IMM,
                dst.num(),
                op::PSEUDO_MAP_FD,
                0,
                fd,
            ),
            Insn::new(0, 0, 0, 0, 0),
        ]
    }

    /// `if dst cond imm goto +off`, comparing 64 bits (`imm` sign-extended).
    pub const fn jmp_imm(cond: Cond, dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(op::JMP | cond.code() | op::K, dst.num(), 0, off, imm)
    }

    /// `if dst cond src goto +off`, comparing 64 bits.
    pub const fn jmp_reg(cond: Cond, dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(op::JMP | cond.code() | op::X, dst.num(), src.num(), off, 0)
    }

    /// `if wdst cond imm goto +off`, comparing the low 32 bits.
    pub const fn jmp32_imm(cond: Cond, dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(op::JMP32 | cond.code() | op::K, dst.num(), 0, off, imm)
    }

    /// `if wdst cond wsrc goto +off`, comparing the low 32 bits.
    pub const fn jmp32_reg(cond: Cond, dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(
            op::JMP32 | cond.code() | op::X,
            dst.num(),
            src.num(),
            off,
            0,
        )
    }

    /// `goto +off`.
    pub const fn ja(off: i16) -> Insn {
        Insn::new(op::JMP | op::JA, 0, 0, off, 0)
    }

    /// `gotol +off`: an unconditional jump with a 32-bit distance (Linux 6.4).
    pub const fn ja32(off: i32) -> Insn {
        Insn::new(op::JMP32 | op::JA, 0, 0, 0, off)
    }

    /// `may_goto +off` (Linux 6.9): falls through while the kernel's per-run loop budget lasts,
    /// then jumps. It lets the verifier accept loops it cannot bound.
    pub const fn may_goto(off: i16) -> Insn {
        Insn::new(op::JMP | op::JCOND, 0, 0, off, 0)
    }

    /// `call helper` (see [`helper`]).
    pub const fn call(helper: i32) -> Insn {
        Insn::new(op::JMP | op::CALL, 0, 0, 0, helper)
    }

    /// `exit`: return `r0`.
    pub const fn exit() -> Insn {
        Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)
    }

    /// The first slot of an `ld_imm64` (the next slot belongs to it).
    pub const fn is_ld_imm64(&self) -> bool {
        self.code == op::LD | op::DW | op::IMM
    }

    /// Whether this is a jump with a relative target in `off` (or in `imm` for `gotol`):
    /// conditional jumps, `goto`, `gotol` and `may_goto`, not `call` or `exit`.
    pub const fn is_jump(&self) -> bool {
        let class = op::class(self.code);
        (class == op::JMP || class == op::JMP32)
            && op::op(self.code) != op::CALL
            && op::op(self.code) != op::EXIT
    }

    /// The slot this jump at index `pc` goes to when taken (`None` for other instructions).
    pub const fn jump_target(&self, pc: usize) -> Option<i64> {
        if !self.is_jump() {
            return None;
        }
        let delta = if self.code == op::JMP32 | op::JA {
            self.imm as i64
        } else {
            self.off as i64
        };
        Some(pc as i64 + 1 + delta)
    }

    /// The 8 bytes of `struct bpf_insn` in this machine's byte order.
    pub const fn to_bytes(&self) -> [u8; 8] {
        let regs = if cfg!(target_endian = "little") {
            (self.dst & 0xf) | (self.src << 4)
        } else {
            (self.dst << 4) | (self.src & 0xf)
        };
        let off = self.off.to_ne_bytes();
        let imm = self.imm.to_ne_bytes();
        [
            self.code, regs, off[0], off[1], imm[0], imm[1], imm[2], imm[3],
        ]
    }

    /// The instruction in the 8 bytes of a `struct bpf_insn` (this machine's byte order).
    pub const fn from_bytes(b: [u8; 8]) -> Insn {
        let (dst, src) = if cfg!(target_endian = "little") {
            (b[1] & 0xf, b[1] >> 4)
        } else {
            (b[1] >> 4, b[1] & 0xf)
        };
        Insn {
            code: b[0],
            dst,
            src,
            off: i16::from_ne_bytes([b[2], b[3]]),
            imm: i32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
}

impl fmt::Display for Insn {
    /// The instruction in the kernel verifier's notation (see [`crate::disasm`]); the second
    /// slot of an `ld_imm64` on its own prints as its raw fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::disasm::write_insn(f, self, None)
    }
}

/// Encode instructions for the kernel: 8 bytes each, in order.
pub fn encode(insns: &[Insn]) -> Vec<u8> {
    insns.iter().flat_map(|i| i.to_bytes()).collect()
}

/// Decode a byte string of whole `struct bpf_insn`s; `None` if the length is not a multiple of
/// 8.
pub fn decode(bytes: &[u8]) -> Option<Vec<Insn>> {
    if bytes.len() % 8 != 0 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(8)
            .map(|c| Insn::from_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_match_the_kernel_macros() {
        // Values of BPF_MOV64_REG(BPF_REG_6, BPF_REG_1) etc. from include/linux/filter.h.
        assert_eq!(
            Insn::mov64_reg(Reg::R6, Reg::R1).to_bytes(),
            [0xbf, 0x16, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            Insn::load(Size::W, Reg::R2, Reg::R1, 16).to_bytes(),
            [0x61, 0x12, 16, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            Insn::jmp_imm(Cond::Eq, Reg::R0, 5, -3).to_bytes(),
            [0x15, 0x00, 0xfd, 0xff, 5, 0, 0, 0]
        );
        assert_eq!(
            Insn::jmp32_reg(Cond::Gt, Reg::R7, Reg::R8, 2).to_bytes(),
            [0x2e, 0x87, 2, 0, 0, 0, 0, 0]
        );
        assert_eq!(Insn::exit().to_bytes(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::call(51).to_bytes(), [0x85, 0, 0, 0, 51, 0, 0, 0]);
        assert_eq!(Insn::to_be(Reg::R7, 16).to_bytes()[..2], [0xdc, 0x07]);
        assert_eq!(Insn::ld_abs(Size::H, 12).to_bytes()[0], 0x28);
        assert_eq!(
            Insn::ld_ind(Size::B, Reg::R1, 14).to_bytes()[..2],
            [0x50, 0x10]
        );
        assert_eq!(Insn::store_imm(Size::W, Reg::R10, -4, 0).code, 0x62);
        assert_eq!(Insn::store(Size::W, Reg::R10, -4, Reg::R7).code, 0x63);
        assert_eq!(Insn::may_goto(3).code, 0xe5);
        let [lo, hi] = Insn::ld_imm64(Reg::R1, 0x1122_3344_5566_7788);
        assert_eq!(lo.to_bytes(), [0x18, 0x01, 0, 0, 0x88, 0x77, 0x66, 0x55]);
        assert_eq!(hi.to_bytes(), [0, 0, 0, 0, 0x44, 0x33, 0x22, 0x11]);
        let [m, _] = Insn::ld_map_fd(Reg::R1, 7);
        assert_eq!(m.to_bytes()[..2], [0x18, 0x11]);
    }

    #[test]
    fn bytes_round_trip() {
        let insns = [
            Insn::mov64_reg(Reg::R6, Reg::R1),
            Insn::jmp32_imm(Cond::Set, Reg::R7, -1, -32768),
            Insn::ja32(100_000),
            Insn::new(0xff, 15, 15, 32767, i32::MIN),
        ];
        let bytes = encode(&insns);
        assert_eq!(bytes.len(), 32);
        assert_eq!(decode(&bytes).unwrap(), insns);
        assert_eq!(decode(&bytes[..7]), None);
    }

    #[test]
    fn jump_targets() {
        assert_eq!(Insn::ja(2).jump_target(10), Some(13));
        assert_eq!(Insn::ja(-1).jump_target(10), Some(10));
        assert_eq!(Insn::ja32(-11).jump_target(10), Some(0));
        assert_eq!(
            Insn::jmp_reg(Cond::Le, Reg::R0, Reg::R5, 4).jump_target(0),
            Some(5)
        );
        assert_eq!(Insn::may_goto(1).jump_target(3), Some(5));
        assert_eq!(Insn::call(1).jump_target(0), None);
        assert_eq!(Insn::exit().jump_target(0), None);
        assert_eq!(Insn::mov64_imm(Reg::R0, 1).jump_target(0), None);
    }

    #[test]
    fn negated_conditions() {
        for c in [
            Cond::Eq,
            Cond::Gt,
            Cond::Ge,
            Cond::Ne,
            Cond::Sgt,
            Cond::Sge,
            Cond::Lt,
            Cond::Le,
            Cond::Slt,
            Cond::Sle,
        ] {
            assert_eq!(c.negate().and_then(Cond::negate), Some(c));
        }
        assert_eq!(Cond::Set.negate(), None);
    }
}
