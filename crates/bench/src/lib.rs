//! Benchmark suites for netsift, each measured against a baseline in the same run.
//!
//! The baseline is libpcap, loaded at run time with `dlopen` ([`libpcap::Libpcap::load`]) so that
//! netsift itself never links it: `netsift bench` says so when libpcap is missing instead of
//! failing to start. The same workloads feed the criterion benchmarks in `benches/`.
//!
//! - [`workload`]: the packets (a reproducible mix shaped like a campus gateway trace, cut to a
//!   snap length of 96 bytes like the Swift paper's 75-byte trace plus room for IPv6) and the
//!   filters (the BPF issue's list, including the Swift paper's Table 5 filter 6).
//! - [`suite`]: the `netsift bench` suites, printing one table of ratios per suite.
//! - [`ftp`]: the Swift paper's FTP passive-mode workload (data connections announced on FTP
//!   control connections, in background traffic).
//! - [`ftpcap`]: the FTPCap replay experiment on it (the Swift paper's Figs. 7-8).
//! - [`update`]: Swift's update latency against recompiling (the Swift paper's Figs. 5-6).
//! - [`handwritten`]: the Swift paper's Table 5 filters written by hand (the JIT's target).
//! - [`capture`]: live capture on a veth pair (`netsift_testkit::netns`) against tcpdump.
//! - [`flow`]: FFPF flows with shared prefixes against N libpcap-style readers.
//! - [`ebpf`]: filters in the kernel: per-packet time under `BPF_PROG_TEST_RUN` and Swift
//!   updates through maps against reloading.
//! - [`hitables`]: HiTables rule sets in the kernel (iptables-nft and nft in a namespace): the
//!   throughput suite (the HiTables paper's Fig. 5b), on the rig of `netsift_testkit::hitables`.

#![deny(missing_docs)]

#[cfg(target_os = "linux")]
pub mod capture;
pub mod classify;
#[cfg(target_os = "linux")]
pub mod daemon;
pub mod dropin;
#[cfg(target_os = "linux")]
pub mod ebpf;
pub mod flow;
pub mod fpl;
pub mod ftp;
pub mod ftpcap;
pub mod handwritten;
#[cfg(target_os = "linux")]
pub mod hitables;
pub mod libpcap;
#[cfg(target_os = "linux")]
pub mod offload;
pub mod suite;
pub mod swift_table5;
pub mod update;
pub mod workload;
