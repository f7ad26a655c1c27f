//! Sources: `file`, `gen` and `device`.
//!
//! - `(file, "path")`: the packets of a pcap or pcapng file ([`CaptureReader`]); the file is
//!   opened and its header read at instantiation, so a missing or unreadable file is an error
//!   there. A corrupt record later ends the input with an error from
//!   [`Source::next_packet`].
//! - `(gen, SEED, COUNT)`: exactly the packets of
//!   [`mixed_traffic`](netsift_capture::generate::mixed_traffic)`(SEED, COUNT)` (Ethernet), each
//!   made when it is taken. `COUNT` is at most [`MAX_GEN`].
//! - `(device, IFACE)`: live capture from a Linux interface with an `AF_PACKET` ring (default
//!   settings: promiscuous, both directions, 256 KiB snap length). Opening needs `CAP_NET_RAW`;
//!   the error says why opening failed. `next_packet` waits until a packet comes: a live
//!   source never ends by itself (`NOTE:` the runtime stops it by not asking any more).

use std::collections::VecDeque;
use std::fs::File;
use std::time::Duration;

use netsift_capture::{CaptureReader, LinkType, Packet};
use netsift_filter::Target;

use crate::class::{Arg, Context, FilterClass, Instance, Polled, Source};
use crate::classes::{number_arg, text_arg};
use crate::error::{Error, ErrorKind};

/// The most packets `gen` makes.
pub const MAX_GEN: u64 = 10_000_000;

/// The `file` source class.
#[derive(Clone, Copy, Debug, Default)]
pub struct FileClass;

impl FilterClass for FileClass {
    fn name(&self) -> &'static str {
        "file"
    }

    fn about(&self) -> &'static str {
        "source: the packets of a pcap or pcapng file"
    }

    fn usage(&self) -> &'static str {
        "\"PATH\""
    }

    fn is_source(&self) -> bool {
        true
    }

    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }

    fn opens_paths(&self, _args: &[Arg]) -> bool {
        true
    }

    fn instantiate(&self, args: &[Arg], ctx: &Context) -> Result<Instance, Error> {
        let path = text_arg(self.name(), args, 0, "path")?;
        let cannot = |e: String| format!("file: cannot read {path:?} (argument 1): {e}");
        let file = ctx
            .access
            .open_read(path)
            .map_err(|e| Error::io(cannot(e.to_string()), e))?;
        let reader = CaptureReader::new(file).map_err(|e| Error::io(cannot(e.to_string()), e))?;
        Ok(Instance::Source(Box::new(FileSource {
            reader,
            path: path.to_string(),
        })))
    }
}

/// A `file` source.
pub struct FileSource {
    reader: CaptureReader<File>,
    path: String,
}

impl std::fmt::Debug for FileSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSource")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Source for FileSource {
    fn link_type(&self) -> LinkType {
        // A pcapng file without an interface before its first packet has no link type yet;
        // Ethernet is the usual one.
        self.reader.link_type().unwrap_or(LinkType::ETHERNET)
    }

    /// The file's: its link type, snap length and byte order (`tcpdump -r`'s meanings).
    fn target(&self) -> Target {
        Target::for_capture(&self.reader)
    }

    fn next_packet(&mut self) -> Result<Option<Packet>, Error> {
        match self.reader.next_packet() {
            None => Ok(None),
            Some(Ok(p)) => Ok(Some(p.to_owned())),
            Some(Err(e)) => Err(Error::with_source(
                ErrorKind::Source,
                format!("file {:?}: {e}", self.path),
                e,
            )),
        }
    }
}

/// The `gen` source class.
#[derive(Clone, Copy, Debug, Default)]
pub struct GenClass;

impl FilterClass for GenClass {
    fn name(&self) -> &'static str {
        "gen"
    }

    fn about(&self) -> &'static str {
        "source: a reproducible generated mix of Ethernet traffic (TCP, UDP, ICMP, ARP, VLAN)"
    }

    fn usage(&self) -> &'static str {
        "SEED, COUNT"
    }

    fn is_source(&self) -> bool {
        true
    }

    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, Error> {
        let seed = number_arg(self.name(), args, 0, "SEED", 0, u64::MAX)?;
        let count = number_arg(self.name(), args, 1, "COUNT", 0, MAX_GEN)?;
        Ok(Instance::Source(Box::new(GenSource {
            packets: netsift_capture::generate::Mix::default().iter(seed, count as usize),
        })))
    }
}

/// A `gen` source: each packet is made when it is taken, so a source of millions holds one.
#[derive(Debug)]
pub struct GenSource {
    packets: netsift_capture::generate::MixIter,
}

impl Source for GenSource {
    fn link_type(&self) -> LinkType {
        LinkType::ETHERNET
    }

    fn next_packet(&mut self) -> Result<Option<Packet>, Error> {
        Ok(self.packets.next())
    }
}

/// The `device` source class.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceClass;

