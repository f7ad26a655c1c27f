//! `--engine ebpf`: netsift's filters run by the kernel as eBPF programs (`netsift-ebpf`).
//!
//! - `netsift filter`: the classic program is translated to SCHED_CLS returning the classic
//!   value unchanged (`Return::Classic`) with `len` read from `__sk_buff.wire_len`
//!   (`Len::Wire`), loaded once, and run on every packet with `BPF_PROG_TEST_RUN`; the
//!   verdict printed is the kernel's. That is exactly libpcap's result (snap length included)
//!   on every packet the test harness takes; the others (`netsift_ebpf::Fallback`) are run by
//!   netsift's interpreter, which is libpcap's `bpf_filter`, and counted.
//! - `netsift capture -i`: the same classic program as a SOCKET_FILTER on the AF_PACKET
//!   socket (`SO_ATTACH_BPF`; it sees the frame from the link-layer header, as a classic
//!   socket filter does) and, with `--xdp`, as an XDP program that drops at the driver what
//!   the filter rejects.

use std::os::fd::BorrowedFd;

use anyhow::{Result, bail};
use netsift::bpf::Program as Classic;
use netsift::capture::LinkType;
use netsift_ebpf::compile;
use netsift_ebpf::{ErrorKind, KernelFilter, Link, LoadOptions, LoadedProgram, ProgType, XdpMode};

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

/// A filter run by the kernel through `BPF_PROG_TEST_RUN`, with the interpreter for the
/// packets the test harness does not take (`netsift_ebpf::KernelFilter`).
pub struct TestRunner {
    inner: KernelFilter,
}

impl TestRunner {
    /// Loads `classic` for captures of `link_type` (Ethernet only: SCHED_CLS test runs see the
    /// packet from the Ethernet header; socket-filter test runs consume it, and XDP cannot
    /// return snap lengths).
    pub fn new(classic: &Classic, link_type: LinkType) -> Result<Self> {
        if link_type != LinkType::ETHERNET {
            bail!(
                "--engine ebpf runs the filter on Ethernet captures (link type EN10MB); this \
                 capture's link type is {link_type} (use --engine bpf)"
            );
        }
        let inner = KernelFilter::new(classic, "netsift_filter").map_err(|e| match e.kind() {
            // The error already says that root is needed.
            ErrorKind::PermissionDenied => {
                anyhow::anyhow!("--engine ebpf loads the filter into the kernel: {e}")
            }
            _ => anyhow::anyhow!("--engine ebpf: the kernel refuses the SCHED_CLS program: {e}"),
        })?;
        Ok(TestRunner { inner })
    }

    /// The filter's result on one packet: the kernel's when it takes the packet.
    pub fn run(&mut self, data: &[u8], wire: u32) -> Result<u32> {
        Ok(self.inner.run(data, wire)?)
    }

    /// One line for stderr when some packets were not run by the kernel.
    pub fn report(&self) -> Option<String> {
        self.inner.report()
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
