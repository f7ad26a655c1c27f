//! Classic BPF, the BSD Packet Filter's machine (McCanne & Jacobson, 1993), as libpcap and Linux
//! run it today.
//!
//! - [`Insn`] and [`Program`]: the instruction encoding of C's `struct bpf_insn`, opcode fields in
//!   [`code`].
//! - [`validate()`]: the kernel's and libpcap's static checks ([`Rules`]).
//! - [`Filter`]: a validated program, decoded once, run on packets with libpcap's exact
//!   semantics; one packet at a time or in batches.
//! - [`asm`]: the `tcpdump -d`, `-dd` and `-ddd` text formats, printed byte for byte as libpcap
//!   prints them, and parsed back.
//! - [`compile`]: code generation from the filter language's IR (`netsift_lang::Pred`), with
//!   an optimiser.
//!
//! ```
//! use netsift_bpf::{asm, Filter, Rules};
//!
//! // tcpdump -ddd ip
//! let program = asm::parse("4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n", asm::Format::Decimal)?;
//! let filter = Filter::new(program, Rules::Kernel)?;
//! let mut frame = [0u8; 60];
//! frame[12..14].copy_from_slice(&[0x08, 0x00]);
//! assert_eq!(filter.run(&frame, 60), 262144);
//! frame[13] = 0x06; // ARP
//! assert_eq!(filter.run(&frame, 60), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod asm;
pub mod compile;
mod insn;
mod interp;
mod validate;

pub use insn::{Insn, Program, code};
pub use interp::{Filter, LOOP_BUDGET};
pub use validate::{
    MAX_LIBPCAP_INSNS, Rules, ValidateError, ValidateErrorKind, libpcap_bpf_validate, validate,
};
