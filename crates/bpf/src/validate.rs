//! Static checks that a classic BPF program is safe to run.
//!
//! Two rule sets exist because the two references disagree:
//!
//! - [`Rules::Kernel`] is Linux's `bpf_check_classic` (what `SO_ATTACH_FILTER`, `iptables -m bpf`
//!   and `cls_bpf` accept): 1 to 4096 instructions, known opcodes only, jumps forward and inside
//!   the program, constant shifts below 32, no constant division or modulo by zero, scratch indexes
//!   below 16, no read of a scratch cell that some path has not written, known ancillary offsets
//!   only, and a `ret` last.
//! - [`Rules::Libpcap`] is libpcap's `bpf_validate` as its interpreter needs it: the same, except
//!   that unconditional jumps may go backwards (libpcap compiles `ip6 protochain` into a loop),
//!   shifts and scratch reads are not checked, and there is no length limit beyond
//!   [`MAX_LIBPCAP_INSNS`]. Opcodes are held to the kernel's exact table, since libpcap's
//!   interpreter aborts on any other.
//!
//! Every rejection names the instruction and the rule it broke.

use std::fmt;

use crate::insn::{Insn, Program, code};

/// Which validator's rules to apply. See the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rules {
    /// Linux's `bpf_check_classic`, the strictest: what the kernel would attach.
    Kernel,
    /// libpcap's `bpf_validate`: allows backward `ja` (used by `ip6 protochain`).
    Libpcap,
}

/// The longest program [`Rules::Libpcap`] accepts. libpcap sets no limit; netsift keeps jump
/// targets in 16 bits and bounds the work of one packet.
pub const MAX_LIBPCAP_INSNS: usize = 65_535;

/// Why a program was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValidateErrorKind {
    /// The program has no instructions.
    Empty,
    /// The program is longer than the rule set allows.
    TooLong {
        /// Number of instructions in the program.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The opcode is not one the kernel (or libpcap's interpreter) can execute.
    UnknownOpcode,
    /// Division or modulo by the constant 0.
    DivisionByZero,
    /// Shift by a constant of 32 or more.
    ShiftTooLarge,
    /// Scratch memory index of 16 or more.
    BadScratchIndex,
    /// A jump target lies outside the program (or, for the kernel, behind the jump).
    JumpOutOfRange {
        /// The index the jump would reach (negative for a jump before the start).
        target: i64,
        /// Number of instructions in the program.
        len: usize,
    },
    /// A load from an ancillary offset (`SKF_AD_OFF + n`) the kernel does not know.
    UnknownAncillary,
    /// A scratch cell may be read before any write on some path.
    UninitializedScratch,
    /// The last instruction is not a `ret`.
    NoFinalReturn,
}

/// A program failed validation: which instruction and which rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidateError {
    kind: ValidateErrorKind,
    index: usize,
    insn: Option<Insn>,
}

impl ValidateError {
    fn new(kind: ValidateErrorKind, index: usize, insn: Option<Insn>) -> ValidateError {
        ValidateError { kind, index, insn }
    }

    /// What was wrong.
    pub fn kind(&self) -> &ValidateErrorKind {
        &self.kind
    }

    /// Index of the offending instruction (0 for whole-program errors).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The offending instruction, when the error concerns one.
    pub fn insn(&self) -> Option<Insn> {
        self.insn
    }
}

impl fmt::Display for ValidateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ValidateErrorKind::*;
        match &self.kind {
            Empty => return write!(f, "invalid BPF program: it has no instructions"),
            TooLong { len, max } => {
                return write!(
                    f,
                    "invalid BPF program: {len} instructions, more than the limit of {max}"
                );
            }
            _ => {}
        }
        write!(f, "invalid BPF program: instruction {}", self.index)?;
        if let Some(insn) = self.insn {
            write!(
                f,
                " ({{ 0x{:x}, {}, {}, 0x{:08x} }})",
                insn.code, insn.jt, insn.jf, insn.k
            )?;
        }
        let k = self.insn.map_or(0, |i| i.k);
        match &self.kind {
            UnknownOpcode => write!(
                f,
                ": unknown opcode 0x{:x}",
                self.insn.map_or(0, |i| i.code)
            ),
            DivisionByZero => write!(f, ": division or modulo by constant 0"),
            ShiftTooLarge => write!(f, ": shift by {k}, must be below 32"),
            BadScratchIndex => write!(f, ": scratch memory index {k}, must be below 16"),
            JumpOutOfRange { target, len } => write!(
                f,
                ": jump to instruction {target} is outside the program of {len} instructions"
            ),
            UnknownAncillary => write!(f, ": unknown ancillary load offset 0x{k:08x}"),
            UninitializedScratch => {
                write!(f, ": M[{k}] may be read before it is written")
            }
            NoFinalReturn => write!(f, ": the last instruction must be a ret"),
            Empty | TooLong { .. } => Ok(()),
        }
    }
}

