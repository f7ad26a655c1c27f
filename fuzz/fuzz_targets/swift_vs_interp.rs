#![no_main]
//! Fuzz target `swift_vs_interp`: see `netsift_testkit::fuzz::swift_vs_interp`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::swift_vs_interp(data));
