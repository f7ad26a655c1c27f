//! `netsift bench ebpf`: netsift's filters in the kernel (needs root).
//!
//! 1. **Per-packet time** of the Swift paper's Table 5 filters 1-6 as SCHED_CLS programs, run
//!    by the kernel with `BPF_PROG_TEST_RUN` (`repeat` runs per packet; the kernel times the
//!    loop) on the benchmark's packet mix, less the measured time of an empty program (the
//!    floor): libpcap's classic program (`pcap_compile`, optimised) translated as the kernel
//!    translates classic BPF (`LD_ABS`/`LD_IND` loads, which the kernel expands into calls of
//!    its `bpf_skb_load_helper_*`; `compile::from_classic` with `Access::LdAbs`), against
//!    netsift's eBPF (`compile::from_pred`, direct packet access) and against the filter as
//!    Swift passes in maps, evaluated by the kernel Swift program (`netsift_ebpf::swift`).
//!    Every program's verdict is checked against the others on every packet.
//! 2. **Update latency** with N = 10, 100, 1,000 FTP data connections, the program attached
//!    with tcx to a veth in a private namespace: Swift in the kernel adds or removes one data
//!    connection with map writes; the alternative recompiles the whole filter (netsift's
//!    compiler to eBPF), loads it (the verifier) and attaches it in place of the old one.

use std::fmt::Write as _;
use std::time::Instant;

use netsift_ebpf::compile::{self, Access, Return};
use netsift_ebpf::swift::{KernelPass, KernelSwift, SwiftMirror};
use netsift_ebpf::{
    Insn, Link, LoadOptions, LoadedProgram, ProgType, Reg, TcxDirection, TestRun, tc_act,
};

use crate::libpcap::Libpcap;
use crate::update::{CONTROL_EXPR, Connection, control_pass};
use crate::workload;

/// Settings of the suite.
#[derive(Clone, Debug)]
pub struct Config {
    /// Packets of the mix run per filter.
    pub packets: usize,
    /// `BPF_PROG_TEST_RUN` repeat count per packet.
    pub repeat: u32,
    /// Rounds over the packets (each packet counts its fastest).
    pub rounds: usize,
    /// Filter sizes (data connections) for the update latency.
    pub sizes: Vec<usize>,
    /// Map updates timed per size.
    pub map_updates: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            packets: 512,
            repeat: 1_000,
            rounds: 7,
            sizes: vec![10, 100, 1_000],
            map_updates: 400,
        }
    }
}

/// Kernel time per run (ns) of each of `progs` over `packets`: the programs take turns packet
/// by packet, `rounds` times; each packet's time is its fastest round (other work on the
/// machine only ever adds time), and a program's figure is the mean over the packets.
fn kernel_ns(
    progs: &[&LoadedProgram],
    packets: &[Vec<u8>],
    repeat: u32,
    rounds: usize,
) -> Vec<f64> {
    let mut best = vec![vec![u32::MAX; packets.len()]; progs.len()];
    for _ in 0..rounds {
        for (i, p) in packets.iter().enumerate() {
            for (k, prog) in progs.iter().enumerate() {
                let run = TestRun {
                    repeat,
                    ..TestRun::new(p)
                };
                if let Ok(o) = prog.test_run(&run) {
                    best[k][i] = best[k][i].min(o.duration_ns);
                }
            }
        }
    }
    best.iter()
        .map(|b| b.iter().map(|&d| f64::from(d)).sum::<f64>() / packets.len().max(1) as f64)
        .collect()
}

fn e(err: impl std::fmt::Display) -> String {
    err.to_string()
}

