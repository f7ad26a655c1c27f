//! The rule table of a NIC: precise rules by hash, wildcard rules by priority, with counters.
//!
//! # Lookup: best match first
//!
//! A packet's [`FlowKey`] is looked up among the precise rules first (one or two hash probes: a
//! rule with an exact VLAN, then one with any VLAN), then among the wildcard rules from the
//! highest priority down, ties going to the rule installed first. The first rule that matches
//! decides the [`Action`] and has its packet and byte counters increased.
//!
//! # Layouts
//!
//! Where rules live depends on the [`Profile`] the table was made for:
//!
//! - [`Layout::Split`] (software, ethtool n-tuple NICs, mlx5, 82599 5-tuple filters): precise
//!   rules in a hash map keyed by their tuple, wildcard rules in an ordered map keyed by
//!   `(priority, insertion number)`.
//! - [`Layout::GlobalMask`] (82599 Flow Director): every rule in one hash map keyed by its tuple
//!   under the one mask that all the filters share, which the first rule sets and which is free
//!   again once the table is empty (as the ixgbe driver does). In signature mode the map is keyed
//!   by a 32-bit hash of the masked tuple instead, so a packet whose masked tuple has the same
//!   hash as a rule's matches that rule: the false positives of the 82599's signature filters.
//!
//! # Cost
//!
//! Adding or removing a rule by id is one or two hash-map operations for a precise rule and
//! `O(log n)` for a wildcard rule; lookup is `O(1)` for precise rules and linear in the number
//! of wildcard rules tried (as in a NIC's TCAM, where it happens in parallel).

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use crate::error::{ErrorKind, OffloadError};
use crate::profile::Profile;
use crate::rule::{Action, FieldMasks, FlowKey, Rule, RuleId, TupleKey};

/// Packet and byte counters of a rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counters {
    /// Packets matched.
    pub packets: u64,
    /// Bytes matched (wire lengths).
    pub bytes: u64,
}

impl Counters {
    fn count(&mut self, bytes: u32) {
        self.packets = self.packets.saturating_add(1);
        self.bytes = self.bytes.saturating_add(u64::from(bytes));
    }
}

/// Something rules can be installed in and removed from: a [`RuleTable`], an
/// [`EmulatedNic`](crate::EmulatedNic) (which also checks queue numbers).
pub trait RuleSink {
    /// Installs `rule`.
    fn add_rule(&mut self, rule: Rule) -> Result<(), OffloadError>;
    /// Removes the rule `id`.
    fn remove_rule(&mut self, id: RuleId) -> Result<(), OffloadError>;
}

impl RuleSink for RuleTable {
    fn add_rule(&mut self, rule: Rule) -> Result<(), OffloadError> {
        self.add(rule)
    }

    fn remove_rule(&mut self, id: RuleId) -> Result<(), OffloadError> {
        self.remove(id).map(|_| ())
    }
}

