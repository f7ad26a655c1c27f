//! Criterion benchmark: Swift on the Swift paper's Table 5 filters (static filtering) against
//! netsift's interpreter, libpcap's `bpf_filter` and the hand-written functions; Table 7's
//! ablations (SIMD off, hierarchical execution off); and the "BPF-friendly" mapping of the same
//! expressions.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use netsift_bench::swift_table5::{Form, filter};
use netsift_bench::{handwritten, libpcap::Libpcap, workload};
use netsift_bpf::{Filter, Rules};
use netsift_lang::{Context, compile};
use netsift_wire::LinkType;

fn statics(c: &mut Criterion) {
    let lib = Libpcap::load().expect("libpcap is the baseline");
    let packets = workload::packets(workload::SEED, 4096);
    let mut group = c.benchmark_group("swift");
    group.throughput(Throughput::Elements(packets.len() as u64));
    for (k, (f, hand)) in workload::swift_table5()
        .into_iter()
        .zip(handwritten::ALL)
        .enumerate()
    {
        let n = k + 1;
        let theirs = lib
            .compile(1, 262_144, &f.expr, true)
            .expect("libpcap compiles it");
        let interp = Filter::new(theirs.program().clone(), Rules::Libpcap).expect("valid");
        let mut variants: Vec<(&str, netsift_swift::Writer, netsift_swift::Reader)> = Vec::new();
        let mut add =
            |name: &'static str, spec: netsift_swift::build::FilterSpec, hier: bool, simd: bool| {
                let (mut w, mut r) = netsift_swift::open(262_144);
                spec.load(&mut w).expect("loads");
                r.set_hierarchical(hier);
                // "SIMD off" also turns off the engine's fusion of runs into one set test.
                r.set_fusion(simd);
                variants.push((name, w, r));
            };
        add("swift", filter(n, Form::Full), true, true);
        if n >= 5 {
            add("swift-nosimd", filter(n, Form::NoSimd), true, false);
            add("swift-nosimd-nohier", filter(n, Form::NoSimd), false, false);
        }
        let pred = compile(&f.expr, &Context::new(LinkType::ETHERNET)).expect("compiles");
        if let Ok(spec) = netsift_swift::from_pred::from_pred(&pred) {
            add("swift-text", spec, true, true);
        }
        let mut out = Vec::new();
        for (name, _, r) in &mut variants {
            r.run_batch(
                packets.iter().map(|p| (p.data.as_slice(), p.wire_len)),
                &mut out,
            );
            for (p, &v) in packets.iter().zip(&out) {
                assert_eq!(
                    v,
                    interp.run(&p.data, p.wire_len),
                    "{} {name}: Swift differs",
                    f.name
                );
                assert_eq!(hand(&p.data), v);
            }
        }
        group.bench_function(format!("{}/libpcap", f.name), |b| {
            b.iter(|| {
                packets
                    .iter()
                    .map(|p| theirs.run(std::hint::black_box(&p.data), p.wire_len))
                    .fold(0u32, u32::wrapping_add)
            })
        });
        group.bench_function(format!("{}/interp", f.name), |b| {
            b.iter(|| {
                packets
                    .iter()
                    .map(|p| interp.run(std::hint::black_box(&p.data), p.wire_len))
                    .fold(0u32, u32::wrapping_add)
            })
        });
        group.bench_function(format!("{}/rust", f.name), |b| {
            b.iter(|| {
                packets
                    .iter()
                    .map(|p| hand(std::hint::black_box(&p.data)))
                    .fold(0u32, u32::wrapping_add)
            })
        });
        for (name, _, r) in &mut variants {
            group.bench_function(format!("{}/{name}", f.name), |b| {
                b.iter(|| {
                    r.run_batch(
                        packets
                            .iter()
                            .map(|p| (std::hint::black_box(p.data.as_slice()), p.wire_len)),
                        &mut out,
                    );
                    out.iter().fold(0u32, |a, &v| a.wrapping_add(v))
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, statics);
criterion_main!(benches);
