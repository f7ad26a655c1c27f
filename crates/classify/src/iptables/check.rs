//! The checks on a rule set that `iptables` makes when it loads one: shared by the reader
//! (which reports them at the offending word) and [`Ruleset::validate`] (for rule sets built in
//! code, reported at the rule's line).

use std::collections::HashMap;

use super::lex;
use super::parse::{Error, ErrorKind, err};
use super::{BUILTIN_CHAINS, Chain, IptRule, Match, Proto, Ruleset, Target, is_target_name};
use crate::Range;

/// Longest chain name iptables takes (`XT_EXTENSION_MAXNAMELEN` - 1).
const MAX_CHAIN_NAME: usize = 28;
/// Longest interface name (`IFNAMSIZ` - 1).
const MAX_IFACE_NAME: usize = 15;
/// Longest comment (`XT_MAX_COMMENT_LEN` - 1).
const MAX_COMMENT: usize = 255;

/// A chain name iptables takes and our writers can write back.
pub(super) fn check_chain_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a chain needs a name".into());
    }
    if name.len() > MAX_CHAIN_NAME {
        return Err(format!(
            "chain name `{name}` is too long ({} bytes; at most {MAX_CHAIN_NAME})",
            name.len()
        ));
    }
    if name.starts_with(['-', '!']) {
        return Err(format!("chain name `{name}` cannot start with `-` or `!`"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, '"' | '\'' | '\\' | '[' | ']'))
    {
        return Err(format!(
            "chain name `{name}` contains `{}`",
            c.escape_debug()
        ));
    }
    Ok(())
}

/// Which element of a rule a problem is about (for the column of the error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part {
    Src,
    Dst,
    In,
    Out,
    Proto,
    Match(usize),
    Target,
}

/// A problem found in a rule by [`check_rule`].
pub(super) struct Problem {
    pub part: Part,
    pub kind: ErrorKind,
    pub message: String,
}

fn problem(part: Part, kind: ErrorKind, message: impl Into<String>) -> Problem {
    Problem {
        part,
        kind,
        message: message.into(),
    }
}

/// The protocols multiport works with.
const MULTIPORT_PROTOCOLS: [u8; 5] = [6, 17, 33, 132, 136];

