//! IR → x86-64, with `netsift-jit`'s encoder ([`netsift_jit::asm`]) and executable memory
//! ([`netsift_jit::exec`]).
//!
//! A straightforward tree compiler: every expression leaves its value in `rax`; the left operand
//! of a binary operator waits on the machine stack while the right one is computed. Constant
//! right operands, constant packet offsets, constant MBuf/register indexes and comparisons in
//! conditions get short forms.
//!
//! # Register use (System V)
//!
//! | register | holds |
//! |---|---|
//! | `rbx` | the [`Ctx`] (argument 1) |
//! | `r12` | the packet's first byte |
//! | `r13` | the captured length |
//! | `r14` | the MBuf |
//! | `r15` | the registers |
//! | `rax` | the current value; `rcx`, `rdx`, `r8` scratch |
//!
//! The five callee-saved registers are pushed on entry, which leaves `rsp` 16-byte aligned; the
//! generator counts its own pushes and pads calls (to `HASH`, sub-field and extern helpers) so
//! that every call is made with an aligned stack. Nothing is live in caller-saved registers
//! across a call.
//!
//! PERF: values never stay in registers across statements; FPL programs are short and the
//! loads/stores hit L1.

use std::sync::Arc;

use netsift_jit::asm::*;
use netsift_jit::exec::ExecMem;

use crate::ast::{BinOp, UnOp, Width};
use crate::error::{Error, ErrorKind};
use crate::externs::ExternCall;
use crate::interp;
use crate::ir::{Expr, Index, Place, Stmt};
use crate::{Inner, Regs};

/// What the generated code is given (its only argument).
#[repr(C)]
struct Ctx {
    pkt: *const u8,
    caplen: u64,
    wire_len: u64,
    mem: *mut u64,
    regs: *mut u64,
    prog: *const Inner,
    mem_len: u64,
}

type Entry = unsafe extern "sysv64" fn(*mut Ctx) -> u64;

/// Called by generated code for `EXTERN`.
///
/// # Safety
///
/// `ctx` is the live context of the current run and `idx` an extern index of its program.
unsafe extern "sysv64" fn call_extern(ctx: *mut Ctx, idx: u64) -> u64 {
    // SAFETY: the caller's contract; the generated code holds no references into the packet or
    // the MBuf while this runs, so these slices are the only ones.
    let (pkt, mem, prog, wire_len) = unsafe {
        let c = &*ctx;
        let pkt: &[u8] = if c.caplen == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(c.pkt, c.caplen as usize)
        };
        let mem = std::slice::from_raw_parts_mut(c.mem, c.mem_len as usize);
        (pkt, mem, &*c.prog, c.wire_len as u32)
    };
    let Some(site) = prog.externs.get(idx as usize) else {
        return 0;
    };
    let mut call = ExternCall::new(pkt, wire_len, mem, site);
    (site.func)(&mut call)
}

pub(crate) struct Code {
    mem: ExecMem,
    entry: Entry,
    prog: Arc<Inner>,
}

impl Code {
    pub fn new(prog: Arc<Inner>) -> Result<Code, Error> {
        let mut g = Gen {
            a: Asm::default(),
            depth: 0,
            rets: Vec::new(),
            breaks: Vec::new(),
        };
        g.prologue();
        g.stmts(&prog.body);
        g.a.mov_ri(RAX, 0);
        let end = g.a.len();
        for at in std::mem::take(&mut g.rets) {
            g.a.patch(at, end);
        }
        for r in [R15, R14, R13, R12, RBX] {
            g.a.pop(r);
        }
        g.a.ret();
        if g.a.len() > 64 << 20 {
            return Err(Error::new(
                ErrorKind::Native,
                None,
                "generated code exceeds 64 MiB",
            ));
        }
        let mem = ExecMem::new(&g.a.buf)
            .map_err(|e| Error::new(ErrorKind::Native, None, e.to_string()))?;
        // SAFETY: the mapping holds a function for the System V ABI with this signature at
        // offset 0; it stays mapped while `self` lives.
        let entry = unsafe { std::mem::transmute::<*const u8, Entry>(mem.ptr()) };
        Ok(Code { mem, entry, prog })
    }

    pub fn bytes(&self) -> &[u8] {
        self.mem.bytes()
    }

