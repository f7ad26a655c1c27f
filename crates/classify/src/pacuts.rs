//! PaCuts: partitioned split trees with a direct table on top and SIMD leaves — netsift's
//! fast engine.
//!
//! Four ideas, each measured (see `docs/classify.md`):
//!
//! 1. **Groups by small fields** (as EffiCuts and CutSplit do): a rule whose source address is
//!    a short prefix (`/0`, `/8`) lands in every part of a tree that splits the source address.
//!    Rules whose destination address is *small* (a prefix at least
//!    [`Params::small_ip_bits`] long) form one group, rules with a small source address the
//!    next, and the rest go by their ports; groups smaller than [`Params::min_group`] are
//!    searched as one. Groups are searched in order of their highest-priority rule, and the
//!    search stops before a group that cannot hold a better rule than the one found.
//! 2. **A direct table** on the top bits of a group's small address field (at most
//!    2^[`Params::table_bits`] entries): every rule of the group falls in one or two entries,
//!    and one load replaces the top levels of a tree. On ClassBench sets most entries lead
//!    straight to a leaf.
//! 3. **Wide nodes split at rule boundaries.** Below the table, a node splits one field into up
//!    to sixteen intervals at points chosen among the rules' range starts so that the largest
//!    child holds as few rules as possible (a binary search on that size, cutting greedily);
//!    the field is the one with the smallest largest child, then the fewest copies. The child
//!    of a value is the number of points at or below it: two AVX2 compares and a population
//!    count; points and children fill two adjacent cache lines.
//! 4. **Leaves scanned eight rules at a time.** Leaves store their rules field by field in
//!    flat columns; an AVX2 scan tests eight rules in about thirty instructions without a
//!    branch, and the first set bit of the match mask is the first matching rule, lanes being
//!    in priority order. Without AVX2 the same columns are scanned rule by rule.
//!
//! Identical leaves are stored once; a rule covering a node's whole box hides every later rule
//! there; a budget on stored rule slots turns nodes into (longer) leaves once spent.
//! [`PaCuts::classify_all`] looks up eight headers at a time, tree level by tree level, so
//! that their loads overlap.

use std::collections::HashMap;

use crate::split::{self, Ranges};
use crate::{Classifier, Flags, Header, Rule};

/// Build parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Rules a leaf may hold before it is split (leaves are scanned eight at a time).
    pub binth: usize,
    /// Space factor: the rule slots of a node's children stay within `spfac` times the node's
    /// rules (fewer children are used when more would exceed it).
    pub spfac: usize,
    /// An address range is *small* when it holds at most 2^(32 − this) addresses (a prefix of
    /// at least this length).
    pub small_ip_bits: u8,
    /// A port range is *small* when it holds at most 2^(16 − this) ports.
    pub small_port_bits: u8,
    /// Groups with fewer rules than this are searched as one group.
    pub min_group: usize,
    /// Rule slots all leaves may hold together, per rule of the set.
    pub budget_per_rule: usize,
    /// Most children of a node (2 to 16).
    pub fanout: usize,
    /// A group of rules small in an address field starts with a direct table on that field's
    /// top bits, of at most 2^`table_bits` entries (0: no tables).
    pub table_bits: u8,
    /// Groups with fewer rules than this get no table.
    pub table_min_rules: usize,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            binth: 16,
            spfac: 4,
            small_ip_bits: 16,
            small_port_bits: 8,
            min_group: 150,
            budget_per_rule: 4,
            fanout: FANOUT,
            table_bits: 12,
            table_min_rules: 1024,
        }
    }
}

const FANOUT: usize = 16;
/// Most groups (the partition makes at most seven).
const MAX_GROUPS: usize = 8;
const LANES: usize = 8;

/// A node (two cache lines, loaded together): child `i` holds the values `v` of field `dim`
/// with exactly `i` split points `<= v`. Unused points are `u32::MAX` and their children
/// repeat the last real child, so a value of `u32::MAX` still lands right.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Node {
    points: [u32; FANOUT - 1],
    dim: u32,
    kids: [u32; FANOUT],
}

impl Node {
    #[inline(always)]
    fn dim(&self) -> usize {
        self.dim as usize % 5
    }
}

