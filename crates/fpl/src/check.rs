//! The checker: resolves names and macros, proves resource bounds and lowers [`crate::ast`] to
//! [`crate::ir`].
//!
//! What it proves (and how):
//! - **Bounded execution.** The only backward control flow is `FOR`. A loop is accepted when
//!   its init is `R[i] = <constant>`, its update is `R[i]++`, `R[i]--`, `R[i] += <constant>` or
//!   `R[i] -= <constant>` (constant non-zero), its test is (or is a `&&` chain containing) a
//!   comparison of `R[i]` with a constant that the step moves towards, without wrapping, and no
//!   statement in the body assigns `R[i]` (or any register through a computed index). The trip
//!   count follows; it is stored in the IR and used for the cost bound.
//! - **MBuf and register indexes in range.** Constant indexes must be inside the MBuf (`MEM`)
//!   or the register file (`R`); others are masked at run time with `size - 1`, the sizes being
//!   powers of two (as in the FFPF paper).
//! - **Externs.** Only registered functions; their input/output offsets must be constants and
//!   the registered parameter sizes must fit the MBuf from there.
//! - **Cost.** Every IR node costs one operation; loops multiply by their bound; `IF` takes the
//!   dearer branch. Programs above [`crate::MAX_COST`] are rejected. Extern calls and `HASH`
//!   count one operation each (their own work depends on the packet length and is listed
//!   separately in the [`crate::Report`]).

use crate::ast::{self, BinOp, ExprKind, UnOp, Width};
use crate::error::{Error, ErrorKind, Span};
use crate::externs::{ExternSite, Registry};
use crate::interp;
use crate::ir::{self, Expr, Index, Place, Stmt};
use crate::{MAX_COST, NREGS, Report};

/// Named constants usable in expressions.
pub const CONSTANTS: &[(&str, u64)] = &[
    ("TRUE", 1),
    ("FALSE", 0),
    ("PROTO_ICMP", 1),
    ("PROTO_TCP", 6),
    ("PROTO_UDP", 17),
    ("PROTO_ICMP6", 58),
    ("ETH_IP", 0x0800),
    ("ETH_ARP", 0x0806),
    ("ETH_IP6", 0x86dd),
    ("TCP_FIN", 0x01),
    ("TCP_SYN", 0x02),
    ("TCP_RST", 0x04),
    ("TCP_PSH", 0x08),
    ("TCP_ACK", 0x10),
    ("TCP_URG", 0x20),
];

