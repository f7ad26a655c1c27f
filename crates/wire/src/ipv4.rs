//! IPv4 addresses and packets (RFC 791).
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use core::fmt;
use core::str::FromStr;

use crate::bytes::{Field, be16, clip, clip_mut, need, set_be16};
use crate::checksum;
use crate::error::{Error, Result};
use crate::ip::IpProtocol;

/// An IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Ipv4Address(pub [u8; 4]);

impl Ipv4Address {
    /// `0.0.0.0`.
    pub const UNSPECIFIED: Ipv4Address = Ipv4Address([0; 4]);
    /// `255.255.255.255`.
    pub const BROADCAST: Ipv4Address = Ipv4Address([255; 4]);

    /// The address in the first four bytes of `data`, if there are four.
    pub fn from_slice(data: &[u8]) -> Option<Ipv4Address> {
        data.get(..4)
            .and_then(|s| <[u8; 4]>::try_from(s).ok())
            .map(Ipv4Address)
    }

    /// The four address bytes.
    pub const fn as_bytes(&self) -> &[u8; 4] {
        &self.0
    }

    /// The address as a host-order integer.
    pub const fn to_bits(self) -> u32 {
        u32::from_be_bytes(self.0)
    }

    /// `true` for the limited broadcast address `255.255.255.255`.
    pub const fn is_broadcast(&self) -> bool {
        u32::from_be_bytes(self.0) == u32::MAX
    }

    /// `true` for `224.0.0.0/4`.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0xf0 == 0xe0
    }

    /// `true` for `0.0.0.0`.
    pub const fn is_unspecified(&self) -> bool {
        u32::from_be_bytes(self.0) == 0
    }

    /// `true` for `127.0.0.0/8`.
    pub const fn is_loopback(&self) -> bool {
        self.0[0] == 127
    }
}

impl fmt::Display for Ipv4Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

impl FromStr for Ipv4Address {
    type Err = std::net::AddrParseError;

    /// Parses dotted-quad notation.
    fn from_str(s: &str) -> core::result::Result<Self, Self::Err> {
        s.parse::<std::net::Ipv4Addr>().map(Into::into)
    }
}

impl From<std::net::Ipv4Addr> for Ipv4Address {
    fn from(a: std::net::Ipv4Addr) -> Self {
        Ipv4Address(a.octets())
    }
}

impl From<Ipv4Address> for std::net::Ipv4Addr {
    fn from(a: Ipv4Address) -> Self {
        std::net::Ipv4Addr::from(a.0)
    }
}

impl From<[u8; 4]> for Ipv4Address {
    fn from(b: [u8; 4]) -> Self {
        Ipv4Address(b)
    }
}

mod field {
    use super::Field;
    pub(super) const VER_IHL: usize = 0;
    pub(super) const DSCP_ECN: usize = 1;
    pub(super) const LENGTH: usize = 2;
    pub(super) const IDENT: usize = 4;
    pub(super) const FLG_OFF: usize = 6;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: usize = 10;
    pub(super) const SRC_ADDR: Field = 12..16;
    pub(super) const DST_ADDR: Field = 16..20;
    pub(super) const OPTIONS: usize = 20;
}

