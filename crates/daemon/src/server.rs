//! `netsiftd`: one process owns the sources and the filter graph; applications connect over a
//! Unix socket, submit flows and read their packets from shared memory.
//!
//! # The loop
//!
//! One thread does everything, in turns: it serves the control sockets (accepts connections,
//! answers requests, notices applications that went away), then — while some flow is open —
//! takes up to [`BATCH`] packets from the sources through the graph into the groups' buffers.
//! Applications read those buffers directly (no system call per packet) and advance their `R`
//! in batches; an application that waits sleeps on a futex in its IBuf, which the daemon wakes
//! after a batch that brought what it waits for. The daemon never waits for them (slow-reader preference drops what does not
//! fit, fast-reader preference overwrites). While no flow is open it sleeps in `poll`.
//!
//! # Groups and rights
//!
//! The peer's credentials (`SO_PEERCRED`, taken at connect time) decide the flow group
//! ([`GroupBy`]: by default same uid and gid = same group): flows of one group share one PBuf,
//! and filter instances are shared only within a group ([`Runtime::set_shared_memory`]), so a
//! group never sees another group's packets or filter memory. Applications get the PBuf and
//! IBuf read-only (descriptors reopened `O_RDONLY`), their control page and MBufs read-write.
//! The policy file is checked against the peer's user and group names ([`Policy`]; without
//! one, [`Policy::daemon_default`]: root and the group `netsift`). Every path a flow names is
//! opened with the peer's rights, regular files only, without waiting ([`Access::User`]);
//! classes that load kernel programs are root's unless the policy grants them.
//!
//! # Going away
//!
//! When an application's connection closes — it exited, crashed or was killed — its flows are
//! closed at once: their readers are unregistered, filter instances nobody else uses are
//! destroyed, and a group left without flows frees its buffers (the memory files are unmapped
//! and closed in the daemon; the kernel frees them when the application's mappings are gone).
//! The other applications are not disturbed.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use netsift_graph::access::{Access, Creds};
use netsift_graph::buffer::Reader;
use netsift_graph::policy::Policy;
use netsift_graph::{FlowId, FlowOptions, Runtime, standard_registry};

use crate::proto::{OpenOptions, Reply, Request};
use crate::sock::{Conn, Listener, MAX_FDS, PeerCred};

/// Packets taken from the sources between two looks at the control sockets (and between two
/// wake-ups of a waiting application): a device source lends them straight from its ring.
pub const BATCH: usize = 4096;

/// The longest a batch may take (checked every few packets): costly filters cannot keep the
/// daemon from its sockets, nor from sharing the capture loop between groups, for longer.
pub const BATCH_TIME: std::time::Duration = std::time::Duration::from_millis(10);

/// Replies a connection may leave unread before the daemon disconnects it: the daemon never
/// waits for an application to read (its socket is non-blocking; replies wait in a queue of
/// this length).
pub const MAX_PENDING_REPLIES: usize = 64;

/// Requests answered on one connection per turn, so that one busy application cannot keep
/// the daemon from the others or from the packets.
pub const REQUESTS_PER_TURN: usize = 16;

/// What the daemon gives its applications at the most: connections, flows and shared memory
/// (PBufs, IBufs, control pages and MBufs, headers and page rounding counted), in all and per
/// user id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections in all.
    pub connections: usize,
    /// Connections of one user id.
    pub connections_per_user: usize,
    /// Open flows of one user id.
    pub flows_per_user: usize,
    /// Bytes of shared memory in all.
    pub memory: u64,
    /// Bytes of shared memory of one user id's flows.
    pub memory_per_user: u64,
    /// The most operations an FPL filter may execute per packet (its checker's worst case):
    /// one user's filter cannot hold the capture loop for long.
    pub fpl_ops: u64,
    /// The share of the capture loop's time, in percent, one flow group's filters may take
    /// while other groups have flows: a group over it has its filters suspended for the next
    /// [`CPU_WINDOW`] (its flows count those packets as dropped).
    pub cpu_percent: u32,
}

/// How often the daemon compares each flow group's filter time with its share.
pub const CPU_WINDOW: std::time::Duration = std::time::Duration::from_millis(100);

