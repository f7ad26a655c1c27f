#![no_main]
//! Fuzz target `offload_compile`: see `netsift_testkit::fuzz::offload_compile`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::offload_compile(data));
