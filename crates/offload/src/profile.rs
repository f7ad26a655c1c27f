//! Capability profiles: what a NIC's filter tables can hold, with their real limits.
//!
//! A [`Profile`] says how many rules fit, which families, masks, protocols, priorities and
//! actions the hardware can express ([`Profile::check`]), and how the rules are stored
//! ([`Profile::layout`]). Installing a rule that does not fit is an [`OffloadError`] whose
//! [`kind`](OffloadError::kind) tells why; the caller can then filter those packets in software.
//!
//! # Names
//!
//! | name                                   | profile                                            |
//! |----------------------------------------|----------------------------------------------------|
//! | `software`                             | [`Profile::Software`]: anything, no limit          |
//! | `82599`                                | [`Profile::Intel82599FiveTuple`]: 128 5-tuple filters |
//! | `82599-fdir-perfect[:pballoc=64k\|128k\|256k]` | [`Profile::Intel82599FdirPerfect`] (default 64k) |
//! | `82599-fdir-hash[:pballoc=64k\|128k\|256k]`    | [`Profile::Intel82599FdirHash`] (default 64k)    |
//! | `ntuple:N`                             | [`Profile::Ntuple`]: N rules, as `ethtool -n` reports |
//! | `mlx5`                                 | [`Profile::Mlx5`]: 1,024 rules, all-or-nothing masks |
//!
//! `pballoc` also accepts `1`, `2`, `3` (the ixgbe `FdirPballoc` module parameter values) and the
//! sizes in bytes with a `K` suffix in either case.
//!
//! # Where the limits come from
//!
//! - Intel 82599 10 GbE Controller Datasheet (rev. 2.3, the paper's ref. \[13\]), §7.1.2.5 "L3/L4
//!   5-tuple Filters": 128 filters on protocol, source and destination IPv4 address and port,
//!   each field either compared or ignored as a whole (one mask bit per field), a 3-bit priority,
//!   and no VLAN field; the protocol field is the 2-bit L4 type (TCP, UDP, SCTP or other).
//! - The same datasheet, §7.1.2.7 "Flow Director Filters": the packet-buffer space given to Flow
//!   Director (`FDIRCTRL.PBALLOC`: 64, 128 or 256 KB) holds 2K, 4K or 8K perfect-match filters
//!   or 8K, 16K or 32K signature (hash) filters; all filters share one set of mask registers
//!   (`FDIRM`, `FDIRSIP4M`, `FDIRDIP4M`, `FDIRTCPM`/`FDIRUDPM`); signature filters compare a hash
//!   of the masked tuple only, so unrelated flows with the same hash match too. The Linux ixgbe
//!   driver exposes these filters through `ethtool -N` for IPv4 flow types only and rejects a
//!   rule whose mask differs from the installed rules' mask ("Only one mask supported per
//!   port").
//! - Generic n-tuple NICs: the rule count is whatever the driver reports
//!   (`ethtool -n DEV` prints "Total N rules", `ETHTOOL_GRXCLSRLCNT`), so it is given at run time.
//! - The mlx5-like profile models a NIC whose ethtool flow steering table holds 1,024 rules and
//!   compares each field exactly or not at all (a simplification stated by the netsift issue, not
//!   a Mellanox datasheet figure).
//!
//! # What no hardware profile accepts
//!
//! - [`Action::Pass`]: ethtool has no "let RSS decide" action.
//! - [`VlanMatch::Untagged`] and a tagged match with VLAN mask 0: ethtool's `vlan` compares a
//!   tag's TCI and can neither require nor forbid a tag. A precise 5-tuple with
//!   [`VlanMatch::Any`] is accepted.

use std::fmt;
use std::str::FromStr;

use crate::error::{ErrorKind, OffloadError};
use crate::rule::{
    Action, Family, FieldMasks, PROTO_SCTP, PROTO_TCP, PROTO_UDP, Rule, VID_MASK, VLAN_TAGGED,
    VlanMatch,
};
use crate::table::Layout;

