//! Thin safe wrappers over the system calls the live sources use: owned file descriptors,
//! memory mappings, socket options, `poll`, interface lookups.
//!
//! Every `unsafe` block of the live sources that is not about reading or writing ring memory
//! lives here, with its reasoning.

use std::ffi::CString;
use std::io;
use std::mem::{MaybeUninit, size_of};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::time::Duration;

use super::{LiveError, LiveErrorKind};

/// The last OS error, as a [`LiveError`] of the kind its errno suggests, saying what was done.
pub(crate) fn last_error(what: impl Into<String>) -> LiveError {
    LiveError::from_io(what.into(), io::Error::last_os_error())
}

/// A socket owned by this process.
pub(crate) fn socket(
    domain: i32,
    ty: i32,
    protocol: i32,
    what: &str,
) -> Result<OwnedFd, LiveError> {
    // SAFETY: socket(2) has no memory arguments; a non-negative result is a new descriptor
    // that nothing else owns.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) };
    if fd < 0 {
        return Err(last_error(what));
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, name, &value, sizeof value)`.
pub(crate) fn setsockopt<T: Copy>(
    fd: RawFd,
    level: i32,
    name: i32,
    value: &T,
    what: &str,
) -> Result<(), LiveError> {
    // SAFETY: `value` points to a live `T` of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(last_error(what));
    }
    Ok(())
}

/// `getsockopt(fd, level, name)` into a `T`; returns the value and the length the kernel wrote.
pub(crate) fn getsockopt<T: Copy>(
    fd: RawFd,
    level: i32,
    name: i32,
    what: &str,
) -> Result<(T, usize), LiveError> {
    let mut value = MaybeUninit::<T>::zeroed();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the buffer is a zeroed `T` of `len` bytes; the kernel writes at most `len` bytes
    // and reports how many. `T` is plain old data (integers and arrays of them) for every
    // caller, so any bytes, and the zeroes left unwritten, are a valid `T`.
    let r = unsafe { libc::getsockopt(fd, level, name, value.as_mut_ptr().cast(), &mut len) };
    if r < 0 {
        return Err(last_error(what));
    }
    // SAFETY: see above; zeroed plain old data is initialised.
    Ok((unsafe { value.assume_init() }, len as usize))
}

/// `bind(fd, addr, sizeof addr)` for a socket address type `A`.
pub(crate) fn bind<A: Copy>(fd: RawFd, addr: &A, what: &str) -> Result<(), LiveError> {
    // SAFETY: `addr` is a live socket address structure of the size passed.
    let r = unsafe {
        libc::bind(
            fd,
            (addr as *const A).cast(),
            size_of::<A>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(last_error(what));
    }
    Ok(())
}

/// Waits until one of `fds` is readable (or has an error), or `timeout` passes (`None`: wait
/// forever). Returns whether any became ready. An interrupted wait (a signal) counts as a
/// timeout, so that the caller can look at its stop flag.
pub(crate) fn poll_in(fds: &[RawFd], timeout: Option<Duration>) -> Result<bool, LiveError> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = match timeout {
        None => -1,
        Some(t) => i32::try_from(t.as_millis()).unwrap_or(i32::MAX),
    };
    // SAFETY: `pfds` is a live array of `pfds.len()` pollfd structures.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(LiveError::from_io("poll".into(), e));
    }
    for p in &pfds {
        if p.revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
            return Err(LiveError::new(
                LiveErrorKind::Io,
                "the capture socket reported an error (was the interface removed?)".into(),
            ));
        }
    }
    Ok(r > 0)
}

/// A shared memory mapping, unmapped on drop.
pub(crate) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; access to it is synchronised by its owners (the ring
// protocols), not by the mapping itself.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` at `offset` (read-write, shared).
    pub(crate) fn of_fd(fd: RawFd, len: usize, offset: i64, what: &str) -> Result<Mmap, LiveError> {
        // SAFETY: a fresh mapping chosen by the kernel; nothing aliases it yet.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                offset,
            )
        };
        Self::check(p, len, what)
    }

    /// Anonymous private memory of `len` bytes, zeroed, backed by huge pages where the
    /// kernel can (fewer TLB misses when packets are spread over many frames).
    pub(crate) fn anonymous(len: usize, what: &str) -> Result<Mmap, LiveError> {
        // SAFETY: as above, without a file.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let m = Self::check(p, len, what)?;
        // SAFETY: advice and population for the region just mapped; failure is harmless.
        unsafe {
            libc::madvise(m.ptr().cast(), len, libc::MADV_HUGEPAGE);
            libc::madvise(m.ptr().cast(), len, libc::MADV_POPULATE_WRITE);
        }
        Ok(m)
    }

    fn check(p: *mut libc::c_void, len: usize, what: &str) -> Result<Mmap, LiveError> {
        if p == libc::MAP_FAILED {
            return Err(last_error(what));
        }
        match NonNull::new(p.cast::<u8>()) {
            Some(ptr) => Ok(Mmap { ptr, len }),
            None => Err(LiveError::new(
                LiveErrorKind::Io,
                format!("{what}: mmap returned null"),
            )),
        }
    }

    /// The first byte.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region this value mapped; nothing borrows it any more
        // (borrows of ring memory cannot outlive the source that owns the mapping).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// The index of interface `name`.
