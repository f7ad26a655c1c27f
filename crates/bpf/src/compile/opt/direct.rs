//! Tier 0 of the optimiser: small filters straight from the predicate to instructions.
//!
//! Most filters people type (`ip`, `ip src net A and dst net B`, `ip and not tcp port (…) and
//! not ip host (…)`) give the general optimiser nothing to decide once the tests that enclosing
//! `and`s and `or`s settle are gone: `dst net B` also tests for ARP and RARP, which `ip` (a
//! conjunct before it) rules out. Tier 0:
//!
//! 1. walks the predicate once with the facts every path into a node shares (the outcomes of
//!    the single tests before it in enclosing `and`s and `or`s), dropping the tests they
//!    decide, and takes runs of `a and X or a and Y` as `a and (X or Y)` (where the first `a`
//!    decided, the general optimiser decides the second the same way — checked per test);
//! 2. builds the decision graph as `build` does (nodes shared by test and successors);
//! 3. proceeds only if specialisation would change nothing: each field is tested once, or a
//!    field tested by several nodes is tested only for equality, with values no two of them
//!    share, and never after another one's true edge — a path then knows only values other
//!    nodes excluded, which decide nothing (`nothing_decidable`);
//! 4. regroups chains by field as the general optimiser's `regroup` does, plans the blocks with
//!    the same function ([`plan_test`]), and lays them out by `Cfg::linearize`'s rules
//!    (reverse post-order, false successor visited first, returns last in order of first use,
//!    identical blocks shared) — on per-thread vectors instead of the general optimiser's
//!    hash-consed graphs, interned fact sets and control-flow graph.
//!
//! Before the walk, a predicate that is a tree of `and`, `or` and `not` over tests of distinct
//! fields (one test and chains included) gets its program in one pass, without graphs or a
//! layout search ([`tree_program`]): that is what the steps above would make of it.
//!
//! The program must be the general optimiser's, instruction for instruction. Anything else —
//! relations, a field tested after its value was known, a test decided by its width alone, an
//! operand whose tests were all absorbed, a constant result, a jump longer than 255 — gives
//! `None` and the general optimiser runs. `optimiser_shortcuts_match_the_full_optimiser`
//! (testkit) compares both on the corpus and random expressions, and the `lang_compile` fuzz
//! target on every input.

use netsift_lang::Pred;
use netsift_lang::pred::{Cmp, Field, Node, NodeId, Test};

use super::{AOut, Br, Holds, Know, max_value, plan_test, width_decides};
use crate::insn::{Insn, Program, code::*};

/// Most tests tier 0 takes on (more: the general optimiser).
const MAX_TESTS: usize = 160;
/// Most predicate nodes visited (a shared node is visited once per occurrence).
const MAX_VISITS: u32 = 1024;
/// Most decision-graph blocks (a set test is one block per value).
const MAX_BLOCKS: usize = 320;
/// Most statements in all blocks.
const MAX_INSNS: usize = 640;
/// Graphs and block lists up to this size are searched, not hashed.
const SMALL: usize = 16;

/// A vector that refuses to grow past `N` (`push` gives `None`, and tier 0 gives up).
struct Capped<T, const N: usize>(Vec<T>);

impl<T, const N: usize> Default for Capped<T, N> {
    fn default() -> Self {
        Capped(Vec::new())
    }
}

impl<T, const N: usize> Capped<T, N> {
    fn push(&mut self, v: T) -> Option<()> {
        if self.0.len() >= N {
            return None;
        }
        self.0.push(v);
        Some(())
    }
}

impl<T, const N: usize> std::ops::Deref for Capped<T, N> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T, const N: usize> std::ops::DerefMut for Capped<T, N> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.0
    }
}

/// Tier 0's working memory, kept per thread between compilations (allocation was a third of
/// its instructions): every vector is emptied before use and bounded by the limits above.
#[derive(Default)]
struct Scratch {
    /// Field/mask of each key, and how many graph nodes test it (counted by
    /// `nothing_decidable`).
    keys: Capped<(Field, u32, u32), MAX_TESTS>,
    /// The predicate node of each kept test.
    tests: Capped<NodeId, MAX_TESTS>,
    /// Facts on the current path, newest last: (key, everything known about it).
    facts: Capped<(u32, Know), MAX_TESTS>,
    /// Per key, the index in `facts` of its newest fact (`u32::MAX`: none); each fact holds
    /// the index it replaced, restored when it is popped.
    latest: Vec<u32>,
    replaced: Vec<u32>,
    tree: Capped<T, { 4 * MAX_TESTS }>,
    kids: Capped<u32, { 4 * MAX_TESTS }>,
    /// Keys of tests that lead a run of junctions taken as one (`a and X or a and Y`).
    merged: Vec<u32>,
    /// Kept operands of the junctions being simplified (a stack).
    pending: Capped<u32, { 4 * MAX_TESTS }>,
    graph: Capped<GNode, MAX_TESTS>,
    /// Graph nodes by (test, true, false), as `Graph::node` shares them.
    node_ids: netsift_lang::fxhash::FxHashMap<(u32, u32, u32), u32>,
    /// The regrouped graph and its node map (see `regroup`).
    regrouped: Capped<GNode, MAX_TESTS>,
    preds: Vec<u32>,
    memo: Vec<u32>,
    chain: Vec<u32>,
    reach: Vec<u64>,
    holds: Vec<(Option<Holds>, Option<Holds>)>,
    plans: Vec<(u32, u32, Branch)>,
    block_of: Vec<u32>,
    blocks: Capped<Block, MAX_BLOCKS>,
    /// Blocks by the hash of their contents (the first of each hash), once there are many,
    /// and each block's hash.
    block_ids: netsift_lang::fxhash::FxHashMap<u64, u32>,
    block_hashes: Vec<u64>,
    insns: Capped<Insn, MAX_INSNS>,
    /// Per block: seen by the layout's search, and its position.
    place: Vec<(bool, u32)>,
    post: Vec<u32>,
    stack: Vec<(u32, u8)>,
    order: Vec<u32>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// A block's branch without borrowing the test (a set test's values are its test's).
#[derive(Clone, Copy)]
enum Branch {
    Jump(u16, u32, bool),
    OneOf,
    Range(u32, u32),
}

/// A node of the simplified tree.
#[derive(Clone, Copy)]
enum T {
    /// A test (index into `Scratch::tests`), and its field/mask key.
    Test(u32, u32),
    /// Operands `kids[start..start + len]`.
    And(u32, u32),
    Or(u32, u32),
    Not(u32),
}

/// A simplified operand: a constant or a tree node.
#[derive(Clone, Copy)]
enum S {
    Const(bool),
    Node(u32),
}

struct Simplifier<'p, 's> {
    pred: &'p Pred,
    sc: &'s mut Scratch,
    visits: u32,
}

fn test_of(pred: &Pred, id: NodeId) -> Option<&Test> {
    match pred.node(id) {
        Node::Test(t) => Some(t),
        _ => None,
    }
}

impl<'p> Simplifier<'p, '_> {
    fn key(&mut self, t: &Test) -> Option<u32> {
        match self
            .sc
            .keys
            .iter()
            .position(|&(f, m, _)| f == t.field && m == t.mask)
        {
            Some(i) => Some(i as u32),
            None => {
                self.sc.keys.push((t.field, t.mask, 0))?;
                self.sc.latest.push(u32::MAX);
                Some((self.sc.keys.len() - 1) as u32)
            }
        }
    }

