//! Debian's tcpdump captures live on netsift's libpcap through `netsiftd`: in a network
//! namespace of its own with a veth pair and a `netsiftd` listening on a socket of the test's,
//! `NETSIFT_SOCKET=… tcpdump -i nsb -c N -n -t -e EXPR` opens a flow of the daemon, has the
//! daemon run the filter (`(device,"nsb") -> (bpf,"EXPR")`, in its log) and prints, for the
//! frames sent on the other end, exactly what the real tcpdump prints when it reads those frames
//! from a file. With `NETSIFT_PCAP_DIRECT=1` the same run captures directly (the daemon sees no
//! flow). Two copies with the same filter read one IBuf of the daemon, each all its packets.
//! When the daemon goes away, tcpdump stops with an error instead of waiting forever.
//!
//! Needs root (namespaces, `CAP_NET_RAW`), the `ip` command and `netsiftd`
//! (`cargo build -p netsift-daemon`).

mod common;

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::Proc;

use netsift_testkit::netns::Lab;

/// 30 UDP frames to port 7777 among other traffic, DNS included ([`common::frames`]).
fn frames() -> Vec<Vec<u8>> {
    common::frames(30, 5, 32, true)
}

const FILTER: &str = "udp port 7777";
const COUNT: usize = 30;

/// What the real tcpdump prints for `frames` read from a file with the same flags.
fn expected(frames: &[Vec<u8>], _tag: &str) -> Vec<String> {
    netsift_testkit::reference::tcpdump_lines(
        common::tcpdump(),
        frames,
        &["-n", "-t", "-e", FILTER],
    )
}

