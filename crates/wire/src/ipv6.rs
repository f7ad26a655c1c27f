//! IPv6 addresses and fixed headers (RFC 8200). Extension headers live in
//! [`crate::ipv6ext`].
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use core::fmt;
use core::str::FromStr;

use crate::bytes::{Field, be16, be32, clip, clip_mut, need, set_be16};
use crate::error::Result;
use crate::ip::IpProtocol;
use crate::ipv4::Ipv4Address;

/// An IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Ipv6Address(pub [u8; 16]);

impl Ipv6Address {
    /// `::`.
    pub const UNSPECIFIED: Ipv6Address = Ipv6Address([0; 16]);
    /// `::1`.
    pub const LOOPBACK: Ipv6Address = Ipv6Address([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

    /// The address in the first sixteen bytes of `data`, if there are
    /// sixteen.
    pub fn from_slice(data: &[u8]) -> Option<Ipv6Address> {
        data.get(..16)
            .and_then(|s| <[u8; 16]>::try_from(s).ok())
            .map(Ipv6Address)
    }

    /// The sixteen address bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The eight 16-bit groups.
    pub fn segments(&self) -> [u16; 8] {
        let mut s = [0u16; 8];
        for (i, w) in s.iter_mut().enumerate() {
            *w = u16::from_be_bytes([self.0[2 * i], self.0[2 * i + 1]]);
        }
        s
    }

    /// Always `false`: IPv6 has no broadcast (kept for symmetry with
    /// [`Ipv4Address::is_broadcast`]).
    pub const fn is_broadcast(&self) -> bool {
        false
    }

    /// `true` for `ff00::/8`.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] == 0xff
    }

    /// `true` for `::`.
    pub fn is_unspecified(&self) -> bool {
        *self == Self::UNSPECIFIED
    }

    /// `true` for `::1`.
    pub fn is_loopback(&self) -> bool {
        *self == Self::LOOPBACK
    }

    /// `true` for link-local unicast `fe80::/10`.
    pub const fn is_link_local(&self) -> bool {
        self.0[0] == 0xfe && self.0[1] & 0xc0 == 0x80
    }

    /// The embedded IPv4 address of an IPv4-mapped address
    /// (`::ffff:a.b.c.d`).
    pub fn to_ipv4_mapped(&self) -> Option<Ipv4Address> {
        if self.0[..10] == [0; 10] && self.0[10..12] == [0xff, 0xff] {
            Ipv4Address::from_slice(&self.0[12..])
        } else {
            None
        }
    }
}

impl fmt::Display for Ipv6Address {
    /// RFC 5952 text, exactly as glibc `inet_ntop` (and so tcpdump) prints
    /// it: lowercase hex, the longest run of two or more zero groups (the
    /// first one on ties) replaced by `::`, and a dotted IPv4 tail for
    /// IPv4-mapped (`::ffff:1.2.3.4`) and IPv4-compatible (`::1.2.3.4`)
    /// addresses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words = self.segments();
        // Longest run of zero words.
        let (mut best_base, mut best_len) = (usize::MAX, 0usize);
        let (mut cur_base, mut cur_len) = (usize::MAX, 0usize);
        for (i, &w) in words.iter().enumerate() {
            if w == 0 {
                if cur_len == 0 {
                    cur_base = i;
                }
                cur_len += 1;
                if cur_len > best_len {
                    best_base = cur_base;
                    best_len = cur_len;
                }
            } else {
                cur_len = 0;
            }
        }
        if best_len < 2 {
            best_base = usize::MAX;
        }
        let in_run =
            |i: usize| best_base != usize::MAX && i >= best_base && i < best_base + best_len;
        for (i, &w) in words.iter().enumerate() {
            if in_run(i) {
                if i == best_base {
                    f.write_str(":")?;
                }
                continue;
            }
            if i != 0 {
                f.write_str(":")?;
            }
            if i == 6 && best_base == 0 && (best_len == 6 || (best_len == 5 && words[5] == 0xffff))
            {
                let [a, b, c, d] = [self.0[12], self.0[13], self.0[14], self.0[15]];
                return write!(f, "{a}.{b}.{c}.{d}");
            }
            write!(f, "{w:x}")?;
        }
        if best_base != usize::MAX && best_base + best_len == 8 {
            f.write_str(":")?;
        }
        Ok(())
    }
}

