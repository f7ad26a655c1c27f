//! The XDP back end of `netsift_offload` on a veth pair in a namespace of the test's own: rules
//! installed through [`XdpOffload`] on the receiving end drop and steer exactly the expected
//! packets of UDP flows sent across the pair, and the counters agree on both sides — the
//! frames the sender's socket sent, the datagrams the receiver's sockets got, and the per-rule
//! and per-outcome counters of the XDP program. Run in generic and native (veth driver) XDP,
//! with [`Action::Queue`] redirected through a CPUMAP to another CPU.
//!
//! Needs root and iproute2 (`scripts/test` installs it). Addresses: the lab's 198.19.255.0/30
//! and senders in 198.18.77.0/24.

use std::collections::HashMap;
use std::io::ErrorKind as IoKind;
use std::net::UdpSocket;
use std::time::Duration;

use netsift_capture::generate::FrameBuilder;
use netsift_ebpf::XdpMode;
use netsift_offload::xdp::{QueueMode, XdpOffload};
use netsift_offload::{Action, Counters, Family, FlowKey, Match, Rule, RuleId, VlanMatch};
use netsift_testkit::netns::Lab;

mod common;
use common::lab;

/// The receiving end's address.
const DST: [u8; 4] = [198, 19, 255, 2];

/// One UDP flow of the test: source host and port, destination port, frames sent.
#[derive(Clone, Copy, Debug)]
struct Flow {
    src: [u8; 4],
    sport: u16,
    dport: u16,
    count: u64,
}

const P1: u16 = 47001;
const P2: u16 = 47002;
const P3: u16 = 47003;
const P4: u16 = 47004;

const FLOWS: [Flow; 6] = [
    // Dropped by the wildcard rule 1 (UDP to P1).
    Flow {
        src: [198, 18, 77, 1],
        sport: 40001,
        dport: P1,
        count: 200,
    },
    // Steered to queue 1 by the precise rule 2.
    Flow {
        src: [198, 18, 77, 2],
        sport: 40002,
        dport: P2,
        count: 150,
    },
    // Passed by the precise rule 3, which wins over the wildcard drop rule 4.
    Flow {
        src: [198, 18, 77, 3],
        sport: 40003,
        dport: P3,
        count: 120,
    },
    // Passed by the wildcard rule 5 (host 198.18.77.4).
    Flow {
        src: [198, 18, 77, 4],
        sport: 40004,
        dport: P4,
        count: 100,
    },
    // To P1 but from 198.18.77.4: rule 5 (priority 2) wins over rule 1 (priority 1).
    Flow {
        src: [198, 18, 77, 4],
        sport: 40005,
        dport: P1,
        count: 80,
    },
    // No rule.
    Flow {
        src: [198, 18, 77, 9],
        sport: 40006,
        dport: P4,
        count: 60,
    },
];

fn frame(f: &Flow, dst_mac: [u8; 6]) -> Vec<u8> {
    FrameBuilder::new()
        .dst_mac(dst_mac)
        .src_mac([0x02, 0, 0, 0, 0x77, f.src[3]])
        .ipv4(f.src, DST)
        .udp(f.sport, f.dport)
        .payload(&[0x5a; 32])
        .build()
}

fn key(f: &Flow, dst_mac: [u8; 6]) -> FlowKey {
    FlowKey::from_frame(&frame(f, dst_mac)).expect("a UDP frame has a key")
}

/// The rules of the test (see [`FLOWS`]).
fn rules(mac: [u8; 6]) -> Vec<Rule> {
    let udp = |dport: u16| Match::new(Family::V4).with_proto(17).with_dst_port(dport);
    let net = |a: [u8; 4], len: u8| {
        Match::new(Family::V4)
            .try_src(a.into(), Family::V4.prefix_mask(len))
            .expect("an IPv4 source")
    };
    vec![
        Rule::new(RuleId(1), udp(P1), Action::Drop).with_priority(1),
        Rule::new(
            RuleId(2),
            Match::precise(&key(&FLOWS[1], mac)).expect("precise"),
            Action::Queue(1),
        ),
        Rule::new(
            RuleId(3),
            Match::precise(&key(&FLOWS[2], mac))
                .expect("precise")
                .with_vlan(VlanMatch::Any),
            Action::Pass,
        ),
        Rule::new(
            RuleId(4),
            net([198, 18, 77, 0], 24).with_proto(17).with_dst_port(P3),
            Action::Drop,
        ),
        Rule::new(
            RuleId(5),
            net([198, 18, 77, 4], 32).with_proto(17),
            Action::Pass,
        )
        .with_priority(2),
    ]
}

fn mac_of(lab: &Lab, dev: &str) -> [u8; 6] {
    let out = lab.ip(&["link", "show", "dev", dev]).expect("ip link show");
    let hex = out
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .unwrap_or_else(|| panic!("no MAC address in {out:?}"));
    let mut mac = [0u8; 6];
    for (b, h) in mac.iter_mut().zip(hex.split(':')) {
        *b = u8::from_str_radix(h, 16).expect("a hex MAC address");
    }
    mac
}

fn xdp_attached(lab: &Lab) -> bool {
    lab.ip(&["link", "show", "dev", &lab.b])
        .expect("ip link show")
        .contains("xdp")
}

/// Datagrams waiting on `s`, counted until it has been quiet for 300 ms.
fn drain(s: &UdpSocket) -> u64 {
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("read timeout");
    let mut buf = [0u8; 2048];
    let mut n = 0;
    loop {
        match s.recv(&mut buf) {
            Ok(_) => n += 1,
            Err(e) if matches!(e.kind(), IoKind::WouldBlock | IoKind::TimedOut) => return n,
            Err(e) => panic!("recv: {e}"),
        }
    }
}