impl Default for Limits {
    /// 1,024 connections, 64 per user; 256 flows per user; 4 GiB of shared memory, 1 GiB per
    /// user; FPL filters of at most 65,536 operations per packet; half the capture loop per
    /// group when others have flows.
    fn default() -> Limits {
        Limits {
            connections: 1024,
            connections_per_user: 64,
            flows_per_user: 256,
            memory: 4 << 30,
            memory_per_user: 1 << 30,
            fpl_ops: 1 << 16,
            cpu_percent: 50,
        }
    }
}

/// Which applications share a flow group (a PBuf).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GroupBy {
    /// Same user id and group id (the default).
    #[default]
    UidGid,
    /// Same user id.
    Uid,
    /// Same group id.
    Gid,
    /// Each connection its own group.
    Connection,
}

impl GroupBy {
    /// Parse `uid-gid`, `uid`, `gid` or `connection`.
    pub fn parse(s: &str) -> Result<GroupBy, String> {
        match s {
            "uid-gid" => Ok(GroupBy::UidGid),
            "uid" => Ok(GroupBy::Uid),
            "gid" => Ok(GroupBy::Gid),
            "connection" => Ok(GroupBy::Connection),
            _ => Err(format!(
                "group-by `{s}`: expected uid-gid, uid, gid or connection"
            )),
        }
    }

    fn group(self, cred: &PeerCred, session: u64) -> String {
        match self {
            GroupBy::UidGid => format!("uid={},gid={}", cred.uid, cred.gid),
            GroupBy::Uid => format!("uid={}", cred.uid),
            GroupBy::Gid => format!("gid={}", cred.gid),
            GroupBy::Connection => format!("connection={session}"),
        }
    }
}

/// How the daemon runs.
#[derive(Debug)]
pub struct Config {
    /// Where it listens.
    pub socket: PathBuf,
    /// The socket file's permissions.
    pub mode: u32,
    /// Who may run which flows.
    pub policy: Policy,
    /// Which applications share a group.
    pub group_by: GroupBy,
    /// Log connections, flows and decisions to standard error.
    pub verbose: bool,
    /// What the applications get at the most: connections, flows, shared memory, filter cost,
    /// share of the capture loop.
    pub limits: Limits,
}

impl Config {
    /// Listen at `socket` (mode 0660) with the default policy ([`Policy::daemon_default`]:
    /// root and the group `netsift`), group by uid and gid.
    pub fn new(socket: impl Into<PathBuf>) -> Config {
        Config {
            socket: socket.into(),
            mode: 0o660,
            policy: Policy::daemon_default(),
            group_by: GroupBy::default(),
            verbose: false,
            limits: Limits::default(),
        }
    }
}

/// One application's connection.
struct Session {
    conn: Conn,
    cred: PeerCred,
    user: String,
    /// The peer's supplementary group ids (`SO_PEERGROUPS`).
    groups: Vec<u32>,
    /// The names of its primary and supplementary groups, for the policy.
    group_names: Vec<String>,
    group: String,
    /// The daemon's end of each of its flows (dropping it unregisters the reader).
    flows: BTreeMap<FlowId, Reader>,
    /// Replies not yet taken by the peer's socket, oldest first.
    out: VecDeque<(Vec<u8>, Vec<OwnedFd>)>,
}

/// What the daemon holds right now (for logs and tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Connected applications.
    pub sessions: usize,
    /// Open flows.
    pub flows: usize,
    /// Filter instances in the graph.
    pub nodes: usize,
    /// Packets taken from the sources so far.
    pub packets: u64,
    /// Bytes of shared memory the flows hold ([`Daemon::memory_used`]).
    pub memory: u64,
}

