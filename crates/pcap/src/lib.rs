//! A libpcap-compatible shared library on netsift.
//!
//! Built as a `cdylib` named `libpcap.so` with the soname `libpcap.so.0.8` (Debian's), it exports
//! the C API of libpcap 1.10.3 that capture tools use, so that programs linked against libpcap —
//! Debian's own `tcpdump` among them — run on netsift unmodified:
//!
//! ```text
//! scripts/netsift-libpcap            # builds target/netsift-libpcap/libpcap.so.0.8
//! LD_LIBRARY_PATH=target/netsift-libpcap tcpdump -r trace.pcap -n 'tcp port 80'
//! ```
//!
//! - **Savefiles** (`pcap_open_offline*`, `-` for standard input) are read by netsift's
//!   [`CaptureReader`](netsift_capture::CaptureReader): pcap (micro- and nanosecond, either byte
//!   order) and pcapng, with time stamps delivered at the precision the caller asked for.
//! - **Filters** (`pcap_compile`) are compiled by netsift's one filter API (`netsift_filter`,
//!   for the handle's target) into libpcap-identical classic BPF, with libpcap's savefile
//!   semantics for savefile handles, and run (`pcap_setfilter`) by the engine the filter API
//!   chooses (the JIT where it runs, else the interpreter).
//! - **Live capture** (`pcap_create`/`pcap_activate`, `pcap_open_live`) goes through `netsiftd`
//!   when it runs (a flow of its graph, read from shared memory; the filter runs in the daemon),
//!   else through netsift's `AF_PACKET` source with the filter in user space on the ring's
//!   memory (`NETSIFT_PCAP_DIRECT=1` forces this).
//! - **Dumps** (`pcap_dump_*`) are written by netsift's
//!   [`PcapWriter`](netsift_capture::PcapWriter).
//!
//! Every exported function catches panics (none may cross the C boundary) and checks its pointer
//! arguments for null. See `docs/libpcap.md` for what is and is not supported.
//!
//! The Rust items of this crate are the C functions themselves; the `rlib` exists for tests.
#![deny(missing_docs)]
// Exported C functions take raw pointers; their contracts are libpcap's documented ones.
#![allow(clippy::missing_safety_doc)]

/// Runs `body`, turning a panic into `default`.
macro_rules! guard {
    ($default:expr, $body:expr) => {
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(v) => v,
            Err(_) => $default,
        }
    };
}

mod bpf;
mod daemon;
mod devs;
mod dump;
pub mod ffi;
mod handle;
mod namedb;
mod names;

use std::ffi::{CStr, c_char, c_int, c_long, c_uint, c_void};
use std::ptr;
use std::sync::atomic::Ordering;

use netsift_bpf::{Insn, Program, asm};
use netsift_capture::LinkType;
use netsift_capture::live::Direction;
use netsift_filter::{Choice, ErrorKind, Filter, Input, Target};

pub use dump::Dumper;
use ffi::*;
pub use handle::Pcap;
use handle::{Kind, write_errbuf};

/// The version string `pcap_lib_version` returns.
const LIB_VERSION: &str = concat!(
    "netsift libpcap ",
    env!("CARGO_PKG_VERSION"),
    " (libpcap version 1.10.3 compatible, netsift filters and capture)\0"
);

/// Writes `msg` into a caller's `PCAP_ERRBUF_SIZE` buffer, if there is one.
///
/// # Safety
/// `errbuf` must be null or point to `PCAP_ERRBUF_SIZE` writable bytes.
unsafe fn put_err(errbuf: *mut c_char, msg: &str) {
    if !errbuf.is_null() {
        // SAFETY: the caller's contract.
        let buf = unsafe { std::slice::from_raw_parts_mut(errbuf, PCAP_ERRBUF_SIZE) };
        write_errbuf(buf, msg);
    }
}

/// The bytes of a C string, or `None` for null.
///
/// # Safety
/// `s` must be null or NUL-terminated.
unsafe fn cbytes<'a>(s: *const c_char) -> Option<&'a [u8]> {
    if s.is_null() {
        None
    } else {
        // SAFETY: the caller's contract.
        Some(unsafe { CStr::from_ptr(s) }.to_bytes())
    }
}

/// The handle behind a `pcap_t *`, or `None` for null.
///
/// # Safety
/// `p` must be null or a handle from this library that has not been closed.
unsafe fn handle<'a>(p: *mut Pcap) -> Option<&'a mut Pcap> {
    // SAFETY: the caller's contract.
    unsafe { p.as_mut() }
}

/// Boxes a handle for C.
fn into_c(p: Pcap) -> *mut Pcap {
    Box::into_raw(Box::new(p))
}

/// libpcap's check that a setting is made before activation.
fn check_not_activated(p: &mut Pcap) -> Result<(), c_int> {
    if matches!(p.kind, Kind::Created) {
        Ok(())
    } else {
        p.set_err("can't perform  operation on activated capture");
        Err(PCAP_ERROR_ACTIVATED)
    }
}

/// Applies a setting to a created (not yet activated) handle.
///
/// # Safety
/// As [`handle`].
unsafe fn set_option(p: *mut Pcap, f: impl FnOnce(&mut Pcap) -> c_int) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: the caller's contract.
        let Some(this) = (unsafe { handle(p) }) else {
            return PCAP_ERROR;
        };
        match check_not_activated(this) {
            Ok(()) => f(this),
            Err(e) => e,
        }
    })
}

/// Static C string from a NUL-terminated table entry.
fn c_static(s: &'static str) -> *const c_char {
    s.as_ptr().cast()
}

// ---------------------------------------------------------------------------------------------
// Opening and closing
// ---------------------------------------------------------------------------------------------

/// `pcap_t *pcap_create(const char *source, char *errbuf)`: a live handle to configure and then
/// activate. A null source means the `any` device (which this library cannot capture on).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_create(source: *const c_char, errbuf: *mut c_char) -> *mut Pcap {
    guard!(ptr::null_mut(), {
        // SAFETY: the caller passes a C string or null.
        let dev = unsafe { cbytes(source) }
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_else(|| "any".to_string());
        let _ = errbuf;
        into_c(Pcap::created(dev))
    })
}

/// `int pcap_activate(pcap_t *p)`: opens the interface with the settings made so far.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_activate(p: *mut Pcap) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: the caller passes a handle.
        let Some(this) = (unsafe { handle(p) }) else {
            return PCAP_ERROR;
        };
        if !matches!(this.kind, Kind::Created) {
            this.set_err("can't perform  operation on activated capture");
            return PCAP_ERROR_ACTIVATED;
        }
        this.activate()
    })
}

/// `pcap_t *pcap_open_live(const char *device, int snaplen, int promisc, int to_ms, char
/// *errbuf)`: create, configure and activate in one call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_open_live(
    device: *const c_char,
    snaplen: c_int,
    promisc: c_int,
    to_ms: c_int,
    errbuf: *mut c_char,
) -> *mut Pcap {
    guard!(ptr::null_mut(), {
        // SAFETY: the caller passes a C string or null.
        let dev = unsafe { cbytes(device) }
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_else(|| "any".to_string());
        let mut p = Pcap::created(dev.clone());
        p.opts.snaplen = snaplen;
        p.opts.promisc = promisc != 0;
        p.opts.timeout_ms = to_ms;
        let status = p.activate();
        if status < 0 {
            let inner = err_string(&p.errbuf);
            let msg = match status {
                PCAP_ERROR => format!("{dev}: {inner}"),
                PCAP_ERROR_NO_SUCH_DEVICE
                | PCAP_ERROR_PERM_DENIED
                | PCAP_ERROR_PROMISC_PERM_DENIED => {
                    format!("{dev}: {} ({inner})", status_text(status))
                }
                _ => format!("{dev}: {}", status_text(status)),
            };
            // SAFETY: the caller's error buffer.
            unsafe { put_err(errbuf, &msg) };
            return ptr::null_mut();
        }
        into_c(p)
    })
}

