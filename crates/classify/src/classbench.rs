//! ClassBench rule sets and header traces.
//!
//! Rules, one a line, priority = line order: `@<sa>/<len> <da>/<len> <sp_lo> : <sp_hi> <dp_lo> :
//! <dp_hi> <proto>/<mask>` and, in the generator's original output, a sixth field of TCP flags
//! `0x<flags>/0x<mask>` (a header matches when its flags, masked, equal the value). Any whitespace
//! separates fields; hexadecimal is accepted in either case. Traces: `<sa> <da> <sp> <dp>
//! <proto> [<rule#> ...]`, unsigned integers; the sixth column, when present, is the 1-based index
//! of the first matching rule. Blank lines are skipped. A bad line is an [`Error`] naming the
//! line, the column and what was expected.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::rule::{Flags, Header, Range, Rule};

/// The shared test data directory (`$NETSIFT_SHARED_DATA`, or `../shared/data` beside the
/// repository netsift was built from); its `classbench/` holds the rule sets, traces and seeds.
pub fn shared_data_dir() -> PathBuf {
    match std::env::var_os("NETSIFT_SHARED_DATA") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    }
}

/// A rule set of the shared data (`classbench/ehzuf-HyperSplit/rules/<set>`) and its trace;
/// the error says which file is missing or bad, and where the data should be.
pub fn load_pair(set: &str) -> Result<(Vec<Rule>, Vec<TraceEntry>), String> {
    let dir = shared_data_dir().join("classbench/ehzuf-HyperSplit");
    let read = |p: PathBuf| {
        std::fs::read_to_string(&p).map_err(|e| {
            format!(
                "cannot read {} ({e}): the shared data lives beside the repository in \
                 ../shared/data; set NETSIFT_SHARED_DATA to its path",
                p.display()
            )
        })
    };
    let rp = dir.join("rules").join(set);
    let tp = dir.join("traces").join(format!("{set}_trace"));
    let rules = parse_rules(&read(rp.clone())?).map_err(|e| format!("{}: {e}", rp.display()))?;
    let trace = parse_trace(&read(tp.clone())?).map_err(|e| format!("{}: {e}", tp.display()))?;
    Ok((rules, trace))
}

/// Where and why a line could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column (in characters) of the offending text.
    pub column: usize,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for Error {}

/// A cursor over one line.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
    line: usize,
}

impl<'a> Cursor<'a> {
    fn error(&self, at: usize, message: impl Into<String>) -> Error {
        Error {
            line: self.line,
            column: self.text[..at.min(self.text.len())].chars().count() + 1,
            message: message.into(),
        }
    }

    fn skip_space(&mut self) {
        let rest = &self.text[self.at..];
        self.at += rest.len() - rest.trim_start().len();
    }

    fn at_end(&mut self) -> bool {
        self.skip_space();
        self.at >= self.text.len()
    }

    /// The next run of characters satisfying `f`, after whitespace.
    fn token(&mut self, f: impl Fn(char) -> bool) -> (usize, &'a str) {
        self.skip_space();
        let start = self.at;
        let rest = &self.text[start..];
        let len = rest.find(|c: char| !f(c)).unwrap_or(rest.len());
        self.at += len;
        (start, &rest[..len])
    }

    fn expect(&mut self, c: char, what: &str) -> Result<(), Error> {
        self.skip_space();
        if self.text[self.at..].starts_with(c) {
            self.at += c.len_utf8();
            Ok(())
        } else {
            Err(self.error(self.at, format!("expected {what}")))
        }
    }

    /// An unsigned number (decimal, or hexadecimal after `0x`/`0X`) at most `max`.
    fn number(&mut self, what: &str, max: u64) -> Result<u32, Error> {
        let (start, tok) = self.token(|c| c.is_ascii_alphanumeric());
        if tok.is_empty() {
            return Err(self.error(start, format!("expected {what}")));
        }
        let v = match tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => tok.parse::<u64>(),
        }
        .map_err(|_| self.error(start, format!("{what}: `{tok}` is not a number")))?;
        if v > max {
            return Err(self.error(start, format!("{what}: {v} is larger than {max}")));
        }
        Ok(v as u32)
    }

    /// A dotted-quad IPv4 address.
    fn address(&mut self, what: &str) -> Result<u32, Error> {
        let (start, tok) = self.token(|c| c.is_ascii_digit() || c == '.');
        tok.parse::<std::net::Ipv4Addr>()
            .map(u32::from)
            .map_err(|_| {
                self.error(
                    start,
                    if tok.is_empty() {
                        format!("expected {what} (a.b.c.d)")
                    } else {
                        format!("{what}: `{tok}` is not an IPv4 address")
                    },
                )
            })
    }

    fn prefix(&mut self, what: &str) -> Result<Range, Error> {
        let addr = self.address(what)?;
        self.expect('/', &format!("`/` and the prefix length of {what}"))?;
        let len = self.number(&format!("the prefix length of {what}"), 32)?;
        Ok(Range::prefix(addr, len as u8))
    }

    fn port_range(&mut self, what: &str) -> Result<Range, Error> {
        self.skip_space();
        let start = self.at;
        let lo = self.number(&format!("the low end of {what}"), 0xffff)?;
        self.expect(':', &format!("`:` between the ends of {what}"))?;
        let hi = self.number(&format!("the high end of {what}"), 0xffff)?;
        Range::new(lo, hi).ok_or_else(|| self.error(start, format!("{what}: {lo} : {hi} is empty")))
    }

    /// `value/mask`: the values `v` with `v & mask == value & mask`, as a range when the mask is
    /// all or nothing.
    fn value_mask(&mut self, what: &str, max: u32) -> Result<Range, Error> {
        self.skip_space();
        let start = self.at;
        let v = self.number(what, u64::from(max))?;
        self.expect('/', &format!("`/` and the mask of {what}"))?;
        let m = self.number(&format!("the mask of {what}"), u64::from(max))?;
        if m == max {
            Ok(Range { lo: v, hi: v })
        } else if m == 0 {
            Ok(Range { lo: 0, hi: max })
        } else {
            Err(self.error(
                start,
                format!("{what}: mask {m:#x} is neither exact ({max:#x}) nor any (0)"),
            ))
        }
    }
}