/// The daemon.
pub struct Daemon {
    cfg: Config,
    listener: Listener,
    runtime: Runtime,
    sessions: BTreeMap<u64, Session>,
    next_session: u64,
    /// The runtime was told the input ended (and no flow was opened since).
    finished: bool,
    /// Source errors already logged.
    logged: HashSet<String>,
    /// The IBufs woken in the current batch ([`Reader::wake_attached_once`]).
    woken: Vec<usize>,
    /// A descriptor held in reserve: when `accept` fails for want of descriptors, it is closed
    /// to accept (and refuse) the waiting connection, so that it does not keep the listener
    /// ready and the daemon busy.
    spare: Option<std::fs::File>,
    /// The start of the current [`CPU_WINDOW`] and each group's filter time at its start.
    cpu_window: (std::time::Instant, std::collections::HashMap<String, u64>),
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("socket", &self.cfg.socket)
            .field("status", &self.status())
            .finish()
    }
}

/// The name of `id` in a `/etc/passwd`- or `/etc/group`-style `table` (name, password, id, …).
fn name_in(table: &str, id: u32) -> Option<String> {
    table.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let n: u32 = f.nth(1)?.parse().ok()?;
        (n == id).then(|| name.to_string())
    })
}

/// The user name of `uid` from `/etc/passwd`, else `uid:N` (what policy rules name).
pub fn user_name(uid: u32) -> String {
    let table = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    name_in(&table, uid).unwrap_or_else(|| format!("uid:{uid}"))
}

/// The names of group `gid` and of `groups` from `/etc/group` (`gid:N` for an id without
/// one): what policy `group` rules name.
pub fn group_names(gid: u32, groups: &[u32]) -> Vec<String> {
    let table = std::fs::read_to_string("/etc/group").unwrap_or_default();
    let name = |id: u32| name_in(&table, id).unwrap_or_else(|| format!("gid:{id}"));
    let mut ids = vec![gid];
    ids.extend(groups.iter().copied().filter(|&g| g != gid));
    ids.into_iter().map(name).collect()
}

impl Daemon {
    /// Listen as `cfg` says.
    pub fn bind(cfg: Config) -> io::Result<Daemon> {
        let listener = Listener::bind(&cfg.socket, cfg.mode)?;
        let mut runtime = Runtime::new(standard_registry(), cfg.policy.clone());
        runtime.set_shared_memory(true);
        Ok(Daemon {
            cfg,
            listener,
            runtime,
            sessions: BTreeMap::new(),
            next_session: 1,
            finished: false,
            logged: HashSet::new(),
            woken: Vec::new(),
            spare: std::fs::File::open("/dev/null").ok(),
            cpu_window: (std::time::Instant::now(), Default::default()),
        })
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.cfg.socket
    }

    /// What the daemon holds now.
    pub fn status(&self) -> Status {
        Status {
            sessions: self.sessions.len(),
            flows: self.sessions.values().map(|s| s.flows.len()).sum(),
            nodes: self.runtime.graph().len(),
            packets: self.runtime.stats().packets,
            memory: self.memory_used(None),
        }
    }

    fn log(&self, msg: &str) {
        if self.cfg.verbose {
            eprintln!("netsiftd: {msg}");
        }
    }

