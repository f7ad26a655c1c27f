//! The JIT against the interpreter (the reference): every program of the shared verdict corpus
//! (netsift's optimised and unoptimised code and libpcap's, for every link type the compiler
//! supports) on every packet of that link type, whole and cut short; and random
//! validator-approved programs on random packets.

use netsift_bpf::{Filter, Program, Rules, compile};
use netsift_jit::JitFilter;
use netsift_lang::{Context, compile as front};
use netsift_testkit::progen::{random_program, random_program_wide};
use netsift_testkit::{corpus, oracle, rng::Rng};

fn check(prog: &Program, rules: Rules, packets: &[(Vec<u8>, u32)], what: &str) -> u64 {
    let interp = Filter::new(prog.clone(), rules).expect("valid");
    let jit = JitFilter::new(prog.clone(), rules)
        .unwrap_or_else(|e| panic!("{what}: the JIT refuses a valid program: {e}"));
    let mut n = 0;
    for (i, (d, l)) in packets.iter().enumerate() {
        // Whole, and (for every 5th packet) cut at a few places.
        let cuts: &[usize] = if i % 5 == 0 {
            &[0, 1, 13, 14, 20, 33, 34, 40, 54]
        } else {
            &[]
        };
        for &cut in std::iter::once(&d.len()).chain(cuts.iter()) {
            let d = &d[..cut.min(d.len())];
            let (a, b) = (interp.run(d, *l), jit.run(d, *l));
            assert_eq!(
                a,
                b,
                "{what}: packet {i} ({} of {l} bytes): interpreter {a}, JIT {b}\n{:?}",
                d.len(),
                prog
            );
            n += 1;
        }
    }
    // The batch entries agree too.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    interp.run_batch(packets.iter().map(|(d, l)| (d.as_slice(), *l)), &mut a);
    jit.run_batch(packets.iter().map(|(d, l)| (d.as_slice(), *l)), &mut b);
    assert_eq!(a, b, "{what}: batch results differ");
    n
}

#[test]
fn corpus_programs_agree() {
    let by_dlt = corpus::packets_by_dlt();
    let (mut progs, mut runs) = (0u64, 0u64);
    let empty = Vec::new();
    for case in corpus::cases() {
        let lt = corpus::link_type(&case.dlt);
        let dlt = lt.dlt() as i32;
        let packets = by_dlt.get(&dlt).unwrap_or(&empty);
        let mut ctx = Context::new(lt);
        ctx.snaplen = case.snaplen;
        if let Ok(pred) = front(&case.expr, &ctx) {
            for optimize in [false, true] {
                let opts = compile::Options {
                    optimize,
                    snaplen: case.snaplen,
                };
                if let Ok(p) = compile::compile(&pred, &opts) {
                    runs += check(
                        &p,
                        Rules::Libpcap,
                        packets,
                        &format!("[{}] {:?} -O{}", case.dlt, case.expr, u8::from(optimize)),
                    );
                    progs += 1;
                }
            }
        }
        if let Ok(p) = oracle::compile(dlt, case.snaplen as i32, &case.expr, true) {
            runs += check(
                &p,
                Rules::Libpcap,
                packets,
                &format!("[{}] {:?} libpcap", case.dlt, case.expr),
            );
            progs += 1;
        }
    }
    println!(
        "JIT = interpreter: {progs} corpus programs, {runs} runs (whole and truncated packets)"
    );
    assert!(
        progs > 2000,
        "the corpus is smaller than expected: {progs} programs"
    );
}

fn random_packets(rng: &mut Rng, n: usize) -> Vec<(Vec<u8>, u32)> {
    (0..n)
        .map(|_| {
            let len = rng.below(120) as usize;
            let mut d = vec![0u8; len];
            for b in &mut d {
                *b = if rng.chance(1, 3) {
                    rng.below(16) as u8
                } else {
                    rng.next_u32() as u8
                };
            }
            let wire = len as u32 + rng.below(3) as u32;
            (d, wire)
        })
        .collect()
}

#[test]
fn random_programs_agree() {
    let mut rng = Rng::new(0x6a17_0001);
    let mut runs = 0;
    for case in 0..6000 {
        let packets = random_packets(&mut rng, 24);
        let (p, rules) = match case % 3 {
            0 => (random_program(&mut rng), Rules::Kernel),
            1 => (random_program_wide(&mut rng, false), Rules::Libpcap),
            _ => (random_program_wide(&mut rng, true), Rules::Libpcap),
        };
        if Filter::new(p.clone(), rules).is_err() {
            continue;
        }
        runs += check(&p, rules, &packets, &format!("random program {case}"));
    }
    println!("JIT = interpreter: 6000 random programs, {runs} runs");
}
