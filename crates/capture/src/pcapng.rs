//! The pcapng format: reading (inside [`CaptureReader`](crate::CaptureReader)) and
//! [`PcapngWriter`].
//!
//! A pcapng file is a sequence of blocks: `type (4) | total length (4) | body | total length (4)`,
//! the total length a multiple of 4 and at least 12. A Section Header Block (SHB) starts each
//! section, gives its byte order (through the byte-order magic `0x1a2b3c4d`) and clears the
//! interfaces; Interface Description Blocks (IDB) define interfaces 0, 1, ... of the section
//! (link type, snapshot length, options such as `if_tsresol` and `if_tsoffset`); packets come in
//! Enhanced Packet Blocks (EPB), Simple Packet Blocks (SPB, no timestamp, interface 0) and the
//! obsolete Packet Blocks (PB). Every other block type (name resolution, statistics, decryption
//! secrets, custom, ...) is skipped by its length without being stored.
//!
//! The reader checks that every block's trailing length equals its leading length, that packets
//! refer to an interface defined earlier in their section and that packet data fits in its block.
//! It is more lenient than libpcap in that interfaces may have different link types and
//! snapshot lengths, sections may change byte order, and a captured length above the interface's
//! snapshot length is kept (libpcap stops at the first of these).
//!
//! Timestamps are converted exactly: `units × 10⁹ / resolution` in 128-bit integers, plus
//! `if_tsoffset` seconds. Blocks that must be stored (SHB, IDB and packet blocks) may not be
//! larger than [`MAX_PACKET_LEN`] plus 128 KiB for headers and options.

use std::collections::HashMap;
use std::io::{Read, Write};

use crate::io::Source;
use crate::pcap::cut;
use crate::reader::{ByteOrder, Interface, Meta, TsResolution};
use crate::{Error, ErrorKind, LinkType, MAX_PACKET_LEN, PacketRef, Timestamp};

/// The block type of a Section Header Block, which reads the same in both byte orders.
pub(crate) const SHB_MAGIC_BYTES: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

const BT_SHB: u32 = 0x0a0d_0d0a;
const BT_IDB: u32 = 1;
const BT_PB: u32 = 2;
const BT_SPB: u32 = 3;
const BT_EPB: u32 = 6;

const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;

const OPT_ENDOFOPT: u16 = 0;
const OPT_IF_NAME: u16 = 2;
const OPT_IF_TSRESOL: u16 = 9;
const OPT_IF_TSOFFSET: u16 = 14;

/// The largest block that is read into memory.
const MAX_BLOCK_LEN: u32 = MAX_PACKET_LEN + 128 * 1024 + 32;

/// The most interfaces one section may define.
const MAX_INTERFACES: usize = 65_536;

/// The most bytes of an `if_name` option that are kept.
const MAX_NAME_LEN: usize = 256;

/// Minimum total lengths: 12 bytes of framing plus the fixed part of the body.
const MIN_BLOCK_LEN: u32 = 12;

fn block_name(block_type: u32) -> &'static str {
    match block_type {
        BT_SHB => "pcapng section header block",
        BT_IDB => "pcapng interface description block",
        BT_PB => "pcapng packet block",
        BT_SPB => "pcapng simple packet block",
        BT_EPB => "pcapng enhanced packet block",
        _ => "pcapng block",
    }
}

/// The fixed part of the body of the block types that are parsed.
fn fixed_body_len(block_type: u32) -> Option<u32> {
    match block_type {
        BT_SHB => Some(16),
        BT_IDB => Some(8),
        BT_PB | BT_EPB => Some(20),
        BT_SPB => Some(4),
        _ => None,
    }
}

/// A block read into the buffer (`buf[..total length]`, framing included).
#[derive(Clone, Copy, Debug)]
struct Stored {
    start: u64,
    block_type: u32,
    byte_order: ByteOrder,
}

enum Block {
    End,
    Skipped,
    Stored(Stored),
}

/// The state of a pcapng file being read.
pub(crate) struct NgState {
    pub(crate) byte_order: ByteOrder,
    pub(crate) interfaces: Vec<Interface>,
    /// A block read ahead by [`NgState::open`] and not yet processed.
    pending: Option<Stored>,
}

impl NgState {
    /// Reads the first section header block (whose 4-byte type has been consumed) and the blocks
    /// up to the first interface description block or packet block.
    pub(crate) fn open<R: Read>(src: &mut Source<R>, buf: &mut Vec<u8>) -> Result<NgState, Error> {
        let mut state = NgState {
            byte_order: ByteOrder::Little,
            interfaces: Vec::new(),
            pending: None,
        };
        match state.read_block(src, buf, true)? {
            Block::Stored(block) => {
                state.process(block, buf)?;
            }
            // The first block type is SHB_MAGIC_BYTES, which is always stored.
            Block::End | Block::Skipped => {
                return Err(Error::corrupt(0, "pcapng file", "no section header block"));
            }
        }
        // Read ahead so that the link type is known right away.
        while state.interfaces.is_empty() {
            match state.read_block(src, buf, false)? {
                Block::End => break,
                Block::Skipped => {}
                Block::Stored(block) => {
                    if matches!(block.block_type, BT_EPB | BT_SPB | BT_PB) {
                        state.pending = Some(block);
                        break;
                    }
                    state.process(block, buf)?;
                }
            }
        }
        Ok(state)
    }

