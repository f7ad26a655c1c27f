//! The rules text interface of the paper (PF_RING's `/proc` filter interface, Deri et al. §4):
//! one command per line.
//!
//! ```text
//! # SIP to queue 0, drop SMTP from one host
//! +(1,0,udp,0.0.0.0,0,0.0.0.0,5060)
//! +(2,-1,tcp,192.168.0.10,25,0.0.0.0,0)
//! -(2)
//! ```
//!
//! - `+(ID,QUEUE,PROTO,SRC,SPORT,DST,DPORT)` adds rule `ID` (0..=4294967295). `QUEUE` is an RX
//!   queue (0..=65535) or `-1` to drop. `PROTO` is a name (`tcp`, `udp`, `sctp`, `icmp`,
//!   `icmp6`, `gre`, `esp`, `ah`), a number (1..=255), or `0`, `any` or `*` for any protocol.
//!   `SRC` and `DST` are IPv4 addresses or IPv6 addresses, plain or in brackets
//!   (`[2001:db8::1]`); the unspecified address (`0.0.0.0`, `::`) matches any address, and —
//!   an extension of the paper's syntax — `ADDR/LEN` matches a prefix. Both addresses must be of
//!   the same family, which is the rule's family. `SPORT` and `DPORT` are 0..=65535, `0`
//!   matching any port.
//! - `-(ID)` removes rule `ID`.
//! - Spaces and tabs are allowed around every token; `#` starts a comment that runs to the end
//!   of the line; blank lines are skipped.
//!
//! A rule with every field given (no `0`, no unspecified address, no prefix) is precise, any
//! other a wildcard rule of priority 0 (wildcard rules are tried in the order they were added).
//! Rules match any VLAN.
//!
//! Errors name the 1-based line and column (in characters) of the offending token and say what
//! is wrong; [`ParseError::snippet`] renders the line with a caret. The parser never panics,
//! whatever the input.

use std::fmt;
use std::io::{self, BufRead, Write};
use std::net::IpAddr;

use crate::error::OffloadError;
use crate::rule::{
    Action, Family, Masked, Match, PROTO_SCTP, PROTO_TCP, PROTO_UDP, Rule, RuleId, VlanMatch,
};
use crate::table::RuleSink;

/// One command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// `+(…)`: install the rule.
    Add(Rule),
    /// `-(id)`: remove the rule.
    Remove(RuleId),
}

impl fmt::Display for Command {
    /// The command in the text syntax; a rule that the syntax cannot express (see
    /// [`format_rule`]) is written as a comment saying so.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Add(rule) => match format_rule(rule) {
                Ok(s) => f.write_str(&s),
                Err(e) => write!(f, "# {e}"),
            },
            Command::Remove(id) => write!(f, "-({id})"),
        }
    }
}

/// A command and the line it was on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line {
    /// The 1-based line number.
    pub line: usize,
    /// The command.
    pub command: Command,
}

/// The commands of a text, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    /// The commands.
    pub commands: Vec<Line>,
}

/// The outcome of one command of [`Script::apply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The 1-based line of the command.
    pub line: usize,
    /// The command.
    pub command: Command,
    /// What installing or removing did.
    pub result: Result<(), OffloadError>,
}

impl Script {
    /// Runs every command against `sink` (a [`RuleTable`](crate::RuleTable) or an
    /// [`EmulatedNic`](crate::EmulatedNic)), carrying on after failures; one result per
    /// command, in order.
    pub fn apply<S: RuleSink + ?Sized>(&self, sink: &mut S) -> Vec<Applied> {
        self.commands
            .iter()
            .map(|l| Applied {
                line: l.line,
                command: l.command,
                result: match l.command {
                    Command::Add(rule) => sink.add_rule(rule),
                    Command::Remove(id) => sink.remove_rule(id),
                },
            })
            .collect()
    }
}

/// What a [`serve`] session did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Session {
    /// Commands applied successfully.
    pub applied: u64,
    /// Lines refused (bad syntax, or the sink refused the rule).
    pub refused: u64,
    /// Whether the peer sent `quit`.
    pub quit: bool,
}