/// A child reference: a node index, or (top bit set) a leaf: `LEAF_COUNT` bits of rule count
/// above `LEAF_START` bits of first slot.
const LEAF: u32 = 1 << 31;
const LEAF_START: u32 = 21;
const LEAF_COUNT: u32 = 10;
const MAX_LEAF: usize = (1 << LEAF_COUNT) - 1;
const MAX_SLOTS: usize = 1 << LEAF_START;

#[derive(Clone, Copy, Debug)]
struct Group {
    /// The group's highest-priority rule (its smallest index).
    min_rule: u32,
    /// The tree, when the group has no table.
    root: u32,
    /// The table's field and shift (`shift` 32: no table): the tree of value `v` is
    /// `tables[table + v >> shift]`.
    dim: u8,
    shift: u8,
    table: u32,
}

/// Figures about a built [`PaCuts`], for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Rules in each group, in search order.
    pub groups: Vec<usize>,
    /// Nodes.
    pub nodes: usize,
    /// Leaves (distinct ones).
    pub leaves: usize,
    /// Rule slots in the leaves (a rule stored in two leaves counts twice).
    pub slots: usize,
    /// Deepest root-to-leaf path, in nodes.
    pub depth: usize,
}

/// The leaves' rules, field by field; `LANES` never-matching slots pad the end so that an
/// eight-lane load from any slot stays in bounds.
#[derive(Clone, Debug, Default)]
struct Columns {
    /// Source low, source high, destination low, destination high, ports low (`src | dst <<
    /// 16`), ports high.
    c32: [Vec<u32>; 6],
    /// Protocol low, high.
    proto: [Vec<u16>; 2],
    /// TCP flags: `value | mask << 16` (0: any).
    flags: Vec<u32>,
    /// The rules.
    rule: Vec<u32>,
}

impl Columns {
    fn push(&mut self, g: &Ranges, f: Flags, r: u32) {
        let v = [
            g[0].0,
            g[0].1,
            g[1].0,
            g[1].1,
            g[2].0 | g[3].0 << 16,
            g[2].1 | g[3].1 << 16,
        ];
        for (c, x) in self.c32.iter_mut().zip(v) {
            c.push(x);
        }
        self.proto[0].push(g[4].0 as u16);
        self.proto[1].push(g[4].1 as u16);
        self.flags
            .push(u32::from(f.value) | u32::from(f.mask) << 16);
        self.rule.push(r);
    }

    fn pad(&mut self) {
        let never: Ranges = [
            (u32::MAX, 0),
            (u32::MAX, 0),
            (0xffff, 0),
            (0xffff, 0),
            (0xff, 0),
        ];
        for _ in 0..LANES {
            self.push(&never, Flags::ANY, u32::MAX);
        }
    }

    fn len(&self) -> usize {
        self.rule.len()
    }

    fn bytes(&self) -> usize {
        self.len() * (6 * 4 + 2 * 2 + 4 + 4)
    }
}

/// The PaCuts engine.
#[derive(Clone, Debug)]
pub struct PaCuts {
    groups: Vec<Group>,
    nodes: Vec<Node>,
    tables: Vec<u32>,
    cols: Columns,
    avx2: bool,
    /// Whether some rule tests TCP flags (scans skip the test otherwise).
    has_flags: bool,
    stats: Stats,
}

