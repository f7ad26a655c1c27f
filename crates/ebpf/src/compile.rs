//! Classic BPF to eBPF, for socket filters, tc classifiers and XDP.
//!
//! [`from_classic`] translates a classic program (what `netsift_bpf::compile` produces, or any
//! program libpcap's validator accepts) into eBPF with the meaning of netsift's interpreter
//! (libpcap's `bpf_filter`): same result on every packet, where the packet is what the
//! program type sees (see [`Options`] and `docs/ebpf.md`). [`from_pred`] compiles a filter's
//! `Pred` through classic BPF first.
//!
//! # Registers and memory
//!
//! | eBPF      | holds                                                           |
//! |-----------|-----------------------------------------------------------------|
//! | `r6`      | the context (`struct __sk_buff *` or `struct xdp_md *`)         |
//! | `w7`      | the accumulator A (32 bits, zero-extended)                      |
//! | `w8`      | the index register X                                            |
//! | `r9`      | `data`, the first packet byte (direct access)                   |
//! | `r5`      | `data_end` (direct access; no helper is called after the prologue) |
//! | `r0`-`r4` | temporaries                                                     |
//! | `r10-64`… | scratch memory `M[0..16]`, one `u32` each                       |
//! | `r10-72`  | the loop budget (programs with backward jumps only)             |
//!
//! A and X use 32-bit arithmetic (`ALU` class) and 32-bit comparisons (`JMP32`), so wrapping,
//! unsigned division and unsigned comparisons with constants above 2^31 behave as in classic
//! BPF without masking.
//!
//! # Packet loads
//!
//! - **Direct access** (SCHED_CLS and XDP): a load of `size` bytes at constant offset `k` is
//!   preceded by `r0 = r9; r0 += k + size; if r0 > r5 goto reject`, the form whose bounds the
//!   verifier follows. The check is hoisted to the first load of a straight-line run
//!   (checking the run's largest extent: every exit of such a run before its end is a
//!   rejection, so the result is the same) and dropped where every path to a load already
//!   checked at least its extent. X-relative loads add X and `k` in 64 bits (no wrap, as in
//!   libpcap), reject offsets beyond 64 KiB — the verifier's limit for packet offsets — and
//!   check the end against `data_end`. Values are converted from network order with `be16`
//!   and `be32`.
//! - **`LD_ABS`/`LD_IND`** (SOCKET_FILTER, optional for SCHED_CLS): the kernel's own bounds
//!   checks, which end the program with 0 when a load fails — classic BPF's meaning. Offsets
//!   of 2^31 and more are rejected before the instruction, which would otherwise read the
//!   kernel's special negative areas (`SKF_NET_OFF`, `SKF_LL_OFF`).
//!
//! Loads that can never succeed (beyond the limits above) compile to a jump to the rejection,
//! and the code after them, unreachable, is not emitted (the verifier refuses dead code).
//!
//! # Everything else
//!
//! - Division and modulo by X check X first (0 rejects); shifts by X of 32 or more give 0;
//!   constant shifts use the low 5 bits (netsift's interpreter, libpcap on x86-64).
//! - Scratch cells that some instruction reads are zeroed in the prologue (the interpreter
//!   starts from zeros; the verifier refuses reads of unwritten stack).
//! - `len` is `skb->len`, the packet's length (`data_end - data` for XDP), or with
//!   [`Len::Wire`] the socket buffer's `wire_len`.
//! - Ancillary loads (`SKF_AD_OFF + n`) read the context's fields ([`Ancillary::Kernel`]), or
//!   reject as libpcap does on captures ([`Ancillary::Absent`]).
//! - Programs with backward jumps (libpcap's `ip6 protochain` loop) run under the
//!   interpreter's budget of [`netsift_bpf::LOOP_BUDGET`] executed classic instructions,
//!   charged per basic block to a counter on the stack, exactly as the interpreter counts.
//!   For the verifier, each backward jump is preceded by `may_goto` (Linux 6.9), which lets it
//!   prune the loop's states, and at loop heads A, X and the scratch cells are made opaque
//!   (see `widen`) so that those states repeat; the counter is opaque too.
//! - `ret` gives the program type's verdict ([`Return`]).

use netsift_bpf::{Insn as CInsn, Program as Classic, Rules, code as c};
use netsift_lang::Pred;

use crate::asm::{Assembler, Label};
use crate::error::{Error, ErrorKind, Result};
use crate::insn::{Alu, Cond, Insn, Reg, Size, helper, op};
use crate::prog::{ProgType, Program, tc_act, xdp_action};

/// How the generated code reads the packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Access {
    /// Direct access for SCHED_CLS and XDP, `LD_ABS`/`LD_IND` for SOCKET_FILTER.
    #[default]
    Auto,
    /// Direct access (`data`/`data_end`; SCHED_CLS and XDP only).
    Direct,
    /// The legacy `LD_ABS`/`LD_IND` instructions (SOCKET_FILTER, and SCHED_CLS with
    /// [`Return::Classic`]: a failed load ends the program with 0).
    LdAbs,
}

/// What the program returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Return {
    /// The program type's verdict: XDP_PASS / XDP_DROP, TC_ACT_OK / TC_ACT_SHOT, and for
    /// socket filters the classic value itself (the number of bytes to keep, 0 drops).
    #[default]
    Verdict,
    /// The classic value unchanged (0 rejects, otherwise the snap length), whatever the
    /// program type: what `BPF_PROG_TEST_RUN` should report when the kernel is used as a
    /// filter engine. Not for attaching SCHED_CLS or XDP programs.
    Classic,
}

