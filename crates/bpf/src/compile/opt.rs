//! The optimiser: path-specialised decision graphs.
//!
//! 1. **Decision graph.** The predicate becomes a graph whose nodes are its atomic tests, each
//!    with a successor for "true" and one for "false" (the control flow of short-circuit
//!    evaluation, exactly the unoptimised program's). Constant-valued arithmetic is folded
//!    first (`x * 0`, `x & 0`: libpcap's optimiser folds these too, dropping the read).
//! 2. **Specialisation.** The graph is walked from the root carrying *facts* — what the tests
//!    taken so far proved about each field (its exact value, values it is not, a range, bits
//!    known set or clear). A test whose outcome the facts decide is skipped: it reads a field
//!    an earlier test on the same path already read, so skipping it cannot change which packets
//!    are rejected for lack of bytes. Results are memoised on (node, facts about fields still
//!    to be tested), and nodes are hash-consed, so identical sub-graphs (the ARP and RARP
//!    address tests of `host X`, the port tests shared by TCP, UDP and SCTP) exist once. A test
//!    whose two successors are the same is dropped, as libpcap drops it. A path whose facts
//!    contradict everything "accept" needs below its node (see `Needs`: the ARP path into a
//!    `tcp port` test) is rejected there, without walking the graph below.
//! 3. **Emission.** Each node becomes a block; a block does not reload A (or X) when every
//!    predecessor leaves the value it needs there; `and #m; jeq #0` becomes `jset #m`.
//!
//! `expression rejects all packets` is reported, as by libpcap, only when the filter is
//! constant-false by reasoning libpcap's optimiser also does (equalities and repeated tests);
//! a filter netsift alone can prove empty (`ether[0] > 5 and ether[0] < 3`) compiles to a
//! program that rejects everything, as libpcap's does.

use netsift_lang::fxhash::FxHashMap as HashMap;
use std::hash::Hasher;
use std::rc::Rc;

use netsift_lang::Pred;
use netsift_lang::pred::{self, ArithOp, Base, Cmp, Field, Loc, Node, NodeId, RelOp, Test, Val};

use super::cfg::{BlockId, Cfg, Term};
use super::emit::{ValCompiler, push_load_field, size_bits};
use super::{CompileError, CompileErrorKind};
use crate::insn::{Insn, code::*};

mod ids;

use ids::{AtomId, Edge, FactSetId, Key, KnowId, NeedId, NodeIx, Ref, ValueKey, fact_word, word};

/// An atomic test of the decision graph.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Atom {
    Test(Test),
    /// An arithmetic relation `lhs op rhs` (after folding), opaque to the facts.
    Rel(Val, RelOp, Val),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct GNode {
    atom: AtomId,
    t: Ref,
    f: Ref,
}

/// A small inline set of values (bounded: forgetting values only means fewer tests skipped).
/// Unused slots are always 0, so the derived equality is set equality of insertion order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Small<const N: usize> {
    len: u8,
    vals: [u32; N],
}

impl<const N: usize> std::hash::Hash for Small<N> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_u8(self.len);
        for &v in self.as_slice() {
            h.write_u32(v);
        }
    }
}

impl<const N: usize> Small<N> {
    const EMPTY: Small<N> = Small {
        len: 0,
        vals: [0; N],
    };

    fn as_slice(&self) -> &[u32] {
        &self.vals[..usize::from(self.len)]
    }

    fn contains(&self, v: u32) -> bool {
        self.as_slice().contains(&v)
    }

    fn insert(&mut self, v: u32) {
        if !self.contains(v) && usize::from(self.len) < N {
            self.vals[usize::from(self.len)] = v;
            self.len += 1;
        }
    }

    /// The set of `vs` (which must fit).
    fn from_slice(vs: &[u32]) -> Small<N> {
        let mut s = Small::EMPTY;
        for &v in vs {
            s.insert(v);
        }
        s
    }

    /// Both sets' values, if they fit.
    fn union(&self, o: &Small<N>) -> Option<Small<N>> {
        let mut s = *self;
        for &v in o.as_slice() {
            if !s.contains(v) {
                if usize::from(s.len) == N {
                    return None;
                }
                s.insert(v);
            }
        }
        Some(s)
    }
}

/// What the tests on one path proved about one field (under one mask).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Know {
    eq: Option<u32>,
    ne: Small<12>,
    lo: u32,
    hi: u32,
    set: u32,
    clear: u32,
    /// Outcomes of jset/range tests seen (`(k, outcome)`; other kinds are covered above).
    seen_bits: Small<4>,
    seen_true: u8,
}

impl Know {
    /// A value known but compared with no later test: every later equality test is false. Its
    /// `eq` is a placeholder; only keys tested below for equality alone are given it.
    const OTHER: Know = Know {
        eq: Some(u32::MAX),
        ne: Small::EMPTY,
        lo: 1,
        hi: 0,
        set: 0,
        clear: 0,
        seen_bits: Small::EMPTY,
        seen_true: 0,
    };

    fn new(hi: u32) -> Know {
        Know {
            eq: None,
            ne: Small::EMPTY,
            lo: 0,
            hi,
            set: 0,
            clear: 0,
            seen_bits: Small::EMPTY,
            seen_true: 0,
        }
    }

    fn possible(&self, v: u32) -> bool {
        self.eq.is_none_or(|e| e == v)
            && !self.ne.contains(v)
            && v >= self.lo
            && v <= self.hi
            && v & self.clear == 0
            && v & self.set == self.set
    }

    /// What two paths both know: the strongest knowledge implied by each of `self` and `o`.
    fn join(&self, o: &Know) -> Know {
        if *self == Know::OTHER || *o == Know::OTHER {
            return if self == o {
                *self
            } else {
                Know::new(u32::MAX)
            };
        }
        let mut ne = Small::EMPTY;
        for &v in self.ne.as_slice() {
            if o.ne.contains(v) {
                ne.insert(v);
            }
        }
        let mut seen_bits = Small::EMPTY;
        let mut seen_true = 0;
        for (i, &b) in self.seen_bits.as_slice().iter().enumerate() {
            if let Some(j) = o.seen_bits.as_slice().iter().position(|&x| x == b) {
                let t = self.seen_true & (1 << i) != 0;
                if t == (o.seen_true & (1 << j) != 0) {
                    if t {
                        seen_true |= 1 << seen_bits.len;
                    }
                    seen_bits.insert(b);
                }
            }
        }
        Know {
            eq: if self.eq == o.eq { self.eq } else { None },
            ne,
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
            set: self.set & o.set,
            clear: self.clear & o.clear,
            seen_bits,
            seen_true,
        }
    }

    fn decide(&self, cmp: &Cmp, weak: bool) -> Option<bool> {
        if *self == Know::OTHER {
            return matches!(cmp, Cmp::Eq(_) | Cmp::OneOf(_)).then_some(false);
        }
        // The same jset seen before on this path.
        if let Cmp::Bits(b) = cmp
            && let Some(i) = self.seen_bits.as_slice().iter().position(|x| x == b)
        {
            return Some(self.seen_true & (1 << i) != 0);
        }
        if weak {
            // libpcap knows the value after a true `jeq` and the values excluded by false
            // ones; a set test is its chain of `jeq`s.
            let eq = |v: &u32| match self.eq {
                Some(e) => Some(e == *v),
                None if self.ne.contains(*v) => Some(false),
                None => None,
            };
            return match cmp {
                Cmp::Eq(v) => eq(v),
                Cmp::OneOf(vs) => {
                    let outcomes: Vec<Option<bool>> = vs.iter().map(eq).collect();
                    if outcomes.contains(&Some(true)) {
                        Some(true)
                    } else if outcomes.iter().all(|o| *o == Some(false)) {
                        Some(false)
                    } else {
                        None
                    }
                }
                _ => None,
            };
        }
        if let Some(e) = self.eq {
            return Some(eval_cmp(cmp, e));
        }
        match cmp {
            Cmp::Eq(v) => (!self.possible(*v)).then_some(false),
            Cmp::Gt(v) => {
                if self.lo > *v {
                    Some(true)
                } else if self.hi <= *v {
                    Some(false)
                } else {
                    None
                }
            }
            Cmp::Ge(v) => {
                if self.lo >= *v {
                    Some(true)
                } else if self.hi < *v {
                    Some(false)
                } else {
                    None
                }
            }
            Cmp::Bits(b) => {
                if b & self.set != 0 {
                    Some(true)
                } else if b & !self.clear == 0 || self.hi < (b & b.wrapping_neg()) {
                    Some(false)
                } else {
                    None
                }
            }
            Cmp::OneOf(vs) => (!vs.iter().any(|v| self.possible(*v))).then_some(false),
            Cmp::Range(a, b) => {
                if self.lo >= *a && self.hi <= *b {
                    Some(true)
                } else if self.hi < *a || self.lo > *b {
                    Some(false)
                } else {
                    None
                }
            }
        }
    }

    fn learn(&mut self, cmp: &Cmp, outcome: bool, weak: bool) {
        if let Cmp::Bits(b) = cmp
            && !self.seen_bits.contains(*b)
            && self.seen_bits.len < 4
        {
            if outcome {
                self.seen_true |= 1 << self.seen_bits.len;
            }
            self.seen_bits.insert(*b);
        }
        let insert_ne = |k: &mut Know, v: u32| k.ne.insert(v);
        match (cmp, outcome) {
            (Cmp::Eq(v), true) => {
                self.eq = Some(*v);
                if !weak {
                    self.lo = *v;
                    self.hi = *v;
                }
            }
            (Cmp::Eq(v), false) => insert_ne(self, *v),
            (Cmp::OneOf(vs), false) if weak => {
                for &v in vs.iter() {
                    insert_ne(self, v);
                }
            }
            _ if weak => {}
            (Cmp::Gt(v), true) => self.lo = self.lo.max(v.saturating_add(1)),
            (Cmp::Gt(v), false) => self.hi = self.hi.min(*v),
            (Cmp::Ge(v), true) => self.lo = self.lo.max(*v),
            (Cmp::Ge(v), false) => {
                if *v > 0 {
                    self.hi = self.hi.min(v - 1);
                }
            }
            (Cmp::Bits(b), true) => {
                if b.is_power_of_two() {
                    self.set |= b;
                }
            }
            (Cmp::Bits(b), false) => self.clear |= b,
            (Cmp::OneOf(vs), true) => {
                if let (Some(mn), Some(mx)) = (vs.iter().min(), vs.iter().max()) {
                    self.lo = self.lo.max(*mn);
                    self.hi = self.hi.min(*mx);
                }
            }
            (Cmp::OneOf(vs), false) => {
                for &v in vs.iter() {
                    insert_ne(self, v);
                }
            }
            (Cmp::Range(a, b), true) => {
                self.lo = self.lo.max(*a);
                self.hi = self.hi.min(*b);
            }
            (Cmp::Range(..), false) => {}
        }
    }
}

