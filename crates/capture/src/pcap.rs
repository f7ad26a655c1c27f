//! The classic pcap format: reading (inside [`CaptureReader`](crate::CaptureReader)) and
//! [`PcapWriter`].
//!
//! A pcap file is a 24-byte header (magic, version, time zone, significant figures, snapshot
//! length, link type) followed by records of a 16-byte header (seconds, microseconds or
//! nanoseconds, captured length, wire length) and the captured bytes. The header's byte order
//! tells the byte order of every field.
//!
//! Reading follows libpcap (`sf-pcap.c`) where files are odd:
//!
//! - versions 2.0 to 2.2 (and DG/UX's 543.0) store the two lengths in the other order, and 2.3
//!   files may do so too (swapped back when the captured length is larger than the wire length);
//! - only the low 16 bits of the link-type field are the link type (`LT_LINKTYPE`); the upper
//!   bits carry FCS information and are ignored;
//! - a record whose captured length exceeds the header's snapshot length is cut to the snapshot
//!   length, the rest of its bytes skipped (a snapshot length of 0 means no limit);
//! - the "modified" format of Alexey Kuznetzov's patches (magic `0xa1b2cd34`) has 24-byte record
//!   headers, and for Ethernet its snapshot length is 14 bytes larger than the header says.
//!
//! Unlike libpcap, captured lengths up to [`MAX_PACKET_LEN`] are accepted whatever the link type
//! (libpcap stops at 256 KiB for most link types). Versions are libpcap 1.10.3's: 2.0 to 2.4 and
//! 543.0 (DG/UX tcpdump); anything else is refused, as libpcap refuses it.

use std::io::{Read, Write};

use crate::io::Source;
use crate::reader::{ByteOrder, Format, Interface, Meta, Precision, TsResolution};
use crate::{Error, ErrorKind, LinkType, MAX_PACKET_LEN, PacketRef, Timestamp};

const MAGIC_MICRO: u32 = 0xa1b2_c3d4;
const MAGIC_NANO: u32 = 0xa1b2_3c4d;
const MAGIC_MODIFIED: u32 = 0xa1b2_cd34;

const FILE_HEADER_LEN: usize = 24;
const RECORD_HEADER_LEN: usize = 16;
const MODIFIED_RECORD_HEADER_LEN: usize = 24;

/// What the magic number says about a pcap file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MagicInfo {
    byte_order: ByteOrder,
    precision: Precision,
    modified: bool,
}

/// Recognizes a pcap magic number in either byte order.
pub(crate) fn magic_info(magic: [u8; 4]) -> Option<MagicInfo> {
    let classify = |value: u32| match value {
        MAGIC_MICRO => Some((Precision::Micro, false)),
        MAGIC_NANO => Some((Precision::Nano, false)),
        MAGIC_MODIFIED => Some((Precision::Micro, true)),
        _ => None,
    };
    let (byte_order, (precision, modified)) =
        if let Some(found) = classify(u32::from_le_bytes(magic)) {
            (ByteOrder::Little, found)
        } else {
            (ByteOrder::Big, classify(u32::from_be_bytes(magic))?)
        };
    Some(MagicInfo {
        byte_order,
        precision,
        modified,
    })
}

/// Whether the captured and wire lengths of records are stored in the old order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LengthOrder {
    Normal,
    Swapped,
    /// Version 2.3: swapped only if the captured length is larger than the wire length.
    MaybeSwapped,
}

/// The state of a pcap file being read.
pub(crate) struct PcapState {
    info: MagicInfo,
    version: (u16, u16),
    lengths: LengthOrder,
    /// The most bytes of one record that are kept.
    keep_limit: u32,
    interface: [Interface; 1],
    /// The header of the record being read, as it is in the file (its length: 0 until a whole
    /// header was read).
    last_header: [u8; MODIFIED_RECORD_HEADER_LEN],
    last_header_len: usize,
}

