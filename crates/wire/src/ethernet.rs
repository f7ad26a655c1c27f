//! Ethernet II / IEEE 802.3 frames, MAC addresses and EtherTypes.
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use core::fmt;
use core::str::FromStr;

use crate::bytes::{Field, be16, need, set_be16};
use crate::error::Result;

/// A 48-bit IEEE MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// The address in the first six bytes of `data`, if there are six.
    pub fn from_slice(data: &[u8]) -> Option<EthernetAddress> {
        data.get(..6)
            .and_then(|s| <[u8; 6]>::try_from(s).ok())
            .map(EthernetAddress)
    }

    /// The six address bytes.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// `true` for `ff:ff:ff:ff:ff:ff`.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// `true` when the group (I/G) bit is set; includes broadcast.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// `true` when the group bit is clear.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// `true` when the locally-administered (U/L) bit is set.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// Error returned when parsing an [`EthernetAddress`] from text fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrParseError;

impl fmt::Display for AddrParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid MAC address syntax")
    }
}

impl std::error::Error for AddrParseError {}

impl FromStr for EthernetAddress {
    type Err = AddrParseError;

    /// Parses six hex octets (one or two digits each) separated by `:`
    /// or `-`, or three groups of four digits separated by `.`
    /// (`0011.2233.4455`).
    fn from_str(s: &str) -> core::result::Result<Self, AddrParseError> {
        let mut out = [0u8; 6];
        if s.contains('.') {
            let mut n = 0;
            for group in s.split('.') {
                if n == 3 || group.is_empty() || group.len() > 4 {
                    return Err(AddrParseError);
                }
                let v = u16::from_str_radix(group, 16).map_err(|_| AddrParseError)?;
                out[n * 2..n * 2 + 2].copy_from_slice(&v.to_be_bytes());
                n += 1;
            }
            return if n == 3 {
                Ok(EthernetAddress(out))
            } else {
                Err(AddrParseError)
            };
        }
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut n = 0;
        for part in s.split(sep) {
            if n == 6 || part.is_empty() || part.len() > 2 {
                return Err(AddrParseError);
            }
            out[n] = u8::from_str_radix(part, 16).map_err(|_| AddrParseError)?;
            n += 1;
        }
        if n == 6 {
            Ok(EthernetAddress(out))
        } else {
            Err(AddrParseError)
        }
    }
}

impl From<[u8; 6]> for EthernetAddress {
    fn from(b: [u8; 6]) -> Self {
        EthernetAddress(b)
    }
}

