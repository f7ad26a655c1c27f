//! Debian's capture tools capture live on netsift's libpcap as on libpcap 1.10.3, in a network
//! namespace of the test's with a veth pair (frames sent on one end, captured on the other):
//!
//! - `dumpcap -i IF -f EXPR -c N -w F` writes the same packets;
//! - `tcpdump -i any -c N -n -t -e EXPR` prints the same lines (cooked headers, both ends of
//!   the pair);
//! - `ngrep -q -d IF -n N '' EXPR` prints the same;
//! - `tcpreplay -i IF F` (reading F through the library) sends the same frames;
//! - through `netsiftd`, tcpdump, dumpcap and ngrep at once, each with its own filter, each
//!   get exactly what libpcap gives them alone.
//!
//! Needs root, the `ip` command, `netsiftd` (`cargo build -p netsift-daemon`) and the tools
//! (installed with apt-get if missing).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use common::Proc;
use netsift_capture::{CaptureReader, LinkType, PacketRef, PcapWriter, Precision, Timestamp};
use netsift_testkit::netns::Lab;

/// 30 UDP frames to port 7777, 30 TCP SYNs, 6 ICMP echo requests and 6 DNS queries
/// ([`common::frames`] without its VLAN-tagged frames: libpcap filters live frames in the
/// kernel, which sees them without the tag it took out, while netsift's direct path filters
/// them with the tag put back, as in a file; see docs/libpcap.md).
fn frames() -> Vec<Vec<u8>> {
    common::frames(30, 5, 32, true)
        .into_iter()
        .filter(|f| f.get(12..14) != Some(&[0x81, 0x00]))
        .collect()
}

fn tools() {
    common::tcpdump();
    common::ensure("dumpcap", "wireshark-common");
    common::ensure("ngrep", "ngrep");
    common::ensure("tcpreplay", "tcpreplay");
}

/// A scratch file path.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("netsift-tools-live");
    std::fs::create_dir_all(&d).unwrap();
    d.join(format!("{name}-{}", std::process::id()))
}

/// Writes `frames` to a pcap file.
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::new(
        std::fs::File::create(path).unwrap(),
        LinkType::ETHERNET,
        262_144,
        Precision::Micro,
    )
    .unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PacketRef::new(
            f,
            Timestamp::new(i as i64, 0),
            LinkType::ETHERNET,
        ))
        .unwrap();
    }
    w.flush().unwrap();
}

/// The packets of a capture file (any format), as bytes.
fn packets(path: &Path) -> Vec<Vec<u8>> {
    let mut r =
        CaptureReader::open(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        v.push(p.unwrap().data.to_vec());
    }
    v
}

/// Which library a tool runs on.
#[derive(Clone, Copy, PartialEq)]
enum Lib {
    Libpcap,
    /// netsift's, capturing directly (AF_PACKET).
    Netsift,
    /// netsift's, through the daemon listening on the socket.
    Daemon,
}

/// Starts `args` in the lab's namespace on `lib`; waits until a line of its output contains
/// `marker`.
fn start(lab: &Lab, lib: Lib, socket: Option<&Path>, args: &[&str], marker: &'static str) -> Proc {
    let mut cmd = lab.command(args[0]);
    cmd.args(&args[1..]);
    match lib {
        Lib::Libpcap => {
            cmd.env_remove("LD_LIBRARY_PATH");
        }
        Lib::Netsift => {
            cmd.env("LD_LIBRARY_PATH", common::lib_dir())
                .env("NETSIFT_PCAP_DIRECT", "1");
        }
        Lib::Daemon => {
            cmd.env("LD_LIBRARY_PATH", common::lib_dir())
                .env("NETSIFT_SOCKET", socket.expect("the daemon's socket"));
        }
    }
    let (tx, rx) = mpsc::channel();
    let mut p = Proc::spawn(cmd, marker, tx);
    if rx.recv_timeout(Duration::from_secs(20)).is_err() {
        p.kill();
        panic!(
            "{} did not start: {}{}",
            args.join(" "),
            p.stderr(),
            p.stdout()
        );
    }
    // The capture is set up a moment after the tool says so.
    std::thread::sleep(Duration::from_millis(300));
    p
}

