//! Live capture through `netsiftd`: when the daemon runs, a live handle is a flow of the
//! daemon's graph, `(device,"IF")`, or `(device,"IF") -> (bpf,"EXPR")` once a filter is set,
//! read from shared memory with no system call per packet.
//!
//! - [`attempt`] decides at `pcap_activate` whether to go through the daemon
//!   (`NETSIFT_PCAP_DIRECT=1` never does; `NETSIFT_SOCKET` or the default socket file);
//! - the expressions `pcap_compile` compiled are remembered here ([`remember`], [`forget`],
//!   [`lookup`]), keyed by the instructions' address, so that `pcap_setfilter` can hand the
//!   expression to the daemon instead of running the program in the application.

use std::ffi::c_int;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use netsift_bpf::Insn;
use netsift_capture::LinkType;
use netsift_capture::live::Sender;
use netsift_daemon_client::client::{self, Client, ClientError, Flow, OpenOptions};
use netsift_daemon_client::{Preference, proto};

/// Set to `1` to capture directly (`AF_PACKET`) even when `netsiftd` runs.
pub(crate) const DIRECT_ENV: &str = "NETSIFT_PCAP_DIRECT";

/// libpcap's default capture buffer (2 MiB), used when `pcap_set_buffer_size` was not called.
const DEFAULT_BUFFER: u64 = 2 << 20;
/// The fewest PBuf slots (and IBuf entries) a flow asks for: the daemon's capture loop hands
/// packets over in bursts (a TPACKET_V3 block at a time), which the buffer must absorb.
const MIN_SLOTS: u64 = 4096;
/// The bytes of a PBuf slot (a longer packet takes several).
const SLOT: u32 = 256;
/// The smallest and largest packet kept (the snapshot length's range).
const MIN_SLOT: u32 = 64;
const MAX_SLOT: u32 = 262_144;
/// How often an idle reader asks the daemon whether the flow is still there.
const ALIVE_EVERY: Duration = Duration::from_millis(100);

/// The message of a read after the daemon closed the flow (or went away).
pub(crate) const CLOSED: &str =
    "netsiftd closed the flow (the daemon stopped, or the capture source ended)";

/// A live capture through the daemon.
pub(crate) struct DaemonCapture {
    pub(crate) flow: Flow,
    client: Client,
    options: OpenOptions,
    /// The expression the daemon runs for this flow (`None`: the flow is unfiltered).
    pub(crate) expr: Option<String>,
    /// Opened on the first `pcap_inject` (sending does not go through the daemon).
    pub(crate) sender: Option<Sender>,
    /// Set once the flow is known to be closed: reads fail from then on.
    pub(crate) closed: bool,
    last_alive: Instant,
}

/// What [`attempt`] gave.
pub(crate) enum Attempt {
    /// A flow of the daemon.
    Opened(Box<DaemonCapture>, LinkType),
    /// The daemon is not to be used, or could not be reached: capture directly.
    Direct,
    /// The daemon was named explicitly (`NETSIFT_SOCKET`) and refused the flow.
    Refused(String),
}

/// A client error as a message that names the daemon once (its first line: flow errors have
/// caret lines under the flow text, which do not fit an error buffer).
pub(crate) fn message(e: &ClientError) -> String {
    let m = e.to_string();
    let m = m.lines().next().unwrap_or("").trim();
    if m.starts_with("netsiftd") {
        m.to_string()
    } else {
        format!("netsiftd: {m}")
    }
}

/// `"text"` in the graph language: `"` and `\` escaped.
pub(crate) fn quote(text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 2);
    s.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('"');
    s
}

/// The flow text for `device`, filtered by `expr` in the daemon if given.
pub(crate) fn graph_text(device: &str, expr: Option<&str>) -> String {
    match expr {
        None => format!("(device,{})", quote(device)),
        Some(e) => format!("(device,{}) -> (bpf,{})", quote(device), quote(e)),
    }
}

