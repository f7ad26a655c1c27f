//! Packet and payload parsing for the external functions: the transport payload of an Ethernet
//! frame, and the dynamic-port announcements of RTSP, SIP/SDP and FTP.
//!
//! No function here panics or allocates on any input: every index is checked, numbers are
//! parsed with overflow checks, and anything malformed gives `None`.

use std::net::IpAddr;

use netsift_wire::LinkType;

/// The transport view of a frame: TCP or UDP over IPv4 or IPv6 in an Ethernet frame, as
/// `netsift-wire`'s flow-key parser walks it (any number of VLAN tags, MPLS, PPPoE, IPv6
/// extension headers; later fragments have no transport view).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow<'a> {
    /// IP protocol (6 or 17).
    pub proto: u8,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Source address (IPv4: the 4 bytes then zeros; IPv6: all 16).
    pub src: [u8; 16],
    /// Destination address, as `src`.
    pub dst: [u8; 16],
    /// The transport payload (within the captured bytes, without link-layer padding).
    pub payload: &'a [u8],
}

/// The address as 16 bytes: IPv4's 4 then zeros.
fn bytes16(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v) => {
            let mut b = [0; 16];
            b[..4].copy_from_slice(&v.octets());
            b
        }
        IpAddr::V6(v) => v.octets(),
    }
}

/// Parses the frame; `None` unless it is TCP or UDP over IPv4/IPv6 with its ports captured.
pub fn flow(pkt: &[u8]) -> Option<Flow<'_>> {
    let f = netsift_wire::flow::parse(LinkType::ETHERNET, pkt)?;
    let (sport, dport) = f.key.ports?;
    if !matches!(f.key.proto.0, 6 | 17) {
        return None;
    }
    Some(Flow {
        proto: f.key.proto.0,
        sport,
        dport,
        src: bytes16(f.key.src),
        dst: bytes16(f.key.dst),
        payload: f.payload(pkt),
    })
}

/// The transport payload, or an empty slice.
pub fn payload(pkt: &[u8]) -> &[u8] {
    flow(pkt).map_or(&[], |f| f.payload)
}

fn lines(p: &[u8]) -> impl Iterator<Item = &[u8]> {
    p.split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
}

fn starts_with_ci(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

fn trim(s: &[u8]) -> &[u8] {
    let a = s
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len());
    let e = s
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(a, |i| i + 1);
    &s[a..e.max(a)]
}

/// A decimal number of at most 10 digits at the start of `s`; returns it and the rest.
fn number(s: &[u8]) -> Option<(u64, &[u8])> {
    let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 || n > 10 {
        return None;
    }
    let v = s[..n]
        .iter()
        .fold(0u64, |v, d| v * 10 + u64::from(d - b'0'));
    Some((v, &s[n..]))
}

fn port(s: &[u8]) -> Option<(u16, &[u8])> {
    let (v, rest) = number(s)?;
    let v = u16::try_from(v).ok().filter(|p| *p != 0)?;
    Some((v, rest))
}

/// Ports in an RTSP `Transport` header: `client_port` and `server_port`, each `(first, last)`
/// of an `a-b` range (`last == first` for a single port).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtspPorts {
    /// `client_port=…` (where the client receives RTP/RTCP).
    pub client: Option<(u16, u16)>,
    /// `server_port=…`.
    pub server: Option<(u16, u16)>,
}

/// Finds the first `Transport:` header in the RTSP message head (request or reply) and parses
/// the ports of its first transport spec.
pub fn rtsp_ports(p: &[u8]) -> Option<RtspPorts> {
    let head = memchr::memmem::find(p, b"\r\n\r\n").map_or(p, |e| &p[..e]);
    let line = lines(head).find(|l| starts_with_ci(l, b"transport:"))?;
    let spec = line[10..].split(|b| *b == b',').next()?;
    let mut out = RtspPorts::default();
    for param in spec.split(|b| *b == b';') {
        let param = trim(param);
        let (slot, rest) = if starts_with_ci(param, b"client_port=") {
            (&mut out.client, &param[12..])
        } else if starts_with_ci(param, b"server_port=") {
            (&mut out.server, &param[12..])
        } else {
            continue;
        };
        if slot.is_some() {
            continue;
        }
        let Some((a, rest)) = port(rest) else {
            continue;
        };
        let b = match rest.strip_prefix(b"-") {
            Some(r) => match port(r) {
                Some((b, r)) if r.is_empty() && b >= a => b,
                _ => continue,
            },
            None if trim(rest).is_empty() => a,
            None => continue,
        };
        *slot = Some((a, b));
    }
    (out.client.is_some() || out.server.is_some()).then_some(out)
}

fn ipv4(s: &[u8]) -> Option<([u8; 4], &[u8])> {
    let mut ip = [0u8; 4];
    let mut rest = s;
    for (i, x) in ip.iter_mut().enumerate() {
        if i > 0 {
            rest = rest.strip_prefix(b".")?;
        }
        let (v, r) = number(rest)?;
        *x = u8::try_from(v).ok()?;
        rest = r;
    }
    Some((ip, rest))
}

