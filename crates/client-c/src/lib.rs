//! The C API of the `netsiftd` client: `libnetsift_client.so.0`.
//!
//! A thin layer over [`netsift_daemon_client::client`]: a `netsift_client` is a boxed [`Client`], a
//! `netsift_flow` a boxed [`Flow`]; the declarations and the contract of every function are
//! in `include/netsift_client.h`, which is the reference for C programmers.
//!
//! ```text
//! cargo build --release -p netsift-client-c     # target/release/libnetsift_client.so
//! cc app.c -I crates/client-c/include -L target/release -lnetsift_client
//! ```
//!
//! Every exported function catches panics (none may cross the C boundary), checks its pointer
//! arguments for null, and reports failures as a NUL-terminated message in the caller's
//! `NETSIFT_ERRBUF_SIZE` buffer when it gets one.
//!
//! `netsift_next` lends the packet without copying it under slow-reader preference: the
//! [`Delivered`](netsift_daemon_client::Delivered) that [`Reader::next`] returns borrows the
//! reader, but the bytes it points to are a PBuf slot that the daemon does not reuse until the
//! reader releases the entry ([`Reader::release`]), so the raw pointer outlives the borrow
//! until `netsift_release` or `netsift_close`. Under fast-reader preference the bytes are the
//! reader's scratch copy, overwritten by the next `netsift_next`.
//!
//! The Rust items of this crate are the C functions themselves; the `rlib` exists for tests.
#![deny(missing_docs)]
// The exported functions take raw pointers; their contracts are in the C header.
#![allow(clippy::missing_safety_doc)]
// The types keep their C names, so that the Rust and C sides read the same.
#![allow(non_camel_case_types)]

use std::ffi::{CStr, OsStr, c_char, c_int, c_uint};
use std::os::unix::ffi::OsStrExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;
use std::time::Duration;

use netsift_daemon_client::{Client, Flow, OpenOptions, Preference, Reader};

/// The size of a caller's error buffer (`NETSIFT_ERRBUF_SIZE`).
pub const NETSIFT_ERRBUF_SIZE: usize = 1024;

/// The string `netsift_version` returns.
const VERSION: &str = concat!("netsift_client ", env!("CARGO_PKG_VERSION"), "\0");

/// A connection to `netsiftd` (opaque in C).
#[derive(Debug)]
pub struct netsift_client {
    client: Client,
}

/// An open flow (opaque in C).
#[derive(Debug)]
pub struct netsift_flow {
    flow: Flow,
}

/// `netsift_options`: how a flow asks to be buffered.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct netsift_options {
    /// 0: slow-reader preference; nonzero: fast-reader preference.
    pub fast_reader: c_int,
    /// PBuf slots.
    pub slots: u32,
    /// Bytes per PBuf slot.
    pub slot_size: u32,
    /// IBuf entries of the flow.
    pub ibuf: u32,
    /// The longest packet stored; 0: one slot (longer packets span consecutive slots).
    pub max_packet: u32,
    /// The callback period the application will use; 0: none.
    pub callback_every: u64,
}

impl From<OpenOptions> for netsift_options {
    fn from(o: OpenOptions) -> netsift_options {
        netsift_options {
            fast_reader: c_int::from(o.preference == Preference::FastReader),
            slots: o.slots,
            slot_size: o.slot_size,
            ibuf: o.ibuf,
            max_packet: o.max_packet,
            callback_every: o.callback_every.unwrap_or(0),
        }
    }
}

impl From<netsift_options> for OpenOptions {
    fn from(o: netsift_options) -> OpenOptions {
        OpenOptions {
            preference: if o.fast_reader != 0 {
                Preference::FastReader
            } else {
                Preference::SlowReader
            },
            slots: o.slots,
            slot_size: o.slot_size,
            ibuf: o.ibuf,
            max_packet: o.max_packet,
            callback_every: (o.callback_every != 0).then_some(o.callback_every),
            share: false,
        }
    }
}

