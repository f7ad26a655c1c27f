//! HiTables in the kernel, the rig: ClassBench rule sets, converted to iptables and rewritten by
//! [`netsift_classify::hitables`], loaded into a network namespace of their own and fed trace
//! headers as real packets across a veth pair. The equivalence test
//! (`crates/testkit/tests/hitables_kernel.rs`) and the `hitables` suite of `netsift bench`
//! (the HiTables paper's Fig. 5b) are built on it.
//!
//! ```text
//! ClassBench rules ─compress─► rules on 198.18.0.0/15 ─from_classbench─► Ruleset ─rewrite─► Ruleset
//! trace headers ─Compressed::header─► headers ─frame─► Ethernet frames
//!
//! Kernel: load_iptables | load_nft  (prepared: marker rule first in INPUT, OUTPUT policy DROP)
//!         deliver: AF_PACKET on `a` ─► `b` ─► INPUT, chunk by chunk, each closed by a marker
//!         iptables_counts | nft_counts ─compare─ tally(decisions)  (the iptables evaluator)
//! ```
//!
//! # Addresses
//!
//! Only 198.18.0.0/15 (RFC 2544's benchmarking block) may appear in test packets, while the
//! ClassBench sets use the whole IPv4 space. [`compress`] maps each address field onto
//! 198.18.0.0 – 198.19.254.255 so that every rule matches the image of a header exactly when it
//! matches the header (see [`compress`] for the argument; the test also checks it on every trace
//! header with the linear engine). It keeps the rules' prefixes prefixes when the prefix tree
//! fits in 198.18.0.0/16 (`-s`/`-d` in iptables, as in the original sets), and falls back to
//! ranks — ranges, written with `-m iprange` — when it does not.
//!
//! # The namespace
//!
//! [`Kernel::new`] builds on [`crate::netns::Lab`]: the whole 198.18.0.0/15 is a `local` route
//! (so every destination is delivered to `INPUT`), `rp_filter` is off and `accept_local` on (the
//! sources are local addresses too), and the rule sets get `OUTPUT` policy `DROP` so that the
//! kernel's answers (TCP resets, ICMP unreachables to those local sources) never come back into
//! `INPUT` to be counted. Frames are sent with `AF_PACKET` on `a` from a thread pinned to one CPU
//! in chunks, each followed by a *marker* — a UDP datagram to 198.19.255.2 port 9 that a rule
//! put first in `INPUT` accepts and a socket receives: the receiving backlog is FIFO per CPU, so
//! when the marker arrives every frame before it has been through `INPUT`. That bounds the
//! backlog (no drops) and gives the time at which the last packet was classified.
//!
//! # Timing
//!
//! The sending thread does the receiving side's work too: a veth transmit queues the frame on
//! the current CPU's backlog, and the softirq that runs `INPUT` on it mostly runs as the send
//! call returns. So the time from the first frame to the last marker ([`Delivery::secs`]) is the
//! time to send and classify the frames, on one CPU. [`settle`] waits, after a rule set is
//! loaded, until the kernel has finished freeing the one before it.
//!
//! Every delivery's counters can be compared with the evaluator's prediction ([`compare`],
//! [`tally`] of the [`decisions`] for the frames [`Delivery::sent_indices`] lists): a rate only
//! means something when the kernel classified every frame as it should.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{Ipv4Addr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use netsift_capture::generate::FrameBuilder;
use netsift_capture::live::Sender;
use netsift_classify::iptables::{self, Evaluator, Packet, Policy, Ruleset};
use netsift_classify::{Field, Header, Range, Rule};

use crate::netns::Lab;

/// 198.18.0.0: the first address of the compressed space.
pub const BASE: u32 = 0xc612_0000;

/// Addresses the compressed space may use: 198.18.0.0 up to 198.19.254.255 (the last /24 of the
/// /15 holds the veth pair's own addresses, 198.19.255.0/30).
pub const SPAN: u32 = 0x1_ff00;

/// How [`compress`] mapped a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Prefixes stay prefixes (the prefix tree, packed into 198.18.0.0/16).
    Prefixes,
    /// Elementary intervals get consecutive addresses; rules get ranges.
    Ranks,
}

/// The map of one address field: every address to a compressed one, every rule range to the
/// compressed range.
#[derive(Clone, Debug)]
pub struct FieldMap {
    /// How the field was mapped.
    pub mode: Mode,
    /// Starts of the elementary intervals (`starts[0] == 0`), sorted.
    starts: Vec<u32>,
    /// The compressed address of each elementary interval.
    to: Vec<u32>,
    /// The rule ranges (not the full range) and their images.
    ranges: HashMap<Range, Range>,
}

impl FieldMap {
    /// The compressed address of `a`: in `BASE .. BASE + SPAN`.
    pub fn map(&self, a: u32) -> u32 {
        let k = self.starts.partition_point(|&s| s <= a) - 1;
        self.to[k]
    }

    /// The image of a range of a rule of the compressed set (the full range stays full);
    /// `None` for a range no rule had.
    pub fn map_range(&self, r: Range) -> Option<Range> {
        if r == Range::any(Field::SrcIp) {
            return Some(r);
        }
        self.ranges.get(&r).copied()
    }

    /// Distinct compressed addresses headers can get.
    pub fn addresses(&self) -> usize {
        let mut v = self.to.clone();
        v.sort_unstable();
        v.dedup();
        v.len()
    }
}

/// A rule set over compressed addresses, and the maps that take headers there.
#[derive(Clone, Debug)]
pub struct Compressed {
    /// The rules, in the same order, with address ranges mapped.
    pub rules: Vec<Rule>,
    /// The source address map.
    pub src: FieldMap,
    /// The destination address map.
    pub dst: FieldMap,
}

impl Compressed {
    /// The header with its addresses mapped (ports and protocol as they are).
    pub fn header(&self, h: &Header) -> Header {
        let [sa, da, sp, dp, proto] = h.0;
        Header([self.src.map(sa), self.dst.map(da), sp, dp, proto], 0)
    }
}

