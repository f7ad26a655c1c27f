//! The FFPF paper's examples (Bos et al., OSDI 2004, §2.2-2.4, Fig. 2 and Fig. 3) run through
//! the runtime and compared with independent reference computations written here: headers are
//! parsed by hand (with libpcap's semantics for the few expressions used), the round-robin
//! order of the sources and the 1-in-N sampler are reproduced directly, and payloads are
//! searched with a naive scan. Nothing of the classes under test is reused.
//!
//! Shared captures come from `../shared/data/captures/tcpdump` (see its README; or
//! `$NETSIFT_SHARED_DATA`); a missing directory fails the test with a message saying where it
//! looked.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use netsift_capture::generate::{FrameBuilder, TCP_ACK, TCP_PSH, mixed_traffic};
use netsift_capture::{CaptureReader, LinkType, Packet, PcapWriter, Precision, Timestamp};
use netsift_graph::buffer::{OwnedPacket, Preference, Reader};
use netsift_graph::classes::{FlowKey5, FlowTable, TopK};
use netsift_graph::policy::Policy;
use netsift_graph::{FlowOptions, Runtime, standard_registry};

// ---------------------------------------------------------------------------------------------
// Reference header parsing (Ethernet, libpcap semantics: no VLAN skipping, an out-of-bounds
// load rejects).

fn byte(d: &[u8], i: usize) -> Option<u8> {
    d.get(i).copied()
}

fn half(d: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(i)?, *d.get(i + 1)?]))
}

fn ethertype(d: &[u8]) -> Option<u16> {
    half(d, 12)
}

/// IPv4 header length in bytes (libpcap's `4*(ip[0]&0xf)`).
fn ihl(d: &[u8]) -> Option<usize> {
    Some(usize::from(byte(d, 14)? & 0x0f) * 4)
}

/// `tcp`.
fn ref_tcp(d: &[u8]) -> bool {
    match ethertype(d) {
        Some(0x0800) => byte(d, 23) == Some(6),
        Some(0x86dd) => match byte(d, 20) {
            Some(6) => true,
            Some(44) => byte(d, 54) == Some(6),
            _ => false,
        },
        _ => false,
    }
}

/// `icmp`.
fn ref_icmp(d: &[u8]) -> bool {
    ethertype(d) == Some(0x0800) && byte(d, 23) == Some(1)
}

/// `udp port 53`.
fn ref_udp53(d: &[u8]) -> bool {
    let f = || -> Option<bool> {
        match ethertype(d)? {
            0x0800 => {
                if byte(d, 23)? != 17 || half(d, 20)? & 0x1fff != 0 {
                    return Some(false);
                }
                let o = 14 + ihl(d)?;
                let (s, t) = (half(d, o)?, half(d, o + 2)?);
                Some(s == 53 || t == 53)
            }
            0x86dd => {
                if byte(d, 20)? != 17 {
                    return Some(false);
                }
                let (s, t) = (half(d, 54)?, half(d, 56)?);
                Some(s == 53 || t == 53)
            }
            _ => Some(false),
        }
    };
    f().unwrap_or(false)
}

/// `tcp dst port 80`.
fn ref_tcp80(d: &[u8]) -> bool {
    let f = || -> Option<bool> {
        match ethertype(d)? {
            0x0800 => {
                if byte(d, 23)? != 6 || half(d, 20)? & 0x1fff != 0 {
                    return Some(false);
                }
                Some(half(d, 14 + ihl(d)? + 2)? == 80)
            }
            0x86dd => Some(byte(d, 20)? == 6 && half(d, 56)? == 80),
            _ => Some(false),
        }
    };
    f().unwrap_or(false)
}

/// `ip[6:2] & 0x3fff != 0` (a fragment).
fn ref_fragment(d: &[u8]) -> bool {
    ethertype(d) == Some(0x0800) && half(d, 20).is_some_and(|v| v & 0x3fff != 0)
}

/// `ip[6:2] & 0x1fff = 0` (offset 0).
fn ref_offset0(d: &[u8]) -> bool {
    ethertype(d) == Some(0x0800) && half(d, 20).is_some_and(|v| v & 0x1fff == 0)
}

/// `net 198.18.1.0/24` (libpcap: IPv4 src/dst, or ARP/RARP sender/target).
fn ref_net(d: &[u8]) -> bool {
    let in_net = |o: usize| d.get(o..o + 3) == Some(&[198, 18, 1][..]) && d.len() > o + 3;
    match ethertype(d) {
        Some(0x0800) => in_net(26) || in_net(30),
        Some(0x0806) | Some(0x8035) => in_net(28) || in_net(38),
        _ => false,
    }
}

/// The TCP payload of an untagged IPv4 or IPv6 TCP packet: after the TCP header, up to the
/// end of the IP datagram (no link-layer padding).
fn tcp_payload(d: &[u8]) -> Option<&[u8]> {
    let (ip_end, tcp) = match ethertype(d)? {
        0x0800 => {
            let total = usize::from(half(d, 16)?);
            (14 + total, 14 + ihl(d)?)
        }
        0x86dd => (14 + 40 + usize::from(half(d, 18)?), 14 + 40),
        _ => return None,
    };
    let doff = usize::from(byte(d, tcp + 12)? >> 4) * 4;
    let end = ip_end.min(d.len());
    d.get(tcp + doff..end)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

// ---------------------------------------------------------------------------------------------
// Inputs.

/// The shared data directory: `$NETSIFT_SHARED_DATA`, or `shared/data` beside the repository
/// (as `netsift_testkit::data::dir` finds it; testkit is not a dev-dependency because it
/// depends on netsift-bench, which depends on this crate).
fn shared_data() -> PathBuf {
    let p = match std::env::var_os("NETSIFT_SHARED_DATA") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    };
    assert!(
        p.join("captures").is_dir(),
        "the shared test data is missing: looked for {}/captures (the `shared/data` directory \
         beside the repository). Put it there or set NETSIFT_SHARED_DATA to its path.",
        p.display()
    );
    p
}

fn shared_capture(name: &str) -> PathBuf {
    let p = shared_data().join("captures/tcpdump").join(name);
    assert!(
        p.is_file(),
        "shared capture {} is missing (see ../shared/data/README.md)",
        p.display()
    );
    p
}

fn read_all(path: &Path) -> Vec<Packet> {
    let mut r = CaptureReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        out.push(
            p.unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .to_owned(),
        );
    }
    assert!(
        out.iter().all(|p| p.link_type == LinkType::ETHERNET),
        "{} is not Ethernet",
        path.display()
    );
    out
}

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("netsift-graph-paper-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn write_pcap(path: &Path, packets: &[Packet]) {
    let f = BufWriter::new(File::create(path).unwrap());
    let mut w = PcapWriter::new(f, LinkType::ETHERNET, 0, Precision::Nano).unwrap();
    for p in packets {
        w.write_packet(&p.as_ref()).unwrap();
    }
    w.flush().unwrap();
}

/// The order in which `Runtime::step` takes packets from two sources: alternately, the first
/// source first, then the rest of the longer one.
fn round_robin(a: &[Packet], b: &[Packet]) -> Vec<Packet> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    for i in 0..a.len().max(b.len()) {
        out.extend(a.get(i).cloned());
        out.extend(b.get(i).cloned());
    }
    out
}

