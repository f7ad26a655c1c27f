//! pfreflect, a filtering bridge (Deri et al. §5.3).
//!
//! pfreflect reads packets from one interface and forwards those that pass a filter to another.
//! With NIC rules the bridge only sees what the NIC delivers: the filter expression is compiled
//! into NIC rules (what the filter certainly rejects is dropped in hardware) and a residual
//! software filter (the filter itself, run with the BPF interpreter on every delivered packet)
//! makes the result exact. The "other interface" is a pcap file written with
//! [`PcapWriter`].
//!
//! Usage: `pfreflect [EXPR] [--read IN.pcap] [--write OUT.pcap]`. The default filter is
//! `tcp port 80 or udp port 53`; without `--read` a generated mix is bridged (HTTP is added to
//! the default mix's HTTPS and SSH); without `--write` the output goes to a temporary file that is
//! removed afterwards. The example reads the output back and checks that the forwarded packets
//! are exactly, in order and byte for byte, those the software filter alone accepts. It prints
//! the NIC rules, the fraction of the input dropped in the NIC and the counts.
//!
//! Run with `cargo run --release -p netsift-offload --example pfreflect -- 'tcp port 80'`.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use netsift_capture::generate::Mix;
use netsift_capture::{CaptureReader, LinkType, Packet, PcapWriter, Precision};
use netsift_offload::compile::{Options, compile};
use netsift_offload::{EmulatedNic, Profile};

const DEFAULT_EXPR: &str = "tcp port 80 or udp port 53";
const PACKETS: usize = 30_000;

/// What to bridge.
pub struct Config {
    /// The filter expression.
    pub expr: String,
    /// The input capture; `None`: a generated mix.
    pub read: Option<PathBuf>,
    /// The output capture; `None`: a temporary file.
    pub write: Option<PathBuf>,
}

fn parse_args() -> Result<Config, String> {
    let mut cfg = Config {
        expr: DEFAULT_EXPR.to_string(),
        read: None,
        write: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--read" => cfg.read = Some(args.next().ok_or("--read needs a file")?.into()),
            "--write" => cfg.write = Some(args.next().ok_or("--write needs a file")?.into()),
            _ => cfg.expr = a,
        }
    }
    Ok(cfg)
}

/// Bridges with `cfg`; `quiet` suppresses the report.
pub fn run_with(cfg: &Config, quiet: bool) -> Result<(), String> {
    let input: Vec<Packet> = match &cfg.read {
        Some(path) => CaptureReader::open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .into_iter()
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", path.display()))?,
        None => Mix {
            tcp_ports: vec![80, 443, 22],
            ..Mix::default()
        }
        .generate(0xb41d, PACKETS),
    };
    let link = input.first().map_or(LinkType::ETHERNET, |p| p.link_type);
    let pred = netsift_lang::compile(&cfg.expr, &netsift_lang::Context::new(link))
        .map_err(|e| format!("`{}`: {e}", cfg.expr))?;
    let prog = netsift_bpf::compile::compile(&pred, &Default::default())
        .map_err(|e| format!("`{}`: {e}", cfg.expr))?;
    let filter =
        netsift_bpf::Filter::new(prog, netsift_bpf::Rules::Libpcap).map_err(|e| e.to_string())?;
    // The compiler reads Ethernet filters; other link types get no NIC rules.
    let (table, rules, notes) = if link == LinkType::ETHERNET {
        let o = compile(&pred, &Options::new(Profile::Mlx5)).map_err(|e| e.to_string())?;
        let (rules, notes) = (o.rules().to_vec(), o.notes().to_vec());
        (o.into_table(), rules, notes)
    } else {
        let t = netsift_offload::RuleTable::for_profile(Profile::Mlx5);
        (
            t,
            Vec::new(),
            vec!["not Ethernet: no NIC rules".to_string()],
        )
    };
    let mut nic = EmulatedNic::new(4, table);

    // Unique per process and call (tests bridge concurrently).
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    let out_path = cfg.write.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!(
            "netsift-pfreflect-{}-{serial}.pcap",
            std::process::id()
        ))
    });
    let file = File::create(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
    let mut writer = PcapWriter::new(BufWriter::new(file), link, 0, Precision::Nano)
        .map_err(|e| e.to_string())?;
    let (mut forwarded, mut expected) = (Vec::new(), Vec::new());
    for (i, p) in input.iter().enumerate() {
        if filter.run(&p.data, p.wire_len) != 0 {
            expected.push(i);
        }
        if nic.receive_packet(p.as_ref()).is_dropped() {
            continue;
        }
        if filter.run(&p.data, p.wire_len) != 0 {
            writer
                .write_packet(&p.as_ref())
                .map_err(|e| e.to_string())?;
            forwarded.push(i);
        }
    }
    let buffered = writer
        .into_inner()
        .map_err(|e| format!("{}: {e}", out_path.display()))?;
    buffered
        .into_inner()
        .map_err(|e| format!("{}: {}", out_path.display(), e.error()))?;
    let back: Vec<Packet> = CaptureReader::open(&out_path)
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if cfg.write.is_none() {
        let _ = std::fs::remove_file(&out_path);
    }
    let stats = *nic.stats();
    if !quiet {
        println!("pfreflect (§5.3): `{}`, profile mlx5", cfg.expr);
        for (r, role) in &rules {
            let c = nic.rule_counters(r.id).unwrap_or_default();
            println!("  [{role}] {r}: {} packets", c.packets);
        }
        for n in &notes {
            println!("  note: {n}");
        }
        println!(
            "  {} packets in, {} dropped in the NIC ({:.1}%), {} to the residual filter, {} forwarded to {}",
            stats.received,
            stats.dropped,
            100.0 * stats.dropped as f64 / stats.received.max(1) as f64,
            stats.received - stats.dropped,
            forwarded.len(),
            if cfg.write.is_some() {
                out_path.display().to_string()
            } else {
                "a temporary pcap".to_string()
            }
        );
    }
    if forwarded != expected {
        return Err(format!(
            "forwarded {} packets, the software filter accepts {}",
            forwarded.len(),
            expected.len()
        ));
    }
    let same = back.len() == expected.len()
        && back.iter().zip(&expected).all(|(b, &i)| {
            let p = &input[i];
            b.data == p.data && b.wire_len == p.wire_len && b.timestamp == p.timestamp
        });
    if !same {
        return Err("the output pcap differs from the accepted packets".into());
    }
    if !quiet {
        println!("  OK: forwarded set = software filter alone, output read back identical");
    }
    Ok(())
}

/// Bridges the generated mix with the default filter.
#[allow(dead_code)]
pub fn run(quiet: bool) -> Result<(), String> {
    let cfg = Config {
        expr: DEFAULT_EXPR.to_string(),
        read: None,
        write: None,
    };
    run_with(&cfg, quiet)
}

#[allow(dead_code)]
fn main() {
    let result = parse_args().and_then(|cfg| run_with(&cfg, false));
    if let Err(e) = result {
        eprintln!("pfreflect: FAILED: {e}");
        std::process::exit(1);
    }
}
