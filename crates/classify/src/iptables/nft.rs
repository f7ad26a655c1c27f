//! The `nft -f` writer (what it translates: [`Ruleset::to_nft`]).

use std::fmt::{self, Write as _};

use super::write::proto_name;
use super::{Addr, Iface, IptRule, Match, PortDir, RangeMatch, Ruleset, Target, TcpFlags};
use crate::Range;

/// Why a rule set has no `nft` translation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranslateError {
    /// The line of the rule (0 when it was built in code or the problem is not a rule's).
    pub line: usize,
    /// The chain.
    pub chain: String,
    /// The rule's index in the chain, when the problem is a rule's.
    pub rule: Option<usize>,
    /// The rule in `iptables-save` syntax, when the problem is a rule's.
    pub text: String,
    /// What has no translation.
    pub message: String,
}

impl fmt::Display for TranslateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rule {
            Some(i) => write!(
                f,
                "line {}: rule {} of chain {} (`-A {} {}`): {}",
                self.line,
                i + 1,
                self.chain,
                self.chain,
                self.text,
                self.message
            ),
            None if self.chain.is_empty() => f.write_str(&self.message),
            None => write!(f, "chain {}: {}", self.chain, self.message),
        }
    }
}

impl std::error::Error for TranslateError {}

/// nf_tables' limit on nested jumps (`NFT_JUMP_STACK_SIZE` - 1).
const NFT_MAX_DEPTH: usize = 15;

impl Ruleset {
    /// The `filter` table as an `nft -f` script: `table ip filter { … }` with the base chains
    /// `type filter hook input|forward|output priority 0; policy accept|drop;`, loadable into a
    /// fresh network namespace (it neither flushes nor deletes anything first). Empty when the
    /// rule set has no chains.
    ///
    /// Translated: every criterion of the model — `ip saddr 10.0.0.0/8`, `ip saddr &
    /// 255.0.255.0 == 10.0.0.0`, `ip saddr 1.2.3.4-1.2.3.9`, `iifname "eth*"`, `meta l4proto
    /// tcp`, `tcp dport 1000-2000`, `tcp flags & (syn | ack) == (syn)`, `udp dport { 53, 123 }`,
    /// `tcp sport . tcp dport { 7 . 0-65535, 0-65535 . 7 }` for `--ports`, each with `!=` when
    /// negated —, `-m comment` (`comment "…"`, last), and among opaque matches `-f` (`ip
    /// frag-off & 0x1fff != 0`), `-m conntrack --ctstate` and `-m state --state` (`ct state …`),
    /// `--icmp-type` (`icmp type 8`, `icmp type 3 icmp code 1`). Targets: `accept`, `drop`,
    /// `reject [with tcp reset | with icmp type …]`, `return`, `jump`, `goto`, `LOG` with prefix
    /// and level (`log …`), `MARK --set-mark v` and `--set-xmark v/0xffffffff` (`meta mark set`),
    /// `NFQUEUE [--queue-num n] [--queue-bypass]` (`queue num n [bypass]`). Every rule gets a
    /// `counter` (with its counts when it has them); chain counters have no nft form.
    ///
    /// Not translated, with an error naming the rule, its chain and line: other opaque matches
    /// and extension targets, comments nft cannot quote (with `"`, or over 128 bytes), several
    /// comments on one rule, chain names nft cannot parse (not an identifier, or one of its
    /// keywords), user chains nested deeper than nf_tables' 15 ([`Ruleset::jump_depth`]), and
    /// tables other than `filter`.
    ///
    /// ```
    /// let rs = netsift_classify::iptables::parse(
    ///     "*filter\n:INPUT DROP [0:0]\n-A INPUT -s 10.0.0.0/8 -p tcp -m tcp --dport 22 -j ACCEPT\nCOMMIT\n",
    /// )
    /// .unwrap();
    /// let nft = rs.to_nft().unwrap();
    /// assert!(nft.contains("type filter hook input priority 0; policy drop;"));
    /// assert!(nft.contains("ip saddr 10.0.0.0/8 meta l4proto tcp tcp dport 22 counter accept"));
    /// ```
    pub fn to_nft(&self) -> Result<String, TranslateError> {
        let whole = |message: String| TranslateError {
            line: 0,
            chain: String::new(),
            rule: None,
            text: String::new(),
            message,
        };
        if let Some(t) = self.other_tables.first() {
            return Err(whole(format!(
                "table {}: only the filter table is translated",
                t.name
            )));
        }
        if self.chains.is_empty() {
            return Ok(String::new());
        }
        match self.jump_depth() {
            None => return Err(whole("the jumps loop or go to missing chains".into())),
            Some(d) if d > NFT_MAX_DEPTH => {
                return Err(whole(format!(
                    "user chains nest {d} deep; nf_tables allows at most {NFT_MAX_DEPTH}"
                )));
            }
            Some(_) => {}
        }
        let mut s = String::from("table ip filter {\n");
        for c in &self.chains {
            check_name(&c.name).map_err(|m| TranslateError {
                chain: c.name.clone(),
                ..whole(m)
            })?;
            let _ = writeln!(s, "\tchain {} {{", c.name);
            if let Some(p) = c.policy {
                let hook = c.name.to_ascii_lowercase();
                let _ = writeln!(
                    s,
                    "\t\ttype filter hook {hook} priority 0; policy {};",
                    p.name().to_ascii_lowercase()
                );
            }
            for (i, r) in c.rules.iter().enumerate() {
                let line = rule(r).map_err(|message| TranslateError {
                    line: r.line,
                    chain: c.name.clone(),
                    rule: Some(i),
                    text: r.to_string(),
                    message,
                })?;
                let _ = writeln!(s, "\t\t{line}");
            }
            s.push_str("\t}\n");
        }
        s.push_str("}\n");
        Ok(s)
    }
}