    fn know(&self, key: u32) -> Option<&Know> {
        let i = *self.sc.latest.get(key as usize)?;
        self.sc.facts.get(i as usize).map(|(_, k)| k)
    }

    /// Pop the facts after the first `mark`.
    fn forget(&mut self, mark: usize) {
        while self.sc.facts.len() > mark {
            let i = self.sc.facts.len() - 1;
            let key = self.sc.facts[i].0;
            self.sc.latest[key as usize] = self.sc.replaced[i];
            self.sc.facts.pop();
            self.sc.replaced.pop();
        }
    }

    /// Tree node `n` as a single test, possibly negated: (its index in `tests`, its key,
    /// negated).
    fn single(&self, n: u32) -> Option<(u32, u32, bool)> {
        match self.sc.tree[n as usize] {
            T::Test(t, key) => Some((t, key, false)),
            T::Not(m) => match self.sc.tree[m as usize] {
                T::Test(t, key) => Some((t, key, true)),
                _ => None,
            },
            _ => None,
        }
    }

    /// After an operand of an `and` (`outcome` true) or `or` (false): learn its outcome if it
    /// is a single test.
    fn learn(&mut self, n: u32, outcome: bool) -> Option<()> {
        let Some((t, key, negated)) = self.single(n) else {
            return Some(());
        };
        let outcome = outcome != negated;
        let test = test_of(self.pred, self.sc.tests[t as usize])?;
        let mut k = match self.know(key) {
            Some(k) => *k,
            None => Know::new(max_value(&test.field, test.mask)),
        };
        k.learn(&test.cmp, outcome, false);
        self.sc.facts.push((key, k))?;
        self.sc.replaced.push(self.sc.latest[key as usize]);
        self.sc.latest[key as usize] = (self.sc.facts.len() - 1) as u32;
        Some(())
    }

    fn push(&mut self, n: T) -> Option<S> {
        self.sc.tree.push(n)?;
        Some(S::Node((self.sc.tree.len() - 1) as u32))
    }

    /// `id` under the current facts; `None`: not for tier 0.
    fn simplify(&mut self, id: NodeId) -> Option<S> {
        self.visits += 1;
        if self.visits > MAX_VISITS {
            return None;
        }
        let pred = self.pred;
        match pred.node(id) {
            Node::Const(b) => Some(S::Const(*b)),
            Node::Test(t) => {
                // A value masked to 0 is constant (as the decision graph makes it).
                if t.mask == 0 {
                    return Some(S::Const(super::eval_cmp(&t.cmp, 0)));
                }
                let key = self.key(t)?;
                if let Some(b) = self.know(key).and_then(|k| k.decide(&t.cmp, false)) {
                    return Some(S::Const(b));
                }
                // A test its field's width decides: the general optimiser's business.
                if width_decides(max_value(&t.field, t.mask), &t.cmp) {
                    return None;
                }
                self.sc.tests.push(id)?;
                self.push(T::Test((self.sc.tests.len() - 1) as u32, key))
            }
            Node::Not(x) => match self.simplify(*x)? {
                S::Const(b) => Some(S::Const(!b)),
                S::Node(n) => match self.sc.tree[n as usize] {
                    T::Not(m) => Some(S::Node(m)),
                    _ => self.push(T::Not(n)),
                },
            },
            Node::And(ops) => self.junction(ops, true),
            Node::Or(ops) => self.junction(ops, false),
            Node::Relation(..) | Node::Special(_) => None,
        }
    }

    /// `and` (`all`) or `or` of `ops`.
    fn junction(&mut self, ops: &[NodeId], all: bool) -> Option<S> {
        let mark = self.sc.facts.len();
        let base = self.sc.pending.len();
        for &o in ops {
            let tests = self.sc.tests.len();
            match self.simplify(o)? {
                // An operand whose tests were all absorbed (`a and b` where `a` decides `b`
                // false): the general optimiser keeps `a` for what it teaches the operands
                // after it.
                S::Const(_) if self.sc.tests.len() != tests => return None,
                // `x and false`, `x or true`: both exits of `x` meet (no test is left).
                S::Const(b) if b != all => {
                    self.forget(mark);
                    self.sc.pending.truncate(base);
                    return Some(S::Const(b));
                }
                S::Const(_) => {}
                S::Node(k) => {
                    self.sc.pending.push(k)?;
                    self.learn(k, all)?;
                }
            }
        }
        self.forget(mark);
        if self.sc.pending.len() == base {
            return Some(S::Const(all));
        }
        self.make(base, all).map(S::Node)
    }

    /// The test leading tree node `k` if it is the junction opposite to `all` whose first
    /// operand is a single test: (the test's predicate node, negated, its key, the lead's tree
    /// node, the junction's operands).
    fn lead(&self, k: u32, all: bool) -> Option<(NodeId, bool, u32, u32, u32, u32)> {
        let (start, len) = match (self.sc.tree[k as usize], all) {
            (T::Or(start, len), true) | (T::And(start, len), false) => (start, len),
            _ => return None,
        };
        let first = self.sc.kids[start as usize];
        let (t, key, negated) = self.single(first)?;
        Some((self.sc.tests[t as usize], negated, key, first, start, len))
    }

    /// A new junction node over `kids[start..start + len]`: `and` when `all`.
    fn junction_node(&mut self, all: bool, start: u32, len: u32) -> Option<u32> {
        self.sc.tree.push(if all {
            T::And(start, len)
        } else {
            T::Or(start, len)
        })?;
        Some((self.sc.tree.len() - 1) as u32)
    }