    /// Run on a thread of its own until the returned handle is stopped or dropped.
    pub fn spawn(mut self) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(self.status()));
        let socket = self.cfg.socket.clone();
        let (s, st) = (Arc::clone(&stop), Arc::clone(&status));
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                self.turn()?;
                *st.lock().unwrap_or_else(PoisonError::into_inner) = self.status();
            }
            // The status stays the last turn's: what the applications had left open.
            self.shutdown();
            Ok(())
        });
        Background {
            stop,
            handle: Some(handle),
            status,
            socket,
        }
    }

    /// Serve until `stop` is set; then close every flow and remove the socket file.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            self.turn()?;
        }
        self.shutdown();
        Ok(())
    }

    /// One turn of the loop: the control sockets, then a batch of packets.
    pub fn turn(&mut self) -> io::Result<()> {
        let busy = self.sessions.values().any(|s| !s.flows.is_empty());
        self.serve(if busy { 0 } else { 100 })?;
        if busy {
            self.pump();
            self.share_cpu();
        }
        Ok(())
    }

    /// Once per [`CPU_WINDOW`]: suspend, for the next window, the filters of each flow group
    /// that took more than [`Limits::cpu_percent`] of the window while other groups have
    /// flows; resume the others.
    fn share_cpu(&mut self) {
        let elapsed = self.cpu_window.0.elapsed();
        if elapsed < CPU_WINDOW {
            return;
        }
        let now = self.runtime.cpu_by_group();
        let groups: HashSet<&str> = self
            .sessions
            .values()
            .filter(|s| !s.flows.is_empty())
            .map(|s| s.group.as_str())
            .collect();
        let budget = elapsed.as_nanos() as u64 * u64::from(self.cfg.limits.cpu_percent) / 100;
        let contended = groups.len() > 1;
        for (g, &ns) in &now {
            let used = ns.saturating_sub(self.cpu_window.1.get(g).copied().unwrap_or(0));
            let over = contended && used > budget;
            if self.runtime.throttle(g, over) && over {
                self.log(&format!(
                    "group {g}: its filters took {} ms of {} ms; suspended for {} ms",
                    used / 1_000_000,
                    elapsed.as_millis(),
                    CPU_WINDOW.as_millis()
                ));
            }
        }
        self.cpu_window = (std::time::Instant::now(), now);
    }

    /// Take up to [`BATCH`] packets through the graph; stop early when the sources are idle.
    /// Then wake the applications whose packets arrived (one futex wake per waiting flow per
    /// batch, none while they keep up).
    fn pump(&mut self) {
        let mut ended = false;
        match self.runtime.step_batch(BATCH, BATCH_TIME) {
            Ok(true) => {}
            Ok(false) => {
                if !self.finished {
                    // Every source ended: readers drain what is left and see the end.
                    if let Err(e) = self.runtime.finish() {
                        self.log(&format!("finishing the filters: {e}"));
                    }
                    self.finished = true;
                    ended = true;
                } else {
                    // Nothing to take: do not spin.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            Err(e) => {
                let m = e.to_string();
                if self.logged.insert(m.clone()) {
                    eprintln!("netsiftd: {m}");
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        let mut woken = std::mem::take(&mut self.woken);
        woken.clear();
        for s in self.sessions.values() {
            for r in s.flows.values() {
                r.wake_attached_once(ended, &mut woken);
            }
        }
        self.woken = woken;
    }

    /// Accept connections, answer requests and send queued replies; wait up to `timeout_ms`
    /// for the first event. Never blocks on an application.
    fn serve(&mut self, timeout_ms: i32) -> io::Result<()> {
        let ids: Vec<u64> = self.sessions.keys().copied().collect();
        let mut fds: Vec<libc::pollfd> = std::iter::once(libc::pollfd {
            fd: self.listener.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .chain(ids.iter().map(|id| {
            let s = &self.sessions[id];
            libc::pollfd {
                fd: s.conn.as_fd().as_raw_fd(),
                events: if s.out.is_empty() {
                    libc::POLLIN
                } else {
                    libc::POLLIN | libc::POLLOUT
                },
                revents: 0,
            }
        }))
        .collect();
        // SAFETY: a valid array of pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        if n == 0 {
            return Ok(());
        }
        if fds[0].revents != 0 {
            self.accept_all();
        }
        for (i, id) in ids.into_iter().enumerate() {
            let ev = fds[i + 1].revents;
            if ev & libc::POLLOUT != 0 {
                self.flush(id);
            }
            if ev & !libc::POLLOUT != 0 {
                self.serve_session(id);
            }
        }
        Ok(())
    }

    /// Accept every waiting connection. Nothing here stops the daemon: a connection that
    /// cannot be accepted or identified is refused and logged, and when descriptors run out
    /// the reserve one makes room to refuse the waiting connection.
    fn accept_all(&mut self) {
        loop {
            let (conn, cred) = match self.listener.accept() {
                Ok(Some(c)) => c,
                Ok(None) => return,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    self.note_once(format!("accepting a connection: {e}; refusing connections"));
                    // Close the reserve, take the connection and close it, reopen the reserve.
                    self.spare = None;
                    if let Ok(Some((conn, _))) = self.listener.accept() {
                        drop(conn);
                    }
                    self.spare = std::fs::File::open("/dev/null").ok();
                    return;
                }
                Err(e) => {
                    self.note_once(format!("accepting a connection: {e}"));
                    return;
                }
            };
            let id = self.next_session;
            self.next_session += 1;
            let of_user = self
                .sessions
                .values()
                .filter(|s| s.cred.uid == cred.uid)
                .count();
            let limits = self.cfg.limits;
            let refusal = if self.sessions.len() >= limits.connections {
                Some(format!(
                    "netsiftd serves at most {} connections",
                    limits.connections
                ))
            } else if of_user >= limits.connections_per_user {
                Some(format!(
                    "netsiftd serves at most {} connections of one user (uid {} has {of_user})",
                    limits.connections_per_user, cred.uid
                ))
            } else {
                None
            };
            if let Some(why) = refusal {
                self.log(&format!(
                    "connection {id}: pid {} uid {} refused: {why}",
                    cred.pid, cred.uid
                ));
                let _ = conn.try_send(Reply::Err(why).encode().as_bytes(), &[]);
                continue;
            }
            let Ok(groups) = conn.peer_groups() else {
                self.log(&format!("connection {id}: no peer groups; refused"));
                continue;
            };
            let user = user_name(cred.uid);
            let group_names = group_names(cred.gid, &groups);
            let group = self.cfg.group_by.group(&cred, id);
            self.log(&format!(
                "connection {id}: pid {} uid {} ({user}) gid {} → group {group}",
                cred.pid, cred.uid, cred.gid
            ));
            self.sessions.insert(
                id,
                Session {
                    conn,
                    cred,
                    user,
                    groups,
                    group_names,
                    group,
                    flows: BTreeMap::new(),
                    out: VecDeque::new(),
                },
            );
        }
    }

    /// Log `msg` to standard error the first time it happens.
    fn note_once(&mut self, msg: String) {
        if self.logged.insert(msg.clone()) {
            eprintln!("netsiftd: {msg}");
        }
    }

    /// Answer up to [`REQUESTS_PER_TURN`] requests waiting on a connection (the rest wait for
    /// the next turn); close it when the peer went away or leaves its replies unread.
    fn serve_session(&mut self, id: u64) {
        for _ in 0..REQUESTS_PER_TURN {
            let Some(s) = self.sessions.get(&id) else {
                return;
            };
            if s.out.len() >= MAX_PENDING_REPLIES {
                // Reading more would only queue more: the peer must read first.
                return;
            }
            match s.conn.recv(false) {
                Ok(Some((msg, _fds))) => {
                    let (reply, fds) = match Request::parse(&msg) {
                        Ok(req) => self.handle(id, req),
                        Err(e) => (Reply::Err(e.0), Vec::new()),
                    };
                    let Some(s) = self.sessions.get_mut(&id) else {
                        return;
                    };
                    s.out.push_back((reply.encode().into_bytes(), fds));
                    if !self.flush(id) {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Ok(None) | Err(_) => {
                    self.drop_session(id);
                    return;
                }
            }
        }
    }

    /// Send the queued replies the peer's socket takes now. Disconnects a peer that leaves
    /// [`MAX_PENDING_REPLIES`] unread, or whose socket failed; returns whether it is still
    /// connected.
    fn flush(&mut self, id: u64) -> bool {
        let Some(s) = self.sessions.get_mut(&id) else {
            return false;
        };
        while let Some((msg, fds)) = s.out.front() {
            let borrowed: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
            match s.conn.try_send(msg, &borrowed) {
                Ok(true) => {
                    s.out.pop_front();
                }
                Ok(false) => break,
                Err(e) => {
                    self.log(&format!("connection {id}: reply failed: {e}"));
                    self.drop_session(id);
                    return false;
                }
            }
        }
        let unread = s.out.len();
        if unread >= MAX_PENDING_REPLIES {
            self.log(&format!(
                "connection {id}: {unread} replies unread; disconnected"
            ));
            self.drop_session(id);
            return false;
        }
        true
    }

    /// Close a connection and every flow it opened.
    fn drop_session(&mut self, id: u64) {
        let Some(s) = self.sessions.remove(&id) else {
            return;
        };
        let ids: Vec<FlowId> = s.flows.keys().copied().collect();
        drop(s.flows);
        for f in &ids {
            for e in self.runtime.close(*f) {
                self.log(&format!("flow {f}: {e}"));
            }
        }
        self.log(&format!(
            "connection {id} (pid {}) gone: closed flows {ids:?}",
            s.cred.pid
        ));
    }

    fn shutdown(&mut self) {
        let ids: Vec<u64> = self.sessions.keys().copied().collect();
        for id in ids {
            self.drop_session(id);
        }
        let _ = std::fs::remove_file(&self.cfg.socket);
    }

    fn handle(&mut self, sid: u64, req: Request) -> (Reply, Vec<OwnedFd>) {
        let owns = |d: &Daemon, f: u64| {
            d.sessions
                .get(&sid)
                .is_some_and(|s| s.flows.contains_key(&f))
        };
        match req {
            Request::Open { options, graph } => match self.open(sid, &options, &graph) {
                Ok(r) => r,
                Err(m) => (Reply::Err(m), Vec::new()),
            },
            Request::Close(f) | Request::Pause(f) | Request::Resume(f) | Request::Stats(f)
                if !owns(self, f) =>
            {
                (
                    Reply::Err(format!("flow {f} is not one of this connection's flows")),
                    Vec::new(),
                )
            }
            Request::Close(f) => {
                if let Some(s) = self.sessions.get_mut(&sid) {
                    s.flows.remove(&f);
                }
                let errors = self.runtime.close(f);
                self.log(&format!("connection {sid}: flow {f} closed"));
                let reply = if errors.is_empty() {
                    Reply::Ok(String::new())
                } else {
                    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
                    Reply::Err(texts.join("; "))
                };
                (reply, Vec::new())
            }
            Request::Pause(f) => (result(self.runtime.pause(f)), Vec::new()),
            Request::Resume(f) => (result(self.runtime.resume(f)), Vec::new()),
            Request::Stats(f) => {
                let st = self.sessions[&sid].flows[&f].stats();
                (
                    Reply::Ok(format!(
                        "appended={} delivered={} dropped={} overwritten={}",
                        st.appended, st.delivered, st.dropped, st.overwritten
                    )),
                    Vec::new(),
                )
            }
            Request::List => {
                let s = &self.sessions[&sid];
                let ids: Vec<String> = s.flows.keys().map(u64::to_string).collect();
                (
                    Reply::Ok(format!("group={} flows={}", s.group, ids.join(","))),
                    Vec::new(),
                )
            }
        }
    }

    fn open(
        &mut self,
        sid: u64,
        o: &OpenOptions,
        graph: &str,
    ) -> Result<(Reply, Vec<OwnedFd>), String> {
        let s = &self.sessions[&sid];
        let (user, group, uid) = (s.user.clone(), s.group.clone(), s.cred.uid);
        let limits = self.cfg.limits;
        let flows: usize = self
            .sessions
            .values()
            .filter(|s| s.cred.uid == uid)
            .map(|s| s.flows.len())
            .sum();
        if flows >= limits.flows_per_user {
            return Err(format!(
                "{user} has {flows} flows open; netsiftd allows {} per user",
                limits.flows_per_user
            ));
        }
        let budget = (limits
            .memory_per_user
            .saturating_sub(self.memory_used(Some(uid))))
        .min(limits.memory.saturating_sub(self.memory_used(None)));
        let s = &self.sessions[&sid];
        // Paths the flow names are opened with the peer's rights, never the daemon's.
        let access = Access::User(Creds {
            uid: s.cred.uid,
            gid: s.cred.gid,
            groups: s.groups.clone(),
        });
        let opts = FlowOptions {
            user: user.clone(),
            groups: s.group_names.clone(),
            access,
            memory_budget: Some(budget),
            bounds: netsift_graph::class::Bounds {
                fpl_ops: limits.fpl_ops,
            },
            // The reply carries the PBuf, IBuf and control page, then one per MBuf.
            max_mbufs: Some(MAX_FDS - 3),
            group: Some(group.clone()),
            preference: o.preference,
            slots: o.slots,
            slot_size: o.slot_size,
            max_packet: o.max_packet,
            ibuf: o.ibuf as usize,
            share_ibuf: o.share,
            callback_every: o.callback_every,
            default_source: None,
        };
        let (id, reader) = self.runtime.open(graph, opts).map_err(|e| {
            self.log(&format!("connection {sid} ({user}): flow refused: {e}"));
            e.to_string()
        })?;
        self.finished = false;
        match self.export(id, &reader) {
            Ok((words, fds)) => {
                self.log(&format!(
                    "connection {sid} ({user}): flow {id} in group {group}: {}",
                    graph.trim()
                ));
                if let Some(other) = self.runtime.ibuf_shared_with(id) {
                    self.log(&format!(
                        "connection {sid} ({user}): flow {id} reads the IBuf of flow {other} (share)"
                    ));
                }
                if let Some(s) = self.sessions.get_mut(&sid) {
                    s.flows.insert(id, reader);
                }
                Ok((Reply::Ok(words), fds))
            }
            Err(e) => {
                drop(reader);
                self.runtime.close(id);
                Err(format!("cannot share the flow's buffers: {e}"))
            }
        }
    }

    /// The bytes of shared memory the flows of user `uid` (of everybody: `None`) hold now:
    /// each memory file counted once, however many flows share it.
    pub fn memory_used(&self, uid: Option<u32>) -> u64 {
        let mut seen = HashSet::new();
        let mut total = 0u64;
        let mut count = |r: &netsift_graph::shm::Region| {
            if seen.insert(r as *const _ as usize) {
                total += r.len() as u64;
            }
        };
        for s in self.sessions.values() {
            if uid.is_some_and(|u| u != s.cred.uid) {
                continue;
            }
            for (&id, reader) in &s.flows {
                if let Some(regions) = reader.shared_regions() {
                    count(regions.pbuf);
                    count(regions.ibuf);
                    count(regions.ctrl);
                }
                for i in 0..self.runtime.flow_nodes(id).len() {
                    if let Some(m) = self.runtime.mbuf(id, i)
                        && let Some(r) = m.region()
                    {
                        count(r);
                    }
                }
            }
        }
        total
    }

    /// The reply words and descriptors of a new flow.
    fn export(&self, id: FlowId, reader: &Reader) -> io::Result<(String, Vec<OwnedFd>)> {
        let regions = reader
            .shared_regions()
            .ok_or_else(|| io::Error::other("the flow's buffers are not shared"))?;
        let mut fds = vec![
            regions.pbuf.read_only_fd()?,
            regions.ibuf.read_only_fd()?,
            regions.ctrl.fd().try_clone_to_owned()?,
        ];
        let nodes = self.runtime.flow_nodes(id);
        let mut mbufs = Vec::new();
        for i in 0..nodes.len() {
            if let Some(m) = self.runtime.mbuf(id, i)
                && let Some(r) = m.region()
            {
                fds.push(r.fd().try_clone_to_owned()?);
                mbufs.push(format!("{i}:{}", m.len()));
            }
        }
        let link = nodes
            .last()
            .and_then(|&n| self.runtime.graph().node(n))
            .map_or(1, |n| n.target.link_type.0);
        let mut words = format!("flow={id} link={link}");
        if !mbufs.is_empty() {
            words.push_str(&format!(" mbufs={}", mbufs.join(",")));
        }
        Ok((words, fds))
    }
}

/// A daemon running on a thread of this process ([`Daemon::spawn`]): for programs that embed
/// netsiftd, and for tests. Dropping it stops the daemon (flows closed, socket file removed).
#[derive(Debug)]
pub struct Background {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<()>>>,
    status: Arc<Mutex<Status>>,
    socket: PathBuf,
}

impl Background {
    /// Where the daemon listens.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// What the daemon held after its latest turn (a request answered before this call has
    /// been accounted for once the next turn ends).
    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stop the daemon and wait for it; its status after its last turn (before it closed what
    /// was still open), or the error that ended it.
    pub fn stop(mut self) -> io::Result<Status> {
        self.halt()?;
        Ok(self.status())
    }

    fn halt(&mut self) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the daemon thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

fn result(r: Result<(), netsift_graph::Error>) -> Reply {
    match r {
        Ok(()) => Reply::Ok(String::new()),
        Err(e) => Reply::Err(e.to_string()),
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.shutdown();
    }
}
