//! HyperCuts (Singh, Baboescu, Varghese, Wang): a decision tree whose nodes cut several fields
//! at once, over a box shrunk to the rules it holds.
//!
//! A node picks the fields on which its rules, clipped to its box, have at least the mean
//! number of distinct ranges (the paper's heuristic), and for each of them the number of parts
//! — a power of two — grows while it still lowers the largest child and the product of parts
//! stays within `spfac · √n` (the paper's space measure). The box is first shrunk to the
//! smallest box holding every rule's clipped ranges (*region compaction*), so a value outside
//! it matches no rule of the subtree. Parts have a power-of-two width, so a child is found with
//! a subtraction and a shift per cut field. Leaves hold at most `binth` rules; as in
//! [`crate::hicuts`], a rule covering a node's box hides every later rule there, identical
//! leaves are stored once, and a budget on stored rule references stops replication on
//! wildcard-heavy sets. Not implemented from the paper: pushing rules common to all children up
//! into the node (the budget bounds the same blow-up).

use std::collections::HashMap;

use crate::{Classifier, Flags, Header, Rule};

/// Build parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Rules a leaf may hold.
    pub binth: usize,
    /// Space factor: a node has at most `spfac · √n` children for its `n` rules.
    pub spfac: usize,
    /// Rule references all leaves may hold together, per rule of the set.
    pub budget_per_rule: usize,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            binth: 8,
            spfac: 4,
            budget_per_rule: 16,
        }
    }
}

/// Fields one node cuts at most.
const MAX_CUT_DIMS: usize = 3;

#[derive(Clone, Copy, Debug, Default)]
struct Cut {
    dim: u8,
    shift: u8,
    /// Parts along the field.
    parts: u32,
    /// Index step of the field's parts among the children.
    stride: u32,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    /// The compacted box.
    lo: [u32; 5],
    hi: [u32; 5],
    cuts: [Cut; MAX_CUT_DIMS],
    ncuts: u8,
    /// Cut: first child in `children`; leaf: first rule in `leaf_rules`.
    first: u32,
    /// Leaf: number of rules; cut: `u32::MAX`.
    count: u32,
}

const CUT: u32 = u32::MAX;

/// A HyperCuts tree.
#[derive(Clone, Debug)]
pub struct HyperCuts {
    nodes: Vec<Node>,
    children: Vec<u32>,
    leaf_rules: Vec<u32>,
    ranges: Vec<[(u32, u32); 5]>,
    flags: Vec<Flags>,
}

type Box5 = [(u32, u32); 5];

impl HyperCuts {
    /// Build the tree for `rules` (priority = order).
    pub fn new(rules: &[Rule], p: Params) -> HyperCuts {
        let ranges: Vec<Box5> = rules
            .iter()
            .map(|r| std::array::from_fn(|i| (r.fields[i].lo, r.fields[i].hi)))
            .collect();
        let mut t = HyperCuts {
            nodes: Vec::new(),
            children: Vec::new(),
            leaf_rules: Vec::new(),
            ranges,
            flags: rules.iter().map(|r| r.flags).collect(),
        };
        let mut b = Build {
            p: Params {
                binth: p.binth.max(1),
                spfac: p.spfac.max(1),
                ..p
            },
            budget: p.budget_per_rule.saturating_mul(rules.len().max(1)),
            shared: HashMap::new(),
        };
        let whole: Box5 = std::array::from_fn(|i| (0, crate::Field::ALL[i].max()));
        let all: Vec<u32> = (0..rules.len() as u32).collect();
        t.build(all, whole, 0, &mut b);
        t
    }

    /// Bytes of memory the tree holds (nodes, child and rule references, rule ranges).
    pub fn memory(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<Node>()
            + (self.children.len() + self.leaf_rules.len()) * 4
            + self.ranges.len() * std::mem::size_of::<Box5>()
            + self.flags.len() * std::mem::size_of::<Flags>()
    }

