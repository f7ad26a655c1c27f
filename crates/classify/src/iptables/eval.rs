//! Linear evaluation of a rule set with iptables' chain semantics.
//!
//! From a built-in chain, rules are examined in order; the first whose criteria all hold
//! applies its target:
//!
//! - `ACCEPT`, `DROP`, `REJECT` and terminating extensions (`NFQUEUE`, …) end evaluation;
//! - no target and non-terminating extensions (`LOG`, `MARK`, …) continue with the next rule;
//! - `-j CHAIN` pushes the position after the rule and continues at the top of `CHAIN`;
//! - `-g CHAIN` continues at the top of `CHAIN` without pushing;
//! - `RETURN`, and running off the end of a user chain, pop the last pushed position;
//!   with nothing to pop (in the built-in chain, or in a chain reached from it by gotos only)
//!   the built-in chain's policy decides.
//!
//! Criteria are evaluated on a [`Packet`]. [`Opaque`] matches (`-m conntrack`, `-f`, …) are
//! decided by an oracle the caller supplies; [`Evaluator::evaluate`] uses one that says "does
//! not match" — the right answer for rule sets whose opaque matches select traffic the
//! five-field headers do not describe, and a choice to revisit for others (a `! --ctstate
//! INVALID` rule, for one, matches almost every real packet).
//!
//! Evaluation is bounded: a rule set that passed the reader has no jump loop, and every
//! evaluation stops with [`EvalError::StepLimit`] after [`Evaluator::max_steps`] rules.

use std::fmt;

use super::{IptRule, Match, Opaque, Policy, Ruleset, Target};
use crate::Header;

/// A packet as the rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Source and destination address, source and destination port, protocol.
    pub header: Header,
    /// The TCP flags byte (FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10, URG 0x20); 0 for
    /// other protocols.
    pub tcp_flags: u8,
    /// The input interface (`-i`); empty when there is none (`OUTPUT`).
    pub in_iface: &'a str,
    /// The output interface (`-o`); empty when there is none (`INPUT`).
    pub out_iface: &'a str,
}

impl Packet<'static> {
    /// A packet with these header fields, no TCP flags and no interfaces.
    pub fn new(header: Header) -> Packet<'static> {
        Packet {
            header,
            tcp_flags: 0,
            in_iface: "",
            out_iface: "",
        }
    }
}

impl<'a> Packet<'a> {
    /// The same packet with these TCP flags.
    pub fn with_tcp_flags(self, flags: u8) -> Packet<'a> {
        Packet {
            tcp_flags: flags,
            ..self
        }
    }

    /// The same packet on these interfaces.
    pub fn with_ifaces<'b>(self, input: &'b str, output: &'b str) -> Packet<'b> {
        Packet {
            header: self.header,
            tcp_flags: self.tcp_flags,
            in_iface: input,
            out_iface: output,
        }
    }
}

/// The outcome of an evaluation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// `ACCEPT` (a rule's or the policy).
    Accept,
    /// `DROP` (a rule's or the policy).
    Drop,
    /// `REJECT`.
    Reject,
    /// Another terminating target, by name (`NFQUEUE`, …).
    Other(String),
}

impl From<Policy> for Verdict {
    fn from(p: Policy) -> Verdict {
        match p {
            Policy::Accept => Verdict::Accept,
            Policy::Drop => Verdict::Drop,
        }
    }
}

/// A rule: the index of its chain in [`Ruleset::chains`] and its index in the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Step {
    /// The chain.
    pub chain: usize,
    /// The rule in the chain.
    pub rule: usize,
}

/// A verdict and how it was reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluation {
    /// The verdict.
    pub verdict: Verdict,
    /// The rule whose target gave the verdict; `None` when the policy did.
    pub decided_by: Option<Step>,
    /// Every rule examined, in order (matching or not).
    pub path: Vec<Step>,
}

impl Evaluation {
    /// The number of rules examined: the path-length metric of the HiTables simulation.
    pub fn rules_visited(&self) -> usize {
        self.path.len()
    }
}

