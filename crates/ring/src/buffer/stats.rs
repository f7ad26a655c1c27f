//! The counters of a group and of its readers.

use std::sync::atomic::Ordering;

use super::layout::IBuf;
#[cfg(doc)]
use super::{Group, Reader};

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

impl IBuf {
    /// The reader's counters ([`Reader::stats`], [`Group::reader_stats`]).
    pub(super) fn stats(&self) -> ReaderStats {
        let (r, w) = (&self.reader, &self.ring.writer);
        // The IBuf's counters count from when this reader joined it (the writer's own copies
        // of the bases). `delivered` and `overwritten` are the reader's own counts, as it
        // stores them in its control page.
        let (appended_base, dropped_base) = self.bases;
        ReaderStats {
            appended: w
                .appended
                .load(Ordering::Relaxed)
                .wrapping_sub(appended_base),
            delivered: r.delivered.load(Ordering::Relaxed),
            dropped: w.dropped.load(Ordering::Relaxed).wrapping_sub(dropped_base),
            overwritten: r.overwritten.load(Ordering::Relaxed),
        }
    }
}
