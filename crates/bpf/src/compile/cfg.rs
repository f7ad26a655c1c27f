//! Control-flow graphs of basic blocks, and their layout as a linear program.

use std::hash::{Hash, Hasher};

use crate::insn::{Insn, Program, code::*};

/// Index of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BlockId(pub u32);

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

/// A basic block: straight-line statements, then a terminator.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Block {
    pub stmts: Vec<Insn>,
    pub term: Term,
}

/// A control-flow graph. Blocks are appended; `root` is the entry.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cfg {
    pub blocks: Vec<Block>,
    pub root: Option<BlockId>,
    /// Hash of a block shared by [`Cfg::add_shared`] → the last such block; `same_hash` links
    /// each block to the one before with the same hash (`u32::MAX` ends).
    shared: netsift_lang::fxhash::FxHashMap<u64, u32>,
    same_hash: Vec<u32>,
}

impl Cfg {
    /// Add a block, or return an identical one added before (same statements, same exits).
    /// Adding successors before predecessors shares whole identical sub-graphs.
    pub fn add_shared(&mut self, b: Block) -> BlockId {
        // Blocks are found by their hash, then compared with the stored ones of that hash.
        let hash = {
            let mut h = netsift_lang::fxhash::FxHasher::default();
            b.hash(&mut h);
            h.finish()
        };
        let first = self.shared.get(&hash).copied().unwrap_or(u32::MAX);
        let mut id = first;
        while id != u32::MAX {
            if self.blocks[id as usize] == b {
                return BlockId(id);
            }
            id = self.same_hash[id as usize];
        }
        let id = self.add(b);
        self.same_hash.resize(self.blocks.len(), u32::MAX);
        self.same_hash[id.0 as usize] = first;
        self.shared.insert(hash, id.0);
        id
    }

    pub fn add(&mut self, b: Block) -> BlockId {
        let id = BlockId(self.blocks.len() as u32);
        self.blocks.push(b);
        id
    }

