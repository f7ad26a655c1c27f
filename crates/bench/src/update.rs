//! Update latency: one FTP data connection added to (and deleted from) a Swift filter that
//! already holds N, against recompiling the equivalent whole expression with netsift's compiler
//! and with libpcap's `pcap_compile` (the Swift paper's FTPCap experiment, Figs. 5-6).
//!
//! # The workload
//!
//! FTPCap watches passive-mode FTP: a control pass `ip and tcp port 21` and one pass per data
//! connection, which matches IPv4, TCP, not a later fragment, the client and the server
//! addresses (either direction) and the negotiated data port (either direction) — in tcpdump's
//! words `(host C and host S and tcp port P)`. The filter of size N holds the control pass and N
//! data connections ([`Connection::nth`]); one update adds connection N (a fresh one) and the
//! benchmark deletes it again, so that N stays fixed from sample to sample. The add and the
//! delete are timed separately, each with its own [`Instant`] pair around the one call (the
//! paper read the TSC around the engine's update; the time to map the connection to
//! instructions is included, as in the paper, and is a few nanoseconds). The samples of all
//! sizes are taken in interleaved rounds, so that noise from the rest of the machine does not
//! make one size look slower than another. No reader runs while updates are timed.
//!
//! Swift can hold a connection in two ways, and the benchmark times both ([`Form`]):
//!
//! - [`Form::Pass`]: a pass of its own, three instructions (`Ip4ProtoPorts` and two
//!   `HostEither`) — the smallest update.
//! - [`Form::Child`]: a copy of the control pass with the port changed and the two hosts added
//!   (four instructions, the first marked "copied"): what FTPCap-Swift does to profit from
//!   hierarchical execution.
//!
//! The baseline is what FTPCap-LSF does on every update: recompile the whole expression,
//! `(ip and tcp port 21) or` the N + 1 connection terms. Recompilation is timed end to end
//! (text to BPF program: parse, lower, optimise, lay out) by netsift's compiler and by libpcap's
//! `pcap_compile` (optimised, `pcap_open_dead` and `pcap_close` included). Neither side counts
//! the kernel's part (copying the program in and validating it; the paper measured 10-20 µs for
//! it, itself larger than a Swift update).
//!
//! Recompiling grows with N, and a 10,000-term expression takes a long time: a compiler is only
//! run at a size when the time it took at the size before, scaled linearly (a lower bound, as
//! compile time is at least linear in the text), stays under [`Config::recompile_limit`];
//! otherwise the cell says `n/a (> X)`. netsift's compiler refuses programs longer than the
//! kernel's 4,096 instructions; it gets there only after doing all the work, so the time to the
//! error is reported, marked `*`. (`pcap_compile` has no limit, but the kernel would refuse its
//! programs just the same: each connection costs about 19 instructions, so FTPCap-LSF stops
//! working at about 215 connections, where Swift has no limit of the kind.)
//!
//! PERF: what the table shows of the engine, as measured when the suite was written. A
//! [`Form::Pass`] update is flat in N (about 0.4 µs, most of it memory allocation: the copy of
//! the instructions, two 32-byte-aligned arrays of decoded instructions and the pass itself). A
//! [`Form::Child`] update grows with N: `Writer::child_pass` clones the parent's bookkeeping,
//! whose list of children has N entries, and `Writer::del_pass` removes the child from that
//! list with a linear scan. The 99th percentiles of both forms are set by epoch-based
//! reclamation: retired passes are collected in bags of 64, and the update that seals a bag or
//! triggers a collection pays for 64 at once (several µs).
//!
//! # Correctness
//!
//! The suite checks what it times: a reader of the filter accepts a packet of the new
//! connection after the add and rejects it after the delete (and before the first add), and the
//! recompiled programs accept it too. Any failure ends the suite with an error.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use netsift_capture::generate::{FrameBuilder, TCP_ACK};
use netsift_swift::{Inst, Mode, Op, PassId, Reader, Writer, build};

use crate::libpcap::Libpcap;

