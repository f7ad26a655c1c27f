//! `netsift bench flow`: FFPF flows (the framework of `netsift-graph`) against libpcap-style
//! independent readers, in one run on the same in-memory traffic.
//!
//! 1. **Flows with overlapping filters.** N = 1, 2, 4, 8 flows
//!    `(mem) -> (jit,"tcp") -> (jit,"tcp port P_i")` in one flow group: the source and the
//!    `tcp` filter are one instance for all flows (prefix merging), each flow has its own last
//!    filter, a packet some flow accepts is copied into the group's PBuf once, and each
//!    accepting flow gets an IBuf entry. After every chunk of packets ([`Config::chunk`]) each
//!    flow's reader drains its IBuf on the same thread (zero-copy `Reader::next`, touching the
//!    bytes) and releases the batch, so the time per packet includes reading.
//!
//!    The baseline is N independent readers as N pcap handles would be: each runs its own full
//!    filter `tcp and tcp port P_i` on every packet and copies every packet it accepts (cut to
//!    the filter's snap length) into its own buffer, which it reads back after every chunk.
//!    The filters run three ways: libpcap's `bpf_filter` on `pcap_compile`'s program, and
//!    netsift's interpreter and JIT on netsift's program.
//!
//!    Reported: total CPU time per packet (the thread's CPU clock, median of
//!    [`Config::reps`] passes) for each N and each approach, the slope (ns per additional flow,
//!    least squares over N) and the ratio of the slopes. Every approach must deliver the same
//!    number of packets to each flow.
//! 2. **Single-flow throughput:** one flow `(mem) -> (jit,"tcp")` over the capture on one
//!    core, including the PBuf copy and reading every packet back: packets per second, with
//!    the packets pushed from the capture (a capture thread running the first filters in place,
//!    [`Runtime::push`]) and pulled through the `mem` source ([`Runtime::step`], which clones
//!    each packet out of the source as the `Source` trait returns owned packets).
//!
//! The `mem` source class ([`MemClass`]) replays a shared `Arc<Vec<Packet>>`; it is registered
//! in the suite's own registry next to the standard classes.

use std::fmt::Write as _;
use std::sync::Arc;

use netsift_bpf::{Filter as Interp, Rules};
use netsift_capture::{LinkType, Packet};
use netsift_graph::buffer::Reader;
use netsift_graph::class::Context;
use netsift_graph::policy::Policy;
use netsift_graph::{Arg, FilterClass, FlowOptions, Instance, Runtime, Source};
use netsift_jit::JitFilter;

use crate::libpcap::Libpcap;
use crate::workload;

/// What the suite runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Packets of the in-memory capture ([`workload::packets`]).
    pub packets: usize,
    /// The numbers of flows.
    pub flows: Vec<usize>,
    /// Timed passes over the capture per measurement (the median is reported).
    pub reps: usize,
    /// Packets between two drains of the readers.
    pub chunk: usize,
    /// The flow group's PBuf slots and bytes per slot, and each flow's IBuf entries.
    pub buffers: Buffers,
    /// The filter every flow shares (the prefix), before its own `tcp port P_i`.
    pub prefix: String,
}

/// The sizes of a flow group's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffers {
    /// PBuf slots.
    pub slots: u32,
    /// Bytes per PBuf slot.
    pub slot_size: u32,
    /// IBuf entries per flow.
    pub ibuf: usize,
}

impl Buffers {
    /// Sized to the workload, as a pcap user sizes snap length and ring: slots of 128 bytes
    /// (the packets are cut to 96) and 4 chunks of slots and entries.
    pub const FITTED: Buffers = Buffers {
        slots: 1024,
        slot_size: 128,
        ibuf: 1024,
    };

    /// [`FlowOptions::default`]'s: 4,096 slots of 2,048 bytes (8 MiB), 4,096 entries.
    pub const DEFAULT: Buffers = Buffers {
        slots: 4096,
        slot_size: 2048,
        ibuf: 4096,
    };
}

impl Default for Config {
    fn default() -> Config {
        Config {
            packets: 65_536,
            flows: vec![1, 2, 4, 8],
            reps: 9,
            chunk: 256,
            buffers: Buffers::FITTED,
            prefix: "tcp".into(),
        }
    }
}

