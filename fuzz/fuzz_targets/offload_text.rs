#![no_main]
//! Fuzz target `offload_text`: see `netsift_testkit::fuzz::offload_text`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::offload_text(data));
