//! Filter classes backed by netsift's engines: `bpf`, `jit`, `swift`, `ebpf` (filter
//! expressions in the tcpdump language), `classify` (a rule set) and `nic` (a queue of an
//! emulated NIC, as a source).
//!
//! The expression classes compile through `netsift-filter` for the target of the packets that
//! reach them (the source's link type, snap length and origin: a capture file compiles as
//! `tcpdump -r` does), each with its own engine, and pass a packet when the filter accepts it,
//! with the filter's return value (the snap length) as the result and the packet cut to it
//! downstream, as a BPF socket filter does.

use crate::access::Access;
use std::sync::Arc;

use netsift_capture::{CaptureReader, LinkType, Packet};
use netsift_classify::Classifier;
use netsift_filter::{Choice, DEFAULT_SNAPLEN, Engine, Filter as FilterApi, Target};

use crate::class::{Arg, Context, Filter, FilterClass, Instance, Pkt, Registry, Source, Verdict};
use crate::error::{Error, ErrorKind};
use crate::mbuf::MBuf;

/// Register the engine classes in `reg`.
pub fn register(reg: &mut Registry) {
    for engine in [
        Engine::Interpreter,
        Engine::Jit,
        Engine::Swift,
        Engine::Ebpf,
    ] {
        reg.register(Arc::new(ExprClass(engine)));
    }
    reg.register(Arc::new(ClassifyClass));
    reg.register(Arc::new(FplClass));
    reg.register(Arc::new(NicClass));
}

struct ExprClass(Engine);

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
            Engine::Interpreter => "bpf",
            Engine::Jit => "jit",
            Engine::Swift => "swift",
            Engine::Ebpf => "ebpf",
        }
    }

    fn about(&self) -> &'static str {
        match self.0 {
            Engine::Interpreter => {
                "a tcpdump filter expression, compiled to classic BPF and interpreted"
            }
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

    fn loads_kernel_programs(&self) -> bool {
        self.0 == Engine::Ebpf
    }

    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }

    /// Compiles the expression for the packets that reach the instance (their link type, snap
    /// length and origin, from the source upstream; a live Ethernet capture when unknown) and
    /// builds it with this class's engine, through `netsift-filter` (whose error is the
    /// [`ErrorKind::Expression`] error's source).
    fn instantiate(&self, args: &[Arg], ctx: &Context) -> Result<Instance, Error> {
        let target = ctx
            .target
            .unwrap_or(Target::live(LinkType::ETHERNET, DEFAULT_SNAPLEN));
        let filter = FilterApi::compile(&args[0].text, &target, Choice::only(self.0))
            .map_err(|e| Error::with_source(ErrorKind::Expression, e.to_string(), e))?;
        Ok(Instance::Filter(Box::new(ExprFilter(filter))))
    }
}

/// A filter of one of the expression classes: `netsift-filter`'s, whatever its engine.
struct ExprFilter(FilterApi);

impl Filter for ExprFilter {
    fn process(&mut self, pkt: &Pkt<'_>, _mbuf: &MBuf) -> Verdict {
        snap_verdict(self.0.run(pkt.data, pkt.wire_len), pkt.data.len())
    }

