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

/// A TCP-flags criterion, as ClassBench's sixth field writes it (`0x<value>/0x<mask>`): the
/// header's flags masked with `mask` equal `value`. The mask 0 matches every header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags {
    /// The bits that must be set, within `mask`.
    pub value: u16,
    /// The bits that are tested.
    pub mask: u16,
}

impl Flags {
    /// Any flags.
    pub const ANY: Flags = Flags { value: 0, mask: 0 };

    /// Whether header flags `f` satisfy the criterion.
    #[inline]
    pub fn matches(self, f: u16) -> bool {
        f & self.mask == self.value
    }

    /// Whether it is [`Flags::ANY`] (or matches every header in the same way).
    pub fn is_any(self) -> bool {
        self.mask == 0
    }
}

/// One rule: a range per field, a TCP-flags criterion, and the line it came from (1-based, for
/// messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The ranges, indexed by [`Field`].
    pub fields: [Range; 5],
    /// The TCP flags criterion ([`Flags::ANY`] for five-field rules).
    pub flags: Flags,
    /// The line of the rule in its file.
    pub line: usize,
}

impl Rule {
    /// Whether the rule matches `h`.
    #[inline]
    pub fn matches(&self, h: &Header) -> bool {
        self.flags.matches(h.1)
            && self
                .fields
                .iter()
                .zip(h.0.iter())
                .all(|(r, &v)| r.contains(v))
    }

    /// The range of `f`.
    pub fn range(&self, f: Field) -> Range {
        self.fields[f as usize]
    }
}

/// A packet header as the classifier sees it: the values of the five [`Field`]s, and the TCP
/// flags (0 for other protocols, and in ClassBench traces, which carry none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header(pub [u32; 5], pub u16);

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
        )?;
        if self.1 != 0 {
            write!(f, " flags {:#06x}", self.1)?;
        }
        Ok(())
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