/// The text in an error buffer.
fn err_string(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `pcap_t *pcap_open_dead(int linktype, int snaplen)`: a handle that only compiles filters.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_open_dead(linktype: c_int, snaplen: c_int) -> *mut Pcap {
    guard!(
        ptr::null_mut(),
        into_c(Pcap::dead(linktype, snaplen, PCAP_TSTAMP_PRECISION_MICRO))
    )
}

/// `pcap_t *pcap_open_dead_with_tstamp_precision(int linktype, int snaplen, u_int precision)`.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_open_dead_with_tstamp_precision(
    linktype: c_int,
    snaplen: c_int,
    precision: c_uint,
) -> *mut Pcap {
    guard!(ptr::null_mut(), {
        let prec = match precision {
            0 => PCAP_TSTAMP_PRECISION_MICRO,
            1 => PCAP_TSTAMP_PRECISION_NANO,
            _ => return ptr::null_mut(),
        };
        into_c(Pcap::dead(linktype, snaplen, prec))
    })
}

/// `pcap_t *pcap_open_offline(const char *fname, char *errbuf)`: reads a pcap or pcapng file
/// (`-`: standard input), microsecond time stamps.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_open_offline(fname: *const c_char, errbuf: *mut c_char) -> *mut Pcap {
    // SAFETY: forwarded.
    unsafe { pcap_open_offline_with_tstamp_precision(fname, 0, errbuf) }
}

/// `pcap_t *pcap_open_offline_with_tstamp_precision(const char *fname, u_int precision, char
/// *errbuf)`: as `pcap_open_offline`, time stamps in micro- (0) or nanoseconds (1).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_open_offline_with_tstamp_precision(
    fname: *const c_char,
    precision: c_uint,
    errbuf: *mut c_char,
) -> *mut Pcap {
    guard!(ptr::null_mut(), {
        // SAFETY: a C string or null.
        let Some(path) = (unsafe { cbytes(fname) }) else {
            // SAFETY: the caller's error buffer.
            unsafe { put_err(errbuf, "A null pointer was supplied as the file name") };
            return ptr::null_mut();
        };
        // An unknown precision is reported after the file's header is checked, as in libpcap.
        match Pcap::offline(path, precision) {
            Ok(p) => into_c(p),
            Err(msg) => {
                // SAFETY: as above.
                unsafe { put_err(errbuf, &msg) };
                ptr::null_mut()
            }
        }
    })
}

/// `pcap_t *pcap_fopen_offline(FILE *fp, char *errbuf)`: as `pcap_open_offline` on an open
/// stream, read from its current position; `pcap_close` closes it (unless it is `stdin`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_fopen_offline(fp: *mut libc::FILE, errbuf: *mut c_char) -> *mut Pcap {
    // SAFETY: forwarded.
    unsafe { pcap_fopen_offline_with_tstamp_precision(fp, 0, errbuf) }
}

/// `pcap_t *pcap_fopen_offline_with_tstamp_precision(FILE *fp, u_int precision, char
/// *errbuf)`: as `pcap_fopen_offline`, time stamps in micro- (0) or nanoseconds (1). On
/// failure the stream stays open.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_fopen_offline_with_tstamp_precision(
    fp: *mut libc::FILE,
    precision: c_uint,
    errbuf: *mut c_char,
) -> *mut Pcap {
    guard!(ptr::null_mut(), {
        if fp.is_null() {
            // SAFETY: the caller's error buffer.
            unsafe {
                put_err(
                    errbuf,
                    "Null FILE * pointer provided to savefile open routine",
                )
            };
            return ptr::null_mut();
        }
        // SAFETY: the caller's open stream, owned by the handle from here on success. An
        // unknown precision is reported after the file's header is checked, as in libpcap.
        match unsafe { Pcap::from_stream(fp, precision) } {
            Ok(p) => into_c(p),
            Err(msg) => {
                // SAFETY: as above.
                unsafe { put_err(errbuf, &msg) };
                ptr::null_mut()
            }
        }
    })
}

/// `void pcap_close(pcap_t *p)`: closes the handle and frees it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_close(p: *mut Pcap) {
    guard!((), {
        if !p.is_null() {
            // SAFETY: allocated by into_c; the caller closes it once.
            drop(unsafe { Box::from_raw(p) });
        }
    })
}

/// `int pcap_init(unsigned int opts, char *errbuf)`: nothing to initialise; always succeeds.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_init(opts: c_uint, errbuf: *mut c_char) -> c_int {
    let _ = (opts, errbuf);
    0
}

// ---------------------------------------------------------------------------------------------
// Settings of created handles
// ---------------------------------------------------------------------------------------------

/// `int pcap_set_snaplen(pcap_t *p, int snaplen)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_set_snaplen(p: *mut Pcap, snaplen: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        set_option(p, |h| {
            h.opts.snaplen = snaplen;
            0
        })
    }
}

/// `int pcap_set_promisc(pcap_t *p, int promisc)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_set_promisc(p: *mut Pcap, promisc: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        set_option(p, |h| {
            h.opts.promisc = promisc != 0;
            0
        })
    }
}

/// `int pcap_set_timeout(pcap_t *p, int to_ms)`: the read timeout in milliseconds (0: wait for
/// packets without limit).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_set_timeout(p: *mut Pcap, to_ms: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        set_option(p, |h| {
            h.opts.timeout_ms = to_ms;
            0
        })
    }
}

/// `int pcap_set_buffer_size(pcap_t *p, int buffer_size)`: the ring size in bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_set_buffer_size(p: *mut Pcap, buffer_size: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        set_option(p, |h| {
            h.opts.buffer_size = buffer_size;
            0
        })
    }
}

/// `int pcap_set_immediate_mode(pcap_t *p, int immediate)`: deliver packets as they arrive.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_set_immediate_mode(p: *mut Pcap, immediate: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        set_option(p, |h| {
            h.opts.immediate = immediate != 0;
            0
        })
    }
}

/// `int pcap_set_rfmon(pcap_t *p, int rfmon)`: monitor mode is not supported; setting it makes
/// activation fail with `PCAP_ERROR_RFMON_NOTSUP`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_set_rfmon(p: *mut Pcap, rfmon: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        set_option(p, |h| {
            h.opts.rfmon = rfmon != 0;
            0
        })
    }
}

/// `int pcap_can_set_rfmon(pcap_t *p)`: 0, monitor mode is not supported.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_can_set_rfmon(p: *mut Pcap) -> c_int {
    if p.is_null() { PCAP_ERROR } else { 0 }
}

/// `int pcap_set_tstamp_type(pcap_t *p, int type)`: host (0) or adapter (3, 4) time stamps;
/// other types give `PCAP_WARNING_TSTAMP_TYPE_NOTSUP`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_set_tstamp_type(p: *mut Pcap, tstamp_type: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        set_option(p, |h| match tstamp_type {
            0 | 3 | 4 => {
                h.opts.tstamp_type = tstamp_type;
                0
            }
            _ => PCAP_WARNING_TSTAMP_TYPE_NOTSUP,
        })
    }
}

/// `int pcap_set_tstamp_precision(pcap_t *p, int precision)`: micro- (0) or nanoseconds (1).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_set_tstamp_precision(p: *mut Pcap, precision: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        set_option(p, |h| match precision {
            PCAP_TSTAMP_PRECISION_MICRO | PCAP_TSTAMP_PRECISION_NANO => {
                h.precision = precision;
                0
            }
            _ => PCAP_ERROR_TSTAMP_PRECISION_NOTSUP,
        })
    }
}