/// Runs the suite.
pub fn suite(cfg: &Config) -> Result<String, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("the ebpf suite loads eBPF programs and needs root".into());
    }
    let lib = Libpcap::load()?;
    let mut out = String::new();
    let packets: Vec<Vec<u8>> = workload::packets(workload::SEED, cfg.packets * 2)
        .into_iter()
        .map(|p| p.data)
        .filter(|d| ProgType::SchedCls.test_run_takes(d))
        .take(cfg.packets)
        .collect();
    let _ = writeln!(
        out,
        "suite ebpf: kernel per-packet time (BPF_PROG_TEST_RUN, SCHED_CLS, repeat {}, {} packets \
         of the mix cut at {} bytes, fastest of {} rounds per packet, less the empty program), \
         baseline {} translated as the kernel translates classic BPF (LD_ABS)\n",
        cfg.repeat,
        packets.len(),
        workload::SNAPLEN,
        cfg.rounds,
        lib.version()
    );
    let empty = LoadedProgram::load(
        ProgType::SchedCls,
        &[Insn::mov64_imm(Reg::R0, 0), Insn::exit()],
        &LoadOptions::default(),
    )
    .map_err(e)?;
    let mut floors = Vec::new();
    let _ = writeln!(
        out,
        "{:<10} {:>14} {:>14} {:>14} {:>16} {:>16}",
        "filter",
        "libpcap LD_ABS",
        "netsift eBPF",
        "Swift in maps",
        "libpcap/netsift",
        "libpcap/Swift"
    );
    let ctx = netsift_lang::Context::new(netsift_wire::LinkType::ETHERNET);
    let mut swift_k = KernelSwift::load(ProgType::SchedCls, 64).map_err(e)?;
    let (mut disagreements, mut swift_disagreements, mut swift_vs_expr) = (0usize, 0usize, 0usize);
    for f in workload::swift_table5() {
        let pred = netsift_lang::compile(&f.expr, &ctx).map_err(|x| format!("{}: {x}", f.name))?;
        let classic_opts = netsift_bpf::compile::Options {
            optimize: true,
            snaplen: workload::SNAPLEN as u32,
        };
        let ours = compile::from_pred(
            &pred,
            &classic_opts,
            &compile::Options::new(ProgType::SchedCls),
        )
        .map_err(e)?
        .load(&LoadOptions::default())
        .map_err(e)?;
        let lp = lib.compile(1, workload::SNAPLEN as i32, &f.expr, true)?;
        let theirs = compile::from_classic(
            lp.program(),
            &compile::Options {
                access: Access::LdAbs,
                result: Return::Classic,
                ..compile::Options::new(ProgType::SchedCls)
            },
        )
        .map_err(e)?
        .load(&LoadOptions::default())
        .map_err(e)?;
        // The same filter as Swift passes in the kernel's maps, as the paper wrote it (SIMD
        // operands, power instructions), checked against netsift's Swift reader.
        let n: usize = f.name.trim_start_matches("swift-").parse().map_err(e)?;
        let spec = crate::swift_table5::filter(n, crate::swift_table5::Form::Full);
        let (mut w, mut reader) = netsift_swift::open(workload::SNAPLEN as u32);
        spec.load(&mut w).map_err(e)?;
        swift_k.clear().map_err(e)?;
        let swift = SwiftMirror::new()
            .sync(&mut swift_k, &w)
            .map(|_| ())
            .map_err(e);
        for p in &packets {
            let a = ours.run(p).map_err(e)? == tc_act::OK;
            let b = theirs.run(p).map_err(e)? != 0;
            disagreements += usize::from(a != b);
            if swift.is_ok() {
                let c = swift_k.program().run(p).map_err(e)? == tc_act::OK;
                let d = reader.run(p, p.len() as u32) != 0;
                swift_disagreements += usize::from(c != d);
                swift_vs_expr += usize::from(c != a);
            }
        }
        let t = kernel_ns(
            &[&empty, &theirs, &ours, swift_k.program()],
            &packets,
            cfg.repeat,
            cfg.rounds,
        );
        let floor = t[0];
        floors.push(floor);
        let (t_theirs, t_ours) = (t[1] - floor, t[2] - floor);
        let (t_swift, r_swift) = match &swift {
            Ok(()) => {
                let t = t[3] - floor;
                (
                    format!("{t:.1} ns"),
                    format!("{:.2}x", t_theirs / t.max(0.05)),
                )
            }
            Err(x) => ("refused".into(), x.clone()),
        };
        let _ = writeln!(
            out,
            "{:<10} {:>11.1} ns {:>11.1} ns {:>14} {:>15.2}x {:>16}",
            f.name,
            t_theirs,
            t_ours,
            t_swift,
            t_theirs / t_ours.max(0.05),
            r_swift
        );
    }
    let _ = writeln!(
        out,
        "\nempty program (the floor, subtracted above): {:.1} to {:.1} ns",
        floors.iter().copied().fold(f64::INFINITY, f64::min),
        floors.iter().copied().fold(0.0, f64::max)
    );
    let _ = writeln!(
        out,
        "verdicts on {} packets x 6 filters: netsift eBPF vs libpcap LD_ABS {disagreements} \
         disagreements; Swift in maps vs netsift's Swift reader {swift_disagreements}; Swift's \
         hand-written passes vs the expression {swift_vs_expr}",
        packets.len()
    );
    out.push('\n');
    out.push_str(&updates(cfg)?);
    Ok(out)
}

