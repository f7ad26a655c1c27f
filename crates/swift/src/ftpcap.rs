//! FTPCap (paper §5.1): follow FTP control connections and capture their data connections.
//!
//! A passive-mode data connection is announced by the server's reply on the control connection,
//! `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)` (RFC 959) or `229 Entering Extended Passive
//! Mode (|||port|)` (RFC 2428); an active-mode one by the client's `PORT h1,h2,h3,h4,p1,p2` or
//! `EPRT |1|addr|port|` command. [`Tracker`] reads both directions of the control channel
//! (TCP port 21) and turns them into [`Event`]s: a data connection opens when announced and
//! closes with the ACK of the second FIN, or a RST. [`SwiftFtpCap`] applies the events to a
//! Swift filter, one pass per data connection, added and removed in place while another
//! thread filters; [`DataConn::expr`] gives the same filter as a tcpdump expression for engines
//! that must recompile.
//!
//! ```
//! use netsift_swift::ftpcap::{Event, SwiftFtpCap, Tracker};
//! use netsift_capture::generate::{FrameBuilder, TCP_ACK, TCP_PSH};
//!
//! let reply = FrameBuilder::new()
//!     .ipv4([198, 18, 10, 1], [198, 18, 20, 1])
//!     .tcp(21, 40000, TCP_PSH | TCP_ACK)
//!     .payload(b"227 Entering Passive Mode (198,18,10,1,195,80).\r\n")
//!     .build();
//! let mut tracker = Tracker::new();
//! let Some(Event::Open(conn)) = tracker.observe(&reply) else { panic!() };
//! assert_eq!(conn.port, 50000);
//! assert_eq!(conn.expr(), "host 198.18.20.1 and host 198.18.10.1 and tcp port 50000");
//!
//! let (writer, mut reader) = netsift_swift::open(262_144);
//! let mut cap = SwiftFtpCap::new(writer).unwrap();
//! cap.apply(&Event::Open(conn)).unwrap();
//! let data = FrameBuilder::new()
//!     .ipv4([198, 18, 20, 1], [198, 18, 10, 1])
//!     .tcp(30000, 50000, TCP_ACK)
//!     .build();
//! assert_ne!(reader.run(&data, data.len() as u32), 0);
//! ```

use std::collections::HashMap;
use std::net::IpAddr;

use netsift_wire::{IpProtocol, LinkType};

use crate::build;
use crate::filter::{PassId, UpdateError, Writer};

/// The FTP control port.
pub const FTP_CONTROL_PORT: u16 = 21;

/// A data connection as its announcement describes it: the connecting side's address, the
/// listening side's address and port. Packets of either direction match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataConn {
    /// The side that connects (the client in passive mode, the server in active mode).
    pub from: [u8; 4],
    /// The side that listens (the announced address).
    pub to: [u8; 4],
    /// The announced port.
    pub port: u16,
}

impl DataConn {
    /// The data connection as a tcpdump expression.
    pub fn expr(&self) -> String {
        let a = |x: [u8; 4]| format!("{}.{}.{}.{}", x[0], x[1], x[2], x[3]);
        format!(
            "host {} and host {} and tcp port {}",
            a(self.from),
            a(self.to),
            self.port
        )
    }

    /// The Swift pass for it: both addresses on either side, then IPv4 TCP (not a later
    /// fragment) with the port on either side. The listening address comes first: it is the
    /// cheapest test (two words at fixed offsets) and the most selective against other traffic.
    pub fn pass(&self) -> Vec<crate::Inst> {
        let mut v = build::ip4_host_either(&[u32::from_be_bytes(self.to)]);
        v.extend(build::ip4_host_either(&[u32::from_be_bytes(self.from)]));
        v.push(build::ip4_proto_ports(6, &[self.port]));
        v
    }

    /// The TCP flags of `t` when it is a packet of this connection.
    fn flags_of(&self, t: &Tcp4<'_>) -> Option<u8> {
        let fwd = t.src == self.from && t.dst == self.to && t.dport == self.port;
        let back = t.src == self.to && t.dst == self.from && t.sport == self.port;
        (fwd || back).then_some(t.flags)
    }
}

/// What the control channel or a data connection said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A data connection was announced: capture it from now on.
    Open(DataConn),
    /// A data connection ended (FIN from both sides, or RST): stop capturing it.
    Close(DataConn),
}

