//! The shared verdict corpus: libpcap's filter test suite (expressions) against the shared
//! captures (packets), grouped by link type, with libpcap 1.10 as the oracle.

use std::collections::BTreeMap;

use netsift_wire::LinkType;

use crate::{data, oracle};

/// The link types netsift's compiler supports, by libpcap name: every expression libpcap
/// compiles for them compiles, with libpcap's verdicts.
pub const LINK_TYPES: [&str; 44] = [
    "EN10MB",
    "RAW",
    "LINUX_SLL",
    "LINUX_SLL2",
    "NULL",
    "LOOP",
    "IPV4",
    "IPV6",
    "ENC",
    "PPP",
    "PPP_PPPD",
    "PPP_SERIAL",
    "PPP_ETHER",
    "PPP_BSDOS",
    "C_HDLC",
    "SLIP",
    "SLIP_BSDOS",
    "LTALK",
    "FRELAY",
    "JUNIPER_MFR",
    "SYMANTEC_FIREWALL",
    "APPLE_IP_OVER_IEEE1394",
    "FDDI",
    "IEEE802",
    "IP_OVER_FC",
    "ATM_RFC1483",
    "ATM_CLIP",
    "IEEE802_11",
    "IEEE802_11_RADIO",
    "PRISM_HEADER",
    "IEEE802_11_RADIO_AVS",
    "PPI",
    "PFLOG",
    "ARCNET",
    "ARCNET_LINUX",
    "IPNET",
    "NETANALYZER",
    "NETANALYZER_TRANSPARENT",
    "BACNET_MS_TP",
    "SUNATM",
    "MTP2",
    "MTP2_WITH_PHDR",
    "DSA_TAG_BRCM",
    "DSA_TAG_DSA",
];

/// [`LINK_TYPES`], or those of them named in `NETSIFT_CORPUS_DLT` (comma-separated; for
/// working on one link type).
pub fn link_types() -> Vec<&'static str> {
    match std::env::var("NETSIFT_CORPUS_DLT") {
        Ok(only) if !only.is_empty() => LINK_TYPES
            .iter()
            .copied()
            .filter(|l| only.split(',').any(|o| o.eq_ignore_ascii_case(l)))
            .collect(),
        _ => LINK_TYPES.to_vec(),
    }
}

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

/// Packets (bytes, wire length) of every shared capture, grouped by libpcap DLT value; for
/// each link type of [`LINK_TYPES`] with fewer than [`SYNTHESIZED`] captured packets, also the
/// captured Ethernet frames rewritten into that link type by [`synthesize`].
pub fn packets_by_dlt() -> BTreeMap<i32, Vec<(Vec<u8>, u32)>> {
    let mut by_dlt: BTreeMap<i32, Packets> = captures_by_dlt()
        .into_iter()
        .map(|(dlt, (_, packets))| (dlt, packets))
        .collect();
    let ethernet = by_dlt.get(&1).cloned().unwrap_or_default();
    for name in LINK_TYPES {
        let Some(dlt) = oracle::dlt_from_name(name) else {
            continue;
        };
        let have = by_dlt.get(&dlt).map_or(0, Vec::len);
        if have < SYNTHESIZED {
            let made = synthesize(dlt, &ethernet, SYNTHESIZED - have);
            by_dlt.entry(dlt).or_default().extend(made);
        }
    }
    by_dlt
}

/// How many packets of each supported link type the verdict corpus holds at least (captured
/// ones first, then synthesized).
pub const SYNTHESIZED: usize = 2_000;

