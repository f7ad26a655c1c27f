#![no_main]
//! Fuzz target `daemon_proto`: see `netsift_testkit::fuzz::daemon_proto`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::daemon_proto(data));
