//! `--engine ebpf`: netsift's filters run by the kernel as eBPF programs (`netsift-ebpf`).
//!
//! - `netsift filter`: the classic program is translated to SCHED_CLS returning the classic
//!   value unchanged (`Return::Classic`) with `len` read from `__sk_buff.wire_len`
//!   (`Len::Wire`), loaded once, and run on every packet with `BPF_PROG_TEST_RUN`; the
//!   verdict printed is the kernel's. That is exactly libpcap's result (snap length included)
//!   on every packet the test harness takes; the others (see [`Fallback`]) are run by
//!   netsift's interpreter, which is libpcap's `bpf_filter`, and counted.
//! - `netsift capture -i`: the same classic program as a SOCKET_FILTER on the AF_PACKET
//!   socket (`SO_ATTACH_BPF`; it sees the frame from the link-layer header, as a classic
//!   socket filter does) and, with `--xdp`, as an XDP program that drops at the driver what
//!   the filter rejects.

use std::os::fd::BorrowedFd;

use anyhow::{Result, bail};
use netsift::bpf::Program as Classic;
use netsift::capture::LinkType;
use netsift_ebpf::compile::{self, Ancillary, Len, Return};
use netsift_ebpf::{
    ErrorKind, Link, LoadOptions, LoadedProgram, ProgType, SkbContext, TestRun, XdpMode,
};

/// Translate `classic` with `opts` and load it, with errors a user can act on.
fn load(classic: &Classic, opts: &compile::Options, name: &str) -> Result<LoadedProgram> {
    let prog = compile::from_classic(classic, opts)
        .map_err(|e| anyhow::anyhow!("--engine ebpf: cannot translate the filter: {e}"))?;
    prog.load(&LoadOptions {
        name: name.into(),
        ..LoadOptions::default()
    })
    .map_err(|e| match e.kind() {
        // The error already says that root is needed.
        ErrorKind::PermissionDenied => {
            anyhow::anyhow!("--engine ebpf loads the filter into the kernel: {e}")
        }
        _ => anyhow::anyhow!(
            "--engine ebpf: the kernel refuses the {} program: {e}",
            opts.prog_type
        ),
    })
}

/// Why a packet was run by the interpreter instead of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// Shorter than an Ethernet header (14 bytes).
    Short,
    /// An IPv4 frame shorter than 34 bytes or an IPv6 frame shorter than 54.
    NoNetworkHeader,
    /// Longer than the 3,712 bytes a SCHED_CLS test run takes.
    Long,
    /// A wire length the context cannot carry (below the captured length, above 65,536).
    WireLen,
}

impl Fallback {
    const ALL: [Fallback; 4] = [
        Fallback::Short,
        Fallback::NoNetworkHeader,
        Fallback::Long,
        Fallback::WireLen,
    ];

    fn why(self) -> &'static str {
        match self {
            Fallback::Short => "shorter than 14 bytes",
            Fallback::NoNetworkHeader => "IPv4 < 34 or IPv6 < 54 bytes",
            Fallback::Long => "longer than 3,712 bytes",
            Fallback::WireLen => "wire length below the captured length or above 65,536",
        }
    }

    /// Whether (and why not) a SCHED_CLS test run takes `data` with wire length `wire`.
    pub fn of(data: &[u8], wire: u32) -> Option<Fallback> {
        let n = data.len();
        if n < 14 {
            Some(Fallback::Short)
        } else if n > 3712 {
            Some(Fallback::Long)
        } else if !ProgType::SchedCls.test_run_takes(data) {
            Some(Fallback::NoNetworkHeader)
        } else if (wire as usize) < n || wire > 65_536 {
            Some(Fallback::WireLen)
        } else {
            None
        }
    }
}

/// A filter run by the kernel through `BPF_PROG_TEST_RUN`, with the interpreter for the
/// packets the test harness does not take.
pub struct TestRunner {
    prog: LoadedProgram,
    interp: netsift::Filter,
    fallbacks: [u64; 4],
    kernel_runs: u64,
}

