//! `AF_XDP` capture: one XDP socket per receive queue, each with its own UMEM, fed by the
//! built-in redirect program (see `xdp_prog`).
//!
//! # Rings
//!
//! Each socket has four single-producer single-consumer rings shared with the kernel: the fill
//! ring (we produce frame addresses the kernel may write into), the RX ring (the kernel produces
//! descriptors of received frames), and completion and TX rings, unused for capture but required
//! by the kernel. Producer and consumer indices are free-running `u32`s; a ring of size `n`
//! (a power of two) holds entry `i` at `i & (n - 1)`. We read the other side's index with
//! acquire and publish ours with release ordering, as libxdp does.
//!
//! # What XDP sees
//!
//! The frame as the driver received it: an 802.1Q tag is in the frame unless the NIC strips it
//! in hardware (veth does not). Only received packets pass through XDP; packets redirected to
//! the sockets do **not** continue to the kernel's network stack. Timestamps are taken when a
//! batch of frames is read from the ring (copy mode offers no receive timestamp), so the packets
//! of one batch share one.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::sys::{self, Mmap};
use super::xdp_prog::{XdpAttachMode, XdpRedirect};
use super::{Direction, Flow, LiveError, LiveErrorKind, Source, SourceStats};
use crate::{LinkType, PacketRef, Timestamp};

/// Settings of an [`AfXdp`] source.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AfXdpConfig {
    /// Keep at most this many bytes of each packet (default 262144).
    pub snaplen: u32,
    /// Only this receive queue (default: every queue of the interface, one socket each).
    pub queue: Option<u32>,
    /// How to attach the XDP program (default: native if the driver can, else generic).
    pub attach: XdpAttachMode,
    /// Ask for zero-copy (the driver must support it); default copy mode, which every driver
    /// supports.
    pub zero_copy: bool,
    /// UMEM frames per socket (default 16384, a power of two: 32 MiB of 2 KiB frames).
    pub frames: u32,
    /// Bytes per UMEM frame (2048 or 4096; default 2048, enough for a 1500-byte MTU; larger
    /// frames are cut to what fits).
    pub frame_size: u32,
    /// Entries of the RX ring (default 8192, a power of two).
    pub ring_size: u32,
    /// Direction: AF_XDP sees received packets only, so `Out` is refused; `InOut` captures the
    /// received ones.
    pub direction: Direction,
    /// While packets keep coming, wait this long before reading rings that hold only a few,
    /// so that one wake-up serves many packets (default 200 µs, 1,600 packets of the default
    /// ring at 8 Mpps; zero: read at once). The first packet after a quiet spell is read at once.
    /// The kernel wakes a sleeping reader for every packet, which on a busy link costs more
    /// than the packets themselves.
    pub coalesce: Duration,
}

impl Default for AfXdpConfig {
    fn default() -> AfXdpConfig {
        AfXdpConfig {
            snaplen: 262_144,
            queue: None,
            attach: XdpAttachMode::Auto,
            zero_copy: false,
            frames: 16384,
            frame_size: 2048,
            ring_size: 8192,
            direction: Direction::InOut,
            coalesce: Duration::from_micros(200),
        }
    }
}

/// One mapped ring.
struct Ring {
    _map: Mmap,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    desc: *mut u8,
    mask: u32,
}

