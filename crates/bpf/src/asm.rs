//! Text forms of classic BPF programs: the three formats of `tcpdump -d`, `-dd` and `-ddd`.
//!
//! Printing is byte for byte what libpcap 1.10's `bpf_dump` prints (including its trailing
//! spaces and its `%d` rendering of large constants as negative numbers), so netsift's output can
//! be diffed against tcpdump's and fed to `iptables -m bpf --bytecode` or `tc … bpf bytecode`.
//!
//! Parsing accepts what printing produces, and a little more: `-ddd` text may separate
//! instructions by commas (the one-line form `iptables` and `tc` take); `-d` text may use decimal
//! or hexadecimal constants anywhere, may omit the `(NNN)` line numbers, and may carry comments
//! from `;` to the end of a line. Errors name the line and column.

use std::fmt::{self, Write as _};

use crate::insn::{Insn, Program, code};

/// A text format of a BPF program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `tcpdump -d`: human-readable assembly, one instruction per line.
    Asm,
    /// `tcpdump -dd`: a C array initialiser, `{ 0x28, 0, 0, 0x0000000c },`.
    C,
    /// `tcpdump -ddd`: decimal, the count on the first line, then `code jt jf k` per line.
    Decimal,
}

/// A program text could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsmError {
    line: usize,
    column: usize,
    message: String,
}

impl AsmError {
    fn new(line: usize, column: usize, message: impl Into<String>) -> AsmError {
        AsmError {
            line,
            column,
            message: message.into(),
        }
    }

    /// The 1-based line of the problem.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The 1-based column of the problem.
    pub fn column(&self) -> usize {
        self.column
    }

