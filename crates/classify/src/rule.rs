//! The rule model: five header fields, each matched by an inclusive range.

use std::fmt;

/// The fields a rule matches, in ClassBench's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    /// IPv4 source address.
    SrcIp = 0,
    /// IPv4 destination address.
    DstIp = 1,
    /// Transport source port.
    SrcPort = 2,
    /// Transport destination port.
    DstPort = 3,
    /// IP protocol.
    Proto = 4,
}

impl Field {
    /// Every field, in order.
    pub const ALL: [Field; 5] = [
        Field::SrcIp,
        Field::DstIp,
        Field::SrcPort,
        Field::DstPort,
        Field::Proto,
    ];

    /// The largest value of the field.
    pub fn max(self) -> u32 {
        match self {
            Field::SrcIp | Field::DstIp => u32::MAX,
            Field::SrcPort | Field::DstPort => 0xffff,
            Field::Proto => 0xff,
        }
    }
}

/// An inclusive range of field values; `lo <= hi` always holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Range {
    /// Smallest value matched.
    pub lo: u32,
    /// Largest value matched.
    pub hi: u32,
}

impl Range {
    /// The range `[lo, hi]`; `None` when `lo > hi`.
    pub fn new(lo: u32, hi: u32) -> Option<Range> {
        (lo <= hi).then_some(Range { lo, hi })
    }

    /// Every value of `field`.
    pub fn any(field: Field) -> Range {
        Range {
            lo: 0,
            hi: field.max(),
        }
    }

    /// The addresses of an IPv4 prefix `addr/len` (`len` ≤ 32; host bits are ignored).
    pub fn prefix(addr: u32, len: u8) -> Range {
        let mask = if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len.min(32)))
        };
        Range {
            lo: addr & mask,
            hi: (addr & mask) | !mask,
        }
    }

    /// Whether `v` is in the range.
    #[inline]
    pub fn contains(&self, v: u32) -> bool {
        self.lo <= v && v <= self.hi
    }
}

/// One rule: a range per field, and the line it came from (1-based, for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The ranges, indexed by [`Field`].
    pub fields: [Range; 5],
    /// The line of the rule in its file.
    pub line: usize,
}

impl Rule {
    /// Whether the rule matches `h`.
    #[inline]
    pub fn matches(&self, h: &Header) -> bool {
        self.fields
            .iter()
            .zip(h.0.iter())
            .all(|(r, &v)| r.contains(v))
    }

    /// The range of `f`.
    pub fn range(&self, f: Field) -> Range {
        self.fields[f as usize]
    }
}

/// A packet header as the classifier sees it: the values of the five [`Field`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header(pub [u32; 5]);

impl fmt::Display for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ip = |a: u32| std::net::Ipv4Addr::from(a);
        write!(
            f,
            "{} -> {} ports {} -> {} proto {}",
            ip(self.0[0]),
            ip(self.0[1]),
            self.0[2],
            self.0[3],
            self.0[4]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert_eq!(
            Range::prefix(0x0a01_0203, 8),
            Range {
                lo: 0x0a00_0000,
                hi: 0x0aff_ffff
            }
        );
        assert_eq!(Range::prefix(7, 32), Range { lo: 7, hi: 7 });
        assert_eq!(
            Range::prefix(7, 0),
            Range {
                lo: 0,
                hi: u32::MAX
            }
        );
        assert_eq!(Range::new(3, 2), None);
    }
}