/// The port of flow `i`'s last filter: the mix's TCP services, then the high port of its IPv6
/// and VLAN TCP traffic.
pub const PORTS: [u16; 8] = [80, 443, 25, 143, 22, 8080, 3306, 40000];

/// `(mem [, PASSES])`: a source replaying a shared in-memory capture (Ethernet) from its start,
/// `PASSES` times (default once).
pub struct MemClass(pub Arc<Vec<Packet>>);

impl FilterClass for MemClass {
    fn name(&self) -> &'static str {
        "mem"
    }

    fn about(&self) -> &'static str {
        "source: the benchmark's in-memory capture, replayed PASSES times (default once)"
    }

    fn usage(&self) -> &'static str {
        "[PASSES]"
    }

    fn is_source(&self) -> bool {
        true
    }

    fn arity(&self) -> (usize, usize) {
        (0, 1)
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, netsift_graph::Error> {
        let passes = match args.first() {
            None => 1,
            Some(a) if a.text.is_empty() => 1,
            Some(a) => a.number().ok_or_else(|| {
                netsift_graph::Error::argument(format!("mem: PASSES `{}` is not a number", a.text))
            })?,
        };
        let total = (self.0.len() as u64).saturating_mul(passes);
        Ok(Instance::Source(Box::new(MemSource {
            packets: Arc::clone(&self.0),
            next: 0,
            left: total,
        })))
    }
}

/// A `mem` source.
struct MemSource {
    packets: Arc<Vec<Packet>>,
    next: usize,
    /// Packets still to replay.
    left: u64,
}

impl Source for MemSource {
    fn link_type(&self) -> LinkType {
        LinkType::ETHERNET
    }

    fn next_packet(&mut self) -> Result<Option<Packet>, netsift_graph::Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let p = self.packets[self.next].clone();
        self.next = if self.next + 1 == self.packets.len() {
            0
        } else {
            self.next + 1
        };
        Ok(Some(p))
    }
}

/// CPU time of the calling thread, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(any())]
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Least-squares slope of `y` over `x`.
pub fn slope(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx) * (a - mx)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

/// Drain `r`: read every available packet (touching its bytes), then release the batch.
/// Returns the packets read; adds to `sink`.
#[inline]
fn drain(r: &mut Reader, sink: &mut u64) -> u64 {
    let mut n = 0;
    while let Some(d) = r.next() {
        *sink = sink.wrapping_add(d.data.len() as u64 + u64::from(d.data[0]) + u64::from(d.result));
        n += 1;
    }
    r.release();
    n
}

/// A registry with the standard classes and `mem` over `packets`.
fn registry(packets: &Arc<Vec<Packet>>) -> netsift_graph::Registry {
    let mut reg = netsift_graph::standard_registry();
    reg.register(Arc::new(MemClass(Arc::clone(packets))));
    reg
}

/// The graph text of one flow: `source`, the shared `tcp` prefix, then `last` (if any).
fn flow_text(source: &str, prefix: &str, last: Option<u16>) -> String {
    match last {
        Some(p) => format!("{source} -> (jit,\"{prefix}\") -> (jit,\"tcp port {p}\")"),
        None => format!("{source} -> (jit,\"{prefix}\")"),
    }
}

/// A runtime with one flow per entry of `lasts`, all in one group; returns the runtime, the
/// source node and the readers.
fn open_flows(
    packets: &Arc<Vec<Packet>>,
    source: &str,
    lasts: &[Option<u16>],
    buffers: Buffers,
    prefix: &str,
) -> Result<(Runtime, usize, Vec<Reader>), String> {
    let mut rt = Runtime::new(registry(packets), Policy::allow_all());
    let mut readers = Vec::new();
    let mut ids = Vec::new();
    for &last in lasts {
        let (id, r) = rt
            .open(
                &flow_text(source, prefix, last),
                FlowOptions {
                    group: Some("bench".into()),
                    slots: buffers.slots,
                    slot_size: buffers.slot_size,
                    ibuf: buffers.ibuf,
                    ..FlowOptions::default()
                },
            )
            .map_err(|e| e.to_string())?;
        ids.push(id);
        readers.push(r);
    }
    let src = rt.node_of(ids[0], 0).ok_or("no source node")?;
    // Prefix merging: one source and one `tcp` instance for every flow.
    let tcp = rt.node_of(ids[0], 1);
    if ids
        .iter()
        .any(|&id| rt.node_of(id, 0) != Some(src) || rt.node_of(id, 1) != tcp)
    {
        return Err("the shared prefix was not merged".into());
    }
    let expect = 2 + lasts.iter().filter(|l| l.is_some()).count();
    if rt.graph().len() != expect {
        return Err(format!(
            "{} filter instances for {} flows, expected {expect}",
            rt.graph().len(),
            lasts.len()
        ));
    }
    Ok((rt, src, readers))
}

