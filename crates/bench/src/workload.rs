//! The packets and filters the benchmarks run.

use netsift_capture::generate::{FrameBuilder, TCP_ACK, TCP_PSH, TCP_SYN, XorShift64};
use netsift_capture::{Packet, Timestamp};

/// Seed of the packets every interpreter benchmark runs on.
pub const SEED: u64 = 0x0515_71f7;

/// Snap length of the workload's packets (the Swift paper's trace was cut at 75 bytes; 96 keeps
/// IPv6 transport headers).
pub const SNAPLEN: usize = 96;

/// The 38 hosts of the Swift paper's Table 5 filter 6 ("38 IP addresses ORed together").
pub fn swift_hosts() -> Vec<String> {
    (0..38)
        .map(|i| format!("10.1.{}.{}", i / 10, 10 + i))
        .collect()
}

/// A named filter expression.
#[derive(Clone, Debug)]
pub struct NamedFilter {
    /// Short name for tables.
    pub name: &'static str,
    /// The tcpdump expression.
    pub expr: String,
}

/// The filters of the interpreter benchmark: accept-all, `ip`, `tcp port 80`, a three-network
/// `or`, and the Swift paper's Table 5 filters 3 to 6.
pub fn interp_filters() -> Vec<NamedFilter> {
    let hosts = swift_hosts().join(" or ");
    vec![
        NamedFilter {
            name: "accept-all",
            expr: String::new(),
        },
        NamedFilter {
            name: "ip",
            expr: "ip".into(),
        },
        NamedFilter {
            name: "tcp port 80",
            expr: "tcp port 80".into(),
        },
        NamedFilter {
            name: "3 networks",
            expr: "net 10.0.0.0/8 or net 172.16.0.0/12 or net 192.168.0.0/16".into(),
        },
        NamedFilter {
            name: "swift-3",
            expr: "ip src net 192.168.2.0/24 and dst net 10.0.0.0/8".into(),
        },
        NamedFilter {
            name: "swift-4",
            expr: "ip src or dst net 192.168.2.0/24".into(),
        },
        NamedFilter {
            name: "swift-5",
            expr: "ip and tcp port (ssh or http or imap or smtp or pop3 or ftp)".into(),
        },
        NamedFilter {
            name: "swift-6",
            expr: format!("ip and (not tcp port (80 or 25 or 143) and not ip host ({hosts}))"),
        },
    ]
}

/// The six filters of the Swift paper's Table 5, named `swift-1` … `swift-6`: accept all, `ip`,
/// two network filters, a port list, and the 38-host filter.
pub fn swift_table5() -> Vec<NamedFilter> {
    let mut v = vec![
        NamedFilter {
            name: "swift-1",
            expr: String::new(),
        },
        NamedFilter {
            name: "swift-2",
            expr: "ip".into(),
        },
    ];
    v.extend(
        interp_filters()
            .into_iter()
            .filter(|f| f.name.starts_with("swift")),
    );
    v
}

