//! FPL-2, the FFPF packet language (Bos et al., "FFPF: Fairly Fast Packet Filters", §3.3):
//! filters with persistent memory, bounded loops and native external functions.
//!
//! ```
//! use netsift_fpl::{Program, Registry, NREGS};
//!
//! // Fig. 6 of the paper: count packets per TCP flow in the MBuf.
//! let src = "IF (PKT.IP_PROTO == PROTO_TCP) THEN
//!                R[0] = HASH(26, 12, 256);   // addresses and ports
//!                MEM[R[0]]++;
//!            FI";
//! let prog = Program::compile(src, &Registry::standard(), 256)?;
//! let mut mem = vec![0u64; 256];
//! let mut regs = [0u64; NREGS];
//! let pkt = [0u8; 60];
//! assert_eq!(prog.run_interp(&pkt, 60, &mut mem, &mut regs), 0);
//! assert!(prog.report().max_ops > 0);
//! # Ok::<(), netsift_fpl::Error>(())
//! ```
//!
//! # Pipeline
//!
//! text → [`parse`] (tokens, then an [`ast`] with spans; nesting bounded) → [`check`] (names,
//! macros, loop bounds, index ranges, externs, cost) → [`ir`] → the reference interpreter
//! ([`Program::run_interp`]) or x86-64 code ([`Program::native`], built with the encoder and
//! executable memory of `netsift-jit`). The language reference is `docs/fpl.md`.
//!
//! # State: MBuf and registers
//!
//! The MBuf is a caller-owned `&mut [u64]`: `MEM[n]` is the n-th **64-bit word** (the unit of
//! all MBuf offsets, including `EXTERN`'s). Its size, fixed at compile time, is a power of two so
//! that computed indexes are masked with `size - 1`; a slice that is longer is fine (only the
//! first `size` words are used), a shorter one makes `run` return 0 without running. The
//! [`NREGS`] registers `R[0..16]` are a caller-owned [`Regs`] array as well, so the caller
//! decides what persists between packets (the FFPF graph runtime keeps both next to the
//! filter; Fig. 7 of the paper relies on `R[0]` persisting).
//!
//! # Semantics in brief
//!
//! Values are unsigned 64-bit integers with wrapping arithmetic; `x / 0` and `x % 0` are 0;
//! shifts by 64 or more give 0. Packet loads are big-endian; a load not wholly inside the
//! captured bytes **yields 0** and the filter goes on (both engines). `RETURN (v)` ends the
//! filter with `v`; falling off the end returns 0.

#![deny(missing_docs)]

pub mod ast;
pub mod check;
pub mod error;
pub mod externs;
pub mod interp;
pub mod ir;
#[cfg(target_arch = "x86_64")]
mod native;
pub mod parse;
pub mod proto;

use std::fmt;
use std::sync::Arc;

pub use error::{Error, ErrorKind, Span};
pub use externs::{ExternCall, ExternDef, ExternFn, Registry};

/// Number of registers `R[0..NREGS]`.
pub const NREGS: usize = 16;
/// The register file.
pub type Regs = [u64; NREGS];
/// Largest worst-case number of operations per packet the checker accepts.
pub const MAX_COST: u64 = 1 << 24;
/// Largest MBuf, in 64-bit words.
pub const MAX_MBUF_WORDS: usize = 1 << 24;

/// What the checker proved about a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// Upper bound on IR operations executed per packet (extern calls and `HASH` count one
    /// each; their own work is linear in the packet length).
    pub max_ops: u64,
    /// Every `FOR` loop: (line, maximum iterations).
    pub loops: Vec<(u32, u64)>,
    /// Number of `EXTERN` call sites.
    pub extern_calls: usize,
    /// Distinct external functions called.
    pub externs: Vec<String>,
    /// Number of `HASH` call sites.
    pub hash_calls: usize,
    /// MBuf size in 64-bit words.
    pub mbuf_words: usize,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "max operations per packet: {}", self.max_ops)?;
        for (line, n) in &self.loops {
            writeln!(f, "loop at line {line}: at most {n} iterations")?;
        }
        writeln!(
            f,
            "extern calls: {} ({}); HASH calls: {}",
            self.extern_calls,
            if self.externs.is_empty() {
                "none".to_string()
            } else {
                self.externs.join(", ")
            },
            self.hash_calls
        )?;
        write!(f, "MBuf: {} words of 64 bits", self.mbuf_words)
    }
}

