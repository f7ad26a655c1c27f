//! Criterion benchmark: the Swift paper's Table 5 filters on the gateway-like mix, run by
//! netsift's interpreter, netsift's JIT, libpcap's `bpf_filter` (all three on the program
//! libpcap compiles) and a hand-written Rust function per filter, in one run; and the JIT's
//! compile latency.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use netsift_bench::{handwritten, libpcap::Libpcap, workload};
use netsift_bpf::{Filter, Rules};
use netsift_jit::JitFilter;

fn engines(c: &mut Criterion) {
    let lib = Libpcap::load().expect("libpcap is the baseline");
    let packets = workload::packets(workload::SEED, 4096);
    let mut group = c.benchmark_group("jit");
    group.throughput(Throughput::Elements(packets.len() as u64));
    for (f, hand) in workload::swift_table5().into_iter().zip(handwritten::ALL) {
        let theirs = lib
            .compile(1, 262_144, &f.expr, true)
            .expect("libpcap compiles it");
        let interp = Filter::new(theirs.program().clone(), Rules::Libpcap).expect("valid");
        let jit =
            JitFilter::new(theirs.program().clone(), Rules::Libpcap).expect("the JIT compiles it");
        for p in &packets {
            let v = interp.run(&p.data, p.wire_len);
            assert_eq!(jit.run(&p.data, p.wire_len), v);
            assert_eq!(
                hand(&p.data),
                v,
                "{}: the hand-written function differs",
                f.name
            );
        }
        macro_rules! bench {
            ($name:expr, $run:expr) => {
                group.bench_function(format!("{}/{}", f.name, $name), |b| {
                    b.iter(|| {
                        packets
                            .iter()
                            .map(|p| $run(std::hint::black_box(p.data.as_slice()), p.wire_len))
                            .fold(0u32, u32::wrapping_add)
                    })
                });
            };
        }
        bench!("libpcap", |d: &[u8], l| theirs.run(d, l));
        bench!("interp", |d: &[u8], l| interp.run(d, l));
        bench!("jit", |d: &[u8], l| jit.run(d, l));
        bench!("rust", |d: &[u8], _l| hand(d));
        let mut out = Vec::with_capacity(packets.len());
        group.bench_function(format!("{}/jit-batch", f.name), |b| {
            b.iter(|| {
                jit.run_batch(
                    packets
                        .iter()
                        .map(|p| (std::hint::black_box(p.data.as_slice()), p.wire_len)),
                    &mut out,
                );
                out.iter().fold(0u32, |a, &v| a.wrapping_add(v))
            })
        });
    }
    group.finish();
}

fn compile_latency(c: &mut Criterion) {
    let lib = Libpcap::load().expect("libpcap");
    let f6 = workload::swift_table5().pop().expect("filter 6");
    let prog = lib
        .compile(1, 262_144, &f6.expr, true)
        .expect("compiles")
        .program()
        .clone();
    // A 100-instruction program: filter 6 (95) padded with loads at growing offsets.
    let mut insns = prog.insns().to_vec();
    let tail = insns.split_off(insns.len() - 2);
    while insns.len() + tail.len() < 100 {
        insns.push(netsift_bpf::Insn::stmt(
            netsift_bpf::code::LD | netsift_bpf::code::B | netsift_bpf::code::ABS,
            insns.len() as u32,
        ));
    }
    insns.extend(tail);
    let p100 = netsift_bpf::Program::new(insns);
    let mut group = c.benchmark_group("jit_compile");
    group.bench_function("swift-6 (95 insns)", |b| {
        b.iter(|| {
            JitFilter::new(prog.clone(), Rules::Libpcap)
                .expect("compiles")
                .code_len()
        })
    });
    group.bench_function("100 insns", |b| {
        b.iter(|| {
            JitFilter::new(p100.clone(), Rules::Libpcap)
                .expect("compiles")
                .code_len()
        })
    });
    group.finish();
}

criterion_group!(benches, engines, compile_latency);
criterion_main!(benches);
