//! `pcap`: a sink that writes every packet reaching it to a pcap file, and passes it on.
//!
//! `(pcap, "path")` creates (or truncates) the file when the filter is instantiated — an error
//! then names the path and the reason. The file header is written with the first packet's link
//! type (or, if no packet comes, at [`Filter::finish`], with the link type of the context,
//! Ethernet when unknown); microsecond timestamps, no snap length. Packets are written as they
//! reach the sink (already cut by an upstream `snap`, with their wire length). Writes are
//! buffered and flushed in `finish`. A write error (disk full, a packet of another link type)
//! stops the writing; `finish` reports the first one, with how many packets were lost. Every
//! packet passes, result 1.

use std::fs::File;
use std::io::BufWriter;

use netsift_capture::{LinkType, PacketRef, PcapWriter, Precision};

use crate::class::{Arg, Context, Filter, FilterClass, Instance, Pkt, Verdict};
use crate::classes::text_arg;
use crate::error::{Error, ErrorKind};
use crate::mbuf::MBuf;

/// The `pcap` class.
#[derive(Clone, Copy, Debug, Default)]
pub struct PcapClass;

impl FilterClass for PcapClass {
    fn name(&self) -> &'static str {
        "pcap"
    }

    fn about(&self) -> &'static str {
        "sink: write every packet to a pcap file; pass every packet"
    }

    fn usage(&self) -> &'static str {
        "\"PATH\""
    }

    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }

    fn opens_paths(&self, _args: &[Arg]) -> bool {
        true
    }

    fn instantiate(&self, args: &[Arg], ctx: &Context) -> Result<Instance, Error> {
        let path = text_arg(self.name(), args, 0, "path")?;
        let file = ctx
            .access
            .create(path)
            .map_err(|e| Error::io(format!("pcap: cannot create {path:?} (argument 1): {e}"), e))?;
        Ok(Instance::Filter(Box::new(PcapSink {
            path: path.to_string(),
            state: State::Opened(Some(BufWriter::new(file))),
            default_link: ctx.link_type().unwrap_or(LinkType::ETHERNET),
            error: None,
            lost: 0,
        })))
    }
}

enum State {
    /// The file is created, its header not yet written.
    Opened(Option<BufWriter<File>>),
    Writing(PcapWriter<BufWriter<File>>),
    /// After an error.
    Failed,
}

/// A `pcap` sink instance.
pub struct PcapSink {
    path: String,
    state: State,
    default_link: LinkType,
    error: Option<String>,
    lost: u64,
}

impl std::fmt::Debug for PcapSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapSink")
            .field("path", &self.path)
            .field("lost", &self.lost)
            .finish_non_exhaustive()
    }
}

impl PcapSink {
    fn fail(&mut self, what: String) {
        if self.error.is_none() {
            self.error = Some(format!("pcap: writing {:?}: {what}", self.path));
        }
        self.state = State::Failed;
    }

    /// The writer, writing the file header with `link` first if needed.
    fn writer(&mut self, link: LinkType) -> Option<&mut PcapWriter<BufWriter<File>>> {
        if let State::Opened(out) = &mut self.state {
            let out = out.take()?;
            match PcapWriter::new(out, link, 0, Precision::Micro) {
                Ok(w) => self.state = State::Writing(w),
                Err(e) => self.fail(e.to_string()),
            }
        }
        match &mut self.state {
            State::Writing(w) => Some(w),
            _ => None,
        }
    }
}

impl Filter for PcapSink {
    fn process(&mut self, pkt: &Pkt<'_>, _mbuf: &MBuf) -> Verdict {
        let r = match self.writer(pkt.link_type) {
            Some(w) => w.write_packet(&PacketRef {
                data: pkt.data,
                wire_len: pkt.wire_len,
                timestamp: pkt.timestamp,
                link_type: pkt.link_type,
                interface: 0,
            }),
            None => {
                self.lost += 1;
                return Verdict::PASS;
            }
        };
        if let Err(e) = r {
            self.lost += 1;
            self.fail(e.to_string());
        }
        Verdict::PASS
    }

    fn finish(&mut self, _mbuf: &MBuf) -> Result<(), Error> {
        let link = self.default_link;
        if let Some(w) = self.writer(link)
            && let Err(e) = w.flush()
        {
            let e = e.to_string();
            self.fail(e);
        }
        match &self.error {
            None => Ok(()),
            Some(e) => Err(Error::new(
                ErrorKind::Io,
                format!("{e} ({} packets not written)", self.lost),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use netsift_capture::CaptureReader;
    use netsift_capture::generate::mixed_traffic;

    use super::*;
    use crate::classes::testutil::{error, filter, quoted, run};

    fn temp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("netsift-graph-{}-{name}", std::process::id()))
    }

    #[test]
    fn writes_every_packet_and_passes_it() {
        let path = temp("sink.pcap");
        let pkts = mixed_traffic(8, 300);
        let mut f = filter(&PcapClass, &[quoted(path.to_str().unwrap())]);
        let m = MBuf::new(0);
        assert!(
            run(f.as_mut(), &pkts, &m)
                .iter()
                .all(|v| *v == Verdict::PASS)
        );
        f.finish(&m).unwrap();
        let mut r = CaptureReader::open(&path).unwrap();
        let mut n = 0;
        while let Some(p) = r.next_packet() {
            let p = p.unwrap();
            assert_eq!(p.data, &pkts[n].data[..]);
            assert_eq!(p.wire_len, pkts[n].wire_len);
            // Microsecond precision.
            assert_eq!(p.timestamp.as_micros(), pkts[n].timestamp.as_micros());
            n += 1;
        }
        assert_eq!(n, pkts.len());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn empty_file_gets_a_header_and_errors_are_reported() {
        let path = temp("empty.pcap");
        let mut f = filter(&PcapClass, &[quoted(path.to_str().unwrap())]);
        f.finish(&MBuf::new(0)).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 24);
        std::fs::remove_file(&path).unwrap();

        let e = error(&PcapClass, &[quoted("/nonexistent-dir/x/y.pcap")]);
        assert!(
            e.starts_with("pcap: cannot create \"/nonexistent-dir/x/y.pcap\" (argument 1): "),
            "{e}"
        );
        assert_eq!(
            error(&PcapClass, &[quoted("")]),
            "pcap: argument 1 (path) is empty"
        );

        // A packet of another link type than the first one is an error at finish.
        let path = temp("mixed.pcap");
        let mut f = filter(&PcapClass, &[quoted(path.to_str().unwrap())]);
        let m = MBuf::new(0);
        let mut pkts = mixed_traffic(1, 3);
        pkts[1].link_type = LinkType::RAW;
        run(f.as_mut(), &pkts, &m);
        let e = f.finish(&m).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(e.message().contains("(2 packets not written)"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }
}
