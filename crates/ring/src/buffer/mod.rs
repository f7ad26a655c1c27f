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
//! use netsift_ring::Pkt;
//! use netsift_ring::buffer::{Group, Preference};
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

mod group;
mod layout;
mod reader;
mod stats;
mod wait;
mod writer;

#[cfg(test)]
mod tests;

pub use group::Group;
pub use layout::{AttachError, Preference, ReaderId, SharedRegions, SlotRef};
pub use reader::{BlockingIter, Delivered, Iter, OwnedPacket, Reader};
pub use stats::{GroupStats, ReaderStats};
pub use wait::{ATTACHED_RECHECK, Callbacks, RECHECK};
pub use writer::Writer;
