//! `netsift gen --send IFACE`: send test traffic onto an interface — the packets of a capture
//! file or a synthetic gateway-like mix — at a set rate, bounded in count and time.
//!
//! Meant for test networks (a veth pair in a namespace): the frames are sent as they are, from
//! whatever addresses they carry.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use netsift::capture::live::Sender;
use netsift::capture::{CaptureReader, LinkType};

use crate::signals;

/// Flags of `netsift gen`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The interface to send on.
    #[arg(long = "send", value_name = "IFACE")]
    iface: String,
    /// Send the packets of this capture (Ethernet link type), in order.
    #[arg(short = 'r', value_name = "FILE")]
    read: Option<PathBuf>,
    /// Send the synthetic mix (TCP to web, mail, SSH; UDP; ICMP; IPv6; ARP; VLAN) with this
    /// seed (the default when no -r is given).
    #[arg(long, value_name = "SEED")]
    mix: Option<u64>,
    /// Packets per second (default: as fast as the interface takes them).
    #[arg(long, value_name = "PPS")]
    rate: Option<u64>,
    /// Stop after this many packets (default: the file's packets once, or 10000 of the mix).
    #[arg(short = 'c', value_name = "N")]
    count: Option<u64>,
    /// Stop after this many seconds (default 60).
    #[arg(long, value_name = "SECS", default_value = "60")]
    duration: f64,
    /// Repeat the file's packets until the count or the duration is reached.
    #[arg(long = "loop")]
    repeat: bool,
}

/// Run `netsift gen`.
pub fn run(args: Args) -> Result<ExitCode> {
    signals::install();
    if !(args.duration > 0.0 && args.duration.is_finite()) {
        bail!("--duration must be a positive number of seconds");
    }
    let frames: Vec<Vec<u8>> = match &args.read {
        Some(path) => {
            let mut r = CaptureReader::open(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let mut v = Vec::new();
            while let Some(p) = r.next_packet() {
                let p = p.with_context(|| format!("reading {}", path.display()))?;
                if p.link_type != LinkType::ETHERNET {
                    bail!(
                        "{}: packets of link type {} cannot be sent on an Ethernet interface",
                        path.display(),
                        p.link_type
                    );
                }
                v.push(p.data.to_vec());
            }
            v
        }
        None => netsift_bench::workload::frames(args.mix.unwrap_or(1), 4096)
            .into_iter()
            .map(|p| p.data)
            .collect(),
    };
    if frames.is_empty() {
        bail!("nothing to send");
    }
    let repeat = args.repeat || args.read.is_none();
    let count = args
        .count
        .unwrap_or(if args.read.is_some() && !args.repeat {
            frames.len() as u64
        } else {
            10_000
        });
    let mut tx = Sender::open(&args.iface)?;
    let started = Instant::now();
    let mut it: Box<dyn Iterator<Item = &[u8]>> = if repeat {
        Box::new(frames.iter().map(Vec::as_slice).cycle())
    } else {
        Box::new(frames.iter().map(Vec::as_slice))
    };
    let max_time = Duration::from_secs_f64(args.duration);
    // Send in slices of at most 100 ms so that Ctrl-C is noticed.
    let mut sent = 0u64;
    while sent < count && started.elapsed() < max_time && !signals::stopped() {
        let slice = match args.rate {
            Some(r) => (r / 10).max(1),
            None => 65_536,
        }
        .min(count - sent);
        let before = tx.stats().sent;
        let left = max_time.saturating_sub(started.elapsed());
        let slice_start = Instant::now();
        tx.send_paced(&mut it, args.rate, slice, left)?;
        let n = tx.stats().sent - before;
        if n == 0 {
            break;
        }
        sent += n;
        if let Some(r) = args.rate {
            // Keep the long-run rate across slices.
            let due = Duration::from_secs_f64(sent as f64 / r as f64);
            let el = started.elapsed();
            if due > el {
                std::thread::sleep(due - el);
            }
        }
        let _ = slice_start;
    }
    let st = tx.stats();
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "netsift: sent {} packets ({} bytes) on {} in {secs:.3} s ({:.0} pkt/s)",
        st.sent,
        st.bytes,
        args.iface,
        st.sent as f64 / secs.max(1e-9)
    );
    Ok(ExitCode::SUCCESS)
}
