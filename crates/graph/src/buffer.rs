//! The buffers of a flow group: one packet buffer (PBuf) shared by every flow of the group, one
//! index buffer (IBuf) per reader, and the two buffer-management policies of the FFPF paper
//! (§3.1): slow-reader preference and fast-reader preference.
//!
//! # Model
//!
//! A [`Group`] owns a **PBuf**: a ring of `slots` fixed-size slots of `slot_size` bytes, their
//! headers (sequence word, stored and wire lengths, time stamp, link type) in a dense array of
//! their own and their bytes in another, consecutive slots contiguous. One capture thread —
//! the [`Writer`], at most one at a time — copies a packet into the next slot **once**, however
//! many flows of the group accept it, and gets a [`SlotRef`] (slot index and sequence number).
//! A packet longer than a slot is cut to it ([`Group::new`]) or, in a group made with
//! [`Group::create`], takes as many consecutive slots as it needs up to the group's `max_len`
//! (never wrapping: at the end of the ring the writer skips the remaining slots), so small
//! slots hold small packets densely — what the caches and prefetchers of two cores passing
//! packets want — while long ones are still kept whole. It then appends an entry — the slot reference and the
//! filter's 32-bit result — to the **IBuf** of every reader (flow endpoint) that accepted the
//! packet. Readers ([`Reader`], one per IBuf, each on any thread) read their IBuf in order and
//! follow the slot references into the PBuf.
//!
//! ```
//! use netsift_capture::{LinkType, Timestamp};
//! use netsift_graph::Pkt;
//! use netsift_graph::buffer::{Group, Preference};
//!
//! let group = Group::new(1024, 2048, Preference::SlowReader);
//! let (tcp, mut tcp_reader) = group.add_reader(1024);
//! let (web, mut web_reader) = group.add_reader(1024);
//! let mut writer = group.writer().expect("the only writer");
//! let pkt = Pkt {
//!     data: b"a packet",
//!     wire_len: 60,
//!     timestamp: Timestamp::ZERO,
//!     link_type: LinkType::ETHERNET,
//! };
//! // Both flows accept it: one copy, two index entries with each filter's result.
//! writer.write(&pkt, &[(tcp, 1), (web, 80)]);
//! assert_eq!(group.stats().copies, 1);
//! let d = tcp_reader.next().unwrap();
//! assert_eq!((d.data, d.wire_len, d.result), (&b"a packet"[..], 60, 1));
//! tcp_reader.release(); // after a batch, not after every packet
//! assert_eq!(web_reader.next().unwrap().result, 80);
//! ```
//!
//! Positions are absolute `u64` counters that never wrap in practice; a ring index is the
//! position modulo the ring size, and `position / slots` is the paper's *wrap counter*.
//!
//! ```text
//!  PBuf, 8 slots (slot index : position of the packet stored in it)
//!
//!    0:8   1:9   2:10  3:11  4:12  5:13  6:14  7:15
//!    ▲           ▲
//!    W = 16      R* = 10: the oldest packet a reader still holds (B's entry for 10)
//!
//!  IBuf A (slot ref + result):   … 9 │ 11  12  14  15 │
//!                                    R_A              W_A
//!  IBuf B:                       … 8 │ 10  13 │
//!                                    R_B      W_B
//!
//!  left of R: released · between R and W: appended and held (read or not) · at W: next entry
//! ```
//!
//! The next packet goes to slot 0 (`16 % 8`). Under slow-reader preference that is allowed
//! because `W − R* = 6 < 8`: packet 8 is held by nobody; after packet 17 the writer stops (slot 2
//! holds packet 10, which B has not released) until B releases. Under fast-reader preference
//! the writer goes on regardless: writing packet 18 over slot 2 bumps its sequence word to 19,
//! and B, finding 19 where it expects 11 (10 + 1), counts packet 10 as overwritten.
//!
//! - `W` (writer-owned, [`Group::write_position`]) is the next PBuf position to write; `W_i` the next
//!   entry of IBuf *i*, published with a `Release` store after the entry and its slot are
//!   complete; a reader loads it with `Acquire`, which makes the entry and the slot bytes
//!   visible.
//! - `R_i` is reader *i*'s **released** position: [`Reader::next`] advances a private cursor,
//!   [`Reader::release`] publishes it (`Release` store) — in batches, as the paper recommends, so
//!   the writer's cache line is not touched per packet. Until released, an entry and the slot it
//!   names are *held* by the reader.
//! - `R*` is the oldest PBuf position some reader still holds: for every reader, the slot
//!   named by the entry at its `R_i` (a reader whose IBuf is drained holds nothing).
//!
//! # Slow-reader preference ([`Preference::SlowReader`])
//!
//! The writer never overwrites anything a reader holds. Before writing position `W` it checks
//! `W − R* < slots`, using a cached `R*` (a lower bound: releases only raise it) and recomputing
//! it — one `Acquire` load of each `R_i` — only when the cached value says the ring is full.
//! A packet that does not fit in the PBuf is dropped and counted for the group and for every
//! reader that accepted it; an entry that does not fit in one IBuf (`W_i − R_i = capacity`) is
//! dropped and counted for that reader only. Because nothing held is ever written, a reader
//! borrows slot bytes directly ([`Delivered::data`], zero copy) and
//! `delivered + dropped` equals the packets its filter accepted, exactly. The price: the
//! slowest reader of a group makes every reader of the group lose packets.
//!
//! # Fast-reader preference ([`Preference::FastReader`])
//!
//! The writer never waits and never drops: it overwrites the oldest slots and IBuf entries.
//! Every slot and every IBuf entry carries a sequence word (its position + 1, 0 while it is being
//! written) — a seqlock: the writer stores 0, a `Release` fence, the contents (relaxed atomic
//! stores), then position + 1 with `Release`; a reader loads the sequence (`Acquire`), copies the
//! contents (relaxed atomic loads), issues an `Acquire` fence and loads the sequence again. If
//! either load is not the expected position + 1 the packet was overwritten — before or while it
//! was read — and is counted in [`ReaderStats::overwritten`]; it is never returned. A reader that
//! fell more than an IBuf behind skips ahead to the oldest entry still in the ring, counting the
//! skipped entries as overwritten. So `delivered + overwritten` equals the packets its filter
//! accepted, and a fast reader is never slowed by a slow one. Because bytes may change under a
//! reader, [`Reader::next`] copies them out (into a buffer it reuses) before validating.
//!
//! # Readers come and go
//!
//! [`Group::add_reader`] registers a new IBuf; the writer notices at its next packet (one
//! relaxed load of a generation counter) and the new reader receives only what the writer
//! delivers to it from then on. Running readers are not disturbed. Dropping a [`Reader`] (or
//! [`Reader::close`]) unregisters it and releases its hold on the PBuf; a stale [`ReaderId`]
//! is refused by [`Writer::deliver`].
//!
//! # Packets spanning slots
//!
//! Positions count slots: a packet at position `p` taking `k` slots occupies `p .. p + k` and
//! the next one starts at `p + k` (or at the next lap's slot 0). A reader validates a packet by
//! the sequence word of its first slot only. That suffices because the writer rewrites slots
//! in position order and updates the header of *every* slot it writes bytes into (busy, then
//! its position + 1) before those bytes: the first slot of a packet is always rewritten before
//! or together with any later slot of it (padding at the ring's end covers a tail of slots
//! none of which starts a packet). Under slow-reader preference the free-space check is
//! `W' − R* ≤ slots` for the position `W'` after the packet.
//!
//! # Waiting
//!
//! [`Reader::wait_for`] blocks until `n` packets are available. The writer wakes a reader only
//! when some reader of the group is waiting (one relaxed load of a group-wide counter per
//! packet): it then compares the waiting reader's target with `W_i` and `unpark`s it.
//!
//! NOTE: the writer issues no `SeqCst` fence between publishing `W_i` and looking for waiters —
//! that would cost a full barrier per packet — so a wake-up can be missed when the reader starts
//! to wait at the very moment the writer publishes. A waiting reader therefore re-checks `W_i`
//! at least every millisecond ([`RECHECK`]): a missed wake-up costs at most that much latency,
//! never a hang.
//!
//! Callbacks every `n` packets or every `t` are built on `wait_for` ([`Reader::on_every`]).
//!
//! A reader in another process ([`Reader::attach`]) cannot be unparked: it announces its
//! target in its control page and sleeps on a futex — the low 32 bits of `W_i` in the IBuf's
//! memory file, shared (not process-private), so the same word in both mappings — and the
//! creator, after a batch of packets, wakes it if its target was reached
//! ([`Reader::wake_attached`]: a `SeqCst` fence and one load per reader per batch, a
//! `FUTEX_WAKE` only for a reader that waits). A lost wake-up costs at most
//! [`ATTACHED_RECHECK`].
//!
//! # Safety
//!
//! The slot bytes are a `Box<[AtomicU64]>`. Under fast-reader preference every access to them is
//! a relaxed atomic load or store (the seqlock above validates the copy), so concurrent overwrite
//! is well defined. Under slow-reader preference the writer copies with `copy_nonoverlapping`
//! and readers borrow `&[u8]` views: sound because the protocol guarantees that the writer never
//! writes a slot some reader holds, and that every reader's access to a slot happens-after the
//! writer's (`Release`/`Acquire` on `W_i`) and happens-before the writer's next write of it
//! (`Release`/`Acquire` on `R_i`). These are the only `unsafe` blocks of the module.

use std::fmt;
use std::io;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use netsift_capture::{LinkType, Timestamp};

use crate::class::Pkt;
use crate::shm::{Mem, One, Plain, Region};

/// How long a waiting reader sleeps at most before it re-checks its IBuf (see the module docs:
/// it bounds the latency of a missed wake-up).
pub const RECHECK: Duration = Duration::from_millis(1);

/// How long a waiting reader of another process's buffers sleeps at most before it re-checks
/// (the creator wakes it through a futex; this bounds a wake-up that never comes, e.g. because
/// the creator went away).
pub const ATTACHED_RECHECK: Duration = Duration::from_millis(100);

/// The futex word of an IBuf's `W_i`: its low 32 bits (the word's first 4 bytes on a
/// little-endian machine, its last 4 on a big-endian one).
fn futex_word(w: &AtomicU64) -> *const u32 {
    let p = (w as *const AtomicU64).cast::<u32>();
    if cfg!(target_endian = "big") {
        p.wrapping_add(1)
    } else {
        p
    }
}

/// Sleep until `w`'s low 32 bits are woken, as long as they equal `seen`, at most `timeout`.
/// Shared (not process-private): the word is in a memory file mapped by two processes.
fn futex_wait(w: &AtomicU64, seen: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: the address is a valid, aligned u32 inside a live mapping (the reader keeps its
    // region); FUTEX_WAIT only reads it. Errors (EAGAIN: it changed; EINTR; ETIMEDOUT) all
    // mean "look again", which the caller does.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            futex_word(w),
            libc::FUTEX_WAIT,
            seen,
            &raw const ts,
        );
    }
}

/// Wake every process sleeping on `w`'s futex word.
fn futex_wake(w: &AtomicU64) {
    // SAFETY: as in `futex_wait`; FUTEX_WAKE does not access the word.
    unsafe {
        libc::syscall(libc::SYS_futex, futex_word(w), libc::FUTEX_WAKE, i32::MAX);
    }
}

/// Words of a slot before its data: sequence, lengths, seconds, nanoseconds and link type.
const HEADER_WORDS: usize = 4;

/// What the writer does when a reader falls behind (§3.1.1 of the paper).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preference {
    /// Slow-reader preference: the writer stops at the slowest reader; packets that do not fit
    /// are dropped (and counted); nothing delivered is ever overwritten.
    SlowReader,
    /// Fast-reader preference: the writer never waits and overwrites the oldest packets;
    /// readers detect overwritten packets and count them as lost.
    FastReader,
}

/// A reader (flow endpoint, IBuf) of a group. Identifiers are not reused: the index of a
/// removed reader may be, with a new serial number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReaderId {
    index: u32,
    serial: u32,
}

impl ReaderId {
    /// The reader's index in the group's table (small, reused after removal).
    pub fn index(self) -> u32 {
        self.index
    }
}

impl fmt::Display for ReaderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "reader {}#{}", self.index, self.serial)
    }
}

/// The ring index `back` places before `index` in a ring of `len` (`back <= len`).
fn ring_back(index: u32, back: u32, len: u32) -> u32 {
    if index >= back {
        index - back
    } else {
        index + (len - back)
    }
}

/// A reference to a PBuf slot as it was written: the slot index and the sequence number (the
/// absolute write position; `seq / slots` is the paper's wrap counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotRef {
    seq: u64,
    index: u32,
}

impl SlotRef {
    /// The absolute write position of the packet in the group (0 for the first packet).
    pub fn seq(self) -> u64 {
        self.seq
    }

    /// The slot index in the PBuf (`seq % slots`).
    pub fn index(self) -> u32 {
        self.index
    }

    /// How many times the writer had wrapped around a ring of `slots` slots when it wrote this
    /// packet.
    pub fn wrap(self, slots: u32) -> u64 {
        self.seq / u64::from(slots.max(1))
    }
}

/// Counters of a group ([`Group::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Packets copied into the PBuf (once per packet, however many readers accepted it).
    pub copies: u64,
    /// Packets dropped because the PBuf was full (slow-reader preference only).
    pub dropped: u64,
    /// Packets read by the readers currently registered, summed.
    pub delivered: u64,
    /// Packets dropped for the readers currently registered (PBuf or their IBuf full), summed.
    pub reader_dropped: u64,
    /// Packets overwritten before the readers currently registered read them, summed.
    pub overwritten: u64,
    /// Readers registered.
    pub readers: usize,
}

/// Counters of one reader ([`Reader::stats`], [`Group::reader_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReaderStats {
    /// Entries the writer appended to the reader's IBuf.
    pub appended: u64,
    /// Packets the reader read (returned by [`Reader::next`] and friends, valid).
    pub delivered: u64,
    /// Packets accepted for this reader but dropped because the PBuf or the IBuf was full
    /// (slow-reader preference only).
    pub dropped: u64,
    /// Packets overwritten before the reader could read them, or while it read them
    /// (fast-reader preference only).
    pub overwritten: u64,
}

/// How many entries ahead a reader asks the cache for the packets it will read next.
const AHEAD: u64 = 4;

/// A hint to load the cache line at `p` (never faults, whatever the address; a no-op where
/// the architecture has no such hint here).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it never faults or changes memory.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch(p.cast(), _MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Pads and aligns a value to its own cache lines (128 bytes: adjacent-line prefetch).
#[derive(Default)]
#[repr(C, align(128))]
struct Padded<T>(T);

impl<T> Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// An IBuf entry: the sequence word (position + 1, 0 while written), the PBuf position, and
/// the slot index with the filter's result.
#[derive(Default)]
#[repr(C)]
struct Entry {
    tag: AtomicU64,
    pos: AtomicU64,
    meta: AtomicU64,
    /// The most bytes of the packet this reader sees (its flow's snap length).
    cap: AtomicU32,
}

/// The counters and indices the writer writes.
#[derive(Default)]
#[repr(C)]
struct WriterSide {
    /// `W_i`: the next entry position.
    w: AtomicU64,
    appended: AtomicU64,
    dropped: AtomicU64,
}

