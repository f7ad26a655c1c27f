//! Generic Routing Encapsulation (RFC 2784, RFC 2890, RFC 1701 routing,
//! RFC 2637 enhanced GRE version 1).
//!
//! The header length depends on the flags: 4 fixed bytes, plus checksum and
//! offset (4) when C or R is set, key (4) when K is set, sequence number (4)
//! when S is set, acknowledgement (4) when A is set (version 1), and, when R
//! is set, a list of source route entries ending with a null entry.
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use crate::bytes::{be16, be32, clip, need, set_be16, set_be32};
use crate::checksum;
use crate::error::Result;
use crate::ethernet::EtherType;

mod flag {
    pub(super) const C: u16 = 0x8000;
    pub(super) const R: u16 = 0x4000;
    pub(super) const K: u16 = 0x2000;
    pub(super) const S: u16 = 0x1000;
    pub(super) const SSR: u16 = 0x0800;
    pub(super) const A: u16 = 0x0080;
}

/// A view of a GRE header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> GrePacket<T> {
    /// Length of the fixed part (flags/version and protocol type).
    pub const MIN_HEADER_LEN: usize = 4;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        GrePacket { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the fixed part, every optional field announced by the flags
    /// and (with R) the whole source route entry list are present.
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        need(d, "gre", "header", 0, Self::MIN_HEADER_LEN)?;
        let fixed = self.fixed_len();
        need(d, "gre", "header", 0, fixed)?;
        if self.routing_present() {
            let mut at = fixed;
            loop {
                need(d, "gre", "source route entry", at, 4)?;
                let af = be16(d, at);
                let len = usize::from(d[at + 3]);
                need(d, "gre", "source route entry", at, 4 + len)?;
                at += 4 + len;
                if af == 0 && len == 0 {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw flags and version word.
    pub fn flags_version(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }

    fn has(&self, f: u16) -> bool {
        self.flags_version() & f != 0
    }

    /// C: checksum present.
    pub fn checksum_present(&self) -> bool {
        self.has(flag::C)
    }

    /// R: routing present (RFC 1701, deprecated).
    pub fn routing_present(&self) -> bool {
        self.has(flag::R)
    }

    /// K: key present.
    pub fn key_present(&self) -> bool {
        self.has(flag::K)
    }

    /// S: sequence number present.
    pub fn seq_present(&self) -> bool {
        self.has(flag::S)
    }

    /// s: strict source route.
    pub fn strict_source_route(&self) -> bool {
        self.has(flag::SSR)
    }

    /// Recursion control (3 bits).
    pub fn recursion_control(&self) -> u8 {
        ((self.flags_version() >> 8) & 0x07) as u8
    }

    /// A: acknowledgement number present (version 1 only).
    pub fn ack_present(&self) -> bool {
        self.version() == 1 && self.has(flag::A)
    }

    /// Version (0 for GRE, 1 for PPTP's enhanced GRE).
    pub fn version(&self) -> u8 {
        (self.flags_version() & 0x07) as u8
    }

    /// Protocol type of the payload.
    pub fn protocol_type(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), 2))
    }

    fn csum_at(&self) -> Option<usize> {
        (self.checksum_present() || self.routing_present()).then_some(4)
    }

    fn key_at(&self) -> Option<usize> {
        let base = 4 + if self.csum_at().is_some() { 4 } else { 0 };
        self.key_present().then_some(base)
    }

    fn seq_at(&self) -> Option<usize> {
        let base = 4
            + if self.csum_at().is_some() { 4 } else { 0 }
            + if self.key_present() { 4 } else { 0 };
        self.seq_present().then_some(base)
    }

    fn ack_at(&self) -> Option<usize> {
        let base = 4
            + if self.csum_at().is_some() { 4 } else { 0 }
            + if self.key_present() { 4 } else { 0 }
            + if self.seq_present() { 4 } else { 0 };
        self.ack_present().then_some(base)
    }

    /// Length of the header without source route entries.
    fn fixed_len(&self) -> usize {
        4 + [
            self.csum_at().is_some(),
            self.key_present(),
            self.seq_present(),
            self.ack_present(),
        ]
        .iter()
        .filter(|&&b| b)
        .count()
            * 4
    }

    fn routing_len(&self) -> usize {
        if !self.routing_present() {
            return 0;
        }
        let d = self.buffer.as_ref();
        let start = self.fixed_len();
        let mut at = start;
        while let (Some(af), Some(&len)) = (d.get(at..at + 2), d.get(at + 3)) {
            let len = usize::from(len);
            at += 4 + len;
            if af == [0, 0] && len == 0 {
                break;
            }
        }
        at.min(d.len()) - start.min(d.len())
    }

    /// Total header length including optional fields and source route
    /// entries.
    pub fn header_len(&self) -> usize {
        self.fixed_len() + self.routing_len()
    }

    /// The checksum, when C is set.
    pub fn checksum(&self) -> Option<u16> {
        self.checksum_present()
            .then(|| be16(self.buffer.as_ref(), 4))
    }

    /// The routing offset field, when R is set.
    pub fn routing_offset(&self) -> Option<u16> {
        self.routing_present()
            .then(|| be16(self.buffer.as_ref(), 6))
    }

    /// The key, when K is set (for version 1: payload length in the high 16
    /// bits and call id in the low 16 bits).
    pub fn key(&self) -> Option<u32> {
        self.key_at().map(|at| be32(self.buffer.as_ref(), at))
    }

    /// The sequence number, when S is set.
    pub fn sequence(&self) -> Option<u32> {
        self.seq_at().map(|at| be32(self.buffer.as_ref(), at))
    }

    /// The acknowledgement number, when A is set (version 1).
    pub fn ack(&self) -> Option<u32> {
        self.ack_at().map(|at| be32(self.buffer.as_ref(), at))
    }

    /// Raw source route entries (with the terminating null entry), when R
    /// is set.
    pub fn routing(&self) -> &[u8] {
        let start = self.fixed_len();
        clip(self.buffer.as_ref(), start, start + self.routing_len())
    }

    /// Everything after the header.
    pub fn payload(&self) -> &[u8] {
        clip(self.buffer.as_ref(), self.header_len(), usize::MAX)
    }

    /// `true` when C is clear, or the checksum over the whole buffer is
    /// correct.
    pub fn verify_checksum(&self) -> bool {
        !self.checksum_present() || checksum::ones_complement_sum(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GrePacket<T> {
    /// Sets the raw flags and version word (changes the layout: run
    /// `check_len` again).
    pub fn set_flags_version(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), 0, value);
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, ty: EtherType) {
        set_be16(self.buffer.as_mut(), 2, ty.0);
    }

    /// Sets the checksum field; does nothing when C is clear.
    pub fn set_checksum(&mut self, value: u16) {
        if self.checksum_present() {
            set_be16(self.buffer.as_mut(), 4, value);
        }
    }

    /// Sets the key; does nothing when K is clear.
    pub fn set_key(&mut self, key: u32) {
        if let Some(at) = self.key_at() {
            set_be32(self.buffer.as_mut(), at, key);
        }
    }

    /// Sets the sequence number; does nothing when S is clear.
    pub fn set_sequence(&mut self, seq: u32) {
        if let Some(at) = self.seq_at() {
            set_be32(self.buffer.as_mut(), at, seq);
        }
    }

    /// Computes and stores the checksum over the whole buffer; does nothing
    /// when C is clear.
    pub fn fill_checksum(&mut self) {
        if self.checksum_present() {
            self.set_checksum(0);
            let sum = checksum::internet_checksum(self.buffer.as_ref());
            self.set_checksum(sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_keyed() {
        // Real header from a capture: GREv0, key=0x28, proto 0x8909.
        let h = [0x20, 0x00, 0x89, 0x09, 0x00, 0x00, 0x00, 0x28, 0xaa];
        let p = GrePacket::new_checked(&h[..]).unwrap();
        assert!(p.key_present());
        assert!(!p.checksum_present() && !p.seq_present() && !p.routing_present());
        assert!(!p.strict_source_route() && !p.ack_present());
        assert_eq!(p.recursion_control(), 0);
        assert_eq!(p.version(), 0);
        assert_eq!(p.protocol_type(), EtherType(0x8909));
        assert_eq!(p.key(), Some(0x28));
        assert_eq!(p.sequence(), None);
        assert_eq!(p.checksum(), None);
        assert_eq!(p.routing_offset(), None);
        assert_eq!(p.ack(), None);
        assert_eq!(p.header_len(), 8);
        assert!(p.routing().is_empty());
        assert_eq!(p.payload(), &[0xaa]);
        assert!(p.verify_checksum());
        assert_eq!(
            GrePacket::new_checked(&h[..7]).unwrap_err().to_string(),
            "gre header truncated at offset 0: needs 8 bytes, 7 available"
        );
    }

    #[test]
    fn all_fields_and_checksum() {
        // C, K, S: 16-byte header, IPv4 payload.
        let mut buf = [0u8; 20];
        buf[..4].copy_from_slice(&[0xb0, 0x00, 0x08, 0x00]);
        let mut p = GrePacket::new_checked(&mut buf[..]).unwrap();
        p.set_key(0x0102_0304);
        p.set_sequence(99);
        p.fill_checksum();
        assert_eq!(p.header_len(), 16);
        assert_eq!(p.key(), Some(0x0102_0304));
        assert_eq!(p.sequence(), Some(99));
        assert!(p.checksum().is_some());
        assert_eq!(p.routing_offset(), None);
        assert!(p.verify_checksum());
        p.set_protocol_type(EtherType::IPV6);
        assert!(!p.verify_checksum());
        assert_eq!(p.payload().len(), 4);
        // Without C, K, S, setters for absent fields are no-ops.
        let before = buf;
        let mut p = GrePacket::new_unchecked(&mut buf[..]);
        p.set_flags_version(0);
        p.set_checksum(1);
        p.set_key(1);
        p.set_sequence(1);
        p.fill_checksum();
        assert_eq!(p.header_len(), 4);
        assert_eq!(buf[2..], before[2..]);
    }

    #[test]
    fn pptp_version_1() {
        // K, S, A set, version 1, PPP, payload length 4, call id 7, seq 1,
        // ack 2.
        let h = [
            0x30, 0x81, 0x88, 0x0b, 0x00, 0x04, 0x00, 0x07, 0, 0, 0, 1, 0, 0, 0, 2, 0xff, 0x03,
        ];
        let p = GrePacket::new_checked(&h[..]).unwrap();
        assert_eq!(p.version(), 1);
        assert!(p.ack_present());
        assert_eq!(p.key(), Some(0x0004_0007));
        assert_eq!(p.sequence(), Some(1));
        assert_eq!(p.ack(), Some(2));
        assert_eq!(p.header_len(), 16);
        assert_eq!(p.protocol_type(), EtherType::PPP);
        assert_eq!(p.payload(), &[0xff, 0x03]);
    }

    #[test]
    fn routing_entries() {
        // R set: checksum+offset, one SRE (AF 0x0800, len 4), null SRE.
        let h = [
            0x40, 0x00, 0x08, 0x00, 0, 0, 0, 0, 0x08, 0x00, 0, 4, 10, 0, 0, 1, 0, 0, 0, 0, 0x45,
        ];
        let p = GrePacket::new_checked(&h[..]).unwrap();
        assert!(p.routing_present());
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.routing().len(), 12);
        assert_eq!(p.payload(), &[0x45]);
        // Missing terminator.
        let err = GrePacket::new_checked(&h[..18]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "gre source route entry truncated at offset 16: needs 4 bytes, 2 available"
        );
        // SRE longer than the buffer.
        let mut bad = h;
        bad[11] = 200;
        assert!(GrePacket::new_checked(&bad[..]).is_err());
        // Even unchecked, header_len/payload/routing never panic.
        let p = GrePacket::new_unchecked(&bad[..]);
        assert_eq!(p.header_len(), bad.len());
        assert!(p.payload().is_empty());
        assert_eq!(p.routing().len(), 13);
    }
}
