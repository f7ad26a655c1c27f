//! `topk`: the K most active 5-tuple flows (by packets), published in the MBuf.
//!
//! `(topk, K, MBUF)` with `K` from 1 to 4096 and an MBuf of at least `(4 + 8·K) · 8` bytes.
//! Every packet passes; the result is the rank + 1 of the packet's flow after counting it (1:
//! the most active flow), 0 when it is not in the top K or not IP.
//!
//! # Counting
//!
//! Counts are exact: the instance keeps a hash map of every flow it has seen, packets and bytes
//! (wire length), and the top K sorted by packets, updated incrementally — a packet changes one
//! count, so the flow moves up a few places or enters the list in place of the last one. When
//! the map holds [`MAX_FLOWS`] flows, packets of flows not yet in it are only counted in MBuf
//! word 3 (`NOTE:` bounded memory; a flow that appears late in a huge trace is missed, and the
//! list is then exact only among the tracked flows). Ties: a flow enters the list or passes
//! another only with strictly more packets, so among equal counts the earlier one stays ahead.
//!
//! # MBuf layout
//!
//! | word | contents |
//! |---|---|
//! | 0 | `K` (written by the filter) |
//! | 1 | IP packets seen |
//! | 2 | flows tracked |
//! | 3 | packets of flows not tracked (the map was full) |
//! | 4 + 8·r + 0…4 | rank r (0: most packets): the key, as in [`FlowKey5::to_words`] (all zero: no flow yet) |
//! | 4 + 8·r + 5 | rank r: packets |
//! | 4 + 8·r + 6 | rank r: bytes (wire length) |
//! | 4 + 8·r + 7 | rank r: timestamp of the flow's last packet, nanoseconds since 1970 |
//!
//! The entry format is the bucket format of `flowcount`. Entries are rewritten when they change,
//! so a reader running concurrently may see a list in the middle of a reordering (the same flow
//! at two ranks for a moment); [`TopK::read`] decodes it.

use std::collections::HashMap;

use netsift_capture::Timestamp;

use crate::class::{Arg, Context, Filter, FilterClass, Instance, Pkt, Verdict};
use crate::classes::flowkey::FlowKey5;
use crate::classes::number_arg;
use crate::error::Error;
use crate::mbuf::MBuf;
use netsift_wire::flow;

/// The most flows a `topk` instance tracks.
pub const MAX_FLOWS: usize = 1 << 18;
/// The largest `K`.
pub const MAX_K: u64 = 4096;
/// Words before the first entry.
pub const HEADER_WORDS: usize = 4;
/// Words per entry.
pub const ENTRY_WORDS: usize = 8;

const NOT_RANKED: usize = usize::MAX;

/// The `topk` class.
#[derive(Clone, Copy, Debug, Default)]
pub struct TopKClass;

impl FilterClass for TopKClass {
    fn describe(&self, mbuf: &MBuf) -> Option<String> {
        Some(super::flowkey::describe_flows(TopK::read(mbuf)))
    }

    fn name(&self) -> &'static str {
        "topk"
    }

    fn about(&self) -> &'static str {
        "the K most active 5-tuple flows by packets, kept in MBuf; pass every packet"
    }

    fn usage(&self) -> &'static str {
        "K, MBUF (at least (4 + 8*K) * 8)"
    }

    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }

    fn min_mbuf(&self, args: &[Arg]) -> usize {
        match args.first().and_then(Arg::number) {
            Some(k) if k <= MAX_K => (HEADER_WORDS + ENTRY_WORDS * k as usize) * 8,
            _ => 0,
        }
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, Error> {
        let k = number_arg(self.name(), args, 0, "K", 1, MAX_K)? as usize;
        Ok(Instance::Filter(Box::new(TopKFilter {
            k,
            flows: HashMap::new(),
            top: Vec::with_capacity(k),
        })))
    }
}

#[derive(Clone, Copy, Debug)]
struct Flow {
    packets: u64,
    bytes: u64,
    last: u64,
    rank: usize,
}

/// A `topk` instance.
#[derive(Debug)]
pub struct TopKFilter {
    k: usize,
    flows: HashMap<FlowKey5, Flow>,
    /// The top flows, most packets first.
    top: Vec<FlowKey5>,
}

impl TopKFilter {
    fn packets(&self, key: &FlowKey5) -> u64 {
        self.flows.get(key).map_or(0, |f| f.packets)
    }

    fn publish(&self, mbuf: &MBuf, rank: usize) {
        let (Some(key), base) = (self.top.get(rank), HEADER_WORDS + rank * ENTRY_WORDS) else {
            return;
        };
        let Some(f) = self.flows.get(key) else { return };
        for (j, w) in key.to_words().into_iter().enumerate() {
            mbuf.set(base + j, w);
        }
        mbuf.set(base + 5, f.packets);
        mbuf.set(base + 6, f.bytes);
        mbuf.set(base + 7, f.last);
    }

