//! Attaching programs: socket filters (`SO_ATTACH_BPF`), XDP and tcx through BPF links.
//!
//! A [`Link`] (`BPF_LINK_CREATE`) is a file descriptor: the program stays attached while it is
//! open and is detached when it closes — when the `Link` is dropped, and also when the
//! process exits for any reason (Ctrl-C included), since the kernel closes its descriptors.
//! Nothing is left behind on the interface. A socket filter lives as long as its socket.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::error::{Error, ErrorKind, Result};
use crate::prog::{ATTACH_XDP, LoadedProgram, ProgType};
use crate::sys::{self, Attr};

/// `SO_ATTACH_BPF`.
const SO_ATTACH_BPF: libc::c_int = 50;
/// `SO_DETACH_BPF` (the same number as `SO_DETACH_FILTER`).
const SO_DETACH_BPF: libc::c_int = 27;
/// `XDP_FLAGS_SKB_MODE`.
const XDP_FLAGS_SKB_MODE: u32 = 2;
/// `XDP_FLAGS_DRV_MODE`.
const XDP_FLAGS_DRV_MODE: u32 = 4;
/// `BPF_TCX_INGRESS`.
const ATTACH_TCX_INGRESS: u32 = 46;
/// `BPF_TCX_EGRESS`.
const ATTACH_TCX_EGRESS: u32 = 47;

/// Attach a SOCKET_FILTER program to a socket (`SO_ATTACH_BPF`); it replaces any filter the
/// socket had. The socket then receives only the packets the program accepts, cut to the
/// length it returns.
pub fn attach_socket_filter(socket: BorrowedFd<'_>, prog: &LoadedProgram) -> Result<()> {
    if prog.prog_type() != ProgType::SocketFilter {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "attaching program {:?} to a socket: it is a {} program, not SOCKET_FILTER",
                prog.name(),
                prog.prog_type()
            ),
        ));
    }
    let fd: libc::c_int = prog.as_raw_fd();
    // SAFETY: setsockopt reads an int from a live local.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ATTACH_BPF,
            (&fd as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(Error::os(
            sys::errno(),
            format!("attaching socket filter {:?}", prog.name()),
        ));
    }
    Ok(())
}

/// Remove the socket's filter (`SO_DETACH_BPF`); `false` if it had none.
pub fn detach_socket_filter(socket: BorrowedFd<'_>) -> Result<bool> {
    let zero: libc::c_int = 0;
    // SAFETY: setsockopt reads an int from a live local.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_DETACH_BPF,
            (&zero as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        let e = sys::errno();
        return if e == libc::ENOENT {
            Ok(false)
        } else {
            Err(Error::os(e, "detaching a socket filter"))
        };
    }
    Ok(true)
}

/// The index of the network interface `name` (`if_nametoindex`).
pub fn ifindex(name: &str) -> Result<u32> {
    let c = CString::new(name).map_err(|_| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("interface name {name:?} contains a NUL byte"),
        )
    })?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(Error::os(sys::errno(), format!("finding interface {name}")));
    }
    Ok(i)
}

/// Where an XDP program runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum XdpMode {
    /// In the driver if it supports XDP, otherwise generic.
    #[default]
    Auto,
    /// In the driver (native XDP); fails where the driver has no XDP support.
    Native,
    /// Generic XDP, in the kernel's receive path after the socket buffer is built; works on
    /// every interface.
    Generic,
}

/// A tc hook (tcx, Linux 6.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcxDirection {
    /// Packets received by the interface.
    Ingress,
    /// Packets sent by the interface.
    Egress,
}

/// What a [`Link`] attaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// XDP; `native` says whether it runs in the driver.
    Xdp {
        /// In the driver rather than generic.
        native: bool,
    },
    /// tcx at one direction.
    Tcx(TcxDirection),
}

/// An attached program; dropping the link (or exiting) detaches it.
#[derive(Debug)]
pub struct Link {
    fd: OwnedFd,
    kind: LinkKind,
    ifindex: u32,
}

impl Link {
    fn create(
        prog: &LoadedProgram,
        ifindex: u32,
        attach: u32,
        flags: u32,
    ) -> std::result::Result<OwnedFd, i32> {
        let mut attr = Attr::new();
        attr.u32(0, prog.as_raw_fd() as u32)
            .u32(4, ifindex)
            .u32(8, attach)
            .u32(12, flags);
        // SAFETY: no pointers in the attribute.
        unsafe { sys::bpf(sys::LINK_CREATE, &mut attr) }.map(sys::owned_fd)
    }

    /// Attach an XDP program to interface `ifindex` (`BPF_LINK_CREATE`, `BPF_XDP`). With
    /// [`XdpMode::Auto`], native mode is tried first; an interface that already has an XDP
    /// program gives [`ErrorKind::Busy`].
    pub fn xdp(prog: &LoadedProgram, ifindex: u32, mode: XdpMode) -> Result<Link> {
        let what = |m: &str| {
            format!(
                "attaching XDP program {:?} to interface {ifindex} ({m})",
                prog.name()
            )
        };
        let attach = |flags: u32, m: &str| {
            Link::create(prog, ifindex, ATTACH_XDP, flags).map_err(|e| Error::os(e, what(m)))
        };
        let (fd, native) = match mode {
            XdpMode::Native => (attach(XDP_FLAGS_DRV_MODE, "native")?, true),
            XdpMode::Generic => (attach(XDP_FLAGS_SKB_MODE, "generic")?, false),
            XdpMode::Auto => match attach(XDP_FLAGS_DRV_MODE, "native") {
                Ok(fd) => (fd, true),
                Err(e) if e.kind() == ErrorKind::Busy => return Err(e),
                Err(_) => (attach(XDP_FLAGS_SKB_MODE, "generic")?, false),
            },
        };
        Ok(Link {
            fd,
            kind: LinkKind::Xdp { native },
            ifindex,
        })
    }

    /// Attach a SCHED_CLS program to interface `ifindex`'s tcx hook (`BPF_TCX_INGRESS` or
    /// `BPF_TCX_EGRESS`, Linux 6.6), after the programs already there. Its return value is a
    /// `TC_ACT_*` code (`TC_ACT_OK` passes, `TC_ACT_SHOT` drops).
    pub fn tcx(prog: &LoadedProgram, ifindex: u32, direction: TcxDirection) -> Result<Link> {
        let attach = match direction {
            TcxDirection::Ingress => ATTACH_TCX_INGRESS,
            TcxDirection::Egress => ATTACH_TCX_EGRESS,
        };
        let fd = Link::create(prog, ifindex, attach, 0).map_err(|e| {
            Error::os(
                e,
                format!(
                    "attaching tc program {:?} to interface {ifindex} ({direction:?})",
                    prog.name()
                ),
            )
        })?;
        Ok(Link {
            fd,
            kind: LinkKind::Tcx(direction),
            ifindex,
        })
    }

    /// What this link attaches.
    pub fn kind(&self) -> LinkKind {
        self.kind
    }

    /// The interface.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Detach now (the same as dropping the link).
    pub fn detach(self) {}
}

impl AsFd for Link {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
