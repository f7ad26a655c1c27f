//! netsiftd in a thread of the test, applications as clients: flows deliver exactly their
//! packets through shared memory, groups are isolated, a vanished client's flows and buffers
//! are released, bad requests get clear errors.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use netsift_daemon::client::{Client, ClientError, OpenOptions};
use netsift_daemon::server::{Background, Config, Daemon, GroupBy, Status};
use netsift_graph::buffer::Preference;

/// The tests count this process's memory files: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A daemon on a thread of the test.
struct Running {
    daemon: Background,
    path: PathBuf,
}

impl Running {
    fn start(name: &str, group_by: GroupBy) -> Running {
        Running::start_with(name, |cfg| cfg.group_by = group_by)
    }

    fn start_with(name: &str, set: impl FnOnce(&mut Config)) -> Running {
        let path =
            std::env::temp_dir().join(format!("netsiftd-{name}-{}.sock", std::process::id()));
        let mut cfg = Config::new(&path);
        set(&mut cfg);
        Running {
            daemon: Daemon::bind(cfg).expect("bind").spawn(),
            path,
        }
    }

    /// The daemon's open flows (after a request, so that a turn has ended since).
    fn status_probe(&self, c: &Client) -> usize {
        let _ = c.list().unwrap();
        let _ = c.list().unwrap();
        self.daemon.status().flows
    }

    fn client(&self) -> Client {
        Client::connect(&self.path).expect("connect")
    }

    fn stop(self) -> Status {
        self.daemon.stop().expect("the daemon thread")
    }
}

/// The packets of `mixed_traffic(seed, n)` an expression accepts.
fn expected(seed: u64, n: usize, expr: &str) -> Vec<Vec<u8>> {
    netsift_testkit::reference::mixed_accepted(seed, n, expr)
}

/// Read a flow until its source ended.
fn drain(flow: &mut netsift_daemon::Flow) -> Vec<Vec<u8>> {
    netsift_testkit::daemon::drain(flow, Duration::from_secs(30))
}

fn memfds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|l| l.to_string_lossy().starts_with("/memfd:netsift"))
        })
        .count()
}

fn mapped() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.contains("memfd:netsift"))
        .count()
}

#[test]
fn flows_get_exactly_their_packets_and_mbufs() {
    let _serial = serial();
    let d = Running::start("exact", GroupBy::UidGid);
    let c = d.client();
    let mut flow = c
        .open(
            "(gen,11,3000) -> (bpf,\"tcp\") -> (packetcount,,8)",
            &OpenOptions::default(),
        )
        .unwrap();
    assert_eq!(flow.link_type(), netsift_capture::LinkType::ETHERNET);
    let got = drain(&mut flow);
    let want = expected(11, 3000, "tcp");
    assert!(!want.is_empty());
    assert_eq!(got, want);
    assert_eq!(flow.mbuf(2).unwrap().get(0), want.len() as u64);
    assert!(flow.mbuf(1).is_none(), "bpf has no MBuf");
    let st = flow.stats().unwrap();
    assert_eq!(st.delivered, want.len() as u64);
    assert_eq!(st.appended, want.len() as u64);
    assert_eq!(st.dropped + st.overwritten, 0);
    assert!(c.list().unwrap().starts_with("group=uid="));
    flow.close().unwrap();
    assert!(c.list().unwrap().ends_with("flows="));
    let status = d.stop();
    assert_eq!(status.flows, 0);
    assert_eq!(status.nodes, 0);
}