/// Maps the address fields of `rules` onto 198.18.0.0/15 (see the [module documentation](self)):
/// for every header `h` and rule `i`, `rules[i]` matches `h` if and only if `out.rules[i]`
/// matches `out.header(h)`, so every classifier gives the same answer for both.
///
/// Why, field by field (ports and protocol are unchanged; the full range stays the full range,
/// which holds every address of both sides). Take the cut points of the field: 0 and, for
/// every rule range `[lo, hi]`, `lo` and `hi + 1`. They split the addresses into *elementary
/// intervals*, and since both ends of every rule range are cut points, a rule range is a run of
/// whole elementary intervals: an address is in it exactly when its interval is.
///
/// - [`Mode::Ranks`]: interval `k` (in address order) maps to `BASE + k`, and a rule range made
///   of intervals `k1..=k2` to `[BASE + k1, BASE + k2]`. `k -> BASE + k` is strictly
///   increasing, so `a` is in `[lo, hi]` ⇔ `k1 <= k(a) <= k2` ⇔ `BASE + k(a)` is in the image.
/// - [`Mode::Prefixes`] (all rule ranges of the field are prefixes): prefixes are nested or
///   disjoint, so they form a tree under the whole space. Each node gets an aligned block of a
///   power-of-two size, its children's blocks packed inside it (largest first, so each stays
///   aligned: a prefix again), plus one *own* address when its children do not cover it. An
///   interval maps to the own address of the deepest prefix containing it, and a rule prefix to
///   its node's block. The prefixes containing `a` are the deepest one's ancestors; the block of
///   a node holds exactly the own addresses of its subtree (children's blocks are inside it,
///   others' are disjoint), so `a` is in rule prefix `P` ⇔ `P` is the deepest prefix containing
///   `a` or an ancestor of it ⇔ the image of `a` is in `P`'s block.
///
/// The error says when the field has too many intervals for [`SPAN`] (never for ClassBench 10K
/// sets: at most two cut points a rule).
pub fn compress(rules: &[Rule]) -> Result<Compressed, String> {
    let src = field_map(rules, Field::SrcIp)?;
    let dst = field_map(rules, Field::DstIp)?;
    let mut out = Vec::with_capacity(rules.len());
    for r in rules {
        let mut fields = r.fields;
        for (f, m) in [(Field::SrcIp, &src), (Field::DstIp, &dst)] {
            fields[f as usize] = m
                .map_range(r.range(f))
                .ok_or("internal error: a rule range has no image")?;
        }
        out.push(Rule {
            fields,
            flags: r.flags,
            line: r.line,
        });
    }
    Ok(Compressed {
        rules: out,
        src,
        dst,
    })
}

fn field_map(rules: &[Rule], f: Field) -> Result<FieldMap, String> {
    let full = Range::any(f);
    let mut ranges: Vec<Range> = rules
        .iter()
        .map(|r| r.range(f))
        .filter(|&r| r != full)
        .collect();
    ranges.sort_by_key(|r| (r.lo, std::cmp::Reverse(r.hi)));
    ranges.dedup();
    if ranges.iter().all(|&r| is_prefix(r))
        && let Some(m) = by_prefixes(&ranges)
    {
        return Ok(m);
    }
    by_ranks(&ranges, f)
}

/// Whether `r` is a prefix: a power-of-two size, aligned.
fn is_prefix(r: Range) -> bool {
    let size = u64::from(r.hi) - u64::from(r.lo) + 1;
    size.is_power_of_two() && u64::from(r.lo) % size == 0
}

