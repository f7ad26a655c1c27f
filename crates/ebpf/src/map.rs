//! Maps: kernel key-value stores shared between programs and user space (`BPF_MAP_*`).
//!
//! Keys and values are byte strings of the sizes the map was created with; every call checks
//! the lengths first, so the kernel never reads or writes past a caller's buffer. Per-CPU maps
//! hold one value per possible CPU: their lookups and updates take [`Map::value_len`] bytes,
//! one slot of the value size rounded up to 8 per CPU.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::error::{Error, ErrorKind, Result};
use crate::insn::{Insn, Reg};
use crate::sys::{self, Attr};

/// The map types netsift uses (`enum bpf_map_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MapType {
    /// `BPF_MAP_TYPE_HASH`.
    Hash,
    /// `BPF_MAP_TYPE_ARRAY`: keys are `u32` indexes below `max_entries`, all present.
    Array,
    /// `BPF_MAP_TYPE_PERCPU_HASH`.
    PercpuHash,
    /// `BPF_MAP_TYPE_PERCPU_ARRAY`: counters without atomic operations.
    PercpuArray,
    /// `BPF_MAP_TYPE_LPM_TRIE`: longest-prefix match; a key is a `u32` prefix length in bits
    /// (host order) followed by the address bytes. Needs `BPF_F_NO_PREALLOC`, which
    /// [`MapSpec::new`] sets.
    LpmTrie,
    /// `BPF_MAP_TYPE_DEVMAP`: `u32` index to `u32` interface index, for XDP redirects.
    DevMap,
    /// `BPF_MAP_TYPE_CPUMAP`: `u32` CPU number to `struct bpf_cpumap_val` (a `u32` queue
    /// size, optionally followed by a program), for XDP redirects to another CPU.
    CpuMap,
    /// `BPF_MAP_TYPE_XSKMAP`: `u32` queue to AF_XDP socket descriptor, for XDP redirects.
    XskMap,
}

impl MapType {
    /// The kernel's number for this type.
    pub const fn raw(self) -> u32 {
        match self {
            MapType::Hash => 1,
            MapType::Array => 2,
            MapType::PercpuHash => 5,
            MapType::PercpuArray => 6,
            MapType::LpmTrie => 11,
            MapType::DevMap => 14,
            MapType::CpuMap => 16,
            MapType::XskMap => 17,
        }
    }

    /// Whether values are per CPU.
    pub const fn is_percpu(self) -> bool {
        matches!(self, MapType::PercpuHash | MapType::PercpuArray)
    }
}

/// `BPF_F_NO_PREALLOC`.
pub const F_NO_PREALLOC: u32 = 1;

/// What a map is: type, sizes, flags and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MapSpec {
    /// The type.
    pub map_type: MapType,
    /// Key size in bytes (4 for arrays; 4 + address bytes for LPM tries).
    pub key_size: u32,
    /// Value size in bytes.
    pub value_size: u32,
    /// Capacity.
    pub max_entries: u32,
    /// `map_flags` (e.g. [`F_NO_PREALLOC`]).
    pub flags: u32,
    /// Name as tools show it (15 characters kept).
    pub name: String,
}

impl MapSpec {
    /// A map of `map_type` with these sizes, named `netsift`, with the flags the type needs.
    pub fn new(map_type: MapType, key_size: u32, value_size: u32, max_entries: u32) -> MapSpec {
        MapSpec {
            map_type,
            key_size,
            value_size,
            max_entries,
            flags: if map_type == MapType::LpmTrie {
                F_NO_PREALLOC
            } else {
                0
            },
            name: "netsift".into(),
        }
    }
}

/// How an update treats an existing entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum UpdateFlag {
    /// Create or replace (`BPF_ANY`).
    #[default]
    Any,
    /// Create only (`BPF_NOEXIST`): fails with [`ErrorKind::Busy`] if the key exists.
    NoExist,
    /// Replace only (`BPF_EXIST`): fails with [`ErrorKind::NotFound`] if it does not.
    Exist,
}

/// A map, closed on drop (the kernel frees it when no program uses it either).
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    spec: MapSpec,
    value_len: usize,
}

impl Map {
    /// Create a map (`BPF_MAP_CREATE`).
    pub fn create(spec: &MapSpec) -> Result<Map> {
        let what = || format!("creating {:?} map {:?}", spec.map_type, spec.name);
        let value_len = if spec.map_type.is_percpu() {
            (spec.value_size as usize).div_ceil(8) * 8 * possible_cpus()?
        } else {
            spec.value_size as usize
        };
        let mut attr = Attr::new();
        attr.u32(0, spec.map_type.raw())
            .u32(4, spec.key_size)
            .u32(8, spec.value_size)
            .u32(12, spec.max_entries)
            .u32(16, spec.flags)
            .name(28, &spec.name);
        // SAFETY: no pointers in the attribute.
        let fd =
            unsafe { sys::bpf(sys::MAP_CREATE, &mut attr) }.map_err(|e| Error::os(e, what()))?;
        Ok(Map {
            fd: sys::owned_fd(fd),
            spec: spec.clone(),
            value_len,
        })
    }

    /// What the map was created as.
    pub fn spec(&self) -> &MapSpec {
        &self.spec
    }

    /// Bytes of a value as lookups return it and updates take it: the value size, or for
    /// per-CPU maps one 8-byte-aligned slot per possible CPU.
    pub fn value_len(&self) -> usize {
        self.value_len
    }