/// A chain name nft reads as one: an identifier that is not a keyword.
fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '.')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'));
    if !ident {
        return Err(format!(
            "chain name `{name}` is not an nft identifier (a letter, `_` or `.`, then letters, \
             digits, `/`, `-`, `_`, `.`)"
        ));
    }
    if NFT_KEYWORDS.binary_search(&name).is_ok() {
        return Err(format!("chain name `{name}` is an nft keyword"));
    }
    Ok(())
}

fn op(negated: bool) -> &'static str {
    if negated { "!= " } else { "" }
}

fn ip(a: u32) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(a)
}

fn addr(field: &str, a: &Addr) -> Option<String> {
    Some(match a.prefix_len() {
        Some(0) if !a.negated => return None,
        Some(32) => format!("ip {field} {}{}", op(a.negated), ip(a.addr)),
        Some(len) if len > 0 => format!("ip {field} {}{}/{len}", op(a.negated), ip(a.addr)),
        _ => format!(
            "ip {field} & {} {} {}",
            ip(a.mask),
            if a.negated { "!=" } else { "==" },
            ip(a.addr)
        ),
    })
}

fn iface(key: &str, i: &Iface) -> Result<String, String> {
    if i.name.contains('*') {
        return Err(format!(
            "interface name `{}`: nft would read `*` as a wildcard",
            i.name
        ));
    }
    let name = match i.name.strip_suffix('+') {
        Some(prefix) => format!("{prefix}*"),
        None => i.name.clone(),
    };
    Ok(format!("{key} {}\"{name}\"", op(i.negated)))
}

fn nft_proto(n: u8) -> String {
    match n {
        1 | 6 | 17 => proto_name(n),
        _ => n.to_string(),
    }
}

fn span(r: Range, ip_form: bool) -> String {
    let v = |x: u32| {
        if ip_form {
            ip(x).to_string()
        } else {
            x.to_string()
        }
    };
    if r.lo == r.hi {
        v(r.lo)
    } else {
        format!("{}-{}", v(r.lo), v(r.hi))
    }
}

