//! `netsift flow -i IFACE` on a veth pair in a namespace of the test's own: the `device` source
//! captures live, two flows share it, their counters equal libpcap's verdicts on the frames
//! sent, and SIGINT ends the run with the report.
//!
//! Needs root and iproute2 (`scripts/test` installs them).

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::Duration;

use netsift_testkit::oracle;

mod common;
use common::{BIN, frames, lab, send};

#[test]
fn flows_count_live_traffic_like_libpcap() {
    let lab = lab();
    let frames = frames();
    let (udp, tcp) = ("udp", "tcp");
    let mut child = lab
        .command(BIN)
        .args([
            "flow",
            "-i",
            lab.b.as_str(),
            &format!("(bpf,\"{udp}\") -> (packetcount,,8)"),
            &format!("(bpf,\"{tcp}\") -> (packetcount,,8)"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn netsift flow");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    err.read_line(&mut line).expect("banner");
    assert!(
        line.contains("flow(s) running"),
        "unexpected first line: {line:?}"
    );
    send(&lab, &frames);
    std::thread::sleep(Duration::from_millis(400));
    // SAFETY: kill(2) on the child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("stdout");
    let mut rest = String::new();
    err.read_to_string(&mut rest).expect("stderr");
    let status = child.wait().expect("wait");
    assert!(status.success(), "flow exited with {status}: {rest}");
    let count = |expr: &str| {
        let prog = oracle::compile(1, 262_144, expr, true).expect("libpcap compiles");
        frames
            .iter()
            .filter(|f| oracle::filter(&prog, f, f.len() as u32).unwrap_or(0) > 0)
            .count()
    };
    let (want_udp, want_tcp) = (count(udp), count(tcp));
    assert!(want_udp > 0 && want_tcp > 0);
    for (i, want) in [(1, want_udp), (2, want_tcp)] {
        let needle = format!("packetcount#{}: {want} packets", if i == 1 { 2 } else { 4 });
        assert!(out.contains(&needle), "flow {i}: no `{needle}` in\n{out}");
    }
    // One device instance serves both flows.
    assert_eq!(out.matches("delivered").count(), 2, "{out}");
    println!(
        "live flows: {} frames sent, {want_udp} `{udp}` and {want_tcp} `{tcp}` counted",
        frames.len()
    );
}
