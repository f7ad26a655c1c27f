//! `flowcount`: packet and byte counters per 5-tuple, in a hash table in the MBuf (the paper's
//! Fig. 6, with whole keys instead of "assume the hash is unique").
//!
//! `(flowcount, [ip|tcp|udp], MBUF)` counts every IPv4/IPv6 packet (`ip`, the default; an
//! empty argument is the default too: `(flowcount,,4096)`), or only TCP or UDP ones. Every
//! packet passes; the result is the bucket number + 1 of a counted packet, 0 for a packet that
//! was not counted (not IP, another protocol, or the table is full).
//!
//! # MBuf layout
//!
//! All words are 64-bit ([`MBuf`] words). The table is open addressing with linear probing
//! over `B = (words − 4) / 8` buckets — the table size follows from the MBuf size; at least
//! 96 bytes (one bucket).
//!
//! | word | contents |
//! |---|---|
//! | 0 | `B`, the number of buckets (written by the filter) |
//! | 1 | packets not counted because the table was full (overflow) |
//! | 2 | bytes of those packets |
//! | 3 | buckets in use (flows) |
//! | 4 + 8·b + 0…4 | bucket b: the key, five words as in [`FlowKey5::to_words`] (all zero: empty) |
//! | 4 + 8·b + 5 | bucket b: packets |
//! | 4 + 8·b + 6 | bucket b: bytes (wire length) |
//! | 4 + 8·b + 7 | bucket b: timestamp of the last packet, nanoseconds since 1970 |
//!
//! A flow's home bucket is `FlowKey5::hash_words(key) · B / 2⁶⁴` (the high half of the product);
//! a lookup probes from there, wrapping, until it finds the key or an empty bucket, at most
//! [`MAX_PROBE`] buckets: a new flow whose probe window is full is counted as overflow (so a
//! packet never costs more than `MAX_PROBE` bucket compares, even with a full table). Buckets are
//! never freed: the application resets the table by clearing the MBuf ([`MBuf::clear`]), and
//! the filter starts over. The filter writes a new bucket's count words before its key's last
//! word (bit 0 of key word 4 marks a bucket in use), so a reader running concurrently sees a
//! bucket either empty or with its key. [`FlowTable::read`] decodes the table.
//!
//! ```
//! use netsift_capture::generate::mixed_traffic;
//! use netsift_graph::class::{Context, FilterClass, Instance, Pkt};
//! use netsift_graph::classes::{FlowTable, flowcount::FlowCountClass};
//! use netsift_graph::MBuf;
//!
//! let Ok(Instance::Filter(mut f)) = FlowCountClass.instantiate(&[], &Context::default()) else {
//!     panic!("flowcount")
//! };
//! let mbuf = MBuf::new(4096); // 4 header words + 63 buckets
//! let pkts = mixed_traffic(1, 100);
//! for p in &pkts {
//!     let (data, wire_len, timestamp, link_type) = (&p.data, p.wire_len, p.timestamp, p.link_type);
//!     f.process(&Pkt { data, wire_len, timestamp, link_type }, &mbuf);
//! }
//! let flows = FlowTable::read(&mbuf); // what the application sees, any time
//! let counted: u64 = flows.iter().map(|(_, packets, _)| packets).sum();
//! let ip = pkts.iter().filter(|p| netsift_wire::flow::parse(p.link_type, &p.data).is_some()).count();
//! assert_eq!(counted + FlowTable::overflow(&mbuf).0, ip as u64); // ARP is not counted
//! ```

use netsift_capture::Timestamp;

use crate::class::{Arg, Context, Filter, FilterClass, Instance, Pkt, Verdict};
use crate::classes::flowkey::FlowKey5;
use crate::error::Error;
use crate::mbuf::MBuf;
use netsift_wire::flow;

/// Words before the first bucket.
pub const HEADER_WORDS: usize = 4;
/// Words per bucket.
pub const BUCKET_WORDS: usize = 8;

/// The most buckets a lookup probes.
pub const MAX_PROBE: usize = 64;

/// The `flowcount` class.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowCountClass;

/// Which packets a `flowcount` or `topk` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protos {
    Ip,
    Tcp,
    Udp,
}

impl Protos {
    pub(crate) fn admits(self, proto: u8) -> bool {
        match self {
            Protos::Ip => true,
            Protos::Tcp => proto == 6,
            Protos::Udp => proto == 17,
        }
    }
}

impl FilterClass for FlowCountClass {
    fn describe(&self, mbuf: &MBuf) -> Option<String> {
        Some(super::flowkey::describe_flows(FlowTable::read(mbuf)))
    }

