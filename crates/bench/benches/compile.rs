//! Criterion benchmark: netsift's filter compiler (parse, lower, optimise, lay out) against
//! libpcap's `pcap_compile` (optimised, on one dead handle), on the Swift paper's Table 5 filters and a 200-host
//! expression, in one run.

use criterion::{Criterion, criterion_group, criterion_main};
use netsift_bench::{libpcap::Libpcap, suite, workload};

fn compile(c: &mut Criterion) {
    let lib = Libpcap::load().expect("libpcap is the baseline");
    let dead = lib.dead(1, 262_144).expect("pcap_open_dead");
    let mut group = c.benchmark_group("compile");
    for f in workload::compile_filters() {
        let cexpr = std::ffi::CString::new(f.expr.as_str()).expect("no NUL");
        group.bench_function(format!("{}/libpcap", f.name), |b| {
            b.iter(|| dead.compile_len(std::hint::black_box(&cexpr), true))
        });
        group.bench_function(format!("{}/netsift", f.name), |b| {
            b.iter(|| suite::netsift_compile(std::hint::black_box(&f.expr)))
        });
    }
    group.finish();
}

criterion_group!(benches, compile);
criterion_main!(benches);
