//! Disassembly in the notation of the kernel verifier's log (`kernel/bpf/disasm.c`), so that a
//! listing can be read next to a verifier message: `(61) r2 = *(u32 *)(r1 +76)`,
//! `(2e) if w7 > w8 goto pc+3`, `(85) call bpf_skb_pull_data#39`.
//!
//! [`disasm`] prints a whole program, one numbered line per instruction (an `ld_imm64` takes
//! two slots and one line, as in the kernel's log); `Display` on [`Insn`] prints one.

use std::fmt::{self, Write as _};

use crate::insn::{Insn, helper, op};

const ALU_OPS: [&str; 16] = [
    "+=", "-=", "*=", "/=", "|=", "&=", "<<=", ">>=", "neg", "%=", "^=", "=", "s>>=", "endian",
    "?", "?",
];
const JMP_OPS: [&str; 16] = [
    "jmp", "==", ">", ">=", "&", "!=", "s>", "s>=", "call", "exit", "<", "<=", "s<", "s<=",
    "jcond", "?",
];

fn size_name(code: u8) -> &'static str {
    match op::size(code) {
        op::B => "u8",
        op::H => "u16",
        op::W => "u32",
        _ => "u64",
    }
}

fn helper_name(id: i32) -> Option<&'static str> {
    Some(match id {
        helper::MAP_LOOKUP_ELEM => "bpf_map_lookup_elem",
        helper::MAP_UPDATE_ELEM => "bpf_map_update_elem",
        helper::MAP_DELETE_ELEM => "bpf_map_delete_elem",
        helper::KTIME_GET_NS => "bpf_ktime_get_ns",
        helper::GET_PRANDOM_U32 => "bpf_get_prandom_u32",
        helper::GET_SMP_PROCESSOR_ID => "bpf_get_smp_processor_id",
        helper::SKB_LOAD_BYTES => "bpf_skb_load_bytes",
        helper::SKB_PULL_DATA => "bpf_skb_pull_data",
        helper::REDIRECT_MAP => "bpf_redirect_map",
        helper::XDP_GET_BUFF_LEN => "bpf_xdp_get_buff_len",
        _ => return None,
    })
}