    fn name(&self) -> &'static str {
        "flowcount"
    }

    fn about(&self) -> &'static str {
        "per-5-tuple packet and byte counters in an MBuf hash table; pass every packet"
    }

    fn usage(&self) -> &'static str {
        "[ip|tcp|udp], MBUF (at least 96: 4 header words + 8 words per flow)"
    }

    fn arity(&self) -> (usize, usize) {
        (0, 1)
    }

    fn min_mbuf(&self, _args: &[Arg]) -> usize {
        (HEADER_WORDS + BUCKET_WORDS) * 8
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, Error> {
        let protos = match args.first().map(|a| a.text.trim().to_ascii_lowercase()) {
            None => Protos::Ip,
            Some(t) => match t.as_str() {
                "" | "ip" => Protos::Ip,
                "tcp" => Protos::Tcp,
                "udp" => Protos::Udp,
                _ => {
                    return Err(Error::argument(format!(
                        "flowcount: argument 1 (protocols) must be ip, tcp or udp, not {:?}",
                        args[0].text
                    )));
                }
            },
        };
        Ok(Instance::Filter(Box::new(FlowCount { protos })))
    }
}

/// A `flowcount` instance.
#[derive(Clone, Copy, Debug)]
pub struct FlowCount {
    protos: Protos,
}

impl Filter for FlowCount {
    fn process(&mut self, pkt: &Pkt<'_>, mbuf: &MBuf) -> Verdict {
        let counted = flow::parse(pkt.link_type, pkt.data)
            .filter(|p| self.protos.admits(p.key.proto.0))
            .map(|p| FlowTable::count(mbuf, &p.key.into(), pkt.wire_len, pkt.timestamp));
        let result = match counted {
            Some(Some(bucket)) => u32::try_from(bucket + 1).unwrap_or(u32::MAX),
            _ => 0,
        };
        Verdict::Pass { result, keep: None }
    }
}

/// The flow table of a `flowcount` MBuf (see the module docs for the layout).
#[derive(Clone, Copy, Debug)]
pub struct FlowTable;

impl FlowTable {
    /// The number of buckets of an MBuf of `words` words.
    pub fn buckets(words: usize) -> usize {
        words.saturating_sub(HEADER_WORDS) / BUCKET_WORDS
    }

    /// Count one packet of `wire_len` bytes of flow `key` in the table in `mbuf`: the bucket it
    /// was counted in, or `None` when the table is full (counted in the overflow words).
    pub fn count(mbuf: &MBuf, key: &FlowKey5, wire_len: u32, ts: Timestamp) -> Option<usize> {
        let b = Self::buckets(mbuf.words());
        if mbuf.get(0) != b as u64 {
            mbuf.set(0, b as u64);
        }
        let kw = key.to_words();
        let found = Self::find_or_insert(mbuf, &kw, b);
        match found {
            Some(i) => {
                let base = HEADER_WORDS + i * BUCKET_WORDS;
                mbuf.add(base + 5, 1);
                mbuf.add(base + 6, u64::from(wire_len));
                mbuf.set(
                    base + 7,
                    ts.as_nanos().clamp(0, i128::from(u64::MAX)) as u64,
                );
            }
            None => {
                mbuf.add(1, 1);
                mbuf.add(2, u64::from(wire_len));
            }
        }
        found
    }

    /// The bucket of `kw` (inserting it in the first empty bucket of its probe sequence), or
    /// `None` when the key is absent and the table full.
    fn find_or_insert(mbuf: &MBuf, kw: &[u64; 5], b: usize) -> Option<usize> {
        if b == 0 {
            return None;
        }
        let full = mbuf.get(3) >= b as u64;
        for i in Self::probes(kw, b) {
            let base = HEADER_WORDS + i * BUCKET_WORDS;
            let tag = mbuf.get(base + 4);
            if tag == 0 {
                if full {
                    // The application changed the table under us; do not fill it past `B`.
                    return None;
                }
                mbuf.set(base + 5, 0);
                mbuf.set(base + 6, 0);
                for (j, &w) in kw.iter().enumerate().take(4) {
                    mbuf.set(base + j, w);
                }
                mbuf.set(base + 4, kw[4]);
                mbuf.add(3, 1);
                return Some(i);
            }
            if tag == kw[4] && (0..4).all(|j| mbuf.get(base + j) == kw[j]) {
                return Some(i);
            }
        }
        None
    }

    /// The buckets a lookup of `kw` probes in a table of `b` buckets, in order.
    fn probes(kw: &[u64; 5], b: usize) -> impl Iterator<Item = usize> {
        let home = ((u128::from(FlowKey5::hash_words(kw)) * b as u128) >> 64) as usize;
        (0..b.min(MAX_PROBE)).map(move |step| (home + step) % b)
    }