/// Why a packet could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// No chain of that name.
    NoSuchChain(String),
    /// Evaluation starts at a built-in chain (it has the policy).
    NotBuiltin(String),
    /// A jump or goto to a chain that does not exist.
    UnknownJump {
        /// The rule.
        at: Step,
        /// The missing chain.
        target: String,
    },
    /// More rules examined than the limit (a rule set with a jump loop).
    StepLimit(usize),
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::NoSuchChain(c) => write!(f, "no chain {c}"),
            EvalError::NotBuiltin(c) => {
                write!(f, "evaluation starts at a built-in chain, not {c}")
            }
            EvalError::UnknownJump { at, target } => write!(
                f,
                "rule {} of chain #{} jumps to missing chain {target}",
                at.rule + 1,
                at.chain
            ),
            EvalError::StepLimit(n) => write!(f, "more than {n} rules examined (a jump loop?)"),
        }
    }
}

impl std::error::Error for EvalError {}

/// A rule set with its jumps resolved, ready to evaluate packets.
#[derive(Clone, Debug)]
pub struct Evaluator<'r> {
    rs: &'r Ruleset,
    /// The chain index each rule jumps or goes to (`u32::MAX`: none).
    jumps: Vec<Vec<u32>>,
    max_steps: usize,
}

impl Ruleset {
    /// An [`Evaluator`] for this rule set.
    pub fn evaluator(&self) -> Result<Evaluator<'_>, EvalError> {
        Evaluator::new(self)
    }

    /// Evaluates one packet from built-in chain `chain` (opaque matches do not match). For
    /// many packets, make an [`evaluator`](Ruleset::evaluator) once.
    pub fn evaluate(&self, chain: &str, p: &Packet<'_>) -> Result<Evaluation, EvalError> {
        self.evaluator()?.evaluate(chain, p)
    }
}

impl<'r> Evaluator<'r> {
    /// The default [`max_steps`](Evaluator::max_steps).
    pub const DEFAULT_MAX_STEPS: usize = 1 << 22;

    /// Resolves the jumps of `rs`.
    pub fn new(rs: &'r Ruleset) -> Result<Evaluator<'r>, EvalError> {
        let index: std::collections::HashMap<&str, u32> = rs
            .chains
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_str(), i as u32))
            .collect();
        let mut jumps = Vec::with_capacity(rs.chains.len());
        for (ci, c) in rs.chains.iter().enumerate() {
            let mut v = Vec::with_capacity(c.rules.len());
            for (ri, r) in c.rules.iter().enumerate() {
                v.push(match r.target.chain() {
                    None => u32::MAX,
                    Some(t) => *index.get(t).ok_or_else(|| EvalError::UnknownJump {
                        at: Step {
                            chain: ci,
                            rule: ri,
                        },
                        target: t.to_string(),
                    })?,
                });
            }
            jumps.push(v);
        }
        Ok(Evaluator {
            rs,
            jumps,
            max_steps: Self::DEFAULT_MAX_STEPS,
        })
    }

    /// The most rules one evaluation examines before giving up.
    pub fn max_steps(&self) -> usize {
        self.max_steps
    }

    /// The same evaluator with another step limit.
    pub fn with_max_steps(self, max_steps: usize) -> Evaluator<'r> {
        Evaluator { max_steps, ..self }
    }

    /// Evaluates `p` from built-in chain `chain`; opaque matches do not match.
    pub fn evaluate(&self, chain: &str, p: &Packet<'_>) -> Result<Evaluation, EvalError> {
        self.evaluate_with(chain, p, &mut |_, _| false)
    }

    /// Evaluates `p` from built-in chain `chain`, asking `oracle` whether each opaque match of
    /// a rule matches.
    pub fn evaluate_with(
        &self,
        chain: &str,
        p: &Packet<'_>,
        oracle: &mut dyn FnMut(&IptRule, &Opaque) -> bool,
    ) -> Result<Evaluation, EvalError> {
        let start = self
            .rs
            .chain_index(chain)
            .ok_or_else(|| EvalError::NoSuchChain(chain.to_string()))?;
        let Some(policy) = self.rs.chains[start].policy else {
            return Err(EvalError::NotBuiltin(chain.to_string()));
        };
        let mut path = Vec::new();
        let mut stack: Vec<(usize, usize)> = Vec::new();
        let (mut c, mut r) = (start, 0);
        let done = |verdict: Verdict, decided_by: Option<Step>, path: Vec<Step>| {
            Ok(Evaluation {
                verdict,
                decided_by,
                path,
            })
        };
        loop {
            let rules = &self.rs.chains[c].rules;
            let Some(rule) = rules.get(r) else {
                // Off the end: back to the caller, or the policy.
                match stack.pop() {
                    Some((pc, pr)) => (c, r) = (pc, pr),
                    None => return done(policy.into(), None, path),
                }
                continue;
            };
            if path.len() >= self.max_steps {
                return Err(EvalError::StepLimit(self.max_steps));
            }
            let step = Step { chain: c, rule: r };
            path.push(step);
            if !rule.matches(p, oracle) {
                r += 1;
                continue;
            }
            match &rule.target {
                Target::Accept => return done(Verdict::Accept, Some(step), path),
                Target::Drop => return done(Verdict::Drop, Some(step), path),
                Target::Reject(_) => return done(Verdict::Reject, Some(step), path),
                Target::Return => match stack.pop() {
                    Some((pc, pr)) => (c, r) = (pc, pr),
                    None => return done(policy.into(), None, path),
                },
                Target::Jump(_) => {
                    stack.push((c, r + 1));
                    (c, r) = (self.jumps[c][r] as usize, 0);
                }
                Target::Goto(_) => (c, r) = (self.jumps[c][r] as usize, 0),
                t @ Target::Extension { name, .. } if t.is_terminal() => {
                    return done(Verdict::Other(name.clone()), Some(step), path);
                }
                Target::Extension { .. } | Target::None => r += 1,
            }
        }
    }
}