/// An EtherType (or, when `<= 1500`, an IEEE 802.3 length field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP.
    pub const ARP: EtherType = EtherType(0x0806);
    /// Wake-on-LAN.
    pub const WAKE_ON_LAN: EtherType = EtherType(0x0842);
    /// TRILL.
    pub const TRILL: EtherType = EtherType(0x22f3);
    /// DECnet Phase IV.
    pub const DECNET: EtherType = EtherType(0x6003);
    /// Transparent Ethernet Bridging (Ethernet in GRE / NVGRE).
    pub const TEB: EtherType = EtherType(0x6558);
    /// Reverse ARP.
    pub const RARP: EtherType = EtherType(0x8035);
    /// AppleTalk.
    pub const ATALK: EtherType = EtherType(0x809b);
    /// AppleTalk ARP.
    pub const AARP: EtherType = EtherType(0x80f3);
    /// IEEE 802.1Q VLAN tag.
    pub const VLAN: EtherType = EtherType(0x8100);
    /// Novell IPX.
    pub const IPX: EtherType = EtherType(0x8137);
    /// IPv6.
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// Ethernet flow control (MAC control).
    pub const MAC_CONTROL: EtherType = EtherType(0x8808);
    /// Slow protocols (LACP, marker, OAM).
    pub const SLOW: EtherType = EtherType(0x8809);
    /// PPP.
    pub const PPP: EtherType = EtherType(0x880b);
    /// MPLS unicast.
    pub const MPLS_UC: EtherType = EtherType(0x8847);
    /// MPLS multicast.
    pub const MPLS_MC: EtherType = EtherType(0x8848);
    /// PPPoE discovery stage.
    pub const PPPOE_DISC: EtherType = EtherType(0x8863);
    /// PPPoE session stage.
    pub const PPPOE_SESS: EtherType = EtherType(0x8864);
    /// EAP over LAN (802.1X).
    pub const EAPOL: EtherType = EtherType(0x888e);
    /// Profinet.
    pub const PROFINET: EtherType = EtherType(0x8892);
    /// ATA over Ethernet.
    pub const AOE: EtherType = EtherType(0x88a2);
    /// EtherCAT.
    pub const ETHERCAT: EtherType = EtherType(0x88a4);
    /// IEEE 802.1ad service VLAN tag (QinQ).
    pub const QINQ: EtherType = EtherType(0x88a8);
    /// ERSPAN type II.
    pub const ERSPAN: EtherType = EtherType(0x88be);
    /// LLDP.
    pub const LLDP: EtherType = EtherType(0x88cc);
    /// IEEE 802.1AE MACsec.
    pub const MACSEC: EtherType = EtherType(0x88e5);
    /// Precision Time Protocol.
    pub const PTP: EtherType = EtherType(0x88f7);
    /// Connectivity Fault Management (802.1ag).
    pub const CFM: EtherType = EtherType(0x8902);
    /// Fibre Channel over Ethernet.
    pub const FCOE: EtherType = EtherType(0x8906);
    /// Network Service Header.
    pub const NSH: EtherType = EtherType(0x894f);
    /// Ethernet configuration testing protocol ("Loopback").
    pub const LOOPBACK: EtherType = EtherType(0x9000);
    /// Pre-standard QinQ tag.
    pub const QINQ_OLD: EtherType = EtherType(0x9100);

    /// `true` when the value is an IEEE 802.3 length (`<= 1500`) rather than
    /// an EtherType.
    pub const fn is_length(self) -> bool {
        self.0 <= 1500
    }

    /// `true` for the VLAN tag protocol identifiers 0x8100, 0x88a8, 0x9100.
    pub const fn is_vlan(self) -> bool {
        matches!(self.0, 0x8100 | 0x88a8 | 0x9100)
    }

    /// The tcpdump name of this EtherType, if known.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x0800 => "IPv4",
            0x0806 => "ARP",
            0x0842 => "Wake-on-LAN",
            0x22f3 => "TRILL",
            0x6003 => "DN",
            0x6558 => "TEB",
            0x8035 => "Reverse ARP",
            0x809b => "Appletalk",
            0x80f3 => "Appletalk ARP",
            0x8100 => "802.1Q",
            0x8137 => "IPX",
            0x86dd => "IPv6",
            0x8808 => "MAC control",
            0x8809 => "Slow Protocols",
            0x880b => "PPP",
            0x8847 => "MPLS unicast",
            0x8848 => "MPLS multicast",
            0x8863 => "PPPoE D",
            0x8864 => "PPPoE S",
            0x888e => "EAPOL",
            0x8892 => "Profinet",
            0x88a2 => "AoE",
            0x88a4 => "EtherCAT",
            0x88a8 => "802.1Q-QinQ",
            0x88be => "ERSPAN",
            0x88cc => "LLDP",
            0x88e5 => "802.1AE MACsec",
            0x88f7 => "PTP",
            0x8902 => "CFM",
            0x8906 => "FCoE",
            0x894f => "NSH",
            0x9000 => "Loopback",
            0x9100 => "802.1Q-9100",
            _ => return None,
        })
    }
}

impl fmt::Display for EtherType {
    /// The tcpdump name, else the value as `0x%04x`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "0x{:04x}", self.0),
        }
    }
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        EtherType(v)
    }
}

mod field {
    use super::Field;
    pub(super) const DESTINATION: Field = 0..6;
    pub(super) const SOURCE: Field = 6..12;
    pub(super) const ETHERTYPE: usize = 12;
    pub(super) const PAYLOAD: usize = 14;
}

