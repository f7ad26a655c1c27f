//! The Swift instruction set: fixed 32-byte instructions (one 32-bit command, seven 32-bit
//! parameters), three addressing modes plus an IPv6- and VLAN-aware one, and the operation
//! families of the paper (test-equal, masked test-equal, range, multi-word compares, power
//! instructions), each with SIMD operand packing.
//!
//! # Command word
//!
//! | bits | field |
//! |---|---|
//! | 0–7 | opcode ([`Op`]) |
//! | 8–9 | addressing mode ([`Mode`]) |
//! | 10 | negate the test |
//! | 11 | "copied": identical to the same instruction of the parent pass (hierarchical execution) |
//! | 12–15 | operand count `n` (SIMD lanes in use) |
//! | 16–31 | offset (bytes) |
//!
//! In the L1 and L2 modes `P[6]` holds the offset of the IPv4 header (`nl`), so those
//! instructions carry at most six operands.
//!
//! # Addressing
//!
//! - **D** (direct): `offset` from the first byte of the packet.
//! - **L1** (after the network header): `nl + 4 * (p[nl] & 0xf) + offset` — the IPv4 payload, as
//!   libpcap's `tcp[…]` and `tcp port` compute it.
//! - **L2** (after the transport header): the L1 base plus the TCP header length
//!   (`4 * (p[L1 + 12] >> 4)`), then `offset`: the TCP payload.
//! - **L1A** (automatic, beyond the paper): VLAN tags (802.1Q, 802.1ad) after the Ethernet
//!   addresses are skipped; IPv4 gives the L1 base as above, IPv6 the 40-byte fixed header;
//!   any other EtherType makes the test false.
//!
//! # Results and short packets
//!
//! An instruction evaluates to true, false, or *abort* when a byte it needs is past the
//! captured length. Reads happen in a fixed order and a test stops at its first decisive read,
//! exactly like the classic BPF code of the same primitive, and an abort rejects the packet
//! outright, as a failed load does in BPF: so Swift gives libpcap's verdict on truncated packets
//! too. Negation flips true and false, never abort. Every instruction is safe on any packet.

use std::fmt;

/// Addressing modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Mode {
    /// Absolute offset.
    D = 0,
    /// After the IPv4 header at `P[6]`.
    L1 = 1,
    /// After the TCP header that follows the IPv4 header at `P[6]`.
    L2 = 2,
    /// After the network header, IPv4 or IPv6, VLAN tags skipped.
    L1A = 3,
}

/// Opcodes. Field widths 8, 16 and 32 bits; operands are lanes of `P`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
    /// Always true.
    Nop = 0,
    /// Byte equal to any operand.
    Eq8 = 1,
    /// 16-bit field equal to any operand.
    Eq16 = 2,
    /// 32-bit field equal to any operand.
    Eq32 = 3,
    /// `(byte & P[0])` equal to any of `P[1..n]`.
    Meq8 = 4,
    /// `(u16 & P[0])` equal to any of `P[1..n]`.
    Meq16 = 5,
    /// `(u32 & P[0])` equal to any of `P[1..n]`.
    Meq32 = 6,
    /// Byte within any range `[P[2i], P[2i+1]]`.
    Rng8 = 7,
    /// 16-bit field within any range (a port range).
    Rng16 = 8,
    /// 32-bit field within any range.
    Rng32 = 9,
    /// `byte & P[0] != 0`.
    Set8 = 10,
    /// `u16 & P[0] != 0`.
    Set16 = 11,
    /// `u32 & P[0] != 0`.
    Set32 = 12,
    /// Wire length within any range (`len`, `less`, `greater`).
    LenRng = 13,
    /// `n` consecutive 32-bit words equal to `P[0..n]` (payload content).
    Leq = 14,
    /// Up to three consecutive 32-bit words, each masked: pairs `(P[2i] mask, P[2i+1] value)`.
    LeqM = 15,
    /// Power: IPv4 (EtherType at `offset - 2`, IPv4 header at `offset`) with protocol in `P`.
    Ip4Proto = 16,
    /// Power: IPv4, not a later fragment, protocol in `P` ("IP, non-fragment, TCP/UDP").
    Ip4ProtoNoFrag = 17,
    /// Power: IPv6 (header at `offset`) with next header in `P`.
    Ip6Proto = 18,
    /// Power: 16-bit source (at L1 + offset) or destination (+2) in the set; two ports per
    /// operand, up to twelve ("tcp src or dst port …").
    PortEither = 19,
    /// Power: 32-bit source (at `offset`) or destination (`offset + 4`) in the set ("ip host …").
    HostEither = 20,
    /// Power: `src & P[0] == P[1]` and `dst & P[2] == P[3]` ("ip src and dst net").
    NetBoth = 21,
    /// Power: `src & P[0] == P[1]` or `dst & P[0] == P[1]` ("ip src or dst net").
    NetEither = 22,
    /// Power: IPv4 (header at `offset`), not a later fragment, protocol `P[0]`, and source or
    /// destination port in the set packed two per parameter in `P[1..7]` (up to twelve):
    /// `tcp port (a or b …)` for IPv4 in one instruction.
    Ip4ProtoPorts = 23,
}

