//! ICMP for IPv4 (RFC 792).
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use core::fmt;

use crate::bytes::{be16, be32, need, set_be16, set_be32};
use crate::checksum;
use crate::error::Result;

/// An ICMPv4 message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IcmpType(pub u8);

impl IcmpType {
    /// Echo reply.
    pub const ECHO_REPLY: IcmpType = IcmpType(0);
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: IcmpType = IcmpType(3);
    /// Source quench (deprecated).
    pub const SOURCE_QUENCH: IcmpType = IcmpType(4);
    /// Redirect.
    pub const REDIRECT: IcmpType = IcmpType(5);
    /// Echo request.
    pub const ECHO_REQUEST: IcmpType = IcmpType(8);
    /// Router advertisement.
    pub const ROUTER_ADVERT: IcmpType = IcmpType(9);
    /// Router solicitation.
    pub const ROUTER_SOLICIT: IcmpType = IcmpType(10);
    /// Time exceeded.
    pub const TIME_EXCEEDED: IcmpType = IcmpType(11);
    /// Parameter problem.
    pub const PARAM_PROBLEM: IcmpType = IcmpType(12);
    /// Timestamp request.
    pub const TIMESTAMP: IcmpType = IcmpType(13);
    /// Timestamp reply.
    pub const TIMESTAMP_REPLY: IcmpType = IcmpType(14);
    /// Information request (obsolete).
    pub const INFO_REQUEST: IcmpType = IcmpType(15);
    /// Information reply (obsolete).
    pub const INFO_REPLY: IcmpType = IcmpType(16);
    /// Address mask request.
    pub const MASK_REQUEST: IcmpType = IcmpType(17);
    /// Address mask reply.
    pub const MASK_REPLY: IcmpType = IcmpType(18);
    /// Extended echo request (RFC 8335).
    pub const EXT_ECHO_REQUEST: IcmpType = IcmpType(42);
    /// Extended echo reply (RFC 8335).
    pub const EXT_ECHO_REPLY: IcmpType = IcmpType(43);

    /// The tcpdump name, if known.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "echo reply",
            3 => "unreachable",
            4 => "source quench",
            5 => "redirect",
            8 => "echo request",
            9 => "router advertisement",
            10 => "router solicitation",
            11 => "time exceeded",
            12 => "parameter problem",
            13 => "time stamp request",
            14 => "time stamp reply",
            15 => "information request",
            16 => "information reply",
            17 => "address mask request",
            18 => "address mask reply",
            42 => "extended echo request",
            43 => "extended echo reply",
            _ => return None,
        })
    }

    /// `true` for types whose rest-of-header holds identifier and sequence
    /// number (echo, timestamp, information, address mask, extended echo).
    pub const fn has_id_seq(self) -> bool {
        matches!(self.0, 0 | 8 | 13..=18 | 42 | 43)
    }

    /// `true` for error messages that quote the offending IP header
    /// (unreachable, source quench, redirect, time exceeded, parameter
    /// problem).
    pub const fn is_error(self) -> bool {
        matches!(self.0, 3 | 4 | 5 | 11 | 12)
    }
}

impl fmt::Display for IcmpType {
    /// The tcpdump name, else the number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

impl From<u8> for IcmpType {
    fn from(v: u8) -> Self {
        IcmpType(v)
    }
}

/// The tcpdump wording for a destination-unreachable code, e.g. `"port"`,
/// `"host"`, `"need to frag"`.
pub const fn unreachable_code_name(code: u8) -> Option<&'static str> {
    Some(match code {
        0 => "net",
        1 => "host",
        2 => "protocol",
        3 => "port",
        4 => "need to frag",
        5 => "source route failed",
        6 => "net unknown",
        7 => "host unknown",
        8 => "src host isolated",
        9 => "net prohibited",
        10 => "host prohibited",
        11 => "net tos",
        12 => "host tos",
        13 => "admin prohibited filter",
        14 => "host precedence violation",
        15 => "precedence cutoff",
        _ => return None,
    })
}

mod field {
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: usize = 2;
    pub(super) const REST: usize = 4;
    pub(super) const DATA: usize = 8;
}