    fn program(&self) -> Option<&netsift_bpf::Program> {
        self.0.program()
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

    fn opens_paths(&self, args: &[Arg]) -> bool {
        args.first().is_some_and(|a| a.text.starts_with('@'))
    }

    fn instantiate(&self, args: &[Arg], ctx: &Context) -> Result<Instance, Error> {
        make_fpl(
            &args[0].text,
            (ctx.mbuf_bytes / 8).max(1),
            &ctx.access,
            ctx.bounds.fpl_ops,
        )
    }
}

/// The longest FPL program read from a file (`"@PATH"`).
pub const MAX_FPL_FILE: u64 = 1 << 20;
/// The longest rule set `classify` reads.
pub const MAX_RULES_FILE: u64 = 256 << 20;

fn make_fpl(text: &str, words: usize, access: &Access, max_ops: u64) -> Result<Instance, Error> {
    let src = match text.strip_prefix('@') {
        Some(path) => access
            .read_text(path, MAX_FPL_FILE)
            .map_err(|e| Error::io(format!("cannot read {path}: {e}"), e))?,
        None => text.to_string(),
    };
    if !words.is_power_of_two() {
        return Err(Error::new(
            ErrorKind::MBuf,
            format!(
                "the MBuf of an FPL filter must be 8 x a power of two bytes ({} bytes given)",
                words * 8
            ),
        ));
    }
    let program = netsift_fpl::Program::compile(&src, &netsift_fpl::Registry::standard(), words)
        .map_err(|e| {
            Error::with_source(ErrorKind::Expression, format!("\n{}", e.render(&src)), e)
        })?;
    let ops = program.report().max_ops;
    if ops > max_ops {
        return Err(Error::new(
            ErrorKind::Limit,
            format!(
                "the FPL program may execute {ops} operations per packet; this daemon allows \
                 {max_ops}"
            ),
        ));
    }
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

    fn finish(&mut self, mbuf: &MBuf) -> Result<(), Error> {
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

    fn opens_paths(&self, _args: &[Arg]) -> bool {
        true
    }

    fn instantiate(&self, args: &[Arg], ctx: &Context) -> Result<Instance, Error> {
        let path = &args[0].text;
        let text = ctx
            .access
            .read_text(path, MAX_RULES_FILE)
            .map_err(|e| Error::io(format!("cannot read {path}: {e}"), e))?;
        let rules = netsift_classify::classbench::parse_rules(&text)
            .map_err(|e| Error::with_source(ErrorKind::Expression, format!("{path}: {e}"), e))?;
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

    fn opens_paths(&self, _args: &[Arg]) -> bool {
        true
    }

    fn instantiate(&self, args: &[Arg], ctx: &Context) -> Result<Instance, Error> {
        let path = &args[0].text;
        let queues = args[1]
            .number()
            .filter(|&q| (1..=1024).contains(&q))
            .ok_or_else(|| {
                Error::argument(format!("QUEUES must be 1 to 1024, not `{}`", args[1].text))
            })?;
        let queue = args[2].number().filter(|&q| q < queues).ok_or_else(|| {
            Error::argument(format!(
                "QUEUE must be below {queues}, not `{}`",
                args[2].text
            ))
        })?;
        let file = ctx
            .access
            .open_read(path)
            .map_err(|e| Error::io(format!("cannot read {path}: {e}"), e))?;
        let reader = CaptureReader::new(file)
            .map_err(|e| Error::io(format!("cannot read {path}: {e}"), e))?;
        let link_type = reader.link_type().unwrap_or(LinkType::ETHERNET);
        let target = Target::for_capture(&reader);
        Ok(Instance::Source(Box::new(NicSource {
            target,
            reader,
            nic: netsift_offload::nic::EmulatedNic::new(queues as u16, Default::default()),
            queue: queue as u16,
            link_type,
        })))
    }
}

struct NicSource {
    target: Target,
    reader: CaptureReader<std::fs::File>,
    nic: netsift_offload::nic::EmulatedNic,
    queue: u16,
    link_type: LinkType,
}

impl Source for NicSource {
    fn link_type(&self) -> LinkType {
        self.link_type
    }

    /// The capture file's (the NIC delivers its packets).
    fn target(&self) -> Target {
        self.target
    }

    fn next_packet(&mut self) -> Result<Option<Packet>, Error> {
        while let Some(item) = self.reader.next_packet() {
            let p = item.map_err(|e| Error::with_source(ErrorKind::Source, e.to_string(), e))?;
            if self.nic.receive_packet(p).queue() == Some(self.queue) {
                return Ok(Some(p.to_owned()));
            }
        }
        Ok(None)
    }
}
