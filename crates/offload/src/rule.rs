//! The rule model: what a NIC filter compares, and the key it compares against.
//!
//! A [`Rule`] matches the tuple `<vlan, proto, src ip, src port, dst ip, dst port>` of one
//! address family ([`Match`]), each field with a bit mask ([`Masked`]; mask 0 = any value), and
//! carries an [`Action`], a [`RuleId`] and a priority. As in the paper (Deri et al., §4), a rule
//! is **precise** when every field is compared exactly ([`Match::is_precise`]) and **wildcard**
//! otherwise; precise rules are found by hashing, wildcard rules by priority (see
//! [`RuleTable`](crate::RuleTable)).
//!
//! A [`FlowKey`] is the same tuple taken from a packet by [`FlowKey::from_frame`], which never
//! panics: it returns `None` for frames that are not IPv4/IPv6 or are truncated before the end of
//! the addresses, and a key without ports when the transport ports are not in the packet (a
//! non-first IPv4/IPv6 fragment, a protocol without ports, a truncated transport header).
//!
//! # Ports
//!
//! A port field with a non-zero mask only matches keys that have ports; a port field with mask 0
//! matches every key. So a precise rule never matches a non-first fragment of its flow, exactly
//! as on the NICs (the 82599 parses no transport header in a fragment).
//!
//! # VLAN
//!
//! The VLAN field compares the VLAN ID (12 bits) of the outermost 802.1Q/802.1ad tag, and
//! whether there is a tag at all ([`VlanMatch`]). The priority and DEI bits are never compared.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::{ErrorKind, OffloadError};
use netsift_wire::LinkType;
use netsift_wire::flow::{self, Options};

/// The identifier of a rule, unique within a table (the paper's filter id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What the NIC does with a packet that a rule matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Discard the packet before any queue sees it (the paper's queue `-1`).
    Drop,
    /// Deliver the packet on this RX queue.
    Queue(u16),
    /// Deliver the packet where RSS puts it, as if no rule had matched, and stop the lookup
    /// (an exception to lower-priority rules).
    Pass,
}

impl Action {
    /// The paper's queue number: `-1` for [`Action::Drop`], the queue for [`Action::Queue`],
    /// `None` for [`Action::Pass`] (which the paper's interface cannot express).
    pub fn paper_queue(self) -> Option<i32> {
        match self {
            Action::Drop => Some(-1),
            Action::Queue(q) => Some(i32::from(q)),
            Action::Pass => None,
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Drop => f.write_str("drop"),
            Action::Queue(q) => write!(f, "queue {q}"),
            Action::Pass => f.write_str("pass"),
        }
    }
}

/// An IP address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of `addr`.
    pub fn of(addr: IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// The all-ones mask of an address of this family, in the low bits of a `u128`.
    pub fn full_mask(self) -> u128 {
        match self {
            Family::V4 => u128::from(u32::MAX),
            Family::V6 => u128::MAX,
        }
    }

    /// The number of bits of an address.
    pub fn bits(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }

    /// The address whose bits are the low bits of `bits`.
    pub fn addr(self, bits: u128) -> IpAddr {
        match self {
            // Truncation intended: IPv4 values live in the low 32 bits.
            Family::V4 => IpAddr::V4(Ipv4Addr::from((bits & u128::from(u32::MAX)) as u32)),
            Family::V6 => IpAddr::V6(Ipv6Addr::from(bits)),
        }
    }

    /// The mask of the prefix `/len` (clamped to the address size).
    pub fn prefix_mask(self, len: u8) -> u128 {
        let len = len.min(self.bits());
        if len == 0 {
            return 0;
        }
        let shift = u32::from(self.bits() - len);
        (self.full_mask() >> shift) << shift
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "ip4",
            Family::V6 => "ip6",
        })
    }
}

/// An address as the low bits of a `u128` (IPv4 in the low 32 bits).
pub(crate) fn addr_bits(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for u16 {}
    impl Sealed for u128 {}
}