impl Op {
    /// Every opcode, in numeric order.
    pub const ALL: [Op; 24] = [
        Op::Nop,
        Op::Eq8,
        Op::Eq16,
        Op::Eq32,
        Op::Meq8,
        Op::Meq16,
        Op::Meq32,
        Op::Rng8,
        Op::Rng16,
        Op::Rng32,
        Op::Set8,
        Op::Set16,
        Op::Set32,
        Op::LenRng,
        Op::Leq,
        Op::LeqM,
        Op::Ip4Proto,
        Op::Ip4ProtoNoFrag,
        Op::Ip6Proto,
        Op::PortEither,
        Op::HostEither,
        Op::NetBoth,
        Op::NetEither,
        Op::Ip4ProtoPorts,
    ];

    fn from_u8(b: u8) -> Option<Op> {
        Op::ALL.get(usize::from(b)).copied()
    }

    /// Operand lanes the opcode uses for values (ports pack two per parameter).
    fn lanes_per_param(self) -> usize {
        if matches!(self, Op::PortEither | Op::Ip4ProtoPorts) {
            2
        } else {
            1
        }
    }

    /// The first parameter holding values (after fixed parameters such as a mask).
    pub(crate) fn first_value_param(self) -> usize {
        match self {
            Op::Meq8 | Op::Meq16 | Op::Meq32 | Op::Ip4ProtoPorts => 1,
            _ => 0,
        }
    }
}

const NEG: u32 = 1 << 10;
const COPIED: u32 = 1 << 11;

/// One instruction: a command word and seven parameters (32 bytes, aligned to 32).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(32))]
pub struct Inst {
    /// Opcode, mode, flags, operand count, offset (see the module docs).
    pub cmd: u32,
    /// Parameters: operands, masks, ranges; `P[6]` is the IPv4 header offset in L1/L2 modes.
    pub p: [u32; 7],
}

impl fmt::Debug for Inst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl Inst {
    /// An instruction with no operands yet.
    pub fn new(op: Op, mode: Mode, offset: u16) -> Inst {
        Inst {
            cmd: u32::from(op as u8) | (u32::from(mode as u8) << 8) | (u32::from(offset) << 16),
            p: [0; 7],
        }
    }

    /// With the IPv4 header at `nl` (L1 and L2 modes).
    pub fn with_nl(mut self, nl: u8) -> Inst {
        self.p[6] = u32::from(nl);
        self
    }

    /// The opcode (`None` for an unknown byte written with `poke`, which evaluates as false).
    pub fn op(&self) -> Option<Op> {
        Op::from_u8(self.cmd as u8)
    }

