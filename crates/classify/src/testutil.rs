//! Random rule sets and headers for the engines' property tests.

use crate::{Field, Header, Range, Rule};

/// A xorshift generator.
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `n` rules over few networks (so that they overlap), with wildcard, exact and range ports
/// and wildcard, tcp or udp protocols.
pub fn random_rules(rng: &mut Rng, n: usize) -> Vec<Rule> {
    (0..n)
        .map(|i| {
            let pfx = |rng: &mut Rng| {
                let len = [0u8, 8, 16, 24, 32][rng.below(5) as usize];
                Range::prefix(
                    ((rng.below(4) as u32) << 24) | rng.below(1 << 20) as u32,
                    len,
                )
            };
            let port = |rng: &mut Rng| match rng.below(3) {
                0 => Range::any(Field::SrcPort),
                1 => {
                    let p = rng.below(2048) as u32;
                    Range { lo: p, hi: p }
                }
                _ => {
                    let a = rng.below(65536) as u32;
                    let b = rng.below(65536) as u32;
                    Range {
                        lo: a.min(b),
                        hi: a.max(b),
                    }
                }
            };
            let proto = match rng.below(3) {
                0 => Range::any(Field::Proto),
                1 => Range { lo: 6, hi: 6 },
                _ => Range { lo: 17, hi: 17 },
            };
            // One rule in six tests TCP flags (ClassBench writes them in the high byte).
            let flags = match rng.below(6) {
                0 => {
                    let mask = [0x1200u16, 0x1000, 0xff00, 0x0200][rng.below(4) as usize];
                    crate::Flags {
                        value: rng.below(0x10000) as u16 & mask,
                        mask,
                    }
                }
                _ => crate::Flags::ANY,
            };
            Rule {
                fields: [pfx(rng), pfx(rng), port(rng), port(rng), proto],
                flags,
                line: i + 1,
            }
        })
        .collect()
}

/// About `n` headers: random values and points inside random rules, then every rule's 32
/// corners, each value moved one step out at random; TCP flags none, common ones or random.
pub fn corner_headers(rng: &mut Rng, rules: &[Rule], n: usize) -> Vec<Header> {
    let mut out = Vec::new();
    if rules.is_empty() {
        return out;
    }
    let flags = |rng: &mut Rng| match rng.below(4) {
        0 => 0u16,
        1 => 0x0200,
        2 => 0x1200,
        _ => rng.below(0x10000) as u16,
    };
    for _ in 0..n {
        let r = &rules[rng.below(rules.len() as u64) as usize];
        let f = flags(rng);
        out.push(Header(
            std::array::from_fn(|d| {
                let f = r.fields[d];
                match rng.below(4) {
                    0 => rng.below(u64::from(Field::ALL[d].max()) + 1) as u32,
                    _ => f.lo + rng.below(u64::from(f.hi - f.lo) + 1) as u32,
                }
            }),
            f,
        ));
    }
    for r in rules {
        for corner in 0..32u32 {
            let fl = if corner % 2 == 0 {
                r.flags.value
            } else {
                flags(rng)
            };
            out.push(Header(
                std::array::from_fn(|d| {
                    let f = r.fields[d];
                    let v = if corner >> d & 1 == 0 { f.lo } else { f.hi };
                    match rng.below(3) {
                        0 => v.saturating_sub(1),
                        1 => v.saturating_add(1).min(Field::ALL[d].max()),
                        _ => v,
                    }
                }),
                fl,
            ));
        }
    }
    out
}

/// `rounds` random rule sets of up to 400 rules, an engine built for each with parameters drawn
/// by `params`, and its answer on random headers and corner points equal to linear's.
pub fn agrees_with_linear<P: std::fmt::Debug, E: crate::Classifier>(
    seed: u64,
    rounds: usize,
    mut params: impl FnMut(&mut Rng) -> P,
    build: impl Fn(&[Rule], &P) -> E,
) {
    use crate::Classifier;
    let mut rng = Rng(seed);
    for round in 0..rounds {
        let n = 1 + rng.below(400) as usize;
        let rules = random_rules(&mut rng, n);
        let p = params(&mut rng);
        let (lin, engine) = (crate::linear::Linear::new(&rules), build(&rules, &p));
        for h in corner_headers(&mut rng, &rules, 2000) {
            assert_eq!(
                engine.classify(&h),
                lin.classify(&h),
                "round {round} {p:?}: {h}"
            );
        }
    }
}
