//! Where a command's filter comes from — a classic BPF program file, an expression, or
//! (when none is given) accept-all with libpcap's default snap length — and the `--engine`
//! flag. The filter is built, and its engine chosen, by `netsift::filter`.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, anyhow};
use netsift::bpf::{Program, asm};
use netsift::filter::{Error, ErrorKind, Input};
use netsift::{Choice, Engine, Filter, Target};

/// libpcap's default snap length, returned by the accept-all program of an empty expression.
pub const DEFAULT_SNAPLEN: u32 = netsift::filter::DEFAULT_SNAPLEN;

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
    /// What to ask `netsift::filter` for.
    pub fn choice(self) -> Choice {
        match self {
            EngineArg::Auto => Choice::AUTO,
            EngineArg::Bpf => Choice::only(Engine::Interpreter),
            EngineArg::Jit => Choice::only(Engine::Jit),
            EngineArg::Swift => Choice::only(Engine::Swift),
            EngineArg::Ebpf => Choice::only(Engine::Ebpf),
        }
    }

    /// The flag as typed.
    fn name(self) -> &'static str {
        match self {
            EngineArg::Auto => "auto",
            EngineArg::Bpf => "bpf",
            EngineArg::Jit => "jit",
            EngineArg::Swift => "swift",
            EngineArg::Ebpf => "ebpf",
        }
    }
}

/// The filter error as the command line says it: an engine that cannot serve is named by its
/// `--engine` flag.
fn report(e: Error, asked: EngineArg) -> anyhow::Error {
    match e.refusal() {
        Some((Engine::Ebpf, says)) if e.kind() == ErrorKind::Unsupported => {
            anyhow!("--engine {}{says} (use --engine bpf)", asked.name())
        }
        Some((_, says)) => anyhow!("--engine {}{says}", asked.name()),
        None => anyhow!("{e}"),
    }
}

/// Builds the filter of `input` for `target` with the engine `asked` for.
pub fn build(input: Input<'_>, target: &Target, asked: EngineArg) -> Result<Filter> {
    let f = Filter::build(input, target, asked.choice()).map_err(|e| report(e, asked))?;
    report_fallback(&f, asked);
    Ok(f)
}

/// Compiles `text` for `target` and builds it with the engine `asked` for.
pub fn expression(text: &str, target: &Target, asked: EngineArg) -> Result<Filter> {
    let pred = netsift::filter::compile(text, target).map_err(|e| anyhow!("{e}"))?;
    build(
        Input::Pred {
            pred: &pred,
            expr: text,
        },
        target,
        asked,
    )
}

/// Read a program in any of the `tcpdump -d/-dd/-ddd` formats from `path` and build it for
/// `target` (validated with libpcap's rules, which allow the backward jumps of `ip6
/// protochain`).
pub fn load(path: &Path, target: &Target, asked: EngineArg) -> Result<Filter> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read the program file {}", path.display()))?;
    let program = asm::parse_any(&text)
        .with_context(|| format!("cannot parse the program in {}", path.display()))?;
    Filter::build(Input::Program(&program), target, asked.choice())
        .map_err(|e| match e.kind() {
            ErrorKind::InvalidProgram => anyhow!(
                "the program in {} is not valid: {}",
                path.display(),
                e.message()
            ),
            _ => report(e, asked),
        })
        .inspect(|f| report_fallback(f, asked))
}

/// The filter that accepts every packet whole (`ret #262144`, what libpcap compiles from ""),
/// for packets of any link type.
pub fn accept_all(target: &Target, asked: EngineArg) -> Result<Filter> {
    let target = target.with_snaplen(DEFAULT_SNAPLEN);
    if asked == EngineArg::Swift {
        // Swift runs expressions: the empty one.
        return expression("", &target, asked);
    }
    build(
        Input::Program(&Program::accept_all(DEFAULT_SNAPLEN)),
        &target,
        asked,
    )
}

/// Prints the filter's decisions when the user asked for an engine it could not give.
fn report_fallback(f: &Filter, asked: EngineArg) {
    if asked == EngineArg::Jit && f.engine() != Engine::Jit {
        for line in f.log() {
            eprintln!("netsift: warning: {line}");
        }
    }
}
