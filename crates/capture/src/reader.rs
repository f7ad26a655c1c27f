//! [`CaptureReader`]: one streaming reader for pcap and pcapng files.
//!
//! The reader pulls bytes from any [`Read`] through an internal 64 KiB buffer, so it works on
//! pipes as well as files and never needs to seek. Packets are decoded into one reusable buffer:
//! [`CaptureReader::next_packet`] lends a [`PacketRef`] into it (no copy, no allocation once the
//! buffer has grown to the largest packet); [`CaptureReader::packets`] and the
//! [`IntoIterator`] implementation copy each packet into an owned [`Packet`] instead.
//!
//! The format is chosen from the first four bytes: one of the three pcap magic numbers (in either
//! byte order) or the pcapng section header block type.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::io::Source;
use crate::pcap::PcapState;
use crate::pcapng::NgState;
use crate::{Error, ErrorKind, LinkType, Packet, PacketRef, Timestamp};

/// The byte order of a file or section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

impl ByteOrder {
    #[inline]
    fn array<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        // Callers check lengths first; out-of-range reads yield zeros rather than panicking.
        if let Some(src) = b.get(at..at.saturating_add(N)) {
            out.copy_from_slice(src);
        }
        out
    }

    #[inline]
    pub(crate) fn u16(self, b: &[u8], at: usize) -> u16 {
        let a = ByteOrder::array::<2>(b, at);
        match self {
            ByteOrder::Little => u16::from_le_bytes(a),
            ByteOrder::Big => u16::from_be_bytes(a),
        }
    }

    #[inline]
    pub(crate) fn u32(self, b: &[u8], at: usize) -> u32 {
        let a = ByteOrder::array::<4>(b, at);
        match self {
            ByteOrder::Little => u32::from_le_bytes(a),
            ByteOrder::Big => u32::from_be_bytes(a),
        }
    }

    pub(crate) fn i64(self, b: &[u8], at: usize) -> i64 {
        let a = ByteOrder::array::<8>(b, at);
        match self {
            ByteOrder::Little => i64::from_le_bytes(a),
            ByteOrder::Big => i64::from_be_bytes(a),
        }
    }
}

/// The resolution of the timestamps in a pcap file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Microseconds (magic number `0xa1b2c3d4`).
    Micro,
    /// Nanoseconds (magic number `0xa1b23c4d`).
    Nano,
}

/// The resolution of the timestamps of a pcapng interface (the `if_tsresol` option).
///
/// Timestamps count units of 10<sup>−n</sup> or 2<sup>−n</sup> seconds. Conversion to
/// nanoseconds is exact (rounded down when a unit is finer than a nanosecond), with 128-bit
/// integer arithmetic for every `n` the option can encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TsResolution {
    /// Units of 10<sup>−n</sup> seconds, `n` in `0..=127`.
    PowerOf10(u8),
    /// Units of 2<sup>−n</sup> seconds, `n` in `0..=127`.
    PowerOf2(u8),
}

impl TsResolution {
    /// Microseconds, the default when an interface has no `if_tsresol` option.
    pub const MICROS: TsResolution = TsResolution::PowerOf10(6);
    /// Nanoseconds.
    pub const NANOS: TsResolution = TsResolution::PowerOf10(9);

    /// Decodes the one-byte value of an `if_tsresol` option: the high bit selects base 2, the
    /// other seven bits are the exponent.
    pub const fn from_option_byte(byte: u8) -> TsResolution {
        if byte & 0x80 != 0 {
            TsResolution::PowerOf2(byte & 0x7f)
        } else {
            TsResolution::PowerOf10(byte)
        }
    }

    /// Encodes the resolution as the value of an `if_tsresol` option (exponents above 127 are
    /// masked to seven bits).
    pub const fn to_option_byte(self) -> u8 {
        match self {
            TsResolution::PowerOf10(n) => n & 0x7f,
            TsResolution::PowerOf2(n) => 0x80 | (n & 0x7f),
        }
    }

