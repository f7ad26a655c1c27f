//! FPL text → [`crate::ast`]: a hand-written lexer and a recursive-descent parser with C
//! operator precedence.
//!
//! Keywords (`IF`, `THEN`, `ELSE`, `FI`, `FOR`, `ROF`, `BREAK`, `RETURN`, `HASH`, `EXTERN`,
//! `PKT`, `R`, `MEM`/`M`) are case-insensitive, because the paper's own figures write `Hash` and
//! `M[…]`. Statement separators (`;`) are optional. Nesting is bounded: expressions deeper than
//! [`MAX_DEPTH`] and statements nested deeper than [`MAX_NESTING`] are errors, never a stack
//! overflow.

use crate::ast::*;
use crate::error::{Error, ErrorKind, Span};

/// Deepest expression tree accepted (a chain `1+1+…` counts one level per operator).
pub const MAX_DEPTH: u32 = 200;
/// Deepest nesting of parentheses, brackets, calls and prefix operators accepted (each level
/// costs the recursive-descent parser a dozen stack frames).
pub const MAX_NESTING_EXPR: u32 = 40;
/// Deepest nesting of `IF`/`FOR` statements accepted.
pub const MAX_NESTING: u32 = 32;
/// Largest source accepted, in bytes.
pub const MAX_SOURCE: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Num(u64),
    Ident(String),
    Str(String),
    P(&'static str),
    Eof,
}

struct Token {
    tok: Tok,
    span: Span,
}

const PUNCT: [&str; 41] = [
    "<<=", ">>=", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "==", "!=", "<=",
    ">=", "&&", "||", "<<", ">>", "(", ")", "[", "]", ",", ";", ".", "+", "-", "*", "/", "%", "=",
    "<", ">", "!", "&", "|", "^", "~", ":",
];

fn lex(src: &str) -> Result<Vec<Token>, Error> {
    let mut out = Vec::new();
    let bytes = src.as_bytes();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    while i < bytes.len() {
        let c = bytes[i];
        let start = Span {
            start: i,
            end: i + 1,
            line,
            col,
        };
        if c == b'\n' {
            i += 1;
            line += 1;
            col = 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if bytes[i..].starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let begin = i;
        let tok = if c.is_ascii_digit() {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let text = src[begin..i].replace('_', "");
            let v = if let Some(h) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
                u64::from_str_radix(h, 16)
            } else if let Some(b) = text.strip_prefix("0b").or_else(|| text.strip_prefix("0B")) {
                u64::from_str_radix(b, 2)
            } else {
                text.parse::<u64>()
            };
            match v {
                Ok(v) => Tok::Num(v),
                Err(_) => {
                    let sp = Span { end: i, ..start };
                    return Err(Error::new(
                        ErrorKind::Syntax,
                        Some(sp),
                        format!(
                            "bad number `{}` (an unsigned 64-bit integer is expected)",
                            &src[begin..i]
                        ),
                    ));
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            Tok::Ident(src[begin..i].to_string())
        } else if c == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                i += 1;
            }
            if i >= bytes.len() || bytes[i] != b'"' {
                return Err(Error::new(
                    ErrorKind::Syntax,
                    Some(start),
                    "unterminated string",
                ));
            }
            i += 1;
            Tok::Str(src[begin + 1..i - 1].to_string())
        } else if let Some(p) = PUNCT.iter().find(|p| bytes[i..].starts_with(p.as_bytes())) {
            i += p.len();
            Tok::P(p)
        } else {
            let ch = src[i..].chars().next().unwrap_or('?');
            let sp = Span {
                end: i + ch.len_utf8(),
                ..start
            };
            return Err(Error::new(
                ErrorKind::Syntax,
                Some(sp),
                format!("unexpected character `{}`", ch.escape_debug()),
            ));
        };
        col += src[begin..i].chars().count() as u32;
        out.push(Token {
            tok,
            span: Span { end: i, ..start },
        });
    }
    let end = Span {
        start: src.len(),
        end: src.len(),
        line,
        col,
    };
    out.push(Token {
        tok: Tok::Eof,
        span: end,
    });
    Ok(out)
}

fn kw(t: &Tok, k: &str) -> bool {
    matches!(t, Tok::Ident(s) if s.eq_ignore_ascii_case(k))
}

const KEYWORDS: [&str; 14] = [
    "IF", "THEN", "ELSE", "FI", "FOR", "ROF", "BREAK", "RETURN", "HASH", "EXTERN", "PKT", "R",
    "MEM", "M",
];

