#![no_main]
//! Fuzz target `lang_vs_libpcap`: see `netsift_testkit::fuzz::lang_vs_libpcap`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::lang_vs_libpcap(data));
