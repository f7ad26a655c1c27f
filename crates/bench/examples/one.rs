//! Run one interpreter benchmark filter on one engine, for profilers:
//! `cargo run --release -p netsift-bench --example one -- FILTER_INDEX netsift|libpcap [ROUNDS]`.

use netsift_bench::{libpcap::Libpcap, workload};
use netsift_bpf::{Filter, Rules};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let idx: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let engine = args.get(2).map_or("netsift", String::as_str);
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20);
    let lib = Libpcap::load().expect("libpcap");
    let f = &workload::interp_filters()[idx];
    let packets = workload::packets(workload::SEED, 4096);
    let theirs = lib.compile(1, 262_144, &f.expr, true).expect("compiles");
    let ours = Filter::new(theirs.program().clone(), Rules::Libpcap).expect("valid");
    let mut sum = 0u32;
    for _ in 0..rounds {
        for p in &packets {
            sum = sum.wrapping_add(match engine {
                "libpcap" => theirs.run(std::hint::black_box(&p.data), p.wire_len),
                _ => ours.run(std::hint::black_box(&p.data), p.wire_len),
            });
        }
    }
    println!("{} {engine}: {sum}", f.name);
}
