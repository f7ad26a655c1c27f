//! `strsearch`: pass the packets whose payload contains one of a set of patterns.
//!
//! `(strsearch, "pat1", "pat2", …)` — 1 to 64 quoted patterns, and the bare option `whole`
//! anywhere among them. By default the search covers the payload: the bytes after the TCP, UDP
//! or SCTP header (after the IP header for other protocols and for non-first fragments) up to
//! the end of the IP datagram, without link-layer padding (see
//! [`netsift_wire::flow`]); packets that are not IPv4/IPv6 are not searched and
//! dropped. With `whole` the search covers every captured byte from the link-layer header on.
//! Only the captured bytes are searched: a pattern cut by the snap length does not match.
//!
//! Inside a pattern, `\xHH` (two hex digits) is the byte `HH` and `\\` a backslash; any other
//! backslash is itself. The graph language resolves `\"` and `\\` in its strings first and keeps
//! other backslashes, so in a graph `"\x90\x90"` is two bytes 0x90 and `"\\\\x90"` the four
//! characters `\x90`.
//!
//! A matching packet passes with result `i + 1`, where pattern `i` is the first match in the
//! searched bytes: the one starting leftmost, and among those starting at the same byte, the
//! one listed first. Word `i` of the MBuf (when it has one) counts the packets in which pattern
//! `i` occurs at least once.
//!
//! The MBuf size argument would come after 65 arguments (the graph language puts it right
//! after the most arguments a class takes), so in practice it is not written: the MBuf then
//! gets [`FilterClass::min_mbuf`] bytes, which is one counter word per pattern.
//!
//! # Engines
//!
//! One pattern: Boyer-Moore-Horspool ([`Horspool`]), written here. Several: Aho-Corasick (the
//! `aho-corasick` crate), a leftmost-first automaton that stops at the first match when there
//! is no counting to do, and a standard one whose overlapping matches find every pattern that
//! occurs when the MBuf has counters. `PERF:` counting makes every packet a full scan.

use aho_corasick::{AhoCorasick, MatchKind};

use crate::class::{Arg, Context, Filter, FilterClass, Instance, Pkt, Verdict};
use crate::error::{Error, ErrorKind};
use crate::mbuf::MBuf;
use netsift_wire::flow;

/// The most patterns one instance takes.
pub const MAX_PATTERNS: usize = 64;

/// The `strsearch` class.
#[derive(Clone, Copy, Debug, Default)]
pub struct StrSearchClass;