/// The snap length of the filters (libpcap's default), returned for accepted packets.
pub const SNAPLEN: u32 = 262_144;

/// The filter sizes (data connections already present) the suite measures.
pub const SIZES: [usize; 5] = [1, 10, 100, 1_000, 10_000];

/// The FTP control connection's term, first in every expression.
pub const CONTROL_EXPR: &str = "(ip and tcp port 21)";

/// One passive-mode FTP data connection: the client, the server and the server's data port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Connection {
    /// The client's IPv4 address.
    pub client: [u8; 4],
    /// The server's IPv4 address.
    pub server: [u8; 4],
    /// The data port the server announced (in its `227 Entering Passive Mode` reply).
    pub port: u16,
}

impl Connection {
    /// Connection `i` of the workload: ten servers in 198.18.0.0/15 (the paper's testbed had
    /// ten FTP servers), a different client in 10.0.0.0/8 for each connection (so that no two
    /// connections below 16 million are equal) and data ports from 30,000 up.
    pub fn nth(i: usize) -> Connection {
        Connection {
            client: [
                10,
                (i / 62_500) as u8,
                (i / 250 % 250) as u8,
                (i % 250 + 1) as u8,
            ],
            server: [198, 18, 0, (i % 10 + 1) as u8],
            port: 30_000 + (i % 30_000) as u16,
        }
    }

    /// The connection as a tcpdump term: `(host C and host S and tcp port P)`.
    pub fn expr(&self) -> String {
        let [a, b, c, d] = self.client;
        let [e, f, g, h] = self.server;
        format!(
            "(host {a}.{b}.{c}.{d} and host {e}.{f}.{g}.{h} and tcp port {})",
            self.port
        )
    }

    /// The connection as a pass of its own ([`Form::Pass`]): IPv4, TCP, not a later fragment,
    /// either port `P` (one power instruction), then either address `C`, then either `S`.
    pub fn pass(&self) -> [Inst; 3] {
        [
            build::ip4_proto_ports(6, &[self.port]),
            host_either(self.client),
            host_either(self.server),
        ]
    }

    /// The connection as a copy of [`control_pass`] ([`Form::Child`]): the first instruction is
    /// the parent's (and stays marked "copied"), the port is changed, the hosts are added.
    pub fn child(&self) -> [Inst; 4] {
        [
            build::ip4_proto_nofrag(&[6]),
            build::tcp_udp_port(&[self.port]),
            host_either(self.client),
            host_either(self.server),
        ]
    }

    /// A data packet of the connection (Ethernet, client to server, from an ephemeral port to
    /// the data port, 60 bytes).
    pub fn packet(&self) -> Vec<u8> {
        FrameBuilder::new()
            .ipv4(self.client, self.server)
            .tcp(50_000, self.port, TCP_ACK)
            .pad_to(60)
            .build()
    }
}

/// `HostEither` at the IPv4 addresses behind an Ethernet header, with one address.
fn host_either(a: [u8; 4]) -> Inst {
    let mut i = Inst::new(Op::HostEither, Mode::D, 26);
    // One value in an empty instruction always fits.
    let _ = i.add_value(u32::from_be_bytes(a));
    i
}

/// The FTP control pass, `ip and tcp port 21`: IPv4, TCP, not a later fragment, then either
/// port 21.
pub fn control_pass() -> [Inst; 2] {
    [build::ip4_proto_nofrag(&[6]), build::tcp_udp_port(&[21])]
}

/// The expression FTPCap-LSF compiles for connections `0..n`: [`CONTROL_EXPR`] `or` each
/// connection's term.
pub fn expression(n: usize) -> String {
    let mut s = String::with_capacity(CONTROL_EXPR.len() + n * 64);
    s.push_str(CONTROL_EXPR);
    for i in 0..n {
        s.push_str(" or ");
        s.push_str(&Connection::nth(i).expr());
    }
    s
}

/// How a data connection is held in the Swift filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    /// A pass of its own ([`Connection::pass`]).
    Pass,
    /// A child of the control pass, for hierarchical execution ([`Connection::child`]).
    Child,
}

