//! The object-oriented builder (the paper's *ooswift*): instructions for common primitives,
//! and filters assembled pass by pass.
//!
//! ```
//! use netsift_swift::build::{self, FilterSpec};
//!
//! // ip src net 192.168.254.0/24 and tcp dst port 23 (the paper's Table 3)
//! let mut f = FilterSpec::new();
//! f.pass(vec![
//!     build::ip4_proto_nofrag(&[6]),
//!     build::ip4_src_net(0xc0a8_fe00, 0xffff_ff00),
//!     build::tcp_udp_dst_port(&[23]),
//! ]);
//! let (mut writer, mut reader) = netsift_swift::open(96);
//! f.load(&mut writer).unwrap();
//! assert_eq!(reader.run(&[0; 20], 20), 0);
//! ```

use crate::filter::{PassId, UpdateError, Writer};
use crate::isa::{Inst, Mode, Op};

/// Ethernet: the network header follows the 14-byte MAC header.
pub const ETH_NL: u8 = 14;

fn with_values(mut i: Inst, values: impl IntoIterator<Item = u32>) -> Inst {
    for v in values {
        // Callers keep within the lanes; extra values are dropped (documented per function).
        let _ = i.add_value(v);
    }
    i
}

/// EtherType (at 12) is one of `types` (up to 7).
pub fn ether_type(types: &[u16]) -> Inst {
    with_values(
        Inst::new(Op::Eq16, Mode::D, 12),
        types.iter().map(|&t| u32::from(t)),
    )
}

/// IPv4 with protocol in `protos` (up to 7).
pub fn ip4_proto(protos: &[u8]) -> Inst {
    with_values(
        Inst::new(Op::Ip4Proto, Mode::D, u16::from(ETH_NL)),
        protos.iter().map(|&p| u32::from(p)),
    )
}

/// IPv4, not a later fragment, protocol in `protos` (up to 7): the paper's
/// `EtherIP_TCP_NonFrag`.
pub fn ip4_proto_nofrag(protos: &[u8]) -> Inst {
    with_values(
        Inst::new(Op::Ip4ProtoNoFrag, Mode::D, u16::from(ETH_NL)),
        protos.iter().map(|&p| u32::from(p)),
    )
}

/// IPv4, not a later fragment, protocol `proto`, source or destination port in `ports` (up to
/// 10): `tcp port (a or b …)` for IPv4 in one instruction.
pub fn ip4_proto_ports(proto: u8, ports: &[u16]) -> Inst {
    let mut i = Inst::new(Op::Ip4ProtoPorts, Mode::D, u16::from(ETH_NL));
    i.set_param(0, u32::from(proto));
    with_values(i, ports.iter().map(|&p| u32::from(p)))
}

/// IPv6 with next header in `protos` (up to 7).
pub fn ip6_proto(protos: &[u8]) -> Inst {
    with_values(
        Inst::new(Op::Ip6Proto, Mode::D, u16::from(ETH_NL)),
        protos.iter().map(|&p| u32::from(p)),
    )
}

/// IPv4 source address under `mask` equals `net`.
pub fn ip4_src_net(net: u32, mask: u32) -> Inst {
    let mut i = Inst::new(Op::Meq32, Mode::D, 26);
    i.set_param(0, mask);
    with_values(i, [net & mask])
}

/// IPv4 destination address under `mask` equals `net`.
pub fn ip4_dst_net(net: u32, mask: u32) -> Inst {
    let mut i = Inst::new(Op::Meq32, Mode::D, 30);
    i.set_param(0, mask);
    with_values(i, [net & mask])
}

/// `ip src net S and dst net D` in one instruction.
pub fn ip4_net_both(src: u32, src_mask: u32, dst: u32, dst_mask: u32) -> Inst {
    let mut i = Inst::new(Op::NetBoth, Mode::D, 26).with_count(4);
    i.set_param(0, src_mask);
    i.set_param(1, src & src_mask);
    i.set_param(2, dst_mask);
    i.set_param(3, dst & dst_mask);
    i
}

/// `ip src or dst net N` in one instruction.
pub fn ip4_net_either(net: u32, mask: u32) -> Inst {
    let mut i = Inst::new(Op::NetEither, Mode::D, 26).with_count(2);
    i.set_param(0, mask);
    i.set_param(1, net & mask);
    i
}

/// Source or destination IPv4 address in `hosts` (up to 7 per instruction; more make several
/// instructions, to be ORed — or, negated, ANDed).
pub fn ip4_host_either(hosts: &[u32]) -> Vec<Inst> {
    hosts
        .chunks(7)
        .map(|c| with_values(Inst::new(Op::HostEither, Mode::D, 26), c.iter().copied()))
        .collect()
}

