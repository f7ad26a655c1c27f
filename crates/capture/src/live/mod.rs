//! Live capture from Linux network interfaces.
//!
//! Two sources deliver packets from an interface, both zero-copy: the filter and the caller's
//! code see the packet where the kernel put it, and the memory goes back to the kernel when the
//! caller's closure returns.
//!
//! - [`AfPacket`]: an `AF_PACKET` socket with a `TPACKET_V3` memory-mapped ring of blocks (what
//!   libpcap uses). Works on every Ethernet-like interface; promiscuous mode, direction,
//!   hardware timestamps where the device offers them, an optional kernel pre-filter, fanout
//!   over several sockets. VLAN tags that the kernel took out of the frame are put back in, as
//!   libpcap does, so a live packet has the bytes it would have in a capture file.
//! - [`AfXdp`]: `AF_XDP` sockets, one per receive queue, fed by a small built-in XDP program
//!   that redirects every frame of the interface to them. Packets captured this way do **not**
//!   reach the kernel's network stack.
//!
//! Both implement [`Source`]: [`Source::poll_batch`] waits for packets and hands each one to a
//! closure in arrival order, and [`Source::stats`] says how many the kernel dropped.
//!
//! ```no_run
//! use std::time::Duration;
//! use netsift_capture::live::{AfPacket, AfPacketConfig, Flow, Source};
//!
//! # fn main() -> Result<(), netsift_capture::live::LiveError> {
//! let mut src = AfPacket::open("eth0", &AfPacketConfig::default())?;
//! let mut n = 0;
//! while n < 10 {
//!     src.poll_batch(Some(Duration::from_millis(100)), &mut |p| {
//!         println!("{} bytes", p.data.len());
//!         n += 1;
//!         if n == 10 { Flow::Stop } else { Flow::Continue }
//!     })?;
//! }
//! let stats = src.stats()?;
//! println!("{} received, {} dropped", stats.received, stats.dropped);
//! # Ok(())
//! # }
//! ```
//!
//! Capturing needs `CAP_NET_RAW` (`AF_XDP` also `CAP_NET_ADMIN` and `CAP_BPF`/`CAP_SYS_ADMIN`
//! for its XDP program); errors say which step failed and why.

mod afpacket;
mod afxdp;
mod send;
mod sys;
mod xdp_prog;

use std::fmt;
use std::io;
use std::time::Duration;

pub use afpacket::{
    AfPacket, AfPacketConfig, Cooked, Fanout, FanoutMode, SockFilter, TimestampSource,
};
pub use afxdp::{AfXdp, AfXdpConfig};
pub use send::{Foreign, Sender, SenderStats, foreign_address, is_test_address};
pub use xdp_prog::{XdpAttachMode, XdpPass};

use crate::{LinkType, PacketRef};

/// Which packets of an interface to capture, by direction (tcpdump's `-Q`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Packets the interface received.
    In,
    /// Packets the interface sent.
    Out,
    /// Both (the default).
    #[default]
    InOut,
}

/// What the closure given to [`Source::poll_batch`] wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flow {
    /// Deliver the next packet.
    Continue,
    /// Return now; the next call continues with the packet after this one.
    Stop,
}

/// Counters of a live source since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SourceStats {
    /// Packets the source received for the capture, delivered or dropped (libpcap's
    /// `ps_recv`): with a kernel pre-filter, only those it accepted.
    pub received: u64,
    /// Packets the kernel dropped because the ring (or queue) was full (libpcap's `ps_drop`).
    pub dropped: u64,
    /// Packets handed to the caller's closure.
    pub delivered: u64,
    /// Packets the source skipped itself (wrong direction, duplicates on loopback).
    pub skipped: u64,
    /// Delivered packets whose VLAN tag the kernel had taken out and the source put back.
    pub vlan_restored: u64,
}

/// A source of live packets.
pub trait Source {
    /// The link type of the packets (Ethernet for every interface netsift opens today).
    fn link_type(&self) -> LinkType;

    /// The snap length: no delivered packet has more captured bytes.
    fn snaplen(&self) -> u32;

    /// Waits up to `timeout` (`None`: until packets come) for packets, then calls `f` on each
    /// ready one in arrival order, on the source's own memory, until there are no more ready or
    /// `f` returns [`Flow::Stop`]. Returns how many packets `f` saw; 0 after a timeout or an
    /// interrupting signal.
    fn poll_batch(
        &mut self,
        timeout: Option<Duration>,
        f: &mut dyn FnMut(PacketRef<'_>) -> Flow,
    ) -> Result<usize, LiveError>;

    /// The counters so far (the kernel's are read and accumulated).
    fn stats(&mut self) -> Result<SourceStats, LiveError>;

    /// A short description: source kind and interface (`"AF_PACKET eth0"`).
    fn describe(&self) -> String;
}

/// What kind of problem a [`LiveError`] is.
///
/// New kinds may be added; match with a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LiveErrorKind {
    /// The process lacks a capability (`CAP_NET_RAW`, `CAP_NET_ADMIN`, `CAP_BPF`).
    Permission,
    /// The interface does not exist (or went away).
    NoSuchDevice,
    /// The kernel, the interface or its driver does not support what was asked.
    Unsupported,
    /// The interface is busy (another XDP program is attached, for example).
    Busy,
    /// A configuration value is out of range.
    InvalidInput,
    /// Any other system call failure.
    Io,
}

/// An error of a live source: what was being done, and why it failed.
pub struct LiveError {
    kind: LiveErrorKind,
    message: String,
    source: Option<io::Error>,
}

impl LiveError {
    pub(crate) fn new(kind: LiveErrorKind, message: String) -> LiveError {
        LiveError {
            kind,
            message,
            source: None,
        }
    }

    pub(crate) fn from_io(what: String, e: io::Error) -> LiveError {
        let kind = match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => LiveErrorKind::Permission,
            Some(libc::ENODEV | libc::ENXIO) => LiveErrorKind::NoSuchDevice,
            Some(
                libc::EOPNOTSUPP | libc::EPROTONOSUPPORT | libc::EAFNOSUPPORT | libc::ENOPROTOOPT,
            ) => LiveErrorKind::Unsupported,
            Some(libc::EBUSY | libc::EEXIST) => LiveErrorKind::Busy,
            Some(libc::EINVAL) => LiveErrorKind::InvalidInput,
            _ => LiveErrorKind::Io,
        };
        let hint = match kind {
            LiveErrorKind::Permission => {
                " (capturing needs root or CAP_NET_RAW; AF_XDP also CAP_NET_ADMIN and CAP_BPF)"
            }
            _ => "",
        };
        LiveError {
            kind,
            message: format!("{what}: {e}{hint}"),
            source: Some(e),
        }
    }

    /// The kind of error.
    pub fn kind(&self) -> LiveErrorKind {
        self.kind
    }
}

impl fmt::Display for LiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for LiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveError")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .finish()
    }
}

impl std::error::Error for LiveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
