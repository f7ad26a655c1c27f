//! The error of the graph crate's public API: classes, filters, sources, the instantiated graph
//! and the runtime.
//!
//! An [`Error`] is opaque: its [`ErrorKind`] says what went wrong, its `Display` (and
//! [`Error::message`]) is the complete text to show — for a flow, the flow's text with a caret
//! under the offending filter:
//!
//! ```text
//! `sampler`: sampler: argument 1 (N) must be a whole number from 1 to 18446744073709551615, not "0" (or random:N, random:N:SEED)
//!   (bpf,"tcp") -> (sampler,0)
//!                  ^^^^^^^^^^^
//! ```
//!
//! Where another error is the cause (a filter expression's [`netsift_filter::Error`], an FPL
//! program's [`netsift_fpl::Error`], an I/O error, a graph-language [`GraphError`], a policy's
//! [`Denied`]), it is kept and returned by [`std::error::Error::source`]. Its text is already
//! part of the message, so print an `Error` with `{}`, not by walking the chain of sources
//! (`anyhow`'s `{:#}` would show the cause twice).

use std::fmt;
use std::sync::Arc;

use crate::lang::{GraphError, GraphErrorKind};
use crate::policy::{Denied, PolicyError};

/// What kind of problem an [`Error`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The graph text is not a graph (a missing `)`, an unterminated string, an empty stage…),
    /// or does not hold exactly one flow where one is expected ([`GraphErrorKind::Syntax`]).
    Syntax,
    /// The graph text, a flow or a filter is too large ([`GraphErrorKind::Limit`]).
    Limit,
    /// No class of that name is registered ([`GraphErrorKind::UnknownClass`]).
    UnknownClass,
    /// Too few or too many arguments for the class ([`GraphErrorKind::Arity`]).
    Arity,
    /// A bad MBuf size: not a number, too large, smaller than the class needs, or not a size
    /// the instance can use ([`GraphErrorKind::MBuf`]).
    MBuf,
    /// A source outside the first stage, or a filter in it ([`GraphErrorKind::Placement`]).
    Placement,
    /// An authorisation policy text is not valid (a [`PolicyError`]).
    Policy,
    /// The authorisation policy denied the flow; [`Error::denied`] gives the decision.
    Denied,
    /// A class refused an argument (a number out of range, an empty path, a bad interface
    /// name, an unknown option).
    Argument,
    /// A filter expression, program or rule set was rejected (the engine's error is the
    /// [`source`](std::error::Error::source): e.g. a [`netsift_filter::Error`] or a
    /// [`netsift_fpl::Error`]).
    Expression,
    /// Input or output failed: a file, a device, a pcap sink, shared memory, a buffer.
    Io,
    /// Packets of different link types would meet (the upstream filters of a filter see
    /// different link types).
    LinkType,
    /// No flow has that number.
    NoFlow,
    /// The flow (or the group) is not in a state that allows the operation (already
    /// instantiated, not active, sharing its index buffer…).
    State,
    /// A source failed while reading packets (a corrupt capture file, a failing device).
    Source,
    /// Filters failed to finish at the end of the input (a sink could not flush); the message
    /// lists each, the first is the [`source`](std::error::Error::source).
    Finish,
    /// Anything else (a class of an application may use it).
    Other,
}

impl From<GraphErrorKind> for ErrorKind {
    fn from(k: GraphErrorKind) -> ErrorKind {
        match k {
            GraphErrorKind::Syntax => ErrorKind::Syntax,
            GraphErrorKind::Limit => ErrorKind::Limit,
            GraphErrorKind::UnknownClass => ErrorKind::UnknownClass,
            GraphErrorKind::Arity => ErrorKind::Arity,
            GraphErrorKind::MBuf => ErrorKind::MBuf,
            GraphErrorKind::Placement => ErrorKind::Placement,
        }
    }
}

/// A shared underlying error (shared so that [`Error`] is `Clone`).
type Cause = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// An error of a class, a filter, a source, the graph or the runtime: an [`ErrorKind`] and the
/// complete message (see the [module](self) documentation).
///
/// It is one pointer wide, `Send`, `Sync` and `Clone`.
#[derive(Clone)]
pub struct Error(Box<Inner>);

#[derive(Clone)]
struct Inner {
    kind: ErrorKind,
    message: String,
    cause: Option<Cause>,
}

