//! Swift in the kernel: one eBPF program (XDP or SCHED_CLS) that evaluates a Swift filter kept
//! in eBPF maps, so that adding or removing a pass (an FTP data connection, a suspicious host)
//! is one or two map writes and never a program reload.
//!
//! ```no_run
//! use netsift_ebpf::ProgType;
//! use netsift_ebpf::swift::{KernelSwift, SwiftMirror};
//! use netsift_swift::ftpcap::{DataConn, Event, SwiftFtpCap};
//!
//! let mut kernel = KernelSwift::load(ProgType::Xdp, 1024)?; // maps and program, verified once
//! let mut cap = SwiftFtpCap::new(netsift_swift::open(96).0)?; // the control-channel pass
//! let mut mirror = SwiftMirror::new();
//! mirror.sync(&mut kernel, cap.writer())?;
//! let conn = DataConn { from: [10, 0, 0, 1], to: [10, 0, 0, 2], port: 50_000 };
//! cap.apply(&Event::Open(conn))?;
//! assert_eq!(mirror.sync(&mut kernel, cap.writer())?, 1); // one pass: map writes only
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Maps
//!
//! - `passes`, an array of `capacity` records of [`RECORD_SIZE`](crate::swift::RECORD_SIZE)
//!   bytes: a record is a 32-byte head (`u32` instruction count, the rest zero) and
//!   [`MAX_INSTS`](crate::swift::MAX_INSTS) Swift instructions of 32 bytes each, exactly as
//!   [`netsift_swift::Inst`] holds them (command word and seven parameters, host byte order).
//!   A count of 0 is a free slot or an empty pass: skipped.
//! - `header`, an array of one 8-byte record: `accept_all` (the filter has no pass: Swift's
//!   "a filter without passes accepts every packet") and `hwm`, the slots the program walks;
//!   the program reads it through its address (`BPF_PSEUDO_MAP_VALUE`), without a lookup.
//!
//! # The program
//!
//! It walks slots `0..hwm` in order and, in each, the instructions `0..count`; a pass whose
//! instructions all hold accepts the packet, an instruction that fails ends its pass, and a
//! read past the packet's end rejects the packet at once (Swift's *abort*). That is the order
//! and the meaning of [`netsift_swift::Reader::run`], so the kernel's verdict equals the
//! reader's on every packet, truncated ones included. The loop over passes ends in
//! `may_goto` (Linux 6.9) and its counter starts each round from a zero the verifier cannot
//! see is zero, so the verifier checks one round and stops; the loop over a pass's
//! instructions is unrolled (sixteen copies of the evaluator, each at a constant offset in the
//! record). The program is about 14,300 instructions and verifies in about 55,500 steps,
//! whatever the number of passes (eight copies: 5,600 and 17,400; twenty copies no longer
//! load and thirty-two exceed the verifier's 8,192 pending branches, hence
//! [`MAX_INSTS`](crate::swift::MAX_INSTS) = 16). Packet reads are bounds checked against
//! `data_end` at variable offsets (L1/L2/L1A addressing), each read below 64 KiB.
//!
//! # Updates
//!
//! A pass is written in place: into a slot past `hwm`, one write of the record, then one of
//! the header (the new `hwm`); into a free slot below `hwm`, the record with count 0 and then
//! the same record with its count, so that a program reading the slot concurrently sees either
//! the empty slot or the whole pass. Deleting writes the count 0 (plus the header when the
//! last slot or the last pass goes). The program's file descriptor never changes.
//!
//! NOTE: a slot freed and reused while a program is in the middle of reading it (a window of
//! nanoseconds) could show that program a mix of the two passes for one packet; Swift's own
//! epoch reclamation has no kernel equivalent reachable from user space.
//!
//! # Supported subset
//!
//! The whole Swift ISA: addressing D, L1 and L2 (IPv4 at `P[6]`) and L1A (up to two VLAN
//! tags skipped, then IPv4 and its header length or IPv6 and 40 bytes, any other EtherType
//! false); operations `Nop`, `Eq*`, `Meq*`, `Rng*`, `Set*`, `LenRng` (the packet's length:
//! `data_end - data` for XDP, `skb->len` for SCHED_CLS), `Leq`, `LeqM` (payload words, read
//! in order as the reader does), `Ip4Proto`, `Ip4ProtoNoFrag`, `Ip6Proto`, `PortEither`,
//! `HostEither`, `NetBoth`, `NetEither`, `Ip4ProtoPorts`; negation. Refused with the reason:
//! unknown opcodes, ranges with a count above 7 (a fourth pair would lie past the seven
//! parameters), and passes of more than [`MAX_INSTS`](crate::swift::MAX_INSTS) instructions.

use std::collections::{BTreeSet, HashMap};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use netsift_swift::isa::{Inst, Mode, Op};
use netsift_swift::{PassId, Writer};

use crate::asm::{Assembler, Label};
use crate::error::{Error, ErrorKind, Result};
use crate::insn::{Alu, Cond, Insn, Reg, Size, helper};
use crate::map::{Map, MapSpec, MapType, UpdateFlag};
use crate::prog::{LoadOptions, LoadedProgram, ProgType, tc_act, xdp_action};

/// Instructions per pass record: the evaluator is unrolled this many times (twenty copies
/// no longer load, thirty-two exceed the verifier's branch limit).
pub const MAX_INSTS: usize = 16;
/// Bytes of the head of a record (the instruction count).
const HEAD: usize = 32;
/// Bytes of one pass record in the `passes` map.
pub const RECORD_SIZE: usize = HEAD + 32 * MAX_INSTS;

/// Stack slots (offsets from `r10`).
mod stack {
    pub const KEY: i16 = -8;
    pub const HWM: i16 = -16;
    pub const ZERO: i16 = -24;
    pub const COUNT: i16 = -40;
    pub const LEN: i16 = -48;
    pub const I: i16 = -64;
}

/// Field offsets in `struct __sk_buff` and `struct xdp_md`.
mod ctx {
    pub const SKB_LEN: i16 = 0;
    pub const SKB_DATA: i16 = 76;
    pub const SKB_DATA_END: i16 = 80;
    pub const XDP_DATA: i16 = 0;
    pub const XDP_DATA_END: i16 = 4;
    pub const XDP_RX_QUEUE: i16 = 16;
}

