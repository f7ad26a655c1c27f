//! The executable form of an instruction: decoded once when a pass is published, so that the
//! filtering loop dispatches on one dense tag and finds every operand in place. It has the
//! semantics of [`crate::isa::eval`] exactly (a unit test runs both on random instructions and
//! packets).

use crate::isa::{Inst, Mode, Op, Outcome};

/// What to run: the opcode, with the addressing mode folded in for the generic tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A run of negated `HostEither` on the same fields, fused: neither address in the union
    /// of their sets (see [`fuse`]).
    HostSet,
    Nop,
    /// Field tests with direct addressing: width, test.
    D(u8, Test),
    /// Field tests after the IPv4 header at `nl`.
    L1(u8, Test),
    /// IPv4 at `off` with a protocol among the lanes; `true`: not a later fragment.
    Ip4Proto(bool),
    /// IPv4 at `off`, not a later fragment, protocol `mask`, a port among `ports`.
    Ip4ProtoPorts,
    /// Either port (after the IPv4 header at `nl`) among `ports`.
    PortEitherL1,
    /// Either 32-bit address (at `off`, `off + 4`) among the lanes.
    HostEither,
    /// `src & m0 == v0 && dst & m1 == v1`.
    NetBoth,
    /// `src & m0 == v0 || dst & m0 == v0`.
    NetEither,
    /// Anything else: run the reference evaluator on the instruction.
    Other,
    /// Two instructions fused (`parts`): the EtherType test for IPv4 followed by a negated
    /// `Ip4ProtoPorts` (`ip and not tcp port …`, filter 6 of the paper's Table 5), run as one
    /// evaluator without a second indirect call.
    Ip4ThenNotPorts,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Test {
    Eq,
    Meq,
}

/// A decoded instruction.
#[derive(Clone, Debug)]
pub(crate) struct Exec {
    /// The evaluator specialised for `kind` (chosen once; the filtering loop calls it).
    run: fn(&Exec, &[u8], u32) -> Outcome,
    kind: Kind,
    neg: bool,
    pub(crate) copied: bool,
    off: usize,
    nl: usize,
    mask: u32,
    /// Value lanes; unused ones repeat the first.
    vals: [u32; 7],
    /// Whether there is at least one value.
    any: bool,
    /// Port lanes (16-bit), unused ones repeating the first.
    ports: [u16; 16],
    /// The parameters as written (for the net tests).
    p: [u32; 7],
    /// HostSet: the union of the sets, sorted, and the instructions it stands for (run one by
    /// one on packets too short for both fields).
    set: Box<[u32]>,
    parts: Box<[Exec]>,
    inst: Inst,
}

