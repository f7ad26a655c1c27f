//! Gives the shared library its soname, so that programs linked with `-lnetsift_client` record
//! `libnetsift_client.so.0` and keep working across compatible releases.

fn main() {
    // Only the cdylib gets this argument; the rlib and the tests are unaffected.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnetsift_client.so.0");
    println!("cargo:rerun-if-changed=build.rs");
}
