//! The parser: libpcap's `grammar.y` as a recursive-descent parser.
//!
//! Two features of the original grammar are kept because users' expressions depend on them:
//!
//! - `and` and `or` have the **same precedence** and group from the left: `a or b and c` is
//!   `(a or b) and c`. `not` binds to the following term only.
//! - **Qualifier inheritance**: a bare value takes the qualifiers of the primitive before it
//!   (`tcp dst port ftp or ftp-data or domain`); `not`, `and`, `or` and `(` pass them on; a
//!   bare protocol, a relation or a keyword primitive pass nothing on, and a bare value after
//!   them is an error. A parenthesised expression passes on what was in force before its `(`.
//!
//! In arithmetic, `|` < `&` < `<<` `>>` < `+` `-` < `*` `/` < unary minus, all left
//! associative; `%` and `^` take only the operand right before them on their left and all the
//! rest of the expression on their right (`1 + 2 % 3 + 4` is `1 + (2 % (3 + 4))`), which is what
//! libpcap's grammar, lacking a precedence for them, does.

use crate::ast::*;
use crate::lexer::{Kw, Op, Tok, Token, tokenize};
use crate::span::{Error, ErrorKind, Span};

/// Deepest nesting of parentheses, `not`s and arithmetic accepted.
pub const MAX_DEPTH: usize = 256;

/// Parse `src`. `Ok(None)` is the empty expression (accept every packet).
pub fn parse(src: &str) -> Result<Option<Expr<'_>>, Error> {
    let mut p = Parser {
        toks: tokenize(src)?,
        pos: 0,
        src,
        depth: 0,
        q: Inherited::Undefined,
    };
    if p.toks.is_empty() {
        return Ok(None);
    }
    let e = p.expr()?;
    if p.pos < p.toks.len() {
        return Err(p.unexpected());
    }
    Ok(Some(e))
}

struct Parser<'a> {
    toks: Vec<Token>,
    pos: usize,
    src: &'a str,
    depth: usize,
    /// The qualifiers the next bare value inherits: set by each term as it is parsed (kept
    /// here rather than returned beside every expression through every level).
    q: Inherited,
}

type PResult<T> = Result<T, Error>;

fn pname(k: Kw) -> Option<Proto> {
    use Proto as P;
    Some(match k {
        Kw::Link => P::Link,
        Kw::Ip => P::Ip,
        Kw::Arp => P::Arp,
        Kw::Rarp => P::Rarp,
        Kw::Sctp => P::Sctp,
        Kw::Tcp => P::Tcp,
        Kw::Udp => P::Udp,
        Kw::Icmp => P::Icmp,
        Kw::Igmp => P::Igmp,
        Kw::Igrp => P::Igrp,
        Kw::Pim => P::Pim,
        Kw::Vrrp => P::Vrrp,
        Kw::Carp => P::Carp,
        Kw::Atalk => P::Atalk,
        Kw::Aarp => P::Aarp,
        Kw::Decnet => P::Decnet,
        Kw::Lat => P::Lat,
        Kw::Sca => P::Sca,
        Kw::Moprc => P::Moprc,
        Kw::Mopdl => P::Mopdl,
        Kw::Ip6 => P::Ip6,
        Kw::Icmp6 => P::Icmp6,
        Kw::Ah => P::Ah,
        Kw::Esp => P::Esp,
        Kw::Iso => P::Iso,
        Kw::Esis => P::Esis,
        Kw::Isis => P::Isis,
        Kw::L1 => P::L1,
        Kw::L2 => P::L2,
        Kw::Iih => P::Iih,
        Kw::Lsp => P::Lsp,
        Kw::Snp => P::Snp,
        Kw::Psnp => P::Psnp,
        Kw::Csnp => P::Csnp,
        Kw::Clnp => P::Clnp,
        Kw::Stp => P::Stp,
        Kw::Ipx => P::Ipx,
        Kw::Netbeui => P::Netbeui,
        Kw::Radio => P::Radio,
        _ => return None,
    })
}

fn is_dqual(k: Kw) -> bool {
    matches!(
        k,
        Kw::Src | Kw::Dst | Kw::Addr1 | Kw::Addr2 | Kw::Addr3 | Kw::Addr4 | Kw::Ra | Kw::Ta
    )
}

fn is_aqual(k: Kw) -> bool {
    matches!(k, Kw::Host | Kw::Net | Kw::Port | Kw::Portrange)
}

fn is_head_start(k: Kw) -> bool {
    is_dqual(k) || is_aqual(k) || matches!(k, Kw::Proto | Kw::Protochain | Kw::Gateway)
}

fn arith_op(t: &Tok) -> Option<ArithOp> {
    Some(match t {
        Tok::Op(Op::Plus) => ArithOp::Add,
        Tok::Op(Op::Minus) => ArithOp::Sub,
        Tok::Op(Op::Star) => ArithOp::Mul,
        Tok::Op(Op::Slash) => ArithOp::Div,
        Tok::Op(Op::Percent) => ArithOp::Mod,
        Tok::Op(Op::Amp) => ArithOp::And,
        Tok::Op(Op::Pipe) => ArithOp::Or,
        Tok::Op(Op::Caret) => ArithOp::Xor,
        Tok::Op(Op::Shl) => ArithOp::Shl,
        Tok::Op(Op::Shr) => ArithOp::Shr,
        _ => return None,
    })
}

fn rel_op(t: &Tok) -> Option<RelOp> {
    Some(match t {
        Tok::Op(Op::Gt) => RelOp::Gt,
        Tok::Op(Op::Ge) => RelOp::Ge,
        Tok::Op(Op::Eq) => RelOp::Eq,
        Tok::Op(Op::Le) => RelOp::Le,
        Tok::Op(Op::Lt) => RelOp::Lt,
        Tok::Op(Op::Ne) => RelOp::Ne,
        _ => return None,
    })
}

