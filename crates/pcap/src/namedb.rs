//! libpcap's `<pcap/namedb.h>`: names of ports, protocols, networks and Ethernet addresses.
//!
//! libpcap asks the C library, which reads `/etc/services`, `/etc/protocols` and
//! `/etc/networks`; netsift answers from the tables embedded in `netsift_lang::names` (Debian's
//! netbase 6.4), the same ones its filter compiler uses, so that a name means one thing to a
//! program and to its filters. Numbers are parsed by the C library (`getaddrinfo` with
//! `AI_NUMERICSERV`, which reads no file), exactly as libpcap's call parses them. Host names go
//! to the resolver, as in libpcap. `/etc/ethers` is not part of netbase, so the Ethernet host
//! table is empty and `pcap_ether_hostton` finds nothing (as libpcap does on a machine without
//! that file).

use std::ffi::{CStr, c_char, c_int};
use std::ptr;

use netsift_lang::names;

/// `PROTO_UNDEF`: a port number that is the same for TCP and UDP.
const PROTO_UNDEF: c_int = -1;

/// `struct pcap_etherent` (`<pcap/namedb.h>`).
#[repr(C)]
pub struct PcapEtherent {
    /// The address.
    pub addr: [u8; 6],
    /// The NUL-terminated name.
    pub name: [c_char; 122],
}

/// One entry of `eproto_db`: `struct eproto { const char *s; u_short p; }`.
#[repr(C)]
pub struct Eproto {
    /// The name (NUL-terminated), or null at the end of the table.
    pub s: *const c_char,
    /// The Ethertype.
    pub p: u16,
}

/// The table is read-only C data.
#[repr(transparent)]
pub struct EprotoDb(pub [Eproto; 13]);
// SAFETY: the pointers are to static, immutable strings.
unsafe impl Sync for EprotoDb {}

/// `eproto_db`, which libpcap exports: the Ethertype names `pcap_nametoeproto` knows, ending in
/// a null entry. The values are `netsift_lang::names::ether_proto`'s (checked by a test).
#[unsafe(no_mangle)]
pub static eproto_db: EprotoDb = {
    const fn e(s: &'static CStr, p: u16) -> Eproto {
        Eproto { s: s.as_ptr(), p }
    }
    EprotoDb([
        e(c"aarp", 0x80f3),
        e(c"arp", 0x0806),
        e(c"atalk", 0x809b),
        e(c"decnet", 0x6003),
        e(c"ip", 0x0800),
        e(c"ip6", 0x86dd),
        e(c"lat", 0x6004),
        e(c"loopback", 0x9000),
        e(c"mopdl", 0x6001),
        e(c"moprc", 0x6002),
        e(c"rarp", 0x8035),
        e(c"sca", 0x6007),
        Eproto {
            s: ptr::null(),
            p: 0,
        },
    ])
};

/// `pcap_version`, which libpcap exports: the version of libpcap whose interface this library
/// implements. Writable data (`char pcap_version[]` in C, a `D` symbol), as in libpcap: a
/// `static` would be read-only, and a program writing to it would fault.
#[unsafe(no_mangle)]
pub static mut pcap_version: [c_char; 7] = [
    b'1' as c_char,
    b'.' as c_char,
    b'1' as c_char,
    b'0' as c_char,
    b'.' as c_char,
    b'3' as c_char,
    0,
];

/// The name as text, or `None` for a null pointer or bytes that are not UTF-8 (no table holds
/// such a name).
///
/// # Safety
/// `name` must be null or a NUL-terminated string.
unsafe fn text<'a>(name: *const c_char) -> Option<&'a str> {
    if name.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(name) }.to_str().ok()
}

