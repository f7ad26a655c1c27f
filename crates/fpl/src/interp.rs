//! The reference interpreter: walks the [`crate::ir`] tree.
//!
//! It defines the semantics the native code must match exactly (the differential tests hold it
//! to that): unsigned 64-bit wrapping arithmetic; `x / 0 = x % 0 = 0`; shifts by 64 or more give
//! 0; comparisons and logical operators give 0 or 1; `&&` and `||` short-circuit; a packet load
//! that is not wholly inside the captured bytes yields 0 (the filter goes on); falling off the
//! end of the program returns 0.

use crate::NREGS;
use crate::ast::{BinOp, UnOp, Width};
use crate::externs::{ExternCall, ExternSite};
use crate::ir::{Expr, Index, Place, Stmt};

/// A binary operation on values.
#[inline]
pub fn binop(op: BinOp, a: u64, b: u64) -> u64 {
    match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::Div => a.checked_div(b).unwrap_or(0),
        BinOp::Rem => a.checked_rem(b).unwrap_or(0),
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
        BinOp::Shl => {
            if b >= 64 {
                0
            } else {
                a << b
            }
        }
        BinOp::Shr => {
            if b >= 64 {
                0
            } else {
                a >> b
            }
        }
        BinOp::LAnd => u64::from(a != 0 && b != 0),
        BinOp::LOr => u64::from(a != 0 || b != 0),
        _ => u64::from(cmp(op, a, b)),
    }
}

/// A comparison (false for non-comparison operators).
#[inline]
pub fn cmp(op: BinOp, a: u64, b: u64) -> bool {
    match op {
        BinOp::Eq => a == b,
        BinOp::Ne => a != b,
        BinOp::Lt => a < b,
        BinOp::Le => a <= b,
        BinOp::Gt => a > b,
        BinOp::Ge => a >= b,
        _ => false,
    }
}

/// A unary operation.
#[inline]
pub fn unop(op: UnOp, a: u64) -> u64 {
    match op {
        UnOp::Neg => a.wrapping_neg(),
        UnOp::Not => u64::from(a == 0),
        UnOp::BitNot => !a,
    }
}

/// A big-endian load of `width` at `off`; 0 unless wholly inside `pkt`.
#[inline]
pub fn load(pkt: &[u8], width: Width, signed: bool, off: u64) -> u64 {
    let n = usize::from(width.bytes());
    let Some(b) = usize::try_from(off)
        .ok()
        .and_then(|o| pkt.get(o..o.checked_add(n)?))
    else {
        return 0;
    };
    let mut v = 0u64;
    for x in b {
        v = v << 8 | u64::from(*x);
    }
    if signed && n < 8 {
        let sb = 1u64 << (n * 8 - 1);
        v = (v ^ sb).wrapping_sub(sb);
    }
    v
}

/// Field `index` of `params`' width (0 = most significant) in a container value: 0 when the
/// index is past the last field; sign-extended for signed fields.
pub extern "sysv64" fn subfield(base: u64, index: u64, params: u64) -> u64 {
    let (w, k, signed) = crate::ir::unpack_sub(params);
    if k == 0 || k >= 64 || index >= u64::from(w / k) {
        return 0;
    }
    let shift = u64::from(w) - u64::from(k) * (index + 1);
    let v = (base >> shift) & ((1u64 << k) - 1);
    if signed {
        let sb = 1u64 << (k - 1);
        (v ^ sb).wrapping_sub(sb)
    } else {
        v
    }
}

/// `HASH(start, len, size)`: FNV-1a (64-bit) over packet bytes `start .. start + len`, reduced
/// modulo `size` (a mask when `size` is a power of two). The result is 0 when `size` is 0 or
/// the range is not wholly inside the captured bytes.
///
/// # Safety
///
/// `pkt` must point to `caplen` readable bytes (any pointer when `caplen` is 0).
pub unsafe extern "sysv64" fn hash_raw(
    pkt: *const u8,
    caplen: u64,
    start: u64,
    len: u64,
    size: u64,
) -> u64 {
    let data: &[u8] = if caplen == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(pkt, caplen as usize) }
    };
    hash(data, start, len, size)
}

