//! Swift against the interpreter: every corpus expression Swift can express, mapped to passes
//! through the "BPF-friendly" API, gives the verdict of netsift's unoptimised program (which
//! equals libpcap's) on every packet of its link type, whole and cut short.

use std::collections::BTreeMap;

use netsift_bpf::{Filter, Rules, compile};
use netsift_lang::{Context, compile as front};
use netsift_swift::from_pred::from_pred;
use netsift_testkit::corpus;

#[test]
fn corpus_expressions_agree() {
    let by_dlt = corpus::packets_by_dlt();
    let empty = Vec::new();
    let (mut total, mut expressible, mut runs) = (0usize, 0usize, 0u64);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for case in corpus::cases() {
        let lt = corpus::link_type(&case.dlt);
        let packets = by_dlt.get(&(lt.dlt() as i32)).unwrap_or(&empty);
        let mut ctx = Context::new(lt);
        ctx.snaplen = case.snaplen;
        let Ok(pred) = front(&case.expr, &ctx) else {
            continue;
        };
        let opts = compile::Options {
            optimize: false,
            snaplen: case.snaplen,
        };
        let Ok(prog) = compile::compile(&pred, &opts) else {
            continue;
        };
        total += 1;
        let spec = match from_pred(&pred) {
            Ok(s) => s,
            Err(e) => {
                let key =
                    e.0.split(['(', ':'])
                        .next()
                        .unwrap_or("")
                        .trim()
                        .to_string();
                *reasons.entry(key).or_default() += 1;
                continue;
            }
        };
        expressible += 1;
        let interp = Filter::new(prog, Rules::Libpcap).expect("valid");
        let (mut w, mut r) = netsift_swift::open(case.snaplen);
        spec.load(&mut w).expect("loads");
        for (i, (d, l)) in packets.iter().enumerate() {
            let cuts: &[usize] = if i % 7 == 0 {
                &[0, 12, 14, 20, 23, 30, 34, 40, 54]
            } else {
                &[]
            };
            for &cut in std::iter::once(&d.len()).chain(cuts.iter()) {
                let d = &d[..cut.min(d.len())];
                let (a, b) = (interp.run(d, *l), r.run(d, *l));
                assert_eq!(
                    a,
                    b,
                    "[{}] {:?}: packet {i} ({} of {l} bytes): interpreter {a}, Swift {b}\n{spec:#?}",
                    case.dlt,
                    case.expr,
                    d.len()
                );
                runs += 1;
            }
        }
    }
    println!(
        "Swift = interpreter (-O0): {expressible} of {total} corpus expression/link-type cases expressible, {runs} runs, 0 differences"
    );
    for (k, n) in &reasons {
        println!("  not expressible ({n}): {k}");
    }
    assert!(
        expressible * 10 >= total * 7,
        "fewer than 70% of the corpus expressible: {expressible}/{total}"
    );
}
