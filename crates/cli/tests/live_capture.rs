//! `netsift capture` and `netsift gen` on a veth pair in a namespace of the test's own: the
//! packets written are exactly those libpcap's verdict accepts for the same bytes, files are
//! readable by tcpdump and by netsift, the summary's counters are right, and SIGINT ends a
//! capture cleanly.
//!
//! Needs root and iproute2; tcpdump for the readability check (`scripts/test` installs both).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use netsift_capture::live::{AfPacket, AfPacketConfig, Flow, Source};
use netsift_testkit::netns::Lab;
use netsift_testkit::oracle;

mod common;
use common::{BIN, frames, lab, read_all, send, start_capture, stop, summary, tmp};

/// Runs one capture with `filter` through `extra` flags and checks it against libpcap.
fn capture_matches_libpcap(lab: &Lab, frames: &[Vec<u8>], extra: &[&str], filter: &str, tag: &str) {
    let out = tmp(&format!("{tag}.pcap"));
    let mut args = vec!["-i", lab.b.as_str(), "-w", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push(filter);
    let (child, _, err) = start_capture(lab, &args);
    send(lab, frames);
    let text = stop(child, err);
    let prog = oracle::compile(1, 262_144, filter, true).expect("libpcap compiles the filter");
    let expected: Vec<(Vec<u8>, u32)> = frames
        .iter()
        .filter_map(|f| {
            let r = oracle::filter(&prog, f, f.len() as u32).expect("libpcap runs");
            (r > 0).then(|| (f[..f.len().min(r as usize)].to_vec(), f.len() as u32))
        })
        .collect();
    let got = read_all(&out);
    assert_eq!(
        got.len(),
        expected.len(),
        "{tag} `{filter}`: wrote {} packets, libpcap accepts {}",
        got.len(),
        expected.len()
    );
    assert!(
        got == expected,
        "{tag} `{filter}`: packets differ from libpcap's choice"
    );
    assert_eq!(
        summary(&text, "packets captured"),
        expected.len() as u64,
        "{text}"
    );
    assert_eq!(summary(&text, "packets dropped by kernel"), 0, "{text}");
    let received = summary(&text, "packets received by filter");
    let kernel_prefilter = text.contains("kernel pre-filter on") || tag.contains("auto");
    if extra.contains(&"bpf") || extra.contains(&"afxdp") {
        // No kernel pre-filter: every frame reaches the filter.
        assert_eq!(received, frames.len() as u64, "{tag}: {text}");
    } else if kernel_prefilter {
        // The kernel passes what the filter accepts plus every VLAN-tagged frame.
        let tagged_rejected = frames
            .iter()
            .filter(|f| matches!(f[12..14], [0x81, 0x00] | [0x88, 0xa8]))
            .filter(|f| oracle::filter(&prog, f, f.len() as u32) == Some(0))
            .count();
        assert_eq!(
            received,
            (expected.len() + tagged_rejected) as u64,
            "{tag}: {text}"
        );
    }
    // tcpdump reads the file and sees as many packets.
    if let Ok(o) = Command::new("tcpdump")
        .args(["-n", "-r", out.to_str().unwrap()])
        .output()
    {
        assert!(
            o.status.success(),
            "tcpdump cannot read {}: {}",
            out.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).lines().count(),
            expected.len()
        );
    }
    println!(
        "{tag} `{filter}`: {} of {} packets, as libpcap; {received} received by filter",
        got.len(),
        frames.len()
    );
}

#[test]
fn capture_writes_what_libpcap_accepts() {
    let lab = lab();
    let frames = frames();
    for (i, f) in [
        "udp",
        "vlan and udp port 514",
        "tcp port 80 or arp",
        "not ip",
        "ip[2:2] > 200 and tcp",
    ]
    .iter()
    .enumerate()
    {
        capture_matches_libpcap(&lab, &frames, &[], f, &format!("auto{i}"));
    }
    capture_matches_libpcap(&lab, &frames, &["--engine", "bpf"], "udp or vlan 7", "bpf");
    for (i, f) in ["udp port 514 or vlan 7", "tcp"].iter().enumerate() {
        capture_matches_libpcap(
            &lab,
            &frames,
            &["--source", "afxdp"],
            f,
            &format!("afxdp{i}"),
        );
    }
}