/// Write one instruction; `next` is the following slot, which completes an `ld_imm64`.
pub(crate) fn write_insn(w: &mut dyn fmt::Write, i: &Insn, next: Option<&Insn>) -> fmt::Result {
    let c = i.code;
    write!(w, "({c:02x}) ")?;
    let class = op::class(c);
    let invalid = |w: &mut dyn fmt::Write| {
        write!(
            w,
            "invalid: dst={} src={} off={} imm={}",
            i.dst, i.src, i.off, i.imm
        )
    };
    match class {
        op::ALU | op::ALU64 => {
            let r = if class == op::ALU64 { 'r' } else { 'w' };
            let opn = op::op(c);
            if opn == op::END {
                let how = match (class, op::src(c)) {
                    (op::ALU64, _) => "bswap",
                    (_, op::TO_BE) => "be",
                    _ => "le",
                };
                write!(w, "r{} = {how}{} r{}", i.dst, i.imm, i.dst)
            } else if opn == op::NEG {
                write!(w, "{r}{} = -{r}{}", i.dst, i.dst)
            } else if opn > op::END {
                invalid(w)
            } else if op::src(c) == op::X {
                write!(
                    w,
                    "{r}{} {} {r}{}",
                    i.dst,
                    ALU_OPS[usize::from(opn >> 4)],
                    i.src
                )
            } else {
                write!(
                    w,
                    "{r}{} {} {}",
                    i.dst,
                    ALU_OPS[usize::from(opn >> 4)],
                    i.imm
                )
            }
        }
        op::LDX if op::mode(c) == op::MEM || op::mode(c) == op::MEMSX => {
            let s = if op::mode(c) == op::MEMSX { "s" } else { "u" };
            write!(
                w,
                "r{} = *({s}{} *)(r{} {:+})",
                i.dst,
                &size_name(c)[1..],
                i.src,
                i.off
            )
        }
        op::STX if op::mode(c) == op::MEM => write!(
            w,
            "*({} *)(r{} {:+}) = r{}",
            size_name(c),
            i.dst,
            i.off,
            i.src
        ),
        op::STX if op::mode(c) == op::ATOMIC => {
            let what = match i.imm {
                0x00 => "+=",
                0x40 => "|=",
                0x50 => "&=",
                0xa0 => "^=",
                _ => {
                    return write!(
                        w,
                        "atomic(0x{:x}) *({} *)(r{} {:+}), r{}",
                        i.imm,
                        size_name(c),
                        i.dst,
                        i.off,
                        i.src
                    );
                }
            };
            write!(
                w,
                "lock *({} *)(r{} {:+}) {what} r{}",
                size_name(c),
                i.dst,
                i.off,
                i.src
            )
        }
        op::ST if op::mode(c) == op::MEM => write!(
            w,
            "*({} *)(r{} {:+}) = {}",
            size_name(c),
            i.dst,
            i.off,
            i.imm
        ),
        op::LD if op::mode(c) == op::ABS => {
            write!(w, "r0 = *({} *)skb[{}]", size_name(c), i.imm)
        }
        op::LD if op::mode(c) == op::IND => {
            write!(w, "r0 = *({} *)skb[r{} + {}]", size_name(c), i.src, i.imm)
        }
        op::LD if i.is_ld_imm64() => {
            let hi = next.map_or(0, |n| n.imm as u32);
            match i.src {
                op::PSEUDO_MAP_FD => write!(w, "r{} = map[fd:{}]", i.dst, i.imm),
                op::PSEUDO_MAP_VALUE => {
                    write!(w, "r{} = map_value[fd:{}]+{}", i.dst, i.imm, hi)
                }
                _ => {
                    let v = (u64::from(hi) << 32) | u64::from(i.imm as u32);
                    write!(w, "r{} = 0x{v:x}", i.dst)
                }
            }
        }
        op::JMP | op::JMP32 => {
            let opn = op::op(c);
            let r = if class == op::JMP { 'r' } else { 'w' };
            match opn {
                op::JA if class == op::JMP32 => write!(w, "gotol pc{:+}", i.imm),
                op::JA => write!(w, "goto pc{:+}", i.off),
                op::CALL if class == op::JMP => {
                    if i.src == op::PSEUDO_CALL {
                        write!(w, "call pc{:+}", i.imm)
                    } else if let Some(name) = helper_name(i.imm) {
                        write!(w, "call {name}#{}", i.imm)
                    } else {
                        write!(w, "call #{}", i.imm)
                    }
                }
                op::EXIT if class == op::JMP => write!(w, "exit"),
                op::JCOND if class == op::JMP && i.src == 0 => {
                    write!(w, "may_goto pc{:+}", i.off)
                }
                op::CALL | op::EXIT | op::JCOND | 0xf0 => invalid(w),
                _ => {
                    let name = JMP_OPS[usize::from(opn >> 4)];
                    if op::src(c) == op::X {
                        write!(w, "if {r}{} {name} {r}{} goto pc{:+}", i.dst, i.src, i.off)
                    } else {
                        write!(w, "if {r}{} {name} 0x{:x} goto pc{:+}", i.dst, i.imm, i.off)
                    }
                }
            }
        }
        _ => invalid(w),
    }
}