impl Form {
    /// Both forms, in the order the suite prints them.
    pub const ALL: [Form; 2] = [Form::Pass, Form::Child];

    /// The name in tables and benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            Form::Pass => "swift-pass",
            Form::Child => "swift-child",
        }
    }
}

/// A Swift filter holding the control pass and N data connections, ready for updates.
pub struct Fixture {
    /// The filter's writer.
    pub writer: Writer,
    /// A reader of the filter (not running while updates are timed).
    pub reader: Reader,
    /// The control pass (the parent in [`Form::Child`]).
    pub control: PassId,
    /// How connections are added.
    pub form: Form,
    /// Connections in the filter.
    pub n: usize,
}

impl Fixture {
    /// A filter with the control pass and connections `0..n`, held as `form` says.
    pub fn new(form: Form, n: usize) -> Result<Fixture, String> {
        let (mut writer, reader) = netsift_swift::open(SNAPLEN);
        let control = writer
            .new_pass(&control_pass())
            .map_err(|e| e.to_string())?;
        let mut f = Fixture {
            writer,
            reader,
            control,
            form,
            n: 0,
        };
        for i in 0..n {
            f.add(&Connection::nth(i))?;
        }
        f.n = n;
        Ok(f)
    }

    /// Adds connection `c` (one update), returning its pass.
    #[inline]
    pub fn add(&mut self, c: &Connection) -> Result<PassId, String> {
        match self.form {
            Form::Pass => self.writer.new_pass(&c.pass()),
            Form::Child => self.writer.child_pass(self.control, &c.child()),
        }
        .map_err(|e| e.to_string())
    }

    /// Deletes a connection's pass (one update).
    #[inline]
    pub fn del(&mut self, id: PassId) -> Result<(), String> {
        self.writer.del_pass(id).map_err(|e| e.to_string())
    }

    /// The reader's verdict on connection `c`'s packet: the snap length or 0.
    pub fn verdict(&mut self, c: &Connection) -> u32 {
        let p = c.packet();
        self.reader.run(&p, p.len() as u32)
    }
}

/// What the suite measures, and how much.
#[derive(Clone, Debug)]
pub struct Config {
    /// Filter sizes (data connections already present), in increasing order.
    pub sizes: Vec<usize>,
    /// Timed updates per size and form (each an add and a delete).
    pub samples: usize,
    /// Untimed add/delete pairs before the samples of a cell (a twentieth of them before each
    /// later round).
    pub warmup: usize,
    /// A compiler is not run at a size where one compile would take longer than this
    /// (estimated from the size before, scaled linearly).
    pub recompile_limit: Duration,
    /// Compiles timed per size and compiler (the median is reported), fewer when they are slow.
    pub recompile_runs: usize,
    /// Time for the compiles of one size and compiler: no further compile is started when the
    /// ones so far plus one more would exceed it.
    pub recompile_budget: Duration,
}

impl Default for Config {
    /// The `netsift bench update` settings: [`SIZES`], 20,000 samples, compiles up to 2 s,
    /// median of up to 5 (well under a minute in all on a 2-core machine).
    fn default() -> Config {
        Config {
            sizes: SIZES.to_vec(),
            samples: 20_000,
            warmup: 2_000,
            recompile_limit: Duration::from_secs(2),
            recompile_runs: 5,
            recompile_budget: Duration::from_secs(4),
        }
    }
}

/// Median and 99th percentile of single updates, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    /// Median.
    pub median: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
}

impl Latency {
    /// From samples in nanoseconds (sorted here).
    fn of(mut ns: Vec<u64>) -> Latency {
        ns.sort_unstable();
        let at = |q: f64| {
            let k = ((ns.len() as f64 * q).ceil() as usize).clamp(1, ns.len().max(1)) - 1;
            ns.get(k).copied().unwrap_or(0) as f64
        };
        Latency {
            median: at(0.5),
            p99: at(0.99),
        }
    }
}

