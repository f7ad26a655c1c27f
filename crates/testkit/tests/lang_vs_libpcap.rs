//! The filter compiler against libpcap 1.10.3, on libpcap's own test suite and the shared
//! captures: the same accept/reject decision for every expression, the same verdict on every
//! packet (unoptimised and optimised), every rejected expression rejected with a message, and
//! optimised code at least as short as libpcap master's.

use netsift_bpf::{Filter, Rules, compile};
use netsift_capture::{ByteOrder, CaptureReader, Format};
use netsift_lang::{Context, Origin, compile as front};
use netsift_testkit::{corpus, data, oracle};
use netsift_wire::LinkType;

/// Expressions where netsift deliberately differs from libpcap 1.10.3, with the reason.
const EXCLUDED: &[(&str, &str, &str)] = &[
    (
        "RAW",
        "link[0:1] & 0xFFFFFFFF == 0",
        "libpcap 1.10.3 optimiser bug: `jset #0xffffffff` is taken as always true, so it \
         reports 'expression rejects all packets' (fixed in later libpcap)",
    ),
    (
        "RAW",
        "link[0:2] & 0xFFFFFFFF == 0",
        "same libpcap 1.10.3 jset bug",
    ),
    (
        "RAW",
        "link[0:4] & 0xFFFFFFFF == 0",
        "same libpcap 1.10.3 jset bug",
    ),
    (
        "RAW",
        "link[0:1] & 0xFFFFFFFF != 0",
        "same libpcap 1.10.3 jset bug (accepts every packet)",
    ),
    (
        "RAW",
        "link[0:2] & 0xFFFFFFFF != 0",
        "same libpcap 1.10.3 jset bug (accepts every packet)",
    ),
    (
        "RAW",
        "link[0:4] & 0xFFFFFFFF != 0",
        "same libpcap 1.10.3 jset bug (accepts every packet)",
    ),
];

fn excluded(c: &corpus::Case, optimize: bool) -> Option<&'static str> {
    if !optimize {
        return None;
    }
    EXCLUDED
        .iter()
        .find(|(d, e, _)| *d == c.dlt && *e == c.expr)
        .map(|(_, _, why)| *why)
}

/// netsift's program, lowered and compiled as `netsift compile [-O0]` does.
fn ours(expr: &str, ctx: &Context, optimize: bool) -> Result<netsift_bpf::Program, String> {
    let ctx = &Context { optimize, ..*ctx };
    let pred = front(expr, ctx).map_err(|e| e.to_string())?;
    compile::compile(
        &pred,
        &compile::Options {
            optimize,
            snaplen: ctx.snaplen,
        },
    )
    .map_err(|e| e.to_string())
}