/// `int pcap_get_tstamp_precision(pcap_t *p)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_get_tstamp_precision(p: *mut Pcap) -> c_int {
    // SAFETY: a handle or null.
    guard!(
        PCAP_ERROR,
        unsafe { handle(p) }.map_or(PCAP_ERROR, |h| h.precision)
    )
}

/// `int pcap_set_protocol_linux(pcap_t *p, int protocol)`: accepted and ignored (every protocol
/// is captured).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_set_protocol_linux(p: *mut Pcap, protocol: c_int) -> c_int {
    let _ = protocol;
    // SAFETY: forwarded.
    unsafe { set_option(p, |_| 0) }
}

/// `int pcap_setdirection(pcap_t *p, pcap_direction_t d)`: which direction of packets to
/// capture (`PCAP_D_INOUT`, `PCAP_D_IN`, `PCAP_D_OUT`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_setdirection(p: *mut Pcap, d: c_int) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: a handle or null.
        let Some(this) = (unsafe { handle(p) }) else {
            return PCAP_ERROR;
        };
        let dir = match d {
            PCAP_D_INOUT => Direction::InOut,
            PCAP_D_IN => Direction::In,
            PCAP_D_OUT => Direction::Out,
            _ => {
                this.set_err("Invalid direction");
                return PCAP_ERROR;
            }
        };
        match this.kind {
            Kind::Offline(_) | Kind::Dead => {
                this.set_err("Setting direction is not supported on savefiles");
                PCAP_ERROR
            }
            _ => this.set_direction(dir),
        }
    })
}

/// `int pcap_setnonblock(pcap_t *p, int nonblock, char *errbuf)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_setnonblock(
    p: *mut Pcap,
    nonblock: c_int,
    errbuf: *mut c_char,
) -> c_int {
    let _ = errbuf;
    // SAFETY: a handle or null.
    guard!(
        PCAP_ERROR,
        match unsafe { handle(p) } {
            Some(h) => {
                h.nonblock = nonblock != 0;
                0
            }
            None => PCAP_ERROR,
        }
    )
}

/// `int pcap_getnonblock(pcap_t *p, char *errbuf)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_getnonblock(p: *mut Pcap, errbuf: *mut c_char) -> c_int {
    let _ = errbuf;
    // SAFETY: a handle or null.
    guard!(
        PCAP_ERROR,
        unsafe { handle(p) }.map_or(PCAP_ERROR, |h| c_int::from(h.nonblock))
    )
}

// ---------------------------------------------------------------------------------------------
// Reading packets
// ---------------------------------------------------------------------------------------------

/// `int pcap_loop(pcap_t *p, int cnt, pcap_handler callback, u_char *user)`: delivers packets
/// until `cnt` were delivered (`cnt <= 0`: without limit), the end of a savefile (0), an error
/// (-1) or `pcap_breakloop` (-2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_loop(
    p: *mut Pcap,
    cnt: c_int,
    callback: PcapHandler,
    user: *mut u8,
) -> c_int {
    guard!(PCAP_ERROR, {
        if p.is_null() {
            return PCAP_ERROR;
        }
        let mut deliver = handle::c_deliver(callback, user);
        let mut cnt = cnt;
        // SAFETY: `p` is a handle; the kind is only inspected.
        let offline = matches!(unsafe { &(*p).kind }, Kind::Offline(_));
        loop {
            let n = if offline {
                // SAFETY: an offline handle.
                unsafe { handle::offline_read(p, cnt, &mut deliver) }
            } else {
                loop {
                    // SAFETY: a handle.
                    let n = unsafe { handle::dispatch(p, cnt, &mut deliver) };
                    if n != 0 {
                        break n;
                    }
                }
            };
            if n <= 0 {
                return n;
            }
            if cnt > 0 {
                cnt -= n;
                if cnt <= 0 {
                    return 0;
                }
            }
        }
    })
}

/// `int pcap_dispatch(pcap_t *p, int cnt, pcap_handler callback, u_char *user)`: one batch:
/// up to `cnt` packets of a savefile (all if `cnt <= 0`), or the packets one read of a live
/// capture returns (0 after a timeout).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_dispatch(
    p: *mut Pcap,
    cnt: c_int,
    callback: PcapHandler,
    user: *mut u8,
) -> c_int {
    guard!(PCAP_ERROR, {
        if p.is_null() {
            return PCAP_ERROR;
        }
        let mut deliver = handle::c_deliver(callback, user);
        // SAFETY: a handle.
        unsafe { handle::dispatch(p, cnt, &mut deliver) }
    })
}

/// `int pcap_next_ex(pcap_t *p, struct pcap_pkthdr **pkt_header, const u_char **pkt_data)`:
/// 1 with a packet, 0 after a live timeout, -1 on error, -2 at the end of a savefile. The packet
/// stays valid until the next read from the handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_next_ex(
    p: *mut Pcap,
    pkt_header: *mut *mut PcapPkthdr,
    pkt_data: *mut *const u8,
) -> c_int {
    guard!(PCAP_ERROR, {
        if p.is_null() || pkt_header.is_null() || pkt_data.is_null() {
            return PCAP_ERROR;
        }
        let mut deliver = handle::next_deliver;
        // SAFETY: a handle; the kind is only inspected.
        let offline = matches!(unsafe { &(*p).kind }, Kind::Offline(_));
        // SAFETY: a handle.
        let n = unsafe { handle::dispatch(p, 1, &mut deliver) };
        if n > 0 {
            // SAFETY: the out-pointers are non-null; the slot lives in the handle.
            unsafe {
                *pkt_header = &raw mut (*p).next_hdr;
                *pkt_data = handle::data_ptr(&(*p).next_buf);
            }
            return 1;
        }
        if offline && n == 0 {
            PCAP_ERROR_BREAK
        } else {
            n
        }
    })
}

/// `const u_char *pcap_next(pcap_t *p, struct pcap_pkthdr *h)`: the next packet, or null.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_next(p: *mut Pcap, h: *mut PcapPkthdr) -> *const u8 {
    guard!(ptr::null(), {
        if p.is_null() || h.is_null() {
            return ptr::null();
        }
        let mut deliver = handle::next_deliver;
        // SAFETY: a handle.
        let n = unsafe { handle::dispatch(p, 1, &mut deliver) };
        if n <= 0 {
            return ptr::null();
        }
        // SAFETY: `h` is non-null; the slot lives in the handle.
        unsafe {
            *h = (*p).next_hdr;
            handle::data_ptr(&(*p).next_buf)
        }
    })
}

/// `void pcap_breakloop(pcap_t *p)`: makes the current (or next) loop return -2. Safe to call
/// from a signal handler or the callback.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_breakloop(p: *mut Pcap) {
    if !p.is_null() {
        // SAFETY: a handle; only the atomic flag is touched (no reference to the whole handle).
        unsafe { (*p).break_loop.store(true, Ordering::Relaxed) };
    }
}

// ---------------------------------------------------------------------------------------------
// Filters
// ---------------------------------------------------------------------------------------------

