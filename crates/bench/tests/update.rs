//! The update-latency suite at small sizes, so that it cannot rot (no timing is asserted), and
//! its workload against netsift's compiler: the Swift filter of N connections gives the verdicts
//! of the expression it stands for.

use std::time::Duration;

use netsift_bench::update::{self, Config, Connection, Fixture, Form, Recompile};
use netsift_capture::generate::{FrameBuilder, TCP_ACK};

fn small() -> Config {
    Config {
        sizes: vec![1, 10, 100],
        samples: 200,
        warmup: 20,
        recompile_limit: Duration::from_secs(2),
        recompile_runs: 1,
        recompile_budget: Duration::ZERO,
    }
}

#[test]
fn the_suite_runs_and_checks_its_updates() {
    let cfg = small();
    let report = update::measure(&cfg).expect("the suite runs");
    assert_eq!(report.swift.len(), cfg.sizes.len() * Form::ALL.len());
    for row in &report.swift {
        assert!(row.add.median <= row.add.p99 && row.del.median <= row.del.p99);
    }
    assert_eq!(report.recompile.len(), cfg.sizes.len());
    for row in &report.recompile {
        // Far under the kernel's limit at these sizes: compiled, never refused.
        assert!(
            matches!(
                row.netsift,
                Recompile::Timed {
                    too_long: false,
                    runs: 1,
                    ..
                }
            ),
            "{row:?}"
        );
        assert!(
            matches!(row.libpcap, Recompile::Timed { .. } | Recompile::Missing),
            "{row:?}"
        );
    }
    let text = report.to_string();
    assert!(text.starts_with("suite update:"), "{text}");
    for n in &cfg.sizes {
        assert!(text.contains(&format!("\n{n:>6} swift-pass ")), "{text}");
        assert!(text.contains(&format!("\n{n:>6} swift-child ")), "{text}");
    }
}

#[test]
fn a_compile_estimated_over_the_limit_is_skipped() {
    let cfg = Config {
        sizes: vec![1, 100],
        samples: 10,
        warmup: 0,
        recompile_limit: Duration::from_nanos(1),
        recompile_runs: 1,
        recompile_budget: Duration::ZERO,
    };
    let report = update::measure(&cfg).expect("the suite runs");
    assert!(matches!(
        report.recompile[0].netsift,
        Recompile::Timed { .. }
    ));
    assert!(matches!(report.recompile[1].netsift, Recompile::Skipped(_)));
    assert!(report.to_string().contains("n/a (> "));
}

/// Packets around connection `c`: its own both ways, and one field wrong at a time.
fn packets_around(c: &Connection, other: &Connection) -> Vec<(Vec<u8>, bool)> {
    let tcp = |src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16| {
        FrameBuilder::new()
            .ipv4(src, dst)
            .tcp(sp, dp, TCP_ACK)
            .pad_to(60)
            .build()
    };
    vec![
        (c.packet(), true),
        (tcp(c.server, c.client, c.port, 50_000), true),
        (tcp(c.client, c.server, c.port, 50_000), true),
        (tcp(c.client, c.server, 50_000, c.port + 1), false),
        (tcp(c.client, other.server, 50_000, c.port), false),
        (tcp(other.client, c.server, 50_000, c.port), false),
        (tcp(c.client, c.client, 50_000, c.port), false),
        (
            FrameBuilder::new()
                .ipv4(c.client, c.server)
                .udp(50_000, c.port)
                .pad_to(60)
                .build(),
            false,
        ),
        (
            FrameBuilder::new()
                .ipv4(c.client, c.server)
                .fragment(64, false)
                .tcp(50_000, c.port, TCP_ACK)
                .pad_to(60)
                .build(),
            false,
        ),
        // The FTP control connection.
        (tcp(c.client, c.server, 50_001, 21), true),
    ]
}

#[test]
fn the_swift_filter_means_the_expression() {
    let n = 30;
    let ctx = netsift_lang::Context::new(netsift_capture::LinkType::ETHERNET);
    let pred = netsift_lang::compile(&update::expression(n), &ctx).expect("parses");
    let prog = netsift_bpf::compile::compile(&pred, &netsift_bpf::compile::Options::default())
        .expect("compiles");
    let bpf = netsift_bpf::Filter::new(prog, netsift_bpf::Rules::Libpcap).expect("valid");
    for form in Form::ALL {
        let mut f = Fixture::new(form, n).expect("builds");
        for i in [0, 1, 9, n - 1, n, n + 7] {
            let c = Connection::nth(i);
            // A connection of the other server and client (never the same pair).
            let other = Connection::nth(i + 3);
            for (k, (p, _)) in packets_around(&c, &other).iter().enumerate() {
                let want = bpf.run(p, p.len() as u32);
                assert_eq!(
                    f.reader.run(p, p.len() as u32),
                    want,
                    "{} connection {i} packet {k}",
                    form.name()
                );
            }
        }
        // The packets' intended verdicts hold for a connection in the filter.
        let c = Connection::nth(4);
        for (k, (p, accepted)) in packets_around(&c, &Connection::nth(7)).iter().enumerate() {
            assert_eq!(
                f.reader.run(p, p.len() as u32) != 0,
                *accepted,
                "packet {k}"
            );
        }
    }
}

#[test]
fn connections_are_distinct() {
    let mut seen = std::collections::HashSet::new();
    for i in 0..20_001 {
        assert!(seen.insert(Connection::nth(i)), "connection {i} repeats");
    }
}
