//! Packets, timestamps and capture files for netsift.
//!
//! This crate sits at the bottom of netsift, next to `netsift-wire`. It provides:
//!
//! - [`Packet`] (owned) and [`PacketRef`] (borrowed, zero-copy) with a nanosecond [`Timestamp`],
//!   the [`LinkType`] of their first header and the pcapng interface they arrived on;
//! - [`CaptureReader`], a streaming reader for pcap and pcapng files that sniffs the format from
//!   the magic number, reuses one buffer for every packet (see [`CaptureReader::next_packet`]) and
//!   also offers an owning iterator (see [`CaptureReader::packets`]);
//! - [`PcapWriter`] and [`PcapngWriter`];
//! - [`generate`], a small deterministic builder of synthetic Ethernet frames for tests and demos.
//!
//! # Reading
//!
//! ```no_run
//! use netsift_capture::CaptureReader;
//!
//! # fn main() -> Result<(), netsift_capture::Error> {
//! let mut reader = CaptureReader::open("trace.pcapng")?;
//! println!("link type {:?}", reader.link_type());
//! while let Some(packet) = reader.next_packet() {
//!     let packet = packet?;
//!     println!("{} {} bytes of {}", packet.timestamp, packet.data.len(), packet.wire_len);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Robustness contract
//!
//! Capture files are untrusted input. Whatever the bytes, the reader never panics, never loops
//! without consuming input, and never allocates more than [`MAX_PACKET_LEN`] (plus a fixed
//! allowance for pcapng block headers and options) for one packet; a length field that is larger
//! than the file only costs what the file really holds. It delivers every good packet that
//! precedes a problem, then one [`Error`] that names the problem and the byte offset of the record
//! (or block) where it is, and then nothing more.
//!
//! # Compatibility with libpcap
//!
//! libpcap (1.10) is the reference for which files are readable and for what a packet looks like:
//! every file libpcap reads is read here with the same packets, lengths and timestamps. This
//! reader is more lenient in a few documented places (for example pcapng files whose interfaces
//! have different link types, sections with different byte orders, or record lengths above
//! libpcap's 256 KiB limit), so it may deliver packets after the point where libpcap stops.
#![deny(missing_docs)]
// File reading and writing is safe code; only the live sources (system calls and ring memory
// shared with the kernel) use `unsafe`, each block with its reasoning.
#![deny(unsafe_code)]

mod error;
pub mod generate;
mod io;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub mod live;
mod packet;
mod pcap;
mod pcapng;
mod reader;
mod timestamp;

pub use error::{Error, ErrorKind};
pub use netsift_wire::LinkType;
pub use packet::{Packet, PacketRef};
pub use pcap::PcapWriter;
pub use pcapng::PcapngWriter;
pub use reader::{
    ByteOrder, CaptureReader, Format, Interface, IntoPackets, Packets, Precision, TsResolution,
};
pub use timestamp::Timestamp;

/// The largest captured length accepted for one packet: 16 MiB (64 times libpcap's usual
/// 256 KiB maximum snapshot length).
///
/// A record that claims more is reported as [`ErrorKind::Corrupt`] instead of being allocated.
pub const MAX_PACKET_LEN: u32 = 64 * 256 * 1024;
