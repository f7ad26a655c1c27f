//! Live capture on a veth pair in a namespace of the test's own: both sources deliver exactly
//! the frames sent (bytes, lengths, order, VLAN tags restored), snap lengths cut, directions
//! filter, and drop accounting is exact when the reader does not keep up.
//!
//! Needs root and iproute2 (`scripts/test` installs it); the failure message says so.

use std::time::{Duration, Instant};

use netsift_capture::generate::{FrameBuilder, mixed_traffic};
use netsift_capture::live::{
    AfPacket, AfPacketConfig, AfXdp, AfXdpConfig, Direction, Flow, Sender, Source, XdpAttachMode,
    XdpPass,
};
use netsift_testkit::netns::Lab;

/// The test traffic: the synthetic mix (capture's default mix, test addresses only; some of it
/// 802.1Q tagged), 802.1Q and 802.1ad (QinQ) tagged frames, and full-size frames.
fn traffic() -> (Vec<Vec<u8>>, usize) {
    let mut frames: Vec<Vec<u8>> = mixed_traffic(7, 300).into_iter().map(|p| p.data).collect();
    let mut tagged = frames
        .iter()
        .filter(|f| f.len() > 14 && f[12..14] == [0x81, 0x00])
        .count();
    for i in 0..60u16 {
        let b = FrameBuilder::new()
            .ipv4([198, 18, 1, 1], [198, 18, 2, 2])
            .udp(2000 + i, 514)
            .payload(&[i as u8; 100]);
        let b = match i % 3 {
            0 => b.vlan(i + 1),
            1 => b.vlan_tag(0x88a8, 100 + i).vlan(7),
            _ => b.vlan_tag(0x8100, 0xe000 | (200 + i)),
        };
        frames.push(b.build());
        tagged += 1;
    }
    for i in 0..20u8 {
        frames.push(
            FrameBuilder::new()
                .ipv4([198, 18, 3, 3], [198, 18, 4, 4])
                .tcp(40000, 80, 0x18)
                .payload(&vec![i; 1400])
                .build(),
        );
    }
    // Interleave, deterministically.
    let n = frames.len();
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = 0x2545_f491u64;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    (
        order.into_iter().map(|i| frames[i].clone()).collect(),
        tagged,
    )
}

fn lab() -> Lab {
    Lab::new().unwrap_or_else(|e| panic!("cannot create a test network namespace: {e}"))
}

/// Sends `frames` at `pps` on `iface`.
fn send(iface: &str, frames: &[Vec<u8>], pps: u64) {
    let mut tx = Sender::open(iface).expect("sender");
    let mut it = frames.iter().map(Vec::as_slice);
    let st = tx
        .send_paced(
            &mut it,
            Some(pps),
            frames.len() as u64,
            Duration::from_secs(20),
        )
        .expect("send");
    assert_eq!(st.sent, frames.len() as u64);
}

/// Reads from `src` until `n` packets came or `idle` passed without any.
fn collect(src: &mut dyn Source, n: usize, idle: Duration) -> Vec<(Vec<u8>, u32)> {
    let mut got = Vec::new();
    let mut last = Instant::now();
    while got.len() < n && last.elapsed() < idle {
        let k = src
            .poll_batch(Some(Duration::from_millis(50)), &mut |p| {
                got.push((p.data.to_vec(), p.wire_len));
                Flow::Continue
            })
            .expect("poll");
        if k > 0 {
            last = Instant::now();
        }
    }
    got
}

fn check_exact(name: &str, frames: &[Vec<u8>], got: &[(Vec<u8>, u32)]) {
    assert_eq!(
        got.len(),
        frames.len(),
        "{name}: captured {} of {} frames",
        got.len(),
        frames.len()
    );
    for (i, (f, (g, len))) in frames.iter().zip(got).enumerate() {
        assert_eq!(*len as usize, f.len(), "{name}: frame {i}: wire length");
        assert!(
            g == f,
            "{name}: frame {i} differs: sent {:02x?}… captured {:02x?}…",
            &f[..f.len().min(24)],
            &g[..g.len().min(24)]
        );
    }
}

