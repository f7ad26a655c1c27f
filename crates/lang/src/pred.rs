//! `Pred`: the intermediate representation every netsift engine compiles from.
//!
//! A `Pred` is a boolean DAG over **tests of packet fields**, evaluated left to right with
//! short-circuit `and`/`or`, exactly as the BPF code libpcap generates without optimisation
//! evaluates it. One rule of that machine shapes the whole IR: **a read past the captured bytes
//! rejects the packet at once**, whatever `not`s and `or`s surround it (`tcp[100] = 1 or ip`
//! rejects a short TCP packet that `ip` alone would accept). So the order of tests is part of
//! the meaning, and every transformation here keeps it.
//!
//! # Invariants (kept by [`Builder`], the only way to make a `Pred`)
//!
//! - Nodes are hash-consed: structurally equal sub-predicates are one node ([`NodeId`]).
//! - `And`/`Or` have at least two operands and never directly contain an operand of the same
//!   kind (they are flattened).
//! - Constants are folded where that cannot change a verdict: `x and false` is `false` (both
//!   reject every packet, by result or by abort), `true and x` and `x and true` are `x`,
//!   `false or x` and `x or false` are `x`, `true or x` is `true`, `not not x` is `x`.
//!   `x or true` is **not** folded when `x` reads the packet: a read that fails must still
//!   reject (the BPF optimiser may later decide otherwise, as libpcap's does).
//! - Adjacent tests of one field under one mask merge: `f = a or f = b` into `f ∈ {a, b}`, and
//!   `f >= lo and not f > hi` into `f ∈ [lo, hi]`. They read the same bytes, so the merge cannot
//!   change where a packet is rejected.
//! - In *exact* mode (needed when a filter contains libpcap's `byte N & V` / `byte N | V`,
//!   which test whatever the previous test left in the accumulator) nothing is folded or merged,
//!   and every node keeps libpcap's shape.
//!
//! Values that some engines cannot express (arithmetic relations, `protochain`'s loop, Geneve's
//! variable offsets) are explicit node kinds, so an engine can say which predicates it serves.

use crate::fxhash::FxHashMap;
use std::fmt;
use std::hash::{Hash, Hasher};

/// A node of a [`Pred`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// Where a field is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loc {
    /// `[k]`: absolute byte offset from the start of the packet.
    Abs(u32),
    /// After an IPv4 header that starts at absolute offset `nl`: X = 4 * (`[nl]` & 0xf), and the
    /// field is at X + `nl` + `off` (libpcap's `ldxb 4*([nl]&0xf); ld [x + nl+off]`).
    Ipv4Payload {
        /// Offset of the IPv4 header.
        nl: u32,
        /// Offset after the IPv4 header.
        off: u32,
    },
    /// `[M[reg] + off]`: an offset computed at run time into scratch register `reg` (Geneve).
    Var {
        /// Scratch register holding the base offset.
        reg: u8,
        /// Constant added to it.
        off: u32,
    },
    /// After an IPv4 header at the run-time offset `M[reg] + nl`: X = `M[reg]` + 4 *
    /// (`[M[reg] + nl]` & 0xf), and the field is at X + `nl` + `off` (libpcap's code for a
    /// variable link-layer payload offset).
    VarIpv4Payload {
        /// Scratch register holding the variable part of the IPv4 header's offset.
        reg: u8,
        /// The constant part of the IPv4 header's offset.
        nl: u32,
        /// Offset after the IPv4 header.
        off: u32,
    },
}

/// A value tested by a [`Test`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// `size` (1, 2 or 4) big-endian bytes at `loc`.
    Packet {
        /// Where.
        loc: Loc,
        /// How many bytes: 1, 2 or 4.
        size: u8,
    },
    /// The packet's length on the wire (`len`).
    WireLen,
    /// A Linux ancillary load (`SKF_AD_OFF + k`, e.g. the packet type for `inbound`): never
    /// present in a capture, so it always rejects outside the kernel.
    Ancillary {
        /// Offset relative to `SKF_AD_OFF`.
        k: u32,
        /// Size.
        size: u8,
    },
}

/// A comparison of a (masked) field with constants.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// `== v`.
    Eq(u32),
    /// `> v` (unsigned).
    Gt(u32),
    /// `>= v` (unsigned).
    Ge(u32),
    /// `& v != 0`.
    Bits(u32),
    /// One of the values (a merged run of `==`, in the order written).
    OneOf(Box<[u32]>),
    /// `lo <= x <= hi`.
    Range(u32, u32),
}

/// One field test: `(field & mask) cmp`. A mask of `0xffffffff` means no mask.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Test {
    /// The field.
    pub field: Field,
    /// Bits kept before comparing.
    pub mask: u32,
    /// The comparison.
    pub cmp: Cmp,
    /// Written as a relation in the filter text (`ip[9] = 6`) rather than produced by a
    /// primitive (`udp`). The test means the same either way; libpcap loads such a field
    /// differently, which decides which contradictions it reports as "expression rejects all
    /// packets".
    pub relation: bool,
}