impl Ring {
    fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        entries: u32,
        entry_size: usize,
        pgoff: i64,
        what: &str,
    ) -> Result<Ring, LiveError> {
        let len = off.desc as usize + entries as usize * entry_size;
        let map = Mmap::of_fd(fd, len, pgoff, what)?;
        let base = map.ptr();
        let in_map = |o: u64, n: usize| (o as usize).checked_add(n).is_some_and(|e| e <= map.len());
        if !in_map(off.producer, 4)
            || !in_map(off.consumer, 4)
            || !in_map(off.desc, entries as usize * entry_size)
        {
            return Err(LiveError::new(
                LiveErrorKind::Io,
                format!("{what}: ring offsets outside the mapping"),
            ));
        }
        Ok(Ring {
            producer: base.wrapping_add(off.producer as usize) as *const AtomicU32,
            consumer: base.wrapping_add(off.consumer as usize) as *const AtomicU32,
            desc: base.wrapping_add(off.desc as usize),
            mask: entries - 1,
            _map: map,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: checked to be inside the live mapping; the kernel's index word, 4-byte
        // aligned, shared with the kernel (hence atomic).
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as `producer`.
        unsafe { &*self.consumer }
    }
}

/// One socket on one queue.
struct Queue {
    fd: OwnedFd,
    queue: u32,
    umem: Mmap,
    fill: Ring,
    rx: Ring,
    _comp: Ring,
    frame_size: u32,
    /// Frames not in the fill ring (free), as addresses, oldest first: reusing them in order
    /// keeps the kernel writing through the UMEM sequentially.
    free: std::collections::VecDeque<u64>,
}

impl Queue {
    fn open(ifindex: u32, queue: u32, cfg: &AfXdpConfig) -> Result<Queue, LiveError> {
        let fd = sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0, "socket(AF_XDP)")?;
        let raw = fd.as_raw_fd();
        let umem_len = cfg.frames as usize * cfg.frame_size as usize;
        let umem = Mmap::anonymous(umem_len, "UMEM allocation")?;
        // SAFETY: xdp_umem_reg is plain old data; zero is valid.
        let mut reg: libc::xdp_umem_reg = unsafe { std::mem::zeroed() };
        reg.addr = umem.ptr() as u64;
        reg.len = umem_len as u64;
        reg.chunk_size = cfg.frame_size;
        reg.headroom = 0;
        sys::setsockopt(raw, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
        let fill_size = cfg.frames.next_power_of_two();
        sys::setsockopt(
            raw,
            libc::SOL_XDP,
            libc::XDP_UMEM_FILL_RING,
            &fill_size,
            "XDP_UMEM_FILL_RING",
        )?;
        let comp_size: u32 = 64;
        sys::setsockopt(
            raw,
            libc::SOL_XDP,
            libc::XDP_UMEM_COMPLETION_RING,
            &comp_size,
            "XDP_UMEM_COMPLETION_RING",
        )?;
        sys::setsockopt(
            raw,
            libc::SOL_XDP,
            libc::XDP_RX_RING,
            &cfg.ring_size,
            "XDP_RX_RING",
        )?;
        let (off, _) = sys::getsockopt::<libc::xdp_mmap_offsets>(
            raw,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            "XDP_MMAP_OFFSETS",
        )?;
        let rx = Ring::map(
            raw,
            &off.rx,
            cfg.ring_size,
            16,
            libc::XDP_PGOFF_RX_RING,
            "mmap of the XDP RX ring",
        )?;
        let fill = Ring::map(
            raw,
            &off.fr,
            fill_size,
            8,
            libc::XDP_UMEM_PGOFF_FILL_RING as i64,
            "mmap of the XDP fill ring",
        )?;
        let comp = Ring::map(
            raw,
            &off.cr,
            comp_size,
            8,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64,
            "mmap of the XDP completion ring",
        )?;
        let mut q = Queue {
            fd,
            queue,
            umem,
            fill,
            rx,
            _comp: comp,
            frame_size: cfg.frame_size,
            free: (0..u64::from(cfg.frames))
                .map(|i| i * u64::from(cfg.frame_size))
                .collect(),
        };
        q.refill();
        // SAFETY: sockaddr_xdp is plain old data; zero is valid.
        let mut sxdp: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
        sxdp.sxdp_family = libc::AF_XDP as u16;
        sxdp.sxdp_ifindex = ifindex;
        sxdp.sxdp_queue_id = queue;
        sxdp.sxdp_flags = if cfg.zero_copy {
            libc::XDP_ZEROCOPY
        } else {
            libc::XDP_COPY
        };
        // A queue stays busy for a moment after the socket that had it closes (the kernel
        // releases the binding after an RCU grace period), so a capture started right after
        // another one retries for up to a second before reporting the queue busy.
        let what = format!("binding the AF_XDP socket to queue {queue}");
        let mut tries = 0;
        loop {
            match sys::bind(raw, &sxdp, &what) {
                Err(e) if e.kind() == super::LiveErrorKind::Busy && tries < 20 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                r => break r?,
            }
        }
        Ok(q)
    }

    /// Puts free frames into the fill ring.
    fn refill(&mut self) {
        let fill = &self.fill;
        let prod = fill.producer().load(Ordering::Relaxed);
        let cons = fill.consumer().load(Ordering::Acquire);
        let room = (fill.mask + 1) - prod.wrapping_sub(cons);
        let n = room.min(self.free.len() as u32);
        for i in 0..n {
            let addr = self.free.pop_front().unwrap_or(0);
            let slot = (prod.wrapping_add(i) & fill.mask) as usize;
            // SAFETY: slot < ring size, inside the mapped descriptor array; the slots between
            // our producer and the kernel's consumer are ours to write.
            unsafe { std::ptr::write_unaligned(fill.desc.add(slot * 8) as *mut u64, addr) };
        }
        if n > 0 {
            fill.producer()
                .store(prod.wrapping_add(n), Ordering::Release);
        }
    }

    fn pending(&self) -> u32 {
        self.rx
            .producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.rx.consumer().load(Ordering::Relaxed))
    }
}

