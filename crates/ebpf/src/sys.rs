//! The raw `bpf(2)` system call and its `union bpf_attr` argument.
//!
//! `union bpf_attr` is built as bytes at the offsets of `<linux/bpf.h>` (each command's
//! fields are listed where they are used), so no bindings are generated. The kernel accepts an
//! attribute shorter or longer than its own as long as the bytes it does not know are zero.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// `BPF_MAP_CREATE`.
pub(crate) const MAP_CREATE: libc::c_long = 0;
/// `BPF_MAP_LOOKUP_ELEM`.
pub(crate) const MAP_LOOKUP_ELEM: libc::c_long = 1;
/// `BPF_MAP_UPDATE_ELEM`.
pub(crate) const MAP_UPDATE_ELEM: libc::c_long = 2;
/// `BPF_MAP_DELETE_ELEM`.
pub(crate) const MAP_DELETE_ELEM: libc::c_long = 3;
/// `BPF_MAP_GET_NEXT_KEY`.
pub(crate) const MAP_GET_NEXT_KEY: libc::c_long = 4;
/// `BPF_PROG_LOAD`.
pub(crate) const PROG_LOAD: libc::c_long = 5;
/// `BPF_PROG_TEST_RUN`.
pub(crate) const PROG_TEST_RUN: libc::c_long = 10;
/// `BPF_LINK_CREATE`.
pub(crate) const LINK_CREATE: libc::c_long = 28;

/// Size of the attribute passed: `union bpf_attr` of Linux 6.x is at most this long for the
/// commands used here.
const ATTR_SIZE: usize = 144;

/// `union bpf_attr`, as bytes.
#[repr(C, align(8))]
pub(crate) struct Attr([u8; ATTR_SIZE]);

impl Attr {
    /// All zeros.
    pub(crate) fn new() -> Attr {
        Attr([0; ATTR_SIZE])
    }

    /// Set the `u32` at byte `off`.
    pub(crate) fn u32(&mut self, off: usize, v: u32) -> &mut Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }

    /// Set the `u64` at byte `off`.
    pub(crate) fn u64(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }

    /// Set the pointer at byte `off` (an `__aligned_u64`).
    pub(crate) fn ptr<T>(&mut self, off: usize, p: *const T) -> &mut Attr {
        self.u64(off, p as usize as u64)
    }

    /// Set the `char[16]` object name at byte `off` (truncated to 15 bytes, NUL-terminated;
    /// the kernel allows letters, digits, `_` and `.` only, so others become `_`).
    pub(crate) fn name(&mut self, off: usize, name: &str) -> &mut Attr {
        for (i, b) in name.bytes().take(15).enumerate() {
            self.0[off + i] = if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' {
                b
            } else {
                b'_'
            };
        }
        self
    }

    /// Read the `u32` at byte `off` (after a command that writes results back).
    pub(crate) fn get_u32(&self, off: usize) -> u32 {
        u32::from_ne_bytes([
            self.0[off],
            self.0[off + 1],
            self.0[off + 2],
            self.0[off + 3],
        ])
    }
}

/// Call `bpf(cmd, attr)`; the result, or the errno.
///
/// # Safety
///
/// Every pointer stored in `attr` must point to memory that is valid for the access the
/// command makes (reads of the given sizes, writes for output buffers) for the whole call.
pub(crate) unsafe fn bpf(cmd: libc::c_long, attr: &mut Attr) -> Result<i64, i32> {
    // SAFETY: `attr` is a live buffer of ATTR_SIZE bytes; the pointers inside are valid by the
    // caller's contract.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            ATTR_SIZE as libc::c_uint,
        )
    };
    if r < 0 { Err(errno()) } else { Ok(r) }
}

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Own a descriptor a `bpf` command just returned.
pub(crate) fn owned_fd(r: i64) -> OwnedFd {
    // SAFETY: commands that create objects return a new descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}
