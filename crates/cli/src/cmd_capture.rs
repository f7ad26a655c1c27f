//! `netsift capture`: capture from an interface (or read a file) through a filter, like
//! tcpdump: print the packets, or write them to files with tcpdump's rotation.
//!
//! The pipeline is the same for `-i IFACE` and `-r FILE`: a source hands packets out in place,
//! the filter runs on them there, accepted packets (cut to the snap length the filter returned)
//! are printed or written. Live statistics go to stderr once a second when stderr is a terminal
//! (or always with `--stats`); a summary like tcpdump's ends the run. SIGINT, SIGTERM and SIGHUP
//! stop the capture cleanly: files are flushed and the summary printed.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use netsift::bpf::{Insn, Program};
use netsift::capture::live::{
    AfPacket, AfPacketConfig, AfXdp, AfXdpConfig, Direction, Fanout, FanoutMode, Flow, SockFilter,
    Source, SourceStats, TimestampSource, XdpAttachMode,
};
use netsift::capture::{CaptureReader, LinkType, PacketRef, Precision};
use netsift::filter::Input as FilterInput;
use netsift::{Filter, Target};

use crate::sink::{self, Next, Rotating, Rotation};
use crate::{expr, kernel, output, program, signals};

/// Which live source to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SourceKind {
    /// AF_PACKET with a TPACKET_V3 ring (sees both directions; the stack still gets the packets).
    Afpacket,
    /// AF_XDP sockets fed by an XDP program (received packets only; they do not reach the stack).
    Afxdp,
}

/// `-Q` directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Dir {
    /// Received packets.
    In,
    /// Sent packets.
    Out,
    /// Both.
    Inout,
}

/// `-j` timestamp types (tcpdump's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TsType {
    /// The kernel's clock.
    Host,
    /// The adapter's clock.
    Adapter,
    /// The adapter's clock (same as adapter here).
    #[value(name = "adapter_unsynced")]
    AdapterUnsynced,
}

/// `--xdp-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum XdpMode {
    /// Native if the driver supports it, else generic.
    Auto,
    /// In the driver.
    Native,
    /// Generic (any interface).
    Generic,
}