fn eval_cmp(cmp: &Cmp, v: u32) -> bool {
    match cmp {
        Cmp::Eq(k) => v == *k,
        Cmp::Gt(k) => v > *k,
        Cmp::Ge(k) => v >= *k,
        Cmp::Bits(k) => v & *k != 0,
        Cmp::OneOf(ks) => ks.contains(&v),
        Cmp::Range(a, b) => *a <= v && v <= *b,
    }
}

/// The largest value a field under a mask can have.
fn max_value(field: &Field, mask: u32) -> u32 {
    let size_max = match field {
        Field::Packet { size: 1, .. } | Field::Ancillary { size: 1, .. } => 0xff,
        Field::Packet { size: 2, .. } | Field::Ancillary { size: 2, .. } => 0xffff,
        _ => u32::MAX,
    };
    size_max & mask
}

/// Facts on a path as libpcap's optimiser knows them (see [`libpcap_rejects_all`]): (value
/// key, knowledge) sorted by key. Keys are field/mask pairs; other tests use keys of their own
/// (their outcome as `eq` 0 or 1).
type Facts = Vec<(ValueKey, Know)>;

/// A decision graph. Its atoms (and their keys) are shared with the graphs made from it: they
/// are made while the first is built, and never change after.
struct Graph {
    atoms: Rc<Vec<Atom>>,
    atom_ids: HashMap<Atom, AtomId>,
    /// Fact key of each atom.
    keys: Rc<Vec<Key>>,
    key_ids: HashMap<(Field, u32), Key>,
    nodes: Vec<GNode>,
    node_ids: HashMap<GNode, Ref>,
}

impl Graph {
    /// An empty graph, sized for about `nodes` nodes.
    fn with_capacity(nodes: usize) -> Graph {
        Graph {
            atoms: Rc::new(Vec::with_capacity(nodes / 2)),
            atom_ids: HashMap::with_capacity_and_hasher(nodes / 2, Default::default()),
            keys: Rc::new(Vec::with_capacity(nodes / 2)),
            key_ids: HashMap::default(),
            nodes: Vec::with_capacity(nodes),
            node_ids: HashMap::with_capacity_and_hasher(nodes, Default::default()),
        }
    }

    /// A graph with this one's atoms and no nodes (the atom maps are not needed after the
    /// decision graph is built).
    fn empty_like(&self) -> Graph {
        Graph {
            atoms: Rc::clone(&self.atoms),
            atom_ids: HashMap::default(),
            keys: Rc::clone(&self.keys),
            key_ids: HashMap::default(),
            nodes: Vec::with_capacity(self.nodes.len() / 2),
            node_ids: HashMap::with_capacity_and_hasher(self.nodes.len() / 2, Default::default()),
        }
    }

    fn intern_atom(&mut self, a: Atom) -> AtomId {
        if let Some(&id) = self.atom_ids.get(&a) {
            return id;
        }
        let id = AtomId::new(self.atoms.len());
        let key = match &a {
            Atom::Test(t) => {
                let n = Key::field(self.key_ids.len());
                *self.key_ids.entry((t.field, t.mask)).or_insert(n)
            }
            Atom::Rel(..) => Key::relation(id),
        };
        // Only the graph being built makes atoms, and nothing shares them yet.
        Rc::make_mut(&mut self.keys).push(key);
        Rc::make_mut(&mut self.atoms).push(a.clone());
        self.atom_ids.insert(a, id);
        id
    }

    fn node(&mut self, atom: AtomId, t: Ref, f: Ref) -> Ref {
        if t == f {
            return t;
        }
        let n = GNode { atom, t, f };
        if let Some(&r) = self.node_ids.get(&n) {
            return r;
        }
        let r = Ref::from(NodeIx::new(self.nodes.len()));
        self.nodes.push(n);
        self.node_ids.insert(n, r);
        r
    }

    fn get(&self, ix: NodeIx) -> GNode {
        self.nodes[ix.index()]
    }

    fn atom(&self, a: AtomId) -> &Atom {
        &self.atoms[a.index()]
    }

    fn key(&self, a: AtomId) -> Key {
        self.keys[a.index()]
    }

    /// The comparison of `a`'s test (a relation's outcome is compared with 1).
    fn cmp(&self, a: AtomId) -> &Cmp {
        match self.atom(a) {
            Atom::Test(t) => &t.cmp,
            Atom::Rel(..) => &Cmp::Eq(1),
        }
    }
}

/// Fold constant arithmetic as libpcap's optimiser does (dropping reads whose value cannot
/// matter); errors for constant division by zero and shifts above 31.
fn fold(v: &Val) -> Result<Val, CompileError> {
    Ok(match v {
        Val::Const(_) | Val::Len => v.clone(),
        Val::Neg(a) => match fold(a)? {
            Val::Const(c) => Val::Const(c.wrapping_neg()),
            a => Val::Neg(Box::new(a)),
        },
        Val::Load { base, index, size } => Val::Load {
            base: *base,
            index: Box::new(fold(index)?),
            size: *size,
        },
        Val::Bin(op, a, b) => {
            let (a, b) = (fold(a)?, fold(b)?);
            let bad = |m| Err(CompileError::new(CompileErrorKind::BadConstant(m)));
            match (&a, &b) {
                (Val::Const(x), Val::Const(y)) => match pred::arith(*op, *x, *y) {
                    Some(r) => Val::Const(r),
                    None if *op == ArithOp::Div => return bad("division by zero"),
                    None => return bad("modulus by zero"),
                },
                (_, Val::Const(0)) => match op {
                    ArithOp::Mul | ArithOp::And => Val::Const(0),
                    ArithOp::Div => return bad("division by zero"),
                    ArithOp::Mod => return bad("modulus by zero"),
                    _ => a,
                },
                (_, Val::Const(k)) if *k > 31 && matches!(op, ArithOp::Shl | ArithOp::Shr) => {
                    return bad("shift by more than 31 bits");
                }
                // libpcap folds these too, `0 / x` and `0 % x` included; `0 - x` is `-x`.
                (Val::Const(0), _) if *op != ArithOp::Sub => match op {
                    ArithOp::Add | ArithOp::Or | ArithOp::Xor => b,
                    _ => Val::Const(0),
                },
                _ => Val::Bin(*op, Box::new(a), Box::new(b)),
            }
        }
    })
}

/// A field test equivalent to `v op k`, when `v` is a (masked) load at a constant place.
fn as_test(v: &Val, op: RelOp, k: u32) -> Option<Test> {
    let (inner, mask) = match v {
        Val::Bin(ArithOp::And, a, m) => match **m {
            Val::Const(m) => (&**a, m),
            _ => return None,
        },
        v => (v, u32::MAX),
    };
    let field = match inner {
        Val::Len => Field::WireLen,
        Val::Load { base, index, size } => {
            let Val::Const(i) = **index else { return None };
            let loc = match *base {
                Base::Abs(b) => Loc::Abs(b.checked_add(i)?),
                Base::Ipv4Payload(nl) => Loc::Ipv4Payload { nl, off: i },
                _ => return None,
            };
            Field::Packet { loc, size: *size }
        }
        _ => return None,
    };
    let cmp = match op {
        RelOp::Gt => Cmp::Gt(k),
        RelOp::Ge => Cmp::Ge(k),
        RelOp::Eq => Cmp::Eq(k),
    };
    Some(Test {
        field,
        mask,
        cmp,
        relation: true,
    })
}

/// The atom of a test or relation node of the predicate, or the constant it folds to: made
/// once per node however many places of the decision graph it is built in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Atomic {
    Const(bool),
    Atom(AtomId),
}

/// Build the decision graph of `node` with successors `t` and `f`.
fn build(
    pred: &Pred,
    g: &mut Graph,
    memo: &mut HashMap<(NodeId, Ref, Ref), Ref>,
    atoms: &mut [Option<Atomic>],
    node: NodeId,
    t: Ref,
    f: Ref,
) -> Result<Ref, CompileError> {
    if let Some(&r) = memo.get(&(node, t, f)) {
        return Ok(r);
    }
    let r = match pred.node(node) {
        Node::Const(b) => {
            if *b {
                t
            } else {
                f
            }
        }
        Node::Not(x) => build(pred, g, memo, atoms, *x, f, t)?,
        Node::And(ops) => {
            let mut next = t;
            for &o in ops.iter().rev() {
                next = build(pred, g, memo, atoms, o, next, f)?;
            }
            next
        }
        Node::Or(ops) => {
            let mut next = f;
            for &o in ops.iter().rev() {
                next = build(pred, g, memo, atoms, o, t, next)?;
            }
            next
        }
        n @ (Node::Test(_) | Node::Relation(..)) => {
            let atom = match atoms[node.0 as usize] {
                Some(a) => a,
                None => *atoms[node.0 as usize].insert(atomic(g, n)?),
            };
            match atom {
                Atomic::Const(holds) => {
                    if holds {
                        t
                    } else {
                        f
                    }
                }
                Atomic::Atom(a) => g.node(a, t, f),
            }
        }
        Node::Special(_) => unreachable!("filters with special nodes are not optimised"),
    };
    memo.insert((node, t, f), r);
    Ok(r)
}

/// What a test or relation node becomes in the decision graph.
fn atomic(g: &mut Graph, n: &Node) -> Result<Atomic, CompileError> {
    Ok(match n {
        Node::Relation(a, op, b) => {
            let (a, b) = (fold(a)?, fold(b)?);
            match (&a, &b) {
                (Val::Const(x), Val::Const(y)) => Atomic::Const(match op {
                    RelOp::Gt => x > y,
                    RelOp::Ge => x >= y,
                    RelOp::Eq => x == y,
                }),
                (_, Val::Const(k)) if as_test(&a, *op, *k).is_some() => {
                    let test = as_test(&a, *op, *k).unwrap_or_else(|| unreachable!());
                    test_atom(g, test)
                }
                _ => Atomic::Atom(g.intern_atom(Atom::Rel(a, *op, b))),
            }
        }
        Node::Test(test) => test_atom(g, test.clone()),
        _ => unreachable!("only tests and relations become atoms"),
    })
}