    /// The `and` (`all`) or `or` of the tree nodes `pending[base..]` (which it pops). Runs of
    /// operands that are the opposite junction led by the same test (`a and X or a and Y`,
    /// the two directions of `src or dst net`) are taken as one, `a and (X or Y)`: where the
    /// first `a` decided the way, the general optimiser decides the second `a` the same way
    /// (checked: the lead's outcome must decide the same test again), so both give one graph.
    fn make(&mut self, base: usize, all: bool) -> Option<u32> {
        let end = self.sc.pending.len();
        if end - base == 1 {
            let k = self.sc.pending[base];
            self.sc.pending.truncate(base);
            return Some(k);
        }
        let mut i = base;
        while i < end {
            let k = self.sc.pending[i];
            let mut j = i + 1;
            let lead = self.lead(k, all).filter(|l| self.decides_again(l.0));
            if let Some(l) = lead {
                while j < end
                    && self.lead(self.sc.pending[j], all).map(|x| (x.0, x.1)) == Some((l.0, l.1))
                {
                    j += 1;
                }
            }
            match lead {
                Some((_, _, key, first, _, _)) if j - i >= 2 => {
                    // The rests of the run's junctions, then their junction.
                    let rb = self.sc.pending.len();
                    for m in i..j {
                        let (.., start, len) = self.lead(self.sc.pending[m], all)?;
                        let rest = if len == 2 {
                            self.sc.kids[start as usize + 1]
                        } else {
                            self.junction_node(!all, start + 1, len - 1)?
                        };
                        self.sc.pending.push(rest)?;
                    }
                    let inner = self.make(rb, all)?;
                    self.sc.merged.push(key);
                    let start = self.sc.kids.len() as u32;
                    self.sc.kids.push(first)?;
                    self.sc.kids.push(inner)?;
                    let outer = self.junction_node(!all, start, 2)?;
                    self.sc.pending.push(outer)?;
                }
                _ => {
                    for m in i..j {
                        let k = self.sc.pending[m];
                        self.sc.pending.push(k)?;
                    }
                }
            }
            i = j;
        }
        let n = self.sc.pending.len() - end;
        let node = if n == 1 {
            self.sc.pending[end]
        } else {
            let start = self.sc.kids.len() as u32;
            for m in end..end + n {
                let k = self.sc.pending[m];
                self.sc.kids.push(k)?;
            }
            self.junction_node(all, start, n as u32)?
        };
        self.sc.pending.truncate(base);
        Some(node)
    }

    /// Whether the test's outcome, once learned, decides the same test again (both ways): a
    /// set test, for one, teaches only its range when true.
    fn decides_again(&self, id: NodeId) -> bool {
        let Some(t) = test_of(self.pred, id) else {
            return false;
        };
        [true, false].iter().all(|&outcome| {
            let mut k = Know::new(max_value(&t.field, t.mask));
            k.learn(&t.cmp, outcome, false);
            k.decide(&t.cmp, false) == Some(outcome)
        })
    }
}

/// A decision-graph node: the test (its predicate node), its key, and the true and false
/// successors (`ACCEPT`, `REJECT` or `FIRST + i`).
#[derive(Clone, Copy, PartialEq, Eq)]
struct GNode {
    test: u32,
    key: u32,
    t: u32,
    f: u32,
}

const ACCEPT: u32 = super::ACCEPT;
const REJECT: u32 = super::REJECT;
const FIRST: u32 = super::FIRST;

/// A node of `graph` (or the one made before for the same test and successors, as
/// `Graph::node` shares them); a test whose two successors are the same is dropped.
fn node(
    graph: &mut Capped<GNode, MAX_TESTS>,
    ids: &mut netsift_lang::fxhash::FxHashMap<(u32, u32, u32), u32>,
    n: GNode,
) -> Option<u32> {
    if n.t == n.f {
        return Some(n.t);
    }
    let same = |g: &GNode| g.test == n.test && g.t == n.t && g.f == n.f;
    if graph.len() < SMALL {
        if let Some(i) = graph.iter().position(same) {
            return Some(i as u32 + FIRST);
        }
    } else {
        // The map holds the first nodes; add the ones made before it was needed.
        for i in ids.len()..graph.len() {
            let g = graph[i];
            ids.insert((g.test, g.t, g.f), i as u32 + FIRST);
        }
        if let Some(&r) = ids.get(&(n.test, n.t, n.f)) {
            return Some(r);
        }
    }
    graph.push(n)?;
    Some(graph.len() as u32 - 1 + FIRST)
}

/// The decision graph of tree node `n` with exits `t` and `f` (successors made first, as
/// `build` makes them).
fn build(sc: &mut Scratch, n: u32, t: u32, f: u32) -> Option<u32> {
    Some(match sc.tree[n as usize] {
        T::Test(test, key) => {
            let test = sc.tests[test as usize].0;
            node(&mut sc.graph, &mut sc.node_ids, GNode { test, key, t, f })?
        }
        T::Not(x) => build(sc, x, f, t)?,
        T::And(start, len) => {
            let mut next = t;
            for i in (start..start + len).rev() {
                next = build(sc, sc.kids[i as usize], next, f)?;
            }
            next
        }
        T::Or(start, len) => {
            let mut next = f;
            for i in (start..start + len).rev() {
                next = build(sc, sc.kids[i as usize], t, next)?;
            }
            next
        }
    })
}

/// The equality values a test compares with, if it only compares for equality.
fn eq_values(cmp: &Cmp) -> Option<&[u32]> {
    match cmp {
        Cmp::Eq(v) => Some(std::slice::from_ref(v)),
        Cmp::OneOf(vs) => Some(vs),
        _ => None,
    }
}

/// Whether specialising `graph` along its paths would change nothing: no test can be decided
/// by what the tests before it on a path learned. Fields tested once cannot be; a field tested
/// by several nodes qualifies when all of them test equality with values no other node of the
/// field tests, and none is reachable from another's true edge (which would know the value):
/// what a path then knows of the field is values other nodes excluded, which decide nothing.
/// A test leading a merged run (`merged`) must also be decided again by what it taught: all
/// values its field is compared with must fit in what the optimiser remembers (12).
fn nothing_decidable(pred: &Pred, sc: &mut Scratch) -> Option<bool> {
    let n = sc.graph.len();
    let mut repeated = false;
    for key in sc.keys.iter_mut() {
        key.2 = 0;
    }
    for g in sc.graph.iter() {
        sc.keys[g.key as usize].2 += 1;
        repeated |= sc.keys[g.key as usize].2 > 1;
    }
    if !repeated {
        return Some(false);
    }
    // Per repeated key: the set of its nodes; per node: the nodes reachable from it.
    let words = n.div_ceil(64);
    let nkeys = sc.keys.len();
    sc.reach.clear();
    sc.reach.resize((n + nkeys) * words, 0);
    let (reach, key_sets) = sc.reach.split_at_mut(n * words);
    for i in 0..n {
        let g = sc.graph[i];
        reach[i * words + i / 64] |= 1 << (i % 64);
        key_sets[g.key as usize * words + i / 64] |= 1 << (i % 64);
        for succ in [g.t, g.f] {
            if succ >= FIRST {
                let j = (succ - FIRST) as usize;
                for w in 0..words {
                    let v = reach[j * words + w];
                    reach[i * words + w] |= v;
                }
            }
        }
    }
    for (key, &(_, _, count)) in sc.keys.iter().enumerate() {
        if count < 2 {
            continue;
        }
        // Equality tests only, with values no two nodes share.
        sc.chain.clear();
        for g in sc.graph.iter().filter(|g| g.key as usize == key) {
            sc.chain
                .extend_from_slice(eq_values(&test_of(pred, NodeId(g.test))?.cmp)?);
        }
        sc.chain.sort_unstable();
        if sc.chain.windows(2).any(|w| w[0] == w[1])
            || (sc.chain.len() > 12 && sc.merged.contains(&(key as u32)))
        {
            return None;
        }
        // No node of the key after another's true edge.
        for g in sc.graph.iter().filter(|g| g.key as usize == key) {
            if g.t >= FIRST {
                let from = (g.t - FIRST) as usize * words;
                if (0..words).any(|w| reach[from + w] & key_sets[key * words + w] != 0) {
                    return None;
                }
            }
        }
    }
    Some(true)
}

