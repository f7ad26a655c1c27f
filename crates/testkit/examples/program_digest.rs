//! Development check for compiler refactorings: a digest of every program netsift compiles
//! from the corpus expressions (every supported link type, optimised and not) and from
//! `COUNT` random expressions (`SEED`), so that two builds can be compared:
//! `cargo run --release -p netsift-testkit --example program_digest -- [COUNT] [SEED] [DUMP_FILE]`.
//! The dump file, when given, holds one line per compilation (expression, flag, program or
//! error) for `diff`.
use std::fmt::Write as _;
use std::hash::Hasher;

use netsift_bpf::compile;
use netsift_lang::{Context, compile as front};
use netsift_testkit::exprgen;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let count: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let dump = args.get(3);
    let mut lines = String::new();
    let mut h = netsift_lang::fxhash::FxHasher::default();
    let mut n = 0usize;
    let mut one = |expr: &str, ctx: &Context| {
        for optimize in [false, true] {
            // Lowered for the level, as `netsift compile [-O0]` does.
            let pred = front(expr, &Context { optimize, ..*ctx });
            let text = match &pred {
                Err(e) => format!("error {e}"),
                Ok(pred) => {
                    let opts = compile::Options {
                        optimize,
                        snaplen: ctx.snaplen,
                    };
                    match compile::compile(pred, &opts) {
                        Ok(p) => format!("{:?}", p.insns()),
                        Err(e) => format!("error {e}"),
                    }
                }
            };
            h.write(text.as_bytes());
            n += 1;
            if dump.is_some() {
                let _ = writeln!(lines, "{expr}\t{optimize}\t{text}");
            }
        }
    };
    exprgen::corpus_and_random(count, seed, &mut one);
    if let Some(path) = dump
        && let Err(e) = std::fs::write(path, &lines)
    {
        eprintln!("cannot write {path}: {e}");
        std::process::exit(1);
    }
    println!("{n} compilations, digest {:016x}", h.finish());
}
