//! The paper's Fig. 6 (per-flow packet counts) and Fig. 7 (RTSP dynamic ports) on generated
//! traffic, in both engines, against reference computations written directly in Rust.

use std::collections::HashMap;

use netsift_capture::generate::{FrameBuilder, TCP_ACK, TCP_PSH, XorShift64};
use netsift_fpl::{NREGS, Program, Registry};

const FIG6: &str = include_str!("../examples/fig6.fpl");
const FIG7: &str = include_str!("../examples/fig7.fpl");

/// FNV-1a, written out again so that the reference does not share code with the engines.
fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| {
        (h ^ u64::from(*x)).wrapping_mul(0x0100_0000_01b3)
    })
}

type Key = ([u8; 4], [u8; 4], u16, u16);

fn tcp_traffic(seed: u64, n: usize) -> (Vec<Vec<u8>>, HashMap<Key, u64>) {
    let mut rng = XorShift64::new(seed);
    let flows: Vec<Key> = (0..40)
        .map(|i| {
            (
                [10, 0, (i / 200) as u8, (i % 200) as u8],
                [192, 0, 2, rng.below(8) as u8],
                1024 + rng.below(60000) as u16,
                [80, 443, 554, 22][rng.below(4) as usize],
            )
        })
        .collect();
    let mut counts = HashMap::new();
    let mut pkts = Vec::new();
    for _ in 0..n {
        let b = FrameBuilder::new();
        let p = match rng.below(10) {
            0 => b
                .ipv4([1, 1, 1, 1], [2, 2, 2, 2])
                .udp(53, 53)
                .payload(b"dns")
                .build(),
            1 => b.ipv6([1; 16], [2; 16]).tcp(1, 2, TCP_ACK).build(),
            _ => {
                let f = flows[rng.below(flows.len() as u64) as usize];
                *counts.entry(f).or_insert(0u64) += 1;
                b.ipv4(f.0, f.1)
                    .tcp(f.2, f.3, TCP_ACK)
                    .payload(&[7; 10])
                    .build()
            }
        };
        pkts.push(p);
    }
    (pkts, counts)
}

type Engine = dyn Fn(&[u8], &mut [u64], &mut [u64; NREGS]) -> u64;

#[test]
fn fig6_counts_tcp_flows() {
    let prog = Program::compile(FIG6, &Registry::standard(), 256).unwrap();
    assert_eq!(prog.report().hash_calls, 1);
    let (pkts, counts) = tcp_traffic(6, 5000);
    // Reference: the counter of each flow lives at its hash slot (colliding flows share one).
    let mut want = vec![0u64; 256];
    for (k, n) in &counts {
        let mut key = Vec::new();
        key.extend_from_slice(&k.0);
        key.extend_from_slice(&k.1);
        key.extend_from_slice(&k.2.to_be_bytes());
        key.extend_from_slice(&k.3.to_be_bytes());
        want[(fnv(&key) & 255) as usize] += n;
    }
    let mut engines: Vec<Box<Engine>> = Vec::new();
    let p2 = prog.clone();
    engines.push(Box::new(move |p, m, r| {
        p2.run_interp(p, p.len() as u32, m, r)
    }));
    if netsift_jit::available() {
        let n = prog.native().unwrap();
        engines.push(Box::new(move |p, m, r| n.run(p, p.len() as u32, m, r)));
    }
    for run in &engines {
        let mut mem = vec![0u64; 256];
        let mut regs = [0; NREGS];
        for p in &pkts {
            assert_eq!(run(p, &mut mem, &mut regs), 0);
        }
        assert_eq!(mem, want);
        assert_eq!(mem.iter().sum::<u64>(), counts.values().sum::<u64>());
    }
}

