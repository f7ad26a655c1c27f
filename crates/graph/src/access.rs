//! Whose rights open the paths a graph names (`(file,"x.pcap")`, `(pcap,"out.pcap")`,
//! `(nic,"x.pcap",…)`, `(classify,"rules")`, `(fpl,"@prog.fpl")`).
//!
//! In a process of one user (the command line, an application running its own graph) paths
//! are opened with the process's rights ([`Access::Own`]). `netsiftd` runs as root and opens
//! them for the user who asked ([`Access::User`]): on a thread of its own that takes the
//! user's filesystem user and group ids and supplementary groups (`setfsuid`, `setfsgid`,
//! `setgroups` as raw system calls, which on Linux change the calling thread only), so the
//! kernel decides with the user's rights — a file the user cannot read is not read for them,
//! and a file the daemon creates belongs to them. For a user, only regular files are opened:
//! the path is first opened with `O_PATH` (which never blocks and has no side effects on
//! devices), checked with `fstat`, then reopened through `/proc/self/fd`, so a FIFO, a device
//! or a directory is refused without the daemon ever waiting on it. Texts read whole (rule
//! sets, FPL programs) are bounded in size.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A user's identity for opening files: filesystem ids and supplementary groups.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Creds {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary group ids.
    pub groups: Vec<u32>,
}

/// Whose rights open paths; see the module documentation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Access {
    /// This process's own rights; any kind of file.
    #[default]
    Own,
    /// A user's rights, regular files only, never blocking.
    User(Creds),
}

impl Access {
    /// A key that tells accesses with different rights apart (filter instances that opened a
    /// path are shared only between flows of the same access).
    pub fn key(&self) -> String {
        match self {
            Access::Own => "own".into(),
            Access::User(c) => format!("uid={}", c.uid),
        }
    }

    /// Open `path` for reading.
    pub fn open_read(&self, path: &str) -> io::Result<File> {
        match self {
            Access::Own => File::open(path),
            Access::User(c) => as_user(c, || open_regular(path, libc::O_RDONLY, 0)),
        }
    }

    /// Create (or truncate) `path` for writing, mode 0644 before the umask.
    pub fn create(&self, path: &str) -> io::Result<File> {
        match self {
            Access::Own => File::create(path),
            Access::User(c) => as_user(c, || {
                open_regular(path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644)
            }),
        }
    }

    /// The text of `path`, at most `limit` bytes of UTF-8.
    pub fn read_text(&self, path: &str, limit: u64) -> io::Result<String> {
        let mut text = String::new();
        self.open_read(path)?
            .take(limit + 1)
            .read_to_string(&mut text)?;
        if text.len() as u64 > limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the file is larger than {limit} bytes"),
            ));
        }
        Ok(text)
    }
}

/// Run `f` on a new thread with `creds` as its filesystem identity.
fn as_user<T: Send>(creds: &Creds, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            take_identity(creds)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the thread opening the file panicked")))
    })
}

/// Give the calling thread `creds` as its filesystem ids and groups (raw system calls: the C
/// library's `setgroups` would change every thread of the process).
fn take_identity(creds: &Creds) -> io::Result<()> {
    let groups: Vec<libc::gid_t> = creds.groups.clone();
    // SAFETY: a valid array of `groups.len()` ids; the calls change this thread's credentials.
    unsafe {
        if libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        libc::syscall(libc::SYS_setfsgid, creds.gid);
        libc::syscall(libc::SYS_setfsuid, creds.uid);
        // setfsuid/setfsgid report no error: read the ids back (-1 changes nothing).
        let uid = libc::syscall(libc::SYS_setfsuid, u32::MAX) as u32;
        let gid = libc::syscall(libc::SYS_setfsgid, u32::MAX) as u32;
        if (uid, gid) != (creds.uid, creds.gid) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "cannot take the identity uid {} gid {} to open the file",
                    creds.uid, creds.gid
                ),
            ));
        }
    }
    Ok(())
}

