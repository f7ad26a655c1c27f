//! The syntax tree of a filter expression.
//!
//! Qualifier inheritance is resolved by the parser: every [`Primitive`] carries the full
//! qualifier triple it stands for, so `tcp dst port ftp or ftp-data` is two primitives with
//! `tcp dst port`. Every node keeps the byte span of the text it came from.

use crate::span::Span;

/// A protocol qualifier (libpcap's `Q_*` proto values). `Link` stands for all of `link`,
/// `ether`, `ppp`, `slip`, `fddi`, `tr` and `wlan`.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proto {
    Link,
    Ip,
    Arp,
    Rarp,
    Sctp,
    Tcp,
    Udp,
    Icmp,
    Igmp,
    Igrp,
    Atalk,
    Decnet,
    Lat,
    Sca,
    Moprc,
    Mopdl,
    Ip6,
    Icmp6,
    Ah,
    Esp,
    Pim,
    Vrrp,
    Aarp,
    Iso,
    Esis,
    Isis,
    Clnp,
    Stp,
    Ipx,
    Netbeui,
    L1,
    L2,
    Iih,
    Snp,
    Csnp,
    Psnp,
    Lsp,
    Radio,
    Carp,
}

impl Proto {
    /// The keyword as written in expressions (the first spelling for `Link`).
    pub fn name(self) -> &'static str {
        use Proto::*;
        match self {
            Link => "link",
            Ip => "ip",
            Arp => "arp",
            Rarp => "rarp",
            Sctp => "sctp",
            Tcp => "tcp",
            Udp => "udp",
            Icmp => "icmp",
            Igmp => "igmp",
            Igrp => "igrp",
            Atalk => "atalk",
            Decnet => "decnet",
            Lat => "lat",
            Sca => "sca",
            Moprc => "moprc",
            Mopdl => "mopdl",
            Ip6 => "ip6",
            Icmp6 => "icmp6",
            Ah => "ah",
            Esp => "esp",
            Pim => "pim",
            Vrrp => "vrrp",
            Aarp => "aarp",
            Iso => "iso",
            Esis => "esis",
            Isis => "isis",
            Clnp => "clnp",
            Stp => "stp",
            Ipx => "ipx",
            Netbeui => "netbeui",
            L1 => "l1",
            L2 => "l2",
            Iih => "iih",
            Snp => "snp",
            Csnp => "csnp",
            Psnp => "psnp",
            Lsp => "lsp",
            Radio => "radio",
            Carp => "carp",
        }
    }
}

/// A direction qualifier.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    Src,
    Dst,
    /// `src or dst` (also the meaning of no direction).
    SrcOrDst,
    /// `src and dst`.
    SrcAndDst,
    Addr1,
    Addr2,
    Addr3,
    Addr4,
    Ra,
    Ta,
}

/// An address-type qualifier.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddrType {
    Host,
    Net,
    Port,
    Portrange,
    Proto,
    Protochain,
    Gateway,
}

/// The qualifiers of a primitive; `None` is libpcap's "default" (no qualifier written).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Qual {
    /// Protocol qualifier.
    pub proto: Option<Proto>,
    /// Direction qualifier.
    pub dir: Option<Dir>,
    /// Address-type qualifier.
    pub addr: Option<AddrType>,
}

/// The qualifiers a bare value inherits: real ones, or "undefined" after a term that does not
/// pass qualifiers on (`tcp port 80 and ip or 81` — the 81 has nothing to inherit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Inherited {
    /// Qualifiers in force.
    Qual(Qual),
    /// Nothing to inherit (libpcap's `qerr`).
    Undefined,
}

