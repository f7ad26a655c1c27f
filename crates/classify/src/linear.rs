//! The reference engine: every rule in priority order until one matches.

use crate::{Classifier, Flags, Header, Rule};

/// A linear scan over a copy of the rules' ranges (laid out flat, 40 bytes a rule) and TCP-flag
/// criteria.
#[derive(Clone, Debug)]
pub struct Linear {
    ranges: Vec<([(u32, u32); 5], Flags)>,
}

impl Linear {
    /// The engine for `rules` (priority = order).
    pub fn new(rules: &[Rule]) -> Linear {
        Linear {
            ranges: rules
                .iter()
                .map(|r| {
                    (
                        std::array::from_fn(|i| (r.fields[i].lo, r.fields[i].hi)),
                        r.flags,
                    )
                })
                .collect(),
        }
    }

    /// Bytes of memory the engine holds.
    pub fn memory(&self) -> usize {
        self.ranges.len() * std::mem::size_of::<([(u32, u32); 5], Flags)>()
    }
}

impl Classifier for Linear {
    fn classify(&self, h: &Header) -> Option<usize> {
        let v = h.0;
        self.ranges.iter().position(|(r, f)| {
            f.matches(h.1)
                && r.iter()
                    .zip(v.iter())
                    .all(|(&(lo, hi), &x)| lo <= x && x <= hi)
        })
    }
}
