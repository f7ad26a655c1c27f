//! Filters of passes, updated in place while another thread filters.
//!
//! A filter is an ordered list of *passes* (slots); a pass is an AND of instructions and the
//! passes are ORed (disjunctive normal form). A filter with no pass accepts every packet (the
//! paper's filter 1); a pass with no instruction accepts nothing (a pass under construction).
//!
//! # Concurrency
//!
//! One [`Writer`] changes the filter; any number of [`Reader`]s (one per filtering thread) run
//! it. Each pass version is immutable once published: a change builds the new version of the
//! one pass it touches (O(M) for a pass of M instructions) and publishes it with one atomic
//! pointer store; readers load each slot's pointer once per packet, so they see every pass
//! either before or after a change, never half-written. Old versions are freed by epoch-based
//! reclamation (`crossbeam-epoch`) once no reader can hold them. Neither side ever blocks the
//! other, and nothing an update does depends on the number N of passes: slots are chunks of
//! atomic pointers allocated as the filter grows, found by index.
//!
//! # Hierarchical execution
//!
//! [`Writer::dup_pass`] copies a pass into a new slot after it and marks every instruction
//! "copied"; changing an instruction of the copy clears its mark. When a reader evaluates a
//! child whose parent it evaluated for the same packet (parents come first), a copied
//! instruction that held in the parent is skipped and one that failed fails the child at once.
//! Each pass version carries a version number, and a child records its parent's: a result is
//! reused only from the very version the child was copied from, so a stale mark can never give
//! a wrong answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned, Shared};

use crate::exec::Exec;
use crate::isa::{Inst, Outcome};

/// Passes per chunk of slots.
const CHUNK: usize = 1024;
/// Chunks (so at most 1,048,576 passes).
const MAX_CHUNKS: usize = 1024;

/// One published version of a pass.
pub(crate) struct Pass {
    /// The instructions, decoded for execution.
    exec: Box<[Exec]>,
    /// The same with runs fused (see `exec::fuse`), for passes outside any hierarchy.
    fused: Box<[Exec]>,
    /// The parent's slot and the version of it this pass was copied from.
    parent: Option<(u32, u64)>,
    version: u64,
    /// Whether some pass was copied from this one (its results are worth recording).
    has_children: bool,
    /// When the first instruction is `ip src or dst host H` for one address H (plain, at the
    /// IPv4 addresses of an untagged Ethernet frame): H. Readers index such passes by H, so a
    /// packet runs only the passes of its own addresses (see [`Reader::run`]).
    key: Option<u32>,
}

struct Chunk {
    slots: [Atomic<Pass>; CHUNK],
}

/// The state shared between the writer and the readers.
struct Shared_ {
    chunks: [AtomicPtr<Chunk>; MAX_CHUNKS],
    /// Slots in use: every pass is below this index.
    hwm: AtomicUsize,
    /// Passes published.
    live: AtomicUsize,
    /// Bumped after every publication: readers rebuild their list of passes when it moves.
    changes: AtomicU64,
    snaplen: u32,
}

impl Drop for Shared_ {
    fn drop(&mut self) {
        // No reader or writer is left: free every pass and chunk.
        // SAFETY: unprotected is sound when no other thread can access the structure, which
        // holds in `drop` of the last `Arc`.
        let guard = unsafe { epoch::unprotected() };
        for c in &self.chunks {
            let p = c.load(Ordering::Relaxed);
            if p.is_null() {
                continue;
            }
            // SAFETY: chunks were created by `Box::into_raw` and are freed once, here.
            let chunk = unsafe { Box::from_raw(p) };
            for s in &chunk.slots {
                let pass = s.swap(Shared::null(), Ordering::Relaxed, guard);
                if !pass.is_null() {
                    // SAFETY: the pass is unreachable from anywhere else now.
                    drop(unsafe { pass.into_owned() });
                }
            }
        }
    }
}

impl Shared_ {
    fn slot<'g>(&self, i: usize, guard: &'g Guard) -> Shared<'g, Pass> {
        let c = self.chunks[i / CHUNK].load(Ordering::Acquire);
        if c.is_null() {
            return Shared::null();
        }
        // SAFETY: a published chunk is never freed before the shared state itself.
        unsafe { &*c }.slots[i % CHUNK].load(Ordering::Acquire, guard)
    }
}