/// What ancillary loads (`ld [SKF_AD_OFF + n]`, e.g. `inbound`, `ifindex`) mean.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Ancillary {
    /// The kernel's meaning: the context's field (`pkt_type`, `ifindex`, `protocol`…). A
    /// field the program type lacks is an [`ErrorKind::Unsupported`] error.
    #[default]
    Kernel,
    /// libpcap's meaning outside the kernel: an out-of-bounds load, which rejects.
    Absent,
}

/// What `len` (`ld #pktlen`) reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Len {
    /// The packet's length: `skb->len`, or `data_end - data` for XDP.
    #[default]
    Packet,
    /// `__sk_buff.wire_len` (SCHED_CLS only): the length on the wire, which a test run can
    /// set above the packet's length ([`crate::SkbContext::wire_len`]) to replay truncated
    /// captures.
    Wire,
}

/// Where an XDP program sends the packets its filter accepts, instead of passing them up the
/// stack: `bpf_redirect_map(map, key, XDP_PASS)` — a missing map entry passes the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Redirect {
    /// The descriptor of a [`crate::MapType::DevMap`] (to another interface) or
    /// [`crate::MapType::XskMap`] (to an AF_XDP socket). It must stay open while the program is
    /// loaded (the loaded program holds its own reference afterwards).
    pub map_fd: i32,
    /// The key looked up.
    pub key: RedirectKey,
}

/// The key of a [`Redirect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedirectKey {
    /// Always this entry (a devmap slot).
    Fixed(u32),
    /// The packet's receive queue (`xdp_md.rx_queue_index`: an XSKMAP per queue).
    RxQueue,
}

/// Translation options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Options {
    /// The program type to generate code for.
    pub prog_type: ProgType,
    /// Packet access.
    pub access: Access,
    /// Return values.
    pub result: Return,
    /// Ancillary loads.
    pub ancillary: Ancillary,
    /// Meaning of `len`.
    pub len: Len,
    /// SCHED_CLS with direct access: when the packet is not all in the linear part of the
    /// socket buffer (`data_end - data < skb->len`), call `bpf_skb_pull_data` first so that
    /// loads see the whole packet. Without it, bytes outside the linear part read as out of
    /// bounds.
    pub pull_nonlinear: bool,
    /// XDP with [`Return::Verdict`] only: accepted packets are redirected instead of passed.
    pub redirect: Option<Redirect>,
}

impl Options {
    /// Defaults for `prog_type`: automatic access, verdicts, the kernel's ancillary data,
    /// `len` as the packet's length, non-linear packets pulled.
    pub fn new(prog_type: ProgType) -> Options {
        Options {
            prog_type,
            access: Access::Auto,
            result: Return::Verdict,
            ancillary: Ancillary::Kernel,
            len: Len::Packet,
            pull_nonlinear: true,
            redirect: None,
        }
    }
}

const CTX: Reg = Reg::R6;
const A: Reg = Reg::R7;
const X: Reg = Reg::R8;
const PKT: Reg = Reg::R9;
const END: Reg = Reg::R5;

/// Offset of `M[i]` from the frame pointer.
fn mem_off(i: u32) -> i16 {
    -64 + 4 * (i & 0xf) as i16
}

/// Offset of the loop budget (a `u64`) from the frame pointer, below the scratch cells.
const BUDGET_OFF: i16 = -72;

/// Largest offset + size of a direct packet access the verifier allows (`MAX_PACKET_OFF`).
const DIRECT_LIMIT: u64 = 0xffff;
/// Largest offset + size of an `LD_ABS`/`LD_IND` load (its offset is an `int`).
const LDABS_LIMIT: u64 = 0x7fff_ffff;

/// Field offsets in `struct __sk_buff`.
mod skb {
    pub const LEN: i16 = 0;
    pub const PKT_TYPE: i16 = 4;
    pub const MARK: i16 = 8;
    pub const QUEUE_MAPPING: i16 = 12;
    pub const PROTOCOL: i16 = 16;
    pub const VLAN_PRESENT: i16 = 20;
    pub const VLAN_TCI: i16 = 24;
    pub const VLAN_PROTO: i16 = 28;
    pub const IFINDEX: i16 = 40;
    pub const HASH: i16 = 68;
    pub const DATA: i16 = 76;
    pub const DATA_END: i16 = 80;
    pub const WIRE_LEN: i16 = 160;
}

/// Field offsets in `struct xdp_md`.
mod xdp {
    pub const DATA: i16 = 0;
    pub const DATA_END: i16 = 4;
    pub const INGRESS_IFINDEX: i16 = 12;
    pub const RX_QUEUE_INDEX: i16 = 16;
}

/// Names of the ancillary offsets (`SKF_AD_*`), by offset / 4.
const ANCILLARY_NAMES: [&str; 16] = [
    "protocol",
    "pkttype",
    "ifindex",
    "nlattr",
    "nlattr_nest",
    "mark",
    "queue",
    "hatype",
    "rxhash",
    "cpu",
    "alu_xor_x",
    "vlan_tci",
    "vlan_avail",
    "pay_offset",
    "random",
    "vlan_tpid",
];

/// Compile `pred` to classic BPF with `classic` options, then translate it with `opts`.
pub fn from_pred(
    pred: &Pred,
    classic: &netsift_bpf::compile::Options,
    opts: &Options,
) -> Result<Program> {
    let prog = netsift_bpf::compile::compile(pred, classic).map_err(|e| {
        Error::new(
            ErrorKind::InvalidProgram,
            format!("compiling the filter: {e}"),
        )
    })?;
    from_classic(&prog, opts)
}

