//! External functions: native Rust code a filter calls with `EXTERN(name, in, out)`.
//!
//! A function is registered in a [`Registry`] under a name with the sizes of its input and
//! output, in MBuf words (64-bit). `EXTERN(name, in, out)` passes the MBuf words
//! `in .. in + in_words` as input and `out .. out + out_words` as output (the two ranges may
//! overlap; the checker proves both lie inside the MBuf), plus the packet; the function's
//! return value is the value of the `EXTERN` expression. Functions keep any state they need in
//! their output words (the MBuf is persistent), so they are plain `Fn`s, shared by engines and
//! threads.
//!
//! Functions must not panic (a panic inside native code aborts the process); the standard ones
//! are fuzzed for that.
//!
//! [`Registry::standard`] holds:
//!
//! | name | in | out | returns |
//! |---|---|---|---|
//! | `GetDynTCPDPortFromRTSP` | 0 | 0 | first `client_port` of an RTSP `Transport` header in the payload, else 0 |
//! | `GetRTSPPorts` | 0 | 4 | number of ports found; out = client first, client last, server first, server last (0 if absent) |
//! | `GetRTPPortFromSDP` | 0 | 2 | `m=audio` port of an SDP body, else 0; out = port, `c=IN IP4` address as a big-endian u32 |
//! | `GetFTPDataPort` | 0 | 2 | data port of a `227`/`229` reply, else 0; out = port, `227` address as a u32 |
//! | `BoyerMoore` | 8 | 0 | 1 + offset of the first occurrence in the payload of the pattern in the input, else 0: in\[0\] = length (≤ 56), in\[1..8\] = bytes, big-endian, 8 per word |
//! | `AhoCorasick` | 0 | 8 | 1 + index of the leftmost-first match of [`STANDARD_PATTERNS`] in the payload, else 0; out\[i\] += non-overlapping matches of pattern i |
//! | `FlowCount` | 0 | 256 | per-flow packet counter: out\[h\] += 1 with h = hash of the 5-tuple mod 256; returns the new count (0 and no change if not TCP/UDP) |
//! | `TopK` | 256 | 16 | number of non-zero counters written: the 8 largest of the 256 input counters as (index, count) pairs, largest first, ties to the lower index |

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::proto;

/// The signature of an external function.
pub type ExternFn = dyn Fn(&mut ExternCall<'_>) -> u64 + Send + Sync;

/// What an external function sees: the packet and its slices of the MBuf.
pub struct ExternCall<'a> {
    pkt: &'a [u8],
    wire_len: u32,
    mem: &'a mut [u64],
    input: Range<usize>,
    output: Range<usize>,
}

impl<'a> ExternCall<'a> {
    pub(crate) fn new(
        pkt: &'a [u8],
        wire_len: u32,
        mem: &'a mut [u64],
        site: &ExternSite,
    ) -> ExternCall<'a> {
        ExternCall {
            pkt,
            wire_len,
            mem,
            input: site.input.clone(),
            output: site.output.clone(),
        }
    }

    /// A call outside any program (for tests and direct use): `input` and `output` must lie in
    /// `mem` (they are clamped to it otherwise).
    pub fn detached(
        pkt: &'a [u8],
        mem: &'a mut [u64],
        input: Range<usize>,
        output: Range<usize>,
    ) -> ExternCall<'a> {
        let n = mem.len();
        let clamp = |r: Range<usize>| r.start.min(n)..r.end.clamp(r.start.min(n), n);
        ExternCall {
            pkt,
            wire_len: pkt.len() as u32,
            input: clamp(input),
            output: clamp(output),
            mem,
        }
    }

    /// The captured bytes.
    pub fn packet(&self) -> &[u8] {
        self.pkt
    }

    /// The length on the wire.
    pub fn wire_len(&self) -> u32 {
        self.wire_len
    }

    /// The TCP/UDP payload (empty when the packet is not TCP/UDP over IPv4/IPv6).
    pub fn payload(&self) -> &[u8] {
        proto::payload(self.pkt)
    }

    /// The input words.
    pub fn input(&self) -> &[u64] {
        &self.mem[self.input.clone()]
    }

    /// The output words.
    pub fn output(&mut self) -> &mut [u64] {
        &mut self.mem[self.output.clone()]
    }
}