fn ranged(key: &str, m: &RangeMatch, ip_form: bool) -> String {
    format!("{key} {}{}", op(m.negated), span(m.range, ip_form))
}

fn flags(f: &TcpFlags) -> String {
    let set = |v: u8| {
        let names: Vec<String> = super::parse::TCP_FLAG_NAMES
            .iter()
            .filter(|(_, b)| v & b != 0)
            .map(|(n, _)| n.to_ascii_lowercase())
            .collect();
        if names.is_empty() {
            "0x0".to_string()
        } else {
            format!("({})", names.join(" | "))
        }
    };
    format!(
        "tcp flags & {} {} {}",
        set(f.mask),
        if f.negated { "!=" } else { "==" },
        set(f.comp)
    )
}

/// One rule as an nft rule statement list.
fn rule(r: &IptRule) -> Result<String, String> {
    let mut s: Vec<String> = Vec::new();
    s.extend(r.src.as_ref().and_then(|a| addr("saddr", a)));
    s.extend(r.dst.as_ref().and_then(|a| addr("daddr", a)));
    if let Some(i) = &r.in_iface {
        s.push(iface("iifname", i)?);
    }
    if let Some(i) = &r.out_iface {
        s.push(iface("oifname", i)?);
    }
    if let Some(p) = &r.proto {
        s.push(format!(
            "meta l4proto {}{}",
            op(p.negated),
            nft_proto(p.number)
        ));
    }
    let mut comment: Option<&str> = None;
    for m in &r.matches {
        match m {
            Match::Tcp(pm) | Match::Udp(pm) => {
                let l4 = if matches!(m, Match::Tcp(_)) {
                    "tcp"
                } else {
                    "udp"
                };
                if let Some(x) = &pm.sport {
                    s.push(ranged(&format!("{l4} sport"), x, false));
                }
                if let Some(x) = &pm.dport {
                    s.push(ranged(&format!("{l4} dport"), x, false));
                }
                if let Some(f) = &pm.flags {
                    s.push(flags(f));
                }
            }
            Match::Multiport(mp) => {
                let l4 = match r.proto.map(|p| p.number) {
                    Some(6) => "tcp",
                    Some(17) => "udp",
                    Some(33) => "dccp",
                    Some(132) => "sctp",
                    Some(136) => "udplite",
                    _ => return Err("multiport without -p tcp, udp, dccp, sctp or udplite".into()),
                };
                let list: Vec<String> = mp.ports.iter().map(|&p| span(p, false)).collect();
                let (key, elements) = match mp.dir {
                    PortDir::Source => (format!("{l4} sport"), list),
                    PortDir::Destination => (format!("{l4} dport"), list),
                    // Either port: the pair of ports is in (p, any) or (any, p), as
                    // iptables-nft writes it.
                    PortDir::Either => (
                        format!("{l4} sport . {l4} dport"),
                        list.iter()
                            .flat_map(|p| [format!("{p} . 0-65535"), format!("0-65535 . {p}")])
                            .collect(),
                    ),
                };
                s.push(format!(
                    "{key} {}{{ {} }}",
                    op(mp.negated),
                    elements.join(", ")
                ));
            }
            Match::IpRange(ir) => {
                if let Some(x) = &ir.src {
                    s.push(ranged("ip saddr", x, true));
                }
                if let Some(x) = &ir.dst {
                    s.push(ranged("ip daddr", x, true));
                }
            }
            Match::Comment(c) => {
                if comment.is_some() {
                    return Err("several comments: an nft rule has one".into());
                }
                if c.contains('"') || c.len() > 128 {
                    return Err(format!(
                        "comment `{c}`: nft takes at most 128 bytes and no `\"`"
                    ));
                }
                comment = Some(c);
            }
            Match::Opaque(o) => s.push(
                opaque(&o.words()).ok_or_else(|| format!("no nft translation for `{}`", o.text))?,
            ),
        }
    }
    match &r.counters {
        Some(k) => s.push(format!("counter packets {} bytes {}", k.packets, k.bytes)),
        None => s.push("counter".into()),
    }
    match &r.target {
        Target::None => {}
        Target::Accept => s.push("accept".into()),
        Target::Drop => s.push("drop".into()),
        Target::Return => s.push("return".into()),
        Target::Reject(with) => s.push(reject(with.as_deref())),
        Target::Jump(c) => s.push(format!("jump {c}")),
        Target::Goto(c) => s.push(format!("goto {c}")),
        Target::Extension { name, args } => {
            let words = super::Opaque { text: args.clone() }.words();
            s.push(extension(name, &words).ok_or_else(|| {
                format!(
                    "no nft translation for target `{name}{}{args}`",
                    if args.is_empty() { "" } else { " " }
                )
            })?);
        }
    }
    if let Some(c) = comment {
        s.push(format!("comment \"{c}\""));
    }
    Ok(s.join(" "))
}

