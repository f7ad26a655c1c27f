//! An emulated multi-queue NIC: a rule table in front of RSS, as a packet source.
//!
//! [`EmulatedNic::receive`] does what the NIC does with one frame: it takes the frame's
//! [`FlowKey`], looks it up in the [`RuleTable`] and then
//!
//! - [`Action::Drop`]: counts the packet and never delivers it;
//! - [`Action::Queue`]`(n)`: delivers it on queue `n`;
//! - [`Action::Pass`] or no rule: delivers it where [`Rss`] puts it.
//!
//! Frames that are not IPv4/IPv6 (or are too short to hold the addresses) match no rule and have
//! no RSS hash; like a NIC, the emulation delivers them on the queue of hash 0 (indirection
//! entry 0).
//!
//! [`EmulatedNic::deliver`] wraps any packet source (an iterator of
//! [`netsift_capture::Packet`]: a capture file, a live interface, a generator) and yields the
//! `(queue, packet)` pairs of the packets that were not dropped; [`EmulatedNic::try_deliver`]
//! does the same for sources that yield `Result`s, such as
//! [`CaptureReader`](netsift_capture::CaptureReader).
//!
//! Rules installed through the NIC ([`EmulatedNic::install`]) must name an existing queue, as
//! drivers check. A table handed to [`EmulatedNic::new`] is taken as is; a packet that a rule
//! steers to a missing queue is delivered by RSS instead and counted in
//! [`NicStats::bad_queue`].

use netsift_capture::{Packet, PacketRef};

use crate::error::{ErrorKind, OffloadError};
use crate::profile::Profile;
use crate::rss::Rss;
use crate::rule::{Action, FlowKey, Rule, RuleId};
use crate::table::RuleSink;
use crate::table::{Counters, RuleTable};

/// What the NIC did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// Dropped by `rule`.
    Dropped {
        /// The drop rule.
        rule: RuleId,
    },
    /// Delivered on `queue`.
    Queued {
        /// The RX queue.
        queue: u16,
        /// The rule that steered the packet; `None` when RSS chose the queue (no rule, a
        /// [`Action::Pass`] rule, or a rule naming a missing queue).
        steered_by: Option<RuleId>,
        /// The rule that matched, if any (a `pass` rule matches without steering).
        matched: Option<RuleId>,
    },
}

impl Delivery {
    /// Whether the packet was dropped.
    pub fn is_dropped(&self) -> bool {
        matches!(self, Delivery::Dropped { .. })
    }

    /// The queue the packet was delivered on, `None` if dropped.
    pub fn queue(&self) -> Option<u16> {
        match self {
            Delivery::Dropped { .. } => None,
            Delivery::Queued { queue, .. } => Some(*queue),
        }
    }

    /// The rule that matched the packet, if any.
    pub fn rule(&self) -> Option<RuleId> {
        match self {
            Delivery::Dropped { rule } => Some(*rule),
            Delivery::Queued { matched, .. } => *matched,
        }
    }
}

/// The counters of one RX queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueueStats {
    /// Packets delivered.
    pub packets: u64,
    /// Bytes delivered (wire lengths).
    pub bytes: u64,
    /// Of the packets, those a rule steered here (the rest came through RSS).
    pub steered: u64,
}

/// The counters of the whole NIC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NicStats {
    /// Packets received (delivered or dropped).
    pub received: u64,
    /// Bytes received.
    pub received_bytes: u64,
    /// Packets dropped by rules.
    pub dropped: u64,
    /// Bytes dropped by rules.
    pub dropped_bytes: u64,
    /// Packets that matched a rule (drop, queue or pass).
    pub matched: u64,
    /// Packets that were not IPv4/IPv6 or too short for a key.
    pub not_ip: u64,
    /// Packets a rule steered to a queue the NIC does not have (delivered by RSS instead).
    pub bad_queue: u64,
}

/// An emulated NIC with `queues` RX queues; see the module documentation.
#[derive(Clone, Debug)]
pub struct EmulatedNic {
    table: RuleTable,
    rss: Rss,
    queues: Vec<QueueStats>,
    stats: NicStats,
}

impl EmulatedNic {
    /// A NIC with `queues` RX queues (at least 1), default RSS and `table`.
    pub fn new(queues: u16, table: RuleTable) -> EmulatedNic {
        let rss = Rss::new(queues);
        EmulatedNic {
            queues: vec![QueueStats::default(); usize::from(rss.queues())],
            rss,
            table,
            stats: NicStats::default(),
        }
    }

