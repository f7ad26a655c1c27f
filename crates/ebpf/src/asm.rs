//! An assembler for eBPF: instructions in order, jumps to [`Label`]s resolved at the end.
//!
//! ```
//! use netsift_ebpf::asm::Assembler;
//! use netsift_ebpf::{Cond, Insn, Reg};
//!
//! // r0 = (r1 == 0) ? 1 : 2
//! let mut a = Assembler::new();
//! let zero = a.label();
//! a.jump(Insn::jmp_imm(Cond::Eq, Reg::R1, 0, 0), zero);
//! a.push(Insn::mov64_imm(Reg::R0, 2));
//! a.push(Insn::exit());
//! a.bind(zero);
//! a.push(Insn::mov64_imm(Reg::R0, 1));
//! a.push(Insn::exit());
//! let insns = a.finish()?;
//! assert_eq!(insns[0], Insn::jmp_imm(Cond::Eq, Reg::R1, 0, 2));
//! # Ok::<(), netsift_ebpf::Error>(())
//! ```

use crate::error::{Error, ErrorKind, Result};
use crate::insn::{Insn, op};

/// A position in the program, bound once with [`Assembler::bind`]; jumps may name it before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Label(u32);

/// Collects instructions and resolves jump offsets to labels.
#[derive(Clone, Debug, Default)]
pub struct Assembler {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
    rebound: Option<Label>,
    reach: Option<u16>,
}

impl Assembler {
    /// An empty program.
    pub fn new() -> Assembler {
        Assembler::default()
    }

    /// Limit jumps to `reach` instructions instead of the offset field's 32,767: farther
    /// unconditional jumps become `gotol`, farther conditional ones are an error. For code the
    /// kernel will expand (it rewrites each `LD_ABS`/`LD_IND` into about seven instructions,
    /// and fails if a jump then no longer fits).
    pub fn set_reach(&mut self, reach: u16) {
        self.reach = Some(reach);
    }

    /// A new, not yet bound label.
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label((self.labels.len() - 1) as u32)
    }

    /// Bind `label` to the next instruction pushed. Binding a label twice is reported by
    /// [`Assembler::finish`].
    pub fn bind(&mut self, label: Label) {
        let slot = &mut self.labels[label.0 as usize];
        if slot.is_some() {
            self.rebound.get_or_insert(label);
        }
        *slot = Some(self.insns.len());
    }

    /// Whether `label` has been bound.
    pub fn is_bound(&self, label: Label) -> bool {
        self.labels[label.0 as usize].is_some()
    }

    /// The index the next instruction will have.
    pub fn here(&self) -> usize {
        self.insns.len()
    }

    /// The last instruction appended.
    pub fn last(&self) -> Option<&Insn> {
        self.insns.last()
    }

    /// Append one instruction.
    pub fn push(&mut self, insn: Insn) {
        self.insns.push(insn);
    }

    /// Append instructions.
    pub fn extend(&mut self, insns: impl IntoIterator<Item = Insn>) {
        self.insns.extend(insns);
    }

    /// Append a jump (conditional, `goto`, `gotol` or `may_goto`) whose offset will be set to
    /// reach `target`.
    pub fn jump(&mut self, insn: Insn, target: Label) {
        self.fixups.push((self.insns.len(), target));
        self.insns.push(insn);
    }

    /// The instructions with every jump resolved. Fails if a label is unbound or bound twice,
    /// or a conditional jump needs more than the 16-bit offset field (an unconditional one
    /// becomes `gotol`), or than the reach set with [`Assembler::set_reach`].
    pub fn finish(mut self) -> Result<Vec<Insn>> {
        let reach = i64::from(
            self.reach
                .map_or(i16::MAX, |r| r.min(i16::MAX as u16) as i16),
        );
        if let Some(l) = self.rebound {
            return Err(Error::new(
                ErrorKind::InvalidProgram,
                format!("assembling eBPF: label {} bound twice", l.0),
            ));
        }
        for &(at, label) in &self.fixups {
            let Some(target) = self.labels[label.0 as usize] else {
                return Err(Error::new(
                    ErrorKind::InvalidProgram,
                    format!(
                        "assembling eBPF: the jump at {at} goes to label {}, never bound",
                        label.0
                    ),
                ));
            };
            let delta = target as i64 - at as i64 - 1;
            let insn = &mut self.insns[at];
            if let (true, Ok(off)) = (delta.abs() <= reach, i16::try_from(delta)) {
                if insn.code == op::JMP32 | op::JA {
                    insn.imm = i32::from(off);
                } else {
                    insn.off = off;
                }
            } else if insn.code == op::JMP | op::JA || insn.code == op::JMP32 | op::JA {
                *insn = Insn::ja32(delta as i32);
            } else {
                return Err(Error::new(
                    ErrorKind::InvalidProgram,
                    format!(
                        "assembling eBPF: the conditional jump at {at} would go {delta} \
                         instructions, beyond its reach of {reach}"
                    ),
                ));
            }
        }
        Ok(self.insns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insn::{Cond, Reg};

    #[test]
    fn forward_and_backward_labels() {
        let mut a = Assembler::new();
        let top = a.label();
        let out = a.label();
        a.bind(top);
        a.push(Insn::alu64_imm(crate::Alu::Sub, Reg::R1, 1));
        a.jump(Insn::jmp_imm(Cond::Eq, Reg::R1, 0, 0), out);
        a.jump(Insn::ja(0), top);
        a.bind(out);
        a.push(Insn::exit());
        let p = a.finish().unwrap();
        assert_eq!(p[1].off, 1);
        assert_eq!(p[2].off, -3);
        assert_eq!(p[2].jump_target(2), Some(0));
    }

    #[test]
    fn far_jumps() {
        let mut a = Assembler::new();
        let far = a.label();
        a.jump(Insn::ja(0), far);
        a.jump(Insn::jmp_imm(Cond::Eq, Reg::R1, 0, 0), far);
        for _ in 0..40_000 {
            a.push(Insn::mov64_imm(Reg::R0, 0));
        }
        a.bind(far);
        a.push(Insn::exit());
        let e = a.clone().finish().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidProgram);
        assert!(e.to_string().contains("conditional jump at 1"), "{e}");
        // A shorter reach: the same program, the goto becomes `gotol` at once.
        let mut c = Assembler::new();
        c.set_reach(100);
        let near = c.label();
        c.jump(Insn::ja(0), near);
        c.extend(std::iter::repeat_n(Insn::mov64_imm(Reg::R0, 0), 200));
        c.bind(near);
        c.push(Insn::exit());
        assert_eq!(c.finish().unwrap()[0], Insn::ja32(200));
        let mut b = Assembler::new();
        let far = b.label();
        b.jump(Insn::ja(0), far);
        b.extend(std::iter::repeat_n(Insn::mov64_imm(Reg::R0, 0), 40_000));
        b.bind(far);
        b.push(Insn::exit());
        let p = b.finish().unwrap();
        assert_eq!(p[0], Insn::ja32(40_000));
    }

    #[test]
    fn label_errors() {
        let mut a = Assembler::new();
        let l = a.label();
        a.jump(Insn::ja(0), l);
        assert!(
            a.clone()
                .finish()
                .unwrap_err()
                .to_string()
                .contains("never bound")
        );
        a.bind(l);
        a.bind(l);
        assert!(a.finish().unwrap_err().to_string().contains("bound twice"));
    }
}