#[test]
fn capture_without_filter_counts_everything_and_stops_at_c() {
    let lab = lab();
    let frames = frames();
    // -c: exits by itself after N packets.
    let out = tmp("count.pcapng");
    let child = lab
        .command(BIN)
        .args([
            "capture",
            "-i",
            &lab.b,
            "-c",
            "100",
            "-w",
            out.to_str().unwrap(),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(300));
    send(&lab, &frames);
    let o = child.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    assert_eq!(summary(&text, "packets captured"), 100, "{text}");
    let got = read_all(&out);
    assert_eq!(got.len(), 100);
    assert!(
        got.iter().zip(&frames).all(|((g, _), f)| g == f),
        "the first 100 frames, in order"
    );
    // pcapng by extension.
    let mut magic = [0u8; 4];
    std::fs::File::open(&out)
        .unwrap()
        .read_exact(&mut magic)
        .unwrap();
    assert_eq!(magic, [0x0a, 0x0d, 0x0d, 0x0a]);
}

#[test]
fn gen_sends_the_count_asked() {
    let lab = lab();
    let b = lab.b.clone();
    let got = std::thread::scope(|s| {
        let h = s.spawn(|| {
            lab.run(|| {
                let mut src = AfPacket::open(&b, &AfPacketConfig::default()).expect("open");
                let mut n = 0u64;
                let t = std::time::Instant::now();
                while t.elapsed() < Duration::from_secs(4) && n < 300 {
                    src.poll_batch(Some(Duration::from_millis(50)), &mut |_| {
                        n += 1;
                        Flow::Continue
                    })
                    .expect("poll");
                }
                // Anything more would show up now.
                src.poll_batch(Some(Duration::from_millis(300)), &mut |_| {
                    n += 1;
                    Flow::Continue
                })
                .expect("poll");
                n
            })
        });
        std::thread::sleep(Duration::from_millis(300));
        let o = lab
            .command(BIN)
            .args(["gen", "--send", &lab.a, "-c", "300", "--rate", "5000"])
            .output()
            .expect("gen");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains("sent 300 packets"));
        h.join().expect("capture thread")
    });
    assert_eq!(got, 300);
}

#[test]
fn capture_errors_are_clear() {
    let o = Command::new(BIN)
        .args(["capture", "-i", "nsift-none0"])
        .output()
        .expect("run");
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("no such interface: nsift-none0"), "{e}");
    let o = Command::new(BIN)
        .args(["capture", "-i", "lo", "inbound"])
        .output()
        .expect("run");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("use -Q in or -Q out"));
    let o = Command::new(BIN)
        .args(["capture", "-i", "lo", "-C", "1"])
        .output()
        .expect("run");
    assert!(String::from_utf8_lossy(&o.stderr).contains("need -w FILE"));
    let o = Command::new(BIN)
        .args(["capture", "-i", "lo", "tcp port"])
        .output()
        .expect("run");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("^"),
        "caret under the error"
    );
}

#[test]
fn capture_reads_files_through_the_same_pipeline() {
    let sample = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples/demo.pcap");
    let a = tmp("from-file.pcap");
    let b = tmp("from-filter.pcap");
    let o = Command::new(BIN)
        .args([
            "capture",
            "-r",
            sample.to_str().unwrap(),
            "-w",
            a.to_str().unwrap(),
            "tcp port 80",
        ])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(BIN)
        .args([
            "filter",
            "-r",
            sample.to_str().unwrap(),
            "-w",
            b.to_str().unwrap(),
            "tcp port 80",
        ])
        .output()
        .expect("run");
    assert!(o.status.success());
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    // Printing: one line per packet, like filter.
    let o = Command::new(BIN)
        .args(["capture", "-r", sample.to_str().unwrap(), "-c", "3", "arp"])
        .output()
        .expect("run");
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 3);
}

#[test]
fn stats_are_printed_every_second() {
    let lab = lab();
    let frames = frames();
    let (child, _, err) = start_capture(&lab, &["-i", &lab.b, "--stats", "-w", "/dev/null"]);
    send(&lab, &frames);
    std::thread::sleep(Duration::from_millis(1300));
    let text = stop(child, err);
    let line = text
        .lines()
        .find(|l| l.contains("rejected by filter"))
        .unwrap_or_else(|| panic!("no statistics line in {text:?}"));
    assert!(
        line.contains(&format!("{} captured", frames.len())),
        "{line}"
    );
    assert!(
        line.contains("pkt/s") && line.contains("dropped by kernel"),
        "{line}"
    );
}