const NEG: i32 = 1 << 10;
/// `BPF_PSEUDO_MAP_VALUE`: `ld_imm64` of the address of a map's value.
const PSEUDO_MAP_VALUE: u8 = 2;
const DATA: Reg = Reg::R6;
const END: Reg = Reg::R7;
const PASS: Reg = Reg::R8;
const INST: Reg = Reg::R9;
/// Offset of the command word from `INST` (which points at the record plus 32 × index).
const CMD: i16 = HEAD as i16;

/// Offset of parameter `k` from `INST`.
const fn param(k: usize) -> i16 {
    CMD + 4 + 4 * k as i16
}

/// Offset from `INST` of the 16-bit half `half` (0 low, 1 high) of parameter `k`.
const fn half(k: usize, half: usize) -> i16 {
    let low_first = cfg!(target_endian = "little");
    let at = if low_first { half } else { 1 - half };
    param(k) + 2 * at as i16
}

/// Whether the kernel program can evaluate `inst` exactly as [`netsift_swift`] does; the
/// error says why not.
pub fn check_inst(inst: &Inst) -> Result<()> {
    let refuse = |why: &str| {
        Err(Error::new(
            ErrorKind::Unsupported,
            format!("Swift instruction `{inst}` in the kernel: {why}"),
        ))
    };
    let Some(op) = inst.op() else {
        return refuse("unknown opcode");
    };
    match op {
        // Seven parameters hold three pairs: a fourth would be `P[6..8]`, past `P` (the
        // reference evaluator indexes past its array there).
        Op::Rng8 | Op::Rng16 | Op::Rng32 | Op::LenRng if inst.count() > 7 => {
            refuse("more than three ranges (seven parameters hold three pairs)")
        }
        _ => Ok(()),
    }
}

/// Whether a whole pass fits the kernel program.
pub fn check_pass(insts: &[Inst]) -> Result<()> {
    if insts.len() > MAX_INSTS {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "a Swift pass of {} instructions in the kernel: at most {MAX_INSTS}",
                insts.len()
            ),
        ));
    }
    insts.iter().try_for_each(check_inst)
}

/// A pass in the kernel (its slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelPass(pub u32);

/// A Swift filter in the kernel: the maps and the program that reads them.
#[derive(Debug)]
pub struct KernelSwift {
    prog: Arc<LoadedProgram>,
    passes: Map,
    header: Map,
    /// The passes by slot, `None` when free (what the kernel's records hold).
    slots: Vec<Option<Vec<Inst>>>,
    /// The free slots below `slots.len()` (the lowest is taken first).
    free: BTreeSet<u32>,
    live: usize,
    hwm: u32,
    writes: u64,
}

impl KernelSwift {
    /// Creates the maps (room for `capacity` passes), generates the program for `prog_type`
    /// (XDP or SCHED_CLS) and loads it. The filter starts with no pass: it accepts everything.
    pub fn load(prog_type: ProgType, capacity: u32) -> Result<KernelSwift> {
        if prog_type == ProgType::SocketFilter {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "Swift in the kernel: socket filters have no direct packet access; use XDP or \
                 SCHED_CLS",
            ));
        }
        let mut spec = MapSpec::new(MapType::Array, 4, RECORD_SIZE as u32, capacity.max(1));
        spec.name = "swift_passes".into();
        let passes = Map::create(&spec)?;
        let mut hspec = MapSpec::new(MapType::Array, 4, 8, 1);
        hspec.name = "swift_header".into();
        let header = Map::create(&hspec)?;
        let insns = program(prog_type, &passes, &header)?;
        let opts = LoadOptions {
            name: "netsift_swift".into(),
            // The verifier's statistics (`verified_insns`), for the record.
            stats: true,
            ..LoadOptions::default()
        };
        let prog = Arc::new(LoadedProgram::load(prog_type, &insns, &opts)?);
        let mut ks = KernelSwift {
            prog,
            passes,
            header,
            slots: Vec::new(),
            free: BTreeSet::new(),
            live: 0,
            hwm: 0,
            writes: 0,
        };
        ks.write_header()?;
        Ok(ks)
    }

    /// The loaded program (for test runs or attaching).
    pub fn program(&self) -> &LoadedProgram {
        &self.prog
    }

    /// The program, shared: for other threads that run or attach it while this one updates
    /// the maps.
    pub fn shared_program(&self) -> Arc<LoadedProgram> {
        self.prog.clone()
    }

    /// The program's file descriptor: the same for the program's whole life, whatever the
    /// updates.
    pub fn program_fd(&self) -> RawFd {
        self.prog.as_raw_fd()
    }

    /// Passes in the filter.
    pub fn passes(&self) -> usize {
        self.live
    }

    /// Map writes made so far (the cost of updates).
    pub fn map_writes(&self) -> u64 {
        self.writes
    }

    /// The slots the program walks (one past the highest pass).
    pub fn hwm(&self) -> u32 {
        self.hwm
    }

    /// Adds a pass in the lowest free slot (as [`Writer::new_pass`] chooses): one map write
    /// (a slot below the others' end: two), plus the header's when the walked slots grow or
    /// the filter had no pass.
    pub fn add_pass(&mut self, insts: &[Inst]) -> Result<KernelPass> {
        let slot = self
            .free
            .first()
            .copied()
            .unwrap_or(self.slots.len() as u32);
        self.set_pass(slot, insts)?;
        Ok(KernelPass(slot))
    }

    /// Writes `insts` as the pass in `slot` (creating or replacing it).
    pub fn set_pass(&mut self, slot: u32, insts: &[Inst]) -> Result<()> {
        check_pass(insts)?;
        let cap = self.passes.spec().max_entries;
        if slot >= cap {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("Swift pass slot {slot}: the map holds {cap} passes"),
            ));
        }
        let mut rec = record(insts);
        let i = slot as usize;
        if self.slots.len() <= i {
            self.free.extend(self.slots.len() as u32..slot);
            self.slots.resize(i + 1, None);
        }
        let key = slot.to_ne_bytes();
        if slot < self.hwm && !insts.is_empty() {
            // Below hwm the program may be reading the slot: first the instructions behind a
            // count of 0, then the count (the same instruction bytes written again).
            rec[..4].copy_from_slice(&0u32.to_ne_bytes());
            self.update(&key, &rec)?;
            rec[..4].copy_from_slice(&(insts.len() as u32).to_ne_bytes());
        }
        self.update(&key, &rec)?;
        if self.slots[i].is_none() {
            self.live += 1;
        }
        self.slots[i] = Some(insts.to_vec());
        self.free.remove(&slot);
        if slot >= self.hwm || self.live == 1 {
            self.hwm = self.hwm.max(slot + 1);
            self.write_header()?;
        }
        Ok(())
    }

    /// Removes a pass: one map write (plus the header's when the last slot or the last pass
    /// goes).
    pub fn del_pass(&mut self, pass: KernelPass) -> Result<()> {
        let i = pass.0 as usize;
        let Some(Some(old)) = self.slots.get(i) else {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("Swift pass slot {}: no pass there", pass.0),
            ));
        };
        // The count 0 in front of the old instructions: a program that read the count before
        // this write still reads the old pass, never zeroed instructions (which would be `Nop`s).
        let mut rec = record(old);
        rec[..4].copy_from_slice(&0u32.to_ne_bytes());
        self.update(&pass.0.to_ne_bytes(), &rec)?;
        self.slots[i] = None;
        self.free.insert(pass.0);
        self.live -= 1;
        let mut hwm = self.hwm as usize;
        while hwm > 0 && self.slots.get(hwm - 1).is_none_or(Option::is_none) {
            hwm -= 1;
        }
        if hwm as u32 != self.hwm || self.live == 0 {
            self.hwm = hwm as u32;
            self.write_header()?;
        }
        Ok(())
    }

    /// Removes every pass (the filter accepts everything again).
    pub fn clear(&mut self) -> Result<()> {
        let live: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&s| self.slots[s as usize].is_some())
            .collect();
        for s in live {
            self.del_pass(KernelPass(s))?;
        }
        Ok(())
    }

    fn update(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.writes += 1;
        self.passes.update(key, value, UpdateFlag::Any)
    }

    fn write_header(&mut self) -> Result<()> {
        let mut h = [0u8; 8];
        h[..4].copy_from_slice(&u32::from(self.live == 0).to_ne_bytes());
        h[4..].copy_from_slice(&self.hwm.to_ne_bytes());
        self.writes += 1;
        self.header.update(&0u32.to_ne_bytes(), &h, UpdateFlag::Any)
    }
}