    /// Reads blocks up to the next packet.
    pub(crate) fn next<R: Read>(
        &mut self,
        src: &mut Source<R>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Meta>, Error> {
        loop {
            let block = match self.pending.take() {
                Some(block) => block,
                None => match self.read_block(src, buf, false)? {
                    Block::End => return Ok(None),
                    Block::Skipped => continue,
                    Block::Stored(block) => block,
                },
            };
            if let Some(meta) = self.process(block, buf)? {
                return Ok(Some(meta));
            }
        }
    }

    /// Reads one block: stores the block types that are parsed, skips the others. `first` says
    /// that the 4-byte block type at offset 0 has been consumed already by format detection.
    fn read_block<R: Read>(
        &mut self,
        src: &mut Source<R>,
        buf: &mut Vec<u8>,
        first: bool,
    ) -> Result<Block, Error> {
        const WHAT: &str = "pcapng block";
        let mut head = [0u8; 12];
        let (start, mut have) = if first {
            head[..4].copy_from_slice(&SHB_MAGIC_BYTES);
            (0, 4)
        } else {
            (src.pos(), 0)
        };
        let io_err = |e| Error::io(Some(start), WHAT, e);
        have += src.read_full(&mut head[have..8]).map_err(io_err)?;
        if have == 0 {
            return Ok(Block::End);
        }
        if have < 8 {
            return Err(Error::new(
                ErrorKind::Truncated,
                Some(start),
                WHAT,
                format!("the block header needs 8 bytes, file ends after {have}"),
            ));
        }
        let byte_order = if head[..4] == SHB_MAGIC_BYTES {
            // The byte order comes from the byte-order magic that follows the length.
            let what = block_name(BT_SHB);
            have += src.read_full(&mut head[8..12]).map_err(io_err)?;
            if have < 12 {
                return Err(Error::new(
                    ErrorKind::Truncated,
                    Some(start),
                    what,
                    format!("the byte-order magic needs 12 bytes, file ends after {have}"),
                ));
            }
            let magic = [head[8], head[9], head[10], head[11]];
            if u32::from_le_bytes(magic) == BYTE_ORDER_MAGIC {
                ByteOrder::Little
            } else if u32::from_be_bytes(magic) == BYTE_ORDER_MAGIC {
                ByteOrder::Big
            } else {
                let kind = if first {
                    ErrorKind::BadMagic
                } else {
                    ErrorKind::Corrupt
                };
                return Err(Error::new(
                    kind,
                    Some(start),
                    what,
                    format!(
                        "byte-order magic 0x{:08x} is not 0x{BYTE_ORDER_MAGIC:08x} in either byte order",
                        u32::from_be_bytes(magic)
                    ),
                ));
            }
        } else {
            self.byte_order
        };
        let block_type = byte_order.u32(&head, 0);
        let total = byte_order.u32(&head, 4);
        let what = block_name(block_type);
        if total < MIN_BLOCK_LEN {
            return Err(Error::corrupt(
                start,
                what,
                format!("block total length {total} is less than the minimum of {MIN_BLOCK_LEN}"),
            ));
        }
        if total % 4 != 0 {
            return Err(Error::corrupt(
                start,
                what,
                format!("block total length {total} is not a multiple of 4"),
            ));
        }
        let Some(fixed) = fixed_body_len(block_type) else {
            return self.skip_block(src, start, total, have);
        };
        let min = MIN_BLOCK_LEN + fixed;
        if total < min {
            return Err(Error::corrupt(
                start,
                what,
                format!("block total length {total} is less than the minimum of {min}"),
            ));
        }
        if total > MAX_BLOCK_LEN {
            return Err(Error::corrupt(
                start,
                what,
                format!("block total length {total} exceeds the limit of {MAX_BLOCK_LEN} bytes"),
            ));
        }
        buf.clear();
        buf.extend_from_slice(&head[..have]);
        let need = total as usize - have;
        let got = src
            .append(buf, need)
            .map_err(|e| Error::io(Some(start), what, e))?;
        if got < need {
            return Err(Error::truncated(
                start,
                what,
                total.into(),
                (have + got) as u64,
            ));
        }
        let trailer = byte_order.u32(buf, total as usize - 4);
        // libpcap 1.10.3 reads the file's first section header block without comparing its
        // trailer (pcap_ng_check_header); every later block's trailer must match.
        if trailer != total && !first {
            return Err(Error::corrupt(
                start,
                what,
                format!(
                    "block total length {total} in the header does not match {trailer} in the trailer"
                ),
            ));
        }
        Ok(Block::Stored(Stored {
            start,
            block_type,
            byte_order,
        }))
    }

    /// Skips the rest of a block that is not parsed, checking its trailer.
    fn skip_block<R: Read>(
        &mut self,
        src: &mut Source<R>,
        start: u64,
        total: u32,
        have: usize,
    ) -> Result<Block, Error> {
        const WHAT: &str = "pcapng block";
        let io_err = |e| Error::io(Some(start), WHAT, e);
        let body = u64::from(total) - 4 - have as u64;
        let skipped = src.skip(body).map_err(io_err)?;
        let mut trailer = [0u8; 4];
        let got = if skipped == body {
            src.read_full(&mut trailer).map_err(io_err)?
        } else {
            0
        };
        if got < 4 {
            return Err(Error::truncated(
                start,
                WHAT,
                total.into(),
                have as u64 + skipped + got as u64,
            ));
        }
        let trailer = self.byte_order.u32(&trailer, 0);
        if trailer != total {
            return Err(Error::corrupt(
                start,
                WHAT,
                format!(
                    "block total length {total} in the header does not match {trailer} in the trailer"
                ),
            ));
        }
        Ok(Block::Skipped)
    }

    /// Interprets a stored block; returns the packet if it is one.
    fn process(&mut self, block: Stored, buf: &[u8]) -> Result<Option<Meta>, Error> {
        let Stored {
            start,
            block_type,
            byte_order: bo,
        } = block;
        let what = block_name(block_type);
        // read_block guarantees 12 + fixed <= buf.len(); `get` keeps this panic-free anyway.
        let body_end = buf.len().saturating_sub(4);
        let body = buf.get(8..body_end).unwrap_or(&[]);
        match block_type {
            BT_SHB => {
                let major = bo.u16(body, 4);
                let minor = bo.u16(body, 6);
                // libpcap 1.10.3 reads versions 1.0 and 1.2 (1.1 never existed in a spec).
                if !(major == 1 && (minor == 0 || minor == 2)) {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        Some(start),
                        what,
                        format!(
                            "version {major}.{minor} is not supported (libpcap reads 1.0 and 1.2)"
                        ),
                    ));
                }
                self.byte_order = bo;
                self.interfaces.clear();
                Ok(None)
            }
            BT_IDB => {
                if self.interfaces.len() >= MAX_INTERFACES {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        Some(start),
                        what,
                        format!("more than {MAX_INTERFACES} interfaces in one section"),
                    ));
                }
                let mut interface =
                    Interface::new(LinkType(u32::from(bo.u16(body, 0))), bo.u32(body, 4));
                parse_idb_options(bo, start, body, &mut interface)?;
                self.interfaces.push(interface);
                Ok(None)
            }
            BT_EPB | BT_PB => {
                let interface = if block_type == BT_EPB {
                    bo.u32(body, 0)
                } else {
                    u32::from(bo.u16(body, 0))
                };
                let units = (u64::from(bo.u32(body, 4)) << 32) | u64::from(bo.u32(body, 8));
                let caplen = bo.u32(body, 12);
                let wire_len = bo.u32(body, 16);
                let room = body.len().saturating_sub(20);
                if caplen as usize > room {
                    return Err(Error::corrupt(
                        start,
                        what,
                        format!(
                            "captured length {caplen} exceeds the {room} bytes of packet data in the block"
                        ),
                    ));
                }
                let iface = self.interface(start, what, interface)?;
                let nanos = iface.tsresol.units_to_nanos(units) as i128;
                let timestamp =
                    Timestamp::from_nanos(nanos + i128::from(iface.tsoffset) * 1_000_000_000);
                Ok(Some(Meta {
                    start: 28,
                    end: 28 + caplen as usize,
                    wire_len,
                    timestamp,
                    link_type: iface.link_type,
                    interface,
                }))
            }
            BT_SPB => {
                let wire_len = bo.u32(body, 0);
                let iface = self.interface(start, what, 0)?;
                let room = body.len().saturating_sub(4);
                let mut caplen = (wire_len as usize).min(room);
                if iface.snaplen != 0 {
                    caplen = caplen.min(iface.snaplen as usize);
                }
                Ok(Some(Meta {
                    start: 12,
                    end: 12 + caplen,
                    wire_len,
                    // No timestamp: libpcap reports the interface's offset alone.
                    timestamp: Timestamp::new(iface.tsoffset, 0),
                    link_type: iface.link_type,
                    interface: 0,
                }))
            }
            _ => Ok(None),
        }
    }

    fn interface(&self, start: u64, what: &'static str, id: u32) -> Result<&Interface, Error> {
        self.interfaces.get(id as usize).ok_or_else(|| {
            Error::corrupt(
                start,
                what,
                format!(
                    "packet refers to interface {id}, but the section defines {} interface(s)",
                    self.interfaces.len()
                ),
            )
        })
    }
}

