//! [`Writer`]: the single writer of a group — copies packets into the PBuf once and appends
//! entries to the IBufs (slow- and fast-reader preference).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

use crate::Pkt;

use super::layout::{IBuf, Preference, ReaderId, Ring, Shared, SlotRef, lock, ring_back};
#[cfg(doc)]
use super::{Group, Reader};

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
    /// The oldest `R_i` of the ring's readers, loaded with `Acquire` — their reads of
    /// everything before it happen before our next write of those entries and slots. A reader
    /// in another process may store anything: `R_i` is bounded to the entries the IBuf can
    /// hold, `W_i - capacity ..= W_i`, so a lie can make the writer drop for this IBuf's
    /// readers (the liar's own group) and nothing else.
    fn oldest_r(&self) -> u64 {
        let lowest = self.w.saturating_sub(self.ring.entries.len() as u64);
        self.readers
            .iter()
            .map(|b| b.reader.r.load(Ordering::Acquire).clamp(lowest, self.w))
            .min()
            .unwrap_or(self.w)
    }

    fn note_dropped(&mut self, n: u64) {
        self.dropped += n;
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
    /// The writer of the group `shared`, which the caller has just claimed (its `writer`
    /// flag) and unfinished.
    pub(super) fn new(shared: Arc<Shared>) -> Writer {
        let s = &*shared;
        let w = s.w.load(Ordering::Relaxed);
        let w_index = (w % u64::from(s.slots)) as u32;
        Writer {
            shared,
            generation: u64::MAX,
            readers: Vec::new(),
            rings: Vec::new(),
            packets: 0,
            w,
            w_index,
            // Readers may still hold packets of a previous writer: 0 forces a recomputation
            // at the first packet.
            r_star: 0,
            finished: false,
        }
    }

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
            wr.note_dropped(1);
            return false;
        }
        if s.pref == Preference::SlowReader {
            if wr.w - wr.r_cache >= entries {
                wr.r_cache = wr.oldest_r();
                if wr.w - wr.r_cache >= entries {
                    wr.note_dropped(1);
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
                    wr.note_dropped(1);
                }
                true
            }
            None => false,
        }
    }

    /// Count `n` packets reader `id` lost before they reached the writer (a source's kernel
    /// ring overflowed): they show in its IBuf's `dropped`, as the writer's own drops do.
    /// Returns whether `id` is registered.
    pub fn note_lost(&mut self, id: ReaderId, n: u64) -> bool {
        match self.ring_index(id) {
            Some(k) => {
                self.rings[k].note_dropped(n);
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