impl IptRule {
    /// Whether every criterion of the rule holds for `p`; `oracle` decides opaque matches.
    pub fn matches(
        &self,
        p: &Packet<'_>,
        oracle: &mut dyn FnMut(&IptRule, &Opaque) -> bool,
    ) -> bool {
        let [sa, da, sp, dp, proto] = p.header.0;
        if self.src.is_some_and(|a| !a.matches(sa))
            || self.dst.is_some_and(|a| !a.matches(da))
            || self.proto.is_some_and(|x| !x.matches(proto))
            || self
                .in_iface
                .as_ref()
                .is_some_and(|i| !i.matches(p.in_iface))
            || self
                .out_iface
                .as_ref()
                .is_some_and(|i| !i.matches(p.out_iface))
        {
            return false;
        }
        self.matches.iter().all(|m| match m {
            Match::Tcp(pm) | Match::Udp(pm) => {
                pm.sport.is_none_or(|r| r.matches(sp))
                    && pm.dport.is_none_or(|r| r.matches(dp))
                    && pm.flags.is_none_or(|f| f.matches(p.tcp_flags))
            }
            Match::Multiport(mp) => mp.matches(sp, dp),
            Match::IpRange(ir) => {
                ir.src.is_none_or(|r| r.matches(sa)) && ir.dst.is_none_or(|r| r.matches(da))
            }
            Match::Comment(_) => true,
            Match::Opaque(o) => oracle(self, o),
        })
    }
}

