//! The flags shared by the commands that compile expressions, and the [`Target`] they make.
//!
//! Each command builds its base target where its packets come from (a capture file with
//! [`Target::for_capture`], a live interface with [`Target::live`]); [`CompileArgs::target`]
//! applies the flags on top. Compiling and choosing the engine is `netsift::filter`'s.

use anyhow::{Result, anyhow};
use netsift::Target;
use netsift::bpf::Program;
use netsift::capture::LinkType;
use netsift::filter::{self, Resolve};
use netsift::lang;

/// Flags shared by the commands that compile expressions.
#[derive(clap::Args, Debug, Clone)]
pub struct CompileArgs {
    /// Do not optimise (`-O0`).
    #[arg(short = 'O', value_name = "LEVEL", value_parser = parse_level, default_value = "1", hide_default_value = true)]
    level: u8,
    /// Same as -O0.
    #[arg(long = "no-optimize", hide = true)]
    no_optimize_flag: bool,
    /// Link type: en10mb, linux_sll, linux_sll2, raw, ipv4, ipv6, null, loop (default en10mb; a
    /// command reading a capture uses the capture's).
    #[arg(long, value_name = "TYPE")]
    linktype: Option<String>,
    /// Snap length returned for accepted packets (default 262144; a command reading a capture
    /// uses the capture's).
    #[arg(long = "snaplen", id = "filter_snaplen", value_name = "N")]
    snaplen: Option<u32>,
    /// IPv4 netmask for `ip broadcast` (dotted quad).
    #[arg(long, value_name = "MASK")]
    netmask: Option<std::net::Ipv4Addr>,
    /// Resolve host names with the system resolver (may query DNS); by default only names in
    /// /etc/hosts are accepted.
    #[arg(long)]
    resolve: bool,
}

fn parse_level(s: &str) -> Result<u8, String> {
    match s {
        "0" => Ok(0),
        "1" | "2" => Ok(1),
        _ => Err(format!("unknown optimisation level '{s}' (use -O0 or -O1)")),
    }
}

impl CompileArgs {
    /// Whether to optimise (`-O1`, the default).
    pub fn optimize(&self) -> bool {
        self.level != 0 && !self.no_optimize_flag
    }

    /// `base` (where the packets come from) with the flags applied.
    pub fn target(&self, base: Target) -> Result<Target> {
        let mut t = base
            .with_optimize(self.optimize())
            .with_netmask(self.netmask.map(u32::from));
        if let Some(name) = &self.linktype {
            t = t.with_link_type(LinkType::from_name(name).ok_or_else(|| {
                anyhow!(
                    "unknown link type '{name}' (try en10mb, linux_sll, linux_sll2, raw, ipv4, \
                     ipv6, null, loop)"
                )
            })?);
        }
        if let Some(n) = self.snaplen {
            t = t.with_snaplen(n);
        }
        if self.resolve {
            t = t.with_resolve(Resolve::System);
        }
        Ok(t)
    }
}

/// Parse, or fail with the rendered error.
pub fn parse_or_report(text: &str) -> Result<Option<lang::ast::Expr<'_>>> {
    lang::parse(text).map_err(|e| anyhow!("{e}"))
}

/// The meaning of `text` for `target`, or the rendered error.
pub fn lower_or_report(text: &str, target: &Target) -> Result<lang::Pred> {
    filter::compile(text, target).map_err(|e| anyhow!("{e}"))
}

/// The classic BPF program of `text` for `target`, or the rendered error.
pub fn compile_or_report(text: &str, target: &Target) -> Result<Program> {
    filter::compile_program(text, target).map_err(|e| anyhow!("{e}"))
}