/// Reads the options of an interface description block (`body` starts after the block length).
fn parse_idb_options(
    bo: ByteOrder,
    start: u64,
    body: &[u8],
    interface: &mut Interface,
) -> Result<(), Error> {
    const WHAT: &str = "pcapng interface description block";
    let mut at = 8;
    let mut saw_tsresol = false;
    let mut saw_tsoffset = false;
    while at + 4 <= body.len() {
        let code = bo.u16(body, at);
        let len = usize::from(bo.u16(body, at + 2));
        let value_at = at + 4;
        let padded = (len + 3) & !3;
        let Some(value) = body.get(value_at..value_at + len) else {
            return Err(Error::corrupt(
                start,
                WHAT,
                format!(
                    "option {code} at block offset {} has length {len}, which runs past the end of the block",
                    at + 8
                ),
            ));
        };
        match code {
            OPT_ENDOFOPT => break,
            OPT_IF_NAME => {
                // Bounded, so that many interfaces cannot hold much memory.
                let value = &value[..value.len().min(MAX_NAME_LEN)];
                let name = String::from_utf8_lossy(value);
                interface.name = Some(name.trim_end_matches('\0').to_owned());
            }
            OPT_IF_TSRESOL => {
                if len != 1 || saw_tsresol {
                    return Err(Error::corrupt(
                        start,
                        WHAT,
                        if saw_tsresol {
                            "more than one if_tsresol option".to_owned()
                        } else {
                            format!("if_tsresol option has length {len}, expected 1")
                        },
                    ));
                }
                saw_tsresol = true;
                interface.tsresol = TsResolution::from_option_byte(value[0]);
            }
            OPT_IF_TSOFFSET => {
                if len != 8 || saw_tsoffset {
                    return Err(Error::corrupt(
                        start,
                        WHAT,
                        if saw_tsoffset {
                            "more than one if_tsoffset option".to_owned()
                        } else {
                            format!("if_tsoffset option has length {len}, expected 8")
                        },
                    ));
                }
                saw_tsoffset = true;
                interface.tsoffset = bo.i64(value, 0);
            }
            _ => {}
        }
        // The padding may be missing after the last option.
        at = value_at.saturating_add(padded);
    }
    Ok(())
}

