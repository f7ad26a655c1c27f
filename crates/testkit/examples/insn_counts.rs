//! Development report: netsift's optimised instruction counts against libpcap master's (the
//! expected dumps of accept.tsv) and libpcap 1.10.3's, EN10MB.
use netsift_bpf::compile;
use netsift_lang::{Context, compile as front};
use netsift_testkit::{data, oracle};

fn main() {
    let verbose = std::env::args().any(|a| a == "-v");
    let (mut n, mut le, mut eq, mut gt, mut tot_ns, mut tot_m, mut tot_o) = (0, 0, 0, 0, 0, 0, 0);
    let mut worse = Vec::new();
    for r in data::libpcap_table("accept.tsv") {
        if r.get("dlt") != "EN10MB"
            || r.get("optimize") != "1"
            || r.get("label").starts_with("accept_bpf_image")
        {
            continue;
        }
        let expr = r.get("expr");
        let snaplen = r.get("snaplen").parse().unwrap_or(262_144);
        let master = r.get_multiline("expected_bpf_dump").lines().count();
        let Ok(old) = oracle::compile(1, snaplen as i32, expr, true) else {
            continue;
        };
        let mut ctx = Context::new(netsift_wire::LinkType::ETHERNET);
        ctx.snaplen = snaplen;
        let ours = match front(expr, &ctx).map_err(|e| e.to_string()).and_then(|p| {
            compile::compile(
                &p,
                &compile::Options {
                    optimize: true,
                    snaplen,
                },
            )
            .map_err(|e| e.to_string())
        }) {
            Ok(p) => p.len(),
            Err(e) => {
                println!("ERROR {expr:?}: {e}");
                continue;
            }
        };
        n += 1;
        tot_ns += ours;
        tot_m += master;
        tot_o += old.len();
        if ours < master {
            le += 1
        } else if ours == master {
            eq += 1
        } else {
            gt += 1;
            worse.push((
                ours as i64 - master as i64,
                expr.to_string(),
                ours,
                master,
                old.len(),
            ));
        }
    }
    worse.sort();
    worse.reverse();
    for w in worse.iter().take(if verbose { 1000 } else { 25 }) {
        println!(
            "{:+} {:?} netsift {} master {} 1.10.3 {}",
            w.0, w.1, w.2, w.3, w.4
        );
    }
    println!(
        "EN10MB optimised: {n} expressions; netsift < master {le}, == {eq}, > {gt} ({:.1}% at most master's); total netsift {tot_ns}, master {tot_m}, libpcap 1.10.3 {tot_o}",
        100.0 * (le + eq) as f64 / n as f64
    );
}