/// One approach: one pass over the capture at a time, returning the packets each flow (reader)
/// got; `sink` collects what the readers read.
type Pass<'a> = Box<dyn FnMut(&mut u64) -> Result<Vec<u64>, String> + 'a>;

/// One approach's measurement.
struct Measured {
    /// CPU ns per packet: the best of the timed passes.
    ns: f64,
    /// The packets each flow got in one pass.
    per_flow: Vec<u64>,
}

/// Run `passes` round robin — one untimed warm-up pass each (its counts are the result), then
/// `reps` timed rounds — so that every approach sees the same interference from the rest of
/// the machine; the time of an approach is its best pass (thread CPU time).
fn measure(packets: usize, reps: usize, passes: &mut [Pass<'_>]) -> Result<Vec<Measured>, String> {
    let mut sink = 0u64;
    let mut out = Vec::new();
    for p in passes.iter_mut() {
        out.push(Measured {
            ns: f64::INFINITY,
            per_flow: p(&mut sink)?,
        });
    }
    for _ in 0..reps {
        for (p, m) in passes.iter_mut().zip(&mut out) {
            let t = thread_cpu_ns();
            let got = p(&mut sink)?;
            let ns = (thread_cpu_ns() - t) as f64 / packets as f64;
            if got != m.per_flow {
                return Err(format!(
                    "a pass delivered {got:?}, the first {:?}",
                    m.per_flow
                ));
            }
            m.ns = m.ns.min(ns);
        }
    }
    std::hint::black_box(sink);
    Ok(out)
}

/// Fail if a reader lost packets (the buffers are sized so that none is lost).
fn check_lossless(readers: &[Reader]) -> Result<(), String> {
    for r in readers {
        let s = r.stats();
        if s.dropped != 0 || s.overwritten != 0 {
            return Err(format!("a reader lost packets: {s:?}"));
        }
    }
    Ok(())
}

/// netsift: the flows of `lasts`, packets pushed from the capture ([`Runtime::push`], a
/// capture thread running the first filters in place), readers drained after every chunk.
fn netsift_push<'a>(
    packets: &'a Arc<Vec<Packet>>,
    lasts: &[Option<u16>],
    cfg: &Config,
) -> Result<Pass<'a>, String> {
    let (mut rt, src, mut readers) = open_flows(packets, "(mem)", lasts, cfg.buffers, &cfg.prefix)?;
    let chunk = cfg.chunk;
    Ok(Box::new(move |sink| {
        let mut per_flow = vec![0u64; readers.len()];
        for c in packets.chunks(chunk) {
            for p in c {
                rt.push(src, p);
            }
            for (n, r) in per_flow.iter_mut().zip(&mut readers) {
                *n += drain(r, sink);
            }
        }
        check_lossless(&readers)?;
        Ok(per_flow)
    }))
}

/// netsift: the flows of `lasts`, packets pulled through the `mem` source with
/// [`Runtime::step`] (which replays the capture `passes` times).
fn netsift_step<'a>(
    packets: &'a Arc<Vec<Packet>>,
    lasts: &[Option<u16>],
    cfg: &Config,
    passes: usize,
) -> Result<Pass<'a>, String> {
    let (mut rt, _, mut readers) = open_flows(
        packets,
        &format!("(mem,{passes})"),
        lasts,
        cfg.buffers,
        &cfg.prefix,
    )?;
    let chunk = cfg.chunk;
    let len = packets.len();
    Ok(Box::new(move |sink| {
        let mut per_flow = vec![0u64; readers.len()];
        let mut left = len;
        while left > 0 {
            let k = chunk.min(left);
            for _ in 0..k {
                if !rt.step().map_err(|e| e.to_string())? {
                    return Err("the mem source ended early".into());
                }
            }
            left -= k;
            for (n, r) in per_flow.iter_mut().zip(&mut readers) {
                *n += drain(r, sink);
            }
        }
        check_lossless(&readers)?;
        Ok(per_flow)
    }))
}