/// A view of an ICMPv4 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// Header length: type, code, checksum and the 4-byte rest of header.
    pub const HEADER_LEN: usize = field::DATA;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        IcmpPacket { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the 8-byte header is present.
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), "icmp", "header", 0, Self::HEADER_LEN)
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
    pub fn msg_type(&self) -> IcmpType {
        IcmpType(self.buffer.as_ref()[field::TYPE])
    }

    /// Message code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The 4-byte rest-of-header word (meaning depends on the type).
    pub fn rest_of_header(&self) -> u32 {
        be32(self.buffer.as_ref(), field::REST)
    }

    /// Identifier (meaningful when [`IcmpType::has_id_seq`]).
    pub fn echo_ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::REST)
    }

    /// Sequence number (meaningful when [`IcmpType::has_id_seq`]).
    pub fn echo_seq_no(&self) -> u16 {
        be16(self.buffer.as_ref(), field::REST + 2)
    }

    /// Next-hop MTU of a "need to frag" unreachable (type 3 code 4).
    pub fn next_hop_mtu(&self) -> u16 {
        be16(self.buffer.as_ref(), field::REST + 2)
    }

    /// Gateway address of a redirect (type 5).
    pub fn gateway(&self) -> crate::ipv4::Ipv4Address {
        let d = self.buffer.as_ref();
        crate::ipv4::Ipv4Address([d[4], d[5], d[6], d[7]])
    }

    /// Data after the 8-byte header (echo payload, or the quoted IP header
    /// of an error message).
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA..]
    }

    /// `true` when the checksum over the whole buffer is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::ones_complement_sum(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, ty: IcmpType) {
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

    /// The data, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA..]
    }

    /// Computes and stores the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::internet_checksum(self.buffer.as_ref());
        self.set_checksum(sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real echo request (id 1292, seq 1, 56 data bytes) from a capture.
    const ECHO: [u8; 64] = [
        0x08, 0x00, 0xf6, 0xf2, 0x05, 0x0c, 0x00, 0x01, 0xfc, 0xe2, 0x97, 0x51, 0x00, 0x00, 0x00,
        0x00, 0xa6, 0xf8, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15,
        0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24,
        0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33,
        0x34, 0x35, 0x36, 0x37,
    ];

    #[test]
    fn accessors_and_real_checksum() {
        let p = IcmpPacket::new_checked(&ECHO[..]).unwrap();
        assert_eq!(p.msg_type(), IcmpType::ECHO_REQUEST);
        assert_eq!(p.msg_type().to_string(), "echo request");
        assert!(p.msg_type().has_id_seq());
        assert!(!p.msg_type().is_error());
        assert_eq!(p.msg_code(), 0);
        assert_eq!(p.checksum(), 0xf6f2);
        assert_eq!(p.echo_ident(), 1292);
        assert_eq!(p.echo_seq_no(), 1);
        assert_eq!(p.rest_of_header(), 0x050c_0001);
        assert_eq!(p.next_hop_mtu(), 1);
        assert_eq!(p.gateway().to_string(), "5.12.0.1");
        assert_eq!(p.data().len(), 56);
        assert_eq!(p.header_len(), 8);
        assert!(p.verify_checksum());
        let mut bad = ECHO;
        bad[20] ^= 1;
        assert!(!IcmpPacket::new_unchecked(&bad[..]).verify_checksum());
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = ECHO;
        let mut p = IcmpPacket::new_unchecked(&mut buf[..]);
        p.set_msg_type(IcmpType::ECHO_REPLY);
        p.set_msg_code(0);
        p.set_echo_ident(7);
        p.set_echo_seq_no(9);
        p.data_mut()[0] = 0;
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.msg_type(), IcmpType::ECHO_REPLY);
        assert_eq!(p.echo_ident(), 7);
        assert_eq!(p.echo_seq_no(), 9);
        p.set_rest_of_header(0xdead_beef);
        assert_eq!(p.rest_of_header(), 0xdead_beef);
        p.set_checksum(1);
        assert_eq!(p.checksum(), 1);
    }

    #[test]
    fn truncated_and_names() {
        assert_eq!(
            IcmpPacket::new_checked(&ECHO[..4]).unwrap_err().to_string(),
            "icmp header truncated at offset 0: needs 8 bytes, 4 available"
        );
        assert_eq!(IcmpType(3).to_string(), "unreachable");
        assert_eq!(IcmpType(11).to_string(), "time exceeded");
        assert_eq!(IcmpType(200).to_string(), "200");
        assert!(IcmpType::TIME_EXCEEDED.is_error());
        assert_eq!(unreachable_code_name(3), Some("port"));
        assert_eq!(unreachable_code_name(99), None);
    }
}