/// The counters and indices the reader writes.
#[derive(Default)]
#[repr(C)]
struct ReaderSide {
    /// `R_i`: the released position.
    r: AtomicU64,
    delivered: AtomicU64,
    overwritten: AtomicU64,
    /// `W_i` the waiting reader waits for (0: not waiting).
    wait_target: AtomicU64,
    /// Shared control pages: identifies the page ([`Reader::attach`] checks it).
    magic: AtomicU64,
    /// The IBuf's `appended` and `dropped` counters when this reader joined it (readers of
    /// one IBuf count from when each joined, [`Group::try_add_reader_sharing`]).
    appended_base: AtomicU64,
    dropped_base: AtomicU64,
}

/// The first 128 bytes of a PBuf: what a process that maps it needs to know, and the
/// finished flag.
#[derive(Default)]
#[repr(C)]
struct GroupHead {
    magic: AtomicU64,
    /// 0: slow-reader preference, 1: fast-reader preference.
    pref: AtomicU64,
    slots: AtomicU64,
    slot_size: AtomicU64,
    max_len: AtomicU64,
    /// Non-zero: the writer finished ([`Writer::finish`] or dropped) and none wrote since.
    finished: AtomicU64,
}

/// The first 128 bytes of a shared IBuf.
#[derive(Default)]
#[repr(C)]
struct IbufHead {
    magic: AtomicU64,
    entries: AtomicU64,
}

// SAFETY: `#[repr(C)]` structs of atomics (valid at zero, no Drop, alignment 8 or 128).
unsafe impl Plain for Entry {}
// SAFETY: as above.
unsafe impl Plain for Padded<WriterSide> {}
// SAFETY: as above.
unsafe impl Plain for Padded<ReaderSide> {}
// SAFETY: as above.
unsafe impl Plain for Padded<GroupHead> {}
// SAFETY: as above.
unsafe impl Plain for Padded<IbufHead> {}

/// Bytes of a padded header in a shared region.
const HEAD: usize = std::mem::size_of::<Padded<GroupHead>>();
/// `nsPBUF01`, `nsIBUF01`, `nsCTRL01`: the first word of each shared region.
const PBUF_MAGIC: u64 = u64::from_le_bytes(*b"nsPBUF01");
const IBUF_MAGIC: u64 = u64::from_le_bytes(*b"nsIBUF01");
const CTRL_MAGIC: u64 = u64::from_le_bytes(*b"nsCTRL01");

/// A reader's shared memory, to hand to another process ([`Reader::shared_regions`],
/// [`Reader::attach`]).
#[derive(Clone, Copy, Debug)]
pub struct SharedRegions<'a> {
    /// The group's PBuf (the other process maps it read-only).
    pub pbuf: &'a Region,
    /// The reader's IBuf (read-only for the other process).
    pub ibuf: &'a Region,
    /// The reader's control page, `R_i` and the reader's counters (read-write).
    pub ctrl: &'a Region,
}

/// Why [`Reader::attach`] refused a set of regions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachError(String);

impl fmt::Display for AttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AttachError {}

/// An index buffer proper: the ring of entries and the writer's counters. Usually one
/// reader's; readers of flows that receive exactly the same packets may share one
/// ([`Group::try_add_reader_sharing`]), each with its own cursor `R_i` in its own control page.
struct Ring {
    entries: Mem<Entry>,
    writer: One<Padded<WriterSide>>,
}

/// One reader's end of an IBuf: the ring (perhaps shared) and the reader's control page.
struct IBuf {
    serial: u32,
    ring: Arc<Ring>,
    reader: One<Padded<ReaderSide>>,
    /// The thread to unpark while the reader waits.
    thread: Mutex<Option<Thread>>,
}

impl IBuf {
    #[inline]
    fn cap(&self) -> u64 {
        self.ring.entries.len() as u64
    }

    fn stats(&self) -> ReaderStats {
        let (r, w) = (&self.reader, &self.ring.writer);
        // The IBuf's counters count from when this reader joined it.
        let since = |count: &AtomicU64, base: &AtomicU64| {
            count
                .load(Ordering::Relaxed)
                .wrapping_sub(base.load(Ordering::Relaxed))
        };
        ReaderStats {
            appended: since(&w.appended, &r.appended_base),
            delivered: r.delivered.load(Ordering::Relaxed),
            dropped: since(&w.dropped, &r.dropped_base),
            overwritten: r.overwritten.load(Ordering::Relaxed),
        }
    }

    /// Wake the reader if it waits for `w` entries or fewer. Called by the writer only when
    /// some reader of the group waits.
    fn wake_if_waiting(&self, w: u64) {
        let target = self.reader.wait_target.load(Ordering::Relaxed);
        if target != 0
            && w >= target
            && self
                .reader
                .wait_target
                .compare_exchange(target, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.unpark();
        }
    }

    fn unpark(&self) {
        if let Some(t) = lock(&self.thread).as_ref() {
            t.unpark();
        }
    }
}

/// The readers of a group.
#[derive(Default)]
struct Table {
    ibufs: Vec<Option<Arc<IBuf>>>,
    next_serial: u32,
}

/// The sizes of a PBuf, normalised.
#[derive(Clone, Copy, Debug)]
struct Layout {
    slots: u32,
    slot_size: u32,
    max_len: u32,
}

impl Layout {
    /// At least one slot of at least one byte; `max_len` between the slot size and half the
    /// PBuf (so that a packet of `max_len` bytes always fits after the padding at the ring's
    /// end).
    fn new(slots: u32, slot_size: u32, max_len: u32) -> Layout {
        let slots = slots.max(1);
        let slot_size = slot_size.max(1);
        let slot_bytes = slot_size.div_ceil(8).saturating_mul(8);
        let half = u64::from(slots / 2) * u64::from(slot_bytes);
        let max_len = u64::from(max_len)
            .min(half)
            .max(u64::from(slot_size))
            .min(u64::from(u32::MAX)) as u32;
        Layout {
            slots,
            slot_size,
            max_len,
        }
    }

    fn slot_words(self) -> usize {
        (self.slot_size as usize).div_ceil(8)
    }

    fn header_words(self) -> usize {
        self.slots as usize * HEADER_WORDS
    }

    fn data_words(self) -> usize {
        self.slots as usize * self.slot_words()
    }
}

/// What a group's handles share.
struct Shared {
    pref: Preference,
    slots: u32,
    slot_size: u32,
    /// Data words per slot.
    slot_words: usize,
    /// log2 of the slot's bytes when that is a power of two (`u32::MAX` otherwise): PERF,
    /// a shift instead of a division per packet.
    slot_shift: u32,
    /// The longest packet stored (longer ones are cut): `slot_size` or more — a packet longer
    /// than a slot takes several consecutive slots.
    max_len: u32,
    /// The slot headers, [`HEADER_WORDS`] each: sequence word, lengths, seconds, nanoseconds
    /// and link type. Dense, apart from the data, so that a reader walks them sequentially.
    headers: Mem<AtomicU64>,
    /// The slots' bytes, `slots * slot_words` words: consecutive slots are contiguous, so a
    /// packet spanning several is one run of bytes.
    words: Mem<AtomicU64>,
    /// The group's header: layout (for processes that map the PBuf) and the finished flag.
    head: One<Padded<GroupHead>>,
    /// `W`: the next PBuf position (written by the writer only).
    w: Padded<AtomicU64>,
    copies: AtomicU64,
    dropped: AtomicU64,
    table: Mutex<Table>,
    /// Bumped whenever a reader is added or removed.
    generation: AtomicU64,
    /// Readers blocked in `wait_for`.
    sleepers: Padded<AtomicUsize>,
    /// A [`Writer`] exists.
    writer: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves consistent data (each critical section
    // is a single assignment or push), so poisoning is ignored.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// The header of slot `index`.
    #[inline]
    fn header(&self, index: u32) -> &[AtomicU64] {
        let base = index as usize * HEADER_WORDS;
        &self.headers[base..base + HEADER_WORDS]
    }

    /// The data words of a packet of `len` bytes starting at slot `index`.
    #[inline]
    fn data(&self, index: u32, len: usize) -> &[AtomicU64] {
        let base = index as usize * self.slot_words;
        &self.words[base..base + len.div_ceil(8)]
    }

    /// The most bytes a packet starting at slot `index` can have (up to the ring's end): a
    /// bound the reader applies whatever a header says.
    #[inline]
    fn room(&self, index: u32) -> usize {
        (self.slots - index.min(self.slots)) as usize * self.slot_words * 8
    }

    /// The slots a packet of `len` bytes takes.
    #[inline]
    fn slots_for(&self, len: usize) -> u32 {
        if self.slot_shift != u32::MAX {
            let size = 1usize << self.slot_shift;
            return ((len + size - 1) >> self.slot_shift).max(1) as u32;
        }
        len.div_ceil(self.slot_words * 8).max(1) as u32
    }

    fn finished(&self) -> bool {
        self.head.finished.load(Ordering::Acquire) != 0
    }

    fn set_finished(&self, finished: bool) {
        self.head
            .finished
            .store(u64::from(finished), Ordering::Release);
    }
}

/// A flow group's buffers: the PBuf and the IBufs of its readers. Cloning shares.
#[derive(Clone)]
pub struct Group {
    shared: Arc<Shared>,
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("preference", &self.shared.pref)
            .field("slots", &self.shared.slots)
            .field("slot_size", &self.shared.slot_size)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Group {
    /// A group with a PBuf of `slots` slots of `slot_size` bytes each (both at least one) and
    /// the given buffer management, on the heap. Packets longer than a slot are cut to it
    /// ([`Group::create`] lets them span slots).
    pub fn new(slots: u32, slot_size: u32, pref: Preference) -> Group {
        let l = Layout::new(slots, slot_size, slot_size);
        Group::build(
            pref,
            l,
            Mem::heap(l.header_words()),
            Mem::heap(l.data_words()),
            One::heap(),
        )
    }

    /// [`Group::new`] with the PBuf in a memory file (its readers' buffers too, with
    /// [`Group::add_reader`]), so that other processes can map it ([`Reader::attach`]).
    pub fn new_shared(slots: u32, slot_size: u32, pref: Preference) -> io::Result<Group> {
        Group::create(slots, slot_size, slot_size, pref, true)
    }

    /// A group whose packets may be longer than a slot: one of up to `max_len` bytes (longer
    /// ones are cut) takes as many consecutive slots as it needs, so small slots hold small
    /// packets densely — better for the cache than slots of the largest size — and large
    /// packets are still stored whole. `max_len` is raised to `slot_size` and lowered to half
    /// the PBuf. `shared`: in memory files ([`Group::new_shared`]).
    pub fn create(
        slots: u32,
        slot_size: u32,
        max_len: u32,
        pref: Preference,
        shared: bool,
    ) -> io::Result<Group> {
        let l = Layout::new(slots, slot_size, max_len);
        if !shared {
            return Ok(Group::build(
                pref,
                l,
                Mem::heap(l.header_words()),
                Mem::heap(l.data_words()),
                One::heap(),
            ));
        }
        let too_large = || io::Error::new(io::ErrorKind::InvalidInput, "PBuf too large");
        let bytes = l
            .header_words()
            .checked_add(l.data_words())
            .and_then(|w| w.checked_mul(8))
            .and_then(|n| n.checked_add(HEAD))
            .ok_or_else(too_large)?;
        let region = std::sync::Arc::new(Region::create("netsift-pbuf", bytes)?);
        let bad = || io::Error::other("PBuf layout");
        let head: One<Padded<GroupHead>> = One::in_region(&region, 0).ok_or_else(bad)?;
        let headers = Mem::in_region(&region, HEAD, l.header_words()).ok_or_else(bad)?;
        let words =
            Mem::in_region(&region, HEAD + l.header_words() * 8, l.data_words()).ok_or_else(bad)?;
        head.slots.store(u64::from(l.slots), Ordering::Relaxed);
        head.slot_size
            .store(u64::from(l.slot_size), Ordering::Relaxed);
        head.max_len.store(u64::from(l.max_len), Ordering::Relaxed);
        head.pref
            .store(u64::from(pref == Preference::FastReader), Ordering::Relaxed);
        head.magic.store(PBUF_MAGIC, Ordering::Release);
        Ok(Group::build(pref, l, headers, words, head))
    }

    fn build(
        pref: Preference,
        l: Layout,
        headers: Mem<AtomicU64>,
        words: Mem<AtomicU64>,
        head: One<Padded<GroupHead>>,
    ) -> Group {
        Group {
            shared: Arc::new(Shared {
                pref,
                slots: l.slots,
                slot_size: l.slot_size,
                slot_words: l.slot_words(),
                slot_shift: if (l.slot_words() * 8).is_power_of_two() {
                    (l.slot_words() * 8).trailing_zeros()
                } else {
                    u32::MAX
                },
                max_len: l.max_len,
                headers,
                words,
                head,
                w: Padded::default(),
                copies: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                table: Mutex::new(Table::default()),
                generation: AtomicU64::new(0),
                sleepers: Padded::default(),
                writer: AtomicBool::new(false),
            }),
        }
    }

    /// The longest packet the group stores (longer ones are cut).
    pub fn max_len(&self) -> u32 {
        self.shared.max_len
    }

    /// Whether the group's buffers are in memory files ([`Group::new_shared`]).
    pub fn is_shared(&self) -> bool {
        self.shared.words.region().is_some()
    }

    /// The buffer management of the group.
    pub fn preference(&self) -> Preference {
        self.shared.pref
    }

    /// The number of PBuf slots.
    pub fn slots(&self) -> u32 {
        self.shared.slots
    }

    /// The size of a PBuf slot in bytes (longer packets are cut).
    pub fn slot_size(&self) -> u32 {
        self.shared.slot_size
    }

    /// The writer of the group, or `None` while another [`Writer`] exists (there is at most
    /// one at a time: the buffers are single-writer).
    pub fn writer(&self) -> Option<Writer> {
        let s = &self.shared;
        if s.writer
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        s.set_finished(false);
        let w = s.w.load(Ordering::Relaxed);
        Some(Writer {
            shared: Arc::clone(s),
            generation: u64::MAX,
            readers: Vec::new(),
            rings: Vec::new(),
            packets: 0,
            w,
            w_index: (w % u64::from(s.slots)) as u32,
            // Readers may still hold packets of a previous writer: 0 forces a recomputation
            // at the first packet.
            r_star: 0,
            finished: false,
        })
    }

    /// Add a reader with an IBuf of `ibuf_entries` entries (at least 1). It receives what the
    /// writer delivers to its id from now on; running readers are not disturbed.
    ///
    /// # Panics
    /// In a shared group ([`Group::new_shared`]) if the memory files cannot be created; use
    /// [`Group::try_add_reader`] there.
    pub fn add_reader(&self, ibuf_entries: usize) -> (ReaderId, Reader) {
        self.try_add_reader(ibuf_entries)
            .expect("creating the IBuf's memory file")
    }

    /// [`Group::add_reader`]: in a shared group the IBuf and the reader's control page are
    /// memory files, and creating them can fail.
    pub fn try_add_reader(&self, ibuf_entries: usize) -> io::Result<(ReaderId, Reader)> {
        let cap = ibuf_entries.max(1);
        let (entries, writer) = if self.is_shared() {
            let bad = || io::Error::other("IBuf layout");
            let len = cap
                .checked_mul(std::mem::size_of::<Entry>())
                .and_then(|n| n.checked_add(2 * HEAD))
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "IBuf too large"))?;
            let ibuf = Arc::new(Region::create("netsift-ibuf", len)?);
            let head: One<Padded<IbufHead>> = One::in_region(&ibuf, 0).ok_or_else(bad)?;
            head.entries.store(cap as u64, Ordering::Relaxed);
            head.magic.store(IBUF_MAGIC, Ordering::Release);
            (
                Mem::in_region(&ibuf, 2 * HEAD, cap).ok_or_else(bad)?,
                One::in_region(&ibuf, HEAD).ok_or_else(bad)?,
            )
        } else {
            (Mem::heap(cap), One::heap())
        };
        let reader = self.control_page()?;
        let mut table = lock(&self.shared.table);
        let serial = table.next_serial;
        table.next_serial = table.next_serial.wrapping_add(1);
        let ring = Arc::new(Ring { entries, writer });
        Ok(self.register(table, serial, ring, reader))
    }

