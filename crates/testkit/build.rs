//! Link libpcap, the reference implementation netsift is tested against.
fn main() {
    println!("cargo:rustc-link-lib=pcap");
    println!("cargo:rerun-if-changed=build.rs");
}