/// An 802.11 frame carrying `llc` (a data frame, or every few frames a management or control
/// frame or a null data frame), its direction bits and QoS field cycling with `i`, after the
/// radio header of `dlt` (radiotap with and without TSFT, flags, data padding and an
/// extension bit; Prism, alone or with an AVS header; AVS; PPI, mostly for 802.11).
fn wlan(dlt: i32, i: usize, dst: &[u8], src: &[u8], llc: &[u8]) -> Vec<u8> {
    let bssid = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
    let (fc0, body) = match i % 8 {
        4 => (0x80u8, false),
        5 => (0xd4, false),
        6 => (0x48, false),
        7 => (0xb4, false),
        k => (if k % 2 == 1 { 0x88 } else { 0x08 }, true),
    };
    let dir = ((i / 8) % 4) as u8;
    let (a1, a2, a3, a4): (&[u8], &[u8], &[u8], &[u8]) = match dir {
        0 => (dst, src, &bssid, &[]),
        1 => (&bssid, src, dst, &[]),
        2 => (dst, &bssid, src, &[]),
        _ => (&bssid, &bssid, dst, src),
    };
    let mut h = vec![fc0, dir, 0, 0];
    for a in [a1, a2, a3] {
        h.extend_from_slice(a);
    }
    h.extend_from_slice(&[0x10, 0x00]);
    h.extend_from_slice(a4);
    if fc0 & 0x8c == 0x88 {
        h.extend_from_slice(&[0, 0]);
    }
    // Radiotap's data padding: the 802.11 header padded to a multiple of 4.
    let pad = dlt == 127 && (i / 32) % 4 == 1;
    if pad {
        while h.len() % 4 != 0 {
            h.push(0);
        }
    }
    if body {
        h.extend_from_slice(llc);
    }
    let prefix: Vec<u8> = match dlt {
        127 => match (i / 32) % 4 {
            0 => vec![0, 0, 8, 0, 0, 0, 0, 0],
            1 => vec![0, 0, 9, 0, 0x02, 0, 0, 0, 0x20],
            2 => {
                let mut v = vec![0, 0, 17, 0, 0x03, 0, 0, 0];
                v.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
                v.push(if i % 3 == 0 { 0x20 } else { 0x10 });
                v
            }
            _ => vec![0, 0, 13, 0, 0x02, 0, 0, 0x80, 0, 0, 0, 0, 0x20],
        },
        119 => {
            if i % 5 == 0 {
                let mut v = vec![0x80, 0x21, 0x10, 0x01, 0, 0, 0, 64];
                v.resize(64, 0);
                v
            } else {
                let mut v = vec![0x44, 0, 0, 0, 144, 0, 0, 0];
                v.resize(144, 0);
                v
            }
        }
        163 => {
            let mut v = vec![0x80, 0x21, 0x10, 0x01, 0, 0, 0, 64];
            v.resize(64, 0);
            v
        }
        192 => {
            let d: u32 = if i % 9 == 0 { 1 } else { 105 };
            let mut v = vec![0, 0, 8, 0];
            v.extend_from_slice(&d.to_le_bytes());
            v
        }
        _ => Vec::new(),
    };
    [prefix, h].concat()
}

