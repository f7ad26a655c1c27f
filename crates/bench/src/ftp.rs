//! The FTP passive-mode workload of the Swift paper (§5.1.1): FTP servers, each with
//! data connections opened one after another in passive mode, mixed with background traffic.
//!
//! Each data connection is announced on its server's control connection (port 21): the client
//! sends `PASV` (or `EPSV`), the server answers `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)`
//! (or `229 Entering Extended Passive Mode (|||port|)`), and a short network round trip later
//! the client opens the data connection to that port. A monitor that follows the control
//! channel (FTPCap) must add a filter for the data connection between the reply and the first
//! data packet: every data packet it lets pass before that is a packet missed. The workload
//! records, for every data connection, when its reply was sent and how many packets it has, so
//! the misses can be counted.
//!
//! ```
//! use netsift_bench::ftp::FtpWorkload;
//!
//! let w = FtpWorkload { servers: 2, connections: 3, background_pps: 10_000, ..FtpWorkload::paper() };
//! let trace = w.generate();
//! assert_eq!(trace.connections.len(), 6);
//! assert!(trace.packets.windows(2).all(|p| p[0].timestamp <= p[1].timestamp));
//! ```

use netsift_capture::generate::{
    FrameBuilder, TCP_ACK, TCP_FIN, TCP_PSH, TCP_SYN, XorShift64, mixed_traffic,
};
use netsift_capture::{Packet, Timestamp};

/// The parameters of the workload. [`FtpWorkload::paper`] gives the paper's setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FtpWorkload {
    /// Seed of every random choice: the same parameters always give the same packets.
    pub seed: u64,
    /// FTP servers (198.18.10.1 and up).
    pub servers: usize,
    /// Data connections per server; all of a server's connections stay open until the end, so
    /// this many run concurrently per server.
    pub connections: usize,
    /// Microseconds between the starts of successive data connections (over all servers, in
    /// turn).
    pub start_interval_us: u64,
    /// Microseconds between data packets of one connection (server to client; the client
    /// acknowledges every second one).
    pub data_interval_us: u64,
    /// Microseconds the last connection transfers before every connection closes.
    pub tail_us: u64,
    /// Smallest and largest delay, in microseconds, from the passive-mode reply to the client's
    /// SYN (a LAN round trip plus the client's reaction).
    pub first_data_delay_us: (u64, u64),
    /// Every this-many-th connection is announced with `EPSV`/229 instead of `PASV`/227 (0:
    /// never).
    pub epsv_every: usize,
    /// Background packets per second (the mix of [`mixed_traffic`], spread evenly in time).
    pub background_pps: u64,
}

/// One data connection of a generated trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataConnection {
    /// The client's address.
    pub client: [u8; 4],
    /// The server's address.
    pub server: [u8; 4],
    /// The client's port of the data connection.
    pub client_port: u16,
    /// The server's (passive) port of the data connection, as announced in the reply.
    pub server_port: u16,
    /// When the server's 227/229 reply was sent (nanoseconds since the epoch).
    pub reply_ns: i128,
    /// When the client's SYN was sent.
    pub first_packet_ns: i128,
    /// Packets of the data connection in the trace (both directions).
    pub packets: usize,
    /// Announced with `EPSV`/229.
    pub epsv: bool,
}

impl DataConnection {
    /// Whether the Ethernet frame `frame` belongs to this connection (either direction, IPv4,
    /// untagged, TCP, not a fragment).
    pub fn matches(&self, frame: &[u8]) -> bool {
        if frame.len() < 14 + 20 + 4 || frame[12..14] != [8, 0] || frame[23] != 6 {
            return false;
        }
        let ihl = usize::from(frame[14] & 0xf) * 4;
        let Some(ports) = frame.get(14 + ihl..14 + ihl + 4) else {
            return false;
        };
        let (src, dst) = (&frame[26..30], &frame[30..34]);
        let (sp, dp) = (
            u16::from_be_bytes([ports[0], ports[1]]),
            u16::from_be_bytes([ports[2], ports[3]]),
        );
        (src == self.client
            && dst == self.server
            && sp == self.client_port
            && dp == self.server_port)
            || (src == self.server
                && dst == self.client
                && sp == self.server_port
                && dp == self.client_port)
    }
}