/// The checks on a whole rule (in chain `chain`) that iptables makes.
pub(super) fn check_rule(rule: &IptRule, chain: &str) -> Result<(), Problem> {
    let proto = rule.proto.filter(|p| !p.negated).map(|p| p.number);
    if rule.out_iface.is_some() && chain == "INPUT" {
        return Err(problem(
            Part::Out,
            ErrorKind::Conflict,
            "`-o` cannot be used in INPUT (there is no output interface there)",
        ));
    }
    if rule.in_iface.is_some() && chain == "OUTPUT" {
        return Err(problem(
            Part::In,
            ErrorKind::Conflict,
            "`-i` cannot be used in OUTPUT (there is no input interface there)",
        ));
    }
    for (part, i) in [(Part::In, &rule.in_iface), (Part::Out, &rule.out_iface)] {
        if let Some(i) = i {
            check_iface(&i.name).map_err(|m| problem(part, ErrorKind::BadInterface, m))?;
        }
    }
    if let Some(p) = rule.proto {
        if p.number == 0 {
            return Err(problem(
                Part::Proto,
                ErrorKind::BadProtocol,
                "protocol 0 is `all`: leave `-p` out",
            ));
        }
    }
    for (part, a) in [(Part::Src, &rule.src), (Part::Dst, &rule.dst)] {
        if let Some(a) = a {
            if a.addr & !a.mask != 0 {
                return Err(problem(
                    part,
                    ErrorKind::BadAddress,
                    "address bits outside the mask must be 0",
                ));
            }
        }
    }
    for (mi, m) in rule.matches.iter().enumerate() {
        let part = Part::Match(mi);
        match m {
            Match::Tcp(pm) | Match::Udp(pm) => {
                let (want, name) = match m {
                    Match::Tcp(_) => (Proto::TCP, "tcp"),
                    _ => (Proto::UDP, "udp"),
                };
                if proto != Some(want) {
                    return Err(problem(
                        part,
                        ErrorKind::Conflict,
                        format!(
                            "the {name} match (`--sport`, `--dport`…) needs `-p {name}` before it"
                        ),
                    ));
                }
                if name == "udp" && pm.flags.is_some() {
                    return Err(problem(
                        part,
                        ErrorKind::Conflict,
                        "TCP flags in a udp match",
                    ));
                }
                if pm.flags.is_some_and(|f| (f.mask | f.comp) & 0xc0 != 0) {
                    return Err(problem(
                        part,
                        ErrorKind::BadValue,
                        "TCP flags: only FIN, SYN, RST, PSH, ACK and URG can be written",
                    ));
                }
                for r in [pm.sport, pm.dport].into_iter().flatten() {
                    check_port_range(r.range).map_err(|m| problem(part, ErrorKind::BadPort, m))?;
                }
            }
            Match::Multiport(mp) => {
                if !proto.is_some_and(|p| MULTIPORT_PROTOCOLS.contains(&p)) {
                    return Err(problem(
                        part,
                        ErrorKind::Conflict,
                        "multiport needs `-p tcp`, `-p udp`, `-p udplite`, `-p sctp` or `-p dccp`",
                    ));
                }
                let slots: usize = mp
                    .ports
                    .iter()
                    .map(|r| if r.lo == r.hi { 1 } else { 2 })
                    .sum();
                if mp.ports.is_empty() || slots > 15 {
                    return Err(problem(
                        part,
                        ErrorKind::BadPort,
                        format!("multiport takes 1 to 15 ports (a range counts two), not {slots}"),
                    ));
                }
                for r in &mp.ports {
                    check_port_range(*r).map_err(|m| problem(part, ErrorKind::BadPort, m))?;
                }
            }
            Match::IpRange(ir) => {
                if ir.src.is_none() && ir.dst.is_none() {
                    return Err(problem(
                        part,
                        ErrorKind::MissingArgument,
                        "iprange needs `--src-range` or `--dst-range`",
                    ));
                }
                for r in [ir.src, ir.dst].into_iter().flatten() {
                    if r.range.lo > r.range.hi {
                        return Err(problem(
                            part,
                            ErrorKind::EmptyRange,
                            "address range lo > hi",
                        ));
                    }
                }
            }
            Match::Comment(c) => {
                if c.len() > MAX_COMMENT || c.contains(['\n', '\0']) {
                    return Err(problem(
                        part,
                        ErrorKind::BadValue,
                        format!("a comment has at most {MAX_COMMENT} bytes and no newline or NUL"),
                    ));
                }
            }
            Match::Opaque(o) => {
                if o.text.is_empty() || !is_verbatim(&o.text) {
                    return Err(problem(
                        part,
                        ErrorKind::Syntax,
                        "an opaque match must be words as the reader keeps them (well quoted, \
                         one space apart, one line)",
                    ));
                }
            }
        }
    }
    if let Target::Reject(Some(with)) = &rule.target {
        if !REJECT_TYPES.contains(&with.as_str()) {
            return Err(problem(
                Part::Target,
                ErrorKind::BadValue,
                format!("unknown REJECT type `{with}`"),
            ));
        }
        if matches!(with.as_str(), "tcp-reset" | "tcp-rst") && proto != Some(Proto::TCP) {
            return Err(problem(
                Part::Target,
                ErrorKind::Conflict,
                "`--reject-with tcp-reset` needs `-p tcp`",
            ));
        }
    }
    Ok(())
}

fn check_port_range(r: Range) -> Result<(), String> {
    if r.hi > 0xffff {
        return Err(format!("port {} is larger than 65535", r.hi));
    }
    if r.lo > r.hi {
        return Err(format!("port range {}:{} is empty", r.lo, r.hi));
    }
    Ok(())
}

pub(super) fn check_iface(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_IFACE_NAME {
        return Err(format!(
            "interface name `{name}`: 1 to {MAX_IFACE_NAME} bytes expected"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, '"' | '\'' | '\\'))
    {
        return Err(format!(
            "interface name `{name}` contains `{}`",
            c.escape_debug()
        ));
    }
    Ok(())
}

/// The `--reject-with` types of IPv4 `REJECT`, with their short aliases.
pub(super) const REJECT_TYPES: [&str; 16] = [
    "icmp-net-unreachable",
    "net-unreach",
    "icmp-host-unreachable",
    "host-unreach",
    "icmp-port-unreachable",
    "port-unreach",
    "icmp-proto-unreachable",
    "proto-unreach",
    "icmp-net-prohibited",
    "net-prohib",
    "icmp-host-prohibited",
    "host-prohib",
    "icmp-admin-prohibited",
    "admin-prohib",
    "tcp-reset",
    "tcp-rst",
];

/// A problem in the jump graph, at a rule.
pub(super) struct GraphProblem {
    pub chain: usize,
    pub rule: usize,
    pub kind: ErrorKind,
    pub message: String,
}

/// Jumps go to declared user chains and do not loop. Iterative: generated rule sets can nest
/// thousands of chains.
pub(super) fn check_graph(chains: &[Chain]) -> Result<(), GraphProblem> {
    let index: HashMap<&str, usize> = chains
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();
    // Resolve every jump first.
    let mut edges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); chains.len()];
    for (ci, c) in chains.iter().enumerate() {
        for (ri, r) in c.rules.iter().enumerate() {
            let Some(to) = r.target.chain() else { continue };
            let at = |kind, message: String| GraphProblem {
                chain: ci,
                rule: ri,
                kind,
                message,
            };
            match index.get(to) {
                None => return Err(at(ErrorKind::UnknownChain, format!("no chain `{to}`"))),
                Some(&t) if chains[t].policy.is_some() || chains[t].is_builtin() => {
                    return Err(at(
                        ErrorKind::UnknownChain,
                        format!("cannot jump to built-in chain {to}"),
                    ));
                }
                Some(&t) => edges[ci].push((t, ri)),
            }
        }
    }
    // Depth-first search with colours: 0 new, 1 on the stack, 2 done.
    let mut colour = vec![0u8; chains.len()];
    for root in 0..chains.len() {
        if colour[root] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        colour[root] = 1;
        while let Some(&mut (c, ref mut next)) = stack.last_mut() {
            if let Some(&(t, ri)) = edges[c].get(*next) {
                *next += 1;
                match colour[t] {
                    0 => {
                        colour[t] = 1;
                        stack.push((t, 0));
                    }
                    1 => {
                        let from = stack.iter().position(|&(s, _)| s == t).unwrap_or(0);
                        let mut path: Vec<&str> = stack[from..]
                            .iter()
                            .map(|&(s, _)| chains[s].name.as_str())
                            .collect();
                        path.push(&chains[t].name);
                        return Err(GraphProblem {
                            chain: c,
                            rule: ri,
                            kind: ErrorKind::Loop,
                            message: format!("jump loop: {}", path.join(" -> ")),
                        });
                    }
                    _ => {}
                }
            } else {
                colour[c] = 2;
                stack.pop();
            }
        }
    }
    Ok(())
}

