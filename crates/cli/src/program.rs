//! Where a command's filter comes from: a classic BPF program file, or (when none is given)
//! accept-all with libpcap's default snap length.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use netsift::bpf::{Filter, Rules, asm};

/// libpcap's default snap length, returned by the accept-all program of an empty expression.
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Read a program in any of the `tcpdump -d/-dd/-ddd` formats from `path` and validate it with
/// libpcap's rules (which allow the backward jumps of `ip6 protochain`).
pub fn load(path: &Path) -> Result<Filter> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read the program file {}", path.display()))?;
    let program = asm::parse_any(&text)
        .with_context(|| format!("cannot parse the program in {}", path.display()))?;
    Filter::new(program, Rules::Libpcap)
        .with_context(|| format!("the program in {} is not valid", path.display()))
}

/// The filter that accepts every packet whole (`ret #262144`, what libpcap compiles from "").
pub fn accept_all() -> Filter {
    Filter::accept_all(DEFAULT_SNAPLEN)
}
