//! Synthetic packets for tests, benchmarks and demos.
//!
//! [`FrameBuilder`] writes Ethernet frames byte by byte: optional VLAN tags (802.1Q, QinQ), then
//! ARP, IPv4 or IPv6, then TCP, UDP, ICMP/ICMPv6 or raw bytes, with every length and checksum
//! filled in. It is deliberately small and independent of `netsift-wire`, so the two can check
//! each other. [`XorShift64`] is a tiny deterministic PRNG and [`mixed_traffic`] uses both to
//! make a reproducible mix of traffic.
//!
//! ```
//! use netsift_capture::generate::{FrameBuilder, TCP_SYN};
//!
//! let frame = FrameBuilder::new()
//!     .vlan(100)
//!     .ipv4([198, 18, 0, 1], [198, 18, 0, 2])
//!     .tcp(40000, 80, TCP_SYN)
//!     .payload(b"hi")
//!     .build();
//! assert_eq!(frame.len(), 14 + 4 + 20 + 20 + 2);
//! assert_eq!(&frame[12..14], &[0x81, 0x00]); // 802.1Q tag
//! ```
//!
//! (The module is not called `gen` because that is a reserved word in Rust 2024.)

use crate::{LinkType, Packet, Timestamp};

/// TCP flag FIN.
pub const TCP_FIN: u8 = 0x01;
/// TCP flag SYN.
pub const TCP_SYN: u8 = 0x02;
/// TCP flag RST.
pub const TCP_RST: u8 = 0x04;
/// TCP flag PSH.
pub const TCP_PSH: u8 = 0x08;
/// TCP flag ACK.
pub const TCP_ACK: u8 = 0x10;
/// TCP flag URG.
pub const TCP_URG: u8 = 0x20;

/// The Ethernet broadcast address.
pub const BROADCAST: [u8; 6] = [0xff; 6];

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_IPV6: u16 = 0x86dd;

const PROTO_ICMP: u8 = 1;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMPV6: u8 = 58;

#[derive(Clone, Debug)]
enum Network {
    /// No network header: the payload follows the Ethernet header with this EtherType.
    Raw(u16),
    Ipv4 {
        src: [u8; 4],
        dst: [u8; 4],
        id: u16,
        flags_fragment: u16,
    },
    Ipv6 {
        src: [u8; 16],
        dst: [u8; 16],
    },
    Arp {
        op: u16,
        sender_ip: [u8; 4],
        target_mac: [u8; 6],
        target_ip: [u8; 4],
    },
}

#[derive(Clone, Debug)]
enum Transport {
    /// The payload directly, with this IP protocol number.
    Raw(u8),
    Tcp {
        src: u16,
        dst: u16,
        seq: u32,
        ack: u32,
        flags: u8,
    },
    Udp {
        src: u16,
        dst: u16,
    },
    /// Echo request or reply; the type depends on the IP version.
    Echo {
        request: bool,
        id: u16,
        seq: u16,
    },
    Icmp {
        icmp_type: u8,
        code: u8,
        rest: [u8; 4],
    },
}

/// A builder of Ethernet frames with correct lengths and checksums.
///
/// Methods that choose a layer replace the earlier choice for that layer; the transport layer is
/// used only over IPv4 and IPv6. Defaults: source MAC `02:00:00:00:00:01`, destination
/// `02:00:00:00:00:02`, no VLAN tag, EtherType `0x88b5` (local experimental) with no network
/// header, TTL/hop limit 64, empty payload, no padding.
#[derive(Clone, Debug)]
pub struct FrameBuilder {
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    tags: Vec<(u16, u16)>,
    network: Network,
    transport: Transport,
    ttl: u8,
    payload: Vec<u8>,
    min_len: usize,
}

impl Default for FrameBuilder {
    fn default() -> FrameBuilder {
        FrameBuilder::new()
    }
}

impl FrameBuilder {
    /// A builder with the defaults listed above.
    pub fn new() -> FrameBuilder {
        FrameBuilder {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            tags: Vec::new(),
            network: Network::Raw(0x88b5),
            transport: Transport::Raw(253),
            ttl: 64,
            payload: Vec::new(),
            min_len: 0,
        }
    }

    /// Sets the source MAC address (also the ARP sender hardware address).
    pub fn src_mac(mut self, mac: [u8; 6]) -> FrameBuilder {
        self.src_mac = mac;
        self
    }

