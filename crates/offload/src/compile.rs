//! The filter compiler: a capture filter ([`Pred`]) → NIC rules + the residual software filter.
//!
//! The rules may only ever drop packets the filter rejects (a sound over-approximation of the
//! filter); the residual filter — the filter itself, run in software on every packet the NIC
//! delivers — makes the combination exact. Two kinds of rules come out:
//!
//! - **Drop rules** ("exact drops"): regions of the tuple space where the filter is false for
//!   every packet, found from the terms of the negated filter (`not port 53`: every UDP/TCP/SCTP
//!   packet with port 53) and each *proved* before it is used (below).
//! - **An allow-list**: for each address family, the rules that steer the packets the filter
//!   may accept (an over-approximation of the filter as a union of tuple regions: `tcp port 80`
//!   is "TCP with source port 80" and "TCP with destination port 80"), followed by a
//!   lowest-priority rule that drops the rest of the family. The allow-list is installed whole or
//!   not at all.
//!
//! # Why it is sound
//!
//! The filter's tests read fixed offsets of the frame (libpcap's semantics); the NIC parses the
//! frame into a [`FlowKey`](crate::FlowKey). Each region is turned into what it implies about
//! the frame's bytes (an untagged IPv4 frame with source 10.0.0.0/8 has 0x0800 at offset 12, 0x4
//! in the high nibble of byte 14 and 10 at byte 26; a key with ports has a zero fragment offset
//! and the ports right after the IPv4 header), and the filter is evaluated on that partial
//! knowledge with three-valued logic (true, false, unknown). A drop rule is kept only when the
//! filter is *false* on its region — and a packet whose reads fail is rejected anyway, so every
//! packet of the region is rejected. A NIC also parses through up to two VLAN tags, where the
//! filter (without `vlan`) sees a tag at offset 12: the region is checked for the single- and
//! double-tagged layouts too. When a check fails only for tagged frames, the rule is limited to
//! untagged frames ([`VlanMatch::Untagged`]), which only the software profile can express — on
//! a real NIC such a rule would drop tagged frames that tcpdump's filter accepts, so it is not
//! installed. The allow-list's final drop is likewise checked against tagged frames.
//!
//! For the allow-list, every packet the filter accepts satisfies one term of the filter in
//! negation normal form, and the tests that term maps to a NIC field constrain the packet's key
//! exactly as they constrain its bytes (protocol at IPv4 byte 9, ports only with a zero fragment
//! offset and a protocol that has ports, IPv6 next header only when it is not an extension
//! header the NIC skips); tests that map to no NIC field are left out, which widens the region.
//!
//! # Capacity and profiles
//!
//! Rules are installed into a [`RuleTable`] for the [`Profile`]: the allow-list first (per
//! family; a region whose masks the profile cannot express is widened to whole fields), then the
//! drop rules, most common mask first (Flow Director's one global mask), skipping those the
//! table refuses. Signature (hash) filters match unrelated flows with the same hash, so a drop
//! rule there could drop a packet the filter accepts: none is installed. Hardware cannot leave
//! a packet to RSS, so the allow-list steers to a queue ([`Options::queue`], default 0); the
//! software profile passes to RSS instead.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use netsift_lang::Pred;
use netsift_lang::pred::{Cmp, Field, Loc, Node, Test};

use crate::error::{ErrorKind, OffloadError};
use crate::profile::Profile;
use crate::rule::{Action, Family, Masked, Match, Rule, RuleId, VlanMatch};
use crate::table::{Layout, RuleTable};

/// How to compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The NIC's capabilities.
    pub profile: Profile,
    /// Where the allow-list steers the packets the filter may accept: `None` lets RSS choose
    /// (software profile only; hardware profiles then use queue 0).
    pub queue: Option<u16>,
    /// The id of the first rule; the others follow.
    pub first_id: u32,
    /// The operator's promise that the link carries no VLAN-tagged frames: rules are then not
    /// checked against tagged layouts. Off by default.
    pub assume_untagged: bool,
    /// The most terms the filter may expand to (in negation normal form) before the compiler
    /// gives up on that side (allow-list or drops).
    pub max_terms: usize,
}

impl Options {
    /// Defaults for `profile`: RSS for accepted packets, ids from 1, tagged frames checked,
    /// 4,096 terms.
    pub fn new(profile: Profile) -> Options {
        Options {
            profile,
            queue: None,
            first_id: 1,
            assume_untagged: false,
            max_terms: 4096,
        }
    }
}

/// Why a rule is in the compiled set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The filter is false on the whole region.
    Drop,
    /// Part of an allow-list: the filter may accept packets of the region.
    Allow,
    /// An allow-list's final rule: the family's packets no allow rule matched.
    DropRest,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Drop => "drop",
            Role::Allow => "allow",
            Role::DropRest => "drop-rest",
        })
    }
}