/// `int pcap_compile(pcap_t *p, struct bpf_program *fp, const char *str, int optimize,
/// bpf_u_int32 netmask)`: compiles a filter expression with netsift's compiler for the handle's
/// link type and snapshot length (savefile semantics for savefile handles).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_compile(
    p: *mut Pcap,
    fp: *mut BpfProgram,
    expr: *const c_char,
    optimize: c_int,
    netmask: u32,
) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: a handle or null.
        let Some(this) = (unsafe { handle(p) }) else {
            return PCAP_ERROR;
        };
        if fp.is_null() {
            this.set_err("A null pointer was supplied as the program");
            return PCAP_ERROR;
        }
        if matches!(this.kind, Kind::Created) {
            this.set_err("not-yet-activated pcap_t passed to pcap_compile");
            return PCAP_ERROR;
        }
        // SAFETY: a C string or null (null compiles as the empty expression, as in libpcap).
        let text = unsafe { cbytes(expr) }
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        match compile_for(this, &text, optimize != 0, netmask) {
            Ok(program) => {
                let insns = program.insns();
                let n = insns.len();
                // SAFETY: malloc of n instructions (released by pcap_freecode with free).
                let mem =
                    unsafe { libc::malloc(n.max(1) * size_of::<BpfInsn>()) }.cast::<BpfInsn>();
                if mem.is_null() {
                    this.set_err("malloc: Cannot allocate memory");
                    return PCAP_ERROR;
                }
                for (i, insn) in insns.iter().enumerate() {
                    // SAFETY: i < n, inside the allocation.
                    unsafe {
                        mem.add(i).write(BpfInsn {
                            code: insn.code,
                            jt: insn.jt,
                            jf: insn.jf,
                            k: insn.k,
                        })
                    };
                }
                // SAFETY: `fp` is non-null.
                unsafe {
                    (*fp).bf_len = c_uint::try_from(n).unwrap_or(0);
                    (*fp).bf_insns = mem;
                }
                // For pcap_setfilter on a capture through netsiftd (forgotten by
                // pcap_freecode).
                daemon::remember(
                    mem as usize,
                    &text,
                    optimize != 0,
                    netmask,
                    (this.linktype, this.snapshot),
                    insns,
                );
                0
            }
            Err(msg) => {
                this.set_err(&msg);
                PCAP_ERROR
            }
        }
    })
}

/// What a filter on the handle `p` is compiled for: its link type and snapshot length, a
/// capture file's savefile meanings (and byte order) or a live capture's.
fn target_of(p: &Pcap) -> Target {
    let link_type = LinkType(names::dlt_to_linktype(p.linktype));
    let snaplen = p.snapshot.unsigned_abs();
    if matches!(p.kind, Kind::Offline(_)) {
        Target::savefile(link_type, snaplen, p.swapped)
    } else {
        Target::live(link_type, snaplen)
    }
}

/// Compiles `text` for the handle `p` at `pcap_compile`'s `optimize` level with its
/// `netmask`, or gives the error message.
fn compile_for(p: &Pcap, text: &str, optimize: bool, netmask: u32) -> Result<Program, String> {
    let target = target_of(p)
        .with_optimize(optimize)
        .with_netmask((netmask != PCAP_NETMASK_UNKNOWN).then_some(netmask));
    netsift_filter::compile_program(text, &target).map_err(|e| match e.kind() {
        // libpcap's words first, netsift's precise message after them.
        ErrorKind::Syntax | ErrorKind::Lexical => {
            format!("can't parse filter expression: {}", e.message())
        }
        _ => e.message().to_string(),
    })
}

/// `int pcap_compile_nopcap(int snaplen, int linktype, struct bpf_program *fp, const char
/// *str, int optimize, bpf_u_int32 netmask)`: `pcap_compile` on a dead handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_compile_nopcap(
    snaplen: c_int,
    linktype: c_int,
    fp: *mut BpfProgram,
    expr: *const c_char,
    optimize: c_int,
    netmask: u32,
) -> c_int {
    let p = pcap_open_dead(linktype, snaplen);
    // SAFETY: forwarded; `p` is a fresh handle (or null, which pcap_compile rejects).
    unsafe {
        let r = pcap_compile(p, fp, expr, optimize, netmask);
        pcap_close(p);
        r
    }
}

/// `void pcap_freecode(struct bpf_program *fp)`: frees the instructions of a compiled filter.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_freecode(fp: *mut BpfProgram) {
    if fp.is_null() {
        return;
    }
    // SAFETY: `fp` is non-null; a program.
    daemon::forget(unsafe { (*fp).bf_insns } as usize);
    // SAFETY: instructions allocated with malloc by pcap_compile (or null).
    unsafe {
        libc::free((*fp).bf_insns.cast::<c_void>());
        (*fp).bf_insns = ptr::null_mut();
        (*fp).bf_len = 0;
    }
}

/// The instructions of a C program as a netsift program.
///
/// # Safety
/// `fp` must be null or a valid program.
unsafe fn program_of(fp: *const BpfProgram) -> Option<Program> {
    // SAFETY: the caller's contract.
    let fp = unsafe { fp.as_ref() }?;
    if fp.bf_insns.is_null() {
        return None;
    }
    // SAFETY: `bf_len` instructions at `bf_insns`.
    let insns = unsafe { std::slice::from_raw_parts(fp.bf_insns, fp.bf_len as usize) };
    Some(Program::new(
        insns
            .iter()
            .map(|i| Insn {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect(),
    ))
}

/// `int pcap_setfilter(pcap_t *p, struct bpf_program *fp)`: validates the program and runs it
/// on every packet from now on (in user space, with the engine `netsift_filter` chooses) — or, on
/// a capture through
/// `netsiftd`, has the daemon run the expression `pcap_compile` compiled it from.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_setfilter(p: *mut Pcap, fp: *mut BpfProgram) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: a handle or null.
        let Some(this) = (unsafe { handle(p) }) else {
            return PCAP_ERROR;
        };
        // SAFETY: a program or null.
        let Some(program) = (unsafe { program_of(fp) }) else {
            this.set_err("No filter specified");
            return PCAP_ERROR;
        };
        let compiled = matches!(this.kind, Kind::Daemon(_))
            .then(|| {
                // SAFETY: `fp` is non-null (program_of returned a program).
                let at = unsafe { (*fp).bf_insns } as usize;
                daemon::lookup(at, program.insns())
            })
            .flatten();
        // The engine is netsift-filter's choice (the JIT where it runs).
        match Filter::build(Input::Program(&program), &target_of(this), Choice::AUTO) {
            Ok(f) if matches!(this.kind, Kind::Daemon(_)) => this.daemon_setfilter(compiled, f),
            Ok(f) => {
                this.filter = Some(f);
                0
            }
            Err(e) => {
                this.set_err(&format!("BPF program is not valid: {}", e.message()));
                PCAP_ERROR
            }
        }
    })
}

/// `int pcap_offline_filter(const struct bpf_program *fp, const struct pcap_pkthdr *h, const
/// u_char *pkt)`: runs a program on one packet; the filter's return value (0: rejected).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_offline_filter(
    fp: *const BpfProgram,
    h: *const PcapPkthdr,
    pkt: *const u8,
) -> c_int {
    guard!(0, {
        if h.is_null() || pkt.is_null() {
            return 0;
        }
        // SAFETY: a program or null.
        let Some(fp) = (unsafe { fp.as_ref() }).filter(|f| !f.bf_insns.is_null()) else {
            return 0;
        };
        // SAFETY: `h` is valid and `pkt` holds `caplen` bytes.
        let (data, len) = unsafe {
            let h = &*h;
            (std::slice::from_raw_parts(pkt, h.caplen as usize), h.len)
        };
        // SAFETY: `bf_len` instructions at `bf_insns`; one packet at a time, the interpreter.
        unsafe { bpf::run(fp.bf_insns, Some(fp.bf_len as usize), data, len) as c_int }
    })
}

/// `void bpf_dump(const struct bpf_program *p, int option)`: prints a program on standard
/// output as `tcpdump -d` (option 1), `-dd` (2) or `-ddd` (3 and above) does.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bpf_dump(fp: *const BpfProgram, option: c_int) {
    guard!((), {
        // SAFETY: a program or null.
        let Some(program) = (unsafe { program_of(fp) }) else {
            return;
        };
        let format = match option {
            o if o > 2 => asm::Format::Decimal,
            2 => asm::Format::C,
            _ => asm::Format::Asm,
        };
        c_print_stdout(&asm::dump(&program, format));
    })
}

