//! Flows, their life cycle, flow groups, and the capture loop (FFPF §2.1, §2.4, §3).
//!
//! A flow goes through the paper's life cycle:
//!
//! 1. **create** ([`Runtime::create`]): the graph text is parsed and checked against the
//!    classes (errors point at the offending token);
//! 2. **instantiate** ([`Runtime::instantiate`]): the authorisation policy is checked over the
//!    whole graph (the decision is logged), then the filters are placed in the shared graph —
//!    identical prefixes of different flows are one set of instances ([`crate::dataflow`]);
//! 3. **activate** ([`Runtime::activate`]): the flow gets its reader (its IBuf) in its flow
//!    group and starts receiving; **pause** / **resume** stop and restart delivery;
//! 4. **close** ([`Runtime::close`]): the flow's instances nobody else uses are finished and
//!    destroyed and its buffers freed. A flow whose reader was dropped (its owner went away) is
//!    closed by the runtime the same way.
//!
//! Flows with the same group name share one PBuf: a packet accepted by any flow of the group is
//! copied into it once, and each accepting flow gets an IBuf entry (slot, result). Each group
//! has its own buffer-management policy (slow- or fast-reader preference).
//!
//! The capture loop ([`Runtime::step`], [`Runtime::run`]) takes packets from the sources in
//! turn, pushes each through the graph once for all flows, and writes it to the groups of the
//! flows whose last stage passed it.

use crate::access::Access;
use crate::policy::Principal;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

use netsift_capture::{LinkType, Packet};

use crate::buffer::{Group, Preference, Reader, ReaderId, Writer};
use crate::class::{Pkt, Registry};
use crate::dataflow::{Dataflow, NodeId, Spec};
use crate::dot::{self, FlowLabel};
use crate::error::{Error, ErrorKind};
use crate::lang::{self, FilterSpec, FlowSpec, ResolvedFilter, Span, Stage};
use crate::mbuf::MBuf;
use crate::policy::Policy;

/// One delivery of the current packet: the reader, its result, the bytes it sees.
type Delivery = (ReaderId, u32, u32);

/// A flow's number, unique in a runtime.
pub type FlowId = u64;

/// Where a flow is in its life cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowState {
    /// Parsed and checked.
    Created,
    /// Authorised and placed in the graph.
    Instantiated,
    /// Receiving packets.
    Active,
    /// Placed, with delivery stopped.
    Paused,
}

/// How a flow is created.
#[derive(Clone, Debug)]
pub struct FlowOptions {
    /// Who asks (checked by the policy).
    pub user: String,
    /// The names of the asking user's groups (for the policy's `group` rules).
    pub groups: Vec<String>,
    /// The flow group: flows with the same group share a PBuf (default: one group per user).
    pub group: Option<String>,
    /// The group's buffer policy (taken from the group's first flow).
    pub preference: Preference,
    /// PBuf slots of the group (taken from the group's first flow).
    pub slots: u32,
    /// Bytes per PBuf slot (taken from the group's first flow).
    pub slot_size: u32,
    /// The longest packet the group stores (taken from the group's first flow): 0 cuts
    /// packets to one slot; more lets a long packet span consecutive slots
    /// ([`Group::create`]).
    pub max_packet: u32,
    /// IBuf entries of the flow.
    pub ibuf: usize,
    /// Share the IBuf with another flow of the group opened with `share_ibuf` that receives
    /// exactly the same packets (the same last filter instances) and has as many IBuf
    /// entries: the capture loop then appends one entry per packet for all of them, each
    /// flow keeping its own read cursor. Such a flow cannot be paused while it shares its
    /// IBuf (the others would stop too); under slow-reader preference the IBuf is full when
    /// its slowest reader has not caught up. For applications that read every packet of a
    /// flow and never pause it, e.g. many copies of one capture tool on a link.
    pub share_ibuf: bool,
    /// The flow's callback period in packets, if it asks for callbacks (checked by the policy).
    pub callback_every: Option<u64>,
    /// The source a flow without one starts from (a filter of a source class, e.g. `(file,
    /// "x.pcap")`).
    pub default_source: Option<FilterSpec>,
    /// Whose rights open the paths the flow names ([`Access`]; a daemon's users').
    pub access: Access,
    /// The most bytes of buffers and MBufs the flow may need ([`Runtime::memory_needed`]);
    /// `None`: no limit.
    pub memory_budget: Option<u64>,
    /// What each of its filters may cost per packet.
    pub bounds: crate::class::Bounds,
    /// The most filters with an MBuf it may have (a daemon passes one descriptor per MBuf in
    /// one message); `None`: no limit. Checked before anything is made.
    pub max_mbufs: Option<usize>,
}

impl Default for FlowOptions {
    fn default() -> FlowOptions {
        FlowOptions {
            user: "nobody".into(),
            groups: Vec::new(),
            group: None,
            preference: Preference::SlowReader,
            slots: 4096,
            slot_size: 2048,
            max_packet: 0,
            ibuf: 4096,
            share_ibuf: false,
            callback_every: None,
            default_source: None,
            access: Access::Own,
            memory_budget: None,
            bounds: crate::class::Bounds::default(),
            max_mbufs: None,
        }
    }
}

