//! `netsift gen`: make test traffic — the packets of a capture file, a synthetic gateway-like
//! mix, or the FTP passive-mode workload of the Swift paper — and write it to a capture file
//! (`-w FILE`) or send it onto an interface (`--send IFACE`) at a set rate, bounded in count and
//! time. `netsift gen classbench SEED N` makes a ClassBench rule set (and a header trace) from a
//! ClassBench seed file instead.
//!
//! Sending is meant for test networks (a veth pair in a namespace). Everything netsift makes
//! (the mix, the FTP workload) uses only the test ranges 198.18.0.0/15 and 2001:db8::/32, and
//! the sender refuses any frame that carries another address. A replayed capture (`-r FILE`)
//! sends the file's own addresses: when they leave the test ranges, it needs
//! `--allow-foreign-addresses`.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use netsift::capture::generate::Mix;
use netsift::capture::live::{Foreign, Sender, foreign_address};
use netsift::capture::{CaptureReader, LinkType, Packet, PcapWriter, Precision};
use netsift::classify::generate;
use netsift_bench::ftp::FtpWorkload;

use crate::signals;

/// Flags of `netsift gen`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    /// Something other than packets.
    #[command(subcommand)]
    what: Option<What>,
    /// Send the packets on this interface.
    #[arg(long = "send", value_name = "IFACE", required_unless_present = "write")]
    iface: Option<String>,
    /// Write the packets to this pcap file (nanosecond timestamps) instead of sending them.
    #[arg(short = 'w', value_name = "FILE", conflicts_with = "iface")]
    write: Option<PathBuf>,
    /// Use the packets of this capture (Ethernet link type), in order.
    #[arg(short = 'r', value_name = "FILE", conflicts_with_all = ["mix", "ftp"])]
    read: Option<PathBuf>,
    /// With --send -r FILE: send the capture's packets even when they carry addresses outside
    /// the test ranges (198.18.0.0/15, 2001:db8::/32). Without it such a replay is refused.
    #[arg(long, requires = "read")]
    allow_foreign_addresses: bool,
    /// The synthetic mix (TCP to web, mail, SSH; UDP; ICMP; IPv6; ARP; VLAN) with this seed
    /// (the default when neither -r nor --ftp is given).
    #[arg(long, value_name = "SEED")]
    mix: Option<u64>,
    /// The FTP passive-mode workload of the Swift paper (§5.1.1): FTP servers with data
    /// connections announced by 227/229 replies and started one by one, in background traffic.
    #[arg(long, conflicts_with = "mix")]
    ftp: bool,
    /// The mix: relative weights of TCP/IPv4, TCP/IPv6, UDP/IPv4, UDP/IPv6, ICMP, ICMPv6 and
    /// ARP packets.
    #[arg(long, value_name = "W,W,W,W,W,W,W", value_delimiter = ',', conflicts_with_all = ["ftp", "read"])]
    weights: Option<Vec<u64>>,
    /// The mix: VLAN-tag one frame in N (0: none; default 5).
    #[arg(long, value_name = "N", conflicts_with_all = ["ftp", "read"])]
    vlan_one_in: Option<u64>,
    /// The mix: clients (198.18.0.1 and up, default 200) and servers (198.19.0.1 and up,
    /// default 8).
    #[arg(long, value_name = "CLIENTS,SERVERS", value_delimiter = ',', conflicts_with_all = ["ftp", "read"])]
    hosts: Option<Vec<u64>>,
    /// The mix: server ports of TCP over IPv4 (default 80,443,22).
    #[arg(long, value_name = "PORT,...", value_delimiter = ',', conflicts_with_all = ["ftp", "read"])]
    tcp_ports: Option<Vec<u16>>,
    /// The mix: largest payload in bytes (default 63).
    #[arg(long, value_name = "BYTES", conflicts_with_all = ["ftp", "read"])]
    max_payload: Option<u64>,
    /// --ftp: servers.
    #[arg(long, value_name = "N", default_value = "10", requires = "ftp")]
    servers: usize,
    /// --ftp: data connections per server (all stay open to the end).
    #[arg(long, value_name = "N", default_value = "20", requires = "ftp")]
    connections: usize,
    /// --ftp: background packets per second.
    #[arg(long, value_name = "PPS", default_value = "500000", requires = "ftp")]
    background_pps: u64,
    /// --ftp: seed.
    #[arg(long, value_name = "SEED", default_value = "1", requires = "ftp")]
    seed: u64,
    /// Packets per second when sending (default: as fast as the interface takes them).
    #[arg(long, value_name = "PPS")]
    rate: Option<u64>,
    /// Stop after this many packets (default: the file's packets once, the whole FTP workload,
    /// or 10000 of the mix).
    #[arg(short = 'c', value_name = "N")]
    count: Option<u64>,
    /// Stop sending after this many seconds (default 60).
    #[arg(long, value_name = "SECS", default_value = "60")]
    duration: f64,
    /// Repeat the file's packets until the count or the duration is reached.
    #[arg(long = "loop")]
    repeat: bool,
}

