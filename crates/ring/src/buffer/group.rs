//! [`Group`]: a flow group's buffers, its readers' table, its single writer's handle.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::shm::{Mem, One, Peers, Region};

use super::layout::{
    CTRL_MAGIC, Entry, GroupHead, HEAD, IBUF_MAGIC, IBuf, IbufHead, Layout, PBUF_MAGIC, Padded,
    Preference, ReaderId, ReaderSide, Ring, Shared, Table, lock,
};
use super::reader::Reader;
use super::stats::{GroupStats, ReaderStats};
use super::writer::Writer;

/// A flow group's buffers: the PBuf and the IBufs of its readers. Cloning shares.
#[derive(Clone)]
pub struct Group {
    pub(super) shared: Arc<Shared>,
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
        let region = std::sync::Arc::new(Region::create("netsift-pbuf", bytes, Peers::ReadOnly)?);
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

    /// The bytes of the memory file a shared group of these sizes creates for its PBuf
    /// (headers, data and the group's header, in whole pages), as [`Group::create`] would
    /// make it; `None` if too large to make.
    pub fn shared_bytes(slots: u32, slot_size: u32, max_packet: u32) -> Option<u64> {
        let l = Layout::new(slots, slot_size, max_packet);
        let bytes = l
            .header_words()
            .checked_add(l.data_words())?
            .checked_mul(8)?
            .checked_add(HEAD)?;
        Some(whole_pages(bytes))
    }

    /// The bytes of the memory files a shared reader with `entries` IBuf entries creates (its
    /// IBuf and its control page, in whole pages).
    pub fn reader_bytes(entries: usize) -> Option<u64> {
        let ibuf = entries
            .max(1)
            .checked_mul(std::mem::size_of::<Entry>())?
            .checked_add(2 * HEAD)?;
        Some(whole_pages(ibuf) + whole_pages(HEAD))
    }

    pub(super) fn build(
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
        Some(Writer::new(Arc::clone(s)))
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
            let ibuf = Arc::new(Region::create("netsift-ibuf", len, Peers::ReadOnly)?);
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
        let ctrl = Arc::new(Region::create("netsift-ctrl", HEAD, Peers::ReadWrite)?);
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
        // The page is not yet handed out: its bases are still ours.
        let bases = (
            reader.appended_base.load(Ordering::Relaxed),
            reader.dropped_base.load(Ordering::Relaxed),
        );
        let ibuf = Arc::new(IBuf {
            serial,
            ring,
            reader,
            bases,
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

/// `bytes` rounded up to whole pages, as a memory file holds them.
fn whole_pages(bytes: usize) -> u64 {
    let page = crate::shm::page_size();
    (bytes.max(1).div_ceil(page) * page) as u64
}
