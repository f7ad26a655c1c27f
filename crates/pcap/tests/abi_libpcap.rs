//! netsift's `libpcap.so.0.8` against Debian's real libpcap 1.10.3, function by function: both
//! libraries are loaded into this process (`dlopen` by full path, `RTLD_DEEPBIND`: they share a
//! soname and their symbol names), the same function is looked up in each with `dlsym`, called
//! with the same arguments, and the results compared — return values, out-parameters (pre-filled
//! with -99), error texts, the packets read, the bytes written.
//!
//! Covered: the exported symbols (`nm -D`), the name helpers of `<pcap/namedb.h>` on every name in
//! /etc/services, /etc/protocols and /etc/networks, the Ethernet helpers, `bpf_image` on every
//! opcode, `bpf_validate` on a table and on random programs, `bpf_filter` with programs from
//! libpcap's own compiler and random ones over the shared captures, savefiles read through
//! `pcap_fopen_offline*` (all shared captures, truncated and odd streams), `pcap_dump_open_append`
//! on files of every kind, `pcap_bufsize` and `pcap_get_required_select_timeout`.
//!
//! Left out, or checked against netsift's documented answer instead:
//!
//! - inputs on which libpcap's behaviour is undefined: `pcap_ether_aton` on strings of other
//!   than six bytes (it leaves its buffer partly uninitialised, or writes past it); `bpf_filter`
//!   on unknown opcodes (it aborts), division or modulo by a constant 0 (SIGFPE), constant
//!   shifts of 32 or more, scratch words read before they are written, and backward jumps
//!   (which may loop forever) — the random programs avoid them all;
//! - decisions documented in netsift: `pcap_ether_hostton` finds nothing (netsift has no
//!   ethers table; this machine has no /etc/ethers, so libpcap finds nothing either),
//!   `bpf_image` prints a negative index as 0, and `pcap_get_required_select_timeout` is 1 ms
//!   only for captures through `netsiftd` (none here);
//! - a savefile stream's position after a failed open and the reads after a read error:
//!   netsift's reader reads ahead (64 KiB blocks) and stops at the first error, where libpcap
//!   reads exactly the header and would read on from the middle of the bad record. The
//!   position at the end of a file is compared.

mod common;

use netsift_testkit::rng::Rng;
use std::collections::BTreeSet;
use std::ffi::{CStr, CString, c_char, c_int, c_long, c_uint, c_void};
use std::fmt::{Debug, Display};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::ptr;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use netsift_capture::{CaptureReader, LinkType};

/// Debian's libpcap, the reference.
const DEBIAN: &str = "/usr/lib/x86_64-linux-gnu/libpcap.so.0.8";

/// Serialises the calls of functions that return static buffers (`bpf_image`,
/// `pcap_next_etherent`, `pcap_nametoaddr` through glibc's `gethostbyname`).
static STATIC_BUFFERS: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    STATIC_BUFFERS.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------------
// C types, as <pcap/pcap.h>, <pcap/bpf.h> and <pcap/namedb.h> lay them out on x86-64 Linux.

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct BpfInsn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const fn ins(code: u16, jt: u8, jf: u8, k: u32) -> BpfInsn {
    BpfInsn { code, jt, jf, k }
}

#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut BpfInsn,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Timeval {
    tv_sec: i64,
    tv_usec: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PcapPkthdr {
    ts: Timeval,
    caplen: u32,
    len: u32,
}

#[repr(C)]
struct Etherent {
    addr: [u8; 6],
    name: [c_char; 122],
}

/// `pcap_t` and `pcap_dumper_t`, opaque.
type Pcap = c_void;
type Dumper = c_void;
type File = libc::FILE;

const ERRBUF: usize = 256;

// ---------------------------------------------------------------------------------------------
// The two libraries.

/// The functions called, looked up by their own names.
macro_rules! api {
    ($($f:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        struct Api {
            /// "libpcap" or "netsift".
            name: &'static str,
            $($f: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl Api {
            /// # Safety
            /// `handle` must be a library from `dlopen` that defines these functions with these
            /// prototypes.
            unsafe fn load(handle: *mut c_void, name: &'static str) -> Api {
                Api {
                    name,
                    $($f: {
                        let p = unsafe { dlsym(handle, stringify!($f), name) };
                        unsafe {
                            std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) $(-> $ret)?>(p)
                        }
                    },)*
                }
            }
        }
    };
}

api! {
    pcap_lib_version: fn() -> *const c_char;
    pcap_nametoport: fn(*const c_char, *mut c_int, *mut c_int) -> c_int;
    pcap_nametoportrange: fn(*const c_char, *mut c_int, *mut c_int, *mut c_int) -> c_int;
    pcap_nametoproto: fn(*const c_char) -> c_int;
    pcap_nametoeproto: fn(*const c_char) -> c_int;
    pcap_nametollc: fn(*const c_char) -> c_int;
    pcap_nametonetaddr: fn(*const c_char) -> u32;
    pcap_nametoaddr: fn(*const c_char) -> *mut *mut u32;
    pcap_nametoaddrinfo: fn(*const c_char) -> *mut libc::addrinfo;
    pcap_ether_aton: fn(*const c_char) -> *mut u8;
    pcap_ether_hostton: fn(*const c_char) -> *mut u8;
    pcap_next_etherent: fn(*mut File) -> *mut Etherent;
    bpf_image: fn(*const BpfInsn, c_int) -> *mut c_char;
    bpf_validate: fn(*const BpfInsn, c_int) -> c_int;
    bpf_filter: fn(*const BpfInsn, *const u8, c_uint, c_uint) -> c_uint;
    pcap_open_dead: fn(c_int, c_int) -> *mut Pcap;
    pcap_open_dead_with_tstamp_precision: fn(c_int, c_int, c_uint) -> *mut Pcap;
    pcap_compile: fn(*mut Pcap, *mut BpfProgram, *const c_char, c_int, u32) -> c_int;
    pcap_freecode: fn(*mut BpfProgram);
    pcap_close: fn(*mut Pcap);
    pcap_geterr: fn(*mut Pcap) -> *mut c_char;
    pcap_open_offline_with_tstamp_precision: fn(*const c_char, c_uint, *mut c_char) -> *mut Pcap;
    pcap_fopen_offline: fn(*mut File, *mut c_char) -> *mut Pcap;
    pcap_fopen_offline_with_tstamp_precision: fn(*mut File, c_uint, *mut c_char) -> *mut Pcap;
    pcap_datalink: fn(*mut Pcap) -> c_int;
    pcap_snapshot: fn(*mut Pcap) -> c_int;
    pcap_major_version: fn(*mut Pcap) -> c_int;
    pcap_minor_version: fn(*mut Pcap) -> c_int;
    pcap_is_swapped: fn(*mut Pcap) -> c_int;
    pcap_bufsize: fn(*mut Pcap) -> c_int;
    pcap_get_tstamp_precision: fn(*mut Pcap) -> c_int;
    pcap_fileno: fn(*mut Pcap) -> c_int;
    pcap_get_selectable_fd: fn(*mut Pcap) -> c_int;
    pcap_file: fn(*mut Pcap) -> *mut File;
    pcap_get_required_select_timeout: fn(*mut Pcap) -> *const Timeval;
    pcap_next_ex: fn(*mut Pcap, *mut *mut PcapPkthdr, *mut *const u8) -> c_int;
    pcap_dump_open_append: fn(*mut Pcap, *const c_char) -> *mut Dumper;
    pcap_dump: fn(*mut u8, *const PcapPkthdr, *const u8);
    pcap_dump_ftell: fn(*mut Dumper) -> c_long;
    pcap_dump_flush: fn(*mut Dumper) -> c_int;
    pcap_dump_close: fn(*mut Dumper);
    pcap_create: fn(*const c_char, *mut c_char) -> *mut Pcap;
    pcap_set_snaplen: fn(*mut Pcap, c_int) -> c_int;
    pcap_set_immediate_mode: fn(*mut Pcap, c_int) -> c_int;
    pcap_activate: fn(*mut Pcap) -> c_int;
}

/// `dlsym`, failing the test if the symbol is missing.
///
/// # Safety
/// `handle` must be a library from `dlopen`.
unsafe fn dlsym(handle: *mut c_void, sym: &str, lib: &str) -> *mut c_void {
    let c = CString::new(sym).unwrap();
    // SAFETY: the caller's handle; a NUL-terminated name.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    assert!(!p.is_null(), "{lib} has no {sym}");
    p
}

/// Debian's library, installed with apt-get if it is missing.
fn debian_lib() -> &'static Path {
    static OK: OnceLock<()> = OnceLock::new();
    OK.get_or_init(|| {
        if !Path::new(DEBIAN).is_file() {
            let st = Command::new("apt-get")
                .args(["install", "-y", "libpcap0.8"])
                .status()
                .expect("run apt-get");
            assert!(
                st.success() && Path::new(DEBIAN).is_file(),
                "{DEBIAN} is missing and apt-get install -y libpcap0.8 failed"
            );
        }
    });
    Path::new(DEBIAN)
}

/// netsift's library, built in release mode.
fn netsift_lib() -> PathBuf {
    common::lib_dir().join("libpcap.so.0.8")
}

fn dlopen(path: &Path) -> *mut c_void {
    let c = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path. Never closed: function pointers into it live in a static.
    let h = unsafe {
        libc::dlopen(
            c.as_ptr(),
            libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_DEEPBIND,
        )
    };
    if h.is_null() {
        // SAFETY: dlerror's message after a failed dlopen.
        let e = unsafe { CStr::from_ptr(libc::dlerror()) };
        panic!("dlopen {}: {}", path.display(), e.to_string_lossy());
    }
    h
}

/// `[libpcap, netsift]`.
fn apis() -> &'static [Api; 2] {
    static APIS: OnceLock<[Api; 2]> = OnceLock::new();
    APIS.get_or_init(|| {
        let deb = dlopen(debian_lib());
        let ns = dlopen(&netsift_lib());
        // SAFETY: both are libpcap 1.10.3's ABI.
        let apis = unsafe { [Api::load(deb, "libpcap"), Api::load(ns, "netsift")] };
        // SAFETY: static version strings.
        let v: Vec<String> = apis
            .iter()
            .map(|a| text(unsafe { (a.pcap_lib_version)() }))
            .collect();
        assert_ne!(v[0], v[1], "both handles are the same library");
        assert!(v[0].starts_with("libpcap version 1.10"), "{}", v[0]);
        assert!(v[1].starts_with("netsift libpcap"), "{}", v[1]);
        apis
    })
}

