//! One-line, tcpdump-style packet summaries.
//!
//! [`summarize`] decodes a captured frame from its link layer down to the
//! transport (and through common tunnels) and renders one line like
//! tcpdump's default output without the timestamp:
//!
//! ```text
//! IP 198.18.0.1.443 > 198.18.0.2.51234: Flags [S.], seq 1, ack 2, win 512, length 0
//! IP6 fe80::1 > ff02::1: ICMP6, echo request, id 1, seq 2, length 64
//! ARP, Request who-has 198.18.0.2 tell 198.18.0.1, length 28
//! vlan 10 IP 10.0.0.1.53 > 10.0.0.2.1234: UDP, length 40
//! ```
//!
//! Lengths shown are taken from the headers (on-wire sizes), like tcpdump;
//! when the capture ends before a header does, the line ends with a
//! tcpdump-style marker such as ` [|tcp]`. Decoding never panics, whatever
//! the input, and is bounded in depth.

use core::fmt;
use std::fmt::Write as _;

use crate::arp::{ArpOperation, ArpPacket};
use crate::ethernet::{EtherType, EthernetFrame};
use crate::geneve::{GENEVE_PORT, GenevePacket};
use crate::gre::GrePacket;
use crate::icmp::{IcmpPacket, IcmpType};
use crate::icmpv6::{Icmpv6Packet, Icmpv6Type};
use crate::ip::IpProtocol;
use crate::ipv4::{Ipv4Address, Ipv4Packet};
use crate::ipv6::Ipv6Packet;
use crate::ipv6ext::{AuthHeader, ExtHeaders};
use crate::linktype::LinkType;
use crate::llc::{LlcPacket, LlcSap};
use crate::mpls::MplsPacket;
use crate::sctp::SctpPacket;
use crate::tcp::{TcpFlags, TcpPacket};
use crate::udp::UdpPacket;
use crate::vlan::VlanPacket;
use crate::vxlan::{VXLAN_PORT, VxlanPacket};

/// A one-line description of a packet; see [`summarize`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Summary {
    text: String,
    truncated: bool,
}

impl Summary {
    /// The summary line.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The summary line, by value.
    pub fn into_string(self) -> String {
        self.text
    }

