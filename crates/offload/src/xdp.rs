//! The XDP back end: a [`RuleTable`]'s rules in eBPF maps, applied by one XDP program on any
//! Linux interface, before the kernel allocates a socket buffer.
//!
//! ```no_run
//! use netsift_offload::xdp::{QueueMode, XdpOffload};
//! use netsift_offload::{Action, Family, Match, Rule, RuleId};
//! use netsift_ebpf::XdpMode;
//!
//! let mut xdp = XdpOffload::new(256, 4096, QueueMode::Pass)?;
//! let m = Match::new(Family::V4).with_proto(17).with_dst_port(53);
//! xdp.install(Rule::new(RuleId(1), m, Action::Drop))?;
//! let link = xdp.attach("eth0", XdpMode::Generic)?; // detached when dropped
//! // … traffic …
//! println!("{} packets dropped", xdp.counters(RuleId(1))?.packets);
//! drop(link);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The program
//!
//! It computes exactly the key of [`FlowKey::from_frame`](crate::FlowKey::from_frame), with the same meaning on every
//! frame, truncated ones included: Ethernet, up to two VLAN tags (TPID `0x8100`, `0x88a8`,
//! `0x9100`; the key keeps the first VLAN ID), IPv4 (version 4, IHL ≥ 5, ports only for
//! TCP/UDP/SCTP at fragment offset 0) or IPv6 (hop-by-hop, routing, destination options,
//! fragment and AH headers skipped, at most eight; a non-first fragment has no ports). A frame
//! without a key passes. Then, as [`RuleTable::lookup`] does:
//!
//! 1. precise rules: two probes of a hash map keyed by the whole tuple, first with the frame's
//!    exact VLAN (or "untagged"), then with "any VLAN";
//! 2. wildcard rules: an array of value/mask records kept in the table's order (priority
//!    descending, then installation), walked in order by a loop that ends in `may_goto`
//!    (Linux 6.9); the first record whose masked key equals its value decides.
//!
//! Each matched rule's packet and byte counters (the frame's length, `data_end - data`) are
//! in a per-CPU array, indexed by the rule's slot, next to per-outcome totals ([`XdpTotals`]).
//! Actions: [`Action::Drop`] is `XDP_DROP`, [`Action::Pass`] `XDP_PASS`, and
//! [`Action::Queue`] depends on the [`QueueMode`] chosen at creation: pass (counted only), or
//! `bpf_redirect_map` into a CPUMAP or XSKMAP entry numbered by the queue, which passes the
//! frame when the entry is empty (or beyond the map).
//!
//! The program is about 990 instructions and the verifier accepts it in about 3,400 steps
//! (Linux 6.18), whatever the number of rules: the extension-header walk is unrolled, and an
//! unknown zero added to its offset (and to the wildcard loop's index) makes the verifier's
//! states of successive rounds compare equal, so that it checks one round of each.
//!
//! # Key layout
//!
//! The key the program builds on its stack, and the layout of every map record, is 40 bytes:
//! byte 0 flags (bit 0 IPv6, bit 1 "has ports"), byte 1 the protocol, bytes 2-3 the VLAN word
//! (`tagged << 12 | vid`, host order), bytes 4-7 the source and destination ports and bytes
//! 8-23 and 24-39 the source and destination addresses, in network order (an IPv4 address in
//! the first four bytes of its 16). A wildcard record holds the value and the mask of these 40
//! bytes (a rule that compares ports also requires the "has ports" flag) and is compared as
//! five 64-bit words. A precise rule's hash key is its tuple with the VLAN word replaced by
//! `0x8000 | word` for an exact VLAN match and 0 for any VLAN.
//!
//! # Updates
//!
//! Installing or removing a rule is a few map writes; the program is never reloaded. The
//! wildcard array is rewritten from the rule's position to its end in an order that shows a
//! concurrent packet either the old or the new order, except that one rule may appear twice
//! (harmless: the first copy decides).
//!
//! NOTE: Flow Director signature tables ([`Layout::GlobalMask`] with `signature`) are loaded
//! as perfect filters: their hash false positives are not reproduced.
//!
//! [`Layout::GlobalMask`]: crate::Layout::GlobalMask

use std::cmp::Reverse;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, BorrowedFd};

use netsift_ebpf::asm::{Assembler, Label};
use netsift_ebpf::{
    Alu, Cond, Insn, Link, LoadOptions, LoadedProgram, Map, MapSpec, MapType, ProgType, Reg, Size,
    UpdateFlag, XdpMode, helper, xdp_action,
};

use crate::error::{ErrorKind, OffloadError};
use crate::rule::{Action, Family, FieldMasks, Rule, RuleId, TupleKey};
use crate::table::{Counters, RuleTable};

/// What the program does with a packet that an [`Action::Queue`] rule matches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum QueueMode {
    /// Pass it (`XDP_PASS`), counted on the rule: software RSS decides where it goes.
    #[default]
    Pass,
    /// Redirect it to the CPU numbered by the queue through a CPUMAP (one entry per possible
    /// CPU), enabled with [`XdpOffload::enable_cpu_queue`]; an empty entry passes.
    Cpu,
    /// Redirect it to the AF_XDP socket of the queue through an XSKMAP of `queues` entries, set
    /// with [`XdpOffload::set_queue_socket`]; an empty entry passes.
    Xsk {
        /// The number of queue entries.
        queues: u32,
    },
}

/// Packet and byte totals of each outcome of the program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct XdpTotals {
    /// Frames without a key (not IPv4/IPv6, truncated): passed.
    pub no_key: Counters,
    /// Frames with a key that no rule matched: passed.
    pub no_match: Counters,
    /// Frames a drop rule matched.
    pub dropped: Counters,
    /// Frames a pass rule matched.
    pub passed: Counters,
    /// Frames a queue rule matched (redirected, or passed per the [`QueueMode`]).
    pub queued: Counters,
}

/// The per-outcome slots at the start of the counter map.
mod total {
    pub const NO_KEY: i32 = 0;
    pub const NO_MATCH: i32 = 1;
    pub const DROP: i32 = 2;
    pub const PASS: i32 = 3;
    pub const QUEUE: i32 = 4;
    /// The first rule slot.
    pub const RULES: u32 = 5;
}

/// Action codes in map records.
mod act {
    pub const DROP: i32 = 0;
    pub const PASS: i32 = 1;
    pub const QUEUE: i32 = 2;
}

/// Bytes of a key.
const KEY_LEN: usize = 40;
/// Bytes of a wildcard record: value, mask, then the action part.
const REC_LEN: usize = 96;
/// Offset of the action part (`u32` slot, action, queue) in a wildcard record.
const ACT_OFF: usize = 2 * KEY_LEN;
/// Bytes of a precise rule's value: the action part.
const ACT_LEN: usize = 12;
/// Key flags.
const FLAG_V6: u8 = 1;
const FLAG_PORTS: u8 = 2;
/// The VLAN word of a precise key with an exact VLAN match.
const VLAN_EXACT: u16 = 0x8000;
/// How many IPv6 extension headers are skipped (as `FlowKey::from_frame`: the NIC's walk).
const MAX_EXT_HEADERS: usize = netsift_wire::flow::Options::NIC.max_ext_headers;

// The program skips exactly the NIC walk's extension headers: hop-by-hop, routing and
// destination options (a length in 8-byte units), AH (4-byte units) and fragment.
const _: () = {
    let skip = netsift_wire::flow::Options::NIC.ipv6_skip;
    assert!(skip.len() == 5);
    assert!(skip[0] == 0 && skip[1] == 43 && skip[2] == 44 && skip[3] == 51 && skip[4] == 60);
};

/// Stack slots (offsets from `r10`).
mod stack {
    /// The key, 40 bytes.
    pub const KEY: i16 = -48;
    pub const FLAGS: i16 = KEY;
    pub const PROTO: i16 = KEY + 1;
    pub const VLAN_W: i16 = KEY + 2;
    pub const SPORT: i16 = KEY + 4;
    pub const DPORT: i16 = KEY + 6;
    pub const SRC: i16 = KEY + 8;
    pub const DST: i16 = KEY + 24;
    pub const LEN: i16 = -56;
    pub const ZERO: i16 = -64;
    pub const I: i16 = -72;
    pub const COUNT: i16 = -80;
    pub const IDX: i16 = -88;
    pub const VLAN: i16 = -96;
}

