//! Programs: instructions with a program type ([`Program`]), loaded into the kernel
//! ([`LoadedProgram`], `BPF_PROG_LOAD`), and run on test packets (`BPF_PROG_TEST_RUN`).

use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::error::{Error, ErrorKind, Result};
use crate::insn::{Insn, encode};
use crate::sys::{self, Attr};

/// The kernel program types netsift generates code for (`enum bpf_prog_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProgType {
    /// `BPF_PROG_TYPE_SOCKET_FILTER`: attached to a socket with `SO_ATTACH_BPF`; returns the
    /// number of bytes to keep (0 drops the packet for this socket only). Reads the packet
    /// through the legacy `LD_ABS`/`LD_IND` instructions or helpers, not directly.
    SocketFilter,
    /// `BPF_PROG_TYPE_SCHED_CLS`: a tc classifier (cls_bpf in direct-action mode, or tcx);
    /// returns a `TC_ACT_*` code. Direct packet access between `data` and `data_end`.
    SchedCls,
    /// `BPF_PROG_TYPE_XDP`: runs in the driver (or generically) before the kernel allocates a
    /// socket buffer; returns an `XDP_*` action. Direct packet access.
    Xdp,
}

impl ProgType {
    /// The kernel's number for this type.
    pub const fn raw(self) -> u32 {
        match self {
            ProgType::SocketFilter => 1,
            ProgType::SchedCls => 3,
            ProgType::Xdp => 6,
        }
    }

    /// Whether `BPF_PROG_TEST_RUN` runs a program of this type on `data` as a whole, linear
    /// packet, with 4 KiB pages (measured on x86-64, Linux 6.18):
    ///
    /// - every type needs an Ethernet header (14 bytes);
    /// - SCHED_CLS and SOCKET_FILTER take at most 3,712 bytes (a page less the socket
    ///   buffer's head and tail room), and refuse IPv4 frames (Ethertype 0x0800) shorter
    ///   than 34 bytes and IPv6 frames (0x86dd) shorter than 54 — the network header must
    ///   be there;
    /// - XDP keeps at most 3,520 bytes linear (a page less 256 bytes of head room and the
    ///   tail room); the rest of a longer packet goes to fragments, which programs without
    ///   fragment support do not see.
    pub fn test_run_takes(self, data: &[u8]) -> bool {
        let n = data.len();
        if n < 14 {
            return false;
        }
        match self {
            ProgType::Xdp => n <= 3520,
            ProgType::SchedCls | ProgType::SocketFilter => {
                let min = match [data[12], data[13]] {
                    [0x08, 0x00] => 34,
                    [0x86, 0xdd] => 54,
                    _ => 14,
                };
                (min..=3712).contains(&n)
            }
        }
    }

    /// The kernel's name without the `BPF_PROG_TYPE_` prefix.
    pub const fn name(self) -> &'static str {
        match self {
            ProgType::SocketFilter => "SOCKET_FILTER",
            ProgType::SchedCls => "SCHED_CLS",
            ProgType::Xdp => "XDP",
        }
    }
}

impl fmt::Display for ProgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Return codes of tc programs (`TC_ACT_*`).
pub mod tc_act {
    /// Let the packet through (`TC_ACT_OK`).
    pub const OK: u32 = 0;
    /// Drop the packet (`TC_ACT_SHOT`).
    pub const SHOT: u32 = 2;
}

/// Return codes of XDP programs (`enum xdp_action`).
pub mod xdp_action {
    /// Drop with an error trace (`XDP_ABORTED`).
    pub const ABORTED: u32 = 0;
    /// Drop (`XDP_DROP`).
    pub const DROP: u32 = 1;
    /// Pass to the kernel's network stack (`XDP_PASS`).
    pub const PASS: u32 = 2;
    /// Send back out of the receiving interface (`XDP_TX`).
    pub const TX: u32 = 3;
    /// Redirect (`XDP_REDIRECT`).
    pub const REDIRECT: u32 = 4;
}

/// `BPF_XDP`, the attach type of XDP programs attached to an interface.
pub(crate) const ATTACH_XDP: u32 = 37;

/// A program's instructions and the program type they were written for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Program {
    prog_type: ProgType,
    insns: Vec<Insn>,
}

impl Program {
    /// A program of `prog_type` made of `insns`.
    pub fn new(prog_type: ProgType, insns: Vec<Insn>) -> Program {
        Program { prog_type, insns }
    }

    /// The program type.
    pub fn prog_type(&self) -> ProgType {
        self.prog_type
    }

    /// The instructions (an `ld_imm64` takes two slots).
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Number of instruction slots.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// Whether there are no instructions.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// Load the program into the kernel (see [`LoadedProgram::load`]).
    pub fn load(&self, opts: &LoadOptions) -> Result<LoadedProgram> {
        LoadedProgram::load(self.prog_type, &self.insns, opts)
    }
}

