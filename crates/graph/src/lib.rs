//! The FFPF runtime for netsift (Bos et al., *FFPF: Fairly Fast Packet Filters*, OSDI 2004).
//!
//! A **flow** is a generalised socket: it delivers the packets — and the results — of a graph
//! of filters written in different languages, described in the graph language ([`lang`]):
//!
//! ```text
//! (device,eth0) | (device,eth1) -> (sampler,2,4) -> (bpf,"tcp") | (bpf,"udp") -> (bytecount,,8)
//! ```
//!
//! - [`class`]: filter classes (`bpf`, `sampler`, `bytecount`, …; sources `device`, `file`,
//!   `gen`) and the [`class::Filter`] trait; [`classes`]: the standard ones.
//! - [`mbuf`]: each filter instance's persistent memory, shared with the application.
//! - [`buffer`]: the packet buffer of a flow group (PBuf: every packet copied once per group),
//!   the index buffers of the filters (IBuf: slot and result), slow- and fast-reader preference.
//! - [`policy`]: authorisation, checked over a whole graph when a flow is instantiated.
//! - [`runtime`]: instantiation with prefix merging (identical filters with identical upstream
//!   are one instance), flows and their life cycle, the capture loop.
//! - [`dot`]: the instantiated graph as Graphviz (the paper's Fig. 3).
//! - [`error`]: the [`Error`] every fallible call returns, with its [`ErrorKind`].
//! - [`shm`]: buffers in memory files, mapped by other processes (`netsiftd` and its clients).
//!
//! [`buffer`], [`mbuf`] and [`shm`] are the `netsift-ring` crate's, re-exported: the daemon's
//! clients read them with no filter engine linked.

#![deny(missing_docs)]

pub mod access;
pub mod class;
pub mod classes;
pub mod dataflow;
pub mod dot;
pub mod engines;
pub mod error;
pub mod lang;
pub mod policy;
pub mod runtime;

pub use netsift_ring::{buffer, mbuf, shm};

pub use class::{Arg, Filter, FilterClass, Instance, Pkt, Polled, Registry, Source, Verdict};
pub use error::{Error, ErrorKind};
pub use mbuf::MBuf;
#[allow(deprecated)]
pub use runtime::FlowError;
pub use runtime::{FlowId, FlowOptions, FlowState, Runtime};

/// Every class netsift ships: the standard classes ([`classes`]) and the engine classes
/// ([`engines`]: `bpf`, `jit`, `swift`, `ebpf`, `classify`, `nic`).
pub fn standard_registry() -> Registry {
    let mut r = Registry::new();
    classes::standard(&mut r);
    engines::register(&mut r);
    r
}