/// The result of [`compile`]: the installed rules, what could not be installed, and the
/// residual software filter.
#[derive(Debug)]
pub struct Offload {
    table: RuleTable,
    rules: Vec<(Rule, Role)>,
    notes: Vec<String>,
    residual: Pred,
}

impl Offload {
    /// The rules installed, in the order they were installed, with their role.
    pub fn rules(&self) -> &[(Rule, Role)] {
        &self.rules
    }

    /// A table for the profile holding the rules (what an emulated NIC runs).
    pub fn table(&self) -> &RuleTable {
        &self.table
    }

    /// Take the table.
    pub fn into_table(self) -> RuleTable {
        self.table
    }

    /// What the compiler could not offload and why (one line each).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The software filter to run on every packet the NIC delivers: the whole filter (the NIC
    /// only removed packets it rejects).
    pub fn residual(&self) -> &Pred {
        &self.residual
    }

    /// How many rules drop (drop rules and final drops of allow-lists).
    pub fn drop_rules(&self) -> usize {
        self.rules.iter().filter(|(_, r)| *r != Role::Allow).count()
    }
}

/// Compile `pred` (a filter for Ethernet frames, `LINKTYPE_ETHERNET`) into rules for
/// `opts.profile`. Never fails for a valid predicate: what cannot be offloaded stays in software
/// and is explained in [`Offload::notes`]. Fails only when the options are inconsistent (a
/// first id that overflows).
pub fn compile(pred: &Pred, opts: &Options) -> Result<Offload, OffloadError> {
    let mut c = Compiler {
        pred,
        opts,
        table: RuleTable::for_profile(opts.profile),
        rules: Vec::new(),
        notes: Vec::new(),
        next_id: opts.first_id,
    };
    c.run()?;
    Ok(Offload {
        table: c.table,
        rules: c.rules,
        notes: c.notes,
        residual: pred.clone(),
    })
}

// ---------------------------------------------------------------------------------------------
// Three-valued evaluation on partial knowledge of the frame.

/// True, false, or unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tri {
    F,
    T,
    U,
}

impl Tri {
    fn not(self) -> Tri {
        match self {
            Tri::F => Tri::T,
            Tri::T => Tri::F,
            Tri::U => Tri::U,
        }
    }
}

/// Bytes of the frame the evaluation may know.
const KNOWN_BYTES: usize = 72;

/// What a region implies about a frame: known bits of the first [`KNOWN_BYTES`] bytes, and of
/// the first four bytes after an IPv4 header at offset `l4_nl` (the ports).
#[derive(Clone, Copy, Debug)]
struct Known {
    abs: [(u8, u8); KNOWN_BYTES],
    l4_nl: u32,
    l4: [(u8, u8); 4],
}

impl Known {
    fn new() -> Known {
        Known {
            abs: [(0, 0); KNOWN_BYTES],
            l4_nl: u32::MAX,
            l4: [(0, 0); 4],
        }
    }

    /// Record that the `bytes.len()` bytes at `at` are `value` under `mask` (big-endian).
    fn set(&mut self, at: usize, value: &[u8], mask: &[u8]) {
        for (i, (&v, &m)) in value.iter().zip(mask).enumerate() {
            if let Some(b) = self.abs.get_mut(at + i) {
                b.0 = (b.0 & !m) | (v & m);
                b.1 |= m;
            }
        }
    }

    fn set_u16(&mut self, at: usize, v: u16) {
        self.set(at, &v.to_be_bytes(), &[0xff, 0xff]);
    }

    /// The known value and mask of a field read, as `u32`s (unknown: mask 0).
    fn read(&self, field: &Field) -> (u32, u32) {
        let Field::Packet { loc, size } = *field else {
            return (0, 0);
        };
        let size = usize::from(size);
        let bytes: &[(u8, u8)] = match loc {
            Loc::Abs(k) => {
                let k = k as usize;
                match self.abs.get(k..k + size) {
                    Some(b) => b,
                    None => return (0, 0),
                }
            }
            Loc::Ipv4Payload { nl, off } if nl == self.l4_nl => {
                let off = off as usize;
                match self.l4.get(off..off + size) {
                    Some(b) => b,
                    None => return (0, 0),
                }
            }
            _ => return (0, 0),
        };
        bytes.iter().fold((0, 0), |(v, m), &(bv, bm)| {
            ((v << 8) | u32::from(bv & bm), (m << 8) | u32::from(bm))
        })
    }
}

fn size_mask(field: &Field) -> u32 {
    match field {
        Field::Packet { size: 1, .. } | Field::Ancillary { size: 1, .. } => 0xff,
        Field::Packet { size: 2, .. } | Field::Ancillary { size: 2, .. } => 0xffff,
        _ => u32::MAX,
    }
}