impl fmt::Display for Program {
    /// The listing of [`crate::disasm()`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::disasm::disasm(&self.insns))
    }
}

/// How to load a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// The program's name as tools show it (at most 15 characters are kept; characters other
    /// than letters, digits, `_` and `.` become `_`).
    pub name: String,
    /// The license string. GPL-compatible licenses (`"GPL"`, `"Dual MIT/GPL"`…) are needed for
    /// GPL-only helpers; none of the code netsift generates uses one.
    pub license: String,
    /// `expected_attach_type`; `None` picks `BPF_XDP` for XDP programs and 0 otherwise.
    pub expected_attach_type: Option<u32>,
    /// Ask the verifier for its statistics on success too (`BPF_LOG_STATS`); they are then in
    /// [`LoadedProgram::verifier_log`].
    pub stats: bool,
    /// Size of the log buffer for the retry after a failure (the kernel keeps the log's end
    /// when it does not fit).
    pub log_size: usize,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            name: "netsift".into(),
            license: "Dual MIT/GPL".into(),
            expected_attach_type: None,
            stats: false,
            log_size: 1 << 20,
        }
    }
}

/// `BPF_LOG_LEVEL1`: the verifier's trace of the path that failed.
const LOG_LEVEL1: u32 = 1;
/// `BPF_LOG_STATS`: instruction counts and verification time.
const LOG_STATS: u32 = 4;

/// A program the kernel accepted: its file descriptor, closed (and the program freed when
/// nothing else holds it, e.g. an attachment) on drop.
#[derive(Debug)]
pub struct LoadedProgram {
    fd: OwnedFd,
    prog_type: ProgType,
    name: String,
    len: usize,
    log: Option<String>,
}

impl LoadedProgram {
    /// Load `insns` as a program of `prog_type` (`BPF_PROG_LOAD`).
    ///
    /// The first attempt runs without a log, which is fastest; if the kernel refuses the
    /// program, it is loaded again with a log of `opts.log_size` bytes so that the error can
    /// carry the verifier's explanation ([`ErrorKind::Verifier`], [`Error::verifier_log`]).
    pub fn load(prog_type: ProgType, insns: &[Insn], opts: &LoadOptions) -> Result<LoadedProgram> {
        let what = || format!("loading {prog_type} program {:?}", opts.name);
        if insns.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidProgram,
                format!("{}: no instructions", what()),
            ));
        }
        let code = encode(insns);
        let mut license = opts.license.clone().into_bytes();
        license.retain(|&b| b != 0);
        license.push(0);
        let attach = opts.expected_attach_type.unwrap_or(match prog_type {
            ProgType::Xdp => ATTACH_XDP,
            _ => 0,
        });
        let load = |level: u32, log: &mut [u8]| -> std::result::Result<i64, i32> {
            let mut attr = Attr::new();
            attr.u32(0, prog_type.raw())
                .u32(4, insns.len() as u32)
                .ptr(8, code.as_ptr())
                .ptr(16, license.as_ptr())
                .name(48, &opts.name)
                .u32(68, attach);
            if level != 0 && !log.is_empty() {
                attr.u32(24, level)
                    .u32(28, log.len().min(u32::MAX as usize) as u32)
                    .ptr(32, log.as_mut_ptr());
            }
            // SAFETY: `code`, `license` and `log` outlive the call and have the sizes given.
            unsafe { sys::bpf(sys::PROG_LOAD, &mut attr) }
        };
        let log_text = |log: &[u8]| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            String::from_utf8_lossy(&log[..end]).trim_end().to_string()
        };
        let mut stats_log = vec![0u8; if opts.stats { 4096 } else { 0 }];
        let first = load(if opts.stats { LOG_STATS } else { 0 }, &mut stats_log);
        let (fd, log) = match first {
            Ok(fd) => (fd, opts.stats.then(|| log_text(&stats_log))),
            Err(errno) => {
                let mut log = vec![0u8; opts.log_size.max(4096)];
                match load(
                    LOG_LEVEL1 | if opts.stats { LOG_STATS } else { 0 },
                    &mut log,
                ) {
                    // Accepted the second time (should not happen): keep it.
                    Ok(fd) => (fd, opts.stats.then(|| log_text(&log))),
                    Err(errno2) => {
                        // ENOSPC only says that the log was cut (the kernel kept its end);
                        // the first attempt's errno is the real reason.
                        let errno = if errno2 == libc::ENOSPC {
                            errno
                        } else {
                            errno2
                        };
                        let text = log_text(&log);
                        let err = Error::os(errno, what());
                        return Err(if text.is_empty() {
                            err
                        } else {
                            err.with_verifier_log(text)
                        });
                    }
                }
            }
        };
        Ok(LoadedProgram {
            fd: sys::owned_fd(fd),
            prog_type,
            name: opts.name.clone(),
            len: insns.len(),
            log,
        })
    }

    /// The program type.
    pub fn prog_type(&self) -> ProgType {
        self.prog_type
    }

    /// The name it was loaded with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of instruction slots loaded.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the program is empty (never true: the kernel refuses empty programs).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The verifier's statistics, when loaded with [`LoadOptions::stats`].
    pub fn verifier_log(&self) -> Option<&str> {
        self.log.as_deref()
    }

    /// Instructions the verifier processed (`processed N insns` in its statistics; the
    /// kernel's limit is 1,000,000), when loaded with [`LoadOptions::stats`].
    pub fn verified_insns(&self) -> Option<u64> {
        let log = self.log.as_deref()?;
        let rest = &log[log.find("processed ")? + "processed ".len()..];
        rest.split_whitespace().next()?.parse().ok()
    }

    /// Run the program once on `data` (`BPF_PROG_TEST_RUN`) and return its return value.
    pub fn run(&self, data: &[u8]) -> Result<u32> {
        Ok(self.test_run(&TestRun::new(data))?.retval)
    }

    /// Run the program in the kernel on a test packet (`BPF_PROG_TEST_RUN`).
    ///
    /// For SCHED_CLS and XDP programs the packet must hold at least an Ethernet header (14
    /// bytes) and at most about a page (`4096` minus head and tail room: 3,520 bytes for XDP
    /// on x86-64; longer XDP packets get a non-linear tail the generated code does not read).
    /// SOCKET_FILTER programs see the packet from its network header (the kernel's test
    /// harness consumes the Ethernet header, as for a `SOCK_DGRAM` packet socket).
    pub fn test_run(&self, run: &TestRun<'_>) -> Result<TestRunOutput> {
        let mut attr = Attr::new();
        attr.u32(0, self.fd.as_raw_fd() as u32)
            .u32(8, run.data.len().min(u32::MAX as usize) as u32)
            .ptr(16, run.data.as_ptr())
            .u32(32, run.repeat);
        if let Some(ctx) = run.ctx {
            attr.u32(40, ctx.len().min(u32::MAX as usize) as u32)
                .ptr(48, ctx.as_ptr());
        }
        // SAFETY: `data` and `ctx` are only read, with the lengths given; no output buffers.
        match unsafe { sys::bpf(sys::PROG_TEST_RUN, &mut attr) } {
            Ok(_) => Ok(TestRunOutput {
                retval: attr.get_u32(4),
                duration_ns: attr.get_u32(36),
            }),
            Err(errno) => Err(Error::os(
                errno,
                format!(
                    "running {} program {:?} on a {}-byte test packet",
                    self.prog_type,
                    self.name,
                    run.data.len()
                ),
            )),
        }
    }
}

