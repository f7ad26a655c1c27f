//! Run one Swift Table 5 filter over the workload many times (for profilers):
//! `cargo run --release -p netsift-bench --example swift_one -- N [ROUNDS]`.
use netsift_bench::swift_table5::{Form, filter};
use netsift_bench::workload;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let packets = workload::packets(workload::SEED, 4096);
    let (mut w, mut r) = netsift_swift::open(262_144);
    filter(n, Form::Full).load(&mut w).expect("loads");
    let mut out = Vec::new();
    let mut acc = 0u64;
    let t = std::time::Instant::now();
    for _ in 0..rounds {
        r.run_batch(
            packets.iter().map(|p| (p.data.as_slice(), p.wire_len)),
            &mut out,
        );
        acc += out.iter().map(|&v| u64::from(v != 0)).sum::<u64>();
    }
    let ns = t.elapsed().as_nanos() as f64 / (rounds * packets.len()) as f64;
    println!("filter {n}: {ns:.2} ns/packet ({acc} accepted)");
}
