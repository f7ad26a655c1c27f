//! The C functions called as C calls them (through the rlib): savefiles, filters, loops,
//! `pcap_next_ex`, `pcap_breakloop`, dumps, names, devices and the error paths, with null
//! pointers where C callers might pass them.

use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr;

use netsift_capture::generate::FrameBuilder;
use netsift_capture::{CaptureReader, LinkType, PacketRef, PcapWriter, Precision, Timestamp};
use pcap::ffi::*;
use pcap::*;

/// A path in this run's temporary directory (under target/, reused by the next run).
fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("netsift-pcap-abi");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A pcap file of `n` frames: even ones UDP to port 53, odd ones TCP; frame i at i.000123456 s.
fn sample(name: &str, n: usize, precision: Precision) -> CString {
    let path = tmp(name);
    let mut w = PcapWriter::new(
        std::fs::File::create(&path).unwrap(),
        LinkType::ETHERNET,
        1500,
        precision,
    )
    .unwrap();
    for i in 0..n {
        let b = FrameBuilder::new().ipv4([198, 18, 0, 1], [198, 18, 0, 2]);
        let f = if i % 2 == 0 {
            b.udp(1000 + i as u16, 53).payload(&[7; 20]).build()
        } else {
            b.tcp(1000 + i as u16, 80, 0x02).build()
        };
        w.write_packet(&PacketRef::new(
            &f,
            Timestamp::new(i as i64, 123_456),
            LinkType::ETHERNET,
        ))
        .unwrap();
    }
    w.flush().unwrap();
    CString::new(path.to_str().unwrap()).unwrap()
}