#[test]
fn groups_share_a_pbuf_only_within_the_group() {
    let _serial = serial();
    // One connection per group: two flows of one connection share the PBuf; the other
    // connection's flow has its own and its own filter instances.
    let d = Running::start("groups", GroupBy::Connection);
    let (c1, c2) = (d.client(), d.client());
    let opts = OpenOptions {
        slots: 64,
        ..OpenOptions::default()
    };
    // A source each (a shared one would start before the later flows exist).
    let text = |seed: u64, e: &str| format!("(gen,{seed},2000) -> (bpf,\"{e}\")");
    let mut a = c1.open(&text(5, "udp"), &opts).unwrap();
    let mut b = c1.open(&text(6, "tcp"), &opts).unwrap();
    let mut x = c2.open(&text(7, "udp"), &opts).unwrap();
    assert!(c1.list().unwrap().starts_with("group=connection="));
    assert_ne!(c1.list().unwrap(), c2.list().unwrap());
    // Read all three concurrently enough that nothing is dropped with 64 slots.
    let mut got = [Vec::new(), Vec::new(), Vec::new()];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut done = true;
        for (i, f) in [&mut a, &mut b, &mut x].into_iter().enumerate() {
            let r = f.reader();
            while let Some(p) = r.next() {
                got[i].push(p.data.to_vec());
            }
            r.release();
            done &= r.is_finished();
        }
        if done {
            break;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_micros(200));
    }
    for (i, (f, seed, e)) in [(&a, 5, "udp"), (&b, 6, "tcp"), (&x, 7, "udp")]
        .into_iter()
        .enumerate()
    {
        let st = f.stats().unwrap();
        // Each flow's packets are exactly its filter's, minus what its group dropped.
        assert_eq!(
            st.delivered + st.dropped,
            expected(seed, 2000, e).len() as u64,
            "flow {i}"
        );
        assert_eq!(got[i].len() as u64, st.delivered);
    }
}

/// Not a test on its own: the process `a_killed_client…` starts and kills. It opens a flow
/// on the daemon named by `NETSIFTD_TEST_SOCKET`, says `ready` and waits to be killed.
#[test]
fn child_client() {
    let Some(path) = std::env::var_os("NETSIFTD_TEST_SOCKET") else {
        return;
    };
    let c = Client::connect(PathBuf::from(path)).unwrap();
    let mut f = c
        .open(
            "(gen,9,4000000) -> (bpf,\"tcp\") -> (bytecount,,8)",
            &OpenOptions::default(),
        )
        .unwrap();
    f.reader().wait_for(1, Duration::from_secs(5));
    assert!(f.reader().next().is_some());
    println!("ready");
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_killed_client_is_cleaned_up_and_the_others_keep_running() {
    let _serial = serial();
    use std::io::BufRead;
    let before = memfds();
    let d = Running::start("vanish", GroupBy::Connection);
    let keep = d.client();
    let mut kept = keep
        .open(
            "(gen,9,4000000) -> (bpf,\"udp\")",
            &OpenOptions {
                preference: Preference::FastReader,
                ..OpenOptions::default()
            },
        )
        .unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_client", "--nocapture", "--test-threads=1"])
        .env("NETSIFTD_TEST_SOCKET", &d.path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child client failed"
        );
    }
    // Two groups, two PBufs; the child's group has a flow and its filters.
    let with_child = d.status_probe(&keep);
    child.kill().unwrap();
    child.wait().unwrap();
    // The survivor keeps receiving.
    let t = Instant::now();
    let mut n = 0u64;
    while n < 2000 && t.elapsed() < Duration::from_secs(20) {
        kept.reader().wait_for(1, Duration::from_millis(20));
        while kept.reader().next().is_some() {
            n += 1;
        }
        kept.reader().release();
    }
    assert!(n >= 2000, "the other flow stopped: {n}");
    assert_eq!(with_child, 2, "flows while the child ran");
    let t = Instant::now();
    while d.status_probe(&keep) != 1 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the dead client's flow stayed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(kept);
    drop(keep);
    let status = d.stop();
    assert_eq!((status.flows, status.nodes), (0, 0));
    assert_eq!(memfds(), before, "memory files left open");
    assert_eq!(mapped(), 0, "mappings left");
}

#[test]
fn bad_requests_get_clear_errors() {
    let _serial = serial();
    let d = Running::start("errors", GroupBy::UidGid);
    let c = d.client();
    let e = |t: &str| match c.open(t, &OpenOptions::default()) {
        Err(ClientError::Refused(m)) => m,
        Err(e) => panic!("{t}: {e}"),
        Ok(_) => panic!("{t}: accepted"),
    };
    let m = e("(gen,1,10) -> (bpf,\"tcp port\")");
    assert!(m.contains('^'), "{m}");
    assert!(e("(gen,1,10) -> (nosuch)").contains("unknown filter class"));
    assert!(e("  ").contains("graph text is missing"));
    let m = e("(device,\"nsdoesnotexist0\")");
    assert!(m.contains("nsdoesnotexist0"), "{m}");
    // The connection survives errors and still works.
    let f = c.open("(gen,1,10)", &OpenOptions::default()).unwrap();
    drop(f);
    assert_eq!(d.stop().flows, 0);
}

