//! Robustness: no input makes `summarize` or a checked view panic.
//!
//! Feeds every prefix of a few valid frames, mutated copies of them and
//! thousands of pseudo-random byte strings (deterministic xorshift PRNG) to
//! `summarize` for every supported link type, and to every view's
//! `new_checked` followed by all of its accessors and iterators.

use netsift_wire::arp::ArpPacket;
use netsift_wire::ethernet::EthernetFrame;
use netsift_wire::geneve::GenevePacket;
use netsift_wire::gre::GrePacket;
use netsift_wire::icmp::IcmpPacket;
use netsift_wire::icmpv6::Icmpv6Packet;
use netsift_wire::ip::IpProtocol;
use netsift_wire::ipv4::Ipv4Packet;
use netsift_wire::ipv6::Ipv6Packet;
use netsift_wire::ipv6ext::{
    AuthHeader, ExtHeaders, Ipv6FragmentHeader, Ipv6OptionsHeader, Ipv6RoutingHeader,
};
use netsift_wire::llc::LlcPacket;
use netsift_wire::mpls::MplsPacket;
use netsift_wire::sctp::SctpPacket;
use netsift_wire::tcp::TcpPacket;
use netsift_wire::udp::UdpPacket;
use netsift_wire::vlan::VlanPacket;
use netsift_wire::vxlan::VxlanPacket;
use netsift_wire::{LinkType, summarize};

/// xorshift64* — small, deterministic, good enough for fuzzing.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

const LINKS: [LinkType; 16] = [
    LinkType::ETHERNET,
    LinkType::NULL,
    LinkType::LOOP,
    LinkType::RAW,
    LinkType::IPV4,
    LinkType::IPV6,
    LinkType::LINUX_SLL,
    LinkType::LINUX_SLL2,
    LinkType::PPP,
    LinkType::PPP_HDLC,
    LinkType::PPP_ETHER,
    LinkType::C_HDLC,
    LinkType::SLIP,
    LinkType::IEEE802_11,
    LinkType::IEEE802_11_RADIOTAP,
    LinkType(0xdead_beef),
];