fn text(p: *const c_char) -> String {
    assert!(!p.is_null());
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn open(path: &CStr) -> *mut Pcap {
    let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
    let p = unsafe { pcap_open_offline(path.as_ptr(), errbuf.as_mut_ptr()) };
    assert!(!p.is_null(), "{}", text(errbuf.as_ptr()));
    p
}

fn set_filter(p: *mut Pcap, expr: &str) {
    let e = CString::new(expr).unwrap();
    let mut prog = BpfProgram {
        bf_len: 0,
        bf_insns: ptr::null_mut(),
    };
    unsafe {
        assert_eq!(
            pcap_compile(p, &mut prog, e.as_ptr(), 1, PCAP_NETMASK_UNKNOWN),
            0
        );
        assert!(prog.bf_len > 0);
        assert_eq!(pcap_setfilter(p, &mut prog), 0, "{}", text(pcap_geterr(p)));
        pcap_freecode(&mut prog);
    }
    assert!(prog.bf_insns.is_null());
}

unsafe extern "C" fn count_cb(user: *mut u8, h: *const PcapPkthdr, _data: *const u8) {
    unsafe {
        let v = &mut *user.cast::<Vec<PcapPkthdr>>();
        v.push(*h);
    }
}

#[test]
fn offline_metadata_and_loop() {
    let path = sample("loop.pcap", 10, Precision::Micro);
    let p = open(&path);
    unsafe {
        assert_eq!(pcap_datalink(p), 1);
        assert_eq!(pcap_snapshot(p), 1500);
        assert_eq!(pcap_is_swapped(p), 0);
        assert_eq!((pcap_major_version(p), pcap_minor_version(p)), (2, 4));
        // As in libpcap 1.10.3: a savefile has no fd; its stream's descriptor is selectable.
        assert_eq!(pcap_fileno(p), -1);
        assert!(pcap_get_selectable_fd(p) >= 0);
        let mut seen: Vec<PcapPkthdr> = Vec::new();
        let r = pcap_loop(p, -1, Some(count_cb), ptr::from_mut(&mut seen).cast());
        assert_eq!(r, 0);
        assert_eq!(seen.len(), 10);
        assert_eq!(
            seen[3].ts,
            Timeval {
                tv_sec: 3,
                tv_usec: 123
            }
        );
        assert!(seen.iter().all(|h| h.caplen == h.len && h.caplen > 40));
        // At the end: nothing more, still 0.
        assert_eq!(
            pcap_dispatch(p, -1, Some(count_cb), ptr::from_mut(&mut seen).cast()),
            0
        );
        let mut st = PcapStat::default();
        assert_eq!(pcap_stats(p, &mut st), PCAP_ERROR);
        assert_eq!(
            text(pcap_geterr(p)),
            "Statistics aren't available from savefiles"
        );
        pcap_close(p);
    }
}

#[test]
fn filters_and_counts() {
    let path = sample("filter.pcap", 10, Precision::Micro);
    let p = open(&path);
    set_filter(p, "udp port 53");
    unsafe {
        let mut seen: Vec<PcapPkthdr> = Vec::new();
        // cnt 3 of the 5 accepted packets, then the rest.
        assert_eq!(
            pcap_loop(p, 3, Some(count_cb), ptr::from_mut(&mut seen).cast()),
            0
        );
        assert_eq!(seen.len(), 3);
        assert_eq!(
            pcap_dispatch(p, 0, Some(count_cb), ptr::from_mut(&mut seen).cast()),
            0
        );
        assert_eq!(seen.len(), 5);
        assert!(seen.iter().all(|h| h.ts.tv_sec % 2 == 0));
        pcap_close(p);
    }
}

#[test]
fn next_ex_and_nanoseconds() {
    let path = sample("nano.pcap", 4, Precision::Nano);
    let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
    unsafe {
        let p = pcap_open_offline_with_tstamp_precision(path.as_ptr(), 1, errbuf.as_mut_ptr());
        assert!(!p.is_null());
        let mut h: *mut PcapPkthdr = ptr::null_mut();
        let mut d: *const u8 = ptr::null();
        let mut n = 0;
        loop {
            match pcap_next_ex(p, &mut h, &mut d) {
                1 => {
                    assert_eq!((*h).ts.tv_usec, 123_456);
                    assert_eq!(*d.add(12), 0x08); // EtherType IPv4
                    n += 1;
                }
                PCAP_ERROR_BREAK => break,
                other => panic!("pcap_next_ex returned {other}"),
            }
        }
        assert_eq!(n, 4);
        // Null out-pointers are refused, not dereferenced.
        assert_eq!(pcap_next_ex(p, ptr::null_mut(), &mut d), PCAP_ERROR);
        pcap_close(p);
        // Microseconds from a nanosecond file.
        let p = open(&path);
        let mut hdr = PcapPkthdr::default();
        assert!(!pcap_next(p, &mut hdr).is_null());
        assert_eq!(hdr.ts.tv_usec, 123);
        pcap_close(p);
    }
}

unsafe extern "C" fn break_cb(user: *mut u8, _h: *const PcapPkthdr, _d: *const u8) {
    unsafe {
        let (p, n) = &mut *user.cast::<(*mut Pcap, usize)>();
        *n += 1;
        if *n == 2 {
            pcap_breakloop(*p);
        }
    }
}

#[test]
fn breakloop_from_the_callback() {
    let path = sample("break.pcap", 6, Precision::Micro);
    let p = open(&path);
    unsafe {
        let mut state = (p, 0usize);
        let r = pcap_loop(p, -1, Some(break_cb), ptr::from_mut(&mut state).cast());
        // As libpcap: pcap_loop returns -2, after the packet whose callback broke the loop.
        assert_eq!((r, state.1), (PCAP_ERROR_BREAK, 2));
        // The flag was cleared: the next loop reads the rest.
        assert_eq!(
            pcap_loop(p, -1, Some(break_cb), ptr::from_mut(&mut state).cast()),
            0
        );
        assert_eq!(state.1, 6);
        // A break requested before a loop ends it before any packet.
        pcap_breakloop(p);
        assert_eq!(
            pcap_dispatch(p, -1, Some(break_cb), ptr::from_mut(&mut state).cast()),
            PCAP_ERROR_BREAK
        );
        pcap_close(p);
    }
}

#[test]
fn dump_roundtrip() {
    let path = sample("in.pcap", 6, Precision::Micro);
    let out = tmp("out.pcap");
    let out_c = CString::new(out.to_str().unwrap()).unwrap();
    let p = open(&path);
    set_filter(p, "tcp");
    unsafe {
        let d = pcap_dump_open(p, out_c.as_ptr());
        assert!(!d.is_null(), "{}", text(pcap_geterr(p)));
        assert_eq!(pcap_dump_ftell64(d), 24);
        assert_eq!(pcap_loop(p, -1, Some(pcap_dump), d.cast()), 0);
        assert_eq!(pcap_dump_flush(d), 0);
        assert!(pcap_dump_ftell64(d) > 24);
        assert!(!pcap_dump_file(d).is_null());
        pcap_dump_close(d);
        pcap_close(p);
    }
    let mut r = CaptureReader::open(&out).unwrap();
    assert_eq!(r.snaplen(), Some(1500));
    let mut n = 0;
    while let Some(pk) = r.next_packet() {
        let pk = pk.unwrap();
        assert_eq!(pk.timestamp, Timestamp::new(2 * n + 1, 123_000));
        n += 1;
    }
    assert_eq!(n, 3);
    // A directory cannot be a dump file: the error names it.
    let p = open(&path);
    unsafe {
        let dir = CString::new(std::env::temp_dir().to_str().unwrap()).unwrap();
        assert!(pcap_dump_open(p, dir.as_ptr()).is_null());
        assert!(text(pcap_geterr(p)).contains("Is a directory"));
        pcap_close(p);
    }
}

#[test]
fn dead_handles_compile_and_report_errors() {
    unsafe {
        let p = pcap_open_dead(1, 65535);
        let mut prog = BpfProgram {
            bf_len: 0,
            bf_insns: ptr::null_mut(),
        };
        let e = CString::new("ip").unwrap();
        assert_eq!(pcap_compile(p, &mut prog, e.as_ptr(), 1, 0), 0);
        // tcpdump -d ip
        let insns = std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize);
        let got: Vec<(u16, u8, u8, u32)> =
            insns.iter().map(|i| (i.code, i.jt, i.jf, i.k)).collect();
        assert_eq!(
            got,
            [
                (0x28, 0, 0, 12),
                (0x15, 0, 1, 0x800),
                (6, 0, 0, 65535),
                (6, 0, 0, 0)
            ]
        );
        // pcap_offline_filter runs it.
        let frame = FrameBuilder::new()
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2])
            .udp(1, 2)
            .build();
        let h = PcapPkthdr {
            ts: Timeval::default(),
            caplen: frame.len() as u32,
            len: frame.len() as u32,
        };
        assert_eq!(pcap_offline_filter(&prog, &h, frame.as_ptr()), 65535);
        pcap_freecode(&mut prog);
        pcap_freecode(&mut prog); // twice is harmless
        let bad = CString::new("tcp port").unwrap();
        assert_eq!(pcap_compile(p, &mut prog, bad.as_ptr(), 1, 0), PCAP_ERROR);
        assert!(text(pcap_geterr(p)).starts_with("can't parse filter expression: syntax error"));
        let unknown = CString::new("port nosuchservice").unwrap();
        assert_eq!(
            pcap_compile(p, &mut prog, unknown.as_ptr(), 1, 0),
            PCAP_ERROR
        );
        assert!(!text(pcap_geterr(p)).is_empty());
        assert_eq!(
            pcap_compile(p, ptr::null_mut(), e.as_ptr(), 1, 0),
            PCAP_ERROR
        );
        // A null expression compiles as "accept everything", as in libpcap.
        assert_eq!(pcap_compile(p, &mut prog, ptr::null(), 1, 0), 0);
        pcap_freecode(&mut prog);
        let mut hdr = PcapPkthdr::default();
        assert!(pcap_next(p, &mut hdr).is_null());
        pcap_close(p);
    }
}

