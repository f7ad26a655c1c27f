//! `ethtool` commands that install rules in a real NIC (the kernel's ethtool n-tuple / RX
//! network flow classification interface, `ETHTOOL_SRXCLSRLINS`).
//!
//! ```text
//! ethtool -N DEV flow-type tcp4|udp4|sctp4|ip4|tcp6|udp6|sctp6|ip6 \
//!     [src-ip A [m M]] [dst-ip A [m M]] [l4proto P [m M]] \
//!     [src-port P [m M]] [dst-port P [m M]] [vlan V m M] action N|-1 loc L
//! ethtool -N DEV delete L
//! ```
//!
//! `-N`, `--config-nfc`, `-U` and `--config-ntuple` are the same ethtool command; [`Verb`]
//! picks the spelling. Every command is one line with the words separated by single spaces.
//!
//! # Masks are inverted
//!
//! In ethtool's `m MASK`, **set bits are ignored** and clear bits compared — the opposite of a
//! netmask and of [`Masked`] — so `src-ip 10.0.0.0 m 0.255.255.255` matches `10.0.0.0/8`. A field
//! compared exactly is written without `m`; a field that is not compared is left out.
//!
//! # Mapping
//!
//! - The protocol picks the flow type: TCP, UDP and SCTP give `tcp4`/`udp4`/`sctp4` (`…6` for
//!   IPv6); any other exact protocol gives `ip4`/`ip6` with `l4proto N`; any protocol gives
//!   `ip4`/`ip6` alone. Ports can only be matched with `tcp`, `udp` or `sctp` (`ip4`'s `l4data`
//!   compares the first four transport bytes of every protocol, which is not the same).
//! - The VLAN ID is matched in the 16-bit TCI with the priority and DEI bits ignored
//!   (`vlan 100 m 0xf000`). "Tagged with any ID" and "untagged" cannot be expressed.
//! - [`Action::Drop`] is `action -1`, [`Action::Queue`] `action N`; [`Action::Pass`] cannot be
//!   expressed (ethtool has no "let RSS decide" action).
//! - The rule location `loc` is given by the caller; [`table_commands`] numbers a whole table
//!   in lookup order (precise rules by id, then wildcard rules by priority), since drivers that
//!   order their rules do so by location, lowest first.

use std::fmt::Write as _;

use crate::error::{ErrorKind, OffloadError};
use crate::rule::{
    Action, Family, Masked, PROTO_SCTP, PROTO_TCP, PROTO_UDP, Rule, RuleId, VID_MASK, VlanMatch,
};
use crate::table::RuleTable;

/// How the ethtool command is spelt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `-N` (`--config-nfc`).
    #[default]
    ConfigNfc,
    /// `-U` (`--config-ntuple`), the spelling of older Intel documentation.
    ConfigNtuple,
}

impl Verb {
    fn flag(self) -> &'static str {
        match self {
            Verb::ConfigNfc => "-N",
            Verb::ConfigNtuple => "-U",
        }
    }
}

/// The longest interface name Linux accepts (`IFNAMSIZ` − 1).
const MAX_IFNAME: usize = 15;

fn check_device(dev: &str) -> Result<(), OffloadError> {
    let ok = !dev.is_empty()
        && dev.len() <= MAX_IFNAME
        && dev != "."
        && dev != ".."
        && dev.chars().all(|c| {
            c.is_ascii_graphic()
                && !matches!(
                    c,
                    '/' | ':'
                        | '\''
                        | '"'
                        | '\\'
                        | '$'
                        | '`'
                        | ';'
                        | '&'
                        | '|'
                        | '<'
                        | '>'
                        | '('
                        | ')'
                        | '*'
                        | '?'
                        | '['
                        | ']'
                        | '{'
                        | '}'
                        | '~'
                        | '!'
                        | '#'
                )
        });
    if ok {
        Ok(())
    } else {
        Err(OffloadError::new(
            ErrorKind::Device,
            None,
            format!("`{dev}` is not an interface name ethtool commands can be written for"),
        ))
    }
}

