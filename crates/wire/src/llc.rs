//! IEEE 802.2 LLC headers with optional SNAP extension.
//!
//! The control field is one byte for U (unnumbered) frames and two bytes for
//! I (information) and S (supervisory) frames. A UI frame with DSAP = SSAP =
//! 0xAA carries a 5-byte SNAP header (OUI + protocol id).
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use core::fmt;

use crate::bytes::{be16, need, set_be16};
use crate::error::Result;
use crate::ethernet::EtherType;

/// An LLC service access point (DSAP/SSAP value with the I/G or C/R bit
/// masked off by the accessors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LlcSap(pub u8);

impl LlcSap {
    /// Null SAP.
    pub const NULL: LlcSap = LlcSap(0x00);
    /// Internet Protocol.
    pub const IP: LlcSap = LlcSap(0x06);
    /// Spanning tree.
    pub const STP: LlcSap = LlcSap(0x42);
    /// SNAP.
    pub const SNAP: LlcSap = LlcSap(0xaa);
    /// Novell IPX.
    pub const IPX: LlcSap = LlcSap(0xe0);
    /// NetBIOS.
    pub const NETBEUI: LlcSap = LlcSap(0xf0);
    /// OSI (ISO CLNS: IS-IS, ES-IS, ...).
    pub const ISO_NS: LlcSap = LlcSap(0xfe);
    /// Global DSAP.
    pub const GLOBAL: LlcSap = LlcSap(0xff);

    /// The tcpdump name, if known.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x00 => "Null",
            0x06 => "IP",
            0x42 => "STP",
            0xaa => "SNAP",
            0xe0 => "IPX",
            0xf0 => "NetBeui",
            0xfe => "OSI",
            0xff => "Global",
            _ => return None,
        })
    }
}

impl fmt::Display for LlcSap {
    /// The tcpdump name, else `0x%02x`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "0x{:02x}", self.0),
        }
    }
}

mod field {
    pub(super) const DSAP: usize = 0;
    pub(super) const SSAP: usize = 1;
    pub(super) const CONTROL: usize = 2;
}

