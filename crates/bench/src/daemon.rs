//! The `daemon` suite (FFPF's reason to exist): CPU per packet of K = 1, 2, 4 monitoring
//! applications on one link, all through one `netsiftd`, against the same applications each
//! on its own AF_PACKET socket with Debian's libpcap — measured in the same run, same traffic.
//!
//! The application is Debian's unmodified `tcpdump -w /dev/null` (it captures every packet
//! and writes it out): once on the real libpcap (each copy opens a TPACKET_V3 socket, the
//! kernel copies every frame into each socket's ring), once on netsift's libpcap with
//! `NETSIFT_SOCKET` set (the daemon owns one socket, copies each frame once into the group's
//! PBuf, the applications read it from shared memory).
//!
//! Each run: a fresh namespace and veth pair; the daemon (if any) and the K applications are
//! started on the receiving end and waited for; this process sends `count` frames of the
//! synthetic mix at a fixed rate from the other end; after a drain pause the applications get
//! SIGINT and report what they captured. Two CPU figures per packet sent:
//!
//! - **processes**: user + system time of the applications and the daemon (`wait4`);
//! - **system**: all CPU time the machine spent (`/proc/stat`, every state but idle and
//!   iowait) during the send and drain, minus the same for a run that sends with nobody
//!   capturing. This includes the kernel's copies into the sockets' rings, which run in the
//!   sender's soft interrupts and which the first figure misses.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use netsift_capture::live::Sender;

use crate::netns::Lab;
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
}

impl Default for Config {
    fn default() -> Config {
        Config {
            count: 300_000,
            rate: 100_000,
            reps: 3,
            apps: vec![1, 2, 4],
        }
    }
}

/// One measured run.
#[derive(Clone, Debug, Default)]
struct Run {
    sent: u64,
    /// Packets each application captured, summed.
    captured: u64,
    /// Packets the applications report dropped, summed.
    dropped: u64,
    /// CPU seconds of the applications and the daemon.
    cpu: f64,
    /// CPU seconds the whole machine spent (all cores, not idle).
    system: f64,
}

/// Busy CPU seconds of the machine so far (`/proc/stat`).
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
    // user nice system idle iowait irq softirq steal
    let busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
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
enum Via<'a> {
    /// Nobody captures (the baseline of the system figure).
    Nobody,
    /// Each application on its own socket with Debian's libpcap.
    Libpcap,
    /// Through netsiftd (`netsiftd` binary, directory with netsift's `libpcap.so.0.8`).
    Daemon {
        netsiftd: &'a Path,
        libdir: &'a Path,
    },
}