/// Header-field macros (`PKT.<name>`), with their meaning; see `docs/fpl.md`.
pub const MACROS: &[(&str, &str)] = &[
    ("LEN", "length of the packet on the wire"),
    ("CAPLEN", "captured length"),
    ("ETH_TYPE", "PKT.W[12]: EtherType (untagged Ethernet)"),
    ("IP_VER", "PKT.B[14] >> 4"),
    (
        "IP_HLEN",
        "(PKT.B[14] & 15) * 4: IPv4 header length in bytes",
    ),
    ("IP_TOS", "PKT.B[15]"),
    ("IP_LEN", "PKT.W[16]: IPv4 total length"),
    ("IP_ID", "PKT.W[18]"),
    (
        "IP_FRAG",
        "PKT.W[20] & 0x1fff: fragment offset (8-byte units)",
    ),
    ("IP_TTL", "PKT.B[22]"),
    ("IP_PROTO", "PKT.B[23]"),
    ("IP_CSUM", "PKT.W[24]"),
    ("IP_SRC", "PKT.DW[26]"),
    ("IP_DEST", "PKT.DW[30]"),
    ("IP_DST", "PKT.DW[30] (alias of IP_DEST)"),
    (
        "L4",
        "14 + IP_HLEN: offset of the IPv4 payload (TCP/UDP/ICMP header)",
    ),
    ("TCP_SPORT", "PKT.W[L4]"),
    ("TCP_DPORT", "PKT.W[L4 + 2]"),
    ("TCP_SEQ", "PKT.DW[L4 + 4]"),
    ("TCP_ACKNO", "PKT.DW[L4 + 8]"),
    (
        "TCP_HLEN",
        "(PKT.B[L4 + 12] >> 4) * 4: TCP header length in bytes",
    ),
    ("TCP_FLAGS", "PKT.B[L4 + 13]"),
    ("TCP_WIN", "PKT.W[L4 + 14]"),
    ("TCP_PAYLOAD", "L4 + TCP_HLEN: offset of the TCP payload"),
    ("UDP_SPORT", "PKT.W[L4]"),
    ("UDP_DPORT", "PKT.W[L4 + 2]"),
    ("UDP_LEN", "PKT.W[L4 + 4]"),
    ("UDP_CSUM", "PKT.W[L4 + 6]"),
    ("UDP_PAYLOAD", "L4 + 8: offset of the UDP payload"),
    ("ICMP_TYPE", "PKT.B[L4]"),
    ("ICMP_CODE", "PKT.B[L4 + 1]"),
    ("IP6_PLEN", "PKT.W[18]: IPv6 payload length"),
    ("IP6_NEXT", "PKT.B[20]: IPv6 next header"),
    ("IP6_HLIM", "PKT.B[21]"),
    ("IP6_SRC_HI", "PKT.QW[22]: first 8 bytes of the IPv6 source"),
    ("IP6_SRC_LO", "PKT.QW[30]"),
    ("IP6_DST_HI", "PKT.QW[38]"),
    ("IP6_DST_LO", "PKT.QW[46]"),
    ("TCP6_SPORT", "PKT.W[54] (IPv6 without extension headers)"),
    ("TCP6_DPORT", "PKT.W[56]"),
    ("TCP6_FLAGS", "PKT.B[67]"),
    ("TCP6_PAYLOAD", "54 + (PKT.B[66] >> 4) * 4"),
    ("UDP6_SPORT", "PKT.W[54]"),
    ("UDP6_DPORT", "PKT.W[56]"),
    ("UDP6_PAYLOAD", "62"),
    ("ICMP6_TYPE", "PKT.B[54]"),
    ("ICMP6_CODE", "PKT.B[55]"),
];

/// Whether `PKT.<name>` is a macro.
pub fn is_macro(name: &str) -> bool {
    MACROS.iter().any(|(n, _)| *n == name)
}

fn c(v: u64) -> Expr {
    Expr::Const(v)
}

fn load(width: Width, off: Expr) -> Expr {
    Expr::Pkt {
        width,
        signed: false,
        off: Box::new(off),
    }
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    match (&a, &b) {
        (Expr::Const(x), Expr::Const(y)) => Expr::Const(interp::binop(op, *x, *y)),
        _ => Expr::Bin(op, Box::new(a), Box::new(b)),
    }
}

fn l4() -> Expr {
    bin(
        BinOp::Add,
        c(14),
        bin(
            BinOp::Shl,
            bin(BinOp::And, load(Width::B, c(14)), c(15)),
            c(2),
        ),
    )
}

fn at_l4(width: Width, k: u64) -> Expr {
    load(width, bin(BinOp::Add, l4(), c(k)))
}