/// The port `getaddrinfo(NULL, name, {AI_NUMERICSERV, SOCK_STREAM})` gives `name` as a number,
/// the C library's own parsing (libpcap's `getaddrinfo` call parses numbers the same way).
fn numeric_port(name: &CStr) -> Option<u16> {
    // SAFETY: zeroed hints are valid; then fields are set.
    let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_family = libc::AF_INET;
    hints.ai_socktype = libc::SOCK_STREAM;
    hints.ai_protocol = libc::IPPROTO_TCP;
    hints.ai_flags = libc::AI_NUMERICSERV;
    let mut res: *mut libc::addrinfo = ptr::null_mut();
    // SAFETY: a NUL-terminated service, valid hints, an out pointer.
    if unsafe { libc::getaddrinfo(ptr::null(), name.as_ptr(), &hints, &mut res) } != 0 {
        return None;
    }
    let mut port = None;
    let mut ai = res;
    while !ai.is_null() {
        // SAFETY: a node of the list getaddrinfo returned.
        let a = unsafe { &*ai };
        if !a.ai_addr.is_null() && c_int::from(unsafe { (*a.ai_addr).sa_family }) == libc::AF_INET {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*a.ai_addr.cast::<libc::sockaddr_in>() };
            port = Some(u16::from_be(sin.sin_port));
            break;
        }
        ai = a.ai_next;
    }
    // SAFETY: the list getaddrinfo returned, freed once.
    unsafe { libc::freeaddrinfo(res) };
    port
}

/// The TCP and UDP ports of a service name or number.
fn ports(name: &CStr) -> (Option<u16>, Option<u16>) {
    if let Some(p) = numeric_port(name) {
        return (Some(p), Some(p));
    }
    name.to_str()
        .ok()
        .filter(|n| !n.is_empty() && !n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(names::service)
        .unwrap_or((None, None))
}

/// `int pcap_nametoport(const char *name, int *port, int *proto)`: the port of a service name
/// or number. 1 and `*proto` 6 (TCP), 17 (UDP) or -1 (the same port for both); 0 if unknown,
/// and nothing is written.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_nametoport(
    name: *const c_char,
    port: *mut c_int,
    proto: *mut c_int,
) -> c_int {
    if name.is_null() {
        return 0;
    }
    // SAFETY: a NUL-terminated string.
    let (tcp, udp) = ports(unsafe { CStr::from_ptr(name) });
    let (p, pr) = match (tcp, udp) {
        (Some(t), Some(u)) if t == u => (t, PROTO_UNDEF),
        (Some(t), _) => (t, libc::IPPROTO_TCP),
        (None, Some(u)) => (u, libc::IPPROTO_UDP),
        (None, None) => return 0,
    };
    // SAFETY: the caller's out pointers (libpcap writes them unchecked too).
    unsafe {
        if !port.is_null() {
            *port = c_int::from(p);
        }
        if !proto.is_null() {
            *proto = pr;
        }
    }
    1
}

/// `int pcap_nametoportrange(const char *name, int *port1, int *port2, int *proto)`: `N-M` as
/// two numbers, or `NAME-NAME` as two services (the first `-` splits them). 1 on success, 0
/// otherwise (the first port and protocol may already be written then, as in libpcap).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_nametoportrange(
    name: *const c_char,
    port1: *mut c_int,
    port2: *mut c_int,
    proto: *mut c_int,
) -> c_int {
    if name.is_null() {
        return 0;
    }
    // SAFETY: a NUL-terminated string.
    let bytes = unsafe { CStr::from_ptr(name) }.to_bytes();
    // libpcap first tries sscanf("%d-%d").
    if let Some((a, b)) = scan_two_ints(bytes) {
        // SAFETY: the caller's out pointers.
        unsafe {
            *port1 = a;
            *port2 = b;
            *proto = PROTO_UNDEF;
        }
        return 1;
    }
    let Some(dash) = bytes.iter().position(|&b| b == b'-') else {
        return 0;
    };
    let (Ok(first), Ok(second)) = (
        std::ffi::CString::new(&bytes[..dash]),
        std::ffi::CString::new(&bytes[dash + 1..]),
    ) else {
        return 0;
    };
    let mut save_proto: c_int = 0;
    // SAFETY: NUL-terminated strings and the caller's out pointers.
    unsafe {
        if pcap_nametoport(first.as_ptr(), port1, proto) == 0 {
            return 0;
        }
        if !proto.is_null() {
            save_proto = *proto;
        }
        if pcap_nametoport(second.as_ptr(), port2, proto) == 0 {
            return 0;
        }
        if !proto.is_null() && *proto != save_proto {
            *proto = PROTO_UNDEF;
        }
    }
    1
}