/// Connections per compiled piece: the classic program of one piece stays under the kernel's
/// 4,096 classic instructions, which netsift's compiler enforces.
const PIECE: usize = 200;

/// FTPCap-LSF's filter for connections `0..n` (the control connection, then each data
/// connection, ORed), compiled by netsift to eBPF. Up to [`PIECE`] connections it is one
/// expression; beyond, each piece of [`PIECE`] connections is compiled on its own and the
/// classic programs are chained — a piece's `ret #0` becomes a jump to the next piece — before
/// the translation to eBPF (which takes classic programs of up to 65,535 instructions).
fn compile_connections(
    n: usize,
    ctx: &netsift_lang::Context,
    classic: &netsift_bpf::compile::Options,
    opts: &compile::Options,
) -> Result<netsift_ebpf::Program, String> {
    use netsift_bpf::code;
    let mut pieces = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + PIECE).min(n);
        let mut terms: Vec<String> = (start..end).map(|i| Connection::nth(i).expr()).collect();
        if start == 0 {
            terms.insert(0, CONTROL_EXPR.to_string());
        }
        let pred = netsift_lang::compile(&terms.join(" or "), ctx).map_err(e)?;
        pieces.push(netsift_bpf::compile::compile(&pred, classic).map_err(e)?);
        start = end;
        if start >= n {
            break;
        }
    }
    let total: usize = pieces.iter().map(|p| p.insns().len()).sum();
    let mut insns = Vec::with_capacity(total);
    let last = pieces.len() - 1;
    for (k, p) in pieces.iter().enumerate() {
        let base = insns.len();
        let next = base + p.insns().len();
        for (pc, i) in p.insns().iter().enumerate() {
            if k < last && i.code == code::RET | code::K && i.k == 0 {
                let off = (next - (base + pc + 1)) as u32;
                insns.push(netsift_bpf::Insn::stmt(code::JMP | code::JA, off));
            } else {
                insns.push(*i);
            }
        }
    }
    compile::from_classic(&netsift_bpf::Program::new(insns), opts).map_err(e)
}