    pub fn block(&self, id: BlockId) -> &Block {
        &self.blocks[id.0 as usize]
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
        let mut state = vec![0u8; n];
        let mut post = Vec::with_capacity(n);
        let mut stack: Vec<(BlockId, usize)> = vec![(root, 0)];
        state[root.0 as usize] = 1;
        while let Some(&mut (b, ref mut i)) = stack.last_mut() {
            // Visit jf before jt.
            let (order, len) = self.succs_jf_first(b);
            if *i < len {
                let s = order[*i];
                *i += 1;
                if state[s.0 as usize] == 0 {
                    state[s.0 as usize] = 1;
                    stack.push((s, 0));
                }
            } else {
                post.push(b);
                stack.pop();
            }
        }
        post.reverse();
        // Returns go last, one per distinct value, in order of first use.
        let (mut order, rets): (Vec<BlockId>, Vec<BlockId>) = post
            .into_iter()
            .partition(|&b| !matches!(self.block(b).term, Term::Ret(_)));
        let body = order.len();
        let mut ret_of_value: Vec<(u32, BlockId)> = Vec::new();
        let mut canon = vec![None; n];
        for b in rets {
            let Term::Ret(v) = self.block(b).term else {
                continue;
            };
            if !self.block(b).stmts.is_empty() {
                order.push(b);
                continue;
            }
            match ret_of_value.iter().find(|(rv, _)| *rv == v) {
                Some(&(_, c)) => canon[b.0 as usize] = Some(c),
                None => {
                    ret_of_value.push((v, b));
                    order.push(b);
                }
            }
        }
        let (out, trampolines) = self.place(&order, &canon, &ret_of_value, &[]);
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
            pc += self.block(b).stmts.len() + 1;
        }
        let (with_islands, _) = self.place(&order, &canon, &ret_of_value, &islands);
        Program::new(if with_islands.len() < out.len() {
            with_islands
        } else {
            out
        })
    }

    /// The program for blocks laid out in `order`, `canon` mapping returns to the one of their
    /// value (`rets`, last in `order`), with a copy of those returns before each block whose
    /// index is in `islands` (increasing): a jump to a return goes to the first copy after it.
    /// Jumps longer than 255 instructions go through a `ja` placed right after them (the second
    /// value: whether any does).
    fn place(
        &self,
        order: &[BlockId],
        canon: &[Option<BlockId>],
        rets: &[(u32, BlockId)],
        islands: &[usize],
    ) -> (Vec<Insn>, bool) {
        let n = self.blocks.len();
        let target = |b: BlockId| canon[b.0 as usize].unwrap_or(b);
        // Per block: the index of its value in `rets`, for shared returns.
        let mut ret_index = vec![usize::MAX; n];
        for (j, &(_, b)) in rets.iter().enumerate() {
            ret_index[b.0 as usize] = j;
        }
        // Per position in `order`: the first island after the block there.
        let mut next_island = vec![usize::MAX; order.len()];
        let mut k = islands.len();
        for i in (0..order.len()).rev() {
            while k > 0 && islands[k - 1] > i {
                k -= 1;
            }
            next_island[i] = if k < islands.len() { k } else { usize::MAX };
        }
        let falls_to = |i: usize, t: BlockId| {
            order.get(i + 1).copied() == Some(target(t)) && islands.binary_search(&(i + 1)).is_err()
        };
        // Iterate offsets until the long-jump trampolines are stable.
        let mut long_t = vec![false; n];
        let mut long_f = vec![false; n];
        let mut offset = vec![0usize; n];
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
                offset[b.0 as usize] = pc;
                let blk = self.block(b);
                pc += blk.stmts.len();
                pc += match blk.term {
                    Term::Ret(_) => 1,
                    Term::Jump { .. } => {
                        1 + usize::from(long_t[b.0 as usize]) + usize::from(long_f[b.0 as usize])
                    }
                    // A jump to the very next block is dropped.
                    Term::Goto(t) => usize::from(!falls_to(i, t)),
                };
            }
            // Where a jump from the block at position `i` to `t` lands.
            let dest = |i: usize, t: BlockId| {
                let t = target(t);
                match (ret_index[t.0 as usize], next_island[i]) {
                    (j, k) if j != usize::MAX && k != usize::MAX => island_at[k] + j,
                    _ => offset[t.0 as usize],
                }
            };
            let mut changed = false;
            for (i, &b) in order.iter().enumerate() {
                let blk = self.block(b);
                if let Term::Jump { jt, jf, .. } = blk.term {
                    // Offsets count from the instruction after the jump.
                    let next = (offset[b.0 as usize] + blk.stmts.len() + 1) as i64;
                    let rel = |t: BlockId| dest(i, t) as i64 - next;
                    if !long_t[b.0 as usize] && !(0..=255).contains(&rel(jt)) {
                        long_t[b.0 as usize] = true;
                        changed = true;
                    }
                    if !long_f[b.0 as usize] && !(0..=255).contains(&rel(jf)) {
                        long_f[b.0 as usize] = true;
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
            for (i, &b) in order.iter().enumerate() {
                if islands.get(k) == Some(&i) {
                    out.extend(rets.iter().map(|&(v, _)| Insn::stmt(RET | K, v)));
                    k += 1;
                }
                let blk = self.block(b);
                out.extend_from_slice(&blk.stmts);
                match blk.term {
                    Term::Ret(v) => out.push(Insn::stmt(RET | K, v)),
                    Term::Goto(t) => {
                        if !falls_to(i, t) {
                            let rel = dest(i, t) as i64 - (out.len() as i64 + 1);
                            out.push(Insn::stmt(JMP | JA, rel as i32 as u32));
                        }
                    }
                    Term::Jump { code, k, jt, jf } => {
                        // Long targets go through `ja` trampolines placed right after the jump:
                        // the true side's first, then the false side's.
                        let (lt, lf) = (long_t[b.0 as usize], long_f[b.0 as usize]);
                        let next = out.len() + 1;
                        let rel = |t: BlockId| (dest(i, t) - next) as u8;
                        let jt_off = if lt { 0 } else { rel(jt) };
                        let jf_off = if lf { u8::from(lt) } else { rel(jf) };
                        out.push(Insn::jump(code, k, jt_off, jf_off));
                        for t in [lt.then_some(jt), lf.then_some(jf)].into_iter().flatten() {
                            let here = out.len() + 1;
                            let d = dest(i, t) as i64 - here as i64;
                            out.push(Insn::stmt(JMP | JA, d as i32 as u32));
                        }
                    }
                }
            }
            let trampolines = long_t.iter().chain(&long_f).any(|&l| l);
            return (out, trampolines);
        }
    }
}