/// Resolve `\xHH` and `\\` in a pattern; `argno` (1-based) names the argument in errors
/// ([`ErrorKind::Argument`]).
pub fn unescape(text: &str, argno: usize) -> Result<Vec<u8>, Error> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b'\\', Some(b'\\')) => {
                out.push(b'\\');
                i += 2;
            }
            (b'\\', Some(b'x')) => {
                let hex = b.get(i + 2..i + 4).and_then(|h| {
                    std::str::from_utf8(h)
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                });
                match hex {
                    Some(v) if b[i + 2].is_ascii_hexdigit() && b[i + 3].is_ascii_hexdigit() => {
                        out.push(v);
                        i += 4;
                    }
                    _ => {
                        let end = text.len().min(i + 4);
                        let shown = text.get(i..end).unwrap_or("\\x");
                        return Err(Error::argument(format!(
                            "strsearch: argument {argno} (pattern) has a bad escape {shown:?} at \
                             byte {i}: \\x needs two hex digits"
                        )));
                    }
                }
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

impl FilterClass for StrSearchClass {
    fn describe(&self, mbuf: &MBuf) -> Option<String> {
        let counts = mbuf.snapshot();
        (!counts.is_empty()).then(|| {
            let c: Vec<String> = counts.iter().map(u64::to_string).collect();
            format!("matches per pattern: {}", c.join(", "))
        })
    }

    fn name(&self) -> &'static str {
        "strsearch"
    }

    fn about(&self) -> &'static str {
        "pass packets whose payload contains a pattern (Aho-Corasick, Boyer-Moore-Horspool)"
    }

    fn usage(&self) -> &'static str {
        "\"PATTERN\"… (1-64; \\xHH for bytes) [, whole] [, MBUF: a bare number, 8 bytes a pattern counter]"
    }

    fn arity(&self) -> (usize, usize) {
        (1, MAX_PATTERNS + 1)
    }

    fn variadic(&self) -> bool {
        true
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, Error> {
        let mut patterns = Vec::new();
        let mut whole = false;
        for (i, a) in args.iter().enumerate() {
            if a.quoted {
                let p = unescape(&a.text, i + 1)?;
                if p.is_empty() {
                    return Err(Error::argument(format!(
                        "strsearch: argument {} (pattern) is empty",
                        i + 1
                    )));
                }
                patterns.push(p);
            } else if a.text.trim().eq_ignore_ascii_case("whole") {
                whole = true;
            } else {
                return Err(Error::argument(format!(
                    "strsearch: argument {} must be a quoted pattern or the option whole, not \
                     {:?}",
                    i + 1,
                    a.text
                )));
            }
        }
        if patterns.is_empty() {
            return Err(Error::argument(
                "strsearch: no pattern (write them in double quotes)",
            ));
        }
        if patterns.len() > MAX_PATTERNS {
            return Err(Error::argument(format!(
                "strsearch: {} patterns, at most {MAX_PATTERNS}",
                patterns.len()
            )));
        }
        Ok(Instance::Filter(Box::new(StrSearch::new(patterns, whole)?)))
    }
}

/// Boyer-Moore-Horspool search for one pattern.
#[derive(Clone, Debug)]
pub struct Horspool {
    needle: Vec<u8>,
    shift: [usize; 256],
}

impl Horspool {
    /// A searcher for `needle` (not empty).
    pub fn new(needle: &[u8]) -> Horspool {
        let n = needle.len();
        let mut shift = [n.max(1); 256];
        for (i, &b) in needle.iter().enumerate().take(n.saturating_sub(1)) {
            shift[usize::from(b)] = n - 1 - i;
        }
        Horspool {
            needle: needle.to_vec(),
            shift,
        }
    }

    /// The offset of the first occurrence of the needle in `hay`.
    pub fn find(&self, hay: &[u8]) -> Option<usize> {
        let n = self.needle.len();
        if n == 0 {
            return Some(0);
        }
        let last = n - 1;
        let mut at = 0;
        while at + n <= hay.len() {
            let window = &hay[at..at + n];
            if window[last] == self.needle[last] && window == self.needle.as_slice() {
                return Some(at);
            }
            at += self.shift[usize::from(window[last])];
        }
        None
    }
}

enum Engine {
    // Boxed: the shift table is 2 KiB.
    One(Box<Horspool>),
    Many {
        first: AhoCorasick,
        all: AhoCorasick,
    },
}

/// A `strsearch` instance.
pub struct StrSearch {
    engine: Engine,
    whole: bool,
    /// The packet number at which each pattern was last counted (dedup within a packet).
    stamp: Vec<u64>,
    packets: u64,
}

impl std::fmt::Debug for StrSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrSearch")
            .field("patterns", &self.stamp.len())
            .field("whole", &self.whole)
            .finish_non_exhaustive()
    }
}

impl StrSearch {
    /// A searcher for `patterns` (1 to [`MAX_PATTERNS`], none empty), over the payload or the
    /// `whole` packet. An error ([`ErrorKind::Argument`]) when
    /// the automaton of several patterns cannot be built.
    pub fn new(patterns: Vec<Vec<u8>>, whole: bool) -> Result<StrSearch, Error> {
        let n = patterns.len();
        let engine = if n == 1 {
            Engine::One(Box::new(Horspool::new(&patterns[0])))
        } else {
            let build = |kind| {
                AhoCorasick::builder()
                    .match_kind(kind)
                    .build(&patterns)
                    .map_err(|e| {
                        Error::with_source(
                            ErrorKind::Argument,
                            format!("strsearch: cannot build the automaton: {e}"),
                            e,
                        )
                    })
            };
            Engine::Many {
                first: build(MatchKind::LeftmostFirst)?,
                all: build(MatchKind::Standard)?,
            }
        };
        Ok(StrSearch {
            engine,
            whole,
            stamp: vec![u64::MAX; n],
            packets: 0,
        })
    }

