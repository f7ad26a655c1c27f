//! HiTables (paper §5, "Trees in the List"): an iptables rule set rewritten into an equivalent
//! one whose chains encode decision trees, so that an unmodified kernel walks a few dozen rules
//! per packet instead of thousands.
//!
//! Each chain is decomposed into *segments* at *barriers*, a segment of at least
//! [`Params::min_run`] rules gets a tree, and the chain becomes: the rules before the first
//! tree, then `-g` to the tree's root. A tree node is a user chain that dispatches on one field
//! by a binary search over its children's intervals (paper Fig. 4: a test for the middle child,
//! a test for the left half that goes to a chain of its own, and the right half inline); a leaf
//! is a user chain holding the original rules that may match packets in its box, in their
//! original order, then the *exit rule*: `-g` to the chain's continuation (the rules after the
//! segment, in a new chain), or nothing when the segment ends the chain.
//!
//! What differs from the paper's tool, and why:
//!
//! - **`-g`, not `-j`, everywhere in the tree.** Entering the tree and every step inside it is a
//!   goto, so the trees replace the chain rather than being called by it: a `RETURN` in a leaf
//!   returns from the original chain as the original `RETURN` did, falling off a leaf's end is
//!   falling off the chain's end (a built-in chain's policy, or back to the caller of a user
//!   chain), and no packet walks the chain's tail twice. Every chain of the table gets trees,
//!   user chains included; jumps and gotos in leaves keep their meaning.
//! - **Non-transformable rules inside the trees.** A rule the trees cannot decide on (an
//!   unknown match, an interface, TCP flags, a protocol outside [`Params::protocols`]) is not
//!   necessarily a barrier: it is kept verbatim, and placed in every leaf its *known* criteria
//!   (addresses, protocol, ports — the criteria iptables tests before the first unknown match)
//!   overlap. Only a rule with no usable criterion is a barrier. So a set that interleaves a
//!   few ICMP or stateful rules with thousands of TCP rules still becomes one tree.
//! - **Cuts at rule boundaries, and controlled expansion.** Nodes split a field at up to
//!   [`Params::fanout`] − 1 points chosen among rule range starts so that the largest child is
//!   as small as possible (as [`crate::pacuts`] does), the field being the one with the
//!   smallest largest child, then the fewest copies; the copies of one node stay within
//!   [`Params::spfac`] times its rules. The leaves share a budget of rule slots: a node splits
//!   only when its children fit in its budget even as leaves, and hands the budget down in
//!   proportion to its children's rules, so no subtree starves the others (a plain global
//!   budget, spent depth first, leaves the last subtrees as huge leaves). The budget starts at
//!   80% of [`Params::max_expansion`] times the segment's rules and shrinks until the whole
//!   tree — dispatch, leaves and exits — fits in `max_expansion` times. A rule that is exact, ends the chain (`ACCEPT`,
//!   `DROP`, `REJECT`, `RETURN`, `-g`) and covers a node's box hides every later rule there.
//!   Identical leaves are one chain.
//! - **Ports only under a protocol.** iptables matches ports only with `-p tcp` or `-p udp`, so
//!   a node may split ports only below a protocol node (children `-p tcp`, `-p udp`, the rest).
//!
//! Counters are not carried into the rewritten set (a rule may now exist in several leaves); a
//! built-in chain keeps its policy.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use crate::iptables::{
    Addr, Chain, IpRange, IptRule, Match, PortMatch, Proto, Protocols, RangeMatch, Ruleset, Target,
};
use crate::split::{self, Ranges};
use crate::{Field, Range};

/// Rewrite parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Rules a leaf may hold before it is split.
    pub binth: usize,
    /// Most children of a node (2 to 64).
    pub fanout: usize,
    /// The copies of a node's rules in its children stay within `spfac` times its rules.
    pub spfac: usize,
    /// Segments shorter than this stay as they are (the paper's minimum transformation length).
    pub min_run: usize,
    /// A tree's rules (dispatch, leaves, exits) are at most this many times its segment's
    /// rules (when a tree with one rule slot per rule in its leaves fits; see the module
    /// documentation).
    pub max_expansion: f64,
    /// The protocols of transformable rules.
    pub protocols: Protocols,
    /// The deepest nesting of chains the output may have (jumps and gotos from a built-in
    /// chain; nf_tables, and so `iptables-nft` and `nft`, refuses more than 15): trees are made
    /// shallower until the output fits. `usize::MAX` for legacy iptables.
    pub max_depth: usize,
    /// The prefix of the new chains' names (`None`: `ht`, or `ht2`, `ht3`… when a chain of the
    /// input already starts with it).
    pub prefix: Option<String>,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            binth: 16,
            fanout: 16,
            spfac: 4,
            min_run: 10,
            max_expansion: 10.0,
            max_depth: 15,
            protocols: Protocols::tcp_udp(),
            prefix: None,
        }
    }
}