/// The Swift side of one row: add and delete latency at one size, in one form.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwiftRow {
    /// Connections in the filter.
    pub n: usize,
    /// How connections are held.
    pub form: Form,
    /// Adding one connection.
    pub add: Latency,
    /// Deleting it again.
    pub del: Latency,
}

/// Rounds the samples of every cell are spread over (see [`time_updates`]).
const ROUNDS: usize = 10;

/// One cell of the Swift table being measured: its filter, the connection it adds and deletes,
/// and the samples so far.
struct Cell {
    f: Fixture,
    probe: Connection,
    adds: Vec<u64>,
    dels: Vec<u64>,
}

impl Cell {
    fn new(form: Form, n: usize, samples: usize) -> Result<Cell, String> {
        let mut c = Cell {
            f: Fixture::new(form, n)?,
            probe: Connection::nth(n),
            adds: Vec::with_capacity(samples),
            dels: Vec::with_capacity(samples),
        };
        let probe = c.probe;
        c.check(&probe, false, "before it was added")?;
        if n > 0 {
            c.check(&Connection::nth(0), true, "already in the filter")?;
        }
        Ok(c)
    }

    /// The reader's verdict on `c`'s packet is acceptance (`want`) or rejection.
    fn check(&mut self, c: &Connection, want: bool, when: &str) -> Result<(), String> {
        let v = self.f.verdict(c);
        if (v != 0) == want {
            return Ok(());
        }
        Err(format!(
            "{} N={}: {} the packet of {} {when} (verdict {v})",
            self.f.form.name(),
            self.f.n,
            if want { "rejected" } else { "accepted" },
            c.expr()
        ))
    }

    /// `warmup` untimed updates, then `samples` timed ones; the verdicts are checked on the
    /// first timed one.
    fn run(&mut self, warmup: usize, samples: usize) -> Result<(), String> {
        let probe = self.probe;
        for _ in 0..warmup {
            let id = self.f.add(&probe)?;
            self.f.del(id)?;
        }
        for s in 0..samples {
            let t = Instant::now();
            let id = self.f.add(black_box(&probe))?;
            let add = t.elapsed();
            // Checked once per round only: running the reader refreshes its list of passes
            // (O(N)) and disturbs the caches the updates run in.
            if s == 0 {
                self.check(&probe, true, "after it was added")?;
            }
            let t = Instant::now();
            self.f.del(black_box(id))?;
            let del = t.elapsed();
            if s == 0 {
                self.check(&probe, false, "after it was deleted")?;
            }
            self.adds.push(add.as_nanos() as u64);
            self.dels.push(del.as_nanos() as u64);
        }
        Ok(())
    }
}

/// Times `cfg.samples` single adds and deletes for every size of `cfg` and every [`Form`],
/// checking the verdict on the new connection's packet along the way. Every filter is built
/// first; the samples are then taken in rounds, a slice of every cell per round, so that a
/// disturbance from the rest of the machine spreads over all sizes instead of skewing one.
pub fn time_updates(cfg: &Config) -> Result<Vec<SwiftRow>, String> {
    let mut cells = Vec::new();
    for &n in &cfg.sizes {
        for form in Form::ALL {
            cells.push(Cell::new(form, n, cfg.samples)?);
        }
    }
    let rounds = ROUNDS.min(cfg.samples.max(1));
    for r in 0..rounds {
        let samples = cfg.samples / rounds + usize::from(r < cfg.samples % rounds);
        for c in &mut cells {
            let warmup = if r == 0 { cfg.warmup } else { cfg.warmup / 20 };
            c.run(warmup, samples)?;
        }
    }
    cells
        .into_iter()
        .map(|mut c| {
            if c.f.n > 0 {
                c.check(&Connection::nth(0), true, "after the updates")?;
            }
            Ok(SwiftRow {
                n: c.f.n,
                form: c.f.form,
                add: Latency::of(c.adds),
                del: Latency::of(c.dels),
            })
        })
        .collect()
}

