//! The `netsift bench` suites: each prints a table of netsift against its baseline, measured in
//! the same run on the same packets.

use std::fmt::Write as _;
use std::time::Instant;

use netsift_bpf::{Filter, Rules};

use crate::libpcap::Libpcap;
use crate::workload;

/// The suites `netsift bench` knows, with a one-line description each.
pub const SUITES: [(&str, &str); 14] = [
    (
        "interp",
        "classic BPF interpreter against libpcap's bpf_filter, same programs and packets",
    ),
    (
        "compile",
        "filter compiler (parse, lower, optimise) against libpcap's pcap_compile",
    ),
    (
        "jit",
        "JIT against the interpreter, libpcap's bpf_filter and hand-written Rust (Swift Table 5)",
    ),
    (
        "update",
        "Swift update latency (add/delete one FTP data connection at N = 1 .. 10,000) against \
         recompiling with netsift and pcap_compile (Swift Figs. 5-6)",
    ),
    (
        "ftpcap",
        "FTPCap replay: 10 FTP servers x 20 passive-mode data connections in 500 Kpps background, \
         real time; packets missed per connection, Swift against recompiling (Swift Figs. 7-8)",
    ),
    (
        "classify",
        "rule-set classification: linear, HiCuts, HyperCuts, PaCuts on ClassBench acl1/fw1/ipc1 \
         10K traces; lookups/s, build time, memory",
    ),
    (
        "dropin",
        "Debian's tcpdump on netsift's libpcap against libpcap 1.10.3: reading and filtering a \
         file (tcpdump -r BIG -w OUT 'tcp port 80') and a live capture (tcpdump -w /dev/null on \
         a veth pair); CPU per packet, same run; needs root",
    ),
    (
        "capture",
        "live capture on a veth pair (AF_PACKET, AF_XDP) against tcpdump -w /dev/null; needs root",
    ),
    (
        "hitables",
        "HiTables in the kernel: packets/s through INPUT, ClassBench acl1/fw1/ipc1 10K original \
         against rewritten, iptables-nft and nft (HiTables Fig. 5b); needs root, iptables, nft",
    ),
    (
        "ebpf",
        "filters in the kernel: per-packet time (BPF_PROG_TEST_RUN) of Swift Table 5 as netsift \
         eBPF and as Swift passes in maps against libpcap's code translated the kernel's way \
         (LD_ABS); Swift-in-kernel update (map writes) against recompile + load + attach at N = \
         10, 100, 1,000 data connections; needs root",
    ),
    (
        "fpl",
        "FPL: the FFPF paper's Fig. 6 as native code and interpreted against hand-written Rust",
    ),
    (
        "offload",
        "hardware-assisted filtering on the emulated NIC: Deri et al. Table 1 (capture rate and \
         CPU load per frame size, software against hardware filter, with the XDP drop cost as \
         root) and rule install/remove latency at 1, 1,000 and 30,000 rules",
    ),
    (
        "flow",
        "FFPF flows: N = 1, 2, 4, 8 flows sharing a `tcp` prefix against N libpcap-style readers \
         (own filter and copy each; libpcap, interpreter, JIT); CPU ns/packet, slope per flow; \
         single-flow Mpps",
    ),
    (
        "daemon",
        "one capture, many applications: CPU per packet of 1, 2, 4 tcpdumps through one netsiftd \
         against each on its own AF_PACKET socket with libpcap; needs root, tcpdump, netsiftd and \
         netsift's libpcap built next to netsift",
    ),
];