/// A registered function.
#[derive(Clone)]
pub struct ExternDef {
    /// Input size in MBuf words.
    pub in_words: usize,
    /// Output size in MBuf words.
    pub out_words: usize,
    pub(crate) func: Arc<ExternFn>,
}

impl fmt::Debug for ExternDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExternDef")
            .field("in_words", &self.in_words)
            .field("out_words", &self.out_words)
            .finish_non_exhaustive()
    }
}

/// One `EXTERN` call site of a checked program.
#[derive(Clone)]
pub(crate) struct ExternSite {
    pub name: String,
    pub func: Arc<ExternFn>,
    pub input: Range<usize>,
    pub output: Range<usize>,
}

/// The external functions a program may call, by name.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    map: BTreeMap<String, ExternDef>,
}

/// The signatures [`Registry::standard`]'s `AhoCorasick` looks for.
pub const STANDARD_PATTERNS: [&str; 8] = [
    "GET ",
    "POST ",
    "HTTP/1.",
    "RTSP/1.0",
    "SIP/2.0",
    "SSH-",
    "220 ",
    "BitTorrent protocol",
];

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The standard functions (see the module docs).
    pub fn standard() -> Registry {
        let mut r = Registry::new();
        r.register("GetDynTCPDPortFromRTSP", 0, 0, |c| {
            proto::rtsp_ports(c.payload())
                .and_then(|p| p.client)
                .map_or(0, |(a, _)| u64::from(a))
        });
        r.register("GetRTSPPorts", 0, 4, |c| {
            let p = proto::rtsp_ports(c.payload()).unwrap_or_default();
            let (cl, sv) = (p.client.unwrap_or((0, 0)), p.server.unwrap_or((0, 0)));
            let v = [cl.0, cl.1, sv.0, sv.1].map(u64::from);
            c.output().copy_from_slice(&v);
            v.iter().filter(|x| **x != 0).count() as u64
        });
        r.register("GetRTPPortFromSDP", 0, 2, |c| {
            let (port, addr) = proto::sdp_audio(c.payload());
            let port = port.map_or(0, u64::from);
            let addr = addr.map_or(0, |a| u64::from(u32::from_be_bytes(a)));
            c.output().copy_from_slice(&[port, addr]);
            port
        });
        r.register("GetFTPDataPort", 0, 2, |c| {
            let (port, addr) = proto::ftp_passive(c.payload()).unwrap_or((0, None));
            let addr = addr.map_or(0, |a| u64::from(u32::from_be_bytes(a)));
            c.output().copy_from_slice(&[u64::from(port), addr]);
            u64::from(port)
        });
        r.register("BoyerMoore", 8, 0, |c| {
            let inp = c.input();
            let n = inp[0].min(56) as usize;
            let mut pat = [0u8; 56];
            for (i, w) in inp[1..8].iter().enumerate() {
                pat[i * 8..i * 8 + 8].copy_from_slice(&w.to_be_bytes());
            }
            if n == 0 {
                return 0;
            }
            memchr::memmem::find(c.payload(), &pat[..n]).map_or(0, |i| i as u64 + 1)
        });
        r.register_aho_corasick("AhoCorasick", &STANDARD_PATTERNS)
            .expect("the standard patterns build an automaton");
        r.register_flow_counter("FlowCount", 256);
        r.register_top_k("TopK", 256, 8);
        r
    }

    /// Registers (or replaces) `name`.
    pub fn register<F>(
        &mut self,
        name: &str,
        in_words: usize,
        out_words: usize,
        f: F,
    ) -> &mut Registry
    where
        F: Fn(&mut ExternCall<'_>) -> u64 + Send + Sync + 'static,
    {
        self.map.insert(
            name.to_string(),
            ExternDef {
                in_words,
                out_words,
                func: Arc::new(f),
            },
        );
        self
    }

    /// Registers a multi-pattern search over the payload (leftmost-first Aho-Corasick): the
    /// output has one counter per pattern (non-overlapping matches are added); the function
    /// returns 1 + the index of the leftmost match, or 0.
    pub fn register_aho_corasick(
        &mut self,
        name: &str,
        patterns: &[&str],
    ) -> Result<&mut Registry, Error> {
        let ac = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .build(patterns)
            .map_err(|e| {
                Error::new(
                    ErrorKind::Invalid,
                    None,
                    format!("cannot build the automaton of `{name}`: {e}"),
                )
            })?;
        let n = patterns.len();
        self.register(name, 0, n, move |c| {
            let pkt = c.pkt;
            let payload = proto::payload(pkt);
            let mut first = 0;
            for m in ac.find_iter(payload) {
                let i = m.pattern().as_usize();
                if first == 0 {
                    first = i as u64 + 1;
                }
                if let Some(x) = c.output().get_mut(i) {
                    *x = x.wrapping_add(1);
                }
            }
            first
        });
        Ok(self)
    }

    /// Registers a single-pattern search over the payload: 1 + offset of the first match, or 0.
    pub fn register_pattern(&mut self, name: &str, pattern: &[u8]) -> &mut Registry {
        let finder = memchr::memmem::Finder::new(pattern).into_owned();
        self.register(name, 0, 0, move |c| {
            finder.find(c.payload()).map_or(0, |i| i as u64 + 1)
        })
    }

    /// Registers a per-flow packet counter over `words` output words (see the module docs).
    pub fn register_flow_counter(&mut self, name: &str, words: usize) -> &mut Registry {
        self.register(name, 0, words, move |c| {
            let Some(f) = proto::flow(c.pkt) else {
                return 0;
            };
            if words == 0 {
                return 0;
            }
            let h = flow_hash(&f) % words as u64;
            let out = c.output();
            out[h as usize] = out[h as usize].wrapping_add(1);
            out[h as usize]
        })
    }

    /// Registers a top-k over `in_words` input counters, writing `k` (index, count) pairs.
    pub fn register_top_k(&mut self, name: &str, in_words: usize, k: usize) -> &mut Registry {
        self.register(name, in_words, 2 * k, move |c| {
            let mut top: Vec<(u64, usize)> = Vec::with_capacity(k + 1);
            for (i, v) in c.input().iter().enumerate() {
                if *v == 0 || k == 0 {
                    continue;
                }
                let pos = top.partition_point(|(tv, ti)| {
                    (*tv, std::cmp::Reverse(*ti)) >= (*v, std::cmp::Reverse(i))
                });
                if pos < k {
                    top.insert(pos, (*v, i));
                    top.truncate(k);
                }
            }
            let out = c.output();
            out.fill(0);
            for (j, (v, i)) in top.iter().enumerate() {
                out[2 * j] = *i as u64;
                out[2 * j + 1] = *v;
            }
            top.len() as u64
        })
    }

    /// The definition of `name`.
    pub fn get(&self, name: &str) -> Option<&ExternDef> {
        self.map.get(name)
    }

    /// Registered names.
    pub fn names(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }
}

/// The 5-tuple hash `FlowCount` uses (FNV-1a over protocol, addresses and ports).
pub fn flow_hash(f: &proto::Flow<'_>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for x in b {
            h ^= u64::from(*x);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(&[f.proto]);
    eat(&f.src);
    eat(&f.dst);
    eat(&f.sport.to_be_bytes());
    eat(&f.dport.to_be_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_orders_by_count_then_index() {
        let r = Registry::standard();
        let f = &r.get("TopK").unwrap().func;
        let mut mem = vec![0u64; 256 + 16];
        mem[3] = 5;
        mem[7] = 9;
        mem[9] = 5;
        mem[200] = 1;
        let mut c = ExternCall::detached(&[], &mut mem, 0..256, 256..272);
        assert_eq!(f(&mut c), 4);
        assert_eq!(&mem[256..264], &[7, 9, 3, 5, 9, 5, 200, 1]);
    }
}
