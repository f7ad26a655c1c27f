//! Control-flow graphs of basic blocks, and their layout as a linear program.

use std::hash::{Hash, Hasher};

use crate::insn::{Insn, Program, code::*};

/// Index of a block of a [`Cfg`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BlockId(u32);

impl BlockId {
    fn new(i: usize) -> BlockId {
        BlockId(i as u32)
    }

    fn index(self) -> usize {
        self.0 as usize
    }
}

/// How a block ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Term {
    /// `ret #k`.
    Ret(u32),
    /// A conditional jump: `code` is `JMP | op | src`, `k` the constant.
    Jump {
        code: u16,
        k: u32,
        jt: BlockId,
        jf: BlockId,
    },
    /// `ja` (also backwards, for loops).
    Goto(BlockId),
}

/// A basic block: straight-line statements (a range of [`Cfg`]'s statement pool), then a
/// terminator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Block {
    start: u32,
    len: u32,
    pub term: Term,
}

/// A control-flow graph. Blocks are appended; `root` is the entry. The statements of all
/// blocks live in one vector.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cfg {
    blocks: Vec<Block>,
    insns: Vec<Insn>,
    pub root: Option<BlockId>,
    /// Hash of a block shared by [`Cfg::add_shared`] → the last such block; `same_hash` links
    /// each block to the one before with the same hash.
    shared: netsift_lang::fxhash::FxHashMap<u64, BlockId>,
    same_hash: Vec<Option<BlockId>>,
}

impl Cfg {
    /// An empty graph with room for about `blocks` blocks.
    pub fn with_capacity(blocks: usize) -> Cfg {
        Cfg {
            blocks: Vec::with_capacity(blocks),
            insns: Vec::with_capacity(2 * blocks),
            root: None,
            shared: netsift_lang::fxhash::FxHashMap::with_capacity_and_hasher(
                blocks,
                Default::default(),
            ),
            same_hash: Vec::with_capacity(blocks),
        }
    }

    /// Add a block of `stmts` ending with `term`, or return an identical one added before (same
    /// statements, same exits). Adding successors before predecessors shares whole identical
    /// sub-graphs.
    pub fn add_shared(&mut self, stmts: &[Insn], term: Term) -> BlockId {
        // Blocks are found by their hash, then compared with the stored ones of that hash.
        let hash = {
            let mut h = netsift_lang::fxhash::FxHasher::default();
            stmts.hash(&mut h);
            term.hash(&mut h);
            h.finish()
        };
        let first = self.shared.get(&hash).copied();
        let mut link = first;
        while let Some(id) = link {
            let b = self.block(id);
            if b.term == term && self.stmts_of(b) == stmts {
                return id;
            }
            link = self.same_hash[id.index()];
        }
        let id = self.add(stmts, term);
        self.same_hash.resize(self.blocks.len(), None);
        self.same_hash[id.index()] = first;
        self.shared.insert(hash, id);
        id
    }

    /// Add a block of `stmts` ending with `term`.
    pub fn add(&mut self, stmts: &[Insn], term: Term) -> BlockId {
        let id = BlockId::new(self.blocks.len());
        self.blocks.push(Block {
            start: self.insns.len() as u32,
            len: stmts.len() as u32,
            term,
        });
        self.insns.extend_from_slice(stmts);
        id
    }

    /// Change the terminator of block `id` (a loop's back edge, known once the loop is built);
    /// the block must not have been shared.
    pub fn set_term(&mut self, id: BlockId, term: Term) {
        self.blocks[id.index()].term = term;
    }

    pub fn block(&self, id: BlockId) -> &Block {
        &self.blocks[id.index()]
    }

    /// The statements of block `id`.
    pub fn stmts(&self, id: BlockId) -> &[Insn] {
        self.stmts_of(self.block(id))
    }

    fn stmts_of(&self, b: &Block) -> &[Insn] {
        &self.insns[b.start as usize..(b.start + b.len) as usize]
    }

    /// The successors, the false one (or the only one) first: the order of the layout's
    /// depth-first search.
    fn succs_jf_first(&self, id: BlockId) -> ([BlockId; 2], usize) {
        match self.block(id).term {
            Term::Ret(_) => ([id, id], 0),
            Term::Jump { jt, jf, .. } => ([jf, jt], 2),
            Term::Goto(t) => ([t, t], 1),
        }
    }