impl Exec {
    pub(crate) fn new(i: &Inst) -> Exec {
        let op = i.op();
        // The lanes exactly as the reference evaluator reads them: P[0..7] (P[0..6] in the L1
        // and L2 modes, where P[6] is nl) for equality, P[1..7] (P[1..6]) after a mask; a
        // missing seventh lane repeats the first, which changes no result.
        let wide = !matches!(i.mode(), Mode::L1 | Mode::L2);
        let masked = matches!(op, Some(Op::Meq8 | Op::Meq16 | Op::Meq32));
        let vals = {
            let src: &[u32] = match (masked, wide) {
                (false, true) => &i.p[..7],
                (false, false) => &i.p[..6],
                (true, true) => &i.p[1..7],
                (true, false) => &i.p[1..6],
            };
            let mut a = [src[0]; 7];
            a[..src.len()].copy_from_slice(src);
            a
        };
        let width = |o: Op| match o {
            Op::Eq8 | Op::Meq8 => 1,
            Op::Eq16 | Op::Meq16 => 2,
            _ => 4,
        };
        let kind = match (op, i.mode()) {
            (Some(Op::Nop), _) => Kind::Nop,
            (Some(o @ (Op::Eq8 | Op::Eq16 | Op::Eq32)), Mode::D) => Kind::D(width(o), Test::Eq),
            (Some(o @ (Op::Meq8 | Op::Meq16 | Op::Meq32)), Mode::D) => Kind::D(width(o), Test::Meq),
            (Some(o @ (Op::Eq8 | Op::Eq16 | Op::Eq32)), Mode::L1) => Kind::L1(width(o), Test::Eq),
            (Some(o @ (Op::Meq8 | Op::Meq16 | Op::Meq32)), Mode::L1) => {
                Kind::L1(width(o), Test::Meq)
            }
            (Some(Op::Ip4Proto), Mode::D) => Kind::Ip4Proto(false),
            (Some(Op::Ip4ProtoNoFrag), Mode::D) => Kind::Ip4Proto(true),
            (Some(Op::Ip4ProtoPorts), Mode::D) => Kind::Ip4ProtoPorts,
            (Some(Op::PortEither), Mode::L1) => Kind::PortEitherL1,
            (Some(Op::HostEither), Mode::D) => Kind::HostEither,
            (Some(Op::NetBoth), Mode::D) => Kind::NetBoth,
            (Some(Op::NetEither), Mode::D) => Kind::NetEither,
            _ => Kind::Other,
        };
        // Port lanes as the reference reads them: P[1..7] for Ip4ProtoPorts, P[0..6] for
        // PortEither in L1 mode, two per parameter.
        let port_words: &[u32] = match kind {
            Kind::Ip4ProtoPorts => &i.p[1..7],
            Kind::PortEitherL1 => &i.p[..6],
            _ => &[],
        };
        let mut ports = [0u16; 16];
        for (k, w) in port_words.iter().enumerate() {
            ports[2 * k] = *w as u16;
            ports[2 * k + 1] = (*w >> 16) as u16;
        }
        for k in 2 * port_words.len()..16 {
            ports[k] = ports[0];
        }
        // Ip4Proto keeps its protocol lanes in `vals` (P[0..7]).
        let vals = match kind {
            Kind::Ip4Proto(_) | Kind::HostEither => i.p,
            _ => vals,
        };
        Exec {
            run: pick(kind, i.negated()),
            kind,
            neg: i.negated(),
            copied: i.copied(),
            off: usize::from(i.offset()),
            nl: i.p[6] as usize,
            mask: i.p[0],
            vals,
            any: i.count() > 0,
            ports,
            p: i.p,
            set: Box::new([]),
            parts: Box::new([]),
            inst: *i,
        }
    }

    /// Runs the instruction (through its specialised evaluator).
    #[inline(always)]
    pub(crate) fn eval(&self, p: &[u8], wire_len: u32) -> Outcome {
        (self.run)(self, p, wire_len)
    }

    /// The evaluator for every kind (what the specialised ones are instances of).
    #[inline(always)]
    fn eval_generic(&self, p: &[u8], wire_len: u32) -> Outcome {
        let r = match self.kind {
            Kind::Nop => Outcome::True,
            Kind::Other => return crate::isa::eval(&self.inst, p, wire_len),
            Kind::Ip4ThenNotPorts => return self.parts_one_by_one(p, wire_len),
            Kind::HostSet => {
                let (Some(s), Some(d)) = (be32(p, self.off), be32(p, self.off + 4)) else {
                    return self.parts_one_by_one(p, wire_len);
                };
                // Every negated part holds iff neither address is in any part's set.
                return bool_outcome(!(member(&self.set, s) || member(&self.set, d)));
            }
            Kind::D(w, t) => self.field(p, w, t, self.off),
            Kind::L1(w, t) => match p.get(self.nl) {
                Some(&b) => self.field(p, w, t, self.nl + 4 * usize::from(b & 0xf) + self.off),
                None => return Outcome::Abort,
            },
            Kind::Ip4Proto(nofrag) => self.ip4_proto(p, nofrag, |_| Some(true)),
            Kind::Ip4ProtoPorts => self.ip4_proto(p, true, |(p, at)| {
                let l1 = p.get(at).map(|&b| at + 4 * usize::from(b & 0xf))?;
                self.either16(p, l1)
            }),
            Kind::PortEitherL1 => match p.get(self.nl) {
                Some(&b) => match self.either16(p, self.nl + 4 * usize::from(b & 0xf) + self.off) {
                    Some(x) => bool_outcome(x),
                    None => return Outcome::Abort,
                },
                None => return Outcome::Abort,
            },
            Kind::HostEither => match be32(p, self.off) {
                None => return Outcome::Abort,
                Some(s) if self.any && lanes(&self.vals, s) => Outcome::True,
                Some(_) => match be32(p, self.off + 4) {
                    None => return Outcome::Abort,
                    Some(d) => bool_outcome(self.any && lanes(&self.vals, d)),
                },
            },
            Kind::NetBoth => match be32(p, self.off) {
                None => return Outcome::Abort,
                Some(s) if s & self.p[0] != self.p[1] => Outcome::False,
                Some(_) => match be32(p, self.off + 4) {
                    None => return Outcome::Abort,
                    Some(d) => bool_outcome(d & self.p[2] == self.p[3]),
                },
            },
            Kind::NetEither => match be32(p, self.off) {
                None => return Outcome::Abort,
                Some(s) if s & self.p[0] == self.p[1] => Outcome::True,
                Some(_) => match be32(p, self.off + 4) {
                    None => return Outcome::Abort,
                    Some(d) => bool_outcome(d & self.p[0] == self.p[1]),
                },
            },
        };
        match (r, self.neg) {
            (Outcome::True, true) => Outcome::False,
            (Outcome::False, true) => Outcome::True,
            (r, _) => r,
        }
    }

