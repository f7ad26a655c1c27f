//! netsift's capture reader against libpcap's (`pcap_open_offline` + `pcap_next_ex`) on every
//! shared capture: same packets, lengths, bytes and timestamps.

use netsift_capture::CaptureReader;
use netsift_testkit::{data, oracle};

#[test]
fn every_capture_reads_like_libpcap() {
    let (mut files, mut packets) = (0, 0);
    for path in data::tcpdump_captures()
        .iter()
        .chain(&data::libpcap_captures())
    {
        let theirs = oracle::read_capture(path).unwrap();
        let mut reader = CaptureReader::open(path).unwrap();
        let mut i = 0;
        while let Some(p) = reader.next_packet() {
            let p = p.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let t = &theirs.packets.get(i).unwrap_or_else(|| {
                panic!(
                    "{}: netsift reads more packets than libpcap ({})",
                    path.display(),
                    theirs.packets.len()
                )
            });
            let what = format!("{} packet {i}", path.display());
            assert_eq!(p.data, t.data.as_slice(), "{what}: bytes");
            assert_eq!(p.wire_len, t.wire_len, "{what}: wire length");
            // Seconds compare modulo 2^32 (pcap stores 32 bits; libpcap sign-extends them).
            // pcap_open_offline delivers microseconds, also for nanosecond files.
            let frac = i64::from(p.timestamp.subsec_micros());
            if frac == t.ts_frac {
                assert_eq!(
                    p.timestamp.secs() as u32,
                    t.ts_sec as u32,
                    "{what}: seconds"
                );
            } else {
                // A sub-second field of 10^6 or more carried into the seconds (see the capture
                // crate's docs); libpcap keeps it as it is.
                assert!(
                    !(0..1_000_000).contains(&t.ts_frac),
                    "{what}: sub-second {frac} vs {}",
                    t.ts_frac
                );
            }
            i += 1;
        }
        assert_eq!(i, theirs.packets.len(), "{}: packet count", path.display());
        files += 1;
        packets += i;
    }
    println!("reader: {files} captures, {packets} packets identical to libpcap's");
}
