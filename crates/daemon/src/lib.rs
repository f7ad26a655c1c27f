//! `netsiftd`, the netsift daemon (FFPF §1–2, §3.1: one capture, many applications).
//!
//! - [`server`]: the daemon — owns the sources and the filter graph, serves applications over
//!   a Unix socket, puts each flow group's packets in shared memory once;
//! - [`client`], [`proto`], [`sock`]: the application side, the messages and the sockets,
//!   re-exported from the `netsift-daemon-client` crate — what applications link, without the
//!   filter engines (also re-exported as `netsift::client`).
//!
//! The C API over the client is the `netsift-client-c` crate (`libnetsift_client.so`).

#![deny(missing_docs)]

pub mod server;

pub use netsift_daemon_client::{client, proto, sock};

pub use client::{Client, ClientError, Flow, FlowStats};
pub use proto::OpenOptions;
pub use server::{Background, Config, Daemon, GroupBy, Limits};