impl FromStr for Ipv6Address {
    type Err = std::net::AddrParseError;

    /// Parses RFC 4291 text.
    fn from_str(s: &str) -> core::result::Result<Self, Self::Err> {
        s.parse::<std::net::Ipv6Addr>().map(Into::into)
    }
}

impl From<std::net::Ipv6Addr> for Ipv6Address {
    fn from(a: std::net::Ipv6Addr) -> Self {
        Ipv6Address(a.octets())
    }
}

impl From<Ipv6Address> for std::net::Ipv6Addr {
    fn from(a: Ipv6Address) -> Self {
        std::net::Ipv6Addr::from(a.0)
    }
}

impl From<[u8; 16]> for Ipv6Address {
    fn from(b: [u8; 16]) -> Self {
        Ipv6Address(b)
    }
}

mod field {
    use super::Field;
    pub(super) const VER_TC_FLOW: usize = 0;
    pub(super) const LENGTH: usize = 4;
    pub(super) const NXT_HDR: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC_ADDR: Field = 8..24;
    pub(super) const DST_ADDR: Field = 24..40;
    pub(super) const PAYLOAD: usize = 40;
}

/// A view of an IPv6 packet (fixed 40-byte header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Length of the fixed header.
    pub const HEADER_LEN: usize = field::PAYLOAD;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the 40-byte fixed header is present. The payload length is
    /// not checked against the buffer; [`Self::payload`] clips it.
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), "ipv6", "header", 0, Self::HEADER_LEN)
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The fixed header length (40).
    pub const fn header_len(&self) -> usize {
        Self::HEADER_LEN
    }

    /// Version field (6 for IPv6).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FLOW] >> 4
    }

    /// Traffic class.
    pub fn traffic_class(&self) -> u8 {
        ((be16(self.buffer.as_ref(), field::VER_TC_FLOW) >> 4) & 0xff) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_TC_FLOW) & 0x000f_ffff
    }

    /// Payload length field as declared (extension headers included).
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Next header (first extension header or upper-layer protocol).
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Address {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        Ipv6Address(a)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Address {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        Ipv6Address(a)
    }

    /// `true` when the payload length is zero and a Hop-by-Hop header
    /// follows, i.e. this may be a jumbogram (RFC 2675) whose real length is
    /// in a Jumbo Payload option.
    pub fn is_jumbo_candidate(&self) -> bool {
        self.payload_len() == 0 && self.next_header() == IpProtocol::IPV6_HOPOPTS
    }

    fn payload_end(&self) -> usize {
        if self.is_jumbo_candidate() {
            usize::MAX
        } else {
            field::PAYLOAD + usize::from(self.payload_len())
        }
    }

    /// Everything after the fixed header up to the payload length, clipped
    /// to the buffer. For jumbogram candidates (see
    /// [`Self::is_jumbo_candidate`]) the rest of the buffer.
    pub fn payload(&self) -> &[u8] {
        clip(self.buffer.as_ref(), field::PAYLOAD, self.payload_end())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the version nibble.
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_TC_FLOW];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let d = self.buffer.as_mut();
        let v = be16(d, field::VER_TC_FLOW);
        set_be16(d, field::VER_TC_FLOW, (v & 0xf00f) | (u16::from(tc) << 4));
    }

    /// Sets the flow label (low 20 bits of `label`).
    pub fn set_flow_label(&mut self, label: u32) {
        let d = self.buffer.as_mut();
        d[1] = (d[1] & 0xf0) | ((label >> 16) as u8 & 0x0f);
        set_be16(d, 2, label as u16);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, nh: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = nh.0;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, hl: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hl;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: &Ipv6Address) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.0);
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: &Ipv6Address) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.0);
    }

    /// The payload (as in [`Ipv6Packet::payload`]), mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.payload_end();
        clip_mut(self.buffer.as_mut(), field::PAYLOAD, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv6Address {
        s.parse().unwrap()
    }

    #[test]
    fn display_like_inet_ntop() {
        let cases = [
            ("::", "::"),
            ("::1", "::1"),
            ("1::", "1::"),
            ("2001:db8::1", "2001:db8::1"),
            ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
            ("2001:0:0:1:0:0:0:1", "2001:0:0:1::1"),
            ("2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"),
            ("fe80::b299:28ff:fec8:d66c", "fe80::b299:28ff:fec8:d66c"),
            ("ff02::16", "ff02::16"),
            ("::ffff:1.2.3.4", "::ffff:1.2.3.4"),
            ("::1.2.3.4", "::1.2.3.4"),
            ("::ffff:0:1.2.3.4", "::ffff:0:102:304"),
            ("::0.0.0.2", "::2"),
            ("0:0:0:0:0:1:0:0", "::1:0:0"),
            ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
            ("1:2:3:4:5:6:7:0", "1:2:3:4:5:6:7:0"),
            ("0:1:2:3:4:5:6:7", "0:1:2:3:4:5:6:7"),
            ("1:2:3:4:5:6::", "1:2:3:4:5:6::"),
            (
                "7fff:ffff:c3b2:a102:1305:80:38:2949",
                "7fff:ffff:c3b2:a102:1305:80:38:2949",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(a(input).to_string(), want, "{input}");
        }
    }

    #[test]
    fn predicates() {
        assert!(a("ff02::1").is_multicast());
        assert!(!a("fe80::1").is_multicast());
        assert!(a("fe80::1").is_link_local());
        assert!(a("febf::1").is_link_local());
        assert!(!a("fec0::1").is_link_local());
        assert!(Ipv6Address::UNSPECIFIED.is_unspecified());
        assert!(Ipv6Address::LOOPBACK.is_loopback());
        assert!(!Ipv6Address::LOOPBACK.is_broadcast());
        assert_eq!(
            a("::ffff:10.0.0.1").to_ipv4_mapped(),
            Some(Ipv4Address([10, 0, 0, 1]))
        );
        assert_eq!(a("::10.0.0.1").to_ipv4_mapped(), None);
        assert_eq!(Ipv6Address::from_slice(&[0; 15]), None);
        assert_eq!(a("1:2:3:4:5:6:7:8").segments(), [1, 2, 3, 4, 5, 6, 7, 8]);
        let s: std::net::Ipv6Addr = a("2001:db8::1").into();
        assert_eq!(s.to_string(), "2001:db8::1");
    }

    /// 2001:db8::1 -> 2620:fe::9, UDP, payload length 8, hop limit 64,
    /// traffic class 0xb8, flow label 0x12345, then 8 payload bytes and 2
    /// bytes of padding.
    const PKT: [u8; 50] = [
        0x6b, 0x81, 0x23, 0x45, 0x00, 0x08, 0x11, 0x40, //
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        0x26, 0x20, 0x00, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, //
        1, 2, 3, 4, 5, 6, 7, 8, 0xee, 0xee,
    ];

    #[test]
    fn accessors() {
        let p = Ipv6Packet::new_checked(&PKT[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 8);
        assert_eq!(p.next_header(), IpProtocol::UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr().to_string(), "2001:db8::1");
        assert_eq!(p.dst_addr().to_string(), "2620:fe::9");
        assert_eq!(p.header_len(), 40);
        assert!(!p.is_jumbo_candidate());
        assert_eq!(p.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        let p = Ipv6Packet::new_checked(&PKT[..44]).unwrap();
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
    }

    #[test]
    fn truncated() {
        let err = Ipv6Packet::new_checked(&PKT[..39]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ipv6 header truncated at offset 0: needs 40 bytes, 39 available"
        );
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 48];
        let mut p = Ipv6Packet::new_unchecked(&mut buf[..]);
        p.set_version(6);
        p.set_traffic_class(0xb8);
        p.set_flow_label(0xabcde);
        p.set_payload_len(0);
        p.set_next_header(IpProtocol::IPV6_HOPOPTS);
        p.set_hop_limit(255);
        p.set_src_addr(&a("fe80::1"));
        p.set_dst_addr(&a("ff02::1"));
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0xabcde);
        assert_eq!(p.hop_limit(), 255);
        assert_eq!(p.src_addr(), a("fe80::1"));
        assert_eq!(p.dst_addr(), a("ff02::1"));
        assert!(p.is_jumbo_candidate());
        assert_eq!(p.payload_mut().len(), 8);
        p.set_payload_len(4);
        p.set_next_header(IpProtocol::TCP);
        assert_eq!(p.payload().len(), 4);
        assert_eq!(&buf[..4], &[0x6b, 0x8a, 0xbc, 0xde]);
    }
}