impl Error {
    /// An error of `kind` with `message` (the complete text to show).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error(Box::new(Inner {
            kind,
            message: message.into(),
            cause: None,
        }))
    }

    /// An error of `kind` with `message`, caused by `cause` (kept as the
    /// [`source`](std::error::Error::source); `message` should already say what it says).
    pub fn with_source(
        kind: ErrorKind,
        message: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error(Box::new(Inner {
            kind,
            message: message.into(),
            cause: Some(Arc::new(cause)),
        }))
    }

    /// A class refused an argument ([`ErrorKind::Argument`]).
    pub fn argument(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Argument, message)
    }

    /// Input or output failed ([`ErrorKind::Io`]), because of `cause`.
    pub fn io(
        message: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::with_source(ErrorKind::Io, message, cause)
    }

    /// An error in the graph `text`: the message rendered with the line of `text` and a caret
    /// under the offending part ([`GraphError::render`]); the kind is the graph error's.
    pub fn from_graph_error(e: GraphError, text: &str) -> Error {
        let message = e.render(text);
        Error::with_source(e.kind().into(), message, e)
    }

    /// A flow the policy denied: the decision, then — when a filter is to blame — the flow's
    /// `text` with a caret under it ([`Denied::render`]).
    pub fn from_denied(d: Denied, text: &str) -> Error {
        let message = d.render(text);
        Error::with_source(ErrorKind::Denied, message, d)
    }

    /// An error in the policy `text`, rendered with its line and a caret
    /// ([`PolicyError::render`]).
    pub fn from_policy_error(e: PolicyError, text: &str) -> Error {
        let message = e.render(text);
        Error::with_source(ErrorKind::Policy, message, e)
    }

    /// What kind of problem.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The complete message, as `Display` writes it (for a flow: with its text and caret).
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The policy's decision, for an [`ErrorKind::Denied`] error.
    pub fn denied(&self) -> Option<&Denied> {
        self.cause()?.downcast_ref()
    }

    /// The graph language's error, for an error in a graph text ([`ErrorKind::Syntax`],
    /// [`ErrorKind::Limit`], [`ErrorKind::UnknownClass`], [`ErrorKind::Arity`],
    /// [`ErrorKind::MBuf`], [`ErrorKind::Placement`] found by the language).
    pub fn graph_error(&self) -> Option<&GraphError> {
        self.cause()?.downcast_ref()
    }

    /// The policy text's error, for an [`ErrorKind::Policy`] error.
    pub fn policy_error(&self) -> Option<&PolicyError> {
        self.cause()?.downcast_ref()
    }

    /// The underlying error, typed.
    fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.0.cause.as_deref()
    }

    /// The same error (kind and cause) with its message rewritten by `f`: a prefix naming the
    /// class, the flow's text with a caret.
    pub(crate) fn map_message(mut self, f: impl FnOnce(&str) -> String) -> Error {
        self.0.message = f(&self.0.message);
        self
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.0.kind)
            .field("message", &self.0.message);
        if let Some(c) = &self.0.cause {
            d.field("source", c);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .cause
            .as_deref()
            .map(|c| c as &(dyn std::error::Error + 'static))
    }
}

/// A graph-language error without its text: the message alone (use
/// [`Error::from_graph_error`] to show the text with a caret).
impl From<GraphError> for Error {
    fn from(e: GraphError) -> Error {
        Error::with_source(e.kind().into(), e.message().to_string(), e)
    }
}

/// A denied flow without its text: the decision alone (use [`Error::from_denied`] to show the
/// flow with a caret).
impl From<Denied> for Error {
    fn from(d: Denied) -> Error {
        Error::with_source(ErrorKind::Denied, d.to_string(), d)
    }
}

/// A policy error without its text: `line N: message` (use [`Error::from_policy_error`] to
/// show the line with a caret).
impl From<PolicyError> for Error {
    fn from(e: PolicyError) -> Error {
        Error::with_source(ErrorKind::Policy, e.to_string(), e)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use netsift_capture::{LinkType, Packet};

    use super::*;
    use crate::class::{Arg, Context, Filter, FilterClass, Instance, Pkt, Source, Verdict};
    use crate::mbuf::MBuf;
    use crate::policy::Policy;
    use crate::{FlowOptions, Runtime};

    #[test]
    fn is_small_shareable_and_displays_its_message() {
        fn traits<T: Send + Sync + Clone + 'static>() {}
        traits::<Error>();
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
        let e = Error::argument("sampler: argument 1 (N) is missing");
        assert_eq!(e.kind(), ErrorKind::Argument);
        assert_eq!(e.to_string(), "sampler: argument 1 (N) is missing");
        assert_eq!(e.message(), e.to_string());
        assert!(e.source().is_none());
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = Error::io("cannot read x: entity not found", io);
        assert_eq!(e.kind(), ErrorKind::Io);
        let c = e.clone();
        assert_eq!(c.to_string(), "cannot read x: entity not found");
        let src = c.source().expect("the cause");
        assert_eq!(
            src.downcast_ref::<std::io::Error>().map(|e| e.kind()),
            Some(std::io::ErrorKind::NotFound)
        );
        let e = e.map_message(|m| format!("`file`: {m}"));
        assert_eq!(e.to_string(), "`file`: cannot read x: entity not found");
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(e.source().is_some());
        assert!(format!("{e:?}").contains("Io"));
    }

    #[test]
    fn graph_and_policy_errors_keep_their_kind_and_value() {
        let text = "(gen,1,1) -> (sampler,2";
        let g = crate::lang::parse(text).unwrap_err();
        let e = Error::from_graph_error(g.clone(), text);
        assert_eq!(e.kind(), ErrorKind::Syntax);
        assert_eq!(e.to_string(), g.render(text));
        assert_eq!(e.graph_error(), Some(&g));
        assert_eq!(Error::from(g.clone()).to_string(), g.message());
        let p = Policy::parse("allow user alice").unwrap_err();
        let e = Error::from_policy_error(p.clone(), "allow user alice");
        assert_eq!(e.kind(), ErrorKind::Policy);
        assert_eq!(e.to_string(), p.render("allow user alice"));
        assert_eq!(e.policy_error(), Some(&p));
        assert_eq!(Error::from(p.clone()).to_string(), p.to_string());
        assert!(e.denied().is_none() && e.graph_error().is_none());
    }

    fn runtime(policy: Policy) -> Runtime {
        let mut reg = crate::standard_registry();
        reg.register(Arc::new(TestSource));
        reg.register(Arc::new(FailingSink));
        Runtime::new(reg, policy)
    }

    /// `(test, RAW|FAIL)`: a source of one raw-IP packet, or one whose read fails.
    struct TestSource;

    impl FilterClass for TestSource {
        fn name(&self) -> &'static str {
            "test"
        }
        fn about(&self) -> &'static str {
            "test source"
        }
        fn usage(&self) -> &'static str {
            "RAW | FAIL"
        }
        fn is_source(&self) -> bool {
            true
        }
        fn arity(&self) -> (usize, usize) {
            (1, 1)
        }
        fn instantiate(&self, args: &[Arg], _ctx: &Context) -> Result<Instance, Error> {
            Ok(Instance::Source(Box::new(TestSrc {
                fail: args[0].text == "FAIL",
            })))
        }
    }

    struct TestSrc {
        fail: bool,
    }

    impl Source for TestSrc {
        fn link_type(&self) -> LinkType {
            LinkType::RAW
        }
        fn next_packet(&mut self) -> Result<Option<Packet>, Error> {
            if self.fail {
                return Err(Error::with_source(
                    ErrorKind::Source,
                    "test: the wire broke",
                    std::io::Error::other("the wire broke"),
                ));
            }
            Ok(None)
        }
    }

    /// `(failsink)`: a filter whose `finish` fails.
    struct FailingSink;

    impl FilterClass for FailingSink {
        fn name(&self) -> &'static str {
            "failsink"
        }
        fn about(&self) -> &'static str {
            "fails to finish"
        }
        fn usage(&self) -> &'static str {
            ""
        }
        fn arity(&self) -> (usize, usize) {
            (0, 1)
        }
        fn instantiate(&self, _args: &[Arg], _ctx: &Context) -> Result<Instance, Error> {
            struct F;
            impl Filter for F {
                fn process(&mut self, _pkt: &Pkt<'_>, _mbuf: &MBuf) -> Verdict {
                    Verdict::PASS
                }
                fn finish(&mut self, _mbuf: &MBuf) -> Result<(), Error> {
                    Err(Error::new(ErrorKind::Io, "cannot flush"))
                }
            }
            Ok(Instance::Filter(Box::new(F)))
        }
    }

    #[test]
    fn the_runtime_reports_typed_errors_with_todays_text() {
        let mut rt = runtime(Policy::allow_all());
        let o = FlowOptions::default;
        // The graph language: the kind, the GraphError, the caret.
        let e = rt.open("(gen,1,10) -> (nosuch,1)", o()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnknownClass);
        assert_eq!(
            e.graph_error().map(GraphError::kind),
            Some(GraphErrorKind::UnknownClass)
        );
        assert!(
            e.to_string().starts_with("unknown filter class `nosuch`"),
            "{e}"
        );
        let e = rt.create("(gen,1,1); (gen,1,2)", o()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Syntax);
        // A class's argument: prefixed with the class, rendered under the filter.
        let text = "(gen,1,10) -> (sampler,0)";
        let e = rt.open(text, o()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Argument);
        let want = format!(
            "`sampler`: sampler: argument 1 (N) must be a whole number from 1 to {}, not \"0\" \
             (or random:N, random:N:SEED)",
            u64::MAX
        );
        assert_eq!(
            e.to_string(),
            netsift_lang::span::render(text, netsift_lang::Span::new(14, 25), &want)
        );
        // An expression: the filter crate's error is the source, its text in the message.
        let e = rt
            .open("(gen,1,10) -> (bpf,\"tcp port htp\")", o())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Expression);
        let f = e
            .source()
            .and_then(|s| s.downcast_ref::<netsift_filter::Error>())
            .expect("the filter's error");
        assert!(e.to_string().starts_with(&format!("`bpf`: {f}")), "{e}");
        let e = rt.open("(gen,1,10) -> (fpl,\"R[0]=EXTERN(Nope,0,0);\")", o());
        let e = e.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Expression);
        assert!(e.source().unwrap().is::<netsift_fpl::Error>());
        let e = rt
            .open("(gen,1,10) -> (fpl,\"R[0]=1;\",24)", o())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MBuf);
        // I/O: a file that is not there.
        let e = rt.open("(file,\"/nonexistent/x.pcap\")", o()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(e.source().is_some());
        // Link types that differ.
        let e = rt
            .open("(gen,1,1) | (test,RAW) -> (bpf,\"ip\")", o())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LinkType);
        assert!(
            e.to_string().starts_with(
                "`bpf`: its upstream filters see different link types (EN10MB and RAW)"
            )
        );
        // Flows that are not there, or not in the right state.
        let e = rt.instantiate(99).unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (ErrorKind::NoFlow, "no flow 99".into())
        );
        let errors = rt.close(99);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].kind(), ErrorKind::NoFlow);
        assert_eq!(errors[0].to_string(), "no flow 99");
        let (id, _r) = rt.open("(gen,1,10) -> (failsink)", o()).unwrap();
        let e = rt.resume(id).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::State);
        assert_eq!(e.to_string(), format!("flow {id} is Active"));
        // A filter that cannot finish: prefixed with its class; `finish` joins them.
        let e = rt.run().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Finish);
        assert_eq!(e.to_string(), "failsink: cannot flush");
        let first = e.source().and_then(|s| s.downcast_ref::<Error>()).unwrap();
        assert_eq!(first.kind(), ErrorKind::Io);
        let errors = rt.close(id);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].kind(), ErrorKind::Io);
        assert_eq!(errors[0].to_string(), "failsink: cannot flush");
        // A source that fails while reading.
        let mut rt = runtime(Policy::allow_all());
        let (_id, _r) = rt.open("(test,FAIL) -> (bpf,\"ip\")", o()).unwrap();
        let e = rt.step().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Source);
        assert_eq!(e.to_string(), "test: the wire broke");
    }

    #[test]
    fn a_denied_flow_keeps_the_decision() {
        let policy = Policy::parse("default deny\nuser alice: allow\n").unwrap();
        let mut rt = runtime(policy);
        let text = "(gen,1,10) -> (bpf,\"tcp\")";
        let opts = FlowOptions {
            user: "bob".into(),
            ..FlowOptions::default()
        };
        let e = rt.open(text, opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Denied);
        let d = e.denied().expect("the decision");
        assert_eq!(d.user, "bob");
        assert_eq!(e.to_string(), d.render(text));
        assert_eq!(
            e.to_string(),
            "flow of user `bob` denied by the policy's default: no rule allows the flow and the \
             default is deny"
        );
        assert_eq!(Error::from(d.clone()).to_string(), d.to_string());
    }
}