/// An arithmetic value (`proto[expr:size]`, `len`, constants and the operators).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Val {
    /// A constant.
    Const(u32),
    /// The wire length.
    Len,
    /// `size` bytes at `base + index`.
    Load {
        /// What the index is relative to.
        base: Base,
        /// The index.
        index: Box<Val>,
        /// 1, 2 or 4.
        size: u8,
    },
    /// `a op b` (32-bit unsigned, wrapping; division by 0 rejects).
    Bin(ArithOp, Box<Val>, Box<Val>),
    /// `-a`.
    Neg(Box<Val>),
}

/// Arithmetic operators of [`Val`].
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

/// The base of an indexed load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Base {
    /// A constant absolute offset (link header, network header, IPv6 payload).
    Abs(u32),
    /// The payload of an IPv4 header at absolute offset `nl`.
    Ipv4Payload(u32),
    /// `M[reg] + off` (Geneve).
    Var(u8, u32),
    /// The payload of an IPv4 header at offset `M[reg]` + the constant.
    VarIpv4Payload(u8, u32),
}

/// The comparison of a [`Node::Relation`]; `<`, `<=` and `!=` are `not` of these.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelOp {
    Gt,
    Ge,
    Eq,
}

/// Nodes that only some engines can run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    /// `[ip|ip6] protochain N`: walk the IPv4 or IPv6 header chain (libpcap's loop, including
    /// its AH quirk) from the network header at `nl` and test whether protocol `proto` occurs.
    ProtoChain {
        /// Offset of the network header.
        nl: u32,
        /// IPv6 (else IPv4).
        ipv6: bool,
        /// The protocol looked for.
        proto: u32,
    },
    /// libpcap's `byte N & V` / `byte N | V`: tests the value the previous test left in the
    /// accumulator (`(A & V) != 0`, `(A | V) != 0`); N is ignored, as libpcap 1.10 does.
    AccOp {
        /// `|` rather than `&`.
        or: bool,
        /// V.
        val: u32,
    },
    /// The Geneve header check that also computes the inner offsets into scratch registers
    /// (always true when reached; `ipv6` selects the outer IP version's transport offset).
    GeneveOffsets {
        /// Offset of the outer network header (`nl`), or a register holding it.
        nl: Base,
        /// Register receiving the inner link-type offset.
        reg_type: u8,
        /// Register receiving the inner link-header offset.
        reg_link: u8,
        /// Register receiving the inner payload offset.
        reg_payload: u8,
    },
    /// Sets A to the outer transport header offset before [`Special::GeneveOffsets`]: the IPv4
    /// header length (`ipv6` false) or 40.
    GeneveHeaderLen {
        /// Outer network header offset.
        nl: Base,
        /// IPv6.
        ipv6: bool,
    },
    /// `M[a] != M[b]` (Geneve's "there is an inner Ethernet header" check).
    RegsDiffer(u8, u8),
    /// libpcap's `insert_compute_vloffsets` for 802.11 link types: computes into scratch
    /// registers the offset of the 802.11 header (after a radio header of variable length)
    /// and of the link-layer payload (after the 802.11 header, whose length depends on the
    /// frame type, QoS and radiotap's data padding). Always true when its loads succeed;
    /// placed first in the program, so that a packet too short for them is rejected, as in
    /// libpcap.
    LinkOffsets {
        /// The header before the 802.11 header.
        prefix: RadioHeader,
        /// Register receiving the 802.11 header's offset (`None`: not needed).
        hdr: Option<u8>,
        /// Register receiving the link-layer payload's offset (`None`: not needed).
        payload: Option<u8>,
    },
    /// libpcap's `gen_load_pflog_llprefixlen`: `M[payload]` = (the pflog header's length byte
    /// + 3) rounded down to a multiple of 4. Always true when its load succeeds; placed first.
    PflogOffset {
        /// Register receiving the link-layer payload's offset.
        payload: u8,
    },
}

/// The radio-information header before an 802.11 header, of variable length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RadioHeader {
    /// None (DLT_IEEE802_11).
    None,
    /// Radiotap: the little-endian 16-bit length at offset 2.
    Radiotap,
    /// PPI: the little-endian 16-bit length at offset 2.
    Ppi,
    /// AVS: the big-endian 32-bit length at offset 4.
    Avs,
    /// Prism, or AVS when the Prism header starts with the AVS cookie: 144 bytes.
    Prism,
}

/// The operands of an [`Node::And`] or [`Node::Or`], read as a slice. Up to
/// [`Ops::INLINE`] are kept in place (most junctions: building one allocates nothing), more on
/// the heap; equality and hashing are the slice's.
#[derive(Clone)]
pub struct Ops(OpsRepr);

#[derive(Clone)]
enum OpsRepr {
    /// `ids[..len]`; the rest are `NodeId(0)`.
    Inline {
        len: u8,
        ids: [NodeId; Ops::INLINE],
    },
    Heap(Box<[NodeId]>),
}

impl Ops {
    /// Most operands kept without an allocation.
    pub const INLINE: usize = 4;

    /// Operands `ids`, in order.
    pub fn new(ids: &[NodeId]) -> Ops {
        if ids.len() <= Ops::INLINE {
            let mut inline = [NodeId(0); Ops::INLINE];
            inline[..ids.len()].copy_from_slice(ids);
            Ops(OpsRepr::Inline {
                len: ids.len() as u8,
                ids: inline,
            })
        } else {
            Ops(OpsRepr::Heap(ids.into()))
        }
    }
}