fn verdicts(optimize: bool) {
    let by_dlt = corpus::packets_by_dlt();
    let (mut cases, mut compiled, mut rejected, mut packets, mut skipped) =
        (0, 0, 0, 0u64, Vec::new());
    // Verdicts where libpcap's optimiser changes the meaning of its own -O0 program; there
    // -O0 is the reference.
    let mut optimiser_changed = 0u64;
    // Per link type: expressions compiled by both, rejected by both, verdicts.
    let mut per_dlt: std::collections::BTreeMap<String, (u32, u32, u64)> = Default::default();
    for c in corpus::cases() {
        cases += 1;
        if let Some(why) = excluded(&c, optimize) {
            skipped.push(format!("[{}] {}: {why}", c.dlt, c.expr));
            continue;
        }
        let dlt = oracle::dlt_from_name(&c.dlt).unwrap();
        let mut ctx = Context::new(corpus::link_type(&c.dlt));
        ctx.snaplen = c.snaplen;
        let theirs = oracle::compile(dlt, c.snaplen as i32, &c.expr, optimize);
        let mine = ours(&c.expr, &ctx, optimize);
        match (&mine, &theirs) {
            (Err(_), Err(_)) => {
                rejected += 1;
                per_dlt.entry(c.dlt.clone()).or_default().1 += 1;
                continue;
            }
            (Err(e), Ok(_)) => panic!(
                "[{}] {:?}: netsift rejects what libpcap compiles: {e}",
                c.dlt, c.expr
            ),
            (Ok(_), Err(e)) => panic!(
                "[{}] {:?}: libpcap rejects ({e}) what netsift compiles",
                c.dlt, c.expr
            ),
            _ => {}
        }
        let (mine, theirs) = (mine.unwrap(), theirs.unwrap());
        let f = Filter::new(mine.clone(), Rules::Libpcap)
            .unwrap_or_else(|e| panic!("[{}] {:?}: invalid program: {e}", c.dlt, c.expr));
        let mut unopt: Option<netsift_bpf::Program> = None;
        for (i, (p, l)) in corpus::packets_of(&by_dlt, dlt).iter().enumerate() {
            let (a, mut b) = (f.run(p, *l), oracle::filter(&theirs, p, *l).unwrap());
            if a != b && optimize {
                let u = unopt.get_or_insert_with(|| {
                    oracle::compile(dlt, c.snaplen as i32, &c.expr, false).unwrap()
                });
                let b0 = oracle::filter(u, p, *l).unwrap();
                if b0 != b {
                    optimiser_changed += 1;
                    b = b0;
                }
            }
            assert_eq!(
                a,
                b,
                "[{}] {:?} -O{}: packet {i} ({} bytes): netsift {a}, libpcap {b}\nnetsift:\n{}",
                c.dlt,
                c.expr,
                u8::from(optimize),
                p.len(),
                netsift_bpf::asm::dump(&mine, netsift_bpf::asm::Format::Asm)
            );
            packets += 1;
            per_dlt.entry(c.dlt.clone()).or_default().2 += 1;
        }
        compiled += 1;
        per_dlt.entry(c.dlt.clone()).or_default().0 += 1;
    }
    println!(
        "-O{}: {cases} expressions x link types: {compiled} compiled by both, {rejected} rejected by \
         both, {} excluded; {packets} verdicts, 0 disagreements ({optimiser_changed} where \
         libpcap's optimiser changes its -O0 verdict: compared with -O0)",
        u8::from(optimize),
        skipped.len()
    );
    for (dlt, (ok, rej, n)) in &per_dlt {
        println!("  {dlt:<24} {ok:>5} compiled, {rej:>5} rejected by both, {n:>9} verdicts");
    }
    for s in skipped {
        println!("  excluded: {s}");
    }
}

#[test]
fn verdicts_equal_libpcap_unoptimised() {
    verdicts(false);
}

#[test]
fn verdicts_equal_libpcap_optimised() {
    verdicts(true);
}

/// `apply.tsv`: each expression against its own capture, compiled as `tcpdump -r` would
/// (savefile meanings, the file's snap length).
#[test]
fn apply_table_with_savefile_semantics() {
    let (mut rows, mut same, mut unsupported) = (0, 0, 0);
    for r in data::libpcap_table("apply.tsv") {
        let path = data::dir().join("captures/libpcap").join(r.get("savefile"));
        let optimize = r.get("optimize") == "1";
        let expr = r.get("expr");
        let mut reader = CaptureReader::open(&path).unwrap();
        let Some(lt) = reader.link_type() else {
            continue;
        };
        let Some(snaplen) = reader.snaplen() else {
            continue;
        };
        let swapped = match reader.format() {
            Format::Pcap { byte_order, .. } | Format::Pcapng { byte_order, .. } => {
                (byte_order == ByteOrder::Little) != cfg!(target_endian = "little")
            }
            _ => false,
        };
        let mut ctx = Context::new(lt);
        ctx.snaplen = snaplen;
        ctx.origin = Origin::Savefile { swapped };
        rows += 1;
        let theirs = oracle::compile_for_file(&path, expr, optimize);
        let supported = corpus::LINK_TYPES
            .iter()
            .any(|n| oracle::dlt_from_name(n) == Some(lt.dlt() as i32));
        if !supported {
            unsupported += 1;
            continue;
        }
        let mine = ours(expr, &ctx, optimize);
        match (mine, theirs) {
            (Err(_), Err(_)) => same += 1,
            (Err(e), Ok(_)) => panic!(
                "{}: {expr:?}: netsift rejects what libpcap compiles: {e}",
                r.get("label")
            ),
            (Ok(_), Err(e)) => panic!(
                "{}: {expr:?}: libpcap rejects ({e}) what netsift compiles",
                r.get("label")
            ),
            (Ok(m), Ok(t)) => {
                let f = Filter::new(m, Rules::Libpcap).unwrap();
                let mut i = 0;
                while let Some(p) = reader.next_packet() {
                    let p = p.unwrap();
                    let (a, b) = (
                        f.run(p.data, p.wire_len),
                        oracle::filter(&t, p.data, p.wire_len).unwrap(),
                    );
                    assert_eq!(a, b, "{}: {expr:?} packet {i}", r.get("label"));
                    i += 1;
                }
                same += 1;
            }
        }
    }
    println!(
        "apply.tsv: {rows} rows, {same} equal to libpcap (savefile semantics), {unsupported} on link types netsift's compiler does not support"
    );
    assert!(same > 100);
}

