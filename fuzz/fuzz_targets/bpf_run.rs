#![no_main]
//! Fuzz target `bpf_run`: see `netsift_testkit::fuzz::bpf_run`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::bpf_run(data));
