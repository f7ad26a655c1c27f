//! Classic BPF → x86-64.
//!
//! # Register use (System V, leaf function)
//!
//! | register | holds |
//! |---|---|
//! | `rdi` | the packet's first byte (argument 1) |
//! | `rsi` | the captured length (argument 2, 64-bit) |
//! | `r8d` | the wire length (argument 3, moved out of `edx`, which `div` needs) |
//! | `eax` | A |
//! | `r9d` | X |
//! | `r11d` | the instruction budget (programs with loops) |
//! | `[rsp-64 .. rsp)` | M\[0..16\] (the red zone: no stack adjustment in a leaf function) |
//! | `rcx`, `rdx`, `r10` | scratch |
//!
//! # Bounds checks
//!
//! Every load is checked against the captured length and a failed check returns 0, as in
//! libpcap. Checks of loads at constant offsets are folded: all the constant-offset loads of a
//! basic block execute whenever the block runs to its end, so one check of the largest end
//! offset at the block's start stands for them (if it fails, the block would have returned 0 at
//! some load anyway; nothing before a load has an effect but the result). In a program without
//! backward jumps, checks also move up: when every path from a point either loads bytes up to N
//! or returns 0, a packet shorter than N gets 0 whatever happens, so the check of N can be done
//! there (a typical filter checks once, at the start, for the longest header it reads on its
//! accepting paths). The guaranteed length then flows forward: a block whose every predecessor
//! checked at least N bytes needs no check up to N. Loads at X-relative offsets are checked one
//! by one, in 64-bit arithmetic so that `X + k` cannot wrap.
//!
//! # Jeq chains
//!
//! A run of `jeq #k` on A whose false exits fall through to the next (a set of hosts or ports)
//! becomes a search over the sorted constants, first occurrence winning, when no other jump
//! enters the run: when every `jeq` of the run goes to the same place (a membership test), a
//! branch-free lower-bound search over a table stored after the code, then one branch; else a
//! binary search of compares and branches.
//!
//! # Loops
//!
//! Programs with backward jumps (`ip6 protochain`) run under the interpreter's budget of
//! executed instructions: each block subtracts its length on entry and returns 0 when the
//! budget would go negative, which is exactly when the interpreter would have stopped inside
//! that block.

use netsift_bpf::LOOP_BUDGET;
use netsift_bpf::code::*;
use netsift_bpf::{Insn, Program};

use crate::asm::*;
use crate::{JitError, JitErrorKind};

/// Captured lengths at or above this go to the interpreter; every constant offset below it fits
/// an x86 displacement.
pub(crate) const MAX_CAPLEN: usize = 0x7fff_0000;

/// Largest code the generator produces (a 4096-instruction program needs far less).
const MAX_CODE: usize = 1 << 20;

/// Where an instruction goes next.
fn succs(pc: usize, i: &Insn) -> ([usize; 2], usize) {
    let c = i.code;
    match class(c) {
        RET => ([0, 0], 0),
        JMP if op(c) == JA => ([(pc as i64 + 1 + i64::from(i.k as i32)) as usize, 0], 1),
        JMP => ([pc + 1 + usize::from(i.jt), pc + 1 + usize::from(i.jf)], 2),
        _ => ([pc + 1, 0], 1),
    }
}

/// `(size, end offset)` of a constant-offset packet load, `u64::MAX` for ancillary offsets
/// (always out of bounds, as in the interpreter).
fn abs_need(i: &Insn) -> Option<u64> {
    let c = i.code;
    let size = match c {
        x if x == LD | W | ABS => 4,
        x if x == LD | H | ABS => 2,
        x if x == LD | B | ABS => 1,
        x if x == LDX | B | MSH => 1,
        _ => return None,
    };
    Some(if i.k >= SKF_AD_OFF {
        u64::MAX
    } else {
        u64::from(i.k) + size
    })
}

/// Compiled code: the single-packet entry is at offset 0, the batch entry at `batch`.
pub(crate) struct Code {
    pub(crate) bytes: Vec<u8>,
    pub(crate) batch: usize,
}

/// One packet for the batch entry (`#[repr(C)]`: the generated code reads these offsets).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Desc {
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
    pub(crate) wire_len: u32,
}

