//! One capture, many applications: three applications receive their flows from one `netsiftd`
//! on one veth interface in a namespace of the test's own —
//!
//! 1. Debian's `tcpdump` on netsift's libpcap (`NETSIFT_SOCKET` set: live capture through the
//!    daemon), filter `udp`;
//! 2. `netsift flow --daemon` counting `tcp` with a `packetcount` filter;
//! 3. this test process, a Rust client (`netsift_daemon::client`), reading `icmp or arp or ip6`.
//!
//! Each receives exactly its packets (tcpdump's lines equal what the real tcpdump prints for the
//! same frames read from a file; the counts and bytes equal libpcap's verdicts). Then tcpdump is
//! killed (SIGKILL): the daemon closes its flow and frees its group's buffers (its memory files
//! and mappings go), and the other two keep receiving exactly their packets of a second round.
//!
//! Needs root, iproute2 and tcpdump (`scripts/test` installs them); builds `netsiftd` and
//! netsift's `libpcap.so` (release) itself.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use netsift_daemon::client::{Client, OpenOptions};
use netsift_testkit::oracle;

mod common;
use common::{BIN, frames, lab, send, tmp};

/// `netsiftd` and netsift's `libpcap.so`, built (release) for this test: `cargo test` builds
/// the binaries of the package it tests, but does not refresh a cdylib's copy in the target
/// directory — a stale library there would quietly capture without the daemon.
fn built() -> (PathBuf, PathBuf) {
    let release = netsift_testkit::build::release(&["netsift-pcap", "netsift-daemon"]);
    let (daemon, so) = (release.join("netsiftd"), release.join("libpcap.so"));
    assert!(
        daemon.is_file() && so.is_file(),
        "{} or {} missing",
        daemon.display(),
        so.display()
    );
    (daemon, so)
}

/// Memory files a process holds open and has mapped.
fn memfds_of(pid: u32) -> (usize, usize) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the daemon's fds")
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|l| l.to_string_lossy().starts_with("/memfd:netsift"))
        })
        .count();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .expect("the daemon's maps")
        .lines()
        .filter(|l| l.contains("memfd:netsift"))
        .count();
    (fds, maps)
}

/// Lines of a child's stream, as they come.
fn lines(r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

fn wait_for_line(rx: &mpsc::Receiver<String>, what: &str, who: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(100)) {
            let hit = l.contains(what);
            seen.push(l);
            if hit {
                return seen;
            }
        }
    }
    panic!("{who}: no line with `{what}`; saw {seen:#?}");
}

fn take_lines(rx: &mpsc::Receiver<String>, n: usize, who: &str) -> Vec<String> {
    let mut v = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while v.len() < n && Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(100)) {
            v.push(l);
        }
    }
    assert_eq!(v.len(), n, "{who}: lines so far {v:#?}");
    // Nothing more than that.
    if let Ok(l) = rx.recv_timeout(Duration::from_millis(300)) {
        panic!("{who}: an extra line {l:?}");
    }
    v
}

/// What the real tcpdump prints reading `frames` from a file with `expr`.
fn reference_lines(frames: &[Vec<u8>], expr: &str) -> Vec<String> {
    netsift_testkit::reference::tcpdump_lines("/usr/bin/tcpdump", frames, &["-n", "-t", "-e", expr])
}

fn accepted(frames: &[Vec<u8>], expr: &str) -> Vec<Vec<u8>> {
    let prog = oracle::compile(1, 262_144, expr, true).expect("libpcap compiles");
    frames
        .iter()
        .filter(|f| oracle::filter(&prog, f, f.len() as u32).unwrap_or(0) > 0)
        .cloned()
        .collect()
}

