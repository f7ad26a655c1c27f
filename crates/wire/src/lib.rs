//! Zero-copy views of packet headers, protocol number newtypes and one-line
//! packet summaries for netsift.
//!
//! # Views
//!
//! Every header is read through a view type `XxxPacket<T: AsRef<[u8]>>`
//! wrapping a byte buffer (`&[u8]`, `&mut [u8]`, `Vec<u8>`, ...). A view
//! never copies: getters decode straight from the buffer, setters (available
//! when `T: AsMut<[u8]>`) write straight into it. Each view offers:
//!
//! * `new_unchecked(buffer)` — wrap without checking anything;
//! * `check_len(&self)` — verify that the buffer holds everything the
//!   accessors read, including variable-length parts announced by the header
//!   itself (IPv4 IHL, TCP data offset, GRE optional fields, ...);
//! * `new_checked(buffer)` — `new_unchecked` followed by `check_len`;
//! * `into_inner()`, `header_len()` and, where meaningful, `payload()`.
//!
//! # No-panic contract
//!
//! **After `check_len` (or `new_checked`) succeeded, no accessor of that view
//! panics, whatever the bytes are.** Lengths declared inside a header (IPv4
//! total length, UDP length, IPv6 payload length, ...) are clipped to the
//! buffer, never trusted. Iterators over options, chunks and extension
//! headers yield an `Err` item and stop on malformed input instead of
//! panicking, and are bounded. Setters that change a length field (for example
//! `set_header_len`) may invalidate an earlier check; call `check_len` again
//! before reading through the view. Using the accessors of a view built with
//! `new_unchecked` on a buffer that fails `check_len` may panic.
//!
//! Protocol numbers (EtherType, IP protocol, ICMP type, ...) are open
//! newtypes with named constants; an unknown value never makes parsing fail.
//!
//! # Flow keys
//!
//! [`flow::parse`] walks a frame to its 5-tuple, its layer offsets and its TCP flags: the one
//! flow-key parser of netsift (any number of VLAN tags, MPLS, PPPoE, IPv6 extension headers,
//! fragments). [`flow::Options::NIC`] bounds the walk as a NIC's parser does.
//!
//! # Summaries
//!
//! [`summarize`] decodes a whole captured frame into a one-line,
//! tcpdump-style [`Summary`]; it never panics on any input.
//!
//! # Example
//!
//! ```
//! use netsift_wire::{IcmpPacket, IcmpType, IpProtocol, Ipv4Packet, LinkType, summarize};
//!
//! // A raw IPv4 ICMP echo request, 10.0.0.1 > 10.0.0.2.
//! let pkt = [
//!     0x45, 0, 0, 28, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, //
//!     8, 0, 0xf7, 0xfc, 0, 1, 0, 2,
//! ];
//! let ip = Ipv4Packet::new_checked(&pkt[..])?;
//! assert_eq!(ip.protocol(), IpProtocol::ICMP);
//! assert_eq!(ip.src_addr().to_string(), "10.0.0.1");
//! let icmp = IcmpPacket::new_checked(ip.payload())?;
//! assert_eq!(icmp.msg_type(), IcmpType::ECHO_REQUEST);
//! assert!(icmp.verify_checksum());
//!
//! let line = summarize(LinkType::RAW, &pkt, pkt.len() as u32);
//! assert_eq!(
//!     line.to_string(),
//!     "IP 10.0.0.1 > 10.0.0.2: ICMP echo request, id 1, seq 2, length 8"
//! );
//!
//! // Errors say what was needed, what was there, and where.
//! let err = Ipv4Packet::new_checked(&pkt[..12]).unwrap_err();
//! assert_eq!(err.to_string(), "ipv4 header truncated at offset 0: needs 20 bytes, 12 available");
//! # Ok::<(), netsift_wire::Error>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod arp;
pub mod checksum;
pub mod error;
pub mod ethernet;
pub mod flow;
pub mod geneve;
pub mod gre;
pub mod icmp;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6ext;
pub mod linktype;
pub mod llc;
pub mod mpls;
pub mod sctp;
pub mod summary;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vxlan;

