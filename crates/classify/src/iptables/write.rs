//! The `iptables-restore` writer: `iptables-save`'s format, so that reading the text back gives
//! the same [`Ruleset`].

use std::fmt::{self, Write as _};

use super::lex::quote;
use super::parse::TCP_FLAG_NAMES;
use super::{Addr, IptRule, Match, PortDir, RangeMatch, Ruleset, Target, TcpFlags};
use crate::Range;

impl Ruleset {
    /// The rule set as `iptables-restore` input: the `filter` table (when it has chains), then
    /// the other tables verbatim. Chain counters are always written, rule counters where the
    /// rule has them (`iptables-restore -c` loads them; without `-c` they are ignored). Address ranges that are not prefixes are
    /// written with `-m iprange` (they are [`Match::IpRange`]s in the model).
    ///
    /// For a rule set that passes [`validate`](Ruleset::validate) (every parsed one does),
    /// [`parse`](super::parse) of the text gives the rule set back.
    pub fn to_restore(&self) -> String {
        let mut s = String::new();
        if !self.chains.is_empty() {
            s.push_str("*filter\n");
            for c in &self.chains {
                let policy = c.policy.map_or("-", |p| p.name());
                let k = c.counters;
                let _ = writeln!(s, ":{} {policy} [{}:{}]", c.name, k.packets, k.bytes);
            }
            for c in &self.chains {
                for r in &c.rules {
                    if let Some(k) = r.counters {
                        let _ = write!(s, "[{}:{}] ", k.packets, k.bytes);
                    }
                    let _ = write!(s, "-A {}", c.name);
                    let spec = r.to_string();
                    if !spec.is_empty() {
                        s.push(' ');
                        s.push_str(&spec);
                    }
                    s.push('\n');
                }
            }
            s.push_str("COMMIT\n");
        }
        for t in &self.other_tables {
            s.push_str(&t.text);
        }
        s
    }
}

/// A protocol as `-p` takes it: iptables' built-in names, else the number.
pub(super) fn proto_name(n: u8) -> String {
    match n {
        1 => "icmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        50 => "esp".into(),
        51 => "ah".into(),
        132 => "sctp".into(),
        136 => "udplite".into(),
        _ => n.to_string(),
    }
}

fn ip(a: u32) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(a)
}

fn addr(a: &Addr) -> String {
    match a.prefix_len() {
        Some(len) => format!("{}/{len}", ip(a.addr)),
        None => format!("{}/{}", ip(a.addr), ip(a.mask)),
    }
}

fn bang(negated: bool) -> &'static str {
    if negated { "! " } else { "" }
}

fn ports(r: Range) -> String {
    if r.lo == r.hi {
        r.lo.to_string()
    } else {
        format!("{}:{}", r.lo, r.hi)
    }
}

/// Flags by name, comma-separated, `NONE` for none.
pub(super) fn flag_names(v: u8) -> String {
    let names: Vec<&str> = TCP_FLAG_NAMES
        .iter()
        .filter(|(_, f)| v & f != 0)
        .map(|(n, _)| *n)
        .collect();
    if names.is_empty() {
        "NONE".into()
    } else {
        names.join(",")
    }
}

fn range_opt(
    out: &mut Vec<String>,
    opt: &str,
    m: &Option<RangeMatch>,
    f: impl Fn(Range) -> String,
) {
    if let Some(m) = m {
        out.push(format!("{}{opt} {}", bang(m.negated), f(m.range)));
    }
}

impl fmt::Display for IptRule {
    /// The rule's options as `iptables-save` writes them after `-A CHAIN`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut w: Vec<String> = Vec::new();
        if let Some(a) = &self.src {
            w.push(format!("{}-s {}", bang(a.negated), addr(a)));
        }
        if let Some(a) = &self.dst {
            w.push(format!("{}-d {}", bang(a.negated), addr(a)));
        }
        if let Some(i) = &self.in_iface {
            w.push(format!("{}-i {}", bang(i.negated), i.name));
        }
        if let Some(i) = &self.out_iface {
            w.push(format!("{}-o {}", bang(i.negated), i.name));
        }
        if let Some(p) = &self.proto {
            w.push(format!("{}-p {}", bang(p.negated), proto_name(p.number)));
        }
        for m in &self.matches {
            match m {
                Match::Tcp(pm) | Match::Udp(pm) => {
                    w.push(
                        if matches!(m, Match::Tcp(_)) {
                            "-m tcp"
                        } else {
                            "-m udp"
                        }
                        .into(),
                    );
                    range_opt(&mut w, "--sport", &pm.sport, ports);
                    range_opt(&mut w, "--dport", &pm.dport, ports);
                    if let Some(TcpFlags {
                        mask,
                        comp,
                        negated,
                    }) = pm.flags
                    {
                        w.push(format!(
                            "{}--tcp-flags {} {}",
                            bang(negated),
                            flag_names(mask),
                            flag_names(comp)
                        ));
                    }
                }
                Match::Multiport(mp) => {
                    let opt = match mp.dir {
                        PortDir::Source => "--sports",
                        PortDir::Destination => "--dports",
                        PortDir::Either => "--ports",
                    };
                    let list: Vec<String> = mp.ports.iter().map(|&r| ports(r)).collect();
                    w.push(format!(
                        "-m multiport {}{opt} {}",
                        bang(mp.negated),
                        list.join(",")
                    ));
                }
                Match::IpRange(ir) => {
                    w.push("-m iprange".into());
                    let r = |r: Range| format!("{}-{}", ip(r.lo), ip(r.hi));
                    range_opt(&mut w, "--src-range", &ir.src, r);
                    range_opt(&mut w, "--dst-range", &ir.dst, r);
                }
                Match::Comment(c) => w.push(format!("-m comment --comment {}", quote(c))),
                Match::Opaque(o) => w.push(o.text.clone()),
            }
        }
        match &self.target {
            Target::None => {}
            Target::Accept => w.push("-j ACCEPT".into()),
            Target::Drop => w.push("-j DROP".into()),
            Target::Return => w.push("-j RETURN".into()),
            Target::Reject(None) => w.push("-j REJECT".into()),
            Target::Reject(Some(t)) => w.push(format!("-j REJECT --reject-with {t}")),
            Target::Jump(c) => w.push(format!("-j {c}")),
            Target::Goto(c) => w.push(format!("-g {c}")),
            Target::Extension { name, args } => {
                w.push(format!("-j {name}"));
                if !args.is_empty() {
                    w.push(args.clone());
                }
            }
        }
        f.write_str(&w.join(" "))
    }
}
