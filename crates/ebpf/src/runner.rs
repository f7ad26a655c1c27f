//! A classic filter run by the kernel, packet by packet, through `BPF_PROG_TEST_RUN`.
//!
//! The classic program is translated to SCHED_CLS returning the classic value unchanged
//! (`Return::Classic`) with `len` read from `__sk_buff.wire_len` (`Len::Wire`), loaded once,
//! and run on every packet; the result is the kernel's. That is exactly libpcap's result (snap
//! length included) on every packet the test harness takes; the others (see [`Fallback`]) are
//! run by netsift's interpreter, which is libpcap's `bpf_filter`, and counted. Capture files
//! have no ancillary data, so libpcap's loads of it fail (reject) here too.

use netsift_bpf::{Filter, Program as Classic, Rules};

use crate::compile::{self, Ancillary, Len, Return};
use crate::error::{Error, ErrorKind, Result};
use crate::prog::{LoadOptions, LoadedProgram, ProgType, SkbContext, TestRun};

/// Why a packet was run by the interpreter instead of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// Shorter than an Ethernet header (14 bytes).
    Short,
    /// An IPv4 frame shorter than 34 bytes or an IPv6 frame shorter than 54.
    NoNetworkHeader,
    /// Longer than the 3,712 bytes a SCHED_CLS test run takes.
    Long,
    /// A wire length the context cannot carry (below the captured length, above 65,536).
    WireLen,
}

impl Fallback {
    /// Every reason, in report order.
    pub const ALL: [Fallback; 4] = [
        Fallback::Short,
        Fallback::NoNetworkHeader,
        Fallback::Long,
        Fallback::WireLen,
    ];

    /// The reason in words.
    pub fn why(self) -> &'static str {
        match self {
            Fallback::Short => "shorter than 14 bytes",
            Fallback::NoNetworkHeader => "IPv4 < 34 or IPv6 < 54 bytes",
            Fallback::Long => "longer than 3,712 bytes",
            Fallback::WireLen => "wire length below the captured length or above 65,536",
        }
    }

    /// Whether (and why not) a SCHED_CLS test run takes `data` with wire length `wire`.
    pub fn of(data: &[u8], wire: u32) -> Option<Fallback> {
        let n = data.len();
        if n < 14 {
            Some(Fallback::Short)
        } else if n > 3712 {
            Some(Fallback::Long)
        } else if !ProgType::SchedCls.test_run_takes(data) {
            Some(Fallback::NoNetworkHeader)
        } else if (wire as usize) < n || wire > 65_536 {
            Some(Fallback::WireLen)
        } else {
            None
        }
    }
}

/// A classic filter for Ethernet frames run by the kernel through `BPF_PROG_TEST_RUN`, with
/// the interpreter for the packets the test harness does not take.
pub struct KernelFilter {
    prog: LoadedProgram,
    interp: Filter,
    fallbacks: [u64; 4],
    kernel_runs: u64,
}

impl std::fmt::Debug for KernelFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelFilter")
            .field("kernel_runs", &self.kernel_runs)
            .field("fallbacks", &self.fallbacks)
            .finish_non_exhaustive()
    }
}

impl KernelFilter {
    /// Translate and load `classic` (a program for Ethernet frames, libpcap's rules); the
    /// loaded program is named `name`. Errors say what to do (root is needed to load).
    pub fn new(classic: &Classic, name: &str) -> Result<KernelFilter> {
        let interp = Filter::new(classic.clone(), Rules::Libpcap).map_err(|e| {
            Error::new(
                ErrorKind::InvalidProgram,
                format!("the classic program is not valid: {e}"),
            )
        })?;
        let mut opts = compile::Options::new(ProgType::SchedCls);
        opts.result = Return::Classic;
        opts.len = Len::Wire;
        opts.ancillary = Ancillary::Absent;
        let prog = compile::from_classic(classic, &opts)?.load(&LoadOptions {
            name: name.into(),
            ..LoadOptions::default()
        })?;
        Ok(KernelFilter {
            prog,
            interp,
            fallbacks: [0; 4],
            kernel_runs: 0,
        })
    }

    /// The filter's result on one packet: the kernel's when it takes the packet.
    pub fn run(&mut self, data: &[u8], wire: u32) -> Result<u32> {
        if let Some(f) = Fallback::of(data, wire) {
            self.fallbacks[f as usize] += 1;
            return Ok(self.interp.run(data, wire));
        }
        let ctx = SkbContext {
            wire_len: wire,
            ..SkbContext::default()
        }
        .to_bytes();
        self.kernel_runs += 1;
        Ok(self
            .prog
            .test_run(&TestRun {
                data,
                repeat: 1,
                ctx: Some(&ctx),
            })?
            .retval)
    }

    /// Packets the kernel ran.
    pub fn kernel_runs(&self) -> u64 {
        self.kernel_runs
    }

    /// Packets the interpreter ran, by reason (in [`Fallback::ALL`] order).
    pub fn fallbacks(&self) -> [u64; 4] {
        self.fallbacks
    }

    /// One line for stderr when some packets were not run by the kernel, e.g.
    /// `ebpf: 3 packets run by the interpreter, 10 by the kernel (shorter than 14 bytes: 3)`.
    pub fn report(&self) -> Option<String> {
        let total: u64 = self.fallbacks.iter().sum();
        if total == 0 {
            return None;
        }
        let why: Vec<String> = Fallback::ALL
            .iter()
            .filter(|&&f| self.fallbacks[f as usize] > 0)
            .map(|&f| format!("{}: {}", f.why(), self.fallbacks[f as usize]))
            .collect();
        Some(format!(
            "ebpf: {total} packet{} run by the interpreter, {} by the kernel ({})",
            if total == 1 { "" } else { "s" },
            self.kernel_runs,
            why.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_reasons() {
        let mut ip = vec![0u8; 60];
        ip[12..14].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(Fallback::of(&ip, 60), None);
        assert_eq!(Fallback::of(&ip[..13], 13), Some(Fallback::Short));
        assert_eq!(Fallback::of(&ip[..20], 20), Some(Fallback::NoNetworkHeader));
        assert_eq!(Fallback::of(&vec![0; 3713], 3713), Some(Fallback::Long));
        assert_eq!(Fallback::of(&ip, 59), Some(Fallback::WireLen));
        assert_eq!(Fallback::of(&ip, 70_000), Some(Fallback::WireLen));
        assert_eq!(Fallback::of(&ip, 65_536), None);
    }
}