    /// A NIC with `queues` RX queues and an empty table for `profile`.
    pub fn with_profile(queues: u16, profile: Profile) -> EmulatedNic {
        EmulatedNic::new(queues, RuleTable::for_profile(profile))
    }

    /// The NIC with another RSS configuration; its queue count is ignored in favour of the
    /// NIC's (the indirection entries are reduced modulo the NIC's queues).
    pub fn with_rss(mut self, rss: Rss) -> EmulatedNic {
        self.rss = rss;
        self
    }

    /// The number of RX queues.
    pub fn queue_count(&self) -> u16 {
        // The vector was made from a u16 count.
        u16::try_from(self.queues.len()).unwrap_or(u16::MAX)
    }

    /// The rule table.
    pub fn table(&self) -> &RuleTable {
        &self.table
    }

    /// The RSS configuration.
    pub fn rss(&self) -> &Rss {
        &self.rss
    }

    /// Installs `rule`; fails as [`RuleTable::add`] does, and with [`ErrorKind::Action`] when
    /// it steers to a queue the NIC does not have.
    pub fn install(&mut self, rule: Rule) -> Result<(), OffloadError> {
        if let Action::Queue(q) = rule.action
            && usize::from(q) >= self.queues.len()
        {
            return Err(OffloadError::new(
                ErrorKind::Action,
                Some(rule.id),
                format!(
                    "queue {q} does not exist (the NIC has {} queues)",
                    self.queues.len()
                ),
            ));
        }
        self.table.add(rule)
    }

    /// Removes rule `id`, returning it with its counters.
    pub fn remove(&mut self, id: RuleId) -> Result<(Rule, Counters), OffloadError> {
        self.table.remove(id)
    }

    /// The counters of rule `id`.
    pub fn rule_counters(&self, id: RuleId) -> Option<Counters> {
        self.table.counters(id)
    }

    /// The per-queue counters, indexed by queue.
    pub fn queue_stats(&self) -> &[QueueStats] {
        &self.queues
    }

    /// The NIC-wide counters.
    pub fn stats(&self) -> &NicStats {
        &self.stats
    }

    /// Sets every NIC, queue and rule counter to zero.
    pub fn reset_stats(&mut self) {
        self.stats = NicStats::default();
        self.queues.fill(QueueStats::default());
        self.table.reset_counters();
    }

    /// Receives one Ethernet frame whose length on the wire was `wire_len`.
    pub fn receive(&mut self, frame: &[u8], wire_len: u32) -> Delivery {
        self.receive_key(FlowKey::from_frame(frame), wire_len)
    }

    /// Receives one captured packet of any link type the flow-key parser walks (Ethernet, raw
    /// IP, Linux cooked, loopback: [`FlowKey::of`]); a packet of another link type is treated
    /// as not IP.
    pub fn receive_packet(&mut self, packet: PacketRef<'_>) -> Delivery {
        let key = FlowKey::of(packet.link_type, packet.data);
        self.receive_key(key, packet.wire_len)
    }

    /// Receives a packet whose key is `key` (`None`: not IP).
    pub fn receive_key(&mut self, key: Option<FlowKey>, wire_len: u32) -> Delivery {
        self.stats.received = self.stats.received.saturating_add(1);
        self.stats.received_bytes = self
            .stats
            .received_bytes
            .saturating_add(u64::from(wire_len));
        let Some(key) = key else {
            self.stats.not_ip = self.stats.not_ip.saturating_add(1);
            let queue = self.rss.queue_of_hash(0);
            return self.deliver_on(queue, None, None, wire_len);
        };
        match self.table.classify(&key, wire_len) {
            Some((rule, Action::Drop)) => {
                self.stats.matched = self.stats.matched.saturating_add(1);
                self.stats.dropped = self.stats.dropped.saturating_add(1);
                self.stats.dropped_bytes =
                    self.stats.dropped_bytes.saturating_add(u64::from(wire_len));
                Delivery::Dropped { rule }
            }
            Some((rule, Action::Queue(q))) => {
                self.stats.matched = self.stats.matched.saturating_add(1);
                if usize::from(q) < self.queues.len() {
                    self.deliver_on(q, Some(rule), Some(rule), wire_len)
                } else {
                    self.stats.bad_queue = self.stats.bad_queue.saturating_add(1);
                    let queue = self.rss.queue(&key);
                    self.deliver_on(queue, None, Some(rule), wire_len)
                }
            }
            Some((rule, Action::Pass)) => {
                self.stats.matched = self.stats.matched.saturating_add(1);
                let queue = self.rss.queue(&key);
                self.deliver_on(queue, None, Some(rule), wire_len)
            }
            None => {
                let queue = self.rss.queue(&key);
                self.deliver_on(queue, None, None, wire_len)
            }
        }
    }