    /// A reader sharing the IBuf of reader `with`: for flows that receive exactly the same
    /// packets with the same results (the same last filter instances), so that the writer
    /// appends one entry per packet for all of them. Each reader has its own cursor and
    /// control page and starts at the IBuf's current end; the writer delivers to any one of
    /// them (a second delivery of the same packet to the IBuf is ignored). Under slow-reader
    /// preference the IBuf is full when its slowest reader has not released — what does not
    /// fit is dropped for all of them. `None` if `with` is not registered.
    pub fn try_add_reader_sharing(&self, with: ReaderId) -> io::Result<Option<(ReaderId, Reader)>> {
        let reader = self.control_page()?;
        let mut table = lock(&self.shared.table);
        let ring = match table.ibufs.get(with.index as usize) {
            Some(Some(b)) if b.serial == with.serial => Arc::clone(&b.ring),
            _ => return Ok(None),
        };
        let w = &ring.writer;
        // Start at the end: what was appended before is not this reader's.
        reader
            .r
            .store(w.w.load(Ordering::Acquire), Ordering::Relaxed);
        reader
            .appended_base
            .store(w.appended.load(Ordering::Relaxed), Ordering::Relaxed);
        reader
            .dropped_base
            .store(w.dropped.load(Ordering::Relaxed), Ordering::Relaxed);
        let serial = table.next_serial;
        table.next_serial = table.next_serial.wrapping_add(1);
        Ok(Some(self.register(table, serial, ring, reader)))
    }

    /// A new reader control page (a memory file in a shared group).
    fn control_page(&self) -> io::Result<One<Padded<ReaderSide>>> {
        if !self.is_shared() {
            return Ok(One::heap());
        }
        let ctrl = Arc::new(Region::create("netsift-ctrl", HEAD)?);
        let rs: One<Padded<ReaderSide>> =
            One::in_region(&ctrl, 0).ok_or_else(|| io::Error::other("control page layout"))?;
        rs.magic.store(CTRL_MAGIC, Ordering::Release);
        Ok(rs)
    }

    /// Enter a reader of `ring` with control page `reader` in the table.
    fn register(
        &self,
        mut table: std::sync::MutexGuard<'_, Table>,
        serial: u32,
        ring: Arc<Ring>,
        reader: One<Padded<ReaderSide>>,
    ) -> (ReaderId, Reader) {
        let ibuf = Arc::new(IBuf {
            serial,
            ring,
            reader,
            thread: Mutex::new(None),
        });
        let index = match table.ibufs.iter().position(Option::is_none) {
            Some(i) => {
                table.ibufs[i] = Some(Arc::clone(&ibuf));
                i
            }
            None => {
                table.ibufs.push(Some(Arc::clone(&ibuf)));
                table.ibufs.len() - 1
            }
        };
        self.shared.generation.fetch_add(1, Ordering::Release);
        drop(table);
        let id = ReaderId {
            index: index as u32,
            serial,
        };
        (id, Reader::new(Arc::clone(&self.shared), ibuf, id))
    }

    /// Unregister reader `id` (as dropping its [`Reader`] does): the writer no longer delivers
    /// to it and what it has not read no longer holds the PBuf. A `Reader` still held by the
    /// application reads what its IBuf already had. Returns whether `id` was registered.
    pub fn remove_reader(&self, id: ReaderId) -> bool {
        let mut table = lock(&self.shared.table);
        let removed = match table.ibufs.get_mut(id.index as usize) {
            Some(slot) if slot.as_ref().is_some_and(|b| b.serial == id.serial) => {
                if let Some(b) = slot.take() {
                    b.unpark();
                }
                true
            }
            _ => false,
        };
        if removed {
            self.shared.generation.fetch_add(1, Ordering::Release);
        }
        removed
    }

    /// The readers registered, in index order.
    pub fn readers(&self) -> Vec<ReaderId> {
        lock(&self.shared.table)
            .ibufs
            .iter()
            .enumerate()
            .filter_map(|(i, b)| {
                b.as_ref().map(|b| ReaderId {
                    index: i as u32,
                    serial: b.serial,
                })
            })
            .collect()
    }

    /// The counters of reader `id`, `None` if it is not registered (any more).
    pub fn reader_stats(&self, id: ReaderId) -> Option<ReaderStats> {
        let table = lock(&self.shared.table);
        match table.ibufs.get(id.index as usize) {
            Some(Some(b)) if b.serial == id.serial => Some(b.stats()),
            _ => None,
        }
    }

    /// The group's counters (reader counters summed over the readers registered now).
    pub fn stats(&self) -> GroupStats {
        let s = &self.shared;
        let mut st = GroupStats {
            copies: s.copies.load(Ordering::Relaxed),
            dropped: s.dropped.load(Ordering::Relaxed),
            ..GroupStats::default()
        };
        for b in lock(&s.table).ibufs.iter().flatten() {
            let r = b.stats();
            st.delivered += r.delivered;
            st.reader_dropped += r.dropped;
            st.overwritten += r.overwritten;
            st.readers += 1;
        }
        st
    }

    /// The next PBuf position the writer will write (`W`): the packets written so far.
    pub fn write_position(&self) -> u64 {
        self.shared.w.load(Ordering::Relaxed)
    }

    /// Whether the writer finished ([`Writer::finish`] or dropped) and has not written since:
    /// readers then drain what is left and stop.
    pub fn is_finished(&self) -> bool {
        self.shared.finished()
    }
}

/// The writer's view of one IBuf ring and its readers.
struct WriterRing {
    ring: Arc<Ring>,
    /// The readers' ends (their cursors `R_i` and wait targets).
    readers: Vec<Arc<IBuf>>,
    /// `W_i` (the writer's copy) and its ring index.
    w: u64,
    w_index: usize,
    /// The oldest of the readers' `R_i` as last loaded.
    r_cache: u64,
    /// The PBuf position of the last entry appended (entries must not go backwards; a second
    /// delivery of it is ignored).
    last_pos: Option<u64>,
    /// The slot (position, index) last offered to the ring and whether it was appended (a packet
    /// delivered through several readers of the ring is offered once).
    last_offer: Option<(u64, u32, bool)>,
    /// The writer's packet count when a packet was last noted dropped here (counted once for
    /// the readers sharing the ring).
    last_drop: Option<u64>,
    appended: u64,
    dropped: u64,
}

impl WriterRing {
    /// The oldest `R_i` of the ring's readers (never past `W_i`: a reader in another process
    /// may store anything), loaded with `Acquire` — their reads of everything before it
    /// happen before our next write of those entries and slots.
    fn oldest_r(&self) -> u64 {
        self.readers
            .iter()
            .map(|b| b.reader.r.load(Ordering::Acquire).min(self.w))
            .min()
            .unwrap_or(self.w)
    }

    fn note_dropped(&mut self) {
        self.dropped += 1;
        self.ring
            .writer
            .dropped
            .store(self.dropped, Ordering::Relaxed);
    }
}

/// The single writer of a group ([`Group::writer`]): copies packets into the PBuf and appends
/// entries to the IBufs. Dropping it marks the group finished (waiting readers return).
pub struct Writer {
    shared: Arc<Shared>,
    /// The table generation `readers` mirrors.
    generation: u64,
    /// Per reader index: its serial and its ring's index in `rings`.
    readers: Vec<Option<(u32, usize)>>,
    rings: Vec<WriterRing>,
    /// Packets offered to [`Writer::write_packet`] (written or dropped).
    packets: u64,
    /// `W` and its slot index.
    w: u64,
    w_index: u32,
    /// A lower bound of `R*` (slow-reader preference).
    r_star: u64,
    /// [`Writer::finish`] was called and nothing was written since.
    finished: bool,
}

impl fmt::Debug for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("w", &self.w)
            .field("r_star", &self.r_star)
            .finish()
    }
}

impl Writer {
    /// Mirror the group's reader table if it changed (one relaxed load when it did not).
    #[inline]
    fn refresh(&mut self) {
        if self.shared.generation.load(Ordering::Relaxed) != self.generation {
            self.refresh_slow();
        }
    }

    #[cold]
    fn refresh_slow(&mut self) {
        let table = lock(&self.shared.table);
        // Read under the lock: a reader added after this load bumps it again.
        self.generation = self.shared.generation.load(Ordering::Relaxed);
        let mut old = std::mem::take(&mut self.rings);
        self.readers = Vec::with_capacity(table.ibufs.len());
        for b in &table.ibufs {
            let Some(b) = b else {
                self.readers.push(None);
                continue;
            };
            let k = match self
                .rings
                .iter()
                .position(|r| Arc::ptr_eq(&r.ring, &b.ring))
            {
                Some(k) => k,
                None => {
                    let ring = &b.ring;
                    let wr = match old.iter().position(|r| Arc::ptr_eq(&r.ring, ring)) {
                        Some(k) => {
                            let mut wr = old.swap_remove(k);
                            wr.readers.clear();
                            wr
                        }
                        None => {
                            let w = ring.writer.w.load(Ordering::Relaxed);
                            WriterRing {
                                ring: Arc::clone(ring),
                                readers: Vec::new(),
                                w,
                                w_index: (w % b.cap()) as usize,
                                r_cache: w,
                                last_pos: None,
                                last_offer: None,
                                last_drop: None,
                                appended: ring.writer.appended.load(Ordering::Relaxed),
                                dropped: ring.writer.dropped.load(Ordering::Relaxed),
                            }
                        }
                    };
                    self.rings.push(wr);
                    self.rings.len() - 1
                }
            };
            self.rings[k].readers.push(Arc::clone(b));
            self.readers.push(Some((b.serial, k)));
        }
        for wr in &mut self.rings {
            wr.r_cache = wr.oldest_r();
        }
    }

    /// The ring of reader `id` in `self.rings`, if the reader is registered.
    fn ring_index(&mut self, id: ReaderId) -> Option<usize> {
        self.refresh();
        let i = id.index as usize;
        let found = |r: &[Option<(u32, usize)>]| match r.get(i) {
            Some(Some((serial, k))) if *serial == id.serial => Some(*k),
            _ => None,
        };
        if let Some(k) = found(&self.readers) {
            return Some(k);
        }
        // The id may be newer than our mirror of the table.
        self.refresh_slow();
        found(&self.readers)
    }

    /// Recompute `R*`: the oldest PBuf position a reader holds, `W` if none holds any.
    #[cold]
    fn recompute_r_star(&mut self) -> u64 {
        let mut r_star = self.w;
        for wr in &mut self.rings {
            let r = wr.oldest_r();
            wr.r_cache = r;
            if r < wr.w {
                let e = &wr.ring.entries[(r % wr.ring.entries.len() as u64) as usize];
                // Our own store: entries at or after R_i are not overwritten under SRP.
                r_star = r_star.min(e.pos.load(Ordering::Relaxed));
            }
        }
        self.r_star = r_star;
        r_star
    }

    /// The number of PBuf slots.
    pub fn slots(&self) -> u32 {
        self.shared.slots
    }

