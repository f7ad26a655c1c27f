//! `sampler`: pass 1 in N packets, deterministically or at random.
//!
//! - `(sampler, N)` passes the 1st, the N+1th, the 2N+1th … packet that reaches it.
//! - `(sampler, random:N)` passes each packet with probability 1/N, drawn from a xorshift64
//!   generator seeded with a fixed default seed, so that two runs over the same input pass the
//!   same packets; `(sampler, random:N:SEED)` picks another seed. The seed is part of the one
//!   argument (not a separate one) so that `(sampler,2,4)` keeps meaning "N = 2, 4 bytes of
//!   MBuf".
//!
//! MBuf (optional): word 0 counts the packets seen, word 1 those passed — each written when the
//! MBuf has it (8 bytes: seen only; 16 bytes: both). The result of a passed packet is its
//! number among the packets seen, counting from 1 (saturated to `u32::MAX`).

use netsift_capture::generate::XorShift64;

use crate::class::{Arg, Context, Filter, FilterClass, Instance, Pkt, Verdict};
use crate::error::Error;
use crate::mbuf::MBuf;

/// The seed of `random:N` when none is given.
pub const DEFAULT_SEED: u64 = 0x5eed_ffbf;

/// The `sampler` class.
#[derive(Clone, Copy, Debug, Default)]
pub struct SamplerClass;

/// How a sampler picks packets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every `n`th packet, starting with the first.
    Every(u64),
    /// Each packet with probability 1/`n`, from a generator seeded with `seed`.
    Random {
        /// One in `n` on average.
        n: u64,
        /// The generator's seed.
        seed: u64,
    },
}

/// Parse the argument of `sampler`: `N`, `random:N` or `random:N:SEED` (an
/// [`ErrorKind::Argument`](crate::ErrorKind::Argument) error otherwise).
pub fn parse_mode(arg: &Arg) -> Result<Mode, Error> {
    let t = arg.text.trim();
    let num = |s: &str| Arg::bare(s).number();
    let bad_n = |s: &str| {
        format!(
            "sampler: argument 1 (N) must be a whole number from 1 to {}, not {s:?}",
            u64::MAX
        )
    };
    if let Some(rest) = t.strip_prefix("random:") {
        let (n, seed) = match rest.split_once(':') {
            Some((n, s)) => (
                n,
                num(s).ok_or_else(|| {
                    Error::argument(format!(
                        "sampler: the seed in argument 1 must be a whole number, not {s:?}"
                    ))
                })?,
            ),
            None => (rest, DEFAULT_SEED),
        };
        match num(n) {
            Some(n) if n >= 1 => Ok(Mode::Random { n, seed }),
            _ => Err(Error::argument(bad_n(n))),
        }
    } else {
        match num(t) {
            Some(n) if n >= 1 => Ok(Mode::Every(n)),
            _ => Err(Error::argument(format!(
                "{} (or random:N, random:N:SEED)",
                bad_n(&arg.text)
            ))),
        }
    }
}

impl FilterClass for SamplerClass {
    fn describe(&self, mbuf: &MBuf) -> Option<String> {
        (mbuf.words() >= 2).then(|| format!("{} seen, {} passed", mbuf.get(0), mbuf.get(1)))
    }

    fn name(&self) -> &'static str {
        "sampler"
    }

    fn about(&self) -> &'static str {
        "pass 1 in N packets (every Nth, or at random); MBuf words: seen, passed"
    }

    fn usage(&self) -> &'static str {
        "N | random:N | random:N:SEED [, MBUF]"
    }

    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, Error> {
        let arg = args
            .first()
            .ok_or_else(|| Error::argument("sampler: argument 1 (N) is missing"))?;
        let mode = parse_mode(arg)?;
        let rng = match mode {
            Mode::Random { seed, .. } => XorShift64::new(seed),
            Mode::Every(_) => XorShift64::new(0),
        };
        Ok(Instance::Filter(Box::new(Sampler { mode, rng, seen: 0 })))
    }
}

/// A `sampler` instance.
#[derive(Debug)]
pub struct Sampler {
    mode: Mode,
    rng: XorShift64,
    seen: u64,
}

