#![no_main]
//! Fuzz target `flow_parse`: see `netsift_testkit::fuzz::flow_parse`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::flow_parse(data));
