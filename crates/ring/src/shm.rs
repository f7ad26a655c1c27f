//! Shared memory for buffers that cross process boundaries (`netsiftd`).
//!
//! A [`Region`] is an anonymous memory file (`memfd_create`) mapped shared. The daemon creates
//! one per PBuf, per IBuf, per reader control page and per MBuf, and passes the file
//! descriptors to the application over its Unix socket; the application maps them — PBuf and
//! IBuf from *read-only* descriptors ([`Region::read_only_fd`]) of files sealed against every
//! future write ([`Peers::ReadOnly`]), the control page and MBufs read-write — and reads
//! packets with no system call per packet. Every file's size is sealed: no application can
//! truncate one under the daemon's mapping.
//!
//! [`Mem`] is a slice of atomics that lives either on the heap (in-process flows) or in a
//! region (shared flows). The buffer and MBuf code use it through `Deref<Target = [T]>`, so the
//! same protocol code runs in the daemon and in the application, on the same bytes.
//!
//! # Safety
//!
//! Only [`Plain`] types go into regions: `#[repr(C)]` structs of atomics, valid when all bytes
//! are zero (a fresh memory file is zero-filled), without `Drop`. Every access to them is an
//! atomic load or store (or, for PBuf slot bytes under slow-reader preference, the protocol the
//! buffer module documents), so another process writing the same bytes concurrently is no data
//! race. Atomic *loads* from a read-only mapping are allowed for these sizes (at most 8 bytes:
//! plain `mov` instructions on x86-64 and loads elsewhere); nothing stores through a read-only
//! mapping — the application side never writes the PBuf or IBuf.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::ops::Deref;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// Types that may live in a [`Region`]: valid when all bytes are zero, no `Drop`, interior
/// mutability only through atomics, alignment at most a page.
///
/// # Safety
/// Implementors must satisfy every property above.
pub unsafe trait Plain: Sync + Send + Sized {}

// SAFETY: atomics are valid at zero, have no Drop, and are accessed atomically.
unsafe impl Plain for AtomicU64 {}
// SAFETY: as above.
unsafe impl Plain for AtomicU32 {}

/// A shared mapping of a memory file.
pub struct Region {
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain memory accessed only through `Plain` types (atomics).
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("fd", &self.fd.as_raw_fd())
            .field("len", &self.len)
            .field("writable", &self.writable)
            .finish()
    }
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

fn map(fd: &OwnedFd, len: usize, writable: bool) -> io::Result<NonNull<u8>> {
    let prot = if writable {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_READ
    };
    // SAFETY: a fresh shared mapping of `len` bytes of a file at least that long; the kernel
    // picks the address.
    // PERF: MAP_POPULATE maps every page now, in one call, instead of one fault per page as
    // the writer and the readers first touch them (thousands per PBuf).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))
}

/// What the processes a [`Region`]'s descriptor is handed to may do with the memory file. The
/// file's size is sealed either way (`F_SEAL_SHRINK | F_SEAL_GROW`, then `F_SEAL_SEAL`): no
/// holder of a descriptor can truncate it under the creator's mapping (a `SIGBUS` at its next
/// access) or change its seals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peers {
    /// Read only: also `F_SEAL_FUTURE_WRITE`, so no descriptor of the file — reopened through
    /// `/proc/self/fd` or not — can be mapped writable, `mprotect`ed writable or written with
    /// `write(2)`. Only the creator's own mapping, made before the seal, writes (PBuf, IBuf).
    ReadOnly,
    /// Read and write (a reader's control page, MBufs): whatever a peer writes there is
    /// untrusted input to the creator.
    ReadWrite,
}

