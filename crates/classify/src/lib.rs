//! Rule-set classification (the HiTables paper, "Trees in the List"): rules over packet header
//! fields, first match wins.
//!
//! - [`rule`]: the rule model — five fields as inclusive ranges (source and destination IPv4
//!   address, source and destination port, protocol), in priority order.
//! - [`classbench`]: ClassBench rule sets and header traces (the traces carry the index of the
//!   first matching rule: a golden answer key).
//! - [`generate`]: ClassBench rule sets and traces of any size from ClassBench's seed files.
//! - [`engine`]: engines by name, and `auto` (the fastest for a rule set, measured).
//! - [`linear`]: the reference engine, a scan in priority order.
//! - [`hicuts`]: HiCuts decision trees (equal cuts, `binth`, `spfac`), with shared subtrees and a
//!   budget against replication.
//! - [`hitables`]: HiTables, an iptables rule set rewritten into one whose chains encode
//!   decision trees (binary-search dispatch chains, leaves with exit rules).
//! - [`hypercuts`]: HyperCuts trees (several fields cut per node, region compaction).
//! - [`iptables`]: iptables rule sets — `iptables-save` reader, `iptables-restore` and `nft`
//!   writers, chain semantics (jumps, gotos, policies), ClassBench conversion, 5-field boxes.
//! - [`pacuts`]: PaCuts, netsift's fast engine — rules grouped by their small address field,
//!   a direct table on that field's top bits, 16-way split trees below it, and leaves scanned
//!   eight rules at a time with AVX2.
//!
//! ```
//! use netsift_classify::{classbench, linear::Linear, Classifier, Header};
//!
//! let rules = classbench::parse_rules(
//!     "@10.0.0.0/8 0.0.0.0/0 0 : 65535 80 : 80 0x06/0xFF\n@0.0.0.0/0 0.0.0.0/0 0 : 65535 0 : 65535 0x00/0x00\n",
//! )
//! .unwrap();
//! let engine = Linear::new(&rules);
//! let web = Header([0x0a01_0203, 0xc612_0001, 40000, 80, 6], 0);
//! assert_eq!(engine.classify(&web), Some(0));
//! assert_eq!(engine.classify(&Header([0x0b00_0001, 0, 1, 2, 17], 0)), Some(1));
//! ```

#![deny(missing_docs)]

pub mod classbench;
pub mod engine;
pub mod generate;
pub mod hicuts;
pub mod hitables;
pub mod hypercuts;
pub mod iptables;
pub mod linear;
pub mod pacuts;
pub mod rule;
mod split;
#[cfg(test)]
mod testutil;

pub use rule::{Field, Flags, Header, Range, Rule};

/// A classifier: the index (priority order, 0 first) of the first rule that matches a header.
pub trait Classifier {
    /// The first matching rule, or `None` when no rule matches.
    fn classify(&self, h: &Header) -> Option<usize>;
}
