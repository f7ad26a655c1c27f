//! The tcpdump filter language (pcap-filter(7)) as libpcap 1.10 reads it.
//!
//! ```text
//! "tcp port 80 and host 198.18.0.1"
//!    │ lexer::tokenize   → tokens (libpcap's scanner rules)
//!    │ parser::parse     → Ast (every node keeps its byte span; qualifiers already inherited)
//!    │ lower::lower      → Pred (the IR every engine compiles from)
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod ast;
pub mod fxhash;
pub mod lexer;
pub mod lower;
pub mod names;
pub mod parser;
pub mod pred;
pub mod span;

pub use lower::{Context, Origin, Resolve, lower};
pub use parser::parse;
pub use pred::Pred;

/// Parse and lower `expr` for `ctx`: the whole front end in one call.
pub fn compile(expr: &str, ctx: &Context) -> Result<Pred, Error> {
    lower::check_link_type(ctx, expr)?;
    let ast = parse(expr)?;
    lower(ast.as_ref(), expr, ctx)
}
pub use span::{Error, ErrorKind, Span};
