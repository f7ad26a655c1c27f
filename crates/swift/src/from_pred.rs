//! The "BPF-friendly" API: a tcpdump expression, lowered to a `Pred`, mapped to passes — without
//! optimisation beyond what keeps the meaning, wherever Swift can express it.
//!
//! The `Pred` is put in disjunctive normal form: negations are pushed down to the tests (De
//! Morgan), `and` distributes over `or`, operands keep their order, so the passes come in the
//! order the expression would try them. Each test becomes one instruction: direct addressing for
//! absolute offsets, L1 for offsets after an IPv4 header, SIMD operands for sets of values
//! (several instructions when a set has more values than lanes). Two peepholes make the power
//! instructions of the paper, keeping the order of reads: `src port ∈ S or dst port ∈ S` becomes
//! one `PortEither`, and the run "IPv4, protocol P, not a later fragment" one `Ip4ProtoNoFrag`
//! (followed by a port set, one `Ip4ProtoPorts`). Consecutive passes that share a prefix become
//! parent and child for hierarchical execution.
//!
//! What Swift cannot express is an error that names it: arithmetic (`expr` relations),
//! headers at run-time offsets (after `mpls`, `pppoes`, `geneve`), Linux ancillary data
//! (`inbound`, `ifindex`), `protochain`, masked order comparisons, and expressions whose normal
//! form exceeds [`MAX_PASSES`] passes.

use std::fmt;

use netsift_lang::Pred;
use netsift_lang::pred::{ArithOp, Base, Cmp, Field, Loc, Node, NodeId, RelOp, Test, Val};

use crate::build::FilterSpec;
use crate::isa::{Inst, Mode, Op};

/// The most passes an expression may expand to.
pub const MAX_PASSES: usize = 512;

/// Why an expression cannot be run by Swift.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Swift cannot express this filter: {}", self.0)
    }
}

impl std::error::Error for Unsupported {}

type Dnf = Vec<Vec<Inst>>;

/// Maps `pred` to passes.
pub fn from_pred(pred: &Pred) -> Result<FilterSpec, Unsupported> {
    let dnf = dnf(pred, pred.root(), false)?;
    let mut spec = FilterSpec::new();
    if dnf.len() == 1 && dnf[0].is_empty() {
        // Always true: no pass at all (the empty filter accepts everything).
        return Ok(spec);
    }
    if dnf.is_empty() {
        // Never true: one pass that never holds (an empty operand set).
        spec.pass(vec![Inst::new(Op::Eq8, Mode::D, 0)]);
        return Ok(spec);
    }
    // A hopeless pass may go when a pass met before it (the first pass, which every packet
    // meets) or right after it reads, in its first instruction, the bytes its own first
    // instruction reads: a packet too short for them gets 0 either way.
    let covers = |a: Option<&Inst>, b: Option<&Inst>| match (
        a.and_then(fixed_bytes),
        b.and_then(fixed_bytes),
    ) {
        (Some((a0, a1)), Some((b0, b1))) => a0 <= b0 && b1 <= a1,
        _ => false,
    };
    let mut kept: Vec<Vec<Inst>> = Vec::with_capacity(dnf.len());
    for (k, p) in dnf.iter().enumerate() {
        let first = kept.first().and_then(|q| q.first());
        let next = dnf.get(k + 1).and_then(|q| q.first());
        let covered = covers(first, p.first()) || covers(next, p.first());
        if !(covered && hopeless(p)) {
            kept.push(p.clone());
        }
    }
    let passes: Vec<Vec<Inst>> = kept
        .into_iter()
        .map(|p| {
            let p = peephole(p);
            if p.is_empty() {
                vec![Inst::new(Op::Nop, Mode::D, 0)]
            } else {
                p
            }
        })
        .collect();
    for (k, p) in passes.iter().enumerate() {
        // The earlier pass sharing the longest prefix (most often the one just before).
        let parent = (k.saturating_sub(8)..k)
            .map(|j| (j, common_prefix(&passes[j], p)))
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(j, n)| (n, j))
            .map(|(j, _)| j);
        match parent {
            Some(j) => spec.child(j, p.clone()),
            None => spec.pass(p.clone()),
        };
    }
    Ok(spec)
}

