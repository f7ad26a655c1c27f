//! Waiting for packets: parking (in-process readers) and futexes (readers of another
//! process's buffers), the writer's wake-ups, periodic callbacks ([`Reader::on_every`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

#[cfg(doc)]
use super::Group;
use super::layout::{IBuf, lock};
use super::reader::{OwnedPacket, Reader};

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
pub(super) fn futex_wait(w: &AtomicU64, seen: u32, timeout: Duration) {
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
pub(super) fn futex_wake(w: &AtomicU64) {
    // SAFETY: as in `futex_wait`; FUTEX_WAKE does not access the word.
    unsafe {
        libc::syscall(libc::SYS_futex, futex_word(w), libc::FUTEX_WAKE, i32::MAX);
    }
}

impl IBuf {
    /// Wake the reader if it waits for `w` entries or fewer. Called by the writer only when
    /// some reader of the group waits.
    pub(super) fn wake_if_waiting(&self, w: u64) {
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

    /// Unpark the reader's thread if it waits (in this process: see [`Reader::wait_for`]).
    pub(super) fn unpark(&self) {
        if let Some(t) = lock(&self.thread).as_ref() {
            t.unpark();
        }
    }
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

impl Reader {
    /// Block until at least `n` packets are available (`n` is clamped to 1 ..= the IBuf
    /// capacity), `timeout` passed, or the writer finished; returns the number available.
    /// Packets read and not released stay held while waiting — release before waiting under
    /// slow-reader preference, or the writer may stop at this reader.
    pub fn wait_for(&mut self, n: usize, timeout: Duration) -> usize {
        let deadline = Instant::now().checked_add(timeout);
        self.wait_until(n, deadline, None)
    }

    pub(super) fn wait_until(
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
}

impl Reader {
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
