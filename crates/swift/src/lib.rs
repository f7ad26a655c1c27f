//! Swift: a packet filter of CISC instructions grouped in passes, changed in place while
//! packets flow (Wu, Xie, Wang, NSDI 2008).
//!
//! - [`isa`]: the 32-byte instructions, their addressing modes and operations.
//! - [`filter`]: passes in disjunctive normal form, the update API of the paper's Table 2
//!   ([`filter::Writer`]), lock-free readers ([`filter::Reader`]) and hierarchical execution.
//! - [`build`]: the object-oriented builder (the paper's ooswift) for common primitives.
//! - [`from_pred`]: the "BPF-friendly" API: a tcpdump expression (as a `Pred`) mapped to passes.
//! - [`ftpcap`]: the paper's FTPCap application: follow FTP control connections, filter their
//!   data connections.

#![deny(missing_docs)]

pub mod build;
mod exec;
pub mod filter;
pub mod from_pred;
pub mod ftpcap;
pub mod isa;

pub use filter::{PassId, Reader, UpdateError, Writer, open};
pub use isa::{Inst, Mode, Op, Outcome};
