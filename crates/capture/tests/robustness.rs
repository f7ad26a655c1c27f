//! Truncated and corrupted captures: the reader must never panic or hang, and must deliver
//! exactly the packets that precede the damage.

mod common;

use common::{Outcome, read_bytes, shared_data_dir};
use netsift_capture::generate::{XorShift64, mixed_traffic};
use netsift_capture::{ErrorKind, LinkType, Packet, PcapWriter, PcapngWriter, Precision};

/// Real captures of several kinds: little- and big-endian pcap, nanosecond pcap, pcapng.
const FILES: &[&str] = &[
    "captures/tcpdump/pptp.pcap",
    "captures/tcpdump/ipoib.pcap",
    "captures/tcpdump/tcp-handshake-nano.pcap",
    "captures/tcpdump/OSPFv2_Capture_FINAL.pcapng",
    "captures/tcpdump/icmp-length-zero.pcapng",
    "captures/libpcap/rarp_req_reply.pcapng",
    "captures/tcpdump/mptcp-v0.pcap",
    "captures/tcpdump/of13_ericsson.pcapng",
];

/// Synthetic captures: pcapng with several interfaces and link types, pcap with a snapshot
/// length that cuts packets.
fn synthetic_files() -> Vec<(String, Vec<u8>)> {
    let mut packets = mixed_traffic(11, 60);
    for (i, p) in packets.iter_mut().enumerate() {
        p.interface = (i % 3) as u32;
        if i % 7 == 0 {
            p.link_type = LinkType::RAW;
        }
    }
    let mut ng = PcapngWriter::new(Vec::new()).expect("header");
    for p in &packets {
        ng.write_packet(&p.as_ref()).expect("write");
    }
    let ethernet: Vec<Packet> = mixed_traffic(12, 60);
    let mut pcap =
        PcapWriter::new(Vec::new(), LinkType::ETHERNET, 50, Precision::Micro).expect("header");
    for p in &ethernet {
        pcap.write_packet(&p.as_ref()).expect("write");
    }
    vec![
        (
            "synthetic.pcapng".to_owned(),
            ng.into_inner().expect("flush"),
        ),
        (
            "synthetic.pcap".to_owned(),
            pcap.into_inner().expect("flush"),
        ),
    ]
}

fn all_files() -> Vec<(String, Vec<u8>)> {
    let data = shared_data_dir();
    let mut files: Vec<(String, Vec<u8>)> = FILES
        .iter()
        .map(|name| {
            let path = data.join(name);
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (name.to_string(), bytes)
        })
        .collect();
    files.extend(synthetic_files());
    files
}

/// Checks that `damaged` delivered the first `k` packets of `original` unchanged.
fn assert_prefix(name: &str, what: &str, original: &Outcome, damaged: &Outcome, k: usize) {
    assert!(
        damaged.packets.len() >= k,
        "{name} {what}: {} packets delivered, expected at least {k} (error {:?})",
        damaged.packets.len(),
        damaged.error
    );
    assert_eq!(
        damaged.packets[..k],
        original.packets[..k],
        "{name} {what}: packets before the damage differ"
    );
}

