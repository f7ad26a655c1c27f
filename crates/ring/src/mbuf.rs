//! MBuf: a filter's persistent memory, shared with the application.
//!
//! An MBuf is a fixed number of 64-bit words that live as long as the filter instance. The
//! filter writes them while it processes packets (counters, hash tables, the last addresses it
//! saw); the application reads them — and may write them, to pass parameters — at any time,
//! from any thread, without locks: every word is an atomic read or written whole (relaxed
//! ordering: a reader sees each word's latest value, not a snapshot of all words at one
//! instant). The size is given in bytes in the graph (`(bytecount,,8)`) and rounded up to whole
//! words.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::shm::{Mem, Peers, Region};

/// A filter's persistent memory: `words()` 64-bit words, shared by the filter and the
/// application (cloning shares).
#[derive(Clone, Debug, Default)]
pub struct MBuf {
    words: Arc<Mem<AtomicU64>>,
}

impl Default for Mem<AtomicU64> {
    fn default() -> Self {
        Mem::heap(0)
    }
}

impl MBuf {
    /// An MBuf of at least `bytes` bytes (rounded up to 8), all zero.
    pub fn new(bytes: usize) -> MBuf {
        MBuf {
            words: Arc::new(Mem::heap(bytes.div_ceil(8))),
        }
    }

    /// [`MBuf::new`] in a memory file, to share with another process ([`MBuf::region`],
    /// [`MBuf::attach`]).
    pub fn new_shared(bytes: usize) -> io::Result<MBuf> {
        let words = bytes.div_ceil(8);
        let region = Arc::new(Region::create("netsift-mbuf", words * 8, Peers::ReadWrite)?);
        let mem =
            Mem::in_region(&region, 0, words).ok_or_else(|| io::Error::other("MBuf layout"))?;
        Ok(MBuf {
            words: Arc::new(mem),
        })
    }

    /// An MBuf of `bytes` bytes (rounded up to 8) in a memory file another process created,
    /// mapped in this one (read-write to change parameters, read-only to watch). Fails if the
    /// region is shorter.
    pub fn attach(region: Region, bytes: usize) -> io::Result<MBuf> {
        let region = Arc::new(region);
        let mem = Mem::in_region(&region, 0, bytes.div_ceil(8)).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the MBuf's memory file is shorter than {bytes} bytes"),
            )
        })?;
        Ok(MBuf {
            words: Arc::new(mem),
        })
    }

    /// The memory file of a shared MBuf ([`MBuf::new_shared`]); `None` on the heap.
    pub fn region(&self) -> Option<&Arc<Region>> {
        self.words.region()
    }

    /// The number of 64-bit words.
    pub fn words(&self) -> usize {
        self.words.len()
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.words.len() * 8
    }

    /// Whether the MBuf has no words.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Word `i` (0 when out of range).
    pub fn get(&self, i: usize) -> u64 {
        self.words.get(i).map_or(0, |w| w.load(Ordering::Relaxed))
    }

    /// Set word `i` (ignored when out of range).
    pub fn set(&self, i: usize, v: u64) {
        if let Some(w) = self.words.get(i) {
            w.store(v, Ordering::Relaxed);
        }
    }

    /// Add `v` to word `i`, wrapping (ignored when out of range). Only the owning filter adds,
    /// so a load and a store suffice (no read-modify-write instruction on the hot path).
    pub fn add(&self, i: usize, v: u64) {
        if let Some(w) = self.words.get(i) {
            w.store(w.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
        }
    }

    /// All words, in order.
    pub fn snapshot(&self) -> Vec<u64> {
        self.words
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect()
    }

    /// Set every word to 0.
    pub fn clear(&self) {
        for w in self.words.iter() {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// Whether `self` and `other` are the same memory.
    pub fn same(&self, other: &MBuf) -> bool {
        Arc::ptr_eq(&self.words, &other.words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_shared_and_bounded() {
        let m = MBuf::new(12);
        assert_eq!(m.words(), 2);
        let app = m.clone();
        m.add(1, 5);
        m.add(1, 2);
        assert_eq!(app.get(1), 7);
        app.set(0, 9);
        assert_eq!(m.snapshot(), vec![9, 7]);
        m.set(2, 1);
        assert_eq!(m.get(2), 0);
        assert!(m.same(&app));
        m.clear();
        assert_eq!(app.snapshot(), vec![0, 0]);
    }
}