/// AF_XDP sockets on an interface (see the module docs).
pub struct AfXdp {
    queues: Vec<Queue>,
    // Dropped before the sockets: detaches the program first.
    prog: Option<XdpRedirect>,
    iface: String,
    snaplen: u32,
    next_queue: usize,
    delivered: u64,
    coalesce: Duration,
    /// How many packets the last call handed out.
    last_batch: usize,
}

impl Drop for AfXdp {
    fn drop(&mut self) {
        self.prog = None;
    }
}

impl AfXdp {
    /// Opens interface `iface` for capture with `cfg`, installing the redirect program.
    pub fn open(iface: &str, cfg: &AfXdpConfig) -> Result<AfXdp, LiveError> {
        if cfg.direction == Direction::Out {
            return Err(LiveError::new(
                LiveErrorKind::Unsupported,
                "AF_XDP sees received packets only; capture outgoing packets with AF_PACKET".into(),
            ));
        }
        if !(cfg.frame_size == 2048 || cfg.frame_size == 4096) {
            return Err(LiveError::new(
                LiveErrorKind::InvalidInput,
                format!("UMEM frame size {} (use 2048 or 4096)", cfg.frame_size),
            ));
        }
        for (name, v) in [("UMEM frames", cfg.frames), ("RX ring size", cfg.ring_size)] {
            if !v.is_power_of_two() || !(64..=1 << 20).contains(&v) {
                return Err(LiveError::new(
                    LiveErrorKind::InvalidInput,
                    format!("{name} {v} must be a power of two from 64 to 1048576"),
                ));
            }
        }
        if cfg.snaplen == 0 {
            return Err(LiveError::new(
                LiveErrorKind::InvalidInput,
                "snap length 0".into(),
            ));
        }
        let ifindex = sys::if_index(iface)?;
        let nq = sys::rx_queues(iface);
        let queue_ids: Vec<u32> = match cfg.queue {
            Some(q) if q >= nq => {
                return Err(LiveError::new(
                    LiveErrorKind::InvalidInput,
                    format!("{iface} has {nq} receive queues; there is no queue {q}"),
                ));
            }
            Some(q) => vec![q],
            None => (0..nq).collect(),
        };
        let mut queues = Vec::new();
        for &q in &queue_ids {
            queues.push(Queue::open(ifindex, q, cfg)?);
        }
        let socks: Vec<(u32, RawFd)> = queues.iter().map(|q| (q.queue, q.fd.as_raw_fd())).collect();
        let max_queue = queue_ids.iter().copied().max().unwrap_or(0).max(nq - 1);
        let prog = XdpRedirect::install(iface, ifindex, max_queue, &socks, cfg.attach)?;
        Ok(AfXdp {
            queues,
            prog: Some(prog),
            iface: iface.to_owned(),
            snaplen: cfg.snaplen,
            next_queue: 0,
            delivered: 0,
            coalesce: cfg.coalesce,
            last_batch: 0,
        })
    }

    /// Whether the XDP program runs in the driver (native) rather than generic mode.
    pub fn native(&self) -> bool {
        self.prog.as_ref().is_some_and(|p| p.native)
    }