/// Whether a pass can never hold and dropping it changes no verdict: instruction `j` requires
/// another value of the very field that the first instruction requires (`ip and ip6`), and every
/// instruction in between reads only bytes the first one read (so none of them can abort once the
/// first has held).
fn hopeless(p: &[Inst]) -> bool {
    let Some(first) = p.first() else {
        return false;
    };
    let eq_field = |i: &Inst| -> Option<(u16, u32, Vec<u32>)> {
        let w = match i.op()? {
            Op::Eq8 => 1,
            Op::Eq16 => 2,
            Op::Eq32 => 4,
            _ => return None,
        };
        (i.mode() == Mode::D && !i.negated()).then(|| (i.offset(), w, i.values()))
    };
    let Some((off, w, vals)) = eq_field(first) else {
        return false;
    };
    let end = u32::from(off) + w;
    for i in &p[1..] {
        if let Some((o, w2, v2)) = eq_field(i)
            && o == off
            && w2 == w
        {
            return !v2.iter().any(|x| vals.contains(x));
        }
        // Instructions before the contradiction must read within the first one's bytes.
        let within = i.mode() == Mode::D
            && match i.op() {
                Some(Op::Eq8 | Op::Meq8 | Op::Rng8 | Op::Set8) => u32::from(i.offset()) < end,
                Some(Op::Eq16 | Op::Meq16 | Op::Rng16 | Op::Set16) => {
                    u32::from(i.offset()) + 2 <= end
                }
                Some(Op::Eq32 | Op::Meq32 | Op::Rng32 | Op::Set32) => {
                    u32::from(i.offset()) + 4 <= end
                }
                Some(Op::Nop | Op::LenRng) => true,
                _ => false,
            };
        if !within {
            return false;
        }
    }
    false
}

/// The bytes `[start, end)` a direct-addressed fixed-width test reads.
fn fixed_bytes(i: &Inst) -> Option<(u32, u32)> {
    let w = match i.op()? {
        Op::Eq8 | Op::Meq8 | Op::Rng8 | Op::Set8 => 1,
        Op::Eq16 | Op::Meq16 | Op::Rng16 | Op::Set16 => 2,
        Op::Eq32 | Op::Meq32 | Op::Rng32 | Op::Set32 => 4,
        _ => return None,
    };
    (i.mode() == Mode::D).then(|| (u32::from(i.offset()), u32::from(i.offset()) + w))
}

fn common_prefix(a: &[Inst], b: &[Inst]) -> usize {
    a.iter()
        .zip(b)
        .take_while(|(x, y)| x.identity() == y.identity())
        .count()
}

fn too_big() -> Unsupported {
    Unsupported(format!("its normal form has more than {MAX_PASSES} passes"))
}

fn dnf(pred: &Pred, id: NodeId, neg: bool) -> Result<Dnf, Unsupported> {
    match pred.node(id) {
        Node::Const(c) => Ok(if *c != neg { vec![vec![]] } else { vec![] }),
        Node::Not(x) => dnf(pred, *x, !neg),
        Node::Test(t) => {
            let alts = test_insts(t)?;
            Ok(if neg {
                vec![alts.into_iter().map(|i| i.negate(true)).collect()]
            } else {
                alts.into_iter().map(|i| vec![i]).collect()
            })
        }
        Node::Or(ops) => {
            if let Some(i) = port_pair(pred, ops) {
                return Ok(if neg {
                    vec![vec![i.negate(true)]]
                } else {
                    vec![vec![i]]
                });
            }
            if neg {
                product(pred, ops, true)
            } else {
                union(pred, ops, false)
            }
        }
        Node::And(ops) => {
            if neg {
                guarded_negation(pred, ops)
            } else {
                product(pred, ops, false)
            }
        }
        Node::Relation(a, op, b) => {
            let op = match op {
                RelOp::Gt => ">",
                RelOp::Ge => ">=",
                RelOp::Eq => "=",
            };
            Err(Unsupported(format!(
                "arithmetic (`{} {op} {}`): Swift instructions compare packet fields with constants",
                val(a),
                val(b)
            )))
        }
        Node::Special(s) => Err(Unsupported(format!(
            "{s:?} (protochain, or headers located at run time)"
        ))),
    }
}