#[test]
fn flows_asking_to_share_read_one_ibuf() {
    let _serial = serial();
    let d = Running::start("share", GroupBy::UidGid);
    let c = d.client();
    let share = OpenOptions {
        share: true,
        ..OpenOptions::default()
    };
    // Few enough packets for A's IBuf: A reads only after B and X are open.
    let text = "(gen,13,4000) -> (bpf,\"tcp\")";
    let mut a = c.open(text, &share).unwrap();
    let mut b = c.open(text, &share).unwrap();
    let mut x = c.open(text, &OpenOptions::default()).unwrap();
    // The memory file behind each flow's IBuf mapping: A and B map one, X its own.
    let inode = |f: &mut netsift_daemon::Flow| {
        use std::os::fd::AsRawFd;
        let regions = f.reader().shared_regions().expect("mapped from files");
        // SAFETY: fstat into a zeroed buffer, on a descriptor the region keeps open.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        assert_eq!(
            unsafe { libc::fstat(regions.ibuf.fd().as_raw_fd(), &mut st) },
            0
        );
        (st.st_dev, st.st_ino)
    };
    assert_eq!(inode(&mut a), inode(&mut b));
    assert_ne!(inode(&mut a), inode(&mut x));
    let e = b.pause().unwrap_err();
    assert!(e.to_string().contains("cannot be paused"), "{e}");
    let want = expected(13, 4000, "tcp");
    let got_a = drain(&mut a);
    assert!(
        got_a == want,
        "A: {} packets of {}",
        got_a.len(),
        want.len()
    );
    // B and X joined while the source ran: each has the packets from its start on.
    for got in [drain(&mut b), drain(&mut x)] {
        assert!(
            got[..] == want[want.len() - got.len()..],
            "not the last {} packets",
            got.len()
        );
    }
    let (sa, sb) = (a.stats().unwrap(), b.stats().unwrap());
    assert_eq!((sa.appended, sa.dropped), (want.len() as u64, 0));
    assert!(sb.appended <= sa.appended);
    assert_eq!(sb.delivered, sb.appended);
    for f in [a, b, x] {
        f.close().unwrap();
    }
    assert_eq!(d.stop().flows, 0);
}

/// A client that sends requests and never reads the replies is disconnected once
/// `MAX_PENDING_REPLIES` wait for it; the daemon never blocks on it, and the others are
/// answered all along.
#[test]
fn a_client_that_never_reads_cannot_stall_the_daemon() {
    use netsift_daemon::proto::Request;
    use netsift_daemon::sock::Conn;
    let _serial = serial();
    let d = Running::start("noread", GroupBy::UidGid);
    let good = d.client();
    let mut flow = good.open("(gen,5,200)", &OpenOptions::default()).unwrap();
    let hostile = Conn::connect(&d.path).unwrap();
    let list = Request::List.encode();
    let (mut sent, mut answered) = (0usize, 0usize);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match hostile.try_send(list.as_bytes(), &[]) {
            Ok(true) => sent += 1,
            Ok(false) => std::thread::sleep(Duration::from_millis(1)),
            // Disconnected: the daemon gave up on it.
            Err(_) => break,
        }
        if sent % 50 == 0 {
            // Someone else is answered throughout.
            good.list().expect("the other client is answered");
            answered += 1;
        }
        assert!(
            Instant::now() < deadline,
            "never disconnected after {sent} requests"
        );
    }
    assert!(sent > netsift_daemon::server::MAX_PENDING_REPLIES, "{sent}");
    assert!(answered > 0);
    assert_eq!(
        drain(&mut flow).len(),
        200,
        "the other client's flow is intact"
    );
    assert!(d.status_probe(&good) >= 1);
    assert_eq!(
        d.daemon.status().sessions,
        1,
        "the hostile connection is gone"
    );
    drop(flow);
    d.stop();
}

#[test]
fn connections_per_user_are_limited() {
    let _serial = serial();
    let d = Running::start_with("connlimit", |cfg| {
        cfg.limits.connections_per_user = 3;
    });
    let clients: Vec<Client> = (0..3).map(|_| d.client()).collect();
    for c in &clients {
        c.list().unwrap();
    }
    let extra = d.client();
    match extra.list() {
        Err(ClientError::Refused(m)) => {
            assert!(m.contains("at most 3 connections of one user"), "{m}")
        }
        other => panic!("a fourth connection: {other:?}"),
    }
    drop(clients);
    // Room again once the others left.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if d.client().list().is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "no room after the others left");
        std::thread::sleep(Duration::from_millis(20));
    }
    d.stop();
}

