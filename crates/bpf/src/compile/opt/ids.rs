//! The optimiser's index types: each index space of the decision graph and of the specialiser
//! has a `u32` newtype of its own, so that a node index is not taken for an atom, nor a fact set
//! for a knowledge. Where an index is optional in a large vector, the type has a niche
//! (`Option` of it is 4 bytes) or a documented sentinel constant.

use std::fmt;
use std::num::NonZeroU32;

// The niches the per-node vectors count on.
const _: () = assert!(size_of::<Option<Ref>>() == 4 && size_of::<Option<FactSetId>>() == 4);

/// A reference into a decision graph: "accept", "reject" or a node. Refs are ordered: the
/// terminals first, then the nodes in the order of their indices; successors have smaller refs
/// than their node (the graph is built successors first), and the passes over a graph rely on
/// it. Never 0, so that `Option<Ref>` is 4 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Ref(NonZeroU32);

impl Ref {
    pub(super) const ACCEPT: Ref = Ref(NonZeroU32::MIN);
    pub(super) const REJECT: Ref = Ref(NonZeroU32::new(2).unwrap());
    /// The representation of the ref of node 0.
    const FIRST: u32 = 3;

    /// The node this ref is, if it is not a terminal.
    pub(super) fn node(self) -> Option<NodeIx> {
        self.0.get().checked_sub(Ref::FIRST).map(NodeIx)
    }

    /// Whether this is "accept" or "reject".
    pub(super) fn is_terminal(self) -> bool {
        self.0.get() < Ref::FIRST
    }
}

impl From<NodeIx> for Ref {
    fn from(ix: NodeIx) -> Ref {
        Ref(NonZeroU32::new(ix.0 + Ref::FIRST).expect("node index overflow"))
    }
}

impl fmt::Debug for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.node() {
            Some(ix) => write!(f, "n{}", ix.0),
            None if *self == Ref::ACCEPT => f.write_str("accept"),
            None => f.write_str("reject"),
        }
    }
}

/// The index of a node of a decision graph (in `Graph::nodes`, and in the per-node vectors of
/// the passes over the graph).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct NodeIx(u32);

impl NodeIx {
    /// A bound above every node: no node is at or above it (see `Liveness::thresholds`).
    pub(super) const NEVER: NodeIx = NodeIx(u32::MAX);

    pub(super) fn new(i: usize) -> NodeIx {
        NodeIx(i as u32)
    }

    pub(super) fn index(self) -> usize {
        self.0 as usize
    }
}

/// The index of an atom (in `Graph::atoms`, and in `Graph::keys`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct AtomId(u32);

impl AtomId {
    pub(super) fn new(i: usize) -> AtomId {
        AtomId(i as u32)
    }

    pub(super) fn index(self) -> usize {
        self.0 as usize
    }
}

/// A fact key: a field under a mask (numbered from 0 in order of first use), or the key of a
/// relation of its own (numbered down from `u32::MAX` by atom). Facts are sorted by key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Key(u32);

impl Key {
    /// The key of the field (and mask) numbered `n`.
    pub(super) fn field(n: usize) -> Key {
        debug_assert!(n < (u32::MAX / 2) as usize);
        Key(n as u32)
    }

    /// The key of the relation `atom`.
    pub(super) fn relation(atom: AtomId) -> Key {
        Key(u32::MAX - atom.0)
    }

    pub(super) fn is_relation(self) -> bool {
        self.0 >= u32::MAX / 2
    }

    /// A field's key's number (`None` for a relation's).
    pub(super) fn field_index(self) -> Option<usize> {
        (!self.is_relation()).then_some(self.0 as usize)
    }

    /// The key's bit in a 64-bit signature: its number modulo 64.
    pub(super) fn sig_bit(self) -> u64 {
        1 << (self.0 % 64)
    }

    /// The key of a word made by [`word`].
    pub(super) fn of_word(w: u64) -> Key {
        Key((w >> 32) as u32)
    }
}

/// The key of one of libpcap's value numbers as `libpcap_rejects_all` sees them: a field under a
/// mask, read by a primitive or by a relation (different value numbers), or a test that is a
/// boolean of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct ValueKey(u32);

impl ValueKey {
    /// The value of the field `key` (not a relation's), read by a relation or by a primitive.
    pub(super) fn field(key: Key, by_relation: bool) -> ValueKey {
        debug_assert!(!key.is_relation());
        ValueKey(2 * key.0 + u32::from(by_relation))
    }

    /// The outcome of `atom`'s test, a boolean of its own.
    pub(super) fn own(atom: AtomId) -> ValueKey {
        ValueKey(u32::MAX - atom.0)
    }
}

/// An interned fact set of the specialiser (`FactTable`). Never 0 (it is its index plus one), so
/// that `Option<FactSetId>` is 4 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct FactSetId(NonZeroU32);

impl fmt::Debug for FactSetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FactSetId({})", self.index())
    }
}

impl FactSetId {
    /// The empty set, interned first.
    pub(super) const EMPTY: FactSetId = FactSetId(NonZeroU32::MIN);

    pub(super) fn new(i: usize) -> FactSetId {
        FactSetId(NonZeroU32::new(i as u32 + 1).expect("fact set index overflow"))
    }

    pub(super) fn index(self) -> usize {
        self.0.get() as usize - 1
    }
}

/// An interned knowledge of the specialiser (an index in `FactTable::knows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct KnowId(u32);

impl KnowId {
    pub(super) fn new(i: usize) -> KnowId {
        KnowId(i as u32)
    }

    pub(super) fn index(self) -> usize {
        self.0 as usize
    }
}

/// The word hashed for a fact `(key, know)` when interning fact sets.
pub(super) fn fact_word(key: Key, know: KnowId) -> u64 {
    u64::from(key.0) << 32 | u64::from(know.0)
}

/// An interned need (see `Needs`): its index, with the top bit set when the need pins its key.
/// The order is that of the representation (only used to order pairs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct NeedId(u32);

impl NeedId {
    const PINNED: u32 = 1 << 31;
    /// Stands for "contradicted" in `Needs`' memo of test outcomes.
    pub(super) const DEAD: NeedId = NeedId(u32::MAX);

    pub(super) fn new(i: usize, pinned: bool) -> NeedId {
        debug_assert!(i < NeedId::PINNED as usize - 1);
        NeedId(i as u32 | if pinned { NeedId::PINNED } else { 0 })
    }

    pub(super) fn index(self) -> usize {
        (self.0 & !NeedId::PINNED) as usize
    }

    /// Whether the need pins its key.
    pub(super) fn pinned(self) -> bool {
        self.0 & NeedId::PINNED != 0
    }

    /// The need of a word made by [`word`].
    pub(super) fn of_word(w: u64) -> NeedId {
        NeedId(w as u32)
    }
}

/// An entry of an alternative of `Needs`: `key << 32 | need`, so that words sort by key.
pub(super) fn word(key: Key, need: NeedId) -> u64 {
    u64::from(key.0) << 32 | u64::from(need.0)
}

/// A test edge into "accept": a node and an outcome (`2 * node + outcome`, so ordered by node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Edge(u32);

impl Edge {
    pub(super) fn new(node: NodeIx, outcome: bool) -> Edge {
        Edge(2 * node.0 + u32::from(outcome))
    }
}