fn run(mode: XdpMode) {
    let lab = lab();
    let mac = mac_of(&lab, &lab.b);
    let mut xdp = match XdpOffload::new(64, 64, QueueMode::Cpu) {
        Ok(x) => x,
        Err(e) if e.kind() == netsift_ebpf::ErrorKind::PermissionDenied => {
            println!("SKIPPED: bpf(2) is not permitted here (run as root): {e}");
            return;
        }
        Err(e) => panic!("cannot load the XDP back end: {e}"),
    };
    // Queue 1 is CPU 1 (CPU 0 on a one-CPU machine: there the redirect passes).
    let cpus = netsift_ebpf::possible_cpus().expect("possible CPUs");
    let redirected = cpus > 1;
    if redirected {
        xdp.enable_cpu_queue(1, 256).expect("CPUMAP entry 1");
    }
    for r in rules(mac) {
        xdp.install(r)
            .unwrap_or_else(|e| panic!("installing {r}: {e}"));
    }
    // Receivers, bound in the namespace.
    let sockets: HashMap<u16, UdpSocket> = lab.run(|| {
        [P1, P2, P3, P4]
            .into_iter()
            .map(|p| {
                (
                    p,
                    UdpSocket::bind((std::net::Ipv4Addr::from(DST), p)).expect("bind a receiver"),
                )
            })
            .collect()
    });
    let link = lab
        .run(|| xdp.attach(&lab.b, mode))
        .unwrap_or_else(|e| panic!("attaching XDP ({mode:?}): {e}"));
    assert!(xdp_attached(&lab), "no XDP program on {}", lab.b);

    // The flows, interleaved, bounded and paced.
    let mut frames = Vec::new();
    let longest = FLOWS.iter().map(|f| f.count).max().unwrap_or(0);
    for i in 0..longest {
        for f in FLOWS.iter().filter(|f| i < f.count) {
            frames.push(frame(f, mac));
        }
    }
    let stats = lab.send(&frames, 20_000);
    assert_eq!(
        stats.sent,
        frames.len() as u64,
        "the sender sent every frame"
    );
    let got: HashMap<u16, u64> = sockets.iter().map(|(&p, s)| (p, drain(s))).collect();

    // Receivers: every frame the rules pass or steer, none that they drop.
    let expect_rx = |p: u16| -> u64 {
        FLOWS
            .iter()
            .filter(|f| f.dport == p && !(f.dport == P1 && f.src[3] == 1))
            .map(|f| f.count)
            .sum()
    };
    for p in [P1, P2, P3, P4] {
        assert_eq!(
            got[&p],
            expect_rx(p),
            "{mode:?}: datagrams to port {p}: {got:?}"
        );
    }
    // Rule counters: the sender's frames of the flows each rule decides.
    let len = |f: &Flow| frame(f, mac).len() as u64;
    let of = |flows: &[usize]| Counters {
        packets: flows.iter().map(|&i| FLOWS[i].count).sum(),
        bytes: flows.iter().map(|&i| FLOWS[i].count * len(&FLOWS[i])).sum(),
    };
    let want = [
        (1, of(&[0])),
        (2, of(&[1])),
        (3, of(&[2])),
        (4, of(&[])),
        (5, of(&[3, 4])),
    ];
    for (id, c) in want {
        assert_eq!(
            xdp.counters(RuleId(id)).expect("counters"),
            c,
            "{mode:?}: counters of rule {id}"
        );
    }
    let totals = xdp.totals().expect("totals");
    assert_eq!(totals.dropped, of(&[0]), "{mode:?}: {totals:?}");
    assert_eq!(totals.queued, of(&[1]), "{mode:?}: {totals:?}");
    assert_eq!(totals.passed, of(&[2, 3, 4]), "{mode:?}: {totals:?}");
    assert_eq!(totals.no_match, of(&[5]), "{mode:?}: {totals:?}");

    // Removing the drop rule lets its flow through; the program is not reloaded.
    let (_, c1) = xdp.remove(RuleId(1)).expect("remove rule 1");
    assert_eq!(c1, of(&[0]));
    let again: Vec<Vec<u8>> = (0..20).map(|_| frame(&FLOWS[0], mac)).collect();
    lab.send(&again, 20_000);
    assert_eq!(drain(&sockets[&P1]), 20, "{mode:?}: rule 1 removed");

    println!(
        "XDP back end on {} ({mode:?}, {}): {} frames sent in 6 flows; received {got:?} \
         (port {P1}: {} dropped by rule 1); rule counters {:?}; totals: {} dropped, {} \
         steered to queue 1{}, {} passed by rules, {} without a rule",
        lab.b,
        if matches!(link.kind(), netsift_ebpf::LinkKind::Xdp { native: true }) {
            "native"
        } else {
            "generic"
        },
        stats.sent,
        FLOWS[0].count,
        want.iter()
            .map(|(id, c)| (*id, c.packets))
            .collect::<Vec<_>>(),
        totals.dropped.packets,
        totals.queued.packets,
        if redirected {
            " (CPUMAP redirect to CPU 1)"
        } else {
            " (one CPU: passed)"
        },
        totals.passed.packets,
        totals.no_match.packets,
    );
    drop(link);
    assert!(
        !xdp_attached(&lab),
        "XDP still attached after the link was dropped"
    );
}

#[test]
fn xdp_offload_generic_drops_and_steers_exactly() {
    run(XdpMode::Generic);
}

#[test]
fn xdp_offload_native_drops_and_steers_exactly() {
    run(XdpMode::Native);
}
