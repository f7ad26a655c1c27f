//! netsiftd against an ordinary user who tries to break it. The test creates the user, starts
//! `netsiftd` (as root, in a network namespace with a veth pair, its socket open to everyone:
//! `--mode 666`) and runs each attack in a child process with the user's ids — this test binary
//! itself, running its ignored `attack` entry. After each attack a root "witness" client opens
//! a flow and must get exactly its packets: the daemon is alive and serving.
//!
//! What is tried (issue 27): truncating every shared file (the daemon died of SIGBUS), making
//! the read-only PBuf and IBuf writable, writing garbage into the control page and MBufs,
//! reading root's files through `file`, `nic`, `classify`, `fpl "@…"` and `pcap`, blocking the
//! daemon on a FIFO or `/dev/zero`, loading kernel programs, capturing on an interface the
//! policy does not name, FPL filters costlier than the daemon allows, flooding requests without
//! reading replies, opening connections
//! without end, and asking for more memory than the limit. Then: descriptors running out in
//! the daemon, and packets lost while the daemon was stopped, which must be counted.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use netsift_daemon::client::{Client, ClientError, OpenOptions};
use netsift_testkit::netns::Lab;

const NETSIFTD: &str = env!("CARGO_BIN_EXE_netsiftd");

/// An unprivileged user made for the test, removed (with its group) when dropped.
struct User {
    name: String,
    uid: u32,
    gid: u32,
}

impl User {
    fn create() -> User {
        let name = format!("nsh{}", std::process::id() % 10_000_000);
        let _ = Command::new("userdel").arg(&name).output();
        let out = Command::new("useradd")
            .args(["--system", "--no-create-home", "--user-group"])
            .args(["--shell", "/usr/sbin/nologin", &name])
            .output()
            .expect("run useradd");
        assert!(
            out.status.success(),
            "useradd {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = |flag: &str| -> u32 {
            let o = Command::new("id").args([flag, &name]).output().expect("id");
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse()
                .expect("an id")
        };
        let (uid, gid) = (id("-u"), id("-g"));
        assert_ne!(uid, 0);
        User { name, uid, gid }
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
        let _ = Command::new("groupdel").arg(&self.name).output();
    }
}

/// A directory everybody may enter, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("netsift-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `netsiftd` running in the lab's namespace; killed when dropped.
struct Netsiftd {
    child: Child,
    socket: PathBuf,
}