/// The filters of the compile benchmark: the Swift paper's Table 5 filters 1 to 6 and a
/// 200-host `host A or host B or …`.
pub fn compile_filters() -> Vec<NamedFilter> {
    let mut v: Vec<NamedFilter> = interp_filters()
        .into_iter()
        .filter(|f| f.name.starts_with("swift") || f.name == "accept-all" || f.name == "ip")
        .collect();
    let hosts: Vec<String> = (0..200)
        .map(|i| format!("host 10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256))
        .collect();
    v.push(NamedFilter {
        name: "200 hosts",
        expr: hosts.join(" or "),
    });
    v
}

/// A reproducible gateway-like mix of `count` Ethernet packets cut to [`SNAPLEN`] bytes: mostly
/// TCP (web, mail, IMAP, SSH and high ports) and UDP (DNS, high ports) over IPv4 between private
/// and public networks, some IPv6, ICMP, ARP and VLAN-tagged frames; a few packets touch the
/// Swift filter-6 hosts.
pub fn packets(seed: u64, count: usize) -> Vec<Packet> {
    mix(seed, count, Some(SNAPLEN))
}

/// The same mix as [`packets`], with whole frames (the wire length of each packet is its
/// length) and its addresses moved into the test ranges (see [`to_test_range`]): traffic to
/// send onto a test network.
pub fn frames(seed: u64, count: usize) -> Vec<Packet> {
    mix(seed, count, None)
}

/// Where [`frames`] puts an address of the mix: inside 198.18.0.0/15, one /20 of 198.18.0.0/16
/// for each network of the mix (10.0/16, 172.16/16, 192.168/16, 198.18/16, 203.0/16) and the
/// Swift filter-6 hosts (10.1.x.y) at 198.19.x.y — never in 198.19.255.0/24, where the test
/// namespaces address their own interfaces. Distinct addresses stay distinct.
pub fn to_test_range(a: [u8; 4]) -> [u8; 4] {
    let net = match [a[0], a[1]] {
        [10, 1] => return [198, 19, a[2], a[3]],
        [10, 0] => 0,
        [172, 16] => 16,
        [192, 168] => 32,
        [198, 18] => 48,
        _ => 64,
    };
    [198, 18, net + (a[2] & 15), a[3]]
}

fn mix(seed: u64, count: usize, cut: Option<usize>) -> Vec<Packet> {
    // Sent traffic carries only test addresses; in-memory benchmarks keep the filters' own.
    let send = cut.is_none();
    let place = |a: [u8; 4]| if send { to_test_range(a) } else { a };
    let mut rng = XorShift64::new(seed);
    let hosts: Vec<[u8; 4]> = (0..38u8).map(|i| [10, 1, i / 10, 10 + i]).collect();
    let nets: [[u8; 2]; 5] = [[10, 0], [172, 16], [192, 168], [198, 18], [203, 0]];
    let addr = |rng: &mut XorShift64| -> [u8; 4] {
        let n = nets[rng.below(nets.len() as u64) as usize];
        [n[0], n[1], rng.below(4) as u8, rng.below(250) as u8 + 1]
    };
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let (mut src, dst) = (addr(&mut rng), addr(&mut rng));
        if rng.below(20) == 0 {
            src = hosts[rng.below(hosts.len() as u64) as usize];
        }
        let (src, dst) = (place(src), place(dst));
        let b = FrameBuilder::new();
        let b = match rng.below(100) {
            0..=59 => {
                let port = [80, 443, 25, 143, 22, 8080, 3306][rng.below(7) as usize];
                let flags = [TCP_SYN, TCP_ACK, TCP_PSH | TCP_ACK][rng.below(3) as usize];
                b.ipv4(src, dst)
                    .tcp(1024 + rng.below(60000) as u16, port, flags)
                    .payload(&[0u8; 200])
            }
            60..=84 => {
                let port = [53, 123, 5353, 40000][rng.below(4) as usize];
                b.ipv4(src, dst)
                    .udp(1024 + rng.below(60000) as u16, port)
                    .payload(&[0u8; 80])
            }
            85..=89 => b
                .ipv4(src, dst)
                .icmp_echo_request(1, i as u16)
                .payload(&[0u8; 56]),
            90..=94 => {
                let mut s6 = [0u8; 16];
                s6[..2].copy_from_slice(&[0x20, 0x01]);
                if send {
                    s6[2..4].copy_from_slice(&[0x0d, 0xb8]);
                    s6[13] = 1;
                }
                s6[15] = rng.below(255) as u8;
                let d6 = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
                b.ipv6(s6, d6).tcp(40000, 443, TCP_ACK).payload(&[0u8; 100])
            }
            95..=97 => b.arp_request(src, dst),
            _ => b
                .vlan(10)
                .ipv4(src, dst)
                .tcp(40000, 80, TCP_ACK)
                .payload(&[0u8; 64]),
        };
        let mut p = b
            .pad_to(60)
            .build_packet(Timestamp::from_nanos(i as i128 * 4_000));
        if let Some(cut) = cut {
            p.data.truncate(cut);
        }
        out.push(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sent_frames_carry_only_test_addresses() {
        let sent = frames(SEED, 20_000);
        assert!(
            sent.iter()
                .all(|p| netsift_capture::live::foreign_address(&p.data).is_none())
        );
        // The in-memory mix keeps the addresses its filters name.
        assert!(
            packets(SEED, 20_000)
                .iter()
                .any(|p| netsift_capture::live::foreign_address(&p.data).is_some())
        );
        // The same packets otherwise: same kinds, same lengths on the wire.
        let kept = packets(SEED, 20_000);
        assert!(sent.iter().zip(&kept).all(|(x, y)| {
            x.wire_len == y.wire_len && x.data[..14] == y.data[..14] && x.data.len() >= y.data.len()
        }));
    }
}
