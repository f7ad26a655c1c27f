//! Unix `SOCK_SEQPACKET` sockets with file-descriptor passing (`SCM_RIGHTS`) and peer
//! credentials (`SO_PEERCRED`): the transport between `netsiftd` and its applications.
//!
//! A sequenced-packet socket keeps message boundaries, so a request or a reply is exactly one
//! `send` and one `recv`, and the descriptors sent with a reply arrive with it.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The most bytes of one message (a flow's graph text, a reply with an error message).
pub const MAX_MESSAGE: usize = 64 * 1024;
/// The most descriptors passed with one message.
pub const MAX_FDS: usize = 64;

/// Who is at the other end of a connection (`SO_PEERCRED`, taken when it connected).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerCred {
    /// Process id.
    pub pid: i32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn sockaddr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain data; all-zero is valid.
    let mut addr: libc::sockaddr_un = unsafe { zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.is_empty() || bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "socket path {} must be 1 to {} bytes without NUL",
                path.display(),
                addr.sun_path.len() - 1
            ),
        ));
    }
    for (d, &s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    let len = size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

fn socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket creation.
    let fd =
        cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A listening socket.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
}

impl Listener {
    /// Listen at `path` (a stale socket file there is replaced; any other file is an error),
    /// with permissions `mode` (e.g. `0o660`).
    ///
    /// The socket never exists at `path` with other permissions, and nothing at `path` is
    /// followed: it is bound and given its mode inside a directory of its own (mode 0700,
    /// beside `path`), then renamed into place, which replaces a stale socket — or a symlink
    /// put there meanwhile, not what it points to — in one step.
    pub fn bind(path: &Path, mode: u32) -> io::Result<Listener> {
        sockaddr(path)?;
        match std::fs::symlink_metadata(path) {
            Ok(m) => {
                use std::os::unix::fs::FileTypeExt;
                if !m.file_type().is_socket() {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{} exists and is not a socket", path.display()),
                    ));
                }
                if Conn::connect(path).is_ok() {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("another daemon listens on {}", path.display()),
                    ));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        if path.file_name().is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("socket path {} names no file", path.display()),
            ));
        }
        // One directory per bind: a process may bind several daemons at once (tests do).
        static BINDS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = BINDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = path.with_file_name(format!(".netsiftd-{}-{n}", std::process::id()));
        let inner = dir.join("s");
        // Bound in the private directory first: that path must fit a socket address too.
        sockaddr(&inner).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "socket path {} is too long: it is bound as {} first",
                    path.display(),
                    inner.display()
                ),
            )
        })?;
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        }
        let result = (|| {
            let fd = socket()?;
            let (addr, len) = sockaddr(&inner)?;
            // SAFETY: a valid address of `len` bytes.
            cvt(unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&raw const addr).cast::<libc::sockaddr>(),
                    len,
                )
            })?;
            let cpath = CString::new(inner.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
            // SAFETY: a valid C string, in a directory only this process's user can enter.
            cvt(unsafe { libc::chmod(cpath.as_ptr(), mode as libc::mode_t) })?;
            std::fs::rename(&inner, path)?;
            // SAFETY: a bound socket.
            cvt(unsafe { libc::listen(fd.as_raw_fd(), 64) })?;
            set_nonblocking(fd.as_raw_fd())?;
            Ok(Listener { fd })
        })();
        let _ = std::fs::remove_file(&inner);
        let _ = std::fs::remove_dir(&dir);
        result
    }

    /// Accept a connection if one is waiting (`Ok(None)` otherwise), with the peer's
    /// credentials. The connection is non-blocking: [`Conn::try_send`] answers on it without
    /// ever waiting for the peer.
    pub fn accept(&self) -> io::Result<Option<(Conn, PeerCred)>> {
        // SAFETY: no address is requested.
        let r = unsafe {
            libc::accept4(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: a new descriptor we own.
        let conn = Conn {
            fd: unsafe { OwnedFd::from_raw_fd(r) },
        };
        let cred = conn.peer_cred()?;
        Ok(Some((conn, cred)))
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a valid descriptor.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) })?;
    Ok(())
}

/// One connection: messages with descriptors.
#[derive(Debug)]
pub struct Conn {
    fd: OwnedFd,
}

