//! ARP and RARP (RFC 826, RFC 903).
//!
//! Generic accessors return the sender/target addresses as byte slices
//! sized by the hardware and protocol length fields; typed accessors cover
//! the usual Ethernet/IPv4 case.
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use core::fmt;

use crate::bytes::{be16, need, set_be16};
use crate::error::Result;
use crate::ethernet::{EtherType, EthernetAddress};
use crate::ipv4::Ipv4Address;

/// An ARP hardware type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArpHardware(pub u16);

impl ArpHardware {
    /// Ethernet (10Mb).
    pub const ETHERNET: ArpHardware = ArpHardware(1);
    /// IEEE 802 networks.
    pub const IEEE802: ArpHardware = ArpHardware(6);
    /// ARCNET.
    pub const ARCNET: ArpHardware = ArpHardware(7);
    /// Frame Relay.
    pub const FRELAY: ArpHardware = ArpHardware(15);
    /// ATM.
    pub const ATM: ArpHardware = ArpHardware(19);
    /// InfiniBand.
    pub const INFINIBAND: ArpHardware = ArpHardware(32);

    /// A short name, if known.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            1 => "Ethernet",
            6 => "IEEE 802",
            7 => "ARCNET",
            15 => "Frame Relay",
            19 => "ATM",
            32 => "InfiniBand",
            _ => return None,
        })
    }
}

impl fmt::Display for ArpHardware {
    /// The name, else the number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

/// An ARP operation code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArpOperation(pub u16);

impl ArpOperation {
    /// ARP request.
    pub const REQUEST: ArpOperation = ArpOperation(1);
    /// ARP reply.
    pub const REPLY: ArpOperation = ArpOperation(2);
    /// RARP request.
    pub const REVERSE_REQUEST: ArpOperation = ArpOperation(3);
    /// RARP reply.
    pub const REVERSE_REPLY: ArpOperation = ArpOperation(4);
    /// Inverse ARP request.
    pub const INVERSE_REQUEST: ArpOperation = ArpOperation(8);
    /// Inverse ARP reply.
    pub const INVERSE_REPLY: ArpOperation = ArpOperation(9);
    /// ARP NAK (ATM ARP).
    pub const NAK: ArpOperation = ArpOperation(10);

    /// The tcpdump name, if known.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            1 => "Request",
            2 => "Reply",
            3 => "Reverse Request",
            4 => "Reverse Reply",
            8 => "Inverse Request",
            9 => "Inverse Reply",
            10 => "NACK Reply",
            _ => return None,
        })
    }
}

impl fmt::Display for ArpOperation {
    /// The tcpdump name, else the number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

mod field {
    pub(super) const HTYPE: usize = 0;
    pub(super) const PTYPE: usize = 2;
    pub(super) const HLEN: usize = 4;
    pub(super) const PLEN: usize = 5;
    pub(super) const OPER: usize = 6;
    pub(super) const SHA: usize = 8;
}

/// A view of an ARP/RARP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// The fixed part before the addresses.
    pub const FIXED_LEN: usize = field::SHA;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the fixed 8 bytes and all four addresses
    /// (`8 + 2 * (hlen + plen)` bytes) are present.
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        need(d, "arp", "header", 0, Self::FIXED_LEN)?;
        need(d, "arp", "header", 0, self.header_len())
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Length of the whole packet as declared: `8 + 2 * (hlen + plen)`.
    pub fn header_len(&self) -> usize {
        Self::FIXED_LEN + 2 * (usize::from(self.hardware_len()) + usize::from(self.protocol_len()))
    }

    /// Hardware type.
    pub fn hardware_type(&self) -> ArpHardware {
        ArpHardware(be16(self.buffer.as_ref(), field::HTYPE))
    }

