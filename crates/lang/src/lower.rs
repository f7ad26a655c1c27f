//! Lowering: from the syntax tree to a [`Pred`], with libpcap 1.10's meaning.
//!
//! Each primitive becomes the tests libpcap's code generator (`gencode.c`) produces for it, in
//! the same order, reading the same bytes — because a read past the captured length rejects
//! the packet, the order is part of the meaning. The notes in `docs/filter-language.md` list
//! every primitive; the comments here say where netsift follows a libpcap quirk on purpose.
//!
//! The lowering is stateful in the way libpcap's is: `vlan`, `mpls`, `pppoes` and `geneve`
//! move the offsets of the link-layer payload and network header **for everything that comes
//! after them in the expression**, whatever the `and`/`or`/`not` structure (`vlan or ip` tests
//! `ip` after a VLAN tag). The tree is walked left to right, which is the order in which
//! libpcap's parser reduces it.

use std::net::Ipv6Addr;

use netsift_wire::LinkType;

use crate::ast::{
    self, AddrType, Arith, ArithOp, ByteOp, Dir, Expr, ExprKind, Inherited, Other, Proto, RelOp,
    Value,
};
use crate::names;
use crate::pred::{
    self, Base, Builder, Cmp, Field, Loc, Node, NodeId, Pred, RadioHeader, Special, Val,
};
use crate::span::{Error, ErrorKind, Span};

/// How names are resolved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Resolve {
    /// Host names listed in `/etc/hosts` only (no network traffic); anything else is an
    /// error that suggests [`Resolve::System`].
    #[default]
    HostsFile,
    /// The system resolver (`getaddrinfo`), which may query DNS.
    System,
}

/// Where the packets a filter runs on come from, which changes a few meanings (as in libpcap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A live capture or no capture at all (libpcap's `pcap_open_dead`): `inbound`,
    /// `outbound` and `ifindex` use Linux ancillary data on link types without a direction
    /// field; NULL/LOOP `ip6` means AF_INET6 = 10.
    Live,
    /// A capture file: `inbound`/`outbound`/`ifindex` are errors where the link type has no
    /// such field; NULL/LOOP `ip6` means the BSD values 24, 28 and 30; NULL's family field is
    /// in the file's byte order (`swapped` when it differs from this machine's).
    Savefile {
        /// Whether the file's byte order differs from the host's.
        swapped: bool,
    },
}

/// The context of a compilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    /// The link type of the packets (pcap LINKTYPE value).
    pub link_type: LinkType,
    /// The snap length (the value `ret` returns for accepted packets).
    pub snaplen: u32,
    /// Live or savefile.
    pub origin: Origin,
    /// The IPv4 netmask for `ip broadcast`; `None` is unknown.
    pub netmask: Option<u32>,
    /// How host names are resolved.
    pub resolve: Resolve,
    /// Whether the predicate is for an optimising compiler (the default). Lowering then
    /// leaves out what the filter's own structure decides — a link-type test an enclosing
    /// `and` already made, the link-type test repeated for each direction of `src or dst` —
    /// tests libpcap's optimiser removes too. `false` (`-O0`) keeps every test libpcap's code
    /// generator emits, so that the unoptimised program reads as libpcap's.
    pub optimize: bool,
}

impl Context {
    /// A context for `link_type` with libpcap's defaults: snap length 262144, live, no
    /// netmask, host names from `/etc/hosts` only.
    pub fn new(link_type: LinkType) -> Context {
        Context {
            link_type,
            snaplen: 262_144,
            origin: Origin::Live,
            netmask: None,
            resolve: Resolve::HostsFile,
            optimize: true,
        }
    }
}

/// The link types the compiler supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lt {
    En10mb,
    Sll,
    Sll2,
    Raw,
    Ipv4,
    Ipv6,
    /// NULL and ENC (the address family in the capturing host's byte order).
    Null,
    Loop,
    /// PPP, PPP_PPPD, PPP_SERIAL, PPP_ETHER, and PPP inside PPPoE (after `pppoes`).
    Ppp,
    PppBsdos,
    /// Cisco HDLC.
    Chdlc,
    /// SLIP and BSD/OS SLIP.
    Slip,
    Ltalk,
    Frelay,
    /// The Juniper link types: every link-layer protocol test is the Juniper magic number
    /// (offsets as libpcap sets them, unset ones wrapping around).
    Juniper,
    /// 802.11, alone or after a radiotap, Prism, AVS or PPI header: variable offsets (see
    /// [`Special::LinkOffsets`]).
    Wlan,
    /// OpenBSD's pflog: a header of variable length (its first byte), the address family at
    /// offset 1.
    Pflog,
    /// ARCnet: one-byte addresses and protocol numbers.
    Arcnet,
    /// Sun raw ATM: a 4-byte header (direction and protocol, VPI, VCI), then LLC for
    /// LLC-encapsulated traffic.
    Sunatm,
    /// Solaris ipnet: the address family at offset 1.
    Ipnet,
    /// BACnet MS/TP: every protocol test is the frame's preamble; libpcap sets no payload
    /// offset, so network-layer fields are read where its unset offsets wrap around to.
    Bacnet,
    /// An 802.2 LLC header (with SNAP for Ethertypes) at the start of the link-layer payload:
    /// FDDI, Token Ring, IP-over-Fibre Channel, LLC-encapsulated and classical IP over ATM.
    Llc,
    /// A type field holding an Ethertype at `off_linktype` (libpcap's default case:
    /// Symantec firewall, Apple IP-over-IEEE 1394).
    Ethertype,
    /// A link type libpcap compiles for but whose link-layer protocol tests netsift's
    /// compiler does not make (yet), or that libpcap itself does not implement: only
    /// link-independent tests (`len`, `link[...]`, …) compile.
    Unfiltered,
}

/// The messages of libpcap 1.10.3's `gen_linktype` for link types it knows but cannot test
/// the protocol of, by DLT value.
fn not_implemented(dlt: u32) -> Option<&'static str> {
    Some(match dlt {
        182 => "Multi-link Frame Relay",
        144 => "IrDA",
        143 => "DOCSIS",
        139 | 140 => "MTP2",
        197 => "ERF",
        246 => "PFSYNC",
        177 => "LAPD",
        186 | 189 | 220 | 249 => "USB",
        187 | 201 => "Bluetooth",
        190 | 227 => "CAN",
        195 | 191 | 215 | 230 | 283 => "IEEE 802.15.4",
        193 => "IEEE 802.16",
        196 => "SITA",
        198 => "RAIF1",
        199 | 209 => "IPMB",
        202 => "AX.25",
        239 => "NFLOG",
        _ => return None,
    })
}

/// A link layer as libpcap's `init_linktype` lays it out: the compiler's view and the offsets
/// of the type field, the link-layer payload, the network layer and the network layer after
/// an 802.2 header without SNAP (`None`: libpcap's `OFFSET_NOT_SET`).
type Layout = (Lt, Option<u32>, Option<u32>, u32, u32);

/// libpcap 1.10.3's [`Layout`] for a DLT value; `None` for a link type libpcap does not
/// compile for.
fn layout(dlt: u32) -> Option<Layout> {
    const NOT_SET: u32 = u32::MAX;
    Some(match dlt {
        1 => (Lt::En10mb, Some(12), Some(14), 0, 3),
        113 => (Lt::Sll, Some(14), Some(16), 0, 0),
        276 => (Lt::Sll2, Some(0), Some(20), 0, 0),
        12 => (Lt::Raw, None, Some(0), 0, 0),
        228 => (Lt::Ipv4, None, Some(0), 0, 0),
        229 => (Lt::Ipv6, None, Some(0), 0, 0),
        0 => (Lt::Null, Some(0), Some(4), 0, 0),
        108 => (Lt::Loop, Some(0), Some(4), 0, 0),
        109 => (Lt::Null, Some(0), Some(12), 0, 0),
        9 | 166 | 50 => (Lt::Ppp, Some(2), Some(4), 0, 0),
        51 => (Lt::Ppp, Some(6), Some(8), 0, 0),
        104 | 112 => (Lt::Chdlc, Some(2), Some(4), 0, 0),
        16 => (Lt::PppBsdos, Some(5), Some(24), 0, 0),
        8 => (Lt::Slip, None, Some(16), 0, 0),
        15 => (Lt::Slip, None, Some(24), 0, 0),
        114 => (Lt::Ltalk, None, Some(0), 0, 0),
        107 => (Lt::Frelay, None, Some(0), 0, 0),
        131 | 130 | 134 | 179 | 181 | 180 => (Lt::Juniper, Some(4), Some(4), 0, NOT_SET),
        137 => (Lt::Juniper, Some(4), Some(4), 0, 10),
        135 => (Lt::Juniper, Some(8), Some(8), 0, 10),
        167 | 178 => (Lt::Juniper, Some(16), Some(14), 18, 21),
        168 => (Lt::Juniper, Some(4), Some(6), 0, NOT_SET),
        133 => (Lt::Juniper, Some(6), Some(12), 0, NOT_SET),
        132 => (Lt::Juniper, Some(6), None, NOT_SET, NOT_SET),
        164 => (Lt::Juniper, Some(12), Some(12), 0, NOT_SET),
        136 => (Lt::Juniper, Some(12), None, NOT_SET, NOT_SET),
        183 | 200 => (Lt::Juniper, Some(18), None, NOT_SET, NOT_SET),
        194 | 232 | 233 | 234 | 238 => (Lt::Juniper, Some(8), None, NOT_SET, NOT_SET),
        138 => (Lt::Ethertype, Some(16), Some(18), 0, 0),
        99 => (Lt::Ethertype, Some(6), Some(44), 0, 0),
        10 => (Lt::Llc, Some(13), Some(13), 8, 3),
        6 => (Lt::Llc, Some(14), Some(14), 8, 3),
        122 => (Lt::Llc, Some(16), Some(16), 8, 3),
        11 | 19 => (Lt::Llc, Some(0), Some(0), 8, 3),
        7 => (Lt::Arcnet, Some(2), Some(6), 0, 0),
        182 => (Lt::Unfiltered, None, Some(0), 4, 0),
        123 => (Lt::Sunatm, Some(4), Some(4), 8, 3),
        226 => (Lt::Ipnet, Some(1), Some(24), 0, NOT_SET),
        // Ethernet after a pseudo-header (and a preamble): see `Lower::new`.
        240 => (Lt::En10mb, Some(16), Some(18), 0, 3),
        241 => (Lt::En10mb, Some(24), Some(26), 0, 3),
        165 => (Lt::Bacnet, None, None, NOT_SET, NOT_SET),
        129 => (Lt::Arcnet, Some(4), Some(8), 0, 0),
        // The link-layer payload's offset is variable (see `Lower::new`).
        117 => (Lt::Pflog, Some(0), Some(0), 0, 0),
        // The link-layer payload's offset is variable (see `Lower::new`).
        105 | 119 | 127 | 163 | 192 => (Lt::Wlan, Some(24), Some(0), 8, 3),
        d if (104..=289).contains(&d) => (Lt::Unfiltered, None, Some(0), 0, 0),
        _ => return None,
    })
}

/// An offset: a constant, optionally plus a run-time value in a scratch register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Off {
    k: u32,
    reg: Option<u8>,
}

impl Off {
    const fn at(k: u32) -> Off {
        Off { k, reg: None }
    }
}

/// Ethertypes and LLC SAPs used by the generator.
mod et {
    pub const IP: u32 = 0x0800;
    pub const ARP: u32 = 0x0806;
    pub const REVARP: u32 = 0x8035;
    pub const IPV6: u32 = 0x86dd;
    pub const ATALK: u32 = 0x809b;
    pub const AARP: u32 = 0x80f3;
    pub const DN: u32 = 0x6003;
    pub const SCA: u32 = 0x6007;
    pub const LAT: u32 = 0x6004;
    pub const MOPDL: u32 = 0x6001;
    pub const MOPRC: u32 = 0x6002;
    pub const IPX: u32 = 0x8137;
    pub const VLAN: u32 = 0x8100;
    pub const QINQ: u32 = 0x88a8;
    pub const QINQ_OLD: u32 = 0x9100;
    pub const MPLS: u32 = 0x8847;
    pub const PPPOED: u32 = 0x8863;
    pub const PPPOES: u32 = 0x8864;
    pub const NS: u32 = 0x0600;
    pub const SAP_ISONS: u32 = 0xfe;
    pub const SAP_IP: u32 = 0x06;
    pub const SAP_NETBEUI: u32 = 0xf0;
    pub const SAP_IPX: u32 = 0xe0;
    pub const SAP_STP: u32 = 0x42;
    pub const MTU: u32 = 1500;
}

/// IP protocol numbers.
mod ipp {
    pub const ICMP: u32 = 1;
    pub const IGMP: u32 = 2;
    pub const TCP: u32 = 6;
    pub const IGRP: u32 = 9;
    pub const UDP: u32 = 17;
    pub const ESP: u32 = 50;
    pub const AH: u32 = 51;
    pub const ICMPV6: u32 = 58;
    pub const PIM: u32 = 103;
    pub const VRRP: u32 = 112;
    pub const SCTP: u32 = 132;
    pub const FRAGMENT: u32 = 44;
}

/// Which transport protocols a port test covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PortProto {
    Tcp,
    Udp,
    Sctp,
    /// SCTP, TCP and UDP (libpcap's "undefined").
    Any,
}

/// Lower `expr` (the parse of `src`) for `ctx`.
pub fn lower(expr: Option<&Expr<'_>>, src: &str, ctx: &Context) -> Result<Pred, Error> {
    let lt = supported(ctx, src)?;
    let exact = expr.is_some_and(has_acc_op);
    let mut l = Lower::new(lt, ctx, src, exact);
    let root = match expr {
        None => l.b.constant(true),
        Some(e) => {
            let root = l.expr(e)?;
            l.wlan_prologue(root)
        }
    };
    Ok(l.b.finish(root))
}

/// The scratch register holding the 802.11 header's offset after a radio header.
const REG_WLAN_HDR: u8 = 0;
/// The scratch register holding the link-layer payload's offset after an 802.11 header.
const REG_WLAN_PAYLOAD: u8 = 1;

/// The radio header before the 802.11 header of a DLT value.
fn radio_header(dlt: u32) -> RadioHeader {
    match dlt {
        127 => RadioHeader::Radiotap,
        192 => RadioHeader::Ppi,
        163 => RadioHeader::Avs,
        119 => RadioHeader::Prism,
        _ => RadioHeader::None,
    }
}

/// The compiler's view of `ctx.link_type`, or libpcap's error for a link type it does not
/// compile for.
fn supported(ctx: &Context, src: &str) -> Result<Lt, Error> {
    let dlt = ctx.link_type.dlt();
    match layout(dlt) {
        Some((lt, ..)) => Ok(lt),
        None => Err(Error::new(
            ErrorKind::Semantic,
            format!("unknown data link type {dlt} (min 104, max 289)"),
            None,
            src,
        )),
    }
}

/// libpcap's `pcap_datalink_val_to_description_or_dlt` for a DLT value.
fn dlt_description(dlt: u32) -> String {
    LinkType::from_dlt(dlt)
        .description()
        .map_or_else(|| format!("DLT {dlt}"), str::to_string)
}

/// Check that the compiler supports `ctx`'s link type (before parsing, so that the error for
/// an unsupported link type is not hidden by one about 802.11-only syntax).
pub fn check_link_type(ctx: &Context, src: &str) -> Result<(), Error> {
    supported(ctx, src).map(|_| ())
}

/// Whether `field` is read at a fixed place (not through a scratch register, whose value a
/// later Geneve header may change).
fn fixed(field: &Field) -> bool {
    !matches!(
        field,
        Field::Packet {
            loc: Loc::Var { .. } | Loc::VarIpv4Payload { .. },
            ..
        }
    )
}

/// Whether the expression contains `byte N & V` or `byte N | V`, which read the accumulator.
fn has_acc_op(e: &Expr<'_>) -> bool {
    match &e.kind {
        ExprKind::And(ab) | ExprKind::Or(ab) => ab.iter().any(has_acc_op),
        ExprKind::Not(a) => has_acc_op(a),
        ExprKind::Other(Other::Byte(_, ByteOp::And | ByteOp::Or, _)) => true,
        _ => false,
    }
}

type R<T> = Result<T, Error>;

/// Most facts [`Lower`] keeps.
const KNOWN: usize = 8;

/// A stack of up to 8 values in place, more on the heap.
enum Stack8<T: Copy> {
    Small([T; 8], usize),
    Big(Vec<T>),
}

impl<T: Copy> Stack8<T> {
    fn new(fill: T) -> Stack8<T> {
        Stack8::Small([fill; 8], 0)
    }

    fn push(&mut self, v: T) {
        match self {
            Stack8::Small(a, n) if *n < 8 => {
                a[*n] = v;
                *n += 1;
            }
            Stack8::Small(a, n) => {
                let mut big = a[..*n].to_vec();
                big.push(v);
                *self = Stack8::Big(big);
            }
            Stack8::Big(b) => b.push(v),
        }
    }