/// A listing of `insns`: one line per instruction, `index: (code) text`, the index being the
/// slot number the verifier's log uses.
pub fn disasm(insns: &[Insn]) -> String {
    let width = insns.len().saturating_sub(1).to_string().len();
    let mut out = String::new();
    let mut pc = 0;
    while pc < insns.len() {
        let i = &insns[pc];
        let _ = write!(out, "{pc:>width$}: ");
        let next = insns.get(pc + 1);
        let _ = write_insn(&mut out, i, next);
        out.push('\n');
        pc += if i.is_ld_imm64() { 2 } else { 1 };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insn::{Alu, Cond, Reg, Size};

    fn text(i: Insn) -> String {
        i.to_string()
    }

    #[test]
    fn one_instruction_each_form() {
        use Reg::*;
        let cases = [
            (Insn::mov64_reg(R6, R1), "(bf) r6 = r1"),
            (Insn::mov32_imm(R7, 0), "(b4) w7 = 0"),
            (Insn::mov64_imm(R0, -1), "(b7) r0 = -1"),
            (Insn::alu64_imm(Alu::Add, R0, 14), "(07) r0 += 14"),
            (Insn::alu32_reg(Alu::Div, R7, R8), "(3c) w7 /= w8"),
            (Insn::alu32_imm(Alu::Lsh, R8, 2), "(64) w8 <<= 2"),
            (Insn::alu32_imm(Alu::Arsh, R1, 3), "(c4) w1 s>>= 3"),
            (Insn::neg32(R7), "(84) w7 = -w7"),
            (Insn::neg64(R7), "(87) r7 = -r7"),
            (Insn::to_be(R7, 16), "(dc) r7 = be16 r7"),
            (Insn::to_le(R7, 32), "(d4) r7 = le32 r7"),
            (
                Insn::load(Size::W, R9, R6, 76),
                "(61) r9 = *(u32 *)(r6 +76)",
            ),
            (
                Insn::load(Size::H, R7, R9, 12),
                "(69) r7 = *(u16 *)(r9 +12)",
            ),
            (
                Insn::store(Size::W, R10, -64, R7),
                "(63) *(u32 *)(r10 -64) = r7",
            ),
            (
                Insn::store_imm(Size::W, R10, -4, 0),
                "(62) *(u32 *)(r10 -4) = 0",
            ),
            (Insn::ld_abs(Size::H, 12), "(28) r0 = *(u16 *)skb[12]"),
            (
                Insn::ld_ind(Size::B, R1, 14),
                "(50) r0 = *(u8 *)skb[r1 + 14]",
            ),
            (
                Insn::jmp_reg(Cond::Gt, R0, R5, 7),
                "(2d) if r0 > r5 goto pc+7",
            ),
            (
                Insn::jmp32_imm(Cond::Eq, R7, 0x800, -2),
                "(16) if w7 == 0x800 goto pc-2",
            ),
            (
                Insn::jmp32_imm(Cond::Set, R7, 0x1fff, 1),
                "(46) if w7 & 0x1fff goto pc+1",
            ),
            (
                Insn::jmp_imm(Cond::Sle, R1, 0, 1),
                "(d5) if r1 s<= 0x0 goto pc+1",
            ),
            (Insn::ja(3), "(05) goto pc+3"),
            (Insn::ja32(70000), "(06) gotol pc+70000"),
            (Insn::may_goto(9), "(e5) may_goto pc+9"),
            (Insn::call(39), "(85) call bpf_skb_pull_data#39"),
            (Insn::call(1000), "(85) call #1000"),
            (Insn::exit(), "(95) exit"),
            (
                Insn::new(0xff, 1, 2, 3, 4),
                "(ff) invalid: dst=1 src=2 off=3 imm=4",
            ),
        ];
        for (i, want) in cases {
            assert_eq!(text(i), want, "{i:?}");
        }
    }

    #[test]
    fn listing_joins_ld_imm64() {
        let mut p = Vec::new();
        p.extend(Insn::ld_imm64(Reg::R1, 0x1_0000_0002));
        p.extend(Insn::ld_map_fd(Reg::R2, 5));
        p.push(Insn::exit());
        assert_eq!(
            disasm(&p),
            "0: (18) r1 = 0x100000002\n2: (18) r2 = map[fd:5]\n4: (95) exit\n"
        );
    }
}
