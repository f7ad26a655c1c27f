#![no_main]
//! Fuzz target `capture_read`: see `netsift_testkit::fuzz::capture_read`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::capture_read(data));