/// `regroup` of the general optimiser on `graph` (into `regrouped`): in a chain of tests that
/// all lead to the same place when true (or all when false), tests are sorted by field, first
/// occurrences first, when that brings repeated fields together.
fn regroup(sc: &mut Scratch, root: u32) -> Option<u32> {
    let n = sc.graph.len();
    sc.preds.clear();
    sc.preds.resize(n, 0);
    sc.memo.clear();
    sc.memo.resize(n, u32::MAX);
    // Predecessor counts of reachable nodes (the memo marks the seen ones for now).
    sc.chain.clear();
    sc.chain.push(root);
    while let Some(r) = sc.chain.pop() {
        if r < FIRST || std::mem::replace(&mut sc.memo[(r - FIRST) as usize], 0) == 0 {
            continue;
        }
        let g = sc.graph[(r - FIRST) as usize];
        for succ in [g.t, g.f] {
            if succ >= FIRST {
                sc.preds[(succ - FIRST) as usize] += 1;
                sc.chain.push(succ);
            }
        }
    }
    sc.memo.iter_mut().for_each(|m| *m = u32::MAX);
    sc.regrouped.clear();
    sc.node_ids.clear();
    regroup_node(sc, root)
}

fn regroup_node(sc: &mut Scratch, r: u32) -> Option<u32> {
    if r < FIRST {
        return Some(r);
    }
    let ri = (r - FIRST) as usize;
    if sc.memo[ri] != u32::MAX {
        return Some(sc.memo[ri]);
    }
    let n = sc.graph[ri];
    // The longest chain from r linked by false edges with the true target n.t (an "or"), or by
    // true edges with the false target n.f (an "and"); inner members have no other entry.
    let chain_len = |sc: &Scratch, or: bool| -> usize {
        let (mut len, mut cur) = (1, n);
        loop {
            let next = if or { cur.f } else { cur.t };
            if next < FIRST || sc.preds[(next - FIRST) as usize] != 1 {
                return len;
            }
            let m = sc.graph[(next - FIRST) as usize];
            if (or && m.t != n.t) || (!or && m.f != n.f) {
                return len;
            }
            len += 1;
            cur = m;
        }
    };
    let (or_len, and_len) = (chain_len(sc, true), chain_len(sc, false));
    let (len, or) = if or_len >= and_len {
        (or_len, true)
    } else {
        (and_len, false)
    };
    // The members (refs), after whatever the stack holds.
    let base = sc.chain.len();
    let mut cur = r;
    for _ in 0..len {
        sc.chain.push(cur);
        let g = sc.graph[(cur - FIRST) as usize];
        cur = if or { g.f } else { g.t };
    }
    let key = |sc: &Scratch, x: u32| sc.graph[(x - FIRST) as usize].key;
    // Worth regrouping: at least three members, of more than one field, one field repeated.
    let worth = len >= 3 && {
        let mut seen = [0u64; MAX_TESTS.div_ceil(64)];
        let (mut differ, mut repeat) = (false, false);
        let first = key(sc, sc.chain[base]);
        for i in base..base + len {
            let k = key(sc, sc.chain[i]) as usize;
            differ |= k as u32 != first;
            repeat |= seen[k / 64] & (1 << (k % 64)) != 0;
            seen[k / 64] |= 1 << (k % 64);
        }
        differ && repeat
    };
    if !worth {
        sc.chain.truncate(base);
        let t = regroup_node(sc, n.t)?;
        let f = regroup_node(sc, n.f)?;
        let x = node(&mut sc.regrouped, &mut sc.node_ids, GNode { t, f, ..n })?;
        sc.memo[ri] = x;
        return Some(x);
    }
    let last = sc.graph[(sc.chain[base + len - 1] - FIRST) as usize];
    let (shared, exit) = if or { (n.t, last.f) } else { (n.f, last.t) };
    let shared = regroup_node(sc, shared)?;
    let exit = regroup_node(sc, exit)?;
    // Stable grouping by field, first occurrences first: members ordered after the stack.
    let sorted = sc.chain.len();
    let mut done = [0u64; MAX_TESTS.div_ceil(64)];
    for i in base..base + len {
        let k = key(sc, sc.chain[i]);
        let (w, bit) = (k as usize / 64, 1u64 << (k % 64));
        if done[w] & bit != 0 {
            continue;
        }
        done[w] |= bit;
        for j in i..base + len {
            if key(sc, sc.chain[j]) == k {
                let m = sc.chain[j];
                sc.chain.push(m);
            }
        }
    }
    let mut cur = exit;
    for i in (sorted..sorted + len).rev() {
        let m = sc.graph[(sc.chain[i] - FIRST) as usize];
        let (t, f) = if or { (shared, cur) } else { (cur, shared) };
        cur = node(&mut sc.regrouped, &mut sc.node_ids, GNode { t, f, ..m })?;
    }
    sc.chain.truncate(base);
    sc.memo[ri] = cur;
    Some(cur)
}

/// A block: statements `insns[start..start + len]` and how it ends.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Block {
    start: u32,
    len: u32,
    term: Term,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Term {
    Ret(u32),
    Jump { code: u16, k: u32, jt: u32, jf: u32 },
}