/// The socket is created with its mode (never briefly with another), and nothing at the path
/// is followed: a symlink there is refused, its target untouched.
#[test]
fn the_socket_is_created_with_its_mode_and_follows_no_link() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let _serial = serial();
    let d = Running::start_with("mode", |cfg| cfg.mode = 0o604);
    let mode = std::fs::symlink_metadata(&d.path)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o604);
    d.client().list().unwrap();
    d.stop();
    let dir = std::env::temp_dir().join(format!("netsiftd-link-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let target = dir.join("target");
    std::fs::write(&target, b"x").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.join("netsiftd.sock");
    let _ = std::fs::remove_file(&link);
    symlink(&target, &link).unwrap();
    let e = Daemon::bind(Config::new(&link)).unwrap_err();
    assert!(e.to_string().contains("is not a socket"), "{e}");
    let m = std::fs::metadata(&target).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o600, "the target's mode");
    assert_eq!(std::fs::read(&target).unwrap(), b"x");
    // No private directory is left beside the path.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(left.len(), 2, "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A flow with more MBufs than one reply can carry is refused with a message; the
/// connection stays.
#[test]
fn a_flow_with_too_many_mbufs_is_refused_clearly() {
    let _serial = serial();
    let d = Running::start("mbufs", GroupBy::UidGid);
    let c = d.client();
    let text = format!("(gen,1,10){}", " -> (packetcount,,8)".repeat(62));
    match c.open(&text, &OpenOptions::default()) {
        Err(ClientError::Refused(m)) => assert!(m.contains("MBufs"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("62 MBufs accepted"),
    }
    c.list().expect("the connection survives");
    d.stop();
}

/// Shared memory per user is bounded, headers and page rounding counted: a flow that would
/// pass the limit is refused before anything is allocated, with the figures.
#[test]
fn shared_memory_per_user_is_bounded() {
    let _serial = serial();
    const LIMIT: u64 = 16 << 20;
    let d = Running::start_with("memlimit", |cfg| {
        cfg.limits.memory_per_user = LIMIT;
        cfg.group_by = GroupBy::Connection;
    });
    // 4096 slots of 4 KiB: 16 MiB of data, more with the headers.
    let c = d.client();
    let big = OpenOptions {
        slots: 4096,
        slot_size: 4096,
        ..OpenOptions::default()
    };
    match c.open("(gen,1,10)", &big) {
        Err(ClientError::Refused(m)) => assert!(m.contains("bytes of buffers"), "{m}"),
        other => panic!("a flow over the limit: {:?}", other.map(|_| ())),
    }
    // Flows of 1 MiB PBufs, each connection its own group, until the limit refuses one.
    let small = OpenOptions {
        slots: 512,
        slot_size: 2048,
        ..OpenOptions::default()
    };
    let mut held = Vec::new();
    let refused = loop {
        let c = d.client();
        match c.open("(gen,1,10) -> (packetcount,,64)", &small) {
            Ok(f) => held.push((c, f)),
            Err(ClientError::Refused(m)) => break m,
            Err(e) => panic!("{e}"),
        }
        assert!(held.len() < 64, "never refused");
    };
    assert!(refused.contains("left to its user"), "{refused}");
    let used = {
        let _ = held[0].0.list();
        let _ = held[0].0.list();
        d.daemon.status().memory
    };
    assert!(used <= LIMIT, "{used} bytes held, limit {LIMIT}");
    assert!(
        used > LIMIT / 2,
        "{used} bytes: the limit was not what refused"
    );
    println!(
        "{} flows hold {used} bytes of a {LIMIT}-byte limit",
        held.len()
    );
    drop(held);
    d.stop();
}

/// A `gen` flow beside a device flow on a quiet interface: requests are answered at once and
/// the generated packets flow (before, each turn waited 100 ms per packet for the quiet one).
#[test]
fn a_quiet_device_holds_up_no_request_and_no_other_source() {
    let _serial = serial();
    let lab = netsift_testkit::netns::Lab::new()
        .unwrap_or_else(|e| panic!("cannot create a test network namespace: {e}"));
    let path = std::env::temp_dir().join(format!("netsiftd-quiet-{}.sock", std::process::id()));
    // The daemon's thread is created in the namespace (threads inherit it).
    let daemon = lab.run(|| Daemon::bind(Config::new(&path)).expect("bind").spawn());
    let c = Client::connect(&path).unwrap();
    let quiet = c
        .open(
            &format!("(device,{}) -> (bpf,\"udp port 9\")", lab.b),
            &OpenOptions::default(),
        )
        .unwrap();
    let t = Instant::now();
    let mut generated = c.open("(gen,3,20000)", &OpenOptions::default()).unwrap();
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        let t = Instant::now();
        c.list().unwrap();
        worst = worst.max(t.elapsed());
    }
    // The device never ends: read until every generated packet came.
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    // (Slow-reader preference: what did not fit while nobody read is dropped, and counted.)
    let dropped = |f: &netsift_daemon::Flow| f.stats().map_or(0, |s| s.dropped);
    while got + dropped(&generated) < 20_000 && Instant::now() < deadline {
        let r = generated.reader();
        r.wait_for(64, Duration::from_millis(50));
        while r.next().is_some() {
            got += 1;
        }
        r.release();
    }
    let took = t.elapsed();
    let st = generated.stats().unwrap();
    println!(
        "20,000 generated packets in {took:?} beside a quiet device ({got} read, {} dropped \
         while unread); slowest request {worst:?}",
        st.dropped
    );
    assert_eq!((st.delivered, st.delivered + st.dropped), (got, 20_000));
    assert!(
        worst < Duration::from_millis(500),
        "a request waited {worst:?}"
    );
    assert!(took < Duration::from_secs(20), "the gen flow took {took:?}");
    drop((quiet, generated, c));
    daemon.stop().expect("the daemon thread");
}

/// One group's costly filter cannot take the capture loop from another group: while both have
/// flows on one source, the costly group's filters are suspended whenever they took more than
/// their share of a window, and the packets they miss are counted as its drops.
#[test]
fn a_costly_filter_cannot_starve_another_group() {
    let _serial = serial();
    let d = Running::start_with("cpu", |cfg| {
        cfg.group_by = GroupBy::Connection;
        cfg.limits.fpl_ops = 1 << 24;
    });
    const N: u64 = 100_000;
    let heavy = "FOR (R[1] = 0; R[1] < 1500000; R[1]++) R[2] = R[2] + R[1]; ROF RETURN 1;";
    // The light flow first: it sees every packet of the shared source (the costly one joins
    // a few packets later).
    let b = d.client();
    let t = Instant::now();
    let mut light = b
        .open(
            &format!("(gen,5,{N}) -> (bpf,\"ip\")"),
            &OpenOptions::default(),
        )
        .unwrap();
    let a = d.client();
    let mut costly = a
        .open(
            &format!("(gen,5,{N}) -> (fpl,\"{heavy}\")"),
            &OpenOptions::default(),
        )
        .unwrap();
    // Read both: the light flow gets every packet it accepts, soon (or counts it as dropped:
    // between suspensions the source runs at full speed, faster than this loop reads).
    let want = expected(5, N as usize, "ip").len() as u64;
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    let dropped = |f: &netsift_daemon::Flow| f.stats().map_or(0, |s| s.dropped);
    while got + dropped(&light) < want {
        let r = light.reader();
        r.wait_for(64, Duration::from_millis(20));
        while r.next().is_some() {
            got += 1;
        }
        r.release();
        let c = costly.reader();
        while c.next().is_some() {}
        c.release();
        assert!(
            Instant::now() < deadline,
            "the light flow got {got} of {want}: {:?}; the costly one: {:?}",
            light.stats(),
            costly.stats()
        );
    }
    let light_took = t.elapsed();
    drain(&mut costly);
    let st = costly.stats().unwrap();
    let sl = light.stats().unwrap();
    println!(
        "light flow: {want} packets ({} delivered, {} dropped unread) in {light_took:?} beside \
         a filter of up to 15 million operations per packet; the costly flow: {} delivered, {} \
         dropped of {N}",
        sl.delivered, sl.dropped, st.delivered, st.dropped
    );
    assert_eq!(sl.delivered, got);
    // Without the suspensions the light flow waits for the costly filter on every packet
    // (about a millisecond each: over 10 s).
    assert!(light_took < Duration::from_secs(3), "{light_took:?}");
    assert!(st.dropped > 0, "the costly group was never suspended");
    // Every packet after it joined is delivered or counted (it joined a few batches late).
    let seen = st.delivered + st.dropped;
    assert!(seen <= N && seen > N / 2, "{st:?}");
    assert_eq!(st.appended, st.delivered, "{st:?}");
    drop((costly, light));
    d.stop();
}
