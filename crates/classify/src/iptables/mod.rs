//! iptables rule sets: the `filter` table's chains and rules, read from `iptables-save` output,
//! written back for `iptables-restore` and as an `nft -f` script, evaluated with iptables' chain
//! semantics, and the bridge to the five-field [`Rule`] model that decision trees are built on.
//!
//! ```text
//! iptables-save text ──parse──► Ruleset ──to_restore──► iptables-restore text
//!                                  │  └───to_nft──────► nft -f text (a documented subset)
//!                                  ├─ evaluator: verdict and path of a packet (linear, per chain)
//!                                  └─ IptRule::boxes: the 5-field boxes of a transformable rule
//! ClassBench rules ──from_classbench──► Ruleset
//! ```
//!
//! # The model
//!
//! A [`Ruleset`] holds the `filter` table ([`Ruleset::chains`]: the built-in chains `INPUT`,
//! `FORWARD` and `OUTPUT` with their policy, then the user chains in declaration order) and every
//! other table (`nat`, `mangle`, `raw`, `security`) verbatim, so that a round trip through the
//! reader and the writer loses nothing. A rule ([`IptRule`]) is a conjunction of criteria:
//!
//! - the header criteria `-s`/`-d` (address and mask; [`Addr`]), `-i`/`-o` (interface, `+`
//!   wildcard; [`Iface`]) and `-p` ([`Proto`]), each negatable with `!`;
//! - [`Match`]es in order: `-m tcp`/`-m udp` (ports as `p`, `lo:hi`, `lo:`, `:hi`; TCP flags as
//!   `--tcp-flags mask comp` or `--syn`), `-m multiport`, `-m iprange`, `-m comment`, and every
//!   other match kept verbatim as [`Opaque`] text (its quoting included) — also the header option
//!   `-f`, and known matches with an option the model does not cover (`-m tcp --tcp-option 5`);
//! - a [`Target`]: `ACCEPT`, `DROP`, `RETURN`, `REJECT [--reject-with type]`, `-j CHAIN`,
//!   `-g CHAIN`, any other known extension kept verbatim (`LOG`, `MARK`, `NFQUEUE`, …; whether it
//!   ends evaluation follows iptables: [`Target::is_terminal`]), or none (the rule only counts).
//!
//! Packet and byte counters of chains and rules are kept (`iptables-save -c`).
//!
//! # What is transformable
//!
//! [`IptRule::boxes`] gives the rule as a union of five-field boxes ([`Rule`]s: source and
//! destination address, source and destination port, protocol) when the rule's criteria say
//! exactly that: addresses with contiguous masks and `iprange` ranges, protocols, tcp/udp ports,
//! and multiport lists, each possibly negated (a negated range is its complement, at most two
//! ranges; a multiport list is a union). `-m comment` is a no-op and does not stand in the way.
//! Rules with an interface, TCP flags, a non-contiguous address mask or any [`Opaque`] match have
//! no boxes: they are evaluated by the linear evaluator only. [`IptRule::transformable`] further
//! restricts the boxes to chosen protocols ([`Protocols`]): a tree that cuts on ports can only be
//! encoded in iptables for rules of `-p tcp` or `-p udp`.
//!
//! # Evaluation
//!
//! [`Evaluator`] runs a packet ([`Packet`]: the five header fields, the TCP flags, the input and
//! output interface) through the rule set from a built-in chain, as the kernel does: rules in
//! order, the first whose criteria all hold applies its target; a jump pushes a return point, a
//! goto does not; `RETURN` or the end of a user chain returns to the rule after the last jump
//! (to the built-in chain's policy when there is none); non-terminating targets (`LOG`, `MARK`,
//! no target) continue with the next rule. Opaque matches are decided by a caller's oracle
//! (by default they do not match). The result is the verdict and the path — every rule
//! examined, in order; its length is the "rules visited" metric of the HiTables simulation.
//!
//! # Checks
//!
//! The reader accepts what `iptables-restore` accepts of `iptables-save`'s format and rejects,
//! with line and column, what it rejects: unknown options, missing arguments, bad addresses and
//! ports, `lo > hi`, `--dport` without `-p tcp|udp`, duplicate options, `-o` in `INPUT`,
//! undeclared chains, jumps to built-in or unknown chains, jump loops (as the kernel rejects
//! them at load time), missing `COMMIT`. It never panics, whatever the input.
//!
//! NOTE: limits of the model. Packets are unfragmented (the kernel's tcp/udp matches never
//! match a non-first fragment; `-f` is opaque). Host and service names are not resolved
//! (`iptables-save` writes numbers). Only `-A` lines are read (`iptables-save`'s output; not
//! `-I`, `-N`, `-P`…). nf_tables — `iptables-nft`, the default `iptables` of current
//! distributions, and `nft` — refuses user chains nested more than 15 deep from a built-in chain,
//! gotos included; legacy iptables does not: [`Ruleset::jump_depth`] measures it, the reader
//! does not reject it, [`Ruleset::to_nft`] does.

use std::fmt;

use crate::{Field, Range, Rule};

mod check;
mod convert;
mod eval;
mod lex;
mod nft;
mod parse;
mod write;

pub use convert::{Conversion, ConvertOptions, classbench_target, from_classbench};
pub use eval::{EvalError, Evaluation, Evaluator, Packet, Step, Verdict};
pub use nft::TranslateError;
pub use parse::{Error, ErrorKind, parse};

/// The built-in chains of the `filter` table, in `iptables-save`'s order.
pub const BUILTIN_CHAINS: [&str; 3] = ["INPUT", "FORWARD", "OUTPUT"];