impl PcapState {
    /// Reads the rest of the file header; the 4-byte magic number has been consumed already.
    pub(crate) fn open<R: Read>(src: &mut Source<R>, info: MagicInfo) -> Result<PcapState, Error> {
        const WHAT: &str = "pcap file header";
        let mut h = [0u8; FILE_HEADER_LEN - 4];
        let got = src
            .read_full(&mut h)
            .map_err(|e| Error::io(Some(0), WHAT, e))?;
        if got < h.len() {
            return Err(Error::new(
                ErrorKind::Truncated,
                Some(0),
                WHAT,
                format!(
                    "the header needs {FILE_HEADER_LEN} bytes, file ends after {}",
                    got + 4
                ),
            ));
        }
        let bo = info.byte_order;
        let major = bo.u16(&h, 0);
        let minor = bo.u16(&h, 2);
        let snaplen = bo.u32(&h, 12);
        let network = bo.u32(&h, 16);
        let lengths = match (major, minor) {
            (2, 0..=2) => LengthOrder::Swapped,
            (2, 3) => LengthOrder::MaybeSwapped,
            (2, 4) => LengthOrder::Normal,
            (543, 0) => LengthOrder::Swapped,
            _ => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    Some(0),
                    WHAT,
                    format!(
                        "version {major}.{minor} is not supported (libpcap reads 2.0 to 2.4 and \
                         543.0)"
                    ),
                ));
            }
        };
        // LT_LINKTYPE: the upper 16 bits hold FCS information.
        let link_type = LinkType(network & 0xffff);
        let mut keep_limit = if snaplen == 0 || snaplen > MAX_PACKET_LEN {
            MAX_PACKET_LEN
        } else {
            snaplen
        };
        if info.modified && link_type == LinkType::ETHERNET {
            // As libpcap: the capture may have been done in cooked mode, with a fake 14-byte
            // Ethernet header added after the snapshot length was applied.
            keep_limit = keep_limit.saturating_add(14).min(MAX_PACKET_LEN);
        }
        let tsresol = match info.precision {
            Precision::Micro => TsResolution::MICROS,
            Precision::Nano => TsResolution::NANOS,
        };
        Ok(PcapState {
            info,
            version: (major, minor),
            lengths,
            keep_limit,
            interface: [Interface {
                link_type,
                snaplen,
                tsresol,
                tsoffset: 0,
                name: None,
            }],
            last_header: [0; MODIFIED_RECORD_HEADER_LEN],
            last_header_len: 0,
        })
    }

    /// The header of the record last read (also when reading its data failed), as in the
    /// file; `None` before the first or after a cut one.
    pub(crate) fn last_header(&self) -> Option<&[u8]> {
        (self.last_header_len > 0).then(|| &self.last_header[..self.last_header_len])
    }

    pub(crate) fn format(&self) -> Format {
        Format::Pcap {
            byte_order: self.info.byte_order,
            precision: self.info.precision,
            version_major: self.version.0,
            version_minor: self.version.1,
            modified: self.info.modified,
        }
    }

    pub(crate) fn interfaces(&self) -> &[Interface] {
        &self.interface
    }

    /// Reads the next record into `buf`.
    pub(crate) fn next<R: Read>(
        &mut self,
        src: &mut Source<R>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Meta>, Error> {
        const WHAT: &str = "pcap record";
        let start = src.pos();
        let header_len = if self.info.modified {
            MODIFIED_RECORD_HEADER_LEN
        } else {
            RECORD_HEADER_LEN
        };
        self.last_header_len = 0;
        let mut h = [0u8; MODIFIED_RECORD_HEADER_LEN];
        let got = src
            .read_full(&mut h[..header_len])
            .map_err(|e| Error::io(Some(start), WHAT, e))?;
        if got == 0 {
            return Ok(None);
        }
        if got < header_len {
            return Err(Error::new(
                ErrorKind::Truncated,
                Some(start),
                WHAT,
                format!("the record header needs {header_len} bytes, file ends after {got}"),
            ));
        }
        self.last_header = h;
        self.last_header_len = header_len;
        let bo = self.info.byte_order;
        let secs = bo.u32(&h, 0);
        let frac = bo.u32(&h, 4);
        let mut caplen = bo.u32(&h, 8);
        let mut wire_len = bo.u32(&h, 12);
        let swap = match self.lengths {
            LengthOrder::Normal => false,
            LengthOrder::Swapped => true,
            LengthOrder::MaybeSwapped => caplen > wire_len,
        };
        if swap {
            std::mem::swap(&mut caplen, &mut wire_len);
        }
        if caplen > MAX_PACKET_LEN {
            return Err(Error::corrupt(
                start,
                WHAT,
                format!("captured length {caplen} exceeds the limit of {MAX_PACKET_LEN} bytes"),
            ));
        }
        let keep = caplen.min(self.keep_limit);
        buf.clear();
        let got = src
            .append(buf, keep as usize)
            .map_err(|e| Error::io(Some(start), WHAT, e))?;
        if got < keep as usize {
            return Err(Error::truncated(start, WHAT, caplen.into(), got as u64));
        }
        let discard = u64::from(caplen - keep);
        if discard > 0 {
            let skipped = src
                .skip(discard)
                .map_err(|e| Error::io(Some(start), WHAT, e))?;
            if skipped < discard {
                return Err(Error::truncated(
                    start,
                    WHAT,
                    caplen.into(),
                    u64::from(keep) + skipped,
                ));
            }
        }
        // PERF: the usual fraction (below a second) without 128-bit arithmetic.
        let timestamp = match self.info.precision {
            Precision::Micro if frac < 1_000_000 => Timestamp::new(i64::from(secs), frac * 1000),
            Precision::Nano if frac < 1_000_000_000 => Timestamp::new(i64::from(secs), frac),
            Precision::Micro => {
                Timestamp::from_nanos(i128::from(secs) * 1_000_000_000 + i128::from(frac) * 1000)
            }
            Precision::Nano => {
                Timestamp::from_nanos(i128::from(secs) * 1_000_000_000 + i128::from(frac))
            }
        };
        Ok(Some(Meta {
            start: 0,
            end: keep as usize,
            wire_len,
            timestamp,
            link_type: self.interface[0].link_type,
            interface: 0,
        }))
    }
}