fn expand(name: &str) -> Option<Expr> {
    use Width::*;
    let hlen = |off: Expr| bin(BinOp::Shl, bin(BinOp::Shr, load(B, off), c(4)), c(2));
    Some(match name {
        "LEN" => Expr::WireLen,
        "CAPLEN" => Expr::CapLen,
        "ETH_TYPE" => load(W, c(12)),
        "IP_VER" => bin(BinOp::Shr, load(B, c(14)), c(4)),
        "IP_HLEN" => bin(BinOp::Shl, bin(BinOp::And, load(B, c(14)), c(15)), c(2)),
        "IP_TOS" => load(B, c(15)),
        "IP_LEN" => load(W, c(16)),
        "IP_ID" => load(W, c(18)),
        "IP_FRAG" => bin(BinOp::And, load(W, c(20)), c(0x1fff)),
        "IP_TTL" => load(B, c(22)),
        "IP_PROTO" => load(B, c(23)),
        "IP_CSUM" => load(W, c(24)),
        "IP_SRC" => load(DW, c(26)),
        "IP_DEST" | "IP_DST" => load(DW, c(30)),
        "L4" => l4(),
        "TCP_SPORT" | "UDP_SPORT" => at_l4(W, 0),
        "TCP_DPORT" | "UDP_DPORT" => at_l4(W, 2),
        "TCP_SEQ" => at_l4(DW, 4),
        "TCP_ACKNO" => at_l4(DW, 8),
        "TCP_HLEN" => hlen(bin(BinOp::Add, l4(), c(12))),
        "TCP_FLAGS" => at_l4(B, 13),
        "TCP_WIN" => at_l4(W, 14),
        "TCP_PAYLOAD" => bin(BinOp::Add, l4(), hlen(bin(BinOp::Add, l4(), c(12)))),
        "UDP_LEN" => at_l4(W, 4),
        "UDP_CSUM" => at_l4(W, 6),
        "UDP_PAYLOAD" => bin(BinOp::Add, l4(), c(8)),
        "ICMP_TYPE" => at_l4(B, 0),
        "ICMP_CODE" => at_l4(B, 1),
        "IP6_PLEN" => load(W, c(18)),
        "IP6_NEXT" => load(B, c(20)),
        "IP6_HLIM" => load(B, c(21)),
        "IP6_SRC_HI" => load(QW, c(22)),
        "IP6_SRC_LO" => load(QW, c(30)),
        "IP6_DST_HI" => load(QW, c(38)),
        "IP6_DST_LO" => load(QW, c(46)),
        "TCP6_SPORT" | "UDP6_SPORT" => load(W, c(54)),
        "TCP6_DPORT" | "UDP6_DPORT" => load(W, c(56)),
        "TCP6_FLAGS" => load(B, c(67)),
        "TCP6_PAYLOAD" => bin(BinOp::Add, c(54), hlen(c(66))),
        "UDP6_PAYLOAD" => c(62),
        "ICMP6_TYPE" => load(B, c(54)),
        "ICMP6_CODE" => load(B, c(55)),
        _ => return None,
    })
}

pub(crate) struct Checked {
    pub body: Vec<Stmt>,
    pub externs: Vec<ExternSite>,
    pub report: Report,
}

struct Checker<'r> {
    reg: &'r Registry,
    mbuf_words: u64,
    externs: Vec<ExternSite>,
    loops: Vec<(u32, u64)>,
    hashes: usize,
    in_loop: u32,
}

fn err(kind: ErrorKind, span: Span, msg: impl Into<String>) -> Error {
    Error::new(kind, Some(span), msg)
}

/// Checks and lowers a parsed program.
pub(crate) fn check(
    prog: &[ast::Stmt],
    reg: &Registry,
    mbuf_words: usize,
) -> Result<Checked, Error> {
    if !mbuf_words.is_power_of_two() || mbuf_words > crate::MAX_MBUF_WORDS {
        return Err(Error::new(
            ErrorKind::Invalid,
            None,
            format!(
                "MBuf size {mbuf_words} is not a power of two between 1 and {} words",
                crate::MAX_MBUF_WORDS
            ),
        ));
    }
    let mut ck = Checker {
        reg,
        mbuf_words: mbuf_words as u64,
        externs: Vec::new(),
        loops: Vec::new(),
        hashes: 0,
        in_loop: 0,
    };
    let body = ck.stmts(prog)?;
    let max_ops = cost_stmts(&body);
    if max_ops > MAX_COST {
        return Err(Error::new(
            ErrorKind::TooCostly,
            None,
            format!(
                "the program may execute {max_ops} operations per packet; the limit is {MAX_COST}"
            ),
        ));
    }
    let mut names: Vec<String> = ck.externs.iter().map(|e| e.name.clone()).collect();
    names.sort();
    names.dedup();
    let report = Report {
        max_ops,
        loops: ck.loops,
        extern_calls: ck.externs.len(),
        externs: names,
        hash_calls: ck.hashes,
        mbuf_words,
    };
    Ok(Checked {
        body,
        externs: ck.externs,
        report,
    })
}

