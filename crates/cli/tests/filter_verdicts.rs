//! `netsift filter --verdicts` on every shared tcpdump capture, without a program and with one
//! compiled by libpcap for the capture's link type, against libpcap (its reader and
//! `bpf_filter`) packet by packet.

use std::path::Path;
use std::process::Command;

use netsift_bpf::{Filter, Program, Rules, asm};
use netsift_testkit::{data, oracle};

/// Expressions tried on each capture, in rotation; each compiles for most link types.
const EXPRESSIONS: [&str; 8] = [
    "ip",
    "tcp port 80 or udp port 53",
    "ip6 protochain 6",
    "vlan and ip",
    "len > 100",
    "ether[0] & 1 = 1",
    "udp and ip[6:2] & 0x1fff = 0",
    "not arp",
];

fn netsift_verdicts(capture: &Path, program: Option<&Path>) -> (Vec<(u64, u32)>, bool) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_netsift"));
    cmd.arg("filter").arg("-r").arg(capture).arg("--verdicts");
    if let Some(p) = program {
        cmd.arg("--program").arg(p);
    }
    let out = cmd.output().expect("cannot run netsift");
    let stdout = String::from_utf8(out.stdout).expect("verdicts are ASCII");
    let lines = stdout
        .lines()
        .map(|l| {
            let (i, r) = l
                .split_once(' ')
                .unwrap_or_else(|| panic!("bad line {l:?}"));
            (i.parse().unwrap(), r.parse().unwrap())
        })
        .collect();
    (lines, out.status.success())
}

#[test]
fn verdicts_agree_with_libpcap_on_every_capture() {
    let dir = std::env::temp_dir().join(format!("netsift-verdicts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut files, mut packets, mut with_program) = (0, 0, 0);
    for (n, capture) in data::tcpdump_captures().iter().enumerate() {
        let theirs = oracle::read_capture(capture)
            .unwrap_or_else(|e| panic!("libpcap cannot read {}: {e}", capture.display()));
        assert!(
            theirs.error.is_none(),
            "{}: {:?}",
            capture.display(),
            theirs.error
        );
        // Without a program: accept-all, libpcap's `ret #262144`.
        let (ours, ok) = netsift_verdicts(capture, None);
        assert!(ok, "{}: netsift failed", capture.display());
        // libpcap's verdicts (packet index, return value) for a program.
        let expected = |program: &Program| -> Vec<(u64, u32)> {
            theirs
                .packets
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    (
                        i as u64,
                        oracle::filter(program, &p.data, p.wire_len).unwrap(),
                    )
                })
                .collect()
        };
        let accept_all = Program::accept_all(262_144);
        assert_eq!(
            ours,
            expected(&accept_all),
            "{} without a program",
            capture.display()
        );
        // With a program libpcap compiles for this link type.
        let expr = EXPRESSIONS[n % EXPRESSIONS.len()];
        if let Ok(program) = oracle::compile(theirs.dlt, 262_144, expr, true) {
            let path = dir.join("prog.ddd");
            std::fs::write(&path, asm::dump(&program, asm::Format::Decimal)).unwrap();
            let (ours, ok) = netsift_verdicts(capture, Some(&path));
            assert!(ok, "{}: netsift failed with `{expr}`", capture.display());
            assert_eq!(
                ours,
                expected(&program),
                "{} with `{expr}`",
                capture.display()
            );
            // Sanity: the library agrees with the binary.
            let f = Filter::new(program, Rules::Libpcap).unwrap();
            assert!(
                theirs
                    .packets
                    .iter()
                    .zip(&ours)
                    .all(|(p, (_, r))| f.run(&p.data, p.wire_len) == *r)
            );
            with_program += 1;
        }
        files += 1;
        packets += theirs.packets.len();
    }
    std::fs::remove_dir_all(&dir).ok();
    println!(
        "netsift filter --verdicts: {files} captures, {packets} packets, {with_program} captures also \
         with a compiled program: 0 disagreements with libpcap"
    );
}