/// Serve the rules text interface on a stream (a control socket, standard input): read lines
/// from `input`, apply each command to `sink` at once, and answer every non-blank,
/// non-comment line with one line on `output`: `ok`, or `error: …` (a syntax error with its
/// column, or why the sink refused the rule) — the session goes on after errors. `quit` ends
/// the session. Returns at end of input or on `quit`; fails only on I/O errors.
pub fn serve<S, R, W>(input: R, mut output: W, sink: &mut S) -> io::Result<Session>
where
    S: RuleSink + ?Sized,
    R: BufRead,
    W: Write,
{
    let mut session = Session::default();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim() == "quit" {
            session.quit = true;
            writeln!(output, "ok bye")?;
            output.flush()?;
            break;
        }
        let reply = match parse_line(i + 1, &line) {
            Ok(None) => continue,
            Ok(Some(Command::Add(rule))) => sink.add_rule(rule),
            Ok(Some(Command::Remove(id))) => sink.remove_rule(id),
            Err(e) => {
                session.refused += 1;
                writeln!(output, "error: {e}")?;
                output.flush()?;
                continue;
            }
        };
        match reply {
            Ok(()) => {
                session.applied += 1;
                writeln!(output, "ok")?;
            }
            Err(e) => {
                session.refused += 1;
                writeln!(output, "error: line {}: {e}", i + 1)?;
            }
        }
        output.flush()?;
    }
    Ok(session)
}

/// Where and why a text could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column (in characters) of the offending token.
    pub column: usize,
    /// The kind of problem.
    pub kind: ParseErrorKind,
    /// What was wrong, for people.
    pub message: String,
}

/// The kinds of [`ParseError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// Not `+(…)` or `-(…)`, a missing parenthesis, a wrong number of fields, trailing text.
    Syntax,
    /// A bad rule id.
    BadId,
    /// A bad queue.
    BadQueue,
    /// An unknown protocol name or a bad number.
    BadProtocol,
    /// A bad address or prefix.
    BadAddress,
    /// A bad port.
    BadPort,
    /// An IPv4 and an IPv6 address in one rule.
    FamilyMismatch,
    /// The reader failed (or the text is not UTF-8).
    Io,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ParseError {}

impl ParseError {
    /// The error rendered under the offending line of `text` (the rules text that was read), with a
    /// caret under the column: netsift's one caret rendering ([`netsift_lang::span::render`]).
    pub fn snippet(&self, text: &str) -> String {
        netsift_lang::span::render(
            text,
            netsift_lang::Span::at(text, self.line, self.column),
            &self.message,
        )
    }
}

/// Reads a whole text; stops at the first error.
pub fn parse(text: &str) -> Result<Script, ParseError> {
    let mut commands = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line_no = i + 1;
        if let Some(command) = parse_line(line_no, line)? {
            commands.push(Line {
                line: line_no,
                command,
            });
        }
    }
    Ok(Script { commands })
}

/// Reads every line of `reader`; stops at the first error (an I/O error is reported as
/// [`ParseErrorKind::Io`] at column 1 of the line being read).
pub fn parse_reader<R: BufRead>(reader: R) -> Result<Script, ParseError> {
    let mut commands = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line_no = i + 1;
        let line = line.map_err(|e| ParseError {
            line: line_no,
            column: 1,
            kind: ParseErrorKind::Io,
            message: format!("cannot read the line: {e}"),
        })?;
        if let Some(command) = parse_line(line_no, &line)? {
            commands.push(Line {
                line: line_no,
                command,
            });
        }
    }
    Ok(Script { commands })
}