/// `netsift_packet`: a packet as `netsift_next` lends it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct netsift_packet {
    /// The stored bytes (`caplen` of them).
    pub data: *const u8,
    /// Stored length.
    pub caplen: u32,
    /// Length on the wire.
    pub wirelen: u32,
    /// Capture time, seconds since the Unix epoch.
    pub ts_sec: i64,
    /// Capture time, nanoseconds within the second.
    pub ts_nsec: u32,
    /// The link type of `data`.
    pub linktype: u32,
    /// The filter's result.
    pub result: u32,
    /// Packets overwritten just before this one (fast-reader preference).
    pub lost_before: u64,
}

impl Default for netsift_packet {
    fn default() -> netsift_packet {
        netsift_packet {
            data: ptr::null(),
            caplen: 0,
            wirelen: 0,
            ts_sec: 0,
            ts_nsec: 0,
            linktype: 0,
            result: 0,
            lost_before: 0,
        }
    }
}

/// `netsift_stats`: a flow's counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct netsift_stats {
    /// Entries appended to the flow's IBuf.
    pub appended: u64,
    /// Packets the application read.
    pub delivered: u64,
    /// Accepted but did not fit (slow-reader preference).
    pub dropped: u64,
    /// Overwritten before they were read (fast-reader preference).
    pub overwritten: u64,
}

/// Writes `msg` into `buf`, truncated at a character boundary and NUL-terminated.
fn write_errbuf(buf: &mut [c_char], msg: &str) {
    let max = buf.len().saturating_sub(1);
    let mut end = msg.len().min(max);
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    for (d, s) in buf.iter_mut().zip(&msg.as_bytes()[..end]) {
        *d = *s as c_char;
    }
    if let Some(z) = buf.get_mut(end) {
        *z = 0;
    }
}

/// Writes `msg` into a caller's error buffer, if there is one.
///
/// # Safety
/// `errbuf` must be null or point to `NETSIFT_ERRBUF_SIZE` writable bytes.
unsafe fn put_err(errbuf: *mut c_char, msg: &str) {
    if !errbuf.is_null() {
        // SAFETY: non-null, and the caller's contract gives NETSIFT_ERRBUF_SIZE writable bytes.
        let buf = unsafe { std::slice::from_raw_parts_mut(errbuf, NETSIFT_ERRBUF_SIZE) };
        write_errbuf(buf, msg);
    }
}

/// Runs `body`; an error or a panic becomes `default`, with the message in `errbuf`.
///
/// # Safety
/// `errbuf` must be null or point to `NETSIFT_ERRBUF_SIZE` writable bytes.
unsafe fn guard<T>(errbuf: *mut c_char, default: T, body: impl FnOnce() -> Result<T, String>) -> T {
    let msg = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => return v,
        Ok(Err(m)) => m,
        Err(_) => "netsift_client: internal error (a bug: please report it)".to_string(),
    };
    // SAFETY: passed on from the caller's contract.
    unsafe { put_err(errbuf, &msg) };
    default
}

/// Runs `body`, turning a panic into `default` (for functions with no error buffer).
fn quiet<T>(default: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(default)
}

/// The flow behind a C handle, or `None` for null.
///
/// # Safety
/// `f` must be null or a live handle from `netsift_open`, used by no other thread now.
unsafe fn flow<'a>(f: *mut netsift_flow) -> Option<&'a mut netsift_flow> {
    // SAFETY: the caller's contract: null or a live, unshared handle.
    unsafe { f.as_mut() }
}

/// Fills `*o` with the defaults.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_options_init(o: *mut netsift_options) {
    quiet((), || {
        if !o.is_null() {
            // SAFETY: non-null; the caller gives a writable netsift_options.
            unsafe { o.write(OpenOptions::default().into()) };
        }
    });
}

/// Connects to `netsiftd` at `path` (null or empty: the default socket).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_connect(
    path: *const c_char,
    errbuf: *mut c_char,
) -> *mut netsift_client {
    let body = || {
        let client = if path.is_null() {
            Client::connect_default()
        } else {
            // SAFETY: non-null; the caller gives a NUL-terminated string.
            let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
            if bytes.is_empty() {
                Client::connect_default()
            } else {
                Client::connect(OsStr::from_bytes(bytes))
            }
        };
        let client = client.map_err(|e| e.to_string())?;
        Ok(Box::into_raw(Box::new(netsift_client { client })))
    };
    // SAFETY: errbuf is null or NETSIFT_ERRBUF_SIZE bytes (the caller's contract).
    unsafe { guard(errbuf, ptr::null_mut(), body) }
}