    /// Copy `pkt` into the next PBuf slot (cut to the slot size) and return its reference, or
    /// `None` when the PBuf is full under slow-reader preference (the packet is dropped and
    /// counted for the group; count it for the readers that accepted it with
    /// [`Writer::note_dropped`], or use [`Writer::write`], which does both).
    ///
    /// Call it once per packet, however many readers accept it, then [`Writer::deliver`] the
    /// slot to each of them.
    pub fn write_packet(&mut self, pkt: &Pkt<'_>) -> Option<SlotRef> {
        self.refresh();
        self.packets = self.packets.wrapping_add(1);
        if self.finished {
            self.finished = false;
            self.shared.set_finished(false);
        }
        let s = &*self.shared;
        let slots = u64::from(s.slots);
        let len = pkt.data.len().min(s.max_len as usize);
        // A packet takes `k` consecutive slots and never wraps: at the end of the ring the
        // remaining slots are skipped (`pad` positions nobody refers to).
        let k = s.slots_for(len);
        let pad = if self.w_index + k > s.slots {
            s.slots - self.w_index
        } else {
            0
        };
        let pos = self.w + u64::from(pad);
        let end = pos + u64::from(k);
        if s.pref == Preference::SlowReader
            && end - self.r_star > slots
            && end - self.recompute_r_star() > slots
        {
            let s = &self.shared;
            s.dropped
                .store(s.dropped.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            return None;
        }
        let s = &*self.shared;
        let index = if pad > 0 { 0 } else { self.w_index };
        let head = s.header(index);
        let data = &pkt.data[..len];
        let ts = pkt.timestamp;
        let lens = ((len as u64) << 32) | u64::from(pkt.wire_len);
        let tail = (u64::from(ts.nanos()) << 32) | u64::from(pkt.link_type.0);
        match s.pref {
            Preference::FastReader => {
                // Seqlock write: mark every slot it covers busy before any byte changes (a
                // reader validates a packet by its first slot's sequence word; see the
                // module docs for why that covers the slots after it).
                for j in 0..k {
                    s.header(index + j)[0].store(0, Ordering::Relaxed);
                }
                fence(Ordering::Release);
                head[1].store(lens, Ordering::Relaxed);
                head[2].store(ts.secs() as u64, Ordering::Relaxed);
                head[3].store(tail, Ordering::Relaxed);
                // PERF: word-by-word relaxed stores rather than memcpy — a reader may be
                // copying these words right now, and only atomic accesses make that defined.
                let body = s.data(index, len);
                let mut chunks = data.chunks_exact(8);
                for (word, c) in body.iter().zip(&mut chunks) {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(c);
                    word.store(u64::from_ne_bytes(b), Ordering::Relaxed);
                }
                let rest = chunks.remainder();
                if !rest.is_empty() {
                    let mut b = [0u8; 8];
                    b[..rest.len()].copy_from_slice(rest);
                    body[len / 8].store(u64::from_ne_bytes(b), Ordering::Relaxed);
                }
                for j in 1..k {
                    s.header(index + j)[0].store(pos + u64::from(j) + 1, Ordering::Release);
                }
            }
            Preference::SlowReader => {
                head[1].store(lens, Ordering::Relaxed);
                head[2].store(ts.secs() as u64, Ordering::Relaxed);
                head[3].store(tail, Ordering::Relaxed);
                let dst = s.data(index, len).as_ptr() as *mut u8;
                // SAFETY: `dst` points at the data words of slots `index .. index + k`,
                // contiguous and at least `len` bytes, owned by the group and derived from a
                // shared reference to atomics (interior mutability, so writing through it is
                // allowed). No reader accesses these bytes now: under slow-reader preference a
                // reader reads slots only through an IBuf entry it has not released, and the
                // check above (`end − R* ≤ slots`) proves that no reader holds an entry naming
                // a packet in any of these slots; its reads of it happened before its
                // `Release` of `R_i`, which we loaded with `Acquire` in `recompute_r_star`.
                // Readers of the new packet synchronise with the `Release` stores below.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, len) };
                for j in 1..k {
                    s.header(index + j)[0].store(pos + u64::from(j) + 1, Ordering::Relaxed);
                }
            }
        }
        head[0].store(pos + 1, Ordering::Release);
        self.w = end;
        let next = index + k;
        self.w_index = if next == s.slots { 0 } else { next };
        s.w.store(self.w, Ordering::Relaxed);
        s.copies
            .store(s.copies.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        Some(SlotRef { seq: pos, index })
    }

    /// Append an entry (`slot`, `result`) to the IBuf of reader `id`. Returns `false` when the
    /// entry was not appended: the reader's IBuf is full under slow-reader preference (counted
    /// as dropped for the reader), the slot was overwritten since it was written or is older
    /// than the reader's last entry (counted as dropped too), or `id` is not registered (not
    /// counted). Under fast-reader preference a live reader always gets the entry.
    pub fn deliver(&mut self, id: ReaderId, slot: SlotRef, result: u32) -> bool {
        self.deliver_capped(id, slot, result, u32::MAX)
    }

    /// [`Writer::deliver`], the reader seeing at most `cap` bytes of the packet (its flow cut
    /// the packet shorter than another flow of the group that shares the copy).
    pub fn deliver_capped(&mut self, id: ReaderId, slot: SlotRef, result: u32, cap: u32) -> bool {
        let Some(k) = self.ring_index(id) else {
            return false;
        };
        let s = &*self.shared;
        let w_pbuf = self.w;
        let w_index = self.w_index;
        let slots = u64::from(s.slots);
        let mut r_star = self.r_star;
        let wr = &mut self.rings[k];
        if let Some((seq, index, appended)) = wr.last_offer
            && (seq, index) == (slot.seq, slot.index)
        {
            // Already offered to this IBuf through another of its readers.
            return appended;
        }
        wr.last_offer = Some((slot.seq, slot.index, false));
        let entries = wr.ring.entries.len() as u64;
        // The slot must still hold the packet (written, not yet overwritten), entries must not
        // go backwards (R* relies on it), and the index must be the one this group wrote the
        // position to — a `SlotRef` of another group must not make a reader read a slot it
        // does not hold.
        let back = w_pbuf.wrapping_sub(slot.seq);
        let stale = slot.seq >= w_pbuf
            || back > slots
            || wr.last_pos.is_some_and(|last| slot.seq < last)
            || slot.index != ring_back(w_index, back as u32, s.slots);
        if stale {
            wr.note_dropped();
            return false;
        }
        if s.pref == Preference::SlowReader {
            if wr.w - wr.r_cache >= entries {
                wr.r_cache = wr.oldest_r();
                if wr.w - wr.r_cache >= entries {
                    wr.note_dropped();
                    return false;
                }
            }
            // The readers now hold `slot.seq`; keep the cached R* a lower bound.
            r_star = r_star.min(slot.seq);
        }
        let e = &wr.ring.entries[wr.w_index];
        if s.pref == Preference::FastReader {
            e.tag.store(0, Ordering::Relaxed);
            fence(Ordering::Release);
        }
        e.pos.store(slot.seq, Ordering::Relaxed);
        e.meta.store(
            (u64::from(slot.index) << 32) | u64::from(result),
            Ordering::Relaxed,
        );
        e.cap.store(cap, Ordering::Relaxed);
        e.tag.store(wr.w + 1, Ordering::Release);
        wr.w += 1;
        wr.w_index = if wr.w_index + 1 == entries as usize {
            0
        } else {
            wr.w_index + 1
        };
        wr.last_pos = Some(slot.seq);
        wr.last_offer = Some((slot.seq, slot.index, true));
        wr.appended += 1;
        // Publish the entry (and, through the slot's own Release, its bytes).
        let ws = &wr.ring.writer;
        ws.w.store(wr.w, Ordering::Release);
        ws.appended.store(wr.appended, Ordering::Relaxed);
        if s.sleepers.load(Ordering::Relaxed) != 0 {
            for b in &wr.readers {
                b.wake_if_waiting(wr.w);
            }
        }
        self.r_star = r_star;
        true
    }

    /// Count a packet accepted by reader `id` as dropped for it (the PBuf was full). Returns
    /// `false` if `id` is not registered. Readers sharing an IBuf count a packet once, however
    /// many of them it is noted for.
    pub fn note_dropped(&mut self, id: ReaderId) -> bool {
        let packets = self.packets;
        match self.ring_index(id) {
            Some(k) => {
                let wr = &mut self.rings[k];
                if wr.last_drop != Some(packets) {
                    wr.last_drop = Some(packets);
                    wr.note_dropped();
                }
                true
            }
            None => false,
        }
    }

    /// Write `pkt` once and deliver it to each `(reader, result)` of `to`: the slot, or
    /// `None` if the PBuf was full (then the packet is counted as dropped for the group and for
    /// each reader) or `to` is empty (nothing is copied).
    pub fn write(&mut self, pkt: &Pkt<'_>, to: &[(ReaderId, u32)]) -> Option<SlotRef> {
        if to.is_empty() {
            return None;
        }
        match self.write_packet(pkt) {
            Some(slot) => {
                for &(id, result) in to {
                    self.deliver(id, slot, result);
                }
                Some(slot)
            }
            None => {
                for &(id, _) in to {
                    self.note_dropped(id);
                }
                None
            }
        }
    }

    /// [`Writer::write`] with a byte limit per reader: `(reader, result, cap)`; the packet is
    /// copied once (as long as `pkt`), each reader seeing at most `cap` bytes of it.
    pub fn write_capped(&mut self, pkt: &Pkt<'_>, to: &[(ReaderId, u32, u32)]) -> Option<SlotRef> {
        if to.is_empty() {
            return None;
        }
        match self.write_packet(pkt) {
            Some(slot) => {
                for &(id, result, cap) in to {
                    self.deliver_capped(id, slot, result, cap);
                }
                Some(slot)
            }
            None => {
                for &(id, _, _) in to {
                    self.note_dropped(id);
                }
                None
            }
        }
    }
}

impl Writer {
    /// Tell the readers that nothing more comes (the input ended): waiting readers return and
    /// [`Reader::is_finished`] becomes true once they have read everything. Writing again
    /// undoes it. Dropping the writer does the same.
    pub fn finish(&mut self) {
        self.finished = true;
        self.shared.set_finished(true);
        // Wake every waiting reader: there is nothing more to wait for.
        for b in lock(&self.shared.table).ibufs.iter().flatten() {
            b.unpark();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.finish();
        self.shared.writer.store(false, Ordering::Release);
    }
}

/// A packet as a reader sees it, borrowed from the reader ([`Reader::next`]).
#[derive(Clone, Copy, Debug)]
pub struct Delivered<'a> {
    /// The stored bytes (at most the slot size). Under slow-reader preference they are the
    /// PBuf slot itself (zero copy); under fast-reader preference a validated copy.
    pub data: &'a [u8],
    /// The length on the wire.
    pub wire_len: u32,
    /// When it was captured.
    pub timestamp: Timestamp,
    /// The link type of `data`.
    pub link_type: LinkType,
    /// The filter's result.
    pub result: u32,
    /// Where the packet was in the PBuf.
    pub slot: SlotRef,
    /// Packets of this reader overwritten just before this one (fast-reader preference).
    pub lost_before: u64,
}

impl Delivered<'_> {
    /// An owned copy.
    pub fn to_owned(&self) -> OwnedPacket {
        OwnedPacket {
            data: self.data.to_vec(),
            wire_len: self.wire_len,
            timestamp: self.timestamp,
            link_type: self.link_type,
            result: self.result,
            slot: self.slot,
            lost_before: self.lost_before,
        }
    }
}

/// A packet copied out of the buffers ([`Reader::next_batch`], the iterators, callbacks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedPacket {
    /// The stored bytes (at most the slot size).
    pub data: Vec<u8>,
    /// The length on the wire.
    pub wire_len: u32,
    /// When it was captured.
    pub timestamp: Timestamp,
    /// The link type of `data`.
    pub link_type: LinkType,
    /// The filter's result.
    pub result: u32,
    /// Where the packet was in the PBuf.
    pub slot: SlotRef,
    /// Packets of this reader overwritten just before this one (fast-reader preference).
    pub lost_before: u64,
}

/// A slot's header as read.
#[derive(Clone, Copy)]
struct Meta {
    wire_len: u32,
    timestamp: Timestamp,
    link_type: LinkType,
    result: u32,
    slot: SlotRef,
}

#[inline]
fn decode_header(slot: &[AtomicU64], slot_size: u32) -> (usize, u32, Timestamp, LinkType) {
    let lens = slot[1].load(Ordering::Relaxed);
    let secs = slot[2].load(Ordering::Relaxed) as i64;
    let tail = slot[3].load(Ordering::Relaxed);
    // `min`: under fast-reader preference a torn header is possible (and rejected later);
    // it must not send the copy out of the slot.
    let len = ((lens >> 32) as usize).min(slot_size as usize);
    (
        len,
        lens as u32,
        Timestamp::new(secs, (tail >> 32) as u32),
        LinkType(tail as u32),
    )
}

/// How long a waiting reader sleeps before it looks again: `most`, or less to wake at
/// `deadline`; `None` once the deadline has passed.
fn nap(most: Duration, deadline: Option<Instant>) -> Option<Duration> {
    match deadline {
        None => Some(most),
        Some(d) => {
            let now = Instant::now();
            (now < d).then(|| most.min(d - now))
        }
    }
}

/// A reader of a group: the application end of one flow, with its own IBuf ([`Group::add_reader`]).
/// Dropping it unregisters it and releases its hold on the PBuf.
pub struct Reader {
    shared: Arc<Shared>,
    ibuf: Arc<IBuf>,
    id: ReaderId,
    /// The private read cursor (≥ the released `R_i`) and its ring index.
    r: u64,
    r_index: usize,
    /// `W_i` as last loaded.
    w_cache: u64,
    delivered: u64,
    overwritten: u64,
    /// Overwritten packets not yet reported in a `lost_before`.
    lost_pending: u64,
    /// Fast-reader preference: the validated copy `next` lends out.
    scratch: Vec<u8>,
    closed: bool,
    /// Attached to another process's buffers ([`Reader::attach`]): waits on a futex the
    /// creator wakes ([`Reader::wake_attached`]).
    attached: bool,
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("id", &self.id)
            .field("r", &self.r)
            .field("stats", &self.stats())
            .finish()
    }
}

/// The result of trying to read one entry under fast-reader preference.
enum Step {
    /// Nothing to read.
    Empty,
    /// The entry or its slot was overwritten (counted).
    Lost,
    /// A packet, its bytes copied into the destination buffer.
    Got(Meta),
}

impl Reader {
    fn new(shared: Arc<Shared>, ibuf: Arc<IBuf>, id: ReaderId) -> Reader {
        // A reader attached to existing buffers starts at the released position.
        let r = ibuf.reader.r.load(Ordering::Acquire);
        Reader {
            r,
            r_index: (r % ibuf.cap()) as usize,
            w_cache: r,
            delivered: ibuf.reader.delivered.load(Ordering::Relaxed),
            overwritten: ibuf.reader.overwritten.load(Ordering::Relaxed),
            lost_pending: 0,
            scratch: Vec::new(),
            closed: false,
            attached: false,
            shared,
            ibuf,
            id,
        }
    }

