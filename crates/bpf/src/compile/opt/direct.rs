//! Tier 0 of the optimiser: small filters straight from the predicate to instructions.
//!
//! Most filters people type (`ip`, `tcp port 80`, `ip src net A and dst net B`, `host X`) are a
//! handful of tests whose only redundancy is what the enclosing `and`s and `or`s already
//! decide: `dst net B` also tests for ARP and RARP, which `ip` (a conjunct before it) rules
//! out. Tier 0 removes exactly those tests, walking the predicate once with the facts every path
//! into a node shares (the outcomes of the single tests before it in enclosing `and`s and
//! `or`s). If what remains tests each field (under one mask) at most once, nothing a path
//! learns can decide a later test, so the general optimiser's specialisation would return that
//! graph unchanged; tier 0 then lays it out itself, with small arrays instead of the general
//! optimiser's hash-consed graphs, interned fact sets and control-flow graph.
//!
//! The program must be the general optimiser's, instruction for instruction: the blocks are
//! planned by the same function ([`plan_test`]) and laid out by the same rules as
//! `Cfg::linearize` (reverse post-order, false successor visited first, returns last in order
//! of first use, identical blocks shared). Anything else — relations, a field tested twice,
//! a test decided by its width alone, a constant result, a jump longer than 255 — gives `None`
//! and the general optimiser runs. `optimiser_shortcuts_match_the_full_optimiser` (testkit)
//! compares both on the corpus and random expressions.

use netsift_lang::Pred;
use netsift_lang::pred::{Field, Node, NodeId, Test};

use super::{Br, Holds, Know, max_value, plan_test};
use crate::insn::{Insn, Program, code::*};