/// The cut points of `ranges`: 0, every `lo` and every `hi + 1`, sorted.
fn cut_points(ranges: &[Range]) -> Vec<u32> {
    let mut v = vec![0];
    for r in ranges {
        v.push(r.lo);
        if let Some(next) = r.hi.checked_add(1) {
            v.push(next);
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

fn by_ranks(ranges: &[Range], f: Field) -> Result<FieldMap, String> {
    let starts = cut_points(ranges);
    if starts.len() > SPAN as usize {
        return Err(format!(
            "{f:?}: {} elementary intervals do not fit the {SPAN} addresses of 198.18.0.0/15",
            starts.len()
        ));
    }
    let to: Vec<u32> = (0..starts.len() as u32).map(|k| BASE + k).collect();
    let index = |a: u32| starts.partition_point(|&s| s <= a) - 1;
    let ranges = ranges
        .iter()
        .map(|&r| {
            (
                r,
                Range {
                    lo: to[index(r.lo)],
                    hi: to[index(r.hi)],
                },
            )
        })
        .collect();
    Ok(FieldMap {
        mode: Mode::Ranks,
        starts,
        to,
        ranges,
    })
}

/// The prefix-preserving map of `prefixes` (distinct, sorted by `lo` then largest first); `None`
/// when the packed tree needs more than 198.18.0.0/16.
fn by_prefixes(prefixes: &[Range]) -> Option<FieldMap> {
    let n = prefixes.len();
    let root = n;
    let size_of = |r: Range| u64::from(r.hi) - u64::from(r.lo) + 1;
    // The tree: in this order a node comes after its ancestors (preorder), and its parent is the
    // nearest earlier node that contains it.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    let mut stack: Vec<usize> = Vec::new();
    for (i, r) in prefixes.iter().enumerate() {
        while stack.last().is_some_and(|&t| prefixes[t].hi < r.hi) {
            stack.pop();
        }
        children[stack.last().copied().unwrap_or(root)].push(i);
        stack.push(i);
    }
    let orig = |i: usize| {
        if i == root {
            1u64 << 32
        } else {
            size_of(prefixes[i])
        }
    };
    // Block sizes, bottom-up (children have larger indices than their parent; the root last).
    let mut block = vec![0u64; n + 1];
    let mut own = vec![false; n + 1];
    for i in (0..n).rev().chain([root]) {
        let covered: u64 = children[i].iter().map(|&c| orig(c)).sum();
        own[i] = covered < orig(i);
        let need: u64 = children[i].iter().map(|&c| block[c]).sum::<u64>() + u64::from(own[i]);
        block[i] = need.next_power_of_two();
        if block[i] > 0x1_0000 {
            return None;
        }
    }
    // Offsets, top-down: children largest first, then the node's own address.
    let mut offset = vec![0u64; n + 1];
    let mut own_addr = vec![0u64; n + 1];
    let order = std::iter::once(root).chain(0..n);
    for i in order {
        let mut kids = children[i].clone();
        kids.sort_by_key(|&c| std::cmp::Reverse(block[c]));
        let mut at = offset[i];
        for c in kids {
            offset[c] = at;
            at += block[c];
        }
        own_addr[i] = at;
    }
    // Each elementary interval goes to the own address of the deepest prefix containing it.
    let starts = cut_points(prefixes);
    let mut to = Vec::with_capacity(starts.len());
    let mut open: Vec<usize> = Vec::new();
    let mut next = 0;
    for &x in &starts {
        while open.last().is_some_and(|&t| prefixes[t].hi < x) {
            open.pop();
        }
        while next < n && prefixes[next].lo == x {
            open.push(next);
            next += 1;
        }
        let deepest = open.last().copied().unwrap_or(root);
        // The deepest prefix has an own address: its children do not contain `x`.
        debug_assert!(own[deepest]);
        to.push(BASE + own_addr[deepest] as u32);
    }
    let ranges = prefixes
        .iter()
        .enumerate()
        .map(|(i, &r)| {
            let lo = BASE + offset[i] as u32;
            (
                r,
                Range {
                    lo,
                    hi: lo + (block[i] - 1) as u32,
                },
            )
        })
        .collect();
    Some(FieldMap {
        mode: Mode::Prefixes,
        starts,
        to,
        ranges,
    })
}

/// TCP flags of the test frames: ACK (a segment of an established connection; no rule of the
/// ClassBench sets looks at flags).
pub const TCP_FLAGS: u8 = 0x10;

/// The Ethernet frame for header `h`: IPv4 from `h`'s source to its destination with `h`'s
/// protocol; TCP (flags [`TCP_FLAGS`]) or UDP with `h`'s ports, 8 zero bytes of payload for
/// other protocols; padded to 60 bytes.
pub fn frame(h: &Header, src_mac: [u8; 6], dst_mac: [u8; 6]) -> Vec<u8> {
    let [sa, da, sp, dp, proto] = h.0;
    let b = FrameBuilder::new()
        .src_mac(src_mac)
        .dst_mac(dst_mac)
        .ipv4(sa.to_be_bytes(), da.to_be_bytes());
    let (sp, dp) = (sp.min(0xffff) as u16, dp.min(0xffff) as u16);
    let b = match proto {
        6 => b.tcp(sp, dp, TCP_FLAGS),
        17 => b.udp(sp, dp),
        p => b.ip_protocol(p.min(0xff) as u8).payload(&[0; 8]),
    };
    b.pad_to(60).build()
}

/// Packet counts of a rule set's rules, by comment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Packets counted on rules with each comment, summed over the rules carrying it (the
    /// rewritten set has copies of a rule in several leaves). Comments with no packet may be
    /// missing.
    pub by_comment: BTreeMap<String, u64>,
    /// The packets the `INPUT` policy decided, when known (`nft` base chains have no policy
    /// counter).
    pub policy: Option<u64>,
}

impl Counts {
    /// The packets counted for `comment`.
    pub fn get(&self, comment: &str) -> u64 {
        self.by_comment.get(comment).copied().unwrap_or(0)
    }

    /// The same counts without zeros and without the comments `skip` names (the marker).
    pub fn nonzero_without(&self, skip: &[&str]) -> BTreeMap<String, u64> {
        self.by_comment
            .iter()
            .filter(|(c, n)| **n > 0 && !skip.contains(&c.as_str()))
            .map(|(c, n)| (c.clone(), *n))
            .collect()
    }

    /// Packets on rules with comments other than `skip`, plus the policy's.
    pub fn total_without(&self, skip: &[&str]) -> u64 {
        self.nonzero_without(skip).values().sum::<u64>() + self.policy.unwrap_or(0)
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &Counts) {
        for (c, n) in &other.by_comment {
            self.add(c, *n);
        }
        if let Some(p) = other.policy {
            *self.policy.get_or_insert(0) += p;
        }
    }

    fn add(&mut self, comment: &str, n: u64) {
        *self.by_comment.entry(comment.to_string()).or_default() += n;
    }
}

/// What the iptables evaluator decides for each of `headers` on chain `chain` of `rs`: the
/// comment of the deciding rule, or `None` for the policy. A rule without a comment that decides
/// is an error (the kernel's counters could not be compared by comment).
pub fn decisions(
    rs: &Ruleset,
    chain: &str,
    headers: &[Header],
) -> Result<Vec<Option<String>>, String> {
    let ev = Evaluator::new(rs).map_err(|e| e.to_string())?;
    headers
        .iter()
        .map(|h| {
            let e = ev
                .evaluate(chain, &Packet::new(*h))
                .map_err(|e| format!("{h}: {e}"))?;
            let Some(s) = e.decided_by else {
                return Ok(None);
            };
            let r = &rs.chains[s.chain].rules[s.rule];
            match r.comments().next() {
                Some(c) => Ok(Some(c.to_string())),
                None => Err(format!("{h}: decided by `{r}`, which has no comment")),
            }
        })
        .collect()
}

/// The counts of the headers `indices` (into `decisions`) select, each as often as listed.
pub fn tally(decisions: &[Option<String>], indices: impl IntoIterator<Item = usize>) -> Counts {
    let mut c = Counts {
        policy: Some(0),
        ..Counts::default()
    };
    for i in indices {
        match &decisions[i] {
            None => *c.policy.get_or_insert(0) += 1,
            Some(comment) => c.add(comment, 1),
        }
    }
    c
}

/// What the iptables evaluator predicts for `headers` on chain `chain` of `rs`, once each:
/// [`tally`] of all the [`decisions`].
pub fn expected(rs: &Ruleset, chain: &str, headers: &[Header]) -> Result<Counts, String> {
    Ok(tally(&decisions(rs, chain, headers)?, 0..headers.len()))
}

/// Per-comment packet counts from `iptables-save -c` output: every rule's `[packets:bytes]`
/// added to its comment (rules without one are left out), and the policy counter of `chain`.
pub fn counts_from_iptables_save(text: &str, chain: &str) -> Result<Counts, String> {
    let rs = iptables::parse(text).map_err(|e| format!("iptables-save -c: {}", e.snippet(text)))?;
    let mut c = Counts::default();
    for ch in &rs.chains {
        if ch.name == chain {
            c.policy = Some(ch.counters.packets);
        }
        for r in &ch.rules {
            if let Some(comment) = r.comments().next() {
                c.add(comment, r.counters.map_or(0, |k| k.packets));
            }
        }
    }
    Ok(c)
}

/// Per-comment packet counts from `nft list ruleset` output: on each rule line, the number after
/// `counter packets` added to the rule's `comment "…"`. Policies have no counters there
/// ([`Counts::policy`] is `None`).
pub fn counts_from_nft_list(text: &str) -> Result<Counts, String> {
    let mut c = Counts::default();
    for (i, line) in text.lines().enumerate() {
        let Some(at) = line.find("counter packets ") else {
            continue;
        };
        let rest = &line[at + "counter packets ".len()..];
        let n: u64 = rest
            .split_whitespace()
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| format!("nft list, line {}: bad counter: {line}", i + 1))?;
        let Some(at) = line.find("comment \"") else {
            continue;
        };
        let rest = &line[at + "comment \"".len()..];
        let end = rest
            .find('"')
            .ok_or_else(|| format!("nft list, line {}: unterminated comment: {line}", i + 1))?;
        c.add(&rest[..end], n);
    }
    Ok(c)
}

/// The comment of the marker rule.
pub const MARKER_COMMENT: &str = "nsift-marker";

/// The marker's destination: `b`'s own address, UDP port 9.
const MARKER_DST: [u8; 4] = [198, 19, 255, 2];
const MARKER_SRC: [u8; 4] = [198, 19, 255, 1];
const MARKER_PORT: u16 = 9;

/// `rs` with the `INPUT` chain first accepting the markers, and `OUTPUT` dropping everything
/// (the kernel's resets and ICMP errors to the test's local source addresses would otherwise
/// come back into `INPUT`).
pub fn prepared(rs: &Ruleset) -> Ruleset {
    let mut rs = rs.clone();
    let marker = iptables::parse(&format!(
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -d {}/32 -p udp -m udp --dport {MARKER_PORT} -m comment --comment {MARKER_COMMENT} -j ACCEPT\nCOMMIT\n",
        Ipv4Addr::from(MARKER_DST)
    ))
    .expect("the marker rule parses")
    .chains[0]
        .rules[0]
        .clone();
    for c in &mut rs.chains {
        match c.name.as_str() {
            "INPUT" => c.rules.insert(0, marker.clone()),
            "OUTPUT" => c.policy = Some(Policy::Drop),
            _ => {}
        }
    }
    rs
}

/// The tools [`Kernel`] needs, checked: root, `iptables` with the nf_tables backend,
/// `iptables-restore`, `iptables-save`, `nft`. Returns `iptables -V`; the error says what is
/// missing and how to get it.
pub fn check_tools() -> Result<String, String> {
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root (network namespaces, iptables, nft)".into());
    }
    let run = |tool: &str, arg: &str| -> Result<String, String> {
        let out = Command::new(tool).arg(arg).output().map_err(|e| {
            format!(
                "`{tool}` cannot run ({e}): install the iptables and nftables packages \
                 (`apt-get install iptables nftables`; scripts/test does)"
            )
        })?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr))
    };
    let version = run("iptables", "-V")?;
    if !version.contains("nf_tables") {
        return Err(format!(
            "`iptables -V` says `{}`: the nf_tables backend is needed \
             (`update-alternatives --set iptables /usr/sbin/iptables-nft`)",
            version.trim()
        ));
    }
    for tool in ["iptables-restore", "iptables-save", "nft"] {
        run(tool, "--version")?;
    }
    Ok(version.trim().to_string())
}