    /// The packets and bytes of flow `key` in the table in `mbuf` (following its probe
    /// sequence, as the filter does), `None` when it is not there.
    pub fn lookup(mbuf: &MBuf, key: &FlowKey5) -> Option<(u64, u64)> {
        let kw = key.to_words();
        for i in Self::probes(&kw, Self::buckets(mbuf.words())) {
            let base = HEADER_WORDS + i * BUCKET_WORDS;
            let tag = mbuf.get(base + 4);
            if tag == 0 {
                return None;
            }
            if tag == kw[4] && (0..4).all(|j| mbuf.get(base + j) == kw[j]) {
                return Some((mbuf.get(base + 5), mbuf.get(base + 6)));
            }
        }
        None
    }

    /// Every flow in the table in `mbuf`, in bucket order: key, packets, bytes.
    pub fn read(mbuf: &MBuf) -> Vec<(FlowKey5, u64, u64)> {
        let b = Self::buckets(mbuf.words());
        (0..b)
            .filter_map(|i| {
                let base = HEADER_WORDS + i * BUCKET_WORDS;
                let kw = [0, 1, 2, 3, 4].map(|j| mbuf.get(base + j));
                FlowKey5::from_words(kw).map(|k| (k, mbuf.get(base + 5), mbuf.get(base + 6)))
            })
            .collect()
    }