impl std::ops::Deref for Ops {
    type Target = [NodeId];
    fn deref(&self) -> &[NodeId] {
        match &self.0 {
            OpsRepr::Inline { len, ids } => &ids[..usize::from(*len)],
            OpsRepr::Heap(ids) => ids,
        }
    }
}

impl PartialEq for Ops {
    fn eq(&self, other: &Ops) -> bool {
        **self == **other
    }
}

impl Eq for Ops {}

impl Hash for Ops {
    fn hash<H: Hasher>(&self, h: &mut H) {
        (**self).hash(h);
    }
}

impl fmt::Debug for Ops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A node of the DAG.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// Always true or always false.
    Const(bool),
    /// A field test.
    Test(Test),
    /// An arithmetic relation `lhs op rhs`.
    Relation(Val, RelOp, Val),
    /// All of the operands, left to right.
    And(Ops),
    /// Any of the operands, left to right.
    Or(Ops),
    /// The negation.
    Not(NodeId),
    /// An engine-specific construct.
    Special(Special),
}

impl Node {
    /// Whether the node is [`Node::Special`] or a test that reads at a variable offset (scratch
    /// registers): what keeps a predicate from the optimiser.
    fn is_special(&self) -> bool {
        match self {
            Node::Special(_) => true,
            Node::Test(t) => matches!(
                t.field,
                Field::Packet {
                    loc: Loc::Var { .. } | Loc::VarIpv4Payload { .. },
                    ..
                }
            ),
            _ => false,
        }
    }
}

/// A predicate: nodes and a root. Made by a [`Builder`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pred {
    nodes: Vec<Node>,
    root: NodeId,
    exact: bool,
    no_optimize: bool,
    /// Whether any node (reachable or not) is special or reads a variable offset: when not,
    /// [`Pred::has_special`] needs no walk.
    any_special: bool,
}

impl Pred {
    /// The root node.
    pub fn root(&self) -> NodeId {
        self.root
    }

    /// A node.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// All nodes (operands always have smaller ids than the nodes using them).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Whether the predicate was built in exact mode (libpcap's shapes kept node for node, no
    /// folding) — engines must then not reorder or drop anything.
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    /// Whether an optimiser may rewrite this predicate. libpcap never optimises a filter that
    /// contains `protochain` or `geneve` (even where the rest of the filter made them
    /// unreachable), nor one in exact mode; netsift follows it.
    pub fn optimizable(&self) -> bool {
        !self.no_optimize && !self.exact && !self.has_special()
    }

    /// Whether any reachable node is a [`Node::Special`] or uses scratch registers.
    pub fn has_special(&self) -> bool {
        self.any_special
            && self
                .reachable()
                .iter()
                .any(|&id| self.node(id).is_special())
    }

    /// The nodes reachable from the root, in increasing id order.
    pub fn reachable(&self) -> Vec<NodeId> {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack = vec![self.root];
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut seen[id.0 as usize], true) {
                continue;
            }
            match self.node(id) {
                Node::And(ops) | Node::Or(ops) => stack.extend(ops.iter().copied()),
                Node::Not(x) => stack.push(*x),
                _ => {}
            }
        }
        (0..self.nodes.len() as u32)
            .filter(|&i| seen[i as usize])
            .map(NodeId)
            .collect()
    }

    /// Whether the predicate is the constant `true` (the empty filter).
    pub fn is_true(&self) -> bool {
        self.node(self.root) == &Node::Const(true)
    }

    /// Evaluate on a packet with libpcap's unoptimised semantics: `Some(verdict)`, or `None`
    /// when a read falls outside the captured bytes (or a division by zero happens), which
    /// rejects the packet. `data` is the captured bytes, `wire_len` the length on the wire.
    pub fn eval(&self, data: &[u8], wire_len: u32) -> Option<bool> {
        let mut st = EvalState {
            data,
            wire_len,
            acc: 0,
            mem: [0; 16],
        };
        st.node(self, self.root)
    }
}

struct EvalState<'a> {
    data: &'a [u8],
    wire_len: u32,
    /// What libpcap's code would have left in A (only observed by `byte &`/`byte |`).
    acc: u32,
    mem: [u32; 16],
}