/// A C string's text (`None` for null).
fn opt_text(p: *const c_char) -> Option<String> {
    // SAFETY: null or a NUL-terminated string.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

fn text(p: *const c_char) -> String {
    opt_text(p).expect("a string")
}

fn cstr(s: &[u8]) -> CString {
    CString::new(s).unwrap()
}

fn errbuf_text(b: &[c_char; ERRBUF]) -> String {
    text(b.as_ptr())
}

// ---------------------------------------------------------------------------------------------
// Comparing.

/// Counts the comparisons of one part and collects the differences.
struct Cmp {
    what: &'static str,
    n: usize,
    diffs: Vec<String>,
    ndiffs: usize,
}

impl Cmp {
    fn new(what: &'static str) -> Cmp {
        Cmp {
            what,
            n: 0,
            diffs: Vec::new(),
            ndiffs: 0,
        }
    }

    /// Compares libpcap's `deb` with netsift's `ns`; false if they differ.
    fn eq<T: PartialEq + Debug>(&mut self, case: impl Display, deb: &T, ns: &T) -> bool {
        self.n += 1;
        if deb == ns {
            return true;
        }
        self.ndiffs += 1;
        if self.diffs.len() < 60 {
            let mut d = format!("libpcap {deb:?}, netsift {ns:?} <- {case}");
            if d.len() > 3000 {
                let mut end = 3000;
                while !d.is_char_boundary(end) {
                    end -= 1;
                }
                d.truncate(end);
                d.push('…');
            }
            self.diffs.push(d);
        }
        false
    }

    /// A check of netsift alone (a documented decision).
    fn check(&mut self, case: impl Display, ok: bool) {
        self.n += 1;
        if !ok {
            self.ndiffs += 1;
            self.diffs.push(format!("{case}: failed"));
        }
    }

    /// Prints the count; fails listing the differences.
    fn finish(self, started: Instant) -> usize {
        println!(
            "{}: {} cases compared, {} differ ({:.1} s)",
            self.what,
            self.n,
            self.ndiffs,
            started.elapsed().as_secs_f64()
        );
        assert!(
            self.ndiffs == 0,
            "{}: {} of {} cases differ from libpcap:\n  {}",
            self.what,
            self.ndiffs,
            self.n,
            self.diffs.join("\n  ")
        );
        self.n
    }
}

/// A directory for this test's files under the target directory.
fn tmp(sub: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("netsift-abi-libpcap")
        .join(sub);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every shared capture (`captures/*/*`), sorted; fails if the shared data is missing.
fn shared_captures() -> Vec<PathBuf> {
    let root = netsift_testkit::data::dir().join("captures");
    let mut out = Vec::new();
    for d in std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display())) {
        let d = d.unwrap().path();
        if !d.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&d).unwrap() {
            let f = f.unwrap().path();
            if f.is_file() {
                out.push(f);
            }
        }
    }
    out.sort();
    assert!(
        out.len() > 800,
        "only {} files in {}: the shared captures are incomplete",
        out.len(),
        root.display()
    );
    out
}

// ---------------------------------------------------------------------------------------------
// Exports.

/// `name -> type letter` of the defined dynamic symbols of a library.
fn exports(lib: &Path) -> Vec<(String, char)> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success(), "nm -D {}", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (_addr, ty, name) = (w.next()?, w.next()?, w.next()?);
            Some((name.to_string(), ty.chars().next()?))
        })
        .collect()
}

#[test]
fn exports_match_debian() {
    let deb = exports(debian_lib());
    let ns = exports(&netsift_lib());
    let ns_of = |name: &str| ns.iter().find(|(n, _)| n == name).map(|&(_, t)| t);
    let mut missing_t: Vec<&str> = Vec::new();
    let mut missing_d: Vec<String> = Vec::new();
    let (mut nt, mut nd) = (0, 0);
    for (name, ty) in &deb {
        match ty {
            'T' => {
                nt += 1;
                if ns_of(name) != Some('T') {
                    missing_t.push(name);
                }
            }
            'D' | 'B' | 'R' => {
                nd += 1;
                if ns_of(name) != Some(*ty) {
                    missing_d.push(format!("{name} ({ty}, netsift {:?})", ns_of(name)));
                }
            }
            _ => {}
        }
    }
    missing_t.sort();
    missing_d.sort();
    println!(
        "exports: libpcap {nt} functions and {nd} data symbols; netsift lacks {} and {}",
        missing_t.len(),
        missing_d.len()
    );
    assert!(
        missing_t.is_empty() && missing_d.is_empty(),
        "netsift's library lacks these functions of libpcap's: {missing_t:?}; and these data \
         symbols: {missing_d:?}"
    );
    // The loaded libraries are different ones.
    let _ = apis();
}

// ---------------------------------------------------------------------------------------------
// Names.

/// The names and aliases of a netbase file (`skip` fields after the name are not names).
fn netbase_names(path: &str, skip: usize) -> Vec<String> {
    let t = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out = Vec::new();
    for line in t.lines() {
        let line = line.split('#').next().unwrap_or("");
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.is_empty() {
            continue;
        }
        out.push(w[0].to_string());
        out.extend(w.iter().skip(1 + skip).map(|s| s.to_string()));
    }
    out
}

/// The six name functions on one input, in both libraries.
fn compare_name(cmp: &mut Cmp, input: &[u8]) {
    let c = cstr(input);
    let shown = String::from_utf8_lossy(input).into_owned();
    let r: Vec<_> = apis()
        .iter()
        .map(|a| {
            // SAFETY: a NUL-terminated input and writable out-parameters.
            unsafe {
                let (mut port, mut proto) = (-99, -99);
                let rp = (a.pcap_nametoport)(c.as_ptr(), &mut port, &mut proto);
                let (mut p1, mut p2, mut pr) = (-99, -99, -99);
                let rr = (a.pcap_nametoportrange)(c.as_ptr(), &mut p1, &mut p2, &mut pr);
                (
                    (rp, port, proto),
                    (rr, p1, p2, pr),
                    (a.pcap_nametoproto)(c.as_ptr()),
                    (a.pcap_nametoeproto)(c.as_ptr()),
                    (a.pcap_nametollc)(c.as_ptr()),
                    (a.pcap_nametonetaddr)(c.as_ptr()),
                )
            }
        })
        .collect();
    cmp.eq(format!("pcap_nametoport({shown:?})"), &r[0].0, &r[1].0);
    cmp.eq(format!("pcap_nametoportrange({shown:?})"), &r[0].1, &r[1].1);
    cmp.eq(format!("pcap_nametoproto({shown:?})"), &r[0].2, &r[1].2);
    cmp.eq(format!("pcap_nametoeproto({shown:?})"), &r[0].3, &r[1].3);
    cmp.eq(format!("pcap_nametollc({shown:?})"), &r[0].4, &r[1].4);
    cmp.eq(format!("pcap_nametonetaddr({shown:?})"), &r[0].5, &r[1].5);
}

/// Inputs at the edges of glibc's and libpcap's parsing (see the research note).
const NAME_QUIRKS: &[&str] = &[
    "70000",
    "",
    "+80",
    " 80",
    "80 ",
    "\t80",
    "-5",
    "-0",
    "4294967296",
    "4294967295",
    "4294967376",
    "2147483647",
    "2147483648",
    "18446744073709551615",
    "18446744073709551616",
    "65535",
    "65536",
    "0",
    "00080",
    "0x50",
    "080",
    "SSH",
    "Ssh",
    "ssh",
    "ssh ",
    " ssh",
    "ftp-data",
    "ftp-data-ssh",
    "ssh-ftp-data",
    "ssh-",
    "-ssh",
    "ssh-domain",
    "domain-ssh",
    "http-https",
    "ssh-ssh",
    "domain-domain",
    "-5-3",
    "10-20",
    "20-10",
    "1 -2",
    "1- 2",
    " 1- 2x",
    "+5-+6",
    "\u{b}5-6",
    "5-\u{b}6",
    "\u{c}5-6",
    "\u{b}-5-3",
    "\u{b}-99999999999999999999-1",
    "99999999999999999999-1",
    "-99999999999999999999-1",
    "1-99999999999999999999",
    "2147483648-1",
    "1-4294967296",
    "-",
    "--",
    "---",
    "1-",
    "-1",
    "ssh-1",
    "1-ssh",
    "70000-ssh",
    "LOOPBACK",
    "loopback",
    "Loopback",
    "link-local",
    "LINK-LOCAL",
    "Link-Local",
    "iso",
    "ISO",
    "stp",
    "ipx",
    "netbeui",
    "ip",
    "IP",
    "ip6",
    "ipv6",
    "arp",
    "rarp",
    "aarp",
    "atalk",
    "decnet",
    "lat",
    "mopdl",
    "moprc",
    "sca",
    "vlan",
    "mpls",
    "netbios",
    "6",
    "17",
    "TCP",
    "tcp",
    "Tcp",
    "ICMP",
    "icmp",
    "ipv6-icmp",
    "IPv6-ICMP",
    "nosuch",
    "x",
    " ",
    "domain",
    "nfs",
    "kerberos",
    "tcpmux",
    "echo",
    "127",
    "169.254",
];