fn describe(t: &Tok) -> String {
    match t {
        Tok::Num(n) => format!("number `{n}`"),
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Str(s) => format!("string \"{s}\""),
        Tok::P(p) => format!("`{p}`"),
        Tok::Eof => "end of input".to_string(),
    }
}

fn mk(kind: ExprKind, span: Span) -> Result<Expr, Error> {
    let depth = 1 + match &kind {
        ExprKind::Num(_) | ExprKind::Name(_) | ExprKind::Macro(_) => 0,
        ExprKind::Reg(e) | ExprKind::Mem(e) | ExprKind::Unary(_, e) => e.depth,
        ExprKind::Pkt { off, sub, .. } => off.depth.max(sub.as_ref().map_or(0, |s| s.index.depth)),
        ExprKind::Binary(_, a, b) => a.depth.max(b.depth),
        ExprKind::Hash(a, b, c) => a.depth.max(b.depth).max(c.depth),
        ExprKind::Extern { input, output, .. } => input.depth.max(output.depth),
    };
    if depth > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::Nesting,
            Some(span),
            format!("expression nested deeper than {MAX_DEPTH} levels"),
        ));
    }
    Ok(Expr { kind, span, depth })
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    /// `IF`/`FOR` nesting.
    nesting: u32,
    /// Bracket, parenthesis and prefix-operator nesting.
    expr_nesting: u32,
}