/// Add a block with the statements `stmts` of `from` (as `Cfg::add_shared`: an identical
/// block added before is returned instead).
fn add_block(sc: &mut Scratch, from: &[Insn], stmts: (u32, u32), term: Term) -> Option<u32> {
    let new = &from[stmts.0 as usize..(stmts.0 + stmts.1) as usize];
    let same = |sc: &Scratch, b: &Block| {
        b.term == term
            && b.len == stmts.1
            && sc.insns[b.start as usize..(b.start + b.len) as usize] == *new
    };
    if sc.blocks.len() < SMALL {
        if let Some(i) = sc.blocks.iter().position(|b| same(sc, b)) {
            return Some(i as u32);
        }
        return push_block(sc, new, term);
    }
    // The map holds the first blocks; add the ones made before it was needed.
    for i in sc.block_hashes.len()..sc.blocks.len() {
        let b = sc.blocks[i];
        let h = block_hash(
            &b.term,
            &sc.insns[b.start as usize..(b.start + b.len) as usize],
        );
        sc.block_hashes.push(h);
        sc.block_ids.entry(h).or_insert(i as u32);
    }
    let hash = block_hash(&term, new);
    match sc.block_ids.get(&hash) {
        Some(&i) if same(sc, &sc.blocks[i as usize]) => return Some(i),
        // Another block of that hash: look at all of them.
        Some(_) => {
            if let Some(i) = sc.blocks.iter().position(|b| same(sc, b)) {
                return Some(i as u32);
            }
        }
        None => {}
    }
    sc.block_ids.entry(hash).or_insert(sc.blocks.len() as u32);
    sc.block_hashes.push(hash);
    push_block(sc, new, term)
}

fn block_hash(term: &Term, stmts: &[Insn]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = netsift_lang::fxhash::FxHasher::default();
    term.hash(&mut h);
    stmts.hash(&mut h);
    h.finish()
}

fn push_block(sc: &mut Scratch, stmts: &[Insn], term: Term) -> Option<u32> {
    let start = sc.insns.len() as u32;
    for &i in stmts {
        sc.insns.push(i)?;
    }
    sc.blocks.push(Block {
        start,
        len: stmts.len() as u32,
        term,
    })?;
    Some(sc.blocks.len() as u32 - 1)
}

/// The optimised program of `pred`, if tier 0 can make it (see the module docs).
pub(in crate::compile) fn compile(pred: &Pred, snaplen: u32) -> Option<Program> {
    if let Some(p) = tree_program(pred, snaplen) {
        return Some(p);
    }
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut sc) => run(pred, snaplen, &mut sc),
        // A compilation inside a compilation (none today) gets fresh memory.
        Err(_) => run(pred, snaplen, &mut Scratch::default()),
    })
}

/// The walk's program (steps 1 to 4 of the module docs).
fn run(pred: &Pred, snaplen: u32, sc: &mut Scratch) -> Option<Program> {
    sc.keys.clear();
    sc.tests.clear();
    sc.facts.clear();
    sc.latest.clear();
    sc.replaced.clear();
    sc.tree.clear();
    sc.kids.clear();
    sc.merged.clear();
    sc.pending.clear();
    sc.graph.clear();
    sc.node_ids.clear();
    let mut s = Simplifier {
        pred,
        sc,
        visits: 0,
    };
    let S::Node(top) = s.simplify(pred.root())? else {
        return None;
    };
    let root = build(sc, top, ACCEPT, REJECT)?;
    if root < FIRST {
        return None;
    }
    let root = if nothing_decidable(pred, sc)? {
        regroup(sc, root)?
    } else {
        // Without a repeated field no chain is worth regrouping: the graph stays as it is.
        std::mem::swap(&mut sc.graph, &mut sc.regrouped);
        root
    };
    // What A and X hold on entry to each node: the meet over its predecessors (successors have
    // smaller refs, so decreasing refs are a topological order).
    let n = sc.regrouped.len();
    sc.holds.clear();
    sc.holds.resize(n, (None, None));
    sc.holds[(root - FIRST) as usize] = (Some(Holds::Unknown), Some(Holds::Unknown));
    let meet = |slot: &mut Option<Holds>, v: Holds| {
        *slot = Some(match *slot {
            None => v,
            Some(old) if old == v => v,
            Some(_) => Holds::Unknown,
        });
    };
    // Plans, as emit() makes them (statements in `scratch`), in decreasing node order. The
    // scratch vector becomes the program.
    let mut scratch: Vec<Insn> = Vec::with_capacity(4 * n + 4);
    sc.plans.clear();
    for i in (0..n).rev() {
        let node = sc.regrouped[i];
        let (Some(ain), Some(xin)) = sc.holds[i] else {
            // Every node is built from a live parent.
            return None;
        };
        let start = scratch.len();
        let test = test_of(pred, NodeId(node.test))?;
        let (br, aout, xout) = plan_test(test, ain, xin, &mut scratch);
        let aout = aout.holds(test);
        let br = match br {
            Br::Jump(code, k, swap) => Branch::Jump(code, k, swap),
            Br::OneOf(_) => Branch::OneOf,
            Br::Range(lo, hi) => Branch::Range(lo, hi),
        };
        sc.plans
            .push((start as u32, (scratch.len() - start) as u32, br));
        for succ in [node.t, node.f] {
            if succ >= FIRST {
                let h = &mut sc.holds[(succ - FIRST) as usize];
                meet(&mut h.0, aout);
                meet(&mut h.1, xout);
            }
        }
    }
    // Blocks, successors first.
    sc.blocks.clear();
    sc.block_ids.clear();
    sc.block_hashes.clear();
    sc.insns.clear();
    let accept = add_block(sc, &[], (0, 0), Term::Ret(snaplen))?;
    let reject = add_block(sc, &[], (0, 0), Term::Ret(0))?;
    sc.block_of.clear();
    for i in 0..n {
        let node = sc.regrouped[i];
        let target = |r: u32, block_of: &[u32]| match r {
            ACCEPT => accept,
            REJECT => reject,
            r => block_of[(r - FIRST) as usize],
        };
        let (jt, jf) = (target(node.t, &sc.block_of), target(node.f, &sc.block_of));
        let (ps, pl, br) = sc.plans[n - 1 - i];
        let id = match br {
            Branch::Jump(code, k, swap) => {
                let (jt, jf) = if swap { (jf, jt) } else { (jt, jf) };
                add_block(sc, &scratch, (ps, pl), Term::Jump { code, k, jt, jf })?
            }
            Branch::OneOf => {
                let test = test_of(pred, NodeId(node.test))?;
                let Cmp::OneOf(vs) = &test.cmp else {
                    return None;
                };
                let mut next = jf;
                for (j, &v) in vs.iter().enumerate().rev() {
                    let term = Term::Jump {
                        code: JMP | JEQ | K,
                        k: v,
                        jt,
                        jf: next,
                    };
                    let stmts = if j == 0 { (ps, pl) } else { (0, 0) };
                    next = add_block(sc, &scratch, stmts, term)?;
                }
                next
            }
            Branch::Range(lo, hi) => {
                let upper = Term::Jump {
                    code: JMP | JGT | K,
                    k: hi,
                    jt: jf,
                    jf: jt,
                };
                let upper = add_block(sc, &[], (0, 0), upper)?;
                let lower = Term::Jump {
                    code: JMP | JGE | K,
                    k: lo,
                    jt: upper,
                    jf,
                };
                add_block(sc, &scratch, (ps, pl), lower)?
            }
        };
        sc.block_of.push(id);
    }
    let root = match root {
        ACCEPT => accept,
        REJECT => reject,
        r => sc.block_of[(r - FIRST) as usize],
    };
    scratch.clear();
    layout(sc, root, scratch)
}