impl std::error::Error for ValidateError {}

/// Offsets of the Linux ancillary loads (`SKF_AD_*`) the kernel knows, relative to `SKF_AD_OFF`.
const KNOWN_ANCILLARY: [u32; 16] = [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60];

/// Check `program` against `rules`. On success the program may be run by [`crate::Filter`].
pub fn validate(program: &Program, rules: Rules) -> Result<(), ValidateError> {
    let insns = program.insns();
    let len = insns.len();
    if len == 0 {
        return Err(ValidateError::new(ValidateErrorKind::Empty, 0, None));
    }
    let max = match rules {
        Rules::Kernel => code::MAXINSNS,
        Rules::Libpcap => MAX_LIBPCAP_INSNS,
    };
    if len > max {
        return Err(ValidateError::new(
            ValidateErrorKind::TooLong { len, max },
            0,
            None,
        ));
    }
    for (pc, insn) in insns.iter().enumerate() {
        check_insn(pc, insn, len, rules)?;
    }
    let last = insns[len - 1];
    if code::class(last.code) != code::RET {
        return Err(ValidateError::new(
            ValidateErrorKind::NoFinalReturn,
            len - 1,
            Some(last),
        ));
    }
    if rules == Rules::Kernel {
        check_scratch_reads(insns)?;
    }
    Ok(())
}

/// libpcap 1.10.3's exported `bpf_validate(f, len)`, exactly: `len >= 1`; loads of a known
/// mode, scratch indexes below 16, known ALU and jump operations, no constant division or
/// modulo by zero, every jump target inside the program (an unconditional jump's `k` added
/// unsigned, with 32-bit wrap-around, so that "backward" jumps pass), and a `ret` last. It
/// does not check opcodes exactly, as [`Rules::Libpcap`] does: `bpf_validate` accepts
/// programs that libpcap's interpreter aborts on, and netsift's libpcap returns its answer for
/// programs that callers only inspect.
pub fn libpcap_bpf_validate(insns: &[Insn]) -> bool {
    use code::*;
    let Some(last) = insns.last() else {
        return false;
    };
    let len = insns.len() as u64;
    for (i, p) in insns.iter().enumerate() {
        let c = p.code;
        let ok = match class(c) {
            LD | LDX => match mode(c) {
                IMM | ABS | IND | MSH | LEN => true,
                MEM => p.k < MEMWORDS,
                _ => false,
            },
            ST | STX => p.k < MEMWORDS,
            ALU => match op(c) {
                ADD | SUB | MUL | OR | AND | XOR | LSH | RSH | NEG => true,
                DIV | MOD => !(src(c) == K && p.k == 0),
                _ => false,
            },
            JMP => {
                // libpcap computes in `u_int`: `from + k` wraps at 2^32.
                let from = i as u32 + 1;
                match op(c) {
                    JA => u64::from(from.wrapping_add(p.k)) < len,
                    JEQ | JGT | JGE | JSET => {
                        u64::from(from) + u64::from(p.jt) < len
                            && u64::from(from) + u64::from(p.jf) < len
                    }
                    _ => false,
                }
            }
            _ => true,
        };
        if !ok {
            return false;
        }
    }
    class(last.code) == RET
}