    /// Nodes in the tree.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    fn clip(&self, r: u32, d: usize, bx: &Box5) -> (u32, u32) {
        let (a, b) = self.ranges[r as usize][d];
        (a.max(bx[d].0), b.min(bx[d].1))
    }

    fn leaf(&mut self, rules: Vec<u32>, bx: Box5, b: &mut Build) -> u32 {
        b.budget = b.budget.saturating_sub(rules.len());
        if let Some(&id) = b.shared.get(&rules) {
            return id;
        }
        let first = self.leaf_rules.len() as u32;
        self.leaf_rules.extend_from_slice(&rules);
        self.nodes.push(Node {
            lo: std::array::from_fn(|d| bx[d].0),
            hi: std::array::from_fn(|d| bx[d].1),
            cuts: [Cut::default(); MAX_CUT_DIMS],
            ncuts: 0,
            first,
            count: rules.len() as u32,
        });
        let id = (self.nodes.len() - 1) as u32;
        b.shared.insert(rules, id);
        id
    }

    /// The largest child for cuts `cuts` (field, shift) of box `bx`, and the total copies.
    fn children_of(&self, rules: &[u32], bx: &Box5, cuts: &[(usize, u8)]) -> (usize, usize) {
        let parts: Vec<u32> = cuts
            .iter()
            .map(|&(d, s)| ((u64::from(bx[d].1 - bx[d].0) >> s) + 1) as u32)
            .collect();
        let total: usize = parts.iter().map(|&p| p as usize).product();
        let mut count = vec![0usize; total];
        let mut copies = 0;
        for &r in rules {
            // The parts of each cut field the rule overlaps, then every combination.
            let spans: Vec<(u32, u32)> = cuts
                .iter()
                .map(|&(d, s)| {
                    let (a, b) = self.clip(r, d, bx);
                    (
                        (u64::from(a - bx[d].0) >> s) as u32,
                        (u64::from(b - bx[d].0) >> s) as u32,
                    )
                })
                .collect();
            // Every combination of the parts (an odometer over the cut fields).
            let mut idx: Vec<u32> = spans.iter().map(|s| s.0).collect();
            'combos: loop {
                let flat = idx
                    .iter()
                    .zip(&parts)
                    .fold(0usize, |f, (&x, &p)| f * p as usize + x as usize);
                count[flat] += 1;
                copies += 1;
                for i in (0..cuts.len()).rev() {
                    if idx[i] < spans[i].1 {
                        idx[i] += 1;
                        continue 'combos;
                    }
                    idx[i] = spans[i].0;
                }
                break;
            }
        }
        (count.into_iter().max().unwrap_or(0), copies)
    }

    fn build(&mut self, mut rules: Vec<u32>, bx: Box5, depth: usize, b: &mut Build) -> u32 {
        // Region compaction: the smallest box holding the rules' clipped ranges.
        let mut bx = bx;
        if !rules.is_empty() {
            for (d, f) in bx.iter_mut().enumerate() {
                let (mut lo, mut hi) = (u32::MAX, 0);
                for &r in &rules {
                    let (a, b) = self.ranges[r as usize][d];
                    lo = lo.min(a);
                    hi = hi.max(b);
                }
                *f = (lo.max(f.0), hi.min(f.1));
            }
        }
        if let Some(k) = rules.iter().position(|&r| {
            let g = &self.ranges[r as usize];
            self.flags[r as usize].is_any()
                && (0..5).all(|d| g[d].0 <= bx[d].0 && bx[d].1 <= g[d].1)
        }) {
            rules.truncate(k + 1);
        }
        let n = rules.len();
        if n <= b.p.binth || b.budget < n || depth > 64 {
            return self.leaf(rules, bx, b);
        }
        // Fields with at least the mean number of distinct clipped ranges.
        let distinct: Vec<usize> = (0..5)
            .map(|d| {
                let mut v: Vec<(u32, u32)> = rules.iter().map(|&r| self.clip(r, d, &bx)).collect();
                v.sort_unstable();
                v.dedup();
                v.len()
            })
            .collect();
        let cand: Vec<usize> = (0..5).filter(|&d| distinct[d] > 1).collect();
        if cand.is_empty() {
            return self.leaf(rules, bx, b);
        }
        let mean = cand.iter().map(|&d| distinct[d]).sum::<usize>() as f64 / cand.len() as f64;
        let mut dims: Vec<usize> = cand
            .into_iter()
            .filter(|&d| distinct[d] as f64 >= mean)
            .collect();
        dims.sort_by_key(|&d| std::cmp::Reverse(distinct[d]));
        dims.truncate(MAX_CUT_DIMS);
        let max_children = (b.p.spfac as f64 * (n as f64).sqrt()).max(2.0) as usize;
        // Start with one part per field (shift = the field's width) and double the parts of the
        // field that lowers the largest child most while the product stays in bounds.
        let width = |d: usize| 64 - u64::from(bx[d].1 - bx[d].0).leading_zeros() as u8;
        let mut cuts: Vec<(usize, u8)> = dims.iter().map(|&d| (d, width(d))).collect();
        let mut current = (n, n);
        loop {
            let mut best: Option<(usize, (usize, usize))> = None;
            for i in 0..cuts.len() {
                if cuts[i].1 == 0 {
                    continue;
                }
                let mut trial = cuts.clone();
                trial[i].1 -= 1;
                let total: usize = trial
                    .iter()
                    .map(|&(d, s)| ((u64::from(bx[d].1 - bx[d].0) >> s) + 1) as usize)
                    .product();
                if total > max_children {
                    continue;
                }
                let r = self.children_of(&rules, &bx, &trial);
                if r.0 < current.0 && best.is_none_or(|(_, br)| r < br) {
                    best = Some((i, r));
                }
            }
            match best {
                Some((i, r)) => {
                    cuts[i].1 -= 1;
                    current = r;
                }
                None => break,
            }
        }
        cuts.retain(|&(d, s)| (u64::from(bx[d].1 - bx[d].0) >> s) > 0);
        if cuts.is_empty() || current.0 >= n {
            return self.leaf(rules, bx, b);
        }
        // Children in row-major order of the cut fields.
        let parts: Vec<u32> = cuts
            .iter()
            .map(|&(d, s)| ((u64::from(bx[d].1 - bx[d].0) >> s) + 1) as u32)
            .collect();
        let total: usize = parts.iter().map(|&p| p as usize).product();
        let mut node_cuts = [Cut::default(); MAX_CUT_DIMS];
        let mut stride = 1u32;
        for i in (0..cuts.len()).rev() {
            node_cuts[i] = Cut {
                dim: cuts[i].0 as u8,
                shift: cuts[i].1,
                parts: parts[i],
                stride,
            };
            stride *= parts[i];
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            lo: std::array::from_fn(|d| bx[d].0),
            hi: std::array::from_fn(|d| bx[d].1),
            cuts: node_cuts,
            ncuts: cuts.len() as u8,
            first: 0,
            count: CUT,
        });
        let mut kids = Vec::with_capacity(total);
        for flat in 0..total {
            let mut cb = bx;
            let mut in_rules = Vec::new();
            for c in &node_cuts[..cuts.len()] {
                let d = usize::from(c.dim);
                let j = (flat as u32 / c.stride) % c.parts;
                let lo = u64::from(bx[d].0) + (u64::from(j) << c.shift);
                let hi = (lo + (1u64 << c.shift) - 1).min(u64::from(bx[d].1));
                cb[d] = (lo as u32, hi as u32);
            }
            for &r in &rules {
                let g = &self.ranges[r as usize];
                if (0..5).all(|d| g[d].0 <= cb[d].1 && cb[d].0 <= g[d].1) {
                    in_rules.push(r);
                }
            }
            kids.push(self.build(in_rules, cb, depth + 1, b));
        }
        let first = self.children.len() as u32;
        self.children.extend_from_slice(&kids);
        self.nodes[id as usize].first = first;
        id
    }
}