pub(crate) fn if_index(name: &str) -> Result<u32, LiveError> {
    let c = CString::new(name).map_err(|_| {
        LiveError::new(
            LiveErrorKind::NoSuchDevice,
            format!("bad interface name {name:?}"),
        )
    })?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(LiveError::new(
            LiveErrorKind::NoSuchDevice,
            format!("no such interface: {name} (see `ip link`)"),
        ));
    }
    Ok(i)
}

/// The ARPHRD hardware type of interface `name` (`SIOCGIFHWADDR`).
pub(crate) fn hw_type(fd: &OwnedFd, name: &str) -> Result<u16, LiveError> {
    let mut ifr = ifreq(name)?;
    // SAFETY: SIOCGIFHWADDR reads the name from and writes an address into a live ifreq.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut ifr) };
    if r < 0 {
        return Err(last_error(format!("SIOCGIFHWADDR on {name}")));
    }
    // SAFETY: after SIOCGIFHWADDR the union holds `ifru_hwaddr`.
    Ok(unsafe { ifr.ifr_ifru.ifru_hwaddr.sa_family })
}

/// An `ifreq` naming `name`, otherwise zeroed.
pub(crate) fn ifreq(name: &str) -> Result<libc::ifreq, LiveError> {
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= ifr.ifr_name.len() {
        return Err(LiveError::new(
            LiveErrorKind::NoSuchDevice,
            format!("interface name too long: {name}"),
        ));
    }
    for (d, &s) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    Ok(ifr)
}

/// The number of receive queues of interface `name`: from the driver (`ETHTOOL_GCHANNELS`,
/// which answers for the caller's network namespace), else from sysfs, else 1.
pub(crate) fn rx_queues(name: &str) -> u32 {
    if let Some(n) = ethtool_rx_queues(name) {
        return n;
    }
    let dir = format!("/sys/class/net/{name}/queues");
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let n = entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count();
            u32::try_from(n.max(1)).unwrap_or(1)
        }
        Err(_) => 1,
    }
}

fn ethtool_rx_queues(name: &str) -> Option<u32> {
    // struct ethtool_channels: cmd, then max_rx, max_tx, max_other, max_combined, rx_count,
    // tx_count, other_count, combined_count (all u32).
    let mut ch = [0u32; 9];
    ch[0] = 0x3c; // ETHTOOL_GCHANNELS
    let mut ifr = ifreq(name).ok()?;
    ifr.ifr_ifru.ifru_data = ch.as_mut_ptr().cast();
    let fd = socket(libc::AF_INET, libc::SOCK_DGRAM, 0, "socket for ethtool").ok()?;
    // SAFETY: SIOCETHTOOL with ETHTOOL_GCHANNELS reads the name and writes the 36-byte
    // ethtool_channels that `ifr` points to, which lives until the call returns.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut ifr) };
    if r < 0 {
        return None;
    }
    let n = ch[5].saturating_add(ch[8]);
    (n > 0).then_some(n)
}

/// Wall-clock time now, in nanoseconds since the Unix epoch.
pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A hint to bring the `lines` cache lines from `p` on into the cache (no effect elsewhere
/// than x86-64).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    for i in 0..lines {
        // SAFETY: prefetching never faults, whatever the address.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch(p.wrapping_add(64 * i).cast(), _MM_HINT_T0);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, lines);
}