/// Most tests tier 0 takes on (more: the general optimiser).
const MAX_TESTS: usize = 24;
/// Most predicate nodes visited (a shared node is visited once per occurrence).
const MAX_VISITS: u32 = 256;
/// Most decision-graph blocks (a set test is one block per value).
const MAX_BLOCKS: usize = 64;
/// Most statements in all blocks.
const MAX_INSNS: usize = 128;

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
    /// Field/mask of each key, and whether a kept test uses it.
    keys: Capped<(Field, u32, bool), MAX_TESTS>,
    /// The predicate node of each kept test.
    tests: Capped<NodeId, MAX_TESTS>,
    /// Facts on the current path, newest last: (key, everything known about it).
    facts: Capped<(u32, Know), MAX_TESTS>,
    tree: Capped<T, { 4 * MAX_TESTS }>,
    kids: Capped<u32, { 4 * MAX_TESTS }>,
    /// Operand groups of the junctions being simplified (a stack).
    groups: Capped<(u32, u32), { 4 * MAX_TESTS }>,
    /// Kept operands of the junctions being simplified (a stack).
    pending: Capped<u32, { 4 * MAX_TESTS }>,
    graph: Capped<GNode, MAX_TESTS>,
    holds: Vec<(Option<Holds>, Option<Holds>)>,
    plans: Vec<(u32, u32, Branch)>,
    block_of: Vec<u32>,
    blocks: Capped<Block, MAX_BLOCKS>,
    insns: Capped<Insn, MAX_INSNS>,
    seen: Vec<bool>,
    post: Vec<u32>,
    stack: Vec<(u32, u8)>,
    order: Vec<u32>,
    canon: Vec<u32>,
    offset: Vec<u32>,
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
                self.sc.keys.push((t.field, t.mask, false))?;
                Some((self.sc.keys.len() - 1) as u32)
            }
        }
    }

    fn know(&self, key: u32) -> Option<&Know> {
        self.sc
            .facts
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, k)| k)
    }

    /// After an operand of an `and` (`outcome` true) or `or` (false): learn its outcome if it
    /// is a single test.
    fn learn(&mut self, n: u32, outcome: bool) -> Option<()> {
        let (t, key, outcome) = match self.sc.tree[n as usize] {
            T::Test(t, key) => (t, key, outcome),
            T::Not(m) => match self.sc.tree[m as usize] {
                T::Test(t, key) => (t, key, !outcome),
                _ => return Some(()),
            },
            _ => return Some(()),
        };
        let test = test_of(self.pred, self.sc.tests[t as usize])?;
        let mut k = match self.know(key) {
            Some(k) => *k,
            None => Know::new(max_value(&test.field, test.mask)),
        };
        k.learn(&test.cmp, outcome, false);
        self.sc.facts.push((key, k))
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
                if let Some(k) = self.know(key) {
                    return k.decide(&t.cmp, false).map(S::Const);
                }
                if self.sc.keys[key as usize].2
                    || Know::new(max_value(&t.field, t.mask))
                        .decide(&t.cmp, false)
                        .is_some()
                {
                    return None;
                }
                self.sc.keys[key as usize].2 = true;
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

    /// `and` (`all`) or `or` of `ops`. Runs of operands that are the opposite junction with
    /// the same single test first (`a and X or a and Y`, the two directions of `src or dst net`)
    /// are taken as one, `a and (X or Y)`: on the paths where the first `a` failed the general
    /// optimiser decides the second one false too, so both give the same graph.
    fn junction(&mut self, ops: &[NodeId], all: bool) -> Option<S> {
        let pred = self.pred;
        // The operands of op `i` if it is the opposite junction led by a single test.
        let led = |i: usize| -> Option<&[NodeId]> {
            let inner = match (pred.node(ops[i]), all) {
                (Node::And(inner), false) | (Node::Or(inner), true) => inner,
                _ => return None,
            };
            let single = match pred.node(inner[0]) {
                Node::Test(_) => true,
                Node::Not(x) => matches!(pred.node(*x), Node::Test(_)),
                _ => false,
            };
            single.then_some(&inner[..])
        };
        // Groups of operands: [start, end) runs, pushed on the groups stack.
        let base = self.sc.groups.len();
        let mut i = 0;
        while i < ops.len() {
            let mut j = i + 1;
            if let Some(first) = led(i) {
                while j < ops.len() && led(j).is_some_and(|o| o[0] == first[0]) {
                    j += 1;
                }
            }
            self.sc.groups.push((i as u32, j as u32))?;
            i = j;
        }
        let ng = self.sc.groups.len() - base;
        let r = self.combine(ng, all, |s, g| {
            let (i, j) = s.sc.groups[base + g];
            let (i, j) = (i as usize, j as usize);
            if j == i + 1 {
                return s.simplify(ops[i]);
            }
            // a and (X or Y …): the lead, then the rests.
            let lead = led(i)?[0];
            s.combine(2, !all, |s, k| {
                if k == 0 {
                    return s.simplify(lead);
                }
                s.combine(j - i, all, |s, m| s.junction(&led(i + m)?[1..], !all))
            })
        });
        self.sc.groups.truncate(base);
        r
    }

    /// `and` (`all`) or `or` of `count` operands, operand `i` simplified by `item(self, i)`.
    fn combine(
        &mut self,
        count: usize,
        all: bool,
        mut item: impl FnMut(&mut Self, usize) -> Option<S>,
    ) -> Option<S> {
        let mark = self.sc.facts.len();
        let base = self.sc.pending.len();
        for o in 0..count {
            match item(self, o) {
                None => return None,
                // `x and false`, `x or true`: both exits of `x` meet (no test is left).
                Some(S::Const(b)) if b != all => {
                    self.sc.facts.truncate(mark);
                    self.sc.pending.truncate(base);
                    return Some(S::Const(b));
                }
                Some(S::Const(_)) => {}
                Some(S::Node(k)) => {
                    self.sc.pending.push(k)?;
                    self.learn(k, all)?;
                }
            }
        }
        self.sc.facts.truncate(mark);
        let n = self.sc.pending.len() - base;
        match n {
            0 => Some(S::Const(all)),
            1 => {
                let k = self.sc.pending[base];
                self.sc.pending.truncate(base);
                Some(S::Node(k))
            }
            _ => {
                let start = self.sc.kids.len() as u32;
                for i in base..base + n {
                    let k = self.sc.pending[i];
                    self.sc.kids.push(k)?;
                }
                self.sc.pending.truncate(base);
                if all {
                    self.push(T::And(start, n as u32))
                } else {
                    self.push(T::Or(start, n as u32))
                }
            }
        }
    }
}

/// A decision-graph node: test, true and false successors (`ACCEPT`, `REJECT` or `FIRST + i`).
#[derive(Clone, Copy)]
struct GNode {
    test: u32,
    t: u32,
    f: u32,
}

const ACCEPT: u32 = super::ACCEPT;
const REJECT: u32 = super::REJECT;
const FIRST: u32 = super::FIRST;

