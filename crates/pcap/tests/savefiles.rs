//! Savefiles at the edges of what libpcap 1.10.3 reads: programs get the same answers from
//! netsift's library as from Debian's. Each file is read by Debian's tcpdump on both libraries
//! (exit status, stdout and stderr compared), and a zero-length record by tcpflow, which reads a
//! link-layer header before it looks at the captured length.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A pcap file header (little-endian, microseconds) with this version, snap length and link
/// type.
fn pcap_header(major: u16, minor: u16, snaplen: u32, network: u32) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend(0xa1b2_c3d4u32.to_le_bytes());
    f.extend(major.to_le_bytes());
    f.extend(minor.to_le_bytes());
    f.extend([0u8; 8]);
    f.extend(snaplen.to_le_bytes());
    f.extend(network.to_le_bytes());
    f
}

/// A pcap record header and its bytes.
fn pcap_record(sec: u32, data: &[u8], wire_len: u32) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend(sec.to_le_bytes());
    r.extend(0u32.to_le_bytes());
    r.extend((data.len() as u32).to_le_bytes());
    r.extend(wire_len.to_le_bytes());
    r.extend(data);
    r
}

/// A pcapng block (little-endian) with its body padded to 4 bytes.
fn block(ty: u32, body: &[u8]) -> Vec<u8> {
    let padded = (body.len() + 3) & !3;
    let total = (12 + padded) as u32;
    let mut b = Vec::new();
    b.extend(ty.to_le_bytes());
    b.extend(total.to_le_bytes());
    b.extend(body);
    b.resize(8 + padded, 0);
    b.extend(total.to_le_bytes());
    b
}

/// A pcapng file: a section header of this version, one Ethernet interface and one packet.
fn pcapng(major: u16, minor: u16) -> Vec<u8> {
    let mut shb = Vec::new();
    shb.extend(0x1a2b_3c4du32.to_le_bytes());
    shb.extend(major.to_le_bytes());
    shb.extend(minor.to_le_bytes());
    shb.extend([0xff; 8]);
    let mut idb = Vec::new();
    idb.extend(1u16.to_le_bytes());
    idb.extend(0u16.to_le_bytes());
    idb.extend(0u32.to_le_bytes());
    let frame = udp_frame();
    let mut epb = Vec::new();
    epb.extend(0u32.to_le_bytes());
    epb.extend(0u32.to_le_bytes());
    epb.extend(1_000_000u32.to_le_bytes());
    epb.extend((frame.len() as u32).to_le_bytes());
    epb.extend((frame.len() as u32).to_le_bytes());
    epb.extend(&frame);
    let mut f = block(0x0a0d_0d0a, &shb);
    f.extend(block(1, &idb));
    f.extend(block(6, &epb));
    f
}

