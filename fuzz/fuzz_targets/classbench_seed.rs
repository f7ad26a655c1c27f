#![no_main]
//! Fuzz target `classbench_seed`: see `netsift_testkit::fuzz::classbench_seed`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::classbench_seed(data));
