//! NIC filter tables, capability profiles and an emulated multi-queue NIC for netsift.
//!
//! This crate implements the hardware-neutral layer of Deri et al., "Wire-Speed
//! Hardware-Assisted Traffic Filtering with Mainstream Network Adapters": flow rules that a NIC
//! applies before the CPU sees a packet — drop it, or steer it to an RX queue — with the limits of
//! real NICs, an emulation of such a NIC, and the commands that install the rules on real ones.
//!
//! - [`rule`]: the rule model ([`Rule`], [`Match`], [`Action`]) and the [`FlowKey`] of a packet;
//! - [`table`]: [`RuleTable`], precise rules by hash and wildcard rules by priority, with
//!   per-rule counters;
//! - [`profile`]: [`Profile`], the capabilities of the 82599 (5-tuple and Flow Director
//!   filters), generic ethtool n-tuple NICs and mlx5-like NICs;
//! - [`rss`]: Toeplitz receive-side scaling and the indirection table;
//! - [`nic`]: [`EmulatedNic`], N RX queues behind a rule table, as a packet source;
//! - [`text`]: the paper's rules text interface, `+(id,queue,proto,src,sport,dst,dport)` and
//!   `-(id)`;
//! - [`ethtool`]: the `ethtool -N`/`-U` commands that install the same rules on a real NIC;
//! - [`xdp`]: [`XdpOffload`](xdp::XdpOffload), the same rule tables in eBPF maps read by an
//!   XDP program, on any Linux interface.
//!
//! ```
//! use netsift_offload::{EmulatedNic, Profile, RuleTable, text};
//!
//! let mut table = RuleTable::for_profile("82599".parse::<Profile>().unwrap());
//! let script = text::parse("+(1,-1,tcp,192.168.0.10,25,0.0.0.0,0)\n").unwrap();
//! for applied in script.apply(&mut table) {
//!     applied.result.unwrap();
//! }
//! let mut nic = EmulatedNic::new(4, table);
//! let frame = netsift_capture::generate::FrameBuilder::new()
//!     .ipv4([192, 168, 0, 10], [10, 0, 0, 1])
//!     .tcp(25, 40000, 0)
//!     .build();
//! assert!(nic.receive(&frame, 60).is_dropped());
//! assert_eq!(nic.stats().dropped, 1);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod compile;
mod error;
pub mod ethtool;
pub mod nic;
pub mod profile;
pub mod rss;
pub mod rule;
pub mod table;
pub mod text;
pub mod xdp;

pub use error::{ErrorKind, OffloadError};
pub use nic::{Delivery, EmulatedNic, NicStats, QueueStats};
pub use profile::{Pballoc, Profile};
pub use rss::{Rss, toeplitz};
pub use rule::{Action, Family, FieldMasks, FlowKey, Masked, Match, Rule, RuleId, VlanMatch};
pub use table::{Counters, Layout, RuleSink, RuleTable};