/// The integer types a [`Masked`] field can hold (`u8`, `u16`, `u128`).
pub trait Bits:
    sealed::Sealed
    + Copy
    + Eq
    + std::hash::Hash
    + fmt::Debug
    + std::ops::BitAnd<Output = Self>
    + std::ops::Not<Output = Self>
{
    /// The value with no bit set.
    const ZERO: Self;
    /// The value with every bit set.
    const ONES: Self;
}

impl Bits for u8 {
    const ZERO: u8 = 0;
    const ONES: u8 = u8::MAX;
}
impl Bits for u16 {
    const ZERO: u16 = 0;
    const ONES: u16 = u16::MAX;
}
impl Bits for u128 {
    const ZERO: u128 = 0;
    const ONES: u128 = u128::MAX;
}

/// A field value with a mask: a key value `x` matches when `x & mask == value`.
///
/// Set bits of `mask` are compared (the opposite of ethtool's `m`, see
/// [`ethtool`](crate::ethtool)); the constructor clears the bits of `value` outside `mask`, so
/// two equal matches compare equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Masked<T> {
    value: T,
    mask: T,
}

impl<T: Bits> Masked<T> {
    /// `value` compared under `mask`.
    pub fn new(value: T, mask: T) -> Masked<T> {
        Masked {
            value: value & mask,
            mask,
        }
    }

    /// Any value (mask 0).
    pub fn any() -> Masked<T> {
        Masked {
            value: T::ZERO,
            mask: T::ZERO,
        }
    }

    /// The value (bits outside the mask cleared).
    pub fn value(self) -> T {
        self.value
    }

    /// The mask (set bits are compared).
    pub fn mask(self) -> T {
        self.mask
    }

    /// Exactly `value` (every bit compared; for IPv4 addresses in a `u128` use
    /// [`Family::full_mask`] instead).
    pub fn exact(value: T) -> Masked<T> {
        Masked::new(value, T::ONES)
    }

    /// Whether every bit is compared.
    pub fn is_exact(self) -> bool {
        self.mask == T::ONES
    }

    /// Whether every value matches.
    pub fn is_any(self) -> bool {
        self.mask == T::ZERO
    }

    /// Whether `x` matches.
    pub fn matches(self, x: T) -> bool {
        x & self.mask == self.value
    }
}

/// The VLAN part of a [`Match`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VlanMatch {
    /// Tagged or not, any VLAN ID.
    Any,
    /// Only frames without a VLAN tag.
    Untagged,
    /// Only tagged frames whose VLAN ID `vid` matches `vid & mask == id & mask` (12-bit values;
    /// `mask` 0 = any tagged frame, `0xfff` = exactly this VLAN).
    Tagged {
        /// The VLAN ID.
        id: u16,
        /// The compared bits of the VLAN ID.
        mask: u16,
    },
}

/// The bit that marks a tagged frame in the VLAN word of a key.
pub(crate) const VLAN_TAGGED: u16 = 0x1000;
/// The VLAN ID bits.
pub(crate) const VID_MASK: u16 = 0x0fff;
/// The VLAN word mask of an exact VLAN match (tag presence and all ID bits).
pub(crate) const VLAN_FULL: u16 = VLAN_TAGGED | VID_MASK;

impl VlanMatch {
    /// Exactly VLAN `id` (only the low 12 bits are used).
    pub fn id(id: u16) -> VlanMatch {
        VlanMatch::Tagged {
            id: id & VID_MASK,
            mask: VID_MASK,
        }
    }

    /// The match as a value and mask over the VLAN word `tagged << 12 | vid`.
    pub(crate) fn word(self) -> Masked<u16> {
        match self {
            VlanMatch::Any => Masked::any(),
            VlanMatch::Untagged => Masked::new(0, VLAN_FULL),
            VlanMatch::Tagged { id, mask } => {
                let mask = VLAN_TAGGED | (mask & VID_MASK);
                Masked::new(VLAN_TAGGED | id, mask)
            }
        }
    }

