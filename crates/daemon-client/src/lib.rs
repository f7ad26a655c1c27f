//! The client library of `netsiftd` (FFPF §1–2, §3.1: one capture, many applications): what
//! applications link to receive flows from the daemon.
//!
//! - [`client`]: [`Client::open`] a flow, read its packets from shared memory with no system
//!   call per packet (also re-exported as `netsift::client`);
//! - [`proto`]: the messages;
//! - [`sock`]: `SOCK_SEQPACKET` sockets with descriptor passing and peer credentials.
//!
//! The daemon compiles and runs the filters; the client only maps the buffers it is handed and
//! reads them through `netsift-ring`. So this crate depends on no filter engine (no BPF
//! compiler, JIT, graph or classifier): linking it adds the socket protocol and the ring
//! reader, nothing else. The server is the `netsift-daemon` crate (`netsiftd`), the C API over
//! this client the `netsift-client-c` crate (`libnetsift_client.so`), and netsift's libpcap
//! (`netsift-pcap`) reaches the daemon through it too.

#![deny(missing_docs)]

pub mod client;
pub mod proto;
pub mod sock;

pub use client::{Client, ClientError, DEFAULT_SOCKET, Flow, FlowStats, default_socket};
pub use netsift_ring::MBuf;
pub use netsift_ring::buffer::{Delivered, OwnedPacket, Preference, Reader, ReaderStats};
pub use proto::OpenOptions;