    /// The first pattern in `hay` (see the module docs), counting into `mbuf`.
    pub fn search(&mut self, hay: &[u8], mbuf: &MBuf) -> Option<usize> {
        self.packets += 1;
        match &self.engine {
            Engine::One(h) => {
                let hit = h.find(hay).map(|_| 0);
                if hit.is_some() {
                    mbuf.add(0, 1);
                }
                hit
            }
            Engine::Many { first, .. } if mbuf.is_empty() => {
                first.find(hay).map(|m| m.pattern().as_usize())
            }
            Engine::Many { all, .. } => {
                let mut best: Option<(usize, usize)> = None;
                for m in all.find_overlapping_iter(hay) {
                    let p = m.pattern().as_usize();
                    if best.is_none_or(|b| (m.start(), p) < b) {
                        best = Some((m.start(), p));
                    }
                    if let Some(s) = self.stamp.get_mut(p)
                        && *s != self.packets
                    {
                        *s = self.packets;
                        mbuf.add(p, 1);
                    }
                }
                best.map(|b| b.1)
            }
        }
    }
}

impl Filter for StrSearch {
    fn process(&mut self, pkt: &Pkt<'_>, mbuf: &MBuf) -> Verdict {
        let hay = if self.whole {
            pkt.data
        } else {
            match flow::parse(pkt.link_type, pkt.data) {
                Some(p) => p.payload(pkt.data),
                None => return Verdict::Drop,
            }
        };
        match self.search(hay, mbuf) {
            Some(i) => Verdict::Pass {
                result: u32::try_from(i + 1).unwrap_or(u32::MAX),
                keep: None,
            },
            None => Verdict::Drop,
        }
    }
}

#[cfg(test)]
mod tests {
    use netsift_capture::generate::{FrameBuilder, TCP_ACK, XorShift64, mixed_traffic};
    use netsift_capture::{LinkType, Packet, Timestamp};

    use super::*;
    use crate::classes::testutil::{bare, error, eth, filter, pkt, quoted, run};