    /// Protocol type.
    pub fn protocol_type(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), field::PTYPE))
    }

    /// Hardware address length.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Operation.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation(be16(self.buffer.as_ref(), field::OPER))
    }

    fn hlen(&self) -> usize {
        usize::from(self.hardware_len())
    }

    fn plen(&self) -> usize {
        usize::from(self.protocol_len())
    }

    fn spa_at(&self) -> usize {
        field::SHA + self.hlen()
    }

    fn tha_at(&self) -> usize {
        self.spa_at() + self.plen()
    }

    fn tpa_at(&self) -> usize {
        self.tha_at() + self.hlen()
    }

    /// Sender hardware address bytes.
    pub fn source_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::SHA..self.spa_at()]
    }

    /// Sender protocol address bytes.
    pub fn source_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.spa_at()..self.tha_at()]
    }

    /// Target hardware address bytes.
    pub fn target_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.tha_at()..self.tpa_at()]
    }

    /// Target protocol address bytes.
    pub fn target_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.tpa_at()..self.header_len()]
    }

    /// `true` for 6-byte hardware and 4-byte IPv4 protocol addresses.
    pub fn is_ethernet_ipv4(&self) -> bool {
        self.hardware_len() == 6
            && self.protocol_len() == 4
            && self.protocol_type() == EtherType::IPV4
    }

    /// Sender MAC address, when the hardware length is 6.
    pub fn source_ethernet_addr(&self) -> Option<EthernetAddress> {
        (self.hlen() == 6)
            .then(|| EthernetAddress::from_slice(self.source_hardware_addr()))
            .flatten()
    }

    /// Target MAC address, when the hardware length is 6.
    pub fn target_ethernet_addr(&self) -> Option<EthernetAddress> {
        (self.hlen() == 6)
            .then(|| EthernetAddress::from_slice(self.target_hardware_addr()))
            .flatten()
    }

    /// Sender IPv4 address, when the protocol length is 4.
    pub fn source_ipv4_addr(&self) -> Option<Ipv4Address> {
        (self.plen() == 4)
            .then(|| Ipv4Address::from_slice(self.source_protocol_addr()))
            .flatten()
    }

    /// Target IPv4 address, when the protocol length is 4.
    pub fn target_ipv4_addr(&self) -> Option<Ipv4Address> {
        (self.plen() == 4)
            .then(|| Ipv4Address::from_slice(self.target_protocol_addr()))
            .flatten()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, ty: ArpHardware) {
        set_be16(self.buffer.as_mut(), field::HTYPE, ty.0);
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, ty: EtherType) {
        set_be16(self.buffer.as_mut(), field::PTYPE, ty.0);
    }

    /// Sets the hardware address length.
    pub fn set_hardware_len(&mut self, len: u8) {
        self.buffer.as_mut()[field::HLEN] = len;
    }

    /// Sets the protocol address length.
    pub fn set_protocol_len(&mut self, len: u8) {
        self.buffer.as_mut()[field::PLEN] = len;
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, op: ArpOperation) {
        set_be16(self.buffer.as_mut(), field::OPER, op.0);
    }

    /// Sets the sender hardware address.
    ///
    /// # Panics
    /// If `addr.len()` differs from the hardware length field, or the buffer
    /// is too short.
    pub fn set_source_hardware_addr(&mut self, addr: &[u8]) {
        let (a, b) = (field::SHA, self.spa_at());
        self.buffer.as_mut()[a..b].copy_from_slice(addr);
    }

    /// Sets the sender protocol address.
    ///
    /// # Panics
    /// If `addr.len()` differs from the protocol length field, or the buffer
    /// is too short.
    pub fn set_source_protocol_addr(&mut self, addr: &[u8]) {
        let (a, b) = (self.spa_at(), self.tha_at());
        self.buffer.as_mut()[a..b].copy_from_slice(addr);
    }

    /// Sets the target hardware address.
    ///
    /// # Panics
    /// If `addr.len()` differs from the hardware length field, or the buffer
    /// is too short.
    pub fn set_target_hardware_addr(&mut self, addr: &[u8]) {
        let (a, b) = (self.tha_at(), self.tpa_at());
        self.buffer.as_mut()[a..b].copy_from_slice(addr);
    }

    /// Sets the target protocol address.
    ///
    /// # Panics
    /// If `addr.len()` differs from the protocol length field, or the buffer
    /// is too short.
    pub fn set_target_protocol_addr(&mut self, addr: &[u8]) {
        let (a, b) = (self.tpa_at(), self.header_len());
        self.buffer.as_mut()[a..b].copy_from_slice(addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real ARP request from a capture: who-has 172.21.79.100 tell
    /// 172.21.79.97, sender 00:20:d2:5a:fb:3f, plus padding.
    const REQ: [u8; 32] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x20, 0xd2, 0x5a, 0xfb, 0x3f, 0xac,
        0x15, 0x4f, 0x61, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xac, 0x15, 0x4f, 0x64, 0x00, 0x00,
        0x00, 0x00,
    ];

    #[test]
    fn accessors() {
        let p = ArpPacket::new_checked(&REQ[..]).unwrap();
        assert_eq!(p.hardware_type(), ArpHardware::ETHERNET);
        assert_eq!(p.protocol_type(), EtherType::IPV4);
        assert_eq!(p.hardware_len(), 6);
        assert_eq!(p.protocol_len(), 4);
        assert_eq!(p.operation(), ArpOperation::REQUEST);
        assert_eq!(p.operation().to_string(), "Request");
        assert_eq!(p.header_len(), 28);
        assert!(p.is_ethernet_ipv4());
        assert_eq!(
            p.source_ethernet_addr().unwrap().to_string(),
            "00:20:d2:5a:fb:3f"
        );
        assert_eq!(p.source_ipv4_addr().unwrap().to_string(), "172.21.79.97");
        assert_eq!(p.target_ethernet_addr(), Some(EthernetAddress([0; 6])));
        assert_eq!(p.target_ipv4_addr().unwrap().to_string(), "172.21.79.100");
        assert_eq!(p.source_hardware_addr().len(), 6);
        assert_eq!(p.target_protocol_addr(), &[172, 21, 79, 100]);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            ArpPacket::new_checked(&REQ[..27]).unwrap_err().to_string(),
            "arp header truncated at offset 0: needs 28 bytes, 27 available"
        );
        assert_eq!(
            ArpPacket::new_checked(&REQ[..5]).unwrap_err().to_string(),
            "arp header truncated at offset 0: needs 8 bytes, 5 available"
        );
    }

    #[test]
    fn odd_lengths_generic() {
        // hlen 0, plen 16 (e.g. a strange IPv6 ARP).
        let mut buf = [0u8; 8 + 32];
        let mut p = ArpPacket::new_unchecked(&mut buf[..]);
        p.set_hardware_type(ArpHardware(0x1234));
        p.set_protocol_type(EtherType::IPV6);
        p.set_hardware_len(0);
        p.set_protocol_len(16);
        p.set_operation(ArpOperation::REPLY);
        p.set_source_protocol_addr(&[1; 16]);
        p.set_target_protocol_addr(&[2; 16]);
        p.set_source_hardware_addr(&[]);
        p.set_target_hardware_addr(&[]);
        assert!(p.check_len().is_ok());
        assert!(!p.is_ethernet_ipv4());
        assert_eq!(p.source_ethernet_addr(), None);
        assert_eq!(p.source_ipv4_addr(), None);
        assert_eq!(p.target_ipv4_addr(), None);
        assert_eq!(p.target_ethernet_addr(), None);
        assert_eq!(p.source_protocol_addr(), &[1; 16]);
        assert_eq!(p.target_protocol_addr(), &[2; 16]);
        assert!(p.source_hardware_addr().is_empty());
        assert_eq!(p.hardware_type().to_string(), "4660");
        assert_eq!(ArpOperation(77).to_string(), "77");
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 28];
        let mut p = ArpPacket::new_unchecked(&mut buf[..]);
        p.set_hardware_type(ArpHardware::ETHERNET);
        p.set_protocol_type(EtherType::IPV4);
        p.set_hardware_len(6);
        p.set_protocol_len(4);
        p.set_operation(ArpOperation::REPLY);
        p.set_source_hardware_addr(&[2, 0, 0, 0, 0, 1]);
        p.set_source_protocol_addr(&[10, 0, 0, 1]);
        p.set_target_hardware_addr(&[2, 0, 0, 0, 0, 2]);
        p.set_target_protocol_addr(&[10, 0, 0, 2]);
        assert!(p.check_len().is_ok());
        assert_eq!(p.operation(), ArpOperation::REPLY);
        assert_eq!(
            p.source_ethernet_addr(),
            Some(EthernetAddress([2, 0, 0, 0, 0, 1]))
        );
        assert_eq!(p.target_ipv4_addr(), Some(Ipv4Address([10, 0, 0, 2])));
        assert_eq!(p.source_ipv4_addr(), Some(Ipv4Address([10, 0, 0, 1])));
    }
}
