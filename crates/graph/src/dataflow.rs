//! The instantiated filter graph: filter instances shared between flows by prefix merging,
//! and the per-packet pass through them.
//!
//! Every filter of every flow becomes a [`Node`] keyed by what determines its behaviour: its
//! class, its arguments, its MBuf size and the nodes upstream of it. A flow whose filter has
//! the same key as an existing node uses that node (the paper's Fig. 3: two flows starting
//! `(device,eth0) -> (sampler,2,4)` share one sampler); a filter with different arguments, or
//! the same filter behind different upstream nodes, is a new node. Nodes are counted by the
//! flows that use them and destroyed (after [`Filter::finish`]) when the last one leaves —
//! adding or removing a flow never touches the nodes other flows use.
//!
//! Nodes are numbered in creation order and a node's upstream nodes always exist before it, so
//! id order is a topological order: a packet from source `s` is pushed through the graph by one
//! scan over the nodes, each filter running when one of its upstream nodes passed the packet
//! (a stage's filters are joined: a packet two of them pass reaches the next stage once).

use crate::access::Access;
use std::collections::HashMap;
use std::sync::Arc;

use netsift_capture::{LinkType, Packet};
use netsift_filter::{DEFAULT_SNAPLEN, Target};

use crate::class::{Arg, Context, Filter, FilterClass, Instance, Pkt, Polled, Source, Verdict};
use crate::error::{Error, ErrorKind};
use crate::mbuf::MBuf;

/// The index of a node.
pub type NodeId = usize;

/// What a node is.
pub enum Body {
    /// A source; `None` once its input ended (or while a runtime thread owns it).
    Source(Option<Box<dyn Source>>),
    /// A filter.
    Filter(Box<dyn Filter>),
}

/// A filter instance (or a source) in the graph.
pub struct Node {
    /// Its class.
    pub class: Arc<dyn FilterClass>,
    /// The arguments it was made with.
    pub args: Vec<Arg>,
    /// Its persistent memory.
    pub mbuf: MBuf,
    /// The nodes whose packets it sees (sorted; empty for sources).
    pub upstream: Vec<NodeId>,
    /// What the packets it sees (or makes) are: link type, snap length, origin.
    pub target: Target,
    /// The instance.
    pub body: Body,
    /// How many flows use it.
    pub users: usize,
    /// Packets it saw.
    pub seen: u64,
    /// Packets it passed (for sources: made).
    pub passed: u64,
    /// Who may share it ([`Spec::scope`]): a daemon's flow group.
    pub scope: Option<String>,
    /// The time its filter took, in nanoseconds: measured on one packet in
    /// [`CPU_SAMPLE`] and multiplied, so the estimate costs two clock reads per node per
    /// [`CPU_SAMPLE`] packets — and on every packet once one sample took more than
    /// [`SLOW_FILTER`] (then the reads cost nothing beside the filter).
    pub cpu_ns: u64,
    /// A sample took more than [`SLOW_FILTER`]: timed on every packet.
    pub slow: bool,
    /// While set, the node runs on no packet (it passes none): its group used more than its
    /// share of the capture loop ([`Dataflow::suspend`]).
    pub suspended: bool,
}

/// One packet in this many has its filters timed ([`Node::cpu_ns`]).
pub const CPU_SAMPLE: u32 = 64;

/// A filter that took longer than this on a sampled packet is timed on every packet.
pub const SLOW_FILTER: std::time::Duration = std::time::Duration::from_micros(20);

/// What makes two filters the same instance.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    class: &'static str,
    args: Vec<Arg>,
    mbuf: usize,
    upstream: Vec<NodeId>,
    scope: Option<String>,
    /// For a filter that opens paths: whose rights opened them ([`Access::key`]).
    access: Option<String>,
}

/// A filter to place: its class, arguments and MBuf size.
#[derive(Clone)]
pub struct Spec {
    /// The class.
    pub class: Arc<dyn FilterClass>,
    /// The arguments (without the MBuf size).
    pub args: Vec<Arg>,
    /// MBuf bytes.
    pub mbuf: usize,
    /// Who may share the instance: filters are merged only with filters of the same scope
    /// (`None`: any flow's). `netsiftd` scopes filters by flow group, so that one group never
    /// sees — or writes — another group's filter memory.
    pub scope: Option<String>,
    /// Whose rights open the paths its arguments name.
    pub access: Access,
    /// What it may cost per packet.
    pub bounds: crate::class::Bounds,
}