/// Translate a classic program. It must pass libpcap's validation rules
/// ([`Rules::Libpcap`]: backward `ja` allowed).
pub fn from_classic(prog: &Classic, opts: &Options) -> Result<Program> {
    netsift_bpf::validate(prog, Rules::Libpcap).map_err(|e| {
        Error::new(
            ErrorKind::InvalidProgram,
            format!("translating classic BPF to eBPF: {e}"),
        )
    })?;
    let direct = match (opts.prog_type, opts.access) {
        (ProgType::SocketFilter, Access::Direct) => {
            return Err(unsupported(
                opts,
                "socket filters cannot read the packet directly",
            ));
        }
        (ProgType::Xdp, Access::LdAbs) => {
            return Err(unsupported(opts, "XDP programs cannot use LD_ABS/LD_IND"));
        }
        (ProgType::SchedCls, Access::LdAbs) if opts.result == Return::Verdict => {
            return Err(unsupported(
                opts,
                "LD_ABS ends the program with 0 on a failed load, which for tc is TC_ACT_OK \
                 (accept); use direct access or Return::Classic",
            ));
        }
        (ProgType::SocketFilter, _) | (_, Access::LdAbs) => false,
        _ => true,
    };
    if opts.len == Len::Wire && opts.prog_type != ProgType::SchedCls {
        return Err(unsupported(
            opts,
            "only SCHED_CLS programs can read wire_len",
        ));
    }
    Translator::new(prog.insns(), opts, direct).run()
}

fn unsupported(opts: &Options, why: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "translating classic BPF to eBPF for {}: {why}",
            opts.prog_type
        ),
    )
}

/// Facts about each classic instruction, from [`Translator::analyse`].
struct Analysis {
    /// Reachable from the entry (code is emitted only for these).
    reachable: Vec<bool>,
    /// The packet extent to check before the instruction (direct access).
    check: Vec<Option<u32>>,
    /// An upper bound of X on entry, when one is known.
    x_max: Vec<Option<u64>>,
    /// Targets of backward jumps (loop heads).
    back: Vec<bool>,
}

/// The state of one translation.
struct Translator<'a> {
    insns: &'a [CInsn],
    opts: &'a Options,
    direct: bool,
    limit: u64,
    asm: Assembler,
    labels: Vec<Label>,
    /// Where failed checks go: `r0 = reject verdict; exit`, placed within reach (see
    /// [`Translator::reach_reject`]).
    reject: Label,
    /// Whether a jump to `reject` was emitted.
    reject_used: bool,
    /// Where `reject` was bound (at a `ret #0`), if it was.
    reject_at: Option<usize>,
    /// Where the code jumping to the current `reject` started.
    reject_since: usize,
}

/// Longest distance, in instructions, between a jump to the rejection and its target that the
/// translator lets happen: far below the 32,767 of the 16-bit offset field, leaving room for
/// the code of one classic instruction (a few dozen at most).
const REJECT_SPAN: usize = 16_384;
/// The same with `LD_ABS`/`LD_IND`, which the kernel expands about sevenfold before it checks
/// that jumps still fit.
const REJECT_SPAN_LDABS: usize = 4_000;
/// Reach of jumps with `LD_ABS`/`LD_IND` (farther `goto`s become `gotol`).
const REACH_LDABS: u16 = 4_400;

fn size_of(code: u16) -> (Size, u32) {
    match c::size(code) {
        c::B => (Size::B, 1),
        c::H => (Size::H, 2),
        _ => (Size::W, 4),
    }
}