    /// The reference: the first (start, pattern) by brute force, and which patterns occur.
    fn naive(pats: &[&[u8]], hay: &[u8]) -> (Option<usize>, Vec<bool>) {
        let occurs = |p: &[u8]| -> Option<usize> { hay.windows(p.len()).position(|w| w == p) };
        let pos: Vec<Option<usize>> = pats.iter().map(|p| occurs(p)).collect();
        let first = pos
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (s, i)))
            .min()
            .map(|(_, i)| i);
        (first, pos.iter().map(Option::is_some).collect())
    }

    fn args(pats: &[&str], extra: &[&str]) -> Vec<Arg> {
        pats.iter().map(|p| quoted(p)).chain(bare(extra)).collect()
    }

    fn tcp(payload: &[u8]) -> Vec<u8> {
        FrameBuilder::new()
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .tcp(1111, 80, TCP_ACK)
            .payload(payload)
            .build()
    }

    /// Generated packets with the patterns planted at random places in some payloads.
    fn planted(seed: u64, pats: &[&[u8]]) -> Vec<Packet> {
        let mut rng = XorShift64::new(seed);
        let mut pkts = mixed_traffic(seed, 2000);
        for p in pkts.iter_mut() {
            let Some(x) = flow::parse(p.link_type, &p.data) else {
                continue;
            };
            let room = x.end - x.payload;
            if rng.below(3) == 0 {
                let pat = pats[rng.below(pats.len() as u64) as usize];
                if pat.len() <= room {
                    let at = x.payload + rng.below((room - pat.len()) as u64 + 1) as usize;
                    p.data[at..at + pat.len()].copy_from_slice(pat);
                }
            }
            if rng.below(10) == 0 {
                // Truncated: cut anywhere (a planted pattern may be cut too).
                let cut = rng.below(p.data.len() as u64 + 1) as usize;
                p.data.truncate(cut);
            }
        }
        pkts
    }

    #[test]
    fn many_patterns_equal_brute_force() {
        let pats: [&[u8]; 4] = [b"GET /", b"ET", b"\x00\xffcmd.exe", b"root"];
        let texts = ["GET /", "ET", "\\x00\\xFFcmd.exe", "root"];
        let pkts = planted(5, &pats);
        for words in [0usize, 2, 4] {
            let m = MBuf::new(words * 8);
            let mut f = filter(&StrSearchClass, &args(&texts, &[]));
            let v = run(f.as_mut(), &pkts, &m);
            let mut counts = [0u64; 4];
            for (p, v) in pkts.iter().zip(&v) {
                let hay = flow::parse(p.link_type, &p.data)
                    .map(|x| &p.data[x.payload..x.end])
                    .unwrap_or(&[]);
                let (first, occurs) = naive(&pats, hay);
                let want = match first {
                    Some(i) => Verdict::Pass {
                        result: i as u32 + 1,
                        keep: None,
                    },
                    None => Verdict::Drop,
                };
                assert_eq!(*v, want, "{:02x?}", p.data);
                for (c, o) in counts.iter_mut().zip(occurs) {
                    *c += u64::from(o);
                }
            }
            assert!(counts.iter().all(|c| *c > 20), "{counts:?}");
            assert_eq!(m.snapshot(), counts[..words].to_vec());
        }
    }

    #[test]
    fn one_pattern_uses_horspool_and_equals_brute_force() {
        let pats: [&[u8]; 1] = [b"abcab"];
        let pkts = planted(6, &pats);
        let m = MBuf::new(8);
        let mut f = filter(&StrSearchClass, &args(&["abcab"], &["whole"]));
        let v = run(f.as_mut(), &pkts, &m);
        let mut n = 0;
        for (p, v) in pkts.iter().zip(&v) {
            let hit = naive(&pats, &p.data).0.is_some();
            assert_eq!(*v != Verdict::Drop, hit);
            n += u64::from(hit);
        }
        assert!(n > 50);
        assert_eq!(m.get(0), n);
        // Horspool alone, on every alignment and on repetitive text.
        let h = Horspool::new(b"aab");
        for hay in [&b"aaab"[..], b"aab", b"ab", b"", b"xaabaab", b"aaaaaaaa"] {
            assert_eq!(h.find(hay), hay.windows(3).position(|w| w == b"aab"));
        }
        assert_eq!(Horspool::new(b"x").find(b"abx"), Some(2));
    }

    #[test]
    fn payload_boundaries() {
        let mut f = filter(&StrSearchClass, &args(&["EVIL", "DONE"], &[]));
        let m = MBuf::new(0);
        let go = |f: &mut Box<dyn Filter>, d: Vec<u8>| f.process(&pkt(&eth(d)), &m);
        let pass = |i: u32| Verdict::Pass {
            result: i,
            keep: None,
        };
        assert_eq!(go(&mut f, tcp(b"EVIL at the start")), pass(1));
        assert_eq!(go(&mut f, tcp(b"at the end: DONE")), pass(2));
        assert_eq!(go(&mut f, tcp(b"DONE then EVIL")), pass(2));
        assert_eq!(go(&mut f, tcp(b"EVI")), Verdict::Drop);
        // Cut by the snap length one byte before the end of the pattern.
        let mut d = tcp(b"xxEVIL");
        d.truncate(d.len() - 1);
        assert_eq!(go(&mut f, d), Verdict::Drop);
        // Straddling the TCP header and the payload: not in the payload.
        let d = tcp(b"IL!");
        let at = flow::parse(LinkType::ETHERNET, &d).unwrap().payload;
        let hdr_tail = d[at - 2..at].to_vec();
        let mut f2 = filter(
            &StrSearchClass,
            &[quoted(&format!(
                "\\x{:02x}\\x{:02x}IL",
                hdr_tail[0], hdr_tail[1]
            ))],
        );
        assert_eq!(go(&mut f2, d.clone()), Verdict::Drop);
        let mut f3 = filter(
            &StrSearchClass,
            &[
                quoted(&format!("\\x{:02x}\\x{:02x}IL", hdr_tail[0], hdr_tail[1])),
                Arg::bare("whole"),
            ],
        );
        assert_eq!(go(&mut f3, d), pass(1));
        // Not IP: dropped unless searching the whole packet.
        let arp = FrameBuilder::new()
            .arp_request([1, 1, 1, 1], [2, 2, 2, 2])
            .build();
        let mut f4 = filter(&StrSearchClass, &[quoted("\\x01\\x01")]);
        assert_eq!(go(&mut f4, arp.clone()), Verdict::Drop);
        let mut f5 = filter(&StrSearchClass, &args(&["\\x01\\x01\\x01"], &["WHOLE"]));
        assert_eq!(go(&mut f5, arp), pass(1));
    }

    #[test]
    fn mbuf_size_is_a_trailing_bare_number() {
        assert_eq!(
            StrSearchClass.min_mbuf(&args(&["a", "b", "c"], &["whole"])),
            0
        );
        assert_eq!(StrSearchClass.arity(), (1, 65));
        assert!(StrSearchClass.variadic());
    }

    #[test]
    fn escapes_and_bad_arguments() {
        assert_eq!(unescape(r"a\x41\\x41\q", 1).unwrap(), b"aA\\x41\\q");
        assert_eq!(
            error(&StrSearchClass, &[quoted("ok"), quoted(r"ab\x4")]),
            "strsearch: argument 2 (pattern) has a bad escape \"\\\\x4\" at byte 2: \\x needs \
             two hex digits"
        );
        assert!(error(&StrSearchClass, &[quoted(r"\xg1")]).contains("argument 1"));
        assert_eq!(
            error(&StrSearchClass, &[quoted("a"), quoted("")]),
            "strsearch: argument 2 (pattern) is empty"
        );
        assert_eq!(
            error(&StrSearchClass, &args(&["a"], &["nocase"])),
            "strsearch: argument 2 must be a quoted pattern or the option whole, not \"nocase\""
        );
        assert!(error(&StrSearchClass, &bare(&["whole"])).contains("no pattern"));
        let many: Vec<Arg> = (0..65).map(|i| quoted(&format!("p{i}"))).collect();
        assert!(error(&StrSearchClass, &many).contains("at most 64"));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift64::new(17);
        let m = MBuf::new(16);
        let mut one = filter(&StrSearchClass, &[quoted("\\x00\\x00")]);
        let mut many = filter(&StrSearchClass, &args(&["\\x00", "\\x01\\x02", "zz"], &[]));
        let mut whole = filter(&StrSearchClass, &args(&["\\x00", "zz"], &["whole"]));
        for i in 0..20_000u32 {
            let mut buf = vec![0u8; rng.below(100) as usize];
            rng.fill(&mut buf);
            if buf.len() > 15 && i % 2 == 0 {
                buf[12] = 0x08;
                buf[13] = 0;
                buf[14] = 0x45;
            }
            let link = [LinkType::ETHERNET, LinkType::RAW, LinkType::LINUX_SLL][i as usize % 3];
            let p = Packet::new(buf, Timestamp::new(0, 0), link);
            for f in [&mut one, &mut many, &mut whole] {
                f.process(&pkt(&p), &m);
            }
        }
    }
}
