//! Debian's tcpdump on netsift's libpcap prints what it prints on the real libpcap: for every
//! shared Ethernet capture and a set of filters, `tcpdump -r FILE -n -tt -e [EXPR]` gives the
//! same standard output, the same standard error and the same exit status with
//! `LD_LIBRARY_PATH` pointing at netsift's `libpcap.so.0.8` as without.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use netsift_capture::{CaptureReader, LinkType};

/// The filters every capture is read with (`None`: no filter), and extra tcpdump flags.
const RUNS: &[(&[&str], Option<&str>)] = &[
    (&[], None),
    (&[], Some("tcp")),
    (&[], Some("udp port 53")),
    (&[], Some("host 10.0.0.1")),
    (&[], Some("vlan")),
    (&[], Some("icmp")),
    (&[], Some("not ip")),
    (&[], Some("tcp[tcpflags] & tcp-syn != 0")),
    (&["--nano"], Some("ip or ip6")),
];

/// One tcpdump run: exit status, stdout and stderr.
fn run(
    file: &Path,
    flags: &[&str],
    expr: Option<&str>,
    lib: Option<&Path>,
) -> (i32, String, String) {
    let mut c = Command::new(common::tcpdump());
    c.arg("-r").arg(file).args(["-n", "-tt", "-e"]).args(flags);
    if let Some(e) = expr {
        c.arg(e);
    }
    match lib {
        Some(dir) => {
            c.env("LD_LIBRARY_PATH", dir);
        }
        None => {
            c.env_remove("LD_LIBRARY_PATH");
        }
    }
    let out = c.output().expect("run tcpdump");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The first differing line of two outputs, or `None`.
fn first_difference(a: &str, b: &str) -> Option<String> {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    for i in 0..la.len().max(lb.len()) {
        let (x, y) = (la.get(i), lb.get(i));
        if x != y {
            return Some(format!(
                "line {}:\n  netsift: {}\n  libpcap: {}",
                i + 1,
                x.unwrap_or(&"<none>"),
                y.unwrap_or(&"<none>")
            ));
        }
    }
    None
}

/// The Ethernet captures of the shared data, as netsift's reader sees them.
fn ethernet_captures() -> (Vec<PathBuf>, usize) {
    let mut all = netsift_testkit::data::tcpdump_captures();
    all.extend(netsift_testkit::data::libpcap_captures());
    let total = all.len();
    let eth = all
        .into_iter()
        .filter(|p| {
            CaptureReader::open(p)
                .ok()
                .is_some_and(|r| r.link_type() == Some(LinkType::ETHERNET))
        })
        .collect();
    (eth, total)
}

#[test]
fn tcpdump_prints_the_same_on_netsift_libpcap() {
    let lib = common::lib_dir().to_path_buf();
    let (captures, total) = ethernet_captures();
    assert!(
        captures.len() > 400,
        "only {} Ethernet captures found",
        captures.len()
    );
    let jobs: Vec<(PathBuf, usize)> = captures
        .iter()
        .flat_map(|c| (0..RUNS.len()).map(move |i| (c.clone(), i)))
        .collect();
    let next = Mutex::new(0usize);
    let results = Mutex::new((0usize, 0usize, Vec::<String>::new()));
    // Two workers: the machines are shared.
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap();
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some((file, r)) = jobs.get(i) else { break };
                    let (flags, expr) = RUNS[*r];
                    let ours = run(file, flags, expr, Some(&lib));
                    let theirs = run(file, flags, expr, None);
                    let lines = theirs.1.lines().count() + theirs.2.lines().count();
                    let mut diffs = Vec::new();
                    if ours.0 != theirs.0 {
                        diffs.push(format!("exit status {} vs {}", ours.0, theirs.0));
                    }
                    if let Some(d) = first_difference(&ours.1, &theirs.1) {
                        diffs.push(format!("stdout {d}"));
                    }
                    if let Some(d) = first_difference(&ours.2, &theirs.2) {
                        diffs.push(format!("stderr {d}"));
                    }
                    let mut res = results.lock().unwrap();
                    res.0 += 1;
                    res.1 += lines;
                    for d in diffs {
                        res.2.push(format!(
                            "{} {:?} {:?}: {d}",
                            file.display(),
                            flags,
                            expr.unwrap_or("")
                        ));
                    }
                }
            });
        }
    });
    let (runs, lines, diffs) = results.into_inner().unwrap();
    println!(
        "{} Ethernet captures (of {total}) x {} runs = {runs} comparisons, {lines} lines compared, {} differences",
        captures.len(),
        RUNS.len(),
        diffs.len()
    );
    for d in diffs.iter().take(20) {
        println!("{d}");
    }
    assert_eq!(runs, captures.len() * RUNS.len());
    assert!(
        diffs.is_empty(),
        "{} differences (first ones above)",
        diffs.len()
    );
}

#[test]
fn tcpdump_writes_the_same_files() {
    // -w through pcap_dump_open/pcap_dump (tcpdump never closes the dumper: exit flushes it).
    let lib = common::lib_dir().to_path_buf();
    let (captures, _) = ethernet_captures();
    let dir = std::env::temp_dir().join(format!("netsift-pcap-w-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, file) in captures.iter().step_by(25).enumerate() {
        for (nano, expr) in [(false, "ip"), (true, "not tcp")] {
            let mut outs = Vec::new();
            for who in ["netsift", "libpcap"] {
                let out = dir.join(format!("{i}-{who}-{nano}.pcap"));
                let mut c = Command::new(common::tcpdump());
                c.arg("-r").arg(file).arg("-w").arg(&out).arg(expr);
                if nano {
                    c.arg("--nano");
                }
                if who == "netsift" {
                    c.env("LD_LIBRARY_PATH", &lib);
                } else {
                    c.env_remove("LD_LIBRARY_PATH");
                }
                let o = c.output().expect("tcpdump -w");
                outs.push((o.status.code(), std::fs::read(&out).unwrap_or_default()));
            }
            assert_eq!(
                outs[0],
                outs[1],
                "{} -w {expr} (nano {nano})",
                file.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