/// Open `path` with `flags` if it is (or, with `O_CREAT`, becomes) a regular file; never waits
/// for a FIFO's other end and never opens a device.
fn open_regular(path: &str, flags: libc::c_int, mode: libc::mode_t) -> io::Result<File> {
    let cpath = CString::new(Path::new(path).as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in the path"))?;
    let common = libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK;
    let fd = if flags & libc::O_CREAT != 0 {
        // Creating: O_NONBLOCK keeps a FIFO's open from waiting; the type is checked after.
        // SAFETY: a valid C string.
        cvt(unsafe { libc::open(cpath.as_ptr(), flags | common, libc::c_uint::from(mode)) })?
    } else {
        // SAFETY: a valid C string; O_PATH opens nothing but the name.
        let p = cvt(unsafe { libc::open(cpath.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) })?;
        // SAFETY: a new descriptor we own.
        let p = unsafe { OwnedFd::from_raw_fd(p) };
        check_regular(&p)?;
        let proc = CString::new(format!("/proc/self/fd/{}", p.as_raw_fd()))
            .map_err(|_| io::Error::other("bad descriptor path"))?;
        // SAFETY: a valid C string; the permission check is this thread's.
        cvt(unsafe { libc::open(proc.as_ptr(), flags | common) })?
    };
    // SAFETY: a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    check_regular(&fd)?;
    // Reads and writes of a regular file do not wait for a peer: clear O_NONBLOCK again.
    // SAFETY: fcntl on a valid descriptor.
    unsafe {
        let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    Ok(File::from(fd))
}

fn check_regular(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a zeroed stat buffer filled by fstat on a valid descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (netsiftd opens only regular files for its users)",
        ));
    }
    Ok(())
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn nobody() -> Access {
        Access::User(Creds {
            uid: 65534,
            gid: 65534,
            groups: Vec::new(),
        })
    }

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("netsift-access-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    }

    /// Needs root (to take another identity), as the daemon has.
    fn root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn a_user_reads_only_what_they_may() {
        if !root() {
            panic!("this test needs root (it opens files as uid 65534)");
        }
        let d = dir("read");
        let secret = d.join("secret");
        std::fs::write(&secret, b"root only").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let public = d.join("public");
        std::fs::write(&public, b"everyone").unwrap();
        std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();
        let s = secret.to_str().unwrap();
        let p = public.to_str().unwrap();
        let e = nobody().open_read(s).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert_eq!(nobody().read_text(p, 100).unwrap(), "everyone");
        assert_eq!(Access::Own.read_text(s, 100).unwrap(), "root only");
        // The process itself kept its rights (only the opening thread changed).
        assert!(File::open(&secret).is_ok());
        // Bounded texts.
        let e = nobody().read_text(p, 3).unwrap_err();
        assert!(e.to_string().contains("larger than 3 bytes"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_user_opens_no_fifo_device_or_directory_and_never_waits() {
        if !root() {
            panic!("this test needs root (it opens files as uid 65534)");
        }
        let d = dir("kinds");
        let fifo = d.join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
        std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o666)).unwrap();
        let t = std::time::Instant::now();
        for path in [
            fifo.to_str().unwrap(),
            "/dev/zero",
            "/dev/null",
            d.to_str().unwrap(),
        ] {
            let e = nobody().open_read(path).unwrap_err();
            assert!(e.to_string().contains("not a regular file"), "{path}: {e}");
        }
        let e = nobody().create(fifo.to_str().unwrap()).unwrap_err();
        // No reader: a non-blocking open for writing fails at once (ENXIO).
        assert_eq!(e.raw_os_error(), Some(libc::ENXIO), "{e}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "an open waited"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_created_for_a_user_is_theirs() {
        if !root() {
            panic!("this test needs root (it creates files as uid 65534)");
        }
        use std::os::unix::fs::MetadataExt;
        let d = dir("create");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let out = d.join("out.pcap");
        drop(nobody().create(out.to_str().unwrap()).unwrap());
        let m = std::fs::metadata(&out).unwrap();
        assert_eq!((m.uid(), m.gid()), (65534, 65534));
        // Not where the user may not write.
        let locked = dir("locked");
        let e = nobody()
            .create(locked.join("x").to_str().unwrap())
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&locked);
    }
}
