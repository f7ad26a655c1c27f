//! `netsiftd` and its client library (FFPF §1–2, §3.1: one capture, many applications).
//!
//! - [`server`]: the daemon — owns the sources and the filter graph, serves applications over
//!   a Unix socket, puts each flow group's packets in shared memory once;
//! - [`client`]: the application side — [`client::Client::open`] a flow, read its packets with
//!   no system call per packet (also re-exported as `netsift::client`);
//! - [`proto`]: the messages;
//! - [`sock`]: `SOCK_SEQPACKET` sockets with descriptor passing and peer credentials.
//!
//! The C API over the client is the `netsift-client-c` crate (`libnetsift_client.so`).

#![deny(missing_docs)]

pub mod client;
pub mod proto;
pub mod server;
pub mod sock;

pub use client::{Client, ClientError, Flow, FlowStats};
pub use proto::OpenOptions;
pub use server::{Background, Config, Daemon, GroupBy};
