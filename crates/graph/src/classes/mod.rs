//! The standard filter classes: sources, samplers, counters, flow tables, string search, sinks.
//!
//! | class | arguments | what it does |
//! |---|---|---|
//! | `sampler` | `N` or `random:N[:SEED]` | passes 1 in `N` packets ([`sampler`]) |
//! | `packetcount` | none (`(packetcount,,8)`) | counts packets in MBuf word 0 ([`counters`]) |
//! | `bytecount` | none (`(bytecount,,8)`) | counts wire bytes in MBuf word 0 ([`counters`]) |
//! | `flowcount` | `[ip\|tcp\|udp]` | per-5-tuple counters in an MBuf hash table ([`flowcount`]) |
//! | `topk` | `K` | the `K` most active 5-tuple flows in MBuf ([`topk`]) |
//! | `strsearch` | `"pat"…` `[whole]` | passes packets whose payload holds a pattern ([`strsearch`]) |
//! | `snap` | `N` | cuts packets to `N` bytes downstream ([`snap`]) |
//! | `pcap` | `"path"` | writes every packet to a pcap file ([`sink`]) |
//! | `file` | `"path"` | source: a pcap or pcapng file ([`sources`]) |
//! | `gen` | `SEED, COUNT` | source: a generated traffic mix ([`sources`]) |
//! | `device` | `IFACE` | source: live `AF_PACKET` capture ([`sources`]) |
//!
//! Every class checks its arguments when it is instantiated and names the bad argument in its
//! error (`sampler: argument 1 (N) must be a whole number from 1 to …, not "x"`). The MBuf size
//! is the argument after the last one a class takes (`(sampler,2,4)`: `N` = 2, 4 bytes of
//! MBuf); classes that take no argument accept one empty argument so that the paper's
//! `(bytecount,,8)` reads as "no argument, 8 bytes of MBuf".
//!
//! No filter here panics on any packet, whatever its bytes, length or link type: headers are
//! parsed with checked slicing ([`flowkey`]) and a packet that cannot be parsed is simply not
//! counted (or not searched).

pub mod counters;
pub mod flowcount;
pub mod flowkey;
pub mod sampler;
pub mod sink;
pub mod snap;
pub mod sources;
pub mod strsearch;
pub mod topk;

use std::sync::Arc;

use crate::class::{Arg, Registry};
use crate::error::Error;

pub use flowcount::FlowTable;
pub use flowkey::FlowKey5;
pub use topk::TopK;

/// Register every standard class of this module in `reg`: `sampler`, `packetcount`,
/// `bytecount`, `flowcount`, `topk`, `strsearch`, `snap`, `pcap`, `file`, `gen`, `device`.
pub fn standard(reg: &mut Registry) {
    reg.register(Arc::new(sampler::SamplerClass));
    reg.register(Arc::new(counters::PacketCountClass));
    reg.register(Arc::new(counters::ByteCountClass));
    reg.register(Arc::new(flowcount::FlowCountClass));
    reg.register(Arc::new(topk::TopKClass));
    reg.register(Arc::new(strsearch::StrSearchClass));
    reg.register(Arc::new(snap::SnapClass));
    reg.register(Arc::new(sink::PcapClass));
    reg.register(Arc::new(sources::FileClass));
    reg.register(Arc::new(sources::GenClass));
    reg.register(Arc::new(sources::DeviceClass));
}

/// Argument `i` (0-based) as a whole number in `lo..=hi`, or an error naming the class, the
/// argument (1-based, as the user counts) and what it should have been.
pub(crate) fn number_arg(
    class: &str,
    args: &[Arg],
    i: usize,
    what: &str,
    lo: u64,
    hi: u64,
) -> Result<u64, Error> {
    let Some(arg) = args.get(i) else {
        return Err(Error::argument(format!(
            "{class}: argument {} ({what}) is missing",
            i + 1
        )));
    };
    match arg.number() {
        Some(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(Error::argument(format!(
            "{class}: argument {} ({what}) must be a whole number from {lo} to {hi}, not {:?}",
            i + 1,
            arg.text
        ))),
    }
}

/// Argument `i` as a non-empty text (a path, an interface name), or an error naming it.
pub(crate) fn text_arg<'a>(
    class: &str,
    args: &'a [Arg],
    i: usize,
    what: &str,
) -> Result<&'a str, Error> {
    match args.get(i) {
        Some(a) if !a.text.trim().is_empty() => Ok(a.text.as_str()),
        Some(_) => Err(Error::argument(format!(
            "{class}: argument {} ({what}) is empty",
            i + 1
        ))),
        None => Err(Error::argument(format!(
            "{class}: argument {} ({what}) is missing",
            i + 1
        ))),
    }
}

