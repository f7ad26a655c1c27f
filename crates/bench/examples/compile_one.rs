//! Compile one benchmark filter many times, timing each stage, for profilers:
//! `cargo run --release -p netsift-bench --example compile_one -- INDEX|EXPR [ROUNDS] [whole]`;
//! with `whole`, only the whole optimised pipeline runs (as `netsift bench compile` times it).
use std::time::Instant;
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use netsift_bench::workload;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    // INDEX is a benchmark filter's index, or any other expression.
    let f = &match args.get(1).map(|s| (s, s.parse::<usize>())) {
        Some((_, Ok(idx))) => workload::compile_filters().swap_remove(idx),
        Some((expr, Err(_))) => workload::NamedFilter {
            name: "expr",
            expr: expr.clone(),
        },
        None => workload::compile_filters().swap_remove(2),
    };
    if args.get(3).map(String::as_str) == Some("whole") {
        let mut n = 0;
        let t = Instant::now();
        for _ in 0..rounds {
            n += netsift_bench::suite::netsift_compile(std::hint::black_box(&f.expr)).unwrap_or(0);
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / rounds as f64;
        println!("{}: whole pipeline {us:.3}us ({n})", f.name);
        return;
    }
    let ctx = netsift_lang::Context::new(netsift_capture::LinkType::ETHERNET);
    let (mut t_lex, mut t_parse, mut t_lower, mut t_opt, mut t_unopt) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let mut n = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        let toks = netsift_lang::lexer::tokenize(&f.expr).unwrap();
        t_lex += t.elapsed().as_secs_f64();
        n += toks.len();
        let t = Instant::now();
        let ast = netsift_lang::parse(&f.expr).unwrap();
        t_parse += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let pred = netsift_lang::lower(ast.as_ref(), &f.expr, &ctx).unwrap();
        t_lower += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let p = netsift_bpf::compile::compile(&pred, &netsift_bpf::compile::Options::default())
            .unwrap();
        t_opt += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let q = netsift_bpf::compile::compile(
            &pred,
            &netsift_bpf::compile::Options {
                optimize: false,
                snaplen: 65535,
            },
        )
        .unwrap();
        t_unopt += t.elapsed().as_secs_f64();
        n += p.len() + q.len();
    }
    let us = |t: f64| t * 1e6 / rounds as f64;
    println!(
        "{}: lex {:.2}us, lex+parse {:.2}us, lower {:.2}us, optimise {:.2}us, unoptimised {:.2}us ({n})",
        f.name,
        us(t_lex),
        us(t_parse),
        us(t_lower),
        us(t_opt),
        us(t_unopt)
    );
}
