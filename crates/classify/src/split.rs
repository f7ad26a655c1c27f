//! Choosing where a tree node splits a field: the engines that split at rule boundaries
//! ([`crate::pacuts`] and the HiTables rewrite) share it.

/// Five inclusive ranges, one per field: a rule's box, or a node's.
pub(crate) type Ranges = [(u32, u32); 5];

/// A candidate split of a node: its points (each the first value of a child but the first),
/// the size of its largest child and the total of its children's sizes.
pub(crate) struct Split {
    pub dim: usize,
    pub points: Vec<u32>,
    pub max: usize,
    pub slots: usize,
}

/// Range `r`'s field `d`, clipped to box `bx`.
pub(crate) fn clip(ranges: &[Ranges], r: u32, d: usize, bx: &Ranges) -> (u32, u32) {
    let (a, b) = ranges[r as usize][d];
    (a.max(bx[d].0), b.min(bx[d].1))
}

/// The children (indices into `points.len() + 1` parts) a clipped range `(a, b)` overlaps.
pub(crate) fn parts_of(points: &[u32], a: u32, b: u32) -> std::ops::RangeInclusive<usize> {
    points.partition_point(|&p| p <= a)..=points.partition_point(|&p| p <= b)
}

/// The split of field `d` into at most `parts` intervals whose largest child holds the
/// fewest rules: a binary search on that size, each step cutting greedily (a child grows
/// until one more range start would put it over the size).
pub(crate) fn split(
    ranges: &[Ranges],
    rules: &[u32],
    d: usize,
    bx: &Ranges,
    parts: usize,
) -> Option<Split> {
    let (blo, bhi) = bx[d];
    if blo == bhi {
        return None;
    }
    let mut starts: Vec<u32> = Vec::with_capacity(rules.len());
    let mut ends: Vec<u32> = Vec::with_capacity(rules.len());
    for &r in rules {
        let (a, b) = clip(ranges, r, d, bx);
        starts.push(a);
        ends.push(b);
    }
    starts.sort_unstable();
    ends.sort_unstable();
    let n = rules.len();
    // Children of at most `t` rules: the points, or None when more than `parts` are needed.
    let greedy = |t: usize| -> Option<Vec<u32>> {
        let mut points = Vec::new();
        let mut s = blo;
        loop {
            // Rules over [s, e] for e >= s: starts <= e, minus ends < s.
            let j = t + ends.partition_point(|&b| b < s);
            if j >= n {
                return Some(points);
            }
            let p = starts[j];
            if p <= s || points.len() + 2 > parts {
                return None;
            }
            points.push(p);
            s = p;
        }
    };
    let (mut lo, mut hi) = (1usize, n);
    let mut found = greedy(n)?;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match greedy(mid) {
            Some(p) => {
                hi = mid;
                found = p;
            }
            None => lo = mid + 1,
        }
    }
    if found.is_empty() {
        return None;
    }
    let points = found;
    let mut count = vec![0i64; points.len() + 2];
    let mut slots = 0usize;
    for &r in rules {
        let (a, b) = clip(ranges, r, d, bx);
        let (ia, ib) = parts_of(&points, a, b).into_inner();
        count[ia] += 1;
        count[ib + 1] -= 1;
        slots += ib - ia + 1;
    }
    let mut run = 0;
    let mut max = 0;
    for c in &count[..=points.len()] {
        run += c;
        max = max.max(run);
    }
    Some(Split {
        dim: d,
        points,
        max: max as usize,
        slots,
    })
}
