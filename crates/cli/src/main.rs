//! `netsift`: the command line of the netsift packet filtering framework.
//!
//! The subcommands and their flags are the stable contract of `docs/cli.md`; scripts and tests
//! depend on them. Each subcommand lives in its own module; this file parses the command line,
//! runs the subcommand and turns errors into a message on stderr and a non-zero exit status. A
//! closed output pipe (`netsift … | head`) ends the program quietly with status 0.

mod cmd_bench;
mod cmd_capture;
mod cmd_classify;
mod cmd_compile;
mod cmd_demo;
mod cmd_filter;
mod cmd_flow;
mod cmd_fpl;
mod cmd_ftpcap;
mod cmd_gen;
mod cmd_hitables;
mod cmd_offload;
mod expr;
mod kernel;
mod output;
mod program;
mod rulefile;
mod sample;
mod signals;
mod sink;

use std::io;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc: the compiler and the tree builders allocate many small short-lived objects, which
/// it serves 1.2–2x faster than glibc's allocator (`netsift bench compile`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// netsift: packet filtering and capture for Linux.
#[derive(Parser, Debug)]
#[command(name = "netsift", version, about, propagate_version = true)]
struct Cli {
    /// Log what netsift decides (which engine runs a filter and why the others could not) on
    /// stderr; -vv logs more. `RUST_LOG` (e.g. `RUST_LOG=netsift_filter=info`) selects in detail.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compile a filter expression to classic BPF and print it (like tcpdump -d, -dd, -ddd).
    Compile(cmd_compile::Args),
    /// Run a filter over a capture file: print the packets it accepts, or one verdict per packet.
    Filter(cmd_filter::Args),
    /// Capture packets from an interface (or read a file) through a filter, like tcpdump.
    Capture(cmd_capture::Args),
    /// Run FFPF flows: graphs of filters in several languages with shared prefixes and buffers
    /// (`(device,eth0) -> (bpf,"tcp") -> (bytecount,,8)`).
    Flow(cmd_flow::Args),
    /// Check an FPL program (the FFPF packet language) or run it over a capture.
    Fpl(cmd_fpl::Args),
    /// Make test traffic (a synthetic mix, the FTP workload, a capture file): write it to a file
    /// or send it onto an interface.
    Gen(cmd_gen::Args),
    /// Classify the headers of a ClassBench trace against a rule set (first match wins).
    Classify(cmd_classify::Args),
    /// Rewrite an iptables rule set into an equivalent one whose chains encode decision trees
    /// (HiTables), as iptables-restore or nft input.
    Hitables(cmd_hitables::Args),
    /// Compile a filter expression into NIC filter rules for a capability profile (drop and
    /// steer before the CPU), print them or the ethtool commands, and check them on a capture.
    Offload(cmd_offload::Args),
    /// Follow FTP control connections in a capture and keep their data connections (Swift's
    /// FTPCap: the filter is updated in place as connections open and close).
    Ftpcap(cmd_ftpcap::Args),
    /// Run a few meaningful filters over the bundled sample capture and print a short report.
    Demo(cmd_demo::Args),
    /// Run a benchmark suite against its baseline (libpcap), measured in the same run.
    Bench(cmd_bench::Args),
}

/// Logs to stderr: `RUST_LOG` if set, else netsift's decisions at `-v` (info) and `-vv`
/// (debug), nothing otherwise.
fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(match verbose {
            0 => "off",
            1 => "netsift_filter=info",
            _ => "debug",
        }),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
        .with_writer(io::stderr)
        .with_target(false)
        .without_time()
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let result = match cli.command {
        Command::Compile(args) => cmd_compile::run(args),
        Command::Filter(args) => cmd_filter::run(args),
        Command::Capture(args) => cmd_capture::run(args),
        Command::Gen(args) => cmd_gen::run(args),
        Command::Flow(args) => cmd_flow::run(args),
        Command::Fpl(args) => cmd_fpl::run(args),
        Command::Ftpcap(args) => cmd_ftpcap::run(args),
        Command::Classify(args) => cmd_classify::run(args),
        Command::Hitables(args) => cmd_hitables::run(args),
        Command::Offload(args) => cmd_offload::run(args),
        Command::Demo(args) => cmd_demo::run(args),
        Command::Bench(args) => cmd_bench::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("netsift: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `err` (or its cause) is a write to a closed pipe, which ends output normally.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}