/// Whether `t` is a test the walk would keep as it is (not masked to nothing, not decided by
/// its field's width) on a field (under a mask) none of the tests `before` reads.
fn distinct_plain(t: &Test, before: &[Option<&Test>]) -> bool {
    t.mask != 0
        && !width_decides(max_value(&t.field, t.mask), &t.cmp)
        && !before
            .iter()
            .any(|u| u.is_some_and(|u| u.mask == t.mask && u.field == t.field))
}

/// What X holds, as a number (`None`: A's states, which X never holds).
fn x_code(x: Holds) -> Option<u64> {
    Some(match x {
        Holds::Unknown => 0,
        Holds::Msh(nl) => 1 << 32 | u64::from(nl),
        Holds::Reg(reg) => 2 << 32 | u64::from(reg),
        Holds::Field(_) | Holds::Masked(..) => return None,
    })
}

/// The state [`x_code`] numbered.
fn x_holds(code: u64) -> Holds {
    match code >> 32 {
        1 => Holds::Msh(code as u32),
        2 => Holds::Reg(code as u8),
        _ => Holds::Unknown,
    }
}

/// Exits in a tree ([`tree_program`]): the returns, the next instruction (within a leaf's
/// jumps), and leaf `i` as `LEAF + i`.
const TO_ACCEPT: u8 = 0;
const TO_REJECT: u8 = 1;
const TO_NEXT: u8 = 2;
const LEAF: u8 = 3;
/// Most jumps of a tree laid out directly (a set test is one per value).
const TREE_JUMPS: usize = 64;
/// Most predicate nodes a tree may have (a shared node counts once per occurrence).
const TREE_VISITS: u32 = 4 * SMALL as u32;

/// A jump of a tree's program: where it is, and its exits.
#[derive(Clone, Copy, Default)]
struct Jump {
    pc: u16,
    jt: u8,
    jf: u8,
}

/// The leaves (tests) of a tree, numbered from the right as they are found, with their exits.
struct Leaves {
    ids: [NodeId; SMALL],
    exits: [(u8, u8); SMALL],
    n: usize,
    visits: u32,
}

impl Leaves {
    /// The next leaf from the right: test `id` with exits `t` and `f`.
    fn leaf(&mut self, id: NodeId, t: u8, f: u8) -> Option<u8> {
        let r = self.n;
        *self.ids.get_mut(r)? = id;
        self.exits[r] = (t, f);
        self.n += 1;
        Some(LEAF + r as u8)
    }
}

/// `build` on the predicate's own tree, right to left: the leaves of `id` with exits `t` and
/// `f`, and the entry of `id` (its first leaf). `None`: a node other than a test, `and`, `or`
/// or `not`, or more than [`SMALL`] leaves.
fn leaves(pred: &Pred, lv: &mut Leaves, id: NodeId, t: u8, f: u8) -> Option<u8> {
    lv.visits += 1;
    if lv.visits > TREE_VISITS {
        return None;
    }
    Some(match pred.node(id) {
        Node::Test(_) => lv.leaf(id, t, f)?,
        Node::Not(x) => leaves(pred, lv, *x, f, t)?,
        Node::And(ops) => {
            let mut next = t;
            for &o in ops.iter().rev() {
                next = match pred.node(o) {
                    Node::Test(_) => lv.leaf(o, next, f)?,
                    _ => leaves(pred, lv, o, next, f)?,
                };
            }
            next
        }
        Node::Or(ops) => {
            let mut next = f;
            for &o in ops.iter().rev() {
                next = match pred.node(o) {
                    Node::Test(_) => lv.leaf(o, t, next)?,
                    _ => leaves(pred, lv, o, t, next)?,
                };
            }
            next
        }
        _ => return None,
    })
}

