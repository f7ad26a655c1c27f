//! The crate's error type: what failed, why, and for a rejected program the verifier's log.

use std::fmt;

/// What kind of problem an [`Error`] is.
///
/// New kinds may be added; match with a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The kernel's verifier rejected the program; [`Error::verifier_log`] says why.
    Verifier,
    /// The caller lacks a capability (`CAP_BPF`, `CAP_NET_ADMIN`, `CAP_PERFMON`: run as root).
    PermissionDenied,
    /// This kernel lacks the feature (program, map, attach or link type, helper), or the
    /// classic program uses something eBPF cannot express for the program type.
    Unsupported,
    /// No such key, interface or object.
    NotFound,
    /// The interface or hook already has a program.
    Busy,
    /// The kernel refused the arguments (`EINVAL`, `E2BIG`, `ERANGE`…), e.g. a test packet
    /// shorter than an Ethernet header or longer than a page.
    InvalidArgument,
    /// The classic program is not valid (see the message), or an assembled program is
    /// malformed (an unbound label, a jump too far).
    InvalidProgram,
    /// Any other operating-system error.
    Os,
}

/// An error from building, translating, loading, attaching or running eBPF.
///
/// The message names the operation (`loading SCHED_CLS program "netsift"`), the cause (the
/// errno's text) and, for programs the verifier rejected, ends with the tail of its log; the
/// whole log is in [`Error::verifier_log`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    context: String,
    errno: Option<i32>,
    log: Option<String>,
}

/// Lines of the verifier's log shown by `Display` (the log's end says what went wrong).
const LOG_TAIL_LINES: usize = 40;

impl Error {
    /// An error without an errno.
    pub(crate) fn new(kind: ErrorKind, context: impl Into<String>) -> Error {
        Error {
            kind,
            context: context.into(),
            errno: None,
            log: None,
        }
    }

    /// An error from a failed system call with `errno`.
    pub(crate) fn os(errno: i32, context: impl Into<String>) -> Error {
        let kind = match errno {
            libc::EPERM | libc::EACCES => ErrorKind::PermissionDenied,
            libc::ENOENT | libc::ENODEV | libc::ENXIO => ErrorKind::NotFound,
            libc::EBUSY | libc::EEXIST => ErrorKind::Busy,
            libc::EINVAL | libc::E2BIG | libc::ERANGE | libc::EFAULT | libc::ENOSPC => {
                ErrorKind::InvalidArgument
            }
            libc::EOPNOTSUPP | libc::ENOSYS | libc::EPROTONOSUPPORT => ErrorKind::Unsupported,
            _ => ErrorKind::Os,
        };
        Error {
            kind,
            context: context.into(),
            errno: Some(errno),
            log: None,
        }
    }

    /// The same error, recorded as a verifier rejection with `log`.
    pub(crate) fn with_verifier_log(mut self, log: String) -> Error {
        self.kind = ErrorKind::Verifier;
        self.log = Some(log);
        self
    }

    /// What kind of problem this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The `errno` of the failed system call, if one failed.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }

    /// The verifier's whole log, for programs it rejected.
    pub fn verifier_log(&self) -> Option<&str> {
        self.log.as_deref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.context)?;
        match (self.errno, self.kind) {
            (Some(e), ErrorKind::Verifier) => write!(
                f,
                ": rejected by the verifier ({})",
                std::io::Error::from_raw_os_error(e)
            )?,
            (Some(e), _) => {
                write!(f, ": {}", std::io::Error::from_raw_os_error(e))?;
                if e == libc::EPERM || e == libc::EACCES {
                    f.write_str(" (bpf(2) needs root: CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON)")?;
                }
            }
            (None, _) => {}
        }
        if let Some(log) = &self.log {
            let lines: Vec<&str> = log.lines().collect();
            let skip = lines.len().saturating_sub(LOG_TAIL_LINES);
            f.write_str("\nverifier log")?;
            if skip > 0 {
                write!(f, " (last {LOG_TAIL_LINES} of {} lines)", lines.len())?;
            }
            f.write_str(":")?;
            for l in &lines[skip..] {
                write!(f, "\n  {l}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages() {
        let e = Error::os(libc::EPERM, "loading XDP program \"x\"");
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
        assert_eq!(
            e.to_string(),
            "loading XDP program \"x\": Operation not permitted (os error 1) (bpf(2) needs \
             root: CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON)"
        );
        let e = Error::os(libc::EACCES, "loading")
            .with_verifier_log("0: (95) exit\nR0 !read_ok\n".into());
        assert_eq!(e.kind(), ErrorKind::Verifier);
        assert_eq!(
            e.to_string(),
            "loading: rejected by the verifier (Permission denied (os error 13))\nverifier \
             log:\n  0: (95) exit\n  R0 !read_ok"
        );
        let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let e = Error::os(libc::EINVAL, "x").with_verifier_log(long);
        let s = e.to_string();
        assert!(s.contains("(last 40 of 100 lines)"), "{s}");
        assert!(s.ends_with("line 99") && !s.contains("line 59\n"), "{s}");
        assert_eq!(e.verifier_log().unwrap().lines().count(), 100);
    }
}