/// One tree of a rewrite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeReport {
    /// The chain the segment came from.
    pub chain: String,
    /// The segment: its first rule's index in the chain, and its length.
    pub first: usize,
    /// Rules in the segment.
    pub rules: usize,
    /// Of which transformable.
    pub transformable: usize,
    /// Distinct leaves.
    pub leaves: usize,
    /// Deepest root-to-leaf path, in nodes.
    pub depth: usize,
    /// Rules emitted for the tree (dispatch, leaves, exits).
    pub emitted: usize,
}

/// What a rewrite did.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Rules in the input.
    pub input_rules: usize,
    /// Rules in the output.
    pub output_rules: usize,
    /// Chains added.
    pub chains_added: usize,
    /// The trees.
    pub trees: Vec<TreeReport>,
    /// Time taken.
    pub time: Duration,
}

/// Why a rule set cannot be rewritten.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The input is not a valid rule set.
    Invalid(crate::iptables::Error),
    /// The prefix asked for clashes with a chain of the input.
    Prefix(String),
    /// The input's chains already nest deeper than [`Params::max_depth`].
    TooDeep {
        /// The input's nesting.
        depth: usize,
        /// The limit.
        max: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(e) => write!(f, "invalid rule set: {e}"),
            Error::Prefix(p) => write!(
                f,
                "chain prefix `{p}`: a chain of the rule set already starts with it"
            ),
            Error::TooDeep { depth, max } => write!(
                f,
                "the rule set's chains already nest {depth} deep, more than {max} (nf_tables \
                 allows 15)"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Rewrite `rs` (see the [module documentation](self)).
pub fn rewrite(rs: &Ruleset, p: &Params) -> Result<(Ruleset, Report), Error> {
    let t0 = Instant::now();
    rs.validate().map_err(Error::Invalid)?;
    let clashes = |pre: &str| rs.chains.iter().any(|c| c.name.starts_with(pre));
    let prefix = match &p.prefix {
        Some(pre) if clashes(pre) => return Err(Error::Prefix(pre.clone())),
        Some(pre) => pre.clone(),
        None => (1..)
            .map(|i| {
                if i == 1 {
                    "ht".to_string()
                } else {
                    format!("ht{i}")
                }
            })
            .find(|pre| !clashes(pre))
            .expect("some prefix is free"),
    };
    let p = Params {
        binth: p.binth.max(1),
        fanout: p.fanout.clamp(2, 64),
        spfac: p.spfac.max(1),
        ..p.clone()
    };
    let input_depth = rs.jump_depth().unwrap_or(0);
    if input_depth > p.max_depth {
        return Err(Error::TooDeep {
            depth: input_depth,
            max: p.max_depth,
        });
    }
    // Trees as deep as they like first; then, while the output nests too deep, shallower.
    let mut levels = usize::MAX;
    let (out, trees, chains_added) = loop {
        let mut out = Ruleset {
            chains: Vec::new(),
            other_tables: rs.other_tables.clone(),
        };
        let mut added = Vec::new();
        let mut trees = Vec::new();
        for (ci, chain) in rs.chains.iter().enumerate() {
            let mut names = Names {
                prefix: format!("{prefix}{ci}_"),
                next: 0,
            };
            let (main, extra, reports) = rewrite_chain(chain, &p, &mut names, levels);
            out.chains.push(main);
            added.extend(extra);
            trees.extend(reports);
        }
        let chains_added = added.len();
        out.chains.extend(added);
        let deepest = trees
            .iter()
            .map(|t: &TreeReport| t.depth)
            .max()
            .unwrap_or(0);
        match out.jump_depth() {
            Some(d) if d <= p.max_depth => break (out, trees, chains_added),
            // No trees at all nest no deeper than the input.
            _ if levels == 0 => break (out, trees, chains_added),
            _ => levels = deepest.saturating_sub(1),
        }
    };
    let count = |r: &Ruleset| r.chains.iter().map(|c| c.rules.len()).sum::<usize>();
    let report = Report {
        input_rules: count(rs),
        output_rules: count(&out),
        chains_added,
        trees,
        time: t0.elapsed(),
    };
    Ok((out, report))
}

/// New chain names: the prefix and a base-36 counter (iptables allows 28 characters).
struct Names {
    prefix: String,
    next: usize,
}

impl Names {
    fn fresh(&mut self) -> String {
        let mut n = self.next;
        self.next += 1;
        let mut digits = Vec::new();
        loop {
            digits.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[n % 36]);
            n /= 36;
            if n == 0 {
                break;
            }
        }
        digits.reverse();
        format!(
            "{}{}",
            self.prefix,
            String::from_utf8(digits).expect("ascii")
        )
    }
}

/// What HiTables knows of a rule.
struct Known {
    /// The boxes the rule may match in (exactly its matches when `exact`).
    boxes: Vec<Ranges>,
    exact: bool,
    /// Its target ends the chain when it matches.
    ends: bool,
}

fn whole() -> Ranges {
    std::array::from_fn(|d| (0, Field::ALL[d].max()))
}

fn to_ranges(r: &crate::Rule) -> Ranges {
    std::array::from_fn(|d| (r.fields[d].lo, r.fields[d].hi))
}

fn known(r: &IptRule, protocols: &Protocols) -> Known {
    let ends = r.target.is_terminal() || matches!(r.target, Target::Goto(_));
    if let Some(b) = r.transformable(protocols) {
        return Known {
            boxes: b.iter().map(to_ranges).collect(),
            exact: true,
            ends,
        };
    }
    // The criteria tested before the first unknown match; interfaces and TCP flags dropped.
    let mut k = r.clone();
    k.in_iface = None;
    k.out_iface = None;
    if let Some(i) = k.matches.iter().position(|m| matches!(m, Match::Opaque(_))) {
        k.matches.truncate(i);
    }
    for m in &mut k.matches {
        if let Match::Tcp(pm) = m {
            pm.flags = None;
        }
    }
    Known {
        boxes: k
            .boxes()
            .map_or_else(|| vec![whole()], |b| b.iter().map(to_ranges).collect()),
        exact: false,
        ends,
    }
}

/// A built tree.
enum Tree {
    /// No rule: the exit.
    Empty,
    /// Rules of the segment (indices), in order.
    Leaf(Vec<u32>),
    /// A split of field `dim`: children by intervals, in order, covering the node's box.
    Split {
        dim: usize,
        kids: Vec<(u32, u32, Tree)>,
    },
    /// `-p tcp`, `-p udp`, everything else.
    Proto {
        tcp: Box<Tree>,
        udp: Box<Tree>,
        other: Box<Tree>,
    },
}

/// The protocols a node's packets may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protos {
    Any,
    Tcp,
    Udp,
    /// Neither TCP nor UDP.
    Other,
}