impl<'a> Translator<'a> {
    fn new(insns: &'a [CInsn], opts: &'a Options, direct: bool) -> Translator<'a> {
        let mut asm = Assembler::new();
        if !direct {
            asm.set_reach(REACH_LDABS);
        }
        let labels = (0..insns.len()).map(|_| asm.label()).collect();
        let reject = asm.label();
        Translator {
            insns,
            opts,
            direct,
            limit: if direct { DIRECT_LIMIT } else { LDABS_LIMIT },
            asm,
            labels,
            reject,
            reject_used: false,
            reject_at: None,
            reject_since: 0,
        }
    }

    fn err(&self, pc: usize, why: impl std::fmt::Display) -> Error {
        let i = self.insns[pc];
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "translating classic BPF instruction {pc} ({{ 0x{:x}, {}, {}, 0x{:08x} }}) for {}: {why}",
                i.code, i.jt, i.jf, i.k, self.opts.prog_type
            ),
        )
    }

    /// Whether `insn` is an ancillary load handled as a context read.
    fn is_kernel_ancillary(&self, i: &CInsn) -> bool {
        self.opts.ancillary == Ancillary::Kernel
            && c::class(i.code) == c::LD
            && c::mode(i.code) == c::ABS
            && i.k >= c::SKF_AD_OFF
    }

    /// `(offset, size)` of a constant-offset packet load (absolute, or `ldxb 4*([k]&0xf)`).
    fn abs_load(&self, i: &CInsn) -> Option<(u32, u32)> {
        let code = i.code;
        let abs = c::class(code) == c::LD && c::mode(code) == c::ABS;
        let msh = code == c::LDX | c::B | c::MSH;
        if (abs && !self.is_kernel_ancillary(i)) || msh {
            Some((i.k, if msh { 1 } else { size_of(code).1 }))
        } else {
            None
        }
    }

    /// The extent (offset + size) of a constant load that can succeed, if `i` is one.
    fn const_extent(&self, i: &CInsn) -> Option<u32> {
        let (k, s) = self.abs_load(i)?;
        let e = u64::from(k) + u64::from(s);
        (e <= self.limit).then_some(e as u32)
    }

    /// Whether `i` always rejects: a load that can never succeed, or division by constant 0.
    fn always_rejects(&self, i: &CInsn) -> bool {
        let code = i.code;
        if let Some((k, s)) = self.abs_load(i) {
            return u64::from(k) + u64::from(s) > self.limit;
        }
        if c::class(code) == c::LD && c::mode(code) == c::IND {
            return u64::from(i.k) + u64::from(size_of(code).1) > self.limit;
        }
        c::class(code) == c::ALU
            && c::src(code) == c::K
            && matches!(c::op(code), c::DIV | c::MOD)
            && i.k == 0
    }

    /// Successors of instruction `pc` (backward ones included).
    fn successors(&self, pc: usize) -> Vec<usize> {
        let i = &self.insns[pc];
        if self.always_rejects(i) {
            return Vec::new();
        }
        match c::class(i.code) {
            c::RET => Vec::new(),
            c::JMP if c::op(i.code) == c::JA => {
                vec![(pc as i64 + 1 + i64::from(i.k as i32)) as usize]
            }
            c::JMP => vec![pc + 1 + usize::from(i.jt), pc + 1 + usize::from(i.jf)],
            _ => vec![pc + 1],
        }
    }

    fn is_control(i: &CInsn) -> bool {
        matches!(c::class(i.code), c::JMP | c::RET)
    }

    /// What the code generator needs to know about each instruction: whether it is reachable,
    /// the bounds check to emit before it (direct access), and a bound on X on entry.
    fn analyse(&self) -> Analysis {
        let n = self.insns.len();
        let mut reachable = vec![false; n];
        let mut back = vec![false; n];
        let mut stack = vec![0usize];
        reachable[0] = true;
        while let Some(pc) = stack.pop() {
            for s in self.successors(pc) {
                if s <= pc {
                    back[s] = true;
                }
                if s < n && !reachable[s] {
                    reachable[s] = true;
                    stack.push(s);
                }
            }
        }
        // Forward data flow over the forward edges (the only ones but for loops, whose targets
        // start from nothing known): bytes known present, and the largest value X can have.
        let mut check = vec![None; n];
        let mut known: Vec<Option<u32>> = vec![None; n];
        let mut x_in: Vec<Option<Option<u64>>> = vec![None; n];
        known[0] = Some(0);
        x_in[0] = Some(Some(0));
        for pc in 0..n {
            if !reachable[pc] {
                continue;
            }
            let i = &self.insns[pc];
            let (mut k, x) = if back[pc] {
                (0, None)
            } else {
                (known[pc].unwrap_or(0), x_in[pc].flatten())
            };
            if let (true, Some(e)) = (self.direct, self.const_extent(i)) {
                if e > k {
                    // Check the largest extent of the straight-line run from here.
                    let mut m = e;
                    let mut j = pc;
                    while j + 1 < n
                        && !Self::is_control(&self.insns[j])
                        && !self.always_rejects(&self.insns[j])
                    {
                        j += 1;
                        if let Some(e2) = self.const_extent(&self.insns[j]) {
                            m = m.max(e2);
                        }
                    }
                    check[pc] = Some(m);
                    k = m;
                }
            }
            let x_out = match i.code {
                code if code == c::LDX | c::W | c::IMM => Some(u64::from(i.k)),
                code if code == c::LDX | c::B | c::MSH => Some(60),
                code if c::class(code) == c::LDX || code == c::MISC | c::TAX => None,
                _ => x,
            };
            for s in self.successors(pc) {
                if s > pc && s < n {
                    known[s] = Some(known[s].map_or(k, |v| v.min(k)));
                    x_in[s] = Some(match x_in[s] {
                        None => x_out,
                        Some(prev) => prev.zip(x_out).map(|(a, b)| a.max(b)),
                    });
                }
            }
        }
        let x_max = (0..n)
            .map(|pc| if back[pc] { None } else { x_in[pc].flatten() })
            .collect();
        Analysis {
            reachable,
            check,
            x_max,
            back,
        }
    }

    /// Keep the rejection within reach of the jumps to it: when the current one is bound too
    /// far back, or jumps to it started too far back, start a new one, placing the pending one
    /// here (behind a jump over it) if jumps wait for it.
    fn reach_reject(&mut self) {
        let here = self.asm.here();
        let span = if self.direct {
            REJECT_SPAN
        } else {
            REJECT_SPAN_LDABS
        };
        let far = match self.reject_at {
            Some(at) => here - at > span,
            None => here - self.reject_since > span,
        };
        if !far {
            return;
        }
        if self.reject_at.is_none() && self.reject_used {
            let v = self.ret_value(0);
            let old = self.reject;
            // Jump over it, unless the code before does not fall through (the verifier refuses
            // unreachable instructions).
            let falls_through = self.asm.last().is_some_and(|l| {
                *l != Insn::exit() && l.code != op::JMP | op::JA && l.code != op::JMP32 | op::JA
            });
            if falls_through {
                self.asm.push(Insn::ja(2));
            }
            self.asm.bind(old);
            self.asm.push(Insn::mov32_imm(Reg::R0, v as i32));
            self.asm.push(Insn::exit());
        }
        self.reject = self.asm.label();
        self.reject_used = false;
        self.reject_at = None;
        self.reject_since = self.asm.here();
    }

    fn jump_reject(&mut self, insn: Insn) {
        self.reject_used = true;
        let r = self.reject;
        self.asm.jump(insn, r);
    }

    /// Whether accepted packets are redirected (XDP verdicts with [`Options::redirect`]).
    fn redirecting(&self) -> bool {
        self.opts.redirect.is_some()
            && self.opts.result == Return::Verdict
            && self.opts.prog_type == ProgType::Xdp
    }

    /// `return bpf_redirect_map(map, key, XDP_PASS)`.
    fn redirect_and_exit(&mut self) {
        let Some(r) = self.opts.redirect else {
            return;
        };
        let a = &mut self.asm;
        for i in Insn::ld_map_fd(Reg::R1, r.map_fd) {
            a.push(i);
        }
        match r.key {
            RedirectKey::Fixed(k) => a.push(Insn::mov32_imm(Reg::R2, k as i32)),
            // xdp_md.rx_queue_index is at offset 16.
            RedirectKey::RxQueue => a.push(Insn::load(Size::W, Reg::R2, CTX, 16)),
        }
        a.push(Insn::mov64_imm(Reg::R3, xdp_action::PASS as i32));
        a.push(Insn::call(helper::REDIRECT_MAP));
        a.push(Insn::exit());
    }

    /// The value `ret #k` returns.
    fn ret_value(&self, k: u32) -> u32 {
        match (self.opts.result, self.opts.prog_type) {
            (Return::Classic, _) | (_, ProgType::SocketFilter) => k,
            (Return::Verdict, ProgType::SchedCls) => {
                if k == 0 {
                    tc_act::SHOT
                } else {
                    tc_act::OK
                }
            }
            (Return::Verdict, ProgType::Xdp) => {
                if k == 0 {
                    xdp_action::DROP
                } else {
                    xdp_action::PASS
                }
            }
        }
    }

    fn prologue(&mut self, reads_mem: &[bool; 16], loads_packet: bool, loops: bool) {
        let a = &mut self.asm;
        a.push(Insn::mov64_reg(CTX, Reg::R1));
        a.push(Insn::mov32_imm(A, 0));
        a.push(Insn::mov32_imm(X, 0));
        for (i, _) in reads_mem.iter().enumerate().filter(|(_, r)| **r) {
            a.push(Insn::store_imm(Size::W, Reg::R10, mem_off(i as u32), 0));
        }
        if loops {
            // The loop budget, which the verifier must not know (it would follow every value).
            self.opaque_zero(Reg::R1, Reg::R2, Reg::R3, true);
            let a = &mut self.asm;
            a.push(Insn::alu64_imm(
                Alu::Add,
                Reg::R1,
                netsift_bpf::LOOP_BUDGET as i32,
            ));
            a.push(Insn::store(Size::DW, Reg::R10, BUDGET_OFF, Reg::R1));
        }
        let a = &mut self.asm;
        if !self.direct || !loads_packet {
            return;
        }
        match self.opts.prog_type {
            ProgType::Xdp => {
                a.push(Insn::load(Size::W, PKT, CTX, xdp::DATA));
                a.push(Insn::load(Size::W, END, CTX, xdp::DATA_END));
            }
            _ => {
                let pointers = |a: &mut Assembler| {
                    a.push(Insn::load(Size::W, PKT, CTX, skb::DATA));
                    a.push(Insn::load(Size::W, END, CTX, skb::DATA_END));
                };
                if self.opts.pull_nonlinear {
                    // if (len <= 0xffff && data + len <= data_end) skip the pull.
                    let (pull, done) = (a.label(), a.label());
                    a.push(Insn::load(Size::W, Reg::R2, CTX, skb::LEN));
                    pointers(a);
                    a.jump(
                        Insn::jmp_imm(Cond::Gt, Reg::R2, DIRECT_LIMIT as i32, 0),
                        pull,
                    );
                    a.push(Insn::mov64_reg(Reg::R0, PKT));
                    a.push(Insn::alu64_reg(Alu::Add, Reg::R0, Reg::R2));
                    a.jump(Insn::jmp_reg(Cond::Le, Reg::R0, END, 0), done);
                    a.bind(pull);
                    a.push(Insn::mov64_reg(Reg::R1, CTX));
                    a.push(Insn::call(helper::SKB_PULL_DATA));
                    pointers(a);
                    a.bind(done);
                } else {
                    pointers(a);
                }
            }
        }
    }

    /// Load the packet's length into `dst`.
    fn len(&mut self, dst: Reg) {
        let a = &mut self.asm;
        match (self.opts.prog_type, self.opts.len) {
            (ProgType::Xdp, _) => {
                a.push(Insn::load(Size::W, dst, CTX, xdp::DATA_END));
                a.push(Insn::load(Size::W, Reg::R0, CTX, xdp::DATA));
                // Pointer difference (a scalar for privileged loaders), truncated to 32 bits.
                a.push(Insn::alu64_reg(Alu::Sub, dst, Reg::R0));
                a.push(Insn::mov32_reg(dst, dst));
            }
            (_, Len::Wire) => a.push(Insn::load(Size::W, dst, CTX, skb::WIRE_LEN)),
            (_, Len::Packet) => a.push(Insn::load(Size::W, dst, CTX, skb::LEN)),
        }
    }

    /// `dst = P[k:size]` for a load whose bounds are checked (direct) or checked by the kernel.
    fn load_abs(&mut self, dst: Reg, size: Size, k: u32) {
        let a = &mut self.asm;
        if self.direct {
            if let Ok(off) = i16::try_from(k) {
                a.push(Insn::load(size, dst, PKT, off));
            } else {
                a.push(Insn::mov64_reg(Reg::R1, PKT));
                a.push(Insn::alu64_imm(Alu::Add, Reg::R1, k as i32));
                a.push(Insn::load(size, dst, Reg::R1, 0));
            }
            match size {
                Size::H => a.push(Insn::to_be(dst, 16)),
                Size::W => a.push(Insn::to_be(dst, 32)),
                _ => {}
            }
        } else {
            a.push(Insn::ld_abs(size, k as i32));
            a.push(Insn::mov32_reg(dst, Reg::R0));
        }
    }

    /// `A = P[X + k:size]`, rejecting when out of bounds. `k + size` is within the limit;
    /// `x_max` bounds X when known. X is first held to `limit - size - k` (unless its bound
    /// already keeps it there), which both gives classic BPF's rejection of far offsets and
    /// lets the verifier bound the pointer arithmetic.
    fn load_ind(&mut self, size: Size, k: u32, x_max: Option<u64>) {
        let bytes = size.bytes();
        let max_x = self.limit - u64::from(bytes) - u64::from(k);
        if x_max.is_none_or(|x| x > max_x) {
            self.jump_reject(Insn::jmp_imm(Cond::Gt, X, max_x as i32, 0));
        }
        if !self.direct {
            self.asm.push(Insn::ld_ind(size, X, k as i32));
            self.asm.push(Insn::mov32_reg(A, Reg::R0));
            return;
        }
        // r0 = data + X (+ k if k does not fit the load's offset field), r1 = r0 + the rest.
        let (pre, off) = match i16::try_from(k) {
            Ok(off) => (0, off),
            Err(_) => (k, 0),
        };
        let a = &mut self.asm;
        a.push(Insn::mov64_reg(Reg::R0, PKT));
        a.push(Insn::alu64_reg(Alu::Add, Reg::R0, X));
        if pre != 0 {
            a.push(Insn::alu64_imm(Alu::Add, Reg::R0, pre as i32));
        }
        a.push(Insn::mov64_reg(Reg::R1, Reg::R0));
        a.push(Insn::alu64_imm(Alu::Add, Reg::R1, (k - pre + bytes) as i32));
        self.jump_reject(Insn::jmp_reg(Cond::Gt, Reg::R1, END, 0));
        let a = &mut self.asm;
        a.push(Insn::load(size, A, Reg::R0, off));
        match size {
            Size::H => a.push(Insn::to_be(A, 16)),
            Size::W => a.push(Insn::to_be(A, 32)),
            _ => {}
        }
    }

    /// `A = ancillary field n` (kernel meaning).
    fn ancillary(&mut self, pc: usize, n: u32) -> Result<()> {
        let name = ANCILLARY_NAMES
            .get((n / 4) as usize)
            .filter(|_| n % 4 == 0)
            .copied();
        if n == 40 {
            // SKF_AD_ALU_XOR_X is an operation, not a field.
            self.asm.push(Insn::alu32_reg(Alu::Xor, A, X));
            return Ok(());
        }
        let field = match self.opts.prog_type {
            ProgType::Xdp => match n {
                8 => Some((xdp::INGRESS_IFINDEX, false)),
                24 => Some((xdp::RX_QUEUE_INDEX, false)),
                _ => None,
            },
            _ => match n {
                0 => Some((skb::PROTOCOL, true)),
                4 => Some((skb::PKT_TYPE, false)),
                8 => Some((skb::IFINDEX, false)),
                20 => Some((skb::MARK, false)),
                24 => Some((skb::QUEUE_MAPPING, false)),
                32 => Some((skb::HASH, false)),
                44 => Some((skb::VLAN_TCI, false)),
                48 => Some((skb::VLAN_PRESENT, false)),
                60 => Some((skb::VLAN_PROTO, true)),
                _ => None,
            },
        };
        let Some((off, swap)) = field else {
            return Err(self.err(
                pc,
                match name {
                    Some(name) => format!(
                        "the ancillary load SKF_AD_{} has no eBPF equivalent for this program type",
                        name.to_uppercase()
                    ),
                    None => format!("unknown ancillary offset SKF_AD_OFF + {n}"),
                },
            ));
        };
        self.asm.push(Insn::load(Size::W, A, CTX, off));
        if swap {
            self.asm.push(Insn::to_be(A, 16));
        }
        Ok(())
    }

    /// `dst = 0`, computed from reads of a context field so that the verifier does not know
    /// the value: 32 bits (the difference of two reads; `tmp` is clobbered) or, with `wide`, 64
    /// bits with no known bit and no known range, signed or unsigned (the difference of two
    /// `field << 32 | field`; `tmp` and `tmp2` are clobbered). A counter started from such a
    /// value keeps no bounds the verifier could see shrink from one loop round to the next.
    fn opaque_zero(&mut self, dst: Reg, tmp: Reg, tmp2: Reg, wide: bool) {
        let field = match self.opts.prog_type {
            ProgType::Xdp => xdp::RX_QUEUE_INDEX,
            _ => skb::LEN,
        };
        let a = &mut self.asm;
        if !wide {
            a.push(Insn::load(Size::W, dst, CTX, field));
            a.push(Insn::load(Size::W, tmp, CTX, field));
            a.push(Insn::alu32_reg(Alu::Sub, dst, tmp));
            return;
        }
        for r in [dst, tmp] {
            a.push(Insn::load(Size::W, r, CTX, field));
            a.push(Insn::alu64_imm(Alu::Lsh, r, 32));
            a.push(Insn::load(Size::W, tmp2, CTX, field));
            a.push(Insn::alu64_reg(Alu::Or, r, tmp2));
        }
        a.push(Insn::alu64_reg(Alu::Sub, dst, tmp));
    }

    /// At a loop head: add to A, X and the scratch cells that are read a zero the verifier
    /// cannot see is zero, so that it knows nothing of them there. Without this, a loop that
    /// steps X by a constant is verified iteration by iteration with exact values until the
    /// complexity limit; with it, the state at the loop's `may_goto` repeats after one round
    /// and the verifier stops.
    fn widen(&mut self, reads_mem: &[bool; 16]) {
        self.opaque_zero(Reg::R1, Reg::R2, Reg::R3, false);
        let a = &mut self.asm;
        a.push(Insn::alu32_reg(Alu::Add, A, Reg::R1));
        a.push(Insn::alu32_reg(Alu::Add, X, Reg::R1));
        for (i, _) in reads_mem.iter().enumerate().filter(|(_, r)| **r) {
            let off = mem_off(i as u32);
            a.push(Insn::load(Size::W, Reg::R2, Reg::R10, off));
            a.push(Insn::alu32_reg(Alu::Add, Reg::R2, Reg::R1));
            a.push(Insn::store(Size::W, Reg::R10, off, Reg::R2));
        }
    }

    /// Charge a basic block of `len` classic instructions to the loop budget, rejecting when
    /// it does not cover them (the interpreter's [`netsift_bpf::LOOP_BUDGET`], exactly).
    fn spend(&mut self, len: u32) {
        let a = &mut self.asm;
        a.push(Insn::load(Size::DW, Reg::R1, Reg::R10, BUDGET_OFF));
        self.jump_reject(Insn::jmp_imm(Cond::Lt, Reg::R1, len as i32, 0));
        let a = &mut self.asm;
        a.push(Insn::alu64_imm(Alu::Sub, Reg::R1, len as i32));
        a.push(Insn::store(Size::DW, Reg::R10, BUDGET_OFF, Reg::R1));
    }

    fn jump_to(&mut self, insn: Insn, target: usize) {
        let l = self.labels[target];
        self.asm.jump(insn, l);
    }

    /// For programs with loops: the number of classic instructions of the basic block that
    /// starts at each reachable block leader (the interpreter's budget counts them).
    fn block_lengths(&self, reachable: &[bool]) -> Vec<Option<u32>> {
        let n = self.insns.len();
        let ends_block =
            |pc: usize| Self::is_control(&self.insns[pc]) || self.always_rejects(&self.insns[pc]);
        let mut leader = vec![false; n];
        leader[0] = true;
        for pc in (0..n).filter(|&pc| reachable[pc]) {
            if ends_block(pc) {
                for s in self.successors(pc) {
                    if s < n {
                        leader[s] = true;
                    }
                }
                if pc + 1 < n {
                    leader[pc + 1] = true;
                }
            }
        }
        (0..n)
            .map(|pc| {
                if !reachable[pc] || !leader[pc] {
                    return None;
                }
                let mut end = pc;
                while !ends_block(end) && end + 1 < n && !leader[end + 1] {
                    end += 1;
                }
                Some((end - pc + 1) as u32)
            })
            .collect()
    }

    fn run(mut self) -> Result<Program> {
        let Analysis {
            reachable,
            check,
            x_max,
            back,
        } = self.analyse();
        let n = self.insns.len();
        let mut reads_mem = [false; 16];
        let mut loads_packet = false;
        for (pc, i) in self
            .insns
            .iter()
            .enumerate()
            .filter(|(pc, _)| reachable[*pc])
        {
            if i.code == c::LD | c::MEM || i.code == c::LDX | c::W | c::MEM {
                reads_mem[(i.k & 0xf) as usize] = true;
            }
            let ind = c::class(i.code) == c::LD && c::mode(i.code) == c::IND;
            loads_packet |= check[pc].is_some() || ind || self.const_extent(i).is_some();
        }
        let loops = back.iter().any(|&b| b);
        let blocks = if loops {
            self.block_lengths(&reachable)
        } else {
            vec![None; n]
        };
        self.prologue(&reads_mem, loads_packet, loops);
        self.reject_since = self.asm.here();
        for pc in 0..n {
            if !reachable[pc] {
                continue;
            }
            self.reach_reject();
            let l = self.labels[pc];
            self.asm.bind(l);
            if back[pc] {
                self.widen(&reads_mem);
            }
            if let Some(len) = blocks[pc] {
                self.spend(len);
            }
            if let Some(extent) = check[pc] {
                let a = &mut self.asm;
                a.push(Insn::mov64_reg(Reg::R0, PKT));
                a.push(Insn::alu64_imm(Alu::Add, Reg::R0, extent as i32));
                self.jump_reject(Insn::jmp_reg(Cond::Gt, Reg::R0, END, 0));
            }
            let i = self.insns[pc];
            if i.code == c::RET | c::K && i.k == 0 && self.reject_at.is_none() {
                // A `ret #0` doubles as the rejection's code.
                let r = self.reject;
                self.asm.bind(r);
                self.reject_at = Some(self.asm.here());
            }
            if self.always_rejects(&i) {
                self.jump_reject(Insn::ja(0));
                continue;
            }
            self.insn(pc, &i, x_max[pc])?;
        }
        if self.reject_used && self.reject_at.is_none() {
            let r = self.reject;
            self.asm.bind(r);
            let v = self.ret_value(0);
            self.asm.push(Insn::mov32_imm(Reg::R0, v as i32));
            self.asm.push(Insn::exit());
        }
        let insns = self.asm.finish()?;
        Ok(Program::new(self.opts.prog_type, insns))
    }

    fn insn(&mut self, pc: usize, i: &CInsn, x_max: Option<u64>) -> Result<()> {
        let k = i.k;
        let code = i.code;
        match c::class(code) {
            c::LD => match c::mode(code) {
                c::ABS if self.is_kernel_ancillary(i) => self.ancillary(pc, k - c::SKF_AD_OFF)?,
                c::ABS => self.load_abs(A, size_of(code).0, k),
                c::IND => self.load_ind(size_of(code).0, k, x_max),
                c::LEN => self.len(A),
                c::IMM => self.asm.push(Insn::mov32_imm(A, k as i32)),
                c::MEM => self.asm.push(Insn::load(Size::W, A, Reg::R10, mem_off(k))),
                _ => return Err(self.err(pc, "unknown load mode")),
            },
            c::LDX => match c::mode(code) {
                c::IMM => self.asm.push(Insn::mov32_imm(X, k as i32)),
                c::MEM => self.asm.push(Insn::load(Size::W, X, Reg::R10, mem_off(k))),
                c::LEN => self.len(X),
                c::MSH => {
                    self.load_abs(X, Size::B, k);
                    self.asm.push(Insn::alu32_imm(Alu::And, X, 0xf));
                    self.asm.push(Insn::alu32_imm(Alu::Lsh, X, 2));
                }
                _ => return Err(self.err(pc, "unknown load mode")),
            },
            c::ST => self.asm.push(Insn::store(Size::W, Reg::R10, mem_off(k), A)),
            c::STX => self.asm.push(Insn::store(Size::W, Reg::R10, mem_off(k), X)),
            c::ALU => self.alu(code, k),
            c::JMP => self.jmp(pc, i),
            c::RET => {
                if c::rval(code) == c::A {
                    match (self.opts.result, self.opts.prog_type) {
                        (Return::Classic, _) | (_, ProgType::SocketFilter) => {
                            self.asm.push(Insn::mov32_reg(Reg::R0, A));
                        }
                        _ if self.redirecting() => {
                            let no = self.ret_value(0);
                            let a = &mut self.asm;
                            a.push(Insn::mov32_imm(Reg::R0, no as i32));
                            a.push(Insn::jmp32_imm(Cond::Ne, A, 0, 1));
                            a.push(Insn::exit());
                            self.redirect_and_exit();
                            return Ok(());
                        }
                        _ => {
                            let (yes, no) = (self.ret_value(1), self.ret_value(0));
                            let a = &mut self.asm;
                            a.push(Insn::mov32_imm(Reg::R0, yes as i32));
                            a.push(Insn::jmp32_imm(Cond::Ne, A, 0, 1));
                            a.push(Insn::mov32_imm(Reg::R0, no as i32));
                        }
                    }
                } else if k != 0 && self.redirecting() {
                    self.redirect_and_exit();
                    return Ok(());
                } else {
                    let v = self.ret_value(k);
                    self.asm.push(Insn::mov32_imm(Reg::R0, v as i32));
                }
                self.asm.push(Insn::exit());
            }
            _ => match c::miscop(code) {
                c::TAX => self.asm.push(Insn::mov32_reg(X, A)),
                _ => self.asm.push(Insn::mov32_reg(A, X)),
            },
        }
        Ok(())
    }

    fn alu(&mut self, code: u16, k: u32) {
        let op = c::op(code);
        if op == c::NEG {
            self.asm.push(Insn::neg32(A));
            return;
        }
        let alu = match op {
            c::ADD => Alu::Add,
            c::SUB => Alu::Sub,
            c::MUL => Alu::Mul,
            c::DIV => Alu::Div,
            c::MOD => Alu::Mod,
            c::AND => Alu::And,
            c::OR => Alu::Or,
            c::XOR => Alu::Xor,
            c::LSH => Alu::Lsh,
            _ => Alu::Rsh,
        };
        if c::src(code) == c::K {
            match alu {
                Alu::Lsh | Alu::Rsh => {
                    if k & 31 != 0 {
                        self.asm.push(Insn::alu32_imm(alu, A, (k & 31) as i32));
                    }
                }
                // Division by constant 0 was turned into a rejection by the caller.
                _ => self.asm.push(Insn::alu32_imm(alu, A, k as i32)),
            }
            return;
        }
        match alu {
            Alu::Div | Alu::Mod => {
                self.jump_reject(Insn::jmp32_imm(Cond::Eq, X, 0, 0));
                self.asm.push(Insn::alu32_reg(alu, A, X));
            }
            Alu::Lsh | Alu::Rsh => {
                // Shifts by 32 or more give 0 (eBPF would use the low 5 bits).
                let a = &mut self.asm;
                let (big, done) = (a.label(), a.label());
                a.jump(Insn::jmp32_imm(Cond::Gt, X, 31, 0), big);
                a.push(Insn::alu32_reg(alu, A, X));
                a.jump(Insn::ja(0), done);
                a.bind(big);
                a.push(Insn::mov32_imm(A, 0));
                a.bind(done);
            }
            _ => self.asm.push(Insn::alu32_reg(alu, A, X)),
        }
    }

    fn jmp(&mut self, pc: usize, i: &CInsn) {
        let code = i.code;
        let next = pc + 1;
        if c::op(code) == c::JA {
            let t = (pc as i64 + 1 + i64::from(i.k as i32)) as usize;
            self.goto(pc, t);
            return;
        }
        let (t, f) = (next + usize::from(i.jt), next + usize::from(i.jf));
        if t == f {
            self.goto(pc, t);
            return;
        }
        let cond = match c::op(code) {
            c::JEQ => Cond::Eq,
            c::JGT => Cond::Gt,
            c::JGE => Cond::Ge,
            _ => Cond::Set,
        };
        let make = |cond: Cond| {
            if c::src(code) == c::X {
                Insn::jmp32_reg(cond, A, X, 0)
            } else {
                Insn::jmp32_imm(cond, A, i.k as i32, 0)
            }
        };
        if f == next {
            self.jump_to(make(cond), t);
        } else if t == next {
            match cond.negate() {
                Some(neg) => self.jump_to(make(neg), f),
                None => {
                    // No "jump if no bit set": jump over a goto to the false target.
                    let mut j = make(cond);
                    j.off = 1;
                    self.asm.push(j);
                    self.jump_to(Insn::ja(0), f);
                }
            }
        } else {
            self.jump_to(make(cond), t);
            self.jump_to(Insn::ja(0), f);
        }
    }

    fn goto(&mut self, pc: usize, t: usize) {
        if t <= pc {
            // A loop: `may_goto` lets the verifier prune its states (at run time our own budget
            // is spent long before the kernel's 8M iterations).
            self.jump_reject(Insn::may_goto(0));
            self.jump_to(Insn::ja(0), t);
        } else if t != pc + 1 {
            self.jump_to(Insn::ja(0), t);
        }
    }
}
