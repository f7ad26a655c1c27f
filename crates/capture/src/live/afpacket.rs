//! `AF_PACKET` capture with a `TPACKET_V3` ring.
//!
//! # The ring
//!
//! The kernel writes packets into blocks of a ring shared with this process. A block belongs to
//! the kernel until it is full or its retire timer fires; then its status says `TP_STATUS_USER`
//! and it belongs to us until we write `TP_STATUS_KERNEL` back. The packets of a block are read,
//! filtered and handed out in place; the block goes back when the last of its packets has been
//! handed out. Ordering: the status word is read with acquire and written with release
//! semantics, which pairs with the kernel's barriers around it.
//!
//! # VLAN tags
//!
//! On receive the kernel usually moves an 802.1Q/802.1ad tag out of the frame into the packet's
//! metadata (`TP_STATUS_VLAN_VALID`, `tp_vlan_tci`, `tp_vlan_tpid`). Like libpcap, netsift asks
//! for 4 bytes of headroom (`PACKET_RESERVE`) and writes the tag back between the MAC addresses
//! and the EtherType, in the ring, before anything looks at the packet: filters see the bytes a
//! capture file would hold, and both lengths grow by 4 (the captured length then trimmed to the
//! snap length again).

use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::sys::{self, Mmap};
use super::{Direction, Flow, LiveError, LiveErrorKind, Source, SourceStats};
use crate::{LinkType, PacketRef, Timestamp};

/// Where packet timestamps come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TimestampSource {
    /// The kernel's clock when the packet arrived (nanoseconds).
    #[default]
    Software,
    /// The network adapter's clock (`SOF_TIMESTAMPING_RAW_HARDWARE`); opening fails when the
    /// device cannot stamp received packets.
    Hardware,
}

/// How `PACKET_FANOUT` spreads the packets of an interface over the sockets of one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FanoutMode {
    /// By flow hash: the packets of one flow go to one socket.
    Hash,
    /// By the CPU that received the packet.
    Cpu,
    /// Round robin.
    LoadBalance,
    /// Fill one socket, then the next.
    Rollover,
}

/// A `PACKET_FANOUT` group to join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fanout {
    /// The group id (sockets with the same id on one interface share its packets).
    pub group: u16,
    /// How packets are spread.
    pub mode: FanoutMode,
    /// Reassemble IP fragments before hashing (`PACKET_FANOUT_FLAG_DEFRAG`), so that all
    /// fragments of a datagram go to one socket.
    pub defrag: bool,
    /// When the chosen socket's ring is full, try the others (`PACKET_FANOUT_FLAG_ROLLOVER`).
    pub rollover: bool,
}

/// One instruction of a classic BPF program for the kernel (`struct sock_filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SockFilter {
    /// Opcode.
    pub code: u16,
    /// Jump offset when true.
    pub jt: u8,
    /// Jump offset when false.
    pub jf: u8,
    /// Constant.
    pub k: u32,
}

/// Settings of an [`AfPacket`] source.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AfPacketConfig {
    /// Keep at most this many bytes of each packet (default 262144, as tcpdump).
    pub snaplen: u32,
    /// Put the interface in promiscuous mode while the source is open (default true).
    pub promiscuous: bool,
    /// Which direction to capture (default both).
    pub direction: Direction,
    /// Bytes per ring block: a multiple of the page size, at least the snap length plus
    /// headers to hold a whole packet (default 1 MiB).
    pub block_size: u32,
    /// Blocks in the ring (default 8: 8 MiB, four times tcpdump's default buffer).
    pub block_count: u32,
    /// How long the kernel may keep a partly filled block before handing it over (default
    /// 100 ms): the longest a packet waits on a quiet link.
    pub retire_timeout: Duration,
    /// Software or hardware timestamps.
    pub timestamps: TimestampSource,
    /// Join a fanout group.
    pub fanout: Option<Fanout>,
    /// A classic BPF program the kernel runs before copying a packet into the ring; packets it
    /// rejects never reach the ring (nor the counters). It sees the frame as the kernel holds
    /// it: without a VLAN tag the kernel took out (the tag is in the ancillary data).
    pub kernel_filter: Option<Vec<SockFilter>>,
    /// Capture in cooked mode with this pseudo-header (`SOCK_DGRAM`; always for the `any`
    /// device, which takes packets from every interface): the link-layer header is replaced
    /// by a Linux cooked header built from the kernel's packet address, as libpcap builds it.
    pub cooked: Option<Cooked>,
}

