//! The capture loop's per-packet path as netsiftd runs it for K libpcap copies: one shared
//! group in memory files, K flows sharing one IBuf (or not, `--no-share`), packets pushed from a
//! source node, the readers draining after each batch. Prints ns per packet pushed.
//!
//! `cargo run --release -p netsift-graph --example daemon_path -- [K] [ROUNDS] [--no-share]`

use std::time::Instant;

use netsift_graph::buffer::Preference;
use netsift_graph::{FlowOptions, Runtime};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let k: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(4);
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let share = !args.iter().any(|a| a == "--no-share");
    let frames = netsift_capture::generate::mixed_traffic(7, 4096);
    let mut rt = Runtime::new(
        netsift_graph::standard_registry(),
        netsift_graph::policy::Policy::allow_all(),
    );
    rt.set_shared_memory(true);
    let opts = FlowOptions {
        preference: Preference::SlowReader,
        slots: 32768,
        slot_size: 256,
        max_packet: 262_144,
        ibuf: 32768,
        share_ibuf: share,
        ..FlowOptions::default()
    };
    let mut flows = Vec::new();
    for _ in 0..k {
        flows.push(rt.open("(gen,1,0)", opts.clone()).expect("flow"));
    }
    let src = rt.node_of(flows[0].0, 0).expect("source");
    let mut pushed = 0u64;
    let mut read = 0u64;
    let mut spent = 0f64;
    for _ in 0..rounds {
        let t = Instant::now();
        for p in &frames {
            rt.push_data(src, &p.data, p.wire_len, p.timestamp);
        }
        spent += t.elapsed().as_secs_f64();
        pushed += frames.len() as u64;
        for (_, r) in &mut flows {
            while r.next().is_some() {
                read += 1;
            }
            r.release();
        }
    }
    println!(
        "K={k} share={share}: {:.1} ns per packet pushed ({pushed} pushed, {read} read)",
        spent * 1e9 / pushed as f64
    );
}
