//! A minimal x86-64 encoder: exactly the instruction forms the code generator uses.
//!
//! Every method appends one instruction to the buffer. Register numbers are the hardware ones
//! (`RAX` = 0 … `R15` = 15); a REX prefix is added when an operand needs it.
//!
//! The module is public so that other native back ends (`netsift-fpl`) reuse this encoder rather
//! than growing a second one; it is an implementation detail of netsift, not a stable API. Methods
//! do not validate their operands beyond what their docs state (e.g. `load_idx` needs a base that
//! is not `rbp`/`r13`).

/// Register `rax`.
pub const RAX: u8 = 0;
/// Register `rcx`.
pub const RCX: u8 = 1;
/// Register `rdx`.
pub const RDX: u8 = 2;
/// Register `rbx`.
pub const RBX: u8 = 3;
/// Register `rsp`.
pub const RSP: u8 = 4;
/// Register `rsi`.
pub const RSI: u8 = 6;
/// Register `rdi`.
pub const RDI: u8 = 7;
/// Register `r8`.
pub const R8: u8 = 8;
/// Register `r9`.
pub const R9: u8 = 9;
/// Register `r10`.
pub const R10: u8 = 10;
/// Register `r11`.
pub const R11: u8 = 11;
/// Register `r12`.
pub const R12: u8 = 12;
/// Register `r13`.
pub const R13: u8 = 13;
/// Register `r14`.
pub const R14: u8 = 14;
/// Register `r15`.
pub const R15: u8 = 15;

/// Condition codes (the low nibble of `Jcc`/`CMOVcc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cc {
    /// Unsigned below.
    B = 2,
    /// Unsigned above or equal.
    Ae = 3,
    /// Equal.
    E = 4,
    /// Not equal.
    Ne = 5,
    /// Unsigned below or equal.
    Be = 6,
    /// Unsigned above.
    A = 7,
}

impl Cc {
    /// The opposite condition.
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Cc {
        match self {
            Cc::B => Cc::Ae,
            Cc::Ae => Cc::B,
            Cc::E => Cc::Ne,
            Cc::Ne => Cc::E,
            Cc::Be => Cc::A,
            Cc::A => Cc::Be,
        }
    }
}

/// ALU operations with their `81 /ext` extension and `op r/m, r` opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alu {
    /// `add`.
    Add,
    /// `or`.
    Or,
    /// `and`.
    And,
    /// `sub`.
    Sub,
    /// `xor`.
    Xor,
    /// `cmp`.
    Cmp,
}

impl Alu {
    fn ext(self) -> u8 {
        match self {
            Alu::Add => 0,
            Alu::Or => 1,
            Alu::And => 4,
            Alu::Sub => 5,
            Alu::Xor => 6,
            Alu::Cmp => 7,
        }
    }

    fn rm_r(self) -> u8 {
        match self {
            Alu::Add => 0x01,
            Alu::Or => 0x09,
            Alu::And => 0x21,
            Alu::Sub => 0x29,
            Alu::Xor => 0x31,
            Alu::Cmp => 0x39,
        }
    }
}

/// The code buffer.
#[derive(Default)]
pub struct Asm {
    /// The machine code emitted so far.
    pub buf: Vec<u8>,
}