/// Identifies a pass for the writer (slot and generation, so a stale id is refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PassId {
    slot: u32,
    generation: u32,
}

impl PassId {
    /// The pass's slot: its position in the filter's evaluation order (slots are reused after
    /// a delete, the lowest free first). Engines that mirror a filter elsewhere (the kernel's
    /// Swift in `netsift-ebpf`) keep passes at the same slots.
    pub fn slot(self) -> u32 {
        self.slot
    }
}

/// Why an update was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdateError {
    /// The pass was deleted (or never existed).
    NoSuchPass,
    /// The instruction index is past the end of the pass (plus one, to append).
    NoSuchInstruction(usize),
    /// The instruction has no free operand lane ([`crate::isa::Full`]).
    Full,
    /// The operand is not in the instruction.
    NoSuchParam(u32),
    /// The filter holds the maximum number of passes.
    TooManyPasses,
}

impl std::fmt::Display for UpdateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdateError::NoSuchPass => f.write_str("no such pass (it was deleted)"),
            UpdateError::NoSuchInstruction(i) => write!(f, "no instruction {i} in the pass"),
            UpdateError::Full => f.write_str("the instruction has no free operand"),
            UpdateError::NoSuchParam(v) => write!(f, "operand {v:#x} is not in the instruction"),
            UpdateError::TooManyPasses => {
                write!(f, "the filter holds {} passes already", CHUNK * MAX_CHUNKS)
            }
        }
    }
}

impl std::error::Error for UpdateError {}

/// The writer's view of a pass.
#[derive(Clone)]
struct Meta {
    insts: Vec<Inst>,
    parent: Option<(u32, u64)>,
    /// Slots copied from this pass (a set: removing one is O(1) however many there are).
    children: std::collections::HashSet<u32>,
    version: u64,
}

/// The writer's view of a slot.
#[derive(Clone, Default)]
struct Slot {
    generation: u32,
    meta: Option<Meta>,
}

static VERSIONS: AtomicU64 = AtomicU64::new(1);

fn next_version() -> u64 {
    VERSIONS.fetch_add(1, Ordering::Relaxed)
}

/// Opens an empty filter (which accepts every packet) returning `snaplen` for accepted
/// packets; the paper's `SPF_Open`.
pub fn open(snaplen: u32) -> (Writer, Reader) {
    let shared = Arc::new(Shared_ {
        chunks: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
        hwm: AtomicUsize::new(0),
        live: AtomicUsize::new(0),
        changes: AtomicU64::new(0),
        snaplen,
    });
    let w = Writer {
        shared,
        slots: Vec::new(),
        free: Vec::new(),
    };
    let r = w.reader();
    (w, r)
}

/// Changes a filter (one per filter; it is `Send` but not `Sync`).
pub struct Writer {
    shared: Arc<Shared_>,
    slots: Vec<Slot>,
    /// Free slots (deleted passes).
    free: Vec<u32>,
}

impl Writer {
    /// A new reader of this filter (one per filtering thread).
    pub fn reader(&self) -> Reader {
        Reader {
            shared: self.shared.clone(),
            results: Vec::new(),
            stamp: 0,
            hierarchical: true,
            list: Vec::new(),
            seen: u64::MAX,
            accept_all: true,
            plain: true,
            fusion: true,
            flat: Vec::new(),
            ends: Vec::new(),
            index: PassIndex::default(),
            index_seen: u64::MAX,
        }
    }

    /// Number of passes.
    pub fn passes(&self) -> usize {
        self.shared.live.load(Ordering::Relaxed)
    }

    /// The snap length returned for accepted packets.
    pub fn snaplen(&self) -> u32 {
        self.shared.snaplen
    }

    /// The instructions of a pass.
    pub fn pass(&self, id: PassId) -> Result<&[Inst], UpdateError> {
        Ok(&self.meta(id)?.insts)
    }

