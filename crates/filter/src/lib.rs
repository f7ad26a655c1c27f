//! The one filter API of netsift: what a filter is compiled for, compiling it, and the engine
//! that runs it.
//!
//! ```text
//! Target::for_capture / live / savefile (+ with_optimize, with_netmask, with_resolve)
//!    │ compile(expr, &target)        → Pred      (netsift-lang: parse, lower)
//!    │ program(&pred, &target)       → Program   (netsift-bpf: code generation, optimiser)
//!    ▼
//! Filter::build(Input::Pred | Input::Program, &target, Choice)
//!    → interpreter | JIT | Swift | eBPF (the most specialised engine that can serve)
//! ```
//!
//! Every surface of netsift compiles and chooses here and nowhere else: the command line
//! (`filter`, `capture`, `compile`, `flow`, `offload`), the graph's filter classes, the
//! libpcap-compatible library and the daemon. So a filter means the same wherever it is typed:
//! the same [`Target`] gives byte-identical programs through every entry point.
//!
//! - [`Target`] says what a filter is compiled for: the link type, the snap length the filter
//!   returns, whether it runs on a live capture or a capture file (libpcap's meanings of
//!   `inbound`, NULL/LOOP `ip6` and the byte order of NULL's family field differ), the IPv4
//!   netmask (`ip broadcast`), the optimisation level and how host names are resolved. It is
//!   built once, from a capture reader, a live source, a libpcap handle or the command line.
//! - [`compile`] and [`program`] are the front end and the classic BPF back end for a target.
//!   At optimisation level 0 both keep libpcap's unoptimised shape: the program reads as
//!   libpcap 1.10.3's `pcap_compile(…, optimize = 0, …)`.
//! - [`Filter::build`] asks each engine, most specialised first, whether it can serve; the
//!   first that can runs the filter. The decision and every refusal, with its reason, go to
//!   [`Filter::log`] and to `tracing` (target `netsift_filter`, level `info`; `RUST_LOG` or the
//!   command line's `-v` shows them).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod compile;
mod engine;
mod error;
mod target;

pub use compile::{compile, compile_program, program};
pub use engine::{Choice, Engine, Filter, Input};
pub use error::{Error, ErrorKind};
pub use target::{DEFAULT_SNAPLEN, Target};

pub use netsift_lang::{Origin, Resolve};