    /// The inverse of [`VlanMatch::word`].
    pub(crate) fn from_word(word: Masked<u16>) -> VlanMatch {
        if word.mask() & VLAN_TAGGED == 0 {
            VlanMatch::Any
        } else if word.value() & VLAN_TAGGED == 0 {
            VlanMatch::Untagged
        } else {
            VlanMatch::Tagged {
                id: word.value() & VID_MASK,
                mask: word.mask() & VID_MASK,
            }
        }
    }

    /// Whether the match is exact (untagged, or one VLAN ID).
    pub fn is_exact(self) -> bool {
        self.word().mask() == VLAN_FULL
    }
}

/// The fields a rule compares, for one address family; every field starts as "any".
///
/// Build one with [`Match::new`] and the `with_*`/`try_*` methods; the address setters are
/// fallible because an address must be of the match's family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Match {
    family: Family,
    vlan: Masked<u16>,
    proto: Masked<u8>,
    src: Masked<u128>,
    dst: Masked<u128>,
    src_port: Masked<u16>,
    dst_port: Masked<u16>,
}

impl Match {
    /// A match of `family` with every field any.
    pub fn new(family: Family) -> Match {
        Match {
            family,
            vlan: Masked::any(),
            proto: Masked::any(),
            src: Masked::any(),
            dst: Masked::any(),
            src_port: Masked::any(),
            dst_port: Masked::any(),
        }
    }

    /// The precise match of the flow `key`: every field exact, the VLAN included (untagged when
    /// the key has no VLAN); `None` when the key has no ports.
    pub fn precise(key: &FlowKey) -> Option<Match> {
        let (sp, dp) = key.ports?;
        let family = Family::of(key.src);
        let vlan = match key.vlan {
            Some(vid) => VlanMatch::id(vid),
            None => VlanMatch::Untagged,
        };
        Match::new(family)
            .with_vlan(vlan)
            .with_proto(key.proto)
            .try_src(key.src, family.full_mask())
            .ok()?
            .try_dst(key.dst, family.full_mask())
            .ok()
            .map(|m| m.with_src_port(sp).with_dst_port(dp))
    }

    /// The address family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// Sets the VLAN match.
    pub fn with_vlan(mut self, vlan: VlanMatch) -> Match {
        self.vlan = vlan.word();
        self
    }

    /// Sets the protocol to exactly `proto`.
    pub fn with_proto(mut self, proto: u8) -> Match {
        self.proto = Masked::exact(proto);
        self
    }

    /// Sets the protocol match.
    pub fn with_proto_masked(mut self, proto: Masked<u8>) -> Match {
        self.proto = proto;
        self
    }

    /// Sets the source port to exactly `port`.
    pub fn with_src_port(mut self, port: u16) -> Match {
        self.src_port = Masked::exact(port);
        self
    }

    /// Sets the source port match.
    pub fn with_src_port_masked(mut self, port: Masked<u16>) -> Match {
        self.src_port = port;
        self
    }

    /// Sets the destination port to exactly `port`.
    pub fn with_dst_port(mut self, port: u16) -> Match {
        self.dst_port = Masked::exact(port);
        self
    }

    /// Sets the destination port match.
    pub fn with_dst_port_masked(mut self, port: Masked<u16>) -> Match {
        self.dst_port = port;
        self
    }

    /// Sets the source address to `addr` under the bit mask `mask` (low bits of the `u128` for
    /// IPv4; see [`Family::prefix_mask`]); fails when `addr` is not of the match's family.
    pub fn try_src(mut self, addr: IpAddr, mask: u128) -> Result<Match, OffloadError> {
        self.src = self.addr_field(addr, mask)?;
        Ok(self)
    }

    /// Sets the destination address; see [`Match::try_src`].
    pub fn try_dst(mut self, addr: IpAddr, mask: u128) -> Result<Match, OffloadError> {
        self.dst = self.addr_field(addr, mask)?;
        Ok(self)
    }

    fn addr_field(&self, addr: IpAddr, mask: u128) -> Result<Masked<u128>, OffloadError> {
        if Family::of(addr) != self.family {
            return Err(OffloadError::new(
                ErrorKind::Family,
                None,
                format!("address {addr} is not {}", self.family),
            ));
        }
        Ok(Masked::new(addr_bits(addr), mask & self.family.full_mask()))
    }