    fn drain(
        &mut self,
        qi: usize,
        f: &mut dyn FnMut(PacketRef<'_>) -> Flow,
        delivered: &mut usize,
    ) -> bool {
        let snaplen = self.snaplen as usize;
        let q = &mut self.queues[qi];
        let cons = q.rx.consumer().load(Ordering::Relaxed);
        let prod = q.rx.producer().load(Ordering::Acquire);
        let mut done = 0u32;
        let mut stop = false;
        let umem_len = q.umem.len();
        // Copy mode has no receive timestamps: stamp the batch when it is read.
        let ts = Timestamp::from_nanos(i128::from(sys::now_ns()));
        while cons.wrapping_add(done) != prod {
            let slot = (cons.wrapping_add(done) & q.rx.mask) as usize;
            // SAFETY: slot < ring size: inside the descriptor array; entries between the
            // consumer and the producer were written by the kernel before it released them.
            let (addr, len) = unsafe {
                let d = q.rx.desc.add(slot * 16);
                (
                    std::ptr::read_unaligned(d as *const u64),
                    std::ptr::read_unaligned(d.add(8) as *const u32),
                )
            };
            done += 1;
            // PERF: each frame sits in its own UMEM chunk, so the hardware prefetcher cannot
            // guess the next packet; fetch the packet a few descriptors ahead ourselves.
            if cons.wrapping_add(done + 3) != prod.wrapping_add(1) {
                let ahead = (cons.wrapping_add(done + 2) & q.rx.mask) as usize;
                // SAFETY: `ahead` is a slot of the descriptor array (masked); reading a stale
                // descriptor is harmless because the address is only used as a prefetch hint,
                // clamped into the UMEM.
                let next =
                    unsafe { std::ptr::read_unaligned(q.rx.desc.add(ahead * 16) as *const u64) }
                        as usize;
                super::sys::prefetch(
                    q.umem
                        .ptr()
                        .wrapping_add(next.min(umem_len.saturating_sub(64))),
                    3,
                );
            }
            let base = addr & !(u64::from(q.frame_size) - 1);
            q.free.push_back(base);
            let start = addr as usize;
            let Some(end) = start
                .checked_add(len as usize)
                .filter(|&e| e <= umem_len && e <= base as usize + q.frame_size as usize)
            else {
                // A descriptor outside our UMEM would be a kernel bug; skip it.
                continue;
            };
            // SAFETY: start..end lies inside the UMEM and in a frame the kernel handed to us;
            // it stays ours until its address goes back into the fill ring, after `f` returns.
            let data = unsafe { std::slice::from_raw_parts(q.umem.ptr().add(start), end - start) };
            let pkt = PacketRef {
                data: &data[..data.len().min(snaplen)],
                wire_len: len,
                timestamp: ts,
                link_type: LinkType::ETHERNET,
                interface: 0,
            };
            *delivered += 1;
            self.delivered += 1;
            if f(pkt) == Flow::Stop {
                stop = true;
                break;
            }
        }
        let q = &mut self.queues[qi];
        q.rx.consumer()
            .store(cons.wrapping_add(done), Ordering::Release);
        q.refill();
        stop
    }
}

impl Source for AfXdp {
    fn link_type(&self) -> LinkType {
        LinkType::ETHERNET
    }

    fn snaplen(&self) -> u32 {
        self.snaplen
    }

    fn poll_batch(
        &mut self,
        timeout: Option<Duration>,
        f: &mut dyn FnMut(PacketRef<'_>) -> Flow,
    ) -> Result<usize, LiveError> {
        let mut delivered = 0;
        let pending = |s: &AfXdp| s.queues.iter().map(|q| q.pending() as usize).sum::<usize>();
        if pending(self) == 0 {
            let fds: Vec<RawFd> = self.queues.iter().map(|q| q.fd.as_raw_fd()).collect();
            if !sys::poll_in(&fds, timeout)? {
                self.last_batch = 0;
                return Ok(0);
            }
        }
        // PERF: coalesce wake-ups on a busy link (see `AfXdpConfig::coalesce`).
        if !self.coalesce.is_zero() && self.last_batch > 0 && pending(self) < 256 {
            std::thread::sleep(self.coalesce);
        }
        let n = self.queues.len();
        for i in 0..n {
            let qi = (self.next_queue + i) % n;
            if self.drain(qi, f, &mut delivered) {
                self.next_queue = qi;
                self.last_batch = delivered;
                return Ok(delivered);
            }
        }
        self.next_queue = (self.next_queue + 1) % n;
        self.last_batch = delivered;
        Ok(delivered)
    }

    fn stats(&mut self) -> Result<SourceStats, LiveError> {
        let mut s = SourceStats {
            delivered: self.delivered,
            ..SourceStats::default()
        };
        let mut pending = 0u64;
        for q in &self.queues {
            let (st, _) = sys::getsockopt::<libc::xdp_statistics>(
                q.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                "XDP_STATISTICS",
            )?;
            // rx_dropped counts frames lost for want of a fill-ring buffer; rx_ring_full those
            // lost for want of RX ring space (counted apart in rx_fill_ring_empty_descs too).
            s.dropped += st.rx_dropped + st.rx_ring_full;
            pending += u64::from(q.pending());
        }
        s.received = s.delivered + s.dropped + pending;
        Ok(s)
    }

    fn describe(&self) -> String {
        format!(
            "AF_XDP on {} ({} queue{}, {} XDP)",
            self.iface,
            self.queues.len(),
            if self.queues.len() == 1 { "" } else { "s" },
            if self.native() { "native" } else { "generic" }
        )
    }
}