/// Writes a pcapng file: one section, little-endian.
///
/// An interface description block is written the first time a packet with a new
/// (link type, snapshot length, interface id) combination is written; its interface gets the
/// next id in the file, and its `if_tsresol` is 9 (nanoseconds). Packets are written as enhanced
/// packet blocks with 64-bit nanosecond timestamps. Every block is one `write_all`; wrap files in
/// a [`std::io::BufWriter`].
///
/// ```
/// use netsift_capture::{CaptureReader, LinkType, PacketRef, PcapngWriter, Timestamp};
///
/// # fn main() -> Result<(), netsift_capture::Error> {
/// let mut writer = PcapngWriter::new(Vec::new())?;
/// let frame = [0xffu8; 14];
/// writer.write_packet(&PacketRef::new(&frame, Timestamp::new(1, 2), LinkType::ETHERNET))?;
/// let file = writer.into_inner()?;
/// let mut reader = CaptureReader::new(&file[..])?;
/// assert_eq!(reader.next_packet().expect("a packet")?.data, &frame);
/// # Ok(())
/// # }
/// ```
pub struct PcapngWriter<W: Write> {
    out: W,
    snaplen: u32,
    interfaces: HashMap<(LinkType, u32, u32), u32>,
    scratch: Vec<u8>,
}

impl<W: Write> PcapngWriter<W> {
    /// Writes the section header block; packets are not cut (snapshot length 0, "no limit").
    pub fn new(out: W) -> Result<PcapngWriter<W>, Error> {
        PcapngWriter::with_snaplen(out, 0)
    }

    /// Writes the section header block; packets are cut to `snaplen` bytes (0: no limit), which
    /// is also the snapshot length of every interface description block.
    pub fn with_snaplen(out: W, snaplen: u32) -> Result<PcapngWriter<W>, Error> {
        let mut writer = PcapngWriter {
            out,
            snaplen,
            interfaces: HashMap::new(),
            scratch: Vec::with_capacity(2048),
        };
        let s = &mut writer.scratch;
        s.extend_from_slice(&BT_SHB.to_le_bytes());
        s.extend_from_slice(&28u32.to_le_bytes());
        s.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
        s.extend_from_slice(&1u16.to_le_bytes());
        s.extend_from_slice(&0u16.to_le_bytes());
        s.extend_from_slice(&(-1i64).to_le_bytes()); // section length not given
        s.extend_from_slice(&28u32.to_le_bytes());
        writer.write_scratch()?;
        Ok(writer)
    }

    /// Writes one packet (cut to the snapshot length, wire length kept), preceded by an interface
    /// description block if its combination of link type, snapshot length and interface id is
    /// new.
    ///
    /// Fails with [`ErrorKind::InvalidInput`] if the link type does not fit the 16 bits of an
    /// interface description block, if the timestamp is before 1970 or after 2554 (the limit of
    /// 64-bit nanoseconds), or if more than [`MAX_PACKET_LEN`] bytes would be written.
    pub fn write_packet(&mut self, packet: &PacketRef<'_>) -> Result<(), Error> {
        const WHAT: &str = "pcapng enhanced packet block";
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
        let units = u64::try_from(ts.as_nanos()).map_err(|_| {
            Error::invalid_input(
                WHAT,
                format!("timestamp {ts} is outside the range of 64-bit nanoseconds since 1970"),
            )
        })?;
        let interface = self.interface_id(packet.link_type, packet.interface)?;
        let caplen = data.len() as u32; // bounded by MAX_PACKET_LEN above
        let padded = (data.len() + 3) & !3;
        let total = 32 + padded as u32;
        let s = &mut self.scratch;
        s.clear();
        s.extend_from_slice(&BT_EPB.to_le_bytes());
        s.extend_from_slice(&total.to_le_bytes());
        s.extend_from_slice(&interface.to_le_bytes());
        s.extend_from_slice(&((units >> 32) as u32).to_le_bytes());
        s.extend_from_slice(&(units as u32).to_le_bytes());
        s.extend_from_slice(&caplen.to_le_bytes());
        s.extend_from_slice(&packet.wire_len.to_le_bytes());
        s.extend_from_slice(data);
        s.resize(28 + padded, 0);
        s.extend_from_slice(&total.to_le_bytes());
        self.write_scratch()
    }

