//! HiCuts (Gupta and McKeown): a decision tree that cuts the box of header space a node covers
//! into equal parts along one field, until at most `binth` rules remain, searched linearly.
//!
//! Boxes start as the whole field ranges (2^32 addresses, 2^16 ports, 2^8 protocols) and every
//! cut halves a box a power of two times, so a child is found with a subtraction and a shift.
//! The field cut is the one on which the node's rules, clipped to the box, have the most
//! distinct ranges (the paper's heuristic); the number of parts is the largest power of two that
//! keeps the rule copies in the children within `spfac` times the node's rules. Beyond the
//! paper: a rule covering a node's whole box hides every later rule there, so those are dropped;
//! leaves with the same rules are stored once; and a budget on stored rule references turns
//! nodes into leaves once spent, so wildcard-heavy sets cannot blow the tree up (a leaf is
//! scanned linearly, so the result stays exact).

use std::collections::HashMap;

use crate::{Classifier, Field, Flags, Header, Rule};

/// Build parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Rules a leaf may hold.
    pub binth: usize,
    /// Space factor: the rules in a node's children are at most `spfac` times its own.
    pub spfac: usize,
    /// Rule references all leaves may hold together, per rule of the set.
    pub budget_per_rule: usize,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            binth: 8,
            spfac: 4,
            budget_per_rule: 32,
        }
    }
}

const LEAF: u8 = 0xff;

#[derive(Clone, Copy, Debug)]
struct Node {
    /// The field cut, or `LEAF`.
    dim: u8,
    shift: u8,
    lo: u32,
    /// Cut: index of the first child in `children`; leaf: first rule in `leaf_rules`.
    first: u32,
    /// Cut: number of children; leaf: number of rules.
    count: u32,
}

/// A HiCuts tree.
#[derive(Clone, Debug)]
pub struct HiCuts {
    nodes: Vec<Node>,
    children: Vec<u32>,
    leaf_rules: Vec<u32>,
    ranges: Vec<[(u32, u32); 5]>,
    flags: Vec<Flags>,
}

/// log2 of the size of each field's whole range.
const BITS: [u8; 5] = [32, 32, 16, 16, 8];

impl HiCuts {
    /// Build the tree for `rules` (priority = order).
    pub fn new(rules: &[Rule], p: Params) -> HiCuts {
        let ranges: Vec<[(u32, u32); 5]> = rules
            .iter()
            .map(|r| std::array::from_fn(|i| (r.fields[i].lo, r.fields[i].hi)))
            .collect();
        let mut t = HiCuts {
            nodes: Vec::new(),
            children: Vec::new(),
            leaf_rules: Vec::new(),
            ranges,
            flags: rules.iter().map(|r| r.flags).collect(),
        };
        let mut budget = p.budget_per_rule.saturating_mul(rules.len().max(1));
        let all: Vec<u32> = (0..rules.len() as u32).collect();
        let whole: [(u32, u8); 5] = std::array::from_fn(|i| (0, BITS[i]));
        let mut shared: HashMap<Vec<u32>, u32> = HashMap::new();
        t.build(all, whole, 0, &p, &mut budget, &mut shared);
        t
    }

    /// Bytes of memory the tree holds (nodes, child and rule references, rule ranges).
    pub fn memory(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<Node>()
            + (self.children.len() + self.leaf_rules.len()) * 4
            + self.ranges.len() * std::mem::size_of::<[(u32, u32); 5]>()
            + self.flags.len() * std::mem::size_of::<Flags>()
    }

    /// Nodes in the tree.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Whether rule `r` matches every header of box `bx` (a rule on TCP flags never does).
    fn covers(&self, r: u32, bx: &[(u32, u8); 5]) -> bool {
        let rg = &self.ranges[r as usize];
        self.flags[r as usize].is_any()
            && (0..5).all(|d| {
                let (lo, bits) = bx[d];
                let hi = lo as u64 + (1u64 << bits) - 1;
                rg[d].0 <= lo && rg[d].1 as u64 >= hi
            })
    }