impl EvalState<'_> {
    fn load(&self, at: u64, size: u8) -> Option<u32> {
        let at = usize::try_from(at).ok()?;
        let b = self.data.get(at..at.checked_add(usize::from(size))?)?;
        Some(b.iter().fold(0u32, |v, &x| (v << 8) | u32::from(x)))
    }

    /// X for loads after an IPv4 header at `nl`.
    fn ipv4_hlen(&self, nl: u64) -> Option<u64> {
        Some(u64::from(self.load(nl, 1)? & 0xf) * 4)
    }

    fn field(&self, f: &Field) -> Option<u32> {
        match *f {
            Field::WireLen => Some(self.wire_len),
            Field::Ancillary { .. } => None,
            Field::Packet { loc, size } => match loc {
                Loc::Abs(k) => self.load(u64::from(k), size),
                Loc::Ipv4Payload { nl, off } => {
                    // X = (4*ihl + off) mod 2^32, then [x + nl] without wrap-around.
                    let x = (self.ipv4_hlen(u64::from(nl))? as u32).wrapping_add(off);
                    self.load(u64::from(x) + u64::from(nl), size)
                }
                Loc::Var { reg, off } => self.load(
                    u64::from(self.mem[usize::from(reg & 15)]) + u64::from(off),
                    size,
                ),
                Loc::VarIpv4Payload { reg, nl, off } => {
                    let base = self.mem[usize::from(reg & 15)];
                    let h = self.load(u64::from(base) + u64::from(nl), 1)? & 0xf;
                    let x = (h << 2).wrapping_add(base);
                    self.load(u64::from(x) + u64::from(nl) + u64::from(off), size)
                }
            },
        }
    }

    fn val(&self, v: &Val) -> Option<u32> {
        Some(match v {
            Val::Const(c) => *c,
            Val::Len => self.wire_len,
            Val::Load { base, index, size } => {
                let i = self.val(index)?;
                match *base {
                    Base::Abs(k) => self.load(u64::from(i) + u64::from(k), *size)?,
                    Base::Ipv4Payload(nl) => {
                        let x = (self.ipv4_hlen(u64::from(nl))? as u32).wrapping_add(i);
                        self.load(u64::from(x) + u64::from(nl), *size)?
                    }
                    Base::Var(reg, off) => {
                        let x = self.mem[usize::from(reg & 15)].wrapping_add(i);
                        self.load(u64::from(x) + u64::from(off), *size)?
                    }
                    Base::VarIpv4Payload(reg, nl) => {
                        let b = self.mem[usize::from(reg & 15)];
                        let h = (self.load(u64::from(b) + u64::from(nl), 1)? & 0xf) << 2;
                        let x = h.wrapping_add(b).wrapping_add(i);
                        self.load(u64::from(x) + u64::from(nl), *size)?
                    }
                }
            }
            Val::Bin(op, a, b) => {
                let (a, b) = (self.val(a)?, self.val(b)?);
                arith(*op, a, b)?
            }
            Val::Neg(a) => self.val(a)?.wrapping_neg(),
        })
    }

    fn node(&mut self, p: &Pred, id: NodeId) -> Option<bool> {
        match p.node(id) {
            Node::Const(b) => {
                self.acc = u32::from(!*b);
                Some(*b)
            }
            Node::Test(t) => {
                let v = self.field(&t.field)?;
                let m = v & t.mask;
                self.acc = if matches!(t.cmp, Cmp::Bits(_)) { v } else { m };
                Some(match &t.cmp {
                    Cmp::Eq(k) => m == *k,
                    Cmp::Gt(k) => m > *k,
                    Cmp::Ge(k) => m >= *k,
                    Cmp::Bits(k) => m & *k != 0,
                    Cmp::OneOf(ks) => ks.contains(&m),
                    Cmp::Range(lo, hi) => *lo <= m && m <= *hi,
                })
            }
            Node::Relation(a, op, b) => {
                let (a, b) = (self.val(a)?, self.val(b)?);
                Some(match op {
                    RelOp::Gt => {
                        self.acc = a;
                        a > b
                    }
                    RelOp::Ge => {
                        self.acc = a;
                        a >= b
                    }
                    RelOp::Eq => {
                        self.acc = a.wrapping_sub(b);
                        a == b
                    }
                })
            }
            Node::And(ops) => {
                for &o in ops.iter() {
                    if !self.node(p, o)? {
                        return Some(false);
                    }
                }
                Some(true)
            }
            Node::Or(ops) => {
                for &o in ops.iter() {
                    if self.node(p, o)? {
                        return Some(true);
                    }
                }
                Some(false)
            }
            Node::Not(x) => Some(!self.node(p, *x)?),
            Node::Special(s) => self.special(s),
        }
    }

    fn special(&mut self, s: &Special) -> Option<bool> {
        match *s {
            Special::AccOp { or, val } => {
                self.acc = if or { self.acc | val } else { self.acc & val };
                Some(self.acc != 0)
            }
            Special::ProtoChain { nl, ipv6, proto } => {
                let nl = u64::from(nl);
                let r = protochain(self, nl, ipv6, proto)?;
                Some(r)
            }
            Special::RegsDiffer(a, b) => {
                let (a, b) = (self.mem[usize::from(a & 15)], self.mem[usize::from(b & 15)]);
                self.acc = a;
                Some(a != b)
            }
            Special::PflogOffset { payload } => {
                let v = self.load(0, 1)?.wrapping_add(3) & 0xffff_fffc;
                self.mem[usize::from(payload & 15)] = v;
                self.acc = v;
                Some(true)
            }
            Special::LinkOffsets {
                prefix,
                hdr,
                payload,
            } => {
                // The accumulator is left as the generated code leaves it (a following `byte N
                // & V` tests it).
                let mut x = 0u32;
                if let Some(h) = hdr {
                    let len = match prefix {
                        RadioHeader::None => 0,
                        RadioHeader::Radiotap | RadioHeader::Ppi => {
                            (self.load(3, 1)? << 8) | self.load(2, 1)?
                        }
                        RadioHeader::Avs => self.load(4, 4)?,
                        RadioHeader::Prism => {
                            if self.load(0, 4)? & 0xffff_f000 == 0x8021_1000 {
                                self.load(4, 4)?
                            } else {
                                144
                            }
                        }
                    };
                    self.mem[usize::from(h & 15)] = len;
                    x = len;
                    self.acc = len;
                }
                if let Some(pl) = payload {
                    let r = usize::from(pl & 15);
                    self.mem[r] = x.wrapping_add(24);
                    let fc = self.load(u64::from(x), 1)?;
                    self.acc = fc;
                    if fc & 0x08 != 0 && fc & 0x04 == 0 {
                        if fc & 0x80 != 0 {
                            self.mem[r] = self.mem[r].wrapping_add(2);
                            self.acc = self.mem[r];
                        }
                        if prefix == RadioHeader::Radiotap {
                            let present = self.load(4, 4)?;
                            self.acc = present;
                            if present & 0x0200_0000 != 0 && present & 0x0000_0080 == 0 {
                                let flags =
                                    self.load(if present & 0x0100_0000 != 0 { 16 } else { 8 }, 1)?;
                                self.acc = flags;
                                if flags & 0x20 != 0 {
                                    self.mem[r] = self.mem[r].wrapping_add(3) & !3;
                                    self.acc = self.mem[r];
                                }
                            }
                        }
                    }
                }
                Some(true)
            }
            Special::GeneveHeaderLen { nl, ipv6 } => {
                self.acc = if ipv6 {
                    match nl {
                        Base::Var(reg, _) | Base::VarIpv4Payload(reg, _) => {
                            self.mem[usize::from(reg & 15)].wrapping_add(40)
                        }
                        _ => 40,
                    }
                } else {
                    match nl {
                        Base::Abs(k) | Base::Ipv4Payload(k) => {
                            (self.load(u64::from(k), 1)? & 0xf) << 2
                        }
                        Base::Var(reg, _) | Base::VarIpv4Payload(reg, _) => {
                            let b = self.mem[usize::from(reg & 15)];
                            ((self.load(u64::from(b), 1)? & 0xf) << 2).wrapping_add(b)
                        }
                    }
                };
                Some(true)
            }
            Special::GeneveOffsets {
                nl,
                reg_type,
                reg_link,
                reg_payload,
            } => {
                let k = match nl {
                    Base::Abs(k) | Base::Ipv4Payload(k) => k,
                    Base::Var(_, off) => off,
                    Base::VarIpv4Payload(..) => 0,
                };
                let mut a = self.acc.wrapping_add(k).wrapping_add(8);
                let mut x = a;
                a = a.wrapping_add(2);
                self.mem[usize::from(reg_type & 15)] = a;
                a = self.load(u64::from(x), 1)?;
                a = ((a & 0x3f).wrapping_mul(4)).wrapping_add(8).wrapping_add(x);
                self.mem[usize::from(reg_link & 15)] = a;
                let proto = self.load(u64::from(x) + 2, 2)?;
                x = self.mem[usize::from(reg_link & 15)];
                if proto == 0x6558 {
                    a = x.wrapping_add(12);
                    self.mem[usize::from(reg_type & 15)] = a;
                    a = a.wrapping_add(2);
                    x = a;
                }
                self.mem[usize::from(reg_payload & 15)] = x;
                self.acc = 0;
                Some(true)
            }
        }
    }
}