/// The Flow Director packet-buffer allocation of the 82599 (`FDIRCTRL.PBALLOC`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pballoc {
    /// 64 KB: 2K perfect or 8K signature filters (the ixgbe default).
    K64,
    /// 128 KB: 4K perfect or 16K signature filters.
    K128,
    /// 256 KB: 8K perfect or 32K signature filters.
    K256,
}

impl Pballoc {
    /// The number of perfect-match filters.
    pub fn perfect_filters(self) -> usize {
        match self {
            Pballoc::K64 => 2 * 1024,
            Pballoc::K128 => 4 * 1024,
            Pballoc::K256 => 8 * 1024,
        }
    }

    /// The number of signature filters.
    pub fn signature_filters(self) -> usize {
        self.perfect_filters() * 4
    }

    fn name(self) -> &'static str {
        match self {
            Pballoc::K64 => "64k",
            Pballoc::K128 => "128k",
            Pballoc::K256 => "256k",
        }
    }

    fn parse(s: &str) -> Option<Pballoc> {
        match s.to_ascii_lowercase().as_str() {
            "64k" | "64" | "1" => Some(Pballoc::K64),
            "128k" | "128" | "2" => Some(Pballoc::K128),
            "256k" | "256" | "3" => Some(Pballoc::K256),
            _ => None,
        }
    }
}

/// What a NIC's filter tables can hold; see the module documentation for the limits and their
/// sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Profile {
    /// A software table: every rule, any number.
    Software,
    /// The 82599's 128 L3/L4 5-tuple filters: IPv4, whole-field masks, priority 0..=7, no VLAN.
    Intel82599FiveTuple,
    /// The 82599's Flow Director perfect-match filters: IPv4, one mask shared by all filters.
    Intel82599FdirPerfect(Pballoc),
    /// The 82599's Flow Director signature filters: as perfect filters, but matched by a hash
    /// of the masked tuple, with false positives.
    Intel82599FdirHash(Pballoc),
    /// A generic ethtool n-tuple NIC with room for `rules` rules: both families, any bit masks,
    /// the priority mapped to the rule location.
    Ntuple {
        /// The number of rules the driver reports.
        rules: usize,
    },
    /// An mlx5-like NIC: 1,024 rules, both families, each field exact or ignored.
    Mlx5,
}

/// The number of rules of the [`Profile::Mlx5`] profile.
pub const MLX5_RULES: usize = 1024;
/// The number of 5-tuple filters of the 82599.
pub const I82599_FIVE_TUPLE_FILTERS: usize = 128;
/// The highest 5-tuple filter priority of the 82599 (3 bits).
pub const I82599_MAX_PRIORITY: u8 = 7;

fn err(rule: &Rule, kind: ErrorKind, profile: &Profile, what: impl fmt::Display) -> OffloadError {
    OffloadError::new(kind, Some(rule.id), format!("{profile}: {what}"))
}

impl Profile {
    /// The number of rules that fit (`usize::MAX` for [`Profile::Software`]).
    pub fn capacity(&self) -> usize {
        match self {
            Profile::Software => usize::MAX,
            Profile::Intel82599FiveTuple => I82599_FIVE_TUPLE_FILTERS,
            Profile::Intel82599FdirPerfect(p) => p.perfect_filters(),
            Profile::Intel82599FdirHash(p) => p.signature_filters(),
            Profile::Ntuple { rules } => *rules,
            Profile::Mlx5 => MLX5_RULES,
        }
    }

    /// How a table for this profile stores its rules.
    pub fn layout(&self) -> Layout {
        match self {
            Profile::Intel82599FdirPerfect(_) => Layout::GlobalMask { signature: false },
            Profile::Intel82599FdirHash(_) => Layout::GlobalMask { signature: true },
            _ => Layout::Split,
        }
    }

    /// Whether rules of `family` can be installed.
    pub fn supports(&self, family: Family) -> bool {
        match self {
            Profile::Intel82599FiveTuple
            | Profile::Intel82599FdirPerfect(_)
            | Profile::Intel82599FdirHash(_) => family == Family::V4,
            _ => true,
        }
    }

