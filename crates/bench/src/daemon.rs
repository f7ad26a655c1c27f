//! The `daemon` suite (FFPF's reason to exist): CPU per packet of K = 1, 2, 4 monitoring
//! applications on one link, all through one `netsiftd`, against the same applications each
//! on its own AF_PACKET socket with Debian's libpcap — measured in the same run, same traffic.
//!
//! Two applications, each run once on the real libpcap and once through netsiftd: `pcapcount`,
//! a minimal libpcap program built here (`pcap_loop`, count, read the EtherType — what capture
//! costs, the application doing almost nothing else), and Debian's unmodified
//! `tcpdump -w /dev/null` (it writes every packet out: the application's own work, the same
//! either way, is a large share). Each on the real libpcap (each copy opens a TPACKET_V3 socket, the
//! kernel copies every frame into each socket's ring), once on netsift's libpcap with
//! `NETSIFT_SOCKET` set (the daemon owns one socket, copies each frame once into the group's
//! PBuf, the applications read it from shared memory).
//!
//! One namespace and veth pair for all runs, one netsiftd for the suite (it is a daemon; its
//! CPU is counted per run from its exact clock). Each run: the K applications are
//! started on the receiving end and waited for; this process sends `count` frames of the
//! synthetic mix at a fixed rate from the other end; after a drain pause the applications get
//! SIGINT and report what they captured. CPU per packet sent:
//!
//! - **process**: the CPU time of the applications and the daemon (schedstat, every thread)
//!   from when the applications are running (300 ms after they said "listening") to after the
//!   drain pause: what capturing costs per packet, as for a long-running monitor;
//! - **start+stop**: the rest of their CPU time (the applications' `wait4` total and the
//!   daemon's from before they connected to after they left, minus the window): setting up
//!   rings or shared buffers and flows, and tearing them down — once per application start,
//!   reported per application in milliseconds;
//! - **kernel**: the CPU time of the receiving end's NAPI thread — the lab runs the veth
//!   peer's receive path in a kernel thread of its own ([`Lab::threaded_receive`]), as a
//!   NIC's receive runs in its soft interrupt: the copy into every socket's ring, each
//!   socket's filter, the wake-ups, the IP layer — plus the `ksoftirqd` threads', exactly
//!   (schedstat), minus the same for a run that sends with nobody capturing, made in the same
//!   repetition just before (the background drifts over minutes). Exact clocks, not tick
//!   samples (`/proc/stat` swung by 100% between identical runs here). Until 2026-11-23 the
//!   delivery ran in the sending thread's context and this column was that thread's CPU
//!   time: the sender's own work (1.2 to 2.0 µs a frame, varying by a third between runs)
//!   then sat in both terms of the difference, and one repetition's ratio ranged from 0.24x
//!   to 0.72x; the receive thread alone costs about 0.9 µs a frame and varies less.
//! - **total**: the two together — what the machine pays for the captures.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use netsift_capture::live::Sender;
use netsift_testkit::netns::{Lab, schedstat_seconds};

use crate::workload;

/// How the suite runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Frames per run.
    pub count: u64,
    /// Frames per second sent.
    pub rate: u64,
    /// Runs per configuration (the median is reported).
    pub reps: usize,
    /// Application counts.
    pub apps: Vec<usize>,
    /// Pin the sending thread to the first CPU and the captures (applications, daemon) to
    /// the others (`NETSIFT_BENCH_PIN=1`; needs at least two CPUs).
    pub pin: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            count: 300_000,
            rate: 100_000,
            reps: 3,
            apps: vec![1, 2, 4],
            pin: false,
        }
    }
}