unsafe extern "C" {
    static stdout: *mut libc::FILE;
    static stderr: *mut libc::FILE;
}

/// Writes through C's `stdout`, so that the text is ordered with the program's own output.
fn c_print_stdout(text: &str) {
    // SAFETY: `stdout` is the C library's stream; fwrite of a valid buffer.
    unsafe { libc::fwrite(text.as_ptr().cast(), 1, text.len(), stdout) };
}

// ---------------------------------------------------------------------------------------------
// Information about a handle
// ---------------------------------------------------------------------------------------------

/// `int pcap_datalink(pcap_t *p)`: the DLT value of the packets.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_datalink(p: *mut Pcap) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: a handle or null.
        match unsafe { handle(p) } {
            None => PCAP_ERROR,
            Some(h) if matches!(h.kind, Kind::Created) => PCAP_ERROR_NOT_ACTIVATED,
            Some(h) => h.linktype,
        }
    })
}

/// `int pcap_datalink_ext(pcap_t *p)`: as `pcap_datalink` (no extension bits).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_datalink_ext(p: *mut Pcap) -> c_int {
    // SAFETY: forwarded.
    unsafe { pcap_datalink(p) }
}

/// `int pcap_list_datalinks(pcap_t *p, int **dlt_buf)`: the one link type of the handle, in an
/// array freed by `pcap_free_datalinks`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_list_datalinks(p: *mut Pcap, dlt_buf: *mut *mut c_int) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: a handle or null.
        let Some(h) = (unsafe { handle(p) }) else {
            return PCAP_ERROR;
        };
        if dlt_buf.is_null() {
            return PCAP_ERROR;
        }
        if matches!(h.kind, Kind::Created) {
            return PCAP_ERROR_NOT_ACTIVATED;
        }
        // A cooked capture (the `any` device) offers both cooked headers, as in libpcap.
        let list: Vec<c_int> = match &h.kind {
            Kind::Live(l) if l.src.cooked().is_some() => vec![113, 276],
            _ => vec![h.linktype],
        };
        // SAFETY: malloc of the list, freed with free by pcap_free_datalinks.
        let mem = unsafe { libc::malloc(list.len() * size_of::<c_int>()) }.cast::<c_int>();
        if mem.is_null() {
            h.set_err("malloc: Cannot allocate memory");
            return PCAP_ERROR;
        }
        // SAFETY: `list.len()` ints allocated; `dlt_buf` non-null.
        unsafe {
            std::ptr::copy_nonoverlapping(list.as_ptr(), mem, list.len());
            *dlt_buf = mem;
        }
        list.len() as c_int
    })
}

/// `void pcap_free_datalinks(int *dlt_list)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_free_datalinks(dlt_list: *mut c_int) {
    // SAFETY: allocated with malloc by pcap_list_datalinks (or null).
    unsafe { libc::free(dlt_list.cast()) };
}

/// `int pcap_set_datalink(pcap_t *p, int dlt)`: succeeds only for the handle's own link type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_set_datalink(p: *mut Pcap, dlt: c_int) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: a handle or null.
        let Some(h) = (unsafe { handle(p) }) else {
            return PCAP_ERROR;
        };
        if dlt == h.linktype {
            return 0;
        }
        if let Kind::Live(l) = &mut h.kind
            && l.src.cooked().is_some()
            && matches!(dlt, 113 | 276)
        {
            let c = if dlt == 113 {
                netsift_capture::live::Cooked::Sll
            } else {
                netsift_capture::live::Cooked::Sll2
            };
            if l.src.set_cooked(c).is_ok() {
                h.linktype = dlt;
                return 0;
            }
        }
        let name = names::dlt(dlt)
            .map(|(n, _)| n.trim_end_matches('\0').to_string())
            .unwrap_or_else(|| format!("DLT {dlt}"));
        h.set_err(&format!(
            "{name} is not one of the DLTs supported by this device"
        ));
        PCAP_ERROR
    })
}

/// `int pcap_list_tstamp_types(pcap_t *p, int **tstamp_typesp)`: host time stamps only (an
/// array freed by `pcap_free_tstamp_types`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_list_tstamp_types(
    p: *mut Pcap,
    tstamp_typesp: *mut *mut c_int,
) -> c_int {
    guard!(PCAP_ERROR, {
        if p.is_null() || tstamp_typesp.is_null() {
            return PCAP_ERROR;
        }
        // SAFETY: malloc of one int, freed with free by pcap_free_tstamp_types.
        let mem = unsafe { libc::malloc(size_of::<c_int>()) }.cast::<c_int>();
        if mem.is_null() {
            return PCAP_ERROR;
        }
        // SAFETY: one int allocated; the out-pointer is non-null.
        unsafe {
            mem.write(0);
            *tstamp_typesp = mem;
        }
        1
    })
}

/// `void pcap_free_tstamp_types(int *tstamp_type_list)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_free_tstamp_types(list: *mut c_int) {
    // SAFETY: allocated with malloc by pcap_list_tstamp_types (or null).
    unsafe { libc::free(list.cast()) };
}

/// `int pcap_snapshot(pcap_t *p)`: the snapshot length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_snapshot(p: *mut Pcap) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: a handle or null.
        match unsafe { handle(p) } {
            None => PCAP_ERROR,
            Some(h) if matches!(h.kind, Kind::Created) => PCAP_ERROR_NOT_ACTIVATED,
            Some(h) => h.snapshot,
        }
    })
}

/// `int pcap_is_swapped(pcap_t *p)`: whether the savefile's byte order differs from this
/// machine's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_is_swapped(p: *mut Pcap) -> c_int {
    // SAFETY: a handle or null.
    guard!(
        PCAP_ERROR,
        unsafe { handle(p) }.map_or(PCAP_ERROR, |h| c_int::from(h.swapped))
    )
}

/// `int pcap_major_version(pcap_t *p)`: the savefile's major version (pcapng: 1).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_major_version(p: *mut Pcap) -> c_int {
    // SAFETY: a handle or null.
    guard!(
        PCAP_ERROR,
        unsafe { handle(p) }.map_or(PCAP_ERROR, |h| h.version.0)
    )
}

/// `int pcap_minor_version(pcap_t *p)`: the savefile's minor version.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_minor_version(p: *mut Pcap) -> c_int {
    // SAFETY: a handle or null.
    guard!(
        PCAP_ERROR,
        unsafe { handle(p) }.map_or(PCAP_ERROR, |h| h.version.1)
    )
}

/// `FILE *pcap_file(pcap_t *p)`: the stream a savefile is read from; null for other handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_file(p: *mut Pcap) -> *mut libc::FILE {
    guard!(ptr::null_mut(), {
        // SAFETY: a handle or null.
        match unsafe { handle(p) }.map(|h| &h.kind) {
            Some(Kind::Offline(o)) => o.file,
            _ => ptr::null_mut(),
        }
    })
}

/// `int pcap_bufsize(pcap_t *p)`: the size of the buffer libpcap would read packets into (see
/// `docs/libpcap.md`); `PCAP_ERROR_NOT_ACTIVATED` before `pcap_activate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_bufsize(p: *mut Pcap) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: a handle or null.
        match unsafe { handle(p) } {
            Some(h) if matches!(h.kind, Kind::Created) => PCAP_ERROR_NOT_ACTIVATED,
            Some(h) => h.bufsize,
            None => PCAP_ERROR,
        }
    })
}

/// The timeout `pcap_get_required_select_timeout` gives a capture through `netsiftd`.
static DAEMON_SELECT_TIMEOUT: Timeval = Timeval {
    tv_sec: 0,
    tv_usec: 1000,
};