impl TestRunner {
    /// Loads `classic` for captures of `link_type` (Ethernet only: SCHED_CLS test runs see the
    /// packet from the Ethernet header; socket-filter test runs consume it, and XDP cannot
    /// return snap lengths). `interp` runs the same program in user space.
    pub fn new(classic: &Classic, link_type: LinkType, interp: netsift::Filter) -> Result<Self> {
        if link_type != LinkType::ETHERNET {
            bail!(
                "--engine ebpf runs the filter on Ethernet captures (link type EN10MB); this \
                 capture's link type is {link_type} (use --engine bpf)"
            );
        }
        let mut opts = compile::Options::new(ProgType::SchedCls);
        opts.result = Return::Classic;
        opts.len = Len::Wire;
        // Capture files have no ancillary data: libpcap's loads of it fail (reject).
        opts.ancillary = Ancillary::Absent;
        Ok(TestRunner {
            prog: load(classic, &opts, "netsift_filter")?,
            interp,
            fallbacks: [0; 4],
            kernel_runs: 0,
        })
    }

    /// The filter's result on one packet: the kernel's when it takes the packet.
    pub fn run(&mut self, data: &[u8], wire: u32) -> Result<u32> {
        if let Some(f) = Fallback::of(data, wire) {
            self.fallbacks[f as usize] += 1;
            return Ok(self.interp.run(data, wire));
        }
        let ctx = SkbContext {
            wire_len: wire,
            ..SkbContext::default()
        }
        .to_bytes();
        self.kernel_runs += 1;
        Ok(self
            .prog
            .test_run(&TestRun {
                data,
                repeat: 1,
                ctx: Some(&ctx),
            })?
            .retval)
    }

    /// One line for stderr when some packets were not run by the kernel, e.g.
    /// `ebpf: 3 packets run by the interpreter (shorter than 14 bytes)`.
    pub fn report(&self) -> Option<String> {
        let total: u64 = self.fallbacks.iter().sum();
        if total == 0 {
            return None;
        }
        let why: Vec<String> = Fallback::ALL
            .iter()
            .filter(|&&f| self.fallbacks[f as usize] > 0)
            .map(|&f| format!("{}: {}", f.why(), self.fallbacks[f as usize]))
            .collect();
        Some(format!(
            "ebpf: {total} packet{} run by the interpreter, {} by the kernel ({})",
            if total == 1 { "" } else { "s" },
            self.kernel_runs,
            why.join(", ")
        ))
    }
}

/// The live filter as a socket filter, attached to `socket` (an AF_PACKET `SOCK_RAW`
/// socket: the program sees the frame from its Ethernet header). The classic program may read
/// ancillary data (the VLAN pass-through of the pre-filter does).
pub fn attach_socket_filter(socket: BorrowedFd<'_>, classic: &Classic) -> Result<LoadedProgram> {
    let opts = compile::Options::new(ProgType::SocketFilter);
    let prog = load(classic, &opts, "netsift_sock")?;
    netsift_ebpf::attach_socket_filter(socket, &prog)
        .map_err(|e| anyhow::anyhow!("--engine ebpf: attaching the socket filter: {e}"))?;
    Ok(prog)
}

/// The live filter as an XDP program on `ifindex`, dropping what `classic` rejects; detached
/// when the returned link is dropped (or the process ends).
pub fn attach_xdp(classic: &Classic, ifindex: u32, mode: XdpMode) -> Result<(LoadedProgram, Link)> {
    let opts = compile::Options::new(ProgType::Xdp);
    let prog = load(classic, &opts, "netsift_xdp")?;
    let link = Link::xdp(&prog, ifindex, mode)
        .map_err(|e| anyhow::anyhow!("--xdp: attaching the XDP program: {e}"))?;
    Ok((prog, link))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_reasons() {
        let mut ip = vec![0u8; 60];
        ip[12..14].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(Fallback::of(&ip, 60), None);
        assert_eq!(Fallback::of(&ip[..13], 13), Some(Fallback::Short));
        assert_eq!(Fallback::of(&ip[..20], 20), Some(Fallback::NoNetworkHeader));
        assert_eq!(Fallback::of(&vec![0; 3713], 3713), Some(Fallback::Long));
        assert_eq!(Fallback::of(&ip, 59), Some(Fallback::WireLen));
        assert_eq!(Fallback::of(&ip, 70_000), Some(Fallback::WireLen));
        assert_eq!(Fallback::of(&ip, 65_536), None);
    }
}
