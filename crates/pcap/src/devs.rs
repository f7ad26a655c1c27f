//! Capture devices: `pcap_findalldevs` from `/sys/class/net` and `getifaddrs`, and
//! `pcap_lookupnet`.

use std::ffi::{CStr, CString};
use std::ptr;

use crate::ffi::{
    PCAP_IF_CONNECTION_STATUS_CONNECTED, PCAP_IF_CONNECTION_STATUS_DISCONNECTED,
    PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE, PCAP_IF_LOOPBACK, PCAP_IF_RUNNING, PCAP_IF_UP,
    PCAP_IF_WIRELESS, PcapAddr, PcapIf,
};

/// One device of the list: an interface found in `/sys/class/net`, `any`, or one of
/// libpcap's pseudo-devices.
#[derive(Debug)]
pub(crate) struct Device {
    pub(crate) name: String,
    pub(crate) flags: u32,
    pub(crate) description: Option<&'static str>,
}

/// The `any` device's description, as libpcap gives it.
pub(crate) const ANY_DESCRIPTION: &str = "Pseudo-device that captures on all interfaces";

/// The pseudo-devices Debian's libpcap 1.10.3 lists after the interfaces (Bluetooth monitor,
/// netfilter log and queue, D-Bus): name, flags, description. netsift lists them so that
/// `tcpdump -D` prints the same, and refuses to capture on them.
pub(crate) const PSEUDO_DEVICES: [(&str, u32, &str); 5] = [
    (
        "bluetooth-monitor",
        PCAP_IF_WIRELESS | PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE,
        "Bluetooth Linux Monitor",
    ),
    (
        "nflog",
        PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE,
        "Linux netfilter log (NFLOG) interface",
    ),
    (
        "nfqueue",
        PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE,
        "Linux netfilter queue (NFQUEUE) interface",
    ),
    (
        "dbus-system",
        PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE,
        "D-Bus system bus",
    ),
    (
        "dbus-session",
        PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE,
        "D-Bus session bus",
    ),
];

/// libpcap 1.10.3's `get_figure_of_merit`: devices are listed in increasing order of it
/// (running, up, not disconnected, not loopback, not `any` first), in the order they were
/// added among equals.
fn figure_of_merit(d: &Device) -> u32 {
    let mut n = 0;
    if d.flags & PCAP_IF_RUNNING == 0 {
        n |= 0x8000_0000;
    }
    if d.flags & PCAP_IF_UP == 0 {
        n |= 0x4000_0000;
    }
    if d.flags & PCAP_IF_WIRELESS == 0 && d.flags & 0x30 == PCAP_IF_CONNECTION_STATUS_DISCONNECTED {
        n |= 0x2000_0000;
    }
    if d.flags & PCAP_IF_LOOPBACK != 0 {
        n |= 0x1000_0000;
    }
    if d.name == "any" {
        n |= 0x0800_0000;
    }
    n
}

/// The `IFF_*` flags of every interface that has an entry in `getifaddrs` (all of them on
/// Linux: each has an `AF_PACKET` entry), by name.
fn kernel_flags() -> Vec<(String, u32)> {
    let mut ifaddrs: *mut libc::ifaddrs = ptr::null_mut();
    // SAFETY: getifaddrs fills the pointer; freed below.
    if unsafe { libc::getifaddrs(&mut ifaddrs) } != 0 {
        return Vec::new();
    }
    let mut v: Vec<(String, u32)> = Vec::new();
    let mut cur = ifaddrs;
    while !cur.is_null() {
        // SAFETY: walking the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: a NUL-terminated name.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        if !v.iter().any(|(n, _)| *n == name) {
            v.push((name, ifa.ifa_flags));
        }
    }
    // SAFETY: allocated by getifaddrs above.
    unsafe { libc::freeifaddrs(ifaddrs) };
    v
}

/// The devices in libpcap's order (see [`figure_of_merit`]): the interfaces (among equals by
/// name), then `any`, then the pseudo-devices, each placed after every device added before it
/// with a figure of merit no greater than its own.
pub(crate) fn devices() -> Result<Vec<Device>, String> {
    let mut list: Vec<Device> = Vec::new();
    let mut add = |d: Device| {
        let m = figure_of_merit(&d);
        let at = list
            .iter()
            .position(|x| figure_of_merit(x) > m)
            .unwrap_or(list.len());
        list.insert(at, d);
    };
    for d in interfaces()? {
        add(d);
    }
    add(Device {
        name: "any".into(),
        flags: PCAP_IF_UP | PCAP_IF_RUNNING | PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE,
        description: Some(ANY_DESCRIPTION),
    });
    for (name, flags, desc) in PSEUDO_DEVICES {
        add(Device {
            name: name.into(),
            flags,
            description: Some(desc),
        });
    }
    Ok(list)
}

