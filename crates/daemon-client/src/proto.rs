//! The messages between `netsiftd` and its applications: text, one message per
//! `SOCK_SEQPACKET` packet.
//!
//! A request is a line — a verb and `key=value` words — followed, for `open`, by the flow's
//! graph text on the next lines. A reply is `ok` with `key=value` words, or `err` and a message
//! on the following lines (flow errors keep their caret lines).
//!
//! ```text
//! → open pref=slow slots=4096 slot_size=2048 ibuf=4096
//!   (device,"veth1") -> (bpf,"udp") -> (packetcount,,8)
//! ← ok flow=3 link=1 mbufs=2:8          + descriptors: PBuf (read-only), IBuf (read-only),
//!                                          control page, one MBuf per `index:bytes`
//! → stats 3
//! ← ok appended=10 delivered=10 dropped=0 overwritten=0
//! → close 3
//! ← ok
//! ```

use std::fmt;

use netsift_ring::buffer::Preference;

/// How a flow asks to be buffered (the group's PBuf settings are taken from the group's first
/// flow).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    /// Slow- or fast-reader preference.
    pub preference: Preference,
    /// PBuf slots.
    pub slots: u32,
    /// Bytes per PBuf slot.
    pub slot_size: u32,
    /// The longest packet stored (longer ones are cut): 0 means one slot; more lets a packet
    /// span consecutive slots (small slots then hold small packets densely).
    pub max_packet: u32,
    /// IBuf entries of the flow.
    pub ibuf: u32,
    /// The callback period the application will use, if any (checked by the policy).
    pub callback_every: Option<u64>,
    /// Share the IBuf with the group's other flows that asked for it and receive exactly the
    /// same packets (`share=1`; see `FlowOptions::share_ibuf` in netsift-graph): one entry
    /// per packet for all of them, and such a flow cannot be paused.
    pub share: bool,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions {
            preference: Preference::SlowReader,
            slots: 4096,
            slot_size: 2048,
            max_packet: 0,
            ibuf: 4096,
            callback_every: None,
            share: false,
        }
    }
}

/// The largest PBuf (slots × slot size) and IBuf a request may ask for.
pub const MAX_PBUF_BYTES: u64 = 1 << 30;
/// The most IBuf entries a request may ask for.
pub const MAX_IBUF: u32 = 1 << 24;

/// A request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Create, authorise and activate a flow.
    Open {
        /// Buffering.
        options: OpenOptions,
        /// The graph text (one flow).
        graph: String,
    },
    /// Close a flow.
    Close(u64),
    /// Stop delivering to a flow.
    Pause(u64),
    /// Deliver again.
    Resume(u64),
    /// A flow's counters.
    Stats(u64),
    /// The caller's flows.
    List,
}

/// A malformed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtoError(pub String);

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtoError {}

fn err<T>(m: impl Into<String>) -> Result<T, ProtoError> {
    Err(ProtoError(m.into()))
}

/// The `key=value` words of a line, in order.
pub fn words(line: &str) -> Result<Vec<(&str, &str)>, ProtoError> {
    line.split_ascii_whitespace()
        .map(|w| {
            w.split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| ProtoError(format!("`{w}` is not key=value")))
        })
        .collect()
}

fn number<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ProtoError> {
    v.parse()
        .map_err(|_| ProtoError(format!("{key}={v}: not a number in range")))
}

fn flow_id(verb: &str, rest: &str) -> Result<u64, ProtoError> {
    let rest = rest.trim();
    if rest.is_empty() {
        return err(format!("{verb}: the flow number is missing"));
    }
    rest.parse()
        .map_err(|_| ProtoError(format!("{verb}: `{rest}` is not a flow number")))
}

impl Request {
    /// The message text.
    pub fn encode(&self) -> String {
        match self {
            Request::Open { options: o, graph } => {
                let mut s = format!(
                    "open pref={} slots={} slot_size={} ibuf={}",
                    match o.preference {
                        Preference::SlowReader => "slow",
                        Preference::FastReader => "fast",
                    },
                    o.slots,
                    o.slot_size,
                    o.ibuf
                );
                if o.max_packet != 0 {
                    s.push_str(&format!(" max={}", o.max_packet));
                }
                if let Some(n) = o.callback_every {
                    s.push_str(&format!(" callback={n}"));
                }
                if o.share {
                    s.push_str(" share=1");
                }
                s.push('\n');
                s.push_str(graph);
                s
            }
            Request::Close(id) => format!("close {id}"),
            Request::Pause(id) => format!("pause {id}"),
            Request::Resume(id) => format!("resume {id}"),
            Request::Stats(id) => format!("stats {id}"),
            Request::List => "list".into(),
        }
    }

