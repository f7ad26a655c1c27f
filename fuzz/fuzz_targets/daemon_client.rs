#![no_main]
//! Fuzz target `daemon_client`: see `netsift_testkit::fuzz::daemon_client`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::daemon_client(data));