fn measure(tcpdump: &str, via: &Via<'_>, apps: usize, cfg: &Config) -> Result<Run, String> {
    let lab = Lab::new()?;
    let socket = std::env::temp_dir().join(format!("{}.sock", lab.ns));
    let mut daemon = None;
    if let Via::Daemon { netsiftd, .. } = via {
        let mut d = lab
            .command(&netsiftd.display().to_string())
            .arg("--socket")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", netsiftd.display()))?;
        let err = wait_line(&mut d, "listening on", "netsiftd")?;
        daemon = Some((d, err));
    }
    let mut children = Vec::new();
    if !matches!(via, Via::Nobody) {
        for _ in 0..apps {
            let mut cmd = lab.command(tcpdump);
            cmd.args(["-i", &lab.b, "-B", "8192", "-w", "/dev/null"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .env_remove("LD_LIBRARY_PATH")
                .env_remove("NETSIFT_SOCKET");
            if let Via::Daemon { libdir, .. } = via {
                cmd.env("LD_LIBRARY_PATH", libdir)
                    .env("NETSIFT_SOCKET", &socket);
            }
            let mut c = cmd
                .spawn()
                .map_err(|e| format!("cannot start {tcpdump}: {e}"))?;
            let err = wait_line(&mut c, "listening on", "tcpdump")?;
            children.push((c, err));
        }
    }
    let frames: Vec<Vec<u8>> = workload::frames(workload::SEED, 4096)
        .into_iter()
        .map(|p| p.data)
        .collect();
    let a = lab.a.clone();
    let (count, rate) = (cfg.count, cfg.rate);
    let busy0 = busy_seconds()?;
    let sent = lab.run(|| -> Result<u64, String> {
        let mut tx = Sender::open(&a).map_err(|e| e.to_string())?;
        let mut it = frames.iter().map(Vec::as_slice).cycle();
        let st = tx
            .send_paced(&mut it, Some(rate), count, Duration::from_secs(120))
            .map_err(|e| e.to_string())?;
        Ok(st.sent)
    })?;
    std::thread::sleep(Duration::from_millis(1000));
    let system = busy_seconds()? - busy0;
    let mut run = Run {
        sent,
        system,
        ..Run::default()
    };
    for (c, err) in children {
        let (cpu, text) = stop(c, err, "tcpdump")?;
        run.cpu += cpu;
        run.captured += number(&text, "packets captured")?;
        run.dropped += number(&text, "packets dropped by kernel")?;
    }
    if let Some((d, err)) = daemon {
        let (cpu, _) = stop(d, err, "netsiftd")?;
        run.cpu += cpu;
    }
    let _ = std::fs::remove_file(&socket);
    Ok(run)
}

fn median(mut runs: Vec<Run>, key: impl Fn(&Run) -> f64) -> Run {
    runs.sort_by(|a, b| key(a).total_cmp(&key(b)));
    runs[runs.len() / 2].clone()
}

fn ns(secs: f64, sent: u64) -> f64 {
    secs * 1e9 / sent.max(1) as f64
}

/// A directory holding netsift's libpcap as `libpcap.so.0.8`, next to `netsift`.
fn netsift_libdir(netsift: &Path) -> Result<PathBuf, String> {
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
    let daemon = Via::Daemon {
        netsiftd: &netsiftd,
        libdir: &libdir,
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite daemon: K copies of Debian's `tcpdump -w /dev/null` on one veth link, {} frames of \
         the synthetic mix at {} frames/s per run (median of {}); each on Debian's libpcap (own \
         AF_PACKET socket) against all through one netsiftd (netsift's libpcap)\n",
        cfg.count, cfg.rate, cfg.reps
    );
    let _ = writeln!(
        out,
        "{:<3} {:<22} {:>10} {:>8} {:>15} {:>15} {:>14}",
        "K",
        "applications",
        "captured",
        "dropped",
        "process ns/pkt",
        "system ns/pkt",
        "vs libpcap×K"
    );
    let t = Instant::now();
    let mut baseline = Vec::new();
    for _ in 0..cfg.reps {
        baseline.push(measure(tcpdump, &Via::Nobody, 0, cfg)?);
    }
    let base = median(baseline, |r| r.system);
    let base_ns = ns(base.system, base.sent);
    for &k in &cfg.apps {
        let mut rows = Vec::new();
        for (name, via) in [
            ("libpcap (own sockets)", &Via::Libpcap),
            ("netsiftd", &daemon),
        ] {
            let mut runs = Vec::new();
            for _ in 0..cfg.reps {
                runs.push(measure(tcpdump, via, k, cfg)?);
            }
            let r = median(runs, |r| ns(r.cpu, r.sent));
            let sys = (ns(r.system, r.sent) - base_ns).max(0.0);
            rows.push((name, r, sys));
        }
        let (lib_cpu, lib_sys) = (ns(rows[0].1.cpu, rows[0].1.sent), rows[0].2);
        for (name, r, sys) in rows {
            let cpu = ns(r.cpu, r.sent);
            let _ = writeln!(
                out,
                "{:<3} {:<22} {:>10} {:>8} {:>15.0} {:>15.0} {:>6.2}x {:>6.2}x",
                k,
                name,
                r.captured,
                r.dropped,
                cpu,
                sys,
                cpu / lib_cpu,
                sys / lib_sys.max(1e-9)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&libdir);
    let _ = writeln!(
        out,
        "\nprocess ns/pkt: user+system CPU of the K tcpdumps (and netsiftd) over the frames sent; \
         system ns/pkt: the machine's busy CPU over the frames sent minus a run nobody captures \
         ({base_ns:.0} ns/pkt: the sender alone), which includes the kernel's copies into the \
         sockets' rings. \"vs libpcap×K\": netsiftd's figure over libpcap's (process, system; \
         lower is better; goal at K = 4: below 0.5). {:.0} s.",
        t.elapsed().as_secs_f64()
    );
    Ok(out)
}