    fn deliver_on(
        &mut self,
        queue: u16,
        steered_by: Option<RuleId>,
        matched: Option<RuleId>,
        wire_len: u32,
    ) -> Delivery {
        // An RSS table entry beyond the NIC's queues (a custom `Rss`) wraps round.
        let len = self.queues.len().max(1);
        let index = usize::from(queue) % len;
        let queue = u16::try_from(index).unwrap_or(0);
        if let Some(stats) = self.queues.get_mut(index) {
            stats.packets = stats.packets.saturating_add(1);
            stats.bytes = stats.bytes.saturating_add(u64::from(wire_len));
            if steered_by.is_some() {
                stats.steered = stats.steered.saturating_add(1);
            }
        }
        Delivery::Queued {
            queue,
            steered_by,
            matched,
        }
    }

    /// Wraps a packet source: the iterator yields `(queue, packet)` for every packet that is
    /// not dropped.
    pub fn deliver<I>(&mut self, source: I) -> Deliver<'_, I>
    where
        I: Iterator<Item = Packet>,
    {
        Deliver { nic: self, source }
    }

    /// Wraps a fallible packet source (a [`CaptureReader`](netsift_capture::CaptureReader)):
    /// errors are passed through, dropped packets are skipped.
    pub fn try_deliver<I, E>(&mut self, source: I) -> TryDeliver<'_, I>
    where
        I: Iterator<Item = Result<Packet, E>>,
    {
        TryDeliver { nic: self, source }
    }
}

impl RuleSink for EmulatedNic {
    fn add_rule(&mut self, rule: Rule) -> Result<(), OffloadError> {
        self.install(rule)
    }

    fn remove_rule(&mut self, id: RuleId) -> Result<(), OffloadError> {
        self.remove(id).map(|_| ())
    }
}

/// The packets of a source that an [`EmulatedNic`] delivered, with their queues.
#[derive(Debug)]
pub struct Deliver<'n, I> {
    nic: &'n mut EmulatedNic,
    source: I,
}

impl<I: Iterator<Item = Packet>> Iterator for Deliver<'_, I> {
    type Item = (u16, Packet);

    fn next(&mut self) -> Option<(u16, Packet)> {
        loop {
            let packet = self.source.next()?;
            if let Some(queue) = self.nic.receive_packet(packet.as_ref()).queue() {
                return Some((queue, packet));
            }
        }
    }
}

/// The packets of a fallible source that an [`EmulatedNic`] delivered, with their queues.
#[derive(Debug)]
pub struct TryDeliver<'n, I> {
    nic: &'n mut EmulatedNic,
    source: I,
}

