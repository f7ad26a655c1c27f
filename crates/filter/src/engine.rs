//! The meta filter: the one place that picks the engine running a filter.
//!
//! Each engine says whether it can serve a filter; the most specialised one that can is used:
//!
//! | engine | serves | refuses |
//! |---|---|---|
//! | Swift | expressions, when the filter will be updated in place or Swift is asked for | programs; what Swift cannot express (arithmetic, `protochain`, Geneve lengths, ancillary data, more than 512 passes) |
//! | eBPF | when asked for: Ethernet, the kernel runs each packet (`BPF_PROG_TEST_RUN`) | other link types; no permission to load; the verifier's refusals |
//! | JIT | any valid program, on x86-64 with executable memory | other machines; mapping failures |
//! | interpreter | any valid program | nothing (the reference) |
//!
//! [`Choice::Auto`] takes Swift for a filter that will be updated ([`Choice::updates`]), else
//! the JIT, else the interpreter. Asking for the JIT where it cannot run falls back to the
//! interpreter (logged); asking for Swift or eBPF where they cannot serve is an error, since
//! their properties (updates in place, the kernel's verdicts) are why they were asked for.

use std::fmt;

use netsift_bpf::{Program, Rules};
use netsift_capture::LinkType;
use netsift_jit::JitFilter;
use netsift_lang::Pred;

use crate::compile::program;
use crate::error::{Error, ErrorKind};
use crate::target::Target;

/// An engine that runs filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    /// The classic BPF interpreter: libpcap's `bpf_filter`, the reference.
    Interpreter,
    /// Native x86-64 code.
    Jit,
    /// Swift passes, updated in place while packets flow.
    Swift,
    /// The kernel, as eBPF (one `BPF_PROG_TEST_RUN` per packet; the interpreter for packets
    /// the kernel's test harness does not take).
    Ebpf,
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Engine::Interpreter => "interpreter",
            Engine::Jit => "JIT",
            Engine::Swift => "Swift",
            Engine::Ebpf => "eBPF",
        })
    }
}

/// Which engine the caller asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Choice {
    /// The engine, or `None` for the most specialised one that can serve.
    pub engine: Option<Engine>,
    /// The filter will be updated while packets flow: [`Choice::AUTO`] then prefers Swift.
    pub updates: bool,
}

impl Choice {
    /// The most specialised engine that can serve a filter that does not change.
    pub const AUTO: Choice = Choice {
        engine: None,
        updates: false,
    };

    /// Exactly `engine` (the JIT falls back to the interpreter where it cannot run).
    pub fn only(engine: Engine) -> Choice {
        Choice {
            engine: Some(engine),
            updates: false,
        }
    }

    /// The most specialised engine for a filter that will be updated in place.
    pub fn updatable() -> Choice {
        Choice {
            engine: None,
            updates: true,
        }
    }
}

impl Default for Choice {
    fn default() -> Choice {
        Choice::AUTO
    }
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.engine {
            None if self.updates => f.write_str("auto (updatable)"),
            None => f.write_str("auto"),
            Some(e) => e.fmt(f),
        }
    }
}

/// What a filter is built from.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// An expression's meaning, and the expression (errors point at it), as [`crate::compile`]
    /// made it for the target.
    Pred {
        /// The predicate.
        pred: &'a Pred,
        /// The expression it was compiled from.
        expr: &'a str,
    },
    /// A classic BPF program (validated with libpcap's rules, which allow the backward jumps of
    /// `ip6 protochain`).
    Program(&'a Program),
}

enum Imp {
    Interp(netsift_bpf::Filter),
    Jit(JitFilter),
    Swift {
        reader: netsift_swift::Reader,
        writer: netsift_swift::Writer,
    },
    Ebpf {
        kernel: Box<netsift_ebpf::KernelFilter>,
        /// Test runs that failed (the packets were rejected by [`Filter::run`]).
        failures: u64,
    },
}

/// A filter and the engine that runs it. Given a packet's captured bytes and its length on the
/// wire, it returns the number of bytes to keep; 0 rejects the packet.
pub struct Filter {
    imp: Imp,
    program: Option<Program>,
    log: Vec<String>,
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Filter")
            .field("engine", &self.engine())
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

/// The decisions taken while building a filter, logged as they are taken.
struct Log(Vec<String>);

impl Log {
    fn refused(&mut self, engine: Engine, why: &str) {
        let why = why.trim_start_matches([' ', ':']);
        tracing::info!(target: "netsift_filter", "{engine} cannot serve: {why}");
        self.0.push(format!("{engine} cannot serve: {why}"));
    }

