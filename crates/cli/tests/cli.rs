//! The `netsift` command line: behaviour of each flag, output formats, and errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use netsift_bpf::{Insn, Program, asm, code::*};
use netsift_capture::CaptureReader;

fn netsift(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netsift"))
        .args(args)
        .output()
        .expect("cannot run netsift")
}

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/demo.pcap")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("netsift-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn write_program(name: &str, program: &Program, format: asm::Format) -> PathBuf {
    let p = tmp(name);
    std::fs::write(&p, asm::dump(program, format)).unwrap();
    p
}

/// `ldb [23]; jeq #6 jt 2 jf 3; ret #64; ret #0`: IPv4 TCP over Ethernet, keep 64 bytes.
fn tcp_keep_64() -> Program {
    Program::new(vec![
        Insn::stmt(LD | B | ABS, 23),
        Insn::jump(JMP | JEQ | K, 6, 0, 1),
        Insn::stmt(RET | K, 64),
        Insn::stmt(RET | K, 0),
    ])
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn write_keeps_accepted_packets_cut_to_the_snap_length() {
    let prog = write_program("tcp64.ddd", &tcp_keep_64(), asm::Format::Decimal);
    let out = tmp("tcp64.pcap");
    let o = netsift(&[
        "filter",
        "-r",
        sample().to_str().unwrap(),
        "--program",
        prog.to_str().unwrap(),
        "-w",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let printed = stdout(&o).lines().count();
    let written: Vec<_> = CaptureReader::open(&out)
        .unwrap()
        .packets()
        .map(Result::unwrap)
        .collect();
    assert_eq!(written.len(), printed);
    assert!(written.len() > 40, "the sample has TCP traffic");
    for p in &written {
        assert_eq!(p.data[23], 6, "only TCP is written");
        assert!(p.data.len() <= 64, "cut to 64 bytes");
        assert!(p.wire_len >= p.data.len() as u32, "wire length kept");
    }
    // The same as pcapng.
    let ng = tmp("tcp64.pcapng");
    let o = netsift(&[
        "filter",
        "-r",
        sample().to_str().unwrap(),
        "--program",
        prog.to_str().unwrap(),
        "-w",
        ng.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let again: Vec<_> = CaptureReader::open(&ng)
        .unwrap()
        .packets()
        .map(Result::unwrap)
        .collect();
    assert_eq!(again.len(), written.len());
    assert_eq!(again[0].data, written[0].data);
}

#[test]
fn every_program_format_gives_the_same_verdicts() {
    let mut seen = Vec::new();
    for (i, f) in [asm::Format::Asm, asm::Format::C, asm::Format::Decimal]
        .into_iter()
        .enumerate()
    {
        let prog = write_program(&format!("fmt{i}.txt"), &tcp_keep_64(), f);
        let o = netsift(&[
            "filter",
            "-r",
            sample().to_str().unwrap(),
            "--program",
            prog.to_str().unwrap(),
            "--verdicts",
        ]);
        assert!(o.status.success(), "{f:?}: {}", stderr(&o));
        seen.push(stdout(&o));
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[1], seen[2]);
    let lines: Vec<&str> = seen[0].lines().collect();
    assert_eq!(lines.len(), 198, "one line per packet");
    assert!(
        lines
            .iter()
            .enumerate()
            .all(|(i, l)| l.starts_with(&format!("{i} ")))
    );
    assert!(
        lines
            .iter()
            .all(|l| l.ends_with(" 64") || l.ends_with(" 0"))
    );
}

#[test]
fn count_stops_after_n_accepted_packets() {
    let prog = write_program("tcp64c.ddd", &tcp_keep_64(), asm::Format::Decimal);
    let o = netsift(&[
        "filter",
        "-r",
        sample().to_str().unwrap(),
        "--program",
        prog.to_str().unwrap(),
        "-c",
        "3",
    ]);
    assert!(o.status.success());
    assert_eq!(stdout(&o).lines().count(), 3);
    let o = netsift(&[
        "filter",
        "-r",
        sample().to_str().unwrap(),
        "--program",
        prog.to_str().unwrap(),
        "-c",
        "3",
        "--verdicts",
    ]);
    let v = stdout(&o);
    assert_eq!(v.lines().filter(|l| !l.ends_with(" 0")).count(), 3);
    assert!(
        !v.lines().last().unwrap().ends_with(" 0"),
        "ends at the third accepted packet"
    );
}

#[test]
fn summary_lines_look_like_tcpdump() {
    let o = netsift(&["filter", "-r", sample().to_str().unwrap(), "-c", "3"]);
    assert_eq!(
        stdout(&o),
        "00:00:00.000000 ARP, Request who-has 198.18.0.1 tell 198.18.0.10, length 46\n\
         00:00:00.001000 ARP, Reply 198.18.0.1 is-at 02:00:00:00:00:01, length 46\n\
         00:00:00.002000 IP 198.18.0.10.53211 > 198.18.0.53.53: UDP, length 34\n"
    );
}

#[test]
fn truncated_capture_prints_good_packets_then_fails() {
    let bytes = std::fs::read(sample()).unwrap();
    let cut = tmp("cut.pcap");
    std::fs::write(&cut, &bytes[..1000]).unwrap();
    let o = netsift(&["filter", "-r", cut.to_str().unwrap(), "--verdicts"]);
    assert_eq!(o.status.code(), Some(1));
    let n = stdout(&o).lines().count();
    assert!(n >= 5, "good packets before the cut are processed ({n})");
    let e = stderr(&o);
    assert!(e.contains("truncated") && e.contains("offset"), "{e}");
    assert!(e.contains(&format!("after {n} good packets")), "{e}");
}

#[test]
fn bad_inputs_give_clear_errors() {
    let missing = netsift(&["filter", "-r", "/nonexistent/x.pcap"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("/nonexistent/x.pcap"),
        "{}",
        stderr(&missing)
    );

    let garbage = tmp("garbage.pcap");
    std::fs::write(&garbage, b"this is not a capture file at all").unwrap();
    let o = netsift(&["filter", "-r", garbage.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("magic"), "{}", stderr(&o));

    let bad = tmp("bad.ddd");
    std::fs::write(&bad, "2\n40 0 0 12\n6 0 0\n").unwrap();
    let o = netsift(&[
        "filter",
        "-r",
        sample().to_str().unwrap(),
        "--program",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("line 3, column 6: expected k"),
        "{}",
        stderr(&o)
    );

    let invalid = write_program(
        "invalid.ddd",
        &Program::new(vec![Insn::stmt(LD | MEM, 20), Insn::stmt(RET | A, 0)]),
        asm::Format::Decimal,
    );
    let o = netsift(&[
        "filter",
        "-r",
        sample().to_str().unwrap(),
        "--program",
        invalid.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("scratch memory index 20"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn closed_pipe_is_a_normal_exit() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_netsift"))
        .args(["filter", "-r", sample().to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // close the read end at once
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

#[test]
fn demo_reports_on_the_bundled_sample() {
    let o = netsift(&["demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(s.starts_with("netsift demo: 198 packets"), "{s}");
    for expr in ["tcp port 80", "udp port 53", "vlan", "arp"] {
        assert!(s.contains(expr), "{expr} missing from the report");
    }
    assert!(s.contains("in the NIC: `tcp port 80`"), "{s}");
    assert!(
        s.contains("NIC + software filter = the filter on every packet"),
        "{s}"
    );
    assert!(s.contains("FFPF flows: 2 flows"), "{s}");
    let written = tmp("sample.pcap");
    let o = netsift(&["demo", "--write-sample", written.to_str().unwrap()]);
    assert!(o.status.success());
    assert_eq!(
        std::fs::read(&written).unwrap(),
        std::fs::read(sample()).unwrap()
    );
}

#[test]
fn engines_give_the_same_verdicts() {
    let s = sample();
    let run = |engine: &str| {
        let o = netsift(&[
            "filter",
            "-r",
            s.to_str().unwrap(),
            "--verdicts",
            "--engine",
            engine,
            "tcp or vlan or icmp6",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    let bpf = run("bpf");
    assert_eq!(run("jit"), bpf);
    assert_eq!(run("auto"), bpf);
    let o = netsift(&["filter", "-r", s.to_str().unwrap(), "--engine", "fast"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("possible values"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // capture -r takes the same flag.
    let o = netsift(&[
        "capture",
        "-r",
        s.to_str().unwrap(),
        "--engine",
        "jit",
        "-c",
        "2",
        "tcp",
    ]);
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 2);
}

#[test]
fn gen_writes_the_ftp_workload_and_ftpcap_keeps_exactly_its_ftp_packets() {
    let file = tmp("ftp.pcap");
    let o = netsift(&[
        "gen",
        "--ftp",
        "--servers",
        "3",
        "--connections",
        "4",
        "--background-pps",
        "20000",
        "-w",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The same parameters in the library give the same trace: count its FTP packets.
    let trace = netsift_bench::ftp::FtpWorkload {
        servers: 3,
        connections: 4,
        background_pps: 20_000,
        ..netsift_bench::ftp::FtpWorkload::paper()
    }
    .generate();
    let ftp: usize = trace.connections.iter().map(|c| c.packets + 2).sum();
    let mut r = CaptureReader::open(&file).unwrap();
    let mut n = 0;
    while let Some(p) = r.next_packet() {
        assert_eq!(p.unwrap().data, &trace.packets[n].data[..]);
        n += 1;
    }
    assert_eq!(n, trace.packets.len());

    let kept = tmp("ftp-kept.pcap");
    let o = netsift(&[
        "ftpcap",
        "-r",
        file.to_str().unwrap(),
        "-w",
        kept.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(
        out.lines().filter(|l| l.contains(" open ")).count(),
        12,
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.contains(" close ")).count(),
        12,
        "{out}"
    );
    let mut r = CaptureReader::open(&kept).unwrap();
    let mut k = 0;
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        let control = p.data.len() > 37 && (p.data[34..36] == [0, 21] || p.data[36..38] == [0, 21]);
        assert!(control || trace.connections.iter().any(|c| c.matches(p.data)));
        k += 1;
    }
    assert_eq!(k, ftp, "every control and data packet, nothing else");
}

#[test]
fn gen_refuses_bad_requests() {
    for args in [
        &["gen", "--mix", "2"][..],
        &["gen", "-w", "/nonexistent-dir/x.pcap"],
        &["gen", "--ftp", "--servers", "0", "-w", "/tmp/x.pcap"],
        &["gen", "--servers", "3", "-w", "/tmp/x.pcap"],
        &["gen", "-w", "/tmp/x.pcap", "-c", "999999999999"],
    ] {
        let o = netsift(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(!stderr(&o).is_empty(), "{args:?}: no message");
    }
    assert!(!Path::new("/nonexistent-dir/x.netsift-tmp").exists());
}

#[test]
fn gen_mix_takes_its_shape_from_the_flags() {
    let file = tmp("mix-arp.pcap");
    let f = file.to_str().unwrap();
    let o = netsift(&[
        "gen",
        "-w",
        f,
        "--mix",
        "3",
        "-c",
        "300",
        "--weights",
        "0,0,0,0,0,0,1",
        "--vlan-one-in",
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut r = CaptureReader::open(&file).unwrap();
    let mut n = 0;
    while let Some(p) = r.next_packet() {
        assert_eq!(&p.unwrap().data[12..14], &[8, 6], "only untagged ARP");
        n += 1;
    }
    assert_eq!(n, 300);
    let o = netsift(&[
        "gen",
        "-w",
        f,
        "-c",
        "200",
        "--weights",
        "1,0,0,0,0,0,0",
        "--vlan-one-in",
        "0",
        "--tcp-ports",
        "8080,8443",
        "--hosts",
        "3,2",
        "--max-payload",
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut r = CaptureReader::open(&file).unwrap();
    let mut ports = std::collections::BTreeSet::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        assert_eq!(p.data[23], 6);
        assert!(p.data[33] <= 2 && p.data[29] <= 3, "hosts");
        assert_eq!(p.data.len(), 60, "no payload: padded to 60");
        ports.insert(u16::from_be_bytes([p.data[36], p.data[37]]));
    }
    assert_eq!(ports.into_iter().collect::<Vec<_>>(), vec![8080, 8443]);
    for bad in [
        &["--weights", "0,0,0,0,0,0,0"][..],
        &["--hosts", "0,5"],
        &["--weights", "1,2"],
        &["--max-payload", "5000"],
        &["--tcp-ports", "80", "--ftp"],
    ] {
        let mut args = vec!["gen", "-w", f];
        args.extend_from_slice(bad);
        let o = netsift(&args);
        assert!(!o.status.success(), "{bad:?} succeeded");
        assert!(!stderr(&o).is_empty());
    }
}

#[test]
fn classify_reports_mismatches_and_bad_lines() {
    let rules = tmp("cb.rules");
    std::fs::write(
        &rules,
        "@10.0.0.0/8 0.0.0.0/0 0 : 65535 80 : 80 0x06/0xFF\n@0.0.0.0/0 0.0.0.0/0 0 : 65535 0 : 65535 0x00/0x00\n",
    )
    .unwrap();
    let good = tmp("cb.trace");
    // 10.1.2.3 -> 198.18.0.1:80/tcp is rule 1; the rest rule 2.
    std::fs::write(
        &good,
        "167838211 3323068417 40000 80 6 1\n167838211 3323068417 40000 81 6 2\n",
    )
    .unwrap();
    for engine in ["linear", "hicuts", "hypercuts", "pacuts", "auto"] {
        let o = netsift(&[
            "classify",
            "--rules",
            rules.to_str().unwrap(),
            "--trace",
            good.to_str().unwrap(),
            "--engine",
            engine,
            "--stats",
        ]);
        assert!(o.status.success(), "{engine}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("2 rules, 2 headers: 0 mismatches"),
            "{}",
            stdout(&o)
        );
        assert!(stdout(&o).contains("lookups/s"), "{}", stdout(&o));
    }
    let wrong = tmp("cb-wrong.trace");
    std::fs::write(&wrong, "167838211 3323068417 40000 80 6 2\n").unwrap();
    let o = netsift(&[
        "classify",
        "--rules",
        rules.to_str().unwrap(),
        "--trace",
        wrong.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stdout(&o).contains("1 mismatches"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("rule 2 expected, 1 found"),
        "{}",
        stderr(&o)
    );
    let bad = tmp("cb-bad.rules");
    std::fs::write(&bad, "@10.0.0.0/8 0.0.0.0/0 0 : 65535 80 : 80 0x06/0xFF\n@1.2.3.4/40 0.0.0.0/0 0 : 1 0 : 1 0x06/0xFF\n").unwrap();
    let o = netsift(&[
        "classify",
        "--rules",
        bad.to_str().unwrap(),
        "--trace",
        good.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("line 2, column 10"), "{}", stderr(&o));
}

#[test]
fn gen_classbench_writes_rules_and_a_trace_that_classify_agrees_with() {
    let rules = tmp("cb-gen.rules");
    let trace = tmp("cb-gen.trace");
    let (r, t) = (rules.to_str().unwrap(), trace.to_str().unwrap());
    let o = netsift(&[
        "gen",
        "classbench",
        "acl1",
        "2000",
        "--seed",
        "7",
        "-o",
        r,
        "--trace",
        t,
        "--trace-len",
        "5000",
        "--pareto",
        "1,0.1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("rules generated of 2000 asked for"),
        "{}",
        stderr(&o)
    );
    let text = std::fs::read_to_string(&rules).unwrap();
    let n = text.lines().count();
    assert!((1500..=2000).contains(&n), "{n} rules");
    assert!(text.starts_with('@'));
    assert_eq!(
        std::fs::read_to_string(&trace).unwrap().lines().count(),
        5000
    );
    // The same seed on standard output gives the same rules; a seed file works as a name does.
    let o = netsift(&["gen", "classbench", "acl1", "2000", "--seed", "7"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), text);
    // Every answer of the trace is the first matching rule.
    for engine in ["linear", "hicuts", "hypercuts", "pacuts", "auto"] {
        let o = netsift(&["classify", "--rules", r, "--trace", t, "--engine", engine]);
        assert!(o.status.success(), "{engine}: {}", stderr(&o));
        assert!(
            stdout(&o).contains(&format!("{n} rules, 5000 headers: 0 mismatches")),
            "{}",
            stdout(&o)
        );
    }
    // Errors: a clear message and a non-zero status.
    let bad = tmp("bad_seed");
    std::fs::write(&bad, "-scale\n10\n#\n-prots\n6 0.5 1\n#\n").unwrap();
    let cases: [(&[&str], &str); 6] = [
        (
            &["gen", "classbench", "nosuchseed", "10"],
            "not a ClassBench seed name",
        ),
        (&["gen", "classbench", "acl1", "0"], "N must be 1 to"),
        (
            &["gen", "classbench", "acl1", "10", "--smoothness", "65"],
            "smoothness 65 is out of range",
        ),
        (
            &["gen", "classbench", bad.to_str().unwrap(), "10"],
            "line 5, column 8: expected the protocol number",
        ),
        (
            &["gen", "classbench", "acl1", "10", "--trace-len", "5"],
            "--trace",
        ),
        (
            &["gen", "-w", "/tmp/x.pcap", "classbench", "acl1", "10"],
            "cannot be used",
        ),
    ];
    for (args, message) in cases {
        let o = netsift(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn hitables_rewrites_and_classify_simulates_the_result() {
    let data = std::env::var_os("NETSIFT_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"))
        .join("classbench/ehzuf-HyperSplit");
    let rules = data.join("rules/acl1");
    let trace = data.join("traces/acl1_trace");
    assert!(
        rules.exists(),
        "the shared data is missing: {}",
        rules.display()
    );
    let out = tmp("acl1.hitables");
    let o = netsift(&[
        "hitables",
        "--rules",
        rules.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--stats",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("8140 headers: 0 differ"),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("hitables: 753 rules ->"),
        "{}",
        stderr(&o)
    );
    // The rewritten set, simulated, gives the trace's answers, visiting few rules.
    let o = netsift(&[
        "classify",
        "--rules",
        out.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(s.contains("8140 headers: 0 mismatches"), "{s}");
    let visited: f64 = s
        .rsplit("; ")
        .next()
        .and_then(|t| t.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no path length in {s}"));
    assert!(visited < 40.0, "{visited} rules visited per header");
    // The original, simulated, visits hundreds.
    let o = netsift(&[
        "hitables",
        "--rules",
        rules.to_str().unwrap(),
        "--min-run",
        "100000",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = netsift(&[
        "classify",
        "--rules",
        out.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(stdout(&o).contains("0 mismatches"), "{}", stdout(&o));
    // nft output.
    let o = netsift(&["hitables", "--rules", rules.to_str().unwrap(), "--nft"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("table ip filter") || stdout(&o).contains("\ntable ip filter"),
        "{}",
        &stdout(&o)[..200.min(stdout(&o).len())]
    );
    // Bad input: line and column.
    let bad = tmp("bad.rules");
    std::fs::write(&bad, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 99999 -j ACCEPT\nCOMMIT\n").unwrap();
    let o = netsift(&["hitables", "--rules", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("line 5"), "{}", stderr(&o));
    let o = netsift(&[
        "hitables",
        "--rules",
        rules.to_str().unwrap(),
        "--max-expansion",
        "0.5",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--max-expansion"), "{}", stderr(&o));
}

#[test]
fn offload_prints_rules_and_ethtool_commands() {
    let o = netsift(&["offload", "--nic", "82599", "tcp", "port", "80"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("rule 1: ip4 proto 6 sport 80 -> queue 0"),
        "{out}"
    );
    assert!(out.contains("rule 3: ip4 -> drop [drop-rest]"), "{out}");
    assert!(out.contains("# not offloaded: ip6 allow-list"), "{out}");
    let o = netsift(&[
        "offload",
        "--nic",
        "mlx5",
        "--emit",
        "ethtool",
        "eth7",
        "--queue",
        "3",
        "udp port 53",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("ethtool -N eth7 flow-type udp4 src-port 53 action 3 loc 0"),
        "{out}"
    );
    assert!(
        out.contains("ethtool -N eth7 flow-type ip6 action -1 loc"),
        "{out}"
    );
    // `--emit rules` followed by the expression.
    let o = netsift(&["offload", "--nic", "software", "--emit", "rules", "ip6"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // `ip6` rejects every IPv4 packet, tagged or not: one rule drops them all.
    assert!(
        stdout(&o).contains("rule 1: ip4 -> drop [drop-rest]"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn offload_checks_a_capture_and_reports_errors() {
    let cap = sample();
    let o = netsift(&[
        "offload",
        "--nic",
        "ntuple:64",
        "-r",
        cap.to_str().unwrap(),
        "tcp or udp port 53",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(" 0 differ"), "{err}");
    assert!(err.contains("the NIC dropped"), "{err}");
    for (args, needle) in [
        (vec!["offload", "--nic", "82598", "ip"], "--nic 82598"),
        (vec!["offload", "--nic", "mlx5", "tcp port"], "^"),
        (vec!["offload", "--nic", "mlx5"], "give a filter expression"),
        (
            vec!["offload", "--nic", "mlx5", "--emit", "ethtool"],
            "needs the device",
        ),
    ] {
        let o = netsift(&args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn offload_applies_rules_text_from_a_file_and_a_control_socket() {
    let script = tmp("rules.txt");
    std::fs::write(
        &script,
        "# SIP to queue 0, drop TCP\n+(1,0,udp,0.0.0.0,0,0.0.0.0,5060)\n+(2,-1,tcp,0.0.0.0,0,0.0.0.0,0)\n+(3,1,udp,300.1.1.1,0,0.0.0.0,0)\n",
    )
    .unwrap();
    let o = netsift(&[
        "offload",
        "--nic",
        "ntuple:8",
        "--rules",
        script.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("line 4, column"), "{}", stderr(&o));
    std::fs::write(
        &script,
        "+(1,0,udp,0.0.0.0,0,0.0.0.0,5060)\n-(1)\n+(2,-1,tcp,0.0.0.0,0,0.0.0.0,0)\n",
    )
    .unwrap();
    let o = netsift(&[
        "offload",
        "--nic",
        "ntuple:8",
        "--emit",
        "text",
        "--rules",
        script.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "+(2,-1,tcp,0.0.0.0,0,0.0.0.0,0)");

    // The control socket: one connection adds, removes, errs and quits.
    use std::io::{BufRead, BufReader, Write};
    let sock = tmp("control.sock");
    let _ = std::fs::remove_file(&sock);
    let child = Command::new(env!("CARGO_BIN_EXE_netsift"))
        .args([
            "offload",
            "--nic",
            "ntuple:8",
            "--control",
            sock.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stream = None;
    for _ in 0..200 {
        if let Ok(s) = std::os::unix::net::UnixStream::connect(&sock) {
            stream = Some(s);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let mut stream = stream.expect("the control socket never appeared");
    stream
        .write_all(b"+(5,2,udp,198.18.0.1,0,0.0.0.0,53)\n+(6,x)\n+(7,-1,tcp,0.0.0.0,0,0.0.0.0,22)\n-(5)\nquit\n")
        .unwrap();
    let replies: Vec<String> = BufReader::new(&stream)
        .lines()
        .map(|l| l.unwrap())
        .collect();
    assert_eq!(replies.len(), 5, "{replies:?}");
    assert_eq!(replies[0], "ok");
    assert!(
        replies[1].starts_with("error: line 2, column"),
        "{replies:?}"
    );
    assert_eq!(&replies[2..], ["ok", "ok", "ok bye"]);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "rule 7: ip4 proto 6 dport 22 -> drop");
    assert!(!sock.exists(), "the socket was not removed");
}

#[test]
fn flow_counts_match_the_filter_command_and_writes_dot() {
    let cap = sample();
    let cap = cap.to_str().unwrap();
    let count = |expr: &str| -> usize {
        let o = netsift(&["filter", "-r", cap, "--verdicts", expr]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).lines().filter(|l| !l.ends_with(" 0")).count()
    };
    let (tcp, udp) = (count("tcp"), count("udp"));
    let dot = tmp("flows.dot");
    let o = netsift(&[
        "flow",
        "-r",
        cap,
        "--stats",
        "--dot",
        dot.to_str().unwrap(),
        r#"(device,eth0) -> (bpf,"tcp") -> (packetcount,,8)"#,
        r#"(device,eth0) -> (bpf,"tcp") -> (bpf,"tcp") ; (device,eth0) -> (jit,"udp") -> (packetcount,,8)"#,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(&format!("filter 2 packetcount#2: {tcp} packets")),
        "{out}"
    );
    assert!(out.contains(&format!("  delivered {udp} packets")), "{out}");
    // One device and one `bpf "tcp"` instance serve the first two flows.
    assert!(out.contains("bpf#1(tcp) upstream [0]: seen"), "{out}");
    assert!(out.contains("used by 3 flow(s)"), "{out}");
    let d = std::fs::read_to_string(&dot).unwrap();
    assert!(d.starts_with("digraph ffpf"), "{d}");
    assert!(
        d.contains("flow1 -> n1") && d.contains("flow2 -> n1"),
        "{d}"
    );
    // Classes are listed; errors point at the token.
    let o = netsift(&["flow", "--list-classes"]);
    assert!(stdout(&o).contains("strsearch"));
    let o = netsift(&["flow", "-r", cap, r#"(bpf,"tcp") -> (packetcount,,4)"#]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("needs an MBuf of at least 8 bytes"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains('^'));
}

#[test]
fn fpl_check_and_run() {
    let fig6 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fpl/examples/fig6.fpl");
    let o = netsift(&["fpl", "check", fig6.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("max operations per packet"),
        "{}",
        stdout(&o)
    );
    let cap = sample();
    let runs: Vec<String> = [&[][..], &["--interp"][..]]
        .iter()
        .map(|extra| {
            let mut a = vec![
                "fpl",
                "run",
                fig6.to_str().unwrap(),
                "-r",
                cap.to_str().unwrap(),
            ];
            a.extend_from_slice(extra);
            let o = netsift(&a);
            assert!(o.status.success(), "{}", stderr(&o));
            stdout(&o).lines().skip(1).collect::<Vec<_>>().join("\n")
        })
        .collect();
    // Native code and the interpreter leave the same registers and memory.
    assert_eq!(runs[0], runs[1]);
    assert!(runs[0].contains("MEM["), "{}", runs[0]);
    let bad = tmp("bad.fpl");
    std::fs::write(&bad, "FOR (R[0]=0; R[0] < R[1]; R[0]++) ROF").unwrap();
    let o = netsift(&["fpl", "check", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no compile-time bound"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains('^'));
}

#[test]
fn flow_queues_split_the_capture_over_worker_threads() {
    let cap = sample();
    let cap = cap.to_str().unwrap();
    let graph = r#"(bpf,"tcp") -> (packetcount,,8)"#;
    let one = netsift(&["flow", "-r", cap, graph]);
    assert!(one.status.success(), "{}", stderr(&one));
    let total: String = stdout(&one)
        .lines()
        .find_map(|l| l.trim().strip_prefix("delivered ").map(str::to_string))
        .unwrap();
    let n = total.split(' ').next().unwrap().to_string();
    let four = netsift(&["flow", "-r", cap, "--queues", "4", graph]);
    assert!(four.status.success(), "{}", stderr(&four));
    let out = stdout(&four);
    assert_eq!(out.matches("(worker thread").count(), 4, "{out}");
    assert!(
        out.contains(&format!(
            "all 4 queues:\n  flow 1: {graph}: delivered {n} packets"
        )),
        "{out}"
    );
    let o = netsift(&["flow", "--queues", "2", graph]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("-r FILE"), "{}", stderr(&o));
}

#[test]
fn verbose_says_which_engine_runs_the_filter() {
    let s = sample();
    let s = s.to_str().unwrap();
    let o = netsift(&["-v", "filter", "-r", s, "--verdicts", "tcp port 80"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("engine auto: JIT (") || e.contains("engine auto: interpreter ("),
        "{e}"
    );
    let o = netsift(&["filter", "-r", s, "--verdicts", "tcp port 80"]);
    assert_eq!(stderr(&o), "", "nothing without -v");
    let o = netsift(&["filter", "-r", s, "-v", "--engine", "swift", "tcp port 80"]);
    assert!(
        stderr(&o).contains("engine Swift: Swift ("),
        "{}",
        stderr(&o)
    );
    // Engines that cannot serve say why, in the words of the flag.
    let o = netsift(&["filter", "-r", s, "--engine", "swift", "ip[2:2] - 20 > 100"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("Swift cannot express this filter: arithmetic"),
        "{}",
        stderr(&o)
    );
    let prog = tmp("tcp.ddd");
    std::fs::write(&prog, "1\n6 0 0 65535\n").unwrap();
    let o = netsift(&[
        "filter",
        "-r",
        s,
        "--engine",
        "swift",
        "--program",
        prog.to_str().unwrap(),
    ]);
    assert!(
        stderr(&o).contains("--engine swift runs filter expressions, not classic BPF programs"),
        "{}",
        stderr(&o)
    );
    std::fs::write(&prog, "1\n6 0 0 65535 junk\n2\n").unwrap();
    let o = netsift(&["filter", "-r", s, "--program", prog.to_str().unwrap()]);
    assert!(!o.status.success());
    let bad = tmp("bad.ddd");
    std::fs::write(&bad, "1\n7 0 0 0\n").unwrap();
    let o = netsift(&["filter", "-r", s, "--program", bad.to_str().unwrap()]);
    assert!(
        stderr(&o).contains(&format!("the program in {} is not valid: ", bad.display())),
        "{}",
        stderr(&o)
    );
}
