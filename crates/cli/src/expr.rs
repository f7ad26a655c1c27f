//! Compiling filter expressions for the commands, with the flags they share.

use anyhow::{Result, anyhow, bail};
use netsift::bpf::{Program, compile};
use netsift::capture::{ByteOrder, CaptureReader, Format, LinkType};
use netsift::lang::{self, Context, Resolve, Target};

/// Flags shared by the commands that compile expressions.
#[derive(clap::Args, Debug, Clone)]
pub struct CompileArgs {
    /// Do not optimise (`-O0`).
    #[arg(short = 'O', value_name = "LEVEL", value_parser = parse_level, default_value = "1", hide_default_value = true)]
    level: u8,
    /// Same as -O0.
    #[arg(long = "no-optimize", hide = true)]
    pub no_optimize_flag: bool,
    /// Link type: en10mb, linux_sll, linux_sll2, raw, ipv4, ipv6, null, loop (default en10mb; a
    /// command reading a capture uses the capture's).
    #[arg(long, value_name = "TYPE")]
    linktype: Option<String>,
    /// Snap length returned for accepted packets (default 262144; a command reading a capture
    /// uses the capture's).
    #[arg(long, value_name = "N")]
    snaplen: Option<u32>,
    /// IPv4 netmask for `ip broadcast` (dotted quad).
    #[arg(long, value_name = "MASK")]
    netmask: Option<std::net::Ipv4Addr>,
    /// Resolve host names with the system resolver (may query DNS); by default only names in
    /// /etc/hosts are accepted.
    #[arg(long)]
    resolve: bool,
    /// (set by the commands) not optimised
    #[arg(skip)]
    pub no_optimize: bool,
}

/// What a filter compiled for this capture is compiled for, as `tcpdump -r FILE` compiles it:
/// the file's link type (Ethernet if it has none yet), its snap length, and whether its byte
/// order differs from this machine's (libpcap's savefile meanings of some link-layer fields).
pub fn capture_target<R>(reader: &CaptureReader<R>) -> (LinkType, u32, bool) {
    let swapped = match reader.format() {
        Format::Pcap { byte_order, .. } | Format::Pcapng { byte_order, .. } => {
            (byte_order == ByteOrder::Little) != cfg!(target_endian = "little")
        }
        _ => false,
    };
    let lt = reader.link_type().unwrap_or(LinkType::ETHERNET);
    let snap = reader.snaplen().unwrap_or(crate::program::DEFAULT_SNAPLEN);
    (lt, snap, swapped)
}

fn parse_level(s: &str) -> Result<u8, String> {
    match s {
        "0" => Ok(0),
        "1" | "2" => Ok(1),
        _ => Err(format!("unknown optimisation level '{s}' (use -O0 or -O1)")),
    }
}

impl CompileArgs {
    /// The compilation context; `file` is the link type, snap length and byte-order info of a
    /// capture the filter will run on.
    pub fn context(&mut self, file: Option<(LinkType, u32, bool)>) -> Result<Context> {
        self.no_optimize = self.level == 0 || self.no_optimize_flag;
        let link_type = match (&self.linktype, file) {
            (Some(name), _) => LinkType::from_name(name)
                .ok_or_else(|| anyhow!("unknown link type '{name}' (try en10mb, linux_sll, linux_sll2, raw, ipv4, ipv6, null, loop)"))?,
            (None, Some((lt, _, _))) => lt,
            (None, None) => LinkType::ETHERNET,
        };
        let mut ctx = Context::new(link_type);
        ctx.optimize = !self.no_optimize;
        ctx.snaplen = self.snaplen.or(file.map(|f| f.1)).unwrap_or(262_144);
        if let Some((_, _, swapped)) = file {
            ctx.target = Target::Savefile { swapped };
        }
        // libpcap reads an all-ones netmask as "unknown" (PCAP_NETMASK_UNKNOWN).
        ctx.netmask = self.netmask.map(u32::from).filter(|&m| m != u32::MAX);
        if self.resolve {
            ctx.resolve = Resolve::System;
        }
        Ok(ctx)
    }
}

/// Parse, or fail with the rendered error.
pub fn parse_or_report(text: &str) -> Result<Option<lang::ast::Expr<'_>>> {
    lang::parse(text).map_err(|e| anyhow!("{e}"))
}

/// Parse and lower, or fail with the rendered error.
pub fn lower_or_report(text: &str, ctx: &Context) -> Result<lang::Pred> {
    lang::compile(text, ctx).map_err(|e| anyhow!("{e}"))
}

/// Compile to classic BPF, or fail with the rendered error. The predicate is lowered for the
/// level (`-O0` keeps every test libpcap's code generator emits: [`Context::optimize`]).
pub fn compile_or_report(text: &str, ctx: &Context, optimize: bool) -> Result<Program> {
    let pred = lower_or_report(text, &Context { optimize, ..*ctx })?;
    match compile::compile(
        &pred,
        &compile::Options {
            optimize,
            snaplen: ctx.snaplen,
        },
    ) {
        Ok(p) => Ok(p),
        // Whole-filter errors point at the whole expression.
        Err(e) => bail!(
            "{}",
            lang::Error::new(
                lang::ErrorKind::Semantic,
                e.to_string(),
                Some(lang::Span::new(0, text.len())),
                text
            )
        ),
    }
}
