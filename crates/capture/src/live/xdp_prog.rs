//! The built-in XDP program of the AF_XDP source, and the few `bpf(2)` calls that install it.
//!
//! The program is five instructions: look up the frame's receive queue in an `XSKMAP` and
//! redirect the frame to the socket there, or let it pass to the kernel's stack when that queue
//! has no socket:
//!
//! ```text
//! r2 = *(u32 *)(r1 + 16)      ; ctx->rx_queue_index
//! r1 = map_fd                 ; the XSKMAP (a 64-bit immediate load)
//! r3 = XDP_PASS               ; what to do when the lookup fails
//! call bpf_redirect_map
//! exit
//! ```
//!
//! It is attached with `BPF_LINK_CREATE`, so it goes away with the source (the link is a file
//! descriptor) even if the process dies.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::sys;
use super::{LiveError, LiveErrorKind};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 2;
const XDP_FLAGS_DRV_MODE: u32 = 4;

/// How the XDP program is attached to the interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum XdpAttachMode {
    /// In the driver if it supports XDP, otherwise generic (in the kernel's receive path).
    #[default]
    Auto,
    /// In the driver (native XDP); fails if the driver has no XDP support.
    Native,
    /// Generic XDP: works on every interface, after the kernel has built its packet buffer.
    Generic,
}

/// `union bpf_attr`, as bytes (144 in the kernel headers this was written against; the kernel
/// accepts a shorter or longer one when the extra bytes are zero).
#[repr(C, align(8))]
struct Attr([u8; 144]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 144])
    }

    fn u32(&mut self, off: usize, v: u32) -> &mut Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }

    fn u64(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }

    fn name(&mut self, off: usize, name: &str) -> &mut Attr {
        let b = name.as_bytes();
        let n = b.len().min(15);
        self.0[off..off + n].copy_from_slice(&b[..n]);
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr, what: &str) -> Result<i64, LiveError> {
    // SAFETY: bpf(2) reads (and for some commands writes) `attr`, a live buffer of the size
    // passed; pointers inside it (insns, license, log, key, value) point to buffers the
    // callers keep alive across the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            attr.0.len() as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(sys::last_error(what));
    }
    Ok(r)
}