/// A view of an IPv4 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Length of a header without options.
    pub const MIN_HEADER_LEN: usize = field::OPTIONS;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the fixed header is present, the IHL is at least 5 and the
    /// whole header including options fits in the buffer. The total length
    /// field is not checked against the buffer (captures are often cut
    /// short); [`Self::payload`] clips it.
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        need(d, "ipv4", "header", 0, Self::MIN_HEADER_LEN)?;
        let hl = self.header_len();
        if hl < Self::MIN_HEADER_LEN {
            return Err(Error::malformed(
                "ipv4",
                "header length",
                0,
                Self::MIN_HEADER_LEN,
                hl,
            ));
        }
        need(d, "ipv4", "header", 0, hl)
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version field (4 for IPv4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The whole second byte (old type-of-service: DSCP and ECN).
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    /// Differentiated services code point (6 bits).
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// Explicit congestion notification (2 bits).
    pub fn ecn(&self) -> u8 {
        self.tos() & 0x03
    }

    /// Total length field (header plus payload) as declared.
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification field.
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    /// The reserved ("evil") flag bit.
    pub fn reserved_flag(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x8000 != 0
    }

    /// Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x4000 != 0
    }

    /// More Fragments flag.
    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x2000 != 0
    }

    /// Fragment offset in bytes (the 13-bit field × 8).
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buffer.as_ref(), field::FLG_OFF) & 0x1fff) << 3
    }

    /// `true` when this packet is a fragment (MF set or non-zero offset).
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Address {
        let mut a = [0; 4];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        Ipv4Address(a)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Address {
        let mut a = [0; 4];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        Ipv4Address(a)
    }

    /// Raw option bytes (between the fixed header and `header_len`).
    pub fn options(&self) -> &[u8] {
        clip(self.buffer.as_ref(), field::OPTIONS, self.header_len())
    }

    /// `true` when the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        let hdr = clip(self.buffer.as_ref(), 0, self.header_len());
        checksum::ones_complement_sum(hdr) == 0xffff
    }

    /// `true` when the total length field is at least the header length and
    /// no larger than the buffer (i.e. the packet is complete).
    pub fn total_len_fits(&self) -> bool {
        let tl = usize::from(self.total_len());
        tl >= self.header_len() && tl <= self.buffer.as_ref().len()
    }

    /// The payload: from `header_len` to `total_len`, clipped to the buffer
    /// (link-layer padding is dropped, truncated captures give what is
    /// there). A total length below the header length yields an empty
    /// payload.
    pub fn payload(&self) -> &[u8] {
        clip(
            self.buffer.as_ref(),
            self.header_len(),
            usize::from(self.total_len()),
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the version nibble.
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets the header length in bytes (stored as `len / 4`).
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Sets DSCP (6 bits).
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (dscp << 2);
    }

    /// Sets ECN (2 bits).
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (ecn & 0x03);
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, len: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, ident: u16) {
        set_be16(self.buffer.as_mut(), field::IDENT, ident);
    }

    fn set_flag_bits(&mut self, mask: u16, on: bool) {
        let d = self.buffer.as_mut();
        let v = be16(d, field::FLG_OFF);
        set_be16(d, field::FLG_OFF, if on { v | mask } else { v & !mask });
    }

    /// Sets the Don't Fragment flag.
    pub fn set_dont_frag(&mut self, on: bool) {
        self.set_flag_bits(0x4000, on);
    }

    /// Sets the More Fragments flag.
    pub fn set_more_frags(&mut self, on: bool) {
        self.set_flag_bits(0x2000, on);
    }

    /// Sets the fragment offset in bytes (must be a multiple of 8; lower
    /// bits are dropped).
    pub fn set_frag_offset(&mut self, offset: u16) {
        let d = self.buffer.as_mut();
        let v = be16(d, field::FLG_OFF);
        set_be16(d, field::FLG_OFF, (v & 0xe000) | (offset >> 3));
    }

    /// Sets the TTL.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, protocol: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol.0;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv4Address) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.0);
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv4Address) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.0);
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let sum = checksum::internet_checksum(clip(self.buffer.as_ref(), 0, hl));
        self.set_checksum(sum);
    }

    /// The option bytes, mutably.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        clip_mut(self.buffer.as_mut(), field::OPTIONS, hl)
    }

    /// The payload (as in [`Ipv4Packet::payload`]), mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        clip_mut(self.buffer.as_mut(), hl, tl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 192.168.0.1 -> 192.168.0.199, UDP, total length 0x73 (header only
    /// here plus 4 payload bytes), checksum 0xb861.
    const PKT: [u8; 24] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7, 1, 2, 3, 4,
    ];

    #[test]
    fn accessors() {
        let p = Ipv4Packet::new_checked(&PKT[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.tos(), 0);
        assert_eq!(p.dscp(), 0);
        assert_eq!(p.ecn(), 0);
        assert_eq!(p.total_len(), 0x73);
        assert_eq!(p.ident(), 0);
        assert!(!p.reserved_flag());
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert!(!p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), IpProtocol::UDP);
        assert_eq!(p.checksum(), 0xb861);
        assert_eq!(p.src_addr().to_string(), "192.168.0.1");
        assert_eq!(p.dst_addr(), Ipv4Address([192, 168, 0, 199]));
        assert!(p.options().is_empty());
        assert!(p.verify_checksum());
        assert!(!p.total_len_fits());
        // Total length beyond the buffer: clipped.
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
    }

    #[test]
    fn payload_drops_padding_and_handles_short_total() {
        let mut buf = PKT;
        buf[3] = 22; // total length 22: two payload bytes, two padding
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.payload(), &[1, 2]);
        assert!(p.total_len_fits());
        buf[3] = 10; // below header length
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert!(p.payload().is_empty());
        assert!(!p.total_len_fits());
    }

    #[test]
    fn check_len_errors() {
        let err = Ipv4Packet::new_checked(&PKT[..19]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ipv4 header truncated at offset 0: needs 20 bytes, 19 available"
        );
        let mut buf = PKT;
        buf[0] = 0x44;
        let err = Ipv4Packet::new_checked(&buf[..]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ipv4 header length malformed at offset 0: must be at least 20, is 16"
        );
        buf[0] = 0x46; // 24 bytes of header: fits exactly
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.options(), &[1, 2, 3, 4]);
        assert!(p.payload().is_empty());
        buf[0] = 0x47;
        let err = Ipv4Packet::new_checked(&buf[..]).unwrap_err();
        assert_eq!(err.needed(), 28);
        assert_eq!(err.available(), 24);
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 28];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_version(4);
        p.set_header_len(20);
        p.set_dscp(46);
        p.set_ecn(1);
        p.set_total_len(28);
        p.set_ident(0x1234);
        p.set_dont_frag(false);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        p.set_ttl(7);
        p.set_protocol(IpProtocol::ICMP);
        p.set_src_addr("10.0.0.1".parse().unwrap());
        p.set_dst_addr(Ipv4Address([10, 0, 0, 2]));
        p.payload_mut().copy_from_slice(&[9; 8]);
        p.fill_checksum();
        assert!(p.check_len().is_ok());
        assert_eq!(p.version(), 4);
        assert_eq!(p.dscp(), 46);
        assert_eq!(p.ecn(), 1);
        assert_eq!(p.total_len(), 28);
        assert_eq!(p.ident(), 0x1234);
        assert!(!p.dont_frag());
        assert!(p.more_frags());
        assert_eq!(p.frag_offset(), 1480);
        assert!(p.is_fragment());
        assert_eq!(p.ttl(), 7);
        assert_eq!(p.protocol(), IpProtocol::ICMP);
        assert_eq!(p.src_addr().to_string(), "10.0.0.1");
        assert_eq!(p.dst_addr().to_string(), "10.0.0.2");
        assert!(p.verify_checksum());
        p.set_more_frags(false);
        p.set_dont_frag(true);
        assert!(!p.more_frags());
        assert!(p.dont_frag());
        assert!(!p.verify_checksum());
        p.fill_checksum();
        assert!(p.verify_checksum());
        p.set_header_len(24);
        assert_eq!(p.options_mut().len(), 4);
        assert_eq!(p.payload(), &[9; 4]);
    }

    #[test]
    fn address_predicates() {
        assert!(Ipv4Address::BROADCAST.is_broadcast());
        assert!(Ipv4Address([224, 0, 0, 251]).is_multicast());
        assert!(Ipv4Address([239, 255, 255, 250]).is_multicast());
        assert!(!Ipv4Address([240, 0, 0, 1]).is_multicast());
        assert!(Ipv4Address::UNSPECIFIED.is_unspecified());
        assert!(Ipv4Address([127, 0, 0, 1]).is_loopback());
        assert_eq!(Ipv4Address([1, 2, 3, 4]).to_bits(), 0x0102_0304);
        assert_eq!(Ipv4Address::from_slice(&[1, 2, 3]), None);
        assert!("1.2.3".parse::<Ipv4Address>().is_err());
        let s: std::net::Ipv4Addr = Ipv4Address([1, 2, 3, 4]).into();
        assert_eq!(s.to_string(), "1.2.3.4");
    }
}
