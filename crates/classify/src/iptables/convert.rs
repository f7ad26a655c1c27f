//! ClassBench rule sets as iptables rule sets.

use super::{
    Addr, Chain, IpRange, IptRule, Match, Policy, PortMatch, Proto, Protocols, RangeMatch, Ruleset,
    Target,
};
use crate::{Field, Range, Rule};

/// How [`from_classbench`] converts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertOptions {
    /// The chain that gets the rules: a built-in chain (its policy is set to `policy`) or a
    /// new user chain (nothing jumps to it).
    pub chain: String,
    /// The policy of the built-in chain: the verdict of headers no rule matches.
    pub policy: Policy,
    /// The protocols whose rules a decision tree may take; the others are reported in
    /// [`Conversion::opaque`]. Trees that cut on ports can only be encoded in iptables for
    /// `-p tcp` and `-p udp` rules ([`Protocols::tcp_udp`], the default).
    pub transformable_protocols: Protocols,
}

impl Default for ConvertOptions {
    fn default() -> ConvertOptions {
        ConvertOptions {
            chain: "FORWARD".into(),
            policy: Policy::Drop,
            transformable_protocols: Protocols::tcp_udp(),
        }
    }
}

/// A converted rule set and what could not be converted as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversion {
    /// The rule set: rule `i` of the ClassBench set (0-based) carries the comment `cb<i+1>`.
    pub ruleset: Ruleset,
    /// ClassBench rules (0-based indices) that iptables cannot say exactly, left out: port
    /// ranges on a protocol other than TCP or UDP (or on any protocol), protocol 0 exactly
    /// (`-p 0` means any), protocol ranges.
    pub inexact: Vec<usize>,
    /// Converted ClassBench rules (0-based indices) that are not transformable under
    /// [`ConvertOptions::transformable_protocols`].
    pub opaque: Vec<usize>,
}

/// The target rule `i` (0-based) of a ClassBench set gets: `ACCEPT` or `DROP`, by the top bit
/// of `(i + 1) * 0x9E3779B97F4A7C15 mod 2^64` (Fibonacci hashing): 0 gives `ACCEPT`. The
/// choice is deterministic, about half and half, and not periodic, so that no engine gets a
/// verdict right by counting.
pub fn classbench_target(i: usize) -> Target {
    let h = (i as u64)
        .wrapping_add(1)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    if h >> 63 == 0 {
        Target::Accept
    } else {
        Target::Drop
    }
}

/// A ClassBench rule set as an iptables rule set: rule `i` in order in `opts.chain`, with the
/// target [`classbench_target`]`(i)` and the comment `cb<i+1>` (so that counters and verdicts
/// can be attributed back), the other built-in chains empty with policy `ACCEPT`. TCP and UDP
/// rules (protocol exactly 6 or 17) become `-p tcp|udp -m tcp|udp --sport --dport` (ports
/// left out when they are any).
///
/// ```
/// use netsift_classify::{classbench, iptables};
///
/// let rules = classbench::parse_rules(
///     "@10.0.0.0/8 0.0.0.0/0 0 : 65535 80 : 80 0x06/0xFF\n@1.2.3.4/32 0.0.0.0/0 0 : 65535 0 : 65535 0x00/0x00\n",
/// )
/// .unwrap();
/// let c = iptables::from_classbench(&rules, &iptables::ConvertOptions::default());
/// assert!(c.ruleset.to_restore().contains(
///     "-A FORWARD -s 10.0.0.0/8 -p tcp -m tcp --dport 80 -m comment --comment cb1 -j DROP\n"
/// ));
/// assert_eq!((c.inexact.len(), c.opaque), (0, vec![1]));
/// ```
pub fn from_classbench(rules: &[Rule], opts: &ConvertOptions) -> Conversion {
    let mut ruleset = Ruleset::new_filter();
    let ci = match ruleset.chain_index(&opts.chain) {
        Some(ci) => {
            ruleset.chains[ci].policy = Some(opts.policy);
            ci
        }
        None => {
            ruleset.chains.push(Chain::user(&opts.chain));
            ruleset.chains.len() - 1
        }
    };
    let mut inexact = Vec::new();
    let mut opaque = Vec::new();
    let mut out = Vec::with_capacity(rules.len());
    for (i, b) in rules.iter().enumerate() {
        let Some(mut r) = IptRule::from_box(b, classbench_target(i)) else {
            inexact.push(i);
            continue;
        };
        r.matches.push(Match::Comment(format!("cb{}", i + 1)));
        if r.transformable(&opts.transformable_protocols).is_none() {
            opaque.push(i);
        }
        out.push(r);
    }
    ruleset.chains[ci].rules = out;
    Conversion {
        ruleset,
        inexact,
        opaque,
    }
}