/// How [`Kernel::deliver`] sends.
#[derive(Clone, Copy, Debug)]
pub struct DeliverOptions {
    /// Frames per chunk (each followed by a marker and a wait for it); below the backlog's
    /// 1,000 so that nothing is dropped.
    pub chunk: usize,
    /// Send whole passes over the frames until this much time has passed (zero: one pass).
    pub min_time: Duration,
    /// Stop, even within a pass, when this much time has passed.
    pub max_time: Duration,
    /// Send one chunk before the timed part (not counted).
    pub warm_up: bool,
}

impl Default for DeliverOptions {
    fn default() -> DeliverOptions {
        DeliverOptions {
            chunk: 256,
            min_time: Duration::ZERO,
            max_time: Duration::from_secs(60),
            warm_up: false,
        }
    }
}

/// What [`Kernel::deliver`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Delivery {
    /// Frames sent and classified in the timed part (markers not included).
    pub frames: u64,
    /// Frames sent before it, to warm up: the first chunk.
    pub warm_up_frames: u64,
    /// Markers sent (one a chunk, the warm-up's included).
    pub markers: u64,
    /// Whole passes over the frames.
    pub passes: u64,
    /// Seconds from the first frame of the timed part to the arrival of its last marker.
    pub secs: f64,
    /// Whether every pass was whole (false: [`DeliverOptions::max_time`] cut one).
    pub complete: bool,
}

impl Delivery {
    /// The index of every frame sent, in order, warm-up included, for a delivery of `n` frames
    /// (each pass starts at the first).
    pub fn sent_indices(&self, n: usize) -> impl Iterator<Item = usize> {
        (0..self.warm_up_frames as usize).chain((0..self.frames as usize).map(move |i| i % n))
    }

    /// Frames per second.
    pub fn pps(&self) -> f64 {
        self.frames as f64 / self.secs.max(1e-9)
    }
}

/// A namespace set up for rule sets in `INPUT` (see the [module documentation](self)).
pub struct Kernel {
    /// The namespace and its veth pair (deleted on drop).
    pub lab: Lab,
    /// The MAC address of `a`.
    pub a_mac: [u8; 6],
    /// The MAC address of `b`.
    pub b_mac: [u8; 6],
}