    /// The passes in evaluation order, with their ids.
    pub fn list(&self) -> Vec<(PassId, &[Inst])> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(slot, s)| {
                s.meta.as_ref().map(|m| {
                    (
                        PassId {
                            slot: slot as u32,
                            generation: s.generation,
                        },
                        m.insts.as_slice(),
                    )
                })
            })
            .collect()
    }

    fn meta(&self, id: PassId) -> Result<&Meta, UpdateError> {
        match self.slots.get(id.slot as usize) {
            Some(Slot {
                generation,
                meta: Some(m),
            }) if *generation == id.generation => Ok(m),
            _ => Err(UpdateError::NoSuchPass),
        }
    }

    fn meta_mut(&mut self, id: PassId) -> Result<&mut Meta, UpdateError> {
        match self.slots.get_mut(id.slot as usize) {
            Some(Slot {
                generation,
                meta: Some(m),
            }) if *generation == id.generation => Ok(m),
            _ => Err(UpdateError::NoSuchPass),
        }
    }

    fn alloc_slot(&mut self, above: Option<u32>) -> Result<u32, UpdateError> {
        // Lowest free slot (above the parent for a copy, so that the parent comes first).
        let pick = self
            .free
            .iter()
            .enumerate()
            .filter(|&(_, &s)| above.is_none_or(|a| s > a))
            .min_by_key(|&(_, &s)| s)
            .map(|(i, _)| i);
        if let Some(i) = pick {
            return Ok(self.free.swap_remove(i));
        }
        let slot = self.slots.len();
        if slot >= CHUNK * MAX_CHUNKS {
            return Err(UpdateError::TooManyPasses);
        }
        if slot % CHUNK == 0 {
            let chunk = Box::new(Chunk {
                slots: std::array::from_fn(|_| Atomic::null()),
            });
            self.shared.chunks[slot / CHUNK].store(Box::into_raw(chunk), Ordering::Release);
        }
        self.slots.push(Slot::default());
        Ok(slot as u32)
    }

    /// Publishes the writer's current state of `slot` (one atomic store), and keeps the
    /// readers' bounds up to date.
    fn publish(&mut self, slot: u32) {
        let guard = epoch::pin();
        let new = self.slots[slot as usize].meta.as_ref().map(|m| {
            let exec: Vec<Exec> = m.insts.iter().map(Exec::new).collect();
            let key = m
                .insts
                .first()
                .filter(|i| {
                    i.op() == Some(crate::isa::Op::HostEither)
                        && i.mode() == crate::isa::Mode::D
                        && i.offset() == KEY_OFFSET as u16
                        && !i.negated()
                        && i.count() == 1
                })
                .map(|i| i.p[crate::isa::Op::HostEither.first_value_param()]);
            Owned::new(Pass {
                fused: crate::exec::fuse(&exec).into_boxed_slice(),
                exec: exec.into_boxed_slice(),
                parent: m.parent,
                version: m.version,
                has_children: !m.children.is_empty(),
                key,
            })
        });
        let c = self.shared.chunks[slot as usize / CHUNK].load(Ordering::Acquire);
        // SAFETY: the chunk of an allocated slot is published and lives as long as `shared`.
        let cell = &unsafe { &*c }.slots[slot as usize % CHUNK];
        // `changes` is odd while a publication is under way (a sequence lock for the readers'
        // indexed path, which must see the filter of one moment; see `Reader::run`).
        self.shared.changes.fetch_add(1, Ordering::SeqCst);
        let old = match new {
            Some(n) => cell.swap(n, Ordering::SeqCst, &guard),
            None => cell.swap(Shared::null(), Ordering::SeqCst, &guard),
        };
        self.shared.changes.fetch_add(1, Ordering::SeqCst);
        if !old.is_null() {
            // SAFETY: `old` is unreachable for new readers; current readers hold a guard, and
            // the destruction waits for them to leave it.
            unsafe { guard.defer_destroy(old) };
        }
    }

    fn set_bounds(&mut self) {
        // Shrink past deleted passes at the end (amortised O(1) per deletion).
        let mut hwm = self
            .shared
            .hwm
            .load(Ordering::Relaxed)
            .max(self.slots.len());
        while hwm > 0 && self.slots[hwm - 1].meta.is_none() {
            hwm -= 1;
        }
        self.shared.hwm.store(hwm, Ordering::Release);
    }

    /// Creates a pass with these instructions in the lowest free slot (or at the end); an
    /// empty pass accepts nothing until it has instructions. `SPF_NewPass`.
    pub fn new_pass(&mut self, insts: &[Inst]) -> Result<PassId, UpdateError> {
        let slot = self.alloc_slot(None)?;
        let mut insts = insts.to_vec();
        for i in &mut insts {
            i.set_copied(false);
        }
        self.slots[slot as usize].meta = Some(Meta {
            insts,
            parent: None,
            children: Default::default(),
            version: next_version(),
        });
        self.publish(slot);
        self.set_bounds();
        self.shared.live.fetch_add(1, Ordering::Relaxed);
        Ok(PassId {
            slot,
            generation: self.slots[slot as usize].generation,
        })
    }

    /// Removes a pass (its copies keep working, without the shortcut). `SPF_DelPass`.
    pub fn del_pass(&mut self, id: PassId) -> Result<(), UpdateError> {
        if let Some((p, _)) = self.meta(id)?.parent
            && let Some(Slot { meta: Some(pm), .. }) = self.slots.get_mut(p as usize)
        {
            pm.children.remove(&id.slot);
        }
        let s = &mut self.slots[id.slot as usize];
        s.meta = None;
        s.generation = s.generation.wrapping_add(1);
        self.publish(id.slot);
        self.free.push(id.slot);
        self.set_bounds();
        self.shared.live.fetch_sub(1, Ordering::Relaxed);
        Ok(())
    }

    /// Copies a pass into a new slot after it, every instruction marked "copied", and makes it
    /// a child of the original for hierarchical execution. `SPF_DupPass`.
    pub fn dup_pass(&mut self, id: PassId) -> Result<PassId, UpdateError> {
        // Every instruction equals the parent's, so every one is marked copied.
        let insts = self.meta(id)?.insts.clone();
        self.child_pass(id, &insts)
    }

    /// Creates a copy of pass `parent` whose instructions are `insts`: those equal to the
    /// parent's at the same index keep the "copied" mark (hierarchical execution). The same as
    /// [`Writer::dup_pass`] followed by [`Writer::select_op`] on the differing instructions,
    /// published once.
    pub fn child_pass(&mut self, parent: PassId, insts: &[Inst]) -> Result<PassId, UpdateError> {
        let mut insts = insts.to_vec();
        let (parent_version, had_children) = {
            let pm = self.meta(parent)?;
            for (k, i) in insts.iter_mut().enumerate() {
                let same = pm
                    .insts
                    .get(k)
                    .is_some_and(|p| p.identity() == i.identity());
                i.set_copied(same);
            }
            (pm.version, !pm.children.is_empty())
        };
        let slot = self.alloc_slot(Some(parent.slot))?;
        self.slots[slot as usize].meta = Some(Meta {
            insts,
            parent: Some((parent.slot, parent_version)),
            children: Default::default(),
            version: next_version(),
        });
        self.meta_mut(parent)?.children.insert(slot);
        if !had_children {
            self.publish(parent.slot);
        }
        self.publish(slot);
        self.set_bounds();
        self.shared.live.fetch_add(1, Ordering::Relaxed);
        Ok(PassId {
            slot,
            generation: self.slots[slot as usize].generation,
        })
    }

    /// Replaces every instruction of a pass at once (one publication).
    pub fn replace_pass(&mut self, id: PassId, insts: &[Inst]) -> Result<(), UpdateError> {
        let m = self.meta_mut(id)?;
        m.insts = insts.to_vec();
        for i in &mut m.insts {
            i.set_copied(false);
        }
        m.version = next_version();
        let (version, children) = (m.version, m.children.clone());
        self.publish(id.slot);
        for c in children {
            if let Some(Slot { meta: Some(cm), .. }) = self.slots.get_mut(c as usize) {
                for ci in &mut cm.insts {
                    ci.set_copied(false);
                }
                cm.parent = Some((id.slot, version));
                cm.version = next_version();
                self.publish(c);
            }
        }
        Ok(())
    }

    /// Removes every pass.
    pub fn clear(&mut self) {
        for (id, _) in self
            .list()
            .into_iter()
            .map(|(i, p)| (i, p.len()))
            .collect::<Vec<_>>()
        {
            let _ = self.del_pass(id);
        }
    }

    /// Changes instruction `idx` of a pass with `f` (appending a NOP first when `idx` is the
    /// pass's length), then publishes the new version: the instruction loses its "copied" mark,
    /// and the pass's copies, whose marks referred to the old version, are re-pointed at the new
    /// one with that instruction unmarked.
    fn change(
        &mut self,
        id: PassId,
        idx: usize,
        f: impl FnOnce(&mut Inst) -> Result<(), UpdateError>,
    ) -> Result<(), UpdateError> {
        let m = self.meta_mut(id)?;
        if idx > m.insts.len() {
            return Err(UpdateError::NoSuchInstruction(idx));
        }
        if idx == m.insts.len() {
            m.insts
                .push(Inst::new(crate::isa::Op::Nop, crate::isa::Mode::D, 0));
        }
        let mut inst = m.insts[idx];
        f(&mut inst)?;
        inst.set_copied(false);
        m.insts[idx] = inst;
        m.version = next_version();
        let (version, children) = (m.version, m.children.clone());
        self.publish(id.slot);
        for c in children {
            if let Some(Slot { meta: Some(cm), .. }) = self.slots.get_mut(c as usize) {
                if let Some(ci) = cm.insts.get_mut(idx) {
                    ci.set_copied(false);
                }
                cm.parent = Some((id.slot, version));
                cm.version = next_version();
                self.publish(c);
            }
        }
        Ok(())
    }

    /// Sets instruction `idx` (or appends it when `idx` is the pass's length). `SPF_SelectOp`.
    pub fn select_op(&mut self, id: PassId, idx: usize, inst: Inst) -> Result<(), UpdateError> {
        self.change(id, idx, |i| {
            *i = inst;
            Ok(())
        })
    }

    /// Adds an operand (SIMD lane) to instruction `idx`. `SPF_AddParam`.
    pub fn add_param(&mut self, id: PassId, idx: usize, value: u32) -> Result<(), UpdateError> {
        self.meta(id)?
            .insts
            .get(idx)
            .ok_or(UpdateError::NoSuchInstruction(idx))?;
        self.change(id, idx, |i| {
            i.add_value(value).map_err(|_| UpdateError::Full)
        })
    }

    /// Removes an operand from instruction `idx`. `SPF_DelParam`.
    pub fn del_param(&mut self, id: PassId, idx: usize, value: u32) -> Result<(), UpdateError> {
        self.meta(id)?
            .insts
            .get(idx)
            .ok_or(UpdateError::NoSuchInstruction(idx))?;
        self.change(id, idx, |i| {
            if i.del_value(value) {
                Ok(())
            } else {
                Err(UpdateError::NoSuchParam(value))
            }
        })
    }

    /// Changes any part of instruction `idx`: word 0 is the command, words 1-7 the
    /// parameters. `SPF_PokeInst`.
    pub fn poke_inst(
        &mut self,
        id: PassId,
        idx: usize,
        word: usize,
        value: u32,
    ) -> Result<(), UpdateError> {
        self.meta(id)?
            .insts
            .get(idx)
            .ok_or(UpdateError::NoSuchInstruction(idx))?;
        self.change(id, idx, |i| {
            match word {
                0 => i.cmd = value,
                1..=7 => i.p[word - 1] = value,
                _ => return Err(UpdateError::NoSuchInstruction(idx)),
            }
            Ok(())
        })
    }

    /// Removes instruction `idx` of a pass.
    pub fn del_inst(&mut self, id: PassId, idx: usize) -> Result<(), UpdateError> {
        let m = self.meta_mut(id)?;
        if idx >= m.insts.len() {
            return Err(UpdateError::NoSuchInstruction(idx));
        }
        m.insts.remove(idx);
        m.version = next_version();
        let (version, children) = (m.version, m.children.clone());
        self.publish(id.slot);
        // The copies' instructions no longer line up with the parent's: unmark them.
        for c in children {
            if let Some(Slot { meta: Some(cm), .. }) = self.slots.get_mut(c as usize) {
                for ci in &mut cm.insts {
                    ci.set_copied(false);
                }
                cm.parent = Some((id.slot, version));
                cm.version = next_version();
                self.publish(c);
            }
        }
        Ok(())
    }
}

