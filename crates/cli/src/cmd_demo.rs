//! `netsift demo`: run a handful of everyday filters over the bundled sample capture and print a
//! short report — packets and bytes matched, the interpreter's speed, and the first matches.

use std::fs;
use std::io::{self, Cursor, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use netsift::bpf::Filter;
use netsift::capture::{CaptureReader, Packet};

use crate::{output, program, sample};

/// Flags of `netsift demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write the bundled sample capture to PATH and exit.
    #[arg(long, value_name = "PATH")]
    write_sample: Option<PathBuf>,
}

/// The demo's filters: a name and a classic BPF program in `tcpdump -d` form. The programs are
/// what libpcap 1.10.3 compiles (optimised, EN10MB, snap length 262144) from the expression in
/// each file's first-line comment.
const FILTERS: [(&str, &str); 7] = [
    ("ip or ip6", include_str!("../demo/0-ip_or_ip6.bpf")),
    ("tcp port 80", include_str!("../demo/1-tcp_port_80.bpf")),
    ("udp port 53", include_str!("../demo/2-udp_port_53.bpf")),
    (
        "tcp[tcpflags] & tcp-syn != 0 and tcp[tcpflags] & tcp-ack = 0",
        include_str!("../demo/3-tcp_tcpflags_tcp_syn_0_and_tcp_tcpflags_tcp_ack_0.bpf"),
    ),
    ("vlan", include_str!("../demo/4-vlan.bpf")),
    ("icmp or icmp6", include_str!("../demo/5-icmp_or_icmp6.bpf")),
    ("arp", include_str!("../demo/6-arp.bpf")),
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
        "{:<62} {:>8} {:>9} {:>8}",
        "filter", "packets", "bytes", "ns/pkt"
    )?;
    let mut firsts = Vec::new();
    for (expr, text) in FILTERS {
        let filter = program::from_text(text)
            .with_context(|| format!("the demo program for `{expr}` is invalid"))?;
        let (matched, bytes) = count(&filter, &packets);
        let ns = time_per_packet(&filter, &packets);
        writeln!(out, "{expr:<62} {matched:>8} {bytes:>9} {ns:>8.1}")?;
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
        "\nTry it on the sample yourself:\n  netsift demo --write-sample demo.pcap && netsift filter -r demo.pcap"
    )?;
    Ok(ExitCode::SUCCESS)
}

fn count(filter: &Filter, packets: &[Packet]) -> (usize, u64) {
    packets
        .iter()
        .filter(|p| filter.run(&p.data, p.wire_len) != 0)
        .fold((0, 0), |(n, b), p| (n + 1, b + u64::from(p.wire_len)))
}

/// Mean interpreter time per packet over enough rounds to take a few milliseconds.
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