impl<I, E> Iterator for TryDeliver<'_, I>
where
    I: Iterator<Item = Result<Packet, E>>,
{
    type Item = Result<(u16, Packet), E>;

    fn next(&mut self) -> Option<Result<(u16, Packet), E>> {
        loop {
            let packet = match self.source.next()? {
                Ok(p) => p,
                Err(e) => return Some(Err(e)),
            };
            if let Some(queue) = self.nic.receive_packet(packet.as_ref()).queue() {
                return Some(Ok((queue, packet)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::tests::tcp4;
    use crate::rule::{Family, Match, PROTO_TCP, PROTO_UDP};
    use netsift_capture::generate::FrameBuilder;
    use netsift_capture::{LinkType, Timestamp};

    fn packet(frame: Vec<u8>) -> Packet {
        Packet::new(frame, Timestamp::ZERO, LinkType::ETHERNET)
    }

    #[test]
    fn drop_steer_and_rss() {
        let mut nic = EmulatedNic::with_profile(4, Profile::Intel82599FiveTuple);
        let sip = Match::new(Family::V4)
            .with_proto(PROTO_UDP)
            .with_dst_port(5060);
        nic.install(Rule::new(RuleId(1), sip, Action::Queue(0)))
            .unwrap();
        let tcp = Match::new(Family::V4).with_proto(PROTO_TCP);
        nic.install(Rule::new(RuleId(2), tcp, Action::Drop))
            .unwrap();
        let e = nic
            .install(Rule::new(RuleId(3), sip, Action::Queue(4)))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "rule 3: queue 4 does not exist (the NIC has 4 queues)"
        );

        let sip_frame = FrameBuilder::new()
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .udp(5060, 5060)
            .build();
        let web = tcp4([10, 0, 0, 1], 1234, [10, 0, 0, 2], 80);
        let rtp = FrameBuilder::new()
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .udp(16384, 16386)
            .build();
        let arp = FrameBuilder::new()
            .arp_request([10, 0, 0, 1], [10, 0, 0, 2])
            .build();
        let d = nic.receive(&sip_frame, 100);
        assert_eq!(
            d,
            Delivery::Queued {
                queue: 0,
                steered_by: Some(RuleId(1)),
                matched: Some(RuleId(1))
            }
        );
        assert_eq!(nic.receive(&web, 60), Delivery::Dropped { rule: RuleId(2) });
        let key = FlowKey::from_frame(&rtp).unwrap();
        let expected = nic.rss().queue(&key);
        assert_eq!(nic.receive(&rtp, 200).queue(), Some(expected));
        assert_eq!(nic.receive(&arp, 42).queue(), Some(0));

        let s = *nic.stats();
        assert_eq!(
            (s.received, s.dropped, s.dropped_bytes, s.not_ip),
            (4, 1, 60, 1)
        );
        assert_eq!(s.matched, 2);
        assert_eq!(nic.rule_counters(RuleId(2)).unwrap().packets, 1);
        let total: u64 = nic.queue_stats().iter().map(|q| q.packets).sum();
        assert_eq!(total, 3);
        assert_eq!(nic.queue_stats()[0].steered, 1);
        nic.reset_stats();
        assert_eq!(nic.stats().received, 0);
        assert_eq!(nic.rule_counters(RuleId(2)).unwrap().packets, 0);
    }

    #[test]
    fn wraps_a_source() {
        let mut table = RuleTable::new();
        let drop80 = Match::new(Family::V4).with_dst_port(80);
        table
            .add(Rule::new(RuleId(1), drop80, Action::Drop))
            .unwrap();
        let to3 = Match::new(Family::V4).with_dst_port(22);
        table
            .add(Rule::new(RuleId(2), to3, Action::Queue(3)))
            .unwrap();
        let bad = Match::new(Family::V4).with_dst_port(23);
        table
            .add(Rule::new(RuleId(3), bad, Action::Queue(9)))
            .unwrap();
        let mut nic = EmulatedNic::new(4, table);
        let source = vec![
            packet(tcp4([1, 1, 1, 1], 5, [2, 2, 2, 2], 80)),
            packet(tcp4([1, 1, 1, 1], 5, [2, 2, 2, 2], 22)),
            packet(tcp4([1, 1, 1, 1], 5, [2, 2, 2, 2], 23)),
            Packet::new(
                tcp4([1, 1, 1, 1], 5, [2, 2, 2, 2], 80)[14..].to_vec(),
                Timestamp::ZERO,
                LinkType::RAW,
            ),
        ];
        let out: Vec<(u16, Packet)> = nic.deliver(source.into_iter()).collect();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].0, 3);
        assert_eq!(nic.stats().bad_queue, 1);
        assert_eq!(nic.stats().dropped, 2);

        let results = vec![
            Ok(packet(tcp4([1, 1, 1, 1], 5, [2, 2, 2, 2], 22))),
            Err("broken"),
            Ok(packet(tcp4([1, 1, 1, 1], 5, [2, 2, 2, 2], 80))),
        ];
        let out: Vec<_> = nic.try_deliver(results.into_iter()).collect();
        assert_eq!(out.len(), 2);
        assert!(matches!(out[0], Ok((3, _))));
        assert_eq!(out[1].as_ref().err(), Some(&"broken"));
    }

    #[test]
    fn pass_uses_rss() {
        let mut table = RuleTable::new();
        let all = Match::new(Family::V4);
        table.add(Rule::new(RuleId(1), all, Action::Drop)).unwrap();
        let ssh = Match::new(Family::V4).with_dst_port(22);
        table
            .add(Rule::new(RuleId(2), ssh, Action::Pass).with_priority(1))
            .unwrap();
        let mut nic = EmulatedNic::new(2, table);
        let f = tcp4([1, 1, 1, 1], 5, [2, 2, 2, 2], 22);
        let d = nic.receive(&f, 60);
        assert!(!d.is_dropped());
        assert_eq!(d.rule(), Some(RuleId(2)));
        assert!(
            nic.receive(&tcp4([1, 1, 1, 1], 5, [2, 2, 2, 2], 21), 60)
                .is_dropped()
        );
    }
}