/// Binding strength of the left-associative arithmetic operators (higher binds tighter).
fn arith_prec(op: ArithOp) -> u8 {
    match op {
        ArithOp::Or => 1,
        ArithOp::And => 2,
        ArithOp::Shl | ArithOp::Shr => 3,
        ArithOp::Add | ArithOp::Sub => 4,
        ArithOp::Mul | ArithOp::Div => 5,
        // Handled separately (see the module documentation).
        ArithOp::Mod | ArithOp::Xor => 6,
    }
}

fn is_not(t: &Tok) -> bool {
    matches!(t, Tok::Kw(Kw::Not) | Tok::Op(Op::Bang))
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    /// The text of the current token (see [`Token::text`]); empty at the end.
    fn text(&self) -> &'a str {
        self.toks.get(self.pos).map_or("", |t| t.text(self.src))
    }

    fn peek_at(&self, n: usize) -> Option<&Tok> {
        self.toks.get(self.pos + n).map(|t| &t.tok)
    }

    fn span_here(&self) -> Span {
        match self.toks.get(self.pos) {
            Some(t) => t.span,
            None => Span::new(self.src.len(), self.src.len()),
        }
    }

    fn prev_span(&self) -> Span {
        self.toks
            .get(self.pos.wrapping_sub(1))
            .map_or(Span::new(0, 0), |t| t.span)
    }

    fn bump(&mut self) -> Span {
        let s = self.span_here();
        self.pos += 1;
        s
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn err(&self, msg: impl Into<String>, span: Span) -> Error {
        Error::new(ErrorKind::Syntax, msg, Some(span), self.src)
    }

    fn unexpected(&self) -> Error {
        match self.toks.get(self.pos) {
            Some(t) => self.err(
                format!(
                    "syntax error: unexpected '{}'",
                    &self.src[t.span.start..t.span.end]
                ),
                t.span,
            ),
            None => self.err(
                "syntax error: unexpected end of expression",
                Span::new(self.src.len(), self.src.len()),
            ),
        }
    }

    fn expect(&mut self, t: Tok, what: &str) -> PResult<Span> {
        if self.peek() == Some(&t) {
            Ok(self.bump())
        } else if self.peek().is_none() {
            Err(self.err(
                format!("syntax error: expected {what} before the end of the expression"),
                self.span_here(),
            ))
        } else {
            let s = self.span_here();
            Err(self.err(
                format!(
                    "syntax error: expected {what}, found '{}'",
                    &self.src[s.start..s.end]
                ),
                s,
            ))
        }
    }

    /// One level deeper; an error past [`MAX_DEPTH`].
    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Error::new(
                ErrorKind::Limit,
                format!("expression nested more than {MAX_DEPTH} levels deep"),
                Some(self.span_here()),
                self.src,
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// `expr: term | expr (and|or) (term|id)`; leaves the qualifiers it passes on in `q`.
    fn expr(&mut self) -> PResult<Expr<'a>> {
        self.enter()?;
        let mut e = self.term()?;
        loop {
            let is_and = match self.peek() {
                Some(Tok::Kw(Kw::And)) => true,
                Some(Tok::Kw(Kw::Or)) => false,
                _ => break,
            };
            self.bump();
            let rhs = self.term_or_id()?;
            let span = e.span.to(rhs.span);
            let kind = if is_and {
                ExprKind::And(Box::new([e, rhs]))
            } else {
                ExprKind::Or(Box::new([e, rhs]))
            };
            e = Expr { kind, span };
        }
        self.leave();
        Ok(e)
    }

    /// Whether the tokens at `pos` start a bare value (an `id` of the grammar) rather than a
    /// term: a number not followed by an operator, an address, or a name; looking through
    /// `not`s and opening parentheses.
    fn starts_id(&self, mut n: usize) -> bool {
        while let Some(t) = self.peek_at(n) {
            if is_not(t) || *t == Tok::Op(Op::LParen) {
                n += 1;
                continue;
            }
            return match t {
                Tok::Hid | Tok::Hid6 | Tok::Eid | Tok::Aid | Tok::Id => true,
                Tok::Num(_) => {
                    // `80 or …`, `80)` are values; `1 = 1`, `1 + …` start a relation.
                    let mut m = n + 1;
                    while self.peek_at(m) == Some(&Tok::Op(Op::RParen)) {
                        m += 1;
                    }
                    !self
                        .peek_at(m)
                        .is_some_and(|t| arith_op(t).is_some() || rel_op(t).is_some())
                }
                _ => false,
            };
        }
        false
    }

    /// After `and`/`or`: a bare value (inheriting `q`) or a term.
    fn term_or_id(&mut self) -> PResult<Expr<'a>> {
        if self.starts_id(0) {
            self.id(self.q)
        } else if self.peek().is_some_and(is_not) {
            self.enter()?;
            let start = self.bump();
            let inner = self.term_or_id()?;
            self.leave();
            let span = start.to(inner.span);
            Ok(Expr {
                kind: ExprKind::Not(Box::new(inner)),
                span,
            })
        } else {
            self.term()
        }
    }

    /// `term: not term | rterm`.
    fn term(&mut self) -> PResult<Expr<'a>> {
        if self.peek().is_some_and(is_not) {
            self.enter()?;
            let start = self.bump();
            let inner = self.term()?;
            self.leave();
            let span = start.to(inner.span);
            return Ok(Expr {
                kind: ExprKind::Not(Box::new(inner)),
                span,
            });
        }
        self.rterm()
    }

    /// An expression that passes on no qualifiers (a relation, a keyword primitive, a bare
    /// protocol).
    fn unqualified(&mut self, e: Expr<'a>) -> PResult<Expr<'a>> {
        self.q = Inherited::Undefined;
        Ok(e)
    }

    fn rterm(&mut self) -> PResult<Expr<'a>> {
        let start = self.span_here();
        let Some(t) = self.peek().copied() else {
            return Err(self.unexpected());
        };
        match t {
            Tok::Op(Op::LParen) => {
                // `( expr )`, or an arithmetic expression in parentheses starting a relation.
                let save = self.pos;
                let first = self.paren_expr();
                match first {
                    Ok(r)
                        if !self
                            .peek()
                            .is_some_and(|t| arith_op(t).is_some() || rel_op(t).is_some()) =>
                    {
                        Ok(r)
                    }
                    first => {
                        let after_expr = self.pos;
                        self.pos = save;
                        match self.relation() {
                            Ok(e) => self.unqualified(e),
                            Err(e2) => {
                                // Report whichever reading got further.
                                match first {
                                    Err(e1) if after_expr >= self.pos => Err(e1),
                                    _ => Err(e2),
                                }
                            }
                        }
                    }
                }
            }
            Tok::Kw(k) => {
                if let Some(p) = pname(k) {
                    match self.peek_at(1) {
                        Some(Tok::Op(Op::LBracket)) => {
                            let e = self.relation()?;
                            self.unqualified(e)
                        }
                        Some(Tok::Kw(k2)) if is_head_start(*k2) => {
                            self.bump();
                            self.head_id(Some(p), start)
                        }
                        Some(Tok::Kw(Kw::Broadcast)) => {
                            self.bump();
                            let end = self.bump();
                            let e = self.other(Other::Broadcast(Some(p)), start.to(end));
                            self.unqualified(e)
                        }
                        Some(Tok::Kw(Kw::Type | Kw::Subtype | Kw::Dir)) => {
                            // `wlan type mgt`: an 802.11 primitive with a protocol qualifier.
                            self.bump();
                            let Some(Tok::Kw(k2)) = self.peek().copied() else {
                                return Err(self.unexpected());
                            };
                            let e = self.keyword_primitive(k2)?;
                            self.unqualified(e)
                        }
                        Some(Tok::Kw(Kw::Multicast)) => {
                            self.bump();
                            let end = self.bump();
                            let e = self.other(Other::Multicast(Some(p)), start.to(end));
                            self.unqualified(e)
                        }
                        _ => {
                            self.bump();
                            self.unqualified(Expr {
                                kind: ExprKind::Proto(p),
                                span: start,
                            })
                        }
                    }
                } else if is_head_start(k) {
                    self.head_id(None, start)
                } else if k == Kw::Len {
                    let e = self.relation()?;
                    self.unqualified(e)
                } else {
                    let e = self.keyword_primitive(k)?;
                    self.unqualified(e)
                }
            }
            Tok::Num(_) | Tok::Op(Op::Minus) => {
                let e = self.relation()?;
                self.unqualified(e)
            }
            _ => Err(self.unexpected()),
        }
    }

    fn other(&self, o: Other<'a>, span: Span) -> Expr<'a> {
        Expr {
            kind: ExprKind::Other(o),
            span,
        }
    }

    fn paren_expr(&mut self) -> PResult<Expr<'a>> {
        // A parenthesised expression passes on the qualifiers in force before '('.
        let q = self.q;
        self.enter()?;
        let open = self.bump();
        let inner = self.expr();
        self.q = q;
        let mut e = inner?;
        let close = self.expect(Tok::Op(Op::RParen), "')'")?;
        self.leave();
        e.span = open.to(close);
        Ok(e)
    }

    /// `head id` with the protocol qualifier (if any) already consumed.
    fn head_id(&mut self, proto: Option<Proto>, start: Span) -> PResult<Expr<'a>> {
        let mut qual = Qual {
            proto,
            dir: None,
            addr: None,
        };
        match self.peek() {
            Some(Tok::Kw(Kw::Proto)) => {
                self.bump();
                qual.addr = Some(AddrType::Proto);
            }
            Some(Tok::Kw(Kw::Protochain)) => {
                self.bump();
                qual.addr = Some(AddrType::Protochain);
            }
            Some(Tok::Kw(Kw::Gateway)) => {
                self.bump();
                qual.addr = Some(AddrType::Gateway);
            }
            _ => {
                if let Some(Tok::Kw(k)) = self.peek().copied()
                    && is_dqual(k)
                {
                    self.bump();
                    qual.dir = Some(match k {
                        Kw::Src | Kw::Dst => {
                            let first = k;
                            match self.peek() {
                                Some(Tok::Kw(Kw::Or)) | Some(Tok::Kw(Kw::And)) => {
                                    let is_or = self.peek() == Some(&Tok::Kw(Kw::Or));
                                    self.bump();
                                    let other = if first == Kw::Src { Kw::Dst } else { Kw::Src };
                                    self.expect(
                                        Tok::Kw(other),
                                        if other == Kw::Dst { "'dst'" } else { "'src'" },
                                    )?;
                                    if is_or { Dir::SrcOrDst } else { Dir::SrcAndDst }
                                }
                                _ => {
                                    if first == Kw::Src {
                                        Dir::Src
                                    } else {
                                        Dir::Dst
                                    }
                                }
                            }
                        }
                        Kw::Addr1 => Dir::Addr1,
                        Kw::Addr2 => Dir::Addr2,
                        Kw::Addr3 => Dir::Addr3,
                        Kw::Addr4 => Dir::Addr4,
                        Kw::Ra => Dir::Ra,
                        _ => Dir::Ta,
                    });
                }
                if let Some(Tok::Kw(k)) = self.peek().copied()
                    && is_aqual(k)
                {
                    self.bump();
                    qual.addr = Some(match k {
                        Kw::Host => AddrType::Host,
                        Kw::Net => AddrType::Net,
                        Kw::Port => AddrType::Port,
                        _ => AddrType::Portrange,
                    });
                }
                if qual.dir.is_none() && qual.addr.is_none() {
                    return Err(self.unexpected());
                }
            }
        }
        let q = Inherited::Qual(qual);
        self.q = q;
        let mut e = self.id(q)?;
        e.span = start.to(e.span);
        Ok(e)
    }

    /// An `id`: a value inheriting `q`, `not id`, or a parenthesised list of ids joined by
    /// `and`/`or`.
    fn id(&mut self, q: Inherited) -> PResult<Expr<'a>> {
        self.enter()?;
        let start = self.span_here();
        let r = match self.peek().copied() {
            Some(t) if is_not(&t) => {
                self.bump();
                let inner = self.id(q)?;
                let span = start.to(inner.span);
                Ok(Expr {
                    kind: ExprKind::Not(Box::new(inner)),
                    span,
                })
            }
            Some(Tok::Op(Op::LParen)) => {
                self.bump();
                let mut e = self.id(q)?;
                while let Some(Tok::Kw(k @ (Kw::And | Kw::Or))) = self.peek().copied() {
                    self.bump();
                    let rhs = self.id(q)?;
                    let span = e.span.to(rhs.span);
                    e = Expr {
                        kind: if k == Kw::And {
                            ExprKind::And(Box::new([e, rhs]))
                        } else {
                            ExprKind::Or(Box::new([e, rhs]))
                        },
                        span,
                    };
                }
                let close = self.expect(Tok::Op(Op::RParen), "')'")?;
                e.span = start.to(close);
                Ok(e)
            }
            Some(_) => self.value(q),
            None => Err(self.unexpected()),
        };
        self.leave();
        r
    }

    /// One value token (with its `/len` or `mask M`).
    fn value(&mut self, q: Inherited) -> PResult<Expr<'a>> {
        let start = self.span_here();
        let value = match self.peek().copied() {
            Some(Tok::Num(n)) => {
                self.bump();
                Value::Num(n)
            }
            Some(Tok::Id) => {
                let s = self.text();
                self.bump();
                Value::Name(s)
            }
            Some(Tok::Hid) => {
                let s = self.text();
                self.bump();
                if self.eat(&Tok::Op(Op::Slash)) {
                    match self.peek().copied() {
                        Some(Tok::Num(n)) => {
                            self.bump();
                            Value::Ipv4Prefix(s, n)
                        }
                        _ => return Err(self.unexpected()),
                    }
                } else if self.eat(&Tok::Kw(Kw::Mask)) {
                    match self.peek().copied() {
                        Some(Tok::Hid) => {
                            let m = self.text();
                            self.bump();
                            Value::Ipv4Mask(s, m)
                        }
                        _ => return Err(self.unexpected()),
                    }
                } else {
                    Value::Ipv4(s)
                }
            }
            Some(Tok::Hid6) => {
                let s = self.text();
                self.bump();
                if self.eat(&Tok::Op(Op::Slash)) {
                    match self.peek().copied() {
                        Some(Tok::Num(n)) => {
                            self.bump();
                            Value::Ipv6Prefix(s, n)
                        }
                        _ => return Err(self.unexpected()),
                    }
                } else {
                    Value::Ipv6(s)
                }
            }
            Some(Tok::Eid) => {
                let s = self.text();
                self.bump();
                Value::Mac(s)
            }
            Some(Tok::Aid) => {
                let s = self.text();
                self.bump();
                Value::Arcnet(s)
            }
            _ => return Err(self.unexpected()),
        };
        let span = start.to(self.prev_span());
        Ok(Expr {
            kind: ExprKind::Primitive(Primitive {
                qual: q,
                value,
                value_span: span,
            }),
            span,
        })
    }

    /// `arth relop arth`.
    fn relation(&mut self) -> PResult<Expr<'a>> {
        let lhs = self.arith()?;
        let Some(op) = self.peek().and_then(rel_op) else {
            return Err(match self.peek() {
                None => self.err(
                    "syntax error: expected a comparison (=, !=, <, <=, >, >=) after this value",
                    lhs.span(),
                ),
                Some(_) => self.unexpected(),
            });
        };
        self.bump();
        let rhs = self.arith()?;
        let span = lhs.span().to(rhs.span());
        Ok(Expr {
            kind: ExprKind::Relation(op, lhs, rhs),
            span,
        })
    }

    /// A full arithmetic expression.
    fn arith(&mut self) -> PResult<Arith> {
        self.arith_prec(1)
    }

    fn arith_prec(&mut self, min: u8) -> PResult<Arith> {
        self.enter()?;
        let mut lhs = self.arith_unary()?;
        while let Some(op) = self.peek().and_then(arith_op) {
            let prec = arith_prec(op);
            if prec < min || matches!(op, ArithOp::Mod | ArithOp::Xor) {
                break;
            }
            self.bump();
            let rhs = self.arith_prec(prec + 1)?;
            let span = lhs.span().to(rhs.span());
            lhs = Arith::Bin(op, Box::new(lhs), Box::new(rhs), span);
        }
        self.leave();
        Ok(lhs)
    }

    /// A unary expression, with `%`/`^` taking it as their left operand.
    fn arith_unary(&mut self) -> PResult<Arith> {
        let operand = if self.peek() == Some(&Tok::Op(Op::Minus)) {
            self.enter()?;
            let start = self.bump();
            let inner = self.arith_unary()?;
            self.leave();
            let span = start.to(inner.span());
            return Ok(Arith::Neg(Box::new(inner), span));
        } else {
            self.arith_primary()?
        };
        self.mod_xor(operand)
    }

    fn mod_xor(&mut self, lhs: Arith) -> PResult<Arith> {
        match self.peek().and_then(arith_op) {
            Some(op @ (ArithOp::Mod | ArithOp::Xor)) => {
                self.bump();
                let rhs = self.arith()?;
                let span = lhs.span().to(rhs.span());
                Ok(Arith::Bin(op, Box::new(lhs), Box::new(rhs), span))
            }
            _ => Ok(lhs),
        }
    }

    fn arith_primary(&mut self) -> PResult<Arith> {
        let start = self.span_here();
        match self.peek().copied() {
            Some(Tok::Num(n)) => {
                self.bump();
                Ok(Arith::Num(n, start))
            }
            Some(Tok::Kw(Kw::Len)) => {
                self.bump();
                Ok(Arith::Len(start))
            }
            Some(Tok::Op(Op::LParen)) => {
                self.enter()?;
                let open = self.bump();
                let inner = self.arith()?;
                let close = self.expect(Tok::Op(Op::RParen), "')'")?;
                self.leave();
                Ok(match inner {
                    Arith::Num(n, _) => Arith::Num(n, open.to(close)),
                    other => other,
                })
            }
            Some(Tok::Kw(k)) if pname(k).is_some() => {
                let proto = pname(k).unwrap_or(Proto::Link);
                self.bump();
                self.expect(Tok::Op(Op::LBracket), "'['")?;
                let index = self.arith()?;
                let size = if self.eat(&Tok::Op(Op::Colon)) {
                    match self.peek().copied() {
                        Some(Tok::Num(n)) => {
                            self.bump();
                            Some(n)
                        }
                        _ => {
                            return Err(self.err(
                                "syntax error: the size of an accessor must be a number (1, 2 or 4)",
                                self.span_here(),
                            ));
                        }
                    }
                } else {
                    None
                };
                let close = self.expect(Tok::Op(Op::RBracket), "']'")?;
                Ok(Arith::Load {
                    proto,
                    index: Box::new(index),
                    size,
                    span: start.to(close),
                })
            }
            _ => Err(self.unexpected()),
        }
    }

    /// `vlan`, `mpls`, `pppoes`, `geneve` take a number possibly in parentheses.
    fn optional_pnum(&mut self) -> PResult<Option<u32>> {
        let mut opens = 0;
        while self.peek() == Some(&Tok::Op(Op::LParen)) && self.peek_at(opens + 1).is_some() {
            // Only a number (in any number of parentheses) is an argument.
            let mut n = opens;
            while self.peek_at(n) == Some(&Tok::Op(Op::LParen)) {
                n += 1;
            }
            if !matches!(self.peek_at(n), Some(Tok::Num(_))) {
                break;
            }
            self.bump();
            opens += 1;
        }
        if let Some(Tok::Num(v)) = self.peek().copied() {
            self.bump();
            for _ in 0..opens {
                self.expect(Tok::Op(Op::RParen), "')'")?;
            }
            Ok(Some(v))
        } else {
            Ok(None)
        }
    }

    fn literal_num(&mut self, what: &str) -> PResult<u32> {
        match self.peek().copied() {
            Some(Tok::Num(n)) => {
                self.bump();
                Ok(n)
            }
            _ => {
                let s = self.span_here();
                Err(self.err(format!("syntax error: '{what}' needs a number"), s))
            }
        }
    }

    fn keyword_primitive(&mut self, k: Kw) -> PResult<Expr<'a>> {
        let start = self.bump();
        let o = match k {
            Kw::Broadcast => Other::Broadcast(None),
            Kw::Multicast => Other::Multicast(None),
            Kw::Less => Other::Less(self.literal_num("less")?),
            Kw::Greater => Other::Greater(self.literal_num("greater")?),
            Kw::Byte => {
                let idx = self.literal_num("byte")?;
                let op = match self.peek() {
                    Some(Tok::Op(Op::Amp)) => ByteOp::And,
                    Some(Tok::Op(Op::Pipe)) => ByteOp::Or,
                    Some(Tok::Op(Op::Lt)) => ByteOp::Lt,
                    Some(Tok::Op(Op::Gt)) => ByteOp::Gt,
                    Some(Tok::Op(Op::Eq)) => ByteOp::Eq,
                    _ => {
                        return Err(self.err(
                            "syntax error: 'byte' takes one of the operators & | < > =",
                            self.span_here(),
                        ));
                    }
                };
                self.bump();
                let val = self.literal_num("byte")?;
                Other::Byte(idx, op, val)
            }
            Kw::Inbound => Other::Inbound,
            Kw::Outbound => Other::Outbound,
            Kw::Ifindex => Other::Ifindex(self.literal_num("ifindex")?),
            Kw::Vlan => Other::Vlan(self.optional_pnum()?),
            Kw::Mpls => Other::Mpls(self.optional_pnum()?),
            Kw::Pppoed => Other::Pppoed,
            Kw::Pppoes => Other::Pppoes(self.optional_pnum()?),
            Kw::Geneve => Other::Geneve(self.optional_pnum()?),
            Kw::Llc => match self.peek().copied() {
                Some(Tok::Id) => {
                    let s = self.text();
                    self.bump();
                    Other::Llc(Some(s))
                }
                Some(Tok::Kw(Kw::PfRnr)) => {
                    self.bump();
                    Other::Llc(Some("rnr"))
                }
                _ => Other::Llc(None),
            },
            Kw::Type => {
                let ty = self.wlan_type()?;
                if self.peek() == Some(&Tok::Kw(Kw::Subtype)) {
                    self.bump();
                    let sub = self.wlan_subtype_of(ty)?;
                    Other::WlanType {
                        value: ty | sub,
                        mask: 0xfc,
                    }
                } else {
                    Other::WlanType {
                        value: ty,
                        mask: 0x0c,
                    }
                }
            }
            Kw::Subtype => {
                // A subtype name alone: the first type whose table has it.
                let span = self.span_here();
                if self.peek() != Some(&Tok::Id) {
                    return Err(self.unexpected());
                }
                let name = self.text();
                self.bump();
                let found = WLAN_SUBTYPES.iter().find_map(|(ty, table)| {
                    table
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(name))
                        .map(|(_, v)| ty | v)
                });
                let Some(value) = found else {
                    return Err(self.err("unknown 802.11 type name", span));
                };
                Other::WlanType { value, mask: 0xfc }
            }
            Kw::Dir => {
                let span = self.span_here();
                match self.peek().copied() {
                    Some(Tok::Num(n)) => {
                        self.bump();
                        Other::WlanDir(n)
                    }
                    Some(Tok::Id) => {
                        let name = self.text();
                        self.bump();
                        let d = ["nods", "tods", "fromds", "dstods"]
                            .iter()
                            .position(|d| d.eq_ignore_ascii_case(name));
                        match d {
                            Some(d) => Other::WlanDir(d as u32),
                            None => return Err(self.err("unknown 802.11 direction", span)),
                        }
                    }
                    _ => return Err(self.unexpected()),
                }
            }
            Kw::PfIfname | Kw::PfRset => {
                if self.peek() != Some(&Tok::Id) {
                    return Err(self.unexpected());
                }
                let name = self.text();
                self.bump();
                Other::Pf(if k == Kw::PfIfname {
                    Pf::Ifname(name)
                } else {
                    Pf::Ruleset(name)
                })
            }
            Kw::PfRnr | Kw::PfSrnr => {
                let Some(Tok::Num(n)) = self.peek().copied() else {
                    return Err(self.unexpected());
                };
                self.bump();
                Other::Pf(if k == Kw::PfRnr {
                    Pf::Rnr(n)
                } else {
                    Pf::Srnr(n)
                })
            }
            Kw::PfReason => {
                let span = self.span_here();
                match self.peek().copied() {
                    Some(Tok::Num(n)) => {
                        self.bump();
                        Other::Pf(Pf::Reason(n))
                    }
                    Some(Tok::Id) => {
                        let name = self.text();
                        self.bump();
                        let Some(v) = PF_REASONS.iter().position(|r| r.eq_ignore_ascii_case(name))
                        else {
                            return Err(self.err(format!("unknown PF reason \"{name}\""), span));
                        };
                        Other::Pf(Pf::Reason(v as u32))
                    }
                    _ => return Err(self.unexpected()),
                }
            }
            Kw::PfAction => {
                let span = self.span_here();
                if self.peek() != Some(&Tok::Id) {
                    return Err(self.unexpected());
                }
                let name = self.text();
                self.bump();
                let Some(&(_, v)) = PF_ACTIONS
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(name))
                else {
                    return Err(self.err(format!("unknown PF action \"{name}\""), span));
                };
                Other::Pf(Pf::Action(v))
            }
            Kw::Lane
            | Kw::Metac
            | Kw::Bcc
            | Kw::Oamf4ec
            | Kw::Oamf4sc
            | Kw::Sc
            | Kw::Ilmic
            | Kw::Oam
            | Kw::Oamf4
            | Kw::Connectmsg
            | Kw::Metaconnect => Other::Atm(match k {
                Kw::Lane => "lane",
                Kw::Metac => "metac",
                Kw::Bcc => "bcc",
                Kw::Oamf4ec => "oam4ec",
                Kw::Oamf4sc => "oam4sc",
                Kw::Sc => "sc",
                Kw::Ilmic => "ilmic",
                Kw::Oam => "oam",
                Kw::Oamf4 => "oamf4",
                Kw::Connectmsg => "connectmsg",
                _ => "metaconnect",
            }),
            Kw::Vpi | Kw::Vci => Other::AtmField(k == Kw::Vci, self.field_value()?),
            Kw::Sio | Kw::Opc | Kw::Dpc | Kw::Sls | Kw::Hsio | Kw::Hopc | Kw::Hdpc | Kw::Hsls => {
                let field = match k {
                    Kw::Sio | Kw::Hsio => Mtp3Field::Sio,
                    Kw::Opc | Kw::Hopc => Mtp3Field::Opc,
                    Kw::Dpc | Kw::Hdpc => Mtp3Field::Dpc,
                    _ => Mtp3Field::Sls,
                };
                let hsl = matches!(k, Kw::Hsio | Kw::Hopc | Kw::Hdpc | Kw::Hsls);
                Other::Mtp3(field, hsl, self.field_value()?)
            }
            Kw::Fisu | Kw::Lssu | Kw::Msu | Kw::Hfisu | Kw::Hlssu | Kw::Hmsu => {
                Other::Mtp2(match k {
                    Kw::Fisu => "fisu",
                    Kw::Lssu => "lssu",
                    Kw::Msu => "msu",
                    Kw::Hfisu => "hfisu",
                    Kw::Hlssu => "hlssu",
                    _ => "hmsu",
                })
            }
            _ => {
                self.pos -= 1;
                return Err(self.unexpected());
            }
        };
        let span = start.to(self.prev_span());
        Ok(self.other(o, span))
    }

    /// The operand of `type`: a number of the type bits only (0x0c), or a type name.
    fn wlan_type(&mut self) -> PResult<u32> {
        let span = self.span_here();
        match self.peek().copied() {
            Some(Tok::Num(n)) => {
                self.bump();
                if n & !0x0c != 0 {
                    return Err(self.err(format!("invalid 802.11 type value 0x{n:02x}"), span));
                }
                Ok(n)
            }
            Some(Tok::Id) => {
                let name = self.text();
                self.bump();
                WLAN_TYPES
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(name))
                    .map(|&(_, v)| v)
                    .ok_or_else(|| self.err(format!("unknown 802.11 type name \"{name}\""), span))
            }
            _ => Err(self.unexpected()),
        }
    }

    /// The operand of `subtype` after `type ty`: a number of the subtype bits only (0xf0), or
    /// a subtype name of that type.
    fn wlan_subtype_of(&mut self, ty: u32) -> PResult<u32> {
        let span = self.span_here();
        match self.peek().copied() {
            Some(Tok::Num(n)) => {
                self.bump();
                if n & !0xf0 != 0 {
                    return Err(self.err(format!("invalid 802.11 subtype value 0x{n:02x}"), span));
                }
                Ok(n)
            }
            Some(Tok::Id) => {
                let name = self.text();
                self.bump();
                let Some((_, table)) = WLAN_SUBTYPES.iter().find(|(t, _)| *t == ty) else {
                    return Err(self.err("unknown 802.11 type", span));
                };
                table
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(name))
                    .map(|&(_, v)| v)
                    .ok_or_else(|| {
                        self.err(format!("unknown 802.11 subtype name \"{name}\""), span)
                    })
            }
            _ => Err(self.unexpected()),
        }
    }

    /// The value of an ATM or SS7 field: `N`, `relop N`, or `(N or N …)`.
    fn field_value(&mut self) -> PResult<FieldValue> {
        if let Some(op) = self.peek().and_then(rel_op) {
            self.bump();
            return Ok(FieldValue::Rel(op, self.literal_num("field")?));
        }
        let mut values = Vec::new();
        if self.eat(&Tok::Op(Op::LParen)) {
            values.push(self.literal_num("field")?);
            while matches!(self.peek(), Some(Tok::Kw(Kw::Or))) {
                self.bump();
                values.push(self.literal_num("field")?);
            }
            self.expect(Tok::Op(Op::RParen), "')'")?;
        } else {
            values.push(self.literal_num("field")?);
        }
        Ok(FieldValue::OneOf(values))
    }
}

