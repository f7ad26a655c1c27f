//! The `dropin` suite: Debian's unmodified tcpdump on netsift's libpcap against the same
//! tcpdump on Debian's libpcap 1.10.3, in the same run (issue 28's goal: at least 1.5x less
//! CPU per packet on netsift's):
//!
//! - **file**: `tcpdump -r BIG -w OUT 'tcp port 80'` on a pcap file of the synthetic mix
//!   (written here, `NETSIFT_BENCH_FILE_PACKETS`, default 1,000,000): the process's user +
//!   system time (`wait4`) over the packets in the file, median of the runs, libpcap and
//!   netsift alternating;
//! - **live**: `tcpdump -i IF -B 8192 -w /dev/null` on a veth pair while frames of the mix
//!   are sent from the other end (as the `daemon` suite measures it, K = 1): the process's CPU
//!   while the frames are sent and drained (schedstat), over the frames sent; netsift's
//!   library captures directly (`NETSIFT_PCAP_DIRECT=1`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use netsift_capture::{LinkType, PacketRef, PcapWriter, Precision, Timestamp};
use netsift_testkit::netns::Lab;

use crate::daemon::{App, Config, Run, Via, measure, median, netsift_libdir, ns};
use crate::workload;

/// Writes `n` packets of the synthetic mix to a pcap file.
fn write_big(path: &Path, n: usize) -> Result<(), String> {
    let frames = workload::frames(workload::SEED, 4096);
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = PcapWriter::new(
        std::io::BufWriter::with_capacity(1 << 20, file),
        LinkType::ETHERNET,
        262_144,
        Precision::Micro,
    )
    .map_err(|e| e.to_string())?;
    for (i, p) in frames.iter().cycle().take(n).enumerate() {
        w.write_packet(&PacketRef::new(
            &p.data,
            Timestamp::new(1_700_000_000 + (i / 1000) as i64, (i % 1000) as u32 * 1000),
            LinkType::ETHERNET,
        ))
        .map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())
}

/// One `tcpdump -r` run: CPU seconds (user + system) and the packets it wrote.
fn read_once(
    tcpdump: &str,
    big: &Path,
    out: &Path,
    lib: Option<&Path>,
) -> Result<(f64, String), String> {
    let mut cmd = std::process::Command::new(tcpdump);
    cmd.arg("-r")
        .arg(big)
        .arg("-w")
        .arg(out)
        .arg("tcp port 80")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    match lib {
        Some(dir) => cmd.env("LD_LIBRARY_PATH", dir),
        None => cmd.env_remove("LD_LIBRARY_PATH"),
    };
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start tcpdump: {e}"))?;
    let pid = child.id() as libc::pid_t;
    // SAFETY: reaping our own child; rusage is plain old data.
    let (status, ru) = unsafe {
        let mut status = 0;
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::wait4(pid, &mut status, 0, &mut ru);
        (status, ru)
    };
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("tcpdump -r failed ({status})"));
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let written = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    Ok((
        tv(ru.ru_utime) + tv(ru.ru_stime),
        format!("{written} bytes"),
    ))
}

/// The suite.
pub fn suite(netsift: &Path, cfg: &Config) -> Result<String, String> {
    let tcpdump = ["/usr/bin/tcpdump", "/usr/sbin/tcpdump"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or("tcpdump is not installed (apt-get install tcpdump)")?;
    let libdir = netsift_libdir(netsift)?;
    let n: usize = std::env::var("NETSIFT_BENCH_FILE_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let t = Instant::now();
    let tmp: PathBuf = std::env::temp_dir().join(format!("netsift-dropin-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let big = tmp.join("big.pcap");
    write_big(&big, n)?;
    let size = std::fs::metadata(&big).map(|m| m.len()).unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite dropin: Debian's tcpdump on Debian's libpcap 1.10.3 against the same tcpdump on \
         netsift's libpcap (LD_LIBRARY_PATH), same run\n"
    );
    // File: alternate the libraries, the median of each.
    let reps = cfg.reps.max(3);
    let (mut theirs, mut ours) = (Vec::new(), Vec::new());
    let (mut w_theirs, mut w_ours) = (String::new(), String::new());
    for _ in 0..reps {
        let (c, w) = read_once(tcpdump, &big, &tmp.join("out-libpcap.pcap"), None)?;
        theirs.push(c);
        w_theirs = w;
        let (c, w) = read_once(tcpdump, &big, &tmp.join("out-netsift.pcap"), Some(&libdir))?;
        ours.push(c);
        w_ours = w;
    }
    let same = std::fs::read(tmp.join("out-libpcap.pcap")).ok()
        == std::fs::read(tmp.join("out-netsift.pcap")).ok();
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (lib_ns, net_ns) = (
        med(&mut theirs) * 1e9 / n as f64,
        med(&mut ours) * 1e9 / n as f64,
    );
    let file_ratio = lib_ns / net_ns;
    let _ = writeln!(
        out,
        "file: tcpdump -r BIG -w OUT 'tcp port 80', BIG = {n} packets ({:.0} MB), median of {reps}\n\
         {:<24} {:>12} {:>14}\n{:<24} {:>12.1} {:>14}\n{:<24} {:>12.1} {:>14}\n\
         libpcap / netsift: {file_ratio:.2}x less CPU per packet on netsift's library; the output \
         files are {}\n",
        size as f64 / 1e6,
        "library",
        "CPU ns/pkt",
        "written",
        "libpcap 1.10.3",
        lib_ns,
        w_theirs,
        "netsift",
        net_ns,
        w_ours,
        if same { "identical" } else { "DIFFERENT" }
    );
    let _ = std::fs::remove_dir_all(&tmp);
    // Live.
    let app = App {
        name: "tcpdump",
        argv: vec![
            tcpdump.to_string(),
            "-i".into(),
            "{IF}".into(),
            "-B".into(),
            "8192".into(),
            "-w".into(),
            "/dev/null".into(),
        ],
    };
    let mut lab = Lab::new()?;
    lab.threaded_receive()?;
    let vias = [
        ("libpcap 1.10.3", Via::Libpcap),
        ("netsift", Via::Direct(&libdir)),
    ];
    let mut runs: [Vec<Run>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..cfg.reps {
        for (i, (_, via)) in vias.iter().enumerate() {
            runs[i].push(measure(&lab, &app, via, 1, cfg)?);
        }
    }
    let _ = writeln!(
        out,
        "live: tcpdump -i IF -B 8192 -w /dev/null, {} frames of the mix at {} frames/s, median of {}\n\
         {:<24} {:>10} {:>8} {:>12}",
        cfg.count, cfg.rate, cfg.reps, "library", "captured", "dropped", "CPU ns/pkt"
    );
    let mut cpu = Vec::new();
    for ((name, _), r) in vias.iter().zip(runs) {
        let r = median(r, |r| ns(r.cpu, r.sent));
        let c = ns(r.cpu, r.sent);
        cpu.push(c);
        let _ = writeln!(
            out,
            "{name:<24} {:>10} {:>8} {c:>12.1}",
            r.captured, r.dropped
        );
    }
    let live_ratio = cpu[0] / cpu[1];
    let _ = std::fs::remove_dir_all(&libdir);
    let _ = writeln!(
        out,
        "libpcap / netsift: {live_ratio:.2}x less CPU per packet on netsift's library\n\n\
         Goal: at least 1.5x less CPU per packet on netsift's library, file and live (this run: \
         file {file_ratio:.2}x, live {live_ratio:.2}x). {:.0} s.",
        t.elapsed().as_secs_f64()
    );
    Ok(out)
}