fn reject(with: Option<&str>) -> String {
    let icmp = match with {
        None | Some("icmp-port-unreachable" | "port-unreach") => return "reject".into(),
        Some("tcp-reset" | "tcp-rst") => return "reject with tcp reset".into(),
        Some("icmp-net-unreachable" | "net-unreach") => "net-unreachable",
        Some("icmp-host-unreachable" | "host-unreach") => "host-unreachable",
        Some("icmp-proto-unreachable" | "proto-unreach") => "prot-unreachable",
        Some("icmp-net-prohibited" | "net-prohib") => "net-prohibited",
        Some("icmp-host-prohibited" | "host-prohib") => "host-prohibited",
        Some(_) => "admin-prohibited",
    };
    format!("reject with icmp type {icmp}")
}

/// The opaque matches with a translation.
fn opaque(w: &[String]) -> Option<String> {
    let w: Vec<&str> = w.iter().map(String::as_str).collect();
    match w.as_slice() {
        ["-f" | "--fragment"] => Some("ip frag-off & 0x1fff != 0".into()),
        ["!", "-f" | "--fragment"] => Some("ip frag-off & 0x1fff == 0".into()),
        ["-m" | "--match", "conntrack", rest @ ..] => ct_state(rest, "--ctstate"),
        ["-m" | "--match", "state", rest @ ..] => ct_state(rest, "--state"),
        ["-m" | "--match", "icmp", rest @ ..] => icmp_type(rest),
        ["--icmp-type", ..] | ["!", "--icmp-type", ..] => icmp_type(&w),
        _ => None,
    }
}

/// `[!] --icmp-type type[/code]` (a number or a type name), or `any`.
fn icmp_type(rest: &[&str]) -> Option<String> {
    let (negated, v) = match rest {
        ["--icmp-type", v] => (false, *v),
        ["!", "--icmp-type", v] => (true, *v),
        _ => return None,
    };
    if v == "any" {
        return (!negated).then(|| "meta l4proto icmp".into());
    }
    let (t, code) = match v.split_once('/') {
        Some((t, c)) => (t, Some(c.parse::<u8>().ok()?)),
        None => (v, None),
    };
    const NAMES: [(&str, u8); 15] = [
        ("echo-reply", 0),
        ("destination-unreachable", 3),
        ("source-quench", 4),
        ("redirect", 5),
        ("echo-request", 8),
        ("router-advertisement", 9),
        ("router-solicitation", 10),
        ("time-exceeded", 11),
        ("parameter-problem", 12),
        ("timestamp-request", 13),
        ("timestamp-reply", 14),
        ("info-request", 15),
        ("info-reply", 16),
        ("address-mask-request", 17),
        ("address-mask-reply", 18),
    ];
    let t = match NAMES.iter().find(|(n, _)| *n == t) {
        Some(&(_, n)) => n,
        None => t.parse::<u8>().ok()?,
    };
    match (code, negated) {
        (None, _) => Some(format!("icmp type {}{t}", op(negated))),
        (Some(c), false) => Some(format!("icmp type {t} icmp code {c}")),
        // Not (type and code): one comparison of the pair.
        (Some(c), true) => Some(format!("icmp type . icmp code != {{ {t} . {c} }}")),
    }
}