    /// A fused run on a packet too short for one of its fields: the instructions one by one,
    /// so that reads (and aborts) happen exactly as unfused.
    #[cold]
    #[inline(never)]
    fn parts_one_by_one(&self, p: &[u8], wire_len: u32) -> Outcome {
        // (Each part runs through its own specialised evaluator.)
        for e in self.parts.iter() {
            match e.eval(p, wire_len) {
                Outcome::True => {}
                r => return r,
            }
        }
        Outcome::True
    }

    #[inline(always)]
    fn field(&self, p: &[u8], w: u8, test: Test, at: usize) -> Outcome {
        let v = match w {
            1 => match p.get(at) {
                Some(&b) => u32::from(b),
                None => return Outcome::Abort,
            },
            2 => match be16(p, at) {
                Some(v) => v,
                None => return Outcome::Abort,
            },
            _ => match be32(p, at) {
                Some(v) => v,
                None => return Outcome::Abort,
            },
        };
        let v = if test == Test::Meq { v & self.mask } else { v };
        bool_outcome(self.any && lanes(&self.vals, v))
    }

    /// IPv4 (EtherType at off-2), protocol, (fragment), then `rest`.
    #[inline(always)]
    fn ip4_proto(
        &self,
        p: &[u8],
        nofrag: bool,
        rest: impl Fn((&[u8], usize)) -> Option<bool>,
    ) -> Outcome {
        let at = self.off;
        match at.checked_sub(2).and_then(|o| be16(p, o)) {
            None => return Outcome::Abort,
            Some(0x0800) => {}
            Some(_) => return Outcome::False,
        }
        let proto_ok = match p.get(at + 9) {
            None => return Outcome::Abort,
            Some(&b) => match self.kind {
                Kind::Ip4ProtoPorts => u32::from(b) == self.p[0],
                _ => self.any && lanes(&self.vals, u32::from(b)),
            },
        };
        if !proto_ok {
            return Outcome::False;
        }
        if nofrag {
            match be16(p, at + 6) {
                None => return Outcome::Abort,
                Some(f) if f & 0x1fff != 0 => return Outcome::False,
                Some(_) => {}
            }
        }
        match rest((p, at)) {
            None => Outcome::Abort,
            Some(x) => bool_outcome(x),
        }
    }

    /// The 16-bit fields at `at` and `at + 2`: the first among the ports, else the second;
    /// `None` when a needed byte is missing.
    #[inline(always)]
    fn either16(&self, p: &[u8], at: usize) -> Option<bool> {
        let s = be16(p, at)? as u16;
        if self.any && ports(&self.ports, s) {
            return Some(true);
        }
        let d = be16(p, at + 2)? as u16;
        Some(self.any && ports(&self.ports, d))
    }
}

#[inline(always)]
fn bool_outcome(b: bool) -> Outcome {
    if b { Outcome::True } else { Outcome::False }
}