/// Frees a client; its flows keep the connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_disconnect(c: *mut netsift_client) {
    quiet((), || {
        if !c.is_null() {
            // SAFETY: non-null, from netsift_connect (Box::into_raw), freed only here.
            drop(unsafe { Box::from_raw(c) });
        }
    });
}

/// Opens a flow.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_open(
    c: *mut netsift_client,
    graph: *const c_char,
    o: *const netsift_options,
    errbuf: *mut c_char,
) -> *mut netsift_flow {
    let body = || {
        // SAFETY: null or a live handle from netsift_connect (the caller's contract).
        let Some(c) = (unsafe { c.as_ref() }) else {
            return Err("netsift_open: the client is null".to_string());
        };
        if graph.is_null() {
            return Err("netsift_open: the graph text is null".to_string());
        }
        // SAFETY: non-null; the caller gives a NUL-terminated string.
        let graph = unsafe { CStr::from_ptr(graph) };
        let graph = graph.to_str().map_err(|e| {
            format!(
                "netsift_open: the graph text is not UTF-8 (byte {})",
                e.valid_up_to()
            )
        })?;
        let options = if o.is_null() {
            OpenOptions::default()
        } else {
            // SAFETY: non-null; the caller gives a readable netsift_options.
            OpenOptions::from(unsafe { o.read() })
        };
        let flow = c.client.open(graph, &options).map_err(|e| e.to_string())?;
        Ok(Box::into_raw(Box::new(netsift_flow { flow })))
    };
    // SAFETY: errbuf is null or NETSIFT_ERRBUF_SIZE bytes (the caller's contract).
    unsafe { guard(errbuf, ptr::null_mut(), body) }
}

/// Reads the next packet, lending its bytes (see the header for how long).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_next(f: *mut netsift_flow, out: *mut netsift_packet) -> c_int {
    quiet(0, || {
        // SAFETY: null or a live handle used by this thread only (the caller's contract).
        let Some(f) = (unsafe { flow(f) }) else {
            return 0;
        };
        if out.is_null() {
            return 0;
        }
        let reader: &mut Reader = f.flow.reader();
        let Some(p) = reader.next() else {
            return 0;
        };
        // The borrow of the reader ends here, the bytes stay: a PBuf slot held until
        // `release` (slow reader) or the reader's scratch copy until its next `next`.
        let packet = netsift_packet {
            data: p.data.as_ptr(),
            caplen: u32::try_from(p.data.len()).unwrap_or(u32::MAX),
            wirelen: p.wire_len,
            ts_sec: p.timestamp.secs(),
            ts_nsec: p.timestamp.nanos(),
            linktype: p.link_type.0,
            result: p.result,
            lost_before: p.lost_before,
        };
        // SAFETY: non-null; the caller gives a writable netsift_packet.
        unsafe { out.write(packet) };
        1
    })
}

/// Blocks until `n` packets are available, the timeout passed or the source ended.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_wait(f: *mut netsift_flow, n: c_uint, timeout_ms: c_int) -> c_int {
    quiet(0, || {
        // SAFETY: null or a live handle used by this thread only (the caller's contract).
        let Some(f) = (unsafe { flow(f) }) else {
            return 0;
        };
        // A negative timeout waits forever: `Instant + Duration::MAX` has no deadline.
        let timeout = u64::try_from(timeout_ms).map_or(Duration::MAX, Duration::from_millis);
        let n = f.flow.reader().wait_for(n as usize, timeout);
        c_int::try_from(n).unwrap_or(c_int::MAX)
    })
}

/// Releases the packets read so far.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_release(f: *mut netsift_flow) {
    quiet((), || {
        // SAFETY: null or a live handle used by this thread only (the caller's contract).
        if let Some(f) = unsafe { flow(f) } {
            f.flow.reader().release();
        }
    });
}

/// 1 if the source ended and everything was read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_finished(f: *mut netsift_flow) -> c_int {
    quiet(0, || {
        // SAFETY: null or a live handle used by this thread only (the caller's contract).
        unsafe { flow(f) }.map_or(0, |f| c_int::from(f.flow.reader().is_finished()))
    })
}

