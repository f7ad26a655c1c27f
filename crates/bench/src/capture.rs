//! The `capture` suite: packets per second and CPU per packet of live capture on a veth pair,
//! netsift (AF_PACKET TPACKET_V3 and AF_XDP) against `tcpdump -w /dev/null` (libpcap), same
//! traffic, same filter, same ring size, measured in the same run.
//!
//! Each run: a fresh namespace with a veth pair; the capturer is started on the receiving end
//! and waited for; this process sends the synthetic mix (whole frames) as fast as the pair takes
//! it from the other end; then the capturer gets SIGINT and prints its summary. The capturer's
//! CPU time (user + system, from `wait4`) divided by the frames sent is its cost per packet of
//! the link's traffic (with a filter, tcpdump's kernel filter keeps most frames out of its ring,
//! so "per packet received" would not compare like with like). The kernel's copy into the ring
//! runs in the sender's softirq and is not in that figure, for any capturer.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use netsift_capture::live::Sender;
use netsift_testkit::netns::Lab;

use crate::workload;

/// One measured run.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// Frames sent.
    pub sent: u64,
    /// Seconds the sending took.
    pub secs: f64,
    /// The capturer's counters.
    pub captured: u64,
    /// Received by the filter (libpcap's meaning).
    pub received: u64,
    /// Dropped by the kernel.
    pub dropped: u64,
    /// CPU seconds of the capturer (user + system).
    pub cpu: f64,
}

/// Runs `capturer` (a command line, `{IF}` for the interface) on a fresh lab while `count`
/// frames are sent.
pub fn measure(capturer: &[String], count: u64) -> Result<Run, String> {
    let lab = Lab::new()?;
    let args: Vec<String> = capturer.iter().map(|a| a.replace("{IF}", &lab.b)).collect();
    let mut child = lab
        .command(&args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", args[0]))?;
    let mut err = BufReader::new(child.stderr.take().ok_or("no stderr")?);
    let mut first = String::new();
    let _ = err.read_line(&mut first);
    if !first.contains("listening on") {
        let _ = child.kill();
        return Err(format!("{} did not start: {first}", args[0]));
    }
    let frames: Vec<Vec<u8>> = workload::frames(workload::SEED, 4096)
        .into_iter()
        .map(|p| p.data)
        .collect();
    let a = lab.a.clone();
    let (sent, secs) = lab.run(|| -> Result<(u64, f64), String> {
        let mut tx = Sender::open(&a).map_err(|e| e.to_string())?;
        let mut it = frames.iter().map(Vec::as_slice).cycle();
        let t = Instant::now();
        let st = tx
            .send_paced(&mut it, None, count, Duration::from_secs(60))
            .map_err(|e| e.to_string())?;
        Ok((st.sent, t.elapsed().as_secs_f64()))
    })?;
    std::thread::sleep(Duration::from_millis(1200));
    let pid = child.id() as libc::pid_t;
    // SAFETY: signalling and reaping our own child; rusage is plain old data.
    let (status, ru) = unsafe {
        libc::kill(pid, libc::SIGINT);
        let mut status = 0;
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::wait4(pid, &mut status, 0, &mut ru);
        (status, ru)
    };
    let mut text = first;
    let _ = err.read_to_string(&mut text);
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("{} failed ({status}): {text}", args[0]));
    }
    let num = |what: &str| -> Result<u64, String> {
        text.lines()
            .find(|l| l.contains(what))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("no '{what}' in the output of {}: {text}", args[0]))
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Ok(Run {
        sent,
        secs,
        captured: num("packets captured")?,
        received: num("packets received by filter")?,
        dropped: num("packets dropped by kernel")?,
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
    })
}

/// The suite: for each filter, tcpdump, netsift AF_PACKET and netsift AF_XDP, the median of
/// `reps` runs of `count` frames.
pub fn suite(netsift: &Path, count: u64, reps: usize) -> Result<String, String> {
    let tcpdump = which("tcpdump").ok_or("tcpdump is not installed (apt-get install tcpdump)")?;
    let exe = netsift.display().to_string();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite capture: {count} frames of the synthetic mix per run (median of {reps}), veth pair in a \
         namespace, 8 MiB rings, writing to /dev/null\n"
    );
    let _ = writeln!(
        out,
        "{:<13} {:<26} {:>9} {:>9} {:>9} {:>9} {:>11} {:>8}",
        "filter", "capturer", "sent/s", "captured", "dropped", "capt/s", "CPU ns/pkt", "vs tcpdump"
    );
    for filter in ["", "tcp port 80"] {
        let with = |mut v: Vec<String>| {
            if !filter.is_empty() {
                v.push(filter.to_owned());
            }
            v
        };
        let s = |x: &str| x.to_owned();
        let tools: Vec<(&str, Vec<String>)> = vec![
            (
                "tcpdump (libpcap)",
                with(vec![
                    tcpdump.clone(),
                    s("-i"),
                    s("{IF}"),
                    s("-B"),
                    s("8192"),
                    s("-w"),
                    s("/dev/null"),
                ]),
            ),
            (
                "netsift AF_PACKET",
                with(vec![
                    exe.clone(),
                    s("capture"),
                    s("-i"),
                    s("{IF}"),
                    s("-B"),
                    s("8192"),
                    s("-w"),
                    s("/dev/null"),
                ]),
            ),
            (
                "netsift AF_XDP",
                with(vec![
                    exe.clone(),
                    s("capture"),
                    s("--source"),
                    s("afxdp"),
                    s("-i"),
                    s("{IF}"),
                    s("-w"),
                    s("/dev/null"),
                ]),
            ),
        ];
        let mut base = None;
        for (name, cmd) in tools {
            let mut runs = Vec::new();
            for _ in 0..reps {
                runs.push(measure(&cmd, count)?);
            }
            runs.sort_by(|a, b| per_pkt(a).total_cmp(&per_pkt(b)));
            let r = runs[runs.len() / 2].clone();
            let ns = per_pkt(&r);
            let b = *base.get_or_insert(ns);
            let _ = writeln!(
                out,
                "{:<13} {:<26} {:>9.0} {:>9} {:>9} {:>9.0} {:>11.1} {:>7.2}x",
                if filter.is_empty() { "(none)" } else { filter },
                name,
                r.sent as f64 / r.secs,
                r.captured,
                r.dropped,
                r.captured as f64 / r.secs,
                ns,
                b / ns
            );
        }
    }
    let _ = writeln!(
        out,
        "\nCPU ns/pkt: the capturer's user+system time over the frames sent; \"vs tcpdump\" is \
         tcpdump's CPU per packet divided by this one's (higher is better). With a filter, tcpdump \
         also captures VLAN-tagged frames that match the filter once the tag is ignored (libpcap's \
         kernel filter sees them untagged); netsift judges the frame as a capture file holds it."
    );
    Ok(out)
}

fn per_pkt(r: &Run) -> f64 {
    r.cpu * 1e9 / r.sent.max(1) as f64
}

fn which(prog: &str) -> Option<String> {
    for dir in [
        "/usr/bin",
        "/usr/sbin",
        "/bin",
        "/sbin",
        "/usr/local/bin",
        "/usr/local/sbin",
    ] {
        let p = Path::new(dir).join(prog);
        if p.exists() {
            return Some(p.display().to_string());
        }
    }
    None
}