    /// What is wrong, without the position.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for AsmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for AsmError {}

/// Names of the Linux ancillary loads, indexed by `(k - SKF_AD_OFF) / 4`, as `bpf_image` prints
/// them.
const ANCILLARY: [&str; 16] = [
    "proto",
    "type",
    "ifidx",
    "nla",
    "nlan",
    "mark",
    "queue",
    "hatype",
    "rxhash",
    "cpu",
    "xor_x",
    "vlan_tci",
    "vlanp",
    "poff",
    "random",
    "vlan_tpid",
];

/// Print `program` in `format`, exactly as libpcap's `bpf_dump` does (every line ends in `\n`).
pub fn dump(program: &Program, format: Format) -> String {
    let mut out = String::new();
    let insns = program.insns();
    match format {
        Format::Decimal => {
            let _ = writeln!(out, "{}", insns.len());
            for i in insns {
                let _ = writeln!(out, "{} {} {} {}", i.code, i.jt, i.jf, i.k);
            }
        }
        Format::C => {
            for i in insns {
                let _ = writeln!(
                    out,
                    "{{ 0x{:x}, {}, {}, 0x{:08x} }},",
                    i.code, i.jt, i.jf, i.k
                );
            }
        }
        Format::Asm => {
            for (n, i) in insns.iter().enumerate() {
                out.push_str(&image(i, n));
                out.push('\n');
            }
        }
    }
    out
}

/// One instruction in `tcpdump -d` form, as libpcap's `bpf_image(insn, n)` renders it (no
/// newline). `n` is the instruction's index, used for the line number and jump targets.
pub fn image(insn: &Insn, n: usize) -> String {
    use code::*;
    let k = insn.k;
    let ks = k as i32; // libpcap prints with %d
    let (op, operand): (&str, String) = match insn.code {
        c if c == RET | K => ("ret", format!("#{ks}")),
        c if c == RET | A => ("ret", String::new()),
        c if c == LD | W | ABS => ("ld", abs_operand(k)),
        c if c == LD | H | ABS => ("ldh", abs_operand(k)),
        c if c == LD | B | ABS => ("ldb", abs_operand(k)),
        c if c == LD | W | LEN => ("ld", "#pktlen".into()),
        c if c == LD | W | IND => ("ld", format!("[x + {ks}]")),
        c if c == LD | H | IND => ("ldh", format!("[x + {ks}]")),
        c if c == LD | B | IND => ("ldb", format!("[x + {ks}]")),
        c if c == LD | IMM => ("ld", format!("#0x{k:x}")),
        c if c == LDX | IMM => ("ldx", format!("#0x{k:x}")),
        c if c == LDX | B | MSH => ("ldxb", format!("4*([{ks}]&0xf)")),
        c if c == LD | MEM => ("ld", format!("M[{ks}]")),
        c if c == LDX | MEM => ("ldx", format!("M[{ks}]")),
        c if c == ST => ("st", format!("M[{ks}]")),
        c if c == STX => ("stx", format!("M[{ks}]")),
        c if c == JMP | JA => (
            "ja",
            format!("{}", (n as u32).wrapping_add(1).wrapping_add(k) as i32),
        ),
        c if c == JMP | JGT | K => ("jgt", format!("#0x{k:x}")),
        c if c == JMP | JGE | K => ("jge", format!("#0x{k:x}")),
        c if c == JMP | JEQ | K => ("jeq", format!("#0x{k:x}")),
        c if c == JMP | JSET | K => ("jset", format!("#0x{k:x}")),
        c if c == JMP | JGT | X => ("jgt", "x".into()),
        c if c == JMP | JGE | X => ("jge", "x".into()),
        c if c == JMP | JEQ | X => ("jeq", "x".into()),
        c if c == JMP | JSET | X => ("jset", "x".into()),
        c if c == ALU | ADD | X => ("add", "x".into()),
        c if c == ALU | SUB | X => ("sub", "x".into()),
        c if c == ALU | MUL | X => ("mul", "x".into()),
        c if c == ALU | DIV | X => ("div", "x".into()),
        c if c == ALU | MOD | X => ("mod", "x".into()),
        c if c == ALU | AND | X => ("and", "x".into()),
        c if c == ALU | OR | X => ("or", "x".into()),
        c if c == ALU | XOR | X => ("xor", "x".into()),
        c if c == ALU | LSH | X => ("lsh", "x".into()),
        c if c == ALU | RSH | X => ("rsh", "x".into()),
        c if c == ALU | ADD | K => ("add", format!("#{ks}")),
        c if c == ALU | SUB | K => ("sub", format!("#{ks}")),
        c if c == ALU | MUL | K => ("mul", format!("#{ks}")),
        c if c == ALU | DIV | K => ("div", format!("#{ks}")),
        c if c == ALU | MOD | K => ("mod", format!("#{ks}")),
        c if c == ALU | AND | K => ("and", format!("#0x{k:x}")),
        c if c == ALU | OR | K => ("or", format!("#0x{k:x}")),
        c if c == ALU | XOR | K => ("xor", format!("#0x{k:x}")),
        c if c == ALU | LSH | K => ("lsh", format!("#{ks}")),
        c if c == ALU | RSH | K => ("rsh", format!("#{ks}")),
        c if c == ALU | NEG => ("neg", String::new()),
        c if c == MISC | TAX => ("tax", String::new()),
        c if c == MISC | TXA => ("txa", String::new()),
        c => ("unimp", format!("0x{c:x}")),
    };
    if insn.is_conditional_jump() {
        format!(
            "({n:03}) {op:<8} {operand:<16} jt {}\tjf {}",
            n + 1 + usize::from(insn.jt),
            n + 1 + usize::from(insn.jf)
        )
    } else {
        format!("({n:03}) {op:<8} {operand}")
    }
}

fn abs_operand(k: u32) -> String {
    if (code::SKF_AD_OFF..code::SKF_AD_OFF + 64).contains(&k) && (k - code::SKF_AD_OFF) % 4 == 0 {
        format!("[{}]", ANCILLARY[((k - code::SKF_AD_OFF) / 4) as usize])
    } else {
        format!("[{}]", k as i32)
    }
}

/// Parse program text in `format`.
pub fn parse(text: &str, format: Format) -> Result<Program, AsmError> {
    match format {
        Format::Decimal => parse_decimal(text),
        Format::C => parse_c(text),
        Format::Asm => parse_asm(text),
    }
}

/// Guess the format of `text` and parse it: `{` starts `-dd`, `(` or a letter starts `-d`,
/// a digit starts `-ddd`.
pub fn parse_any(text: &str) -> Result<Program, AsmError> {
    let first = text.trim_start().chars().next();
    match first {
        Some('{') => parse(text, Format::C),
        Some(c) if c.is_ascii_digit() => parse(text, Format::Decimal),
        _ => parse(text, Format::Asm),
    }
}

/// A cursor over one line, tracking the column for error messages.
struct Cursor<'a> {
    line: usize,
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(line: usize, text: &'a str) -> Cursor<'a> {
        Cursor { line, text, pos: 0 }
    }

    fn err(&self, message: impl Into<String>) -> AsmError {
        AsmError::new(self.line, self.pos + 1, message)
    }

    fn skip_ws(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos >= self.text.len()
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.text[self.pos..].chars().next()
    }

    fn eat(&mut self, s: &str) -> bool {
        self.skip_ws();
        if self.text[self.pos..].starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), AsmError> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.err(format!("expected `{s}`")))
        }
    }

    fn word(&mut self) -> &'a str {
        self.skip_ws();
        let rest = &self.text[self.pos..];
        let n = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        self.pos += n;
        &rest[..n]
    }

    /// A number: decimal, `0x` hexadecimal, optionally negative (wrapped to 32 bits).
    fn number(&mut self, what: &str) -> Result<u32, AsmError> {
        self.skip_ws();
        let start = self.pos;
        let neg = self.eat("-");
        let tok = self.word();
        let parsed = if let Some(hex) = tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
            u64::from_str_radix(hex, 16).ok()
        } else if !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_digit()) {
            tok.parse::<u64>().ok()
        } else {
            None
        };
        let limit = if neg { 1u64 << 31 } else { u64::from(u32::MAX) };
        match parsed {
            Some(v) if v <= limit => Ok(if neg {
                (v as u32).wrapping_neg()
            } else {
                v as u32
            }),
            Some(_) => {
                self.pos = start;
                Err(self.err(format!("{what} `{tok}` does not fit in 32 bits")))
            }
            None => {
                self.pos = start;
                Err(self.err(format!(
                    "expected {what}, found `{}`",
                    preview(&self.text[start..])
                )))
            }
        }
    }

    fn small(&mut self, what: &str, max: u32) -> Result<u32, AsmError> {
        let start = self.pos;
        let v = self.number(what)?;
        if v > max {
            self.pos = start;
            self.skip_ws();
            return Err(self.err(format!("{what} {v} is larger than {max}")));
        }
        Ok(v)
    }
}

