//! The capture handle behind `pcap_t`: a savefile read through netsift's [`CaptureReader`], a
//! live interface through `netsiftd` (a flow read from shared memory, see [`crate::daemon`]) or
//! netsift's [`AfPacket`] source, or a "dead" handle that only compiles.
//!
//! Packets reach the caller's callback with a `struct pcap_pkthdr` built here; the filter (set
//! with `pcap_setfilter`) runs in user space with the engine `netsift_filter` chose (the JIT
//! where it runs), or in the daemon.
//!
//! NOTE: the callback may call back into the library with the same handle (`pcap_breakloop`,
//! `pcap_geterr`, `pcap_stats`, `pcap_setfilter`). The loops therefore take the handle as a raw
//! pointer and only borrow the fields they need, for as short a time as they can — the filter
//! for one packet at a time, never across the callback; the break flag is atomic, so that a
//! signal handler may set it too.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint};
use std::fmt::Write as _;
use std::io::Read;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use netsift_capture::live::{
    AfPacket, AfPacketConfig, Cooked, Direction, Flow, LiveErrorKind, Sender, Source,
    TimestampSource,
};
use netsift_capture::{ByteOrder, CaptureReader, ErrorKind, Format, PacketRef, Timestamp};
use netsift_filter::Filter;

use crate::daemon::{self, Attempt, DaemonCapture};
use crate::ffi::{
    PCAP_ERRBUF_SIZE, PCAP_ERROR, PCAP_ERROR_BREAK, PCAP_ERROR_NO_SUCH_DEVICE,
    PCAP_ERROR_PERM_DENIED, PCAP_TSTAMP_PRECISION_NANO, PcapHandler, PcapPkthdr, Timeval,
};
use crate::names;

/// The largest snapshot length of a live capture (libpcap's `MAXIMUM_SNAPLEN`).
pub(crate) const MAXIMUM_SNAPLEN: i32 = 262_144;

/// Settings of a handle made by `pcap_create`, applied by `pcap_activate`.
#[derive(Clone, Debug)]
pub(crate) struct LiveOpts {
    pub(crate) snaplen: i32,
    pub(crate) promisc: bool,
    pub(crate) timeout_ms: i32,
    pub(crate) buffer_size: i32,
    pub(crate) immediate: bool,
    pub(crate) tstamp_type: i32,
    pub(crate) direction: Direction,
    pub(crate) rfmon: bool,
}

impl Default for LiveOpts {
    fn default() -> LiveOpts {
        LiveOpts {
            snaplen: MAXIMUM_SNAPLEN,
            promisc: false,
            timeout_ms: 0,
            buffer_size: 0,
            immediate: false,
            tstamp_type: 0,
            direction: Direction::InOut,
            rfmon: false,
        }
    }
}

/// A savefile being read, through the C stream libpcap would read it through.
pub(crate) struct Offline {
    pub(crate) reader: CaptureReader<Box<dyn Read>>,
    /// The stream (for `pcap_file`), closed with the handle unless it is `stdin`, as libpcap
    /// does — also a stream given to `pcap_fopen_offline`.
    pub(crate) file: *mut libc::FILE,
    /// The stream's descriptor (for `pcap_get_selectable_fd`), -1 if it has none.
    pub(crate) fd: c_int,
    /// Whether a pcap file's time stamps are in nanoseconds.
    nano_file: bool,
}

impl Drop for Offline {
    fn drop(&mut self) {
        // SAFETY: the handle's stream, closed once; stdin belongs to the program.
        unsafe {
            if self.file != stdin {
                libc::fclose(self.file);
            }
        }
    }
}

unsafe extern "C" {
    static stdin: *mut libc::FILE;
}

/// Reads a C stream with `fread`, from its current position and through its buffer, as
/// libpcap reads a savefile (a descriptor would miss bytes already in the stream's buffer, and
/// a `fmemopen` stream has none).
struct CStream(*mut libc::FILE);

impl Read for CStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // SAFETY: an open stream; `buf` is writable for its length.
        let n = unsafe { libc::fread(buf.as_mut_ptr().cast(), 1, buf.len(), self.0) };
        // SAFETY: as above.
        if n == 0 && !buf.is_empty() && unsafe { libc::ferror(self.0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(n)
    }
}

/// A live capture.
pub(crate) struct Live {
    pub(crate) src: AfPacket,
    pub(crate) cfg: AfPacketConfig,
    pub(crate) sender: Option<Sender>,
}

/// What a handle reads from.
pub(crate) enum Kind {
    /// `pcap_open_dead`: compiles only.
    Dead,
    /// `pcap_create` before `pcap_activate`.
    Created,
    /// A savefile.
    Offline(Box<Offline>),
    /// An activated live capture.
    Live(Box<Live>),
    /// An activated live capture through `netsiftd`.
    Daemon(Box<DaemonCapture>),
}

/// The state behind a `pcap_t *`.
pub struct Pcap {
    pub(crate) errbuf: [c_char; PCAP_ERRBUF_SIZE],
    pub(crate) kind: Kind,
    /// The device name of a live handle.
    pub(crate) device: String,
    /// The DLT value `pcap_datalink` reports.
    pub(crate) linktype: c_int,
    /// The upper bits of a pcap file's link-type field (FCS information), written back by
    /// dumpers as libpcap does.
    pub(crate) linktype_ext: u32,
    /// The snapshot length `pcap_snapshot` reports.
    pub(crate) snapshot: c_int,
    /// `PCAP_TSTAMP_PRECISION_MICRO` or `_NANO`.
    pub(crate) precision: c_int,
    /// Whether the savefile's byte order differs from this machine's.
    pub(crate) swapped: bool,
    /// The savefile's format version.
    pub(crate) version: (c_int, c_int),
    pub(crate) filter: Option<Filter>,
    pub(crate) break_loop: AtomicBool,
    pub(crate) nonblock: bool,
    pub(crate) opts: LiveOpts,
    /// The packet `pcap_next`/`pcap_next_ex` lend out.
    pub(crate) next_hdr: PcapPkthdr,
    pub(crate) next_buf: Vec<u8>,
    /// What `pcap_bufsize` reports: the size of the buffer libpcap would read into.
    pub(crate) bufsize: c_int,
}

impl Pcap {
    fn new(kind: Kind) -> Pcap {
        Pcap {
            errbuf: [0; PCAP_ERRBUF_SIZE],
            kind,
            device: String::new(),
            linktype: 1,
            linktype_ext: 0,
            snapshot: MAXIMUM_SNAPLEN,
            precision: 0,
            swapped: false,
            version: (2, 4),
            filter: None,
            break_loop: AtomicBool::new(false),
            nonblock: false,
            opts: LiveOpts::default(),
            next_hdr: PcapPkthdr::default(),
            next_buf: Vec::new(),
            bufsize: 0,
        }
    }