/// `(field & mask) cmp` on a value known under `km`.
fn eval_test(t: &Test, known: &Known) -> Tri {
    let (kv, km) = known.read(&t.field);
    let m = t.mask & size_mask(&t.field);
    let known_bits = km & m;
    let lo = kv & known_bits;
    let hi = lo | (m & !known_bits);
    let all = known_bits == m;
    let eq = |v: u32| -> Tri {
        if v & !m != 0 || (v & known_bits) != lo {
            Tri::F
        } else if all {
            Tri::T
        } else {
            Tri::U
        }
    };
    match &t.cmp {
        Cmp::Eq(v) => eq(*v),
        Cmp::OneOf(vs) => {
            let mut r = Tri::F;
            for &v in vs.iter() {
                match eq(v) {
                    Tri::T => return Tri::T,
                    Tri::U => r = Tri::U,
                    Tri::F => {}
                }
            }
            r
        }
        Cmp::Gt(v) => range_tri(lo > *v, hi <= *v),
        Cmp::Ge(v) => range_tri(lo >= *v, hi < *v),
        Cmp::Range(a, b) => range_tri(lo >= *a && hi <= *b, hi < *a || lo > *b),
        Cmp::Bits(v) => {
            if lo & v != 0 {
                Tri::T
            } else if m & v & !known_bits == 0 {
                Tri::F
            } else {
                Tri::U
            }
        }
    }
}

fn range_tri(surely: bool, never: bool) -> Tri {
    if surely {
        Tri::T
    } else if never {
        Tri::F
    } else {
        Tri::U
    }
}

/// The filter's value on every frame `known` describes (operands precede their users).
fn eval(pred: &Pred, known: &Known, memo: &mut Vec<Tri>) -> Tri {
    memo.clear();
    for node in pred.nodes() {
        let v = match node {
            Node::Const(b) => {
                if *b {
                    Tri::T
                } else {
                    Tri::F
                }
            }
            Node::Test(t) => eval_test(t, known),
            Node::Relation(..) | Node::Special(_) => Tri::U,
            Node::Not(x) => memo[x.0 as usize].not(),
            Node::And(ops) => {
                let mut r = Tri::T;
                for o in ops.iter() {
                    match memo[o.0 as usize] {
                        Tri::F => {
                            r = Tri::F;
                            break;
                        }
                        Tri::U => r = Tri::U,
                        Tri::T => {}
                    }
                }
                r
            }
            Node::Or(ops) => {
                let mut r = Tri::F;
                for o in ops.iter() {
                    match memo[o.0 as usize] {
                        Tri::T => {
                            r = Tri::T;
                            break;
                        }
                        Tri::U => r = Tri::U,
                        Tri::F => {}
                    }
                }
                r
            }
        };
        memo.push(v);
    }
    memo[pred.root().0 as usize]
}

// ---------------------------------------------------------------------------------------------
// Regions of the tuple space.

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const TPIDS: [u16; 3] = netsift_wire::flow::VLAN_TPIDS;
/// IPv6 next-header values the NIC's parser skips ([`FlowKey`](crate::FlowKey)).
const IPV6_SKIPPED: &[u8] = netsift_wire::flow::Options::NIC.ipv6_skip;

/// A region: one family, each field under a mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Region {
    family: Family,
    proto: Masked<u8>,
    src: Masked<u128>,
    dst: Masked<u128>,
    sport: Masked<u16>,
    dport: Masked<u16>,
}

impl Region {
    fn any(family: Family) -> Region {
        Region {
            family,
            proto: Masked::any(),
            src: Masked::any(),
            dst: Masked::any(),
            sport: Masked::any(),
            dport: Masked::any(),
        }
    }

    fn has_ports(&self) -> bool {
        !self.sport.is_any() || !self.dport.is_any()
    }

    /// Whether every key in `self` is in `o`.
    fn within(&self, o: &Region) -> bool {
        // `b`'s compared bits are all compared by `a`, with the same values.
        fn sub((av, am): (u128, u128), (bv, bm): (u128, u128)) -> bool {
            bm & !am == 0 && (av & bm) == (bv & bm)
        }
        self.family == o.family
            && self
                .fields()
                .iter()
                .zip(o.fields())
                .all(|(&a, b)| sub(a, b))
    }

    /// Each field's value and mask.
    fn fields(&self) -> [(u128, u128); 5] {
        [
            (self.proto.value().into(), self.proto.mask().into()),
            (self.src.value(), self.src.mask()),
            (self.dst.value(), self.dst.mask()),
            (self.sport.value().into(), self.sport.mask().into()),
            (self.dport.value().into(), self.dport.mask().into()),
        ]
    }

