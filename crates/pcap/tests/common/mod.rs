//! What the tests that run Debian's tcpdump share: netsift's library under Debian's soname in a
//! directory of its own, and tcpdump itself.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A directory holding `libpcap.so.0.8`, a copy of this crate's release cdylib.
///
/// The library is (re)built with `cargo build --release -p netsift-pcap`, which costs nothing
/// when it is up to date (and only this crate's few files otherwise: its dependencies are shared
/// with the rest of the workspace's release build).
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let release = netsift_testkit::build::release(&["netsift-pcap"]);
        let so = release.join("libpcap.so");
        assert!(so.is_file(), "{} was not built", so.display());
        let target = release.parent().expect("target/release").to_path_buf();
        // One directory under target/, replaced atomically (a rename), so that runs leave
        // nothing behind and a running tcpdump keeps the file it mapped.
        let dir = target.join("netsift-libpcap-test");
        std::fs::create_dir_all(&dir).unwrap();
        let tmp = dir.join(format!("libpcap.so.0.8.{}", std::process::id()));
        std::fs::copy(&so, &tmp).unwrap();
        std::fs::rename(&tmp, dir.join("libpcap.so.0.8")).unwrap();
        dir
    })
}

/// Makes sure Debian's tcpdump is installed (installing it with apt-get if needed) and that it
/// loads netsift's library from [`lib_dir`].
pub fn tcpdump() -> &'static str {
    static OK: OnceLock<()> = OnceLock::new();
    OK.get_or_init(|| {
        if Command::new("tcpdump").arg("--version").output().is_err() {
            let st = Command::new("apt-get")
                .args(["install", "-y", "tcpdump"])
                .status()
                .expect("run apt-get");
            assert!(
                st.success(),
                "tcpdump is missing and apt-get install -y tcpdump failed"
            );
        }
        let out = Command::new("tcpdump")
            .arg("--version")
            .env("LD_LIBRARY_PATH", lib_dir())
            .output()
            .expect("tcpdump --version");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            text.contains("netsift libpcap"),
            "tcpdump did not load netsift's library from {}: {text}",
            lib_dir().display()
        );
    });
    "tcpdump"
}

/// Test traffic between 198.18.x.y addresses: `n` UDP frames to port 7777 (`payload` bytes,
/// source hosts cycling over `hosts`), each followed by a TCP SYN; every fifth also a
/// VLAN-tagged UDP frame to 7777 (which `udp port 7777` must reject, as in a file) and an ICMP
/// echo request, and with `dns` a UDP frame to port 53.
pub fn frames(n: u16, hosts: u16, payload: usize, dns: bool) -> Vec<Vec<u8>> {
    use netsift_capture::generate::FrameBuilder;
    let mut v = Vec::new();
    for i in 0..n {
        let host = (i % hosts) as u8 + 1;
        v.push(
            FrameBuilder::new()
                .ipv4([198, 18, 1, host], [198, 18, 2, 2])
                .udp(4000 + i, 7777)
                .payload(&vec![i as u8; payload])
                .build(),
        );
        v.push(
            FrameBuilder::new()
                .ipv4([198, 18, 3, host], [198, 18, 4, 4])
                .tcp(5000 + i, 80, 0x02)
                .build(),
        );
        if i % 5 == 0 {
            v.push(
                FrameBuilder::new()
                    .ipv4([198, 18, 5, 5], [198, 18, 6, 6])
                    .udp(4000 + i, 7777)
                    .vlan(9)
                    .build(),
            );
            v.push(
                FrameBuilder::new()
                    .ipv4([198, 18, 5, 5], [198, 18, 6, 6])
                    .icmp_echo_request(1, i)
                    .build(),
            );
            if dns {
                v.push(
                    FrameBuilder::new()
                        .ipv4([198, 18, 7, 7], [198, 18, 8, 8])
                        .udp(7000 + i, 53)
                        .build(),
                );
            }
        }
    }
    v
}

/// `netsiftd`, built by the netsift-daemon package next to this test's profile directory
/// (`target/<profile>/netsiftd`; the test executable is `target/<profile>/deps/…`).
pub fn netsiftd() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/<test>");
    let bin = profile.join("netsiftd");
    assert!(
        bin.is_file(),
        "{} is missing: build it first with `cargo build -p netsift-daemon` (same profile as \
         the tests)",
        bin.display()
    );
    bin
}

/// A child process killed (by its id) and reaped when dropped, also when the test fails; its
/// standard output and error collected by threads.
pub struct Proc {
    child: Child,
    stderr: Arc<Mutex<String>>,
    stdout: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

impl Proc {
    /// Starts `cmd`; `ready` gets a message when a line of its standard error or output
    /// contains `marker`.
    pub fn spawn(mut cmd: Command, marker: &'static str, ready: mpsc::Sender<()>) -> Proc {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a process in the namespace");
        let err = child.stderr.take().unwrap();
        let out = child.stdout.take().unwrap();
        let ready2 = ready.clone();
        let (stderr, stdout) = (
            Arc::new(Mutex::new(String::new())),
            Arc::new(Mutex::new(String::new())),
        );
        let (e, o) = (Arc::clone(&stderr), Arc::clone(&stdout));
        let readers = vec![
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines() {
                    let line = line.unwrap_or_default();
                    let mut s = e.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                    drop(s);
                    if line.contains(marker) {
                        let _ = ready.send(());
                    }
                }
            }),
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let line = line.unwrap_or_default();
                    let mut s = o.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                    drop(s);
                    if line.contains(marker) {
                        let _ = ready2.send(());
                    }
                }
            }),
        ];
        Proc {
            child,
            stderr,
            stdout,
            readers,
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    fn join_readers(&mut self) {
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }

    /// Waits up to `limit` for the process to exit (and its output to end).
    pub fn wait(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                self.join_readers();
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.join_readers();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `netsiftd --socket SOCKET -v` in `lab`'s namespace and waits until it listens.
pub fn start_netsiftd(lab: &netsift_testkit::netns::Lab, socket: &Path) -> Proc {
    let bin = netsiftd();
    let _ = std::fs::remove_file(socket);
    let mut cmd = lab.command(bin.to_str().expect("a UTF-8 path"));
    cmd.arg("--socket").arg(socket).arg("-v");
    let (tx, rx) = mpsc::channel();
    let mut daemon = Proc::spawn(cmd, "listening on", tx);
    if rx.recv_timeout(Duration::from_secs(20)).is_err() {
        daemon.kill();
        panic!("netsiftd did not start: {}", daemon.stderr());
    }
    daemon
}

/// Installs `bin` with apt-get (package `pkg`) if missing (after `apt-get update` if the
/// first try fails).
pub fn ensure(bin: &str, pkg: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return;
    }
    for update in [false, true] {
        if update {
            let _ = Command::new("apt-get").arg("update").status();
        }
        let ok = Command::new("apt-get")
            .args(["install", "-y", pkg])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
    }
    panic!("{bin} is missing and apt-get install -y {pkg} failed");
}