struct Build {
    p: Params,
    budget: usize,
    shared: HashMap<Vec<u32>, u32>,
}

impl Classifier for HyperCuts {
    fn classify(&self, h: &Header) -> Option<usize> {
        let v = h.0;
        let mut n = self.nodes.first()?;
        loop {
            if n.count != CUT {
                // (A leaf's rules are checked whole; its box is not, since a shared leaf serves
                // several boxes.)
                let rules = &self.leaf_rules[n.first as usize..(n.first + n.count) as usize];
                return rules
                    .iter()
                    .find(|&&r| {
                        self.flags[r as usize].matches(h.1)
                            && self.ranges[r as usize]
                                .iter()
                                .zip(v.iter())
                                .all(|(&(lo, hi), &x)| lo <= x && x <= hi)
                    })
                    .map(|&r| r as usize);
            }
            // Region compaction: nothing of the subtree lies outside its box.
            if (0..5).any(|d| v[d] < n.lo[d] || v[d] > n.hi[d]) {
                return None;
            }
            let mut flat = 0u32;
            for c in &n.cuts[..usize::from(n.ncuts)] {
                let d = usize::from(c.dim);
                flat += (u64::from(v[d] - n.lo[d]) >> c.shift) as u32 * c.stride;
            }
            n = &self.nodes[self.children[(n.first + flat) as usize] as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::agrees_with_linear;

    #[test]
    fn agrees_with_linear_on_random_headers_and_corner_points() {
        agrees_with_linear(
            0x5151_2323_abcd_0007,
            30,
            |rng| Params {
                binth: 1 + rng.below(8) as usize,
                spfac: 1 + rng.below(6) as usize,
                budget_per_rule: [1usize, 4, 32][rng.below(3) as usize],
            },
            |rules, p| HyperCuts::new(rules, *p),
        );
    }

    #[test]
    fn empty_set_and_out_of_range_values() {
        let t = HyperCuts::new(&[], Params::default());
        assert_eq!(t.classify(&Header([1, 2, 3, 4, 5], 0)), None);
        let any = Rule {
            fields: std::array::from_fn(|d| crate::Range::any(crate::Field::ALL[d])),
            flags: crate::Flags::ANY,
            line: 1,
        };
        let t = HyperCuts::new(&[any], Params::default());
        assert_eq!(t.classify(&Header([1, 2, 3, 4, 5], 0)), Some(0));
        assert_eq!(t.classify(&Header([1, 2, 70_000, 4, 5], 0)), None);
    }
}
