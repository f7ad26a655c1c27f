//! The bundled sample capture: a small, reproducible slice of a monitored LAN segment.
//!
//! `samples/demo.pcap` in the repository is exactly what [`build`] writes (a test checks this), so
//! the sample can be regenerated with `netsift demo --write-sample samples/demo.pcap`. It is
//! compiled into the binary, so `netsift demo` needs no files.
//!
//! The story, on 198.18.0.0/15 and 2001:db8::/32 (documentation and benchmarking ranges): a
//! workstation resolves a name (ARP, DNS), fetches a web page over HTTP (a whole TCP session),
//! pings the gateway, a scanner sweeps the web server's low ports with SYNs, a switch forwards
//! VLAN-tagged syslog, and a background mix of TCP, UDP, ICMP and ARP over IPv4 and IPv6 flows.

use netsift::capture::generate::{
    FrameBuilder, TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN, mixed_traffic,
};
use netsift::capture::{LinkType, Packet, PcapWriter, Precision, Timestamp};

/// The sample, as pcap bytes, embedded at build time.
pub const DEMO_PCAP: &[u8] = include_bytes!("../../../samples/demo.pcap");

const WORKSTATION: [u8; 4] = [198, 18, 0, 10];
const GATEWAY: [u8; 4] = [198, 18, 0, 1];
const DNS: [u8; 4] = [198, 18, 0, 53];
const WEB: [u8; 4] = [198, 18, 0, 80];
const SCANNER: [u8; 4] = [198, 19, 66, 6];
const SYSLOG: [u8; 4] = [198, 18, 1, 5];
const MAC_WS: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_GW: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// Build the sample's packets, sorted by time.
pub fn packets() -> Vec<Packet> {
    let t0: i128 = 1_767_225_600 * 1_000_000_000; // 2026-01-01 00:00:00 UTC
    let mut out: Vec<Packet> = Vec::new();
    let mut at = |ms: i128, b: FrameBuilder| {
        out.push(
            b.pad_to(60)
                .build_packet(Timestamp::from_nanos(t0 + ms * 1_000_000 + 137)),
        );
    };
    let ws = || FrameBuilder::new().src_mac(MAC_WS).dst_mac(MAC_GW);
    let to_ws = || FrameBuilder::new().src_mac(MAC_GW).dst_mac(MAC_WS);

    // ARP for the gateway, then a DNS lookup.
    at(
        0,
        FrameBuilder::new()
            .src_mac(MAC_WS)
            .dst_mac([0xff; 6])
            .arp_request(WORKSTATION, GATEWAY),
    );
    at(1, to_ws().arp_reply(GATEWAY, MAC_WS, WORKSTATION));
    let query = dns_query(0x4a1d, "www.example.test");
    at(
        2,
        ws().ipv4(WORKSTATION, DNS).udp(53_211, 53).payload(&query),
    );
    at(
        9,
        to_ws()
            .ipv4(DNS, WORKSTATION)
            .udp(53, 53_211)
            .payload(&dns_answer(&query, WEB)),
    );

    // An HTTP session: handshake, request, a 4-segment response, close.
    let (c, s) = (1_000_u32, 7_000_u32);
    let http = |b: FrameBuilder, flags, seq, ack| b.tcp(49_152, 80, flags).tcp_seq(seq, ack);
    let from_web = |flags, seq, ack| {
        to_ws()
            .ipv4(WEB, WORKSTATION)
            .tcp(80, 49_152, flags)
            .tcp_seq(seq, ack)
    };
    at(20, http(ws().ipv4(WORKSTATION, WEB), TCP_SYN, c, 0));
    at(21, from_web(TCP_SYN | TCP_ACK, s, c + 1));
    at(22, http(ws().ipv4(WORKSTATION, WEB), TCP_ACK, c + 1, s + 1));
    let request =
        b"GET /index.html HTTP/1.1\r\nHost: www.example.test\r\nUser-Agent: netsift-demo\r\n\r\n";
    at(
        23,
        http(ws().ipv4(WORKSTATION, WEB), TCP_PSH | TCP_ACK, c + 1, s + 1).payload(request),
    );
    let c2 = c + 1 + request.len() as u32;
    let mut seq = s + 1;
    for i in 0..4u32 {
        let body: Vec<u8> = if i == 0 {
            let mut b =
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5400\r\n\r\n"
                    .to_vec();
            b.resize(1400, b'x');
            b
        } else {
            vec![b'x'; 1400]
        };
        at(
            30 + i128::from(i),
            from_web(TCP_ACK | if i == 3 { TCP_PSH } else { 0 }, seq, c2).payload(&body),
        );
        seq += body.len() as u32;
        if i % 2 == 1 {
            at(
                31 + i128::from(i),
                http(ws().ipv4(WORKSTATION, WEB), TCP_ACK, c2, seq),
            );
        }
    }
    at(
        40,
        http(ws().ipv4(WORKSTATION, WEB), TCP_FIN | TCP_ACK, c2, seq),
    );
    at(41, from_web(TCP_FIN | TCP_ACK, seq, c2 + 1));
    at(
        42,
        http(ws().ipv4(WORKSTATION, WEB), TCP_ACK, c2 + 1, seq + 1),
    );

    // Four pings to the gateway.
    for i in 0..4u16 {
        let ms = 100 + 1000 * i128::from(i);
        at(
            ms,
            ws().ipv4(WORKSTATION, GATEWAY)
                .icmp_echo_request(0x2b1, i + 1)
                .payload(&[0x5a; 56]),
        );
        at(
            ms + 1,
            to_ws()
                .ipv4(GATEWAY, WORKSTATION)
                .icmp_echo_reply(0x2b1, i + 1)
                .payload(&[0x5a; 56]),
        );
    }

    // A SYN sweep of the web server's low ports; closed ports answer with RST.
    for port in 1..=24u16 {
        let ms = 500 + 7 * i128::from(port);
        let b = FrameBuilder::new()
            .src_mac([0x02, 0, 0, 0, 0x66, 6])
            .dst_mac([0x02, 0, 0, 0, 0, 0x50]);
        at(
            ms,
            b.ipv4(SCANNER, WEB)
                .tcp(61_000, port, TCP_SYN)
                .tcp_seq(0x5ca1_ab1e, 0),
        );
        if port != 22 {
            let r = FrameBuilder::new()
                .src_mac([0x02, 0, 0, 0, 0, 0x50])
                .dst_mac([0x02, 0, 0, 0, 0x66, 6]);
            at(
                ms + 1,
                r.ipv4(WEB, SCANNER)
                    .tcp(port, 61_000, TCP_RST | TCP_ACK)
                    .tcp_seq(0, 0x5ca1_ab1f),
            );
        }
    }

    // VLAN-tagged syslog from a switch.
    for i in 0..6u16 {
        let msg = format!("<134>Jan  1 00:00:0{i} sw1 link eth{i} up");
        let b = FrameBuilder::new()
            .src_mac([0x02, 0, 0, 0, 0x0f, 1])
            .dst_mac([0x02, 0, 0, 0, 1, 5])
            .vlan(100);
        at(
            1500 + 250 * i128::from(i),
            b.ipv4([198, 18, 100, 2], SYSLOG)
                .udp(514, 514)
                .payload(msg.as_bytes()),
        );
    }

    // Background traffic, shifted into the same window.
    let background = mixed_traffic(2026, 120);
    let shift = t0 - background.first().map_or(0, |p| p.timestamp.as_nanos()) + 3_000_000;
    for mut p in background {
        p.timestamp = p.timestamp.saturating_add_nanos(shift);
        out.push(p);
    }
    out.sort_by_key(|p| p.timestamp);
    out
}

/// The sample as pcap bytes (microsecond timestamps, Ethernet, snap length 262144).
pub fn build() -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), LinkType::ETHERNET, 262_144, Precision::Micro)
        .unwrap_or_else(|e| unreachable!("writing to memory cannot fail: {e}"));
    for p in packets() {
        w.write_packet(&p.as_ref())
            .unwrap_or_else(|e| unreachable!("writing to memory cannot fail: {e}"));
    }
    w.into_inner()
        .unwrap_or_else(|e| unreachable!("writing to memory cannot fail: {e}"))
}

/// A DNS query for an A record of `name`.
fn dns_query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::new();
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// The answer to `query`: one A record.
fn dns_answer(query: &[u8], addr: [u8; 4]) -> Vec<u8> {
    let mut a = query.to_vec();
    a[2] = 0x81;
    a[3] = 0x80;
    a[7] = 1; // one answer
    a.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4]);
    a.extend_from_slice(&addr);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_sample_is_what_the_generator_writes() {
        assert!(
            build() == DEMO_PCAP,
            "samples/demo.pcap is stale: regenerate it with `netsift demo --write-sample samples/demo.pcap`"
        );
    }
}