fn fd(r: i64) -> OwnedFd {
    // SAFETY: the bpf commands that return a descriptor return a new one nobody else owns.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// The installed program: the map, the program and the link that attaches it. Dropping it
/// detaches the program.
pub(crate) struct XdpRedirect {
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
    /// Whether it runs in the driver.
    pub native: bool,
}

impl XdpRedirect {
    /// Creates the map with `(queue, socket)` entries, loads the program and attaches it to
    /// interface `ifindex` (called `iface` in messages).
    pub(crate) fn install(
        iface: &str,
        ifindex: u32,
        max_queue: u32,
        sockets: &[(u32, RawFd)],
        mode: XdpAttachMode,
    ) -> Result<XdpRedirect, LiveError> {
        let map = fd(bpf(
            BPF_MAP_CREATE,
            Attr::new()
                .u32(0, BPF_MAP_TYPE_XSKMAP)
                .u32(4, 4)
                .u32(8, 4)
                .u32(12, max_queue + 1)
                .name(28, "netsift_xsks"),
            "creating the XSKMAP for AF_XDP",
        )?);
        for &(queue, sock) in sockets {
            let key = queue;
            let value = sock as u32;
            bpf(
                BPF_MAP_UPDATE_ELEM,
                Attr::new()
                    .u32(0, map.as_raw_fd() as u32)
                    .u64(8, &key as *const u32 as u64)
                    .u64(16, &value as *const u32 as u64),
                &format!("registering the AF_XDP socket of queue {queue}"),
            )?;
        }
        let insns = program(map.as_raw_fd());
        let prog = load(&insns, "netsift_xsk", "loading the AF_XDP redirect program")?;
        let (link, native) = attach(&prog, iface, ifindex, mode)?;
        Ok(XdpRedirect {
            _link: link,
            _prog: prog,
            _map: map,
            native,
        })
    }
}

/// Loads an XDP program (`insns`, encoded) named `name`; `what` says what for in errors, which
/// carry the verifier's log when it refused the program.
fn load(insns: &[u8], name: &str, what: &str) -> Result<OwnedFd, LiveError> {
    let license = b"MIT\0";
    let mut log = vec![0u8; 4096];
    let load = |log_level: u32, log: &mut Vec<u8>| {
        bpf(
            BPF_PROG_LOAD,
            Attr::new()
                .u32(0, BPF_PROG_TYPE_XDP)
                .u32(4, (insns.len() / 8) as u32)
                .u64(8, insns.as_ptr() as u64)
                .u64(16, license.as_ptr() as u64)
                .u32(24, log_level)
                .u32(28, if log_level > 0 { log.len() as u32 } else { 0 })
                .u64(
                    32,
                    if log_level > 0 {
                        log.as_mut_ptr() as u64
                    } else {
                        0
                    },
                )
                .name(48, name)
                .u32(68, BPF_XDP),
            what,
        )
    };
    match load(0, &mut log) {
        Ok(p) => Ok(fd(p)),
        Err(e) => {
            // Load again with the verifier's log for the message.
            let _ = load(1, &mut log);
            let text = String::from_utf8_lossy(&log);
            let text = text.trim_end_matches('\0').trim();
            Err(if text.is_empty() {
                e
            } else {
                LiveError::new(e.kind(), format!("{e}; verifier: {text}"))
            })
        }
    }
}

/// Attaches `prog` to interface `ifindex` (called `iface` in messages) with a link, in `mode`:
/// the link, and whether the program runs in the driver.
fn attach(
    prog: &OwnedFd,
    iface: &str,
    ifindex: u32,
    mode: XdpAttachMode,
) -> Result<(OwnedFd, bool), LiveError> {
    let attach = |flags: u32| {
        bpf(
            BPF_LINK_CREATE,
            Attr::new()
                .u32(0, prog.as_raw_fd() as u32)
                .u32(4, ifindex)
                .u32(8, BPF_XDP)
                .u32(12, flags),
            &format!("attaching the XDP program to {iface}"),
        )
    };
    let (link, native) = match mode {
        XdpAttachMode::Native => (attach(XDP_FLAGS_DRV_MODE)?, true),
        XdpAttachMode::Generic => (attach(XDP_FLAGS_SKB_MODE)?, false),
        XdpAttachMode::Auto => match attach(XDP_FLAGS_DRV_MODE) {
            Ok(l) => (l, true),
            Err(e) if e.kind() == LiveErrorKind::Busy => return Err(busy(iface, e)),
            Err(_) => (attach(XDP_FLAGS_SKB_MODE)?, false),
        },
    };
    Ok((fd(link), native))
}

/// An XDP program that passes every frame on to the kernel's stack (`r0 = XDP_PASS; exit`),
/// attached to an interface for as long as the value lives.
///
/// It changes nothing a frame goes through but the program itself; its use is the receive
/// path it selects: a veth end with a native XDP program receives through NAPI (in a soft
/// interrupt or, with `/sys/class/net/DEV/threaded`, a kernel thread of its own) and, GRO being
/// off, delivers every frame as sent, unmerged and in order — what a benchmark needs to
/// measure the kernel's receive work apart from the sender's.
pub struct XdpPass {
    _link: OwnedFd,
    _prog: OwnedFd,
    native: bool,
}

impl XdpPass {
    /// Attaches the program to `iface` (of the calling thread's network namespace).
    pub fn attach(iface: &str, mode: XdpAttachMode) -> Result<XdpPass, LiveError> {
        let ifindex = sys::if_index(iface)?;
        let insns = [
            [0xb7, 0, 0, 0, 2, 0, 0, 0], // mov r0, XDP_PASS
            [0x95, 0, 0, 0, 0, 0, 0, 0], // exit
        ]
        .concat();
        let prog = load(&insns, "netsift_pass", "loading the XDP pass program")?;
        let (link, native) = attach(&prog, iface, ifindex, mode)?;
        Ok(XdpPass {
            _link: link,
            _prog: prog,
            native,
        })
    }

    /// Whether the program runs in the driver (native XDP).
    pub fn native(&self) -> bool {
        self.native
    }
}

impl std::fmt::Debug for XdpPass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpPass")
            .field("native", &self.native)
            .finish()
    }
}

fn busy(iface: &str, e: LiveError) -> LiveError {
    LiveError::new(
        LiveErrorKind::Busy,
        format!(
            "{e} ({iface} already has an XDP program; `ip link set dev {iface} xdp off` removes one attached with ip)"
        ),
    )
}

/// The program's instructions, encoded (8 bytes each).
fn program(map_fd: RawFd) -> Vec<u8> {
    let insn = |code: u8, dst: u8, src: u8, off: i16, imm: i32| -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = code;
        b[1] = (dst & 0xf) | (src << 4);
        b[2..4].copy_from_slice(&off.to_ne_bytes());
        b[4..8].copy_from_slice(&imm.to_ne_bytes());
        b
    };
    [
        insn(0x61, 2, 1, 16, 0),     // ldxw r2, [r1 + 16]
        insn(0x18, 1, 1, 0, map_fd), // lddw r1, map (BPF_PSEUDO_MAP_FD)
        insn(0, 0, 0, 0, 0),         //   (second half)
        insn(0xb7, 3, 0, 0, 2),      // mov r3, XDP_PASS
        insn(0x85, 0, 0, 0, 51),     // call bpf_redirect_map
        insn(0x95, 0, 0, 0, 0),      // exit
    ]
    .concat()
}
