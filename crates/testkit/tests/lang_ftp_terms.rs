//! The FTP monitor's filter: `tcp port 21 or (host C1 and host S1 and tcp port P1) or …`, one
//! term per open data connection, recompiled whenever one opens. Optimised code must be no longer
//! than libpcap's and give libpcap's verdicts. `ftp_terms_timing` (ignored; run with `--ignored
//! --nocapture`, `FTP_TERMS=1,10,100` to choose the sizes) prints compile times against
//! libpcap's; `ftp_terms_profile` is a loop for profilers.

use std::time::Instant;

use netsift_bpf::{Filter, Rules, compile};
use netsift_lang::{Context, compile as front};
use netsift_testkit::oracle;

/// `tcp port 21` and `n` terms: 250 clients, 10 servers (so later terms reuse servers).
fn expr(n: usize) -> String {
    let mut s = "tcp port 21".to_string();
    for i in 1..=n {
        s.push_str(&format!(
            " or (host 198.18.20.{} and host 198.18.10.{} and tcp port {})",
            i % 250,
            i % 10 + 1,
            50000 + i
        ));
    }
    s
}

fn ours(expr: &str) -> netsift_bpf::Program {
    let ctx = Context::new(netsift_wire::LinkType::ETHERNET);
    let pred = front(expr, &ctx).expect("parses");
    compile::compile(&pred, &compile::Options::default()).expect("compiles")
}

/// An Ethernet frame: IPv4 with the protocol `proto`, or ARP when `proto` is 0.
fn frame(proto: u8, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    if proto == 0 {
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[8, 6]);
        arp[28..32].copy_from_slice(&src);
        arp[38..42].copy_from_slice(&dst);
        return arp;
    }
    let mut f = vec![0u8; 54];
    f[12..14].copy_from_slice(&[8, 0]);
    f[14] = 0x45;
    f[23] = proto;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f
}

#[test]
fn ftp_terms_no_longer_than_libpcap() {
    for n in [1usize, 2, 3, 10, 11, 12, 40, 100, 200] {
        let e = expr(n);
        let theirs = oracle::compile(1, 262_144, &e, true).expect("libpcap compiles it");
        let mine = ours(&e);
        assert!(
            mine.len() <= theirs.len(),
            "{n} terms: {} instructions, libpcap {}",
            mine.len(),
            theirs.len()
        );
        let f = Filter::new(mine, Rules::Kernel).expect("valid");
        let mut accepted = 0;
        for i in 1..=n + 1 {
            let c = [198, 18, 20, (i % 250) as u8];
            let s = [198, 18, 10, (i % 10 + 1) as u8];
            let other = [198, 18, 10, ((i + 1) % 10 + 1) as u8];
            let p = (50000 + i) as u16;
            for pkt in [
                frame(6, c, s, 4000, p),
                frame(6, s, c, p, 4000),
                frame(6, c, other, 4000, p),
                frame(6, c, s, 4000, p + 1),
                frame(17, c, s, 4000, p),
                frame(6, c, c, 21, 4000),
                frame(6, c, s, 4000, 21),
                frame(0, c, s, 0, 0),
                frame(0, s, c, 0, 0),
            ] {
                let wire = pkt.len() as u32;
                let (a, b) = (
                    f.run(&pkt, wire),
                    oracle::filter(&theirs, &pkt, wire).unwrap(),
                );
                assert_eq!(a, b, "{n} terms: verdicts differ");
                accepted += usize::from(a != 0);
            }
        }
        assert!(accepted > n, "{n} terms: only {accepted} packets accepted");
    }
}