impl PaCuts {
    /// Build the engine for `rules` (priority = order).
    pub fn new(rules: &[Rule], p: Params) -> PaCuts {
        let flags: Vec<Flags> = rules.iter().map(|r| r.flags).collect();
        let ranges: Vec<Ranges> = rules
            .iter()
            .map(|r| std::array::from_fn(|i| (r.fields[i].lo, r.fields[i].hi)))
            .collect();
        let mut b = Builder {
            ranges: &ranges,
            flags: &flags,
            p: Params {
                fanout: p.fanout.clamp(2, FANOUT),
                binth: p.binth.max(1),
                ..p
            },
            nodes: Vec::new(),
            cols: Columns::default(),
            shared: HashMap::new(),
            budget: p.budget_per_rule.saturating_mul(rules.len().max(1)),
            depth: 0,
        };
        let mut groups = Vec::new();
        let mut sizes = Vec::new();
        let mut tables = Vec::new();
        for (key, members) in partition(&ranges, &b.p) {
            let whole: Ranges = std::array::from_fn(|i| (0, FIELD_MAX[i]));
            let min_rule = members[0];
            sizes.push((min_rule, members.len()));
            // A direct table on the top bits of the small address field: its rules fall in one
            // or two slots each, and a lookup skips the top levels of a tree.
            let bits =
                b.p.table_bits
                    .min(b.p.small_ip_bits)
                    .min((usize::BITS - members.len().leading_zeros()) as u8 + 4);
            match key {
                Some(d) if members.len() >= b.p.table_min_rules && bits > 0 => {
                    let shift = 32 - bits;
                    let mut slots: Vec<Vec<u32>> = vec![Vec::new(); 1 << bits];
                    for &r in &members {
                        let (lo, hi) = ranges[r as usize][d];
                        for slot in &mut slots[(lo >> shift) as usize..=(hi >> shift) as usize] {
                            slot.push(r);
                        }
                    }
                    let table = tables.len() as u32;
                    for (j, rules) in slots.into_iter().enumerate() {
                        let c = if rules.is_empty() {
                            LEAF
                        } else {
                            let mut bx = whole;
                            let lo = (j as u32) << shift;
                            bx[d] = (lo, lo | (u32::MAX >> bits));
                            b.build(rules, bx, 1)
                        };
                        tables.push(c);
                    }
                    groups.push(Group {
                        min_rule,
                        root: LEAF,
                        dim: d as u8,
                        shift,
                        table,
                    });
                }
                _ => {
                    let root = b.build(members, whole, 0);
                    groups.push(Group {
                        min_rule,
                        root,
                        dim: 0,
                        shift: 32,
                        table: 0,
                    });
                }
            }
        }
        assert!(groups.len() <= MAX_GROUPS);
        groups.sort_by_key(|g| g.min_rule);
        sizes.sort_unstable();
        let stats = Stats {
            groups: sizes.into_iter().map(|(_, n)| n).collect(),
            nodes: b.nodes.len(),
            leaves: b.shared.len(),
            slots: b.cols.len(),
            depth: b.depth,
        };
        b.cols.pad();
        PaCuts {
            groups,
            nodes: b.nodes,
            tables,
            cols: b.cols,
            avx2: avx2_available(),
            has_flags: rules.iter().any(|r| !r.flags.is_any()),
            stats,
        }
    }

    /// The engine with the AVX2 scans turned off (the portable scans), for measurements and
    /// tests of the fallback.
    pub fn without_simd(mut self) -> PaCuts {
        self.avx2 = false;
        self
    }

    /// Whether lookups use the AVX2 scans.
    pub fn simd(&self) -> bool {
        self.avx2
    }

    /// Bytes of memory the engine holds.
    pub fn memory(&self) -> usize {
        self.groups.len() * std::mem::size_of::<Group>()
            + self.nodes.len() * std::mem::size_of::<Node>()
            + self.tables.len() * 4
            + self.cols.bytes()
    }

    /// Shape of the built structure.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The work a lookup of `h` does: nodes visited and rule slots scanned (in groups of eight),
    /// over all groups searched.
    pub fn path(&self, h: &Header) -> (usize, usize) {
        let v = &h.0;
        let (mut nodes, mut slots) = (0, 0);
        if (v[2] | v[3]) > 0xffff || v[4] > 0xff {
            return (0, 0);
        }
        let mut best = u32::MAX;
        for g in &self.groups {
            if g.min_rule >= best {
                break;
            }
            let mut c = self.root(g, v);
            while c & LEAF == 0 {
                let n = &self.nodes[c as usize];
                nodes += 1;
                c = n.kids[Portable::child(n, v[n.dim()]) % FANOUT];
            }
            let start = (c & ((1 << LEAF_START) - 1)) as usize;
            let count = ((c >> LEAF_START) & ((1 << LEAF_COUNT) - 1)) as usize;
            let mut at = start;
            while at < start + count && self.cols.rule[at] < best {
                slots += LANES.min(start + count - at);
                let m = Portable::scan(&self.cols, at, v, h.1, &()) & lane_mask(start + count - at);
                if m != 0 {
                    best = best.min(self.cols.rule[at + m.trailing_zeros() as usize]);
                    break;
                }
                at += LANES;
            }
        }
        (nodes, slots)
    }