/// Writes a pcap file.
///
/// The file is written in little-endian byte order, version 2.4, with the microsecond or
/// nanosecond magic number. Every write goes straight to the underlying writer (one `write_all`
/// per packet); wrap files in a [`std::io::BufWriter`].
///
/// ```
/// use netsift_capture::{LinkType, PacketRef, PcapWriter, Precision, Timestamp};
///
/// # fn main() -> Result<(), netsift_capture::Error> {
/// let mut writer = PcapWriter::new(Vec::new(), LinkType::ETHERNET, 96, Precision::Micro)?;
/// let frame = [0u8; 128];
/// writer.write_packet(&PacketRef::new(&frame, Timestamp::new(10, 5_000), LinkType::ETHERNET))?;
/// let file = writer.into_inner()?;
/// assert_eq!(file.len(), 24 + 16 + 96); // cut to the snapshot length
/// # Ok(())
/// # }
/// ```
pub struct PcapWriter<W: Write> {
    out: W,
    link_type: LinkType,
    snaplen: u32,
    precision: Precision,
    scratch: Vec<u8>,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header and returns the writer.
    ///
    /// `snaplen` is stored in the header and packets are cut to it; 0 means no limit (libpcap
    /// reads 0 as its largest snapshot length).
    pub fn new(
        out: W,
        link_type: LinkType,
        snaplen: u32,
        precision: Precision,
    ) -> Result<PcapWriter<W>, Error> {
        let mut writer = PcapWriter {
            out,
            link_type,
            snaplen,
            precision,
            scratch: Vec::with_capacity(2048),
        };
        let magic = match precision {
            Precision::Micro => MAGIC_MICRO,
            Precision::Nano => MAGIC_NANO,
        };
        let s = &mut writer.scratch;
        s.extend_from_slice(&magic.to_le_bytes());
        s.extend_from_slice(&2u16.to_le_bytes());
        s.extend_from_slice(&4u16.to_le_bytes());
        s.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        s.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        s.extend_from_slice(&snaplen.to_le_bytes());
        s.extend_from_slice(&link_type.0.to_le_bytes());
        writer.write_scratch()?;
        Ok(writer)
    }

