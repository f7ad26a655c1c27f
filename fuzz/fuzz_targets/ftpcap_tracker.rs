#![no_main]
//! Fuzz target `ftpcap_tracker`: see `netsift_testkit::fuzz::ftpcap_tracker`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::ftpcap_tracker(data));