    /// Converts a count of units into nanoseconds, exactly, rounding down.
    ///
    /// ```
    /// use netsift_capture::TsResolution;
    /// assert_eq!(TsResolution::MICROS.units_to_nanos(1_500_000), 1_500_000_000);
    /// assert_eq!(TsResolution::PowerOf2(10).units_to_nanos(1024), 1_000_000_000);
    /// assert_eq!(TsResolution::PowerOf10(12).units_to_nanos(1_999), 1);
    /// ```
    pub const fn units_to_nanos(self, units: u64) -> u128 {
        // units * 10^9 < 2^94: no overflow.
        let scaled = units as u128 * 1_000_000_000;
        match self {
            TsResolution::PowerOf10(n) => {
                let n = n & 0x7f;
                if n <= 9 {
                    units as u128 * 10u128.pow(9 - n as u32)
                } else if n <= 38 {
                    scaled / 10u128.pow(n as u32)
                } else {
                    // 10^39 > 2^94 > scaled.
                    0
                }
            }
            TsResolution::PowerOf2(n) => scaled >> (n & 0x7f),
        }
    }
}

impl Default for TsResolution {
    fn default() -> TsResolution {
        TsResolution::MICROS
    }
}

/// A capture interface: the single implicit one of a pcap file, or a pcapng Interface
/// Description Block.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Interface {
    /// The link-layer header type of its packets.
    pub link_type: LinkType,
    /// The snapshot length as stored in the file (0 means "no limit" in pcapng).
    pub snaplen: u32,
    /// The timestamp resolution.
    pub tsresol: TsResolution,
    /// Seconds added to every timestamp (`if_tsoffset`; 0 for pcap).
    pub tsoffset: i64,
    /// The interface name (`if_name`), if the file gives one; invalid UTF-8 is replaced and only
    /// the first 256 bytes are kept.
    pub name: Option<String>,
}

impl Interface {
    /// An interface with the given link type and snapshot length, microsecond timestamps, no
    /// offset and no name.
    pub fn new(link_type: LinkType, snaplen: u32) -> Interface {
        Interface {
            link_type,
            snaplen,
            tsresol: TsResolution::MICROS,
            tsoffset: 0,
            name: None,
        }
    }
}

/// The format of a capture file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// A pcap file.
    #[non_exhaustive]
    Pcap {
        /// The byte order of the file.
        byte_order: ByteOrder,
        /// The timestamp resolution.
        precision: Precision,
        /// The major version from the file header (2, or 543 for DG/UX files).
        version_major: u16,
        /// The minor version from the file header (usually 4).
        version_minor: u16,
        /// Whether this is the "modified" (Kuznetzov) format, magic `0xa1b2cd34`, whose records
        /// have 8 more header bytes.
        modified: bool,
    },
    /// A pcapng file.
    #[non_exhaustive]
    Pcapng {
        /// The byte order of the current section.
        byte_order: ByteOrder,
    },
}

/// Where a packet lies in the reader's buffer, and its metadata.
pub(crate) struct Meta {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) wire_len: u32,
    pub(crate) timestamp: Timestamp,
    pub(crate) link_type: LinkType,
    pub(crate) interface: u32,
}

enum Kind {
    Pcap(PcapState),
    Pcapng(NgState),
}