    /// A writer that continues a pcap file whose header, for this link type, snapshot length
    /// and precision in little-endian order, is already written (libpcap's
    /// `pcap_dump_open_append`): it writes no header.
    pub fn append(
        out: W,
        link_type: LinkType,
        snaplen: u32,
        precision: Precision,
    ) -> PcapWriter<W> {
        PcapWriter {
            out,
            link_type,
            snaplen,
            precision,
            scratch: Vec::with_capacity(2048),
        }
    }

    /// Writes one packet, cut to the snapshot length; its wire length is kept.
    ///
    /// Fails with [`ErrorKind::InvalidInput`] if the packet's link type is not the file's, if its
    /// timestamp is before 1970 or after 2106 (the format has unsigned 32-bit seconds), or if
    /// more than [`MAX_PACKET_LEN`] bytes would be written.
    pub fn write_packet(&mut self, packet: &PacketRef<'_>) -> Result<(), Error> {
        const WHAT: &str = "pcap record";
        if packet.link_type != self.link_type {
            return Err(Error::invalid_input(
                WHAT,
                format!(
                    "packet has link type {}, the file has {}",
                    packet.link_type.0, self.link_type.0
                ),
            ));
        }
        let data = cut(packet.data, self.snaplen);
        if data.len() > MAX_PACKET_LEN as usize {
            return Err(Error::invalid_input(
                WHAT,
                format!(
                    "captured length {} exceeds the limit of {MAX_PACKET_LEN} bytes",
                    data.len()
                ),
            ));
        }
        let ts = packet.timestamp;
        let secs = u32::try_from(ts.secs()).map_err(|_| {
            Error::invalid_input(
                WHAT,
                format!("timestamp {ts} is outside the range of pcap (0 to 4294967295 seconds)"),
            )
        })?;
        let frac = match self.precision {
            Precision::Micro => ts.subsec_micros(),
            Precision::Nano => ts.nanos(),
        };
        let caplen = data.len() as u32; // bounded by MAX_PACKET_LEN above
        let s = &mut self.scratch;
        s.clear();
        s.extend_from_slice(&secs.to_le_bytes());
        s.extend_from_slice(&frac.to_le_bytes());
        s.extend_from_slice(&caplen.to_le_bytes());
        s.extend_from_slice(&packet.wire_len.to_le_bytes());
        s.extend_from_slice(data);
        self.write_scratch()
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.out
            .flush()
            .map_err(|e| Error::io(None, "pcap file", e))
    }

    /// Flushes and gives back the underlying writer.
    pub fn into_inner(mut self) -> Result<W, Error> {
        self.flush()?;
        Ok(self.out)
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The underlying writer, mutably. Writing to it directly corrupts the file.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// The link type of the file.
    pub fn link_type(&self) -> LinkType {
        self.link_type
    }

    /// The snapshot length of the file (0: no limit).
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The timestamp precision of the file.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    fn write_scratch(&mut self) -> Result<(), Error> {
        self.out
            .write_all(&self.scratch)
            .map_err(|e| Error::io(None, "pcap file", e))
    }
}

impl<W: Write> std::fmt::Debug for PcapWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapWriter")
            .field("link_type", &self.link_type)
            .field("snaplen", &self.snaplen)
            .field("precision", &self.precision)
            .finish_non_exhaustive()
    }
}