    #[inline]
    pub fn run(&self, pkt: &[u8], wire_len: u32, mem: &mut [u64], regs: &mut Regs) -> u64 {
        let words = self.prog.mbuf_words;
        if mem.len() < words {
            return 0;
        }
        let mut ctx = Ctx {
            pkt: pkt.as_ptr(),
            caplen: pkt.len() as u64,
            wire_len: u64::from(wire_len),
            mem: mem.as_mut_ptr(),
            regs: regs.as_mut_ptr(),
            prog: Arc::as_ptr(&self.prog),
            mem_len: words as u64,
        };
        // SAFETY: the code reads packet bytes only below `caplen` (every load is checked),
        // reads and writes MBuf words only below `words` (indexes are constants the checker
        // proved or are masked with `words - 1`) and registers below NREGS (same), and calls
        // only the helpers of this module with this context. `mem` has at least `words` words.
        unsafe { (self.entry)(&mut ctx) }
    }
}

fn cc(op: BinOp) -> Option<Cc> {
    Some(match op {
        BinOp::Eq => Cc::E,
        BinOp::Ne => Cc::Ne,
        BinOp::Lt => Cc::B,
        BinOp::Le => Cc::Be,
        BinOp::Gt => Cc::A,
        BinOp::Ge => Cc::Ae,
        _ => return None,
    })
}

fn imm(e: &Expr) -> Option<u32> {
    match e {
        Expr::Const(v) if *v < 1 << 31 => Some(*v as u32),
        _ => None,
    }
}

struct Gen {
    a: Asm,
    /// Pushes since the prologue (odd: the stack is misaligned for calls).
    depth: usize,
    rets: Vec<usize>,
    breaks: Vec<Vec<usize>>,
}

impl Gen {
    fn prologue(&mut self) {
        for r in [RBX, R12, R13, R14, R15] {
            self.a.push(r);
        }
        self.a.mov64_rr(RBX, RDI);
        self.a.load64(R12, RBX, 0);
        self.a.load64(R13, RBX, 8);
        self.a.load64(R14, RBX, 24);
        self.a.load64(R15, RBX, 32);
    }

    fn push(&mut self, r: u8) {
        self.a.push(r);
        self.depth += 1;
    }

    fn pop(&mut self, r: u8) {
        self.a.pop(r);
        self.depth -= 1;
    }

    fn call(&mut self, f: usize) {
        let pad = self.depth % 2 == 1;
        if pad {
            self.a.add64_i8(RSP, -8);
        }
        self.a.mov64_ri(RAX, f as u64);
        self.a.call_r(RAX);
        if pad {
            self.a.add64_i8(RSP, 8);
        }
    }

    fn here(&mut self, patches: Vec<usize>) {
        let t = self.a.len();
        for p in patches {
            self.a.patch(p, t);
        }
    }

    fn stmts(&mut self, s: &[Stmt]) {
        for s in s {
            self.stmt(s);
        }
    }

