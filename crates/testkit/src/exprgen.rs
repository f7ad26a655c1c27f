//! A generator of random filter expressions for property tests: primitives of every family
//! (protocols, hosts, networks, ports, ranges, accessors and relations, VLAN/MPLS/PPPoE,
//! link-level tests) joined by `and`/`or`/`not` and parentheses, with values taken from real
//! packets so that they sometimes match.

use crate::rng::Rng;

/// Values seen in real packets, to make generated primitives match sometimes.
#[derive(Clone, Debug, Default)]
pub struct Seeds {
    /// IPv4 addresses.
    pub ipv4: Vec<[u8; 4]>,
    /// Ports.
    pub ports: Vec<u16>,
    /// MAC addresses.
    pub macs: Vec<[u8; 6]>,
}

impl Seeds {
    /// Harvest values from Ethernet frames.
    pub fn from_frames<'a>(frames: impl IntoIterator<Item = &'a [u8]>) -> Seeds {
        let mut s = Seeds::default();
        for f in frames {
            if f.len() >= 12 {
                let mut m = [0u8; 6];
                m.copy_from_slice(&f[6..12]);
                s.macs.push(m);
            }
            if f.len() >= 38 && f[12] == 0x08 && f[13] == 0x00 {
                s.ipv4.push([f[26], f[27], f[28], f[29]]);
                let ihl = usize::from(f[14] & 0xf) * 4;
                if f.len() >= 14 + ihl + 4 {
                    s.ports.push(u16::from_be_bytes([f[14 + ihl], f[15 + ihl]]));
                }
            }
        }
        s.ipv4.sort_unstable();
        s.ipv4.dedup();
        s.ports.sort_unstable();
        s.ports.dedup();
        s.macs.sort_unstable();
        s.macs.dedup();
        if s.ipv4.is_empty() {
            s.ipv4.push([10, 0, 0, 1]);
        }
        if s.ports.is_empty() {
            s.ports.push(80);
        }
        if s.macs.is_empty() {
            s.macs.push([0, 1, 2, 3, 4, 5]);
        }
        s
    }
}

/// Generate one expression of at most `depth` levels of nesting.
pub fn expression(rng: &mut Rng, seeds: &Seeds, depth: u32) -> String {
    if depth == 0 || rng.chance(2, 5) {
        return primitive(rng, seeds);
    }
    match rng.below(5) {
        0 => format!("not {}", paren(rng, seeds, depth - 1)),
        1 | 2 => format!(
            "{} and {}",
            expression(rng, seeds, depth - 1),
            paren(rng, seeds, depth - 1)
        ),
        _ => format!(
            "{} or {}",
            expression(rng, seeds, depth - 1),
            paren(rng, seeds, depth - 1)
        ),
    }
}

fn paren(rng: &mut Rng, seeds: &Seeds, depth: u32) -> String {
    let e = expression(rng, seeds, depth);
    if rng.chance(1, 2) {
        format!("({e})")
    } else {
        e
    }
}

