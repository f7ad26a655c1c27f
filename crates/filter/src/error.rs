//! Errors of compiling a filter and building it.

use std::fmt;

use crate::engine::Engine;

/// What kind of problem an [`Error`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A character or token that no rule accepts (libpcap's scanner errors).
    Lexical,
    /// The tokens do not form an expression (libpcap's "syntax error").
    Syntax,
    /// The expression means nothing for this target, or names something unknown.
    Semantic,
    /// The expression is too deeply nested or too large, or its program too long.
    Limit,
    /// The filter can never accept a packet (libpcap's "expression rejects all packets").
    RejectsAll,
    /// A classic BPF program that is not valid.
    InvalidProgram,
    /// The engine asked for cannot run this filter (Swift cannot express it, eBPF runs
    /// Ethernet frames only, …).
    Unsupported,
    /// The kernel refused the filter (loading an eBPF program: root is needed, the verifier
    /// said no).
    Kernel,
}

/// An error of compiling or building a filter: what is wrong and, for an expression, where.
///
/// `Display` renders the message and, when the error is about an expression, the expression
/// with a caret line under the offending part (the filter language's rendering).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    repr: Repr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Repr {
    /// An error in an expression, rendered with its caret.
    Expression(netsift_lang::Error),
    /// An engine that was asked for cannot serve: what it does or needs.
    Refused(Engine, String),
    /// A classic program that does not validate: the validator's message.
    Invalid(String),
    /// Anything else.
    Message(String),
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            repr: Repr::Message(message.into()),
        }
    }

    /// `engine` cannot serve: `says` completes the sentence that starts with the engine's name,
    /// separator included (" runs filter expressions, not classic BPF programs", ": the kernel
    /// refuses …").
    pub(crate) fn refused(kind: ErrorKind, engine: Engine, says: impl Into<String>) -> Error {
        Error {
            kind,
            repr: Repr::Refused(engine, says.into()),
        }
    }

    /// A classic program that does not validate; `why` is the validator's message.
    pub(crate) fn invalid(why: String) -> Error {
        Error {
            kind: ErrorKind::InvalidProgram,
            repr: Repr::Invalid(why),
        }
    }

    /// An error about the whole of `expr` (a problem of the program compiled from it).
    pub(crate) fn whole(kind: ErrorKind, message: String, expr: &str) -> Error {
        let span = netsift_lang::Span::new(0, expr.len());
        Error {
            kind,
            repr: Repr::Expression(netsift_lang::Error::new(
                netsift_lang::ErrorKind::Semantic,
                message,
                Some(span),
                expr,
            )),
        }
    }

    /// What kind of problem.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message alone, without the expression and caret (and, for an engine that cannot
    /// serve, without the engine's name: see [`Error::refusal`]).
    pub fn message(&self) -> &str {
        match &self.repr {
            Repr::Expression(e) => e.message(),
            Repr::Refused(_, m) | Repr::Invalid(m) | Repr::Message(m) => m,
        }
    }

    /// For an engine that was asked for and cannot serve: the engine, and what completes the
    /// sentence about it, from its separator on (a caller may name the engine its own way, as
    /// the command line names its `--engine` flag).
    pub fn refusal(&self) -> Option<(Engine, &str)> {
        match &self.repr {
            Repr::Refused(engine, says) => Some((*engine, says)),
            _ => None,
        }
    }
}

impl From<netsift_lang::Error> for Error {
    fn from(e: netsift_lang::Error) -> Error {
        let kind = match e.kind() {
            netsift_lang::ErrorKind::Lexical => ErrorKind::Lexical,
            netsift_lang::ErrorKind::Syntax => ErrorKind::Syntax,
            netsift_lang::ErrorKind::Limit => ErrorKind::Limit,
            netsift_lang::ErrorKind::RejectsAll => ErrorKind::RejectsAll,
            _ => ErrorKind::Semantic,
        };
        Error {
            kind,
            repr: Repr::Expression(e),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Expression(e) => e.fmt(f),
            Repr::Refused(engine, says) => write!(f, "{engine}{says}"),
            Repr::Invalid(why) => write!(f, "the program is not valid: {why}"),
            Repr::Message(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}
