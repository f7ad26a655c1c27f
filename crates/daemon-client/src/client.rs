//! The application side of `netsiftd`: connect, open flows, read their packets from shared
//! memory.
//!
//! ```no_run
//! use netsift_daemon_client::client::{Client, OpenOptions};
//!
//! let client = Client::connect_default()?;
//! let mut flow = client.open(r#"(device,"eth0") -> (bpf,"udp port 53")"#, &OpenOptions::default())?;
//! loop {
//!     flow.reader().wait_for(64, std::time::Duration::from_millis(100));
//!     while let Some(p) = flow.reader().next() {
//!         println!("{} bytes", p.wire_len);
//!     }
//!     flow.reader().release(); // once per batch: no system call per packet
//! }
//! # Ok::<(), netsift_daemon_client::client::ClientError>(())
//! ```
//!
//! A [`Flow`]'s reader is a [`Reader`] over the group's PBuf and the flow's IBuf mapped
//! read-only, with its `R` in a control page mapped read-write: [`Reader::next`] reads the
//! next entry with no system call, [`Reader::release`] publishes `R` with one store. Dropping
//! the flow closes it in the daemon; if the process dies, the daemon closes its flows itself.

use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use netsift_capture::LinkType;
use netsift_ring::MBuf;
use netsift_ring::buffer::Reader;
use netsift_ring::shm::Region;

pub use crate::proto::OpenOptions;
use crate::proto::{Reply, Request, words};
use crate::sock::Conn;

/// Where `netsiftd` listens unless told otherwise (`NETSIFT_SOCKET` overrides it).
pub const DEFAULT_SOCKET: &str = "/run/netsift/netsiftd.sock";

/// The socket path applications use: `$NETSIFT_SOCKET`, else [`DEFAULT_SOCKET`].
pub fn default_socket() -> PathBuf {
    std::env::var_os("NETSIFT_SOCKET")
        .filter(|s| !s.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_SOCKET), PathBuf::from)
}

/// Why a request failed.
#[derive(Debug)]
pub enum ClientError {
    /// The connection failed (the daemon is not running, or went away).
    Io(io::Error),
    /// The daemon refused the request; the message says why (flow errors with a caret).
    Refused(String),
    /// The daemon's reply made no sense.
    Protocol(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "netsiftd: {e}"),
            ClientError::Refused(m) => f.write_str(m),
            ClientError::Protocol(m) => write!(f, "netsiftd: {m}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> ClientError {
        ClientError::Io(e)
    }
}

/// A connection to `netsiftd`. Cloning shares it.
#[derive(Clone, Debug)]
pub struct Client {
    conn: Arc<Mutex<Conn>>,
    path: PathBuf,
}

/// A flow's counters, as the daemon sees them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Entries appended to the flow's IBuf.
    pub appended: u64,
    /// Packets the application read.
    pub delivered: u64,
    /// Packets the flow accepted but that did not fit (slow-reader preference).
    pub dropped: u64,
    /// Packets overwritten before they were read (fast-reader preference).
    pub overwritten: u64,
}

impl Client {
    /// Connect to the daemon at `path`.
    pub fn connect(path: impl AsRef<Path>) -> Result<Client, ClientError> {
        let path = path.as_ref().to_path_buf();
        let conn = Conn::connect(&path).map_err(|e| {
            ClientError::Io(io::Error::new(
                e.kind(),
                format!("cannot connect to {}: {e}", path.display()),
            ))
        })?;
        Ok(Client {
            conn: Arc::new(Mutex::new(conn)),
            path,
        })
    }