impl Kernel {
    /// Checks the tools ([`check_tools`]) and sets up a namespace.
    pub fn new() -> Result<Kernel, String> {
        check_tools()?;
        let lab = Lab::new()?;
        lab.ip(&["link", "set", "lo", "up"])?;
        lab.ip(&[
            "route",
            "add",
            "local",
            "198.18.0.0/15",
            "dev",
            "lo",
            "table",
            "local",
        ])?;
        let b = lab.b.clone();
        lab.run(|| -> Result<(), String> {
            for dev in ["all", "default", "lo", b.as_str()] {
                for (key, v) in [("rp_filter", "0"), ("accept_local", "1")] {
                    let p = format!("/proc/sys/net/ipv4/conf/{dev}/{key}");
                    std::fs::write(&p, v).map_err(|e| format!("{p}: {e}"))?;
                }
            }
            Ok(())
        })?;
        let a_mac = mac(&lab, &lab.a)?;
        let b_mac = mac(&lab, &lab.b)?;
        Ok(Kernel { lab, a_mac, b_mac })
    }

    fn pipe(&self, program: &str, args: &[&str], input: &str) -> Result<String, String> {
        let mut child = self
            .lab
            .command(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A tool that fails early closes its input: its status says why.
            let _ = stdin.write_all(input.as_bytes());
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("{program}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`{program} {}` failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Removes every table (`nft flush ruleset`).
    pub fn flush(&self) -> Result<(), String> {
        self.pipe("nft", &["flush", "ruleset"], "").map(drop)
    }

    /// Loads [`prepared`]`(rs)` (its filter table) with `iptables-restore`, after removing every
    /// table with [`Kernel::flush`].
    pub fn load_iptables(&self, rs: &Ruleset) -> Result<(), String> {
        self.flush()?;
        self.pipe("iptables-restore", &[], &prepared(rs).to_restore())
            .map(drop)
    }

    /// Loads [`prepared`]`(rs)` with `nft -f` into an empty ruleset.
    pub fn load_nft(&self, rs: &Ruleset) -> Result<(), String> {
        let text = prepared(rs)
            .to_nft()
            .map_err(|e| format!("no nft translation: {e}"))?;
        self.flush()?;
        self.pipe("nft", &["-f", "-"], &text).map(drop)
    }

    /// The counters of the filter table, from `iptables-save -c`.
    pub fn iptables_counts(&self) -> Result<Counts, String> {
        let text = self.pipe("iptables-save", &["-c", "-t", "filter"], "")?;
        counts_from_iptables_save(&text, "INPUT")
    }

    /// The counters of every rule, from `nft list ruleset`.
    pub fn nft_counts(&self) -> Result<Counts, String> {
        counts_from_nft_list(&self.pipe("nft", &["list", "ruleset"], "")?)
    }

    /// `(rx_packets, rx_dropped)` of `b` and `tx_dropped` of `a`.
    pub fn link_counters(&self) -> Result<[u64; 3], String> {
        let b = self.lab.counters(&self.lab.b)?;
        let a = self.lab.counters(&self.lab.a)?;
        Ok([b[0], b[1], a[3]])
    }

    /// Sends `frames` on `a` in chunks, each followed by a marker that the sender waits for
    /// (see the [module documentation](self)), from a thread pinned to the last CPU.
    pub fn deliver(&self, frames: &[Vec<u8>], opts: &DeliverOptions) -> Result<Delivery, String> {
        if frames.is_empty() {
            return Err("no frames to send".into());
        }
        let a = self.lab.a.clone();
        let marker = |seq: u64| {
            FrameBuilder::new()
                .src_mac(self.a_mac)
                .dst_mac(self.b_mac)
                .ipv4(MARKER_SRC, MARKER_DST)
                .udp(MARKER_PORT, MARKER_PORT)
                .payload(&seq.to_be_bytes())
                .pad_to(60)
                .build()
        };
        let chunk = opts.chunk.clamp(1, 900);
        self.lab.run(|| -> Result<Delivery, String> {
            pin_to_last_cpu()?;
            let sock = UdpSocket::bind((Ipv4Addr::from(MARKER_DST), MARKER_PORT))
                .map_err(|e| format!("marker socket: {e}"))?;
            sock.set_read_timeout(Some(Duration::from_secs(20)))
                .map_err(|e| e.to_string())?;
            let mut tx = Sender::open(&a).map_err(|e| e.to_string())?;
            let mut seq = 0u64;
            let mut round = |frames: &[Vec<u8>]| -> Result<(), String> {
                let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                tx.send_all(&refs).map_err(|e| e.to_string())?;
                seq += 1;
                tx.send_all(&[&marker(seq)]).map_err(|e| e.to_string())?;
                let mut buf = [0u8; 64];
                loop {
                    let n = sock.recv(&mut buf).map_err(|e| {
                        format!(
                            "marker {seq} did not arrive ({e}): the frames before it were not all \
                             processed"
                        )
                    })?;
                    if n == 8 && u64::from_be_bytes(buf[..8].try_into().unwrap()) == seq {
                        return Ok(());
                    }
                }
            };
            let warm_up = if opts.warm_up {
                chunk.min(frames.len())
            } else {
                0
            };
            if warm_up > 0 {
                round(&frames[..warm_up])?;
            }
            let t0 = Instant::now();
            let (mut sent, mut passes, mut complete) = (0u64, 0u64, true);
            'passes: loop {
                let chunks = frames.chunks(chunk);
                let last = chunks.len() - 1;
                for (i, c) in chunks.enumerate() {
                    round(c)?;
                    sent += c.len() as u64;
                    if i != last && t0.elapsed() > opts.max_time {
                        complete = false;
                        break 'passes;
                    }
                }
                passes += 1;
                if t0.elapsed() >= opts.min_time || t0.elapsed() > opts.max_time {
                    break;
                }
            }
            Ok(Delivery {
                frames: sent,
                warm_up_frames: warm_up as u64,
                markers: seq,
                passes,
                secs: t0.elapsed().as_secs_f64(),
                complete,
            })
        })
    }
}

/// Compares counts read from the kernel with the prediction: the marker rule counted
/// `markers`, every comment (the marker's aside) counted as predicted, and so did the policy —
/// when the loader has no policy counter (nft), the policy's packets are the `delivered` frames
/// that no rule counted. The error lists the differences.
pub fn compare(got: &Counts, want: &Counts, delivered: u64, markers: u64) -> Result<(), String> {
    let mut diff = Vec::new();
    if got.get(MARKER_COMMENT) != markers {
        diff.push(format!(
            "the marker rule counted {} of {markers} markers",
            got.get(MARKER_COMMENT)
        ));
    }
    let (g, w) = (
        got.nonzero_without(&[MARKER_COMMENT]),
        want.nonzero_without(&[MARKER_COMMENT]),
    );
    let mut keys: Vec<&String> = g.keys().chain(w.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut wrong = 0;
    for c in keys {
        let (a, b) = (
            g.get(c).copied().unwrap_or(0),
            w.get(c).copied().unwrap_or(0),
        );
        if a != b {
            wrong += 1;
            if wrong <= 20 {
                diff.push(format!("{c}: kernel {a}, evaluator {b}"));
            }
        }
    }
    if wrong > 20 {
        diff.push(format!("… {} comments differ in all", wrong));
    }
    let policy = got
        .policy
        .unwrap_or_else(|| delivered.saturating_sub(g.values().sum::<u64>()));
    if Some(policy) != want.policy {
        diff.push(format!(
            "the policy: kernel {policy}, evaluator {}",
            want.policy.unwrap_or(0)
        ));
    }
    if diff.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the kernel's counters differ from the prediction ({} comments expected):\n{}",
            w.len(),
            diff.join("\n")
        ))
    }
}

