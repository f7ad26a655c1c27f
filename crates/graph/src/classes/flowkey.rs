//! 5-tuple flow keys: parsing them out of packets and storing them in MBuf words.
//!
//! [`parse`] walks the link layer (Ethernet with up to four VLAN/QinQ tags, Linux cooked
//! capture, BSD loopback, raw IPv4/IPv6), the network layer (IPv4 with options, IPv6 with its
//! extension headers) and the transport header (TCP, UDP, SCTP ports). It never panics: every
//! read is a checked slice access, and a packet that ends too early gives `None` (no IP header)
//! or a key with ports 0 and an empty payload (the transport header is cut).
//!
//! Non-first IPv4/IPv6 fragments and protocols without ports get ports 0: a fragmented
//! datagram's later fragments are a flow of their own. `NOTE:` no reassembly.
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

use netsift_capture::LinkType;

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

fn to_v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// What [`parse`] found in a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The 5-tuple.
    pub key: FlowKey5,
    /// Offset of the first byte after the transport header (TCP, UDP, SCTP common header) —
    /// after the IP header for other protocols and non-first fragments; `end` when the
    /// transport header is cut.
    pub payload: usize,
    /// Offset of the end of the IP datagram (from its length field, so that Ethernet padding
    /// is not payload), clipped to the captured bytes; never below `payload`.
    pub end: usize,
}

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const MAX_VLAN_TAGS: usize = 4;
const MAX_IPV6_EXT: usize = 8;

fn be16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(d.get(at..at + 2)?.try_into().ok()?))
}

/// The 5-tuple and payload offset of a packet of `link`, `None` when it is not IPv4/IPv6 or
/// its IP header is cut. Never panics.
pub fn parse(link: LinkType, data: &[u8]) -> Option<Parsed> {
    let (ethertype, off) = match link {
        LinkType::ETHERNET => {
            let mut et = be16(data, 12)?;
            let mut off = 14;
            for _ in 0..MAX_VLAN_TAGS {
                if matches!(et, 0x8100 | 0x88a8 | 0x9100) {
                    et = be16(data, off + 2)?;
                    off += 4;
                } else {
                    break;
                }
            }
            (et, off)
        }
        LinkType::LINUX_SLL => (be16(data, 14)?, 16),
        LinkType::NULL | LinkType::LOOP => {
            // The address family, in host order of the capturing machine: AF_INET is 2
            // everywhere, AF_INET6 24, 28 or 30 depending on the BSD.
            let b = data.get(..4)?;
            let fam = if b[0] == 0 && b[1] == 0 { b[3] } else { b[0] };
            match fam {
                2 => (ETH_IPV4, 4),
                24 | 28 | 30 => (ETH_IPV6, 4),
                _ => return None,
            }
        }
        LinkType::RAW => match data.first()? >> 4 {
            4 => (ETH_IPV4, 0),
            6 => (ETH_IPV6, 0),
            _ => return None,
        },
        LinkType::IPV4 => (ETH_IPV4, 0),
        LinkType::IPV6 => (ETH_IPV6, 0),
        _ => return None,
    };
    match ethertype {
        ETH_IPV4 => ipv4(data, off),
        ETH_IPV6 => ipv6(data, off),
        _ => None,
    }
}

fn ipv4(d: &[u8], off: usize) -> Option<Parsed> {
    let h = d.get(off..off + 20)?;
    if h[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if ihl < 20 {
        return None;
    }
    let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]);
    let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]);
    let proto = h[9];
    let frag_off = u16::from_be_bytes([h[6], h[7]]) & 0x1fff;
    let key = FlowKey5 {
        src: IpAddr::V4(src),
        dst: IpAddr::V4(dst),
        proto,
        src_port: 0,
        dst_port: 0,
    };
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let end = if total >= ihl { off + total } else { d.len() };
    Some(transport(d, off + ihl, key, frag_off != 0, end))
}