    /// The addressing mode.
    pub fn mode(&self) -> Mode {
        match (self.cmd >> 8) & 3 {
            0 => Mode::D,
            1 => Mode::L1,
            2 => Mode::L2,
            _ => Mode::L1A,
        }
    }

    /// The offset field.
    pub fn offset(&self) -> u16 {
        (self.cmd >> 16) as u16
    }

    /// Operands in use.
    pub fn count(&self) -> usize {
        ((self.cmd >> 12) & 0xf) as usize
    }

    fn set_count(&mut self, n: usize) {
        self.cmd = (self.cmd & !(0xf << 12)) | ((n as u32 & 0xf) << 12);
    }

    /// Whether the test is negated.
    pub fn negated(&self) -> bool {
        self.cmd & NEG != 0
    }

    /// Negate (or not) the test.
    pub fn negate(mut self, yes: bool) -> Inst {
        if yes {
            self.cmd |= NEG;
        } else {
            self.cmd &= !NEG;
        }
        self
    }

    /// Whether the instruction is marked as a copy of its parent pass's.
    pub fn copied(&self) -> bool {
        self.cmd & COPIED != 0
    }

    pub(crate) fn set_copied(&mut self, yes: bool) {
        if yes {
            self.cmd |= COPIED;
        } else {
            self.cmd &= !COPIED;
        }
    }

    /// The instruction as compared for hierarchical execution (without the copied mark).
    pub(crate) fn identity(&self) -> (u32, [u32; 7]) {
        (self.cmd & !COPIED, self.p)
    }

    /// Parameters available for values (six in L1/L2 modes, where `P[6]` is `nl`).
    pub fn capacity(&self) -> usize {
        let params = match self.mode() {
            Mode::L1 | Mode::L2 => 6,
            _ => 7,
        };
        let op = self.op().unwrap_or(Op::Nop);
        (params - op.first_value_param()) * op.lanes_per_param()
    }

    /// Adds a value operand (SIMD lane); `Err` when the instruction is full. For `Meq*`, the
    /// mask is `P[0]` ([`Inst::set_param`]) and values follow it.
    pub fn add_value(&mut self, v: u32) -> Result<(), Full> {
        let n = self.count();
        if n >= self.capacity() {
            return Err(Full);
        }
        let op = self.op().unwrap_or(Op::Nop);
        let first = op.first_value_param();
        if op.lanes_per_param() == 2 {
            let word = first + n / 2;
            let shift = (n % 2) * 16;
            self.p[word] = (self.p[word] & !(0xffff << shift)) | ((v & 0xffff) << shift);
        } else {
            self.p[first + n] = v;
        }
        self.set_count(n + 1);
        self.fill_unused();
        Ok(())
    }

    /// Removes a value operand (the first lane equal to `v`); returns whether one was there.
    pub fn del_value(&mut self, v: u32) -> bool {
        let vals = self.values();
        let Some(i) = vals.iter().position(|&x| x == v) else {
            return false;
        };
        let mut rest = vals;
        rest.remove(i);
        self.set_count(0);
        for x in rest {
            let _ = self.add_value(x);
        }
        self.fill_unused();
        true
    }

    /// The value operands in use.
    pub fn values(&self) -> Vec<u32> {
        let n = self.count();
        let op = self.op().unwrap_or(Op::Nop);
        let first = op.first_value_param();
        if op.lanes_per_param() == 2 {
            (0..n)
                .map(|i| (self.p[first + i / 2] >> ((i % 2) * 16)) & 0xffff)
                .collect()
        } else {
            self.p[first..(first + n).min(7)].to_vec()
        }
    }

    /// Sets parameter `i` directly (masks, ranges, `nl`).
    pub fn set_param(&mut self, i: usize, v: u32) {
        if i < 7 {
            self.p[i] = v;
        }
    }

    /// Sets the operand count directly (for fixed-layout ops: ranges, masked words).
    pub fn with_count(mut self, n: usize) -> Inst {
        self.set_count(n);
        self
    }