fn hex(s: &str) -> Vec<u8> {
    let s: Vec<u8> = s.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    s.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// Real frames (Ethernet unless noted) covering the decoders.
fn seeds() -> Vec<(LinkType, Vec<u8>)> {
    let e = LinkType::ETHERNET;
    vec![
        // Geneve + TCP SYN-ACK with options.
        (
            e,
            hex(
                "001b213cac30001b213cab64080045000076dfba4000401132ba1400000114000002580c17c1006200000240655800000a00000080010000000cfe71d883724fb69ed249514808004500003c000040004006feb91e0000011e0000020016c819ad805fe217b30cb0a0127120101d0000020405b40402080a05058989ab6d56be01030307",
            ),
        ),
        // VXLAN + ICMP echo.
        (
            e,
            hex(
                "00163e0871cf36dc851eb340080045000086d2c0400040115152c0a8cb01c0a8ca01b05d12b500720000080000000000640000308801000200163e37f604080045000054000040004001234fc0a8cb03c0a8cb050800f6f2050c0001fce2975100000000a6f8020000000000101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031323334353637",
            ),
        ),
        // QinQ ARP.
        (
            e,
            hex(
                "ffffffffffff0020d25afb3f88a800c8810007d1080600010800060400010020d25afb3fac154f61000000000000ac154f640000000000000000000000000000",
            ),
        ),
        // ICMPv6 neighbor solicitation.
        (
            e,
            hex(
                "3333ffe1000f566ff7e1000f86dd6000000000203aff00000000000000000000000000000000ff0200000000000000000001ffe1000f8700566e00000000fe80000000000000546ff7fffee1000f0e016069604c0aaa",
            ),
        ),
        // IPv6 HBH + MLDv2.
        (
            e,
            hex(
                "333300000016001517cce54686dd6000000000240001fe80000000000000021517fffecce546ff0200000000000000000000000000163a000502000001008f001fc50000000104000000ff0200000000000000000db811223344",
            ),
        ),
        // IPv6 routing header + ICMPv6 echo.
        (
            e,
            hex(
                "0013c4c784f000123fae22f786dd6000000000202b04220000000000024402123ffffeae22f7220000000000024000020000000000043a02000100000000220000000000021000020000000000048000d3ab00000000",
            ),
        ),
        // STP BPDU (802.3 + LLC).
        (
            e,
            hex(
                "0180c2000000001906eab885002642420300000000008001001906eab880000000008001001906eab88080050000140002000f000000000000000000",
            ),
        ),
        // IPv4 + GRE(key) + IPv4 + ICMP.
        (
            e,
            hex(
                "ffffffffffff02000000000108004500003800000000402f00000a0000010a00000220000800000000002a4500001c0000000040010000c0a80001c0a800020000fffe00010002",
            ),
        ),
        // IPv4 + SCTP INIT + COOKIE ACK.
        (
            e,
            hex(concat!(
                "ffffffffffff02000000000108004500002c0000000040840000",
                "0a0000010a00000213881389000000000000000001000008000000000b000004"
            )),
        ),
        // IPv6 fragment + UDP.
        (
            LinkType::RAW,
            hex(concat!(
                "6000000000182c40",
                "20010db8000000000000000000000001",
                "20010db8000000000000000000000002",
                "110000010000000913881389001000000000000000000000"
            )),
        ),
        // Linux SLL + TCP SYN with options.
        (
            LinkType::LINUX_SLL,
            hex(
                "000402000000000000000000000008004500003c29a940004006db5f839bd7458974515eb64000502f842acb00000000a0026a4050c40000020405500402080a436a03620000000001030307",
            ),
        ),
        // PPP + MPLS + IPv4 + UDP.
        (
            LinkType::PPP,
            hex(
                "ff0302811896010145000028a54c00000111f76f0c0404040c010101a54b829b00140000000000000000000000000000",
            ),
        ),
        // BSD loopback + IPv6 + UDP.
        (
            LinkType::NULL,
            hex(
                "1e000000600a0f0004b811400000000000000000000000000000000100000000000000000000000000000001c5ae01bb04b804cbce000000010884acac06b42ed8630000449ebf8dec1e22ec03288f86",
            ),
        ),
        // SLL2 + ARP.
        (
            LinkType::LINUX_SLL2,
            hex(concat!(
                "0806000000000002000104060200000000010000",
                "0001080006040001020000000001 0a000001 000000000000 0a000002"
            )),
        ),
    ]
}

/// Calls every accessor of every view on `data`, when `new_checked`
/// accepts it.
fn all_views(data: &[u8]) {
    let mut sink = 0u64;
    let mut eat = |v: u64| sink = sink.wrapping_add(v);

    if let Ok(p) = EthernetFrame::new_checked(data) {
        eat(p.dst_addr().0[0].into());
        eat(p.src_addr().is_multicast().into());
        eat(p.ethertype().0.into());
        eat(p.is_ieee8023().into());
        eat(p.payload().len() as u64);
        eat(p.header_len() as u64);
    }
    if let Ok(p) = VlanPacket::new_checked(data) {
        eat(u64::from(p.pcp()) + u64::from(p.dei()) + u64::from(p.vid()) + u64::from(p.tci()));
        eat(p.ethertype().0.into());
        eat(p.payload().len() as u64);
    }
    if let Ok(p) = MplsPacket::new_checked(data) {
        eat(u64::from(p.label()) + u64::from(p.tc()) + u64::from(p.ttl()));
        eat(p.bottom_of_stack().into());
        eat(p.payload().len() as u64);
    }
    if let Ok(p) = LlcPacket::new_checked(data) {
        eat(u64::from(p.dsap().0) + u64::from(p.ssap().0) + u64::from(p.control()));
        eat(u64::from(p.dsap_is_group()) + u64::from(p.is_response()) + u64::from(p.is_snap()));
        eat(u64::from(p.snap_oui().unwrap_or(0)));
        eat(u64::from(p.snap_type().map_or(0, |t| t.0)));
        eat(p.payload().len() as u64 + p.header_len() as u64 + u64::from(p.is_unnumbered()));
    }
    if let Ok(p) = ArpPacket::new_checked(data) {
        eat(u64::from(p.hardware_type().0) + u64::from(p.protocol_type().0));
        eat(u64::from(p.hardware_len()) + u64::from(p.protocol_len()));
        eat(p.operation().0.into());
        eat((p.source_hardware_addr().len() + p.source_protocol_addr().len()) as u64);
        eat((p.target_hardware_addr().len() + p.target_protocol_addr().len()) as u64);
        eat(p.is_ethernet_ipv4().into());
        eat(p.source_ethernet_addr().is_some().into());
        eat(p.target_ethernet_addr().is_some().into());
        eat(p.source_ipv4_addr().is_some().into());
        eat(p.target_ipv4_addr().is_some().into());
        eat(p.header_len() as u64);
    }
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        eat(u64::from(p.version()) + p.header_len() as u64 + u64::from(p.tos()));
        eat(u64::from(p.dscp()) + u64::from(p.ecn()) + u64::from(p.total_len()));
        eat(u64::from(p.ident()) + u64::from(p.frag_offset()) + u64::from(p.ttl()));
        eat(u64::from(p.reserved_flag()) + u64::from(p.dont_frag()) + u64::from(p.more_frags()));
        eat(u64::from(p.is_fragment()) + u64::from(p.protocol().0) + u64::from(p.checksum()));
        eat(u64::from(p.src_addr().to_bits()) + u64::from(p.dst_addr().to_bits()));
        eat(p.options().len() as u64 + p.payload().len() as u64);
        eat(u64::from(p.verify_checksum()) + u64::from(p.total_len_fits()));
    }
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        eat(u64::from(p.version()) + u64::from(p.traffic_class()) + u64::from(p.flow_label()));
        eat(u64::from(p.payload_len()) + u64::from(p.next_header().0) + u64::from(p.hop_limit()));
        eat(u64::from(p.src_addr().0[0]) + u64::from(p.dst_addr().is_multicast()));
        eat(p.payload().len() as u64 + u64::from(p.is_jumbo_candidate()));
        let mut walk = ExtHeaders::new(p.next_header(), p.payload());
        for h in walk.by_ref().flatten() {
            eat(u64::from(h.kind().0) + u64::from(h.next_header().0) + h.offset() as u64);
            eat(h.len() as u64 + h.bytes().len() as u64 + u64::from(h.is_empty()));
            if let Some(o) = h.as_options() {
                eat(o.options_iter().count() as u64 + o.payload().len() as u64);
            }
            if let Some(r) = h.as_routing() {
                eat(r.addresses().count() as u64 + r.type_data().len() as u64);
            }
            if let Some(f) = h.as_fragment() {
                eat(u64::from(f.frag_offset()) + u64::from(f.ident()) + u64::from(f.more_frags()));
            }
            if let Some(a) = h.as_auth() {
                eat(u64::from(a.spi()) + u64::from(a.seq_number()) + a.icv().len() as u64);
            }
        }
        eat(u64::from(walk.upper_protocol().0) + walk.upper_offset() as u64);
        eat(walk.upper_payload().len() as u64 + u64::from(walk.non_first_fragment()));
        eat(u64::from(walk.failed()));
    }
    for first in [0u8, 43, 44, 51, 60, 135] {
        for item in ExtHeaders::new(IpProtocol(first), data).with_limit(4) {
            eat(item.map_or(1, |h| h.len() as u64));
        }
    }
    if let Ok(p) = Ipv6OptionsHeader::new_checked(data) {
        eat(u64::from(p.next_header().0) + p.header_len() as u64 + p.options().len() as u64);
        eat(p.options_iter().count() as u64 + p.payload().len() as u64);
    }
    if let Ok(p) = Ipv6RoutingHeader::new_checked(data) {
        eat(u64::from(p.next_header().0) + p.header_len() as u64);
        eat(u64::from(p.routing_type()) + u64::from(p.segments_left()));
        eat(p.type_data().len() as u64 + p.addresses().count() as u64 + p.payload().len() as u64);
    }
    if let Ok(p) = Ipv6FragmentHeader::new_checked(data) {
        eat(u64::from(p.next_header().0) + u64::from(p.frag_offset()) + u64::from(p.ident()));
        eat(u64::from(p.more_frags()) + p.payload().len() as u64);
    }
    if let Ok(p) = AuthHeader::new_checked(data) {
        eat(u64::from(p.next_header().0) + u64::from(p.payload_len()) + p.header_len() as u64);
        eat(u64::from(p.spi()) + u64::from(p.seq_number()));
        eat(p.icv().len() as u64 + p.payload().len() as u64);
    }
    if let Ok(p) = TcpPacket::new_checked(data) {
        eat(u64::from(p.src_port()) + u64::from(p.dst_port()));
        eat(u64::from(p.seq_number()) + u64::from(p.ack_number()));
        eat(p.header_len() as u64 + u64::from(p.flags().0) + u64::from(p.ae()));
        eat(u64::from(p.syn()) + u64::from(p.ack()) + u64::from(p.fin()) + u64::from(p.rst()));
        eat(u64::from(p.window_len()) + u64::from(p.checksum()) + u64::from(p.urgent_at()));
        eat(p.options().len() as u64 + p.payload().len() as u64);
        for o in p.options_iter() {
            eat(o.map_or(1, |o| o.to_string().len() as u64));
        }
        eat(p.flags().to_string().len() as u64);
        eat(u64::from(p.verify_checksum_ipv4(
            [1, 2, 3, 4].into(),
            [5, 6, 7, 8].into(),
        )));
    }
    if let Ok(p) = UdpPacket::new_checked(data) {
        eat(u64::from(p.src_port()) + u64::from(p.dst_port()) + u64::from(p.len()));
        eat(u64::from(p.checksum()) + p.payload().len() as u64 + u64::from(p.is_empty()));
        let a = netsift_wire::Ipv6Address::LOOPBACK;
        eat(u64::from(p.verify_checksum_ipv6(&a, &a)));
    }
    if let Ok(p) = IcmpPacket::new_checked(data) {
        eat(u64::from(p.msg_type().0) + u64::from(p.msg_code()) + u64::from(p.checksum()));
        eat(u64::from(p.rest_of_header()) + u64::from(p.echo_ident()) + u64::from(p.echo_seq_no()));
        eat(u64::from(p.next_hop_mtu()) + u64::from(p.gateway().to_bits()));
        eat(p.data().len() as u64 + u64::from(p.verify_checksum()));
        eat(p.msg_type().to_string().len() as u64);
    }
    if let Ok(p) = Icmpv6Packet::new_checked(data) {
        eat(u64::from(p.msg_type().0) + u64::from(p.msg_code()) + u64::from(p.checksum()));
        eat(u64::from(p.rest_of_header()) + u64::from(p.echo_ident()) + u64::from(p.echo_seq_no()));
        eat(u64::from(p.mtu()) + u64::from(p.na_router()) + u64::from(p.na_solicited()));
        eat(u64::from(p.na_override()) + u64::from(p.target_addr().is_some()));
        let a = netsift_wire::Ipv6Address::UNSPECIFIED;
        eat(p.data().len() as u64 + u64::from(p.verify_checksum(&a, &a)));
    }
    if let Ok(p) = SctpPacket::new_checked(data) {
        eat(u64::from(p.src_port()) + u64::from(p.dst_port()));
        eat(u64::from(p.verification_tag()) + u64::from(p.checksum()));
        eat(p.payload().len() as u64 + u64::from(p.verify_checksum()));
        for c in p.chunks() {
            eat(c.map_or(1, |c| {
                u64::from(c.chunk_type().0)
                    + u64::from(c.flags())
                    + u64::from(c.length())
                    + c.value().len() as u64
                    + c.offset() as u64
            }));
        }
    }
    if let Ok(p) = GrePacket::new_checked(data) {
        eat(u64::from(p.flags_version()) + u64::from(p.version()));
        eat(u64::from(p.checksum_present()) + u64::from(p.routing_present()));
        eat(u64::from(p.key_present()) + u64::from(p.seq_present()));
        eat(u64::from(p.strict_source_route()) + u64::from(p.recursion_control()));
        eat(u64::from(p.ack_present()) + u64::from(p.protocol_type().0));
        eat(u64::from(p.checksum().unwrap_or(0)) + u64::from(p.routing_offset().unwrap_or(0)));
        eat(u64::from(p.key().unwrap_or(0)) + u64::from(p.sequence().unwrap_or(0)));
        eat(u64::from(p.ack().unwrap_or(0)) + p.header_len() as u64);
        eat(p.routing().len() as u64 + p.payload().len() as u64);
        eat(u64::from(p.verify_checksum()));
    }
    if let Ok(p) = VxlanPacket::new_checked(data) {
        eat(u64::from(p.flags()) + u64::from(p.vni()) + u64::from(p.vni_valid()));
        eat(u64::from(p.gpe_next_protocol().unwrap_or(0)) + p.payload().len() as u64);
    }
    if let Ok(p) = GenevePacket::new_checked(data) {
        eat(u64::from(p.version()) + u64::from(p.opt_len()) + p.options_len() as u64);
        eat(p.header_len() as u64 + u64::from(p.oam()) + u64::from(p.critical()));
        eat(u64::from(p.protocol_type().0) + u64::from(p.vni()));
        eat(p.options().len() as u64 + p.payload().len() as u64);
        for o in p.options_iter() {
            eat(o.map_or(1, |o| u64::from(o.class) + o.data.len() as u64));
        }
    }
    std::hint::black_box(sink);
}

