//! `netsift flow`: FFPF flows from the command line (the paper's `ffpf-flow`). Each GRAPH
//! argument is one or more flows (`;` between flows); every flow gets a reader thread that
//! drains its buffer; at the end each flow's deliveries and its filters' MBuf summaries are
//! printed. `--dot` writes the instantiated graph (flows, shared instances, classes).

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use netsift_graph::buffer::Preference;
use netsift_graph::lang::FilterSpec;
use netsift_graph::policy::Policy;
use netsift_graph::{Arg, FilterClass, FlowOptions, Instance, Registry, Runtime};

use crate::signals;

/// Flags of `netsift flow`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Read packets from this capture: every `(device,X)` source reads it instead of interface
    /// X (as `tcpdump -r`), and a flow without a source starts from it.
    #[arg(
        short = 'r',
        long = "read",
        value_name = "FILE",
        conflicts_with = "interface"
    )]
    read: Option<PathBuf>,
    /// A flow without a source starts from `(device,IFACE)`.
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    interface: Option<String>,
    /// Stop after this many packets from the sources.
    #[arg(short = 'c', value_name = "N")]
    count: Option<u64>,
    /// Print every filter instance: its class, arguments, packets seen and passed, the flows
    /// using it.
    #[arg(long)]
    stats: bool,
    /// Write the instantiated graph as Graphviz to OUT (and OUT.svg when `dot` is installed).
    #[arg(long, value_name = "OUT")]
    dot: Option<PathBuf>,
    /// List the filter classes and their arguments, then exit.
    #[arg(long)]
    list_classes: bool,
    /// The authorisation policy (default: everything allowed).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The user the policy sees (default: $USER).
    #[arg(long, value_name = "NAME")]
    user: Option<String>,
    /// Fast-reader preference: the writer never waits and overwrites what slow readers have
    /// not read (default: slow-reader preference, drops counted).
    #[arg(long)]
    frp: bool,
    /// Split the capture (-r) over this many RX queues of an emulated NIC (Toeplitz RSS), each
    /// run by its own worker thread with its own instances and buffers (FFPF's per-queue
    /// capture threads); reports per queue and totals.
    #[arg(long, default_value_t = 1, value_name = "N")]
    queues: u16,
    /// PBuf slots per flow group.
    #[arg(long, default_value_t = 8192, value_name = "N")]
    slots: u32,
    /// Run the flows in netsiftd (at SOCKET, default $NETSIFT_SOCKET or
    /// /run/netsift/netsiftd.sock) and read them here through shared memory; -c then counts
    /// delivered packets. The daemon's policy applies, not --policy.
    #[arg(
        long,
        value_name = "SOCKET",
        num_args = 0..=1,
        default_missing_value = "",
        conflicts_with_all = ["read", "queues", "dot", "policy", "user"]
    )]
    daemon: Option<String>,
    /// The flows, in the graph language: `(device,eth0) -> (bpf,"tcp") -> (packetcount,,8)`.
    #[arg(value_name = "GRAPH")]
    graphs: Vec<String>,
}

/// `(device,X)` replaced, for `-r` and `--queues`, by another source class with fixed
/// arguments (the capture file, or one RX queue of an emulated NIC over it): X is ignored.
struct DeviceOverride {
    inner: Arc<dyn FilterClass>,
    args: Vec<Arg>,
    about: &'static str,
}

impl FilterClass for DeviceOverride {
    fn name(&self) -> &'static str {
        "device"
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn usage(&self) -> &'static str {
        "IFACE"
    }

    fn is_source(&self) -> bool {
        true
    }

    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }

    fn instantiate(
        &self,
        _args: &[Arg],
        ctx: &netsift_graph::class::Context,
    ) -> Result<Instance, netsift_graph::Error> {
        self.inner.instantiate(&self.args, ctx)
    }
}

fn quoted(text: &str) -> Arg {
    Arg {
        text: text.into(),
        quoted: true,
    }
}

fn list_classes(reg: &Registry) -> String {
    let mut out = String::new();
    for c in reg.iter() {
        let _ = writeln!(
            out,
            "{:<12} ({}, {}){}\n             {}",
            c.name(),
            c.name(),
            c.usage(),
            if c.is_source() { "  [source]" } else { "" },
            c.about()
        );
    }
    out
}

