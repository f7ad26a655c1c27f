//! `netsift demo`: run a handful of everyday filters over the bundled sample capture and print a
//! short report — packets and bytes matched, the interpreter's speed, and the first matches.

use std::fs;
use std::io::{self, Cursor, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};

use netsift::capture::{CaptureReader, LinkType, Packet};
use netsift::{Choice, Engine, Filter, Target};

use crate::program::{self, DEFAULT_SNAPLEN, EngineArg};
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
    let target = Target::live(LinkType::ETHERNET, DEFAULT_SNAPLEN);
    for expr in FILTERS {
        let mut filter = program::expression(expr, &target, EngineArg::Bpf)?;
        let insns = filter.program().map_or(0, |p| p.len());
        let mut jit = Filter::compile(expr, &target, Choice::only(Engine::Jit))?;
        let (matched, bytes) = count(&mut filter, &packets);
        assert_eq!(
            count(&mut jit, &packets),
            (matched, bytes),
            "the engines disagree"
        );
        let ns = time_per_packet(&mut filter, &packets);
        let jit_ns = if jit.engine() == Engine::Jit {
            format!("{:.1}", time_per_packet(&mut jit, &packets))
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
    for (expr, mut filter) in firsts {
        writeln!(out, "\nfirst packets matching `{expr}`:")?;
        for p in packets
            .iter()
            .filter(|p| filter.run(&p.data, p.wire_len) != 0)
            .take(5)
        {
            writeln!(out, "  {}", output::packet_line(&p.as_ref()))?;
        }
    }
    offload(&mut out, &packets)?;
    flows(&mut out)?;
    writeln!(
        out,
        "\nTry it on the sample yourself:\n  netsift demo --write-sample demo.pcap\n  netsift filter -r demo.pcap 'tcp port 80'\n  netsift compile 'tcp port 80'\n  netsift offload --nic 82599 -r demo.pcap 'tcp port 80'\n  netsift flow -r demo.pcap --stats '(bpf,\"tcp\") -> (flowcount,,4096)'"
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `tcp port 80` compiled into NIC rules for an 82599 and an mlx5-like NIC, run through the
/// emulated NIC: how much the NIC drops, and that NIC + residual filter equal the filter.
fn offload(out: &mut impl Write, packets: &[Packet]) -> Result<()> {
    use netsift_offload::compile::{Options, compile};
    use netsift_offload::nic::EmulatedNic;
    let expr = "tcp port 80";
    let target = Target::live(LinkType::ETHERNET, DEFAULT_SNAPLEN);
    let pred = expr::lower_or_report(expr, &target)?;
    let mut filter = program::expression(expr, &target, EngineArg::Bpf)?;
    writeln!(
        out,
        "\nin the NIC: `{expr}` as flow rules (emulated NIC, 4 RX queues):"
    )?;
    for name in ["82599", "mlx5"] {
        let profile = name.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
        let o = compile(&pred, &Options::new(profile)).map_err(|e| anyhow::anyhow!("{e}"))?;
        let rules = o.rules().len();
        let mut nic = EmulatedNic::new(4, o.into_table());
        let (mut dropped, mut wrong) = (0, 0);
        for p in packets {
            if nic.receive(&p.data, p.wire_len).is_dropped() {
                dropped += 1;
                wrong += usize::from(filter.run(&p.data, p.wire_len) != 0);
            }
        }
        anyhow::ensure!(wrong == 0, "the NIC dropped packets the filter accepts");
        writeln!(
            out,
            "  {name:<6} {rules} rules; the NIC drops {dropped} of {} packets before the CPU; \
             NIC + software filter = the filter on every packet",
            packets.len()
        )?;
    }
    Ok(())
}

/// Two FFPF flows sharing a prefix over the sample: one instance of the shared filters.
fn flows(out: &mut impl Write) -> Result<()> {
    use netsift_graph::policy::Policy;
    use netsift_graph::{FlowOptions, Runtime};
    let path = std::env::temp_dir().join(format!("netsift-demo-{}.pcap", std::process::id()));
    fs::write(&path, sample::DEMO_PCAP)?;
    let src = format!("(file,{:?})", path.to_string_lossy());
    let texts = [
        format!("{src} -> (bpf,\"ip\") -> (bpf,\"tcp\") -> (flowcount,,4096)"),
        format!("{src} -> (bpf,\"ip\") -> (bpf,\"udp\") -> (bytecount,,8)"),
    ];
    let mut rt = Runtime::new(netsift_graph::standard_registry(), Policy::allow_all());
    let mut readers = Vec::new();
    for t in &texts {
        readers.push(
            rt.open(t, FlowOptions::default())
                .map_err(|e| anyhow::anyhow!("{e}"))?,
        );
    }
    let run = rt.run().map_err(|e| anyhow::anyhow!("{e}"));
    let _ = fs::remove_file(&path);
    let stats = run?;
    writeln!(
        out,
        "\nFFPF flows: 2 flows over the sample share the source and `ip` ({} filter instances, \
         {} packets, {} copies into the shared buffer):",
        rt.graph().len(),
        stats.packets,
        stats.copies
    )?;
    for (i, (id, mut reader)) in readers.into_iter().enumerate() {
        let mut n = 0;
        while reader.next().is_some() {
            n += 1;
        }
        let last = rt.flow_nodes(id).last().copied().unwrap_or(0);
        let summary = rt
            .graph()
            .node(last)
            .and_then(|node| node.class.describe(&node.mbuf))
            .unwrap_or_default();
        writeln!(
            out,
            "  flow {}: {} — {n} packets; {summary}",
            i + 1,
            texts[i]
                .split(" -> ")
                .skip(1)
                .collect::<Vec<_>>()
                .join(" -> ")
        )?;
    }
    Ok(())
}

fn count(filter: &mut Filter, packets: &[Packet]) -> (usize, u64) {
    packets
        .iter()
        .filter(|p| filter.run(&p.data, p.wire_len) != 0)
        .fold((0, 0), |(n, b), p| (n + 1, b + u64::from(p.wire_len)))
}

/// Mean time per packet over enough rounds to take a few milliseconds.
fn time_per_packet(filter: &mut Filter, packets: &[Packet]) -> f64 {
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