fn ct_state(rest: &[&str], opt: &str) -> Option<String> {
    let (negated, list) = match rest {
        [o, list] if *o == opt => (false, *list),
        ["!", o, list] if *o == opt => (true, *list),
        _ => return None,
    };
    let states: Option<Vec<&str>> = list
        .split(',')
        .map(|s| match s {
            "INVALID" => Some("invalid"),
            "NEW" => Some("new"),
            "ESTABLISHED" => Some("established"),
            "RELATED" => Some("related"),
            "UNTRACKED" => Some("untracked"),
            _ => None,
        })
        .collect();
    let states = states?;
    Some(if negated {
        format!("ct state & ({}) == 0", states.join(" | "))
    } else {
        format!("ct state {}", states.join(","))
    })
}

/// The extension targets with a translation.
fn extension(name: &str, w: &[String]) -> Option<String> {
    let w: Vec<&str> = w.iter().map(String::as_str).collect();
    match name {
        "LOG" => {
            let mut s = String::from("log");
            let mut rest = w.as_slice();
            while let [opt, v, tail @ ..] = rest {
                match *opt {
                    "--log-prefix" if !v.contains('"') => {
                        let _ = write!(s, " prefix \"{v}\"");
                    }
                    "--log-level" => {
                        let level = match v.to_ascii_lowercase().as_str() {
                            "0" | "emerg" | "panic" => "emerg",
                            "1" | "alert" => "alert",
                            "2" | "crit" => "crit",
                            "3" | "err" | "error" => "err",
                            "4" | "warn" | "warning" => "warn",
                            "5" | "notice" => "notice",
                            "6" | "info" => "info",
                            "7" | "debug" => "debug",
                            _ => return None,
                        };
                        let _ = write!(s, " level {level}");
                    }
                    _ => return None,
                }
                rest = tail;
            }
            rest.is_empty().then_some(s)
        }
        "MARK" => {
            let value = match w.as_slice() {
                ["--set-mark", v] => *v,
                ["--set-xmark", v] => v.strip_suffix("/0xffffffff").unwrap_or(v),
                _ => return None,
            };
            let n = parse_u32(value)?;
            Some(format!("meta mark set {n:#x}"))
        }
        "NFQUEUE" => {
            let mut num = 0u32;
            let mut bypass = false;
            let mut rest = w.as_slice();
            loop {
                match rest {
                    [] => break,
                    ["--queue-num", v, tail @ ..] => {
                        num = parse_u32(v).filter(|&n| n <= 0xffff)?;
                        rest = tail;
                    }
                    ["--queue-bypass", tail @ ..] => {
                        bypass = true;
                        rest = tail;
                    }
                    _ => return None,
                }
            }
            Some(format!(
                "queue num {num}{}",
                if bypass { " bypass" } else { "" }
            ))
        }
        _ => None,
    }
}

