//! Debian's capture tools, unmodified, print exactly the same on netsift's libpcap as on
//! libpcap 1.10.3 for every shared capture (`../shared/data/captures`, 830 + 37 files):
//!
//! - `tcpdump -n -r F`, `tcpdump -n -e -vv -r F` and `tcpdump -n -r F EXPR` (standard output,
//!   standard error and exit status);
//! - `ngrep -q -t -I F ''` (the same);
//! - `tcpflow -r F` (the flow files it writes: names and contents);
//! - `softflowd -r F` exporting NetFlow v5 to `nfcapd` on loopback (the flows `nfdump`
//!   prints, without the export-time fields).
//!
//! Everything runs over every capture (about 40 s on two cores).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Captures on which ngrep reads memory it never initialised, so that its output depends on
/// what the library left on the stack, not on the packets: for IP versions other than 4 and
/// 6 it prints the addresses in its uninitialised local buffers (ngrep.c, `process`).
const NGREP_UNDEFINED: &[&str] = &[
    "gre-heapoverflow-1.pcap",
    "ipv6-bad-version.pcap",
    "tcp_header_heapoverflow.pcap",
];

/// Filters tcpdump reads every capture with (any link type: where libpcap cannot compile one,
/// its error message and exit status are compared).
const EXPRS: &[&str] = &[
    "tcp port 80 or udp",
    "not ip6 and len > 100",
    "ip",
    "arp or rarp",
    "icmp or icmp6",
    "vlan and ip",
    "ether broadcast or ether multicast",
    "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
    "llc",
    "wlan type data",
    "ip proto 47 or ip6 proto 58",
];

/// One run: exit status, standard output, standard error.
fn run(cmd: &mut Command, lib: Option<&Path>) -> (i32, Vec<u8>, Vec<u8>) {
    match lib {
        Some(dir) => cmd.env("LD_LIBRARY_PATH", dir),
        None => cmd.env_remove("LD_LIBRARY_PATH"),
    };
    let out = cmd.stdin(Stdio::null()).output().expect("run the tool");
    (out.status.code().unwrap_or(-1), out.stdout, out.stderr)
}

/// Every shared capture.
fn captures() -> Vec<PathBuf> {
    let mut all = netsift_testkit::data::tcpdump_captures();
    all.extend(netsift_testkit::data::libpcap_captures());
    all
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// Runs `job` on every item on all cores; the differences it reports, sorted.
fn each<T: Sync>(items: &[T], job: impl Fn(&T) -> Option<String> + Sync) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let diffs = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    if let Some(d) = job(item) {
                        diffs.lock().unwrap().push(d);
                    }
                }
            });
        }
    });
    let mut d = diffs.into_inner().unwrap();
    d.sort();
    d
}

/// The first differing line of two outputs.
fn first_difference(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    for i in 0..la.len().max(lb.len()) {
        if la.get(i) != lb.get(i) {
            return format!(
                "line {}: netsift {:?}, libpcap {:?}",
                i + 1,
                la.get(i).unwrap_or(&"<none>"),
                lb.get(i).unwrap_or(&"<none>")
            );
        }
    }
    "same lines, different bytes".into()
}

/// Runs `args` with both libraries; a description of the difference, if any.
fn compare(tool: &str, args: &[&str], file: &Path) -> Option<String> {
    let lib = common::lib_dir();
    let mk = || {
        let mut c = Command::new(tool);
        for a in args {
            if *a == "FILE" {
                c.arg(file);
            } else {
                c.arg(a);
            }
        }
        c
    };
    let ours = run(&mut mk(), Some(lib));
    let theirs = run(&mut mk(), None);
    if ours == theirs {
        return None;
    }
    let what = if ours.0 != theirs.0 {
        format!("exit status {} vs {}", ours.0, theirs.0)
    } else if ours.1 != theirs.1 {
        format!("stdout {}", first_difference(&ours.1, &theirs.1))
    } else {
        format!("stderr {}", first_difference(&ours.2, &theirs.2))
    };
    Some(format!("{tool} {args:?} {}: {what}", name(file)))
}

#[test]
fn tcpdump_reads_every_capture_as_on_libpcap() {
    let tcpdump = common::tcpdump();
    let files = captures();
    let mut runs: Vec<Vec<&str>> = vec![
        vec!["-n", "-r", "FILE"],
        vec!["-n", "-e", "-vv", "-r", "FILE"],
    ];
    for e in EXPRS {
        runs.push(vec!["-n", "-r", "FILE", e]);
    }
    let jobs: Vec<(&PathBuf, &Vec<&str>)> = files
        .iter()
        .flat_map(|f| runs.iter().map(move |r| (f, r)))
        .collect();
    let diffs = each(&jobs, |(f, args)| compare(tcpdump, args, f));
    println!(
        "tcpdump: {} captures x {} command lines = {} runs on each library, {} differ",
        files.len(),
        runs.len(),
        jobs.len(),
        diffs.len()
    );
    assert!(diffs.is_empty(), "tcpdump differs:\n{}", diffs.join("\n"));
    assert!(files.len() >= 867, "only {} shared captures", files.len());
}

