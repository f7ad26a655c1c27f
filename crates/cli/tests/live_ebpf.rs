//! `netsift capture -i IFACE --engine ebpf [--xdp]` on a veth pair in a namespace of the test's
//! own: the filter runs as an eBPF socket filter on the AF_PACKET socket (and as an XDP program
//! dropping what it rejects at the driver); the packets written are exactly those libpcap's
//! verdict accepts for the same bytes, and the counts agree on both sides: frames sent, frames
//! the socket received (its kernel statistics), frames XDP let through (seen by a second,
//! unfiltered capture), and the XDP program is gone after Ctrl-C.
//!
//! Needs root and iproute2 (`scripts/test` installs it).

use std::io::{BufRead, BufReader};
use std::process::Child;

use netsift_testkit::netns::Lab;
use netsift_testkit::oracle;

mod common;
use common::{BIN, frames, lab, read_all, send, start_capture, stop, summary, tmp};

fn is_tagged(f: &[u8]) -> bool {
    matches!(f[12..14], [0x81, 0x00] | [0x88, 0xa8])
}

/// The reference beside an eBPF capture: everything arriving on `b`, with classic BPF, written
/// to `path`.
fn capture_all(lab: &Lab, path: &std::path::Path) -> (Child, BufReader<std::process::ChildStderr>) {
    let args = ["-i", &lab.b, "-Q", "in", "--engine", "bpf", "-w"];
    let mut args: Vec<&str> = args.to_vec();
    args.push(path.to_str().unwrap());
    let (child, _, err) = start_capture(lab, &args);
    (child, err)
}

/// libpcap's verdicts on the frames for `filter` (Ethernet, snap length 262144).
fn libpcap(frames: &[Vec<u8>], filter: &str) -> Vec<u32> {
    let prog = oracle::compile(1, 262_144, filter, true).expect("libpcap compiles the filter");
    frames
        .iter()
        .map(|f| oracle::filter(&prog, f, f.len() as u32).expect("libpcap runs"))
        .collect()
}

/// The frames libpcap accepts, cut to its snap length, as a capture file holds them.
fn accepted(frames: &[Vec<u8>], verdicts: &[u32]) -> Vec<(Vec<u8>, u32)> {
    frames
        .iter()
        .zip(verdicts)
        .filter(|(_, r)| **r > 0)
        .map(|(f, &r)| (f[..f.len().min(r as usize)].to_vec(), f.len() as u32))
        .collect()
}

fn xdp_attached(lab: &Lab) -> bool {
    lab.ip(&["link", "show", "dev", &lab.b])
        .expect("ip link show")
        .contains("xdp")
}

#[test]
fn socket_filter_captures_what_libpcap_accepts() {
    let lab = lab();
    let frames = frames();
    for (i, filter) in [
        "udp",
        "vlan and udp port 514",
        "tcp port 80 or arp",
        "not ip",
        "ip[2:2] > 200 and tcp",
        "ip and len > 100",
    ]
    .iter()
    .enumerate()
    {
        let out = tmp(&format!("sock{i}.pcap"));
        let (child, banner, err) = start_capture(
            &lab,
            &[
                "-i",
                &lab.b,
                "--engine",
                "ebpf",
                "-w",
                out.to_str().unwrap(),
                filter,
            ],
        );
        assert!(banner.contains("eBPF socket filter on"), "{banner}");
        send(&lab, &frames);
        let text = stop(child, err);
        let verdicts = libpcap(&frames, filter);
        let expected = accepted(&frames, &verdicts);
        let got = read_all(&out);
        assert_eq!(
            got.len(),
            expected.len(),
            "`{filter}`: wrote {} packets, libpcap accepts {}",
            got.len(),
            expected.len()
        );
        assert!(got == expected, "`{filter}`: packets differ from libpcap's");
        assert_eq!(summary(&text, "packets captured"), expected.len() as u64);
        assert_eq!(summary(&text, "packets dropped by kernel"), 0, "{text}");
        // The socket filter passes what it accepts, and VLAN-tagged frames whole (the kernel
        // holds their tag outside the frame; the filter in user space judges them).
        let tagged_rejected = frames
            .iter()
            .zip(&verdicts)
            .filter(|(f, r)| is_tagged(f) && **r == 0)
            .count();
        let received = summary(&text, "packets received by filter");
        assert_eq!(
            received,
            (expected.len() + tagged_rejected) as u64,
            "`{filter}`: {text}"
        );
        println!(
            "socket filter `{filter}`: {} sent, {received} through the socket filter \
             ({tagged_rejected} tagged and rejected in user space), {} written, as libpcap",
            frames.len(),
            got.len()
        );
    }
}

