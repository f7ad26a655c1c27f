#![no_main]
//! Fuzz target `classbench_parse`: see `netsift_testkit::fuzz::classbench_parse`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::classbench_parse(data));