    /// The two instructions that load this map's address into `dst` (`ld_imm64` with
    /// `BPF_PSEUDO_MAP_FD`), for programs loaded while the map is open.
    pub fn ld_map(&self, dst: Reg) -> [Insn; 2] {
        Insn::ld_map_fd(dst, self.fd.as_raw_fd())
    }

    fn check(&self, what: &str, buf: &[u8], want: usize) -> Result<()> {
        if buf.len() != want {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{what} of map {:?}: {} bytes given, the map's are {want}",
                    self.spec.name,
                    buf.len()
                ),
            ));
        }
        Ok(())
    }

    fn elem(
        &self,
        cmd: libc::c_long,
        key: Option<&[u8]>,
        value: *const u8,
        flags: u64,
    ) -> std::result::Result<(), i32> {
        let mut attr = Attr::new();
        attr.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, key.map_or(0, |k| k.as_ptr() as usize as u64))
            .ptr(16, value)
            .u64(24, flags);
        // SAFETY: callers checked that `key` has key_size bytes and that `value` points to a
        // buffer of the length the command accesses (value_len, or key_size for next keys).
        unsafe { sys::bpf(cmd, &mut attr) }.map(|_| ())
    }

    /// Copy the value of `key` into `value` (of [`Map::value_len`] bytes); `false` if there is
    /// no such key.
    pub fn lookup_into(&self, key: &[u8], value: &mut [u8]) -> Result<bool> {
        self.check("a key", key, self.spec.key_size as usize)?;
        self.check("a value", value, self.value_len)?;
        match self.elem(sys::MAP_LOOKUP_ELEM, Some(key), value.as_mut_ptr(), 0) {
            Ok(()) => Ok(true),
            Err(libc::ENOENT) => Ok(false),
            Err(e) => Err(Error::os(
                e,
                format!("looking up in map {:?}", self.spec.name),
            )),
        }
    }

    /// The value of `key`, if present.
    pub fn lookup(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut v = vec![0u8; self.value_len];
        Ok(self.lookup_into(key, &mut v)?.then_some(v))
    }

    /// Set the value of `key` (`value` of [`Map::value_len`] bytes).
    pub fn update(&self, key: &[u8], value: &[u8], flag: UpdateFlag) -> Result<()> {
        self.check("a key", key, self.spec.key_size as usize)?;
        self.check("a value", value, self.value_len)?;
        let flags = match flag {
            UpdateFlag::Any => 0,
            UpdateFlag::NoExist => 1,
            UpdateFlag::Exist => 2,
        };
        self.elem(sys::MAP_UPDATE_ELEM, Some(key), value.as_ptr(), flags)
            .map_err(|e| Error::os(e, format!("updating map {:?}", self.spec.name)))
    }

    /// Remove `key`; `false` if it was not there. (Array entries cannot be removed: the
    /// kernel answers [`ErrorKind::InvalidArgument`].)
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.check("a key", key, self.spec.key_size as usize)?;
        match self.elem(sys::MAP_DELETE_ELEM, Some(key), std::ptr::null(), 0) {
            Ok(()) => Ok(true),
            Err(libc::ENOENT) => Ok(false),
            Err(e) => Err(Error::os(
                e,
                format!("deleting from map {:?}", self.spec.name),
            )),
        }
    }

    /// The key after `key` in the map's order (the first key for `None`); `None` at the end.
    pub fn next_key(&self, key: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
        if let Some(k) = key {
            self.check("a key", k, self.spec.key_size as usize)?;
        }
        let mut next = vec![0u8; self.spec.key_size as usize];
        match self.elem(sys::MAP_GET_NEXT_KEY, key, next.as_mut_ptr(), 0) {
            Ok(()) => Ok(Some(next)),
            Err(libc::ENOENT) => Ok(None),
            Err(e) => Err(Error::os(
                e,
                format!("iterating over map {:?}", self.spec.name),
            )),
        }
    }

    /// Every key, in the map's order (a snapshot: concurrent changes may be missed).
    pub fn keys(&self) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let mut cur = self.next_key(None)?;
        while let Some(k) = cur {
            cur = self.next_key(Some(&k))?;
            out.push(k);
            if out.len() > self.spec.max_entries as usize {
                break;
            }
        }
        Ok(out)
    }
}

impl AsFd for Map {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Map {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

/// Number of possible CPUs (`/sys/devices/system/cpu/possible`), the number of slots of a
/// per-CPU map's value.
pub fn possible_cpus() -> Result<usize> {
    let path = "/sys/devices/system/cpu/possible";
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::new(ErrorKind::Os, format!("reading {path}: {e}")))?;
    parse_cpu_list(&text).ok_or_else(|| {
        Error::new(
            ErrorKind::Os,
            format!("{path}: cannot read the CPU list {:?}", text.trim()),
        )
    })
}

/// The number of CPUs in a list such as `0-3,5,7-8` (the highest index plus one, as the
/// kernel sizes per-CPU values).
fn parse_cpu_list(text: &str) -> Option<usize> {
    let mut max = None;
    for part in text.trim().split(',') {
        let last = part.rsplit('-').next()?.trim().parse::<usize>().ok()?;
        max = max.max(Some(last));
    }
    max.map(|m| m + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0\n"), Some(1));
        assert_eq!(parse_cpu_list("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list("0-3,5,7-8"), Some(9));
        assert_eq!(parse_cpu_list("x"), None);
    }
}