    /// Sets the destination MAC address.
    pub fn dst_mac(mut self, mac: [u8; 6]) -> FrameBuilder {
        self.dst_mac = mac;
        self
    }

    /// Adds an 802.1Q tag (TPID `0x8100`, priority 0) with VLAN id `vid` (12 bits) after the
    /// tags added before.
    pub fn vlan(self, vid: u16) -> FrameBuilder {
        self.vlan_tag(ETHERTYPE_VLAN, vid & 0x0fff)
    }

    /// Adds a tag with any TPID (for example `0x88a8` for an 802.1ad service tag) and a raw TCI
    /// (priority, DEI, VLAN id).
    pub fn vlan_tag(mut self, tpid: u16, tci: u16) -> FrameBuilder {
        self.tags.push((tpid, tci));
        self
    }

    /// No network header: the payload follows with this EtherType.
    pub fn ethertype(mut self, ethertype: u16) -> FrameBuilder {
        self.network = Network::Raw(ethertype);
        self
    }

    /// An IPv4 header (no options, id 0, no fragmentation).
    pub fn ipv4(mut self, src: [u8; 4], dst: [u8; 4]) -> FrameBuilder {
        self.network = Network::Ipv4 {
            src,
            dst,
            id: 0,
            flags_fragment: 0,
        };
        self
    }

    /// Sets the IPv4 identification field (after [`FrameBuilder::ipv4`]).
    pub fn ip_id(mut self, value: u16) -> FrameBuilder {
        if let Network::Ipv4 { id, .. } = &mut self.network {
            *id = value;
        }
        self
    }

    /// Makes the IPv4 packet a fragment: `offset` in units of 8 bytes (13 bits) and the
    /// more-fragments flag (after [`FrameBuilder::ipv4`]).
    pub fn fragment(mut self, offset: u16, more_fragments: bool) -> FrameBuilder {
        if let Network::Ipv4 { flags_fragment, .. } = &mut self.network {
            *flags_fragment = (offset & 0x1fff) | if more_fragments { 0x2000 } else { 0 };
        }
        self
    }

    /// An IPv6 header (no extension headers, traffic class and flow label 0).
    pub fn ipv6(mut self, src: [u8; 16], dst: [u8; 16]) -> FrameBuilder {
        self.network = Network::Ipv6 { src, dst };
        self
    }

    /// Sets the IPv4 TTL or the IPv6 hop limit.
    pub fn ttl(mut self, ttl: u8) -> FrameBuilder {
        self.ttl = ttl;
        self
    }

    /// An ARP request (Ethernet/IPv4) for `target_ip`, sent to the broadcast address.
    pub fn arp_request(mut self, sender_ip: [u8; 4], target_ip: [u8; 4]) -> FrameBuilder {
        self.dst_mac = BROADCAST;
        self.network = Network::Arp {
            op: 1,
            sender_ip,
            target_mac: [0; 6],
            target_ip,
        };
        self
    }

    /// An ARP reply (Ethernet/IPv4) from `sender_ip` (at the source MAC) to `target_mac` /
    /// `target_ip`; the destination MAC becomes `target_mac`.
    pub fn arp_reply(
        mut self,
        sender_ip: [u8; 4],
        target_mac: [u8; 6],
        target_ip: [u8; 4],
    ) -> FrameBuilder {
        self.dst_mac = target_mac;
        self.network = Network::Arp {
            op: 2,
            sender_ip,
            target_mac,
            target_ip,
        };
        self
    }

    /// A TCP header (20 bytes, window 65535) with these ports and flags, sequence and
    /// acknowledgment numbers 0.
    pub fn tcp(mut self, src_port: u16, dst_port: u16, flags: u8) -> FrameBuilder {
        self.transport = Transport::Tcp {
            src: src_port,
            dst: dst_port,
            seq: 0,
            ack: 0,
            flags,
        };
        self
    }

    /// Sets the TCP sequence and acknowledgment numbers (after [`FrameBuilder::tcp`]).
    pub fn tcp_seq(mut self, seq_number: u32, ack_number: u32) -> FrameBuilder {
        if let Transport::Tcp { seq, ack, .. } = &mut self.transport {
            *seq = seq_number;
            *ack = ack_number;
        }
        self
    }