/// Check that a class without arguments got none, or only the empty placeholder of
/// `(bytecount,,8)`.
pub(crate) fn no_args(class: &str, args: &[Arg]) -> Result<(), Error> {
    match args.iter().position(|a| !a.text.trim().is_empty()) {
        None => Ok(()),
        Some(i) => Err(Error::argument(format!(
            "{class}: takes no arguments, but argument {} is {:?} (write ({class},,BYTES) to give \
             only the MBuf size)",
            i + 1,
            args[i].text
        ))),
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Helpers shared by the class tests.

    use netsift_capture::{LinkType, Packet, Timestamp};

    use crate::Filter;
    use crate::class::{Arg, Context, FilterClass, Instance, Pkt, Verdict};
    use crate::mbuf::MBuf;

    /// Bare arguments from texts.
    pub fn bare(texts: &[&str]) -> Vec<Arg> {
        texts.iter().map(|t| Arg::bare(t)).collect()
    }

    /// A quoted argument.
    pub fn quoted(text: &str) -> Arg {
        Arg {
            text: text.to_string(),
            quoted: true,
        }
    }

    /// Instantiate a filter, panicking on errors (tests only).
    pub fn filter(class: &dyn FilterClass, args: &[Arg]) -> Box<dyn Filter> {
        match class.instantiate(args, &Context::default()) {
            Ok(Instance::Filter(f)) => f,
            Ok(Instance::Source(_)) => panic!("{} made a source", class.name()),
            Err(e) => panic!("{}: {e}", class.name()),
        }
    }

    /// The text of the error of instantiating, panicking when it succeeds (tests only).
    pub fn error(class: &dyn FilterClass, args: &[Arg]) -> String {
        match class.instantiate(args, &Context::default()) {
            Ok(_) => panic!("{} accepted {args:?}", class.name()),
            Err(e) => e.to_string(),
        }
    }

    /// Run `f` over `pkts` with `mbuf`, returning the verdicts.
    pub fn run(f: &mut dyn Filter, pkts: &[Packet], mbuf: &MBuf) -> Vec<Verdict> {
        pkts.iter().map(|p| f.process(&pkt(p), mbuf)).collect()
    }

    /// A packet as filters see it.
    pub fn pkt(p: &Packet) -> Pkt<'_> {
        Pkt {
            data: &p.data,
            wire_len: p.wire_len,
            timestamp: p.timestamp,
            link_type: p.link_type,
        }
    }

    /// A raw Ethernet packet from bytes.
    pub fn eth(data: Vec<u8>) -> Packet {
        Packet::new(
            data,
            Timestamp::from_nanos(1_000_000_000),
            LinkType::ETHERNET,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class::{Context, Instance};
    use crate::lang;

    /// The MBuf sizes the graph language gives the filters of `text` with the standard classes,
    /// after instantiating each filter (sources not opened: `device` needs privileges).
    fn mbufs(text: &str) -> Vec<(String, usize)> {
        let mut reg = Registry::new();
        standard(&mut reg);
        let mut out = Vec::new();
        for flow in lang::parse(text).unwrap() {
            for f in lang::check(&flow, &reg).unwrap() {
                if !f.class.is_source() {
                    let inst = f.class.instantiate(&f.args, &Context::default());
                    assert!(matches!(inst, Ok(Instance::Filter(_))), "{:?}", f);
                }
                out.push((f.class.name().to_string(), f.mbuf_bytes));
            }
        }
        out
    }

    #[test]
    fn paper_graphs_resolve_with_the_standard_classes() {
        let got = mbufs(
            "(device,eth0) | (device,eth1) -> (sampler,2,4) -> (strsearch,\"GET\",\"\\x90\\x90\",16) \
             | (topk,10) -> (bytecount,,8); (gen,1,100) -> (sampler,random:3) -> (flowcount,tcp,4096) \
             -> (packetcount) -> (snap,64)",
        );
        let want = [
            ("device", 0),
            ("device", 0),
            ("sampler", 4),
            ("strsearch", 16),
            ("topk", (4 + 8 * 10) * 8),
            ("bytecount", 8),
            ("gen", 0),
            ("sampler", 0),
            ("flowcount", 4096),
            ("packetcount", 8),
            ("snap", 0),
        ];
        let got: Vec<(&str, usize)> = got.iter().map(|(n, b)| (n.as_str(), *b)).collect();
        assert_eq!(got, want);
        // An MBuf below a class's minimum is the language's error.
        let mut reg = Registry::new();
        standard(&mut reg);
        let flow = &lang::parse("(gen,1,1) -> (flowcount,,95)").unwrap()[0];
        assert_eq!(
            lang::check(flow, &reg).unwrap_err().message(),
            "`flowcount` needs an MBuf of at least 96 bytes, not 95"
        );
    }

    #[test]
    fn registry_lists_every_class_with_usage() {
        let mut reg = Registry::new();
        standard(&mut reg);
        let names: Vec<&str> = reg.iter().map(|c| c.name()).collect();
        assert_eq!(
            names,
            [
                "bytecount",
                "device",
                "file",
                "flowcount",
                "gen",
                "packetcount",
                "pcap",
                "sampler",
                "snap",
                "strsearch",
                "topk"
            ]
        );
        for c in reg.iter() {
            assert!(
                !c.about().is_empty() && !c.usage().is_empty(),
                "{}",
                c.name()
            );
        }
    }
}
