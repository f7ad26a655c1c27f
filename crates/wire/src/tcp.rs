//! TCP segments (RFC 9293), flags and options.
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use core::fmt;
use core::ops;

use crate::bytes::{be16, be32, clip, clip_mut, need, set_be16, set_be32};
use crate::checksum;
use crate::error::{Error, Result};
use crate::ip::IpProtocol;
use crate::ipv4::Ipv4Address;
use crate::ipv6::Ipv6Address;

/// The eight classic TCP flag bits (byte 13 of the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// FIN.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// SYN.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// RST.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// PSH.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// ACK.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// URG.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN-Echo.
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion Window Reduced.
    pub const CWR: TcpFlags = TcpFlags(0x80);

    /// No flags.
    pub const fn empty() -> TcpFlags {
        TcpFlags(0)
    }

    /// The raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// `true` when no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// `true` when every flag in `other` is set.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// `true` when any flag in `other` is set.
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// Sets the flags in `other`.
    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    /// Clears the flags in `other`.
    pub fn remove(&mut self, other: TcpFlags) {
        self.0 &= !other.0;
    }
}

impl ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

impl ops::BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & rhs.0)
    }
}

impl ops::Not for TcpFlags {
    type Output = TcpFlags;
    fn not(self) -> TcpFlags {
        TcpFlags(!self.0)
    }
}

impl fmt::Display for TcpFlags {
    /// tcpdump style: `[S.]` for SYN+ACK, `[P.]`, `[F.]`, `[R]`, `[none]`.
    /// Letters in tcpdump's order: F S R P . U E W.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("[none]");
        }
        f.write_str("[")?;
        for (bit, c) in [
            (0x01, 'F'),
            (0x02, 'S'),
            (0x04, 'R'),
            (0x08, 'P'),
            (0x10, '.'),
            (0x20, 'U'),
            (0x40, 'E'),
            (0x80, 'W'),
        ] {
            if self.0 & bit != 0 {
                write!(f, "{c}")?;
            }
        }
        f.write_str("]")
    }
}

/// A decoded TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// End of option list (kind 0); iteration stops after it.
    EndOfList,
    /// No-operation padding (kind 1).
    NoOperation,
    /// Maximum segment size (kind 2).
    MaxSegmentSize(u16),
    /// Window scale shift count (kind 3).
    WindowScale(u8),
    /// SACK permitted (kind 4).
    SackPermitted,
    /// Selective acknowledgement blocks (kind 5).
    Sack(SackBlocks<'a>),
    /// Timestamps (kind 8).
    Timestamps {
        /// Timestamp value.
        tsval: u32,
        /// Timestamp echo reply.
        tsecr: u32,
    },
    /// Any other kind, with its data bytes (after kind and length).
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

impl fmt::Display for TcpOption<'_> {
    /// tcpdump style: `mss 1460`, `nop`, `wscale 7`, `sackOK`,
    /// `sack 1 {100:200}`, `TS val 1 ecr 2`, `eol`, `unknown-30 0x1234`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TcpOption::EndOfList => f.write_str("eol"),
            TcpOption::NoOperation => f.write_str("nop"),
            TcpOption::MaxSegmentSize(m) => write!(f, "mss {m}"),
            TcpOption::WindowScale(w) => write!(f, "wscale {w}"),
            TcpOption::SackPermitted => f.write_str("sackOK"),
            TcpOption::Sack(blocks) => {
                write!(f, "sack {}", blocks.len())?;
                for (l, r) in blocks {
                    write!(f, " {{{l}:{r}}}")?;
                }
                Ok(())
            }
            TcpOption::Timestamps { tsval, tsecr } => write!(f, "TS val {tsval} ecr {tsecr}"),
            TcpOption::Unknown { kind, data } => {
                let name = match kind {
                    19 => "md5",
                    28 => "utoval",
                    29 => "tcp-ao",
                    30 => "mptcp",
                    34 => "tfo",
                    _ => "",
                };
                if name.is_empty() {
                    write!(f, "unknown-{kind}")?;
                } else {
                    f.write_str(name)?;
                }
                if !data.is_empty() {
                    f.write_str(" 0x")?;
                    for b in data {
                        write!(f, "{b:02x}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// The `(left edge, right edge)` blocks of a SACK option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SackBlocks<'a> {
    data: &'a [u8],
}

impl SackBlocks<'_> {
    /// Number of remaining blocks.
    pub const fn len(&self) -> usize {
        self.data.len() / 8
    }

    /// `true` when there are no blocks left.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Iterator for SackBlocks<'_> {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        if self.data.len() < 8 {
            return None;
        }
        let item = (be32(self.data, 0), be32(self.data, 4));
        self.data = &self.data[8..];
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len(), Some(self.len()))
    }
}