/// A view of an Ethernet II (DIX) or IEEE 802.3 frame header (no FCS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Header length: 14 bytes.
    pub const HEADER_LEN: usize = field::PAYLOAD;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Checks the buffer holds the 14-byte header.
    pub fn check_len(&self) -> Result<()> {
        need(
            self.buffer.as_ref(),
            "ethernet",
            "header",
            0,
            Self::HEADER_LEN,
        )
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The header length (14).
    pub const fn header_len(&self) -> usize {
        Self::HEADER_LEN
    }

    /// Destination MAC address.
    pub fn dst_addr(&self) -> EthernetAddress {
        let d = self.buffer.as_ref();
        let mut a = [0; 6];
        a.copy_from_slice(&d[field::DESTINATION]);
        EthernetAddress(a)
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> EthernetAddress {
        let d = self.buffer.as_ref();
        let mut a = [0; 6];
        a.copy_from_slice(&d[field::SOURCE]);
        EthernetAddress(a)
    }

    /// The EtherType / length field.
    pub fn ethertype(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), field::ETHERTYPE))
    }

    /// `true` when the type field is an IEEE 802.3 length (`<= 1500`), i.e.
    /// the payload starts with an LLC header.
    pub fn is_ieee8023(&self) -> bool {
        self.ethertype().is_length()
    }

    /// Everything after the 14-byte header (for 802.3 frames including any
    /// padding beyond the length field).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Sets the EtherType / length field.
    pub fn set_ethertype(&mut self, ty: EtherType) {
        set_be16(self.buffer.as_mut(), field::ETHERTYPE, ty.0);
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 18] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // dst
        0x00, 0x16, 0x3e, 0x37, 0xf6, 0x04, // src
        0x08, 0x06, // ARP
        0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn accessors() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(f.dst_addr(), EthernetAddress::BROADCAST);
        assert!(f.dst_addr().is_broadcast());
        assert!(f.dst_addr().is_multicast());
        assert_eq!(f.src_addr().to_string(), "00:16:3e:37:f6:04");
        assert!(f.src_addr().is_unicast());
        assert!(!f.src_addr().is_local());
        assert_eq!(f.ethertype(), EtherType::ARP);
        assert!(!f.is_ieee8023());
        assert_eq!(f.header_len(), 14);
        assert_eq!(f.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(f.into_inner().len(), 18);
    }

    #[test]
    fn truncated() {
        let err = EthernetFrame::new_checked(&FRAME[..13]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ethernet header truncated at offset 0: needs 14 bytes, 13 available"
        );
        assert!(EthernetFrame::new_checked(&FRAME[..14]).is_ok());
    }

    #[test]
    fn setters() {
        let mut buf = [0u8; 14];
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        let a: EthernetAddress = "02:00:00:00:00:01".parse().unwrap();
        f.set_dst_addr(EthernetAddress::BROADCAST);
        f.set_src_addr(a);
        f.set_ethertype(EtherType::IPV6);
        assert_eq!(f.src_addr(), a);
        assert!(f.src_addr().is_local());
        assert_eq!(f.dst_addr(), EthernetAddress::BROADCAST);
        assert_eq!(f.ethertype(), EtherType::IPV6);
        assert!(f.payload_mut().is_empty());
        assert_eq!(&buf[12..], &[0x86, 0xdd]);
    }

    #[test]
    fn ieee8023_length() {
        assert!(EtherType(46).is_length());
        assert!(EtherType(1500).is_length());
        assert!(!EtherType(1536).is_length());
        assert!(EtherType::QINQ.is_vlan());
        assert!(EtherType::QINQ_OLD.is_vlan());
        assert!(!EtherType::IPV4.is_vlan());
    }

    #[test]
    fn ethertype_display() {
        assert_eq!(EtherType::IPV4.to_string(), "IPv4");
        assert_eq!(EtherType::QINQ.to_string(), "802.1Q-QinQ");
        assert_eq!(EtherType::MPLS_UC.to_string(), "MPLS unicast");
        assert_eq!(EtherType(0x1234).to_string(), "0x1234");
    }

    #[test]
    fn parse_mac() {
        let want = EthernetAddress([0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!("00:11:22:33:44:55".parse(), Ok(want));
        assert_eq!("0:11:22:33:44:55".parse(), Ok(want));
        assert_eq!("00-11-22-33-44-55".parse(), Ok(want));
        assert_eq!("0011.2233.4455".parse(), Ok(want));
        for bad in [
            "",
            "00:11:22:33:44",
            "00:11:22:33:44:55:66",
            "00:11:22:33:44:5g",
            "000:11:22:33:44:55",
            "0011.2233",
            "0011.2233.4455.6677",
            "00112.2233.4455",
        ] {
            assert!(bad.parse::<EthernetAddress>().is_err(), "{bad}");
        }
        assert_eq!(EthernetAddress::from_slice(&[1, 2, 3]), None);
        assert_eq!(
            EthernetAddress::from_slice(&[1, 2, 3, 4, 5, 6, 7]),
            Some(EthernetAddress([1, 2, 3, 4, 5, 6]))
        );
    }
}
