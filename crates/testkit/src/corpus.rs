//! The shared verdict corpus: libpcap's filter test suite (expressions) against the shared
//! captures (packets), grouped by link type, with libpcap 1.10 as the oracle.

use std::collections::BTreeMap;

use netsift_wire::LinkType;

use crate::{data, oracle};

/// The link types netsift's compiler supports, by libpcap name.
pub const LINK_TYPES: [&str; 8] = [
    "EN10MB",
    "RAW",
    "LINUX_SLL",
    "LINUX_SLL2",
    "NULL",
    "LOOP",
    "IPV4",
    "IPV6",
];

/// One expression of libpcap's tables.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Case {
    /// Link type name (`EN10MB`…).
    pub dlt: String,
    /// Snap length.
    pub snaplen: u32,
    /// The expression.
    pub expr: String,
}

/// Packets as (bytes, wire length).
pub type Packets = Vec<(Vec<u8>, u32)>;

/// Packets (bytes, wire length) of every shared capture, grouped by libpcap DLT value.
pub fn packets_by_dlt() -> BTreeMap<i32, Vec<(Vec<u8>, u32)>> {
    captures_by_dlt()
        .into_iter()
        .map(|(dlt, (_, packets))| (dlt, packets))
        .collect()
}

/// For each libpcap DLT value, how many shared captures have it and their packets (bytes, wire
/// length), as libpcap reads them.
pub fn captures_by_dlt() -> BTreeMap<i32, (usize, Packets)> {
    let mut by_dlt: BTreeMap<i32, (usize, Packets)> = BTreeMap::new();
    for path in data::tcpdump_captures()
        .iter()
        .chain(data::libpcap_captures().iter())
    {
        let Ok(cap) = oracle::read_capture(path) else {
            continue;
        };
        let (files, packets) = by_dlt.entry(cap.dlt).or_default();
        *files += 1;
        packets.extend(cap.packets.into_iter().map(|p| (p.data, p.wire_len)));
    }
    by_dlt
}

/// The packets of [`packets_by_dlt`] of link type `dlt` (none when no capture has it).
pub fn packets_of(by_dlt: &BTreeMap<i32, Vec<(Vec<u8>, u32)>>, dlt: i32) -> &[(Vec<u8>, u32)] {
    by_dlt.get(&dlt).map(Vec::as_slice).unwrap_or_default()
}

/// Every distinct (link type, snap length, expression) of `accept.tsv` for the supported link
/// types, plus every `apply.tsv` expression for each supported link type.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for r in data::libpcap_table("accept.tsv") {
        let dlt = r.get("dlt");
        if !LINK_TYPES.contains(&dlt) || r.get("label").starts_with("accept_bpf_image") {
            continue;
        }
        out.push(Case {
            dlt: dlt.to_string(),
            snaplen: r.get("snaplen").parse().unwrap_or(262_144),
            expr: r.get("expr").to_string(),
        });
    }
    for r in data::libpcap_table("apply.tsv") {
        for dlt in LINK_TYPES {
            out.push(Case {
                dlt: dlt.to_string(),
                snaplen: 262_144,
                expr: r.get("expr").to_string(),
            });
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The netsift link type for a libpcap link-type name.
pub fn link_type(name: &str) -> LinkType {
    LinkType::from_name(name).unwrap_or_else(|| panic!("unknown link type {name}"))
}