struct Builder<'a> {
    boxes: Vec<Ranges>,
    /// The segment rule of each box.
    rule_of: Vec<u32>,
    known: &'a [Known],
    p: &'a Params,
    /// Nodes a root-to-leaf path may hold.
    levels: usize,
    /// Rule slots in the leaves so far.
    used: usize,
    leaves: usize,
    depth: usize,
}

impl Builder<'_> {
    fn rules(&self, items: &[u32]) -> Vec<u32> {
        let mut r: Vec<u32> = items.iter().map(|&i| self.rule_of[i as usize]).collect();
        r.dedup();
        r
    }

    fn leaf(&mut self, items: &[u32]) -> Tree {
        let rules = self.rules(items);
        if rules.is_empty() {
            return Tree::Empty;
        }
        self.used += rules.len();
        self.leaves += 1;
        Tree::Leaf(rules)
    }

    /// The subtree for `items` in box `bx`, whose leaves may hold `budget` rule slots.
    fn build(
        &mut self,
        mut items: Vec<u32>,
        bx: Ranges,
        protos: Protos,
        depth: usize,
        budget: usize,
    ) -> Tree {
        self.depth = self.depth.max(depth);
        // A rule that surely ends the chain everywhere in the box hides the later ones.
        let covers = |b: &Ranges| (0..5).all(|d| b[d].0 <= bx[d].0 && bx[d].1 <= b[d].1);
        if let Some(&i) = items.iter().find(|&&i| {
            let k = &self.known[self.rule_of[i as usize] as usize];
            k.exact && k.ends && covers(&self.boxes[i as usize])
        }) {
            let last = self.rule_of[i as usize];
            items.retain(|&j| self.rule_of[j as usize] <= last);
        }
        let n = self.rules(&items).len();
        if n <= self.p.binth || budget < n || depth >= self.levels.min(64) {
            return self.leaf(&items);
        }
        // Candidates: the protocol (when mixed), the addresses, and the ports under TCP or UDP.
        let mut best: Option<(usize, usize, Option<split::Split>)> = None;
        if protos == Protos::Any {
            let (t, u, o) = self.by_proto(&items);
            let (tn, un, on) = (
                self.rules(&t).len(),
                self.rules(&u).len(),
                self.rules(&o).len(),
            );
            let max = tn.max(un).max(on);
            if max < n {
                best = Some((max, tn + un + on, None));
            }
        }
        let dims: &[usize] = match protos {
            Protos::Tcp | Protos::Udp => &[0, 1, 2, 3],
            _ => &[0, 1],
        };
        let limit = self.p.spfac.saturating_mul(items.len());
        for &d in dims {
            let mut parts = self.p.fanout;
            while parts >= 2 {
                match split::split(&self.boxes, &items, d, &bx, parts) {
                    Some(s) if s.slots <= limit => {
                        if best.as_ref().is_none_or(|b| (s.max, s.slots) < (b.0, b.1)) {
                            best = Some((s.max, s.slots, Some(s)));
                        }
                        break;
                    }
                    Some(_) => parts /= 2,
                    None => break,
                }
            }
        }
        match best {
            // No progress, or the children would not fit in the budget even as leaves.
            Some((max, slots, _)) if max >= items.len() || slots > budget => self.leaf(&items),
            None => self.leaf(&items),
            Some((_, _, None)) => {
                let (t, u, o) = self.by_proto(&items);
                let mut tb = bx;
                tb[4] = (6, 6);
                let mut ub = bx;
                ub[4] = (17, 17);
                let mut kids = self.children(
                    vec![
                        (t, tb, Protos::Tcp),
                        (u, ub, Protos::Udp),
                        (o, bx, Protos::Other),
                    ],
                    depth,
                    budget,
                );
                let other = kids.pop().expect("three");
                let udp = kids.pop().expect("three");
                let tcp = kids.pop().expect("three");
                Tree::Proto {
                    tcp: Box::new(tcp),
                    udp: Box::new(udp),
                    other: Box::new(other),
                }
            }
            Some((_, _, Some(s))) => {
                let d = s.dim;
                let np = s.points.len() + 1;
                let mut parts: Vec<Vec<u32>> = vec![Vec::new(); np];
                for &i in &items {
                    let (a, b) = split::clip(&self.boxes, i, d, &bx);
                    for part in &mut parts[split::parts_of(&s.points, a, b)] {
                        part.push(i);
                    }
                }
                let mut bounds = Vec::with_capacity(np);
                let mut specs = Vec::with_capacity(np);
                for (j, part) in parts.into_iter().enumerate() {
                    let lo = if j == 0 { bx[d].0 } else { s.points[j - 1] };
                    let hi = if j + 1 < np { s.points[j] - 1 } else { bx[d].1 };
                    let mut cb = bx;
                    cb[d] = (lo, hi);
                    bounds.push((lo, hi));
                    specs.push((part, cb, protos));
                }
                let kids = self.children(specs, depth, budget);
                Tree::Split {
                    dim: d,
                    kids: bounds
                        .into_iter()
                        .zip(kids)
                        .map(|((lo, hi), t)| (lo, hi, t))
                        .collect(),
                }
            }
        }
    }

    /// Build the children of a node, sharing its budget: each gets the remaining budget in
    /// proportion to its rules among the remaining children's, so no subtree starves the
    /// others.
    fn children(
        &mut self,
        specs: Vec<(Vec<u32>, Ranges, Protos)>,
        depth: usize,
        budget: usize,
    ) -> Vec<Tree> {
        let sizes: Vec<usize> = specs.iter().map(|s| self.rules(&s.0).len()).collect();
        let mut rest_size: usize = sizes.iter().sum();
        let mut rest = budget;
        let mut out = Vec::with_capacity(specs.len());
        for ((items, cb, ps), size) in specs.into_iter().zip(sizes) {
            let share = if rest_size == 0 {
                0
            } else {
                (rest as u128 * size as u128 / rest_size as u128) as usize
            };
            let before = self.used;
            out.push(self.build(items, cb, ps, depth + 1, share));
            rest = rest.saturating_sub(self.used - before);
            rest_size -= size;
        }
        out
    }

    /// The items whose box admits TCP, UDP, and some other protocol.
    fn by_proto(&self, items: &[u32]) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let (mut t, mut u, mut o) = (Vec::new(), Vec::new(), Vec::new());
        for &i in items {
            let (a, b) = self.boxes[i as usize][4];
            if a <= 6 && 6 <= b {
                t.push(i);
            }
            if a <= 17 && 17 <= b {
                u.push(i);
            }
            // Some value of [a, b] other than 6 and 17.
            let others =
                u64::from(b - a) + 1 - u64::from(a <= 6 && 6 <= b) - u64::from(a <= 17 && 17 <= b);
            if others > 0 {
                o.push(i);
            }
        }
        (t, u, o)
    }
}

