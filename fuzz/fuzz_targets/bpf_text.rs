#![no_main]
//! Fuzz target `bpf_text`: see `netsift_testkit::fuzz::bpf_text`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::bpf_text(data));