fn test_atom(g: &mut Graph, test: Test) -> Atomic {
    // A value masked to 0 is constant: libpcap's optimiser drops the read.
    if test.mask == 0 {
        return Atomic::Const(eval_cmp(&test.cmp, 0));
    }
    Atomic::Atom(g.intern_atom(Atom::Test(test)))
}

/// Keys (fields) tested at or below each node, as bitsets: a fact about a key that no later
/// test reads cannot make a difference, so it is dropped before memoising on the facts.
///
/// It also records, for every value compared for equality with a key, the lowest node that
/// compares it: an excluded value (`Know::ne`) can only decide a later test of that value, and
/// later nodes have smaller refs, so a value no node at or below a node tests is dropped there.
/// Without this, long `or`s whose terms exclude different values (`host X1 and port Y1 or host
/// X2 and port Y2 …`) specialise each later term once per path through the earlier ones.
///
/// Likewise a known value (`Know::eq`) that no test at or below compares with, on a key tested
/// below only for equality, decides every one of those tests as false, whatever the value: it
/// is replaced by [`Know::OTHER`], so the paths that learned different such values share code.
struct Liveness {
    words: usize,
    bits: Vec<u64>,
    /// Keys tested at or below each node other than for equality (ranges, bits).
    rich: Vec<u64>,
    /// (key, value) → the lowest node testing `key == value` (or a set holding it).
    lowest_eq: HashMap<(Key, u32), NodeIx>,
}

impl Liveness {
    fn new(g: &Graph) -> Liveness {
        let nkeys = g.keys.iter().filter(|k| !k.is_relation()).count().max(1);
        let words = nkeys.div_ceil(64).max(1);
        let mut bits = vec![0u64; g.nodes.len() * words];
        let mut rich = vec![0u64; g.nodes.len() * words];
        let mut lowest_eq: HashMap<(Key, u32), NodeIx> =
            HashMap::with_capacity_and_hasher(g.atoms.len(), Default::default());
        // Successors have smaller refs, so one pass in creation order suffices.
        for i in 0..g.nodes.len() {
            let n = g.nodes[i];
            let k = g.key(n.atom);
            let field = k.field_index();
            if let Atom::Test(t) = g.atom(n.atom) {
                let vals: &[u32] = match &t.cmp {
                    Cmp::Eq(v) => std::slice::from_ref(v),
                    Cmp::OneOf(vs) => vs,
                    _ => &[],
                };
                for &v in vals {
                    lowest_eq.entry((k, v)).or_insert(NodeIx::new(i));
                }
                if let Some(f) = field
                    && vals.is_empty()
                {
                    rich[i * words + f / 64] |= 1 << (f % 64);
                }
            }
            if let Some(f) = field {
                bits[i * words + f / 64] |= 1 << (f % 64);
            }
            for s in [n.t, n.f] {
                if let Some(s) = s.node() {
                    let j = s.index();
                    for w in 0..words {
                        bits[i * words + w] |= bits[j * words + w];
                        rich[i * words + w] |= rich[j * words + w];
                    }
                }
            }
        }
        Liveness {
            words,
            bits,
            rich,
            lowest_eq,
        }
    }

    /// Whether a node at or below `ix` tests `key` other than for equality.
    fn rich(&self, ix: NodeIx, key: Key) -> bool {
        match key.field_index() {
            None => true,
            Some(f) => self.rich[ix.index() * self.words + f / 64] & (1 << (f % 64)) != 0,
        }
    }

    /// `know` as far as the tests at or below `ix` of `key` can tell.
    fn project(&self, ix: NodeIx, key: Key, know: &Know) -> Know {
        if key.is_relation() {
            // A relation's outcome, keyed by atom: kept whole.
            return *know;
        }
        if let Some(v) = know.eq {
            if know != &Know::OTHER && !self.may_test(ix, key, v) && !self.rich(ix, key) {
                return Know::OTHER;
            }
            return *know;
        }
        let mut pruned = *know;
        pruned.ne = Small::EMPTY;
        for &v in know.ne.as_slice() {
            if self.may_test(ix, key, v) {
                pruned.ne.insert(v);
            }
        }
        pruned
    }

    /// For a knowledge of `key` (not a relation's): the lowest node at or above which its
    /// known value is compared by some test below ([`NodeIx::NEVER`]: never, or nothing known),
    /// and the one at or above which every excluded value is (`NEVER`: some never is). At and
    /// above both, [`Liveness::project`] keeps the knowledge whole.
    fn thresholds(&self, key: Key, know: &Know) -> (NodeIx, NodeIx) {
        // At or above node 0: at every node.
        let always = NodeIx::new(0);
        if *know == Know::OTHER {
            return (always, always);
        }
        let lowest = |v: u32| {
            self.lowest_eq
                .get(&(key, v))
                .copied()
                .unwrap_or(NodeIx::NEVER)
        };
        let eq = know.eq.map_or(NodeIx::NEVER, lowest);
        let ne = know
            .ne
            .as_slice()
            .iter()
            .map(|&v| lowest(v))
            .max()
            .unwrap_or(always);
        (eq, ne)
    }

    /// Whether a node at or below `ix` may compare `key` with `value`.
    fn may_test(&self, ix: NodeIx, key: Key, value: u32) -> bool {
        self.lowest_eq.get(&(key, value)).is_some_and(|&i| i <= ix)
    }

    fn live(&self, ix: NodeIx, key: Key) -> bool {
        match key.field_index() {
            // Relations are keyed by atom; always keep their facts.
            None => true,
            Some(f) => self.bits[ix.index() * self.words + f / 64] & (1 << (f % 64)) != 0,
        }
    }
}

/// What the accepting paths of an alternative (see [`Needs`]) know about one key: the join of
/// what their tests teach; whether each of them takes a true equality test of the key
/// (`pinned`: the key then has a value some test below compares with), and if so, when few, the
/// values it can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Need {
    know: Know,
    pinned: bool,
    vals: Option<Small<4>>,
}

impl Need {
    /// Whether a value with knowledge `f` (what a path knows) can satisfy this need.
    fn admits(&self, f: &Know) -> bool {
        if *f == Know::OTHER {
            // A value no test below compares with.
            return !self.pinned;
        }
        let n = &self.know;
        if let Some(vals) = &self.vals
            && !vals.as_slice().iter().any(|&v| f.possible(v))
        {
            return false;
        }
        if f.eq.is_some_and(|v| !n.possible(v)) || n.eq.is_some_and(|v| !f.possible(v)) {
            return false;
        }
        if f.lo.max(n.lo) > f.hi.min(n.hi) || f.set & n.clear != 0 || n.set & f.clear != 0 {
            return false;
        }
        // The same bit test seen with different outcomes.
        for (i, b) in f.seen_bits.as_slice().iter().enumerate() {
            if let Some(j) = n.seen_bits.as_slice().iter().position(|x| x == b)
                && (f.seen_true >> i) & 1 != (n.seen_true >> j) & 1
            {
                return false;
            }
        }
        true
    }
}

/// Alternatives kept per node; past this, the two farthest are joined into one (what both
/// need), which only ever forgets needs.
const MAX_ALTS: usize = 8;

/// Keys an alternative mentions, at most: past this, tests of other keys pass it unchanged, so
/// the work per node stays bounded however many fields a long filter tests.
const MAX_KEYS: u32 = 24;

/// One alternative of a node: `len` entries (see [`word`]: a key and its need) from `start` in
/// [`Needs::words`], sorted by key; the test edge into "accept" the paths it stands for end with
/// (`origin`), and the keys it pins (a bit per key modulo 64).
#[derive(Clone, Copy, Debug)]
struct AltRec {
    origin: Edge,
    start: u32,
    len: u32,
    sig: u64,
}

/// What a path needs to still be accepted, per node of a decision graph: a few *alternatives*
/// (ways of reaching "accept"), each a [`Need`] per key. A path whose facts contradict every
/// alternative of its node is rejected whatever the remaining tests read (a read beyond the
/// packet rejects too), so the specialiser makes it "reject" at once instead of walking the graph
/// below once per fact set. `tcp port 21 or (host C and host S and tcp port P) or …` carries
/// facts from the ARP, IPv6, non-TCP and fragment paths of each term, and from the paths that
/// matched `host C` with the source (whose value no later test compares with), into every later
/// term, where no `host C and host S and tcp port P` can hold on them; walking them was most of
/// the optimiser's time and made it copy terms.
///
/// Alternatives are computed bottom-up: a node's are its successors' with its test's outcome
/// learned (those it contradicts dropped). Alternatives that end at the same edge into "accept"
/// and pin the same keys are joined (`host S` is `src == S or dst == S`: the two stay apart until
/// `host C` above decides which one a path can take; the ARP and RARP copies of a term's tails
/// merge), and the farthest ones beyond [`MAX_ALTS`]. Apart, they keep "IPv4 and TCP" from
/// "IPv6 and TCP", which a single join would know neither of.
struct Needs {
    needs: Vec<Need>,
    need_ids: HashMap<Need, NeedId>,
    /// (need, atom, outcome) → the need after that test outcome, or [`NeedId::DEAD`].
    learned: HashMap<(NeedId, AtomId, bool), NeedId>,
    /// (need, need) → what both need.
    joined: HashMap<(NeedId, NeedId), NeedId>,
    /// Per atom, the need of its key before any test (`None`: not made yet).
    fresh: Vec<Option<NeedId>>,
    /// The entries of all alternatives (see [`word`]).
    words: Vec<u64>,
    alts: Vec<AltRec>,
    /// Per node, its alternatives: a range (start, count) of `alts`.
    nodes: Vec<(u32, u32)>,
}