/// The value of a primitive, as written (borrowed from the source: parsing copies no text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    /// A number (`80`, `0x50`, `tcp-syn`).
    Num(u32),
    /// A name (`www.example.com`, `http`, `1-1024`, or an escaped keyword such as `\tcp`).
    Name(&'a str),
    /// A dotted IPv4 address of 2 to 4 parts.
    Ipv4(&'a str),
    /// `a.b.c.d/len`.
    Ipv4Prefix(&'a str, u32),
    /// `a.b.c.d mask m.m.m.m`.
    Ipv4Mask(&'a str, &'a str),
    /// An IPv6 address.
    Ipv6(&'a str),
    /// `ipv6/len`.
    Ipv6Prefix(&'a str, u32),
    /// A MAC address.
    Mac(&'a str),
    /// An ARCnet address (`$1f`).
    Arcnet(&'a str),
}

/// One qualified value: `tcp dst port 80`, `host 198.18.0.1`, or an inherited `81`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Primitive<'a> {
    /// The qualifiers (written or inherited).
    pub qual: Inherited,
    /// The value.
    pub value: Value<'a>,
    /// Span of the value token(s).
    pub value_span: Span,
}

/// A relational operator.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelOp {
    Gt,
    Ge,
    Eq,
    Le,
    Lt,
    Ne,
}

/// A binary arithmetic operator.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

/// An arithmetic expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arith {
    /// A number.
    Num(u32, Span),
    /// `len`: the packet's length on the wire.
    Len(Span),
    /// `proto[index]` or `proto[index:size]`.
    Load {
        /// The protocol whose header the index is relative to.
        proto: Proto,
        /// The byte index.
        index: Box<Arith>,
        /// 1, 2 or 4 (checked when lowering); `None` when not written (1).
        size: Option<u32>,
        /// The whole accessor.
        span: Span,
    },
    /// `a op b`.
    Bin(ArithOp, Box<Arith>, Box<Arith>, Span),
    /// `-a`.
    Neg(Box<Arith>, Span),
}

impl Arith {
    /// The span of the expression.
    pub fn span(&self) -> Span {
        match self {
            Arith::Num(_, s) | Arith::Len(s) | Arith::Load { span: s, .. } => *s,
            Arith::Bin(.., s) | Arith::Neg(_, s) => *s,
        }
    }
}

/// The operator of a `byte` primitive.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOp {
    And,
    Or,
    Lt,
    Gt,
    Eq,
}

/// The keyword primitives that are neither qualified values nor relations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Other<'a> {
    /// `[proto] broadcast`.
    Broadcast(Option<Proto>),
    /// `[proto] multicast`.
    Multicast(Option<Proto>),
    /// `less N`.
    Less(u32),
    /// `greater N`.
    Greater(u32),
    /// `byte IDX op VAL`.
    Byte(u32, ByteOp, u32),
    /// `inbound`.
    Inbound,
    /// `outbound`.
    Outbound,
    /// `ifindex N`.
    Ifindex(u32),
    /// `vlan [ID]`.
    Vlan(Option<u32>),
    /// `mpls [LABEL]`.
    Mpls(Option<u32>),
    /// `pppoed`.
    Pppoed,
    /// `pppoes [SESSION]`.
    Pppoes(Option<u32>),
    /// `geneve [VNI]`.
    Geneve(Option<u32>),
    /// `llc [KIND]` (`i`, `s`, `u` or an S/U subtype name).
    Llc(Option<&'a str>),
    /// A pflog field test.
    Pf(Pf<'a>),
    /// A raw-ATM abbreviation: `lane`, `metac`, `bcc`, `oamf4ec`, `oamf4sc`, `sc`, `ilmic`,
    /// `oam`, `oamf4`, `connectmsg`, `metaconnect`.
    Atm(&'static str),
    /// `vpi VALUE` (false) or `vci VALUE` (true).
    AtmField(bool, FieldValue),
    /// An MTP2 abbreviation: `fisu`, `lssu`, `msu`, `hfisu`, `hlssu`, `hmsu`.
    Mtp2(&'static str),
    /// An MTP3 field (`sio`, `opc`, `dpc`, `sls`; `hsio`… for MTP2_HSL) and its value.
    Mtp3(Mtp3Field, bool, FieldValue),
    /// 802.11 `type T [subtype S]` or `subtype S`: the first frame-control byte under `mask`
    /// equals `value`.
    WlanType {
        /// The type and subtype bits.
        value: u32,
        /// 0x0c (type), or 0xfc (type and subtype).
        mask: u32,
    },
    /// 802.11 `dir D`: the direction bits (the second frame-control byte under 0x03).
    WlanDir(u32),
}

/// The value of an ATM or SS7 field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldValue {
    /// `N` or `(N or N …)`: equal to one of them.
    OneOf(Vec<u32>),
    /// `relop N`.
    Rel(RelOp, u32),
}

/// The MTP3 fields.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mtp3Field {
    Sio,
    Opc,
    Dpc,
    Sls,
}

/// A boolean filter expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr<'a> {
    /// What it is.
    pub kind: ExprKind<'a>,
    /// The text it came from.
    pub span: Span,
}

/// The kinds of boolean expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExprKind<'a> {
    /// `a and b` (`&&`); both operands in one allocation.
    And(Box<[Expr<'a>; 2]>),
    /// `a or b` (`||`).
    Or(Box<[Expr<'a>; 2]>),
    /// `not a` (`!`).
    Not(Box<Expr<'a>>),
    /// A qualified value.
    Primitive(Primitive<'a>),
    /// A bare protocol name: `tcp`, `ip6`, `l1`….
    Proto(Proto),
    /// `a relop b`.
    Relation(RelOp, Arith, Arith),
    /// A keyword primitive.
    Other(Other<'a>),
}

/// The pflog primitives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pf<'a> {
    /// `ifname NAME`: the interface.
    Ifname(&'a str),
    /// `ruleset NAME` (`rset`): the anchor.
    Ruleset(&'a str),
    /// `rnr N` (`rulenum`): the rule number.
    Rnr(u32),
    /// `srnr N` (`srulenum`): the subrule number.
    Srnr(u32),
    /// `reason CODE`: the reason (a number or a name).
    Reason(u32),
    /// `action NAME`: the action.
    Action(u32),
}