    /// The memory files of a reader of a shared group ([`Group::new_shared`]), to hand to the
    /// process that will read it with [`Reader::attach`]; `None` for heap buffers.
    pub fn shared_regions(&self) -> Option<SharedRegions<'_>> {
        Some(SharedRegions {
            pbuf: self.shared.words.region()?,
            ibuf: self.ibuf.ring.entries.region()?,
            ctrl: self.ibuf.reader.region()?,
        })
    }

    /// A reader over buffers another process created ([`Reader::shared_regions`]), mapped in
    /// this one: the PBuf and IBuf (read-only mappings suffice) and the control page
    /// (read-write). The layouts are checked; the reader starts at the released position `R_i`.
    ///
    /// Other readers may share the IBuf (each with its own control page); dropping an attached
    /// reader releases nothing in the creator (the creator removes the reader when the process goes away). It waits by
    /// re-checking its IBuf every [`RECHECK`] (the writer cannot wake a thread of another
    /// process).
    pub fn attach(pbuf: Region, ibuf: Region, ctrl: Region) -> Result<Reader, AttachError> {
        let err = |m: &str| AttachError(m.to_string());
        if !ctrl.is_writable() {
            return Err(err("the control page must be mapped writable"));
        }
        let (pbuf, ibuf, ctrl) = (Arc::new(pbuf), Arc::new(ibuf), Arc::new(ctrl));
        let head: One<Padded<GroupHead>> =
            One::in_region(&pbuf, 0).ok_or_else(|| err("the PBuf is too short"))?;
        if head.magic.load(Ordering::Acquire) != PBUF_MAGIC {
            return Err(err("the PBuf is not a netsift packet buffer"));
        }
        let slots = u32::try_from(head.slots.load(Ordering::Relaxed))
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| err("the PBuf's slot count is invalid"))?;
        let slot_size = u32::try_from(head.slot_size.load(Ordering::Relaxed))
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| err("the PBuf's slot size is invalid"))?;
        let pref = match head.pref.load(Ordering::Relaxed) {
            0 => Preference::SlowReader,
            1 => Preference::FastReader,
            _ => return Err(err("the PBuf's buffer policy is invalid")),
        };
        let max_len = u32::try_from(head.max_len.load(Ordering::Relaxed))
            .ok()
            .filter(|&n| n >= slot_size)
            .ok_or_else(|| err("the PBuf's largest packet is invalid"))?;
        let l = Layout::new(slots, slot_size, max_len);
        if l.max_len != max_len {
            return Err(err("the PBuf's largest packet does not fit its slots"));
        }
        let short = || err("the PBuf is shorter than its slots");
        let headers = Mem::in_region(&pbuf, HEAD, l.header_words()).ok_or_else(short)?;
        let words = l
            .header_words()
            .checked_mul(8)
            .and_then(|o| Mem::in_region(&pbuf, HEAD + o, l.data_words()))
            .ok_or_else(short)?;
        let ihead: One<Padded<IbufHead>> =
            One::in_region(&ibuf, 0).ok_or_else(|| err("the IBuf is too short"))?;
        if ihead.magic.load(Ordering::Acquire) != IBUF_MAGIC {
            return Err(err("the IBuf is not a netsift index buffer"));
        }
        let cap = usize::try_from(ihead.entries.load(Ordering::Relaxed))
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| err("the IBuf's entry count is invalid"))?;
        let entries = Mem::in_region(&ibuf, 2 * HEAD, cap)
            .ok_or_else(|| err("the IBuf is shorter than its entries"))?;
        let writer = One::in_region(&ibuf, HEAD).ok_or_else(|| err("the IBuf is too short"))?;
        let reader: One<Padded<ReaderSide>> =
            One::in_region(&ctrl, 0).ok_or_else(|| err("the control page is too short"))?;
        if reader.magic.load(Ordering::Acquire) != CTRL_MAGIC {
            return Err(err("the control page is not a netsift reader page"));
        }
        let group = Group::build(pref, l, headers, words, head);
        // No writer in this process.
        group.shared.writer.store(true, Ordering::Relaxed);
        let ibuf = Arc::new(IBuf {
            serial: 0,
            ring: Arc::new(Ring { entries, writer }),
            reader,
            thread: Mutex::new(None),
        });
        let mut reader = Reader::new(
            group.shared,
            ibuf,
            ReaderId {
                index: 0,
                serial: 0,
            },
        );
        reader.attached = true;
        Ok(reader)
    }

    /// The buffer policy of the reader's group.
    pub fn preference(&self) -> Preference {
        self.shared.pref
    }

    /// The reader's id (for [`Writer::deliver`]).
    pub fn id(&self) -> ReaderId {
        self.id
    }

    /// The capacity of the reader's IBuf.
    pub fn capacity(&self) -> usize {
        self.ibuf.ring.entries.len()
    }

    /// The reader's counters.
    pub fn stats(&self) -> ReaderStats {
        self.ibuf.stats()
    }

    /// Entries appended and not read yet (as of now; under fast-reader preference at most the
    /// IBuf capacity, some of which may turn out overwritten).
    pub fn available(&mut self) -> usize {
        self.w_cache = self.load_w();
        (self.w_cache - self.r).min(self.ibuf.cap()) as usize
    }

    /// Whether the group's writer was dropped and this reader has read everything.
    pub fn is_finished(&mut self) -> bool {
        // Load the state first: entries appended before the writer finished are then visible.
        self.shared.finished() && self.available() == 0
    }

    /// `W_i`, never behind this reader's cursor (a writer in another process is not trusted to
    /// keep that).
    #[inline]
    fn load_w(&self) -> u64 {
        self.ibuf.ring.writer.w.load(Ordering::Acquire).max(self.r)
    }

    /// The ring index of the next entry to read and its position, the cursor moved past it;
    /// `None` when nothing is available. A writer in another process is not trusted to keep
    /// `W_i` within a ring of the cursor: a reader more than a ring behind skips to the oldest
    /// entry still there (counted as overwritten), so it never walks 2^64 entries.
    #[inline]
    fn take_entry(&mut self) -> Option<(usize, u64)> {
        if self.r == self.w_cache {
            self.w_cache = self.load_w();
            if self.r == self.w_cache {
                return None;
            }
        }
        let cap = self.ibuf.cap();
        if self.w_cache - self.r > cap {
            let skip = self.w_cache - cap - self.r;
            self.lose(skip);
            self.r = self.r.wrapping_add(skip);
            self.r_index = (self.r % cap) as usize;
        }
        let taken = (self.r_index, self.r);
        self.prefetch_ahead(cap);
        self.r = self.r.wrapping_add(1);
        self.r_index = if self.r_index + 1 == cap as usize {
            0
        } else {
            self.r_index + 1
        };
        Some(taken)
    }

    /// Fast-reader preference: read one entry and copy its bytes into `dst`, validating the
    /// entry's and the slot's sequence words around the copy (seqlock).
    #[inline]
    fn step_copy(&mut self, dst: &mut Vec<u8>) -> Step {
        let Some((index, pos_r)) = self.take_entry() else {
            return Step::Empty;
        };
        let e = &self.ibuf.ring.entries[index];
        let t1 = e.tag.load(Ordering::Acquire);
        let pos = e.pos.load(Ordering::Relaxed);
        let meta = e.meta.load(Ordering::Relaxed);
        let cap = e.cap.load(Ordering::Relaxed) as usize;
        fence(Ordering::Acquire);
        let t2 = e.tag.load(Ordering::Relaxed);
        if t1 != pos_r.wrapping_add(1) || t2 != t1 {
            self.lose(1);
            // The writer lapped us: look where it is now, to skip ahead in one step.
            self.w_cache = self.load_w();
            return Step::Lost;
        }
        let slot_ref = SlotRef {
            seq: pos,
            index: (meta >> 32) as u32,
        };
        let s = &*self.shared;
        if slot_ref.index >= s.slots {
            // Only a torn entry could say so, and torn entries were rejected above.
            self.lose(1);
            return Step::Lost;
        }
        let slot = s.header(slot_ref.index);
        let s1 = slot[0].load(Ordering::Acquire);
        if s1 != pos.wrapping_add(1) {
            self.lose(1);
            return Step::Lost;
        }
        let (len, wire_len, timestamp, link_type) = decode_header(slot, s.max_len);
        let len = len.min(cap).min(s.room(slot_ref.index));
        let words = s.data(slot_ref.index, len);
        dst.clear();
        dst.resize(words.len() * 8, 0);
        for (bytes, word) in dst.chunks_exact_mut(8).zip(words) {
            bytes.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
        }
        dst.truncate(len);
        fence(Ordering::Acquire);
        if slot[0].load(Ordering::Relaxed) != s1 {
            #[cfg(test)]
            tests::TORN.fetch_add(1, Ordering::Relaxed);
            self.lose(1);
            return Step::Lost;
        }
        self.deliver_one();
        Step::Got(Meta {
            wire_len,
            timestamp,
            link_type,
            result: meta as u32,
            slot: slot_ref,
        })
    }

    /// PERF: the entries and slots were just written by another core; ask for the entry
    /// [`AHEAD`]` × 2` positions on and for the slot header and first bytes of the packet
    /// [`AHEAD`] on (its entry was asked for [`AHEAD`] reads ago), so that the misses overlap
    /// with the application's work on the packets in between.
    #[inline(always)]
    fn prefetch_ahead(&self, cap: u64) {
        let avail = self.w_cache.wrapping_sub(self.r);
        let wrap = |i: usize| {
            if i >= cap as usize {
                i - cap as usize
            } else {
                i
            }
        };
        // `avail <= cap` and `avail > 2 × AHEAD`: the index is less than twice `cap`.
        if avail > 2 * AHEAD && avail <= cap {
            let far = wrap(self.r_index + 2 * AHEAD as usize);
            prefetch(self.ibuf.ring.entries[far..].as_ptr().cast());
        }
        if avail > AHEAD && avail <= cap {
            let near = wrap(self.r_index + AHEAD as usize);
            let index = (self.ibuf.ring.entries[near].meta.load(Ordering::Relaxed) >> 32) as u32;
            let s = &*self.shared;
            if index < s.slots {
                prefetch(s.header(index).as_ptr().cast());
                let base = index as usize * s.slot_words;
                prefetch(s.words[base..].as_ptr().cast());
            }
        }
    }

    /// [`Reader::next`] under slow-reader preference: the packet is read in its slot, on the
    /// path a libpcap capture loop takes per packet (PERF: no copy, no intermediate `Step`).
    #[inline]
    fn next_in_place(&mut self) -> Option<Delivered<'_>> {
        loop {
            let (at, _) = self.take_entry()?;
            let e = &self.ibuf.ring.entries[at];
            // Relaxed: the entries before `W_i` were published by the writer's `Release` store
            // of `W_i`, which `load_w` read with `Acquire`.
            let pos = e.pos.load(Ordering::Relaxed);
            let meta = e.meta.load(Ordering::Relaxed);
            let ecap = e.cap.load(Ordering::Relaxed) as usize;
            let index = (meta >> 32) as u32;
            let s = &*self.shared;
            if index >= s.slots {
                self.lose(1);
                continue;
            }
            let slot = s.header(index);
            // Always so with a writer that keeps the protocol; not taken on trust.
            if slot[0].load(Ordering::Relaxed) != pos.wrapping_add(1) {
                self.lose(1);
                continue;
            }
            let (len, wire_len, timestamp, link_type) = decode_header(slot, s.max_len);
            let len = len.min(ecap).min(s.room(index));
            self.deliver_one();
            let lost_before = std::mem::take(&mut self.lost_pending);
            return Some(Delivered {
                data: self.slot_bytes(index, len),
                wire_len,
                timestamp,
                link_type,
                result: meta as u32,
                slot: SlotRef { seq: pos, index },
                lost_before,
            });
        }
    }

    fn lose(&mut self, n: u64) {
        // Wrapping: the counters start from the control page, which another process writes.
        self.overwritten = self.overwritten.wrapping_add(n);
        self.lost_pending = self.lost_pending.wrapping_add(n);
        self.ibuf
            .reader
            .overwritten
            .store(self.overwritten, Ordering::Relaxed);
    }

    #[inline]
    fn deliver_one(&mut self) {
        self.delivered = self.delivered.wrapping_add(1);
        self.ibuf
            .reader
            .delivered
            .store(self.delivered, Ordering::Relaxed);
    }

    /// The `len` bytes of the packet at slot `index` under slow-reader preference.
    #[inline]
    fn slot_bytes(&self, index: u32, len: usize) -> &[u8] {
        let p = self.shared.data(index, len).as_ptr() as *const u8;
        // SAFETY: `p` points at the data words of the packet's slots, contiguous and at least
        // `len` bytes (`len` was bounded by `room`), initialised (atomics start at 0). Under
        // slow-reader preference the writer does not write these slots while the entry naming
        // the packet is unreleased: this reader releases it only in `release`, which takes
        // `&mut self` and so cannot run while the returned borrow of `self` lives; dropping
        // the reader (which releases the hold) cannot either. The writer's copy of the bytes
        // happened before (its `Release` store of `W_i`, our `Acquire` load in `load_w`).
        unsafe { std::slice::from_raw_parts(p, len) }
    }

    /// The next packet, or `None` if none is available now. Under fast-reader preference,
    /// overwritten packets are skipped (counted in [`ReaderStats::overwritten`] and in
    /// [`Delivered::lost_before`]); the packet returned is never torn.
    ///
    /// The packet stays held (slow-reader preference: the writer will not reuse its slot) until
    /// [`Reader::release`]; call it after a batch.
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> Option<Delivered<'_>> {
        if self.shared.pref == Preference::SlowReader {
            return self.next_in_place();
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let meta = loop {
            match self.step_copy(&mut scratch) {
                Step::Empty => {
                    self.scratch = scratch;
                    return None;
                }
                Step::Lost => continue,
                Step::Got(m) => break m,
            }
        };
        self.scratch = scratch;
        let lost_before = std::mem::take(&mut self.lost_pending);
        Some(Delivered {
            data: &self.scratch[..],
            wire_len: meta.wire_len,
            timestamp: meta.timestamp,
            link_type: meta.link_type,
            result: meta.result,
            slot: meta.slot,
            lost_before,
        })
    }

    /// The next packet copied out, or `None` if none is available now (not released).
    pub fn next_owned(&mut self) -> Option<OwnedPacket> {
        if self.shared.pref == Preference::SlowReader {
            return self.next_in_place().map(|d| d.to_owned());
        }
        let mut buf = Vec::new();
        let meta = loop {
            match self.step_copy(&mut buf) {
                Step::Empty => return None,
                Step::Lost => continue,
                Step::Got(m) => break m,
            }
        };
        Some(OwnedPacket {
            data: buf,
            wire_len: meta.wire_len,
            timestamp: meta.timestamp,
            link_type: meta.link_type,
            result: meta.result,
            slot: meta.slot,
            lost_before: std::mem::take(&mut self.lost_pending),
        })
    }

    /// Copy up to `max` available packets to the end of `out`, then [`Reader::release`] them;
    /// returns how many were added.
    pub fn next_batch(&mut self, max: usize, out: &mut Vec<OwnedPacket>) -> usize {
        let mut n = 0;
        while n < max {
            match self.next_owned() {
                Some(p) => {
                    out.push(p);
                    n += 1;
                }
                None => break,
            }
        }
        self.release();
        n
    }

    /// Release everything read so far: the writer may reuse those entries and slots (slow-reader
    /// preference). One `Release` store; call it per batch, not per packet.
    #[inline]
    pub fn release(&mut self) {
        self.ibuf.reader.r.store(self.r, Ordering::Release);
    }

    /// Block until at least `n` packets are available (`n` is clamped to 1 ..= the IBuf
    /// capacity), `timeout` passed, or the writer finished; returns the number available.
    /// Packets read and not released stay held while waiting — release before waiting under
    /// slow-reader preference, or the writer may stop at this reader.
    pub fn wait_for(&mut self, n: usize, timeout: Duration) -> usize {
        let deadline = Instant::now().checked_add(timeout);
        self.wait_until(n, deadline, None)
    }

    fn wait_until(
        &mut self,
        n: usize,
        deadline: Option<Instant>,
        stop: Option<&AtomicBool>,
    ) -> usize {
        let n = n.clamp(1, self.capacity());
        let avail = self.available();
        if avail >= n || self.shared.finished() {
            return avail;
        }
        if self.attached {
            return self.wait_attached(n, deadline, stop);
        }
        let ibuf = Arc::clone(&self.ibuf);
        *lock(&ibuf.thread) = Some(thread::current());
        let target = self.r + n as u64;
        ibuf.reader.wait_target.store(target, Ordering::SeqCst);
        self.shared.sleepers.fetch_add(1, Ordering::SeqCst);
        let avail = loop {
            // Pairs with nothing on the writer side (see the module docs): RECHECK bounds a
            // missed wake-up.
            fence(Ordering::SeqCst);
            let finished = self.shared.finished();
            let avail = self.available();
            if avail >= n || finished || stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                break avail;
            }
            let Some(nap) = nap(RECHECK, deadline) else {
                break avail;
            };
            if ibuf.reader.wait_target.load(Ordering::Relaxed) == 0 {
                // The writer took the target when it woke us; set it again.
                ibuf.reader.wait_target.store(target, Ordering::SeqCst);
            }
            thread::park_timeout(nap);
        };
        ibuf.reader.wait_target.store(0, Ordering::Relaxed);
        self.shared.sleepers.fetch_sub(1, Ordering::SeqCst);
        avail
    }

    /// [`Reader::wait_until`] for a reader of another process's buffers: announce the target
    /// in the control page, then sleep on the futex of `W_i` (the low 32 bits of the word,
    /// shared through the memory file) until the creator wakes us ([`Reader::wake_attached`])
    /// or [`ATTACHED_RECHECK`] passes.
    fn wait_attached(
        &mut self,
        n: usize,
        deadline: Option<Instant>,
        stop: Option<&AtomicBool>,
    ) -> usize {
        let ibuf = Arc::clone(&self.ibuf);
        let target = self.r + n as u64;
        let avail = loop {
            ibuf.reader.wait_target.store(target, Ordering::SeqCst);
            // Pairs with the creator's fence in `wake_attached`: either it sees the target or
            // we see its `W_i`.
            fence(Ordering::SeqCst);
            let w = ibuf.ring.writer.w.load(Ordering::Acquire);
            let finished = self.shared.finished();
            let avail = self.available();
            if avail >= n || finished || stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                break avail;
            }
            let Some(nap) = nap(ATTACHED_RECHECK, deadline) else {
                break avail;
            };
            futex_wait(&ibuf.ring.writer.w, w as u32, nap);
        };
        ibuf.reader.wait_target.store(0, Ordering::Relaxed);
        avail
    }

    /// On the creator's side of a reader another process attached to: wake that process if it
    /// waits ([`Reader::wait_for`]) and what it waits for has arrived — or, with `force`,
    /// whatever it waits for (the input ended). One load when nobody waits; call it after a
    /// batch of packets, not per packet. Returns whether a wake-up was sent.
    pub fn wake_attached(&self, force: bool) -> bool {
        // Pairs with the waiter's fence: our `W_i` store (before this call) or its target.
        fence(Ordering::SeqCst);
        let rs = &self.ibuf.reader;
        let target = rs.wait_target.load(Ordering::Relaxed);
        if target == 0 {
            return false;
        }
        let w = self.ibuf.ring.writer.w.load(Ordering::Relaxed);
        if (w >= target || force)
            && rs
                .wait_target
                .compare_exchange(target, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            futex_wake(&self.ibuf.ring.writer.w);
            return true;
        }
        false
    }

    /// [`Reader::wake_attached`] for the readers of one batch in a row: readers sharing an IBuf
    /// ([`Group::try_add_reader_sharing`]) wait on one futex word, and one wake-up reaches all
    /// of them — `woken` (empty at the start of the batch) remembers the IBufs already woken,
    /// so that each costs one system call per batch, not one per reader. Returns whether a
    /// wake-up was sent.
    pub fn wake_attached_once(&self, force: bool, woken: &mut Vec<usize>) -> bool {
        let key = Arc::as_ptr(&self.ibuf.ring) as usize;
        if !force && woken.contains(&key) {
            // Woken with the others (the same word, changed before that wake-up): a reader
            // that set its target since then sees the new `W_i` before it sleeps.
            fence(Ordering::SeqCst);
            let rs = &self.ibuf.reader;
            let target = rs.wait_target.load(Ordering::Relaxed);
            if target != 0 && self.ibuf.ring.writer.w.load(Ordering::Relaxed) >= target {
                let _ = rs.wait_target.compare_exchange(
                    target,
                    0,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            return false;
        }
        let sent = self.wake_attached(force);
        if sent {
            woken.push(key);
        }
        sent
    }

    /// A non-blocking iterator over the packets available now, copied out; it releases them
    /// when dropped (and every 64 packets).
    pub fn iter(&mut self) -> Iter<'_> {
        Iter {
            reader: self,
            since_release: 0,
        }
    }

    /// A blocking iterator: yields packets as they arrive and ends when the writer has finished
    /// and everything was read. Releases every 64 packets and before it waits.
    pub fn blocking_iter(&mut self) -> BlockingIter<'_> {
        BlockingIter {
            reader: self,
            since_release: 0,
        }
    }

    /// Hand the reader to a thread that calls `f` with every `n` packets (`n` clamped to 1 ..=
    /// the IBuf capacity), or with what arrived (at least one packet) when `every` passed since
    /// the last call, until [`Callbacks::stop`] or the writer finished (then a last call gets
    /// the rest). Packets are released after each call.
    pub fn on_every<F>(self, n: usize, every: Duration, f: F) -> Callbacks
    where
        F: FnMut(&[OwnedPacket]) + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let handle = thread::spawn(move || {
            let mut reader = self;
            reader.run_callbacks(n, every, &stop2, f);
            reader
        });
        Callbacks { stop, handle }
    }

    fn run_callbacks<F>(&mut self, n: usize, every: Duration, stop: &AtomicBool, mut f: F)
    where
        F: FnMut(&[OwnedPacket]),
    {
        let n = n.clamp(1, self.capacity());
        let mut batch = Vec::with_capacity(n);
        let mut last = Instant::now();
        loop {
            let deadline = last.checked_add(every);
            let avail = self.wait_until(n, deadline, Some(stop));
            let stopping = stop.load(Ordering::Relaxed);
            let finished = self.shared.finished();
            let due = deadline.is_some_and(|d| Instant::now() >= d);
            if avail >= n || (avail > 0 && (due || finished)) {
                batch.clear();
                let take = if avail >= n { n } else { avail };
                self.next_batch(take, &mut batch);
                if !batch.is_empty() {
                    f(&batch);
                }
                last = Instant::now();
            } else if due {
                last = Instant::now();
            }
            if stopping || (finished && self.available() == 0) {
                break;
            }
        }
    }

    /// Unregister the reader and release its hold on the PBuf (what dropping it does).
    pub fn close(mut self) {
        self.unregister();
    }

    fn unregister(&mut self) {
        if std::mem::replace(&mut self.closed, true) {
            return;
        }
        let mut table = lock(&self.shared.table);
        if let Some(slot) = table.ibufs.get_mut(self.id.index as usize)
            && slot.as_ref().is_some_and(|b| b.serial == self.id.serial)
        {
            *slot = None;
        }
        self.shared.generation.fetch_add(1, Ordering::Release);
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.unregister();
    }
}