    /// A UDP header with these ports.
    pub fn udp(mut self, src_port: u16, dst_port: u16) -> FrameBuilder {
        self.transport = Transport::Udp {
            src: src_port,
            dst: dst_port,
        };
        self
    }

    /// An ICMP echo request (ICMPv6 over IPv6).
    pub fn icmp_echo_request(mut self, id: u16, seq: u16) -> FrameBuilder {
        self.transport = Transport::Echo {
            request: true,
            id,
            seq,
        };
        self
    }

    /// An ICMP echo reply (ICMPv6 over IPv6).
    pub fn icmp_echo_reply(mut self, id: u16, seq: u16) -> FrameBuilder {
        self.transport = Transport::Echo {
            request: false,
            id,
            seq,
        };
        self
    }

    /// Any ICMP (ICMPv6 over IPv6) message: type, code and the 4 bytes after the checksum.
    pub fn icmp(mut self, icmp_type: u8, code: u8, rest: [u8; 4]) -> FrameBuilder {
        self.transport = Transport::Icmp {
            icmp_type,
            code,
            rest,
        };
        self
    }

    /// No transport header: the payload follows the IP header with this protocol number.
    pub fn ip_protocol(mut self, protocol: u8) -> FrameBuilder {
        self.transport = Transport::Raw(protocol);
        self
    }

    /// Sets the bytes after the innermost header.
    pub fn payload(mut self, payload: &[u8]) -> FrameBuilder {
        self.payload = payload.to_vec();
        self
    }

    /// Pads the frame with zeros to at least `len` bytes (60 for a minimum Ethernet frame
    /// without FCS); the padding is not counted in IP lengths.
    pub fn pad_to(mut self, len: usize) -> FrameBuilder {
        self.min_len = len;
        self
    }