    /// The id of the interface for this combination, writing its description block if new.
    fn interface_id(&mut self, link_type: LinkType, interface: u32) -> Result<u32, Error> {
        let key = (link_type, self.snaplen, interface);
        if let Some(&id) = self.interfaces.get(&key) {
            return Ok(id);
        }
        let Ok(link16) = u16::try_from(link_type.0) else {
            return Err(Error::invalid_input(
                "pcapng interface description block",
                format!("link type {} does not fit in 16 bits", link_type.0),
            ));
        };
        let id = self.interfaces.len() as u32;
        let s = &mut self.scratch;
        s.clear();
        s.extend_from_slice(&BT_IDB.to_le_bytes());
        s.extend_from_slice(&32u32.to_le_bytes());
        s.extend_from_slice(&link16.to_le_bytes());
        s.extend_from_slice(&0u16.to_le_bytes());
        s.extend_from_slice(&self.snaplen.to_le_bytes());
        s.extend_from_slice(&OPT_IF_TSRESOL.to_le_bytes());
        s.extend_from_slice(&1u16.to_le_bytes());
        s.extend_from_slice(&[TsResolution::NANOS.to_option_byte(), 0, 0, 0]);
        s.extend_from_slice(&OPT_ENDOFOPT.to_le_bytes());
        s.extend_from_slice(&0u16.to_le_bytes());
        s.extend_from_slice(&32u32.to_le_bytes());
        self.write_scratch()?;
        self.interfaces.insert(key, id);
        Ok(id)
    }

    /// The number of interface description blocks written so far.
    pub fn interface_count(&self) -> usize {
        self.interfaces.len()
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.out
            .flush()
            .map_err(|e| Error::io(None, "pcapng file", e))
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

    fn write_scratch(&mut self) -> Result<(), Error> {
        self.out
            .write_all(&self.scratch)
            .map_err(|e| Error::io(None, "pcapng file", e))
    }
}

impl<W: Write> std::fmt::Debug for PcapngWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapngWriter")
            .field("snaplen", &self.snaplen)
            .field("interfaces", &self.interfaces.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CaptureReader, Format, Packet};

    /// Builds pcapng blocks in a chosen byte order.
    struct Ng {
        bo: ByteOrder,
        out: Vec<u8>,
    }

    impl Ng {
        fn new(bo: ByteOrder) -> Ng {
            let mut ng = Ng {
                bo,
                out: Vec::new(),
            };
            ng.shb();
            ng
        }

        fn u16(&self, v: u16) -> [u8; 2] {
            match self.bo {
                ByteOrder::Little => v.to_le_bytes(),
                ByteOrder::Big => v.to_be_bytes(),
            }
        }

        fn u32(&self, v: u32) -> [u8; 4] {
            match self.bo {
                ByteOrder::Little => v.to_le_bytes(),
                ByteOrder::Big => v.to_be_bytes(),
            }
        }

        /// A block with a body padded to 4 bytes.
        fn block(&mut self, ty: u32, body: &[u8]) -> &mut Ng {
            let padded = (body.len() + 3) & !3;
            let total = (12 + padded) as u32;
            let mut b = Vec::new();
            b.extend(self.u32(ty));
            b.extend(self.u32(total));
            b.extend(body);
            b.resize(8 + padded, 0);
            b.extend(self.u32(total));
            self.out.extend(b);
            self
        }

        fn shb(&mut self) -> &mut Ng {
            let mut body = Vec::new();
            body.extend(self.u32(BYTE_ORDER_MAGIC));
            body.extend(self.u16(1));
            body.extend(self.u16(0));
            body.extend([0xff; 8]);
            self.block(BT_SHB, &body)
        }

        fn option(&self, body: &mut Vec<u8>, code: u16, value: &[u8]) {
            body.extend(self.u16(code));
            body.extend(self.u16(value.len() as u16));
            body.extend(value);
            body.resize((body.len() + 3) & !3, 0);
        }

        fn idb(&mut self, link: u16, snaplen: u32, options: &[(u16, Vec<u8>)]) -> &mut Ng {
            let mut body = Vec::new();
            body.extend(self.u16(link));
            body.extend(self.u16(0));
            body.extend(self.u32(snaplen));
            for (code, value) in options {
                self.option(&mut body, *code, value);
            }
            if !options.is_empty() {
                body.extend([0; 4]);
            }
            self.block(BT_IDB, &body)
        }