    /// Parse a message (from an application: anything may arrive).
    pub fn parse(msg: &[u8]) -> Result<Request, ProtoError> {
        let text = std::str::from_utf8(msg).map_err(|e| {
            ProtoError(format!(
                "the request is not UTF-8 (byte {})",
                e.valid_up_to()
            ))
        })?;
        let (line, body) = text.split_once('\n').unwrap_or((text, ""));
        let (verb, rest) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
        match verb {
            "open" => {
                let mut o = OpenOptions::default();
                for (k, v) in words(rest)? {
                    match k {
                        "pref" => {
                            o.preference = match v {
                                "slow" => Preference::SlowReader,
                                "fast" => Preference::FastReader,
                                _ => return err(format!("pref={v}: expected slow or fast")),
                            }
                        }
                        "slots" => o.slots = number(k, v)?,
                        "slot_size" => o.slot_size = number(k, v)?,
                        "ibuf" => o.ibuf = number(k, v)?,
                        "max" => o.max_packet = number(k, v)?,
                        "callback" => o.callback_every = Some(number(k, v)?),
                        "share" => {
                            o.share = match v {
                                "0" => false,
                                "1" => true,
                                _ => return err(format!("share={v}: expected 0 or 1")),
                            }
                        }
                        _ => return err(format!("open: unknown option `{k}`")),
                    }
                }
                if o.slots == 0 || o.slot_size == 0 || o.ibuf == 0 {
                    return err("open: slots, slot_size and ibuf must be at least 1");
                }
                if u64::from(o.slots) * u64::from(o.slot_size) > MAX_PBUF_BYTES {
                    return err(format!(
                        "open: slots × slot_size = {} bytes is more than the limit of {MAX_PBUF_BYTES}",
                        u64::from(o.slots) * u64::from(o.slot_size)
                    ));
                }
                if o.ibuf > MAX_IBUF {
                    return err(format!(
                        "open: ibuf={} is more than the limit of {MAX_IBUF}",
                        o.ibuf
                    ));
                }
                if body.trim().is_empty() {
                    return err(
                        "open: the flow's graph text is missing (on the lines after `open`)",
                    );
                }
                Ok(Request::Open {
                    options: o,
                    graph: body.to_string(),
                })
            }
            "close" => Ok(Request::Close(flow_id(verb, rest)?)),
            "pause" => Ok(Request::Pause(flow_id(verb, rest)?)),
            "resume" => Ok(Request::Resume(flow_id(verb, rest)?)),
            "stats" => Ok(Request::Stats(flow_id(verb, rest)?)),
            "list" if rest.trim().is_empty() => Ok(Request::List),
            "" => err("empty request"),
            _ => err(format!(
                "unknown request `{verb}` (expected open, close, pause, resume, stats or list)"
            )),
        }
    }
}

/// A reply: `ok` and its words, or an error message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Success, with `key=value` words (and the lines after the first, for `list`).
    Ok(String),
    /// Failure.
    Err(String),
}

impl Reply {
    /// The message text.
    pub fn encode(&self) -> String {
        match self {
            Reply::Ok(w) if w.is_empty() => "ok".into(),
            Reply::Ok(w) => format!("ok {w}"),
            Reply::Err(m) => format!("err\n{m}"),
        }
    }

    /// Parse a reply.
    pub fn parse(msg: &[u8]) -> Result<Reply, ProtoError> {
        let text = String::from_utf8_lossy(msg);
        if let Some(m) = text.strip_prefix("err\n") {
            return Ok(Reply::Err(m.to_string()));
        }
        if text == "ok" {
            return Ok(Reply::Ok(String::new()));
        }
        match text.strip_prefix("ok ") {
            Some(w) => Ok(Reply::Ok(w.to_string())),
            None => err(format!(
                "the daemon's reply `{}` is neither ok nor err",
                text.lines().next().unwrap_or("")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        let reqs = [
            Request::Open {
                options: OpenOptions {
                    preference: Preference::FastReader,
                    slots: 8,
                    slot_size: 128,
                    max_packet: 65_535,
                    ibuf: 16,
                    callback_every: Some(100),
                    share: true,
                },
                graph: "(device,\"veth0\") -> (bpf,\"udp\")\n".into(),
            },
            Request::Open {
                options: OpenOptions::default(),
                graph: "(gen,1,10)".into(),
            },
            Request::Close(3),
            Request::Pause(4),
            Request::Resume(5),
            Request::Stats(u64::MAX),
            Request::List,
        ];
        for r in reqs {
            assert_eq!(Request::parse(r.encode().as_bytes()), Ok(r));
        }
        for r in [
            Reply::Ok(String::new()),
            Reply::Ok("flow=1".into()),
            Reply::Err("bad\n  ^".into()),
        ] {
            assert_eq!(Reply::parse(r.encode().as_bytes()), Ok(r));
        }
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        let e = |m: &[u8]| Request::parse(m).unwrap_err().0;
        assert_eq!(e(b""), "empty request");
        assert!(e(b"frobnicate 1").starts_with("unknown request `frobnicate`"));
        assert_eq!(e(b"close"), "close: the flow number is missing");
        assert_eq!(e(b"close x"), "close: `x` is not a flow number");
        assert_eq!(
            e(b"open pref=medium\n(gen,1,1)"),
            "pref=medium: expected slow or fast"
        );
        assert_eq!(
            e(b"open slots=-1\n(gen,1,1)"),
            "slots=-1: not a number in range"
        );
        assert_eq!(e(b"open slots\n(gen,1,1)"), "`slots` is not key=value");
        assert_eq!(
            e(b"open color=red\n(gen,1,1)"),
            "open: unknown option `color`"
        );
        assert!(e(b"open slots=1000000 slot_size=100000\n(gen,1,1)").contains("limit"));
        assert!(e(b"open\n  \n").contains("graph text is missing"));
        assert!(e(b"open slots=0\nx").contains("at least 1"));
        assert!(e(b"\xff").contains("not UTF-8"));
        assert!(Reply::parse(b"maybe").is_err());
    }
}
