//! Write captures with `PcapWriter` and `PcapngWriter`, read them back, compare.

mod common;

use common::{capture_files, read_bytes, read_file};
use netsift_capture::generate::{FrameBuilder, TCP_ACK, mixed_traffic};
use netsift_capture::{
    CaptureReader, ErrorKind, Format, LinkType, Packet, PacketRef, PcapWriter, PcapngWriter,
    Precision, Timestamp, TsResolution,
};

/// Synthetic packets with awkward cases: empty data, wire length above and below the captured
/// length, odd lengths (pcapng padding), the epoch, the last second pcap can hold.
fn synthetic() -> Vec<Packet> {
    let mut packets = mixed_traffic(7, 300);
    let mut empty = Packet::new(Vec::new(), Timestamp::ZERO, LinkType::ETHERNET);
    empty.wire_len = 1514;
    packets.push(empty);
    let mut odd = FrameBuilder::new()
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2])
        .tcp(1, 2, TCP_ACK)
        .payload(&[0xaa; 7])
        .build_packet(Timestamp::new(u32::MAX.into(), 999_999_999));
    odd.wire_len = 10;
    packets.push(odd);
    packets
}

fn micro(t: Timestamp) -> Timestamp {
    Timestamp::from_micros(t.as_micros())
}

fn write_pcap(packets: &[Packet], link: LinkType, snaplen: u32, precision: Precision) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), link, snaplen, precision).expect("header");
    for p in packets {
        w.write_packet(&p.as_ref()).expect("write");
    }
    w.into_inner().expect("flush")
}

fn write_pcapng(packets: &[Packet]) -> Vec<u8> {
    let mut w = PcapngWriter::new(Vec::new()).expect("header");
    for p in packets {
        w.write_packet(&p.as_ref()).expect("write");
    }
    w.into_inner().expect("flush")
}

#[test]
fn synthetic_pcap_both_precisions() {
    let packets = synthetic();
    for precision in [Precision::Nano, Precision::Micro] {
        let file = write_pcap(&packets, LinkType::ETHERNET, 65535, precision);
        let back = read_bytes(&file);
        assert!(back.error.is_none(), "{:?}", back.error);
        assert_eq!(back.packets.len(), packets.len());
        for (got, want) in back.packets.iter().zip(&packets) {
            let mut want = want.clone();
            if precision == Precision::Micro {
                want.timestamp = micro(want.timestamp);
            }
            assert_eq!(got, &want);
        }
        let reader = CaptureReader::new(&file[..]).expect("open");
        assert!(matches!(reader.format(), Format::Pcap { precision: p, .. } if p == precision));
    }
}

#[test]
fn synthetic_pcap_cuts_to_snaplen() {
    let packets = synthetic();
    let file = write_pcap(&packets, LinkType::ETHERNET, 40, Precision::Nano);
    let back = read_bytes(&file);
    assert!(back.error.is_none());
    for (got, want) in back.packets.iter().zip(&packets) {
        assert_eq!(got.data, want.data[..want.data.len().min(40)]);
        assert_eq!(got.wire_len, want.wire_len);
    }
}

#[test]
fn synthetic_pcapng() {
    let mut packets = synthetic();
    // Other link types and interface ids get interfaces of their own.
    let mut raw = Packet::new(vec![0x45, 0, 0, 20, 1], Timestamp::new(3, 3), LinkType::RAW);
    raw.interface = 5;
    packets.insert(10, raw);
    let file = write_pcapng(&packets);
    let mut reader = CaptureReader::new(&file[..]).expect("open");
    let mut got = Vec::new();
    while let Some(p) = reader.next_packet() {
        got.push(p.expect("packet").to_owned());
    }
    assert_eq!(reader.interfaces().len(), 2);
    assert!(
        reader
            .interfaces()
            .iter()
            .all(|i| i.tsresol == TsResolution::NANOS && i.snaplen == 0)
    );
    assert_eq!(got.len(), packets.len());
    for (g, w) in got.iter().zip(&packets) {
        assert_eq!(
            (&g.data, g.wire_len, g.timestamp, g.link_type),
            (&w.data, w.wire_len, w.timestamp, w.link_type)
        );
    }
    assert_eq!(got[10].interface, 1);
    assert_eq!(got[11].interface, 0);
}

#[test]
fn writers_report_io_errors() {
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "disk full",
            ))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let e = PcapWriter::new(Full, LinkType::RAW, 0, Precision::Nano).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert_eq!(e.to_string(), "I/O error on pcap file: disk full");
    assert!(std::error::Error::source(&e).is_some());
    let e = PcapngWriter::new(Full).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
}

/// Real captures of the corpus: read, write as pcap (nanoseconds) and pcapng, read back, compare.
#[test]
fn real_captures_rewritten() {
    let mut files = capture_files("tcpdump");
    files.extend(capture_files("libpcap"));
    let mut rewritten = (0, 0, 0);
    for path in &files {
        let original = read_file(path);
        assert!(
            original.error.is_none(),
            "{}: {:?}",
            path.display(),
            original.error
        );
        let packets = &original.packets;
        let reader = CaptureReader::open(path).expect("open");
        let Some(link) = reader.link_type() else {
            continue;
        };

        // pcapng keeps everything, including timestamps beyond 2106.
        let back = read_bytes(&write_pcapng(packets));
        assert!(back.error.is_none());
        assert_eq!(back.packets.len(), packets.len(), "{}", path.display());
        for (g, w) in back.packets.iter().zip(packets) {
            assert_eq!(g, w, "{}", path.display());
        }
        rewritten.1 += 1;

        // pcap needs one link type and 32-bit seconds.
        let fits_pcap = packets.iter().all(|p| {
            p.link_type == link && (0..=i64::from(u32::MAX)).contains(&p.timestamp.secs())
        });
        if !fits_pcap {
            rewritten.2 += 1;
            continue;
        }
        let snaplen = packets
            .iter()
            .map(|p| p.caplen())
            .chain(reader.snaplen())
            .max()
            .unwrap_or(0);
        let back = read_bytes(&write_pcap(packets, link, snaplen, Precision::Nano));
        assert!(back.error.is_none());
        assert_eq!(back.packets, *packets, "{}", path.display());
        rewritten.0 += 1;
    }
    println!(
        "rewrote {} captures as pcap and {} as pcapng ({} do not fit pcap)",
        rewritten.0, rewritten.1, rewritten.2
    );
    assert!(rewritten.0 > 800);
}

#[test]
fn packet_ref_from_reader_can_be_written_directly() {
    let packets = synthetic();
    let file = write_pcap(&packets, LinkType::ETHERNET, 0, Precision::Nano);
    let mut reader = CaptureReader::new(&file[..]).expect("open");
    let mut out = PcapngWriter::new(Vec::new()).expect("header");
    while let Some(p) = reader.next_packet() {
        let p: PacketRef<'_> = p.expect("packet");
        out.write_packet(&p).expect("write");
    }
    let back: Vec<Packet> = CaptureReader::new(&out.into_inner().expect("flush")[..])
        .expect("open")
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("read");
    assert_eq!(back, packets);
}