    /// What the region implies about a frame with `tags` VLAN tags in front of the IP header.
    fn known(&self, tags: &[u16]) -> Known {
        let mut k = Known::new();
        let mut at = 12;
        for &t in tags {
            k.set_u16(at, t);
            at += 4;
        }
        let ip = at + 2;
        match self.family {
            Family::V4 => {
                k.set_u16(at, ETH_IPV4);
                k.set(ip, &[0x40], &[0xf0]);
                k.set(ip + 9, &[self.proto.value()], &[self.proto.mask()]);
                let (sv, sm) = (self.src.value() as u32, self.src.mask() as u32);
                let (dv, dm) = (self.dst.value() as u32, self.dst.mask() as u32);
                k.set(ip + 12, &sv.to_be_bytes(), &sm.to_be_bytes());
                k.set(ip + 16, &dv.to_be_bytes(), &dm.to_be_bytes());
                if self.has_ports() {
                    // The NIC only sees ports at fragment offset 0.
                    k.set(ip + 6, &[0, 0], &[0x1f, 0xff]);
                    k.l4_nl = ip as u32;
                    let p = [self.sport, self.dport];
                    for (i, port) in p.iter().enumerate() {
                        let (v, m) = (port.value().to_be_bytes(), port.mask().to_be_bytes());
                        k.l4[2 * i] = (v[0] & m[0], m[0]);
                        k.l4[2 * i + 1] = (v[1] & m[1], m[1]);
                    }
                }
            }
            Family::V6 => {
                k.set_u16(at, ETH_IPV6);
                k.set(ip, &[0x60], &[0xf0]);
                // The key's protocol and ports may come after extension headers: they say
                // nothing about fixed offsets.
                let (s, d) = (self.src, self.dst);
                k.set(ip + 8, &s.value().to_be_bytes(), &s.mask().to_be_bytes());
                k.set(ip + 24, &d.value().to_be_bytes(), &d.mask().to_be_bytes());
            }
        }
        k
    }

    fn to_match(self, vlan: VlanMatch) -> Match {
        let addr = |bits: u128| -> IpAddr { self.family.addr(bits) };
        let m = Match::new(self.family)
            .with_vlan(vlan)
            .with_proto_masked(self.proto)
            .with_src_port_masked(self.sport)
            .with_dst_port_masked(self.dport);
        // The addresses are of the match's family by construction.
        let m = m
            .try_src(addr(self.src.value()), self.src.mask())
            .unwrap_or(m);
        m.try_dst(addr(self.dst.value()), self.dst.mask())
            .unwrap_or(m)
    }

    /// The region with every partially compared field ignored (for whole-field NICs).
    fn whole_fields(mut self) -> Region {
        let full = self.family.full_mask();
        if self.proto.mask() != u8::MAX {
            self.proto = Masked::any();
        }
        if self.src.mask() != full {
            self.src = Masked::any();
        }
        if self.dst.mask() != full {
            self.dst = Masked::any();
        }
        if self.sport.mask() != u16::MAX {
            self.sport = Masked::any();
        }
        if self.dport.mask() != u16::MAX {
            self.dport = Masked::any();
        }
        self
    }
}

/// The VLAN layouts a NIC parses through: none, one tag, two tags.
fn tag_layouts() -> Vec<Vec<u16>> {
    let mut v = vec![Vec::new()];
    for &a in &TPIDS {
        v.push(vec![a]);
        for &b in &TPIDS {
            v.push(vec![a, b]);
        }
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Terms: the filter in negation normal form, as a union of conjunctions of literals.

/// A literal: a test, or its negation.
#[derive(Clone, Copy, Debug)]
struct Lit<'a> {
    test: &'a Test,
    positive: bool,
    /// For a positive `OneOf`, the one value this term takes.
    value: Option<u32>,
}

type Term<'a> = Vec<Lit<'a>>;

/// The terms of `node` (negated when `neg`), `None` when there are more than `max`. Tests that
/// no term can use (relations, engine-specific nodes) become `true`: the union only grows.
fn terms<'a>(
    pred: &'a Pred,
    node: netsift_lang::pred::NodeId,
    neg: bool,
    max: usize,
) -> Option<Vec<Term<'a>>> {
    Some(match pred.node(node) {
        Node::Const(b) => {
            if *b != neg {
                vec![Vec::new()]
            } else {
                Vec::new()
            }
        }
        Node::Relation(..) | Node::Special(_) => vec![Vec::new()],
        Node::Not(x) => terms(pred, *x, !neg, max)?,
        Node::Test(t) => match (&t.cmp, neg) {
            (Cmp::OneOf(vs), false) => vs
                .iter()
                .map(|&v| {
                    vec![Lit {
                        test: t,
                        positive: true,
                        value: Some(v),
                    }]
                })
                .collect(),
            _ => vec![vec![Lit {
                test: t,
                positive: !neg,
                value: None,
            }]],
        },
        Node::And(ops) | Node::Or(ops) => {
            // And (or a negated Or) is a product; Or (or a negated And) a union.
            let product = matches!(pred.node(node), Node::And(_)) != neg;
            let mut acc: Vec<Term<'a>> = if product {
                vec![Vec::new()]
            } else {
                Vec::new()
            };
            for &o in ops.iter() {
                let t = terms(pred, o, neg, max)?;
                if product {
                    if acc.len().saturating_mul(t.len()) > max {
                        return None;
                    }
                    let mut next = Vec::with_capacity(acc.len() * t.len());
                    for a in &acc {
                        for b in &t {
                            let mut c = a.clone();
                            c.extend_from_slice(b);
                            next.push(c);
                        }
                    }
                    acc = next;
                } else {
                    acc.extend(t);
                    if acc.len() > max {
                        return None;
                    }
                }
            }
            acc
        }
    })
}

