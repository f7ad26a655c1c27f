//! VXLAN headers (RFC 7348), including the VXLAN-GPE next-protocol field.
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use crate::bytes::{be24, need, set_be24};
use crate::error::Result;

/// The UDP port assigned to VXLAN.
pub const VXLAN_PORT: u16 = 4789;
/// The UDP port assigned to VXLAN-GPE.
pub const VXLAN_GPE_PORT: u16 = 4790;

/// A view of an 8-byte VXLAN header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VxlanPacket<T> {
    /// Header length: 8 bytes.
    pub const HEADER_LEN: usize = 8;
    /// The I flag: VNI is valid.
    pub const FLAG_I: u8 = 0x08;
    /// The P flag (VXLAN-GPE): next protocol field is valid.
    pub const FLAG_P: u8 = 0x04;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        VxlanPacket { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the 8-byte header is present.
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), "vxlan", "header", 0, Self::HEADER_LEN)
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length (8).
    pub const fn header_len(&self) -> usize {
        Self::HEADER_LEN
    }

    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// `true` when the I flag says the VNI is valid.
    pub fn vni_valid(&self) -> bool {
        self.flags() & Self::FLAG_I != 0
    }

    /// VXLAN network identifier (24 bits).
    pub fn vni(&self) -> u32 {
        be24(self.buffer.as_ref(), 4)
    }

    /// The VXLAN-GPE next protocol (1 IPv4, 2 IPv6, 3 Ethernet, 4 NSH, 5
    /// MPLS) when the P flag is set.
    pub fn gpe_next_protocol(&self) -> Option<u8> {
        (self.flags() & Self::FLAG_P != 0).then(|| self.buffer.as_ref()[3])
    }

    /// The encapsulated frame (Ethernet for plain VXLAN).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VxlanPacket<T> {
    /// Sets the flags byte.
    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[0] = flags;
    }

    /// Sets the VNI (low 24 bits).
    pub fn set_vni(&mut self, vni: u32) {
        set_be24(self.buffer.as_mut(), 4, vni);
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[Self::HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_header() {
        // From a capture: flags [I] (0x08), vni 100.
        let h = [0x08, 0, 0, 0, 0x00, 0x00, 0x64, 0x00, 0x00, 0x16];
        let p = VxlanPacket::new_checked(&h[..]).unwrap();
        assert_eq!(p.flags(), 0x08);
        assert!(p.vni_valid());
        assert_eq!(p.vni(), 100);
        assert_eq!(p.gpe_next_protocol(), None);
        assert_eq!(p.header_len(), 8);
        assert_eq!(p.payload(), &[0x00, 0x16]);
        assert_eq!(
            VxlanPacket::new_checked(&h[..5]).unwrap_err().to_string(),
            "vxlan header truncated at offset 0: needs 8 bytes, 5 available"
        );
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 9];
        let mut p = VxlanPacket::new_unchecked(&mut buf[..]);
        p.set_flags(0x0c);
        p.set_vni(0xab_cdef);
        p.payload_mut()[0] = 7;
        assert_eq!(p.vni(), 0xab_cdef);
        assert_eq!(p.gpe_next_protocol(), Some(0));
        assert_eq!(p.into_inner(), &[0x0c, 0, 0, 0, 0xab, 0xcd, 0xef, 0, 7]);
    }
}
