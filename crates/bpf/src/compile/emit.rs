//! Instruction sequences for reading fields and computing arithmetic values, shared by the
//! unoptimised and the optimising code generators.

use netsift_lang::pred::{ArithOp, Base, Field, Loc, Val};

use super::CompileError;
use crate::insn::{Insn, code::*};

/// The size bits of a load of `size` bytes.
pub(crate) fn size_bits(size: u8) -> u16 {
    match size {
        1 => B,
        2 => H,
        _ => W,
    }
}

/// Statements that load `field` into A (and may set X).
pub(crate) fn load_field(field: &Field) -> Vec<Insn> {
    let mut v = Vec::new();
    push_load_field(field, &mut v);
    v
}

/// [`load_field`], appended to `out`.
pub(crate) fn push_load_field(field: &Field, out: &mut Vec<Insn>) {
    match *field {
        Field::WireLen => out.push(Insn::stmt(LD | W | LEN, 0)),
        Field::Ancillary { k, size } => {
            out.push(Insn::stmt(LD | size_bits(size) | ABS, SKF_AD_OFF + k))
        }
        Field::Packet { loc, size } => {
            let sz = size_bits(size);
            match loc {
                Loc::Abs(k) => out.push(Insn::stmt(LD | sz | ABS, k)),
                Loc::Ipv4Payload { nl, off } => out.extend(ipv4_payload_load(nl, off, sz)),
                Loc::Var { reg, off } => out.extend([
                    Insn::stmt(LDX | W | MEM, u32::from(reg)),
                    Insn::stmt(LD | sz | IND, off),
                ]),
                Loc::VarIpv4Payload { reg, nl, off } => {
                    out.extend(var_ipv4_hlen(reg, nl));
                    out.push(Insn::stmt(MISC | TAX, 0));
                    out.push(Insn::stmt(LD | sz | IND, nl.wrapping_add(off)));
                }
            }
        }
    }
}

/// Load after the IPv4 header at `nl`: `ldxb 4*([nl]&0xf); ld [x + nl+off]`. For offsets so
/// large that X + off could wrap around 2^32 the offset is added to X first, as libpcap's
/// unoptimised code computes it (`Loc::Ipv4Payload`'s meaning).
pub(crate) fn ipv4_payload_load(nl: u32, off: u32, sz: u16) -> Vec<Insn> {
    // (In u64: an unset network-layer offset, all ones, wraps in libpcap's arithmetic.)
    if u64::from(off) + u64::from(nl) + 64 <= u64::from(u32::MAX) {
        vec![
            Insn::stmt(LDX | B | MSH, nl),
            Insn::stmt(LD | sz | IND, nl + off),
        ]
    } else {
        vec![
            Insn::stmt(LDX | B | MSH, nl),
            Insn::stmt(LD | IMM, off),
            Insn::stmt(ALU | ADD | X, 0),
            Insn::stmt(MISC | TAX, 0),
            Insn::stmt(LD | sz | IND, nl),
        ]
    }
}

/// A = M[reg] + 4 * (P[M[reg]] & 0xf): the offset after an IPv4 header at a run-time offset.
pub(crate) fn var_ipv4_hlen(reg: u8, nl: u32) -> Vec<Insn> {
    vec![
        Insn::stmt(LDX | W | MEM, u32::from(reg)),
        Insn::stmt(LD | B | IND, nl),
        Insn::stmt(ALU | AND | K, 0xf),
        Insn::stmt(ALU | LSH | K, 2),
        Insn::stmt(ALU | ADD | X, 0),
    ]
}

fn alu_code(op: ArithOp) -> u16 {
    ALU | match op {
        ArithOp::Add => ADD,
        ArithOp::Sub => SUB,
        ArithOp::Mul => MUL,
        ArithOp::Div => DIV,
        ArithOp::Mod => MOD,
        ArithOp::And => AND,
        ArithOp::Or => OR,
        ArithOp::Xor => XOR,
        ArithOp::Shl => LSH,
        ArithOp::Shr => RSH,
    }
}

/// Compiles [`Val`]s into A, using scratch registers `temps` (handed out from 15 down) for
/// intermediate results. Evaluation order is libpcap's: a binary operator's left operand (with
/// all its reads) before its right operand; a load's index before the load.
pub(crate) struct ValCompiler {
    /// Lowest scratch register reserved by others (Geneve's offsets live below it).
    pub floor: u8,
    next: u8,
}

impl ValCompiler {
    pub fn new(floor: u8) -> ValCompiler {
        ValCompiler { floor, next: 16 }
    }

    fn temp(&mut self) -> Result<u32, CompileError> {
        if self.next <= self.floor {
            return Err(CompileError::too_many_registers());
        }
        self.next -= 1;
        Ok(u32::from(self.next))
    }

    fn release(&mut self) {
        self.next += 1;
    }