/// [`Ruleset::validate`].
pub(super) fn validate(rs: &Ruleset) -> Result<(), Error> {
    let mut names: HashMap<&str, usize> = HashMap::new();
    let at = |line: usize, kind, message: String| err(line, 1, kind, message);
    if !rs.chains.is_empty() {
        for b in BUILTIN_CHAINS {
            if rs.chain(b).is_none() {
                return Err(at(
                    0,
                    ErrorKind::BadChain,
                    format!("built-in chain {b} is missing"),
                ));
            }
        }
    }
    for c in &rs.chains {
        check_chain_name(&c.name).map_err(|m| at(0, ErrorKind::BadChain, m))?;
        if names.insert(&c.name, 0).is_some() {
            return Err(at(
                0,
                ErrorKind::BadChain,
                format!("chain {} appears twice", c.name),
            ));
        }
        match (c.is_builtin(), c.policy) {
            (true, None) => {
                return Err(at(
                    0,
                    ErrorKind::BadChain,
                    format!("built-in chain {} needs a policy", c.name),
                ));
            }
            (false, Some(_)) => {
                return Err(at(
                    0,
                    ErrorKind::BadChain,
                    format!("user chain {} cannot have a policy", c.name),
                ));
            }
            _ => {}
        }
        if !c.is_builtin() && is_target_name(&c.name) {
            return Err(at(
                0,
                ErrorKind::BadChain,
                format!("chain {} has the name of a target", c.name),
            ));
        }
        for r in &c.rules {
            check_rule(r, &c.name).map_err(|p| at(r.line, p.kind, p.message))?;
            check_target(&r.target).map_err(|m| at(r.line, ErrorKind::BadValue, m))?;
        }
    }
    check_graph(&rs.chains)
        .map_err(|p| at(rs.chains[p.chain].rules[p.rule].line, p.kind, p.message))?;
    for t in &rs.other_tables {
        // (The reader keeps lines as they were, so the last may end in carriage returns.)
        if !t.text.trim_end_matches(['\r', '\n']).ends_with("COMMIT") || !t.text.ends_with('\n') {
            return Err(at(
                0,
                ErrorKind::Table,
                format!("table {}: text must end with COMMIT", t.name),
            ));
        }
    }
    Ok(())
}

/// Targets built in code: names and verbatim options that read back as the same target.
fn check_target(t: &Target) -> Result<(), String> {
    match t {
        Target::Extension { name, args } => {
            if !is_extension(name) {
                return Err(format!("`{name}` is not an extension target"));
            }
            if !is_verbatim(args) {
                return Err(format!(
                    "{name}: options must be words as the reader keeps them (well quoted, one \
                     space apart, one line)"
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether `text` is words as the reader keeps them: one line, well quoted, joined by single
/// spaces — what reads back as the same text.
fn is_verbatim(text: &str) -> bool {
    !text.contains('\n')
        && lex::words(text)
            .is_ok_and(|w| w.iter().map(|w| w.raw).collect::<Vec<_>>().join(" ") == text)
}

/// Whether `name` is an extension target (kept verbatim with its options).
pub(super) fn is_extension(name: &str) -> bool {
    is_target_name(name) && !matches!(name, "ACCEPT" | "DROP" | "RETURN" | "REJECT")
}