/// libpcap's `protochain` loop, with its AH quirk (the offset after an AH header is not added to
/// the previous one) and a bound (libpcap can loop forever on crafted packets; this stops after
/// 10,000 steps and rejects).
fn protochain(st: &mut EvalState<'_>, nl: u64, ipv6: bool, v: u32) -> Option<bool> {
    let ind = |st: &EvalState<'_>, x: u32, k: u64| st.load(u64::from(x) + k, 1);
    // Instruction offsets are 32-bit: an unset network-layer offset wraps around, as in the
    // code (`ld [nl + 6]`).
    let at = |k: u32| u64::from((nl as u32).wrapping_add(k));
    let mut a;
    let mut x: u32;
    if ipv6 {
        a = st.load(at(6), 1)?;
        x = 40;
    } else {
        a = st.load(at(9), 1)?;
        x = (st.load(at(0), 1)? & 0xf) << 2;
    }
    for _ in 0..10_000 {
        if a == v || a == 59 {
            break;
        }
        if ipv6 && matches!(a, 0 | 60 | 43 | 44) {
            let next = ind(st, x, at(0))?;
            let len = ind(st, x, at(1))?;
            x = (len.wrapping_add(1).wrapping_mul(8)).wrapping_add(x);
            a = next;
            continue;
        }
        if a != 51 {
            break;
        }
        let next = ind(st, x, at(0))?;
        let x1 = x.wrapping_add(1);
        let len = ind(st, x1, at(0))?;
        x = len.wrapping_add(2).wrapping_mul(4);
        a = next;
    }
    st.acc = a;
    Some(a == v)
}

/// `a op b` with BPF semantics; `None` for division or modulo by zero.
pub fn arith(op: ArithOp, a: u32, b: u32) -> Option<u32> {
    Some(match op {
        ArithOp::Add => a.wrapping_add(b),
        ArithOp::Sub => a.wrapping_sub(b),
        ArithOp::Mul => a.wrapping_mul(b),
        ArithOp::Div => a.checked_div(b)?,
        ArithOp::Mod => a.checked_rem(b)?,
        ArithOp::And => a & b,
        ArithOp::Or => a | b,
        ArithOp::Xor => a ^ b,
        ArithOp::Shl => a.checked_shl(b).unwrap_or(0),
        ArithOp::Shr => a.checked_shr(b).unwrap_or(0),
    })
}