    /// A handle for `pcap_open_dead`.
    pub(crate) fn dead(linktype: c_int, snaplen: c_int, precision: c_int) -> Pcap {
        let mut p = Pcap::new(Kind::Dead);
        p.linktype = linktype;
        p.snapshot = snaplen;
        p.precision = precision;
        p
    }

    /// A handle for `pcap_create`.
    pub(crate) fn created(device: String) -> Pcap {
        let mut p = Pcap::new(Kind::Created);
        p.device = device;
        p
    }

    /// Opens a savefile (`-` is standard input) as `pcap_open_offline` does, time stamps in
    /// micro- (0) or nanoseconds (1).
    pub(crate) fn offline(path: &[u8], precision: c_uint) -> Result<Pcap, String> {
        let name = String::from_utf8_lossy(path).into_owned();
        let file = if path == b"-" {
            // SAFETY: C's standard input.
            unsafe { stdin }
        } else {
            let c =
                std::ffi::CString::new(path).map_err(|_| format!("{name}: invalid file name"))?;
            // SAFETY: a NUL-terminated name.
            let f = unsafe { libc::fopen(c.as_ptr(), c"rb".as_ptr()) };
            if f.is_null() {
                return Err(format!(
                    "{name}: {}",
                    strip_os_error(&std::io::Error::last_os_error())
                ));
            }
            f
        };
        // SAFETY: an open stream; on failure it is closed here (it is not the caller's).
        unsafe { Pcap::from_stream(file, precision) }.inspect_err(|_| {
            if path != b"-" {
                // SAFETY: the stream opened above, not handed out.
                unsafe { libc::fclose(file) };
            }
        })
    }

