//! Quick benchmark (no criterion): the paper's Fig. 6 per-flow counter in FPL, native and
//! interpreted, against the same logic written by hand in Rust, on the same packets in the
//! same run. Prints ns/packet and ratios.
//!
//! ```text
//! cargo run --release -p netsift-fpl --example fig6_bench [rounds]
//! ```

use std::hint::black_box;
use std::time::Instant;

use netsift_capture::generate::{FrameBuilder, TCP_ACK, XorShift64};
use netsift_fpl::{NREGS, Program, Registry};

const FIG6: &str = include_str!("fig6.fpl");

/// Fig. 6 by hand, with FPL's semantics: a short packet is not TCP, and a hash range past the
/// captured bytes hashes to 0.
#[inline(never)]
fn fig6_rust(pkt: &[u8], mem: &mut [u64]) -> u64 {
    if pkt.get(23) == Some(&6) {
        let h = match pkt.get(26..38) {
            Some(k) => {
                k.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| {
                    (h ^ u64::from(*x)).wrapping_mul(0x0100_0000_01b3)
                }) & 255
            }
            None => 0,
        };
        mem[h as usize] += 1;
    }
    0
}

fn traffic(n: usize) -> Vec<Vec<u8>> {
    let mut rng = XorShift64::new(1);
    (0..n)
        .map(|_| {
            let b = FrameBuilder::new();
            if rng.below(10) == 0 {
                b.ipv4([1, 1, 1, 1], [2, 2, 2, 2])
                    .udp(53, 53)
                    .payload(b"q")
                    .build()
            } else {
                let c = rng.below(64) as u8;
                b.ipv4([10, 0, 0, c], [192, 0, 2, 1])
                    .tcp(40000 + u16::from(c), 80, TCP_ACK)
                    .payload(&[0; 32])
                    .build()
            }
        })
        .collect()
}

/// An engine under test: its name and one packet's work.
type Named<'a> = (&'static str, &'a mut dyn FnMut(&[u8]) -> u64);

/// ns/packet of one pass over `pkts`.
fn pass(pkts: &[Vec<u8>], rounds: usize, f: &mut dyn FnMut(&[u8]) -> u64) -> f64 {
    let t = Instant::now();
    for _ in 0..rounds {
        for p in pkts {
            black_box(f(black_box(p)));
        }
    }
    t.elapsed().as_nanos() as f64 / (rounds * pkts.len()) as f64
}

/// The machine is shared: run the engines in turn, several times, and keep each one's best.
fn best_of(trials: usize, pkts: &[Vec<u8>], rounds: usize, engines: &mut [Named<'_>]) -> Vec<f64> {
    let mut best = vec![f64::INFINITY; engines.len()];
    for (_, f) in engines.iter_mut() {
        pass(pkts, 1, *f); // warm up
    }
    for _ in 0..trials {
        for (i, (_, f)) in engines.iter_mut().enumerate() {
            best[i] = best[i].min(pass(pkts, rounds, *f));
        }
    }
    for (i, (name, _)) in engines.iter().enumerate() {
        println!("{name:<12} {:8.2} ns/packet", best[i]);
    }
    best
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let pkts = traffic(10_000);
    let prog = Program::compile(FIG6, &Registry::standard(), 256).expect("Fig. 6 compiles");
    println!("Fig. 6 on {} packets x {rounds} rounds", pkts.len());
    println!("{}", prog.report());

    let mut m_rust = vec![0u64; 256];
    let mut m_int = vec![0u64; 256];
    let mut r_int = [0u64; NREGS];
    let mut m_nat = vec![0u64; 256];
    let mut r_nat = [0u64; NREGS];
    let native = match prog.native() {
        Ok(n) => Some(n),
        Err(e) => {
            println!("native code unavailable: {e}");
            None
        }
    };
    let mut rust = |p: &[u8]| fig6_rust(p, &mut m_rust);
    let mut interp = |p: &[u8]| prog.run_interp(p, p.len() as u32, &mut m_int, &mut r_int);
    let mut nat = |p: &[u8]| match &native {
        Some(n) => n.run(p, p.len() as u32, &mut m_nat, &mut r_nat),
        None => 0,
    };
    let mut engines: Vec<Named<'_>> = vec![("rust", &mut rust), ("interpreter", &mut interp)];
    if native.is_some() {
        engines.push(("native", &mut nat));
    }
    let t = best_of(7, &pkts, rounds, &mut engines);
    drop(engines);
    assert_eq!(m_int, m_rust, "interpreter and Rust disagree");
    if native.is_some() {
        assert_eq!(m_nat, m_rust, "native and Rust disagree");
        println!("native / rust        {:6.2}x", t[2] / t[0]);
        println!("interpreter / native {:6.2}x", t[1] / t[2]);
    }
    println!("interpreter / rust   {:6.2}x", t[1] / t[0]);
}