/// A rule set: the `filter` table, and the other tables verbatim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ruleset {
    /// The chains of the `filter` table: the built-in chains first, then the user chains.
    /// Empty when the text had no `*filter` block (nothing is then written for it).
    pub chains: Vec<Chain>,
    /// The other tables, in their order in the text.
    pub other_tables: Vec<RawTable>,
}

/// A table other than `filter`, kept as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawTable {
    /// The table's name (`nat`, `mangle`, `raw`, `security`).
    pub name: String,
    /// Its lines from `*name` to `COMMIT`, each ending in a newline.
    pub text: String,
}

/// The policy of a built-in chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// `ACCEPT`.
    Accept,
    /// `DROP`.
    Drop,
}

impl Policy {
    /// `ACCEPT` or `DROP`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Accept => "ACCEPT",
            Policy::Drop => "DROP",
        }
    }
}

/// Packet and byte counters (`[packets:bytes]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counters {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

/// A chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// Its name.
    pub name: String,
    /// The policy of a built-in chain; `None` for a user chain.
    pub policy: Option<Policy>,
    /// The chain's counters (`iptables-save` always writes them; zero when the text had none).
    pub counters: Counters,
    /// The rules, in order.
    pub rules: Vec<IptRule>,
}

impl Chain {
    /// A built-in chain with its policy and no rules.
    pub fn builtin(name: &str, policy: Policy) -> Chain {
        Chain {
            name: name.to_string(),
            policy: Some(policy),
            counters: Counters::default(),
            rules: Vec::new(),
        }
    }

    /// A user chain with no rules.
    pub fn user(name: &str) -> Chain {
        Chain {
            name: name.to_string(),
            policy: None,
            counters: Counters::default(),
            rules: Vec::new(),
        }
    }

    /// Whether this is one of the built-in chains of the `filter` table.
    pub fn is_builtin(&self) -> bool {
        BUILTIN_CHAINS.contains(&self.name.as_str())
    }
}

/// `-s` or `-d`: the addresses `a` with `a & mask == addr`, or all others when negated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Addr {
    /// The address, with the bits outside `mask` cleared.
    pub addr: u32,
    /// The mask (contiguous for a prefix `/len`; any for a dotted mask).
    pub mask: u32,
    /// `!`.
    pub negated: bool,
}

impl Addr {
    /// The prefix `addr/len` (`len` ≤ 32; host bits are cleared).
    pub fn prefix(addr: u32, len: u8, negated: bool) -> Addr {
        let mask = prefix_mask(len);
        Addr {
            addr: addr & mask,
            mask,
            negated,
        }
    }

    /// The prefix length, when the mask is contiguous.
    pub fn prefix_len(&self) -> Option<u8> {
        let len = self.mask.leading_ones();
        (prefix_mask(len as u8) == self.mask).then_some(len as u8)
    }

    /// Whether address `a` satisfies the criterion.
    #[inline]
    pub fn matches(&self, a: u32) -> bool {
        (a & self.mask == self.addr) != self.negated
    }

    /// The criterion as ranges of addresses, when the mask is contiguous.
    pub fn ranges(&self) -> Option<Vec<Range>> {
        let len = self.prefix_len()?;
        Some(negate(
            Range::prefix(self.addr, len),
            self.negated,
            Field::SrcIp,
        ))
    }
}

fn prefix_mask(len: u8) -> u32 {
    match len {
        0 => 0,
        l => u32::MAX << (32 - u32::from(l.min(32))),
    }
}

/// The complement of `r` in `field`'s domain (at most two ranges) when `negated`, else `r`.
fn negate(r: Range, negated: bool, field: Field) -> Vec<Range> {
    if !negated {
        return vec![r];
    }
    let mut out = Vec::with_capacity(2);
    if r.lo > 0 {
        out.push(Range {
            lo: 0,
            hi: r.lo - 1,
        });
    }
    if r.hi < field.max() {
        out.push(Range {
            lo: r.hi + 1,
            hi: field.max(),
        });
    }
    out
}

/// `-i` or `-o`: an interface name, a trailing `+` matching every name with that prefix.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Iface {
    /// The name as written (at most 15 characters, `+` included).
    pub name: String,
    /// `!`.
    pub negated: bool,
}

impl Iface {
    /// Whether interface `name` (empty: none) satisfies the criterion.
    pub fn matches(&self, name: &str) -> bool {
        let hit = match self.name.strip_suffix('+') {
            Some(prefix) => name.starts_with(prefix),
            None => name == self.name,
        };
        hit != self.negated
    }
}

/// `-p`: an IP protocol number (`-p all` is no criterion at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Proto {
    /// The protocol number, 1..=255.
    pub number: u8,
    /// `!`.
    pub negated: bool,
}

impl Proto {
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// ICMP.
    pub const ICMP: u8 = 1;

    /// `-p number`.
    pub fn is(number: u8) -> Proto {
        Proto {
            number,
            negated: false,
        }
    }

    /// Whether protocol `p` satisfies the criterion.
    #[inline]
    pub fn matches(&self, p: u32) -> bool {
        (p == u32::from(self.number)) != self.negated
    }
}

/// A negatable range of ports or addresses (`--sport 1000:2000`, `! --src-range a-b`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RangeMatch {
    /// The range.
    pub range: Range,
    /// `!`.
    pub negated: bool,
}

impl RangeMatch {
    /// The range, not negated.
    pub fn new(range: Range) -> RangeMatch {
        RangeMatch {
            range,
            negated: false,
        }
    }

    /// Whether `v` satisfies the criterion.
    #[inline]
    pub fn matches(&self, v: u32) -> bool {
        self.range.contains(v) != self.negated
    }
}

/// `--tcp-flags mask comp` (`--syn` is `FIN,SYN,RST,ACK SYN`): the flags under `mask` equal
/// `comp`, or differ when negated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcpFlags {
    /// The flags examined (FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10, URG 0x20).
    pub mask: u8,
    /// The flags that must be set among them.
    pub comp: u8,
    /// `!`.
    pub negated: bool,
}

