//! ICMP for IPv6 (RFC 4443) including Neighbor Discovery (RFC 4861)
//! message layouts.
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use core::fmt;

use crate::bytes::{be16, be32, need, set_be16, set_be32};
use crate::checksum;
use crate::error::Result;
use crate::ip::IpProtocol;
use crate::ipv6::Ipv6Address;

/// An ICMPv6 message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Icmpv6Type(pub u8);

impl Icmpv6Type {
    /// Destination unreachable.
    pub const DST_UNREACHABLE: Icmpv6Type = Icmpv6Type(1);
    /// Packet too big.
    pub const PACKET_TOO_BIG: Icmpv6Type = Icmpv6Type(2);
    /// Time exceeded.
    pub const TIME_EXCEEDED: Icmpv6Type = Icmpv6Type(3);
    /// Parameter problem.
    pub const PARAM_PROBLEM: Icmpv6Type = Icmpv6Type(4);
    /// Echo request.
    pub const ECHO_REQUEST: Icmpv6Type = Icmpv6Type(128);
    /// Echo reply.
    pub const ECHO_REPLY: Icmpv6Type = Icmpv6Type(129);
    /// Multicast listener query.
    pub const MLD_QUERY: Icmpv6Type = Icmpv6Type(130);
    /// Multicast listener report (v1).
    pub const MLD_REPORT: Icmpv6Type = Icmpv6Type(131);
    /// Multicast listener done.
    pub const MLD_DONE: Icmpv6Type = Icmpv6Type(132);
    /// Router solicitation.
    pub const ROUTER_SOLICIT: Icmpv6Type = Icmpv6Type(133);
    /// Router advertisement.
    pub const ROUTER_ADVERT: Icmpv6Type = Icmpv6Type(134);
    /// Neighbor solicitation.
    pub const NEIGHBOR_SOLICIT: Icmpv6Type = Icmpv6Type(135);
    /// Neighbor advertisement.
    pub const NEIGHBOR_ADVERT: Icmpv6Type = Icmpv6Type(136);
    /// Redirect.
    pub const REDIRECT: Icmpv6Type = Icmpv6Type(137);
    /// Multicast listener report v2.
    pub const MLDV2_REPORT: Icmpv6Type = Icmpv6Type(143);

    /// The tcpdump name, if known.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            1 => "destination unreachable",
            2 => "packet too big",
            3 => "time exceeded in-transit",
            4 => "parameter problem",
            128 => "echo request",
            129 => "echo reply",
            130 => "multicast listener query",
            131 => "multicast listener report",
            132 => "multicast listener done",
            133 => "router solicitation",
            134 => "router advertisement",
            135 => "neighbor solicitation",
            136 => "neighbor advertisement",
            137 => "redirect",
            138 => "router renumbering",
            139 => "who-are-you request",
            140 => "who-are-you reply",
            141 => "inverse neighbor solicitation",
            142 => "inverse neighbor advertisement",
            143 => "multicast listener report v2",
            144 => "ha discovery request",
            145 => "ha discovery reply",
            146 => "mobile router solicitation",
            147 => "mobile router advertisement",
            151 => "multicast router advertisement",
            152 => "multicast router solicitation",
            153 => "multicast router termination",
            155 => "RPL",
            160 => "extended echo request",
            161 => "extended echo reply",
            _ => return None,
        })
    }

    /// `true` for error messages (types below 128).
    pub const fn is_error(self) -> bool {
        self.0 < 128
    }

    /// `true` for types whose rest-of-header holds identifier and sequence
    /// number (echo request/reply).
    pub const fn has_id_seq(self) -> bool {
        matches!(self.0, 128 | 129)
    }

    /// `true` for types with a target address at bytes 8..24 (neighbor
    /// solicitation/advertisement, redirect).
    pub const fn has_target(self) -> bool {
        matches!(self.0, 135..=137)
    }
}