/// pflog reason codes by name, in code order (libpcap's `pflog_reasons` on Linux).
const PF_REASONS: [&str; 15] = [
    "match",
    "bad-offset",
    "fragment",
    "short",
    "normalize",
    "memory",
    "bad-timestamp",
    "congestion",
    "ip-option",
    "proto-cksum",
    "state-mismatch",
    "state-insert",
    "state-limit",
    "src-limit",
    "synproxy",
];

/// pflog actions by name (libpcap's `pflog_actions` on Linux).
const PF_ACTIONS: [(&str, u32); 13] = [
    ("pass", 0),
    ("accept", 0),
    ("drop", 1),
    ("block", 1),
    ("scrub", 2),
    ("noscrub", 3),
    ("nat", 4),
    ("nonat", 5),
    ("binat", 6),
    ("nobinat", 7),
    ("rdr", 8),
    ("nordr", 9),
    ("synproxy-drop", 10),
];

/// 802.11 frame types by name (libpcap's `ieee80211_types`).
const WLAN_TYPES: [(&str, u32); 5] = [
    ("data", 0x08),
    ("mgt", 0x00),
    ("management", 0x00),
    ("ctl", 0x04),
    ("control", 0x04),
];

/// 802.11 subtypes by name for each type, in libpcap's order (management, control, data).
const WLAN_SUBTYPES: [(u32, &[(&str, u32)]); 3] = [
    (
        0x00,
        &[
            ("assocreq", 0x00),
            ("assoc-req", 0x00),
            ("assocresp", 0x10),
            ("assoc-resp", 0x10),
            ("reassocreq", 0x20),
            ("reassoc-req", 0x20),
            ("reassocresp", 0x30),
            ("reassoc-resp", 0x30),
            ("probereq", 0x40),
            ("probe-req", 0x40),
            ("proberesp", 0x50),
            ("probe-resp", 0x50),
            ("beacon", 0x80),
            ("atim", 0x90),
            ("disassoc", 0xa0),
            ("disassociation", 0xa0),
            ("auth", 0xb0),
            ("authentication", 0xb0),
            ("deauth", 0xc0),
            ("deauthentication", 0xc0),
        ],
    ),
    (
        0x04,
        &[
            ("ps-poll", 0xa0),
            ("rts", 0xb0),
            ("cts", 0xc0),
            ("ack", 0xd0),
            ("cf-end", 0xe0),
            ("cf-end-ack", 0xf0),
        ],
    ),
    (
        0x08,
        &[
            ("data", 0x00),
            ("data-cf-ack", 0x10),
            ("data-cf-poll", 0x20),
            ("data-cf-ack-poll", 0x30),
            ("null", 0x40),
            ("cf-ack", 0x50),
            ("cf-poll", 0x60),
            ("cf-ack-poll", 0x70),
            ("qos-data", 0x80),
            ("qos-data-cf-ack", 0x90),
            ("qos-data-cf-poll", 0xa0),
            ("qos-data-cf-ack-poll", 0xb0),
            ("qos", 0xc0),
            ("qos-cf-poll", 0xe0),
            ("qos-cf-ack-poll", 0xf0),
        ],
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn show(e: &Expr<'_>) -> String {
        match &e.kind {
            ExprKind::And(ab) => format!("({} and {})", show(&ab[0]), show(&ab[1])),
            ExprKind::Or(ab) => format!("({} or {})", show(&ab[0]), show(&ab[1])),
            ExprKind::Not(a) => format!("not {}", show(a)),
            ExprKind::Primitive(p) => {
                let q = match p.qual {
                    Inherited::Undefined => "?".to_string(),
                    Inherited::Qual(q) => format!(
                        "{}/{}/{}",
                        q.proto.map_or("-", |p| p.name()),
                        q.dir.map_or("-".to_string(), |d| format!("{d:?}")),
                        q.addr.map_or("-".to_string(), |a| format!("{a:?}"))
                    ),
                };
                format!("[{q} {:?}]", p.value)
            }
            ExprKind::Proto(p) => p.name().to_string(),
            ExprKind::Relation(op, a, b) => format!("({} {op:?} {})", arith(a), arith(b)),
            ExprKind::Other(o) => format!("{o:?}"),
        }
    }

    fn arith(a: &Arith) -> String {
        match a {
            Arith::Num(n, _) => n.to_string(),
            Arith::Len(_) => "len".into(),
            Arith::Load {
                proto, index, size, ..
            } => {
                format!("{}[{}:{}]", proto.name(), arith(index), size.unwrap_or(1))
            }
            Arith::Bin(op, a, b, _) => format!("({} {op:?} {})", arith(a), arith(b)),
            Arith::Neg(a, _) => format!("-{}", arith(a)),
        }
    }

    fn p(s: &str) -> String {
        show(&parse(s).unwrap().unwrap())
    }

    fn perr(s: &str) -> String {
        parse(s).unwrap_err().to_string()
    }

    #[test]
    fn and_or_have_equal_precedence() {
        assert_eq!(p("ip or ip6 and tcp"), "((ip or ip6) and tcp)");
        assert_eq!(p("ip and ip6 or tcp"), "((ip and ip6) or tcp)");
        assert_eq!(p("not ip and tcp"), "(not ip and tcp)");
        assert_eq!(p("ip && !tcp || udp"), "((ip and not tcp) or udp)");
    }

    #[test]
    fn qualifiers_are_inherited() {
        assert_eq!(
            p("tcp dst port ftp or ftp-data or domain"),
            "(([tcp/Dst/Port Name(\"ftp\")] or [tcp/Dst/Port Name(\"ftp-data\")]) or [tcp/Dst/Port Name(\"domain\")])"
        );
        assert_eq!(
            p("tcp port 80 and not 81"),
            "([tcp/-/Port Num(80)] and not [tcp/-/Port Num(81)])"
        );
        assert_eq!(
            p("tcp port 80 or (81 or 82)"),
            "([tcp/-/Port Num(80)] or ([tcp/-/Port Num(81)] or [tcp/-/Port Num(82)]))"
        );
        assert_eq!(
            p("tcp port 80 and ip or 81"),
            "(([tcp/-/Port Num(80)] and ip) or [? Num(81)])"
        );
        assert_eq!(
            p("tcp port 80 and (host 1.2.3.4) or 81"),
            "(([tcp/-/Port Num(80)] and [-/-/Host Ipv4(\"1.2.3.4\")]) or [tcp/-/Port Num(81)])"
        );
        assert_eq!(
            p("ip proto 6 or 17"),
            "([ip/-/Proto Num(6)] or [ip/-/Proto Num(17)])"
        );
        assert_eq!(
            p("src or dst host 1.1.1.1"),
            "[-/SrcOrDst/Host Ipv4(\"1.1.1.1\")]"
        );
        assert_eq!(p("host not 1.1.1.1"), "not [-/-/Host Ipv4(\"1.1.1.1\")]");
    }

    #[test]
    fn values() {
        assert_eq!(p("net 10.0.0.0/8"), "[-/-/Net Ipv4Prefix(\"10.0.0.0\", 8)]");
        assert_eq!(
            p("net 10.0.0.0 mask 255.0.0.0"),
            "[-/-/Net Ipv4Mask(\"10.0.0.0\", \"255.0.0.0\")]"
        );
        assert_eq!(
            p("ip6 net fe80::/10"),
            "[ip6/-/Net Ipv6Prefix(\"fe80::\", 10)]"
        );
        assert_eq!(
            p("ether host aa:bb:cc:dd:ee:ff"),
            "[link/-/Host Mac(\"aa:bb:cc:dd:ee:ff\")]"
        );
        assert_eq!(p("ether proto \\ip"), "[link/-/Proto Name(\"ip\")]");
        assert_eq!(p("portrange 1-1024"), "[-/-/Portrange Name(\"1-1024\")]");
    }

    #[test]
    fn arithmetic() {
        assert_eq!(p("1 + 2 % 3 = 0"), "((1 Add (2 Mod 3)) Eq 0)");
        assert_eq!(p("2 % 3 + 4 = 0"), "((2 Mod (3 Add 4)) Eq 0)");
        assert_eq!(p("2 * 3 % 4 = 0"), "((2 Mul (3 Mod 4)) Eq 0)");
        assert_eq!(p("-2 % 3 = 0"), "(-(2 Mod 3) Eq 0)");
        assert_eq!(
            p("1 | 2 & 3 << 4 + 5 * 6 = 0"),
            "((1 Or (2 And (3 Shl (4 Add (5 Mul 6))))) Eq 0)"
        );
        assert_eq!(
            p("ip[2:2] - ((ip[0]&0xf)<<2) > 40"),
            "((ip[2:2] Sub ((ip[0:1] And 15) Shl 2)) Gt 40)"
        );
        assert_eq!(
            p("tcp[tcpflags] & (tcp-syn|tcp-fin) != 0"),
            "((tcp[13:1] And (2 Or 1)) Ne 0)"
        );
        assert_eq!(p("(ip[0]) = 1"), "(ip[0:1] Eq 1)");
        assert_eq!(p("(ip[0] = 1)"), "(ip[0:1] Eq 1)");
        assert_eq!(p("len > 100 or 1 = 1"), "((len Gt 100) or (1 Eq 1))");
    }

    #[test]
    fn keyword_primitives() {
        assert_eq!(
            p("vlan 10 and vlan (20)"),
            "(Vlan(Some(10)) and Vlan(Some(20)))"
        );
        assert_eq!(p("vlan or ip"), "(Vlan(None) or ip)");
        assert_eq!(p("ether broadcast"), "Broadcast(Some(Link))");
        assert_eq!(p("byte 8 | 5"), "Byte(8, Or, 5)");
        assert_eq!(p("llc rnr"), "Llc(Some(\"rnr\"))");
        assert_eq!(p("less 100"), "Less(100)");
    }

    #[test]
    fn syntax_errors_point_at_the_token() {
        assert_eq!(
            perr("tcp port"),
            "syntax error: unexpected end of expression\n  tcp port\n          ^"
        );
        assert_eq!(
            perr("1.2.3.4"),
            "syntax error: unexpected '1.2.3.4'\n  1.2.3.4\n  ^^^^^^^"
        );
        assert_eq!(
            perr("ip proto tcp"),
            "syntax error: unexpected 'tcp'\n  ip proto tcp\n           ^^^"
        );
        assert_eq!(
            perr("src or ip"),
            "syntax error: expected 'dst', found 'ip'\n  src or ip\n         ^^"
        );
        assert_eq!(
            perr("(tcp"),
            "syntax error: expected ')' before the end of the expression\n  (tcp\n      ^"
        );
        assert_eq!(
            perr("byte 1 != 2"),
            "syntax error: 'byte' takes one of the operators & | < > =\n  byte 1 != 2\n         ^^"
        );
        assert!(perr("pppoed 1234").starts_with("syntax error: unexpected '1234'"));
        assert!(perr("net 10/8").starts_with("syntax error"));
    }

    #[test]
    fn nesting_is_limited() {
        let deep = format!("{}ip{}", "(".repeat(10_000), ")".repeat(10_000));
        let e = parse(&deep).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit);
        let nots = format!("{}ip", "not ".repeat(10_000));
        assert_eq!(parse(&nots).unwrap_err().kind(), ErrorKind::Limit);
        let minus = format!("{}1 = 1", "-".repeat(10_000));
        assert_eq!(parse(&minus).unwrap_err().kind(), ErrorKind::Limit);
        assert!(parse(&format!("{}ip{}", "(".repeat(50), ")".repeat(50))).is_ok());
    }

    #[test]
    fn empty_is_accept_all() {
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(parse("  \t").unwrap(), None);
    }
}