#[test]
fn ngrep_reads_every_capture_as_on_libpcap() {
    common::tcpdump();
    common::ensure("ngrep", "ngrep");
    let files: Vec<PathBuf> = captures()
        .into_iter()
        .filter(|f| !NGREP_UNDEFINED.contains(&name(f).as_str()))
        .collect();
    let diffs = each(&files, |f| {
        compare("ngrep", &["-q", "-t", "-I", "FILE", ""], f)
    });
    println!(
        "ngrep: {} captures ({} left out: ngrep reads uninitialised memory on them), {} differ",
        files.len(),
        NGREP_UNDEFINED.len(),
        diffs.len()
    );
    assert!(diffs.is_empty(), "ngrep differs:\n{}", diffs.join("\n"));
}

/// A fresh directory under the test target's temporary directory.
fn scratch(what: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("netsift-tools")
        .join(format!("{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The files under `dir` (relative names) and their contents, without tcpflow's report
/// (which holds the run's time and command line).
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n != "report.xml") {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn tcpflow_writes_the_same_flows_as_on_libpcap() {
    common::tcpdump();
    common::ensure("tcpflow", "tcpflow");
    let lib = common::lib_dir();
    let files = captures();
    let root = scratch("tcpflow");
    let flows = AtomicUsize::new(0);
    let diffs = each(&files, |f| {
        let base = root.join(name(f));
        let mut trees = Vec::new();
        for (tag, l) in [("netsift", Some(lib)), ("libpcap", None)] {
            let dir = base.join(tag);
            std::fs::create_dir_all(&dir).unwrap();
            let mut c = Command::new("tcpflow");
            c.arg("-r").arg(f).arg("-o").arg(&dir);
            let (st, _, _) = run(&mut c, l);
            trees.push((st, tree(&dir)));
        }
        let _ = std::fs::remove_dir_all(&base);
        flows.fetch_add(trees[1].1.len(), Ordering::Relaxed);
        if trees[0] == trees[1] {
            return None;
        }
        let (a, b) = (&trees[0].1, &trees[1].1);
        let only: Vec<&String> = a.keys().filter(|k| !b.contains_key(*k)).collect();
        let missing: Vec<&String> = b.keys().filter(|k| !a.contains_key(*k)).collect();
        Some(format!(
            "tcpflow {}: status {} vs {}; only netsift {only:?}; only libpcap {missing:?}",
            name(f),
            trees[0].0,
            trees[1].0
        ))
    });
    let _ = std::fs::remove_dir_all(&root);
    println!(
        "tcpflow: {} captures, {} flow files written by each library, {} captures differ",
        files.len(),
        flows.load(Ordering::Relaxed),
        diffs.len()
    );
    assert!(diffs.is_empty(), "tcpflow differs:\n{}", diffs.join("\n"));
}

/// Kills the collector when dropped (also when the test fails).
struct Collector(std::process::Child);

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The flows of `files` as `softflowd -r` exports them to an `nfcapd` on loopback, read back
/// with `nfdump`: protocol, addresses, ports, packets, bytes and flow count, sorted (the
/// export clock's fields differ between any two runs).
fn softflowd_flows(files: &[PathBuf], lib: Option<&Path>, dir: &Path) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    // A free UDP port on loopback.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("nfcapd")
        .arg("-l")
        .arg(dir)
        .args(["-b", "127.0.0.1", "-p", &port.to_string(), "-t", "3600"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nfcapd");
    let mut collector = Collector(child);
    std::thread::sleep(std::time::Duration::from_millis(500));
    for f in files {
        let mut c = Command::new("softflowd");
        c.arg("-r")
            .arg(f)
            .args(["-n", &format!("127.0.0.1:{port}"), "-v", "5"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        run(&mut c, lib);
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SIGTERM: nfcapd writes its file out.
    // SAFETY: a plain signal to our own child.
    unsafe { libc::kill(collector.0.id() as i32, libc::SIGTERM) };
    let _ = collector.0.wait();
    let out = Command::new("nfdump")
        .arg("-R")
        .arg(dir)
        .args(["-q", "-N", "-o", "fmt:%pr %sa %sp %da %dp %pkt %byt %fl"])
        .output()
        .expect("run nfdump");
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect();
    lines.sort();
    lines
}

#[test]
fn softflowd_exports_the_same_flows_as_on_libpcap() {
    common::tcpdump();
    common::ensure("softflowd", "softflowd");
    common::ensure("nfcapd", "nfdump");
    let files = captures();
    let root = scratch("softflowd");
    let ours = softflowd_flows(&files, Some(common::lib_dir()), &root.join("netsift"));
    let theirs = softflowd_flows(&files, None, &root.join("libpcap"));
    let _ = std::fs::remove_dir_all(&root);
    println!(
        "softflowd -> nfcapd: {} captures, {} flows from each library",
        files.len(),
        theirs.len()
    );
    assert!(
        !theirs.is_empty(),
        "nfcapd received no flows from libpcap's softflowd"
    );
    assert_eq!(ours, theirs, "softflowd's flows differ");
}