/// The median cost of an empty `Instant` pair, in nanoseconds (included in every sample).
pub fn timer_overhead() -> f64 {
    let ns: Vec<u64> = (0..10_000)
        .map(|_| {
            let t = Instant::now();
            black_box(t.elapsed()).as_nanos() as u64
        })
        .collect();
    Latency::of(ns).median
}

/// The outcome of recompiling at one size with one compiler.
#[derive(Clone, Debug, PartialEq)]
pub enum Recompile {
    /// Median time of `runs` compiles, the program's length, and whether the compiler refused
    /// the program as longer than the kernel allows (then the time is the time to the error).
    Timed {
        /// Median time.
        time: Duration,
        /// Compiles timed.
        runs: usize,
        /// Instructions in the program.
        insns: usize,
        /// netsift refused the program (over 4,096 instructions) after compiling it.
        too_long: bool,
    },
    /// Not run: one compile would take longer than this (a lower bound).
    Skipped(Duration),
    /// The compiler is not there (libpcap not installed).
    Missing,
}

impl Recompile {
    fn time(&self) -> Option<Duration> {
        match self {
            Recompile::Timed { time, .. } => Some(*time),
            _ => None,
        }
    }

    fn cell(&self) -> String {
        match self {
            Recompile::Timed { time, too_long, .. } => {
                format!(
                    "{}{}",
                    fmt_ns(time.as_nanos() as f64),
                    if *too_long { "*" } else { "" }
                )
            }
            Recompile::Skipped(d) => format!("n/a (> {})", fmt_ns(d.as_nanos() as f64)),
            Recompile::Missing => "n/a".into(),
        }
    }

    fn insns(&self) -> String {
        match self {
            Recompile::Timed { insns, .. } => insns.to_string(),
            _ => "-".into(),
        }
    }
}

/// One compile of `expr` by netsift: the program (or the length it was refused at), and
/// whether the probe packet `pkt` is accepted by it.
fn netsift_once(expr: &str, pkt: &[u8]) -> Result<(usize, bool, bool), String> {
    let ctx = netsift_lang::Context::new(netsift_capture::LinkType::ETHERNET);
    let pred = netsift_lang::compile(expr, &ctx).map_err(|e| e.to_string())?;
    let opts = netsift_bpf::compile::Options {
        optimize: true,
        snaplen: SNAPLEN,
    };
    match netsift_bpf::compile::compile(&pred, &opts) {
        Ok(p) => {
            let insns = p.len();
            let f = netsift_bpf::Filter::new(p, netsift_bpf::Rules::Libpcap)
                .map_err(|e| e.to_string())?;
            Ok((insns, false, f.run(pkt, pkt.len() as u32) != 0))
        }
        Err(e) => match e.kind() {
            netsift_bpf::compile::CompileErrorKind::TooLong(n) => Ok((n, true, true)),
            _ => Err(e.to_string()),
        },
    }
}

/// Times compiles of `expr` with `once` (which returns the length, whether it was refused as
/// too long, and whether the probe was accepted), unless the estimate says it is too slow.
fn time_compiles(
    name: &str,
    expr: &str,
    estimate: Option<Duration>,
    cfg: &Config,
    mut once: impl FnMut() -> Result<(usize, bool, bool), String>,
) -> Result<Recompile, String> {
    if let Some(e) = estimate
        && e > cfg.recompile_limit
    {
        return Ok(Recompile::Skipped(e));
    }
    let mut times = Vec::new();
    let mut spent = Duration::ZERO;
    let (mut insns, mut too_long) = (0, false);
    while times.len() < cfg.recompile_runs.max(1) {
        let t = Instant::now();
        let (len, long, accepted) = black_box(once()).map_err(|e| {
            let head: String = expr.chars().take(60).collect();
            format!("{name} cannot compile `{head}…`: {e}")
        })?;
        let d = t.elapsed();
        if !accepted {
            return Err(format!(
                "{name}: the recompiled program rejects the new connection's packet"
            ));
        }
        (insns, too_long) = (len, long);
        times.push(d);
        spent += d;
        if d > cfg.recompile_limit || spent + d > cfg.recompile_budget {
            break;
        }
    }
    times.sort();
    Ok(Recompile::Timed {
        time: times[times.len() / 2],
        runs: times.len(),
        insns,
        too_long,
    })
}