#[test]
fn names_match() {
    let started = Instant::now();
    let netbase = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", "netbase"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert_eq!(
        netbase, "6.4",
        "netsift's name tables are netbase 6.4's; this machine's /etc files are netbase {netbase:?}"
    );
    let services = netbase_names("/etc/services", 1);
    let protocols = netbase_names("/etc/protocols", 1);
    let networks = netbase_names("/etc/networks", 1);
    let mut inputs: BTreeSet<Vec<u8>> = BTreeSet::new();
    for n in services.iter().chain(&protocols).chain(&networks) {
        inputs.insert(n.as_bytes().to_vec());
        inputs.insert(n.to_uppercase().into_bytes());
    }
    // Ranges of two services, as `portrange ssh-telnet` would give them.
    for w in services.windows(2) {
        inputs.insert(format!("{}-{}", w[0], w[1]).into_bytes());
    }
    for q in NAME_QUIRKS {
        inputs.insert(q.as_bytes().to_vec());
    }
    let mut cmp = Cmp::new("names");
    for i in &inputs {
        compare_name(&mut cmp, i);
    }
    println!(
        "names: {} inputs ({} services, {} protocols, {} networks with aliases)",
        inputs.len(),
        services.len(),
        protocols.len(),
        networks.len()
    );
    cmp.finish(started);
}

/// The addresses of an `addrinfo` list: family, socket type, protocol, address bytes.
fn addrinfo_list(mut ai: *const libc::addrinfo) -> Vec<(c_int, c_int, c_int, Vec<u8>)> {
    let mut v = Vec::new();
    while !ai.is_null() {
        // SAFETY: a node of getaddrinfo's list.
        let a = unsafe { &*ai };
        let addr = if a.ai_addr.is_null() {
            Vec::new()
        } else {
            // SAFETY: `ai_addrlen` bytes at `ai_addr`.
            unsafe { std::slice::from_raw_parts(a.ai_addr.cast::<u8>(), a.ai_addrlen as usize) }
                .to_vec()
        };
        v.push((a.ai_family, a.ai_socktype, a.ai_protocol, addr));
        ai = a.ai_next;
    }
    v
}

#[test]
fn host_names_match() {
    let started = Instant::now();
    let mut cmp = Cmp::new("host names");
    for name in [
        "localhost",
        "127.0.0.1",
        "::1",
        "ip6-localhost",
        "nosuch.invalid",
        "",
        "0",
        "10.1.2.3",
    ] {
        let c = cstr(name.as_bytes());
        let r: Vec<Option<Vec<u32>>> = apis()
            .iter()
            .map(|a| {
                // glibc's gethostbyname has one static result for both libraries.
                let _g = lock();
                // SAFETY: a NUL-terminated name; the list is read before the next call.
                unsafe {
                    let l = (a.pcap_nametoaddr)(c.as_ptr());
                    if l.is_null() {
                        return None;
                    }
                    let mut v = Vec::new();
                    let mut p = l;
                    while !(*p).is_null() {
                        v.push((*p).read_unaligned());
                        p = p.add(1);
                    }
                    Some(v)
                }
            })
            .collect();
        cmp.eq(format!("pcap_nametoaddr({name:?})"), &r[0], &r[1]);
        let r: Vec<Option<_>> = apis()
            .iter()
            .map(|a| {
                // SAFETY: a NUL-terminated name; the list is freed with freeaddrinfo.
                unsafe {
                    let ai = (a.pcap_nametoaddrinfo)(c.as_ptr());
                    if ai.is_null() {
                        return None;
                    }
                    let v = addrinfo_list(ai);
                    libc::freeaddrinfo(ai);
                    Some(v)
                }
            })
            .collect();
        cmp.eq(format!("pcap_nametoaddrinfo({name:?})"), &r[0], &r[1]);
    }
    cmp.finish(started);
}

// ---------------------------------------------------------------------------------------------
// Ethernet addresses.

/// One `pcap_next_etherent` result: the address and name, or `None`; and `ftell` after it.
type EtherRead = (Option<([u8; 6], Vec<u8>)>, c_long);

/// Reads `text` to its end (and twice more) with `pcap_next_etherent` through `fmemopen`.
fn read_ethers(a: &Api, text: &[u8]) -> Option<Vec<EtherRead>> {
    let mut buf = text.to_vec();
    let _g = lock();
    // SAFETY: `buf` outlives the stream, which is closed below.
    unsafe {
        let fp = libc::fmemopen(buf.as_mut_ptr().cast(), buf.len(), c"r".as_ptr());
        if fp.is_null() {
            return None;
        }
        let mut out = Vec::new();
        let mut nulls = 0;
        while nulls < 3 && out.len() < 1000 {
            let e = (a.pcap_next_etherent)(fp);
            let got = e
                .as_ref()
                .map(|e| (e.addr, CStr::from_ptr(e.name.as_ptr()).to_bytes().to_vec()));
            if got.is_none() {
                nulls += 1;
            }
            out.push((got, libc::ftell(fp)));
        }
        libc::fclose(fp);
        Some(out)
    }
}

#[test]
fn ethernet_helpers_match() {
    let started = Instant::now();
    let mut cmp = Cmp::new("ethernet");
    // pcap_ether_aton: forms that give exactly six bytes (libpcap leaves the rest of its
    // buffer uninitialised for fewer, and writes past it for more).
    for s in [
        "00:11:22:33:44:55",
        "0:1:2:3:4:5",
        "a:b:c:d:e:f",
        "AA:BB:CC:DD:EE:FF",
        "Ab:cD:eF:01:23:45",
        "00-11-22-33-44-55",
        "0011.2233.4455",
        "00.11.22.33.44.55",
        "001122334455",
        "ff:ff:ff:ff:ff:ff",
        "0:11:2:33:4:55",
        ":1:2:3:4:5:6",
        "1::2:3:4:5:6",
        "1:2.3-4:5:6",
        "g:h:i:j:k:l",
        "G:H:I:J:K:L",
        "1g:2:3:4:5",
        "012:3:4:5:6",
    ] {
        let c = cstr(s.as_bytes());
        let r: Vec<Option<[u8; 6]>> = apis()
            .iter()
            .map(|a| {
                // SAFETY: a NUL-terminated string; six bytes from malloc, freed here.
                unsafe {
                    let e = (a.pcap_ether_aton)(c.as_ptr());
                    (!e.is_null()).then(|| {
                        let mut b = [0u8; 6];
                        ptr::copy_nonoverlapping(e, b.as_mut_ptr(), 6);
                        libc::free(e.cast());
                        b
                    })
                }
            })
            .collect();
        cmp.eq(format!("pcap_ether_aton({s:?})"), &r[0], &r[1]);
    }
    // pcap_ether_hostton: netsift has no ethers table (a documented decision: it always
    // returns null); libpcap reads /etc/ethers, which this machine does not have.
    let have_ethers = Path::new("/etc/ethers").exists();
    for s in ["localhost", "foo", "00:11:22:33:44:55", "", "broadcast"] {
        let c = cstr(s.as_bytes());
        let r: Vec<bool> = apis()
            .iter()
            .map(|a| {
                // SAFETY: a NUL-terminated string; the result is freed.
                unsafe {
                    let e = (a.pcap_ether_hostton)(c.as_ptr());
                    libc::free(e.cast());
                    e.is_null()
                }
            })
            .collect();
        if have_ethers {
            cmp.check(format!("netsift pcap_ether_hostton({s:?}) is null"), r[1]);
        } else {
            cmp.eq(format!("pcap_ether_hostton({s:?}) is null"), &r[0], &r[1]);
        }
    }
    // pcap_next_etherent.
    let long = "n".repeat(130);
    let texts: Vec<Vec<u8>> = vec![
        b"00:11:22:33:44:55 host1\n".to_vec(),
        format!(
            "# comment\n\n00:11:22:33:44:55 host1\n1:2:3 short\n  aa:bb:cc:dd:ee:ff\tspaced # trailing\n\
             zz junk line\n0:1:2:3:4:5:6 seven\n12345 digits\n1:2:3:4:5:6 {long}\n\
             1:2:3:4:5:6 {}\n1:2:3:4:5:6 {}x\nAA:BB:CC:DD:EE:FF UPPER more words\n\
             12:34:56:78:9a:bc last-without-newline",
            "m".repeat(121),
            "m".repeat(120)
        )
        .into_bytes(),
        b"00:11:22:33:44:55 crlf\r\n01:02:03:04:05:06\tcrlf2\r\n\r\n1:2:3\r\n07:08:09:0a:0b:0c\rcr\n"
            .to_vec(),
        b"a:b:c:d:e:f name#hash\n1:2:3:4:5:6 #comment-only\n1:2:3x bad\ng:1 bad\n\
          1:2:3:4:5:6:\n1:2:3:4:5:6:7 x\n"
            .to_vec(),
        b"1:2:3:4:5:6 ok\n9:9 partial-then-bad!\n7 short-after\n".to_vec(),
        b"ab:cd:ef:01:23:45 one\n:not-hex\n-1:2 bad\n 1:2:3:4:5:6\t \tspaces \t after\n".to_vec(),
        b"\n\n\n".to_vec(),
        b"#only a comment".to_vec(),
        b"00:11".to_vec(),
        b"00:11:22:33:44:55".to_vec(),
        b"00:11:22:33:44:55 ".to_vec(),
        b"00:11:22:33:44:55 \n".to_vec(),
        b"00:11:22:33:44:55 name".to_vec(),
        b"00:11:22:33:44:55 name ".to_vec(),
        b"00:11:22:33:44:55 name \n".to_vec(),
        b"0:0:0:0:0:0 a\n0:0:0:0:0:0 b\n0:0:0:0:0:0 c\n0:0:0:0:0:0 d\n".to_vec(),
        b"\t \t\n1:2:3:4:5:6 a b c d e f\n".to_vec(),
        b"1:2:3:4:5:6 \xc3\xa9t\xc3\xa9\n1:2:3:4:5:6 \x01\x02\n".to_vec(),
        b"1:2:3:4:5:6 nul\0after\n2:2:2:2:2:2 z\n".to_vec(),
    ];
    for (i, t) in texts.iter().enumerate() {
        let r: Vec<_> = apis().iter().map(|a| read_ethers(a, t)).collect();
        if r[0].is_none() && r[1].is_none() {
            continue;
        }
        cmp.eq(
            format!(
                "pcap_next_etherent over text {i} ({:?})",
                String::from_utf8_lossy(t)
            ),
            &r[0],
            &r[1],
        );
    }
    cmp.finish(started);
}

