//! The shared-memory rings of netsift (FFPF §3.1): what a flow's packets travel through from
//! the capture thread to the application, in one process or across two (`netsiftd` and its
//! clients).
//!
//! - [`buffer`]: the packet buffer of a flow group (PBuf: every packet copied once per group),
//!   the index buffers of its readers (IBuf: slot and result), slow- and fast-reader
//!   preference, waiting and wake-ups.
//! - [`mbuf`]: each filter instance's persistent memory, shared with the application.
//! - [`shm`]: memory files mapped by other processes, and the types that may live in them.
//! - [`Pkt`]: a packet as the writer is given it.
//!
//! The crate depends on no filter engine: the daemon's client library
//! (`netsift-daemon-client`) and everything that links it read packets through this crate
//! alone, while the filter graph (`netsift-graph`) writes them.

#![deny(missing_docs)]

pub mod buffer;
pub mod mbuf;
mod pkt;
pub mod shm;

pub use mbuf::MBuf;
pub use pkt::Pkt;