fn preview(s: &str) -> &str {
    let s = s.trim_start();
    let end = s
        .char_indices()
        .find(|(_, c)| c.is_whitespace())
        .map_or(s.len(), |(i, _)| i);
    if end == 0 { "end of line" } else { &s[..end] }
}

fn parse_decimal(text: &str) -> Result<Program, AsmError> {
    // Instructions are separated by newlines or commas; the first item is the count.
    let mut items = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let mut col = 0;
        for part in line.split(',') {
            let lead = part.len() - part.trim_start().len();
            if !part.trim().is_empty() {
                items.push((ln + 1, col + lead, part.trim()));
            }
            col += part.len() + 1;
        }
    }
    let Some(&(line, col, first)) = items.first() else {
        return Err(AsmError::new(
            1,
            1,
            "empty program text: expected the instruction count",
        ));
    };
    let mut c = Cursor::new(line, first);
    let count = c.number("instruction count")?;
    if !c.at_end() {
        return Err(AsmError::new(
            line,
            col + c.pos + 1,
            "expected only the instruction count on the first line",
        ));
    }
    if count == 0 {
        return Err(AsmError::new(
            line,
            col + 1,
            "a program needs at least one instruction",
        ));
    }
    let body = &items[1..];
    if body.len() != count as usize {
        let (l, _, _) = body.last().copied().unwrap_or((line, col, ""));
        return Err(AsmError::new(
            l,
            1,
            format!(
                "the count says {count} instructions but {} follow",
                body.len()
            ),
        ));
    }
    let mut insns = Vec::with_capacity(body.len());
    for &(line, col, item) in body {
        let mut c = Cursor::new(line, item);
        let code = c.small("opcode", 0xffff).map_err(|e| shift(e, col))?;
        let jt = c.small("jt", 0xff).map_err(|e| shift(e, col))?;
        let jf = c.small("jf", 0xff).map_err(|e| shift(e, col))?;
        let k = c.number("k").map_err(|e| shift(e, col))?;
        if !c.at_end() {
            return Err(shift(c.err("expected 4 numbers: code jt jf k"), col));
        }
        insns.push(Insn {
            code: code as u16,
            jt: jt as u8,
            jf: jf as u8,
            k,
        });
    }
    Ok(Program::new(insns))
}