// ---------------------------------------------------------------------------------------------
// BPF.

/// `bpf_image` of one instruction in one library.
fn image(a: &Api, i: &BpfInsn, n: c_int) -> String {
    // SAFETY: a valid instruction; the static buffer is read at once (the caller holds the
    // lock).
    text(unsafe { (a.bpf_image)(i, n) })
}

#[test]
fn bpf_image_matches() {
    let started = Instant::now();
    let [deb, ns] = apis();
    let mut cmp = Cmp::new("bpf_image");
    let _g = lock();
    let variants = [(0u32, 0u8, 0u8), (7, 1, 2), (0xffff_ffff, 255, 255)];
    for code in 0..=u16::MAX {
        for &(k, jt, jf) in &variants {
            let i = ins(code, jt, jf, k);
            for n in [0, 7, 254] {
                let (a, b) = (image(deb, &i, n), image(ns, &i, n));
                cmp.eq(format!("bpf_image({i:?}, {n})"), &a, &b);
            }
        }
    }
    // Every value of k the absolute loads print by name (Linux's SKF_AD_* offsets), and around
    // them; other operands that print k signed or in hex.
    let mut ks: Vec<u32> = (0xffff_f000u32..0xffff_f048).collect();
    ks.extend([
        0x8000_0000,
        0x7fff_ffff,
        0xffff_efff,
        0xffff_ff00,
        1_000_000,
        16,
        15,
        32,
    ]);
    let codes: Vec<u16> = (0..=0xffu16).collect();
    for &code in &codes {
        for &k in &ks {
            let i = ins(code, 3, 4, k);
            let (a, b) = (image(deb, &i, 1000), image(ns, &i, 1000));
            cmp.eq(format!("bpf_image({i:?}, 1000)"), &a, &b);
        }
    }
    // A negative n: netsift prints it as 0 (documented decision; libpcap prints the negative
    // number and jump targets computed from it).
    let s = image(ns, &ins(0x15, 1, 2, 0), -5);
    cmp.check(
        format!("netsift bpf_image(jeq, -5) = {s:?}"),
        s.starts_with("(000) jeq "),
    );
    cmp.finish(started);
}

/// `bpf_validate` in both libraries.
fn validate_both(prog: &[BpfInsn], len: c_int) -> [c_int; 2] {
    let p = if prog.is_empty() {
        ptr::null()
    } else {
        prog.as_ptr()
    };
    // SAFETY: `len` (at most the length) instructions, or none for len < 1.
    apis()
        .each_ref()
        .map(|a| unsafe { (a.bpf_validate)(p, len) })
}

/// The opcodes libpcap's interpreter knows (others make it abort).
const KNOWN_OPCODES: &[u16] = &[
    0x06, 0x16, // ret k, ret a
    0x20, 0x28, 0x30, // ld/ldh/ldb [k]
    0x40, 0x48, 0x50, // ld/ldh/ldb [x + k]
    0x80, 0x81, // ld #len, ldx #len
    0xb1, // ldxb 4*([k]&0xf)
    0x00, 0x01, // ld #k, ldx #k
    0x60, 0x61, 0x02, 0x03, // ld M[k], ldx M[k], st, stx
    0x05, // ja
    0x15, 0x25, 0x35, 0x45, 0x1d, 0x2d, 0x3d, 0x4d, // jeq/jgt/jge/jset k and x
    0x04, 0x14, 0x24, 0x34, 0x94, 0x44, 0x54, 0xa4, 0x64, 0x74, // alu k
    0x0c, 0x1c, 0x2c, 0x3c, 0x9c, 0x4c, 0x5c, 0xac, 0x6c, 0x7c, // alu x
    0x84, 0x07, 0x87, // neg, tax, txa
];

#[test]
fn bpf_validate_matches() {
    let started = Instant::now();
    let mut cmp = Cmp::new("bpf_validate");
    let ret = ins(0x06, 0, 0, 0xffff);
    let table: Vec<(&str, Vec<BpfInsn>)> = vec![
        ("ret", vec![ret]),
        ("code 0x90", vec![ins(0x90, 0, 0, 0), ret]),
        ("code 0x0e", vec![ins(0x0e, 0, 0, 0)]),
        ("code 0x47", vec![ins(0x47, 0, 0, 0), ret]),
        ("code 0x0d", vec![ins(0x0d, 0, 0, 0), ret]),
        ("lsh #40", vec![ins(0x64, 0, 0, 40), ret]),
        ("ld M[16]", vec![ins(0x60, 0, 0, 16), ret]),
        ("ld M[15]", vec![ins(0x60, 0, 0, 15), ret]),
        ("ldx M[16]", vec![ins(0x61, 0, 0, 16), ret]),
        ("st M[16]", vec![ins(0x02, 0, 0, 16), ret]),
        ("stx M[15]", vec![ins(0x03, 0, 0, 15), ret]),
        ("alu op 0xf0", vec![ins(0xf4, 0, 0, 1), ret]),
        ("alu op 0xb0", vec![ins(0xb4, 0, 0, 1), ret]),
        ("jmp op 0x50", vec![ins(0x55, 0, 0, 0), ret]),
        ("div #0", vec![ins(0x34, 0, 0, 0), ret]),
        ("mod #0", vec![ins(0x94, 0, 0, 0), ret]),
        ("div x", vec![ins(0x3c, 0, 0, 0), ret]),
        ("ld mode 0xc0", vec![ins(0xc0, 0, 0, 0), ret]),
        ("ld mode 0xe0", vec![ins(0xe0, 0, 0, 0), ret]),
        ("ldx mode 0xe1", vec![ins(0xe1, 0, 0, 0), ret]),
        ("ja backward", vec![ret, ins(0x05, 0, 0, 0xffff_fffe), ret]),
        ("ja to self+1 past end", vec![ins(0x05, 0, 0, 1), ret]),
        ("ja 0", vec![ins(0x05, 0, 0, 0), ret]),
        ("jeq jt out", vec![ins(0x15, 1, 0, 0), ret]),
        ("jeq jf out", vec![ins(0x15, 0, 1, 0), ret]),
        ("jeq in", vec![ins(0x15, 1, 0, 0), ret, ret]),
        ("last not ret", vec![ret, ins(0x00, 0, 0, 0)]),
        ("ret a", vec![ins(0x16, 0, 0, 0)]),
        ("high byte", vec![ins(0x1206, 0, 0, 0)]),
        ("high byte ld", vec![ins(0xff00, 0, 0, 0), ret]),
        ("misc 0xf7", vec![ins(0xf7, 0, 0, 0), ret]),
    ];
    for (name, prog) in &table {
        let r = validate_both(prog, prog.len() as c_int);
        cmp.eq(format!("bpf_validate({name})"), &r[0], &r[1]);
    }
    for len in [0, -1, c_int::MIN] {
        let r = validate_both(&[], len);
        cmp.eq(format!("bpf_validate(null, {len})"), &r[0], &r[1]);
        let r = validate_both(&[ret], len);
        cmp.eq(format!("bpf_validate([ret], {len})"), &r[0], &r[1]);
    }
    // Random short programs: random codes (all 16 bits) or known ones, k near the limits,
    // jumps near the end; sometimes validated with a shorter length.
    let mut rng = Rng::new(0x5eed_0001);
    let (mut accepted, n) = (0, 100_000);
    for _ in 0..n {
        let len = 1 + rng.below(6) as usize;
        let prog: Vec<BpfInsn> = (0..len)
            .map(|i| {
                let code = match rng.below(4) {
                    0 => rng.next_u32() as u16,
                    1 => rng.below(256) as u16,
                    _ => *rng.pick(KNOWN_OPCODES),
                };
                let k = match rng.below(6) {
                    0 => rng.next_u32(),
                    1 => rng.below(20) as u32,
                    2 => (len - i) as u32 - rng.below(3) as u32,
                    3 => u32::MAX - rng.below(8) as u32,
                    4 => 0,
                    _ => 15 + rng.below(3) as u32,
                };
                let j = |rng: &mut Rng| match rng.below(3) {
                    0 => rng.below(256) as u8,
                    _ => (len - i).saturating_sub(1 + rng.below(3) as usize) as u8,
                };
                let (jt, jf) = (j(&mut rng), j(&mut rng));
                let mut insn = ins(code, jt, jf, k);
                if i == len - 1 && rng.chance(60, 100) {
                    insn.code = if rng.chance(50, 100) { 0x06 } else { 0x16 };
                }
                insn
            })
            .collect();
        let l = if rng.chance(10, 100) {
            rng.below(len as u64) as c_int
        } else {
            len as c_int
        };
        let r = validate_both(&prog, l);
        accepted += r[0];
        cmp.eq(format!("bpf_validate({prog:?}, {l})"), &r[0], &r[1]);
    }
    println!("bpf_validate: {accepted} of {n} random programs accepted by libpcap");
    cmp.finish(started);
}

