//! Criterion benchmark: rule-set classification of the ClassBench 10K traces (acl1, fw1, ipc1)
//! with PaCuts (one header at a time, and batched), HyperCuts and HiCuts; linear on the first
//! 2,000 headers (it is about a hundred times slower).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use netsift_bench::classify::SETS;
use netsift_classify::{Header, classbench, engine, pacuts};

fn lookups(c: &mut Criterion) {
    for (set, _, _) in SETS {
        let (rules, trace) = classbench::load_pair(set).expect("shared data");
        let headers: Vec<Header> = trace.iter().map(|t| t.header).collect();
        let mut group = c.benchmark_group(format!("classify/{set}"));
        group.sample_size(20);
        group.throughput(Throughput::Elements(headers.len() as u64));
        for kind in [
            engine::Kind::PaCuts,
            engine::Kind::HyperCuts,
            engine::Kind::HiCuts,
        ] {
            let b = engine::build(kind, &rules);
            group.bench_function(kind.name(), |bench| {
                bench.iter(|| {
                    headers
                        .iter()
                        .map(|h| b.engine.classify(std::hint::black_box(h)).unwrap_or(0))
                        .fold(0usize, usize::wrapping_add)
                })
            });
        }
        let pa = pacuts::PaCuts::new(&rules, pacuts::Params::default());
        let mut out = vec![None; headers.len()];
        group.bench_function("pacuts-batch", |bench| {
            bench.iter(|| {
                pa.classify_all(std::hint::black_box(&headers), &mut out);
                out.len()
            })
        });
        let few = &headers[..2000.min(headers.len())];
        group.throughput(Throughput::Elements(few.len() as u64));
        let lin = engine::build(engine::Kind::Linear, &rules);
        group.bench_function("linear", |bench| {
            bench.iter(|| {
                few.iter()
                    .map(|h| lin.engine.classify(std::hint::black_box(h)).unwrap_or(0))
                    .fold(0usize, usize::wrapping_add)
            })
        });
        group.finish();
    }
}

criterion_group!(benches, lookups);
criterion_main!(benches);
