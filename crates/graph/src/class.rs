//! Filter classes and filters: the extension point of the framework.
//!
//! A [`FilterClass`] (`bpf`, `sampler`, `bytecount`, …) makes [`Filter`] instances from the
//! arguments written in a graph (`(sampler,2,4)`); a filter sees each packet that reaches it
//! and says whether the packet goes on ([`Verdict`]). Every instance has its own [`MBuf`] — the
//! size is the optional last argument in the graph, in bytes — which the application can read
//! while the flow runs. Sources (`device`, `file`, `gen`, `nic`) are classes too: their
//! instances make packets instead of filtering them ([`Source`]).
//!
//! Add a class by implementing [`FilterClass`] and registering it in a [`Registry`]; `netsift
//! flow --list-classes` prints the registry.

use crate::access::Access;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use netsift_capture::{LinkType, Packet};
use netsift_filter::Target;

use crate::error::Error;
use crate::mbuf::MBuf;

pub use netsift_ring::Pkt;

/// What a filter does with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The packet stops here.
    Drop,
    /// The packet goes on to the next filters, with a result (recorded in the filter's IBuf:
    /// a classification, a match position, a snap length) and optionally cut to `keep` bytes
    /// for everything downstream (a BPF return value, `snap`).
    Pass {
        /// The filter's result for this packet.
        result: u32,
        /// Bytes kept for downstream filters and buffers (`None`: all).
        keep: Option<u32>,
    },
}

impl Verdict {
    /// Pass with result 1, keeping the whole packet.
    pub const PASS: Verdict = Verdict::Pass {
        result: 1,
        keep: None,
    };
}

/// A filter instance.
pub trait Filter: Send {
    /// Process one packet; `mbuf` is this instance's persistent memory.
    fn process(&mut self, pkt: &Pkt<'_>, mbuf: &MBuf) -> Verdict;

    /// The input ended or the flow is closing: flush what is buffered (a `pcap` sink's file).
    /// The graph prefixes the message of an error with the class's name (`pcap: …`).
    fn finish(&mut self, _mbuf: &MBuf) -> Result<(), Error> {
        Ok(())
    }

    /// The classic BPF program the filter runs, if it runs one (the expression classes do,
    /// except `swift`): the tests compare it with the program the other entry points compile
    /// for the same expression. The default has none.
    fn program(&self) -> Option<&netsift_bpf::Program> {
        None
    }
}

/// What polling a source gave ([`Source::poll_packet`]).
#[derive(Debug)]
pub enum Polled {
    /// A packet.
    Packet(Packet),
    /// Nothing for now (a live source whose wait timed out); ask again.
    Idle,
    /// The input ended.
    End,
}

/// A source instance: makes packets (a capture file, an interface, a generator, NIC queues).
pub trait Source: Send {
    /// The link type of the packets.
    fn link_type(&self) -> LinkType;

    /// What filters over this source's packets are compiled for: by default a live capture of
    /// [`Source::link_type`] with libpcap's default snap length. A capture file's source gives
    /// the file's target ([`Target::for_capture`]), as `tcpdump -r` compiles.
    fn target(&self) -> Target {
        Target::live(self.link_type(), netsift_filter::DEFAULT_SNAPLEN)
    }

    /// The next packet, `Ok(None)` at the end of the input (a live source waits for one). An
    /// error (usually [`ErrorKind::Source`](crate::ErrorKind::Source)) stops the capture loop.
    fn next_packet(&mut self) -> Result<Option<Packet>, Error>;

    /// The next packet, or [`Polled::Idle`] when a live source has none within its poll
    /// interval, so that the capture loop can notice Ctrl-C or a packet limit. The default
    /// never idles.
    fn poll_packet(&mut self) -> Result<Polled, Error> {
        Ok(match self.next_packet()? {
            Some(p) => Polled::Packet(p),
            None => Polled::End,
        })
    }

    /// Hand up to `max` packets to `f` (bytes, wire length, time stamp) straight from the
    /// source's own memory — no copy — waiting up to the source's poll interval for the first;
    /// `Some(Ok(n))` says how many. `f` returns `false` to stop after the packet it got. `None`:
    /// this source cannot lend packets (the capture loop then takes them one by one with
    /// [`Source::poll_packet`]), which is the default.
    fn poll_borrowed(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], u32, netsift_capture::Timestamp) -> bool,
    ) -> Option<Result<usize, Error>> {
        let _ = (max, f);
        None
    }

    /// The capture loop is done with `packet` (one this source made): a source that copies
    /// packets may keep its buffer for the next one instead of allocating per packet. The
    /// default drops it.
    fn recycle(&mut self, packet: Packet) {
        drop(packet);
    }

    /// Packets the source lost before the runtime saw them, since the last call (a kernel
    /// ring that overflowed while the runtime was behind): [`crate::Runtime::step_batch`] (the
    /// daemon's capture loop) counts them in the drops of every flow the source feeds, as
    /// libpcap counts a ring's drops in `pcap_stats`. The default: none.
    fn lost(&mut self) -> u64 {
        0
    }
}

