//! `netsift gen --send` puts only test addresses on the wire: everything it sends in every mode
//! (the mix with several seeds, the FTP workload, a replayed capture), captured on the far end
//! of a veth pair in a namespace of the test's own, carries addresses of 198.18.0.0/15 and
//! 2001:db8::/32 only; a replay of a capture with other addresses is refused unless asked for.
//!
//! Needs root and iproute2 (`scripts/test` installs it).

mod common;

use std::time::{Duration, Instant};

use common::{BIN, lab, tmp};
use netsift_capture::generate::FrameBuilder;
use netsift_capture::live::{AfPacket, AfPacketConfig, Flow, Source};
use netsift_capture::{LinkType, PcapWriter, Precision, Timestamp};

/// Every IPv4/IPv6 address of an Ethernet frame's outer IP header (after 802.1Q/802.1ad tags)
/// or IPv4 ARP message, read at fixed offsets — independently of netsift's parsers, which
/// `gen --send` itself checks with. `None`: the frame could not be read (it must not happen
/// here: every frame sent is whole).
fn addresses(frame: &[u8]) -> Option<Vec<std::net::IpAddr>> {
    let mut at = 12;
    while matches!(frame.get(at..at + 2)?, [0x81, 0x00] | [0x88, 0xa8]) {
        at += 4;
    }
    let et = u16::from_be_bytes([frame[at], frame[at + 1]]);
    let l3 = frame.get(at + 2..)?;
    let v4 = |b: &[u8]| std::net::IpAddr::from(<[u8; 4]>::try_from(b).unwrap());
    let v6 = |b: &[u8]| std::net::IpAddr::from(<[u8; 16]>::try_from(b).unwrap());
    Some(match et {
        0x0800 => vec![v4(l3.get(12..16)?), v4(l3.get(16..20)?)],
        0x86dd => vec![v6(l3.get(8..24)?), v6(l3.get(24..40)?)],
        0x0806 => vec![v4(l3.get(14..18)?), v4(l3.get(24..28)?)],
        _ => vec![],
    })
}

/// Whether `a` is in 198.18.0.0/15 or 2001:db8::/32.
fn test_range(a: std::net::IpAddr) -> bool {
    match a {
        std::net::IpAddr::V4(v) => {
            (u32::from(v) >> 17) == (u32::from_be_bytes([198, 18, 0, 0]) >> 17)
        }
        std::net::IpAddr::V6(v) => (u128::from(v) >> 96) == 0x2001_0db8,
    }
}

/// Packets sent in each mode (`NETSIFT_GEN_PACKETS` overrides).
fn packets() -> u64 {
    std::env::var("NETSIFT_GEN_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

/// Runs `netsift gen --send A ARGS -c N` in a fresh lab while capturing on B; returns what was
/// received, what the kernel dropped, and every foreign address seen (with the frame index).
fn send_and_check(args: &[&str], n: u64) -> (u64, u64, Vec<(u64, String)>) {
    let lab = lab();
    let b = lab.b.clone();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            lab.run(|| {
                let cfg = AfPacketConfig {
                    block_count: 64,
                    ..AfPacketConfig::default()
                };
                let mut src = AfPacket::open(&b, &cfg).expect("open");
                let mut seen = 0u64;
                let mut foreign = Vec::new();
                let start = Instant::now();
                let mut quiet_since = Instant::now();
                while start.elapsed() < Duration::from_secs(60) {
                    let before = seen;
                    src.poll_batch(Some(Duration::from_millis(50)), &mut |p| {
                        match addresses(p.data) {
                            Some(addrs) => {
                                for a in addrs.into_iter().filter(|&a| !test_range(a)) {
                                    foreign.push((seen, a.to_string()));
                                }
                            }
                            None => foreign.push((seen, "unreadable".into())),
                        }
                        seen += 1;
                        Flow::Continue
                    })
                    .expect("poll");
                    if seen != before {
                        quiet_since = Instant::now();
                    } else if seen > 0 && quiet_since.elapsed() > Duration::from_millis(700) {
                        break;
                    }
                }
                let st = src.stats().expect("stats");
                (seen, st.dropped, foreign)
            })
        });
        std::thread::sleep(Duration::from_millis(300));
        let count = n.to_string();
        let mut argv = vec!["gen", "--send", &lab.a, "-c", &count, "--rate", "200000"];
        argv.extend_from_slice(args);
        let o = lab.command(BIN).args(&argv).output().expect("gen");
        assert!(
            o.status.success(),
            "gen {argv:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(&format!("sent {n} packets")),
            "gen {argv:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        h.join().expect("capture thread")
    })
}

#[test]
fn every_mode_sends_only_test_addresses() {
    let n = packets();
    let replay = tmp("replay.pcap");
    let o = std::process::Command::new(BIN)
        .args(["gen", "-w"])
        .arg(&replay)
        .args(["--mix", "4", "-c", "5000"])
        .output()
        .expect("gen -w");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let replay = replay.to_string_lossy().into_owned();
    let modes: [&[&str]; 6] = [
        &[],
        &["--mix", "2"],
        &[
            "--mix",
            "3",
            "--weights",
            "1,1,1,1,1,1,1",
            "--vlan-one-in",
            "2",
        ],
        &["--ftp"],
        &["--ftp", "--seed", "7", "--servers", "3", "--loop"],
        &["-r", &replay, "--loop"],
    ];
    for args in modes {
        let (seen, dropped, foreign) = send_and_check(args, n);
        assert!(
            foreign.is_empty(),
            "gen {args:?}: {:?}",
            &foreign[..foreign.len().min(5)]
        );
        assert_eq!(
            seen + dropped,
            n,
            "gen {args:?}: every packet captured or counted"
        );
        assert!(
            seen * 10 >= n * 9,
            "gen {args:?}: only {seen} of {n} captured"
        );
    }
}

#[test]
fn a_replay_with_other_addresses_is_refused() {
    // A capture with an address outside the test ranges (written, never sent).
    let path = tmp("foreign.pcap");
    let mut w = PcapWriter::new(
        std::fs::File::create(&path).unwrap(),
        LinkType::ETHERNET,
        65535,
        Precision::Micro,
    )
    .unwrap();
    for dst in [[198, 18, 0, 2], [192, 0, 2, 7]] {
        let f = FrameBuilder::new()
            .ipv4([198, 18, 0, 1], dst)
            .udp(1, 2)
            .build_packet(Timestamp::from_nanos(0));
        w.write_packet(&f.as_ref()).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let o = std::process::Command::new(BIN)
        .args(["gen", "--send", "nsift-none0", "-r"])
        .arg(&path)
        .output()
        .expect("gen");
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("packet 2 carries 192.0.2.7, outside the test ranges"),
        "{e}"
    );
    assert!(e.contains("--allow-foreign-addresses"), "{e}");
    // The flag goes with a replay only.
    let o = std::process::Command::new(BIN)
        .args(["gen", "--send", "nsift-none0", "--allow-foreign-addresses"])
        .output()
        .expect("gen");
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("--allow-foreign-addresses") && e.contains("-r <FILE>"),
        "{e}"
    );
    // The checks of the independent reader used above.
    assert!(
        test_range("198.19.255.255".parse().unwrap()) && !test_range("198.20.0.1".parse().unwrap())
    );
    assert!(
        test_range("2001:db8::9".parse().unwrap()) && !test_range("2001:db9::1".parse().unwrap())
    );
}
