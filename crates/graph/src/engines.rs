//! Filter classes backed by netsift's engines: `bpf`, `jit`, `swift`, `ebpf` (filter
//! expressions in the tcpdump language), `classify` (a rule set) and `nic` (a queue of an
//! emulated NIC, as a source).
//!
//! The expression classes compile for the link type of the packets that reach them (Ethernet
//! when unknown) and pass a packet when the filter accepts it, with the filter's return value
//! (the snap length) as the result and the packet cut to it downstream, as a BPF socket filter
//! does.

use std::sync::Arc;

use netsift_bpf::{Filter as Interp, Rules};
use netsift_capture::{CaptureReader, LinkType, Packet};
use netsift_classify::Classifier;

use crate::class::{Arg, Context, Filter, FilterClass, Instance, Pkt, Registry, Source, Verdict};
use crate::mbuf::MBuf;

/// Register the engine classes in `reg`.
pub fn register(reg: &mut Registry) {
    for engine in [Engine::Bpf, Engine::Jit, Engine::Swift, Engine::Ebpf] {
        reg.register(Arc::new(ExprClass(engine)));
    }
    reg.register(Arc::new(ClassifyClass));
    reg.register(Arc::new(FplClass));
    reg.register(Arc::new(NicClass));
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    Bpf,
    Jit,
    Swift,
    Ebpf,
}

struct ExprClass(Engine);

fn pred_for(expr: &str, ctx: &Context) -> Result<netsift_lang::Pred, String> {
    let lt = ctx.link_type.unwrap_or(LinkType::ETHERNET);
    netsift_lang::compile(expr, &netsift_lang::Context::new(lt)).map_err(|e| e.to_string())
}

fn classic_for(expr: &str, ctx: &Context) -> Result<netsift_bpf::Program, String> {
    let pred = pred_for(expr, ctx)?;
    netsift_bpf::compile::compile(&pred, &netsift_bpf::compile::Options::default())
        .map_err(|e| format!("`{expr}`: {e}"))
}

/// The verdict of a BPF-style return value on a packet of `len` bytes.
fn snap_verdict(ret: u32, len: usize) -> Verdict {
    if ret == 0 {
        Verdict::Drop
    } else {
        Verdict::Pass {
            result: ret,
            keep: ((ret as usize) < len).then_some(ret),
        }
    }
}

impl FilterClass for ExprClass {
    fn name(&self) -> &'static str {
        match self.0 {
            Engine::Bpf => "bpf",
            Engine::Jit => "jit",
            Engine::Swift => "swift",
            Engine::Ebpf => "ebpf",
        }
    }

    fn about(&self) -> &'static str {
        match self.0 {
            Engine::Bpf => "a tcpdump filter expression, compiled to classic BPF and interpreted",
            Engine::Jit => "a tcpdump filter expression, compiled to native code",
            Engine::Swift => "a tcpdump filter expression as a Swift filter (updatable in place)",
            Engine::Ebpf => {
                "a tcpdump filter expression run by the kernel as eBPF (BPF_PROG_TEST_RUN; \
                 Ethernet; needs root)"
            }
        }
    }

    fn usage(&self) -> &'static str {
        "\"EXPR\" [, MBUF]"
    }

    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }

    fn instantiate(&self, args: &[Arg], ctx: &Context) -> Result<Instance, String> {
        let expr = &args[0].text;
        let f: Box<dyn Filter> = match self.0 {
            Engine::Bpf => {
                let p = classic_for(expr, ctx)?;
                Box::new(BpfFilter(
                    Interp::new(p, Rules::Libpcap).map_err(|e| e.to_string())?,
                ))
            }
            Engine::Jit => {
                let p = classic_for(expr, ctx)?;
                Box::new(JitFilter(
                    netsift_jit::JitFilter::new(p, Rules::Libpcap).map_err(|e| e.to_string())?,
                ))
            }
            Engine::Swift => {
                let pred = pred_for(expr, ctx)?;
                let spec = netsift_swift::from_pred::from_pred(&pred).map_err(|e| e.to_string())?;
                let (mut w, r) = netsift_swift::open(262_144);
                spec.load(&mut w).map_err(|e| e.to_string())?;
                Box::new(SwiftFilter {
                    reader: r,
                    _writer: w,
                })
            }
            Engine::Ebpf => {
                if ctx.link_type.is_some_and(|lt| lt != LinkType::ETHERNET) {
                    return Err("ebpf runs on Ethernet frames only".into());
                }
                let p = classic_for(expr, ctx)?;
                Box::new(EbpfFilter(
                    netsift_ebpf::KernelFilter::new(&p, "netsift_graph")
                        .map_err(|e| e.to_string())?,
                ))
            }
        };
        Ok(Instance::Filter(f))
    }
}

struct BpfFilter(Interp);

impl Filter for BpfFilter {
    fn process(&mut self, pkt: &Pkt<'_>, _mbuf: &MBuf) -> Verdict {
        snap_verdict(self.0.run(pkt.data, pkt.wire_len), pkt.data.len())
    }
}