/// Check an interface name as Linux does (`dev_valid_name`): 1 to 15 bytes, not `.` or `..`,
/// no `/`, `:` or white space (an [`ErrorKind::Argument`] error otherwise).
pub fn check_iface(name: &str) -> Result<(), Error> {
    let why = if name.is_empty() {
        Some("is empty")
    } else if name.len() > 15 {
        Some("is longer than 15 bytes")
    } else if name == "." || name == ".." {
        Some("is not a name")
    } else if name
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
    {
        Some("contains '/', ':' or white space")
    } else {
        None
    };
    match why {
        Some(why) => Err(Error::argument(format!(
            "device: argument 1 (IFACE) {name:?} {why}: not an interface name"
        ))),
        None => Ok(()),
    }
}

impl FilterClass for DeviceClass {
    fn name(&self) -> &'static str {
        "device"
    }

    fn about(&self) -> &'static str {
        "source: live capture from a network interface (AF_PACKET)"
    }

    fn usage(&self) -> &'static str {
        "IFACE"
    }

    fn is_source(&self) -> bool {
        true
    }

    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }

    fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, Error> {
        let Some(arg) = args.first() else {
            return Err(Error::argument("device: argument 1 (IFACE) is missing"));
        };
        let name = arg.text.trim();
        check_iface(name)?;
        open_device(name)
    }
}

#[cfg(target_os = "linux")]
fn open_device(name: &str) -> Result<Instance, Error> {
    use netsift_capture::live::{AfPacket, AfPacketConfig};

    let src = AfPacket::open(name, &AfPacketConfig::default()).map_err(|e| {
        Error::io(
            format!("device: cannot capture on {name:?} (argument 1): {e}"),
            e,
        )
    })?;
    Ok(Instance::Source(Box::new(DeviceSource {
        src,
        queue: VecDeque::new(),
        spare: Vec::new(),
        lost_reported: 0,
    })))
}

#[cfg(not(target_os = "linux"))]
fn open_device(name: &str) -> Result<Instance, Error> {
    Err(Error::new(
        ErrorKind::Io,
        format!("device: cannot capture on {name:?}: live capture needs Linux"),
    ))
}

/// A `device` source: packets of an `AF_PACKET` ring, copied out in batches into buffers that
/// the capture loop hands back ([`Source::recycle`]), so a steady capture allocates nothing.
#[cfg(target_os = "linux")]
pub struct DeviceSource {
    src: netsift_capture::live::AfPacket,
    queue: VecDeque<Packet>,
    /// Buffers of packets the capture loop is done with.
    spare: Vec<Vec<u8>>,
    /// The kernel's drops already reported by [`Source::lost`].
    lost_reported: u64,
}

/// The longest a device source waits for a batch to lend ([`Source::poll_borrowed`]).
#[cfg(target_os = "linux")]
pub const BORROW_WAIT: Duration = Duration::from_millis(10);

/// The most spare buffers a device source keeps (a 1 MiB block of small frames).
#[cfg(target_os = "linux")]
const SPARE: usize = 16_384;

#[cfg(target_os = "linux")]
impl std::fmt::Debug for DeviceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use netsift_capture::live::Source as _;
        f.debug_struct("DeviceSource")
            .field("src", &self.src.describe())
            .finish_non_exhaustive()
    }
}

#[cfg(target_os = "linux")]
impl DeviceSource {
    /// Copy the next batch of the ring into the queue, waiting up to `wait` for one.
    fn fill(&mut self, wait: Duration) -> Result<(), Error> {
        use netsift_capture::live::{Flow, Source as _};
        // PERF: one copy per packet out of the ring (into a recycled buffer); the runtime
        // copies into the PBuf again.
        let (queue, spare) = (&mut self.queue, &mut self.spare);
        self.src
            .poll_batch(Some(wait), &mut |p| {
                let mut data = spare.pop().unwrap_or_default();
                data.clear();
                data.extend_from_slice(p.data);
                queue.push_back(Packet {
                    data,
                    wire_len: p.wire_len,
                    timestamp: p.timestamp,
                    link_type: p.link_type,
                    interface: p.interface,
                });
                Flow::Continue
            })
            .map_err(|e| {
                Error::with_source(
                    ErrorKind::Source,
                    format!("device {}: {e}", self.src.describe()),
                    e,
                )
            })?;
        Ok(())
    }
}

#[cfg(target_os = "linux")]
impl Source for DeviceSource {
    fn link_type(&self) -> LinkType {
        use netsift_capture::live::Source as _;
        self.src.link_type()
    }

    fn next_packet(&mut self) -> Result<Option<Packet>, Error> {
        while self.queue.is_empty() {
            self.fill(Duration::from_millis(100))?;
        }
        Ok(self.queue.pop_front())
    }

    /// Never waits: a quiet interface beside other sources must not hold them up.
    fn poll_packet(&mut self) -> Result<Polled, Error> {
        if self.queue.is_empty() {
            self.fill(Duration::ZERO)?;
        }
        Ok(self.queue.pop_front().map_or(Polled::Idle, Polled::Packet))
    }

    fn recycle(&mut self, packet: Packet) {
        if self.spare.len() < SPARE {
            self.spare.push(packet.data);
        }
    }