    /// The first matching rule of each header of `headers`, into `out` (same length).
    pub fn classify_all(&self, headers: &[Header], out: &mut [Option<usize>]) {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is set only when the CPU has AVX2.
            unsafe {
                if self.has_flags {
                    self.all_avx2::<true>(headers, out)
                } else {
                    self.all_avx2::<false>(headers, out)
                }
            };
            return;
        }
        self.batch::<Portable>(headers, out);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    fn one_avx2<const F: bool>(&self, h: &Header) -> Option<usize> {
        self.lookup::<Avx2<F>>(h)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    fn all_avx2<const F: bool>(&self, headers: &[Header], out: &mut [Option<usize>]) {
        self.batch::<Avx2<F>>(headers, out);
    }

    /// Lookups `BATCH` headers at a time, tree level by tree level, so that the loads of
    /// independent lookups overlap.
    #[inline(always)]
    fn batch<S: Scan>(&self, headers: &[Header], out: &mut [Option<usize>]) {
        const BATCH: usize = 8;
        const DONE: u32 = u32::MAX;
        for (hs, os) in headers.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let k = hs.len();
            let mut best = [u32::MAX; BATCH];
            let mut valid = [false; BATCH];
            for i in 0..k {
                let v = &hs[i].0;
                valid[i] = (v[2] | v[3]) <= 0xffff && v[4] <= 0xff;
            }
            for g in &self.groups {
                let mut c = [DONE; BATCH];
                let mut live = false;
                for i in 0..k {
                    if valid[i] && g.min_rule < best[i] {
                        c[i] = self.root(g, &hs[i].0);
                        live = true;
                    }
                }
                if !live {
                    break;
                }
                loop {
                    let mut inner = false;
                    for i in 0..k {
                        if c[i] & LEAF == 0 {
                            let n = &self.nodes[c[i] as usize];
                            c[i] = n.kids[S::child(n, hs[i].0[n.dim()]) % FANOUT];
                            inner = true;
                        }
                    }
                    if !inner {
                        break;
                    }
                }
                for i in 0..k {
                    if c[i] == DONE {
                        continue;
                    }
                    let v = &hs[i].0;
                    let q = S::prepare(v, hs[i].1);
                    let start = (c[i] & ((1 << LEAF_START) - 1)) as usize;
                    let count = ((c[i] >> LEAF_START) & ((1 << LEAF_COUNT) - 1)) as usize;
                    let mut at = start;
                    while at < start + count && self.cols.rule[at] < best[i] {
                        let m =
                            S::scan(&self.cols, at, v, hs[i].1, &q) & lane_mask(start + count - at);
                        if m != 0 {
                            best[i] = best[i].min(self.cols.rule[at + m.trailing_zeros() as usize]);
                            break;
                        }
                        at += LANES;
                    }
                }
            }
            for i in 0..k {
                os[i] = (best[i] != u32::MAX).then_some(best[i] as usize);
            }
        }
    }

    /// Where the walk of group `g` starts for `v`.
    #[inline(always)]
    fn root(&self, g: &Group, v: &[u32; 5]) -> u32 {
        if g.shift < 32 {
            self.tables[g.table as usize + (v[usize::from(g.dim) % 5] >> g.shift) as usize]
        } else {
            g.root
        }
    }