fn check_insn(pc: usize, insn: &Insn, len: usize, rules: Rules) -> Result<(), ValidateError> {
    use code::*;
    let err = |kind| Err(ValidateError::new(kind, pc, Some(*insn)));
    if !insn.is_known_opcode() {
        return err(ValidateErrorKind::UnknownOpcode);
    }
    let c = insn.code;
    match class(c) {
        ALU => {
            let op = op(c);
            if src(c) == K && (op == DIV || op == MOD) && insn.k == 0 {
                return err(ValidateErrorKind::DivisionByZero);
            }
            if rules == Rules::Kernel && src(c) == K && (op == LSH || op == RSH) && insn.k >= 32 {
                return err(ValidateErrorKind::ShiftTooLarge);
            }
        }
        LD | LDX if mode(c) == MEM && insn.k >= MEMWORDS => {
            return err(ValidateErrorKind::BadScratchIndex);
        }
        ST | STX if insn.k >= MEMWORDS => return err(ValidateErrorKind::BadScratchIndex),
        LD if mode(c) == ABS
            && rules == Rules::Kernel
            && insn.k >= SKF_AD_OFF
            && !KNOWN_ANCILLARY.contains(&(insn.k - SKF_AD_OFF)) =>
        {
            return err(ValidateErrorKind::UnknownAncillary);
        }
        JMP => {
            let from = pc as i64 + 1;
            if op(c) == JA {
                let target = match rules {
                    // The kernel treats k as unsigned: only forward jumps.
                    Rules::Kernel => from + i64::from(insn.k),
                    // libpcap sign-extends k, allowing backward jumps.
                    Rules::Libpcap => from + i64::from(insn.k as i32),
                };
                if target < 0 || target >= len as i64 {
                    return err(ValidateErrorKind::JumpOutOfRange { target, len });
                }
            } else {
                for off in [insn.jt, insn.jf] {
                    let target = from + i64::from(off);
                    if target >= len as i64 {
                        return err(ValidateErrorKind::JumpOutOfRange { target, len });
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The kernel's `check_load_and_stores`: a forward data-flow pass over the (loop-free) program
/// that tracks, per instruction, which scratch cells are written on every path reaching it.
fn check_scratch_reads(insns: &[Insn]) -> Result<(), ValidateError> {
    use code::*;
    let mut masks = vec![u16::MAX; insns.len()];
    let mut valid: u16 = 0;
    for (pc, insn) in insns.iter().enumerate() {
        valid &= masks[pc];
        let c = insn.code;
        if c == ST || c == STX {
            valid |= 1 << insn.k;
        } else if c == LD | MEM || c == LDX | W | MEM {
            if valid & (1 << insn.k) == 0 {
                return Err(ValidateError::new(
                    ValidateErrorKind::UninitializedScratch,
                    pc,
                    Some(*insn),
                ));
            }
        } else if class(c) == JMP {
            // Targets were range-checked above; jumps are forward under kernel rules.
            if op(c) == JA {
                masks[pc + 1 + insn.k as usize] &= valid;
            } else {
                masks[pc + 1 + usize::from(insn.jt)] &= valid;
                masks[pc + 1 + usize::from(insn.jf)] &= valid;
            }
            valid = u16::MAX;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insn::code::*;

    fn prog(insns: &[Insn]) -> Program {
        Program::new(insns.to_vec())
    }

    fn kernel_err(insns: &[Insn]) -> ValidateError {
        validate(&prog(insns), Rules::Kernel).unwrap_err()
    }

    const RET0: Insn = Insn::stmt(RET | K, 0);

    #[test]
    fn length_limits() {
        assert_eq!(kernel_err(&[]).kind(), &ValidateErrorKind::Empty);
        let long = vec![RET0; 4097];
        assert_eq!(
            kernel_err(&long).kind(),
            &ValidateErrorKind::TooLong {
                len: 4097,
                max: 4096
            }
        );
        assert!(validate(&prog(&long[..4096]), Rules::Kernel).is_ok());
        assert!(validate(&prog(&long), Rules::Libpcap).is_ok());
        assert_eq!(
            kernel_err(&long).to_string(),
            "invalid BPF program: 4097 instructions, more than the limit of 4096"
        );
    }

    #[test]
    fn unknown_opcodes() {
        for bad in [0x10u16, 0x0e, 0x8c, 0xff, 0x0f, 0x27, 0xc4] {
            let e = kernel_err(&[Insn::stmt(bad, 0), RET0]);
            assert_eq!(e.kind(), &ValidateErrorKind::UnknownOpcode, "{bad:#x}");
            assert_eq!(e.index(), 0);
            let e = validate(&prog(&[Insn::stmt(bad, 0), RET0]), Rules::Libpcap).unwrap_err();
            assert_eq!(e.kind(), &ValidateErrorKind::UnknownOpcode, "{bad:#x}");
        }
        assert_eq!(
            kernel_err(&[Insn::stmt(0x0e, 0)]).to_string(),
            "invalid BPF program: instruction 0 ({ 0xe, 0, 0, 0x00000000 }): unknown opcode 0xe"
        );
    }

    #[test]
    fn constant_division_by_zero() {
        for op in [DIV, MOD] {
            let e = kernel_err(&[Insn::stmt(ALU | op | K, 0), RET0]);
            assert_eq!(e.kind(), &ValidateErrorKind::DivisionByZero);
            assert!(validate(&prog(&[Insn::stmt(ALU | op | K, 3), RET0]), Rules::Kernel).is_ok());
            // Division by X is checked at run time.
            assert!(validate(&prog(&[Insn::stmt(ALU | op | X, 0), RET0]), Rules::Kernel).is_ok());
        }
    }

    #[test]
    fn constant_shifts_below_32_for_the_kernel() {
        for op in [LSH, RSH] {
            let e = kernel_err(&[Insn::stmt(ALU | op | K, 32), RET0]);
            assert_eq!(e.kind(), &ValidateErrorKind::ShiftTooLarge);
            assert!(validate(&prog(&[Insn::stmt(ALU | op | K, 31), RET0]), Rules::Kernel).is_ok());
            assert!(validate(&prog(&[Insn::stmt(ALU | op | K, 32), RET0]), Rules::Libpcap).is_ok());
        }
    }

    #[test]
    fn scratch_indexes() {
        for c in [LD | MEM, LDX | W | MEM, ST, STX] {
            for rules in [Rules::Kernel, Rules::Libpcap] {
                let e = validate(&prog(&[Insn::stmt(c, 16), RET0]), rules).unwrap_err();
                assert_eq!(e.kind(), &ValidateErrorKind::BadScratchIndex, "{c:#x}");
            }
        }
    }

    #[test]
    fn jumps_in_range() {
        // ja past the end.
        let e = kernel_err(&[Insn::stmt(JMP | JA, 1), RET0]);
        assert_eq!(
            e.kind(),
            &ValidateErrorKind::JumpOutOfRange { target: 2, len: 2 }
        );
        assert!(validate(&prog(&[Insn::stmt(JMP | JA, 0), RET0]), Rules::Kernel).is_ok());
        // Conditional jumps: both targets.
        for (jt, jf) in [(1, 0), (0, 1), (255, 255)] {
            let e = kernel_err(&[Insn::jump(JMP | JEQ | K, 0, jt, jf), RET0]);
            assert!(matches!(e.kind(), ValidateErrorKind::JumpOutOfRange { .. }));
        }
        // Backward ja: the kernel reads k as unsigned (far past the end); libpcap allows it.
        let back = [
            RET0,
            Insn::stmt(LD | IMM, 0),
            Insn::stmt(JMP | JA, (-3i32) as u32),
            RET0,
        ];
        assert!(matches!(
            kernel_err(&back).kind(),
            ValidateErrorKind::JumpOutOfRange { .. }
        ));
        assert!(validate(&prog(&back), Rules::Libpcap).is_ok());
        // ... but not before the start.
        let before = [Insn::stmt(JMP | JA, (-2i32) as u32), RET0];
        let e = validate(&prog(&before), Rules::Libpcap).unwrap_err();
        assert_eq!(
            e.kind(),
            &ValidateErrorKind::JumpOutOfRange { target: -1, len: 2 }
        );
    }

    #[test]
    fn ancillary_offsets() {
        let vlan = Insn::stmt(LD | B | ABS, SKF_AD_OFF + 44);
        assert!(validate(&prog(&[vlan, RET0]), Rules::Kernel).is_ok());
        let bad = Insn::stmt(LD | W | ABS, SKF_AD_OFF + 64);
        assert_eq!(
            kernel_err(&[bad, RET0]).kind(),
            &ValidateErrorKind::UnknownAncillary
        );
        // SKF_NET_OFF and SKF_LL_OFF (below SKF_AD_OFF) are allowed.
        let net = Insn::stmt(LD | B | ABS, 0xfff0_0000);
        assert!(validate(&prog(&[net, RET0]), Rules::Kernel).is_ok());
        assert!(validate(&prog(&[bad, RET0]), Rules::Libpcap).is_ok());
    }

    #[test]
    fn final_return() {
        let e = kernel_err(&[Insn::stmt(LD | IMM, 0)]);
        assert_eq!(e.kind(), &ValidateErrorKind::NoFinalReturn);
        assert_eq!(
            e.to_string(),
            "invalid BPF program: instruction 0 ({ 0x0, 0, 0, 0x00000000 }): the last instruction \
             must be a ret"
        );
        assert!(validate(&prog(&[Insn::stmt(RET | A, 0)]), Rules::Kernel).is_ok());
    }

    #[test]
    fn scratch_read_before_write() {
        let e = kernel_err(&[Insn::stmt(LD | MEM, 3), RET0]);
        assert_eq!(e.kind(), &ValidateErrorKind::UninitializedScratch);
        assert_eq!(e.index(), 0);
        // Written on one path only.
        let one_path = [
            Insn::jump(JMP | JEQ | K, 0, 0, 1),
            Insn::stmt(ST, 3),
            Insn::stmt(LDX | W | MEM, 3),
            RET0,
        ];
        assert_eq!(kernel_err(&one_path).index(), 2);
        // Written on both paths.
        let both = [
            Insn::jump(JMP | JEQ | K, 0, 0, 2),
            Insn::stmt(ST, 3),
            Insn::stmt(JMP | JA, 1),
            Insn::stmt(STX, 3),
            Insn::stmt(LD | MEM, 3),
            RET0,
        ];
        assert!(validate(&prog(&both), Rules::Kernel).is_ok());
        // libpcap does not check.
        assert!(validate(&prog(&[Insn::stmt(LD | MEM, 3), RET0]), Rules::Libpcap).is_ok());
    }
}
