//! Reads every capture of the shared corpus (`data/captures/tcpdump` and `data/captures/libpcap`)
//! and compares the packets with what libpcap delivers, through `tcpdump -w`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Outcome, capture_files, read_file};
use netsift_capture::CaptureReader;

const TCPDUMP_FILES: usize = 830;
const LIBPCAP_FILES: usize = 37;

fn all_files() -> Vec<PathBuf> {
    let tcpdump = capture_files("tcpdump");
    let libpcap = capture_files("libpcap");
    assert_eq!(
        tcpdump.len(),
        TCPDUMP_FILES,
        "expected {TCPDUMP_FILES} captures in data/captures/tcpdump"
    );
    assert_eq!(
        libpcap.len(),
        LIBPCAP_FILES,
        "expected {LIBPCAP_FILES} captures in data/captures/libpcap"
    );
    tcpdump.into_iter().chain(libpcap).collect()
}

/// Reads every file with the streaming file reader and prints a summary. Must not panic or hang.
#[test]
fn corpus_walk() {
    let files = all_files();
    let mut packets = 0usize;
    let mut bytes = 0usize;
    let mut errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut formats: BTreeMap<String, usize> = BTreeMap::new();
    for path in &files {
        let mut reader = match CaptureReader::open(path) {
            Ok(r) => r,
            Err(e) => {
                errors
                    .entry(format!("{:?}", e.kind()))
                    .or_default()
                    .push(format!("{}: {e}", name(path)));
                continue;
            }
        };
        let format = match reader.format() {
            netsift_capture::Format::Pcap { byte_order, .. } => format!("pcap {byte_order:?}"),
            netsift_capture::Format::Pcapng { .. } => "pcapng".to_owned(),
            _ => "other".to_owned(),
        };
        *formats.entry(format).or_default() += 1;
        while let Some(p) = reader.next_packet() {
            match p {
                Ok(p) => {
                    packets += 1;
                    bytes += p.data.len();
                }
                Err(e) => {
                    errors
                        .entry(format!("{:?}", e.kind()))
                        .or_default()
                        .push(format!("{}: {e}", name(path)));
                    break;
                }
            }
        }
    }
    let failed: usize = errors.values().map(Vec::len).sum();
    println!(
        "corpus walk: {} files, {packets} packets ({bytes} captured bytes), {failed} files ending in an error",
        files.len()
    );
    println!("formats: {formats:?}");
    for (kind, list) in &errors {
        println!("  {kind}: {} files", list.len());
        for line in list {
            println!("    {line}");
        }
    }
    assert!(packets > 8000, "suspiciously few packets: {packets}");
}

fn name(path: &Path) -> String {
    let parent = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{parent}/{file}")
}

/// One packet as libpcap delivered it.
struct Reference {
    secs: u32,
    nanos: u32,
    wire_len: u32,
    data: Vec<u8>,
}

/// What `tcpdump -r FILE -w - --time-stamp-precision=nano` wrote and whether it succeeded.
struct TcpdumpRun {
    packets: Vec<Reference>,
    /// tcpdump's own error message, if it did not read the file to the end.
    error: Option<String>,
}

/// Parses the nanosecond pcap file that tcpdump writes (host byte order).
fn parse_tcpdump_output(out: &[u8]) -> Result<Vec<Reference>, String> {
    if out.is_empty() {
        return Ok(Vec::new());
    }
    if out.len() < 24 {
        return Err(format!("short pcap header ({} bytes)", out.len()));
    }
    let u32_at = |at: usize| u32::from_ne_bytes([out[at], out[at + 1], out[at + 2], out[at + 3]]);
    if u32_at(0) != 0xa1b2_3c4d {
        return Err(format!("unexpected magic {:08x}", u32_at(0)));
    }
    let mut at = 24;
    let mut packets = Vec::new();
    while at < out.len() {
        if at + 16 > out.len() {
            return Err("truncated record header".to_owned());
        }
        let caplen = u32_at(at + 8) as usize;
        let start = at + 16;
        let end = start + caplen;
        if end > out.len() {
            return Err("truncated record".to_owned());
        }
        packets.push(Reference {
            secs: u32_at(at),
            nanos: u32_at(at + 4),
            wire_len: u32_at(at + 12),
            data: out[start..end].to_vec(),
        });
        at = end;
    }
    Ok(packets)
}