/// The record of a pass.
fn record(insts: &[Inst]) -> Vec<u8> {
    let mut rec = vec![0u8; RECORD_SIZE];
    rec[..4].copy_from_slice(&(insts.len() as u32).to_ne_bytes());
    for (k, inst) in insts.iter().enumerate() {
        let at = HEAD + 32 * k;
        rec[at..at + 4].copy_from_slice(&inst.cmd.to_ne_bytes());
        for (q, p) in inst.p.iter().enumerate() {
            let o = at + 4 + 4 * q;
            rec[o..o + 4].copy_from_slice(&p.to_ne_bytes());
        }
    }
    rec
}

/// Keeps a [`KernelSwift`] equal to a [`Writer`]'s filter: each pass in the kernel slot of
/// the same number, so that passes run in the same order (which decides the verdict of a
/// packet that one pass accepts and an earlier one aborts on).
#[derive(Debug, Default)]
pub struct SwiftMirror {
    /// The kernel's copy of each pass, by the writer's id.
    known: HashMap<PassId, (u32, Vec<Inst>)>,
}

impl SwiftMirror {
    /// An empty mirror, for a kernel filter with no pass; from then on, change that filter
    /// only through [`SwiftMirror::sync`].
    pub fn new() -> SwiftMirror {
        SwiftMirror::default()
    }

    /// Brings the kernel filter up to date with `writer`: writes the passes that are new or
    /// changed and clears the slots of deleted ones; unchanged passes cost nothing in the
    /// kernel (the comparison is in user space). Returns the number of passes written or
    /// removed.
    pub fn sync(&mut self, kernel: &mut KernelSwift, writer: &Writer) -> Result<usize> {
        let list = writer.list();
        // Check everything first: a refused pass leaves the kernel filter as it was.
        for (_, insts) in &list {
            check_pass(insts)?;
        }
        let mut touched = 0;
        // Deletions first, so that a slot reused by the writer is free in the kernel too.
        let present: std::collections::HashSet<PassId> = list.iter().map(|(id, _)| *id).collect();
        let gone: Vec<PassId> = self
            .known
            .keys()
            .filter(|id| !present.contains(id))
            .copied()
            .collect();
        for id in gone {
            if let Some((slot, _)) = self.known.remove(&id) {
                kernel.del_pass(KernelPass(slot))?;
                touched += 1;
            }
        }
        for (id, insts) in list {
            if self
                .known
                .get(&id)
                .is_some_and(|(_, old)| same_pass(old, insts))
            {
                continue;
            }
            let slot = slot_of(id).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!("Swift pass {id:?}: cannot read its slot"),
                )
            })?;
            kernel.set_pass(slot, insts)?;
            self.known.insert(id, (slot, insts.to_vec()));
            touched += 1;
        }
        Ok(touched)
    }
}

fn same_pass(a: &[Inst], b: &[Inst]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x.cmd & !(1 << 11), x.p) == (y.cmd & !(1 << 11), y.p))
}

/// The slot of a pass id.
fn slot_of(id: PassId) -> Option<u32> {
    Some(id.slot())
}

