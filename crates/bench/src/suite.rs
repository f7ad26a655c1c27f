//! The `netsift bench` suites: each prints a table of netsift against its baseline, measured in
//! the same run on the same packets.

use std::fmt::Write as _;
use std::time::Instant;

use netsift_bpf::{Filter, Rules};

use crate::libpcap::Libpcap;
use crate::workload;

/// The suites `netsift bench` knows, with a one-line description each.
pub const SUITES: [(&str, &str); 1] = [(
    "interp",
    "classic BPF interpreter against libpcap's bpf_filter, same programs and packets",
)];

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