/// Offsets in `struct xdp_md`.
mod ctx {
    pub const DATA: i16 = 0;
    pub const DATA_END: i16 = 4;
    pub const RX_QUEUE: i16 = 16;
}

/// `BPF_PSEUDO_MAP_VALUE`.
const PSEUDO_MAP_VALUE: u8 = 2;
const DATA: Reg = Reg::R6;
const END: Reg = Reg::R7;

/// Where an installed rule lives.
#[derive(Clone, Copy, Debug)]
enum Place {
    Precise([u8; KEY_LEN]),
    Wild,
}

#[derive(Clone, Copy, Debug)]
struct Installed {
    rule: Rule,
    slot: u32,
    place: Place,
    seq: u64,
}

/// A rule table in eBPF maps and the XDP program that applies it; see the module
/// documentation.
#[derive(Debug)]
pub struct XdpOffload {
    prog: LoadedProgram,
    precise: Map,
    wild: Map,
    header: Map,
    stats: Map,
    redirect: Option<Map>,
    mode: QueueMode,
    cap_precise: u32,
    cap_wild: u32,
    rules: HashMap<RuleId, Installed>,
    precise_keys: HashMap<[u8; KEY_LEN], RuleId>,
    /// Wildcard rules in lookup order (what the array holds, index by index).
    order: Vec<RuleId>,
    free_slots: Vec<u32>,
    next_seq: u64,
}

fn named(mut spec: MapSpec, name: &str) -> MapSpec {
    spec.name = name.into();
    spec
}

fn kernel(rule: Option<RuleId>, e: &netsift_ebpf::Error) -> OffloadError {
    OffloadError::new(ErrorKind::Kernel, rule, format!("XDP back end: {e}"))
}

impl XdpOffload {
    /// Creates the maps (room for `capacity_wildcard` wildcard and `capacity_precise` precise
    /// rules, at least one of each), generates the program for `queue_mode` and loads it.
    /// Needs root; fails with the loader's error ([`netsift_ebpf::ErrorKind::PermissionDenied`]
    /// without the capabilities).
    pub fn new(
        capacity_wildcard: u32,
        capacity_precise: u32,
        queue_mode: QueueMode,
    ) -> netsift_ebpf::Result<XdpOffload> {
        let cap_wild = capacity_wildcard.max(1);
        let cap_precise = capacity_precise.max(1);
        let precise = Map::create(&named(
            MapSpec::new(MapType::Hash, KEY_LEN as u32, ACT_LEN as u32, cap_precise),
            "offload_exact",
        ))?;
        let wild = Map::create(&named(
            MapSpec::new(MapType::Array, 4, REC_LEN as u32, cap_wild),
            "offload_wild",
        ))?;
        let header = Map::create(&named(
            MapSpec::new(MapType::Array, 4, 8, 1),
            "offload_head",
        ))?;
        let slots = cap_wild.saturating_add(cap_precise);
        let stats = Map::create(&named(
            MapSpec::new(
                MapType::PercpuArray,
                4,
                16,
                slots.saturating_add(total::RULES),
            ),
            "offload_stats",
        ))?;
        let redirect = match queue_mode {
            QueueMode::Pass => None,
            QueueMode::Cpu => {
                let cpus = u32::try_from(netsift_ebpf::possible_cpus()?).unwrap_or(u32::MAX);
                Some(Map::create(&named(
                    MapSpec::new(MapType::CpuMap, 4, 4, cpus.max(1)),
                    "offload_cpus",
                ))?)
            }
            QueueMode::Xsk { queues } => Some(Map::create(&named(
                MapSpec::new(MapType::XskMap, 4, 4, queues.max(1)),
                "offload_xsks",
            ))?),
        };
        let insns = program(&precise, &wild, &header, &stats, redirect.as_ref())?;
        let opts = LoadOptions {
            name: "netsift_offload".into(),
            stats: true,
            ..LoadOptions::default()
        };
        let prog = LoadedProgram::load(ProgType::Xdp, &insns, &opts)?;
        Ok(XdpOffload {
            prog,
            precise,
            wild,
            header,
            stats,
            redirect,
            mode: queue_mode,
            cap_precise,
            cap_wild,
            rules: HashMap::new(),
            precise_keys: HashMap::new(),
            order: Vec::new(),
            // Popped from the end: the lowest slot first.
            free_slots: (0..slots).rev().collect(),
            next_seq: 0,
        })
    }

    /// The loaded program, for test runs ([`LoadedProgram::test_run`]) or attaching.
    pub fn program(&self) -> &LoadedProgram {
        &self.prog
    }

    /// The queue mode chosen at creation.
    pub fn queue_mode(&self) -> QueueMode {
        self.mode
    }

    /// The number of rules installed.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether no rule is installed.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rule `id`, if installed.
    pub fn get(&self, id: RuleId) -> Option<&Rule> {
        self.rules.get(&id).map(|i| &i.rule)
    }

    /// Attaches the program to interface `ifname`; it stays attached until the [`Link`] is
    /// dropped (or the process exits). Rules may be changed while it is attached.
    pub fn attach(&self, ifname: &str, mode: XdpMode) -> netsift_ebpf::Result<Link> {
        let ifindex = netsift_ebpf::ifindex(ifname)?;
        Link::xdp(&self.prog, ifindex, mode)
    }

    /// Installs `rule`: one hash-map write for a precise rule, the wildcard array from the
    /// rule's position on plus its count for a wildcard rule; its counters start at zero.
    ///
    /// Fails, leaving the rules unchanged, with [`ErrorKind::DuplicateId`],
    /// [`ErrorKind::Capacity`] (the precise or wildcard maps are full),
    /// [`ErrorKind::Conflict`] (a precise rule with the same tuple) or [`ErrorKind::Kernel`].
    pub fn install(&mut self, rule: Rule) -> Result<(), OffloadError> {
        let id = rule.id;
        if self.rules.contains_key(&id) {
            return Err(OffloadError::new(
                ErrorKind::DuplicateId,
                Some(id),
                "a rule with this id is already installed",
            ));
        }
        let precise = rule.is_precise();
        let (count, cap, class) = if precise {
            (self.precise_keys.len(), self.cap_precise, "precise")
        } else {
            (self.order.len(), self.cap_wild, "wildcard")
        };
        if count >= cap as usize {
            return Err(OffloadError::new(
                ErrorKind::Capacity,
                Some(id),
                format!("the XDP {class} rule map is full ({cap} rules)"),
            ));
        }
        let key = precise.then(|| precise_key(&rule));
        if let Some(other) = key.as_ref().and_then(|k| self.precise_keys.get(k)) {
            return Err(OffloadError::new(
                ErrorKind::Conflict,
                Some(id),
                format!("it has the same hash key as rule {other}"),
            ));
        }
        let Some(slot) = self.free_slots.pop() else {
            return Err(OffloadError::new(
                ErrorKind::Capacity,
                Some(id),
                "no free counter slot",
            ));
        };
        let installed = Installed {
            rule,
            slot,
            place: key.map_or(Place::Wild, Place::Precise),
            seq: self.next_seq,
        };
        let result = self
            .zero_counters(slot)
            .and_then(|()| match installed.place {
                Place::Precise(k) => {
                    self.precise
                        .update(&k, &action_part(&installed), UpdateFlag::Any)
                }
                Place::Wild => self.insert_wild(&installed),
            });
        if let Err(e) = result {
            self.free_slots.push(slot);
            return Err(kernel(Some(id), &e));
        }
        self.next_seq = self.next_seq.wrapping_add(1);
        if let Place::Precise(k) = installed.place {
            self.precise_keys.insert(k, id);
        }
        self.rules.insert(id, installed);
        Ok(())
    }

