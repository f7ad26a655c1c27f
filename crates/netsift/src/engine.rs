//! The meta filter: one classic BPF program, run by the best engine available.
//!
//! Engine choice lives here and nowhere else. [`Engine::Auto`] picks the JIT when this machine
//! can run generated code and the interpreter otherwise; an explicit [`Engine::Jit`] that cannot
//! be served also falls back to the interpreter. Every decision is written to the filter's
//! [`Filter::log`], which the command line shows.

use std::fmt;

use netsift_bpf::{Program, Rules, ValidateError};
use netsift_jit::JitFilter;

/// Which engine a caller asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Engine {
    /// The fastest engine available: the JIT where it runs, else the interpreter.
    #[default]
    Auto,
    /// The classic BPF interpreter (the reference).
    Bpf,
    /// Native x86-64 code.
    Jit,
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Engine::Auto => "auto",
            Engine::Bpf => "bpf",
            Engine::Jit => "jit",
        })
    }
}

enum Imp {
    Interp(netsift_bpf::Filter),
    Jit(JitFilter),
}

/// A validated classic BPF program and the engine that runs it.
pub struct Filter {
    imp: Imp,
    log: Vec<String>,
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Filter")
            .field("engine", &self.engine())
            .field("insns", &self.program().len())
            .finish()
    }
}

impl Filter {
    /// Validates `program` with `rules` and prepares it for `engine`.
    pub fn new(program: Program, rules: Rules, engine: Engine) -> Result<Filter, ValidateError> {
        let interp = netsift_bpf::Filter::new(program, rules)?;
        let n = interp.program().len();
        let mut log = Vec::new();
        if engine == Engine::Bpf {
            log.push(format!("engine bpf: interpreter ({n} instructions)"));
            return Ok(Filter {
                imp: Imp::Interp(interp),
                log,
            });
        }
        if !netsift_jit::available() {
            log.push(format!(
                "engine {engine}: interpreter ({n} instructions); the JIT is not available on this machine ({} or no executable memory)",
                std::env::consts::ARCH
            ));
            return Ok(Filter {
                imp: Imp::Interp(interp),
                log,
            });
        }
        let program = interp.program().clone();
        match JitFilter::new(program, rules) {
            Ok(j) => {
                log.push(format!(
                    "engine {engine}: JIT ({} bytes of x86-64 code for {n} instructions)",
                    j.code_len()
                ));
                Ok(Filter {
                    imp: Imp::Jit(j),
                    log,
                })
            }
            Err(e) => {
                log.push(format!(
                    "engine {engine}: interpreter ({n} instructions); the JIT failed: {e}"
                ));
                Ok(Filter {
                    imp: Imp::Interp(interp),
                    log,
                })
            }
        }
    }

    /// The engine that runs the filter (never [`Engine::Auto`]).
    pub fn engine(&self) -> Engine {
        match self.imp {
            Imp::Interp(_) => Engine::Bpf,
            Imp::Jit(_) => Engine::Jit,
        }
    }

    /// The decisions taken when the filter was built, one line each.
    pub fn log(&self) -> &[String] {
        &self.log
    }

    /// The program.
    pub fn program(&self) -> &Program {
        match &self.imp {
            Imp::Interp(f) => f.program(),
            Imp::Jit(j) => j.program(),
        }
    }

    /// Runs the filter on one packet (`data` captured, `wire_len` on the wire); returns the
    /// number of bytes to keep, 0 to reject.
    #[inline]
    pub fn run(&self, data: &[u8], wire_len: u32) -> u32 {
        match &self.imp {
            Imp::Interp(f) => f.run(data, wire_len),
            Imp::Jit(j) => j.run(data, wire_len),
        }
    }

    /// Runs the filter on many packets, one result each into `out` (cleared first).
    pub fn run_batch<'a, I>(&self, packets: I, out: &mut Vec<u32>)
    where
        I: IntoIterator<Item = (&'a [u8], u32)>,
    {
        match &self.imp {
            Imp::Interp(f) => f.run_batch(packets, out),
            Imp::Jit(j) => j.run_batch(packets, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsift_bpf::Insn;
    use netsift_bpf::code::*;

    #[test]
    fn engines_agree_and_say_what_they_are() {
        let p = Program::new(vec![Insn::stmt(LD | B | ABS, 0), Insn::stmt(RET | A, 0)]);
        let i = Filter::new(p.clone(), Rules::Kernel, Engine::Bpf).unwrap();
        let a = Filter::new(p, Rules::Kernel, Engine::Auto).unwrap();
        assert_eq!(i.engine(), Engine::Bpf);
        assert!(i.log()[0].starts_with("engine bpf: interpreter"));
        if netsift_jit::available() {
            assert_eq!(a.engine(), Engine::Jit);
            assert!(a.log()[0].contains("JIT"), "{:?}", a.log());
        }
        for d in [&[][..], &[7][..]] {
            assert_eq!(i.run(d, 1), a.run(d, 1));
        }
    }
}
