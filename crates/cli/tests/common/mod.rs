//! What the live capture tests share: the binary, a temporary directory, a namespace lab, the
//! test frames, and starting, stopping and reading captures.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use netsift_capture::CaptureReader;
use netsift_capture::generate::FrameBuilder;
use netsift_testkit::netns::Lab;

/// The `netsift` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_netsift");

/// A path in this test binary's own temporary directory.
pub fn tmp(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let test = exe.file_stem().and_then(|s| s.to_str()).unwrap_or("live");
    let d = std::env::temp_dir().join(format!("netsift-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A namespace with a veth pair, removed on drop.
pub fn lab() -> Lab {
    Lab::new().unwrap_or_else(|e| panic!("cannot create a test network namespace: {e}"))
}

/// Test frames: the synthetic mix plus VLAN-tagged (single and double) syslog frames.
pub fn frames() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = netsift_bench::workload::frames(3, 400)
        .into_iter()
        .map(|p| p.data)
        .collect();
    for i in 0..40u16 {
        let b = FrameBuilder::new()
            .ipv4([198, 18, 9, 9], [198, 18, 8, 8])
            .udp(3000 + i, 514)
            .payload(&[1; 40]);
        v.insert(
            (i as usize * 7) % v.len(),
            if i % 2 == 0 {
                b.vlan(7).build()
            } else {
                b.vlan_tag(0x88a8, 5).vlan(7).build()
            },
        );
    }
    v
}

/// SIGINT, then the rest of stderr (the exit status must be 0).
pub fn stop(mut child: Child, mut err: BufReader<std::process::ChildStderr>) -> String {
    std::thread::sleep(Duration::from_millis(400));
    // SAFETY: kill(2) on the child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    err.read_to_string(&mut rest).expect("stderr");
    let status = child.wait().expect("wait");
    assert!(status.success(), "capture exited with {status}: {rest}");
    rest
}

/// The number on the summary line of `text` ending with `what`.
pub fn summary(text: &str, what: &str) -> u64 {
    text.lines()
        .find(|l| l.ends_with(what))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no '{what}' line in {text:?}"))
}

/// Sends `frames` on the lab's sending end, paced and bounded.
pub fn send(lab: &Lab, frames: &[Vec<u8>]) {
    lab.send(frames, 20_000);
}

/// Every packet of a capture file, with its wire length.
pub fn read_all(path: &PathBuf) -> Vec<(Vec<u8>, u32)> {
    let mut r = CaptureReader::open(path).expect("written file");
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("packet");
        v.push((p.data.to_vec(), p.wire_len));
    }
    v
}

/// Starts `netsift capture ARGS` in the namespace; returns it with its banner and stderr.
pub fn start_capture(
    lab: &Lab,
    args: &[&str],
) -> (Child, String, BufReader<std::process::ChildStderr>) {
    let mut child = lab
        .command(BIN)
        .arg("capture")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn netsift capture");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    err.read_line(&mut line).expect("banner");
    if !line.contains("listening on") {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        let _ = child.kill();
        let _ = child.wait();
        panic!("netsift capture {args:?} did not start: {line}{rest}");
    }
    (child, line, err)
}