    /// Statements leaving `v` in A.
    pub fn val(&mut self, v: &Val, out: &mut Vec<Insn>) -> Result<(), CompileError> {
        match v {
            Val::Const(c) => out.push(Insn::stmt(LD | IMM, *c)),
            Val::Len => out.push(Insn::stmt(LD | W | LEN, 0)),
            Val::Neg(a) => {
                self.val(a, out)?;
                out.push(Insn::stmt(ALU | NEG, 0));
            }
            Val::Bin(op, a, b) => {
                self.val(a, out)?;
                if let Val::Const(k) = **b {
                    out.push(Insn::stmt(alu_code(*op) | K, k));
                } else {
                    let t = self.temp()?;
                    out.push(Insn::stmt(ST, t));
                    self.val(b, out)?;
                    out.push(Insn::stmt(MISC | TAX, 0));
                    out.push(Insn::stmt(LD | MEM, t));
                    out.push(Insn::stmt(alu_code(*op) | X, 0));
                    self.release();
                }
            }
            Val::Load { base, index, size } => {
                let sz = size_bits(*size);
                match (&**index, *base) {
                    // A constant index at a constant base that does not overflow: one load.
                    (&Val::Const(i), Base::Abs(k)) if k.checked_add(i).is_some() => {
                        out.push(Insn::stmt(LD | sz | ABS, k + i));
                    }
                    (&Val::Const(i), Base::Abs(k)) => {
                        out.push(Insn::stmt(LDX | W | IMM, i));
                        out.push(Insn::stmt(LD | sz | IND, k));
                    }
                    (_, Base::Abs(k)) => {
                        self.val(index, out)?;
                        out.push(Insn::stmt(MISC | TAX, 0));
                        out.push(Insn::stmt(LD | sz | IND, k));
                    }
                    (&Val::Const(i), Base::Ipv4Payload(nl)) => {
                        // X = 4*ihl + i (wrapping, as libpcap computes it), then [x + nl].
                        out.push(Insn::stmt(LDX | B | MSH, nl));
                        if i == 0 {
                            out.push(Insn::stmt(LD | sz | IND, nl));
                        } else {
                            out.push(Insn::stmt(LD | IMM, i));
                            out.push(Insn::stmt(ALU | ADD | X, 0));
                            out.push(Insn::stmt(MISC | TAX, 0));
                            out.push(Insn::stmt(LD | sz | IND, nl));
                        }
                    }
                    (_, Base::Ipv4Payload(nl)) => {
                        self.val(index, out)?;
                        out.push(Insn::stmt(LDX | B | MSH, nl));
                        out.push(Insn::stmt(ALU | ADD | X, 0));
                        out.push(Insn::stmt(MISC | TAX, 0));
                        out.push(Insn::stmt(LD | sz | IND, nl));
                    }
                    (_, Base::Var(reg, k)) => {
                        self.val(index, out)?;
                        out.push(Insn::stmt(LDX | W | MEM, u32::from(reg)));
                        out.push(Insn::stmt(ALU | ADD | X, 0));
                        out.push(Insn::stmt(MISC | TAX, 0));
                        out.push(Insn::stmt(LD | sz | IND, k));
                    }
                    (_, Base::VarIpv4Payload(reg, nl)) => {
                        self.val(index, out)?;
                        let t = self.temp()?;
                        out.push(Insn::stmt(ST, t));
                        out.extend(var_ipv4_hlen(reg, nl));
                        out.push(Insn::stmt(MISC | TAX, 0));
                        out.push(Insn::stmt(LD | MEM, t));
                        out.push(Insn::stmt(ALU | ADD | X, 0));
                        out.push(Insn::stmt(MISC | TAX, 0));
                        out.push(Insn::stmt(LD | sz | IND, nl));
                        self.release();
                    }
                }
            }
        }
        Ok(())
    }

    /// Statements for `lhs op rhs` up to the comparison, and the jump (`code`, `k`). With
    /// `exact`, A is left as libpcap leaves it (`lhs - rhs` for `=`, `lhs` otherwise); without,
    /// a constant right-hand side is compared directly.
    pub fn relation(
        &mut self,
        lhs: &Val,
        op: netsift_lang::pred::RelOp,
        rhs: &Val,
        exact: bool,
        out: &mut Vec<Insn>,
    ) -> Result<(u16, u32), CompileError> {
        use netsift_lang::pred::RelOp;
        self.val(lhs, out)?;
        if !exact && let Val::Const(k) = *rhs {
            return Ok(match op {
                RelOp::Eq => (JMP | JEQ | K, k),
                RelOp::Gt => (JMP | JGT | K, k),
                RelOp::Ge => (JMP | JGE | K, k),
            });
        }
        let t = self.temp()?;
        out.push(Insn::stmt(ST, t));
        self.val(rhs, out)?;
        out.push(Insn::stmt(MISC | TAX, 0));
        out.push(Insn::stmt(LD | MEM, t));
        self.release();
        Ok(match op {
            RelOp::Eq => {
                out.push(Insn::stmt(ALU | SUB | X, 0));
                (JMP | JEQ | K, 0)
            }
            RelOp::Gt => (JMP | JGT | X, 0),
            RelOp::Ge => (JMP | JGE | X, 0),
        })
    }
}