    /// Builds the frame.
    pub fn build(&self) -> Vec<u8> {
        let mut frame = Vec::with_capacity(64 + self.payload.len());
        frame.extend_from_slice(&self.dst_mac);
        frame.extend_from_slice(&self.src_mac);
        for &(tpid, tci) in &self.tags {
            frame.extend_from_slice(&tpid.to_be_bytes());
            frame.extend_from_slice(&tci.to_be_bytes());
        }
        match &self.network {
            Network::Raw(ethertype) => {
                frame.extend_from_slice(&ethertype.to_be_bytes());
                frame.extend_from_slice(&self.payload);
            }
            Network::Arp {
                op,
                sender_ip,
                target_mac,
                target_ip,
            } => {
                frame.extend_from_slice(&ETHERTYPE_ARP.to_be_bytes());
                frame.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4]);
                frame.extend_from_slice(&op.to_be_bytes());
                frame.extend_from_slice(&self.src_mac);
                frame.extend_from_slice(sender_ip);
                frame.extend_from_slice(target_mac);
                frame.extend_from_slice(target_ip);
                frame.extend_from_slice(&self.payload);
            }
            Network::Ipv4 {
                src,
                dst,
                id,
                flags_fragment,
            } => {
                let (protocol, segment) = self.transport_bytes(false, |proto, len| {
                    let mut pseudo = Vec::with_capacity(12);
                    pseudo.extend_from_slice(src);
                    pseudo.extend_from_slice(dst);
                    pseudo.extend_from_slice(&[0, proto]);
                    pseudo.extend_from_slice(&(len as u16).to_be_bytes());
                    pseudo
                });
                let total = (20 + segment.len()).min(usize::from(u16::MAX)) as u16;
                let mut ip = [0u8; 20];
                ip[0] = 0x45;
                ip[2..4].copy_from_slice(&total.to_be_bytes());
                ip[4..6].copy_from_slice(&id.to_be_bytes());
                ip[6..8].copy_from_slice(&flags_fragment.to_be_bytes());
                ip[8] = self.ttl;
                ip[9] = protocol;
                ip[12..16].copy_from_slice(src);
                ip[16..20].copy_from_slice(dst);
                let sum = checksum(&[&ip]);
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
                frame.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                frame.extend_from_slice(&ip);
                frame.extend_from_slice(&segment);
            }
            Network::Ipv6 { src, dst } => {
                let (next_header, segment) = self.transport_bytes(true, |proto, len| {
                    let mut pseudo = Vec::with_capacity(40);
                    pseudo.extend_from_slice(src);
                    pseudo.extend_from_slice(dst);
                    pseudo.extend_from_slice(&(len as u32).to_be_bytes());
                    pseudo.extend_from_slice(&[0, 0, 0, proto]);
                    pseudo
                });
                let payload_len = segment.len().min(usize::from(u16::MAX)) as u16;
                frame.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
                frame.extend_from_slice(&[0x60, 0, 0, 0]);
                frame.extend_from_slice(&payload_len.to_be_bytes());
                frame.push(next_header);
                frame.push(self.ttl);
                frame.extend_from_slice(src);
                frame.extend_from_slice(dst);
                frame.extend_from_slice(&segment);
            }
        }
        if frame.len() < self.min_len {
            frame.resize(self.min_len, 0);
        }
        frame
    }

    /// Builds the frame as an Ethernet [`Packet`] with this timestamp.
    pub fn build_packet(&self, timestamp: Timestamp) -> Packet {
        Packet::new(self.build(), timestamp, LinkType::ETHERNET)
    }

    /// The IP protocol number and the transport segment (header, payload, checksum);
    /// `pseudo(protocol, length)` gives the pseudo-header for checksums.
    fn transport_bytes(&self, ipv6: bool, pseudo: impl Fn(u8, usize) -> Vec<u8>) -> (u8, Vec<u8>) {
        let icmp_proto = if ipv6 { PROTO_ICMPV6 } else { PROTO_ICMP };
        let (protocol, mut segment, checksum_at) = match &self.transport {
            Transport::Raw(protocol) => return (*protocol, self.payload.clone()),
            Transport::Tcp {
                src,
                dst,
                seq,
                ack,
                flags,
            } => {
                let mut h = Vec::with_capacity(20 + self.payload.len());
                h.extend_from_slice(&src.to_be_bytes());
                h.extend_from_slice(&dst.to_be_bytes());
                h.extend_from_slice(&seq.to_be_bytes());
                h.extend_from_slice(&ack.to_be_bytes());
                h.extend_from_slice(&[0x50, *flags, 0xff, 0xff, 0, 0, 0, 0]);
                (PROTO_TCP, h, 16)
            }
            Transport::Udp { src, dst } => {
                let len = (8 + self.payload.len()).min(usize::from(u16::MAX)) as u16;
                let mut h = Vec::with_capacity(8 + self.payload.len());
                h.extend_from_slice(&src.to_be_bytes());
                h.extend_from_slice(&dst.to_be_bytes());
                h.extend_from_slice(&len.to_be_bytes());
                h.extend_from_slice(&[0, 0]);
                (PROTO_UDP, h, 6)
            }
            Transport::Echo { request, id, seq } => {
                let icmp_type = match (ipv6, request) {
                    (false, true) => 8,
                    (false, false) => 0,
                    (true, true) => 128,
                    (true, false) => 129,
                };
                let mut h = vec![icmp_type, 0, 0, 0];
                h.extend_from_slice(&id.to_be_bytes());
                h.extend_from_slice(&seq.to_be_bytes());
                (icmp_proto, h, 2)
            }
            Transport::Icmp {
                icmp_type,
                code,
                rest,
            } => {
                let mut h = vec![*icmp_type, *code, 0, 0];
                h.extend_from_slice(rest);
                (icmp_proto, h, 2)
            }
        };
        segment.extend_from_slice(&self.payload);
        let mut sum = if protocol == PROTO_ICMP {
            // ICMPv4 has no pseudo-header.
            checksum(&[&segment])
        } else {
            checksum(&[&pseudo(protocol, segment.len()), &segment])
        };
        if protocol == PROTO_UDP && sum == 0 {
            // 0 means "no checksum" in UDP.
            sum = 0xffff;
        }
        segment[checksum_at..checksum_at + 2].copy_from_slice(&sum.to_be_bytes());
        (protocol, segment)
    }
}