/// `sscanf(s, "%d-%d", &a, &b) == 2`: optional white space and sign before each number (not
/// before the dash), decimal digits, values wrapped to `int` as glibc stores them.
fn scan_two_ints(s: &[u8]) -> Option<(c_int, c_int)> {
    fn int(s: &[u8]) -> Option<(c_int, &[u8])> {
        let mut i = 0;
        // C's isspace: also the vertical tab, which Rust's is_ascii_whitespace leaves out.
        while i < s.len() && (s[i].is_ascii_whitespace() || s[i] == 0x0b) {
            i += 1;
        }
        let neg = match s.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        // The magnitude, up to 2^63 (beyond it strtol clamps).
        let mut m: u64 = 0;
        let mut overflow = false;
        while i < s.len() && s[i].is_ascii_digit() {
            match m
                .checked_mul(10)
                .and_then(|m| m.checked_add(u64::from(s[i] - b'0')))
            {
                Some(v) => m = v,
                None => overflow = true,
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        // glibc converts with strtol (a 64-bit long, clamped to LONG_MIN..=LONG_MAX on
        // overflow) and stores into int: the low 32 bits.
        let v: i64 = match (neg, overflow) {
            (false, true) => i64::MAX,
            (true, true) => i64::MIN,
            (false, false) => i64::try_from(m).unwrap_or(i64::MAX),
            (true, false) => 0i64.checked_sub_unsigned(m).unwrap_or(i64::MIN),
        };
        Some((v as c_int, &s[i..]))
    }
    let (a, rest) = int(s)?;
    let rest = rest.strip_prefix(b"-")?;
    let (b, _) = int(rest)?;
    Some((a, b))
}

/// `int pcap_nametoproto(const char *str)`: an IP protocol number by name or alias (case
/// sensitive), or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_nametoproto(name: *const c_char) -> c_int {
    // SAFETY: null or a NUL-terminated string.
    unsafe { text(name) }
        .and_then(names::ip_protocol)
        .map_or(-1, |p| p as c_int)
}

/// `int pcap_nametoeproto(const char *s)`: an Ethertype from `eproto_db`, or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_nametoeproto(name: *const c_char) -> c_int {
    // SAFETY: null or a NUL-terminated string.
    unsafe { text(name) }
        .and_then(names::ether_proto)
        .filter(|&v| v > 0xff)
        .map_or(-1, |p| p as c_int)
}

/// `int pcap_nametollc(const char *s)`: an LLC SAP by name (`iso`, `stp`, `ipx`, `netbeui`),
/// or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_nametollc(name: *const c_char) -> c_int {
    // SAFETY: null or a NUL-terminated string.
    unsafe { text(name) }
        .and_then(names::ether_proto)
        .filter(|&v| v <= 0xff)
        .map_or(-1, |p| p as c_int)
}

/// `bpf_u_int32 pcap_nametonetaddr(const char *name)`: a network number by name (case
/// insensitive), or 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_nametonetaddr(name: *const c_char) -> u32 {
    // SAFETY: null or a NUL-terminated string.
    unsafe { text(name) }.and_then(names::network).unwrap_or(0)
}

unsafe extern "C" {
    fn gethostbyname(name: *const c_char) -> *mut libc::hostent;
}