/// Every expression libpcap 1.10.3 rejects is rejected, with a message; the few that master
/// rejects but 1.10.3 accepts compile.
#[test]
fn rejections() {
    let (mut n, mut rejected, mut accepted, mut with_caret) = (0, 0, 0, 0);
    for r in data::libpcap_table("reject.tsv") {
        let dlt = r.get("dlt");
        if !corpus::link_types().contains(&dlt) {
            continue;
        }
        n += 1;
        let ctx = Context::new(corpus::link_type(dlt));
        let expr = r.get("expr");
        let mine = front(expr, &ctx)
            .map_err(|e| (e.to_string(), e.span().is_some()))
            .and_then(|p| {
                compile::compile(
                    &p,
                    &compile::Options {
                        optimize: true,
                        snaplen: 262_144,
                    },
                )
                .map_err(|e| (e.to_string(), false))
            });
        if r.get("rejected_by_libpcap_1_10_3") == "yes" {
            let Err((msg, caret)) = mine else {
                panic!(
                    "{}: [{dlt}] {expr:?}: libpcap 1.10.3 rejects it ({}), netsift compiles it",
                    r.get("label"),
                    r.get("error_libpcap_master")
                );
            };
            assert!(!msg.trim().is_empty());
            rejected += 1;
            with_caret += usize::from(caret);
        } else {
            assert!(
                mine.is_ok(),
                "{}: [{dlt}] {expr:?}: libpcap 1.10.3 compiles it, netsift: {:?}",
                r.get("label"),
                mine.err()
            );
            accepted += 1;
        }
    }
    println!(
        "reject.tsv: {n} rows; {rejected} rejected as by libpcap 1.10.3 ({with_caret} with a caret under the culprit), {accepted} accepted as by 1.10.3"
    );
}