/// `const struct timeval *pcap_get_required_select_timeout(pcap_t *p)`: null where the
/// descriptor of `pcap_get_selectable_fd` tells when packets arrive (savefiles, live captures,
/// as in libpcap); 1 ms for a capture through `netsiftd`, whose packets arrive in shared memory
/// with no descriptor to wait on: a program that selects must poll that often.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_get_required_select_timeout(p: *mut Pcap) -> *const Timeval {
    guard!(ptr::null(), {
        // SAFETY: a handle or null.
        match unsafe { handle(p) }.map(|h| &h.kind) {
            Some(Kind::Daemon(_)) => &DAEMON_SELECT_TIMEOUT,
            _ => ptr::null(),
        }
    })
}

/// The handle's `(pcap_fileno, pcap_get_selectable_fd)`. As in libpcap 1.10.3, a savefile has
/// no `fd` (-1) but its stream's descriptor is selectable; a capture through `netsiftd` has
/// neither (its packets arrive in shared memory, with no descriptor to wait on).
///
/// # Safety
/// `p` must be a handle or null.
unsafe fn descriptors(p: *mut Pcap) -> (c_int, c_int) {
    use std::os::fd::{AsFd, AsRawFd};
    // SAFETY: the caller's contract.
    match unsafe { handle(p) }.map(|h| &h.kind) {
        Some(Kind::Offline(o)) => (-1, o.fd),
        Some(Kind::Live(l)) => {
            let fd = l.src.as_fd().as_raw_fd();
            (fd, fd)
        }
        _ => (-1, -1),
    }
}

/// `int pcap_fileno(pcap_t *p)`: the descriptor of the capture socket; -1 for a savefile (as
/// in libpcap: see `pcap_get_selectable_fd`) and for a capture through `netsiftd`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_fileno(p: *mut Pcap) -> c_int {
    // SAFETY: a handle or null.
    guard!(PCAP_ERROR, unsafe { descriptors(p) }.0)
}

/// `int pcap_get_selectable_fd(pcap_t *p)`: the descriptor to `select` on: the capture socket,
/// or the savefile stream's descriptor (-1 for a stream without one, such as `fmemopen`'s, and
/// for a capture through `netsiftd`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_get_selectable_fd(p: *mut Pcap) -> c_int {
    // SAFETY: a handle or null.
    guard!(PCAP_ERROR, unsafe { descriptors(p) }.1)
}

/// `int pcap_stats(pcap_t *p, struct pcap_stat *ps)`: packets received and dropped by a live
/// capture (not available for savefiles).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_stats(p: *mut Pcap, ps: *mut PcapStat) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: a handle or null.
        let Some(h) = (unsafe { handle(p) }) else {
            return PCAP_ERROR;
        };
        if ps.is_null() {
            h.set_err("A null pointer was supplied for the statistics");
            return PCAP_ERROR;
        }
        let result = match &mut h.kind {
            Kind::Live(live) => {
                use netsift_capture::live::Source;
                live.src
                    .stats()
                    .map(|s| (s.received, s.dropped))
                    .map_err(|e| e.to_string())
            }
            // Received: what the flow accepted (appended or dropped for want of room); dropped:
            // for want of room, or overwritten before it was read.
            Kind::Daemon(d) => d
                .flow
                .stats()
                .map(|s| {
                    (
                        s.appended.wrapping_add(s.dropped),
                        s.dropped.wrapping_add(s.overwritten),
                    )
                })
                .map_err(|e| daemon::message(&e)),
            Kind::Offline(_) => Err("Statistics aren't available from savefiles".to_string()),
            Kind::Dead => {
                Err("Statistics aren't available from a pcap_open_dead pcap_t".to_string())
            }
            Kind::Created => Err("This handle hasn't been activated yet".to_string()),
        };
        match result {
            Ok((received, dropped)) => {
                // SAFETY: `ps` is non-null. The counters wrap like libpcap's 32-bit ones.
                unsafe {
                    *ps = PcapStat {
                        ps_recv: received as c_uint,
                        ps_drop: dropped as c_uint,
                        ps_ifdrop: 0,
                    };
                }
                0
            }
            Err(msg) => {
                h.set_err(&msg);
                PCAP_ERROR
            }
        }
    })
}

/// `char *pcap_geterr(pcap_t *p)`: the handle's last error message.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_geterr(p: *mut Pcap) -> *mut c_char {
    if p.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: a handle; a raw pointer to its buffer (no reference to the whole handle).
    unsafe { (&raw mut (*p).errbuf).cast() }
}

/// `void pcap_perror(pcap_t *p, const char *prefix)`: prints `prefix: error` on standard error.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_perror(p: *mut Pcap, prefix: *const c_char) {
    guard!((), {
        // SAFETY: a handle or null; a C string or null.
        let (Some(h), pre) = (unsafe { handle(p) }, unsafe { cbytes(prefix) }) else {
            return;
        };
        let msg = format!(
            "{}: {}\n",
            String::from_utf8_lossy(pre.unwrap_or(b"")),
            err_string(&h.errbuf)
        );
        // SAFETY: C's stderr stream.
        unsafe { libc::fwrite(msg.as_ptr().cast(), 1, msg.len(), stderr) };
    })
}

// ---------------------------------------------------------------------------------------------
// Names and messages
// ---------------------------------------------------------------------------------------------

/// `const char *pcap_lib_version(void)`: says that this is netsift's library.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_lib_version() -> *const c_char {
    c_static(LIB_VERSION)
}

/// `int pcap_datalink_name_to_val(const char *name)`: -1 if unknown.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_datalink_name_to_val(name: *const c_char) -> c_int {
    // SAFETY: a C string or null.
    guard!(
        PCAP_ERROR,
        unsafe { cbytes(name) }
            .and_then(names::dlt_by_name)
            .unwrap_or(-1)
    )
}

/// `const char *pcap_datalink_val_to_name(int dlt)`: null if unknown.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_datalink_val_to_name(dlt: c_int) -> *const c_char {
    names::dlt(dlt).map_or(ptr::null(), |(n, _)| c_static(n))
}

/// `const char *pcap_datalink_val_to_description(int dlt)`: null if unknown.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_datalink_val_to_description(dlt: c_int) -> *const c_char {
    names::dlt(dlt).map_or(ptr::null(), |(_, d)| c_static(d))
}

/// `const char *pcap_datalink_val_to_description_or_dlt(int dlt)`: the description, or
/// `DLT n` for unknown values.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_datalink_val_to_description_or_dlt(dlt: c_int) -> *const c_char {
    if let Some((_, d)) = names::dlt(dlt) {
        return c_static(d);
    }
    thread_text(&format!("DLT {dlt}"))
}

/// `int pcap_tstamp_type_name_to_val(const char *name)`: `PCAP_ERROR` if unknown.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_tstamp_type_name_to_val(name: *const c_char) -> c_int {
    // SAFETY: a C string or null.
    guard!(
        PCAP_ERROR,
        unsafe { cbytes(name) }
            .and_then(names::tstamp_type_by_name)
            .unwrap_or(PCAP_ERROR)
    )
}

/// `const char *pcap_tstamp_type_val_to_name(int type)`: null if unknown.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_tstamp_type_val_to_name(tstamp_type: c_int) -> *const c_char {
    names::tstamp_type(tstamp_type).map_or(ptr::null(), |(n, _)| c_static(n))
}

/// `const char *pcap_tstamp_type_val_to_description(int type)`: null if unknown.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_tstamp_type_val_to_description(tstamp_type: c_int) -> *const c_char {
    names::tstamp_type(tstamp_type).map_or(ptr::null(), |(_, d)| c_static(d))
}