/// Flags of `netsift capture`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Capture on this interface.
    #[arg(
        short = 'i',
        value_name = "IFACE",
        required_unless_present = "read",
        conflicts_with = "read"
    )]
    iface: Option<String>,
    /// Read packets from a capture file instead (pcap or pcapng).
    #[arg(short = 'r', value_name = "FILE")]
    read: Option<PathBuf>,
    /// Write accepted packets to FILE (`-` for standard output) instead of printing them.
    #[arg(short = 'w', value_name = "FILE")]
    write: Option<String>,
    /// Output format (default: pcapng if the file name ends in .pcapng, else pcap).
    #[arg(long, value_enum, value_name = "FMT")]
    format: Option<sink::Format>,
    /// Stop after N accepted packets.
    #[arg(short = 'c', value_name = "N")]
    count: Option<u64>,
    /// Snap length: bytes kept of each packet (0 or default: 262144).
    #[arg(short = 's', value_name = "SNAPLEN")]
    snaplen: Option<u32>,
    /// Direction: in, out or inout (default inout).
    #[arg(short = 'Q', value_enum, value_name = "DIR")]
    direction: Option<Dir>,
    /// Do not put the interface in promiscuous mode.
    #[arg(short = 'p')]
    no_promisc: bool,
    /// Live source.
    #[arg(long, value_enum, default_value = "afpacket")]
    source: SourceKind,
    /// Where the filter runs: auto (kernel pre-filter for AF_PACKET, then the JIT where it runs,
    /// else the interpreter), bpf (the interpreter alone), jit (native code alone) or ebpf (an
    /// eBPF socket filter on the AF_PACKET socket; root).
    #[arg(long, value_enum, default_value = "auto")]
    engine: program::EngineArg,
    /// With --engine ebpf: also attach the filter as an XDP program (--xdp-mode) that drops the
    /// packets it rejects at the driver, for the whole host; detached when netsift exits.
    #[arg(long)]
    xdp: bool,
    /// Start a new file when the current one exceeds SIZE million bytes (tcpdump -C).
    #[arg(short = 'C', value_name = "SIZE")]
    file_size: Option<u64>,
    /// Start a new file every SECS seconds; the -w name is a strftime pattern (tcpdump -G).
    #[arg(short = 'G', value_name = "SECS")]
    rotate_secs: Option<u64>,
    /// With -C: reuse N files in a ring; with -G alone: stop after N files (tcpdump -W).
    #[arg(short = 'W', value_name = "N")]
    files: Option<u32>,
    /// Ring size in KiB (tcpdump -B); rounded to whole blocks.
    #[arg(short = 'B', value_name = "KIB")]
    buffer_kib: Option<u32>,
    /// AF_PACKET ring block size in bytes (power of two, default 1048576).
    #[arg(long, value_name = "BYTES")]
    block_size: Option<u32>,
    /// AF_PACKET ring blocks (default 8).
    #[arg(long, value_name = "N")]
    blocks: Option<u32>,
    /// Longest a packet waits in a partly filled AF_PACKET block, in ms (default 100).
    #[arg(long, value_name = "MS")]
    retire_ms: Option<u64>,
    /// Join a PACKET_FANOUT group: `GROUP:MODE[:defrag][:rollover]`, MODE hash, cpu, lb or rollover.
    #[arg(long, value_name = "SPEC")]
    fanout: Option<String>,
    /// Timestamp source (tcpdump -j): host, adapter, adapter_unsynced.
    #[arg(short = 'j', long = "time-stamp-type", value_enum, value_name = "TYPE")]
    tstamp: Option<TsType>,
    /// AF_XDP: only this receive queue (default: all).
    #[arg(long, value_name = "N")]
    queue: Option<u32>,
    /// AF_XDP and --xdp: how to attach the XDP program.
    #[arg(long, value_enum, default_value = "auto")]
    xdp_mode: XdpMode,
    /// AF_XDP: ask for zero-copy (the driver must support it).
    #[arg(long)]
    zero_copy: bool,
    /// Print statistics every second even when stderr is not a terminal.
    #[arg(long)]
    stats: bool,
    /// Print nothing but errors on stderr (no banner, statistics or summary).
    #[arg(short = 'q')]
    quiet: bool,
    #[command(flatten)]
    compile: expr::CompileArgs,
    /// A filter expression (tcpdump syntax).
    #[arg(value_name = "EXPR", trailing_var_arg = true)]
    expr: Vec<String>,
}

/// Packets come from a live source or a file.
enum Input {
    Live(Box<dyn Source>),
    File(CaptureReader<std::fs::File>, String),
}

/// Counters of the run.
#[derive(Default)]
struct Counts {
    captured: u64,
    bytes: u64,
    rejected: u64,
}

const SNAPLEN_DEFAULT: u32 = 262_144;