fn unsupported(rule: &Rule, what: &str) -> OffloadError {
    OffloadError::new(
        ErrorKind::Mask,
        Some(rule.id),
        format!("ethtool cannot express {what}"),
    )
}

/// The flow-type and match words of `rule`, from `flow-type` to before `action`.
pub fn flow_spec(rule: &Rule) -> Result<String, OffloadError> {
    let m = &rule.pattern;
    let family = m.family();
    let suffix = match family {
        Family::V4 => "4",
        Family::V6 => "6",
    };
    let proto = m.proto();
    let l4 = if proto.is_exact() {
        match proto.value() {
            PROTO_TCP => Some("tcp"),
            PROTO_UDP => Some("udp"),
            PROTO_SCTP => Some("sctp"),
            _ => None,
        }
    } else {
        None
    };
    if l4.is_none() && m.needs_ports() {
        return Err(unsupported(
            rule,
            "ports without the protocol tcp, udp or sctp",
        ));
    }
    let mut s = format!("flow-type {}{suffix}", l4.unwrap_or("ip"));
    for (name, field) in [("src-ip", m.src()), ("dst-ip", m.dst())] {
        if field.is_any() {
            continue;
        }
        let _ = write!(s, " {name} {}", family.addr(field.value()));
        if field.mask() != family.full_mask() {
            let ignored = !field.mask() & family.full_mask();
            let _ = write!(s, " m {}", family.addr(ignored));
        }
    }
    if l4.is_none() && !proto.is_any() {
        let _ = write!(s, " l4proto {}", proto.value());
        if !proto.is_exact() {
            let _ = write!(s, " m 0x{:x}", !proto.mask());
        }
    }
    for (name, port) in [("src-port", m.src_port()), ("dst-port", m.dst_port())] {
        write_u16(&mut s, name, port);
    }
    match m.vlan() {
        VlanMatch::Any => {}
        VlanMatch::Untagged => return Err(unsupported(rule, "a match on untagged frames")),
        VlanMatch::Tagged { mask: 0, .. } => {
            return Err(unsupported(rule, "a match on tagged frames of any VLAN"));
        }
        VlanMatch::Tagged { id, mask } => {
            let ignored = !(mask & VID_MASK);
            let _ = write!(s, " vlan {id} m 0x{ignored:x}");
        }
    }
    Ok(s)
}

fn write_u16(s: &mut String, name: &str, field: Masked<u16>) {
    if field.is_any() {
        return;
    }
    let _ = write!(s, " {name} {}", field.value());
    if !field.is_exact() {
        let _ = write!(s, " m 0x{:x}", !field.mask());
    }
}

/// The `action` value of `rule`.
fn action_word(rule: &Rule) -> Result<String, OffloadError> {
    match rule.action {
        Action::Drop => Ok("-1".to_string()),
        Action::Queue(q) => Ok(q.to_string()),
        Action::Pass => Err(OffloadError::new(
            ErrorKind::Action,
            Some(rule.id),
            "ethtool cannot express the action `pass`",
        )),
    }
}

/// `ethtool -N DEV flow-type … action N loc LOC`: the command that installs `rule` at `loc`.
pub fn add_command(verb: Verb, dev: &str, rule: &Rule, loc: u32) -> Result<String, OffloadError> {
    check_device(dev)?;
    let spec = flow_spec(rule)?;
    let action = action_word(rule)?;
    Ok(format!(
        "ethtool {} {dev} {spec} action {action} loc {loc}",
        verb.flag()
    ))
}

/// `ethtool -N DEV delete LOC`: the command that removes the rule at `loc`.
pub fn delete_command(verb: Verb, dev: &str, loc: u32) -> Result<String, OffloadError> {
    check_device(dev)?;
    Ok(format!("ethtool {} {dev} delete {loc}", verb.flag()))
}