impl TcpFlags {
    /// `--syn`.
    pub const SYN: TcpFlags = TcpFlags {
        mask: 0x17,
        comp: 0x02,
        negated: false,
    };

    /// Whether a segment with `flags` satisfies the criterion.
    #[inline]
    pub fn matches(&self, flags: u8) -> bool {
        (flags & self.mask == self.comp) != self.negated
    }
}

/// `-m tcp` or `-m udp` (explicit or implied by `-p tcp|udp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PortMatch {
    /// `--sport`.
    pub sport: Option<RangeMatch>,
    /// `--dport`.
    pub dport: Option<RangeMatch>,
    /// `--tcp-flags` or `--syn` (TCP only).
    pub flags: Option<TcpFlags>,
}

/// Which ports a multiport list applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortDir {
    /// `--sports`.
    Source,
    /// `--dports`.
    Destination,
    /// `--ports`: the source or the destination port.
    Either,
}

/// `-m multiport`: a port in a list of ports and ranges (at most 15 entries, a range counting
/// two).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Multiport {
    /// Which ports.
    pub dir: PortDir,
    /// The list, in the text's order.
    pub ports: Vec<Range>,
    /// `!`: no port (of the chosen direction; for `--ports`, neither) is in the list.
    pub negated: bool,
}

impl Multiport {
    /// Whether a packet with these ports satisfies the criterion.
    pub fn matches(&self, sport: u32, dport: u32) -> bool {
        let any = |p: u32| self.ports.iter().any(|r| r.contains(p));
        let hit = match self.dir {
            PortDir::Source => any(sport),
            PortDir::Destination => any(dport),
            PortDir::Either => any(sport) || any(dport),
        };
        hit != self.negated
    }
}

/// `-m iprange`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IpRange {
    /// `--src-range`.
    pub src: Option<RangeMatch>,
    /// `--dst-range`.
    pub dst: Option<RangeMatch>,
}

/// A match the model does not interpret, kept as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Opaque {
    /// The words as written, quotes included, separated by single spaces: `-m conntrack
    /// --ctstate RELATED,ESTABLISHED`, `! -f`, `--icmp-type 8` (after `-p icmp`).
    pub text: String,
}

impl Opaque {
    /// The words of the text with quotes removed.
    pub fn words(&self) -> Vec<String> {
        lex::words(&self.text)
            .map(|w| w.into_iter().map(|w| w.text).collect())
            .unwrap_or_default()
    }
}

/// A match of a rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Match {
    /// `-m tcp`.
    Tcp(PortMatch),
    /// `-m udp` (its `flags` are always `None`).
    Udp(PortMatch),
    /// `-m multiport`.
    Multiport(Multiport),
    /// `-m iprange`.
    IpRange(IpRange),
    /// `-m comment --comment text`: matches every packet.
    Comment(String),
    /// Anything else, verbatim.
    Opaque(Opaque),
}

/// What a rule does when it matches.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// No `-j`: the rule only counts; evaluation continues.
    None,
    /// `ACCEPT`.
    Accept,
    /// `DROP`.
    Drop,
    /// `RETURN`.
    Return,
    /// `REJECT`, with the type of `--reject-with` when given (`icmp-port-unreachable`,
    /// `tcp-reset`, …).
    Reject(Option<String>),
    /// `-j CHAIN`: a user chain, then back.
    Jump(String),
    /// `-g CHAIN`: a user chain, not back.
    Goto(String),
    /// Another target, with its options verbatim.
    Extension {
        /// The target's name (`LOG`, `MARK`, `NFQUEUE`, …).
        name: String,
        /// The options as written, quotes included (may be empty).
        args: String,
    },
}

/// Extension targets after which evaluation stops.
const TERMINAL_EXTENSIONS: [&str; 4] = ["QUEUE", "NFQUEUE", "SYNPROXY", "TARPIT"];

/// Extension targets after which evaluation continues with the next rule.
const CONTINUING_EXTENSIONS: [&str; 21] = [
    "AUDIT",
    "CHECKSUM",
    "CLASSIFY",
    "CONNMARK",
    "CONNSECMARK",
    "DSCP",
    "ECN",
    "HMARK",
    "IDLETIMER",
    "LED",
    "LOG",
    "MARK",
    "NFLOG",
    "RATEEST",
    "SECMARK",
    "SET",
    "TCPMSS",
    "TEE",
    "TOS",
    "TRACE",
    "TTL",
];

/// Whether `name` is a target rather than a chain: the standard verdicts, `REJECT` and the
/// known extensions.
pub fn is_target_name(name: &str) -> bool {
    matches!(name, "ACCEPT" | "DROP" | "RETURN" | "REJECT")
        || TERMINAL_EXTENSIONS.contains(&name)
        || CONTINUING_EXTENSIONS.contains(&name)
}

impl Target {
    /// Whether evaluation stops at this target (a jump or a goto does not stop it, `RETURN`
    /// does, in its way).
    pub fn is_terminal(&self) -> bool {
        match self {
            Target::Accept | Target::Drop | Target::Reject(_) | Target::Return => true,
            Target::None | Target::Jump(_) | Target::Goto(_) => false,
            Target::Extension { name, .. } => !CONTINUING_EXTENSIONS.contains(&name.as_str()),
        }
    }

    /// The chain a jump or goto goes to.
    pub fn chain(&self) -> Option<&str> {
        match self {
            Target::Jump(c) | Target::Goto(c) => Some(c),
            _ => None,
        }
    }
}