/// The program of a predicate that is a tree of `and`, `or` and `not` over tests of distinct
/// fields (under distinct masks), as `run` makes and lays it out, without its graphs and
/// blocks. For such a tree the walk keeps every test (none can decide another: each field is
/// tested once), merges no run of junctions (they would share a leading test) and regroups
/// nothing: the decision graph is `build`'s of the tree itself, one node per leaf. That graph
/// has a path through all leaves in order (the last leaf of an operand exits to the first of
/// the next), so its only topological order — the layout's reverse post-order — is the leaves'
/// order, each leaf's blocks in a row (a set test's `jeq`s, a range's `jge` and `jgt`). The
/// returns follow, the one the layout's search reaches first (following false exits from the
/// root) last. The layout shares identical blocks: no two of a tree's are, but its returns
/// are at snap length 0; then, and where a jump would be longer than 255, this gives `None`
/// and `run` lays the program out.
fn tree_program(pred: &Pred, snaplen: u32) -> Option<Program> {
    if snaplen == 0 {
        return None;
    }
    let mut lv = Leaves {
        ids: [NodeId(0); SMALL],
        exits: [(0, 0); SMALL],
        n: 0,
        visits: 0,
    };
    let root = leaves(pred, &mut lv, pred.root(), TO_ACCEPT, TO_REJECT)?;
    let n = lv.n;
    // Leaf `i` from the left is leaf `n - 1 - i` from the right: the root is leaf 0.
    let left = |r: u8| {
        if r >= LEAF {
            LEAF + (n - 1 - usize::from(r - LEAF)) as u8
        } else {
            r
        }
    };
    if left(root) != LEAF {
        return None;
    }
    let mut tests: [Option<&Test>; SMALL] = [None; SMALL];
    let mut exits = [(0u8, 0u8); SMALL];
    for i in 0..n {
        let t = test_of(pred, lv.ids[n - 1 - i])?;
        if !distinct_plain(t, &tests[..i]) {
            return None;
        }
        tests[i] = Some(t);
        let (t, f) = lv.exits[n - 1 - i];
        exits[i] = (left(t), left(f));
    }
    // What A and X hold on entry to each leaf: the meet over its predecessors, which come
    // before it — what its first predecessor left (`first`), or nothing known where another
    // left something else (`mixed_a`, `mixed_x`); leaf 0, the root, has none and holds
    // nothing known. What A holds after a leaf is its test's field (whole or masked), so
    // the leaf and an `AOut` say it; X holds little (`xcode`). Small values: building whole
    // `Holds` and copying them between arrays stalled on store forwarding.
    const NONE: u8 = u8::MAX;
    let mut aouts = [AOut::Field; SMALL];
    let mut xouts = [0u64; SMALL];
    let mut first = [NONE; SMALL];
    let (mut mixed_a, mut mixed_x) = (0u32, 0u32);
    // A after leaf `p` is A after leaf `i`.
    let same_a = |p: usize, ap: AOut, i: usize, ai: AOut| -> bool {
        let (tp, ti) = (tests[p], tests[i]);
        ap == ai
            && tp.zip(ti).is_some_and(|(tp, ti)| {
                tp.field == ti.field && (ap == AOut::Field || tp.mask == ti.mask)
            })
    };
    let mut out: Vec<Insn> = Vec::with_capacity(4 * n + 2);
    // Per leaf: its first instruction and its first jump (index into `jumps`).
    let mut entry = [(0u16, 0u8); SMALL];
    // Per jump: its instruction, its exits, and its block's statements (start, count).
    let mut jumps = [Jump::default(); TREE_JUMPS];
    let mut nj = 0;
    /// A jump with its exits.
    fn push(
        jumps: &mut [Jump; TREE_JUMPS],
        nj: &mut usize,
        out: &mut Vec<Insn>,
        insn: Insn,
        (jt, jf): (u8, u8),
    ) -> Option<()> {
        *jumps.get_mut(*nj)? = Jump {
            pc: out.len() as u16,
            jt,
            jf,
        };
        *nj += 1;
        out.push(insn);
        Some(())
    }
    for i in 0..n {
        let (ain, xin) = match first[i] {
            NONE if i == 0 => (Holds::Unknown, Holds::Unknown),
            NONE => return None,
            p => {
                let p = usize::from(p);
                let a = match (mixed_a & (1 << i) != 0, tests[p]) {
                    (false, Some(tp)) => aouts[p].holds(tp),
                    _ => Holds::Unknown,
                };
                let x = if mixed_x & (1 << i) != 0 {
                    Holds::Unknown
                } else {
                    x_holds(xouts[p])
                };
                (a, x)
            }
        };
        let start = out.len();
        if start > usize::from(u16::MAX) - 256 {
            return None;
        }
        entry[i] = (start as u16, nj as u8);
        let (br, aout, xout) = plan_test(tests[i]?, ain, xin, &mut out);
        let xout = x_code(xout)?;
        (aouts[i], xouts[i]) = (aout, xout);
        let (t, f) = exits[i];
        for succ in [t, f] {
            if succ >= LEAF {
                let j = usize::from(succ - LEAF);
                match first[j] {
                    NONE => first[j] = i as u8,
                    p => {
                        let p = usize::from(p);
                        if !same_a(p, aouts[p], i, aout) {
                            mixed_a |= 1 << j;
                        }
                        if xouts[p] != xout {
                            mixed_x |= 1 << j;
                        }
                    }
                }
            }
        }
        match br {
            Br::Jump(code, k, swap) => {
                let (jt, jf) = if swap { (f, t) } else { (t, f) };
                let insn = Insn::jump(code, k, 0, 0);
                push(&mut jumps, &mut nj, &mut out, insn, (jt, jf))?;
            }
            Br::OneOf(vs) => {
                for (j, &v) in vs.iter().enumerate() {
                    let jf = if j + 1 < vs.len() { TO_NEXT } else { f };
                    let insn = Insn::jump(JMP | JEQ | K, v, 0, 0);
                    push(&mut jumps, &mut nj, &mut out, insn, (t, jf))?;
                }
            }
            Br::Range(lo, hi) => {
                let lower = Insn::jump(JMP | JGE | K, lo, 0, 0);
                push(&mut jumps, &mut nj, &mut out, lower, (TO_NEXT, f))?;
                let upper = Insn::jump(JMP | JGT | K, hi, 0, 0);
                push(&mut jumps, &mut nj, &mut out, upper, (f, t))?;
            }
        }
    }
    // No two blocks are alike, so the layout shares none: a leaf's exits are leaves after it
    // (or returns), one of them the next leaf, so two leaves never have the same exits; and
    // the blocks of one leaf differ in their code or their false exit.
    let jumps = &jumps[..nj];
    // The return the layout's search reaches first: false exits from the root.
    let mut j = 0;
    let first_reached = loop {
        j = match jumps[j].jf {
            TO_NEXT => j + 1,
            r if r >= LEAF => usize::from(entry[usize::from(r - LEAF)].1),
            r => break r,
        };
    };
    let body = out.len();
    let (accept, reject) = if first_reached == TO_ACCEPT {
        (body + 1, body)
    } else {
        (body, body + 1)
    };
    for &Jump { pc, jt, jf, .. } in jumps {
        let pc = usize::from(pc);
        let rel = |to: u8| -> Option<u8> {
            let target = match to {
                TO_ACCEPT => accept,
                TO_REJECT => reject,
                TO_NEXT => pc + 1,
                leaf => usize::from(entry[usize::from(leaf - LEAF)].0),
            };
            u8::try_from(target.checked_sub(pc + 1)?).ok()
        };
        out[pc].jt = rel(jt)?;
        out[pc].jf = rel(jf)?;
    }
    let rets = if first_reached == TO_ACCEPT {
        [0, snaplen]
    } else {
        [snaplen, 0]
    };
    for v in rets {
        out.push(Insn::stmt(RET | K, v));
    }
    Some(Program::new(out))
}