/// Runs a filter (one per filtering thread). It holds the filter's scratch space for
/// hierarchical execution and the list of passes it is running.
pub struct Reader {
    shared: Arc<Shared_>,
    /// Per slot: the packet stamp, the pass version, and which instructions held / failed.
    results: Vec<(u64, u64, u64, u64)>,
    stamp: u64,
    hierarchical: bool,
    /// The passes (slot, pass) as of `seen`, valid while the current guard is held.
    list: Vec<(u32, *const Pass)>,
    seen: u64,
    accept_all: bool,
    /// No pass is a parent or a copy: the plain loop serves every packet.
    plain: bool,
    fusion: bool,
    /// For a plain filter of at most `FLAT_MAX` instructions: every pass's fused instructions in
    /// one array (copied at refresh), and where each pass ends. One contiguous array keeps the
    /// per-packet loop free of pointer chasing.
    flat: Vec<Exec>,
    ends: Vec<usize>,
    /// The index of [`Reader::run`], valid for the value `index_seen` of `changes`.
    index: PassIndex,
    index_seen: u64,
}

/// Where the keyed instruction reads: the IPv4 source and destination addresses of an
/// untagged Ethernet frame (26..34).
const KEY_OFFSET: usize = 26;

/// The passes of a plain filter by the address their first instruction names, and the others.
#[derive(Default)]
struct PassIndex {
    /// Whether the index can serve packets (a plain filter; hierarchical passes run in order).
    usable: bool,
    /// Slots of the passes keyed by each address, ascending.
    keyed: std::collections::HashMap<u32, Vec<u32>, std::hash::BuildHasherDefault<AddrHasher>>,
    /// Slots of the passes without a key, ascending.
    rest: Vec<u32>,
    /// Scratch: the candidate slots of one packet.
    cand: Vec<u32>,
}