    /// The VLAN match.
    pub fn vlan(&self) -> VlanMatch {
        VlanMatch::from_word(self.vlan)
    }

    /// The protocol match.
    pub fn proto(&self) -> Masked<u8> {
        self.proto
    }

    /// The source address match (address bits in the low bits for IPv4).
    pub fn src(&self) -> Masked<u128> {
        self.src
    }

    /// The destination address match.
    pub fn dst(&self) -> Masked<u128> {
        self.dst
    }

    /// The source address as an address and a mask address (set bits compared).
    pub fn src_addr(&self) -> (IpAddr, IpAddr) {
        (
            self.family.addr(self.src.value()),
            self.family.addr(self.src.mask()),
        )
    }

    /// The destination address as an address and a mask address (set bits compared).
    pub fn dst_addr(&self) -> (IpAddr, IpAddr) {
        (
            self.family.addr(self.dst.value()),
            self.family.addr(self.dst.mask()),
        )
    }

    /// The source port match.
    pub fn src_port(&self) -> Masked<u16> {
        self.src_port
    }

    /// The destination port match.
    pub fn dst_port(&self) -> Masked<u16> {
        self.dst_port
    }

    /// The masks of every field.
    pub fn masks(&self) -> FieldMasks {
        FieldMasks {
            vlan: self.vlan.mask(),
            proto: self.proto.mask(),
            src: self.src.mask(),
            dst: self.dst.mask(),
            src_port: self.src_port.mask(),
            dst_port: self.dst_port.mask(),
        }
    }

    /// Whether the match is the paper's precise rule: protocol, both addresses and both ports
    /// compared exactly, and the VLAN either exact ([`VlanMatch::id`], [`VlanMatch::Untagged`])
    /// or [`VlanMatch::Any`] (NICs that filter through ethtool cannot say "untagged", so a
    /// precise 5-tuple with any VLAN is common).
    pub fn is_precise(&self) -> bool {
        let full = FieldMasks::full(self.family);
        let masks = self.masks();
        masks == full || masks == FieldMasks { vlan: 0, ..full }
    }

    /// Whether the match compares ports (and so never matches a key without ports).
    pub fn needs_ports(&self) -> bool {
        !self.src_port.is_any() || !self.dst_port.is_any()
    }

    /// Whether `key` matches.
    pub fn matches(&self, key: &FlowKey) -> bool {
        if Family::of(key.src) != self.family || Family::of(key.dst) != self.family {
            return false;
        }
        if !self.vlan.matches(key.vlan_word())
            || !self.proto.matches(key.proto)
            || !self.src.matches(addr_bits(key.src))
            || !self.dst.matches(addr_bits(key.dst))
        {
            return false;
        }
        match key.ports {
            Some((sp, dp)) => self.src_port.matches(sp) && self.dst_port.matches(dp),
            None => !self.needs_ports(),
        }
    }
}

fn fmt_port(f: &mut fmt::Formatter<'_>, name: &str, p: Masked<u16>) -> fmt::Result {
    if p.is_any() {
        Ok(())
    } else if p.is_exact() {
        write!(f, " {name} {}", p.value())
    } else {
        write!(f, " {name} {}/0x{:04x}", p.value(), p.mask())
    }
}

fn fmt_addr(f: &mut fmt::Formatter<'_>, name: &str, fam: Family, a: Masked<u128>) -> fmt::Result {
    if a.is_any() {
        return Ok(());
    }
    let addr = fam.addr(a.value());
    let m = a.mask();
    let len = m.count_ones();
    let shift = u32::from(fam.bits()) - len;
    // A contiguous mask prints as a prefix, any other as an address.
    if len > 0 && (fam.full_mask() >> shift) << shift == m {
        if len == u32::from(fam.bits()) {
            write!(f, " {name} {addr}")
        } else {
            write!(f, " {name} {addr}/{len}")
        }
    } else if len == 0 {
        Ok(())
    } else {
        write!(f, " {name} {addr} mask {}", fam.addr(m))
    }
}