impl Needs {
    fn new(g: &Graph) -> Needs {
        let n = g.nodes.len();
        let mut t = Needs {
            needs: Vec::with_capacity(n),
            need_ids: HashMap::with_capacity_and_hasher(n, Default::default()),
            learned: HashMap::with_capacity_and_hasher(2 * n, Default::default()),
            joined: HashMap::with_capacity_and_hasher(n / 2, Default::default()),
            fresh: vec![None; g.atoms.len()],
            words: Vec::with_capacity(32 * n),
            alts: Vec::with_capacity(8 * n),
            nodes: Vec::with_capacity(n),
        };
        // Scratch: the node's alternatives.
        let mut recs: Vec<AltRec> = Vec::new();
        for (i, n) in g.nodes.iter().enumerate() {
            let key = g.key(n.atom);
            recs.clear();
            let fresh = t.fresh(g, n.atom);
            // A failed equality test only excludes a value: an alternative that does not mention
            // the key takes it unchanged (knowing less is always sound), and its entries are not
            // copied; so does one that mentions [`MAX_KEYS`] keys already.
            let excludes = match g.atom(n.atom) {
                Atom::Test(t) => matches!(t.cmp, Cmp::Eq(_) | Cmp::OneOf(_)),
                Atom::Rel(..) => true,
            };
            // Successors have smaller refs: their alternatives are known.
            for (s, outcome) in [(n.t, true), (n.f, false)] {
                let (from, count) = match s.node() {
                    Some(s) => t.nodes[s.index()],
                    None if s == Ref::REJECT => continue,
                    None => {
                        if let Some(need) = t.learn(g, fresh, n.atom, outcome) {
                            let origin = Edge::new(NodeIx::new(i), outcome);
                            let rec = t.push(origin, &[word(key, need)]);
                            t.add(&mut recs, rec);
                        }
                        continue;
                    }
                };
                // The alternatives below mostly need the same of this key: learn it once.
                let mut last: Option<(NeedId, Option<NeedId>)> = None;
                for a in from..from + count {
                    let rec = t.alts[a as usize];
                    let src = &t.words[rec.start as usize..(rec.start + rec.len) as usize];
                    let at = src.partition_point(|&w| Key::of_word(w) < key);
                    let present = src.get(at).is_some_and(|&w| Key::of_word(w) == key);
                    if !present && (!outcome && excludes || rec.len >= MAX_KEYS) {
                        t.add(&mut recs, rec);
                        continue;
                    }
                    let old = if present {
                        NeedId::of_word(src[at])
                    } else {
                        fresh
                    };
                    let need = match last {
                        Some((o, need)) if o == old => need,
                        _ => {
                            let need = t.learn(g, old, n.atom, outcome);
                            last = Some((old, need));
                            need
                        }
                    };
                    let Some(need) = need else {
                        continue;
                    };
                    if present && need == old {
                        t.add(&mut recs, rec);
                        continue;
                    }
                    let start = t.words.len() as u32;
                    let end = (rec.start + rec.len) as usize;
                    let at = rec.start as usize + at;
                    t.words.extend_from_within(rec.start as usize..at);
                    t.words.push(word(key, need));
                    t.words.extend_from_within(at + usize::from(present)..end);
                    let len = t.words.len() as u32 - start;
                    let rec = AltRec {
                        origin: rec.origin,
                        start,
                        len,
                        sig: t.sig(start, len),
                    };
                    t.add(&mut recs, rec);
                }
            }
            while recs.len() > MAX_ALTS {
                // Join the two farthest alternatives: their origins were made first.
                let far = |recs: &mut Vec<AltRec>| {
                    let i = (0..recs.len()).min_by_key(|&i| recs[i].origin).unwrap_or(0);
                    recs.swap_remove(i)
                };
                let (b, a) = (far(&mut recs), far(&mut recs));
                let joined = t.join_alts(a, b);
                let rec = AltRec {
                    sig: t.sig(joined.start, joined.len),
                    origin: b.origin,
                    ..joined
                };
                t.add(&mut recs, rec);
            }
            let first = t.alts.len() as u32;
            t.alts.extend_from_slice(&recs);
            t.nodes.push((first, recs.len() as u32));
        }
        t
    }

    fn intern(&mut self, n: Need) -> NeedId {
        if let Some(&id) = self.need_ids.get(&n) {
            return id;
        }
        let id = NeedId::new(self.needs.len(), n.pinned);
        self.needs.push(n);
        self.need_ids.insert(n, id);
        id
    }

    fn need(&self, id: NeedId) -> &Need {
        &self.needs[id.index()]
    }

    /// The need of `atom`'s key before any test.
    fn fresh(&mut self, g: &Graph, atom: AtomId) -> NeedId {
        if let Some(id) = self.fresh[atom.index()] {
            return id;
        }
        let hi = match g.atom(atom) {
            Atom::Test(t) => max_value(&t.field, t.mask),
            Atom::Rel(..) => 1,
        };
        let id = self.intern(Need {
            know: Know::new(hi),
            pinned: false,
            vals: None,
        });
        self.fresh[atom.index()] = Some(id);
        id
    }

    /// `need` with the test of `atom` having `outcome` before it (`None`: the outcome
    /// contradicts the need).
    fn learn(&mut self, g: &Graph, need: NeedId, atom: AtomId, outcome: bool) -> Option<NeedId> {
        if let Some(&id) = self.learned.get(&(need, atom, outcome)) {
            return (id != NeedId::DEAD).then_some(id);
        }
        let cmp = g.cmp(atom);
        let mut n = *self.need(need);
        let id = if n.know.decide(cmp, false) == Some(!outcome) {
            None
        } else {
            let mut alive = true;
            if let Some(vals) = &mut n.vals {
                let mut kept = Small::EMPTY;
                for &v in vals.as_slice() {
                    if eval_cmp(cmp, v) == outcome {
                        kept.insert(v);
                    }
                }
                alive = kept.len > 0;
                *vals = kept;
            } else if outcome {
                n.vals = match cmp {
                    Cmp::Eq(v) => Some(Small::from_slice(std::slice::from_ref(v))),
                    Cmp::OneOf(vs) if vs.len() <= 4 => Some(Small::from_slice(vs)),
                    _ => None,
                };
            }
            n.pinned |= outcome && matches!(cmp, Cmp::Eq(_) | Cmp::OneOf(_));
            n.know.learn(cmp, outcome, false);
            alive.then(|| self.intern(n))
        };
        self.learned
            .insert((need, atom, outcome), id.unwrap_or(NeedId::DEAD));
        id
    }

    fn join(&mut self, a: NeedId, b: NeedId) -> NeedId {
        if a == b {
            return a;
        }
        let k = (a.min(b), a.max(b));
        if let Some(&id) = self.joined.get(&k) {
            return id;
        }
        let (na, nb) = (*self.need(a), *self.need(b));
        let id = self.intern(Need {
            know: na.know.join(&nb.know),
            pinned: na.pinned && nb.pinned,
            vals: match (na.vals, nb.vals) {
                (Some(x), Some(y)) => x.union(&y),
                _ => None,
            },
        });
        self.joined.insert(k, id);
        id
    }

    /// A new alternative with these entries.
    fn push(&mut self, origin: Edge, entries: &[u64]) -> AltRec {
        let start = self.words.len() as u32;
        self.words.extend_from_slice(entries);
        let len = entries.len() as u32;
        AltRec {
            origin,
            start,
            len,
            sig: self.sig(start, len),
        }
    }

    /// The keys the entries pin, a bit per key modulo 64.
    fn sig(&self, start: u32, len: u32) -> u64 {
        self.words[start as usize..(start + len) as usize]
            .iter()
            .filter(|&&w| NeedId::of_word(w).pinned())
            .fold(0u64, |m, &w| m | Key::of_word(w).sig_bit())
    }

    /// What both alternatives need (the keys both mention), as a new alternative (its origin
    /// and signature are left to the caller).
    fn join_alts(&mut self, a: AltRec, b: AltRec) -> AltRec {
        let start = self.words.len();
        let (mut i, mut j) = (a.start as usize, b.start as usize);
        let (ea, eb) = (i + a.len as usize, j + b.len as usize);
        while i < ea && j < eb {
            let (wa, wb) = (self.words[i], self.words[j]);
            let (ka, kb) = (Key::of_word(wa), Key::of_word(wb));
            if ka < kb {
                i += 1;
            } else if kb < ka {
                j += 1;
            } else {
                let need = self.join(NeedId::of_word(wa), NeedId::of_word(wb));
                self.words.push(word(ka, need));
                i += 1;
                j += 1;
            }
        }
        let len = (self.words.len() - start) as u32;
        AltRec {
            origin: a.origin,
            start: start as u32,
            len,
            sig: a.sig,
        }
    }

    /// Add an alternative to a node's: joined into one from the same origin pinning the same
    /// keys, else appended.
    fn add(&mut self, recs: &mut Vec<AltRec>, rec: AltRec) {
        match recs
            .iter()
            .position(|r| r.origin == rec.origin && r.sig == rec.sig)
        {
            Some(i) if recs[i].start == rec.start && recs[i].len == rec.len => {}
            // Both pin the same keys, and so does their join.
            Some(i) => recs[i] = self.join_alts(recs[i], rec),
            None => recs.push(rec),
        }
    }

    /// Whether no path from `ix` that knows `facts` (sorted by key) can be accepted.
    fn hopeless(&self, ix: NodeIx, facts: &[(Key, KnowId)], knows: &[Know]) -> bool {
        let (from, count) = self.nodes[ix.index()];
        let admits = |rec: &AltRec| {
            let ws = &self.words[rec.start as usize..(rec.start + rec.len) as usize];
            let (mut i, mut j) = (0, 0);
            while i < facts.len() && j < ws.len() {
                let (kf, kn) = (facts[i].0, Key::of_word(ws[j]));
                if kf < kn {
                    i += 1;
                } else if kn < kf {
                    j += 1;
                } else {
                    if !self
                        .need(NeedId::of_word(ws[j]))
                        .admits(&knows[facts[i].1.index()])
                    {
                        return false;
                    }
                    i += 1;
                    j += 1;
                }
            }
            true
        };
        !self.alts[from as usize..(from + count) as usize]
            .iter()
            .any(admits)
    }
}

/// A fact set of the specialiser: (key, interned knowledge) sorted by key.
type FactIds = Vec<(Key, KnowId)>;

/// Interned fact sets ([`FactSetId::EMPTY`] is the empty set) and interned knowledge values: a
/// set is a short list of ids, cheap to hash, compare and copy, however much each fact knows.
/// The sets' entries live in one vector (a set is a span of it), found by their hash.
struct FactTable {
    entries: Vec<(Key, KnowId)>,
    spans: Vec<(u32, u32)>,
    /// Hash of a set's entries → the last set interned with that hash; `same_hash` links each
    /// set to the one before with the same hash.
    by_hash: HashMap<u64, FactSetId>,
    same_hash: Vec<Option<FactSetId>>,
    knows: Vec<Know>,
    know_ids: HashMap<Know, KnowId>,
}

