//! IP protocol numbers and a version-independent IP address.

use core::fmt;

use crate::ipv4::Ipv4Address;
use crate::ipv6::Ipv6Address;

/// An IP protocol / IPv6 next-header number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// IPv6 Hop-by-Hop Options.
    pub const IPV6_HOPOPTS: IpProtocol = IpProtocol(0);
    /// ICMP.
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// IGMP.
    pub const IGMP: IpProtocol = IpProtocol(2);
    /// IPv4 encapsulated in IP (IP-in-IP).
    pub const IPIP: IpProtocol = IpProtocol(4);
    /// TCP.
    pub const TCP: IpProtocol = IpProtocol(6);
    /// EGP.
    pub const EGP: IpProtocol = IpProtocol(8);
    /// Cisco IGRP (any private interior gateway).
    pub const IGRP: IpProtocol = IpProtocol(9);
    /// UDP.
    pub const UDP: IpProtocol = IpProtocol(17);
    /// DCCP.
    pub const DCCP: IpProtocol = IpProtocol(33);
    /// IPv6 encapsulated in IP.
    pub const IPV6: IpProtocol = IpProtocol(41);
    /// IPv6 Routing header.
    pub const IPV6_ROUTING: IpProtocol = IpProtocol(43);
    /// IPv6 Fragment header.
    pub const IPV6_FRAGMENT: IpProtocol = IpProtocol(44);
    /// RSVP.
    pub const RSVP: IpProtocol = IpProtocol(46);
    /// Generic Routing Encapsulation.
    pub const GRE: IpProtocol = IpProtocol(47);
    /// IPsec Encapsulating Security Payload.
    pub const ESP: IpProtocol = IpProtocol(50);
    /// IPsec Authentication Header.
    pub const AH: IpProtocol = IpProtocol(51);
    /// ICMP for IPv6.
    pub const ICMPV6: IpProtocol = IpProtocol(58);
    /// IPv6 No Next Header.
    pub const IPV6_NONXT: IpProtocol = IpProtocol(59);
    /// IPv6 Destination Options.
    pub const IPV6_DSTOPTS: IpProtocol = IpProtocol(60);
    /// EIGRP.
    pub const EIGRP: IpProtocol = IpProtocol(88);
    /// OSPF.
    pub const OSPF: IpProtocol = IpProtocol(89);
    /// Ethernet-within-IP.
    pub const ETHERIP: IpProtocol = IpProtocol(97);
    /// Protocol Independent Multicast.
    pub const PIM: IpProtocol = IpProtocol(103);
    /// IP Payload Compression.
    pub const IPCOMP: IpProtocol = IpProtocol(108);
    /// VRRP (also used by CARP).
    pub const VRRP: IpProtocol = IpProtocol(112);
    /// PGM reliable multicast.
    pub const PGM: IpProtocol = IpProtocol(113);
    /// Layer 2 Tunneling Protocol v3.
    pub const L2TP: IpProtocol = IpProtocol(115);
    /// SCTP.
    pub const SCTP: IpProtocol = IpProtocol(132);
    /// IPv6 Mobility header.
    pub const MOBILITY: IpProtocol = IpProtocol(135);
    /// UDP-Lite.
    pub const UDPLITE: IpProtocol = IpProtocol(136);
    /// MPLS in IP.
    pub const MPLS_IN_IP: IpProtocol = IpProtocol(137);
    /// Host Identity Protocol.
    pub const HIP: IpProtocol = IpProtocol(139);
    /// Shim6.
    pub const SHIM6: IpProtocol = IpProtocol(140);
    /// Ethernet (RFC 8986, used by SRv6).
    pub const ETHERNET: IpProtocol = IpProtocol(143);

    /// The tcpdump name of this protocol, if known.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "HBH",
            1 => "ICMP",
            2 => "IGMP",
            4 => "IPIP",
            6 => "TCP",
            8 => "EGP",
            9 => "IGRP",
            17 => "UDP",
            33 => "DCCP",
            41 => "IPv6",
            43 => "Routing",
            44 => "Fragment",
            46 => "RSVP",
            47 => "GRE",
            50 => "ESP",
            51 => "AH",
            58 => "ICMPv6",
            59 => "NONE",
            60 => "DSTOPTS",
            88 => "EIGRP",
            89 => "OSPF",
            97 => "EtherIP",
            103 => "PIM",
            108 => "IPComp",
            112 => "VRRP",
            113 => "PGM",
            115 => "L2TP",
            132 => "SCTP",
            135 => "Mobility",
            136 => "UDPLite",
            137 => "MPLS-in-IP",
            139 => "HIP",
            140 => "Shim6",
            143 => "Ethernet",
            _ => return None,
        })
    }

    /// `true` for IPv6 extension headers that use the generic
    /// `next header, length` layout and can be walked over: Hop-by-Hop,
    /// Routing, Fragment, Destination Options, AH, Mobility, HIP and Shim6.
    /// ESP is not included (its payload is opaque).
    pub const fn is_ipv6_extension(self) -> bool {
        matches!(self.0, 0 | 43 | 44 | 51 | 60 | 135 | 139 | 140)
    }
}

