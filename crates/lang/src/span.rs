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
/// One pointer wide: a `Result<NodeId, Error>` or `Result<u32, Error>` is returned in
/// registers, and the compiler's every `?` reads no more than that.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(Box<Inner>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Inner {
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
        Error(Box::new(Inner {
            kind,
            message: message.into(),
            span,
            source: source.to_owned(),
        }))
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The message, without the expression and caret.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Where in the expression, if known.
    pub fn span(&self) -> Option<Span> {
        self.0.span
    }

    /// The expression the error is about.
    pub fn expression(&self) -> &str {
        &self.0.source
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Inner {
            message,
            span,
            source,
            ..
        } = &*self.0;
        f.write_str(message.trim_end())?;
        let Some(span) = *span else {
            return Ok(());
        };
        // One line of context (at most about 100 characters around the span of a long
        // expression); tabs and newlines become spaces so that the caret lines up.
        let chars: Vec<char> = source
            .chars()
            .map(|c| if c.is_whitespace() { ' ' } else { c })
            .collect();
        let start = span.start.min(source.len());
        let end = span.end.clamp(start, source.len());
        let col = source.get(..start).map_or(0, |s| s.chars().count());
        let width = source
            .get(start..end)
            .map_or(1, |s| s.chars().count().max(1));
        const CONTEXT: usize = 50;
        let from = col.saturating_sub(CONTEXT);
        let to = (col + width.min(60) + CONTEXT).min(chars.len());
        let mut line: String = chars[from..to].iter().collect();
        let mut caret_col = col - from;
        if from > 0 {
            line.insert(0, '…');
            caret_col += 1;
        }
        if to < chars.len() {
            line.push('…');
        }
        let width = width.min(to.saturating_sub(col).max(1));
        write!(
            f,
            "\n  {line}\n  {}{}",
            " ".repeat(caret_col),
            "^".repeat(width)
        )
    }
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
}