    #[inline(always)]
    fn lookup<S: Scan>(&self, h: &Header) -> Option<usize> {
        let v = &h.0;
        // Values beyond a field's width (a "port" above 65535) are in no rule.
        if (v[2] | v[3]) > 0xffff || v[4] > 0xff {
            return None;
        }
        let q = S::prepare(v, h.1);
        let mut best = u32::MAX;
        for g in &self.groups {
            if g.min_rule >= best {
                break;
            }
            let mut c = self.root(g, v);
            while c & LEAF == 0 {
                let n = &self.nodes[c as usize];
                c = n.kids[S::child(n, v[n.dim()]) % FANOUT];
            }
            let start = (c & ((1 << LEAF_START) - 1)) as usize;
            let count = ((c >> LEAF_START) & ((1 << LEAF_COUNT) - 1)) as usize;
            let mut at = start;
            while at < start + count && self.cols.rule[at] < best {
                let m = S::scan(&self.cols, at, v, h.1, &q) & lane_mask(start + count - at);
                if m != 0 {
                    best = best.min(self.cols.rule[at + m.trailing_zeros() as usize]);
                    break;
                }
                at += LANES;
            }
        }
        (best != u32::MAX).then_some(best as usize)
    }
}

#[inline(always)]
fn lane_mask(left: usize) -> u32 {
    if left >= LANES {
        (1 << LANES) - 1
    } else {
        (1 << left) - 1
    }
}

impl Classifier for PaCuts {
    fn classify(&self, h: &Header) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is set only when the CPU has AVX2.
            return unsafe {
                if self.has_flags {
                    self.one_avx2::<true>(h)
                } else {
                    self.one_avx2::<false>(h)
                }
            };
        }
        self.lookup::<Portable>(h)
    }
}

fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The scans: a node's child, and the mask of eight leaf slots matching a header.
trait Scan {
    /// Per-lookup state (broadcast header values).
    type Query;
    fn prepare(v: &[u32; 5], flags: u16) -> Self::Query;
    fn child(n: &Node, x: u32) -> usize;
    fn scan(c: &Columns, at: usize, v: &[u32; 5], flags: u16, q: &Self::Query) -> u32;
}

/// Rule by rule, on any CPU.
struct Portable;

impl Scan for Portable {
    type Query = ();
    #[inline(always)]
    fn prepare(_: &[u32; 5], _: u16) {}
    #[inline(always)]
    fn child(n: &Node, x: u32) -> usize {
        n.points.iter().filter(|&&p| p <= x).count()
    }
    #[inline(always)]
    fn scan(c: &Columns, at: usize, v: &[u32; 5], flags: u16, _: &()) -> u32 {
        let ports = v[2] | v[3] << 16;
        let mut m = 0;
        for l in 0..LANES {
            let i = at + l;
            let (plo, phi) = (c.c32[4][i], c.c32[5][i]);
            let ok = c.c32[0][i] <= v[0]
                && v[0] <= c.c32[1][i]
                && c.c32[2][i] <= v[1]
                && v[1] <= c.c32[3][i]
                && (plo & 0xffff) <= (ports & 0xffff)
                && (ports & 0xffff) <= (phi & 0xffff)
                && (plo >> 16) <= (ports >> 16)
                && (ports >> 16) <= (phi >> 16)
                && u32::from(c.proto[0][i]) <= v[4]
                && v[4] <= u32::from(c.proto[1][i])
                && u32::from(flags) & (c.flags[i] >> 16) == c.flags[i] & 0xffff;
            m |= u32::from(ok) << l;
        }
        m
    }
}

/// AVX2 scans; `F`: whether to test TCP flags.
#[cfg(target_arch = "x86_64")]
struct Avx2<const F: bool>;

#[cfg(target_arch = "x86_64")]
impl<const F: bool> Scan for Avx2<F> {
    type Query = [std::arch::x86_64::__m256i; 5];

    #[inline(always)]
    fn prepare(v: &[u32; 5], flags: u16) -> Self::Query {
        use std::arch::x86_64::*;
        // SAFETY: only reached from functions compiled with AVX2 (see `one_avx2`).
        unsafe {
            [
                _mm256_set1_epi32(v[0] as i32),
                _mm256_set1_epi32(v[1] as i32),
                _mm256_set1_epi32((v[2] | v[3] << 16) as i32),
                _mm256_set1_epi32(v[4] as i32),
                _mm256_set1_epi32(i32::from(flags)),
            ]
        }
    }

    #[inline(always)]
    fn child(n: &Node, x: u32) -> usize {
        // SAFETY: only reached from functions compiled with AVX2 and POPCNT.
        unsafe { child_avx2(n, x) }
    }