/// A non-blocking iterator over available packets ([`Reader::iter`]).
pub struct Iter<'a> {
    reader: &'a mut Reader,
    since_release: u32,
}

impl fmt::Debug for Iter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter")
            .field("reader", &self.reader)
            .finish()
    }
}

impl Iterator for Iter<'_> {
    type Item = OwnedPacket;

    fn next(&mut self) -> Option<OwnedPacket> {
        let p = self.reader.next_owned();
        self.since_release += 1;
        if p.is_none() || self.since_release >= 64 {
            self.reader.release();
            self.since_release = 0;
        }
        p
    }
}

impl Drop for Iter<'_> {
    fn drop(&mut self) {
        self.reader.release();
    }
}

/// A blocking iterator over packets until the writer finished ([`Reader::blocking_iter`]).
pub struct BlockingIter<'a> {
    reader: &'a mut Reader,
    since_release: u32,
}

impl fmt::Debug for BlockingIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingIter")
            .field("reader", &self.reader)
            .finish()
    }
}

impl Iterator for BlockingIter<'_> {
    type Item = OwnedPacket;

    fn next(&mut self) -> Option<OwnedPacket> {
        loop {
            if let Some(p) = self.reader.next_owned() {
                self.since_release += 1;
                if self.since_release >= 64 {
                    self.reader.release();
                    self.since_release = 0;
                }
                return Some(p);
            }
            self.reader.release();
            self.since_release = 0;
            if self.reader.is_finished() {
                return None;
            }
            self.reader.wait_until(1, None, None);
        }
    }
}

impl Drop for BlockingIter<'_> {
    fn drop(&mut self) {
        self.reader.release();
    }
}

/// A reader driven by a callback thread ([`Reader::on_every`]).
#[derive(Debug)]
pub struct Callbacks {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Reader>,
}

impl Callbacks {
    /// Stop the callbacks (after the current one) and get the reader back. If the callback
    /// panicked, the panic is resumed here.
    pub fn stop(self) -> Reader {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.thread().unpark();
        self.join()
    }

