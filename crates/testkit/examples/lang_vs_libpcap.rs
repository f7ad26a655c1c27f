//! Development report: netsift's compiler against libpcap's on the shared corpus.
//! `cargo run --release -p netsift-testkit --example lang_vs_libpcap [-- -O0|-O] [FILTER]`
use netsift_bpf::{Filter, Rules, compile};
use netsift_lang::{Context, compile as front};
use netsift_testkit::{corpus, oracle};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let optimize = !args.iter().any(|a| a == "-O0");
    let only = args.iter().find(|a| !a.starts_with('-')).cloned();
    let by_dlt = corpus::packets_by_dlt();
    let (mut n, mut both_err, mut we_err, mut they_err, mut verdict_bad, mut runs) =
        (0, 0, 0, 0, 0, 0u64);
    for c in corpus::cases() {
        if only.as_ref().is_some_and(|o| !c.expr.contains(o.as_str())) {
            continue;
        }
        n += 1;
        let dlt = oracle::dlt_from_name(&c.dlt).unwrap();
        let theirs = oracle::compile(dlt, c.snaplen as i32, &c.expr, optimize);
        let mut ctx = Context::new(corpus::link_type(&c.dlt));
        ctx.snaplen = c.snaplen;
        let ours = front(&c.expr, &ctx)
            .map_err(|e| e.to_string())
            .and_then(|p| {
                compile::compile(
                    &p,
                    &compile::Options {
                        optimize,
                        snaplen: c.snaplen,
                    },
                )
                .map_err(|e| e.to_string())
            });
        match (&ours, &theirs) {
            (Err(_), Err(_)) => {
                both_err += 1;
                continue;
            }
            (Err(e), Ok(_)) => {
                we_err += 1;
                println!(
                    "WE REJECT [{}] {:?}: {}",
                    c.dlt,
                    c.expr,
                    e.lines().next().unwrap_or("")
                );
                continue;
            }
            (Ok(_), Err(e)) => {
                they_err += 1;
                println!("THEY REJECT [{}] {:?}: {}", c.dlt, c.expr, e);
                continue;
            }
            _ => {}
        }
        let (ours, theirs) = (ours.unwrap(), theirs.unwrap());
        let f = match Filter::new(ours.clone(), Rules::Libpcap) {
            Ok(f) => f,
            Err(e) => {
                println!("INVALID [{}] {:?}: {e}", c.dlt, c.expr);
                verdict_bad += 1;
                continue;
            }
        };
        let mut bad = 0;
        let mut first = None;
        for (i, (p, l)) in corpus::packets_of(&by_dlt, dlt).iter().enumerate() {
            runs += 1;
            let a = f.run(p, *l);
            let b = oracle::filter(&theirs, p, *l).unwrap();
            if a != b {
                bad += 1;
                if first.is_none() {
                    first = Some((i, a, b, p.len()));
                }
            }
        }
        if bad > 0 {
            verdict_bad += 1;
            println!(
                "VERDICT [{}] {:?}: {bad} packets differ, first {:?}",
                c.dlt, c.expr, first
            );
        }
    }
    println!(
        "cases {n}: both reject {both_err}, only netsift rejects {we_err}, only libpcap rejects {they_err}, verdict mismatches {verdict_bad}, verdicts {runs}"
    );
}