/// Emits `dst = be(P[off + extra : size])`, jumping to `abort` when the bytes are not all in
/// the packet. Clobbers `r4` and `r5`.
fn load(a: &mut Assembler, size: Size, dst: Reg, off: Reg, extra: i32, abort: Label) {
    a.push(Insn::mov64_reg(Reg::R4, off));
    if extra != 0 {
        a.push(Insn::alu64_imm(Alu::Add, Reg::R4, extra));
    }
    // Reads ending beyond 64 KiB are past any packet direct access sees (and the verifier
    // wants the offset plus the size within its packet-offset limit).
    a.jump(
        Insn::jmp_imm(Cond::Gt, Reg::R4, 0xffff - size.bytes() as i32, 0),
        abort,
    );
    a.push(Insn::mov64_reg(Reg::R5, DATA));
    a.push(Insn::alu64_reg(Alu::Add, Reg::R5, Reg::R4));
    a.push(Insn::mov64_reg(Reg::R4, Reg::R5));
    a.push(Insn::alu64_imm(Alu::Add, Reg::R4, size.bytes() as i32));
    a.jump(Insn::jmp_reg(Cond::Gt, Reg::R4, END, 0), abort);
    a.push(Insn::load(size, dst, Reg::R5, 0));
    match size {
        Size::H => a.push(Insn::to_be(dst, 16)),
        Size::W => a.push(Insn::to_be(dst, 32)),
        _ => {}
    }
}

/// `if n == 0 goto target` (`n`, the operand count, from the command word in `r3`).
fn if_no_operands(a: &mut Assembler, target: Label) {
    a.push(Insn::mov64_reg(Reg::R4, Reg::R3));
    a.push(Insn::alu64_imm(Alu::Rsh, Reg::R4, 12));
    a.push(Insn::alu64_imm(Alu::And, Reg::R4, 0xf));
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R4, 0, 0), target);
}

/// `if mode != D goto target` (L1 and L2 keep `nl` in `P[6]`).
fn if_not_wide(a: &mut Assembler, target: Label) {
    a.push(Insn::mov64_reg(Reg::R4, Reg::R3));
    a.push(Insn::alu64_imm(Alu::Rsh, Reg::R4, 8));
    a.push(Insn::alu64_imm(Alu::And, Reg::R4, 3));
    a.jump(Insn::jmp_imm(Cond::Ne, Reg::R4, 0, 0), target);
}

/// `if r2 == P[k] goto hit` for each `k` in `lanes`.
fn any_lane(a: &mut Assembler, lanes: std::ops::Range<usize>, hit: Label) {
    for k in lanes {
        a.push(Insn::load(Size::W, Reg::R4, INST, param(k)));
        a.jump(Insn::jmp_reg(Cond::Eq, Reg::R2, Reg::R4, 0), hit);
    }
}

/// `if r2 == either 16-bit half of P[k] goto hit` for each `k` in `words`.
fn any_half(a: &mut Assembler, words: std::ops::Range<usize>, hit: Label) {
    for k in words {
        for h in 0..2 {
            a.push(Insn::load(Size::H, Reg::R4, INST, half(k, h)));
            a.jump(Insn::jmp_reg(Cond::Eq, Reg::R2, Reg::R4, 0), hit);
        }
    }
}

