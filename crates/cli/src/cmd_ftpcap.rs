//! `netsift ftpcap`: the Swift paper's FTPCap — follow FTP control connections in a capture and
//! keep the packets of their data connections, with a Swift filter updated in place as data
//! connections are announced (227/229 replies, PORT/EPRT commands) and closed.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use netsift::capture::{CaptureReader, LinkType, PcapWriter, Precision};
use netsift::swift::ftpcap::{Event, SwiftFtpCap, Tracker};

/// Flags of `netsift ftpcap`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Read packets from this capture file (Ethernet).
    #[arg(short = 'r', value_name = "FILE")]
    read: PathBuf,
    /// Write the packets kept (control and data connections) to this pcap file.
    #[arg(short = 'w', value_name = "FILE")]
    write: Option<PathBuf>,
    /// Print only the summary, not one line per data connection opened or closed.
    #[arg(short = 'q')]
    quiet: bool,
}

/// Run `netsift ftpcap`.
pub fn run(args: Args) -> Result<ExitCode> {
    let mut reader = CaptureReader::open(&args.read)
        .with_context(|| format!("cannot read {}", args.read.display()))?;
    let (writer, mut filter) = netsift::swift::open(262_144);
    let mut cap = SwiftFtpCap::new(writer).map_err(|e| anyhow!("{e}"))?;
    let mut tracker = Tracker::new();
    let mut out = match &args.write {
        Some(path) => Some(PcapWriter::new(
            BufWriter::new(
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
            ),
            LinkType::ETHERNET,
            262_144,
            Precision::Nano,
        )?),
        None => None,
    };
    let stdout = std::io::stdout();
    let mut stdout = stdout.lock();
    let (mut seen, mut kept, mut opened, mut closed) = (0u64, 0u64, 0u64, 0u64);
    while let Some(p) = reader.next_packet() {
        let p = p.with_context(|| format!("reading {}", args.read.display()))?;
        if p.link_type != LinkType::ETHERNET {
            bail!(
                "{}: ftpcap reads Ethernet captures, not link type {}",
                args.read.display(),
                p.link_type
            );
        }
        seen += 1;
        if filter.run(p.data, p.wire_len) == 0 {
            continue;
        }
        kept += 1;
        if let Some(w) = &mut out {
            w.write_packet(&p)?;
        }
        if let Some(event) = tracker.observe(p.data) {
            cap.apply(&event).map_err(|e| anyhow!("{e}"))?;
            let (what, c) = match event {
                Event::Open(c) => {
                    opened += 1;
                    ("open ", c)
                }
                Event::Close(c) => {
                    closed += 1;
                    ("close", c)
                }
            };
            if !args.quiet {
                let a = |x: [u8; 4]| format!("{}.{}.{}.{}", x[0], x[1], x[2], x[3]);
                writeln!(
                    stdout,
                    "{} {what} {} -> {}:{}",
                    p.timestamp,
                    a(c.from),
                    a(c.to),
                    c.port
                )?;
            }
        }
    }
    if let Some(w) = &mut out {
        w.flush()?;
    }
    eprintln!(
        "netsift: ftpcap: {seen} packets read, {kept} kept; {opened} data connections opened, \
         {closed} closed, {} still open",
        cap.connections()
    );
    Ok(ExitCode::SUCCESS)
}