pub use arp::{ArpHardware, ArpOperation, ArpPacket};
pub use error::{Error, ErrorKind};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame};
pub use flow::{Flow, FlowKey, Fragment};
pub use geneve::GenevePacket;
pub use gre::GrePacket;
pub use icmp::{IcmpPacket, IcmpType};
pub use icmpv6::{Icmpv6Packet, Icmpv6Type};
pub use ip::{IpAddress, IpProtocol};
pub use ipv4::{Ipv4Address, Ipv4Packet};
pub use ipv6::{Ipv6Address, Ipv6Packet};
pub use ipv6ext::{
    AuthHeader, ExtHeader, ExtHeaders, Ipv6FragmentHeader, Ipv6OptionsHeader, Ipv6RoutingHeader,
};
pub use linktype::LinkType;
pub use llc::LlcPacket;
pub use mpls::MplsPacket;
pub use sctp::{SctpChunk, SctpChunkType, SctpChunks, SctpPacket};
pub use summary::{Summary, summarize};
pub use tcp::{TcpFlags, TcpOption, TcpOptions, TcpPacket};
pub use udp::UdpPacket;
pub use vlan::VlanPacket;
pub use vxlan::VxlanPacket;

/// Private byte-access helpers shared by the views.
pub(crate) mod bytes {
    /// A byte range inside a header.
    pub(crate) type Field = core::ops::Range<usize>;

    /// Big-endian `u16` at `at`. Panics if out of bounds (callers check).
    #[inline]
    pub(crate) fn be16(data: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([data[at], data[at + 1]])
    }

    /// Big-endian `u32` at `at`. Panics if out of bounds (callers check).
    #[inline]
    pub(crate) fn be32(data: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
    }

    /// Big-endian 24-bit value at `at`.
    #[inline]
    pub(crate) fn be24(data: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([0, data[at], data[at + 1], data[at + 2]])
    }

    /// Writes a big-endian `u16` at `at`.
    #[inline]
    pub(crate) fn set_be16(data: &mut [u8], at: usize, value: u16) {
        data[at..at + 2].copy_from_slice(&value.to_be_bytes());
    }

    /// Writes a big-endian `u32` at `at`.
    #[inline]
    pub(crate) fn set_be32(data: &mut [u8], at: usize, value: u32) {
        data[at..at + 4].copy_from_slice(&value.to_be_bytes());
    }

    /// Writes the low 24 bits of `value` big-endian at `at`.
    #[inline]
    pub(crate) fn set_be24(data: &mut [u8], at: usize, value: u32) {
        data[at..at + 3].copy_from_slice(&value.to_be_bytes()[1..]);
    }

    /// `data[start..end]` with both bounds clamped to the slice, never
    /// panicking; an inverted range yields an empty slice.
    #[inline]
    pub(crate) fn clip(data: &[u8], start: usize, end: usize) -> &[u8] {
        let end = end.min(data.len());
        let start = start.min(end);
        &data[start..end]
    }

    /// Mutable variant of [`clip`].
    #[inline]
    pub(crate) fn clip_mut(data: &mut [u8], start: usize, end: usize) -> &mut [u8] {
        let end = end.min(data.len());
        let start = start.min(end);
        &mut data[start..end]
    }

    /// Checks that `data` holds at least `needed` bytes.
    #[inline]
    pub(crate) fn need(
        data: &[u8],
        layer: &'static str,
        what: &'static str,
        offset: usize,
        needed: usize,
    ) -> crate::error::Result<()> {
        let available = data.len().saturating_sub(offset);
        if needed > available {
            Err(crate::Error::truncated(
                layer, what, offset, needed, available,
            ))
        } else {
            Ok(())
        }
    }
}

/// Test helpers shared by the unit tests.
#[cfg(test)]
pub(crate) mod testutil {
    /// Decodes a hex string (whitespace ignored).
    pub(crate) fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s
            .bytes()
            .filter(|b| !b.is_ascii_whitespace())
            .map(|b| match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => panic!("bad hex digit {b}"),
            })
            .collect();
        assert!(digits.len() % 2 == 0, "odd hex length");
        digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect()
    }
}