/// The Internet checksum (RFC 1071) of the concatenation of `parts`.
pub(crate) fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    let mut odd = false;
    for part in parts {
        for &byte in *part {
            sum += if odd {
                u64::from(byte)
            } else {
                u64::from(byte) << 8
            };
            odd = !odd;
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A small deterministic pseudo-random generator (xorshift64), for reproducible test data.
///
/// Not for anything that needs unpredictability.
#[derive(Clone, Debug)]
pub struct XorShift64 {
    state: u64,
}

impl XorShift64 {
    /// A generator from a seed; every seed (0 included) gives a valid, distinct sequence.
    pub fn new(seed: u64) -> XorShift64 {
        // Mix the seed so that nearby seeds diverge at once; the state must never be 0.
        let mixed = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5_4a32_d192_ed03;
        XorShift64 {
            state: if mixed == 0 { 1 } else { mixed },
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// A number in `0..n` (0 when `n` is 0); slightly biased for huge `n`, which does not
    /// matter for test data.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// The shape of the synthetic traffic of [`Mix::generate`]: which kinds of packets in which
/// proportions, between how many hosts, to which ports, with which payload sizes and gaps. The
/// default is [`mixed_traffic`]'s mix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mix {
    /// Relative weights of TCP/IPv4, TCP/IPv6, UDP/IPv4, UDP/IPv6, ICMP echo request (IPv4),
    /// ICMPv6 echo reply and ARP request (default 3, 1, 2, 1, 1, 1, 1). At least one non-zero.
    pub weights: [u64; 7],
    /// One frame in this many is VLAN-tagged (with a random VLAN id); 0: none (default 5).
    pub vlan_one_in: u64,
    /// Clients, 198.18.0.1 and up / 2001:db8::1 and up (1-250, default 200).
    pub clients: u64,
    /// Servers, 198.19.0.1 and up / 2001:db8::1:1 and up (1-250, default 8).
    pub servers: u64,
    /// Server ports of TCP over IPv4, picked uniformly (default 80, 443, 22; IPv6 TCP goes to
    /// 443, UDP to 53).
    pub tcp_ports: Vec<u16>,
    /// Largest payload in bytes; sizes are uniform from 0 (default 63).
    pub max_payload: u64,
    /// Smallest gap between packets and the random extra on top, in nanoseconds (default 1 ms
    /// and up to 4 ms more).
    pub gap_ns: (u64, u64),
}

impl Default for Mix {
    fn default() -> Mix {
        Mix {
            weights: [3, 1, 2, 1, 1, 1, 1],
            vlan_one_in: 5,
            clients: 200,
            servers: 8,
            tcp_ports: vec![80, 443, 22],
            max_payload: 63,
            gap_ns: (1_000_000, 4_000_000),
        }
    }
}

impl Mix {
    /// Why this shape cannot be generated, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.weights.iter().all(|&w| w == 0) {
            return Err("every packet kind has weight 0".into());
        }
        if self.weights.iter().any(|&w| w > 1_000_000) {
            return Err("a weight is larger than 1000000".into());
        }
        if !(1..=250).contains(&self.clients) || !(1..=250).contains(&self.servers) {
            return Err("clients and servers must be 1 to 250".into());
        }
        if self.tcp_ports.is_empty() {
            return Err("no TCP port to send to".into());
        }
        if self.max_payload > 1400 {
            return Err("payloads are at most 1400 bytes".into());
        }
        if self.gap_ns.0.saturating_add(self.gap_ns.1) > 3_600_000_000_000 {
            return Err("gaps are at most an hour".into());
        }
        Ok(())
    }

    /// `count` packets of this shape; the same `seed` always gives the same packets.
    ///
    /// # Panics
    ///
    /// When [`Mix::check`] fails.
    pub fn generate(&self, seed: u64, count: usize) -> Vec<Packet> {
        self.iter(seed, count).collect()
    }

    /// The packets of [`Mix::generate`] one at a time, made as they are taken (a source of
    /// millions of packets holds one at a time).
    ///
    /// # Panics
    /// If the mix is not valid ([`Mix::check`]).
    pub fn iter(&self, seed: u64, count: usize) -> MixIter {
        if let Err(e) = self.check() {
            panic!("invalid mix: {e}");
        }
        MixIter {
            mix: self.clone(),
            rng: XorShift64::new(seed),
            nanos: 1_700_000_000 * 1_000_000_000,
            total: self.weights.iter().sum(),
            i: 0,
            count,
        }
    }
}

/// The packets of a [`Mix`], made one at a time ([`Mix::iter`]).
#[derive(Clone, Debug)]
pub struct MixIter {
    mix: Mix,
    rng: XorShift64,
    nanos: i128,
    total: u64,
    i: usize,
    count: usize,
}

impl Iterator for MixIter {
    type Item = Packet;

    fn next(&mut self) -> Option<Packet> {
        if self.i >= self.count {
            return None;
        }
        let i = self.i;
        self.i += 1;
        let (mix, rng) = (&self.mix, &mut self.rng);
        self.nanos += i128::from(mix.gap_ns.0) + i128::from(rng.below(mix.gap_ns.1));
        let nanos = self.nanos;
        let total = self.total;
        let client = rng.below(mix.clients) as u8 + 1;
        let server = rng.below(mix.servers) as u8 + 1;
        let c4 = [198, 18, 0, client];
        let s4 = [198, 19, 0, server];
        let mut c6 = [0u8; 16];
        c6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        let mut s6 = c6;
        c6[15] = client;
        s6[14] = 1;
        s6[15] = server;
        let cmac = [2, 0, 0, 0, 0, client];
        let smac = [2, 0, 0, 0, 1, server];
        let sport = 32768 + rng.below(28000) as u16;
        let mut body = vec![0u8; rng.below(mix.max_payload + 1) as usize];
        rng.fill(&mut body);
        let b = FrameBuilder::new().src_mac(cmac).dst_mac(smac);
        // The kind whose cumulative weight range holds the draw.
        let draw = rng.below(total);
        let mut kind = 0;
        let mut acc = 0;
        for (k, &w) in mix.weights.iter().enumerate() {
            acc += w;
            if draw < acc {
                kind = k;
                break;
            }
        }
        let b = match kind {
            0 => {
                let port = mix.tcp_ports[rng.below(mix.tcp_ports.len() as u64) as usize];
                let flags =
                    [TCP_SYN, TCP_ACK, TCP_PSH | TCP_ACK, TCP_FIN | TCP_ACK][rng.below(4) as usize];
                b.ipv4(c4, s4)
                    .ip_id(i as u16)
                    .tcp(sport, port, flags)
                    .tcp_seq(rng.next_u64() as u32, rng.next_u64() as u32)
                    .payload(&body)
            }
            1 => b.ipv6(c6, s6).tcp(sport, 443, TCP_ACK).payload(&body),
            2 => b.ipv4(c4, s4).udp(sport, 53).payload(&body),
            3 => b.ipv6(c6, s6).udp(sport, 53).payload(&body),
            4 => b
                .ipv4(c4, s4)
                .icmp_echo_request(client.into(), i as u16)
                .payload(&body),
            5 => b
                .ipv6(c6, s6)
                .icmp_echo_reply(client.into(), i as u16)
                .payload(&body),
            _ => b.arp_request(c4, s4),
        };
        let b = if mix.vlan_one_in != 0 && rng.below(mix.vlan_one_in) == 0 {
            b.vlan(rng.below(4094) as u16 + 1)
        } else {
            b
        };
        Some(b.pad_to(60).build_packet(Timestamp::from_nanos(nanos)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.count - self.i;
        (left, Some(left))
    }
}

/// A reproducible mix of `count` Ethernet packets: TCP (HTTP, HTTPS, SSH), UDP (DNS), ICMP echo
/// over IPv4 and IPv6, ARP, some of them VLAN-tagged, between hosts of 198.18.0.0/15 and
/// 2001:db8::/32, one to a few milliseconds apart starting at 2023-11-14 22:13:20 UTC: the
/// default [`Mix`].
///
/// The same `seed` always gives the same packets.
pub fn mixed_traffic(seed: u64, count: usize) -> Vec<Packet> {
    Mix::default().generate(seed, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verify(parts: &[&[u8]]) -> bool {
        checksum(parts) == 0
    }

    #[test]
    fn checksum_rfc1071_example() {
        // RFC 1071 section 3 example: sum 0xddf2, checksum !0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(&[&data]), !0xddf2);
        // Odd lengths and split parts give the same result.
        assert_eq!(checksum(&[&data[..3], &data[3..]]), checksum(&[&data]));
        assert_eq!(checksum(&[&[0xab]]), !0xab00);
    }

    #[test]
    fn ipv4_tcp_frame() {
        let f = FrameBuilder::new()
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .ttl(7)
            .tcp(1234, 80, TCP_SYN)
            .payload(b"abc")
            .build();
        assert_eq!(f.len(), 14 + 20 + 20 + 3);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let ip = &f[14..34];
        assert_eq!(ip[0], 0x45);
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 43);
        assert_eq!((ip[8], ip[9]), (7, 6));
        assert!(verify(&[ip]));
        let tcp = &f[34..];
        assert_eq!(u16::from_be_bytes([tcp[2], tcp[3]]), 80);
        assert_eq!(tcp[13], TCP_SYN);
        let pseudo = [10, 0, 0, 1, 10, 0, 0, 2, 0, 6, 0, 23];
        assert!(verify(&[&pseudo, tcp]));
    }

    #[test]
    fn ipv6_udp_and_icmpv6() {
        let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let f = FrameBuilder::new()
            .ipv6(src, dst)
            .udp(53, 5353)
            .payload(&[1, 2, 3, 4, 5])
            .build();
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        assert_eq!(u16::from_be_bytes([f[18], f[19]]), 13);
        assert_eq!(f[20], 17);
        let udp = &f[54..];
        assert_eq!(u16::from_be_bytes([udp[4], udp[5]]), 13);
        let mut pseudo = Vec::new();
        pseudo.extend(src);
        pseudo.extend(dst);
        pseudo.extend([0, 0, 0, 13, 0, 0, 0, 17]);
        assert!(verify(&[&pseudo, udp]));

        let f = FrameBuilder::new()
            .ipv6(src, dst)
            .icmp_echo_request(1, 2)
            .build();
        assert_eq!(f[20], 58);
        let icmp = &f[54..];
        assert_eq!(icmp[0], 128);
        let mut pseudo = Vec::new();
        pseudo.extend(src);
        pseudo.extend(dst);
        pseudo.extend([0, 0, 0, 8, 0, 0, 0, 58]);
        assert!(verify(&[&pseudo, icmp]));
    }

    #[test]
    fn icmpv4_arp_vlan_and_padding() {
        let f = FrameBuilder::new()
            .vlan_tag(0x88a8, 10)
            .vlan(20)
            .ipv4([1, 1, 1, 1], [2, 2, 2, 2])
            .icmp_echo_reply(5, 6)
            .pad_to(60)
            .build();
        assert_eq!(f.len(), 60);
        assert_eq!(
            &f[12..22],
            &[0x88, 0xa8, 0, 10, 0x81, 0x00, 0, 20, 0x08, 0x00]
        );
        let icmp = &f[42..50];
        assert_eq!(icmp[0], 0);
        assert!(verify(&[icmp]));

        let f = FrameBuilder::new()
            .arp_request([192, 0, 2, 1], [192, 0, 2, 2])
            .build();
        assert_eq!(f.len(), 42);
        assert_eq!(&f[..6], &BROADCAST);
        assert_eq!(&f[12..14], &[0x08, 0x06]);
        assert_eq!(&f[20..22], &[0, 1]);
        assert_eq!(&f[38..42], &[192, 0, 2, 2]);
    }

    #[test]
    fn fragments_and_raw_protocols() {
        let f = FrameBuilder::new()
            .ipv4([1, 2, 3, 4], [5, 6, 7, 8])
            .fragment(185, true)
            .ip_id(77)
            .ip_protocol(47)
            .payload(&[0; 8])
            .build();
        assert_eq!(&f[18..22], &[0, 77, 0x20, 185]);
        assert_eq!(f[23], 47);
        assert_eq!(f.len(), 14 + 20 + 8);
        let f = FrameBuilder::new().ethertype(0x88cc).payload(&[1]).build();
        assert_eq!(&f[12..], &[0x88, 0xcc, 1]);
    }

    #[test]
    fn xorshift_is_deterministic() {
        let mut a = XorShift64::new(0);
        let mut b = XorShift64::new(0);
        assert_eq!(a.next_u64(), b.next_u64());
        assert_ne!(XorShift64::new(1).next_u64(), XorShift64::new(2).next_u64());
        let mut buf = [0u8; 13];
        a.fill(&mut buf);
        assert!(buf.iter().any(|&x| x != 0));
        assert!(a.below(10) < 10);
        assert_eq!(a.below(0), 0);
    }

    #[test]
    fn mixed_traffic_is_reproducible() {
        let a = mixed_traffic(42, 200);
        assert_eq!(a, mixed_traffic(42, 200));
        assert_ne!(a, mixed_traffic(43, 200));
        assert!(a.windows(2).all(|w| w[0].timestamp < w[1].timestamp));
        assert!(a.iter().all(|p| p.data.len() >= 60));
    }
}