impl FactTable {
    /// A table sized for a graph of `nodes` nodes.
    fn new(nodes: usize) -> FactTable {
        let mut t = FactTable {
            entries: Vec::with_capacity(4 * nodes),
            spans: Vec::with_capacity(nodes),
            by_hash: HashMap::with_capacity_and_hasher(nodes, Default::default()),
            same_hash: Vec::with_capacity(nodes),
            knows: Vec::with_capacity(nodes / 4),
            know_ids: HashMap::with_capacity_and_hasher(nodes / 4, Default::default()),
        };
        let empty = t.intern(&[]);
        debug_assert_eq!(empty, FactSetId::EMPTY);
        t
    }

    fn set(&self, id: FactSetId) -> &[(Key, KnowId)] {
        let (start, len) = self.spans[id.index()];
        &self.entries[start as usize..(start + len) as usize]
    }

    fn know_of(&self, id: KnowId) -> &Know {
        &self.knows[id.index()]
    }

    fn intern(&mut self, f: &[(Key, KnowId)]) -> FactSetId {
        let mut h = netsift_lang::fxhash::FxHasher::default();
        for &(k, v) in f {
            h.write_u64(fact_word(k, v));
        }
        let hash = h.finish();
        let first = self.by_hash.get(&hash).copied();
        let mut link = first;
        while let Some(id) = link {
            if self.set(id) == f {
                return id;
            }
            link = self.same_hash[id.index()];
        }
        let id = FactSetId::new(self.spans.len());
        self.spans.push((self.entries.len() as u32, f.len() as u32));
        self.entries.extend_from_slice(f);
        self.same_hash.push(first);
        self.by_hash.insert(hash, id);
        id
    }

    /// What both fact sets know (keys known on one side only are forgotten).
    fn join(&mut self, a: FactSetId, b: FactSetId) -> FactSetId {
        if a == b {
            return a;
        }
        let mut joined: FactIds = Vec::new();
        for i in 0..self.set(a).len() {
            let (k, ka) = self.set(a)[i];
            let sb = self.set(b);
            if let Ok(j) = sb.binary_search_by_key(&k, |(k, _)| *k) {
                let kb = sb[j].1;
                let kid = if ka == kb {
                    ka
                } else {
                    let know = self.know_of(ka).join(self.know_of(kb));
                    self.know(know)
                };
                joined.push((k, kid));
            }
        }
        self.intern(&joined)
    }

    fn know(&mut self, k: Know) -> KnowId {
        if let Some(&id) = self.know_ids.get(&k) {
            return id;
        }
        let id = KnowId::new(self.knows.len());
        self.knows.push(k);
        self.know_ids.insert(k, id);
        id
    }
}

/// Distinct fact sets a node of the decision graph is specialised for, at most.
const MAX_SPECIALISATIONS: u16 = 32;

/// The facts of the specialiser: interned fact sets and what each test teaches (the same for
/// every graph of one compilation, which share their atoms), and for the graph at hand the
/// liveness that prunes facts no later test can use and the needs that tell hopeless paths.
/// One is made per compilation and moved from graph to graph ([`Specialiser::retarget`]), so a
/// graph's analyses are made once however many passes run over it.
struct Specialiser {
    table: FactTable,
    learned: HashMap<(FactSetId, AtomId, bool), FactSetId>,
    live: Liveness,
    needs: Needs,
    /// Per interned knowledge, its [`Liveness::thresholds`] in the current graph (`None`: not
    /// computed yet).
    thresholds: Vec<Option<(NodeIx, NodeIx)>>,
    /// Scratch for the fact set being made by [`Specialiser::learn`] and
    /// [`Specialiser::prune`].
    scratch: FactIds,
}