fn check(data: &[u8]) {
    for link in LINKS {
        let wire = data.len() as u32;
        let s = summarize(link, data, wire);
        assert!(!s.as_str().contains('\n'), "multi-line summary: {s}");
        // A larger on-wire length (snap-length truncation) and a bogus
        // smaller one.
        let _ = summarize(link, data, wire.saturating_mul(3).saturating_add(17));
        let _ = summarize(link, data, 0);
        let _ = summarize(link, data, u32::MAX);
    }
    all_views(data);
}

#[test]
fn every_prefix_of_valid_frames() {
    for (link, frame) in seeds() {
        assert!(!summarize(link, &frame, frame.len() as u32).is_truncated());
        for n in 0..=frame.len() {
            check(&frame[..n]);
            // Views also get every suffix (each layer's start).
            all_views(&frame[n..]);
        }
    }
}

#[test]
fn mutated_valid_frames() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (_, frame) in seeds() {
        for _ in 0..300 {
            let mut f = frame.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(f.len());
                f[i] = match rng.below(4) {
                    0 => 0,
                    1 => 0xff,
                    _ => rng.next() as u8,
                };
            }
            let cut = rng.below(f.len() + 1);
            check(&f[..cut]);
            check(&f);
        }
    }
}

#[test]
fn random_bytes() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for i in 0..4000 {
        let len = if i % 10 == 0 {
            rng.below(2000)
        } else {
            rng.below(120)
        };
        let data = rng.bytes(len);
        check(&data);
    }
}