fn shift(mut e: AsmError, col: usize) -> AsmError {
    e.column += col;
    e
}

fn parse_c(text: &str) -> Result<Program, AsmError> {
    let mut insns = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let mut c = Cursor::new(ln + 1, line);
        if c.at_end() {
            continue;
        }
        c.expect("{")?;
        let code = c.small("opcode", 0xffff)?;
        c.expect(",")?;
        let jt = c.small("jt", 0xff)?;
        c.expect(",")?;
        let jf = c.small("jf", 0xff)?;
        c.expect(",")?;
        let k = c.number("k")?;
        c.expect("}")?;
        c.eat(",");
        if !c.at_end() {
            return Err(c.err("unexpected text after the instruction"));
        }
        insns.push(Insn {
            code: code as u16,
            jt: jt as u8,
            jf: jf as u8,
            k,
        });
    }
    if insns.is_empty() {
        return Err(AsmError::new(1, 1, "no instructions in the text"));
    }
    Ok(Program::new(insns))
}

fn parse_asm(text: &str) -> Result<Program, AsmError> {
    let mut insns = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        // `;` starts a comment that runs to the end of the line.
        let line = line.split(';').next().unwrap_or("");
        let mut c = Cursor::new(ln + 1, line);
        if c.at_end() {
            continue;
        }
        let n = insns.len();
        if c.eat("(") {
            let idx = c.number("instruction number")?;
            if idx as usize != n {
                return Err(c.err(format!("instruction number {idx}, expected {n}")));
            }
            c.expect(")")?;
        }
        insns.push(parse_asm_insn(&mut c, n)?);
        if !c.at_end() {
            return Err(c.err(format!(
                "unexpected `{}` after the instruction",
                preview(&c.text[c.pos..])
            )));
        }
    }
    if insns.is_empty() {
        return Err(AsmError::new(1, 1, "no instructions in the text"));
    }
    Ok(Program::new(insns))
}

/// The operand of a load: `[k]`, `[x + k]`, `#k`, `#pktlen`, `M[k]`, `4*([k]&0xf)`.
enum Operand {
    Abs(u32),
    Ind(u32),
    Imm(u32),
    Len,
    Mem(u32),
    Msh(u32),
    X,
    None,
}

