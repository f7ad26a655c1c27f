//! Release builds of the workspace's packages for tests that run their binaries or libraries
//! as separate processes.
//!
//! `cargo test` builds the binaries of the package it tests, but not those of other packages,
//! and does not refresh a cdylib's copy in the target directory: a stale `libpcap.so` there
//! would quietly capture without the daemon. [`release`] runs `cargo build --release` for the
//! packages (nothing to do when they are up to date).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Build `packages` with `cargo build --release --quiet` in the workspace and return the
/// release directory (`$CARGO_TARGET_DIR/release`, else `target/release`).
///
/// # Panics
/// If cargo cannot run or the build fails — the test cannot go on without the artefacts.
pub fn release(packages: &[&str]) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut args = vec!["build", "--release", "--quiet"];
    for p in packages {
        args.extend(["-p", p]);
    }
    let status = Command::new(cargo)
        .current_dir(&root)
        .args(&args)
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build {packages:?}: {e}"));
    assert!(status.success(), "cargo {} failed", args.join(" "));
    target.join("release")
}