#[test]
fn null_pointers_are_refused() {
    unsafe {
        assert_eq!(pcap_datalink(ptr::null_mut()), PCAP_ERROR);
        assert_eq!(pcap_snapshot(ptr::null_mut()), PCAP_ERROR);
        assert!(pcap_geterr(ptr::null_mut()).is_null());
        assert_eq!(
            pcap_loop(ptr::null_mut(), 1, None, ptr::null_mut()),
            PCAP_ERROR
        );
        assert_eq!(pcap_setfilter(ptr::null_mut(), ptr::null_mut()), PCAP_ERROR);
        assert!(pcap_open_offline(ptr::null(), ptr::null_mut()).is_null());
        pcap_close(ptr::null_mut());
        pcap_breakloop(ptr::null_mut());
        pcap_freecode(ptr::null_mut());
        pcap_freealldevs(ptr::null_mut());
        pcap_dump_close(ptr::null_mut());
        pcap_dump(ptr::null_mut(), ptr::null(), ptr::null());
        assert_eq!(pcap_datalink_name_to_val(ptr::null()), -1);
        assert_eq!(
            pcap_offline_filter(ptr::null(), ptr::null(), ptr::null()),
            0
        );
        let p = pcap_open_dead(1, 100);
        assert_eq!(pcap_setfilter(p, ptr::null_mut()), PCAP_ERROR);
        pcap_close(p);
    }
}

