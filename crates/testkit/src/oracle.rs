//! libpcap as an oracle: compile with `pcap_compile`, run with `bpf_filter`, read files with
//! `pcap_open_offline`.
//!
//! This deliberately does not use the `pcap` crate: its dead handle fixes the snap length at
//! 65535, compiles with netmask 0 and filters with `len = caplen`, so it answers differently from
//! libpcap proper. libpcap's compiler keeps global state in older versions, so every call here
//! holds one process-wide lock.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::path::Path;
use std::sync::Mutex;

use netsift_bpf::{Insn, Program};

static LOCK: Mutex<()> = Mutex::new(());

#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut Insn,
}

#[repr(C)]
struct PcapPkthdr {
    ts: libc::timeval,
    caplen: u32,
    len: u32,
}

const PCAP_NETMASK_UNKNOWN: u32 = 0xffff_ffff;

unsafe extern "C" {
    fn pcap_open_dead(linktype: c_int, snaplen: c_int) -> *mut c_void;
    fn pcap_open_offline(fname: *const c_char, errbuf: *mut c_char) -> *mut c_void;
    fn pcap_close(p: *mut c_void);
    fn pcap_compile(
        p: *mut c_void,
        fp: *mut BpfProgram,
        s: *const c_char,
        optimize: c_int,
        netmask: u32,
    ) -> c_int;
    fn pcap_freecode(fp: *mut BpfProgram);
    fn pcap_geterr(p: *mut c_void) -> *mut c_char;
    fn pcap_datalink(p: *mut c_void) -> c_int;
    fn pcap_snapshot(p: *mut c_void) -> c_int;
    fn pcap_next_ex(p: *mut c_void, hdr: *mut *mut PcapPkthdr, data: *mut *const u8) -> c_int;
    fn pcap_datalink_name_to_val(name: *const c_char) -> c_int;
    fn pcap_lib_version() -> *const c_char;
    fn bpf_filter(pc: *const Insn, pkt: *const u8, wirelen: c_uint, buflen: c_uint) -> c_uint;
    fn bpf_validate(f: *const Insn, len: c_int) -> c_int;
    fn bpf_image(p: *const Insn, n: c_int) -> *mut c_char;
}

/// libpcap's version string, e.g. `libpcap version 1.10.3 (with TPACKET_V3)`.
pub fn version() -> String {
    // SAFETY: pcap_lib_version returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(pcap_lib_version()) }
        .to_string_lossy()
        .into_owned()
}

/// The DLT value libpcap gives a link-type name such as `EN10MB`, `RAW` or `LINUX_SLL`.
pub fn dlt_from_name(name: &str) -> Option<i32> {
    let c = CString::new(name).ok()?;
    // SAFETY: c is a valid C string; the function only reads it.
    let v = unsafe { pcap_datalink_name_to_val(c.as_ptr()) };
    (v >= 0).then_some(v)
}

/// Compile `expr` with libpcap for link type `dlt` (a DLT value), snap length `snaplen` and
/// netmask `PCAP_NETMASK_UNKNOWN`, as `tcpdump -d` does. Returns libpcap's error text on failure.
pub fn compile(dlt: i32, snaplen: i32, expr: &str, optimize: bool) -> Result<Program, String> {
    let expr = CString::new(expr).map_err(|_| "expression contains NUL".to_string())?;
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: plain libpcap calls; the handle is closed by compile_on.
    unsafe {
        let p = pcap_open_dead(dlt, snaplen);
        if p.is_null() {
            return Err(format!("pcap_open_dead({dlt}, {snaplen}) failed"));
        }
        compile_on(p, &expr, optimize)
    }
}

/// Compile `expr` against the capture file at `path`, as `tcpdump -r FILE EXPR` does (the
/// file's link type and snap length; libpcap's savefile-specific meanings).
pub fn compile_for_file(path: &Path, expr: &str, optimize: bool) -> Result<Program, String> {
    let cpath = CString::new(path.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
    let expr = CString::new(expr).map_err(|_| "expression contains NUL".to_string())?;
    let mut errbuf = [0 as c_char; 512];
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: plain libpcap calls; the handle is closed by compile_on.
    unsafe {
        let p = pcap_open_offline(cpath.as_ptr(), errbuf.as_mut_ptr());
        if p.is_null() {
            return Err(CStr::from_ptr(errbuf.as_ptr())
                .to_string_lossy()
                .into_owned());
        }
        compile_on(p, &expr, optimize)
    }
}

/// `pcap_compile` on the open handle `p` (netmask unknown), the program copied out, then the
/// handle closed.
///
/// # Safety
/// `p` is an open handle the caller owns and does not use afterwards; the caller holds `LOCK`.
unsafe fn compile_on(p: *mut c_void, expr: &CStr, optimize: bool) -> Result<Program, String> {
    let mut prog = BpfProgram {
        bf_len: 0,
        bf_insns: std::ptr::null_mut(),
    };
    // SAFETY: as the caller promises; the instructions are copied before pcap_freecode.
    unsafe {
        let rc = pcap_compile(
            p,
            &mut prog,
            expr.as_ptr(),
            c_int::from(optimize),
            PCAP_NETMASK_UNKNOWN,
        );
        let result = if rc != 0 {
            Err(CStr::from_ptr(pcap_geterr(p))
                .to_string_lossy()
                .into_owned())
        } else {
            let insns = std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize).to_vec();
            pcap_freecode(&mut prog);
            Ok(Program::new(insns))
        };
        pcap_close(p);
        result
    }
}