    /// Packets and bytes not counted because the table was full.
    pub fn overflow(mbuf: &MBuf) -> (u64, u64) {
        (mbuf.get(1), mbuf.get(2))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::net::{IpAddr, Ipv4Addr};

    use netsift_capture::generate::{FrameBuilder, TCP_ACK, XorShift64, mixed_traffic};
    use netsift_capture::{LinkType, Packet};

    use super::*;
    use crate::classes::testutil::{bare, error, eth, filter, run};

    /// The reference: the 5-tuple read at fixed offsets of the generator's frames (Ethernet,
    /// optional one VLAN tag, IPv4 without options or IPv6 without extension headers).
    fn reference_key(p: &Packet) -> Option<FlowKey5> {
        let d = &p.data;
        let vlan = if d[12..14] == [0x81, 0] { 4 } else { 0 };
        let ip = 14 + vlan;
        let et = [d[12 + vlan], d[13 + vlan]];
        let (src, dst, proto, l4) = match et {
            [0x08, 0x00] => (
                IpAddr::from(<[u8; 4]>::try_from(&d[ip + 12..ip + 16]).unwrap()),
                IpAddr::from(<[u8; 4]>::try_from(&d[ip + 16..ip + 20]).unwrap()),
                d[ip + 9],
                ip + 20,
            ),
            [0x86, 0xdd] => (
                IpAddr::from(<[u8; 16]>::try_from(&d[ip + 8..ip + 24]).unwrap()),
                IpAddr::from(<[u8; 16]>::try_from(&d[ip + 24..ip + 40]).unwrap()),
                d[ip + 6],
                ip + 40,
            ),
            _ => return None,
        };
        let ports = matches!(proto, 6 | 17);
        let port = |at: usize| u16::from_be_bytes([d[at], d[at + 1]]);
        Some(FlowKey5 {
            src,
            dst,
            proto,
            src_port: if ports { port(l4) } else { 0 },
            dst_port: if ports { port(l4 + 2) } else { 0 },
        })
    }

    fn sorted(mut v: Vec<(FlowKey5, u64, u64)>) -> Vec<(FlowKey5, u64, u64)> {
        v.sort();
        v
    }

    /// A mix of few flows (so that packets repeat their 5-tuple): 3 clients × 2 servers.
    fn few_flows(seed: u64, n: usize) -> Vec<Packet> {
        let mut rng = XorShift64::new(seed);
        (0..n)
            .map(|_| {
                let c = rng.below(3) as u8 + 1;
                let s = rng.below(2) as u8 + 1;
                let b = FrameBuilder::new().ipv4([10, 0, 0, c], [10, 1, 0, s]);
                let b = match rng.below(3) {
                    0 => b.tcp(1000 + u16::from(c), 80, TCP_ACK),
                    1 => b.udp(2000, 53),
                    _ => b.vlan(5).tcp(1000, 443, TCP_ACK),
                };
                eth(b
                    .payload(&vec![0; rng.below(50) as usize])
                    .pad_to(60)
                    .build())
            })
            .collect()
    }

    #[test]
    fn counts_equal_a_reference_count() {
        for pkts in [few_flows(1, 3000), mixed_traffic(9, 3000)] {
            let mut want: HashMap<FlowKey5, (u64, u64)> = HashMap::new();
            for p in &pkts {
                if let Some(k) = reference_key(p) {
                    let e = want.entry(k).or_default();
                    e.0 += 1;
                    e.1 += u64::from(p.wire_len);
                }
            }
            let m = MBuf::new(8 * (HEADER_WORDS + BUCKET_WORDS * 4096));
            let mut f = filter(&FlowCountClass, &bare(&[""]));
            let v = run(f.as_mut(), &pkts, &m);
            assert!(v.iter().all(|v| matches!(v, Verdict::Pass { .. })));
            for (k, (p, b)) in &want {
                assert_eq!(FlowTable::lookup(&m, k), Some((*p, *b)));
            }
            let want = sorted(want.into_iter().map(|(k, (p, b))| (k, p, b)).collect());
            assert_eq!(sorted(FlowTable::read(&m)), want);
            assert_eq!(m.get(0), 4096);
            assert_eq!(m.get(3), want.len() as u64);
            assert_eq!(FlowTable::overflow(&m), (0, 0));
        }
    }

    #[test]
    fn full_table_overflows() {
        let pkts = mixed_traffic(4, 2000);
        let m = MBuf::new(8 * (HEADER_WORDS + BUCKET_WORDS * 16));
        let mut f = filter(&FlowCountClass, &[]);
        let v = run(f.as_mut(), &pkts, &m);
        let flows = FlowTable::read(&m);
        assert_eq!(flows.len(), 16);
        let counted: u64 = flows.iter().map(|f| f.1).sum();
        let ip = pkts.iter().filter(|p| reference_key(p).is_some()).count() as u64;
        assert_eq!(counted + FlowTable::overflow(&m).0, ip);
        let not_counted = v
            .iter()
            .filter(|v| matches!(v, Verdict::Pass { result: 0, .. }))
            .count() as u64;
        assert_eq!(not_counted, pkts.len() as u64 - counted);
        // The application resets the table; counting starts over.
        m.clear();
        run(f.as_mut(), &pkts[..10], &m);
        assert_eq!(
            FlowTable::read(&m).iter().map(|f| f.1).sum::<u64>() + m.get(1),
            pkts[..10]
                .iter()
                .filter(|p| reference_key(p).is_some())
                .count() as u64
        );
    }

    #[test]
    fn tcp_only_and_bad_argument() {
        let pkts = few_flows(2, 500);
        let m = MBuf::new(8 * 100);
        let mut f = filter(&FlowCountClass, &bare(&["TCP"]));
        run(f.as_mut(), &pkts, &m);
        let flows = FlowTable::read(&m);
        assert!(flows.iter().all(|f| f.0.proto == 6));
        let tcp = pkts
            .iter()
            .filter(|p| reference_key(p).is_some_and(|k| k.proto == 6))
            .count() as u64;
        assert_eq!(flows.iter().map(|f| f.1).sum::<u64>(), tcp);
        assert_eq!(
            error(&FlowCountClass, &bare(&["icmp"])),
            "flowcount: argument 1 (protocols) must be ip, tcp or udp, not \"icmp\""
        );
        assert_eq!(FlowCountClass.min_mbuf(&[]), 96);
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift64::new(11);
        let m = MBuf::new(8 * (HEADER_WORDS + BUCKET_WORDS * 8));
        let mut f = filter(&FlowCountClass, &[]);
        for i in 0..20_000u32 {
            let mut buf = vec![0u8; rng.below(100) as usize];
            rng.fill(&mut buf);
            if buf.len() > 15 && i % 2 == 0 {
                buf[12] = 0x08;
                buf[13] = 0;
                buf[14] = 0x40 | (buf[14] & 0x0f);
            }
            let link = [LinkType::ETHERNET, LinkType::RAW, LinkType(9999)][i as usize % 3];
            let p = Packet::new(buf, Timestamp::new(-5, 0), link);
            f.process(&crate::classes::testutil::pkt(&p), &m);
        }
        // Tiny and empty MBufs too.
        let key = FlowKey5 {
            src: IpAddr::V4(Ipv4Addr::LOCALHOST),
            dst: IpAddr::V4(Ipv4Addr::LOCALHOST),
            proto: 6,
            src_port: 1,
            dst_port: 2,
        };
        for words in [0, 3, 11] {
            let m = MBuf::new(words * 8);
            assert_eq!(FlowTable::count(&m, &key, 60, Timestamp::new(0, 0)), None);
            assert_eq!(FlowTable::read(&m), vec![]);
        }
    }
}