/// Packets of the shared Ethernet captures: at most `per_file` from each, `max` in all.
fn ethernet_packets(per_file: usize, max: usize) -> Vec<(Vec<u8>, u32)> {
    let mut out = Vec::new();
    for f in shared_captures() {
        let Ok(mut r) = CaptureReader::open(&f) else {
            continue;
        };
        if r.link_type() != Some(LinkType::ETHERNET) {
            continue;
        }
        let mut n = 0;
        while let Some(Ok(p)) = r.next_packet() {
            if p.link_type != LinkType::ETHERNET {
                continue;
            }
            out.push((p.data.to_vec(), p.wire_len));
            n += 1;
            if n >= per_file || out.len() >= max {
                break;
            }
        }
        if out.len() >= max {
            break;
        }
    }
    assert!(out.len() > 1000, "only {} Ethernet packets", out.len());
    out
}

/// Filters compiled by libpcap's own `pcap_compile` for the `bpf_filter` comparison.
const EXPRESSIONS: &[&str] = &[
    "tcp port 80",
    "udp",
    "ip",
    "ip6",
    "arp",
    "icmp",
    "icmp6",
    "host 10.0.0.1",
    "net 192.168.0.0/16",
    "port 53",
    "tcp port 80 or tcp port 443",
    "udp port 53 and not src host 10.0.0.1",
    "ip6 protochain 6",
    "ip protochain 17",
    "ip6 protochain 58",
    "vlan and udp",
    "vlan 100",
    "vlan and vlan",
    "mpls",
    "pppoes and ip",
    "len > 100",
    "len <= 64",
    "greater 200",
    "less 60",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
    "ip[0] & 0xf != 5",
    "ip[2:2] > 576",
    "ip[6:2] & 0x1fff = 0",
    "ether broadcast",
    "ether multicast",
    "ether proto 0x88cc",
    "ip multicast",
    "ip6 multicast",
    "portrange 1-1024",
    "tcp portrange 6000-6010",
    "src net 10.0.0.0/8",
    "dst port 22",
    "icmp[icmptype] = icmp-echo",
    "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420",
    "udp[8:4] = 0x12345678",
    "proto 47",
    "ip6 and tcp port 80",
    "not ip and not ip6",
    "geneve",
    "ether host ff:ff:ff:ff:ff:ff",
    "ip[8] < 64",
    "ip6[6] = 58",
    "len - 14 > 100",
    "ip[2:2] / 4 > 10",
    "ip[2:2] / ip[9] > 10",
    "ip[2:2] % ip[8] = 1",
    "ip[2:2] % 7 = 3",
    "ip[0] << 2 = 20",
    "ip[0] >> 4 = 4",
    "ip[1] * 2 > 10",
    "ip[0] ^ 0x45 = 0",
    "ip[0] | 1 = 0x45",
    "ip[2:2] - ip[0] > 100",
    "ip[ip[0] & 0xf] = 0",
    "ether[len - 1] = 0",
    "llc",
    "stp",
    "decnet",
    "atalk",
    "udp port 4789 and udp[8] & 0x08 = 0x08",
];

/// A program from libpcap's compiler (optimised, netmask unknown), as instructions.
fn compile_with_libpcap(expr: &str, optimize: c_int) -> Option<Vec<BpfInsn>> {
    let deb = &apis()[0];
    let e = cstr(expr.as_bytes());
    // SAFETY: libpcap's own handle and program, freed here.
    unsafe {
        let p = (deb.pcap_open_dead)(1, 262_144);
        let mut prog = BpfProgram {
            bf_len: 0,
            bf_insns: ptr::null_mut(),
        };
        let rc = (deb.pcap_compile)(p, &mut prog, e.as_ptr(), optimize, 0xffff_ffff);
        let out = (rc == 0)
            .then(|| std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize).to_vec());
        if rc != 0 {
            eprintln!(
                "libpcap cannot compile {expr:?} (optimize {optimize}): {}",
                text((deb.pcap_geterr)(p))
            );
        }
        (deb.pcap_freecode)(&mut prog);
        (deb.pcap_close)(p);
        out
    }
}

/// A random program libpcap's interpreter runs without aborting or reading uninitialised
/// memory: known opcodes only, forward jumps that land inside it, a `ret` last. The scratch
/// words used (0–3) are stored first; division and modulo by a constant never divide by 0, and
/// constant shifts stay below 32 (both undefined in C).
fn random_program(rng: &mut Rng) -> Vec<BpfInsn> {
    let body = 1 + rng.below(20) as usize;
    let mut p = vec![
        ins(0x00, 0, 0, rng.below(300) as u32),
        ins(0x02, 0, 0, 0),
        ins(0x02, 0, 0, 1),
        ins(0x01, 0, 0, rng.below(40) as u32),
        ins(0x03, 0, 0, 2),
        ins(0x03, 0, 0, 3),
    ];
    let n = p.len() + body + 1;
    while p.len() < n - 1 {
        let i = p.len();
        let left = (n - 1 - i - 1) as u64; // instructions between the next one and the last
        let code = *rng.pick(KNOWN_OPCODES);
        let k = match code {
            0x60 | 0x61 | 0x02 | 0x03 => rng.below(4) as u32,
            0x34 | 0x94 => 1 + rng.below(9) as u32,
            0x64 | 0x74 => rng.below(32) as u32,
            0x05 => rng.below(left + 1) as u32,
            0x20 | 0x28 | 0x30 | 0xb1 => match rng.below(10) {
                0 => rng.next_u32(),
                1 => 0xffff_f000 + 4 * rng.below(16) as u32,
                2 => rng.below(2000) as u32,
                _ => rng.below(80) as u32,
            },
            0x40 | 0x48 | 0x50 => match rng.below(10) {
                0 => rng.next_u32(),
                _ => rng.below(60) as u32,
            },
            _ => match rng.below(4) {
                0 => rng.next_u32(),
                1 => rng.below(4) as u32,
                _ => rng.below(2000) as u32,
            },
        };
        let (jt, jf) = (
            rng.below(left.min(255) + 1) as u8,
            rng.below(left.min(255) + 1) as u8,
        );
        p.push(ins(code, jt, jf, k));
    }
    p.push(if rng.chance(50, 100) {
        ins(0x16, 0, 0, 0)
    } else {
        ins(0x06, 0, 0, rng.below(2000) as u32)
    });
    p
}

/// Runs `prog` over the packets with `bpf_filter` in both libraries, with the whole capture
/// and with a buffer shorter than the packet.
fn compare_filter(cmp: &mut Cmp, what: &dyn Debug, prog: &[BpfInsn], packets: &[(Vec<u8>, u32)]) {
    let [deb, ns] = apis();
    for (i, (data, wire)) in packets.iter().enumerate() {
        let caplen = data.len() as u32;
        for buflen in [caplen, caplen * 2 / 3] {
            // SAFETY: a program that ends in `ret` on every path; `buflen` readable bytes.
            let (a, b) = unsafe {
                (
                    (deb.bpf_filter)(prog.as_ptr(), data.as_ptr(), *wire, buflen),
                    (ns.bpf_filter)(prog.as_ptr(), data.as_ptr(), *wire, buflen),
                )
            };
            if !cmp.eq(
                format_args!("bpf_filter({what:?}) on packet {i} (buflen {buflen}, wire {wire})"),
                &a,
                &b,
            ) {
                return;
            }
        }
    }
}

#[test]
fn bpf_filter_matches() {
    let started = Instant::now();
    let packets = ethernet_packets(20, 5000);
    let mut cmp = Cmp::new("bpf_filter");
    // A null program accepts everything.
    // SAFETY: libpcap's documented null program.
    let r = apis()
        .each_ref()
        .map(|a| unsafe { (a.bpf_filter)(ptr::null(), packets[0].0.as_ptr(), 60, 60) });
    cmp.eq("bpf_filter(null)", &r[0], &r[1]);
    // Optimised and not: unoptimised programs keep blocks no path reaches.
    let mut compiled = 0;
    for expr in EXPRESSIONS {
        for optimize in [1, 0] {
            let Some(prog) = compile_with_libpcap(expr, optimize) else {
                continue;
            };
            compiled += 1;
            compare_filter(&mut cmp, &(expr, optimize), &prog, &packets);
        }
    }
    let mut rng = Rng::new(0x5eed_0002);
    let nrandom = 10_000;
    for _ in 0..nrandom {
        let prog = random_program(&mut rng);
        let start = rng.below(packets.len() as u64 - 100) as usize;
        compare_filter(&mut cmp, &prog, &prog, &packets[start..start + 100]);
    }
    println!(
        "bpf_filter: {} packets, {compiled} programs compiled by libpcap from {} expressions \
         (optimised and not), {nrandom} random ones",
        packets.len(),
        EXPRESSIONS.len()
    );
    cmp.finish(started);
}

// ---------------------------------------------------------------------------------------------
// Savefiles.

/// What one `pcap_next_ex` gave: its return value, the header and the bytes (for 1), the error
/// text (for -1), and `pcap_bufsize` after it.
#[derive(Debug, PartialEq)]
struct Next {
    rc: c_int,
    hdr: Option<PcapPkthdr>,
    data: Vec<u8>,
    err: Option<String>,
    bufsize: c_int,
}

/// One open handle, or the error.
struct Opened {
    p: *mut Pcap,
    fp: *mut File,
    err: String,
}

/// The metadata compared after an open.
#[derive(Debug, PartialEq)]
struct Meta {
    datalink: c_int,
    snapshot: c_int,
    version: (c_int, c_int),
    swapped: c_int,
    bufsize: c_int,
    precision: c_int,
    /// `pcap_file` is the stream the handle was opened on.
    file_is_stream: bool,
    /// `pcap_fileno` (-1) or whether it is the stream's descriptor.
    fileno: Result<bool, c_int>,
    /// `pcap_get_selectable_fd` (-1) or whether it is the stream's descriptor.
    selectable: Result<bool, c_int>,
    timeout_null: bool,
}

