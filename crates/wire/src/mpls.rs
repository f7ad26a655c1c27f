//! MPLS label stack entries (RFC 3032).
//!
//! An [`MplsPacket`] views one 4-byte label stack entry; walk a stack by
//! viewing [`MplsPacket::payload`] again until
//! [`MplsPacket::bottom_of_stack`] is set.
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use crate::bytes::{be32, need, set_be32};
use crate::error::Result;

/// A view of one MPLS label stack entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MplsPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MplsPacket<T> {
    /// Entry length: 4 bytes.
    pub const HEADER_LEN: usize = 4;
    /// Reserved label: IPv4 explicit null.
    pub const IPV4_EXPLICIT_NULL: u32 = 0;
    /// Reserved label: router alert.
    pub const ROUTER_ALERT: u32 = 1;
    /// Reserved label: IPv6 explicit null.
    pub const IPV6_EXPLICIT_NULL: u32 = 2;
    /// Reserved label: implicit null.
    pub const IMPLICIT_NULL: u32 = 3;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        MplsPacket { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the 4-byte entry is present.
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), "mpls", "label", 0, Self::HEADER_LEN)
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length (4).
    pub const fn header_len(&self) -> usize {
        Self::HEADER_LEN
    }

    fn entry(&self) -> u32 {
        be32(self.buffer.as_ref(), 0)
    }

    /// Label value (20 bits).
    pub fn label(&self) -> u32 {
        self.entry() >> 12
    }

    /// Traffic class (3 bits, formerly EXP).
    pub fn tc(&self) -> u8 {
        ((self.entry() >> 9) & 0x07) as u8
    }

    /// Bottom-of-stack flag.
    pub fn bottom_of_stack(&self) -> bool {
        self.entry() & 0x100 != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.entry() as u8
    }

    /// Everything after this entry.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MplsPacket<T> {
    fn set_entry(&mut self, v: u32) {
        set_be32(self.buffer.as_mut(), 0, v);
    }

    /// Sets the label (low 20 bits).
    pub fn set_label(&mut self, label: u32) {
        let v = (self.entry() & 0xfff) | ((label & 0xf_ffff) << 12);
        self.set_entry(v);
    }

    /// Sets the traffic class (low 3 bits).
    pub fn set_tc(&mut self, tc: u8) {
        let v = (self.entry() & !0xe00) | (u32::from(tc & 7) << 9);
        self.set_entry(v);
    }

    /// Sets the bottom-of-stack flag.
    pub fn set_bottom_of_stack(&mut self, bos: bool) {
        let v = (self.entry() & !0x100) | if bos { 0x100 } else { 0 };
        self.set_entry(v);
    }

    /// Sets the TTL.
    pub fn set_ttl(&mut self, ttl: u8) {
        let v = (self.entry() & !0xff) | u32::from(ttl);
        self.set_entry(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors() {
        // label 100704, tc 0, S, ttl 1 (from a real MPLS traceroute).
        let e = [0x18, 0x96, 0x01, 0x01, 0x45];
        let p = MplsPacket::new_checked(&e[..]).unwrap();
        assert_eq!(p.label(), 100_704);
        assert_eq!(p.tc(), 0);
        assert!(p.bottom_of_stack());
        assert_eq!(p.ttl(), 1);
        assert_eq!(p.header_len(), 4);
        assert_eq!(p.payload(), &[0x45]);
        assert_eq!(
            MplsPacket::new_checked(&e[..2]).unwrap_err().to_string(),
            "mpls label truncated at offset 0: needs 4 bytes, 2 available"
        );
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 4];
        let mut p = MplsPacket::new_unchecked(&mut buf[..]);
        p.set_label(0xf_ffff);
        p.set_tc(5);
        p.set_bottom_of_stack(true);
        p.set_ttl(64);
        assert_eq!(p.label(), 0xf_ffff);
        assert_eq!(p.tc(), 5);
        assert!(p.bottom_of_stack());
        assert_eq!(p.ttl(), 64);
        p.set_label(16);
        p.set_bottom_of_stack(false);
        assert_eq!(p.label(), 16);
        assert!(!p.bottom_of_stack());
        assert_eq!(p.tc(), 5);
        assert_eq!(p.into_inner(), &[0x00, 0x01, 0x0a, 0x40]);
    }
}