    #[inline(always)]
    fn scan(c: &Columns, at: usize, _: &[u32; 5], _: u16, q: &Self::Query) -> u32 {
        assert!(at + LANES <= c.len());
        // SAFETY: only reached from functions compiled with AVX2; `at + LANES` slots exist.
        unsafe { scan_avx2::<F>(c, at, q) }
    }
}

/// The number of a node's points at or below `x`: `p <= x` is `min(p, x) == p`, unsigned.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
fn child_avx2(n: &Node, x: u32) -> usize {
    use std::arch::x86_64::*;
    let xv = _mm256_set1_epi32(x as i32);
    // SAFETY: `points` and `dim` are 16 consecutive u32 at the 64-byte aligned start of the
    // node; `dim`'s lane is masked off below.
    let (a, b) = unsafe {
        let p = n.points.as_ptr().cast::<__m256i>();
        (_mm256_load_si256(p), _mm256_load_si256(p.add(1)))
    };
    let ma = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(
        _mm256_min_epu32(a, xv),
        a,
    ))) as u32;
    let mb = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(
        _mm256_min_epu32(b, xv),
        b,
    ))) as u32;
    ((ma | (mb & 0x7f) << 8).count_ones()) as usize
}

/// The AVX2 leaf scan of slots `at .. at + 8`: `lo <= x` is `max(x, lo) == x`, unsigned, per
/// 32-bit lane (per 16-bit lane for the packed ports, whose two halves must both hold).
///
/// # Safety
/// `at + LANES <= c.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn scan_avx2<const F: bool>(
    c: &Columns,
    at: usize,
    q: &[std::arch::x86_64::__m256i; 5],
) -> u32 {
    use std::arch::x86_64::*;
    // SAFETY (all loads): the caller guarantees eight slots from `at` in every column.
    let ld = |k: usize| unsafe { _mm256_loadu_si256(c.c32[k].as_ptr().add(at).cast()) };
    let ge32 = |x: __m256i, lo: __m256i| _mm256_cmpeq_epi32(_mm256_max_epu32(x, lo), x);
    let le32 = |x: __m256i, hi: __m256i| _mm256_cmpeq_epi32(_mm256_min_epu32(x, hi), x);
    let sa = _mm256_and_si256(ge32(q[0], ld(0)), le32(q[0], ld(1)));
    let da = _mm256_and_si256(ge32(q[1], ld(2)), le32(q[1], ld(3)));
    let p16 = _mm256_and_si256(
        _mm256_cmpeq_epi16(_mm256_max_epu16(q[2], ld(4)), q[2]),
        _mm256_cmpeq_epi16(_mm256_min_epu16(q[2], ld(5)), q[2]),
    );
    let ports = _mm256_cmpeq_epi32(p16, _mm256_set1_epi32(-1));
    let (plo, phi) = unsafe {
        (
            _mm256_cvtepu16_epi32(_mm_loadu_si128(c.proto[0].as_ptr().add(at).cast())),
            _mm256_cvtepu16_epi32(_mm_loadu_si128(c.proto[1].as_ptr().add(at).cast())),
        )
    };
    let proto = _mm256_and_si256(ge32(q[3], plo), le32(q[3], phi));
    let mut m = _mm256_and_si256(_mm256_and_si256(sa, da), _mm256_and_si256(ports, proto));
    if F {
        // TCP flags: (flags & mask) == value, with `value | mask << 16` in each lane.
        // SAFETY: as above, eight slots of the flags column.
        let fl = unsafe { _mm256_loadu_si256(c.flags.as_ptr().add(at).cast()) };
        let flags = _mm256_cmpeq_epi32(
            _mm256_and_si256(q[4], _mm256_srli_epi32(fl, 16)),
            _mm256_and_si256(fl, _mm256_set1_epi32(0xffff)),
        );
        m = _mm256_and_si256(m, flags);
    }
    _mm256_movemask_ps(_mm256_castsi256_ps(m)) as u32
}

/// The largest value of each field.
const FIELD_MAX: [u32; 5] = [u32::MAX, u32::MAX, 0xffff, 0xffff, 0xff];