/// The former name of [`Error`], the runtime's error (an [`ErrorKind`] and the message; for a
/// flow, its text with a caret where a position is known).
#[deprecated(note = "use netsift_graph::Error")]
pub type FlowError = Error;

struct Flow {
    text: String,
    spec: FlowSpec,
    resolved: Vec<ResolvedFilter>,
    opts: FlowOptions,
    state: FlowState,
    /// Node of every filter, in the order of the text (after `instantiate`).
    nodes: Vec<NodeId>,
    /// Nodes of the last stage.
    ends: Vec<NodeId>,
    group: String,
    reader: Option<ReaderId>,
    /// The IBuf the flow reads (flows sharing one have the same number).
    ibuf: u64,
}

struct GroupEntry {
    group: Group,
    /// The index of the capture loop's end of the buffers in [`Runtime::writers`].
    slot: usize,
}

/// Where the packets of an active flow go (the delivery plan, [`Runtime::push`]).
struct Target {
    /// The nodes of the flow's last stage.
    ends: Vec<NodeId>,
    reader: ReaderId,
    /// The flow's group's index in [`Runtime::writers`].
    slot: usize,
    /// While some of the flow's filters are suspended ([`Runtime::throttle`]): its sources. A
    /// packet of one of them then counts as dropped for it.
    throttled: Vec<NodeId>,
}

/// Counters of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Packets taken from the sources.
    pub packets: u64,
    /// Packets the sources lost before the runtime saw them ([`crate::Source::lost`]).
    pub lost: u64,
    /// Packets some flow accepted.
    pub accepted: u64,
    /// Copies into PBufs (one per group per accepted packet).
    pub copies: u64,
}

/// The FFPF runtime: the registry of classes, the policy, the shared graph, the flows and
/// their groups.
pub struct Runtime {
    registry: Registry,
    policy: Policy,
    graph: Dataflow,
    flows: BTreeMap<FlowId, Flow>,
    groups: HashMap<String, GroupEntry>,
    next_id: FlowId,
    log: Vec<String>,
    cursor: usize,
    stats: RunStats,
    /// The capture loop's end of each group's buffers, indexed by [`GroupEntry::slot`]; `None`
    /// once the group is gone or the input ended (readers then see the end).
    writers: Vec<Option<Writer>>,
    /// The delivery plan: the active flows with a reader, in flow order. `None`: rebuild it
    /// before the next packet (a flow was activated, paused, resumed or closed).
    // PERF: the per-packet pass used to walk the flow map and key the per-group scratch by the
    // group's name (a String clone and two hash lookups per accepting flow).
    plan: Option<Vec<Target>>,
    /// Scratch, per writer slot: the readers that accepted the current packet, and the bytes
    /// kept.
    to: Vec<(Vec<Delivery>, usize)>,
    /// Scratch: the writer slots with readers in `to`, in the order they were first touched.
    touched: Vec<usize>,
    /// The live sources as of graph generation `.0` ([`Dataflow::generation`]).
    sources: Option<(u64, Vec<NodeId>)>,
    /// Buffers and MBufs in memory files, filters shared within a group only
    /// ([`Runtime::set_shared_memory`]).
    shared_memory: bool,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("flows", &self.flows.len())
            .field("nodes", &self.graph.len())
            .field("groups", &self.groups.len())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime with `registry`'s classes and `policy`.
    pub fn new(registry: Registry, policy: Policy) -> Runtime {
        Runtime {
            registry,
            policy,
            graph: Dataflow::new(),
            flows: BTreeMap::new(),
            groups: HashMap::new(),
            next_id: 1,
            log: Vec::new(),
            cursor: 0,
            stats: RunStats::default(),
            writers: Vec::new(),
            plan: None,
            to: Vec::new(),
            touched: Vec::new(),
            sources: None,
            shared_memory: false,
        }
    }

    /// Put the groups' buffers and the filters' MBufs of flows created from now on in memory
    /// files, so that other processes can map them (`netsiftd`: [`Reader::shared_regions`],
    /// [`MBuf::region`]), and share filter instances only between flows of the same group
    /// (sources without an MBuf are shared by all): a group never sees another group's
    /// packets or filter memory.
    pub fn set_shared_memory(&mut self, shared: bool) {
        self.shared_memory = shared;
        self.graph.set_shared_mbufs(shared);
    }

