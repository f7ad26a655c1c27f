//! UDP datagrams (RFC 768).
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use crate::bytes::{be16, clip, clip_mut, need, set_be16};
use crate::checksum;
use crate::error::Result;
use crate::ip::IpProtocol;
use crate::ipv4::Ipv4Address;
use crate::ipv6::Ipv6Address;

mod field {
    pub(super) const SRC_PORT: usize = 0;
    pub(super) const DST_PORT: usize = 2;
    pub(super) const LENGTH: usize = 4;
    pub(super) const CHECKSUM: usize = 6;
    pub(super) const PAYLOAD: usize = 8;
}

/// A view of a UDP datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Header length: 8 bytes.
    pub const HEADER_LEN: usize = field::PAYLOAD;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the 8-byte header is present. The length field is not checked
    /// against the buffer; [`Self::payload`] clips it.
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), "udp", "header", 0, Self::HEADER_LEN)
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length (8).
    pub const fn header_len(&self) -> usize {
        Self::HEADER_LEN
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length field (header plus data) as declared.
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// `true` when the length field says there is no data.
    pub fn is_empty(&self) -> bool {
        self.len() <= 8
    }

    /// Checksum field (0 means "none" over IPv4).
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The data: from byte 8 to the length field, clipped to the buffer. A
    /// length field below 8 yields an empty payload.
    pub fn payload(&self) -> &[u8] {
        clip(
            self.buffer.as_ref(),
            field::PAYLOAD,
            usize::from(self.len()),
        )
    }

    /// The datagram as covered by the checksum: the length field clipped to
    /// the buffer.
    fn datagram(&self) -> &[u8] {
        clip(self.buffer.as_ref(), 0, usize::from(self.len()))
    }

    /// Verifies the checksum with an IPv4 pseudo-header. A zero checksum
    /// (none) verifies.
    pub fn verify_checksum_ipv4(&self, src: Ipv4Address, dst: Ipv4Address) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let d = self.datagram();
        let ph = checksum::pseudo_header_ipv4(src, dst, IpProtocol::UDP, u32::from(self.len()));
        checksum::combine(&[ph, checksum::ones_complement_sum(d)]) == 0xffff
    }

    /// Verifies the checksum with an IPv6 pseudo-header (where it is
    /// mandatory: zero does not verify).
    pub fn verify_checksum_ipv6(&self, src: &Ipv6Address, dst: &Ipv6Address) -> bool {
        let d = self.datagram();
        let ph = checksum::pseudo_header_ipv6(src, dst, IpProtocol::UDP, u32::from(self.len()));
        checksum::combine(&[ph, checksum::ones_complement_sum(d)]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, port);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, port);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, len: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        clip_mut(self.buffer.as_mut(), field::PAYLOAD, len)
    }

    fn fill(&mut self, ph: u16) {
        self.set_checksum(0);
        let sum = !checksum::combine(&[ph, checksum::ones_complement_sum(self.datagram())]);
        // An all-zero result is transmitted as all ones (RFC 768).
        self.set_checksum(if sum == 0 { 0xffff } else { sum });
    }

    /// Computes and stores the checksum with an IPv4 pseudo-header.
    pub fn fill_checksum_ipv4(&mut self, src: Ipv4Address, dst: Ipv4Address) {
        let ph = checksum::pseudo_header_ipv4(src, dst, IpProtocol::UDP, u32::from(self.len()));
        self.fill(ph);
    }

    /// Computes and stores the checksum with an IPv6 pseudo-header.
    pub fn fill_checksum_ipv6(&mut self, src: &Ipv6Address, dst: &Ipv6Address) {
        let ph = checksum::pseudo_header_ipv6(src, dst, IpProtocol::UDP, u32::from(self.len()));
        self.fill(ph);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DNS query 192.168.1.2:51234 -> 8.8.8.8:53 for "a." type A, with
    /// checksum computed by hand, followed by 2 padding bytes.
    const DGRAM: [u8; 31] = [
        0xc8, 0x22, 0x00, 0x35, 0x00, 0x1d, 0x00, 0x00, // header, len 29, csum filled below
        0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, b'a', 0x00,
        0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0xaa, 0xbb,
    ];

    #[test]
    fn accessors() {
        let p = UdpPacket::new_checked(&DGRAM[..]).unwrap();
        assert_eq!(p.src_port(), 51234);
        assert_eq!(p.dst_port(), 53);
        assert_eq!(p.len(), 29);
        assert!(!p.is_empty());
        assert_eq!(p.checksum(), 0);
        assert_eq!(p.header_len(), 8);
        assert_eq!(p.payload().len(), 21);
        assert_eq!(p.payload()[0], 0x12);
        // Zero checksum over IPv4 means "not computed".
        assert!(p.verify_checksum_ipv4(Ipv4Address([1, 1, 1, 1]), Ipv4Address([2, 2, 2, 2])));
    }

    #[test]
    fn checksum_round_trip() {
        let (s, d) = (Ipv4Address([192, 168, 1, 2]), Ipv4Address([8, 8, 8, 8]));
        let mut buf = DGRAM;
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        p.fill_checksum_ipv4(s, d);
        assert!(p.verify_checksum_ipv4(s, d));
        assert_ne!(p.checksum(), 0);
        // Padding after the length field does not matter.
        p.into_inner()[30] = 0x55;
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum_ipv4(s, d));
        assert!(!p.verify_checksum_ipv4(s, Ipv4Address([8, 8, 4, 4])));
        let mut buf2 = buf;
        buf2[9] ^= 0x01;
        assert!(!UdpPacket::new_unchecked(&buf2[..]).verify_checksum_ipv4(s, d));

        let (a, b) = (
            "2001:db8::1".parse().unwrap(),
            "2620:fe::9".parse().unwrap(),
        );
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        p.fill_checksum_ipv6(&a, &b);
        assert!(p.verify_checksum_ipv6(&a, &b));
        p.set_checksum(0);
        assert!(!p.verify_checksum_ipv6(&a, &b));
    }

    #[test]
    fn short_length_field_and_truncation() {
        let err = UdpPacket::new_checked(&DGRAM[..7]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "udp header truncated at offset 0: needs 8 bytes, 7 available"
        );
        let mut buf = DGRAM;
        buf[5] = 3;
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert!(p.payload().is_empty());
        assert!(p.is_empty());
        buf[4] = 0xff;
        let p = UdpPacket::new_checked(&buf[..12]).unwrap();
        assert_eq!(p.payload().len(), 4);
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 12];
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        p.set_src_port(1);
        p.set_dst_port(2);
        p.set_len(12);
        p.set_checksum(0x1234);
        p.payload_mut().copy_from_slice(&[9, 9, 9, 9]);
        assert_eq!(p.src_port(), 1);
        assert_eq!(p.dst_port(), 2);
        assert_eq!(p.len(), 12);
        assert_eq!(p.checksum(), 0x1234);
        assert_eq!(p.payload(), &[9, 9, 9, 9]);
    }
}
