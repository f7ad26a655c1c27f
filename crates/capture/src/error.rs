//! The error type of this crate.

use std::borrow::Cow;
use std::fmt;
use std::io;

/// What went wrong, in broad categories.
///
/// New kinds may be added; match with a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The underlying reader or writer failed; [`std::error::Error::source`] gives the
    /// [`io::Error`].
    Io,
    /// The input is not a capture file this crate knows: the first four bytes are neither a pcap
    /// magic number nor a pcapng section header block, or a section header block has a bad
    /// byte-order magic.
    BadMagic,
    /// The input ends in the middle of a file header, record or block. The offset is that of the
    /// start of the incomplete record.
    Truncated,
    /// A header or block is structurally invalid: an impossible length, a trailer that does not
    /// match, a packet on an interface that was never described, an oversized packet, ...
    Corrupt,
    /// The input is well formed but uses a version or feature this crate does not read.
    Unsupported,
    /// A writer was given something the output format cannot represent (a timestamp out of
    /// range, a link type that does not fit, a packet of another link type than the file's, ...).
    InvalidInput,
}

impl ErrorKind {
    /// The word that starts the error message of this kind.
    fn prefix(self) -> &'static str {
        match self {
            ErrorKind::Io => "I/O error on",
            ErrorKind::BadMagic => "unrecognized",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::InvalidInput => "cannot write",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Io => "I/O error",
            ErrorKind::BadMagic => "not a capture file",
            ErrorKind::Truncated => "truncated capture",
            ErrorKind::Corrupt => "corrupt capture",
            ErrorKind::Unsupported => "unsupported capture",
            ErrorKind::InvalidInput => "invalid input for the output format",
        })
    }
}

/// An error from reading or writing a capture.
///
/// It carries an [`ErrorKind`], the byte offset in the file of the record where the problem is
/// (when there is one), and a message. It displays as
/// `KIND WHAT at offset OFFSET: DETAIL`, for example
///
/// ```text
/// corrupt pcapng block at offset 1234: block total length 8 is less than the minimum of 12
/// truncated pcap record at offset 5678: header says 1514 bytes, file ends after 200
/// ```
pub struct Error {
    kind: ErrorKind,
    offset: Option<u64>,
    what: Cow<'static, str>,
    detail: String,
    source: Option<io::Error>,
}

impl Error {
    /// Makes an error of `kind` about `what` (for example `"pcap record"`) at `offset`.
    pub(crate) fn new(
        kind: ErrorKind,
        offset: Option<u64>,
        what: impl Into<Cow<'static, str>>,
        detail: impl Into<String>,
    ) -> Error {
        Error {
            kind,
            offset,
            what: what.into(),
            detail: detail.into(),
            source: None,
        }
    }

    /// An [`ErrorKind::Corrupt`] error.
    pub(crate) fn corrupt(offset: u64, what: &'static str, detail: impl Into<String>) -> Error {
        Error::new(ErrorKind::Corrupt, Some(offset), what, detail)
    }

    /// An [`ErrorKind::Truncated`] error: the record at `offset` announced `needed` bytes but the
    /// file ended after `got`.
    pub(crate) fn truncated(offset: u64, what: &'static str, needed: u64, got: u64) -> Error {
        Error::new(
            ErrorKind::Truncated,
            Some(offset),
            what,
            format!("header says {needed} bytes, file ends after {got}"),
        )
    }

    /// An [`ErrorKind::Io`] error that keeps `err` as its source.
    pub(crate) fn io(
        offset: Option<u64>,
        what: impl Into<Cow<'static, str>>,
        err: io::Error,
    ) -> Error {
        let mut e = Error::new(ErrorKind::Io, offset, what, err.to_string());
        e.source = Some(err);
        e
    }

    /// An [`ErrorKind::InvalidInput`] error of a writer.
    pub(crate) fn invalid_input(what: &'static str, detail: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidInput, None, what, detail)
    }

    /// The category of the error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The byte offset in the file of the record, block or header where the problem is, if the
    /// error is about a position in a file.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// What the error is about (for example `pcap file header`, `pcapng enhanced packet block`).
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The specific part of the message, without the kind, the place and the offset (for example
    /// `block total length 8 is less than the minimum of 12`).
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind.prefix(), self.what)?;
        if let Some(offset) = self.offset {
            write!(f, " at offset {offset}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind)
            .field("offset", &self.offset)
            .field("message", &self.to_string());
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<Error> for io::Error {
    /// Converts to an [`io::Error`]: an I/O error gives back its source, a truncated file becomes
    /// [`io::ErrorKind::UnexpectedEof`], a writer's invalid input
    /// [`io::ErrorKind::InvalidInput`], anything else [`io::ErrorKind::InvalidData`].
    fn from(err: Error) -> io::Error {
        let kind = match err.kind {
            ErrorKind::Io => {
                if let Some(source) = err.source {
                    return source;
                }
                io::ErrorKind::Other
            }
            ErrorKind::Truncated => io::ErrorKind::UnexpectedEof,
            ErrorKind::InvalidInput => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_formats() {
        let e = Error::corrupt(
            1234,
            "pcapng block",
            "block total length 8 is less than the minimum of 12",
        );
        assert_eq!(
            e.to_string(),
            "corrupt pcapng block at offset 1234: block total length 8 is less than the minimum of 12"
        );
        let e = Error::truncated(5678, "pcap record", 1514, 200);
        assert_eq!(
            e.to_string(),
            "truncated pcap record at offset 5678: header says 1514 bytes, file ends after 200"
        );
        assert_eq!(e.kind(), ErrorKind::Truncated);
        assert_eq!(e.offset(), Some(5678));
        let e = Error::invalid_input("pcap record", "timestamp is negative");
        assert_eq!(
            e.to_string(),
            "cannot write pcap record: timestamp is negative"
        );
        assert_eq!(e.offset(), None);
    }

    #[test]
    fn io_source_is_kept() {
        use std::error::Error as _;
        let e = Error::io(
            Some(3),
            "pcap record",
            io::Error::new(io::ErrorKind::PermissionDenied, "nope"),
        );
        assert_eq!(e.to_string(), "I/O error on pcap record at offset 3: nope");
        let source = e.source().expect("source");
        assert_eq!(source.to_string(), "nope");
        let back: io::Error = e.into();
        assert_eq!(back.kind(), io::ErrorKind::PermissionDenied);
        let back: io::Error = Error::truncated(0, "pcap record", 2, 1).into();
        assert_eq!(back.kind(), io::ErrorKind::UnexpectedEof);
    }
}