/// Compiles a validated program.
pub(crate) fn compile(program: &Program) -> Result<Code, JitError> {
    let insns = program.insns();
    let n = insns.len();
    if n == 0 {
        return Err(JitError::new(JitErrorKind::Invalid, "empty program".into()));
    }
    // Control flow.
    let mut has_loops = false;
    let mut leader = vec![false; n + 1];
    let mut incoming = vec![0u32; n + 1];
    leader[0] = true;
    for (pc, i) in insns.iter().enumerate() {
        let (s, k) = succs(pc, i);
        for &t in &s[..k] {
            if t > n {
                return Err(JitError::new(
                    JitErrorKind::Invalid,
                    format!("jump out of the program at {pc}"),
                ));
            }
            has_loops |= t <= pc;
            incoming[t] += 1;
        }
        if class(i.code) == JMP || class(i.code) == RET {
            leader[pc + 1] = true;
            for &t in &s[..k] {
                leader[t] = true;
            }
        }
    }
    let uses_mem = insns.iter().any(|i| {
        matches!(class(i.code), ST | STX)
            || (matches!(class(i.code), LD | LDX) && mode(i.code) == MEM)
    });
    // Blocks: start index of each, and the block of each instruction.
    let starts: Vec<usize> = (0..n).filter(|&pc| leader[pc]).collect();
    let mut block_of = vec![0usize; n];
    for (b, &s) in starts.iter().enumerate() {
        let e = starts.get(b + 1).copied().unwrap_or(n);
        for slot in &mut block_of[s..e] {
            *slot = b;
        }
    }
    let nb = starts.len();
    let end = |b: usize| starts.get(b + 1).copied().unwrap_or(n);
    let need: Vec<u64> = (0..nb)
        .map(|b| {
            insns[starts[b]..end(b)]
                .iter()
                .filter_map(abs_need)
                .max()
                .unwrap_or(0)
        })
        .collect();
    // In a program without loops, a check may move up to where it covers more: `zero_below[pc]`
    // is the largest N such that, from `pc`, a packet shorter than N always ends with result 0
    // (a load on every path fails, or the path returns 0 anyway). Checking it at a block's start
    // is then exact, and covers every constant-offset load of the block (and of the paths that
    // need no more).
    let mut need = need;
    if !has_loops {
        let mut zero_below = vec![0u64; n + 1];
        for pc in (0..n).rev() {
            let i = &insns[pc];
            let c = i.code;
            zero_below[pc] = match class(c) {
                RET if rval(c) == K && i.k == 0 => u64::MAX,
                RET => 0,
                JMP => {
                    let (s, k) = succs(pc, i);
                    s[..k].iter().map(|&t| zero_below[t]).min().unwrap_or(0)
                }
                _ => {
                    let here = match (class(c), mode(c)) {
                        (LD, IND) => {
                            let sz = match size(c) {
                                W => 4,
                                H => 2,
                                _ => 1,
                            };
                            u64::from(i.k) + sz
                        }
                        _ => abs_need(i).unwrap_or(0),
                    };
                    here.max(zero_below[pc + 1])
                }
            };
        }
        for b in 0..nb {
            // A lone `ret` needs nothing (its `zero_below` is infinite when it returns 0).
            if class(insns[starts[b]].code) != RET {
                need[b] = need[b].max(zero_below[starts[b]]);
            }
        }
    }
    // Jeq chains: [start, end] runs (only without loops: the budget counts every jeq).
    let is_jeq = |pc: usize| insns.get(pc).is_some_and(|i| i.code == JMP | JEQ | K);
    let mut chain_end = vec![None; n];
    if !has_loops {
        let mut pc = 0;
        while pc < n {
            if !is_jeq(pc) {
                pc += 1;
                continue;
            }
            let start = pc;
            while is_jeq(pc) && insns[pc].jf == 0 && is_jeq(pc + 1) && incoming[pc + 1] == 1 {
                pc += 1;
            }
            // insns[start..=pc] are jeqs; all but the last fall through to the next.
            if pc - start + 1 >= 4 {
                chain_end[start] = Some(pc);
            }
            pc += 1;
        }
    }

    // The inner jeqs of a chain are emitted as part of its search, without block checks of
    // their own: the forward analysis must not count on checks that are not there.
    for (head, last) in chain_end
        .iter()
        .enumerate()
        .filter_map(|(h, l)| l.map(|l| (h, l)))
    {
        for q in head + 1..=last {
            need[block_of[q]] = 0;
        }
    }
    // Bytes guaranteed present on entry to each block.
    let mut known_in = vec![0u64; nb];
    if !has_loops {
        let mut known_out = vec![0u64; nb];
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nb];
        for b in 0..nb {
            let last = end(b) - 1;
            let (s, k) = succs(last, &insns[last]);
            for &t in &s[..k] {
                if t < n {
                    preds[block_of[t]].push(b);
                }
            }
        }
        for b in 0..nb {
            known_in[b] = if b == 0 || preds[b].is_empty() {
                0
            } else {
                preds[b].iter().map(|&p| known_out[p]).min().unwrap_or(0)
            };
            known_out[b] = known_in[b].max(need[b]);
        }
    }
    let mut a = Asm::default();
    let mut label = vec![usize::MAX; n + 1];
    let mut fixups: Vec<(usize, usize)> = Vec::new(); // (displacement offset, target pc)
    let mut ret0: Vec<usize> = Vec::new();
    // Sorted constant tables for membership tests, and where their addresses are loaded.
    let mut tables: Vec<(usize, Vec<u32>)> = Vec::new();
    const RET0: usize = usize::MAX;
    // "No instruction follows" for jumps to the return-0 exit (never equal to RET0).
    const NO_NEXT: usize = usize::MAX - 1;
    // Jump to instruction `t` (or to the return-0 exit) on `cc` (None: always), unless `t` is
    // `next` and the jump is unconditional.
    fn jump(
        a: &mut Asm,
        cc: Option<Cc>,
        t: usize,
        next: usize,
        fix: &mut Vec<(usize, usize)>,
        r0: &mut Vec<usize>,
    ) {
        if cc.is_none() && t == next {
            return;
        }
        let at = match cc {
            Some(cc) => a.jcc(cc),
            None => a.jmp(),
        };
        if t == RET0 {
            r0.push(at);
        } else {
            fix.push((at, t));
        }
    }
    let epilogue = |a: &mut Asm| a.ret();

    // Prologue.
    a.mov_rr(R8, RDX);
    a.mov_ri(RAX, 0);
    a.mov_ri(R9, 0);
    if uses_mem {
        a.mov_ri(RCX, 0);
        for i in 0..8 {
            a.store64(RSP, -64 + 8 * i, RCX);
        }
    }
    if has_loops {
        a.mov_ri(R11, LOOP_BUDGET);
    }
    let mem = |k: u32| -64 + 4 * (k & 0xf) as i32;
    let mut pc = 0;
    while pc < n {
        label[pc] = a.len();
        let i = insns[pc];
        if leader[pc] {
            let b = block_of[pc];
            if has_loops {
                let len = (end(b) - starts[b]) as u32;
                a.alu_ri(Alu::Sub, R11, len);
                jump(&mut a, Some(Cc::B), RET0, NO_NEXT, &mut fixups, &mut ret0);
            }
            if need[b] > known_in[b] {
                if need[b] > MAX_CAPLEN as u64 {
                    jump(&mut a, None, RET0, NO_NEXT, &mut fixups, &mut ret0);
                } else {
                    a.alu64_ri(Alu::Cmp, RSI, need[b] as u32);
                    jump(&mut a, Some(Cc::B), RET0, NO_NEXT, &mut fixups, &mut ret0);
                }
            }
        }
        let next = pc + 1;
        let c = i.code;
        let k = i.k;
        match class(c) {
            LD | LDX => {
                let dst = if class(c) == LD { RAX } else { R9 };
                match mode(c) {
                    IMM => a.mov_ri(dst, k),
                    LEN => a.mov_rr(dst, R8),
                    MEM => a.load(4, dst, RSP, mem(k)),
                    ABS if k < SKF_AD_OFF && u64::from(k) + 4 <= MAX_CAPLEN as u64 => {
                        // In bounds: the block's check covers it.
                        emit_load(&mut a, size(c), k as i32, None);
                    }
                    ABS => {} // unreachable: the block returns 0 on entry
                    IND if u64::from(k) + 4 < 1 << 31 => {
                        // X is zero-extended in r9, so X + k + size cannot wrap in 64 bits:
                        // check it against the captured length, then load at [rdi + r9 + k].
                        let sz: u8 = match size(c) {
                            W => 4,
                            H => 2,
                            _ => 1,
                        };
                        a.lea(RCX, R9, (k + u32::from(sz)) as i32);
                        a.alu64_rr(Alu::Cmp, RCX, RSI);
                        jump(&mut a, Some(Cc::A), RET0, NO_NEXT, &mut fixups, &mut ret0);
                        a.load_idx_disp(sz, RAX, RDI, R9, k as i32);
                        match sz {
                            4 => a.bswap(RAX),
                            2 => a.rol_ax_8(),
                            _ => {}
                        }
                    }
                    IND => {
                        // r10 = X + k in 64 bits; check r10 + size <= caplen.
                        a.mov_rr(R10, R9);
                        if k < 1 << 31 {
                            if k != 0 {
                                a.alu64_ri(Alu::Add, R10, k);
                            }
                        } else {
                            a.mov_ri(RCX, k);
                            a.alu64_rr(Alu::Add, R10, RCX);
                        }
                        let sz = match size(c) {
                            W => 4,
                            H => 2,
                            _ => 1,
                        };
                        a.lea(RCX, R10, sz);
                        a.alu64_rr(Alu::Cmp, RCX, RSI);
                        jump(&mut a, Some(Cc::A), RET0, NO_NEXT, &mut fixups, &mut ret0);
                        emit_load(&mut a, size(c), 0, Some(R10));
                    }
                    MSH if k < SKF_AD_OFF && u64::from(k) < MAX_CAPLEN as u64 => {
                        a.load(1, R9, RDI, k as i32);
                        a.alu_ri(Alu::And, R9, 0xf);
                        a.shift_ri(true, R9, 2);
                    }
                    MSH => {}
                    _ => return Err(unsupported(pc, &i)),
                }
            }
            ST => a.store(RSP, mem(k), RAX),
            STX => a.store(RSP, mem(k), R9),
            ALU => {
                let by_x = src(c) == X;
                match op(c) {
                    ADD | SUB | OR | AND | XOR => {
                        let o = match op(c) {
                            ADD => Alu::Add,
                            SUB => Alu::Sub,
                            OR => Alu::Or,
                            AND => Alu::And,
                            _ => Alu::Xor,
                        };
                        if by_x {
                            a.alu_rr(o, RAX, R9);
                        } else {
                            a.alu_ri(o, RAX, k);
                        }
                    }
                    MUL if by_x => a.imul_rr(RAX, R9),
                    MUL => a.imul_rri(RAX, RAX, k),
                    DIV | MOD => {
                        if by_x {
                            a.test_rr(R9, R9);
                            jump(&mut a, Some(Cc::E), RET0, NO_NEXT, &mut fixups, &mut ret0);
                            a.mov_ri(RDX, 0);
                            a.div(R9);
                        } else if k == 0 {
                            // The interpreter's rule for a constant 0 (no validator lets it through).
                            a.mov_ri(RAX, 0);
                            a.mov_ri(RDX, 0);
                        } else {
                            a.mov_ri(RCX, k);
                            a.mov_ri(RDX, 0);
                            a.div(RCX);
                        }
                        if op(c) == MOD {
                            a.mov_rr(RAX, RDX);
                        }
                    }
                    LSH | RSH => {
                        let left = op(c) == LSH;
                        if by_x {
                            // Counts of 32 or more give 0.
                            a.mov_rr(RCX, R9);
                            a.shift_rcl(left, RAX);
                            a.mov_ri(RDX, 0);
                            a.alu_ri(Alu::Cmp, R9, 31);
                            a.cmov(Cc::A, RAX, RDX);
                        } else if k & 31 != 0 {
                            a.shift_ri(left, RAX, (k & 31) as u8);
                        }
                    }
                    NEG => a.neg(RAX),
                    _ => return Err(unsupported(pc, &i)),
                }
            }
            JMP => {
                if op(c) == JA {
                    let t = (pc as i64 + 1 + i64::from(k as i32)) as usize;
                    jump(&mut a, None, t, next, &mut fixups, &mut ret0);
                } else if let Some(last) = chain_end[pc] {
                    // Binary search over the chain's constants.
                    let mut table: Vec<(u32, usize)> = Vec::new();
                    for (q, qi) in insns.iter().enumerate().take(last + 1).skip(pc) {
                        if !table.iter().any(|&(v, _)| v == qi.k) {
                            table.push((qi.k, q + 1 + usize::from(qi.jt)));
                        }
                    }
                    table.sort_unstable_by_key(|&(v, _)| v);
                    let default = last + 1 + usize::from(insns[last].jf);
                    let here = a.len();
                    for l in &mut label[pc + 1..=last] {
                        *l = here;
                    }
                    if table.iter().all(|&(_, t)| t == table[0].1) {
                        // Set membership (hosts, ports): a branch-free search, then one branch.
                        let values: Vec<u32> = table.iter().map(|&(v, _)| v).collect();
                        member(
                            &mut a,
                            &values,
                            table[0].1,
                            default,
                            last + 1,
                            &mut fixups,
                            &mut tables,
                        );
                    } else {
                        search(&mut a, &table, default, last + 1, &mut fixups);
                    }
                    pc = last + 1;
                    continue;
                } else {
                    let t = pc + 1 + usize::from(i.jt);
                    let f = pc + 1 + usize::from(i.jf);
                    let cc = match op(c) {
                        JEQ => Cc::E,
                        JGT => Cc::A,
                        JGE => Cc::Ae,
                        JSET => Cc::Ne,
                        _ => return Err(unsupported(pc, &i)),
                    };
                    match (op(c), src(c) == X) {
                        (JSET, true) => a.test_rr(RAX, R9),
                        (JSET, false) => a.test_ri(RAX, k),
                        (_, true) => a.alu_rr(Alu::Cmp, RAX, R9),
                        (_, false) => a.alu_ri(Alu::Cmp, RAX, k),
                    }
                    if t == f {
                        jump(&mut a, None, t, next, &mut fixups, &mut ret0);
                    } else if t == next {
                        jump(&mut a, Some(cc.not()), f, next, &mut fixups, &mut ret0);
                    } else {
                        jump(&mut a, Some(cc), t, next, &mut fixups, &mut ret0);
                        jump(&mut a, None, f, next, &mut fixups, &mut ret0);
                    }
                }
            }
            RET => {
                match rval(c) {
                    K => a.mov_ri(RAX, k),
                    A => {}
                    _ => return Err(unsupported(pc, &i)),
                }
                epilogue(&mut a);
            }
            MISC => match miscop(c) {
                TAX => a.mov_rr(R9, RAX),
                _ => a.mov_rr(RAX, R9),
            },
            _ => return Err(unsupported(pc, &i)),
        }
        pc += 1;
        if a.len() > MAX_CODE {
            return Err(JitError::new(
                JitErrorKind::TooLarge,
                format!("more than {MAX_CODE} bytes of code"),
            ));
        }
    }
    // The return-0 exit.
    let r0 = a.len();
    a.mov_ri(RAX, 0);
    epilogue(&mut a);
    for at in ret0 {
        a.patch(at, r0);
    }
    // The batch entry: batch(descs, n, out) runs the filter on n packet descriptors
    // (ptr, caplen, wire_len, 24 bytes each) and stores each result into out[i].
    while a.len() % 16 != 0 {
        a.buf.push(0xcc);
    }
    let batch = a.len();
    a.push(RBX);
    a.push(R12);
    a.push(R13);
    a.mov64_rr(R12, RDI);
    a.mov64_rr(R13, RSI);
    a.mov64_rr(RBX, RDX);
    let top = a.len();
    a.test64_rr(R13, R13);
    let done = a.jcc(Cc::E);
    a.load64(RDI, R12, 0);
    a.load64(RSI, R12, 8);
    a.load(4, RDX, R12, 16);
    let call = a.call();
    a.patch(call, 0);
    a.store(RBX, 0, RAX);
    a.add64_i8(R12, 24);
    a.add64_i8(RBX, 4);
    a.add64_i8(R13, -1);
    let back = a.jmp();
    a.patch(back, top);
    let end_at = a.len();
    a.patch(done, end_at);
    a.pop(R13);
    a.pop(R12);
    a.pop(RBX);
    a.ret();
    // The tables, read-only data after the code.
    while a.len() % 4 != 0 {
        a.buf.push(0xcc);
    }
    for (at, values) in tables {
        let here = a.len();
        a.patch(at, here);
        for v in values {
            a.buf.extend_from_slice(&v.to_le_bytes());
        }
    }
    for (at, t) in fixups {
        let target = label.get(t).copied().unwrap_or(usize::MAX);
        if target == usize::MAX {
            return Err(JitError::new(
                JitErrorKind::Invalid,
                format!("jump to instruction {t}, which has no code"),
            ));
        }
        a.patch(at, target);
    }
    Ok(Code {
        bytes: a.buf,
        batch,
    })
}