/// Median time per packet, in nanoseconds, of `run` over `packets`, from `samples` samples of
/// about 5 ms each.
pub fn ns_per_packet<P>(packets: &[P], samples: usize, mut run: impl FnMut(&P) -> u32) -> f64 {
    // Calibrate the number of passes per sample.
    let start = Instant::now();
    let mut sink = 0u32;
    for p in packets {
        sink = sink.wrapping_add(run(p));
    }
    let one = start.elapsed().as_secs_f64().max(1e-9);
    let passes = ((0.005 / one).ceil() as usize).max(1);
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..passes {
                for p in packets {
                    sink = sink.wrapping_add(run(std::hint::black_box(p)));
                }
            }
            t.elapsed().as_secs_f64() * 1e9 / (passes * packets.len()).max(1) as f64
        })
        .collect();
    std::hint::black_box(sink);
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Run the suite `name` and return its report; an error names the unknown suite or the missing
/// baseline.
pub fn run(name: &str) -> Result<String, String> {
    match name {
        "interp" => interp(),
        "compile" => compile(),
        "jit" => jit(),
        "update" => crate::update::suite(&crate::update::Config::default()),
        "ftpcap" => {
            let csv = std::env::var_os("NETSIFT_BENCH_CSV").map(std::path::PathBuf::from);
            crate::ftpcap::suite(&crate::ftp::FtpWorkload::paper(), csv.as_deref())
        }
        "classify" => {
            let csv = std::env::var_os("NETSIFT_BENCH_CSV").map(std::path::PathBuf::from);
            crate::classify::suite(csv.as_deref())
        }
        #[cfg(target_os = "linux")]
        "capture" => {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            crate::capture::suite(&exe, 1_000_000, 3)
        }
        #[cfg(target_os = "linux")]
        "hitables" => {
            let csv = std::env::var_os("NETSIFT_BENCH_CSV").map(std::path::PathBuf::from);
            crate::hitables::suite(&crate::hitables::SuiteConfig::default(), csv.as_deref())
        }
        #[cfg(target_os = "linux")]
        "ebpf" => crate::ebpf::suite(&crate::ebpf::Config::default()),
        "fpl" => crate::fpl::suite(),
        #[cfg(target_os = "linux")]
        "offload" => crate::offload::suite(),
        "flow" => crate::flow::suite(&crate::flow::Config::default()),
        #[cfg(target_os = "linux")]
        "dropin" => {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            crate::dropin::suite(&exe, &crate::daemon::Config::from_env()?)
        }
        "daemon" => {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            crate::daemon::suite(&exe, &crate::daemon::Config::from_env()?)
        }
        _ => Err(format!(
            "unknown benchmark suite `{name}`; the suites are: {}",
            SUITES.map(|(n, _)| n).join(", ")
        )),
    }
}

/// The interpreter suite.
fn interp() -> Result<String, String> {
    let lib = Libpcap::load()?;
    let packets = workload::packets(workload::SEED, 4096);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite interp: {} packets (snap length {}), baseline {}\n",
        packets.len(),
        workload::SNAPLEN,
        lib.version()
    );
    let _ = writeln!(
        out,
        "{:<12} {:>6} {:>9} {:>14} {:>14} {:>8}",
        "filter", "insns", "accepted", "libpcap ns/pkt", "netsift ns/pkt", "speedup"
    );
    for f in workload::interp_filters() {
        let theirs = lib.compile(1, 262_144, &f.expr, true)?;
        let ours = Filter::new(theirs.program().clone(), Rules::Libpcap)
            .map_err(|e| format!("{}: {e}", f.name))?;
        let mut accepted = 0;
        for p in &packets {
            let (a, b) = (
                ours.run(&p.data, p.wire_len),
                theirs.run(&p.data, p.wire_len),
            );
            if a != b {
                return Err(format!(
                    "{}: netsift and libpcap disagree on a packet",
                    f.name
                ));
            }
            accepted += usize::from(a != 0);
        }
        let base = ns_per_packet(&packets, 15, |p| theirs.run(&p.data, p.wire_len));
        let mine = ns_per_packet(&packets, 15, |p| ours.run(&p.data, p.wire_len));
        let _ = writeln!(
            out,
            "{:<12} {:>6} {:>9} {:>14.2} {:>14.2} {:>7.2}x",
            f.name,
            theirs.program().len(),
            accepted,
            base,
            mine,
            base / mine
        );
    }
    Ok(out)
}

/// Compile `expr` with netsift (optimised, Ethernet), returning the instruction count.
pub fn netsift_compile(expr: &str) -> Result<usize, String> {
    // What `pcap_open_dead(DLT_EN10MB, 262144)` + `pcap_compile(…, optimize = 1, …)` is
    // compiled for, through the one filter API every entry point uses.
    let target = netsift_filter::Target::live(
        netsift_capture::LinkType::ETHERNET,
        netsift_filter::DEFAULT_SNAPLEN,
    );
    let p = netsift_filter::compile_program(expr, &target).map_err(|e| e.to_string())?;
    Ok(p.len())
}

/// Median times (microseconds) of `base` and `ours` and the median of their ratio, over
/// `samples` pairs of runs of about 10 ms each, taken in turn (`base`, `ours`, `base`, …) so that
/// a slow stretch of the machine slows both sides of a pair, not one side of the comparison.
fn paired_us(
    samples: usize,
    mut base: impl FnMut() -> usize,
    mut ours: impl FnMut() -> usize,
) -> (f64, f64, f64) {
    let reps = |f: &mut dyn FnMut() -> usize| {
        let start = Instant::now();
        std::hint::black_box(f());
        let one = start.elapsed().as_secs_f64().max(1e-7);
        ((0.01 / one).ceil() as usize).max(1)
    };
    let (rb, ro) = (reps(&mut base), reps(&mut ours));
    let mut sink = 0usize;
    let mut time = |f: &mut dyn FnMut() -> usize, reps: usize| {
        let t = Instant::now();
        for _ in 0..reps {
            sink = sink.wrapping_add(f());
        }
        t.elapsed().as_secs_f64() * 1e6 / reps as f64
    };
    let (mut tb, mut to, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..samples {
        let b = time(&mut base, rb);
        let o = time(&mut ours, ro);
        tb.push(b);
        to.push(o);
        ratio.push(b / o);
    }
    std::hint::black_box(sink);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(&mut tb), median(&mut to), median(&mut ratio))
}