impl Conn {
    /// Connect to the daemon at `path`.
    pub fn connect(path: &Path) -> io::Result<Conn> {
        let fd = socket()?;
        let (addr, len) = sockaddr(path)?;
        // SAFETY: a valid address of `len` bytes.
        cvt(unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&raw const addr).cast::<libc::sockaddr>(),
                len,
            )
        })?;
        Ok(Conn { fd })
    }

    /// The credentials of the process at the other end (as of when it connected).
    pub fn peer_cred(&self) -> io::Result<PeerCred> {
        // SAFETY: ucred is plain data.
        let mut cred: libc::ucred = unsafe { zeroed() };
        let mut len = size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: a buffer of `len` bytes.
        cvt(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&raw mut cred).cast(),
                &mut len,
            )
        })?;
        Ok(PeerCred {
            pid: cred.pid,
            uid: cred.uid,
            gid: cred.gid,
        })
    }

    /// The supplementary groups of the process at the other end, as of when it connected
    /// (`SO_PEERGROUPS`).
    pub fn peer_groups(&self) -> io::Result<Vec<u32>> {
        let mut groups: Vec<libc::gid_t> = vec![0; 64];
        loop {
            let mut len = (groups.len() * size_of::<libc::gid_t>()) as libc::socklen_t;
            // SAFETY: a buffer of `len` bytes.
            let r = unsafe {
                libc::getsockopt(
                    self.fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_PEERGROUPS,
                    groups.as_mut_ptr().cast(),
                    &mut len,
                )
            };
            let n = len as usize / size_of::<libc::gid_t>();
            if r == 0 {
                groups.truncate(n);
                return Ok(groups);
            }
            let e = io::Error::last_os_error();
            // ERANGE: `len` says how much is needed (at most NGROUPS_MAX, 65536).
            if e.raw_os_error() == Some(libc::ERANGE) && n > groups.len() && n <= 65_536 {
                groups.resize(n, 0);
                continue;
            }
            return Err(e);
        }
    }

    /// Send one message with `fds` (duplicated into the receiver), waiting for room if the
    /// connection is blocking.
    pub fn send(&self, msg: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        self.send_with(msg, fds, 0).map(|_| ())
    }

    /// Send one message with `fds` if the peer's receive queue has room now: `Ok(false)` when
    /// it has not (nothing was sent).
    pub fn try_send(&self, msg: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<bool> {
        match self.send_with(msg, fds, libc::MSG_DONTWAIT) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn send_with(&self, msg: &[u8], fds: &[BorrowedFd<'_>], flags: libc::c_int) -> io::Result<()> {
        if fds.len() > MAX_FDS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "too many descriptors",
            ));
        }
        let mut iov = libc::iovec {
            iov_base: msg.as_ptr() as *mut libc::c_void,
            iov_len: msg.len(),
        };
        let fd_bytes = size_of::<RawFd>() * fds.len();
        // SAFETY: CMSG_SPACE is a pure computation.
        let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
        let mut cbuf = vec![0u64; space.div_ceil(8)];
        // SAFETY: msghdr is plain data.
        let mut hdr: libc::msghdr = unsafe { zeroed() };
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        if !fds.is_empty() {
            hdr.msg_control = cbuf.as_mut_ptr().cast();
            hdr.msg_controllen = space as _;
            // SAFETY: the control buffer holds one header with `fds.len()` descriptors.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&hdr);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                for (i, fd) in fds.iter().enumerate() {
                    data.add(i).write_unaligned(fd.as_raw_fd());
                }
            }
        }
        loop {
            // SAFETY: a valid message header; MSG_NOSIGNAL: a dead peer is an error, not a
            // SIGPIPE.
            let r = unsafe { libc::sendmsg(self.fd.as_raw_fd(), &hdr, libc::MSG_NOSIGNAL | flags) };
            if r >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Receive one message and its descriptors; `Ok(None)` when the peer closed the connection.
    /// With `wait == false`, `Err(WouldBlock)` when no message is there.
    pub fn recv(&self, wait: bool) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
        // PERF: not zeroed (64 KiB of memset per message was most of a small request's cost);
        // the kernel writes the first `n` bytes, and only those become the vector's contents.
        let mut buf: Vec<u8> = Vec::with_capacity(MAX_MESSAGE);
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: MAX_MESSAGE,
        };
        // SAFETY: CMSG_SPACE is a pure computation.
        let space = unsafe { libc::CMSG_SPACE((size_of::<RawFd>() * MAX_FDS) as u32) } as usize;
        let mut cbuf = vec![0u64; space.div_ceil(8)];
        // SAFETY: msghdr is plain data.
        let mut hdr: libc::msghdr = unsafe { zeroed() };
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        hdr.msg_control = cbuf.as_mut_ptr().cast();
        hdr.msg_controllen = space as _;
        let flags = libc::MSG_CMSG_CLOEXEC | if wait { 0 } else { libc::MSG_DONTWAIT };
        let n = loop {
            // SAFETY: a valid header with buffers of the sizes it states.
            let r = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut hdr, flags) };
            if r >= 0 {
                break r as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        let mut fds = Vec::new();
        // SAFETY: walking the control messages the kernel wrote into `cbuf`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&hdr);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c).cast::<RawFd>();
                    let len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    for i in 0..len / size_of::<RawFd>() {
                        fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
                c = libc::CMSG_NXTHDR(&hdr, c);
            }
        }
        if hdr.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("message longer than {MAX_MESSAGE} bytes or with too many descriptors"),
            ));
        }
        if n == 0 && fds.is_empty() {
            return Ok(None);
        }
        // SAFETY: recvmsg wrote `n` ≤ MAX_MESSAGE bytes (the capacity) at the start of `buf`
        // (a truncated message was refused above).
        unsafe { buf.set_len(n.min(MAX_MESSAGE)) };
        Ok(Some((buf, fds)))
    }
}

impl AsFd for Conn {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