/// Busy and total CPU time of the machine so far, in ticks (`/proc/stat`).
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let v: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|w| w.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Waits until the machine is idle — under 5% busy over 250 ms — or `max` has passed, and
/// returns the time waited. Loading a rule set frees the one before it in a kernel work queue,
/// and deleting a namespace tears it down in one: tens of thousands of rules take a second or
/// two of a CPU, which would otherwise be measured with the next rule set.
pub fn settle(max: Duration) -> Duration {
    let t0 = Instant::now();
    let Some(mut last) = cpu_ticks() else {
        std::thread::sleep(max.min(Duration::from_secs(2)));
        return t0.elapsed();
    };
    while t0.elapsed() < max {
        std::thread::sleep(Duration::from_millis(250));
        let Some(now) = cpu_ticks() else { break };
        let (busy, total) = (now.0 - last.0, now.1 - last.1);
        last = now;
        if total > 0 && busy * 20 < total {
            break;
        }
    }
    t0.elapsed()
}

/// The MAC address of `dev` in the lab's namespace.
fn mac(lab: &Lab, dev: &str) -> Result<[u8; 6], String> {
    let out = lab.ip(&["link", "show", "dev", dev])?;
    let word = out
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .ok_or_else(|| format!("no link/ether in `ip link show {dev}`: {out}"))?;
    let mut m = [0u8; 6];
    let parts: Vec<&str> = word.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC address {word}"));
    }
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC address {word}"))?;
    }
    Ok(m)
}

