//! Borrowed and owned packets.

use crate::{LinkType, Timestamp};

/// A packet borrowed from a reader's buffer (or from any byte slice).
///
/// `data` holds the captured bytes (`data.len()` is the captured length, "caplen"), `wire_len`
/// the length the packet had on the wire ("len"). Usually `data.len() <= wire_len`, but files do
/// contain packets where the captured length is larger; both are kept as the file gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketRef<'a> {
    /// The captured bytes, starting with the link-layer header given by `link_type`.
    pub data: &'a [u8],
    /// The length of the packet on the wire, in bytes.
    pub wire_len: u32,
    /// When the packet was captured.
    pub timestamp: Timestamp,
    /// The link-layer header type of `data`.
    pub link_type: LinkType,
    /// The pcapng interface id within its section (always 0 for pcap files).
    pub interface: u32,
}

impl<'a> PacketRef<'a> {
    /// Makes a packet of `link_type` on interface 0 whose wire length is the length of `data`.
    pub fn new(data: &'a [u8], timestamp: Timestamp, link_type: LinkType) -> PacketRef<'a> {
        PacketRef {
            data,
            wire_len: u32::try_from(data.len()).unwrap_or(u32::MAX),
            timestamp,
            link_type,
            interface: 0,
        }
    }

    /// The captured length, `data.len()`, saturated to `u32`.
    pub fn caplen(&self) -> u32 {
        u32::try_from(self.data.len()).unwrap_or(u32::MAX)
    }

    /// Whether fewer bytes were captured than the packet had on the wire.
    pub fn is_truncated(&self) -> bool {
        self.caplen() < self.wire_len
    }

    /// Copies the packet into an owned [`Packet`].
    pub fn to_owned(&self) -> Packet {
        Packet {
            data: self.data.to_vec(),
            wire_len: self.wire_len,
            timestamp: self.timestamp,
            link_type: self.link_type,
            interface: self.interface,
        }
    }
}

/// An owned packet: the same fields as [`PacketRef`], with the bytes in a `Vec`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Packet {
    /// The captured bytes, starting with the link-layer header given by `link_type`.
    pub data: Vec<u8>,
    /// The length of the packet on the wire, in bytes.
    pub wire_len: u32,
    /// When the packet was captured.
    pub timestamp: Timestamp,
    /// The link-layer header type of `data`.
    pub link_type: LinkType,
    /// The pcapng interface id within its section (always 0 for pcap files).
    pub interface: u32,
}

impl Packet {
    /// Makes a packet of `link_type` on interface 0 whose wire length is the length of `data`.
    pub fn new(data: Vec<u8>, timestamp: Timestamp, link_type: LinkType) -> Packet {
        Packet {
            wire_len: u32::try_from(data.len()).unwrap_or(u32::MAX),
            data,
            timestamp,
            link_type,
            interface: 0,
        }
    }

    /// Borrows the packet as a [`PacketRef`].
    pub fn as_ref(&self) -> PacketRef<'_> {
        PacketRef {
            data: &self.data,
            wire_len: self.wire_len,
            timestamp: self.timestamp,
            link_type: self.link_type,
            interface: self.interface,
        }
    }

    /// The captured length, `data.len()`, saturated to `u32`.
    pub fn caplen(&self) -> u32 {
        u32::try_from(self.data.len()).unwrap_or(u32::MAX)
    }
}

impl<'a> From<&'a Packet> for PacketRef<'a> {
    fn from(packet: &'a Packet) -> PacketRef<'a> {
        packet.as_ref()
    }
}

impl From<PacketRef<'_>> for Packet {
    fn from(packet: PacketRef<'_>) -> Packet {
        packet.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        let bytes = [1u8, 2, 3];
        let r = PacketRef {
            data: &bytes,
            wire_len: 60,
            timestamp: Timestamp::new(5, 6),
            link_type: LinkType::ETHERNET,
            interface: 2,
        };
        let owned = r.to_owned();
        assert_eq!(owned.data, vec![1, 2, 3]);
        assert_eq!(owned.as_ref(), r);
        assert_eq!(Packet::from(r), owned);
        assert_eq!(PacketRef::from(&owned), r);
        assert!(r.is_truncated());
        assert_eq!(r.caplen(), 3);
    }

    #[test]
    fn constructors_use_data_length() {
        let p = Packet::new(vec![0; 10], Timestamp::ZERO, LinkType::RAW);
        assert_eq!((p.wire_len, p.caplen(), p.interface), (10, 10, 0));
        let r = PacketRef::new(&p.data, Timestamp::ZERO, LinkType::RAW);
        assert_eq!(r, p.as_ref());
        assert!(!r.is_truncated());
    }
}