impl AsFd for LoadedProgram {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for LoadedProgram {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

/// One `BPF_PROG_TEST_RUN` request.
#[derive(Clone, Copy, Debug)]
pub struct TestRun<'a> {
    /// The packet.
    pub data: &'a [u8],
    /// How many times to run it (0 counts as 1); the duration is the average.
    pub repeat: u32,
    /// The context to start from (`struct __sk_buff` for socket-buffer programs, see
    /// [`SkbContext`]; `struct xdp_md` for XDP); `None` for the kernel's default.
    pub ctx: Option<&'a [u8]>,
}

impl<'a> TestRun<'a> {
    /// One run on `data` with the default context.
    pub fn new(data: &'a [u8]) -> TestRun<'a> {
        TestRun {
            data,
            repeat: 1,
            ctx: None,
        }
    }
}

/// The result of a test run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestRunOutput {
    /// The program's return value.
    pub retval: u32,
    /// Average time of one run, in nanoseconds, as the kernel measured it.
    pub duration_ns: u32,
}

/// The fields of `struct __sk_buff` a test run may preset for SCHED_CLS and SOCKET_FILTER
/// programs (the kernel rejects a context with any other field set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SkbContext {
    /// `mark`.
    pub mark: u32,
    /// `priority`.
    pub priority: u32,
    /// `ingress_ifindex`.
    pub ingress_ifindex: u32,
    /// `ifindex` (0: the test runs on the namespace's loopback device).
    pub ifindex: u32,
    /// `wire_len`: the packet's length on the wire; at least the test packet's length and at
    /// most 65,536 (the kernel's legacy GSO limit); 0 means the packet's length. Without a
    /// context, programs read 0 here.
    pub wire_len: u32,
}

impl SkbContext {
    /// Size of `struct __sk_buff` in Linux 6.x.
    pub const SIZE: usize = 192;

    /// The context as the bytes of a `struct __sk_buff`.
    pub fn to_bytes(&self) -> [u8; SkbContext::SIZE] {
        let mut b = [0u8; SkbContext::SIZE];
        for (off, v) in [
            (8, self.mark),
            (32, self.priority),
            (36, self.ingress_ifindex),
            (40, self.ifindex),
            (160, self.wire_len),
        ] {
            b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        }
        b
    }
}