/// Packets of the mix written to a file when no count is given.
const MIX_DEFAULT: u64 = 10_000;
/// The largest number of packets generated in memory for a file.
const MAX_GENERATED: u64 = 50_000_000;

/// What `netsift gen` makes besides packets.
#[derive(clap::Subcommand, Debug)]
enum What {
    /// A ClassBench rule set (and header trace) from a ClassBench seed file, like ClassBench's
    /// db_generator and trace_generator.
    Classbench(ClassbenchArgs),
}

/// Flags of `netsift gen classbench`.
#[derive(clap::Args, Debug)]
struct ClassbenchArgs {
    /// The seed: a seed file, or the name of a ClassBench seed (acl1..acl5, fw1..fw5, ipc1,
    /// ipc2) in the shared data (`classbench/seeds/` of $NETSIFT_SHARED_DATA, or of
    /// ../shared/data beside the repository).
    #[arg(value_name = "SEED")]
    seed_file: String,
    /// Rules to generate; exact duplicates are removed, so fewer may come out.
    #[arg(value_name = "N")]
    count: usize,
    /// The random seed: the same seed gives the same rules and trace.
    #[arg(long = "seed", value_name = "U64", default_value = "1")]
    rng: u64,
    /// Write the rules to FILE (default: standard output).
    #[arg(short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
    /// Also write a header trace to FILE, with the first matching rule of each header.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Headers in the trace (default: ten per rule).
    #[arg(long, value_name = "M", requires = "trace")]
    trace_len: Option<usize>,
    /// The trace's Pareto parameters of the number of copies of each header (ClassBench's a
    /// and b; default 1,0: each header once).
    #[arg(long, value_name = "A,B", value_delimiter = ',', requires = "trace")]
    pareto: Option<Vec<f64>>,
    /// The share of trace headers at a corner of their rule (default 1, as ClassBench); the
    /// others are random points in the rule.
    #[arg(long, value_name = "SHARE", requires = "trace")]
    trace_corners: Option<f64>,
    /// Zipf exponent of the choice of rule for each header (default 0: uniform, as ClassBench).
    #[arg(long, value_name = "S", requires = "trace")]
    trace_skew: Option<f64>,
    /// ClassBench's smoothness, 0 to 64: spread the prefix-length pairs over their neighbours.
    #[arg(long, value_name = "S", default_value = "0")]
    smoothness: u32,
    /// ClassBench's address scope, -1 to 1: positive favours shorter prefixes.
    #[arg(
        long,
        value_name = "X",
        default_value = "0",
        allow_negative_numbers = true
    )]
    address_scope: f64,
    /// ClassBench's port (application) scope, -1 to 1: positive favours wildcard ports.
    #[arg(
        long,
        value_name = "X",
        default_value = "0",
        allow_negative_numbers = true
    )]
    port_scope: f64,
    /// Keep the seed's address trie as it is for any N (ClassBench without -b); by default its
    /// top levels are balanced by N / the seed's rule count.
    #[arg(long)]
    no_address_scaling: bool,
}