/// A checked FPL program.
#[derive(Clone)]
pub struct Program {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub body: Vec<ir::Stmt>,
    pub externs: Vec<externs::ExternSite>,
    pub mbuf_words: usize,
    pub report: Report,
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program")
            .field("body", &self.inner.body)
            .field("report", &self.inner.report)
            .finish_non_exhaustive()
    }
}

impl Program {
    /// Parses and checks `src` against the functions in `registry`, for an MBuf of
    /// `mbuf_words` 64-bit words (a power of two, at most [`MAX_MBUF_WORDS`]).
    pub fn compile(src: &str, registry: &Registry, mbuf_words: usize) -> Result<Program, Error> {
        let ast = parse::parse(src)?;
        let c = check::check(&ast, registry, mbuf_words)?;
        Ok(Program {
            inner: Arc::new(Inner {
                body: c.body,
                externs: c.externs,
                mbuf_words,
                report: c.report,
            }),
        })
    }

    /// The checker's findings.
    pub fn report(&self) -> &Report {
        &self.inner.report
    }

    /// MBuf size in 64-bit words.
    pub fn mbuf_words(&self) -> usize {
        self.inner.mbuf_words
    }

    /// The lowered program (what both engines run).
    pub fn ir(&self) -> &[ir::Stmt] {
        &self.inner.body
    }

    /// Runs the filter in the interpreter on one packet (`pkt` the captured bytes, `wire_len`
    /// the length on the wire), with the MBuf `mem` and the registers `regs`. Returns the
    /// `RETURN` value (0 when the program ends without one, or when `mem` is shorter than
    /// [`Program::mbuf_words`]).
    pub fn run_interp(&self, pkt: &[u8], wire_len: u32, mem: &mut [u64], regs: &mut Regs) -> u64 {
        let Some(mem) = mem.get_mut(..self.inner.mbuf_words) else {
            return 0;
        };
        interp::Vm {
            pkt,
            wire_len,
            mem,
            regs,
            externs: &self.inner.externs,
        }
        .run(&self.inner.body)
    }

    /// Compiles the program to x86-64 code (an error of kind [`ErrorKind::Native`] on other
    /// architectures or when executable memory cannot be mapped).
    pub fn native(&self) -> Result<NativeProgram, Error> {
        #[cfg(target_arch = "x86_64")]
        {
            let code = native::Code::new(self.inner.clone())?;
            Ok(NativeProgram { code })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Err(Error::new(
                ErrorKind::Native,
                None,
                format!("no native code generator for {}", std::env::consts::ARCH),
            ))
        }
    }
}

/// A program compiled to native code; [`NativeProgram::run`] gives exactly
/// [`Program::run_interp`]'s result and effects.
pub struct NativeProgram {
    #[cfg(target_arch = "x86_64")]
    code: native::Code,
}

impl fmt::Debug for NativeProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeProgram")
            .field("code_len", &self.code().len())
            .finish()
    }
}

impl NativeProgram {
    /// As [`Program::run_interp`].
    #[inline]
    pub fn run(&self, pkt: &[u8], wire_len: u32, mem: &mut [u64], regs: &mut Regs) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            self.code.run(pkt, wire_len, mem, regs)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (pkt, wire_len, mem, regs);
            0
        }
    }

    /// The machine code.
    pub fn code(&self) -> &[u8] {
        #[cfg(target_arch = "x86_64")]
        {
            self.code.bytes()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            &[]
        }
    }
}