/// A multiplicative hash for IPv4 addresses (the index is rebuilt per change and probed twice
/// per packet; SipHash would cost more than the passes it saves).
#[derive(Default)]
struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = u64::from(v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The largest plain filter copied into the reader's flat array.
const FLAT_MAX: usize = 64;

// SAFETY: the raw pointers in `list` are only dereferenced while the reader holds an epoch
// guard that keeps them alive, and the list is rebuilt under each new guard.
unsafe impl Send for Reader {}

impl Reader {
    /// Turns hierarchical execution on or off (for measuring its effect).
    pub fn set_hierarchical(&mut self, on: bool) {
        self.hierarchical = on;
        self.seen = u64::MAX;
    }

    /// Turns the fusion of instruction runs on or off (for measuring its effect): off, every
    /// instruction runs on its own, as the paper's engine does.
    pub fn set_fusion(&mut self, on: bool) {
        self.fusion = on;
        self.seen = u64::MAX;
    }

    /// Runs the filter on one packet: the snap length if some pass accepts it, else 0. Each
    /// call pins an epoch; [`Reader::run_batch`] pins once for many packets.
    ///
    /// A plain filter (no pass copied from another, or hierarchical execution off) is run
    /// through an index rebuilt only when the filter changes: passes whose first instruction is
    /// `ip src or dst host H` are filed under H, so a packet runs the passes of its own two
    /// addresses and the unkeyed ones, in slot order — the others would fail their first
    /// instruction, which on a packet of at least 34 bytes cannot abort. The per-packet cost is
    /// then independent of the number of such passes (an FTP monitor's data connections, an
    /// IDS's suspicious hosts). The index is used only when the filter did not change during
    /// the packet (a sequence count around each publication); otherwise, and for other
    /// filters, every pass is loaded and run in order.
    pub fn run(&mut self, data: &[u8], wire_len: u32) -> u32 {
        let guard = epoch::pin();
        let before = self.shared.changes.load(Ordering::SeqCst);
        if before & 1 == 0 && data.len() >= KEY_OFFSET + 8 {
            if before != self.index_seen {
                self.build_index(&guard, before);
            }
            if self.index.usable {
                let v = self.run_indexed(data, wire_len, &guard);
                if self.shared.changes.load(Ordering::SeqCst) == before {
                    return v;
                }
            }
        }
        self.refresh(&guard);
        self.run_pinned(data, wire_len, &guard)
    }

    /// Rebuilds the index (O(slots), once per change).
    fn build_index(&mut self, guard: &Guard, seen: u64) {
        let shared = &*self.shared;
        let ix = &mut self.index;
        ix.keyed.clear();
        ix.rest.clear();
        ix.usable = true;
        let hwm = shared.hwm.load(Ordering::Acquire);
        let mut passes = 0usize;
        for slot in 0..hwm {
            let p = shared.slot(slot, guard);
            // SAFETY: loaded under `guard`.
            let Some(pass) = (unsafe { p.as_ref() }) else {
                continue;
            };
            if self.hierarchical && (pass.parent.is_some() || pass.has_children) {
                ix.usable = false;
                break;
            }
            passes += 1;
            match pass.key {
                Some(h) => ix.keyed.entry(h).or_default().push(slot as u32),
                None => ix.rest.push(slot as u32),
            }
        }
        // A filter without passes accepts everything: the general path says so.
        ix.usable &= passes > 0;
        self.index_seen = seen;
    }

    #[inline(never)]
    fn run_indexed(&mut self, data: &[u8], wire_len: u32, guard: &Guard) -> u32 {
        let shared = &*self.shared;
        let ix = &mut self.index;
        let addr = |o: usize| u32::from_be_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
        let (src, dst) = (addr(KEY_OFFSET), addr(KEY_OFFSET + 4));
        let none: &[u32] = &[];
        let a = ix.keyed.get(&src).map_or(none, Vec::as_slice);
        let b = if dst == src {
            none
        } else {
            ix.keyed.get(&dst).map_or(none, Vec::as_slice)
        };
        // The candidates in slot order (the order decides which abort comes first).
        let cand: &[u32] = if a.is_empty() && b.is_empty() {
            &ix.rest
        } else {
            ix.cand.clear();
            ix.cand.extend_from_slice(&ix.rest);
            ix.cand.extend_from_slice(a);
            ix.cand.extend_from_slice(b);
            ix.cand.sort_unstable();
            &ix.cand
        };
        for &slot in cand {
            let p = shared.slot(slot as usize, guard);
            // SAFETY: loaded under `guard`.
            let Some(pass) = (unsafe { p.as_ref() }) else {
                continue;
            };
            let execs = if self.fusion { &pass.fused } else { &pass.exec };
            if execs.is_empty() {
                continue;
            }
            match pass_holds(execs, data, wire_len) {
                Some(true) => return shared.snaplen,
                Some(false) => {}
                None => return 0,
            }
        }
        0
    }

    /// Runs the filter on many packets (one epoch pin for all), one result each into `out`.
    /// A change published during the batch applies from the next packet on.
    pub fn run_batch<'a, I>(&mut self, packets: I, out: &mut Vec<u32>)
    where
        I: IntoIterator<Item = (&'a [u8], u32)>,
    {
        out.clear();
        let guard = epoch::pin();
        self.refresh(&guard);
        let shared = self.shared.clone();
        let changes = &shared.changes;
        let snaplen = shared.snaplen;
        let mut it = packets.into_iter();
        loop {
            // The fast loop for a small plain filter: everything it needs in locals, leaving
            // only when a change is published.
            if !self.ends.is_empty() {
                let (flat, ends, seen) = (&self.flat, &self.ends, self.seen);
                let mut changed = false;
                for (d, l) in it.by_ref() {
                    out.push(run_flat(flat, ends, d, l, snaplen));
                    if changes.load(Ordering::Acquire) != seen {
                        changed = true;
                        break;
                    }
                }
                if !changed {
                    return;
                }
                self.refresh(&guard);
                continue;
            }
            let Some((d, l)) = it.next() else {
                return;
            };
            if changes.load(Ordering::Acquire) != self.seen {
                self.refresh(&guard);
            }
            let v = if self.plain {
                run_plain(&self.list, d, l, snaplen, self.fusion)
            } else {
                self.run_pinned(d, l, &guard)
            };
            out.push(v);
        }
    }

    /// Rebuilds the list of passes under `guard` (O(slots), once per batch or change).
    fn refresh(&mut self, guard: &Guard) {
        let shared = &*self.shared;
        self.seen = shared.changes.load(Ordering::Acquire);
        let hwm = shared.hwm.load(Ordering::Acquire);
        self.list.clear();
        for slot in 0..hwm {
            let p = shared.slot(slot, guard);
            if !p.is_null() {
                self.list.push((slot as u32, p.as_raw()));
            }
        }
        self.accept_all = self.list.is_empty();
        let hier = self.hierarchical;
        self.plain = self.list.iter().all(|&(_, p)| {
            // SAFETY: loaded under `guard`, as above.
            let p = unsafe { &*p };
            !hier || (p.parent.is_none() && !p.has_children)
        });
        self.flat.clear();
        self.ends.clear();
        if self.plain {
            let fusion = self.fusion;
            let total: usize = self
                .list
                .iter()
                .map(|&(_, p)| {
                    // SAFETY: as above.
                    let p = unsafe { &*p };
                    if fusion { p.fused.len() } else { p.exec.len() }
                })
                .sum();
            if total <= FLAT_MAX {
                for &(_, p) in &self.list {
                    // SAFETY: as above.
                    let p = unsafe { &*p };
                    let execs = if fusion { &p.fused } else { &p.exec };
                    if execs.is_empty() {
                        continue;
                    }
                    self.flat.extend(execs.iter().cloned());
                    self.ends.push(self.flat.len());
                }
            }
        }
        if self.results.len() < hwm {
            self.results.resize(hwm, (0, 0, 0, 0));
        }
    }

    #[inline(never)]
    fn run_pinned(&mut self, data: &[u8], wire_len: u32, _guard: &Guard) -> u32 {
        let snaplen = self.shared.snaplen;
        if self.accept_all {
            return snaplen;
        }
        self.stamp = self.stamp.wrapping_add(1);
        let stamp = self.stamp;
        for &(slot, ptr) in &self.list {
            // SAFETY: `ptr` was loaded under the guard the caller still holds, so the pass
            // version cannot have been freed.
            let pass = unsafe { &*ptr };
            if pass.exec.is_empty() {
                continue;
            }
            // The parent's results for this packet, from the version this pass was copied from.
            let inherited = match (self.hierarchical, pass.parent) {
                (true, Some((ps, pv))) => match self.results.get(ps as usize) {
                    Some(&(s, v, t, f)) if s == stamp && v == pv => Some((t, f)),
                    _ => None,
                },
                _ => None,
            };
            if inherited.is_none() && !pass.has_children {
                // The plain loop: no results to reuse or to keep.
                match pass_holds(&pass.exec, data, wire_len) {
                    Some(true) => return snaplen,
                    Some(false) => continue,
                    None => return 0,
                }
            }
            let (mut held, mut failed) = (0u64, 0u64);
            let mut ok = true;
            for (i, e) in pass.exec.iter().enumerate() {
                let bit = if i < 64 { 1u64 << i } else { 0 };
                if let Some((t, f)) = inherited
                    && e.copied
                {
                    if t & bit != 0 {
                        held |= bit;
                        continue;
                    }
                    if f & bit != 0 {
                        ok = false;
                        break;
                    }
                }
                match e.eval(data, wire_len) {
                    Outcome::True => held |= bit,
                    Outcome::False => {
                        failed |= bit;
                        ok = false;
                        break;
                    }
                    Outcome::Abort => return 0,
                }
            }
            if ok {
                return snaplen;
            }
            if pass.has_children
                && let Some(r) = self.results.get_mut(slot as usize)
            {
                *r = (stamp, pass.version, held, failed);
            }
        }
        0
    }
}

/// Runs one pass's instructions in order: `Some(true)` when all hold, `Some(false)` when one
/// fails, `None` when one aborts the packet (a read past the captured bytes).
#[inline(always)]
fn pass_holds(execs: &[Exec], data: &[u8], wire_len: u32) -> Option<bool> {
    for e in execs {
        match e.eval(data, wire_len) {
            Outcome::True => {}
            Outcome::False => return Some(false),
            Outcome::Abort => return None,
        }
    }
    Some(true)
}

/// Runs passes none of which is a parent or a copy (the common static case).
#[inline(always)]
fn run_plain(
    list: &[(u32, *const Pass)],
    data: &[u8],
    wire_len: u32,
    snaplen: u32,
    fusion: bool,
) -> u32 {
    if list.is_empty() {
        return snaplen;
    }
    'pass: for &(_, ptr) in list {
        // SAFETY: loaded under the guard the caller holds.
        let pass = unsafe { &*ptr };
        let execs = if fusion { &pass.fused } else { &pass.exec };
        if execs.is_empty() {
            continue;
        }
        for e in execs.iter() {
            match e.eval(data, wire_len) {
                Outcome::True => {}
                Outcome::False => continue 'pass,
                Outcome::Abort => return 0,
            }
        }
        return snaplen;
    }
    0
}

/// Runs a plain filter copied into one array: `ends[k]` is where pass k's instructions end.
#[inline(always)]
fn run_flat(flat: &[Exec], ends: &[usize], data: &[u8], wire_len: u32, snaplen: u32) -> u32 {
    let mut start = 0;
    'pass: for &end in ends {
        let insts = &flat[start..end];
        start = end;
        for e in insts {
            match e.eval(data, wire_len) {
                Outcome::True => {}
                Outcome::False => continue 'pass,
                Outcome::Abort => return 0,
            }
        }
        return snaplen;
    }
    0
}