/// Optimised EN10MB programs are at most as long as libpcap master's for at least 90% of
/// `accept.tsv`, and shorter in total.
#[test]
fn instruction_counts_against_libpcap_master() {
    let (mut n, mut le, mut tot_ours, mut tot_master, mut tot_old) = (0, 0, 0, 0, 0);
    let mut hist = std::collections::BTreeMap::new();
    let mut longer = Vec::new();
    for r in data::libpcap_table("accept.tsv") {
        if r.get("dlt") != "EN10MB"
            || r.get("optimize") != "1"
            || r.get("label").starts_with("accept_bpf_image")
        {
            continue;
        }
        let expr = r.get("expr");
        let snaplen = r.get("snaplen").parse().unwrap_or(262_144);
        let Ok(old) = oracle::compile(1, snaplen as i32, expr, true) else {
            continue;
        };
        let mut ctx = Context::new(netsift_wire::LinkType::ETHERNET);
        ctx.snaplen = snaplen;
        let mine = ours(expr, &ctx, true)
            .unwrap_or_else(|e| panic!("{expr:?}: {e}"))
            .len();
        let master = r.get_multiline("expected_bpf_dump").lines().count();
        n += 1;
        le += usize::from(mine <= master);
        *hist.entry(mine as i64 - master as i64).or_insert(0) += 1;
        if mine > master {
            longer.push((mine - master, expr.to_string(), mine, master, old.len()));
        }
        tot_ours += mine;
        tot_master += master;
        tot_old += old.len();
    }
    longer.sort_by(|a, b| b.cmp(a));
    for (excess, expr, mine, master, old) in longer.iter().take(25) {
        println!("+{excess} {expr:?}: netsift {mine}, master {master}, libpcap 1.10.3 {old}");
    }
    println!(
        "EN10MB -O: {n} expressions, {le} ({:.1}%) at most libpcap master's length; total {tot_ours} \
         instructions (master {tot_master}, libpcap 1.10.3 {tot_old}); netsift - master: {hist:?}",
        100.0 * le as f64 / n as f64
    );
    assert!(le * 10 >= n * 9, "only {le} of {n} at most master's length");
    assert!(tot_ours <= tot_master);
}

/// Long `or`s of terms that each leave different facts behind (`host Xi and tcp port Pi`)
/// used to be specialised once per path through the earlier terms: quadratic code and cubic
/// time. They must stay no longer than libpcap's code, and give its verdicts.
#[test]
fn long_or_chains_no_longer_than_libpcap() {
    let mut packets: Vec<Vec<u8>> = corpus::packets_by_dlt()
        .remove(&1)
        .unwrap_or_default()
        .into_iter()
        .map(|(d, _)| d)
        .collect();
    // TCP, UDP and ARP frames from and to the terms' hosts, on and off their ports.
    for i in 0..260u32 {
        for (proto, port, src) in [
            (6u8, 2000 + i, true),
            (6, 21, false),
            (17, 2000 + i, false),
            (6, 2001 + i, true),
        ] {
            let host = [10, (i / 250) as u8, (i % 250) as u8, 1];
            let mut f = vec![0u8; 54];
            f[12..14].copy_from_slice(&[8, 0]);
            f[14] = 0x45;
            f[23] = proto;
            f[26..30].copy_from_slice(if src { &host } else { &[192, 0, 2, 9] });
            f[30..34].copy_from_slice(if src { &[192, 0, 2, 9] } else { &host });
            f[34..36].copy_from_slice(&(port as u16).to_be_bytes());
            f[36..38].copy_from_slice(&4000u16.to_be_bytes());
            packets.push(f);
        }
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[8, 6]);
        arp[28..32].copy_from_slice(&[10, (i / 250) as u8, (i % 250) as u8, 1]);
        packets.push(arp);
    }
    for n in [2usize, 10, 40, 120, 250] {
        let mut terms = vec!["(ip and tcp port 21)".to_string()];
        terms.extend((0..n).map(|i| {
            format!(
                "(host 10.{}.{}.1 and tcp port {})",
                i / 250,
                i % 250,
                2000 + i
            )
        }));
        let expr = terms.join(" or ");
        let theirs = oracle::compile(1, 262_144, &expr, true).expect("libpcap compiles it");
        let ctx = Context::new(netsift_wire::LinkType::ETHERNET);
        let mine = ours(&expr, &ctx, true).unwrap_or_else(|e| panic!("{n} terms: {e}"));
        assert!(
            mine.len() <= theirs.len(),
            "{n} terms: {} instructions, libpcap {}",
            mine.len(),
            theirs.len()
        );
        let f = Filter::new(mine, Rules::Kernel).expect("valid");
        let mut accepted = 0;
        for p in &packets {
            let wire = p.len() as u32;
            let (a, b) = (f.run(p, wire), oracle::filter(&theirs, p, wire).unwrap());
            assert_eq!(a, b, "{n} terms: verdicts differ");
            accepted += usize::from(a != 0);
        }
        assert!(accepted > n, "{n} terms: only {accepted} packets accepted");
    }
}