    fn as_slice(&self) -> &[T] {
        match self {
            Stack8::Small(a, n) => &a[..*n],
            Stack8::Big(b) => b,
        }
    }
}

struct Lower<'a> {
    b: Builder,
    ctx: &'a Context,
    src: &'a str,
    /// Span of the primitive being lowered (for errors).
    span: Span,
    linktype: Lt,
    /// The DLT value of the link layer being tested (DLT_PPP after `pppoes`, DLT_EN10MB
    /// after `geneve`), for the link-type-specific cases and messages.
    dlt: u32,
    off_linkhdr: Off,
    /// `None`: the link type has no type field (RAW, IPV4, IPV6).
    off_linktype: Option<Off>,
    off_linkpl: Off,
    off_nl: u32,
    off_nl_nosnap: u32,
    label_stack_depth: u32,
    geneve: bool,
    /// Next scratch register for Geneve's offsets.
    next_reg: u8,
    /// Sun raw ATM (libpcap's `is_atm`): `vpi`, `vci` and the ATM abbreviations apply.
    is_atm: bool,
    /// After `lane`: Ethernet inside LANE (see [`Lower::lane_data_check`]).
    after_lane: bool,
    /// Scratch registers read by the fields made so far (bit n: register n), for the 802.11
    /// offsets computed only where libpcap computes them (see [`Lower::wlan_prologue`]).
    regs_used: std::cell::Cell<u16>,
    /// Equality tests known true where the lowering is (the tests of the operands before it
    /// in enclosing `and`s): (field, mask, value), the first `nknown`. See [`Lower::linktype`].
    /// Bounded: forgetting a fact only leaves a test to the optimiser.
    known: [(Field, u32, u32); KNOWN],
    nknown: usize,
}