/// A streaming reader of pcap and pcapng captures.
///
/// See the [module documentation](crate) for the robustness contract: every good packet is
/// delivered, then at most one error, then nothing.
///
/// ```
/// use netsift_capture::{CaptureReader, LinkType, Packet, PcapWriter, Precision, Timestamp};
///
/// # fn main() -> Result<(), netsift_capture::Error> {
/// let mut file = Vec::new();
/// let mut writer = PcapWriter::new(&mut file, LinkType::RAW, 65535, Precision::Nano)?;
/// let packet = Packet::new(vec![0x45, 0, 0, 20], Timestamp::new(1, 2), LinkType::RAW);
/// writer.write_packet(&packet.as_ref())?;
/// writer.flush()?;
/// drop(writer);
///
/// let mut reader = CaptureReader::new(&file[..])?;
/// assert_eq!(reader.link_type(), Some(LinkType::RAW));
/// let got = reader.next_packet().expect("one packet")?;
/// assert_eq!(got, packet.as_ref());
/// assert!(reader.next_packet().is_none());
/// # Ok(())
/// # }
/// ```
pub struct CaptureReader<R> {
    src: Source<R>,
    buf: Vec<u8>,
    kind: Kind,
    done: bool,
}

impl CaptureReader<File> {
    /// Opens the capture file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<CaptureReader<File>, Error> {
        let path = path.as_ref();
        let file = File::open(path)
            .map_err(|e| Error::io(None, format!("capture file {}", path.display()), e))?;
        CaptureReader::new(file)
    }
}

impl<R: Read> CaptureReader<R> {
    /// Starts reading a capture from `reader`: reads the file header (for pcapng, the first
    /// section header block and the blocks up to the first interface description block) and
    /// chooses the format from the magic number.
    pub fn new(reader: R) -> Result<CaptureReader<R>, Error> {
        let mut src = Source::new(reader);
        let mut magic = [0u8; 4];
        let got = src
            .read_full(&mut magic)
            .map_err(|e| Error::io(Some(0), "capture file header", e))?;
        if got < 4 {
            return Err(Error::new(
                ErrorKind::Truncated,
                Some(0),
                "capture file header",
                format!("the magic number needs 4 bytes, file ends after {got}"),
            ));
        }
        let mut buf = Vec::new();
        let kind = if magic == crate::pcapng::SHB_MAGIC_BYTES {
            Kind::Pcapng(NgState::open(&mut src, &mut buf)?)
        } else if let Some(info) = crate::pcap::magic_info(magic) {
            Kind::Pcap(PcapState::open(&mut src, info)?)
        } else {
            return Err(Error::new(
                ErrorKind::BadMagic,
                Some(0),
                "capture file",
                format!(
                    "magic number 0x{:08x} is neither pcap nor pcapng",
                    u32::from_be_bytes(magic)
                ),
            ));
        };
        Ok(CaptureReader {
            src,
            buf,
            kind,
            done: false,
        })
    }

    /// For a pcap file, the header of the record last read as it is in the file (16 bytes, or
    /// 24 in Kuznetzov's format), also when reading its data failed; `None` for pcapng, before
    /// the first record, at the end and after a cut header. Programs that hand out raw record
    /// fields (netsift's libpcap) read it here.
    pub fn last_record_header(&self) -> Option<&[u8]> {
        match &self.kind {
            Kind::Pcap(state) => state.last_header(),
            Kind::Pcapng(_) => None,
        }
    }

    /// Reads the next packet into the internal buffer and lends it out.
    ///
    /// Returns `None` at the end of the capture, and forever after an error.
    pub fn next_packet(&mut self) -> Option<Result<PacketRef<'_>, Error>> {
        self.next_packet_with_header().0
    }

    /// [`CaptureReader::next_packet`], and for a pcap file the header of the record read, as
    /// in the file (see [`CaptureReader::last_record_header`]): also when its data could not be
    /// read.
    pub fn next_packet_with_header(
        &mut self,
    ) -> (Option<Result<PacketRef<'_>, Error>>, Option<&[u8]>) {
        if self.done {
            return (None, None);
        }
        let result = match &mut self.kind {
            Kind::Pcap(state) => state.next(&mut self.src, &mut self.buf),
            Kind::Pcapng(state) => state.next(&mut self.src, &mut self.buf),
        };
        let header = match &self.kind {
            Kind::Pcap(state) => state.last_header(),
            Kind::Pcapng(_) => None,
        };
        let packet = match result {
            Ok(Some(meta)) => {
                // `get` keeps the no-panic promise even if a range were ever wrong.
                match self.buf.get(meta.start..meta.end) {
                    Some(data) => Some(Ok(PacketRef {
                        data,
                        wire_len: meta.wire_len,
                        timestamp: meta.timestamp,
                        link_type: meta.link_type,
                        interface: meta.interface,
                    })),
                    None => {
                        self.done = true;
                        Some(Err(Error::corrupt(
                            self.src.pos(),
                            "capture",
                            "internal error: packet range outside the buffer",
                        )))
                    }
                }
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        };
        (packet, header)
    }

    /// An iterator of owned packets that borrows the reader; the reader can be used again
    /// afterwards.
    pub fn packets(&mut self) -> Packets<'_, R> {
        Packets { reader: self }
    }
}