    /// Wait until the callbacks end by themselves (the writer finished and everything was
    /// delivered) and get the reader back.
    pub fn join(self) -> Reader {
        match self.handle.join() {
            Ok(r) => r,
            Err(e) => std::panic::resume_unwind(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Reads that found their slot overwritten after copying it (so tests can show that the
    /// race they exercise happens).
    pub(super) static TORN: AtomicU64 = AtomicU64::new(0);

    /// The length of test packet `seq`: 16 ..= 215 bytes.
    fn len_of(seq: u64) -> usize {
        16 + (seq.wrapping_mul(7) % 200) as usize
    }

    /// Test packet `seq`: its number, then bytes that depend on it.
    fn payload(seq: u64) -> Vec<u8> {
        let mut v = vec![0; len_of(seq)];
        v[..8].copy_from_slice(&seq.to_le_bytes());
        for (i, b) in v[8..].iter_mut().enumerate() {
            *b = (seq as u8).wrapping_mul(31).wrapping_add(i as u8);
        }
        v
    }

    /// The number of an intact test packet (cut to `snap` bytes), `None` if it is torn.
    fn check(data: &[u8], snap: usize) -> Option<u64> {
        let seq = u64::from_le_bytes(data.get(..8)?.try_into().ok()?);
        let want = payload(seq);
        (want[..want.len().min(snap)] == *data).then_some(seq)
    }

    fn pkt(data: &[u8]) -> Pkt<'_> {
        Pkt {
            data,
            wire_len: data.len() as u32,
            timestamp: Timestamp::new(data.len() as i64, 7),
            link_type: LinkType::ETHERNET,
        }
    }

    /// Burn a little CPU: a deliberately slow reader.
    fn dawdle(n: u32) {
        for i in 0..n {
            std::hint::black_box(i);
            std::hint::spin_loop();
        }
    }

    /// Map a shared reader's regions as another process would: PBuf and IBuf from read-only
    /// descriptors, the control page read-write.
    fn attach_like_a_client(r: &Reader) -> Reader {
        let regions = r.shared_regions().expect("a shared group");
        let ro = |reg: &Region| Region::map(reg.read_only_fd().unwrap(), false).unwrap();
        let ctrl = Region::map(regions.ctrl.fd().try_clone_to_owned().unwrap(), true).unwrap();
        Reader::attach(ro(regions.pbuf), ro(regions.ibuf), ctrl).unwrap()
    }

    #[test]
    fn readers_sharing_an_ibuf_each_read_every_entry_once() {
        for pref in [Preference::SlowReader, Preference::FastReader] {
            let g = Group::new(64, 256, pref);
            let (a, mut ra) = g.add_reader(16);
            let mut w = g.writer().unwrap();
            for seq in 0..5u64 {
                w.write(&pkt(&payload(seq)), &[(a, 1)]);
            }
            // B joins at the IBuf's end: the first five packets are not its.
            let (b, mut rb) = g.try_add_reader_sharing(a).unwrap().unwrap();
            assert!(
                Arc::ptr_eq(&ra.ibuf.ring, &rb.ibuf.ring),
                "one ring for both"
            );
            let (c, mut rc) = g.add_reader(16);
            let (mut got_a, mut got_b, mut got_c) = (Vec::new(), Vec::new(), Vec::new());
            for seq in 5..45u64 {
                // Delivered through both of the sharing readers (as a plan naming both would):
                // one entry.
                w.write(&pkt(&payload(seq)), &[(a, 1), (b, 1), (c, 2)]);
                for (r, got) in [(&mut ra, &mut got_a), (&mut rb, &mut got_b)] {
                    while let Some(d) = r.next() {
                        assert_eq!(d.result, 1);
                        got.push(check(d.data, usize::MAX).expect("intact"));
                    }
                    r.release();
                }
                while let Some(d) = rc.next() {
                    got_c.push(check(d.data, usize::MAX).expect("intact"));
                }
                rc.release();
            }
            assert_eq!(got_a, (0..45).collect::<Vec<_>>(), "{pref:?}");
            assert_eq!(got_b, (5..45).collect::<Vec<_>>(), "{pref:?}");
            assert_eq!(got_c, (5..45).collect::<Vec<_>>(), "{pref:?}");
            let (sa, sb) = (g.reader_stats(a).unwrap(), g.reader_stats(b).unwrap());
            assert_eq!((sa.appended, sa.delivered), (45, 45), "{pref:?}");
            assert_eq!((sb.appended, sb.delivered), (40, 40), "{pref:?}");
            // A leaves; B keeps reading the ring.
            drop(ra);
            for seq in 45..50u64 {
                w.write(&pkt(&payload(seq)), &[(b, 1)]);
            }
            let mut more = Vec::new();
            while let Some(d) = rb.next() {
                more.push(check(d.data, usize::MAX).expect("intact"));
            }
            assert_eq!(more, (45..50).collect::<Vec<_>>());
            assert!(g.try_add_reader_sharing(a).unwrap().is_none(), "A is gone");
        }
    }

    #[test]
    fn a_shared_ibuf_is_full_when_its_slowest_reader_is_behind() {
        let g = Group::new(64, 256, Preference::SlowReader);
        let (a, mut ra) = g.add_reader(8);
        let (b, mut rb) = g.try_add_reader_sharing(a).unwrap().unwrap();
        let mut w = g.writer().unwrap();
        // A reads everything at once; B reads nothing: the ring holds 8 entries.
        for seq in 0..12u64 {
            w.write(&pkt(&payload(seq)), &[(a, 0), (b, 0)]);
            while ra.next().is_some() {}
            ra.release();
        }
        let (sa, sb) = (g.reader_stats(a).unwrap(), g.reader_stats(b).unwrap());
        // Dropped once per packet for the ring, however many readers it was noted for.
        assert_eq!((sa.appended, sa.dropped, sa.delivered), (8, 4, 8));
        assert_eq!((sb.appended, sb.dropped, sb.delivered), (8, 4, 0));
        let got: Vec<u64> =
            std::iter::from_fn(|| rb.next().map(|d| check(d.data, 999).unwrap())).collect();
        assert_eq!(got, (0..8).collect::<Vec<_>>());
        rb.release();
        w.write(&pkt(&payload(12)), &[(a, 0), (b, 0)]);
        assert_eq!(check(rb.next().unwrap().data, 999), Some(12));
        assert_eq!(check(ra.next().unwrap().data, 999), Some(12));
        // A full PBuf counts a packet dropped once for the ring too.
        let g = Group::new(2, 256, Preference::SlowReader);
        let (a, _ra) = g.add_reader(8);
        let (b, _rb) = g.try_add_reader_sharing(a).unwrap().unwrap();
        let mut w = g.writer().unwrap();
        for seq in 0..5u64 {
            w.write(&pkt(&payload(seq)), &[(a, 0), (b, 0)]);
        }
        assert_eq!(g.reader_stats(a).unwrap().dropped, 3);
        assert_eq!(g.reader_stats(b).unwrap().dropped, 3);
    }

    #[test]
    fn attached_readers_share_an_ibuf_through_their_own_control_pages() {
        let g = Group::new_shared(64, 256, Preference::SlowReader).unwrap();
        let (a, ra) = g.try_add_reader(32).unwrap();
        let (b, rb) = g.try_add_reader_sharing(a).unwrap().unwrap();
        let (x, y) = (ra.shared_regions().unwrap(), rb.shared_regions().unwrap());
        assert_eq!(
            x.ibuf.fd().as_raw_fd(),
            y.ibuf.fd().as_raw_fd(),
            "one IBuf file"
        );
        assert_ne!(x.ctrl.fd().as_raw_fd(), y.ctrl.fd().as_raw_fd());
        let mut ca = attach_like_a_client(&ra);
        let mut cb = attach_like_a_client(&rb);
        let mut w = g.writer().unwrap();
        for seq in 0..20u64 {
            w.write(&pkt(&payload(seq)), &[(b, 3)]);
        }
        for c in [&mut ca, &mut cb] {
            let got: Vec<u64> =
                std::iter::from_fn(|| c.next().map(|d| check(d.data, 999).unwrap())).collect();
            assert_eq!(got, (0..20).collect::<Vec<_>>());
            c.release();
        }
        assert_eq!(g.reader_stats(a).unwrap().delivered, 20);
        assert_eq!(g.reader_stats(b).unwrap().delivered, 20);
    }

    #[test]
    fn shared_groups_are_read_through_mappings() {
        for pref in [Preference::SlowReader, Preference::FastReader] {
            let g = Group::new_shared(8, 256, pref).unwrap();
            assert!(g.is_shared());
            let (a, ra) = g.try_add_reader(16).unwrap();
            let (b, rb) = g.try_add_reader(16).unwrap();
            let mut ca = attach_like_a_client(&ra);
            let mut cb = attach_like_a_client(&rb);
            assert_eq!(ca.preference(), pref);
            assert!(
                Group::new(4, 64, pref)
                    .add_reader(4)
                    .1
                    .shared_regions()
                    .is_none()
            );
            let mut w = g.writer().unwrap();
            let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
            for seq in 0..40u64 {
                let p = payload(seq);
                let to: Vec<(ReaderId, u32)> = [(a, 1), (b, 2)]
                    .into_iter()
                    .filter(|&(id, _)| id != b || seq % 3 == 0)
                    .collect();
                w.write(&pkt(&p), &to);
                // Reader A keeps up; B reads every 10 packets.
                while let Some(d) = ca.next() {
                    assert_eq!(d.result, 1);
                    got_a.push(check(d.data, usize::MAX).expect("intact"));
                }
                ca.release();
                if seq % 10 == 9 {
                    while let Some(d) = cb.next() {
                        assert_eq!(d.result, 2);
                        got_b.push(check(d.data, usize::MAX).expect("intact"));
                    }
                    cb.release();
                }
            }
            // The creator sees the attached readers' counters through the control pages. Under
            // slow-reader preference B's held slots make the group drop packets (for A too).
            let sa = g.reader_stats(a).unwrap();
            assert_eq!(sa.delivered, got_a.len() as u64);
            assert_eq!(sa.delivered + sa.dropped, 40, "{pref:?} {sa:?}");
            assert!(got_a.windows(2).all(|w| w[0] < w[1]));
            if pref == Preference::FastReader {
                assert_eq!(got_a, (0..40).collect::<Vec<_>>());
            } else {
                assert!(sa.dropped > 0, "B held the PBuf");
            }
            let sb = g.reader_stats(b).unwrap();
            assert!(sb.appended <= 14);
            assert_eq!(
                sb.delivered + sb.dropped + sb.overwritten,
                14,
                "{pref:?} {sb:?}"
            );
            assert_eq!(got_b.len() as u64, sb.delivered);
            assert!(!cb.is_finished());
            drop(w);
            assert!(cb.is_finished(), "the finished flag is in the PBuf");
            // Regions the wrong way round are refused with a message.
            let regions = ra.shared_regions().unwrap();
            let rw =
                |reg: &Region| Region::map(reg.fd().try_clone_to_owned().unwrap(), true).unwrap();
            let e =
                Reader::attach(rw(regions.ibuf), rw(regions.pbuf), rw(regions.ctrl)).unwrap_err();
            assert_eq!(e.to_string(), "the PBuf is not a netsift packet buffer");
            let e =
                Reader::attach(rw(regions.pbuf), rw(regions.ctrl), rw(regions.ctrl)).unwrap_err();
            assert_eq!(e.to_string(), "the IBuf is not a netsift index buffer");
            let ro_ctrl = Region::map(regions.ctrl.read_only_fd().unwrap(), false).unwrap();
            let e = Reader::attach(rw(regions.pbuf), rw(regions.ibuf), ro_ctrl).unwrap_err();
            assert!(e.to_string().contains("writable"));
        }
    }

    #[test]
    fn futex_wake_crosses_mappings_and_attached_readers_are_woken() {
        let g = Group::new_shared(8, 64, Preference::SlowReader).unwrap();
        let (id, creator) = g.try_add_reader(8).unwrap();
        // The futex itself: a waiter on the read-only mapping (another address) is woken
        // through the creator's mapping long before its 5 s timeout.
        let client = attach_like_a_client(&creator);
        let t = Instant::now();
        let waiter = thread::spawn(move || {
            let w = &client.ibuf.ring.writer.w;
            futex_wait(w, w.load(Ordering::Relaxed) as u32, Duration::from_secs(5));
            client
        });
        let mut client = loop {
            thread::sleep(Duration::from_millis(20));
            futex_wake(&creator.ibuf.ring.writer.w);
            if waiter.is_finished() {
                break waiter.join().unwrap();
            }
            assert!(
                t.elapsed() < Duration::from_secs(4),
                "the wake-up never arrived"
            );
        };
        // The protocol: the attached reader announces its target; the creator wakes it once
        // the packet is there.
        assert!(!creator.wake_attached(false), "nobody waits yet");
        let waiter = thread::spawn(move || {
            let n = client.wait_for(1, Duration::from_secs(10));
            (n, client)
        });
        while creator.ibuf.reader.wait_target.load(Ordering::SeqCst) == 0 {
            thread::yield_now();
        }
        let mut w = g.writer().unwrap();
        w.write(&pkt(&payload(1)), &[(id, 0)]).unwrap();
        let woke = creator.wake_attached(false);
        let (n, mut client) = waiter.join().unwrap();
        assert_eq!(n, 1);
        assert!(woke || creator.ibuf.reader.wait_target.load(Ordering::SeqCst) == 0);
        assert_eq!(check(client.next().unwrap().data, 256), Some(1));
    }

    #[test]
    fn a_lying_reader_cannot_break_the_writer() {
        let g = Group::new_shared(4, 64, Preference::SlowReader).unwrap();
        let (a, ra) = g.try_add_reader(4).unwrap();
        let client = attach_like_a_client(&ra);
        let ctrl = Arc::clone(client.ibuf.reader.region().unwrap());
        let r: Mem<AtomicU64> = Mem::in_region(&ctrl, 0, 1).unwrap();
        let mut w = g.writer().unwrap();
        for (i, lie) in [u64::MAX, 7, 0, u64::MAX / 2].into_iter().enumerate() {
            r[0].store(lie, Ordering::Release);
            let p = payload(i as u64);
            w.write(&pkt(&p), &[(a, 1)]);
        }
        let st = g.reader_stats(a).unwrap();
        assert_eq!(st.appended + st.dropped, 4);
    }

    #[test]
    fn srp_single_thread_semantics() {
        let g = Group::new(4, 64, Preference::SlowReader);
        let (a, mut ra) = g.add_reader(16);
        let (b, mut rb) = g.add_reader(16);
        let mut w = g.writer().unwrap();
        let p0 = payload(0);
        let s0 = w.write(&pkt(&p0), &[(a, 10), (b, 20)]).unwrap();
        assert_eq!((s0.seq(), s0.index(), s0.wrap(4)), (0, 0, 0));
        w.write(&pkt(&payload(1)), &[(a, 11)]).unwrap();
        let long = payload(12); // 100 bytes, cut to 64
        assert_eq!(long.len(), 100);
        w.write(&pkt(&long), &[(b, 22)]).unwrap();
        assert_eq!(w.write(&pkt(&payload(3)), &[]), None, "nobody accepted it");
        assert_eq!(g.stats().copies, 3);

        let d = ra.next().unwrap();
        assert_eq!((check(d.data, 64), d.result, d.slot), (Some(0), 10, s0));
        assert_eq!(d.wire_len as usize, len_of(0));
        assert_eq!(d.timestamp, Timestamp::new(len_of(0) as i64, 7));
        assert_eq!(d.link_type, LinkType::ETHERNET);
        let d = ra.next().unwrap();
        assert_eq!(
            (check(d.data, 64), d.result, d.slot.seq()),
            (Some(1), 11, 1)
        );
        assert!(ra.next().is_none());
        assert_eq!(rb.next().unwrap().result, 20);
        let d = rb.next().unwrap();
        assert_eq!((d.data.len(), d.wire_len, d.result), (64, 100, 22));
        assert_eq!(check(d.data, 64), Some(12));

        // Nothing released: the PBuf (4 slots) is full after one more packet.
        assert!(w.write(&pkt(&payload(4)), &[(a, 1), (b, 1)]).is_some());
        assert_eq!(w.write(&pkt(&payload(5)), &[(a, 1), (b, 1)]), None);
        assert_eq!(g.stats().dropped, 1);
        assert_eq!(ra.stats().dropped, 1);
        assert_eq!(rb.stats().dropped, 1);
        // A releases; B still holds slot 0 (its entry for packet 0 is unreleased).
        ra.release();
        assert_eq!(w.write(&pkt(&payload(6)), &[(a, 1)]), None);
        assert_eq!(ra.stats().dropped, 2);
        rb.release();
        let s = w.write(&pkt(&payload(7)), &[(a, 7)]).unwrap();
        assert_eq!((s.seq(), s.index(), s.wrap(4)), (4, 0, 1));
        // The old reference to position 0 is stale now.
        assert!(!w.deliver(b, s0, 0));
        assert_eq!(rb.stats().dropped, 2);
        let d = ra.next().unwrap();
        assert_eq!((check(d.data, 64), d.result), (Some(4), 1));
        let d = ra.next().unwrap();
        assert_eq!((check(d.data, 64), d.result), (Some(7), 7));

        // A full IBuf drops for that reader only.
        let (c, mut rc) = g.add_reader(2);
        ra.release();
        assert_eq!(rb.next().map(|d| check(d.data, 64)), Some(Some(4)));
        rb.release();
        for i in 0..3 {
            let s = w.write_packet(&pkt(&payload(100 + i))).unwrap();
            assert_eq!(w.deliver(c, s, 0), i < 2);
            assert!(w.deliver(a, s, 0));
        }
        assert_eq!(rc.stats().dropped, 1);
        assert_eq!(rc.stats().appended, 2);
        assert_eq!(rc.next().map(|d| check(d.data, 64)), Some(Some(100)));
        drop(rc);
        let s = w.write_packet(&pkt(&payload(9))).unwrap();
        assert!(!w.deliver(c, s, 0), "removed reader");
        assert!(!w.note_dropped(c));
        assert_eq!(g.readers(), vec![a, b]);
        assert_eq!(g.reader_stats(c), None);
        assert_eq!(g.reader_stats(a).unwrap().appended, 7);
    }

    #[test]
    fn a_slot_of_another_group_is_refused() {
        let g1 = Group::new(4, 64, Preference::SlowReader);
        let g2 = Group::new(4, 64, Preference::SlowReader);
        let (id, r) = g1.add_reader(8);
        let mut w1 = g1.writer().unwrap();
        let mut w2 = g2.writer().unwrap();
        w1.write_packet(&pkt(&payload(0))).unwrap();
        w1.write_packet(&pkt(&payload(1))).unwrap();
        let s1 = w1.write_packet(&pkt(&payload(2))).unwrap();
        w2.write_packet(&pkt(&payload(0))).unwrap();
        w2.write_packet(&pkt(&payload(1))).unwrap();
        let s2 = w2.write_packet(&pkt(&payload(2))).unwrap();
        assert_eq!(
            s1, s2,
            "same position, same index: indistinguishable, and harmless"
        );
        let forged = w2.write_packet(&pkt(&payload(3))).unwrap();
        w1.write_packet(&pkt(&payload(3))).unwrap();
        w1.write_packet(&pkt(&payload(4))).unwrap();
        let mut odd = forged;
        odd.index = 1; // position 3 lives in slot 3 of g1, not slot 1
        assert!(!w1.deliver(id, odd, 0));
        assert!(w1.deliver(id, forged, 0));
        assert_eq!(r.stats().dropped, 1);
        assert_eq!(ring_back(0, 1, 4), 3);
        assert_eq!(ring_back(3, 3, 4), 0);
        assert_eq!(ring_back(1, 4, 4), 1);
    }

    #[test]
    fn writer_is_single() {
        let g = Group::new(2, 8, Preference::FastReader);
        let (id, mut r) = g.add_reader(4);
        let mut w = g.writer().unwrap();
        assert!(g.writer().is_none());
        assert!(!g.is_finished());
        w.finish();
        assert!(g.is_finished() && r.is_finished());
        assert!(
            g.writer().is_none(),
            "a finished writer is still the writer"
        );
        w.write(&pkt(&payload(0)), &[(id, 0)]).unwrap();
        assert!(!g.is_finished() && !r.is_finished());
        drop(w);
        assert!(g.is_finished() && !r.is_finished());
        assert!(r.next().is_some());
        assert!(r.is_finished());
        let _w = g.writer().unwrap();
        assert!(!g.is_finished());
    }

    #[test]
    fn a_new_writer_respects_what_readers_hold() {
        let g = Group::new(2, 64, Preference::SlowReader);
        let (id, mut r) = g.add_reader(8);
        let mut w = g.writer().unwrap();
        for i in 0..2 {
            w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
        }
        drop(w);
        let mut w = g.writer().unwrap();
        assert!(w.write(&pkt(&payload(2)), &[(id, 0)]).is_none());
        assert_eq!(r.next().map(|d| check(d.data, 64)), Some(Some(0)));
        r.release();
        let s = w.write(&pkt(&payload(3)), &[(id, 0)]).unwrap();
        assert_eq!((s.seq(), s.index()), (2, 0));
        let got: Vec<_> = r.iter().map(|p| check(&p.data, 64).unwrap()).collect();
        assert_eq!(got, vec![1, 3]);
        assert_eq!(r.stats().dropped, 1);
    }

    #[test]
    fn readers_share_one_copy() {
        for pref in [Preference::SlowReader, Preference::FastReader] {
            let g = Group::new(128, 256, pref);
            let readers: Vec<_> = (0..8).map(|_| g.add_reader(128)).collect();
            let to: Vec<_> = readers.iter().map(|(id, _)| (*id, id.index())).collect();
            let mut w = g.writer().unwrap();
            let slots: Vec<_> = (0..100)
                .map(|i| w.write(&pkt(&payload(i)), &to).unwrap())
                .collect();
            let st = g.stats();
            assert_eq!((st.copies, st.delivered, st.readers), (100, 0, 8));
            for (id, mut r) in readers {
                for (i, s) in slots.iter().enumerate() {
                    let d = r.next().unwrap();
                    assert_eq!(d.slot, *s);
                    assert_eq!(d.result, id.index());
                    assert_eq!(check(d.data, 256), Some(i as u64));
                }
                assert!(r.next().is_none());
            }
        }
    }

    #[test]
    fn srp_slow_reader_stalls_the_group_frp_does_not() {
        for pref in [Preference::SlowReader, Preference::FastReader] {
            let g = Group::new(8, 256, pref);
            let (fast, mut rf) = g.add_reader(64);
            let (slow, mut rs) = g.add_reader(64);
            let mut w = g.writer().unwrap();
            let mut got = Vec::new();
            for i in 0..32 {
                w.write(&pkt(&payload(i)), &[(fast, 1), (slow, 2)]);
                // The fast reader keeps up; the slow one never reads.
                while let Some(d) = rf.next() {
                    got.push(check(d.data, 256).unwrap());
                }
                rf.release();
            }
            let (f, s) = (rf.stats(), rs.stats());
            match pref {
                Preference::SlowReader => {
                    assert_eq!(got, (0..8).collect::<Vec<_>>());
                    assert_eq!((f.delivered, f.dropped), (8, 24));
                    assert_eq!((s.appended, s.dropped), (8, 24));
                    assert_eq!(g.stats().dropped, 24);
                }
                Preference::FastReader => {
                    assert_eq!(got, (0..32).collect::<Vec<_>>());
                    assert_eq!((f.delivered, f.dropped, f.overwritten), (32, 0, 0));
                    let mut late = Vec::new();
                    let mut lost = 0;
                    while let Some(d) = rs.next() {
                        late.push(check(d.data, 256).unwrap());
                        lost += d.lost_before;
                    }
                    assert_eq!(late, (24..32).collect::<Vec<_>>());
                    let s = rs.stats();
                    assert_eq!((s.delivered, s.overwritten, lost), (8, 24, 24));
                    assert_eq!(g.stats().overwritten, 24);
                }
            }
        }
    }

    #[test]
    fn frp_reader_skips_ahead_in_its_ibuf() {
        let g = Group::new(64, 256, Preference::FastReader);
        let (id, mut r) = g.add_reader(4);
        let mut w = g.writer().unwrap();
        for i in 0..10 {
            assert!(w.write(&pkt(&payload(i)), &[(id, 0)]).is_some());
        }
        assert_eq!(r.available(), 4);
        let got: Vec<_> = r.iter().map(|p| check(&p.data, 256).unwrap()).collect();
        assert_eq!(got, vec![6, 7, 8, 9]);
        assert_eq!(r.stats().overwritten, 6);
    }

    #[test]
    fn next_batch_and_iterators_release() {
        let g = Group::new(4, 256, Preference::SlowReader);
        let (id, mut r) = g.add_reader(4);
        let mut w = g.writer().unwrap();
        for i in 0..4 {
            w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
        }
        assert!(w.write(&pkt(&payload(4)), &[(id, 0)]).is_none());
        let mut out = Vec::new();
        assert_eq!(r.next_batch(3, &mut out), 3);
        assert_eq!(out[2].data, payload(2));
        // Released: three slots are free again.
        for i in 5..8 {
            w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
        }
        let got: Vec<_> = r.iter().map(|p| check(&p.data, 256).unwrap()).collect();
        assert_eq!(got, vec![3, 5, 6, 7]);
        w.write(&pkt(&payload(8)), &[(id, 0)]).unwrap();
        drop(w);
        let got: Vec<_> = r
            .blocking_iter()
            .map(|p| check(&p.data, 256).unwrap())
            .collect();
        assert_eq!(got, vec![8]);
        assert!(r.is_finished());
        assert_eq!(r.stats().delivered + r.stats().dropped, 9);
    }

    /// The slow-reader check of a whole batch: every slot read and not released still holds
    /// the packet that was read.
    fn assert_held(r: &Reader, batch: &[(SlotRef, u64)]) {
        for &(slot, seq) in batch {
            let words = r.shared.header(slot.index());
            assert_eq!(
                words[0].load(Ordering::Acquire),
                slot.seq() + 1,
                "overwritten"
            );
            let (len, ..) = decode_header(words, r.shared.max_len);
            assert_eq!(check(r.slot_bytes(slot.index(), len), 256), Some(seq));
        }
    }

    fn srp_threaded(k: u64) {
        let g = Group::new(32, 256, Preference::SlowReader);
        let (id, mut r) = g.add_reader(32);
        let mut w = g.writer().unwrap();
        // Before the reader runs: 32 fit, the rest is dropped (deterministic).
        for i in 0..100 {
            w.write(&pkt(&payload(i)), &[(id, i as u32)]);
        }
        let reader = thread::spawn(move || {
            let mut seen = Vec::new();
            let mut batch = Vec::new();
            loop {
                while batch.len() < 16 {
                    let Some(d) = r.next() else { break };
                    let seq = check(d.data, 256).expect("torn packet under SRP");
                    assert_eq!(d.result, seq as u32);
                    batch.push((d.slot, seq));
                    dawdle(300);
                }
                assert_held(&r, &batch);
                seen.extend(batch.drain(..).map(|(_, s)| s));
                r.release();
                if r.is_finished() {
                    break;
                }
                if r.available() == 0 {
                    r.wait_for(1, Duration::from_secs(60));
                }
            }
            (seen, r)
        });
        for i in 100..k {
            w.write(&pkt(&payload(i)), &[(id, i as u32)]);
        }
        drop(w);
        let (seen, r) = reader.join().unwrap();
        assert!(seen.windows(2).all(|p| p[0] < p[1]), "out of order");
        let st = r.stats();
        assert_eq!(st.delivered, seen.len() as u64);
        assert_eq!(st.delivered + st.dropped, k);
        assert!(st.dropped >= 68);
        assert_eq!(g.stats().dropped + g.stats().copies, k);
        assert_eq!(st.overwritten, 0);
    }

    #[test]
    fn srp_slow_reader_thread() {
        srp_threaded(20_000);
    }

    fn frp_threaded(k: u64) {
        // A PBuf as large as the run: only the slow reader's small IBuf overflows.
        let g = Group::new(k as u32, 256, Preference::FastReader);
        let (fast, mut rf) = g.add_reader(k as usize);
        let (slow, mut rs) = g.add_reader(16);
        let mut w = g.writer().unwrap();
        let to = [(fast, 1), (slow, 2)];
        for i in 0..64 {
            w.write(&pkt(&payload(i)), &to).unwrap();
        }
        let fast_t = thread::spawn(move || {
            let mut next = 0;
            while !rf.is_finished() {
                while let Some(d) = rf.next() {
                    assert_eq!(check(d.data, 256), Some(next));
                    next += 1;
                }
                rf.release();
                rf.wait_for(64, Duration::from_secs(60));
            }
            (next, rf)
        });
        let slow_t = thread::spawn(move || {
            let mut seen = Vec::new();
            while !rs.is_finished() {
                while let Some(d) = rs.next() {
                    seen.push(check(d.data, 256).expect("torn packet returned"));
                    dawdle(2_000);
                }
                rs.release();
                rs.wait_for(1, Duration::from_secs(60));
            }
            (seen, rs)
        });
        for i in 64..k {
            // The writer never waits and never drops.
            let s = w.write_packet(&pkt(&payload(i))).unwrap();
            assert!(w.deliver(fast, s, 1));
            assert!(w.deliver(slow, s, 2));
        }
        drop(w);
        let (n, rf) = fast_t.join().unwrap();
        let (seen, rs) = slow_t.join().unwrap();
        assert_eq!(n, k);
        let f = rf.stats();
        assert_eq!((f.delivered, f.overwritten, f.dropped), (k, 0, 0));
        assert!(seen.windows(2).all(|p| p[0] < p[1]), "out of order");
        let s = rs.stats();
        assert_eq!(s.delivered, seen.len() as u64);
        assert_eq!(s.delivered + s.overwritten, k);
        assert!(s.overwritten >= 48);
        assert_eq!(s.dropped, 0);
    }

    #[test]
    fn frp_fast_and_slow_reader_threads() {
        frp_threaded(20_000);
    }

    fn frp_torn(k: u64) {
        // Four slots: the writer laps the reader constantly, often mid-copy.
        frp_torn_on(Group::new(4, 256, Preference::FastReader), k);
    }

    fn frp_torn_on(g: Group, k: u64) {
        let (id, mut r) = g.add_reader(k as usize);
        let mut w = g.writer().unwrap();
        for i in 0..16 {
            w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
        }
        let ib = Arc::clone(&r.ibuf);
        let t = thread::spawn(move || {
            let mut seen = Vec::new();
            let mut lost = 0;
            while !r.is_finished() {
                while let Some(d) = r.next() {
                    let seq = check(d.data, 256).expect("torn packet returned");
                    assert_eq!(d.wire_len as usize, len_of(seq));
                    assert_eq!(d.timestamp.secs() as usize, len_of(seq));
                    lost += d.lost_before;
                    seen.push(seq);
                }
                r.release();
            }
            (seen, lost, r)
        });
        for i in 16..k {
            // Test pacing, not the buffer's: stay a few packets ahead of the reader, so that
            // the slot it copies is often the one being rewritten.
            while i > ib.reader.delivered.load(Ordering::Relaxed)
                + ib.reader.overwritten.load(Ordering::Relaxed)
                + 5
            {
                thread::yield_now();
            }
            w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
        }
        drop(w);
        let (seen, lost, r) = t.join().unwrap();
        assert!(seen.windows(2).all(|p| p[0] < p[1]), "out of order");
        let s = r.stats();
        assert_eq!(s.delivered, seen.len() as u64);
        assert_eq!(s.delivered + s.overwritten, k);
        assert_eq!(
            lost + k - 1 - seen.last().copied().unwrap_or(0),
            s.overwritten
        );
        assert!(s.overwritten >= 12);
        eprintln!(
            "{} overwritten, {} of them detected after the copy (all tests so far)",
            s.overwritten,
            TORN.load(Ordering::Relaxed)
        );
    }

    #[test]
    fn frp_overwrite_during_read_is_detected() {
        frp_torn(20_000);
    }

    #[test]
    fn frp_overwrite_of_spanning_packets_is_detected() {
        // 16 slots of 32 bytes: packets of 16 ..= 215 bytes take 1 to 7 slots, the writer laps
        // the reader constantly and overwrites the middle of packets being copied.
        let g = Group::create(16, 32, 256, Preference::FastReader, false).unwrap();
        assert_eq!(g.max_len(), 256);
        frp_torn_on(g, 20_000);
    }

    #[test]
    fn srp_spanning_packets_with_a_reader_thread() {
        let k = 20_000u64;
        let g = Group::create(32, 32, 256, Preference::SlowReader, false).unwrap();
        let (id, mut r) = g.add_reader(32);
        let mut w = g.writer().unwrap();
        let t = thread::spawn(move || {
            let mut seen = Vec::new();
            while !r.is_finished() {
                while let Some(d) = r.next() {
                    // Borrowed in place: the writer must not touch any of its slots now.
                    let seq = check(d.data, usize::MAX).expect("a held packet was overwritten");
                    seen.push(seq);
                    if seq % 5 == 0 {
                        dawdle(500);
                    }
                }
                r.release();
                r.wait_for(1, Duration::from_secs(60));
            }
            (seen, r)
        });
        for i in 0..k {
            w.write(&pkt(&payload(i)), &[(id, 0)]);
        }
        drop(w);
        let (seen, r) = t.join().unwrap();
        assert!(seen.windows(2).all(|p| p[0] < p[1]), "out of order");
        let st = r.stats();
        assert_eq!(st.delivered, seen.len() as u64);
        assert_eq!(st.delivered + st.dropped, k);
        assert!(st.delivered > 0);
    }

    #[test]
    fn spanning_packets_are_stored_whole() {
        for shared in [false, true] {
            // 64 slots of 32 bytes (max_len 256, half the ring); readers in batches.
            let g = Group::create(64, 32, 1000, Preference::SlowReader, shared).unwrap();
            assert_eq!(g.max_len(), 1000);
            let capped = Group::create(64, 32, 5000, Preference::SlowReader, false).unwrap();
            assert_eq!(capped.max_len(), 1024, "at most half the ring");
            let (id, r) = g.try_add_reader(64).unwrap();
            let mut r = if shared { attach_like_a_client(&r) } else { r };
            let mut w = g.writer().unwrap();
            let (mut got, mut written) = (Vec::new(), 0u64);
            for i in 0..3000u64 {
                if w.write(&pkt(&payload(i)), &[(id, i as u32)]).is_some() {
                    written += 1;
                }
                if i % 7 == 6 {
                    while let Some(d) = r.next() {
                        let seq = check(d.data, usize::MAX).expect("intact");
                        assert_eq!(d.result as u64, seq);
                        assert_eq!(d.wire_len as usize, len_of(seq));
                        got.push(seq);
                    }
                    r.release();
                }
            }
            while let Some(d) = r.next() {
                got.push(check(d.data, usize::MAX).expect("intact"));
            }
            r.release();
            let st = g.reader_stats(id).unwrap();
            assert_eq!(st.delivered + st.dropped, 3000, "{st:?}");
            assert_eq!(got.len() as u64, written);
            assert!(got.windows(2).all(|p| p[0] < p[1]));
            assert!(
                written > 2000,
                "{written}: dense slots hold ~10 packets of ~120 bytes"
            );
            // Longer than max_len: cut.
            let long = vec![7u8; 5000];
            w.write(&pkt(&long), &[(id, 0)]).unwrap();
            assert_eq!(r.next().unwrap().data.len(), 1000);
        }
    }

    #[test]
    fn readers_added_and_removed_mid_stream() {
        let g = Group::new(8, 256, Preference::SlowReader);
        let (a, mut ra) = g.add_reader(64);
        let mut w = g.writer().unwrap();
        for i in 0..4 {
            w.write(&pkt(&payload(i)), &[(a, 0)]).unwrap();
        }
        let (b, mut rb) = g.add_reader(64);
        for i in 4..8 {
            w.write(&pkt(&payload(i)), &[(a, 0), (b, 0)]).unwrap();
        }
        let got_b: Vec<_> = rb.iter().map(|p| check(&p.data, 256).unwrap()).collect();
        assert_eq!(got_b, vec![4, 5, 6, 7]);
        // A has not released anything: the PBuf is full because of A alone.
        assert!(w.write(&pkt(&payload(8)), &[(b, 0)]).is_none());
        assert_eq!(ra.next().map(|d| check(d.data, 256)), Some(Some(0)));
        // Removing A releases its hold.
        drop(ra);
        assert!(w.write(&pkt(&payload(9)), &[(a, 0), (b, 0)]).is_some());
        assert_eq!(rb.stats().appended, 5);
        // A's index is reused with a new serial; the stale id is refused.
        let (c, mut rc) = g.add_reader(64);
        assert_eq!(c.index(), a.index());
        assert_ne!(c, a);
        let s = w.write_packet(&pkt(&payload(10))).unwrap();
        assert!(!w.deliver(a, s, 0));
        assert!(w.deliver(c, s, 0));
        assert_eq!(rc.next().map(|d| check(d.data, 256)), Some(Some(10)));
        assert_eq!(rc.stats().appended, 1);
    }

    fn churn_threaded(k: u64) {
        let g = Group::new(256, 256, Preference::SlowReader);
        let (a, ra) = g.add_reader(256);
        let mut w = g.writer().unwrap();
        let g2 = g.clone();
        let writer = thread::spawn(move || {
            let mut to = Vec::new();
            for i in 0..k {
                if i % 16 == 0 {
                    to = g2.readers().into_iter().map(|id| (id, 0)).collect();
                }
                w.write(&pkt(&payload(i)), &to);
            }
        });
        let reader_a = thread::spawn(move || {
            let mut ra = ra;
            let seen: Vec<_> = ra
                .blocking_iter()
                .map(|p| check(&p.data, 256).unwrap())
                .collect();
            (seen, ra)
        });
        // Readers come and go while the writer and reader A run.
        for round in 0..20 {
            let (_, mut r) = g.add_reader(64);
            let mut seen = Vec::new();
            while seen.len() < 20 && !r.is_finished() {
                seen.extend(r.iter().map(|p| check(&p.data, 256).unwrap()));
                thread::yield_now();
            }
            assert!(seen.windows(2).all(|p| p[0] < p[1]), "round {round}");
            seen.extend(r.iter().map(|p| check(&p.data, 256).unwrap()));
            let st = r.stats();
            assert_eq!(st.delivered, seen.len() as u64);
            // The writer may have appended more since the last drain.
            assert!(st.appended >= st.delivered);
        }
        writer.join().unwrap();
        let (seen, ra) = reader_a.join().unwrap();
        assert!(seen.windows(2).all(|p| p[0] < p[1]));
        let st = ra.stats();
        assert_eq!(st.delivered + st.dropped, k);
        assert_eq!(g.reader_stats(a), Some(st));
    }

    #[test]
    fn readers_churn_while_writer_runs() {
        churn_threaded(20_000);
    }

    #[test]
    fn wait_for_wakes_times_out_and_ends() {
        let g = Group::new(16, 64, Preference::SlowReader);
        let (id, mut r) = g.add_reader(16);
        let mut w = g.writer().unwrap();
        let t0 = Instant::now();
        assert_eq!(r.wait_for(1, Duration::from_millis(10)), 0);
        assert!(t0.elapsed() >= Duration::from_millis(10));
        let t = thread::spawn(move || {
            let n = r.wait_for(5, Duration::from_secs(600));
            (n, r)
        });
        for i in 0..5 {
            w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
            thread::yield_now();
        }
        let (n, mut r) = t.join().unwrap();
        assert!(n >= 5);
        // A finished writer ends every wait.
        drop(w);
        assert_eq!(r.wait_for(10, Duration::from_secs(600)), 5);
        assert!(!r.is_finished());
        r.iter().for_each(drop);
        assert!(r.is_finished());
    }

    #[test]
    fn callbacks_every_n_packets_and_every_t() {
        // Every 10 packets; the rest when the writer finishes.
        let g = Group::new(64, 64, Preference::SlowReader);
        let (id, r) = g.add_reader(64);
        let mut w = g.writer().unwrap();
        for i in 0..25 {
            w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
        }
        drop(w);
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let s2 = Arc::clone(&sizes);
        let cb = r.on_every(10, Duration::from_secs(3600), move |b| {
            lock(&s2).push(b.len());
        });
        let r = cb.join();
        assert_eq!(*lock(&sizes), vec![10, 10, 5]);
        assert_eq!(r.stats().delivered, 25);

        // Every 20 ms with what arrived.
        let g = Group::new(64, 64, Preference::FastReader);
        let (id, r) = g.add_reader(64);
        let mut w = g.writer().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let cb = r.on_every(10, Duration::from_millis(20), move |b| {
            let seqs: Vec<_> = b.iter().map(|p| check(&p.data, 64).unwrap()).collect();
            tx.send(seqs).unwrap();
        });
        for i in 0..3 {
            w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
        }
        let got = rx.recv_timeout(Duration::from_secs(600)).unwrap();
        assert_eq!(got, vec![0, 1, 2]);
        let r = cb.stop();
        assert_eq!(r.stats().delivered, 3);
        drop(w);
    }
}
