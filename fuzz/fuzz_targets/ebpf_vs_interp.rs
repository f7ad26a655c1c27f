#![no_main]
//! Fuzz target `ebpf_vs_interp`: see `netsift_testkit::fuzz::ebpf_vs_interp` (needs root).
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::ebpf_vs_interp(data));
