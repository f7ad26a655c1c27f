//! Gives the shared library the soname of Debian's libpcap, so that programs linked against
//! `libpcap.so.0.8` (Debian's tcpdump among them) load it through `LD_LIBRARY_PATH`.

fn main() {
    // Only the cdylib gets this argument; the rlib and the tests are unaffected.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libpcap.so.0.8");
    println!("cargo:rerun-if-changed=build.rs");
}