struct JitFilter(netsift_jit::JitFilter);

impl Filter for JitFilter {
    fn process(&mut self, pkt: &Pkt<'_>, _mbuf: &MBuf) -> Verdict {
        snap_verdict(self.0.run(pkt.data, pkt.wire_len), pkt.data.len())
    }
}

struct SwiftFilter {
    reader: netsift_swift::Reader,
    // Keeps the filter alive (and could update it in place).
    _writer: netsift_swift::Writer,
}

impl Filter for SwiftFilter {
    fn process(&mut self, pkt: &Pkt<'_>, _mbuf: &MBuf) -> Verdict {
        snap_verdict(self.reader.run(pkt.data, pkt.wire_len), pkt.data.len())
    }
}

struct EbpfFilter(netsift_ebpf::KernelFilter);

impl Filter for EbpfFilter {
    fn process(&mut self, pkt: &Pkt<'_>, _mbuf: &MBuf) -> Verdict {
        // A failed test run (the kernel refused the packet) rejects it.
        snap_verdict(
            self.0.run(pkt.data, pkt.wire_len).unwrap_or(0),
            pkt.data.len(),
        )
    }
}

/// `(fpl, "PROGRAM" [, MBUF])`: an FPL program (netsift-fpl; `@PATH` reads it from a file)
/// whose `MEM` is the instance's MBuf (in 64-bit words, a power of two; at least one word).
/// A packet passes when the program returns a non-zero value, the result. The program runs as
/// native code, or interpreted where native code is not available; its registers persist from
/// packet to packet. The program works on a private copy of the memory, published to the MBuf
/// every 256 packets and when the input ends (FPL's native code reads and writes plain words).
struct FplClass;

/// Packets between two publications of an FPL filter's memory to its MBuf.
const FPL_PUBLISH_EVERY: u32 = 256;

impl FilterClass for FplClass {
    fn name(&self) -> &'static str {
        "fpl"
    }

    fn about(&self) -> &'static str {
        "an FPL program (FFPF packet language) with the MBuf as its memory"
    }

    fn usage(&self) -> &'static str {
        "\"PROGRAM\" | \"@FILE\" [, MBUF (bytes: 8 x a power of two)]"
    }

    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }

    fn min_mbuf(&self, _args: &[Arg]) -> usize {
        8
    }

    fn describe(&self, mbuf: &MBuf) -> Option<String> {
        let words = mbuf.snapshot();
        let used: Vec<(usize, u64)> = words
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, w)| w != 0)
            .collect();
        let first: Vec<String> = used
            .iter()
            .take(8)
            .map(|(i, w)| format!("MEM[{i}]={w}"))
            .collect();
        Some(format!(
            "{} of {} MBuf words non-zero{}{}",
            used.len(),
            words.len(),
            if first.is_empty() { "" } else { ": " },
            first.join(", ")
        ))
    }

    fn instantiate(&self, args: &[Arg], ctx: &Context) -> Result<Instance, String> {
        make_fpl(&args[0].text, (ctx.mbuf_bytes / 8).max(1))
    }
}

fn make_fpl(text: &str, words: usize) -> Result<Instance, String> {
    let src = match text.strip_prefix('@') {
        Some(path) => {
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?
        }
        None => text.to_string(),
    };
    if !words.is_power_of_two() {
        return Err(format!(
            "the MBuf of an FPL filter must be 8 x a power of two bytes ({} bytes given)",
            words * 8
        ));
    }
    let program = netsift_fpl::Program::compile(&src, &netsift_fpl::Registry::standard(), words)
        .map_err(|e| format!("\n{}", e.render(&src)))?;
    let native = program.native().ok();
    Ok(Instance::Filter(Box::new(FplFilter {
        program,
        native,
        mem: vec![0; words],
        regs: [0; netsift_fpl::NREGS],
        since_publish: 0,
    })))
}

struct FplFilter {
    program: netsift_fpl::Program,
    native: Option<netsift_fpl::NativeProgram>,
    mem: Vec<u64>,
    regs: netsift_fpl::Regs,
    since_publish: u32,
}

impl FplFilter {
    fn publish(&mut self, mbuf: &MBuf) {
        for (i, &w) in self.mem.iter().enumerate().take(mbuf.words()) {
            mbuf.set(i, w);
        }
        self.since_publish = 0;
    }
}

impl Filter for FplFilter {
    fn process(&mut self, pkt: &Pkt<'_>, mbuf: &MBuf) -> Verdict {
        let r = match &self.native {
            Some(n) => n.run(pkt.data, pkt.wire_len, &mut self.mem, &mut self.regs),
            None => self
                .program
                .run_interp(pkt.data, pkt.wire_len, &mut self.mem, &mut self.regs),
        };
        self.since_publish += 1;
        if self.since_publish >= FPL_PUBLISH_EVERY {
            self.publish(mbuf);
        }
        if r == 0 {
            Verdict::Drop
        } else {
            Verdict::Pass {
                result: r as u32,
                keep: None,
            }
        }
    }

