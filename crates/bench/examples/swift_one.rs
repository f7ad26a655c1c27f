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
    // The hand-written Rust of the same filter, in the same loop shape.
    let hand = netsift_bench::handwritten::ALL[n - 1];
    let mut acc2 = 0u64;
    let t = std::time::Instant::now();
    for _ in 0..rounds {
        out.clear();
        out.extend(packets.iter().map(|p| hand(std::hint::black_box(&p.data))));
        acc2 += out.iter().map(|&v| u64::from(v != 0)).sum::<u64>();
    }
    let hand_ns = t.elapsed().as_nanos() as f64 / (rounds * packets.len()) as f64;
    // The interpreter on libpcap's program for the same expression, in the same loop shape.
    let expr = &workload::swift_table5()[n - 1].expr;
    let lib = netsift_bench::libpcap::Libpcap::load().expect("libpcap");
    let prog = lib.compile(1, 262_144, expr, true).expect("compiles");
    let interp = netsift_bpf::Filter::new(prog.program().clone(), netsift_bpf::Rules::Libpcap)
        .expect("valid");
    let t = std::time::Instant::now();
    for _ in 0..rounds {
        out.clear();
        out.extend(
            packets
                .iter()
                .map(|p| interp.run(std::hint::black_box(&p.data), p.wire_len)),
        );
    }
    let interp_ns = t.elapsed().as_nanos() as f64 / (rounds * packets.len()) as f64;
    println!(
        "interpreter {interp_ns:.2} ns/packet, {:.2}x Swift's time",
        interp_ns / ns
    );
    println!(
        "filter {n}: swift {ns:.2} ns/packet ({acc} accepted), hand-written {hand_ns:.2} ({acc2}), \
         ratio {:.2}",
        ns / hand_ns
    );
}