/// What a term says about the NIC's view of a packet.
#[derive(Debug, PartialEq, Eq)]
enum Mapped {
    /// No packet satisfies the term.
    Unsat,
    /// Only frames the NIC has no key for, or tagged frames (a `vlan` term: its other tests
    /// are at shifted offsets and are not mapped).
    NotUntaggedIp,
    /// The term constrains no family: any frame.
    Anything,
    /// Untagged frames of one family whose keys are in the region.
    Region(Region),
}

/// Per-byte constraints collected from a term.
struct Bytes {
    abs: [(u8, u8); KNOWN_BYTES],
    l4: [(u8, u8); 4],
    unsat: bool,
}

impl Bytes {
    fn put(slot: &mut (u8, u8), v: u8, m: u8) -> bool {
        if (slot.0 ^ v) & slot.1 & m != 0 {
            return false;
        }
        slot.0 |= v & m;
        slot.1 |= m;
        true
    }

    /// Record `(field & mask) == v` byte by byte.
    fn eq(&mut self, field: &Field, mask: u32, v: u32) {
        let Field::Packet { loc, size } = *field else {
            return;
        };
        let size = usize::from(size);
        for i in 0..size {
            let shift = 8 * (size - 1 - i);
            let (bv, bm) = ((v >> shift) as u8, (mask >> shift) as u8);
            let slot = match loc {
                Loc::Abs(k) => self.abs.get_mut(k as usize + i),
                Loc::Ipv4Payload { nl: 14, off } => self.l4.get_mut(off as usize + i),
                _ => None,
            };
            if let Some(slot) = slot
                && !Bytes::put(slot, bv, bm)
            {
                self.unsat = true;
            }
        }
    }

    fn u16_at(&self, at: usize) -> Masked<u16> {
        let (a, b) = (self.abs[at], self.abs[at + 1]);
        Masked::new(
            u16::from_be_bytes([a.0, b.0]),
            u16::from_be_bytes([a.1, b.1]),
        )
    }

    fn addr(&self, at: usize, len: usize) -> Masked<u128> {
        let (mut v, mut m) = (0u128, 0u128);
        for &(bv, bm) in &self.abs[at..at + len] {
            v = (v << 8) | u128::from(bv);
            m = (m << 8) | u128::from(bm);
        }
        Masked::new(v & m, m)
    }
}

/// The IPv4 flags and fragment offset of an untagged frame (`ip[6:2]`).
const FRAG_FIELD: Field = Field::Packet {
    loc: Loc::Abs(20),
    size: 2,
};

fn map_term(term: &Term<'_>) -> Mapped {
    map_term_as(term, None)
}