/// The commands that install every rule of `table` on `dev`, with the location each rule gets:
/// locations 0, 1, … in lookup order (precise rules sorted by id, then wildcard rules by
/// priority and age). Fails on the first rule that ethtool cannot express.
pub fn table_commands(
    verb: Verb,
    dev: &str,
    table: &RuleTable,
) -> Result<Vec<(RuleId, u32, String)>, OffloadError> {
    check_device(dev)?;
    let mut precise: Vec<&Rule> = Vec::new();
    let mut wildcard: Vec<&Rule> = Vec::new();
    // `iter` yields the hashed rules first, in no order, then the wildcard rules in order.
    for (rule, _) in table.iter() {
        if table.layout() == crate::table::Layout::Split && !rule.is_precise() {
            wildcard.push(rule);
        } else {
            precise.push(rule);
        }
    }
    precise.sort_by_key(|r| r.id);
    let mut out = Vec::with_capacity(precise.len() + wildcard.len());
    for (loc, rule) in precise.into_iter().chain(wildcard).enumerate() {
        let loc = u32::try_from(loc).map_err(|_| {
            OffloadError::new(
                ErrorKind::Capacity,
                Some(rule.id),
                "more rules than ethtool locations",
            )
        })?;
        out.push((rule.id, loc, add_command(verb, dev, rule, loc)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Match;
    use crate::rule::tests::v4;
    use crate::text;

    fn rule(line: &str) -> Rule {
        match text::parse_line(1, line) {
            Ok(Some(text::Command::Add(r))) => r,
            other => panic!("{other:?}"),
        }
    }

    fn add(line: &str) -> String {
        add_command(Verb::ConfigNfc, "eth0", &rule(line), 3).unwrap()
    }

    #[test]
    fn paper_rules() {
        assert_eq!(
            add("+(1,-1,tcp,192.168.0.10,25,0.0.0.0,0)"),
            "ethtool -N eth0 flow-type tcp4 src-ip 192.168.0.10 src-port 25 action -1 loc 3"
        );
        assert_eq!(
            add("+(2,5,udp,10.0.0.1,5000,10.0.0.2,6000)"),
            "ethtool -N eth0 flow-type udp4 src-ip 10.0.0.1 dst-ip 10.0.0.2 src-port 5000 \
             dst-port 6000 action 5 loc 3"
        );
        assert_eq!(
            add("+(3,0,sctp,::,0,[2001:db8::1],2905)"),
            "ethtool -N eth0 flow-type sctp6 dst-ip 2001:db8::1 dst-port 2905 action 0 loc 3"
        );
        assert_eq!(
            add("+(4,-1,icmp,0.0.0.0,0,0.0.0.0,0)"),
            "ethtool -N eth0 flow-type ip4 l4proto 1 action -1 loc 3"
        );
        assert_eq!(
            add("+(5,1,0,0.0.0.0,0,0.0.0.0,0)"),
            "ethtool -N eth0 flow-type ip4 action 1 loc 3"
        );
        assert_eq!(
            add_command(
                Verb::ConfigNtuple,
                "enp3s0f1",
                &rule("+(6,2,58,::,0,::,0)"),
                0
            )
            .unwrap(),
            "ethtool -U enp3s0f1 flow-type ip6 l4proto 58 action 2 loc 0"
        );
    }

    #[test]
    fn inverted_masks() {
        assert_eq!(
            add("+(1,2,tcp,10.0.0.0/8,0,172.16.0.0/12,80)"),
            "ethtool -N eth0 flow-type tcp4 src-ip 10.0.0.0 m 0.255.255.255 dst-ip 172.16.0.0 \
             m 0.15.255.255 dst-port 80 action 2 loc 3"
        );
        assert_eq!(
            add("+(1,2,udp,2001:db8::/32,0,::,0)"),
            "ethtool -N eth0 flow-type udp6 src-ip 2001:db8:: m ::ffff:ffff:ffff:ffff:ffff:ffff \
             action 2 loc 3"
        );
        let m = Match::new(Family::V4)
            .with_proto(PROTO_TCP)
            .with_dst_port_masked(Masked::new(0x400, 0xfc00))
            .with_vlan(VlanMatch::id(100));
        let r = Rule::new(RuleId(9), m, Action::Queue(1));
        assert_eq!(
            add_command(Verb::ConfigNfc, "eth1", &r, 7).unwrap(),
            "ethtool -N eth1 flow-type tcp4 dst-port 1024 m 0x3ff vlan 100 m 0xf000 action 1 loc 7"
        );
        let m = Match::new(Family::V4)
            .with_proto_masked(Masked::new(0x10, 0xf0))
            .with_vlan(VlanMatch::Tagged {
                id: 0x100,
                mask: 0xf00,
            });
        let r = Rule::new(RuleId(9), m, Action::Drop);
        assert_eq!(
            add_command(Verb::ConfigNfc, "eth1", &r, 0).unwrap(),
            "ethtool -N eth1 flow-type ip4 l4proto 16 m 0xf vlan 256 m 0xf0ff action -1 loc 0"
        );
    }

    #[test]
    fn inexpressible_rules() {
        let pass = Rule::new(RuleId(1), Match::new(Family::V4), Action::Pass);
        let e = add_command(Verb::ConfigNfc, "eth0", &pass, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "rule 1: ethtool cannot express the action `pass`"
        );
        let ports = Rule::new(
            RuleId(2),
            Match::new(Family::V4).with_dst_port(53),
            Action::Drop,
        );
        assert_eq!(
            add_command(Verb::ConfigNfc, "eth0", &ports, 0)
                .unwrap_err()
                .to_string(),
            "rule 2: ethtool cannot express ports without the protocol tcp, udp or sctp"
        );
        let untagged = Rule::new(
            RuleId(3),
            Match::new(Family::V4).with_vlan(VlanMatch::Untagged),
            Action::Drop,
        );
        assert!(add_command(Verb::ConfigNfc, "eth0", &untagged, 0).is_err());
        let r = rule("+(1,1,tcp,1.2.3.4,0,0.0.0.0,0)");
        for dev in ["", "eth0; rm -rf /", "a/b", "sixteen-chars-xx", "eth 0"] {
            assert_eq!(
                add_command(Verb::ConfigNfc, dev, &r, 0).unwrap_err().kind(),
                ErrorKind::Device
            );
        }
        assert!(add_command(Verb::ConfigNfc, "eth0.100", &r, 0).is_ok());
    }

    #[test]
    fn deletes_and_tables() {
        assert_eq!(
            delete_command(Verb::ConfigNfc, "eth0", 12).unwrap(),
            "ethtool -N eth0 delete 12"
        );
        assert_eq!(
            delete_command(Verb::ConfigNtuple, "eth0", 0).unwrap(),
            "ethtool -U eth0 delete 0"
        );
        let mut t = RuleTable::new();
        let script = text::parse(
            "+(5,1,udp,10.0.0.1,1,10.0.0.2,2)\n+(1,-1,tcp,0.0.0.0,0,0.0.0.0,25)\n\
             +(3,2,udp,10.0.0.3,1,10.0.0.2,2)\n",
        )
        .unwrap();
        for a in script.apply(&mut t) {
            a.result.unwrap();
        }
        let high = Match::new(Family::V4)
            .with_proto(PROTO_UDP)
            .try_dst(v4("10.9.0.0"), Family::V4.prefix_mask(16))
            .unwrap();
        t.add(Rule::new(RuleId(2), high, Action::Queue(3)).with_priority(9))
            .unwrap();
        let cmds = table_commands(Verb::ConfigNfc, "eth0", &t).unwrap();
        let got: Vec<(u32, u32, &str)> = cmds
            .iter()
            .map(|(id, loc, c)| (id.0, *loc, c.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    3,
                    0,
                    "ethtool -N eth0 flow-type udp4 src-ip 10.0.0.3 dst-ip 10.0.0.2 src-port 1 \
                     dst-port 2 action 2 loc 0"
                ),
                (
                    5,
                    1,
                    "ethtool -N eth0 flow-type udp4 src-ip 10.0.0.1 dst-ip 10.0.0.2 src-port 1 \
                     dst-port 2 action 1 loc 1"
                ),
                (
                    2,
                    2,
                    "ethtool -N eth0 flow-type udp4 dst-ip 10.9.0.0 m 0.0.255.255 action 3 loc 2"
                ),
                (
                    1,
                    3,
                    "ethtool -N eth0 flow-type tcp4 dst-port 25 action -1 loc 3"
                ),
            ]
        );
    }
}
