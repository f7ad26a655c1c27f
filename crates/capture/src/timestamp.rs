//! Packet timestamps with nanosecond resolution.

use std::fmt;

const NANOS_PER_SEC: u32 = 1_000_000_000;
const NANOS_PER_SEC_I128: i128 = 1_000_000_000;

/// A point in time with nanosecond resolution: seconds since the Unix epoch plus nanoseconds.
///
/// The nanoseconds are always below 1,000,000,000 and count forward from `secs`, so a time
/// before the epoch such as −1.5 s is `secs = -2, nanos = 500_000_000`; ordering, equality
/// and [`Timestamp::as_nanos`] are those of the real time. The range is that of an `i64` count of
/// seconds; conversions that would leave it saturate to [`Timestamp::MIN`] or
/// [`Timestamp::MAX`].
///
/// It displays as `SECS.NNNNNNNNN` (nine fractional digits), like
/// `tcpdump -tt --time-stamp-precision=nano`:
///
/// ```
/// use netsift_capture::Timestamp;
/// let t = Timestamp::new(1_700_000_000, 123_456_789);
/// assert_eq!(t.to_string(), "1700000000.123456789");
/// assert_eq!(Timestamp::from_nanos(-1_500_000_000).to_string(), "-1.500000000");
/// assert_eq!(Timestamp::from_nanos(t.as_nanos()), t);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    // Field order matters: the derived `Ord` compares `secs` first.
    secs: i64,
    nanos: u32,
}

impl Timestamp {
    /// The Unix epoch, 1970-01-01 00:00:00 UTC.
    pub const ZERO: Timestamp = Timestamp { secs: 0, nanos: 0 };
    /// The earliest representable time.
    pub const MIN: Timestamp = Timestamp {
        secs: i64::MIN,
        nanos: 0,
    };
    /// The latest representable time.
    pub const MAX: Timestamp = Timestamp {
        secs: i64::MAX,
        nanos: NANOS_PER_SEC - 1,
    };

    /// Makes a timestamp from seconds and nanoseconds; nanoseconds of a second or more carry into
    /// the seconds (saturating at [`Timestamp::MAX`]).
    #[inline]
    pub const fn new(secs: i64, nanos: u32) -> Timestamp {
        if nanos < NANOS_PER_SEC {
            return Timestamp { secs, nanos };
        }
        let carry = (nanos / NANOS_PER_SEC) as i64;
        match secs.checked_add(carry) {
            Some(secs) => Timestamp {
                secs,
                nanos: nanos % NANOS_PER_SEC,
            },
            None => Timestamp::MAX,
        }
    }

    /// Makes a timestamp from a total number of nanoseconds since the epoch, saturating at
    /// [`Timestamp::MIN`] and [`Timestamp::MAX`].
    pub const fn from_nanos(total: i128) -> Timestamp {
        let secs = total.div_euclid(NANOS_PER_SEC_I128);
        let nanos = total.rem_euclid(NANOS_PER_SEC_I128) as u32;
        if secs > i64::MAX as i128 {
            Timestamp::MAX
        } else if secs < i64::MIN as i128 {
            Timestamp::MIN
        } else {
            Timestamp {
                secs: secs as i64,
                nanos,
            }
        }
    }

    /// Makes a timestamp from a total number of microseconds since the epoch, saturating.
    pub const fn from_micros(total: i128) -> Timestamp {
        Timestamp::from_nanos(total.saturating_mul(1000))
    }

    /// The total number of nanoseconds since the epoch (exact: an `i128` holds every timestamp).
    pub const fn as_nanos(self) -> i128 {
        self.secs as i128 * NANOS_PER_SEC_I128 + self.nanos as i128
    }

    /// The total number of whole microseconds since the epoch, rounded toward minus infinity.
    pub const fn as_micros(self) -> i128 {
        self.as_nanos().div_euclid(1000)
    }

    /// Whole seconds since the epoch (rounded toward minus infinity).
    #[inline]
    pub const fn secs(self) -> i64 {
        self.secs
    }

    /// Nanoseconds after [`Timestamp::secs`], below 1,000,000,000.
    #[inline]
    pub const fn nanos(self) -> u32 {
        self.nanos
    }

    /// Microseconds after [`Timestamp::secs`], below 1,000,000 (the nanoseconds rounded down).
    #[inline]
    pub const fn subsec_micros(self) -> u32 {
        self.nanos / 1000
    }

    /// Adds a signed number of nanoseconds, saturating.
    pub const fn saturating_add_nanos(self, nanos: i128) -> Timestamp {
        Timestamp::from_nanos(self.as_nanos().saturating_add(nanos))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.as_nanos();
        let sign = if total < 0 { "-" } else { "" };
        let abs = total.unsigned_abs();
        let secs = abs / NANOS_PER_SEC_I128 as u128;
        let nanos = abs % NANOS_PER_SEC_I128 as u128;
        let text = format!("{sign}{secs}.{nanos:09}");
        f.pad(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_normalizes_and_saturates() {
        assert_eq!(
            Timestamp::new(1, 1_500_000_000),
            Timestamp::new(2, 500_000_000)
        );
        assert_eq!(Timestamp::new(i64::MAX, 1_000_000_000), Timestamp::MAX);
        assert_eq!(Timestamp::new(3, 4).secs(), 3);
        assert_eq!(Timestamp::new(3, 4).nanos(), 4);
    }

    #[test]
    fn nanos_round_trip_and_saturation() {
        for total in [
            0i128,
            1,
            -1,
            999_999_999,
            1_000_000_000,
            -1_000_000_001,
            1_700_000_000_123_456_789,
        ] {
            assert_eq!(Timestamp::from_nanos(total).as_nanos(), total);
        }
        assert_eq!(Timestamp::from_nanos(i128::MAX), Timestamp::MAX);
        assert_eq!(Timestamp::from_nanos(i128::MIN), Timestamp::MIN);
        assert_eq!(Timestamp::MAX.saturating_add_nanos(5), Timestamp::MAX);
        assert_eq!(Timestamp::MIN.as_nanos(), i64::MIN as i128 * 1_000_000_000);
        let t = Timestamp::from_nanos(-1);
        assert_eq!((t.secs(), t.nanos()), (-1, 999_999_999));
    }

    #[test]
    fn micros() {
        let t = Timestamp::from_micros(1_500_001);
        assert_eq!((t.secs(), t.nanos()), (1, 500_001_000));
        assert_eq!(t.subsec_micros(), 500_001);
        assert_eq!(t.as_micros(), 1_500_001);
        assert_eq!(Timestamp::from_nanos(-1).as_micros(), -1);
    }

    #[test]
    fn ordering_follows_time() {
        let a = Timestamp::from_nanos(-1_500_000_000);
        let b = Timestamp::from_nanos(-500_000_000);
        let c = Timestamp::from_nanos(1);
        assert!(a < b && b < c);
    }

    #[test]
    fn display() {
        assert_eq!(Timestamp::ZERO.to_string(), "0.000000000");
        assert_eq!(Timestamp::new(12, 5).to_string(), "12.000000005");
        assert_eq!(Timestamp::from_nanos(-1).to_string(), "-0.000000001");
        assert_eq!(Timestamp::new(-1, 0).to_string(), "-1.000000000");
        assert_eq!(Timestamp::MAX.to_string(), "9223372036854775807.999999999");
        assert_eq!(Timestamp::MIN.to_string(), "-9223372036854775808.000000000");
        assert_eq!(format!("{:>14}", Timestamp::new(1, 0)), "   1.000000000");
    }
}