/// Every truncation point of the small files, a strided sample of the large ones (plus every
/// point around each record boundary): exactly the packets before the cut, then either the end
/// or a `Truncated` error about a record at or after the last delivered one.
#[test]
fn truncation_everywhere() {
    let mut checked = 0usize;
    for (name, bytes) in all_files() {
        let original = read_bytes(&bytes);
        assert!(original.error.is_none(), "{name}: {:?}", original.error);
        assert!(!original.packets.is_empty());
        let is_pcap = !bytes.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]);
        let stride = (bytes.len() / 1500).max(1);
        let mut points: Vec<usize> = (0..=bytes.len()).step_by(stride).collect();
        points.extend(0..bytes.len().min(256));
        for &end in &original.ends {
            let end = end as usize;
            points.extend(end.saturating_sub(2)..=(end + 2).min(bytes.len()));
        }
        points.push(bytes.len());
        points.sort_unstable();
        points.dedup();
        for &cut in &points {
            let damaged = read_bytes(&bytes[..cut]);
            let k = original.ends.iter().filter(|&&e| e as usize <= cut).count();
            let what = format!("cut at {cut}");
            assert_prefix(&name, &what, &original, &damaged, k);
            assert_eq!(damaged.packets.len(), k, "{name} {what}: extra packets");
            let on_boundary = cut == bytes.len()
                || (is_pcap && (cut == 24 || original.ends.contains(&(cut as u64))));
            match &damaged.error {
                None => assert!(
                    !is_pcap || on_boundary,
                    "{name} {what}: no error inside a record"
                ),
                Some(e) => {
                    assert!(
                        !on_boundary || !is_pcap,
                        "{name} {what}: error on a boundary: {e}"
                    );
                    assert_eq!(e.kind(), ErrorKind::Truncated, "{name} {what}: {e}");
                    let last_end = if k == 0 { 0 } else { original.ends[k - 1] };
                    let offset = e.offset().expect("offset");
                    assert!(
                        offset >= last_end && offset <= cut as u64,
                        "{name} {what}: error offset {offset} outside {last_end}..={cut}: {e}"
                    );
                    if is_pcap && k > 0 {
                        assert_eq!(offset, last_end, "{name} {what}: {e}");
                    }
                }
            }
            checked += 1;
        }
    }
    println!("checked {checked} truncated captures");
}

/// Random byte changes: never a panic or a hang, and every packet whose record lies entirely
/// before the first changed byte is delivered unchanged.
#[test]
fn random_byte_flips() {
    let mut rng = XorShift64::new(2024);
    let mut runs = 0usize;
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for (name, bytes) in all_files() {
        if bytes.len() > 64 * 1024 {
            continue; // the large pcapng is covered by the truncation test
        }
        let original = read_bytes(&bytes);
        for _ in 0..600 {
            let mut damaged = bytes.clone();
            let flips = 1 + rng.below(4) as usize;
            let mut first = usize::MAX;
            for _ in 0..flips {
                // Favour the headers, where the structure is.
                let at = if rng.below(3) == 0 {
                    rng.below(64.min(bytes.len() as u64)) as usize
                } else {
                    rng.below(bytes.len() as u64) as usize
                };
                damaged[at] ^= (rng.below(255) + 1) as u8;
                first = first.min(at);
            }
            let outcome = read_bytes(&damaged);
            let k = original
                .ends
                .iter()
                .filter(|&&e| (e as usize) <= first)
                .count();
            assert_prefix(&name, &format!("flip at {first}"), &original, &outcome, k);
            let kind = outcome
                .error
                .map(|e| format!("{:?}", e.kind()))
                .unwrap_or_else(|| "none".to_owned());
            *by_kind.entry(kind).or_default() += 1;
            runs += 1;
        }
    }
    println!("{runs} damaged captures, errors by kind: {by_kind:?}");
}

/// Valid headers followed by random bytes, and random bytes alone.
#[test]
fn random_garbage() {
    let mut rng = XorShift64::new(99);
    let headers: [&[u8]; 4] = [
        &[
            0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
        ],
        &[
            0xa1, 0xb2, 0xcd, 0x34, 0, 2, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 1,
        ],
        &[
            0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 28, 0, 0, 0,
        ],
        &[],
    ];
    let mut delivered = 0usize;
    for round in 0..2000 {
        let header = headers[round % headers.len()];
        let mut bytes = header.to_vec();
        let mut tail = vec![0u8; rng.below(600) as usize];
        rng.fill(&mut tail);
        // Small numbers make plausible lengths and interface ids.
        for b in tail.iter_mut() {
            if rng.below(2) == 0 {
                *b &= 0x0f;
            }
        }
        bytes.extend(tail);
        let outcome = read_bytes(&bytes);
        delivered += outcome.packets.len();
        for p in &outcome.packets {
            assert!(p.data.len() <= bytes.len());
        }
    }
    println!("random garbage: {delivered} packets delivered from 2000 inputs");
}