/// A cursor on each line of `text` that holds more than whitespace.
fn non_blank_lines(text: &str) -> impl Iterator<Item = Cursor<'_>> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let mut c = Cursor {
            text: line,
            at: 0,
            line: i + 1,
        };
        (!c.at_end()).then_some(c)
    })
}

/// Read a ClassBench rule set.
pub fn parse_rules(text: &str) -> Result<Vec<Rule>, Error> {
    let mut rules = Vec::new();
    for mut c in non_blank_lines(text) {
        c.expect('@', "`@` starting a rule")?;
        let sa = c.prefix("the source address")?;
        let da = c.prefix("the destination address")?;
        let sp = c.port_range("the source ports")?;
        let dp = c.port_range("the destination ports")?;
        let proto = c.value_mask("the protocol", 0xff)?;
        let mut flags = Flags::ANY;
        if !c.at_end() {
            // The generator's sixth field: TCP flags and their mask (bits outside the mask of
            // the value are ignored, as the mask says).
            let value = c.number("the TCP flags", 0xffff)?;
            c.expect('/', "`/` and the mask of the TCP flags")?;
            let mask = c.number("the mask of the TCP flags", 0xffff)?;
            flags = Flags {
                value: (value & mask) as u16,
                mask: mask as u16,
            };
        }
        if !c.at_end() {
            return Err(c.error(c.at, "unexpected text after the rule"));
        }
        rules.push(Rule {
            fields: [sa, da, sp, dp, proto],
            flags,
            line: c.line,
        });
    }
    Ok(rules)
}

/// One trace line: a header and, when the trace has it, the 1-based index of its first matching
/// rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// The header.
    pub header: Header,
    /// The answer column (1-based rule index; 0 or absent: no answer given).
    pub answer: Option<usize>,
}

/// Read a ClassBench header trace (columns beyond the sixth are ignored).
pub fn parse_trace(text: &str) -> Result<Vec<TraceEntry>, Error> {
    let mut out = Vec::new();
    for mut c in non_blank_lines(text) {
        let h = Header(
            [
                c.number("the source address", u64::from(u32::MAX))?,
                c.number("the destination address", u64::from(u32::MAX))?,
                c.number("the source port", 0xffff)?,
                c.number("the destination port", 0xffff)?,
                c.number("the protocol", 0xff)?,
            ],
            0,
        );
        let answer = if c.at_end() {
            None
        } else {
            Some(c.number("the rule number", u64::from(u32::MAX))? as usize).filter(|&n| n > 0)
        };
        out.push(TraceEntry { header: h, answer });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_and_any_whitespace() {
        let r = parse_rules(
            "@175.77.88.155/32 119.106.158.230/32 0 : 65535 6888 : 6888 0x06/0xFF\n\n\
             @10.0.0.0/8\t0.0.0.0/0\t1024 : 65535\t53 : 53\t0x11/0xff\t0x0000/0x0000\t\n",
        )
        .unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].fields[4], Range { lo: 6, hi: 6 });
        assert_eq!(
            r[1].fields[0],
            Range {
                lo: 0x0a00_0000,
                hi: 0x0aff_ffff
            }
        );
        assert_eq!(
            r[1].fields[2],
            Range {
                lo: 1024,
                hi: 65535
            }
        );
        assert_eq!(r[1].line, 3);
    }

    #[test]
    fn errors_name_line_and_column() {
        let bad = [
            (
                "@1.2.3.4/33 0.0.0.0/0 0 : 1 0 : 1 0x06/0xFF",
                10,
                "larger than 32",
            ),
            ("1.2.3.4/8 0.0.0.0/0 0 : 1 0 : 1 0x06/0xFF", 1, "`@`"),
            (
                "@1.2.3/8 0.0.0.0/0 0 : 1 0 : 1 0x06/0xFF",
                2,
                "not an IPv4 address",
            ),
            ("@1.2.3.4/8 0.0.0.0/0 5 : 1 0 : 1 0x06/0xFF", 22, "is empty"),
            (
                "@1.2.3.4/8 0.0.0.0/0 0 : 1 0 : 70000 0x06/0xFF",
                32,
                "larger than 65535",
            ),
            (
                "@1.2.3.4/8 0.0.0.0/0 0 : 1 0 : 1 0x06/0x0F",
                34,
                "neither exact",
            ),
            (
                "@1.2.3.4/8 0.0.0.0/0 0 : 1 0 : 1 0x06/0xFF junk",
                44,
                "not a number",
            ),
            ("@1.2.3.4/8 0.0.0.0/0 0 - 1 0 : 1 0x06/0xFF", 24, "`:`"),
        ];
        for (text, column, what) in bad {
            let e = parse_rules(&format!("\n{text}\n")).unwrap_err();
            assert_eq!(e.line, 2, "{text}");
            assert_eq!(e.column, column, "{text}: {e}");
            assert!(e.message.contains(what), "{text}: {e}");
        }
        let e = parse_trace("1 2 3 4 5 1\n1 2 3 x 5 1\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 7), "{e}");
        // Nothing panics on any prefix of a good line.
        let good = "@175.77.88.155/32 119.106.158.230/32 0 : 65535 6888 : 6888 0x06/0xFF";
        for cut in 0..good.len() {
            let _ = parse_rules(&good[..cut]);
        }
    }
}