impl<R> CaptureReader<R> {
    /// The file format, with the byte order of the current pcapng section.
    pub fn format(&self) -> Format {
        match &self.kind {
            Kind::Pcap(state) => state.format(),
            Kind::Pcapng(state) => Format::Pcapng {
                byte_order: state.byte_order,
            },
        }
    }

    /// The interfaces of a pcap file (always one) or of the current pcapng section, in id order.
    ///
    /// For pcapng this is the list seen so far: it grows as interface description blocks are
    /// read, and a new section header block clears it. [`PacketRef::interface`] indexes it.
    pub fn interfaces(&self) -> &[Interface] {
        match &self.kind {
            Kind::Pcap(state) => state.interfaces(),
            Kind::Pcapng(state) => &state.interfaces,
        }
    }

    /// The link type of the pcap file, or of the first interface of the current pcapng section.
    ///
    /// `None` only for a pcapng file with no interface description block before its first packet
    /// block or its end.
    pub fn link_type(&self) -> Option<LinkType> {
        self.interfaces().first().map(|i| i.link_type)
    }

    /// The snapshot length from the pcap file header, or of the first interface of the current
    /// pcapng section; `None` when [`CaptureReader::link_type`] is `None`.
    pub fn snaplen(&self) -> Option<u32> {
        self.interfaces().first().map(|i| i.snaplen)
    }

    /// The number of bytes consumed from the input so far. Right after a packet was returned,
    /// this is the offset just past its record (pcap) or block (pcapng).
    pub fn position(&self) -> u64 {
        self.src.pos()
    }

    /// The underlying reader.
    pub fn get_ref(&self) -> &R {
        self.src.get_ref()
    }

    /// Gives back the underlying reader. Bytes already read ahead into the internal buffer are
    /// lost.
    pub fn into_inner(self) -> R {
        self.src.into_inner()
    }
}

impl<R> fmt::Debug for CaptureReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureReader")
            .field("format", &self.format())
            .field("interfaces", &self.interfaces())
            .field("position", &self.position())
            .field("done", &self.done)
            .finish()
    }
}

/// Iterator of owned packets borrowing a [`CaptureReader`]; see [`CaptureReader::packets`].
pub struct Packets<'r, R> {
    reader: &'r mut CaptureReader<R>,
}

impl<R: Read> Iterator for Packets<'_, R> {
    type Item = Result<Packet, Error>;

    fn next(&mut self) -> Option<Result<Packet, Error>> {
        self.reader.next_packet().map(|r| r.map(|p| p.to_owned()))
    }
}

impl<R: Read> std::iter::FusedIterator for Packets<'_, R> {}

/// Iterator of owned packets that owns its [`CaptureReader`]; see the [`IntoIterator`]
/// implementation of the reader.
pub struct IntoPackets<R> {
    reader: CaptureReader<R>,
}

impl<R> IntoPackets<R> {
    /// The reader, for its format and interfaces.
    pub fn reader(&self) -> &CaptureReader<R> {
        &self.reader
    }
}