impl Config {
    /// The defaults, with `NETSIFT_BENCH_RATE` (frames/s; the count follows: 3 s of traffic),
    /// `NETSIFT_BENCH_REPS`, `NETSIFT_BENCH_APPS` (application counts, e.g. `4` or `1,2,4`) and
    /// `NETSIFT_BENCH_PIN` when set.
    pub fn from_env() -> Result<Config, String> {
        let mut c = Config::default();
        let num = |name: &str| -> Result<Option<u64>, String> {
            match std::env::var(name) {
                Err(_) => Ok(None),
                Ok(v) => v
                    .parse::<u64>()
                    .ok()
                    .filter(|&n| n > 0)
                    .map(Some)
                    .ok_or_else(|| format!("{name}={v}: not a positive number")),
            }
        };
        if let Some(rate) = num("NETSIFT_BENCH_RATE")? {
            c.rate = rate;
            c.count = rate * 3;
        }
        if let Some(reps) = num("NETSIFT_BENCH_REPS")? {
            c.reps = reps as usize;
        }
        c.pin = std::env::var("NETSIFT_BENCH_PIN").is_ok_and(|v| v == "1");
        if let Ok(v) = std::env::var("NETSIFT_BENCH_APPS") {
            c.apps = v
                .split(',')
                .map(|n| {
                    n.trim()
                        .parse::<usize>()
                        .ok()
                        .filter(|&n| (1..=16).contains(&n))
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("NETSIFT_BENCH_APPS={v}: not a list like 1,2,4"))?;
        }
        Ok(c)
    }
}

/// CPUs `[first, last]` this process may run on, when pinning is possible (two or more).
fn cpus() -> Option<(usize, usize)> {
    let n = std::thread::available_parallelism().ok()?.get();
    (n >= 2).then(|| (0, n - 1))
}

/// Restrict the calling thread to CPUs `from..=to`.
fn pin_to(from: usize, to: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within it for the CPU
    // numbers the system reported; sched_setaffinity(0) affects the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in from..=to {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// With `pin`, make `cmd`'s process run on the capture CPUs (all but the first).
fn pin_captures(cmd: &mut std::process::Command, pin: bool) {
    use std::os::unix::process::CommandExt;
    if let (true, Some((_, last))) = (pin, cpus()) {
        // SAFETY: the closure only calls sched_setaffinity, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || pin_to(1, last));
        }
    }
}

/// One measured run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Run {
    pub(crate) sent: u64,
    /// Packets each application captured, summed.
    pub(crate) captured: u64,
    /// Packets the applications report dropped, summed.
    pub(crate) dropped: u64,
    /// CPU seconds of the applications and the daemon while the frames were sent and drained
    /// (the capture's cost per packet; start and stop excluded).
    pub(crate) cpu: f64,
    /// The daemon's part of `cpu`.
    daemon: f64,
    /// CPU seconds of the applications and the daemon outside that window: starting (the
    /// buffers, the daemon's flows) and stopping.
    setup: f64,
    /// CPU seconds of the receiving end's NAPI thread (which delivered every frame) and of
    /// the soft-interrupt threads: the kernel's side of the run.
    system: f64,
}

/// CPU seconds the kernel's soft-interrupt threads (`ksoftirqd/N`) have run, exactly
/// (`/proc/PID/schedstat`): packet delivery deferred to them.
fn ksoftirqd_seconds() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    schedstat_seconds(
        dir.flatten()
            .filter(|e| {
                std::fs::read_to_string(e.path().join("comm"))
                    .is_ok_and(|c| c.starts_with("ksoftirqd/"))
            })
            .map(|e| e.path()),
    )
}

/// Busy CPU seconds of the machine so far (`/proc/stat`).
#[allow(dead_code)]
fn busy_seconds() -> Result<f64, String> {
    let text = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    let line = text.lines().next().ok_or("/proc/stat is empty")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|w| w.parse().ok())
        .collect();
    if v.len() < 8 {
        return Err(format!("/proc/stat: unexpected first line {line:?}"));
    }
    // user nice system idle iowait irq softirq steal: steal is another guest's time
    let busy = v[0] + v[1] + v[2] + v[5] + v[6];
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok(busy as f64 / hz)
}

/// Wait for a line containing `what` on `child`'s standard error; returns the reader.
fn wait_line(
    child: &mut Child,
    what: &str,
    name: &str,
) -> Result<BufReader<std::process::ChildStderr>, String> {
    let mut err = BufReader::new(child.stderr.take().ok_or("no stderr")?);
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            let _ = child.kill();
            return Err(format!("{name} did not start: {seen}"));
        }
        seen.push_str(&line);
        if line.contains(what) {
            return Ok(err);
        }
    }
}

