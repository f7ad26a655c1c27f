//! `netsift fpl`: check an FPL program (the FFPF packet language) and run it over a capture.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow, bail};
use netsift::capture::CaptureReader;
use netsift_fpl::{NREGS, Program, Registry};

/// Subcommands of `netsift fpl`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Check a program: syntax, bounded loops, MBuf indexes, external functions; print the
    /// resource report (operations per packet at most).
    Check(Common),
    /// Run a program over a capture: one result per packet (with --verdicts), then the number
    /// of packets it accepted (non-zero result), its registers and its MBuf.
    Run(RunArgs),
}

/// Flags of both subcommands.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// The FPL program.
    #[arg(value_name = "FILE")]
    program: PathBuf,
    /// The MBuf size in 64-bit words (a power of two).
    #[arg(long, default_value_t = 256, value_name = "WORDS")]
    mbuf: usize,
}

/// Flags of `netsift fpl run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// The capture to run over.
    #[arg(short = 'r', long = "read", value_name = "CAPTURE")]
    read: PathBuf,
    /// Use the interpreter (default: native code where available).
    #[arg(long)]
    interp: bool,
    /// Print `INDEX RESULT` for every packet.
    #[arg(long)]
    verdicts: bool,
}

/// Flags of `netsift fpl`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

fn compile(c: &Common) -> Result<(String, Program)> {
    let src = std::fs::read_to_string(&c.program)
        .with_context(|| format!("cannot read {}", c.program.display()))?;
    let program = Program::compile(&src, &Registry::standard(), c.mbuf)
        .map_err(|e| anyhow!("{}: {}", c.program.display(), e.render(&src)))?;
    Ok((src, program))
}

/// Run `netsift fpl`.
pub fn run(args: Args) -> Result<ExitCode> {
    match args.command {
        Command::Check(c) => {
            let (_, program) = compile(&c)?;
            println!(
                "{}: ok\n{}",
                c.program.display(),
                program.report().to_string().trim_end()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(r) => {
            let (_, program) = compile(&r.common)?;
            let native = if r.interp {
                None
            } else {
                Some(program.native().map_err(|e| anyhow!("native code: {e}"))?)
            };
            let mut reader = CaptureReader::open(&r.read)
                .with_context(|| format!("cannot read {}", r.read.display()))?;
            let mut mem = vec![0u64; r.common.mbuf];
            let mut regs = [0u64; NREGS];
            let stdout = io::stdout();
            let mut out = io::BufWriter::new(stdout.lock());
            let (mut packets, mut accepted) = (0u64, 0u64);
            while let Some(item) = reader.next_packet() {
                let p = item.with_context(|| format!("{}", r.read.display()))?;
                let v = match &native {
                    Some(n) => n.run(p.data, p.wire_len, &mut mem, &mut regs),
                    None => program.run_interp(p.data, p.wire_len, &mut mem, &mut regs),
                };
                if r.verdicts {
                    writeln!(out, "{packets} {v}")?;
                }
                packets += 1;
                accepted += u64::from(v != 0);
            }
            if r.verdicts {
                out.flush()?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut s = String::new();
            let _ = writeln!(
                s,
                "{packets} packets, {accepted} accepted ({})",
                if native.is_some() {
                    "native code"
                } else {
                    "interpreter"
                }
            );
            let regs: Vec<String> = regs
                .iter()
                .enumerate()
                .filter(|&(_, &v)| v != 0)
                .map(|(i, v)| format!("R[{i}]={v}"))
                .collect();
            let _ = writeln!(
                s,
                "registers: {}",
                if regs.is_empty() {
                    "all 0".into()
                } else {
                    regs.join(" ")
                }
            );
            let used: Vec<String> = mem
                .iter()
                .enumerate()
                .filter(|&(_, &v)| v != 0)
                .map(|(i, v)| format!("MEM[{i}]={v}"))
                .collect();
            let _ = writeln!(
                s,
                "MBuf: {} of {} words non-zero{}{}",
                used.len(),
                mem.len(),
                if used.is_empty() { "" } else { ": " },
                used.iter().take(32).cloned().collect::<Vec<_>>().join(" ")
            );
            out.write_all(s.as_bytes())?;
            out.flush()?;
            if packets == 0 {
                bail!("{}: no packets", r.read.display());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