    /// Leaves the slot's address in `rax` (for a masked index).
    fn slot_addr(&mut self, e: &Expr, mask: u64, base: u8) {
        self.expr(e);
        self.a.alu64_ri(Alu::And, RAX, mask as u32);
        self.a.shift64_ri(true, RAX, 3);
        self.a.alu64_rr(Alu::Add, RAX, base);
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Assign { place, op, value } => {
                let (base, idx) = match place {
                    Place::Reg(i) => (R15, i),
                    Place::Mem(i) => (R14, i),
                };
                match idx {
                    Index::Const(i) => {
                        let disp = (*i * 8) as i32;
                        match op {
                            None => self.expr(value),
                            Some(op) => {
                                self.a.load64(RAX, base, disp);
                                self.apply(*op, value);
                            }
                        }
                        self.a.store64(base, disp, RAX);
                    }
                    Index::Masked(e, mask) => {
                        self.slot_addr(e, *mask, base);
                        self.push(RAX);
                        match op {
                            None => self.expr(value),
                            Some(op) => {
                                self.a.load64(RAX, RAX, 0);
                                self.apply(*op, value);
                            }
                        }
                        self.pop(RCX);
                        self.a.store64(RCX, 0, RAX);
                    }
                }
            }
            Stmt::If(c, t, e) => {
                let f = self.branch_false(c);
                self.stmts(t);
                if e.is_empty() {
                    self.here(f);
                } else {
                    let j = self.a.jmp();
                    self.here(f);
                    self.stmts(e);
                    self.here(vec![j]);
                }
            }
            Stmt::For {
                init,
                test,
                update,
                body,
                ..
            } => {
                self.stmt(init);
                let top = self.a.len();
                let mut out = self.branch_false(test);
                self.breaks.push(Vec::new());
                self.stmts(body);
                self.stmt(update);
                let j = self.a.jmp();
                self.a.patch(j, top);
                out.extend(self.breaks.pop().unwrap_or_default());
                self.here(out);
            }
            Stmt::Break => {
                let j = self.a.jmp();
                if let Some(b) = self.breaks.last_mut() {
                    b.push(j);
                }
            }
            Stmt::Return(e) => {
                self.expr(e);
                let j = self.a.jmp();
                self.rets.push(j);
            }
            Stmt::Eval(e) => self.expr(e),
        }
    }

    /// `rax = rax op value` (the left operand already in `rax`).
    fn apply(&mut self, op: BinOp, value: &Expr) {
        if let (Some(k), Some(alu)) = (imm(value), alu_of(op)) {
            self.a.alu64_ri(alu, RAX, k);
            return;
        }
        if let (Expr::Const(k), BinOp::Shl | BinOp::Shr) = (value, op) {
            if *k >= 64 {
                self.a.mov_ri(RAX, 0);
            } else {
                self.a.shift64_ri(op == BinOp::Shl, RAX, *k as u8);
            }
            return;
        }
        self.push(RAX);
        self.expr(value);
        self.a.mov64_rr(RCX, RAX);
        self.pop(RAX);
        self.binop(op);
    }

    /// `rax = rax op rcx` (not `&&`/`||`).
    fn binop(&mut self, op: BinOp) {
        if let Some(alu) = alu_of(op) {
            self.a.alu64_rr(alu, RAX, RCX);
            return;
        }
        match op {
            BinOp::Mul => self.a.imul64_rr(RAX, RCX),
            BinOp::Div | BinOp::Rem => {
                self.a.test64_rr(RCX, RCX);
                let z = self.a.jcc(Cc::E);
                self.a.alu_rr(Alu::Xor, RDX, RDX);
                self.a.div64(RCX);
                if op == BinOp::Rem {
                    self.a.mov64_rr(RAX, RDX);
                }
                let e = self.a.jmp();
                self.here(vec![z]);
                self.a.mov_ri(RAX, 0);
                self.here(vec![e]);
            }
            BinOp::Shl | BinOp::Shr => {
                self.a.alu64_ri(Alu::Cmp, RCX, 63);
                let z = self.a.jcc(Cc::A);
                self.a.shift64_rcl(op == BinOp::Shl, RAX);
                let e = self.a.jmp();
                self.here(vec![z]);
                self.a.mov_ri(RAX, 0);
                self.here(vec![e]);
            }
            BinOp::LAnd | BinOp::LOr => {
                // Not reached: short-circuit operators are compiled by `expr`; evaluate them
                // here too so that the generator stays total.
                self.a.mov64_rr(RDX, RAX);
                self.a.alu_rr(Alu::Xor, RAX, RAX);
                self.a.mov_ri(R8, 1);
                self.a.test64_rr(RDX, RDX);
                self.a.cmov64(Cc::Ne, RAX, R8);
                self.a.alu_rr(Alu::Xor, RDX, RDX);
                self.a.test64_rr(RCX, RCX);
                self.a.cmov64(Cc::Ne, RDX, R8);
                let alu = if op == BinOp::LAnd { Alu::And } else { Alu::Or };
                self.a.alu64_rr(alu, RAX, RDX);
            }
            _ => {
                if let Some(c) = cc(op) {
                    self.compare(c);
                }
            }
        }
    }

    /// `rax = (rax <c> rcx) as u64`.
    fn compare(&mut self, c: Cc) {
        self.a.mov_ri(RDX, 1);
        self.a.alu_rr(Alu::Xor, R8, R8);
        self.a.alu64_rr(Alu::Cmp, RAX, RCX);
        self.a.mov64_rr(RAX, R8);
        self.a.cmov64(c, RAX, RDX);
    }

    /// Jumps (to the returned patch sites) when `cond` is zero.
    fn branch_false(&mut self, cond: &Expr) -> Vec<usize> {
        match cond {
            Expr::Bin(BinOp::LAnd, a, b) => {
                let mut f = self.branch_false(a);
                f.extend(self.branch_false(b));
                f
            }
            Expr::Bin(op, a, b) if cc(*op).is_some() => {
                let c = cc(*op).unwrap_or(Cc::E);
                self.expr(a);
                if let Some(k) = imm(b) {
                    self.a.alu64_ri(Alu::Cmp, RAX, k);
                } else {
                    self.push(RAX);
                    self.expr(b);
                    self.a.mov64_rr(RCX, RAX);
                    self.pop(RAX);
                    self.a.alu64_rr(Alu::Cmp, RAX, RCX);
                }
                vec![self.a.jcc(c.not())]
            }
            Expr::Un(UnOp::Not, x) => {
                self.expr(x);
                self.a.test64_rr(RAX, RAX);
                vec![self.a.jcc(Cc::Ne)]
            }
            _ => {
                self.expr(cond);
                self.a.test64_rr(RAX, RAX);
                vec![self.a.jcc(Cc::E)]
            }
        }
    }

    fn load_slot(&mut self, i: &Index, base: u8) {
        match i {
            Index::Const(i) => self.a.load64(RAX, base, (*i * 8) as i32),
            Index::Masked(e, mask) => {
                self.slot_addr(e, *mask, base);
                self.a.load64(RAX, RAX, 0);
            }
        }
    }

    fn expr(&mut self, e: &Expr) {
        match e {
            Expr::Const(v) => self.a.mov64_ri(RAX, *v),
            Expr::Reg(i) => self.load_slot(i, R15),
            Expr::Mem(i) => self.load_slot(i, R14),
            Expr::WireLen => self.a.load64(RAX, RBX, 16),
            Expr::CapLen => self.a.mov64_rr(RAX, R13),
            Expr::Pkt { width, signed, off } => {
                self.pkt(*width, off);
                let n = u32::from(width.bytes());
                if *signed && n < 8 {
                    self.a.mov64_ri(RCX, 1u64 << (n * 8 - 1));
                    self.a.alu64_rr(Alu::Xor, RAX, RCX);
                    self.a.alu64_rr(Alu::Sub, RAX, RCX);
                }
            }
            Expr::Sub {
                base,
                index,
                params,
            } => {
                self.expr(base);
                self.push(RAX);
                self.expr(index);
                self.a.mov64_rr(RSI, RAX);
                self.pop(RDI);
                self.a.mov64_ri(RDX, *params);
                self.call(interp::subfield as *const () as usize);
            }
            Expr::Un(op, x) => {
                self.expr(x);
                match op {
                    UnOp::Neg => self.a.neg64(RAX),
                    UnOp::BitNot => self.a.not64(RAX),
                    UnOp::Not => {
                        self.a.mov64_rr(RCX, RAX);
                        self.a.mov_ri(RAX, 0);
                        self.a.alu64_rr(Alu::Xor, RDX, RDX);
                        self.a.mov64_ri(RDX, 1);
                        self.a.test64_rr(RCX, RCX);
                        self.a.cmov64(Cc::E, RAX, RDX);
                    }
                }
            }
            Expr::Bin(op @ (BinOp::LAnd | BinOp::LOr), a, b) => {
                // rax = a != 0 (&&: jump to 0 when false; ||: jump to 1 when true).
                self.expr(a);
                self.a.test64_rr(RAX, RAX);
                let short = self.a.jcc(if *op == BinOp::LAnd { Cc::E } else { Cc::Ne });
                self.expr(b);
                self.a.test64_rr(RAX, RAX);
                let short2 = self.a.jcc(if *op == BinOp::LAnd { Cc::E } else { Cc::Ne });
                self.a.mov_ri(RAX, u32::from(*op == BinOp::LOr) ^ 1);
                let e = self.a.jmp();
                self.here(vec![short, short2]);
                self.a.mov_ri(RAX, u32::from(*op == BinOp::LOr));
                self.here(vec![e]);
            }
            Expr::Bin(op, a, b) => {
                self.expr(a);
                if let (Some(c), Some(k)) = (cc(*op), imm(b)) {
                    self.a.mov_ri(RDX, 1);
                    self.a.alu_rr(Alu::Xor, R8, R8);
                    self.a.alu64_ri(Alu::Cmp, RAX, k);
                    self.a.mov64_rr(RAX, R8);
                    self.a.cmov64(c, RAX, RDX);
                    return;
                }
                self.apply(*op, b);
            }
            Expr::Hash(x) if self.inline_hash(x) => {}
            Expr::Hash(x) => {
                self.expr(&x[0]);
                self.push(RAX);
                self.expr(&x[1]);
                self.push(RAX);
                self.expr(&x[2]);
                self.a.mov64_rr(R8, RAX);
                self.pop(RCX);
                self.pop(RDX);
                self.a.mov64_rr(RDI, R12);
                self.a.mov64_rr(RSI, R13);
                self.call(interp::hash_raw as *const () as usize);
            }
            Expr::Extern { idx } => {
                self.a.mov64_rr(RDI, RBX);
                self.a.mov64_ri(RSI, u64::from(*idx));
                self.call(call_extern as *const () as usize);
            }
        }
    }

    /// `HASH` with a constant range of at most 64 bytes and a constant power-of-two size,
    /// unrolled inline (FNV-1a, as [`interp::hash`]); false when the operands do not allow it.
    fn inline_hash(&mut self, x: &[Expr; 3]) -> bool {
        let (Expr::Const(start), Expr::Const(len), Expr::Const(size)) = (&x[0], &x[1], &x[2])
        else {
            return false;
        };
        if *start >= 1 << 30 || *len > 64 || !size.is_power_of_two() || *size > 1 << 30 {
            return false;
        }
        let (start, len) = (*start as i32, *len as i32);
        self.a.alu64_ri(Alu::Cmp, R13, (start + len) as u32);
        let oob = self.a.jcc(Cc::B);
        self.a.mov64_ri(RAX, 0xcbf2_9ce4_8422_2325);
        self.a.mov64_ri(RDX, 0x0100_0000_01b3);
        for i in 0..len {
            self.a.load(1, RCX, R12, start + i);
            self.a.alu64_rr(Alu::Xor, RAX, RCX);
            self.a.imul64_rr(RAX, RDX);
        }
        self.a.alu64_ri(Alu::And, RAX, (*size - 1) as u32);
        let done = self.a.jmp();
        self.here(vec![oob]);
        self.a.mov_ri(RAX, 0);
        self.here(vec![done]);
        true
    }

    /// A checked big-endian load at `off` into `rax` (0 when out of bounds).
    fn pkt(&mut self, width: Width, off: &Expr) {
        let n = width.bytes();
        let mut oob = Vec::new();
        match off {
            Expr::Const(o) if *o < (1 << 30) => {
                let o = *o as i32;
                self.a.alu64_ri(Alu::Cmp, R13, o as u32 + u32::from(n));
                oob.push(self.a.jcc(Cc::B));
                match width {
                    Width::QW => {
                        self.a.load(4, RCX, R12, o);
                        self.a.bswap(RCX);
                        self.a.load(4, RAX, R12, o + 4);
                        self.a.bswap(RAX);
                        self.a.shift64_ri(true, RCX, 32);
                        self.a.alu64_rr(Alu::Or, RAX, RCX);
                    }
                    _ => {
                        self.a.load(n, RAX, R12, o);
                        self.swap(width);
                    }
                }
            }
            _ => {
                self.expr(off);
                self.a.mov64_rr(RCX, R13);
                self.a.alu64_ri(Alu::Sub, RCX, u32::from(n));
                oob.push(self.a.jcc(Cc::B));
                self.a.alu64_rr(Alu::Cmp, RAX, RCX);
                oob.push(self.a.jcc(Cc::A));
                match width {
                    Width::QW => {
                        self.a.load_idx_disp(4, RCX, R12, RAX, 0);
                        self.a.bswap(RCX);
                        self.a.load_idx_disp(4, RAX, R12, RAX, 4);
                        self.a.bswap(RAX);
                        self.a.shift64_ri(true, RCX, 32);
                        self.a.alu64_rr(Alu::Or, RAX, RCX);
                    }
                    _ => {
                        self.a.load_idx(n, RAX, R12, RAX);
                        self.swap(width);
                    }
                }
            }
        }
        let done = self.a.jmp();
        self.here(oob);
        self.a.mov_ri(RAX, 0);
        self.here(vec![done]);
    }

    fn swap(&mut self, width: Width) {
        match width {
            Width::W => self.a.rol_ax_8(),
            Width::DW => self.a.bswap(RAX),
            _ => {}
        }
    }
}

