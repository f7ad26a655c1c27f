//! Network namespaces for live tests and benchmarks: a namespace of its own with a veth pair, addresses from
//! 198.18.0.0/15 only, IPv6 off (so that the kernel sends nothing of its own), removed on drop —
//! also when the test fails.
//!
//! The pair is addressed 198.19.255.1/30 and .2/30: inside 198.18.0.0/15, and outside the
//! 198.18.0.0/16 half that the synthetic traffic mix uses, so that no test frame is addressed
//! to the kernel of the namespace (which would answer it).
//!
//! Needs root (or `CAP_SYS_ADMIN` and `CAP_NET_ADMIN`) and the `ip` command (iproute2).
//! Namespaces are named `nsift-<pid>-<n>`; ones left behind by a killed test run (whose process
//! is gone) are removed by the next [`Lab::new`].

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use netsift_capture::live::{Sender, SenderStats, XdpAttachMode, XdpPass};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A namespace with a veth pair `a` <-> `b` in it, both up: what is sent on `a` arrives on `b`.
pub struct Lab {
    /// The namespace's name.
    pub ns: String,
    /// The sending end.
    pub a: String,
    /// The receiving end.
    pub b: String,
    /// The pass-through XDP program of [`Lab::threaded_receive`], attached while the lab lives.
    xdp: Option<XdpPass>,
    /// The `/proc` directories of the receiving end's NAPI threads ([`Lab::threaded_receive`]).
    receive_threads: Vec<std::path::PathBuf>,
}

fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip` (install iproute2): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn remove_stale() {
    let Ok(list) = ip(&["netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix("nsift-") else {
            continue;
        };
        let pid: u32 = rest
            .split('-')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        if pid != 0 && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

impl Lab {
    /// Creates the namespace and the veth pair. The error says what failed (not root, no `ip`).
    pub fn new() -> Result<Lab, String> {
        remove_stale();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let ns = format!("nsift-{}-{n}", std::process::id());
        ip(&["netns", "add", &ns]).map_err(|e| format!("{e} (live tests need root)"))?;
        let lab = Lab {
            ns,
            a: "nsa".into(),
            b: "nsb".into(),
            xdp: None,
            receive_threads: Vec::new(),
        };
        lab.setup()?;
        Ok(lab)
    }

    fn setup(&self) -> Result<(), String> {
        // No IPv6: no router solicitations or neighbour discovery of the kernel's own. (Written
        // from a thread inside the namespace: /proc/sys/net is per namespace. A kernel without
        // IPv6 has nothing to turn off.)
        self.run(|| {
            for key in ["all", "default"] {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{key}/disable_ipv6"), "1");
            }
        });
        self.ip(&[
            "link", "add", &self.a, "type", "veth", "peer", "name", &self.b,
        ])?;
        self.ip(&["addr", "add", "198.19.255.1/30", "dev", &self.a])?;
        self.ip(&["addr", "add", "198.19.255.2/30", "dev", &self.b])?;
        for d in [&self.a, &self.b] {
            self.ip(&["link", "set", d, "up"])?;
        }
        Ok(())
    }

    /// Runs `ip -n NS ARGS…`.
    pub fn ip(&self, args: &[&str]) -> Result<String, String> {
        let mut v = vec!["-n", self.ns.as_str()];
        v.extend_from_slice(args);
        ip(&v)
    }

    /// Runs a command inside the namespace (`ip netns exec NS CMD…`) and returns its stdout.
    pub fn exec(&self, cmd: &[&str]) -> Result<String, String> {
        let mut v = vec!["netns", "exec", self.ns.as_str()];
        v.extend_from_slice(cmd);
        ip(&v)
    }

    /// A `Command` that runs `program` inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns, program]);
        c
    }

    /// Runs `f` on a thread that has entered the namespace; sockets it opens belong there.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.ns);
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
                // SAFETY: setns on a descriptor of a network namespace affects only this
                // thread, which ends with the scope.
                let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(
                    r,
                    0,
                    "setns into {path}: {}",
                    std::io::Error::last_os_error()
                );
                f()
            })
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
        })
    }

    /// Sends `frames` in order on the sending end `a`, at most `pps` per second, for 20 seconds
    /// at the most (live tests' bound on traffic); the sender's counts.
    pub fn send(&self, frames: &[Vec<u8>], pps: u64) -> SenderStats {
        self.run(|| {
            let mut tx = Sender::open(&self.a).expect("sender");
            let mut it = frames.iter().map(Vec::as_slice);
            tx.send_paced(
                &mut it,
                Some(pps),
                frames.len() as u64,
                std::time::Duration::from_secs(20),
            )
            .expect("send")
        })
    }

    /// Moves the receiving end's packet delivery into a kernel thread of its own: `b` gets a
    /// native pass-through XDP program ([`XdpPass`]: veth then queues each frame `a` sends to
    /// `b`'s NAPI instead of delivering it in the sender's context, as long as `a` sends no TSO
    /// frames) and threaded NAPI (`/sys/class/net/B/threaded`). Every frame is then received —
    /// taps (the capture sockets, their filters and copies), the IP layer — by the thread
    /// `napi/B-N`, whose CPU time [`Lab::receive_seconds`] reads exactly, apart from the
    /// sender's own work. GRO stays off: frames arrive as sent, unmerged and in order.
    pub fn threaded_receive(&mut self) -> Result<(), String> {
        let (a, b) = (self.a.clone(), self.b.clone());
        let pass = self.run(move || -> Result<XdpPass, String> {
            ethtool_set(&a, ETHTOOL_STSO, 0)?;
            XdpPass::attach(&b, XdpAttachMode::Native).map_err(|e| e.to_string())
        })?;
        self.xdp = Some(pass);
        // Other labs' receiving ends have the same name: ours are the threads that appear.
        let before = self.napi_threads();
        // sysfs shows the namespace's devices only as `ip netns exec` mounts it.
        self.exec(&[
            "sh",
            "-c",
            &format!("echo 1 > /sys/class/net/{}/threaded", self.b),
        ])
        .map_err(|e| format!("threaded NAPI on {}: {e}", self.b))?;
        self.receive_threads = self
            .napi_threads()
            .into_iter()
            .filter(|t| !before.contains(t))
            .collect();
        if self.receive_threads.is_empty() {
            return Err(format!(
                "threaded NAPI on {}: no kernel thread napi/{}-N appeared",
                self.b, self.b
            ));
        }
        Ok(())
    }

    /// The `/proc` directories of the kernel threads named `napi/B-N`.
    fn napi_threads(&self) -> Vec<std::path::PathBuf> {
        let prefix = format!("napi/{}-", self.b);
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter(|e| {
                std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.starts_with(&prefix))
            })
            .map(|e| e.path())
            .collect()
    }

    /// CPU seconds the receiving end's NAPI threads have run so far, exactly
    /// (`/proc/PID/schedstat`); see [`Lab::threaded_receive`] (0 before it).
    pub fn receive_seconds(&self) -> f64 {
        schedstat_seconds(&self.receive_threads)
    }

    /// `(rx_packets, rx_dropped, tx_packets, tx_dropped)` of device `dev`.
    pub fn counters(&self, dev: &str) -> Result<[u64; 4], String> {
        let out = self.ip(&["-s", "link", "show", "dev", dev])?;
        // Lines: "RX: bytes packets errors dropped ..." then the numbers; same for TX.
        let lines: Vec<&str> = out.lines().map(str::trim).collect();
        let nums = |i: usize| -> Vec<u64> {
            lines
                .get(i + 1)
                .map(|l| {
                    l.split_whitespace()
                        .filter_map(|x| x.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        let rx = lines
            .iter()
            .position(|l| l.starts_with("RX:"))
            .ok_or("no RX line")?;
        let tx = lines
            .iter()
            .position(|l| l.starts_with("TX:"))
            .ok_or("no TX line")?;
        let (r, t) = (nums(rx), nums(tx));
        if r.len() < 4 || t.len() < 4 {
            return Err(format!("unexpected `ip -s link` output: {out}"));
        }
        Ok([r[1], r[3], t[1], t[3]])
    }
}

/// CPU seconds the tasks whose `/proc` directories are `dirs` have run so far, exactly: the
/// sum of the first field of their `schedstat` (nanoseconds). A task that has gone counts 0.
pub fn schedstat_seconds<P: AsRef<std::path::Path>>(dirs: impl IntoIterator<Item = P>) -> f64 {
    dirs.into_iter()
        .filter_map(|p| std::fs::read_to_string(p.as_ref().join("schedstat")).ok())
        .filter_map(|t| t.split_whitespace().next()?.parse::<u64>().ok())
        .sum::<u64>() as f64
        * 1e-9
}

/// `ETHTOOL_STSO`: set TCP segmentation offload (all its kinds).
const ETHTOOL_STSO: u32 = 0x1f;

/// The legacy `SIOCETHTOOL` set-one-feature request: `cmd` with value `on` on device `dev` of
/// the calling thread's namespace.
fn ethtool_set(dev: &str, cmd: u32, on: u32) -> Result<(), String> {
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    let mut value = EthtoolValue { cmd, data: on };
    // SAFETY: ifreq is plain old data; zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if dev.len() >= ifr.ifr_name.len() {
        return Err(format!("device name {dev:?} is too long"));
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(dev.bytes()) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // SAFETY: a plain datagram socket, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `ifr` names the device and points at `value`, both alive for the call.
    let r = unsafe { libc::ioctl(fd, libc::SIOCETHTOOL, &mut ifr) };
    let err = std::io::Error::last_os_error();
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    if r < 0 {
        return Err(format!("ethtool request {cmd:#x} on {dev}: {err}"));
    }
    Ok(())
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Removing the namespace removes the veth pair in it.
        let _ = ip(&["netns", "del", &self.ns]);
    }
}
