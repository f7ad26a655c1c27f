//! `snap`: cut packets to N bytes for everything downstream.
//!
//! `(snap, N)` with `N` from 1 to 2³²−1 passes every packet with `keep: Some(N)` and result `N`
//! (a packet shorter than `N` keeps all its bytes; the wire length is never changed).

use crate::class::{Arg, Context, Filter, FilterClass, Instance, Pkt, Verdict};
use crate::classes::number_arg;
use crate::error::Error;
use crate::mbuf::MBuf;

/// The `snap` class.
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapClass;

impl FilterClass for SnapClass {
    fn name(&self) -> &'static str {
        "snap"
    }

    fn about(&self) -> &'static str {
        "cut packets to N bytes downstream; pass every packet"
    }

    fn usage(&self) -> &'static str {
        "N"
    }

    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, Error> {
        let n = number_arg(self.name(), args, 0, "N", 1, u64::from(u32::MAX))? as u32;
        Ok(Instance::Filter(Box::new(Snap { n })))
    }
}

/// A `snap` instance.
#[derive(Clone, Copy, Debug)]
pub struct Snap {
    n: u32,
}

impl Filter for Snap {
    fn process(&mut self, _pkt: &Pkt<'_>, _mbuf: &MBuf) -> Verdict {
        Verdict::Pass {
            result: self.n,
            keep: Some(self.n),
        }
    }
}

#[cfg(test)]
mod tests {
    use netsift_capture::generate::mixed_traffic;

    use super::*;
    use crate::classes::testutil::{bare, error, filter, run};

    #[test]
    fn keeps_n_bytes() {
        let mut f = filter(&SnapClass, &bare(&["0x40"]));
        let v = run(f.as_mut(), &mixed_traffic(1, 20), &MBuf::new(0));
        assert!(v.iter().all(|v| *v
            == Verdict::Pass {
                result: 64,
                keep: Some(64)
            }));
        assert_eq!(
            error(&SnapClass, &bare(&["0"])),
            "snap: argument 1 (N) must be a whole number from 1 to 4294967295, not \"0\""
        );
        assert!(error(&SnapClass, &bare(&["4294967296"])).contains("argument 1 (N)"));
    }
}