/// The buffering a handle asks for: slots of [`SLOT`] bytes, as many as the buffer size holds
/// (libpcap's 2 MiB by default), at least [`MIN_SLOTS`]; packets up to the snapshot length
/// (64 ..= 262144 bytes) stored whole, a long one across consecutive slots — so small packets
/// lie densely in the daemon's buffer, as in the kernel's TPACKET_V3 blocks.
pub(crate) fn open_options(snaplen: i32, buffer_size: i32) -> OpenOptions {
    let max = u32::try_from(snaplen)
        .unwrap_or(MAX_SLOT)
        .clamp(MIN_SLOT, MAX_SLOT);
    let slot = SLOT.min(max);
    let buffer = u64::try_from(buffer_size)
        .ok()
        .filter(|b| *b > 0)
        .unwrap_or(DEFAULT_BUFFER);
    let most = proto::MAX_PBUF_BYTES / u64::from(slot);
    // At least two of the longest packet (the daemon caps it at half the ring).
    let least = (2 * u64::from(max.div_ceil(slot))).max(MIN_SLOTS);
    let slots = (buffer / u64::from(slot)).max(least).min(most);
    let slots = u32::try_from(slots).unwrap_or(u32::MAX);
    OpenOptions {
        preference: Preference::SlowReader,
        slots,
        slot_size: slot,
        max_packet: max,
        ibuf: slots.min(proto::MAX_IBUF),
        callback_every: None,
        // A libpcap handle reads every packet of its flow and never pauses it: copies of one
        // tool with the same filter read one IBuf.
        share: true,
    }
}

/// Whether to try the daemon, and whether it was named explicitly (`NETSIFT_SOCKET`).
fn wanted() -> Option<bool> {
    if std::env::var_os(DIRECT_ENV).is_some_and(|v| v == "1") {
        return None;
    }
    let explicit = std::env::var_os("NETSIFT_SOCKET").is_some_and(|v| !v.is_empty());
    (explicit || Path::new(client::DEFAULT_SOCKET).exists()).then_some(explicit)
}

/// At `pcap_activate`: a flow `(device,"IF")` of the daemon, if one should and can be opened.
pub(crate) fn attempt(device: &str, snaplen: i32, buffer_size: i32) -> Attempt {
    let Some(explicit) = wanted() else {
        return Attempt::Direct;
    };
    let Ok(client) = Client::connect(client::default_socket()) else {
        return Attempt::Direct;
    };
    let options = open_options(snaplen, buffer_size);
    match client.open(&graph_text(device, None), &options) {
        Ok(flow) => {
            let lt = flow.link_type();
            Attempt::Opened(
                Box::new(DaemonCapture {
                    flow,
                    client,
                    options,
                    expr: None,
                    sender: None,
                    closed: false,
                    last_alive: Instant::now(),
                }),
                lt,
            )
        }
        Err(ClientError::Refused(m)) if explicit => {
            // The first line: the caret lines under the flow text do not fit an error buffer.
            let m = m.lines().next().unwrap_or("").trim();
            Attempt::Refused(format!("netsiftd refused the capture: {m}"))
        }
        Err(_) => Attempt::Direct,
    }
}

impl DaemonCapture {
    /// Replaces the flow by one filtered by `expr` (`None`: unfiltered) if it differs: the new
    /// flow is opened first, then the old one closed.
    pub(crate) fn reopen(&mut self, device: &str, expr: Option<String>) -> Result<(), String> {
        if self.expr == expr {
            return Ok(());
        }
        let flow = self
            .client
            .open(&graph_text(device, expr.as_deref()), &self.options)
            .map_err(|e| message(&e))?;
        self.flow = flow;
        self.expr = expr;
        self.closed = false;
        Ok(())
    }

    /// Whether the flow is still open in the daemon (asked at most every 100 ms; a daemon that
    /// went away fails the request).
    pub(crate) fn alive(&mut self) -> bool {
        if self.closed {
            return false;
        }
        if self.last_alive.elapsed() < ALIVE_EVERY {
            return true;
        }
        self.last_alive = Instant::now();
        if self.flow.stats().is_err() {
            self.closed = true;
        }
        !self.closed
    }
}