/// Builds a [`Pred`] through smart constructors that keep the invariants of the module.
#[derive(Debug, Default)]
pub struct Builder {
    nodes: Vec<Node>,
    /// Hash of a node → the last node interned with that hash; `same_hash` links each node to
    /// the one before with the same hash (`u32::MAX` ends). Nodes are stored once, in `nodes`.
    interned: FxHashMap<u64, u32>,
    same_hash: Vec<u32>,
    /// Scratch for the operands of a junction.
    ops: Vec<NodeId>,
    exact: bool,
    no_optimize: bool,
    /// Keep the reads before an `and`'s constant `false` (see [`Builder::keep_reads`]).
    keep_reads: bool,
}

impl Builder {
    /// Keep the operands before a constant `false` in an `and` (`x and false` stays that, not
    /// `false`): a read of `x` past the packet's end rejects the whole packet, also when the
    /// `and` is an operand of an `or` that would be true, as in libpcap's unoptimised code.
    /// For predicates meant to mean what libpcap's `-O0` program means.
    pub fn keep_reads(&mut self) {
        self.keep_reads = true;
    }

    /// A builder; `exact` disables all folding and merging (see the module documentation).
    pub fn new(exact: bool) -> Builder {
        Builder {
            exact,
            ..Builder::default()
        }
    }

    /// A builder with room for about `nodes` nodes.
    pub fn with_capacity(exact: bool, nodes: usize) -> Builder {
        Builder {
            nodes: Vec::with_capacity(nodes),
            interned: FxHashMap::with_capacity_and_hasher(nodes, Default::default()),
            same_hash: Vec::with_capacity(nodes),
            exact,
            ..Builder::default()
        }
    }

    /// Mark the predicate as one no optimiser may rewrite (see [`Pred::optimizable`]).
    pub fn forbid_optimization(&mut self) {
        self.no_optimize = true;
    }

    /// Whether this builder is in exact mode.
    pub fn exact(&self) -> bool {
        self.exact
    }