/// The recompilation side of one row.
#[derive(Clone, Debug, PartialEq)]
pub struct RecompileRow {
    /// Connections in the filter before the update (the expression has N + 1).
    pub n: usize,
    /// Length of the expression in bytes.
    pub chars: usize,
    /// netsift's compiler.
    pub netsift: Recompile,
    /// libpcap's `pcap_compile`.
    pub libpcap: Recompile,
}

/// The whole suite's results.
#[derive(Clone, Debug)]
pub struct Report {
    /// libpcap's version string, if it was found.
    pub libpcap: Option<String>,
    /// Median cost of the timer, in nanoseconds.
    pub timer_ns: f64,
    /// Samples per cell.
    pub samples: usize,
    /// Swift rows: every size, each form.
    pub swift: Vec<SwiftRow>,
    /// Recompilation rows, one per size.
    pub recompile: Vec<RecompileRow>,
}

/// Runs the measurements of the suite.
pub fn measure(cfg: &Config) -> Result<Report, String> {
    let lib = Libpcap::load().ok();
    let timer_ns = timer_overhead();
    let swift = time_updates(cfg)?;
    let mut recompile = Vec::new();
    // The size and median time of the last compile timed, per compiler.
    let mut last_ours: Option<(usize, Duration)> = None;
    let mut last_theirs: Option<(usize, Duration)> = None;
    // A lower bound on the compile time at `n` from the time at the last size timed (sizes
    // past a skipped one stay skipped, with a larger bound).
    let scale = |last: Option<(usize, Duration)>, n: usize| {
        last.map(|(m, d)| d.mul_f64((n + 1) as f64 / (m + 1) as f64))
    };
    for &n in &cfg.sizes {
        let expr = expression(n + 1);
        let pkt = Connection::nth(n).packet();
        let netsift = time_compiles("netsift", &expr, scale(last_ours, n), cfg, || {
            netsift_once(&expr, &pkt)
        })?;
        if let Recompile::Timed { time, .. } = &netsift {
            last_ours = Some((n, *time));
        }
        let libpcap = match &lib {
            None => Recompile::Missing,
            Some(lib) => {
                let r = time_compiles("pcap_compile", &expr, scale(last_theirs, n), cfg, || {
                    let p = lib.compile(1, SNAPLEN as i32, &expr, true)?;
                    Ok((p.program().len(), false, p.run(&pkt, pkt.len() as u32) != 0))
                })?;
                if let Recompile::Timed { time, .. } = &r {
                    last_theirs = Some((n, *time));
                }
                r
            }
        };
        recompile.push(RecompileRow {
            n,
            chars: expr.len(),
            netsift,
            libpcap,
        });
    }
    Ok(Report {
        libpcap: lib.map(|l| l.version()),
        timer_ns,
        samples: cfg.samples,
        swift,
        recompile,
    })
}

