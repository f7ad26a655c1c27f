//! The shared test data: captures and libpcap's filter test suite.
//!
//! The data lives beside the repository in `../shared/data` (or wherever `$NETSIFT_SHARED_DATA`
//! points) and is never copied into the repository. [`dir`] panics with instructions when it is
//! missing, so a test that needs the data fails loudly instead of passing vacuously.

use std::fs;
use std::path::{Path, PathBuf};

/// The shared data directory. Panics, saying where it looked, if it does not exist.
pub fn dir() -> PathBuf {
    if let Some(p) = std::env::var_os("NETSIFT_SHARED_DATA") {
        let p = PathBuf::from(p);
        assert!(
            p.join("captures").is_dir(),
            "NETSIFT_SHARED_DATA={} does not contain captures/: point it at the shared `data` \
             directory",
            p.display()
        );
        return p;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let p = repo.join("../shared/data");
    assert!(
        p.join("captures").is_dir(),
        "the shared test data is missing: looked for {} (the `shared/data` directory beside the \
         repository). Put it there or set NETSIFT_SHARED_DATA to its path.",
        p.display()
    );
    p
}

/// All files in `sub` (relative to [`dir`]) with one of the given extensions, sorted.
pub fn files(sub: &str, extensions: &[&str]) -> Vec<PathBuf> {
    let d = dir().join(sub);
    let mut out: Vec<PathBuf> = fs::read_dir(&d)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", d.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| extensions.contains(&e))
        })
        .collect();
    out.sort();
    out
}

/// The 830 tcpdump test captures (`captures/tcpdump/*.pcap{,ng}`).
pub fn tcpdump_captures() -> Vec<PathBuf> {
    files("captures/tcpdump", &["pcap", "pcapng"])
}

/// The libpcap filter-test captures (`captures/libpcap/*`).
pub fn libpcap_captures() -> Vec<PathBuf> {
    files("captures/libpcap", &["pcap", "pcapng"])
}

/// One row of a libpcap test table (`accept.tsv`, `apply.tsv`, `reject.tsv`): column name to
/// raw value. Only the multi-line columns (dumps, results) are escaped; see [`Row::get_multiline`].
#[derive(Clone, Debug)]
pub struct Row {
    columns: Vec<(String, String)>,
}

impl Row {
    /// The value of column `name`. Panics if the table has no such column.
    pub fn get(&self, name: &str) -> &str {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no column `{name}` in {:?}", self.columns))
    }

    /// The value of a multi-line column (`expected_bpf_dump`, `expected_results`) with `\n` and
    /// `\t` unescaped. Filter expressions are not escaped (`ether proto \netbeui` is literal).
    pub fn get_multiline(&self, name: &str) -> String {
        unescape(self.get(name))
    }
}

/// Read `libpcap-tests/<name>` (a TSV with a header line).
pub fn libpcap_table(name: &str) -> Vec<Row> {
    let path = dir().join("libpcap-tests").join(name);
    let text =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split('\t')
        .map(str::to_owned)
        .collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| Row {
            columns: header
                .iter()
                .cloned()
                .zip(
                    l.split('\t')
                        .map(str::to_owned)
                        .chain(std::iter::repeat(String::new())),
                )
                .collect(),
        })
        .collect()
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}