/// Waits for a tool that stops by itself (`-c N`).
fn finish(mut p: Proc, what: &str) -> (String, String) {
    let st = p.wait(Duration::from_secs(30));
    let (out, err) = (p.stdout(), p.stderr());
    let st = st.unwrap_or_else(|| panic!("{what} did not finish: {err}{out}"));
    assert!(st.success(), "{what} failed ({st}): {err}{out}");
    (out, err)
}

/// The captured part of a tool's output, without the lines that name the library or count
/// kernel drops (those may differ between any two runs).
fn body(s: &str) -> Vec<String> {
    s.lines()
        .filter(|l| !l.contains("dropped by kernel") && !l.contains("received by filter"))
        .map(str::to_string)
        .collect()
}

/// One run of each tool on `lib`: dumpcap's packets, tcpdump -i any's lines, ngrep's lines,
/// and the frames tcpreplay sent (captured by libpcap's tcpdump).
fn run_all(lab: &Lab, lib: Lib, frames: &[Vec<u8>], tag: &str) -> Vec<String> {
    let mut report = Vec::new();
    // dumpcap: UDP to 7777 (not the VLAN-tagged ones: 30).
    let out = scratch(&format!("dumpcap-{tag}.pcapng"));
    let out_s = out.to_str().unwrap();
    let p = start(
        lab,
        lib,
        None,
        &[
            "dumpcap",
            "-i",
            &lab.b,
            "-f",
            "udp port 7777",
            "-c",
            "30",
            "-w",
            out_s,
        ],
        "Capturing on",
    );
    lab.send(frames, 2_000);
    finish(p, &format!("dumpcap ({tag})"));
    let got = packets(&out);
    let _ = std::fs::remove_file(&out);
    report.push(format!("dumpcap: {} packets", got.len()));
    report.extend(got.iter().map(|p| format!("dumpcap packet {p:02x?}")));

    // tcpdump -i any: both ends of the pair see each frame (out on one, in on the other).
    let p = start(
        lab,
        lib,
        None,
        &["tcpdump", "-i", "any", "-c", "12", "-n", "-t", "-e", "icmp"],
        "listening on",
    );
    lab.send(frames, 2_000);
    let (o, e) = finish(p, &format!("tcpdump -i any ({tag})"));
    report.extend(body(&o).into_iter().map(|l| format!("tcpdump {l}")));
    report.extend(body(&e).into_iter().map(|l| format!("tcpdump stderr {l}")));

    // ngrep on one end: the UDP frames to 7777 (each has a payload; ngrep counts those).
    let p = start(
        lab,
        lib,
        None,
        &[
            "ngrep",
            "-l",
            "-q",
            "-d",
            &lab.b,
            "-n",
            "30",
            "",
            "udp port 7777",
        ],
        "filter:",
    );
    lab.send(frames, 2_000);
    let (o, _) = finish(p, &format!("ngrep ({tag})"));
    report.extend(body(&o).into_iter().map(|l| format!("ngrep {l}")));

    // tcpreplay from a file on one end, libpcap's tcpdump writing what arrives on the other.
    let file = scratch(&format!("replay-{tag}.pcap"));
    write_pcap(&file, frames);
    let seen = scratch(&format!("seen-{tag}.pcap"));
    let n = frames.len().to_string();
    let cap = start(
        lab,
        Lib::Libpcap,
        None,
        &[
            "tcpdump",
            "-i",
            &lab.b,
            "-c",
            &n,
            "-w",
            seen.to_str().unwrap(),
        ],
        "listening on",
    );
    let mut replay = lab.command("tcpreplay");
    replay
        .args(["-q", "-i", &lab.a, "--pps", "2000"])
        .arg(&file);
    if lib != Lib::Libpcap {
        replay.env("LD_LIBRARY_PATH", common::lib_dir());
    } else {
        replay.env_remove("LD_LIBRARY_PATH");
    }
    let r = replay.output().expect("run tcpreplay");
    assert!(
        r.status.success(),
        "tcpreplay failed: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    finish(cap, "tcpdump -w behind tcpreplay");
    let sent = packets(&seen);
    let _ = std::fs::remove_file(&seen);
    let _ = std::fs::remove_file(&file);
    report.push(format!("tcpreplay: {} frames arrived", sent.len()));
    assert_eq!(
        sent, frames,
        "tcpreplay ({tag}) did not send the file's frames"
    );
    report
}

#[test]
fn tools_capture_live_as_on_libpcap() {
    tools();
    let lab = Lab::new().unwrap_or_else(|e| panic!("cannot create a test network namespace: {e}"));
    let frames = frames();
    let theirs = run_all(&lab, Lib::Libpcap, &frames, "libpcap");
    let ours = run_all(&lab, Lib::Netsift, &frames, "netsift");
    println!(
        "live: dumpcap, tcpdump -i any, ngrep and tcpreplay: {} lines of output on each library",
        theirs.len()
    );
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(
            a, b,
            "netsift's libpcap (left) differs from libpcap (right)"
        );
    }
    assert_eq!(ours.len(), theirs.len(), "{ours:#?}\n{theirs:#?}");
    assert!(
        theirs.iter().any(|l| l == "dumpcap: 30 packets"),
        "{theirs:#?}"
    );
}