/// RTP endpoint from an SDP body (in a SIP message): the port of the first `m=audio` line and
/// the address of the first `c=IN IP4` line.
pub fn sdp_audio(p: &[u8]) -> (Option<u16>, Option<[u8; 4]>) {
    let (mut port_out, mut addr) = (None, None);
    for l in lines(p) {
        if port_out.is_none() && starts_with_ci(l, b"m=audio ") {
            port_out = port(trim(&l[8..])).map(|(p, _)| p);
        } else if addr.is_none() && starts_with_ci(l, b"c=IN IP4 ") {
            addr = ipv4(trim(&l[9..]))
                .and_then(|(a, r)| (r.is_empty() || r.starts_with(b"/")).then_some(a));
        }
    }
    (port_out, addr)
}

/// The data port of an FTP passive-mode reply: `227 … (h1,h2,h3,h4,p1,p2)` (address and port)
/// or `229 … (|||port|)` (port only; any delimiter character).
pub fn ftp_passive(p: &[u8]) -> Option<(u16, Option<[u8; 4]>)> {
    let line = lines(p).find(|l| l.starts_with(b"227") || l.starts_with(b"229"))?;
    if line.starts_with(b"227") {
        // The six numbers may or may not be in parentheses (RFC 1123 4.1.2.6): take the first
        // digit run that parses as h1,…,p2.
        let mut i = 3;
        while i < line.len() {
            if line[i].is_ascii_digit() && !line[i - 1].is_ascii_digit() {
                let mut v = [0u8; 6];
                let mut rest = &line[i..];
                let mut ok = true;
                for (k, x) in v.iter_mut().enumerate() {
                    if k > 0 {
                        match rest.strip_prefix(b",") {
                            Some(r) => rest = r,
                            None => {
                                ok = false;
                                break;
                            }
                        }
                    }
                    match number(rest).and_then(|(n, r)| Some((u8::try_from(n).ok()?, r))) {
                        Some((n, r)) => {
                            *x = n;
                            rest = r;
                        }
                        None => {
                            ok = false;
                            break;
                        }
                    }
                }
                let port = u16::from_be_bytes([v[4], v[5]]);
                if ok && port != 0 {
                    return Some((port, Some([v[0], v[1], v[2], v[3]])));
                }
            }
            i += 1;
        }
        None
    } else {
        let open = line.iter().position(|b| *b == b'(')?;
        let rest = line.get(open + 1..)?;
        let d = *rest.first()?;
        if d.is_ascii_digit() || !(33..=126).contains(&d) {
            return None;
        }
        if rest.get(1) != Some(&d) || rest.get(2) != Some(&d) {
            return None;
        }
        let (p, r) = port(rest.get(3..)?)?;
        (r.first() == Some(&d) && r.get(1) == Some(&b')')).then_some((p, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtsp_transport() {
        let m = b"RTSP/1.0 200 OK\r\nCSeq: 3\r\nTransport: RTP/AVP/TCP;unicast;client_port=5000-5001;server_port=6970-6971\r\nSession: 1\r\n\r\n";
        let p = rtsp_ports(m).unwrap();
        assert_eq!(p.client, Some((5000, 5001)));
        assert_eq!(p.server, Some((6970, 6971)));
        assert_eq!(rtsp_ports(b"Transport: RTP/AVP;client_port=70000"), None);
        assert_eq!(rtsp_ports(b"Transport: RTP/AVP;client_port=9-3"), None);
        assert_eq!(
            rtsp_ports(b"transport:RTP/AVP;client_port=9")
                .unwrap()
                .client,
            Some((9, 9))
        );
        assert_eq!(rtsp_ports(b"Transport: RTP/AVP;client_port="), None);
    }

    #[test]
    fn sdp_and_ftp() {
        let s = b"INVITE sip:b@x SIP/2.0\r\n\r\nv=0\r\nc=IN IP4 192.0.2.7\r\nm=audio 49170 RTP/AVP 0\r\n";
        assert_eq!(sdp_audio(s), (Some(49170), Some([192, 0, 2, 7])));
        assert_eq!(
            sdp_audio(b"m=audio 99999 RTP\nc=IN IP4 1.2.3"),
            (None, None)
        );
        assert_eq!(
            ftp_passive(b"227 Entering Passive Mode (192,168,1,2,19,137).\r\n"),
            Some((5001, Some([192, 168, 1, 2])))
        );
        assert_eq!(
            ftp_passive(b"227 =10,0,0,1,0,21"),
            Some((21, Some([10, 0, 0, 1])))
        );
        assert_eq!(
            ftp_passive(b"229 Entering Extended Passive Mode (|||6446|)\r\n"),
            Some((6446, None))
        );
        assert_eq!(ftp_passive(b"229 (|||6446)"), None);
        assert_eq!(ftp_passive(b"227 (1,2,3,4,256,1)"), None);
        assert_eq!(ftp_passive(b"227"), None);
        assert_eq!(ftp_passive(b"229 ("), None);
    }
}