/// A deterministic 1-in-n sampler: the 1st, n+1th, … packet.
fn sample(pkts: &[Packet], n: usize) -> Vec<Packet> {
    pkts.iter().step_by(n).cloned().collect()
}

fn q(s: &str) -> String {
    format!("{s:?}")
}

fn rt() -> Runtime {
    Runtime::new(standard_registry(), Policy::allow_all())
}

fn opts() -> FlowOptions {
    FlowOptions {
        slots: 8192,
        ibuf: 8192,
        ..FlowOptions::default()
    }
}

/// Everything the reader has now.
fn drain(r: &mut Reader) -> Vec<OwnedPacket> {
    let mut out = Vec::new();
    while r.next_batch(256, &mut out) > 0 {}
    out
}

/// Delivered packets equal the reference packets, in order (bytes cut to the slot size).
fn assert_delivered(what: &str, got: &[OwnedPacket], want: &[Packet], slot: usize) {
    assert_eq!(got.len(), want.len(), "{what}: packets delivered");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let n = w.data.len().min(slot);
        assert_eq!(g.timestamp, w.timestamp, "{what}: packet {i} timestamp");
        assert_eq!(g.wire_len, w.wire_len, "{what}: packet {i} wire length");
        assert_eq!(g.data, w.data[..n], "{what}: packet {i} bytes");
    }
}

fn wire_bytes(p: &[Packet]) -> u64 {
    p.iter().map(|p| u64::from(p.wire_len)).sum()
}

/// The node id of the only live instance of `class`.
fn only_node(rt: &Runtime, class: &str) -> usize {
    let ids: Vec<usize> = rt
        .graph()
        .nodes()
        .filter(|(_, n)| n.class.name() == class)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ids.len(), 1, "instances of {class}");
    ids[0]
}

// ---------------------------------------------------------------------------------------------
// 1. The two flows of §2.3.

/// Runs the two flows of §2.3 with sources `a` and `b` (graph texts) whose packets are `pa`,
/// `pb`; returns the numbers compared.
fn section_2_3(src_a: &str, src_b: &str, pa: &[Packet], pb: &[Packet]) -> (usize, usize) {
    let merged_sources = src_a == src_b;
    let flow1 = format!(
        "{src_a} | {src_b} -> (sampler,2,4) -> (bpf,\"tcp\") | (bpf,\"udp port 53\") -> (bytecount,,8)"
    );
    let flow2 = format!("{src_a} -> (sampler,2,4) -> (bpf,\"icmp\") -> (packetcount,,8)");
    let mut rt = rt();
    let (f1, mut r1) = rt.open(&flow1, opts()).unwrap();
    let (f2, mut r2) = rt.open(&flow2, opts()).unwrap();

    // Reference.
    let input = if merged_sources {
        pa.to_vec()
    } else {
        round_robin(pa, pb)
    };
    let s1 = sample(&input, 2);
    let want1: Vec<Packet> = s1
        .iter()
        .filter(|p| ref_tcp(&p.data) || ref_udp53(&p.data))
        .cloned()
        .collect();
    let s2 = sample(pa, 2);
    let want2: Vec<Packet> = s2.iter().filter(|p| ref_icmp(&p.data)).cloned().collect();

    // Instances: the source A is shared; the samplers are one instance only when their
    // upstream instances are identical (the documented divergence from Fig. 3).
    assert_eq!(rt.node_of(f1, 0), rt.node_of(f2, 0), "source shared");
    let samplers = rt
        .graph()
        .nodes()
        .filter(|(_, n)| n.class.name() == "sampler")
        .count();
    let sources = rt
        .graph()
        .nodes()
        .filter(|(_, n)| n.class.is_source())
        .count();
    if merged_sources {
        assert_eq!((sources, samplers), (1, 1), "{flow1}");
        assert_eq!(rt.graph().len(), 7);
    } else {
        assert_eq!((sources, samplers), (2, 2), "{flow1}");
        assert_eq!(rt.graph().len(), 9);
    }

    let stats = rt.run().unwrap();
    assert_eq!(stats.packets as usize, input.len(), "packets taken");
    let bytecount = rt.graph().node(only_node(&rt, "bytecount")).unwrap();
    let packetcount = rt.graph().node(only_node(&rt, "packetcount")).unwrap();
    assert_eq!(
        bytecount.mbuf.get(0),
        wire_bytes(&want1),
        "{flow1}: bytecount"
    );
    assert_eq!(
        packetcount.mbuf.get(0),
        want2.len() as u64,
        "{flow2}: packetcount"
    );
    // The first sampler (the one flow 1 uses) counts what it saw in its 4-byte MBuf.
    let sampler1 = if merged_sources {
        only_node(&rt, "sampler")
    } else {
        rt.node_of(f1, 2).unwrap()
    };
    assert_eq!(
        rt.graph().node(sampler1).unwrap().mbuf.get(0),
        input.len() as u64,
        "sampler seen"
    );
    let got1 = drain(&mut r1);
    let got2 = drain(&mut r2);
    assert_delivered(&flow1, &got1, &want1, 2048);
    assert_delivered(&flow2, &got2, &want2, 2048);
    println!(
        "§2.3 {src_a} | {src_b}: {} packets in; flow 1: {} delivered, {} bytes; flow 2: {} icmp; \
         3 expressions × {} packets compared",
        input.len(),
        got1.len(),
        wire_bytes(&want1),
        got2.len(),
        s1.len() + s2.len()
    );
    (got1.len(), got2.len())
}

#[test]
fn section_2_3_flows_on_shared_captures() {
    // While both sources have packets the sampler takes only the first source's (the round
    // robin alternates, the sampler takes every other); the second source's tail is sampled
    // when it is the longer one.
    let pairs = [
        ("afs.pcap", "edns-opts.pcap"),
        ("edns-opts.pcap", "afs.pcap"),
        ("dnssec.pcap", "mptcp-v0.pcap"),
        ("dhcp-rfc4388.pcap", "bgp-4byte-asn.pcap"),
        ("mptcp-v0.pcap", "dnssec.pcap"),
        ("dns_tcp.pcap", "dns_udp.pcap"),
    ];
    let (mut total1, mut total2) = (0, 0);
    for (a, b) in pairs {
        let (pa, pb) = (shared_capture(a), shared_capture(b));
        let (ta, tb) = (
            format!("(file,{})", q(pa.to_str().unwrap())),
            format!("(file,{})", q(pb.to_str().unwrap())),
        );
        let (n1, n2) = section_2_3(&ta, &tb, &read_all(&pa), &read_all(&pb));
        total1 += n1;
        total2 += n2;
    }
    // The inputs are meant to exercise every branch.
    assert!(total1 > 100 && total2 > 5, "{total1} {total2}");
}

#[test]
fn section_2_3_flows_on_generated_mixes() {
    let (pa, pb) = (mixed_traffic(11, 3000), mixed_traffic(12, 1700));
    section_2_3("(gen,11,3000)", "(gen,12,1700)", &pa, &pb);
    // Identical source arguments: one source instance (and then one sampler).
    let (n1, n2) = section_2_3("(gen,5,2500)", "(gen,5,2500)", &mixed_traffic(5, 2500), &[]);
    assert!(n1 > 0 && n2 > 0);
}

