//! `packetcount` and `bytecount`: one counter in MBuf word 0; every packet passes.
//!
//! Both take no argument and need an 8-byte MBuf: `(packetcount,,8)`, `(bytecount,,8)` (the
//! empty argument is the paper's way of writing "no argument, then the MBuf size").
//! `bytecount` adds each packet's length on the wire, not the captured length, so an upstream
//! `snap` does not change it.

use crate::class::{Arg, Context, Filter, FilterClass, Instance, Pkt, Verdict};
use crate::classes::no_args;
use crate::error::Error;
use crate::mbuf::MBuf;

/// The `packetcount` class.
#[derive(Clone, Copy, Debug, Default)]
pub struct PacketCountClass;

/// The `bytecount` class.
#[derive(Clone, Copy, Debug, Default)]
pub struct ByteCountClass;

impl FilterClass for PacketCountClass {
    fn describe(&self, mbuf: &MBuf) -> Option<String> {
        Some(format!("{} packets", mbuf.get(0)))
    }

    fn name(&self) -> &'static str {
        "packetcount"
    }

    fn about(&self) -> &'static str {
        "count packets in MBuf word 0; pass every packet"
    }

    fn usage(&self) -> &'static str {
        ", MBUF (at least 8): (packetcount,,8)"
    }

    fn arity(&self) -> (usize, usize) {
        (0, 1)
    }

    fn min_mbuf(&self, _args: &[Arg]) -> usize {
        8
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, Error> {
        no_args(self.name(), args)?;
        Ok(Instance::Filter(Box::new(Counter { bytes: false })))
    }
}

impl FilterClass for ByteCountClass {
    fn describe(&self, mbuf: &MBuf) -> Option<String> {
        Some(format!("{} bytes", mbuf.get(0)))
    }

    fn name(&self) -> &'static str {
        "bytecount"
    }

    fn about(&self) -> &'static str {
        "count bytes (wire length) in MBuf word 0; pass every packet"
    }

    fn usage(&self) -> &'static str {
        ", MBUF (at least 8): (bytecount,,8)"
    }

    fn arity(&self) -> (usize, usize) {
        (0, 1)
    }

    fn min_mbuf(&self, _args: &[Arg]) -> usize {
        8
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, Error> {
        no_args(self.name(), args)?;
        Ok(Instance::Filter(Box::new(Counter { bytes: true })))
    }
}

/// A `packetcount` or `bytecount` instance.
#[derive(Clone, Copy, Debug)]
pub struct Counter {
    bytes: bool,
}

impl Filter for Counter {
    fn process(&mut self, pkt: &Pkt<'_>, mbuf: &MBuf) -> Verdict {
        mbuf.add(
            0,
            if self.bytes {
                u64::from(pkt.wire_len)
            } else {
                1
            },
        );
        Verdict::PASS
    }
}

#[cfg(test)]
mod tests {
    use netsift_capture::generate::mixed_traffic;

    use super::*;
    use crate::classes::testutil::{bare, error, filter, run};

    #[test]
    fn counts_packets_and_wire_bytes() {
        let mut pkts = mixed_traffic(5, 500);
        // A snapped packet counts its wire length.
        pkts[3].data.truncate(20);
        let want_bytes: u64 = pkts.iter().map(|p| u64::from(p.wire_len)).sum();
        let m = MBuf::new(8);
        let mut f = filter(&PacketCountClass, &bare(&[""]));
        assert!(
            run(f.as_mut(), &pkts, &m)
                .iter()
                .all(|v| *v == Verdict::PASS)
        );
        assert_eq!(m.snapshot(), vec![500]);
        let m = MBuf::new(8);
        let mut f = filter(&ByteCountClass, &[]);
        assert!(
            run(f.as_mut(), &pkts, &m)
                .iter()
                .all(|v| *v == Verdict::PASS)
        );
        assert_eq!(m.snapshot(), vec![want_bytes]);
    }

    #[test]
    fn arguments_are_rejected() {
        assert_eq!(ByteCountClass.min_mbuf(&[]), 8);
        assert_eq!(
            error(&ByteCountClass, &bare(&["8"])),
            "bytecount: takes no arguments, but argument 1 is \"8\" (write (bytecount,,BYTES) \
             to give only the MBuf size)"
        );
        assert!(error(&PacketCountClass, &bare(&["x"])).starts_with("packetcount: takes no"));
    }
}