#[inline(always)]
fn be16(p: &[u8], at: usize) -> Option<u32> {
    let b = p.get(at..at.checked_add(2)?)?;
    Some(u32::from(u16::from_be_bytes([b[0], b[1]])))
}

#[inline(always)]
fn be32(p: &[u8], at: usize) -> Option<u32> {
    let b = p.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Any of the 16 port lanes equal to `v` (two 8-lane compares).
#[inline(always)]
fn ports(lanes: &[u16; 16], v: u16) -> bool {
    let mut r = false;
    for &x in lanes {
        r |= x == v;
    }
    r
}

/// One evaluator per kind and negation: `eval_generic` with both made constant, so that each
/// instance is a small straight function.
fn pick(kind: Kind, neg: bool) -> fn(&Exec, &[u8], u32) -> Outcome {
    fn generic(e: &Exec, p: &[u8], w: u32) -> Outcome {
        e.eval_generic(p, w)
    }
    match kind {
        Kind::D(1, Test::Eq) => d_field::<1, false>(neg),
        Kind::D(2, Test::Eq) => d_field::<2, false>(neg),
        Kind::D(4, Test::Eq) => d_field::<4, false>(neg),
        Kind::D(1, Test::Meq) => d_field::<1, true>(neg),
        Kind::D(2, Test::Meq) => d_field::<2, true>(neg),
        Kind::D(_, Test::Meq) => d_field::<4, true>(neg),
        Kind::D(_, Test::Eq) => d_field::<4, false>(neg),
        Kind::Ip4ProtoPorts => {
            if neg {
                ip4_proto_ports::<true>
            } else {
                ip4_proto_ports::<false>
            }
        }
        Kind::HostSet => host_set,
        Kind::HostEither => {
            if neg {
                host_either::<true>
            } else {
                host_either::<false>
            }
        }
        _ => generic,
    }
}

/// `Ip4ProtoPorts`.
fn ip4_proto_ports<const NEG: bool>(e: &Exec, p: &[u8], _w: u32) -> Outcome {
    let at = e.off;
    let r = (|| {
        let t = be16(p, at.checked_sub(2)?)?;
        if t != 0x0800 {
            return Some(false);
        }
        if u32::from(*p.get(at + 9)?) != e.p[0] {
            return Some(false);
        }
        if be16(p, at + 6)? & 0x1fff != 0 {
            return Some(false);
        }
        let l1 = at + 4 * usize::from(*p.get(at)? & 0xf);
        let s = be16(p, l1)? as u16;
        if e.any && ports(&e.ports, s) {
            return Some(true);
        }
        let d = be16(p, l1 + 2)? as u16;
        Some(e.any && ports(&e.ports, d))
    })();
    match r {
        None => Outcome::Abort,
        Some(x) => bool_outcome(x != NEG),
    }
}

/// `HostEither`.
fn host_either<const NEG: bool>(e: &Exec, p: &[u8], _w: u32) -> Outcome {
    let r = (|| {
        let s = be32(p, e.off)?;
        if e.any && lanes(&e.vals, s) {
            return Some(true);
        }
        let d = be32(p, e.off + 4)?;
        Some(e.any && lanes(&e.vals, d))
    })();
    match r {
        None => Outcome::Abort,
        Some(x) => bool_outcome(x != NEG),
    }
}

/// A fused run of negated `HostEither` (see [`fuse`]).
fn host_set(e: &Exec, p: &[u8], w: u32) -> Outcome {
    match (be32(p, e.off), be32(p, e.off + 4)) {
        (Some(s), Some(d)) => bool_outcome(!(member(&e.set, s) || member(&e.set, d))),
        _ => e.parts_one_by_one(p, w),
    }
}

/// A direct-addressed field test of width `W`, masked when `M`.
fn d_field<const W: usize, const M: bool>(neg: bool) -> fn(&Exec, &[u8], u32) -> Outcome {
    fn f<const W: usize, const M: bool, const NEG: bool>(e: &Exec, p: &[u8], _w: u32) -> Outcome {
        let Some(b) = p.get(e.off..e.off + W) else {
            return Outcome::Abort;
        };
        let v = match W {
            1 => u32::from(b[0]),
            2 => u32::from(u16::from_be_bytes([b[0], b[1]])),
            _ => u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        };
        let v = if M { v & e.mask } else { v };
        let hit = e.any && lanes(&e.vals, v);
        if hit != NEG {
            Outcome::True
        } else {
            Outcome::False
        }
    }
    if neg {
        f::<W, M, true>
    } else {
        f::<W, M, false>
    }
}

/// Fuses runs of instructions whose combined test is simpler to run at once (the decoded
/// form of a pass run without hierarchical bookkeeping): a run of two or more negated
/// `HostEither` on the same fields ("not host A and not host B …") becomes one membership test
/// over the union of their sets. On a packet that holds both fields the results are the same;
/// on a shorter one the parts run one by one.
pub(crate) fn fuse(execs: &[Exec]) -> Vec<Exec> {
    let mut out = Vec::with_capacity(execs.len());
    let mut k = 0;
    while k < execs.len() {
        let e = &execs[k];
        // `ip` then `not (tcp|udp … port …)` on the same IPv4 header: one evaluator.
        if e.kind == Kind::D(2, Test::Eq)
            && !e.neg
            && e.off == 12
            && e.vals.iter().all(|&v| v == 0x0800)
            && e.any
            && let Some(n) = execs.get(k + 1)
            && n.kind == Kind::Ip4ProtoPorts
            && n.neg
            && n.off == 14
        {
            let mut f = e.clone();
            f.kind = Kind::Ip4ThenNotPorts;
            f.run = ip4_then_not_ports;
            f.parts = vec![e.clone(), n.clone()].into_boxed_slice();
            out.push(f);
            k += 2;
            continue;
        }
        let is_part = |x: &Exec| x.kind == Kind::HostEither && x.neg && x.off == e.off && x.any;
        if is_part(e) {
            let mut j = k + 1;
            while j < execs.len() && is_part(&execs[j]) {
                j += 1;
            }
            if j - k >= 2 {
                let mut vals: Vec<u32> = Vec::new();
                for x in &execs[k..j] {
                    for &v in x.inst.values().iter() {
                        if !vals.contains(&v) {
                            vals.push(v);
                        }
                    }
                }
                vals.sort_unstable();
                let mut f = e.clone();
                f.kind = Kind::HostSet;
                f.neg = false;
                f.run = pick(Kind::HostSet, false);
                f.set = vals.into_boxed_slice();
                f.parts = execs[k..j].to_vec().into_boxed_slice();
                out.push(f);
                k = j;
                continue;
            }
        }
        out.push(e.clone());
        k += 1;
    }
    out
}

/// A fused `Ip4ThenNotPorts`: the EtherType at 12 is IPv4 (else the pass fails; too short
/// aborts, as the first part would), then the negated `Ip4ProtoPorts` of the second part.
fn ip4_then_not_ports(e: &Exec, p: &[u8], w: u32) -> Outcome {
    match be16(p, 12) {
        None => Outcome::Abort,
        Some(0x0800) => ip4_proto_ports::<true>(&e.parts[1], p, w),
        Some(_) => Outcome::False,
    }
}

/// Whether `v` is in the sorted `set`: outside its range first (the usual case, one predictable
/// branch), else a binary search.
#[inline(always)]
fn member(set: &[u32], v: u32) -> bool {
    match (set.first(), set.last()) {
        (Some(&lo), Some(&hi)) if lo <= v && v <= hi => set.binary_search(&v).is_ok(),
        _ => false,
    }
}

/// Any lane equal to `v` (all seven compared at once; unused lanes repeat the first value).
#[inline(always)]
fn lanes(vals: &[u32; 7], v: u32) -> bool {
    let mut r = false;
    for &x in vals {
        r |= x == v;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift generator for the randomised tests.
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }
    use crate::isa::eval;

    #[test]
    fn decoded_form_matches_the_reference() {
        let mut next = xorshift(0x1234_5678_9abc_def0u64);
        for _ in 0..200_000 {
            let op = Op::ALL[(next() % Op::ALL.len() as u64) as usize];
            let mode = [Mode::D, Mode::L1, Mode::L2, Mode::L1A][(next() % 4) as usize];
            let mut i = Inst::new(op, mode, (next() % 40) as u16).negate(next() & 1 == 0);
            for k in 0..7 {
                if next() % 3 == 0 {
                    i.set_param(k, (next() % 8) as u32);
                }
            }
            if matches!(mode, Mode::L1 | Mode::L2) {
                i.set_param(6, (next() % 20) as u32);
            }
            i = i.with_count((next() % 8) as usize);
            for _ in 0..(next() % 4) {
                let _ = i.add_value((next() % 8) as u32);
            }
            let len = (next() % 64) as usize;
            let pkt: Vec<u8> = (0..len)
                .map(|_| (next() % 8) as u8 | if next() % 5 == 0 { 0x40 } else { 0 })
                .collect();
            let e = Exec::new(&i);
            assert_eq!(
                e.eval(&pkt, len as u32),
                eval(&i, &pkt, len as u32),
                "{i} on {pkt:?}"
            );
        }
    }

    #[test]
    fn fused_host_runs_match_their_parts() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..20_000 {
            let k = 1 + (next() % 5) as usize;
            let insts: Vec<Inst> = (0..k)
                .map(|_| {
                    let mut i = Inst::new(Op::HostEither, Mode::D, 2).negate(true);
                    for _ in 0..1 + next() % 7 {
                        let _ = i.add_value((next() % 16) as u32);
                    }
                    i
                })
                .collect();
            let execs: Vec<Exec> = insts.iter().map(Exec::new).collect();
            let fused = fuse(&execs);
            let len = (next() % 12) as usize;
            let pkt: Vec<u8> = (0..len)
                .map(|i| if i % 4 == 3 { (next() % 16) as u8 } else { 0 })
                .collect();
            let run = |es: &[Exec]| {
                for e in es {
                    match e.eval(&pkt, 0) {
                        Outcome::True => {}
                        r => return r,
                    }
                }
                Outcome::True
            };
            assert_eq!(run(&fused), run(&execs), "{insts:?} on {pkt:?}");
        }
    }

    #[test]
    fn fused_ip_then_not_ports_matches_its_parts() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
        let ip = crate::build::ether_type(&[0x0800]);
        let mut fused_seen = 0;
        for _ in 0..50_000 {
            let proto = [6u8, 17, 132][(next() % 3) as usize];
            let ports: Vec<u16> = (0..1 + next() % 4).map(|_| (next() % 4) as u16).collect();
            let insts = vec![
                ip,
                crate::build::not(crate::build::ip4_proto_ports(proto, &ports)),
            ];
            let execs: Vec<Exec> = insts.iter().map(Exec::new).collect();
            let fused = fuse(&execs);
            fused_seen += usize::from(fused.len() == 1);
            // Frames that are IPv4 or not, any protocol, fragments, IHL 5..7, ports 0..3,
            // cut anywhere.
            let mut pkt = vec![0u8; 14 + 28 + 4];
            pkt[12..14].copy_from_slice(if next() % 4 == 0 {
                &[0x86, 0xdd]
            } else {
                &[8, 0]
            });
            pkt[14] = 0x45 + (next() % 3) as u8;
            pkt[20] = if next() % 5 == 0 { 0x20 } else { 0 };
            pkt[21] = (next() % 2) as u8;
            pkt[23] = [6u8, 17, 132, 1][(next() % 4) as usize];
            let l1 = 14 + 4 * usize::from(pkt[14] & 0xf);
            pkt[l1 + 1] = (next() % 4) as u8;
            pkt[l1 + 3] = (next() % 4) as u8;
            pkt.truncate((next() % (pkt.len() as u64 + 1)) as usize);
            let run = |es: &[Exec]| {
                for e in es {
                    match e.eval(&pkt, 0) {
                        Outcome::True => {}
                        r => return r,
                    }
                }
                Outcome::True
            };
            assert_eq!(run(&fused), run(&execs), "{insts:?} on {pkt:?}");
        }
        assert!(fused_seen > 40_000, "the pair was not fused");
    }
}
