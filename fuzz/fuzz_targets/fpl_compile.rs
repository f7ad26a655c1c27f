#![no_main]
//! Fuzz target `fpl_compile`: see `netsift_testkit::fuzz::fpl_compile`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::fpl_compile(data));
