//! Code generation: from the [`Pred`] IR to a classic BPF [`Program`].
//!
//! - Without optimisation ([`Options::optimize`] false, `netsift compile -O0`) every test
//!   becomes its own block, in the predicate's order — the shape of libpcap's unoptimised code,
//!   with the same meaning on every packet, truncated or not.
//! - With optimisation, the predicate's decision graph is specialised along every path with what
//!   earlier tests proved (an Ethertype that was 0x0800 is not 0x86dd; a port that is 80 is not
//!   443), so that no test runs whose outcome is already known; identical blocks are shared and
//!   repeated reads of the same field are dropped (see `opt`). A test is only skipped when an
//!   earlier test read the same bytes, so the optimised program rejects a packet for lack of
//!   bytes exactly when the unoptimised one does — except where a read's value cannot matter
//!   (`x & 0 == 0`, a test whose two outcomes lead to the same place), which is dropped as
//!   libpcap's optimiser drops it.
//!
//! Filters with `protochain`, Geneve or libpcap's accumulator-reading `byte N &|` are never
//! optimised, as in libpcap.

mod cfg;
mod emit;
mod opt;
mod unopt;

use std::fmt;

use netsift_lang::Pred;

use crate::insn::{Insn, Program, code};

/// Compilation options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Run the optimiser.
    pub optimize: bool,
    /// The value `ret` returns for accepted packets (the snap length).
    pub snaplen: u32,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            optimize: true,
            snaplen: 262_144,
        }
    }
}

/// Why a predicate could not be compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompileErrorKind {
    /// The optimiser proved that no packet is ever accepted (libpcap: "expression rejects all
    /// packets").
    RejectsAll,
    /// The arithmetic needs more than the 16 scratch registers.
    TooManyRegisters,
    /// The program is longer than the kernel's limit of 4096 instructions.
    TooLong(usize),
    /// A constant division or modulo by zero, or a shift by more than 31, found while folding.
    BadConstant(&'static str),
}

/// A compilation error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    kind: CompileErrorKind,
}

impl CompileError {
    pub(crate) fn too_many_registers() -> CompileError {
        CompileError {
            kind: CompileErrorKind::TooManyRegisters,
        }
    }

    pub(crate) fn new(kind: CompileErrorKind) -> CompileError {
        CompileError { kind }
    }

    /// What went wrong.
    pub fn kind(&self) -> CompileErrorKind {
        self.kind
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            CompileErrorKind::RejectsAll => f.write_str("expression rejects all packets"),
            CompileErrorKind::TooManyRegisters => {
                f.write_str("too many registers needed to evaluate expression")
            }
            CompileErrorKind::TooLong(n) => write!(
                f,
                "the program has {n} instructions, more than the kernel's limit of {}",
                code::MAXINSNS
            ),
            CompileErrorKind::BadConstant(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CompileError {}

/// Compile `pred` to classic BPF.
pub fn compile(pred: &Pred, opts: &Options) -> Result<Program, CompileError> {
    // The empty filter: one `ret`, optimised or not (as libpcap).
    if pred.is_true() {
        return Ok(Program::new(vec![Insn::stmt(
            code::RET | code::K,
            opts.snaplen,
        )]));
    }
    compile_with(pred, opts)
}

fn compile_with(pred: &Pred, opts: &Options) -> Result<Program, CompileError> {
    let cfg = if opts.optimize && pred.optimizable() {
        opt::optimize(pred, opts.snaplen)?
    } else {
        // Scratch registers below `floor` belong to Geneve's offsets.
        let floor = geneve_registers(pred);
        unopt::Unopt::new(pred, opts.snaplen, floor).run()?
    };
    let program = cfg.linearize();
    if program.len() > code::MAXINSNS {
        return Err(CompileError::new(CompileErrorKind::TooLong(program.len())));
    }
    Ok(program)
}

fn geneve_registers(pred: &Pred) -> u8 {
    use netsift_lang::pred::{Node, Special};
    pred.reachable()
        .iter()
        .filter_map(|&id| match pred.node(id) {
            Node::Special(Special::GeneveOffsets { reg_payload, .. }) => Some(reg_payload + 1),
            Node::Special(Special::PflogOffset { payload }) => Some(payload + 1),
            Node::Special(Special::LinkOffsets { hdr, payload, .. }) => {
                (*hdr).max(*payload).map(|r| r + 1)
            }
            _ => None,
        })
        .max()
        .unwrap_or(0)
}