fn alu_of(op: BinOp) -> Option<Alu> {
    Some(match op {
        BinOp::Add => Alu::Add,
        BinOp::Sub => Alu::Sub,
        BinOp::And => Alu::And,
        BinOp::Or => Alu::Or,
        BinOp::Xor => Alu::Xor,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use crate::{NREGS, Program, Registry};

    /// Programs exercising each short form, on every truncation of a packet.
    #[test]
    fn short_forms_match_the_interpreter() {
        let progs = [
            "RETURN (HASH(30, 12, 256))",
            "RETURN (HASH(0, 0, 1) + HASH(2, 64, 1024))",
            "RETURN (HASH(R[0], 12, 256) + HASH(1, 2, 0) + HASH(1, 2, 7))",
            "RETURN (PKT.QW[3] ^ PKT.DW[1] ^ PKT.W[7] ^ PKT.B[9] ^ PKT.SB[4] ^ PKT.SW[0] ^ PKT.SDW[5])",
            "R[0] = 5; RETURN (PKT.QW[R[0]] + PKT.SW[R[0] + 1] + PKT.B[R[0] - 6])",
            "MEM[3] += 7; MEM[R[1]] <<= 3; MEM[R[1] + 9] -= PKT.B[0]; R[R[2]] = 4; RETURN (MEM[3] / R[4] % 3)",
            "IF (PKT.B[0] >= 3 && PKT.B[1] != 0 || !PKT.B[2]) THEN RETURN (1 << PKT.B[3]) ELSE RETURN (7 >> 70) FI",
            "RETURN (PKT.W[2].U8[R[0]] + PKT.B[1].U1[R[1] + 3] + PKT.DW[0].S16[1])",
        ];
        let pkt: Vec<u8> = (0..80u8).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
        for src in progs {
            let p = Program::compile(src, &Registry::standard(), 16).unwrap();
            let n = p.native().unwrap();
            for cut in 0..=pkt.len() {
                let (mut mi, mut mn) = ([1u64; 16], [1u64; 16]);
                let (mut ri, mut rn) = ([1u64; NREGS], [1u64; NREGS]);
                let a = p.run_interp(&pkt[..cut], 80, &mut mi, &mut ri);
                let b = n.run(&pkt[..cut], 80, &mut mn, &mut rn);
                assert_eq!((a, mi, ri), (b, mn, rn), "{src} on {cut} bytes");
            }
        }
    }

    /// The deepest trees the parser accepts run in both engines on a test thread's stack.
    #[test]
    fn deepest_programs_run() {
        let chain = format!("RETURN (R[0]{})", " * R[1] + PKT.B[R[2]]".repeat(99));
        let nested = format!(
            "RETURN ({}R[0]{})",
            "(R[1] - MEM[R[2] + ".repeat(19),
            "])".repeat(19)
        );
        for src in [chain, nested] {
            let p = Program::compile(&src, &Registry::standard(), 16).unwrap();
            let n = p.native().unwrap();
            let (mut m, mut r) = ([3u64; 16], [2u64; NREGS]);
            let a = p.run_interp(&[1, 2, 3], 3, &mut m, &mut r);
            assert_eq!(a, n.run(&[1, 2, 3], 3, &mut m, &mut r));
        }
    }

    #[test]
    fn short_mbuf_slices_are_not_run() {
        let p = Program::compile("MEM[7] = 1; RETURN (1)", &Registry::standard(), 8).unwrap();
        let mut m = [0u64; 4];
        let mut r = [0u64; NREGS];
        assert_eq!(p.native().unwrap().run(&[], 0, &mut m, &mut r), 0);
        assert_eq!(p.run_interp(&[], 0, &mut m, &mut r), 0);
    }
}