/// A view of an LLC (and optional SNAP) header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlcPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> LlcPacket<T> {
    /// Smallest header: DSAP, SSAP, 1-byte control.
    pub const MIN_HEADER_LEN: usize = 3;
    /// Length of the SNAP extension.
    pub const SNAP_LEN: usize = 5;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        LlcPacket { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the header is present: 3 bytes, 4 for I/S frames, 8 with
    /// SNAP.
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        need(d, "llc", "header", 0, Self::MIN_HEADER_LEN)?;
        need(d, "llc", "header", 0, self.header_len())
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination SAP with the I/G bit masked off.
    pub fn dsap(&self) -> LlcSap {
        LlcSap(self.buffer.as_ref()[field::DSAP] & 0xfe)
    }

    /// `true` when the DSAP's I/G bit marks a group address.
    pub fn dsap_is_group(&self) -> bool {
        self.buffer.as_ref()[field::DSAP] & 0x01 != 0
    }

    /// Source SAP with the C/R bit masked off.
    pub fn ssap(&self) -> LlcSap {
        LlcSap(self.buffer.as_ref()[field::SSAP] & 0xfe)
    }

    /// `true` when the SSAP's C/R bit marks a response.
    pub fn is_response(&self) -> bool {
        self.buffer.as_ref()[field::SSAP] & 0x01 != 0
    }

    fn control_len(&self) -> usize {
        // U frames end in binary 11; I (x0) and S (01) frames use 2 bytes.
        if self.buffer.as_ref()[field::CONTROL] & 0x03 == 0x03 {
            1
        } else {
            2
        }
    }

    /// The control field: one byte for U frames, two (big-endian) for I
    /// and S frames.
    pub fn control(&self) -> u16 {
        let d = self.buffer.as_ref();
        if self.control_len() == 1 {
            u16::from(d[field::CONTROL])
        } else {
            be16(d, field::CONTROL)
        }
    }

    /// `true` for unnumbered (U) frames, including UI.
    pub fn is_unnumbered(&self) -> bool {
        self.control_len() == 1
    }

    /// `true` when a SNAP header follows (DSAP = SSAP = 0xAA, UI frame).
    pub fn is_snap(&self) -> bool {
        let d = self.buffer.as_ref();
        d[field::DSAP] == 0xaa && d[field::SSAP] == 0xaa && d[field::CONTROL] == 0x03
    }

    /// Header length including the control field and any SNAP header.
    pub fn header_len(&self) -> usize {
        if self.is_snap() {
            Self::MIN_HEADER_LEN + Self::SNAP_LEN
        } else {
            2 + self.control_len()
        }
    }

    /// The SNAP organizationally unique identifier, for SNAP frames.
    pub fn snap_oui(&self) -> Option<u32> {
        let d = self.buffer.as_ref();
        self.is_snap()
            .then(|| u32::from_be_bytes([0, d[3], d[4], d[5]]))
    }

    /// The SNAP protocol id (an EtherType when the OUI is 0), for SNAP
    /// frames.
    pub fn snap_type(&self) -> Option<EtherType> {
        self.is_snap()
            .then(|| EtherType(be16(self.buffer.as_ref(), 6)))
    }

    /// Everything after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> LlcPacket<T> {
    /// Sets the raw DSAP byte.
    pub fn set_dsap(&mut self, sap: u8) {
        self.buffer.as_mut()[field::DSAP] = sap;
    }

    /// Sets the raw SSAP byte.
    pub fn set_ssap(&mut self, sap: u8) {
        self.buffer.as_mut()[field::SSAP] = sap;
    }

    /// Sets a 1-byte (U frame) control field.
    pub fn set_control(&mut self, control: u8) {
        self.buffer.as_mut()[field::CONTROL] = control;
    }

    /// Writes a SNAP header: DSAP/SSAP 0xAA, UI control, OUI and type.
    pub fn set_snap(&mut self, oui: u32, ty: EtherType) {
        let d = self.buffer.as_mut();
        d[..3].copy_from_slice(&[0xaa, 0xaa, 0x03]);
        d[3..6].copy_from_slice(&oui.to_be_bytes()[1..]);
        set_be16(d, 6, ty.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stp_ui_frame() {
        let f = [0x42, 0x42, 0x03, 0x00, 0x00];
        let p = LlcPacket::new_checked(&f[..]).unwrap();
        assert_eq!(p.dsap(), LlcSap::STP);
        assert_eq!(p.ssap(), LlcSap::STP);
        assert!(!p.dsap_is_group());
        assert!(!p.is_response());
        assert_eq!(p.control(), 0x03);
        assert!(p.is_unnumbered());
        assert!(!p.is_snap());
        assert_eq!(p.header_len(), 3);
        assert_eq!(p.snap_oui(), None);
        assert_eq!(p.snap_type(), None);
        assert_eq!(p.payload(), &[0, 0]);
        assert_eq!(p.dsap().to_string(), "STP");
        assert_eq!(LlcSap(0x12).to_string(), "0x12");
    }

    #[test]
    fn i_frame_has_two_byte_control() {
        let f = [0xf0, 0xf1, 0x0a, 0x0c, 0xff];
        let p = LlcPacket::new_checked(&f[..]).unwrap();
        assert_eq!(p.control(), 0x0a0c);
        assert!(!p.is_unnumbered());
        assert!(p.is_response());
        assert_eq!(p.header_len(), 4);
        assert_eq!(p.payload(), &[0xff]);
        assert_eq!(
            LlcPacket::new_checked(&f[..3]).unwrap_err().to_string(),
            "llc header truncated at offset 0: needs 4 bytes, 3 available"
        );
        // S frame (01).
        let s = [0xf0, 0xf0, 0x01, 0x02];
        assert_eq!(LlcPacket::new_checked(&s[..]).unwrap().header_len(), 4);
    }

    #[test]
    fn snap() {
        // CDP: OUI 00000c, type 0x2000.
        let f = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x0c, 0x20, 0x00, 0x02];
        let p = LlcPacket::new_checked(&f[..]).unwrap();
        assert!(p.is_snap());
        assert_eq!(p.header_len(), 8);
        assert_eq!(p.snap_oui(), Some(0x00000c));
        assert_eq!(p.snap_type(), Some(EtherType(0x2000)));
        assert_eq!(p.payload(), &[0x02]);
        assert!(LlcPacket::new_checked(&f[..7]).is_err());
        assert!(LlcPacket::new_checked(&f[..2]).is_err());
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 8];
        let mut p = LlcPacket::new_unchecked(&mut buf[..]);
        p.set_snap(0, EtherType::IPV4);
        assert_eq!(p.snap_type(), Some(EtherType::IPV4));
        assert_eq!(p.snap_oui(), Some(0));
        p.set_dsap(0x42);
        p.set_ssap(0x43);
        p.set_control(0x03);
        assert_eq!(p.dsap(), LlcSap::STP);
        assert!(p.is_response());
        assert!(!p.is_snap());
    }
}
