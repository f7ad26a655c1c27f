//! Receive-side scaling: the Toeplitz hash and the indirection table.
//!
//! The hash is Microsoft's ("Verifying the RSS Hash Calculation" and "RSS Hashing Functions" in
//! the Windows driver documentation, also the 82599 datasheet §7.1.2.8): the input is the source
//! address, the destination address and, for a 4-tuple hash, the source and destination ports,
//! all in network byte order; each set bit `i` of the input XORs in the 32 key bits that start at
//! key bit `i`. The default key is the 40-byte key of that document, which is also the
//! well-known default of many drivers.
//!
//! Which tuple is hashed follows the Linux ixgbe defaults: TCP over IPv4/IPv6 uses the 4-tuple,
//! UDP the 2-tuple unless [`Rss::with_udp_ports`] (`ethtool -N DEV rx-flow-hash udp4 sdfn`), every
//! other protocol and every fragment without ports the 2-tuple. The low 7 bits of the hash
//! index a 128-entry indirection table, filled round-robin over the queues by default.

use crate::rule::{FlowKey, PROTO_TCP, PROTO_UDP};

/// The 40-byte Toeplitz key of Microsoft's RSS verification suite.
pub const MICROSOFT_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The number of entries of the indirection table (the 82599's `RETA`).
pub const INDIRECTION_ENTRIES: usize = 128;

/// The Toeplitz hash of `input` under `key`.
///
/// The key should be at least 4 bytes longer than the input; missing key bytes count as zero
/// (so the function is total).
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let k = |i: usize| key.get(i).copied().unwrap_or(0);
    // The 64 key bits starting at the current input byte; the hash of bit `j` of that byte is
    // the 32 bits starting at bit `j` of the window.
    let mut window = u64::from_be_bytes([k(0), k(1), k(2), k(3), k(4), k(5), k(6), k(7)]);
    let mut result = 0u32;
    for (i, &byte) in input.iter().enumerate() {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                // Truncation intended: the low 32 bits of the shifted window.
                result ^= (window >> (32 - bit)) as u32;
            }
        }
        window = (window << 8) | u64::from(k(i + 8));
    }
    result
}

/// The bytes that are hashed for `key`: addresses, then ports when `with_ports` and the key has
/// them; returns the buffer and the used length (8, 12, 32 or 36).
pub fn hash_input(key: &FlowKey, with_ports: bool) -> ([u8; 36], usize) {
    let mut buf = [0u8; 36];
    let mut len = 0;
    for addr in [key.src, key.dst] {
        match addr {
            std::net::IpAddr::V4(a) => {
                buf[len..len + 4].copy_from_slice(&a.octets());
                len += 4;
            }
            std::net::IpAddr::V6(a) => {
                buf[len..len + 16].copy_from_slice(&a.octets());
                len += 16;
            }
        }
    }
    if with_ports && let Some((sp, dp)) = key.ports {
        buf[len..len + 2].copy_from_slice(&sp.to_be_bytes());
        buf[len + 2..len + 4].copy_from_slice(&dp.to_be_bytes());
        len += 4;
    }
    (buf, len)
}

/// An RSS configuration: key, indirection table and hashed fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rss {
    key: Vec<u8>,
    table: [u16; INDIRECTION_ENTRIES],
    queues: u16,
    udp_ports: bool,
}

impl Rss {
    /// RSS over `queues` queues (at least 1) with the Microsoft key and a round-robin table.
    pub fn new(queues: u16) -> Rss {
        let queues = queues.max(1);
        let mut table = [0u16; INDIRECTION_ENTRIES];
        for (i, e) in table.iter_mut().enumerate() {
            // Truncation impossible: i < 128.
            *e = (i as u16) % queues;
        }
        Rss {
            key: MICROSOFT_KEY.to_vec(),
            table,
            queues,
            udp_ports: false,
        }
    }

    /// The configuration with another key (40 bytes on the 82599; any length is accepted).
    pub fn with_key(mut self, key: &[u8]) -> Rss {
        self.key = key.to_vec();
        self
    }

    /// The configuration hashing UDP ports too (a 4-tuple for UDP).
    pub fn with_udp_ports(mut self, on: bool) -> Rss {
        self.udp_ports = on;
        self
    }

    /// Sets the indirection table: entry `i` is `entries[i % entries.len()]`, each reduced
    /// modulo the number of queues. An empty slice restores the round-robin table.
    pub fn set_indirection(&mut self, entries: &[u16]) {
        for (i, e) in self.table.iter_mut().enumerate() {
            *e = match entries.get(i % entries.len().max(1)) {
                Some(&q) => q % self.queues,
                // Truncation impossible: i < 128.
                None => (i as u16) % self.queues,
            };
        }
    }