/// [`map_term`]; a term that tests no Ethertype is taken as one of `family` when given (the
/// region is then a candidate only: its caller checks what the filter does there).
fn map_term_as(term: &Term<'_>, family: Option<Family>) -> Mapped {
    let mut bytes = Bytes {
        abs: [(0, 0); KNOWN_BYTES],
        l4: [(0, 0); 4],
        unsat: false,
    };
    let mut first_fragment = false;
    for lit in term {
        let t = lit.test;
        let m = t.mask & size_mask(&t.field);
        if lit.positive {
            let value = match (&t.cmp, lit.value) {
                (_, Some(v)) => Some(v),
                (Cmp::Eq(v), None) => Some(*v),
                _ => None,
            };
            if let Some(v) = value {
                if v & !m != 0 {
                    return Mapped::Unsat;
                }
                bytes.eq(&t.field, m, v);
                if t.field == FRAG_FIELD && m & 0x1fff == 0x1fff && v & 0x1fff == 0 {
                    first_fragment = true;
                }
            }
        } else if let Cmp::Bits(b) = t.cmp
            && t.field == FRAG_FIELD
            && m & b & 0x1fff == 0x1fff
        {
            // `not (ip[6:2] & 0x1fff != 0)`: not a later fragment.
            first_fragment = true;
        }
        if bytes.unsat {
            return Mapped::Unsat;
        }
    }
    let ethertype = bytes.u16_at(12);
    let (family, ip) = if ethertype.is_any() {
        match family {
            Some(f) => (f, 14),
            None => return Mapped::Anything,
        }
    } else if ethertype.mask() != u16::MAX {
        // A partial ethertype test (rare): assume nothing about the family.
        return Mapped::Anything;
    } else {
        match ethertype.value() {
            ETH_IPV4 => (Family::V4, 14),
            ETH_IPV6 => (Family::V6, 14),
            _ => return Mapped::NotUntaggedIp,
        }
    };
    let mut r = Region::any(family);
    let proto = bytes.abs[ip + if family == Family::V4 { 9 } else { 6 }];
    let proto = Masked::new(proto.0, proto.1);
    match family {
        Family::V4 => {
            r.proto = proto;
            r.src = bytes.addr(ip + 12, 4);
            r.dst = bytes.addr(ip + 16, 4);
            let with_ports =
                first_fragment && proto.is_exact() && crate::rule::has_ports(proto.value());
            if with_ports {
                let l4 = bytes.l4;
                r.sport = Masked::new(
                    u16::from_be_bytes([l4[0].0, l4[1].0]),
                    u16::from_be_bytes([l4[0].1, l4[1].1]),
                );
                r.dport = Masked::new(
                    u16::from_be_bytes([l4[2].0, l4[3].0]),
                    u16::from_be_bytes([l4[2].1, l4[3].1]),
                );
            }
        }
        Family::V6 => {
            if proto.is_exact() && !IPV6_SKIPPED.contains(&proto.value()) {
                r.proto = proto;
                if crate::rule::has_ports(proto.value()) {
                    r.sport = bytes.u16_at(ip + 40);
                    r.dport = bytes.u16_at(ip + 42);
                }
            }
            r.src = bytes.addr(ip + 8, 16);
            r.dst = bytes.addr(ip + 24, 16);
        }
    }
    Mapped::Region(r)
}

// ---------------------------------------------------------------------------------------------
// The compiler.

struct Compiler<'a> {
    pred: &'a Pred,
    opts: &'a Options,
    table: RuleTable,
    rules: Vec<(Rule, Role)>,
    notes: Vec<String>,
    next_id: u32,
}

/// Priorities: drops before the allow-list, the allow-list before its final drop.
const PRIO_DROP: u8 = 2;
const PRIO_ALLOW: u8 = 1;
const PRIO_REST: u8 = 0;