/// Read `n` packets from a flow (and check that no more come).
fn read_flow(flow: &mut netsift_daemon::Flow, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < n && Instant::now() < deadline {
        let r = flow.reader();
        r.wait_for(1, Duration::from_millis(50));
        while let Some(p) = r.next() {
            got.push(p.data.to_vec());
        }
        r.release();
    }
    std::thread::sleep(Duration::from_millis(200));
    while let Some(p) = flow.reader().next() {
        got.push(p.data.to_vec());
    }
    flow.reader().release();
    got
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn three_applications_share_one_daemon_and_a_killed_one_is_cleaned_up() {
    let (netsiftd, so) = built();
    let libdir = tmp("libpcap");
    std::fs::create_dir_all(&libdir).unwrap();
    std::fs::copy(&so, libdir.join("libpcap.so.0.8")).unwrap();
    let lab = lab();
    let socket = tmp("netsiftd.sock");
    // Every connection its own group: the dead application's PBuf must go too.
    let mut daemon = Killed(
        lab.command(&netsiftd.display().to_string())
            .arg("--socket")
            .arg(&socket)
            .args(["--group-by", "connection", "-v"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start netsiftd"),
    );
    let dlog = lines(daemon.0.stderr.take().unwrap());
    wait_for_line(&dlog, "listening on", "netsiftd");
    let dpid = daemon.0.id();

    // 1. tcpdump on netsift's libpcap, through the daemon.
    let mut tcpdump = Killed(
        lab.command("/usr/bin/tcpdump")
            .args(["-i", lab.b.as_str(), "-n", "-t", "-e", "-l", "udp"])
            .env("LD_LIBRARY_PATH", &libdir)
            .env("NETSIFT_SOCKET", &socket)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tcpdump"),
    );
    let t_out = lines(tcpdump.0.stdout.take().unwrap());
    let t_err = lines(tcpdump.0.stderr.take().unwrap());
    wait_for_line(&t_err, "listening on", "tcpdump");
    // 2. netsift flow --daemon.
    let mut counter = lab
        .command(BIN)
        .arg("flow")
        .arg(format!("--daemon={}", socket.display()))
        .args(["-i", lab.b.as_str(), "(bpf,\"tcp\") -> (packetcount,,8)"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start netsift flow --daemon");
    let c_err = lines(counter.stderr.take().unwrap());
    wait_for_line(&c_err, "running in netsiftd", "netsift flow");
    // 3. This process.
    let client = Client::connect(&socket).expect("connect");
    let mine = "icmp or arp or ip6";
    let mut flow = client
        .open(
            &format!("(device,\"{}\") -> (bpf,\"{mine}\")", lab.b),
            &OpenOptions::default(),
        )
        .expect("open");
    // The daemon logged three flows, tcpdump's filter running in the daemon.
    let log = wait_for_line(&dlog, mine, "netsiftd");
    let log = log.join("\n");
    assert!(
        log.contains("(bpf,\"udp\")"),
        "tcpdump's filter is not in the daemon:\n{log}"
    );
    assert!(log.contains("(bpf,\"tcp\")"), "{log}");

    let frames = frames();
    let (want_udp, want_tcp, want_mine) = (
        reference_lines(&frames, "udp"),
        accepted(&frames, "tcp"),
        accepted(&frames, mine),
    );
    assert!(!want_udp.is_empty() && !want_tcp.is_empty() && !want_mine.is_empty());

    // Round 1: everyone gets exactly their packets.
    send(&lab, &frames);
    assert_eq!(take_lines(&t_out, want_udp.len(), "tcpdump"), want_udp);
    assert_eq!(read_flow(&mut flow, want_mine.len()), want_mine);

    // Kill tcpdump: its flow and its group's buffers go; the others are untouched.
    let before = memfds_of(dpid);
    tcpdump.0.kill().unwrap();
    tcpdump.0.wait().unwrap();
    wait_for_line(&dlog, "gone: closed flows", "netsiftd");
    let after = memfds_of(dpid);
    // PBuf, IBuf and control page: three memory files, three mappings.
    assert_eq!(
        (before.0 - after.0, before.1 - after.1),
        (3, 3),
        "the daemon's memory files (open, mapped) before {before:?}, after {after:?}"
    );

    // Round 2: the survivors still get exactly their packets.
    send(&lab, &frames);
    assert_eq!(read_flow(&mut flow, want_mine.len()), want_mine);
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on the child's pid.
    unsafe { libc::kill(counter.id() as i32, libc::SIGINT) };
    let mut out = String::new();
    counter
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = counter.wait().unwrap();
    assert!(status.success(), "netsift flow --daemon: {status}");
    let needle = format!("packetcount: {} packets", 2 * want_tcp.len());
    assert!(out.contains(&needle), "no `{needle}` in\n{out}");
    assert!(
        out.contains(&format!("delivered {} packets", 2 * want_tcp.len())),
        "{out}"
    );
    drop(flow);
    drop(client);
    println!(
        "three applications: {} frames × 2 rounds; tcpdump {} lines (round 1), netsift flow {} \
         tcp, Rust client {} per round; tcpdump killed: daemon memfds {before:?} -> {after:?}",
        frames.len(),
        want_udp.len(),
        2 * want_tcp.len(),
        want_mine.len()
    );
    // SAFETY: kill(2) on the child's pid.
    unsafe { libc::kill(dpid as i32, libc::SIGINT) };
    let st = daemon.0.wait().unwrap();
    assert!(st.success(), "netsiftd exited with {st}");
}