    /// Lay the blocks out as a program: reverse post-order from the root (so that every jump
    /// of an acyclic graph goes forward), `ret` blocks of equal value shared, jumps longer than
    /// 255 instructions routed through an inserted `ja` (or to a copy of the return they go to,
    /// when that is shorter), and a `ja` to the next instruction dropped.
    pub fn linearize(&self) -> Program {
        let Some(root) = self.root else {
            return Program::new(vec![Insn::stmt(RET | K, 0)]);
        };
        // Reverse post-order, visiting the false successor first so that the true successor
        // tends to come right after its test.
        let n = self.blocks.len();
        let mut slots = vec![Slot::default(); n];
        let mut post = Vec::with_capacity(n);
        let mut stack: Vec<(BlockId, usize)> = Vec::with_capacity(n.min(64));
        stack.push((root, 0));
        slots[root.index()].seen = true;
        while let Some(&mut (b, ref mut i)) = stack.last_mut() {
            // Visit jf before jt.
            let (succs, len) = self.succs_jf_first(b);
            if *i < len {
                let s = succs[*i];
                *i += 1;
                if !slots[s.index()].seen {
                    slots[s.index()].seen = true;
                    stack.push((s, 0));
                }
            } else {
                post.push(b);
                stack.pop();
            }
        }
        // The body in reverse post-order, then the returns, one per distinct value, in order of
        // first use (a return with statements is body).
        let mut order: Vec<BlockId> = Vec::with_capacity(post.len());
        order.extend(
            post.iter()
                .rev()
                .filter(|&&b| !matches!(self.block(b).term, Term::Ret(_))),
        );
        let body = order.len();
        let mut rets: Vec<(u32, BlockId)> = Vec::new();
        for &b in post.iter().rev() {
            let Term::Ret(v) = self.block(b).term else {
                continue;
            };
            if !self.stmts(b).is_empty() {
                order.push(b);
                continue;
            }
            match rets.iter().position(|&(rv, _)| rv == v) {
                Some(j) => slots[b.index()].canon = Some(rets[j].1),
                None => {
                    slots[b.index()].ret = Some(rets.len() as u32);
                    rets.push((v, b));
                    order.push(b);
                }
            }
        }
        let (out, trampolines) = self.place(&order, &mut slots, &rets, &[]);
        if !trampolines {
            return Program::new(out);
        }
        // Long jumps, mostly to the returns at the end (a long `or` of terms each rejecting
        // early): also try copies of the returns every 200 instructions or so, where nothing
        // falls through (after a conditional jump or a return), so that a jump reaches one
        // directly, and keep the shorter program.
        let (mut islands, mut pc) = (Vec::new(), 0);
        for (i, &b) in order[..body].iter().enumerate() {
            if pc >= 200 && i > 0 && !matches!(self.block(order[i - 1]).term, Term::Goto(_)) {
                islands.push(i);
                pc = 0;
            }
            pc += self.stmts(b).len() + 1;
        }
        for s in &mut slots {
            (s.long_t, s.long_f) = (false, false);
        }
        let (with_islands, _) = self.place(&order, &mut slots, &rets, &islands);
        Program::new(if with_islands.len() < out.len() {
            with_islands
        } else {
            out
        })
    }

