//! Link libpcap, the reference implementation netsift is tested against (feature `libpcap`).
fn main() {
    if std::env::var_os("CARGO_FEATURE_LIBPCAP").is_some() {
        println!("cargo:rustc-link-lib=pcap");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
