//! SCTP common header and chunks (RFC 9260).
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use core::fmt;

use crate::bytes::{be16, be32, clip, need, set_be16, set_be32};
use crate::checksum;
use crate::error::{Error, Result};

/// An SCTP chunk type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SctpChunkType(pub u8);

impl SctpChunkType {
    /// Payload data.
    pub const DATA: SctpChunkType = SctpChunkType(0);
    /// Initiation.
    pub const INIT: SctpChunkType = SctpChunkType(1);
    /// Initiation acknowledgement.
    pub const INIT_ACK: SctpChunkType = SctpChunkType(2);
    /// Selective acknowledgement.
    pub const SACK: SctpChunkType = SctpChunkType(3);
    /// Heartbeat request.
    pub const HEARTBEAT: SctpChunkType = SctpChunkType(4);
    /// Heartbeat acknowledgement.
    pub const HEARTBEAT_ACK: SctpChunkType = SctpChunkType(5);
    /// Abort.
    pub const ABORT: SctpChunkType = SctpChunkType(6);
    /// Shutdown.
    pub const SHUTDOWN: SctpChunkType = SctpChunkType(7);
    /// Shutdown acknowledgement.
    pub const SHUTDOWN_ACK: SctpChunkType = SctpChunkType(8);
    /// Operation error.
    pub const ERROR: SctpChunkType = SctpChunkType(9);
    /// State cookie.
    pub const COOKIE_ECHO: SctpChunkType = SctpChunkType(10);
    /// Cookie acknowledgement.
    pub const COOKIE_ACK: SctpChunkType = SctpChunkType(11);
    /// Shutdown complete.
    pub const SHUTDOWN_COMPLETE: SctpChunkType = SctpChunkType(14);

    /// The tcpdump name, if known.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "DATA",
            1 => "INIT",
            2 => "INIT ACK",
            3 => "SACK",
            4 => "HB REQ",
            5 => "HB ACK",
            6 => "ABORT",
            7 => "SHUTDOWN",
            8 => "SHUTDOWN ACK",
            9 => "OP ERR",
            10 => "COOKIE ECHO",
            11 => "COOKIE ACK",
            12 => "ECN ECHO",
            13 => "ECN CWR",
            14 => "SHUTDOWN COMPLETE",
            15 => "AUTH",
            64 => "I-DATA",
            128 => "ASCONF ACK",
            130 => "RE-CONFIG",
            132 => "PAD",
            192 => "FOR CUM TSN",
            193 => "ASCONF",
            194 => "I-FORWARD-TSN",
            _ => return None,
        })
    }
}

impl fmt::Display for SctpChunkType {
    /// The tcpdump name, else the number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

/// One chunk found by [`SctpChunks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SctpChunk<'a> {
    offset: usize,
    bytes: &'a [u8],
}

impl<'a> SctpChunk<'a> {
    /// Chunk type.
    pub fn chunk_type(&self) -> SctpChunkType {
        SctpChunkType(self.bytes[0])
    }

    /// Chunk flags.
    pub fn flags(&self) -> u8 {
        self.bytes[1]
    }

    /// Declared chunk length (header plus value, without padding).
    pub fn length(&self) -> u16 {
        be16(self.bytes, 2)
    }

    /// The chunk value (after the 4-byte chunk header).
    pub fn value(&self) -> &'a [u8] {
        &self.bytes[4..]
    }

    /// Offset of the chunk from the start of the SCTP packet.
    pub const fn offset(&self) -> usize {
        self.offset
    }
}

/// Iterator over the chunks of an SCTP packet. A chunk with a length below
/// 4 or running past the end of the buffer is reported as an `Err` item and
/// ends the iteration.
#[derive(Debug, Clone)]
pub struct SctpChunks<'a> {
    data: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Iterator for SctpChunks<'a> {
    type Item = Result<SctpChunk<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.data.len() {
            return None;
        }
        let rest = &self.data[self.pos..];
        let at = self.pos;
        if rest.len() < 4 {
            self.done = true;
            return Some(Err(Error::truncated("sctp", "chunk", at, 4, rest.len())));
        }
        let len = usize::from(be16(rest, 2));
        if len < 4 {
            self.done = true;
            return Some(Err(Error::malformed(
                "sctp",
                "chunk length",
                at + 2,
                4,
                len,
            )));
        }
        if len > rest.len() {
            self.done = true;
            return Some(Err(Error::truncated("sctp", "chunk", at, len, rest.len())));
        }
        // Chunks are padded to 4 bytes; the padding of the last chunk may be
        // missing from a short buffer.
        self.pos += (len + 3) & !3;
        Some(Ok(SctpChunk {
            offset: at,
            bytes: &rest[..len],
        }))
    }
}

impl core::iter::FusedIterator for SctpChunks<'_> {}

mod field {
    pub(super) const SRC_PORT: usize = 0;
    pub(super) const DST_PORT: usize = 2;
    pub(super) const VTAG: usize = 4;
    pub(super) const CHECKSUM: usize = 8;
    pub(super) const CHUNKS: usize = 12;
}