/// Programs longer than a jump reaches (`host X1 or host X2 or …`: every address test of the
/// IPv4, ARP and RARP paths jumps to the returns): copies of the returns in the code keep them
/// in reach, with libpcap's verdicts.
#[test]
fn long_host_lists_reach_their_returns() {
    for n in [100u32, 250] {
        let hosts: Vec<String> = (0..n)
            .map(|i| format!("host 10.0.{}.{}", i / 256, i % 256))
            .collect();
        let e = hosts.join(" or ");
        let theirs = oracle::compile(1, 262_144, &e, true).expect("libpcap compiles it");
        let mine = ours(&e);
        assert!(
            mine.len() <= theirs.len(),
            "{n} hosts: {} instructions, libpcap {}",
            mine.len(),
            theirs.len()
        );
        let f = Filter::new(mine, Rules::Kernel).expect("valid");
        let mut accepted = 0;
        for i in (0..n + 3).step_by(7) {
            let h = [10, 0, (i / 256) as u8, (i % 256) as u8];
            let other = [192, 0, 2, 1];
            let mut rarp = frame(0, other, h, 0, 0);
            rarp[12..14].copy_from_slice(&[0x80, 0x35]);
            for pkt in [
                frame(6, h, other, 1, 2),
                frame(17, other, h, 1, 2),
                frame(6, other, other, 1, 2),
                frame(0, h, other, 0, 0),
                frame(0, other, h, 0, 0),
                rarp,
            ] {
                let wire = pkt.len() as u32;
                let (a, b) = (
                    f.run(&pkt, wire),
                    oracle::filter(&theirs, &pkt, wire).unwrap(),
                );
                assert_eq!(a, b, "{n} hosts: verdicts differ");
                accepted += usize::from(a != 0);
            }
        }
        assert!(accepted > 0, "{n} hosts: nothing accepted");
    }
}

/// Median microseconds per call over a few batches of about 20 ms.
fn us_per_call(mut f: impl FnMut() -> usize) -> f64 {
    let t = Instant::now();
    let mut sink = f();
    let reps = ((0.02 / t.elapsed().as_secs_f64().max(1e-7)).ceil() as usize).max(1);
    let mut times: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                sink = sink.wrapping_add(f());
            }
            t.elapsed().as_secs_f64() * 1e6 / reps as f64
        })
        .collect();
    std::hint::black_box(sink);
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn sizes(default: &[usize]) -> Vec<usize> {
    std::env::var("FTP_TERMS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

#[test]
#[ignore = "timing table; run with --ignored --nocapture"]
fn ftp_terms_timing() {
    println!(
        "{:>5} {:>12} {:>12} {:>12} {:>12} {:>8} {:>10} {:>10}",
        "N",
        "libpcap ins",
        "netsift ins",
        "libpcap us",
        "netsift us",
        "speedup",
        "front us",
        "back us"
    );
    let ctx = Context::new(netsift_wire::LinkType::ETHERNET);
    for n in sizes(&[1, 2, 5, 10, 20, 50, 100, 150, 200]) {
        let e = expr(n);
        let theirs = oracle::compile(1, 262_144, &e, true)
            .expect("libpcap")
            .len();
        let mine = ours(&e).len();
        let lt = us_per_call(|| oracle::compile(1, 262_144, &e, true).map_or(0, |p| p.len()));
        let nt = us_per_call(|| ours(&e).len());
        let ft = us_per_call(|| front(&e, &ctx).map_or(0, |p| p.nodes().len()));
        let pred = front(&e, &ctx).expect("parses");
        let bt = us_per_call(|| {
            compile::compile(&pred, &compile::Options::default()).map_or(0, |p| p.len())
        });
        println!(
            "{n:>5} {theirs:>12} {mine:>12} {lt:>12.1} {nt:>12.1} {:>7.2}x {ft:>10.1} {bt:>10.1}",
            lt / nt
        );
    }
}

/// For profilers: compile the filter of `FTP_TERMS` (default 10) terms for about two seconds,
/// the front end only (`FTP_PART=front`), the back end only (`back`) or both.
#[test]
#[ignore = "profiling loop; run with --ignored"]
fn ftp_terms_profile() {
    let n = sizes(&[10])[0];
    let part = std::env::var("FTP_PART").unwrap_or_default();
    let e = expr(n);
    let ctx = Context::new(netsift_wire::LinkType::ETHERNET);
    let pred = front(&e, &ctx).expect("parses");
    let start = Instant::now();
    let mut sink = 0;
    while start.elapsed().as_secs_f64() < 2.0 {
        sink += match part.as_str() {
            "front" => front(&e, &ctx).map_or(0, |p| p.nodes().len()),
            "back" => compile::compile(&pred, &compile::Options::default()).map_or(0, |p| p.len()),
            _ => ours(&e).len(),
        };
    }
    std::hint::black_box(sink);
}