/// Parses a whole program.
pub fn parse(src: &str) -> Result<Vec<Stmt>, Error> {
    if src.len() > MAX_SOURCE {
        return Err(Error::new(
            ErrorKind::Invalid,
            None,
            format!(
                "source of {} bytes exceeds the {MAX_SOURCE}-byte limit",
                src.len()
            ),
        ));
    }
    let mut p = Parser {
        toks: lex(src)?,
        pos: 0,
        nesting: 0,
        expr_nesting: 0,
    };
    let body = p.stmts(&[])?;
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected("a statement"));
    }
    Ok(body)
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn span(&self) -> Span {
        self.toks[self.pos].span
    }

    fn prev_span(&self) -> Span {
        self.toks[self.pos.saturating_sub(1)].span
    }

    fn bump(&mut self) -> Span {
        let s = self.span();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        s
    }

    fn unexpected(&self, want: &str) -> Error {
        Error::new(
            ErrorKind::Syntax,
            Some(self.span()),
            format!("expected {want}, found {}", describe(self.peek())),
        )
    }

    fn eat(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Tok::P(q) if *q == p) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &str) -> Result<Span, Error> {
        if matches!(self.peek(), Tok::P(q) if *q == p) {
            Ok(self.bump())
        } else {
            Err(self.unexpected(&format!("`{p}`")))
        }
    }

    fn eat_kw(&mut self, k: &str) -> bool {
        if kw(self.peek(), k) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_kw(&mut self, k: &str) -> Result<Span, Error> {
        if kw(self.peek(), k) {
            Ok(self.bump())
        } else {
            Err(self.unexpected(&format!("`{k}`")))
        }
    }

    /// Statements up to (not including) one of the keywords in `end` or the end of input.
    fn stmts(&mut self, end: &[&str]) -> Result<Vec<Stmt>, Error> {
        let mut out = Vec::new();
        loop {
            while self.eat(";") {}
            let t = self.peek();
            if *t == Tok::Eof || end.iter().any(|k| kw(t, k)) {
                return Ok(out);
            }
            out.push(self.stmt()?);
        }
    }

    fn nest(&mut self, span: Span) -> Result<(), Error> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(Error::new(
                ErrorKind::Nesting,
                Some(span),
                format!("statements nested deeper than {MAX_NESTING} levels"),
            ));
        }
        Ok(())
    }

    fn stmt(&mut self) -> Result<Stmt, Error> {
        let t = self.peek().clone();
        if kw(&t, "IF") {
            let span = self.bump();
            self.nest(span)?;
            let cond = self.expr()?;
            self.expect_kw("THEN")?;
            let then = self.stmts(&["ELSE", "FI"])?;
            let els = if self.eat_kw("ELSE") {
                self.stmts(&["FI"])?
            } else {
                Vec::new()
            };
            self.expect_kw("FI")?;
            self.nesting -= 1;
            return Ok(Stmt::If {
                cond,
                then,
                els,
                span,
            });
        }
        if kw(&t, "FOR") {
            let span = self.bump();
            self.nest(span)?;
            self.expect("(")?;
            let init = self.simple()?;
            self.expect(";")?;
            let test = self.expr()?;
            self.expect(";")?;
            let update = self.simple()?;
            self.expect(")")?;
            let body = self.stmts(&["ROF"])?;
            self.expect_kw("ROF")?;
            self.nesting -= 1;
            return Ok(Stmt::For {
                init: Box::new(init),
                test,
                update: Box::new(update),
                body,
                span,
            });
        }
        if kw(&t, "BREAK") {
            return Ok(Stmt::Break(self.bump()));
        }
        if kw(&t, "RETURN") {
            let span = self.bump();
            let e = self.expr()?;
            return Ok(Stmt::Return(e, span));
        }
        if kw(&t, "EXTERN") || kw(&t, "HASH") {
            return Ok(Stmt::Expr(self.expr()?));
        }
        self.simple()
    }

    /// An assignment or increment.
    fn simple(&mut self) -> Result<Stmt, Error> {
        let start = self.span();
        if let Tok::P(p @ ("++" | "--")) = self.peek().clone() {
            self.bump();
            let place = self.place()?;
            let span = start.to(place.span);
            return Ok(Stmt::Step {
                place,
                down: p == "--",
                span,
            });
        }
        let place = self.place()?;
        let op = match self.peek().clone() {
            Tok::P(p @ ("++" | "--")) => {
                let end = self.bump();
                return Ok(Stmt::Step {
                    place,
                    down: p == "--",
                    span: start.to(end),
                });
            }
            Tok::P("=") => None,
            Tok::P("+=") => Some(BinOp::Add),
            Tok::P("-=") => Some(BinOp::Sub),
            Tok::P("*=") => Some(BinOp::Mul),
            Tok::P("/=") => Some(BinOp::Div),
            Tok::P("%=") => Some(BinOp::Rem),
            Tok::P("&=") => Some(BinOp::And),
            Tok::P("|=") => Some(BinOp::Or),
            Tok::P("^=") => Some(BinOp::Xor),
            Tok::P("<<=") => Some(BinOp::Shl),
            Tok::P(">>=") => Some(BinOp::Shr),
            _ => return Err(self.unexpected("an assignment operator, `++` or `--`")),
        };
        self.bump();
        let value = self.expr()?;
        let span = start.to(value.span);
        Ok(Stmt::Assign {
            place,
            op,
            value,
            span,
        })
    }

    fn place(&mut self) -> Result<Expr, Error> {
        let t = self.peek().clone();
        if kw(&t, "R") || kw(&t, "MEM") || kw(&t, "M") {
            self.primary()
        } else {
            Err(self.unexpected("a statement (`R[n]`, `MEM[n]`, IF, FOR, RETURN, BREAK or EXTERN)"))
        }
    }

    fn expr(&mut self) -> Result<Expr, Error> {
        self.binary(0)
    }

    /// The binary operator ahead and its precedence (0 `||` … 9 `*`).
    fn binop(&self) -> Option<(BinOp, usize)> {
        let Tok::P(p) = self.peek() else {
            return None;
        };
        Some(match *p {
            "||" => (BinOp::LOr, 0),
            "&&" => (BinOp::LAnd, 1),
            "|" => (BinOp::Or, 2),
            "^" => (BinOp::Xor, 3),
            "&" => (BinOp::And, 4),
            "==" => (BinOp::Eq, 5),
            "!=" => (BinOp::Ne, 5),
            "<" => (BinOp::Lt, 6),
            "<=" => (BinOp::Le, 6),
            ">" => (BinOp::Gt, 6),
            ">=" => (BinOp::Ge, 6),
            "<<" => (BinOp::Shl, 7),
            ">>" => (BinOp::Shr, 7),
            "+" => (BinOp::Add, 8),
            "-" => (BinOp::Sub, 8),
            "*" => (BinOp::Mul, 9),
            "/" => (BinOp::Div, 9),
            "%" => (BinOp::Rem, 9),
            _ => return None,
        })
    }

    /// Precedence climbing: operators of precedence `min` or higher, left-associative.
    fn binary(&mut self, min: usize) -> Result<Expr, Error> {
        let mut lhs = self.unary()?;
        while let Some((op, prec)) = self.binop() {
            if prec < min {
                break;
            }
            self.bump();
            let rhs = self.binary(prec + 1)?;
            let span = lhs.span.to(rhs.span);
            lhs = mk(ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span)?;
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, Error> {
        let op = match self.peek() {
            Tok::P("-") => UnOp::Neg,
            Tok::P("!") => UnOp::Not,
            Tok::P("~") => UnOp::BitNot,
            Tok::P("+") => {
                self.bump();
                return self.unary();
            }
            _ => return self.primary(),
        };
        let start = self.bump();
        self.nest_expr(start)?;
        let e = self.unary()?;
        self.expr_nesting -= 1;
        let span = start.to(e.span);
        mk(ExprKind::Unary(op, Box::new(e)), span)
    }

    /// Bounds recursion through prefix operators and brackets before any node exists.
    fn nest_expr(&mut self, span: Span) -> Result<(), Error> {
        self.expr_nesting += 1;
        if self.expr_nesting > MAX_NESTING_EXPR {
            return Err(Error::new(
                ErrorKind::Nesting,
                Some(span),
                format!("expression nested deeper than {MAX_NESTING_EXPR} levels"),
            ));
        }
        Ok(())
    }

    fn bracket(&mut self) -> Result<Expr, Error> {
        let open = self.expect("[")?;
        self.nest_expr(open)?;
        let e = self.expr()?;
        self.expr_nesting -= 1;
        self.expect("]")?;
        Ok(e)
    }

    fn args(&mut self, n: usize) -> Result<Vec<Expr>, Error> {
        let open = self.expect("(")?;
        self.nest_expr(open)?;
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            if i > 0 {
                self.expect(",")?;
            }
            v.push(self.expr()?);
        }
        self.expr_nesting -= 1;
        self.expect(")")?;
        Ok(v)
    }

    /// `PKT.…` after `PKT` (out of line to keep `primary`'s frame small).
    #[inline(never)]
    fn pkt(&mut self, start: Span) -> Result<Expr, Error> {
        self.expect(".")?;
        let (field, fspan) = match self.peek().clone() {
            Tok::Ident(f) => (f.to_ascii_uppercase(), self.bump()),
            _ => return Err(self.unexpected("a packet field (`B`, `W`, `DW`, `IP_PROTO`…)")),
        };
        let (width, signed) = match field.as_str() {
            "B" | "U8" => (Width::B, false),
            "W" | "U16" => (Width::W, false),
            "DW" | "U32" => (Width::DW, false),
            "QW" | "U64" => (Width::QW, false),
            "SB" | "S8" => (Width::B, true),
            "SW" | "S16" => (Width::W, true),
            "SDW" | "S32" => (Width::DW, true),
            _ => {
                if !crate::check::is_macro(&field) {
                    return Err(Error::new(
                        ErrorKind::Syntax,
                        Some(fspan),
                        format!("unknown packet field `PKT.{field}`"),
                    ));
                }
                return mk(ExprKind::Macro(field), start.to(fspan));
            }
        };
        let off = self.bracket()?;
        let mut sub = None;
        if self.eat(".") {
            let sspan = self.span();
            let name = match self.peek().clone() {
                Tok::Ident(f) => f.to_ascii_uppercase(),
                _ => {
                    return Err(
                        self.unexpected("a sub-field (`U1`, `U4`, `U8`, `U16`, `U32`, `S…`)")
                    );
                }
            };
            self.bump();
            let (signed, bits) = match name.split_at(1) {
                ("U", b) => (false, b.parse::<u8>().ok()),
                ("S", b) => (true, b.parse::<u8>().ok()),
                _ => (false, None),
            };
            let bits = match bits {
                Some(b @ (1 | 2 | 4 | 8 | 16 | 32)) if b < width.bytes() * 8 => b,
                _ => {
                    return Err(Error::new(
                        ErrorKind::Syntax,
                        Some(sspan),
                        format!(
                            "bad sub-field `{name}` of a {}-bit load (U1, U2, U4, U8, U16, U32 or S…, narrower than the load)",
                            width.bytes() * 8
                        ),
                    ));
                }
            };
            let index = self.bracket()?;
            sub = Some(Sub {
                bits,
                signed,
                index: Box::new(index),
            });
        }
        mk(
            ExprKind::Pkt {
                width,
                signed,
                off: Box::new(off),
                sub,
            },
            start.to(self.prev_span()),
        )
    }

    fn primary(&mut self) -> Result<Expr, Error> {
        let t = self.peek().clone();
        let start = self.span();
        match t {
            Tok::Num(n) => {
                self.bump();
                mk(ExprKind::Num(n), start)
            }
            Tok::P("(") => {
                self.bump();
                self.nest_expr(start)?;
                let e = self.expr()?;
                self.expr_nesting -= 1;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Ident(ref s) if s.eq_ignore_ascii_case("R") => {
                self.bump();
                let i = self.bracket()?;
                mk(ExprKind::Reg(Box::new(i)), start.to(self.prev_span()))
            }
            Tok::Ident(ref s) if s.eq_ignore_ascii_case("MEM") || s.eq_ignore_ascii_case("M") => {
                self.bump();
                let i = self.bracket()?;
                mk(ExprKind::Mem(Box::new(i)), start.to(self.prev_span()))
            }
            Tok::Ident(ref s) if s.eq_ignore_ascii_case("HASH") => {
                self.bump();
                let mut a = self.args(3)?.into_iter();
                let (Some(x), Some(y), Some(z)) = (a.next(), a.next(), a.next()) else {
                    return Err(self.unexpected("three arguments"));
                };
                mk(
                    ExprKind::Hash(Box::new(x), Box::new(y), Box::new(z)),
                    start.to(self.prev_span()),
                )
            }
            Tok::Ident(ref s) if s.eq_ignore_ascii_case("EXTERN") => {
                self.bump();
                let open = self.expect("(")?;
                self.nest_expr(open)?;
                let (name, name_span) = match self.peek().clone() {
                    Tok::Ident(n) | Tok::Str(n) => (n, self.bump()),
                    _ => return Err(self.unexpected("an external function's name")),
                };
                self.expect(",")?;
                let input = self.expr()?;
                self.expect(",")?;
                let output = self.expr()?;
                self.expr_nesting -= 1;
                self.expect(")")?;
                mk(
                    ExprKind::Extern {
                        name,
                        name_span,
                        input: Box::new(input),
                        output: Box::new(output),
                    },
                    start.to(self.prev_span()),
                )
            }
            Tok::Ident(ref s) if s.eq_ignore_ascii_case("PKT") => {
                self.bump();
                self.pkt(start)
            }
            Tok::Ident(ref s) => {
                if KEYWORDS.iter().any(|k| s.eq_ignore_ascii_case(k)) {
                    return Err(self.unexpected("an expression"));
                }
                self.bump();
                mk(ExprKind::Name(s.clone()), start)
            }
            _ => Err(self.unexpected("an expression")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_is_c() {
        let p = parse("R[0] = 1 + 2 * 3 << 1 == 14 && 1").unwrap();
        let Stmt::Assign { value, .. } = &p[0] else {
            panic!()
        };
        assert!(matches!(value.kind, ExprKind::Binary(BinOp::LAnd, _, _)));
    }

    #[test]
    fn paper_figures_parse() {
        parse("IF (PKT.IP_PROTO == PROTO_TCP) THEN R[0] = Hash(14,12,256); MEM[ R[0] ]++; FI")
            .unwrap();
        parse("MEM[R[0]]=EXTERN(\"GetDynTCPDPortFromRTSP\",0,0); R[0]++; RETURN TRUE;").unwrap();
        parse("R[1] = PKT.B[3].U1[7] + PKT.W[R[2]].U8[1] + PKT.DW[0].S16[1]").unwrap();
    }

    #[test]
    fn errors_have_positions() {
        let e = parse("R[0] = 1;\nR[1] = (2 + ;").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2, column 13: expected an expression, found `;`"
        );
        let e = parse("R[0] = 1 $ 2").unwrap_err();
        assert_eq!(e.to_string(), "line 1, column 10: unexpected character `$`");
        let e = parse("IF (1) THEN R[0]=1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 19: expected `FI`, found end of input"
        );
    }

    #[test]
    fn deep_input_is_an_error_not_a_crash() {
        let deep = format!("R[0] = {}1{}", "(".repeat(100_000), ")".repeat(100_000));
        assert_eq!(parse(&deep).unwrap_err().kind(), ErrorKind::Nesting);
        let long = format!("R[0] = 1{}", "+1".repeat(100_000));
        assert_eq!(parse(&long).unwrap_err().kind(), ErrorKind::Nesting);
        let neg = format!("R[0] = {}1", "~".repeat(100_000));
        assert_eq!(parse(&neg).unwrap_err().kind(), ErrorKind::Nesting);
        let ifs = "IF (1) THEN ".repeat(1000);
        assert_eq!(parse(&ifs).unwrap_err().kind(), ErrorKind::Nesting);
        let mems = format!("R[0] = {}0{}", "MEM[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(parse(&mems).unwrap_err().kind(), ErrorKind::Nesting);
    }
}