/// What `pcap_compile` compiled, remembered for `pcap_setfilter`.
#[derive(Clone, Debug)]
pub(crate) struct Compiled {
    pub(crate) expr: String,
    /// Not passed on: the daemon always optimizes, which changes neither which packets pass
    /// nor the filter's return value.
    #[allow(dead_code)]
    pub(crate) optimize: bool,
    pub(crate) netmask: u32,
    /// The DLT it was compiled for.
    pub(crate) linktype: c_int,
    /// The snapshot length it was compiled for (what it returns for an accepted packet).
    pub(crate) snaplen: c_int,
    insns: Vec<Insn>,
}

/// The compiled programs still allocated, by the address of their instructions.
static PROGRAMS: Mutex<Vec<(usize, Compiled)>> = Mutex::new(Vec::new());

/// Remembers that the instructions at `at` were compiled from `expr`.
pub(crate) fn remember(
    at: usize,
    expr: &str,
    optimize: bool,
    netmask: u32,
    (linktype, snaplen): (c_int, c_int),
    insns: &[Insn],
) {
    let mut v = PROGRAMS.lock().unwrap_or_else(PoisonError::into_inner);
    v.retain(|(a, _)| *a != at);
    v.push((
        at,
        Compiled {
            expr: expr.to_string(),
            optimize,
            netmask,
            linktype,
            snaplen,
            insns: insns.to_vec(),
        },
    ));
}

/// Forgets the program at `at` (`pcap_freecode`).
pub(crate) fn forget(at: usize) {
    let mut v = PROGRAMS.lock().unwrap_or_else(PoisonError::into_inner);
    v.retain(|(a, _)| *a != at);
}

/// What compiled the instructions `insns` at `at`, if `pcap_compile` did (and they were not
/// changed since).
pub(crate) fn lookup(at: usize, insns: &[Insn]) -> Option<Compiled> {
    let v = PROGRAMS.lock().unwrap_or_else(PoisonError::into_inner);
    v.iter()
        .find(|(a, c)| *a == at && c.insns == insns)
        .map(|(_, c)| c.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_text_quotes() {
        assert_eq!(graph_text("eth0", None), r#"(device,"eth0")"#);
        assert_eq!(
            graph_text("veth1", Some(r#"udp and ether[0] = 1 \ "x""#)),
            r#"(device,"veth1") -> (bpf,"udp and ether[0] = 1 \\ \"x\"")"#
        );
        // The graph language's own quoting (netsift-graph writes strings the same way and tests
        // that its parser reads them back): `"` and `\` escaped, nothing else.
        assert_eq!(
            graph_text("a\"b", Some("port 53")),
            r#"(device,"a\"b") -> (bpf,"port 53")"#
        );
        assert_eq!(graph_text(r"a\b", None), r#"(device,"a\\b")"#);
        assert_eq!(quote("-> (x,y);#"), r#""-> (x,y);#""#);
    }

    #[test]
    fn buffering_follows_snaplen_and_buffer_size() {
        // tcpdump's defaults: 2 MiB of 256-byte slots, packets up to 262144 bytes whole.
        let o = open_options(262_144, 0);
        assert_eq!(
            (o.slot_size, o.max_packet, o.slots, o.ibuf),
            (256, 262_144, 8192, 8192)
        );
        // -B 8192: 8 MiB.
        assert_eq!(open_options(262_144, 8 << 20).slots, 32768);
        let o = open_options(1500, 0);
        assert_eq!((o.slot_size, o.max_packet, o.slots), (256, 1500, 8192));
        let o = open_options(10, 1 << 20);
        assert_eq!((o.slot_size, o.max_packet, o.slots), (64, 64, 16384));
        let o = open_options(-1, i32::MAX);
        assert_eq!((o.slot_size, o.max_packet), (256, 262_144));
        assert!(u64::from(o.slots) * 256 <= proto::MAX_PBUF_BYTES);
    }

    #[test]
    fn programs_are_remembered_until_freed() {
        let insns = [Insn {
            code: 6,
            jt: 0,
            jf: 0,
            k: 1,
        }];
        remember(0x10, "udp", true, 0, (1, 262_144), &insns);
        assert_eq!(lookup(0x10, &insns).map(|c| c.expr), Some("udp".into()));
        let other = [Insn { k: 2, ..insns[0] }];
        assert!(lookup(0x10, &other).is_none());
        forget(0x10);
        assert!(lookup(0x10, &insns).is_none());
    }
}
