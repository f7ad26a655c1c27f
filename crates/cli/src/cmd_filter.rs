//! `netsift filter`: run a filter over a capture file.
//!
//! Without `--verdicts` it prints one summary line per accepted packet (like `tcpdump -r`);
//! with `--verdicts` exactly one line `INDEX RESULT` per packet read (INDEX from 0, RESULT the
//! filter's return value, 0 = rejected) and nothing else on stdout. `-w OUT` writes the accepted
//! packets, each truncated to the snap length the filter returned, as pcap (or pcapng when OUT
//! ends in `.pcapng`). `-c N` stops after N accepted packets, as tcpdump's `-c` does.
//!
//! A capture that turns out to be truncated or corrupt is processed up to the last good packet;
//! then the error is reported and the exit status is 1.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use netsift::Target;
use netsift::capture::{CaptureReader, LinkType, PacketRef, Precision};

use crate::sink::{Format, Writer};
use crate::{expr, output, program};

/// Flags of `netsift filter`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The capture file to read (pcap or pcapng).
    #[arg(short = 'r', value_name = "FILE")]
    read: PathBuf,
    /// Write the accepted packets to OUT (pcap; pcapng if OUT ends in .pcapng).
    #[arg(short = 'w', value_name = "OUT")]
    write: Option<PathBuf>,
    /// A classic BPF program in tcpdump -ddd, -dd or -d format (default: accept everything).
    #[arg(long, value_name = "PROG")]
    program: Option<PathBuf>,
    /// Print one line `INDEX RESULT` per packet instead of packet summaries.
    #[arg(long)]
    verdicts: bool,
    /// Stop after N accepted packets.
    #[arg(short = 'c', value_name = "N")]
    count: Option<u64>,
    /// Engine: auto (the JIT where it runs), bpf (interpreter), jit, swift, or ebpf (the
    /// kernel, through BPF_PROG_TEST_RUN; Ethernet captures; root).
    #[arg(long, value_enum, default_value = "auto")]
    engine: program::EngineArg,
    #[command(flatten)]
    compile: expr::CompileArgs,
    /// A filter expression (tcpdump syntax).
    #[arg(value_name = "EXPR", trailing_var_arg = true)]
    expr: Vec<String>,
}

/// Run `netsift filter`.
pub fn run(args: Args) -> Result<ExitCode> {
    if !args.expr.is_empty() && args.program.is_some() {
        bail!("give either a filter expression or --program, not both");
    }
    let mut reader = CaptureReader::open(&args.read)
        .with_context(|| format!("cannot read {}", args.read.display()))?;
    // Compiled as `tcpdump -r FILE EXPR` compiles it: the file's link type and snap length,
    // and libpcap's savefile meanings.
    let target = args.compile.target(Target::for_capture(&reader))?;
    let mut filter = match (&args.program, args.expr.is_empty()) {
        (Some(path), _) => program::load(path, &target, args.engine)?,
        (None, true) => program::accept_all(&target, args.engine)?,
        (None, false) => program::expression(&args.expr.join(" "), &target, args.engine)?,
    };
    let snaplen = reader.snaplen().unwrap_or(program::DEFAULT_SNAPLEN);
    let precision = match reader.format() {
        netsift::capture::Format::Pcap { precision, .. } => precision,
        _ => Precision::Nano,
    };
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut sink: Option<Writer> = None;
    let out_name = args
        .write
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned());
    let mut accepted = 0u64;
    let mut index = 0u64;
    let mut failure = None;
    while let Some(item) = reader.next_packet() {
        let packet = match item {
            Ok(p) => p,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        // An eBPF test run that fails ends the command (the verdicts printed are the kernel's).
        let result = filter
            .try_run(packet.data, packet.wire_len)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if args.verdicts {
            writeln!(out, "{index} {result}")?;
        }
        index += 1;
        if result == 0 {
            continue;
        }
        accepted += 1;
        if !args.verdicts {
            writeln!(out, "{}", output::packet_line(&packet))?;
        }
        if let Some(name) = &out_name {
            let kept = PacketRef {
                data: &packet.data[..packet.data.len().min(result as usize)],
                ..packet
            };
            if sink.is_none() {
                let format = Format::for_path(name, None);
                sink = Some(Writer::create(
                    name,
                    format,
                    kept.link_type,
                    snaplen,
                    precision,
                )?);
            }
            if let Some(s) = sink.as_mut() {
                s.write(&kept)?;
            }
        }
        if args.count.is_some_and(|n| accepted >= n) {
            break;
        }
    }
    out.flush()?;
    if sink.is_none()
        && let Some(name) = &out_name
    {
        // Nothing accepted: still leave a valid, empty capture behind.
        let lt = reader.link_type().unwrap_or(LinkType::ETHERNET);
        sink = Some(Writer::create(
            name,
            Format::for_path(name, None),
            lt,
            snaplen,
            precision,
        )?);
    }
    if let Some(s) = sink {
        s.finish()?;
    }
    if let Some(line) = filter.report() {
        eprintln!("netsift: {line}");
    }
    if let Some(e) = failure {
        eprintln!(
            "netsift: error: {}: {e} (after {index} good packets)",
            args.read.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