    /// Parse and check one flow (`text` holds exactly one). Errors show the text with a caret.
    pub fn create(&mut self, text: &str, opts: FlowOptions) -> Result<FlowId, Error> {
        let mut specs = lang::parse(text).map_err(|e| Error::from_graph_error(e, text))?;
        if specs.len() != 1 {
            return Err(Error::new(
                ErrorKind::Syntax,
                format!(
                    "one flow expected, found {} (separate flows with `;` in `create_all`)",
                    specs.len()
                ),
            ));
        }
        let mut spec = specs.remove(0);
        self.add_default_source(&mut spec, &opts);
        let resolved =
            lang::check(&spec, &self.registry).map_err(|e| Error::from_graph_error(e, text))?;
        let id = self.next_id;
        self.next_id += 1;
        let group = opts
            .group
            .clone()
            .unwrap_or_else(|| format!("user:{}", opts.user));
        self.flows.insert(
            id,
            Flow {
                text: text.to_string(),
                spec,
                resolved,
                opts,
                state: FlowState::Created,
                nodes: Vec::new(),
                ends: Vec::new(),
                group,
                reader: None,
                ibuf: id,
            },
        );
        Ok(id)
    }

    /// A flow whose first filter is not a source starts from `opts.default_source`.
    fn add_default_source(&self, spec: &mut FlowSpec, opts: &FlowOptions) {
        let Some(src) = &opts.default_source else {
            return;
        };
        let first_is_source = spec
            .stages
            .first()
            .and_then(|s| s.filters.first())
            .and_then(|f| self.registry.get(&f.class))
            .is_some_and(|c| c.is_source());
        if !first_is_source {
            let mut src = src.clone();
            src.span = Span::new(0, 0);
            src.class_span = Span::new(0, 0);
            spec.stages.insert(0, Stage { filters: vec![src] });
        }
    }

    /// Check the policy over the flow and place its filters in the graph.
    pub fn instantiate(&mut self, id: FlowId) -> Result<(), Error> {
        let flow = self.flows.get(&id).ok_or_else(|| no_flow(id))?;
        if flow.state != FlowState::Created {
            return Err(Error::new(
                ErrorKind::State,
                format!("flow {id} is already instantiated"),
            ));
        }
        let who = Principal {
            user: flow.opts.user.clone(),
            groups: flow.opts.groups.clone(),
            privileged: match &flow.opts.access {
                Access::Own => true,
                Access::User(c) => c.uid == 0,
            },
        };
        match self.policy.check_principal(
            &who,
            &flow.spec,
            &flow.resolved,
            flow.opts.callback_every,
        ) {
            Ok(decision) => self.log.push(format!("flow {id}: {decision}")),
            Err(denied) => {
                self.log.push(format!("flow {id}: {denied}"));
                return Err(Error::from_denied(denied, &flow.text));
            }
        }
        let mut stages: Vec<Vec<Spec>> = vec![Vec::new(); flow.spec.stages.len()];
        for r in &flow.resolved {
            let global = !self.shared_memory || (r.class.is_source() && r.mbuf_bytes == 0);
            stages[r.stage].push(Spec {
                class: r.class.clone(),
                args: r.args.clone(),
                mbuf: r.mbuf_bytes,
                scope: (!global).then(|| flow.group.clone()),
                access: flow.opts.access.clone(),
                bounds: flow.opts.bounds,
            });
        }
        let placed = self.graph.add_flow(&stages).map_err(|(at, e)| {
            let span = flow.resolved.get(at).map_or(Span::new(0, 0), |r| r.span);
            let name = flow.resolved.get(at).map_or("", |r| r.class.name());
            e.map_message(|m| {
                netsift_lang::span::render(&flow.text, span, &format!("`{name}`: {m}"))
            })
        })?;
        let flow = self.flows.get_mut(&id).expect("checked above");
        // Per filter in text order: its stage's nodes in order.
        flow.nodes = placed.iter().flatten().copied().collect();
        flow.ends = placed.last().cloned().unwrap_or_default();
        flow.state = FlowState::Instantiated;
        Ok(())
    }