/// Pins the calling thread to the machine's last CPU, so that every frame it sends is queued
/// on that CPU's backlog, in order.
fn pin_to_last_cpu() -> Result<(), String> {
    // SAFETY: cpu_set_t is plain old data; sched_getaffinity/setaffinity get its size and
    // affect the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(format!(
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
        let last = (0..libc::CPU_SETSIZE as usize)
            .rev()
            .find(|&c| libc::CPU_ISSET(c, &set))
            .ok_or("no CPU in the affinity mask")?;
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(last, &mut one);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) != 0 {
            return Err(format!(
                "sched_setaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// A short human description of a compression (modes and address counts).
pub fn describe(c: &Compressed) -> String {
    let mut s = String::new();
    for (name, m) in [("src", &c.src), ("dst", &c.dst)] {
        let _ = write!(
            s,
            "{}{name} {:?} ({} addresses)",
            if s.is_empty() { "" } else { ", " },
            m.mode,
            m.addresses()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsift_classify::Classifier;
    use netsift_classify::iptables::{ConvertOptions, Protocols, from_classbench};
    use netsift_classify::linear::Linear;

    /// xorshift64*.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// An address range: a prefix (nested ones likely: the addresses share a few /8s) or, with
    /// `ranges`, sometimes any range.
    fn address(rng: &mut Rng, ranges: bool) -> Range {
        let base = [10u32, 44, 172, 192, 198][rng.below(5) as usize] << 24
            | (rng.below(4) as u32) << 16
            | (rng.below(1 << 16) as u32);
        if ranges && rng.below(3) == 0 {
            let lo = base & !0xfff;
            return Range {
                lo,
                hi: lo + rng.below(1 << 20) as u32,
            };
        }
        let len = [0u8, 8, 12, 16, 20, 24, 28, 30, 32][rng.below(9) as usize];
        Range::prefix(base, len)
    }

    fn random_rules(rng: &mut Rng, n: usize, ranges: bool) -> Vec<Rule> {
        (0..n)
            .map(|i| {
                let port = |rng: &mut Rng| {
                    if rng.below(2) == 0 {
                        Range { lo: 0, hi: 0xffff }
                    } else {
                        let lo = rng.below(2000) as u32;
                        Range {
                            lo,
                            hi: lo + rng.below(100) as u32,
                        }
                    }
                };
                let proto = match rng.below(3) {
                    0 => Range { lo: 0, hi: 0xff },
                    1 => Range { lo: 6, hi: 6 },
                    _ => Range { lo: 17, hi: 17 },
                };
                Rule {
                    fields: [
                        address(rng, ranges),
                        address(rng, ranges),
                        port(rng),
                        port(rng),
                        proto,
                    ],
                    flags: netsift_classify::Flags::ANY,
                    line: i + 1,
                }
            })
            .collect()
    }

    /// Headers at and around every rule boundary, and random ones.
    fn headers(rng: &mut Rng, rules: &[Rule]) -> Vec<Header> {
        let mut v = Vec::new();
        let pick = |rng: &mut Rng, f: Field| {
            let r = rules[rng.below(rules.len() as u64) as usize].range(f);
            match rng.below(5) {
                0 => r.lo,
                1 => r.hi,
                2 => r.lo.wrapping_sub(1),
                3 => r.hi.wrapping_add(1),
                _ => {
                    r.lo.wrapping_add(rng.below(u64::from(r.hi - r.lo) + 1) as u32)
                }
            }
        };
        for _ in 0..4000 {
            let proto = [6, 17, 1][rng.below(3) as usize];
            v.push(Header(
                [
                    pick(rng, Field::SrcIp),
                    pick(rng, Field::DstIp),
                    pick(rng, Field::SrcPort) & 0xffff,
                    pick(rng, Field::DstPort) & 0xffff,
                    proto,
                ],
                0,
            ));
        }
        for _ in 0..500 {
            v.push(Header(
                [
                    rng.next() as u32,
                    rng.next() as u32,
                    rng.below(2100) as u32,
                    rng.below(2100) as u32,
                    6,
                ],
                0,
            ));
        }
        v
    }

    /// Every rule matches a header exactly when its image matches the header's image, the
    /// images stay in the compressed space, and the linear engine agrees.
    fn check(rules: &[Rule], hs: &[Header], mode: Mode) {
        let c = compress(rules).unwrap();
        assert_eq!((c.src.mode, c.dst.mode), (mode, mode));
        let space = BASE..BASE + SPAN;
        for r in &c.rules {
            for f in [Field::SrcIp, Field::DstIp] {
                let x = r.range(f);
                assert!(x == Range::any(f) || (space.contains(&x.lo) && space.contains(&x.hi)));
                if mode == Mode::Prefixes {
                    assert!(is_prefix(x), "{x:?}");
                }
            }
        }
        let (a, b) = (Linear::new(rules), Linear::new(&c.rules));
        for h in hs {
            let m = c.header(h);
            assert!(space.contains(&m.0[0]) && space.contains(&m.0[1]));
            for (r, s) in rules.iter().zip(&c.rules) {
                assert_eq!(r.matches(h), s.matches(&m), "{h} / {m}: {r:?} -> {s:?}");
            }
            assert_eq!(a.classify(h), b.classify(&m));
        }
    }

    #[test]
    fn compression_keeps_every_match() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..20 {
            let prefixes = round % 2 == 0;
            let rules = random_rules(&mut rng, 30 + round * 10, !prefixes);
            let hs = headers(&mut rng, &rules);
            let ranged = rules.iter().any(|r| {
                [Field::SrcIp, Field::DstIp]
                    .iter()
                    .any(|&f| !is_prefix(r.range(f)))
            });
            let mode = if ranged { Mode::Ranks } else { Mode::Prefixes };
            check(&rules, &hs, mode);
        }
    }

    #[test]
    fn a_deep_prefix_tree_falls_back_to_ranks() {
        // 0/1 ⊃ 0/2 ⊃ … ⊃ 0/20, each with addresses of its own: the packed blocks double at
        // every level, 2^20 addresses in all.
        let rules: Vec<Rule> = (1..=20)
            .map(|len| {
                let mut fields = Field::ALL.map(Range::any);
                fields[0] = Range::prefix(0, len);
                fields[1] = Range::prefix(0x0a00_0000, len / 2);
                Rule {
                    fields,
                    flags: netsift_classify::Flags::ANY,
                    line: 1,
                }
            })
            .collect();
        let mut rng = Rng(7);
        let hs = headers(&mut rng, &rules);
        let c = compress(&rules).unwrap();
        assert_eq!((c.src.mode, c.dst.mode), (Mode::Ranks, Mode::Prefixes));
        // Ranks: 21 intervals (0 and each prefix's end), the deepest first.
        assert_eq!(c.src.addresses(), 21);
        assert_eq!(c.rules[19].fields[0], Range { lo: BASE, hi: BASE });
        assert_eq!(
            c.rules[0].fields[0],
            Range {
                lo: BASE,
                hi: BASE + 19
            }
        );
        for h in &hs {
            let m = c.header(h);
            for (r, s) in rules.iter().zip(&c.rules) {
                assert_eq!(r.matches(h), s.matches(&m));
            }
        }
    }

    #[test]
    fn prefixes_pack_children_largest_first() {
        let mut fields = Field::ALL.map(Range::any);
        let mut rules = Vec::new();
        for (a, len) in [
            (0x0a00_0000, 8),
            (0x0a01_0000, 16),
            (0x0a02_0000, 16),
            (0x0b00_0000, 8),
        ] {
            fields[0] = Range::prefix(a, len);
            rules.push(Rule {
                fields,
                flags: netsift_classify::Flags::ANY,
                line: 1,
            });
        }
        let c = compress(&rules).unwrap();
        // 10/8 holds two /16 (one address each) and addresses of its own: a block of 4; 11/8
        // one address; the root's own addresses one more: 4 + 1 + 1 -> 8 addresses.
        let at = |i: usize| c.rules[i].fields[0];
        assert_eq!(at(0), Range::prefix(BASE, 30));
        assert_eq!(at(1), Range::prefix(BASE, 32));
        assert_eq!(at(2), Range::prefix(BASE + 1, 32));
        assert_eq!(at(3), Range::prefix(BASE + 4, 32));
        assert_eq!(c.src.map(0x0a01_0203), BASE);
        assert_eq!(c.src.map(0x0a05_0000), BASE + 2);
        assert_eq!(c.src.map(0x0b00_0001), BASE + 4);
        assert_eq!(c.src.map(0x0c00_0000), BASE + 5);
        assert_eq!(c.src.map(0), BASE + 5);
        // The destination had no rule ranges: one interval.
        assert_eq!(c.dst.map(0x1234_5678), BASE);
    }

    #[test]
    fn too_many_intervals_is_an_error() {
        let mut fields = Field::ALL.map(Range::any);
        let rules: Vec<Rule> = (0..70_000u32)
            .map(|i| {
                fields[1] = Range::prefix(i * 2, 32);
                Rule {
                    fields,
                    flags: netsift_classify::Flags::ANY,
                    line: 1,
                }
            })
            .collect();
        match compress(&rules) {
            Err(e) => assert!(
                e == "DstIp: 140000 elementary intervals do not fit the 130816 addresses of 198.18.0.0/15",
                "{e}"
            ),
            Ok(c) => panic!("compressed: {}", describe(&c)),
        }
    }

    #[test]
    fn frames_carry_the_header() {
        let (s, d) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let h = Header([BASE + 5, BASE + 0x1_0203, 1234, 80, 6], 0);
        let f = frame(&h, s, d);
        assert_eq!(&f[..12], &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
        assert_eq!(&f[12..14], &[8, 0]);
        assert_eq!(f[14 + 9], 6);
        assert_eq!(&f[26..30], &[198, 18, 0, 5]);
        assert_eq!(&f[30..34], &[198, 19, 2, 3]);
        assert_eq!(&f[34..38], &[0x04, 0xd2, 0, 80]);
        assert_eq!(f[34 + 13], TCP_FLAGS);
        let u = frame(&Header([BASE, BASE, 53, 5353, 17], 0), s, d);
        assert_eq!((u[14 + 9], &u[34..38]), (17, &[0, 53, 0x14, 0xe9][..]));
        let g = frame(&Header([BASE, BASE, 0, 0, 47], 0), s, d);
        assert_eq!((g[14 + 9], g.len()), (47, 60));
        assert_eq!(u16::from_be_bytes([g[16], g[17]]), 28);
    }

    #[test]
    fn counts_from_iptables_save_sum_copies_and_read_the_policy() {
        let text = "# Generated by iptables-save v1.8.9 (nf_tables)\n*filter\n\
            :INPUT DROP [7:420]\n:FORWARD ACCEPT [0:0]\n:OUTPUT DROP [3:180]\n:ht0_1 - [0:0]\n\
            [12:720] -A INPUT -d 198.19.255.2/32 -p udp -m udp --dport 9 -m comment --comment nsift-marker -j ACCEPT\n\
            [5:300] -A INPUT -s 198.18.0.0/20 -p tcp -m tcp --dport 80:90 -m comment --comment cb1 -j DROP\n\
            [40:2400] -A INPUT -s 198.18.0.0/20 -g ht0_1\n\
            [0:0] -A INPUT -m comment --comment cb3 -j ACCEPT\n\
            [2:120] -A ht0_1 -m iprange --src-range 198.18.0.0-198.18.0.9 -m comment --comment cb1 -j DROP\n\
            [38:2280] -A ht0_1 -m comment --comment \"cb2\" -j ACCEPT\n\
            COMMIT\n# Completed\n";
        let c = counts_from_iptables_save(text, "INPUT").unwrap();
        assert_eq!(c.policy, Some(7));
        assert_eq!(
            c.by_comment,
            BTreeMap::from([
                ("cb1".to_string(), 7),
                ("cb2".to_string(), 38),
                ("cb3".to_string(), 0),
                (MARKER_COMMENT.to_string(), 12),
            ])
        );
        assert_eq!(c.get("cb9"), 0);
        assert_eq!(c.nonzero_without(&[MARKER_COMMENT]).len(), 2);
        assert_eq!(c.total_without(&[MARKER_COMMENT]), 52);
        let e = counts_from_iptables_save("*filter\n-A NOPE -j ACCEPT\n", "INPUT").unwrap_err();
        assert!(e.starts_with("iptables-save -c: "), "{e}");
    }

    #[test]
    fn counts_from_nft_list_by_comment() {
        let text = "table ip filter {\n\tchain INPUT {\n\
            \t\ttype filter hook input priority filter; policy drop;\n\
            \t\tip daddr 198.19.255.2 udp dport 9 counter packets 12 bytes 720 accept comment \"nsift-marker\"\n\
            \t\tip saddr 198.18.0.0/20 tcp dport 80-90 counter packets 5 bytes 300 drop comment \"cb1\"\n\
            \t\tip saddr 198.18.0.0/20 counter packets 40 bytes 2400 goto ht0_1\n\
            \t}\n\n\tchain ht0_1 {\n\
            \t\tip saddr 198.18.0.0-198.18.0.9 counter packets 2 bytes 120 drop comment \"cb1\"\n\
            \t\tcounter packets 38 bytes 2280 accept comment \"cb2\"\n\
            \t}\n}\n";
        let c = counts_from_nft_list(text).unwrap();
        assert_eq!(c.policy, None);
        assert_eq!(
            c.by_comment,
            BTreeMap::from([
                ("cb1".to_string(), 7),
                ("cb2".to_string(), 38),
                (MARKER_COMMENT.to_string(), 12),
            ])
        );
        let e = counts_from_nft_list("\t\tcounter packets x bytes 0 accept\n").unwrap_err();
        assert_eq!(
            e,
            "nft list, line 1: bad counter: \t\tcounter packets x bytes 0 accept"
        );
    }

    #[test]
    fn prepared_sets_have_the_marker_first_and_drop_output() {
        let rules = netsift_classify::classbench::parse_rules(
            "@198.18.0.0/16 0.0.0.0/0 0 : 65535 80 : 80 0x06/0xFF\n",
        )
        .unwrap();
        let opts = ConvertOptions {
            chain: "INPUT".into(),
            policy: Policy::Accept,
            transformable_protocols: Protocols::tcp_udp(),
        };
        let rs = from_classbench(&rules, &opts).ruleset;
        let text = prepared(&rs).to_restore();
        assert!(text.contains(":OUTPUT DROP"), "{text}");
        let input: Vec<&str> = text.lines().filter(|l| l.starts_with("-A INPUT")).collect();
        assert_eq!(input.len(), 2);
        assert_eq!(
            input[0],
            "-A INPUT -d 198.19.255.2/32 -p udp -m udp --dport 9 -m comment --comment nsift-marker -j ACCEPT"
        );
        assert!(input[1].contains("--comment cb1"));
        // The prediction: per comment of the deciding rule, and the policy.
        let hs = [
            Header([BASE + 1, BASE, 1000, 80, 6], 0),
            Header([BASE + 1, BASE, 1000, 81, 6], 0),
            Header([BASE + 2, BASE, 9, 80, 6], 0),
        ];
        let want = expected(&rs, "INPUT", &hs).unwrap();
        assert_eq!(want.by_comment, BTreeMap::from([("cb1".to_string(), 2)]));
        assert_eq!(want.policy, Some(1));
    }
}