/// A view of an SCTP packet (common header plus chunks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SctpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SctpPacket<T> {
    /// Common header length: 12 bytes.
    pub const HEADER_LEN: usize = field::CHUNKS;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        SctpPacket { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the 12-byte common header is present (chunks are checked
    /// while iterating).
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), "sctp", "header", 0, Self::HEADER_LEN)
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Common header length (12).
    pub const fn header_len(&self) -> usize {
        Self::HEADER_LEN
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Verification tag.
    pub fn verification_tag(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VTAG)
    }

    /// The CRC-32C checksum as a number (it is stored little-endian on the
    /// wire).
    pub fn checksum(&self) -> u32 {
        let d = self.buffer.as_ref();
        u32::from_le_bytes([d[8], d[9], d[10], d[11]])
    }

    /// The bytes after the common header.
    pub fn payload(&self) -> &[u8] {
        clip(self.buffer.as_ref(), field::CHUNKS, usize::MAX)
    }

    /// Iterates over the chunks.
    pub fn chunks(&self) -> SctpChunks<'_> {
        SctpChunks {
            data: self.buffer.as_ref(),
            pos: field::CHUNKS,
            done: false,
        }
    }

    fn compute_crc(&self) -> u32 {
        let d = self.buffer.as_ref();
        let mut copy = d.to_vec();
        copy[field::CHECKSUM..field::CHUNKS].fill(0);
        checksum::crc32c(&copy)
    }

    /// `true` when the CRC-32C over the whole buffer is correct.
    pub fn verify_checksum(&self) -> bool {
        self.compute_crc() == self.checksum()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SctpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, port);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, port);
    }

    /// Sets the verification tag.
    pub fn set_verification_tag(&mut self, tag: u32) {
        set_be32(self.buffer.as_mut(), field::VTAG, tag);
    }

    /// Sets the checksum (stored little-endian).
    pub fn set_checksum(&mut self, value: u32) {
        self.buffer.as_mut()[field::CHECKSUM..field::CHUNKS].copy_from_slice(&value.to_le_bytes());
    }

    /// Computes and stores the CRC-32C over the whole buffer.
    pub fn fill_checksum(&mut self) {
        let crc = self.compute_crc();
        self.set_checksum(crc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 5000 > 5001, vtag 0, INIT chunk (20 bytes), then a COOKIE ACK.
    fn packet() -> Vec<u8> {
        let mut v = vec![0x13, 0x88, 0x13, 0x89, 0, 0, 0, 0, 0, 0, 0, 0];
        v.extend_from_slice(&[1, 0, 0, 20]);
        v.extend_from_slice(&[0xab; 16]);
        v.extend_from_slice(&[11, 0, 0, 4]);
        v
    }

    #[test]
    fn accessors_and_chunks() {
        let mut buf = packet();
        let mut p = SctpPacket::new_checked(&mut buf[..]).unwrap();
        p.set_verification_tag(0x1234_5678);
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.src_port(), 5000);
        assert_eq!(p.dst_port(), 5001);
        assert_eq!(p.verification_tag(), 0x1234_5678);
        assert_eq!(p.header_len(), 12);
        assert_eq!(p.payload().len(), 24);
        let chunks: Vec<_> = p.chunks().map(|c| c.unwrap()).collect();
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].chunk_type(), SctpChunkType::INIT);
        assert_eq!(chunks[0].chunk_type().to_string(), "INIT");
        assert_eq!(chunks[0].length(), 20);
        assert_eq!(chunks[0].flags(), 0);
        assert_eq!(chunks[0].value().len(), 16);
        assert_eq!(chunks[0].offset(), 12);
        assert_eq!(chunks[1].chunk_type().to_string(), "COOKIE ACK");
        assert!(chunks[1].value().is_empty());
        p.set_src_port(1);
        assert!(!p.verify_checksum());
        p.set_dst_port(2);
        p.set_checksum(0xdead_beef);
        assert_eq!(p.checksum(), 0xdead_beef);
        assert_eq!(&buf[8..12], &[0xef, 0xbe, 0xad, 0xde]);
    }

    #[test]
    fn crc_matches_known_vector() {
        // The checksum of a packet is the CRC-32C of the packet with a
        // zeroed checksum field, stored little-endian.
        let mut buf = packet();
        let crc = checksum::crc32c(&buf);
        buf[8..12].copy_from_slice(&crc.to_le_bytes());
        assert!(SctpPacket::new_checked(&buf[..]).unwrap().verify_checksum());
    }

    #[test]
    fn malformed_chunks() {
        let mut buf = packet();
        buf[15] = 2; // first chunk length 2
        let p = SctpPacket::new_checked(&buf[..]).unwrap();
        let items: Vec<_> = p.chunks().collect();
        assert_eq!(items.len(), 1);
        assert_eq!(
            items[0].unwrap_err().to_string(),
            "sctp chunk length malformed at offset 14: must be at least 4, is 2"
        );
        buf[15] = 200;
        let p = SctpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(
            p.chunks().next().unwrap().unwrap_err().to_string(),
            "sctp chunk truncated at offset 12: needs 200 bytes, 24 available"
        );
        let p = SctpPacket::new_checked(&buf[..14]).unwrap();
        assert!(p.chunks().next().unwrap().is_err());
        // Unpadded last chunk of odd length is fine.
        let mut v = packet();
        v.truncate(12);
        v.extend_from_slice(&[0, 3, 0, 5, 0x42]);
        let p = SctpPacket::new_checked(&v[..]).unwrap();
        let items: Vec<_> = p.chunks().collect();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].unwrap().value(), &[0x42]);
        assert_eq!(
            SctpPacket::new_checked(&v[..11]).unwrap_err().to_string(),
            "sctp header truncated at offset 0: needs 12 bytes, 11 available"
        );
        assert_eq!(SctpChunkType(99).to_string(), "99");
    }
}
