//! eBPF for netsift: filters that run in the Linux kernel, without kernel modules and without a
//! compiler toolchain at run time.
//!
//! - [`Insn`] and [`op`]: the eBPF instruction encoding, with typed constructors
//!   ([`Insn::load`], [`Insn::jmp32_imm`], [`Insn::ld_imm64`]…); [`asm::Assembler`] resolves
//!   jumps to labels; [`disasm()`] prints listings in the verifier's notation.
//! - [`compile`]: classic BPF (what `netsift_bpf::compile` makes of a filter expression) to
//!   eBPF for socket filters, tc classifiers and XDP, with the interpreter's meaning on every
//!   packet and bounds checks the verifier can follow.
//! - The loader, over the raw `bpf(2)` system call: [`LoadedProgram`] (`BPF_PROG_LOAD`, the
//!   verifier's log in the error, `BPF_PROG_TEST_RUN`), [`Map`] (array, hash, LPM trie,
//!   per-CPU), and attachment: [`attach_socket_filter`], [`Link::xdp`], [`Link::tcx`]. Every
//!   kernel object is an owned file descriptor, released on drop; links detach when closed,
//!   so an exiting process (Ctrl-C included) leaves no program attached.
//!
//! Loading needs root (`CAP_BPF`, `CAP_NET_ADMIN`, `CAP_PERFMON`); errors of kind
//! [`ErrorKind::PermissionDenied`] say so.
//!
//! ```no_run
//! use netsift_ebpf::{LoadOptions, ProgType, compile};
//! use netsift_lang::{Context, compile as front};
//! use netsift_wire::LinkType;
//!
//! let pred = front("tcp port 80", &Context::new(LinkType::ETHERNET))?;
//! let opts = compile::Options::new(ProgType::Xdp);
//! let prog = compile::from_pred(&pred, &Default::default(), &opts)?;
//! println!("{prog}"); // the listing
//! let loaded = prog.load(&LoadOptions::default())?;
//! let frame = [0u8; 60];
//! assert_eq!(loaded.run(&frame)?, netsift_ebpf::xdp_action::DROP);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

pub mod asm;
mod attach;
pub mod compile;
mod disasm;
mod error;
mod insn;
mod map;
mod prog;
mod runner;
/// Swift in the kernel: a Swift filter kept in eBPF maps, evaluated by one XDP or SCHED_CLS
/// program; adding or removing a pass is a map write, never a reload.
pub mod swift;
mod sys;

pub use attach::{
    Link, LinkKind, TcxDirection, XdpMode, attach_socket_filter, detach_socket_filter, ifindex,
};
pub use disasm::disasm;
pub use error::{Error, ErrorKind, Result};
pub use insn::{Alu, Cond, Insn, Reg, Size, decode, encode, helper, op};
pub use map::{F_NO_PREALLOC, Map, MapSpec, MapType, UpdateFlag, possible_cpus};
pub use prog::{
    LoadOptions, LoadedProgram, ProgType, Program, SkbContext, TestRun, TestRunOutput, tc_act,
    xdp_action,
};
pub use runner::{Fallback, KernelFilter};
