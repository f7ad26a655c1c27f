//! How often libpcap's own optimised and unoptimised programs disagree on the shared corpus.
use netsift_testkit::{corpus, data, oracle};

fn main() {
    let by_dlt = corpus::packets_by_dlt();
    let mut exprs: Vec<(String, String)> = Vec::new();
    for r in data::libpcap_table("accept.tsv") {
        exprs.push((r.get("dlt").to_string(), r.get("expr").to_string()));
    }
    for r in data::libpcap_table("apply.tsv") {
        exprs.push(("*".into(), r.get("expr").to_string()));
    }
    exprs.sort();
    exprs.dedup();
    let (mut total, mut diff_exprs) = (0u64, 0);
    for name in corpus::LINK_TYPES {
        let dlt = oracle::dlt_from_name(name).unwrap();
        let pk = corpus::packets_of(&by_dlt, dlt);
        for (d, e) in &exprs {
            if d != name && d != "*" {
                continue;
            }
            let (Ok(o), Ok(u)) = (
                oracle::compile(dlt, 262144, e, true),
                oracle::compile(dlt, 262144, e, false),
            ) else {
                continue;
            };
            let mut nd = 0;
            for (p, l) in pk {
                total += 1;
                if oracle::filter(&o, p, *l) != oracle::filter(&u, p, *l) {
                    nd += 1;
                }
            }
            if nd > 0 {
                diff_exprs += 1;
                println!("{name} {e:?}: {nd} packets differ");
            }
        }
    }
    println!("total verdict pairs {total}, expressions with differences {diff_exprs}");
}