/// The pseudo-header of a cooked capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cooked {
    /// `LINKTYPE_LINUX_SLL` (16 bytes).
    Sll,
    /// `LINKTYPE_LINUX_SLL2` (20 bytes).
    Sll2,
}

impl Cooked {
    /// The link type of the packets.
    pub fn link_type(self) -> LinkType {
        match self {
            Cooked::Sll => LinkType::LINUX_SLL,
            Cooked::Sll2 => LinkType::LINUX_SLL2,
        }
    }

    fn header_len(self) -> usize {
        match self {
            Cooked::Sll => 16,
            Cooked::Sll2 => 20,
        }
    }
}

impl Default for AfPacketConfig {
    fn default() -> AfPacketConfig {
        AfPacketConfig {
            snaplen: 262_144,
            promiscuous: true,
            direction: Direction::InOut,
            block_size: 1 << 20,
            block_count: 8,
            retire_timeout: Duration::from_millis(100),
            timestamps: TimestampSource::Software,
            fanout: None,
            kernel_filter: None,
            cooked: None,
        }
    }
}

/// Bytes of `struct tpacket3_hdr`.
const HDR_LEN: usize = 48;
/// Offset of the `sockaddr_ll` after it (`TPACKET_ALIGN(sizeof(tpacket3_hdr))`).
const SLL_OFF: usize = 48;
/// Offset of `sll_pkttype` in the packet header area.
const PKTTYPE_OFF: usize = SLL_OFF + 10;
/// Offset of `sll_ifindex`.
const IFINDEX_OFF: usize = SLL_OFF + 4;
/// Headroom asked for with `PACKET_RESERVE`: one VLAN tag.
const VLAN_TAG_LEN: usize = 4;
/// Offset of the tag in an Ethernet frame: after both MAC addresses.
const VLAN_OFFSET: usize = 12;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_KERNEL: u32 = 0;
const ARPHRD_ETHER: u16 = 1;
const ARPHRD_LOOPBACK: u16 = 772;

/// An `AF_PACKET` socket with a `TPACKET_V3` receive ring (see the module docs).
pub struct AfPacket {
    fd: OwnedFd,
    ring: Mmap,
    iface: String,
    ifindex: u32,
    block_size: usize,
    block_count: usize,
    snaplen: u32,
    direction: Direction,
    loopback: bool,
    /// The cooked pseudo-header written before each packet, if capturing in cooked mode.
    cooked: Option<Cooked>,
    /// The loopback device's index (cooked mode: its outgoing copies are skipped).
    lo_ifindex: u32,
    /// The block being read, the index of the next packet in it and that packet's offset.
    cur: usize,
    next_pkt: u32,
    next_off: usize,
    stats: SourceStats,
}

