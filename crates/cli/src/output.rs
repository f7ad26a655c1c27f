//! Printing packets the way tcpdump users expect.

use std::fmt::Write as _;

use netsift::capture::{PacketRef, Timestamp};
use netsift::wire;

/// `HH:MM:SS.uuuuuu` (UTC time of day), tcpdump's default timestamp with `TZ=UTC`.
pub fn time_of_day(ts: Timestamp) -> String {
    let secs = ts.secs().rem_euclid(86_400);
    let mut s = String::with_capacity(15);
    let _ = write!(
        s,
        "{:02}:{:02}:{:02}.{:06}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        ts.subsec_micros()
    );
    s
}

/// One line for a packet: time of day, then the protocol summary.
pub fn packet_line(p: &PacketRef<'_>) -> String {
    format!(
        "{} {}",
        time_of_day(p.timestamp),
        wire::summarize(p.link_type, p.data, p.wire_len)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_of_day_is_utc() {
        assert_eq!(
            time_of_day(Timestamp::new(86_400 + 3_723, 4_000_999)),
            "01:02:03.004000"
        );
        assert_eq!(time_of_day(Timestamp::new(-1, 0)), "23:59:59.000000");
    }
}