/// A relation's operand, written as in the filter language (absolute offsets).
fn val(v: &Val) -> String {
    match v {
        Val::Const(c) => c.to_string(),
        Val::Len => "len".into(),
        Val::Neg(a) => format!("-{}", val(a)),
        Val::Load { base, index, size } => {
            let at = match base {
                Base::Abs(0) => val(index),
                Base::Abs(b) => format!("{b} + {}", val(index)),
                Base::Ipv4Payload(nl) => format!("ip4 payload after [{nl}] + {}", val(index)),
                Base::Var(..) | Base::VarIpv4Payload(..) => {
                    format!("(run-time offset) + {}", val(index))
                }
            };
            format!("pkt[{at}:{size}]")
        }
        Val::Bin(op, a, b) => {
            let o = match op {
                ArithOp::Add => "+",
                ArithOp::Sub => "-",
                ArithOp::Mul => "*",
                ArithOp::Div => "/",
                ArithOp::Mod => "%",
                ArithOp::And => "&",
                ArithOp::Or => "|",
                ArithOp::Xor => "^",
                ArithOp::Shl => "<<",
                ArithOp::Shr => ">>",
            };
            format!("({} {o} {})", val(a), val(b))
        }
    }
}

fn union(pred: &Pred, ops: &[NodeId], neg: bool) -> Result<Dnf, Unsupported> {
    let mut out = Vec::new();
    for &o in ops {
        out.extend(dnf(pred, o, neg)?);
        if out.len() > MAX_PASSES {
            return Err(too_big());
        }
    }
    Ok(out)
}

/// `not (o1 and o2 and …)` as `not o1 or (o1 and not o2) or (o1 and o2 and not o3) …`: the
/// compiled filter tests `o_k` only on packets where `o1 … o_(k-1)` held, and `o_k` may read
/// bytes that are missing from packets where they did not (`not (ip6 and port 1)` reads the
/// IPv6 ports only of IPv6 packets). Unguarded, `not o_k` would read them on every packet and
/// reject a short one outright, even when another pass accepts it.
fn guarded_negation(pred: &Pred, ops: &[NodeId]) -> Result<Dnf, Unsupported> {
    let mut out: Dnf = Vec::new();
    let mut held: Dnf = vec![vec![]];
    for (k, &o) in ops.iter().enumerate() {
        out.extend(cross(&held, &dnf(pred, o, true)?)?);
        if out.len() > MAX_PASSES {
            return Err(too_big());
        }
        if k + 1 < ops.len() {
            held = cross(&held, &dnf(pred, o, false)?)?;
            if held.is_empty() {
                break;
            }
        }
    }
    Ok(out)
}

/// The DNF of `a and b`.
fn cross(a: &Dnf, b: &Dnf) -> Result<Dnf, Unsupported> {
    if a.len().saturating_mul(b.len()) > MAX_PASSES {
        return Err(too_big());
    }
    let mut out = Vec::with_capacity(a.len() * b.len());
    for x in a {
        for y in b {
            let mut p = x.clone();
            p.extend_from_slice(y);
            out.push(p);
        }
    }
    Ok(out)
}

fn product(pred: &Pred, ops: &[NodeId], neg: bool) -> Result<Dnf, Unsupported> {
    let mut acc: Dnf = vec![vec![]];
    for &o in ops {
        let d = dnf(pred, o, neg)?;
        if acc.len().saturating_mul(d.len()) > MAX_PASSES {
            return Err(too_big());
        }
        let mut next = Vec::with_capacity(acc.len() * d.len());
        for a in &acc {
            for b in &d {
                let mut p = a.clone();
                p.extend_from_slice(b);
                next.push(p);
            }
        }
        acc = next;
        if acc.is_empty() {
            break;
        }
    }
    Ok(acc)
}

/// `src port ∈ S or dst port ∈ S` after the same IPv4 header, as one instruction.
fn port_pair(pred: &Pred, ops: &[NodeId]) -> Option<Inst> {
    let [a, b] = ops else {
        return None;
    };
    let (Node::Test(ta), Node::Test(tb)) = (pred.node(*a), pred.node(*b)) else {
        return None;
    };
    let l1 = |t: &Test| match t.field {
        Field::Packet {
            loc: Loc::Ipv4Payload { nl, off },
            size: 2,
        } if t.mask == u32::MAX && nl <= 255 => Some((nl, off)),
        _ => None,
    };
    let ((nla, 0), (nlb, 2)) = (l1(ta)?, l1(tb)?) else {
        return None;
    };
    if nla != nlb || ta.cmp != tb.cmp {
        return None;
    }
    let values: Vec<u32> = match &ta.cmp {
        Cmp::Eq(v) => vec![*v],
        Cmp::OneOf(vs) => vs.to_vec(),
        _ => return None,
    };
    let mut i = Inst::new(Op::PortEither, Mode::L1, 0).with_nl(nla as u8);
    for v in values {
        i.add_value(v).ok()?;
    }
    Some(i)
}

