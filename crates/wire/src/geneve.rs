//! Geneve headers (RFC 8926).
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use crate::bytes::{be16, be24, clip, need, set_be16, set_be24};
use crate::error::{Error, Result};
use crate::ethernet::EtherType;

/// The UDP port assigned to Geneve.
pub const GENEVE_PORT: u16 = 6081;

/// A view of a Geneve header with its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenevePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> GenevePacket<T> {
    /// Length of the fixed header.
    pub const MIN_HEADER_LEN: usize = 8;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        GenevePacket { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the fixed header and all option bytes are present.
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        need(d, "geneve", "header", 0, Self::MIN_HEADER_LEN)?;
        need(d, "geneve", "header", 0, self.header_len())
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (2 bits, currently 0).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 6
    }

    /// Option length field in 4-byte units (6 bits).
    pub fn opt_len(&self) -> u8 {
        self.buffer.as_ref()[0] & 0x3f
    }

    /// Length of the options in bytes.
    pub fn options_len(&self) -> usize {
        usize::from(self.opt_len()) * 4
    }

    /// Header length including options.
    pub fn header_len(&self) -> usize {
        Self::MIN_HEADER_LEN + self.options_len()
    }

    /// O: control (OAM) packet.
    pub fn oam(&self) -> bool {
        self.buffer.as_ref()[1] & 0x80 != 0
    }

    /// C: critical options present.
    pub fn critical(&self) -> bool {
        self.buffer.as_ref()[1] & 0x40 != 0
    }

    /// Protocol type of the payload (0x6558 for Ethernet).
    pub fn protocol_type(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), 2))
    }

    /// Virtual network identifier (24 bits).
    pub fn vni(&self) -> u32 {
        be24(self.buffer.as_ref(), 4)
    }

    /// The raw option bytes.
    pub fn options(&self) -> &[u8] {
        clip(
            self.buffer.as_ref(),
            Self::MIN_HEADER_LEN,
            self.header_len(),
        )
    }

    /// Iterates over the options.
    pub fn options_iter(&self) -> GeneveOptions<'_> {
        GeneveOptions {
            data: self.options(),
            pos: 0,
            done: false,
        }
    }

    /// Everything after the header and options.
    pub fn payload(&self) -> &[u8] {
        clip(self.buffer.as_ref(), self.header_len(), usize::MAX)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GenevePacket<T> {
    /// Sets the option length in bytes (stored as `len / 4`).
    pub fn set_options_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[0];
        *b = (*b & 0xc0) | ((len / 4) as u8 & 0x3f);
    }

    /// Sets the O and C flags.
    pub fn set_flags(&mut self, oam: bool, critical: bool) {
        let b = &mut self.buffer.as_mut()[1];
        *b = (*b & 0x3f) | if oam { 0x80 } else { 0 } | if critical { 0x40 } else { 0 };
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, ty: EtherType) {
        set_be16(self.buffer.as_mut(), 2, ty.0);
    }

    /// Sets the VNI (low 24 bits).
    pub fn set_vni(&mut self, vni: u32) {
        set_be24(self.buffer.as_mut(), 4, vni);
    }
}

/// One Geneve option TLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneveOption<'a> {
    /// Option class.
    pub class: u16,
    /// Option type (the high bit marks a critical option).
    pub option_type: u8,
    /// Option data (a multiple of 4 bytes).
    pub data: &'a [u8],
}

/// Iterator over Geneve options; an option running past the options area
/// is reported as an `Err` item and ends the iteration.
#[derive(Debug, Clone)]
pub struct GeneveOptions<'a> {
    data: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Iterator for GeneveOptions<'a> {
    type Item = Result<GeneveOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.data.len() {
            return None;
        }
        let rest = &self.data[self.pos..];
        let at = 8 + self.pos;
        if rest.len() < 4 {
            self.done = true;
            return Some(Err(Error::truncated("geneve", "option", at, 4, rest.len())));
        }
        let total = 4 + usize::from(rest[3] & 0x1f) * 4;
        if total > rest.len() {
            self.done = true;
            return Some(Err(Error::truncated(
                "geneve",
                "option",
                at,
                total,
                rest.len(),
            )));
        }
        self.pos += total;
        Some(Ok(GeneveOption {
            class: be16(rest, 0),
            option_type: rest[2],
            data: &rest[4..total],
        }))
    }
}

impl core::iter::FusedIterator for GeneveOptions<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real header from a capture: Flags [C], vni 0xa, 8 bytes of options
    /// (class 0, type 0x80, 4 data bytes), Ethernet payload.
    const HDR: [u8; 18] = [
        0x02, 0x40, 0x65, 0x58, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00,
        0x0c, 0xfe, 0x71,
    ];

    #[test]
    fn accessors() {
        let p = GenevePacket::new_checked(&HDR[..]).unwrap();
        assert_eq!(p.version(), 0);
        assert_eq!(p.opt_len(), 2);
        assert_eq!(p.options_len(), 8);
        assert_eq!(p.header_len(), 16);
        assert!(!p.oam());
        assert!(p.critical());
        assert_eq!(p.protocol_type(), EtherType::TEB);
        assert_eq!(p.vni(), 0xa);
        assert_eq!(p.options().len(), 8);
        assert_eq!(p.payload(), &[0xfe, 0x71]);
        let opts: Vec<_> = p.options_iter().map(|o| o.unwrap()).collect();
        assert_eq!(
            opts,
            [GeneveOption {
                class: 0,
                option_type: 0x80,
                data: &[0, 0, 0, 0x0c]
            }]
        );
    }

    #[test]
    fn truncated_and_bad_options() {
        assert_eq!(
            GenevePacket::new_checked(&HDR[..12])
                .unwrap_err()
                .to_string(),
            "geneve header truncated at offset 0: needs 16 bytes, 12 available"
        );
        let mut bad = HDR;
        bad[11] = 0x03; // option claims 12 data bytes
        let p = GenevePacket::new_checked(&bad[..]).unwrap();
        let items: Vec<_> = p.options_iter().collect();
        assert_eq!(items.len(), 1);
        assert_eq!(
            items[0].unwrap_err().to_string(),
            "geneve option truncated at offset 8: needs 16 bytes, 8 available"
        );
        bad[0] = 0x01; // 4 bytes of options: a partial option header is fine
        let p = GenevePacket::new_checked(&bad[..]).unwrap();
        assert!(p.options_iter().next().unwrap().is_err());
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 12];
        let mut p = GenevePacket::new_unchecked(&mut buf[..]);
        p.set_options_len(4);
        p.set_flags(true, false);
        p.set_protocol_type(EtherType::IPV4);
        p.set_vni(0x12_3456);
        assert!(p.check_len().is_ok());
        assert_eq!(p.options_len(), 4);
        assert!(p.oam());
        assert!(!p.critical());
        assert_eq!(p.protocol_type(), EtherType::IPV4);
        assert_eq!(p.vni(), 0x12_3456);
        assert!(p.payload().is_empty());
        assert_eq!(
            p.options_iter().next(),
            Some(Ok(GeneveOption {
                class: 0,
                option_type: 0,
                data: &[]
            }))
        );
    }
}
