//! Criterion benchmark: netsift's filter compiler (parse, lower, optimise, lay out) against
//! libpcap's `pcap_compile` (optimised), on the Swift paper's Table 5 filters and a 200-host
//! expression, in one run.

use criterion::{Criterion, criterion_group, criterion_main};
use netsift_bench::{libpcap::Libpcap, suite, workload};

fn compile(c: &mut Criterion) {
    let lib = Libpcap::load().expect("libpcap is the baseline");
    let mut group = c.benchmark_group("compile");
    for f in workload::compile_filters() {
        group.bench_function(format!("{}/libpcap", f.name), |b| {
            b.iter(|| {
                lib.compile(1, 262_144, std::hint::black_box(&f.expr), true)
                    .map(|p| p.program().len())
            })
        });
        group.bench_function(format!("{}/netsift", f.name), |b| {
            b.iter(|| suite::netsift_compile(std::hint::black_box(&f.expr)))
        });
    }
    group.finish();
}

criterion_group!(benches, compile);
criterion_main!(benches);