/// Run `program` on a packet with libpcap's `bpf_filter`: `data` is the captured bytes,
/// `wire_len` the length on the wire.
///
/// The program must pass libpcap's `bpf_validate` (checked here; an invalid program returns
/// `None`), since `bpf_filter` trusts it.
pub fn filter(program: &Program, data: &[u8], wire_len: u32) -> Option<u32> {
    let insns = program.insns();
    if !validate(program) {
        return None;
    }
    // SAFETY: the program passed bpf_validate, so bpf_filter stays inside it; it reads at most
    // data.len() bytes of the packet.
    Some(unsafe {
        bpf_filter(
            insns.as_ptr(),
            data.as_ptr(),
            wire_len,
            data.len() as c_uint,
        )
    })
}

/// libpcap's `bpf_validate`.
pub fn validate(program: &Program) -> bool {
    let insns = program.insns();
    if insns.is_empty() || insns.len() > i32::MAX as usize {
        return false;
    }
    // SAFETY: reads insns.len() instructions.
    unsafe { bpf_validate(insns.as_ptr(), insns.len() as c_int) != 0 }
}

/// libpcap's `bpf_image` of one instruction (the `tcpdump -d` line, without newline).
pub fn image(insn: &Insn, n: usize) -> String {
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: bpf_image reads one instruction and returns a static buffer we copy at once
    // (under the lock, since the buffer is shared).
    unsafe {
        CStr::from_ptr(bpf_image(insn, n as c_int))
            .to_string_lossy()
            .into_owned()
    }
}

/// One packet as libpcap's reader returned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OraclePacket {
    /// Seconds of the timestamp.
    pub ts_sec: i64,
    /// Microseconds (or nanoseconds for nanosecond files opened as such) of the timestamp.
    pub ts_frac: i64,
    /// Length on the wire.
    pub wire_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// What libpcap made of a capture file.
#[derive(Clone, Debug)]
pub struct OracleCapture {
    /// libpcap's DLT of the (first) interface.
    pub dlt: i32,
    /// The snap length.
    pub snaplen: i32,
    /// The packets read before the end or the first error.
    pub packets: Vec<OraclePacket>,
    /// The error that ended reading, if any.
    pub error: Option<String>,
}

/// Read a capture file with libpcap (`pcap_open_offline` + `pcap_next_ex`).
pub fn read_capture(path: &Path) -> Result<OracleCapture, String> {
    let cpath = CString::new(path.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
    let mut errbuf = [0 as c_char; 512];
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: libpcap calls on a handle we own; packet data is copied before the next call.
    unsafe {
        let p = pcap_open_offline(cpath.as_ptr(), errbuf.as_mut_ptr());
        if p.is_null() {
            return Err(CStr::from_ptr(errbuf.as_ptr())
                .to_string_lossy()
                .into_owned());
        }
        let mut out = OracleCapture {
            dlt: pcap_datalink(p),
            snaplen: pcap_snapshot(p),
            packets: Vec::new(),
            error: None,
        };
        loop {
            let mut hdr: *mut PcapPkthdr = std::ptr::null_mut();
            let mut data: *const u8 = std::ptr::null();
            match pcap_next_ex(p, &mut hdr, &mut data) {
                1 => {
                    let h = &*hdr;
                    out.packets.push(OraclePacket {
                        ts_sec: h.ts.tv_sec,
                        ts_frac: h.ts.tv_usec,
                        wire_len: h.len,
                        data: std::slice::from_raw_parts(data, h.caplen as usize).to_vec(),
                    });
                }
                -2 => break,
                _ => {
                    out.error = Some(
                        CStr::from_ptr(pcap_geterr(p))
                            .to_string_lossy()
                            .into_owned(),
                    );
                    break;
                }
            }
        }
        pcap_close(p);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_and_filters() {
        let dlt = dlt_from_name("EN10MB").unwrap();
        assert_eq!(dlt, 1);
        let prog = compile(dlt, 262144, "ip", true).unwrap();
        assert_eq!(prog.len(), 4);
        let mut frame = [0u8; 60];
        frame[12] = 0x08;
        assert_eq!(filter(&prog, &frame, 60), Some(262144));
        frame[13] = 0x06;
        assert_eq!(filter(&prog, &frame, 60), Some(0));
        let err = compile(dlt, 262144, "tcp port", true).unwrap_err();
        assert!(err.contains("syntax error"), "{err}");
        assert!(version().contains("libpcap"));
    }
}