    /// The node `n`: the one made before if there is one, else a new one.
    fn intern(&mut self, n: Node) -> NodeId {
        let mut h = crate::fxhash::FxHasher::default();
        n.hash(&mut h);
        let hash = h.finish();
        let first = self.interned.get(&hash).copied().unwrap_or(u32::MAX);
        let mut at = first;
        while at != u32::MAX {
            if self.nodes[at as usize] == n {
                return NodeId(at);
            }
            at = self.same_hash[at as usize];
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(n);
        self.same_hash.push(first);
        self.interned.insert(hash, id);
        NodeId(id)
    }

    /// A node's content.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// A constant.
    pub fn constant(&mut self, b: bool) -> NodeId {
        self.intern(Node::Const(b))
    }

    /// A field test.
    pub fn test(&mut self, field: Field, mask: u32, cmp: Cmp) -> NodeId {
        self.intern(Node::Test(Test {
            field,
            mask,
            cmp,
            relation: false,
        }))
    }

    /// `field & mask == v` (mask `0xffffffff` for none).
    pub fn eq(&mut self, field: Field, mask: u32, v: u32) -> NodeId {
        self.test(field, mask, Cmp::Eq(v))
    }

    /// An arithmetic relation. Outside exact mode, `load [& m] op constant` becomes a field
    /// test (the same read and comparison).
    pub fn relation(&mut self, a: Val, op: RelOp, b: Val) -> NodeId {
        if !self.exact
            && let Val::Const(k) = b
            && let Some((field, mask)) = simple_field(&a)
        {
            let cmp = match op {
                RelOp::Gt => Cmp::Gt(k),
                RelOp::Ge => Cmp::Ge(k),
                RelOp::Eq => Cmp::Eq(k),
            };
            return self.intern(Node::Test(Test {
                field,
                mask,
                cmp,
                relation: true,
            }));
        }
        self.intern(Node::Relation(a, op, b))
    }

    /// A special node.
    pub fn special(&mut self, s: Special) -> NodeId {
        self.intern(Node::Special(s))
    }

    /// Negation.
    pub fn not(&mut self, x: NodeId) -> NodeId {
        if !self.exact {
            match self.node(x) {
                Node::Const(b) => return self.constant(!*b),
                Node::Not(y) => return *y,
                _ => {}
            }
        }
        self.intern(Node::Not(x))
    }

    /// `a and b`.
    pub fn and(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.junction(true, a, b)
    }

    /// `a or b`.
    pub fn or(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.junction(false, a, b)
    }

    fn junction(&mut self, is_and: bool, a: NodeId, b: NodeId) -> NodeId {
        self.junction_all(is_and, &[a, b])
    }

    /// All of `ops`, left to right (`and`), with the same folding as [`Builder::and`].
    pub fn and_all(&mut self, ops: &[NodeId]) -> NodeId {
        self.junction_all(true, ops)
    }

    /// Any of `ops`, left to right (`or`), with the same folding as [`Builder::or`].
    pub fn or_all(&mut self, ops: &[NodeId]) -> NodeId {
        self.junction_all(false, ops)
    }

    fn junction_all(&mut self, is_and: bool, input: &[NodeId]) -> NodeId {
        if self.exact {
            // libpcap's shape: a left-nested chain of binary nodes.
            let mut it = input.iter().copied();
            let Some(mut acc) = it.next() else {
                return self.constant(is_and);
            };
            for x in it {
                let ops = Ops::new(&[acc, x]);
                acc = self.intern(if is_and {
                    Node::And(ops)
                } else {
                    Node::Or(ops)
                });
            }
            return acc;
        }
        // Identity and absorbing constants: `true and x`, `false or x` → x; `x and false` →
        // false; `true or x` → true; `x and true`, `x or false` → x.
        let (unit, absorb) = (is_and, !is_and);
        let mut ops = std::mem::take(&mut self.ops);
        ops.clear();
        for &x in input {
            match &self.nodes[x.0 as usize] {
                Node::Const(c) if *c == unit => {}
                Node::Const(c) if *c == absorb => {
                    // `false` after reads: for `and` the result is false either way (unless
                    // the reads must stay, see `keep_reads`); for `or`, `true` after reads
                    // must keep the reads.
                    if (is_and && !self.keep_reads) || ops.is_empty() {
                        self.ops = ops;
                        return self.constant(absorb);
                    }
                    ops.push(x);
                    break;
                }
                Node::And(inner) if is_and => ops.extend_from_slice(inner),
                Node::Or(inner) if !is_and => ops.extend_from_slice(inner),
                _ => ops.push(x),
            }
        }
        self.merge_adjacent(is_and, &mut ops);
        let id = match ops.len() {
            0 => self.constant(unit),
            1 => ops[0],
            _ => {
                let ops = Ops::new(&ops);
                self.intern(if is_and {
                    Node::And(ops)
                } else {
                    Node::Or(ops)
                })
            }
        };
        self.ops = ops;
        id
    }

    /// Merge neighbours that test one field under one mask (see the module documentation), in
    /// place.
    fn merge_adjacent(&mut self, is_and: bool, ops: &mut Vec<NodeId>) {
        let mut kept = 0;
        for i in 0..ops.len() {
            let x = ops[i];
            if kept > 0
                && let Some(m) = self.merge_pair(is_and, ops[kept - 1], x)
            {
                ops[kept - 1] = m;
                continue;
            }
            ops[kept] = x;
            kept += 1;
        }
        ops.truncate(kept);
    }

    /// The merge of `a` and `b` (the second negated for `and`) when both test one field under
    /// one mask (see the module documentation).
    fn merge_pair(&mut self, is_and: bool, a: NodeId, b: NodeId) -> Option<NodeId> {
        fn test(n: &Node) -> Option<&Test> {
            match n {
                Node::Test(t) => Some(t),
                _ => None,
            }
        }
        let t1 = test(self.node(a))?;
        let t2 = if is_and {
            match self.node(b) {
                Node::Not(x) => test(self.node(*x))?,
                _ => return None,
            }
        } else {
            test(self.node(b))?
        };
        if (t1.field, t1.mask, t1.relation) != (t2.field, t2.mask, t2.relation) {
            return None;
        }
        let cmp = if is_and {
            // f >= lo and not f > hi  →  f in [lo, hi]
            match (&t1.cmp, &t2.cmp) {
                (Cmp::Ge(lo), Cmp::Gt(hi)) if lo <= hi => Cmp::Range(*lo, *hi),
                _ => return None,
            }
        } else {
            let mut vals: Vec<u32> = match &t1.cmp {
                Cmp::Eq(v) => vec![*v],
                Cmp::OneOf(vs) => vs.to_vec(),
                _ => return None,
            };
            match &t2.cmp {
                Cmp::Eq(v) => vals.push(*v),
                Cmp::OneOf(vs) => vals.extend(vs.iter().copied()),
                _ => return None,
            }
            let mut seen = crate::fxhash::FxHashSet::default();
            vals.retain(|v| seen.insert(*v));
            Cmp::OneOf(vals.into_boxed_slice())
        };
        let merged = Test { cmp, ..t1.clone() };
        Some(self.intern(Node::Test(merged)))
    }

    /// Finish with `root`.
    pub fn finish(self, root: NodeId) -> Pred {
        Pred {
            any_special: self.nodes.iter().any(Node::is_special),
            nodes: self.nodes,
            root,
            exact: self.exact,
            no_optimize: self.no_optimize,
        }
    }
}

/// `load` or `load & mask` with a constant index: the field and mask a test can use.
fn simple_field(v: &Val) -> Option<(Field, u32)> {
    let field = |v: &Val| -> Option<Field> {
        match v {
            Val::Len => Some(Field::WireLen),
            Val::Load { base, index, size } => {
                let Val::Const(i) = **index else { return None };
                let loc = match *base {
                    Base::Abs(k) => Loc::Abs(k.checked_add(i)?),
                    Base::Ipv4Payload(nl) => Loc::Ipv4Payload { nl, off: i },
                    _ => return None,
                };
                Some(Field::Packet { loc, size: *size })
            }
            _ => None,
        }
    };
    match v {
        Val::Bin(ArithOp::And, a, b) => match (&**a, &**b) {
            (x, Val::Const(m)) => Some((field(x)?, *m)),
            _ => None,
        },
        x => Some((field(x)?, u32::MAX)),
    }
}

impl fmt::Display for Pred {
    /// A readable rendering, one node per line (`netsift compile --dump pred`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for id in self.reachable() {
            write!(f, "n{} = ", id.0)?;
            match self.node(id) {
                Node::Const(b) => write!(f, "{b}")?,
                Node::Test(t) => write!(f, "{}", DisplayTest(t))?,
                Node::Relation(a, op, b) => write!(f, "{a:?} {op:?} {b:?}")?,
                Node::And(ops) => write!(f, "and({})", join(ops))?,
                Node::Or(ops) => write!(f, "or({})", join(ops))?,
                Node::Not(x) => write!(f, "not n{}", x.0)?,
                Node::Special(s) => write!(f, "{s:?}")?,
            }
            writeln!(f)?;
        }
        write!(f, "root n{}", self.root.0)
    }
}