    /// Build the subtree for `rules` in box `bx` (per field: low end and log2 size); returns
    /// its node index. Recursion depth is bounded by the total bits (104) over at least one bit
    /// a level.
    fn build(
        &mut self,
        mut rules: Vec<u32>,
        bx: [(u32, u8); 5],
        depth: usize,
        p: &Params,
        budget: &mut usize,
        shared: &mut HashMap<Vec<u32>, u32>,
    ) -> u32 {
        if let Some(k) = rules.iter().position(|&r| self.covers(r, &bx)) {
            rules.truncate(k + 1);
        }
        if rules.len() <= p.binth
            && let Some(&id) = shared.get(&rules)
        {
            return id;
        }
        let leaf = |t: &mut HiCuts, rules: &Vec<u32>| {
            let first = t.leaf_rules.len() as u32;
            t.leaf_rules.extend_from_slice(rules);
            t.nodes.push(Node {
                dim: LEAF,
                shift: 0,
                lo: 0,
                first,
                count: rules.len() as u32,
            });
            (t.nodes.len() - 1) as u32
        };
        if rules.len() <= p.binth || *budget < rules.len() || depth > 104 {
            *budget = budget.saturating_sub(rules.len());
            let id = leaf(self, &rules);
            shared.insert(rules, id);
            return id;
        }
        // The field with the most distinct clipped ranges.
        let clip = |t: &HiCuts, r: u32, d: usize| {
            let (lo, bits) = bx[d];
            let hi = (lo as u64 + (1u64 << bits) - 1) as u32;
            let (a, b) = t.ranges[r as usize][d];
            (a.max(lo), b.min(hi))
        };
        let mut best = (0usize, 0usize);
        for (d, &(_, bits)) in bx.iter().enumerate() {
            if bits == 0 {
                continue;
            }
            let mut distinct: Vec<(u32, u32)> = rules.iter().map(|&r| clip(self, r, d)).collect();
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.len() > best.1 {
                best = (d, distinct.len());
            }
        }
        let d = best.0;
        if best.1 <= 1 {
            *budget = budget.saturating_sub(rules.len());
            let id = leaf(self, &rules);
            shared.insert(rules, id);
            return id;
        }
        let (lo, bits) = bx[d];
        // The number of parts: double while the copies stay within spfac.
        let copies = |t: &HiCuts, k: u8| -> usize {
            let shift = bits - k;
            rules
                .iter()
                .map(|&r| {
                    let (a, b) = clip(t, r, d);
                    (((b - lo) >> shift) - ((a - lo) >> shift)) as usize + 1
                })
                .sum()
        };
        let mut k = 1u8;
        while k < bits.min(16) {
            let next = k + 1;
            if copies(self, next) + (1usize << next) > p.spfac * rules.len() {
                break;
            }
            k = next;
        }
        let shift = bits - k;
        let np = 1usize << k;
        let mut parts: Vec<Vec<u32>> = vec![Vec::new(); np];
        for &r in &rules {
            let (a, b) = clip(self, r, d);
            for part in parts
                .iter_mut()
                .take(((b - lo) >> shift) as usize + 1)
                .skip(((a - lo) >> shift) as usize)
            {
                part.push(r);
            }
        }
        if parts.iter().all(|c| c.len() == rules.len()) {
            *budget = budget.saturating_sub(rules.len());
            let id = leaf(self, &rules);
            shared.insert(rules, id);
            return id;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            dim: d as u8,
            shift,
            lo,
            first: 0,
            count: np as u32,
        });
        let mut kids = Vec::with_capacity(np);
        for (i, part) in parts.into_iter().enumerate() {
            let mut cb = bx;
            cb[d] = (lo + ((i as u32) << shift), shift);
            kids.push(self.build(part, cb, depth + 1, p, budget, shared));
        }
        let first = self.children.len() as u32;
        self.children.extend_from_slice(&kids);
        self.nodes[id as usize].first = first;
        // (Cut nodes are not shared: their cuts are relative to their own box.)
        id
    }
}

impl Classifier for HiCuts {
    fn classify(&self, h: &Header) -> Option<usize> {
        let v = h.0;
        let mut n = *self.nodes.first()?;
        loop {
            if n.dim == LEAF {
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
            let x = v[n.dim as usize];
            // A header value outside the field's range (a port above 65535) matches no rule.
            let off = x.checked_sub(n.lo)? >> n.shift;
            if off >= n.count {
                return None;
            }
            n = self.nodes[self.children[(n.first + off) as usize] as usize];
        }
    }
}

/// The fields in the order of [`Field::ALL`] (for callers naming a cut).
pub fn field_name(d: u8) -> Option<Field> {
    Field::ALL.get(usize::from(d)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear::Linear;
    use crate::testutil::agrees_with_linear;
    use crate::{Field, Range};

    #[test]
    fn agrees_with_linear_on_random_headers_and_corner_points() {
        agrees_with_linear(
            0x1234_5678_9abc_def1,
            40,
            |rng| Params {
                binth: 1 + rng.below(8) as usize,
                spfac: 1 + rng.below(4) as usize,
                budget_per_rule: [1usize, 4, 32][rng.below(3) as usize],
            },
            |rules, p| HiCuts::new(rules, *p),
        );
    }

    #[test]
    fn empty_set_and_out_of_range_values() {
        let t = HiCuts::new(&[], Params::default());
        assert_eq!(t.classify(&Header([1, 2, 3, 4, 5], 0)), None);
        let rules = vec![Rule {
            fields: std::array::from_fn(|d| Range::any(Field::ALL[d])),
            flags: crate::Flags::ANY,
            line: 1,
        }];
        let t = HiCuts::new(&rules, Params::default());
        assert_eq!(t.classify(&Header([1, 2, 3, 4, 5], 0)), Some(0));
        // A "port" beyond 65535 is in no rule's range.
        assert_eq!(
            t.classify(&Header([1, 2, 70_000, 4, 5], 0)),
            Linear::new(&rules).classify(&Header([1, 2, 70_000, 4, 5], 0))
        );
    }
}