    /// Removes the rule `id` and returns it with its final counters.
    pub fn remove(&mut self, id: RuleId) -> Result<(Rule, Counters), OffloadError> {
        let Some(inst) = self.rules.get(&id).copied() else {
            return Err(OffloadError::new(
                ErrorKind::UnknownId,
                Some(id),
                "no rule with this id is installed",
            ));
        };
        match inst.place {
            Place::Precise(k) => {
                self.precise.delete(&k).map_err(|e| kernel(Some(id), &e))?;
                self.precise_keys.remove(&k);
            }
            Place::Wild => self.remove_wild(id).map_err(|e| kernel(Some(id), &e))?,
        }
        // Counted after the rule left the maps: nothing can change them any more (but a
        // program that matched just before may still be adding its packet: NOTE, a window of
        // nanoseconds).
        let counters = self.slot_counters(inst.slot).unwrap_or_default();
        self.rules.remove(&id);
        self.free_slots.push(inst.slot);
        Ok((inst.rule, counters))
    }

    /// Removes every rule (the totals are kept).
    pub fn clear(&mut self) -> Result<(), OffloadError> {
        let ids: Vec<RuleId> = self.rules.keys().copied().collect();
        for id in ids {
            self.remove(id)?;
        }
        Ok(())
    }

    /// Replaces the installed rules by `table`'s: precise rules by tuple, wildcard rules in the
    /// table's lookup order. Checks the capacities first; a kernel error part way leaves the
    /// rules installed until then.
    pub fn load_from(&mut self, table: &RuleTable) -> Result<(), OffloadError> {
        let (precise, wild): (Vec<&Rule>, Vec<&Rule>) =
            table.iter().map(|(r, _)| r).partition(|r| r.is_precise());
        for (n, cap, class) in [
            (precise.len(), self.cap_precise, "precise"),
            (wild.len(), self.cap_wild, "wildcard"),
        ] {
            if n > cap as usize {
                return Err(OffloadError::new(
                    ErrorKind::Capacity,
                    None,
                    format!("the table has {n} {class} rules, the XDP map holds {cap}"),
                ));
            }
        }
        self.clear()?;
        self.rebuild_wild(&wild)?;
        for r in precise {
            self.install(*r)?;
        }
        Ok(())
    }

    /// The packet and byte counters of rule `id`, summed over the CPUs.
    pub fn counters(&self, id: RuleId) -> Result<Counters, OffloadError> {
        let Some(inst) = self.rules.get(&id) else {
            return Err(OffloadError::new(
                ErrorKind::UnknownId,
                Some(id),
                "no rule with this id is installed",
            ));
        };
        self.slot_counters(inst.slot)
            .map_err(|e| kernel(Some(id), &e))
    }

    /// The totals of each outcome, summed over the CPUs, since creation.
    pub fn totals(&self) -> netsift_ebpf::Result<XdpTotals> {
        let read = |i: i32| self.index_counters(i as u32);
        Ok(XdpTotals {
            no_key: read(total::NO_KEY)?,
            no_match: read(total::NO_MATCH)?,
            dropped: read(total::DROP)?,
            passed: read(total::PASS)?,
            queued: read(total::QUEUE)?,
        })
    }

    /// Sets every rule counter and total to zero.
    pub fn reset_counters(&mut self) -> netsift_ebpf::Result<()> {
        let zero = vec![0u8; self.stats.value_len()];
        for i in 0..self.stats.spec().max_entries {
            self.stats
                .update(&i.to_ne_bytes(), &zero, UpdateFlag::Any)?;
        }
        Ok(())
    }

    /// [`QueueMode::Cpu`]: lets queue `queue` redirect to CPU `queue`, with a backlog of
    /// `qsize` frames (the kernel starts a thread for the CPU). Fails with
    /// [`ErrorKind::Action`] in another mode, [`ErrorKind::Kernel`] for a CPU that does not
    /// exist.
    pub fn enable_cpu_queue(&mut self, queue: u32, qsize: u32) -> Result<(), OffloadError> {
        let map = self.redirect_map(matches!(self.mode, QueueMode::Cpu))?;
        map.update(&queue.to_ne_bytes(), &qsize.to_ne_bytes(), UpdateFlag::Any)
            .map_err(|e| kernel(None, &e))
    }

    /// [`QueueMode::Xsk`]: redirects queue `queue` to the AF_XDP socket `socket` (bound to the
    /// interface and an RX queue). Fails with [`ErrorKind::Action`] in another mode.
    pub fn set_queue_socket(
        &mut self,
        queue: u32,
        socket: BorrowedFd<'_>,
    ) -> Result<(), OffloadError> {
        let map = self.redirect_map(matches!(self.mode, QueueMode::Xsk { .. }))?;
        let fd = u32::try_from(socket.as_raw_fd()).unwrap_or(u32::MAX);
        map.update(&queue.to_ne_bytes(), &fd.to_ne_bytes(), UpdateFlag::Any)
            .map_err(|e| kernel(None, &e))
    }

    /// Empties the redirect entry of `queue` (its packets pass again); `false` if it was
    /// empty. Fails with [`ErrorKind::Action`] in [`QueueMode::Pass`].
    pub fn clear_queue(&mut self, queue: u32) -> Result<bool, OffloadError> {
        let map = self.redirect_map(self.mode != QueueMode::Pass)?;
        map.delete(&queue.to_ne_bytes())
            .map_err(|e| kernel(None, &e))
    }

    fn redirect_map(&self, ok: bool) -> Result<&Map, OffloadError> {
        match (&self.redirect, ok) {
            (Some(m), true) => Ok(m),
            _ => Err(OffloadError::new(
                ErrorKind::Action,
                None,
                format!(
                    "the XDP back end's queue mode is {:?}: no such redirect map",
                    self.mode
                ),
            )),
        }
    }

    fn zero_counters(&self, slot: u32) -> netsift_ebpf::Result<()> {
        let zero = vec![0u8; self.stats.value_len()];
        let i = total::RULES.saturating_add(slot);
        self.stats.update(&i.to_ne_bytes(), &zero, UpdateFlag::Any)
    }

    fn slot_counters(&self, slot: u32) -> netsift_ebpf::Result<Counters> {
        self.index_counters(total::RULES.saturating_add(slot))
    }

    fn index_counters(&self, i: u32) -> netsift_ebpf::Result<Counters> {
        let mut c = Counters::default();
        if let Some(v) = self.stats.lookup(&i.to_ne_bytes())? {
            for cpu in v.chunks_exact(16) {
                let (p, b) = cpu.split_at(8);
                c.packets = c.packets.saturating_add(u64_ne(p));
                c.bytes = c.bytes.saturating_add(u64_ne(b));
            }
        }
        Ok(c)
    }

    fn write_count(&self, n: usize) -> netsift_ebpf::Result<()> {
        let mut h = [0u8; 8];
        h[..4].copy_from_slice(&(n as u32).to_ne_bytes());
        self.header.update(&0u32.to_ne_bytes(), &h, UpdateFlag::Any)
    }

    fn write_record(&self, at: usize, id: RuleId) -> netsift_ebpf::Result<()> {
        let Some(inst) = self.rules.get(&id) else {
            return Ok(());
        };
        self.wild
            .update(&(at as u32).to_ne_bytes(), &record(inst), UpdateFlag::Any)
    }

    /// Inserts a new wildcard rule at its place in the order: the records after it move one
    /// up (from the end, so that every state in between is the old order with one rule
    /// shown twice), the count grows, then the rule's record is written.
    fn insert_wild(&mut self, new: &Installed) -> netsift_ebpf::Result<()> {
        let rank = |i: &Installed| (Reverse(i.rule.priority), i.seq);
        let at = self.order.partition_point(|id| {
            self.rules
                .get(id)
                .is_some_and(|other| rank(other) <= rank(new))
        });
        let n = self.order.len();
        for i in (at..n).rev() {
            self.write_record(i + 1, self.order[i])?;
        }
        if at < n {
            self.write_count(n + 1)?;
        }
        self.wild
            .update(&(at as u32).to_ne_bytes(), &record(new), UpdateFlag::Any)?;
        if at == n {
            self.write_count(n + 1)?;
        }
        self.order.insert(at, new.rule.id);
        Ok(())
    }

    /// Removes a wildcard rule: the records after it move one down, then the count shrinks.
    fn remove_wild(&mut self, id: RuleId) -> netsift_ebpf::Result<()> {
        let Some(at) = self.order.iter().position(|&x| x == id) else {
            return Ok(());
        };
        let n = self.order.len();
        for i in at..n - 1 {
            self.write_record(i, self.order[i + 1])?;
        }
        self.write_count(n - 1)?;
        self.order.remove(at);
        Ok(())
    }