/// One libpcap-style reader: its own buffer of (length, wire length, timestamp, bytes)
/// records, read back after every chunk.
struct Handle {
    buf: Vec<u8>,
}

impl Handle {
    #[inline]
    fn copy(&mut self, p: &Packet, keep: usize) {
        let data = &p.data[..keep.min(p.data.len())];
        self.buf
            .extend_from_slice(&(data.len() as u32).to_ne_bytes());
        self.buf.extend_from_slice(&p.wire_len.to_ne_bytes());
        self.buf
            .extend_from_slice(&(p.timestamp.secs() as u64).to_ne_bytes());
        self.buf.extend_from_slice(data);
    }

    /// Read every record back (touching its bytes), then empty the buffer.
    fn drain(&mut self, sink: &mut u64) -> u64 {
        let mut at = 0;
        let mut n = 0;
        while at < self.buf.len() {
            let len = u32::from_ne_bytes(self.buf[at..at + 4].try_into().unwrap_or_default());
            let data = &self.buf[at + 16..at + 16 + len as usize];
            *sink = sink.wrapping_add(u64::from(len) + u64::from(data[0]));
            at += 16 + len as usize;
            n += 1;
        }
        self.buf.clear();
        n
    }
}

/// N independent readers: `filter(i, data, wire_len)` is reader i's full filter, run on every
/// packet; accepted packets are copied into reader i's buffer (cut to the filter's snap
/// length) and read back after every chunk.
fn independent<'a>(
    packets: &'a [Packet],
    n: usize,
    cfg: &Config,
    filter: impl Fn(usize, &[u8], u32) -> u32 + 'a,
) -> Pass<'a> {
    let mut handles: Vec<Handle> = (0..n)
        .map(|_| Handle {
            buf: Vec::with_capacity(cfg.chunk * (16 + workload::SNAPLEN)),
        })
        .collect();
    let chunk = cfg.chunk;
    Box::new(move |sink| {
        let mut per_flow = vec![0u64; handles.len()];
        for c in packets.chunks(chunk) {
            for p in c {
                for (i, h) in handles.iter_mut().enumerate() {
                    let ret = filter(i, &p.data, p.wire_len);
                    if ret != 0 {
                        h.copy(p, ret as usize);
                    }
                }
            }
            for (got, h) in per_flow.iter_mut().zip(&mut handles) {
                *got += h.drain(sink);
            }
        }
        Ok(per_flow)
    })
}

/// netsift's classic BPF program for `expr` on Ethernet (what the `bpf`/`jit` classes run).
fn netsift_program(expr: &str) -> Result<netsift_bpf::Program, String> {
    let ctx = netsift_lang::Context::new(LinkType::ETHERNET);
    let pred = netsift_lang::compile(expr, &ctx).map_err(|e| format!("`{expr}`: {e}"))?;
    netsift_bpf::compile::compile(&pred, &netsift_bpf::compile::Options::default())
        .map_err(|e| format!("`{expr}`: {e}"))
}

/// `prefix` shortened for the report.
fn short(prefix: &str) -> String {
    if prefix.chars().count() > 60 {
        format!("{}…", prefix.chars().take(59).collect::<String>())
    } else {
        prefix.to_string()
    }
}