    fn chose(&mut self, engine: Engine, what: &str, choice: Choice) {
        tracing::info!(target: "netsift_filter", "engine {choice}: {engine} ({what})");
        self.0.push(format!("engine {choice}: {engine} ({what})"));
    }
}

impl Filter {
    /// Compiles `expr` for `target` and builds it with `choice`.
    pub fn compile(expr: &str, target: &Target, choice: Choice) -> Result<Filter, Error> {
        let pred = crate::compile(expr, target)?;
        Filter::build(Input::Pred { pred: &pred, expr }, target, choice)
    }

    /// Builds a filter from `input` for `target` with the engine `choice` asks for: the most
    /// specialised engine that can serve. Every decision is logged ([`Filter::log`]).
    pub fn build(input: Input<'_>, target: &Target, choice: Choice) -> Result<Filter, Error> {
        let mut log = Log(Vec::new());
        let wants_swift = match choice.engine {
            Some(Engine::Swift) => true,
            None => choice.updates,
            _ => false,
        };
        // The classic program first, whatever runs the filter: its compilation reports what
        // libpcap reports (`expression rejects all packets`, a program too long) for every
        // engine alike.
        let program = match input {
            Input::Pred { pred, expr } => program(pred, target, expr)?,
            Input::Program(p) => p.clone(),
        };
        if wants_swift {
            match swift(input, target) {
                Ok((reader, writer, passes)) => {
                    log.chose(Engine::Swift, &format!("{passes} passes"), choice);
                    return Ok(Filter {
                        imp: Imp::Swift { reader, writer },
                        program: None,
                        log: log.0,
                    });
                }
                Err(e) if choice.engine == Some(Engine::Swift) => return Err(e),
                Err(e) => {
                    // "Swift cannot express this filter: …" is logged as "Swift cannot serve:
                    // cannot express this filter: …".
                    let why = match e.refusal() {
                        Some((_, says)) => says.to_string(),
                        None => e.message().trim_start_matches("Swift ").to_string(),
                    };
                    log.refused(Engine::Swift, &why);
                }
            }
        }
        let interp = netsift_bpf::Filter::new(program, Rules::Libpcap)
            .map_err(|e| Error::invalid(e.to_string()))?;
        let n = interp.program().len();
        if choice.engine == Some(Engine::Ebpf) {
            let kernel = ebpf(interp.program(), target)?;
            log.chose(
                Engine::Ebpf,
                &format!("{n} instructions in the kernel"),
                choice,
            );
            return Ok(Filter {
                program: Some(interp.program().clone()),
                imp: Imp::Ebpf {
                    kernel: Box::new(kernel),
                    failures: 0,
                },
                log: log.0,
            });
        }
        if choice.engine != Some(Engine::Interpreter) {
            match jit(interp.program()) {
                Ok(j) => {
                    log.chose(
                        Engine::Jit,
                        &format!("{} bytes of x86-64 code for {n} instructions", j.code_len()),
                        choice,
                    );
                    return Ok(Filter {
                        program: Some(interp.program().clone()),
                        imp: Imp::Jit(j),
                        log: log.0,
                    });
                }
                Err(why) => log.refused(Engine::Jit, &why),
            }
        }
        log.chose(Engine::Interpreter, &format!("{n} instructions"), choice);
        Ok(Filter {
            program: Some(interp.program().clone()),
            imp: Imp::Interp(interp),
            log: log.0,
        })
    }

    /// The engine that runs the filter.
    pub fn engine(&self) -> Engine {
        match self.imp {
            Imp::Interp(_) => Engine::Interpreter,
            Imp::Jit(_) => Engine::Jit,
            Imp::Swift { .. } => Engine::Swift,
            Imp::Ebpf { .. } => Engine::Ebpf,
        }
    }

    /// The decisions taken when the filter was built, one line each: every engine that could
    /// not serve and why, then the one chosen.
    pub fn log(&self) -> &[String] {
        &self.log
    }

    /// The classic BPF program the filter runs (`None` for Swift, which runs passes).
    pub fn program(&self) -> Option<&Program> {
        self.program.as_ref()
    }

    /// The Swift filter's writer, to add and remove passes while packets flow (`None` for the
    /// other engines).
    pub fn swift_writer(&mut self) -> Option<&mut netsift_swift::Writer> {
        match &mut self.imp {
            Imp::Swift { writer, .. } => Some(writer),
            _ => None,
        }
    }