impl Ruleset {
    /// The deepest nesting of user chains reachable from a built-in chain by jumps and gotos
    /// (a built-in chain is at depth 0, a chain it jumps to at 1, …); `None` when the jumps
    /// loop or go to missing chains. nf_tables — and so `iptables-nft` and `nft` — refuses rule
    /// sets deeper than 15; legacy iptables has no such limit.
    pub fn jump_depth(&self) -> Option<usize> {
        let ev = self.evaluator().ok()?;
        // Longest path in the jump graph, by iterative depth-first search.
        const NEW: usize = usize::MAX;
        const ON_STACK: usize = usize::MAX - 1;
        let mut depth = vec![NEW; self.chains.len()];
        let mut best = 0;
        for (root, c) in self.chains.iter().enumerate() {
            if c.policy.is_none() {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            if depth[root] == NEW {
                depth[root] = ON_STACK;
            } else {
                stack.clear();
            }
            while let Some(&mut (ci, ref mut next)) = stack.last_mut() {
                let targets = &ev.jumps[ci];
                if let Some(&t) = targets.get(*next) {
                    *next += 1;
                    if t == u32::MAX {
                        continue;
                    }
                    match depth[t as usize] {
                        NEW => {
                            depth[t as usize] = ON_STACK;
                            stack.push((t as usize, 0));
                        }
                        ON_STACK => return None,
                        _ => {}
                    }
                } else {
                    let d = targets
                        .iter()
                        .filter(|&&t| t != u32::MAX)
                        .map(|&t| depth[t as usize] + 1)
                        .max()
                        .unwrap_or(0);
                    depth[ci] = d;
                    stack.pop();
                }
            }
            best = best.max(depth[root]);
        }
        Some(best)
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn rs(body: &str) -> Ruleset {
        parse(&format!("*filter\n{body}COMMIT\n")).unwrap_or_else(|e| panic!("{}", e.snippet(body)))
    }

    fn tcp(src: [u8; 4], sport: u32, dport: u32) -> Packet<'static> {
        Packet::new(Header(
            [u32::from_be_bytes(src), 0x0a00_0001, sport, dport, 6],
            0,
        ))
    }

    fn path(e: &Evaluation, r: &Ruleset) -> Vec<String> {
        e.path
            .iter()
            .map(|s| format!("{}:{}", r.chains[s.chain].name, s.rule + 1))
            .collect()
    }

    #[test]
    fn first_match_policy_and_counting_rules() {
        let r = rs(":INPUT DROP [0:0]\n\
             -A INPUT -p tcp -m tcp --dport 22 -j LOG --log-prefix \"ssh \"\n\
             -A INPUT -p tcp -m tcp --dport 22\n\
             -A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\n\
             -A INPUT -p udp -j ACCEPT\n");
        let e = r.evaluate("INPUT", &tcp([1, 2, 3, 4], 999, 22)).unwrap();
        assert_eq!(e.verdict, Verdict::Accept);
        assert_eq!(e.decided_by, Some(Step { chain: 0, rule: 2 }));
        assert_eq!(e.rules_visited(), 3);
        let e = r.evaluate("INPUT", &tcp([1, 2, 3, 4], 999, 23)).unwrap();
        assert_eq!(
            (e.verdict.clone(), e.decided_by, e.rules_visited()),
            (Verdict::Drop, None, 4)
        );
        // FORWARD was not declared: policy ACCEPT, no rules.
        let e = r.evaluate("FORWARD", &tcp([1, 2, 3, 4], 1, 2)).unwrap();
        assert_eq!((e.verdict.clone(), e.rules_visited()), (Verdict::Accept, 0));
    }

    #[test]
    fn jumps_gotos_and_returns() {
        let r = rs(":INPUT DROP [0:0]\n:a - [0:0]\n:b - [0:0]\n:c - [0:0]\n\
             -A INPUT -s 10.0.0.0/8 -j a\n\
             -A INPUT -s 10.0.0.0/8 -p tcp -m tcp --dport 80 -j ACCEPT\n\
             -A INPUT -s 11.0.0.0/8 -g b\n\
             -A INPUT -j ACCEPT\n\
             -A a -p tcp -m tcp --dport 22 -j DROP\n\
             -A a -p tcp -m tcp --dport 23 -g b\n\
             -A a -p tcp -m tcp --dport 24 -j RETURN\n\
             -A a -j c\n\
             -A b -p tcp -m tcp --sport 1 -j ACCEPT\n\
             -A b -p tcp -m tcp --sport 2 -j RETURN\n\
             -A c -p tcp -m tcp --sport 3 -j REJECT\n");
        let run = |src, sp, dp| {
            let e = r.evaluate("INPUT", &tcp(src, sp, dp)).unwrap();
            (e.verdict.clone(), path(&e, &r).join(" "))
        };
        // Into a, dropped there.
        assert_eq!(
            run([10, 0, 0, 1], 9, 22),
            (Verdict::Drop, "INPUT:1 a:1".into())
        );
        // a returns (RETURN) to INPUT rule 2.
        assert_eq!(
            run([10, 0, 0, 1], 9, 24),
            (
                Verdict::Accept,
                "INPUT:1 a:1 a:2 a:3 INPUT:2 INPUT:3 INPUT:4".into()
            )
        );
        assert_eq!(
            run([10, 0, 0, 1], 9, 80),
            (
                Verdict::Accept,
                "INPUT:1 a:1 a:2 a:3 a:4 c:1 INPUT:2".into()
            )
        );
        // a jumps to c (end of c returns to a, end of a returns to INPUT).
        assert_eq!(
            run([10, 0, 0, 1], 3, 81),
            (Verdict::Reject, "INPUT:1 a:1 a:2 a:3 a:4 c:1".into())
        );
        // a goes to b; b's RETURN returns past a, to INPUT rule 2.
        assert_eq!(
            run([10, 0, 0, 1], 2, 23),
            (
                Verdict::Accept,
                "INPUT:1 a:1 a:2 b:1 b:2 INPUT:2 INPUT:3 INPUT:4".into()
            )
        );
        // INPUT goes to b: the end of b (and a RETURN in it) means INPUT's policy.
        assert_eq!(
            run([11, 0, 0, 1], 7, 7),
            (Verdict::Drop, "INPUT:1 INPUT:2 INPUT:3 b:1 b:2".into())
        );
        assert_eq!(
            run([11, 0, 0, 1], 2, 7),
            (Verdict::Drop, "INPUT:1 INPUT:2 INPUT:3 b:1 b:2".into())
        );
        assert_eq!(
            run([11, 0, 0, 1], 1, 7),
            (Verdict::Accept, "INPUT:1 INPUT:2 INPUT:3 b:1".into())
        );
        // RETURN in a built-in chain: the policy.
        let r2 = rs(":FORWARD DROP [0:0]\n-A FORWARD -p udp -j RETURN\n-A FORWARD -j ACCEPT\n");
        let udp = Packet::new(Header([1, 2, 3, 4, 17], 0));
        let e = r2.evaluate("FORWARD", &udp).unwrap();
        assert_eq!(
            (e.verdict.clone(), e.decided_by, e.rules_visited()),
            (Verdict::Drop, None, 1)
        );
        assert_eq!(r.jump_depth(), Some(2));
        assert_eq!(r2.jump_depth(), Some(0));
    }

    #[test]
    fn criteria_flags_interfaces_and_oracle() {
        let r = rs(":FORWARD DROP [0:0]\n\
             -A FORWARD -i eth+ ! -o eth1 -j ACCEPT\n\
             -A FORWARD -p tcp -m tcp --syn -j NFQUEUE --queue-num 3\n\
             -A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT\n\
             -A FORWARD -p tcp -m multiport --ports 7,9:10 -m iprange ! --src-range 1.0.0.0-1.0.0.9 -j REJECT\n");
        let p = tcp([1, 0, 0, 5], 1000, 9);
        assert_eq!(
            r.evaluate("FORWARD", &p.with_ifaces("eth0", "eth2"))
                .unwrap()
                .verdict,
            Verdict::Accept
        );
        assert_eq!(
            r.evaluate("FORWARD", &p.with_ifaces("eth0", "eth1"))
                .unwrap()
                .verdict,
            Verdict::Drop
        );
        assert_eq!(
            r.evaluate("FORWARD", &p.with_ifaces("lo", "eth2"))
                .unwrap()
                .rules_visited(),
            4
        );
        let syn = p.with_tcp_flags(0x02);
        assert_eq!(
            r.evaluate("FORWARD", &syn).unwrap().verdict,
            Verdict::Other("NFQUEUE".into())
        );
        assert_eq!(
            r.evaluate("FORWARD", &syn.with_tcp_flags(0x12))
                .unwrap()
                .verdict,
            Verdict::Drop
        );
        let outside = tcp([1, 0, 0, 10], 7, 5000);
        assert_eq!(
            r.evaluate("FORWARD", &outside).unwrap().verdict,
            Verdict::Reject
        );
        // The oracle decides opaque matches.
        let ev = r.evaluator().unwrap();
        let mut asked = Vec::new();
        let e = ev
            .evaluate_with("FORWARD", &p, &mut |rule, o| {
                asked.push((rule.line, o.text.clone()));
                true
            })
            .unwrap();
        assert_eq!(e.verdict, Verdict::Accept);
        assert_eq!(
            asked,
            [(5, "-m conntrack --ctstate ESTABLISHED".to_string())]
        );
    }

    #[test]
    fn errors_and_bounds() {
        let r = rs(":a - [0:0]\n-A INPUT -j a\n-A a -j ACCEPT\n");
        let p = Packet::new(Header([0; 5], 0));
        assert_eq!(
            r.evaluate("nope", &p),
            Err(EvalError::NoSuchChain("nope".into()))
        );
        assert_eq!(r.evaluate("a", &p), Err(EvalError::NotBuiltin("a".into())));
        // A loop built in code (the reader rejects it) hits the step limit.
        let mut bad = r.clone();
        bad.chains[3].rules[0].target = Target::Jump("a".into());
        assert_eq!(bad.jump_depth(), None);
        let ev = bad.evaluator().unwrap().with_max_steps(1000);
        assert_eq!(ev.evaluate("INPUT", &p), Err(EvalError::StepLimit(1000)));
        bad.chains[3].rules[0].target = Target::Goto("zz".into());
        assert!(
            matches!(bad.evaluator(), Err(EvalError::UnknownJump { target, .. }) if target == "zz")
        );
    }
}