fn source_spec(class: &str, arg: &str, quoted: bool) -> FilterSpec {
    let span = netsift_graph::lang::Span::new(0, 0);
    FilterSpec {
        class: class.into(),
        class_span: span,
        args: vec![(
            Arg {
                text: arg.into(),
                quoted,
            },
            span,
        )],
        span,
    }
}

/// Run `netsift flow`.
pub fn run(args: Args) -> Result<ExitCode> {
    let mut reg = netsift_graph::standard_registry();
    if args.list_classes {
        print!("{}", list_classes(&reg));
        return Ok(ExitCode::SUCCESS);
    }
    if args.graphs.is_empty() {
        bail!(
            "give at least one flow, e.g. 'netsift flow -r x.pcap \"(bpf,\\\"tcp\\\") -> (packetcount,,8)\"' (--list-classes lists the classes)"
        );
    }
    let default_source = match (&args.read, &args.interface) {
        (Some(path), _) => {
            let file = reg
                .get("file")
                .cloned()
                .ok_or_else(|| anyhow!("no `file` class"))?;
            let path = path.to_string_lossy().into_owned();
            reg.register(Arc::new(DeviceOverride {
                inner: file,
                args: vec![quoted(&path)],
                about: "a network interface (here: the capture given with -r)",
            }));
            Some(source_spec("file", &path, true))
        }
        (None, Some(iface)) => Some(source_spec("device", iface, false)),
        (None, None) => None,
    };
    let policy = match &args.policy {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the policy {}", p.display()))?;
            Policy::parse(&text).map_err(|e| anyhow!("{}: {}", p.display(), e.render(&text)))?
        }
        None => Policy::allow_all(),
    };
    let user = args
        .user
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "root".into());
    let opts = FlowOptions {
        user,
        preference: if args.frp {
            Preference::FastReader
        } else {
            Preference::SlowReader
        },
        slots: args.slots,
        default_source,
        ..FlowOptions::default()
    };
    let limit = args.count.unwrap_or(u64::MAX);
    signals::install();
    if let Some(socket) = &args.daemon {
        return run_in_daemon(&reg, socket, &opts, &args.graphs, limit);
    }
    if args.queues > 1 {
        let Some(path) = &args.read else {
            bail!("--queues splits a capture over emulated RX queues: give it with -r FILE");
        };
        let path = path.to_string_lossy().into_owned();
        let nic = reg
            .get("nic")
            .cloned()
            .ok_or_else(|| anyhow!("no `nic` class"))?;
        let mut workers = Vec::new();
        for q in 0..args.queues {
            let mut reg = reg.clone();
            reg.register(Arc::new(DeviceOverride {
                inner: Arc::clone(&nic),
                args: vec![
                    quoted(&path),
                    Arg::bare(&args.queues.to_string()),
                    Arg::bare(&q.to_string()),
                ],
                about: "a network interface (here: one RX queue of the capture given with -r)",
            }));
            let mut opts = opts.clone();
            opts.default_source = Some(source_spec("device", "queue", false));
            let (policy, graphs, stats) = (policy.clone(), args.graphs.clone(), args.stats);
            workers.push(std::thread::spawn(move || {
                run_flows(reg, policy, opts, &graphs, limit, stats)
            }));
        }
        let mut out = String::new();
        let mut totals: Vec<(String, u64)> = Vec::new();
        let mut failure = None;
        for (q, w) in workers.into_iter().enumerate() {
            let o = w
                .join()
                .map_err(|_| anyhow!("the worker of queue {q} panicked"))??;
            let _ = writeln!(out, "queue {q} (worker thread {q}):");
            for line in o.report.lines() {
                let _ = writeln!(out, "  {line}");
            }
            for (i, (text, n)) in o.delivered.into_iter().enumerate() {
                match totals.get_mut(i) {
                    Some(t) => t.1 += n,
                    None => totals.push((text, n)),
                }
            }
            failure = failure.or(o.failure);
        }
        let _ = writeln!(out, "all {} queues:", args.queues);
        for (i, (text, n)) in totals.iter().enumerate() {
            let _ = writeln!(out, "  flow {}: {text}: delivered {n} packets", i + 1);
        }
        io::stdout().lock().write_all(out.as_bytes())?;
        if let Some(e) = failure {
            bail!("{e}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let o = run_flows(reg, policy, opts, &args.graphs, limit, args.stats)?;
    let stdout = io::stdout();
    let mut lock = stdout.lock();
    lock.write_all(o.report.as_bytes())?;
    lock.flush()?;
    if let Some(path) = &args.dot {
        std::fs::write(path, &o.dot).with_context(|| format!("cannot write {}", path.display()))?;
        let svg = path.with_extension("svg");
        match std::process::Command::new("dot")
            .arg("-Tsvg")
            .arg(path)
            .arg("-o")
            .arg(&svg)
            .status()
        {
            Ok(s) if s.success() => {
                eprintln!("netsift: wrote {} and {}", path.display(), svg.display())
            }
            _ => eprintln!(
                "netsift: wrote {} (install graphviz for an SVG: dot -Tsvg {} -o {})",
                path.display(),
                path.display(),
                svg.display()
            ),
        }
    }
    if let Some(e) = o.failure {
        bail!("{e}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What one run of the flows gave.
struct Outcome {
    /// The report (per flow: deliveries and MBuf summaries; with `stats`, every instance).
    report: String,
    /// Per flow: its text and the packets delivered.
    delivered: Vec<(String, u64)>,
    /// The instantiated graph as Graphviz.
    dot: String,
    /// A filter's `finish` failed.
    failure: Option<String>,
}

/// Open `graphs` in a runtime, run the sources until they end (or `limit` packets, or Ctrl-C)
/// with a reader thread per flow, and report.
fn run_flows(
    reg: Registry,
    policy: Policy,
    opts: FlowOptions,
    graphs: &[String],
    limit: u64,
    stats: bool,
) -> Result<Outcome> {
    let mut rt = Runtime::new(reg, policy);
    // Each argument may hold several flows separated by `;`.
    let mut flows = Vec::new();
    for g in graphs {
        let specs = netsift_graph::lang::parse(g).map_err(|e| anyhow!("{}", e.render(g)))?;
        for spec in specs {
            let text = spec.to_string();
            let (id, reader) = rt.open(&text, opts.clone()).map_err(|e| anyhow!("{e}"))?;
            flows.push((id, text, reader));
        }
    }
    // A reader thread per flow drains its buffer.
    let mut readers = Vec::new();
    for (id, text, mut reader) in flows {
        readers.push((
            id,
            text,
            std::thread::spawn(move || {
                let mut n = 0u64;
                loop {
                    reader.wait_for(256, Duration::from_millis(50));
                    while reader.next().is_some() {
                        n += 1;
                    }
                    reader.release();
                    if reader.is_finished() && reader.available() == 0 {
                        break;
                    }
                }
                (n, reader.stats())
            }),
        ));
    }
    eprintln!("netsift: {} flow(s) running", readers.len());
    // `step` returns without a packet when a live source is idle, so Ctrl-C and -c are noticed.
    while rt.stats().packets < limit && !signals::stopped() {
        if !rt.step().map_err(|e| anyhow!("{e}"))? {
            break;
        }
    }
    let finish = rt.finish();
    let mut out = String::new();
    let mut delivered = Vec::new();
    let run_stats = rt.stats();
    let _ = writeln!(
        out,
        "{} packets from the sources, {} accepted by some flow, {} copies into flow-group buffers",
        run_stats.packets, run_stats.accepted, run_stats.copies
    );
    for (id, text, handle) in readers {
        let (n, rs) = handle
            .join()
            .map_err(|_| anyhow!("the reader of flow {id} panicked"))?;
        let _ = writeln!(out, "flow {id}: {text}");
        delivered.push((text.clone(), n));
        let _ = writeln!(
            out,
            "  delivered {n} packets (dropped {}, overwritten {})",
            rs.dropped, rs.overwritten
        );
        for (i, node) in rt.flow_nodes(id).iter().enumerate() {
            let Some(n) = rt.graph().node(*node) else {
                continue;
            };
            if let Some(d) = n.class.describe(&n.mbuf) {
                let _ = writeln!(out, "  filter {i} {}#{node}: {d}", n.class.name());
            }
        }
    }
    if stats {
        let _ = writeln!(out, "instances:");
        for (id, n) in rt.graph().nodes() {
            let a: Vec<String> = n.args.iter().map(|a| a.text.clone()).collect();
            let _ = writeln!(
                out,
                "  {}#{id}({}) upstream {:?}: seen {}, passed {}, used by {} flow(s)",
                n.class.name(),
                a.join(","),
                n.upstream,
                n.seen,
                n.passed,
                n.users
            );
        }
        for line in rt.log() {
            let _ = writeln!(out, "  log: {line}");
        }
    }
    Ok(Outcome {
        report: out,
        delivered,
        dot: rt.dot(),
        failure: finish.err().map(|e| e.to_string()),
    })
}

/// `netsift flow --daemon`: open the flows in netsiftd, read them here, report as a local run.
fn run_in_daemon(
    reg: &Registry,
    socket: &str,
    opts: &FlowOptions,
    graphs: &[String],
    limit: u64,
) -> Result<ExitCode> {
    use netsift_daemon::client::{Client, OpenOptions, default_socket};
    let path = if socket.is_empty() {
        default_socket()
    } else {
        PathBuf::from(socket)
    };
    let client = Client::connect(&path).map_err(|e| anyhow!("{e}"))?;
    let oo = OpenOptions {
        preference: opts.preference,
        slots: opts.slots,
        ..OpenOptions::default()
    };
    let mut flows = Vec::new();
    for g in graphs {
        let specs = netsift_graph::lang::parse(g).map_err(|e| anyhow!("{}", e.render(g)))?;
        for mut spec in specs {
            let starts_with_source = spec
                .stages
                .first()
                .and_then(|s| s.filters.first())
                .and_then(|f| reg.get(&f.class))
                .is_some_and(|c| c.is_source());
            if !starts_with_source && let Some(src) = &opts.default_source {
                spec.stages.insert(
                    0,
                    netsift_graph::lang::Stage {
                        filters: vec![src.clone()],
                    },
                );
            }
            let text = spec.to_string();
            let classes: Vec<String> = spec.filters().map(|f| f.class.clone()).collect();
            let flow = client.open(&text, &oo).map_err(|e| anyhow!("{e}"))?;
            flows.push((text, classes, flow, 0u64));
        }
    }
    eprintln!(
        "netsift: {} flow(s) running in netsiftd at {}",
        flows.len(),
        path.display()
    );
    // One thread reads every flow in turn: no system call per packet, a short nap when idle.
    let mut total = 0u64;
    'run: while !signals::stopped() {
        let mut idle = true;
        let mut finished = true;
        for (_, _, flow, n) in &mut flows {
            let r = flow.reader();
            while let Some(_p) = r.next() {
                *n += 1;
                total += 1;
                idle = false;
                if total >= limit {
                    r.release();
                    break 'run;
                }
            }
            r.release();
            finished &= r.is_finished();
        }
        if finished {
            break;
        }
        if idle {
            if let Some((_, _, f, _)) = flows.first_mut() {
                f.reader().wait_for(1, Duration::from_millis(5));
            }
        }
    }
    let mut out = String::new();
    for (text, classes, flow, n) in &flows {
        let st = flow.stats().map_err(|e| anyhow!("{e}"))?;
        let _ = writeln!(out, "flow {}: {text}", flow.id());
        let _ = writeln!(
            out,
            "  delivered {n} packets (dropped {}, overwritten {})",
            st.dropped, st.overwritten
        );
        for (i, class) in classes.iter().enumerate() {
            if let (Some(m), Some(c)) = (flow.mbuf(i), reg.get(class))
                && let Some(d) = c.describe(m)
            {
                let _ = writeln!(out, "  filter {i} {}: {d}", c.name());
            }
        }
    }
    let stdout = io::stdout();
    let mut lock = stdout.lock();
    lock.write_all(out.as_bytes())?;
    lock.flush()?;
    Ok(ExitCode::SUCCESS)
}
