//! Test support shared by netsift's crates; not part of the product.
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
//! - [`reference`](mod@reference): reference answers of the live tests (tcpdump reading a file; the generated
//!   mix filtered).

#![deny(missing_docs)]

pub mod build;
pub mod corpus;
pub mod data;
pub mod exprgen;
pub mod fuzz;
pub use netsift_bench::netns;
pub mod oracle;
pub mod progen;
pub mod reference;
pub mod rng;