/// `Runtime::mbuf(id, index)` is documented as "the MBuf of the flow's `index`-th filter (in
/// the order of the text, sources included)", but when a stage holds two identical filters
/// (merged into one instance), the flow's node list has one entry for both and every later
/// index is shifted.
#[test]
fn mbuf_index_counts_filters_in_text_order_with_merged_duplicates() {
    let mut rt = rt();
    let (f, _r) = rt
        .open(
            "(gen,5,100) | (gen,5,100) -> (sampler,2,4) -> (bytecount,,8)",
            opts(),
        )
        .unwrap();
    rt.run().unwrap();
    let want = wire_bytes(&sample(&mixed_traffic(5, 100), 2));
    // Filter 3 in the text is the bytecount.
    assert_eq!(rt.mbuf(f, 3).map(|m| m.get(0)), Some(want));
    assert_eq!(rt.node_of(f, 0), rt.node_of(f, 1));
}

// ---------------------------------------------------------------------------------------------
// 2. Fig. 2(a): web worm and fragments.

const SIG: &[u8] = b"GET /default.ida?NNNNNNNNNNNNNNNNNNNN";
const SIG_PATTERN: &str = "default.ida?NNNNNNNNNNNN";

/// A generated mix with web packets carrying the signature and web fragments injected (plus
/// look-alikes that must not count). Returns the packets as written.
fn fig2_input(seed: u64, n: usize) -> Vec<Packet> {
    let mix = mixed_traffic(seed, n);
    let mut out = Vec::new();
    let c = [198, 18, 0, 77];
    let s = [198, 19, 0, 1];
    let mut c6 = [0u8; 16];
    c6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    c6[15] = 77;
    let mut s6 = c6;
    s6[14] = 1;
    s6[15] = 1;
    for (i, p) in mix.into_iter().enumerate() {
        let ts = p.timestamp;
        out.push(p);
        if i % 37 != 0 {
            continue;
        }
        let k = (i / 37) as u16;
        let mut body = format!("xx{k}xx").into_bytes();
        body.extend_from_slice(SIG);
        body.extend_from_slice(b" HTTP/1.0\r\n");
        let plain = format!("GET /index{k}.html HTTP/1.0\r\n").into_bytes();
        let base = FrameBuilder::new().ipv4(c, s).ip_id(1000 + k);
        let b = match k % 11 {
            0 => base.tcp(40000 + k, 80, TCP_PSH | TCP_ACK).payload(&body),
            1 => base
                .fragment(0, true)
                .tcp(40000 + k, 80, TCP_ACK)
                .payload(&plain),
            2 => base
                .fragment(185, false)
                .tcp(40000 + k, 80, TCP_ACK)
                .payload(&body),
            3 => base.tcp(40000 + k, 443, TCP_ACK).payload(&body),
            4 => base.udp(40000 + k, 80).payload(&body),
            5 => FrameBuilder::new()
                .ipv6(c6, s6)
                .tcp(40000 + k, 80, TCP_ACK)
                .payload(&body),
            6 => base
                .fragment(0, true)
                .tcp(40000 + k, 80, TCP_ACK)
                .payload(&body),
            7 => base.tcp(40000 + k, 80, TCP_ACK).payload(&body).vlan(7),
            8 => base
                .fragment(0, true)
                .tcp(40000 + k, 443, TCP_ACK)
                .payload(&plain),
            9 => base
                .tcp(40000 + k, 80, TCP_ACK)
                .payload(&SIG[..SIG.len() - 4]),
            _ => base
                .fragment(3, true)
                .tcp(40000 + k, 80, TCP_ACK)
                .payload(&plain),
        };
        out.push(
            b.pad_to(60)
                .build_packet(Timestamp::from_nanos(ts.as_nanos() + 1)),
        );
    }
    out
}

/// Fig. 2(a) on the capture at `path` (holding `input`): flow A (web packets with the worm
/// signature) and flow B (web fragments counted, first fragments delivered) share the HTTP
/// filter; everything equals the reference. Returns (http, infected, fragments, first
/// fragments delivered).
fn fig2a_on(path: &Path, input: &[Packet]) -> (usize, usize, usize, usize) {
    let src = format!("(file,{})", q(path.to_str().unwrap()));
    let flow_a = format!(
        "{src} -> (bpf,\"tcp dst port 80\") -> (strsearch,{},16)",
        q(SIG_PATTERN)
    );
    let flow_b = format!(
        "{src} -> (bpf,\"tcp dst port 80\") -> (bpf,\"ip[6:2] & 0x3fff != 0\") -> \
         (packetcount,,8) -> (bpf,\"ip[6:2] & 0x1fff = 0\")"
    );
    let mut rt = rt();
    let (a, mut ra) = rt.open(&flow_a, opts()).unwrap();
    let (b, mut rb) = rt.open(&flow_b, opts()).unwrap();
    assert_eq!(rt.node_of(a, 0), rt.node_of(b, 0), "source shared");
    assert_eq!(rt.node_of(a, 1), rt.node_of(b, 1), "http filter shared");
    assert_eq!(
        rt.graph().len(),
        6,
        "src, http, strsearch, frag, count, first"
    );
    rt.run().unwrap();

    // Reference.
    let http: Vec<&Packet> = input.iter().filter(|p| ref_tcp80(&p.data)).collect();
    let infected: Vec<Packet> = http
        .iter()
        .filter(|p| tcp_payload(&p.data).is_some_and(|pl| contains(pl, SIG_PATTERN.as_bytes())))
        .map(|p| (*p).clone())
        .collect();
    let frags: Vec<&Packet> = http
        .iter()
        .copied()
        .filter(|p| ref_fragment(&p.data))
        .collect();
    let first: Vec<Packet> = frags
        .iter()
        .filter(|p| ref_offset0(&p.data))
        .map(|p| (*p).clone())
        .collect();

    let node = rt.graph().node(rt.node_of(a, 1).unwrap()).unwrap();
    assert_eq!(node.users, 2);
    assert_eq!(
        (node.seen, node.passed),
        (input.len() as u64, http.len() as u64),
        "one shared instance saw every packet once"
    );
    let ss = rt.graph().node(rt.node_of(a, 2).unwrap()).unwrap();
    assert_eq!(
        (ss.seen, ss.passed),
        (http.len() as u64, infected.len() as u64)
    );
    assert_eq!(rt.mbuf(a, 2).unwrap().get(0), infected.len() as u64);
    assert_eq!(rt.mbuf(b, 3).unwrap().get(0), frags.len() as u64);
    let got_a = drain(&mut ra);
    let got_b = drain(&mut rb);
    assert_delivered("flow A (worm)", &got_a, &infected, 2048);
    assert!(got_a.iter().all(|p| p.result == 1), "pattern 1 matched");
    assert_delivered("flow B (first fragments)", &got_b, &first, 2048);
    (http.len(), infected.len(), frags.len(), got_b.len())
}