/// The interfaces of `/sys/class/net`, by name.
fn interfaces() -> Result<Vec<Device>, String> {
    let dir = std::fs::read_dir("/sys/class/net")
        .map_err(|e| format!("cannot list /sys/class/net: {e}"))?;
    let kflags = kernel_flags();
    let mut v = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let base = entry.path();
        let ifflags = kflags
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, f)| f)
            .unwrap_or_else(|| {
                std::fs::read_to_string(base.join("flags"))
                    .ok()
                    .and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
                    .unwrap_or(0)
            });
        let mut flags = 0;
        if ifflags & libc::IFF_UP as u32 != 0 {
            flags |= PCAP_IF_UP;
        }
        if ifflags & libc::IFF_RUNNING as u32 != 0 {
            flags |= PCAP_IF_RUNNING;
        }
        if ifflags & libc::IFF_LOOPBACK as u32 != 0 {
            flags |= PCAP_IF_LOOPBACK | PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE;
        } else {
            // The kernel refuses to say (EINVAL) for devices that are down.
            let carrier = std::fs::read_to_string(base.join("carrier")).ok();
            flags |= match carrier.as_deref().map(str::trim) {
                Some("1") => PCAP_IF_CONNECTION_STATUS_CONNECTED,
                Some("0") => PCAP_IF_CONNECTION_STATUS_DISCONNECTED,
                _ => PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE,
            };
        }
        if base.join("wireless").exists() || base.join("phy80211").exists() {
            flags |= PCAP_IF_WIRELESS;
        }
        v.push(Device {
            name,
            flags,
            description: None,
        });
    }
    v.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(v)
}

/// Copies a socket address into a heap allocation the list owns.
fn copy_sockaddr(sa: *const libc::sockaddr) -> *mut libc::sockaddr {
    if sa.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `sa` comes from getifaddrs; its family says how long it is, and it is never
    // longer than a sockaddr_storage.
    unsafe {
        let len = match i32::from((*sa).sa_family) {
            libc::AF_INET => size_of::<libc::sockaddr_in>(),
            libc::AF_INET6 => size_of::<libc::sockaddr_in6>(),
            libc::AF_PACKET => size_of::<libc::sockaddr_ll>(),
            _ => size_of::<libc::sockaddr>(),
        };
        let mut st: Box<libc::sockaddr_storage> = Box::new(std::mem::zeroed());
        ptr::copy_nonoverlapping(sa.cast::<u8>(), ptr::from_mut(&mut *st).cast::<u8>(), len);
        Box::into_raw(st).cast()
    }
}

/// Frees an address made by [`copy_sockaddr`].
///
/// # Safety
/// `sa` must be null or come from [`copy_sockaddr`], and not be freed twice.
unsafe fn free_sockaddr(sa: *mut libc::sockaddr) {
    if !sa.is_null() {
        // SAFETY: allocated as a Box<sockaddr_storage>.
        drop(unsafe { Box::from_raw(sa.cast::<libc::sockaddr_storage>()) });
    }
}