    /// Count one packet of `key` and reorder the list: the flow's rank, if it has one.
    fn count(&mut self, key: FlowKey5, wire_len: u32, ts: Timestamp, mbuf: &MBuf) -> Option<usize> {
        let last = ts.as_nanos().clamp(0, i128::from(u64::MAX)) as u64;
        let packets = if let Some(f) = self.flows.get_mut(&key) {
            f.packets += 1;
            f.bytes += u64::from(wire_len);
            f.last = last;
            f.packets
        } else if self.flows.len() < MAX_FLOWS {
            self.flows.insert(
                key,
                Flow {
                    packets: 1,
                    bytes: u64::from(wire_len),
                    last,
                    rank: NOT_RANKED,
                },
            );
            mbuf.set(2, self.flows.len() as u64);
            1
        } else {
            mbuf.add(3, 1);
            return None;
        };
        let rank = self.flows.get(&key).map_or(NOT_RANKED, |f| f.rank);
        let mut r = if rank != NOT_RANKED {
            rank
        } else if self.top.len() < self.k {
            self.top.push(key);
            self.top.len() - 1
        } else if self.top.last().is_some_and(|l| packets > self.packets(l)) {
            let r = self.top.len() - 1;
            let out = std::mem::replace(&mut self.top[r], key);
            if let Some(f) = self.flows.get_mut(&out) {
                f.rank = NOT_RANKED;
            }
            r
        } else {
            return None;
        };
        let low = r;
        while r > 0 && self.packets(&self.top[r - 1]) < packets {
            self.top.swap(r - 1, r);
            r -= 1;
        }
        for i in r..=low {
            let k = self.top[i];
            if let Some(f) = self.flows.get_mut(&k) {
                f.rank = i;
            }
            self.publish(mbuf, i);
        }
        Some(r)
    }
}

impl Filter for TopKFilter {
    fn process(&mut self, pkt: &Pkt<'_>, mbuf: &MBuf) -> Verdict {
        let Some(p) = flow::parse(pkt.link_type, pkt.data) else {
            return Verdict::Pass {
                result: 0,
                keep: None,
            };
        };
        if mbuf.get(0) != self.k as u64 {
            mbuf.set(0, self.k as u64);
        }
        mbuf.add(1, 1);
        let rank = self.count(p.key.into(), pkt.wire_len, pkt.timestamp, mbuf);
        Verdict::Pass {
            result: rank.map_or(0, |r| u32::try_from(r + 1).unwrap_or(u32::MAX)),
            keep: None,
        }
    }
}

/// The top-K list of a `topk` MBuf (see the module docs for the layout).
#[derive(Clone, Copy, Debug)]
pub struct TopK;