#[test]
fn three_tools_at_once_through_netsiftd() {
    tools();
    let lab = Lab::new().unwrap_or_else(|e| panic!("cannot create a test network namespace: {e}"));
    let socket = scratch("netsiftd.sock");
    let mut daemon = common::start_netsiftd(&lab, &socket);
    let frames = frames();
    // What each tool gets alone on libpcap, from a file of the frames.
    let file = scratch("three.pcap");
    write_pcap(&file, &frames);
    let alone = |args: &[&str]| -> String {
        let o = Command::new(args[0])
            .args(&args[1..])
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let f = file.to_str().unwrap();
    let want_tcpdump = alone(&["tcpdump", "-r", f, "-n", "-t", "-e", "udp port 7777"]);
    let want_ngrep = alone(&["ngrep", "-q", "-I", f, "", "icmp"]);
    let want_dumpcap = frames
        .iter()
        .filter(|p| p.get(12..14) == Some(&[0x08, 0x00]) && p.get(23) == Some(&6))
        .count();

    let sock = Some(socket.as_path());
    let dumpfile = scratch("three-dumpcap.pcapng");
    let t = start(
        &lab,
        Lib::Daemon,
        sock,
        &[
            "tcpdump",
            "-i",
            &lab.b,
            "-c",
            "30",
            "-n",
            "-t",
            "-e",
            "udp port 7777",
        ],
        "listening on",
    );
    let d = start(
        &lab,
        Lib::Daemon,
        sock,
        &[
            "dumpcap",
            "-i",
            &lab.b,
            "-f",
            "tcp",
            "-c",
            "30",
            "-w",
            dumpfile.to_str().unwrap(),
        ],
        "Capturing on",
    );
    let n = start(
        &lab,
        Lib::Daemon,
        sock,
        &["ngrep", "-l", "-q", "-d", &lab.b, "-n", "6", "", "icmp"],
        "filter:",
    );
    lab.send(&frames, 2_000);
    let (t_out, _) = finish(t, "tcpdump through netsiftd");
    finish(d, "dumpcap through netsiftd");
    let (n_out, _) = finish(n, "ngrep through netsiftd");
    let got_dumpcap = packets(&dumpfile);
    let _ = std::fs::remove_file(&dumpfile);
    let _ = std::fs::remove_file(&file);
    let log = daemon.stderr();
    daemon.kill();
    println!(
        "through netsiftd at once: tcpdump {} lines, dumpcap {} packets, ngrep {} lines",
        t_out.lines().count(),
        got_dumpcap.len(),
        n_out.lines().count()
    );
    assert_eq!(t_out, want_tcpdump, "tcpdump through netsiftd");
    let want_tcp: Vec<&Vec<u8>> = frames
        .iter()
        .filter(|p| p.get(12..14) == Some(&[0x08, 0x00]) && p.get(23) == Some(&6))
        .collect();
    assert_eq!(got_dumpcap.len(), want_dumpcap, "dumpcap through netsiftd");
    assert!(got_dumpcap.iter().eq(want_tcp), "dumpcap's packets");
    // ngrep's live banner names the interface; the packets are what it prints from the file.
    let packets_of = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| !l.starts_with("interface:") && !l.starts_with("input:"))
            .filter(|l| !l.starts_with("filter:") && !l.contains("received,"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        packets_of(&n_out),
        packets_of(&want_ngrep),
        "ngrep through netsiftd"
    );
    for (tool, expr) in [
        ("tcpdump", "udp port 7777"),
        ("ngrep", "icmp"),
        ("dumpcap", "tcp"),
    ] {
        assert!(
            log.contains(expr),
            "netsiftd's log does not show {tool}'s filter {expr:?}: {log}"
        );
    }
}
