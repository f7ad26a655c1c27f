//! netsift: packet filtering and capture for Linux.
//!
//! This facade re-exports the building blocks under short names:
//!
//! - [`wire`]: zero-copy views of protocol headers, and one-line packet summaries;
//! - [`capture`]: packets, timestamps, pcap and pcapng reading and writing;
//! - [`bpf`]: classic BPF — instructions, validator, interpreter, `tcpdump -d/-dd/-ddd` text,
//!   code generation and optimiser;
//! - [`lang`]: the tcpdump filter language — parser, name tables, the `Pred` IR;
//! - [`jit`]: native x86-64 code for classic BPF programs;
//! - [`swift`]: the Swift filter of passes, updated in place;
//! - [`classify`]: rule-set classification (ClassBench rules and traces, linear and HiCuts);
//! - [`client`]: the application side of `netsiftd` — open flows in the daemon and read their
//!   packets from shared memory, with no system call per packet (the daemon's client library
//!   alone: the server and its filter graph are not linked);
//! - [`ring`]: the shared-memory buffers the client reads (PBuf, IBuf, MBuf, memory files);
//! - [`filter`]: the one filter API — the [`Target`] a filter is compiled for, compiling
//!   expressions for it, and [`Filter`], which builds a filter with the most specialised
//!   [`Engine`] that can serve (interpreter, JIT, Swift, eBPF) and logs the choice.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use netsift_bpf as bpf;
pub use netsift_capture as capture;
pub use netsift_classify as classify;
pub use netsift_daemon_client::client;
pub use netsift_filter as filter;
pub use netsift_jit as jit;
pub use netsift_lang as lang;
pub use netsift_ring as ring;
pub use netsift_swift as swift;
pub use netsift_wire as wire;

pub use netsift_filter::{Choice, Engine, Filter, Target};
