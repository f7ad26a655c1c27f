#![no_main]
//! Fuzz target `iptables_hitables`: see `netsift_testkit::fuzz::iptables_hitables`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netsift_testkit::fuzz::iptables_hitables(data));