#[test]
fn xdp_drops_what_the_filter_rejects_and_is_detached_on_exit() {
    let lab = lab();
    let frames = frames();
    for mode in ["generic", "native"] {
        for filter in ["udp or arp", "tcp port 80 or vlan 7"] {
            let tag = format!("xdp-{mode}-{}", filter.len());
            let out = tmp(&format!("{tag}.pcap"));
            let all = tmp(&format!("{tag}-all.pcap"));
            let (child, banner, mut err) = start_capture(
                &lab,
                &[
                    "-i",
                    &lab.b,
                    "--engine",
                    "ebpf",
                    "--xdp",
                    "--xdp-mode",
                    mode,
                    "-w",
                    out.to_str().unwrap(),
                    filter,
                ],
            );
            assert!(banner.contains("XDP filter on"), "{banner}");
            let mut warning = String::new();
            err.read_line(&mut warning).expect("warning");
            assert!(warning.contains("warning: --xdp drops"), "{warning}");
            assert!(xdp_attached(&lab), "no XDP program on {}", lab.b);
            // A second capture without a filter sees what XDP lets through.
            let (plain, plain_err) = capture_all(&lab, &all);
            send(&lab, &frames);
            let plain_text = stop(plain, plain_err);
            let text = stop(child, err);
            assert!(!xdp_attached(&lab), "XDP still attached after SIGINT");

            let verdicts = libpcap(&frames, filter);
            let expected = accepted(&frames, &verdicts);
            let got = read_all(&out);
            assert!(
                got == expected,
                "{tag} `{filter}`: wrote {} packets, libpcap accepts {}",
                got.len(),
                expected.len()
            );
            // XDP sees the tag in the frame (veth), so it passes exactly what libpcap accepts.
            let passed: Vec<(Vec<u8>, u32)> = frames
                .iter()
                .zip(&verdicts)
                .filter(|(_, r)| **r > 0)
                .map(|(f, _)| (f.clone(), f.len() as u32))
                .collect();
            let seen = read_all(&all);
            assert!(
                seen == passed,
                "{tag} `{filter}`: the unfiltered capture saw {} frames, XDP should pass {}",
                seen.len(),
                passed.len()
            );
            assert_eq!(
                summary(&plain_text, "packets captured"),
                passed.len() as u64
            );
            assert_eq!(summary(&text, "packets captured"), expected.len() as u64);
            // Rejected frames (tagged ones too) never reached the socket.
            assert_eq!(
                summary(&text, "packets received by filter"),
                expected.len() as u64,
                "{text}"
            );
            assert_eq!(summary(&text, "packets dropped by kernel"), 0, "{text}");
            println!(
                "XDP {mode} `{filter}`: {} sent, {} dropped by XDP, {} passed (seen by the \
                 unfiltered capture), {} written, as libpcap",
                frames.len(),
                frames.len() - passed.len(),
                seen.len(),
                got.len()
            );
        }
    }
    // After the runs, nothing is dropped any more.
    let all = tmp("after.pcap");
    let (plain, plain_err) = capture_all(&lab, &all);
    send(&lab, &frames);
    stop(plain, plain_err);
    assert_eq!(read_all(&all).len(), frames.len());
}

#[test]
fn ebpf_capture_errors_are_clear() {
    for (args, want) in [
        (&["-i", "lo", "--xdp", "tcp"][..], "needs --engine ebpf"),
        (
            &["-i", "lo", "--engine", "ebpf", "--xdp"][..],
            "--xdp needs a filter expression",
        ),
        (
            &["-i", "lo", "--engine", "ebpf", "--source", "afxdp", "tcp"][..],
            "use --source afpacket",
        ),
    ] {
        let o = std::process::Command::new(BIN)
            .arg("capture")
            .args(args)
            .output()
            .expect("run");
        assert!(!o.status.success());
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(want), "{args:?}: {e}");
    }
}