    /// The program for blocks laid out in `order`, returns mapped by `slots` to the one of
    /// their value (`rets`, last in `order`), with a copy of those returns before each block
    /// whose index is in `islands` (increasing): a jump to a return goes to the first copy after
    /// it. Jumps longer than 255 instructions go through a `ja` placed right after them (the
    /// second value: whether any does).
    fn place(
        &self,
        order: &[BlockId],
        slots: &mut [Slot],
        rets: &[(u32, BlockId)],
        islands: &[usize],
    ) -> (Vec<Insn>, bool) {
        let target = |slots: &[Slot], b: BlockId| slots[b.index()].canon.unwrap_or(b);
        // Per position in `order`: the first island after the block there.
        let next_island: Vec<usize> = if islands.is_empty() {
            Vec::new()
        } else {
            let mut v = vec![usize::MAX; order.len()];
            let mut k = islands.len();
            for i in (0..order.len()).rev() {
                while k > 0 && islands[k - 1] > i {
                    k -= 1;
                }
                v[i] = if k < islands.len() { k } else { usize::MAX };
            }
            v
        };
        let falls_to = |slots: &[Slot], i: usize, t: BlockId| {
            order.get(i + 1).copied() == Some(target(slots, t))
                && islands.binary_search(&(i + 1)).is_err()
        };
        // Iterate offsets until the long-jump trampolines are stable.
        let mut island_at = vec![0usize; islands.len()];
        loop {
            let mut pc = 0;
            let mut k = 0;
            for (i, &b) in order.iter().enumerate() {
                if islands.get(k) == Some(&i) {
                    island_at[k] = pc;
                    pc += rets.len();
                    k += 1;
                }
                let slot = slots[b.index()];
                slots[b.index()].offset = pc as u32;
                let blk = self.block(b);
                pc += blk.len as usize;
                pc += match blk.term {
                    Term::Ret(_) => 1,
                    Term::Jump { .. } => 1 + usize::from(slot.long_t) + usize::from(slot.long_f),
                    // A jump to the very next block is dropped.
                    Term::Goto(t) => usize::from(!falls_to(slots, i, t)),
                };
            }
            // Where a jump from the block at position `i` to `t` lands.
            let dest = |slots: &[Slot], i: usize, t: BlockId| {
                let t = target(slots, t);
                let island = next_island.get(i).copied().unwrap_or(usize::MAX);
                match slots[t.index()].ret {
                    Some(j) if island != usize::MAX => island_at[island] + j as usize,
                    _ => slots[t.index()].offset as usize,
                }
            };
            let mut changed = false;
            for (i, &b) in order.iter().enumerate() {
                let blk = self.block(b);
                if let Term::Jump { jt, jf, .. } = blk.term {
                    // Offsets count from the instruction after the jump.
                    let next = (slots[b.index()].offset as usize + blk.len as usize + 1) as i64;
                    let rel = |t: BlockId| dest(slots, i, t) as i64 - next;
                    let (rt, rf) = (rel(jt), rel(jf));
                    let slot = &mut slots[b.index()];
                    if !slot.long_t && !(0..=255).contains(&rt) {
                        slot.long_t = true;
                        changed = true;
                    }
                    if !slot.long_f && !(0..=255).contains(&rf) {
                        slot.long_f = true;
                        changed = true;
                    }
                }
            }
            if changed {
                continue;
            }
            // Emit.
            let mut out = Vec::with_capacity(pc);
            let mut k = 0;
            let mut trampolines = false;
            for (i, &b) in order.iter().enumerate() {
                if islands.get(k) == Some(&i) {
                    out.extend(rets.iter().map(|&(v, _)| Insn::stmt(RET | K, v)));
                    k += 1;
                }
                let blk = self.block(b);
                out.extend_from_slice(self.stmts_of(blk));
                match blk.term {
                    Term::Ret(v) => out.push(Insn::stmt(RET | K, v)),
                    Term::Goto(t) => {
                        if !falls_to(slots, i, t) {
                            let rel = dest(slots, i, t) as i64 - (out.len() as i64 + 1);
                            out.push(Insn::stmt(JMP | JA, rel as i32 as u32));
                        }
                    }
                    Term::Jump { code, k, jt, jf } => {
                        // Long targets go through `ja` trampolines placed right after the jump:
                        // the true side's first, then the false side's.
                        let (lt, lf) = (slots[b.index()].long_t, slots[b.index()].long_f);
                        trampolines |= lt || lf;
                        let next = out.len() + 1;
                        let rel = |t: BlockId| (dest(slots, i, t) - next) as u8;
                        let jt_off = if lt { 0 } else { rel(jt) };
                        let jf_off = if lf { u8::from(lt) } else { rel(jf) };
                        out.push(Insn::jump(code, k, jt_off, jf_off));
                        for t in [lt.then_some(jt), lf.then_some(jf)].into_iter().flatten() {
                            let here = out.len() + 1;
                            let d = dest(slots, i, t) as i64 - here as i64;
                            out.push(Insn::stmt(JMP | JA, d as i32 as u32));
                        }
                    }
                }
            }
            return (out, trampolines);
        }
    }
}

/// What the layout knows of a block.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// Reached by the depth-first search.
    seen: bool,
    /// A return block of the same value as an earlier one: that one.
    canon: Option<BlockId>,
    /// A shared return block: its index among the returns.
    ret: Option<u32>,
    /// Its offset in the program.
    offset: u32,
    /// Whether its jump's true (false) target is too far and goes through a `ja`.
    long_t: bool,
    long_f: bool,
}