/// The instructions for one test: alternatives whose OR is the test (one, unless a set of
/// values needs more than one instruction's lanes).
fn test_insts(t: &Test) -> Result<Vec<Inst>, Unsupported> {
    let (mode, offset, nl, size) = match t.field {
        Field::WireLen => return len_insts(t),
        Field::Ancillary { .. } => {
            return Err(Unsupported(
                "Linux ancillary data (inbound, outbound, ifindex): Swift reads the packet bytes"
                    .into(),
            ));
        }
        Field::Packet { loc, size } => match loc {
            Loc::Abs(k) => (Mode::D, k, 0, size),
            Loc::Ipv4Payload { nl, off } if nl <= 255 => (Mode::L1, off, nl as u8, size),
            Loc::Ipv4Payload { nl, .. } => {
                return Err(Unsupported(format!(
                    "an IPv4 header at offset {nl} (L1 addressing reaches 255)"
                )));
            }
            Loc::Var { .. } | Loc::VarIpv4Payload { .. } => {
                return Err(Unsupported(
                    "a header at a run-time offset (after mpls, pppoes, geneve or a variable link header)".into(),
                ));
            }
        },
    };
    let offset = u16::try_from(offset)
        .map_err(|_| Unsupported(format!("offset {offset} (Swift offsets are 16-bit)")))?;
    let width = |ops: [Op; 3]| match size {
        1 => Ok(ops[0]),
        2 => Ok(ops[1]),
        4 => Ok(ops[2]),
        _ => Err(Unsupported(format!("a {size}-byte field"))),
    };
    let make = |op: Op| {
        let i = Inst::new(op, mode, offset);
        if matches!(mode, Mode::L1 | Mode::L2) {
            i.with_nl(nl)
        } else {
            i
        }
    };
    let masked = t.mask != u32::MAX;
    let max = match size {
        1 => 0xff,
        2 => 0xffff,
        _ => u32::MAX,
    };
    let sets = |values: &[u32]| -> Result<Vec<Inst>, Unsupported> {
        let op = if masked {
            width([Op::Meq8, Op::Meq16, Op::Meq32])?
        } else {
            width([Op::Eq8, Op::Eq16, Op::Eq32])?
        };
        let mut out = Vec::new();
        let mut cur = make(op);
        if masked {
            cur.set_param(0, t.mask);
        }
        let fresh = cur;
        for &v in values {
            if cur.add_value(v).is_err() {
                out.push(cur);
                cur = fresh;
                cur.add_value(v)
                    .map_err(|_| Unsupported("an operand that fits no lane".into()))?;
            }
        }
        out.push(cur);
        Ok(out)
    };
    let range = |lo: u32, hi: u32| -> Result<Vec<Inst>, Unsupported> {
        if masked {
            return Err(Unsupported("an order comparison of a masked field".into()));
        }
        let mut i = make(width([Op::Rng8, Op::Rng16, Op::Rng32])?).with_count(2);
        i.set_param(0, lo);
        i.set_param(1, hi);
        Ok(vec![i])
    };
    match &t.cmp {
        Cmp::Eq(v) => sets(&[*v]),
        Cmp::OneOf(vs) => sets(vs),
        Cmp::Range(lo, hi) => range(*lo, *hi),
        Cmp::Gt(v) if *v >= max => Ok(vec![make(width([Op::Eq8, Op::Eq16, Op::Eq32])?)]),
        Cmp::Gt(v) => range(v + 1, max),
        Cmp::Ge(v) => range(*v, max),
        Cmp::Bits(b) => {
            let mut i = make(width([Op::Set8, Op::Set16, Op::Set32])?).with_count(1);
            i.set_param(0, b & t.mask);
            Ok(vec![i])
        }
    }
}

fn len_insts(t: &Test) -> Result<Vec<Inst>, Unsupported> {
    if t.mask != u32::MAX {
        return Err(Unsupported("arithmetic on `len`".into()));
    }
    let mk = |ranges: &[(u32, u32)]| {
        let mut i = Inst::new(Op::LenRng, Mode::D, 0).with_count(2 * ranges.len());
        for (k, &(lo, hi)) in ranges.iter().enumerate() {
            i.set_param(2 * k, lo);
            i.set_param(2 * k + 1, hi);
        }
        i
    };
    Ok(match &t.cmp {
        Cmp::Eq(v) => vec![mk(&[(*v, *v)])],
        Cmp::OneOf(vs) => vs
            .chunks(3)
            .map(|c| mk(&c.iter().map(|&v| (v, v)).collect::<Vec<_>>()))
            .collect(),
        Cmp::Range(lo, hi) => vec![mk(&[(*lo, *hi)])],
        Cmp::Gt(v) if *v == u32::MAX => vec![mk(&[])],
        Cmp::Gt(v) => vec![mk(&[(v + 1, u32::MAX)])],
        Cmp::Ge(v) => vec![mk(&[(*v, u32::MAX)])],
        Cmp::Bits(_) => return Err(Unsupported("bit tests on `len`".into())),
    })
}

