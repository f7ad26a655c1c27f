//! Developer probe: send frames across a veth pair in a fresh namespace and capture them with
//! both live sources. `cargo run --release -p netsift-testkit --example live_probe -- [xdp]`
use std::time::{Duration, Instant};

use netsift_capture::generate::FrameBuilder;
use netsift_capture::live::{AfPacket, AfPacketConfig, AfXdp, AfXdpConfig, Flow, Sender, Source};
use netsift_testkit::netns::Lab;

fn main() {
    let xdp = std::env::args().any(|a| a == "xdp");
    let lab = Lab::new().expect("lab");
    let frames: Vec<Vec<u8>> = (0..200u16)
        .map(|i| {
            let mut b = FrameBuilder::new()
                .ipv4([198, 18, 0, 1], [198, 18, 0, 2])
                .udp(1000 + i, 53)
                .payload(&i.to_be_bytes());
            if i % 4 == 0 {
                b = b.vlan(100 + i);
            }
            b.build()
        })
        .collect();
    let (a, b) = (lab.a.clone(), lab.b.clone());
    let got = lab.run(move || {
        let mut src: Box<dyn Source> = if xdp {
            Box::new(AfXdp::open(&b, &AfXdpConfig::default()).expect("afxdp"))
        } else {
            Box::new(AfPacket::open(&b, &AfPacketConfig::default()).expect("afpacket"))
        };
        println!("{}", src.describe());
        let mut tx = Sender::open(&a).expect("sender");
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        tx.send_all(&refs).expect("send");
        let mut got: Vec<(Vec<u8>, u32)> = Vec::new();
        let t = Instant::now();
        while got.len() < frames.len() && t.elapsed() < Duration::from_secs(3) {
            src.poll_batch(Some(Duration::from_millis(200)), &mut |p| {
                got.push((p.data.to_vec(), p.wire_len));
                Flow::Continue
            })
            .expect("poll");
        }
        println!("stats {:?}", src.stats().expect("stats"));
        let mismatches = got
            .iter()
            .zip(&frames)
            .filter(|((g, _), f)| g != *f)
            .count();
        println!(
            "sent {} got {} mismatches {}",
            frames.len(),
            got.len(),
            mismatches
        );
        for ((g, l), f) in got.iter().zip(&frames).take(6) {
            println!(
                "len {} wire {} sent {} equal {}",
                g.len(),
                l,
                f.len(),
                g == f
            );
        }
        got.len()
    });
    println!("{got}");
}
