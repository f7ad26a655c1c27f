//! Reference answers the live and daemon tests compare with: what Debian's tcpdump prints for
//! frames read from a file, and which packets of the generated mix an expression accepts.

use std::process::Command;

use netsift_capture::{LinkType, PacketRef, PcapWriter, Precision, Timestamp};

/// The lines `tcpdump` (Debian's, found at `tcpdump`, on Debian's libpcap) prints reading
/// `frames` (Ethernet; frame `i` stamped `i` seconds) from a file, with `args` after `-r FILE`
/// (e.g. `["-n", "-t", "-e", "udp"]`). Panics with tcpdump's message if it fails.
pub fn tcpdump_lines(tcpdump: &str, frames: &[Vec<u8>], args: &[&str]) -> Vec<String> {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path =
        std::env::temp_dir().join(format!("netsift-reference-{}-{n}.pcap", std::process::id()));
    let mut w = PcapWriter::new(
        std::fs::File::create(&path).expect("a temporary file"),
        LinkType::ETHERNET,
        262_144,
        Precision::Micro,
    )
    .expect("pcap header");
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PacketRef::new(
            f,
            Timestamp::new(i as i64, 0),
            LinkType::ETHERNET,
        ))
        .expect("write a frame");
    }
    w.flush().expect("flush");
    drop(w);
    let out = Command::new(tcpdump)
        .env_remove("LD_LIBRARY_PATH")
        .arg("-r")
        .arg(&path)
        .args(args)
        .output()
        .expect("run tcpdump -r");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "tcpdump -r {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The packets of [`netsift_capture::generate::mixed_traffic`]`(seed, n)` that `expr` accepts
/// (libpcap's meaning, as netsift's compiler and interpreter give it; Ethernet).
pub fn mixed_accepted(seed: u64, n: usize, expr: &str) -> Vec<Vec<u8>> {
    let pred = netsift_lang::compile(expr, &netsift_lang::Context::new(LinkType::ETHERNET))
        .unwrap_or_else(|e| panic!("`{expr}`: {e}"));
    let prog = netsift_bpf::compile::compile(&pred, &netsift_bpf::compile::Options::default())
        .unwrap_or_else(|e| panic!("`{expr}`: {e}"));
    let f = netsift_bpf::Filter::new(prog, netsift_bpf::Rules::Libpcap).expect("a valid program");
    netsift_capture::generate::mixed_traffic(seed, n)
        .into_iter()
        .filter(|p| f.run(&p.data, p.wire_len) != 0)
        .map(|p| p.data)
        .collect()
}