/// Reads one line (for a control socket that receives commands one at a time): `None` for a
/// blank or comment line. `line_no` is used in errors.
pub fn parse_line(line_no: usize, line: &str) -> Result<Option<Command>, ParseError> {
    let err = |byte: usize, kind: ParseErrorKind, message: String| ParseError {
        line: line_no,
        column: line.get(..byte).map_or(1, |s| s.chars().count() + 1),
        kind,
        message,
    };
    let body = match line.find('#') {
        Some(at) => &line[..at],
        None => line,
    };
    let body = body.strip_suffix('\r').unwrap_or(body);
    let Some(start) = body.find(|c: char| !c.is_whitespace()) else {
        return Ok(None);
    };
    let end = body.trim_end().len();
    let op = body[start..].chars().next().unwrap_or(' ');
    if op != '+' && op != '-' {
        return Err(err(
            start,
            ParseErrorKind::Syntax,
            format!("expected `+(` or `-(`, found `{op}`"),
        ));
    }
    let after_op = start + 1;
    let open = match body[after_op..end].find(|c: char| !c.is_whitespace()) {
        Some(off) if body[after_op + off..].starts_with('(') => after_op + off,
        Some(off) => {
            return Err(err(
                after_op + off,
                ParseErrorKind::Syntax,
                format!("expected `(` after `{op}`"),
            ));
        }
        None => {
            return Err(err(
                end,
                ParseErrorKind::Syntax,
                format!("expected `(` after `{op}`"),
            ));
        }
    };
    let Some(close_rel) = body[open + 1..end].find(')') else {
        return Err(err(end, ParseErrorKind::Syntax, "missing `)`".to_string()));
    };
    let close = open + 1 + close_rel;
    if close + 1 != end {
        return Err(err(
            close + 1 + (body[close + 1..].len() - body[close + 1..].trim_start().len()),
            ParseErrorKind::Syntax,
            "unexpected text after `)`".to_string(),
        ));
    }
    // The fields with the byte offset of their first non-blank character.
    let mut fields: Vec<(usize, &str)> = Vec::with_capacity(7);
    let mut at = open + 1;
    for piece in body[open + 1..close].split(',') {
        let lead = piece.len() - piece.trim_start().len();
        fields.push((at + lead, piece.trim()));
        at += piece.len() + 1;
    }
    let expected = if op == '+' { 7 } else { 1 };
    if fields.len() != expected {
        let what = if op == '+' {
            "`+(id,queue,proto,src ip,src port,dst ip,dst port)` takes 7 fields"
        } else {
            "`-(id)` takes 1 field"
        };
        return Err(err(
            open,
            ParseErrorKind::Syntax,
            format!("{what}, found {}", fields.len()),
        ));
    }
    for &(at, f) in &fields {
        if f.is_empty() {
            return Err(err(at, ParseErrorKind::Syntax, "empty field".to_string()));
        }
    }
    let (id_at, id_text) = fields[0];
    let id = id_text.parse::<u32>().map_err(|_| {
        err(
            id_at,
            ParseErrorKind::BadId,
            format!("bad rule id `{id_text}`: expected 0..=4294967295"),
        )
    })?;
    let id = RuleId(id);
    if op == '-' {
        return Ok(Some(Command::Remove(id)));
    }
    let (q_at, q_text) = fields[1];
    let action = match q_text.parse::<i32>() {
        Ok(-1) => Action::Drop,
        Ok(q) => match u16::try_from(q) {
            Ok(q) => Action::Queue(q),
            Err(_) => {
                return Err(err(
                    q_at,
                    ParseErrorKind::BadQueue,
                    format!("bad queue `{q_text}`: expected -1 (drop) or 0..=65535"),
                ));
            }
        },
        Err(_) => {
            return Err(err(
                q_at,
                ParseErrorKind::BadQueue,
                format!("bad queue `{q_text}`: expected -1 (drop) or 0..=65535"),
            ));
        }
    };
    let (p_at, p_text) = fields[2];
    let proto = parse_proto(p_text).ok_or_else(|| {
        err(
            p_at,
            ParseErrorKind::BadProtocol,
            format!(
                "bad protocol `{p_text}`: expected tcp, udp, sctp, icmp, icmp6, gre, esp, ah, \
                 a number 0..=255 or any"
            ),
        )
    })?;
    let addr = |(at, text): (usize, &str)| {
        parse_addr(text).ok_or_else(|| {
            err(
                at,
                ParseErrorKind::BadAddress,
                format!(
                    "bad address `{text}`: expected an IPv4 or IPv6 address, optionally \
                     `/prefix length`"
                ),
            )
        })
    };
    let port = |(at, text): (usize, &str)| {
        text.parse::<u16>().map_err(|_| {
            err(
                at,
                ParseErrorKind::BadPort,
                format!("bad port `{text}`: expected 0..=65535"),
            )
        })
    };
    let src = addr(fields[3])?;
    let sport = port(fields[4])?;
    let dst = addr(fields[5])?;
    let dport = port(fields[6])?;
    let family = Family::of(src.0);
    if Family::of(dst.0) != family {
        return Err(err(
            fields[5].0,
            ParseErrorKind::FamilyMismatch,
            format!(
                "the destination is {} but the source is {family}",
                Family::of(dst.0)
            ),
        ));
    }
    let port_match = |p: u16| {
        if p == 0 {
            Masked::any()
        } else {
            Masked::exact(p)
        }
    };
    let mut pattern = Match::new(family)
        .with_vlan(VlanMatch::Any)
        .with_proto_masked(proto)
        .with_src_port_masked(port_match(sport))
        .with_dst_port_masked(port_match(dport));
    for (is_src, (a, len)) in [(true, src), (false, dst)] {
        let mask = family.prefix_mask(len);
        // The families were checked above, so these calls succeed.
        let set = if is_src {
            pattern.try_src(a, mask)
        } else {
            pattern.try_dst(a, mask)
        };
        if let Ok(p) = set {
            pattern = p;
        }
    }
    Ok(Some(Command::Add(Rule::new(id, pattern, action))))
}