/// SIGINT `child`, reap it, return its CPU seconds and the rest of its standard error.
fn stop(
    mut child: Child,
    mut err: BufReader<std::process::ChildStderr>,
    name: &str,
) -> Result<(f64, String), String> {
    let pid = child.id() as libc::pid_t;
    // SAFETY: signalling and reaping our own child; rusage is plain old data.
    let (status, ru) = unsafe {
        libc::kill(pid, libc::SIGINT);
        let mut status = 0;
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::wait4(pid, &mut status, 0, &mut ru);
        (status, ru)
    };
    let _ = child.try_wait();
    let mut text = String::new();
    let _ = err.read_to_string(&mut text);
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("{name} failed ({status}): {text}"));
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Ok((tv(ru.ru_utime) + tv(ru.ru_stime), text))
}

fn number(text: &str, what: &str) -> Result<u64, String> {
    text.lines()
        .find(|l| l.contains(what))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("no '{what}' in tcpdump's output: {text}"))
}

/// Where the applications go.
pub(crate) enum Via<'a> {
    /// Nobody captures (the baseline of the system figure).
    Nobody,
    /// Each application on its own socket with Debian's libpcap.
    Libpcap,
    /// Each application on its own socket with netsift's `libpcap.so.0.8` from the directory
    /// (`NETSIFT_PCAP_DIRECT=1`: its AF_PACKET source, not a daemon).
    Direct(&'a Path),
    /// Through the netsiftd running at `socket` as process `pid` (a daemon: started once for
    /// the suite), with netsift's `libpcap.so.0.8` from `libdir`.
    Daemon {
        socket: &'a Path,
        pid: u32,
        libdir: &'a Path,
    },
}

/// CPU seconds process `pid` has run so far, exactly (`/proc/PID/schedstat`).
fn process_seconds(pid: u32) -> Result<f64, String> {
    // Every thread's: the sum over /proc/PID/task/*/schedstat.
    let dir = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|e| format!("process {pid}: {e}"))?;
    Ok(schedstat_seconds(dir.flatten().map(|e| e.path())))
}

/// Start netsiftd in the lab at `socket`.
fn start_daemon(
    lab: &Lab,
    netsiftd: &Path,
    socket: &Path,
    pin: bool,
) -> Result<(Child, BufReader<std::process::ChildStderr>), String> {
    let mut cmd = lab.command(&netsiftd.display().to_string());
    cmd.arg("--socket")
        .arg(socket)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    pin_captures(&mut cmd, pin);
    let mut d = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", netsiftd.display()))?;
    let err = wait_line(&mut d, "listening on", "netsiftd")?;
    Ok((d, err))
}

/// The C source of `pcapcount`: a minimal libpcap application — it captures everything on an
/// interface with `pcap_loop` and counts packets and the EtherType bytes it reads, until
/// SIGINT; then prints tcpdump's three summary lines. Built with `cc … -lpcap`, it runs on
/// Debian's libpcap or, through `LD_LIBRARY_PATH`, on netsift's.
const PCAPCOUNT_C: &str = r#"
#include <pcap/pcap.h>
#include <signal.h>
#include <stdio.h>
static pcap_t *p;
static unsigned long long n, sum;
static void on_sigint(int s) { (void)s; pcap_breakloop(p); }
static void on_packet(u_char *u, const struct pcap_pkthdr *h, const u_char *d) {
    (void)u;
    n++;
    if (h->caplen > 13) sum += (unsigned)d[12] << 8 | d[13];
}
int main(int argc, char **argv) {
    char err[PCAP_ERRBUF_SIZE];
    struct pcap_stat st;
    if (argc != 2) { fprintf(stderr, "usage: pcapcount IFACE\n"); return 2; }
    p = pcap_create(argv[1], err);
    if (!p) { fprintf(stderr, "%s\n", err); return 1; }
    pcap_set_snaplen(p, 262144);
    pcap_set_buffer_size(p, 8 << 20);
    pcap_set_timeout(p, 1000);
    if (pcap_activate(p) < 0) { fprintf(stderr, "%s\n", pcap_geterr(p)); return 1; }
    signal(SIGINT, on_sigint);
    fprintf(stderr, "listening on %s\n", argv[1]);
    pcap_loop(p, -1, on_packet, 0);
    if (pcap_stats(p, &st) < 0) { st.ps_recv = 0; st.ps_drop = 0; }
    fprintf(stderr, "%llu packets captured\n%u packets received by filter\n"
            "%u packets dropped by kernel\n(checksum %llu)\n", n, st.ps_recv, st.ps_drop, sum);
    pcap_close(p);
    return 0;
}
"#;