fn parse_u32(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Every keyword of nft's scanner (nftables `src/scanner.l`, all start conditions), sorted: a
/// chain with one of these names cannot be written.
const NFT_KEYWORDS: [&str; 352] = [
    "a-rwnd",
    "abort",
    "accept",
    "ackseq",
    "add",
    "addr",
    "ah",
    "all",
    "and",
    "arp",
    "asconf",
    "asconf-ack",
    "auto-merge",
    "avgpkt",
    "bridge",
    "burst",
    "bypass",
    "bytes",
    "cfi",
    "cgroup",
    "cgroupv2",
    "chain",
    "chains",
    "check",
    "checksum",
    "chunk",
    "classid",
    "code",
    "comment",
    "comp",
    "constant",
    "continue",
    "cookie-ack",
    "cookie-echo",
    "count",
    "counter",
    "counters",
    "cpi",
    "cpu",
    "create",
    "csumcov",
    "ct",
    "cum-tsn-ack",
    "cwr",
    "daddr",
    "data",
    "day",
    "dccp",
    "define",
    "dei",
    "delete",
    "describe",
    "destroy",
    "device",
    "devices",
    "direction",
    "dnat",
    "doff",
    "dport",
    "drop",
    "dscp",
    "dst",
    "dup",
    "dynamic",
    "echo",
    "ecn",
    "ecne",
    "element",
    "elements",
    "eol",
    "eq",
    "error",
    "esp",
    "ether",
    "event",
    "exists",
    "expectation",
    "expiration",
    "expires",
    "export",
    "exthdr",
    "fanout",
    "fastopen",
    "fib",
    "flags",
    "flow",
    "flowlabel",
    "flowtable",
    "flowtables",
    "flush",
    "forward-tsn",
    "frag",
    "frag-off",
    "fully-random",
    "fwd",
    "gateway",
    "gc-interval",
    "ge",
    "geneve",
    "get",
    "goto",
    "gre",
    "gretap",
    "group",
    "gt",
    "handle",
    "hbh",
    "hdrlength",
    "heartbeat",
    "heartbeat-ack",
    "helper",
    "helpers",
    "hlen",
    "hook",
    "hooks",
    "hoplimit",
    "hour",
    "htype",
    "ibriport",
    "ibrname",
    "icmp",
    "icmpv6",
    "icmpx",
    "id",
    "igmp",
    "iif",
    "iifgroup",
    "iifname",
    "iiftype",
    "import",
    "in",
    "inc",
    "include",
    "index",
    "inet",
    "init",
    "init-ack",
    "init-tag",
    "initial-tsn",
    "insert",
    "interval",
    "ip",
    "ip6",
    "ipsec",
    "jhash",
    "json",
    "jump",
    "l3proto",
    "label",
    "last",
    "last-entry",
    "le",
    "left",
    "length",
    "level",
    "limit",
    "limits",
    "list",
    "ll",
    "log",
    "lowest-tsn",
    "lshift",
    "lsrr",
    "lt",
    "map",
    "maps",
    "mark",
    "masquerade",
    "max-delay",
    "maxseg",
    "md5sig",
    "memory",
    "meta",
    "meter",
    "meters",
    "mh",
    "minute",
    "missing",
    "mod",
    "monitor",
    "more-fragments",
    "mptcp",
    "mrt",
    "mss",
    "mtu",
    "name",
    "ne",
    "netdev",
    "never",
    "new-cum-tsn",
    "nexthdr",
    "nexthop",
    "nftrace",
    "nh",
    "noop",
    "nop",
    "not",
    "notrack",
    "num",
    "num-dup-tsns",
    "num-gap-ack-blocks",
    "num-inbound-streams",
    "num-outbound-streams",
    "numgen",
    "obriport",
    "obrname",
    "offload",
    "offset",
    "oif",
    "oifgroup",
    "oifname",
    "oiftype",
    "operation",
    "option",
    "options",
    "or",
    "original",
    "osf",
    "out",
    "over",
    "packets",
    "param-problem",
    "pcp",
    "performance",
    "persistent",
    "pkttype",
    "plen",
    "policy",
    "port",
    "position",
    "ppid",
    "prefix",
    "priority",
    "proto-dst",
    "proto-src",
    "protocol",
    "ptr",
    "ptype",
    "queue",
    "queue-threshold",
    "quota",
    "quotas",
    "ra",
    "random",
    "rate",
    "redefine",
    "redirect",
    "reject",
    "rename",
    "replace",
    "reply",
    "reqid",
    "reserved",
    "reserved2",
    "reset",
    "return",
    "right",
    "rr",
    "rshift",
    "rt",
    "rt0",
    "rt2",
    "rtclassid",
    "rule",
    "rules",
    "ruleset",
    "sack",
    "sack-perm",
    "sack-permitted",
    "sack0",
    "sack1",
    "sack2",
    "sack3",
    "saddr",
    "sctp",
    "secmark",
    "secmarks",
    "second",
    "seed",
    "seg-left",
    "seqno",
    "sequence",
    "set",
    "sets",
    "shutdown",
    "shutdown-ack",
    "shutdown-complete",
    "sid",
    "size",
    "skgid",
    "skuid",
    "snaplen",
    "snat",
    "socket",
    "spi",
    "spnum",
    "sport",
    "srh",
    "ssn",
    "ssrr",
    "state",
    "status",
    "stream",
    "subtype",
    "symhash",
    "synproxy",
    "synproxys",
    "table",
    "tables",
    "taddr",
    "tag",
    "tcp",
    "th",
    "time",
    "timeout",
    "timestamp",
    "to",
    "tproxy",
    "trace",
    "transparent",
    "tsecr",
    "tsn",
    "tsval",
    "ttl",
    "tunnel",
    "tunnels",
    "type",
    "typeof",
    "udp",
    "udplite",
    "undefine",
    "until",
    "update",
    "urgptr",
    "used",
    "value",
    "version",
    "vlan",
    "vm",
    "vmap",
    "vni",
    "vtag",
    "vxlan",
    "week",
    "wildcard",
    "window",
    "with",
    "wscale",
    "xml",
    "xor",
    "xt",
    "zone",
];

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn nft(body: &str) -> Result<String, TranslateError> {
        parse(&format!("*filter\n{body}COMMIT\n"))
            .unwrap_or_else(|e| panic!("{e}"))
            .to_nft()
    }

    #[test]
    fn keywords_are_sorted_and_unique() {
        assert!(
            NFT_KEYWORDS.windows(2).all(|w| w[0] < w[1]),
            "{:?}",
            NFT_KEYWORDS.windows(2).find(|w| w[0] >= w[1])
        );
    }

    #[test]
    fn translates_the_model() {
        let text = nft(":INPUT DROP [3:4]\n:FORWARD ACCEPT [0:0]\n:web - [0:0]\n\
             [5:100] -A INPUT -i lo -j ACCEPT\n\
             -A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n\
             -A INPUT ! -s 10.0.0.0/255.0.255.0 -p tcp -m tcp --dport 22 -j ACCEPT\n\
             -A INPUT -s 10.0.0.0/8 ! -d 10.1.0.0/16 -p tcp -m tcp ! --sport 1000:2000 --dport 80:65535 -j web\n\
             -A INPUT -p udp -m multiport --dports 53,123,1000:2000 -m comment --comment \"dns and ntp\" -j ACCEPT\n\
             -A INPUT -m iprange --src-range 1.2.3.4-1.2.3.9 ! --dst-range 5.5.5.5-5.5.5.7 -j DROP\n\
             -A INPUT -p tcp -m tcp --tcp-flags SYN,ACK SYN -j LOG --log-prefix \"syn: \" --log-level 4\n\
             -A INPUT -p tcp -m tcp ! --syn -j REJECT --reject-with tcp-reset\n\
             -A INPUT -p icmp -j REJECT --reject-with icmp-host-prohibited\n\
             -A INPUT -p icmp -m icmp --icmp-type 8 -j ACCEPT\n\
             -A INPUT -p icmp -m icmp ! --icmp-type 3/1 -j ACCEPT\n\
             -A INPUT -p icmp --icmp-type echo-reply -j ACCEPT\n\
             -A INPUT ! -p 47 -i eth+ -j MARK --set-xmark 0x5/0xffffffff\n\
             -A INPUT -s 1.2.3.4/32 -f -m state ! --state INVALID,NEW -g web\n\
             -A web -p tcp -m tcp --dport 80 -j NFQUEUE --queue-num 3 --queue-bypass\n\
             -A web -p udp -m multiport ! --ports 7,9:10 -j RETURN\n\
             -A web\n")
        .unwrap();
        let want = "table ip filter {
\tchain INPUT {
\t\ttype filter hook input priority 0; policy drop;
\t\tiifname \"lo\" counter packets 5 bytes 100 accept
\t\tct state related,established counter accept
\t\tip saddr & 255.0.255.0 != 10.0.0.0 meta l4proto tcp tcp dport 22 counter accept
\t\tip saddr 10.0.0.0/8 ip daddr != 10.1.0.0/16 meta l4proto tcp tcp sport != 1000-2000 tcp dport 80-65535 counter jump web
\t\tmeta l4proto udp udp dport { 53, 123, 1000-2000 } counter accept comment \"dns and ntp\"
\t\tip saddr 1.2.3.4-1.2.3.9 ip daddr != 5.5.5.5-5.5.5.7 counter drop
\t\tmeta l4proto tcp tcp flags & (syn | ack) == (syn) counter log prefix \"syn: \" level warn
\t\tmeta l4proto tcp tcp flags & (fin | syn | rst | ack) != (syn) counter reject with tcp reset
\t\tmeta l4proto icmp counter reject with icmp type host-prohibited
\t\tmeta l4proto icmp icmp type 8 counter accept
\t\tmeta l4proto icmp icmp type . icmp code != { 3 . 1 } counter accept
\t\tmeta l4proto icmp icmp type 0 counter accept
\t\tiifname \"eth*\" meta l4proto != 47 counter meta mark set 0x5
\t\tip saddr 1.2.3.4 ip frag-off & 0x1fff != 0 ct state & (invalid | new) == 0 counter goto web
\t}
\tchain FORWARD {
\t\ttype filter hook forward priority 0; policy accept;
\t}
\tchain OUTPUT {
\t\ttype filter hook output priority 0; policy accept;
\t}
\tchain web {
\t\tmeta l4proto tcp tcp dport 80 counter queue num 3 bypass
\t\tmeta l4proto udp udp sport . udp dport != { 7 . 0-65535, 0-65535 . 7, 9-10 . 0-65535, 0-65535 . 9-10 } counter return
\t\tcounter
\t}
}
";
        assert_eq!(text, want, "{text}");
        assert_eq!(parse("").unwrap().to_nft().unwrap(), "");
    }

    #[test]
    fn names_what_has_no_translation() {
        let bad = [
            (
                "-A INPUT -m limit --limit 1/s -j ACCEPT",
                "no nft translation for `-m limit --limit 1/s`",
            ),
            ("-A INPUT -j LOG --log-uid", "target `LOG --log-uid`"),
            ("-A INPUT -j MARK --set-xmark 0x1/0xff", "target `MARK"),
            (
                "-A INPUT -m comment --comment \"a\\\"b\" -j ACCEPT",
                "no `\"`",
            ),
            (
                "-A INPUT -m comment --comment a -m comment --comment b",
                "several comments",
            ),
            ("-A INPUT -i eth*1 -j ACCEPT", "wildcard"),
        ];
        for (rule, what) in bad {
            let e = nft(&format!("{rule}\n")).unwrap_err();
            assert_eq!(
                (e.line, e.rule, e.chain.as_str()),
                (2, Some(0), "INPUT"),
                "{rule}"
            );
            assert!(e.to_string().contains(what), "{rule}: {e}");
            assert!(
                e.to_string()
                    .starts_with("line 2: rule 1 of chain INPUT (`-A INPUT "),
                "{e}"
            );
        }
        let e = nft(":counter - [0:0]\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "chain counter: chain name `counter` is an nft keyword"
        );
        let e = nft(":1abc - [0:0]\n").unwrap_err();
        assert!(e.message.contains("not an nft identifier"), "{e}");
        let nat = parse("*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n").unwrap();
        assert!(nat.to_nft().unwrap_err().message.contains("table nat"));
        // Sixteen nested chains are one too many for nf_tables.
        let mut body = String::new();
        for i in 1..=16 {
            body += &format!(":c{i} - [0:0]\n");
        }
        body += "-A INPUT -j c1\n";
        for i in 1..16 {
            body += &format!("-A c{i} -j c{}\n", i + 1);
        }
        let e = nft(&body).unwrap_err();
        assert!(e.message.contains("nest 16 deep"), "{e}");
    }
}