fn join(ops: &[NodeId]) -> String {
    ops.iter()
        .map(|o| format!("n{}", o.0))
        .collect::<Vec<_>>()
        .join(", ")
}

struct DisplayTest<'a>(&'a Test);

impl fmt::Display for DisplayTest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0;
        match t.field {
            Field::WireLen => write!(f, "len")?,
            Field::Ancillary { k, size } => write!(f, "ancillary[{k}:{size}]")?,
            Field::Packet { loc, size } => match loc {
                Loc::Abs(k) => write!(f, "pkt[{k}:{size}]")?,
                Loc::Ipv4Payload { nl, off } => write!(f, "ip4payload@{nl}[{off}:{size}]")?,
                Loc::Var { reg, off } => write!(f, "pkt[M{reg}+{off}:{size}]")?,
                Loc::VarIpv4Payload { reg, nl, off } => {
                    write!(f, "ip4payload@M{reg}+{nl}[{off}:{size}]")?
                }
            },
        }
        if t.mask != u32::MAX {
            write!(f, " & 0x{:x}", t.mask)?;
        }
        match &t.cmp {
            Cmp::Eq(v) => write!(f, " == 0x{v:x}"),
            Cmp::Gt(v) => write!(f, " > 0x{v:x}"),
            Cmp::Ge(v) => write!(f, " >= 0x{v:x}"),
            Cmp::Bits(v) => write!(f, " has bits 0x{v:x}"),
            Cmp::OneOf(vs) => write!(
                f,
                " in {{{}}}",
                vs.iter()
                    .map(|v| format!("0x{v:x}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Cmp::Range(lo, hi) => write!(f, " in [0x{lo:x}, 0x{hi:x}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(k: u32) -> Field {
        Field::Packet {
            loc: Loc::Abs(k),
            size: 2,
        }
    }

    #[test]
    fn constants_fold_without_losing_reads() {
        let mut b = Builder::new(false);
        let t = b.eq(f(12), u32::MAX, 0x800);
        let tr = b.constant(true);
        let fa = b.constant(false);
        assert_eq!(b.and(tr, t), t);
        assert_eq!(b.and(t, tr), t);
        assert_eq!(b.and(t, fa), fa);
        assert_eq!(b.or(fa, t), t);
        assert_eq!(b.or(tr, t), tr);
        // `t or true` keeps t: its read may reject the packet.
        let x = b.or(t, tr);
        assert_eq!(b.node(x), &Node::Or(Ops::new(&[t, tr])));
        let n = b.not(t);
        assert_eq!(b.not(n), t);
    }

    #[test]
    fn adjacent_tests_merge() {
        let mut b = Builder::new(false);
        let t1 = b.eq(f(12), u32::MAX, 1);
        let t2 = b.eq(f(12), u32::MAX, 2);
        let t3 = b.eq(f(14), u32::MAX, 3);
        let t4 = b.eq(f(12), u32::MAX, 4);
        let o = b.or(t1, t2);
        assert_eq!(
            b.node(o),
            &Node::Test(Test {
                field: f(12),
                mask: u32::MAX,
                cmp: Cmp::OneOf(Box::new([1, 2])),
                relation: false,
            })
        );
        // Not adjacent: no merge across another field.
        let o2 = b.or(o, t3);
        let o3 = b.or(o2, t4);
        assert!(matches!(b.node(o3), Node::Or(ops) if ops.len() == 3));
        let ge = b.test(f(20), u32::MAX, Cmp::Ge(10));
        let gt = b.test(f(20), u32::MAX, Cmp::Gt(20));
        let ngt = b.not(gt);
        let r = b.and(ge, ngt);
        assert_eq!(
            b.node(r),
            &Node::Test(Test {
                field: f(20),
                mask: u32::MAX,
                cmp: Cmp::Range(10, 20),
                relation: false,
            })
        );
    }

    #[test]
    fn exact_mode_keeps_everything() {
        let mut b = Builder::new(true);
        let t = b.eq(f(12), u32::MAX, 1);
        let tr = b.constant(true);
        let x = b.and(tr, t);
        assert_eq!(b.node(x), &Node::And(Ops::new(&[tr, t])));
    }

    #[test]
    fn eval_rejects_on_short_packets() {
        let mut b = Builder::new(false);
        let t = b.eq(f(100), u32::MAX, 1);
        let tr = b.constant(true);
        let x = b.or(t, tr);
        let p = b.finish(x);
        assert_eq!(p.eval(&[0; 20], 20), None);
        assert_eq!(p.eval(&[0; 200], 200), Some(true));
    }
}