/// Rewrite one chain: the chain itself and the chains it adds.
fn rewrite_chain(
    chain: &Chain,
    p: &Params,
    names: &mut Names,
    levels: usize,
) -> (Chain, Vec<Chain>, Vec<TreeReport>) {
    let known: Vec<Known> = chain.rules.iter().map(|r| known(r, &p.protocols)).collect();
    let barrier = |k: &Known| !k.exact && k.boxes.iter().any(|b| *b == whole());
    // Segments between barriers, long enough for a tree.
    let mut segments: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    let barriers = known
        .iter()
        .enumerate()
        .filter(|(_, k)| barrier(k))
        .map(|(i, _)| i);
    for i in barriers.chain([chain.rules.len()]) {
        if i - start >= p.min_run && levels > 0 {
            segments.push((start, i));
        }
        start = i + 1;
    }
    let mut main = Chain {
        name: chain.name.clone(),
        policy: chain.policy,
        counters: chain.counters,
        rules: Vec::new(),
    };
    let mut extra: Vec<Chain> = Vec::new();
    let mut reports = Vec::new();
    // `cur`: the chain being filled — `main`, or the last continuation in `extra`.
    let mut cur: Option<usize> = None;
    let mut at = 0;
    for (s, e) in segments {
        let push =
            |main: &mut Chain, extra: &mut Vec<Chain>, cur: Option<usize>, r: IptRule| match cur {
                None => main.rules.push(r),
                Some(i) => extra[i].rules.push(r),
            };
        for r in &chain.rules[at..s] {
            push(&mut main, &mut extra, cur, stripped(r));
        }
        // Without RETURN or -g among its rules, the tree is called (-j): falling off a leaf
        // comes back to the chain, which goes on with the rules after the tree. With them it
        // must replace the chain (-g), and the rules after it move to a continuation chain.
        let called = !chain.rules[s..e]
            .iter()
            .any(|r| matches!(r.target, Target::Return | Target::Goto(_)));
        let exit = if e < chain.rules.len() && !called {
            Some(names.fresh())
        } else {
            None
        };
        let mut boxes = Vec::new();
        let mut rule_of = Vec::new();
        for (j, k) in known[s..e].iter().enumerate() {
            for bx in &k.boxes {
                boxes.push(*bx);
                rule_of.push(j as u32);
            }
        }
        // The leaves get most of the allowance; when dispatch and exits take the output past
        // it, the tree is built again with less.
        let allowed = (p.max_expansion * (e - s) as f64) as usize;
        let mut factor = p.max_expansion * 0.8;
        let mark = names.next;
        let (root, new_chains, emitted, leaves, depth) = loop {
            names.next = mark;
            let mut b = Builder {
                boxes: boxes.clone(),
                rule_of: rule_of.clone(),
                known: &known[s..e],
                p,
                levels,
                used: 0,
                leaves: 0,
                depth: 0,
            };
            let items: Vec<u32> = (0..b.boxes.len() as u32).collect();
            let budget = ((factor * (e - s) as f64) as usize).max(e - s);
            let tree = b.build(items, whole(), Protos::Any, 0, budget);
            let mut em = Emitter {
                chains: Vec::new(),
                names: &mut *names,
                rules: &chain.rules[s..e],
                exit: exit.clone(),
                leaves: HashMap::new(),
            };
            let root = em.target(&tree, Protos::Any);
            let new_chains = em.chains;
            let emitted = 1 + new_chains.iter().map(|c| c.rules.len()).sum::<usize>();
            if emitted <= allowed.max(e - s + 1) || factor <= 1.0 {
                break (root, new_chains, emitted, b.leaves, b.depth);
            }
            factor = (factor * 0.75).max(1.0);
        };
        let entry = match (root, called) {
            (Target::Goto(c), true) => Some(Target::Jump(c)),
            // An empty tree (no rule can match): nothing to call.
            (Target::Return, true) => None,
            (t, _) => Some(t),
        };
        if let Some(t) = entry {
            push(&mut main, &mut extra, cur, IptRule::new(t));
        }
        extra.extend(new_chains);
        reports.push(TreeReport {
            chain: chain.name.clone(),
            first: s,
            rules: e - s,
            transformable: known[s..e].iter().filter(|k| k.exact).count(),
            leaves,
            depth,
            emitted,
        });
        if let Some(name) = exit {
            extra.push(Chain::user(&name));
            cur = Some(extra.len() - 1);
        }
        at = e;
    }
    for r in &chain.rules[at..] {
        let r = stripped(r);
        match cur {
            None => main.rules.push(r),
            Some(i) => extra[i].rules.push(r),
        }
    }
    (main, extra, reports)
}