#[test]
fn fig2a_worm_and_fragments_share_the_http_filter() {
    let input = fig2_input(31, 4000);
    let path = temp_path("fig2a.pcap");
    write_pcap(&path, &input);
    let input = read_all(&path);
    let (http, infected, frags, first) = fig2a_on(&path, &input);
    // The injected web fragments with offset 0 are exactly what flow B delivers.
    let injected_first = input
        .iter()
        .filter(|p| {
            p.data.get(12..14) == Some(&[8, 0][..])
                && half(&p.data, 20).is_some_and(|v| v & 0x3fff == 0x2000)
                && half(&p.data, 36) == Some(80)
        })
        .count();
    assert_eq!(first, injected_first);
    assert!(infected >= 10 && first >= 10);
    println!(
        "Fig. 2(a): {} packets, 5 expressions × {} packets compared: {} http, {} infected, {} \
         fragments, {} first fragments delivered",
        input.len(),
        input.len(),
        http,
        infected,
        frags,
        first
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn fig2a_on_shared_captures() {
    let mut total = (0, 0, 0, 0, 0);
    // The shared Ethernet captures with web traffic (`tcp dst port 80`).
    for name in [
        "print-flags.pcap",
        "accecn_handshake.pcap",
        "tcp_eight_lowest_weight_flags_set.pcap",
    ] {
        let path = shared_capture(name);
        let input = read_all(&path);
        let (h, i, f, fi) = fig2a_on(&path, &input);
        total = (
            total.0 + input.len(),
            total.1 + h,
            total.2 + i,
            total.3 + f,
            total.4 + fi,
        );
    }
    println!(
        "Fig. 2(a) on shared captures: {} packets, {} http, {} infected, {} fragments, {} first \
         fragments delivered",
        total.0, total.1, total.2, total.3, total.4
    );
    assert!(total.1 > 0, "no web traffic in the chosen captures");
}

/// The 5-tuple of an untagged IPv4/IPv6 packet (ports 0 for non-first fragments), parsed here.
type Key = (IpAddr, IpAddr, u8, u16, u16);

fn ref_key(d: &[u8]) -> Option<Key> {
    match ethertype(d)? {
        0x0800 => {
            let a: [u8; 4] = d.get(26..30)?.try_into().ok()?;
            let b: [u8; 4] = d.get(30..34)?.try_into().ok()?;
            let proto = byte(d, 23)?;
            let o = 14 + ihl(d)?;
            let ports = if half(d, 20)? & 0x1fff == 0 && matches!(proto, 6 | 17 | 132) {
                (half(d, o)?, half(d, o + 2)?)
            } else {
                (0, 0)
            };
            Some((
                IpAddr::V4(Ipv4Addr::from(a)),
                IpAddr::V4(Ipv4Addr::from(b)),
                proto,
                ports.0,
                ports.1,
            ))
        }
        0x86dd => {
            let a: [u8; 16] = d.get(22..38)?.try_into().ok()?;
            let b: [u8; 16] = d.get(38..54)?.try_into().ok()?;
            let proto = byte(d, 20)?;
            let ports = if matches!(proto, 6 | 17 | 132) {
                (half(d, 54)?, half(d, 56)?)
            } else {
                (0, 0)
            };
            Some((
                IpAddr::V6(Ipv6Addr::from(a)),
                IpAddr::V6(Ipv6Addr::from(b)),
                proto,
                ports.0,
                ports.1,
            ))
        }
        _ => None,
    }
}

fn key_of(k: &FlowKey5) -> Key {
    (k.src, k.dst, k.proto, k.src_port, k.dst_port)
}

/// Fig. 2(b)'s two external calls as two flows sharing their prefix: a per-flow hash table
/// (`flowcount`, Fig. 6) and the most active flows (`topk`), over a generated mix with a few
/// heavy TCP flows injected.
#[test]
fn fig2b_flowcount_and_topk_equal_reference() {
    let heavy: [(u16, usize); 6] = [
        (1001, 61),
        (1002, 47),
        (1003, 33),
        (1004, 25),
        (1005, 18),
        (1006, 12),
    ];
    let mut input = mixed_traffic(51, 3000);
    let mut at = 0;
    for (port, count) in heavy {
        for j in 0..count {
            at = (at + 37 + usize::from(port)) % input.len();
            let ts = input[at].timestamp;
            let p = FrameBuilder::new()
                .ipv4([198, 18, 3, (port % 250) as u8], [198, 19, 0, 9])
                .ip_id(j as u16)
                .tcp(port, 80, TCP_ACK)
                .payload(&vec![b'x'; j % 50])
                .pad_to(60)
                .build_packet(Timestamp::from_nanos(ts.as_nanos() + 1 + j as i128));
            input.insert(at + 1, p);
        }
    }
    let path = temp_path("fig2b.pcap");
    write_pcap(&path, &input);
    let input = read_all(&path);
    let src = format!("(file,{})", q(path.to_str().unwrap()));
    let mut rt = rt();
    let (fc, _r1) = rt
        .open(
            &format!("{src} -> (bpf,\"tcp\") -> (flowcount,tcp,131104)"),
            opts(),
        )
        .unwrap();
    let (tk, _r2) = rt
        .open(&format!("{src} -> (bpf,\"tcp\") -> (topk,5)"), opts())
        .unwrap();
    assert_eq!(rt.node_of(fc, 1), rt.node_of(tk, 1), "bpf shared");
    rt.run().unwrap();

    let mut want: HashMap<Key, (u64, u64)> = HashMap::new();
    let mut tcp = 0u64;
    for p in input.iter().filter(|p| ref_tcp(&p.data)) {
        tcp += 1;
        let k = ref_key(&p.data).expect("a tcp packet has a key");
        let e = want.entry(k).or_default();
        e.0 += 1;
        e.1 += u64::from(p.wire_len);
    }
    let table = rt.mbuf(fc, 2).unwrap();
    assert_eq!(FlowTable::overflow(&table), (0, 0));
    let mut got: Vec<(Key, u64, u64)> = FlowTable::read(&table)
        .iter()
        .map(|(k, p, b)| (key_of(k), *p, *b))
        .collect();
    got.sort();
    let mut want_v: Vec<(Key, u64, u64)> = want.iter().map(|(k, (p, b))| (*k, *p, *b)).collect();
    want_v.sort();
    assert_eq!(got.len(), want_v.len(), "flows");
    assert_eq!(got, want_v, "per-flow packets and bytes");

    let top = TopK::read(&rt.mbuf(tk, 2).unwrap());
    let mut ranked = want_v.clone();
    ranked.sort_by_key(|e| std::cmp::Reverse(e.1));
    assert!(ranked[4].1 > ranked[5].1, "the top 5 are unambiguous");
    let top: Vec<(Key, u64, u64)> = top.iter().map(|(k, p, b)| (key_of(k), *p, *b)).collect();
    assert_eq!(top, ranked[..5].to_vec(), "top 5");
    assert_eq!(rt.mbuf(tk, 2).unwrap().get(1), tcp, "IP packets topk saw");
    println!(
        "Fig. 2(b): {} packets, 1 expression × {} packets; {} flows compared, top 5 = {:?}",
        input.len(),
        input.len(),
        got.len(),
        top.iter().map(|e| e.1).collect::<Vec<_>>()
    );
    let _ = std::fs::remove_file(&path);
}

// ---------------------------------------------------------------------------------------------
// 3. Prefix merging and the life cycle.

#[test]
fn prefix_merging_instance_counts_and_dot() {
    let mut rt = rt();
    let g = "(gen,3,500)";
    let (f1, _r1) = rt
        .open(&format!("{g} -> (bpf,\"tcp\") -> (packetcount,,8)"), opts())
        .unwrap();
    assert_eq!(rt.graph().len(), 3);
    let (f2, _r2) = rt
        .open(&format!("{g} -> (bpf,\"tcp\") -> (bytecount,,8)"), opts())
        .unwrap();
    assert_eq!(rt.graph().len(), 4, "source and bpf shared");
    assert_eq!(rt.node_of(f1, 1), rt.node_of(f2, 1));
    let (f3, _r3) = rt
        .open(&format!("{g} -> (bpf,\"udp\") -> (packetcount,,8)"), opts())
        .unwrap();
    assert_eq!(rt.graph().len(), 6, "different args: new bpf and new count");
    assert_ne!(rt.node_of(f1, 1), rt.node_of(f3, 1));
    assert_ne!(rt.node_of(f1, 2), rt.node_of(f3, 2));
    let (f4, _r4) = rt
        .open(
            &format!("{g} -> (sampler,2) -> (bpf,\"tcp\") -> (packetcount,,8)"),
            opts(),
        )
        .unwrap();
    assert_eq!(
        rt.graph().len(),
        9,
        "same bpf behind a sampler: new instance"
    );
    assert_ne!(rt.node_of(f1, 1), rt.node_of(f4, 2));
    let (f5, _r5) = rt
        .open(&format!("{g} -> (bpf,\"tcp\",16)"), opts())
        .unwrap();
    assert_eq!(rt.graph().len(), 10, "different MBuf size: new instance");
    assert_ne!(rt.node_of(f1, 1), rt.node_of(f5, 1));

    // dot: flows (ellipses), instances (circles), classes (boxes); the shared bpf has dashed
    // edges from both flows.
    let dot = rt.dot();
    let count = |s: &str| dot.matches(s).count();
    assert_eq!(count("shape=ellipse"), 5, "{dot}");
    assert_eq!(count("shape=circle"), rt.graph().len(), "{dot}");
    // Classes: gen, bpf, packetcount, bytecount, sampler.
    assert_eq!(count("shape=box"), 5, "{dot}");
    let shared = rt.node_of(f1, 1).unwrap();
    for f in [f1, f2] {
        assert!(
            dot.contains(&format!("flow{f} -> n{shared} [style=dashed")),
            "{dot}"
        );
    }
    assert!(dot.contains(&format!("n{shared} [shape=circle, label=\"bpf#{shared}")));
    assert!(dot.contains(&format!("n{shared} -> class_bpf")));
    assert!(dot.contains("2 flows"), "{dot}");
    println!(
        "prefix merging: 5 flows, {} instances, dot {} bytes",
        rt.graph().len(),
        dot.len()
    );

    // Removing flows.
    rt.close(f2);
    assert_eq!(rt.graph().len(), 9);
    rt.close(f4);
    assert_eq!(rt.graph().len(), 6);
    rt.close(f1);
    assert_eq!(rt.graph().len(), 4, "gen, bpf udp, count, bpf tcp/16");
    rt.close(f5);
    rt.close(f3);
    assert!(rt.graph().is_empty());
}

/// Two flows over one source; returns their reference packets.
fn life_cycle_flows(seed: u64, n: usize) -> (String, String, Vec<Packet>, Vec<Packet>) {
    let mix = mixed_traffic(seed, n);
    let a = format!("(gen,{seed},{n}) -> (bpf,\"tcp\") -> (bytecount,,8)");
    let b = format!("(gen,{seed},{n}) -> (bpf,\"udp port 53\") -> (packetcount,,8)");
    let wa = mix.iter().filter(|p| ref_tcp(&p.data)).cloned().collect();
    let wb = mix.iter().filter(|p| ref_udp53(&p.data)).cloned().collect();
    (a, b, wa, wb)
}

#[test]
fn closing_a_flow_mid_run_does_not_disturb_the_other() {
    let n = 4000;
    let (ta, tb, _wa, wb) = life_cycle_flows(9, n);
    let mut rt = rt();
    let (a, ra) = rt.open(&ta, opts()).unwrap();
    let (b, mut rb) = rt.open(&tb, opts()).unwrap();
    let mut got = Vec::new();
    for _ in 0..n / 2 {
        assert!(rt.step().unwrap());
        got.extend(drain(&mut rb));
    }
    drop(ra);
    assert!(rt.close(a).is_empty());
    assert_eq!(rt.graph().len(), 3, "a's private filters are gone");
    rt.run().unwrap();
    got.extend(drain(&mut rb));
    assert_delivered("b after a closed", &got, &wb, 2048);
    assert_eq!(rt.mbuf(b, 2).unwrap().get(0), wb.len() as u64);
    let src = rt.graph().node(rt.node_of(b, 0).unwrap()).unwrap();
    assert_eq!(src.passed, n as u64);
    println!(
        "close mid-run: 1 expression × {n} packets, {} delivered",
        got.len()
    );
}

#[test]
fn pause_resume_and_reap() {
    let n = 3000;
    let (ta, tb, wa, wb) = life_cycle_flows(13, n);
    let mix = mixed_traffic(13, n);
    let mut rt = rt();
    let (a, mut ra) = rt.open(&ta, opts()).unwrap();
    let (b, mut rb) = rt.open(&tb, opts()).unwrap();
    let (c, rc) = rt
        .open(
            &format!("(gen,13,{n}) -> (bpf,\"icmp\") -> (packetcount,,8)"),
            opts(),
        )
        .unwrap();
    let mut rc = Some(rc);
    let mut got_a = Vec::new();
    for i in 0..n {
        if i == 1000 {
            rt.pause(a).unwrap();
            assert!(rt.pause(a).is_err(), "already paused");
            got_a.extend(drain(&mut ra));
        }
        if i == 2000 {
            assert!(ra.next().is_none(), "nothing delivered while paused");
            rt.resume(a).unwrap();
        }
        if i == 1500 {
            // The owner of flow c goes away: reap closes it.
            drop(rc.take());
            let before = rt.graph().len();
            rt.reap();
            assert!(rt.flows().iter().all(|&(id, _)| id != c));
            assert_eq!(rt.graph().len(), before - 2, "c's bpf and count destroyed");
            assert!(
                rt.log()
                    .iter()
                    .any(|l| l.contains(&format!("flow {c}: its reader is gone")))
            );
        }
        assert!(rt.step().unwrap());
    }
    rt.run().unwrap();
    got_a.extend(drain(&mut ra));
    let got_b = drain(&mut rb);
    let want_a: Vec<Packet> = mix
        .iter()
        .enumerate()
        .filter(|(i, p)| !(1000..2000).contains(i) && ref_tcp(&p.data))
        .map(|(_, p)| p.clone())
        .collect();
    assert_delivered("a paused for 1000..2000", &got_a, &want_a, 2048);
    assert_delivered("b unaffected", &got_b, &wb, 2048);
    assert_eq!(rt.mbuf(b, 2).unwrap().get(0), wb.len() as u64);
    println!(
        "pause/resume: 2 expressions × {n} packets; a got {} of {} ({} while paused not \
         delivered; its bytecount reads {}), b got {}",
        got_a.len(),
        wa.len(),
        wa.len() - want_a.len(),
        rt.mbuf(a, 2).unwrap().get(0),
        got_b.len()
    );
}

/// Closing a flow frees its buffers: a flow closed while its application still holds its
/// `Reader` must not keep PBuf slots pinned for the other flows of its group.
#[test]
fn closed_flow_with_live_reader_does_not_pin_the_group() {
    let n = 1000;
    let (ta, tb, _wa, wb) = life_cycle_flows(17, n);
    let o = FlowOptions {
        group: Some("g".into()),
        slots: 16,
        ibuf: 1024,
        ..FlowOptions::default()
    };
    let mut rt = rt();
    let (a, mut ra_kept) = rt.open(&ta, o.clone()).unwrap();
    let (_b, mut rb) = rt.open(&tb, o).unwrap();
    // Fewer packets than slots before the close: nothing can be dropped yet.
    let mut got = Vec::new();
    for _ in 0..10 {
        rt.step().unwrap();
        got.extend(drain(&mut rb));
    }
    assert_eq!(rb.stats().dropped, 0);
    assert!(
        ra_kept.available() > 0,
        "a has unread packets when it is closed"
    );
    rt.close(a);
    while rt.step().unwrap() {
        got.extend(drain(&mut rb));
    }
    rt.run().unwrap();
    got.extend(drain(&mut rb));
    assert_eq!(rb.stats().dropped, 0, "b dropped packets after a closed");
    assert_delivered("b", &got, &wb, 2048);
}

/// Adding a flow to a group after a run ended (its source is new) and running again: the new
/// flow receives its packets, and the old flow of the group is not disturbed.
#[test]
fn flow_added_to_a_group_after_a_run_receives_packets() {
    let mut rt = rt();
    let (_a, mut ra) = rt
        .open("(gen,61,500) -> (bpf,\"tcp\") -> (packetcount,,8)", opts())
        .unwrap();
    rt.run().unwrap();
    let want_a: Vec<Packet> = mixed_traffic(61, 500)
        .into_iter()
        .filter(|p| ref_tcp(&p.data))
        .collect();
    assert_delivered("first flow", &drain(&mut ra), &want_a, 2048);
    let (b, mut rb) = rt
        .open(
            "(gen,62,500) -> (bpf,\"udp port 53\") -> (packetcount,,8)",
            opts(),
        )
        .unwrap();
    rt.run().unwrap();
    let want_b: Vec<Packet> = mixed_traffic(62, 500)
        .into_iter()
        .filter(|p| ref_udp53(&p.data))
        .collect();
    assert_eq!(
        rt.mbuf(b, 2).unwrap().get(0),
        want_b.len() as u64,
        "filters ran"
    );
    assert_delivered("flow added after the run", &drain(&mut rb), &want_b, 2048);
}

/// `snap` cuts what a flow's reader receives; `bytecount` still counts wire bytes.
#[test]
fn snap_cuts_delivered_packets() {
    let n = 1000;
    let mut rt = rt();
    let (f, mut r) = rt
        .open(
            &format!("(gen,71,{n}) -> (bpf,\"tcp\") -> (snap,60) -> (bytecount,,8)"),
            opts(),
        )
        .unwrap();
    rt.run().unwrap();
    let want: Vec<Packet> = mixed_traffic(71, n)
        .into_iter()
        .filter(|p| ref_tcp(&p.data))
        .collect();
    let got = drain(&mut r);
    assert_delivered("snap 60", &got, &want, 60);
    assert!(got.iter().any(|p| p.wire_len > 60));
    assert_eq!(rt.mbuf(f, 3).unwrap().get(0), wire_bytes(&want));
    println!(
        "snap: 1 expression × {n} packets, {} delivered cut to 60 bytes",
        got.len()
    );
}

/// A flow that ends in `snap` must not receive more bytes than its snap length because
/// another flow of its group wants whole packets.
#[test]
fn snap_holds_when_another_flow_of_the_group_wants_whole_packets() {
    let n = 300;
    let mut rt = rt();
    let (_f, mut r) = rt
        .open(
            &format!("(gen,71,{n}) -> (bpf,\"tcp\") -> (snap,60)"),
            opts(),
        )
        .unwrap();
    let (_g, _r2) = rt
        .open(&format!("(gen,71,{n}) -> (bpf,\"tcp\")"), opts())
        .unwrap();
    rt.run().unwrap();
    let want: Vec<Packet> = mixed_traffic(71, n)
        .into_iter()
        .filter(|p| ref_tcp(&p.data))
        .collect();
    assert_delivered(
        "snap 60 beside a whole-packet flow",
        &drain(&mut r),
        &want,
        60,
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Buffers under the runtime.

/// What a reader thread saw.
struct Seen {
    packets: Vec<OwnedPacket>,
    delivered: u64,
    dropped: u64,
    overwritten: u64,
    lost_before: u64,
}

/// A reader thread that waits until `progress` reaches `start`, then reads slowly (a pause
/// every `batch` packets) until the writer finished.
fn slow_reader(
    mut r: Reader,
    progress: Arc<AtomicU64>,
    start: u64,
    batch: usize,
) -> thread::JoinHandle<Seen> {
    thread::spawn(move || {
        while progress.load(Ordering::Acquire) < start {
            thread::sleep(Duration::from_micros(200));
        }
        let mut packets = Vec::new();
        let mut lost_before = 0;
        loop {
            let mut n = 0;
            while n < batch {
                match r.next() {
                    Some(p) => {
                        lost_before += p.lost_before;
                        packets.push(p.to_owned());
                        n += 1;
                    }
                    None => break,
                }
            }
            r.release();
            if n == 0 {
                if r.is_finished() {
                    break;
                }
                r.wait_for(1, Duration::from_millis(5));
            } else {
                thread::sleep(Duration::from_micros(300));
            }
        }
        let s = r.stats();
        Seen {
            packets,
            delivered: s.delivered,
            dropped: s.dropped,
            overwritten: s.overwritten,
            lost_before,
        }
    })
}

/// Every packet is one of `want` (by timestamp, unique in a generated mix), intact, in
/// increasing order.
fn assert_intact_subsequence(what: &str, got: &[OwnedPacket], want: &[Packet]) {
    let index: HashMap<Timestamp, usize> = want
        .iter()
        .enumerate()
        .map(|(i, p)| (p.timestamp, i))
        .collect();
    assert_eq!(index.len(), want.len(), "timestamps unique");
    let mut last = None;
    for (k, g) in got.iter().enumerate() {
        let i = *index
            .get(&g.timestamp)
            .unwrap_or_else(|| panic!("{what}: packet {k} is not a reference packet"));
        assert!(
            last.is_none_or(|l| l < i),
            "{what}: packet {k} out of order"
        );
        last = Some(i);
        assert_eq!(g.data, want[i].data, "{what}: packet {k} corrupted");
        assert_eq!(
            g.wire_len, want[i].wire_len,
            "{what}: packet {k} wire length"
        );
    }
}

#[test]
fn slow_reader_preference_counts_drops_exactly() {
    let n = 3000;
    let mix = mixed_traffic(21, n);
    let want: Vec<Packet> = mix
        .iter()
        .filter(|p| ref_tcp(&p.data) || ref_udp53(&p.data))
        .cloned()
        .collect();
    let o = FlowOptions {
        group: Some("srp".into()),
        preference: Preference::SlowReader,
        slots: 8,
        ibuf: 8,
        ..FlowOptions::default()
    };
    let mut rt = rt();
    let (_f, r) = rt
        .open(&format!("(gen,21,{n}) -> (bpf,\"tcp or udp port 53\")"), o)
        .unwrap();
    let progress = Arc::new(AtomicU64::new(0));
    let h = slow_reader(r, Arc::clone(&progress), 500, 4);
    let mut i = 0;
    while rt.step().unwrap() {
        i += 1;
        progress.store(i, Ordering::Release);
    }
    progress.store(u64::MAX, Ordering::Release);
    rt.run().unwrap();
    let seen = h.join().unwrap();
    assert_eq!(seen.delivered as usize, seen.packets.len());
    assert_eq!(
        seen.delivered + seen.dropped,
        want.len() as u64,
        "delivered + dropped == accepted"
    );
    assert!(seen.dropped > 0, "the slow reader made the writer drop");
    assert_eq!(seen.overwritten, 0);
    assert_intact_subsequence("SRP", &seen.packets, &want);
    // The first 8 accepted packets fit in the ring before the reader starts.
    assert_delivered("SRP head", &seen.packets[..8], &want[..8], 2048);
    println!(
        "SRP (8 slots): 1 expression × {n} packets; accepted {}, delivered {}, dropped {}",
        want.len(),
        seen.delivered,
        seen.dropped
    );
}

#[test]
fn fast_reader_preference_fast_reader_gets_everything() {
    let n = 3000;
    let mix = mixed_traffic(22, n);
    let want_fast: Vec<Packet> = mix.iter().filter(|p| ref_tcp(&p.data)).cloned().collect();
    let want_slow: Vec<Packet> = mix
        .iter()
        .filter(|p| ref_tcp(&p.data) || ref_icmp(&p.data))
        .cloned()
        .collect();
    let o = FlowOptions {
        group: Some("frp".into()),
        preference: Preference::FastReader,
        slots: 8,
        ibuf: 8,
        ..FlowOptions::default()
    };
    let mut rt = rt();
    let (fast, mut rf) = rt
        .open(&format!("(gen,22,{n}) -> (bpf,\"tcp\")"), o.clone())
        .unwrap();
    let (slow, rs) = rt
        .open(&format!("(gen,22,{n}) -> (bpf,\"tcp or icmp\")"), o)
        .unwrap();
    assert_eq!(rt.group_of(fast), rt.group_of(slow));
    let progress = Arc::new(AtomicU64::new(0));
    let h = slow_reader(rs, Arc::clone(&progress), 500, 2);
    let mut got_fast = Vec::new();
    let mut i = 0;
    while rt.step().unwrap() {
        i += 1;
        progress.store(i, Ordering::Release);
        got_fast.extend(drain(&mut rf));
    }
    progress.store(u64::MAX, Ordering::Release);
    rt.run().unwrap();
    got_fast.extend(drain(&mut rf));
    let seen = h.join().unwrap();
    let fs = rf.stats();
    assert_eq!(fs.overwritten, 0, "the fast reader lost nothing");
    assert_delivered("FRP fast", &got_fast, &want_fast, 2048);
    assert_eq!(seen.delivered as usize, seen.packets.len());
    assert_eq!(
        seen.delivered + seen.overwritten,
        want_slow.len() as u64,
        "slow: delivered + overwritten == accepted"
    );
    assert!(seen.overwritten > 0, "the slow reader fell behind");
    assert!(seen.lost_before <= seen.overwritten);
    assert_eq!(seen.dropped, 0);
    assert_intact_subsequence("FRP slow", &seen.packets, &want_slow);
    println!(
        "FRP (8 slots): 2 expressions × {n} packets; fast got {}/{}, slow delivered {} + \
         overwritten {} = {} (lost_before reported {})",
        got_fast.len(),
        want_fast.len(),
        seen.delivered,
        seen.overwritten,
        want_slow.len(),
        seen.lost_before
    );
}

// ---------------------------------------------------------------------------------------------
// 5. Authorisation.

const POLICY: &str = "\
default deny
require strsearch after sampler
user alice: only \"net 198.18.1.0/24\"
allow
";

/// The mix with web requests from and to 198.18.1.0/24 and ARP in that net.
fn policy_input() -> Vec<Packet> {
    let mut out = Vec::new();
    for (i, p) in mixed_traffic(41, 2000).into_iter().enumerate() {
        let ts = p.timestamp;
        out.push(p);
        // Every 8th: the injected packets alternate between odd and even positions (the
        // sampled flows see some).
        if i % 8 != 0 {
            continue;
        }
        let k = (i / 8) as u8;
        let inside = [198, 18, 1, k];
        let outside = [198, 19, 0, 1 + k % 8];
        let b = match k % 4 {
            0 => FrameBuilder::new()
                .ipv4(inside, outside)
                .tcp(40000, 80, TCP_PSH | TCP_ACK)
                .payload(b"GET / HTTP/1.0\r\n"),
            1 => FrameBuilder::new()
                .ipv4(outside, inside)
                .tcp(80, 40000, TCP_ACK)
                .payload(b"HTTP/1.0 200 OK\r\n"),
            2 => FrameBuilder::new().arp_request(inside, outside),
            _ => FrameBuilder::new()
                .ipv4([198, 18, 2, k], outside)
                .tcp(40000, 80, TCP_ACK)
                .payload(b"GET / HTTP/1.0\r\n"),
        };
        out.push(
            b.pad_to(60)
                .build_packet(Timestamp::from_nanos(ts.as_nanos() + 1)),
        );
    }
    out
}

#[test]
fn authorisation_policy_names_the_rule_and_allowed_flows_run() {
    let path = temp_path("policy.pcap");
    write_pcap(&path, &policy_input());
    let input = read_all(&path);
    let src = format!("(file,{})", q(path.to_str().unwrap()));
    let mut rt = Runtime::new(standard_registry(), Policy::parse(POLICY).unwrap());
    let user = |u: &str| FlowOptions {
        user: u.into(),
        ..opts()
    };
    let deny = |rt: &mut Runtime, u: &str, flow: &str, line: usize, rule: &str| {
        let e = rt
            .open(flow, user(u))
            .err()
            .unwrap_or_else(|| panic!("{u}: {flow} was allowed"));
        let m = e.message();
        assert!(m.contains(&format!("line {line}")), "{m}");
        assert!(m.contains(rule), "{m}");
        assert!(m.contains(&format!("user `{u}`")), "{m}");
        println!("denied as expected:\n{m}");
    };
    deny(
        &mut rt,
        "bob",
        &format!("{src} -> (strsearch,\"GET /\",8)"),
        2,
        "require strsearch after sampler",
    );
    deny(
        &mut rt,
        "bob",
        &format!("{src} -> (strsearch,\"GET /\",8) -> (sampler,2)"),
        2,
        "require strsearch after sampler",
    );
    deny(
        &mut rt,
        "alice",
        &format!("{src} -> (bpf,\"tcp\") -> (packetcount,,8)"),
        3,
        "only \"net 198.18.1.0/24\"",
    );
    deny(
        &mut rt,
        "alice",
        &format!("{src} -> (sampler,2) -> (bpf,\"net 198.18.1.0/24\")"),
        3,
        "only \"net 198.18.1.0/24\"",
    );
    deny(
        &mut rt,
        "alice",
        &format!("{src} -> (bpf,\"net 198.18.1.0/24 or tcp\")"),
        3,
        "only \"net 198.18.1.0/24\"",
    );
    assert!(rt.graph().is_empty(), "denied flows leave nothing behind");

    let (bob, mut rbob) = rt
        .open(
            &format!(
                "{src} -> (sampler,2) -> (bpf,\"tcp dst port 80\") -> (strsearch,\"GET /\",8)"
            ),
            user("bob"),
        )
        .unwrap();
    let (alice1, mut ra1) = rt
        .open(
            &format!("{src} -> (bpf,\"net 198.18.1.0/24\") -> (packetcount,,8)"),
            user("alice"),
        )
        .unwrap();
    let (alice2, mut ra2) = rt
        .open(
            &format!(
                "{src} -> (bpf,\"net 198.18.1.0/24 and tcp dst port 80\") -> (sampler,2) -> \
                 (strsearch,\"GET /\",8)"
            ),
            user("alice"),
        )
        .unwrap();
    rt.run().unwrap();

    let want_bob: Vec<Packet> = sample(&input, 2)
        .into_iter()
        .filter(|p| {
            ref_tcp80(&p.data) && tcp_payload(&p.data).is_some_and(|pl| contains(pl, b"GET /"))
        })
        .collect();
    let want_a1: Vec<Packet> = input.iter().filter(|p| ref_net(&p.data)).cloned().collect();
    let pre: Vec<Packet> = input
        .iter()
        .filter(|p| ref_net(&p.data) && ref_tcp80(&p.data))
        .cloned()
        .collect();
    let want_a2: Vec<Packet> = sample(&pre, 2)
        .into_iter()
        .filter(|p| tcp_payload(&p.data).is_some_and(|pl| contains(pl, b"GET /")))
        .collect();
    assert_delivered("bob", &drain(&mut rbob), &want_bob, 2048);
    assert_delivered("alice net", &drain(&mut ra1), &want_a1, 2048);
    assert_delivered("alice web", &drain(&mut ra2), &want_a2, 2048);
    assert_eq!(rt.mbuf(alice1, 2).unwrap().get(0), want_a1.len() as u64);
    assert_eq!(rt.mbuf(bob, 3).unwrap().get(0), want_bob.len() as u64);
    assert_eq!(rt.mbuf(alice2, 3).unwrap().get(0), want_a2.len() as u64);
    assert!(!want_a1.is_empty() && !want_a2.is_empty() && !want_bob.is_empty());

    // The log has every decision.
    let log = rt.log().join("\n");
    assert_eq!(log.matches("denied by policy line 2").count(), 2, "{log}");
    assert_eq!(log.matches("denied by policy line 3").count(), 3, "{log}");
    assert_eq!(log.matches("allowed by line 4").count(), 3, "{log}");
    for f in [bob, alice1, alice2] {
        assert!(log.contains(&format!("flow {f}: flow of user")), "{log}");
    }
    println!(
        "authorisation: 5 denials, 3 flows allowed; 4 expressions × {} packets compared \
         ({} / {} / {} delivered)",
        input.len(),
        want_bob.len(),
        want_a1.len(),
        want_a2.len()
    );
    let _ = std::fs::remove_file(&path);
}

/// FNV-1a over `d[at..at + len]` masked to `size` buckets, 0 when the range is not captured:
/// FPL's `HASH(at, len, size)` as docs/fpl.md defines it.
fn fpl_hash(d: &[u8], at: usize, len: usize, size: u64) -> u64 {
    d.get(at..at + len).map_or(0, |k| {
        k.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| {
            (h ^ u64::from(*x)).wrapping_mul(0x0100_0000_01b3)
        }) & (size - 1)
    })
}

/// §2.3's first flow with an FPL filter (the paper's FPL-2) in parallel with a BPF one, and
/// Fig. 2(a)'s flow A ending in FPL: save the addresses of infected packets in the MBuf and hand
/// the packet to the application only the first time its address pair is seen.
#[test]
fn fpl_filters_in_the_paper_flows() {
    let input = fig2_input(41, 3000);
    let path = temp_path("fpl-flows.pcap");
    write_pcap(&path, &input);
    let input = read_all(&path);
    let src = format!("(file,{})", q(path.to_str().unwrap()));
    let is_tcp = "IF (PKT.IP_PROTO == PROTO_TCP) THEN RETURN (1); FI";
    let flow1 = format!(
        "{src} -> (sampler,2,4) -> (fpl,{}) | (bpf,\"udp port 53\") -> (bytecount,,8)",
        q(is_tcp)
    );
    let first_seen = "R[0] = HASH(26, 8, 64); \
                      IF (MEM[R[0]] == 0) THEN MEM[R[0]] = PKT.IP_SRC + 1; RETURN (1); FI";
    let flow_a = format!(
        "{src} -> (bpf,\"tcp dst port 80\") -> (strsearch,{},16) -> (fpl,{},512)",
        q(SIG_PATTERN),
        q(first_seen)
    );
    let mut rt = rt();
    let (f1, mut r1) = rt.open(&flow1, opts()).unwrap();
    let (fa, mut ra) = rt.open(&flow_a, opts()).unwrap();
    rt.run().unwrap();

    // Reference for flow 1: every other packet, FPL's `IP_PROTO` is byte 23 (0 when absent).
    let want1: Vec<Packet> = sample(&input, 2)
        .into_iter()
        .filter(|p| byte(&p.data, 23) == Some(6) || ref_udp53(&p.data))
        .collect();
    assert_eq!(rt.mbuf(f1, 4).unwrap().get(0), wire_bytes(&want1));
    assert_delivered("§2.3 flow with FPL", &drain(&mut r1), &want1, 2048);

    // Reference for flow A: infected web packets, first of their address-hash bucket.
    let mut seen = std::collections::HashSet::new();
    let mut mem = vec![0u64; 64];
    let want_a: Vec<Packet> = input
        .iter()
        .filter(|p| ref_tcp80(&p.data))
        .filter(|p| tcp_payload(&p.data).is_some_and(|pl| contains(pl, SIG_PATTERN.as_bytes())))
        .filter(|p| {
            let b = fpl_hash(&p.data, 26, 8, 64);
            let src = p.data.get(26..30).map_or(0, |s| {
                u64::from(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
            });
            if seen.insert(b) {
                mem[b as usize] = src + 1;
                true
            } else {
                false
            }
        })
        .cloned()
        .collect();
    assert_delivered("Fig. 2(a) flow A in FPL", &drain(&mut ra), &want_a, 2048);
    assert_eq!(
        rt.mbuf(fa, 3).unwrap().snapshot(),
        mem,
        "the saved addresses"
    );
    assert!(!want_a.is_empty());
    println!(
        "FPL flows: {} packets; §2.3 flow delivered {}, Fig. 2(a) flow A delivered {} first \
         infected packets",
        input.len(),
        want1.len(),
        want_a.len()
    );
    let _ = std::fs::remove_file(&path);
}