impl fmt::Display for Icmpv6Type {
    /// The tcpdump name, else the number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

impl From<u8> for Icmpv6Type {
    fn from(v: u8) -> Self {
        Icmpv6Type(v)
    }
}

mod field {
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: usize = 2;
    pub(super) const REST: usize = 4;
    pub(super) const DATA: usize = 8;
    pub(super) const TARGET: usize = 8;
    pub(super) const TARGET_END: usize = 24;
}

/// A view of an ICMPv6 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Header length: type, code, checksum and the 4-byte rest of header.
    pub const HEADER_LEN: usize = field::DATA;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the 8-byte header is present. Type-specific parts (like the
    /// neighbor discovery target) are returned as `Option`s.
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), "icmp6", "header", 0, Self::HEADER_LEN)
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length (8).
    pub const fn header_len(&self) -> usize {
        Self::HEADER_LEN
    }

    /// Message type.
    pub fn msg_type(&self) -> Icmpv6Type {
        Icmpv6Type(self.buffer.as_ref()[field::TYPE])
    }

    /// Message code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The 4-byte rest-of-header word (MTU, pointer, flags, ... by type).
    pub fn rest_of_header(&self) -> u32 {
        be32(self.buffer.as_ref(), field::REST)
    }

    /// Echo identifier (meaningful when [`Icmpv6Type::has_id_seq`]).
    pub fn echo_ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::REST)
    }

    /// Echo sequence number (meaningful when [`Icmpv6Type::has_id_seq`]).
    pub fn echo_seq_no(&self) -> u16 {
        be16(self.buffer.as_ref(), field::REST + 2)
    }

    /// MTU of a packet-too-big message.
    pub fn mtu(&self) -> u32 {
        self.rest_of_header()
    }

    /// Neighbor advertisement flags: router.
    pub fn na_router(&self) -> bool {
        self.buffer.as_ref()[field::REST] & 0x80 != 0
    }

    /// Neighbor advertisement flags: solicited.
    pub fn na_solicited(&self) -> bool {
        self.buffer.as_ref()[field::REST] & 0x40 != 0
    }

    /// Neighbor advertisement flags: override.
    pub fn na_override(&self) -> bool {
        self.buffer.as_ref()[field::REST] & 0x20 != 0
    }

    /// Target address of a neighbor solicitation/advertisement or redirect,
    /// when the type has one and the buffer holds it.
    pub fn target_addr(&self) -> Option<Ipv6Address> {
        if !self.msg_type().has_target() {
            return None;
        }
        self.buffer
            .as_ref()
            .get(field::TARGET..field::TARGET_END)
            .and_then(Ipv6Address::from_slice)
    }

    /// Data after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA..]
    }

    /// Verifies the checksum over the whole buffer with the IPv6
    /// pseudo-header.
    pub fn verify_checksum(&self, src: &Ipv6Address, dst: &Ipv6Address) -> bool {
        let d = self.buffer.as_ref();
        let ph = checksum::pseudo_header_ipv6(src, dst, IpProtocol::ICMPV6, d.len() as u32);
        checksum::combine(&[ph, checksum::ones_complement_sum(d)]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, ty: Icmpv6Type) {
        self.buffer.as_mut()[field::TYPE] = ty.0;
    }

    /// Sets the code.
    pub fn set_msg_code(&mut self, code: u8) {
        self.buffer.as_mut()[field::CODE] = code;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the rest-of-header word.
    pub fn set_rest_of_header(&mut self, value: u32) {
        set_be32(self.buffer.as_mut(), field::REST, value);
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, id: u16) {
        set_be16(self.buffer.as_mut(), field::REST, id);
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq_no(&mut self, seq: u16) {
        set_be16(self.buffer.as_mut(), field::REST + 2, seq);
    }

    /// Sets the target address; does nothing if the buffer is too short.
    pub fn set_target_addr(&mut self, addr: &Ipv6Address) {
        if let Some(t) = self
            .buffer
            .as_mut()
            .get_mut(field::TARGET..field::TARGET_END)
        {
            t.copy_from_slice(&addr.0);
        }
    }

    /// The data, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA..]
    }

    /// Computes and stores the checksum with the IPv6 pseudo-header.
    pub fn fill_checksum(&mut self, src: &Ipv6Address, dst: &Ipv6Address) {
        self.set_checksum(0);
        let d = self.buffer.as_ref();
        let ph = checksum::pseudo_header_ipv6(src, dst, IpProtocol::ICMPV6, d.len() as u32);
        let sum = !checksum::combine(&[ph, checksum::ones_complement_sum(d)]);
        self.set_checksum(sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real neighbor solicitation :: > ff02::1:ffe1:f for
    /// fe80::546f:f7ff:fee1:f with a nonce option, from a capture.
    const NS: [u8; 32] = [
        0x87, 0x00, 0x56, 0x6e, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x54, 0x6f, 0xf7, 0xff, 0xfe, 0xe1, 0x00, 0x0f, 0x0e, 0x01, 0x60, 0x69, 0x60, 0x4c,
        0x0a, 0xaa,
    ];

    #[test]
    fn neighbor_solicitation_real_checksum() {
        let src = Ipv6Address::UNSPECIFIED;
        let dst: Ipv6Address = "ff02::1:ffe1:f".parse().unwrap();
        let p = Icmpv6Packet::new_checked(&NS[..]).unwrap();
        assert_eq!(p.msg_type(), Icmpv6Type::NEIGHBOR_SOLICIT);
        assert_eq!(p.msg_type().to_string(), "neighbor solicitation");
        assert_eq!(p.msg_code(), 0);
        assert_eq!(p.checksum(), 0x566e);
        assert_eq!(p.rest_of_header(), 0);
        assert!(!p.na_router() && !p.na_solicited() && !p.na_override());
        assert_eq!(
            p.target_addr().unwrap().to_string(),
            "fe80::546f:f7ff:fee1:f"
        );
        assert_eq!(p.data().len(), 24);
        assert!(p.verify_checksum(&src, &dst));
        assert!(!p.verify_checksum(&dst, &dst));
        // Too short for the target.
        let p = Icmpv6Packet::new_checked(&NS[..20]).unwrap();
        assert_eq!(p.target_addr(), None);
    }

    #[test]
    fn echo_setters_round_trip() {
        let (a, b): (Ipv6Address, Ipv6Address) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        );
        let mut buf = [0u8; 16];
        let mut p = Icmpv6Packet::new_unchecked(&mut buf[..]);
        p.set_msg_type(Icmpv6Type::ECHO_REQUEST);
        p.set_msg_code(0);
        p.set_echo_ident(0x1234);
        p.set_echo_seq_no(5);
        p.data_mut().copy_from_slice(b"pingping");
        p.fill_checksum(&a, &b);
        assert!(p.verify_checksum(&a, &b));
        assert!(p.msg_type().has_id_seq());
        assert_eq!(p.echo_ident(), 0x1234);
        assert_eq!(p.echo_seq_no(), 5);
        assert_eq!(p.target_addr(), None);
        p.set_target_addr(&a); // too short: ignored
        p.set_rest_of_header(1280);
        assert_eq!(p.mtu(), 1280);
        p.set_checksum(7);
        assert_eq!(p.checksum(), 7);
        assert_eq!(p.header_len(), 8);

        let mut buf = [0u8; 24];
        let mut p = Icmpv6Packet::new_unchecked(&mut buf[..]);
        p.set_msg_type(Icmpv6Type::NEIGHBOR_ADVERT);
        p.set_rest_of_header(0xe000_0000);
        p.set_target_addr(&a);
        assert!(p.na_router() && p.na_solicited() && p.na_override());
        assert_eq!(p.target_addr(), Some(a));
    }

    #[test]
    fn names_and_truncation() {
        assert_eq!(Icmpv6Type(134).to_string(), "router advertisement");
        assert_eq!(Icmpv6Type(133).to_string(), "router solicitation");
        assert_eq!(Icmpv6Type(136).to_string(), "neighbor advertisement");
        assert_eq!(Icmpv6Type(250).to_string(), "250");
        assert!(Icmpv6Type::PACKET_TOO_BIG.is_error());
        assert!(!Icmpv6Type::ECHO_REPLY.is_error());
        assert_eq!(
            Icmpv6Packet::new_checked(&NS[..3]).unwrap_err().to_string(),
            "icmp6 header truncated at offset 0: needs 8 bytes, 3 available"
        );
    }
}
