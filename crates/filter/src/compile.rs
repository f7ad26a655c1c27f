//! Compiling an expression for a target: the front end, then classic BPF.

use netsift_bpf::Program;
use netsift_bpf::compile::{CompileErrorKind, Options};
use netsift_lang::Pred;

use crate::error::{Error, ErrorKind};
use crate::target::Target;

/// Parses and lowers `expr` for `target`: the filter's meaning, which every engine compiles
/// from. At optimisation level 0 the predicate keeps every test libpcap's code generator emits.
pub fn compile(expr: &str, target: &Target) -> Result<Pred, Error> {
    Ok(netsift_lang::compile(expr, &target.context())?)
}

/// The classic BPF program of `pred` for `target`: optimised or not as the target says,
/// returning its snap length for accepted packets. `expr` is the text `pred` was compiled from;
/// an error points at it.
pub fn program(pred: &Pred, target: &Target, expr: &str) -> Result<Program, Error> {
    netsift_bpf::compile::compile(
        pred,
        &Options {
            optimize: target.optimize,
            snaplen: target.snaplen,
        },
    )
    .map_err(|e| {
        let kind = match e.kind() {
            CompileErrorKind::RejectsAll => ErrorKind::RejectsAll,
            CompileErrorKind::TooLong(_) | CompileErrorKind::TooManyRegisters => ErrorKind::Limit,
            _ => ErrorKind::Semantic,
        };
        Error::whole(kind, e.to_string(), expr)
    })
}

/// [`compile`], then [`program`]: the classic BPF program of `expr` for `target`, as
/// `pcap_compile` makes it.
pub fn compile_program(expr: &str, target: &Target) -> Result<Program, Error> {
    program(&compile(expr, target)?, target, expr)
}