fn run_tcpdump(path: &Path) -> TcpdumpRun {
    let output = Command::new("tcpdump")
        .arg("-r")
        .arg(path)
        .args(["-w", "-", "--time-stamp-precision=nano"])
        .output()
        .expect("run tcpdump");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let complaints: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("reading from file"))
        .collect();
    let mut error = if output.status.success() && complaints.is_empty() {
        None
    } else {
        Some(format!("{} {}", output.status, complaints.join(" / ")))
    };
    let packets = match parse_tcpdump_output(&output.stdout) {
        Ok(p) => p,
        Err(e) => {
            error.get_or_insert(e);
            Vec::new()
        }
    };
    TcpdumpRun { packets, error }
}

fn tcpdump_available() -> bool {
    Command::new("tcpdump")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// The raw seconds and sub-second fields of the pcap record at `offset`, and the number of
/// nanoseconds per sub-second unit, read independently of the library.
fn raw_pcap_timestamp(file: &[u8], offset: u64) -> Option<(u32, u32, u32)> {
    let magic = file.get(..4)?;
    let (big, nano) = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x34, 0xcd, 0xb2, 0xa1] => (false, false),
        [0x4d, 0x3c, 0xb2, 0xa1] => (false, true),
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0xcd, 0x34] => (true, false),
        [0xa1, 0xb2, 0x3c, 0x4d] => (true, true),
        _ => return None,
    };
    let at = usize::try_from(offset).ok()?;
    let field = |i: usize| -> Option<u32> {
        let b: [u8; 4] = file.get(at + i..at + i + 4)?.try_into().ok()?;
        Some(if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
    Some((field(0)?, field(4)?, if nano { 1 } else { 1000 }))
}

/// Compares one file; returns a description of each difference, and of each difference that is
/// explained by an out-of-range sub-second field.
///
/// NOTE: when a pcap record's sub-second field is out of range (10^6 microseconds or more),
/// libpcap multiplies it by 1000 in 64 bits (sign-extending it from 32), and then both
/// `pcap_dump` and tcpdump's printing truncate the result to 32 bits, so what tcpdump shows is
/// not an instant at all. We read the field as the pcap specification says (unsigned) and carry
/// whole seconds over, and check that instead.
fn compare(path: &Path, mine: &Outcome, reference: &TcpdumpRun) -> (Vec<String>, Vec<String>) {
    const WRAP: i128 = (1i128 << 32) * 1_000_000_000;
    let mut problems = Vec::new();
    let mut explained = Vec::new();
    let file = std::fs::read(path).expect("read capture");
    let n = reference.packets.len();
    if mine.packets.len() < n {
        problems.push(format!(
            "{}: libpcap reads {n} packets, we deliver {} (error: {:?})",
            name(path),
            mine.packets.len(),
            mine.error.as_ref().map(|e| e.to_string())
        ));
    }
    if reference.error.is_none() {
        if let Some(e) = &mine.error {
            problems.push(format!(
                "{}: libpcap reads the whole file, we stop with: {e}",
                name(path)
            ));
        } else if mine.packets.len() != n {
            problems.push(format!(
                "{}: libpcap reads {n} packets, we read {}",
                name(path),
                mine.packets.len()
            ));
        }
    }
    for (i, (ours, theirs)) in mine.packets.iter().zip(&reference.packets).enumerate() {
        // tcpdump writes 32-bit seconds: compare modulo 2^32 seconds.
        let expected = i128::from(theirs.secs) * 1_000_000_000 + i128::from(theirs.nanos);
        let mut ts_ok = (ours.timestamp.as_nanos() - expected).rem_euclid(WRAP) == 0;
        if !ts_ok {
            let record = if i == 0 { 24 } else { mine.ends[i - 1] };
            if let Some((secs, frac, unit)) = raw_pcap_timestamp(&file, record) {
                let limit = 1_000_000_000 / unit;
                let carried =
                    i128::from(secs) * 1_000_000_000 + i128::from(frac) * i128::from(unit);
                if frac >= limit && ours.timestamp.as_nanos() == carried {
                    ts_ok = true;
                    explained.push(format!(
                        "{} packet {i}: sub-second field {frac} out of range; ours {}, libpcap shows {}.{:09}",
                        name(path),
                        ours.timestamp,
                        theirs.secs,
                        theirs.nanos
                    ));
                }
            }
        }
        if !ts_ok || ours.wire_len != theirs.wire_len || ours.data != theirs.data {
            problems.push(format!(
                "{} packet {i}: ours ts {} caplen {} len {}, libpcap ts {}.{:09} caplen {} len {}{}",
                name(path),
                ours.timestamp,
                ours.data.len(),
                ours.wire_len,
                theirs.secs,
                theirs.nanos,
                theirs.data.len(),
                theirs.wire_len,
                if ours.data.len() == theirs.data.len() && ours.data != theirs.data {
                    " (data differs)"
                } else {
                    ""
                }
            ));
            if problems.len() > 3 {
                break;
            }
        }
    }
    (problems, explained)
}

/// For every file: when libpcap (through tcpdump) reads N packets, we deliver at least those N
/// packets with identical timestamps, lengths and bytes; when libpcap reads the whole file
/// without error, so do we, with exactly the same packets.
#[test]
fn tcpdump_cross_check() {
    let files = all_files();
    if !tcpdump_available() {
        println!(
            "NOTICE: the tcpdump binary was not found; skipping the comparison with libpcap \
             (the corpus itself is read by corpus_walk)"
        );
        return;
    }
    let threads = 2;
    let chunks: Vec<&[PathBuf]> = files.chunks(files.len().div_ceil(threads)).collect();
    type Summary = (usize, usize, usize, Vec<String>, Vec<String>);
    let results: Vec<Summary> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                s.spawn(move || {
                    let (mut packets, mut clean, mut td_errors) = (0, 0, 0);
                    let (mut problems, mut explained) = (Vec::new(), Vec::new());
                    for path in *chunk {
                        let mine = read_file(path);
                        let reference = run_tcpdump(path);
                        packets += reference.packets.len();
                        if reference.error.is_none() {
                            clean += 1;
                        } else {
                            td_errors += 1;
                        }
                        let (p, e) = compare(path, &mine, &reference);
                        problems.extend(p);
                        explained.extend(e);
                    }
                    (packets, clean, td_errors, problems, explained)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker"))
            .collect()
    });
    let packets: usize = results.iter().map(|r| r.0).sum();
    let clean: usize = results.iter().map(|r| r.1).sum();
    let td_errors: usize = results.iter().map(|r| r.2).sum();
    let problems: Vec<&String> = results.iter().flat_map(|r| &r.3).collect();
    let explained: Vec<&String> = results.iter().flat_map(|r| &r.4).collect();
    println!(
        "tcpdump cross-check: {} files, {clean} read completely by libpcap, {td_errors} with a libpcap error, \
         {packets} packets compared, {} differences, {} explained by out-of-range timestamp fields",
        files.len(),
        problems.len(),
        explained.len()
    );
    for e in &explained {
        println!("  explained: {e}");
    }
    for p in &problems {
        println!("  {p}");
    }
    assert!(
        problems.is_empty(),
        "{} differences from libpcap",
        problems.len()
    );
}