    fn lost(&mut self) -> u64 {
        use netsift_capture::live::Source as _;
        let Ok(st) = self.src.stats() else {
            return 0;
        };
        let new = st.dropped.saturating_sub(self.lost_reported);
        self.lost_reported = st.dropped;
        new
    }

    fn poll_borrowed(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], u32, netsift_capture::Timestamp) -> bool,
    ) -> Option<Result<usize, Error>> {
        use netsift_capture::live::{Flow, Source as _};
        // Packets copied out earlier (by `poll_packet`) go first, in order.
        let mut n = 0;
        while n < max {
            let Some(p) = self.queue.pop_front() else {
                break;
            };
            let more = f(&p.data, p.wire_len, p.timestamp);
            n += 1;
            self.recycle(p);
            if !more {
                return Some(Ok(n));
            }
        }
        if n > 0 || max == 0 {
            return Some(Ok(n));
        }
        // A short wait: the caller (the daemon's loop) looks at its sockets and other sources
        // between batches.
        let r = self.src.poll_batch(Some(BORROW_WAIT), &mut |p| {
            let more = f(p.data, p.wire_len, p.timestamp);
            n += 1;
            if !more || n >= max {
                Flow::Stop
            } else {
                Flow::Continue
            }
        });
        Some(r.map(|_| n).map_err(|e| {
            Error::with_source(
                ErrorKind::Source,
                format!("device {}: {e}", self.src.describe()),
                e,
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use netsift_capture::PcapWriter;
    use netsift_capture::Precision;
    use netsift_capture::generate::mixed_traffic;

    use super::*;
    use crate::classes::testutil::{bare, quoted};

    fn source(class: &dyn FilterClass, args: &[Arg]) -> Box<dyn Source> {
        match class.instantiate(args, &Context::default()) {
            Ok(Instance::Source(s)) => s,
            Ok(Instance::Filter(_)) => panic!("a filter"),
            Err(e) => panic!("{e}"),
        }
    }

    fn error(class: &dyn FilterClass, args: &[Arg]) -> String {
        match class.instantiate(args, &Context::default()) {
            Ok(_) => panic!("accepted {args:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn drain(s: &mut dyn Source) -> Vec<Packet> {
        let mut v = Vec::new();
        while let Some(p) = s.next_packet().unwrap() {
            v.push(p);
        }
        v
    }

    #[test]
    fn gen_is_mixed_traffic() {
        assert!(GenClass.is_source());
        let mut s = source(&GenClass, &bare(&["7", "250"]));
        assert_eq!(s.link_type(), LinkType::ETHERNET);
        assert_eq!(drain(s.as_mut()), mixed_traffic(7, 250));
        assert!(matches!(s.next_packet(), Ok(None)));
        assert_eq!(
            error(&GenClass, &bare(&["1", "x"])),
            "gen: argument 2 (COUNT) must be a whole number from 0 to 10000000, not \"x\""
        );
        assert!(error(&GenClass, &bare(&["-1", "3"])).contains("argument 1 (SEED)"));
    }

    #[test]
    fn file_reads_what_was_written() {
        let path =
            std::env::temp_dir().join(format!("netsift-graph-{}-src.pcap", std::process::id()));
        let pkts = mixed_traffic(3, 100);
        let mut w = PcapWriter::new(
            File::create(&path).unwrap(),
            LinkType::ETHERNET,
            0,
            Precision::Nano,
        )
        .unwrap();
        for p in &pkts {
            w.write_packet(&p.as_ref()).unwrap();
        }
        w.flush().unwrap();
        let mut s = source(&FileClass, &[quoted(path.to_str().unwrap())]);
        assert_eq!(s.link_type(), LinkType::ETHERNET);
        assert_eq!(drain(s.as_mut()), pkts);
        std::fs::remove_file(&path).unwrap();
        let e = error(&FileClass, &[quoted("/nonexistent/trace.pcap")]);
        assert!(
            e.starts_with("file: cannot read \"/nonexistent/trace.pcap\" (argument 1): "),
            "{e}"
        );
        assert_eq!(
            error(&FileClass, &[quoted(" ")]),
            "file: argument 1 (path) is empty"
        );
    }

    #[test]
    fn device_argument_errors() {
        assert!(DeviceClass.is_source());
        assert_eq!(
            error(&DeviceClass, &bare(&[""])),
            "device: argument 1 (IFACE) \"\" is empty: not an interface name"
        );
        assert!(error(&DeviceClass, &bare(&["averyveryverylongname"])).contains("15 bytes"));
        assert!(error(&DeviceClass, &bare(&["eth0/1"])).contains("'/'"));
        assert!(error(&DeviceClass, &[]).contains("missing"));
        // A valid name of no interface: an error whatever the privileges (no traffic).
        let e = error(&DeviceClass, &bare(&["nsnoif0"]));
        assert!(
            e.starts_with("device: cannot capture on \"nsnoif0\" (argument 1): "),
            "{e}"
        );
    }
}