fn sat_add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

pub(crate) fn cost_expr(e: &Expr) -> u64 {
    let idx = |i: &Index| match i {
        Index::Const(_) => 0,
        Index::Masked(e, _) => cost_expr(e),
    };
    1 + match e {
        Expr::Const(_) | Expr::WireLen | Expr::CapLen | Expr::Extern { .. } => 0,
        Expr::Reg(i) | Expr::Mem(i) => idx(i),
        Expr::Pkt { off, .. } => cost_expr(off),
        Expr::Sub { base, index, .. } => sat_add(cost_expr(base), cost_expr(index)),
        Expr::Un(_, a) => cost_expr(a),
        Expr::Bin(_, a, b) => sat_add(cost_expr(a), cost_expr(b)),
        Expr::Hash(a) => a.iter().map(cost_expr).fold(0, sat_add),
    }
}

fn cost_stmt(s: &Stmt) -> u64 {
    match s {
        Stmt::Assign { place, value, .. } => {
            let i = match place {
                Place::Reg(Index::Masked(e, _)) | Place::Mem(Index::Masked(e, _)) => cost_expr(e),
                _ => 0,
            };
            1 + i + cost_expr(value)
        }
        Stmt::If(c, t, e) => 1 + sat_add(cost_expr(c), cost_stmts(t).max(cost_stmts(e))),
        Stmt::For {
            init,
            test,
            update,
            body,
            bound,
        } => {
            let per = sat_add(
                sat_add(cost_stmts(body), cost_stmt(update)),
                cost_expr(test) + 1,
            );
            sat_add(
                sat_add(cost_stmt(init), cost_expr(test)),
                per.saturating_mul(*bound),
            )
        }
        Stmt::Break => 1,
        Stmt::Return(e) | Stmt::Eval(e) => 1 + cost_expr(e),
    }
}

fn cost_stmts(s: &[Stmt]) -> u64 {
    s.iter().map(cost_stmt).fold(0, sat_add)
}

/// Whether any statement may assign register `r`.
fn assigns_reg(body: &[Stmt], r: u64) -> bool {
    body.iter().any(|s| match s {
        Stmt::Assign { place, .. } => match place {
            Place::Reg(Index::Const(i)) => *i == r,
            Place::Reg(Index::Masked(..)) => true,
            Place::Mem(_) => false,
        },
        Stmt::If(_, t, e) => assigns_reg(t, r) || assigns_reg(e, r),
        Stmt::For {
            init, update, body, ..
        } => {
            assigns_reg(std::slice::from_ref(init), r)
                || assigns_reg(std::slice::from_ref(update), r)
                || assigns_reg(body, r)
        }
        _ => false,
    })
}

fn conjuncts<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::Bin(BinOp::LAnd, a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        _ => out.push(e),
    }
}

/// Trip count of `i = start; while i <op> k { …; i = i ± step }`, or `None` when the variable
/// can wrap or never reaches the bound.
fn trip_count(start: u64, up: bool, step: u64, op: BinOp, k: u64) -> Option<u64> {
    // Only a comparison stops the loop when it fails: `R[1] || 8` or `R[1] | 8` never does
    // (`interp::cmp` calls them false, which would read as "never runs").
    if !matches!(
        op,
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
    ) {
        return None;
    }
    if !interp::cmp(op, start, k) {
        return Some(0);
    }
    let (n, last) = match (up, op) {
        (true, BinOp::Lt) => {
            let n = (k - start).div_ceil(step);
            (n, start + (n - 1) * step)
        }
        (true, BinOp::Le) => {
            let n = ((k - start) / step).checked_add(1)?;
            (n, start + (n - 1) * step)
        }
        (false, BinOp::Gt) => {
            let n = (start - k).div_ceil(step);
            (n, start - (n - 1) * step)
        }
        (false, BinOp::Ge) => {
            let n = ((start - k) / step).checked_add(1)?;
            (n, start - (n - 1) * step)
        }
        (true, BinOp::Ne) => {
            let d = k.wrapping_sub(start);
            return (d % step == 0).then_some(d / step);
        }
        (false, BinOp::Ne) => {
            let d = start.wrapping_sub(k);
            return (d % step == 0).then_some(d / step);
        }
        _ => return None,
    };
    // After the last iteration the variable must leave the range without wrapping around.
    let next = if up {
        last.checked_add(step)
    } else {
        last.checked_sub(step)
    };
    next.map(|_| n)
}

fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        o => o,
    }
}

impl Checker<'_> {
    fn stmts(&mut self, s: &[ast::Stmt]) -> Result<Vec<Stmt>, Error> {
        s.iter().map(|s| self.stmt(s)).collect()
    }

    fn place(&mut self, p: &ast::Expr) -> Result<Place, Error> {
        match &p.kind {
            ExprKind::Reg(i) => Ok(Place::Reg(self.index(i, NREGS as u64, "R", p.span)?)),
            ExprKind::Mem(i) => Ok(Place::Mem(self.index(i, self.mbuf_words, "MEM", p.span)?)),
            _ => Err(err(
                ErrorKind::Syntax,
                p.span,
                "only R[n] and MEM[n] can be assigned",
            )),
        }
    }

    fn index(&mut self, i: &ast::Expr, size: u64, what: &str, span: Span) -> Result<Index, Error> {
        match self.expr(i)? {
            Expr::Const(v) if v < size => Ok(Index::Const(v)),
            Expr::Const(v) => {
                let unit = if what == "R" {
                    "registers"
                } else {
                    "64-bit words"
                };
                Err(err(
                    ErrorKind::OutOfRange,
                    span,
                    format!(
                        "{what}[{v}] is out of range: there are {size} {unit} (indexes 0 to {})",
                        size - 1
                    ),
                ))
            }
            e => Ok(Index::Masked(e, size - 1)),
        }
    }

    fn stmt(&mut self, s: &ast::Stmt) -> Result<Stmt, Error> {
        Ok(match s {
            ast::Stmt::Assign {
                place, op, value, ..
            } => Stmt::Assign {
                place: self.place(place)?,
                op: *op,
                value: self.expr(value)?,
            },
            ast::Stmt::Step { place, down, .. } => Stmt::Assign {
                place: self.place(place)?,
                op: Some(if *down { BinOp::Sub } else { BinOp::Add }),
                value: c(1),
            },
            ast::Stmt::If {
                cond, then, els, ..
            } => Stmt::If(self.expr(cond)?, self.stmts(then)?, self.stmts(els)?),
            ast::Stmt::For {
                init,
                test,
                update,
                body,
                span,
            } => {
                let init = self.stmt(init)?;
                let test_ir = self.expr(test)?;
                let update_ir = self.stmt(update)?;
                self.in_loop += 1;
                let body_ir = self.stmts(body)?;
                self.in_loop -= 1;
                let bound = self.bound(&init, &test_ir, test.span, &update_ir, &body_ir, *span)?;
                self.loops.push((span.line, bound));
                Stmt::For {
                    init: Box::new(init),
                    test: test_ir,
                    update: Box::new(update_ir),
                    body: body_ir,
                    bound,
                }
            }
            ast::Stmt::Break(span) => {
                if self.in_loop == 0 {
                    return Err(err(ErrorKind::Invalid, *span, "BREAK outside a FOR loop"));
                }
                Stmt::Break
            }
            ast::Stmt::Return(e, _) => Stmt::Return(self.expr(e)?),
            ast::Stmt::Expr(e) => Stmt::Eval(self.expr(e)?),
        })
    }

    fn bound(
        &self,
        init: &Stmt,
        test: &Expr,
        test_span: Span,
        update: &Stmt,
        body: &[Stmt],
        span: Span,
    ) -> Result<u64, Error> {
        let name = format!("the FOR loop at line {}", span.line);
        let fail = |why: String| {
            Err(err(
                ErrorKind::Unbounded,
                span,
                format!("{name} has no compile-time bound: {why}"),
            ))
        };
        let (r, start) = match init {
            Stmt::Assign {
                place: Place::Reg(Index::Const(r)),
                op: None,
                value: Expr::Const(v),
            } => (*r, *v),
            _ => return fail("its init must be `R[n] = <constant>`".into()),
        };
        let (up, step) = match update {
            Stmt::Assign {
                place: Place::Reg(Index::Const(u)),
                op: Some(op @ (BinOp::Add | BinOp::Sub)),
                value: Expr::Const(s),
            } if *u == r && *s != 0 => (*op == BinOp::Add, *s),
            _ => {
                return fail(format!(
                    "its update must be R[{r}]++, R[{r}]--, R[{r}] += <constant> or R[{r}] -= <constant>, with a non-zero constant"
                ));
            }
        };
        if assigns_reg(body, r) {
            return fail(format!(
                "its body assigns the loop variable R[{r}] (or a register through a computed index)"
            ));
        }
        let mut parts = Vec::new();
        conjuncts(test, &mut parts);
        let mut best: Option<u64> = None;
        for p in parts {
            let (op, k) = match p {
                Expr::Bin(op, a, b) => match (&**a, &**b) {
                    (Expr::Reg(i), Expr::Const(k)) if **i == Index::Const(r) => (*op, *k),
                    (Expr::Const(k), Expr::Reg(i)) if **i == Index::Const(r) => (flip(*op), *k),
                    _ => continue,
                },
                _ => continue,
            };
            if let Some(n) = trip_count(start, up, step, op, k) {
                best = Some(best.map_or(n, |b: u64| b.min(n)));
            }
        }
        match best {
            Some(n) => Ok(n),
            None => Err(err(
                ErrorKind::Unbounded,
                test_span,
                format!(
                    "{name} has no compile-time bound: its test needs a comparison of R[{r}] with a constant that the step {}{step} reaches without wrapping (e.g. `... && R[{r}] {} 64`)",
                    if up { "+" } else { "-" },
                    if up { "<" } else { ">" }
                ),
            )),
        }
    }

    fn expr(&mut self, e: &ast::Expr) -> Result<Expr, Error> {
        Ok(match &e.kind {
            ExprKind::Num(v) => c(*v),
            ExprKind::Name(n) => match CONSTANTS.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)) {
                Some((_, v)) => c(*v),
                None => {
                    return Err(err(
                        ErrorKind::Syntax,
                        e.span,
                        format!("unknown name `{n}`"),
                    ));
                }
            },
            ExprKind::Reg(i) => Expr::Reg(Box::new(self.index(i, NREGS as u64, "R", e.span)?)),
            ExprKind::Mem(i) => {
                Expr::Mem(Box::new(self.index(i, self.mbuf_words, "MEM", e.span)?))
            }
            ExprKind::Macro(m) => match expand(m) {
                Some(x) => x,
                None => {
                    return Err(err(
                        ErrorKind::Syntax,
                        e.span,
                        format!("unknown macro PKT.{m}"),
                    ));
                }
            },
            ExprKind::Pkt {
                width,
                signed,
                off,
                sub,
            } => {
                let base = Expr::Pkt {
                    width: *width,
                    signed: *signed && sub.is_none(),
                    off: Box::new(self.expr(off)?),
                };
                let Some(sub) = sub else {
                    return Ok(base);
                };
                let wbits = ir::width_bits(*width);
                let k = u32::from(sub.bits);
                let index = self.expr(&sub.index)?;
                match index {
                    Expr::Const(m) => {
                        if m >= u64::from(wbits / k) {
                            return Err(err(
                                ErrorKind::OutOfRange,
                                sub.index.span,
                                format!(
                                    "sub-field index {m} is out of range: a {wbits}-bit load has {} fields of {k} bits",
                                    wbits / k
                                ),
                            ));
                        }
                        let shift = u64::from(wbits) - u64::from(k) * (m + 1);
                        let v = bin(
                            BinOp::And,
                            bin(BinOp::Shr, base, c(shift)),
                            c((1u64 << k) - 1),
                        );
                        if sub.signed {
                            let sb = 1u64 << (k - 1);
                            bin(BinOp::Sub, bin(BinOp::Xor, v, c(sb)), c(sb))
                        } else {
                            v
                        }
                    }
                    index => Expr::Sub {
                        base: Box::new(base),
                        index: Box::new(index),
                        params: ir::sub_params(wbits as u8, sub.bits, sub.signed),
                    },
                }
            }
            ExprKind::Unary(op, a) => match (op, self.expr(a)?) {
                (op, Expr::Const(v)) => c(interp::unop(*op, v)),
                (UnOp::Neg, x) => Expr::Un(UnOp::Neg, Box::new(x)),
                (op, x) => Expr::Un(*op, Box::new(x)),
            },
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                bin(*op, a, b)
            }
            ExprKind::Hash(a, b, s) => {
                self.hashes += 1;
                Expr::Hash(Box::new([self.expr(a)?, self.expr(b)?, self.expr(s)?]))
            }
            ExprKind::Extern {
                name,
                name_span,
                input,
                output,
            } => {
                let Some(def) = self.reg.get(name) else {
                    let mut known = self.reg.names();
                    known.sort();
                    return Err(err(
                        ErrorKind::UnknownExtern,
                        *name_span,
                        format!(
                            "unknown external function `{name}` (registered: {})",
                            if known.is_empty() {
                                "none".to_string()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                };
                let mut off = |x: &ast::Expr, what: &str, words: usize| -> Result<usize, Error> {
                    let Expr::Const(v) = self.expr(x)? else {
                        return Err(err(
                            ErrorKind::ExternParams,
                            x.span,
                            format!("the {what} offset of EXTERN({name}, …) must be a constant"),
                        ));
                    };
                    if v.checked_add(words as u64)
                        .is_none_or(|end| end > self.mbuf_words)
                    {
                        return Err(err(
                            ErrorKind::ExternParams,
                            x.span,
                            format!(
                                "EXTERN({name}, …): the {what} needs {words} words from MBuf offset {v}, but the MBuf has {} words",
                                self.mbuf_words
                            ),
                        ));
                    }
                    Ok(v as usize)
                };
                let i = off(input, "input", def.in_words)?;
                let o = off(output, "output", def.out_words)?;
                let idx = self.externs.len() as u32;
                self.externs.push(ExternSite {
                    name: name.clone(),
                    func: def.func.clone(),
                    input: i..i + def.in_words,
                    output: o..o + def.out_words,
                });
                Expr::Extern { idx }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trip_counts() {
        assert_eq!(trip_count(0, true, 1, BinOp::Lt, 10), Some(10));
        assert_eq!(trip_count(0, true, 3, BinOp::Lt, 10), Some(4));
        assert_eq!(trip_count(0, true, 3, BinOp::Le, 9), Some(4));
        assert_eq!(trip_count(10, false, 1, BinOp::Gt, 0), Some(10));
        assert_eq!(trip_count(10, false, 1, BinOp::Ge, 0), None); // i >= 0 always holds
        assert_eq!(trip_count(0, true, 1, BinOp::Le, u64::MAX), None);
        assert_eq!(trip_count(0, true, 2, BinOp::Ne, 10), Some(5));
        assert_eq!(trip_count(0, true, 3, BinOp::Ne, 10), None);
        assert_eq!(trip_count(0, true, 1, BinOp::Gt, 10), Some(0));
        assert_eq!(trip_count(20, true, 1, BinOp::Gt, 10), None);
        assert_eq!(trip_count(0, false, 1, BinOp::Lt, 10), None);
        // Not comparisons: they bound nothing (they once read as "never runs").
        for op in [BinOp::LOr, BinOp::Or, BinOp::Add, BinOp::LAnd, BinOp::Xor] {
            assert_eq!(trip_count(0, true, 1, op, 8), None, "{op:?}");
        }
    }
}