/// Writes `v` in the chosen byte order.
fn put(out: &mut Vec<u8>, big: bool, v: u32) {
    out.extend(if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    });
}

fn put16(out: &mut Vec<u8>, big: bool, v: u16) {
    out.extend(if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    });
}

/// A random but mostly well-framed pcapng file: sections in both byte orders, interfaces with
/// random options, packet blocks of the three kinds with random fields, unknown blocks, and now
/// and then a damaged length.
fn random_pcapng(rng: &mut XorShift64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut big = rng.below(2) == 0;
    for i in 0..(1 + rng.below(12)) {
        let choice = if i == 0 { 0 } else { rng.below(8) };
        let (block_type, mut body) = match choice {
            0 => {
                if i > 0 {
                    big = rng.below(2) == 0;
                }
                let mut b = Vec::new();
                put(&mut b, big, 0x1a2b_3c4d);
                put16(&mut b, big, 1);
                put16(&mut b, big, rng.below(3) as u16);
                b.extend([0xff; 8]);
                (0x0a0d_0d0a, b)
            }
            1 | 2 => {
                let mut b = Vec::new();
                put16(&mut b, big, [1, 101, 113, 0][rng.below(4) as usize]);
                put16(&mut b, big, 0);
                put(&mut b, big, rng.below(80) as u32);
                for _ in 0..rng.below(4) {
                    let (code, value): (u16, Vec<u8>) = match rng.below(5) {
                        0 => (9, vec![rng.next_u64() as u8]),
                        1 => (14, rng.next_u64().to_le_bytes().to_vec()),
                        2 => (2, b"eth0".to_vec()),
                        3 => (rng.below(20) as u16, vec![0; rng.below(9) as usize]),
                        _ => (0, Vec::new()),
                    };
                    put16(&mut b, big, code);
                    put16(&mut b, big, value.len() as u16);
                    b.extend(&value);
                    b.resize((b.len() + 3) & !3, 0);
                }
                (1, b)
            }
            3 | 4 => {
                let caplen = rng.below(40) as u32;
                let mut b = Vec::new();
                put(&mut b, big, rng.below(3) as u32);
                put(&mut b, big, rng.next_u64() as u32);
                put(&mut b, big, rng.next_u64() as u32);
                put(&mut b, big, caplen);
                put(&mut b, big, rng.below(100) as u32);
                b.resize(b.len() + rng.below(44) as usize, 0xab);
                (6, b)
            }
            5 => {
                let mut b = Vec::new();
                put(&mut b, big, rng.below(60) as u32);
                b.resize(4 + rng.below(50) as usize, 0xcd);
                (3, b)
            }
            6 => {
                let mut b = Vec::new();
                put16(&mut b, big, rng.below(2) as u16);
                put16(&mut b, big, 0);
                put(&mut b, big, 0);
                put(&mut b, big, rng.next_u64() as u32);
                put(&mut b, big, rng.below(20) as u32);
                put(&mut b, big, 20);
                b.resize(b.len() + rng.below(24) as usize, 0xef);
                (2, b)
            }
            _ => (rng.below(16) as u32 + 4, vec![0; rng.below(30) as usize]),
        };
        body.resize((body.len() + 3) & !3, 0);
        let mut total = 12 + body.len() as u32;
        let mut trailer = total;
        match rng.below(20) {
            0 => total = rng.below(64) as u32,
            1 => trailer ^= 4,
            _ => {}
        }
        put(&mut out, big, block_type);
        put(&mut out, big, total);
        out.extend(&body);
        put(&mut out, big, trailer);
    }
    out
}