/// `ns` nanoseconds in the most readable unit.
fn fmt_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.1} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// `recompile / update` as a speedup cell.
fn speedup(recompile: &Recompile, update_ns: f64) -> String {
    match recompile.time() {
        Some(t) if update_ns > 0.0 => {
            format!("{:.0}x", t.as_nanos() as f64 / update_ns)
        }
        _ => "-".into(),
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "suite update: add one FTP data connection to a filter of N, then delete it \
             (Swift paper Figs. 5-6)"
        );
        let _ = writeln!(
            out,
            "connection: (host C and host S and tcp port P); filter: {CONTROL_EXPR} or N \
             connections"
        );
        let _ = writeln!(
            out,
            "swift: {} single updates per cell, Instant around each (timer {:.0} ns, included); \
             swift-pass: own pass, 3 insts; swift-child: copy of the control pass, 4 insts",
            self.samples, self.timer_ns
        );
        let _ = writeln!(
            out,
            "recompile: the whole expression with N + 1 connections, optimised, median of `runs` \
             (netsift/libpcap); baseline {}\n",
            self.libpcap.as_deref().unwrap_or("libpcap (not installed)")
        );
        let _ = writeln!(
            out,
            "{:>6} {:>9} {:>14} {:>14} {:>14} {:>14} {:>14}",
            "N", "chars", "netsift insns", "netsift time", "libpcap insns", "libpcap time", "runs"
        );
        let mut starred = false;
        for r in &self.recompile {
            let runs = |x: &Recompile| match x {
                Recompile::Timed { runs, .. } => runs.to_string(),
                _ => "-".into(),
            };
            starred |= matches!(r.netsift, Recompile::Timed { too_long: true, .. });
            let _ = writeln!(
                out,
                "{:>6} {:>9} {:>14} {:>14} {:>14} {:>14} {:>14}",
                r.n,
                r.chars,
                r.netsift.insns(),
                r.netsift.cell(),
                r.libpcap.insns(),
                r.libpcap.cell(),
                format!("{}/{}", runs(&r.netsift), runs(&r.libpcap)),
            );
        }
        if starred {
            let _ = writeln!(
                out,
                "* netsift refused the program (longer than the kernel's 4096 instructions); the \
                 time is the time to that error"
            );
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:>6} {:<12} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12}",
            "N", "form", "add med", "add p99", "del med", "del p99", "vs netsift", "vs libpcap"
        );
        for s in &self.swift {
            let rc = self.recompile.iter().find(|r| r.n == s.n);
            let _ = writeln!(
                out,
                "{:>6} {:<12} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12}",
                s.n,
                s.form.name(),
                fmt_ns(s.add.median),
                fmt_ns(s.add.p99),
                fmt_ns(s.del.median),
                fmt_ns(s.del.p99),
                rc.map_or("-".into(), |r| speedup(&r.netsift, s.add.median)),
                rc.map_or("-".into(), |r| speedup(&r.libpcap, s.add.median)),
            );
        }
        let _ = writeln!(out, "\nspeedup: median recompile time / median add time");
        // The goals, stated against this run.
        for form in Form::ALL {
            let rows: Vec<&SwiftRow> = self.swift.iter().filter(|s| s.form == form).collect();
            let (Some(lo), Some(hi)) = (
                rows.iter().map(|s| s.add.median).reduce(f64::min),
                rows.iter().map(|s| s.add.median).reduce(f64::max),
            ) else {
                continue;
            };
            let del_hi = rows.iter().map(|s| s.del.median).fold(0.0, f64::max);
            let at_1000 = rows.iter().find(|s| s.n == 1_000).and_then(|s| {
                let r = self.recompile.iter().find(|r| r.n == 1_000)?;
                let x = |c: &Recompile| {
                    c.time()
                        .map(|t| t.as_nanos() as f64 / s.add.median.max(1.0))
                };
                Some((x(&r.netsift), x(&r.libpcap)))
            });
            let _ = write!(
                out,
                "goals {:<12} add median <= 1 us at every N: {} (max {}, delete max {}); flat \
                 in N: max/min {:.2}",
                form.name(),
                if hi <= 1_000.0 { "yes" } else { "NO" },
                fmt_ns(hi),
                fmt_ns(del_hi),
                hi / lo.max(1.0)
            );
            if let Some((a, b)) = at_1000 {
                let ok = |x: Option<f64>| match x {
                    Some(x) if x >= 1_000.0 => format!("{x:.0}x yes"),
                    Some(x) => format!("{x:.0}x NO"),
                    None => "n/a".into(),
                };
                let _ = write!(
                    out,
                    "; >= 1000x at N=1000: netsift {}, libpcap {}",
                    ok(a),
                    ok(b)
                );
            }
            let _ = writeln!(out);
        }
        f.write_str(&out)
    }
}

/// The `netsift bench update` suite with `cfg`: the report as text.
pub fn suite(cfg: &Config) -> Result<String, String> {
    Ok(measure(cfg)?.to_string())
}