        fn epb(&mut self, iface: u32, ts: u64, caplen: u32, len: u32, data: &[u8]) -> &mut Ng {
            let mut body = Vec::new();
            body.extend(self.u32(iface));
            body.extend(self.u32((ts >> 32) as u32));
            body.extend(self.u32(ts as u32));
            body.extend(self.u32(caplen));
            body.extend(self.u32(len));
            body.extend(data);
            self.block(BT_EPB, &body)
        }

        fn pb(&mut self, iface: u16, ts: u64, caplen: u32, len: u32, data: &[u8]) -> &mut Ng {
            let mut body = Vec::new();
            body.extend(self.u16(iface));
            body.extend(self.u16(0));
            body.extend(self.u32((ts >> 32) as u32));
            body.extend(self.u32(ts as u32));
            body.extend(self.u32(caplen));
            body.extend(self.u32(len));
            body.extend(data);
            self.block(BT_PB, &body)
        }

        fn spb(&mut self, len: u32, data: &[u8]) -> &mut Ng {
            let mut body = Vec::new();
            body.extend(self.u32(len));
            body.extend(data);
            self.block(BT_SPB, &body)
        }

        fn bytes(&self) -> Vec<u8> {
            self.out.clone()
        }
    }

    fn read_all(file: &[u8]) -> (Vec<Packet>, Option<Error>) {
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

    fn le64(v: i64) -> Vec<u8> {
        v.to_le_bytes().to_vec()
    }

    #[test]
    fn epb_in_both_byte_orders() {
        for bo in [ByteOrder::Little, ByteOrder::Big] {
            let mut ng = Ng::new(bo);
            let name = b"eth0".to_vec();
            ng.idb(1, 65535, &[(OPT_IF_NAME, name)])
                .epb(0, 1_500_000, 3, 60, &[1, 2, 3]);
            let f = ng.bytes();
            let mut r = CaptureReader::new(&f[..]).unwrap();
            assert_eq!(r.format(), Format::Pcapng { byte_order: bo });
            assert_eq!(r.link_type(), Some(LinkType::ETHERNET));
            assert_eq!(r.snaplen(), Some(65535));
            assert_eq!(r.interfaces()[0].name.as_deref(), Some("eth0"));
            assert_eq!(r.interfaces()[0].tsresol, TsResolution::MICROS);
            let p = r.next_packet().unwrap().unwrap();
            assert_eq!(p.data, [1, 2, 3]);
            assert_eq!(p.wire_len, 60);
            assert_eq!(p.timestamp, Timestamp::new(1, 500_000_000));
            assert!(r.next_packet().is_none());
        }
    }

    #[test]
    fn tsresol_and_tsoffset() {
        let mut ng = Ng::new(ByteOrder::Little);
        ng.idb(1, 0, &[(OPT_IF_TSRESOL, vec![9])])
            .idb(
                1,
                0,
                &[
                    (OPT_IF_TSRESOL, vec![0x80 | 10]),
                    (OPT_IF_TSOFFSET, le64(-5)),
                ],
            )
            .idb(
                101,
                0,
                &[(OPT_IF_TSRESOL, vec![3]), (OPT_IF_TSOFFSET, le64(100))],
            )
            .epb(0, 1_000_000_007, 0, 0, &[])
            .epb(1, 3 * 1024 + 512, 0, 0, &[])
            .epb(2, 1_234, 0, 0, &[]);
        let (p, e) = read_all(&ng.bytes());
        assert!(e.is_none(), "{e:?}");
        assert_eq!(p[0].timestamp, Timestamp::new(1, 7));
        assert_eq!(p[1].timestamp, Timestamp::new(3 - 5, 500_000_000));
        assert_eq!(p[1].interface, 1);
        assert_eq!(p[2].timestamp, Timestamp::new(101, 234_000_000));
        assert_eq!(p[2].link_type, LinkType::RAW);
    }

    #[test]
    fn spb_and_obsolete_pb() {
        let mut ng = Ng::new(ByteOrder::Big);
        ng.idb(1, 4, &[(OPT_IF_TSOFFSET, (7i64).to_be_bytes().to_vec())])
            .spb(6, &[1, 2, 3, 4, 5, 6])
            .spb(2, &[9, 9])
            .pb(0, 2_000_000, 2, 10, &[7, 8]);
        let (p, e) = read_all(&ng.bytes());
        assert!(e.is_none(), "{e:?}");
        // SPB: cut to the snapshot length of interface 0; no timestamp but the offset.
        assert_eq!(p[0].data, [1, 2, 3, 4]);
        assert_eq!(p[0].wire_len, 6);
        assert_eq!(p[0].timestamp, Timestamp::new(7, 0));
        // SPB: cut to the wire length (the rest is padding).
        assert_eq!(p[1].data, [9, 9]);
        assert_eq!(p[2].data, [7, 8]);
        assert_eq!(p[2].timestamp, Timestamp::new(9, 0));
    }

    #[test]
    fn spb_is_cut_to_the_block() {
        let mut ng = Ng::new(ByteOrder::Little);
        ng.idb(1, 0, &[]).spb(1000, &[1, 2, 3, 4]);
        let (p, e) = read_all(&ng.bytes());
        assert!(e.is_none());
        assert_eq!((p[0].data.len(), p[0].wire_len), (4, 1000));
    }

    #[test]
    fn unknown_blocks_are_skipped_and_sections_reset() {
        let mut ng = Ng::new(ByteOrder::Little);
        ng.block(4, &[0; 20]) // NRB before the IDB
            .idb(1, 0, &[])
            .block(0x0000_0bad, &[1, 2, 3, 4, 5])
            .epb(0, 0, 1, 1, &[1])
            .block(5, &[0; 12]); // ISB
        let mut f = ng.bytes();
        // A second section in the other byte order, with one interface of another link type.
        let mut ng2 = Ng::new(ByteOrder::Big);
        ng2.idb(113, 0, &[]).epb(0, 0, 1, 1, &[2]);
        f.extend(ng2.bytes());
        let mut r = CaptureReader::new(&f[..]).unwrap();
        assert_eq!(r.link_type(), Some(LinkType::ETHERNET));
        assert_eq!(r.next_packet().unwrap().unwrap().data, [1]);
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!((p.data, p.link_type), (&[2u8][..], LinkType::LINUX_SLL));
        assert_eq!(
            r.format(),
            Format::Pcapng {
                byte_order: ByteOrder::Big
            }
        );
        assert_eq!(r.interfaces().len(), 1);
        assert!(r.next_packet().is_none());
    }

    #[test]
    fn empty_section_has_no_link_type() {
        let f = Ng::new(ByteOrder::Little).bytes();
        let mut r = CaptureReader::new(&f[..]).unwrap();
        assert_eq!(r.link_type(), None);
        assert_eq!(r.snaplen(), None);
        assert!(r.next_packet().is_none());
    }

    #[test]
    fn undefined_interface() {
        let mut ng = Ng::new(ByteOrder::Little);
        ng.idb(1, 0, &[]).epb(0, 0, 0, 0, &[]).epb(1, 0, 0, 0, &[]);
        let (p, e) = read_all(&ng.bytes());
        assert_eq!(p.len(), 1);
        assert_eq!(
            e.unwrap().to_string(),
            "corrupt pcapng enhanced packet block at offset 80: packet refers to interface 1, but the section defines 1 interface(s)"
        );
        // A packet before any interface: reported by next_packet, not by new().
        let mut ng = Ng::new(ByteOrder::Little);
        ng.spb(0, &[]);
        let (p, e) = read_all(&ng.bytes());
        assert!(p.is_empty());
        assert_eq!(e.unwrap().kind(), ErrorKind::Corrupt);
    }

    #[test]
    fn block_length_errors() {
        let base = {
            let mut ng = Ng::new(ByteOrder::Little);
            ng.idb(1, 0, &[]);
            ng.bytes()
        };
        let at = base.len(); // 28 + 20 = 48
        let with = |extra: &[u8]| {
            let mut f = base.clone();
            f.extend(extra);
            read_all(&f).1.unwrap().to_string()
        };
        assert_eq!(
            with(&[6, 0, 0, 0, 8, 0, 0, 0]),
            format!(
                "corrupt pcapng enhanced packet block at offset {at}: block total length 8 is less than the minimum of 12"
            )
        );
        assert_eq!(
            with(&[6, 0, 0, 0, 14, 0, 0, 0]),
            format!(
                "corrupt pcapng enhanced packet block at offset {at}: block total length 14 is not a multiple of 4"
            )
        );
        assert_eq!(
            with(&[6, 0, 0, 0, 16, 0, 0, 0]),
            format!(
                "corrupt pcapng enhanced packet block at offset {at}: block total length 16 is less than the minimum of 32"
            )
        );
        assert_eq!(
            with(&[0x99, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0]),
            format!(
                "corrupt pcapng block at offset {at}: block total length 16 in the header does not match 20 in the trailer"
            )
        );
        assert_eq!(
            with(&[0x99, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3]),
            format!(
                "truncated pcapng block at offset {at}: header says 256 bytes, file ends after 11"
            )
        );
        assert_eq!(
            with(&[6, 0, 0, 0, 0, 0, 0, 0x40]),
            format!(
                "corrupt pcapng enhanced packet block at offset {at}: block total length 1073741824 exceeds the limit of 16908320 bytes"
            )
        );
        assert_eq!(
            with(&[6, 0, 0]),
            format!(
                "truncated pcapng block at offset {at}: the block header needs 8 bytes, file ends after 3"
            )
        );
    }

    #[test]
    fn epb_caplen_beyond_block() {
        let mut ng = Ng::new(ByteOrder::Little);
        ng.idb(1, 0, &[]).epb(0, 0, 9, 9, &[1, 2, 3, 4]);
        let (p, e) = read_all(&ng.bytes());
        assert!(p.is_empty());
        assert_eq!(
            e.unwrap().to_string(),
            "corrupt pcapng enhanced packet block at offset 48: captured length 9 exceeds the 4 bytes of packet data in the block"
        );
    }

    #[test]
    fn idb_option_errors() {
        let mut ng = Ng::new(ByteOrder::Little);
        ng.idb(1, 0, &[(OPT_IF_TSRESOL, vec![6, 6])]);
        let e = CaptureReader::new(&ng.bytes()[..]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "corrupt pcapng interface description block at offset 28: if_tsresol option has length 2, expected 1"
        );
        let mut ng = Ng::new(ByteOrder::Little);
        let mut body = vec![1, 0, 0, 0, 0, 0, 0, 0];
        body.extend([2, 0, 40, 0, b'x', 0, 0, 0]);
        ng.block(BT_IDB, &body);
        let e = CaptureReader::new(&ng.bytes()[..]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "corrupt pcapng interface description block at offset 28: option 2 at block offset 16 has length 40, which runs past the end of the block"
        );
    }

    #[test]
    fn shb_errors() {
        let mut f = Ng::new(ByteOrder::Little).bytes();
        f[8..12].copy_from_slice(&[1, 2, 3, 4]);
        let e = CaptureReader::new(&f[..]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadMagic);
        assert_eq!(
            e.to_string(),
            "unrecognized pcapng section header block at offset 0: byte-order magic 0x01020304 is not 0x1a2b3c4d in either byte order"
        );
        let mut f = Ng::new(ByteOrder::Little).bytes();
        f[12] = 2;
        let e = CaptureReader::new(&f[..]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unsupported pcapng section header block at offset 0: version 2.0 is not supported (libpcap reads 1.0 and 1.2)"
        );
        let f = Ng::new(ByteOrder::Little).bytes();
        let e = CaptureReader::new(&f[..10]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "truncated pcapng section header block at offset 0: the byte-order magic needs 12 bytes, file ends after 10"
        );
    }

    /// As libpcap 1.10.3: the first section header block's trailer is not compared with its
    /// header (pcap_ng_check_header reads it as a whole); a later one's is.
    #[test]
    fn only_the_first_shbs_trailer_may_disagree() {
        let mut ng = Ng::new(ByteOrder::Little);
        let shb_len = ng.out.len();
        ng.out[shb_len - 4] ^= 0x40;
        ng.idb(1, 0, &[]);
        let f = ng.out.clone();
        let r = CaptureReader::new(&f[..]);
        assert!(r.is_ok(), "{:?}", r.err());
        let (_, err) = read_all(&f);
        assert!(err.is_none(), "{err:?}");
        // A second section whose SHB trailer disagrees is corrupt.
        let mut ng = Ng::new(ByteOrder::Little);
        ng.idb(1, 0, &[]);
        let at = ng.out.len();
        ng.shb();
        let end = ng.out.len();
        ng.out[end - 4] ^= 0x40;
        let err = read_all(&ng.out).1.expect("an error");
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert_eq!(err.offset(), Some(at as u64));
    }

    #[test]
    fn writer_round_trip_with_interfaces() {
        let mut w = PcapngWriter::new(Vec::new()).unwrap();
        let a = [1u8, 2, 3, 4, 5];
        let packets = [
            PacketRef {
                data: &a,
                wire_len: 5,
                timestamp: Timestamp::new(1, 1),
                link_type: LinkType::ETHERNET,
                interface: 0,
            },
            PacketRef {
                data: &a[..2],
                wire_len: 99,
                timestamp: Timestamp::new(2, 999_999_999),
                link_type: LinkType::RAW,
                interface: 0,
            },
            PacketRef {
                data: &a[..4],
                wire_len: 4,
                timestamp: Timestamp::new(3, 0),
                link_type: LinkType::ETHERNET,
                interface: 0,
            },
        ];
        for p in &packets {
            w.write_packet(p).unwrap();
        }
        assert_eq!(w.interface_count(), 2);
        let f = w.into_inner().unwrap();
        let mut r = CaptureReader::new(&f[..]).unwrap();
        assert_eq!(r.interfaces()[0].tsresol, TsResolution::NANOS);
        let mut got = Vec::new();
        while let Some(p) = r.next_packet() {
            got.push(p.unwrap().to_owned());
        }
        assert_eq!(got.len(), 3);
        for (g, p) in got.iter().zip(&packets) {
            assert_eq!(
                (&g.data[..], g.wire_len, g.timestamp, g.link_type),
                (p.data, p.wire_len, p.timestamp, p.link_type)
            );
        }
        assert_eq!(got[1].interface, 1);
        assert_eq!(got[2].interface, 0);
    }

    #[test]
    fn writer_rejects_what_pcapng_cannot_hold() {
        let mut w = PcapngWriter::with_snaplen(Vec::new(), 2).unwrap();
        let e = w
            .write_packet(&PacketRef::new(&[1], Timestamp::new(-1, 0), LinkType::RAW))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot write pcapng enhanced packet block: timestamp -1.000000000 is outside the range of 64-bit nanoseconds since 1970"
        );
        let e = w
            .write_packet(&PacketRef::new(&[1], Timestamp::ZERO, LinkType(70_000)))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot write pcapng interface description block: link type 70000 does not fit in 16 bits"
        );
        w.write_packet(&PacketRef::new(&[1, 2, 3], Timestamp::ZERO, LinkType::RAW))
            .unwrap();
        let f = w.into_inner().unwrap();
        let (p, e) = read_all(&f);
        assert!(e.is_none());
        assert_eq!((&p[0].data[..], p[0].wire_len), (&[1u8, 2][..], 3));
    }
}