/// Builds the `pcap_if_t` list (null if there are no devices).
pub(crate) fn build_list() -> Result<*mut PcapIf, String> {
    let devs = devices()?;
    let mut ifaddrs: *mut libc::ifaddrs = ptr::null_mut();
    // SAFETY: getifaddrs fills the pointer; freed below.
    let have_addrs = unsafe { libc::getifaddrs(&mut ifaddrs) } == 0;
    let mut head: *mut PcapIf = ptr::null_mut();
    for d in devs.iter().rev() {
        let mut addrs: *mut PcapAddr = ptr::null_mut();
        let mut tail: *mut *mut PcapAddr = &mut addrs;
        let mut cur = if have_addrs { ifaddrs } else { ptr::null_mut() };
        while !cur.is_null() {
            // SAFETY: walking the list getifaddrs returned.
            let ifa = unsafe { &*cur };
            cur = ifa.ifa_next;
            if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
                continue;
            }
            // SAFETY: a NUL-terminated name.
            let name = unsafe { CStr::from_ptr(ifa.ifa_name) };
            // SAFETY: non-null address.
            let fam = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if name.to_bytes() != d.name.as_bytes()
                || !(fam == libc::AF_INET || fam == libc::AF_INET6)
            {
                continue;
            }
            let pointopoint = ifa.ifa_flags & libc::IFF_POINTOPOINT as u32 != 0;
            let broadcast = ifa.ifa_flags & libc::IFF_BROADCAST as u32 != 0;
            let a = Box::into_raw(Box::new(PcapAddr {
                next: ptr::null_mut(),
                addr: copy_sockaddr(ifa.ifa_addr),
                netmask: copy_sockaddr(ifa.ifa_netmask),
                broadaddr: if broadcast && !pointopoint {
                    copy_sockaddr(ifa.ifa_ifu)
                } else {
                    ptr::null_mut()
                },
                dstaddr: if pointopoint {
                    copy_sockaddr(ifa.ifa_ifu)
                } else {
                    ptr::null_mut()
                },
            }));
            // SAFETY: `tail` points at the last `next` field (or `addrs`).
            unsafe {
                *tail = a;
                tail = &mut (*a).next;
            }
        }
        let name = CString::new(d.name.clone()).unwrap_or_default();
        let description = d
            .description
            .and_then(|s| CString::new(s).ok())
            .map_or(ptr::null_mut(), CString::into_raw);
        head = Box::into_raw(Box::new(PcapIf {
            next: head,
            name: name.into_raw(),
            description,
            addresses: addrs,
            flags: d.flags,
        }));
    }
    if have_addrs {
        // SAFETY: allocated by getifaddrs above.
        unsafe { libc::freeifaddrs(ifaddrs) };
    }
    Ok(head)
}

/// Frees a list made by [`build_list`].
///
/// # Safety
/// `list` must be null or come from [`build_list`], and not be freed twice.
pub(crate) unsafe fn free_list(mut list: *mut PcapIf) {
    while !list.is_null() {
        // SAFETY: every node, string and address was allocated by build_list.
        unsafe {
            let node = Box::from_raw(list);
            list = node.next;
            if !node.name.is_null() {
                drop(CString::from_raw(node.name));
            }
            if !node.description.is_null() {
                drop(CString::from_raw(node.description));
            }
            let mut a = node.addresses;
            while !a.is_null() {
                let addr = Box::from_raw(a);
                a = addr.next;
                free_sockaddr(addr.addr);
                free_sockaddr(addr.netmask);
                free_sockaddr(addr.broadaddr);
                free_sockaddr(addr.dstaddr);
            }
        }
    }
}

/// `pcap_lookupnet`: the IPv4 network and netmask of `device`, in network byte order (as
/// libpcap returns them: the raw `s_addr` values).
pub(crate) fn lookupnet(device: &str) -> Result<(u32, u32), String> {
    if device == "any" {
        return Ok((0, 0));
    }
    let mut ifaddrs: *mut libc::ifaddrs = ptr::null_mut();
    // SAFETY: getifaddrs fills the pointer; freed below.
    if unsafe { libc::getifaddrs(&mut ifaddrs) } != 0 {
        return Err(format!("getifaddrs: {}", std::io::Error::last_os_error()));
    }
    let mut found = None;
    let mut cur = ifaddrs;
    while !cur.is_null() {
        // SAFETY: walking the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: a NUL-terminated name and a non-null address.
        let (name, fam) = unsafe {
            (
                CStr::from_ptr(ifa.ifa_name),
                i32::from((*ifa.ifa_addr).sa_family),
            )
        };
        if fam != libc::AF_INET || name.to_bytes() != device.as_bytes() {
            continue;
        }
        // SAFETY: AF_INET addresses are sockaddr_in.
        let addr = unsafe { (*ifa.ifa_addr.cast::<libc::sockaddr_in>()).sin_addr.s_addr };
        let mask = if ifa.ifa_netmask.is_null() {
            0
        } else {
            // SAFETY: as above.
            unsafe {
                (*ifa.ifa_netmask.cast::<libc::sockaddr_in>())
                    .sin_addr
                    .s_addr
            }
        };
        found = Some((addr, mask));
        break;
    }
    // SAFETY: allocated by getifaddrs above.
    unsafe { libc::freeifaddrs(ifaddrs) };
    match found {
        Some((addr, mask)) => Ok((addr & mask, mask)),
        None => Err(format!("{device}: no IPv4 address assigned")),
    }
}