/// Protocol names of the text interface.
const PROTOCOLS: [(&str, u8); 9] = [
    ("tcp", PROTO_TCP),
    ("udp", PROTO_UDP),
    ("sctp", PROTO_SCTP),
    ("icmp", 1),
    ("icmp6", 58),
    ("icmpv6", 58),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
];

fn parse_proto(text: &str) -> Option<Masked<u8>> {
    let lower = text.to_ascii_lowercase();
    if lower == "any" || lower == "*" {
        return Some(Masked::any());
    }
    if let Some(&(_, n)) = PROTOCOLS.iter().find(|(name, _)| *name == lower) {
        return Some(Masked::exact(n));
    }
    match text.parse::<u8>().ok()? {
        0 => Some(Masked::any()),
        n => Some(Masked::exact(n)),
    }
}

/// An address and its prefix length; the unspecified address means length 0.
fn parse_addr(text: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a.trim(), Some(l.trim().parse::<u8>().ok()?)),
        None => (text, None),
    };
    let addr = match addr.strip_prefix('[') {
        Some(inner) => IpAddr::V6(inner.strip_suffix(']')?.parse().ok()?),
        None => addr.parse::<IpAddr>().ok()?,
    };
    let bits = Family::of(addr).bits();
    let len = match len {
        Some(l) if l > bits => return None,
        Some(l) => l,
        None if addr.is_unspecified() => 0,
        None => bits,
    };
    Some((addr, len))
}