fn ip(rng: &mut Rng, seeds: &Seeds) -> String {
    let a = *rng.pick(&seeds.ipv4);
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

fn port(rng: &mut Rng, seeds: &Seeds) -> u16 {
    if rng.chance(1, 3) {
        *rng.pick(&[53, 80, 443, 22, 123, 67, 68, 179])
    } else {
        *rng.pick(&seeds.ports)
    }
}

fn primitive(rng: &mut Rng, seeds: &Seeds) -> String {
    let dir = || ["", "src ", "dst ", "src or dst ", "src and dst "];
    match rng.below(32) {
        0 => rng
            .pick(&[
                "ip", "ip6", "arp", "rarp", "tcp", "udp", "icmp", "icmp6", "sctp", "igmp", "pim",
                "vrrp", "ah", "esp", "stp", "iso", "ipx", "llc", "decnet", "atalk", "aarp", "isis",
                "l1", "pppoed",
            ])
            .to_string(),
        1 | 2 => format!(
            "{}{}host {}",
            rng.pick(&["", "ip ", "arp "]),
            rng.pick(&dir()),
            ip(rng, seeds)
        ),
        3 => {
            let a = *rng.pick(&seeds.ipv4);
            let len = *rng.pick(&[8u32, 12, 16, 24, 32]);
            let mask = if len == 32 {
                u32::MAX
            } else {
                u32::MAX << (32 - len)
            };
            let n = u32::from_be_bytes(a) & mask;
            let b = n.to_be_bytes();
            format!(
                "{}net {}.{}.{}.{}/{len}",
                rng.pick(&dir()),
                b[0],
                b[1],
                b[2],
                b[3]
            )
        }
        4 => format!(
            "net {}",
            rng.pick(&["10", "172.16", "192.168", "198.18", "127"])
        ),
        5 | 6 => format!(
            "{}{}port {}",
            rng.pick(&["", "tcp ", "udp ", "sctp "]),
            rng.pick(&dir()),
            port(rng, seeds)
        ),
        7 => {
            let a = port(rng, seeds);
            let b = a.saturating_add(rng.below(2000) as u16);
            format!(
                "{}{}portrange {a}-{b}",
                rng.pick(&["", "tcp ", "udp "]),
                rng.pick(&dir())
            )
        }
        8 => {
            let m = *rng.pick(&seeds.macs);
            format!(
                "ether {}host {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                rng.pick(&dir()),
                m[0],
                m[1],
                m[2],
                m[3],
                m[4],
                m[5]
            )
        }
        9 => rng
            .pick(&[
                "ether broadcast",
                "ether multicast",
                "ip multicast",
                "ip6 multicast",
                "broadcast",
                "multicast",
            ])
            .to_string(),
        10 => format!("{} {}", rng.pick(&["less", "greater"]), rng.below(1600)),
        11 => format!(
            "len {} {}",
            rng.pick(&[">", "<", ">=", "<=", "=", "!="]),
            rng.below(1600)
        ),
        12 | 13 => {
            let (p, max) = *rng.pick(&[
                ("ip", 60),
                ("tcp", 40),
                ("udp", 12),
                ("icmp", 16),
                ("ether", 64),
                ("ip6", 48),
                ("arp", 28),
            ]);
            let size = *rng.pick(&[1, 1, 2, 4]);
            let off = rng.below(max);
            let acc = if size == 1 && rng.chance(1, 2) {
                format!("{p}[{off}]")
            } else {
                format!("{p}[{off}:{size}]")
            };
            let mask = if rng.chance(1, 2) {
                format!(" & 0x{:x}", rng.next_u32() & 0xff)
            } else {
                String::new()
            };
            format!(
                "{acc}{mask} {} {}",
                rng.pick(&["=", "!=", ">", "<", ">=", "<="]),
                rng.below(256)
            )
        }
        14 => rng
            .pick(&[
                "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
                "tcp[tcpflags] & tcp-ack = 0",
                "icmp[icmptype] = icmp-echo",
                "icmp[icmptype] != icmp-echo and icmp[icmptype] != icmp-echoreply",
                "ip[2:2] - ((ip[0]&0xf)<<2) > 40",
                "ip[6:2] & 0x1fff != 0",
                "udp[8:2] + udp[10:2] > 100",
                "tcp[12] >> 4 > 5",
                "ip[0] & 0xf != 5",
                "ether[0] & 1 != 0",
                "ip6[6] = 58",
            ])
            .to_string(),
        15 => format!(
            "{}proto {}",
            rng.pick(&["ip ", "ip6 ", ""]),
            rng.pick(&[1, 6, 17, 58, 132, 50, 51, 2, 103, 41, 4])
        ),
        16 => format!(
            "ip proto \\{}",
            rng.pick(&["tcp", "udp", "icmp", "ipv6-icmp", "sctp"])
        ),
        17 => {
            if rng.chance(1, 2) {
                "vlan".to_string()
            } else {
                format!("vlan {}", rng.below(4096))
            }
        }
        18 => {
            if rng.chance(1, 2) {
                "mpls".to_string()
            } else {
                format!("mpls {}", rng.below(1 << 20))
            }
        }
        19 => {
            if rng.chance(1, 2) {
                "pppoes".to_string()
            } else {
                format!("pppoes {}", rng.below(65536))
            }
        }
        20 => format!(
            "ether proto \\{}",
            rng.pick(&[
                "ip", "ip6", "arp", "rarp", "ipx", "atalk", "aarp", "decnet", "stp", "iso"
            ])
        ),
        21 => format!(
            "ether proto {}",
            rng.pick(&[0x800, 0x86dd, 0x806, 0x8100, 0x88cc, 100, 0x42])
        ),
        22 => format!(
            "{}host fe80::{:x}",
            rng.pick(&["ip6 ", "", "src ", "dst "]),
            rng.below(16)
        ),
        23 => format!(
            "ip6 net {}",
            rng.pick(&["fe80::/10", "ff00::/8", "2001:db8::/32", "::/0"])
        ),
        24 => format!(
            "{} {}",
            rng.pick(&["tcp port", "udp port", "port"]),
            rng.pick(&["http", "domain", "ssh", "bootps", "ntp", "https"])
        ),
        25 => rng
            .pick(&["llc u", "llc i", "llc s", "llc ui", "llc xid", "llc test"])
            .to_string(),
        26 => rng
            .pick(&[
                "iso proto \\isis",
                "isis proto 0x12",
                "clnp",
                "esis",
                "l2",
                "iih",
                "lsp",
                "snp",
                "csnp",
                "psnp",
            ])
            .to_string(),
        27 => format!(
            "decnet {}host {}.{}",
            rng.pick(&["", "src ", "dst "]),
            rng.below(63),
            rng.below(1023)
        ),
        28 => format!(
            "byte {} {} {}",
            rng.below(40),
            rng.pick(&["=", "<", ">"]),
            rng.below(256)
        ),
        29 => format!(
            "ip[{}] = {}",
            rng.pick(&["ip[0] & 0xf", "len - 40", "tcp[0] & 0x7"]),
            rng.below(256)
        ),
        30 => format!(
            "{} {} {}",
            rng.pick(&["len", "ip[0]", "tcp[2:2]"]),
            rng.pick(&["=", ">"]),
            rng.pick(&[
                "len - 14",
                "ip[2:2] + 14",
                "(udp[4:2] * 2) / 3",
                "ip[0] % 7",
                "ip[1] ^ 0xff",
                "-tcp[0]"
            ])
        ),
        _ => format!("{}ip", rng.pick(&["not ", ""])),
    }
}

/// Calls `f` with every corpus expression in its case's context (link type and snapshot
/// length), then with `count` random expressions (depth 2, seeded with `seed`, fields and
/// values drawn from the corpus's Ethernet captures) on Ethernet: the expressions a check
/// over "the corpus and random filters" walks.
#[cfg(feature = "libpcap")]
pub fn corpus_and_random(count: usize, seed: u64, mut f: impl FnMut(&str, &netsift_lang::Context)) {
    use crate::corpus;
    for c in corpus::cases() {
        let mut ctx = netsift_lang::Context::new(corpus::link_type(&c.dlt));
        ctx.snaplen = c.snaplen;
        f(&c.expr, &ctx);
    }
    let by_dlt = corpus::packets_by_dlt();
    let frames = by_dlt.get(&1).cloned().unwrap_or_default();
    let seeds = Seeds::from_frames(frames.iter().map(|(d, _)| &d[..]));
    let mut rng = Rng::new(seed);
    let ctx = netsift_lang::Context::new(netsift_wire::LinkType::ETHERNET);
    for _ in 0..count {
        f(&expression(&mut rng, &seeds, 2), &ctx);
    }
}