impl Netsiftd {
    fn start(lab: &Lab, socket: &Path, args: &[&str], nofile: Option<u64>) -> Netsiftd {
        let mut cmd = lab.command(NETSIFTD);
        cmd.arg("--socket").arg(socket).args(args);
        if let Some(n) = nofile {
            // SAFETY: setrlimit is async-signal-safe and changes only the child.
            unsafe {
                cmd.pre_exec(move || {
                    let l = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().expect("start netsiftd");
        let d = Netsiftd {
            child,
            socket: socket.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Client::connect(socket).is_err() {
            assert!(Instant::now() < deadline, "netsiftd did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether it still runs.
    fn alive(&mut self) -> bool {
        self.child.try_wait().expect("wait").is_none()
    }

    /// Its resident memory in bytes (`VmRSS`).
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    }

    /// The bytes of the memory files it holds open (each counted once).
    fn memfd_bytes(&self) -> u64 {
        let mut seen = std::collections::HashSet::new();
        let mut total = 0;
        let dir = format!("/proc/{}/fd", self.pid());
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let is_memfd = std::fs::read_link(e.path())
                .is_ok_and(|l| l.to_string_lossy().starts_with("/memfd:netsift"));
            if let (true, Ok(m)) = (is_memfd, std::fs::metadata(e.path())) {
                use std::os::unix::fs::MetadataExt;
                if seen.insert(m.ino()) {
                    total += m.len();
                }
            }
        }
        total
    }
}

impl Drop for Netsiftd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The command that runs attack `name` as `user`: this binary's ignored `attack` entry, with
/// the user's ids (and no supplementary groups) and the attack's environment.
fn attack_command(user: &User, name: &str, socket: &Path, extra: &[(&str, &str)]) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut c = Command::new(exe);
    c.args([
        "attack",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env("NETSIFT_ATTACK", name)
    .env("NETSIFT_SOCKET", socket)
    .uid(user.uid)
    .gid(user.gid);
    for (k, v) in extra {
        c.env(k, v);
    }
    c
}

/// Runs attack `name` as `user`; its output.
fn as_user(user: &User, name: &str, socket: &Path, extra: &[(&str, &str)]) -> Output {
    let out = attack_command(user, name, socket, extra)
        .output()
        .expect("run the attack");
    eprintln!(
        "attack {name} as {}: {}\n{}",
        user.name,
        out.status,
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("ATTACK"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    out
}

/// Runs attack `name` as `user` and, while it holds what it got (it waits for its standard
/// input to close), measures with `measure`.
fn holding<T>(
    user: &User,
    name: &str,
    socket: &Path,
    extra: &[(&str, &str)],
    measure: impl FnOnce() -> T,
) -> T {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = attack_command(user, name, socket, extra)
        .env("NETSIFT_HOLD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the attack");
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = out.lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.starts_with("HOLDING") => break,
            Some(Ok(_)) => {}
            _ => panic!("attack {name} ended before holding: {:?}", child.wait()),
        }
    }
    let m = measure();
    drop(child.stdin.take());
    let st = child.wait().expect("wait");
    assert!(st.success(), "attack {name}: {st}");
    m
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A root client opens a flow of generated packets and gets exactly them.
fn witness(socket: &Path) {
    let c = Client::connect(socket).expect("the witness connects");
    let mut f = c
        .open("(gen,9,3000) -> (bpf,\"udp\")", &OpenOptions::default())
        .expect("the witness's flow");
    let want = netsift_testkit::reference::mixed_accepted(9, 3000, "udp");
    let got = netsift_testkit::daemon::drain(&mut f, Duration::from_secs(30));
    assert_eq!(got, want, "the witness got other packets");
}

#[test]
fn an_ordinary_user_cannot_break_netsiftd() {
    let user = User::create();
    let lab = Lab::new().unwrap_or_else(|e| panic!("cannot create a test network namespace: {e}"));
    let dir = Dir::new("hostile");
    let socket = dir.0.join("netsiftd.sock");
    let policy = dir.0.join("policy");
    std::fs::write(
        &policy,
        format!(
            "default deny\nuser root: allow\nuser {u}: only interface {b}\nuser {u}: allow\n",
            u = user.name,
            b = lab.b
        ),
    )
    .unwrap();
    // Root's secrets, and a FIFO the user made.
    let secret = dir.0.join("secret.pcap");
    std::fs::write(&secret, b"ROOT-SECRET-CONTENT").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let fifo = dir.0.join("fifo");
    let cf = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(cf.as_ptr(), 0o666) }, 0);
    // SAFETY: a valid C string.
    unsafe { libc::chown(cf.as_ptr(), user.uid, user.gid) };
    let limit = 64u64 << 20;
    let limit_text = limit.to_string();
    let mut d = Netsiftd::start(
        &lab,
        &socket,
        &[
            "--mode",
            "666",
            "--policy",
            policy.to_str().unwrap(),
            "--max-memory-per-user",
            &limit_text,
            "--max-connections-per-user",
            "32",
        ],
        None,
    );
    let secret_s = secret.to_str().unwrap().to_string();
    let fifo_s = fifo.to_str().unwrap().to_string();
    let env = [
        ("NETSIFT_SECRET", secret_s.as_str()),
        ("NETSIFT_FIFO", fifo_s.as_str()),
        ("NETSIFT_IFACE_OK", lab.b.as_str()),
        ("NETSIFT_LIMIT", limit_text.as_str()),
    ];
    // While the user holds as much as the limit lets them, the daemon's memory files total
    // no more than the limit (and the witness's flow).
    // Its flows each generate 10 million packets: the daemon's resident memory stays small.
    let (held, rss) = holding(&user, "big", &socket, &env, || (d.memfd_bytes(), d.rss()));
    println!(
        "the user holds flows up to the limit: netsiftd's memory files {held} bytes, resident \
         {rss} bytes"
    );
    assert!(held <= limit, "{held} bytes held, limit {limit}");
    assert!(held > limit / 2, "{held} bytes: the limit was not reached");
    assert!(rss < limit + (256 << 20), "netsiftd resident: {rss} bytes");
    let mut summary = Vec::new();
    for attack in ["memory", "files", "flood", "connections", "big"] {
        let t = Instant::now();
        let out = as_user(&user, attack, &socket, &env);
        assert!(
            out.status.success(),
            "attack {attack}: {}\n{}{}",
            out.status,
            stdout(&out),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(d.alive(), "netsiftd died during the {attack} attack");
        witness(&socket);
        assert!(
            d.memfd_bytes() <= limit + (64 << 20),
            "the daemon holds {} bytes of memory files after {attack}",
            d.memfd_bytes()
        );
        summary.push(format!("{attack} ({:.1} s)", t.elapsed().as_secs_f64()));
    }
    println!(
        "netsiftd alive and serving after every attack of user {}: {}",
        user.name,
        summary.join(", ")
    );
}

/// Descriptors running out in the daemon (a low RLIMIT_NOFILE and many connections): accept
/// fails with EMFILE, the daemon refuses what it cannot take and keeps serving.
#[test]
fn netsiftd_survives_running_out_of_descriptors() {
    let lab = Lab::new().unwrap_or_else(|e| panic!("cannot create a test network namespace: {e}"));
    let dir = Dir::new("emfile");
    let socket = dir.0.join("netsiftd.sock");
    let mut d = Netsiftd::start(
        &lab,
        &socket,
        &["--max-connections-per-user", "10000"],
        Some(48),
    );
    let mut held = Vec::new();
    for _ in 0..200 {
        if let Ok(c) = Client::connect(&socket) {
            held.push(c);
        }
    }
    // Ask on every connection: the ones the daemon could not keep are closed or refused.
    let answered = held.iter().filter(|c| c.list().is_ok()).count();
    assert!(d.alive(), "netsiftd exited when descriptors ran out");
    assert!(answered > 0 && answered < 200, "{answered} of 200 answered");
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    witness(&socket);
    println!("with 48 descriptors: {answered} of 200 connections served; netsiftd still serving");
}

/// Packets the kernel dropped while the daemon was behind (stopped with SIGSTOP) are counted
/// in the flow's drops: what it read and what it lost add up to what was sent.
#[test]
fn loss_while_the_daemon_is_behind_is_counted() {
    let lab = Lab::new().unwrap_or_else(|e| panic!("cannot create a test network namespace: {e}"));
    let dir = Dir::new("loss");
    let socket = dir.0.join("netsiftd.sock");
    let d = Netsiftd::start(&lab, &socket, &[], None);
    let c = Client::connect(&socket).unwrap();
    let mut flow = c
        .open(&format!("(device,{})", lab.b), &OpenOptions::default())
        .unwrap();
    const SENT: usize = 100_000;
    let frames: Vec<Vec<u8>> = (0..SENT)
        .map(|i| {
            netsift_capture::generate::FrameBuilder::new()
                .ipv4([198, 18, 8, 8], [198, 18, 9, 9])
                .udp(4000 + (i % 1000) as u16, 7777)
                .build()
        })
        .collect();
    // SAFETY: signals to the child we started.
    unsafe { libc::kill(d.pid(), libc::SIGSTOP) };
    let sent = lab.send(&frames, 1_000_000).sent;
    // SAFETY: as above.
    unsafe { libc::kill(d.pid(), libc::SIGCONT) };
    assert_eq!(sent, SENT as u64);
    let mut got = 0u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = (u64::MAX, Instant::now());
    loop {
        let r = flow.reader();
        r.wait_for(64, Duration::from_millis(50));
        while r.next().is_some() {
            got += 1;
        }
        r.release();
        let st = flow.stats().unwrap();
        if got + st.dropped >= SENT as u64 {
            break;
        }
        if st.dropped != last.0 {
            last = (st.dropped, Instant::now());
        }
        assert!(
            Instant::now() < deadline,
            "read {got}, dropped {} of {SENT}",
            st.dropped
        );
    }
    let st = flow.stats().unwrap();
    println!(
        "{SENT} frames sent while netsiftd was stopped: {got} read, {} counted as dropped",
        st.dropped
    );
    assert!(st.dropped > 0, "the kernel ring should have overflowed");
    assert_eq!(got + st.dropped, SENT as u64, "{st:?}");
}

/// The attacks, run as the unprivileged user by the tests above (not on their own).
#[test]
#[ignore = "run by an_ordinary_user_cannot_break_netsiftd as an unprivileged user"]
fn attack() {
    let Ok(name) = std::env::var("NETSIFT_ATTACK") else {
        return;
    };
    let socket = PathBuf::from(std::env::var("NETSIFT_SOCKET").unwrap());
    let env = |k: &str| std::env::var(k).unwrap();
    // SAFETY: getuid has no preconditions.
    assert_ne!(unsafe { libc::getuid() }, 0, "attacks run unprivileged");
    match name.as_str() {
        "memory" => attacks::memory(&socket),
        "files" => attacks::files(
            &socket,
            &env("NETSIFT_SECRET"),
            &env("NETSIFT_FIFO"),
            &env("NETSIFT_IFACE_OK"),
        ),
        "flood" => attacks::flood(&socket),
        "connections" => attacks::connections(&socket),
        "big" => attacks::big(&socket, env("NETSIFT_LIMIT").parse().unwrap()),
        other => panic!("no attack {other}"),
    }
}

mod attacks {
    use super::*;
    use std::os::fd::{AsRawFd, BorrowedFd};

    fn refused(c: &Client, text: &str) -> String {
        match c.open(text, &OpenOptions::default()) {
            Err(ClientError::Refused(m)) => m,
            Err(e) => panic!("{text}: {e}"),
            Ok(_) => panic!("{text}: accepted"),
        }
    }

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    /// Tries to resize `fd`, and to write it unless `writable`: panics on any success.
    fn try_break(what: &str, fd: BorrowedFd<'_>, len: usize, writable: bool) {
        let raw = fd.as_raw_fd();
        // SAFETY: system calls on a descriptor we hold; mappings are unmapped again.
        unsafe {
            for size in [0, 1, (len * 4) as libc::off_t] {
                assert_ne!(libc::ftruncate(raw, size), 0, "{what}: ftruncate({size})");
            }
            assert_ne!(
                libc::fallocate(raw, 0, 0, (len * 4) as libc::off_t),
                0,
                "{what}"
            );
            if writable {
                return;
            }
            let path = std::ffi::CString::new(format!("/proc/self/fd/{raw}")).unwrap();
            let rw = libc::open(path.as_ptr(), libc::O_RDWR);
            println!(
                "ATTACK {what}: reopen O_RDWR: {}",
                if rw >= 0 { 0 } else { errno() }
            );
            let fds = if rw >= 0 { vec![raw, rw] } else { vec![raw] };
            for f in fds {
                let prot = libc::PROT_READ | libc::PROT_WRITE;
                let m = libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, f, 0);
                assert_eq!(m, libc::MAP_FAILED, "{what}: a writable shared mapping");
                let m = libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    f,
                    0,
                );
                assert_ne!(m, libc::MAP_FAILED, "{what}: a read-only mapping");
                assert_ne!(
                    libc::mprotect(m, len, prot),
                    0,
                    "{what}: mprotect to writable"
                );
                libc::munmap(m, len);
                assert_ne!(
                    libc::pwrite(f, b"x".as_ptr().cast(), 1, 0),
                    1,
                    "{what}: write"
                );
            }
            if rw >= 0 {
                libc::close(rw);
            }
        }
        println!("ATTACK {what}: resize, writable mappings and writes refused");
    }

    pub fn memory(socket: &Path) {
        let c = Client::connect(socket).unwrap();
        let mut f = c
            .open(
                "(gen,1,100000) -> (packetcount,,64)",
                &OpenOptions::default(),
            )
            .unwrap();
        let mbuf = f.mbuf(1).expect("the packetcount MBuf").clone();
        let mbuf_region = mbuf.region().expect("shared").clone();
        let regions = f.reader().shared_regions().expect("shared regions");
        try_break("PBuf", regions.pbuf.fd(), regions.pbuf.len(), false);
        try_break("IBuf", regions.ibuf.fd(), regions.ibuf.len(), false);
        try_break("control page", regions.ctrl.fd(), regions.ctrl.len(), true);
        try_break("MBuf", mbuf_region.fd(), mbuf_region.len(), true);
        // Garbage everywhere the user may write, while the daemon writes the flow.
        let ctrl = regions.ctrl;
        // SAFETY: the control page and MBuf are mapped read-write for this process; the
        // daemon reads them as untrusted input.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                ctrl.len(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                ctrl.fd().as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            let words = std::slice::from_raw_parts_mut(p.cast::<u64>(), ctrl.len() / 8);
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..2000 {
                for w in words.iter_mut() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    std::ptr::write_volatile(w, x);
                }
                for i in 0..mbuf.len() / 8 {
                    mbuf.set(i, x.rotate_left(i as u32));
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            libc::munmap(p, ctrl.len());
        }
        let _ = f.stats();
        println!("ATTACK memory: garbage written to the control page and MBuf 2000 times");
    }

    pub fn files(socket: &Path, secret: &str, fifo: &str, iface_ok: &str) {
        let c = Client::connect(socket).unwrap();
        let t = Instant::now();
        for text in [
            format!("(file,\"{secret}\")"),
            format!("(nic,\"{secret}\",1,0)"),
            format!("(gen,1,10) -> (classify,\"{secret}\")"),
            format!("(gen,1,10) -> (fpl,\"@{secret}\")"),
        ] {
            let m = refused(&c, &text);
            assert!(m.contains("Permission denied"), "{text}: {m}");
            assert!(!m.contains("ROOT-SECRET"), "{text}: the secret leaked: {m}");
            println!("ATTACK files: {text}: refused");
        }
        let m = refused(&c, &format!("(gen,1,10) -> (pcap,\"{secret}.out\")"));
        assert!(m.contains("Permission denied"), "{m}");
        for text in [
            format!("(gen,1,10) -> (classify,\"{fifo}\")"),
            format!("(file,\"{fifo}\")"),
            "(gen,1,10) -> (classify,\"/dev/zero\")".to_string(),
            "(gen,1,10) -> (fpl,\"@/dev/zero\")".to_string(),
        ] {
            let m = refused(&c, &text);
            assert!(m.contains("not a regular file"), "{text}: {m}");
            println!("ATTACK files: {text}: refused");
        }
        assert!(t.elapsed() < Duration::from_secs(10), "the daemon waited");
        // An FPL program the checker accepts (4 million operations per packet), over the
        // daemon's bound; a small one is served.
        let heavy = "FOR (R[1] = 0; R[1] < 2000000; R[1]++) R[2]++; ROF RETURN 1;";
        let m = refused(&c, &format!("(gen,1,10) -> (fpl,\"{heavy}\")"));
        assert!(
            m.contains("operations per packet; this daemon allows 65536"),
            "{m}"
        );
        let light = "FOR (R[1] = 0; R[1] < 100; R[1]++) R[2]++; ROF RETURN 1;";
        drop(
            c.open(
                &format!("(gen,1,10) -> (fpl,\"{light}\")"),
                &OpenOptions::default(),
            )
            .unwrap(),
        );
        println!("ATTACK files: a costly FPL program refused");
        let m = refused(&c, "(gen,1,10) -> (ebpf,\"tcp\")");
        assert!(m.contains("loads programs into the kernel"), "{m}");
        let m = refused(&c, "(device,lo)");
        assert!(m.contains("capture on `lo` is not allowed"), "{m}");
        // The interface the policy names is allowed.
        drop(
            c.open(&format!("(device,{iface_ok})"), &OpenOptions::default())
                .unwrap(),
        );
        println!("ATTACK files: kernel programs and other interfaces refused");
    }

    pub fn flood(socket: &Path) {
        use netsift_daemon::proto::Request;
        let conn = netsift_daemon::sock::Conn::connect(socket).unwrap();
        let list = Request::List.encode();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut sent = 0;
        loop {
            match conn.try_send(list.as_bytes(), &[]) {
                Ok(true) => sent += 1,
                Ok(false) => std::thread::sleep(Duration::from_millis(1)),
                Err(_) => break,
            }
            assert!(Instant::now() < deadline, "not disconnected after {sent}");
        }
        println!("ATTACK flood: disconnected after {sent} unread requests");
    }

    pub fn connections(socket: &Path) {
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..2000 {
            match Client::connect(socket) {
                Ok(c) => match c.list() {
                    Ok(_) => held.push(c),
                    Err(ClientError::Refused(m)) => {
                        assert!(m.contains("connections of one user"), "{m}");
                        refused += 1;
                    }
                    Err(_) => refused += 1,
                },
                Err(_) => refused += 1,
            }
        }
        assert!(held.len() <= 32, "{} connections kept", held.len());
        println!("ATTACK connections: {} kept, {refused} refused", held.len());
    }

    pub fn big(socket: &Path, limit: u64) {
        let c = Client::connect(socket).unwrap();
        let huge = OpenOptions {
            slots: 1 << 18,
            slot_size: 4096,
            ibuf: 1 << 24,
            ..OpenOptions::default()
        };
        let m = match c.open("(gen,1,10)", &huge) {
            Err(ClientError::Refused(m)) => m,
            other => panic!("a 1 GiB flow: {:?}", other.map(|_| ())),
        };
        println!("ATTACK big: {m}");
        // Flows with an MBuf of 1 MiB each (and 10 million generated packets), until the
        // limit: the daemon stays within it.
        let mut flows = Vec::new();
        loop {
            // Distinct sources: nothing is shared between these flows.
            let text = format!("(gen,{},10000000) -> (packetcount,,1048576)", flows.len());
            match c.open(&text, &OpenOptions::default()) {
                Ok(f) => flows.push(f),
                Err(ClientError::Refused(m)) => {
                    assert!(m.contains("left to its user"), "{m}");
                    break;
                }
                Err(e) => panic!("{e}"),
            }
            assert!(flows.len() < 100, "never refused (limit {limit})");
        }
        println!(
            "ATTACK big: {} flows with 1 MiB MBufs before the limit",
            flows.len()
        );
        if std::env::var_os("NETSIFT_HOLD").is_some() {
            use std::io::Read;
            println!("HOLDING");
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        }
    }
}
