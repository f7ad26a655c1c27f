//! Debian's tcpdump captures live on netsift's libpcap: in a network namespace of its own with a
//! veth pair, `tcpdump -i nsb -c N -n -t -e EXPR` (through netsift's AF_PACKET source, filter in
//! user space; `NETSIFT_PCAP_DIRECT=1`, so that a running netsiftd is not used) prints, for the
//! frames sent on the other end, exactly what the real tcpdump prints when it reads those frames
//! from a file.
//!
//! Needs root (namespaces, `CAP_NET_RAW`) and the `ip` command.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use netsift_testkit::netns::Lab;

/// 40 UDP frames to port 7777 among other traffic ([`common::frames`]).
fn frames() -> Vec<Vec<u8>> {
    common::frames(40, 7, 24, false)
}

const FILTER: &str = "udp port 7777";
const COUNT: usize = 40;

/// What the real tcpdump prints for `frames` read from a file with the same flags.
fn expected(frames: &[Vec<u8>]) -> Vec<String> {
    netsift_testkit::reference::tcpdump_lines(
        common::tcpdump(),
        frames,
        &["-n", "-t", "-e", FILTER],
    )
}

#[test]
fn tcpdump_captures_live_on_netsift_libpcap() {
    let lib = common::lib_dir().to_path_buf();
    common::tcpdump();
    let lab = Lab::new().unwrap_or_else(|e| panic!("cannot create a test network namespace: {e}"));
    let frames = frames();
    let want = expected(&frames);
    assert_eq!(want.len(), COUNT, "the file run: {want:?}");

    let mut child = lab
        .command("tcpdump")
        .env("LD_LIBRARY_PATH", &lib)
        // The direct path (AF_PACKET), even if a netsiftd runs on this machine (the daemon's
        // path has tests of its own: tcpdump_daemon.rs).
        .env("NETSIFT_PCAP_DIRECT", "1")
        .args([
            "-i",
            &lab.b,
            "-c",
            &COUNT.to_string(),
            "-n",
            "-t",
            "-e",
            FILTER,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tcpdump in the namespace");
    let mut stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap_or_default();
            if line.starts_with("listening on") {
                let _ = tx.send(());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    if rx.recv_timeout(Duration::from_secs(20)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("tcpdump did not start: {}", err_reader.join().unwrap());
    }
    lab.send(&frames, 2_000);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = err_reader.join().unwrap();
    let out = out_reader.join().unwrap();
    let status =
        status.unwrap_or_else(|| panic!("tcpdump -c {COUNT} did not finish: {err}\n{out}"));
    assert!(status.success(), "tcpdump failed ({status}): {err}");
    let got: Vec<&str> = out.lines().collect();
    println!(
        "live: sent {} frames, tcpdump on netsift's libpcap printed {} lines, {} expected",
        frames.len(),
        got.len(),
        want.len()
    );
    assert_eq!(got, want, "stderr: {err}");
    assert!(
        err.contains(&format!(
            "listening on {}, link-type EN10MB (Ethernet), snapshot length 262144 bytes",
            lab.b
        )),
        "{err}"
    );
    assert!(err.contains(&format!("{COUNT} packets captured")), "{err}");
}