/// Split the rules into groups by which fields are small; every group keeps priority order.
/// Each group comes with the address field all its rules are small in, if any.
fn partition(ranges: &[Ranges], p: &Params) -> Vec<(Option<usize>, Vec<u32>)> {
    let small = |r: &(u32, u32), bits: u8, width: u8| {
        u64::from(r.1 - r.0) < 1u64 << (width - bits.min(width))
    };
    let mut by_key: Vec<Vec<u32>> = vec![Vec::new(); 8];
    for (i, r) in ranges.iter().enumerate() {
        let key = if small(&r[1], p.small_ip_bits, 32) {
            1
        } else if small(&r[0], p.small_ip_bits, 32) {
            2
        } else {
            4 | u8::from(small(&r[2], p.small_port_bits, 16))
                | u8::from(small(&r[3], p.small_port_bits, 16)) << 1
        };
        by_key[usize::from(key)].push(i as u32);
    }
    let keyed = by_key
        .into_iter()
        .enumerate()
        .filter(|(_, g)| !g.is_empty())
        .map(|(k, g)| {
            let dim = match k {
                1 => Some(1),
                2 => Some(0),
                _ => None,
            };
            (dim, g)
        });
    // Small groups cost a tree walk each for few rules: they are searched as one group.
    let (mut kept, small): (Vec<_>, Vec<_>) = keyed.partition(|(_, g)| g.len() >= p.min_group);
    let mut merged: Vec<u32> = small.into_iter().flat_map(|(_, g)| g).collect();
    if !merged.is_empty() {
        merged.sort_unstable();
        kept.push((None, merged));
    }
    kept
}

struct Builder<'a> {
    ranges: &'a [Ranges],
    flags: &'a [Flags],
    p: Params,
    nodes: Vec<Node>,
    cols: Columns,
    shared: HashMap<Vec<u32>, u32>,
    budget: usize,
    depth: usize,
}

