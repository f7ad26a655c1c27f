//! Test support shared by netsift's crates; not part of the product.
//!
//! The feature `libpcap` (on by default) links libpcap for the oracle and enables what uses it
//! ([`oracle`], [`corpus`], [`fuzz`], `exprgen::corpus_and_random`); without it (as
//! `netsift-bench` takes testkit) nothing links libpcap.
//!
//! - [`oracle`]: libpcap 1.10 through a few `extern "C"` declarations — `pcap_compile` and
//!   `bpf_filter` are the reference for every verdict netsift gives, and `pcap_open_offline` the
//!   reference reader of capture files.
//! - [`corpus`]: libpcap's filter test suite against the shared captures, by link type.
//! - [`data`]: the shared test data (`../shared/data` beside the repository, or
//!   `$NETSIFT_SHARED_DATA`): captures and libpcap's filter test suite. Tests that need it fail
//!   with a message saying where it was looked for; they never skip silently.
//! - [`fuzz`]: the bodies of the fuzz targets, replayable from ordinary tests.
//! - [`exprgen`]: random filter expressions for property tests.
//! - [`build`]: release builds of other packages, for tests that run them as processes.
//! - [`rng`]: a deterministic pseudo-random generator for property-style tests.
//! - [`netns`]: a network namespace of the test's own with a veth pair (live tests and the live
//!   benchmark suites of `netsift-bench`).
//! - [`hitables`]: HiTables rule sets in the kernel (iptables-nft and nft in a namespace): address
//!   compression, frames, loading, delivery and the kernel's counters against the evaluator's
//!   prediction — for the equivalence test and `netsift bench hitables`.
//! - [`reference`](mod@reference): reference answers of the live tests (tcpdump reading a file; the generated
//!   mix filtered).

#![deny(missing_docs)]

pub mod build;
#[cfg(feature = "libpcap")]
pub mod corpus;
pub mod daemon;
pub mod data;
pub mod exprgen;
#[cfg(feature = "libpcap")]
pub mod fuzz;
#[cfg(target_os = "linux")]
pub mod hitables;
#[cfg(target_os = "linux")]
pub mod netns;
#[cfg(feature = "libpcap")]
pub mod oracle;
pub mod progen;
pub mod reference;
pub mod rng;