/// One rule: criteria, matches and a target.
///
/// Equality ignores [`line`](IptRule::line), so that a rule set equals itself read back from
/// its own text.
#[derive(Clone, Debug, Eq)]
pub struct IptRule {
    /// The rule's counters, when the text gave them.
    pub counters: Option<Counters>,
    /// `-s`.
    pub src: Option<Addr>,
    /// `-d`.
    pub dst: Option<Addr>,
    /// `-i`.
    pub in_iface: Option<Iface>,
    /// `-o`.
    pub out_iface: Option<Iface>,
    /// `-p` (`None`: any protocol).
    pub proto: Option<Proto>,
    /// The matches, in order.
    pub matches: Vec<Match>,
    /// The target.
    pub target: Target,
    /// The line the rule was read from (1-based; 0 when built in code).
    pub line: usize,
}

impl PartialEq for IptRule {
    fn eq(&self, o: &IptRule) -> bool {
        self.counters == o.counters
            && self.src == o.src
            && self.dst == o.dst
            && self.in_iface == o.in_iface
            && self.out_iface == o.out_iface
            && self.proto == o.proto
            && self.matches == o.matches
            && self.target == o.target
    }
}

impl IptRule {
    /// A rule with no criteria and the given target.
    pub fn new(target: Target) -> IptRule {
        IptRule {
            counters: None,
            src: None,
            dst: None,
            in_iface: None,
            out_iface: None,
            proto: None,
            matches: Vec::new(),
            target,
            line: 0,
        }
    }

    /// The comments of the rule's `-m comment` matches.
    pub fn comments(&self) -> impl Iterator<Item = &str> {
        self.matches.iter().filter_map(|m| match m {
            Match::Comment(c) => Some(c.as_str()),
            _ => None,
        })
    }

    /// Whether the rule has an [`Opaque`] match.
    pub fn has_opaque(&self) -> bool {
        self.matches.iter().any(|m| matches!(m, Match::Opaque(_)))
    }

    /// The rule as a union of five-field boxes — exactly the headers it matches — when its
    /// criteria are all expressible that way (see the [module documentation](self)); `None`
    /// otherwise. An empty list is a rule that matches no header. Every box carries the rule's
    /// line. `None` too when the union would take more than 4096 boxes (negated multiport
    /// lists multiply).
    pub fn boxes(&self) -> Option<Vec<Rule>> {
        if self.in_iface.is_some() || self.out_iface.is_some() {
            return None;
        }
        // A union of boxes, intersected with each criterion's union in turn.
        let full: [Range; 5] = Field::ALL.map(Range::any);
        let mut acc = vec![full];
        let mut and = |alts: Vec<[Range; 5]>| -> Option<()> {
            let mut next = Vec::new();
            for a in &acc {
                for b in &alts {
                    if let Some(i) = intersect(a, b) {
                        next.push(i);
                    }
                }
            }
            if next.len() > 4096 {
                return None;
            }
            acc = next;
            Some(())
        };
        let on = |field: Field, ranges: Vec<Range>| -> Vec<[Range; 5]> {
            ranges
                .into_iter()
                .map(|r| {
                    let mut b = full;
                    b[field as usize] = r;
                    b
                })
                .collect()
        };
        let ranged = |field: Field, m: &RangeMatch| on(field, negate(m.range, m.negated, field));
        if let Some(a) = &self.src {
            and(on(Field::SrcIp, a.ranges()?))?;
        }
        if let Some(a) = &self.dst {
            and(on(Field::DstIp, a.ranges()?))?;
        }
        if let Some(p) = &self.proto {
            let r = Range::new(u32::from(p.number), u32::from(p.number))?;
            and(on(Field::Proto, negate(r, p.negated, Field::Proto)))?;
        }
        for m in &self.matches {
            match m {
                Match::Tcp(pm) | Match::Udp(pm) => {
                    if pm.flags.is_some() {
                        return None;
                    }
                    if let Some(s) = &pm.sport {
                        and(ranged(Field::SrcPort, s))?;
                    }
                    if let Some(d) = &pm.dport {
                        and(ranged(Field::DstPort, d))?;
                    }
                }
                Match::Multiport(mp) => {
                    let list = union(&mp.ports);
                    let set = if mp.negated {
                        complement(&list, 0xffff)
                    } else {
                        list
                    };
                    let alts = match (mp.dir, mp.negated) {
                        (PortDir::Source, _) => on(Field::SrcPort, set),
                        (PortDir::Destination, _) => on(Field::DstPort, set),
                        (PortDir::Either, false) => {
                            let mut v = on(Field::SrcPort, set.clone());
                            v.extend(on(Field::DstPort, set));
                            v
                        }
                        // Neither port in the list: both in the complement.
                        (PortDir::Either, true) => {
                            let mut v = Vec::new();
                            for s in &set {
                                for d in &set {
                                    let mut b = full;
                                    b[Field::SrcPort as usize] = *s;
                                    b[Field::DstPort as usize] = *d;
                                    v.push(b);
                                }
                            }
                            v
                        }
                    };
                    and(alts)?;
                }
                Match::IpRange(ir) => {
                    if let Some(s) = &ir.src {
                        and(ranged(Field::SrcIp, s))?;
                    }
                    if let Some(d) = &ir.dst {
                        and(ranged(Field::DstIp, d))?;
                    }
                }
                Match::Comment(_) => {}
                Match::Opaque(_) => return None,
            }
        }
        Some(
            acc.into_iter()
                .map(|fields| Rule {
                    fields,
                    flags: crate::Flags::ANY,
                    line: self.line,
                })
                .collect(),
        )
    }

    /// [`boxes`](IptRule::boxes), for rules whose protocol `protocols` admits only.
    pub fn transformable(&self, protocols: &Protocols) -> Option<Vec<Rule>> {
        if !protocols.admits(self.proto) {
            return None;
        }
        self.boxes()
    }
}