/// `bpf_u_int32 **pcap_nametoaddr(const char *name)`: the IPv4 addresses of a host name, in
/// host byte order, in the C library's static `hostent` (as libpcap returns them); null if the
/// name does not resolve.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_nametoaddr(name: *const c_char) -> *mut *mut u32 {
    if name.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: a NUL-terminated string; glibc's resolver.
    let hp = unsafe { gethostbyname(name) };
    if hp.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: glibc's static entry; h_addr_list is a null-terminated list of 4-byte addresses
    // (gethostbyname gives AF_INET only), converted in place as libpcap does.
    unsafe {
        let list = (*hp).h_addr_list.cast::<*mut u32>();
        let mut p = list;
        while !(*p).is_null() {
            let a = *p;
            a.write_unaligned(u32::from_be(a.read_unaligned()));
            p = p.add(1);
        }
        list
    }
}

/// `struct addrinfo *pcap_nametoaddrinfo(const char *name)`: `getaddrinfo` for a host name
/// (any family, TCP), which the caller releases with `freeaddrinfo`; null on failure.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_nametoaddrinfo(name: *const c_char) -> *mut libc::addrinfo {
    // SAFETY: zeroed hints are valid.
    let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_family = libc::AF_UNSPEC;
    hints.ai_socktype = libc::SOCK_STREAM;
    hints.ai_protocol = libc::IPPROTO_TCP;
    let mut res: *mut libc::addrinfo = ptr::null_mut();
    // SAFETY: the caller's string (or null, which getaddrinfo refuses); valid hints.
    if unsafe { libc::getaddrinfo(name, ptr::null(), &hints, &mut res) } != 0 {
        return ptr::null_mut();
    }
    res
}

/// `u_char *pcap_ether_aton(const char *s)`: six address bytes in memory from `malloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_ether_aton(s: *const c_char) -> *mut u8 {
    if s.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: a NUL-terminated string.
    let bytes = names::pcap_ether_aton(unsafe { CStr::from_ptr(s) }.to_bytes());
    // SAFETY: malloc; the caller frees.
    let e = unsafe { libc::malloc(6) }.cast::<u8>();
    if !e.is_null() {
        // SAFETY: six writable bytes.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), e, 6) };
    }
    e
}

/// `u_char *pcap_ether_hostton(const char *name)`: the address of an Ethernet host name. The
/// table (`/etc/ethers` for libpcap) is empty (see the module documentation): always null.
#[unsafe(no_mangle)]
pub extern "C" fn pcap_ether_hostton(name: *const c_char) -> *mut u8 {
    let _ = name;
    ptr::null_mut()
}

/// The entry `pcap_next_etherent` returns (libpcap's is a static too).
struct EtherentCell(std::cell::UnsafeCell<PcapEtherent>);
// SAFETY: as libpcap's static; the function is not thread-safe in libpcap either.
unsafe impl Sync for EtherentCell {}

static ETHERENT: EtherentCell = EtherentCell(std::cell::UnsafeCell::new(PcapEtherent {
    addr: [0; 6],
    name: [0; 122],
}));

/// `struct pcap_etherent *pcap_next_etherent(FILE *fp)`: the next `ADDRESS NAME` line of an
/// ethers file, read with `getc` as libpcap reads it (the stream is left where libpcap leaves
/// it). Null at the end of the stream — also for a last line without a newline, as in libpcap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pcap_next_etherent(fp: *mut libc::FILE) -> *mut PcapEtherent {
    if fp.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: the static entry, handed out as libpcap hands out its own.
    let e = unsafe { &mut *ETHERENT.0.get() };
    // SAFETY: an open stream.
    match unsafe { next_etherent(fp, e) } {
        Some(()) => e,
        None => ptr::null_mut(),
    }
}