/// What a class makes.
pub enum Instance {
    /// A filter.
    Filter(Box<dyn Filter>),
    /// A source.
    Source(Box<dyn Source>),
}

impl fmt::Debug for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Instance::Filter(_) => "Instance::Filter",
            Instance::Source(_) => "Instance::Source",
        })
    }
}

/// One argument as written in the graph: the text (unquoted, escapes resolved) and whether it
/// was a quoted string. An empty argument (`(bytecount,,8)`) is an empty text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Arg {
    /// The text.
    pub text: String,
    /// Written in double quotes.
    pub quoted: bool,
}

impl Arg {
    /// A bare argument.
    pub fn bare(text: &str) -> Arg {
        Arg {
            text: text.to_string(),
            quoted: false,
        }
    }

    /// The argument as an unsigned number (decimal or `0x` hex).
    pub fn number(&self) -> Option<u64> {
        let t = self.text.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => t.parse().ok(),
        }
    }
}

/// What a class needs to know to make an instance.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// What the packets that will reach the instance are (their link type, snap length and
    /// origin, from the source upstream): what an expression is compiled for. `None`: not known
    /// yet (for sources).
    pub target: Option<Target>,
    /// The size of the instance's MBuf in bytes (a multiple of 8 once allocated).
    pub mbuf_bytes: usize,
    /// Whose rights open the paths the arguments name ([`Access`]).
    pub access: Access,
    /// What the instance may cost per packet ([`Bounds`]).
    pub bounds: Bounds,
}

/// What one filter instance may cost per packet: a daemon bounds its users' filters tighter
/// than the classes themselves do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bounds {
    /// The most operations an FPL program may execute per packet (its checker's worst case,
    /// [`netsift_fpl::Report::max_ops`]).
    pub fpl_ops: u64,
}

impl Default for Bounds {
    /// The classes' own limits ([`netsift_fpl::MAX_COST`]).
    fn default() -> Bounds {
        Bounds {
            fpl_ops: netsift_fpl::MAX_COST,
        }
    }
}

impl Context {
    /// The link type of the packets that will reach the instance, if known.
    pub fn link_type(&self) -> Option<LinkType> {
        self.target.map(|t| t.link_type)
    }
}

/// A filter class.
pub trait FilterClass: Send + Sync {
    /// The name used in graphs (`bpf`, `sampler`).
    fn name(&self) -> &'static str;

    /// One line for `--list-classes`.
    fn about(&self) -> &'static str;

    /// The arguments, for `--list-classes` and errors (`N [, MBUF]`).
    fn usage(&self) -> &'static str;

    /// Whether instances are sources.
    fn is_source(&self) -> bool {
        false
    }

    /// Whether instances load programs into the kernel (the policy grants these to root only,
    /// unless an `allow kernel` rule applies).
    fn loads_kernel_programs(&self) -> bool {
        false
    }

    /// Whether an instance with these arguments opens a path (through [`Context::access`]):
    /// such instances are shared only between flows of the same [`Access`].
    fn opens_paths(&self, args: &[Arg]) -> bool {
        let _ = args;
        false
    }

    /// The number of arguments the class takes (without the MBuf size): a range. One more
    /// argument than the maximum is the MBuf size in bytes.
    fn arity(&self) -> (usize, usize);

    /// Whether the class takes a variable list of arguments (patterns): then a trailing bare
    /// number is the MBuf size even below the maximum arity (`(strsearch,"a","b",64)`).
    fn variadic(&self) -> bool {
        false
    }

    /// The MBuf bytes an instance needs at least (0: none); a smaller size in the graph is an
    /// error.
    fn min_mbuf(&self, _args: &[Arg]) -> usize {
        0
    }

    /// A one-line summary of an instance's MBuf for reports (`netsift flow`): counters, the
    /// busiest flows. `None`: nothing to say.
    fn describe(&self, _mbuf: &MBuf) -> Option<String> {
        None
    }

    /// Make an instance from `args` (the MBuf size already removed). An error names the class
    /// and the argument (`sampler: argument 1 (N) …`, usually [`Error::argument`]); the runtime
    /// prefixes it with the class's name and shows the flow's text with a caret under the
    /// filter.
    fn instantiate(&self, args: &[Arg], ctx: &Context) -> Result<Instance, Error>;
}

/// The classes a graph may use, by name.
#[derive(Clone, Default)]
pub struct Registry {
    classes: BTreeMap<&'static str, Arc<dyn FilterClass>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.classes.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Add (or replace) a class.
    pub fn register(&mut self, class: Arc<dyn FilterClass>) {
        self.classes.insert(class.name(), class);
    }

    /// The class named `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&Arc<dyn FilterClass>> {
        self.classes.get(name).or_else(|| {
            self.classes
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
    }

    /// Every class, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn FilterClass>> {
        self.classes.values()
    }
}
