//! IEEE 802.1Q / 802.1ad VLAN tags.
//!
//! A [`VlanPacket`] views the four bytes that follow a VLAN TPID (0x8100,
//! 0x88a8 or 0x9100): the tag control information and the inner EtherType.
//! Stacked tags (QinQ) are decoded by viewing [`VlanPacket::payload`] again
//! when [`VlanPacket::ethertype`] is itself a VLAN TPID.
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use crate::bytes::{be16, need, set_be16};
use crate::error::Result;
use crate::ethernet::EtherType;

mod field {
    pub(super) const TCI: usize = 0;
    pub(super) const ETHERTYPE: usize = 2;
    pub(super) const PAYLOAD: usize = 4;
}

/// A view of a VLAN tag (TCI + inner EtherType).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlanPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanPacket<T> {
    /// Tag length after the TPID: 4 bytes.
    pub const HEADER_LEN: usize = field::PAYLOAD;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanPacket { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the 4-byte tag is present.
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), "vlan", "tag", 0, Self::HEADER_LEN)
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length (4).
    pub const fn header_len(&self) -> usize {
        Self::HEADER_LEN
    }

    /// The whole 16-bit tag control information.
    pub fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TCI)
    }

    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator (formerly CFI).
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// The inner EtherType (or 802.3 length).
    pub fn ethertype(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), field::ETHERTYPE))
    }

    /// Everything after the tag.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanPacket<T> {
    fn set_tci(&mut self, tci: u16) {
        set_be16(self.buffer.as_mut(), field::TCI, tci);
    }

    /// Sets the priority code point (low 3 bits of `pcp`).
    pub fn set_pcp(&mut self, pcp: u8) {
        let tci = (self.tci() & 0x1fff) | (u16::from(pcp & 0x07) << 13);
        self.set_tci(tci);
    }

    /// Sets the drop eligible indicator.
    pub fn set_dei(&mut self, dei: bool) {
        let tci = (self.tci() & !0x1000) | if dei { 0x1000 } else { 0 };
        self.set_tci(tci);
    }

    /// Sets the VLAN identifier (low 12 bits of `vid`).
    pub fn set_vid(&mut self, vid: u16) {
        let tci = (self.tci() & 0xf000) | (vid & 0x0fff);
        self.set_tci(tci);
    }

    /// Sets the inner EtherType.
    pub fn set_ethertype(&mut self, ty: EtherType) {
        set_be16(self.buffer.as_mut(), field::ETHERTYPE, ty.0);
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From a real 802.1ad capture: after the 0x88a8 TPID, S-tag vlan 200
    /// then C-tag 0x8100 vlan 2001, ARP.
    const QINQ: [u8; 10] = [0x00, 0xc8, 0x81, 0x00, 0x07, 0xd1, 0x08, 0x06, 0x00, 0x01];

    #[test]
    fn stacked_tags() {
        let outer = VlanPacket::new_checked(&QINQ[..]).unwrap();
        assert_eq!(outer.vid(), 200);
        assert_eq!(outer.pcp(), 0);
        assert!(!outer.dei());
        assert_eq!(outer.tci(), 200);
        assert_eq!(outer.ethertype(), EtherType::VLAN);
        assert!(outer.ethertype().is_vlan());
        assert_eq!(outer.header_len(), 4);
        let inner = VlanPacket::new_checked(outer.payload()).unwrap();
        assert_eq!(inner.vid(), 2001);
        assert_eq!(inner.ethertype(), EtherType::ARP);
        assert_eq!(inner.payload(), &[0x00, 0x01]);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            VlanPacket::new_checked(&QINQ[..3]).unwrap_err().to_string(),
            "vlan tag truncated at offset 0: needs 4 bytes, 3 available"
        );
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 6];
        let mut v = VlanPacket::new_unchecked(&mut buf[..]);
        v.set_pcp(5);
        v.set_dei(true);
        v.set_vid(4095);
        v.set_ethertype(EtherType::IPV4);
        assert_eq!(v.pcp(), 5);
        assert!(v.dei());
        assert_eq!(v.vid(), 4095);
        v.set_vid(10);
        v.set_dei(false);
        assert_eq!(v.pcp(), 5);
        assert!(!v.dei());
        assert_eq!(v.vid(), 10);
        assert_eq!(v.ethertype(), EtherType::IPV4);
        v.payload_mut()[0] = 0x45;
        assert_eq!(v.into_inner(), &[0xa0, 0x0a, 0x08, 0x00, 0x45, 0x00]);
    }
}