/// The parser behind [`pcap_next_etherent`]; `None` at end of stream.
///
/// # Safety
/// `fp` must be an open stream.
unsafe fn next_etherent(fp: *mut libc::FILE, e: &mut PcapEtherent) -> Option<()> {
    // SAFETY: the caller's stream.
    let getc = || -> Option<u8> {
        let c = unsafe { libc::fgetc(fp) };
        u8::try_from(c).ok()
    };
    // libpcap's skip_space: blanks, tabs and carriage returns.
    let skip_space = || loop {
        match getc() {
            Some(b' ' | b'\t' | b'\r') => {}
            other => return other,
        }
    };
    let skip_line = || loop {
        match getc() {
            Some(b'\n') => return Some(b'\n'),
            None => return None,
            _ => {}
        }
    };
    e.addr = [0; 6];
    e.name = [0; 122];
    loop {
        let mut c = skip_space()?;
        if c == b'\n' {
            continue;
        }
        if !c.is_ascii_hexdigit() {
            skip_line()?;
            continue;
        }
        for i in 0..6 {
            let mut d = names::xdtoi(c);
            c = getc()?;
            if c.is_ascii_hexdigit() {
                d = (d << 4) | names::xdtoi(c);
                c = getc()?;
            }
            e.addr[i] = d;
            if c != b':' {
                break;
            }
            c = getc()?;
        }
        if !matches!(c, b' ' | b'\t' | b'\r' | b'\n') {
            skip_line()?;
            continue;
        }
        c = skip_space()?;
        if c == b'\n' {
            continue;
        }
        if c == b'#' {
            skip_line()?;
            continue;
        }
        let mut n = 0;
        let mut room = e.name.len() - 1;
        loop {
            e.name[n] = c as c_char;
            n += 1;
            c = getc()?;
            room -= 1;
            // A '#' does not end the name (libpcap reads `name#x` as one name).
            if matches!(c, b' ' | b'\t' | b'\r' | b'\n') || room == 0 {
                break;
            }
        }
        e.name[n] = 0;
        if c != b'\n' {
            let _ = skip_line();
        }
        return Some(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eproto_db_is_the_compilers_table() {
        for e in &eproto_db.0[..12] {
            // SAFETY: static C strings.
            let name = unsafe { CStr::from_ptr(e.s) }.to_str().unwrap();
            assert_eq!(names::ether_proto(name), Some(u32::from(e.p)), "{name}");
        }
        assert!(eproto_db.0[12].s.is_null());
    }

    #[test]
    fn ether_aton_forms() {
        assert_eq!(
            names::pcap_ether_aton(b"00:11:22:33:44:55"),
            [0, 0x11, 0x22, 0x33, 0x44, 0x55]
        );
        assert_eq!(names::pcap_ether_aton(b"0.1.2.3.4.5"), [0, 1, 2, 3, 4, 5]);
        assert_eq!(
            names::pcap_ether_aton(b"001122334455"),
            [0, 0x11, 0x22, 0x33, 0x44, 0x55]
        );
        assert_eq!(names::pcap_ether_aton(b"1:2"), [1, 2, 0, 0, 0, 0]);
        // Seven bytes' worth: cut at six.
        assert_eq!(names::pcap_ether_aton(b"1:2:3:4:5:6:7"), [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn two_ints_as_sscanf() {
        assert_eq!(scan_two_ints(b"10-20"), Some((10, 20)));
        assert_eq!(scan_two_ints(b" 1- 2x"), Some((1, 2)));
        assert_eq!(scan_two_ints(b"-5-3"), Some((-5, 3)));
        assert_eq!(scan_two_ints(b"1 -2"), None);
        assert_eq!(scan_two_ints(b"ssh-ftp"), None);
        assert_eq!(scan_two_ints(b"\x0b5-6"), Some((5, 6)));
        // strtol clamps to LONG_MIN and LONG_MAX; int keeps the low 32 bits.
        assert_eq!(scan_two_ints(b"-99999999999999999999-1"), Some((0, 1)));
        assert_eq!(scan_two_ints(b"99999999999999999999-1"), Some((-1, 1)));
        assert_eq!(scan_two_ints(b"2147483648-1"), Some((i32::MIN, 1)));
    }
}