/// Safe form of [`hash_raw`].
pub fn hash(pkt: &[u8], start: u64, len: u64, size: u64) -> u64 {
    if size == 0 {
        return 0;
    }
    let Some(b) = usize::try_from(start).ok().and_then(|s| {
        let l = usize::try_from(len).ok()?;
        pkt.get(s..s.checked_add(l)?)
    }) else {
        return 0;
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in b {
        h ^= u64::from(*x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    if size.is_power_of_two() {
        h & (size - 1)
    } else {
        h % size
    }
}

enum Flow {
    Next,
    Break,
    Return(u64),
}

pub(crate) struct Vm<'a> {
    pub pkt: &'a [u8],
    pub wire_len: u32,
    pub mem: &'a mut [u64],
    pub regs: &'a mut [u64; NREGS],
    pub externs: &'a [ExternSite],
}

impl Vm<'_> {
    pub fn run(&mut self, body: &[Stmt]) -> u64 {
        match self.stmts(body) {
            Flow::Return(v) => v,
            _ => 0,
        }
    }

    fn stmts(&mut self, body: &[Stmt]) -> Flow {
        for s in body {
            match self.stmt(s) {
                Flow::Next => {}
                f => return f,
            }
        }
        Flow::Next
    }

    fn index(&mut self, i: &Index) -> usize {
        match i {
            Index::Const(v) => *v as usize,
            Index::Masked(e, m) => (self.expr(e) & m) as usize,
        }
    }

    fn stmt(&mut self, s: &Stmt) -> Flow {
        match s {
            Stmt::Assign { place, op, value } => {
                let (is_reg, i) = match place {
                    Place::Reg(i) => (true, self.index(i)),
                    Place::Mem(i) => (false, self.index(i)),
                };
                let old = match op {
                    Some(_) if is_reg => self.regs[i],
                    Some(_) => self.mem[i],
                    None => 0,
                };
                let v = self.expr(value);
                let v = match op {
                    Some(op) => binop(*op, old, v),
                    None => v,
                };
                if is_reg {
                    self.regs[i] = v;
                } else {
                    self.mem[i] = v;
                }
                Flow::Next
            }
            Stmt::If(c, t, e) => {
                if self.expr(c) != 0 {
                    self.stmts(t)
                } else {
                    self.stmts(e)
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
                while self.expr(test) != 0 {
                    match self.stmts(body) {
                        Flow::Next => {}
                        Flow::Break => break,
                        r => return r,
                    }
                    self.stmt(update);
                }
                Flow::Next
            }
            Stmt::Break => Flow::Break,
            Stmt::Return(e) => Flow::Return(self.expr(e)),
            Stmt::Eval(e) => {
                self.expr(e);
                Flow::Next
            }
        }
    }

    fn expr(&mut self, e: &Expr) -> u64 {
        match e {
            Expr::Const(v) => *v,
            Expr::Reg(i) => {
                let i = self.index(i);
                self.regs[i]
            }
            Expr::Mem(i) => {
                let i = self.index(i);
                self.mem[i]
            }
            Expr::Pkt { width, signed, off } => {
                let o = self.expr(off);
                load(self.pkt, *width, *signed, o)
            }
            Expr::Sub {
                base,
                index,
                params,
            } => {
                let b = self.expr(base);
                let i = self.expr(index);
                subfield(b, i, *params)
            }
            Expr::WireLen => u64::from(self.wire_len),
            Expr::CapLen => self.pkt.len() as u64,
            Expr::Un(op, a) => {
                let a = self.expr(a);
                unop(*op, a)
            }
            Expr::Bin(BinOp::LAnd, a, b) => u64::from(self.expr(a) != 0 && self.expr(b) != 0),
            Expr::Bin(BinOp::LOr, a, b) => u64::from(self.expr(a) != 0 || self.expr(b) != 0),
            Expr::Bin(op, a, b) => {
                let a = self.expr(a);
                let b = self.expr(b);
                binop(*op, a, b)
            }
            Expr::Hash(x) => {
                let s = self.expr(&x[0]);
                let l = self.expr(&x[1]);
                let z = self.expr(&x[2]);
                hash(self.pkt, s, l, z)
            }
            Expr::Extern { idx } => {
                let site = &self.externs[*idx as usize];
                let mut call = ExternCall::new(self.pkt, self.wire_len, self.mem, site);
                (site.func)(&mut call)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_are_big_endian_and_zero_out_of_bounds() {
        let p = [0x12, 0x34, 0x56, 0x78, 0x9a];
        assert_eq!(load(&p, Width::W, false, 0), 0x1234);
        assert_eq!(load(&p, Width::DW, false, 1), 0x3456_789a);
        assert_eq!(load(&p, Width::DW, false, 2), 0);
        assert_eq!(load(&p, Width::B, true, 4), 0xffff_ffff_ffff_ff9a);
        assert_eq!(load(&p, Width::B, false, u64::MAX), 0);
    }

    #[test]
    fn subfields_number_from_the_most_significant() {
        let p = crate::ir::sub_params(8, 1, false);
        assert_eq!(subfield(0x80, 0, p), 1);
        assert_eq!(subfield(0x80, 7, p), 0);
        assert_eq!(subfield(0x01, 7, p), 1);
        assert_eq!(subfield(0x01, 8, p), 0);
        let p = crate::ir::sub_params(16, 8, true);
        assert_eq!(subfield(0x80ff, 0, p), 0xffff_ffff_ffff_ff80);
    }

    #[test]
    fn hash_is_zero_outside_the_packet() {
        assert_eq!(hash(&[1, 2, 3], 1, 3, 256), 0);
        assert_eq!(hash(&[1, 2, 3], 0, 3, 0), 0);
        assert!(hash(&[1, 2, 3], 0, 3, 256) < 256);
        assert!(hash(&[1, 2, 3], 0, 3, 100) < 100);
    }
}
