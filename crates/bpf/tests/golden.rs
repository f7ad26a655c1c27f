//! Golden tests: expression → exact program, unoptimised and optimised, for the primitives
//! users write most. The expected text lives in `tests/golden/compile.txt`; after a deliberate
//! change to code generation, regenerate it with `NETSIFT_BLESS=1 cargo test -p netsift-bpf
//! --test golden` and review the diff (the shared-corpus tests in netsift-testkit check that
//! the meaning did not change).

use std::fmt::Write as _;
use std::path::Path;

use netsift_bpf::{asm, compile};
use netsift_lang::{Context, compile as front};
use netsift_wire::LinkType;

const CASES: &[(&str, &str)] = &[
    ("en10mb", ""),
    ("en10mb", "ip"),
    ("en10mb", "tcp port 80"),
    ("en10mb", "port 53"),
    ("en10mb", "host 198.18.0.1"),
    ("en10mb", "src net 198.18.0.0/15 and not dst port 22"),
    ("en10mb", "ip6 host 2001:db8::1"),
    ("en10mb", "ether host 02:00:00:00:00:01"),
    ("en10mb", "ether broadcast or ether multicast"),
    ("en10mb", "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0"),
    ("en10mb", "icmp[icmptype] = icmp-echo"),
    ("en10mb", "ip[2:2] - ((ip[0]&0xf)<<2) > 40"),
    ("en10mb", "vlan 100 and tcp"),
    ("en10mb", "mpls 42 and ip"),
    ("en10mb", "pppoes 7 and ip"),
    ("en10mb", "portrange 6000-6010"),
    ("en10mb", "host 10.0.0.1 or host 10.0.0.2 or host 10.0.0.3"),
    ("en10mb", "ip6 protochain 6"),
    ("en10mb", "greater 1000 and less 1500"),
    ("en10mb", "llc u"),
    ("linux_sll", "tcp port 443"),
    ("linux_sll2", "udp and outbound"),
    ("raw", "host 1.2.3.4 and port 53"),
    ("null", "ip6"),
    ("ipv4", "tcp"),
];

fn render() -> String {
    let mut out = String::new();
    for (lt, expr) in CASES {
        for optimize in [false, true] {
            let mut ctx = Context::new(LinkType::from_name(lt).unwrap());
            ctx.optimize = optimize;
            let pred = front(expr, &ctx).unwrap_or_else(|e| panic!("{expr}: {e}"));
            let p = compile::compile(
                &pred,
                &compile::Options {
                    optimize,
                    snaplen: 262_144,
                },
            )
            .unwrap_or_else(|e| panic!("{expr}: {e}"));
            let _ = writeln!(out, "== [{lt}] -O{} {expr}", u8::from(optimize));
            out.push_str(&asm::dump(&p, asm::Format::Asm));
        }
    }
    out
}

#[test]
fn programs_match_the_golden_file() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/compile.txt");
    let got = render();
    if std::env::var_os("NETSIFT_BLESS").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if got != want {
        // Show the first differing section.
        let (g, w): (Vec<&str>, Vec<&str>) =
            (got.split("== ").collect(), want.split("== ").collect());
        for (a, b) in g.iter().zip(&w) {
            assert_eq!(
                a, b,
                "golden program differs (NETSIFT_BLESS=1 regenerates after review)"
            );
        }
        assert_eq!(
            g.len(),
            w.len(),
            "golden file has a different number of cases"
        );
    }
}