impl AfPacket {
    /// Opens interface `iface` for capture with `cfg`.
    pub fn open(iface: &str, cfg: &AfPacketConfig) -> Result<AfPacket, LiveError> {
        let page = 4096u32;
        if cfg.block_size < page || cfg.block_size % page != 0 || !cfg.block_size.is_power_of_two()
        {
            return Err(LiveError::new(
                LiveErrorKind::InvalidInput,
                format!(
                    "ring block size {} must be a power of two and at least {page}",
                    cfg.block_size
                ),
            ));
        }
        if cfg.block_count == 0 || u64::from(cfg.block_size) * u64::from(cfg.block_count) > 1 << 32
        {
            return Err(LiveError::new(
                LiveErrorKind::InvalidInput,
                format!(
                    "ring of {} blocks of {} bytes is out of range",
                    cfg.block_count, cfg.block_size
                ),
            ));
        }
        if cfg.snaplen == 0 {
            return Err(LiveError::new(
                LiveErrorKind::InvalidInput,
                "snap length 0".into(),
            ));
        }
        // The `any` device is every interface (index 0), in cooked mode.
        let any = iface == "any";
        let cooked = if any {
            Some(cfg.cooked.unwrap_or(Cooked::Sll))
        } else {
            cfg.cooked
        };
        let ifindex = if any { 0 } else { sys::if_index(iface)? };
        let kind = if cooked.is_some() {
            libc::SOCK_DGRAM
        } else {
            libc::SOCK_RAW
        };
        let fd = sys::socket(libc::AF_PACKET, kind, 0, "socket(AF_PACKET)")?;
        let raw = fd.as_raw_fd();
        let hw = if any { 0 } else { sys::hw_type(&fd, iface)? };
        if cooked.is_none() && hw != ARPHRD_ETHER && hw != ARPHRD_LOOPBACK {
            return Err(LiveError::new(
                LiveErrorKind::Unsupported,
                format!(
                    "{iface} is not an Ethernet-like interface (ARPHRD {hw}); netsift captures \
                     Ethernet and loopback interfaces"
                ),
            ));
        }
        let version: libc::c_int = 2; // TPACKET_V3
        sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &version,
            "PACKET_VERSION TPACKET_V3",
        )?;
        // Room before each packet for a VLAN tag, or for the cooked pseudo-header.
        let reserve: libc::c_uint = if cooked.is_some() {
            (VLAN_TAG_LEN + 20) as libc::c_uint
        } else {
            VLAN_TAG_LEN as libc::c_uint
        };
        sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_RESERVE,
            &reserve,
            "PACKET_RESERVE",
        )?;
        if let Some(prog) = &cfg.kernel_filter {
            attach_filter(raw, prog)?;
        }
        if cfg.direction == Direction::In {
            // Best effort: without it outgoing packets are skipped in user space.
            let on: libc::c_int = 1;
            let _ = sys::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_IGNORE_OUTGOING,
                &on,
                "PACKET_IGNORE_OUTGOING",
            );
        }
        if cfg.timestamps == TimestampSource::Hardware {
            enable_hw_timestamps(&fd, iface)?;
        }
        let frame_size: u32 = 2048;
        let req = libc::tpacket_req3 {
            tp_block_size: cfg.block_size,
            tp_block_nr: cfg.block_count,
            tp_frame_size: frame_size,
            tp_frame_nr: cfg.block_size / frame_size * cfg.block_count,
            tp_retire_blk_tov: u32::try_from(cfg.retire_timeout.as_millis())
                .unwrap_or(u32::MAX)
                .max(1),
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sys::setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &req,
            "PACKET_RX_RING (ring geometry)",
        )?;
        let len = cfg.block_size as usize * cfg.block_count as usize;
        let ring = Mmap::of_fd(raw, len, 0, "mmap of the TPACKET_V3 ring")?;
        // SAFETY: sockaddr_ll is plain old data; zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as i32;
        sys::bind(raw, &sll, &format!("bind to {iface}"))?;
        if cfg.promiscuous && !any {
            // SAFETY: packet_mreq is plain old data; zero is valid.
            let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mr.mr_ifindex = ifindex as i32;
            mr.mr_type = libc::PACKET_MR_PROMISC as u16;
            sys::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mr,
                &format!("promiscuous mode on {iface}"),
            )?;
        }
        if let Some(f) = cfg.fanout {
            let mode: u32 = match f.mode {
                FanoutMode::Hash => 0,
                FanoutMode::LoadBalance => 1,
                FanoutMode::Cpu => 2,
                FanoutMode::Rollover => 3,
            };
            let flags: u32 =
                if f.defrag { 0x8000 } else { 0 } | if f.rollover { 0x1000 } else { 0 };
            let arg: u32 = u32::from(f.group) | ((mode | flags) << 16);
            sys::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_FANOUT,
                &arg,
                &format!("PACKET_FANOUT group {}", f.group),
            )?;
        }
        Ok(AfPacket {
            fd,
            ring,
            iface: iface.to_owned(),
            ifindex,
            block_size: cfg.block_size as usize,
            block_count: cfg.block_count as usize,
            snaplen: cfg.snaplen,
            direction: cfg.direction,
            loopback: hw == ARPHRD_LOOPBACK,
            cooked,
            lo_ifindex: sys::if_index("lo").unwrap_or(u32::MAX),
            cur: 0,
            next_pkt: 0,
            next_off: 0,
            stats: SourceStats::default(),
        })
    }

    /// The interface index (0 for the `any` device).
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The cooked pseudo-header of a cooked capture, if it is one.
    pub fn cooked(&self) -> Option<Cooked> {
        self.cooked
    }

    /// Switches a cooked capture between `LINUX_SLL` and `LINUX_SLL2` headers (libpcap's
    /// `pcap_set_datalink` on the `any` device); refused for a capture that is not cooked.
    pub fn set_cooked(&mut self, c: Cooked) -> Result<(), LiveError> {
        if self.cooked.is_none() {
            return Err(LiveError::new(
                LiveErrorKind::Unsupported,
                format!("{} is not captured in cooked mode", self.iface),
            ));
        }
        self.cooked = Some(c);
        Ok(())
    }

    fn block(&self, i: usize) -> *mut u8 {
        // SAFETY (of the arithmetic): i < block_count, so the block lies inside the mapping.
        self.ring.ptr().wrapping_add(i * self.block_size)
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: the status word of a block is at offset 8 of its descriptor, inside the
        // mapping and 4-byte aligned (blocks are page aligned); the kernel writes it
        // concurrently, which is why it is accessed atomically.
        unsafe { &*(self.block(i).add(8) as *const AtomicU32) }
    }

    fn read_u32(blk: *const u8, off: usize) -> u32 {
        // SAFETY: callers pass offsets inside the block they own (checked against the block
        // size); unaligned reads are allowed.
        unsafe { std::ptr::read_unaligned(blk.add(off) as *const u32) }
    }

    fn read_u16(blk: *const u8, off: usize) -> u16 {
        // SAFETY: as `read_u32`.
        unsafe { std::ptr::read_unaligned(blk.add(off) as *const u16) }
    }

    /// Hands out the packets of the current block from `next_pkt`; returns whether the block
    /// is finished (and was given back).
    fn drain_block(
        &mut self,
        f: &mut dyn FnMut(PacketRef<'_>) -> Flow,
        delivered: &mut usize,
    ) -> Result<bool, LiveError> {
        let blk = self.block(self.cur);
        let bs = self.block_size;
        let num = Self::read_u32(blk, 12);
        if self.next_pkt == 0 {
            self.next_off = Self::read_u32(blk, 16) as usize;
        }
        while self.next_pkt < num {
            let off = self.next_off;
            if off < 48 || off + HDR_LEN + 16 > bs {
                return Err(corrupt(&self.iface, "packet header outside its block"));
            }
            let h = blk.wrapping_add(off);
            let next = Self::read_u32(h, 0) as usize;
            let sec = Self::read_u32(h, 4);
            let nsec = Self::read_u32(h, 8);
            let mut caplen = Self::read_u32(h, 12) as usize;
            let mut len = Self::read_u32(h, 16);
            let status = Self::read_u32(h, 20);
            let mac = Self::read_u16(h, 24) as usize;
            let tci = Self::read_u32(h, 32);
            let tpid = Self::read_u16(h, 36);
            // SAFETY: PKTTYPE_OFF and IFINDEX_OFF are inside the header area checked above.
            let pkttype = unsafe { *h.add(PKTTYPE_OFF) };
            let ifindex = Self::read_u32(h, IFINDEX_OFF);
            if mac < HDR_LEN + 20 + VLAN_TAG_LEN || off + mac + caplen > bs {
                return Err(corrupt(&self.iface, "packet data outside its block"));
            }
            self.next_pkt += 1;
            self.next_off = off + next;
            // PERF: the kernel wrote the block on another core, and each header says where the
            // next one is: walked plainly, the misses come one after the other. Ask for the
            // next packet's header and first bytes, and for the lines a kilobyte on (a few
            // packets ahead), so that they arrive while the packets in between are handled.
            if self.next_pkt < num {
                sys::prefetch(h.wrapping_add(next), 5);
                sys::prefetch(blk.wrapping_add((off + next + 1024).min(bs - 64)), 5);
            }
            let keep = match (pkttype == libc::PACKET_OUTGOING, self.direction) {
                // The loopback device shows each packet twice: once out, once in.
                (true, _) if self.loopback => false,
                (true, _) if self.cooked.is_some() && ifindex == self.lo_ifindex => false,
                (true, Direction::In) | (false, Direction::Out) => false,
                _ => true,
            };
            if !keep {
                self.stats.skipped += 1;
                if next == 0 && self.next_pkt < num {
                    return Err(corrupt(&self.iface, "zero offset to the next packet"));
                }
                continue;
            }
            let mut start = off + mac;
            if let Some(c) = self.cooked {
                // libpcap's cooked header, in the reserved room before the packet, from the
                // kernel's `sockaddr_ll` (after the tpacket header).
                let hl = c.header_len();
                if mac < SLL_OFF + 20 + hl {
                    return Err(corrupt(&self.iface, "no room for the cooked header"));
                }
                let sll = h.wrapping_add(SLL_OFF);
                // SAFETY: the sockaddr_ll (20 bytes) and the reserved room (24 bytes) lie in
                // the block we own, between the header and the packet (mac was checked).
                unsafe {
                    let proto = [*sll.add(2), *sll.add(3)];
                    let hatype = std::ptr::read_unaligned(sll.add(8) as *const u16);
                    let ptype = *sll.add(10);
                    let halen = *sll.add(11);
                    let mut addr = [0u8; 8];
                    std::ptr::copy_nonoverlapping(sll.add(12), addr.as_mut_ptr(), 8);
                    let mut hdr = [0u8; 20];
                    match c {
                        Cooked::Sll => {
                            hdr[0..2].copy_from_slice(&u16::from(ptype).to_be_bytes());
                            hdr[2..4].copy_from_slice(&hatype.to_be_bytes());
                            hdr[4..6].copy_from_slice(&u16::from(halen).to_be_bytes());
                            hdr[6..14].copy_from_slice(&addr);
                            hdr[14..16].copy_from_slice(&proto);
                        }
                        Cooked::Sll2 => {
                            hdr[0..2].copy_from_slice(&proto);
                            hdr[4..8].copy_from_slice(&ifindex.to_be_bytes());
                            hdr[8..10].copy_from_slice(&hatype.to_be_bytes());
                            hdr[10] = ptype;
                            hdr[11] = halen;
                            hdr[12..20].copy_from_slice(&addr);
                        }
                    }
                    start -= hl;
                    std::ptr::copy_nonoverlapping(hdr.as_ptr(), blk.add(start), hl);
                }
                caplen += hl;
                len = len.saturating_add(hl as u32);
            } else if (tci != 0 || status & TP_STATUS_VLAN_VALID != 0) && caplen >= VLAN_OFFSET {
                let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                    tpid
                } else {
                    0x8100
                };
                start -= VLAN_TAG_LEN;
                // SAFETY: `start .. start + 4 + caplen` lies inside this block (mac has the
                // reserved headroom, checked above), which we own until it is given back; no
                // reference into it is alive.
                unsafe {
                    let p = blk.add(start);
                    std::ptr::copy(p.add(VLAN_TAG_LEN), p, VLAN_OFFSET);
                    let tag = p.add(VLAN_OFFSET);
                    *tag = (tpid >> 8) as u8;
                    *tag.add(1) = tpid as u8;
                    *tag.add(2) = (tci >> 8) as u8;
                    *tag.add(3) = tci as u8;
                }
                caplen += VLAN_TAG_LEN;
                len = len.saturating_add(VLAN_TAG_LEN as u32);
                self.stats.vlan_restored += 1;
            }
            caplen = caplen.min(self.snaplen as usize);
            // SAFETY: the bytes are inside the block we own, initialised by the kernel (and by
            // us for the tag); the borrow ends before the block is given back.
            let data = unsafe { std::slice::from_raw_parts(blk.add(start), caplen) };
            let pkt = PacketRef {
                data,
                wire_len: len,
                timestamp: Timestamp::new(i64::from(sec), nsec.min(999_999_999)),
                link_type: self.link_type(),
                interface: 0,
            };
            self.stats.delivered += 1;
            *delivered += 1;
            if f(pkt) == Flow::Stop {
                if self.next_pkt >= num {
                    self.release();
                }
                return Ok(false);
            }
            if next == 0 && self.next_pkt < num {
                return Err(corrupt(&self.iface, "zero offset to the next packet"));
            }
        }
        self.release();
        Ok(true)
    }

    fn release(&mut self) {
        self.status(self.cur)
            .store(TP_STATUS_KERNEL, Ordering::Release);
        self.cur = (self.cur + 1) % self.block_count;
        self.next_pkt = 0;
        self.next_off = 0;
    }
}