    /// Connect to the daemon at [`default_socket`].
    pub fn connect_default() -> Result<Client, ClientError> {
        Client::connect(default_socket())
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn call(&self, req: &Request) -> Result<(String, Vec<OwnedFd>), ClientError> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        // The daemon may have said why it closed the connection (too many connections): a
        // message still queued after the error.
        let reason = |e: io::Error| match conn.recv(false) {
            Ok(Some((msg, _))) => match Reply::parse(&msg) {
                Ok(Reply::Err(m)) => ClientError::Refused(m),
                _ => ClientError::Io(e),
            },
            _ => ClientError::Io(e),
        };
        conn.send(req.encode().as_bytes(), &[]).map_err(reason)?;
        let Some((msg, fds)) = conn.recv(true).map_err(reason)? else {
            return Err(ClientError::Io(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the daemon closed the connection",
            )));
        };
        match Reply::parse(&msg).map_err(|e| ClientError::Protocol(e.0))? {
            Reply::Ok(w) => Ok((w, fds)),
            Reply::Err(m) => Err(ClientError::Refused(m)),
        }
    }

    /// Create, authorise and activate a flow (`graph`: one flow in the graph language,
    /// starting at a source, e.g. `(device,"eth0") -> (bpf,"tcp")`).
    pub fn open(&self, graph: &str, options: &OpenOptions) -> Result<Flow, ClientError> {
        let (w, fds) = self.call(&Request::Open {
            options: *options,
            graph: graph.to_string(),
        })?;
        let bad = |m: &str| ClientError::Protocol(format!("open reply `{w}`: {m}"));
        let mut id = None;
        let mut link = LinkType::ETHERNET;
        let mut mbuf_specs: Vec<(usize, usize)> = Vec::new();
        for (k, v) in words(&w).map_err(|e| bad(&e.0))? {
            match k {
                "flow" => id = v.parse().ok(),
                "link" => link = LinkType(v.parse().map_err(|_| bad("link"))?),
                "mbufs" => {
                    for m in v.split(',') {
                        let (i, b) = m.split_once(':').ok_or_else(|| bad("mbufs"))?;
                        mbuf_specs.push((
                            i.parse().map_err(|_| bad("mbufs"))?,
                            b.parse().map_err(|_| bad("mbufs"))?,
                        ));
                    }
                }
                _ => {}
            }
        }
        let id: u64 = id.ok_or_else(|| bad("no flow number"))?;
        if fds.len() != 3 + mbuf_specs.len() {
            return Err(bad(&format!(
                "{} descriptors for {} buffers",
                fds.len(),
                3 + mbuf_specs.len()
            )));
        }
        let mut fds = fds.into_iter();
        let mut next = || fds.next().ok_or_else(|| bad("descriptor missing"));
        let pbuf = Region::map(next()?, false)?;
        let ibuf = Region::map(next()?, false)?;
        let ctrl = Region::map(next()?, true)?;
        let reader =
            Reader::attach(pbuf, ibuf, ctrl).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let mut mbufs = Vec::new();
        for (i, bytes) in mbuf_specs {
            mbufs.push((i, MBuf::attach(Region::map(next()?, true)?, bytes)?));
        }
        Ok(Flow {
            id,
            client: self.clone(),
            reader,
            mbufs,
            link_type: link,
            closed: false,
        })
    }

    /// The caller's flow group and flows: `group=… flows=1,2`.
    pub fn list(&self) -> Result<String, ClientError> {
        Ok(self.call(&Request::List)?.0)
    }
}

/// An open flow: its reader and its filters' MBufs. Dropping it closes it.
pub struct Flow {
    id: u64,
    client: Client,
    reader: Reader,
    mbufs: Vec<(usize, MBuf)>,
    link_type: LinkType,
    closed: bool,
}

impl fmt::Debug for Flow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flow")
            .field("id", &self.id)
            .field("link_type", &self.link_type)
            .finish_non_exhaustive()
    }
}

impl Flow {
    /// The flow's number in the daemon.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The link type of the packets the flow delivers.
    pub fn link_type(&self) -> LinkType {
        self.link_type
    }

    /// The flow's reader: [`Reader::next`], [`Reader::release`], [`Reader::wait_for`], …
    pub fn reader(&mut self) -> &mut Reader {
        &mut self.reader
    }

    /// The MBuf of the flow's `index`-th filter (in the order of the text, sources included),
    /// if it has one.
    pub fn mbuf(&self, index: usize) -> Option<&MBuf> {
        self.mbufs.iter().find(|(i, _)| *i == index).map(|(_, m)| m)
    }

    fn simple(&self, req: Request) -> Result<String, ClientError> {
        Ok(self.client.call(&req)?.0)
    }

    /// The flow's counters from the daemon.
    pub fn stats(&self) -> Result<FlowStats, ClientError> {
        let w = self.simple(Request::Stats(self.id))?;
        let mut st = FlowStats::default();
        for (k, v) in words(&w).map_err(|e| ClientError::Protocol(e.0))? {
            let n = v
                .parse()
                .map_err(|_| ClientError::Protocol(format!("stats `{w}`")))?;
            match k {
                "appended" => st.appended = n,
                "delivered" => st.delivered = n,
                "dropped" => st.dropped = n,
                "overwritten" => st.overwritten = n,
                _ => {}
            }
        }
        Ok(st)
    }

    /// Stop delivery to the flow (its filters keep running for other flows).
    pub fn pause(&self) -> Result<(), ClientError> {
        self.simple(Request::Pause(self.id)).map(drop)
    }

    /// Deliver again.
    pub fn resume(&self) -> Result<(), ClientError> {
        self.simple(Request::Resume(self.id)).map(drop)
    }

    /// Close the flow in the daemon.
    pub fn close(mut self) -> Result<(), ClientError> {
        self.closed = true;
        self.simple(Request::Close(self.id)).map(drop)
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.simple(Request::Close(self.id));
        }
    }
}