impl<R: Read> Iterator for IntoPackets<R> {
    type Item = Result<Packet, Error>;

    fn next(&mut self) -> Option<Result<Packet, Error>> {
        self.reader.next_packet().map(|r| r.map(|p| p.to_owned()))
    }
}

impl<R: Read> std::iter::FusedIterator for IntoPackets<R> {}

impl<R: Read> IntoIterator for CaptureReader<R> {
    type Item = Result<Packet, Error>;
    type IntoIter = IntoPackets<R>;

    /// Turns the reader into an iterator of owned packets.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), netsift_capture::Error> {
    /// for packet in netsift_capture::CaptureReader::open("trace.pcap")? {
    ///     println!("{} bytes", packet?.data.len());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    fn into_iter(self) -> IntoPackets<R> {
        IntoPackets { reader: self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsresol_option_byte() {
        assert_eq!(
            TsResolution::from_option_byte(6),
            TsResolution::PowerOf10(6)
        );
        assert_eq!(
            TsResolution::from_option_byte(0x94),
            TsResolution::PowerOf2(20)
        );
        for b in 0..=255u8 {
            assert_eq!(TsResolution::from_option_byte(b).to_option_byte(), b);
        }
        assert_eq!(TsResolution::default(), TsResolution::MICROS);
    }

    #[test]
    fn tsresol_conversion_is_exact() {
        let max = u64::MAX;
        assert_eq!(
            TsResolution::PowerOf10(0).units_to_nanos(max),
            max as u128 * 1_000_000_000
        );
        assert_eq!(TsResolution::NANOS.units_to_nanos(max), max as u128);
        assert_eq!(
            TsResolution::PowerOf10(10).units_to_nanos(19),
            1,
            "rounds down"
        );
        assert_eq!(TsResolution::PowerOf10(127).units_to_nanos(max), 0);
        assert_eq!(TsResolution::PowerOf10(38).units_to_nanos(max), 0);
        assert_eq!(TsResolution::PowerOf2(0).units_to_nanos(3), 3_000_000_000);
        // 2^-30 s units: 2^30 units = 1 s; one unit = 0.93 ns.
        assert_eq!(
            TsResolution::PowerOf2(30).units_to_nanos(1 << 30),
            1_000_000_000
        );
        assert_eq!(TsResolution::PowerOf2(30).units_to_nanos(1), 0);
        assert_eq!(TsResolution::PowerOf2(30).units_to_nanos(3), 2);
        assert_eq!(TsResolution::PowerOf2(127).units_to_nanos(max), 0);
        // 2^-64: u64::MAX units is just under one second.
        assert_eq!(TsResolution::PowerOf2(64).units_to_nanos(max), 999_999_999);
    }

    #[test]
    fn byte_order_reads() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(ByteOrder::Little.u16(&b, 0), 0x0201);
        assert_eq!(ByteOrder::Big.u32(&b, 4), 0x05060708);
        assert_eq!(ByteOrder::Big.i64(&b, 0), 0x0102030405060708);
        assert_eq!(
            ByteOrder::Little.u32(&b, 6),
            0,
            "out of range reads give zero"
        );
    }

    #[test]
    fn open_reports_the_path() {
        let e = CaptureReader::open("/nonexistent/netsift.pcap").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(
            e.to_string()
                .starts_with("I/O error on capture file /nonexistent/netsift.pcap: "),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn empty_and_short_inputs() {
        let e = CaptureReader::new(&[][..]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Truncated);
        assert_eq!(
            e.to_string(),
            "truncated capture file header at offset 0: the magic number needs 4 bytes, file ends after 0"
        );
        let e = CaptureReader::new(&b"\x7fELF\x02\x01"[..]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadMagic);
        assert_eq!(
            e.to_string(),
            "unrecognized capture file at offset 0: magic number 0x7f454c46 is neither pcap nor pcapng"
        );
    }
}