fn intersect(a: &[Range; 5], b: &[Range; 5]) -> Option<[Range; 5]> {
    let mut out = *a;
    for i in 0..5 {
        out[i] = Range::new(a[i].lo.max(b[i].lo), a[i].hi.min(b[i].hi))?;
    }
    Some(out)
}

/// The ranges sorted and merged (overlapping or adjacent ones joined).
fn union(ranges: &[Range]) -> Vec<Range> {
    let mut v = ranges.to_vec();
    v.sort_by_key(|r| r.lo);
    let mut out: Vec<Range> = Vec::with_capacity(v.len());
    for r in v {
        match out.last_mut() {
            Some(last) if r.lo <= last.hi.saturating_add(1) => last.hi = last.hi.max(r.hi),
            _ => out.push(r),
        }
    }
    out
}

/// The values of `0..=max` outside sorted, merged `ranges`.
fn complement(ranges: &[Range], max: u32) -> Vec<Range> {
    let mut out = Vec::new();
    let mut next = 0u32;
    for r in ranges {
        if r.lo > next {
            out.push(Range {
                lo: next,
                hi: r.lo - 1,
            });
        }
        if r.hi >= max {
            return out;
        }
        next = r.hi + 1;
    }
    out.push(Range { lo: next, hi: max });
    out
}

/// The protocols whose rules a decision tree may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Protocols {
    /// Rules of any protocol (and rules without `-p`).
    Any,
    /// Rules with `-p` one of these (not negated) only.
    Only(Vec<u8>),
}

impl Protocols {
    /// `-p tcp` and `-p udp` only: the rules whose ports iptables can match (the HiTables
    /// setting).
    pub fn tcp_udp() -> Protocols {
        Protocols::Only(vec![Proto::TCP, Proto::UDP])
    }

    /// Whether a rule with protocol criterion `p` is admitted.
    pub fn admits(&self, p: Option<Proto>) -> bool {
        match (self, p) {
            (Protocols::Any, _) => true,
            (Protocols::Only(list), Some(p)) => !p.negated && list.contains(&p.number),
            (Protocols::Only(_), None) => false,
        }
    }
}

impl Ruleset {
    /// The index of chain `name`.
    pub fn chain_index(&self, name: &str) -> Option<usize> {
        self.chains.iter().position(|c| c.name == name)
    }

    /// Chain `name`.
    pub fn chain(&self, name: &str) -> Option<&Chain> {
        self.chains.iter().find(|c| c.name == name)
    }

    /// An empty `filter` table: the built-in chains with policy `ACCEPT`, as in a fresh
    /// network namespace.
    pub fn new_filter() -> Ruleset {
        Ruleset {
            chains: BUILTIN_CHAINS
                .iter()
                .map(|n| Chain::builtin(n, Policy::Accept))
                .collect(),
            other_tables: Vec::new(),
        }
    }