    /// Reads a savefile from an open C stream, from its current position
    /// (`pcap_fopen_offline`), time stamps in micro- (0) or nanoseconds (1). On success the
    /// handle owns the stream; on failure the caller still does.
    ///
    /// # Safety
    /// `file` must be an open stream that stays valid for the handle's life.
    pub(crate) unsafe fn from_stream(
        file: *mut libc::FILE,
        precision: c_uint,
    ) -> Result<Pcap, String> {
        let precision = match precision {
            0 => crate::ffi::PCAP_TSTAMP_PRECISION_MICRO,
            1 => crate::ffi::PCAP_TSTAMP_PRECISION_NANO,
            // SAFETY: the caller's open stream.
            _ => return Err(unsafe { unknown_precision(file, precision) }),
        };
        // SAFETY: the caller's open stream.
        let fd = unsafe { libc::fileno(file) };
        let tap = Rc::new(RefCell::new(TapState::default()));
        let input: Box<dyn Read> = Box::new(Tap {
            inner: Box::new(CStream(file)),
            state: Rc::clone(&tap),
        });
        let head_of = |t: &Rc<RefCell<TapState>>| {
            let t = t.borrow();
            (t.head.clone(), t.total)
        };
        let reader = match CaptureReader::new(input) {
            Ok(r) => r,
            Err(e) => {
                let (head, total) = head_of(&tap);
                // The first section header block as libpcap checks it, then the reader's error.
                let ng = head.get(..4) == Some(&[0x0a, 0x0d, 0x0d, 0x0a][..]);
                let truncated = e.kind() == ErrorKind::Truncated;
                let ng_error = || {
                    pcapng_header_error(&head, total, truncated).or_else(|| pcapng_block_error(&e))
                };
                return Err(ng
                    .then(ng_error)
                    .flatten()
                    .unwrap_or_else(|| open_error_text(&e)));
            }
        };
        // libpcap reads a pcapng file's blocks up to its first interface description block.
        if matches!(reader.format(), Format::Pcapng { .. }) && reader.interfaces().is_empty() {
            let mut reader = reader;
            return Err(match reader.next_packet() {
                None => "the capture file has no Interface Description Blocks",
                Some(_) => {
                    "the capture file has a packet block before any Interface Description Blocks"
                }
            }
            .to_string());
        }
        let head = head_of(&tap).0;
        let mut p = Pcap::new(Kind::Dead);
        let (swapped, version) = match reader.format() {
            Format::Pcap {
                byte_order,
                version_major,
                version_minor,
                ..
            } => (
                is_swapped(byte_order),
                (c_int::from(version_major), c_int::from(version_minor)),
            ),
            Format::Pcapng { byte_order, .. } => {
                // The first section header block's version (1.0 or 1.2).
                let half = |i: usize| {
                    head.get(i..i + 2).map_or(0, |b| match byte_order {
                        ByteOrder::Little => u16::from_le_bytes([b[0], b[1]]),
                        _ => u16::from_be_bytes([b[0], b[1]]),
                    })
                };
                (
                    is_swapped(byte_order),
                    (c_int::from(half(12)), c_int::from(half(14))),
                )
            }
            _ => (false, (2, 4)),
        };
        let lt = reader.link_type().map(|l| l.0).unwrap_or(1);
        p.linktype = names::linktype_to_dlt(lt);
        // A pcap file's whole link-type field, as libpcap splits it (LT_LINKTYPE and
        // LT_LINKTYPE_EXT); the reader keeps only the link type.
        if let Format::Pcap { byte_order, .. } = reader.format() {
            if let Some(b) = head.get(20..24) {
                let b = [b[0], b[1], b[2], b[3]];
                let network = match byte_order {
                    ByteOrder::Little => u32::from_le_bytes(b),
                    _ => u32::from_be_bytes(b),
                };
                p.linktype = names::linktype_to_dlt(network);
                p.linktype_ext = network & 0xfc00_0000;
            }
        }
        // As libpcap 1.10.3 (and netsift-filter's Target::for_capture): the header's value,
        // unless it is 0 or negative as a C int; then the largest for the link type.
        let lt = netsift_capture::LinkType(names::dlt_to_linktype(p.linktype));
        p.snapshot = c_int::try_from(lt.savefile_snaplen(reader.snaplen().unwrap_or(0)))
            .unwrap_or(MAXIMUM_SNAPLEN);
        // A Kuznetzov ("modified") pcap file of Ethernet frames: libpcap allows for the 14-byte
        // Ethernet header its capture added after the snapshot length was applied.
        let magic = head
            .get(..4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
        let kuznetzov = magic.is_some_and(|m| m == 0xa1b2_cd34 || m.swap_bytes() == 0xa1b2_cd34);
        if kuznetzov && p.linktype == 1 {
            p.snapshot = p.snapshot.saturating_add(14);
        }
        let nano_file = magic.is_some_and(|m| m == 0xa1b2_3c4d || m.swap_bytes() == 0xa1b2_3c4d);
        p.swapped = swapped;
        p.version = version;
        p.precision = precision;
        p.bufsize = savefile_bufsize(&reader, p.snapshot, &head);
        p.kind = Kind::Offline(Box::new(Offline {
            reader,
            file,
            fd,
            nano_file,
        }));
        Ok(p)
    }

    /// Writes `msg` into the error buffer, cut to fit, NUL-terminated.
    pub(crate) fn set_err(&mut self, msg: &str) {
        write_errbuf(&mut self.errbuf, msg);
    }

    /// Applies the options and opens the interface (`pcap_activate`).
    pub(crate) fn activate(&mut self) -> c_int {
        // libpcap: no device is the `any` device.
        if self.device.is_empty() {
            self.device = "any".into();
        }
        if let Some(d) = crate::devs::PSEUDO_DEVICES
            .iter()
            .find(|d| d.0 == self.device)
        {
            self.set_err(&format!(
                "netsift's libpcap cannot capture on {} ({})",
                d.0, d.2
            ));
            return PCAP_ERROR;
        }
        let any = self.device == "any";
        if self.opts.rfmon {
            self.set_err("netsift's libpcap does not support monitor mode");
            return crate::ffi::PCAP_ERROR_RFMON_NOTSUP;
        }
        let o = &self.opts;
        let snaplen = if o.snaplen <= 0 || o.snaplen > MAXIMUM_SNAPLEN {
            MAXIMUM_SNAPLEN
        } else {
            o.snaplen
        };
        let mut cfg = AfPacketConfig {
            snaplen: snaplen.unsigned_abs(),
            promiscuous: o.promisc,
            direction: o.direction,
            cooked: any.then_some(Cooked::Sll),
            ..AfPacketConfig::default()
        };
        if o.buffer_size > 0 {
            cfg.block_count = (u64::from(o.buffer_size.unsigned_abs()))
                .div_ceil(u64::from(cfg.block_size))
                .clamp(1, 1 << 16) as u32;
        }
        cfg.retire_timeout = if o.immediate {
            Duration::from_millis(1)
        } else if o.timeout_ms > 0 {
            Duration::from_millis(u64::from(o.timeout_ms.unsigned_abs()))
        } else {
            cfg.retire_timeout
        };
        if matches!(o.tstamp_type, 3 | 4) {
            cfg.timestamps = TimestampSource::Hardware;
        }
        // Through the daemon when it runs, unless the handle asks for what a flow cannot give
        // (one direction, hardware time stamps).
        if !any && cfg.direction == Direction::InOut && cfg.timestamps != TimestampSource::Hardware
        {
            match daemon::attempt(&self.device, snaplen, o.buffer_size) {
                Attempt::Opened(d, lt) => {
                    self.snapshot = snaplen;
                    self.bufsize = live_bufsize(&self.device, snaplen, o.immediate);
                    self.linktype = names::linktype_to_dlt(lt.0);
                    self.kind = Kind::Daemon(d);
                    return 0;
                }
                Attempt::Refused(msg) => {
                    let lower = msg.to_ascii_lowercase();
                    let code = if lower.contains("no such device")
                        || lower.contains("no such interface")
                    {
                        PCAP_ERROR_NO_SUCH_DEVICE
                    } else {
                        PCAP_ERROR
                    };
                    self.set_err(&msg);
                    return code;
                }
                Attempt::Direct => {}
            }
        }
        match AfPacket::open(&self.device, &cfg) {
            Ok(src) => {
                self.snapshot = snaplen;
                self.bufsize = live_bufsize(&self.device, snaplen, self.opts.immediate);
                self.linktype = names::linktype_to_dlt(src.link_type().0);
                self.kind = Kind::Live(Box::new(Live {
                    src,
                    cfg,
                    sender: None,
                }));
                // libpcap 1.10.3 sets a promiscuous-mode warning for `any`, then overwrites it
                // with the activation's success: no warning reaches the program.
                0
            }
            Err(e) => {
                let code = match e.kind() {
                    LiveErrorKind::NoSuchDevice => PCAP_ERROR_NO_SUCH_DEVICE,
                    LiveErrorKind::Permission => PCAP_ERROR_PERM_DENIED,
                    _ => PCAP_ERROR,
                };
                let msg = e.to_string();
                self.set_err(&msg);
                code
            }
        }
    }

    /// How long one read of a live capture waits: not at all (non-blocking), the read timeout,
    /// or without limit (timeout 0).
    fn read_timeout(&self) -> Option<Duration> {
        if self.nonblock {
            Some(Duration::ZERO)
        } else if self.opts.timeout_ms > 0 {
            Some(Duration::from_millis(u64::from(
                self.opts.timeout_ms.unsigned_abs(),
            )))
        } else {
            None
        }
    }

    /// Changes the direction of an activated live capture by reopening its socket.
    pub(crate) fn set_direction(&mut self, dir: Direction) -> c_int {
        if matches!(self.kind, Kind::Daemon(_)) {
            if dir == Direction::InOut {
                return 0;
            }
            self.set_err(
                "capturing one direction only is not supported through netsiftd \
                 (set NETSIFT_PCAP_DIRECT=1 to capture directly)",
            );
            return PCAP_ERROR;
        }
        self.opts.direction = dir;
        let Kind::Live(live) = &mut self.kind else {
            return 0;
        };
        let mut cfg = live.cfg.clone();
        cfg.direction = dir;
        match AfPacket::open(&self.device, &cfg) {
            Ok(src) => {
                live.src = src;
                live.cfg = cfg;
                0
            }
            Err(e) => {
                let msg = format!("cannot set direction on {}: {e}", self.device);
                self.set_err(&msg);
                PCAP_ERROR
            }
        }
    }

    /// `pcap_setfilter` on a capture through `netsiftd`: the daemon runs `compiled`'s
    /// expression when it can (a program `pcap_compile` made for this link type and at least
    /// this snapshot length, with no `broadcast` that needs a netmask the daemon does not
    /// know); otherwise the flow is
    /// unfiltered and `filter` runs here, as on a direct capture.
    pub(crate) fn daemon_setfilter(
        &mut self,
        compiled: Option<daemon::Compiled>,
        filter: Filter,
    ) -> c_int {
        let (linktype, snapshot) = (self.linktype, self.snapshot);
        let Kind::Daemon(d) = &mut self.kind else {
            self.filter = Some(filter);
            return 0;
        };
        // The daemon compiles for the largest snapshot length: a program compiled for a
        // smaller one than the handle's (on another handle) would cut packets shorter here.
        let in_daemon = compiled.filter(|c| {
            c.linktype == linktype
                && c.snaplen >= snapshot
                && (c.netmask == crate::ffi::PCAP_NETMASK_UNKNOWN
                    || c.netmask == 0
                    || !c.expr.contains("broadcast"))
        });
        if let Some(c) = in_daemon {
            let expr = c.expr.trim();
            let expr = (!expr.is_empty()).then(|| expr.to_string());
            if d.reopen(&self.device, expr).is_ok() {
                self.filter = None;
                return 0;
            }
            // The daemon refused the expression: filter here instead.
        }
        match d.reopen(&self.device, None) {
            Ok(()) => {
                self.filter = Some(filter);
                0
            }
            Err(e) => {
                let msg = format!("cannot change the filter: {e}");
                self.set_err(&msg);
                PCAP_ERROR
            }
        }
    }

    /// Sends one frame on a live handle's interface.
    pub(crate) fn inject(&mut self, frame: &[u8]) -> Result<(), String> {
        let sender = match &mut self.kind {
            Kind::Live(live) => &mut live.sender,
            // Sending does not go through the daemon: directly on the interface.
            Kind::Daemon(d) => &mut d.sender,
            _ => return Err("sending packets is possible on live captures only".into()),
        };
        if sender.is_none() {
            *sender = Some(Sender::open(&self.device).map_err(|e| e.to_string())?);
        }
        match sender {
            Some(s) => s.send_all(&[frame]).map_err(|e| e.to_string()),
            None => Err("no sender".into()),
        }
    }
}

/// The header of a delivered packet: the time stamp at the handle's precision.
fn header(precision: c_int, p: &PacketRef<'_>, caplen: u32) -> PcapPkthdr {
    header_of(precision, p.timestamp, caplen, p.wire_len)
}

/// A packet header from its parts, the time stamp at the handle's precision.
fn header_of(precision: c_int, ts: Timestamp, caplen: u32, wire_len: u32) -> PcapPkthdr {
    let frac = if precision == PCAP_TSTAMP_PRECISION_NANO {
        ts.nanos()
    } else {
        ts.subsec_micros()
    };
    PcapPkthdr {
        ts: Timeval {
            tv_sec: ts.secs() as libc::time_t,
            tv_usec: libc::suseconds_t::from(frac),
        },
        caplen,
        len: wire_len,
    }
}

/// What libpcap 1.10.3 reports when asked for a time stamp precision it does not know: it
/// reads and checks the file header first (pcap: the 24 bytes and the version; pcapng: the
/// section header block's length and byte-order magic), and only then looks at the precision.
///
/// # Safety
/// `file` must be an open stream.
unsafe fn unknown_precision(file: *mut libc::FILE, precision: c_uint) -> String {
    const PCAP_MAGICS: [u32; 3] = [0xa1b2_c3d4, 0xa1b2_cd34, 0xa1b2_3c4d];
    const SHB: u32 = 0x0a0d_0d0a;
    const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
    const SHB_INSANE_MAX: u32 = 1024 * 1024;
    // fread; the error text if the stream failed.
    let read = |buf: &mut [u8]| -> Result<usize, String> {
        // SAFETY: the caller's stream; `buf` is writable.
        let n = unsafe { libc::fread(buf.as_mut_ptr().cast(), 1, buf.len(), file) };
        // SAFETY: as above.
        if n < buf.len() && unsafe { libc::ferror(file) } != 0 {
            return Err(format!(
                "error reading dump file: {}",
                strip_os_error(&std::io::Error::last_os_error())
            ));
        }
        Ok(n)
    };
    let check = || -> Result<(), String> {
        let word = |b: &[u8]| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        let mut magic = [0u8; 4];
        let n = read(&mut magic)?;
        if n < 4 {
            return Err(format!(
                "truncated dump file; tried to read 4 file header bytes, only got {n}"
            ));
        }
        let m = word(&magic);
        if PCAP_MAGICS.contains(&m) || PCAP_MAGICS.contains(&m.swap_bytes()) {
            let swapped = !PCAP_MAGICS.contains(&m);
            let mut rest = [0u8; 20];
            let n = read(&mut rest)?;
            if n < 20 {
                return Err(format!(
                    "truncated dump file; tried to read 24 file header bytes, only got {n}"
                ));
            }
            let half = |i: usize| {
                let v = u16::from_ne_bytes([rest[i], rest[i + 1]]);
                if swapped { v.swap_bytes() } else { v }
            };
            let (major, minor) = (half(0), half(2));
            if major < 2 {
                return Err("archaic pcap savefile format".to_string());
            }
            if !((major == 2 && minor <= 4) || (major == 543 && minor == 0)) {
                return Err(format!("unsupported pcap savefile version {major}.{minor}"));
            }
            return Ok(());
        }
        if m == SHB {
            let (mut len, mut bom) = ([0u8; 4], [0u8; 4]);
            if read(&mut len)? < 4 || read(&mut bom)? < 4 {
                return Err("unknown file format".to_string());
            }
            let mut len = word(&len);
            match word(&bom) {
                BYTE_ORDER_MAGIC => {}
                b if b.swap_bytes() == BYTE_ORDER_MAGIC => len = len.swap_bytes(),
                _ => return Err("unknown file format".to_string()),
            }
            if !(28..=SHB_INSANE_MAX).contains(&len) {
                return Err(format!(
                    "Section Header Block in pcapng dump file has invalid length 28 < _{len}_ < \
                     {SHB_INSANE_MAX} (BT_SHB_INSANE_MAX)"
                ));
            }
            return Ok(());
        }
        Err("unknown file format".to_string())
    };
    match check() {
        Ok(()) => format!("unknown time stamp resolution {precision}"),
        Err(e) => e,
    }
}

/// libpcap's first read buffer for a savefile: for pcap, the snapshot length up to 2 KiB (it
/// grows with the packets, see [`grown_bufsize`]); for pcapng, 2 KiB or the first section
/// header block's length if longer (libpcap 1.10.3 then reallocates for longer blocks without
/// changing the size it reports).
fn savefile_bufsize(reader: &CaptureReader<Box<dyn Read>>, snapshot: c_int, head: &[u8]) -> c_int {
    match reader.format() {
        Format::Pcapng { byte_order, .. } => {
            let len = head.get(4..8).map_or(0, |b| {
                let b = [b[0], b[1], b[2], b[3]];
                match byte_order {
                    ByteOrder::Little => u32::from_le_bytes(b),
                    _ => u32::from_be_bytes(b),
                }
            });
            c_int::try_from(len.max(2048)).unwrap_or(c_int::MAX)
        }
        _ => snapshot.min(2048),
    }
}

/// libpcap's pcap-file buffer after a record of `caplen` bytes: unchanged if it fits; the
/// snapshot length for a record longer than that; else the next power of two, at most the
/// snapshot length.
fn grown_bufsize(bufsize: c_int, caplen: u32, snapshot: c_int) -> c_int {
    let snap = snapshot.unsigned_abs();
    let have = bufsize.unsigned_abs();
    if caplen <= have {
        bufsize
    } else if caplen > snap {
        snapshot.max(bufsize)
    } else {
        c_int::try_from(caplen.next_power_of_two().min(snap)).unwrap_or(snapshot)
    }
}

/// libpcap's buffer size for a live capture: the 256 KiB block of its `TPACKET_V3` ring, or in
/// immediate mode (`TPACKET_V2`) one ring frame: the aligned headers and an Ethernet device's
/// largest frame (its MTU, at least 65,535 with segmentation offload, plus 18) or the snapshot
/// length if smaller.
fn live_bufsize(device: &str, snapshot: c_int, immediate: bool) -> c_int {
    if !immediate {
        return MAXIMUM_SNAPLEN;
    }
    const fn align(x: u32) -> u32 {
        (x + 15) & !15
    }
    // tpacket2_hdr (32) and sockaddr_ll (20); a VLAN tag reserved.
    let tp_hdrlen = align(32) + 20;
    if device == "any" {
        // Cooked: no link-layer header in the frame (at least 16 bytes of room), no MTU cap.
        let netoff = align(tp_hdrlen + 16) + 4;
        return c_int::try_from(align(netoff + snapshot.unsigned_abs())).unwrap_or(c_int::MAX);
    }
    let mtu: u32 = std::fs::read_to_string(format!("/sys/class/net/{device}/mtu"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1500);
    let frame = snapshot.unsigned_abs().min(mtu.max(65_535) + 18);
    // MAX_LINKHEADER_SIZE 256.
    let netoff = align(tp_hdrlen + 256) + 4;
    let macoff = netoff - 256;
    c_int::try_from(align(macoff + frame)).unwrap_or(c_int::MAX)
}

/// What [`Tap`] saw of a savefile: its first bytes (the file header, for the fields the reader
/// does not expose) and how many bytes were read (for libpcap's messages about a file cut in
/// its header). The raw record headers come from the reader
/// ([`CaptureReader::next_packet_with_header`]).
#[derive(Default)]
struct TapState {
    /// The first [`HEAD`] bytes read.
    head: Vec<u8>,
    /// The number of bytes read.
    total: u64,
}

/// How many of a savefile's first bytes [`TapState`] keeps: a pcap file header, or a pcapng
/// section header block's fixed part.
const HEAD: usize = 24;

/// A reader that shows [`TapState`] what goes through it.
struct Tap {
    inner: Box<dyn Read>,
    state: Rc<RefCell<TapState>>,
}

impl Read for Tap {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        {
            let mut t = self.state.borrow_mut();
            let want = HEAD.saturating_sub(t.head.len()).min(n);
            t.head.extend_from_slice(&buf[..want]);
            t.total += n as u64;
        }
        Ok(n)
    }
}

/// libpcap's error for a pcapng file whose first section header block it cannot read, or
/// `None` if that block is whole (later errors are the reader's): `head` is the file's first
/// bytes, `total` how many were read before the reader failed, `truncated` whether it failed
/// at the end of the file.
fn pcapng_header_error(head: &[u8], total: u64, truncated: bool) -> Option<String> {
    const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
    const SHB_INSANE_MAX: u32 = 1024 * 1024;
    let word = |i: usize| {
        head.get(i..i + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    // The length and the byte-order magic: without them (or with a wrong magic) the file is
    // not pcapng to libpcap, nor pcap.
    let (Some(len), Some(bom)) = (word(4), word(8)) else {
        return Some("unknown file format".to_string());
    };
    let swapped = match bom {
        BYTE_ORDER_MAGIC => false,
        b if b.swap_bytes() == BYTE_ORDER_MAGIC => true,
        _ => return Some("unknown file format".to_string()),
    };
    let len = if swapped { len.swap_bytes() } else { len };
    if !(28..=SHB_INSANE_MAX).contains(&len) {
        return Some(format!(
            "Section Header Block in pcapng dump file has invalid length 28 < _{len}_ < \
             {SHB_INSANE_MAX} (BT_SHB_INSANE_MAX)"
        ));
    }
    if truncated && total < u64::from(len) {
        return Some(format!(
            "truncated pcapng dump file; tried to read {} bytes, only got {}",
            len - 12,
            total.saturating_sub(12)
        ));
    }
    let half = |i: usize| {
        let v = head
            .get(i..i + 2)
            .map_or(0, |b| u16::from_ne_bytes([b[0], b[1]]));
        if swapped { v.swap_bytes() } else { v }
    };
    let (major, minor) = (half(12), half(14));
    if !(major == 1 && (minor == 0 || minor == 2)) {
        return Some(format!(
            "unsupported pcapng savefile version {major}.{minor}"
        ));
    }
    None
}

fn is_swapped(b: ByteOrder) -> bool {
    (b == ByteOrder::Little) != cfg!(target_endian = "little")
}

/// Copies `msg` into a C error buffer, cut at a character boundary to fit, NUL-terminated.
pub(crate) fn write_errbuf(buf: &mut [c_char], msg: &str) {
    let max = buf.len().saturating_sub(1);
    let mut end = msg.len().min(max);
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    for (d, s) in buf.iter_mut().zip(msg.as_bytes()[..end].iter()) {
        *d = *s as c_char;
    }
    if let Some(z) = buf.get_mut(end) {
        *z = 0;
    }
}

/// "No such file or directory" rather than Rust's "... (os error 2)".
fn strip_os_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// The data pointer a callback gets for a packet: its bytes, or for a zero-length record a pointer
/// to zeroed memory, never the dangling pointer of an empty slice. libpcap hands out a pointer
/// into its buffer whatever the length, and programs such as tcpflow read a link-layer header
/// before they look at the captured length.
pub(crate) fn data_ptr(data: &[u8]) -> *const u8 {
    static ZEROS: [u8; 65_536] = [0; 65_536];
    if data.is_empty() {
        ZEROS.as_ptr()
    } else {
        data.as_ptr()
    }
}

/// libpcap's messages for a file it cannot open.
fn open_error_text(e: &netsift_capture::Error) -> String {
    match e.kind() {
        ErrorKind::BadMagic => "unknown file format".to_string(),
        ErrorKind::Truncated => {
            if e.offset() == Some(0) && e.detail().contains("magic number") {
                let got = numbers(e.detail()).last().copied().unwrap_or(0);
                format!("truncated dump file; tried to read 4 file header bytes, only got {got}")
            } else {
                let got = numbers(e.detail()).last().copied().unwrap_or(0);
                format!(
                    "truncated dump file; tried to read 24 file header bytes, only got {}",
                    got.saturating_sub(4)
                )
            }
        }
        // libpcap 1.10.3 (sf-pcap.c) reads versions 2.0 to 2.4 and 543.0.
        ErrorKind::Unsupported if e.what() == "pcap file header" => match numbers(e.detail())[..] {
            [major, ..] if major < 2 => "archaic pcap savefile format".to_string(),
            [major, minor, ..] => {
                format!("unsupported pcap savefile version {major}.{minor}")
            }
            _ => e.to_string(),
        },
        ErrorKind::Unsupported
            if e.what() == "pcapng section header block" && e.detail().starts_with("version ") =>
        {
            match numbers(e.detail())[..] {
                [major, minor, ..] => {
                    format!("unsupported pcapng savefile version {major}.{minor}")
                }
                _ => e.to_string(),
            }
        }
        _ => e.to_string(),
    }
}

/// The decimal numbers in a message, in order.
fn numbers(s: &str) -> Vec<u64> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// libpcap's message for a pcapng block the reader could not read, where netsift's reader
/// and libpcap's `read_block` fail for the same reason (a cut block, a bad length, a
/// mismatched trailer); `None` for the others.
fn pcapng_block_error(e: &netsift_capture::Error) -> Option<String> {
    let d = e.detail();
    let n = numbers(d);
    match e.kind() {
        // libpcap reads the 8-byte block header, then the rest of the block.
        ErrorKind::Truncated if d.contains("block header needs 8 bytes") => Some(format!(
            "truncated pcapng dump file; tried to read 8 bytes, only got {}",
            n.get(1)?
        )),
        ErrorKind::Truncated if d.starts_with("header says ") => Some(format!(
            "truncated pcapng dump file; tried to read {} bytes, only got {}",
            n.first()?.checked_sub(8)?,
            n.get(1)?.checked_sub(8)?
        )),
        ErrorKind::Corrupt if d.contains("does not match") => {
            Some("block total length in header and trailer don't match".to_string())
        }
        ErrorKind::Corrupt if d.ends_with("is less than the minimum of 12") => Some(format!(
            "block in pcapng dump file has a length of {} < 12",
            n.first()?
        )),
        ErrorKind::Corrupt if d.ends_with("is not a multiple of 4") => Some(format!(
            "block in pcapng dump file has a length of {} that is not a multiple of 4",
            n.first()?
        )),
        _ => None,
    }
}

/// libpcap's message for an error in the middle of a savefile.
fn read_error_text(e: &netsift_capture::Error, pcapng: bool) -> String {
    if pcapng && let Some(msg) = pcapng_block_error(e) {
        return msg;
    }
    let n = numbers(e.detail());
    match e.kind() {
        ErrorKind::Truncated if !pcapng => {
            if e.detail().contains("record header needs") {
                format!(
                    "truncated dump file; tried to read {} header bytes, only got {}",
                    n.first().copied().unwrap_or(16),
                    n.get(1).copied().unwrap_or(0)
                )
            } else {
                let mut s = String::new();
                let _ = write!(
                    s,
                    "truncated dump file; tried to read {} captured bytes, only got {}",
                    n.first().copied().unwrap_or(0),
                    n.get(1).copied().unwrap_or(0)
                );
                s
            }
        }
        _ => e.to_string(),
    }
}

/// A pcap record header as libpcap reads it: the time stamp's two signed 32-bit fields as they
/// are (libpcap neither normalises a fraction of a second or more nor widens the seconds
/// unsigned), and the lengths, exchanged where the file's version says they are (before 2.3;
/// 2.3 when the captured length is the larger; 543.0).
struct RawRecord {
    sec: i32,
    frac: i32,
    caplen: u32,
    len: u32,
}

impl RawRecord {
    fn new(b: &[u8], order: ByteOrder, version: (c_int, c_int)) -> RawRecord {
        let w = |i: usize| {
            let b = [b[i], b[i + 1], b[i + 2], b[i + 3]];
            match order {
                ByteOrder::Little => u32::from_le_bytes(b),
                _ => u32::from_be_bytes(b),
            }
        };
        let (mut caplen, mut len) = (w(8), w(12));
        let swapped = match version {
            (2, minor) if minor < 3 => true,
            (2, 3) => caplen > len,
            (543, 0) => true,
            _ => false,
        };
        if swapped {
            std::mem::swap(&mut caplen, &mut len);
        }
        RawRecord {
            sec: w(0) as i32,
            frac: w(4) as i32,
            caplen,
            len,
        }
    }

    /// The time stamp at the handle's precision, scaled as libpcap scales it (in `long`,
    /// dividing towards zero).
    fn timeval(&self, nano_file: bool, precision: c_int) -> Timeval {
        let frac = libc::suseconds_t::from(self.frac);
        let nano = precision == PCAP_TSTAMP_PRECISION_NANO;
        Timeval {
            tv_sec: libc::time_t::from(self.sec),
            tv_usec: match (nano_file, nano) {
                (false, true) => frac * 1000,
                (true, false) => frac / 1000,
                _ => frac,
            },
        }
    }
}

/// What reading one packet gave.
enum Step {
    /// A packet was delivered (or rejected by the filter: `false`).
    Packet(bool),
    /// End of file.
    Eof,
    /// An error (message in errbuf).
    Error,
}

/// Reads one savefile packet and, if the filter accepts it, hands it to `deliver`.
///
/// # Safety
/// `p` must point to a live handle whose kind is `Offline`; no other reference to its fields
/// may be held across the call.
unsafe fn offline_step(
    p: *mut Pcap,
    deliver: &mut dyn FnMut(*mut Pcap, &PcapPkthdr, *const u8),
) -> Step {
    // SAFETY: the caller guarantees `p` is valid; the borrows below end before `deliver`.
    let (hdr, data) = {
        let this = unsafe { &mut *p };
        let Kind::Offline(off) = &mut this.kind else {
            this.set_err("not a savefile");
            return Step::Error;
        };
        let pcapng = matches!(off.reader.format(), Format::Pcapng { .. });
        let (precision, linktype, snapshot) = (this.precision, this.linktype, this.snapshot);
        let order = match off.reader.format() {
            Format::Pcap { byte_order, .. } => Some(byte_order),
            _ => None,
        };
        // A pcap record's header as in the file: libpcap checks and reports its lengths before
        // it reads the data, and hands out its time stamp as it is.
        let (result, raw_header) = off.reader.next_packet_with_header();
        let raw = order.and_then(|o| raw_header.map(|b| RawRecord::new(b, o, this.version)));
        let max = names::max_snaplen_for_dlt(linktype);
        let snap = snapshot.unsigned_abs();
        let too_long = |caplen: u32| {
            (caplen > max).then(|| {
                if caplen > snap {
                    format!(
                        "invalid packet capture length {caplen}, bigger than snaplen of {snapshot}"
                    )
                } else {
                    format!("invalid packet capture length {caplen}, bigger than maximum of {max}")
                }
            })
        };
        let packet = match result {
            None => return Step::Eof,
            Some(Err(e)) => {
                let msg = match &raw {
                    // The header was read: its length is checked, the buffer grown, then the
                    // data read.
                    Some(r) => too_long(r.caplen).unwrap_or_else(|| {
                        this.bufsize = grown_bufsize(this.bufsize, r.caplen, snapshot);
                        match e.kind() {
                            ErrorKind::Truncated => {
                                let got = numbers(e.detail()).get(1).copied().unwrap_or(0);
                                // Past the snapshot length libpcap reads the snapshot's
                                // bytes, then skips the rest.
                                let want = if r.caplen > snap && got < u64::from(snap) {
                                    snap
                                } else {
                                    r.caplen
                                };
                                format!(
                                    "truncated dump file; tried to read {want} captured bytes, \
                                     only got {got}"
                                )
                            }
                            _ => read_error_text(&e, pcapng),
                        }
                    }),
                    None => read_error_text(&e, pcapng),
                };
                write_errbuf(&mut this.errbuf, &msg);
                return Step::Error;
            }
            Some(Ok(pk)) => pk,
        };
        let kept = u32::try_from(packet.data.len()).unwrap_or(u32::MAX);
        let caplen = raw.as_ref().map_or(kept, |r| r.caplen);
        // A pcapng packet longer than the snapshot length is an error to libpcap (the reader
        // has cut simple packet blocks to it already, as libpcap does).
        let invalid = if pcapng {
            (caplen > snap).then(|| {
                format!("invalid packet capture length {caplen}, bigger than snaplen of {snapshot}")
            })
        } else {
            too_long(caplen)
        };
        if let Some(msg) = invalid {
            write_errbuf(&mut this.errbuf, &msg);
            return Step::Error;
        }
        if !pcapng {
            this.bufsize = grown_bufsize(this.bufsize, caplen, snapshot);
        }
        let caplen = caplen.min(snap).min(kept);
        if let Some(f) = &mut this.filter {
            let keep = f.run(&packet.data[..caplen as usize], packet.wire_len);
            if keep == 0 {
                return Step::Packet(false);
            }
        }
        // A pcap record's own time stamp and length, as libpcap hands them out (pcapng: the
        // reader's, at the handle's precision).
        let hdr = match &raw {
            Some(r) => PcapPkthdr {
                ts: r.timeval(off.nano_file, precision),
                caplen,
                len: r.len,
            },
            None => header(precision, &packet, caplen),
        };
        (hdr, data_ptr(packet.data))
    };
    deliver(p, &hdr, data);
    Step::Packet(true)
}

/// libpcap's `pcap_offline_read`: up to `cnt` accepted packets (all if `cnt <= 0`). Returns the
/// number delivered, 0 at end of file, -1 on error, -2 after `pcap_breakloop`.
///
/// # Safety
/// As [`offline_step`].
pub(crate) unsafe fn offline_read(
    p: *mut Pcap,
    cnt: c_int,
    deliver: &mut dyn FnMut(*mut Pcap, &PcapPkthdr, *const u8),
) -> c_int {
    let mut n: c_int = 0;
    loop {
        // SAFETY: `p` is valid; only the atomic field is touched.
        let brk = unsafe { &(*p).break_loop };
        if brk.load(Ordering::Relaxed) {
            if n == 0 {
                brk.store(false, Ordering::Relaxed);
                return PCAP_ERROR_BREAK;
            }
            return n;
        }
        // SAFETY: forwarded contract.
        match unsafe { offline_step(p, deliver) } {
            Step::Eof => return 0,
            Step::Error => return PCAP_ERROR,
            Step::Packet(false) => {}
            Step::Packet(true) => {
                n += 1;
                if cnt > 0 && n >= cnt {
                    return n;
                }
            }
        }
    }
}

/// One read of a live capture (libpcap's `read_op`): waits up to the timeout, then delivers the
/// ready packets the filter accepts, at most `cnt` (all ready if `cnt <= 0`). Returns the number
/// delivered (0 after a timeout), -1 on error, -2 after `pcap_breakloop`.
///
/// # Safety
/// `p` must point to a live handle whose kind is `Live`.
pub(crate) unsafe fn live_read(
    p: *mut Pcap,
    cnt: c_int,
    deliver: &mut dyn FnMut(*mut Pcap, &PcapPkthdr, *const u8),
) -> c_int {
    // SAFETY: `p` is valid; the atomic field is only read and written atomically.
    let brk = unsafe { &(*p).break_loop };
    if brk.swap(false, Ordering::Relaxed) {
        return PCAP_ERROR_BREAK;
    }
    let (timeout, precision, snapshot) = {
        // SAFETY: a short shared borrow of plain fields.
        let this = unsafe { &*p };
        let t = this.read_timeout();
        (t, this.precision, this.snapshot)
    };
    // SAFETY: the source is borrowed for the poll; the callback may only touch other fields
    // (errbuf, break flag, next slot, the filter) — see the module notes.
    let src = unsafe {
        let Kind::Live(live) = &mut (*p).kind else {
            (*p).set_err("the capture is not active");
            return PCAP_ERROR;
        };
        &mut live.src
    };
    let mut n: c_int = 0;
    let mut f = |pk: PacketRef<'_>| {
        let mut caplen = u32::try_from(pk.data.len()).unwrap_or(u32::MAX);
        // SAFETY: the filter is borrowed for this packet only, not across the callback (which
        // may replace it with `pcap_setfilter`: the next packet then takes the new one).
        if let Some(f) = unsafe { &mut (*p).filter } {
            let keep = f.run(pk.data, pk.wire_len);
            if keep == 0 {
                return Flow::Continue;
            }
            caplen = caplen.min(keep);
        }
        caplen = caplen.min(snapshot.unsigned_abs());
        let hdr = header_of(precision, pk.timestamp, caplen, pk.wire_len);
        deliver(p, &hdr, data_ptr(pk.data));
        n += 1;
        if (cnt > 0 && n >= cnt) || brk.load(Ordering::Relaxed) {
            Flow::Stop
        } else {
            Flow::Continue
        }
    };
    match src.poll_batch(timeout, &mut f) {
        Ok(_) => {
            if n == 0 && brk.swap(false, Ordering::Relaxed) {
                return PCAP_ERROR_BREAK;
            }
            n
        }
        Err(e) => {
            let msg = format!("{e}");
            // SAFETY: the poll's borrows have ended.
            unsafe { (*p).set_err(&msg) };
            PCAP_ERROR
        }
    }
}

/// One read of a capture through `netsiftd`: waits up to the timeout (checking the break flag
/// and the flow at least every 100 ms), then delivers the ready packets, at most `cnt` (all
/// ready if `cnt <= 0`), straight from the shared buffer, and releases them after the batch.
/// Returns as [`live_read`]; an error once the daemon closed the flow or went away.
///
/// # Safety
/// `p` must point to a live handle whose kind is `Daemon`.
pub(crate) unsafe fn daemon_read(
    p: *mut Pcap,
    cnt: c_int,
    deliver: &mut dyn FnMut(*mut Pcap, &PcapPkthdr, *const u8),
) -> c_int {
    /// The longest wait between two looks at the break flag and the flow.
    const SLICE: Duration = Duration::from_millis(100);
    // SAFETY: `p` is valid; the atomic field is only read and written atomically.
    let brk = unsafe { &(*p).break_loop };
    if brk.swap(false, Ordering::Relaxed) {
        return PCAP_ERROR_BREAK;
    }
    let (timeout, precision, snapshot) = {
        // SAFETY: a short shared borrow of plain fields.
        let this = unsafe { &*p };
        let t = this.read_timeout();
        (t, this.precision, this.snapshot.unsigned_abs())
    };
    // SAFETY: the capture is reached through the raw pointer and borrowed only between calls of
    // `deliver` (the callback may touch other fields: errbuf, break flag, next slot, stats).
    let d: *mut DaemonCapture = unsafe {
        let Kind::Daemon(d) = &mut (*p).kind else {
            (*p).set_err("the capture is not active");
            return PCAP_ERROR;
        };
        &mut **d
    };
    let closed = |p: *mut Pcap| {
        // SAFETY: no borrow of the handle is held here.
        unsafe { (*p).set_err(daemon::CLOSED) };
        PCAP_ERROR
    };
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    loop {
        // SAFETY: a short borrow of the capture (see above).
        let dc = unsafe { &mut *d };
        if dc.closed {
            return closed(p);
        }
        let reader = dc.flow.reader();
        if reader.available() > 0 {
            break;
        }
        if reader.is_finished() {
            dc.closed = true;
            return closed(p);
        }
        if brk.swap(false, Ordering::Relaxed) {
            return PCAP_ERROR_BREAK;
        }
        let wait = match deadline {
            Some(dl) => {
                let left = dl.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return if dc.alive() { 0 } else { closed(p) };
                }
                left.min(SLICE)
            }
            None => SLICE,
        };
        if dc.flow.reader().wait_for(1, wait) == 0 && !dc.alive() {
            return closed(p);
        }
    }
    let mut n: c_int = 0;
    loop {
        if cnt > 0 && n >= cnt {
            break;
        }
        let (hdr, data) = {
            // SAFETY: short borrows of the capture and the filter, ended before `deliver` (the
            // callback may replace the filter: the next packet takes the new one).
            let (dc, filter) = unsafe { (&mut *d, &mut (*p).filter) };
            let filtered = dc.expr.is_some();
            let Some(pk) = dc.flow.reader().next() else {
                break;
            };
            let mut caplen = u32::try_from(pk.data.len()).unwrap_or(u32::MAX);
            if filtered {
                // The daemon's filter cut the packet to its return value already.
                caplen = caplen.min(pk.result);
            }
            if let Some(f) = filter {
                let keep = f.run(pk.data, pk.wire_len);
                if keep == 0 {
                    continue;
                }
                caplen = caplen.min(keep);
            }
            caplen = caplen.min(snapshot);
            (
                header_of(precision, pk.timestamp, caplen, pk.wire_len),
                data_ptr(pk.data),
            )
        };
        // `data` stays valid for the call: the slot is held until the release below
        // (slow-reader preference), or it is the reader's copy, untouched until the next
        // `next` (fast-reader preference, if the flow group was created with it).
        deliver(p, &hdr, data);
        n += 1;
        if brk.load(Ordering::Relaxed) {
            break;
        }
    }
    // SAFETY: the callbacks have returned; a short borrow.
    unsafe { (*d).flow.reader().release() };
    if n == 0 && brk.swap(false, Ordering::Relaxed) {
        return PCAP_ERROR_BREAK;
    }
    n
}

/// Calls a C `pcap_handler`.
pub(crate) fn c_deliver(
    cb: PcapHandler,
    user: *mut u8,
) -> impl FnMut(*mut Pcap, &PcapPkthdr, *const u8) {
    move |_p, hdr, data| {
        if let Some(cb) = cb {
            // SAFETY: the caller of pcap_loop/dispatch supplied a valid handler; `hdr` and
            // `data` are valid for the call.
            unsafe { cb(user, hdr, data) };
        }
    }
}

/// Copies a packet into the handle's `next` slot (for `pcap_next_ex`).
pub(crate) fn next_deliver(p: *mut Pcap, hdr: &PcapPkthdr, data: *const u8) {
    // SAFETY: `data` holds `hdr.caplen` bytes; the slot fields are not borrowed by the reader.
    unsafe {
        let bytes = std::slice::from_raw_parts(data, hdr.caplen as usize);
        let buf = &mut (*p).next_buf;
        buf.clear();
        buf.extend_from_slice(bytes);
        (*p).next_hdr = *hdr;
    }
}

/// Reads packets: a savefile to its end or `cnt`, or one batch of a live capture.
///
/// # Safety
/// `p` must be a valid handle.
pub(crate) unsafe fn dispatch(
    p: *mut Pcap,
    cnt: c_int,
    deliver: &mut dyn FnMut(*mut Pcap, &PcapPkthdr, *const u8),
) -> c_int {
    // SAFETY: caller's contract; the kind is only inspected.
    match unsafe { &(*p).kind } {
        Kind::Offline(_) => unsafe { offline_read(p, cnt, deliver) },
        Kind::Live(_) => unsafe { live_read(p, cnt, deliver) },
        Kind::Daemon(_) => unsafe { daemon_read(p, cnt, deliver) },
        Kind::Created => {
            unsafe { (*p).set_err("This handle hasn't been activated yet") };
            crate::ffi::PCAP_ERROR_NOT_ACTIVATED
        }
        Kind::Dead => {
            unsafe {
                (*p).set_err("Packets aren't available from dead pcap_t's");
            }
            PCAP_ERROR
        }
    }
}