impl Compiler<'_> {
    fn run(&mut self) -> Result<(), OffloadError> {
        let signature = matches!(
            self.opts.profile.layout(),
            Layout::GlobalMask { signature: true }
        );
        if signature {
            self.notes.push(format!(
                "{}: signature filters match unrelated flows with the same hash, so a drop \
                 rule could drop packets the filter accepts; no rule installed",
                self.opts.profile
            ));
            return Ok(());
        }
        let mut memo = Vec::with_capacity(self.pred.nodes().len());
        // What the filter does with tagged frames of each family, whatever their addresses.
        let layouts = tag_layouts();
        let tagged_rejected = |r: &Region, memo: &mut Vec<Tri>| {
            layouts[1..]
                .iter()
                .all(|tags| eval(self.pred, &r.known(tags), memo) == Tri::F)
        };

        // The allow-list, per family.
        let mut allow: Vec<(Family, Vec<Region>)> = Vec::new();
        match terms(self.pred, self.pred.root(), false, self.opts.max_terms) {
            None => self.notes.push(format!(
                "the filter has more than {} terms: no allow-list",
                self.opts.max_terms
            )),
            Some(ts) => {
                let mut regions = Vec::new();
                let mut anything = false;
                for t in &ts {
                    match map_term(t) {
                        Mapped::Unsat | Mapped::NotUntaggedIp => {}
                        Mapped::Anything => anything = true,
                        Mapped::Region(r) => regions.push(r),
                    }
                }
                if anything {
                    self.notes.push(
                        "the filter may accept packets whatever their IP header says (a term \
                         tests no Ethertype the NIC parses): no allow-list"
                            .into(),
                    );
                } else {
                    for family in [Family::V4, Family::V6] {
                        let rs: Vec<Region> =
                            minimal(regions.iter().filter(|r| r.family == family).copied());
                        if rs.iter().any(|r| *r == Region::any(family)) {
                            continue;
                        }
                        allow.push((family, rs));
                    }
                }
            }
        }

        // Drop rules: regions of the negated filter's terms where the filter is false.
        let mut drops: Vec<(Region, VlanMatch)> = Vec::new();
        match terms(self.pred, self.pred.root(), true, self.opts.max_terms) {
            None => self.notes.push(format!(
                "the negated filter has more than {} terms: no drop rules",
                self.opts.max_terms
            )),
            Some(ts) => {
                let mut seen = std::collections::HashSet::new();
                for t in &ts {
                    let candidates: Vec<Region> = match map_term(t) {
                        Mapped::Region(r) => vec![r],
                        // A term that names no family (`src X` of `ip and not host X`, where
                        // the filter's other conjunct decides the family): each family's
                        // region, kept below only where the filter is false throughout.
                        Mapped::Anything => [Family::V4, Family::V6]
                            .into_iter()
                            .filter_map(|f| match map_term_as(t, Some(f)) {
                                Mapped::Region(r) => Some(r),
                                _ => None,
                            })
                            .collect(),
                        _ => continue,
                    };
                    for r in candidates {
                        if r == Region::any(r.family) || !seen.insert(r) {
                            continue;
                        }
                        if eval(self.pred, &r.known(&[]), &mut memo) != Tri::F {
                            continue;
                        }
                        let vlan = if self.opts.assume_untagged || tagged_rejected(&r, &mut memo) {
                            VlanMatch::Any
                        } else {
                            VlanMatch::Untagged
                        };
                        drops.push((r, vlan));
                    }
                }
                let regions = minimal(drops.iter().map(|d| d.0));
                drops.retain(|d| regions.contains(&d.0));
            }
        }

        // Install the allow-lists.
        let mut installed_rest: Vec<Family> = Vec::new();
        let mut allow_regions: Vec<Region> = Vec::new();
        for (family, rs) in allow {
            let rest = Region::any(family);
            let vlan = if self.opts.assume_untagged || tagged_rejected(&rest, &mut memo) {
                VlanMatch::Any
            } else {
                VlanMatch::Untagged
            };
            match self.install_allow_list(family, &rs, vlan) {
                Ok(widened) => {
                    installed_rest.push(family);
                    allow_regions.extend(widened);
                }
                Err(e) => self.notes.push(format!(
                    "{family} allow-list ({} rules) not installed: {}",
                    rs.len() + 1,
                    e.message()
                )),
            }
        }

        // Drop rules the final drops do not already cover; the most common masks first.
        drops.retain(|(r, _)| {
            !installed_rest.contains(&r.family) || allow_regions.iter().any(|a| overlap(a, r))
        });
        let mut by_mask: HashMap<crate::rule::FieldMasks, usize> = HashMap::new();
        for (r, v) in &drops {
            *by_mask.entry(r.to_match(*v).masks()).or_default() += 1;
        }
        drops.sort_by_cached_key(|(r, v)| std::cmp::Reverse(by_mask[&r.to_match(*v).masks()]));
        let (mut refused, mut first_refusal) = (0usize, None);
        for (r, vlan) in drops {
            let rule =
                Rule::new(self.id()?, r.to_match(vlan), Action::Drop).with_priority(PRIO_DROP);
            match self.table.add(rule) {
                Ok(()) => self.rules.push((rule, Role::Drop)),
                Err(e) => {
                    refused += 1;
                    first_refusal.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_refusal {
            self.notes.push(format!(
                "{refused} drop rules not installed (first: {})",
                e.message()
            ));
        }
        Ok(())
    }

    fn id(&mut self) -> Result<RuleId, OffloadError> {
        let id = self.next_id;
        self.next_id = id.checked_add(1).ok_or_else(|| {
            OffloadError::new(ErrorKind::Capacity, None, "rule ids exhausted (u32)")
        })?;
        Ok(RuleId(id))
    }

    /// Install the allow rules of `family` and the final drop, all or none. Returns the
    /// regions as installed (maybe widened).
    fn install_allow_list(
        &mut self,
        family: Family,
        regions: &[Region],
        vlan: VlanMatch,
    ) -> Result<Vec<Region>, OffloadError> {
        let hardware = self.opts.profile != Profile::Software;
        let action = match (self.opts.queue, hardware) {
            (Some(q), _) => Action::Queue(q),
            (None, true) => Action::Queue(0),
            (None, false) => Action::Pass,
        };
        let start = self.rules.len();
        let mut installed = Vec::new();
        let mut result = Ok(());
        for &r in regions {
            let mut rule =
                Rule::new(self.id()?, r.to_match(VlanMatch::Any), action).with_priority(PRIO_ALLOW);
            let mut region = r;
            if let Err(e) = self.opts.profile.check(&rule)
                && e.kind() == ErrorKind::Mask
            {
                // Widening an allow region is always sound.
                region = r.whole_fields();
                rule.pattern = region.to_match(VlanMatch::Any);
            }
            match self.table.add(rule) {
                Ok(()) => {
                    self.rules.push((rule, Role::Allow));
                    installed.push(region);
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_ok() {
            let rest = Rule::new(self.id()?, Region::any(family).to_match(vlan), Action::Drop)
                .with_priority(PRIO_REST);
            match self.table.add(rest) {
                Ok(()) => self.rules.push((rest, Role::DropRest)),
                Err(e) => result = Err(e),
            }
        }
        if let Err(e) = result {
            for (rule, _) in self.rules.drain(start..) {
                let _ = self.table.remove(rule.id);
            }
            return Err(e);
        }
        Ok(installed)
    }
}

/// Whether two regions share a key.
fn overlap(a: &Region, b: &Region) -> bool {
    a.family == b.family
        && a.fields()
            .iter()
            .zip(b.fields())
            .all(|(&(av, am), (bv, bm))| {
                let both = am & bm;
                av & both == bv & both
            })
}

/// The regions without duplicates and without those inside another, in first-seen order.
fn minimal(regions: impl Iterator<Item = Region>) -> Vec<Region> {
    let mut out: Vec<Region> = Vec::new();
    for r in regions {
        if out.iter().any(|o| r.within(o)) {
            continue;
        }
        out.retain(|o| !o.within(&r));
        out.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsift_capture::LinkType;
    use netsift_lang::Context;

    fn pred(expr: &str) -> Pred {
        netsift_lang::compile(expr, &Context::new(LinkType::ETHERNET)).unwrap()
    }

    fn offload(expr: &str, profile: Profile) -> Offload {
        compile(&pred(expr), &Options::new(profile)).unwrap()
    }

    #[test]
    fn port_filter_is_an_allow_list() {
        let o = offload("tcp port 80", Profile::Software);
        let text: Vec<String> = o
            .rules()
            .iter()
            .map(|(r, _)| r.pattern.to_string())
            .collect();
        assert!(
            text.contains(&"ip4 proto 6 sport 80".to_string()),
            "{text:?}"
        );
        assert!(
            text.contains(&"ip4 proto 6 dport 80".to_string()),
            "{text:?}"
        );
        assert!(
            text.contains(&"ip6 proto 6 sport 80".to_string()),
            "{text:?}"
        );
        assert_eq!(
            o.rules()
                .iter()
                .filter(|(_, r)| *r == Role::DropRest)
                .count(),
            2
        );
    }

    #[test]
    fn negated_hosts_are_drop_rules_only_where_tags_cannot_hide() {
        // `not host X` accepts tagged frames: hardware cannot drop host X safely.
        let o = offload("not host 198.18.0.1", Profile::Mlx5);
        assert!(o.rules().is_empty(), "{:?}", o.rules());
        let o = offload("not host 198.18.0.1", Profile::Software);
        assert_eq!(o.rules().len(), 2);
        assert!(
            o.rules()
                .iter()
                .all(|(r, role)| *role == Role::Drop && r.pattern.vlan() == VlanMatch::Untagged)
        );
        // `ip and not host X` rejects tagged frames: any VLAN; and all of IPv6.
        let o = offload("ip and not host 198.18.0.1", Profile::Mlx5);
        assert_eq!(o.drop_rules(), 3, "{:?}", o.rules());
        assert!(
            o.rules()
                .iter()
                .any(|(r, role)| *role == Role::DropRest && r.pattern.family() == Family::V6)
        );
        assert!(
            o.rules()
                .iter()
                .all(|(r, _)| r.pattern.vlan() == VlanMatch::Any)
        );
    }

    #[test]
    fn signature_profile_installs_nothing() {
        let o = offload(
            "tcp port 80",
            Profile::Intel82599FdirHash(crate::profile::Pballoc::K64),
        );
        assert!(o.rules().is_empty());
        assert_eq!(o.notes().len(), 1);
    }

    #[test]
    fn five_tuple_profile_keeps_ipv4_only() {
        let o = offload("udp port 53", Profile::Intel82599FiveTuple);
        assert!(
            o.rules()
                .iter()
                .all(|(r, _)| r.pattern.family() == Family::V4)
        );
        assert!(!o.rules().is_empty());
        assert!(
            o.notes().iter().any(|n| n.contains("ip6")),
            "{:?}",
            o.notes()
        );
    }

    #[test]
    fn mlx5_widens_prefixes() {
        let o = offload("src net 10.0.0.0/8 and tcp", Profile::Mlx5);
        let allow: Vec<_> = o
            .rules()
            .iter()
            .filter(|(_, r)| *r == Role::Allow)
            .map(|(r, _)| r.pattern.to_string())
            .collect();
        assert_eq!(allow, vec!["ip4 proto 6".to_string()]);
    }

    #[test]
    fn evaluation_is_three_valued() {
        let p = pred("tcp port 80");
        let mut memo = Vec::new();
        let mut r = Region::any(Family::V4);
        assert_eq!(eval(&p, &r.known(&[]), &mut memo), Tri::U);
        r.proto = Masked::exact(17);
        assert_eq!(eval(&p, &r.known(&[]), &mut memo), Tri::F);
        r.proto = Masked::exact(6);
        r.dport = Masked::exact(80);
        assert_eq!(eval(&p, &r.known(&[]), &mut memo), Tri::T);
        assert_eq!(eval(&p, &r.known(&[0x8100]), &mut memo), Tri::F);
    }
}