    /// Start delivering to the flow; returns its reader (the application's end).
    pub fn activate(&mut self, id: FlowId) -> Result<Reader, Error> {
        // A flow to share the IBuf with: same group, same last filter instances, same size.
        let partner = self.flows.get(&id).and_then(|me| {
            if !me.opts.share_ibuf {
                return None;
            }
            self.flows
                .iter()
                .filter(|&(&other, _)| other != id)
                .map(|(_, f)| f)
                .find(|f| {
                    f.opts.share_ibuf
                        && f.state == FlowState::Active
                        && f.group == me.group
                        && f.ends == me.ends
                        && f.opts.ibuf.max(1) == me.opts.ibuf.max(1)
                })
                .and_then(|f| Some((f.reader?, f.ibuf)))
        });
        let flow = self.flows.get_mut(&id).ok_or_else(|| no_flow(id))?;
        if flow.state != FlowState::Instantiated {
            return Err(Error::new(
                ErrorKind::State,
                format!("flow {id} is {:?}, not instantiated", flow.state),
            ));
        }
        let entry = match self.groups.entry(flow.group.clone()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let (slots, slot_size, max_len) = pbuf_sizes(&flow.opts);
                let group = Group::create(
                    slots,
                    slot_size,
                    max_len,
                    flow.opts.preference,
                    self.shared_memory,
                )
                .map_err(|e| {
                    Error::io(format!("cannot create the group's packet buffer: {e}"), e)
                })?;
                let writer = group.writer().ok_or_else(|| {
                    Error::new(ErrorKind::State, "the group already has a writer")
                })?;
                let slot = self.writers.len();
                self.writers.push(Some(writer));
                v.insert(GroupEntry { group, slot })
            }
        };
        let err =
            |e: std::io::Error| Error::io(format!("cannot create the flow's index buffer: {e}"), e);
        let shared = match partner {
            Some((with, ibuf)) => entry
                .group
                .try_add_reader_sharing(with)
                .map_err(err)?
                .map(|r| (r, ibuf)),
            None => None,
        };
        let ((rid, reader), ibuf) = match shared {
            Some(x) => x,
            None => (
                entry
                    .group
                    .try_add_reader(flow.opts.ibuf.max(1))
                    .map_err(err)?,
                id,
            ),
        };
        flow.reader = Some(rid);
        flow.ibuf = ibuf;
        flow.state = FlowState::Active;
        self.plan = None;
        Ok(reader)
    }

    /// Create, instantiate and activate one flow.
    pub fn open(&mut self, text: &str, opts: FlowOptions) -> Result<(FlowId, Reader), Error> {
        let id = self.create(text, opts)?;
        let flow = &self.flows[&id];
        let mbufs = flow.resolved.iter().filter(|r| r.mbuf_bytes > 0).count();
        if let Some(max) = flow.opts.max_mbufs
            && mbufs > max
        {
            self.flows.remove(&id);
            return Err(Error::new(
                ErrorKind::Limit,
                format!("the flow has {mbufs} MBufs; at most {max} can be shared with it"),
            ));
        }
        let (need, budget) = (self.memory_needed(id), self.flows[&id].opts.memory_budget);
        if let Some(budget) = budget
            && need > budget
        {
            self.flows.remove(&id);
            return Err(Error::new(
                ErrorKind::Limit,
                format!(
                    "the flow needs {need} bytes of buffers and MBufs; {budget} are left to its \
                     user"
                ),
            ));
        }
        if let Err(e) = self.instantiate(id) {
            self.flows.remove(&id);
            return Err(e);
        }
        let reader = self.activate(id)?;
        Ok((id, reader))
    }

    /// The bytes of memory the created flow `id` will hold at the most: the group's PBuf if
    /// the group has none yet, its IBuf and control page, and its filters' MBufs (each in
    /// whole pages, as memory files hold them), whether or not they end up shared.
    pub fn memory_needed(&self, id: FlowId) -> u64 {
        let Some(flow) = self.flows.get(&id) else {
            return 0;
        };
        let page = netsift_ring::shm::page_size() as u64;
        let pbuf = if self.groups.contains_key(&flow.group) {
            0
        } else {
            let (slots, slot_size, max_len) = pbuf_sizes(&flow.opts);
            Group::shared_bytes(slots, slot_size, max_len).unwrap_or(u64::MAX)
        };
        let reader = Group::reader_bytes(flow.opts.ibuf).unwrap_or(u64::MAX);
        let mbufs: u64 = flow
            .resolved
            .iter()
            .filter(|r| r.mbuf_bytes > 0)
            .map(|r| (r.mbuf_bytes as u64).div_ceil(page) * page)
            .sum();
        pbuf.saturating_add(reader).saturating_add(mbufs)
    }

    /// Stop delivering to an active flow (its filters keep running for other flows). A flow
    /// that shares its IBuf with another open flow ([`FlowOptions::share_ibuf`]) cannot be
    /// paused.
    pub fn pause(&mut self, id: FlowId) -> Result<(), Error> {
        if let Some(other) = self.ibuf_shared_with(id) {
            return Err(Error::new(
                ErrorKind::State,
                format!(
                    "flow {id} shares its index buffer with flow {other} (share): it cannot be \
                     paused"
                ),
            ));
        }
        self.set_state(id, FlowState::Active, FlowState::Paused)
    }

    /// Deliver again to a paused flow.
    pub fn resume(&mut self, id: FlowId) -> Result<(), Error> {
        self.set_state(id, FlowState::Paused, FlowState::Active)
    }

    fn set_state(&mut self, id: FlowId, from: FlowState, to: FlowState) -> Result<(), Error> {
        let flow = self.flows.get_mut(&id).ok_or_else(|| no_flow(id))?;
        if flow.state != from {
            return Err(Error::new(
                ErrorKind::State,
                format!("flow {id} is {:?}", flow.state),
            ));
        }
        flow.state = to;
        self.plan = None;
        Ok(())
    }

    /// Close a flow: its filters that no other flow uses are finished and destroyed, and a
    /// group left without flows is freed. Returns the filters' `finish` errors (each prefixed
    /// with its class's name), or an [`ErrorKind::NoFlow`] error.
    pub fn close(&mut self, id: FlowId) -> Vec<Error> {
        let Some(flow) = self.flows.remove(&id) else {
            return vec![no_flow(id)];
        };
        self.plan = None;
        // Unregister the flow's reader: entries it has not read must not hold the group's
        // buffer (an application may still have the `Reader`).
        if let (Some(rid), Some(g)) = (flow.reader, self.groups.get(&flow.group)) {
            g.group.remove_reader(rid);
        }
        let errors = self.graph.release(&flow.nodes);
        if !self
            .flows
            .values()
            .any(|f| f.group == flow.group && f.reader.is_some())
            && let Some(g) = self.groups.remove(&flow.group)
            && let Some(w) = self.writers.get_mut(g.slot)
        {
            drop(w.take());
        }
        self.log.push(format!("flow {id}: closed"));
        errors
    }

    /// The flows and their states.
    pub fn flows(&self) -> Vec<(FlowId, FlowState)> {
        self.flows.iter().map(|(&id, f)| (id, f.state)).collect()
    }

    /// The MBuf of the flow's `index`-th filter (in the order of the text, sources included).
    pub fn mbuf(&self, id: FlowId, index: usize) -> Option<MBuf> {
        let node = *self.flows.get(&id)?.nodes.get(index)?;
        self.graph.node(node).map(|n| n.mbuf.clone())
    }

    /// The node of the flow's `index`-th filter (to compare instances between flows).
    pub fn node_of(&self, id: FlowId, index: usize) -> Option<NodeId> {
        self.flows.get(&id)?.nodes.get(index).copied()
    }

    /// Another open flow whose IBuf flow `id` shares ([`FlowOptions::share_ibuf`]), the oldest
    /// if several; `None` if it reads an IBuf of its own.
    pub fn ibuf_shared_with(&self, id: FlowId) -> Option<FlowId> {
        let f = self.flows.get(&id)?;
        f.reader?;
        self.flows
            .iter()
            .filter(|&(&o, g)| o != id && g.reader.is_some() && g.ibuf == f.ibuf)
            .map(|(&o, _)| o)
            .min()
    }

    /// The shared graph.
    pub fn graph(&self) -> &Dataflow {
        &self.graph
    }

    /// The authorisation decisions and life-cycle events so far.
    pub fn log(&self) -> &[String] {
        &self.log
    }

    /// Counters of the capture loop.
    pub fn stats(&self) -> RunStats {
        self.stats
    }

    /// The buffers' statistics of a group (`None`: no such group).
    pub fn group_stats(&self, group: &str) -> Option<crate::buffer::GroupStats> {
        self.groups.get(group).map(|g| g.group.stats())
    }

    /// The group a flow belongs to.
    pub fn group_of(&self, id: FlowId) -> Option<&str> {
        self.flows.get(&id).map(|f| f.group.as_str())
    }

    /// The instantiated graph as Graphviz.
    pub fn dot(&self) -> String {
        let labels: Vec<FlowLabel> = self
            .flows
            .iter()
            .filter(|(_, f)| !f.nodes.is_empty())
            .map(|(&id, f)| FlowLabel {
                id,
                text: f.text.clone(),
                nodes: f.nodes.clone(),
            })
            .collect();
        dot::render(&self.graph, &labels)
    }

    /// The live sources, taken out of their cache (put them back with the generation returned);
    /// `None` when every source has ended. PERF: cached per graph generation (they used to be
    /// collected into a new Vec per packet).
    fn live_sources(&mut self) -> Option<(u64, Vec<NodeId>)> {
        let generation = self.graph.generation();
        let sources = match self.sources.take() {
            Some((g, s)) if g == generation => s,
            _ => self.graph.live_sources(),
        };
        if sources.is_empty() {
            self.sources = Some((generation, sources));
            return None;
        }
        Some((generation, sources))
    }

    /// Process one packet from the next source with input (round robin); `Ok(false)` when
    /// every source has ended.
    pub fn step(&mut self) -> Result<bool, Error> {
        let Some((generation, sources)) = self.live_sources() else {
            return Ok(false);
        };
        let n = sources.len();
        for k in 0..n {
            let src = sources[(self.cursor + k) % n];
            match self.graph.next_from(src) {
                Ok(Some(p)) => {
                    self.cursor = (self.cursor + k + 1) % n;
                    self.sources = Some((generation, sources));
                    self.push(src, &p);
                    self.graph.recycle(src, p);
                    return Ok(true);
                }
                Ok(None) => continue,
                Err(e) => {
                    self.sources = Some((generation, sources));
                    return Err(e);
                }
            }
        }
        Ok(!self.graph.live_sources().is_empty())
    }

    /// Process up to about `max` packets from the next source with input (round robin): a
    /// source that can lend its packets ([`crate::Source::poll_borrowed`], the `device` class)
    /// hands them over straight from its ring, without a copy; others are taken one by one as
    /// [`Runtime::step`] does, stopping early when they idle — or when `budget` has passed
    /// (checked every [`BUDGET_CHECK`] packets), so that a costly filter cannot hold the caller
    /// for long. `Ok(false)` when every source has ended.
    pub fn step_batch(&mut self, max: usize, budget: std::time::Duration) -> Result<bool, Error> {
        let start = std::time::Instant::now();
        // With a slow filter in the graph, every packet may be long: look after each.
        let every = if self.graph.has_slow_filters() {
            1
        } else {
            BUDGET_CHECK
        };
        let within = move |n: u64| n % every != 0 || start.elapsed() < budget;
        let Some((generation, sources)) = self.live_sources() else {
            return Ok(false);
        };
        let src = sources[self.cursor % sources.len()];
        self.cursor = (self.cursor + 1) % sources.len();
        self.sources = Some((generation, sources));
        let Some(mut s) = self.graph.take_source(src) else {
            return Ok(true);
        };
        let mut made = 0u64;
        let lent = s.poll_borrowed(max, &mut |data, wire_len, timestamp| {
            made += 1;
            self.push_data(src, data, wire_len, timestamp);
            within(made)
        });
        let lost = s.lost();
        self.graph.restore_source(src, s, made);
        if lost > 0 {
            self.note_lost(src, lost);
        }
        match lent {
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) => Err(e),
            None => {
                for n in 1..=max as u64 {
                    let before = self.stats.packets;
                    if !self.step()? || self.stats.packets == before || !within(n) {
                        break;
                    }
                }
                Ok(!self.graph.live_sources().is_empty())
            }
        }
    }

    /// The estimated time the filters of each flow group took so far, in nanoseconds
    /// (sampled: [`crate::dataflow::Node::cpu_ns`]; filters shared by all groups not counted).
    pub fn cpu_by_group(&self) -> HashMap<String, u64> {
        self.graph.cpu_by_scope()
    }

    /// Suspend (or resume) the filters of flow group `group`: while suspended they run on no
    /// packet, and every packet of their flows' sources counts as dropped for those flows —
    /// how a daemon keeps one group from taking the capture loop from the others. Returns
    /// whether anything changed.
    pub fn throttle(&mut self, group: &str, on: bool) -> bool {
        let changed = self.graph.suspend(group, on);
        if changed {
            self.plan = None;
        }
        changed
    }

    /// Count `n` packets source `src` lost in the drops of every active flow it feeds (once per
    /// IBuf).
    #[cold]
    fn note_lost(&mut self, src: NodeId, n: u64) {
        self.stats.lost += n;
        let mut seen = std::collections::HashSet::new();
        for f in self.flows.values() {
            if f.state != FlowState::Active || !f.nodes.contains(&src) || !seen.insert(f.ibuf) {
                continue;
            }
            let (Some(reader), Some(g)) = (f.reader, self.groups.get(&f.group)) else {
                continue;
            };
            if let Some(w) = self.writers[g.slot].as_mut() {
                w.note_lost(reader, n);
            }
        }
    }

    /// Rebuild the delivery plan from the flows.
    #[cold]
    fn rebuild_plan(&mut self) {
        // One target per IBuf: flows sharing one get each packet through one of them.
        let mut seen = std::collections::HashSet::new();
        let plan = self
            .flows
            .values()
            .filter(|f| f.state == FlowState::Active && seen.insert(f.ibuf))
            .filter_map(|f| {
                let node = |n: NodeId| self.graph.node(n);
                let suspended = f
                    .nodes
                    .iter()
                    .any(|&n| node(n).is_some_and(|n| n.suspended));
                let sources = || {
                    let is_source = |&&n: &&NodeId| {
                        node(n).is_some_and(|n| matches!(n.body, crate::dataflow::Body::Source(_)))
                    };
                    f.nodes.iter().filter(is_source).copied().collect()
                };
                Some(Target {
                    ends: f.ends.clone(),
                    reader: f.reader?,
                    slot: self.groups.get(&f.group)?.slot,
                    throttled: if suspended { sources() } else { Vec::new() },
                })
            })
            .collect();
        self.to.resize_with(self.writers.len(), Default::default);
        self.plan = Some(plan);
    }

    /// Push `packet`, made by source node `src`, through the graph and deliver it.
    pub fn push(&mut self, src: NodeId, packet: &Packet) {
        self.push_data(src, &packet.data, packet.wire_len, packet.timestamp);
    }

    /// [`Runtime::push`] of a packet's parts (borrowed from wherever the source keeps them).
    pub fn push_data(
        &mut self,
        src: NodeId,
        data: &[u8],
        wire_len: u32,
        timestamp: netsift_capture::Timestamp,
    ) {
        self.stats.packets += 1;
        let lt = self
            .graph
            .node(src)
            .map_or(LinkType::ETHERNET, |n| n.target.link_type);
        let pkt = Pkt {
            data,
            wire_len,
            timestamp,
            link_type: lt,
        };
        self.graph.process(src, &pkt);
        if self.plan.is_none() {
            self.rebuild_plan();
        }
        let Some(plan) = self.plan.as_ref() else {
            return;
        };
        // PERF: one target (one flow, or flows sharing one IBuf — K copies of a tool): write
        // and deliver directly.
        if let [t] = plan.as_slice() {
            if !t.throttled.is_empty() {
                note_throttled(&mut self.writers, t, src);
                return;
            }
            let Some(p) = t.ends.iter().find_map(|&e| self.graph.passed(e)) else {
                return;
            };
            self.stats.accepted += 1;
            if let Some(w) = self.writers[t.slot].as_mut() {
                let view = Pkt {
                    data: &pkt.data[..p.len.min(pkt.data.len())],
                    ..pkt
                };
                match w.write_packet(&view) {
                    Some(slot) => {
                        w.deliver_capped(t.reader, slot, p.result, p.len as u32);
                    }
                    None => {
                        w.note_dropped(t.reader);
                    }
                }
                self.stats.copies += 1;
            }
            return;
        }
        for t in plan {
            if !t.throttled.is_empty() {
                note_throttled(&mut self.writers, t, src);
                continue;
            }
            if let Some(p) = t.ends.iter().find_map(|&e| self.graph.passed(e)) {
                let e = &mut self.to[t.slot];
                if e.0.is_empty() {
                    e.1 = 0;
                    self.touched.push(t.slot);
                }
                e.0.push((t.reader, p.result, p.len as u32));
                e.1 = e.1.max(p.len);
            }
        }
        if self.touched.is_empty() {
            return;
        }
        self.stats.accepted += 1;
        for &slot in &self.touched {
            let (to, len) = &mut self.to[slot];
            if let Some(w) = self.writers[slot].as_mut() {
                let view = Pkt {
                    data: &pkt.data[..(*len).min(pkt.data.len())],
                    ..pkt
                };
                w.write_capped(&view, to);
                self.stats.copies += 1;
            }
            to.clear();
        }
        self.touched.clear();
    }

    /// Run until every source has ended, then [`Runtime::finish`].
    pub fn run(&mut self) -> Result<RunStats, Error> {
        let mut n = 0u64;
        while self.step()? {
            n += 1;
            if n % 65_536 == 0 {
                self.reap();
            }
        }
        self.finish()
    }

    /// End the input: finish the filters (flushing sinks) and tell the readers that nothing
    /// more comes. The flows stay (their MBufs can still be read) until closed. An error
    /// ([`ErrorKind::Finish`]) lists the filters that failed to finish, separated by `; `; the
    /// first one's error is its source.
    pub fn finish(&mut self) -> Result<RunStats, Error> {
        let errors = self.graph.finish_all();
        // The writers stay: a flow activated later in the same group is delivered to again
        // (writing undoes `finish`).
        for w in self.writers.iter_mut().flatten() {
            w.finish();
        }
        let message = errors
            .iter()
            .map(Error::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        match errors.into_iter().next() {
            None => Ok(self.stats),
            Some(first) => Err(Error::with_source(ErrorKind::Finish, message, first)),
        }
    }

    /// The nodes of a flow's filters, in the order of its text (sources first).
    pub fn flow_nodes(&self, id: FlowId) -> Vec<NodeId> {
        self.flows
            .get(&id)
            .map(|f| f.nodes.clone())
            .unwrap_or_default()
    }

    /// Close the flows whose reader was dropped (their owner went away).
    pub fn reap(&mut self) {
        let gone: Vec<FlowId> = self
            .flows
            .iter()
            .filter(|(_, f)| {
                f.reader.is_some_and(|r| {
                    self.groups
                        .get(&f.group)
                        .is_none_or(|g| !g.group.readers().contains(&r))
                })
            })
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            self.log
                .push(format!("flow {id}: its reader is gone; closing it"));
            self.close(id);
        }
    }
}