/// The oracle is Debian's libpcap, never netsift's libpcap-compatible library (`netsift-pcap`,
/// built into the same target directory): a test against itself would prove nothing.
#[test]
fn the_oracle_is_the_real_libpcap() {
    let v = netsift_testkit::oracle::version();
    assert!(
        v.starts_with("libpcap version 1.10") && !v.contains("netsift"),
        "the oracle is {v:?}"
    );
}

/// Every link type of libpcap's test tables that libpcap 1.10.3 compiles for is one netsift's
/// corpus runs (and so one netsift's compiler supports in full).
#[test]
fn every_link_type_libpcap_compiles_for_is_supported() {
    let mut names = std::collections::BTreeSet::new();
    for table in ["accept.tsv", "reject.tsv"] {
        for r in data::libpcap_table(table) {
            names.insert(r.get("dlt").to_string());
        }
    }
    let (mut supported, mut unknown) = (Vec::new(), Vec::new());
    for name in &names {
        match oracle::dlt_from_name(name) {
            Some(dlt) if oracle::compile(dlt, 262_144, "", false).is_ok() => {
                assert!(
                    corpus::LINK_TYPES.contains(&name.as_str()),
                    "libpcap 1.10.3 compiles for {name}, which netsift's corpus does not run"
                );
                supported.push(name.as_str());
            }
            _ => unknown.push(name.as_str()),
        }
    }
    println!(
        "{} link types of libpcap's tables compile on libpcap 1.10.3, all supported; not known to 1.10.3: {unknown:?}",
        supported.len()
    );
}

/// For every DLT value below 300 that libpcap 1.10.3 compiles for (not only those of its test
/// tables): a set of expressions is accepted or rejected as by libpcap, and where both
/// compile, the verdicts agree on packets made for the link type. DLT 106 is skipped: it has
/// no LINKTYPE of its own (a file's LINKTYPE 106 is DLT 19, which netsift compiles for).
#[test]
fn every_dlt_libpcap_knows() {
    let exprs = [
        "",
        "ip",
        "tcp port 80",
        "ip6 and udp",
        "arp",
        "ether host 1:2:3:4:5:6",
        "vlan",
        "inbound",
        "len > 10",
        "link[0] = 1",
    ];
    let ethernet = corpus::packets_by_dlt().remove(&1).unwrap_or_default();
    let (mut dlts, mut both, mut rejected, mut verdicts) = (0, 0, 0, 0u64);
    for dlt in 0..300 {
        if dlt == 106 || oracle::compile(dlt, 65_535, "", false).is_err() {
            continue;
        }
        dlts += 1;
        let packets = corpus::synthesize(dlt, &ethernet, 300);
        for e in exprs {
            let ctx = Context {
                snaplen: 65_535,
                ..Context::new(LinkType::from_dlt(dlt as u32))
            };
            let theirs = oracle::compile(dlt, 65_535, e, false);
            let mine = ours(e, &ctx, false);
            match (&theirs, &mine) {
                (Ok(t), Ok(m)) => {
                    both += 1;
                    let f = Filter::new(m.clone(), Rules::Libpcap).unwrap();
                    for (p, l) in &packets {
                        let b = oracle::filter(t, p, *l).unwrap();
                        assert_eq!(f.run(p, *l), b, "DLT {dlt} {e:?}");
                        verdicts += 1;
                    }
                }
                (Err(_), Err(_)) => rejected += 1,
                (Ok(_), Err(m)) => panic!("DLT {dlt} {e:?}: libpcap compiles, netsift: {m}"),
                (Err(t), Ok(_)) => {
                    panic!("DLT {dlt} {e:?}: libpcap rejects ({t}), netsift compiles")
                }
            }
        }
    }
    println!(
        "{dlts} DLTs libpcap compiles for: {both} expressions compiled by both ({verdicts} verdicts \
         equal), {rejected} rejected by both"
    );
}