#[test]
fn open_errors_are_libpcaps() {
    let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
    let missing = CString::new("/nonexistent/x.pcap").unwrap();
    unsafe {
        assert!(pcap_open_offline(missing.as_ptr(), errbuf.as_mut_ptr()).is_null());
        assert_eq!(
            text(errbuf.as_ptr()),
            "/nonexistent/x.pcap: No such file or directory"
        );
        let junk = tmp("junk.pcap");
        std::fs::write(&junk, b"this is not a capture file").unwrap();
        let junk = CString::new(junk.to_str().unwrap()).unwrap();
        assert!(pcap_open_offline(junk.as_ptr(), errbuf.as_mut_ptr()).is_null());
        assert_eq!(text(errbuf.as_ptr()), "unknown file format");
    }
}

#[test]
fn names_versions_and_status_texts() {
    unsafe {
        assert!(text(pcap_lib_version()).starts_with("netsift libpcap"));
        assert_eq!(text(pcap_datalink_val_to_name(1)), "EN10MB");
        assert_eq!(text(pcap_datalink_val_to_description(1)), "Ethernet");
        assert_eq!(text(pcap_datalink_val_to_name(113)), "LINUX_SLL");
        assert!(pcap_datalink_val_to_name(100_000).is_null());
        let n = CString::new("en10mb").unwrap();
        assert_eq!(pcap_datalink_name_to_val(n.as_ptr()), 1);
        let t = CString::new("adapter_unsynced").unwrap();
        assert_eq!(pcap_tstamp_type_name_to_val(t.as_ptr()), 4);
        assert_eq!(text(pcap_tstamp_type_val_to_name(0)), "host");
        assert_eq!(text(pcap_tstamp_type_val_to_description(3)), "Adapter");
        assert_eq!(
            text(pcap_statustostr(PCAP_ERROR_NO_SUCH_DEVICE)),
            "No such device exists"
        );
        assert_eq!(text(pcap_statustostr(-99)), "Unknown error: -99");
        assert_eq!(text(pcap_strerror(2)), "No such file or directory");
    }
}

#[test]
fn created_handles_and_devices() {
    let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
    unsafe {
        let p = pcap_create(ptr::null(), errbuf.as_mut_ptr());
        assert!(!p.is_null());
        assert_eq!(pcap_datalink(p), PCAP_ERROR_NOT_ACTIVATED);
        assert_eq!(pcap_set_snaplen(p, 96), 0);
        assert_eq!(
            pcap_set_tstamp_precision(p, 7),
            PCAP_ERROR_TSTAMP_PRECISION_NOTSUP
        );
        assert_eq!(pcap_set_tstamp_type(p, 2), PCAP_WARNING_TSTAMP_TYPE_NOTSUP);
        // No device is the `any` device: a cooked capture on every interface, LINUX_SLL
        // first and LINUX_SLL2 on request, as in libpcap.
        assert_eq!(pcap_activate(p), 0, "{}", text(pcap_geterr(p)));
        assert_eq!(pcap_datalink(p), 113);
        let mut dlts: *mut c_int = ptr::null_mut();
        assert_eq!(pcap_list_datalinks(p, &mut dlts), 2);
        assert_eq!((*dlts, *dlts.add(1)), (113, 276));
        pcap_free_datalinks(dlts);
        assert_eq!(pcap_set_datalink(p, 276), 0);
        assert_eq!(pcap_datalink(p), 276);
        assert_eq!(pcap_set_datalink(p, 1), PCAP_ERROR);
        pcap_close(p);

        let dev = CString::new("nsift-no-such-dev").unwrap();
        let p = pcap_create(dev.as_ptr(), errbuf.as_mut_ptr());
        assert_eq!(pcap_activate(p), PCAP_ERROR_NO_SUCH_DEVICE);
        pcap_close(p);
        assert!(pcap_open_live(dev.as_ptr(), 100, 0, 10, errbuf.as_mut_ptr()).is_null());
        assert!(text(errbuf.as_ptr()).starts_with("nsift-no-such-dev: No such device exists ("));

        // Settings after activation are refused, as in libpcap.
        let path = sample("act.pcap", 1, Precision::Micro);
        let p = open(&path);
        assert_eq!(pcap_set_snaplen(p, 10), PCAP_ERROR_ACTIVATED);
        pcap_close(p);

        let mut list: *mut PcapIf = ptr::null_mut();
        assert_eq!(pcap_findalldevs(&mut list, errbuf.as_mut_ptr()), 0);
        let mut names = Vec::new();
        let mut cur = list;
        while !cur.is_null() {
            names.push((text((*cur).name), (*cur).flags));
            cur = (*cur).next;
        }
        pcap_freealldevs(list);
        let lo = names.iter().find(|(n, _)| n == "lo").expect("lo is listed");
        assert_ne!(lo.1 & PCAP_IF_LOOPBACK, 0);
        // libpcap's order: running devices first.
        let running: Vec<bool> = names
            .iter()
            .map(|(_, f)| f & PCAP_IF_RUNNING != 0)
            .collect();
        assert!(running.windows(2).all(|w| w[0] >= w[1]), "{names:?}");

        let lo = CString::new("lo").unwrap();
        let (mut net, mut mask) = (0u32, 0u32);
        assert_eq!(
            pcap_lookupnet(lo.as_ptr(), &mut net, &mut mask, errbuf.as_mut_ptr()),
            0
        );
        assert_eq!(u32::from_be(mask), 0xff00_0000);
        assert_eq!(u32::from_be(net), 0x7f00_0000);
    }
}

