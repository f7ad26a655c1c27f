//! Where a command's filter comes from: a classic BPF program file, or (when none is given)
//! accept-all with libpcap's default snap length.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use netsift::bpf::{Program, Rules, asm};
use netsift::{Engine, Filter};

/// libpcap's default snap length, returned by the accept-all program of an empty expression.
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Read a program in any of the `tcpdump -d/-dd/-ddd` formats from `path` and validate it with
/// libpcap's rules (which allow the backward jumps of `ip6 protochain`).
pub fn load(path: &Path, engine: Engine) -> Result<Filter> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read the program file {}", path.display()))?;
    let program = asm::parse_any(&text)
        .with_context(|| format!("cannot parse the program in {}", path.display()))?;
    Filter::new(program, Rules::Libpcap, engine)
        .with_context(|| format!("the program in {} is not valid", path.display()))
}

/// The filter that accepts every packet whole (`ret #262144`, what libpcap compiles from "").
pub fn accept_all(engine: Engine) -> Filter {
    Filter::new(Program::accept_all(DEFAULT_SNAPLEN), Rules::Kernel, engine)
        .unwrap_or_else(|_| unreachable!("ret #k is always valid"))
}

/// Which engine runs a filter (`--engine`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    /// The JIT where it runs, else the interpreter.
    Auto,
    /// The classic BPF interpreter.
    Bpf,
    /// Native x86-64 code (falls back to the interpreter, with a warning, where it cannot run).
    Jit,
    /// Swift passes (`netsift filter` with an expression Swift can express).
    Swift,
    /// eBPF in the kernel: `BPF_PROG_TEST_RUN` per packet for `filter`, a socket filter (and
    /// XDP with `--xdp`) for `capture -i`. Needs root.
    Ebpf,
}

impl EngineArg {
    /// The library's engine.
    pub fn engine(self) -> Engine {
        match self {
            EngineArg::Auto => Engine::Auto,
            EngineArg::Bpf => Engine::Bpf,
            EngineArg::Jit => Engine::Jit,
            // Callers that support Swift handle it before asking for a BPF engine.
            EngineArg::Swift => Engine::Auto,
            // The interpreter runs what the kernel cannot (see `crate::kernel`).
            EngineArg::Ebpf => Engine::Bpf,
        }
    }
}

/// Prints the meta filter's decisions when the user asked for an engine it could not give.
pub fn report_fallback(f: &Filter, asked: EngineArg) {
    if asked == EngineArg::Jit && f.engine() != Engine::Jit {
        for line in f.log() {
            eprintln!("netsift: warning: {line}");
        }
    }
}
