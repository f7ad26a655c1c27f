//! [`Reader`]: one IBuf's reader — packets in place (slow-reader preference) or copied and
//! validated (fast-reader preference), batches, iterators, attaching to another process's
//! buffers.

use std::fmt;
use std::sync::atomic::{Ordering, fence};
use std::sync::{Arc, Mutex};

use netsift_capture::{LinkType, Timestamp};

use crate::shm::{Mem, One, Region};

use super::group::Group;
use super::layout::{
    AttachError, CTRL_MAGIC, GroupHead, HEAD, IBUF_MAGIC, IBuf, IbufHead, Layout, Meta, PBUF_MAGIC,
    Padded, Preference, ReaderId, ReaderSide, Ring, Shared, SharedRegions, SlotRef, decode_header,
    lock,
};
use super::stats::ReaderStats;
#[cfg(doc)]
use super::{RECHECK, Writer};

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

/// A reader of a group: the application end of one flow, with its own IBuf ([`Group::add_reader`]).
/// Dropping it unregisters it and releases its hold on the PBuf.
pub struct Reader {
    pub(super) shared: Arc<Shared>,
    pub(super) ibuf: Arc<IBuf>,
    id: ReaderId,
    /// The private read cursor (≥ the released `R_i`) and its ring index.
    pub(super) r: u64,
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
    pub(super) attached: bool,
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
    pub(super) fn new(shared: Arc<Shared>, ibuf: Arc<IBuf>, id: ReaderId) -> Reader {
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
        // The application's side: the bases are the daemon's, as the control page holds them.
        let bases = (
            reader.appended_base.load(Ordering::Relaxed),
            reader.dropped_base.load(Ordering::Relaxed),
        );
        let ibuf = Arc::new(IBuf {
            serial: 0,
            ring: Arc::new(Ring { entries, writer }),
            reader,
            bases,
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
            super::tests::TORN.fetch_add(1, Ordering::Relaxed);
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
    pub(super) fn slot_bytes(&self, index: u32, len: usize) -> &[u8] {
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
}

impl Reader {
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
        BlockingIter(self.iter())
    }
}

impl Reader {
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

    /// The next available packet; releases every 64 packets and when none is left.
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

/// A blocking iterator over packets until the writer finished ([`Reader::blocking_iter`]): an
/// [`Iter`] that waits when nothing is available (having released everything read).
pub struct BlockingIter<'a>(Iter<'a>);

impl fmt::Debug for BlockingIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BlockingIter").field(&self.0.reader).finish()
    }
}

impl Iterator for BlockingIter<'_> {
    type Item = OwnedPacket;

    fn next(&mut self) -> Option<OwnedPacket> {
        loop {
            if let Some(p) = self.0.next() {
                return Some(p);
            }
            if self.0.reader.is_finished() {
                return None;
            }
            self.0.reader.wait_until(1, None, None);
        }
    }
}
