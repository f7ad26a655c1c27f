//! `netsift demo`: run a handful of everyday filters over the bundled sample capture and print a
//! short report — packets and bytes matched, the interpreter's speed, and the first matches.

use std::fs;
use std::io::{self, Cursor, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use netsift::bpf::Rules;
use netsift::capture::{CaptureReader, LinkType, Packet};
use netsift::lang::Context as FilterContext;
use netsift::{Engine, Filter};

use crate::{expr, output, sample};

/// Flags of `netsift demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write the bundled sample capture to PATH and exit.
    #[arg(long, value_name = "PATH")]
    write_sample: Option<PathBuf>,
}

/// The demo's filters, compiled by netsift for the sample's link type (Ethernet).
const FILTERS: [&str; 8] = [
    "ip or ip6",
    "tcp port 80",
    "udp port 53",
    "tcp[tcpflags] & tcp-syn != 0 and tcp[tcpflags] & tcp-ack = 0",
    "vlan 100 and udp port 514",
    "icmp or icmp6",
    "arp",
    "src host 198.18.0.80 and tcp[tcpflags] & tcp-rst != 0",
];

/// Run `netsift demo`.
pub fn run(args: Args) -> Result<ExitCode> {
    if let Some(path) = args.write_sample {
        fs::write(&path, sample::build())
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote the sample capture to {}", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let packets: Vec<Packet> = CaptureReader::new(Cursor::new(sample::DEMO_PCAP))?
        .packets()
        .collect::<Result<_, _>>()
        .context("the bundled sample capture is unreadable")?;
    let total_bytes: u64 = packets.iter().map(|p| u64::from(p.wire_len)).sum();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    writeln!(
        out,
        "netsift demo: {} packets ({} bytes) of the bundled sample capture (samples/demo.pcap)\n",
        packets.len(),
        total_bytes
    )?;
    writeln!(
        out,
        "{:<62} {:>5} {:>8} {:>9} {:>10} {:>7}",
        "filter", "insns", "packets", "bytes", "interp ns", "JIT ns"
    )?;
    let mut firsts = Vec::new();
    let ctx = FilterContext::new(LinkType::ETHERNET);
    for expr in FILTERS {
        let program = expr::compile_or_report(expr, &ctx, true)?;
        let insns = program.len();
        let filter = Filter::new(program.clone(), Rules::Libpcap, Engine::Bpf)?;
        let jit = Filter::new(program, Rules::Libpcap, Engine::Jit)?;
        let (matched, bytes) = count(&filter, &packets);
        assert_eq!(
            count(&jit, &packets),
            (matched, bytes),
            "the engines disagree"
        );
        let ns = time_per_packet(&filter, &packets);
        let jit_ns = if jit.engine() == Engine::Jit {
            format!("{:.1}", time_per_packet(&jit, &packets))
        } else {
            "-".into()
        };
        writeln!(
            out,
            "{expr:<62} {insns:>5} {matched:>8} {bytes:>9} {ns:>10.1} {jit_ns:>7}"
        )?;
        if firsts.len() < 2 && matched > 0 && expr.starts_with("tcp") {
            firsts.push((expr, filter));
        }
    }
    for (expr, filter) in firsts {
        writeln!(out, "\nfirst packets matching `{expr}`:")?;
        for p in packets
            .iter()
            .filter(|p| filter.run(&p.data, p.wire_len) != 0)
            .take(5)
        {
            writeln!(out, "  {}", output::packet_line(&p.as_ref()))?;
        }
    }
    writeln!(
        out,
        "\nTry it on the sample yourself:\n  netsift demo --write-sample demo.pcap\n  netsift filter -r demo.pcap 'tcp port 80'\n  netsift compile 'tcp port 80'"
    )?;
    Ok(ExitCode::SUCCESS)
}

fn count(filter: &Filter, packets: &[Packet]) -> (usize, u64) {
    packets
        .iter()
        .filter(|p| filter.run(&p.data, p.wire_len) != 0)
        .fold((0, 0), |(n, b), p| (n + 1, b + u64::from(p.wire_len)))
}

/// Mean time per packet over enough rounds to take a few milliseconds.
fn time_per_packet(filter: &Filter, packets: &[Packet]) -> f64 {
    let rounds = 200;
    let mut results = Vec::with_capacity(packets.len());
    let start = Instant::now();
    for _ in 0..rounds {
        filter.run_batch(
            packets.iter().map(|p| (p.data.as_slice(), p.wire_len)),
            &mut results,
        );
        std::hint::black_box(&results);
    }
    start.elapsed().as_nanos() as f64 / (rounds * packets.len().max(1)) as f64
}