impl ExactSizeIterator for SackBlocks<'_> {}

/// Iterator over TCP options.
///
/// An option whose length byte is missing, below 2, runs past the end of
/// the options area, or does not match a known kind's fixed size is reported
/// as an `Err` item and ends the iteration. An End-of-List option also ends
/// it.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    data: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> TcpOptions<'a> {
    /// Iterates over raw option bytes (as returned by
    /// [`TcpPacket::options`]). Error offsets are relative to the TCP header
    /// (options start at 20).
    pub fn new(data: &'a [u8]) -> Self {
        TcpOptions {
            data,
            pos: 0,
            done: false,
        }
    }

    fn fail(&mut self, e: Error) -> Option<Result<TcpOption<'a>>> {
        self.done = true;
        Some(Err(e))
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.data.len() {
            return None;
        }
        let at = 20 + self.pos;
        let rest = &self.data[self.pos..];
        let kind = rest[0];
        match kind {
            0 => {
                self.done = true;
                return Some(Ok(TcpOption::EndOfList));
            }
            1 => {
                self.pos += 1;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let Some(&len) = rest.get(1) else {
            return self.fail(Error::truncated("tcp", "option", at, 2, 1));
        };
        let len = usize::from(len);
        if len < 2 {
            return self.fail(Error::malformed("tcp", "option length", at + 1, 2, len));
        }
        if len > rest.len() {
            return self.fail(Error::truncated("tcp", "option", at, len, rest.len()));
        }
        let data = &rest[2..len];
        let fixed = match kind {
            2 => Some(4),
            3 => Some(3),
            4 => Some(2),
            8 => Some(10),
            _ => None,
        };
        if let Some(want) = fixed {
            if len != want {
                return self.fail(Error::malformed("tcp", "option length", at + 1, want, len));
            }
        }
        if kind == 5 && (data.is_empty() || data.len() % 8 != 0) {
            return self.fail(Error::malformed("tcp", "option length", at + 1, 10, len));
        }
        self.pos += len;
        Some(Ok(match kind {
            2 => TcpOption::MaxSegmentSize(be16(data, 0)),
            3 => TcpOption::WindowScale(data[0]),
            4 => TcpOption::SackPermitted,
            5 => TcpOption::Sack(SackBlocks { data }),
            8 => TcpOption::Timestamps {
                tsval: be32(data, 0),
                tsecr: be32(data, 4),
            },
            _ => TcpOption::Unknown { kind, data },
        }))
    }
}

impl core::iter::FusedIterator for TcpOptions<'_> {}

mod field {
    pub(super) const SRC_PORT: usize = 0;
    pub(super) const DST_PORT: usize = 2;
    pub(super) const SEQ_NUM: usize = 4;
    pub(super) const ACK_NUM: usize = 8;
    pub(super) const DATA_OFF: usize = 12;
    pub(super) const FLAGS: usize = 13;
    pub(super) const WIN_SIZE: usize = 14;
    pub(super) const CHECKSUM: usize = 16;
    pub(super) const URGENT: usize = 18;
    pub(super) const OPTIONS: usize = 20;
}