    /// Installs `rules` (already in lookup order, none installed yet) as the whole wildcard
    /// array: each record, then the count once.
    fn rebuild_wild(&mut self, rules: &[&Rule]) -> Result<(), OffloadError> {
        for r in rules {
            let Some(slot) = self.free_slots.pop() else {
                return Err(OffloadError::new(
                    ErrorKind::Capacity,
                    Some(r.id),
                    "no free counter slot",
                ));
            };
            let inst = Installed {
                rule: **r,
                slot,
                place: Place::Wild,
                seq: self.next_seq,
            };
            self.next_seq = self.next_seq.wrapping_add(1);
            let at = self.order.len();
            let res = self.zero_counters(slot).and_then(|()| {
                self.wild
                    .update(&(at as u32).to_ne_bytes(), &record(&inst), UpdateFlag::Any)
            });
            if let Err(e) = res {
                self.free_slots.push(slot);
                return Err(kernel(Some(r.id), &e));
            }
            self.rules.insert(r.id, inst);
            self.order.push(r.id);
        }
        self.write_count(self.order.len())
            .map_err(|e| kernel(None, &e))
    }
}

/// The `u64` in the first eight bytes of `b` (missing bytes are zero).
fn u64_ne(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    for (d, s) in a.iter_mut().zip(b) {
        *d = *s;
    }
    u64::from_ne_bytes(a)
}

/// The value and mask of a rule's key bytes (see the module documentation).
fn value_mask(rule: &Rule) -> ([u8; KEY_LEN], [u8; KEY_LEN]) {
    let m = &rule.pattern;
    let t = TupleKey::of_match(m);
    let masks: FieldMasks = m.masks();
    let mut v = [0u8; KEY_LEN];
    let mut k = [0u8; KEY_LEN];
    let v6 = m.family() == Family::V6;
    let ports = if m.needs_ports() { FLAG_PORTS } else { 0 };
    v[0] = u8::from(v6) | ports;
    k[0] = FLAG_V6 | ports;
    v[1] = t.proto;
    k[1] = masks.proto;
    v[2..4].copy_from_slice(&t.vlan.to_ne_bytes());
    k[2..4].copy_from_slice(&masks.vlan.to_ne_bytes());
    v[4..6].copy_from_slice(&t.src_port.to_be_bytes());
    k[4..6].copy_from_slice(&masks.src_port.to_be_bytes());
    v[6..8].copy_from_slice(&t.dst_port.to_be_bytes());
    k[6..8].copy_from_slice(&masks.dst_port.to_be_bytes());
    for (at, value, mask) in [(8, t.src, masks.src), (24, t.dst, masks.dst)] {
        if v6 {
            v[at..at + 16].copy_from_slice(&value.to_be_bytes());
            k[at..at + 16].copy_from_slice(&mask.to_be_bytes());
        } else {
            // IPv4 values live in the low 32 bits.
            v[at..at + 4].copy_from_slice(&(value as u32).to_be_bytes());
            k[at..at + 4].copy_from_slice(&(mask as u32).to_be_bytes());
        }
    }
    (v, k)
}

/// The hash key of a precise rule.
fn precise_key(rule: &Rule) -> [u8; KEY_LEN] {
    let (mut v, _) = value_mask(rule);
    let t = TupleKey::of_match(&rule.pattern);
    let word = if t.vlan_mask == 0 {
        0
    } else {
        VLAN_EXACT | t.vlan
    };
    v[0] |= FLAG_PORTS;
    v[2..4].copy_from_slice(&word.to_ne_bytes());
    v
}

fn action_part(inst: &Installed) -> [u8; ACT_LEN] {
    let (code, queue) = match inst.rule.action {
        Action::Drop => (act::DROP, 0),
        Action::Pass => (act::PASS, 0),
        Action::Queue(q) => (act::QUEUE, u32::from(q)),
    };
    let mut b = [0u8; ACT_LEN];
    b[0..4].copy_from_slice(&inst.slot.to_ne_bytes());
    b[4..8].copy_from_slice(&code.to_ne_bytes());
    b[8..12].copy_from_slice(&queue.to_ne_bytes());
    b
}

fn record(inst: &Installed) -> [u8; REC_LEN] {
    let (v, k) = value_mask(&inst.rule);
    let mut r = [0u8; REC_LEN];
    r[..KEY_LEN].copy_from_slice(&v);
    r[KEY_LEN..ACT_OFF].copy_from_slice(&k);
    r[ACT_OFF..ACT_OFF + ACT_LEN].copy_from_slice(&action_part(inst));
    r
}

/// Emits `dst = P[off + extra : size]` (byte-swapped from network order when `swap`), jumping
/// to `fail` when the bytes are not all in the packet. Clobbers `r4` and `r5`.
fn load(a: &mut Assembler, size: Size, dst: Reg, off: Reg, extra: i32, swap: bool, fail: Label) {
    a.push(Insn::mov64_reg(Reg::R5, off));
    if extra != 0 {
        a.push(Insn::alu64_imm(Alu::Add, Reg::R5, extra));
    }
    check(a, size.bytes() as i32, fail);
    a.push(Insn::load(size, dst, Reg::R5, 0));
    if swap {
        match size {
            Size::H => a.push(Insn::to_be(dst, 16)),
            Size::W => a.push(Insn::to_be(dst, 32)),
            _ => {}
        }
    }
}

/// Turns the offset in `r5` into a packet pointer to it, jumping to `fail` unless `len` more
/// bytes are in the packet. Offsets at 64 KiB or beyond are past any packet XDP sees directly
/// (and the verifier wants packet offsets bounded). Clobbers `r4`.
fn check(a: &mut Assembler, len: i32, fail: Label) {
    a.jump(Insn::jmp_imm(Cond::Gt, Reg::R5, 0xffff - len, 0), fail);
    a.push(Insn::alu64_reg(Alu::Add, Reg::R5, DATA));
    a.push(Insn::mov64_reg(Reg::R4, Reg::R5));
    a.push(Insn::alu64_imm(Alu::Add, Reg::R4, len));
    a.jump(Insn::jmp_reg(Cond::Gt, Reg::R4, END, 0), fail);
}

/// `if proto (in reg) is TCP, UDP or SCTP`: the ports at offset `l4`, 4 bytes, into the key
/// with the "has ports" flag; then (or when not there) `done`.
fn ports(a: &mut Assembler, proto: Reg, l4: Reg, flags: u8, done: Label) {
    let yes = a.label();
    for p in [6, 17, 132] {
        a.jump(Insn::jmp_imm(Cond::Eq, proto, p, 0), yes);
    }
    a.jump(Insn::ja(0), done);
    a.bind(yes);
    a.push(Insn::mov64_reg(Reg::R5, l4));
    check(a, 4, done);
    a.push(Insn::load(Size::H, Reg::R0, Reg::R5, 0));
    a.push(Insn::store(Size::H, Reg::R10, stack::SPORT, Reg::R0));
    a.push(Insn::load(Size::H, Reg::R0, Reg::R5, 2));
    a.push(Insn::store(Size::H, Reg::R10, stack::DPORT, Reg::R0));
    a.push(Insn::store_imm(
        Size::B,
        Reg::R10,
        stack::FLAGS,
        i32::from(flags | FLAG_PORTS),
    ));
    a.jump(Insn::ja(0), done);
}

/// Counts the frame (`stack::LEN` bytes) in the counter slot whose index is at `stack::IDX`.
fn count(a: &mut Assembler, stats: &Map) {
    let skip = a.label();
    a.extend(stats.ld_map(Reg::R1));
    a.push(Insn::mov64_reg(Reg::R2, Reg::R10));
    a.push(Insn::alu64_imm(Alu::Add, Reg::R2, i32::from(stack::IDX)));
    a.push(Insn::call(helper::MAP_LOOKUP_ELEM));
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, 0, 0), skip);
    a.push(Insn::load(Size::DW, Reg::R1, Reg::R0, 0));
    a.push(Insn::alu64_imm(Alu::Add, Reg::R1, 1));
    a.push(Insn::store(Size::DW, Reg::R0, 0, Reg::R1));
    a.push(Insn::load(Size::DW, Reg::R1, Reg::R0, 8));
    a.push(Insn::load(Size::DW, Reg::R2, Reg::R10, stack::LEN));
    a.push(Insn::alu64_reg(Alu::Add, Reg::R1, Reg::R2));
    a.push(Insn::store(Size::DW, Reg::R0, 8, Reg::R1));
    a.bind(skip);
}