/// A big-endian load into A at `[rdi + disp]` or `[rdi + index]`.
fn emit_load(a: &mut Asm, sz: u16, disp: i32, index: Option<u8>) {
    let bytes = match sz {
        W => 4,
        H => 2,
        _ => 1,
    };
    match index {
        Some(r) => a.load_idx(bytes, RAX, RDI, r),
        None => a.load(bytes, RAX, RDI, disp),
    }
    match bytes {
        4 => a.bswap(RAX),
        2 => a.rol_ax_8(),
        _ => {}
    }
}

/// Emits a membership test of A in the sorted `values`: a branch-free lower-bound search over
/// a table placed after the code (its last value repeated once, so that the element after the
/// bound is always readable), then a jump to `hit` or `miss`; `next` is the instruction after
/// the chain.
fn member(
    a: &mut Asm,
    values: &[u32],
    hit: usize,
    miss: usize,
    next: usize,
    fix: &mut Vec<(usize, usize)>,
    tables: &mut Vec<(usize, Vec<u32>)>,
) {
    let mut t = values.to_vec();
    t.push(*values.last().unwrap_or(&0));
    let at = a.lea_rip(RDX);
    tables.push((at, t));
    let mut n = values.len();
    while n > 1 {
        let half = n / 2;
        // base = base[half] < A ? base + half : base
        a.cmp_mr(RDX, 4 * half as i32, RAX);
        a.lea(R10, RDX, 4 * half as i32);
        a.cmov64(Cc::B, RDX, R10);
        n -= half;
    }
    // The lower bound is base, or base + 1 when base[0] < A.
    a.cmp_mr(RDX, 0, RAX);
    let j = a.jcc(Cc::E);
    fix.push((j, hit));
    let j = a.jcc(Cc::A);
    fix.push((j, miss));
    a.cmp_mr(RDX, 4, RAX);
    let j = a.jcc(Cc::E);
    fix.push((j, hit));
    if miss != next {
        let j = a.jmp();
        fix.push((j, miss));
    }
}