/// # Safety
/// `o.p` must be an open savefile handle of `a`.
unsafe fn meta(a: &Api, o: &Opened) -> Meta {
    // SAFETY: the caller's handle and its stream.
    unsafe {
        let fd = libc::fileno(o.fp);
        let rel = |v: c_int| if v == -1 { Err(-1) } else { Ok(v == fd) };
        Meta {
            datalink: (a.pcap_datalink)(o.p),
            snapshot: (a.pcap_snapshot)(o.p),
            version: ((a.pcap_major_version)(o.p), (a.pcap_minor_version)(o.p)),
            swapped: (a.pcap_is_swapped)(o.p),
            bufsize: (a.pcap_bufsize)(o.p),
            precision: (a.pcap_get_tstamp_precision)(o.p),
            file_is_stream: (a.pcap_file)(o.p) == o.fp,
            fileno: rel((a.pcap_fileno)(o.p)),
            selectable: rel((a.pcap_get_selectable_fd)(o.p)),
            timeout_null: (a.pcap_get_required_select_timeout)(o.p).is_null(),
        }
    }
}

/// Opens `fp` with `pcap_fopen_offline` (`precision` `None`) or
/// `pcap_fopen_offline_with_tstamp_precision`. On failure the stream is closed here (it stays
/// the caller's in libpcap). Its position then is not compared: netsift's reader reads ahead
/// (in 64 KiB blocks) where libpcap reads exactly the header.
///
/// # Safety
/// `fp` must be an open stream, not used elsewhere.
unsafe fn fopen_offline(a: &Api, fp: *mut File, precision: Option<c_uint>) -> Opened {
    let mut err = [0 as c_char; ERRBUF];
    // SAFETY: the caller's stream; a 256-byte error buffer.
    unsafe {
        let p = match precision {
            None => (a.pcap_fopen_offline)(fp, err.as_mut_ptr()),
            Some(pr) => (a.pcap_fopen_offline_with_tstamp_precision)(fp, pr, err.as_mut_ptr()),
        };
        let mut e = String::new();
        if p.is_null() {
            e = errbuf_text(&err);
            if !fp.is_null() {
                libc::fclose(fp);
            }
        }
        Opened { p, fp, err: e }
    }
}

/// The next packet of a handle.
///
/// # Safety
/// `p` must be an open savefile handle of `a`.
unsafe fn next(a: &Api, p: *mut Pcap) -> Next {
    let mut h: *mut PcapPkthdr = ptr::null_mut();
    let mut d: *const u8 = ptr::null();
    // SAFETY: the caller's handle; the header and bytes are copied before the next call.
    unsafe {
        let rc = (a.pcap_next_ex)(p, &mut h, &mut d);
        let (hdr, data) = if rc == 1 {
            let hdr = *h;
            let data = if hdr.caplen == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(d, hdr.caplen as usize).to_vec()
            };
            (Some(hdr), data)
        } else {
            (None, Vec::new())
        };
        Next {
            rc,
            hdr,
            data,
            err: (rc == -1).then(|| text((a.pcap_geterr)(p))),
            bufsize: (a.pcap_bufsize)(p),
        }
    }
}

/// Compares two opens: the error, or the metadata and every packet; closes the handles (and
/// with them the streams). The number of packets compared.
///
/// # Safety
/// `o` must come from [`fopen_offline`] in libpcap and netsift.
unsafe fn compare_opened(cmp: &mut Cmp, case: &str, o: [Opened; 2]) -> usize {
    let [deb, ns] = apis();
    let ok = [!o[0].p.is_null(), !o[1].p.is_null()];
    let mut packets = 0;
    if cmp.eq(
        format!("{case}: open"),
        &(ok[0], &o[0].err),
        &(ok[1], &o[1].err),
    ) && ok[0]
    {
        // SAFETY: open handles of each library.
        unsafe {
            cmp.eq(
                format!("{case}: metadata"),
                &meta(deb, &o[0]),
                &meta(ns, &o[1]),
            );
            loop {
                let (a, b) = (next(deb, o[0].p), next(ns, o[1].p));
                let same = cmp.eq(format!("{case}: packet {packets}"), &a, &b);
                if !same || a.rc != 1 {
                    if same && a.rc == -2 {
                        // At the end both streams were read to the end.
                        let pos = [libc::ftell(o[0].fp), libc::ftell(o[1].fp)];
                        cmp.eq(format!("{case}: position at the end"), &pos[0], &pos[1]);
                        // And the end stays the end. (After an error libpcap reads on from
                        // wherever the bad record left the stream; netsift's reader stops, so
                        // that is not compared.)
                        let (a, b) = (next(deb, o[0].p), next(ns, o[1].p));
                        cmp.eq(format!("{case}: read after the end"), &a, &b);
                    }
                    break;
                }
                packets += 1;
            }
        }
    }
    for (a, o) in apis().iter().zip(&o) {
        if !o.p.is_null() {
            // SAFETY: an open handle, closed once (with its stream).
            unsafe { (a.pcap_close)(o.p) };
        }
    }
    packets
}

/// Opens the file at `path` in both libraries (each its own stream), `skip` bytes in, read
/// (`fread`) or sought (`fseek`).
fn open_path_both(path: &Path, precision: Option<c_uint>, skip: usize, seek: bool) -> [Opened; 2] {
    let c = cstr(path.to_str().unwrap().as_bytes());
    apis().each_ref().map(|a| {
        // SAFETY: a NUL-terminated path; the stream goes to the handle.
        unsafe {
            let fp = libc::fopen(c.as_ptr(), c"rb".as_ptr());
            assert!(!fp.is_null(), "fopen {}", path.display());
            if skip > 0 {
                if seek {
                    libc::fseek(fp, skip as c_long, libc::SEEK_SET);
                } else {
                    let mut junk = vec![0u8; skip];
                    libc::fread(junk.as_mut_ptr().cast(), 1, skip, fp);
                }
            }
            fopen_offline(a, fp, precision)
        }
    })
}

#[test]
fn savefiles_match() {
    let started = Instant::now();
    let files = shared_captures();
    let mut cmp = Cmp::new("savefiles");
    let (mut nfiles, mut packets) = (0, 0);
    // Every shared capture: the whole comparison takes well under a second in release builds.
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy();
        nfiles += 1;
        // pcap_fopen_offline, then pcap_fopen_offline_with_tstamp_precision in micro- and
        // nanoseconds.
        for precision in [None, Some(0), Some(1)] {
            let case = match precision {
                None => name.to_string(),
                Some(p) => format!("{name} (precision {p})"),
            };
            // SAFETY: streams opened for the call.
            packets +=
                unsafe { compare_opened(&mut cmp, &case, open_path_both(f, precision, 0, false)) };
        }
    }
    println!("savefiles: {nfiles} files opened 3 times, {packets} packets read in each library");
    cmp.finish(started);
}

/// A pcap file header in this machine's byte order.
fn pcap_header(magic: u32, major: u16, minor: u16, snaplen: u32, linktype: u32) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend(magic.to_ne_bytes());
    h.extend(major.to_ne_bytes());
    h.extend(minor.to_ne_bytes());
    h.extend([0u8; 8]);
    h.extend(snaplen.to_ne_bytes());
    h.extend(linktype.to_ne_bytes());
    h
}

/// A record in this machine's byte order.
fn pcap_record(sec: u32, frac: u32, data: &[u8], wire: u32) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend(sec.to_ne_bytes());
    r.extend(frac.to_ne_bytes());
    r.extend((data.len() as u32).to_ne_bytes());
    r.extend(wire.to_ne_bytes());
    r.extend(data);
    r
}

/// The first shared capture (by name) whose name contains `part`.
fn capture(part: &str) -> PathBuf {
    shared_captures()
        .into_iter()
        .find(|p| p.to_string_lossy().contains(part))
        .unwrap_or_else(|| panic!("no shared capture named like {part}"))
}

/// `fmemopen` streams over `bytes`, one per library (the buffers are returned: they must
/// outlive the handles).
fn fmemopen_both(bytes: &[u8], precision: Option<c_uint>) -> (Vec<Vec<u8>>, [Opened; 2]) {
    let mut bufs = vec![bytes.to_vec(), bytes.to_vec()];
    let ptrs: Vec<*mut c_void> = bufs.iter_mut().map(|b| b.as_mut_ptr().cast()).collect();
    let mut i = 0;
    let o = apis().each_ref().map(|a| {
        // SAFETY: the buffer lives as long as the returned vector.
        let fp = unsafe { libc::fmemopen(ptrs[i], bytes.len(), c"r".as_ptr()) };
        i += 1;
        assert!(!fp.is_null(), "fmemopen");
        // SAFETY: a fresh stream.
        unsafe { fopen_offline(a, fp, precision) }
    });
    (bufs, o)
}