    /// Unused value lanes repeat the first value, so that evaluation can compare every lane
    /// without looking at the count (the SIMD form).
    fn fill_unused(&mut self) {
        let n = self.count();
        let Some(op) = self.op() else {
            return;
        };
        if n == 0
            || !matches!(
                op,
                Op::Eq8
                    | Op::Eq16
                    | Op::Eq32
                    | Op::Meq8
                    | Op::Meq16
                    | Op::Meq32
                    | Op::HostEither
                    | Op::Ip4Proto
                    | Op::Ip4ProtoNoFrag
                    | Op::Ip6Proto
                    | Op::PortEither
                    | Op::Ip4ProtoPorts
            )
        {
            return;
        }
        let first = op.first_value_param();
        let cap = self.capacity();
        if op.lanes_per_param() == 2 {
            let v0 = self.p[first] & 0xffff;
            for i in n..cap {
                let shift = (i % 2) * 16;
                let w = first + i / 2;
                self.p[w] = (self.p[w] & !(0xffff << shift)) | (v0 << shift);
            }
        } else {
            let v0 = self.p[first];
            for i in n..cap {
                self.p[first + i] = v0;
            }
        }
    }
}

/// An instruction has no free operand lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no free operand in this instruction")
    }
}

impl fmt::Display for Inst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self
            .op()
            .map_or_else(|| format!("op{}", self.cmd as u8), |o| format!("{o:?}"));
        let mode = match self.mode() {
            Mode::D => "D".to_string(),
            Mode::L1 => format!("L1@{}", self.p[6]),
            Mode::L2 => format!("L2@{}", self.p[6]),
            Mode::L1A => "L1A".to_string(),
        };
        write!(
            f,
            "{}{}{} {}+{} {:x?}",
            if self.copied() { "^" } else { "" },
            if self.negated() { "!" } else { "" },
            name,
            mode,
            self.offset(),
            self.values()
        )?;
        if matches!(
            self.op(),
            Some(
                Op::Meq8
                    | Op::Meq16
                    | Op::Meq32
                    | Op::Ip4ProtoPorts
                    | Op::Rng8
                    | Op::Rng16
                    | Op::Rng32
                    | Op::Set8
                    | Op::Set16
                    | Op::Set32
                    | Op::LenRng
                    | Op::LeqM
                    | Op::NetBoth
                    | Op::NetEither
            )
        ) {
            write!(f, " p={:x?}", &self.p[..self.count().clamp(1, 7)])?;
        }
        Ok(())
    }
}

/// The outcome of one instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The test holds.
    True,
    /// The test does not hold.
    False,
    /// A byte the test needs is past the captured length: the packet is rejected.
    Abort,
}

#[inline(always)]
fn b8(p: &[u8], o: usize) -> Option<u32> {
    p.get(o).map(|&b| u32::from(b))
}

#[inline(always)]
fn b16(p: &[u8], o: usize) -> Option<u32> {
    let b = p.get(o..o.checked_add(2)?)?;
    Some(u32::from(u16::from_be_bytes([b[0], b[1]])))
}