/// Up to `n` packets of link type `dlt` (a DLT value) made from Ethernet frames: the frame's
/// addresses, type and payload put into that link type's header as its senders write it (an
/// LLC/SNAP header where the link type carries one, PPP protocol numbers for PPP, the address
/// family for ENC, an NLPID for Frame Relay, …), with the header's other bytes varied (SLIP's
/// direction byte, the Juniper flags) and every seventh packet cut short, so that filters
/// meet both their expected and their unexpected cases. A link type it has no header for gets
/// the Ethernet frames as they are (its link-independent filters still have packets).
pub fn synthesize(dlt: i32, ethernet: &[(Vec<u8>, u32)], n: usize) -> Packets {
    fn ppp(et: u16) -> u16 {
        match et {
            0x0800 => 0x0021,
            0x86dd => 0x0057,
            0x6003 => 0x0027,
            0x809b => 0x0029,
            0x0600 => 0x0025,
            0x8137 => 0x002b,
            other => other,
        }
    }
    let mut out = Vec::with_capacity(n);
    for (i, (f, _)) in ethernet.iter().filter(|(f, _)| f.len() >= 14).enumerate() {
        if out.len() >= n {
            break;
        }
        let (dst, src) = (&f[0..6], &f[6..12]);
        let et = u16::from_be_bytes([f[12], f[13]]);
        let payload = &f[14..];
        // An 802.3 frame already carries LLC; an Ethernet II type goes into SNAP.
        let llc: Vec<u8> = if et <= 1500 {
            payload.to_vec()
        } else {
            let mut v = vec![0xaa, 0xaa, 0x03, 0, 0, 0];
            v.extend_from_slice(&et.to_be_bytes());
            v.extend_from_slice(payload);
            v
        };
        let mut p: Vec<u8> = match dlt {
            10 => [&[0x50][..], dst, src, &llc].concat(),
            6 => [&[0x10, 0x40][..], dst, src, &llc].concat(),
            122 => [&[0x10, 0x00][..], dst, &[0x10, 0x00], src, &llc].concat(),
            11 | 19 => llc,
            9 | 50 => [&[0xff, 0x03][..], &ppp(et).to_be_bytes(), payload].concat(),
            166 => [&[(i % 3) as u8, 0x03][..], &ppp(et).to_be_bytes(), payload].concat(),
            51 => [
                &[0x11, 0x00, 0x12, 0x34][..],
                &(payload.len() as u16 + 2).to_be_bytes(),
                &ppp(et).to_be_bytes(),
                payload,
            ]
            .concat(),
            16 => {
                let mut h = [0u8; 24];
                let t = match (et, i % 4) {
                    (0x0800, 1) => 0x002d,
                    (0x0800, 2) => 0x002f,
                    _ => ppp(et),
                };
                h[5..7].copy_from_slice(&t.to_be_bytes());
                [&h[..], payload].concat()
            }
            104 => {
                let t = if et <= 1500 { 0xfefe } else { et };
                [&[0x0f, 0x00][..], &t.to_be_bytes(), payload].concat()
            }
            8 | 15 => {
                let mut h = vec![0u8; if dlt == 8 { 16 } else { 24 }];
                h[0] = [0, 1, 0x45, 0x60][i % 4];
                [&h[..], payload].concat()
            }
            109 => {
                let af: u32 = match (et, i % 3) {
                    (0x0800, _) => 2,
                    (0x86dd, 0) => 24,
                    (0x86dd, 1) => 28,
                    (0x86dd, _) => 30,
                    _ => (i % 40) as u32,
                };
                let mut h = af.to_ne_bytes().to_vec();
                h.extend_from_slice(&[0u8; 8]);
                [&h[..], payload].concat()
            }
            114 => payload.to_vec(),
            107 => {
                let nlpid = match (et, i % 4) {
                    (0x0800, _) => 0xcc,
                    (0x86dd, _) => 0x8e,
                    (_, 0) => 0x81,
                    (_, 1) => 0x82,
                    (_, 2) => 0x83,
                    _ => 0x80,
                };
                [&[0x18, 0x41, 0x03, nlpid][..], payload].concat()
            }
            134 => [&[b'M', b'G', b'C', (i % 2) as u8][..], payload].concat(),
            99 => {
                let mut h = [0u8; 44];
                h[6..8].copy_from_slice(&et.to_be_bytes());
                [&h[..], payload].concat()
            }
            138 => [dst, &[0, 0][..], src, &[0, 0], &et.to_be_bytes(), payload].concat(),
            105 | 119 | 127 | 163 | 192 => wlan(dlt, i, dst, src, &llc),
            117 => {
                let mut h = vec![0u8; 64];
                h[0] = [61, 45, 64, 0][i % 4];
                h[1] = match (et, i % 5) {
                    (_, 4) => 24,
                    (0x0800, _) => 2,
                    (0x86dd, _) => 10,
                    _ => (i % 30) as u8,
                };
                h[2] = (i % 12) as u8;
                h[3] = (i % 17) as u8;
                h[4..7].copy_from_slice([b"em0", b"lo0", b"re1"][i % 3]);
                h[20..24].copy_from_slice(b"main");
                h[36..40].copy_from_slice(&((i % 7) as u32).to_be_bytes());
                h[40..44].copy_from_slice(&((i % 3) as u32).to_be_bytes());
                h[60] = (i % 3) as u8;
                let len = (usize::from(h[0]) + 3) & !3;
                h.resize(len.max(4), 0);
                [&h[..], payload].concat()
            }
            226 => {
                let mut h = [0u8; 24];
                h[0] = 2;
                h[1] = match (et, i % 5) {
                    (_, 4) => 10,
                    (0x0800, _) => 2,
                    (0x86dd, _) => 26,
                    _ => (i % 30) as u8,
                };
                h[2..4].copy_from_slice(&[0, (i % 3) as u8]);
                [&h[..], payload].concat()
            }
            240 => [&[0u8, 0, 0, 0][..], f].concat(),
            241 => [
                &[0u8, 0, 0, 0, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0xd5][..],
                f,
            ]
            .concat(),
            165 => {
                let pre: &[u8] = if i % 4 == 3 {
                    &[0x55, 0xfe]
                } else {
                    &[0x55, 0xff]
                };
                [pre, &[(i % 8) as u8, 0x01, 0x02, 0, 0, 0][..], payload].concat()
            }
            123 => {
                // Direction and protocol (LANE, LLC, ILMI…), VPI, VCI; for LANE the LE header
                // (0xff00 marks a control frame) and an Ethernet frame; else LLC.
                let proto = [0x02u8, 0x01, 0x05, 0x02, 0x01, 0x06][i % 6];
                let vpi = [0u8, 1, 2, 0][(i / 6) % 4];
                let vci = [1u16, 2, 3, 4, 5, 16, 32, 5][(i / 3) % 8];
                let mut h = vec![proto | if i % 5 == 0 { 0x80 } else { 0 }, vpi];
                h.extend_from_slice(&vci.to_be_bytes());
                if proto == 0x01 {
                    let le: &[u8] = if i % 7 == 0 {
                        &[0xff, 0x00]
                    } else {
                        &[0x00, 0x01]
                    };
                    [&h[..], le, f].concat()
                } else if i % 4 == 3 {
                    // A signalling message: protocol discriminator, call reference, type.
                    let t = [0x05u8, 0x02, 0x07, 0x0f, 0x4d, 0x5a, 0x11][(i / 4) % 7];
                    [
                        &h[..],
                        &[0x09, 0x03, 0x00, 0x00, 0x01, t, 0x80, 0x00][..],
                        payload,
                    ]
                    .concat()
                } else {
                    [&h[..], &llc[..]].concat()
                }
            }
            139 | 140 => {
                // MTP2: BSN/FSN, then the length indicator (FISU 0, LSSU 1-2, MSU >2), SIO,
                // and the routing label (DPC, OPC, SLS).
                let li = [0u8, 1, 2, 3, 20, 63, 0x40 | 5][i % 7];
                let mut h = vec![
                    (i % 128) as u8,
                    0x80,
                    li,
                    [0x03u8, 0x83, 0x05, 0xff][(i / 7) % 4],
                ];
                h.extend_from_slice(&((i as u32).wrapping_mul(0x9e37_79b9)).to_be_bytes());
                h.extend_from_slice(&[(i % 16) as u8 * 0x11, 0, 0, 0]);
                let p = [&h[..], payload].concat();
                if dlt == 139 {
                    [&[0u8, 0, 0, 1][..], &p].concat()
                } else {
                    p
                }
            }
            7 | 129 => {
                let t = match (et, i % 2) {
                    (0x0800, 0) => 0xd4,
                    (0x0800, _) => 0xf0,
                    (0x0806, 0) => 0xd5,
                    (0x0806, _) => 0xf1,
                    (0x8035, _) => 0xd6,
                    (0x86dd, _) => 0xc4,
                    (0x809b, _) => 0xdd,
                    _ => (i % 256) as u8,
                };
                let s = [0xd8u8, 0x8c, 0xde, 0x01][(i / 4) % 4];
                let d = [0u8, 0xde, 0xda, 0x0e][i % 4];
                let h: Vec<u8> = if dlt == 7 {
                    vec![s, d, t, 0, 0, 0]
                } else {
                    vec![s, d, 0, 0, t, 0, 0, 0]
                };
                [&h[..], payload].concat()
            }
            0 | 108 => {
                let af: u32 = match (et, i % 4) {
                    (0x0800, _) => 2,
                    (0x86dd, 0) => 10,
                    (0x86dd, 1) => 24,
                    (0x86dd, 2) => 28,
                    (0x86dd, _) => 30,
                    _ => (i % 32) as u32,
                };
                let af = if dlt == 0 {
                    af.to_ne_bytes()
                } else {
                    af.to_be_bytes()
                };
                [&af[..], payload].concat()
            }
            12 | 228 | 229 => payload.to_vec(),
            113 => {
                let mut h = vec![0u8, (i % 5) as u8, 0, 1, 0, 6];
                h.extend_from_slice(src);
                h.extend_from_slice(&[0, 0]);
                let t = if et <= 1500 { 4 } else { et };
                h.extend_from_slice(&t.to_be_bytes());
                [&h[..], payload].concat()
            }
            276 => {
                let t = if et <= 1500 { 4 } else { et };
                let mut h = t.to_be_bytes().to_vec();
                h.extend_from_slice(&[0, 0]);
                h.extend_from_slice(&((i % 4) as u32).to_be_bytes());
                h.extend_from_slice(&[0, 1, (i % 5) as u8, 6]);
                h.extend_from_slice(src);
                h.extend_from_slice(&[0, 0]);
                [&h[..], payload].concat()
            }
            _ => f.to_vec(),
        };
        if i % 7 == 6 {
            p.truncate(p.len() / 2);
        }
        let wire = p.len() as u32 + if i % 11 == 10 { 100 } else { 0 };
        out.push((p, wire));
    }
    out
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
        if !link_types().contains(&dlt) || r.get("label").starts_with("accept_bpf_image") {
            continue;
        }
        out.push(Case {
            dlt: dlt.to_string(),
            snaplen: r.get("snaplen").parse().unwrap_or(262_144),
            expr: r.get("expr").to_string(),
        });
    }
    for r in data::libpcap_table("apply.tsv") {
        for dlt in link_types() {
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

/// The netsift link type for a libpcap link-type name (as libpcap's
/// `pcap_datalink_name_to_val` reads it).
pub fn link_type(name: &str) -> LinkType {
    let dlt = oracle::dlt_from_name(name).unwrap_or_else(|| panic!("unknown link type {name}"));
    LinkType::from_dlt(dlt as u32)
}