impl fmt::Display for IpProtocol {
    /// The tcpdump name, else the decimal number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        IpProtocol(v)
    }
}

/// An IPv4 or IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpAddress {
    /// IPv4.
    V4(Ipv4Address),
    /// IPv6.
    V6(Ipv6Address),
}

impl IpAddress {
    /// `true` for the IPv4 limited broadcast address (IPv6 has none).
    pub fn is_broadcast(&self) -> bool {
        match self {
            IpAddress::V4(a) => a.is_broadcast(),
            IpAddress::V6(a) => a.is_broadcast(),
        }
    }

    /// `true` for multicast addresses of either family.
    pub fn is_multicast(&self) -> bool {
        match self {
            IpAddress::V4(a) => a.is_multicast(),
            IpAddress::V6(a) => a.is_multicast(),
        }
    }

    /// `true` for the unspecified address of either family.
    pub fn is_unspecified(&self) -> bool {
        match self {
            IpAddress::V4(a) => a.is_unspecified(),
            IpAddress::V6(a) => a.is_unspecified(),
        }
    }
}

impl fmt::Display for IpAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpAddress::V4(a) => a.fmt(f),
            IpAddress::V6(a) => a.fmt(f),
        }
    }
}

impl From<Ipv4Address> for IpAddress {
    fn from(a: Ipv4Address) -> Self {
        IpAddress::V4(a)
    }
}

impl From<Ipv6Address> for IpAddress {
    fn from(a: Ipv6Address) -> Self {
        IpAddress::V6(a)
    }
}

impl From<std::net::IpAddr> for IpAddress {
    fn from(a: std::net::IpAddr) -> Self {
        match a {
            std::net::IpAddr::V4(a) => IpAddress::V4(a.into()),
            std::net::IpAddr::V6(a) => IpAddress::V6(a.into()),
        }
    }
}

impl From<IpAddress> for std::net::IpAddr {
    fn from(a: IpAddress) -> Self {
        match a {
            IpAddress::V4(a) => std::net::IpAddr::V4(a.into()),
            IpAddress::V6(a) => std::net::IpAddr::V6(a.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_display() {
        assert_eq!(IpProtocol::TCP.to_string(), "TCP");
        assert_eq!(IpProtocol::ICMPV6.to_string(), "ICMPv6");
        assert_eq!(IpProtocol::IPIP.to_string(), "IPIP");
        assert_eq!(IpProtocol(123).to_string(), "123");
        assert_eq!(IpProtocol(253).name(), None);
        assert!(IpProtocol::IPV6_FRAGMENT.is_ipv6_extension());
        assert!(IpProtocol::AH.is_ipv6_extension());
        assert!(!IpProtocol::ESP.is_ipv6_extension());
        assert!(!IpProtocol::TCP.is_ipv6_extension());
        assert!(!IpProtocol::IPV6_NONXT.is_ipv6_extension());
    }

    #[test]
    fn address_enum() {
        let a = IpAddress::from(Ipv4Address([255, 255, 255, 255]));
        assert!(a.is_broadcast());
        assert!(!a.is_multicast());
        assert_eq!(a.to_string(), "255.255.255.255");
        let b: IpAddress = std::net::IpAddr::from([0xff02, 0, 0, 0, 0, 0, 0, 1]).into();
        assert!(b.is_multicast());
        assert!(!b.is_broadcast());
        assert_eq!(b.to_string(), "ff02::1");
        let back: std::net::IpAddr = b.into();
        assert_eq!(back.to_string(), "ff02::1");
        assert!(IpAddress::V6(Ipv6Address::UNSPECIFIED).is_unspecified());
    }
}
