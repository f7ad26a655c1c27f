//! `--engine ebpf`: netsift's filters run by the kernel as eBPF programs (`netsift-ebpf`).
//!
//! - `netsift filter`: `netsift::filter` runs the filter in the kernel (`Engine::Ebpf`: the
//!   classic program as SCHED_CLS, one `BPF_PROG_TEST_RUN` a packet).
//! - `netsift capture -i`: the same classic program as a SOCKET_FILTER on the AF_PACKET
//!   socket (`SO_ATTACH_BPF`; it sees the frame from the link-layer header, as a classic
//!   socket filter does) and, with `--xdp`, as an XDP program that drops at the driver what
//!   the filter rejects.

use std::os::fd::BorrowedFd;

use anyhow::Result;
use netsift::bpf::Program as Classic;
use netsift_ebpf::compile;
use netsift_ebpf::{ErrorKind, Link, LoadOptions, LoadedProgram, ProgType, XdpMode};

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