/// `Cfg::linearize` for an acyclic graph of blocks (into `out`): `None` when a jump would be
/// longer than 255 instructions (the general layout then adds `ja`s).
fn layout(sc: &mut Scratch, root: u32, mut out: Vec<Insn>) -> Option<Program> {
    let nb = sc.blocks.len();
    // Per block: seen by the search, and its position in the program.
    sc.place.clear();
    sc.place.resize(nb, (false, 0));
    // Reverse post-order, the false successor visited first.
    sc.post.clear();
    sc.stack.clear();
    sc.stack.push((root, 0));
    sc.place[root as usize].0 = true;
    while let Some(&mut (b, ref mut i)) = sc.stack.last_mut() {
        let next = match sc.blocks[b as usize].term {
            Term::Jump { jt, jf, .. } if *i < 2 => {
                *i += 1;
                Some(if *i == 1 { jf } else { jt })
            }
            _ => None,
        };
        match next {
            Some(s) => {
                if !sc.place[s as usize].0 {
                    sc.place[s as usize].0 = true;
                    sc.stack.push((s, 0));
                }
            }
            None => {
                sc.post.push(b);
                sc.stack.pop();
            }
        }
    }
    // Body in reverse post-order, then the returns in order of first use. Blocks are shared
    // when identical, so there is one return per value (`Cfg::linearize` shares them there).
    sc.order.clear();
    let mut rets: [u32; 2] = [0; 2];
    let mut nrets = 0;
    for &b in sc.post.iter().rev() {
        match sc.blocks[b as usize].term {
            Term::Jump { .. } => sc.order.push(b),
            Term::Ret(_) => {
                *rets.get_mut(nrets)? = b;
                nrets += 1;
            }
        }
    }
    let mut pc = 0u32;
    for &b in &sc.order {
        sc.place[b as usize].1 = pc;
        pc += sc.blocks[b as usize].len + 1;
    }
    for &b in &rets[..nrets] {
        sc.place[b as usize].1 = pc;
        pc += 1;
    }
    out.reserve(pc as usize);
    for &b in &sc.order {
        let blk = sc.blocks[b as usize];
        out.extend_from_slice(&sc.insns[blk.start as usize..(blk.start + blk.len) as usize]);
        let Term::Jump { code, k, jt, jf } = blk.term else {
            continue;
        };
        let next = sc.place[b as usize].1 + blk.len + 1;
        let rel =
            |t: u32| -> Option<u8> { u8::try_from(sc.place[t as usize].1.checked_sub(next)?).ok() };
        out.push(Insn::jump(code, k, rel(jt)?, rel(jf)?));
    }
    for &b in &rets[..nrets] {
        let Term::Ret(v) = sc.blocks[b as usize].term else {
            return None;
        };
        out.push(Insn::stmt(RET | K, v));
    }
    Some(Program::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pred(expr: &str) -> Pred {
        let ctx = netsift_lang::Context::new(netsift_wire::LinkType::ETHERNET);
        netsift_lang::compile(expr, &ctx).expect("compiles")
    }

    #[test]
    fn small_filters_take_tier_0() {
        for e in [
            "ip",
            "ip and tcp",
            "ip or ip6",
            "ip src net 192.168.2.0/24 and dst net 10.0.0.0/8",
            "ip src or dst net 192.168.2.0/24",
            "ip and udp port 53",
            // A field tested many times for different values, regrouped by field.
            "ip and (not tcp port (80 or 25 or 143) and not ip host (1.1.1.1 or 2.2.2.2))",
            "ip6 or ip host 10.0.0.1",
        ] {
            assert!(compile(&pred(e), 262_144).is_some(), "{e}");
        }
    }

    #[test]
    fn repeated_fields_and_relations_do_not() {
        for e in [
            "ip[0] > 5 and ip[0] < 9",
            "ether[0] + 1 = 2",
            "ether src 1:2:3:4:5:6 and ether src 1:2:3:4:5:7 or ether src 1:2:3:4:5:8",
            "tcp",
        ] {
            assert!(compile(&pred(e), 262_144).is_none(), "{e}");
        }
    }

    /// The tree path gives what the walk gives, instruction for instruction, on random
    /// `and`/`or`/`not` combinations of single tests of every kind (equality, masks, sets,
    /// ranges, bit tests, relations, exits swapped or not), including ones it refuses
    /// (repeated fields, blocks the layout would share) — and at snap length 0, where the
    /// returns are alike.
    #[test]
    fn trees_are_laid_out_as_the_walk_lays_them_out() {
        let atoms = [
            "ip",
            "arp",
            "ether[0] = 1",
            "ether[1] & 0xf0 = 0x40",
            "ether[2] & 4 != 0",
            "ether[3] & 4 = 0",
            "ether[4] > 7",
            "ether[5] >= 9",
            "ether[6:2] > 5 and ether[6:2] < 100",
            "ether[26:2] > 5 and ether[26:2] < 100",
            "(ether[8] = 1 or ether[8] = 3 or ether[8] = 7)",
            "(ether[9] = 1 or ether[9] = 3)",
            "len > 100",
            "ether[10:4] = 0x01020304",
            "ether[10:4] & 0xffff0000 = 0x01020000",
            "ether[14] & 0x80 = 0x80",
            // A field read whole after a bit test of it: no statements of its own.
            "ether[20:2] & 0x100 != 0 and ether[20:2] = 0x800",
            "ether[20:2] = 7",
            "ip[9] != 6",
            "not ether[15] = 2",
            "ether[16] = 9",
            "ip src net 10.0.0.0/8",
            "ip dst host 10.1.2.3",
            "tcp port 80",
        ];
        let (mut taken, mut shapes, mut x) = (0, 0, 0x2545_f491_u64);
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..8000 {
            // A random expression over up to six atoms: `(a op b) op not (c op d) …`; every
            // other one a conjunction (a chain).
            let n = 1 + next() % 6;
            let mut e = String::new();
            for i in 0..n {
                let r = next();
                if i > 0 {
                    e.push_str(if round % 2 == 0 || r % 2 == 0 {
                        " and "
                    } else {
                        " or "
                    });
                }
                if r % 5 == 0 {
                    e.push_str("not ");
                }
                let atom = atoms[((r >> 8) % atoms.len() as u64) as usize];
                if r % 3 == 0 && i + 1 < n {
                    let other = atoms[((r >> 20) % atoms.len() as u64) as usize];
                    let op = if (r >> 30) % 2 == 0 { "or" } else { "and" };
                    e.push_str(&format!("({atom} {op} {other})"));
                } else {
                    e.push_str(&format!("({atom})"));
                }
            }
            let p = pred(&e);
            for snaplen in [262_144, 0] {
                let Some(fast) = tree_program(&p, snaplen) else {
                    continue;
                };
                taken += 1;
                shapes += usize::from(!matches!(p.node(p.root()), Node::Test(_) | Node::And(_)));
                let walked = run(&p, snaplen, &mut Scratch::default());
                assert_eq!(
                    Some(fast.insns()),
                    walked.as_ref().map(|g| g.insns()),
                    "{e} (snap length {snaplen})"
                );
            }
        }
        assert!(taken > 2000 && shapes > 600, "{taken} {shapes}");
    }

    /// At snap length 0 the returns are alike and the layout shares them: the tree path
    /// refuses, and the walk lays the program out.
    #[test]
    fn the_tree_path_refuses_alike_returns() {
        for e in [
            "ip src net 192.168.2.0/24 and dst net 10.0.0.0/8",
            "ip src or dst net 192.168.2.0/24",
        ] {
            let p = pred(e);
            assert!(tree_program(&p, 262_144).is_some(), "{e}");
            assert!(tree_program(&p, 0).is_none(), "{e}");
            assert!(run(&p, 0, &mut Scratch::default()).is_some(), "{e}");
        }
    }
}
