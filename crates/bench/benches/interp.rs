//! Criterion benchmark: netsift's classic BPF interpreter against libpcap's `bpf_filter`, on the
//! same programs (compiled by libpcap) and the same packets, in one run.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use netsift_bench::{libpcap::Libpcap, workload};
use netsift_bpf::{Filter, Rules};

fn interp(c: &mut Criterion) {
    let lib = Libpcap::load().expect("libpcap is the baseline");
    let packets = workload::packets(workload::SEED, 4096);
    let mut group = c.benchmark_group("interp");
    group.throughput(Throughput::Elements(packets.len() as u64));
    for f in workload::interp_filters() {
        let theirs = lib
            .compile(1, 262_144, &f.expr, true)
            .expect("libpcap compiles it");
        let ours = Filter::new(theirs.program().clone(), Rules::Libpcap).expect("valid");
        group.bench_function(format!("{}/libpcap", f.name), |b| {
            b.iter(|| {
                packets
                    .iter()
                    .map(|p| theirs.run(std::hint::black_box(&p.data), p.wire_len))
                    .fold(0u32, u32::wrapping_add)
            })
        });
        group.bench_function(format!("{}/netsift", f.name), |b| {
            b.iter(|| {
                packets
                    .iter()
                    .map(|p| ours.run(std::hint::black_box(&p.data), p.wire_len))
                    .fold(0u32, u32::wrapping_add)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, interp);
criterion_main!(benches);