/// The program.
fn program(prog_type: ProgType, passes: &Map, header: &Map) -> Result<Vec<crate::Insn>> {
    let xdp = prog_type == ProgType::Xdp;
    let (accept_v, reject_v) = if xdp {
        (xdp_action::PASS, xdp_action::DROP)
    } else {
        (tc_act::OK, tc_act::SHOT)
    };
    let mut a = Assembler::new();
    let accept = a.label();
    let reject = a.label();
    let c = Reg::R6;
    a.push(Insn::mov64_reg(c, Reg::R1));
    // A 64-bit zero with no known bit: the difference of two `field << 32 | field`.
    let field = if xdp { ctx::XDP_RX_QUEUE } else { ctx::SKB_LEN };
    for r in [Reg::R1, Reg::R2] {
        a.push(Insn::load(Size::W, r, c, field));
        a.push(Insn::alu64_imm(Alu::Lsh, r, 32));
        a.push(Insn::load(Size::W, Reg::R3, c, field));
        a.push(Insn::alu64_reg(Alu::Or, r, Reg::R3));
    }
    a.push(Insn::alu64_reg(Alu::Sub, Reg::R1, Reg::R2));
    a.push(Insn::store(Size::DW, Reg::R10, stack::ZERO, Reg::R1));
    if xdp {
        a.push(Insn::load(Size::W, END, c, ctx::XDP_DATA_END));
        a.push(Insn::load(Size::W, DATA, c, ctx::XDP_DATA));
        a.push(Insn::mov64_reg(Reg::R1, END));
        a.push(Insn::alu64_reg(Alu::Sub, Reg::R1, DATA));
        a.push(Insn::mov32_reg(Reg::R1, Reg::R1));
    } else {
        // Make a non-linear socket buffer linear (as compile's prologue does).
        let (pull, done) = (a.label(), a.label());
        a.push(Insn::load(Size::W, Reg::R2, c, ctx::SKB_LEN));
        a.push(Insn::load(Size::W, Reg::R3, c, ctx::SKB_DATA));
        a.push(Insn::load(Size::W, END, c, ctx::SKB_DATA_END));
        a.jump(Insn::jmp_imm(Cond::Gt, Reg::R2, 0xffff, 0), pull);
        a.push(Insn::alu64_reg(Alu::Add, Reg::R3, Reg::R2));
        a.jump(Insn::jmp_reg(Cond::Le, Reg::R3, END, 0), done);
        a.bind(pull);
        a.push(Insn::mov64_reg(Reg::R1, c));
        a.push(Insn::call(helper::SKB_PULL_DATA));
        a.bind(done);
        a.push(Insn::load(Size::W, Reg::R1, c, ctx::SKB_LEN));
        a.push(Insn::load(Size::W, END, c, ctx::SKB_DATA_END));
        a.push(Insn::load(Size::W, DATA, c, ctx::SKB_DATA));
    }
    a.push(Insn::store(Size::DW, Reg::R10, stack::LEN, Reg::R1));
    // The header, read through its address (`BPF_PSEUDO_MAP_VALUE`: a one-entry array's value
    // needs no lookup).
    let mut value = header.ld_map(Reg::R0);
    value[0].src = PSEUDO_MAP_VALUE;
    a.extend(value);
    a.push(Insn::load(Size::W, Reg::R1, Reg::R0, 0));
    a.jump(Insn::jmp_imm(Cond::Ne, Reg::R1, 0, 0), accept);
    a.push(Insn::load(Size::W, Reg::R1, Reg::R0, 4));
    a.push(Insn::store(Size::DW, Reg::R10, stack::HWM, Reg::R1));
    a.push(Insn::mov64_imm(PASS, 0));

    // Passes.
    let pass_head = a.label();
    let next_pass = a.label();
    a.bind(pass_head);
    a.push(Insn::load(Size::DW, Reg::R1, Reg::R10, stack::ZERO));
    a.push(Insn::alu64_reg(Alu::Add, PASS, Reg::R1));
    a.push(Insn::load(Size::DW, Reg::R1, Reg::R10, stack::HWM));
    a.jump(Insn::jmp_reg(Cond::Ge, PASS, Reg::R1, 0), reject);
    a.push(Insn::store(Size::W, Reg::R10, stack::KEY, PASS));
    a.push(Insn::store(Size::DW, Reg::R10, stack::I, PASS));
    a.extend(passes.ld_map(Reg::R1));
    a.push(Insn::mov64_reg(Reg::R2, Reg::R10));
    a.push(Insn::alu64_imm(Alu::Add, Reg::R2, i32::from(stack::KEY)));
    a.push(Insn::call(helper::MAP_LOOKUP_ELEM));
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, 0, 0), next_pass);
    a.push(Insn::mov64_reg(PASS, Reg::R0));
    a.push(Insn::load(Size::W, Reg::R1, PASS, 0));
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R1, 0, 0), next_pass);
    a.push(Insn::store(Size::DW, Reg::R10, stack::COUNT, Reg::R1));

    // Instructions, unrolled: instruction k at `PASS + 32 k` (constant offsets for the
    // verifier, no loop counter to keep).
    for k in 0..MAX_INSTS {
        let next = a.label();
        a.push(Insn::load(Size::DW, Reg::R1, Reg::R10, stack::COUNT));
        a.jump(Insn::jmp_imm(Cond::Le, Reg::R1, k as i32, 0), accept);
        a.push(Insn::mov64_reg(INST, PASS));
        if k > 0 {
            a.push(Insn::alu64_imm(Alu::Add, INST, 32 * k as i32));
        }
        let (t, f) = (a.label(), a.label());
        eval(&mut a, t, f, reject);
        // Results, with negation.
        a.bind(t);
        a.jump(Insn::jmp_imm(Cond::Set, Reg::R3, NEG, 0), next_pass);
        a.jump(Insn::ja(0), next);
        a.bind(f);
        a.push(Insn::alu64_imm(Alu::And, Reg::R3, NEG));
        a.jump(Insn::jmp_imm(Cond::Eq, Reg::R3, 0, 0), next_pass);
        a.bind(next);
    }
    a.jump(Insn::ja(0), accept);

    a.bind(next_pass);
    a.push(Insn::load(Size::DW, PASS, Reg::R10, stack::I));
    a.push(Insn::alu64_imm(Alu::Add, PASS, 1));
    a.jump(Insn::may_goto(0), reject);
    a.jump(Insn::ja(0), pass_head);

    a.bind(accept);
    a.push(Insn::mov64_imm(Reg::R0, accept_v as i32));
    a.push(Insn::exit());
    a.bind(reject);
    a.push(Insn::mov64_imm(Reg::R0, reject_v as i32));
    a.push(Insn::exit());
    a.finish()
}

/// Jumps to the label of the opcode in `r0` among `ops` (sorted by opcode), or to `none`.
fn dispatch(a: &mut Assembler, ops: &[(i32, Label)], none: Label) {
    if ops.len() <= 2 {
        for &(v, l) in ops {
            a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, v, 0), l);
        }
        a.jump(Insn::ja(0), none);
        return;
    }
    let mid = ops.len() / 2;
    let upper = a.label();
    a.jump(Insn::jmp_imm(Cond::Ge, Reg::R0, ops[mid].0, 0), upper);
    dispatch(a, &ops[..mid], none);
    a.bind(upper);
    dispatch(a, &ops[mid..], none);
}