/// Build `pcapcount` in `dir`.
fn build_pcapcount(dir: &Path) -> Result<PathBuf, String> {
    let src = dir.join("pcapcount.c");
    let exe = dir.join("pcapcount");
    std::fs::write(&src, PCAPCOUNT_C).map_err(|e| e.to_string())?;
    let out = std::process::Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-lpcap")
        .output()
        .map_err(|e| format!("cannot run cc (install gcc): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building pcapcount failed (install libpcap-dev): {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(exe)
}

/// An application: its command line, `{IF}` standing for the interface.
#[derive(Clone, Debug)]
pub(crate) struct App {
    pub(crate) name: &'static str,
    pub(crate) argv: Vec<String>,
}

pub(crate) fn measure(
    lab: &Lab,
    app: &App,
    via: &Via<'_>,
    apps: usize,
    cfg: &Config,
) -> Result<Run, String> {
    let daemon0 = match via {
        Via::Daemon { pid, .. } => process_seconds(*pid)?,
        _ => 0.0,
    };
    let mut children = Vec::new();
    if !matches!(via, Via::Nobody) {
        for _ in 0..apps {
            let mut cmd = lab.command(&app.argv[0]);
            cmd.args(app.argv[1..].iter().map(|a| a.replace("{IF}", &lab.b)))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .env_remove("LD_LIBRARY_PATH")
                .env_remove("NETSIFT_SOCKET");
            if let Via::Daemon { libdir, socket, .. } = via {
                cmd.env("LD_LIBRARY_PATH", libdir)
                    .env("NETSIFT_SOCKET", socket);
            }
            if let Via::Direct(libdir) = via {
                cmd.env("LD_LIBRARY_PATH", libdir)
                    .env("NETSIFT_PCAP_DIRECT", "1");
            }
            pin_captures(&mut cmd, cfg.pin);
            let mut c = cmd
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", app.argv[0]))?;
            let err = wait_line(&mut c, "listening on", app.name)?;
            children.push((c, err));
        }
    }
    let frames: Vec<Vec<u8>> = workload::frames(workload::SEED, 4096)
        .into_iter()
        .map(|p| p.data)
        .collect();
    let a = lab.a.clone();
    let (count, rate, pin) = (cfg.count, cfg.rate, cfg.pin);
    // Let the start-up settle (page faults of fresh processes, the kernel's deferred work).
    std::thread::sleep(Duration::from_millis(300));
    let pids: Vec<u32> = children.iter().map(|(c, _)| c.id()).collect();
    let daemon_pid = match via {
        Via::Daemon { pid, .. } => Some(*pid),
        _ => None,
    };
    let window = || -> Result<(f64, f64), String> {
        let apps = pids
            .iter()
            .map(|&p| process_seconds(p))
            .sum::<Result<f64, String>>()?;
        Ok((apps, daemon_pid.map_or(Ok(0.0), process_seconds)?))
    };
    let (apps0, daemon_w0) = window()?;
    let kernel0 = lab.receive_seconds() + ksoftirqd_seconds();
    let sent = lab.run(|| -> Result<u64, String> {
        if pin {
            pin_to(0, 0).map_err(|e| format!("cannot pin the sender: {e}"))?;
        }
        let mut tx = Sender::open(&a).map_err(|e| e.to_string())?;
        let mut it = frames.iter().map(Vec::as_slice).cycle();
        let st = tx
            .send_paced(&mut it, Some(rate), count, Duration::from_secs(120))
            .map_err(|e| e.to_string())?;
        Ok(st.sent)
    })?;
    std::thread::sleep(Duration::from_millis(1000));
    let system = lab.receive_seconds() + ksoftirqd_seconds() - kernel0;
    let (apps1, daemon_w1) = window()?;
    let mut run = Run {
        sent,
        system,
        daemon: daemon_w1 - daemon_w0,
        cpu: apps1 - apps0 + daemon_w1 - daemon_w0,
        ..Run::default()
    };
    let mut total = 0.0;
    for (c, err) in children {
        let (cpu, text) = stop(c, err, app.name)?;
        total += cpu;
        run.captured += number(&text, "packets captured")?;
        run.dropped += number(&text, "packets dropped by kernel")?;
    }
    if let Some(pid) = daemon_pid {
        // The daemon's work for this run: from before the applications connected to after
        // they left.
        total += process_seconds(pid)? - daemon0;
    }
    run.setup = (total - run.cpu).max(0.0);
    Ok(run)
}

pub(crate) fn median<T: Clone>(mut runs: Vec<T>, key: impl Fn(&T) -> f64) -> T {
    runs.sort_by(|a, b| key(a).total_cmp(&key(b)));
    runs[runs.len() / 2].clone()
}

pub(crate) fn ns(secs: f64, sent: u64) -> f64 {
    secs * 1e9 / sent.max(1) as f64
}

/// A directory holding netsift's libpcap as `libpcap.so.0.8`, next to `netsift`.
pub(crate) fn netsift_libdir(netsift: &Path) -> Result<PathBuf, String> {
    let dir = netsift.parent().ok_or("no directory")?;
    let so = dir.join("libpcap.so");
    if !so.exists() {
        return Err(format!(
            "{} is missing: build netsift's libpcap (cargo build --release -p netsift-pcap, or \
             scripts/netsift-libpcap)",
            so.display()
        ));
    }
    let out = std::env::temp_dir().join(format!("netsift-bench-libpcap-{}", std::process::id()));
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    std::fs::copy(&so, out.join("libpcap.so.0.8")).map_err(|e| e.to_string())?;
    Ok(out)
}

/// The suite.
pub fn suite(netsift: &Path, cfg: &Config) -> Result<String, String> {
    let tcpdump = ["/usr/bin/tcpdump", "/usr/sbin/tcpdump"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or("tcpdump is not installed (apt-get install tcpdump)")?;
    let netsiftd = netsift.with_file_name("netsiftd");
    if !netsiftd.exists() {
        return Err(format!(
            "{} is missing: cargo build --release -p netsift-daemon",
            netsiftd.display()
        ));
    }
    let libdir = netsift_libdir(netsift)?;
    let pcapcount = build_pcapcount(&libdir)?;
    let apps = [
        App {
            name: "pcapcount",
            argv: vec![pcapcount.display().to_string(), "{IF}".into()],
        },
        App {
            name: "tcpdump",
            argv: ["-i", "{IF}", "-B", "8192", "-w", "/dev/null"]
                .into_iter()
                .map(String::from)
                .fold(vec![tcpdump.to_string()], |mut v, a| {
                    v.push(a);
                    v
                }),
        },
    ];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite daemon: K copies of an application on one veth link, {} frames of the synthetic mix \
         at {} frames/s per run (median of {}); each on Debian's libpcap (own AF_PACKET socket) \
         against all through one netsiftd (netsift's libpcap, NETSIFT_SOCKET). Applications: \
         pcapcount (a minimal libpcap program: pcap_loop, count, read the EtherType) and Debian's \
         `tcpdump -w /dev/null`\n",
        cfg.count, cfg.rate, cfg.reps
    );
    let t = Instant::now();
    // One namespace for every run: tearing one down is deferred kernel work that would land in
    // the next run's measurement.
    let mut lab = Lab::new()?;
    lab.threaded_receive()?;
    let socket = std::env::temp_dir().join(format!("{}.sock", lab.ns));
    let (dchild, derr) = start_daemon(&lab, &netsiftd, &socket, cfg.pin)?;
    let daemon = Via::Daemon {
        socket: &socket,
        pid: dchild.id(),
        libdir: &libdir,
    };
    // Nobody capturing, measured next to every pair of runs (the machine's background drifts
    // over minutes: a baseline taken once at the start would move the kernel column).
    let mut baseline = Vec::new();
    let mut goals = Vec::new();
    for app in &apps {
        let _ = writeln!(
            out,
            "{:<10} {:<3} {:<22} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>11}",
            "app",
            "K",
            "capture",
            "captured",
            "dropped",
            "process",
            "(daemon)",
            "kernel",
            "total",
            "process vs",
            "total vs",
            "start+stop"
        );
        let _ = writeln!(
            out,
            "{:<10} {:<3} {:<22} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>11}",
            "",
            "",
            "",
            "",
            "",
            "ns/pkt",
            "ns/pkt",
            "ns/pkt",
            "ns/pkt",
            "libpcap×K",
            "libpcap×K",
            "ms per app"
        );
        for &k in &cfg.apps {
            // Per repetition: nobody capturing, then libpcap, then netsiftd, back to back; a
            // run's kernel share is its receive-path CPU minus that of the repetition's run
            // with nobody capturing.
            let vias = [
                ("libpcap (own sockets)", &Via::Libpcap),
                ("netsiftd", &daemon),
            ];
            let mut runs: [Vec<(Run, f64)>; 2] = [Vec::new(), Vec::new()];
            for _ in 0..cfg.reps {
                let alone = measure(&lab, app, &Via::Nobody, 0, cfg)?;
                let alone_ns = ns(alone.system, alone.sent);
                baseline.push(alone_ns);
                for (i, (_, via)) in vias.iter().enumerate() {
                    let r = measure(&lab, app, via, k, cfg)?;
                    let kern = ns(r.system, r.sent) - alone_ns;
                    runs[i].push((r, kern));
                }
            }
            // The ratio of each repetition's pair (libpcap, netsiftd): how far one run can
            // stray from the median.
            let ratios: Vec<f64> = runs[0]
                .iter()
                .zip(&runs[1])
                .map(|((l, lk), (n, nk))| (ns(n.cpu, n.sent) + nk) / (ns(l.cpu, l.sent) + lk))
                .collect();
            let (rlo, rhi) = ratios
                .iter()
                .fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
            let mut rows = Vec::new();
            for ((name, _), runs) in vias.iter().zip(runs) {
                let (r, kern) = median(runs, |(r, kern)| ns(r.cpu, r.sent) + kern);
                rows.push((*name, ns(r.cpu, r.sent), kern, r));
            }
            let (lib_cpu, lib_total) = (rows[0].1, rows[0].1 + rows[0].2);
            for (name, cpu, kern, r) in rows {
                let total = cpu + kern;
                let _ = writeln!(
                    out,
                    "{:<10} {:<3} {:<22} {:>9} {:>7} {:>9.0} {:>9} {:>9.0} {:>9.0} {:>9.2}x {:>9.2}x {:>11.1}",
                    app.name,
                    k,
                    name,
                    r.captured,
                    r.dropped,
                    cpu,
                    if r.daemon > 0.0 {
                        format!("{:.0}", ns(r.daemon, r.sent))
                    } else {
                        "-".to_string()
                    },
                    kern,
                    total,
                    cpu / lib_cpu,
                    total / lib_total,
                    r.setup * 1e3 / k as f64
                );
                if k == 4 && name == "netsiftd" {
                    goals.push(format!(
                        "{} {:.2}x, repetitions {:.2}x to {:.2}x",
                        app.name,
                        total / lib_total,
                        rlo,
                        rhi
                    ));
                }
            }
        }
        out.push('\n');
    }
    stop(dchild, derr, "netsiftd")?;
    let base_ns = baseline.iter().sum::<f64>() / baseline.len().max(1) as f64;
    let (lo, hi) = baseline
        .iter()
        .fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
    let _ = std::fs::remove_file(&socket);
    let _ = std::fs::remove_dir_all(&libdir);
    let _ = writeln!(
        out,
        "process: CPU of the K applications (and of netsiftd: its part in brackets) while the \
         frames were sent and drained, exactly (schedstat), over the frames sent: the capture's \
         cost per packet. start+stop: the CPU the applications (and netsiftd for them) spent \
         outside that window, starting (buffers, rings, flows) and stopping, per application. \
         kernel: CPU of the receiving end's NAPI thread (threaded NAPI: every frame's \
         delivery, the copies into every socket's ring, the socket filters, the wake-ups, the \
         IP layer) and of the ksoftirqd threads, exactly (schedstat), minus the same for a run \
         nobody captures, made just before (on average {base_ns:.0} ns/pkt, {lo:.0} to {hi:.0} over {} \
         runs). total = process + kernel. \"vs libpcap×K\": netsiftd's figure over libpcap's \
         (lower is better). Goal: total at K = 4 below 0.5x (this run: {}).{} {:.0} s.",
        baseline.len(),
        goals.join("; "),
        if cfg.pin {
            " The sender was pinned to the first CPU, the captures to the others."
        } else {
            ""
        },
        t.elapsed().as_secs_f64()
    );
    Ok(out)
}