    /// Checks what the reader checks of a rule set built in code: built-in chains present
    /// with a policy, user chains without one, names valid and unique, every rule's options
    /// consistent (`--dport` with `-p tcp|udp`, …), jumps to declared user chains, no jump
    /// loop. Errors name the rule's line and column 1.
    pub fn validate(&self) -> Result<(), Error> {
        check::validate(self)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(lo: u32, hi: u32) -> Range {
        Range { lo, hi }
    }

    #[test]
    fn addresses_and_masks() {
        let a = Addr::prefix(0x0a01_0203, 8, false);
        assert_eq!((a.addr, a.prefix_len()), (0x0a00_0000, Some(8)));
        assert!(a.matches(0x0aff_0000) && !a.matches(0x0b00_0000));
        assert_eq!(a.ranges(), Some(vec![r(0x0a00_0000, 0x0aff_ffff)]));
        let n = Addr::prefix(0x0a00_0000, 8, true);
        assert_eq!(
            n.ranges(),
            Some(vec![r(0, 0x09ff_ffff), r(0x0b00_0000, u32::MAX)])
        );
        assert_eq!(Addr::prefix(0, 0, true).ranges(), Some(vec![]));
        assert_eq!(Addr::prefix(5, 32, false).prefix_len(), Some(32));
        let odd = Addr {
            addr: 0x0a00_0000,
            mask: 0xff00_ff00,
            negated: false,
        };
        assert_eq!(odd.prefix_len(), None);
        assert_eq!(odd.ranges(), None);
        assert!(odd.matches(0x0a55_0055) && !odd.matches(0x0a55_0155));
    }

    #[test]
    fn interfaces() {
        let eth = Iface {
            name: "eth+".into(),
            negated: false,
        };
        assert!(eth.matches("eth0") && eth.matches("eth") && !eth.matches("lo"));
        let lo = Iface {
            name: "lo".into(),
            negated: true,
        };
        assert!(!lo.matches("lo") && lo.matches("lo0") && lo.matches(""));
    }

    #[test]
    fn sets_of_ranges() {
        assert_eq!(
            union(&[r(5, 6), r(1, 2), r(3, 3), r(10, 20), r(12, 30)]),
            [r(1, 3), r(5, 6), r(10, 30)]
        );
        assert_eq!(
            complement(&[r(1, 6), r(10, 30)], 40),
            [r(0, 0), r(7, 9), r(31, 40)]
        );
        assert_eq!(complement(&[r(0, 40)], 40), []);
        assert_eq!(complement(&[], 40), [r(0, 40)]);
        assert_eq!(complement(&[r(0, 3)], 0xffff), [r(4, 0xffff)]);
    }

    #[test]
    fn boxes_of_criteria() {
        let mut rule = IptRule::new(Target::Accept);
        rule.line = 7;
        rule.proto = Some(Proto {
            number: 6,
            negated: false,
        });
        rule.matches.push(Match::Tcp(PortMatch {
            sport: None,
            dport: Some(RangeMatch {
                range: r(80, 80),
                negated: true,
            }),
            flags: None,
        }));
        rule.matches.push(Match::Comment("x".into()));
        let b = rule.boxes().unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].fields[3], r(0, 79));
        assert_eq!(b[1].fields[3], r(81, 65535));
        assert_eq!(b[0].fields[4], r(6, 6));
        assert_eq!(b[0].line, 7);
        assert_eq!(
            rule.transformable(&Protocols::tcp_udp()).map(|b| b.len()),
            Some(2)
        );
        assert_eq!(rule.transformable(&Protocols::Only(vec![17])), None);
        // Multiport --ports: either port; negated: neither.
        rule.matches = vec![Match::Multiport(Multiport {
            dir: PortDir::Either,
            ports: vec![r(1, 2), r(3, 3)],
            negated: false,
        })];
        let b = rule.boxes().unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].fields[2], b[0].fields[3]), (r(1, 3), r(0, 65535)));
        assert_eq!((b[1].fields[2], b[1].fields[3]), (r(0, 65535), r(1, 3)));
        rule.matches[0] = Match::Multiport(Multiport {
            dir: PortDir::Either,
            ports: vec![r(1, 2), r(10, 10)],
            negated: true,
        });
        // Complement {0, 3..9, 11..65535}, squared.
        assert_eq!(rule.boxes().unwrap().len(), 9);
        // What trees cannot take.
        let mut flags = IptRule::new(Target::Drop);
        flags.proto = Some(Proto::is(6));
        flags.matches.push(Match::Tcp(PortMatch {
            flags: Some(TcpFlags::SYN),
            ..PortMatch::default()
        }));
        assert_eq!(flags.boxes(), None);
        let mut iface = IptRule::new(Target::Drop);
        iface.in_iface = Some(Iface {
            name: "lo".into(),
            negated: false,
        });
        assert_eq!(iface.boxes(), None);
        let mut opaque = IptRule::new(Target::Drop);
        opaque.matches.push(Match::Opaque(Opaque {
            text: "-m conntrack --ctstate NEW".into(),
        }));
        assert_eq!(opaque.boxes(), None);
        // A rule that can match nothing has no boxes at all.
        let mut never = IptRule::new(Target::Drop);
        never.src = Some(Addr::prefix(0, 0, true));
        assert_eq!(never.boxes(), Some(vec![]));
        // No criterion: the whole space, any protocol.
        let all = IptRule::new(Target::Drop).boxes().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].fields[4], r(0, 255));
        assert_eq!(
            IptRule::new(Target::Drop).transformable(&Protocols::tcp_udp()),
            None
        );
    }

    /// xorshift64*, for property tests that reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn chance(&mut self, num: u64, den: u64) -> bool {
            self.below(den) < num
        }
        /// Mostly values near a few boundaries, sometimes anything.
        fn near(&mut self, points: &[u32], max: u32) -> u32 {
            if self.chance(1, 4) {
                return (self.next() as u32) % max.saturating_add(1).max(1);
            }
            let p = points[self.below(points.len() as u64) as usize];
            let d = self.below(3) as u32;
            if self.chance(1, 2) {
                p.saturating_add(d).min(max)
            } else {
                p.saturating_sub(d)
            }
        }
    }

    const ADDRS: [u32; 5] = [0, 0x0a00_0000, 0x0a01_0200, 0xc0a8_0001, u32::MAX];
    const PORTS: [u32; 5] = [0, 22, 80, 1024, 65535];

    fn rand_range(rng: &mut Rng, points: &[u32], max: u32) -> Range {
        let (a, b) = (rng.near(points, max), rng.near(points, max));
        Range {
            lo: a.min(b),
            hi: a.max(b),
        }
    }

    fn rand_rm(rng: &mut Rng, points: &[u32], max: u32) -> Option<RangeMatch> {
        rng.chance(1, 2).then(|| RangeMatch {
            range: rand_range(rng, points, max),
            negated: rng.chance(1, 3),
        })
    }

    fn rand_addr(rng: &mut Rng) -> Option<Addr> {
        if rng.chance(1, 2) {
            return None;
        }
        let a = rng.near(&ADDRS, u32::MAX);
        let negated = rng.chance(1, 3);
        Some(if rng.chance(1, 5) {
            let mask = rng.next() as u32;
            Addr {
                addr: a & mask,
                mask,
                negated,
            }
        } else {
            Addr::prefix(a, rng.below(33) as u8, negated)
        })
    }

    const COMMENT_CHARS: [char; 10] = ['a', 'Z', '0', '-', '_', ' ', '"', '\\', '\'', 'é'];

    /// A random valid rule for chain `chain` (jumping only to `later` chains).
    fn rand_rule(rng: &mut Rng, chain: &str, later: &[String]) -> IptRule {
        let mut r = IptRule::new(Target::None);
        r.src = rand_addr(rng);
        r.dst = rand_addr(rng);
        if rng.chance(1, 6) && chain != "OUTPUT" {
            r.in_iface = Some(Iface {
                name: ["eth0", "eth+", "lo"][rng.below(3) as usize].into(),
                negated: rng.chance(1, 3),
            });
        }
        if rng.chance(1, 6) && chain != "INPUT" {
            r.out_iface = Some(Iface {
                name: ["eth1", "w+"][rng.below(2) as usize].into(),
                negated: rng.chance(1, 3),
            });
        }
        let proto = [0u8, 6, 6, 17, 17, 1, 47][rng.below(7) as usize];
        if proto != 0 {
            r.proto = Some(Proto {
                number: proto,
                negated: rng.chance(1, 6),
            });
        }
        let positive = r.proto.filter(|p| !p.negated).map(|p| p.number);
        for _ in 0..rng.below(4) {
            let m = match rng.below(6) {
                0 | 1 if matches!(positive, Some(6 | 17)) => {
                    let pm = PortMatch {
                        sport: rand_rm(rng, &PORTS, 0xffff),
                        dport: rand_rm(rng, &PORTS, 0xffff),
                        flags: (positive == Some(6) && rng.chance(1, 4)).then(|| TcpFlags {
                            mask: rng.below(64) as u8,
                            comp: rng.below(64) as u8,
                            negated: rng.chance(1, 3),
                        }),
                    };
                    if positive == Some(6) {
                        Match::Tcp(pm)
                    } else {
                        Match::Udp(pm)
                    }
                }
                2 if matches!(positive, Some(6 | 17)) => {
                    let mut ports = Vec::new();
                    let mut slots = 0;
                    while slots < 1 || (slots < 14 && rng.chance(2, 3)) {
                        let range = if rng.chance(1, 2) {
                            let p = rng.near(&PORTS, 0xffff);
                            Range { lo: p, hi: p }
                        } else {
                            rand_range(rng, &PORTS, 0xffff)
                        };
                        slots += if range.lo == range.hi { 1 } else { 2 };
                        ports.push(range);
                    }
                    let dir = [PortDir::Source, PortDir::Destination, PortDir::Either]
                        [rng.below(3) as usize];
                    Match::Multiport(Multiport {
                        dir,
                        ports,
                        negated: rng.chance(1, 3),
                    })
                }
                3 => {
                    let (src, dst) = (
                        rand_rm(rng, &ADDRS, u32::MAX),
                        rand_rm(rng, &ADDRS, u32::MAX),
                    );
                    if src.is_none() && dst.is_none() {
                        continue;
                    }
                    Match::IpRange(IpRange { src, dst })
                }
                4 => Match::Comment(
                    (0..rng.below(12))
                        .map(|_| COMMENT_CHARS[rng.below(10) as usize])
                        .collect(),
                ),
                5 if rng.chance(1, 3) => Match::Opaque(Opaque {
                    text: [
                        "-m conntrack --ctstate NEW",
                        "! -f",
                        "-m limit --limit 3/s",
                        "-m string --string \"a b\" --algo bm",
                    ][rng.below(4) as usize]
                        .into(),
                }),
                _ => continue,
            };
            r.matches.push(m);
        }
        r.target = match rng.below(9) {
            0 => Target::None,
            1 => Target::Accept,
            2 => Target::Drop,
            3 => Target::Return,
            4 => Target::Reject(if positive == Some(6) && rng.chance(1, 2) {
                Some("tcp-reset".into())
            } else {
                None
            }),
            5 | 6 if !later.is_empty() => {
                let c = later[rng.below(later.len() as u64) as usize].clone();
                if rng.chance(1, 2) {
                    Target::Jump(c)
                } else {
                    Target::Goto(c)
                }
            }
            7 => Target::Extension {
                name: "LOG".into(),
                args: "--log-prefix \"x: \"".into(),
            },
            8 => Target::Extension {
                name: "NFQUEUE".into(),
                args: "--queue-num 3".into(),
            },
            _ => Target::Accept,
        };
        if rng.chance(1, 5) {
            r.counters = Some(Counters {
                packets: rng.below(1000),
                bytes: rng.next() >> 20,
            });
        }
        r
    }

    fn rand_ruleset(rng: &mut Rng) -> Ruleset {
        let mut rs = Ruleset::new_filter();
        rs.chains[0].policy = Some(Policy::Drop);
        let users: Vec<String> = (0..rng.below(4)).map(|i| format!("u{i}")).collect();
        for u in &users {
            rs.chains.push(Chain::user(u));
        }
        for ci in 0..rs.chains.len() {
            let name = rs.chains[ci].name.clone();
            // Built-in chains jump to any user chain; user chain i to the ones after it.
            let later: Vec<String> = match name.strip_prefix('u') {
                Some(i) => users[i.parse::<usize>().unwrap() + 1..].to_vec(),
                None => users.clone(),
            };
            let n = rng.below(6);
            rs.chains[ci].rules = (0..n).map(|_| rand_rule(rng, &name, &later)).collect();
            if rng.chance(1, 3) {
                rs.chains[ci].counters = Counters {
                    packets: 1,
                    bytes: 2,
                };
            }
        }
        rs
    }

    fn rand_packet(rng: &mut Rng) -> eval::Packet<'static> {
        let p = eval::Packet::new(crate::Header(
            [
                rng.near(&ADDRS, u32::MAX),
                rng.near(&ADDRS, u32::MAX),
                rng.near(&PORTS, 0xffff),
                rng.near(&PORTS, 0xffff),
                [1, 6, 17, 47, 0][rng.below(5) as usize],
            ],
            0,
        ));
        p.with_tcp_flags(rng.below(64) as u8)
    }

    #[test]
    fn random_rule_sets_round_trip_and_boxes_are_exact() {
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        let (mut boxed, mut matched) = (0, 0);
        for case in 0..3000 {
            let rs = rand_ruleset(&mut rng);
            rs.validate()
                .unwrap_or_else(|e| panic!("case {case}: {e}\n{}", rs.to_restore()));
            let text = rs.to_restore();
            let back = parse(&text).unwrap_or_else(|e| panic!("case {case}: {}", e.snippet(&text)));
            assert_eq!(back, rs, "case {case}:\n{text}");
            assert_eq!(back.to_restore(), text);
            let _ = rs.to_nft();
            let ev = rs.evaluator().unwrap();
            for _ in 0..20 {
                let p = rand_packet(&mut rng);
                for b in BUILTIN_CHAINS {
                    ev.evaluate(b, &p).unwrap();
                }
                // A packet matches a transformable rule exactly when it is in one of its boxes.
                for r in rs.chains.iter().flat_map(|c| &c.rules) {
                    let Some(boxes) = r.boxes() else { continue };
                    let in_box = boxes.iter().any(|b| b.matches(&p.header));
                    assert_eq!(
                        r.matches(&p, &mut |_, _| false),
                        in_box,
                        "case {case}: `{r}` on {}",
                        p.header
                    );
                    boxed += 1;
                    matched += usize::from(in_box);
                }
            }
        }
        assert!(boxed > 10_000 && matched > 1000, "{boxed} {matched}");
    }

    #[test]
    fn garbage_and_mutations_never_panic() {
        let seeds = [
            "*filter\n:INPUT DROP [1:2]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:web - [0:0]\n:web2 - [0:0]\n-A web2 -j ACCEPT\n\
             [3:4] -A INPUT -s 10.0.0.0/8 ! -d 1.2.3.4/32 -i eth+ -p tcp -m tcp ! --sport 1:2 --dport 80: -m comment --comment \"a \\\"b\\\"\" -j web\n\
             -A INPUT -p udp -m multiport ! --ports 1,2:3 -m iprange --src-range 1.1.1.1-1.1.1.9 -j REJECT --reject-with icmp-host-prohibited\n\
             -A INPUT -p tcp --syn -m conntrack --ctstate NEW -f -j LOG --log-prefix \"x \"\n\
             -A web -p tcp -m tcp --tcp-flags SYN,ACK NONE -g web2\n\
             -A web -j RETURN\n\
             COMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j DNAT --to 1.2.3.4\nCOMMIT\n",
            "# x\n*filter\n:web2 - [0:0]\n-A OUTPUT -o lo -p icmp --icmp-type 8 -j ACCEPT\n-A FORWARD -j web2\n-A web2 -p 47\nCOMMIT\n",
        ];
        let vocab = [
            " ",
            "\n",
            "\"",
            "\\",
            "!",
            "-A",
            "INPUT",
            "web",
            "web2",
            "-j",
            "-g",
            "-p",
            "tcp",
            "udp",
            "all",
            "--dport",
            "--sport",
            "80:",
            ":",
            "1,2",
            "-m",
            "tcp",
            "comment",
            "--comment",
            "multiport",
            "--ports",
            "iprange",
            "--src-range",
            "1.2.3.4-1.2.3.9",
            "-s",
            "-d",
            "10.0.0.0/8",
            "0/0",
            "-i",
            "-o",
            "eth+",
            "-f",
            "-c",
            "1",
            "[0:0]",
            ":x",
            "-",
            "ACCEPT",
            "DROP",
            "RETURN",
            "REJECT",
            "LOG",
            "*filter",
            "*nat",
            "COMMIT",
            "#",
            "--syn",
            "--tcp-flags",
            "ALL",
            "NONE",
            "é",
            "\r",
            "\t",
            "[",
            "]",
            "/",
            ".",
            "--",
            "-A web -j web",
        ];
        let mut rng = Rng(0xdead_beef_0000_0042);
        let check = |text: &str| {
            let Ok(rs) = parse(text) else { return };
            rs.validate().unwrap_or_else(|e| panic!("{e}\n{text:?}"));
            let out = rs.to_restore();
            let back = parse(&out).unwrap_or_else(|e| panic!("{e}\n{text:?}\n{out}"));
            assert_eq!(back, rs, "{text:?}\n{out}");
            let _ = rs.to_nft();
            let _ = rs.jump_depth();
            if let Ok(ev) = rs
                .evaluator()
                .map_err(|_| ())
                .and_then(|e| if rs.chains.is_empty() { Err(()) } else { Ok(e) })
            {
                let p = eval::Packet::new(crate::Header([0x0a00_0001, 0x0102_0304, 1, 80, 6], 0));
                for b in BUILTIN_CHAINS {
                    ev.evaluate(b, &p).unwrap();
                }
            }
            for r in rs.chains.iter().flat_map(|c| &c.rules) {
                let _ = r.boxes();
            }
        };
        for seed in seeds {
            check(seed);
            assert!(parse(seed).is_ok(), "{seed}");
            for cut in 0..seed.len() {
                if seed.is_char_boundary(cut) {
                    check(&seed[..cut]);
                }
            }
        }
        for _ in 0..30_000 {
            let seed = seeds[rng.below(2) as usize];
            let mut text: Vec<char> = seed.chars().collect();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(text.len() as u64 + 1) as usize;
                match rng.below(4) {
                    0 => {
                        let w = vocab[rng.below(vocab.len() as u64) as usize];
                        text.splice(at..at, w.chars());
                    }
                    1 => {
                        let end = (at + 1 + rng.below(8) as usize).min(text.len());
                        text.drain(at.min(end)..end);
                    }
                    2 if at < text.len() => text[at] = char::from(rng.below(128) as u8),
                    _ => {
                        let w = vocab[rng.below(vocab.len() as u64) as usize];
                        let end = (at + w.len()).min(text.len());
                        text.splice(at..end, w.chars());
                    }
                }
            }
            check(&text.iter().collect::<String>());
        }
        for _ in 0..3000 {
            let bytes: Vec<u8> = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
            check(&String::from_utf8_lossy(&bytes));
        }
    }

    #[test]
    fn targets() {
        assert!(Target::Accept.is_terminal() && Target::Return.is_terminal());
        assert!(!Target::None.is_terminal() && !Target::Jump("x".into()).is_terminal());
        let ext = |n: &str| Target::Extension {
            name: n.into(),
            args: String::new(),
        };
        assert!(!ext("LOG").is_terminal() && !ext("MARK").is_terminal());
        assert!(ext("NFQUEUE").is_terminal());
        assert!(is_target_name("LOG") && !is_target_name("web"));
    }
}