#[test]
fn afpacket_captures_exactly_what_was_sent() {
    let lab = lab();
    let (frames, tagged) = traffic();
    let (a, b) = (lab.a.clone(), lab.b.clone());
    lab.run(|| {
        let mut src = AfPacket::open(&b, &AfPacketConfig::default()).expect("open AF_PACKET");
        send(&a, &frames, 20_000);
        let got = collect(&mut src, frames.len(), Duration::from_secs(2));
        check_exact("AF_PACKET", &frames, &got);
        let st = src.stats().expect("stats");
        assert_eq!(st.dropped, 0);
        assert_eq!(st.received, frames.len() as u64, "{st:?}");
        assert_eq!(st.delivered, frames.len() as u64);
        // The kernel took every tag out of the frame; the source put each one back.
        assert_eq!(st.vlan_restored, tagged as u64, "{st:?}");
        println!(
            "AF_PACKET: {} frames ({tagged} tagged) captured exactly; {st:?}",
            got.len()
        );
    });
}

/// The daemon benchmark's kernel column: with threaded NAPI on the receiving end (behind a
/// pass-through XDP program, GRO off) the frames reach the capture socket as sent — unmerged,
/// in order — and their delivery runs in the `napi/B-N` thread whose clock `receive_seconds`
/// reads.
#[test]
fn threaded_receive_delivers_in_the_napi_thread() {
    let mut lab = lab();
    lab.threaded_receive()
        .unwrap_or_else(|e| panic!("threaded NAPI on the lab's veth: {e}"));
    let (frames, _) = traffic();
    let (a, b) = (lab.a.clone(), lab.b.clone());
    let before = lab.receive_seconds();
    lab.run(|| {
        let mut src = AfPacket::open(&b, &AfPacketConfig::default()).expect("open AF_PACKET");
        send(&a, &frames, 20_000);
        let got = collect(&mut src, frames.len(), Duration::from_secs(2));
        check_exact("AF_PACKET behind threaded NAPI", &frames, &got);
    });
    let spent = lab.receive_seconds() - before;
    assert!(
        spent > 0.0,
        "the receive thread ran for {spent} s while {} frames arrived",
        frames.len()
    );
    println!(
        "threaded NAPI: {} frames captured exactly; the receive thread ran {:.0} ns per frame",
        frames.len(),
        spent * 1e9 / frames.len() as f64
    );
}

#[test]
fn afxdp_captures_exactly_what_was_sent() {
    let lab = lab();
    let (frames, _) = traffic();
    let (a, b) = (lab.a.clone(), lab.b.clone());
    lab.run(|| {
        let mut src = AfXdp::open(&b, &AfXdpConfig::default()).expect("open AF_XDP");
        send(&a, &frames, 20_000);
        let got = collect(&mut src, frames.len(), Duration::from_secs(2));
        check_exact("AF_XDP", &frames, &got);
        let st = src.stats().expect("stats");
        assert_eq!(
            (st.dropped, st.received),
            (0, frames.len() as u64),
            "{st:?}"
        );
        println!(
            "{}: {} frames captured exactly; {st:?}",
            src.describe(),
            got.len()
        );
    });
}

#[test]
fn snap_length_cuts_and_keeps_the_wire_length() {
    let lab = lab();
    let (frames, _) = traffic();
    let (a, b) = (lab.a.clone(), lab.b.clone());
    lab.run(|| {
        for xdp in [false, true] {
            let mut src: Box<dyn Source> = if xdp {
                Box::new(
                    AfXdp::open(
                        &b,
                        &AfXdpConfig {
                            snaplen: 64,
                            ..AfXdpConfig::default()
                        },
                    )
                    .expect("xdp"),
                )
            } else {
                Box::new(
                    AfPacket::open(
                        &b,
                        &AfPacketConfig {
                            snaplen: 64,
                            ..AfPacketConfig::default()
                        },
                    )
                    .expect("packet"),
                )
            };
            send(&a, &frames, 20_000);
            let got = collect(src.as_mut(), frames.len(), Duration::from_secs(2));
            assert_eq!(got.len(), frames.len());
            for (f, (g, len)) in frames.iter().zip(&got) {
                assert_eq!(g.as_slice(), &f[..f.len().min(64)], "xdp={xdp}");
                assert_eq!(*len as usize, f.len());
            }
        }
    });
}