#[test]
fn datalink_lists() {
    let path = sample("dl.pcap", 1, Precision::Micro);
    let p = open(&path);
    unsafe {
        let mut dl: *mut c_int = ptr::null_mut();
        assert_eq!(pcap_list_datalinks(p, &mut dl), 1);
        assert_eq!(*dl, 1);
        pcap_free_datalinks(dl);
        assert_eq!(pcap_set_datalink(p, 1), 0);
        assert_eq!(pcap_set_datalink(p, 113), PCAP_ERROR);
        assert_eq!(
            text(pcap_geterr(p)),
            "LINUX_SLL is not one of the DLTs supported by this device"
        );
        let mut ts: *mut c_int = ptr::null_mut();
        assert_eq!(pcap_list_tstamp_types(p, &mut ts), 1);
        pcap_free_tstamp_types(ts);
        pcap_close(p);
    }
}

/// `pcap_dump` writes each record as libpcap does — the header's timestamp as given, in the
/// handle's precision, and its lengths — and what the pcap format cannot hold as netsift's
/// writer does: a fraction of a second or more carried into the seconds, bytes beyond the
/// snapshot length cut, a time before 1970 not written.
#[test]
fn dump_records_in_both_precisions() {
    fn record(secs: u32, frac: u32, caplen: u32, len: u32, data: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        for v in [secs, frac, caplen, len] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        r.extend_from_slice(data);
        r
    }
    let bytes: Vec<u8> = (0..12).collect();
    for (precision, unit) in [(0u32, 1_000_000i64), (1, 1_000_000_000)] {
        let out = tmp(&format!("records-{precision}.pcap"));
        let out_c = CString::new(out.to_str().unwrap()).unwrap();
        // (seconds, fraction, bytes given, wire length)
        let cases: [(i64, i64, usize, u32); 5] = [
            (5, unit - 1, 4, 60),
            (0, 0, 10, 10),
            (7, unit + 250, 4, 4),
            (9, 1, 12, 1000),
            (-1, 0, 4, 4),
        ];
        unsafe {
            let p = pcap_open_dead_with_tstamp_precision(1, 10, precision);
            assert!(!p.is_null());
            let d = pcap_dump_open(p, out_c.as_ptr());
            assert!(!d.is_null(), "{}", text(pcap_geterr(p)));
            for (secs, frac, n, len) in cases {
                let h = PcapPkthdr {
                    ts: Timeval {
                        tv_sec: secs as libc::time_t,
                        tv_usec: frac as libc::suseconds_t,
                    },
                    caplen: n as u32,
                    len,
                };
                pcap_dump(d.cast(), &h, bytes.as_ptr());
            }
            pcap_dump_close(d);
            pcap_close(p);
        }
        let file = std::fs::read(&out).unwrap();
        let mut want = Vec::new();
        want.extend(record(5, (unit - 1) as u32, 4, 60, &bytes[..4]));
        want.extend(record(0, 0, 10, 10, &bytes[..10]));
        // A fraction of a whole second or more: carried into the seconds.
        want.extend(record(8, 250, 4, 4, &bytes[..4]));
        // More bytes than the snapshot length of 10: cut, the wire length kept.
        want.extend(record(9, 1, 10, 1000, &bytes[..10]));
        // Before 1970: not written.
        assert_eq!(file[24..], want[..], "precision {precision}");
    }
}