    /// One line about packets the kernel did not run (eBPF only; `None` when it ran them all):
    /// those its test harness does not take (run by the interpreter, as the kernel would decide
    /// them) and test runs that failed (rejected by [`Filter::run`]).
    pub fn report(&self) -> Option<String> {
        match &self.imp {
            Imp::Ebpf { kernel, failures } => {
                let failed = (*failures > 0).then(|| {
                    format!("ebpf: {failures} test runs failed (those packets were rejected)")
                });
                match (kernel.report(), failed) {
                    (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                    (a, b) => a.or(b),
                }
            }
            _ => None,
        }
    }

    /// Runs the filter on one packet (`data` captured, `wire_len` on the wire); returns the
    /// number of bytes to keep, 0 to reject. Never fails: an eBPF test run that fails (the
    /// only engine that can) rejects the packet and is counted in [`Filter::report`]; use
    /// [`Filter::try_run`] to stop on it instead.
    #[inline]
    pub fn run(&mut self, data: &[u8], wire_len: u32) -> u32 {
        match &mut self.imp {
            Imp::Interp(f) => f.run(data, wire_len),
            Imp::Jit(j) => j.run(data, wire_len),
            Imp::Swift { reader, .. } => reader.run(data, wire_len),
            Imp::Ebpf { kernel, failures } => kernel.run(data, wire_len).unwrap_or_else(|_| {
                *failures += 1;
                0
            }),
        }
    }

    /// [`Filter::run`], with an eBPF test run that fails as an error (the kernel's error).
    pub fn try_run(&mut self, data: &[u8], wire_len: u32) -> Result<u32, Error> {
        match &mut self.imp {
            Imp::Ebpf { kernel, .. } => kernel.run(data, wire_len).map_err(|e| {
                Error::refused(
                    ErrorKind::Kernel,
                    Engine::Ebpf,
                    format!(": a test run failed: {e}"),
                )
            }),
            _ => Ok(self.run(data, wire_len)),
        }
    }

    /// Runs the filter on many packets, one result each into `out` (cleared first).
    pub fn run_batch<'a, I>(&mut self, packets: I, out: &mut Vec<u32>)
    where
        I: IntoIterator<Item = (&'a [u8], u32)>,
    {
        match &mut self.imp {
            Imp::Interp(f) => f.run_batch(packets, out),
            Imp::Jit(j) => j.run_batch(packets, out),
            Imp::Swift { reader, .. } => reader.run_batch(packets, out),
            Imp::Ebpf { .. } => {
                out.clear();
                for (d, w) in packets {
                    let r = self.run(d, w);
                    out.push(r);
                }
            }
        }
    }
}

/// Swift's passes for `input`, or why Swift cannot serve.
fn swift(
    input: Input<'_>,
    target: &Target,
) -> Result<(netsift_swift::Reader, netsift_swift::Writer, usize), Error> {
    let Input::Pred { pred, .. } = input else {
        return Err(Error::refused(
            ErrorKind::Unsupported,
            Engine::Swift,
            " runs filter expressions, not classic BPF programs",
        ));
    };
    // "Swift cannot express this filter: …".
    let spec = netsift_swift::from_pred::from_pred(pred)
        .map_err(|e| Error::new(ErrorKind::Unsupported, e.to_string()))?;
    let (mut writer, reader) = netsift_swift::open(target.snaplen);
    let passes = spec.passes.len();
    spec.load(&mut writer).map_err(|e| {
        Error::new(
            ErrorKind::Unsupported,
            format!("Swift cannot load this filter: {e}"),
        )
    })?;
    Ok((reader, writer, passes))
}

/// The JIT's code for `program`, or why it cannot run here.
fn jit(program: &Program) -> Result<JitFilter, String> {
    if !netsift_jit::available() {
        return Err(format!(
            "no code generator or no executable memory on this machine ({})",
            std::env::consts::ARCH
        ));
    }
    JitFilter::new(program.clone(), Rules::Libpcap).map_err(|e| e.to_string())
}

/// `program` loaded into the kernel for test runs, or why the kernel cannot serve.
fn ebpf(program: &Program, target: &Target) -> Result<netsift_ebpf::KernelFilter, Error> {
    if target.link_type != LinkType::ETHERNET {
        return Err(Error::refused(
            ErrorKind::Unsupported,
            Engine::Ebpf,
            format!(
                " runs the filter on Ethernet captures (link type EN10MB); this capture's link \
                 type is {}",
                target.link_type
            ),
        ));
    }
    netsift_ebpf::KernelFilter::new(program, "netsift_filter").map_err(|e| {
        let says = match e.kind() {
            // The error already says that root is needed.
            netsift_ebpf::ErrorKind::PermissionDenied => {
                format!(" loads the filter into the kernel: {e}")
            }
            _ => format!(": the kernel refuses the SCHED_CLS program: {e}"),
        };
        Error::refused(ErrorKind::Kernel, Engine::Ebpf, says)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsift_capture::generate::mixed_traffic;

    fn eth() -> Target {
        Target::live(LinkType::ETHERNET, 262_144)
    }

    /// Every engine that serves gives the interpreter's verdicts on the mix.
    fn agree(f: &mut Filter, expr: &str) {
        let mut reference =
            Filter::compile(expr, &eth(), Choice::only(Engine::Interpreter)).unwrap();
        for p in mixed_traffic(3, 2000) {
            assert_eq!(
                f.run(&p.data, p.wire_len),
                reference.run(&p.data, p.wire_len),
                "{expr} on {:?} by {}",
                p.data,
                f.engine()
            );
        }
    }

    #[test]
    fn auto_takes_the_jit_where_it_runs() {
        let mut f = Filter::compile("tcp port 80", &eth(), Choice::AUTO).unwrap();
        if netsift_jit::available() {
            assert_eq!(f.engine(), Engine::Jit);
            assert!(
                f.log()[0].starts_with("engine auto: JIT ("),
                "{:?}",
                f.log()
            );
        } else {
            assert_eq!(f.engine(), Engine::Interpreter);
            assert!(f.log()[0].starts_with("JIT cannot serve"), "{:?}", f.log());
        }
        agree(&mut f, "tcp port 80");
        let i = Filter::compile("tcp port 80", &eth(), Choice::only(Engine::Interpreter)).unwrap();
        assert_eq!(i.engine(), Engine::Interpreter);
        assert_eq!(
            i.log(),
            ["engine interpreter: interpreter (20 instructions)"]
        );
        assert_eq!(i.program(), f.program());
    }

    #[test]
    fn updatable_filters_take_swift_when_it_can_serve() {
        let expr = "host 198.18.0.1 and tcp port 80";
        let mut f = Filter::compile(expr, &eth(), Choice::updatable()).unwrap();
        assert_eq!(f.engine(), Engine::Swift);
        assert!(f.swift_writer().is_some());
        assert_eq!(f.program(), None);
        agree(&mut f, expr);
        // Arithmetic is beyond Swift: the refusal is logged and the next engine serves.
        let expr = "ip[2:2] - 20 > 100";
        let mut f = Filter::compile(expr, &eth(), Choice::updatable()).unwrap();
        assert_ne!(f.engine(), Engine::Swift);
        assert!(
            f.log()[0].starts_with("Swift cannot serve: "),
            "{:?}",
            f.log()
        );
        agree(&mut f, expr);
        // Asked for by name, Swift's refusal is the error.
        let e = Filter::compile(expr, &eth(), Choice::only(Engine::Swift)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        let p = crate::compile_program("tcp", &eth()).unwrap();
        let e = Filter::build(Input::Program(&p), &eth(), Choice::only(Engine::Swift)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Swift runs filter expressions, not classic BPF programs"
        );
        assert_eq!(
            e.refusal(),
            Some((
                Engine::Swift,
                " runs filter expressions, not classic BPF programs"
            ))
        );
    }

    #[test]
    fn every_engine_reports_what_libpcap_reports() {
        for engine in [Engine::Swift, Engine::Interpreter, Engine::Jit] {
            let e = Filter::compile("ip and arp", &eth(), Choice::only(engine)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::RejectsAll, "{engine}");
            assert!(
                e.to_string().starts_with("expression rejects all packets"),
                "{e}"
            );
        }
    }

    #[test]
    fn ebpf_runs_ethernet_only() {
        let sll = Target::live(LinkType::LINUX_SLL, 65535);
        let e = Filter::compile("tcp", &sll, Choice::only(Engine::Ebpf)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(e.message().contains("LINUX_SLL"), "{e}");
    }

    #[test]
    fn programs_are_validated_and_errors_point_at_the_expression() {
        let bad = Program::new(vec![netsift_bpf::Insn::stmt(netsift_bpf::code::LD, 0)]);
        let e = Filter::build(Input::Program(&bad), &eth(), Choice::AUTO).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidProgram);
        let e = Filter::compile("tcp port htp", &eth(), Choice::AUTO).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Semantic);
        assert_eq!(
            e.to_string(),
            "unknown port 'htp'\n  tcp port htp\n           ^^^"
        );
        let e = Filter::compile("tcp and", &eth(), Choice::AUTO).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Syntax);
    }

    #[test]
    fn the_target_makes_the_program() {
        let t = eth().with_snaplen(96);
        let p = crate::compile_program("", &t).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p.insns()[0].k, 96);
        // -O0 keeps libpcap's unoptimised shape.
        let expr = "ip src net 192.168.2.0/24 and dst net 10.0.0.0/8";
        let o1 = crate::compile_program(expr, &eth()).unwrap();
        let o0 = crate::compile_program(expr, &eth().with_optimize(false)).unwrap();
        assert_eq!((o0.len(), o1.len()), (22, 10));
        // NULL's `ip6` differs between live captures and files.
        let live = crate::compile_program("ip6", &Target::live(LinkType::NULL, 65535)).unwrap();
        let file =
            crate::compile_program("ip6", &Target::savefile(LinkType::NULL, 65535, false)).unwrap();
        assert_ne!(live, file);
    }
}
