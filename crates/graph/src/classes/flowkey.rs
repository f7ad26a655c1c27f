//! 5-tuple flow keys in MBuf words.
//!
//! Packets are keyed by `netsift-wire`'s flow-key parser ([`netsift_wire::flow::parse`]: any
//! number of VLAN tags, MPLS, PPPoE, IPv6 extension headers; later fragments keyed by address
//! pair and protocol). [`FlowKey5`] is that key as the flow classes store it: ports 0 for
//! packets without ports.
//!
//! # Key words
//!
//! [`FlowKey5::to_words`] encodes a key as five 64-bit words, the format that `flowcount` and
//! `topk` write to their MBufs (and FPL externs can read):
//!
//! | word | contents |
//! |---|---|
//! | 0 | source address, bytes 0-7 (big-endian: the first address byte is the top byte) |
//! | 1 | source address, bytes 8-15 |
//! | 2 | destination address, bytes 0-7 |
//! | 3 | destination address, bytes 8-15 |
//! | 4 | bits 63-48 source port, 47-32 destination port, 15-8 IP protocol, bit 1 IPv6, bit 0 set (a key is there) |
//!
//! IPv4 addresses are stored as IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`), bit 1 of word 4
//! telling the families apart. Word 4 is never 0 for a key, so an all-zero entry is empty.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A 5-tuple: addresses, IP protocol and ports (0 for protocols without ports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey5 {
    /// The source address.
    pub src: IpAddr,
    /// The destination address.
    pub dst: IpAddr,
    /// The IP protocol (after IPv6 extension headers).
    pub proto: u8,
    /// The source port (TCP, UDP, SCTP; else 0).
    pub src_port: u16,
    /// The destination port (TCP, UDP, SCTP; else 0).
    pub dst_port: u16,
}

impl std::fmt::Display for FlowKey5 {
    /// `SRC:SPORT > DST:DPORT proto P` (ports left out when both are 0; IPv6 addresses in
    /// brackets).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addr = |a: &IpAddr| match a {
            IpAddr::V4(v) => v.to_string(),
            IpAddr::V6(v) => format!("[{v}]"),
        };
        if self.src_port == 0 && self.dst_port == 0 {
            write!(
                f,
                "{} > {} proto {}",
                addr(&self.src),
                addr(&self.dst),
                self.proto
            )
        } else {
            write!(
                f,
                "{}:{} > {}:{} proto {}",
                addr(&self.src),
                self.src_port,
                addr(&self.dst),
                self.dst_port,
                self.proto
            )
        }
    }
}

/// Bit 0 of key word 4: an entry is there.
const USED: u64 = 1;
/// Bit 1 of key word 4: the addresses are IPv6.
const V6: u64 = 2;

impl FlowKey5 {
    /// The key as the five MBuf words described in the module docs.
    pub fn to_words(&self) -> [u64; 5] {
        let (s, d, v6) = match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => (s.to_ipv6_mapped(), d.to_ipv6_mapped(), 0),
            (s, d) => (to_v6(s), to_v6(d), V6),
        };
        let s = u128::from(s);
        let d = u128::from(d);
        [
            (s >> 64) as u64,
            s as u64,
            (d >> 64) as u64,
            d as u64,
            u64::from(self.src_port) << 48
                | u64::from(self.dst_port) << 32
                | u64::from(self.proto) << 8
                | v6
                | USED,
        ]
    }

    /// The key from five MBuf words; `None` for an empty entry (bit 0 of word 4 clear).
    pub fn from_words(w: [u64; 5]) -> Option<FlowKey5> {
        if w[4] & USED == 0 {
            return None;
        }
        let s = Ipv6Addr::from(u128::from(w[0]) << 64 | u128::from(w[1]));
        let d = Ipv6Addr::from(u128::from(w[2]) << 64 | u128::from(w[3]));
        let (src, dst) = if w[4] & V6 != 0 {
            (IpAddr::V6(s), IpAddr::V6(d))
        } else {
            (
                IpAddr::V4(s.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED)),
                IpAddr::V4(d.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED)),
            )
        };
        Some(FlowKey5 {
            src,
            dst,
            proto: (w[4] >> 8) as u8,
            src_port: (w[4] >> 48) as u16,
            dst_port: (w[4] >> 32) as u16,
        })
    }

    /// A 64-bit hash of the key words (multiply-xorshift; deterministic, not keyed).
    pub(crate) fn hash_words(w: &[u64; 5]) -> u64 {
        let mut h = 0x243f_6a88_85a3_08d3u64;
        for &x in w {
            h = (h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            h ^= h >> 29;
        }
        h ^= h >> 32;
        h.wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (h >> 31)
    }
}

impl From<netsift_wire::FlowKey> for FlowKey5 {
    fn from(k: netsift_wire::FlowKey) -> FlowKey5 {
        let (src_port, dst_port) = k.ports.unwrap_or((0, 0));
        FlowKey5 {
            src: k.src,
            dst: k.dst,
            proto: k.proto.0,
            src_port,
            dst_port,
        }
    }
}

fn to_v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// A one-line summary of flow counters (`flowcount`, `topk`): the number of flows and the
/// three busiest by packets.
pub fn describe_flows(mut flows: Vec<(FlowKey5, u64, u64)>) -> String {
    flows.sort_by_key(|f| std::cmp::Reverse(f.1));
    let top: Vec<String> = flows
        .iter()
        .take(3)
        .map(|(k, p, b)| format!("{k}: {p} packets, {b} bytes"))
        .collect();
    format!("{} flows; busiest: {}", flows.len(), top.join("; "))
}

#[cfg(test)]
mod tests {
    use netsift_capture::generate::FrameBuilder;
    use netsift_wire::{LinkType, flow};

    use super::*;

    #[test]
    fn keys_of_packets_and_words_round_trip() {
        let s = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut d = s;
        d[15] = 2;
        let f = FrameBuilder::new()
            .ipv6(s, d)
            .udp(5353, 53)
            .payload(b"q")
            .build();
        let k = FlowKey5::from(flow::parse(LinkType::ETHERNET, &f).unwrap().key);
        assert_eq!(k.src, IpAddr::V6(Ipv6Addr::from(s)));
        assert_eq!((k.proto, k.src_port, k.dst_port), (17, 5353, 53));
        assert_eq!(FlowKey5::from_words(k.to_words()), Some(k));
        let f = FrameBuilder::new()
            .vlan(7)
            .ipv4([1, 2, 3, 4], [5, 6, 7, 8])
            .icmp_echo_request(1, 2)
            .build();
        let k = FlowKey5::from(flow::parse(LinkType::ETHERNET, &f).unwrap().key);
        assert_eq!((k.proto, k.src_port, k.dst_port), (1, 0, 0));
        assert_eq!(k.to_string(), "1.2.3.4 > 5.6.7.8 proto 1");
        assert_eq!(FlowKey5::from_words(k.to_words()), Some(k));
        assert_eq!(FlowKey5::from_words([0; 5]), None);
    }
}
