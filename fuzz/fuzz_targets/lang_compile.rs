#![no_main]
//! Fuzz target `lang_compile`: see `netsift_testkit::fuzz::lang_compile`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::lang_compile(data));