fn operand(c: &mut Cursor<'_>) -> Result<Operand, AsmError> {
    match c.peek() {
        None => Ok(Operand::None),
        Some('#') => {
            c.eat("#");
            if c.eat("pktlen") || c.eat("len") {
                Ok(Operand::Len)
            } else {
                Ok(Operand::Imm(c.number("constant")?))
            }
        }
        Some('[') => {
            c.eat("[");
            if c.eat("x") {
                let neg = if c.eat("+") {
                    false
                } else if c.eat("-") {
                    true
                } else {
                    return Err(c.err("expected `+` after `[x`"));
                };
                let k = c.number("offset")?;
                c.expect("]")?;
                Ok(Operand::Ind(if neg { k.wrapping_neg() } else { k }))
            } else if c.peek().is_some_and(|ch| ch.is_ascii_alphabetic()) {
                let save = c.pos;
                let name = c.word();
                let Some(i) = ANCILLARY.iter().position(|a| *a == name) else {
                    c.pos = save;
                    return Err(c.err(format!("unknown ancillary load `{name}`")));
                };
                c.expect("]")?;
                Ok(Operand::Abs(code::SKF_AD_OFF + 4 * i as u32))
            } else {
                let k = c.number("offset")?;
                c.expect("]")?;
                Ok(Operand::Abs(k))
            }
        }
        Some('M') => {
            c.eat("M");
            c.expect("[")?;
            let k = c.number("scratch index")?;
            c.expect("]")?;
            Ok(Operand::Mem(k))
        }
        Some('4') if c.text[c.pos..].starts_with("4*") => {
            c.eat("4*");
            c.expect("(")?;
            c.expect("[")?;
            let k = c.number("offset")?;
            c.expect("]")?;
            c.expect("&")?;
            let m = c.number("mask")?;
            if m != 0xf {
                return Err(c.err("expected `&0xf` in `4*([k]&0xf)`"));
            }
            c.expect(")")?;
            Ok(Operand::Msh(k))
        }
        Some('x') | Some('a') if !c.text[c.pos..].starts_with("ab") => {
            if c.eat("x") {
                Ok(Operand::X)
            } else {
                c.eat("a");
                Ok(Operand::None)
            }
        }
        Some(_) => Ok(Operand::Imm(c.number("operand")?)),
    }
}