fn ipv6(d: &[u8], off: usize) -> Option<Parsed> {
    let h = d.get(off..off + 40)?;
    if h[0] >> 4 != 6 {
        return None;
    }
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&h[8..24]).ok()?);
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&h[24..40]).ok()?);
    let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
    // Payload length 0: a jumbogram (or a broken header); take what was captured.
    let end = if plen == 0 { d.len() } else { off + 40 + plen };
    let mut next = h[6];
    let mut at = off + 40;
    let mut later_fragment = false;
    for _ in 0..MAX_IPV6_EXT {
        match next {
            // Hop-by-hop, routing, destination options: length in 8-byte units after the first 8.
            0 | 43 | 60 => {
                let e = d.get(at..at + 2);
                let Some(e) = e else { break };
                next = e[0];
                at += (usize::from(e[1]) + 1) * 8;
            }
            44 => {
                let Some(e) = d.get(at..at + 8) else { break };
                next = e[0];
                later_fragment = u16::from_be_bytes([e[2], e[3]]) >> 3 != 0;
                at += 8;
            }
            // Authentication header: length in 4-byte units after the first 8.
            51 => {
                let Some(e) = d.get(at..at + 2) else { break };
                next = e[0];
                at += (usize::from(e[1]) + 2) * 4;
            }
            _ => break,
        }
    }
    let key = FlowKey5 {
        src: IpAddr::V6(src),
        dst: IpAddr::V6(dst),
        proto: next,
        src_port: 0,
        dst_port: 0,
    };
    Some(transport(d, at, key, later_fragment, end))
}

fn transport(d: &[u8], at: usize, mut key: FlowKey5, later_fragment: bool, end: usize) -> Parsed {
    let end = end.min(d.len());
    let done = |key, payload: usize| Parsed {
        key,
        payload: payload.min(end),
        end,
    };
    if later_fragment {
        return done(key, at);
    }
    let hdr_len = match key.proto {
        6 => d
            .get(at + 12)
            .map(|b| usize::from(b >> 4) * 4)
            .filter(|&l| l >= 20),
        17 => Some(8),
        132 => Some(12),
        _ => return done(key, at),
    };
    if let (Some(sp), Some(dp)) = (be16(d, at), be16(d, at + 2)) {
        key.src_port = sp;
        key.dst_port = dp;
    }
    let payload = match hdr_len {
        Some(l) => at + l,
        None => end,
    };
    done(key, payload)
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
    use netsift_capture::generate::{FrameBuilder, TCP_ACK, XorShift64};

    use super::*;

    #[test]
    fn tcp_over_vlan_ipv4() {
        let f = FrameBuilder::new()
            .vlan(7)
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .tcp(1234, 80, TCP_ACK)
            .payload(b"GET /")
            .build();
        let p = parse(LinkType::ETHERNET, &f).unwrap();
        assert_eq!(p.key.src, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(p.key.dst, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!((p.key.proto, p.key.src_port, p.key.dst_port), (6, 1234, 80));
        assert_eq!(&f[p.payload..p.end], b"GET /");
        // Cut inside the TCP header: ports still read, payload empty.
        let p = parse(LinkType::ETHERNET, &f[..18 + 20 + 6]).unwrap();
        assert_eq!((p.key.src_port, p.payload, p.end), (1234, 44, 44));
        // Cut inside the IP header: nothing.
        assert_eq!(parse(LinkType::ETHERNET, &f[..30]), None);
    }

    #[test]
    fn udp_over_ipv6_and_words_round_trip() {
        let s = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut d = s;
        d[15] = 2;
        let f = FrameBuilder::new()
            .ipv6(s, d)
            .udp(5353, 53)
            .payload(b"q")
            .build();
        let p = parse(LinkType::ETHERNET, &f).unwrap();
        assert_eq!(p.key.src, IpAddr::V6(Ipv6Addr::from(s)));
        assert_eq!(
            (p.key.proto, p.key.src_port, p.key.dst_port),
            (17, 5353, 53)
        );
        assert_eq!(&f[p.payload..p.end], b"q");
        assert_eq!(FlowKey5::from_words(p.key.to_words()), Some(p.key));
        let p4 = parse(
            LinkType::ETHERNET,
            &FrameBuilder::new()
                .ipv4([1, 2, 3, 4], [5, 6, 7, 8])
                .udp(1, 2)
                .build(),
        )
        .unwrap();
        assert_eq!(FlowKey5::from_words(p4.key.to_words()), Some(p4.key));
        assert_eq!(FlowKey5::from_words([0; 5]), None);
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift64::new(7);
        let links = [
            LinkType::ETHERNET,
            LinkType::RAW,
            LinkType::LINUX_SLL,
            LinkType::NULL,
            LinkType::IPV6,
        ];
        for i in 0..20_000 {
            let mut buf = vec![0u8; rng.below(120) as usize];
            rng.fill(&mut buf);
            // Steer some of them into the IP paths.
            if buf.len() > 14 && i % 2 == 0 {
                buf[12] = if i % 4 == 0 { 0x08 } else { 0x86 };
                buf[13] = if i % 4 == 0 { 0x00 } else { 0xdd };
                buf[14] = if i % 4 == 0 { 0x45 } else { 0x60 };
            }
            for &l in &links {
                if let Some(p) = parse(l, &buf) {
                    assert!(p.payload <= p.end && p.end <= buf.len());
                }
            }
        }
    }
}