/// The instantiated graph.
#[derive(Default)]
pub struct Dataflow {
    nodes: Vec<Option<Node>>,
    index: HashMap<Key, NodeId>,
    /// Scratch per node for one packet: `(result, bytes)` of a node that passed it.
    passed: Vec<Option<(u32, usize)>>,
    /// Bumped whenever a node may have been added, removed or changed, or a source ended
    /// ([`Dataflow::generation`]).
    generation: u64,
    /// New nodes get their MBuf in a memory file ([`MBuf::new_shared`]).
    shared_mbufs: bool,
    /// Packets processed, for timing one in [`CPU_SAMPLE`].
    tick: u32,
}

/// The result of one packet at a node that passed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Passed {
    /// The filter's result.
    pub result: u32,
    /// The bytes kept (after `snap`s and BPF snap lengths upstream).
    pub len: usize,
}

impl Dataflow {
    /// An empty graph.
    pub fn new() -> Dataflow {
        Dataflow::default()
    }

    /// Give new nodes their MBufs in memory files, to share with other processes.
    pub fn set_shared_mbufs(&mut self, shared: bool) {
        self.shared_mbufs = shared;
    }

    /// The node `id`, if it exists.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id).and_then(Option::as_ref)
    }

    /// The node `id`, mutably.
    pub fn node_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        self.generation += 1;
        self.nodes.get_mut(id).and_then(Option::as_mut)
    }

    /// A counter that changes whenever the set of nodes or of live sources may have changed
    /// (so that a list of [`Dataflow::live_sources`] can be cached).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Every live node with its id, in id (topological) order.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
    }

    /// The number of live nodes.
    pub fn len(&self) -> usize {
        self.nodes.iter().flatten().count()
    }

    /// Whether there is no node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Place the stages of a flow (the first of sources), reusing nodes with the same key, and
    /// count the flow as a user of every node it uses. Returns the node of every filter, per
    /// stage and in order (two identical filters of one stage are one node, listed twice). On
    /// an error — with the index of the filter to blame, counting over the stages — nothing is
    /// left behind.
    pub fn add_flow(&mut self, stages: &[Vec<Spec>]) -> Result<Vec<Vec<NodeId>>, (usize, Error)> {
        self.generation += 1;
        let mut placed: Vec<Vec<NodeId>> = Vec::new();
        let mut created: Vec<NodeId> = Vec::new();
        let result = (|| {
            for (si, stage) in stages.iter().enumerate() {
                let upstream: Vec<NodeId> = placed.last().cloned().unwrap_or_default();
                let mut ids = Vec::new();
                for (fi, spec) in stage.iter().enumerate() {
                    let mut up = upstream.clone();
                    up.sort_unstable();
                    up.dedup();
                    let key = Key {
                        class: spec.class.name(),
                        args: spec.args.clone(),
                        mbuf: spec.mbuf,
                        upstream: up.clone(),
                        scope: spec.scope.clone(),
                        access: spec
                            .class
                            .opens_paths(&spec.args)
                            .then(|| spec.access.key()),
                    };
                    let at = stages[..si].iter().map(Vec::len).sum::<usize>() + fi;
                    let id = match self.index.get(&key) {
                        Some(&id) => id,
                        None => {
                            let node = self.make(spec, up).map_err(|e| (at, e))?;
                            let id = self.nodes.len();
                            self.nodes.push(Some(node));
                            self.index.insert(key, id);
                            created.push(id);
                            id
                        }
                    };
                    ids.push(id);
                }
                placed.push(ids);
            }
            Ok(())
        })();
        if let Err(e) = result {
            for id in created.into_iter().rev() {
                self.destroy(id);
            }
            return Err(e);
        }
        let mut users: Vec<NodeId> = placed.iter().flatten().copied().collect();
        users.sort_unstable();
        users.dedup();
        for id in users {
            if let Some(n) = self.node_mut(id) {
                n.users += 1;
            }
        }
        Ok(placed)
    }

    fn make(&mut self, spec: &Spec, upstream: Vec<NodeId>) -> Result<Node, Error> {
        // The target is the upstream nodes' (whose link types must agree; the first one's
        // snap length and origin).
        let mut target: Option<Target> = None;
        for &u in &upstream {
            let t = self.node(u).map(|n| n.target);
            match (target, t) {
                (None, t) => target = t,
                (Some(a), Some(b)) if a.link_type != b.link_type => {
                    return Err(Error::new(
                        ErrorKind::LinkType,
                        format!(
                            "its upstream filters see different link types ({} and {})",
                            a.link_type, b.link_type
                        ),
                    ));
                }
                _ => {}
            }
        }
        let ctx = Context {
            target,
            mbuf_bytes: spec.mbuf.div_ceil(8) * 8,
            access: spec.access.clone(),
            bounds: spec.bounds,
        };
        let mbuf = if self.shared_mbufs && spec.mbuf > 0 {
            MBuf::new_shared(spec.mbuf)
                .map_err(|e| Error::io(format!("cannot create its MBuf: {e}"), e))?
        } else {
            MBuf::new(spec.mbuf)
        };
        let instance = spec.class.instantiate(&spec.args, &ctx)?;
        let (body, target) = match instance {
            Instance::Source(s) => {
                let t = s.target();
                (Body::Source(Some(s)), t)
            }
            Instance::Filter(f) => (
                Body::Filter(f),
                target.unwrap_or(Target::live(LinkType::ETHERNET, DEFAULT_SNAPLEN)),
            ),
        };
        Ok(Node {
            class: Arc::clone(&spec.class),
            args: spec.args.clone(),
            mbuf,
            upstream,
            target,
            body,
            users: 0,
            seen: 0,
            passed: 0,
            scope: spec.scope.clone(),
            cpu_ns: 0,
            slow: false,
            suspended: false,
        })
    }

    /// A flow stopped using `ids`: nodes nobody uses any more are finished and destroyed
    /// (returns the errors of their `finish`, each prefixed with the class's name).
    pub fn release(&mut self, ids: &[NodeId]) -> Vec<Error> {
        let mut ids: Vec<NodeId> = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let mut errors = Vec::new();
        // Downstream first: a node is destroyed after the nodes that read from it.
        for &id in ids.iter().rev() {
            let Some(n) = self.node_mut(id) else { continue };
            n.users = n.users.saturating_sub(1);
            if n.users == 0 {
                if let Body::Filter(f) = &mut n.body
                    && let Err(e) = f.finish(&n.mbuf)
                {
                    let class = n.class.name();
                    errors.push(e.map_message(|m| format!("{class}: {m}")));
                }
                self.destroy(id);
            }
        }
        errors
    }

    fn destroy(&mut self, id: NodeId) {
        self.generation += 1;
        if let Some(slot) = self.nodes.get_mut(id) {
            *slot = None;
            self.index.retain(|_, v| *v != id);
        }
    }

    /// Finish every filter (end of input); returns the errors, each prefixed with the class's
    /// name.
    pub fn finish_all(&mut self) -> Vec<Error> {
        let mut errors = Vec::new();
        for n in self.nodes.iter_mut().flatten() {
            if let Body::Filter(f) = &mut n.body
                && let Err(e) = f.finish(&n.mbuf)
            {
                let class = n.class.name();
                errors.push(e.map_message(|m| format!("{class}: {m}")));
            }
        }
        errors
    }

    /// Take the next packet of source `id` (`Ok(None)` when it has none now, at its end, or
    /// when `id` is not a source with input left).
    pub fn next_from(&mut self, id: NodeId) -> Result<Option<Packet>, Error> {
        // Not `node_mut`: taking a packet does not change the graph.
        let Some(n) = self.nodes.get_mut(id).and_then(Option::as_mut) else {
            return Ok(None);
        };
        let Body::Source(Some(src)) = &mut n.body else {
            return Ok(None);
        };
        match src.poll_packet()? {
            Polled::Packet(p) => {
                n.passed += 1;
                Ok(Some(p))
            }
            Polled::Idle => Ok(None),
            Polled::End => {
                n.body = Body::Source(None);
                self.generation += 1;
                Ok(None)
            }
        }
    }

    /// Take source `id`'s instance out, to let it hand packets straight to the capture loop
    /// ([`Source::poll_borrowed`]); [`Dataflow::restore_source`] puts it back. `None` if `id`
    /// is not a source with input left.
    pub fn take_source(&mut self, id: NodeId) -> Option<Box<dyn Source>> {
        match &mut self.nodes.get_mut(id)?.as_mut()?.body {
            Body::Source(s) => s.take(),
            Body::Filter(_) => None,
        }
    }

    /// Put back a source taken with [`Dataflow::take_source`], which made `made` packets.
    pub fn restore_source(&mut self, id: NodeId, src: Box<dyn Source>, made: u64) {
        if let Some(Some(n)) = self.nodes.get_mut(id) {
            n.body = Body::Source(Some(src));
            n.passed += made;
        }
    }

    /// Hand `packet`, taken from source `id` with [`Dataflow::next_from`], back to it (it may
    /// reuse the buffer).
    pub fn recycle(&mut self, id: NodeId, packet: Packet) {
        if let Some(Some(n)) = self.nodes.get_mut(id)
            && let Body::Source(Some(src)) = &mut n.body
        {
            src.recycle(packet);
        }
    }

    /// The sources with input left.
    pub fn live_sources(&self) -> Vec<NodeId> {
        self.nodes()
            .filter(|(_, n)| matches!(n.body, Body::Source(Some(_))))
            .map(|(i, _)| i)
            .collect()
    }

    /// Push one packet from source `src` through the graph. Afterwards [`Dataflow::passed`]
    /// says, for any node, whether and how it passed the packet.
    // PERF: inlined into the capture loop, so that the packet's fields stay in registers (an
    // 8-byte load of `wire_len` and `link_type` right after two 4-byte stores of them made the
    // CPU wait for the stores to retire: the hottest instruction of the pass).
    #[inline]
    pub fn process(&mut self, src: NodeId, pkt: &Pkt<'_>) {
        // PERF: every entry after `src` is written in the loop below, so only the entries up
        // to `src` are cleared here (the scratch is not re-filled per packet).
        let nodes = self.nodes.len();
        self.passed.resize(nodes, None);
        if src >= nodes {
            self.passed.fill(None);
            return;
        }
        self.passed[..src].fill(None);
        self.passed[src] = Some((0, pkt.data.len()));
        self.tick = self.tick.wrapping_add(1);
        let timed = self.tick % CPU_SAMPLE == 0;
        for i in src + 1..nodes {
            self.passed[i] = None;
            let Some(n) = self.nodes[i].as_mut() else {
                continue;
            };
            let Body::Filter(f) = &mut n.body else {
                continue;
            };
            if n.suspended {
                continue;
            }
            let mut len = None;
            for &u in &n.upstream {
                if let Some((_, l)) = self.passed[u] {
                    len = Some(len.map_or(l, |m: usize| m.max(l)));
                }
            }
            let Some(len) = len else { continue };
            n.seen += 1;
            let view = Pkt {
                data: &pkt.data[..len.min(pkt.data.len())],
                ..*pkt
            };
            let started = (timed || n.slow).then(std::time::Instant::now);
            let verdict = f.process(&view, &n.mbuf);
            if let Some(t) = started {
                let took = t.elapsed();
                let weight = if n.slow { 1 } else { u64::from(CPU_SAMPLE) };
                n.cpu_ns = n.cpu_ns.saturating_add(took.as_nanos() as u64 * weight);
                n.slow |= took > SLOW_FILTER;
            }
            if let Verdict::Pass { result, keep } = verdict {
                n.passed += 1;
                let out = keep.map_or(len, |k| len.min(k as usize));
                self.passed[i] = Some((result, out));
            }
        }
    }

    /// The estimated filter time of every node of each scope so far, in nanoseconds
    /// ([`Node::cpu_ns`]).
    pub fn cpu_by_scope(&self) -> HashMap<String, u64> {
        let mut out: HashMap<String, u64> = HashMap::new();
        for n in self.nodes.iter().flatten() {
            if let Some(s) = &n.scope {
                *out.entry(s.clone()).or_default() += n.cpu_ns;
            }
        }
        out
    }

    /// Whether some filter was found slow ([`SLOW_FILTER`]): callers that bound their time
    /// should then look at the clock after every packet.
    pub fn has_slow_filters(&self) -> bool {
        self.nodes.iter().flatten().any(|n| n.slow)
    }

    /// Suspend (or resume) every node of `scope`: a suspended node runs on no packet. Returns
    /// whether anything changed.
    pub fn suspend(&mut self, scope: &str, on: bool) -> bool {
        let mut changed = false;
        for n in self.nodes.iter_mut().flatten() {
            if n.scope.as_deref() == Some(scope) && n.suspended != on {
                n.suspended = on;
                changed = true;
            }
        }
        if changed {
            self.generation += 1;
        }
        changed
    }

    /// Whether node `id` passed the last packet, with its result and kept length.
    pub fn passed(&self, id: NodeId) -> Option<Passed> {
        self.passed
            .get(id)
            .copied()
            .flatten()
            .map(|(result, len)| Passed { result, len })
    }
}