impl Specialiser {
    fn new(g: &Graph) -> Specialiser {
        Specialiser {
            table: FactTable::new(g.nodes.len()),
            learned: HashMap::with_capacity_and_hasher(g.nodes.len(), Default::default()),
            live: Liveness::new(g),
            needs: Needs::new(g),
            thresholds: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Analyse another graph (with the same atoms) for the next pass.
    fn retarget(&mut self, g: &Graph) {
        self.live = Liveness::new(g);
        self.needs = Needs::new(g);
        self.thresholds.clear();
    }

    /// Whether no path from `ix` can accept a packet the tests behind `facts` passed.
    fn hopeless(&self, ix: NodeIx, facts: FactSetId) -> bool {
        self.needs
            .hopeless(ix, self.table.set(facts), &self.table.knows)
    }

    /// `facts` without what no test at or below `ix` can use.
    fn prune(&mut self, ix: NodeIx, facts: FactSetId) -> FactSetId {
        if facts == FactSetId::EMPTY {
            return facts;
        }
        // Mostly nothing is dropped: tell that from the keys' liveness bits and the thresholds
        // of their knowledge, without projecting each.
        let mut useless = false;
        for i in 0..self.table.set(facts).len() {
            let (k, kid) = self.table.set(facts)[i];
            if k.is_relation() {
                continue;
            }
            if !self.live.live(ix, k) {
                useless = true;
                break;
            }
            let (eq, ne) = self.thresholds_of(k, kid);
            let know = self.table.know_of(kid);
            let kept = if know.eq.is_some() {
                eq <= ix || self.live.rich(ix, k)
            } else {
                ne <= ix
            };
            if !kept {
                useless = true;
                break;
            }
        }
        if !useless {
            return facts;
        }
        let live = &self.live;
        let table = &mut self.table;
        let mut kept = std::mem::take(&mut self.scratch);
        kept.clear();
        for i in 0..table.set(facts).len() {
            let (k, kid) = table.set(facts)[i];
            if !live.live(ix, k) {
                continue;
            }
            let know = *table.know_of(kid);
            let pruned = live.project(ix, k, &know);
            if pruned == know {
                kept.push((k, kid));
            } else {
                kept.push((k, table.know(pruned)));
            }
        }
        let id = table.intern(&kept);
        self.scratch = kept;
        id
    }

    fn thresholds_of(&mut self, key: Key, kid: KnowId) -> (NodeIx, NodeIx) {
        let i = kid.index();
        if i >= self.thresholds.len() {
            self.thresholds
                .resize(self.table.knows.len().max(i + 1), None);
        }
        if let Some(t) = self.thresholds[i] {
            return t;
        }
        let t = self.live.thresholds(key, self.table.know_of(kid));
        self.thresholds[i] = Some(t);
        t
    }

    /// The outcome of node `ix`'s test when `facts` decide it.
    fn decide(&self, g: &Graph, ix: NodeIx, facts: FactSetId) -> Option<bool> {
        let n = g.get(ix);
        let fkey = g.key(n.atom);
        let set = self.table.set(facts);
        let i = set.binary_search_by_key(&fkey, |(k, _)| *k).ok()?;
        self.table.know_of(set[i].1).decide(g.cmp(n.atom), false)
    }

    /// `facts` and what the test of `atom` having `outcome` teaches.
    fn learn(&mut self, g: &Graph, facts: FactSetId, atom: AtomId, outcome: bool) -> FactSetId {
        if let Some(&id) = self.learned.get(&(facts, atom, outcome)) {
            return id;
        }
        let fkey = g.key(atom);
        let (cmp, hi) = match g.atom(atom) {
            Atom::Test(t) => (&t.cmp, max_value(&t.field, t.mask)),
            Atom::Rel(..) => (&Cmp::Eq(1), 1),
        };
        let table = &mut self.table;
        let mut f = std::mem::take(&mut self.scratch);
        f.clear();
        f.extend_from_slice(table.set(facts));
        let changed = match f.binary_search_by_key(&fkey, |(k, _)| *k) {
            Ok(i) => {
                let old = *table.know_of(f[i].1);
                let mut k = old;
                k.learn(cmp, outcome, false);
                // Nothing new: the same set.
                let changed = k != old;
                if changed {
                    f[i].1 = table.know(k);
                }
                changed
            }
            Err(i) => {
                let mut k = Know::new(hi);
                k.learn(cmp, outcome, false);
                let kid = table.know(k);
                f.insert(i, (fkey, kid));
                true
            }
        };
        let id = if changed { table.intern(&f) } else { facts };
        self.scratch = f;
        self.learned.insert((facts, atom, outcome), id);
        id
    }
}

/// A specialised graph, its root, and whether some node was copied (specialised into two
/// different nodes).
type Specialised = (Graph, Ref, bool);

/// The fact sets a node of the graph being specialised was entered with (see [`specialise`]).
#[derive(Clone, Copy)]
enum Entered {
    Never,
    /// `count` fact sets, the last one at `last` in the chain of fact sets (each with the index
    /// of the one before).
    Few {
        count: u16,
        last: u32,
    },
    /// More than [`MAX_SPECIALISATIONS`]: what they all share.
    Many(FactSetId),
}

const _: () = assert!(size_of::<Entered>() == 8);

/// Specialise `root` of `g0` (the graph `sp` analysed) along every path. Returns the new graph
/// and its root, or `None` when the budget is exceeded.
fn specialise(g0: &Graph, sp: &mut Specialiser, root: Ref, budget: usize) -> Option<Specialised> {
    let mut out = g0.empty_like();
    enum Frame {
        Enter(Ref, FactSetId),
        Finish {
            key: (NodeIx, FactSetId),
            atom: AtomId,
        },
        Alias((NodeIx, FactSetId)),
    }
    let mut memo: HashMap<(NodeIx, FactSetId), Ref> =
        HashMap::with_capacity_and_hasher(g0.nodes.len(), Default::default());
    // Per node of `g0`: the fact sets it was entered with; the chain holds, for the nodes
    // entered `Few` times, each fact set and the index of the one before (for the first, its
    // own: the chain is walked `count` links back).
    let mut entered: Vec<Entered> = vec![Entered::Never; g0.nodes.len()];
    let mut chain: Vec<(FactSetId, u32)> = Vec::new();
    // Per node of `g0`: the node it became first.
    let mut became: Vec<Option<Ref>> = vec![None; g0.nodes.len()];
    let mut copied = false;
    let mut results: Vec<Ref> = Vec::new();
    let mut stack = vec![Frame::Enter(root, FactSetId::EMPTY)];
    while let Some(frame) = stack.pop() {
        match frame {
            Frame::Enter(r, facts) => {
                let Some(ix) = r.node() else {
                    results.push(r);
                    continue;
                };
                let facts = sp.prune(ix, facts);
                let mut key = (ix, facts);
                if let Some(&m) = memo.get(&key) {
                    results.push(m);
                    continue;
                }
                if sp.hopeless(ix, facts) {
                    memo.insert(key, Ref::REJECT);
                    results.push(Ref::REJECT);
                    continue;
                }
                // A node is specialised for at most `MAX_SPECIALISATIONS` fact sets; past that
                // it is entered with what all its fact sets share, which only ever weakens, so
                // the work stays linear in the graph. (The join is made only then.)
                if facts != FactSetId::EMPTY {
                    let e = &mut entered[ix.index()];
                    let common = match *e {
                        Entered::Never => {
                            let at = chain.len() as u32;
                            chain.push((facts, at));
                            *e = Entered::Few { count: 1, last: at };
                            None
                        }
                        Entered::Few { count, last } if count < MAX_SPECIALISATIONS => {
                            chain.push((facts, last));
                            *e = Entered::Few {
                                count: count + 1,
                                last: chain.len() as u32 - 1,
                            };
                            None
                        }
                        Entered::Few { count, last } => {
                            let mut common = facts;
                            let mut link = last;
                            for _ in 0..count {
                                let (f, prev) = chain[link as usize];
                                common = sp.table.join(common, f);
                                link = prev;
                            }
                            Some(common)
                        }
                        Entered::Many(common) => Some(sp.table.join(common, facts)),
                    };
                    if let Some(common) = common {
                        *e = Entered::Many(common);
                        key = (ix, common);
                        if let Some(&m) = memo.get(&key) {
                            results.push(m);
                            continue;
                        }
                    }
                }
                let facts = key.1;
                if out.nodes.len() > budget {
                    return None;
                }
                let n = g0.get(ix);
                if let Some(outcome) = sp.decide(g0, ix, facts) {
                    let next = if outcome { n.t } else { n.f };
                    stack.push(Frame::Alias(key));
                    stack.push(Frame::Enter(next, facts));
                    continue;
                }
                // A terminal ignores the facts it is entered with: nothing to learn for it.
                let learn = |sp: &mut Specialiser, s: Ref, outcome: bool| {
                    if s.is_terminal() {
                        FactSetId::EMPTY
                    } else {
                        sp.learn(g0, facts, n.atom, outcome)
                    }
                };
                let (ft, ff) = (learn(sp, n.t, true), learn(sp, n.f, false));
                stack.push(Frame::Finish { key, atom: n.atom });
                stack.push(Frame::Enter(n.f, ff));
                stack.push(Frame::Enter(n.t, ft));
            }
            Frame::Finish { key, atom } => {
                let f = results.pop().unwrap_or(Ref::REJECT);
                let t = results.pop().unwrap_or(Ref::REJECT);
                let r = out.node(atom, t, f);
                if !r.is_terminal() {
                    let first = &mut became[key.0.index()];
                    match *first {
                        None => *first = Some(r),
                        Some(f) if f != r => copied = true,
                        Some(_) => {}
                    }
                }
                memo.insert(key, r);
                results.push(r);
            }
            Frame::Alias(key) => {
                let r = *results.last().unwrap_or(&Ref::REJECT);
                memo.insert(key, r);
            }
        }
    }
    let root = results.pop().unwrap_or(Ref::REJECT);
    Some((out, root, copied))
}

/// Thread jumps with the facts that hold on *every* path into a node (libpcap's dominator
/// facts, computed exactly on the decision graph): each node is kept at most once, so the graph
/// never grows, and tests decided by those facts are skipped. Repeated until nothing changes,
/// since removing a branch can strengthen the facts below it (`host X and tcp port P`: the ARP
/// and RARP branches of `host` die once `tcp` is known false on them, and then IPv4 is known
/// on every path into the next term).
///
/// `sp` comes analysing `g0` and leaves analysing the returned graph.
fn thread_must(g0: &Graph, sp: &mut Specialiser, root: Ref) -> (Graph, Ref) {
    let mut cur = thread_must_once(g0, sp, root);
    sp.retarget(&cur.0);
    // Further rounds pay only on graphs with many terms.
    for _ in 0..if g0.nodes.len() > 64 { 4 } else { 0 } {
        let next = thread_must_once(&cur.0, sp, cur.1);
        if next.0.nodes.len() >= cur.0.nodes.len() {
            break;
        }
        cur = next;
        sp.retarget(&cur.0);
    }
    cur
}

fn thread_must_once(g: &Graph, sp: &mut Specialiser, root: Ref) -> (Graph, Ref) {
    let mut out = g.empty_like();
    // Follow an edge carrying `facts` past the tests they decide (libpcap's jump threading).
    let thread = |sp: &mut Specialiser, mut s: Ref, facts: FactSetId| -> (Ref, FactSetId) {
        let mut facts = facts;
        for _ in 0..256 {
            let Some(ix) = s.node() else {
                break;
            };
            facts = sp.prune(ix, facts);
            match sp.decide(g, ix, facts) {
                Some(outcome) => {
                    let n = g.get(ix);
                    s = if outcome { n.t } else { n.f };
                }
                None => break,
            }
        }
        (s, facts)
    };
    let (root, root_facts) = thread(sp, root, FactSetId::EMPTY);
    let Some(root_ix) = root.node() else {
        return (out, root);
    };
    // Facts on entry of each reachable node (`None`: unreached): the join over its incoming
    // edges. Predecessors have larger refs, so visiting refs in decreasing order sees every edge
    // into a node before the node.
    let mut entry: Vec<Option<FactSetId>> = vec![None; g.nodes.len()];
    let mut targets = vec![(Ref::REJECT, Ref::REJECT); g.nodes.len()];
    entry[root_ix.index()] = Some(root_facts);
    for i in (0..=root_ix.index()).rev() {
        let Some(facts) = entry[i] else {
            continue;
        };
        let ix = NodeIx::new(i);
        let facts = sp.prune(ix, facts);
        let n = g.get(ix);
        let mut edge = |sp: &mut Specialiser, s: Ref, outcome: bool| -> Ref {
            let learned = sp.learn(g, facts, n.atom, outcome);
            let (s, f) = thread(sp, s, learned);
            if let Some(sx) = s.node() {
                let e = &mut entry[sx.index()];
                *e = Some(match *e {
                    None => f,
                    Some(e) => sp.table.join(e, f),
                });
            }
            s
        };
        let t = edge(sp, n.t, true);
        let f = edge(sp, n.f, false);
        targets[i] = (t, f);
    }
    // Rebuild bottom-up along the threaded edges (every target of a reached node is reached, and
    // mapped before it).
    let mut map = vec![Ref::REJECT; g.nodes.len()];
    let resolve = |map: &[Ref], s: Ref| match s.node() {
        None => s,
        Some(ix) => map[ix.index()],
    };
    for i in 0..=root_ix.index() {
        if entry[i].is_none() {
            continue;
        }
        let (t, f) = targets[i];
        let (t, f) = (resolve(&map, t), resolve(&map, f));
        map[i] = out.node(g.nodes[i].atom, t, f);
    }
    let root = resolve(&map, root);
    (out, root)
}

/// How a block ends, before its targets are known.
#[derive(Clone, Copy)]
enum Br<'a> {
    /// `code #k`, with the exits swapped when `true`.
    Jump(u16, u32, bool),
    /// A chain of `jeq`.
    OneOf(&'a [u32]),
    /// `jge lo` then `jgt hi`.
    Range(u32, u32),
}

impl<'a> Br<'a> {
    fn of(cmp: &'a Cmp, _mask: u32) -> Br<'a> {
        match cmp {
            Cmp::Eq(v) => Br::Jump(JMP | JEQ | K, *v, false),
            Cmp::Gt(v) => Br::Jump(JMP | JGT | K, *v, false),
            Cmp::Ge(v) => Br::Jump(JMP | JGE | K, *v, false),
            Cmp::Bits(v) => Br::Jump(JMP | JSET | K, *v, false),
            Cmp::OneOf(vs) => Br::OneOf(vs),
            Cmp::Range(a, b) => Br::Range(*a, *b),
        }
    }
}

/// The statements (appended to `stmts`) and branch of a block testing `t`, given what A and X
/// hold on entry; and what they hold on exit.
fn plan_test<'a>(
    t: &'a Test,
    ain: Holds,
    xin: Holds,
    stmts: &mut Vec<Insn>,
) -> (Br<'a>, Holds, Holds) {
    let masked = t.mask != u32::MAX;
    let has_masked = masked && ain == Holds::Masked(t.field, t.mask);
    let has_field = ain == Holds::Field(t.field);
    let mut xout = xin;
    if !has_field && !has_masked {
        match t.field {
            Field::Packet {
                loc: Loc::Ipv4Payload { nl, off },
                size,
            } if u64::from(off) + u64::from(nl) + 64 <= u64::from(u32::MAX) => {
                if xin != Holds::Msh(nl) {
                    stmts.push(Insn::stmt(LDX | B | MSH, nl));
                }
                stmts.push(Insn::stmt(LD | size_bits(size) | IND, nl + off));
                xout = Holds::Msh(nl);
            }
            Field::Packet {
                loc: Loc::Ipv4Payload { .. },
                ..
            } => {
                push_load_field(&t.field, stmts);
                xout = Holds::Unknown;
            }
            Field::Packet {
                loc: Loc::Var { reg, off },
                size,
            } => {
                if xin != Holds::Reg(reg) {
                    stmts.push(Insn::stmt(LDX | W | MEM, u32::from(reg)));
                }
                stmts.push(Insn::stmt(LD | size_bits(size) | IND, off));
                xout = Holds::Reg(reg);
            }
            Field::Packet {
                loc: Loc::VarIpv4Payload { .. },
                ..
            } => {
                push_load_field(&t.field, stmts);
                xout = Holds::Unknown;
            }
            _ => push_load_field(&t.field, stmts),
        }
    }
    let (field, masked_a) = (Holds::Field(t.field), Holds::Masked(t.field, t.mask));
    let (br, aout) = if has_masked {
        (Br::of(&t.cmp, u32::MAX), masked_a)
    } else if masked && t.cmp == Cmp::Eq(0) {
        // `and #m; jeq #0` is `jset #m` with the exits swapped; A keeps the field.
        (Br::Jump(JMP | JSET | K, t.mask, true), field)
    } else if let (true, Cmp::Bits(b)) = (masked, &t.cmp) {
        (Br::Jump(JMP | JSET | K, b & t.mask, false), field)
    } else if masked {
        stmts.push(Insn::stmt(ALU | AND | K, t.mask));
        (Br::of(&t.cmp, u32::MAX), masked_a)
    } else {
        (Br::of(&t.cmp, u32::MAX), field)
    };
    (br, aout, xout)
}

/// What a register holds at a block boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Holds {
    Unknown,
    /// A holds the field, unmasked.
    Field(Field),
    /// A holds the field under the mask.
    Masked(Field, u32),
    /// X holds 4*([nl]&0xf).
    Msh(u32),
    /// X holds M[reg].
    Reg(u8),
}

/// The decision graph of `pred` and its root.
fn decision_graph(pred: &Pred) -> Result<(Graph, Ref), CompileError> {
    // The decision graph has about three nodes per node of the predicate.
    let size = 3 * pred.nodes().len();
    let mut g = Graph::with_capacity(size);
    let mut memo = HashMap::with_capacity_and_hasher(size, Default::default());
    let mut atoms = vec![None; pred.nodes().len()];
    let root = build(
        pred,
        &mut g,
        &mut memo,
        &mut atoms,
        pred.root(),
        Ref::ACCEPT,
        Ref::REJECT,
    )?;
    Ok((g, root))
}

pub(crate) fn optimize(pred: &Pred, snaplen: u32) -> Result<Cfg, CompileError> {
    let (g0, root) = decision_graph(pred)?;
    if !root.is_terminal() && nothing_to_specialise(&g0) {
        // No path can know anything that decides a later test: specialisation would give
        // the graph back as it is; and with every field tested once, no chain has two tests of
        // one field to group.
        return emit(&g0, root, snaplen);
    }
    let g0_root = root;
    // The facts of each path (may copy a node once per distinct set of facts that decides
    // something below it).
    let budget = 20_000usize.max(g0.nodes.len() * 8);
    let mut sp = Specialiser::new(&g0);
    let (g, root) = match specialise(&g0, &mut sp, root, budget) {
        // No node copied: nothing the path facts gained was paid for in size.
        Some((g, r, copied)) if !copied || r.is_terminal() => (g, r),
        spec => {
            // Specialising along paths can duplicate shared code for a small gain (DECnet's
            // four header layouts; `host A and port P or host B and port Q …` knowing which
            // address failed). Also thread the graph with the facts all paths share (never
            // grows the graph), then specialise that, and keep the smallest; on a tie the more
            // specialised.
            let (g1, r1) = thread_must(&g0, &mut sp, root);
            let s1 = specialise(&g1, &mut sp, r1, budget);
            let mut best = (g1, r1);
            for cand in [s1, spec] {
                if let Some((g, r, _)) = cand
                    && (r.is_terminal() || g.nodes.len() <= best.0.nodes.len())
                {
                    best = (g, r);
                }
            }
            best
        }
    };
    if root == Ref::REJECT && libpcap_rejects_all(&g0, g0_root) {
        return Err(CompileError::new(CompileErrorKind::RejectsAll));
    }
    let (g, root) = regroup(&g, root);
    emit(&g, root, snaplen)
}

/// Whether specialisation gives `g` back unchanged, so that it need not run: every atom is a
/// test and each field (key) is tested by one node only — no path tests a field twice, so no
/// fact a path learns decides or prunes a later test (the needs of "accept" below a node are on
/// other fields than the facts above it) — and no test is decided by its field's width alone
/// (`ether[0] > 255`). Most filters people type (`ip`, `tcp`, `host X` on raw IP) are such.
/// `skipping_specialisation_changes_nothing` checks the claim.
fn nothing_to_specialise(g: &Graph) -> bool {
    if g.nodes.len() > 64 {
        return false;
    }
    let mut seen = 0u64;
    for n in &g.nodes {
        let key = match g.key(n.atom).field_index() {
            Some(k) if k < 64 => k,
            _ => return false,
        };
        if seen & (1 << key) != 0 {
            return false;
        }
        seen |= 1 << key;
        let Atom::Test(t) = g.atom(n.atom) else {
            return false;
        };
        if Know::new(max_value(&t.field, t.mask))
            .decide(&t.cmp, false)
            .is_some()
        {
            return false;
        }
    }
    true
}

/// Regroup chains of tests by field: in a run of tests that all lead to the same place when
/// true (an `or` of tests: `host A or host B or …` on the IPv4 path is `src == A, dst == A,
/// src == B, dst == B, …`) or all when false (an `and`), the order does not change the verdict of
/// a packet whose fields are all present, so the tests are sorted by field, keeping first
/// occurrences in order: `src == A, src == B, …, dst == A, dst == B, …` — one load per field.
/// This is libpcap's `or_pullup`/`and_pullup`, done once for whole chains; like them it may
/// change which read fails first on a truncated packet, never the verdict of a complete one.
fn regroup(g: &Graph, root: Ref) -> (Graph, Ref) {
    let mut out = g.empty_like();
    let Some(root_ix) = root.node() else {
        return (out, root);
    };
    // Predecessor counts of reachable nodes.
    let mut preds = vec![0u32; g.nodes.len()];
    let mut seen = vec![false; g.nodes.len()];
    let mut stack = vec![root_ix];
    while let Some(ix) = stack.pop() {
        if std::mem::replace(&mut seen[ix.index()], true) {
            continue;
        }
        let n = g.get(ix);
        for s in [n.t, n.f] {
            if let Some(s) = s.node() {
                preds[s.index()] += 1;
                stack.push(s);
            }
        }
    }
    // Per node, what it became (`None`: not yet regrouped).
    let mut memo: Vec<Option<Ref>> = vec![None; g.nodes.len()];
    let r = regroup_node(g, &preds, &mut out, &mut memo, root, 0);
    (out, r)
}

fn regroup_node(
    g: &Graph,
    preds: &[u32],
    out: &mut Graph,
    memo: &mut [Option<Ref>],
    r: Ref,
    depth: u32,
) -> Ref {
    let Some(ix) = r.node() else {
        return r;
    };
    if let Some(x) = memo[ix.index()] {
        return x;
    }
    let n = g.get(ix);
    // The longest chain from r linked by false edges with the true target n.t (an "or"), or by
    // true edges with the false target n.f (an "and"); inner members have no other entry.
    let chain = |or: bool| -> Vec<NodeIx> {
        let mut c = vec![ix];
        let mut cur = n;
        loop {
            let next = if or { cur.f } else { cur.t };
            let Some(next) = next.node() else {
                break;
            };
            if preds[next.index()] != 1 {
                break;
            }
            let m = g.get(next);
            if (or && m.t != n.t) || (!or && m.f != n.f) {
                break;
            }
            c.push(next);
            cur = m;
        }
        c
    };
    let or_chain = chain(true);
    let and_chain = chain(false);
    let (members, or) = if or_chain.len() >= and_chain.len() {
        (or_chain, true)
    } else {
        (and_chain, false)
    };
    let key = |x: &NodeIx| g.key(g.get(*x).atom);
    let worth = members.len() >= 3 && {
        let keys: Vec<Key> = members.iter().map(key).collect();
        keys.windows(2).any(|w| w[0] != w[1]) && {
            let mut sorted = keys.clone();
            sorted.sort_unstable();
            sorted.dedup();
            sorted.len() < keys.len()
        }
    };
    // Bound the recursion on pathological graphs (deep nests of short chains).
    if !worth || depth > 2000 {
        let t = regroup_node(g, preds, out, memo, n.t, depth + 1);
        let f = regroup_node(g, preds, out, memo, n.f, depth + 1);
        let x = out.node(n.atom, t, f);
        memo[ix.index()] = Some(x);
        return x;
    }
    let last = g.get(*members.last().unwrap_or(&ix));
    let (shared, exit) = if or { (n.t, last.f) } else { (n.f, last.t) };
    let shared = regroup_node(g, preds, out, memo, shared, depth + 1);
    let exit = regroup_node(g, preds, out, memo, exit, depth + 1);
    // Stable grouping by field, first occurrences first.
    let mut order: Vec<Key> = Vec::new();
    for m in &members {
        let k = key(m);
        if !order.contains(&k) {
            order.push(k);
        }
    }
    let mut sorted: Vec<NodeIx> = Vec::with_capacity(members.len());
    for k in &order {
        sorted.extend(members.iter().filter(|m| key(m) == *k));
    }
    let mut cur = exit;
    for m in sorted.iter().rev() {
        let atom = g.get(*m).atom;
        cur = if or {
            out.node(atom, shared, cur)
        } else {
            out.node(atom, cur, shared)
        };
    }
    memo[ix.index()] = Some(cur);
    cur
}

/// Whether libpcap's optimiser would also prove that nothing is accepted. It threads a jump
/// past a test only when the test's outcome holds on *every* path into the jump (edge
/// dominators), with equality reasoning; this replays that to a fixed point on the decision
/// graph and checks whether "accept" is still reachable.
fn libpcap_rejects_all(g0: &Graph, root: Ref) -> bool {
    let Some(root_ix) = root.node() else {
        return root == Ref::REJECT;
    };
    let mut nodes = g0.nodes.clone();
    // libpcap decides a branch from a dominating one only when both compare the same value
    // number with the same operator and operand (or a taken `jeq` excludes other constants),
    // so a test other than equality is a boolean of its own, like a relation. A field read by
    // a relation in the filter text (`ip[9] = 6`) is a different value number from the same
    // field read by a primitive (`udp`): libpcap loads the former through X.
    let test_of = |atom: AtomId| -> (ValueKey, Cmp) {
        match g0.atom(atom) {
            Atom::Test(t) if matches!(t.cmp, Cmp::Eq(_) | Cmp::OneOf(_) | Cmp::Bits(_)) => {
                (ValueKey::field(g0.key(atom), t.relation), t.cmp.clone())
            }
            Atom::Test(_) | Atom::Rel(..) => (ValueKey::own(atom), Cmp::Eq(1)),
        }
    };
    let decide = |facts: &Facts, atom: AtomId| -> Option<bool> {
        let (k, cmp) = test_of(atom);
        let i = facts.binary_search_by_key(&k, |(kk, _)| *kk).ok()?;
        facts[i].1.decide(&cmp, true)
    };
    let learn = |facts: &Facts, atom: AtomId, outcome: bool| -> Facts {
        // A range test is libpcap's `jge lo; jgt hi`, whose two failure edges meet at the next
        // test: after them libpcap does not know that the value is out of range.
        if !outcome && matches!(g0.atom(atom), Atom::Test(t) if matches!(t.cmp, Cmp::Range(..))) {
            return facts.clone();
        }
        let (k, cmp) = test_of(atom);
        let mut f = facts.clone();
        match f.binary_search_by_key(&k, |(kk, _)| *kk) {
            Ok(i) => f[i].1.learn(&cmp, outcome, true),
            Err(i) => {
                let mut kn = Know::new(u32::MAX);
                kn.learn(&cmp, outcome, true);
                f.insert(i, (k, kn));
            }
        }
        f
    };
    let meet = |a: &Facts, b: &Facts| -> Facts {
        a.iter()
            .filter_map(|(k, ka)| {
                let kb = &b.iter().find(|(kk, _)| kk == k)?.1;
                let mut m = Know::new(u32::MAX);
                m.eq = if ka.eq == kb.eq { ka.eq } else { None };
                for &v in ka.ne.as_slice() {
                    if kb.ne.contains(v) {
                        m.ne.insert(v);
                    }
                }
                Some((*k, m))
            })
            .collect()
    };
    for _round in 0..100 {
        let mut facts_in: Vec<Option<Facts>> = vec![None; nodes.len()];
        facts_in[root_ix.index()] = Some(Vec::new());
        let mut changed = false;
        for i in (0..nodes.len()).rev() {
            let Some(f) = facts_in[i].clone() else {
                continue;
            };
            let n = nodes[i];
            for outcome in [true, false] {
                let ef = learn(&f, n.atom, outcome);
                // A true set test is a chain of `jeq`s each with its own edge to the target:
                // on every one the value is known, so right after it any test the set
                // decides is threaded. The edges meet at the target, where nothing is known.
                let among = match test_of(n.atom) {
                    (k, Cmp::OneOf(vs)) if outcome => Some((k, vs)),
                    _ => None,
                };
                let decide_set = |atom: AtomId| -> Option<bool> {
                    let (k, vs) = among.as_ref()?;
                    match test_of(atom) {
                        (kc, Cmp::Eq(v)) if kc == *k => (!vs.contains(&v)).then_some(false),
                        (kc, Cmp::OneOf(ws)) if kc == *k => {
                            if vs.iter().all(|v| ws.contains(v)) {
                                Some(true)
                            } else if vs.iter().all(|v| !ws.contains(v)) {
                                Some(false)
                            } else {
                                None
                            }
                        }
                        _ => None,
                    }
                };
                let mut s = if outcome { n.t } else { n.f };
                let mut steps = 0;
                while let Some(sx) = s.node()
                    && steps < nodes.len()
                {
                    let c = nodes[sx.index()];
                    match decide(&ef, c.atom).or_else(|| decide_set(c.atom)) {
                        Some(o) => s = if o { c.t } else { c.f },
                        None => break,
                    }
                    steps += 1;
                }
                let slot = if outcome {
                    &mut nodes[i].t
                } else {
                    &mut nodes[i].f
                };
                if *slot != s {
                    *slot = s;
                    changed = true;
                }
                if let Some(sx) = s.node() {
                    let j = sx.index();
                    facts_in[j] = Some(match &facts_in[j] {
                        None => ef,
                        Some(old) => meet(old, &ef),
                    });
                }
            }
        }
        if !changed {
            break;
        }
    }
    // Is accept reachable?
    let mut seen = vec![false; nodes.len()];
    let mut stack = vec![root];
    while let Some(r) = stack.pop() {
        if r == Ref::ACCEPT {
            return false;
        }
        let Some(ix) = r.node() else {
            continue;
        };
        if std::mem::replace(&mut seen[ix.index()], true) {
            continue;
        }
        let n = nodes[ix.index()];
        stack.push(n.t);
        stack.push(n.f);
    }
    true
}

/// Emit blocks for the specialised graph, eliding loads of values already in A or X.
fn emit(g: &Graph, root: Ref, snaplen: u32) -> Result<Cfg, CompileError> {
    let mut cfg = Cfg::with_capacity(g.nodes.len() + 2);
    let accept = cfg.add_shared(&[], Term::Ret(snaplen));
    let reject = cfg.add_shared(&[], Term::Ret(0));
    let Some(root_ix) = root.node() else {
        cfg.root = Some(if root == Ref::ACCEPT { accept } else { reject });
        return Ok(cfg);
    };
    /// What emission knows of a node of the graph.
    #[derive(Clone, Copy, Default)]
    struct Slot<'a> {
        reach: bool,
        /// What A and X hold on entry: the common value of all predecessors' exits.
        a_in: Option<Holds>,
        x_in: Option<Holds>,
        /// The block's branch, and its statements (a range of `stmts`).
        plan: Option<(Br<'a>, u32, u32)>,
        block: Option<BlockId>,
    }
    let mut slots: Vec<Slot<'_>> = vec![Slot::default(); g.nodes.len()];
    // Reachable nodes in topological order: successors have smaller refs, so decreasing refs.
    slots[root_ix.index()].reach = true;
    for i in (0..g.nodes.len()).rev() {
        if slots[i].reach {
            let n = g.nodes[i];
            for s in [n.t, n.f] {
                if let Some(s) = s.node() {
                    slots[s.index()].reach = true;
                }
            }
        }
    }
    slots[root_ix.index()].a_in = Some(Holds::Unknown);
    slots[root_ix.index()].x_in = Some(Holds::Unknown);
    let meet = |slot: &mut Option<Holds>, v: Holds| {
        *slot = Some(match *slot {
            None => v,
            Some(old) if old == v => v,
            Some(_) => Holds::Unknown,
        });
    };
    // The statements of every block, one after the other.
    let mut stmts: Vec<Insn> = Vec::with_capacity(2 * g.nodes.len());
    let mut vals = ValCompiler::new(0);
    for i in (0..g.nodes.len()).rev() {
        if !slots[i].reach {
            continue;
        }
        let n = g.nodes[i];
        let ain = slots[i].a_in.unwrap_or(Holds::Unknown);
        let xin = slots[i].x_in.unwrap_or(Holds::Unknown);
        let start = stmts.len() as u32;
        let (br, aout, xout) = match g.atom(n.atom) {
            Atom::Test(t) => plan_test(t, ain, xin, &mut stmts),
            Atom::Rel(a, op, b) => {
                let (code, k) = vals.relation(a, *op, b, false, &mut stmts)?;
                (Br::Jump(code, k, false), Holds::Unknown, Holds::Unknown)
            }
        };
        slots[i].plan = Some((br, start, stmts.len() as u32));
        for s in [n.t, n.f] {
            if let Some(s) = s.node() {
                let j = s.index();
                meet(&mut slots[j].a_in, aout);
                meet(&mut slots[j].x_in, xout);
            }
        }
    }
    // Blocks, created successors first.
    let target = |r: Ref, slots: &[Slot<'_>]| -> BlockId {
        match r.node() {
            Some(ix) => slots[ix.index()].block.unwrap_or(reject),
            None if r == Ref::ACCEPT => accept,
            None => reject,
        }
    };
    for i in 0..g.nodes.len() {
        let Some((br, start, end)) = slots[i].plan else {
            continue;
        };
        let n = g.nodes[i];
        let (jt, jf) = (target(n.t, &slots), target(n.f, &slots));
        let own = &stmts[start as usize..end as usize];
        let id = match br {
            Br::Jump(code, k, swap) => {
                let (jt, jf) = if swap { (jf, jt) } else { (jt, jf) };
                cfg.add_shared(own, Term::Jump { code, k, jt, jf })
            }
            Br::OneOf(vs) => {
                let mut next = jf;
                for (j, &v) in vs.iter().enumerate().rev() {
                    let code = JMP | JEQ | K;
                    let term = Term::Jump {
                        code,
                        k: v,
                        jt,
                        jf: next,
                    };
                    next = cfg.add_shared(if j == 0 { own } else { &[] }, term);
                }
                next
            }
            Br::Range(lo, hi) => {
                let upper = cfg.add_shared(
                    &[],
                    Term::Jump {
                        code: JMP | JGT | K,
                        k: hi,
                        jt: jf,
                        jf: jt,
                    },
                );
                cfg.add_shared(
                    own,
                    Term::Jump {
                        code: JMP | JGE | K,
                        k: lo,
                        jt: upper,
                        jf,
                    },
                )
            }
        };
        slots[i].block = Some(id);
    }
    cfg.root = Some(target(root, &slots));
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsift_lang::{Context, compile as front};
    use netsift_wire::LinkType;

    /// Where [`nothing_to_specialise`] holds, specialising and regrouping give the program the
    /// optimiser makes without them: on random conjunctions, disjunctions and negations of
    /// everyday primitives, for every link type.
    #[test]
    fn skipping_specialisation_changes_nothing() {
        const PRIMS: [&str; 24] = [
            "ip",
            "ip6",
            "arp",
            "tcp",
            "udp",
            "icmp",
            "vlan",
            "port 53",
            "tcp port 80",
            "udp dst port 123",
            "host 198.18.0.1",
            "src host 198.18.0.2",
            "dst net 10.0.0.0/8",
            "net 192.168.0.0/16",
            "ether host 2:0:0:0:0:1",
            "ip[8] > 64",
            "len > 100",
            "tcp[tcpflags] & tcp-syn != 0",
            "portrange 1-1023",
            "ip proto 47",
            "ether broadcast",
            "ip6 host 2001:db8::1",
            "less 60",
            "ether[0] & 1 = 0",
        ];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let (mut checked, mut skipped) = (0, 0);
        for _ in 0..4000 {
            let mut e = PRIMS[next(PRIMS.len())].to_string();
            for _ in 0..next(4) {
                let op = ["and", "or", "and not"][next(3)];
                e = format!("{e} {op} {}", PRIMS[next(PRIMS.len())]);
            }
            if next(4) == 0 {
                e = format!("not ({e})");
            }
            for lt in [
                LinkType::ETHERNET,
                LinkType::RAW,
                LinkType::LINUX_SLL,
                LinkType::NULL,
            ] {
                let Ok(pred) = front(&e, &Context::new(lt)) else {
                    continue;
                };
                if !pred.optimizable() {
                    continue;
                }
                let (g0, root) = decision_graph(&pred).unwrap();
                checked += 1;
                if root.is_terminal() || !nothing_to_specialise(&g0) {
                    continue;
                }
                skipped += 1;
                let without = emit(&g0, root, 65535).unwrap().linearize();
                let mut sp = Specialiser::new(&g0);
                let (g, r, _) = specialise(&g0, &mut sp, root, 1 << 20).unwrap();
                let (g, r) = regroup(&g, r);
                let with = emit(&g, r, 65535).unwrap().linearize();
                assert_eq!(without, with, "{e} on {lt}");
            }
        }
        assert!(
            skipped * 10 > checked,
            "only {skipped} of {checked} graphs skipped"
        );
    }
}