#[test]
fn direction_selects_sent_or_received_packets() {
    let lab = lab();
    let (frames, _) = traffic();
    let a = lab.a.clone();
    lab.run(|| {
        // On the sending end the frames are outgoing.
        let cfg = |d| AfPacketConfig {
            direction: d,
            ..AfPacketConfig::default()
        };
        let mut out = AfPacket::open(&a, &cfg(Direction::Out)).expect("out");
        let mut inn = AfPacket::open(&a, &cfg(Direction::In)).expect("in");
        send(&a, &frames, 20_000);
        let got_out = collect(&mut out, frames.len(), Duration::from_secs(2));
        check_exact("-Q out", &frames, &got_out);
        let got_in = collect(&mut inn, 1, Duration::from_millis(500));
        assert!(
            got_in.is_empty(),
            "-Q in on the sender saw {} packets",
            got_in.len()
        );
        assert!(
            AfXdp::open(
                &a,
                &AfXdpConfig {
                    direction: Direction::Out,
                    ..AfXdpConfig::default()
                }
            )
            .is_err()
        );
    });
}

/// Sends `n` frames to a source that is not being read, then reads what it kept: every frame
/// is either captured or counted as dropped.
fn drops_are_exact(lab: &Lab, mut src: Box<dyn Source>, n: usize) -> (u64, u64) {
    let frames: Vec<Vec<u8>> = mixed_traffic(11, n).into_iter().map(|p| p.data).collect();
    let (before_b, before_a) = (
        lab.counters(&lab.b).expect("counters"),
        lab.counters(&lab.a).expect("counters"),
    );
    send(&lab.a, &frames, 50_000);
    // Let the kernel settle, then read everything that was kept.
    std::thread::sleep(Duration::from_millis(300));
    let got = collect(src.as_mut(), n, Duration::from_millis(800));
    let (after_b, after_a) = (
        lab.counters(&lab.b).expect("counters"),
        lab.counters(&lab.a).expect("counters"),
    );
    // (The receiving end's rx_dropped counts frames no protocol wanted, not losses.)
    assert_eq!(
        after_a[3] - before_a[3],
        0,
        "the veth pair dropped frames in transit"
    );
    assert_eq!(
        after_b[0] - before_b[0],
        n as u64,
        "frames lost before the receiving interface"
    );
    let st = src.stats().expect("stats");
    let captured = got.len() as u64;
    assert!(st.dropped > 0, "the slow reader caused no drops: {st:?}");
    assert_eq!(
        captured + st.dropped,
        n as u64,
        "captured {captured} + dropped {} != sent {n}: {st:?}",
        st.dropped
    );
    // The frames kept are the first ones, in order.
    for (i, (g, _)) in got.iter().enumerate() {
        assert!(frames.contains(g), "frame {i} was never sent");
    }
    (captured, st.dropped)
}

#[test]
fn drop_accounting_is_exact_for_a_slow_reader() {
    let lab = lab();
    let b = lab.b.clone();
    let (c1, d1) = lab.run(|| {
        let cfg = AfPacketConfig {
            block_size: 1 << 14,
            block_count: 2,
            ..AfPacketConfig::default()
        };
        drops_are_exact(
            &lab,
            Box::new(AfPacket::open(&b, &cfg).expect("packet")),
            3000,
        )
    });
    let (c2, d2) = lab.run(|| {
        let cfg = AfXdpConfig {
            frames: 128,
            ring_size: 64,
            coalesce: Duration::ZERO,
            ..AfXdpConfig::default()
        };
        drops_are_exact(&lab, Box::new(AfXdp::open(&b, &cfg).expect("xdp")), 3000)
    });
    println!(
        "3000 frames to a reader that waits: AF_PACKET captured {c1} + dropped {d1}; AF_XDP captured {c2} + dropped {d2}"
    );
}

