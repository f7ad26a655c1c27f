//! Control-flow graphs of basic blocks, and their layout as a linear program.

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
    shared: netsift_lang::fxhash::FxHashMap<Block, BlockId>,
}

impl Cfg {
    /// Add a block, or return an identical one added before (same statements, same exits).
    /// Adding successors before predecessors shares whole identical sub-graphs.
    pub fn add_shared(&mut self, b: Block) -> BlockId {
        if let Some(&id) = self.shared.get(&b) {
            return id;
        }
        let id = self.add(b.clone());
        self.shared.insert(b, id);
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

    fn succs(&self, id: BlockId) -> Vec<BlockId> {
        match self.block(id).term {
            Term::Ret(_) => vec![],
            Term::Jump { jt, jf, .. } => vec![jt, jf],
            Term::Goto(t) => vec![t],
        }
    }

    /// Lay the blocks out as a program: reverse post-order from the root (so that every jump
    /// of an acyclic graph goes forward), `ret` blocks of equal value shared, jumps longer than
    /// 255 instructions routed through an inserted `ja`, and a `ja` to the next instruction
    /// dropped.
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
            let succs = self.succs(b);
            // Visit jf before jt.
            let order: Vec<BlockId> = succs.iter().rev().copied().collect();
            if *i < order.len() {
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
        let target = |b: BlockId| canon[b.0 as usize].unwrap_or(b);
        // Iterate offsets until the long-jump trampolines are stable.
        let mut long_t = vec![false; n];
        let mut long_f = vec![false; n];
        loop {
            let mut offset = vec![0usize; n];
            let mut pc = 0;
            for (i, &b) in order.iter().enumerate() {
                offset[b.0 as usize] = pc;
                let blk = self.block(b);
                pc += blk.stmts.len();
                pc += match blk.term {
                    Term::Ret(_) => 1,
                    Term::Jump { .. } => {
                        1 + usize::from(long_t[b.0 as usize]) + usize::from(long_f[b.0 as usize])
                    }
                    Term::Goto(t) => {
                        // A jump to the very next block is dropped.
                        let next = order.get(i + 1).copied();
                        usize::from(next != Some(target(t)))
                    }
                };
            }
            let mut changed = false;
            for &b in &order {
                let blk = self.block(b);
                if let Term::Jump { jt, jf, .. } = blk.term {
                    // Offsets count from the instruction after the jump.
                    let next = (offset[b.0 as usize] + blk.stmts.len() + 1) as i64;
                    let rel = |t: BlockId| offset[target(t).0 as usize] as i64 - next;
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
            for (i, &b) in order.iter().enumerate() {
                let blk = self.block(b);
                out.extend_from_slice(&blk.stmts);
                match blk.term {
                    Term::Ret(v) => out.push(Insn::stmt(RET | K, v)),
                    Term::Goto(t) => {
                        let next = order.get(i + 1).copied();
                        if next != Some(target(t)) {
                            let rel = offset[target(t).0 as usize] as i64 - (out.len() as i64 + 1);
                            out.push(Insn::stmt(JMP | JA, rel as i32 as u32));
                        }
                    }
                    Term::Jump { code, k, jt, jf } => {
                        // Long targets go through `ja` trampolines placed right after the jump:
                        // the true side's first, then the false side's.
                        let (lt, lf) = (long_t[b.0 as usize], long_f[b.0 as usize]);
                        let next = out.len() + 1;
                        let rel = |t: BlockId| (offset[target(t).0 as usize] - next) as u8;
                        let jt_off = if lt { 0 } else { rel(jt) };
                        let jf_off = if lf { u8::from(lt) } else { rel(jf) };
                        out.push(Insn::jump(code, k, jt_off, jf_off));
                        for t in [lt.then_some(jt), lf.then_some(jf)].into_iter().flatten() {
                            let here = out.len() + 1;
                            let d = offset[target(t).0 as usize] as i64 - here as i64;
                            out.push(Insn::stmt(JMP | JA, d as i32 as u32));
                        }
                    }
                }
            }
            return Program::new(out);
        }
    }
}