/// The error of a flow number that names no flow.
fn no_flow(id: FlowId) -> Error {
    Error::new(ErrorKind::NoFlow, format!("no flow {id}"))
}

/// The PBuf sizes a flow's options ask for, normalised as the group is made: at least one
/// slot of at least 64 bytes, packets up to a slot or `max_packet`.
fn pbuf_sizes(opts: &FlowOptions) -> (u32, u32, u32) {
    let (slots, slot_size) = (opts.slots.max(1), opts.slot_size.max(64));
    (slots, slot_size, opts.max_packet.max(slot_size))
}

/// A packet of source `src` that throttled target `t` misses counts as dropped for it.
#[cold]
fn note_throttled(writers: &mut [Option<Writer>], t: &Target, src: NodeId) {
    if t.throttled.contains(&src)
        && let Some(w) = writers[t.slot].as_mut()
    {
        w.note_lost(t.reader, 1);
    }
}

/// [`Runtime::step_batch`] looks at the clock once per this many packets.
pub const BUDGET_CHECK: u64 = 16;

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> Runtime {
        Runtime::new(crate::standard_registry(), Policy::allow_all())
    }

    #[test]
    fn shared_prefix_is_one_instance_and_flows_get_their_packets() {
        let mut rt = runtime();
        let (a, mut ra) = rt
            .open(
                "(gen,7,2000) -> (sampler,2,16) -> (bpf,\"tcp\") -> (packetcount,,8)",
                FlowOptions::default(),
            )
            .unwrap();
        let (b, mut rb) = rt
            .open(
                "(gen,7,2000) -> (sampler,2,16) -> (bpf,\"udp\") -> (bytecount,,8)",
                FlowOptions::default(),
            )
            .unwrap();
        // Source and sampler shared; the bpf filters differ.
        assert_eq!(rt.node_of(a, 0), rt.node_of(b, 0));
        assert_eq!(rt.node_of(a, 1), rt.node_of(b, 1));
        assert_ne!(rt.node_of(a, 2), rt.node_of(b, 2));
        assert_eq!(rt.graph().len(), 6);
        let stats = rt.run().unwrap();
        assert_eq!(stats.packets, 2000);
        // Reference: every other packet of the same mix, by protocol.
        let mix = netsift_capture::generate::mixed_traffic(7, 2000);
        let (mut tcp, mut udp_bytes, mut udp) = (0u64, 0u64, 0u64);
        for p in mix.iter().step_by(2) {
            let key = netsift_offload::FlowKey::from_frame(&p.data);
            let untagged = p.data.get(12..14) == Some(&[0x08, 0x00][..])
                || p.data.get(12..14) == Some(&[0x86, 0xdd][..]);
            match key.map(|k| k.proto) {
                Some(6) if untagged => tcp += 1,
                Some(17) if untagged => {
                    udp += 1;
                    udp_bytes += u64::from(p.wire_len);
                }
                _ => {}
            }
        }
        assert_eq!(rt.mbuf(a, 3).unwrap().get(0), tcp);
        assert_eq!(rt.mbuf(b, 3).unwrap().get(0), udp_bytes);
        let (mut na, mut nb) = (0u64, 0u64);
        while ra.next().is_some() {
            na += 1;
        }
        while rb.next().is_some() {
            nb += 1;
        }
        assert_eq!((na, nb), (tcp, udp));
        assert!(rt.dot().contains("sampler#1"));
        // Closing one flow keeps the shared instances of the other.
        rt.close(a);
        assert_eq!(rt.graph().len(), 4);
        rt.close(b);
        assert!(rt.graph().is_empty());
    }

    #[test]
    fn flows_with_the_same_last_instance_share_an_ibuf_when_asked() {
        let mut rt = runtime();
        let share = FlowOptions {
            share_ibuf: true,
            ..FlowOptions::default()
        };
        let text = "(gen,3,3000) -> (bpf,\"tcp\")";
        let (a, mut ra) = rt.open(text, share.clone()).unwrap();
        let (b, mut rb) = rt.open(text, share.clone()).unwrap();
        // Not asked: its own IBuf; another filter: its own IBuf.
        let (c, mut rc) = rt.open(text, FlowOptions::default()).unwrap();
        let (d, mut rd) = rt.open("(gen,3,3000) -> (bpf,\"udp\")", share).unwrap();
        assert_eq!(rt.node_of(a, 1), rt.node_of(c, 1));
        assert_eq!(rt.ibuf_shared_with(b), Some(a));
        assert_eq!(rt.ibuf_shared_with(a), Some(b));
        assert_eq!(rt.ibuf_shared_with(c), None);
        assert_eq!(rt.ibuf_shared_with(d), None);
        let e = rt.pause(b).unwrap_err();
        assert_eq!(
            e.message(),
            format!("flow {b} shares its index buffer with flow {a} (share): it cannot be paused")
        );
        rt.pause(d).unwrap();
        rt.resume(d).unwrap();
        // Half the packets, then A leaves: B keeps its packets. C (its own IBuf, the same
        // filter instance) is the reference.
        for _ in 0..1500 {
            rt.step().unwrap();
        }
        let read = |r: &mut Reader| {
            let v: Vec<Vec<u8>> =
                std::iter::from_fn(|| r.next().map(|d| d.data.to_vec())).collect();
            r.release();
            v
        };
        let mut want = read(&mut rc);
        assert!(want.len() > 100);
        assert_eq!(read(&mut ra), want);
        let mut got_b = read(&mut rb);
        assert_eq!(got_b, want);
        rt.close(a);
        drop(ra);
        rt.run().unwrap();
        got_b.extend(read(&mut rb));
        want.extend(read(&mut rc));
        assert_eq!(got_b, want);
        assert!(!read(&mut rd).is_empty());
        let st = rt.group_stats(rt.group_of(b).unwrap()).unwrap();
        assert_eq!(st.readers, 3);
        let (sb, sc) = (ra_stats(&rt, b), ra_stats(&rt, c));
        assert_eq!((sb.appended, sb.dropped), (want.len() as u64, 0));
        assert_eq!(sb.appended, sc.appended);
    }

    fn ra_stats(rt: &Runtime, id: FlowId) -> crate::buffer::ReaderStats {
        let f = rt.flows.get(&id).unwrap();
        rt.groups[&f.group]
            .group
            .reader_stats(f.reader.unwrap())
            .unwrap()
    }

    #[test]
    fn errors_point_at_the_filter() {
        let mut rt = runtime();
        let e = rt
            .open("(gen,1,10) -> (bpf,\"tcp port\")", FlowOptions::default())
            .unwrap_err();
        assert!(e.message().contains("^"), "{e}");
        let e = rt
            .open("(gen,1,10) -> (nosuch,1)", FlowOptions::default())
            .unwrap_err();
        assert!(e.message().contains("unknown filter class"), "{e}");
        assert!(rt.graph().is_empty());
    }
}