impl fmt::Display for Match {
    /// `ip4 [vlan V|untagged] [proto P] [src A[/L]] [sport P] [dst A[/L]] [dport P]`, fields
    /// that are "any" left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.family)?;
        match self.vlan() {
            VlanMatch::Any => {}
            VlanMatch::Untagged => f.write_str(" untagged")?,
            VlanMatch::Tagged { id, mask } if mask == VID_MASK => write!(f, " vlan {id}")?,
            VlanMatch::Tagged { id, mask } => write!(f, " vlan {id}/0x{mask:03x}")?,
        }
        if self.proto.is_exact() {
            write!(f, " proto {}", self.proto.value())?;
        } else if !self.proto.is_any() {
            write!(
                f,
                " proto {}/0x{:02x}",
                self.proto.value(),
                self.proto.mask()
            )?;
        }
        fmt_addr(f, "src", self.family, self.src)?;
        fmt_port(f, "sport", self.src_port)?;
        fmt_addr(f, "dst", self.family, self.dst)?;
        fmt_port(f, "dport", self.dst_port)
    }
}

/// The masks of every field of a [`Match`] (set bits compared); the VLAN mask is over the word
/// `tagged << 12 | vid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldMasks {
    /// The VLAN word mask (`0x1000` tag present, `0x0fff` VLAN ID).
    pub vlan: u16,
    /// The protocol mask.
    pub proto: u8,
    /// The source address mask (low 32 bits for IPv4).
    pub src: u128,
    /// The destination address mask.
    pub dst: u128,
    /// The source port mask.
    pub src_port: u16,
    /// The destination port mask.
    pub dst_port: u16,
}

impl FieldMasks {
    /// Every field compared exactly, for `family`.
    pub fn full(family: Family) -> FieldMasks {
        FieldMasks {
            vlan: VLAN_FULL,
            proto: u8::MAX,
            src: family.full_mask(),
            dst: family.full_mask(),
            src_port: u16::MAX,
            dst_port: u16::MAX,
        }
    }

    /// Whether the masks compare ports.
    pub fn needs_ports(&self) -> bool {
        self.src_port != 0 || self.dst_port != 0
    }
}

/// A filter rule: what it matches, what it does, its id and its priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The id, unique within a table.
    pub id: RuleId,
    /// The fields compared.
    pub pattern: Match,
    /// What happens to a matching packet.
    pub action: Action,
    /// Among wildcard rules, higher priorities are tried first (ties: the rule installed first
    /// wins). Precise rules are always tried before wildcard rules, whatever their priority.
    pub priority: u8,
}

impl Rule {
    /// A rule of priority 0.
    pub fn new(id: RuleId, pattern: Match, action: Action) -> Rule {
        Rule {
            id,
            pattern,
            action,
            priority: 0,
        }
    }

    /// The rule with `priority`.
    pub fn with_priority(mut self, priority: u8) -> Rule {
        self.priority = priority;
        self
    }

    /// Whether the rule is precise (see [`Match::is_precise`]).
    pub fn is_precise(&self) -> bool {
        self.pattern.is_precise()
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rule {}: {} -> {}", self.id, self.pattern, self.action)?;
        if self.priority != 0 {
            write!(f, " (priority {})", self.priority)?;
        }
        Ok(())
    }
}

/// The IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// The IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// The IP protocol number of SCTP.
pub const PROTO_SCTP: u8 = 132;

/// Whether a packet of IP protocol `proto` carries the ports the rules compare.
pub fn has_ports(proto: u8) -> bool {
    flow::has_ports(netsift_wire::IpProtocol(proto))
}

/// The tuple of one packet, as a NIC's parser sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// The VLAN ID of the outermost tag; `None` for an untagged frame.
    pub vlan: Option<u16>,
    /// The IP protocol (IPv6: the first header after the extension headers that are skipped).
    pub proto: u8,
    /// The source address.
    pub src: IpAddr,
    /// The destination address (of the same family as `src` for keys made by this crate).
    pub dst: IpAddr,
    /// `(source port, destination port)` of TCP, UDP and SCTP; `None` when the packet does not
    /// carry them (another protocol, a non-first fragment, a truncated header).
    pub ports: Option<(u16, u16)>,
}