/// A generated trace: packets in timestamp order, and the data connections in them.
#[derive(Clone, Debug)]
pub struct FtpTrace {
    /// Every packet (Ethernet), in timestamp order.
    pub packets: Vec<Packet>,
    /// The data connections, in the order their replies were sent.
    pub connections: Vec<DataConnection>,
}

/// The trace's first timestamp: 2023-11-14 22:13:20 UTC, as [`mixed_traffic`].
const T0: i128 = 1_700_000_000 * 1_000_000_000;

impl FtpWorkload {
    /// The paper's setting: 10 servers x 20 concurrent data connections started one by one
    /// (2 ms apart), 1,000 data packets per second per connection, replies answered by a SYN
    /// 100-400 us later, every third connection announced with EPSV, 500,000 background packets
    /// per second.
    pub fn paper() -> FtpWorkload {
        FtpWorkload {
            seed: 1,
            servers: 10,
            connections: 20,
            start_interval_us: 2_000,
            data_interval_us: 1_000,
            tail_us: 50_000,
            first_data_delay_us: (100, 400),
            epsv_every: 3,
            background_pps: 500_000,
        }
    }

    /// Time from the first to the last packet, in nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        let conns = (self.servers * self.connections) as u64;
        (conns * self.start_interval_us + self.tail_us + 1_000) * 1_000
    }

    /// Generate the trace.
    pub fn generate(&self) -> FtpTrace {
        let mut rng = XorShift64::new(self.seed ^ 0x5eed_f7b0);
        let mut out: Vec<Packet> = Vec::new();
        let mut connections = Vec::new();
        let total = self.servers * self.connections;
        let end = T0 + i128::from(total as u64 * self.start_interval_us + self.tail_us) * 1_000;
        let us = |t: u64| i128::from(t) * 1_000;
        let mut client_seq = vec![0u32; self.servers];
        for c in 0..total {
            let s = c % self.servers;
            let server = [198, 18, 10, s as u8 + 1];
            let client = [198, 18, 20 + (c / 250) as u8, (c % 250) as u8 + 1];
            let smac = [2, 0, 0, 10, 0, s as u8 + 1];
            let cmac = [2, 0, 0, 20, (c / 250) as u8, (c % 250) as u8 + 1];
            let ctrl_port = 40_000 + c as u16;
            let data_port = 50_000 + rng.below(10_000) as u16;
            let client_port = 30_000 + c as u16;
            let epsv = self.epsv_every != 0 && c % self.epsv_every == self.epsv_every - 1;
            let start = T0 + us(c as u64 * self.start_interval_us);
            let c2s = |b: FrameBuilder| b.src_mac(cmac).dst_mac(smac);
            let s2c = |b: FrameBuilder| b.src_mac(smac).dst_mac(cmac);
            // The control connection (already open): the request, then the reply.
            let request: &[u8] = if epsv { b"EPSV\r\n" } else { b"PASV\r\n" };
            client_seq[s] = client_seq[s].wrapping_add(1);
            out.push(
                c2s(FrameBuilder::new())
                    .ipv4(client, server)
                    .tcp(ctrl_port, 21, TCP_PSH | TCP_ACK)
                    .tcp_seq(1000 + client_seq[s], 5000)
                    .payload(request)
                    .pad_to(60)
                    .build_packet(Timestamp::from_nanos(start)),
            );
            let reply = if epsv {
                format!("229 Entering Extended Passive Mode (|||{data_port}|)\r\n")
            } else {
                format!(
                    "227 Entering Passive Mode ({},{},{},{},{},{}).\r\n",
                    server[0],
                    server[1],
                    server[2],
                    server[3],
                    data_port >> 8,
                    data_port & 0xff
                )
            };
            let reply_ns = start + us(50);
            out.push(
                s2c(FrameBuilder::new())
                    .ipv4(server, client)
                    .tcp(21, ctrl_port, TCP_PSH | TCP_ACK)
                    .tcp_seq(5000, 1000 + client_seq[s])
                    .payload(reply.as_bytes())
                    .pad_to(60)
                    .build_packet(Timestamp::from_nanos(reply_ns)),
            );
            // The data connection: handshake, data until the end, close.
            let (lo, hi) = self.first_data_delay_us;
            let delay = lo + rng.below(hi.saturating_sub(lo) + 1);
            let mut t = reply_ns + us(delay);
            let first_packet_ns = t;
            let mut n = 0usize;
            let mut push = |out: &mut Vec<Packet>, from_client: bool, flags: u8, len: usize, t| {
                let b = if from_client {
                    c2s(FrameBuilder::new())
                        .ipv4(client, server)
                        .tcp(client_port, data_port, flags)
                } else {
                    s2c(FrameBuilder::new())
                        .ipv4(server, client)
                        .tcp(data_port, client_port, flags)
                };
                out.push(
                    b.payload(&vec![0x5a; len])
                        .pad_to(60)
                        .build_packet(Timestamp::from_nanos(t)),
                );
                n += 1;
            };
            push(&mut out, true, TCP_SYN, 0, t);
            push(&mut out, false, TCP_SYN | TCP_ACK, 0, t + us(60));
            push(&mut out, true, TCP_ACK, 0, t + us(120));
            t += us(200);
            let mut k = 0u64;
            while t < end {
                push(&mut out, false, TCP_ACK, 1448, t);
                if k % 2 == 1 {
                    push(&mut out, true, TCP_ACK, 0, t + us(30));
                }
                k += 1;
                t += us(self.data_interval_us);
            }
            push(&mut out, false, TCP_FIN | TCP_ACK, 0, t);
            push(&mut out, true, TCP_FIN | TCP_ACK, 0, t + us(60));
            push(&mut out, false, TCP_ACK, 0, t + us(120));
            connections.push(DataConnection {
                client,
                server,
                client_port,
                server_port: data_port,
                reply_ns,
                first_packet_ns,
                packets: n,
                epsv,
            });
        }
        // Background: the mix, evenly spread.
        if self.background_pps > 0 {
            let count = (self.duration_ns() as u128 * u128::from(self.background_pps)
                / 1_000_000_000) as usize;
            let gap = 1_000_000_000 / i128::from(self.background_pps);
            for (i, mut p) in mixed_traffic(self.seed, count).into_iter().enumerate() {
                p.timestamp = Timestamp::from_nanos(T0 + i as i128 * gap);
                out.push(p);
            }
        }
        out.sort_by_key(|p| p.timestamp.as_nanos());
        FtpTrace {
            packets: out,
            connections,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> FtpWorkload {
        FtpWorkload {
            servers: 3,
            connections: 4,
            background_pps: 20_000,
            ..FtpWorkload::paper()
        }
    }

    #[test]
    fn every_connection_is_announced_before_its_first_packet() {
        let trace = small().generate();
        assert_eq!(trace.connections.len(), 12);
        for c in &trace.connections {
            let mine: Vec<&Packet> = trace
                .packets
                .iter()
                .filter(|p| c.matches(&p.data))
                .collect();
            assert_eq!(mine.len(), c.packets);
            assert_eq!(mine[0].timestamp.as_nanos(), c.first_packet_ns);
            assert!(c.first_packet_ns > c.reply_ns + 99_000);
            // The reply names the port.
            let reply = trace
                .packets
                .iter()
                .find(|p| p.timestamp.as_nanos() == c.reply_ns && p.data[26..30] == c.server)
                .expect("a reply");
            let text = String::from_utf8_lossy(&reply.data[54..]);
            if c.epsv {
                assert!(text.contains(&format!("(|||{}|)", c.server_port)), "{text}");
            } else {
                let p = format!(",{},{})", c.server_port >> 8, c.server_port & 0xff);
                assert!(text.starts_with("227 ") && text.contains(&p), "{text}");
            }
        }
        assert!(trace.connections.iter().any(|c| c.epsv));
    }

    #[test]
    fn background_rate_and_order() {
        let w = small();
        let trace = w.generate();
        let ftp: usize = trace.connections.iter().map(|c| c.packets + 2).sum();
        let background = trace.packets.len() - ftp;
        let expect = w.duration_ns() as f64 * 20_000.0 / 1e9;
        assert!(
            (background as f64 - expect).abs() < 2.0,
            "{background} vs {expect}"
        );
        assert!(
            trace
                .packets
                .windows(2)
                .all(|p| p[0].timestamp <= p[1].timestamp)
        );
        // Deterministic.
        let again = w.generate();
        assert_eq!(trace.packets.len(), again.packets.len());
        assert!(
            trace
                .packets
                .iter()
                .zip(&again.packets)
                .all(|(a, b)| a.data == b.data)
        );
    }
}
