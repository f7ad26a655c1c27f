//! The single error type returned by every header view.

use core::fmt;

/// What went wrong while checking a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The buffer ends before the structure does: `needed` bytes are
    /// required, only `available` are present.
    Truncated,
    /// A length or offset field holds an impossible value: it must be at
    /// least `needed`, the field says `available`.
    Malformed,
    /// A walk over a chain (extension headers, options, chunks) hit its
    /// safety bound: at most `needed` elements are allowed, `available` were
    /// seen.
    LimitExceeded,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Truncated => "truncated",
            ErrorKind::Malformed => "malformed",
            ErrorKind::LimitExceeded => "exceeds limit",
        })
    }
}

/// A header check failure: which layer, which part, where, and by how much.
///
/// The `offset` is relative to the start of the buffer the view was given;
/// use [`Error::offset_by`] to rebase it when the view sits inside a larger
/// frame. The meaning of `needed` / `available` depends on [`ErrorKind`]; the
/// [`Display`](fmt::Display) output spells it out, e.g.
/// `tcp header truncated at offset 34: needs 20 bytes, 12 available`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error {
    kind: ErrorKind,
    layer: &'static str,
    what: &'static str,
    offset: usize,
    needed: usize,
    available: usize,
}

impl Error {
    /// A [`ErrorKind::Truncated`] error: `what` of `layer`, starting at
    /// `offset`, needs `needed` bytes but only `available` are there.
    pub const fn truncated(
        layer: &'static str,
        what: &'static str,
        offset: usize,
        needed: usize,
        available: usize,
    ) -> Error {
        Error {
            kind: ErrorKind::Truncated,
            layer,
            what,
            offset,
            needed,
            available,
        }
    }

    /// A [`ErrorKind::Malformed`] error: field `what` of `layer` at `offset`
    /// must be at least `minimum` but holds `value`.
    pub const fn malformed(
        layer: &'static str,
        what: &'static str,
        offset: usize,
        minimum: usize,
        value: usize,
    ) -> Error {
        Error {
            kind: ErrorKind::Malformed,
            layer,
            what,
            offset,
            needed: minimum,
            available: value,
        }
    }

    /// A [`ErrorKind::LimitExceeded`] error: a chain of `what` in `layer`
    /// is longer than `limit` elements (`seen` so far) at `offset`.
    pub const fn limit_exceeded(
        layer: &'static str,
        what: &'static str,
        offset: usize,
        limit: usize,
        seen: usize,
    ) -> Error {
        Error {
            kind: ErrorKind::LimitExceeded,
            layer,
            what,
            offset,
            needed: limit,
            available: seen,
        }
    }

    /// The kind of failure.
    pub const fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The protocol layer that failed, e.g. `"tcp"`, `"ipv4"`.
    pub const fn layer(&self) -> &'static str {
        self.layer
    }

    /// The part of the layer that failed, e.g. `"header"`, `"option"`,
    /// `"header length"`.
    pub const fn what(&self) -> &'static str {
        self.what
    }

    /// Byte offset of the failing structure, relative to the buffer the view
    /// was built on (see [`Error::offset_by`]).
    pub const fn offset(&self) -> usize {
        self.offset
    }

    /// Bytes needed ([`ErrorKind::Truncated`]), minimum field value
    /// ([`ErrorKind::Malformed`]) or chain limit
    /// ([`ErrorKind::LimitExceeded`]).
    pub const fn needed(&self) -> usize {
        self.needed
    }

    /// Bytes available ([`ErrorKind::Truncated`]), actual field value
    /// ([`ErrorKind::Malformed`]) or elements seen
    /// ([`ErrorKind::LimitExceeded`]).
    pub const fn available(&self) -> usize {
        self.available
    }

    /// The same error with its offset moved by `base` bytes, for a view
    /// that starts `base` bytes into a larger frame.
    #[must_use]
    pub const fn offset_by(mut self, base: usize) -> Error {
        self.offset = self.offset.saturating_add(base);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Error {
            kind,
            layer,
            what,
            offset,
            needed,
            available,
        } = *self;
        match kind {
            ErrorKind::Truncated => write!(
                f,
                "{layer} {what} truncated at offset {offset}: needs {needed} bytes, {available} available"
            ),
            ErrorKind::Malformed => write!(
                f,
                "{layer} {what} malformed at offset {offset}: must be at least {needed}, is {available}"
            ),
            ErrorKind::LimitExceeded => write!(
                f,
                "{layer} {what} exceed limit at offset {offset}: at most {needed} allowed, {available} seen"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Shorthand for results of header checks.
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_truncated() {
        let e = Error::truncated("tcp", "header", 0, 20, 12).offset_by(34);
        assert_eq!(
            e.to_string(),
            "tcp header truncated at offset 34: needs 20 bytes, 12 available"
        );
        assert_eq!(e.kind(), ErrorKind::Truncated);
        assert_eq!(e.layer(), "tcp");
        assert_eq!(e.what(), "header");
        assert_eq!(e.offset(), 34);
        assert_eq!(e.needed(), 20);
        assert_eq!(e.available(), 12);
    }

    #[test]
    fn display_malformed_and_limit() {
        let e = Error::malformed("ipv4", "header length", 0, 20, 8);
        assert_eq!(
            e.to_string(),
            "ipv4 header length malformed at offset 0: must be at least 20, is 8"
        );
        let e = Error::limit_exceeded("ipv6", "extension headers", 40, 16, 17);
        assert_eq!(
            e.to_string(),
            "ipv6 extension headers exceed limit at offset 40: at most 16 allowed, 17 seen"
        );
        assert_eq!(ErrorKind::Malformed.to_string(), "malformed");
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert!(boxed.to_string().contains("ipv6"));
    }

    #[test]
    fn offset_saturates() {
        let e = Error::truncated("x", "y", usize::MAX, 1, 0).offset_by(5);
        assert_eq!(e.offset(), usize::MAX);
    }
}