/// The compile suite.
fn compile() -> Result<String, String> {
    let lib = Libpcap::load()?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite compile: optimised, Ethernet, baseline {}\n",
        lib.version()
    );
    let _ = writeln!(
        out,
        "{:<12} {:>13} {:>13} {:>12} {:>12} {:>8}",
        "filter", "libpcap insns", "netsift insns", "libpcap us", "netsift us", "speedup"
    );
    // libpcap compiles on one dead handle kept open, as a program holding a capture handle
    // does: `pcap_compile` and `pcap_freecode` are timed, not `pcap_open_dead`.
    let dead = lib.dead(1, 262_144)?;
    let (mut met, mut missed) = (Vec::new(), Vec::new());
    for f in workload::compile_filters() {
        let cexpr = std::ffi::CString::new(f.expr.as_str())
            .map_err(|_| format!("{}: the expression contains NUL", f.name))?;
        let theirs = dead.compile_len(&cexpr, true)?;
        let mine = netsift_compile(&f.expr)?;
        let (base, ours, speedup) = paired_us(
            15,
            || dead.compile_len(&cexpr, true).unwrap_or(0),
            || netsift_compile(&f.expr).unwrap_or(0),
        );
        let _ = writeln!(
            out,
            "{:<12} {:>13} {:>13} {:>12.2} {:>12.2} {:>7.2}x",
            f.name, theirs, mine, base, ours, speedup
        );
        // The goal: 3x on every filter, 50x on the 200-host one.
        let goal = if f.name == "200 hosts" { 50.0 } else { 3.0 };
        if speedup >= goal {
            met.push(f.name);
        } else {
            missed.push(f.name);
        }
    }
    let _ = writeln!(
        out,
        "\nlibpcap: pcap_compile + pcap_freecode on one dead handle; netsift: parse, lower, \
         optimise, lay out. 15 pairs of ~10 ms runs, one side then the other; medians of each \
         side's time and of the pairs' ratios (the speedup). Goal: 3x (50x on 200 hosts). At or \
         above it: {}; below: {}.",
        names(&met),
        names(&missed),
    );
    Ok(out)
}

/// `a, b, c`, or `none`.
fn names(list: &[&str]) -> String {
    if list.is_empty() {
        "none".to_string()
    } else {
        list.join(", ")
    }
}

/// The JIT suite: Swift Table 5 on the gateway mix, libpcap's programs run by libpcap, the
/// interpreter and the JIT, and the hand-written functions.
fn jit() -> Result<String, String> {
    let lib = Libpcap::load()?;
    let packets = workload::packets(workload::SEED, 4096);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite jit: {} packets, programs compiled by {}; ns per packet (median)\n",
        packets.len(),
        lib.version()
    );
    let _ = writeln!(
        out,
        "{:<8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>12}",
        "filter", "insns", "libpcap", "interp", "jit", "rust", "jit/rust", "libpcap/jit"
    );
    for (f, hand) in workload::swift_table5()
        .into_iter()
        .zip(crate::handwritten::ALL)
    {
        let theirs = lib.compile(1, 262_144, &f.expr, true)?;
        let interp =
            Filter::new(theirs.program().clone(), Rules::Libpcap).map_err(|e| e.to_string())?;
        let jit = netsift_jit::JitFilter::new(theirs.program().clone(), Rules::Libpcap)
            .map_err(|e| e.to_string())?;
        for p in &packets {
            let v = interp.run(&p.data, p.wire_len);
            if jit.run(&p.data, p.wire_len) != v || hand(&p.data) != v {
                return Err(format!("{}: the engines disagree on a packet", f.name));
            }
        }
        let l = ns_per_packet(&packets, 15, |p| theirs.run(&p.data, p.wire_len));
        let i = ns_per_packet(&packets, 15, |p| interp.run(&p.data, p.wire_len));
        let j = ns_per_packet(&packets, 15, |p| jit.run(&p.data, p.wire_len));
        let r = ns_per_packet(&packets, 15, |p| hand(&p.data));
        let _ = writeln!(
            out,
            "{:<8} {:>6} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2}x {:>11.1}x",
            f.name,
            theirs.program().len(),
            l,
            i,
            j,
            r,
            j / r,
            l / j
        );
    }
    Ok(out)
}