/// The text of a status code, as libpcap 1.10.3 words it.
fn status_text(status: c_int) -> String {
    let s = match status {
        PCAP_WARNING => "Generic warning",
        PCAP_WARNING_TSTAMP_TYPE_NOTSUP => {
            "That type of time stamp is not supported by that device"
        }
        PCAP_WARNING_PROMISC_NOTSUP => "That device doesn't support promiscuous mode",
        PCAP_ERROR => "Generic error",
        PCAP_ERROR_BREAK => "Loop terminated by pcap_breakloop",
        PCAP_ERROR_NOT_ACTIVATED => "The pcap_t has not been activated",
        PCAP_ERROR_ACTIVATED => "The setting can't be changed after the pcap_t is activated",
        PCAP_ERROR_NO_SUCH_DEVICE => "No such device exists",
        PCAP_ERROR_RFMON_NOTSUP => "That device doesn't support monitor mode",
        PCAP_ERROR_NOT_RFMON => "That operation is supported only in monitor mode",
        PCAP_ERROR_PERM_DENIED => {
            "You don't have permission to perform this capture on that device"
        }
        PCAP_ERROR_IFACE_NOT_UP => "That device is not up",
        PCAP_ERROR_CANTSET_TSTAMP_TYPE => "That device doesn't support setting the time stamp type",
        PCAP_ERROR_PROMISC_PERM_DENIED => {
            "You don't have permission to capture in promiscuous mode on that device"
        }
        PCAP_ERROR_TSTAMP_PRECISION_NOTSUP => {
            "That device doesn't support that time stamp precision"
        }
        other => return format!("Unknown error: {other}"),
    };
    s.to_string()
}

thread_local! {
    /// Per-thread storage for texts made on demand (libpcap uses a static buffer).
    static TEXT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `text` as a C string valid until the next such call on this thread.
fn thread_text(text: &str) -> *const c_char {
    TEXT.with(|t| {
        let mut t = t.borrow_mut();
        t.clear();
        t.extend(text.bytes().filter(|&b| b != 0));
        t.push(0);
        t.as_ptr().cast()
    })
}

/// `const char *pcap_statustostr(int error)`: the text of a `PCAP_ERROR_*` or `PCAP_WARNING_*`
/// code.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_statustostr(error: c_int) -> *const c_char {
    guard!(ptr::null(), thread_text(&status_text(error)))
}

/// `const char *pcap_strerror(int errnum)`: the system's text for an `errno` value.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_strerror(errnum: c_int) -> *const c_char {
    guard!(ptr::null(), {
        let e = std::io::Error::from_raw_os_error(errnum).to_string();
        let text = match e.find(" (os error") {
            Some(i) => &e[..i],
            None => &e,
        };
        thread_text(text)
    })
}

// ---------------------------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------------------------

/// `int pcap_findalldevs(pcap_if_t **alldevsp, char *errbuf)`: the interfaces in
/// `/sys/class/net` with their IPv4 and IPv6 addresses (the `any` pseudo-device is not listed:
/// it is not supported).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_findalldevs(
    alldevsp: *mut *mut PcapIf,
    errbuf: *mut c_char,
) -> c_int {
    guard!(PCAP_ERROR, {
        if alldevsp.is_null() {
            return PCAP_ERROR;
        }
        match devs::build_list() {
            Ok(list) => {
                // SAFETY: non-null out-pointer.
                unsafe { *alldevsp = list };
                0
            }
            Err(msg) => {
                // SAFETY: the caller's buffer.
                unsafe {
                    *alldevsp = ptr::null_mut();
                    put_err(errbuf, &msg);
                }
                PCAP_ERROR
            }
        }
    })
}

/// `void pcap_freealldevs(pcap_if_t *alldevs)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_freealldevs(alldevs: *mut PcapIf) {
    // SAFETY: a list from pcap_findalldevs (or null).
    guard!((), unsafe { devs::free_list(alldevs) })
}

/// `char *pcap_lookupdev(char *errbuf)`: the first device `pcap_findalldevs` would list
/// (deprecated in libpcap; kept for old tools).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_lookupdev(errbuf: *mut c_char) -> *mut c_char {
    guard!(ptr::null_mut(), {
        match devs::devices() {
            Ok(d) if !d.is_empty() => thread_text(&d[0].name).cast_mut(),
            Ok(_) => {
                // SAFETY: the caller's buffer.
                unsafe { put_err(errbuf, "no interfaces found") };
                ptr::null_mut()
            }
            Err(msg) => {
                // SAFETY: the caller's buffer.
                unsafe { put_err(errbuf, &msg) };
                ptr::null_mut()
            }
        }
    })
}

/// `int pcap_lookupnet(const char *device, bpf_u_int32 *netp, bpf_u_int32 *maskp, char
/// *errbuf)`: the IPv4 network number and netmask of a device, in network byte order.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_lookupnet(
    device: *const c_char,
    netp: *mut u32,
    maskp: *mut u32,
    errbuf: *mut c_char,
) -> c_int {
    guard!(PCAP_ERROR, {
        if netp.is_null() || maskp.is_null() {
            return PCAP_ERROR;
        }
        // SAFETY: a C string or null.
        let dev = unsafe { cbytes(device) }
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_else(|| "any".to_string());
        match devs::lookupnet(&dev) {
            Ok((net, mask)) => {
                // SAFETY: non-null out-pointers.
                unsafe {
                    *netp = net;
                    *maskp = mask;
                }
                0
            }
            Err(msg) => {
                // SAFETY: the caller's buffer.
                unsafe { put_err(errbuf, &msg) };
                PCAP_ERROR
            }
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Sending
// ---------------------------------------------------------------------------------------------

/// `int pcap_inject(pcap_t *p, const void *buf, size_t size)`: sends a whole frame on a live
/// handle's interface; the number of bytes sent, or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_inject(p: *mut Pcap, buf: *const c_void, size: usize) -> c_int {
    guard!(PCAP_ERROR, {
        // SAFETY: a handle or null.
        let Some(h) = (unsafe { handle(p) }) else {
            return PCAP_ERROR;
        };
        if buf.is_null() {
            h.set_err("A null pointer was supplied as the packet");
            return PCAP_ERROR;
        }
        // SAFETY: `size` bytes at `buf`.
        let frame = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), size) };
        match h.inject(frame) {
            Ok(()) => c_int::try_from(size).unwrap_or(c_int::MAX),
            Err(msg) => {
                h.set_err(&format!("send: {msg}"));
                PCAP_ERROR
            }
        }
    })
}

/// `int pcap_sendpacket(pcap_t *p, const u_char *buf, int size)`: as `pcap_inject`; 0 or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_sendpacket(p: *mut Pcap, buf: *const u8, size: c_int) -> c_int {
    let Ok(size) = usize::try_from(size) else {
        return PCAP_ERROR;
    };
    // SAFETY: forwarded.
    if unsafe { pcap_inject(p, buf.cast(), size) } < 0 {
        PCAP_ERROR
    } else {
        0
    }
}

// ---------------------------------------------------------------------------------------------
// Writing savefiles
// ---------------------------------------------------------------------------------------------

/// The link type a dumper of handle `h` writes (with the handle's extension bits), or libpcap's
/// error for a DLT that has no LINKTYPE value (`what` is the file name or "stream").
fn dump_linktype(h: &mut Pcap, what: &str) -> Option<u32> {
    match names::savefile_linktype(h.linktype) {
        Some(lt) => Some(lt | h.linktype_ext),
        None => {
            h.set_err(&format!(
                "{what}: link-layer type {} isn't supported in savefiles",
                h.linktype
            ));
            None
        }
    }
}

/// Makes a dumper for handle `h` writing link type `lt` to `out`.
fn new_dumper(h: &mut Pcap, out: dump::Out, lt: u32, what: &str, base: u64) -> *mut Dumper {
    match Dumper::new(out, lt, h.snapshot.unsigned_abs(), h.precision, base, true) {
        Ok(d) => Box::into_raw(Box::new(d)),
        Err(msg) => {
            h.set_err(&format!("{what}: {msg}"));
            ptr::null_mut()
        }
    }
}