    /// `true` when decoding stopped early because the capture ended before
    /// a header did (the line then carries a `[|proto]` marker).
    pub const fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl AsRef<str> for Summary {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

/// Decodes `data`, a frame captured on a link of type `link` whose
/// original length on the wire was `wire_len`, into a one-line summary.
///
/// Supported link types: `ETHERNET` (with 802.1Q/802.1ad tags shown as a
/// `vlan N ` prefix, LLC/SNAP, MPLS, PPPoE), `NULL` and `LOOP` (4-byte
/// address family in either byte order), `RAW`, `IPV4`, `IPV6` (the IP
/// version nibble decides, like tcpdump), `LINUX_SLL`, `LINUX_SLL2` (prefixed
/// with the direction: `In`, `Out`, `B`, `M`, `P`), `PPP`, `PPP_HDLC`,
/// `PPP_ETHER`, `C_HDLC` and `SLIP`. Other link types give
/// `link-type NAME, length N`.
///
/// Never panics, for any input. A `wire_len` smaller than `data.len()` is
/// treated as `data.len()`.
pub fn summarize(link: LinkType, data: &[u8], wire_len: u32) -> Summary {
    let wire = usize::try_from(wire_len)
        .unwrap_or(usize::MAX)
        .max(data.len());
    let mut d = Decoder {
        out: String::with_capacity(96),
        truncated: false,
        depth: 0,
        frame_wire: wire,
    };
    d.link(link, data, wire);
    let text = d.out.trim_end().to_owned();
    Summary {
        text,
        truncated: d.truncated,
    }
}

/// Maximum nesting of encapsulations (VLAN tags, MPLS, tunnels) decoded.
const MAX_DEPTH: u32 = 12;

/// `write!` into a `String` cannot fail.
macro_rules! w {
    ($dst:expr, $($arg:tt)*) => {{
        let _ = write!($dst, $($arg)*);
    }};
}

fn get16(d: &[u8], at: usize) -> Option<u16> {
    let b = d.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

fn get32(d: &[u8], at: usize) -> Option<u32> {
    let b = d.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// `data` after `n` bytes (empty if shorter).
fn skip(data: &[u8], n: usize) -> &[u8] {
    data.get(n..).unwrap_or(&[])
}

/// Ports of a transport header, for the `a.port > b.port` rendering.
type Ports = Option<(u16, u16)>;

struct Decoder {
    out: String,
    truncated: bool,
    depth: u32,
    frame_wire: usize,
}

impl Decoder {
    /// Appends a `[|name]` truncation marker.
    fn trunc(&mut self, out: &mut String, name: &str) {
        if !out.is_empty() && !out.ends_with(' ') {
            out.push(' ');
        }
        w!(out, "[|{name}]");
        self.truncated = true;
    }

    /// Enters one level of encapsulation; `false` (and a marker) when too
    /// deep.
    fn enter(&mut self, out: &mut String) -> bool {
        if self.depth >= MAX_DEPTH {
            self.trunc(out, "too deep");
            return false;
        }
        self.depth += 1;
        true
    }

    fn link(&mut self, link: LinkType, data: &[u8], wire: usize) {
        let mut out = String::new();
        match link {
            LinkType::ETHERNET => self.ether(&mut out, data, wire),
            LinkType::NULL | LinkType::LOOP => self.null(&mut out, data, wire, link),
            // Like tcpdump, trust the version nibble over the link type.
            LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 => self.raw_ip(&mut out, data, wire),
            LinkType::SLIP => match data.get(16..) {
                Some(rest) => self.raw_ip(&mut out, rest, wire.saturating_sub(16)),
                None => self.trunc(&mut out, "slip"),
            },
            LinkType::LINUX_SLL => self.sll(&mut out, data, wire),
            LinkType::LINUX_SLL2 => self.sll2(&mut out, data, wire),
            LinkType::PPP | LinkType::PPP_HDLC => self.ppp(&mut out, data, wire),
            LinkType::PPP_ETHER => self.pppoe(&mut out, EtherType::PPPOE_SESS, data, wire),
            LinkType::C_HDLC => {
                if data.len() < 4 {
                    self.trunc(&mut out, "chdlc");
                } else {
                    let ty = EtherType(get16(data, 2).unwrap_or(0));
                    let (rest, wire) = (&data[4..], wire.saturating_sub(4));
                    match ty.0 {
                        0x8035 => w!(out, "SLARP, length {wire}"),
                        0xfefe => w!(out, "{}, length {wire}", osi_name(rest.get(1))),
                        _ => self.ethertype(&mut out, ty, rest, wire),
                    }
                }
            }
            other => w!(out, "link-type {other}, length {wire}"),
        }
        self.out = out;
    }

    // ---------------------------------------------------------------- link

    fn ether(&mut self, out: &mut String, data: &[u8], wire: usize) {
        let Ok(frame) = EthernetFrame::new_checked(data) else {
            self.trunc(out, "ether");
            return;
        };
        self.ethertype(
            out,
            frame.ethertype(),
            frame.payload(),
            wire.saturating_sub(EthernetFrame::<&[u8]>::HEADER_LEN),
        );
    }

    /// Dispatches on an EtherType (or 802.3 length) for the bytes after it.
    fn ethertype(&mut self, out: &mut String, ty: EtherType, data: &[u8], wire: usize) {
        if !self.enter(out) {
            return;
        }
        match ty {
            t if t.is_length() => {
                // IEEE 802.3: the field is the LLC length.
                let len = usize::from(t.0);
                let llc = data.get(..len).unwrap_or(data);
                self.llc(out, llc, len);
            }
            t if t.is_vlan() => self.vlan(out, data, wire),
            EtherType::IPV4 => self.ipv4(out, data, wire),
            EtherType::IPV6 => self.ipv6(out, data, wire),
            EtherType::ARP | EtherType::RARP => self.arp(out, data, wire),
            EtherType::MPLS_UC | EtherType::MPLS_MC => self.mpls(out, data, wire),
            EtherType::PPPOE_SESS | EtherType::PPPOE_DISC => self.pppoe(out, ty, data, wire),
            EtherType::LLDP => w!(out, "LLDP, length {wire}"),
            EtherType::SLOW if data.len() >= 2 => match data[0] {
                1 => w!(out, "LACPv{}, length {wire}", data[1]),
                2 => w!(out, "MARKERv{}, length {wire}", data[1]),
                3 => w!(out, "OAMv{}, length {wire}", data[1]),
                s => w!(out, "Slow Protocols subtype {s}, length {wire}"),
            },
            t => {
                match t.name() {
                    Some(n) => w!(out, "ethertype {n} (0x{:04x})", t.0),
                    None => w!(out, "ethertype Unknown (0x{:04x})", t.0),
                }
                w!(out, ", length {}", self.frame_wire);
            }
        }
        self.depth -= 1;
    }

    fn vlan(&mut self, out: &mut String, data: &[u8], wire: usize) {
        let Ok(tag) = VlanPacket::new_checked(data) else {
            out.push_str("vlan");
            self.trunc(out, "vlan");
            return;
        };
        w!(out, "vlan {} ", tag.vid());
        self.ethertype(
            out,
            tag.ethertype(),
            tag.payload(),
            wire.saturating_sub(VlanPacket::<&[u8]>::HEADER_LEN),
        );
    }

    fn null(&mut self, out: &mut String, data: &[u8], wire: usize, link: LinkType) {
        let Some(raw) = data.get(..4) else {
            self.trunc(
                out,
                if link == LinkType::LOOP {
                    "loop"
                } else {
                    "null"
                },
            );
            return;
        };
        let raw = [raw[0], raw[1], raw[2], raw[3]];
        // The family is a small number stored in either byte order.
        let family = u32::from_le_bytes(raw).min(u32::from_be_bytes(raw));
        let (rest, wire) = (&data[4..], wire.saturating_sub(4));
        match family {
            2 => self.ipv4(out, rest, wire),
            24 | 28 | 30 => self.ipv6(out, rest, wire),
            f => w!(out, "AF {f}, length {wire}"),
        }
    }

    fn raw_ip(&mut self, out: &mut String, data: &[u8], wire: usize) {
        match data.first().map(|b| b >> 4) {
            None => self.trunc(out, "ip"),
            Some(4) => self.ipv4(out, data, wire),
            Some(6) => self.ipv6(out, data, wire),
            Some(v) => w!(out, "ip v{v}, length {wire}"),
        }
    }

    fn sll_protocol(&mut self, out: &mut String, proto: u16, data: &[u8], wire: usize) {
        match proto {
            // Linux ETH_P_802_2: an LLC header follows.
            0x0004 => self.llc(out, data, wire),
            p if p >= 0x0600 => self.ethertype(out, EtherType(p), data, wire),
            p => w!(out, "sll protocol 0x{p:04x}, length {wire}"),
        }
    }

    fn sll(&mut self, out: &mut String, data: &[u8], wire: usize) {
        let Some(proto) = get16(data, 14) else {
            self.trunc(out, "sll");
            return;
        };
        self.sll_protocol(out, proto, &data[16..], wire.saturating_sub(16));
    }

    fn sll2(&mut self, out: &mut String, data: &[u8], wire: usize) {
        if data.len() < 20 {
            self.trunc(out, "sll2");
            return;
        }
        let proto = get16(data, 0).unwrap_or(0);
        let dir = match data[10] {
            0 => "In",
            1 => "B",
            2 => "M",
            3 => "P",
            4 => "Out",
            _ => "?",
        };
        w!(out, "{dir} ");
        self.sll_protocol(out, proto, &data[20..], wire.saturating_sub(20));
    }

    fn ppp(&mut self, out: &mut String, data: &[u8], wire: usize) {
        let (mut data, mut wire) = (data, wire);
        if data.starts_with(&[0xff, 0x03]) {
            data = &data[2..];
            wire = wire.saturating_sub(2);
        }
        // Protocol field compression: an odd first byte is a 1-byte field.
        let (proto, hl) = match data {
            [] => {
                self.trunc(out, "ppp");
                return;
            }
            [b, ..] if b & 1 == 1 => (u16::from(*b), 1),
            [_] => {
                self.trunc(out, "ppp");
                return;
            }
            [a, b, ..] => (u16::from_be_bytes([*a, *b]), 2),
        };
        self.ppp_protocol(out, proto, &data[hl..], wire.saturating_sub(hl));
    }

    fn ppp_protocol(&mut self, out: &mut String, proto: u16, data: &[u8], wire: usize) {
        match proto {
            0x0021 => self.ipv4(out, data, wire),
            0x0057 => self.ipv6(out, data, wire),
            0x0281 | 0x0283 => self.mpls(out, data, wire),
            p => {
                let name = match p {
                    0xc021 => "LCP",
                    0x8021 => "IPCP",
                    0x8057 => "IP6CP",
                    0xc023 => "PAP",
                    0xc223 => "CHAP",
                    0x80fd => "CCP",
                    0xc025 => "LQM",
                    _ => "",
                };
                if name.is_empty() {
                    w!(out, "PPP, proto 0x{p:04x}, length {wire}");
                    return;
                }
                let (Some(&code), Some(&id), Some(len)) =
                    (data.first(), data.get(1), get16(data, 2))
                else {
                    out.push_str(name);
                    self.trunc(out, "ppp");
                    return;
                };
                let code_name = match (p, code) {
                    (0xc023, 1) => "Auth-Req",
                    (0xc023, 2) => "Auth-ACK",
                    (0xc023, 3) => "Auth-NACK",
                    (0xc223, 1) => "Challenge",
                    (0xc223, 2) => "Response",
                    (0xc223, 3) => "Success",
                    (0xc223, 4) => "Failure",
                    (0xc023 | 0xc223, _) => "unknown",
                    (_, 1) => "Conf-Request",
                    (_, 2) => "Conf-Ack",
                    (_, 3) => "Conf-Nack",
                    (_, 4) => "Conf-Reject",
                    (_, 5) => "Term-Request",
                    (_, 6) => "Term-Ack",
                    (_, 7) => "Code-Reject",
                    (0xc021, 8) => "Prot-Reject",
                    (0xc021, 9) => "Echo-Request",
                    (0xc021, 10) => "Echo-Reply",
                    (0xc021, 11) => "Disc-Req",
                    (0xc021, 12) => "Ident",
                    (0xc021, 13) => "Time-Rem",
                    (0x80fd, 14) => "Reset-Req",
                    (0x80fd, 15) => "Reset-Ack",
                    _ => "unknown",
                };
                w!(
                    out,
                    "{name}, {code_name} (0x{code:02x}), id {id}, length {len}"
                );
            }
        }
    }

    fn pppoe(&mut self, out: &mut String, ty: EtherType, data: &[u8], wire: usize) {
        if data.len() < 6 {
            out.push_str("PPPoE");
            self.trunc(out, "pppoe");
            return;
        }
        let code = data[1];
        let session = get16(data, 2).unwrap_or(0);
        if ty == EtherType::PPPOE_SESS && code == 0 {
            w!(out, "PPPoE [ses 0x{session:x}] ");
            let Some(proto) = get16(data, 6) else {
                self.trunc(out, "ppp");
                return;
            };
            self.ppp_protocol(out, proto, skip(data, 8), wire.saturating_sub(8));
            return;
        }
        let name = match code {
            0x09 => "PADI",
            0x07 => "PADO",
            0x19 => "PADR",
            0x65 => "PADS",
            0xa7 => "PADT",
            _ => "",
        };
        if name.is_empty() {
            w!(out, "PPPoE code 0x{code:02x}");
        } else {
            w!(out, "PPPoE {name}");
        }
        if session != 0 {
            w!(out, " [ses 0x{session:x}]");
        }
        w!(out, ", length {}", wire.saturating_sub(6));
    }

    fn llc(&mut self, out: &mut String, data: &[u8], wire: usize) {
        let Ok(llc) = LlcPacket::new_checked(data) else {
            out.push_str("LLC");
            self.trunc(out, "llc");
            return;
        };
        let hl = llc.header_len();
        let payload = llc.payload();
        let plen = wire.saturating_sub(hl);
        if let (Some(oui), Some(pid)) = (llc.snap_oui(), llc.snap_type()) {
            let cisco = match (oui, pid.0) {
                (0x00000c, 0x2000) => "CDP",
                (0x00000c, 0x2003) => "VTP",
                (0x00000c, 0x2004) => "DTP",
                (0x00000c, 0x0111) => "UDLD",
                (0x00000c, 0x010b) => "PVST",
                _ => "",
            };
            if oui == 0 || oui == 0xf8 {
                self.ethertype(out, pid, payload, plen);
            } else if !cisco.is_empty() {
                w!(out, "{cisco}, length {plen}");
            } else {
                w!(
                    out,
                    "LLC/SNAP, oui 0x{oui:06x}, pid 0x{:04x}, length {plen}",
                    pid.0
                );
            }
            return;
        }
        match (llc.dsap(), llc.ssap()) {
            (LlcSap::STP, LlcSap::STP) => {
                let version = payload.get(2).copied();
                let kind = payload.get(3).copied();
                match (version, kind) {
                    (Some(v), Some(k)) => {
                        let std = match v {
                            0 => "802.1d",
                            2 => "802.1w",
                            3 => "802.1s",
                            4 => "802.1aq",
                            _ => "unknown version",
                        };
                        let k = match k {
                            0x00 => "Config",
                            0x80 => "Topology Change",
                            0x02 => "Rapid STP",
                            _ => "unknown BPDU type",
                        };
                        w!(out, "STP {std}, {k}, length {plen}");
                    }
                    _ => {
                        out.push_str("STP");
                        self.trunc(out, "stp");
                    }
                }
            }
            (LlcSap::ISO_NS, LlcSap::ISO_NS) => {
                w!(out, "{}, length {plen}", osi_name(payload.first()));
            }
            (dsap, ssap) => {
                w!(out, "LLC, dsap ");
                sap(out, dsap);
                w!(out, ", ssap ");
                sap(out, ssap);
                w!(out, ", ctrl 0x{:02x}, length {plen}", llc.control());
            }
        }
    }

    fn arp(&mut self, out: &mut String, data: &[u8], wire: usize) {
        let Ok(arp) = ArpPacket::new_checked(data) else {
            out.push_str("ARP,");
            self.trunc(out, "arp");
            return;
        };
        let op = arp.operation();
        let proto_name = match op {
            ArpOperation::REVERSE_REQUEST | ArpOperation::REVERSE_REPLY => "RARP",
            ArpOperation::INVERSE_REQUEST | ArpOperation::INVERSE_REPLY => "InARP",
            _ => "ARP",
        };
        w!(out, "{proto_name}, ");
        let eth_ip = (
            arp.source_ethernet_addr(),
            arp.source_ipv4_addr(),
            arp.target_ethernet_addr(),
            arp.target_ipv4_addr(),
        );
        match eth_ip {
            (Some(sha), Some(spa), Some(tha), Some(tpa))
                if arp.protocol_type() == EtherType::IPV4 =>
            {
                match op {
                    ArpOperation::REQUEST => {
                        w!(out, "Request who-has {tpa}");
                        if !tha.0.iter().all(|&b| b == 0) {
                            w!(out, " ({tha})");
                        }
                        w!(out, " tell {spa}");
                    }
                    ArpOperation::REPLY => w!(out, "Reply {spa} is-at {sha}"),
                    ArpOperation::REVERSE_REQUEST | ArpOperation::INVERSE_REQUEST => {
                        w!(out, "Request who-is {tha} tell {sha}")
                    }
                    ArpOperation::REVERSE_REPLY | ArpOperation::INVERSE_REPLY => {
                        w!(out, "Reply {tha} at {tpa}")
                    }
                    other => w!(out, "Unknown ({})", other.0),
                }
            }
            _ => {
                w!(
                    out,
                    "{} (len {}), {} (len {}), {}",
                    arp.hardware_type(),
                    arp.hardware_len(),
                    arp.protocol_type(),
                    arp.protocol_len(),
                    op
                );
            }
        }
        w!(out, ", length {wire}");
    }

    fn mpls(&mut self, out: &mut String, data: &[u8], wire: usize) {
        out.push_str("MPLS");
        let (mut data, mut wire) = (data, wire);
        let mut first_label = None;
        for _ in 0..MAX_DEPTH {
            let Ok(entry) = MplsPacket::new_checked(data) else {
                self.trunc(out, "mpls");
                return;
            };
            let label = entry.label();
            first_label = first_label.or(Some(label));
            w!(out, " (label {label}, tc {}", entry.tc());
            if entry.bottom_of_stack() {
                out.push_str(", [S]");
            }
            w!(out, ", ttl {})", entry.ttl());
            data = skip(data, MplsPacket::<&[u8]>::HEADER_LEN);
            wire = wire.saturating_sub(MplsPacket::<&[u8]>::HEADER_LEN);
            if entry.bottom_of_stack() {
                out.push(' ');
                // Guess the payload: explicit-null labels or the version
                // nibble.
                match (label, data.first().map(|b| b >> 4)) {
                    (0, _) | (_, Some(4)) => self.ipv4(out, data, wire),
                    (2, _) | (_, Some(6)) => self.ipv6(out, data, wire),
                    (_, None) => self.trunc(out, "mpls"),
                    _ => w!(out, "length {wire}"),
                }
                return;
            }
        }
        self.trunc(out, "mpls");
    }

    // ------------------------------------------------------------------ IP

    fn ipv4(&mut self, out: &mut String, data: &[u8], wire: usize) {
        if !self.enter(out) {
            return;
        }
        self.ipv4_inner(out, data, wire);
        self.depth -= 1;
    }

    fn ipv4_inner(&mut self, out: &mut String, data: &[u8], wire: usize) {
        if let Some(v) = data.first().map(|b| b >> 4) {
            if v != 4 {
                w!(out, "IP, wrong version {v}, length {wire}");
                return;
            }
        }
        let ip = match Ipv4Packet::new_checked(data) {
            Ok(ip) => ip,
            Err(e) if e.kind() == crate::ErrorKind::Malformed => {
                w!(out, "IP bad-hlen {}", e.available());
                return;
            }
            Err(_) if data.len() >= Ipv4Packet::<&[u8]>::MIN_HEADER_LEN => {
                // The fixed header is there, the options are cut off.
                let ip = Ipv4Packet::new_unchecked(data);
                w!(out, "IP {} > {}:", ip.src_addr(), ip.dst_addr());
                self.trunc(out, "ip");
                return;
            }
            Err(_) => {
                out.push_str("IP");
                self.trunc(out, "ip");
                return;
            }
        };
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let hl = ip.header_len();
        let mut total = usize::from(ip.total_len());
        if total == 0 {
            // TSO / BIG TCP: the length is left to the link layer.
            total = wire;
        }
        if total < hl {
            w!(out, "IP bad-len {total}");
            return;
        }
        let l4_wire = total - hl;
        let payload = ip.payload();
        let payload = if ip.total_len() == 0 {
            skip(data, hl)
        } else {
            payload
        };
        let proto = ip.protocol();
        if ip.frag_offset() != 0 {
            w!(out, "IP {src} > {dst}: ip-proto-{}", proto.0);
            return;
        }
        let mut body = String::new();
        let ports = self.transport(&mut body, proto, payload, l4_wire, IpVer::V4);
        out.push_str("IP ");
        endpoints(out, &src, &dst, ports);
        out.push_str(&body);
    }

    fn ipv6(&mut self, out: &mut String, data: &[u8], wire: usize) {
        if !self.enter(out) {
            return;
        }
        self.ipv6_inner(out, data, wire);
        self.depth -= 1;
    }

    fn ipv6_inner(&mut self, out: &mut String, data: &[u8], wire: usize) {
        if let Some(v) = data.first().map(|b| b >> 4) {
            if v != 6 {
                w!(out, "IP6, wrong version {v}, length {wire}");
                return;
            }
        }
        let Ok(ip) = Ipv6Packet::new_checked(data) else {
            out.push_str("IP6");
            self.trunc(out, "ip6");
            return;
        };
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let payload = ip.payload();
        let plen = if ip.is_jumbo_candidate() {
            wire.saturating_sub(Ipv6Packet::<&[u8]>::HEADER_LEN)
        } else {
            usize::from(ip.payload_len())
        };
        let mut body = String::new();
        let mut walk = ExtHeaders::new(ip.next_header(), payload);
        let mut failed = false;
        for item in walk.by_ref() {
            match item {
                Ok(h) => {
                    if let Some(frag) = h.as_fragment() {
                        let after = plen.saturating_sub(h.offset() + h.len());
                        w!(body, "frag ({}|{after}) ", frag.frag_offset());
                    } else if let Some(rt) = h.as_routing() {
                        w!(
                            body,
                            "RT6 (len={}, type={}, segleft={}) ",
                            h.bytes()[1],
                            rt.routing_type(),
                            rt.segments_left()
                        );
                    } else if let Some(ah) = h.as_auth() {
                        auth_header(&mut body, &ah);
                    } else if h.kind() == IpProtocol::MOBILITY {
                        // The mobility header is the last header in practice.
                        let mh = match h.bytes()[2] {
                            0 => "BRR",
                            1 => "HoTI",
                            2 => "CoTI",
                            3 => "HoT",
                            4 => "CoT",
                            5 => "BU",
                            6 => "BA",
                            7 => "BE",
                            _ => "type-#",
                        };
                        if mh == "type-#" {
                            w!(body, "mobility: type-#{}", h.bytes()[2]);
                        } else {
                            w!(body, "mobility: {mh}");
                        }
                        out.push_str("IP6 ");
                        endpoints(out, &src, &dst, None);
                        out.push_str(&body);
                        return;
                    } else {
                        let name = match h.kind() {
                            IpProtocol::IPV6_HOPOPTS => "HBH",
                            IpProtocol::IPV6_DSTOPTS => "DSTOPT",
                            IpProtocol::HIP => "HIP",
                            _ => "shim6",
                        };
                        w!(body, "{name} ");
                    }
                }
                Err(_) => failed = true,
            }
        }
        if failed {
            self.trunc(&mut body, "ip6ext");
            out.push_str("IP6 ");
            endpoints(out, &src, &dst, None);
            out.push_str(body.trim_end());
            return;
        }
        let l4_wire = plen.saturating_sub(walk.upper_offset());
        let ports = if walk.non_first_fragment() {
            None
        } else {
            self.transport(
                &mut body,
                walk.upper_protocol(),
                walk.upper_payload(),
                l4_wire,
                IpVer::V6,
            )
        };
        out.push_str("IP6 ");
        endpoints(out, &src, &dst, ports);
        out.push_str(body.trim_end());
    }

    // ----------------------------------------------------------- transport

    /// Writes the body after `src > dst: ` and returns the ports to show.
    fn transport(
        &mut self,
        out: &mut String,
        proto: IpProtocol,
        data: &[u8],
        wire: usize,
        ver: IpVer,
    ) -> Ports {
        match proto {
            IpProtocol::TCP => return self.tcp(out, data, wire),
            IpProtocol::UDP => return self.udp(out, data, wire),
            IpProtocol::SCTP => return self.sctp(out, data),
            IpProtocol::ICMP => self.icmp(out, data, wire),
            IpProtocol::ICMPV6 => self.icmpv6(out, data, wire),
            IpProtocol::GRE => self.gre(out, data, wire),
            IpProtocol::ESP => match (get32(data, 0), get32(data, 4)) {
                (Some(spi), Some(seq)) => {
                    w!(out, "ESP(spi=0x{spi:08x},seq=0x{seq:x}), length {wire}")
                }
                _ => {
                    out.push_str("ESP");
                    self.trunc(out, "esp");
                }
            },
            IpProtocol::AH if ver == IpVer::V4 => {
                let Ok(ah) = AuthHeader::new_checked(data) else {
                    out.push_str("AH");
                    self.trunc(out, "ah");
                    return None;
                };
                auth_header(out, &ah);
                // AH may be stacked: bound the recursion.
                if !self.enter(out) {
                    return None;
                }
                let hl = ah.header_len();
                let ports = self.transport(
                    out,
                    ah.next_header(),
                    ah.payload(),
                    wire.saturating_sub(hl),
                    ver,
                );
                self.depth -= 1;
                return ports;
            }
            IpProtocol::IPIP => self.ipv4(out, data, wire),
            IpProtocol::IPV6 => self.ipv6(out, data, wire),
            IpProtocol::IPV6_NONXT if ver == IpVer::V6 => out.push_str("no next header"),
            IpProtocol::ETHERNET => self.ether(out, data, wire),
            IpProtocol::DCCP | IpProtocol::UDPLITE => {
                let ports = get16(data, 0).zip(get16(data, 2));
                if ports.is_some() {
                    w!(out, "{proto}, length {wire}");
                } else {
                    out.push_str(proto.name().unwrap_or("?"));
                    self.trunc(out, "dccp");
                }
                return ports;
            }
            IpProtocol::IGMP => self.igmp(out, data, wire),
            IpProtocol::PIM => match data.first() {
                Some(b) => {
                    let name = match b & 0x0f {
                        0 => "Hello",
                        1 => "Register",
                        2 => "Register Stop",
                        3 => "Join / Prune",
                        4 => "Bootstrap",
                        5 => "Assert",
                        6 => "Graft",
                        7 => "Graft ACK",
                        8 => "Candidate RP Advertisement",
                        9 => "DF Election",
                        _ => "unknown type",
                    };
                    w!(out, "PIMv{}, {name}, length {wire}", b >> 4);
                }
                None => {
                    out.push_str("PIM");
                    self.trunc(out, "pim");
                }
            },
            IpProtocol::OSPF => match (data.first(), data.get(1)) {
                (Some(v), Some(t)) => {
                    let name = match t {
                        1 => "Hello",
                        2 => "Database Description",
                        3 => "LS-Request",
                        4 => "LS-Update",
                        5 => "LS-Ack",
                        _ => "unknown packet type",
                    };
                    w!(out, "OSPFv{v}, {name}, length {wire}");
                }
                _ => {
                    out.push_str("OSPF");
                    self.trunc(out, "ospf");
                }
            },
            IpProtocol::VRRP => match (data.first(), data.get(1), data.get(2)) {
                (Some(vt), Some(vrid), Some(prio)) => {
                    let version = vt >> 4;
                    let kind = if vt & 0x0f == 1 {
                        "Advertisement"
                    } else {
                        "unknown type"
                    };
                    w!(out, "VRRPv{version}, {kind}, vrid {vrid}, prio {prio}");
                    match (version, data.get(4), data.get(5)) {
                        (2, Some(auth), Some(intvl)) => {
                            let auth = match auth {
                                0 => "none",
                                1 => "simple",
                                2 => "ah",
                                _ => "unknown",
                            };
                            w!(out, ", authtype {auth}, intvl {intvl}s");
                        }
                        (3, Some(hi), Some(lo)) => {
                            w!(out, ", intvl {}cs", u16::from_be_bytes([*hi & 0x0f, *lo]));
                        }
                        _ => {}
                    }
                    w!(out, ", length {wire}");
                }
                _ => {
                    out.push_str("VRRP");
                    self.trunc(out, "vrrp");
                }
            },
            p => match p.name() {
                Some(n) if p != IpProtocol::AH => w!(out, "{n}, length {wire}"),
                _ => w!(out, "ip-proto-{}, length {wire}", p.0),
            },
        }
        None
    }

    fn tcp(&mut self, out: &mut String, data: &[u8], wire: usize) -> Ports {
        let ports = get16(data, 0).zip(get16(data, 2));
        if ports.is_none() {
            self.trunc(out, "tcp");
            return None;
        }
        let tcp = TcpPacket::new_unchecked(data);
        if data.len() < TcpPacket::<&[u8]>::MIN_HEADER_LEN {
            self.trunc(out, "tcp");
            return ports;
        }
        let hl = tcp.header_len();
        if hl < TcpPacket::<&[u8]>::MIN_HEADER_LEN {
            w!(out, "[bad hdr length {hl} - too short, < 20]");
            return ports;
        }
        if hl > wire {
            w!(out, "[bad hdr length {hl} - too long, > {wire}]");
            return ports;
        }
        let flags = tcp.flags();
        let len = wire - hl;
        w!(out, "Flags {flags}");
        let seq = tcp.seq_number();
        if len > 0 {
            w!(out, ", seq {seq}:{}", seq.wrapping_add(len as u32));
        } else if flags.intersects(TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST) {
            w!(out, ", seq {seq}");
        }
        if flags.contains(TcpFlags::ACK) {
            w!(out, ", ack {}", tcp.ack_number());
        }
        w!(out, ", win {}", tcp.window_len());
        if flags.contains(TcpFlags::URG) {
            w!(out, ", urg {}", tcp.urgent_at());
        }
        // Options cut off by the capture are shown as far as they go.
        let cut = tcp.check_len().is_err();
        if hl > TcpPacket::<&[u8]>::MIN_HEADER_LEN {
            let mut opts = String::new();
            let available = crate::bytes::clip(data, TcpPacket::<&[u8]>::MIN_HEADER_LEN, hl);
            for opt in crate::tcp::TcpOptions::new(available) {
                if !opts.is_empty() {
                    opts.push(',');
                }
                match opt {
                    Ok(o) => w!(opts, "{o}"),
                    Err(_) if cut => break,
                    Err(_) => opts.push_str("bad opt"),
                }
            }
            let opts = opts.trim_end_matches(',');
            if cut {
                if !opts.is_empty() {
                    w!(out, ", options [{opts}");
                }
                self.trunc(out, "tcp");
                return ports;
            }
            w!(out, ", options [{opts}]");
        } else if cut {
            self.trunc(out, "tcp");
            return ports;
        }
        w!(out, ", length {len}");
        ports
    }

    fn udp(&mut self, out: &mut String, data: &[u8], wire: usize) -> Ports {
        let ports = get16(data, 0).zip(get16(data, 2));
        let Ok(udp) = UdpPacket::new_checked(data) else {
            self.trunc(out, "udp");
            return ports;
        };
        let mut ulen = usize::from(udp.len());
        if ulen == 0 && wire > 0xffff {
            // Jumbogram / GSO super-packet: the length is the IP layer's.
            ulen = wire;
        }
        if ulen < UdpPacket::<&[u8]>::HEADER_LEN {
            w!(out, "UDP, bad length {ulen}");
            return ports;
        }
        // A first fragment's UDP length covers the whole datagram; show
        // what this packet carries, like tcpdump.
        let (sport, dport) = (udp.src_port(), udp.dst_port());
        let plen = ulen
            .min(wire)
            .saturating_sub(UdpPacket::<&[u8]>::HEADER_LEN);
        let payload = crate::bytes::clip(data, UdpPacket::<&[u8]>::HEADER_LEN, ulen);
        if (sport == 4500 || dport == 4500) && get32(payload, 0).is_some_and(|spi| spi != 0) {
            out.push_str("UDP-encap: ");
            match (get32(payload, 0), get32(payload, 4)) {
                (Some(spi), Some(seq)) => {
                    w!(out, "ESP(spi=0x{spi:08x},seq=0x{seq:x}), length {plen}")
                }
                _ => self.trunc(out, "esp"),
            }
        } else if dport == VXLAN_PORT || (sport == VXLAN_PORT && dport != GENEVE_PORT) {
            self.vxlan(out, payload, plen);
        } else if dport == GENEVE_PORT || sport == GENEVE_PORT {
            self.geneve(out, payload, plen);
        } else {
            w!(out, "UDP, length {plen}");
        }
        ports
    }

    fn vxlan(&mut self, out: &mut String, data: &[u8], wire: usize) {
        let Ok(vx) = VxlanPacket::new_checked(data) else {
            out.push_str("VXLAN");
            self.trunc(out, "vxlan");
            return;
        };
        let flags = vx.flags();
        let shown = if flags & VxlanPacket::<&[u8]>::FLAG_I != 0 {
            "I"
        } else {
            "none"
        };
        w!(
            out,
            "VXLAN, flags [{shown}] (0x{flags:02x}), vni {}: ",
            vx.vni()
        );
        self.ether(out, vx.payload(), wire.saturating_sub(8));
    }

    fn geneve(&mut self, out: &mut String, data: &[u8], wire: usize) {
        let Ok(g) = GenevePacket::new_checked(data) else {
            out.push_str("Geneve");
            self.trunc(out, "geneve");
            return;
        };
        let flags = match (g.oam(), g.critical()) {
            (false, false) => "none",
            (true, false) => "O",
            (false, true) => "C",
            (true, true) => "O, C",
        };
        w!(out, "Geneve, Flags [{flags}], vni 0x{:x}", g.vni());
        if g.options_len() > 0 {
            w!(out, ", options [{} bytes]", g.options_len());
        }
        out.push_str(": ");
        let rest = wire.saturating_sub(g.header_len());
        match g.protocol_type() {
            EtherType::TEB => self.ether(out, g.payload(), rest),
            ty => self.ethertype(out, ty, g.payload(), rest),
        }
    }

    fn gre(&mut self, out: &mut String, data: &[u8], wire: usize) {
        let Ok(gre) = GrePacket::new_checked(data) else {
            out.push_str("GRE");
            self.trunc(out, "gre");
            return;
        };
        w!(out, "GREv{}", gre.version());
        if gre.version() == 1 {
            if let Some(key) = gre.key() {
                w!(out, ", call {}", key & 0xffff);
            }
        } else if let Some(key) = gre.key() {
            w!(out, ", key=0x{key:x}");
        }
        if let Some(seq) = gre.sequence() {
            w!(out, ", seq {seq}");
        }
        if let Some(ack) = gre.ack() {
            w!(out, ", ack {ack}");
        }
        w!(out, ", length {wire}: ");
        let rest = wire.saturating_sub(gre.header_len());
        let payload = gre.payload();
        match gre.protocol_type() {
            EtherType::IPV4 => self.ipv4(out, payload, rest),
            EtherType::IPV6 => self.ipv6(out, payload, rest),
            EtherType::TEB => self.ether(out, payload, rest),
            EtherType::MPLS_UC | EtherType::MPLS_MC => self.mpls(out, payload, rest),
            EtherType::PPP => self.ppp(out, payload, rest),
            t => w!(out, "gre-proto-0x{:x}", t.0),
        }
    }

    fn sctp(&mut self, out: &mut String, data: &[u8]) -> Ports {
        let ports = get16(data, 0).zip(get16(data, 2));
        let Ok(sctp) = SctpPacket::new_checked(data) else {
            self.trunc(out, "sctp");
            return ports;
        };
        out.push_str("sctp");
        for (i, chunk) in sctp.chunks().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match chunk {
                Ok(c) => w!(out, " ({}) [{}]", i + 1, c.chunk_type()),
                Err(_) => self.trunc(out, "sctp"),
            }
        }
        ports
    }

    fn icmp(&mut self, out: &mut String, data: &[u8], wire: usize) {
        let Ok(icmp) = IcmpPacket::new_checked(data) else {
            match data.first().map(|&t| IcmpType(t)) {
                Some(t) if !t.has_id_seq() => match t.name() {
                    Some(n) => w!(out, "ICMP {n}, length {wire}"),
                    None => w!(out, "ICMP type-#{}, length {wire}", t.0),
                },
                _ => {
                    out.push_str("ICMP");
                    self.trunc(out, "icmp");
                }
            }
            return;
        };
        let ty = icmp.msg_type();
        let code = icmp.msg_code();
        out.push_str("ICMP ");
        // The quoted IP header of error messages.
        let quoted = Ipv4Packet::new_checked(icmp.data()).ok();
        match ty {
            IcmpType::ECHO_REQUEST | IcmpType::ECHO_REPLY => w!(
                out,
                "{ty}, id {}, seq {}",
                icmp.echo_ident(),
                icmp.echo_seq_no()
            ),
            IcmpType::DEST_UNREACHABLE => match &quoted {
                Some(q) => {
                    let dst = q.dst_addr();
                    match code {
                        0 => w!(out, "net {dst} unreachable"),
                        1 => w!(out, "host {dst} unreachable"),
                        2 => w!(out, "{dst} protocol {} unreachable", q.protocol().0),
                        3 => {
                            let qproto = q.protocol();
                            let dport = get16(skip(icmp.data(), q.header_len()), 2);
                            match dport {
                                Some(p) if qproto == IpProtocol::UDP => {
                                    w!(out, "{dst} udp port {p} unreachable")
                                }
                                Some(p) if qproto == IpProtocol::TCP => {
                                    w!(out, "{dst} tcp port {p} unreachable")
                                }
                                _ => w!(out, "{dst} port unreachable"),
                            }
                        }
                        4 => w!(
                            out,
                            "{dst} unreachable - need to frag (mtu {})",
                            icmp.next_hop_mtu()
                        ),
                        c => match crate::icmp::unreachable_code_name(c) {
                            Some(n) => w!(out, "{dst} unreachable - {n}"),
                            None => w!(out, "{dst} unreachable - #{c}"),
                        },
                    }
                }
                None => match crate::icmp::unreachable_code_name(code) {
                    Some(n) => w!(out, "{n} unreachable"),
                    None => w!(out, "unreachable - #{code}"),
                },
            },
            IcmpType::TIME_EXCEEDED => match code {
                0 => out.push_str("time exceeded in-transit"),
                1 => out.push_str("ip reassembly time exceeded"),
                c => w!(out, "time exceeded-#{c}"),
            },
            IcmpType::REDIRECT => match &quoted {
                Some(q) => w!(out, "redirect {} to {}", q.dst_addr(), icmp.gateway()),
                None => w!(out, "redirect to {}", icmp.gateway()),
            },
            IcmpType::PARAM_PROBLEM => {
                w!(
                    out,
                    "parameter problem - octet {}",
                    icmp.rest_of_header() >> 24
                )
            }
            t => match t.name() {
                Some(n) => w!(out, "{n}"),
                None => w!(out, "type-#{}", t.0),
            },
        }
        w!(out, ", length {wire}");
    }

    fn icmpv6(&mut self, out: &mut String, data: &[u8], wire: usize) {
        out.push_str("ICMP6, ");
        let Ok(icmp) = Icmpv6Packet::new_checked(data) else {
            match data.first().map(|&t| Icmpv6Type(t)) {
                Some(t) if !t.has_id_seq() && !t.has_target() => match t.name() {
                    Some(n) => w!(out, "{n}, length {wire}"),
                    None => w!(out, "type-#{}, length {wire}", t.0),
                },
                _ => self.trunc(out, "icmp6"),
            }
            return;
        };
        let ty = icmp.msg_type();
        let code = icmp.msg_code();
        let quoted_dst = || {
            Ipv6Packet::new_checked(icmp.data())
                .ok()
                .map(|q| q.dst_addr())
        };
        match ty {
            Icmpv6Type::ECHO_REQUEST | Icmpv6Type::ECHO_REPLY => w!(
                out,
                "{ty}, id {}, seq {}",
                icmp.echo_ident(),
                icmp.echo_seq_no()
            ),
            Icmpv6Type::NEIGHBOR_SOLICIT => match icmp.target_addr() {
                Some(t) => w!(out, "{ty}, who has {t}"),
                None => w!(out, "{ty}"),
            },
            Icmpv6Type::NEIGHBOR_ADVERT => match icmp.target_addr() {
                Some(t) => w!(out, "{ty}, tgt is {t}"),
                None => w!(out, "{ty}"),
            },
            Icmpv6Type::REDIRECT => match icmp.target_addr() {
                Some(t) => w!(out, "{ty}, {t}"),
                None => w!(out, "{ty}"),
            },
            Icmpv6Type::PACKET_TOO_BIG => w!(out, "{ty}, mtu {}", icmp.mtu()),
            Icmpv6Type::DST_UNREACHABLE => {
                let what = match code {
                    0 => "route",
                    1 => "prohibited",
                    2 => "beyond scope",
                    3 => "address",
                    4 => "port",
                    5 => "source address policy",
                    6 => "reject route",
                    _ => "code",
                };
                match quoted_dst() {
                    Some(d) => w!(out, "{ty}, unreachable {what} {d}"),
                    None => w!(out, "{ty}, unreachable {what}"),
                }
            }
            Icmpv6Type::TIME_EXCEEDED if code == 1 => out.push_str("ip6 reassembly time exceeded"),
            Icmpv6Type::MLD_QUERY => {
                match data
                    .get(8..24)
                    .and_then(crate::ipv6::Ipv6Address::from_slice)
                {
                    Some(g) if wire >= 28 => w!(out, "{ty} v2 [gaddr {g}]"),
                    Some(g) => w!(out, "{ty} v1 [gaddr {g}]"),
                    None => w!(out, "{ty}"),
                }
            }
            Icmpv6Type::MLDV2_REPORT => match get16(data, 6) {
                Some(n) => w!(out, "{ty}, {n} group record(s)"),
                None => w!(out, "{ty}"),
            },
            t => match t.name() {
                Some(n) => w!(out, "{n}"),
                None => w!(out, "type-#{}", t.0),
            },
        }
        w!(out, ", length {wire}");
    }

    fn igmp(&mut self, out: &mut String, data: &[u8], wire: usize) {
        let (Some(&ty), Some(group)) = (data.first(), data.get(4..8)) else {
            out.push_str("igmp");
            self.trunc(out, "igmp");
            return;
        };
        let group = Ipv4Address([group[0], group[1], group[2], group[3]]);
        match ty {
            0x11 => {
                let v = match (wire >= 12, data.get(1)) {
                    (true, _) => 3,
                    (false, Some(0)) => 1,
                    _ => 2,
                };
                if group.is_unspecified() {
                    w!(out, "igmp query v{v}");
                } else {
                    w!(out, "igmp query v{v} [gaddr {group}]");
                }
            }
            0x12 => w!(out, "igmp v1 report {group}"),
            0x16 => w!(out, "igmp v2 report {group}"),
            0x17 => w!(out, "igmp leave {group}"),
            0x22 => match get16(data, 6) {
                Some(n) => w!(out, "igmp v3 report, {n} group record(s)"),
                None => out.push_str("igmp v3 report"),
            },
            t => w!(out, "igmp type 0x{t:02x}, length {wire}"),
        }
    }
}

/// The version of the enclosing IP header.
#[derive(Clone, Copy, PartialEq, Eq)]
enum IpVer {
    V4,
    V6,
}

/// Writes `src[.sport] > dst[.dport]: `.
fn endpoints<A: fmt::Display>(out: &mut String, src: &A, dst: &A, ports: Ports) {
    match ports {
        Some((s, d)) => w!(out, "{src}.{s} > {dst}.{d}: "),
        None => w!(out, "{src} > {dst}: "),
    }
}

/// Writes `AH(spi=0x...,seq=0x...,icv=0x...): `.
fn auth_header(out: &mut String, ah: &AuthHeader<&[u8]>) {
    w!(out, "AH(spi=0x{:08x},seq=0x{:x}", ah.spi(), ah.seq_number());
    if !ah.icv().is_empty() {
        out.push_str(",icv=0x");
        for b in ah.icv() {
            w!(out, "{b:02x}");
        }
    }
    out.push_str("): ");
}

/// The name of an OSI network-layer protocol by its NLPID.
fn osi_name(nlpid: Option<&u8>) -> &'static str {
    match nlpid {
        Some(0x81) => "CLNP",
        Some(0x82) => "ES-IS",
        Some(0x83) => "IS-IS",
        _ => "OSI",
    }
}

fn sap(out: &mut String, s: LlcSap) {
    match s.name() {
        Some(n) => w!(out, "{n} (0x{:02x})", s.0),
        None => w!(out, "0x{:02x}", s.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;

    fn sum(link: LinkType, data: &[u8]) -> String {
        summarize(link, data, data.len() as u32).into_string()
    }

    fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1];
        v.extend_from_slice(&ethertype.to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 20];
        v.extend_from_slice(payload);
        let len = v.len() as u16;
        let mut p = Ipv4Packet::new_unchecked(&mut v[..]);
        p.set_version(4);
        p.set_header_len(20);
        p.set_total_len(len);
        p.set_ttl(64);
        p.set_protocol(IpProtocol(proto));
        p.set_src_addr(Ipv4Address(src));
        p.set_dst_addr(Ipv4Address(dst));
        p.fill_checksum();
        v
    }

    fn ipv6(nh: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 40];
        v.extend_from_slice(payload);
        let len = payload.len() as u16;
        let mut p = Ipv6Packet::new_unchecked(&mut v[..]);
        p.set_version(6);
        p.set_payload_len(len);
        p.set_next_header(IpProtocol(nh));
        p.set_hop_limit(64);
        p.set_src_addr(&"2001:db8::1".parse().unwrap());
        p.set_dst_addr(&"2001:db8::2".parse().unwrap());
        v
    }

    fn tcp(flags: u8, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 20];
        v.extend_from_slice(payload);
        let mut p = TcpPacket::new_unchecked(&mut v[..]);
        p.set_src_port(443);
        p.set_dst_port(51234);
        p.set_seq_number(seq);
        p.set_ack_number(ack);
        p.set_header_len(20);
        p.set_flags(TcpFlags(flags));
        p.set_window_len(512);
        v
    }

    fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 8];
        v.extend_from_slice(payload);
        let len = v.len() as u16;
        let mut p = UdpPacket::new_unchecked(&mut v[..]);
        p.set_src_port(sport);
        p.set_dst_port(dport);
        p.set_len(len);
        v
    }

    fn icmp_echo(ty: u8, id: u16, seq: u16) -> Vec<u8> {
        let mut v = vec![ty, 0, 0, 0, 0, 0, 0, 0];
        let mut p = IcmpPacket::new_unchecked(&mut v[..]);
        p.set_echo_ident(id);
        p.set_echo_seq_no(seq);
        p.fill_checksum();
        v
    }

    const A: [u8; 4] = [198, 18, 0, 1];
    const B: [u8; 4] = [198, 18, 0, 2];

    #[test]
    fn real_geneve_tcp_syn_ack() {
        let f = hex(
            "001b213cac30001b213cab64080045000076dfba4000401132ba1400000114000002580c17c1006200000240\
             655800000a00000080010000000cfe71d883724fb69ed249514808004500003c000040004006feb91e000001\
             1e0000020016c819ad805fe217b30cb0a0127120101d0000020405b40402080a05058989ab6d56be01030307",
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &f),
            "IP 20.0.0.1.22540 > 20.0.0.2.6081: Geneve, Flags [C], vni 0xa, options [8 bytes]: \
             IP 30.0.0.1.22 > 30.0.0.2.51225: Flags [S.], seq 2910871522, ack 397610160, win 28960, \
             options [mss 1460,sackOK,TS val 84248969 ecr 2876069566,nop,wscale 7], length 0"
        );
    }

    #[test]
    fn real_udp_and_checksums() {
        let f = hex(
            "00112233446600112233445508004500005459cd0000401194aec0a8010bd157f912abbe00350040782459\
             3401200001000000000001037777770774637064756d70036f72670000010001000029100000000000000c\
             000a000842f5d00996f90b13",
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &f),
            "IP 192.168.1.11.43966 > 209.87.249.18.53: UDP, length 56"
        );
        // The real packet's checksums verify through the views.
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert!(ip.verify_checksum());
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert!(udp.verify_checksum_ipv4(ip.src_addr(), ip.dst_addr()));
    }

    #[test]
    fn real_vxlan_icmp() {
        let f = hex(
            "00163e0871cf36dc851eb340080045000086d2c0400040115152c0a8cb01c0a8ca01b05d12b50072000008\
             0000000000640000308801000200163e37f604080045000054000040004001234fc0a8cb03c0a8cb050800\
             f6f2050c0001fce2975100000000a6f8020000000000101112131415161718191a1b1c1d1e1f2021222324\
             25262728292a2b2c2d2e2f3031323334353637",
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &f),
            "IP 192.168.203.1.45149 > 192.168.202.1.4789: VXLAN, flags [I] (0x08), vni 100: \
             IP 192.168.203.3 > 192.168.203.5: ICMP echo request, id 1292, seq 1, length 64"
        );
    }

    #[test]
    fn real_qinq_arp() {
        let req = hex(
            "ffffffffffff0020d25afb3f88a800c8810007d1080600010800060400010020d25afb3fac154f61000000\
             000000ac154f640000000000000000000000000000",
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &req),
            "vlan 200 vlan 2001 ARP, Request who-has 172.21.79.100 tell 172.21.79.97, length 42"
        );
        let rep = hex(
            "0020d25afb3f0080ea81886388a800c8810007d1080600010800060400020080ea818863ac154f640020d2\
             5afb3fac154f610000000000000000000000000000",
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &rep),
            "vlan 200 vlan 2001 ARP, Reply 172.21.79.100 is-at 00:80:ea:81:88:63, length 42"
        );
    }

    #[test]
    fn real_icmpv6() {
        let ns = hex(
            "3333ffe1000f566ff7e1000f86dd6000000000203aff00000000000000000000000000000000ff02000000\
             00000000000001ffe1000f8700566e00000000fe80000000000000546ff7fffee1000f0e016069604c0aaa",
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &ns),
            "IP6 :: > ff02::1:ffe1:f: ICMP6, neighbor solicitation, who has fe80::546f:f7ff:fee1:f, length 32"
        );
        let mld = hex(
            "333300000016001517cce54686dd6000000000240001fe80000000000000021517fffecce546ff02000000\
             00000000000000000000163a000502000001008f001fc50000000104000000ff0200000000000000000db8\
             11223344",
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &mld),
            "IP6 fe80::215:17ff:fecc:e546 > ff02::16: HBH ICMP6, multicast listener report v2, 1 group record(s), length 28"
        );
    }

    #[test]
    fn real_null_linux_sll_ppp() {
        // BSD loopback, AF_INET6 = 30 little-endian; cut at 80 bytes.
        let f = hex(
            "1e000000600a0f0004b811400000000000000000000000000000000100000000000000000000000000000001\
             c5ae01bb04b804cbce000000010884acac06b42ed8630000449ebf8dec1e22ec03288f86",
        );
        assert_eq!(
            summarize(LinkType::NULL, &f, 1252).as_str(),
            "IP6 ::1.50606 > ::1.443: UDP, length 1200"
        );
        let sll = hex(
            "000402000000000000000000000008004500003c29a940004006db5f839bd7458974515eb64000502f842acb\
             00000000a0026a4050c40000020405500402080a436a03620000000001030307",
        );
        assert_eq!(
            sum(LinkType::LINUX_SLL, &sll),
            "IP 131.155.215.69.46656 > 137.116.81.94.80: Flags [S], seq 797190859, win 27200, \
             options [mss 1360,sackOK,TS val 1131021154 ecr 0,nop,wscale 7], length 0"
        );
        let ip = Ipv4Packet::new_checked(&sll[16..]).unwrap();
        let seg = TcpPacket::new_checked(ip.payload()).unwrap();
        assert!(seg.verify_checksum_ipv4(ip.src_addr(), ip.dst_addr()));
        let ppp = hex(
            "ff0302811896010145000028a54c00000111f76f0c0404040c010101a54b829b0014000000000000000000\
             0000000000",
        );
        assert_eq!(
            sum(LinkType::PPP, &ppp),
            "MPLS (label 100704, tc 0, [S], ttl 1) IP 12.4.4.4.42315 > 12.1.1.1.33435: UDP, length 12"
        );
    }

    #[test]
    fn real_esp_rt6_pim_stp() {
        let esp = hex(
            "1000006464451000006464230800450000c0294d00004032cc78c0010217c001022d123456780000000147\
             412fc54b99800befbbafd4d0d960a86f57",
        );
        assert_eq!(
            summarize(LinkType::ETHERNET, &esp, 206).as_str(),
            "IP 192.1.2.23 > 192.1.2.45: ESP(spi=0x12345678,seq=0x1), length 172"
        );
        let rt6 = hex(
            "0013c4c784f000123fae22f786dd6000000000202b04220000000000024402123ffffeae22f72200000000\
             00024000020000000000043a02000100000000220000000000021000020000000000048000d3ab00000000",
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &rt6),
            "IP6 2200::244:212:3fff:feae:22f7 > 2200::240:2:0:0:4: RT6 (len=2, type=0, segleft=1) \
             ICMP6, echo request, id 0, seq 0, length 8"
        );
        let pim = hex(
            "01005e00000dc20152720000080045c00036007900000167ce1a0a000001e000000d2000b3eb0001000200\
             6900140004d76852f600130004000000010015000401000000",
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &pim),
            "IP 10.0.0.1 > 224.0.0.13: PIMv2, Hello, length 34"
        );
        let stp = hex(
            "0180c2000000001906eab885002642420300000000008001001906eab880000000008001001906eab88080\
             050000140002000f000000000000000000",
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &stp),
            "STP 802.1d, Config, length 35"
        );
    }

    #[test]
    fn real_ipv4_fragments() {
        let later = hex(
            "0060089fb1f300e0f9cc18000800450005dc023d60b9fe112b45839701928397201564000000ec9b0408e0\
             0000001200000069000000dc9b04081d00",
        );
        assert_eq!(
            summarize(LinkType::ETHERNET, &later, 1514).as_str(),
            "IP 131.151.1.146 > 131.151.32.21: ip-proto-17"
        );
        let first = hex(
            "0060089fb1f300e0f9cc18000800450005dc023d6000fe112bfe83970192839720151b581b591644a0bbbf\
             cdb4be1b557a6400000146000000010000",
        );
        assert_eq!(
            summarize(LinkType::ETHERNET, &first, 1514).as_str(),
            "IP 131.151.1.146.7000 > 131.151.32.21.7001: UDP, length 1472"
        );
    }

    #[test]
    fn tcp_lines() {
        let syn_ack = ipv4(6, A, B, &tcp(0x12, 1, 2, &[]));
        assert_eq!(
            sum(LinkType::RAW, &syn_ack),
            "IP 198.18.0.1.443 > 198.18.0.2.51234: Flags [S.], seq 1, ack 2, win 512, length 0"
        );
        let data = ipv4(6, A, B, &tcp(0x18, 100, 5, b"0123456789"));
        assert_eq!(
            sum(LinkType::IPV4, &data),
            "IP 198.18.0.1.443 > 198.18.0.2.51234: Flags [P.], seq 100:110, ack 5, win 512, length 10"
        );
        let cut = &syn_ack[..20 + 12];
        let s = summarize(LinkType::RAW, cut, syn_ack.len() as u32);
        assert_eq!(s.as_str(), "IP 198.18.0.1.443 > 198.18.0.2.51234: [|tcp]");
        assert!(s.is_truncated());
        let cut = &syn_ack[..20 + 2];
        assert_eq!(
            summarize(LinkType::RAW, cut, 40).as_str(),
            "IP 198.18.0.1 > 198.18.0.2: [|tcp]"
        );
        let mut bad = tcp(0x02, 7, 0, &[]);
        bad[12] = 0x30;
        assert_eq!(
            sum(LinkType::RAW, &ipv4(6, A, B, &bad)),
            "IP 198.18.0.1.443 > 198.18.0.2.51234: [bad hdr length 12 - too short, < 20]"
        );
        let ack = ipv4(6, A, B, &tcp(0x10, 9, 10, &[]));
        assert_eq!(
            sum(LinkType::RAW, &ack),
            "IP 198.18.0.1.443 > 198.18.0.2.51234: Flags [.], ack 10, win 512, length 0"
        );
        // Options cut off by the snap length.
        let mut opt = tcp(0x02, 1, 0, &[2, 4, 5, 0xb4, 1, 3, 3, 7]);
        opt[12] = 0x70;
        let full = ipv4(6, A, B, &opt);
        assert_eq!(
            sum(LinkType::RAW, &full),
            "IP 198.18.0.1.443 > 198.18.0.2.51234: Flags [S], seq 1, win 512, \
             options [mss 1460,nop,wscale 7], length 0"
        );
        assert_eq!(
            summarize(LinkType::RAW, &full[..full.len() - 2], full.len() as u32).as_str(),
            "IP 198.18.0.1.443 > 198.18.0.2.51234: Flags [S], seq 1, win 512, options [mss 1460,nop [|tcp]"
        );
    }

    #[test]
    fn udp_icmp_and_unknown() {
        let d = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], &udp(53, 1234, &[0; 40]));
        let tagged = eth(0x8100, &[&[0x00, 0x0a, 0x08, 0x00][..], &d].concat());
        assert_eq!(
            sum(LinkType::ETHERNET, &tagged),
            "vlan 10 IP 10.0.0.1.53 > 10.0.0.2.1234: UDP, length 40"
        );
        let echo = ipv4(1, A, B, &icmp_echo(8, 1, 2));
        assert_eq!(
            sum(LinkType::RAW, &echo),
            "IP 198.18.0.1 > 198.18.0.2: ICMP echo request, id 1, seq 2, length 8"
        );
        // Port unreachable quoting the offending datagram.
        let quoted = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], &udp(40000, 53, &[]));
        let mut unreach = vec![3, 3, 0, 0, 0, 0, 0, 0];
        unreach.extend_from_slice(&quoted);
        let pkt = ipv4(1, [10, 0, 0, 2], [10, 0, 0, 1], &unreach);
        assert_eq!(
            sum(LinkType::RAW, &pkt),
            "IP 10.0.0.2 > 10.0.0.1: ICMP 10.0.0.2 udp port 53 unreachable, length 36"
        );
        let unknown = ipv4(123, A, B, &[1, 2, 3, 4]);
        assert_eq!(
            sum(LinkType::RAW, &unknown),
            "IP 198.18.0.1 > 198.18.0.2: ip-proto-123, length 4"
        );
        let ipip = ipv4(4, [1, 1, 1, 1], [2, 2, 2, 2], &echo);
        assert_eq!(
            sum(LinkType::RAW, &ipip),
            "IP 1.1.1.1 > 2.2.2.2: IP 198.18.0.1 > 198.18.0.2: ICMP echo request, id 1, seq 2, length 8"
        );
    }

    #[test]
    fn gre_and_sctp() {
        let inner = ipv4(1, [192, 168, 0, 1], [192, 168, 0, 2], &icmp_echo(0, 1, 2));
        let mut gre = vec![0x20, 0x00, 0x08, 0x00, 0, 0, 0, 0x2a];
        gre.extend_from_slice(&inner);
        let pkt = ipv4(47, [10, 0, 0, 1], [10, 0, 0, 2], &gre);
        assert_eq!(
            sum(LinkType::RAW, &pkt),
            "IP 10.0.0.1 > 10.0.0.2: GREv0, key=0x2a, length 36: \
             IP 192.168.0.1 > 192.168.0.2: ICMP echo reply, id 1, seq 2, length 8"
        );
        let mut sctp = vec![0x13, 0x88, 0x13, 0x89, 0, 0, 0, 0, 0, 0, 0, 0];
        sctp.extend_from_slice(&[1, 0, 0, 8, 0, 0, 0, 0, 11, 0, 0, 4]);
        let pkt = ipv4(132, [10, 0, 0, 1], [10, 0, 0, 2], &sctp);
        assert_eq!(
            sum(LinkType::RAW, &pkt),
            "IP 10.0.0.1.5000 > 10.0.0.2.5001: sctp (1) [INIT], (2) [COOKIE ACK]"
        );
        let esp = ipv4(50, A, B, &[0, 0, 1, 0, 0, 0]);
        assert_eq!(
            sum(LinkType::RAW, &esp),
            "IP 198.18.0.1 > 198.18.0.2: ESP [|esp]"
        );
        let mut ah = vec![1, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 3];
        ah.extend_from_slice(&[0xaa; 12]);
        ah.extend_from_slice(&icmp_echo(8, 5, 6));
        let pkt = ipv4(51, A, B, &ah);
        assert_eq!(
            sum(LinkType::RAW, &pkt),
            "IP 198.18.0.1 > 198.18.0.2: AH(spi=0x00000100,seq=0x3,icv=0xaaaaaaaaaaaaaaaaaaaaaaaa): \
             ICMP echo request, id 5, seq 6, length 8"
        );
    }

    #[test]
    fn ipv6_lines() {
        let mut echo = vec![128, 0, 0, 0, 0, 7, 0, 1];
        echo.extend_from_slice(b"pingping");
        assert_eq!(
            sum(LinkType::IPV6, &ipv6(58, &echo)),
            "IP6 2001:db8::1 > 2001:db8::2: ICMP6, echo request, id 7, seq 1, length 16"
        );
        // First fragment (offset 0, M) with a UDP header, then a later one.
        let mut first = vec![17, 0, 0x00, 0x01, 0, 0, 0, 9];
        first.extend_from_slice(&udp(5000, 5001, &[0; 8]));
        assert_eq!(
            sum(LinkType::RAW, &ipv6(44, &first)),
            "IP6 2001:db8::1.5000 > 2001:db8::2.5001: frag (0|16) UDP, length 8"
        );
        let mut later = vec![17, 0, 0x05, 0xa8, 0, 0, 0, 9];
        later.extend_from_slice(&[0; 16]);
        assert_eq!(
            sum(LinkType::RAW, &ipv6(44, &later)),
            "IP6 2001:db8::1 > 2001:db8::2: frag (1448|16)"
        );
        // A hop-by-hop header whose length runs past the packet.
        let bad = [58, 9, 1, 4, 0, 0, 0, 0];
        let s = summarize(LinkType::RAW, &ipv6(0, &bad), 48);
        assert_eq!(s.as_str(), "IP6 2001:db8::1 > 2001:db8::2: [|ip6ext]");
        assert!(s.is_truncated());
        assert_eq!(
            sum(LinkType::RAW, &ipv6(59, &[])),
            "IP6 2001:db8::1 > 2001:db8::2: no next header"
        );
        let tcp6 = ipv6(6, &tcp(0x02, 5, 0, &[]));
        assert_eq!(
            sum(LinkType::RAW, &tcp6),
            "IP6 2001:db8::1.443 > 2001:db8::2.51234: Flags [S], seq 5, win 512, length 0"
        );
        assert_eq!(sum(LinkType::IPV6, &tcp6[..30]), "IP6 [|ip6]");
    }

    #[test]
    fn link_layers() {
        let echo = ipv4(1, A, B, &icmp_echo(8, 1, 1));
        let want = "IP 198.18.0.1 > 198.18.0.2: ICMP echo request, id 1, seq 1, length 8";
        for hdr in [[2, 0, 0, 0], [0, 0, 0, 2]] {
            let f = [&hdr[..], &echo].concat();
            assert_eq!(sum(LinkType::NULL, &f), want);
            assert_eq!(sum(LinkType::LOOP, &f), want);
        }
        assert_eq!(sum(LinkType::NULL, &[7, 0, 0, 0, 1, 2]), "AF 7, length 2");
        assert_eq!(sum(LinkType::LOOP, &[0, 0]), "[|loop]");
        let mut sll2 = vec![
            0x08, 0x06, 0, 0, 0, 0, 0, 2, 0, 1, 4, 6, 2, 0, 0, 0, 0, 1, 0, 0,
        ];
        let arp = [
            0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
        ];
        sll2.extend_from_slice(&arp);
        assert_eq!(
            sum(LinkType::LINUX_SLL2, &sll2),
            "Out ARP, Request who-has 10.0.0.2 tell 10.0.0.1, length 28"
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &eth(0x1234, &[0; 46])),
            "ethertype Unknown (0x1234), length 60"
        );
        assert_eq!(
            sum(LinkType::ETHERNET, &eth(0x88f7, &[0; 46])),
            "ethertype PTP (0x88f7), length 60"
        );
        let s = summarize(LinkType::ETHERNET, &[0; 10], 60);
        assert_eq!(s.as_str(), "[|ether]");
        assert!(s.is_truncated());
        assert_eq!(
            sum(LinkType::ETHERNET, &eth(0x0800, &[0x45, 0])),
            "IP [|ip]"
        );
        assert_eq!(
            sum(LinkType::IEEE802_11, &[0; 10]),
            "link-type IEEE802_11, length 10"
        );
        assert_eq!(sum(LinkType::RAW, &[0x15, 0]), "ip v1, length 2");
        assert_eq!(sum(LinkType::RAW, &[]), "[|ip]");
        let s = summarize(LinkType::RAW, &syn(), 0);
        assert_eq!(s.to_string(), s.as_ref());
        assert!(!s.is_truncated());
    }

    fn syn() -> Vec<u8> {
        ipv4(6, A, B, &tcp(0x02, 1, 0, &[]))
    }

    #[test]
    fn depth_is_bounded() {
        // 40 stacked VLAN tags.
        let mut payload = Vec::new();
        for _ in 0..40 {
            payload.extend_from_slice(&[0x00, 0x01, 0x81, 0x00]);
        }
        let s = summarize(LinkType::ETHERNET, &eth(0x8100, &payload), 0);
        assert!(s.as_str().ends_with("[|too deep]"), "{s}");
        // 5000 stacked authentication headers.
        let mut ahs = Vec::new();
        for _ in 0..5000 {
            ahs.extend_from_slice(&[51, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
        }
        let s = sum(LinkType::RAW, &ipv4(51, A, B, &ahs));
        assert!(s.ends_with("[|too deep]"), "{s}");
        // IP-in-IP nested 30 times.
        let mut pkt = ipv4(59, A, B, &[]);
        for _ in 0..30 {
            pkt = ipv4(4, A, B, &pkt);
        }
        let s = sum(LinkType::RAW, &pkt);
        assert!(s.ends_with("[|too deep]"), "{s}");
    }
}
