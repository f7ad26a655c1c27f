//! Helpers shared by the integration tests: finding the shared test data and reading captures
//! completely.

#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};

use netsift_capture::{CaptureReader, Error, Packet};

/// The environment variable that overrides where the shared `data` directory is.
pub const DATA_ENV: &str = "NETSIFT_SHARED_DATA";

/// The shared `data` directory (`../shared/data` beside the repository, or `$NETSIFT_SHARED_DATA`).
///
/// Panics with instructions if it is missing: these tests must not pass silently without data.
pub fn shared_data_dir() -> PathBuf {
    let (dir, how) = match std::env::var_os(DATA_ENV) {
        Some(dir) => (PathBuf::from(dir), format!("from ${DATA_ENV}")),
        None => (
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
            "the default location beside the repository".to_owned(),
        ),
    };
    assert!(
        dir.join("captures").is_dir(),
        "shared test data not found: looked for {} ({how}). Put the shared folder beside the \
         repository root (../shared/data) or set {DATA_ENV} to the path of its `data` directory.",
        dir.join("captures").display(),
    );
    dir
}

/// The files of `data/captures/<sub>`, sorted by name.
pub fn capture_files(sub: &str) -> Vec<PathBuf> {
    let dir = shared_data_dir().join("captures").join(sub);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Everything a reader delivers from one input.
#[derive(Debug)]
pub struct Outcome {
    pub packets: Vec<Packet>,
    /// `position()` after each packet: the offset just past its record or block.
    pub ends: Vec<u64>,
    /// The error that ended the reading (from `new` or `next_packet`), if any.
    pub error: Option<Error>,
}

/// Reads `bytes` to the end or to the first error.
pub fn read_bytes(bytes: &[u8]) -> Outcome {
    let mut outcome = Outcome {
        packets: Vec::new(),
        ends: Vec::new(),
        error: None,
    };
    let mut reader = match CaptureReader::new(bytes) {
        Ok(r) => r,
        Err(e) => {
            outcome.error = Some(e);
            return outcome;
        }
    };
    loop {
        match reader.next_packet() {
            None => break,
            Some(Ok(p)) => outcome.packets.push(p.to_owned()),
            Some(Err(e)) => {
                outcome.error = Some(e);
                break;
            }
        }
        outcome.ends.push(reader.position());
    }
    assert!(reader.next_packet().is_none(), "nothing after the end");
    outcome
}

/// Reads the file at `path` (into memory first) to the end or to the first error.
pub fn read_file(path: &Path) -> Outcome {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    read_bytes(&bytes)
}