/// `pcap_dumper_t *pcap_dump_open(pcap_t *p, const char *fname)`: a pcap file for the handle's
/// link type, snapshot length and time stamp precision (`-`: standard output).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_dump_open(p: *mut Pcap, fname: *const c_char) -> *mut Dumper {
    guard!(ptr::null_mut(), {
        // SAFETY: a handle or null.
        let Some(h) = (unsafe { handle(p) }) else {
            return ptr::null_mut();
        };
        // SAFETY: a C string or null.
        let name = unsafe { cbytes(fname) };
        // libpcap's order: activation, link type, then the name (a null one is printed
        // "(null)" in the errors before that).
        let shown = String::from_utf8_lossy(name.unwrap_or(b"(null)")).into_owned();
        if matches!(h.kind, Kind::Created) {
            // Before the file is made, as in libpcap.
            h.set_err(&format!(
                "{shown}: not-yet-activated pcap_t passed to pcap_dump_open"
            ));
            return ptr::null_mut();
        }
        let Some(lt) = dump_linktype(h, &shown) else {
            return ptr::null_mut();
        };
        let Some(name) = name else {
            h.set_err("A null pointer was supplied as the file name");
            return ptr::null_mut();
        };
        if name == b"-" {
            // SAFETY: C's standard output (libpcap writes "-" there too).
            return new_dumper(h, dump::Out(unsafe { stdout }), lt, "standard output", 0);
        }
        let Ok(cname) = std::ffi::CString::new(name) else {
            h.set_err(&format!("{shown}: invalid file name"));
            return ptr::null_mut();
        };
        // SAFETY: fopen of a NUL-terminated name.
        let stream = unsafe { libc::fopen(cname.as_ptr(), c"wb".as_ptr()) };
        if stream.is_null() {
            let e = std::io::Error::last_os_error().to_string();
            let e = e.split(" (os error").next().unwrap_or("");
            h.set_err(&format!("{shown}: {e}"));
            return ptr::null_mut();
        }
        let out = dump::Out(stream);
        new_dumper(h, out, lt, &shown, 0)
    })
}

/// `pcap_dumper_t *pcap_dump_open_append(pcap_t *p, const char *fname)`: appends to a pcap
/// file of the handle's link type, snapshot length, time stamp precision and this machine's
/// byte order (an empty or missing file gets a header), with libpcap's checks and messages.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_dump_open_append(p: *mut Pcap, fname: *const c_char) -> *mut Dumper {
    guard!(ptr::null_mut(), {
        // SAFETY: a handle or null.
        let Some(h) = (unsafe { handle(p) }) else {
            return ptr::null_mut();
        };
        // SAFETY: a C string or null.
        let name = unsafe { cbytes(fname) };
        let shown = String::from_utf8_lossy(name.unwrap_or(b"(null)")).into_owned();
        // libpcap prints the value dlt_to_linktype returned: always -1 here.
        let Some(lt) = names::savefile_linktype(h.linktype) else {
            h.set_err(&format!(
                "{shown}: link-layer type -1 isn't supported in savefiles"
            ));
            return ptr::null_mut();
        };
        let Some(name) = name else {
            h.set_err("A null pointer was supplied as the file name");
            return ptr::null_mut();
        };
        if name == b"-" {
            // SAFETY: C's standard output. No activation check here, as in libpcap.
            return new_dumper(h, dump::Out(unsafe { stdout }), lt, "standard output", 0);
        }
        match dump::open_append(name, lt, h.snapshot, h.precision) {
            Ok((out, base, header)) => {
                // libpcap checks and writes the link type without its extension bits here.
                let snap = h.snapshot.unsigned_abs();
                match Dumper::new(out, lt, snap, h.precision, base, header) {
                    Ok(d) => Box::into_raw(Box::new(d)),
                    Err(msg) => {
                        h.set_err(&format!("Can't write to {shown}: {msg}"));
                        ptr::null_mut()
                    }
                }
            }
            Err(msg) => {
                h.set_err(&format!("{shown}: {msg}"));
                ptr::null_mut()
            }
        }
    })
}

/// `pcap_dumper_t *pcap_dump_fopen(pcap_t *p, FILE *fp)`: as `pcap_dump_open` on an open
/// stream, which `pcap_dump_close` closes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_dump_fopen(p: *mut Pcap, fp: *mut libc::FILE) -> *mut Dumper {
    guard!(ptr::null_mut(), {
        // SAFETY: a handle or null.
        let Some(h) = (unsafe { handle(p) }) else {
            return ptr::null_mut();
        };
        if fp.is_null() {
            h.set_err("A null pointer was supplied as the stream");
            return ptr::null_mut();
        }
        if matches!(h.kind, Kind::Created) {
            h.set_err("stream: not-yet-activated pcap_t passed to pcap_dump_open");
            return ptr::null_mut();
        }
        let Some(lt) = dump_linktype(h, "stream") else {
            return ptr::null_mut();
        };
        // SAFETY: an open stream.
        let base = u64::try_from(unsafe { libc::ftello(fp) }).unwrap_or(0);
        new_dumper(h, dump::Out(fp), lt, "stream", base)
    })
}

/// `void pcap_dump(u_char *user, const struct pcap_pkthdr *h, const u_char *sp)`: writes one
/// packet; `user` is the `pcap_dumper_t *` (so that `pcap_dump` can be a `pcap_loop` callback).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_dump(user: *mut u8, h: *const PcapPkthdr, sp: *const u8) {
    guard!((), {
        if user.is_null() || h.is_null() || sp.is_null() {
            return;
        }
        // SAFETY: `user` is a dumper; `h` valid; `sp` holds `caplen` bytes.
        unsafe {
            let d = &mut *user.cast::<Dumper>();
            let h = &*h;
            d.dump(h, std::slice::from_raw_parts(sp, h.caplen as usize));
        }
    })
}

/// `int pcap_dump_flush(pcap_dumper_t *p)`: 0, or -1 if writing failed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_dump_flush(d: *mut Dumper) -> c_int {
    // SAFETY: a dumper or null.
    guard!(
        PCAP_ERROR,
        match unsafe { d.as_mut() }.map(|d| d.flush()) {
            Some(Ok(())) => 0,
            _ => PCAP_ERROR,
        }
    )
}

/// `int64_t pcap_dump_ftell64(pcap_dumper_t *p)`: the current size of the output.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_dump_ftell64(d: *mut Dumper) -> i64 {
    // SAFETY: a dumper or null.
    guard!(
        -1,
        unsafe { d.as_ref() }.map_or(-1, |d| i64::try_from(d.position()).unwrap_or(i64::MAX))
    )
}

/// `long pcap_dump_ftell(pcap_dumper_t *p)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_dump_ftell(d: *mut Dumper) -> c_long {
    // SAFETY: forwarded.
    unsafe { pcap_dump_ftell64(d) as c_long }
}

/// `FILE *pcap_dump_file(pcap_dumper_t *p)`: the dumper's stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_dump_file(d: *mut Dumper) -> *mut libc::FILE {
    // SAFETY: a dumper or null.
    unsafe { d.as_ref() }.map_or(ptr::null_mut(), |d| d.writer.get_ref().out.0)
}

/// `void pcap_dump_close(pcap_dumper_t *p)`: flushes, closes and frees the dumper.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_dump_close(d: *mut Dumper) {
    guard!((), {
        if !d.is_null() {
            // SAFETY: allocated by new_dumper; closed once.
            unsafe { Box::from_raw(d) }.close();
        }
    })
}