    /// Whether the profile can hold `rule`, capacity aside; the error says which limit the rule
    /// breaks. The shared Flow Director mask is checked by the table
    /// ([`RuleTable::add`](crate::RuleTable::add)), which knows the installed rules.
    pub fn check(&self, rule: &Rule) -> Result<(), OffloadError> {
        if *self == Profile::Software {
            return Ok(());
        }
        let family = rule.pattern.family();
        if !self.supports(family) {
            return Err(err(
                rule,
                ErrorKind::Family,
                self,
                format_args!("{family} rules are not supported (IPv4 only)"),
            ));
        }
        if rule.action == Action::Pass {
            return Err(err(
                rule,
                ErrorKind::Action,
                self,
                "the action `pass` cannot be expressed in hardware",
            ));
        }
        let masks = rule.pattern.masks();
        match rule.pattern.vlan() {
            VlanMatch::Untagged => {
                return Err(err(
                    rule,
                    ErrorKind::Mask,
                    self,
                    "cannot match untagged frames only",
                ));
            }
            VlanMatch::Tagged { mask: 0, .. } => {
                return Err(err(
                    rule,
                    ErrorKind::Mask,
                    self,
                    "cannot match tagged frames of any VLAN",
                ));
            }
            VlanMatch::Tagged { .. } if *self == Profile::Intel82599FiveTuple => {
                return Err(err(
                    rule,
                    ErrorKind::Mask,
                    self,
                    "5-tuple filters have no VLAN field",
                ));
            }
            _ => {}
        }
        let whole_fields = matches!(self, Profile::Intel82599FiveTuple | Profile::Mlx5);
        if whole_fields {
            let full = FieldMasks::full(family);
            let fields = [
                (
                    "VLAN",
                    masks.vlan == 0 || masks.vlan == VLAN_TAGGED | VID_MASK,
                ),
                ("protocol", masks.proto == 0 || masks.proto == full.proto),
                ("source address", masks.src == 0 || masks.src == full.src),
                (
                    "destination address",
                    masks.dst == 0 || masks.dst == full.dst,
                ),
                (
                    "source port",
                    masks.src_port == 0 || masks.src_port == u16::MAX,
                ),
                (
                    "destination port",
                    masks.dst_port == 0 || masks.dst_port == u16::MAX,
                ),
            ];
            if let Some((name, _)) = fields.iter().find(|(_, ok)| !ok) {
                return Err(err(
                    rule,
                    ErrorKind::Mask,
                    self,
                    format_args!("the {name} must be compared exactly or not at all"),
                ));
            }
        }
        if self.is_82599() {
            let proto = rule.pattern.proto();
            let l4_type = proto.is_any()
                || (proto.is_exact()
                    && matches!(proto.value(), PROTO_TCP | PROTO_UDP | PROTO_SCTP));
            if !l4_type {
                return Err(err(
                    rule,
                    ErrorKind::Protocol,
                    self,
                    "the protocol must be tcp, udp, sctp or any (a 2-bit L4 type)",
                ));
            }
            if let VlanMatch::Tagged { mask, .. } = rule.pattern.vlan()
                && mask != 0
                && mask != VID_MASK
            {
                return Err(err(
                    rule,
                    ErrorKind::Mask,
                    self,
                    "the VLAN ID must be compared exactly or not at all",
                ));
            }
        }
        if *self == Profile::Intel82599FiveTuple && rule.priority > I82599_MAX_PRIORITY {
            return Err(err(
                rule,
                ErrorKind::Priority,
                self,
                format_args!(
                    "priority {} is above {I82599_MAX_PRIORITY} (3 bits)",
                    rule.priority
                ),
            ));
        }
        Ok(())
    }

    fn is_82599(&self) -> bool {
        matches!(
            self,
            Profile::Intel82599FiveTuple
                | Profile::Intel82599FdirPerfect(_)
                | Profile::Intel82599FdirHash(_)
        )
    }
}

