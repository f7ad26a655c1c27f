//! The buffers' memory layout and the state a group's handles share: the PBuf header and slot
//! headers, IBuf entries, the writer's and reader's control words (all `#[repr(C)]`: another
//! process maps them), the magics, the public value types ([`Preference`], [`ReaderId`],
//! [`SlotRef`]) and the shared regions of a reader.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::Thread;

use netsift_capture::{LinkType, Timestamp};

use crate::shm::{Mem, One, Plain, Region};

#[cfg(doc)]
use super::{Group, Reader, Writer};

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
    pub(super) index: u32,
    pub(super) serial: u32,
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
pub(super) fn ring_back(index: u32, back: u32, len: u32) -> u32 {
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
    pub(super) seq: u64,
    pub(super) index: u32,
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

/// Pads and aligns a value to its own cache lines (128 bytes: adjacent-line prefetch).
#[derive(Default)]
#[repr(C, align(128))]
pub(super) struct Padded<T>(T);

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
pub(super) struct Entry {
    pub(super) tag: AtomicU64,
    pub(super) pos: AtomicU64,
    pub(super) meta: AtomicU64,
    /// The most bytes of the packet this reader sees (its flow's snap length).
    pub(super) cap: AtomicU32,
}

/// The counters and indices the writer writes.
#[derive(Default)]
#[repr(C)]
pub(super) struct WriterSide {
    /// `W_i`: the next entry position.
    pub(super) w: AtomicU64,
    pub(super) appended: AtomicU64,
    pub(super) dropped: AtomicU64,
}

/// The counters and indices the reader writes.
#[derive(Default)]
#[repr(C)]
pub(super) struct ReaderSide {
    /// `R_i`: the released position.
    pub(super) r: AtomicU64,
    pub(super) delivered: AtomicU64,
    pub(super) overwritten: AtomicU64,
    /// `W_i` the waiting reader waits for (0: not waiting).
    pub(super) wait_target: AtomicU64,
    /// Shared control pages: identifies the page ([`Reader::attach`] checks it).
    pub(super) magic: AtomicU64,
    /// The IBuf's `appended` and `dropped` counters when this reader joined it (readers of
    /// one IBuf count from when each joined, [`Group::try_add_reader_sharing`]).
    pub(super) appended_base: AtomicU64,
    pub(super) dropped_base: AtomicU64,
}

/// The first 128 bytes of a PBuf: what a process that maps it needs to know, and the
/// finished flag.
#[derive(Default)]
#[repr(C)]
pub(super) struct GroupHead {
    pub(super) magic: AtomicU64,
    /// 0: slow-reader preference, 1: fast-reader preference.
    pub(super) pref: AtomicU64,
    pub(super) slots: AtomicU64,
    pub(super) slot_size: AtomicU64,
    pub(super) max_len: AtomicU64,
    /// Non-zero: the writer finished ([`Writer::finish`] or dropped) and none wrote since.
    finished: AtomicU64,
}

/// The first 128 bytes of a shared IBuf.
#[derive(Default)]
#[repr(C)]
pub(super) struct IbufHead {
    pub(super) magic: AtomicU64,
    pub(super) entries: AtomicU64,
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
pub(super) const HEAD: usize = std::mem::size_of::<Padded<GroupHead>>();
/// `nsPBUF01`, `nsIBUF01`, `nsCTRL01`: the first word of each shared region.
pub(super) const PBUF_MAGIC: u64 = u64::from_le_bytes(*b"nsPBUF01");
pub(super) const IBUF_MAGIC: u64 = u64::from_le_bytes(*b"nsIBUF01");
pub(super) const CTRL_MAGIC: u64 = u64::from_le_bytes(*b"nsCTRL01");

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
pub struct AttachError(pub(super) String);

impl fmt::Display for AttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AttachError {}

/// An index buffer proper: the ring of entries and the writer's counters. Usually one
/// reader's; readers of flows that receive exactly the same packets may share one
/// ([`Group::try_add_reader_sharing`]), each with its own cursor `R_i` in its own control page.
pub(super) struct Ring {
    pub(super) entries: Mem<Entry>,
    pub(super) writer: One<Padded<WriterSide>>,
}

/// One reader's end of an IBuf: the ring (perhaps shared) and the reader's control page.
pub(super) struct IBuf {
    pub(super) serial: u32,
    pub(super) ring: Arc<Ring>,
    /// The reader's control page: in a shared group the application writes it, so the writer
    /// reads nothing there it has not bounded ([`ReaderSide`]).
    pub(super) reader: One<Padded<ReaderSide>>,
    /// The IBuf's appended and dropped counts when this reader joined it: the writer's own
    /// copies of the control page's bases, which the application could overwrite.
    pub(super) bases: (u64, u64),
    /// The thread to unpark while the reader waits.
    pub(super) thread: Mutex<Option<Thread>>,
}

impl IBuf {
    #[inline]
    pub(super) fn cap(&self) -> u64 {
        self.ring.entries.len() as u64
    }
}

/// The readers of a group.
#[derive(Default)]
pub(super) struct Table {
    pub(super) ibufs: Vec<Option<Arc<IBuf>>>,
    pub(super) next_serial: u32,
}

/// The sizes of a PBuf, normalised.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    pub(super) slots: u32,
    pub(super) slot_size: u32,
    pub(super) max_len: u32,
}

impl Layout {
    /// At least one slot of at least one byte; `max_len` between the slot size and half the
    /// PBuf (so that a packet of `max_len` bytes always fits after the padding at the ring's
    /// end).
    pub(super) fn new(slots: u32, slot_size: u32, max_len: u32) -> Layout {
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

    pub(super) fn slot_words(self) -> usize {
        (self.slot_size as usize).div_ceil(8)
    }

    pub(super) fn header_words(self) -> usize {
        self.slots as usize * HEADER_WORDS
    }

    pub(super) fn data_words(self) -> usize {
        self.slots as usize * self.slot_words()
    }
}

/// What a group's handles share.
pub(super) struct Shared {
    pub(super) pref: Preference,
    pub(super) slots: u32,
    pub(super) slot_size: u32,
    /// Data words per slot.
    pub(super) slot_words: usize,
    /// log2 of the slot's bytes when that is a power of two (`u32::MAX` otherwise): PERF,
    /// a shift instead of a division per packet.
    pub(super) slot_shift: u32,
    /// The longest packet stored (longer ones are cut): `slot_size` or more — a packet longer
    /// than a slot takes several consecutive slots.
    pub(super) max_len: u32,
    /// The slot headers, [`HEADER_WORDS`] each: sequence word, lengths, seconds, nanoseconds
    /// and link type. Dense, apart from the data, so that a reader walks them sequentially.
    pub(super) headers: Mem<AtomicU64>,
    /// The slots' bytes, `slots * slot_words` words: consecutive slots are contiguous, so a
    /// packet spanning several is one run of bytes.
    pub(super) words: Mem<AtomicU64>,
    /// The group's header: layout (for processes that map the PBuf) and the finished flag.
    pub(super) head: One<Padded<GroupHead>>,
    /// `W`: the next PBuf position (written by the writer only).
    pub(super) w: Padded<AtomicU64>,
    pub(super) copies: AtomicU64,
    pub(super) dropped: AtomicU64,
    pub(super) table: Mutex<Table>,
    /// Bumped whenever a reader is added or removed.
    pub(super) generation: AtomicU64,
    /// Readers blocked in `wait_for`.
    pub(super) sleepers: Padded<AtomicUsize>,
    /// A [`Writer`] exists.
    pub(super) writer: AtomicBool,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves consistent data (each critical section
    // is a single assignment or push), so poisoning is ignored.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// The header of slot `index`.
    #[inline]
    pub(super) fn header(&self, index: u32) -> &[AtomicU64] {
        let base = index as usize * HEADER_WORDS;
        &self.headers[base..base + HEADER_WORDS]
    }

    /// The data words of a packet of `len` bytes starting at slot `index`.
    #[inline]
    pub(super) fn data(&self, index: u32, len: usize) -> &[AtomicU64] {
        let base = index as usize * self.slot_words;
        &self.words[base..base + len.div_ceil(8)]
    }

    /// The most bytes a packet starting at slot `index` can have (up to the ring's end): a
    /// bound the reader applies whatever a header says.
    #[inline]
    pub(super) fn room(&self, index: u32) -> usize {
        (self.slots - index.min(self.slots)) as usize * self.slot_words * 8
    }

    /// The slots a packet of `len` bytes takes.
    #[inline]
    pub(super) fn slots_for(&self, len: usize) -> u32 {
        if self.slot_shift != u32::MAX {
            let size = 1usize << self.slot_shift;
            return ((len + size - 1) >> self.slot_shift).max(1) as u32;
        }
        len.div_ceil(self.slot_words * 8).max(1) as u32
    }

    pub(super) fn finished(&self) -> bool {
        self.head.finished.load(Ordering::Acquire) != 0
    }

    pub(super) fn set_finished(&self, finished: bool) {
        self.head
            .finished
            .store(u64::from(finished), Ordering::Release);
    }
}

/// A slot's header as read.
#[derive(Clone, Copy)]
pub(super) struct Meta {
    pub(super) wire_len: u32,
    pub(super) timestamp: Timestamp,
    pub(super) link_type: LinkType,
    pub(super) result: u32,
    pub(super) slot: SlotRef,
}

#[inline]
pub(super) fn decode_header(
    slot: &[AtomicU64],
    slot_size: u32,
) -> (usize, u32, Timestamp, LinkType) {
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