#[test]
fn bad_interfaces_and_settings_are_clear_errors() {
    let e = AfPacket::open("nsift-nope0", &AfPacketConfig::default())
        .err()
        .expect("error");
    assert!(
        e.to_string().contains("no such interface: nsift-nope0"),
        "{e}"
    );
    let lab = lab();
    let b = lab.b.clone();
    lab.run(|| {
        let e = AfPacket::open(
            &b,
            &AfPacketConfig {
                block_size: 5000,
                ..AfPacketConfig::default()
            },
        )
        .err()
        .expect("error");
        assert!(e.to_string().contains("power of two"), "{e}");
        let e = AfXdp::open(
            &b,
            &AfXdpConfig {
                queue: Some(9),
                ..AfXdpConfig::default()
            },
        )
        .err()
        .expect("error");
        assert!(e.to_string().contains("there is no queue 9"), "{e}");
        // Two XDP sources on one interface: the second finds the first's program.
        let _first = AfXdp::open(&b, &AfXdpConfig::default()).expect("first");
        let e = AfXdp::open(&b, &AfXdpConfig::default())
            .err()
            .expect("second must fail");
        assert!(e.to_string().contains("XDP"), "{e}");
    });
    // The pass-through program: a missing interface is named; a second program on an
    // interface that has one is refused, naming the interface.
    let e = XdpPass::attach("nsift-nope0", XdpAttachMode::Native).expect_err("error");
    assert!(
        e.to_string().contains("no such interface: nsift-nope0"),
        "{e}"
    );
    lab.run(|| {
        let first = XdpPass::attach(&b, XdpAttachMode::Native).expect("first");
        assert!(first.native());
        let e = XdpPass::attach(&b, XdpAttachMode::Auto).expect_err("second must fail");
        assert!(
            e.to_string().contains(&b) && e.to_string().contains("XDP"),
            "{e}"
        );
        drop(first);
        // Detached with the value: the interface takes a program again.
        XdpPass::attach(&b, XdpAttachMode::Native).expect("after the first was dropped");
    });
}

#[test]
fn fanout_spreads_one_link_over_sockets() {
    use netsift_capture::live::{Fanout, FanoutMode};
    let lab = lab();
    let (frames, _) = traffic();
    let (a, b) = (lab.a.clone(), lab.b.clone());
    lab.run(|| {
        let cfg = AfPacketConfig {
            fanout: Some(Fanout {
                group: 42,
                mode: FanoutMode::LoadBalance,
                defrag: true,
                rollover: false,
            }),
            ..AfPacketConfig::default()
        };
        let mut s1 = AfPacket::open(&b, &cfg).expect("first member");
        let mut s2 = AfPacket::open(&b, &cfg).expect("second member");
        send(&a, &frames, 20_000);
        let g1 = collect(&mut s1, frames.len(), Duration::from_millis(600));
        let g2 = collect(&mut s2, frames.len(), Duration::from_millis(600));
        assert_eq!(
            g1.len() + g2.len(),
            frames.len(),
            "each frame goes to exactly one member"
        );
        // Round robin: both got about half.
        assert!(
            g1.len().abs_diff(g2.len()) <= 2,
            "{} vs {}",
            g1.len(),
            g2.len()
        );
        let mut all: Vec<Vec<u8>> = g1.into_iter().chain(g2).map(|(d, _)| d).collect();
        let mut want = frames.clone();
        all.sort();
        want.sort();
        assert!(all == want);
    });
}

#[test]
fn hardware_timestamps_fail_clearly_where_the_device_has_none() {
    use netsift_capture::live::TimestampSource;
    let lab = lab();
    let b = lab.b.clone();
    lab.run(|| {
        let cfg = AfPacketConfig {
            timestamps: TimestampSource::Hardware,
            ..AfPacketConfig::default()
        };
        let e = AfPacket::open(&b, &cfg)
            .err()
            .expect("veth has no hardware clock");
        assert!(
            e.to_string()
                .contains("cannot stamp received packets in hardware"),
            "{e}"
        );
    });
}

#[test]
fn afxdp_opens_one_socket_per_queue() {
    let lab = lab();
    // A second pair with two queues each way.
    lab.ip(&[
        "link",
        "add",
        "mqa",
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        "mqb",
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
    ])
    .expect("multi-queue veth");
    for d in ["mqa", "mqb"] {
        lab.ip(&["link", "set", d, "up"]).expect("up");
    }
    let (frames, _) = traffic();
    lab.run(|| {
        let mut src = AfXdp::open("mqb", &AfXdpConfig::default()).expect("open AF_XDP");
        assert!(src.describe().contains("2 queues"), "{}", src.describe());
        send("mqa", &frames, 20_000);
        let got = collect(&mut src, frames.len(), Duration::from_secs(2));
        assert_eq!(got.len(), frames.len());
        // Order holds within a queue, not across queues: compare as sets.
        let mut all: Vec<Vec<u8>> = got.into_iter().map(|(d, _)| d).collect();
        let mut want = frames.clone();
        all.sort();
        want.sort();
        assert!(all == want);
    });
}