/// A view of a TCP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Length of a header without options.
    pub const MIN_HEADER_LEN: usize = field::OPTIONS;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the fixed header is present, the data offset is at least 5 and
    /// the header with options fits in the buffer.
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        need(d, "tcp", "header", 0, Self::MIN_HEADER_LEN)?;
        let hl = self.header_len();
        if hl < Self::MIN_HEADER_LEN {
            return Err(Error::malformed(
                "tcp",
                "data offset",
                field::DATA_OFF,
                Self::MIN_HEADER_LEN,
                hl,
            ));
        }
        need(d, "tcp", "header", 0, hl)
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQ_NUM)
    }

    /// Acknowledgement number.
    pub fn ack_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK_NUM)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFF] >> 4) * 4
    }

    /// The eight flag bits.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[field::FLAGS])
    }

    /// The former NS / now AE (accurate ECN) bit.
    pub fn ae(&self) -> bool {
        self.buffer.as_ref()[field::DATA_OFF] & 0x01 != 0
    }

    /// Shorthand for `flags().contains(TcpFlags::SYN)`.
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    /// Shorthand for `flags().contains(TcpFlags::ACK)`.
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    /// Shorthand for `flags().contains(TcpFlags::FIN)`.
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    /// Shorthand for `flags().contains(TcpFlags::RST)`.
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    /// Window size (unscaled).
    pub fn window_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WIN_SIZE)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent_at(&self) -> u16 {
        be16(self.buffer.as_ref(), field::URGENT)
    }

    /// Raw option bytes.
    pub fn options(&self) -> &[u8] {
        clip(self.buffer.as_ref(), field::OPTIONS, self.header_len())
    }

    /// Iterates over the options.
    pub fn options_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    /// Data after the header (up to the end of the buffer; the caller clips
    /// the buffer to the IP payload).
    pub fn payload(&self) -> &[u8] {
        clip(self.buffer.as_ref(), self.header_len(), usize::MAX)
    }

    /// Verifies the checksum over the whole buffer with an IPv4
    /// pseudo-header.
    pub fn verify_checksum_ipv4(&self, src: Ipv4Address, dst: Ipv4Address) -> bool {
        let d = self.buffer.as_ref();
        let ph = checksum::pseudo_header_ipv4(src, dst, IpProtocol::TCP, d.len() as u32);
        checksum::combine(&[ph, checksum::ones_complement_sum(d)]) == 0xffff
    }

    /// Verifies the checksum over the whole buffer with an IPv6
    /// pseudo-header.
    pub fn verify_checksum_ipv6(&self, src: &Ipv6Address, dst: &Ipv6Address) -> bool {
        let d = self.buffer.as_ref();
        let ph = checksum::pseudo_header_ipv6(src, dst, IpProtocol::TCP, d.len() as u32);
        checksum::combine(&[ph, checksum::ones_complement_sum(d)]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, port);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, port);
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, seq: u32) {
        set_be32(self.buffer.as_mut(), field::SEQ_NUM, seq);
    }

    /// Sets the acknowledgement number.
    pub fn set_ack_number(&mut self, ack: u32) {
        set_be32(self.buffer.as_mut(), field::ACK_NUM, ack);
    }

    /// Sets the header length in bytes (stored as `len / 4`).
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[field::DATA_OFF];
        *b = (*b & 0x0f) | (((len / 4) as u8) << 4);
    }

    /// Sets the eight flag bits.
    pub fn set_flags(&mut self, flags: TcpFlags) {
        self.buffer.as_mut()[field::FLAGS] = flags.0;
    }

    /// Sets the window size.
    pub fn set_window_len(&mut self, win: u16) {
        set_be16(self.buffer.as_mut(), field::WIN_SIZE, win);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, urg: u16) {
        set_be16(self.buffer.as_mut(), field::URGENT, urg);
    }

    /// The option bytes, mutably.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        clip_mut(self.buffer.as_mut(), field::OPTIONS, hl)
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        clip_mut(self.buffer.as_mut(), hl, usize::MAX)
    }

    /// Computes and stores the checksum over the whole buffer with an IPv4
    /// pseudo-header.
    pub fn fill_checksum_ipv4(&mut self, src: Ipv4Address, dst: Ipv4Address) {
        self.set_checksum(0);
        let d = self.buffer.as_ref();
        let ph = checksum::pseudo_header_ipv4(src, dst, IpProtocol::TCP, d.len() as u32);
        let sum = !checksum::combine(&[ph, checksum::ones_complement_sum(d)]);
        self.set_checksum(sum);
    }

    /// Computes and stores the checksum over the whole buffer with an IPv6
    /// pseudo-header.
    pub fn fill_checksum_ipv6(&mut self, src: &Ipv6Address, dst: &Ipv6Address) {
        self.set_checksum(0);
        let d = self.buffer.as_ref();
        let ph = checksum::pseudo_header_ipv6(src, dst, IpProtocol::TCP, d.len() as u32);
        let sum = !checksum::combine(&[ph, checksum::ones_complement_sum(d)]);
        self.set_checksum(sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    /// A SYN-ACK hand-assembled from a real capture's values: 30.0.0.1.22 > 30.0.0.2.51225,
    /// seq 2910871522, ack 397610160, win 28960, options
    /// [mss 1460,sackOK,TS val 84248969 ecr 2876069566,nop,wscale 7].
    const SYN_ACK: [u8; 40] = [
        0x00, 0x16, 0xc8, 0x19, 0xad, 0x80, 0x5f, 0xe2, 0x17, 0xb3, 0x0c, 0xb0, 0xa0, 0x12, 0x71,
        0x20, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x05, 0x05,
        0x89, 0x89, 0xab, 0x6d, 0x56, 0xbe, 0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn accessors() {
        let p = TcpPacket::new_checked(&SYN_ACK[..]).unwrap();
        assert_eq!(p.src_port(), 22);
        assert_eq!(p.dst_port(), 51225);
        assert_eq!(p.seq_number(), 2_910_871_522);
        assert_eq!(p.ack_number(), 397_610_160);
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.flags(), TcpFlags::SYN | TcpFlags::ACK);
        assert!(p.syn() && p.ack() && !p.fin() && !p.rst());
        assert!(!p.ae());
        assert_eq!(p.flags().to_string(), "[S.]");
        assert_eq!(p.window_len(), 28960);
        assert_eq!(p.checksum(), 0);
        assert_eq!(p.urgent_at(), 0);
        assert_eq!(p.options().len(), 20);
        assert!(p.payload().is_empty());
        let opts: Vec<_> = p.options_iter().map(|o| o.unwrap()).collect();
        assert_eq!(
            opts,
            [
                TcpOption::MaxSegmentSize(1460),
                TcpOption::SackPermitted,
                TcpOption::Timestamps {
                    tsval: 84_248_969,
                    tsecr: 2_876_069_566
                },
                TcpOption::NoOperation,
                TcpOption::WindowScale(7),
            ]
        );
        let text: Vec<String> = opts.iter().map(|o| o.to_string()).collect();
        assert_eq!(
            text.join(","),
            "mss 1460,sackOK,TS val 84248969 ecr 2876069566,nop,wscale 7"
        );
    }

    #[test]
    fn checksum_real_packet() {
        // 10.0.0.1:1234 -> 10.0.0.2:80, SYN, seq 1, win 512, computed by
        // hand: pseudo 0x141d + header words.
        let mut seg = [
            0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0x02, 0x00, 0, 0, 0, 0,
        ];
        let (a, b) = (Ipv4Address([10, 0, 0, 1]), Ipv4Address([10, 0, 0, 2]));
        let mut p = TcpPacket::new_unchecked(&mut seg[..]);
        p.fill_checksum_ipv4(a, b);
        assert!(p.verify_checksum_ipv4(a, b));
        assert!(!p.verify_checksum_ipv4(b, Ipv4Address([10, 0, 0, 3])));
        // 0x141d + 0x04d2 + 0x0050 + 0x0001 + 0x5002 + 0x0200 = 0x6b42
        assert_eq!(p.checksum(), !0x6b42);
        let (x, y) = (Ipv6Address::LOOPBACK, Ipv6Address::UNSPECIFIED);
        p.fill_checksum_ipv6(&x, &y);
        assert!(p.verify_checksum_ipv6(&x, &y));
        assert!(!p.verify_checksum_ipv6(&x, &x));
    }

    #[test]
    fn check_len_errors() {
        let err = TcpPacket::new_checked(&SYN_ACK[..12]).unwrap_err();
        assert_eq!(
            err.offset_by(34).to_string(),
            "tcp header truncated at offset 34: needs 20 bytes, 12 available"
        );
        let err = TcpPacket::new_checked(&SYN_ACK[..39]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tcp header truncated at offset 0: needs 40 bytes, 39 available"
        );
        let mut buf = SYN_ACK;
        buf[12] = 0x40;
        let err = TcpPacket::new_checked(&buf[..]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tcp data offset malformed at offset 12: must be at least 20, is 16"
        );
        assert_eq!(err.kind(), ErrorKind::Malformed);
    }

    #[test]
    fn options_malformed() {
        fn run(opts: &[u8]) -> Vec<Result<TcpOption<'_>>> {
            TcpOptions::new(opts).collect()
        }
        // Length 0.
        let items = run(&[1, 2, 0, 1, 1]);
        assert_eq!(items.len(), 2);
        assert_eq!(items[0], Ok(TcpOption::NoOperation));
        assert_eq!(
            items[1].unwrap_err().to_string(),
            "tcp option length malformed at offset 22: must be at least 2, is 0"
        );
        // Runs past the end.
        let items = run(&[8, 10, 0, 0]);
        assert_eq!(
            items[0].unwrap_err().to_string(),
            "tcp option truncated at offset 20: needs 10 bytes, 4 available"
        );
        // Missing length byte.
        let items = run(&[1, 1, 1, 2]);
        assert_eq!(items.len(), 4);
        assert_eq!(items[3].unwrap_err().kind(), ErrorKind::Truncated);
        // Wrong fixed length for MSS.
        let items = run(&[2, 3, 5, 1]);
        assert_eq!(items[0].unwrap_err().kind(), ErrorKind::Malformed);
        // SACK not a multiple of 8.
        let items = run(&[5, 6, 0, 0, 0, 1]);
        assert!(items[0].is_err());
        // EOL ends iteration even with bytes after it.
        let items = run(&[1, 0, 2, 4, 5, 0xb4]);
        assert_eq!(
            items,
            [Ok(TcpOption::NoOperation), Ok(TcpOption::EndOfList)]
        );
        // SACK blocks and unknown kinds.
        let opts = [
            1, 1, 5, 18, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 30, 4, 0x12, 0x34, 99, 2,
        ];
        let items: Vec<_> = run(&opts).into_iter().map(|i| i.unwrap()).collect();
        assert_eq!(items.len(), 5);
        let TcpOption::Sack(blocks) = items[2] else {
            panic!("not sack: {:?}", items[2]);
        };
        assert_eq!(blocks.len(), 2);
        assert!(!blocks.is_empty());
        assert_eq!(blocks.collect::<Vec<_>>(), [(1, 2), (3, 4)]);
        assert_eq!(items[2].to_string(), "sack 2 {1:2} {3:4}");
        assert_eq!(items[3].to_string(), "mptcp 0x1234");
        assert_eq!(items[4].to_string(), "unknown-99");
        assert_eq!(TcpOption::EndOfList.to_string(), "eol");
    }

    #[test]
    fn flags_display_and_ops() {
        assert_eq!(TcpFlags::SYN.to_string(), "[S]");
        assert_eq!((TcpFlags::PSH | TcpFlags::ACK).to_string(), "[P.]");
        assert_eq!((TcpFlags::FIN | TcpFlags::ACK).to_string(), "[F.]");
        assert_eq!((TcpFlags::RST | TcpFlags::ACK).to_string(), "[R.]");
        assert_eq!(TcpFlags::empty().to_string(), "[none]");
        assert_eq!(TcpFlags(0xff).to_string(), "[FSRP.UEW]");
        assert_eq!(
            (TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR).to_string(),
            "[SEW]"
        );
        let mut f = TcpFlags::empty();
        f.insert(TcpFlags::URG);
        f |= TcpFlags::ACK;
        assert!(f.contains(TcpFlags::URG | TcpFlags::ACK));
        assert!(f.intersects(TcpFlags::ACK | TcpFlags::FIN));
        f.remove(TcpFlags::URG);
        assert_eq!(f, TcpFlags::ACK);
        assert_eq!((f & TcpFlags::ACK).bits(), 0x10);
        assert_eq!((!f).bits(), 0xef);
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 28];
        let mut p = TcpPacket::new_unchecked(&mut buf[..]);
        p.set_src_port(443);
        p.set_dst_port(51234);
        p.set_seq_number(1);
        p.set_ack_number(2);
        p.set_header_len(24);
        p.set_flags(TcpFlags::SYN | TcpFlags::ACK);
        p.set_window_len(512);
        p.set_checksum(0xbeef);
        p.set_urgent_at(3);
        p.options_mut().copy_from_slice(&[2, 4, 0x05, 0xb4]);
        p.payload_mut().copy_from_slice(&[1, 2, 3, 4]);
        assert!(p.check_len().is_ok());
        assert_eq!(p.src_port(), 443);
        assert_eq!(p.dst_port(), 51234);
        assert_eq!(p.seq_number(), 1);
        assert_eq!(p.ack_number(), 2);
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.flags(), TcpFlags::SYN | TcpFlags::ACK);
        assert_eq!(p.window_len(), 512);
        assert_eq!(p.checksum(), 0xbeef);
        assert_eq!(p.urgent_at(), 3);
        assert_eq!(
            p.options_iter().next(),
            Some(Ok(TcpOption::MaxSegmentSize(1460)))
        );
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        assert_eq!(p.into_inner().len(), 28);
    }
}