/// The IPv4/TCP fields FTPCap reads from an Ethernet frame.
struct Tcp4<'a> {
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    flags: u8,
    payload: &'a [u8],
}

/// The IPv4/TCP fields of an Ethernet frame, from `netsift-wire`'s flow-key parser; `None`
/// for anything else, for a later fragment and for a segment cut before its flags.
fn tcp4(frame: &[u8]) -> Option<Tcp4<'_>> {
    let flow = netsift_wire::flow::parse(LinkType::ETHERNET, frame)?;
    let (IpAddr::V4(src), IpAddr::V4(dst)) = (flow.key.src, flow.key.dst) else {
        return None;
    };
    if flow.key.proto != IpProtocol::TCP {
        return None;
    }
    let (sport, dport) = flow.key.ports?;
    Some(Tcp4 {
        src: src.octets(),
        dst: dst.octets(),
        sport,
        dport,
        flags: flow.tcp_flags?.0,
        payload: flow.payload(frame),
    })
}

/// Six comma-separated decimal numbers 0-255 (h1,h2,h3,h4,p1,p2), found anywhere in `text`
/// (RFC 1123 §4.1.2.6: clients must scan for them, not rely on the parentheses).
fn six_numbers(text: &[u8]) -> Option<([u8; 4], u16)> {
    let mut i = 0;
    while i < text.len() {
        if text[i].is_ascii_digit() {
            let mut nums = [0u32; 6];
            let mut j = i;
            let mut k = 0;
            loop {
                let start = j;
                let mut v = 0u32;
                while j < text.len() && text[j].is_ascii_digit() && j - start < 3 {
                    v = v * 10 + u32::from(text[j] - b'0');
                    j += 1;
                }
                if j == start || v > 255 {
                    break;
                }
                nums[k] = v;
                k += 1;
                if k == 6 || j >= text.len() || text[j] != b',' {
                    break;
                }
                j += 1;
            }
            // The last number must end before the text does: a packet cut by the snap length
            // could otherwise announce a wrong port.
            if k == 6 && j < text.len() {
                let a = [nums[0] as u8, nums[1] as u8, nums[2] as u8, nums[3] as u8];
                return Some((a, (nums[4] as u16) << 8 | nums[5] as u16));
            }
            // Skip this run of digits.
            while i < text.len() && text[i].is_ascii_digit() {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    None
}

/// `(|||port|)` of a 229 reply, with any delimiter (RFC 2428: a character in 33-126).
fn epsv_port(text: &[u8]) -> Option<u16> {
    let open = text.iter().position(|&b| b == b'(')?;
    let rest = &text[open + 1..];
    let d = *rest.first()?;
    if !(33..=126).contains(&d) || d.is_ascii_digit() || rest.get(1..3)? != [d, d] {
        return None;
    }
    let digits = &rest[3..];
    let end = digits.iter().position(|&b| b == d)?;
    let port: u32 = std::str::from_utf8(&digits[..end]).ok()?.parse().ok()?;
    u16::try_from(port).ok().filter(|&p| p != 0)
}

/// `EPRT |1|a.b.c.d|port|` (IPv4 only; any delimiter).
fn eprt(text: &[u8]) -> Option<([u8; 4], u16)> {
    let d = *text.first()?;
    let text = std::str::from_utf8(text.get(1..)?).ok()?;
    let mut parts = text.split(char::from(d));
    if parts.next()? != "1" {
        return None;
    }
    let addr: std::net::Ipv4Addr = parts.next()?.parse().ok()?;
    let port: u16 = parts.next()?.parse().ok()?;
    // The closing delimiter must be there (not cut off by the snap length).
    parts.next()?;
    (port != 0).then_some((addr.octets(), port))
}

/// Reads FTP control connections and data connections, and says when a data connection opens
/// or closes.
#[derive(Debug, Default)]
pub struct Tracker {
    /// Open data connections and the FIN flags seen (bit 0: from `from`, bit 1: from `to`).
    open: HashMap<DataConn, u8>,
    /// Connections with both FINs seen, waiting for the last ACK.
    closing: usize,
}

impl Tracker {
    /// An empty tracker.
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// Data connections currently open.
    pub fn open_connections(&self) -> usize {
        self.open.len()
    }

    /// Read one Ethernet frame (a control packet or a packet of a data connection; anything
    /// else is ignored).
    pub fn observe(&mut self, frame: &[u8]) -> Option<Event> {
        let t = tcp4(frame)?;
        if t.sport == FTP_CONTROL_PORT && !t.payload.is_empty() {
            // Server to client: a passive-mode reply opens a connection from the client.
            let conn = match t.payload.get(..4)? {
                b"227 " | b"227-" => {
                    let (mut addr, port) = six_numbers(&t.payload[4..])?;
                    if addr == [0; 4] {
                        addr = t.src;
                    }
                    DataConn {
                        from: t.dst,
                        to: addr,
                        port,
                    }
                }
                b"229 " | b"229-" => DataConn {
                    from: t.dst,
                    to: t.src,
                    port: epsv_port(&t.payload[4..])?,
                },
                _ => return None,
            };
            return self.open(conn);
        }
        if t.dport == FTP_CONTROL_PORT && t.payload.len() > 5 {
            // Client to server: an active-mode command opens a connection from the server.
            let upper = t.payload[..5].to_ascii_uppercase();
            let (addr, port) = match &upper[..] {
                b"PORT " => six_numbers(&t.payload[5..])?,
                b"EPRT " => eprt(&t.payload[5..])?,
                _ => return None,
            };
            return self.open(DataConn {
                from: t.dst,
                to: addr,
                port,
            });
        }
        if self.open.is_empty() || (t.flags & 0x05 == 0 && self.closing == 0) {
            return None;
        }
        // FIN, RST, or the last ACK on a data connection.
        let (&conn, fins) = self
            .open
            .iter_mut()
            .find(|(c, _)| c.flags_of(&t).is_some())?;
        let done = if t.flags & 0x04 != 0 {
            true
        } else if t.flags & 0x01 != 0 {
            *fins |= if t.src == conn.from { 1 } else { 2 };
            if *fins == 3 {
                self.closing += 1;
            }
            false
        } else {
            // The ACK of the second FIN ends the connection.
            *fins == 3
        };
        if done {
            if self.open.remove(&conn) == Some(3) {
                self.closing -= 1;
            }
            return Some(Event::Close(conn));
        }
        None
    }

    fn open(&mut self, conn: DataConn) -> Option<Event> {
        // A repeated announcement of an open connection changes nothing.
        if self.open.contains_key(&conn) {
            return None;
        }
        self.open.insert(conn, 0);
        Some(Event::Open(conn))
    }
}

/// FTPCap on a Swift filter: a pass for the control channel (`tcp port 21`) and one per open
/// data connection, added and removed in place.
pub struct SwiftFtpCap {
    writer: Writer,
    passes: HashMap<DataConn, PassId>,
}

impl SwiftFtpCap {
    /// Take over `writer`'s filter: clear it and add the control-channel pass.
    pub fn new(mut writer: Writer) -> Result<SwiftFtpCap, UpdateError> {
        writer.clear();
        writer.new_pass(&[build::ip4_proto_ports(6, &[FTP_CONTROL_PORT])])?;
        Ok(SwiftFtpCap {
            writer,
            passes: HashMap::new(),
        })
    }

    /// Apply one event: O(1) passes touched, whatever the number of connections.
    pub fn apply(&mut self, event: &Event) -> Result<(), UpdateError> {
        match event {
            Event::Open(c) => {
                if !self.passes.contains_key(c) {
                    let id = self.writer.new_pass(&c.pass())?;
                    self.passes.insert(*c, id);
                }
            }
            Event::Close(c) => {
                if let Some(id) = self.passes.remove(c) {
                    self.writer.del_pass(id)?;
                }
            }
        }
        Ok(())
    }

    /// Data connections with a pass.
    pub fn connections(&self) -> usize {
        self.passes.len()
    }

    /// The writer (to read the filter or make readers).
    pub fn writer(&self) -> &Writer {
        &self.writer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctrl(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, text: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[8, 0]);
        f[14] = 0x45;
        let total = (40 + text.len()) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[23] = 6;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f[46] = 0x50;
        f[47] = 0x18;
        f.extend_from_slice(text);
        f
    }

    const S: [u8; 4] = [198, 18, 10, 1];
    const C: [u8; 4] = [198, 18, 20, 1];

    #[test]
    fn replies_and_commands() {
        let mut t = Tracker::new();
        let cases: [(&[u8], bool, Option<DataConn>); 9] = [
            (
                b"227 Entering Passive Mode (198,18,10,1,195,80).\r\n",
                true,
                Some(DataConn {
                    from: C,
                    to: S,
                    port: 50000,
                }),
            ),
            // No parentheses (RFC 1123 says to scan for the numbers).
            (
                b"227 Entering Passive Mode 198,18,10,2,4,1\r\n",
                true,
                Some(DataConn {
                    from: C,
                    to: [198, 18, 10, 2],
                    port: 1025,
                }),
            ),
            // 0.0.0.0: the control connection's server.
            (
                b"227 =0,0,0,0,1,2\r\n",
                true,
                Some(DataConn {
                    from: C,
                    to: S,
                    port: 258,
                }),
            ),
            (
                b"229 Entering Extended Passive Mode (|||6446|)\r\n",
                true,
                Some(DataConn {
                    from: C,
                    to: S,
                    port: 6446,
                }),
            ),
            (
                b"229 Extended (!!!7000!)\r\n",
                true,
                Some(DataConn {
                    from: C,
                    to: S,
                    port: 7000,
                }),
            ),
            (b"229 bad (|||0|)\r\n", true, None),
            (b"227 too few (1,2,3,4,5)\r\n", true, None),
            (
                b"PORT 198,18,20,1,117,48\r\n",
                false,
                Some(DataConn {
                    from: S,
                    to: C,
                    port: 30000,
                }),
            ),
            (
                b"EPRT |1|198.18.20.1|30001|\r\n",
                false,
                Some(DataConn {
                    from: S,
                    to: C,
                    port: 30001,
                }),
            ),
        ];
        for (text, from_server, want) in cases {
            let f = if from_server {
                ctrl(S, C, 21, 40000, text)
            } else {
                ctrl(C, S, 40000, 21, text)
            };
            let got = t.observe(&f);
            assert_eq!(
                got,
                want.map(Event::Open),
                "{}",
                String::from_utf8_lossy(text)
            );
            // Truncations never panic, and never announce something else.
            for cut in 0..f.len() {
                let mut t2 = Tracker::new();
                if let Some(Event::Open(c)) = t2.observe(&f[..cut]) {
                    assert_eq!(Some(c), want);
                }
            }
        }
    }

    #[test]
    fn close_after_both_fins_or_rst() {
        let mut t = Tracker::new();
        let c = DataConn {
            from: C,
            to: S,
            port: 50000,
        };
        assert_eq!(
            t.observe(&ctrl(S, C, 21, 1, b"227 (198,18,10,1,195,80)\r\n")),
            Some(Event::Open(c))
        );
        let mut fin = ctrl(S, C, 50000, 30000, b"");
        fin[47] = 0x11;
        assert_eq!(t.observe(&fin), None);
        let mut fin2 = ctrl(C, S, 30000, 50000, b"");
        fin2[47] = 0x11;
        assert_eq!(t.observe(&fin2), None);
        let mut ack = ctrl(S, C, 50000, 30000, b"");
        ack[47] = 0x10;
        assert_eq!(t.observe(&ack), Some(Event::Close(c)));
        assert_eq!(t.open_connections(), 0);
        t.observe(&ctrl(S, C, 21, 1, b"227 (198,18,10,1,195,80)\r\n"));
        let mut rst = ctrl(C, S, 30000, 50000, b"");
        rst[47] = 0x04;
        assert_eq!(t.observe(&rst), Some(Event::Close(c)));
    }

    #[test]
    fn swift_passes_follow_the_events() {
        let (w, mut r) = crate::open(65535);
        let mut cap = SwiftFtpCap::new(w).unwrap();
        let conns: Vec<DataConn> = (0..50u16)
            .map(|i| DataConn {
                from: [198, 18, 20, i as u8],
                to: S,
                port: 50000 + i,
            })
            .collect();
        let data = |c: &DataConn| ctrl(c.from, c.to, 30000, c.port, b"x");
        for c in &conns {
            assert_eq!(r.run(&data(c), 60), 0);
            cap.apply(&Event::Open(*c)).unwrap();
            assert_ne!(r.run(&data(c), 60), 0);
        }
        assert_ne!(r.run(&ctrl(S, C, 21, 4000, b"220 hi"), 60), 0);
        for c in &conns[..25] {
            cap.apply(&Event::Close(*c)).unwrap();
            assert_eq!(r.run(&data(c), 60), 0);
        }
        assert_ne!(r.run(&data(&conns[30]), 60), 0);
        assert_eq!(cap.connections(), 25);
        assert_eq!(cap.writer().passes(), 26);
    }
}