fn parse_asm_insn(c: &mut Cursor<'_>, n: usize) -> Result<Insn, AsmError> {
    use code::*;
    let start = {
        c.skip_ws();
        c.pos
    };
    let mnemonic = c.word();
    let bad_operand = |c: &Cursor<'_>, what: &str| {
        AsmError::new(c.line, start + 1, format!("`{mnemonic}` takes {what}"))
    };
    let rel = |c: &mut Cursor<'_>, what: &str| -> Result<u8, AsmError> {
        let at = c.pos;
        let target = c.number(what)? as usize;
        if target <= n || target - n - 1 > 255 {
            c.pos = at;
            c.skip_ws();
            return Err(c.err(format!(
                "{what} target {target} must lie 1 to 256 instructions after instruction {n}"
            )));
        }
        Ok((target - n - 1) as u8)
    };
    let alu = |op: u16, c: &mut Cursor<'_>| -> Result<Insn, AsmError> {
        match operand(c)? {
            Operand::X => Ok(Insn::stmt(ALU | op | X, 0)),
            Operand::Imm(k) => Ok(Insn::stmt(ALU | op | K, k)),
            _ => Err(bad_operand(c, "`#k` or `x`")),
        }
    };
    let load = |size: u16, c: &mut Cursor<'_>| -> Result<Insn, AsmError> {
        let op = operand(c)?;
        match (size, op) {
            (_, Operand::Abs(k)) => Ok(Insn::stmt(LD | size | ABS, k)),
            (_, Operand::Ind(k)) => Ok(Insn::stmt(LD | size | IND, k)),
            (W, Operand::Imm(k)) => Ok(Insn::stmt(LD | IMM, k)),
            (W, Operand::Len) => Ok(Insn::stmt(LD | W | LEN, 0)),
            (W, Operand::Mem(k)) => Ok(Insn::stmt(LD | MEM, k)),
            (W, _) => Err(bad_operand(
                c,
                "`[k]`, `[x + k]`, `#k`, `#pktlen` or `M[k]`",
            )),
            _ => Err(bad_operand(c, "`[k]` or `[x + k]`")),
        }
    };
    let insn = match mnemonic {
        "ld" => load(W, c)?,
        "ldh" => load(H, c)?,
        "ldb" => load(B, c)?,
        "ldx" | "ldxb" => match operand(c)? {
            Operand::Imm(k) if mnemonic == "ldx" => Insn::stmt(LDX | W | IMM, k),
            Operand::Mem(k) if mnemonic == "ldx" => Insn::stmt(LDX | W | MEM, k),
            Operand::Len if mnemonic == "ldx" => Insn::stmt(LDX | W | LEN, 0),
            Operand::Msh(k) => Insn::stmt(LDX | B | MSH, k),
            _ => return Err(bad_operand(c, "`#k`, `M[k]`, `#pktlen` or `4*([k]&0xf)`")),
        },
        "st" | "stx" => match operand(c)? {
            Operand::Mem(k) => Insn::stmt(if mnemonic == "st" { ST } else { STX }, k),
            _ => return Err(bad_operand(c, "`M[k]`")),
        },
        "ja" | "jmp" => {
            let at = c.pos;
            let target = i64::from(c.number("jump target")?);
            let off = target - n as i64 - 1;
            if off < i64::from(i32::MIN) || off > i64::from(u32::MAX) {
                c.pos = at;
                return Err(c.err("jump target out of range"));
            }
            Insn::stmt(JMP | JA, off as u32)
        }
        "jeq" | "jgt" | "jge" | "jset" => {
            let op = match mnemonic {
                "jeq" => JEQ,
                "jgt" => JGT,
                "jge" => JGE,
                _ => JSET,
            };
            let (src, k) = match operand(c)? {
                Operand::X => (X, 0),
                Operand::Imm(k) => (K, k),
                _ => return Err(bad_operand(c, "`#k` or `x`, then `jt N jf M`")),
            };
            c.eat(",");
            c.expect("jt")?;
            let jt = rel(c, "jt")?;
            c.eat(",");
            c.expect("jf")?;
            let jf = rel(c, "jf")?;
            Insn::jump(JMP | op | src, k, jt, jf)
        }
        "add" => alu(ADD, c)?,
        "sub" => alu(SUB, c)?,
        "mul" => alu(MUL, c)?,
        "div" => alu(DIV, c)?,
        "mod" => alu(MOD, c)?,
        "and" => alu(AND, c)?,
        "or" => alu(OR, c)?,
        "xor" => alu(XOR, c)?,
        "lsh" => alu(LSH, c)?,
        "rsh" => alu(RSH, c)?,
        "neg" => Insn::stmt(ALU | NEG, 0),
        "tax" => Insn::stmt(MISC | TAX, 0),
        "txa" => Insn::stmt(MISC | TXA, 0),
        "ret" => match operand(c)? {
            Operand::Imm(k) => Insn::stmt(RET | K, k),
            Operand::None => Insn::stmt(RET | A, 0),
            _ => return Err(bad_operand(c, "`#k` or nothing (`ret a`)")),
        },
        "unimp" => {
            // bpf_image prints unknown opcodes as `unimp 0xCODE`; k is lost.
            let code = c.small("opcode", 0xffff)?;
            Insn::stmt(code as u16, 0)
        }
        "" => {
            return Err(AsmError::new(
                c.line,
                start + 1,
                "expected an instruction mnemonic",
            ));
        }
        other => {
            return Err(AsmError::new(
                c.line,
                start + 1,
                format!("unknown mnemonic `{other}`"),
            ));
        }
    };
    Ok(insn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip_tcp_80() -> Program {
        // tcpdump -ddd 'ip and tcp port 80' style program (hand-assembled subset).
        Program::new(vec![
            Insn::stmt(0x28, 12),
            Insn::jump(0x15, 0x800, 0, 8),
            Insn::stmt(0x30, 23),
            Insn::jump(0x15, 6, 0, 6),
            Insn::stmt(0x28, 20),
            Insn::jump(0x45, 0x1fff, 4, 0),
            Insn::stmt(0xb1, 14),
            Insn::stmt(0x48, 14),
            Insn::jump(0x15, 80, 0, 1),
            Insn::stmt(0x06, 262144),
            Insn::stmt(0x06, 0),
        ])
    }

    #[test]
    fn asm_lines_match_bpf_image() {
        let text = dump(&ip_tcp_80(), Format::Asm);
        let expected = "(000) ldh      [12]\n\
                        (001) jeq      #0x800           jt 2\tjf 10\n\
                        (002) ldb      [23]\n\
                        (003) jeq      #0x6             jt 4\tjf 10\n\
                        (004) ldh      [20]\n\
                        (005) jset     #0x1fff          jt 10\tjf 6\n\
                        (006) ldxb     4*([14]&0xf)\n\
                        (007) ldh      [x + 14]\n\
                        (008) jeq      #0x50            jt 9\tjf 10\n\
                        (009) ret      #262144\n\
                        (010) ret      #0\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn c_and_decimal_forms() {
        let p = Program::new(vec![Insn::stmt(0x28, 12), Insn::stmt(0x06, u32::MAX)]);
        assert_eq!(
            dump(&p, Format::C),
            "{ 0x28, 0, 0, 0x0000000c },\n{ 0x6, 0, 0, 0xffffffff },\n"
        );
        assert_eq!(
            dump(&p, Format::Decimal),
            "2\n40 0 0 12\n6 0 0 4294967295\n"
        );
        assert_eq!(image(&p.insns()[1], 1), "(001) ret      #-1");
    }

    #[test]
    fn bare_operands_keep_trailing_spaces() {
        assert_eq!(image(&Insn::stmt(0x16, 0), 3), "(003) ret      ");
        assert_eq!(image(&Insn::stmt(0x07, 0), 0), "(000) tax      ");
        assert_eq!(image(&Insn::stmt(0x81, 0), 0), "(000) unimp    0x81");
        assert_eq!(
            image(&Insn::stmt(0x30, 0xfffff000 + 44), 0),
            "(000) ldb      [vlan_tci]"
        );
        assert_eq!(image(&Insn::stmt(0x05, 0xffff_fffe), 5), "(005) ja       4");
    }

    #[test]
    fn every_format_round_trips() {
        let p = ip_tcp_80();
        for f in [Format::Asm, Format::C, Format::Decimal] {
            assert_eq!(parse(&dump(&p, f), f).unwrap(), p, "{f:?}");
            assert_eq!(parse_any(&dump(&p, f)).unwrap(), p, "{f:?}");
        }
    }

    #[test]
    fn decimal_accepts_the_comma_form() {
        let p = parse("4,48 0 0 9,21 0 1 6,6 0 0 1,6 0 0 0", Format::Decimal).unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(p.insns()[1], Insn::jump(0x15, 6, 0, 1));
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse("2\n40 0 0 12\n6 0 0\n", Format::Decimal).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 3, column 6: expected k, found `end of line`"
        );
        let e = parse("000, \n", Format::Decimal).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 1: a program needs at least one instruction"
        );
        let e = parse("3\n40 0 0 12\n", Format::Decimal).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2, column 1: the count says 3 instructions but 1 follow"
        );
        let e = parse("(000) ldh [12]\n(001) jeq #0x800 jt 0 jf 3\n", Format::Asm).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2, column 21: jt target 0 must lie 1 to 256 instructions after instruction 1"
        );
        let e = parse("(000) foo [12]\n", Format::Asm).unwrap_err();
        assert_eq!(e.to_string(), "line 1, column 7: unknown mnemonic `foo`");
        let e = parse("{ 0x28, 0, 0x100, 0 },\n", Format::C).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 12: jf 256 is larger than 255"
        );
    }

    #[test]
    fn asm_accepts_conveniences() {
        let p = parse(
            "ldh [12]\njeq #2048 jt 2 jf 3\nret #65535\nret #0\n",
            Format::Asm,
        )
        .unwrap();
        assert_eq!(p.insns()[1], Insn::jump(0x15, 0x800, 0, 1));
        let p = parse("; comment\nld [x - 4] ; load\nret a\n", Format::Asm).unwrap();
        assert_eq!(p.insns()[0], Insn::stmt(0x40, 0xffff_fffc));
        assert_eq!(p.insns()[1], Insn::stmt(0x16, 0));
    }
}