/// A rule as carried into the rewritten set: no counters.
fn stripped(r: &IptRule) -> IptRule {
    IptRule {
        counters: None,
        ..r.clone()
    }
}

struct Emitter<'a> {
    chains: Vec<Chain>,
    names: &'a mut Names,
    rules: &'a [IptRule],
    exit: Option<String>,
    leaves: HashMap<Vec<u32>, String>,
}

impl Emitter<'_> {
    /// The target that continues with subtree `t`.
    fn target(&mut self, t: &Tree, protos: Protos) -> Target {
        match t {
            Tree::Empty => match &self.exit {
                Some(c) => Target::Goto(c.clone()),
                None => Target::Return,
            },
            Tree::Leaf(rules) => {
                if let Some(name) = self.leaves.get(rules) {
                    return Target::Goto(name.clone());
                }
                let name = self.names.fresh();
                let mut c = Chain::user(&name);
                c.rules = rules
                    .iter()
                    .map(|&r| stripped(&self.rules[r as usize]))
                    .collect();
                if let Some(exit) = &self.exit {
                    c.rules.push(IptRule::new(Target::Goto(exit.clone())));
                }
                self.chains.push(c);
                self.leaves.insert(rules.clone(), name.clone());
                Target::Goto(name)
            }
            Tree::Proto { tcp, udp, other } => {
                let name = self.names.fresh();
                let idx = self.chains.len();
                self.chains.push(Chain::user(&name));
                let mut rules = Vec::new();
                for (n, sub, ps) in [
                    (Proto::TCP, tcp, Protos::Tcp),
                    (Proto::UDP, udp, Protos::Udp),
                ] {
                    let mut r = IptRule::new(self.target(sub, ps));
                    r.proto = Some(Proto::is(n));
                    rules.push(r);
                }
                rules.push(IptRule::new(self.target(other, Protos::Other)));
                self.chains[idx].rules = rules;
                Target::Goto(name)
            }
            Tree::Split { dim, kids } => {
                // Adjacent children with the same subtree are one interval.
                let mut items: Vec<(u32, u32, Target)> = Vec::new();
                for (lo, hi, sub) in kids {
                    let t = self.target(sub, protos);
                    match items.last_mut() {
                        Some(last) if last.2 == t => last.1 = *hi,
                        _ => items.push((*lo, *hi, t)),
                    }
                }
                if items.len() == 1 {
                    return items.pop().expect("one").2;
                }
                let name = self.names.fresh();
                self.search(&name, *dim, protos, &items);
                Target::Goto(name)
            }
        }
    }

    /// Chain `name`: the binary search over `items` (intervals of field `dim`, in order).
    fn search(&mut self, name: &str, dim: usize, protos: Protos, items: &[(u32, u32, Target)]) {
        let idx = self.chains.len();
        self.chains.push(Chain::user(name));
        let mut rules = Vec::new();
        let mut rest = items;
        loop {
            match rest.len() {
                0 => break,
                1 => {
                    rules.push(IptRule::new(rest[0].2.clone()));
                    break;
                }
                2 => {
                    rules.push(test(dim, protos, rest[0].0, rest[0].1, rest[0].2.clone()));
                    rules.push(IptRule::new(rest[1].2.clone()));
                    break;
                }
                len => {
                    let mid = len / 2;
                    let m = &rest[mid];
                    rules.push(test(dim, protos, m.0, m.1, m.2.clone()));
                    let left = &rest[..mid];
                    let target = if left.len() == 1 {
                        left[0].2.clone()
                    } else {
                        // The left half is scanned in a chain of its own, not searched again:
                        // every chain level counts against nf_tables' nesting limit.
                        let lname = self.names.fresh();
                        let mut c = Chain::user(&lname);
                        for (k, it) in left.iter().enumerate() {
                            c.rules.push(if k + 1 == left.len() {
                                IptRule::new(it.2.clone())
                            } else {
                                test(dim, protos, it.0, it.1, it.2.clone())
                            });
                        }
                        self.chains.push(c);
                        Target::Goto(lname)
                    };
                    rules.push(test(dim, protos, left[0].0, left[left.len() - 1].1, target));
                    rest = &rest[mid + 1..];
                }
            }
        }
        self.chains[idx].rules = rules;
    }
}