/// Emits a binary search of A over `table` (sorted by value), jumping to the matching target or
/// to `default`; `next` is the instruction after the chain (a jump there from the last leaf is
/// left out).
fn search(
    a: &mut Asm,
    table: &[(u32, usize)],
    default: usize,
    next: usize,
    fix: &mut Vec<(usize, usize)>,
) {
    fn go(
        a: &mut Asm,
        t: &[(u32, usize)],
        default: usize,
        last: bool,
        next: usize,
        fix: &mut Vec<(usize, usize)>,
    ) {
        if t.len() <= 3 {
            for &(v, target) in t {
                a.alu_ri(Alu::Cmp, RAX, v);
                let at = a.jcc(Cc::E);
                fix.push((at, target));
            }
            if !(last && default == next) {
                let at = a.jmp();
                fix.push((at, default));
            }
            return;
        }
        let mid = t.len() / 2;
        let (v, target) = t[mid];
        a.alu_ri(Alu::Cmp, RAX, v);
        let at = a.jcc(Cc::E);
        fix.push((at, target));
        let below = a.jcc(Cc::B);
        go(a, &t[mid + 1..], default, false, next, fix);
        let here = a.len();
        a.patch(below, here);
        go(a, &t[..mid], default, last, next, fix);
    }
    go(a, table, default, true, next, fix);
}

fn unsupported(pc: usize, i: &Insn) -> JitError {
    JitError::new(
        JitErrorKind::Invalid,
        format!(
            "instruction {pc} (code {:#06x}) is not a classic BPF instruction the validator accepts",
            i.code
        ),
    )
}
