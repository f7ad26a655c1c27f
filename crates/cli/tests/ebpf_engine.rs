//! `netsift filter --engine ebpf` (the kernel's verdicts through `BPF_PROG_TEST_RUN`) prints
//! exactly what `--engine bpf` (the interpreter, checked against libpcap by
//! `filter_verdicts.rs`) prints, on every shared Ethernet capture, and writes the same files.
//!
//! Needs root (loading eBPF programs); fails at once, saying so, otherwise.

use std::path::Path;
use std::process::{Command, Output};

use netsift_capture::{CaptureReader, LinkType};
use netsift_testkit::{data, oracle};

const BIN: &str = env!("CARGO_BIN_EXE_netsift");

/// Expressions tried on each capture, in rotation, after accept-all.
const EXPRESSIONS: [&str; 10] = [
    "ip",
    "tcp port 80 or udp port 53",
    "ip6 protochain 6",
    "vlan and ip",
    "len > 100",
    "ether[0] & 1 = 1",
    "udp and ip[6:2] & 0x1fff = 0",
    "not arp",
    "tcp[tcpflags] & tcp-syn != 0",
    "ip[100] = 0 or ip6",
];

fn need_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "--engine ebpf loads programs into the kernel: run these tests as root"
    );
}

fn filter(capture: &Path, engine: &str, extra: &[&str]) -> Output {
    Command::new(BIN)
        .arg("filter")
        .arg("-r")
        .arg(capture)
        .args(["--engine", engine])
        .args(extra)
        .output()
        .expect("cannot run netsift")
}

/// `(interpreted, kernel)` from the stderr line of an ebpf run, `(0, 0)` without one.
fn fallbacks(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("netsift: ebpf: "))
        .and_then(|l| l.split_whitespace().next())
        .map_or(0, |n| n.parse().expect("a count"))
}

fn is_ethernet(capture: &Path) -> bool {
    CaptureReader::open(capture)
        .ok()
        .and_then(|r| r.link_type())
        .is_some_and(|lt| lt == LinkType::ETHERNET)
}

#[test]
fn ebpf_verdicts_equal_the_interpreters_on_every_ethernet_capture() {
    need_root();
    let (mut files, mut runs, mut packets, mut interpreted) = (0u64, 0u64, 0u64, 0u64);
    for (n, capture) in data::tcpdump_captures().iter().enumerate() {
        if !is_ethernet(capture) {
            continue;
        }
        files += 1;
        for expr in ["", EXPRESSIONS[n % EXPRESSIONS.len()]] {
            let args: Vec<&str> = if expr.is_empty() {
                vec!["--verdicts"]
            } else {
                vec!["--verdicts", expr]
            };
            let bpf = filter(capture, "bpf", &args);
            let ebpf = filter(capture, "ebpf", &args);
            let e = String::from_utf8_lossy(&ebpf.stderr);
            assert_eq!(
                (bpf.status.code(), &bpf.stdout),
                (ebpf.status.code(), &ebpf.stdout),
                "{} `{expr}`: --engine ebpf differs from --engine bpf\nstderr: {e}",
                capture.display()
            );
            assert!(
                !e.contains("kernel refuses") && !e.contains("cannot translate"),
                "{} `{expr}`: {e}",
                capture.display()
            );
            runs += 1;
            packets += ebpf.stdout.iter().filter(|&&b| b == b'\n').count() as u64;
            interpreted += fallbacks(&e);
        }
    }
    assert!(files > 100, "only {files} Ethernet captures found");
    println!(
        "{files} Ethernet captures, {runs} runs, {packets} verdicts, {interpreted} packets run by \
         the interpreter"
    );
}

#[test]
fn ebpf_runs_classic_programs_and_writes_the_same_file() {
    need_root();
    let capture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/demo.pcap");
    let dir = std::env::temp_dir().join(format!("netsift-ebpf-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A program compiled by libpcap with a snap length of 64 (classic values are cut lengths).
    let prog = oracle::compile(1, 64, "tcp or udp", true).expect("libpcap compiles");
    let file = dir.join("prog.ddd");
    std::fs::write(
        &file,
        netsift_bpf::asm::dump(&prog, netsift_bpf::asm::Format::Decimal),
    )
    .unwrap();
    let p = file.to_str().unwrap();
    let bpf = filter(&capture, "bpf", &["--verdicts", "--program", p]);
    let ebpf = filter(&capture, "ebpf", &["--verdicts", "--program", p]);
    assert!(
        ebpf.status.success(),
        "{}",
        String::from_utf8_lossy(&ebpf.stderr)
    );
    assert_eq!(bpf.stdout, ebpf.stdout);
    assert!(
        String::from_utf8_lossy(&ebpf.stdout).contains(" 64\n"),
        "snap lengths come from the kernel"
    );
    let (a, b) = (dir.join("bpf.pcap"), dir.join("ebpf.pcap"));
    for (engine, out) in [("bpf", &a), ("ebpf", &b)] {
        let o = filter(
            &capture,
            engine,
            &["-w", out.to_str().unwrap(), "--program", p],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn ebpf_needs_ethernet() {
    need_root();
    let other = data::tcpdump_captures()
        .into_iter()
        .find(|c| {
            CaptureReader::open(c)
                .ok()
                .and_then(|r| r.link_type())
                .is_some_and(|lt| lt != LinkType::ETHERNET)
        })
        .expect("a non-Ethernet capture");
    let o = filter(&other, "ebpf", &["--verdicts"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("--engine ebpf runs the filter on Ethernet captures"),
        "{e}"
    );
}