/// A lab with `netsiftd -v` listening on a socket of the test's inside the namespace.
struct Setup {
    lab: Lab,
    daemon: Proc,
    socket: PathBuf,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        common::tcpdump();
        let lab =
            Lab::new().unwrap_or_else(|e| panic!("cannot create a test network namespace: {e}"));
        let socket =
            std::env::temp_dir().join(format!("netsift-pcap-{tag}-{}.sock", std::process::id()));
        let daemon = common::start_netsiftd(&lab, &socket);
        Setup {
            lab,
            daemon,
            socket,
        }
    }

    /// Starts `tcpdump -i nsb -n -t -e [-c N] EXPR` on netsift's libpcap, with NETSIFT_SOCKET
    /// pointing at the daemon (and NETSIFT_PCAP_DIRECT=1 if `direct`); returns once it listens.
    fn tcpdump(&self, count: Option<usize>, direct: bool) -> Proc {
        let mut cmd = self.lab.command("tcpdump");
        cmd.env("LD_LIBRARY_PATH", common::lib_dir())
            .env("NETSIFT_SOCKET", &self.socket)
            .env_remove("NETSIFT_PCAP_DIRECT");
        if direct {
            cmd.env("NETSIFT_PCAP_DIRECT", "1");
        }
        cmd.args(["-i", &self.lab.b, "-n", "-t", "-e"]);
        if let Some(n) = count {
            cmd.args(["-c", &n.to_string()]);
        }
        cmd.arg(FILTER);
        let (tx, rx) = mpsc::channel();
        let mut p = Proc::spawn(cmd, "listening on", tx);
        if rx.recv_timeout(Duration::from_secs(20)).is_err() {
            p.kill();
            panic!(
                "tcpdump did not start: {}\nnetsiftd: {}",
                p.stderr(),
                self.daemon.stderr()
            );
        }
        p
    }

    fn send(&self, frames: &[Vec<u8>]) {
        self.lab.send(frames, 2_000);
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.daemon.kill();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// tcpdump -c COUNT on the frames: its output lines and standard error, once it exited.
fn capture(setup: &Setup, direct: bool, frames: &[Vec<u8>]) -> (Vec<String>, String) {
    let mut td = setup.tcpdump(Some(COUNT), direct);
    setup.send(frames);
    let status = td.wait(Duration::from_secs(20));
    let err = td.stderr();
    let out = td.stdout();
    let status = status.unwrap_or_else(|| {
        td.kill();
        panic!(
            "tcpdump -c {COUNT} did not finish: {err}\n{}\nnetsiftd: {}",
            td.stdout(),
            setup.daemon.stderr()
        )
    });
    assert!(
        status.success(),
        "tcpdump failed ({status}): {err}\nnetsiftd: {}",
        setup.daemon.stderr()
    );
    (out.lines().map(str::to_string).collect(), err)
}

#[test]
fn tcpdump_captures_through_netsiftd() {
    let setup = Setup::new("through");
    let frames = frames();
    let want = expected(&frames, "through");
    assert_eq!(want.len(), COUNT, "the file run: {want:?}");
    let (got, err) = capture(&setup, false, &frames);
    let log = setup.daemon.stderr();
    println!(
        "through netsiftd: sent {} frames, tcpdump printed {} lines, {} expected",
        frames.len(),
        got.len(),
        want.len()
    );
    println!("tcpdump:\n{err}netsiftd -v:\n{log}");
    assert_eq!(got, want, "stderr: {err}\nnetsiftd: {log}");
    assert!(
        err.contains(&format!(
            "listening on {}, link-type EN10MB (Ethernet), snapshot length 262144 bytes",
            setup.lab.b
        )),
        "{err}"
    );
    assert!(err.contains(&format!("{COUNT} packets captured")), "{err}");
    // The daemon ran the filter: the flow tcpdump ended up with is the filtered one.
    let flow = format!(r#"(device,"{}") -> (bpf,"{FILTER}")"#, setup.lab.b);
    assert!(
        log.lines()
            .any(|l| l.contains(": flow ") && l.ends_with(&flow)),
        "netsiftd did not log the flow {flow}: {log}"
    );
    // ps_recv counts what the daemon's filter accepted: the 30 frames, not the 78 sent.
    let received = err
        .lines()
        .find_map(|l| l.strip_suffix(" packets received by filter"))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no `packets received by filter` line: {err}"));
    assert!(
        (COUNT..frames.len()).contains(&received),
        "received {received}: {err}"
    );
    // tcpdump's flows were closed when it exited.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !setup.daemon.stderr().contains(") gone: closed flows") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = setup.daemon.stderr();
    assert!(log.contains(") gone: closed flows"), "{log}");
}

#[test]
fn two_tcpdumps_with_one_filter_share_the_daemons_index_buffer() {
    let setup = Setup::new("share");
    let frames = frames();
    let want = expected(&frames, "share");
    let mut one = setup.tcpdump(Some(COUNT), false);
    let mut two = setup.tcpdump(Some(COUNT), false);
    setup.send(&frames);
    for td in [&mut one, &mut two] {
        let status = td.wait(Duration::from_secs(20));
        assert!(
            status.is_some_and(|s| s.success()),
            "tcpdump: {status:?} {}\nnetsiftd: {}",
            td.stderr(),
            setup.daemon.stderr()
        );
        let got: Vec<String> = td.stdout().lines().map(str::to_string).collect();
        assert_eq!(got, want, "stderr: {}", td.stderr());
    }
    // The second copy's flow reads the first one's IBuf: one entry per packet for both.
    let log = setup.daemon.stderr();
    assert!(
        log.lines()
            .any(|l| l.contains("reads the IBuf of flow") && l.ends_with("(share)")),
        "{log}"
    );
}

#[test]
fn tcpdump_captures_directly_with_netsift_pcap_direct() {
    let setup = Setup::new("direct");
    let frames = frames();
    let want = expected(&frames, "direct");
    let (got, err) = capture(&setup, true, &frames);
    let log = setup.daemon.stderr();
    assert_eq!(got, want, "stderr: {err}\nnetsiftd: {log}");
    assert!(err.contains(&format!("{COUNT} packets captured")), "{err}");
    assert!(
        !log.contains("connection"),
        "NETSIFT_PCAP_DIRECT=1, yet tcpdump went to netsiftd: {log}"
    );
}

#[test]
fn tcpdump_stops_when_netsiftd_goes_away() {
    let mut setup = Setup::new("gone");
    let mut td = setup.tcpdump(None, false);
    // Make sure the flow is open before the daemon goes.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !setup.daemon.stderr().contains("(bpf,") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    setup.daemon.kill();
    let status = td.wait(Duration::from_secs(10));
    let err = td.stderr();
    let status = status.unwrap_or_else(|| {
        td.kill();
        panic!("tcpdump kept waiting after netsiftd was killed: {err}")
    });
    assert!(!status.success(), "{status}: {err}");
    assert!(err.contains("netsiftd closed the flow"), "{err}");
}

#[test]
fn tcpdump_reports_a_flow_netsiftd_refuses() {
    let setup = Setup::new("refused");
    let out = setup
        .lab
        .command("tcpdump")
        .env("LD_LIBRARY_PATH", common::lib_dir())
        .env("NETSIFT_SOCKET", &setup.socket)
        .env_remove("NETSIFT_PCAP_DIRECT")
        .args(["-i", "nsnoif9", "-c", "1", "-n"])
        .output()
        .expect("run tcpdump");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    // NETSIFT_SOCKET named the daemon: its refusal is the error, not a silent direct capture.
    assert!(
        err.contains("No such device exists")
            && err.contains("netsiftd refused the capture")
            && err.contains("nsnoif9"),
        "{err}"
    );
}