impl FlowKey {
    /// The key of a packet of `link` as a NIC's parser sees it: `netsift-wire`'s flow-key
    /// parser bounded by [`Options::NIC`] (at most two VLAN tags, the first one's ID kept, no
    /// MPLS; a frame with a third tag is not IP). `None` when the packet is not IPv4/IPv6 or is
    /// truncated before the end of the IP addresses. Never panics.
    #[inline(always)]
    pub fn of(link: LinkType, data: &[u8]) -> Option<FlowKey> {
        flow::parse_with(link, data, &Options::NIC).map(|f| FlowKey {
            vlan: f.vlan,
            proto: f.key.proto.0,
            src: f.key.src,
            dst: f.key.dst,
            ports: f.key.ports,
        })
    }

    /// The key of an Ethernet frame (`LINKTYPE_ETHERNET`): [`FlowKey::of`].
    pub fn from_frame(frame: &[u8]) -> Option<FlowKey> {
        FlowKey::of(LinkType::ETHERNET, frame)
    }

    /// The key of a raw IP packet (`LINKTYPE_RAW`: the version nibble decides), without VLAN:
    /// [`FlowKey::of`].
    pub fn from_ip(packet: &[u8]) -> Option<FlowKey> {
        FlowKey::of(LinkType::RAW, packet)
    }

    /// The family of the key (that of `src`).
    pub fn family(&self) -> Family {
        Family::of(self.src)
    }

    /// The VLAN word `tagged << 12 | vid` that VLAN masks apply to.
    pub(crate) fn vlan_word(&self) -> u16 {
        match self.vlan {
            Some(vid) => VLAN_TAGGED | (vid & VID_MASK),
            None => 0,
        }
    }
}

/// The key a precise rule is stored under, and that a packet is looked up with: every field of
/// the tuple, each already masked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TupleKey {
    pub v6: bool,
    pub vlan_mask: u16,
    pub vlan: u16,
    pub proto: u8,
    pub src: u128,
    pub dst: u128,
    pub src_port: u16,
    pub dst_port: u16,
}

impl TupleKey {
    /// The key of a match (its values are already masked).
    pub fn of_match(m: &Match) -> TupleKey {
        TupleKey {
            v6: m.family == Family::V6,
            vlan_mask: m.vlan.mask(),
            vlan: m.vlan.value(),
            proto: m.proto.value(),
            src: m.src.value(),
            dst: m.dst.value(),
            src_port: m.src_port.value(),
            dst_port: m.dst_port.value(),
        }
    }

    /// The key of a packet under `masks`, or `None` when the masks compare ports that the
    /// packet does not have, or the key mixes families.
    pub fn of_key(key: &FlowKey, masks: &FieldMasks) -> Option<TupleKey> {
        let family = key.family();
        if Family::of(key.dst) != family {
            return None;
        }
        let (sp, dp) = match key.ports {
            Some(p) => p,
            None if masks.needs_ports() => return None,
            None => (0, 0),
        };
        Some(TupleKey {
            v6: family == Family::V6,
            vlan_mask: masks.vlan,
            vlan: key.vlan_word() & masks.vlan,
            proto: key.proto & masks.proto,
            src: addr_bits(key.src) & masks.src,
            dst: addr_bits(key.dst) & masks.dst,
            src_port: sp & masks.src_port,
            dst_port: dp & masks.dst_port,
        })
    }