/// `data` cut to `snaplen` bytes (0: no limit).
pub(crate) fn cut(data: &[u8], snaplen: u32) -> &[u8] {
    if snaplen == 0 {
        return data;
    }
    let limit = usize::try_from(snaplen).unwrap_or(usize::MAX);
    &data[..data.len().min(limit)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CaptureReader;

    /// A pcap file header.
    fn header(
        bo: ByteOrder,
        magic: u32,
        major: u16,
        minor: u16,
        snaplen: u32,
        net: u32,
    ) -> Vec<u8> {
        let mut v = Vec::new();
        match bo {
            ByteOrder::Little => {
                v.extend(magic.to_le_bytes());
                v.extend(major.to_le_bytes());
                v.extend(minor.to_le_bytes());
                v.extend([0; 8]);
                v.extend(snaplen.to_le_bytes());
                v.extend(net.to_le_bytes());
            }
            ByteOrder::Big => {
                v.extend(magic.to_be_bytes());
                v.extend(major.to_be_bytes());
                v.extend(minor.to_be_bytes());
                v.extend([0; 8]);
                v.extend(snaplen.to_be_bytes());
                v.extend(net.to_be_bytes());
            }
        }
        v
    }

    fn record(bo: ByteOrder, fields: [u32; 4], data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        for f in fields {
            match bo {
                ByteOrder::Little => v.extend(f.to_le_bytes()),
                ByteOrder::Big => v.extend(f.to_be_bytes()),
            }
        }
        v.extend_from_slice(data);
        v
    }

    fn read_all(file: &[u8]) -> (Vec<crate::Packet>, Option<Error>) {
        let mut r = match CaptureReader::new(file) {
            Ok(r) => r,
            Err(e) => return (Vec::new(), Some(e)),
        };
        let mut packets = Vec::new();
        while let Some(p) = r.next_packet() {
            match p {
                Ok(p) => packets.push(p.to_owned()),
                Err(e) => return (packets, Some(e)),
            }
        }
        (packets, None)
    }

    #[test]
    fn both_byte_orders_and_precisions() {
        for bo in [ByteOrder::Little, ByteOrder::Big] {
            for (magic, precision, frac, nanos) in [
                (MAGIC_MICRO, Precision::Micro, 250_000, 250_000_000),
                (MAGIC_NANO, Precision::Nano, 250_000, 250_000),
            ] {
                let mut f = header(bo, magic, 2, 4, 65535, 1);
                f.extend(record(bo, [100, frac, 3, 60], &[1, 2, 3]));
                f.extend(record(bo, [101, 0, 0, 0], &[]));
                let r = CaptureReader::new(&f[..]).unwrap();
                assert_eq!(
                    r.format(),
                    Format::Pcap {
                        byte_order: bo,
                        precision,
                        version_major: 2,
                        version_minor: 4,
                        modified: false
                    }
                );
                assert_eq!(r.link_type(), Some(LinkType::ETHERNET));
                assert_eq!(r.snaplen(), Some(65535));
                let (p, err) = read_all(&f);
                assert!(err.is_none());
                assert_eq!(p.len(), 2);
                assert_eq!(p[0].data, [1, 2, 3]);
                assert_eq!(p[0].wire_len, 60);
                assert_eq!(p[0].timestamp, Timestamp::new(100, nanos));
                assert_eq!(p[1].timestamp, Timestamp::new(101, 0));
                assert!(p[1].data.is_empty());
            }
        }
    }

    #[test]
    fn link_type_upper_bits_are_fcs_info() {
        let f = header(ByteOrder::Little, MAGIC_MICRO, 2, 4, 0, 0x1000_0001);
        let r = CaptureReader::new(&f[..]).unwrap();
        assert_eq!(r.link_type(), Some(LinkType::ETHERNET));
    }

    #[test]
    fn caplen_above_snaplen_is_cut_and_skipped() {
        let bo = ByteOrder::Little;
        let mut f = header(bo, MAGIC_MICRO, 2, 4, 4, 1);
        f.extend(record(bo, [1, 0, 6, 100], &[1, 2, 3, 4, 5, 6]));
        f.extend(record(bo, [2, 0, 2, 2], &[7, 8]));
        let (p, err) = read_all(&f);
        assert!(err.is_none());
        assert_eq!(p[0].data, [1, 2, 3, 4]);
        assert_eq!(p[0].wire_len, 100);
        assert_eq!(p[1].data, [7, 8]);
    }

    #[test]
    fn caplen_above_wire_len_is_kept() {
        let bo = ByteOrder::Big;
        let mut f = header(bo, MAGIC_MICRO, 2, 4, 0, 1);
        f.extend(record(bo, [1, 0, 4, 2], &[1, 2, 3, 4]));
        let (p, err) = read_all(&f);
        assert!(err.is_none());
        assert_eq!((p[0].data.len(), p[0].wire_len), (4, 2));
    }

    #[test]
    fn old_versions_swap_lengths() {
        let bo = ByteOrder::Little;
        // 2.2: always swapped (wire length first).
        let mut f = header(bo, MAGIC_MICRO, 2, 2, 0, 1);
        f.extend(record(bo, [1, 0, 60, 2], &[1, 2]));
        let (p, _) = read_all(&f);
        assert_eq!((p[0].data.len(), p[0].wire_len), (2, 60));
        // 2.3: swapped only when caplen > len.
        let mut f = header(bo, MAGIC_MICRO, 2, 3, 0, 1);
        f.extend(record(bo, [1, 0, 60, 2], &[1, 2]));
        f.extend(record(bo, [1, 0, 2, 60], &[3, 4]));
        let (p, err) = read_all(&f);
        assert!(err.is_none());
        assert_eq!((p[0].data.len(), p[0].wire_len), (2, 60));
        assert_eq!((p[1].data.len(), p[1].wire_len), (2, 60));
    }

    #[test]
    fn modified_format_has_longer_records() {
        let bo = ByteOrder::Little;
        let mut f = header(bo, MAGIC_MODIFIED, 2, 4, 2, 1);
        let mut rec = record(bo, [5, 7, 3, 3], &[]);
        rec.extend([0u8; 8]); // ifindex, protocol, pkt_type, pad
        rec.extend([9, 8, 7]);
        f.extend(rec);
        let r = CaptureReader::new(&f[..]).unwrap();
        assert!(matches!(r.format(), Format::Pcap { modified: true, .. }));
        let (p, err) = read_all(&f);
        assert!(err.is_none(), "{err:?}");
        // The Ethernet snapshot length is 2 + 14, so nothing is cut.
        assert_eq!(p[0].data, [9, 8, 7]);
        assert_eq!(p[0].timestamp, Timestamp::new(5, 7_000));
    }

    #[test]
    fn errors_have_exact_messages() {
        let bo = ByteOrder::Little;
        let e = CaptureReader::new(&header(bo, MAGIC_MICRO, 2, 4, 0, 1)[..10]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "truncated pcap file header at offset 0: the header needs 24 bytes, file ends after 10"
        );
        let e = CaptureReader::new(&header(bo, MAGIC_MICRO, 3, 0, 0, 1)[..]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert_eq!(
            e.to_string(),
            "unsupported pcap file header at offset 0: version 3.0 is not supported (libpcap \
             reads 2.0 to 2.4 and 543.0)"
        );
        // libpcap 1.10.3 refuses minor versions past 4 and majors below 2.
        for (major, minor) in [(2, 5), (2, 127), (1, 0), (0, 0), (543, 1)] {
            let e =
                CaptureReader::new(&header(bo, MAGIC_MICRO, major, minor, 0, 1)[..]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{major}.{minor}");
        }
        for (major, minor) in [(2, 0), (2, 3), (2, 4), (543, 0)] {
            assert!(
                CaptureReader::new(&header(bo, MAGIC_MICRO, major, minor, 0, 1)[..]).is_ok(),
                "{major}.{minor}"
            );
        }

        let mut f = header(bo, MAGIC_MICRO, 2, 4, 0, 1);
        f.extend(record(bo, [1, 0, 1, 1], &[0]));
        let good = f.clone();
        f.extend(record(bo, [1, 0, 1514, 1514], &[0; 200]));
        let (p, e) = read_all(&f);
        assert_eq!(p.len(), 1);
        let e = e.unwrap();
        assert_eq!(e.kind(), ErrorKind::Truncated);
        assert_eq!(e.offset(), Some(41));
        assert_eq!(
            e.to_string(),
            "truncated pcap record at offset 41: header says 1514 bytes, file ends after 200"
        );

        let mut f = good.clone();
        f.extend([1, 2, 3, 4, 5, 6, 7]);
        let (p, e) = read_all(&f);
        assert_eq!(p.len(), 1);
        assert_eq!(
            e.unwrap().to_string(),
            "truncated pcap record at offset 41: the record header needs 16 bytes, file ends after 7"
        );

        let mut f = good;
        f.extend(record(bo, [1, 0, MAX_PACKET_LEN + 1, 5], &[]));
        let (p, e) = read_all(&f);
        assert_eq!(p.len(), 1);
        let e = e.unwrap();
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        assert_eq!(
            e.to_string(),
            "corrupt pcap record at offset 41: captured length 16777217 exceeds the limit of 16777216 bytes"
        );
    }

    #[test]
    fn truncated_in_skipped_tail() {
        let bo = ByteOrder::Little;
        let mut f = header(bo, MAGIC_MICRO, 2, 4, 2, 1);
        f.extend(record(bo, [1, 0, 10, 10], &[0; 5]));
        let (p, e) = read_all(&f);
        assert!(p.is_empty());
        assert_eq!(
            e.unwrap().to_string(),
            "truncated pcap record at offset 24: header says 10 bytes, file ends after 5"
        );
    }

    #[test]
    fn after_an_error_nothing_more() {
        let bo = ByteOrder::Little;
        let mut f = header(bo, MAGIC_MICRO, 2, 4, 0, 1);
        f.extend([1, 2, 3]);
        let mut r = CaptureReader::new(&f[..]).unwrap();
        assert!(r.next_packet().unwrap().is_err());
        assert!(r.next_packet().is_none());
        assert!(r.next_packet().is_none());
    }

    #[test]
    fn writer_output_is_exact() {
        let mut w = PcapWriter::new(Vec::new(), LinkType::RAW, 3, Precision::Nano).unwrap();
        let data = [0x45u8, 0, 0, 20];
        w.write_packet(&PacketRef {
            data: &data,
            wire_len: 20,
            timestamp: Timestamp::new(0x01020304, 5),
            link_type: LinkType::RAW,
            interface: 0,
        })
        .unwrap();
        let file = w.into_inner().unwrap();
        let mut expect = header(ByteOrder::Little, MAGIC_NANO, 2, 4, 3, 101);
        expect.extend(record(
            ByteOrder::Little,
            [0x01020304, 5, 3, 20],
            &[0x45, 0, 0],
        ));
        assert_eq!(file, expect);
    }

    #[test]
    fn writer_rejects_what_pcap_cannot_hold() {
        let mut w = PcapWriter::new(Vec::new(), LinkType::RAW, 0, Precision::Micro).unwrap();
        let p = PacketRef::new(&[1], Timestamp::new(-1, 0), LinkType::RAW);
        let e = w.write_packet(&p).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            e.to_string(),
            "cannot write pcap record: timestamp -1.000000000 is outside the range of pcap (0 to 4294967295 seconds)"
        );
        let p = PacketRef::new(&[1], Timestamp::new(1 << 32, 0), LinkType::RAW);
        assert!(w.write_packet(&p).is_err());
        let p = PacketRef::new(&[1], Timestamp::ZERO, LinkType::ETHERNET);
        assert_eq!(
            w.write_packet(&p).unwrap_err().to_string(),
            "cannot write pcap record: packet has link type 1, the file has 101"
        );
        assert_eq!(w.into_inner().unwrap().len(), 24, "nothing written");
    }

    #[test]
    fn micro_writer_rounds_down() {
        let mut w = PcapWriter::new(Vec::new(), LinkType::RAW, 0, Precision::Micro).unwrap();
        w.write_packet(&PacketRef::new(
            &[1],
            Timestamp::new(7, 1_999),
            LinkType::RAW,
        ))
        .unwrap();
        let file = w.into_inner().unwrap();
        let (p, e) = read_all(&file);
        assert!(e.is_none());
        assert_eq!(p[0].timestamp, Timestamp::new(7, 1_000));
    }
}