#[inline(always)]
fn b32(p: &[u8], o: usize) -> Option<u32> {
    let b = p.get(o..o.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Any of the first `L` lanes equal to `v` (every lane compared: unused lanes repeat lane 0).
#[inline(always)]
fn any<const L: usize>(lanes: &[u32; 7], v: u32) -> bool {
    let mut r = false;
    for &x in &lanes[..L] {
        r |= x == v;
    }
    r
}

/// Any of the packed 16-bit lanes of `words` equal to `v`.
#[inline(always)]
fn any16(words: &[u32], v: u32) -> bool {
    let mut r = false;
    for &w in words {
        r |= (w & 0xffff) == v;
        r |= (w >> 16) == v;
    }
    r
}

/// The start of the L1 layer in mode L1 (IPv4 header at `nl`).
#[inline(always)]
fn l1_ipv4(p: &[u8], nl: usize) -> Option<usize> {
    Some(nl + 4 * (b8(p, nl)? & 0xf) as usize)
}

/// Where the addressed field starts, or `Err(outcome)` when addressing already decided.
#[inline(always)]
fn base(inst: &Inst, p: &[u8]) -> Result<usize, Outcome> {
    let off = usize::from(inst.offset());
    match inst.mode() {
        Mode::D => Ok(off),
        Mode::L1 => l1_ipv4(p, inst.p[6] as usize)
            .map(|b| b + off)
            .ok_or(Outcome::Abort),
        Mode::L2 => {
            let l1 = l1_ipv4(p, inst.p[6] as usize).ok_or(Outcome::Abort)?;
            let thl = b8(p, l1 + 12).ok_or(Outcome::Abort)? >> 4;
            Ok(l1 + 4 * thl as usize + off)
        }
        Mode::L1A => {
            let (ty, nl) = ethertype(p).ok_or(Outcome::Abort)?;
            match ty {
                0x0800 => l1_ipv4(p, nl).map(|b| b + off).ok_or(Outcome::Abort),
                0x86dd => Ok(nl + 40 + off),
                _ => Err(Outcome::False),
            }
        }
    }
}

/// The EtherType after up to two VLAN tags, and the offset of the network header.
#[inline(always)]
fn ethertype(p: &[u8]) -> Option<(u32, usize)> {
    let mut at = 12;
    for _ in 0..2 {
        let t = b16(p, at)?;
        if !matches!(t, 0x8100 | 0x88a8 | 0x9100) {
            return Some((t, at + 2));
        }
        at += 4;
    }
    Some((b16(p, at)?, at + 2))
}

#[inline(always)]
fn to(o: Option<bool>) -> Outcome {
    match o {
        Some(true) => Outcome::True,
        Some(false) => Outcome::False,
        None => Outcome::Abort,
    }
}

/// Evaluates one instruction (with its negation) on a packet.
#[inline]
pub fn eval(inst: &Inst, p: &[u8], wire_len: u32) -> Outcome {
    let r = eval_plain(inst, p, wire_len);
    if inst.negated() {
        match r {
            Outcome::True => Outcome::False,
            Outcome::False => Outcome::True,
            Outcome::Abort => Outcome::Abort,
        }
    } else {
        r
    }
}

#[inline(always)]
fn eval_plain(inst: &Inst, p: &[u8], wire_len: u32) -> Outcome {
    let Some(op) = inst.op() else {
        return Outcome::False;
    };
    let q = &inst.p;
    let n = inst.count();
    // L1/L2 keep nl in P[6]: six lanes there, seven in the other modes.
    let wide = !matches!(inst.mode(), Mode::L1 | Mode::L2);
    let at = match op {
        Op::Nop | Op::LenRng => 0,
        _ => match base(inst, p) {
            Ok(b) => b,
            Err(o) => return o,
        },
    };
    match op {
        Op::Nop => Outcome::True,
        Op::Eq8 | Op::Eq16 | Op::Eq32 => {
            let v = match op {
                Op::Eq8 => b8(p, at),
                Op::Eq16 => b16(p, at),
                _ => b32(p, at),
            };
            to(v.map(|v| n > 0 && if wide { any::<7>(q, v) } else { any::<6>(q, v) }))
        }
        Op::Meq8 | Op::Meq16 | Op::Meq32 => {
            let v = match op {
                Op::Meq8 => b8(p, at),
                Op::Meq16 => b16(p, at),
                _ => b32(p, at),
            };
            to(v.map(|v| {
                let m = v & q[0];
                let mut r = false;
                let lanes = if wide { 6 } else { 5 };
                for &x in &q[1..1 + lanes] {
                    r |= x == m;
                }
                n > 0 && r
            }))
        }
        Op::Rng8 | Op::Rng16 | Op::Rng32 => {
            let v = match op {
                Op::Rng8 => b8(p, at),
                Op::Rng16 => b16(p, at),
                _ => b32(p, at),
            };
            to(v.map(|v| (0..n / 2).any(|i| q[2 * i] <= v && v <= q[2 * i + 1])))
        }
        Op::Set8 => to(b8(p, at).map(|v| v & q[0] != 0)),
        Op::Set16 => to(b16(p, at).map(|v| v & q[0] != 0)),
        Op::Set32 => to(b32(p, at).map(|v| v & q[0] != 0)),
        Op::LenRng => to(Some(
            (0..n / 2).any(|i| q[2 * i] <= wire_len && wire_len <= q[2 * i + 1]),
        )),
        Op::Leq => {
            for (i, &w) in q[..n.min(7)].iter().enumerate() {
                match b32(p, at + 4 * i) {
                    None => return Outcome::Abort,
                    Some(v) if v != w => return Outcome::False,
                    Some(_) => {}
                }
            }
            Outcome::True
        }
        Op::LeqM => {
            for i in 0..(n / 2).min(3) {
                match b32(p, at + 4 * i) {
                    None => return Outcome::Abort,
                    Some(v) if v & q[2 * i] != q[2 * i + 1] => return Outcome::False,
                    Some(_) => {}
                }
            }
            Outcome::True
        }
        Op::Ip4Proto | Op::Ip4ProtoNoFrag => {
            // EtherType, then (non-fragment), then protocol: the order of libpcap's code for
            // `ip and tcp` reads the protocol first, then the fragment field.
            let Some(t) = b16(p, at.wrapping_sub(2)) else {
                return Outcome::Abort;
            };
            if t != 0x0800 {
                return Outcome::False;
            }
            let Some(proto) = b8(p, at + 9) else {
                return Outcome::Abort;
            };
            if !(n > 0 && any::<7>(q, proto)) {
                return Outcome::False;
            }
            if op == Op::Ip4ProtoNoFrag {
                match b16(p, at + 6) {
                    None => return Outcome::Abort,
                    Some(f) if f & 0x1fff != 0 => return Outcome::False,
                    Some(_) => {}
                }
            }
            Outcome::True
        }
        Op::Ip6Proto => {
            let Some(t) = b16(p, at.wrapping_sub(2)) else {
                return Outcome::Abort;
            };
            if t != 0x86dd {
                return Outcome::False;
            }
            to(b8(p, at + 6).map(|nh| n > 0 && any::<7>(q, nh)))
        }
        Op::PortEither => {
            let words = if wide { &q[..7] } else { &q[..6] };
            let Some(s) = b16(p, at) else {
                return Outcome::Abort;
            };
            if n > 0 && any16(words, s) {
                return Outcome::True;
            }
            to(b16(p, at + 2).map(|d| n > 0 && any16(words, d)))
        }
        Op::Ip4ProtoPorts => {
            let Some(t) = b16(p, at.wrapping_sub(2)) else {
                return Outcome::Abort;
            };
            if t != 0x0800 {
                return Outcome::False;
            }
            match b8(p, at + 9) {
                None => return Outcome::Abort,
                Some(proto) if proto != q[0] => return Outcome::False,
                Some(_) => {}
            }
            match b16(p, at + 6) {
                None => return Outcome::Abort,
                Some(f) if f & 0x1fff != 0 => return Outcome::False,
                Some(_) => {}
            }
            let Some(l1) = l1_ipv4(p, at) else {
                return Outcome::Abort;
            };
            let words = &q[1..7];
            let Some(s) = b16(p, l1) else {
                return Outcome::Abort;
            };
            if n > 0 && any16(words, s) {
                return Outcome::True;
            }
            to(b16(p, l1 + 2).map(|d| n > 0 && any16(words, d)))
        }
        Op::HostEither => {
            let Some(s) = b32(p, at) else {
                return Outcome::Abort;
            };
            if n > 0 && any::<7>(q, s) {
                return Outcome::True;
            }
            to(b32(p, at + 4).map(|d| n > 0 && any::<7>(q, d)))
        }
        Op::NetBoth => {
            let Some(s) = b32(p, at) else {
                return Outcome::Abort;
            };
            if s & q[0] != q[1] {
                return Outcome::False;
            }
            to(b32(p, at + 4).map(|d| d & q[2] == q[3]))
        }
        Op::NetEither => {
            let Some(s) = b32(p, at) else {
                return Outcome::Abort;
            };
            if s & q[0] == q[1] {
                return Outcome::True;
            }
            to(b32(p, at + 4).map(|d| d & q[0] == q[1]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_are_32_bytes() {
        assert_eq!(std::mem::size_of::<Inst>(), 32);
        assert_eq!(std::mem::align_of::<Inst>(), 32);
    }

    #[test]
    fn simd_lanes_fill_and_empty() {
        let mut i = Inst::new(Op::Eq16, Mode::D, 12);
        for v in [0x800, 0x86dd, 0x806] {
            i.add_value(v).unwrap();
        }
        assert_eq!(i.values(), [0x800, 0x86dd, 0x806]);
        let pkt = |t: u16| {
            let mut p = vec![0u8; 14];
            p[12..14].copy_from_slice(&t.to_be_bytes());
            p
        };
        assert_eq!(eval(&i, &pkt(0x806), 14), Outcome::True);
        assert_eq!(eval(&i, &pkt(0x8100), 14), Outcome::False);
        assert_eq!(eval(&i, &pkt(0x806)[..13], 14), Outcome::Abort);
        assert!(i.del_value(0x86dd));
        assert_eq!(i.values(), [0x800, 0x806]);
        assert_eq!(eval(&i, &pkt(0x86dd), 14), Outcome::False);
        for v in 0..4 {
            i.add_value(v).unwrap();
        }
        assert_eq!(i.count(), 6);
        i.add_value(9).unwrap();
        assert_eq!(i.add_value(10), Err(Full));
        // Ports pack two per parameter, twelve in L1 mode.
        let mut p = Inst::new(Op::PortEither, Mode::L1, 0).with_nl(14);
        for v in 1..=12 {
            p.add_value(v * 1000).unwrap();
        }
        assert_eq!(p.add_value(1), Err(Full));
        assert_eq!(p.values().len(), 12);
        assert_eq!(p.p[6], 14);
    }

    #[test]
    fn negation_keeps_aborts() {
        let i = Inst::new(Op::Eq8, Mode::D, 5).negate(true);
        let mut j = i;
        j.add_value(1).unwrap();
        assert_eq!(eval(&j, &[0; 6], 6), Outcome::True);
        assert_eq!(eval(&j, &[0, 0, 0, 0, 0, 1], 6), Outcome::False);
        assert_eq!(eval(&j, &[0; 5], 6), Outcome::Abort);
    }

    #[test]
    fn l1a_finds_the_transport_layer_behind_vlan_tags_and_ipv6() {
        let mut i = Inst::new(Op::PortEither, Mode::L1A, 0);
        i.add_value(21).unwrap();
        // Ethernet, 802.1Q, IPv4 (IHL 5), TCP dport 21.
        let mut p = vec![0u8; 18 + 20 + 4];
        p[12..14].copy_from_slice(&[0x81, 0]);
        p[16..18].copy_from_slice(&[8, 0]);
        p[18] = 0x45;
        p[38..42].copy_from_slice(&[0x30, 0x39, 0, 21]);
        assert_eq!(eval(&i, &p, 0), Outcome::True);
        // IPv6 without tags.
        let mut q = vec![0u8; 14 + 40 + 4];
        q[12..14].copy_from_slice(&[0x86, 0xdd]);
        q[54..58].copy_from_slice(&[0, 21, 0x30, 0x39]);
        assert_eq!(eval(&i, &q, 0), Outcome::True);
        // ARP: false, not abort.
        let mut r = vec![0u8; 42];
        r[12..14].copy_from_slice(&[8, 6]);
        assert_eq!(eval(&i, &r, 0), Outcome::False);
    }
}