#[test]
fn savefile_edges_match() {
    let started = Instant::now();
    let dir = tmp("edges");
    let mut cmp = Cmp::new("savefile edges");
    // A null stream.
    // SAFETY: libpcap refuses a null stream before using it.
    let o = apis()
        .each_ref()
        .map(|a| unsafe { fopen_offline(a, ptr::null_mut(), None) });
    // SAFETY: as compare_opened wants.
    unsafe { compare_opened(&mut cmp, "null stream", o) };
    let o = apis()
        .each_ref()
        .map(|a| unsafe { fopen_offline(a, ptr::null_mut(), Some(2)) });
    // SAFETY: as above.
    unsafe { compare_opened(&mut cmp, "null stream, precision 2", o) };

    let pcap = std::fs::read(capture("tcpdump/dns_tcp.pcap")).unwrap();
    let pcapng = std::fs::read(capture("tcpdump/isis_sr.pcapng")).unwrap();
    let mut samples: Vec<(String, Vec<u8>)> = vec![
        ("pcap".into(), pcap.clone()),
        ("pcapng".into(), pcapng.clone()),
        (
            "garbage".into(),
            b"this is not a capture file at all".to_vec(),
        ),
        ("short".into(), b"\xd4\xc3".to_vec()),
        ("empty".into(), Vec::new()),
    ];
    // Files written here: versions, odd snapshot lengths and records, both byte orders.
    let frame = vec![0x5au8; 90];
    for (name, magic, major, minor, snap, lt) in [
        ("v2.3", 0xa1b2_c3d4u32, 2u16, 3u16, 65535u32, 1u32),
        ("v2.2", 0xa1b2_c3d4, 2, 2, 65535, 1),
        ("v2.5", 0xa1b2_c3d4, 2, 5, 65535, 1),
        ("v1.0", 0xa1b2_c3d4, 1, 0, 65535, 1),
        ("v543", 0xa1b2_c3d4, 543, 0, 65535, 1),
        ("nano", 0xa1b2_3c4d, 2, 4, 65535, 1),
        ("kuznetzov", 0xa1b2_cd34, 2, 4, 65535, 1),
        ("snap 0", 0xa1b2_c3d4, 2, 4, 0, 1),
        ("snap 40", 0xa1b2_c3d4, 2, 4, 40, 1),
        ("snap 1000", 0xa1b2_c3d4, 2, 4, 1000, 1),
        ("snap 5000", 0xa1b2_c3d4, 2, 4, 5000, 1),
        ("snap huge", 0xa1b2_c3d4, 2, 4, 0x7fff_ffff, 1),
        ("snap negative", 0xa1b2_c3d4, 2, 4, 0x8000_0000, 1),
        ("linktype ext", 0xa1b2_c3d4, 2, 4, 65535, 0x0400_0001),
        ("linktype 101", 0xa1b2_c3d4, 2, 4, 65535, 101),
    ] {
        let mut f = pcap_header(magic, major, minor, snap, lt);
        for (i, len) in [60usize, 90, 30, 3000, 0, 70_000, 200]
            .into_iter()
            .enumerate()
        {
            let data: Vec<u8> = (0..len).map(|b| (b * 7 + i) as u8).collect();
            let extra = if magic == 0xa1b2_cd34 { 8 } else { 0 };
            let mut r = pcap_record(i as u32, 500 + i as u32, &data, len as u32 + 4);
            // A Kuznetzov record header is 8 bytes longer.
            r.splice(16..16, std::iter::repeat_n(0u8, extra));
            f.extend(r);
        }
        samples.push((name.to_string(), f));
    }
    // pcapng: an interface with a snapshot length of 64 and packets longer than it, in an
    // enhanced and a simple packet block.
    let block = |ty: u32, body: &[u8]| {
        let total = (12 + body.len().next_multiple_of(4)) as u32;
        let mut b = Vec::new();
        b.extend(ty.to_ne_bytes());
        b.extend(total.to_ne_bytes());
        b.extend(body);
        b.resize(total as usize - 4, 0);
        b.extend(total.to_ne_bytes());
        b
    };
    let mut shb = 0x1a2b_3c4du32.to_ne_bytes().to_vec();
    shb.extend(1u16.to_ne_bytes());
    shb.extend(0u16.to_ne_bytes());
    shb.extend([0xff; 8]);
    let mut idb = 1u16.to_ne_bytes().to_vec();
    idb.extend(0u16.to_ne_bytes());
    idb.extend(64u32.to_ne_bytes());
    let mut epb = Vec::new();
    for w in [0u32, 0, 1_000_000, frame.len() as u32, frame.len() as u32] {
        epb.extend(w.to_ne_bytes());
    }
    epb.extend(&frame);
    let mut spb = (frame.len() as u32).to_ne_bytes().to_vec();
    spb.extend(&frame);
    for (name, packet) in [
        ("pcapng spb", block(3, &spb)),
        ("pcapng epb", block(6, &epb)),
    ] {
        let mut f = block(0x0a0d_0d0a, &shb);
        f.extend(block(1, &idb));
        f.extend(packet);
        samples.push((name.to_string(), f));
    }
    // Both byte orders of one file.
    let mut be = Vec::new();
    be.extend(0xa1b2_c3d4u32.to_be_bytes());
    be.extend(2u16.to_be_bytes());
    be.extend(4u16.to_be_bytes());
    be.extend([0u8; 8]);
    be.extend(1500u32.to_be_bytes());
    be.extend(1u32.to_be_bytes());
    for i in 0..3u32 {
        be.extend(i.to_be_bytes());
        be.extend(0u32.to_be_bytes());
        be.extend((frame.len() as u32).to_be_bytes());
        be.extend((frame.len() as u32).to_be_bytes());
        be.extend(&frame);
    }
    samples.push(("big-endian".into(), be));

    let mut cases = 0;
    for (name, bytes) in &samples {
        let path = dir.join(format!("{}.bin", name.replace(' ', "_")));
        std::fs::write(&path, bytes).unwrap();
        for precision in [None, Some(0), Some(1), Some(2), Some(1000)] {
            // SAFETY: streams opened for the call.
            unsafe {
                let case = format!("{name} (precision {precision:?})");
                compare_opened(&mut cmp, &case, open_path_both(&path, precision, 0, false));
                cases += 1;
            }
        }
        // The same through pcap_open_offline_with_tstamp_precision, for its error texts.
        for precision in [0, 1, 2] {
            let c = cstr(path.to_str().unwrap().as_bytes());
            let r: Vec<(bool, String)> = apis()
                .iter()
                .map(|a| {
                    let mut err = [0 as c_char; ERRBUF];
                    // SAFETY: a NUL-terminated path and an error buffer.
                    unsafe {
                        let p = (a.pcap_open_offline_with_tstamp_precision)(
                            c.as_ptr(),
                            precision,
                            err.as_mut_ptr(),
                        );
                        if p.is_null() {
                            (
                                false,
                                errbuf_text(&err).replace(path.to_str().unwrap(), "FILE"),
                            )
                        } else {
                            (a.pcap_close)(p);
                            (true, String::new())
                        }
                    }
                })
                .collect();
            cmp.eq(
                format!("pcap_open_offline_with_tstamp_precision({name}, {precision})"),
                &r[0],
                &r[1],
            );
        }
        if bytes.is_empty() {
            continue;
        }
        // A stream positioned after junk, by fseek and by fread (then the bytes are in the
        // stream's buffer: a reader of the descriptor would miss them).
        let mut junk = b"JUNK-JUNK".to_vec();
        junk.extend(bytes);
        let jpath = dir.join(format!("{}.junk", name.replace(' ', "_")));
        std::fs::write(&jpath, &junk).unwrap();
        for seek in [true, false] {
            // SAFETY: streams opened for the call.
            unsafe {
                let case = format!("{name} after 9 junk bytes (fseek {seek})");
                compare_opened(&mut cmp, &case, open_path_both(&jpath, None, 9, seek));
            }
        }
        // fmemopen streams (no descriptor).
        let (bufs, o) = fmemopen_both(bytes, None);
        // SAFETY: the buffers outlive the handles.
        unsafe { compare_opened(&mut cmp, &format!("{name} in fmemopen"), o) };
        drop(bufs);
        cases += 3;
    }
    // Prefixes: every one up to 300 bytes, then every 61st up to 3000, then every 4999th.
    let cut_samples: Vec<(&str, &Vec<u8>)> = samples
        .iter()
        .filter(|(n, _)| {
            [
                "pcap",
                "pcapng",
                "snap 40",
                "kuznetzov",
                "v2.3",
                "nano",
                "big-endian",
            ]
            .contains(&n.as_str())
        })
        .map(|(n, b)| (n.as_str(), b))
        .collect();
    for (name, bytes) in cut_samples {
        let cuts: Vec<usize> = (0..300.min(bytes.len()))
            .chain((300..3000.min(bytes.len())).step_by(61))
            .chain((3000..bytes.len()).step_by(4999))
            .collect();
        for cut in cuts {
            let path = dir.join(format!("cut-{}", name.replace(' ', "_")));
            std::fs::write(&path, &bytes[..cut]).unwrap();
            // SAFETY: streams opened for the call.
            unsafe {
                let case = format!("{name} cut at {cut}");
                compare_opened(&mut cmp, &case, open_path_both(&path, None, 0, false));
            }
            cases += 1;
        }
    }
    println!("savefile edges: {cases} opens");
    cmp.finish(started);
}

// ---------------------------------------------------------------------------------------------
// Dumps.

/// The packets appended in the dump cases (nanosecond fractions on nanosecond handles).
fn dump_packets() -> Vec<(PcapPkthdr, Vec<u8>)> {
    (0..3u32)
        .map(|i| {
            let data: Vec<u8> = (0..(60 + 40 * i)).map(|b| (b * 3 + i) as u8).collect();
            let hdr = PcapPkthdr {
                ts: Timeval {
                    tv_sec: 1_700_000_000 + i64::from(i),
                    tv_usec: 123_456 + i64::from(i),
                },
                caplen: data.len() as u32,
                len: data.len() as u32 + 10,
            };
            (hdr, data)
        })
        .collect()
}