/// The command that adds `rule`, in the text syntax.
///
/// Fails for what the syntax cannot express: [`Action::Pass`], a VLAN match, a priority other
/// than 0, a protocol or port mask other than exact or any, an address mask that is not a
/// prefix, an exact port 0 or protocol 0, or an address equal to the unspecified address with a
/// non-zero prefix.
pub fn format_rule(rule: &Rule) -> Result<String, OffloadError> {
    use crate::error::ErrorKind;
    let bad = |what: &str| {
        Err(OffloadError::new(
            ErrorKind::Mask,
            Some(rule.id),
            format!("the rules text interface cannot express {what}"),
        ))
    };
    let m = &rule.pattern;
    let queue = match rule.action.paper_queue() {
        Some(q) => q,
        None => return bad("the action `pass`"),
    };
    if m.vlan() != VlanMatch::Any {
        return bad("a VLAN match");
    }
    if rule.priority != 0 {
        return bad("a priority");
    }
    let proto = m.proto();
    let proto = if proto.is_any() {
        "0".to_string()
    } else if proto.is_exact() && proto.value() != 0 {
        match PROTOCOLS.iter().find(|(_, n)| *n == proto.value()) {
            Some((name, _)) => (*name).to_string(),
            None => proto.value().to_string(),
        }
    } else {
        return bad("this protocol match");
    };
    let family = m.family();
    let addr = |a: Masked<u128>| -> Option<String> {
        let len = a.mask().count_ones();
        if family.prefix_mask(u8::try_from(len).ok()?) != a.mask() {
            return None;
        }
        let ip = family.addr(a.value());
        let full = u32::from(family.bits());
        Some(match (len, ip.is_unspecified()) {
            (0, _) => family.addr(0).to_string(),
            (l, false) if l == full => ip.to_string(),
            (_, true) => return None,
            (l, false) => format!("{ip}/{l}"),
        })
    };
    let port = |p: Masked<u16>| -> Option<String> {
        if p.is_any() {
            Some("0".to_string())
        } else if p.is_exact() && p.value() != 0 {
            Some(p.value().to_string())
        } else {
            None
        }
    };
    let (Some(src), Some(dst)) = (addr(m.src()), addr(m.dst())) else {
        return bad("this address match");
    };
    let (Some(sport), Some(dport)) = (port(m.src_port()), port(m.dst_port())) else {
        return bad("this port match");
    };
    Ok(format!(
        "+({},{queue},{proto},{src},{sport},{dst},{dport})",
        rule.id
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use crate::rule::tests::v4;
    use crate::table::RuleTable;
    use netsift_capture::generate::XorShift64;

    fn add(text: &str) -> Rule {
        match parse_line(1, text) {
            Ok(Some(Command::Add(r))) => r,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn error(text: &str) -> String {
        match parse(text) {
            Err(e) => e.to_string(),
            Ok(s) => panic!("{text}: parsed {s:?}"),
        }
    }

    #[test]
    fn paper_examples() {
        let r = add("+(1,-1,tcp,192.168.0.10,25,0.0.0.0,0)");
        assert_eq!(r.id, RuleId(1));
        assert_eq!(r.action, Action::Drop);
        assert!(!r.is_precise());
        assert_eq!(
            r.pattern.to_string(),
            "ip4 proto 6 src 192.168.0.10 sport 25"
        );
        assert_eq!(
            parse_line(1, " -( 1 ) # gone"),
            Ok(Some(Command::Remove(RuleId(1))))
        );
        let p = add("+(7, 3, udp, 10.0.0.1, 5000, 10.0.0.2, 6000)");
        assert!(p.is_precise());
        assert_eq!(p.action, Action::Queue(3));
        let v6 = add("+(8,2,17,[2001:db8::1],53,2001:db8::/32,0)");
        assert_eq!(v6.pattern.family(), Family::V6);
        assert_eq!(
            v6.pattern.to_string(),
            "ip6 proto 17 src 2001:db8::1 sport 53 dst 2001:db8::/32"
        );
        let any = add("+(9,1,any,0.0.0.0,0,0.0.0.0,0)");
        assert!(any.pattern.proto().is_any());
        assert_eq!(parse_line(3, "   # only a comment"), Ok(None));
        assert_eq!(parse_line(3, ""), Ok(None));
    }

    #[test]
    fn script_applies_per_line() {
        let text = "# RTC-Mon\n+(1,0,udp,0.0.0.0,0,0.0.0.0,5060)\n\n+(2,-1,tcp,0.0.0.0,0,0.0.0.0,0)\n\
                    +(2,1,udp,1.2.3.4,1,5.6.7.8,2)\n-(1)\n-(1)\r\n";
        let script = parse(text).unwrap();
        assert_eq!(script.commands.len(), 5);
        assert_eq!(script.commands[0].line, 2);
        let mut t = RuleTable::new();
        let results = script.apply(&mut t);
        let kinds: Vec<_> = results
            .iter()
            .map(|a| (a.line, a.result.as_ref().err().map(|e| e.kind())))
            .collect();
        assert_eq!(
            kinds,
            [
                (2, None),
                (4, None),
                (5, Some(ErrorKind::DuplicateId)),
                (6, None),
                (7, Some(ErrorKind::UnknownId))
            ]
        );
        assert_eq!(t.len(), 1);
        let from_reader = parse_reader(std::io::Cursor::new(text)).unwrap();
        assert_eq!(from_reader, script);
    }

    #[test]
    fn error_messages() {
        // The carets: netsift's one rendering, with the line number for texts of several lines.
        let text = "+(1,-1,tcp,192.168.0.10,25,0.0.0.0,0)\n+(2,-1,tcp,192.168.0.300,25,0.0.0.0,0)";
        assert_eq!(
            parse(text).unwrap_err().snippet(text),
            "bad address `192.168.0.300`: expected an IPv4 or IPv6 address, optionally \
             `/prefix length` (line 2)\n  +(2,-1,tcp,192.168.0.300,25,0.0.0.0,0)\n             ^"
        );
        assert_eq!(
            parse("é+").unwrap_err().snippet("é+"),
            "expected `+(` or `-(`, found `é`\n  é+\n  ^"
        );
        assert_eq!(
            error("+(1,-1,tcp,192.168.0.10,25,0.0.0.0,0)\n+(2,-1,tcp,192.168.0.300,25,0.0.0.0,0)"),
            "line 2, column 12: bad address `192.168.0.300`: expected an IPv4 or IPv6 address, \
             optionally `/prefix length`"
        );
        assert_eq!(
            error("+(1, -2,tcp,0.0.0.0,0,0.0.0.0,0)"),
            "line 1, column 6: bad queue `-2`: expected -1 (drop) or 0..=65535"
        );
        assert_eq!(
            error("+(1,1,tpc,0.0.0.0,0,0.0.0.0,0)"),
            "line 1, column 7: bad protocol `tpc`: expected tcp, udp, sctp, icmp, icmp6, gre, \
             esp, ah, a number 0..=255 or any"
        );
        assert_eq!(
            error("+(1,1,tcp,0.0.0.0,70000,0.0.0.0,0)"),
            "line 1, column 19: bad port `70000`: expected 0..=65535"
        );
        assert_eq!(
            error("+(1,1,tcp,0.0.0.0,0,::,0)"),
            "line 1, column 21: the destination is ip6 but the source is ip4"
        );
        assert_eq!(
            error("+(1,1,tcp)"),
            "line 1, column 2: `+(id,queue,proto,src ip,src port,dst ip,dst port)` takes 7 \
             fields, found 3"
        );
        assert_eq!(
            error("  *(1)"),
            "line 1, column 3: expected `+(` or `-(`, found `*`"
        );
        assert_eq!(error("-(1"), "line 1, column 4: missing `)`");
        assert_eq!(
            error("-(1) x"),
            "line 1, column 6: unexpected text after `)`"
        );
        assert_eq!(error("- 1"), "line 1, column 3: expected `(` after `-`");
        assert_eq!(
            error("-(x)"),
            "line 1, column 3: bad rule id `x`: expected 0..=4294967295"
        );
        assert_eq!(
            error("-(1,)"),
            "line 1, column 2: `-(id)` takes 1 field, found 2"
        );
        assert_eq!(
            error("+(1,1,,0.0.0.0,0,0.0.0.0,0)"),
            "line 1, column 7: empty field"
        );
        assert_eq!(
            error("é+"),
            "line 1, column 1: expected `+(` or `-(`, found `é`"
        );
    }

    #[test]
    fn format_round_trips() {
        for text in [
            "+(1,-1,tcp,192.168.0.10,25,0.0.0.0,0)",
            "+(2,3,udp,10.0.0.0/8,0,10.1.2.3,53)",
            "+(3,0,0,::,0,2001:db8::1,443)",
            "+(4,65535,253,1.2.3.4,1,5.6.7.8,65535)",
        ] {
            let r = add(text);
            assert_eq!(format_rule(&r).unwrap(), text);
            assert_eq!(Command::Add(r).to_string(), text);
        }
        let pass = Rule::new(RuleId(1), Match::new(Family::V4), Action::Pass);
        assert_eq!(
            format_rule(&pass).unwrap_err().to_string(),
            "rule 1: the rules text interface cannot express the action `pass`"
        );
        let odd = Match::new(Family::V4)
            .try_src(v4("10.0.0.1"), 0xff00_ff00)
            .unwrap();
        assert!(format_rule(&Rule::new(RuleId(1), odd, Action::Drop)).is_err());
    }

    #[test]
    fn random_rules_round_trip() {
        let mut rng = XorShift64::new(3);
        for i in 0..2_000u32 {
            let family = if rng.below(2) == 0 {
                Family::V4
            } else {
                Family::V6
            };
            let bits = |rng: &mut XorShift64| {
                u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())
            };
            let len = |rng: &mut XorShift64| rng.below(u64::from(family.bits()) + 1) as u8;
            let (sl, dl) = (len(&mut rng), len(&mut rng));
            let (sa, da) = (bits(&mut rng) | 1 << 127 | 1, bits(&mut rng) | 1 << 127 | 1);
            let m = Match::new(family)
                .try_src(family.addr(sa), family.prefix_mask(sl))
                .unwrap()
                .try_dst(family.addr(da), family.prefix_mask(dl))
                .unwrap()
                .with_proto_masked(match rng.below(256) as u8 {
                    0 => Masked::any(),
                    p => Masked::exact(p),
                })
                .with_src_port_masked(match rng.below(65536) as u16 {
                    0 => Masked::any(),
                    p => Masked::exact(p),
                })
                .with_dst_port(1 + rng.below(65535) as u16);
            let action = match rng.below(3) {
                0 => Action::Drop,
                _ => Action::Queue(rng.below(65536) as u16),
            };
            let rule = Rule::new(RuleId(i), m, action);
            let Ok(text) = format_rule(&rule) else {
                // A prefix whose host part is all zero (rare) prints as unspecified.
                continue;
            };
            assert_eq!(parse_line(1, &text), Ok(Some(Command::Add(rule))), "{text}");
        }
    }

    #[test]
    fn random_text_never_panics() {
        let mut rng = XorShift64::new(11);
        let alphabet: Vec<char> = "+-(),.:[]/#0123456789abcdeftcpudp é\t\r*".chars().collect();
        let seeds = [
            "+(1,-1,tcp,192.168.0.10,25,0.0.0.0,0)",
            "-(12)",
            "+(8,2,17,[2001:db8::1],53,::/0,0)",
        ];
        for i in 0..20_000 {
            let mut s: Vec<char> = seeds[i % seeds.len()].chars().collect();
            for _ in 0..=rng.below(4) {
                let at = rng.below(s.len() as u64 + 1) as usize;
                let c = alphabet[rng.below(alphabet.len() as u64) as usize];
                match rng.below(3) {
                    0 if at < s.len() => s[at] = c,
                    1 if at < s.len() => {
                        s.remove(at);
                    }
                    _ => s.insert(at.min(s.len()), c),
                }
            }
            let text: String = s.into_iter().collect();
            if let Err(e) = parse(&text) {
                let _ = e.snippet(&text);
            }
        }
    }

    #[test]
    fn serve_answers_every_command() {
        let input = "# comment\n+(1,-1,tcp,10.0.0.1,25,0.0.0.0,0)\n\n+(1,2,udp,0.0.0.0,0,0.0.0.0,53)\n+(2,x)\n-(1)\n-(1)\nquit\n+(3,1,udp,0.0.0.0,0,0.0.0.0,1)\n";
        let mut table = crate::RuleTable::new();
        let mut out = Vec::new();
        let s = serve(input.as_bytes(), &mut out, &mut table).unwrap();
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 6, "{out}");
        assert_eq!(lines[0], "ok");
        assert!(lines[1].starts_with("error: line 4: "), "{out}");
        assert!(lines[2].starts_with("error: line 5, column"), "{out}");
        assert_eq!(lines[3], "ok");
        assert!(lines[4].starts_with("error: line 7: "), "{out}");
        assert_eq!(lines[5], "ok bye");
        assert_eq!(
            s,
            Session {
                applied: 2,
                refused: 3,
                quit: true
            }
        );
        assert!(table.is_empty());
    }
}