    fn finish(&mut self, mbuf: &MBuf) -> Result<(), String> {
        self.publish(mbuf);
        Ok(())
    }
}

/// `(classify, "RULES" [, MBUF])`: the packet's IPv4 5-tuple classified against a ClassBench
/// rule set (first match wins); packets matching a rule pass with result = rule index + 1,
/// others (no match, not IPv4) are dropped. With an MBuf of at least 8 bytes per rule, word i
/// counts the packets rule i matched.
struct ClassifyClass;

impl FilterClass for ClassifyClass {
    fn describe(&self, mbuf: &MBuf) -> Option<String> {
        let hits: Vec<String> = mbuf
            .snapshot()
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .take(10)
            .map(|(i, n)| format!("rule {i}: {n}"))
            .collect();
        (!hits.is_empty()).then(|| format!("packets per rule: {}", hits.join(", ")))
    }

    fn name(&self) -> &'static str {
        "classify"
    }

    fn about(&self) -> &'static str {
        "IPv4 5-tuple classification against a ClassBench rule set (first match wins)"
    }

    fn usage(&self) -> &'static str {
        "\"RULES-FILE\" [, MBUF]"
    }

    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, String> {
        let path = &args[0].text;
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        let rules =
            netsift_classify::classbench::parse_rules(&text).map_err(|e| format!("{path}: {e}"))?;
        let built = netsift_classify::engine::build(netsift_classify::engine::Kind::Auto, &rules);
        Ok(Instance::Filter(Box::new(ClassifyFilter {
            engine: built.engine,
        })))
    }
}

struct ClassifyFilter {
    engine: Box<dyn Classifier + Send + Sync>,
}

/// The classifier's header of an IPv4 packet of `link`: addresses, ports (0 without),
/// protocol, TCP flags (0 without).
fn header(link: LinkType, data: &[u8]) -> Option<netsift_classify::Header> {
    let flow = netsift_wire::flow::parse(link, data)?;
    let key = flow.key;
    let (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) = (key.src, key.dst) else {
        return None;
    };
    let (sp, dp) = key.ports.unwrap_or((0, 0));
    Some(netsift_classify::Header(
        [
            u32::from(s),
            u32::from(d),
            u32::from(sp),
            u32::from(dp),
            u32::from(key.proto.0),
        ],
        flow.tcp_flags.map_or(0, |f| u16::from(f.0)),
    ))
}

impl Filter for ClassifyFilter {
    fn process(&mut self, pkt: &Pkt<'_>, mbuf: &MBuf) -> Verdict {
        match header(pkt.link_type, pkt.data).and_then(|h| self.engine.classify(&h)) {
            Some(i) => {
                mbuf.add(i, 1);
                Verdict::Pass {
                    result: i as u32 + 1,
                    keep: None,
                }
            }
            None => Verdict::Drop,
        }
    }
}

/// `(nic, "CAPTURE", QUEUES, QUEUE)`: the packets an emulated NIC with `QUEUES`
/// RX queues (Toeplitz RSS, no rules) delivers on `QUEUE`, from a capture file — a source per
/// queue, as FFPF's per-queue capture threads.
struct NicClass;

impl FilterClass for NicClass {
    fn name(&self) -> &'static str {
        "nic"
    }

    fn about(&self) -> &'static str {
        "one RX queue of an emulated NIC (Toeplitz RSS) reading a capture file (source)"
    }

    fn usage(&self) -> &'static str {
        "\"CAPTURE\", QUEUES, QUEUE"
    }

    fn is_source(&self) -> bool {
        true
    }

    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, String> {
        let path = &args[0].text;
        let queues = args[1]
            .number()
            .filter(|&q| (1..=1024).contains(&q))
            .ok_or_else(|| format!("QUEUES must be 1 to 1024, not `{}`", args[1].text))?;
        let queue = args[2]
            .number()
            .filter(|&q| q < queues)
            .ok_or_else(|| format!("QUEUE must be below {queues}, not `{}`", args[2].text))?;
        let reader = CaptureReader::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        let link_type = reader.link_type().unwrap_or(LinkType::ETHERNET);
        Ok(Instance::Source(Box::new(NicSource {
            reader,
            nic: netsift_offload::nic::EmulatedNic::new(queues as u16, Default::default()),
            queue: queue as u16,
            link_type,
        })))
    }
}

struct NicSource {
    reader: CaptureReader<std::fs::File>,
    nic: netsift_offload::nic::EmulatedNic,
    queue: u16,
    link_type: LinkType,
}

impl Source for NicSource {
    fn link_type(&self) -> LinkType {
        self.link_type
    }

    fn next_packet(&mut self) -> Result<Option<Packet>, String> {
        while let Some(item) = self.reader.next_packet() {
            let p = item.map_err(|e| e.to_string())?;
            if self.nic.receive_packet(p).queue() == Some(self.queue) {
                return Ok(Some(p.to_owned()));
            }
        }
        Ok(None)
    }
}
