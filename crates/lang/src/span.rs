//! Byte spans into the filter expression, and errors that point at them.

use std::fmt;

/// A byte range `start..end` of the expression text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// The span `start..end`.
    pub const fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// What kind of problem an [`Error`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A character or token that no rule accepts (libpcap's scanner errors).
    Lexical,
    /// The tokens do not form an expression (libpcap's "syntax error").
    Syntax,
    /// The expression is well formed but means nothing on this link type, or names something
    /// unknown (an unknown host, port or protocol, a bad qualifier, a value out of range…).
    Semantic,
    /// The expression is too deeply nested or too large.
    Limit,
    /// The filter can never accept a packet (libpcap's "expression rejects all packets").
    RejectsAll,
}

/// An error in a filter expression: what is wrong and where.
///
/// `Display` renders the message, then the expression with a caret line under the offending
/// part (when the error has a position):
///
/// ```text
/// unknown port 'htp'
///   tcp port htp
///            ^^^
/// ```
///
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    span: Option<Span>,
    source: String,
}

impl Error {
    /// An error of `kind` with `message`, pointing at `span` of `source`.
    pub fn new(
        kind: ErrorKind,
        message: impl Into<String>,
        span: Option<Span>,
        source: &str,
    ) -> Error {
        Error {
            kind,
            message: message.into(),
            span,
            source: source.to_owned(),
        }
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the expression and caret.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where in the expression, if known.
    pub fn span(&self) -> Option<Span> {
        self.span
    }

    /// The expression the error is about.
    pub fn expression(&self) -> &str {
        &self.source
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.span {
            Some(span) => f.write_str(&render(&self.source, span, &self.message)),
            None => f.write_str(self.message.trim_end()),
        }
    }
}

impl Span {
    /// The one-character span at `line` and `column` of `text` (both from 1, the column in
    /// characters; clamped to the text): for readers that count lines and columns.
    pub fn at(text: &str, line: usize, column: usize) -> Span {
        let mut start = text.len();
        let mut lines = 0;
        for (i, l) in text.split_inclusive('\n').enumerate() {
            if i + 1 == line.max(1) {
                let line_start = text.len() - text[lines..].len();
                let body = l.trim_end_matches(['\n', '\r']);
                start = line_start
                    + body
                        .char_indices()
                        .nth(column.max(1) - 1)
                        .map_or(body.len(), |(o, _)| o);
                break;
            }
            lines += l.len();
        }
        let end = text[start..]
            .chars()
            .next()
            .map_or(start, |c| start + c.len_utf8());
        Span::new(start, end)
    }
}

/// The largest char boundary of `text` at or before `i`.
fn floor_boundary(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// netsift's one rendering of an error in a text (a filter expression, a graph, an FPL program,
/// an iptables rule set, an offload rules file): `message`, then the line of `text` holding
/// `span.start` indented by two spaces, with carets under the span (clipped to that line; one
/// caret for an empty span). When `text` has a line break, the message ends with the line
/// number: `unknown class 'foo' (line 3)`. Tabs and other whitespace become spaces so that the
/// carets line up; a long line is cut to about 50 characters either side of the span, `…`
/// marking the cuts.
///
/// ```
/// use netsift_lang::{Span, span::render};
///
/// assert_eq!(
///     render("tcp port htp", Span::new(9, 12), "unknown port 'htp'"),
///     "unknown port 'htp'\n  tcp port htp\n           ^^^"
/// );
/// ```
pub fn render(text: &str, span: Span, message: &str) -> String {
    let start = floor_boundary(text, span.start);
    let end = floor_boundary(text, span.end.max(start));
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let mut out = message.trim_end().to_string();
    if text.contains('\n') {
        let line_no = text[..start].matches('\n').count() + 1;
        out.push_str(&format!(" (line {line_no})"));
    }
    let chars: Vec<char> = text[line_start..line_end]
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    let col = text[line_start..start].chars().count();
    let width = text[start..end.min(line_end).max(start)]
        .chars()
        .count()
        .max(1);
    const CONTEXT: usize = 50;
    let from = col.saturating_sub(CONTEXT);
    let to = (col + width.min(60) + CONTEXT).min(chars.len());
    let mut line: String = chars[from.min(to)..to].iter().collect();
    let mut caret_col = col - from;
    if from > 0 {
        line.insert(0, '…');
        caret_col += 1;
    }
    if to < chars.len() {
        line.push('…');
    }
    let width = width.min(to.saturating_sub(col).max(1));
    out.push_str(&format!(
        "\n  {}\n  {}{}",
        line.trim_end(),
        " ".repeat(caret_col),
        "^".repeat(width)
    ));
    out
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_under_the_span() {
        let e = Error::new(
            ErrorKind::Semantic,
            "unknown port 'htp'",
            Some(Span::new(9, 12)),
            "tcp port htp",
        );
        assert_eq!(
            e.to_string(),
            "unknown port 'htp'\n  tcp port htp\n           ^^^"
        );
        let e = Error::new(
            ErrorKind::Syntax,
            "unexpected end",
            Some(Span::new(8, 8)),
            "tcp port",
        );
        assert_eq!(e.to_string(), "unexpected end\n  tcp port\n          ^");
        let e = Error::new(
            ErrorKind::RejectsAll,
            "expression rejects all packets",
            None,
            "ip and arp",
        );
        assert_eq!(e.to_string(), "expression rejects all packets");
    }

    #[test]
    fn texts_of_several_lines() {
        let text = "first line\n\tsecond\tline é\nthird";
        let at = text.find("line é").unwrap();
        assert_eq!(
            render(text, Span::new(at, at + 4), "bad word"),
            "bad word (line 2)\n   second line é\n          ^^^^"
        );
        assert_eq!(Span::at(text, 2, 9), Span::new(at, at + 1));
        let e = text.find('é').unwrap();
        assert_eq!(Span::at(text, 2, 14), Span::new(e, e + 2));
        assert_eq!(
            Span::at(text, 3, 1),
            Span::new(text.len() - 5, text.len() - 4)
        );
        // Past the end: an empty span at the end, a caret after the text.
        assert_eq!(Span::at(text, 9, 9), Span::new(text.len(), text.len()));
        assert_eq!(
            render("ab\n", Span::new(1, 2), "m"),
            "m (line 1)\n  ab\n   ^"
        );
        // A long line is cut around the span.
        let long = format!("{}X{}", "a".repeat(100), "b".repeat(100));
        let r = render(&long, Span::new(100, 101), "here");
        assert!(r.contains("\n  …aaaa"), "{r}");
        assert!(r.ends_with(&format!("{}^", " ".repeat(53))), "{r}");
    }
}