/// A random pcap file: valid header, records with random lengths that mostly match their data.
fn random_pcap(rng: &mut XorShift64) -> Vec<u8> {
    let big = rng.below(2) == 0;
    let magic = [0xa1b2_c3d4, 0xa1b2_3c4d, 0xa1b2_cd34][rng.below(3) as usize];
    let mut out = Vec::new();
    put(&mut out, big, magic);
    put16(&mut out, big, 2);
    put16(&mut out, big, rng.below(5) as u16);
    out.extend([0; 8]);
    put(&mut out, big, rng.below(64) as u32);
    put(&mut out, big, [1, 101, 0x0400_0001][rng.below(3) as usize]);
    for _ in 0..rng.below(10) {
        let caplen = rng.below(80) as u32;
        put(&mut out, big, rng.next_u64() as u32);
        put(&mut out, big, rng.next_u64() as u32);
        put(&mut out, big, caplen);
        put(&mut out, big, rng.below(100) as u32);
        if magic == 0xa1b2_cd34 {
            out.extend([0; 8]);
        }
        let data_len = if rng.below(10) == 0 {
            rng.below(90) as u32
        } else {
            caplen
        };
        out.resize(out.len() + data_len as usize, 0x5a);
    }
    out
}

/// Structured random files: every delivered packet refers to a described interface, no packet
/// is larger than its file, and nothing panics.
#[test]
fn structured_random_files() {
    let mut rng = XorShift64::new(7);
    let mut delivered = 0usize;
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for round in 0..3000 {
        let bytes = if round % 2 == 0 {
            random_pcapng(&mut rng)
        } else {
            random_pcap(&mut rng)
        };
        let mut reader = match netsift_capture::CaptureReader::new(&bytes[..]) {
            Ok(r) => r,
            Err(e) => {
                *by_kind.entry(format!("{:?} in new", e.kind())).or_default() += 1;
                continue;
            }
        };
        let mut error = None;
        while let Some(p) = reader.next_packet() {
            match p {
                Ok(p) => {
                    assert!(p.data.len() <= bytes.len());
                    let link = p.link_type;
                    let interface = p.interface as usize;
                    delivered += 1;
                    let described = reader.interfaces().get(interface).map(|i| i.link_type);
                    assert_eq!(described, Some(link), "packet on an undescribed interface");
                }
                Err(e) => {
                    error = Some(format!("{:?}", e.kind()));
                    break;
                }
            }
        }
        *by_kind
            .entry(error.unwrap_or_else(|| "none".to_owned()))
            .or_default() += 1;
    }
    println!("structured random files: {delivered} packets delivered, outcomes {by_kind:?}");
    assert!(delivered > 1000);
}

/// A reader that hands out 1 to 3 bytes per call and is sometimes interrupted.
struct Trickle<'a> {
    data: &'a [u8],
    calls: u64,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.calls += 1;
        if self.calls % 5 == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "signal",
            ));
        }
        let n = buf
            .len()
            .min(1 + (self.calls % 3) as usize)
            .min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// Reading through tiny, interrupted reads gives the same packets and errors as reading a slice.
#[test]
fn streaming_reads_match_slice_reads() {
    for (name, bytes) in all_files() {
        for cut in [bytes.len(), bytes.len() * 2 / 3] {
            let bytes = &bytes[..cut];
            let expected = read_bytes(bytes);
            let mut reader = netsift_capture::CaptureReader::new(Trickle {
                data: bytes,
                calls: 0,
            })
            .expect("open");
            let mut packets = Vec::new();
            let mut error = None;
            while let Some(p) = reader.next_packet() {
                match p {
                    Ok(p) => packets.push(p.to_owned()),
                    Err(e) => error = Some(e.to_string()),
                }
            }
            assert_eq!(packets, expected.packets, "{name} cut at {cut}");
            assert_eq!(
                error,
                expected.error.map(|e| e.to_string()),
                "{name} cut at {cut}"
            );
        }
    }
}