impl fmt::Display for Profile {
    /// The name [`Profile::from_str`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Profile::Software => f.write_str("software"),
            Profile::Intel82599FiveTuple => f.write_str("82599"),
            Profile::Intel82599FdirPerfect(p) => {
                write!(f, "82599-fdir-perfect:pballoc={}", p.name())
            }
            Profile::Intel82599FdirHash(p) => write!(f, "82599-fdir-hash:pballoc={}", p.name()),
            Profile::Ntuple { rules } => write!(f, "ntuple:{rules}"),
            Profile::Mlx5 => f.write_str("mlx5"),
        }
    }
}

/// A profile name that [`Profile::from_str`] does not know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileParseError {
    name: String,
    why: String,
}

impl fmt::Display for ProfileParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad NIC profile `{}`: {} (known: software, 82599, \
             82599-fdir-perfect[:pballoc=64k|128k|256k], 82599-fdir-hash[:pballoc=…], ntuple:N, mlx5)",
            self.name, self.why
        )
    }
}

impl std::error::Error for ProfileParseError {}

impl FromStr for Profile {
    type Err = ProfileParseError;

    /// Reads a profile name (see the module documentation); case-insensitive.
    fn from_str(s: &str) -> Result<Profile, ProfileParseError> {
        let bad = |why: &str| ProfileParseError {
            name: s.to_string(),
            why: why.to_string(),
        };
        let lower = s.trim().to_ascii_lowercase();
        let (head, arg) = match lower.split_once(':') {
            Some((h, a)) => (h, Some(a)),
            None => (lower.as_str(), None),
        };
        let pballoc = |arg: Option<&str>| -> Result<Pballoc, ProfileParseError> {
            match arg {
                None => Ok(Pballoc::K64),
                Some(a) => {
                    let v = a
                        .strip_prefix("pballoc=")
                        .ok_or_else(|| bad("expected `pballoc=64k|128k|256k`"))?;
                    Pballoc::parse(v).ok_or_else(|| bad("pballoc must be 64k, 128k or 256k"))
                }
            }
        };
        match (head, arg) {
            ("software", None) => Ok(Profile::Software),
            ("82599", None) => Ok(Profile::Intel82599FiveTuple),
            ("82599-fdir-perfect", a) => Ok(Profile::Intel82599FdirPerfect(pballoc(a)?)),
            ("82599-fdir-hash", a) => Ok(Profile::Intel82599FdirHash(pballoc(a)?)),
            ("ntuple", Some(n)) => match n.parse::<usize>() {
                Ok(rules) => Ok(Profile::Ntuple { rules }),
                Err(_) => Err(bad("the rule count must be a number")),
            },
            ("ntuple", None) => Err(bad("the rule count is missing (`ntuple:N`)")),
            ("mlx5", None) => Ok(Profile::Mlx5),
            ("software" | "82599" | "mlx5", Some(_)) => Err(bad("this profile takes no argument")),
            _ => Err(bad("unknown profile")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::tests::v4;
    use crate::rule::{Masked, Match, RuleId};

    fn rule(m: Match) -> Rule {
        Rule::new(RuleId(4), m, Action::Drop)
    }

    #[test]
    fn names_round_trip() {
        for name in [
            "software",
            "82599",
            "82599-fdir-perfect:pballoc=64k",
            "82599-fdir-perfect:pballoc=256k",
            "82599-fdir-hash:pballoc=128k",
            "ntuple:512",
            "mlx5",
        ] {
            let p: Profile = name.parse().unwrap();
            assert_eq!(p.to_string(), name);
        }
        assert_eq!(
            "82599-FDIR-perfect:pballoc=3".parse::<Profile>(),
            Ok(Profile::Intel82599FdirPerfect(Pballoc::K256))
        );
        assert_eq!(
            "82599-fdir-hash".parse::<Profile>(),
            Ok(Profile::Intel82599FdirHash(Pballoc::K64))
        );
        let e = "ntuple".parse::<Profile>().unwrap_err();
        assert!(e.to_string().starts_with(
            "bad NIC profile `ntuple`: the rule count is missing (`ntuple:N`) (known:"
        ));
        assert!("e1000".parse::<Profile>().is_err());
        assert!("82599-fdir-hash:pballoc=32k".parse::<Profile>().is_err());
        assert!("mlx5:3".parse::<Profile>().is_err());
    }

    #[test]
    fn capacities() {
        assert_eq!(Profile::Intel82599FiveTuple.capacity(), 128);
        assert_eq!(
            Profile::Intel82599FdirPerfect(Pballoc::K64).capacity(),
            2048
        );
        assert_eq!(
            Profile::Intel82599FdirPerfect(Pballoc::K256).capacity(),
            8192
        );
        assert_eq!(Profile::Intel82599FdirHash(Pballoc::K64).capacity(), 8192);
        assert_eq!(Profile::Intel82599FdirHash(Pballoc::K256).capacity(), 32768);
        assert_eq!(Profile::Mlx5.capacity(), 1024);
        assert_eq!(Profile::Ntuple { rules: 7 }.capacity(), 7);
    }

    #[test]
    fn checks() {
        let p = Profile::Intel82599FiveTuple;
        let prefix = Match::new(Family::V4)
            .try_src(v4("10.0.0.0"), Family::V4.prefix_mask(8))
            .unwrap();
        let e = p.check(&rule(prefix)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Mask);
        assert_eq!(
            e.to_string(),
            "rule 4: 82599: the source address must be compared exactly or not at all"
        );
        assert!(Profile::Ntuple { rules: 1 }.check(&rule(prefix)).is_ok());
        assert!(
            Profile::Intel82599FdirPerfect(Pballoc::K64)
                .check(&rule(prefix))
                .is_ok()
        );
        assert_eq!(
            Profile::Mlx5.check(&rule(prefix)).unwrap_err().kind(),
            ErrorKind::Mask
        );
        let v6 = rule(Match::new(Family::V6).with_proto(PROTO_TCP));
        assert_eq!(
            p.check(&v6).unwrap_err().to_string(),
            "rule 4: 82599: ip6 rules are not supported (IPv4 only)"
        );
        assert!(Profile::Mlx5.check(&v6).is_ok());
        let icmp = rule(Match::new(Family::V4).with_proto(1));
        assert_eq!(p.check(&icmp).unwrap_err().kind(), ErrorKind::Protocol);
        assert!(Profile::Mlx5.check(&icmp).is_ok());
        let prio = rule(Match::new(Family::V4)).with_priority(8);
        assert_eq!(p.check(&prio).unwrap_err().kind(), ErrorKind::Priority);
        assert!(
            p.check(&rule(Match::new(Family::V4)).with_priority(7))
                .is_ok()
        );
        let vlan = rule(Match::new(Family::V4).with_vlan(VlanMatch::id(3)));
        assert_eq!(p.check(&vlan).unwrap_err().kind(), ErrorKind::Mask);
        assert!(Profile::Mlx5.check(&vlan).is_ok());
        let any_tag = rule(Match::new(Family::V4).with_vlan(VlanMatch::Tagged { id: 0, mask: 0 }));
        assert_eq!(
            Profile::Ntuple { rules: 1 }
                .check(&any_tag)
                .unwrap_err()
                .kind(),
            ErrorKind::Mask
        );
        let untagged = rule(Match::new(Family::V4).with_vlan(VlanMatch::Untagged));
        assert_eq!(
            Profile::Mlx5.check(&untagged).unwrap_err().kind(),
            ErrorKind::Mask
        );
        let pass = Rule::new(RuleId(1), Match::new(Family::V4), Action::Pass);
        assert_eq!(
            Profile::Mlx5.check(&pass).unwrap_err().kind(),
            ErrorKind::Action
        );
        assert!(Profile::Software.check(&pass).is_ok());
        let half_port =
            rule(Match::new(Family::V4).with_dst_port_masked(Masked::new(0x400, 0xfc00)));
        assert_eq!(
            Profile::Mlx5.check(&half_port).unwrap_err().kind(),
            ErrorKind::Mask
        );
        assert!(Profile::Ntuple { rules: 1 }.check(&half_port).is_ok());
    }
}