impl Filter for Sampler {
    fn process(&mut self, _pkt: &Pkt<'_>, mbuf: &MBuf) -> Verdict {
        let index = self.seen;
        self.seen += 1;
        mbuf.add(0, 1);
        let pass = match self.mode {
            Mode::Every(n) => index % n == 0,
            Mode::Random { n, .. } => self.rng.below(n) == 0,
        };
        if !pass {
            return Verdict::Drop;
        }
        mbuf.add(1, 1);
        Verdict::Pass {
            result: u32::try_from(self.seen).unwrap_or(u32::MAX),
            keep: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use netsift_capture::generate::mixed_traffic;

    use super::*;
    use crate::classes::testutil::{bare, error, filter, run};

    #[test]
    fn one_in_n_passes_first_and_every_nth() {
        let pkts = mixed_traffic(1, 100);
        for n in [1u64, 2, 3, 7, 100, 1000] {
            let mut f = filter(&SamplerClass, &bare(&[&n.to_string()]));
            let m = MBuf::new(16);
            let v = run(f.as_mut(), &pkts, &m);
            let passed: Vec<usize> = (0..100).filter(|i| v[*i] != Verdict::Drop).collect();
            let want: Vec<usize> = (0..100).step_by(n as usize).collect();
            assert_eq!(passed, want, "n = {n}");
            assert_eq!(m.get(0), 100);
            assert_eq!(m.get(1), want.len() as u64);
            assert_eq!(
                v[0],
                Verdict::Pass {
                    result: 1,
                    keep: None
                }
            );
        }
    }

    #[test]
    fn small_mbuf_is_fine() {
        // The paper's (sampler,2,4): 4 bytes round up to one word, which counts packets seen.
        let mut f = filter(&SamplerClass, &bare(&["2"]));
        let m = MBuf::new(4);
        run(f.as_mut(), &mixed_traffic(2, 9), &m);
        assert_eq!(m.snapshot(), vec![9]);
        let mut f = filter(&SamplerClass, &bare(&["2"]));
        run(f.as_mut(), &mixed_traffic(2, 9), &MBuf::new(0));
    }

    #[test]
    fn random_is_seeded_and_near_one_in_n() {
        let pkts = mixed_traffic(3, 20_000);
        let passes = |arg: &str| {
            let mut f = filter(&SamplerClass, &bare(&[arg]));
            run(f.as_mut(), &pkts, &MBuf::new(16))
                .iter()
                .map(|v| *v != Verdict::Drop)
                .collect::<Vec<bool>>()
        };
        let a = passes("random:4");
        assert_eq!(a, passes("random:4"), "same default seed, same packets");
        assert_eq!(a, passes(&format!("random:4:{DEFAULT_SEED}")));
        let b = passes("random:4:99");
        assert_ne!(a, b, "another seed, other packets");
        for v in [&a, &b] {
            let k = v.iter().filter(|p| **p).count();
            // Binomial(20000, 1/4): mean 5000, sd 61; 6 sd either side.
            assert!((4630..=5370).contains(&k), "{k} passed");
        }
        // Independent reference: the same generator drawn by hand.
        let mut rng = XorShift64::new(99);
        let want: Vec<bool> = (0..pkts.len()).map(|_| rng.below(4) == 0).collect();
        assert_eq!(b, want);
        assert!(passes("random:1").iter().all(|p| *p));
    }

    #[test]
    fn bad_arguments_name_the_argument() {
        assert_eq!(
            error(&SamplerClass, &bare(&["0"])),
            format!(
                "sampler: argument 1 (N) must be a whole number from 1 to {}, not \"0\" (or \
                 random:N, random:N:SEED)",
                u64::MAX
            )
        );
        assert!(error(&SamplerClass, &bare(&["x"])).contains("argument 1 (N)"));
        assert!(error(&SamplerClass, &bare(&["random:0"])).contains("argument 1 (N)"));
        assert!(error(&SamplerClass, &bare(&["random:3:z"])).contains("seed"));
        assert!(error(&SamplerClass, &[]).contains("missing"));
    }
}