/// Run `netsift capture`.
pub fn run(args: Args) -> Result<ExitCode> {
    signals::install();
    if args.engine == program::EngineArg::Swift {
        bail!("--engine swift is available for `netsift filter`; `capture` runs bpf, jit or ebpf");
    }
    let snaplen = match args.snaplen {
        None | Some(0) => SNAPLEN_DEFAULT,
        Some(s) => s,
    };
    let text = args.expr.join(" ");
    if args.xdp {
        if args.engine != program::EngineArg::Ebpf {
            bail!("--xdp attaches the filter as an eBPF program: it needs --engine ebpf");
        }
        if args.iface.is_none() || args.source != SourceKind::Afpacket {
            bail!("--xdp applies to live captures with -i IFACE and --source afpacket");
        }
        if text.trim().is_empty() {
            bail!("--xdp needs a filter expression (without one it would drop nothing)");
        }
    }
    if args.engine == program::EngineArg::Ebpf && args.source != SourceKind::Afpacket {
        bail!("--engine ebpf attaches the filter to the AF_PACKET socket: use --source afpacket");
    }
    // The engine in user space: with --engine ebpf the kernel runs the filter on the socket
    // and the interpreter takes the snap length of what it passed.
    let user_engine = match args.engine {
        program::EngineArg::Ebpf => program::EngineArg::Bpf,
        e => e,
    };
    let mut input;
    // The XDP attachment of --xdp: detached when dropped, at the end of `run` (also after
    // Ctrl-C, which ends the capture loop) or by the kernel when the process dies.
    let mut xdp_link: Option<netsift_ebpf::Link> = None;
    let mut kernel_note = String::new();
    let mut filter: Option<Filter>;
    let (link_type, precision) = match (&args.iface, &args.read) {
        (Some(iface), _) => {
            // Compile first: the kernel pre-filter is part of the socket's setup.
            let target = args
                .compile
                .target(Target::live(LinkType::ETHERNET, snaplen))?;
            let program = if text.trim().is_empty() {
                None
            } else {
                let p = expr::compile_or_report(&text, &target)?;
                if uses_ancillary(&p) {
                    bail!(
                        "this filter reads Linux ancillary data (inbound, outbound, ifindex); netsift \
                         runs filters on the packet bytes: use -Q in or -Q out for the direction"
                    );
                }
                Some(p)
            };
            let src = open_live(&args, iface, snaplen, program.as_ref(), &mut kernel_note)?;
            if let (true, Some(p)) = (args.xdp, &program) {
                let mode = match args.xdp_mode {
                    XdpMode::Auto => netsift_ebpf::XdpMode::Auto,
                    XdpMode::Native => netsift_ebpf::XdpMode::Native,
                    XdpMode::Generic => netsift_ebpf::XdpMode::Generic,
                };
                let ifindex = netsift_ebpf::ifindex(iface)?;
                let (_prog, link) = kernel::attach_xdp(p, ifindex, mode)?;
                kernel_note.push_str(&format!(" (XDP filter on {iface})"));
                xdp_link = Some(link);
            }
            filter = program
                .map(|p| program::build(FilterInput::Program(&p), &target, user_engine))
                .transpose()?;
            input = Input::Live(src);
            (LinkType::ETHERNET, Precision::Nano)
        }
        (None, Some(path)) => {
            let reader = CaptureReader::open(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let file = Target::for_capture(&reader);
            let lt = file.link_type;
            filter = if text.trim().is_empty() {
                None
            } else {
                let target = args
                    .compile
                    .target(file.with_snaplen(snaplen.min(file.snaplen)))?;
                Some(program::expression(&text, &target, user_engine)?)
            };
            let precision = match reader.format() {
                netsift::capture::Format::Pcap { precision, .. } => precision,
                _ => Precision::Nano,
            };
            input = Input::File(reader, path.display().to_string());
            (lt, precision)
        }
        (None, None) => bail!("give an interface (-i) or a capture file (-r)"),
    };
    let rotation = Rotation {
        max_bytes: args.file_size.map(|m| m.saturating_mul(1_000_000)),
        every_secs: args.rotate_secs.filter(|&s| s > 0),
        files: args.files,
    };
    if args.write.is_none()
        && (rotation.max_bytes.is_some()
            || rotation.every_secs.is_some()
            || rotation.files.is_some())
    {
        bail!("-C, -G and -W need -w FILE");
    }
    let now = wall_secs();
    let mut out_files = match &args.write {
        Some(name) => Some(Rotating::new(
            name,
            args.format,
            link_type,
            snaplen,
            precision,
            rotation,
            now,
        )?),
        None => None,
    };
    let quiet = args.quiet;
    if !quiet {
        let what = match &input {
            Input::Live(s) => format!("listening on {}", s.describe()),
            Input::File(_, name) => format!("reading from file {name}"),
        };
        eprintln!(
            "netsift: {what}, link-type {link_type}, snapshot length {snaplen} bytes{}{kernel_note}",
            if filter.is_some() {
                ", filter in user space on the source's memory"
            } else {
                ""
            }
        );
    }
    if xdp_link.is_some() && !quiet {
        eprintln!(
            "netsift: warning: --xdp drops the packets the filter rejects in the driver of {}: \
             the host does not receive them either until netsift exits",
            args.iface.as_deref().unwrap_or("")
        );
    }
    let live_stats = !quiet && (args.stats || io::stderr().is_terminal());
    let stdout = io::stdout();
    let mut lines = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut counts = Counts::default();
    let mut failure: Option<anyhow::Error> = None;
    let mut done = false;
    let started = Instant::now();
    let mut last_report = Instant::now();
    let mut last_counts = (0u64, 0u64);
    let limit = args.count;
    while !done && !signals::stopped() {
        let mut handle = |p: PacketRef<'_>| -> Flow {
            let verdict = match &mut filter {
                Some(f) => f.run(p.data, p.wire_len),
                None => snaplen,
            };
            if verdict == 0 {
                counts.rejected += 1;
                return Flow::Continue;
            }
            let kept = PacketRef {
                data: &p.data[..p.data.len().min(verdict as usize).min(snaplen as usize)],
                ..p
            };
            let r = match out_files.as_mut() {
                Some(w) => w
                    .write(&kept, kept.timestamp.secs())
                    .map(|n| n == Next::Done),
                None => writeln!(lines, "{}", output::packet_line(&kept))
                    .map(|()| false)
                    .map_err(anyhow::Error::from),
            };
            match r {
                Ok(true) => {
                    done = true;
                    return Flow::Stop;
                }
                Ok(false) => {}
                Err(e) => {
                    failure = Some(e);
                    done = true;
                    return Flow::Stop;
                }
            }
            counts.captured += 1;
            counts.bytes += kept.data.len() as u64;
            if limit.is_some_and(|n| counts.captured >= n) {
                done = true;
                return Flow::Stop;
            }
            Flow::Continue
        };
        match &mut input {
            Input::Live(src) => {
                src.poll_batch(Some(Duration::from_millis(100)), &mut handle)?;
            }
            Input::File(reader, name) => {
                let mut n = 0;
                while n < 4096 {
                    match reader.next_packet() {
                        None => {
                            done = true;
                            break;
                        }
                        Some(Ok(p)) => {
                            n += 1;
                            if handle(p) == Flow::Stop {
                                break;
                            }
                        }
                        Some(Err(e)) => {
                            failure = Some(anyhow!("{name}: {e}"));
                            done = true;
                            break;
                        }
                    }
                }
            }
        }
        if args.write.is_none() {
            lines.flush()?;
        }
        if live_stats && last_report.elapsed() >= Duration::from_secs(1) {
            let st = match &mut input {
                Input::Live(s) => s.stats().ok(),
                Input::File(..) => None,
            };
            let secs = last_report.elapsed().as_secs_f64();
            let rate = (counts.captured - last_counts.0) as f64 / secs;
            let mbps = (counts.bytes - last_counts.1) as f64 * 8.0 / secs / 1e6;
            last_counts = (counts.captured, counts.bytes);
            last_report = Instant::now();
            let kernel = st.map_or(String::new(), |s| {
                format!(", {} received, {} dropped by kernel", s.received, s.dropped)
            });
            let line = format!(
                "{} captured{kernel}, {} rejected by filter, {rate:.0} pkt/s, {mbps:.1} Mbit/s",
                counts.captured, counts.rejected
            );
            if io::stderr().is_terminal() {
                eprint!("\r\x1b[K{line}");
            } else {
                eprintln!("{line}");
            }
        }
    }
    lines.flush()?;
    // The host gets all its packets again.
    drop(xdp_link);
    if let Some(w) = out_files {
        w.finish()?;
    }
    if live_stats && io::stderr().is_terminal() {
        eprintln!();
    }
    if let Input::Live(src) = &mut input {
        let st = src.stats()?;
        if !quiet {
            summary(&counts, &st, started.elapsed());
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(ExitCode::SUCCESS)
}

fn summary(c: &Counts, st: &SourceStats, _elapsed: Duration) {
    eprintln!("{} packet{} captured", c.captured, plural(c.captured));
    eprintln!(
        "{} packet{} received by filter",
        st.received,
        plural(st.received)
    );
    eprintln!(
        "{} packet{} dropped by kernel",
        st.dropped,
        plural(st.dropped)
    );
    if st.skipped > 0 {
        eprintln!(
            "{} packet{} skipped for their direction",
            st.skipped,
            plural(st.skipped)
        );
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn wall_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Whether the program loads Linux ancillary data (`SKF_AD_OFF + n`).
fn uses_ancillary(p: &Program) -> bool {
    use netsift::bpf::code::{ABS, IND, LD};
    p.insns()
        .iter()
        .any(|i| i.code & 0x07 == LD && matches!(i.code & 0xe0, ABS | IND) && i.k >= 0xffff_f000)
}

/// The kernel pre-filter: VLAN-tagged frames (whose tag the kernel holds outside the frame) go
/// to user space whole; every other frame is judged by the program itself, which sees in the
/// kernel the bytes it sees in the ring.
fn prefilter(p: &Program, snaplen: u32) -> Vec<SockFilter> {
    prefilter_program(p, snaplen)
        .insns()
        .iter()
        .map(|i| SockFilter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect()
}

/// [`prefilter`] as a classic program (for the eBPF socket filter).
fn prefilter_program(p: &Program, snaplen: u32) -> Program {
    use netsift::bpf::code::{ABS, B, JEQ, JMP, K, LD, RET};
    let mut v = vec![
        // ldb [vlan_avail]
        Insn::stmt(LD | B | ABS, 0xffff_f000 + 48),
        // jeq #0: no tag -> the program; tag -> accept whole
        Insn::jump(JMP | JEQ | K, 0, 1, 0),
        Insn::stmt(RET | K, snaplen),
    ];
    v.extend_from_slice(p.insns());
    Program::new(v)
}

fn open_live(
    args: &Args,
    iface: &str,
    snaplen: u32,
    program: Option<&Program>,
    note: &mut String,
) -> Result<Box<dyn Source>> {
    let direction = match args.direction {
        None | Some(Dir::Inout) => Direction::InOut,
        Some(Dir::In) => Direction::In,
        Some(Dir::Out) => Direction::Out,
    };
    Ok(match args.source {
        SourceKind::Afpacket => {
            let mut cfg = AfPacketConfig {
                snaplen,
                promiscuous: !args.no_promisc,
                direction,
                ..AfPacketConfig::default()
            };
            if let Some(b) = args.block_size {
                cfg.block_size = b;
            }
            if let Some(n) = args.blocks {
                cfg.block_count = n;
            }
            if let Some(kib) = args.buffer_kib {
                cfg.block_count = (u64::from(kib) * 1024)
                    .div_ceil(u64::from(cfg.block_size))
                    .max(1) as u32;
            }
            if let Some(ms) = args.retire_ms {
                cfg.retire_timeout = Duration::from_millis(ms.max(1));
            }
            if let Some(t) = args.tstamp {
                cfg.timestamps = match t {
                    TsType::Host => TimestampSource::Software,
                    TsType::Adapter | TsType::AdapterUnsynced => TimestampSource::Hardware,
                };
            }
            if let Some(spec) = &args.fanout {
                cfg.fanout = Some(parse_fanout(spec)?);
            }
            if let (program::EngineArg::Ebpf, Some(p)) = (args.engine, program) {
                // Reject everything until the eBPF filter replaces this classic one, so that no
                // packet reaches the ring unfiltered.
                cfg.kernel_filter = Some(vec![SockFilter {
                    code: netsift::bpf::code::RET | netsift::bpf::code::K,
                    jt: 0,
                    jf: 0,
                    k: 0,
                }]);
                let s = AfPacket::open(iface, &cfg)?;
                kernel::attach_socket_filter(s.as_fd(), &prefilter_program(p, snaplen))?;
                note.push_str(" (eBPF socket filter on)");
                return Ok(Box::new(s));
            }
            if let (program::EngineArg::Auto, Some(p)) = (args.engine, program) {
                cfg.kernel_filter = Some(prefilter(p, snaplen));
                match AfPacket::open(iface, &cfg) {
                    Ok(s) => {
                        note.push_str(" (kernel pre-filter on)");
                        return Ok(Box::new(s));
                    }
                    // The kernel refuses some programs (backward jumps of protochain): filter
                    // in user space only.
                    Err(e) if e.kind() == netsift::capture::live::LiveErrorKind::InvalidInput => {
                        note.push_str(&format!(
                            " (kernel refused the pre-filter: {e}; user space only)"
                        ));
                        cfg.kernel_filter = None;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Box::new(AfPacket::open(iface, &cfg)?)
        }
        SourceKind::Afxdp => {
            if args.fanout.is_some()
                || args.block_size.is_some()
                || args.blocks.is_some()
                || args.buffer_kib.is_some()
            {
                bail!("--fanout, --block-size, --blocks and -B apply to --source afpacket");
            }
            if args.tstamp.is_some_and(|t| t != TsType::Host) {
                bail!("AF_XDP offers no adapter timestamps (use --source afpacket)");
            }
            let cfg = AfXdpConfig {
                snaplen,
                queue: args.queue,
                attach: match args.xdp_mode {
                    XdpMode::Auto => XdpAttachMode::Auto,
                    XdpMode::Native => XdpAttachMode::Native,
                    XdpMode::Generic => XdpAttachMode::Generic,
                },
                zero_copy: args.zero_copy,
                direction,
                ..AfXdpConfig::default()
            };
            Box::new(AfXdp::open(iface, &cfg)?)
        }
    })
}

fn parse_fanout(spec: &str) -> Result<Fanout> {
    let mut parts = spec.split(':');
    let group: u16 = parts.next().and_then(|g| g.parse().ok()).ok_or_else(|| {
        anyhow!("--fanout {spec}: expected GROUP:MODE with GROUP a number 0-65535")
    })?;
    let mode = match parts.next() {
        Some("hash") => FanoutMode::Hash,
        Some("cpu") => FanoutMode::Cpu,
        Some("lb") => FanoutMode::LoadBalance,
        Some("rollover") => FanoutMode::Rollover,
        Some(m) => bail!("--fanout {spec}: unknown mode '{m}' (hash, cpu, lb, rollover)"),
        None => bail!("--fanout {spec}: expected GROUP:MODE"),
    };
    let mut f = Fanout {
        group,
        mode,
        defrag: false,
        rollover: false,
    };
    for flag in parts {
        match flag {
            "defrag" => f.defrag = true,
            "rollover" => f.rollover = true,
            other => bail!("--fanout {spec}: unknown flag '{other}' (defrag, rollover)"),
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fanout_specs() {
        let f = parse_fanout("7:hash:defrag").unwrap();
        assert_eq!(
            (f.group, f.mode, f.defrag, f.rollover),
            (7, FanoutMode::Hash, true, false)
        );
        assert!(parse_fanout("x:hash").is_err());
        assert!(
            parse_fanout("1:spread")
                .unwrap_err()
                .to_string()
                .contains("unknown mode")
        );
    }

    #[test]
    fn prefilter_passes_tagged_frames() {
        let p = Program::accept_all(96);
        let k = prefilter(&p, 96);
        assert_eq!(k.len(), 4);
        assert_eq!(k[0].k, 0xffff_f000 + 48);
        assert_eq!((k[1].jt, k[1].jf), (1, 0));
    }
}
