//! `asm::dump` against tcpdump's own `-d`, `-dd` and `-ddd` output, byte for byte, for programs
//! of several link types (tcpdump compiles for the link type of the capture given with `-r`).

use std::process::Command;

use netsift_bpf::asm::{self, Format};
use netsift_testkit::{data, oracle};

const EXPRESSIONS: [&str; 6] = [
    "ip",
    "tcp port 80 or udp port 53",
    "ip6 protochain 6",
    "vlan 10 and ip[2:2] > 576",
    "ether[0] & 1 = 1 or len > 1000",
    "icmp[icmptype] = icmp-echo",
];

#[test]
fn dumps_equal_tcpdumps() {
    let tcpdump = which_tcpdump();
    let mut compared = 0;
    // One capture of each of several link types.
    let mut seen = std::collections::BTreeSet::new();
    for path in data::tcpdump_captures() {
        let Ok(cap) = oracle::read_capture(&path) else {
            continue;
        };
        if !seen.insert(cap.dlt) || seen.len() > 12 {
            continue;
        }
        for expr in EXPRESSIONS {
            let Ok(program) = oracle::compile(cap.dlt, cap.snaplen, expr, true) else {
                continue;
            };
            for (flag, format) in [
                ("-d", Format::Asm),
                ("-dd", Format::C),
                ("-ddd", Format::Decimal),
            ] {
                let out = Command::new(&tcpdump)
                    .arg("-r")
                    .arg(&path)
                    .arg(flag)
                    .arg(expr)
                    .output()
                    .expect("run tcpdump");
                assert!(
                    out.status.success(),
                    "tcpdump {flag} {expr}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let theirs = String::from_utf8(out.stdout).unwrap();
                assert_eq!(
                    asm::dump(&program, format),
                    theirs,
                    "{} {flag} `{expr}`",
                    path.display()
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 100, "only {compared} dumps compared");
    println!(
        "dumps: {compared} dumps ({} link types) identical to tcpdump's",
        seen.len().min(12)
    );
}

fn which_tcpdump() -> String {
    for p in ["/usr/bin/tcpdump", "/usr/sbin/tcpdump", "/sbin/tcpdump"] {
        if std::path::Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("tcpdump is not installed; ./scripts/test installs it (apt-get install tcpdump)");
}