/// The ClassBench seeds of the shared data.
const SEEDS: [&str; 12] = [
    "acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3", "fw4", "fw5", "ipc1", "ipc2",
];
/// The most rules `gen classbench` makes.
const MAX_RULES: usize = 10_000_000;

/// The file of SEED: a path, or a known seed name in the shared data.
fn seed_path(arg: &str) -> Result<PathBuf> {
    let p = Path::new(arg);
    if p.is_file() {
        return Ok(p.to_path_buf());
    }
    let name = arg.strip_suffix("_seed").unwrap_or(arg);
    if !SEEDS.contains(&name) {
        bail!(
            "{arg}: no such seed file, and not a ClassBench seed name ({})",
            SEEDS.join(", ")
        );
    }
    let f = netsift::classify::classbench::shared_data_dir()
        .join("classbench/seeds")
        .join(format!("{name}_seed"));
    if !f.is_file() {
        bail!(
            "seed {name}: {} does not exist (the shared data lives beside the repository in \
             ../shared/data; set NETSIFT_SHARED_DATA to its path)",
            f.display()
        );
    }
    Ok(f)
}

/// Write `text` to `out` through a file beside it, renamed when complete.
fn write_text(out: &Path, text: &str) -> Result<()> {
    let tmp = out.with_extension("netsift-tmp");
    let result = std::fs::write(&tmp, text)
        .with_context(|| format!("cannot write {}", tmp.display()))
        .and_then(|()| {
            std::fs::rename(&tmp, out)
                .with_context(|| format!("cannot rename {} to {}", tmp.display(), out.display()))
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Run `netsift gen classbench`.
fn classbench(a: ClassbenchArgs) -> Result<ExitCode> {
    if a.count == 0 || a.count > MAX_RULES {
        bail!("N must be 1 to {MAX_RULES} rules, not {}", a.count);
    }
    let opts = generate::Options {
        smoothness: a.smoothness,
        address_scope: a.address_scope,
        port_scope: a.port_scope,
        scale_addresses: !a.no_address_scaling,
    };
    opts.check().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut topts = generate::TraceOptions::default();
    if let Some(p) = &a.pareto {
        let [pa, pb] = p[..] else {
            bail!("--pareto takes two numbers, A,B");
        };
        if !(pa > 0.0 && pa <= 1.0 && (0.0..=1e6).contains(&pb)) {
            bail!("--pareto {pa},{pb}: A must be in (0, 1] and B at least 0");
        }
        (topts.pareto_a, topts.pareto_b) = (pa, pb);
    }
    if let Some(c) = a.trace_corners {
        if !(0.0..=1.0).contains(&c) {
            bail!("--trace-corners {c}: a share from 0 to 1");
        }
        topts.corners = c;
    }
    if let Some(s) = a.trace_skew {
        if !(0.0..=100.0).contains(&s) {
            bail!("--trace-skew {s}: an exponent from 0 to 100");
        }
        topts.rule_skew = s;
    }
    let path = seed_path(&a.seed_file)?;
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let seed = generate::parse_seed(&text).with_context(|| path.display().to_string())?;
    let t0 = Instant::now();
    let rules = generate::generate(&seed, a.count, a.rng, opts);
    let took = t0.elapsed();
    eprintln!(
        "netsift: {}: {} rules generated of {} asked for ({} duplicates removed) in {:.1} ms",
        a.seed_file,
        rules.len(),
        a.count,
        a.count - rules.len(),
        took.as_secs_f64() * 1e3
    );
    let text = generate::write_rules(&rules)?;
    match &a.out {
        Some(out) => {
            write_text(out, &text).with_context(|| format!("writing {}", out.display()))?;
            eprintln!("netsift: wrote {} rules to {}", rules.len(), out.display());
        }
        None => {
            let mut o = std::io::stdout().lock();
            o.write_all(text.as_bytes())?;
            o.flush()?;
        }
    }
    if let Some(tpath) = &a.trace {
        let len = a.trace_len.unwrap_or(rules.len().saturating_mul(10));
        if len == 0 || len > MAX_GENERATED as usize {
            bail!("--trace-len must be 1 to {MAX_GENERATED} headers, not {len}");
        }
        let t0 = Instant::now();
        let t = generate::trace(&rules, len, a.rng, topts);
        let took = t0.elapsed();
        write_text(tpath, &generate::write_trace(&t))
            .with_context(|| format!("writing {}", tpath.display()))?;
        eprintln!(
            "netsift: wrote {} headers to {} ({:.1} ms)",
            t.len(),
            tpath.display(),
            took.as_secs_f64() * 1e3
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Run `netsift gen`.
pub fn run(args: Args) -> Result<ExitCode> {
    if let Some(What::Classbench(a)) = args.what {
        return classbench(a);
    }
    signals::install();
    if !(args.duration > 0.0 && args.duration.is_finite()) {
        bail!("--duration must be a positive number of seconds");
    }
    if let Some(out) = &args.write {
        return write(&args, out);
    }
    let Some(iface) = args.iface.clone() else {
        bail!("say where the packets go: -w FILE or --send IFACE");
    };
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
        None if args.ftp => ftp_workload(&args)?
            .packets
            .into_iter()
            .map(|p| p.data)
            .collect(),
        None => mix_of(&args)?
            .generate(args.mix.unwrap_or(1), 4096)
            .into_iter()
            .map(|p| p.data)
            .collect(),
    };
    if frames.is_empty() {
        bail!("nothing to send");
    }
    if let Some(path) = &args.read {
        let foreign: Vec<(usize, Foreign)> = frames
            .iter()
            .enumerate()
            .filter_map(|(i, f)| foreign_address(f).map(|a| (i, a)))
            .collect();
        if let Some(&(i, why)) = foreign.first() {
            let what = match why {
                Foreign::Address(a) => format!("packet {} carries {a}", i + 1),
                Foreign::Unreadable => format!(
                    "packet {} is cut before its addresses and cannot be checked",
                    i + 1
                ),
            };
            if !args.allow_foreign_addresses {
                bail!(
                    "{}: {what}, outside the test ranges 198.18.0.0/15 and 2001:db8::/32 ({} of \
                     {} packets are); a replay sends the capture's own addresses: add \
                     --allow-foreign-addresses to send them",
                    path.display(),
                    foreign.len(),
                    frames.len()
                );
            }
            eprintln!(
                "netsift: replaying {} with its own addresses: {} of {} packets are outside the \
                 test ranges (the first: {what})",
                path.display(),
                foreign.len(),
                frames.len()
            );
        } else {
            eprintln!(
                "netsift: replaying {} with its own addresses (all inside the test ranges)",
                path.display()
            );
        }
    }
    let repeat = args.repeat || (args.read.is_none() && !args.ftp);
    let count = args
        .count
        .unwrap_or(if (args.read.is_some() || args.ftp) && !args.repeat {
            frames.len() as u64
        } else {
            10_000
        });
    let mut tx = Sender::open(&iface)?;
    if !args.allow_foreign_addresses {
        // Everything netsift makes uses the test ranges; a bug that did not would stop here.
        tx = tx.restrict_to_test_ranges();
    }
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
        iface,
        st.sent as f64 / secs.max(1e-9)
    );
    Ok(ExitCode::SUCCESS)
}

/// The mix the flags describe.
fn mix_of(args: &Args) -> Result<Mix> {
    let mut m = Mix::default();
    if let Some(w) = &args.weights {
        if w.len() != m.weights.len() {
            bail!(
                "--weights takes 7 numbers (TCP/IPv4, TCP/IPv6, UDP/IPv4, UDP/IPv6, ICMP, ICMPv6, ARP), not {}",
                w.len()
            );
        }
        m.weights.copy_from_slice(w);
    }
    if let Some(v) = args.vlan_one_in {
        m.vlan_one_in = v;
    }
    if let Some(h) = &args.hosts {
        let [c, s] = h[..] else {
            bail!("--hosts takes two numbers, CLIENTS,SERVERS");
        };
        (m.clients, m.servers) = (c, s);
    }
    if let Some(p) = &args.tcp_ports {
        m.tcp_ports = p.clone();
    }
    if let Some(b) = args.max_payload {
        m.max_payload = b;
    }
    m.check().map_err(|e| anyhow::anyhow!("the mix: {e}"))?;
    Ok(m)
}

fn ftp_workload(args: &Args) -> Result<netsift_bench::ftp::FtpTrace> {
    if args.servers == 0 || args.servers > 250 || args.connections == 0 {
        bail!("--ftp needs 1 to 250 --servers and at least one connection per server");
    }
    if args.servers * args.connections > 250 * 200 {
        bail!("--ftp: at most 50000 data connections (one client address each)");
    }
    let w = FtpWorkload {
        seed: args.seed,
        servers: args.servers,
        connections: args.connections,
        background_pps: args.background_pps,
        ..FtpWorkload::paper()
    };
    let expected = w.duration_ns() as u128 * u128::from(w.background_pps) / 1_000_000_000;
    if expected > u128::from(MAX_GENERATED) {
        bail!(
            "--ftp: {expected} background packets is too many to generate (at most {MAX_GENERATED})"
        );
    }
    Ok(w.generate())
}

/// `-w FILE`: generate the packets and write them as a pcap file with nanosecond timestamps.
fn write(args: &Args, out: &std::path::Path) -> Result<ExitCode> {
    let packets: Vec<Packet> = if let Some(path) = &args.read {
        let mut r =
            CaptureReader::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut v = Vec::new();
        while let Some(p) = r.next_packet() {
            v.push(
                p.with_context(|| format!("reading {}", path.display()))?
                    .to_owned(),
            );
        }
        v
    } else if args.ftp {
        let trace = ftp_workload(args)?;
        eprintln!(
            "netsift: FTP workload: {} servers x {} data connections ({} announced with EPSV), {} packets",
            args.servers,
            args.connections,
            trace.connections.iter().filter(|c| c.epsv).count(),
            trace.packets.len()
        );
        trace.packets
    } else {
        let n = args.count.unwrap_or(MIX_DEFAULT);
        if n > MAX_GENERATED {
            bail!("-c {n}: at most {MAX_GENERATED} packets of the mix");
        }
        mix_of(args)?.generate(args.mix.unwrap_or(1), n as usize)
    };
    let limit = args.count.unwrap_or(u64::MAX);
    // Write next to the target and rename, so a failure leaves no half-written file behind.
    let tmp = out.with_extension("netsift-tmp");
    let file = File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let result = (|| -> Result<u64> {
        let mut w = PcapWriter::new(
            BufWriter::new(file),
            LinkType::ETHERNET,
            262_144,
            Precision::Nano,
        )?;
        let mut n = 0u64;
        for p in packets
            .iter()
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
        {
            if p.link_type != LinkType::ETHERNET {
                bail!(
                    "packets of link type {} cannot be mixed into an Ethernet file",
                    p.link_type
                );
            }
            w.write_packet(&p.as_ref())?;
            n += 1;
        }
        w.flush()?;
        Ok(n)
    })();
    match result {
        Ok(n) => {
            std::fs::rename(&tmp, out)
                .with_context(|| format!("cannot rename {} to {}", tmp.display(), out.display()))?;
            eprintln!("netsift: wrote {n} packets to {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e.context(format!("writing {}", out.display())))
        }
    }
}