/// Counts the frame in total `which` and returns `verdict`.
fn finish(a: &mut Assembler, stats: &Map, which: i32, verdict: u32) {
    a.push(Insn::store_imm(Size::W, Reg::R10, stack::IDX, which));
    count(a, stats);
    a.push(Insn::mov64_imm(Reg::R0, verdict as i32));
    a.push(Insn::exit());
}

/// The program (see the module documentation).
fn program(
    precise: &Map,
    wild: &Map,
    header: &Map,
    stats: &Map,
    redirect: Option<&Map>,
) -> netsift_ebpf::Result<Vec<Insn>> {
    let mut a = Assembler::new();
    let nokey = a.label();
    let keyed = a.label();
    let nomatch = a.label();
    let matched = a.label();

    // A 64-bit zero with no known bit (the difference of two `field << 32 | field`): added to
    // loop variables so that the verifier forgets their ranges and the states of the rounds
    // compare equal.
    a.push(Insn::mov64_reg(Reg::R6, Reg::R1));
    for r in [Reg::R1, Reg::R2] {
        a.push(Insn::load(Size::W, r, Reg::R6, ctx::RX_QUEUE));
        a.push(Insn::alu64_imm(Alu::Lsh, r, 32));
        a.push(Insn::load(Size::W, Reg::R3, Reg::R6, ctx::RX_QUEUE));
        a.push(Insn::alu64_reg(Alu::Or, r, Reg::R3));
    }
    a.push(Insn::alu64_reg(Alu::Sub, Reg::R1, Reg::R2));
    a.push(Insn::store(Size::DW, Reg::R10, stack::ZERO, Reg::R1));
    a.push(Insn::load(Size::W, END, Reg::R6, ctx::DATA_END));
    a.push(Insn::load(Size::W, DATA, Reg::R6, ctx::DATA));
    a.push(Insn::mov64_reg(Reg::R1, END));
    a.push(Insn::alu64_reg(Alu::Sub, Reg::R1, DATA));
    a.push(Insn::mov32_reg(Reg::R1, Reg::R1));
    a.push(Insn::store(Size::DW, Reg::R10, stack::LEN, Reg::R1));
    for w in 0..5 {
        a.push(Insn::store_imm(Size::DW, Reg::R10, stack::KEY + 8 * w, 0));
    }

    // Ethernet and up to two VLAN tags: r0 the EtherType, r2 the offset after it, r8 the VLAN
    // word of the first tag.
    a.push(Insn::mov64_imm(Reg::R2, 12));
    load(&mut a, Size::H, Reg::R0, Reg::R2, 0, true, nokey);
    a.push(Insn::mov64_imm(Reg::R2, 14));
    a.push(Insn::mov64_imm(Reg::R8, 0));
    let have = a.label();
    // The NIC's walk (`netsift_wire::flow::Options::NIC`): its tags and their types.
    for t in 0..netsift_wire::flow::Options::NIC.max_vlan_tags {
        let tag = a.label();
        for tpid in netsift_wire::flow::VLAN_TPIDS {
            a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, i32::from(tpid), 0), tag);
        }
        a.jump(Insn::ja(0), have);
        a.bind(tag);
        if t == 0 {
            load(&mut a, Size::H, Reg::R8, Reg::R2, 0, true, nokey);
            a.push(Insn::alu64_imm(Alu::And, Reg::R8, 0x0fff));
            a.push(Insn::alu64_imm(Alu::Or, Reg::R8, 0x1000));
        }
        load(&mut a, Size::H, Reg::R0, Reg::R2, 2, true, nokey);
        a.push(Insn::alu64_imm(Alu::Add, Reg::R2, 4));
    }
    a.bind(have);
    a.push(Insn::store(Size::H, Reg::R10, stack::VLAN_W, Reg::R8));
    a.push(Insn::store(Size::DW, Reg::R10, stack::VLAN, Reg::R8));
    a.push(Insn::mov64_reg(Reg::R9, Reg::R2));
    let (v4, v6) = (a.label(), a.label());
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, 0x0800, 0), v4);
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, 0x86dd, 0), v6);
    a.jump(Insn::ja(0), nokey);

    // IPv4 at r9: version 4, IHL >= 5, 20 bytes.
    a.bind(v4);
    load(&mut a, Size::B, Reg::R0, Reg::R9, 0, false, nokey);
    a.push(Insn::mov64_reg(Reg::R1, Reg::R0));
    a.push(Insn::alu64_imm(Alu::Rsh, Reg::R1, 4));
    a.jump(Insn::jmp_imm(Cond::Ne, Reg::R1, 4, 0), nokey);
    a.push(Insn::mov64_reg(Reg::R8, Reg::R0));
    a.push(Insn::alu64_imm(Alu::And, Reg::R8, 0xf));
    a.push(Insn::alu64_imm(Alu::Lsh, Reg::R8, 2));
    a.jump(Insn::jmp_imm(Cond::Lt, Reg::R8, 20, 0), nokey);
    a.push(Insn::mov64_reg(Reg::R5, Reg::R9));
    check(&mut a, 20, nokey);
    // r5 points at the header, 20 bytes readable.
    a.push(Insn::load(Size::B, Reg::R3, Reg::R5, 9));
    a.push(Insn::store(Size::B, Reg::R10, stack::PROTO, Reg::R3));
    a.push(Insn::load(Size::W, Reg::R0, Reg::R5, 12));
    a.push(Insn::store(Size::W, Reg::R10, stack::SRC, Reg::R0));
    a.push(Insn::load(Size::W, Reg::R0, Reg::R5, 16));
    a.push(Insn::store(Size::W, Reg::R10, stack::DST, Reg::R0));
    a.push(Insn::load(Size::H, Reg::R0, Reg::R5, 6));
    a.push(Insn::to_be(Reg::R0, 16));
    a.push(Insn::alu64_imm(Alu::And, Reg::R0, 0x1fff));
    a.jump(Insn::jmp_imm(Cond::Ne, Reg::R0, 0, 0), keyed);
    a.push(Insn::mov64_reg(Reg::R2, Reg::R9));
    a.push(Insn::alu64_reg(Alu::Add, Reg::R2, Reg::R8));
    ports(&mut a, Reg::R3, Reg::R2, 0, keyed);

    // IPv6 at r9: 40 bytes, version 6, then the extension headers.
    a.bind(v6);
    a.push(Insn::mov64_reg(Reg::R5, Reg::R9));
    check(&mut a, 40, nokey);
    a.push(Insn::load(Size::B, Reg::R0, Reg::R5, 0));
    a.push(Insn::alu64_imm(Alu::Rsh, Reg::R0, 4));
    a.jump(Insn::jmp_imm(Cond::Ne, Reg::R0, 6, 0), nokey);
    a.push(Insn::store_imm(
        Size::B,
        Reg::R10,
        stack::FLAGS,
        i32::from(FLAG_V6),
    ));
    for k in 0..4i16 {
        a.push(Insn::load(Size::W, Reg::R0, Reg::R5, 8 + 4 * k));
        a.push(Insn::store(Size::W, Reg::R10, stack::SRC + 4 * k, Reg::R0));
        a.push(Insn::load(Size::W, Reg::R0, Reg::R5, 24 + 4 * k));
        a.push(Insn::store(Size::W, Reg::R10, stack::DST + 4 * k, Reg::R0));
    }
    // r8 the next header, r2 the offset of the rest, r3 the length of the header skipped.
    a.push(Insn::load(Size::B, Reg::R8, Reg::R5, 6));
    a.push(Insn::mov64_reg(Reg::R2, Reg::R9));
    a.push(Insn::alu64_imm(Alu::Add, Reg::R2, 40));
    let stop = a.label();
    for _ in 0..MAX_EXT_HEADERS {
        let (opts, ah, frag, common) = (a.label(), a.label(), a.label(), a.label());
        a.push(Insn::load(Size::DW, Reg::R1, Reg::R10, stack::ZERO));
        a.push(Insn::alu64_reg(Alu::Add, Reg::R2, Reg::R1));
        for nh in [0, 43, 60] {
            a.jump(Insn::jmp_imm(Cond::Eq, Reg::R8, nh, 0), opts);
        }
        a.jump(Insn::jmp_imm(Cond::Eq, Reg::R8, 51, 0), ah);
        a.jump(Insn::jmp_imm(Cond::Eq, Reg::R8, 44, 0), frag);
        // The transport header.
        a.push(Insn::store(Size::B, Reg::R10, stack::PROTO, Reg::R8));
        ports(&mut a, Reg::R8, Reg::R2, FLAG_V6, keyed);
        a.bind(opts);
        load(&mut a, Size::B, Reg::R3, Reg::R2, 1, false, stop);
        a.push(Insn::alu64_imm(Alu::Add, Reg::R3, 1));
        a.push(Insn::alu64_imm(Alu::Lsh, Reg::R3, 3));
        a.jump(Insn::ja(0), common);
        a.bind(ah);
        load(&mut a, Size::B, Reg::R3, Reg::R2, 1, false, stop);
        a.push(Insn::alu64_imm(Alu::Add, Reg::R3, 2));
        a.push(Insn::alu64_imm(Alu::Lsh, Reg::R3, 2));
        a.jump(Insn::ja(0), common);
        a.bind(frag);
        {
            let first = a.label();
            load(&mut a, Size::B, Reg::R3, Reg::R2, 0, false, stop);
            load(&mut a, Size::H, Reg::R0, Reg::R2, 2, true, stop);
            a.push(Insn::alu64_imm(Alu::And, Reg::R0, 0xfff8));
            a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, 0, 0), first);
            // A non-first fragment: its next header, no ports.
            a.push(Insn::store(Size::B, Reg::R10, stack::PROTO, Reg::R3));
            a.jump(Insn::ja(0), keyed);
            a.bind(first);
            a.push(Insn::mov64_imm(Reg::R3, 8));
        }
        a.bind(common);
        load(&mut a, Size::B, Reg::R0, Reg::R2, 0, false, stop);
        a.push(Insn::mov64_reg(Reg::R5, Reg::R2));
        a.push(Insn::alu64_reg(Alu::Add, Reg::R5, Reg::R3));
        // The rest after the header may be empty: `len` bytes from `r2`, i.e. 0 from `r5`.
        check(&mut a, 0, stop);
        a.push(Insn::mov64_reg(Reg::R8, Reg::R0));
        a.push(Insn::alu64_reg(Alu::Add, Reg::R2, Reg::R3));
    }
    // Too many headers, or one that could not be skipped: that header, no ports.
    a.bind(stop);
    a.push(Insn::store(Size::B, Reg::R10, stack::PROTO, Reg::R8));
    a.jump(Insn::ja(0), keyed);

    // Precise rules: the exact VLAN (or untagged), then any VLAN.
    a.bind(keyed);
    for probe in 0..2 {
        if probe == 0 {
            a.push(Insn::load(Size::DW, Reg::R1, Reg::R10, stack::VLAN));
            a.push(Insn::alu64_imm(Alu::Or, Reg::R1, i32::from(VLAN_EXACT)));
            a.push(Insn::store(Size::H, Reg::R10, stack::VLAN_W, Reg::R1));
        } else {
            a.push(Insn::store_imm(Size::H, Reg::R10, stack::VLAN_W, 0));
        }
        a.extend(precise.ld_map(Reg::R1));
        a.push(Insn::mov64_reg(Reg::R2, Reg::R10));
        a.push(Insn::alu64_imm(Alu::Add, Reg::R2, i32::from(stack::KEY)));
        a.push(Insn::call(helper::MAP_LOOKUP_ELEM));
        a.push(Insn::mov64_reg(Reg::R9, Reg::R0));
        a.jump(Insn::jmp_imm(Cond::Ne, Reg::R0, 0, 0), matched);
    }
    a.push(Insn::load(Size::DW, Reg::R1, Reg::R10, stack::VLAN));
    a.push(Insn::store(Size::H, Reg::R10, stack::VLAN_W, Reg::R1));

    // Wildcard rules, in order: the count through the header's address (no lookup).
    let mut value = header.ld_map(Reg::R0);
    value[0].src = PSEUDO_MAP_VALUE;
    a.extend(value);
    a.push(Insn::load(Size::W, Reg::R1, Reg::R0, 0));
    a.push(Insn::store(Size::DW, Reg::R10, stack::COUNT, Reg::R1));
    a.push(Insn::mov64_imm(Reg::R8, 0));
    let (head, next) = (a.label(), a.label());
    a.bind(head);
    a.push(Insn::load(Size::DW, Reg::R1, Reg::R10, stack::ZERO));
    a.push(Insn::alu64_reg(Alu::Add, Reg::R8, Reg::R1));
    a.push(Insn::load(Size::DW, Reg::R1, Reg::R10, stack::COUNT));
    a.jump(Insn::jmp_reg(Cond::Ge, Reg::R8, Reg::R1, 0), nomatch);
    a.push(Insn::store(Size::W, Reg::R10, stack::IDX, Reg::R8));
    a.push(Insn::store(Size::DW, Reg::R10, stack::I, Reg::R8));
    a.extend(wild.ld_map(Reg::R1));
    a.push(Insn::mov64_reg(Reg::R2, Reg::R10));
    a.push(Insn::alu64_imm(Alu::Add, Reg::R2, i32::from(stack::IDX)));
    a.push(Insn::call(helper::MAP_LOOKUP_ELEM));
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R0, 0, 0), next);
    for w in 0..5i16 {
        a.push(Insn::load(Size::DW, Reg::R1, Reg::R10, stack::KEY + 8 * w));
        a.push(Insn::load(
            Size::DW,
            Reg::R2,
            Reg::R0,
            KEY_LEN as i16 + 8 * w,
        ));
        a.push(Insn::alu64_reg(Alu::And, Reg::R1, Reg::R2));
        a.push(Insn::load(Size::DW, Reg::R2, Reg::R0, 8 * w));
        a.jump(Insn::jmp_reg(Cond::Ne, Reg::R1, Reg::R2, 0), next);
    }
    a.push(Insn::mov64_reg(Reg::R9, Reg::R0));
    a.push(Insn::alu64_imm(Alu::Add, Reg::R9, ACT_OFF as i32));
    a.jump(Insn::ja(0), matched);
    a.bind(next);
    a.push(Insn::load(Size::DW, Reg::R8, Reg::R10, stack::I));
    a.push(Insn::alu64_imm(Alu::Add, Reg::R8, 1));
    a.jump(Insn::may_goto(0), nomatch);
    a.jump(Insn::ja(0), head);

    // A rule matched: r9 points at its slot, action and queue.
    a.bind(matched);
    a.push(Insn::load(Size::W, Reg::R1, Reg::R9, 0));
    a.push(Insn::alu64_imm(Alu::Add, Reg::R1, total::RULES as i32));
    a.push(Insn::store(Size::W, Reg::R10, stack::IDX, Reg::R1));
    a.push(Insn::load(Size::W, Reg::R8, Reg::R9, 4));
    a.push(Insn::load(Size::W, Reg::R9, Reg::R9, 8));
    count(&mut a, stats);
    let (drop_l, pass_l) = (a.label(), a.label());
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R8, act::DROP, 0), drop_l);
    a.jump(Insn::jmp_imm(Cond::Eq, Reg::R8, act::PASS, 0), pass_l);
    match redirect {
        None => finish(&mut a, stats, total::QUEUE, xdp_action::PASS),
        Some(map) => {
            a.push(Insn::store_imm(Size::W, Reg::R10, stack::IDX, total::QUEUE));
            count(&mut a, stats);
            a.extend(map.ld_map(Reg::R1));
            a.push(Insn::mov64_reg(Reg::R2, Reg::R9));
            a.push(Insn::mov64_imm(Reg::R3, xdp_action::PASS as i32));
            a.push(Insn::call(helper::REDIRECT_MAP));
            a.push(Insn::exit());
        }
    }
    a.bind(drop_l);
    finish(&mut a, stats, total::DROP, xdp_action::DROP);
    a.bind(pass_l);
    finish(&mut a, stats, total::PASS, xdp_action::PASS);
    a.bind(nomatch);
    finish(&mut a, stats, total::NO_MATCH, xdp_action::PASS);
    a.bind(nokey);
    finish(&mut a, stats, total::NO_KEY, xdp_action::PASS);
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::{FlowKey, Masked, Match, PROTO_SCTP, PROTO_TCP, PROTO_UDP, VlanMatch};
    use netsift_capture::generate::{FrameBuilder, TCP_ACK, XorShift64};
    use netsift_ebpf::TestRun;
    use std::net::IpAddr;

    /// The back end, or `None` (with a message) when bpf(2) is not permitted.
    fn offload(wild: u32, precise: u32, mode: QueueMode) -> Option<XdpOffload> {
        match XdpOffload::new(wild, precise, mode) {
            Ok(x) => Some(x),
            Err(e) if e.kind() == netsift_ebpf::ErrorKind::PermissionDenied => {
                println!("SKIPPED: bpf(2) is not permitted here (run as root): {e}");
                None
            }
            Err(e) => panic!("cannot load the XDP back end: {e}"),
        }
    }

    const V4: [[u8; 4]; 4] = [
        [198, 18, 0, 1],
        [198, 18, 0, 2],
        [198, 18, 1, 7],
        [198, 19, 200, 9],
    ];
    const PORTS: [u16; 5] = [53, 80, 443, 5060, 40000];

    fn v6(i: u64) -> [u8; 16] {
        let mut a = [0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        a[5] = (i % 2) as u8;
        a[15] = 1 + (i / 2 % 2) as u8;
        a
    }

    fn pick<T: Copy>(rng: &mut XorShift64, v: &[T]) -> T {
        v[rng.below(v.len() as u64) as usize]
    }

    /// Inserts IPv6 extension headers (hop-by-hop, destination options, routing, fragment,
    /// AH; up to nine, one more than the parser skips) after the IPv6 header at `ip`.
    fn with_ext_headers(rng: &mut XorShift64, frame: &mut Vec<u8>, ip: usize) {
        let n = 1 + rng.below(9) as usize;
        let mut next = frame[ip + 6];
        let mut chain: Vec<Vec<u8>> = Vec::new();
        for _ in 0..n {
            let kind = pick(rng, &[0u8, 43, 60, 44, 44, 51]);
            let h = match kind {
                0 | 43 | 60 => {
                    let l = rng.below(2) as u8;
                    let mut h = vec![0u8; (usize::from(l) + 1) * 8];
                    h[1] = l;
                    h
                }
                51 => {
                    let l = 1 + rng.below(2) as u8;
                    let mut h = vec![0u8; (usize::from(l) + 2) * 4];
                    h[1] = l;
                    h
                }
                _ => {
                    // Offset 0, 1 or 185 (units of 8 bytes), with random M and reserved bits.
                    let off: u16 = pick(rng, &[0u16, 1, 185]) << 3;
                    let mut h = vec![0u8; 8];
                    h[2..4].copy_from_slice(&(off | rng.below(8) as u16).to_be_bytes());
                    h
                }
            };
            let mut h = h;
            h[0] = next;
            chain.push(h);
            next = kind;
        }
        // Headers are built innermost last: reverse the "next" links into a chain.
        chain.reverse();
        frame[ip + 6] = next;
        let mut bytes = Vec::new();
        for h in chain {
            bytes.extend_from_slice(&h);
        }
        let at = ip + 40;
        frame.splice(at..at, bytes);
    }

    /// A random frame: IPv4/IPv6, TCP/UDP/SCTP/ICMP, VLAN tags (none to three), fragments,
    /// extension headers, then maybe truncated or with a byte changed.
    fn random_frame(rng: &mut XorShift64) -> Vec<u8> {
        let mut b = FrameBuilder::new();
        let tags = match rng.below(8) {
            0 => {
                b = b.vlan(pick(rng, &[5, 7, 0x105]));
                1
            }
            1 => {
                b = b.vlan_tag(0x88a8, 0x2000 | pick(rng, &[5, 7])).vlan(9);
                2
            }
            2 => {
                b = b.vlan_tag(0x9100, 7).vlan(5);
                2
            }
            3 => {
                b = b.vlan(5).vlan(6).vlan(7);
                3
            }
            _ => 0,
        };
        let six = rng.below(3) == 0;
        b = if six {
            b.ipv6(v6(rng.next_u64()), v6(rng.next_u64()))
        } else {
            let b = b.ipv4(pick(rng, &V4), pick(rng, &V4));
            match rng.below(6) {
                0 => b.fragment(pick(rng, &[1, 185, 0x1000, 0x1fff]), rng.below(2) == 0),
                1 => b.fragment(0, true),
                _ => b,
            }
        };
        let (sp, dp) = (pick(rng, &PORTS), pick(rng, &PORTS));
        b = match rng.below(7) {
            0 | 1 => b.tcp(sp, dp, TCP_ACK),
            2..=4 => b.udp(sp, dp),
            5 => {
                let mut p = sp.to_be_bytes().to_vec();
                p.extend_from_slice(&dp.to_be_bytes());
                p.extend_from_slice(&[0; 8]);
                b.ip_protocol(PROTO_SCTP).payload(&p)
            }
            _ => b.icmp_echo_request(1, 2),
        };
        if rng.below(3) == 0 {
            b = b.payload(&[0xab; 20]);
        }
        let mut f = b.build();
        if six && rng.below(2) == 0 {
            with_ext_headers(rng, &mut f, 14 + 4 * tags);
        }
        if rng.below(4) == 0 {
            let len = 14 + rng.below(f.len().saturating_sub(13) as u64) as usize;
            f.truncate(len);
        }
        if rng.below(8) == 0 && !f.is_empty() {
            let at = rng.below(f.len() as u64) as usize;
            f[at] = rng.next_u64() as u8;
        }
        f
    }

    fn random_vlan(rng: &mut XorShift64) -> VlanMatch {
        match rng.below(6) {
            0 => VlanMatch::Untagged,
            1 => VlanMatch::id(pick(rng, &[5, 7, 0x105])),
            2 => VlanMatch::Tagged { id: 5, mask: 0xff },
            3 => VlanMatch::Tagged { id: 0, mask: 0 },
            _ => VlanMatch::Any,
        }
    }

    fn random_action(rng: &mut XorShift64) -> Action {
        match rng.below(4) {
            0 => Action::Drop,
            1 => Action::Pass,
            _ => Action::Queue(rng.below(4) as u16),
        }
    }

    /// A random rule shaped after `key`: precise (exact VLAN or any), or with some fields
    /// masked.
    fn random_rule(rng: &mut XorShift64, id: u32, key: &FlowKey) -> Rule {
        let action = random_action(rng);
        if rng.below(2) == 0
            && let Some(m) = Match::precise(key)
        {
            let m = if rng.below(2) == 0 {
                m.with_vlan(VlanMatch::Any)
            } else {
                m
            };
            return Rule::new(RuleId(id), m, action);
        }
        let fam = key.family();
        let mut m = Match::new(fam).with_vlan(random_vlan(rng));
        if rng.below(3) != 0 {
            m = match rng.below(4) {
                0 => m.with_proto_masked(Masked::new(key.proto, 0xf0)),
                _ => m.with_proto(key.proto),
            };
        }
        for dst in [false, true] {
            if rng.below(2) == 0 {
                let len = pick(rng, &[8u8, 16, 24, 31, 32, 64, 127, 128]);
                let addr = if dst { key.dst } else { key.src };
                let mask = fam.prefix_mask(len);
                m = if dst {
                    m.try_dst(addr, mask).unwrap()
                } else {
                    m.try_src(addr, mask).unwrap()
                };
            }
        }
        if let Some((sp, dp)) = key.ports {
            match rng.below(5) {
                0 => m = m.with_dst_port(dp),
                1 => {
                    m = m
                        .with_src_port(sp)
                        .with_dst_port_masked(Masked::new(dp, 0xff00))
                }
                2 => m = m.with_dst_port_masked(Masked::new(dp, 0x000f)),
                _ => {}
            }
        }
        Rule::new(RuleId(id), m, action).with_priority(rng.below(4) as u8)
    }

    #[derive(Default)]
    struct Expected {
        totals: XdpTotals,
    }

    /// The verdict the table gives `frame` in `mode` (redirects to the `enabled` queues),
    /// counting it on the rule and in the expected totals.
    fn reference(
        table: &mut RuleTable,
        frame: &[u8],
        enabled: &[u32],
        mode: QueueMode,
        exp: &mut Expected,
    ) -> u32 {
        let len = frame.len() as u32;
        let bump = |c: &mut Counters| {
            c.packets += 1;
            c.bytes += u64::from(len);
        };
        let Some(key) = FlowKey::from_frame(frame) else {
            bump(&mut exp.totals.no_key);
            return xdp_action::PASS;
        };
        match table.classify(&key, len) {
            None => {
                bump(&mut exp.totals.no_match);
                xdp_action::PASS
            }
            Some((_, Action::Drop)) => {
                bump(&mut exp.totals.dropped);
                xdp_action::DROP
            }
            Some((_, Action::Pass)) => {
                bump(&mut exp.totals.passed);
                xdp_action::PASS
            }
            Some((_, Action::Queue(q))) => {
                bump(&mut exp.totals.queued);
                if mode != QueueMode::Pass && enabled.contains(&u32::from(q)) {
                    xdp_action::REDIRECT
                } else {
                    xdp_action::PASS
                }
            }
        }
    }

    fn differential(mode: QueueMode, tables: usize, frames_per_table: usize, seed: u64) {
        let Some(mut xdp) = offload(128, 256, mode) else {
            return;
        };
        println!(
            "XDP back end ({mode:?}): program of {} instructions, verified in {:?} steps",
            xdp.program().len(),
            xdp.program().verified_insns()
        );
        let mut enabled = Vec::new();
        if mode == QueueMode::Cpu {
            for q in 0..2 {
                if xdp.enable_cpu_queue(q, 64).is_ok() {
                    enabled.push(q);
                }
            }
        }
        let mut rng = XorShift64::new(seed);
        let mut seen = [0u64; 5];
        // What decided: no key, no rule, a precise rule, a wildcard rule.
        let mut decided = [0u64; 4];
        let (mut frames_run, mut rules_total, mut removed) = (0u64, 0usize, 0usize);
        for t in 0..tables {
            let frames: Vec<Vec<u8>> = (0..frames_per_table)
                .map(|_| random_frame(&mut rng))
                .collect();
            let keys: Vec<FlowKey> = frames
                .iter()
                .filter_map(|f| FlowKey::from_frame(f))
                .collect();
            let mut table = RuleTable::new();
            let incremental = t % 2 == 1;
            xdp.clear().unwrap();
            let n = 1 + rng.below(60) as u32;
            for i in 0..n {
                let Some(&key) = keys.get(rng.below(keys.len().max(1) as u64) as usize) else {
                    break;
                };
                let rule = random_rule(&mut rng, 1000 * t as u32 + i, &key);
                if table.add(rule).is_ok() && incremental {
                    xdp.install(rule).unwrap();
                }
            }
            if incremental {
                let ids: Vec<RuleId> = table.iter().map(|(r, _)| r.id).collect();
                for id in ids {
                    if rng.below(5) == 0 {
                        let (a, _) = table.remove(id).unwrap();
                        let (b, c) = xdp.remove(id).unwrap();
                        assert_eq!((a, c), (b, Counters::default()));
                        removed += 1;
                    }
                }
                assert_eq!(xdp.len(), table.len());
            } else {
                xdp.load_from(&table).unwrap();
            }
            rules_total += table.len();
            xdp.reset_counters().unwrap();
            let mut exp = Expected::default();
            for f in &frames {
                let want = reference(&mut table, f, &enabled, mode, &mut exp);
                let got = xdp.program().test_run(&TestRun::new(f)).unwrap().retval;
                assert_eq!(
                    got,
                    want,
                    "table {t}, frame {f:02x?}\nkey {:?}\nrule {:?}",
                    FlowKey::from_frame(f),
                    FlowKey::from_frame(f).and_then(|k| table.lookup(&k).copied())
                );
                seen[got as usize % 5] += 1;
                let by = FlowKey::from_frame(f).map_or(0, |k| {
                    table
                        .lookup(&k)
                        .map_or(1, |r| if r.is_precise() { 2 } else { 3 })
                });
                decided[by] += 1;
                frames_run += 1;
            }
            for (rule, c) in table.iter() {
                assert_eq!(xdp.counters(rule.id).unwrap(), c, "table {t}, {rule}");
            }
            assert_eq!(xdp.totals().unwrap(), exp.totals, "table {t}");
        }
        println!(
            "XDP back end ({mode:?}): {tables} tables, {rules_total} rules ({removed} removed \
             again), {frames_run} frames: {} dropped, {} passed, {} redirected, each as the \
             rule table says, counters equal; decided by: {} no key, {} no rule, {} precise \
             rules, {} wildcard rules",
            seen[xdp_action::DROP as usize],
            seen[xdp_action::PASS as usize],
            seen[xdp_action::REDIRECT as usize],
            decided[0],
            decided[1],
            decided[2],
            decided[3],
        );
    }

    #[test]
    fn differential_pass_mode() {
        differential(QueueMode::Pass, 150, 1000, 1);
    }

    #[test]
    fn differential_cpu_redirect() {
        differential(QueueMode::Cpu, 150, 1000, 2);
    }

    #[test]
    fn xsk_mode_loads_and_passes_without_sockets() {
        let Some(mut xdp) = offload(4, 4, QueueMode::Xsk { queues: 4 }) else {
            return;
        };
        let f = FrameBuilder::new()
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2])
            .udp(1, 2)
            .build();
        let m = Match::new(Family::V4).with_proto(PROTO_UDP);
        xdp.install(Rule::new(RuleId(1), m, Action::Queue(1)))
            .unwrap();
        let r = xdp.program().test_run(&TestRun::new(&f)).unwrap();
        assert_eq!(r.retval, xdp_action::PASS, "empty XSKMAP entry: pass");
        assert_eq!(xdp.counters(RuleId(1)).unwrap().packets, 1);
        assert_eq!(xdp.totals().unwrap().queued.packets, 1);
        let e = xdp.enable_cpu_queue(0, 64).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Action);
    }

    #[test]
    fn errors_and_capacity() {
        let Some(mut xdp) = offload(2, 1, QueueMode::Pass) else {
            return;
        };
        let key = FlowKey {
            vlan: None,
            proto: PROTO_TCP,
            src: IpAddr::from([198, 18, 0, 1]),
            dst: IpAddr::from([198, 18, 0, 2]),
            ports: Some((1, 2)),
        };
        let precise = Match::precise(&key).unwrap();
        xdp.install(Rule::new(RuleId(1), precise, Action::Drop))
            .unwrap();
        let e = xdp
            .install(Rule::new(RuleId(1), precise, Action::Drop))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DuplicateId);
        let e = xdp
            .install(Rule::new(RuleId(2), precise, Action::Drop))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Capacity);
        let w = Match::new(Family::V4).with_proto(PROTO_UDP);
        for id in 3..5 {
            xdp.install(Rule::new(RuleId(id), w, Action::Pass)).unwrap();
        }
        let e = xdp
            .install(Rule::new(RuleId(5), w, Action::Pass))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Capacity);
        assert_eq!(
            e.to_string(),
            "rule 5: the XDP wildcard rule map is full (2 rules)"
        );
        assert_eq!(
            xdp.remove(RuleId(9)).unwrap_err().kind(),
            ErrorKind::UnknownId
        );
        assert_eq!(
            xdp.counters(RuleId(9)).unwrap_err().kind(),
            ErrorKind::UnknownId
        );
        assert_eq!(xdp.clear_queue(0).unwrap_err().kind(), ErrorKind::Action);
        let mut table = RuleTable::new();
        for id in 10..13 {
            table.add(Rule::new(RuleId(id), w, Action::Drop)).unwrap();
        }
        let e = xdp.load_from(&table).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Capacity);
        assert_eq!(
            xdp.len(),
            3,
            "a refused table leaves the rules as they were"
        );
    }
}