    /// The indirection table.
    pub fn indirection(&self) -> &[u16; INDIRECTION_ENTRIES] {
        &self.table
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The number of queues.
    pub fn queues(&self) -> u16 {
        self.queues
    }

    /// The RSS hash of `key`.
    pub fn hash(&self, key: &FlowKey) -> u32 {
        let with_ports = match key.proto {
            PROTO_TCP => true,
            PROTO_UDP => self.udp_ports,
            _ => false,
        };
        let (buf, len) = hash_input(key, with_ports);
        toeplitz(&self.key, &buf[..len])
    }

    /// The queue of a hash value: its low 7 bits index the indirection table.
    pub fn queue_of_hash(&self, hash: u32) -> u16 {
        self.table[(hash as usize) & (INDIRECTION_ENTRIES - 1)]
    }

    /// The queue RSS delivers `key` on.
    pub fn queue(&self, key: &FlowKey) -> u16 {
        self.queue_of_hash(self.hash(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    /// Microsoft's verification suite: (destination, destination port, source, source port,
    /// hash without ports, hash with ports).
    const IPV4: [(&str, u16, &str, u16, u32, u32); 5] = [
        (
            "161.142.100.80",
            1766,
            "66.9.149.187",
            2794,
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            "65.69.140.83",
            4739,
            "199.92.111.2",
            14230,
            0xd718262a,
            0xc626b0ea,
        ),
        (
            "12.22.207.184",
            38024,
            "24.19.198.95",
            12898,
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            "209.142.163.6",
            2217,
            "38.27.205.30",
            48228,
            0x82989176,
            0xafc7327f,
        ),
        (
            "202.188.127.2",
            1303,
            "153.39.163.191",
            44251,
            0x5d1809c5,
            0x10e828a2,
        ),
    ];
    const IPV6: [(&str, u16, &str, u16, u32, u32); 3] = [
        (
            "3ffe:2501:200:3::1",
            1766,
            "3ffe:2501:200:1fff::7",
            2794,
            0x2cc18cd5,
            0x40207d3d,
        ),
        (
            "ff02::1",
            4739,
            "3ffe:501:8::260:97ff:fe40:efab",
            14230,
            0x0f0c461c,
            0xdde51bbf,
        ),
        (
            "fe80::200:f8ff:fe21:67cf",
            38024,
            "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
            44251,
            0x4b61e985,
            0x02d1feef,
        ),
    ];

    #[test]
    fn microsoft_verification_suite() {
        let rss = Rss::new(4);
        for (dst, dp, src, sp, two, four) in IPV4.into_iter().chain(IPV6) {
            let key = FlowKey {
                vlan: None,
                proto: PROTO_TCP,
                src: src.parse::<IpAddr>().unwrap(),
                dst: dst.parse::<IpAddr>().unwrap(),
                ports: Some((sp, dp)),
            };
            let (buf, len) = hash_input(&key, false);
            assert_eq!(toeplitz(&MICROSOFT_KEY, &buf[..len]), two, "{src} -> {dst}");
            let (buf, len) = hash_input(&key, true);
            assert_eq!(
                toeplitz(&MICROSOFT_KEY, &buf[..len]),
                four,
                "{src} -> {dst}"
            );
            assert_eq!(rss.hash(&key), four);
            assert_eq!(
                rss.hash(&FlowKey {
                    proto: PROTO_UDP,
                    ..key
                }),
                two
            );
            assert_eq!(
                Rss::new(4).with_udp_ports(true).hash(&FlowKey {
                    proto: PROTO_UDP,
                    ..key
                }),
                four
            );
            assert_eq!(rss.hash(&FlowKey { ports: None, ..key }), two);
            assert_eq!(rss.queue(&key), (four & 127) as u16 % 4);
        }
    }

    #[test]
    fn indirection_table() {
        let mut rss = Rss::new(3);
        assert_eq!(&rss.indirection()[..7], &[0, 1, 2, 0, 1, 2, 0]);
        rss.set_indirection(&[2, 5]);
        assert_eq!(&rss.indirection()[..4], &[2, 2, 2, 2]);
        rss.set_indirection(&[]);
        assert_eq!(rss.indirection()[127], 127 % 3);
        assert_eq!(Rss::new(0).queues(), 1);
        assert_eq!(rss.queue_of_hash(0xffff_ff80), 0);
    }

    #[test]
    fn short_keys_are_total() {
        assert_eq!(toeplitz(&[], &[0xff; 50]), 0);
        let _ = toeplitz(&MICROSOFT_KEY[..5], &[0xff; 50]);
    }
}