    /// A 32-bit hash of the key (FNV-1a over its fields), the emulated Flow Director signature.
    pub fn signature(&self) -> u32 {
        let mut h: u32 = 0x811c_9dc5;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h ^= u32::from(b);
                h = h.wrapping_mul(0x0100_0193);
            }
        };
        eat(&[u8::from(self.v6), self.proto]);
        eat(&self.vlan_mask.to_be_bytes());
        eat(&self.vlan.to_be_bytes());
        eat(&self.src.to_be_bytes());
        eat(&self.dst.to_be_bytes());
        eat(&self.src_port.to_be_bytes());
        eat(&self.dst_port.to_be_bytes());
        h
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use netsift_capture::generate::{FrameBuilder, TCP_SYN, XorShift64};

    pub fn v4(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    pub fn tcp4(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16) -> Vec<u8> {
        FrameBuilder::new()
            .ipv4(src, dst)
            .tcp(sp, dp, TCP_SYN)
            .build()
    }

    #[test]
    fn tcp_frame_key() {
        let f = tcp4([10, 0, 0, 1], 1234, [10, 0, 0, 2], 80);
        let k = FlowKey::from_frame(&f).unwrap();
        assert_eq!(k.vlan, None);
        assert_eq!(k.proto, PROTO_TCP);
        assert_eq!(k.src, v4("10.0.0.1"));
        assert_eq!(k.dst, v4("10.0.0.2"));
        assert_eq!(k.ports, Some((1234, 80)));
        assert_eq!(FlowKey::from_ip(&f[14..]), Some(k));
    }

    #[test]
    fn vlan_and_qinq() {
        let f = FrameBuilder::new()
            .vlan(100)
            .ipv4([1, 2, 3, 4], [5, 6, 7, 8])
            .udp(53, 5353)
            .build();
        let k = FlowKey::from_frame(&f).unwrap();
        assert_eq!(k.vlan, Some(100));
        assert_eq!(k.ports, Some((53, 5353)));
        let f = FrameBuilder::new()
            .vlan_tag(0x88a8, 0x2000 | 7)
            .vlan(200)
            .ipv4([1, 2, 3, 4], [5, 6, 7, 8])
            .udp(1, 2)
            .build();
        let k = FlowKey::from_frame(&f).unwrap();
        assert_eq!(k.vlan, Some(7), "outer tag, priority bits dropped");
        assert_eq!(k.ports, Some((1, 2)));
    }

    #[test]
    fn fragments_have_no_ports() {
        let first = FrameBuilder::new()
            .ipv4([1, 1, 1, 1], [2, 2, 2, 2])
            .fragment(0, true)
            .udp(7, 9)
            .build();
        assert_eq!(FlowKey::from_frame(&first).unwrap().ports, Some((7, 9)));
        let later = FrameBuilder::new()
            .ipv4([1, 1, 1, 1], [2, 2, 2, 2])
            .fragment(185, false)
            .udp(7, 9)
            .build();
        let k = FlowKey::from_frame(&later).unwrap();
        assert_eq!((k.proto, k.ports), (PROTO_UDP, None));
    }

    #[test]
    fn ipv6_with_extension_headers() {
        let s = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let d = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let f = FrameBuilder::new().ipv6(s, d).tcp(443, 50000, 0).build();
        let k = FlowKey::from_frame(&f).unwrap();
        assert_eq!(k.family(), Family::V6);
        assert_eq!((k.proto, k.ports), (PROTO_TCP, Some((443, 50000))));
        // Hop-by-hop (8 bytes) then UDP, built by hand.
        let mut ip = vec![0x60, 0, 0, 0, 0, 16, 0, 64];
        ip.extend_from_slice(&s);
        ip.extend_from_slice(&d);
        ip.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        ip.extend_from_slice(&[0x12, 0x34, 0x00, 0x35, 0, 8, 0, 0]);
        let k = FlowKey::from_ip(&ip).unwrap();
        assert_eq!((k.proto, k.ports), (PROTO_UDP, Some((0x1234, 53))));
        // Truncated inside the extension header: no ports, the header reached.
        let k = FlowKey::from_ip(&ip[..44]).unwrap();
        assert_eq!((k.proto, k.ports), (0, None));
        // Non-first fragment.
        ip[6] = 44;
        ip[40..48].copy_from_slice(&[17, 0, 0x00, 0x10, 0, 0, 0, 1]);
        let k = FlowKey::from_ip(&ip).unwrap();
        assert_eq!((k.proto, k.ports), (PROTO_UDP, None));
    }

    #[test]
    fn truncation_contract() {
        let f = tcp4([10, 0, 0, 1], 1234, [10, 0, 0, 2], 80);
        // 14 Ethernet + 20 IPv4: addresses present, ports not.
        let k = FlowKey::from_frame(&f[..34]).unwrap();
        assert_eq!(k.ports, None);
        assert_eq!(FlowKey::from_frame(&f[..36]).unwrap().ports, None);
        assert_eq!(
            FlowKey::from_frame(&f[..38]).unwrap().ports,
            Some((1234, 80))
        );
        for len in 0..33 {
            assert_eq!(FlowKey::from_frame(&f[..len]), None, "len {len}");
        }
        let arp = FrameBuilder::new()
            .arp_request([1, 1, 1, 1], [2, 2, 2, 2])
            .build();
        assert_eq!(FlowKey::from_frame(&arp), None);
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift64::new(9);
        let seeds = [
            tcp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2),
            FrameBuilder::new()
                .vlan(3)
                .vlan(4)
                .ipv6([1; 16], [2; 16])
                .udp(5, 6)
                .build(),
        ];
        let mut buf = [0u8; 96];
        for i in 0..20_000 {
            let len = rng.below(96) as usize;
            if i % 2 == 0 {
                rng.fill(&mut buf[..len]);
            } else {
                // Mutate a real frame so that the deeper layers are reached.
                let seed = &seeds[i / 2 % 2];
                let len = len.min(seed.len());
                buf[..len].copy_from_slice(&seed[..len]);
                let at = rng.below(len.max(1) as u64) as usize;
                if at < len {
                    buf[at] = rng.next_u64() as u8;
                }
                if len > 12 && rng.below(2) == 0 {
                    buf[12..14].copy_from_slice(&[0x81, 0x00]);
                }
            }
            let _ = FlowKey::from_frame(&buf[..len]);
            let _ = FlowKey::from_ip(&buf[..len]);
        }
    }

    #[test]
    fn matching_and_precision() {
        let f = tcp4([192, 168, 0, 10], 25, [10, 0, 0, 2], 40000);
        let k = FlowKey::from_frame(&f).unwrap();
        let m = Match::precise(&k).unwrap();
        assert!(m.is_precise() && m.matches(&k));
        assert_eq!(
            m.to_string(),
            "ip4 untagged proto 6 src 192.168.0.10 sport 25 dst 10.0.0.2 dport 40000"
        );
        let w = Match::new(Family::V4)
            .with_proto(PROTO_TCP)
            .try_src(v4("192.168.0.0"), Family::V4.prefix_mask(16))
            .unwrap()
            .with_src_port(25);
        assert!(!w.is_precise() && w.matches(&k));
        assert_eq!(w.to_string(), "ip4 proto 6 src 192.168.0.0/16 sport 25");
        let mut frag = k;
        frag.ports = None;
        assert!(!w.matches(&frag), "port rules never match a fragment");
        assert!(Match::new(Family::V4).matches(&frag));
        assert!(!Match::new(Family::V6).matches(&k));
        assert!(
            Match::new(Family::V6)
                .try_src(v4("1.2.3.4"), u128::MAX)
                .is_err()
        );
        let tagged = Match::new(Family::V4).with_vlan(VlanMatch::id(5));
        assert!(!tagged.matches(&k));
        assert!(tagged.matches(&FlowKey { vlan: Some(5), ..k }));
        assert!(!tagged.matches(&FlowKey { vlan: Some(6), ..k }));
        let untagged = Match::new(Family::V4).with_vlan(VlanMatch::Untagged);
        assert!(untagged.matches(&k) && !untagged.matches(&FlowKey { vlan: Some(0), ..k }));
        assert_eq!(tagged.vlan(), VlanMatch::id(5));
        assert_eq!(untagged.vlan(), VlanMatch::Untagged);
    }

    #[test]
    fn prefix_masks() {
        assert_eq!(Family::V4.prefix_mask(0), 0);
        assert_eq!(Family::V4.prefix_mask(24), 0xffff_ff00);
        assert_eq!(Family::V4.prefix_mask(99), 0xffff_ffff);
        assert_eq!(Family::V6.prefix_mask(128), u128::MAX);
        assert_eq!(Family::V6.prefix_mask(1), 1 << 127);
    }
}