/// Power instructions from runs of simple ones, reads kept in order.
fn peephole(p: Vec<Inst>) -> Vec<Inst> {
    let mut out: Vec<Inst> = Vec::with_capacity(p.len());
    let mut k = 0;
    while k < p.len() {
        // EtherType IPv4 at nl-2, protocol set at nl+9, (not a later fragment at nl+6).
        if let Some((nl, protos)) = ip4_proto_at(&p[k..]) {
            let nofrag = p.get(k + 2).is_some_and(|f| is_not_fragment(f, nl));
            let op = if nofrag {
                Op::Ip4ProtoNoFrag
            } else {
                Op::Ip4Proto
            };
            let mut i = Inst::new(op, Mode::D, nl);
            for v in &protos {
                let _ = i.add_value(*v);
            }
            k += if nofrag { 3 } else { 2 };
            // Followed by both ports after the same header: one instruction.
            if nofrag
                && protos.len() == 1
                && let Some(ports) = p.get(k).filter(|q| {
                    q.op() == Some(Op::PortEither)
                        && q.mode() == Mode::L1
                        && q.p[6] == u32::from(nl)
                        && !q.negated()
                })
            {
                let mut j = Inst::new(Op::Ip4ProtoPorts, Mode::D, nl);
                j.set_param(0, protos[0]);
                if ports.values().iter().all(|&v| j.add_value(v).is_ok()) {
                    out.push(j);
                    k += 1;
                    continue;
                }
            }
            out.push(i);
            continue;
        }
        out.push(p[k]);
        k += 1;
    }
    out
}

/// `p[0]` is "EtherType 0x800 at nl-2" and `p[1]` "protocol byte at nl+9 in a set".
fn ip4_proto_at(p: &[Inst]) -> Option<(u16, Vec<u32>)> {
    let (a, b) = (p.first()?, p.get(1)?);
    let plain = |i: &Inst, op: Op| i.op() == Some(op) && i.mode() == Mode::D && !i.negated();
    if !plain(a, Op::Eq16) || a.values() != [0x800] || !plain(b, Op::Eq8) {
        return None;
    }
    let nl = a.offset().checked_add(2)?;
    (b.offset() == nl.checked_add(9)?).then(|| (nl, b.values()))
}

/// `f` is "not (16 bits at nl+6 & 0x1fff)".
fn is_not_fragment(f: &Inst, nl: u16) -> bool {
    f.op() == Some(Op::Set16)
        && f.mode() == Mode::D
        && f.negated()
        && f.offset() == nl + 6
        && f.p[0] == 0x1fff
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsift_lang::{Context, compile};
    use netsift_wire::LinkType;

    fn spec(expr: &str) -> Result<FilterSpec, Unsupported> {
        let pred = compile(expr, &Context::new(LinkType::ETHERNET)).unwrap();
        from_pred(&pred)
    }

    #[test]
    fn table5_filters_have_few_instructions() {
        assert!(spec("").unwrap().is_empty());
        assert_eq!(spec("ip").unwrap().len(), 1);
        // Each port a pass (libpcap tries them one by one), the IPv6 branches dropped under
        // `ip` (by lowering), "IPv4 TCP non-fragment with ports" one instruction that also
        // stands for the `ip` before it.
        let f5 = spec("ip and tcp port (ssh or http or imap or smtp or pop3 or ftp)").unwrap();
        assert_eq!(f5.passes.len(), 6, "{f5:?}");
        assert!(f5.passes.iter().all(|(p, _)| p.len() == 1), "{f5:?}");
    }

    #[test]
    fn what_swift_cannot_say_is_named() {
        assert!(
            spec("ip[2:2] - ((ip[0]&0xf)<<2) > 40")
                .unwrap_err()
                .0
                .contains("arithmetic")
        );
        assert!(spec("geneve and ip").is_err());
        assert!(spec("inbound").unwrap_err().0.contains("ancillary"));
    }
}
