//! Errors: one opaque [`Error`] with a [`ErrorKind`], a message and (for problems in the source)
//! a [`Span`] that [`Error::render`] underlines with carets.

use std::fmt;

/// A range of the source text, with the 1-based line and column (in characters) of its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Span {
    /// Byte offset of the first character.
    pub start: usize,
    /// Byte offset just past the last character.
    pub end: usize,
    /// Line of `start`, from 1.
    pub line: u32,
    /// Column of `start` in characters, from 1.
    pub col: u32,
}

impl Span {
    /// The span from the start of `self` to the end of `other`.
    pub fn to(self, other: Span) -> Span {
        Span {
            end: other.end.max(self.start),
            ..self
        }
    }
}

/// What kind of problem an [`Error`] is.
///
/// New kinds may be added; match with a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The text is not FPL (bad token, unexpected token, unknown name).
    Syntax,
    /// Expressions or statements are nested deeper than the parser allows.
    Nesting,
    /// A `FOR` loop whose iteration count cannot be bounded at compile time.
    Unbounded,
    /// A constant `MEM` or `R` index outside the MBuf or the register file.
    OutOfRange,
    /// `EXTERN` names a function that is not registered.
    UnknownExtern,
    /// `EXTERN` parameters that do not fit the MBuf, or are not constants.
    ExternParams,
    /// The worst-case cost of the program exceeds [`crate::MAX_COST`].
    TooCostly,
    /// A misplaced construct (`BREAK` outside a loop) or a bad configuration (MBuf size).
    Invalid,
    /// Native code could not be generated or mapped.
    Native,
}

/// Why a program was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    span: Option<Span>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, span: Option<Span>, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            span,
        }
    }

    /// The kind of problem.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without position.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where in the source the problem is, if it is in the source.
    pub fn span(&self) -> Option<Span> {
        self.span
    }

    /// The error rendered under the offending source line, with carets under the span:
    /// netsift's one caret rendering ([`netsift_lang::span::render`]).
    ///
    /// ```text
    /// unknown external function `Nope` (line 2)
    ///   R[0]=EXTERN(Nope,0,0);
    ///               ^^^^
    /// ```
    pub fn render(&self, src: &str) -> String {
        match self.span {
            Some(sp) => netsift_lang::span::render(
                src,
                netsift_lang::Span::new(sp.start, sp.end),
                &self.message,
            ),
            None => self.message.clone(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.span {
            Some(sp) => write!(f, "line {}, column {}: {}", sp.line, sp.col, self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}