/// The capture socket, e.g. to attach an eBPF socket filter (`SO_ATTACH_BPF`), which replaces
/// [`AfPacketConfig::kernel_filter`].
impl AsFd for AfPacket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn corrupt(iface: &str, what: &str) -> LiveError {
    LiveError::new(LiveErrorKind::Io, format!("ring of {iface}: {what}"))
}

impl Source for AfPacket {
    fn link_type(&self) -> LinkType {
        self.cooked.map_or(LinkType::ETHERNET, Cooked::link_type)
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
        let mut waited = false;
        // At most one lap of the ring per call, so that a busy link still returns control.
        let mut blocks = 0;
        loop {
            let ready = self.status(self.cur).load(Ordering::Acquire) & TP_STATUS_USER != 0;
            if !ready {
                if delivered > 0 || waited {
                    return Ok(delivered);
                }
                if !sys::poll_in(&[self.fd.as_raw_fd()], timeout)? {
                    return Ok(0);
                }
                waited = true;
                continue;
            }
            if !self.drain_block(f, &mut delivered)? {
                return Ok(delivered);
            }
            blocks += 1;
            if blocks >= self.block_count {
                return Ok(delivered);
            }
        }
    }

    fn stats(&mut self) -> Result<SourceStats, LiveError> {
        let (st, _) = sys::getsockopt::<libc::tpacket_stats_v3>(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            "PACKET_STATISTICS",
        )?;
        // The kernel resets its counters on every read; `tp_packets` includes the drops.
        self.stats.received += u64::from(st.tp_packets);
        self.stats.dropped += u64::from(st.tp_drops);
        Ok(self.stats)
    }