/// IPv4 source address in `hosts` (up to 7).
pub fn ip4_src_host(hosts: &[u32]) -> Inst {
    with_values(Inst::new(Op::Eq32, Mode::D, 26), hosts.iter().copied())
}

/// IPv4 destination address in `hosts` (up to 7).
pub fn ip4_dst_host(hosts: &[u32]) -> Inst {
    with_values(Inst::new(Op::Eq32, Mode::D, 30), hosts.iter().copied())
}

/// TCP/UDP source or destination port (after the IPv4 header) in `ports` (up to 12).
pub fn tcp_udp_port(ports: &[u16]) -> Inst {
    with_values(
        Inst::new(Op::PortEither, Mode::L1, 0).with_nl(ETH_NL),
        ports.iter().map(|&p| u32::from(p)),
    )
}

/// TCP/UDP destination port (after the IPv4 header) in `ports` (up to 6).
pub fn tcp_udp_dst_port(ports: &[u16]) -> Inst {
    with_values(
        Inst::new(Op::Eq16, Mode::L1, 2).with_nl(ETH_NL),
        ports.iter().map(|&p| u32::from(p)),
    )
}

/// TCP/UDP source port (after the IPv4 header) in `ports` (up to 6).
pub fn tcp_udp_src_port(ports: &[u16]) -> Inst {
    with_values(
        Inst::new(Op::Eq16, Mode::L1, 0).with_nl(ETH_NL),
        ports.iter().map(|&p| u32::from(p)),
    )
}

/// Source or destination port in `ports` (up to 14) after an IPv4 or IPv6 header, with or
/// without VLAN tags (beyond the paper).
pub fn any_port(ports: &[u16]) -> Inst {
    with_values(
        Inst::new(Op::PortEither, Mode::L1A, 0),
        ports.iter().map(|&p| u32::from(p)),
    )
}

/// Port range `[lo, hi]` on the source port (`dst` false) or destination port.
pub fn port_range(lo: u16, hi: u16, dst: bool) -> Inst {
    let mut i = Inst::new(Op::Rng16, Mode::L1, if dst { 2 } else { 0 })
        .with_nl(ETH_NL)
        .with_count(2);
    i.set_param(0, u32::from(lo));
    i.set_param(1, u32::from(hi));
    i
}

/// The TCP payload starts with `words` (big-endian 32-bit words, up to 6).
pub fn tcp_payload(words: &[u32]) -> Inst {
    let mut i = Inst::new(Op::Leq, Mode::L2, 0)
        .with_nl(ETH_NL)
        .with_count(words.len().min(6));
    for (k, &w) in words.iter().take(6).enumerate() {
        i.set_param(k, w);
    }
    i
}

/// Wire length in `[lo, hi]`.
pub fn len_range(lo: u32, hi: u32) -> Inst {
    let mut i = Inst::new(Op::LenRng, Mode::D, 0).with_count(2);
    i.set_param(0, lo);
    i.set_param(1, hi);
    i
}

/// Negated.
pub fn not(i: Inst) -> Inst {
    i.negate(!i.negated())
}

/// A filter in the making: passes, each optionally the copy of an earlier one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilterSpec {
    /// Passes: instructions, and the index of the pass they copy (hierarchical execution).
    pub passes: Vec<(Vec<Inst>, Option<usize>)>,
}

impl FilterSpec {
    /// An empty filter (accepts everything).
    pub fn new() -> FilterSpec {
        FilterSpec::default()
    }

    /// Adds a pass; returns its index.
    pub fn pass(&mut self, insts: Vec<Inst>) -> usize {
        self.passes.push((insts, None));
        self.passes.len() - 1
    }

    /// Adds a pass that copies pass `parent` and replaces its instructions by `insts`: the
    /// instructions equal to the parent's at the same index stay marked as copied.
    pub fn child(&mut self, parent: usize, insts: Vec<Inst>) -> usize {
        self.passes.push((insts, Some(parent)));
        self.passes.len() - 1
    }

    /// Instructions over all passes.
    pub fn len(&self) -> usize {
        self.passes.iter().map(|(p, _)| p.len()).sum()
    }

    /// Whether there is no pass.
    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }

    /// Appends the passes to a filter, returning their ids.
    pub fn load(&self, w: &mut Writer) -> Result<Vec<PassId>, UpdateError> {
        let mut ids: Vec<PassId> = Vec::with_capacity(self.passes.len());
        for (insts, parent) in &self.passes {
            let id = match parent.and_then(|p| ids.get(p).copied()) {
                Some(pid) => w.child_pass(pid, insts)?,
                None => w.new_pass(insts)?,
            };
            ids.push(id);
        }
        Ok(ids)
    }
}