/// The update-latency half, in a private namespace (tcx on a veth).
fn updates(cfg: &Config) -> Result<String, String> {
    let lab = netsift_testkit::netns::Lab::new()?;
    let dev = lab.b.clone();
    lab.run(move || updates_in_ns(cfg, &dev))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn updates_in_ns(cfg: &Config, dev: &str) -> Result<String, String> {
    let mut out = String::new();
    let ifindex = netsift_ebpf::ifindex(dev).map_err(e)?;
    let _ = writeln!(
        out,
        "update latency: add or remove one FTP data connection with N open, program attached \
         with tcx (ingress of a veth in a private namespace); Swift in the kernel = map writes, \
         reload = netsift compile (expression -> eBPF) + BPF_PROG_LOAD (verifier) + attach the \
         new program and detach the old\n"
    );
    let _ = writeln!(
        out,
        "{:>6} {:>9} {:>9} {:>7} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>14}",
        "N",
        "add",
        "delete",
        "writes",
        "compile",
        "load+verify",
        "attach new",
        "detach old",
        "reload",
        "ratio",
        "ratio w/o detach"
    );
    let ctx = netsift_lang::Context::new(netsift_wire::LinkType::ETHERNET);
    let classic_opts = netsift_bpf::compile::Options {
        optimize: true,
        snaplen: crate::update::SNAPLEN,
    };
    let opts = compile::Options::new(ProgType::SchedCls);
    for &n in &cfg.sizes {
        // Swift in the kernel, attached.
        let mut ks = KernelSwift::load(ProgType::SchedCls, (n + 16) as u32).map_err(e)?;
        let _link = Link::tcx(ks.program(), ifindex, TcxDirection::Ingress).map_err(e)?;
        ks.add_pass(&control_pass()).map_err(e)?;
        for i in 0..n {
            ks.add_pass(&Connection::nth(i).pass()).map_err(e)?;
        }
        let fd = ks.program_fd();
        let writes0 = ks.map_writes();
        // Half the rounds add a connection at the end and remove it (the last slot: the
        // header's `hwm` changes too); half remove one from the middle and add it back into
        // the hole it left.
        let middle = Connection::nth(n / 2);
        let mut middle_id = KernelPass(n as u32 / 2 + 1);
        let (mut adds, mut dels) = (Vec::new(), Vec::new());
        let ns = |t: Instant| t.elapsed().as_secs_f64() * 1e9;
        for k in 0..cfg.map_updates {
            if k % 2 == 0 {
                let c = Connection::nth(n + k % 8);
                let t = Instant::now();
                let id = ks.add_pass(&c.pass()).map_err(e)?;
                adds.push(ns(t));
                let t = Instant::now();
                ks.del_pass(id).map_err(e)?;
                dels.push(ns(t));
            } else {
                let t = Instant::now();
                ks.del_pass(middle_id).map_err(e)?;
                dels.push(ns(t));
                let t = Instant::now();
                middle_id = ks.add_pass(&middle.pass()).map_err(e)?;
                adds.push(ns(t));
            }
        }
        assert_eq!(ks.program_fd(), fd);
        let writes = (ks.map_writes() - writes0) as f64 / (adds.len() + dels.len()) as f64;
        let map_ns = median(adds.iter().chain(&dels).copied().collect());
        let (add_ns, del_ns) = (median(adds), median(dels));

        // Reload: recompile the filter with one more connection, load, attach, detach the old.
        let reps = if n >= 1_000 { 5 } else { 15 };
        let mut old = {
            let prog = compile_connections(n, &ctx, &classic_opts, &opts)?;
            let p = prog.load(&LoadOptions::default()).map_err(e)?;
            // Both filters take the last connection's packets and not an unknown one's.
            for (prog, c, want) in [
                (&p, n - 1, tc_act::OK),
                (&p, n + 7, tc_act::SHOT),
                (ks.program(), n - 1, tc_act::OK),
                (ks.program(), n + 7, tc_act::SHOT),
            ] {
                let got = prog.run(&Connection::nth(c).packet()).map_err(e)?;
                if got != want {
                    return Err(format!(
                        "N = {n}: connection {c} gives {got}, expected {want} ({})",
                        prog.name()
                    ));
                }
            }
            let l = Link::tcx(&p, ifindex, TcxDirection::Ingress).map_err(e)?;
            (p, l)
        };
        let (mut tc, mut tl, mut ta, mut td, mut tr) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for k in 0..reps {
            let t0 = Instant::now();
            let prog = compile_connections(n + 1 - (k % 2), &ctx, &classic_opts, &opts)?;
            let t1 = Instant::now();
            let p = prog.load(&LoadOptions::default()).map_err(e)?;
            let t2 = Instant::now();
            let l = Link::tcx(&p, ifindex, TcxDirection::Ingress).map_err(e)?;
            let t3 = Instant::now();
            // Detaching waits for the programs running the old one to finish (an RCU grace
            // period): the price of replacing it.
            let prev = std::mem::replace(&mut old, (p, l));
            drop(prev);
            let t4 = Instant::now();
            let us = |d: std::time::Duration| d.as_secs_f64() * 1e9;
            tc.push(us(t1 - t0));
            tl.push(us(t2 - t1));
            ta.push(us(t3 - t2));
            td.push(us(t4 - t3));
            tr.push(us(t4 - t0));
        }
        drop(old);
        let reload = median(tr);
        let (c, l, a, d) = (median(tc), median(tl), median(ta), median(td));
        let _ = writeln!(
            out,
            "{:>6} {:>6.2} µs {:>6.2} µs {:>7.2} {:>9.1} µs {:>9.1} µs {:>9.1} µs {:>9.1} µs {:>9.1} µs \
             {:>9.0}x {:>13.0}x",
            n,
            add_ns / 1e3,
            del_ns / 1e3,
            writes,
            c / 1e3,
            l / 1e3,
            a / 1e3,
            d / 1e3,
            reload / 1e3,
            reload / map_ns,
            (c + l + a) / map_ns
        );
    }
    let _ = writeln!(
        out,
        "\n(add, delete: medians of {} each, half at the end of the filter, half in its middle; \
         writes = map writes per update, header included; ratio = reload / the median of all \
         updates; reload: median of a few recompiles of N or N+1 connections)",
        cfg.map_updates
    );
    Ok(out)
}