impl Asm {
    /// Bytes emitted so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing has been emitted.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    fn byte(&mut self, b: u8) {
        self.buf.push(b);
    }

    fn imm32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn rex(&mut self, w: bool, reg: u8, index: u8, base: u8) {
        let b = 0x40
            | (u8::from(w) << 3)
            | ((reg >> 3) & 1) << 2
            | ((index >> 3) & 1) << 1
            | ((base >> 3) & 1);
        if b != 0x40 {
            self.byte(b);
        }
    }

    fn modrm(&mut self, md: u8, reg: u8, rm: u8) {
        self.byte((md << 6) | ((reg & 7) << 3) | (rm & 7));
    }

    /// `op reg, rm` with both registers (ModRM mod 11).
    fn rr(&mut self, w: bool, op: &[u8], reg: u8, rm: u8) {
        self.rex(w, reg, 0, rm);
        self.buf.extend_from_slice(op);
        self.modrm(3, reg, rm);
    }

    /// `op reg, [base + disp]` (8-bit displacement when it fits).
    fn rm(&mut self, w: bool, op: &[u8], reg: u8, base: u8, disp: i32) {
        self.rex(w, reg, 0, base);
        self.buf.extend_from_slice(op);
        let short = (-128..128).contains(&disp);
        self.modrm(if short { 1 } else { 2 }, reg, base);
        if base & 7 == RSP {
            self.byte(0x24); // SIB: base only
        }
        if short {
            self.byte(disp as u8);
        } else {
            self.imm32(disp as u32);
        }
    }

    /// `op reg, [base + index]` (base is not rbp/r13).
    fn rmi(&mut self, w: bool, op: &[u8], reg: u8, base: u8, index: u8) {
        self.rex(w, reg, index, base);
        self.buf.extend_from_slice(op);
        self.modrm(0, reg, 4);
        self.byte(((index & 7) << 3) | (base & 7));
    }

    /// `mov r32, imm32`.
    pub fn mov_ri(&mut self, r: u8, v: u32) {
        if v == 0 {
            self.alu_rr(Alu::Xor, r, r);
            return;
        }
        self.rex(false, 0, 0, r);
        self.byte(0xb8 + (r & 7));
        self.imm32(v);
    }

    /// `mov dst32, src32`.
    pub fn mov_rr(&mut self, dst: u8, src: u8) {
        self.rr(false, &[0x89], src, dst);
    }

    /// `op dst32, src32`.
    pub fn alu_rr(&mut self, op: Alu, dst: u8, src: u8) {
        self.rr(false, &[op.rm_r()], src, dst);
    }

    /// `op r32, imm32`.
    pub fn alu_ri(&mut self, op: Alu, r: u8, v: u32) {
        if v as i32 >= -128 && (v as i32) < 128 {
            self.rex(false, 0, 0, r);
            self.byte(0x83);
            self.modrm(3, op.ext(), r);
            self.byte(v as u8);
            return;
        }
        self.rex(false, 0, 0, r);
        self.byte(0x81);
        self.modrm(3, op.ext(), r);
        self.imm32(v);
    }

    /// `op r64, imm32` (sign-extended; callers keep the value below 2^31).
    pub fn alu64_ri(&mut self, op: Alu, r: u8, v: u32) {
        debug_assert!(v < 1 << 31);
        self.rex(true, 0, 0, r);
        if v < 128 {
            self.byte(0x83);
            self.modrm(3, op.ext(), r);
            self.byte(v as u8);
        } else {
            self.byte(0x81);
            self.modrm(3, op.ext(), r);
            self.imm32(v);
        }
    }

    /// `op dst64, src64`.
    pub fn alu64_rr(&mut self, op: Alu, dst: u8, src: u8) {
        self.rr(true, &[op.rm_r()], src, dst);
    }

    /// `test r32, imm32`.
    pub fn test_ri(&mut self, r: u8, v: u32) {
        self.rex(false, 0, 0, r);
        self.byte(0xf7);
        self.modrm(3, 0, r);
        self.imm32(v);
    }

    /// `test a32, b32`.
    pub fn test_rr(&mut self, a: u8, b: u8) {
        self.rr(false, &[0x85], b, a);
    }

    /// `imul dst32, src32`.
    pub fn imul_rr(&mut self, dst: u8, src: u8) {
        self.rr(false, &[0x0f, 0xaf], dst, src);
    }

    /// `imul dst32, src32, imm32`.
    pub fn imul_rri(&mut self, dst: u8, src: u8, v: u32) {
        self.rex(false, dst, 0, src);
        self.byte(0x69);
        self.modrm(3, dst, src);
        self.imm32(v);
    }

    /// `shl r32, n` (`left`) or `shr r32, n`.
    pub fn shift_ri(&mut self, left: bool, r: u8, n: u8) {
        self.rex(false, 0, 0, r);
        self.byte(0xc1);
        self.modrm(3, if left { 4 } else { 5 }, r);
        self.byte(n);
    }

    /// `shl r32, cl` (`left`) or `shr r32, cl`.
    pub fn shift_rcl(&mut self, left: bool, r: u8) {
        self.rex(false, 0, 0, r);
        self.byte(0xd3);
        self.modrm(3, if left { 4 } else { 5 }, r);
    }

    /// `neg r32`.
    pub fn neg(&mut self, r: u8) {
        self.rex(false, 0, 0, r);
        self.byte(0xf7);
        self.modrm(3, 3, r);
    }

    /// `div r32` (edx:eax / r).
    pub fn div(&mut self, r: u8) {
        self.rex(false, 0, 0, r);
        self.byte(0xf7);
        self.modrm(3, 6, r);
    }

    /// `bswap r32`.
    pub fn bswap(&mut self, r: u8) {
        self.rex(false, 0, 0, r);
        self.byte(0x0f);
        self.byte(0xc8 + (r & 7));
    }

    /// `rol ax, 8`: swaps the two low bytes of eax.
    pub fn rol_ax_8(&mut self) {
        self.buf.extend_from_slice(&[0x66, 0xc1, 0xc0, 0x08]);
    }

    /// `cmovCC dst32, src32`.
    pub fn cmov(&mut self, cc: Cc, dst: u8, src: u8) {
        self.rr(false, &[0x0f, 0x40 + cc as u8], dst, src);
    }

    /// `mov r32, [base + disp]`, `movzx r32, word [..]` (size 2) or `movzx r32, byte [..]`.
    pub fn load(&mut self, size: u8, dst: u8, base: u8, disp: i32) {
        match size {
            4 => self.rm(false, &[0x8b], dst, base, disp),
            2 => self.rm(false, &[0x0f, 0xb7], dst, base, disp),
            _ => self.rm(false, &[0x0f, 0xb6], dst, base, disp),
        }
    }

    /// As [`Asm::load`] with `[base + index]`.
    pub fn load_idx(&mut self, size: u8, dst: u8, base: u8, index: u8) {
        match size {
            4 => self.rmi(false, &[0x8b], dst, base, index),
            2 => self.rmi(false, &[0x0f, 0xb7], dst, base, index),
            _ => self.rmi(false, &[0x0f, 0xb6], dst, base, index),
        }
    }

    /// `mov [base + disp], src32`.
    pub fn store(&mut self, base: u8, disp: i32, src: u8) {
        self.rm(false, &[0x89], src, base, disp);
    }

    /// `mov [base + disp], src64`.
    pub fn store64(&mut self, base: u8, disp: i32, src: u8) {
        self.rm(true, &[0x89], src, base, disp);
    }

    /// `lea dst64, [base + disp]`.
    pub fn lea(&mut self, dst: u8, base: u8, disp: i32) {
        self.rm(true, &[0x8d], dst, base, disp);
    }

    /// `mov r32, [base + index + disp]`, or `movzx` for sizes 2 and 1 (base not rbp/r13).
    pub fn load_idx_disp(&mut self, size: u8, dst: u8, base: u8, index: u8, disp: i32) {
        let op: &[u8] = match size {
            4 => &[0x8b],
            2 => &[0x0f, 0xb7],
            _ => &[0x0f, 0xb6],
        };
        self.rex(false, dst, index, base);
        self.buf.extend_from_slice(op);
        let short = (-128..128).contains(&disp);
        self.modrm(if short { 1 } else { 2 }, dst, 4);
        self.byte(((index & 7) << 3) | (base & 7));
        if short {
            self.byte(disp as u8);
        } else {
            self.imm32(disp as u32);
        }
    }

    /// `mov r64, [base + disp]`.
    pub fn load64(&mut self, dst: u8, base: u8, disp: i32) {
        self.rm(true, &[0x8b], dst, base, disp);
    }

    /// `mov dst64, src64`.
    pub fn mov64_rr(&mut self, dst: u8, src: u8) {
        self.rr(true, &[0x89], src, dst);
    }

    /// `test a64, b64`.
    pub fn test64_rr(&mut self, a: u8, b: u8) {
        self.rr(true, &[0x85], b, a);
    }

    /// `lea dst64, [rip + rel32]` with a zero displacement; returns the displacement's offset.
    pub fn lea_rip(&mut self, dst: u8) -> usize {
        self.rex(true, dst, 0, 0);
        self.byte(0x8d);
        self.modrm(0, dst, 5);
        let at = self.len();
        self.imm32(0);
        at
    }

    /// `cmp dword [base + disp], r32`.
    pub fn cmp_mr(&mut self, base: u8, disp: i32, r: u8) {
        self.rm(false, &[0x39], r, base, disp);
    }

    /// `cmovCC dst64, src64`.
    pub fn cmov64(&mut self, cc: Cc, dst: u8, src: u8) {
        self.rr(true, &[0x0f, 0x40 + cc as u8], dst, src);
    }

    /// `push r64`.
    pub fn push(&mut self, r: u8) {
        self.rex(false, 0, 0, r);
        self.byte(0x50 + (r & 7));
    }

    /// `pop r64`.
    pub fn pop(&mut self, r: u8) {
        self.rex(false, 0, 0, r);
        self.byte(0x58 + (r & 7));
    }

    /// `call rel32` with a zero displacement; returns the offset of the displacement.
    pub fn call(&mut self) -> usize {
        self.byte(0xe8);
        let at = self.len();
        self.imm32(0);
        at
    }

    /// `add r64, imm8` / `sub` (small constants).
    pub fn add64_i8(&mut self, r: u8, v: i8) {
        self.rex(true, 0, 0, r);
        self.byte(0x83);
        self.modrm(3, 0, r);
        self.byte(v as u8);
    }

    /// `jcc rel32` with a zero displacement; returns the offset of the displacement to patch.
    pub fn jcc(&mut self, cc: Cc) -> usize {
        self.byte(0x0f);
        self.byte(0x80 + cc as u8);
        let at = self.len();
        self.imm32(0);
        at
    }

    /// `jmp rel32` with a zero displacement; returns the offset of the displacement.
    pub fn jmp(&mut self) -> usize {
        self.byte(0xe9);
        let at = self.len();
        self.imm32(0);
        at
    }

    /// Points the rel32 at `at` to `target`.
    pub fn patch(&mut self, at: usize, target: usize) {
        let rel = target as i64 - (at as i64 + 4);
        self.buf[at..at + 4].copy_from_slice(&(rel as i32).to_le_bytes());
    }

    /// `mov r64, imm64` (`mov r32, imm32` when the value fits 32 bits unsigned).
    pub fn mov64_ri(&mut self, r: u8, v: u64) {
        if v <= u64::from(u32::MAX) {
            self.mov_ri(r, v as u32);
            return;
        }
        self.rex(true, 0, 0, r);
        self.byte(0xb8 + (r & 7));
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// `imul dst64, src64`.
    pub fn imul64_rr(&mut self, dst: u8, src: u8) {
        self.rr(true, &[0x0f, 0xaf], dst, src);
    }

    /// `div r64` (rdx:rax / r, unsigned).
    pub fn div64(&mut self, r: u8) {
        self.rex(true, 0, 0, r);
        self.byte(0xf7);
        self.modrm(3, 6, r);
    }

    /// `shl r64, cl` (`left`) or `shr r64, cl`.
    pub fn shift64_rcl(&mut self, left: bool, r: u8) {
        self.rex(true, 0, 0, r);
        self.byte(0xd3);
        self.modrm(3, if left { 4 } else { 5 }, r);
    }

    /// `shl r64, n` (`left`) or `shr r64, n`.
    pub fn shift64_ri(&mut self, left: bool, r: u8, n: u8) {
        self.rex(true, 0, 0, r);
        self.byte(0xc1);
        self.modrm(3, if left { 4 } else { 5 }, r);
        self.byte(n);
    }

    /// `neg r64`.
    pub fn neg64(&mut self, r: u8) {
        self.rex(true, 0, 0, r);
        self.byte(0xf7);
        self.modrm(3, 3, r);
    }

    /// `not r64`.
    pub fn not64(&mut self, r: u8) {
        self.rex(true, 0, 0, r);
        self.byte(0xf7);
        self.modrm(3, 2, r);
    }

    /// `call r64` (an absolute target in a register).
    pub fn call_r(&mut self, r: u8) {
        self.rex(false, 0, 0, r);
        self.byte(0xff);
        self.modrm(3, 2, r);
    }

    /// `ret`.
    pub fn ret(&mut self) {
        self.byte(0xc3);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: impl FnOnce(&mut Asm)) -> Vec<u8> {
        let mut a = Asm::default();
        f(&mut a);
        a.buf
    }

    // Expected bytes checked against GNU as / objdump -d (where as picks a shorter form, the
    // comment says which).
    #[test]
    fn encodings_match_the_assembler() {
        assert_eq!(
            enc(|a| a.mov_ri(RAX, 0x1234_5678)),
            [0xb8, 0x78, 0x56, 0x34, 0x12]
        );
        assert_eq!(enc(|a| a.mov_ri(R9, 5)), [0x41, 0xb9, 5, 0, 0, 0]);
        assert_eq!(enc(|a| a.mov_rr(R8, RDX)), [0x41, 0x89, 0xd0]); // mov r8d, edx
        assert_eq!(enc(|a| a.mov_rr(RAX, R9)), [0x44, 0x89, 0xc8]); // mov eax, r9d
        assert_eq!(enc(|a| a.alu_rr(Alu::Xor, RAX, RAX)), [0x31, 0xc0]);
        assert_eq!(
            enc(|a| a.alu_ri(Alu::Cmp, RAX, 0x800)),
            [0x81, 0xf8, 0, 8, 0, 0]
        ); // as: 3d (short eax form)
        assert_eq!(enc(|a| a.alu_ri(Alu::Cmp, RAX, 6)), [0x83, 0xf8, 6]);
        assert_eq!(
            enc(|a| a.alu64_ri(Alu::Cmp, RSI, 14)),
            [0x48, 0x83, 0xfe, 14]
        );
        assert_eq!(
            enc(|a| a.alu64_ri(Alu::Cmp, RSI, 1514)),
            [0x48, 0x81, 0xfe, 0xea, 5, 0, 0]
        );
        assert_eq!(
            enc(|a| a.alu64_ri(Alu::Add, R10, 16)),
            [0x49, 0x83, 0xc2, 16]
        );
        assert_eq!(enc(|a| a.alu64_rr(Alu::Cmp, RCX, RSI)), [0x48, 0x39, 0xf1]); // cmp rcx, rsi
        assert_eq!(enc(|a| a.load(4, RAX, RDI, 26)), [0x8b, 0x47, 26]);
        assert_eq!(
            enc(|a| a.load(4, RAX, RDI, 300)),
            [0x8b, 0x87, 0x2c, 1, 0, 0]
        );
        assert_eq!(enc(|a| a.load(2, RAX, RDI, 12)), [0x0f, 0xb7, 0x47, 12]);
        assert_eq!(
            enc(|a| a.load(1, R9, RDI, 14)),
            [0x44, 0x0f, 0xb6, 0x4f, 14]
        );
        assert_eq!(
            enc(|a| a.load_idx(2, RAX, RDI, R10)),
            [0x42, 0x0f, 0xb7, 0x04, 0x17]
        ); // movzx eax, word [rdi+r10]
        assert_eq!(enc(|a| a.load(4, RAX, RSP, -64)), [0x8b, 0x44, 0x24, 0xc0]);
        assert_eq!(
            enc(|a| a.store(RSP, -60, R9)),
            [0x44, 0x89, 0x4c, 0x24, 0xc4]
        );
        assert_eq!(enc(|a| a.bswap(RAX)), [0x0f, 0xc8]);
        assert_eq!(enc(|a| a.lea(RCX, R10, 2)), [0x49, 0x8d, 0x4a, 2]);
        assert_eq!(enc(|a| a.shift_ri(true, R9, 2)), [0x41, 0xc1, 0xe1, 2]);
        assert_eq!(enc(|a| a.shift_rcl(false, RAX)), [0xd3, 0xe8]);
        assert_eq!(enc(|a| a.div(R9)), [0x41, 0xf7, 0xf1]);
        assert_eq!(enc(|a| a.imul_rri(RAX, RAX, 3)), [0x69, 0xc0, 3, 0, 0, 0]); // as: 6b (imm8)
        assert_eq!(enc(|a| a.imul_rr(RAX, R9)), [0x41, 0x0f, 0xaf, 0xc1]);
        assert_eq!(enc(|a| a.cmov(Cc::A, RAX, RDX)), [0x0f, 0x47, 0xc2]);
        assert_eq!(
            enc(|a| a.test_ri(RAX, 0x1fff)),
            [0xf7, 0xc0, 0xff, 0x1f, 0, 0]
        ); // as: a9
        assert_eq!(enc(|a| a.test_rr(RAX, R9)), [0x44, 0x85, 0xc8]);
        assert_eq!(enc(|a| a.neg(RAX)), [0xf7, 0xd8]);
        assert_eq!(
            enc(|a| a.store64(RSP, -64, RCX)),
            [0x48, 0x89, 0x4c, 0x24, 0xc0]
        );
        assert_eq!(
            enc(|a| a.load_idx_disp(2, RAX, RDI, R9, 14)),
            [0x42, 0x0f, 0xb7, 0x44, 0x0f, 0x0e]
        ); // movzx eax, word [rdi+r9+14]
        assert_eq!(enc(|a| a.lea(RCX, R9, 16)), [0x49, 0x8d, 0x49, 0x10]);
        assert_eq!(
            enc(|a| a.load64(RDI, R12, 8)),
            [0x49, 0x8b, 0x7c, 0x24, 0x08]
        ); // mov rdi, [r12+8]
        assert_eq!(enc(|a| a.push(R12)), [0x41, 0x54]);
        assert_eq!(
            enc(|a| {
                a.lea_rip(RDX);
            }),
            [0x48, 0x8d, 0x15, 0, 0, 0, 0]
        ); // lea rdx, [rip+0]
        assert_eq!(enc(|a| a.cmp_mr(RDX, 8, RAX)), [0x39, 0x42, 0x08]); // cmp [rdx+8], eax
        assert_eq!(enc(|a| a.cmov64(Cc::B, RDX, R10)), [0x49, 0x0f, 0x42, 0xd2]); // cmovb rdx, r10
        assert_eq!(enc(|a| a.pop(RBX)), [0x5b]);
        assert_eq!(enc(|a| a.add64_i8(R12, 24)), [0x49, 0x83, 0xc4, 0x18]);
    }
}
