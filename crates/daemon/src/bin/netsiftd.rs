//! `netsiftd`: the netsift daemon. See `docs/daemon.md`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;
use netsift_daemon::client::default_socket;
use netsift_daemon::server::{Config, Daemon, GroupBy};
use netsift_graph::policy::Policy;

/// One capture and filter graph for many applications: flows are delivered through shared
/// memory, with no system call per packet.
#[derive(Parser, Debug)]
#[command(name = "netsiftd", version)]
struct Args {
    /// Where to listen [default: $NETSIFT_SOCKET, else /run/netsift/netsiftd.sock].
    #[arg(long)]
    socket: Option<PathBuf>,
    /// The socket file's permissions, octal.
    #[arg(long, default_value = "660")]
    mode: String,
    /// The authorisation policy (see `docs/framework.md`); default: root and the members of the
    /// group `netsift` may open flows, nobody else (`docs/daemon.md`, "Threat model").
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Which applications share a flow group: uid-gid, uid, gid or connection.
    #[arg(long, default_value = "uid-gid")]
    group_by: String,
    /// Connections served at once [default: 1024].
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Connections of one user at once [default: 64].
    #[arg(long, value_name = "N")]
    max_connections_per_user: Option<usize>,
    /// Open flows of one user [default: 256].
    #[arg(long, value_name = "N")]
    max_flows_per_user: Option<usize>,
    /// Bytes of shared memory (PBufs, IBufs, control pages, MBufs) in all; K, M, G suffixes
    /// [default: 4G].
    #[arg(long, value_name = "SIZE")]
    max_memory: Option<String>,
    /// Bytes of shared memory of one user's flows [default: 1G].
    #[arg(long, value_name = "SIZE")]
    max_memory_per_user: Option<String>,
    /// The most operations an FPL filter may execute per packet [default: 65536].
    #[arg(long, value_name = "N")]
    max_fpl_ops: Option<u64>,
    /// The share of the capture loop, in percent, one flow group's filters may take while
    /// other groups have flows [default: 50].
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(1..=100))]
    max_cpu_percent: Option<u32>,
    /// Log connections, flows and authorisation decisions to standard error, and which engine
    /// runs each filter (`RUST_LOG` selects in detail).
    #[arg(short, long)]
    verbose: bool,
}

/// mimalloc: the device source copies each frame out of the kernel's ring into a buffer of its
/// own, so the capture loop allocates and frees once per packet.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn run(args: Args) -> Result<(), String> {
    let socket = args.socket.clone().unwrap_or_else(default_socket);
    let mode = u32::from_str_radix(&args.mode, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("--mode {}: not an octal permission (e.g. 660)", args.mode))?;
    let group_by = GroupBy::parse(&args.group_by).map_err(|e| format!("--group-by: {e}"))?;
    let policy = match &args.policy {
        None => Policy::daemon_default(),
        Some(p) => {
            let text =
                std::fs::read_to_string(p).map_err(|e| format!("--policy {}: {e}", p.display()))?;
            Policy::parse(&text).map_err(|e| format!("{}: {}", p.display(), e.render(&text)))?
        }
    };
    if let Some(dir) = socket.parent()
        && !dir.as_os_str().is_empty()
        && !dir.exists()
    {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut cfg = Config::new(&socket);
    cfg.mode = mode;
    cfg.policy = policy;
    cfg.group_by = group_by;
    cfg.verbose = args.verbose;
    let l = &mut cfg.limits;
    l.connections = args.max_connections.unwrap_or(l.connections);
    l.connections_per_user = args
        .max_connections_per_user
        .unwrap_or(l.connections_per_user);
    l.flows_per_user = args.max_flows_per_user.unwrap_or(l.flows_per_user);
    l.fpl_ops = args.max_fpl_ops.unwrap_or(l.fpl_ops);
    l.cpu_percent = args.max_cpu_percent.unwrap_or(l.cpu_percent);
    if let Some(s) = &args.max_memory {
        l.memory = size(s).map_err(|e| format!("--max-memory {s}: {e}"))?;
    }
    if let Some(s) = &args.max_memory_per_user {
        l.memory_per_user = size(s).map_err(|e| format!("--max-memory-per-user {s}: {e}"))?;
    }
    let mut daemon =
        Daemon::bind(cfg).map_err(|e| format!("cannot listen on {}: {e}", socket.display()))?;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
    eprintln!("netsiftd: listening on {}", socket.display());
    daemon
        .run(&STOP)
        .map_err(|e| format!("netsiftd stopped: {e}"))?;
    eprintln!("netsiftd: stopped");
    Ok(())
}

/// A size in bytes for `--max-memory*` ([`netsift_graph::policy::parse_size`]).
fn size(s: &str) -> Result<u64, String> {
    netsift_graph::policy::parse_size(s)
        .ok_or_else(|| "not a size (a number of bytes, optionally with K, M or G)".to_string())
}

/// Logs to stderr: `RUST_LOG` if set, else the filter API's engine decisions with `-v`.
fn init_logging(verbose: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(if verbose {
            "netsift_filter=info"
        } else {
            "off"
        }),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
}

fn main() -> ExitCode {
    let args = Args::parse();
    init_logging(args.verbose);
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("netsiftd: {e}");
            ExitCode::FAILURE
        }
    }
}