/// The decision graph of tree node `n` with exits `t` and `f` (successors made first, as
/// `build` makes them).
fn build(sc: &mut Scratch, n: u32, t: u32, f: u32) -> Option<u32> {
    Some(match sc.tree[n as usize] {
        T::Test(test, _) => {
            if t == f {
                return Some(t);
            }
            sc.graph.push(GNode { test, t, f })?;
            sc.graph.len() as u32 - 1 + FIRST
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

/// A block: statements `insns[start..start + len]` and how it ends.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Block {
    start: u32,
    len: u32,
    term: Term,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Term {
    Ret(u32),
    Jump { code: u16, k: u32, jt: u32, jf: u32 },
}

/// Add a block with the statements `stmts` of `from` (as `Cfg::add_shared`: an identical
/// block added before is returned instead).
fn add_block(sc: &mut Scratch, from: &[Insn], stmts: (u32, u32), term: Term) -> Option<u32> {
    let new = &from[stmts.0 as usize..(stmts.0 + stmts.1) as usize];
    for (i, b) in sc.blocks.iter().enumerate() {
        if b.term == term
            && b.len == stmts.1
            && sc.insns[b.start as usize..(b.start + b.len) as usize] == *new
        {
            return Some(i as u32);
        }
    }
    let start = sc.insns.len() as u32;
    for &i in new {
        sc.insns.push(i)?;
    }
    sc.blocks.push(Block {
        start,
        len: stmts.1,
        term,
    })?;
    Some(sc.blocks.len() as u32 - 1)
}

/// The optimised program of `pred`, if tier 0 can make it (see the module docs).
pub(in crate::compile) fn compile(pred: &Pred, snaplen: u32) -> Option<Program> {
    SCRATCH.with(|cell| {
        // A compilation inside a compilation (none today) would get fresh memory.
        let mut sc = cell.take();
        let program = run(pred, snaplen, &mut sc);
        cell.replace(sc);
        program
    })
}

fn run(pred: &Pred, snaplen: u32, sc: &mut Scratch) -> Option<Program> {
    sc.keys.clear();
    sc.tests.clear();
    sc.facts.clear();
    sc.tree.clear();
    sc.kids.clear();
    sc.groups.clear();
    sc.pending.clear();
    sc.graph.clear();
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
    // What A and X hold on entry to each node: the meet over its predecessors (successors have
    // smaller refs, so decreasing refs are a topological order).
    let n = sc.graph.len();
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
        let node = sc.graph[i];
        let (Some(ain), Some(xin)) = sc.holds[i] else {
            // Every node is built from a live parent.
            return None;
        };
        let start = scratch.len();
        let test = test_of(pred, sc.tests[node.test as usize])?;
        let (br, aout, xout) = plan_test(test, ain, xin, &mut scratch);
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
    sc.insns.clear();
    let accept = add_block(sc, &[], (0, 0), Term::Ret(snaplen))?;
    let reject = add_block(sc, &[], (0, 0), Term::Ret(0))?;
    sc.block_of.clear();
    for i in 0..n {
        let node = sc.graph[i];
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
                let test = test_of(pred, sc.tests[node.test as usize])?;
                let netsift_lang::pred::Cmp::OneOf(vs) = &test.cmp else {
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

/// `Cfg::linearize` for an acyclic graph of blocks (into `out`): `None` when a jump would be
/// longer than 255 instructions (the general layout then adds `ja`s).
fn layout(sc: &mut Scratch, root: u32, mut out: Vec<Insn>) -> Option<Program> {
    let nb = sc.blocks.len();
    // Reverse post-order, the false successor visited first.
    sc.seen.clear();
    sc.seen.resize(nb, false);
    sc.post.clear();
    sc.stack.clear();
    sc.stack.push((root, 0));
    sc.seen[root as usize] = true;
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
                if !sc.seen[s as usize] {
                    sc.seen[s as usize] = true;
                    sc.stack.push((s, 0));
                }
            }
            None => {
                sc.post.push(b);
                sc.stack.pop();
            }
        }
    }
    // Body in reverse post-order, then one return per value in order of first use.
    sc.order.clear();
    sc.canon.clear();
    sc.canon.resize(nb, u32::MAX);
    let mut rets: [(u32, u32); 2] = [(0, u32::MAX); 2];
    let mut nrets = 0;
    for &b in sc.post.iter().rev() {
        match sc.blocks[b as usize].term {
            Term::Jump { .. } => sc.order.push(b),
            Term::Ret(v) => match rets[..nrets].iter().find(|(rv, _)| *rv == v) {
                Some(&(_, c)) => sc.canon[b as usize] = c,
                None => {
                    *rets.get_mut(nrets)? = (v, b);
                    nrets += 1;
                }
            },
        }
    }
    // Position of each block in the program.
    sc.offset.clear();
    sc.offset.resize(nb, 0);
    let mut pc = 0u32;
    for &b in &sc.order {
        sc.offset[b as usize] = pc;
        pc += sc.blocks[b as usize].len + 1;
    }
    for &(_, b) in &rets[..nrets] {
        sc.offset[b as usize] = pc;
        pc += 1;
    }
    out.reserve(pc as usize);
    for &b in &sc.order {
        let blk = sc.blocks[b as usize];
        out.extend_from_slice(&sc.insns[blk.start as usize..(blk.start + blk.len) as usize]);
        let Term::Jump { code, k, jt, jf } = blk.term else {
            continue;
        };
        let next = sc.offset[b as usize] + blk.len + 1;
        let rel = |t: u32| -> Option<u8> {
            let t = match sc.canon[t as usize] {
                u32::MAX => t,
                c => c,
            };
            u8::try_from(sc.offset[t as usize].checked_sub(next)?).ok()
        };
        out.push(Insn::jump(code, k, rel(jt)?, rel(jf)?));
    }
    for &(v, _) in &rets[..nrets] {
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
}