/// A rule: field `dim` in `[lo, hi]`, then `target`.
fn test(dim: usize, protos: Protos, lo: u32, hi: u32, target: Target) -> IptRule {
    let mut r = IptRule::new(target);
    let range = Range { lo, hi };
    match dim {
        0 | 1 => {
            let size = u64::from(hi - lo) + 1;
            let prefix = (size.is_power_of_two() && u64::from(lo) % size == 0)
                .then(|| Addr::prefix(lo, (32 - size.trailing_zeros()) as u8, false));
            match (dim, prefix) {
                (0, Some(a)) => r.src = Some(a),
                (1, Some(a)) => r.dst = Some(a),
                (0, None) => r.matches.push(Match::IpRange(IpRange {
                    src: Some(RangeMatch::new(range)),
                    dst: None,
                })),
                _ => r.matches.push(Match::IpRange(IpRange {
                    src: None,
                    dst: Some(RangeMatch::new(range)),
                })),
            }
        }
        _ => {
            let pm = if dim == 2 {
                PortMatch {
                    sport: Some(RangeMatch::new(range)),
                    dport: None,
                    flags: None,
                }
            } else {
                PortMatch {
                    sport: None,
                    dport: Some(RangeMatch::new(range)),
                    flags: None,
                }
            };
            match protos {
                Protos::Tcp => {
                    r.proto = Some(Proto::is(Proto::TCP));
                    r.matches.push(Match::Tcp(pm));
                }
                _ => {
                    r.proto = Some(Proto::is(Proto::UDP));
                    r.matches.push(Match::Udp(pm));
                }
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iptables::{ConvertOptions, Opaque, Packet, from_classbench};
    use crate::testutil::{Rng, corner_headers, random_rules};
    use crate::{Header, Rule};

    /// A rule set from random rules: FORWARD holds most, with targets ACCEPT, DROP, RETURN,
    /// LOG (continuing), `-j USR`, `-g USR`; some rules get an opaque match; some rules have
    /// no criteria (barriers); USR holds more rules ending in RETURN or verdicts.
    fn random_ruleset(rng: &mut Rng, n: usize) -> Ruleset {
        let rules = random_rules(rng, n);
        let mut rs = from_classbench(&rules, &ConvertOptions::default()).ruleset;
        rs.chains.push(Chain::user("USR"));
        let fwd = rs.chain_index("FORWARD").expect("FORWARD");
        let usr = rs.chains.len() - 1;
        let mut moved = Vec::new();
        let all = std::mem::take(&mut rs.chains[fwd].rules);
        for mut r in all {
            r.target = match rng.below(12) {
                0 => Target::Return,
                1 => Target::Extension {
                    name: "LOG".into(),
                    args: "--log-prefix x".into(),
                },
                2 => Target::Jump("USR".into()),
                3 => Target::Goto("USR".into()),
                4..=6 => Target::Accept,
                _ => Target::Drop,
            };
            if rng.below(10) == 0 {
                r.matches.push(Match::Opaque(Opaque {
                    text: "-m conntrack --ctstate NEW".into(),
                }));
            }
            if rng.below(40) == 0 {
                r = IptRule::new(Target::Extension {
                    name: "LOG".into(),
                    args: String::new(),
                });
            }
            if rng.below(4) == 0 {
                if matches!(r.target, Target::Jump(_) | Target::Goto(_)) {
                    r.target = Target::Accept;
                }
                moved.push(r);
            } else {
                rs.chains[fwd].rules.push(r);
            }
        }
        rs.chains[usr].rules = moved;
        rs
    }

    fn oracle_bit(h: &Header, text: &str) -> bool {
        let mut x = h.0.iter().fold(0xcbf2_9ce4_8422_2325u64, |a, &v| {
            (a ^ u64::from(v)).wrapping_mul(0x100_0000_01b3)
        });
        for b in text.bytes() {
            x = (x ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        x >> 40 & 1 == 1
    }

    fn check_equivalent(orig: &Ruleset, new: &Ruleset, headers: &[Header], what: &str) {
        let (eo, en) = (
            orig.evaluator().expect("original evaluates"),
            new.evaluator().expect("rewritten evaluates"),
        );
        for h in headers {
            let p = Packet::new(*h);
            let mut oracle = |_: &IptRule, o: &Opaque| oracle_bit(h, &o.text);
            let a = eo
                .evaluate_with("FORWARD", &p, &mut oracle)
                .expect("evaluates");
            let mut oracle = |_: &IptRule, o: &Opaque| oracle_bit(h, &o.text);
            let b = en
                .evaluate_with("FORWARD", &p, &mut oracle)
                .expect("evaluates");
            let rule = |rs: &Ruleset, s: Option<crate::iptables::Step>| {
                s.map(|s| rs.chains[s.chain].rules[s.rule].clone())
            };
            assert_eq!(a.verdict, b.verdict, "{what}: {h}");
            assert_eq!(
                rule(orig, a.decided_by),
                rule(new, b.decided_by),
                "{what}: {h}: a different rule decided"
            );
        }
    }

    #[test]
    fn rewritten_sets_decide_like_the_original() {
        let mut rng = Rng(0x4854_4142_4c45_5321);
        let (mut with_trees, mut leaves) = (0, 0);
        for round in 0..30 {
            let n = 1 + rng.below(500) as usize;
            let rs = random_ruleset(&mut rng, n);
            rs.validate().expect("valid");
            let p = Params {
                binth: 1 + rng.below(10) as usize,
                fanout: 2 + rng.below(15) as usize,
                spfac: 1 + rng.below(6) as usize,
                min_run: [1usize, 10, 50][rng.below(3) as usize],
                max_expansion: [1.0, 4.0, 10.0][rng.below(3) as usize],
                max_depth: [3usize, 15, usize::MAX][rng.below(3) as usize],
                protocols: if rng.below(2) == 0 {
                    Protocols::tcp_udp()
                } else {
                    Protocols::Any
                },
                prefix: None,
            };
            let (new, report) = rewrite(&rs, &p).expect("rewrites");
            new.validate().expect("the rewritten set is valid");
            let depth = new.jump_depth().expect("no loops");
            assert!(depth <= p.max_depth, "round {round}: nests {depth} deep");
            // It reads back from its own iptables-restore text.
            let text = new.to_restore();
            let back = crate::iptables::parse(&text).expect("reads back");
            assert_eq!(back, new, "round {round}");
            let flat: Vec<Rule> = rs
                .chains
                .iter()
                .flat_map(|c| c.rules.iter().filter_map(|r| r.boxes()))
                .flatten()
                .collect();
            let mut headers = corner_headers(&mut rng, &flat, 1500);
            headers.retain(|h| h.0[2] <= 0xffff && h.0[3] <= 0xffff && h.0[4] <= 0xff);
            check_equivalent(
                &rs,
                &new,
                &headers,
                &format!("round {round} {p:?} {report:?}"),
            );
            with_trees += usize::from(!report.trees.is_empty());
            leaves += report.trees.iter().map(|t| t.leaves).sum::<usize>();
        }
        assert!(
            with_trees >= 15 && leaves >= 500,
            "{with_trees} rounds with trees, {leaves} leaves"
        );
    }

    #[test]
    fn chains_and_names() {
        let text = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:ht - [0:0]\n-A FORWARD -j ht\nCOMMIT\n";
        let rs = crate::iptables::parse(text).expect("parses");
        // `ht` is taken: the new chains start with `ht2`.
        let (new, _) = rewrite(&rs, &Params::default()).expect("rewrites");
        assert_eq!(new, rs, "nothing to rewrite in two rules");
        let asked = Params {
            prefix: Some("ht".into()),
            ..Params::default()
        };
        assert!(matches!(rewrite(&rs, &asked), Err(Error::Prefix(_))));
    }
}
