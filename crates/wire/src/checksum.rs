//! Internet checksum (RFC 1071) helpers and the CRC-32C used by SCTP.
//!
//! The building block is the ones-complement sum of 16-bit big-endian words,
//! folded to 16 bits ([`ones_complement_sum`]). Partial sums are merged with
//! [`combine`]; the transport pseudo-headers are [`pseudo_header_ipv4`] and
//! [`pseudo_header_ipv6`]. A checksum field is filled with the complement of
//! the sum over the data (with the field zeroed); data including a correct
//! checksum field sums to `0xffff`.

use crate::ip::IpProtocol;
use crate::ipv4::Ipv4Address;
use crate::ipv6::Ipv6Address;

/// Adds `data` as big-endian 16-bit words into a wide accumulator. An odd
/// trailing byte is padded with a zero byte on the right.
fn accumulate(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for pair in &mut chunks {
        acc += u64::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(u16::from_be_bytes([*last, 0]));
    }
    acc
}

/// Folds a wide accumulator to 16 bits with end-around carry.
fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The ones-complement sum of `data` (not complemented), folded to 16 bits.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    fold(accumulate(0, data))
}

/// Merges several partial ones-complement sums into one.
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// The final internet checksum of `data`: the complement of its
/// ones-complement sum. Suitable for IPv4 header and ICMPv4 checksums.
pub fn internet_checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// Ones-complement sum of the IPv4 pseudo-header (RFC 793/768) for a
/// transport segment of `length` bytes.
pub fn pseudo_header_ipv4(
    src: Ipv4Address,
    dst: Ipv4Address,
    protocol: IpProtocol,
    length: u32,
) -> u16 {
    let mut acc = accumulate(0, &src.0);
    acc = accumulate(acc, &dst.0);
    acc += u64::from(protocol.0);
    acc += u64::from(length >> 16) + u64::from(length & 0xffff);
    fold(acc)
}

/// Ones-complement sum of the IPv6 pseudo-header (RFC 8200 section 8.1) for
/// an upper-layer packet of `length` bytes.
pub fn pseudo_header_ipv6(
    src: &Ipv6Address,
    dst: &Ipv6Address,
    next_header: IpProtocol,
    length: u32,
) -> u16 {
    let mut acc = accumulate(0, &src.0);
    acc = accumulate(acc, &dst.0);
    acc += u64::from(length >> 16) + u64::from(length & 0xffff);
    acc += u64::from(next_header.0);
    fold(acc)
}

/// CRC-32C (Castagnoli) lookup table, reflected polynomial 0x82F63B78.
const CRC32C_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC-32C (Castagnoli, RFC 9260 appendix A) of `data`, as used by the SCTP
/// common header checksum.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc = CRC32C_TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example: sum of these words is 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_complement_sum(&data), 0xddf2);
        assert_eq!(internet_checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_and_combine() {
        assert_eq!(ones_complement_sum(&[0x12]), 0x1200);
        assert_eq!(ones_complement_sum(&[]), 0);
        assert_eq!(combine(&[0xffff, 0x0001]), 0x0001);
        assert_eq!(combine(&[0x8000, 0x8000]), 0x0001);
        // Must not overflow; all-ones words sum to 0xffff.
        let big = vec![0xffu8; 100_000];
        assert_eq!(ones_complement_sum(&big), 0xffff);
        let odd = vec![0xffu8; 100_001];
        assert_eq!(ones_complement_sum(&odd), 0xff00);
    }

    #[test]
    fn ipv4_header_checksum() {
        // Header from a real capture, checksum 0xb861.
        let hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ones_complement_sum(&hdr), 0xffff);
        let mut zeroed = hdr;
        zeroed[10] = 0;
        zeroed[11] = 0;
        assert_eq!(internet_checksum(&zeroed), 0xb861);
    }

    #[test]
    fn pseudo_headers() {
        let a = Ipv4Address([10, 0, 0, 1]);
        let b = Ipv4Address([10, 0, 0, 2]);
        // 0x0a00+0x0001+0x0a00+0x0002+0x0006+0x0014 = 0x141d
        assert_eq!(pseudo_header_ipv4(a, b, IpProtocol::TCP, 20), 0x141d);
        let x = Ipv6Address::LOOPBACK;
        // 1 + 1 + 8 + 17
        assert_eq!(pseudo_header_ipv6(&x, &x, IpProtocol::UDP, 8), 27);
        assert_eq!(
            pseudo_header_ipv6(&x, &x, IpProtocol::UDP, 0x1_0000),
            2 + 1 + 17
        );
    }

    #[test]
    fn crc32c_vectors() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[]), 0);
    }
}