impl Builder<'_> {
    /// Whether rule `r` matches every header of box `bx` (a rule on TCP flags never does).
    fn covers(&self, r: u32, bx: &Ranges) -> bool {
        let g = &self.ranges[r as usize];
        self.flags[r as usize].is_any() && (0..5).all(|d| g[d].0 <= bx[d].0 && bx[d].1 <= g[d].1)
    }

    fn leaf(&mut self, rules: Vec<u32>) -> u32 {
        if let Some(&c) = self.shared.get(&rules) {
            return c;
        }
        let start = self.cols.len();
        assert!(
            rules.len() <= MAX_LEAF && start + rules.len() + LANES <= MAX_SLOTS,
            "PaCuts: a leaf of {} rules at slot {start} is beyond the encoding",
            rules.len()
        );
        for &r in &rules {
            self.cols
                .push(&self.ranges[r as usize], self.flags[r as usize], r);
        }
        self.budget = self.budget.saturating_sub(rules.len());
        let c = LEAF | (rules.len() as u32) << LEAF_START | start as u32;
        self.shared.insert(rules, c);
        c
    }

    /// Build the subtree for `rules` (all overlapping box `bx`); returns its child reference.
    fn build(&mut self, mut rules: Vec<u32>, bx: Ranges, depth: usize) -> u32 {
        if let Some(k) = rules.iter().position(|&r| self.covers(r, &bx)) {
            rules.truncate(k + 1);
        }
        let must = rules.len() > MAX_LEAF;
        if rules.len() <= self.p.binth || (self.budget < rules.len() && !must) {
            return self.leaf(rules);
        }
        let n = rules.len();
        let limit = if must {
            usize::MAX
        } else {
            self.p.spfac.saturating_mul(n)
        };
        // The split whose largest child is smallest, then the fewest slots, among the widest
        // splits within the space factor.
        let mut best: Option<split::Split> = None;
        for d in 0..5 {
            let mut parts = self.p.fanout;
            while parts >= 2 {
                match split::split(self.ranges, &rules, d, &bx, parts) {
                    Some(s) if s.slots <= limit || parts == 2 => {
                        if s.slots <= limit
                            && best
                                .as_ref()
                                .is_none_or(|b| (s.max, s.slots) < (b.max, b.slots))
                        {
                            best = Some(s);
                        }
                        break;
                    }
                    Some(_) => parts /= 2,
                    None => break,
                }
            }
        }
        let best = match best {
            Some(s) if s.max < n || must => s,
            _ => return self.leaf(rules),
        };
        self.depth = self.depth.max(depth + 1);
        let d = best.dim;
        let np = best.points.len() + 1;
        let mut parts: Vec<Vec<u32>> = vec![Vec::new(); np];
        for &r in &rules {
            let (a, b) = split::clip(self.ranges, r, d, &bx);
            for part in &mut parts[split::parts_of(&best.points, a, b)] {
                part.push(r);
            }
        }
        let id = self.nodes.len() as u32;
        let mut points = [u32::MAX; FANOUT - 1];
        points[..best.points.len()].copy_from_slice(&best.points);
        self.nodes.push(Node {
            points,
            dim: d as u32,
            kids: [0; FANOUT],
        });
        let mut kids = [0u32; FANOUT];
        for (i, part) in parts.into_iter().enumerate() {
            let mut cb = bx;
            cb[d] = (
                if i == 0 { bx[d].0 } else { best.points[i - 1] },
                if i + 1 < np {
                    best.points[i] - 1
                } else {
                    bx[d].1
                },
            );
            kids[i] = self.build(part, cb, depth + 1);
        }
        for i in np..FANOUT {
            kids[i] = kids[np - 1];
        }
        self.nodes[id as usize].kids = kids;
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear::Linear;
    use crate::testutil::{Rng, corner_headers, random_rules};

    #[test]
    fn agrees_with_linear_on_random_headers_and_corner_points() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..40 {
            let n = 1 + rng.below(600) as usize;
            let rules = random_rules(&mut rng, n);
            let p = Params {
                binth: 1 + rng.below(16) as usize,
                spfac: 1 + rng.below(8) as usize,
                small_ip_bits: [8u8, 16, 24][rng.below(3) as usize],
                small_port_bits: [0u8, 8, 16][rng.below(3) as usize],
                min_group: [1usize, 32, 1000][rng.below(3) as usize],
                budget_per_rule: [1usize, 4, 32][rng.below(3) as usize],
                fanout: 2 + rng.below(15) as usize,
                table_bits: [0u8, 4, 12, 16][rng.below(4) as usize],
                table_min_rules: [0usize, 100][rng.below(2) as usize],
            };
            let lin = Linear::new(&rules);
            let fast = PaCuts::new(&rules, p);
            let slow = fast.clone().without_simd();
            let headers = corner_headers(&mut rng, &rules, 3000);
            let mut batch = vec![None; headers.len()];
            fast.classify_all(&headers, &mut batch);
            for (h, b) in headers.iter().zip(&batch) {
                let want = lin.classify(h);
                assert_eq!(fast.classify(h), want, "round {round} {p:?}: {h}");
                assert_eq!(slow.classify(h), want, "round {round} {p:?} portable: {h}");
                assert_eq!(*b, want, "round {round} {p:?} batch: {h}");
            }
        }
    }

    #[test]
    fn empty_set_wildcards_and_out_of_range_values() {
        let t = PaCuts::new(&[], Params::default());
        assert_eq!(t.classify(&Header([1, 2, 3, 4, 5], 0)), None);
        let any = Rule {
            fields: std::array::from_fn(|d| crate::Range::any(crate::Field::ALL[d])),
            flags: crate::Flags::ANY,
            line: 1,
        };
        let t = PaCuts::new(std::slice::from_ref(&any), Params::default());
        assert_eq!(t.classify(&Header([1, 2, 3, 4, 5], 0)), Some(0));
        assert_eq!(
            t.classify(&Header([u32::MAX, u32::MAX, 65535, 65535, 255], 0)),
            Some(0)
        );
        assert_eq!(t.classify(&Header([1, 2, 70_000, 4, 5], 0)), None);
        assert_eq!(t.classify(&Header([1, 2, 3, 4, 256], 0)), None);
        // Many identical rules: all but the first are hidden.
        let t = PaCuts::new(&vec![any; 5000], Params::default());
        assert_eq!(t.classify(&Header([9, 9, 9, 9, 9], 0)), Some(0));
        assert_eq!(t.stats().slots, 1);
    }
}