/// The link type of the flow's packets.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_linktype(f: *mut netsift_flow) -> u32 {
    quiet(0, || {
        // SAFETY: null or a live handle used by this thread only (the caller's contract).
        unsafe { flow(f) }.map_or(0, |f| f.flow.link_type().0)
    })
}

/// The flow's number in the daemon.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_flow_id(f: *mut netsift_flow) -> u64 {
    quiet(0, || {
        // SAFETY: null or a live handle used by this thread only (the caller's contract).
        unsafe { flow(f) }.map_or(0, |f| f.flow.id())
    })
}

/// The word index `word` of filter `filter`'s MBuf, if both exist.
fn mbuf_word(
    f: &netsift_flow,
    filter: c_uint,
    word: c_uint,
) -> Option<(&netsift_daemon_client::MBuf, usize)> {
    let m = f.flow.mbuf(filter as usize)?;
    let word = word as usize;
    (word < m.words()).then_some((m, word))
}

/// Reads a word of a filter's MBuf: 0, or -1 if there is no such MBuf or word.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_mbuf_get(
    f: *mut netsift_flow,
    filter: c_uint,
    word: c_uint,
    value: *mut u64,
) -> c_int {
    quiet(-1, || {
        // SAFETY: null or a live handle used by this thread only (the caller's contract).
        let Some(f) = (unsafe { flow(f) }) else {
            return -1;
        };
        match mbuf_word(f, filter, word) {
            Some((m, i)) if !value.is_null() => {
                // SAFETY: non-null; the caller gives a writable uint64_t.
                unsafe { value.write(m.get(i)) };
                0
            }
            _ => -1,
        }
    })
}

/// Writes a word of a filter's MBuf: 0, or -1 if there is no such MBuf or word.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_mbuf_set(
    f: *mut netsift_flow,
    filter: c_uint,
    word: c_uint,
    value: u64,
) -> c_int {
    quiet(-1, || {
        // SAFETY: null or a live handle used by this thread only (the caller's contract).
        let Some(f) = (unsafe { flow(f) }) else {
            return -1;
        };
        match mbuf_word(f, filter, word) {
            Some((m, i)) => {
                m.set(i, value);
                0
            }
            None => -1,
        }
    })
}

/// Asks the daemon for the flow's counters.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_stats(
    f: *mut netsift_flow,
    out: *mut netsift_stats,
    errbuf: *mut c_char,
) -> c_int {
    let body = || {
        // SAFETY: null or a live handle used by this thread only (the caller's contract).
        let Some(f) = (unsafe { flow(f) }) else {
            return Err("netsift_stats: the flow is null".to_string());
        };
        if out.is_null() {
            return Err("netsift_stats: the output pointer is null".to_string());
        }
        let s = f.flow.stats().map_err(|e| e.to_string())?;
        let s = netsift_stats {
            appended: s.appended,
            delivered: s.delivered,
            dropped: s.dropped,
            overwritten: s.overwritten,
        };
        // SAFETY: non-null; the caller gives a writable netsift_stats.
        unsafe { out.write(s) };
        Ok(0)
    };
    // SAFETY: errbuf is null or NETSIFT_ERRBUF_SIZE bytes (the caller's contract).
    unsafe { guard(errbuf, -1, body) }
}

/// Pause (`pause`) or resume delivery.
///
/// # Safety
/// As for `netsift_pause`.
unsafe fn pause_or_resume(f: *mut netsift_flow, pause: bool, errbuf: *mut c_char) -> c_int {
    let name = if pause {
        "netsift_pause"
    } else {
        "netsift_resume"
    };
    let body = || {
        // SAFETY: null or a live handle used by this thread only (the caller's contract).
        let Some(f) = (unsafe { flow(f) }) else {
            return Err(format!("{name}: the flow is null"));
        };
        let r = if pause {
            f.flow.pause()
        } else {
            f.flow.resume()
        };
        r.map(|()| 0).map_err(|e| e.to_string())
    };
    // SAFETY: errbuf is null or NETSIFT_ERRBUF_SIZE bytes (the caller's contract).
    unsafe { guard(errbuf, -1, body) }
}