/// A UDP frame between test addresses.
fn udp_frame() -> Vec<u8> {
    netsift_capture::generate::FrameBuilder::new()
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2])
        .udp(4000, 53)
        .payload(b"netsift")
        .build()
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("netsift-savefiles-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// tcpdump -r FILE -n -tt on netsift's library (`lib`) or on Debian's.
fn tcpdump(file: &Path, lib: Option<&Path>) -> (Option<i32>, String, String) {
    let mut c = Command::new(common::tcpdump());
    c.arg("-r").arg(file).args(["-n", "-tt"]);
    match lib {
        Some(dir) => c.env("LD_LIBRARY_PATH", dir),
        None => c.env_remove("LD_LIBRARY_PATH"),
    };
    let out = c.output().expect("run tcpdump");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn versions_and_section_headers_are_read_as_libpcap_reads_them() {
    let d = dir();
    let frame = udp_frame();
    let with_record = |mut h: Vec<u8>| {
        h.extend(pcap_record(1, &frame, frame.len() as u32));
        h
    };
    let mut bad_first_trailer = pcapng(1, 0);
    let shb_end = 28;
    bad_first_trailer[shb_end - 4] ^= 0x40;
    let mut bad_second_trailer = pcapng(1, 0);
    let mut second = block(0x0a0d_0d0a, &bad_second_trailer[8..24]);
    let n = second.len();
    second[n - 4] ^= 0x40;
    bad_second_trailer.extend(second);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "pcap header cut at 10 bytes",
            pcap_header(2, 4, 65535, 1)[..10].to_vec(),
        ),
        (
            "pcap magic cut at 3 bytes",
            pcap_header(2, 4, 65535, 1)[..3].to_vec(),
        ),
        ("pcap 2.4", with_record(pcap_header(2, 4, 65535, 1))),
        ("pcap 2.2", with_record(pcap_header(2, 2, 65535, 1))),
        ("pcap 2.5", with_record(pcap_header(2, 5, 65535, 1))),
        ("pcap 2.127", with_record(pcap_header(2, 127, 65535, 1))),
        ("pcap 1.0", with_record(pcap_header(1, 0, 65535, 1))),
        ("pcap 3.0", with_record(pcap_header(3, 0, 65535, 1))),
        ("pcapng 1.0", pcapng(1, 0)),
        ("pcapng 1.1", pcapng(1, 1)),
        ("pcapng 1.2", pcapng(1, 2)),
        ("pcapng 2.0", pcapng(2, 0)),
        ("pcapng, first SHB trailer disagrees", bad_first_trailer),
        ("pcapng, second SHB trailer disagrees", bad_second_trailer),
    ];
    let mut report = String::new();
    for (name, bytes) in &cases {
        let path = d.join(name.replace([' ', ',', '.'], "_"));
        std::fs::write(&path, bytes).unwrap();
        let theirs = tcpdump(&path, None);
        let ours = tcpdump(&path, Some(common::lib_dir()));
        // tcpdump names the library in nothing it prints for a file; the outputs must be equal.
        assert_eq!(ours, theirs, "{name}: netsift's library, then libpcap's");
        report += &format!(
            "{name}: exit {:?}, {}\n",
            theirs.0,
            theirs.2.lines().next().unwrap_or("")
        );
    }
    println!("{report}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Makes sure Debian's tcpflow is installed.
fn tcpflow() -> &'static str {
    if Command::new("tcpflow").arg("-V").output().is_err() {
        let _ = Command::new("apt-get").args(["update", "-qq"]).status();
        let st = Command::new("apt-get")
            .args(["install", "-y", "tcpflow"])
            .status()
            .expect("run apt-get");
        assert!(
            st.success(),
            "tcpflow is missing and apt-get install -y tcpflow failed"
        );
    }
    "tcpflow"
}

/// A 40-byte DLT_NULL file with one record of captured length 0: tcpflow reads the 4-byte
/// family word of every packet; libpcap's pointer is into its buffer, netsift's must not be
/// the dangling pointer of an empty slice.
#[test]
fn tcpflow_reads_a_zero_length_record() {
    let d = dir().join("tcpflow");
    std::fs::create_dir_all(&d).unwrap();
    let mut f = pcap_header(2, 4, 65535, 0);
    f.extend(pcap_record(1, &[], 0));
    assert_eq!(f.len(), 40);
    let path = d.join("zero.pcap");
    std::fs::write(&path, &f).unwrap();
    let run = |lib: Option<&Path>, out: &str| {
        let out_dir = d.join(out);
        std::fs::create_dir_all(&out_dir).unwrap();
        let mut c = Command::new(tcpflow());
        c.arg("-r").arg(&path).arg("-o").arg(&out_dir);
        match lib {
            Some(dir) => c.env("LD_LIBRARY_PATH", dir),
            None => c.env_remove("LD_LIBRARY_PATH"),
        };
        let o = c.output().expect("run tcpflow");
        let stderr = String::from_utf8_lossy(&o.stderr).replace(out_dir.to_str().unwrap(), "OUT");
        (o.status.code(), stderr)
    };
    let theirs = run(None, "libpcap");
    let ours = run(Some(common::lib_dir()), "netsift");
    assert_eq!(theirs.0, Some(0), "tcpflow on libpcap: {theirs:?}");
    assert_eq!(
        ours, theirs,
        "tcpflow on netsift's library, then on libpcap's"
    );
    let _ = std::fs::remove_dir_all(&d);
}
