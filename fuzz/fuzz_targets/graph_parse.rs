#![no_main]
//! Fuzz target `graph_parse`: see `netsift_testkit::fuzz::graph_parse`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::graph_parse(data));