#[test]
fn random_headers_behind_plausible_prefixes() {
    // Random bytes behind real-looking link and IP headers reach the
    // transport and tunnel decoders far more often than pure noise.
    let mut rng = Rng(42);
    let prefixes: [&[u8]; 8] = [
        // Ethernet, IPv4 ethertype.
        &[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x00,
        ],
        // Ethernet, IPv6 ethertype.
        &[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x86, 0xdd,
        ],
        // Ethernet, VLAN.
        &[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x81, 0x00,
        ],
        // Ethernet, MPLS.
        &[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x88, 0x47,
        ],
        // Ethernet, PPPoE session.
        &[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x88, 0x64,
        ],
        // Ethernet, ARP.
        &[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06,
        ],
        // Ethernet, 802.3 length.
        &[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x00, 0x40,
        ],
        &[],
    ];
    for _ in 0..3000 {
        let prefix = prefixes[rng.below(prefixes.len())];
        let mut f = prefix.to_vec();
        let body_len = rng.below(160);
        let mut body = rng.bytes(body_len);
        if prefix.last() == Some(&0x00) && body_len > 0 {
            body[0] = 0x45; // plausible IPv4 start
        }
        match rng.below(3) {
            0 if body.len() > 20 => {
                // IPv4 with a chosen protocol and sane IHL.
                body[0] = 0x45;
                body[6] &= 0x3f;
                body[7] = 0;
                body[9] = [1, 2, 4, 6, 17, 41, 47, 50, 51, 58, 103, 112, 132, 143][rng.below(14)];
            }
            1 if body.len() > 40 => {
                body[0] = 0x60;
                body[6] = [0, 6, 17, 43, 44, 51, 58, 59, 60, 135][rng.below(10)];
            }
            _ => {}
        }
        f.extend_from_slice(&body);
        check(&f);
    }
}