/// The prefix `(addr, len)` that is exactly `r`, if any.
fn as_prefix(r: Range) -> Option<(u32, u8)> {
    let size = u64::from(r.hi) - u64::from(r.lo) + 1;
    if !size.is_power_of_two() {
        return None;
    }
    let len = 32 - size.trailing_zeros();
    (u64::from(r.lo) % size == 0).then_some((r.lo, len as u8))
}

impl IptRule {
    /// The iptables rule that matches exactly the headers box `b` matches, with `target`:
    /// addresses as `-s`/`-d` prefixes or, when not prefixes, `-m iprange`; the protocol as
    /// `-p`; ports with `-m tcp`/`-m udp`. `None` when iptables cannot say it: ports that are
    /// not any on a protocol other than TCP or UDP, protocol 0 exactly, a protocol range, a
    /// TCP-flags criterion.
    /// The rule's line is the box's.
    pub fn from_box(b: &Rule, target: Target) -> Option<IptRule> {
        // ClassBench's 16-bit flags criterion has no exact iptables form here.
        if !b.flags.is_any() {
            return None;
        }
        let mut r = IptRule::new(target);
        r.line = b.line;
        let full = |f: Field| b.range(f) == Range::any(f);
        let proto = b.range(Field::Proto);
        if !full(Field::Proto) {
            if proto.lo != proto.hi || proto.lo == 0 || proto.hi > 0xff {
                return None;
            }
            r.proto = Some(Proto::is(proto.lo as u8));
        }
        let mut ir = IpRange::default();
        for (f, slot, range_slot) in [
            (Field::SrcIp, &mut r.src, &mut ir.src),
            (Field::DstIp, &mut r.dst, &mut ir.dst),
        ] {
            if full(f) {
                continue;
            }
            match as_prefix(b.range(f)) {
                Some((a, len)) => *slot = Some(Addr::prefix(a, len, false)),
                None => *range_slot = Some(RangeMatch::new(b.range(f))),
            }
        }
        if !full(Field::SrcPort) || !full(Field::DstPort) {
            let ports = |f: Field| (!full(f)).then(|| RangeMatch::new(b.range(f)));
            let pm = PortMatch {
                sport: ports(Field::SrcPort),
                dport: ports(Field::DstPort),
                flags: None,
            };
            if b.range(Field::SrcPort).hi > 0xffff || b.range(Field::DstPort).hi > 0xffff {
                return None;
            }
            r.matches.push(match r.proto.map(|p| p.number) {
                Some(Proto::TCP) => Match::Tcp(pm),
                Some(Proto::UDP) => Match::Udp(pm),
                _ => return None,
            });
        }
        if ir.src.is_some() || ir.dst.is_some() {
            r.matches.push(Match::IpRange(ir));
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classbench;

    #[test]
    fn prefixes() {
        assert_eq!(
            as_prefix(Range {
                lo: 0,
                hi: u32::MAX
            }),
            Some((0, 0))
        );
        assert_eq!(
            as_prefix(Range::prefix(0x0a00_0000, 8)),
            Some((0x0a00_0000, 8))
        );
        assert_eq!(as_prefix(Range { lo: 7, hi: 7 }), Some((7, 32)));
        assert_eq!(as_prefix(Range { lo: 2, hi: 5 }), None);
        assert_eq!(as_prefix(Range { lo: 4, hi: 5 }), Some((4, 31)));
        assert_eq!(as_prefix(Range { lo: 6, hi: 9 }), None);
    }

    #[test]
    fn targets_are_mixed() {
        let accepts = (0..1000)
            .filter(|&i| classbench_target(i) == Target::Accept)
            .count();
        assert!((400..600).contains(&accepts), "{accepts}");
        assert_eq!(classbench_target(0), classbench_target(0));
    }

    #[test]
    fn converts_exactly_or_reports() {
        let rules = classbench::parse_rules(
            "@10.0.0.0/8 1.2.3.4/32 0 : 65535 80 : 80 0x06/0xFF\n\
             @0.0.0.0/0 0.0.0.0/0 53 : 53 1024 : 65535 0x11/0xFF\n\
             @0.0.0.0/0 0.0.0.0/0 0 : 65535 0 : 65535 0x2f/0xFF\n\
             @0.0.0.0/0 0.0.0.0/0 0 : 65535 22 : 22 0x00/0x00\n\
             @0.0.0.0/0 0.0.0.0/0 0 : 65535 0 : 65535 0x00/0xFF\n\
             @0.0.0.0/0 0.0.0.0/0 0 : 65535 0 : 65535 0x00/0x00\n",
        )
        .unwrap();
        let c = from_classbench(&rules, &ConvertOptions::default());
        assert_eq!(c.inexact, [3, 4]);
        assert_eq!(c.opaque, [2, 5]);
        let text = c.ruleset.to_restore();
        let t = |i: usize| classbench_target(i).clone();
        let name = |t: Target| {
            if t == Target::Accept {
                "ACCEPT"
            } else {
                "DROP"
            }
        };
        let want = format!(
            "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n\
             -A FORWARD -s 10.0.0.0/8 -d 1.2.3.4/32 -p tcp -m tcp --dport 80 -m comment --comment cb1 -j {}\n\
             -A FORWARD -p udp -m udp --sport 53 --dport 1024:65535 -m comment --comment cb2 -j {}\n\
             -A FORWARD -p 47 -m comment --comment cb3 -j {}\n\
             -A FORWARD -m comment --comment cb6 -j {}\n\
             COMMIT\n",
            name(t(0)),
            name(t(1)),
            name(t(2)),
            name(t(5))
        );
        assert_eq!(text, want);
        assert_eq!(super::super::parse(&text).unwrap(), c.ruleset);
        // Every converted rule's boxes are exactly its ClassBench box.
        for (r, i) in c.ruleset.chains[1].rules.iter().zip([0, 1, 2, 5]) {
            assert_eq!(r.boxes().unwrap(), [rules[i].clone()]);
        }
        // Another chain, another policy, every protocol transformable.
        let c = from_classbench(
            &rules,
            &ConvertOptions {
                chain: "cb".into(),
                policy: Policy::Accept,
                transformable_protocols: Protocols::Any,
            },
        );
        assert_eq!(c.ruleset.chains[3].name, "cb");
        assert_eq!(c.ruleset.chains[3].rules.len(), 4);
        assert!(c.opaque.is_empty());
        assert_eq!(c.ruleset.validate(), Ok(()));
    }

    #[test]
    fn boxes_that_are_not_prefixes_use_iprange() {
        let b = Rule {
            fields: [
                Range { lo: 5, hi: 9 },
                Range {
                    lo: 0,
                    hi: u32::MAX,
                },
                Range { lo: 0, hi: 0xffff },
                Range { lo: 0, hi: 0xffff },
                Range { lo: 0, hi: 0xff },
            ],
            flags: crate::Flags::ANY,
            line: 3,
        };
        let r = IptRule::from_box(&b, Target::Accept).unwrap();
        assert_eq!(
            r.to_string(),
            "-m iprange --src-range 0.0.0.5-0.0.0.9 -j ACCEPT"
        );
        assert_eq!(r.boxes().unwrap(), [b]);
    }
}