/// How a table stores its rules; chosen by the [`Profile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Precise rules hashed by tuple, wildcard rules ordered by priority.
    Split,
    /// Every rule hashed by its tuple under one shared mask (Flow Director).
    GlobalMask {
        /// Key rules by a 32-bit hash of the masked tuple (signature filters) instead of the
        /// masked tuple itself (perfect filters).
        signature: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Bucket {
    Tuple(TupleKey),
    Signature(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Order(Reverse<u8>, u64);

#[derive(Clone, Copy, Debug)]
enum Slot {
    Hashed(Bucket),
    Ordered(Order),
}

#[derive(Clone, Debug)]
struct Entry {
    rule: Rule,
    counters: Counters,
}

/// A rule table under a [`Profile`]; see the module documentation.
#[derive(Clone, Debug)]
pub struct RuleTable {
    profile: Profile,
    layout: Layout,
    /// The mask shared by all rules in [`Layout::GlobalMask`]; `None` while empty.
    global_mask: Option<FieldMasks>,
    hashed: HashMap<Bucket, Entry>,
    ordered: BTreeMap<Order, Entry>,
    ids: HashMap<RuleId, Slot>,
    next_seq: u64,
}

impl Default for RuleTable {
    fn default() -> RuleTable {
        RuleTable::new()
    }
}

impl RuleTable {
    /// An empty software table: any rule, no capacity limit.
    pub fn new() -> RuleTable {
        RuleTable::for_profile(Profile::Software)
    }

    /// An empty table that accepts only what `profile` can hold.
    pub fn for_profile(profile: Profile) -> RuleTable {
        RuleTable {
            layout: profile.layout(),
            profile,
            global_mask: None,
            hashed: HashMap::new(),
            ordered: BTreeMap::new(),
            ids: HashMap::new(),
            next_seq: 0,
        }
    }

    /// The profile.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The mask all rules share in [`Layout::GlobalMask`] (`None` while the table is empty or
    /// for [`Layout::Split`]).
    pub fn global_mask(&self) -> Option<FieldMasks> {
        self.global_mask
    }

    /// The number of rules.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// How many more rules fit (`usize::MAX` for an unlimited profile).
    pub fn free(&self) -> usize {
        self.profile.capacity().saturating_sub(self.len())
    }

    /// Installs `rule`.
    ///
    /// Fails, leaving the table unchanged, when the id is taken ([`ErrorKind::DuplicateId`]),
    /// when the profile cannot express the rule ([`Profile::check`]), when the table is full
    /// ([`ErrorKind::Capacity`]), when the rule's masks differ from the global mask
    /// ([`ErrorKind::MaskConflict`]) or when another rule already has the same hash key
    /// ([`ErrorKind::Conflict`]).
    pub fn add(&mut self, rule: Rule) -> Result<(), OffloadError> {
        if self.ids.contains_key(&rule.id) {
            return Err(OffloadError::new(
                ErrorKind::DuplicateId,
                Some(rule.id),
                "a rule with this id is already installed",
            ));
        }
        self.profile.check(&rule)?;
        if self.len() >= self.profile.capacity() {
            return Err(OffloadError::new(
                ErrorKind::Capacity,
                Some(rule.id),
                format!(
                    "the {} table is full ({} rules)",
                    self.profile,
                    self.profile.capacity()
                ),
            ));
        }
        let slot = match self.layout {
            Layout::Split if rule.is_precise() => {
                Slot::Hashed(Bucket::Tuple(TupleKey::of_match(&rule.pattern)))
            }
            Layout::Split => {
                let order = Order(Reverse(rule.priority), self.next_seq);
                self.next_seq = self.next_seq.wrapping_add(1);
                Slot::Ordered(order)
            }
            Layout::GlobalMask { signature } => {
                let masks = rule.pattern.masks();
                if let Some(global) = self.global_mask
                    && global != masks
                {
                    return Err(OffloadError::new(
                        ErrorKind::MaskConflict,
                        Some(rule.id),
                        format!(
                            "its masks differ from the one mask that all {} filters share \
                             (set by the first rule; remove every rule to change it)",
                            self.profile
                        ),
                    ));
                }
                let tuple = TupleKey::of_match(&rule.pattern);
                Slot::Hashed(if signature {
                    Bucket::Signature(tuple.signature())
                } else {
                    Bucket::Tuple(tuple)
                })
            }
        };
        match slot {
            Slot::Hashed(bucket) => {
                if let Some(other) = self.hashed.get(&bucket) {
                    return Err(OffloadError::new(
                        ErrorKind::Conflict,
                        Some(rule.id),
                        format!("it has the same hash key as rule {}", other.rule.id),
                    ));
                }
                self.hashed.insert(
                    bucket,
                    Entry {
                        rule,
                        counters: Counters::default(),
                    },
                );
                if let Layout::GlobalMask { .. } = self.layout {
                    self.global_mask = Some(rule.pattern.masks());
                }
            }
            Slot::Ordered(order) => {
                self.ordered.insert(
                    order,
                    Entry {
                        rule,
                        counters: Counters::default(),
                    },
                );
            }
        }
        self.ids.insert(rule.id, slot);
        Ok(())
    }

    /// Removes the rule `id` and returns it with its counters.
    pub fn remove(&mut self, id: RuleId) -> Result<(Rule, Counters), OffloadError> {
        let Some(slot) = self.ids.remove(&id) else {
            return Err(OffloadError::new(
                ErrorKind::UnknownId,
                Some(id),
                "no rule with this id is installed",
            ));
        };
        let entry = match slot {
            Slot::Hashed(bucket) => self.hashed.remove(&bucket),
            Slot::Ordered(order) => self.ordered.remove(&order),
        };
        if self.ids.is_empty() {
            self.global_mask = None;
        }
        match entry {
            Some(e) => Ok((e.rule, e.counters)),
            // The maps are kept in step with `ids`; this arm is never taken.
            None => Err(OffloadError::new(
                ErrorKind::UnknownId,
                Some(id),
                "internal error: rule missing from its map",
            )),
        }
    }

    /// Removes every rule.
    pub fn clear(&mut self) {
        self.hashed.clear();
        self.ordered.clear();
        self.ids.clear();
        self.global_mask = None;
    }

    fn entry(&self, id: RuleId) -> Option<&Entry> {
        match self.ids.get(&id)? {
            Slot::Hashed(b) => self.hashed.get(b),
            Slot::Ordered(o) => self.ordered.get(o),
        }
    }

    /// The rule `id`.
    pub fn get(&self, id: RuleId) -> Option<&Rule> {
        self.entry(id).map(|e| &e.rule)
    }

    /// The counters of rule `id`.
    pub fn counters(&self, id: RuleId) -> Option<Counters> {
        self.entry(id).map(|e| e.counters)
    }

    /// Every rule with its counters: hashed rules in no particular order, then wildcard rules
    /// in lookup order.
    pub fn iter(&self) -> impl Iterator<Item = (&Rule, Counters)> + '_ {
        self.hashed
            .values()
            .chain(self.ordered.values())
            .map(|e| (&e.rule, e.counters))
    }

    /// Sets every counter to zero.
    pub fn reset_counters(&mut self) {
        for e in self.hashed.values_mut().chain(self.ordered.values_mut()) {
            e.counters = Counters::default();
        }
    }

    /// The hash buckets `key` is looked up in, most specific first.
    fn buckets(&self, key: &FlowKey) -> [Option<Bucket>; 2] {
        match self.layout {
            Layout::Split => {
                if self.hashed.is_empty() {
                    return [None, None];
                }
                let full = FieldMasks::full(key.family());
                let any_vlan = FieldMasks { vlan: 0, ..full };
                [
                    TupleKey::of_key(key, &full).map(Bucket::Tuple),
                    TupleKey::of_key(key, &any_vlan).map(Bucket::Tuple),
                ]
            }
            Layout::GlobalMask { signature } => {
                let Some(mask) = self.global_mask else {
                    return [None, None];
                };
                let tuple = TupleKey::of_key(key, &mask);
                let bucket = if signature {
                    tuple.map(|t| Bucket::Signature(t.signature()))
                } else {
                    tuple.map(Bucket::Tuple)
                };
                [bucket, None]
            }
        }
    }

    /// The rule that decides for `key`, without counting.
    pub fn lookup(&self, key: &FlowKey) -> Option<&Rule> {
        for bucket in self.buckets(key).into_iter().flatten() {
            if let Some(e) = self.hashed.get(&bucket) {
                return Some(&e.rule);
            }
        }
        self.ordered
            .values()
            .find(|e| e.rule.pattern.matches(key))
            .map(|e| &e.rule)
    }

    /// Looks `key` up, counts a packet of `wire_len` bytes on the rule that decides, and
    /// returns that rule's id and action (`None`: no rule matched).
    pub fn classify(&mut self, key: &FlowKey, wire_len: u32) -> Option<(RuleId, Action)> {
        for bucket in self.buckets(key).into_iter().flatten() {
            if let Some(e) = self.hashed.get_mut(&bucket) {
                e.counters.count(wire_len);
                return Some((e.rule.id, e.rule.action));
            }
        }
        let e = self
            .ordered
            .values_mut()
            .find(|e| e.rule.pattern.matches(key))?;
        e.counters.count(wire_len);
        Some((e.rule.id, e.rule.action))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Pballoc;
    use crate::rule::tests::{tcp4, v4};
    use crate::rule::{Family, Match, PROTO_TCP, PROTO_UDP, VlanMatch};

    fn key(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16) -> FlowKey {
        FlowKey::from_frame(&tcp4(src, sp, dst, dp)).unwrap()
    }

    fn precise(id: u32, k: &FlowKey, action: Action) -> Rule {
        let m = Match::precise(k).unwrap().with_vlan(VlanMatch::Any);
        Rule::new(RuleId(id), m, action)
    }

    fn port_rule(id: u32, dport: u16, action: Action, prio: u8) -> Rule {
        let m = Match::new(Family::V4)
            .with_proto(PROTO_TCP)
            .with_dst_port(dport);
        Rule::new(RuleId(id), m, action).with_priority(prio)
    }

    #[test]
    fn precise_before_wildcard_then_priority() {
        let mut t = RuleTable::new();
        let k = key([1, 1, 1, 1], 1000, [2, 2, 2, 2], 80);
        t.add(port_rule(1, 80, Action::Drop, 1)).unwrap();
        t.add(port_rule(2, 80, Action::Queue(3), 5)).unwrap();
        t.add(port_rule(3, 80, Action::Queue(4), 5)).unwrap();
        assert_eq!(t.classify(&k, 60), Some((RuleId(2), Action::Queue(3))));
        t.add(precise(9, &k, Action::Pass)).unwrap();
        assert_eq!(t.classify(&k, 100), Some((RuleId(9), Action::Pass)));
        assert_eq!(t.counters(RuleId(9)).unwrap().bytes, 100);
        assert_eq!(
            t.counters(RuleId(2)),
            Some(Counters {
                packets: 1,
                bytes: 60
            })
        );
        t.remove(RuleId(9)).unwrap();
        t.remove(RuleId(2)).unwrap();
        assert_eq!(t.classify(&k, 1), Some((RuleId(3), Action::Queue(4))));
        let other = key([1, 1, 1, 1], 1000, [2, 2, 2, 2], 81);
        assert_eq!(t.classify(&other, 1), None);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn vlan_exact_precise_wins_over_any_vlan() {
        let mut t = RuleTable::new();
        let mut k = key([1, 1, 1, 1], 1, [2, 2, 2, 2], 2);
        k.vlan = Some(10);
        t.add(precise(1, &k, Action::Queue(1))).unwrap();
        let exact = Rule::new(RuleId(2), Match::precise(&k).unwrap(), Action::Queue(2));
        t.add(exact).unwrap();
        assert_eq!(t.lookup(&k).map(|r| r.id), Some(RuleId(2)));
        k.vlan = Some(11);
        assert_eq!(t.lookup(&k).map(|r| r.id), Some(RuleId(1)));
        k.vlan = None;
        assert_eq!(t.lookup(&k).map(|r| r.id), Some(RuleId(1)));
    }

    #[test]
    fn ids_and_conflicts() {
        let mut t = RuleTable::new();
        let k = key([1, 1, 1, 1], 1, [2, 2, 2, 2], 2);
        t.add(precise(1, &k, Action::Drop)).unwrap();
        let e = t.add(port_rule(1, 5, Action::Drop, 0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DuplicateId);
        let e = t.add(precise(2, &k, Action::Drop)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict);
        assert_eq!(e.to_string(), "rule 2: it has the same hash key as rule 1");
        assert_eq!(
            t.remove(RuleId(7)).unwrap_err().kind(),
            ErrorKind::UnknownId
        );
        assert_eq!(t.len(), 1);
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn many_rules_add_remove() {
        let mut t = RuleTable::new();
        for i in 0..30_000u32 {
            let k = key([10, 0, (i >> 8) as u8, i as u8], 5060, [10, 1, 0, 1], 40000);
            t.add(precise(i, &k, Action::Queue((i % 4) as u16)))
                .unwrap();
        }
        for i in 0..2_000u32 {
            t.add(port_rule(
                100_000 + i,
                i as u16,
                Action::Drop,
                (i % 8) as u8,
            ))
            .unwrap();
        }
        assert_eq!(t.len(), 32_000);
        let k = key([10, 0, 1, 44], 5060, [10, 1, 0, 1], 40000);
        assert_eq!(t.lookup(&k).map(|r| r.action), Some(Action::Queue(300 % 4)));
        for i in (0..30_000u32).step_by(2) {
            t.remove(RuleId(i)).unwrap();
        }
        for i in 0..2_000u32 {
            t.remove(RuleId(100_000 + i)).unwrap();
        }
        assert_eq!(t.len(), 15_000);
        assert_eq!(t.lookup(&k).map(|r| r.action), None, "rule 300 removed");
    }

    #[test]
    fn flow_director_global_mask() {
        let mut t = RuleTable::for_profile(Profile::Intel82599FdirPerfect(Pballoc::K64));
        let host = |id: u32, a: [u8; 4]| {
            let m = Match::new(Family::V4)
                .try_dst(std::net::IpAddr::from(a), u128::from(u32::MAX))
                .unwrap()
                .with_proto(PROTO_UDP);
            Rule::new(RuleId(id), m, Action::Queue(1))
        };
        t.add(host(1, [10, 0, 0, 1])).unwrap();
        t.add(host(2, [10, 0, 0, 2])).unwrap();
        let e = t.add(port_rule(3, 53, Action::Drop, 0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MaskConflict);
        let udp = FlowKey {
            vlan: Some(3),
            proto: PROTO_UDP,
            src: v4("9.9.9.9"),
            dst: v4("10.0.0.2"),
            ports: None,
        };
        assert_eq!(t.lookup(&udp).map(|r| r.id), Some(RuleId(2)));
        t.remove(RuleId(1)).unwrap();
        t.remove(RuleId(2)).unwrap();
        assert_eq!(t.global_mask(), None);
        t.add(port_rule(3, 53, Action::Drop, 0)).unwrap();
    }

    #[test]
    fn signature_filters_have_false_positives() {
        let mut t = RuleTable::for_profile(Profile::Intel82599FdirHash(Pballoc::K64));
        let base = key([10, 0, 0, 1], 1, [10, 0, 0, 2], 2);
        let rule = precise(1, &base, Action::Drop);
        t.add(rule).unwrap();
        assert_eq!(t.lookup(&base).map(|r| r.id), Some(RuleId(1)));
        // Find another tuple whose 32-bit signature collides (a birthday search against one
        // target needs about 2^32 tries, so instead search pairs among 2^18 random tuples).
        let mask = t.global_mask().unwrap();
        let mut seen: HashMap<u32, FlowKey> = HashMap::new();
        let mut pair = None;
        let mut rng = netsift_capture::generate::XorShift64::new(5);
        for _ in 0..(1u32 << 18) {
            let r = rng.next_u64();
            let k = FlowKey {
                src: std::net::IpAddr::from((r as u32).to_be_bytes()),
                ports: Some(((r >> 32) as u16, 2)),
                ..base
            };
            let sig = TupleKey::of_key(&k, &mask).unwrap().signature();
            if let Some(prev) = seen.insert(sig, k) {
                pair = Some((prev, k));
                break;
            }
        }
        let (a, b) = pair.expect("a collision among 2^18 signatures");
        assert_ne!(a, b);
        let mut t = RuleTable::for_profile(Profile::Intel82599FdirHash(Pballoc::K64));
        t.add(precise(1, &a, Action::Drop)).unwrap();
        assert_eq!(
            t.lookup(&b).map(|r| r.id),
            Some(RuleId(1)),
            "false positive"
        );
        // A perfect filter does not confuse them.
        let mut t = RuleTable::for_profile(Profile::Intel82599FdirPerfect(Pballoc::K64));
        t.add(precise(1, &a, Action::Drop)).unwrap();
        assert_eq!(t.lookup(&b), None);
    }

    #[test]
    fn capacity_is_enforced() {
        let mut t = RuleTable::for_profile(Profile::Ntuple { rules: 2 });
        t.add(port_rule(1, 1, Action::Drop, 0)).unwrap();
        t.add(port_rule(2, 2, Action::Drop, 0)).unwrap();
        let e = t.add(port_rule(3, 3, Action::Drop, 0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Capacity);
        assert_eq!(
            e.to_string(),
            "rule 3: the ntuple:2 table is full (2 rules)"
        );
        assert!(e.is_capability());
        assert_eq!(t.free(), 0);
    }
}