/// One RTSP session (client → server:554 SETUP, server reply, PLAY without Transport) then its
/// data; plus unrelated TCP. Returns the packets and, for each, whether Fig. 7 should pass it.
fn rtsp_traffic(seed: u64) -> (Vec<Vec<u8>>, Vec<bool>, Vec<u64>) {
    let mut rng = XorShift64::new(seed);
    let mut pkts = Vec::new();
    let mut verdicts = Vec::new();
    let mut found = Vec::new();
    let mut known: Vec<u16> = Vec::new();
    for s in 0..20u16 {
        let client = [10, 1, 0, s as u8 + 1];
        let server = [10, 2, 0, 1];
        let cport = 20000 + 2 * s + 2 * rng.below(1000) as u16;
        let sport = 6970 + 2 * s;
        let ctl = 40000 + s;
        // Data to the port before it is negotiated: not passed.
        if s % 3 == 0 {
            pkts.push(
                FrameBuilder::new()
                    .ipv4(server, client)
                    .tcp(sport, cport, TCP_ACK)
                    .payload(&[1; 20])
                    .build(),
            );
            verdicts.push(known.contains(&cport));
        }
        let setup = format!(
            "SETUP rtsp://{}/media/track{s} RTSP/1.0\r\nCSeq: 3\r\nTransport: RTP/AVP/TCP;unicast;client_port={cport}-{}\r\n\r\n",
            "10.2.0.1",
            cport + 1
        );
        pkts.push(
            FrameBuilder::new()
                .ipv4(client, server)
                .tcp(ctl, 554, TCP_PSH | TCP_ACK)
                .payload(setup.as_bytes())
                .build(),
        );
        verdicts.push(false);
        found.push(u64::from(cport));
        known.push(cport);
        let reply = format!(
            "RTSP/1.0 200 OK\r\nCSeq: 3\r\nSession: {s}\r\nTransport: RTP/AVP/TCP;unicast;client_port={cport}-{};server_port={sport}-{}\r\n\r\n",
            cport + 1,
            sport + 1
        );
        pkts.push(
            FrameBuilder::new()
                .ipv4(server, client)
                .tcp(554, ctl, TCP_PSH | TCP_ACK)
                .payload(reply.as_bytes())
                .build(),
        );
        verdicts.push(false);
        found.push(u64::from(cport));
        let play =
            format!("PLAY rtsp://10.2.0.1/media RTSP/1.0\r\nCSeq: 4\r\nSession: {s}\r\n\r\n");
        pkts.push(
            FrameBuilder::new()
                .ipv4(client, server)
                .tcp(ctl, 554, TCP_PSH | TCP_ACK)
                .payload(play.as_bytes())
                .build(),
        );
        verdicts.push(false);
        for _ in 0..rng.below(5) {
            pkts.push(
                FrameBuilder::new()
                    .ipv4(server, client)
                    .tcp(sport, cport, TCP_ACK)
                    .payload(&[2; 100])
                    .build(),
            );
            verdicts.push(true);
            let other = 1024 + rng.below(1000) as u16;
            pkts.push(
                FrameBuilder::new()
                    .ipv4(server, client)
                    .tcp(80, other, TCP_ACK)
                    .payload(&[3; 40])
                    .build(),
            );
            verdicts.push(known.contains(&other));
        }
    }
    (pkts, verdicts, found)
}

#[test]
fn fig7_passes_exactly_the_negotiated_streams() {
    let prog = Program::compile(FIG7, &Registry::standard(), 64).unwrap();
    assert_eq!(prog.report().loops, vec![(16, 64)]);
    assert_eq!(
        prog.report().externs,
        vec!["GetDynTCPDPortFromRTSP".to_string()]
    );
    let (pkts, want, found) = rtsp_traffic(7);
    assert!(want.iter().filter(|v| **v).count() > 10);
    let native = netsift_jit::available().then(|| prog.native().unwrap());
    let mut mi = vec![0u64; 64];
    let mut ri = [0; NREGS];
    let mut mn = mi.clone();
    let mut rn = ri;
    for (i, p) in pkts.iter().enumerate() {
        let v = prog.run_interp(p, p.len() as u32, &mut mi, &mut ri);
        assert_eq!(v != 0, want[i], "packet {i} (interpreter)");
        if let Some(n) = &native {
            assert_eq!(
                n.run(p, p.len() as u32, &mut mn, &mut rn),
                v,
                "packet {i} (native)"
            );
        }
    }
    assert_eq!(ri[0], found.len() as u64);
    assert_eq!(&mi[..found.len()], &found[..]);
    if native.is_some() {
        assert_eq!((mi, ri), (mn, rn));
    }
}

#[test]
fn fig7_as_printed_in_the_paper_is_rejected_as_unbounded() {
    let src = FIG7.replace("R[1] < R[0] && R[1] < 64", "R[1] < R[0]");
    let e = Program::compile(&src, &Registry::standard(), 64).unwrap_err();
    assert_eq!(e.kind(), netsift_fpl::ErrorKind::Unbounded);
    assert_eq!(
        e.to_string(),
        "line 16, column 24: the FOR loop at line 16 has no compile-time bound: its test needs a comparison of R[1] with a constant that the step +1 reaches without wrapping (e.g. `... && R[1] < 64`)"
    );
}