impl Region {
    /// A new zero-filled memory file of `len` bytes (rounded up to whole pages), mapped
    /// read-write here and sealed for `peers` (see [`Peers`]). `name` shows in
    /// `/proc/PID/maps` and `/proc/PID/fd` (as `memfd:NAME`).
    pub fn create(name: &str, len: usize, peers: Peers) -> io::Result<Region> {
        let page = page_size();
        let len = len.max(1).div_ceil(page) * page;
        let cname = CString::new(name.replace('\0', "?"))
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad memfd name"))?;
        // SAFETY: a valid C string; flags are constants.
        let raw = unsafe {
            libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: memfd_create returned a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = libc::off_t::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "region too large"))?;
        // SAFETY: a valid descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), size) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let ptr = map(&fd, len, true)?;
        let region = Region {
            ptr,
            len,
            writable: true,
            fd,
        };
        // After our writable mapping exists: F_SEAL_FUTURE_WRITE leaves it writable.
        let mut seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        if peers == Peers::ReadOnly {
            seals |= libc::F_SEAL_FUTURE_WRITE;
        }
        // SAFETY: a valid descriptor; F_ADD_SEALS takes an int.
        if unsafe { libc::fcntl(region.fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(region)
    }

    /// Map a memory file received from another process: its whole length, read-write or
    /// read-only. Fails if the file is empty or cannot be mapped that way (a read-only
    /// descriptor cannot be mapped writable).
    pub fn map(fd: OwnedFd, writable: bool) -> io::Result<Region> {
        // SAFETY: a zeroed stat buffer filled by fstat on a valid descriptor.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let len = usize::try_from(st.st_size).unwrap_or(0);
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the shared memory file is empty",
            ));
        }
        let ptr = map(&fd, len, writable)?;
        Ok(Region {
            ptr,
            len,
            writable,
            fd,
        })
    }

    /// The mapped length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region has no bytes (never: regions are at least a page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether this mapping is writable.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The memory file's descriptor (read-write if this process created it).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A new descriptor of the same memory file opened read-only: whoever receives it can map
    /// the file for reading only.
    pub fn read_only_fd(&self) -> io::Result<OwnedFd> {
        let path = CString::new(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
            .map_err(|_| io::Error::other("bad path"))?;
        // SAFETY: a valid C string.
        let raw = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open returned a new descriptor we own.
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    }

    /// `count` values of `T` at byte `offset`, or `None` if they do not fit or are misaligned.
    fn slice<T: Plain>(&self, offset: usize, count: usize) -> Option<NonNull<T>> {
        let size = std::mem::size_of::<T>().checked_mul(count)?;
        let end = offset.checked_add(size)?;
        if end > self.len || offset % std::mem::align_of::<T>() != 0 {
            return None;
        }
        // SAFETY: in bounds (checked above).
        let p = unsafe { self.ptr.as_ptr().add(offset) };
        NonNull::new(p.cast::<T>())
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; every `Mem` into it holds an `Arc<Region>`, so
        // none outlives it.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// Who owns the memory behind a [`Mem`].
enum Owner<T> {
    Heap(#[allow(dead_code)] Box<[T]>),
    Shared(Arc<Region>),
}

/// A slice of [`Plain`] values on the heap or in a shared [`Region`].
pub struct Mem<T: Plain> {
    ptr: NonNull<T>,
    len: usize,
    owner: Owner<T>,
}

// SAFETY: `T: Plain` is Sync + Send and the memory is owned (heap) or kept mapped (region).
unsafe impl<T: Plain> Send for Mem<T> {}
// SAFETY: as above.
unsafe impl<T: Plain> Sync for Mem<T> {}

impl<T: Plain> fmt::Debug for Mem<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mem")
            .field("len", &self.len)
            .field("shared", &self.region().is_some())
            .finish()
    }
}

impl<T: Plain + Default> Mem<T> {
    /// `len` default (zero) values on the heap.
    pub fn heap(len: usize) -> Mem<T> {
        let mut b: Box<[T]> = (0..len).map(|_| T::default()).collect();
        let ptr = NonNull::new(b.as_mut_ptr()).unwrap_or(NonNull::dangling());
        Mem {
            ptr,
            len,
            owner: Owner::Heap(b),
        }
    }
}

impl<T: Plain> Mem<T> {
    /// `count` values at byte `offset` of `region`; `None` if they do not fit or the offset is
    /// misaligned.
    pub fn in_region(region: &Arc<Region>, offset: usize, count: usize) -> Option<Mem<T>> {
        let ptr = region.slice::<T>(offset, count)?;
        Some(Mem {
            ptr,
            len: count,
            owner: Owner::Shared(Arc::clone(region)),
        })
    }

    /// The region the values live in (`None`: on the heap).
    pub fn region(&self) -> Option<&Arc<Region>> {
        match &self.owner {
            Owner::Heap(_) => None,
            Owner::Shared(r) => Some(r),
        }
    }
}

impl<T: Plain> Deref for Mem<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points at `len` initialised values (heap: the box; region: zero bytes,
        // valid for `Plain`) that live as long as `owner`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

/// One [`Plain`] value on the heap or in a shared [`Region`] (a [`Mem`] of length 1).
pub struct One<T: Plain>(Mem<T>);

impl<T: Plain> fmt::Debug for One<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<T: Plain + Default> One<T> {
    /// A default (zero) value on the heap.
    pub fn heap() -> One<T> {
        One(Mem::heap(1))
    }
}

impl<T: Plain> One<T> {
    /// The value at byte `offset` of `region`; `None` if it does not fit or is misaligned.
    pub fn in_region(region: &Arc<Region>, offset: usize) -> Option<One<T>> {
        Mem::in_region(region, offset, 1).map(One)
    }

    /// The region the value lives in (`None`: on the heap).
    pub fn region(&self) -> Option<&Arc<Region>> {
        self.0.region()
    }
}

impl<T: Plain> Deref for One<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn regions_share_bytes_and_read_only_descriptors_refuse_writable_maps() {
        let r = Arc::new(Region::create("netsift-test", 100, Peers::ReadWrite).unwrap());
        assert_eq!(r.len(), page_size());
        let a: Mem<AtomicU64> = Mem::in_region(&r, 8, 4).unwrap();
        a[1].store(42, Ordering::Relaxed);
        let ro = Region::map(r.read_only_fd().unwrap(), false).unwrap();
        let ro = Arc::new(ro);
        let b: Mem<AtomicU64> = Mem::in_region(&ro, 8, 4).unwrap();
        assert_eq!(b[1].load(Ordering::Relaxed), 42);
        let e = Region::map(r.read_only_fd().unwrap(), true).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES));
        assert!(
            Mem::<AtomicU64>::in_region(&r, 4, 1).is_none(),
            "misaligned"
        );
        assert!(Mem::<AtomicU64>::in_region(&r, page_size() - 8, 2).is_none());
        let h: Mem<AtomicU64> = Mem::heap(3);
        assert_eq!(h.len(), 3);
        assert!(h.region().is_none());
    }
}