/// Stops delivery to the flow.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_pause(f: *mut netsift_flow, errbuf: *mut c_char) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { pause_or_resume(f, true, errbuf) }
}

/// Delivers to the flow again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_resume(f: *mut netsift_flow, errbuf: *mut c_char) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { pause_or_resume(f, false, errbuf) }
}

/// Closes the flow in the daemon and frees it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn netsift_close(f: *mut netsift_flow) {
    quiet((), || {
        if !f.is_null() {
            // SAFETY: non-null, from netsift_open (Box::into_raw), freed only here.
            let f = unsafe { Box::from_raw(f) };
            // NOTE: the C API has no error for close: a daemon that is gone has closed the
            // flow already.
            let _ = f.flow.close();
        }
    });
}

/// The library's version (a static NUL-terminated string).
#[unsafe(no_mangle)]
pub extern "C" fn netsift_version() -> *const c_char {
    VERSION.as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::ffi::CString;
    use std::path::PathBuf;

    use netsift_daemon::server::{Config, Daemon};

    fn errbuf() -> Vec<c_char> {
        vec![b'?' as c_char; NETSIFT_ERRBUF_SIZE]
    }

    fn text(buf: &[c_char]) -> String {
        // SAFETY: the buffer is NUL-terminated by write_errbuf (the test fails otherwise).
        assert!(buf.contains(&0), "the error buffer is not NUL-terminated");
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    /// A daemon on a thread of the test, and its socket path as a C string.
    struct Running {
        _daemon: netsift_daemon::Background,
        path: CString,
    }

    impl Running {
        fn start(name: &str) -> Running {
            let path: PathBuf = std::env::temp_dir().join(format!(
                "netsift-client-c-{name}-{}.sock",
                std::process::id()
            ));
            let daemon = Daemon::bind(Config::new(&path)).expect("bind").spawn();
            Running {
                _daemon: daemon,
                path: CString::new(path.into_os_string().into_encoded_bytes()).unwrap(),
            }
        }
    }

    #[test]
    fn errbuf_is_truncated_and_terminated() {
        let mut buf = vec![1 as c_char; 8];
        write_errbuf(&mut buf, "abcdefghij");
        assert_eq!(text(&buf), "abcdefg");
        // Never cut a character in half: "é" is two bytes.
        write_errbuf(&mut buf, "abcdeéé");
        assert_eq!(text(&buf), "abcdeé");
        let mut big = errbuf();
        let long = "x".repeat(5000);
        // SAFETY: a NETSIFT_ERRBUF_SIZE buffer.
        unsafe { put_err(big.as_mut_ptr(), &long) };
        assert_eq!(text(&big).len(), NETSIFT_ERRBUF_SIZE - 1);
    }

    #[test]
    fn options_init_gives_the_defaults_and_they_round_trip() {
        let mut o = netsift_options {
            fast_reader: 7,
            slots: 1,
            slot_size: 1,
            ibuf: 1,
            max_packet: 1,
            callback_every: 1,
        };
        // SAFETY: a valid netsift_options; then null, which must be ignored.
        unsafe {
            netsift_options_init(&mut o);
            netsift_options_init(ptr::null_mut());
        }
        assert_eq!(
            o,
            netsift_options {
                fast_reader: 0,
                slots: 4096,
                slot_size: 2048,
                ibuf: 4096,
                max_packet: 0,
                callback_every: 0,
            }
        );
        let fast = netsift_options {
            fast_reader: 1,
            callback_every: 100,
            ..o
        };
        assert_eq!(netsift_options::from(OpenOptions::from(fast)), fast);
        assert_eq!(OpenOptions::from(fast).preference, Preference::FastReader);
        assert_eq!(OpenOptions::from(fast).callback_every, Some(100));
    }

    #[test]
    fn connecting_to_a_missing_socket_says_so() {
        let path = CString::new("/nonexistent/netsift-client-c/none.sock").unwrap();
        let mut err = errbuf();
        // SAFETY: a C string and a NETSIFT_ERRBUF_SIZE buffer.
        let c = unsafe { netsift_connect(path.as_ptr(), err.as_mut_ptr()) };
        assert!(c.is_null());
        let m = text(&err);
        assert!(
            m.contains("cannot connect to /nonexistent/netsift-client-c/none.sock"),
            "{m}"
        );
        assert!(m.contains("No such file or directory"), "{m}");
        // A null errbuf is allowed.
        // SAFETY: a C string; null errbuf.
        assert!(unsafe { netsift_connect(path.as_ptr(), ptr::null_mut()) }.is_null());
    }

    #[test]
    fn null_handles_fail_without_crashing() {
        let mut err = errbuf();
        let e = err.as_mut_ptr();
        let f: *mut netsift_flow = ptr::null_mut();
        let graph = CString::new("(gen,1,1)").unwrap();
        let mut p = netsift_packet::default();
        let mut v = 5u64;
        let mut st = netsift_stats::default();
        // SAFETY: every pointer is null or valid; null handles are part of the contract.
        unsafe {
            assert!(netsift_open(ptr::null_mut(), graph.as_ptr(), ptr::null(), e).is_null());
            assert_eq!(text(&err), "netsift_open: the client is null");
            assert_eq!(netsift_next(f, &mut p), 0);
            assert_eq!(netsift_wait(f, 1, 0), 0);
            netsift_release(f);
            assert_eq!(netsift_finished(f), 0);
            assert_eq!(netsift_linktype(f), 0);
            assert_eq!(netsift_flow_id(f), 0);
            assert_eq!(netsift_mbuf_get(f, 0, 0, &mut v), -1);
            assert_eq!(v, 5);
            assert_eq!(netsift_mbuf_set(f, 0, 0, 1), -1);
            assert_eq!(netsift_stats(f, &mut st, e), -1);
            assert_eq!(text(&err), "netsift_stats: the flow is null");
            assert_eq!(netsift_pause(f, e), -1);
            assert_eq!(text(&err), "netsift_pause: the flow is null");
            assert_eq!(netsift_resume(f, ptr::null_mut()), -1);
            netsift_close(f);
            netsift_disconnect(ptr::null_mut());
        }
    }

    #[test]
    fn version_is_a_c_string() {
        // SAFETY: a static NUL-terminated string.
        let v = unsafe { CStr::from_ptr(netsift_version()) };
        assert_eq!(
            v.to_str().unwrap(),
            concat!("netsift_client ", env!("CARGO_PKG_VERSION"))
        );
    }

    #[test]
    fn fast_reader_flows_deliver_copies() {
        // A daemon of its own: a group's PBuf takes its preference from its first flow.
        let d = Running::start("fast");
        let mut err = errbuf();
        let e = err.as_mut_ptr();
        // SAFETY: every pointer is valid or null as the header allows; handles are used once
        // each and freed once.
        unsafe {
            let c = netsift_connect(d.path.as_ptr(), e);
            assert!(!c.is_null(), "{}", text(&err));
            let mut o = netsift_options::from(OpenOptions::default());
            o.fast_reader = 1;
            let graph = CString::new("(gen,4,300) -> (bpf,\"tcp\") -> (packetcount,,8)").unwrap();
            let f = netsift_open(c, graph.as_ptr(), &o, e);
            assert!(!f.is_null(), "{}", text(&err));
            let (mut n, mut lost) = (0u64, 0u64);
            let mut p = netsift_packet::default();
            while netsift_finished(f) == 0 {
                netsift_wait(f, 64, 50);
                while netsift_next(f, &mut p) == 1 {
                    n += 1;
                    lost += p.lost_before;
                    // The copy is readable until the next call.
                    let bytes = std::slice::from_raw_parts(p.data, p.caplen as usize);
                    let ether_type = [bytes[12], bytes[13]];
                    assert!(
                        ether_type == [0x08, 0x00] || ether_type == [0x86, 0xdd],
                        "TCP over IPv4 or IPv6: {ether_type:02x?}"
                    );
                }
                netsift_release(f);
            }
            let mut v = 0;
            assert_eq!(netsift_mbuf_get(f, 2, 0, &mut v), 0);
            assert!(n > 0);
            assert_eq!((n, lost), (v, 0), "300 packets cannot overrun 4096 slots");
            let mut st = netsift_stats::default();
            assert_eq!(netsift_stats(f, &mut st, e), 0, "{}", text(&err));
            assert_eq!((st.delivered, st.overwritten), (n, 0));
            netsift_close(f);
            netsift_disconnect(c);
        }
    }

    #[test]
    fn a_flow_through_the_c_functions() {
        let d = Running::start("unit");
        let mut err = errbuf();
        let e = err.as_mut_ptr();
        // SAFETY: every pointer is valid or null as the header allows; handles are used once
        // each and freed once.
        unsafe {
            let c = netsift_connect(d.path.as_ptr(), e);
            assert!(!c.is_null(), "{}", text(&err));

            // Errors: a null graph, a non-UTF-8 graph, a graph the daemon refuses.
            assert!(netsift_open(c, ptr::null(), ptr::null(), e).is_null());
            assert_eq!(text(&err), "netsift_open: the graph text is null");
            let bad = CString::new(b"(gen,1,1) -> (bpf,\"\xff\")".to_vec()).unwrap();
            assert!(netsift_open(c, bad.as_ptr(), ptr::null(), e).is_null());
            assert!(text(&err).contains("not UTF-8 (byte 19)"), "{}", text(&err));
            let bad = CString::new("(gen,1,1) -> (bpf,\"tcp port\")").unwrap();
            assert!(netsift_open(c, bad.as_ptr(), ptr::null(), e).is_null());
            assert!(text(&err).contains('^'), "{}", text(&err));
            let mut o = netsift_options::from(OpenOptions::default());
            o.slots = 0;
            let good = CString::new("(gen,3,200) -> (bpf,\"udp\") -> (packetcount,,8)").unwrap();
            assert!(netsift_open(c, good.as_ptr(), &o, e).is_null());
            assert!(text(&err).contains("at least 1"), "{}", text(&err));

            // The flow outlives its client handle.
            let f = netsift_open(c, good.as_ptr(), ptr::null(), e);
            assert!(!f.is_null(), "{}", text(&err));
            netsift_disconnect(c);
            assert_eq!(netsift_linktype(f), 1);
            assert_ne!(netsift_flow_id(f), 0);
            assert_eq!(netsift_next(f, ptr::null_mut()), 0);

            let mut n = 0u64;
            let mut p = netsift_packet::default();
            while netsift_finished(f) == 0 {
                netsift_wait(f, 64, 50);
                while netsift_next(f, &mut p) == 1 {
                    n += 1;
                    assert!(!p.data.is_null());
                    assert!(p.caplen > 0 && p.caplen <= p.wirelen);
                    assert_eq!(p.linktype, 1);
                }
                netsift_release(f);
            }
            assert!(n > 0);
            assert_eq!(netsift_wait(f, 1, -1), 0, "a finished flow does not block");

            let mut v = 0;
            assert_eq!(netsift_mbuf_get(f, 2, 0, &mut v), 0);
            assert_eq!(v, n);
            assert_eq!(netsift_mbuf_get(f, 1, 0, &mut v), -1, "bpf has no MBuf");
            assert_eq!(netsift_mbuf_get(f, 2, 1, &mut v), -1, "8 bytes: one word");
            assert_eq!(netsift_mbuf_get(f, 2, 0, ptr::null_mut()), -1);
            assert_eq!(netsift_mbuf_set(f, 2, 0, 77), 0);
            assert_eq!(netsift_mbuf_get(f, 2, 0, &mut v), 0);
            assert_eq!(v, 77);
            assert_eq!(netsift_mbuf_set(f, 2, 1, 77), -1);

            let mut st = netsift_stats::default();
            assert_eq!(netsift_stats(f, &mut st, e), 0, "{}", text(&err));
            assert_eq!((st.appended, st.delivered, st.dropped), (n, n, 0));
            assert_eq!(netsift_stats(f, ptr::null_mut(), e), -1);
            assert_eq!(text(&err), "netsift_stats: the output pointer is null");
            assert_eq!(netsift_pause(f, e), 0, "{}", text(&err));
            assert_eq!(netsift_resume(f, e), 0, "{}", text(&err));
            netsift_close(f);
        }
    }
}