impl TopK {
    /// The flows of the list in `mbuf`, most packets first: key, packets, bytes.
    pub fn read(mbuf: &MBuf) -> Vec<(FlowKey5, u64, u64)> {
        let room = mbuf.words().saturating_sub(HEADER_WORDS) / ENTRY_WORDS;
        let k = (mbuf.get(0).min(room as u64)) as usize;
        (0..k)
            .map_while(|r| {
                let base = HEADER_WORDS + r * ENTRY_WORDS;
                let kw = [0, 1, 2, 3, 4].map(|j| mbuf.get(base + j));
                FlowKey5::from_words(kw).map(|key| (key, mbuf.get(base + 5), mbuf.get(base + 6)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use netsift_capture::generate::{FrameBuilder, TCP_ACK, XorShift64, mixed_traffic};
    use netsift_capture::{LinkType, Packet};

    use super::*;
    use crate::classes::testutil::{bare, error, eth, filter, pkt, run};

    fn mbuf(k: usize) -> MBuf {
        MBuf::new(TopKClass.min_mbuf(&bare(&[&k.to_string()])))
    }

    /// The exact per-flow counts, most packets first (ties in any order).
    fn reference(pkts: &[Packet]) -> Vec<(FlowKey5, u64, u64)> {
        let mut m: HashMap<FlowKey5, (u64, u64)> = HashMap::new();
        for p in pkts {
            if let Some(x) = flow::parse(p.link_type, &p.data) {
                let e = m.entry(x.key.into()).or_default();
                e.0 += 1;
                e.1 += u64::from(p.wire_len);
            }
        }
        let mut v: Vec<_> = m.into_iter().map(|(k, (p, b))| (k, p, b)).collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.1));
        v
    }

    /// Six heavy flows (600, 500, … 100 packets) in 300 light ones (1-20 packets), shuffled.
    fn separated(seed: u64) -> Vec<Packet> {
        let mut rng = XorShift64::new(seed);
        let mut pkts = Vec::new();
        for h in 0..6u16 {
            for _ in 0..(600 - 100 * u64::from(h)) {
                pkts.push(
                    FrameBuilder::new()
                        .ipv4([10, 0, 0, 1], [10, 0, 1, h as u8])
                        .tcp(40000 + h, 80, TCP_ACK)
                        .pad_to(60)
                        .build(),
                );
            }
        }
        for l in 0..300u16 {
            for _ in 0..=rng.below(20) {
                pkts.push(
                    FrameBuilder::new()
                        .ipv4([10, 2, (l >> 8) as u8, l as u8], [10, 3, 0, 1])
                        .udp(1000 + l, 53)
                        .pad_to(60 + (l % 7) as usize)
                        .build(),
                );
            }
        }
        // Fisher-Yates with the test's generator.
        for i in (1..pkts.len()).rev() {
            pkts.swap(i, rng.below(i as u64 + 1) as usize);
        }
        pkts.into_iter().map(eth).collect()
    }

    #[test]
    fn separated_top_flows_equal_exact_count() {
        for k in [1usize, 3, 6] {
            let pkts = separated(k as u64);
            let m = mbuf(k);
            let mut f = filter(&TopKClass, &bare(&[&k.to_string()]));
            run(f.as_mut(), &pkts, &m);
            let want: Vec<_> = reference(&pkts).into_iter().take(k).collect();
            assert_eq!(TopK::read(&m), want, "k = {k}");
            assert_eq!(m.get(1), pkts.len() as u64);
            assert_eq!(m.get(2), 306);
            assert_eq!(m.get(3), 0);
        }
    }

    #[test]
    fn any_mix_lists_the_largest_counts_exactly() {
        // With ties the flows may differ from the reference's order, but the counts are the
        // K largest, each flow's count is exact, and ranks are sorted.
        let pkts: Vec<Packet> = mixed_traffic(21, 5000)
            .into_iter()
            .chain(separated(2))
            .collect();
        let want = reference(&pkts);
        for k in [1usize, 10, 50] {
            let m = mbuf(k);
            let mut f = filter(&TopKClass, &bare(&[&k.to_string()]));
            let v = run(f.as_mut(), &pkts, &m);
            let got = TopK::read(&m);
            assert_eq!(got.len(), k.min(want.len()));
            let counts: Vec<u64> = got.iter().map(|g| g.1).collect();
            let want_counts: Vec<u64> = want.iter().take(k).map(|w| w.1).collect();
            assert_eq!(counts, want_counts, "k = {k}");
            for g in &got {
                assert!(want.contains(g), "{g:?} is not exact");
            }
            // The last packet's result is its flow's rank + 1 (or 0).
            let last: FlowKey5 = flow::parse(LinkType::ETHERNET, &pkts[pkts.len() - 1].data)
                .unwrap()
                .key
                .into();
            let rank = got.iter().position(|g| g.0 == last).map_or(0, |r| r + 1);
            assert_eq!(
                v[v.len() - 1],
                Verdict::Pass {
                    result: rank as u32,
                    keep: None
                }
            );
        }
    }

    #[test]
    fn arguments() {
        assert_eq!(TopKClass.min_mbuf(&bare(&["10"])), (4 + 80) * 8);
        assert_eq!(
            error(&TopKClass, &bare(&["0"])),
            "topk: argument 1 (K) must be a whole number from 1 to 4096, not \"0\""
        );
        assert!(error(&TopKClass, &bare(&["ten"])).contains("argument 1 (K)"));
        assert!(error(&TopKClass, &[]).contains("missing"));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift64::new(3);
        let m = mbuf(4);
        let mut f = filter(&TopKClass, &bare(&["4"]));
        for i in 0..20_000u32 {
            let mut buf = vec![0u8; rng.below(90) as usize];
            rng.fill(&mut buf);
            if buf.len() > 15 && i % 2 == 0 {
                buf[12] = 0x86;
                buf[13] = 0xdd;
                buf[14] = 0x60;
            }
            let p = Packet::new(buf, Timestamp::new(1, 0), LinkType::ETHERNET);
            f.process(&pkt(&p), &m);
        }
        // A too small MBuf only loses entries.
        let mut f = filter(&TopKClass, &bare(&["4"]));
        let small = MBuf::new(40);
        run(f.as_mut(), &mixed_traffic(1, 100), &small);
        assert!(TopK::read(&small).is_empty());
        assert!(TopK::read(&m).len() <= 4);
    }
}
