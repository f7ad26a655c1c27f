//! A C program linked against `libnetsift_client.so` reads a flow from a netsiftd running in a
//! thread of the test: it must see exactly the packets the filter accepts (count, bytes and a
//! hash of the bytes, taken after the whole batch was read and before it was released), the
//! filter's MBuf, and the daemon's caret error for a bad graph.

use std::path::{Path, PathBuf};
use std::process::Command;

use netsift_client::{netsift_options, netsift_packet, netsift_stats};
use netsift_daemon::server::{Config, Daemon};

/// A daemon on a thread of the test.
struct Running {
    _daemon: netsift_daemon::Background,
    path: PathBuf,
}

impl Running {
    fn start(name: &str) -> Running {
        let path = std::env::temp_dir().join(format!(
            "netsift-client-c-{name}-{}.sock",
            std::process::id()
        ));
        Running {
            _daemon: Daemon::bind(Config::new(&path)).expect("bind").spawn(),
            path,
        }
    }
}

/// The cdylib cargo built for this test run.
///
/// `cargo test` compiles the library's `cdylib` together with its `rlib` into `deps/` (next to
/// this test executable) but does not copy it up to the profile directory (`target/debug`),
/// where `cargo build` puts it: the copy there may be stale, so `deps/` comes first.
fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let deps = exe.parent().expect("the test executable's directory");
    let candidates = [
        Some(deps.join("libnetsift_client.so")),
        deps.parent().map(|p| p.join("libnetsift_client.so")),
    ];
    candidates
        .iter()
        .flatten()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "libnetsift_client.so was not found next to {} (looked in {:?}); \
                 build it with `cargo build -p netsift-client-c`",
                exe.display(),
                candidates
            )
        })
}

/// A fresh directory holding the library under its link name and its soname, and the program.
fn work_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("netsift-client-c-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let so = built_library();
    for name in ["libnetsift_client.so", "libnetsift_client.so.0"] {
        std::os::unix::fs::symlink(&so, dir.join(name)).unwrap();
    }
    dir
}

/// Compile `tests/c/count.c` in `dir` (C99, every warning an error).
fn compile(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join("count");
    let out = match Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg(root.join("tests/c/count.c"))
        .arg("-L")
        .arg(dir)
        .args(["-lnetsift_client", "-o"])
        .arg(&exe)
        .output()
    {
        Ok(out) => out,
        Err(e) => panic!("this test needs a C compiler as `cc` (install gcc or clang): {e}"),
    };
    assert!(
        out.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// FNV-1a, as count.c computes it.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// The packets of `mixed_traffic(seed, n)` an expression accepts (as the daemon's own tests
/// compute them).
fn expected(seed: u64, n: usize, expr: &str) -> Vec<Vec<u8>> {
    netsift_testkit::reference::mixed_accepted(seed, n, expr)
}

#[test]
fn a_c_program_reads_a_flow() {
    let d = Running::start("count");
    let dir = work_dir();
    let exe = compile(&dir);
    let out = Command::new(&exe)
        .arg(&d.path)
        .env("LD_LIBRARY_PATH", &dir)
        .output()
        .expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "count failed ({}):\n{stdout}\n{stderr}",
        out.status
    );

    // Slots are 2048 bytes by default: longer packets would be cut.
    let want = expected(11, 3000, "tcp");
    assert!(!want.is_empty());
    let caplens: usize = want.iter().map(|p| p.len().min(2048)).sum();
    let hash = want
        .iter()
        .fold(0xcbf29ce484222325, |h, p| fnv(h, &p[..p.len().min(2048)]));
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some(concat!(
            "version=netsift_client ",
            env!("CARGO_PKG_VERSION")
        ))
    );
    let sizes = format!(
        "sizes={},{},{}",
        size_of::<netsift_options>(),
        size_of::<netsift_packet>(),
        size_of::<netsift_stats>()
    );
    assert_eq!(
        lines.next(),
        Some(sizes.as_str()),
        "the C and Rust layouts differ"
    );
    let n = want.len();
    assert_eq!(
        lines.next(),
        Some(
            format!(
                "count={n} caplen_sum={caplens} hash={hash:016x} mbuf={n} delivered={n} linktype=1"
            )
            .as_str()
        )
    );
    assert_eq!(lines.next(), Some("bad graph error:"));
    let error: Vec<&str> = lines.collect();
    assert!(
        error
            .iter()
            .any(|l| l.trim() == "^" || l.trim_start().starts_with('^')),
        "no caret line in the error:\n{}",
        error.join("\n")
    );
    assert!(
        error.iter().any(|l| l.contains("tcp port")),
        "the error does not show the expression:\n{}",
        error.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_header_is_valid_cxx() {
    let header = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/netsift_client.h");
    let out = match Command::new("c++")
        .args(["-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-x", "c++"])
        .arg(&header)
        .output()
    {
        Ok(out) => out,
        Err(e) => panic!("this test needs a C++ compiler as `c++` (install g++ or clang): {e}"),
    };
    assert!(
        out.status.success(),
        "c++ rejected the header:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