#[test]
fn dump_open_append_matches() {
    let started = Instant::now();
    let mut cmp = Cmp::new("pcap_dump_open_append");
    // Two directories whose paths have the same length: each library appends to its own copy
    // of a file, and error texts are compared with the path replaced.
    let dirs = [tmp("append-d"), tmp("append-n")];
    let micro = 0xa1b2_c3d4u32;
    let nano = 0xa1b2_3c4du32;
    let mut with_records = pcap_header(micro, 2, 4, 65535, 1);
    with_records.extend(pcap_record(1, 2, &[1u8; 50], 50));
    with_records.extend(pcap_record(3, 4, &[2u8; 70], 80));
    let mut nano_records = pcap_header(nano, 2, 4, 65535, 1);
    nano_records.extend(pcap_record(1, 999_999_999, &[1u8; 50], 50));
    let swap = |v: Vec<u8>| -> Vec<u8> {
        let mut v = v;
        v[..4].reverse();
        v
    };
    let pcapng = std::fs::read(capture("tcpdump/isis_sr.pcapng")).unwrap();
    enum Contents {
        Missing,
        Bytes(Vec<u8>),
        Directory,
    }
    use Contents::*;
    let h = |magic: u32, major: u16, minor: u16, snap: u32, lt: u32| {
        Bytes(pcap_header(magic, major, minor, snap, lt))
    };
    let kuz = 0xa1b2_cd34u32;
    // (name, contents, link type, snapshot length, precision)
    let cases: Vec<(&str, Contents, c_int, c_int, c_uint)> = vec![
        ("missing", Missing, 1, 65535, 0),
        ("missing-nano", Missing, 1, 65535, 1),
        ("empty", Bytes(Vec::new()), 1, 65535, 0),
        ("match", Bytes(with_records.clone()), 1, 65535, 0),
        ("header-only", h(micro, 2, 4, 65535, 1), 1, 65535, 0),
        ("match-nano", Bytes(nano_records.clone()), 1, 65535, 1),
        ("linktype", h(micro, 2, 4, 65535, 101), 1, 65535, 0),
        // DLT 101 is no DLT (LINKTYPE_RAW is DLT 12 on Linux), nor is 14.
        ("linktype-101", h(micro, 2, 4, 65535, 101), 101, 65535, 0),
        ("linktype-raw", h(micro, 2, 4, 65535, 101), 12, 65535, 0),
        ("linktype-14", Missing, 14, 65535, 0),
        (
            "linktype-ext",
            h(micro, 2, 4, 65535, 0x0400_0001),
            1,
            65535,
            0,
        ),
        ("snaplen", h(micro, 2, 4, 1500, 1), 1, 65535, 0),
        ("snaplen-match", h(micro, 2, 4, 1500, 1), 1, 1500, 0),
        (
            "nano-file-micro-handle",
            Bytes(nano_records.clone()),
            1,
            65535,
            0,
        ),
        (
            "micro-file-nano-handle",
            Bytes(with_records.clone()),
            1,
            65535,
            1,
        ),
        ("swapped", Bytes(swap(with_records.clone())), 1, 65535, 0),
        (
            "swapped-nano",
            Bytes(swap(nano_records.clone())),
            1,
            65535,
            1,
        ),
        ("v2.3", h(micro, 2, 3, 65535, 1), 1, 65535, 0),
        ("v2.2", h(micro, 2, 2, 65535, 1), 1, 65535, 0),
        ("v3.4", h(micro, 3, 4, 65535, 1), 1, 65535, 0),
        ("pcapng", Bytes(pcapng), 1, 65535, 0),
        ("ten-bytes", Bytes(with_records[..10].to_vec()), 1, 65535, 0),
        ("23-bytes", Bytes(with_records[..23].to_vec()), 1, 65535, 0),
        ("one-byte", Bytes(vec![0xd4]), 1, 65535, 0),
        ("kuznetzov", h(kuz, 2, 4, 65535, 1), 1, 65535, 0),
        (
            "kuznetzov-swapped",
            Bytes(swap(pcap_header(kuz, 2, 4, 65535, 1))),
            1,
            65535,
            0,
        ),
        ("navtel", h(0xa12b_3c4d, 2, 4, 65535, 1), 1, 65535, 0),
        (
            "garbage",
            Bytes(b"garbage garbage garbage garbage".to_vec()),
            1,
            65535,
            0,
        ),
        ("directory", Directory, 1, 65535, 0),
        ("no-linktype", Missing, 9999, 65535, 0),
    ];
    let packets = dump_packets();
    let n = cases.len();
    for (name, contents, dlt, snap, prec) in cases {
        let paths = dirs.each_ref().map(|d| d.join(format!("{name}.pcap")));
        for p in &paths {
            match &contents {
                Missing => {}
                Bytes(b) => std::fs::write(p, b).unwrap(),
                Directory => std::fs::create_dir(p).unwrap(),
            }
        }
        let mut results = Vec::new();
        for (a, path) in apis().iter().zip(&paths) {
            let c = cstr(path.to_str().unwrap().as_bytes());
            // SAFETY: handles and dumpers of one library, closed here.
            let r = unsafe {
                let p = (a.pcap_open_dead_with_tstamp_precision)(dlt, snap, prec);
                let d = (a.pcap_dump_open_append)(p, c.as_ptr());
                let r = if d.is_null() {
                    let e = text((a.pcap_geterr)(p)).replace(path.to_str().unwrap(), "FILE");
                    (Err(e), Vec::new())
                } else {
                    let mut tells = vec![(a.pcap_dump_ftell)(d)];
                    for (h, data) in &packets {
                        (a.pcap_dump)(d.cast(), h, data.as_ptr());
                        tells.push((a.pcap_dump_ftell)(d));
                    }
                    tells.push(c_long::from((a.pcap_dump_flush)(d)));
                    tells.push((a.pcap_dump_ftell)(d));
                    (a.pcap_dump_close)(d);
                    (Ok(tells), std::fs::read(path).unwrap_or_default())
                };
                (a.pcap_close)(p);
                r
            };
            let after = std::fs::metadata(path).ok().map(|m| (m.is_dir(), m.len()));
            results.push((r, after));
        }
        cmp.eq(
            format!("{name}: result and ftell"),
            &results[0].0.0,
            &results[1].0.0,
        );
        cmp.eq(
            format!("{name}: file bytes"),
            &results[0].0.1,
            &results[1].0.1,
        );
        cmp.eq(
            format!("{name}: file afterwards"),
            &results[0].1,
            &results[1].1,
        );
    }
    // A null file name.
    let r: Vec<(bool, String)> = apis()
        .iter()
        .map(|a| {
            // SAFETY: libpcap checks the name for null before using it.
            unsafe {
                let p = (a.pcap_open_dead)(1, 65535);
                let d = (a.pcap_dump_open_append)(p, ptr::null());
                let e = text((a.pcap_geterr)(p));
                if !d.is_null() {
                    (a.pcap_dump_close)(d);
                }
                (a.pcap_close)(p);
                (d.is_null(), e)
            }
        })
        .collect();
    cmp.eq("null file name", &r[0], &r[1]);
    println!("pcap_dump_open_append: {} files", n + 1);
    cmp.finish(started);
}

// ---------------------------------------------------------------------------------------------
// Buffer sizes and select timeouts.

#[test]
fn bufsize_and_select_timeout_match() {
    let started = Instant::now();
    let mut cmp = Cmp::new("bufsize/select timeout");
    let lo = c"lo";
    // Not activated: PCAP_ERROR_NOT_ACTIVATED.
    let r: Vec<(c_int, bool)> = apis()
        .iter()
        .map(|a| {
            let mut err = [0 as c_char; ERRBUF];
            // SAFETY: a created handle, closed here.
            unsafe {
                let p = (a.pcap_create)(lo.as_ptr(), err.as_mut_ptr());
                assert!(
                    !p.is_null(),
                    "{}: pcap_create: {}",
                    a.name,
                    errbuf_text(&err)
                );
                let r = (
                    (a.pcap_bufsize)(p),
                    (a.pcap_get_required_select_timeout)(p).is_null(),
                );
                (a.pcap_close)(p);
                r
            }
        })
        .collect();
    cmp.eq("created lo", &r[0], &r[1]);
    cmp.check(
        "netsift: created lo gives PCAP_ERROR_NOT_ACTIVATED",
        r[1].0 == -3,
    );
    for (dlt, snap, prec) in [(1, 65535, 0), (1, 262_144, 1), (101, 96, 0), (1, 0, 0)] {
        let r: Vec<(c_int, bool)> = apis()
            .iter()
            .map(|a| {
                // SAFETY: a dead handle, closed here.
                unsafe {
                    let p = (a.pcap_open_dead_with_tstamp_precision)(dlt, snap, prec);
                    let r = (
                        (a.pcap_bufsize)(p),
                        (a.pcap_get_required_select_timeout)(p).is_null(),
                    );
                    (a.pcap_close)(p);
                    r
                }
            })
            .collect();
        cmp.eq(format!("dead ({dlt}, {snap}, {prec})"), &r[0], &r[1]);
    }
    // Live captures on lo (as root).
    // SAFETY: a plain libc call.
    if unsafe { libc::geteuid() } == 0 {
        for snap in [96, 262_144] {
            for immediate in [0, 1] {
                let r: Vec<(c_int, c_int, bool)> = apis()
                    .iter()
                    .map(|a| {
                        let mut err = [0 as c_char; ERRBUF];
                        // SAFETY: a live handle, closed here.
                        unsafe {
                            let p = (a.pcap_create)(lo.as_ptr(), err.as_mut_ptr());
                            assert!(!p.is_null());
                            (a.pcap_set_snaplen)(p, snap);
                            (a.pcap_set_immediate_mode)(p, immediate);
                            let rc = (a.pcap_activate)(p);
                            let r = (
                                rc,
                                (a.pcap_bufsize)(p),
                                (a.pcap_get_required_select_timeout)(p).is_null(),
                            );
                            (a.pcap_close)(p);
                            r
                        }
                    })
                    .collect();
                cmp.eq(
                    format!("live lo, snaplen {snap}, immediate {immediate}"),
                    &r[0],
                    &r[1],
                );
            }
        }
    } else {
        println!("bufsize: not root, live captures on lo skipped");
    }
    // Offline handles: see savefiles_match (bufsize after the open and after every packet,
    // the select timeout after the open).
    cmp.finish(started);
}