/// One instruction at `INST`: jumps to `t` or `f` (before negation) with the command word in
/// `r3`, or to `abort`.
fn eval(a: &mut Assembler, t: Label, f: Label, abort: Label) {
    let op = |o: Op| o as u8 as i32;
    a.push(Insn::load(Size::W, Reg::R3, INST, CMD));
    a.push(Insn::mov64_reg(Reg::R0, Reg::R3));
    a.push(Insn::alu64_imm(Alu::And, Reg::R0, 0xff));
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, op(Op::Nop), 0), t);
    let lenrng = a.label();
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, op(Op::LenRng), 0), lenrng);

    // The base: r1 = offset (+ L1 or L2 start).
    let based = a.label();
    a.push(Insn::mov64_reg(Reg::R1, Reg::R3));
    a.push(Insn::alu64_imm(Alu::Rsh, Reg::R1, 16));
    a.push(Insn::mov64_reg(Reg::R4, Reg::R3));
    a.push(Insn::alu64_imm(Alu::Rsh, Reg::R4, 8));
    a.push(Insn::alu64_imm(Alu::And, Reg::R4, 3));
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R4, Mode::D as i32, 0), based);
    let (l1a, ip4) = (a.label(), a.label());
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R4, Mode::L1A as i32, 0), l1a);
    a.push(Insn::load(Size::W, Reg::R2, INST, param(6)));
    load(a, Size::B, Reg::R0, Reg::R2, 0, abort);
    a.push(Insn::alu64_imm(Alu::And, Reg::R0, 0xf));
    a.push(Insn::alu64_imm(Alu::Lsh, Reg::R0, 2));
    a.push(Insn::alu64_reg(Alu::Add, Reg::R2, Reg::R0));
    let l1 = a.label();
    a.push(Insn::mov64_reg(Reg::R4, Reg::R3));
    a.push(Insn::alu64_imm(Alu::Rsh, Reg::R4, 8));
    a.push(Insn::alu64_imm(Alu::And, Reg::R4, 3));
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R4, Mode::L1 as i32, 0), l1);
    load(a, Size::B, Reg::R0, Reg::R2, 12, abort);
    a.push(Insn::alu64_imm(Alu::Rsh, Reg::R0, 4));
    a.push(Insn::alu64_imm(Alu::Lsh, Reg::R0, 2));
    a.push(Insn::alu64_reg(Alu::Add, Reg::R2, Reg::R0));
    a.jump(Insn::ja(0), l1);
    // L1A: the EtherType after up to two VLAN tags (802.1Q, 802.1ad, the old QinQ 0x9100;
    // a third tag is an EtherType like any other: false), then IPv4 (its header length) or
    // IPv6 (40 bytes, no read); any other EtherType is false. `r2` walks the tags.
    a.bind(l1a);
    {
        let have = a.label();
        a.push(Insn::mov64_imm(Reg::R2, 12));
        for _ in 0..2 {
            let tag = a.label();
            load(a, Size::H, Reg::R0, Reg::R2, 0, abort);
            for t in [0x8100, 0x88a8, 0x9100] {
                a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, t, 0), tag);
            }
            a.jump(Insn::ja(0), have);
            a.bind(tag);
            a.push(Insn::alu64_imm(Alu::Add, Reg::R2, 4));
        }
        load(a, Size::H, Reg::R0, Reg::R2, 0, abort);
        a.bind(have);
        a.push(Insn::alu64_imm(Alu::Add, Reg::R2, 2));
        a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, 0x0800, 0), ip4);
        a.jump(Insn::jmp_imm(Cond::Ne, Reg::R0, 0x86dd, 0), f);
        a.push(Insn::alu64_imm(Alu::Add, Reg::R2, 40));
        a.jump(Insn::ja(0), l1);
        a.bind(ip4);
        load(a, Size::B, Reg::R0, Reg::R2, 0, abort);
        a.push(Insn::alu64_imm(Alu::And, Reg::R0, 0xf));
        a.push(Insn::alu64_imm(Alu::Lsh, Reg::R0, 2));
        a.push(Insn::alu64_reg(Alu::Add, Reg::R2, Reg::R0));
    }
    a.bind(l1);
    a.push(Insn::alu64_reg(Alu::Add, Reg::R1, Reg::R2));
    a.bind(based);
    // The opcode again (the base clobbered r0).
    a.push(Insn::mov64_reg(Reg::R0, Reg::R3));
    a.push(Insn::alu64_imm(Alu::And, Reg::R0, 0xff));

    // Dispatch, the power instructions first.
    let families: [(Op, Label); 22] = [
        (Op::HostEither, a.label()),
        (Op::Ip4ProtoPorts, a.label()),
        (Op::Eq16, a.label()),
        (Op::Eq8, a.label()),
        (Op::Eq32, a.label()),
        (Op::Ip4ProtoNoFrag, a.label()),
        (Op::Ip4Proto, a.label()),
        (Op::PortEither, a.label()),
        (Op::Meq8, a.label()),
        (Op::Meq16, a.label()),
        (Op::Meq32, a.label()),
        (Op::Rng8, a.label()),
        (Op::Rng16, a.label()),
        (Op::Rng32, a.label()),
        (Op::Set8, a.label()),
        (Op::Set16, a.label()),
        (Op::Set32, a.label()),
        (Op::NetBoth, a.label()),
        (Op::NetEither, a.label()),
        (Op::Ip6Proto, a.label()),
        (Op::Leq, a.label()),
        (Op::LeqM, a.label()),
    ];
    // The two power instructions of FTPCap's passes first, then a binary search over the
    // rest (at most five comparisons, where a chain would take up to eighteen).
    for &(o, l) in &families[..2] {
        a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, op(o), 0), l);
    }
    let mut rest: Vec<(i32, Label)> = families[2..].iter().map(|&(o, l)| (op(o), l)).collect();
    rest.sort_by_key(|&(v, _)| v);
    // Unknown opcodes (never written: `check_inst` refuses them) end at `f`.
    dispatch(a, &rest, f);
    let label = |o: Op| families.iter().find(|(x, _)| *x == o).map(|(_, l)| *l);
    let size_of = |o: Op| match o {
        Op::Eq8 | Op::Meq8 | Op::Rng8 | Op::Set8 => Size::B,
        Op::Eq16 | Op::Meq16 | Op::Rng16 | Op::Set16 => Size::H,
        _ => Size::W,
    };

    // Eq: any lane (seven in D mode, six in L1/L2).
    let eq = a.label();
    for o in [Op::Eq8, Op::Eq16, Op::Eq32] {
        a.bind(label(o).expect("dispatched"));
        load(a, size_of(o), Reg::R2, Reg::R1, 0, abort);
        a.jump(Insn::ja(0), eq);
    }
    a.bind(eq);
    if_no_operands(a, f);
    any_lane(a, 0..6, t);
    if_not_wide(a, f);
    any_lane(a, 6..7, t);
    a.jump(Insn::ja(0), f);

    // Meq: masked by P[0], values P[1..].
    let meq = a.label();
    for o in [Op::Meq8, Op::Meq16, Op::Meq32] {
        a.bind(label(o).expect("dispatched"));
        load(a, size_of(o), Reg::R2, Reg::R1, 0, abort);
        a.jump(Insn::ja(0), meq);
    }
    a.bind(meq);
    a.push(Insn::load(Size::W, Reg::R4, INST, param(0)));
    a.push(Insn::alu64_reg(Alu::And, Reg::R2, Reg::R4));
    if_no_operands(a, f);
    any_lane(a, 1..6, t);
    if_not_wide(a, f);
    any_lane(a, 6..7, t);
    a.jump(Insn::ja(0), f);

    // Rng and LenRng: n / 2 pairs [P[2i], P[2i+1]].
    let rng = a.label();
    for o in [Op::Rng8, Op::Rng16, Op::Rng32] {
        a.bind(label(o).expect("dispatched"));
        load(a, size_of(o), Reg::R2, Reg::R1, 0, abort);
        a.jump(Insn::ja(0), rng);
    }
    a.bind(lenrng);
    a.push(Insn::load(Size::DW, Reg::R2, Reg::R10, stack::LEN));
    a.bind(rng);
    a.push(Insn::mov64_reg(Reg::R5, Reg::R3));
    a.push(Insn::alu64_imm(Alu::Rsh, Reg::R5, 13));
    a.push(Insn::alu64_imm(Alu::And, Reg::R5, 7));
    for i in 0..3 {
        let next = a.label();
        a.jump(Insn::jmp_imm(Cond::Le, Reg::R5, i as i32, 0), f);
        a.push(Insn::load(Size::W, Reg::R4, INST, param(2 * i)));
        a.jump(Insn::jmp_reg(Cond::Gt, Reg::R4, Reg::R2, 0), next);
        a.push(Insn::load(Size::W, Reg::R4, INST, param(2 * i + 1)));
        a.jump(Insn::jmp_reg(Cond::Le, Reg::R2, Reg::R4, 0), t);
        a.bind(next);
    }
    a.jump(Insn::ja(0), f);

    // Set: any bit of P[0].
    let set = a.label();
    for o in [Op::Set8, Op::Set16, Op::Set32] {
        a.bind(label(o).expect("dispatched"));
        load(a, size_of(o), Reg::R2, Reg::R1, 0, abort);
        a.jump(Insn::ja(0), set);
    }
    a.bind(set);
    a.push(Insn::load(Size::W, Reg::R4, INST, param(0)));
    a.jump(Insn::jmp_reg(Cond::Set, Reg::R2, Reg::R4, 0), t);
    a.jump(Insn::ja(0), f);

    // Ip4Proto, Ip4ProtoNoFrag: EtherType at -2, protocol in seven lanes, then the fragment.
    let proto_ok = a.label();
    a.bind(label(Op::Ip4Proto).expect("dispatched"));
    a.bind(label(Op::Ip4ProtoNoFrag).expect("dispatched"));
    load(a, Size::H, Reg::R2, Reg::R1, -2, abort);
    a.jump(Insn::jmp_imm(Cond::Ne, Reg::R2, 0x0800, 0), f);
    load(a, Size::B, Reg::R2, Reg::R1, 9, abort);
    if_no_operands(a, f);
    any_lane(a, 0..7, proto_ok);
    a.jump(Insn::ja(0), f);
    a.bind(proto_ok);
    a.jump(
        Insn::jmp_imm(Cond::Ne, Reg::R0, op(Op::Ip4ProtoNoFrag), 0),
        t,
    );
    load(a, Size::H, Reg::R2, Reg::R1, 6, abort);
    a.jump(Insn::jmp_imm(Cond::Set, Reg::R2, 0x1fff, 0), f);
    a.jump(Insn::ja(0), t);

    // Ip6Proto.
    a.bind(label(Op::Ip6Proto).expect("dispatched"));
    load(a, Size::H, Reg::R2, Reg::R1, -2, abort);
    a.jump(Insn::jmp_imm(Cond::Ne, Reg::R2, 0x86dd, 0), f);
    load(a, Size::B, Reg::R2, Reg::R1, 6, abort);
    if_no_operands(a, f);
    any_lane(a, 0..7, t);
    a.jump(Insn::ja(0), f);

    // PortEither: source then destination, two ports per parameter.
    a.bind(label(Op::PortEither).expect("dispatched"));
    {
        let dst = a.label();
        let narrow = a.label();
        load(a, Size::H, Reg::R2, Reg::R1, 0, abort);
        if_no_operands(a, dst);
        any_half(a, 0..6, t);
        if_not_wide(a, dst);
        any_half(a, 6..7, t);
        a.bind(dst);
        load(a, Size::H, Reg::R2, Reg::R1, 2, abort);
        if_no_operands(a, f);
        any_half(a, 0..6, t);
        if_not_wide(a, narrow);
        any_half(a, 6..7, t);
        a.bind(narrow);
        a.jump(Insn::ja(0), f);
    }

    // Ip4ProtoPorts: IPv4, protocol P[0], not a later fragment, a port in P[1..7].
    a.bind(label(Op::Ip4ProtoPorts).expect("dispatched"));
    {
        let dst = a.label();
        load(a, Size::H, Reg::R2, Reg::R1, -2, abort);
        a.jump(Insn::jmp_imm(Cond::Ne, Reg::R2, 0x0800, 0), f);
        load(a, Size::B, Reg::R2, Reg::R1, 9, abort);
        a.push(Insn::load(Size::W, Reg::R4, INST, param(0)));
        a.jump(Insn::jmp_reg(Cond::Ne, Reg::R2, Reg::R4, 0), f);
        load(a, Size::H, Reg::R2, Reg::R1, 6, abort);
        a.jump(Insn::jmp_imm(Cond::Set, Reg::R2, 0x1fff, 0), f);
        load(a, Size::B, Reg::R2, Reg::R1, 0, abort);
        a.push(Insn::alu64_imm(Alu::And, Reg::R2, 0xf));
        a.push(Insn::alu64_imm(Alu::Lsh, Reg::R2, 2));
        a.push(Insn::alu64_reg(Alu::Add, Reg::R1, Reg::R2));
        load(a, Size::H, Reg::R2, Reg::R1, 0, abort);
        if_no_operands(a, dst);
        any_half(a, 1..7, t);
        a.bind(dst);
        load(a, Size::H, Reg::R2, Reg::R1, 2, abort);
        if_no_operands(a, f);
        any_half(a, 1..7, t);
        a.jump(Insn::ja(0), f);
    }

    // Leq: min(n, 7) words equal to P[0..], read in order (a mismatch before an unreadable
    // word is false, an unreadable word before any mismatch aborts).
    a.bind(label(Op::Leq).expect("dispatched"));
    a.push(Insn::mov64_reg(Reg::R0, Reg::R3));
    a.push(Insn::alu64_imm(Alu::Rsh, Reg::R0, 12));
    a.push(Insn::alu64_imm(Alu::And, Reg::R0, 0xf));
    for i in 0..7 {
        a.jump(Insn::jmp_imm(Cond::Le, Reg::R0, i, 0), t);
        load(a, Size::W, Reg::R2, Reg::R1, 4 * i, abort);
        a.push(Insn::load(Size::W, Reg::R4, INST, param(i as usize)));
        a.jump(Insn::jmp_reg(Cond::Ne, Reg::R2, Reg::R4, 0), f);
    }
    a.jump(Insn::ja(0), t);

    // LeqM: min(n / 2, 3) words, word i masked by P[2i] equal to P[2i+1], in order.
    a.bind(label(Op::LeqM).expect("dispatched"));
    a.push(Insn::mov64_reg(Reg::R0, Reg::R3));
    a.push(Insn::alu64_imm(Alu::Rsh, Reg::R0, 13));
    a.push(Insn::alu64_imm(Alu::And, Reg::R0, 7));
    for i in 0..3 {
        a.jump(Insn::jmp_imm(Cond::Le, Reg::R0, i, 0), t);
        load(a, Size::W, Reg::R2, Reg::R1, 4 * i, abort);
        a.push(Insn::load(Size::W, Reg::R4, INST, param(2 * i as usize)));
        a.push(Insn::alu64_reg(Alu::And, Reg::R2, Reg::R4));
        a.push(Insn::load(
            Size::W,
            Reg::R4,
            INST,
            param(2 * i as usize + 1),
        ));
        a.jump(Insn::jmp_reg(Cond::Ne, Reg::R2, Reg::R4, 0), f);
    }
    a.jump(Insn::ja(0), t);

    // HostEither: source then destination, seven lanes.
    a.bind(label(Op::HostEither).expect("dispatched"));
    {
        let dst = a.label();
        load(a, Size::W, Reg::R2, Reg::R1, 0, abort);
        if_no_operands(a, dst);
        any_lane(a, 0..7, t);
        a.bind(dst);
        load(a, Size::W, Reg::R2, Reg::R1, 4, abort);
        if_no_operands(a, f);
        any_lane(a, 0..7, t);
        a.jump(Insn::ja(0), f);
    }

    // NetBoth: src & P[0] == P[1] and dst & P[2] == P[3].
    a.bind(label(Op::NetBoth).expect("dispatched"));
    load(a, Size::W, Reg::R2, Reg::R1, 0, abort);
    a.push(Insn::load(Size::W, Reg::R4, INST, param(0)));
    a.push(Insn::alu64_reg(Alu::And, Reg::R2, Reg::R4));
    a.push(Insn::load(Size::W, Reg::R4, INST, param(1)));
    a.jump(Insn::jmp_reg(Cond::Ne, Reg::R2, Reg::R4, 0), f);
    load(a, Size::W, Reg::R2, Reg::R1, 4, abort);
    a.push(Insn::load(Size::W, Reg::R4, INST, param(2)));
    a.push(Insn::alu64_reg(Alu::And, Reg::R2, Reg::R4));
    a.push(Insn::load(Size::W, Reg::R4, INST, param(3)));
    a.jump(Insn::jmp_reg(Cond::Eq, Reg::R2, Reg::R4, 0), t);
    a.jump(Insn::ja(0), f);

    // NetEither: src or dst & P[0] == P[1].
    a.bind(label(Op::NetEither).expect("dispatched"));
    for extra in [0, 4] {
        load(a, Size::W, Reg::R2, Reg::R1, extra, abort);
        a.push(Insn::load(Size::W, Reg::R4, INST, param(0)));
        a.push(Insn::alu64_reg(Alu::And, Reg::R2, Reg::R4));
        a.push(Insn::load(Size::W, Reg::R4, INST, param(1)));
        a.jump(Insn::jmp_reg(Cond::Eq, Reg::R2, Reg::R4, 0), t);
    }
    a.jump(Insn::ja(0), f);
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsift_swift::build;

    #[test]
    fn refusals_say_why() {
        // Payload words and L1A addressing are in the kernel's subset.
        assert!(check_inst(&build::tcp_payload(&[0x4745_5420])).is_ok());
        assert!(check_inst(&build::any_port(&[21])).is_ok());
        let unknown = Inst {
            cmd: 0xee,
            p: [0; 7],
        };
        let e = check_inst(&unknown).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(e.to_string().contains("unknown opcode"), "{e}");
        let rng = Inst::new(Op::Rng16, Mode::D, 36).with_count(8);
        assert!(check_inst(&rng).unwrap_err().to_string().contains("three"));
        let long = vec![build::ip4_proto(&[6]); MAX_INSTS + 1];
        assert!(
            check_pass(&long)
                .unwrap_err()
                .to_string()
                .contains("at most")
        );
        assert!(
            check_pass(
                &netsift_swift::ftpcap::DataConn {
                    from: [1, 2, 3, 4],
                    to: [5, 6, 7, 8],
                    port: 2000,
                }
                .pass()
            )
            .is_ok()
        );
    }

    #[test]
    fn records_hold_the_instructions_in_host_order() {
        let i = build::tcp_udp_port(&[21, 20]);
        let r = record(&[i]);
        assert_eq!(r.len(), RECORD_SIZE);
        assert_eq!(&r[..4], &1u32.to_ne_bytes());
        assert_eq!(&r[32..36], &i.cmd.to_ne_bytes());
        assert_eq!(&r[60..64], &i.p[6].to_ne_bytes());
        // The port halves where the program reads them.
        let lo = usize::from(half(0, 0) as u16) - usize::from(CMD as u16) + 32;
        assert_eq!(u16::from_ne_bytes([r[lo], r[lo + 1]]), 21);
    }

    #[test]
    fn pass_ids_give_their_slot() {
        let (mut w, _r) = netsift_swift::open(96);
        let a = w.new_pass(&[build::ip4_proto(&[6])]).unwrap();
        let b = w.new_pass(&[build::ip4_proto(&[17])]).unwrap();
        assert_eq!((slot_of(a), slot_of(b)), (Some(0), Some(1)));
        w.del_pass(a).unwrap();
        let c = w.new_pass(&[build::ip4_proto(&[1])]).unwrap();
        assert_eq!(slot_of(c), Some(0));
    }
}