/// Part 1 for `cfg.prefix`: the table of N flows against N independent readers, and the
/// slopes.
fn scaling(
    out: &mut String,
    lib: &Libpcap,
    packets: &Arc<Vec<Packet>>,
    cfg: &Config,
    max_n: usize,
) -> Result<(), String> {
    let exprs: Vec<String> = PORTS[..max_n]
        .iter()
        .map(|p| format!("({}) and tcp port {p}", cfg.prefix))
        .collect();
    let theirs = exprs
        .iter()
        .map(|e| lib.compile(1, 262_144, e, true))
        .collect::<Result<Vec<_>, _>>()?;
    let progs = exprs
        .iter()
        .map(|e| netsift_program(e))
        .collect::<Result<Vec<_>, _>>()?;
    let interps = progs
        .iter()
        .map(|p| Interp::new(p.clone(), Rules::Libpcap).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let jits = progs
        .iter()
        .map(|p| JitFilter::new(p.clone(), Rules::Libpcap).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;

    let _ = writeln!(
        out,
        "flow i = (mem) -> (jit,\"{}\") -> (jit,\"tcp port P_i\"), P = {:?}, one flow \
         group\n(one PBuf of {} slots x {} B, IBufs of {} entries); baseline: N independent \
         readers, each running its own `({}) and tcp port P_i`\non every packet and copying what \
         it accepts into its own buffer (libpcap = {}); every reader drained after each {} \
         packets\non the same thread. Thread CPU ns per packet, reading included, best of {} \
         interleaved passes.\n",
        short(&cfg.prefix),
        &PORTS[..max_n],
        cfg.buffers.slots,
        cfg.buffers.slot_size,
        cfg.buffers.ibuf,
        short(&cfg.prefix),
        lib.version(),
        cfg.chunk,
        cfg.reps
    );
    let _ = writeln!(
        out,
        "{:>3} {:>9} {:>9} {:>12} {:>11} {:>9} {:>10} {:>8}",
        "N", "accepted", "netsift", "libpcap x N", "interp x N", "jit x N", "libpcap/", "jit/"
    );
    let _ = writeln!(
        out,
        "{:>3} {:>9} {:>9} {:>12} {:>11} {:>9} {:>10} {:>8}",
        "", "", "ns/pkt", "ns/pkt", "ns/pkt", "ns/pkt", "netsift", "netsift"
    );
    let names = ["netsift", "libpcap x N", "interp x N", "jit x N"];
    let mut rows: Vec<[f64; 4]> = Vec::new();
    for &n in &cfg.flows {
        let lasts: Vec<Option<u16>> = PORTS[..n].iter().map(|&p| Some(p)).collect();
        let (theirs, interps, jits) = (&theirs, &interps, &jits);
        let mut passes = vec![
            netsift_push(packets, &lasts, cfg)?,
            independent(packets, n, cfg, move |i, d, w| theirs[i].run(d, w)),
            independent(packets, n, cfg, move |i, d, w| interps[i].run(d, w)),
            independent(packets, n, cfg, move |i, d, w| jits[i].run(d, w)),
        ];
        let m = measure(packets.len(), cfg.reps, &mut passes)?;
        for (b, name) in m.iter().zip(names).skip(1) {
            if b.per_flow != m[0].per_flow {
                return Err(format!(
                    "N = {n}: packets per flow differ: netsift {:?}, {name} {:?}",
                    m[0].per_flow, b.per_flow
                ));
            }
        }
        let row = [m[0].ns, m[1].ns, m[2].ns, m[3].ns];
        let _ = writeln!(
            out,
            "{:>3} {:>9} {:>9.2} {:>12.2} {:>11.2} {:>9.2} {:>9.2}x {:>7.2}x",
            n,
            m[0].per_flow.iter().sum::<u64>(),
            row[0],
            row[1],
            row[2],
            row[3],
            row[1] / row[0],
            row[3] / row[0]
        );
        rows.push(row);
    }
    let xs: Vec<f64> = cfg.flows.iter().map(|&n| n as f64).collect();
    let slopes: Vec<f64> = (0..4)
        .map(|k| slope(&xs, &rows.iter().map(|r| r[k]).collect::<Vec<_>>()))
        .collect();
    let _ = writeln!(
        out,
        "\nslope (ns per additional flow, least squares over N): {}",
        names
            .iter()
            .zip(&slopes)
            .map(|(n, s)| format!("{n} {s:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        out,
        "slope ratio (baseline / netsift): libpcap {:.1}x, interpreter {:.1}x, JIT {:.1}x",
        slopes[1] / slopes[0],
        slopes[2] / slopes[0],
        slopes[3] / slopes[0]
    );

    Ok(())
}

/// The suite: the table of part 1, the slopes, and the single-flow throughput.
pub fn suite(cfg: &Config) -> Result<String, String> {
    let lib = Libpcap::load()?;
    let packets = Arc::new(workload::packets(workload::SEED, cfg.packets));
    let max_n = cfg.flows.iter().copied().max().unwrap_or(1);
    if max_n > PORTS.len() || cfg.flows.contains(&0) {
        return Err(format!("1 to {} flows", PORTS.len()));
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite flow: {} packets of the gateway mix in memory\n",
        packets.len()
    );
    scaling(&mut out, &lib, &packets, cfg, max_n)?;
    // The same with an expensive shared prefix: the Swift paper's Table 5 filter 6 without its
    // port test (38 hosts), run once for all flows by netsift and once per reader otherwise.
    let heavy = Config {
        prefix: format!(
            "ip and not ip host ({})",
            workload::swift_hosts().join(" or ")
        ),
        ..cfg.clone()
    };
    let _ = writeln!(out);
    scaling(&mut out, &lib, &packets, &heavy, max_n)?;

    // Part 2: one flow with a `tcp` filter.
    let one = [None];
    let wide = Config {
        buffers: Buffers::DEFAULT,
        ..cfg.clone()
    };
    let mut passes = vec![
        netsift_push(&packets, &one, cfg)?,
        netsift_push(&packets, &one, &wide)?,
        netsift_step(&packets, &one, cfg, cfg.reps + 1)?,
        netsift_step(&packets, &one, &wide, cfg.reps + 1)?,
    ];
    let m = measure(packets.len(), cfg.reps, &mut passes)?;
    let tcp = lib.compile(1, 262_144, "tcp", true)?;
    let want = packets
        .iter()
        .filter(|p| tcp.run(&p.data, p.wire_len) != 0)
        .count() as u64;
    if let Some(bad) = m.iter().find(|x| x.per_flow != [want]) {
        return Err(format!(
            "single flow: delivered {:?}, libpcap's `tcp` accepts {want}",
            bad.per_flow
        ));
    }
    let _ = writeln!(
        out,
        "\nsingle flow (mem) -> (jit,\"tcp\") on one core, PBuf copy and reading included ({want} \
         of {} packets accepted):",
        packets.len()
    );
    let _ = writeln!(
        out,
        "  {:<40} {:>22} {:>22}",
        "",
        format!("{} x {} B PBuf", cfg.buffers.slots, cfg.buffers.slot_size),
        format!(
            "{} x {} B (default)",
            Buffers::DEFAULT.slots,
            Buffers::DEFAULT.slot_size
        )
    );
    for (what, a, b) in [
        ("pushed from the capture (Runtime::push)", &m[0], &m[1]),
        ("pulled from the source (Runtime::step)", &m[2], &m[3]),
    ] {
        let _ = writeln!(
            out,
            "  {what:<40} {:>9.2} Mpps {:>5.1} ns {:>9.2} Mpps {:>5.1} ns",
            1e3 / a.ns,
            a.ns,
            1e3 / b.ns,
            b.ns
        );
    }
    let _ = writeln!(
        out,
        "  (goal: >= 10 Mpps; `step` also clones each packet out of the source, as the Source \
         trait returns owned packets)"
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line() {
        let x = [1.0, 2.0, 4.0, 8.0];
        let y: Vec<f64> = x.iter().map(|v| 3.0 + 2.5 * v).collect();
        assert!((slope(&x, &y) - 2.5).abs() < 1e-9);
    }

    #[test]
    fn flows_deliver_what_independent_filters_accept() {
        let packets = Arc::new(workload::packets(workload::SEED, 4096));
        let cfg = Config {
            packets: 4096,
            flows: vec![3],
            reps: 1,
            chunk: 256,
            buffers: Buffers::FITTED,
            prefix: "tcp".into(),
        };
        let lasts: Vec<Option<u16>> = PORTS[..3].iter().map(|&p| Some(p)).collect();
        let jits: Vec<JitFilter> = PORTS[..3]
            .iter()
            .map(|p| {
                JitFilter::new(
                    netsift_program(&format!("tcp and tcp port {p}")).unwrap(),
                    Rules::Libpcap,
                )
                .unwrap()
            })
            .collect();
        let mut passes = vec![
            netsift_push(&packets, &lasts, &cfg).unwrap(),
            netsift_step(&packets, &lasts, &cfg, 2).unwrap(),
            independent(&packets, 3, &cfg, |i, d, w| jits[i].run(d, w)),
        ];
        let m = measure(packets.len(), 1, &mut passes).unwrap();
        assert!(m[0].per_flow.iter().all(|&n| n > 0));
        assert_eq!(m[0].per_flow, m[1].per_flow);
        assert_eq!(m[0].per_flow, m[2].per_flow);
        // Two passes of `step` emptied the mem source.
        assert!(passes[1](&mut 0).is_err());
    }
}