impl<'a> Lower<'a> {
    fn new(lt: Lt, ctx: &'a Context, src: &'a str, exact: bool) -> Lower<'a> {
        let dlt = ctx.link_type.dlt();
        let (_, linktype, linkpl, nl, nosnap) = layout(dlt).unwrap_or((lt, None, Some(0), 0, 0));
        let mut l = Lower {
            // A primitive takes a few characters and makes a few nodes (`host X` on Ethernet:
            // 24 characters with its spaces, 14 nodes).
            b: Builder::with_capacity(exact, 16 + src.len() / 2),
            ctx,
            src,
            span: Span::default(),
            linktype: lt,
            dlt,
            off_linkhdr: Off::at(0),
            off_linktype: linktype.map(Off::at),
            off_linkpl: Off::at(linkpl.unwrap_or(u32::MAX)),
            off_nl: nl,
            off_nl_nosnap: nosnap,
            label_stack_depth: 0,
            geneve: false,
            next_reg: 0,
            regs_used: std::cell::Cell::new(0),
            is_atm: dlt == 123,
            after_lane: false,
            known: [(Field::WireLen, 0, 0); KNOWN],
            nknown: 0,
        };
        if !ctx.optimize {
            // libpcap's unoptimised meaning: reads before a `false` stay.
            l.b.keep_reads();
        }
        if lt == Lt::Wlan {
            // The 802.11 header follows a radio header of variable length (not for plain
            // 802.11); the payload follows an 802.11 header of variable length.
            if radio_header(dlt) != RadioHeader::None {
                l.off_linkhdr = Off {
                    k: 0,
                    reg: Some(REG_WLAN_HDR),
                };
            }
            l.off_linkpl = Off {
                k: 0,
                reg: Some(REG_WLAN_PAYLOAD),
            };
            l.next_reg = 2;
        }
        // The Ethernet header of netANALYZER frames follows a pseudo-header (and, transparent,
        // the preamble and start-of-frame delimiter).
        match dlt {
            240 => l.off_linkhdr = Off::at(4),
            241 => l.off_linkhdr = Off::at(12),
            _ => {}
        }
        if lt == Lt::Pflog {
            l.off_linkpl = Off {
                k: 0,
                reg: Some(REG_WLAN_PAYLOAD),
            };
            l.next_reg = 2;
        }
        l
    }

    fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(Error::new(
            ErrorKind::Semantic,
            msg,
            Some(self.span),
            self.src,
        ))
    }

    fn err_at<T>(&self, msg: impl Into<String>, span: Span) -> R<T> {
        Err(Error::new(ErrorKind::Semantic, msg, Some(span), self.src))
    }

    // ---------------------------------------------------------------------------------------
    // Boolean structure

    fn expr(&mut self, e: &Expr<'_>) -> R<NodeId> {
        match &e.kind {
            ExprKind::And(..) | ExprKind::Or(..) => {
                // A chain `a and b and c …` (the parser nests it to the left) is lowered left
                // to right into one n-ary node, without recursing down the chain.
                let is_and = matches!(e.kind, ExprKind::And(..));
                let mut chain = Stack8::new(e);
                let mut cur = e;
                loop {
                    match &cur.kind {
                        ExprKind::And(ab) if is_and => {
                            chain.push(&ab[1]);
                            cur = &ab[0];
                        }
                        ExprKind::Or(ab) if !is_and => {
                            chain.push(&ab[1]);
                            cur = &ab[0];
                        }
                        _ => {
                            chain.push(cur);
                            break;
                        }
                    }
                }
                let mut ids = Stack8::new(NodeId(0));
                let mark = self.nknown;
                for x in chain.as_slice().iter().rev() {
                    let id = self.expr(x)?;
                    ids.push(id);
                    if is_and {
                        self.learn(id);
                    }
                }
                self.nknown = mark;
                Ok(if is_and {
                    self.b.and_all(ids.as_slice())
                } else {
                    self.b.or_all(ids.as_slice())
                })
            }
            ExprKind::Not(a) => {
                let a = self.expr(a)?;
                Ok(self.b.not(a))
            }
            ExprKind::Primitive(p) => {
                // Errors about a value point at the value (`tcp port htp` → `htp`).
                self.span = p.value_span;
                self.primitive(p)
            }
            ExprKind::Proto(p) => {
                self.span = e.span;
                self.proto_abbrev(*p)
            }
            ExprKind::Relation(op, a, b) => {
                self.span = e.span;
                self.relation(*op, a, b)
            }
            ExprKind::Other(o) => {
                self.span = e.span;
                self.other(o)
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Field locations

    /// How many scratch registers (from 0) the link layer keeps for its run-time offsets.
    fn link_regs(&self) -> u8 {
        match layout(self.ctx.link_type.dlt()).map(|l| l.0) {
            Some(Lt::Wlan | Lt::Pflog) => 2,
            _ => 0,
        }
    }

    /// Notes that a field reads scratch register `reg`.
    fn used(&self, reg: u8) -> u8 {
        self.regs_used.set(self.regs_used.get() | 1 << (reg & 15));
        reg
    }

    /// The 802.11 offsets computation (libpcap's `insert_compute_vloffsets`) before `root`,
    /// for the offsets the filter reads, and for PPI the check that the packet is 802.11
    /// before that.
    fn wlan_prologue(&mut self, root: NodeId) -> NodeId {
        let outer = layout(self.ctx.link_type.dlt()).map(|l| l.0);
        if outer == Some(Lt::Pflog) && self.regs_used.get() & (1 << REG_WLAN_PAYLOAD) != 0 {
            let pro = self.b.special(Special::PflogOffset {
                payload: REG_WLAN_PAYLOAD,
            });
            return self.b.and_all(&[pro, root]);
        }
        if outer != Some(Lt::Wlan) {
            return root;
        }
        let prefix = radio_header(self.ctx.link_type.dlt());
        let used = self.regs_used.get();
        let payload = (used & (1 << REG_WLAN_PAYLOAD) != 0).then_some(REG_WLAN_PAYLOAD);
        let hdr = (prefix != RadioHeader::None
            && (payload.is_some() || used & (1 << REG_WLAN_HDR) != 0))
            .then_some(REG_WLAN_HDR);
        let mut root = root;
        if hdr.is_some() || payload.is_some() {
            let pro = self.b.special(Special::LinkOffsets {
                prefix,
                hdr,
                payload,
            });
            root = self.b.and_all(&[pro, root]);
        }
        if prefix == RadioHeader::Ppi {
            // The DLT in the PPI header (little-endian) must be 802.11.
            let dlt = self.field(Off::at(0), 4, 4);
            let check = self.cmp(dlt, 105u32.swap_bytes());
            root = self.b.and_all(&[check, root]);
        }
        root
    }

    fn loc(&self, off: Off, k: u32) -> Loc {
        match off.reg {
            // libpcap adds offsets as `u_int`s: an unset offset (all ones) wraps around.
            None => Loc::Abs(off.k.wrapping_add(k)),
            Some(reg) => Loc::Var {
                reg: self.used(reg),
                off: off.k.wrapping_add(k),
            },
        }
    }

    fn field(&self, off: Off, k: u32, size: u8) -> Field {
        Field::Packet {
            loc: self.loc(off, k),
            size,
        }
    }

    /// The network header: link payload + `off_nl`.
    fn nl(&self) -> Off {
        Off {
            k: self.off_linkpl.k.wrapping_add(self.off_nl),
            reg: self.off_linkpl.reg,
        }
    }

    fn nl_field(&self, k: u32, size: u8) -> Field {
        self.field(self.nl(), k, size)
    }

    fn nosnap_field(&self, k: u32, size: u8) -> Field {
        let o = Off {
            k: self.off_linkpl.k.wrapping_add(self.off_nl_nosnap),
            reg: self.off_linkpl.reg,
        };
        self.field(o, k, size)
    }

    /// A field after the IPv4 header.
    fn tran4_field(&self, k: u32, size: u8) -> Field {
        let nl = self.nl();
        Field::Packet {
            loc: match nl.reg {
                None => Loc::Ipv4Payload { nl: nl.k, off: k },
                Some(reg) => Loc::VarIpv4Payload {
                    reg: self.used(reg),
                    nl: nl.k,
                    off: k,
                },
            },
            size,
        }
    }

    /// A field after a fixed 40-byte IPv6 header.
    fn tran6_field(&self, k: u32, size: u8) -> Field {
        self.nl_field(40 + k, size)
    }

    fn cmp(&mut self, f: Field, v: u32) -> NodeId {
        self.b.eq(f, u32::MAX, v)
    }

    fn mcmp(&mut self, f: Field, mask: u32, v: u32) -> NodeId {
        self.b.eq(f, mask, v)
    }

    fn gt(&mut self, f: Field, v: u32) -> NodeId {
        self.b.test(f, u32::MAX, Cmp::Gt(v))
    }

    fn ge(&mut self, f: Field, v: u32) -> NodeId {
        self.b.test(f, u32::MAX, Cmp::Ge(v))
    }

    fn jset(&mut self, f: Field, bits: u32) -> NodeId {
        self.b.test(f, u32::MAX, Cmp::Bits(bits))
    }

    fn and(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.b.and(a, b)
    }

    fn or(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.b.or(a, b)
    }

    fn not(&mut self, a: NodeId) -> NodeId {
        self.b.not(a)
    }

    fn tru(&mut self) -> NodeId {
        self.b.constant(true)
    }

    /// Whether lowering leaves out tests the filter's structure decides ([`Context::optimize`];
    /// never in exact mode).
    fn folds(&self) -> bool {
        self.ctx.optimize && !self.b.exact()
    }

    fn is_false(&self, id: NodeId) -> bool {
        matches!(self.b.node(id), Node::Const(false))
    }

    fn fals(&mut self) -> NodeId {
        self.b.constant(false)
    }

    /// `gen_bcmp`: compare bytes from the end backwards, 4 then 2 then 1 at a time.
    fn bcmp(&mut self, off: Off, k: u32, bytes: &[u8]) -> NodeId {
        let mut len = bytes.len() as u32;
        let mut acc: Option<NodeId> = None;
        let push = |l: &mut Self, t: NodeId, acc: &mut Option<NodeId>| {
            *acc = Some(match *acc {
                None => t,
                Some(a) => l.and(a, t),
            });
        };
        while len >= 4 {
            let i = (len - 4) as usize;
            let w = u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
            let f = self.field(off, k + len - 4, 4);
            let t = self.cmp(f, w);
            push(self, t, &mut acc);
            len -= 4;
        }
        while len >= 2 {
            let i = (len - 2) as usize;
            let w = u32::from(u16::from_be_bytes([bytes[i], bytes[i + 1]]));
            let f = self.field(off, k + len - 2, 2);
            let t = self.cmp(f, w);
            push(self, t, &mut acc);
            len -= 2;
        }
        if len > 0 {
            let f = self.field(off, k, 1);
            let t = self.cmp(f, u32::from(bytes[0]));
            push(self, t, &mut acc);
        }
        acc.unwrap_or_else(|| self.tru())
    }

    // ---------------------------------------------------------------------------------------
    // Link-layer type tests

    /// `gen_linktype`: the link-layer payload is of type `proto` (Ethertype above 1500, LLC SAP
    /// otherwise) — or the constant an enclosing `and` already decided it to be: in
    /// `ip src net A and dst net B`, `dst net B` (IPv4, ARP or RARP) keeps only its IPv4 test,
    /// and `tcp port 80 and host X` does not test for IPv6 again after the port test's IPv4
    /// arm. libpcap's optimiser removes the same tests; the predicate is smaller for every
    /// engine and the optimiser has less to remove.
    fn linktype(&mut self, proto: u32) -> R<NodeId> {
        if let Some(known) = self.known_linktype(proto) {
            return Ok(if known { self.tru() } else { self.fals() });
        }
        self.linktype_built(proto)
    }

    /// The link-type test, built (the known tests did not decide it beforehand; they may
    /// still decide the test built).
    fn linktype_built(&mut self, proto: u32) -> R<NodeId> {
        let id = self.linktype_test(proto)?;
        Ok(self.decided(id))
    }

    /// Whether the link-layer payload is of type `proto`, where the known tests decide it
    /// before its test is built: an Ethernet type that `ether_linktype` tests with one
    /// comparison (not AppleTalk's and AARP's, which also take 802.3 SNAP frames).
    fn known_linktype(&self, proto: u32) -> Option<bool> {
        if proto <= et::MTU || matches!(proto, et::ATALK | et::AARP) {
            return None;
        }
        self.known_ethertype().map(|v| v == proto)
    }

    /// The Ethernet type the known tests say the frame has (outside MPLS).
    fn known_ethertype(&self) -> Option<u32> {
        if self.nknown == 0 || self.label_stack_depth > 0 || self.linktype != Lt::En10mb {
            return None;
        }
        self.known_value(self.lt_field(), u32::MAX)
    }

    /// After an operand of an `and` lowered to `id`: what it proves for the operands after it
    /// (its equality tests, or those of its own conjuncts), kept in [`Lower::known`].
    fn learn(&mut self, id: NodeId) {
        if !self.folds() {
            return;
        }
        let fact = |n: &Node| match n {
            Node::Test(t) if !t.relation && fixed(&t.field) => match t.cmp {
                Cmp::Eq(v) => Some((t.field, t.mask, v)),
                _ => None,
            },
            _ => None,
        };
        // The builder is read while the facts are written (distinct fields).
        let (b, known, nknown) = (&self.b, &mut self.known, &mut self.nknown);
        let mut keep = |n: &Node| {
            if let Some(f) = fact(n)
                && *nknown < KNOWN
            {
                known[*nknown] = f;
                *nknown += 1;
            }
        };
        match b.node(id) {
            Node::And(ops) => ops.iter().for_each(|&o| keep(b.node(o))),
            n => keep(n),
        }
    }

    /// `id`, or the constant the known tests decide it to be (an equality test of a field and
    /// mask with a known value).
    fn decided(&mut self, id: NodeId) -> NodeId {
        if self.nknown == 0 {
            return id;
        }
        let Node::Test(t) = self.b.node(id) else {
            return id;
        };
        let (Cmp::Eq(v), false) = (&t.cmp, t.relation) else {
            return id;
        };
        let (field, mask, v) = (t.field, t.mask, *v);
        self.known_eq(field, mask, v).unwrap_or(id)
    }

    /// The constant `field & mask == v` is where the known tests say what the field holds.
    fn known_eq(&mut self, field: Field, mask: u32, v: u32) -> Option<NodeId> {
        let known = self.known_value(field, mask)?;
        Some(if known == v { self.tru() } else { self.fals() })
    }

    /// What the known tests say `field & mask` holds.
    fn known_value(&self, field: Field, mask: u32) -> Option<u32> {
        self.known[..self.nknown]
            .iter()
            .rev()
            .find(|k| k.1 == mask && k.0 == field)
            .map(|k| k.2)
    }

    fn linktype_test(&mut self, proto: u32) -> R<NodeId> {
        if self.label_stack_depth > 0 {
            return self.mpls_linktype(proto);
        }
        Ok(match self.linktype {
            Lt::En10mb => {
                let check = self.lane_data_check();
                let t = self.ether_linktype(proto);
                match check {
                    Some(c) => self.and(c, t),
                    None => t,
                }
            }
            Lt::Sll => self.sll_linktype(proto),
            Lt::Sll2 | Lt::Ppp => {
                let v = if self.linktype == Lt::Ppp {
                    ppp_type(proto)
                } else {
                    proto
                };
                let f = self.lt_field();
                self.cmp(f, v)
            }
            Lt::Raw => {
                let f = self.field(self.off_linkhdr, 0, 1);
                match proto {
                    et::IP => self.mcmp(f, 0xf0, 0x40),
                    et::IPV6 => self.mcmp(f, 0xf0, 0x60),
                    _ => self.fals(),
                }
            }
            Lt::Ipv4 => {
                if proto == et::IP {
                    self.tru()
                } else {
                    self.fals()
                }
            }
            Lt::Ipv6 => {
                if proto == et::IPV6 {
                    self.tru()
                } else {
                    self.fals()
                }
            }
            Lt::Null | Lt::Loop => self.loopback_linktype(proto),
            Lt::Chdlc => {
                let v = if proto == et::SAP_ISONS {
                    (proto << 8) | proto
                } else {
                    proto
                };
                let f = self.lt_field();
                self.cmp(f, v)
            }
            Lt::PppBsdos => {
                let f = self.lt_field();
                if proto == et::IP {
                    let a = self.cmp(f, 0x0021);
                    let b = self.cmp(f, 0x002d);
                    let ab = self.or(a, b);
                    let c = self.cmp(f, 0x002f);
                    self.or(ab, c)
                } else {
                    self.cmp(f, ppp_type(proto))
                }
            }
            Lt::Slip => {
                // libpcap tests the first byte of the SLIP header, not of the IP header.
                let f = self.field(self.off_linkhdr, 0, 1);
                match proto {
                    et::IP => self.mcmp(f, 0xf0, 0x40),
                    et::IPV6 => self.mcmp(f, 0xf0, 0x60),
                    _ => self.fals(),
                }
            }
            Lt::Ltalk => {
                if proto == et::ATALK {
                    self.tru()
                } else {
                    self.fals()
                }
            }
            Lt::Frelay => {
                let f = self.field(self.off_linkhdr, 2, 2);
                match proto {
                    et::IP => self.cmp(f, 0x03cc),
                    et::IPV6 => self.cmp(f, 0x038e),
                    et::SAP_ISONS => {
                        let a = self.cmp(f, 0x0381);
                        let b = self.cmp(f, 0x0382);
                        let c = self.cmp(f, 0x0383);
                        let bc = self.or(b, c);
                        self.or(a, bc)
                    }
                    _ => self.fals(),
                }
            }
            Lt::Juniper => {
                let f = self.field(self.off_linkhdr, 0, 4);
                self.mcmp(f, 0xffff_ff00, 0x4d47_4300)
            }
            Lt::Ethertype => {
                let f = self.lt_field();
                self.cmp(f, proto)
            }
            Lt::Llc => self.llc_linktype(proto),
            Lt::Pflog => {
                // The address family: AF_INET, or AF_INET6 of the compiling system (Linux's).
                let f = self.field(self.off_linkhdr, 1, 1);
                match proto {
                    et::IP => self.cmp(f, 2),
                    et::IPV6 => self.cmp(f, 10),
                    _ => self.fals(),
                }
            }
            Lt::Sunatm => {
                let f = self.field(Off::at(0), 0, 1);
                let llc = self.mcmp(f, 0x0f, 0x02);
                let t = self.llc_linktype(proto);
                self.and(llc, t)
            }
            Lt::Ipnet => {
                let f = self.field(self.lt_off(), 0, 1);
                match proto {
                    et::IP => self.cmp(f, 2),
                    et::IPV6 => self.cmp(f, 26),
                    _ => self.fals(),
                }
            }
            Lt::Bacnet => {
                let f = self.field(self.off_linkhdr, 0, 4);
                self.mcmp(f, 0xffff_0000, 0x55ff_0000)
            }
            Lt::Arcnet => {
                let f = self.field(self.lt_off(), 0, 1);
                match proto {
                    et::IPV6 => self.cmp(f, 0xc4),
                    et::IP => {
                        let a = self.cmp(f, 0xd4);
                        let b = self.cmp(f, 0xf0);
                        self.or(a, b)
                    }
                    et::ARP => {
                        let a = self.cmp(f, 0xd5);
                        let b = self.cmp(f, 0xf1);
                        self.or(a, b)
                    }
                    et::REVARP => self.cmp(f, 0xd6),
                    et::ATALK => self.cmp(f, 0xdd),
                    _ => self.fals(),
                }
            }
            Lt::Wlan => {
                let data = self.wlan_data_frame();
                let t = self.llc_linktype(proto);
                self.and(data, t)
            }
            Lt::Unfiltered => {
                let what = dlt_description(self.dlt);
                return match not_implemented(self.dlt) {
                    Some(name) => {
                        self.err(format!("{name} link-layer type filtering not implemented"))
                    }
                    None if layout(self.dlt).is_some_and(|l| l.1.is_none()) => {
                        self.err(format!("{what} link-layer type filtering not implemented"))
                    }
                    None => self.err(format!(
                        "netsift's filter compiler does not test the link-layer protocol of \
                         {what} packets yet"
                    )),
                };
            }
        })
    }

    /// The offset of the link-layer type field.
    fn lt_off(&self) -> Off {
        self.off_linktype.unwrap_or(Off::at(u32::MAX))
    }

    fn lt_field(&self) -> Field {
        let off = self.off_linktype.unwrap_or(Off::at(u32::MAX));
        self.field(off, 0, 2)
    }

    fn llc_field(&self, k: u32, size: u8) -> Field {
        self.field(self.off_linkpl, k, size)
    }

    fn ether_linktype(&mut self, proto: u32) -> NodeId {
        let lt = self.lt_field();
        let is_8023 = |l: &mut Self| {
            let g = l.gt(lt, et::MTU);
            l.not(g)
        };
        match proto {
            et::SAP_ISONS | et::SAP_IP | et::SAP_NETBEUI => {
                let a = is_8023(self);
                let f = self.llc_field(0, 2);
                let b = self.cmp(f, (proto << 8) | proto);
                self.and(a, b)
            }
            et::SAP_IPX => {
                let e = self.cmp(lt, et::IPX);
                let a = is_8023(self);
                let snap = self.snap(0x000000, et::IPX);
                let f = self.llc_field(0, 1);
                let sap = self.cmp(f, et::SAP_IPX);
                let f = self.llc_field(0, 2);
                let raw = self.cmp(f, 0xffff);
                let x = self.or(snap, sap);
                let x = self.or(x, raw);
                let x = self.and(a, x);
                self.or(e, x)
            }
            et::ATALK | et::AARP => {
                let e = self.cmp(lt, proto);
                let a = is_8023(self);
                let oui = if proto == et::ATALK {
                    0x080007
                } else {
                    0x000000
                };
                let snap = self.snap(oui, proto);
                let x = self.and(a, snap);
                self.or(e, x)
            }
            p if p <= et::MTU => {
                let a = is_8023(self);
                let f = self.field(self.off_linktype.unwrap_or(Off::at(0)), 2, 1);
                let b = self.cmp(f, p);
                self.and(a, b)
            }
            p => self.cmp(lt, p),
        }
    }

    /// `gen_snap`: an 802.2 SNAP header with this OUI and type.
    fn snap(&mut self, oui: u32, ptype: u32) -> NodeId {
        let bytes = [
            0xaa,
            0xaa,
            0x03,
            (oui >> 16) as u8,
            (oui >> 8) as u8,
            oui as u8,
            (ptype >> 8) as u8,
            ptype as u8,
        ];
        let off = self.off_linkpl;
        self.bcmp(off, 0, &bytes)
    }

    /// `gen_llc_linktype`: the protocol in an 802.2 LLC header (SNAP for Ethertypes).
    fn llc_linktype(&mut self, proto: u32) -> NodeId {
        match proto {
            et::SAP_IP | et::SAP_ISONS | et::SAP_NETBEUI => {
                let f = self.llc_field(0, 2);
                self.cmp(f, (proto << 8) | proto)
            }
            et::SAP_IPX => {
                let f = self.llc_field(0, 1);
                self.cmp(f, et::SAP_IPX)
            }
            et::ATALK => self.snap(0x080007, et::ATALK),
            p if p <= et::MTU => {
                let f = self.llc_field(0, 1);
                self.cmp(f, p)
            }
            p => {
                let f = self.llc_field(6, 2);
                self.cmp(f, p)
            }
        }
    }

    /// The pflog primitives (`ifname`, `ruleset`, `rnr`, `srnr`, `reason`, `action`): fields
    /// of `struct pfloghdr`.
    fn pf(&mut self, pf: ast::Pf<'_>) -> R<NodeId> {
        use ast::Pf;
        let kw = match pf {
            Pf::Ifname(_) => "ifname",
            Pf::Ruleset(_) => "ruleset",
            Pf::Rnr(_) => "rnr",
            Pf::Srnr(_) => "srnr",
            Pf::Reason(_) => "reason",
            Pf::Action(_) => "action",
        };
        if self.linktype != Lt::Pflog {
            return self.err(format!("{kw} supported only on PF linktype"));
        }
        let lh = self.off_linkhdr;
        Ok(match pf {
            Pf::Ifname(name) => {
                if name.len() >= 16 {
                    return self.err("ifname interface names can only be 15 characters");
                }
                self.bcmp(lh, 4, name.as_bytes())
            }
            Pf::Ruleset(name) => {
                if name.len() >= 16 {
                    return self.err("ruleset names can only be 15 characters");
                }
                self.bcmp(lh, 20, name.as_bytes())
            }
            Pf::Rnr(n) => {
                let f = self.field(lh, 36, 4);
                self.cmp(f, n)
            }
            Pf::Srnr(n) => {
                let f = self.field(lh, 40, 4);
                self.cmp(f, n)
            }
            Pf::Reason(n) => {
                let f = self.field(lh, 3, 1);
                self.cmp(f, n)
            }
            Pf::Action(n) => {
                let f = self.field(lh, 2, 1);
                self.cmp(f, n)
            }
        })
    }

    /// `gen_ahostop`: an ARCnet address (the source comes first in the header).
    fn ahostop(&mut self, addr: u8, dir: Option<Dir>) -> R<NodeId> {
        let lh = self.off_linkhdr;
        Ok(match dir {
            Some(Dir::Src) => self.bcmp(lh, 0, &[addr]),
            Some(Dir::Dst) => self.bcmp(lh, 1, &[addr]),
            None | Some(Dir::SrcOrDst) => {
                let a = self.bcmp(lh, 0, &[addr]);
                let b = self.bcmp(lh, 1, &[addr]);
                self.or(a, b)
            }
            Some(Dir::SrcAndDst) => {
                let a = self.bcmp(lh, 0, &[addr]);
                let b = self.bcmp(lh, 1, &[addr]);
                self.and(a, b)
            }
            Some(d @ (Dir::Addr1 | Dir::Addr2 | Dir::Addr3 | Dir::Addr4)) => {
                let n = addr_n(d);
                return self.err(format!(
                    "'addr{n}' and 'address{n}' are only supported on 802.11"
                ));
            }
            Some(Dir::Ra) => return self.err("'ra' is only supported on 802.11"),
            Some(_) => return self.err("'ta' is only supported on 802.11"),
        })
    }

    /// `gen_check_802_11_data_frame`: the frame control's type is data (bit 0x08 set, 0x04
    /// clear).
    fn wlan_data_frame(&mut self) -> NodeId {
        let fc = self.field(self.off_linkhdr, 0, 1);
        let b4 = self.jset(fc, 0x04);
        let not4 = self.not(b4);
        let b8 = self.jset(fc, 0x08);
        self.and(not4, b8)
    }

    /// `gen_wlanhostop`: a MAC address in an 802.11 header, where the frame's type and
    /// direction bits put it.
    fn wlanhostop(&mut self, mac: &[u8; 6], dir: Option<Dir>) -> R<NodeId> {
        let lh = self.off_linkhdr;
        let fc0 = self.field(lh, 0, 1);
        let fc1 = self.field(lh, 1, 1);
        // Bits of the frame control: `jset` and its negation.
        let bit = |l: &mut Self, f: Field, b: u32, set: bool| {
            let j = l.jset(f, b);
            if set { j } else { l.not(j) }
        };
        // `a` where the bit is set, else `b`: libpcap's `(!bit && b) || (bit && a)`.
        let pick = |l: &mut Self, f: Field, b: u32, a: NodeId, other: NodeId| {
            let on = bit(l, f, b, true);
            let a = l.and(on, a);
            let off = bit(l, f, b, false);
            let o = l.and(off, other);
            l.or(o, a)
        };
        // Neither a control frame, nor (for those) CTS or ACK: the frames with an addr2.
        let has_addr2 = |l: &mut Self| {
            let ctl = l.mcmp(fc0, 0x0c, 0x04);
            let not_ctl = l.not(ctl);
            let cts = l.mcmp(fc0, 0xf0, 0xc0);
            let not_cts = l.not(cts);
            let ack = l.mcmp(fc0, 0xf0, 0xd0);
            let not_ack = l.not(ack);
            let neither = l.and(not_cts, not_ack);
            l.or(not_ctl, neither)
        };
        Ok(match dir {
            Some(Dir::Src) => {
                let a24 = self.bcmp(lh, 24, mac);
                let a16 = self.bcmp(lh, 16, mac);
                let to_ds = pick(self, fc1, 0x01, a24, a16);
                let a10 = self.bcmp(lh, 10, mac);
                let from_ds = pick(self, fc1, 0x02, to_ds, a10);
                let a10 = self.bcmp(lh, 10, mac);
                let data = pick(self, fc0, 0x08, from_ds, a10);
                let not_ctl = bit(self, fc0, 0x04, false);
                self.and(not_ctl, data)
            }
            Some(Dir::Dst) => {
                let a16 = self.bcmp(lh, 16, mac);
                let a4 = self.bcmp(lh, 4, mac);
                let to_ds = pick(self, fc1, 0x01, a16, a4);
                let a4 = self.bcmp(lh, 4, mac);
                let data = pick(self, fc0, 0x08, to_ds, a4);
                let not_ctl = bit(self, fc0, 0x04, false);
                self.and(not_ctl, data)
            }
            None | Some(Dir::SrcOrDst) => {
                let a = self.wlanhostop(mac, Some(Dir::Src))?;
                let b = self.wlanhostop(mac, Some(Dir::Dst))?;
                self.or(a, b)
            }
            Some(Dir::SrcAndDst) => {
                let a = self.wlanhostop(mac, Some(Dir::Src))?;
                let b = self.wlanhostop(mac, Some(Dir::Dst))?;
                self.and(a, b)
            }
            Some(Dir::Addr1) => self.bcmp(lh, 4, mac),
            Some(Dir::Addr2) => {
                let c = has_addr2(self);
                let m = self.bcmp(lh, 10, mac);
                self.and(c, m)
            }
            Some(Dir::Addr3) => {
                let ctl = self.mcmp(fc0, 0x0c, 0x04);
                let not_ctl = self.not(ctl);
                let m = self.bcmp(lh, 16, mac);
                self.and(not_ctl, m)
            }
            Some(Dir::Addr4) => {
                let ds = self.mcmp(fc1, 0x03, 0x03);
                let m = self.bcmp(lh, 24, mac);
                self.and(ds, m)
            }
            Some(Dir::Ra) => {
                let d = bit(self, fc0, 0x08, true);
                let m = self.bcmp(lh, 4, mac);
                self.and(d, m)
            }
            Some(_) => {
                // `ta`.
                let c = has_addr2(self);
                let d = bit(self, fc0, 0x08, true);
                let c = self.and(d, c);
                let m = self.bcmp(lh, 10, mac);
                self.and(c, m)
            }
        })
    }

    /// Where the link header holds the source and destination MAC addresses (Ethernet, FDDI,
    /// Token Ring, IP over Fibre Channel), or `None` for a link type without them.
    fn mac_offsets(&self) -> Option<(u32, u32)> {
        match (self.linktype, self.dlt) {
            (Lt::En10mb, _) => Some((6, 0)),
            (Lt::Llc, 10) => Some((7, 1)),
            (Lt::Llc, 6) => Some((8, 2)),
            (Lt::Llc, 122) => Some((10, 2)),
            _ => None,
        }
    }

    fn sll_linktype(&mut self, proto: u32) -> NodeId {
        let lt = self.lt_field();
        match proto {
            et::SAP_ISONS | et::SAP_IP | et::SAP_NETBEUI => {
                let a = self.cmp(lt, 0x0004);
                let f = self.llc_field(0, 2);
                let b = self.cmp(f, (proto << 8) | proto);
                self.and(a, b)
            }
            et::SAP_IPX => {
                let a = self.cmp(lt, et::IPX);
                let b = self.cmp(lt, 0x0001);
                let c = self.cmp(lt, 0x0004);
                let f = self.llc_field(0, 1);
                let sap = self.cmp(f, et::SAP_IPX);
                let snap = self.snap(0x000000, et::IPX);
                let x = self.or(sap, snap);
                let x = self.and(c, x);
                let y = self.or(a, b);
                self.or(y, x)
            }
            et::ATALK | et::AARP => {
                let e = self.cmp(lt, proto);
                let c = self.cmp(lt, 0x0004);
                let oui = if proto == et::ATALK {
                    0x080007
                } else {
                    0x000000
                };
                let snap = self.snap(oui, proto);
                let x = self.and(c, snap);
                self.or(e, x)
            }
            p if p <= et::MTU => {
                let a = self.cmp(lt, 0x0004);
                let f = self.field(self.off_linkhdr, 16, 1);
                let b = self.cmp(f, p);
                self.and(a, b)
            }
            p => self.cmp(lt, p),
        }
    }

    fn loopback_linktype(&mut self, proto: u32) -> NodeId {
        // The 4-byte address family: NULL writes it in the capturing host's byte order, LOOP
        // in network order.
        let af = |l: &Self, v: u32| -> u32 {
            match l.linktype {
                Lt::Loop => v,
                _ => match l.ctx.origin {
                    // Compared in the file's byte order.
                    Origin::Savefile { swapped } => {
                        if swapped == cfg!(target_endian = "little") {
                            v
                        } else {
                            v.swap_bytes()
                        }
                    }
                    // htonl(v) on the compiling host, read back big-endian.
                    Origin::Live => v.to_be(),
                },
            }
        };
        let f = self.field(self.off_linkhdr, 0, 4);
        match proto {
            et::IP => {
                let v = af(self, 2);
                self.cmp(f, v)
            }
            et::IPV6 => match self.ctx.origin {
                Origin::Live => {
                    let v = af(self, 10);
                    self.cmp(f, v)
                }
                Origin::Savefile { .. } => {
                    let (a, b, c) = (af(self, 24), af(self, 28), af(self, 30));
                    let x = self.cmp(f, a);
                    let y = self.cmp(f, b);
                    let z = self.cmp(f, c);
                    let xy = self.or(x, y);
                    self.or(xy, z)
                }
            },
            _ => self.fals(),
        }
    }

    fn mpls_linktype(&mut self, proto: u32) -> R<NodeId> {
        // The bottom-of-stack bit is in the third byte of the innermost label, just before
        // the network header: offset nl - 2.
        let nl = self.nl();
        let f = self.field(
            Off {
                k: nl.k.wrapping_sub(2),
                reg: nl.reg,
            },
            0,
            1,
        );
        let v = match proto {
            et::IP => 0x40,
            et::IPV6 => 0x60,
            _ => return self.err("unsupported protocol over mpls"),
        };
        let a = self.mcmp(f, 0x01, 0x01);
        let f = self.nl_field(0, 1);
        let b = self.mcmp(f, 0xf0, v);
        Ok(self.and(a, b))
    }

    // ---------------------------------------------------------------------------------------
    // Protocol abbreviations and `proto N`

    fn proto_abbrev(&mut self, p: Proto) -> R<NodeId> {
        use Proto as P;
        match p {
            P::Ip => self.linktype(et::IP),
            P::Arp => self.linktype(et::ARP),
            P::Rarp => self.linktype(et::REVARP),
            P::Ip6 => self.linktype(et::IPV6),
            P::Atalk => self.linktype(et::ATALK),
            P::Aarp => self.linktype(et::AARP),
            P::Decnet => self.linktype(et::DN),
            P::Sca => self.linktype(et::SCA),
            P::Lat => self.linktype(et::LAT),
            P::Mopdl => self.linktype(et::MOPDL),
            P::Moprc => self.linktype(et::MOPRC),
            P::Iso => self.linktype(et::SAP_ISONS),
            P::Stp => self.linktype(et::SAP_STP),
            P::Ipx => self.linktype(et::SAP_IPX),
            P::Netbeui => self.linktype(et::SAP_NETBEUI),
            P::Tcp => self.gen_proto(ipp::TCP, None),
            P::Udp => self.gen_proto(ipp::UDP, None),
            P::Sctp => self.gen_proto(ipp::SCTP, None),
            P::Pim => self.gen_proto(ipp::PIM, None),
            P::Ah => self.gen_proto(ipp::AH, None),
            P::Esp => self.gen_proto(ipp::ESP, None),
            P::Icmp => self.gen_proto(ipp::ICMP, Some(P::Ip)),
            P::Igmp => self.gen_proto(ipp::IGMP, Some(P::Ip)),
            P::Igrp => self.gen_proto(ipp::IGRP, Some(P::Ip)),
            P::Vrrp | P::Carp => self.gen_proto(ipp::VRRP, Some(P::Ip)),
            P::Icmp6 => self.gen_proto(ipp::ICMPV6, Some(P::Ip6)),
            P::Esis => self.gen_proto(0x82, Some(P::Iso)),
            P::Isis => self.gen_proto(0x83, Some(P::Iso)),
            P::Clnp => self.gen_proto(0x81, Some(P::Iso)),
            P::L1 => self.isis_types(&[26, 24, 18, 15, 17]),
            P::L2 => self.isis_types(&[27, 25, 20, 16, 17]),
            P::Iih => self.isis_types(&[17, 15, 16]),
            P::Lsp => self.isis_types(&[18, 20]),
            P::Snp => self.isis_types(&[27, 26, 24, 25]),
            P::Csnp => self.isis_types(&[24, 25]),
            P::Psnp => self.isis_types(&[26, 27]),
            P::Link => self.err("link layer applied in wrong context"),
            P::Radio => self.err("'radio' is not a valid protocol type"),
        }
    }

    fn isis_types(&mut self, types: &[u32]) -> R<NodeId> {
        let mut acc = None;
        for &t in types {
            let x = self.gen_proto(t, Some(Proto::Isis))?;
            acc = Some(match acc {
                None => x,
                Some(a) => self.or(a, x),
            });
        }
        Ok(acc.unwrap_or_else(|| self.fals()))
    }

    /// `gen_proto`: `[proto] proto v`.
    fn gen_proto(&mut self, v: u32, proto: Option<Proto>) -> R<NodeId> {
        use Proto as P;
        match proto {
            None => {
                let a = self.gen_proto(v, Some(P::Ip))?;
                let b = self.gen_proto(v, Some(P::Ip6))?;
                Ok(self.or(a, b))
            }
            Some(P::Link) => self.linktype(v),
            Some(P::Ip) => {
                let a = self.linktype(et::IP)?;
                let f = self.nl_field(9, 1);
                let b = self.cmp(f, v);
                Ok(self.and(a, b))
            }
            Some(P::Ip6) => {
                let a = self.linktype(et::IPV6)?;
                let nxt = self.nl_field(6, 1);
                let direct = self.cmp(nxt, v);
                let frag = self.cmp(nxt, ipp::FRAGMENT);
                let f = self.nl_field(40, 1);
                let after = self.cmp(f, v);
                let x = self.and(frag, after);
                let y = self.or(direct, x);
                Ok(self.and(a, y))
            }
            Some(P::Iso) => match self.linktype {
                Lt::Frelay => {
                    let f = self.field(self.off_linkhdr, 2, 2);
                    Ok(self.cmp(f, (0x03 << 8) | v))
                }
                Lt::Chdlc => {
                    // OSI in Cisco HDLC is stuffed with a fudge byte.
                    let a = self.linktype((et::SAP_ISONS << 8) | et::SAP_ISONS)?;
                    let f = self.nosnap_field(1, 1);
                    let b = self.cmp(f, v);
                    Ok(self.and(a, b))
                }
                _ => {
                    let a = self.linktype(et::SAP_ISONS)?;
                    let f = self.nosnap_field(0, 1);
                    let b = self.cmp(f, v);
                    Ok(self.and(a, b))
                }
            },
            Some(P::Isis) => {
                let a = self.gen_proto(0x83, Some(P::Iso))?;
                let f = self.nosnap_field(4, 1);
                let b = self.cmp(f, v);
                Ok(self.and(a, b))
            }
            Some(P::Arp) => self.err("arp does not encapsulate another protocol"),
            Some(P::Rarp) => self.err("rarp does not encapsulate another protocol"),
            Some(P::Atalk) => self.err("AppleTalk encapsulation is not specifiable"),
            Some(P::Decnet) => self.err("DECNET encapsulation is not specifiable"),
            Some(P::Lat) => self.err("LAT does not encapsulate another protocol"),
            Some(P::Sca) => self.err("SCA does not encapsulate another protocol"),
            Some(P::Moprc) => self.err("MOPRC does not encapsulate another protocol"),
            Some(P::Mopdl) => self.err("MOPDL does not encapsulate another protocol"),
            Some(P::Clnp) => self.err("'clnp proto' is not supported"),
            Some(p) => self.err(format!("'{} proto' is bogus", p.name())),
        }
    }

    // ---------------------------------------------------------------------------------------
    // Qualified values

    /// A qualified value.
    fn primitive(&mut self, p: &ast::Primitive<'_>) -> R<NodeId> {
        let Inherited::Qual(q) = p.qual else {
            return self.err_at(
                "syntax error in filter expression: this value has no qualifier to inherit \
                 (write e.g. 'host', 'port' or 'net' before it)",
                p.value_span,
            );
        };
        match &p.value {
            Value::Num(v) => self.ncode(q, *v, None),
            Value::Ipv4(s) => {
                match q.addr {
                    Some(AddrType::Port) => return self.err("'port' modifier applied to ip host"),
                    Some(AddrType::Portrange) => {
                        return self.err("'portrange' modifier applied to ip host");
                    }
                    Some(AddrType::Proto) => {
                        return self.err("'proto' modifier applied to ip host");
                    }
                    Some(AddrType::Protochain) => {
                        return self.err("'protochain' modifier applied to ip host");
                    }
                    _ => {}
                }
                self.ncode(q, 0, Some(s))
            }
            Value::Ipv4Prefix(s, len) => self.mcode(q, s, None, *len),
            Value::Ipv4Mask(s, m) => self.mcode(q, s, Some(m), 0),
            Value::Ipv6(s) => self.mcode6(q, s, 128),
            Value::Ipv6Prefix(s, len) => self.mcode6(q, s, *len),
            Value::Mac(s) => self.ecode(q, s),
            Value::Arcnet(s) => {
                if self.linktype != Lt::Arcnet {
                    return self.err("aid supported only on ARCnet");
                }
                if !matches!(q.addr, None | Some(AddrType::Host)) || q.proto != Some(Proto::Link) {
                    return self.err("ARCnet address used in non-arc expression");
                }
                let a = names::pcap_ether_aton(s.as_bytes());
                self.ahostop(a[0], q.dir)
            }
            Value::Name(s) => self.scode(q, s),
        }
    }

    /// Numbers and dotted IPv4 addresses (`gen_ncode`).
    fn ncode(&mut self, q: ast::Qual, v: u32, hid: Option<&str>) -> R<NodeId> {
        let proto = q.proto;
        let (mut v, vlen) = match hid {
            None => (v, 32),
            Some(s) => {
                if proto == Some(Proto::Decnet) {
                    let a = atodn(s)
                        .ok_or(())
                        .or_else(|_| self.err(format!("malformed decnet address '{s}'")))?;
                    (a, 32)
                } else {
                    match atoin(s) {
                        Some((val, len)) => (val, len),
                        None => return self.err(format!("invalid IPv4 address '{s}'")),
                    }
                }
            }
        };
        match q.addr {
            None | Some(AddrType::Host) | Some(AddrType::Net) => {
                if proto == Some(Proto::Decnet) {
                    return self.dnhostop(v, q.dir);
                }
                if proto == Some(Proto::Link) {
                    return self.err("illegal link layer address");
                }
                let mut mask = u32::MAX;
                if hid.is_none() && q.addr == Some(AddrType::Net) {
                    // Promote short network numbers: `net 10` is 10.0.0.0/8.
                    while v != 0 && (v & 0xff00_0000) == 0 {
                        v <<= 8;
                        mask <<= 8;
                    }
                } else if vlen < 32 {
                    // A partial address (`10.1`) covers the rest: 10.1.0.0/16.
                    v <<= 32 - vlen;
                    mask <<= 32 - vlen;
                }
                let is_net = q.addr == Some(AddrType::Net);
                self.gen_host(v, mask, proto, q.dir, is_net)
            }
            Some(AddrType::Port) => {
                let pp = self.port_qual(proto, "port")?;
                if v > 65535 {
                    return self.err(format!("illegal port number {v} > 65535"));
                }
                self.gen_port(v, pp, q.dir, "ports")
            }
            Some(AddrType::Portrange) => {
                let pp = self.port_qual(proto, "portrange")?;
                if v > 65535 {
                    return self.err(format!("illegal port number {v} > 65535"));
                }
                self.gen_portrange(v, v, pp, q.dir)
            }
            Some(AddrType::Gateway) => self.err("'gateway' requires a name"),
            Some(AddrType::Proto) => self.gen_proto(v, proto),
            Some(AddrType::Protochain) => self.gen_protochain(v, proto),
        }
    }

    fn port_qual(&self, proto: Option<Proto>, what: &str) -> R<PortProto> {
        match proto {
            None => Ok(PortProto::Any),
            Some(Proto::Tcp) => Ok(PortProto::Tcp),
            Some(Proto::Udp) => Ok(PortProto::Udp),
            Some(Proto::Sctp) => Ok(PortProto::Sctp),
            Some(_) => self.err(format!("illegal qualifier of '{what}'")),
        }
    }

    /// `a.b.c.d/len` and `a.b.c.d mask m` (`gen_mcode`).
    fn mcode(&mut self, q: ast::Qual, s1: &str, s2: Option<&str>, masklen: u32) -> R<NodeId> {
        let Some((mut n, nlen)) = atoin(s1) else {
            return self.err(format!("invalid IPv4 address '{s1}'"));
        };
        n <<= 32 - nlen;
        let m = match s2 {
            Some(s2) => {
                let Some((m, mlen)) = atoin(s2) else {
                    return self.err(format!("invalid IPv4 address '{s2}'"));
                };
                m << (32 - mlen)
            }
            None => {
                if masklen > 32 {
                    return self.err("mask length must be <= 32");
                }
                if masklen == 0 {
                    0
                } else {
                    u32::MAX << (32 - masklen)
                }
            }
        };
        if n & !m != 0 {
            return self.err(match s2 {
                Some(s2) => format!("non-network bits set in \"{s1} mask {s2}\""),
                None => format!("non-network bits set in \"{s1}/{masklen}\""),
            });
        }
        if q.addr != Some(AddrType::Net) {
            return self.err("Mask syntax for networks only");
        }
        if q.proto == Some(Proto::Decnet) {
            // libpcap parses the address as IPv4 and uses its low 16 bits as a DECnet address.
            return self.dnhostop(n & 0xffff, q.dir);
        }
        if q.proto == Some(Proto::Link) {
            return self.err("link-layer modifier applied to net");
        }
        self.gen_host(n, m, q.proto, q.dir, true)
    }

    /// `gen_host`: an IPv4 address under a mask, for IP, ARP and RARP.
    fn gen_host(
        &mut self,
        addr: u32,
        mask: u32,
        proto: Option<Proto>,
        dir: Option<Dir>,
        is_net: bool,
    ) -> R<NodeId> {
        use Proto as P;
        let what = if is_net { "net" } else { "host" };
        match proto {
            None => {
                // Under MPLS only IPv4; where the known tests rule out ARP and RARP (`ip src
                // net A and dst net B`), their arms are false and `a or false` is `a`.
                if self.label_stack_depth > 0
                    || self
                        .known_ethertype()
                        .is_some_and(|v| v != et::ARP && v != et::REVARP)
                {
                    return self.hostop(addr, mask, dir, et::IP, 12, 16);
                }
                let a = self.hostop(addr, mask, dir, et::IP, 12, 16)?;
                let b = self.hostop(addr, mask, dir, et::ARP, 14, 24)?;
                let ab = self.or(a, b);
                let c = self.hostop(addr, mask, dir, et::REVARP, 14, 24)?;
                Ok(self.or(ab, c))
            }
            Some(P::Ip) => self.hostop(addr, mask, dir, et::IP, 12, 16),
            Some(P::Arp) => self.hostop(addr, mask, dir, et::ARP, 14, 24),
            Some(P::Rarp) => self.hostop(addr, mask, dir, et::REVARP, 14, 24),
            Some(P::Decnet) => self.dnhostop(addr, dir),
            Some(P::Link) => self.err(format!("link-layer modifier applied to {what}")),
            Some(P::Ip6) => self.err("'ip6' modifier applied to ip host"),
            Some(P::Atalk) => self.err("AppleTalk host filtering not implemented"),
            Some(p @ (P::Lat | P::Sca | P::Moprc | P::Mopdl | P::Aarp | P::Iso | P::Ipx)) => self
                .err(format!(
                    "{} host filtering not implemented",
                    p.name().to_uppercase()
                )),
            Some(p) => self.err(format!("'{}' modifier applied to {what}", p.name())),
        }
    }

    fn dir_err_addr<T>(&self, dir: Dir) -> R<T> {
        match dir {
            Dir::Addr1 | Dir::Addr2 | Dir::Addr3 | Dir::Addr4 => {
                let n = addr_n(dir);
                self.err(format!(
                    "'addr{n}' and 'address{n}' are not valid qualifiers for addresses other than \
                     802.11 MAC addresses"
                ))
            }
            Dir::Ra => self
                .err("'ra' is not a valid qualifier for addresses other than 802.11 MAC addresses"),
            _ => self
                .err("'ta' is not a valid qualifier for addresses other than 802.11 MAC addresses"),
        }
    }

    /// `ethertype` and the address under `mask` at the offsets `dir` picks.
    #[allow(clippy::too_many_arguments)]
    fn hostop(
        &mut self,
        addr: u32,
        mask: u32,
        dir: Option<Dir>,
        ethertype: u32,
        src_off: u32,
        dst_off: u32,
    ) -> R<NodeId> {
        if let Some(d) = dir
            && !matches!(d, Dir::Src | Dir::Dst | Dir::SrcOrDst | Dir::SrcAndDst)
        {
            return self.dir_err_addr(d);
        }
        let test = |l: &mut Self, off: u32| {
            let f = l.nl_field(off, 4);
            l.mcmp(f, mask, addr & mask)
        };
        let lt = match self.known_linktype(ethertype) {
            // `true and addrs` is `addrs`.
            Some(true) => return Ok(self.directions(dir, src_off, dst_off, test)),
            Some(false) => return Ok(self.fals()),
            None => self.linktype_built(ethertype)?,
        };
        if self.is_false(lt) {
            return Ok(lt);
        }
        if !self.folds() {
            // libpcap's shape: the link-type test in each direction's conjunction.
            return Ok(self.directions(dir, src_off, dst_off, |l, off| {
                let b = test(l, off);
                l.and(lt, b)
            }));
        }
        // The link-type test once, before the direction's tests (what libpcap's optimiser
        // makes of its `(lt and src) or (lt and dst)`).
        let addrs = self.directions(dir, src_off, dst_off, test);
        Ok(self.and(lt, addrs))
    }

    /// `one` at the source offset, the destination offset, or both as `dir` says (`src or
    /// dst` when none is given; the caller has rejected the 802.11 directions).
    fn directions(
        &mut self,
        dir: Option<Dir>,
        src_off: u32,
        dst_off: u32,
        one: impl Fn(&mut Self, u32) -> NodeId,
    ) -> NodeId {
        match dir {
            Some(Dir::Src) => one(self, src_off),
            Some(Dir::Dst) => one(self, dst_off),
            Some(Dir::SrcAndDst) => {
                let a = one(self, src_off);
                let b = one(self, dst_off);
                self.and(a, b)
            }
            _ => {
                let a = one(self, src_off);
                let b = one(self, dst_off);
                self.or(a, b)
            }
        }
    }

    /// DECnet addresses (`gen_dnhostop`).
    fn dnhostop(&mut self, addr: u32, dir: Option<Dir>) -> R<NodeId> {
        let s = ((addr & 0xff) << 8) | ((addr >> 8) & 0xff);
        let one = |l: &mut Self, offs: u32, offl: u32| -> R<NodeId> {
            let lt = l.linktype(et::DN)?;
            let f8 = l.nl_field(2, 1);
            let f16 = l.nl_field(2, 2);
            let a1 = l.mcmp(f8, 0x07, 0x02);
            let f = l.nl_field(2 + offs, 2);
            let a2 = l.cmp(f, s);
            let a = l.and(a1, a2);
            let b1 = l.mcmp(f16, 0xff07, 0x8102);
            let f = l.nl_field(3 + offs, 2);
            let b2 = l.cmp(f, s);
            let b = l.and(b1, b2);
            let c1 = l.mcmp(f8, 0x07, 0x06);
            let f = l.nl_field(2 + offl, 2);
            let c2 = l.cmp(f, s);
            let c = l.and(c1, c2);
            let d1 = l.mcmp(f16, 0xff07, 0x8106);
            let f = l.nl_field(3 + offl, 2);
            let d2 = l.cmp(f, s);
            let d = l.and(d1, d2);
            let ab = l.or(a, b);
            let abc = l.or(ab, c);
            let abcd = l.or(abc, d);
            Ok(l.and(lt, abcd))
        };
        match dir {
            Some(Dir::Dst) => one(self, 1, 7),
            Some(Dir::Src) => one(self, 3, 15),
            None | Some(Dir::SrcOrDst) => {
                let a = one(self, 3, 15)?;
                let b = one(self, 1, 7)?;
                Ok(self.or(a, b))
            }
            Some(Dir::SrcAndDst) => {
                let a = one(self, 3, 15)?;
                let b = one(self, 1, 7)?;
                Ok(self.and(a, b))
            }
            Some(d) => self.dir_err_addr(d),
        }
    }

    /// IPv6 addresses and prefixes (`gen_mcode6`).
    fn mcode6(&mut self, q: ast::Qual, s: &str, len: u32) -> R<NodeId> {
        let Ok(addr) = s.parse::<Ipv6Addr>() else {
            return self.err(format!("invalid ip6 address {s}"));
        };
        if len > 128 {
            return self.err("mask length must be <= 128");
        }
        let mask: u128 = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        let a = u128::from(addr);
        if a & !mask != 0 {
            return self.err(format!("non-network bits set in \"{s}/{len}\""));
        }
        match q.addr {
            None | Some(AddrType::Host) => {
                if len != 128 {
                    return self.err("Mask syntax for networks only");
                }
            }
            Some(AddrType::Net) => {}
            Some(_) => return self.err("invalid qualifier against IPv6 address"),
        }
        self.gen_host6(a, mask, q.proto, q.dir, q.addr == Some(AddrType::Net))
    }

    fn gen_host6(
        &mut self,
        addr: u128,
        mask: u128,
        proto: Option<Proto>,
        dir: Option<Dir>,
        is_net: bool,
    ) -> R<NodeId> {
        use Proto as P;
        let what = if is_net { "net" } else { "host" };
        match proto {
            None | Some(P::Ip6) => self.hostop6(addr, mask, dir),
            Some(P::Link) => self.err(format!("link-layer modifier applied to ip6 {what}")),
            Some(P::Atalk) => self.err(format!("AppleTalk modifier applied to ip6 {what}")),
            Some(p) => self.err(format!("'{}' modifier applied to ip6 {what}", p.name())),
        }
    }

    fn hostop6(&mut self, addr: u128, mask: u128, dir: Option<Dir>) -> R<NodeId> {
        let atom = |l: &mut Self, off: u32| -> R<NodeId> {
            let lt = l.linktype(et::IPV6)?;
            let mut acc = lt;
            for i in 0..4u32 {
                let shift = 96 - 32 * i;
                let m = (mask >> shift) as u32;
                let v = (addr >> shift) as u32;
                let f = l.nl_field(off + 4 * i, 4);
                let t = l.mcmp(f, m, v & m);
                acc = l.and(acc, t);
            }
            Ok(acc)
        };
        match dir {
            Some(Dir::Src) => atom(self, 8),
            Some(Dir::Dst) => atom(self, 24),
            None | Some(Dir::SrcOrDst) => {
                let a = atom(self, 8)?;
                let b = atom(self, 24)?;
                Ok(self.or(a, b))
            }
            Some(Dir::SrcAndDst) => {
                let a = atom(self, 8)?;
                let b = atom(self, 24)?;
                Ok(self.and(a, b))
            }
            Some(d) => self.dir_err_addr(d),
        }
    }

    /// MAC addresses (`gen_ecode`).
    fn ecode(&mut self, q: ast::Qual, s: &str) -> R<NodeId> {
        if !matches!(q.addr, None | Some(AddrType::Host)) || q.proto != Some(Proto::Link) {
            return self.err("ethernet address used in non-ether expression");
        }
        if self.mac_offsets().is_none() && self.linktype != Lt::Wlan {
            return self.err(
                "ethernet addresses supported only on ethernet/FDDI/token ring/802.11/ATM \
                 LANE/Fibre Channel",
            );
        }
        let Some(mac) = ether_aton(s) else {
            return self.err(format!("invalid Ethernet address '{s}'"));
        };
        if self.linktype == Lt::Wlan {
            return self.wlanhostop(&mac, q.dir);
        }
        let check = self.lane_data_check();
        let h = self.ehostop(&mac, q.dir)?;
        Ok(match check {
            Some(c) => self.and(c, h),
            None => h,
        })
    }

    /// `gen_ehostop`, `gen_fhostop`, `gen_thostop`, `gen_ipfchostop`: a MAC address in the
    /// link header (the caller checked that the link type has one).
    fn ehostop(&mut self, mac: &[u8; 6], dir: Option<Dir>) -> R<NodeId> {
        let lh = self.off_linkhdr;
        let (src, dst) = self.mac_offsets().unwrap_or((6, 0));
        let r = match dir {
            Some(Dir::Src) => self.bcmp(lh, src, mac),
            Some(Dir::Dst) => self.bcmp(lh, dst, mac),
            None | Some(Dir::SrcOrDst) => {
                let a = self.bcmp(lh, src, mac);
                let b = self.bcmp(lh, dst, mac);
                self.or(a, b)
            }
            Some(Dir::SrcAndDst) => {
                let a = self.bcmp(lh, src, mac);
                let b = self.bcmp(lh, dst, mac);
                self.and(a, b)
            }
            Some(d @ (Dir::Addr1 | Dir::Addr2 | Dir::Addr3 | Dir::Addr4)) => {
                let n = addr_n(d);
                return self.err(format!(
                    "'addr{n}' and 'address{n}' are only supported on 802.11 with 802.11 headers"
                ));
            }
            Some(Dir::Ra) => {
                return self.err("'ra' is only supported on 802.11 with 802.11 headers");
            }
            Some(_) => return self.err("'ta' is only supported on 802.11 with 802.11 headers"),
        };
        Ok(self.geneve_ll(r))
    }

    /// After `geneve`, link-address tests first check that there is an inner Ethernet header.
    fn geneve_ll(&mut self, x: NodeId) -> NodeId {
        if !self.geneve {
            return x;
        }
        let (Some(lh), Some(lp)) = (self.off_linkhdr.reg, self.off_linkpl.reg) else {
            return x;
        };
        let c = self.b.special(Special::RegsDiffer(lh, lp));
        self.and(c, x)
    }

    /// Names (`gen_scode`).
    fn scode(&mut self, q: ast::Qual, name: &str) -> R<NodeId> {
        use Proto as P;
        let proto = q.proto;
        match q.addr {
            Some(AddrType::Net) => {
                let Some(mut v) = names::network(name) else {
                    return self.err(format!("unknown network '{name}'"));
                };
                let mut mask = u32::MAX;
                while v != 0 && (v & 0xff00_0000) == 0 {
                    v <<= 8;
                    mask <<= 8;
                }
                self.gen_host(v, mask, proto, q.dir, true)
            }
            None | Some(AddrType::Host) => {
                if proto == Some(P::Link) {
                    // No Ethernet host table (see `pcap_ether_hostton`): every name is unknown.
                    return match (self.mac_offsets(), self.dlt) {
                        (Some(_), 10) => self.err(format!("unknown FDDI host '{name}'")),
                        (Some(_), 6) => self.err(format!("unknown token ring host '{name}'")),
                        (Some(_), 122) => self.err(format!("unknown Fibre Channel host '{name}'")),
                        (Some(_), _) => self.err(format!("unknown ether host '{name}'")),
                        (None, _) if self.linktype == Lt::Wlan => {
                            self.err(format!("unknown 802.11 host '{name}'"))
                        }
                        (None, _) => self.err(
                            "only ethernet/FDDI/token ring/802.11/ATM LANE/Fibre Channel supports \
                             link-level host name",
                        ),
                    };
                }
                if proto == Some(P::Decnet) {
                    return self.err(format!(
                        "decnet name support not included, '{name}' cannot be translated"
                    ));
                }
                let addrs = self.resolve_host(name)?;
                let (mut p4, mut p6) = (proto, proto);
                if self.off_linktype.is_none() && proto.is_none() {
                    p4 = Some(P::Ip);
                    p6 = Some(P::Ip6);
                }
                let mut acc: Option<NodeId> = None;
                for a in addrs {
                    let x = match a {
                        std::net::IpAddr::V4(v4) => {
                            if p4 == Some(P::Ip6) {
                                continue;
                            }
                            self.gen_host(u32::from(v4), u32::MAX, p4, q.dir, false)?
                        }
                        std::net::IpAddr::V6(v6) => {
                            if p6 == Some(P::Ip) {
                                continue;
                            }
                            self.gen_host6(u128::from(v6), u128::MAX, p6, q.dir, false)?
                        }
                    };
                    acc = Some(match acc {
                        None => x,
                        Some(a) => self.or(a, x),
                    });
                }
                match acc {
                    Some(x) => Ok(x),
                    None if proto.is_some() => self.err(format!(
                        "unknown host '{name}' for specified address family"
                    )),
                    None => self.err(format!("unknown host '{name}'")),
                }
            }
            Some(AddrType::Port) => {
                let pq = self.port_qual(proto, "port")?;
                let Some((tcp, udp)) = names::service(name) else {
                    return self.err(format!("unknown port '{name}'"));
                };
                let (port, kind) = service_kind(tcp, udp);
                let kind = self.check_port_kind(pq, kind, |k| format!("port '{name}' is {k}"))?;
                self.gen_port(port, kind, q.dir, "ports")
            }
            Some(AddrType::Portrange) => {
                let pq = self.port_qual(proto, "portrange")?;
                let Some((p1, p2, kind)) = portrange(name) else {
                    return self.err(format!("unknown port in range '{name}'"));
                };
                let kind =
                    self.check_port_kind(pq, kind, |k| format!("port in range '{name}' is {k}"))?;
                for p in [p1, p2] {
                    if p < 0 {
                        return self.err(format!("illegal port number {p} < 0"));
                    }
                    if p > 65535 {
                        return self.err(format!("illegal port number {p} > 65535"));
                    }
                }
                self.gen_portrange(p1 as u32, p2 as u32, kind, q.dir)
            }
            Some(AddrType::Gateway) => self.err(
                "'gateway' not supported in this configuration (libpcap 1.10 built with IPv6, \
                 netsift's reference, does not implement it)",
            ),
            Some(AddrType::Proto) | Some(AddrType::Protochain) => {
                let v = match proto {
                    None | Some(P::Ip) | Some(P::Ip6) => names::ip_protocol(name)
                        .ok_or(())
                        .or_else(|_| self.err(format!("unknown ip proto '{name}'")))?,
                    Some(P::Link) => names::ether_proto(name)
                        .ok_or(())
                        .or_else(|_| self.err(format!("unknown ether proto '{name}'")))?,
                    Some(P::Iso) => names::osi_proto(name)
                        .ok_or(())
                        .or_else(|_| self.err(format!("unknown osi proto '{name}'")))?,
                    Some(_) => return self.err(format!("unknown protocol: {name}")),
                };
                if q.addr == Some(AddrType::Proto) {
                    self.gen_proto(v, proto)
                } else {
                    self.gen_protochain(v, proto)
                }
            }
        }
    }

    fn resolve_host(&self, name: &str) -> R<Vec<std::net::IpAddr>> {
        use std::net::ToSocketAddrs;
        let in_hosts = hosts_file_has(name);
        if !in_hosts && self.ctx.resolve == Resolve::HostsFile {
            return self.err(format!(
                "unknown host '{name}' (not in /etc/hosts; netsift asks the system resolver only \
                 with --resolve)"
            ));
        }
        match (name, 0u16).to_socket_addrs() {
            Ok(it) => {
                let mut v: Vec<std::net::IpAddr> = Vec::new();
                for a in it {
                    if !v.contains(&a.ip()) {
                        v.push(a.ip());
                    }
                }
                Ok(v)
            }
            Err(_) => self.err(format!("unknown host '{name}'")),
        }
    }

    fn check_port_kind(
        &self,
        q: PortProto,
        kind: PortProto,
        msg: impl Fn(&str) -> String,
    ) -> R<PortProto> {
        let name = |k: PortProto| match k {
            PortProto::Tcp => "tcp",
            PortProto::Udp => "udp",
            PortProto::Sctp => "sctp",
            PortProto::Any => "",
        };
        match q {
            PortProto::Any => Ok(kind),
            PortProto::Udp => match kind {
                PortProto::Tcp | PortProto::Sctp => self.err(msg(name(kind))),
                _ => Ok(PortProto::Udp),
            },
            PortProto::Tcp => match kind {
                PortProto::Udp | PortProto::Sctp => self.err(msg(name(kind))),
                _ => Ok(PortProto::Tcp),
            },
            PortProto::Sctp => match kind {
                PortProto::Udp | PortProto::Tcp => self.err(msg(name(kind))),
                _ => Ok(PortProto::Sctp),
            },
        }
    }

    // ---------------------------------------------------------------------------------------
    // Ports

    fn ipfrag(&mut self) -> NodeId {
        let f = self.nl_field(6, 2);
        let j = self.jset(f, 0x1fff);
        self.not(j)
    }

    fn port_dir(
        &mut self,
        dir: Option<Dir>,
        what: &str,
        atom: &mut dyn FnMut(&mut Self, u32) -> NodeId,
    ) -> R<NodeId> {
        match dir {
            Some(Dir::Src) => Ok(atom(self, 0)),
            Some(Dir::Dst) => Ok(atom(self, 2)),
            None | Some(Dir::SrcOrDst) => {
                let a = atom(self, 0);
                let b = atom(self, 2);
                Ok(self.or(a, b))
            }
            Some(Dir::SrcAndDst) => {
                let a = atom(self, 0);
                let b = atom(self, 2);
                Ok(self.and(a, b))
            }
            Some(d @ (Dir::Addr1 | Dir::Addr2 | Dir::Addr3 | Dir::Addr4)) => {
                let n = addr_n(d);
                self.err(format!(
                    "'addr{n}' and 'address{n}' are not valid qualifiers for {what}"
                ))
            }
            Some(Dir::Ra) => self.err(format!("'ra' is not a valid qualifier for {what}")),
            Some(_) => self.err(format!("'ta' is not a valid qualifier for {what}")),
        }
    }

    fn protos(kind: PortProto) -> &'static [u32] {
        match kind {
            PortProto::Tcp => &[ipp::TCP],
            PortProto::Udp => &[ipp::UDP],
            PortProto::Sctp => &[ipp::SCTP],
            PortProto::Any => &[ipp::SCTP, ipp::TCP, ipp::UDP],
        }
    }

    /// `[tcp|udp|sctp] [dir] port P`: the IPv6 variant first, then IPv4 (`gen_port6 or
    /// gen_port`).
    fn gen_port(&mut self, port: u32, kind: PortProto, dir: Option<Dir>, what: &str) -> R<NodeId> {
        let v6 = self.port_family(true, kind, dir, what, &mut |l, off| {
            let f = l.tran6_field(off, 2);
            l.cmp(f, port)
        })?;
        let v4 = self.port_family(false, kind, dir, what, &mut |l, off| {
            let f = l.tran4_field(off, 2);
            l.cmp(f, port)
        })?;
        Ok(self.or(v6, v4))
    }

    fn port_family(
        &mut self,
        v6: bool,
        kind: PortProto,
        dir: Option<Dir>,
        what: &str,
        atom: &mut dyn FnMut(&mut Self, u32) -> NodeId,
    ) -> R<NodeId> {
        let lt = self.linktype(if v6 { et::IPV6 } else { et::IP })?;
        if self.is_false(lt)
            && matches!(
                dir,
                None | Some(Dir::Src | Dir::Dst | Dir::SrcOrDst | Dir::SrcAndDst)
            )
        {
            // An enclosing `and` ruled this family out (and the direction is valid: its error
            // is not skipped).
            return Ok(lt);
        }
        let mut acc: Option<NodeId> = None;
        for &pr in Self::protos(kind) {
            let f = self.nl_field(if v6 { 6 } else { 9 }, 1);
            let p = self.cmp(f, pr);
            let p = if v6 {
                p
            } else {
                let frag = self.ipfrag();
                self.and(p, frag)
            };
            let d = self.port_dir(dir, what, atom)?;
            let x = self.and(p, d);
            acc = Some(match acc {
                None => x,
                Some(a) => self.or(a, x),
            });
        }
        let protos = acc.unwrap_or_else(|| self.fals());
        Ok(self.and(lt, protos))
    }

    fn gen_portrange(&mut self, p1: u32, p2: u32, kind: PortProto, dir: Option<Dir>) -> R<NodeId> {
        let (lo, hi) = if p1 > p2 { (p2, p1) } else { (p1, p2) };
        let range = |l: &mut Self, f: Field| -> NodeId {
            if lo == hi && !l.b.exact() {
                // One port: the same read as the range test, one comparison (as libpcap 1.11).
                return l.cmp(f, lo);
            }
            let a = l.ge(f, lo);
            let b = l.gt(f, hi);
            let nb = l.not(b);
            l.and(a, nb)
        };
        let v6 = self.port_family(true, kind, dir, "port ranges", &mut |l, off| {
            let f = l.tran6_field(off, 2);
            range(l, f)
        })?;
        let v4 = self.port_family(false, kind, dir, "port ranges", &mut |l, off| {
            let f = l.tran4_field(off, 2);
            range(l, f)
        })?;
        Ok(self.or(v6, v4))
    }

    // ---------------------------------------------------------------------------------------
    // protochain

    fn gen_protochain(&mut self, v: u32, proto: Option<Proto>) -> R<NodeId> {
        match proto {
            None => {
                let a = self.gen_protochain(v, Some(Proto::Ip))?;
                let b = self.gen_protochain(v, Some(Proto::Ip6))?;
                Ok(self.or(a, b))
            }
            Some(p @ (Proto::Ip | Proto::Ip6)) => {
                self.b.forbid_optimization();
                if self.off_linkpl.reg.is_some() {
                    return self.err("'protochain' not supported with variable length headers");
                }
                let ipv6 = p == Proto::Ip6;
                let lt = self.linktype(if ipv6 { et::IPV6 } else { et::IP })?;
                let nl = self.nl().k;
                let chain = self.b.special(Special::ProtoChain { nl, ipv6, proto: v });
                Ok(self.and(lt, chain))
            }
            Some(_) => self.err("bad protocol applied for 'protochain'"),
        }
    }

    // ---------------------------------------------------------------------------------------
    // Relations and loads

    fn relation(&mut self, op: RelOp, a: &Arith, b: &Arith) -> R<NodeId> {
        // libpcap evaluates arithmetic in 16 scratch registers (less those Geneve holds) and
        // refuses expressions that need more at once; netsift's code needs fewer, but refuses
        // the same expressions so that a filter means the same to both.
        let need = regs(a).max(1 + regs(b));
        // Registers held: Geneve's, and the link-layer offsets' once a field has used them
        // (libpcap allocates those when it first needs them).
        let link = self.link_regs();
        let held = u32::from(self.next_reg - link)
            + (self.regs_used.get() & ((1 << link) - 1)).count_ones();
        if need > 16 - held {
            return self.err("too many registers needed to evaluate expression");
        }
        let (va, ca) = self.arith(a)?;
        let (vb, cb) = self.arith(b)?;
        let (pop, negate) = match op {
            RelOp::Gt => (pred::RelOp::Gt, false),
            RelOp::Ge => (pred::RelOp::Ge, false),
            RelOp::Eq => (pred::RelOp::Eq, false),
            RelOp::Le => (pred::RelOp::Gt, true),
            RelOp::Lt => (pred::RelOp::Ge, true),
            RelOp::Ne => (pred::RelOp::Eq, true),
        };
        let rel = self.b.relation(va, pop, vb);
        let rel = if negate { self.not(rel) } else { rel };
        let checks = match (ca, cb) {
            (Some(x), Some(y)) => Some(self.and(x, y)),
            (x, None) => x,
            (None, y) => y,
        };
        Ok(match checks {
            Some(c) => self.and(c, rel),
            None => rel,
        })
    }

    /// An arithmetic value and the protocol checks that guard its loads. As in libpcap, a
    /// binary operator keeps only its left operand's checks.
    fn arith(&mut self, a: &Arith) -> R<(Val, Option<NodeId>)> {
        match a {
            Arith::Num(n, _) => Ok((Val::Const(*n), None)),
            Arith::Len(_) => Ok((Val::Len, None)),
            Arith::Neg(x, _) => {
                let (v, c) = self.arith(x)?;
                Ok((Val::Neg(Box::new(v)), c))
            }
            Arith::Bin(op, x, y, span) => {
                let (vx, cx) = self.arith(x)?;
                let (vy, _dropped) = self.arith(y)?;
                let op = match op {
                    ArithOp::Add => pred::ArithOp::Add,
                    ArithOp::Sub => pred::ArithOp::Sub,
                    ArithOp::Mul => pred::ArithOp::Mul,
                    ArithOp::Div => pred::ArithOp::Div,
                    ArithOp::Mod => pred::ArithOp::Mod,
                    ArithOp::And => pred::ArithOp::And,
                    ArithOp::Or => pred::ArithOp::Or,
                    ArithOp::Xor => pred::ArithOp::Xor,
                    ArithOp::Shl => pred::ArithOp::Shl,
                    ArithOp::Shr => pred::ArithOp::Shr,
                };
                // libpcap checks the first instruction of the right operand: a literal 0 (or
                // an expression starting with one) for / and %, a constant above 31 for shifts.
                let first = first_const(y);
                match op {
                    pred::ArithOp::Div if first == Some(0) => {
                        return self.err_at("division by zero", *span);
                    }
                    pred::ArithOp::Mod if first == Some(0) => {
                        return self.err_at("modulus by zero", *span);
                    }
                    pred::ArithOp::Shl | pred::ArithOp::Shr if first.is_some_and(|k| k > 31) => {
                        return self.err_at("shift by more than 31 bits", *span);
                    }
                    _ => {}
                }
                Ok((Val::Bin(op, Box::new(vx), Box::new(vy)), cx))
            }
            Arith::Load {
                proto,
                index,
                size,
                span,
            } => {
                let size = size.unwrap_or(1);
                if !matches!(size, 1 | 2 | 4) {
                    return self.err_at("data size must be 1, 2, or 4", *span);
                }
                let size = size as u8;
                let (vi, ci) = self.arith(index)?;
                self.load(*proto, vi, ci, size, *span)
            }
        }
    }

    fn load(
        &mut self,
        proto: Proto,
        index: Val,
        idx_check: Option<NodeId>,
        size: u8,
        span: Span,
    ) -> R<(Val, Option<NodeId>)> {
        use Proto as P;
        let saved = self.span;
        self.span = span;
        let r = match proto {
            P::Radio if matches!(self.dlt, 119 | 127 | 163) => Ok((
                Val::Load {
                    base: Base::Abs(0),
                    index: Box::new(index),
                    size,
                },
                idx_check,
            )),
            P::Radio => self.err("radio information not present in capture"),
            P::Link => {
                let base = match self.off_linkhdr.reg {
                    None => Base::Abs(self.off_linkhdr.k),
                    Some(r) => Base::Var(self.used(r), self.off_linkhdr.k),
                };
                Ok((
                    Val::Load {
                        base,
                        index: Box::new(index),
                        size,
                    },
                    idx_check,
                ))
            }
            P::Ip
            | P::Arp
            | P::Rarp
            | P::Atalk
            | P::Decnet
            | P::Sca
            | P::Lat
            | P::Moprc
            | P::Mopdl
            | P::Ip6 => {
                let nl = self.nl();
                let base = match nl.reg {
                    None => Base::Abs(nl.k),
                    Some(r) => Base::Var(self.used(r), nl.k),
                };
                let b = self.proto_abbrev(proto)?;
                let check = match idx_check {
                    Some(c) => self.and(c, b),
                    None => b,
                };
                Ok((
                    Val::Load {
                        base,
                        index: Box::new(index),
                        size,
                    },
                    Some(check),
                ))
            }
            P::Tcp
            | P::Udp
            | P::Sctp
            | P::Icmp
            | P::Igmp
            | P::Igrp
            | P::Pim
            | P::Vrrp
            | P::Carp => {
                let nl = self.nl();
                let base = match nl.reg {
                    None => Base::Ipv4Payload(nl.k),
                    Some(r) => Base::VarIpv4Payload(self.used(r), nl.k),
                };
                let lt = self.linktype(et::IP)?;
                let mut check = lt;
                if let Some(c) = idx_check {
                    check = self.and(check, c);
                }
                let ab = self.proto_abbrev(proto)?;
                check = self.and(check, ab);
                let frag = self.ipfrag();
                check = self.and(check, frag);
                Ok((
                    Val::Load {
                        base,
                        index: Box::new(index),
                        size,
                    },
                    Some(check),
                ))
            }
            P::Icmp6 => {
                let nl = self.nl();
                let base = match nl.reg {
                    None => Base::Abs(nl.k.wrapping_add(40)),
                    Some(r) => Base::Var(self.used(r), nl.k.wrapping_add(40)),
                };
                let lt = self.linktype(et::IPV6)?;
                let f = self.nl_field(6, 1);
                let p = self.cmp(f, ipp::ICMPV6);
                let x = self.and(lt, p);
                let check = match idx_check {
                    Some(c) => self.and(c, x),
                    None => x,
                };
                Ok((
                    Val::Load {
                        base,
                        index: Box::new(index),
                        size,
                    },
                    Some(check),
                ))
            }
            _ => self.err("unsupported index operation"),
        };
        self.span = saved;
        r
    }

    // ---------------------------------------------------------------------------------------
    // Keyword primitives

    fn other(&mut self, o: &Other<'_>) -> R<NodeId> {
        use Proto as P;
        match *o {
            Other::Broadcast(p) => match p {
                None | Some(P::Link) if self.linktype == Lt::Wlan => {
                    self.wlanhostop(&[0xff; 6], Some(Dir::Dst))
                }
                None | Some(P::Link) if self.linktype == Lt::Arcnet => {
                    self.ahostop(0, Some(Dir::Dst))
                }
                None | Some(P::Link) => {
                    let Some((_, dst)) = self.mac_offsets() else {
                        return self.err("not a broadcast link");
                    };
                    let check = self.lane_data_check();
                    let lh = self.off_linkhdr;
                    let x = self.bcmp(lh, dst, &[0xff; 6]);
                    let x = match check {
                        Some(c) => self.and(c, x),
                        None => x,
                    };
                    Ok(self.geneve_ll(x))
                }
                Some(P::Ip) => {
                    let Some(netmask) = self.ctx.netmask else {
                        return self.err("netmask not known, so 'ip broadcast' not supported");
                    };
                    let h = !netmask;
                    let lt = self.linktype(et::IP)?;
                    // libpcap reads the address at the link-layer payload, not the network
                    // layer (they differ after an LLC/SNAP header or MPLS labels).
                    let f = self.llc_field(16, 4);
                    let a = self.mcmp(f, h, 0);
                    let b = self.mcmp(f, h, h);
                    let ab = self.or(a, b);
                    Ok(self.and(lt, ab))
                }
                _ => self.err("only link-layer/IP broadcast filters supported"),
            },
            Other::Multicast(p) => match p {
                None | Some(P::Link) if self.linktype == Lt::Arcnet => {
                    // All ARCnet multicasts use the broadcast address.
                    self.ahostop(0, Some(Dir::Dst))
                }
                None | Some(P::Link) if self.linktype == Lt::Wlan => {
                    // Bit 0 of the destination: addr1, or addr3 for a data frame to the DS.
                    let lh = self.off_linkhdr;
                    let fc0 = self.field(lh, 0, 1);
                    let fc1 = self.field(lh, 1, 1);
                    let to_ds = self.jset(fc1, 0x01);
                    let m16 = self.field(lh, 16, 1);
                    let m16 = self.jset(m16, 1);
                    let a = self.and(to_ds, m16);
                    let to_ds = self.jset(fc1, 0x01);
                    let not_to_ds = self.not(to_ds);
                    let m4 = self.field(lh, 4, 1);
                    let m4 = self.jset(m4, 1);
                    let b = self.and(not_to_ds, m4);
                    let ds = self.or(b, a);
                    let data = self.jset(fc0, 0x08);
                    let ds = self.and(data, ds);
                    let data = self.jset(fc0, 0x08);
                    let not_data = self.not(data);
                    let m4 = self.field(lh, 4, 1);
                    let m4 = self.jset(m4, 1);
                    let c = self.and(not_data, m4);
                    let r = self.or(c, ds);
                    let ctl = self.jset(fc0, 0x04);
                    let not_ctl = self.not(ctl);
                    Ok(self.and(not_ctl, r))
                }
                None | Some(P::Link) => {
                    let Some((_, dst)) = self.mac_offsets() else {
                        return self.err(
                            "link-layer multicast filters supported only on ethernet/FDDI/token \
                             ring/ARCNET/802.11/ATM LANE/Fibre Channel",
                        );
                    };
                    let check = self.lane_data_check();
                    let f = self.field(self.off_linkhdr, dst, 1);
                    let x = self.jset(f, 1);
                    let x = match check {
                        Some(c) => self.and(c, x),
                        None => x,
                    };
                    Ok(self.geneve_ll(x))
                }
                Some(P::Ip) => {
                    let lt = self.linktype(et::IP)?;
                    // As for `ip broadcast`: at the link-layer payload, as libpcap reads it.
                    let f = self.llc_field(16, 1);
                    let g = self.ge(f, 224);
                    Ok(self.and(lt, g))
                }
                Some(P::Ip6) => {
                    let lt = self.linktype(et::IPV6)?;
                    let f = self.llc_field(24, 1);
                    let g = self.cmp(f, 255);
                    Ok(self.and(lt, g))
                }
                _ => self.err(
                    "link-layer multicast filters supported only on ethernet/FDDI/token \
                     ring/ARCNET/802.11/ATM LANE/Fibre Channel",
                ),
            },
            Other::Less(n) => {
                let g = self.gt(Field::WireLen, n);
                Ok(self.not(g))
            }
            Other::Greater(n) => Ok(self.ge(Field::WireLen, n)),
            Other::Byte(idx, op, val) => {
                // The field only where it is read (an unread one would make the 802.11
                // offsets computed, which libpcap does not do for `byte N & V`).
                let f = || self.field(self.off_linkhdr, idx, 1);
                Ok(match op {
                    ByteOp::Eq => {
                        let f = f();
                        self.cmp(f, val)
                    }
                    ByteOp::Gt => {
                        let f = f();
                        self.gt(f, val)
                    }
                    ByteOp::Lt => {
                        let f = f();
                        let g = self.ge(f, val);
                        self.not(g)
                    }
                    ByteOp::And => self.b.special(Special::AccOp { or: false, val }),
                    ByteOp::Or => self.b.special(Special::AccOp { or: true, val }),
                })
            }
            Other::Inbound | Other::Outbound => {
                let out = matches!(o, Other::Outbound);
                if self.linktype == Lt::Ipnet {
                    // IPNET_OUTBOUND 1, IPNET_INBOUND 2.
                    let f = self.field(self.off_linkhdr, 2, 2);
                    return Ok(self.cmp(f, if out { 1 } else { 2 }));
                }
                if self.linktype == Lt::Pflog {
                    // pfloghdr.dir: PF_IN 1, PF_OUT 2.
                    let f = self.field(self.off_linkhdr, 60, 1);
                    return Ok(self.cmp(f, if out { 2 } else { 1 }));
                }
                let t = match self.linktype {
                    Lt::Sll => {
                        let f = self.field(self.off_linkhdr, 0, 2);
                        self.cmp(f, 4)
                    }
                    Lt::Sll2 => {
                        let f = self.field(self.off_linkhdr, 10, 1);
                        self.cmp(f, 4)
                    }
                    Lt::Slip if self.dlt == 8 => {
                        // The direction byte: 0 for inbound; outbound is "not 0".
                        let f = self.field(self.off_linkhdr, 0, 1);
                        let t = self.cmp(f, 0);
                        return Ok(if out { self.not(t) } else { t });
                    }
                    _ if self.dlt == 166 => {
                        // PPP_PPPD: the first byte is 0 for inbound packets, 1 for outbound.
                        let f = self.field(self.off_linkhdr, 0, 1);
                        return Ok(self.cmp(f, u32::from(out)));
                    }
                    Lt::Juniper => {
                        // The direction flag: bit 0 of the fourth byte, set for inbound.
                        let f = self.field(self.off_linkhdr, 3, 1);
                        return Ok(self.mcmp(f, 0x01, u32::from(!out)));
                    }
                    _ => match self.ctx.origin {
                        Origin::Savefile { .. } => {
                            return self.err(format!(
                                "inbound/outbound not supported on {} when reading savefiles",
                                dlt_description(self.dlt)
                            ));
                        }
                        // The packet type, from Linux ancillary data (never in a capture).
                        Origin::Live => self.cmp(Field::Ancillary { k: 4, size: 2 }, 4),
                    },
                };
                Ok(if out { t } else { self.not(t) })
            }
            Other::Ifindex(n) => match self.linktype {
                Lt::Sll2 => {
                    let f = self.field(self.off_linkhdr, 4, 4);
                    Ok(self.cmp(f, n))
                }
                _ => match self.ctx.origin {
                    Origin::Savefile { .. } => self.err(format!(
                        "ifindex not supported on {} when reading savefiles",
                        dlt_description(self.dlt)
                    )),
                    Origin::Live => Ok(self.cmp(Field::Ancillary { k: 8, size: 4 }, n)),
                },
            },
            Other::Vlan(id) => self.vlan(id),
            Other::Mpls(label) => self.mpls(label),
            Other::Pppoed => self.linktype(et::PPPOED),
            Other::Pppoes(sess) => self.pppoes(sess),
            Other::Geneve(vni) => self.geneve(vni),
            Other::Llc(ref kind) => self.llc(kind.as_deref()),
            Other::Pf(pf) => self.pf(pf),
            Other::WlanType { value, mask } => {
                if !matches!(self.dlt, 105 | 119 | 127 | 163) {
                    return self.err("802.11 link-layer types supported only on 802.11");
                }
                let f = self.field(self.off_linkhdr, 0, 1);
                Ok(self.mcmp(f, mask, value))
            }
            Other::WlanDir(d) => {
                if !matches!(self.dlt, 105 | 119 | 127 | 163) {
                    return self.err("frame direction supported only with 802.11 headers");
                }
                let f = self.field(self.off_linkhdr, 1, 1);
                Ok(self.mcmp(f, 0x03, d))
            }
            Other::Atm(kw) => self.atm(kw),
            Other::AtmField(vci, ref v) => {
                let kw = if vci { "vci" } else { "vpi" };
                if !self.is_atm {
                    return self.err(format!("'{kw}' supported only on raw ATM"));
                }
                let f = if vci {
                    self.field(Off::at(0), 2, 2)
                } else {
                    self.field(Off::at(0), 1, 1)
                };
                Ok(self.field_value(f, u32::MAX, v, |v| v))
            }
            Other::Mtp2(kw) => self.mtp2(kw),
            Other::Mtp3(field, hsl, ref v) => self.mtp3(field, hsl, v),
        }
    }

    /// libpcap's `gen_ncmp`: `(field & mask) op v`; `reverse` negates `>` and `>=` only (as
    /// in libpcap 1.10.3, `!=` on an ATM or SS7 field means `=`).
    fn ncmp(&mut self, f: Field, mask: u32, op: RelOp, reverse: bool, v: u32) -> NodeId {
        let t = match op {
            RelOp::Gt => self.b.test(f, mask, Cmp::Gt(v)),
            RelOp::Ge => self.b.test(f, mask, Cmp::Ge(v)),
            _ => self.b.test(f, mask, Cmp::Eq(v)),
        };
        if reverse && matches!(op, RelOp::Gt | RelOp::Ge) {
            self.not(t)
        } else {
            t
        }
    }

    /// An ATM or SS7 field's value: one of a list, or a relation; `encode` maps a value to its
    /// bits in the field.
    fn field_value(
        &mut self,
        f: Field,
        mask: u32,
        v: &ast::FieldValue,
        encode: impl Fn(u32) -> u32,
    ) -> NodeId {
        match v {
            ast::FieldValue::OneOf(vals) => {
                let mut acc: Option<NodeId> = None;
                for &x in vals {
                    let t = self.ncmp(f, mask, RelOp::Eq, false, encode(x));
                    acc = Some(match acc {
                        None => t,
                        Some(a) => self.or(a, t),
                    });
                }
                acc.unwrap_or_else(|| self.fals())
            }
            &ast::FieldValue::Rel(op, x) => {
                let (jop, reverse) = match op {
                    RelOp::Le => (RelOp::Gt, true),
                    RelOp::Lt => (RelOp::Ge, true),
                    RelOp::Ne => (RelOp::Eq, true),
                    o => (o, false),
                };
                self.ncmp(f, mask, jop, reverse, encode(x))
            }
        }
    }

    /// The raw-ATM abbreviations (`gen_atmtype_abbrev`, `gen_atmmulti_abbrev`).
    fn atm(&mut self, kw: &'static str) -> R<NodeId> {
        if !self.is_atm {
            return self.err(format!("'{kw}' supported only on raw ATM"));
        }
        let vpi = self.field(Off::at(0), 1, 1);
        let vci = self.field(Off::at(0), 2, 2);
        let proto = self.field(Off::at(0), 0, 1);
        let msg = self.field(Off::at(0), 4 + 5, 1);
        // `vpi 0 and vci N`.
        let circuit = |l: &mut Self, n: u32| {
            let a = l.cmp(vpi, 0);
            let b = l.cmp(vci, n);
            l.and(a, b)
        };
        let msgs = |l: &mut Self, types: &[u32]| {
            let mut acc: Option<NodeId> = None;
            for &t in types {
                let x = l.cmp(msg, t);
                acc = Some(match acc {
                    None => x,
                    Some(a) => l.or(x, a),
                });
            }
            acc.unwrap_or_else(|| l.fals())
        };
        Ok(match kw {
            "metac" => circuit(self, 1),
            "bcc" => circuit(self, 2),
            "oam4sc" => circuit(self, 3),
            "oam4ec" => circuit(self, 4),
            "sc" => circuit(self, 5),
            "ilmic" => circuit(self, 16),
            "oam" | "oamf4" => {
                let a = self.cmp(vci, 3);
                let b = self.cmp(vci, 4);
                let ab = self.or(a, b);
                let p = self.cmp(vpi, 0);
                self.and(p, ab)
            }
            "connectmsg" => {
                // SETUP, CALL PROCEEDING, CONNECT, CONNECT ACK, RELEASE, RELEASE DONE.
                let m = msgs(self, &[0x05, 0x02, 0x07, 0x0f, 0x4d, 0x5a]);
                let c = circuit(self, 5);
                self.and(c, m)
            }
            "metaconnect" => {
                let m = msgs(self, &[0x05, 0x02, 0x07, 0x4d, 0x5a]);
                let c = circuit(self, 1);
                self.and(c, m)
            }
            _ => {
                // `lane`: LANE traffic, whose Ethernet header follows the LE header.
                let t = self.mcmp(proto, 0x0f, 0x01);
                self.linktype = Lt::En10mb;
                self.dlt = 1;
                self.after_lane = true;
                self.off_linkhdr = Off::at(6);
                self.off_linktype = Some(Off::at(18));
                self.off_linkpl = Off::at(20);
                self.off_nl = 0;
                self.off_nl_nosnap = 3;
                t
            }
        })
    }

    /// libpcap's `gen_prevlinkhdr_check`: after `lane`, Ethernet tests first check that the
    /// LANE packet is data, not an LE control frame (`None` elsewhere).
    fn lane_data_check(&mut self) -> Option<NodeId> {
        if !self.after_lane || self.geneve {
            return None;
        }
        let f = self.field(Off::at(0), 4, 2);
        let c = self.cmp(f, 0xff00);
        Some(self.not(c))
    }

    /// SS7 offsets of the link type (li, li_hsl, sio, opc, dpc, sls), if it has them.
    fn ss7(&self) -> Option<[u32; 6]> {
        Some(match self.ctx.link_type.dlt() {
            140 => [2, 4, 3, 4, 4, 7],
            139 => [6, 8, 7, 8, 8, 11],
            197 => [22, 24, 23, 24, 24, 27],
            _ => return None,
        })
    }

    /// The MTP2 abbreviations (`gen_mtp2type_abbrev`).
    fn mtp2(&mut self, kw: &'static str) -> R<NodeId> {
        let Some([li, li_hsl, ..]) = self.ss7() else {
            return self.err(if kw.starts_with('h') {
                format!("'{kw}' supported only on MTP2_HSL")
            } else {
                format!("'{kw}' supported only on MTP2")
            });
        };
        let li = self.field(Off::at(0), li, 1);
        let hsl = self.field(Off::at(0), li_hsl, 2);
        Ok(match kw {
            "fisu" => self.ncmp(li, 0x3f, RelOp::Eq, false, 0),
            "lssu" => {
                let b0 = self.ncmp(li, 0x3f, RelOp::Gt, true, 2);
                let b1 = self.ncmp(li, 0x3f, RelOp::Gt, false, 0);
                self.and(b1, b0)
            }
            "msu" => self.ncmp(li, 0x3f, RelOp::Gt, false, 2),
            "hfisu" => self.ncmp(hsl, 0xff80, RelOp::Eq, false, 0),
            "hlssu" => {
                let b0 = self.ncmp(hsl, 0xff80, RelOp::Gt, true, 0x0100);
                let b1 = self.ncmp(hsl, 0xff80, RelOp::Gt, false, 0);
                self.and(b1, b0)
            }
            _ => self.ncmp(hsl, 0xff80, RelOp::Gt, false, 0x0100),
        })
    }

    /// An MTP3 field (`gen_mtp3field_code`): sio, opc, dpc or sls, `hsl` three bytes further.
    fn mtp3(&mut self, field: ast::Mtp3Field, hsl: bool, v: &ast::FieldValue) -> R<NodeId> {
        use ast::Mtp3Field as M;
        let (name, max) = match field {
            M::Sio => ("sio", 255),
            M::Opc => ("opc", 16383),
            M::Dpc => ("dpc", 16383),
            M::Sls => ("sls", 15),
        };
        let Some(o) = self.ss7() else {
            return self.err(format!("'{name}' supported only on SS7"));
        };
        let values: Vec<u32> = match v {
            ast::FieldValue::OneOf(vs) => vs.clone(),
            &ast::FieldValue::Rel(_, x) => vec![x],
        };
        if let Some(&big) = values.iter().find(|&&x| x > max) {
            return self.err(format!("{name} value {big} too big; max value = {max}"));
        }
        let extra = if hsl { 3 } else { 0 };
        Ok(match field {
            M::Sio => {
                let f = self.field(Off::at(0), o[2] + extra, 1);
                self.field_value(f, u32::MAX, v, |x| x)
            }
            M::Opc => {
                let f = self.field(Off::at(0), o[3] + extra, 4);
                self.field_value(f, 0x00c0_ff0f, v, |x| {
                    ((x & 0x3c00) >> 10) + ((x & 0x03fc) << 6) + ((x & 0x3) << 22)
                })
            }
            M::Dpc => {
                let f = self.field(Off::at(0), o[4] + extra, 4);
                self.field_value(f, 0xff3f_0000, v, |x| {
                    ((x & 0xff) << 24) + ((x & 0x3f00) << 8)
                })
            }
            M::Sls => {
                let f = self.field(Off::at(0), o[5] + extra, 1);
                self.field_value(f, 0xf0, v, |x| x << 4)
            }
        })
    }

    fn llc(&mut self, kind: Option<&str>) -> R<NodeId> {
        let base = match (self.linktype, self.dlt) {
            // Not netANALYZER's Ethernet (libpcap: "'llc' not supported").
            (Lt::En10mb, 1) => {
                let lt = self.lt_field();
                let g = self.gt(lt, et::MTU);
                let a = self.not(g);
                let f = self.llc_field(0, 2);
                let e = self.cmp(f, 0xffff);
                let b = self.not(e);
                self.and(a, b)
            }
            // Token Ring, FDDI and LLC-encapsulated ATM carry an LLC header always.
            (Lt::Llc, 6 | 10 | 11) => self.tru(),
            (Lt::Wlan, _) => self.wlan_data_frame(),
            (Lt::Sunatm, _) => {
                let f = self.field(Off::at(0), 0, 1);
                self.mcmp(f, 0x0f, 0x02)
            }
            _ => {
                return self.err(format!(
                    "'llc' not supported for {}",
                    dlt_description(self.dlt)
                ));
            }
        };
        let Some(kind) = kind else {
            return Ok(base);
        };
        let ctl = self.llc_field(2, 1);
        let k = kind.to_ascii_lowercase();
        let t = match k.as_str() {
            "i" => {
                let j = self.jset(ctl, 0x01);
                self.not(j)
            }
            "s" => self.mcmp(ctl, 0x03, 0x01),
            "u" => self.mcmp(ctl, 0x03, 0x03),
            "rr" => self.mcmp(ctl, 0x0f, 0x01),
            "rnr" => self.mcmp(ctl, 0x0f, 0x05),
            "rej" => self.mcmp(ctl, 0x0f, 0x09),
            "ui" => self.mcmp(ctl, 0xef, 0x03),
            "ua" => self.mcmp(ctl, 0xef, 0x63),
            "disc" => self.mcmp(ctl, 0xef, 0x43),
            "dm" => self.mcmp(ctl, 0xef, 0x0f),
            "sabme" => self.mcmp(ctl, 0xef, 0x6f),
            "test" => self.mcmp(ctl, 0xef, 0xe3),
            "xid" => self.mcmp(ctl, 0xef, 0xaf),
            "frmr" => self.mcmp(ctl, 0xef, 0x87),
            _ => return self.err(format!("unknown LLC type name \"{kind}\"")),
        };
        Ok(self.and(base, t))
    }

    fn vlan(&mut self, id: Option<u32>) -> R<NodeId> {
        if self.label_stack_depth > 0 {
            return self.err("no VLAN match after MPLS");
        }
        if self.linktype != Lt::En10mb && !(self.linktype == Lt::Wlan && self.dlt != 192) {
            return self.err(format!("no VLAN support for {}", dlt_description(self.dlt)));
        }
        let a = self.linktype(et::VLAN)?;
        let b = self.linktype(et::QINQ)?;
        let c = self.linktype(et::QINQ_OLD)?;
        let ab = self.or(a, b);
        let mut r = self.or(ab, c);
        if let Some(id) = id {
            if id > 0x0fff {
                return self.err(format!("VLAN tag {id} greater than maximum 4095"));
            }
            let f = self.field(self.off_linkpl, 0, 2);
            let t = self.mcmp(f, 0x0fff, id);
            r = self.and(r, t);
        }
        self.off_linkpl.k = self.off_linkpl.k.wrapping_add(4);
        if let Some(lt) = self.off_linktype.as_mut() {
            lt.k = lt.k.wrapping_add(4);
        }
        Ok(r)
    }

    fn mpls(&mut self, label: Option<u32>) -> R<NodeId> {
        let mut r = if self.label_stack_depth > 0 {
            // The previous label's bottom-of-stack bit must be clear.
            let nl = self.nl();
            let f = self.field(
                Off {
                    k: nl.k.wrapping_sub(2),
                    reg: nl.reg,
                },
                0,
                1,
            );
            self.mcmp(f, 0x01, 0)
        } else {
            match self.linktype {
                Lt::En10mb | Lt::Chdlc => self.linktype(et::MPLS)?,
                Lt::Ppp if self.dlt == 9 => self.linktype(0x0281)?,
                _ => {
                    return self.err(format!("no MPLS support for {}", dlt_description(self.dlt)));
                }
            }
        };
        if let Some(label) = label {
            if label > 0xfffff {
                return self.err(format!("MPLS label {label} greater than maximum 1048575"));
            }
            let f = self.nl_field(0, 4);
            let t = self.mcmp(f, 0xffff_f000, label << 12);
            r = self.and(r, t);
        }
        self.off_nl = self.off_nl.wrapping_add(4);
        self.off_nl_nosnap = self.off_nl_nosnap.wrapping_add(4);
        self.label_stack_depth += 1;
        Ok(r)
    }

    fn pppoes(&mut self, sess: Option<u32>) -> R<NodeId> {
        let mut r = self.linktype(et::PPPOES)?;
        if let Some(sess) = sess {
            if sess > 0xffff {
                return self.err(format!(
                    "PPPoE session number {sess} greater than maximum 65535"
                ));
            }
            let f = self.nl_field(0, 4);
            let t = self.mcmp(f, 0x0000_ffff, sess);
            r = self.and(r, t);
        }
        // Now the link layer is PPP, after the 6-byte PPPoE header.
        let lh = Off {
            k: self.off_linkpl.k.wrapping_add(self.off_nl).wrapping_add(6),
            reg: self.off_linkpl.reg,
        };
        self.linktype = Lt::Ppp;
        self.dlt = 9;
        self.off_linkhdr = lh;
        self.off_linktype = Some(lh);
        self.off_linkpl = Off {
            k: lh.k.wrapping_add(2),
            reg: lh.reg,
        };
        self.off_nl = 0;
        self.off_nl_nosnap = 0;
        self.geneve = false;
        Ok(r)
    }

    fn geneve(&mut self, vni: Option<u32>) -> R<NodeId> {
        self.b.forbid_optimization();
        if let Some(v) = vni
            && v > 0xff_ffff
        {
            return self.err(format!("Geneve VNI {v} greater than maximum 16777215"));
        }
        let nl = self.nl();
        let nl_base = match nl.reg {
            None => Base::Abs(nl.k),
            Some(r) => Base::Var(self.used(r), nl.k),
        };
        let fam = |l: &mut Self, v6: bool| -> R<NodeId> {
            let port = l.port_family(
                v6,
                PortProto::Udp,
                Some(Dir::Dst),
                "ports",
                &mut |l, off| {
                    let f = if v6 {
                        l.tran6_field(off, 2)
                    } else {
                        l.tran4_field(off, 2)
                    };
                    l.cmp(f, 6081)
                },
            )?;
            let ver_f = if v6 {
                l.tran6_field(8, 1)
            } else {
                l.tran4_field(8, 1)
            };
            let ver = l.mcmp(ver_f, 0xc0, 0);
            let mut r = l.and(port, ver);
            if let Some(v) = vni {
                let f = if v6 {
                    l.tran6_field(12, 4)
                } else {
                    l.tran4_field(12, 4)
                };
                let t = l.mcmp(f, 0xffff_ff00, v << 8);
                r = l.and(r, t);
            }
            let hl = l.b.special(Special::GeneveHeaderLen {
                nl: nl_base,
                ipv6: v6,
            });
            Ok(l.and(r, hl))
        };
        let g4 = fam(self, false)?;
        let g6 = fam(self, true)?;
        let g = self.or(g4, g6);
        if self.next_reg > 13 {
            return self.err("too many registers needed to evaluate expression");
        }
        let (rt, rh, rp) = (self.next_reg, self.next_reg + 1, self.next_reg + 2);
        self.next_reg += 3;
        let offs = self.b.special(Special::GeneveOffsets {
            nl: nl_base,
            reg_type: rt,
            reg_link: rh,
            reg_payload: rp,
        });
        let r = self.and(g, offs);
        self.linktype = Lt::En10mb;
        self.dlt = 1;
        self.off_linkhdr = Off {
            k: 0,
            reg: Some(rh),
        };
        self.off_linktype = Some(Off {
            k: 0,
            reg: Some(rt),
        });
        self.off_linkpl = Off {
            k: 0,
            reg: Some(rp),
        };
        self.off_nl = 0;
        self.off_nl_nosnap = 0;
        self.geneve = true;
        Ok(r)
    }
}

/// PPP protocol numbers for Ethertypes (after `pppoes`).
fn ppp_type(proto: u32) -> u32 {
    match proto {
        et::IP => 0x0021,
        et::IPV6 => 0x0057,
        et::DN => 0x0027,
        et::ATALK => 0x0029,
        et::NS => 0x0025,
        et::SAP_ISONS => 0x0023,
        et::SAP_STP => 0x0031,
        et::SAP_IPX => 0x002b,
        p => p,
    }
}

fn addr_n(d: Dir) -> u32 {
    match d {
        Dir::Addr1 => 1,
        Dir::Addr2 => 2,
        Dir::Addr3 => 3,
        _ => 4,
    }
}

/// How many of libpcap's scratch registers evaluating `a` holds at its peak: every value
/// (constant, `len`, load) takes one; a binary operator holds its left value while evaluating
/// its right one; a load allocates its result before freeing its index.
fn regs(a: &Arith) -> u32 {
    match a {
        Arith::Num(..) | Arith::Len(_) => 1,
        Arith::Neg(x, _) => regs(x),
        Arith::Bin(_, x, y, _) => regs(x).max(1 + regs(y)),
        Arith::Load { index, .. } => regs(index).max(2),
    }
}

/// The first constant of an arithmetic expression in evaluation order (what libpcap's
/// division-by-zero and shift checks look at).
fn first_const(a: &Arith) -> Option<u32> {
    match a {
        Arith::Num(n, _) => Some(*n),
        Arith::Bin(_, x, _, _) => first_const(x),
        Arith::Neg(x, _) => first_const(x),
        // A load's code starts with its index's.
        Arith::Load { index, .. } => first_const(index),
        Arith::Len(_) => None,
    }
}

/// libpcap's `__pcap_atoin`: 1 to 4 decimal parts; returns the value and its length in bits.
fn atoin(s: &str) -> Option<(u32, u32)> {
    let (mut addr, mut len, mut n) = (0u32, 0u32, 0u32);
    for &c in s.as_bytes() {
        if c == b'.' {
            if n > 255 {
                return None;
            }
            (addr, len, n) = ((addr << 8) | n, len + 8, 0);
            continue;
        }
        if n > 25 {
            return None;
        }
        n = n * 10 + u32::from(c.wrapping_sub(b'0'));
        if !c.is_ascii_digit() {
            return None;
        }
    }
    if n > 255 {
        return None;
    }
    Some(((addr << 8) | n, len + 8))
}

/// C's `sscanf("%d")` on a 64-bit glibc: optional sign and decimal digits, the value
/// saturated to the range of `long` as `strtol` does, then truncated to `int`. Returns the
/// value and the rest of the text.
fn scanf_int(s: &str) -> Option<(i32, &str)> {
    let t = s.trim_start();
    let (neg, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let mut v: i64 = 0;
    for b in rest[..digits].bytes() {
        v = v.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    let v = if neg { v.saturating_neg() } else { v };
    // strtol saturates at LONG_MIN/LONG_MAX; the store into an int keeps the low 32 bits.
    Some((v as i32, &rest[digits..]))
}

/// libpcap's `__pcap_atodn`: `sscanf("%d.%d")` into area and node, then a 16-bit DECnet
/// address (overflowing numbers wrap as the C code's do).
fn atodn(s: &str) -> Option<u32> {
    let (area, rest) = scanf_int(s)?;
    let rest = rest.strip_prefix('.')?;
    let (node, _) = scanf_int(rest)?;
    Some((((area << 10) & 0xfc00) | (node & 0x03ff)) as u32)
}

/// Parse a MAC address: six groups of one or two hex digits, separators skipped.
fn ether_aton(s: &str) -> Option<[u8; 6]> {
    let b = s.as_bytes();
    let mut out = [0u8; 6];
    let mut i = 0;
    let mut n = 0;
    while i < b.len() && n < 6 {
        if matches!(b[i], b':' | b'.' | b'-') {
            i += 1;
            continue;
        }
        let hi = (b[i] as char).to_digit(16)?;
        i += 1;
        let mut v = hi;
        if i < b.len()
            && let Some(lo) = (b[i] as char).to_digit(16)
        {
            v = (v << 4) | lo;
            i += 1;
        }
        out[n] = v as u8;
        n += 1;
    }
    (n == 6).then_some(out)
}

/// The port and protocol kind of a service (libpcap: TCP if it has a TCP port; "any" if UDP has
/// the same number; UDP if only UDP).
fn service_kind(tcp: Option<u16>, udp: Option<u16>) -> (u32, PortProto) {
    match (tcp, udp) {
        (Some(t), Some(u)) if t == u => (u32::from(t), PortProto::Any),
        (Some(t), _) => (u32::from(t), PortProto::Tcp),
        (None, Some(u)) => (u32::from(u), PortProto::Udp),
        (None, None) => (0, PortProto::Any),
    }
}

/// `pcap_nametoportrange`: `N-M` numerically (trailing junk ignored), or two service names or
/// numbers split at the first `-`.
fn portrange(name: &str) -> Option<(i64, i64, PortProto)> {
    // sscanf("%d-%d").
    if let Some((p1, rest)) = scanf_int(name)
        && let Some(rest) = rest.strip_prefix('-')
        && let Some((p2, _)) = scanf_int(rest)
    {
        return Some((i64::from(p1), i64::from(p2), PortProto::Any));
    }
    let (a, b) = name.split_once('-')?;
    let (t1, u1) = names::service(a)?;
    let (p1, k1) = service_kind(t1, u1);
    let (t2, u2) = names::service(b)?;
    let (p2, k2) = service_kind(t2, u2);
    let kind = if k1 == k2 { k1 } else { PortProto::Any };
    Some((i64::from(p1), i64::from(p2), kind))
}

/// Whether `/etc/hosts` lists `name` (so resolving it needs no network).
fn hosts_file_has(name: &str) -> bool {
    let Ok(text) = std::fs::read_to_string("/etc/hosts") else {
        return false;
    };
    text.lines().any(|l| {
        l.split('#')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .any(|h| h.eq_ignore_ascii_case(name))
    })
}

#[cfg(test)]
mod tests {
    use super::atoin;

    /// libpcap's `__pcap_atoin` as first written here (split on dots): the byte loop must
    /// agree with it.
    fn atoin_by_parts(s: &str) -> Option<(u32, u32)> {
        let mut addr: u32 = 0;
        let mut len = 0;
        for part in s.split('.') {
            let mut n: u32 = 0;
            for c in part.bytes() {
                if n > 25 {
                    return None;
                }
                n = n * 10 + u32::from(c.wrapping_sub(b'0'));
                if !c.is_ascii_digit() {
                    return None;
                }
            }
            if n > 255 {
                return None;
            }
            addr = (addr << 8) | n;
            len += 8;
        }
        Some((addr, len))
    }

    #[test]
    fn atoin_agrees_with_the_split_version() {
        let alphabet = b"0123456789..a2559";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 18) as usize;
            let s: String = (0..len)
                .map(|i| alphabet[((x >> (i * 3)) % alphabet.len() as u64) as usize] as char)
                .collect();
            assert_eq!(atoin(&s), atoin_by_parts(&s), "{s:?}");
        }
        for s in [
            "",
            ".",
            "10",
            "10.0.0.1",
            "256.1",
            "1.2.3.4.5",
            "025",
            "1..2",
        ] {
            assert_eq!(atoin(s), atoin_by_parts(s), "{s:?}");
        }
    }
}

#[cfg(test)]
mod folding_tests {
    use crate::pred::{Node, Pred};
    use crate::{Context, compile};
    use netsift_wire::LinkType;

    fn lower(expr: &str, optimize: bool) -> Pred {
        let ctx = Context {
            optimize,
            ..Context::new(LinkType::ETHERNET)
        };
        compile(expr, &ctx).unwrap()
    }

    /// The reachable field tests, as `Display` renders them.
    fn tests(p: &Pred) -> Vec<String> {
        p.reachable()
            .into_iter()
            .filter(|&id| matches!(p.node(id), Node::Test(_)))
            .map(|id| {
                let one = format!("{p}");
                let prefix = format!("n{} = ", id.0);
                one.lines()
                    .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
                    .unwrap_or_default()
            })
            .collect()
    }

    #[test]
    fn an_and_decides_the_link_type_tests_after_it() {
        // `dst net B` is IPv4, ARP or RARP; after `ip src net A` only its IPv4 test is left.
        let p = lower("ip src net 192.168.2.0/24 and dst net 10.0.0.0/8", true);
        assert_eq!(
            tests(&p),
            [
                "pkt[12:2] == 0x800",
                "pkt[26:4] & 0xffffff00 == 0xc0a80200",
                "pkt[30:4] & 0xff000000 == 0xa000000"
            ]
        );
        // The ARP and RARP arms are not even built: no constant stands for them (the nodes are
        // the three tests, `ip src net A`'s conjunction and the whole one it is flattened into).
        assert_eq!(p.nodes().len(), 5, "{:?}", p.nodes());
        assert!(!p.nodes().iter().any(|n| matches!(n, Node::Const(_))));
        // Not inside an `or`, a `not` or a parenthesised operand.
        for e in [
            "ip src net 192.168.2.0/24 or dst net 10.0.0.0/8",
            "not ip src net 192.168.2.0/24 and tcp",
            "(ip src net 192.168.2.0/24 or udp) and tcp",
        ] {
            let p = lower(e, true);
            assert!(
                p.nodes()
                    .iter()
                    .any(|n| matches!(n, Node::And(ops) if ops.len() == 2)),
                "{e}: {:?}",
                p.nodes()
            );
        }
        // The same for `host`, whatever the known type: ARP's arm is kept after `arp`.
        let t = tests(&lower("arp and host 10.0.0.1", true));
        assert!(t.iter().any(|t| t.contains("pkt[28:4]")), "{t:?}");
        assert!(!t.iter().any(|t| t.contains("0x800")), "{t:?}");
        // Unoptimised, every test libpcap's code generator emits is kept.
        let p = lower("ip src net 192.168.2.0/24 and dst net 10.0.0.0/8", false);
        assert!(tests(&p).contains(&"pkt[12:2] == 0x806".to_owned()));
        // The port test's IPv6 arm goes after `ip`, and not testing for IPv4 again.
        let p = lower("ip and tcp port 80", true);
        let t = tests(&p);
        assert!(!t.iter().any(|t| t.contains("0x86dd")), "{t:?}");
        assert_eq!(t.iter().filter(|t| t.contains("0x800")).count(), 1, "{t:?}");
        // Through `not` too: `ip and not arp` is `ip`.
        assert_eq!(
            tests(&lower("ip and not arp", true)),
            ["pkt[12:2] == 0x800"]
        );
        // AppleTalk and AARP also match 802.3 SNAP frames: their type test is no single
        // comparison, and libpcap's optimiser does not find `ip and aarp` empty either.
        assert!(!matches!(
            lower("ip and aarp", true).node(lower("ip and aarp", true).root()),
            Node::Const(_)
        ));
        // A contradiction is still the whole filter's (libpcap reports it too).
        assert_eq!(
            lower("ip and arp", true).node(lower("ip and arp", true).root()),
            &Node::Const(false)
        );
    }

    #[test]
    fn only_earlier_conjuncts_decide() {
        // Neither operand of an `or` is known when the other runs.
        let p = lower("ip or arp", true);
        let shown = p.to_string();
        assert!(shown.contains("0x800") && shown.contains("0x806"), "{p}");
        // A relation on the type field is libpcap's own load: not used.
        let p = lower("ether[12:2] = 0x800 and arp", true);
        assert!(tests(&p).contains(&"pkt[12:2] == 0x806".to_owned()), "{p}");
        // The second operand's tests do not decide the first's.
        let p = lower("arp and ip", true);
        assert_eq!(p.node(p.root()), &Node::Const(false));
        // Only equalities teach: the set test of `arp or rarp` leaves `ip` to the optimiser.
        let p = lower("(arp or rarp) and ip", true);
        assert_eq!(tests(&p).len(), 2, "{p}");
    }

    #[test]
    fn src_or_dst_tests_the_link_type_once() {
        let p = lower("ip src or dst net 192.168.2.0/24", true);
        let t = tests(&p);
        assert_eq!(t.iter().filter(|t| t.contains("0x800")).count(), 1, "{p}");
        assert_eq!(t.len(), 3, "{p}");
        let p = lower("ip src and dst host 10.1.2.3", true);
        assert_eq!(tests(&p).len(), 3, "{p}");
        // Unoptimised: libpcap's shape, the link-type test in each direction.
        let p = lower("ip src or dst net 192.168.2.0/24", false);
        assert!(
            matches!(p.node(p.root()), Node::Or(ops) if ops.len() == 2),
            "{p}"
        );
    }
}