    fn describe(&self) -> String {
        format!("AF_PACKET TPACKET_V3 on {}", self.iface)
    }
}

/// Attaches a classic BPF program to the socket (`SO_ATTACH_FILTER`).
fn attach_filter(fd: i32, prog: &[SockFilter]) -> Result<(), LiveError> {
    let insns: Vec<libc::sock_filter> = prog
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let fprog = libc::sock_fprog {
        len: u16::try_from(insns.len()).map_err(|_| {
            LiveError::new(
                LiveErrorKind::InvalidInput,
                "kernel filter longer than 65535 instructions".into(),
            )
        })?,
        filter: insns.as_ptr() as *mut libc::sock_filter,
    };
    // The kernel copies the program during the call; `insns` outlives it.
    sys::setsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_ATTACH_FILTER,
        &fprog,
        "SO_ATTACH_FILTER (kernel filter)",
    )
}

/// Turns on receive hardware timestamps on the device and asks for them in the ring.
fn enable_hw_timestamps(fd: &OwnedFd, iface: &str) -> Result<(), LiveError> {
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct HwtstampConfig {
        flags: i32,
        tx_type: i32,
        rx_filter: i32,
    }
    let mut cfg = HwtstampConfig {
        flags: 0,
        tx_type: 0,   // HWTSTAMP_TX_OFF
        rx_filter: 1, // HWTSTAMP_FILTER_ALL
    };
    let mut ifr = sys::ifreq(iface)?;
    ifr.ifr_ifru.ifru_data = (&mut cfg as *mut HwtstampConfig).cast();
    const SIOCSHWTSTAMP: libc::c_ulong = 0x89b0;
    // SAFETY: SIOCSHWTSTAMP reads and writes the hwtstamp_config `ifr` points to, which lives
    // until the call returns.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCSHWTSTAMP as _, &mut ifr) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return Err(LiveError::new(
            LiveErrorKind::Unsupported,
            format!(
                "{iface} cannot stamp received packets in hardware (SIOCSHWTSTAMP: {e}); use software timestamps"
            ),
        ));
    }
    let req: libc::c_int = 1 << 6; // SOF_TIMESTAMPING_RAW_HARDWARE
    sys::setsockopt(
        fd.as_raw_fd(),
        libc::SOL_PACKET,
        libc::PACKET_TIMESTAMP,
        &req,
        "PACKET_TIMESTAMP",
    )?;
    let _ = size_of::<HwtstampConfig>();
    Ok(())
}
