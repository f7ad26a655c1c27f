//! The graph language (FFPF §2.3): text -> [`FlowSpec`] (with spans) -> [`ResolvedFilter`]s.
//!
//! ```text
//! (device,eth0) | (device,eth1) -> (sampler,2,4) -> (fpl,"…") | (bpf,"tcp") -> (bytecount,,8)
//! ```
//!
//! `->` connects stages ("connects to"), `|` puts filters of one stage in parallel ("in parallel
//! with": the packets of the previous stage go to each of them — split — and whatever any of
//! them passes goes on to the next stage — join). `|` binds tighter than `->`, so
//! `(a) | (b) -> (c)` is the stage `[a, b]` followed by the stage `[c]`.
//!
//! # Grammar
//!
//! ```text
//! graph    = flow { ";" flow } [ ";" ] ;        (* or one flow per string: parse_list *)
//! flow     = stage { "->" stage } ;
//! stage    = filter { "|" filter } ;
//! filter   = "(" class { "," arg } ")" ;
//! class    = ( letter | digit | "_" | "-" | "." ) { letter | digit | "_" | "-" | "." } ;
//! arg      = string | bare ;
//! string   = '"' { char - ( '"' | "\" ) | "\" char } '"' ;
//! bare     = { char - ( "," | ")" | "(" | ";" | '"' | "->" ) } ;   (* trimmed; may be empty *)
//! ```
//!
//! Whitespace (newlines included), `\` followed by a newline (a shell line continuation) and
//! comments (`#` to the end of the line, outside strings) may appear between any two tokens.
//! In a string, `\"` is `"` and `\\` is `\`; every other backslash sequence is kept as written
//! (`"\x41"` reaches the class as the four characters `\x41`). A bare argument is everything up
//! to the next `,` or `)`, with comments and line continuations removed and surrounding
//! whitespace trimmed; `(bytecount,,8)` has an empty first argument.
//!
//! # Pipeline
//!
//! [`parse`] (or [`parse_list`]) turns text into [`FlowSpec`]s — pure syntax, every node with
//! its byte [`Span`]. [`check`] resolves one flow against a [`Registry`]: class names
//! (case-insensitive), argument counts, the optional trailing MBuf size, and the placement of
//! sources (all of the first stage, nowhere else). The result, a list of [`ResolvedFilter`]s,
//! is what the authorisation [`policy`](crate::policy) and the runtime consume.
//!
//! # Limits
//!
//! The parser never recurses and never panics; texts longer than [`MAX_TEXT_LEN`] bytes,
//! flows of more than [`MAX_FILTERS_PER_FLOW`] filters, filters of more than
//! [`MAX_ARGS_PER_FILTER`] arguments and more than [`MAX_FLOWS`] flows are rejected with a
//! [`GraphErrorKind::Limit`] error.

use std::fmt;
use std::sync::Arc;

use crate::class::{Arg, FilterClass, Registry};

/// The longest graph text accepted, in bytes.
pub const MAX_TEXT_LEN: usize = 1 << 20;
/// The most filters one flow may have.
pub const MAX_FILTERS_PER_FLOW: usize = 1000;
/// The most arguments one filter may have.
pub const MAX_ARGS_PER_FILTER: usize = 256;
/// The most flows one parse may return.
pub const MAX_FLOWS: usize = 1000;
/// The largest MBuf a filter may ask for, in bytes (64 MiB).
pub const MAX_MBUF_BYTES: usize = 64 << 20;

/// A byte range `start..end` of a graph (or policy) text (the filter language's span type).
pub use netsift_lang::Span;
pub use netsift_lang::span::render;

/// One flow: stages connected by `->`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// The stages, in order; the first holds the sources.
    pub stages: Vec<Stage>,
    /// From the first `(` to the last `)`.
    pub span: Span,
    /// Which text the flow (and every span in it) comes from: the index in the list given to
    /// [`parse_list`], 0 for [`parse`].
    pub text_index: usize,
}

/// One stage: filters in parallel (`|`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stage {
    /// The filters, left to right (never empty).
    pub filters: Vec<FilterSpec>,
}

/// One filter as written: `(class, arg, …)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterSpec {
    /// The class name as written (resolved case-insensitively by [`check`]).
    pub class: String,
    /// Where the class name is.
    pub class_span: Span,
    /// The arguments with their spans (a quoted argument's span includes the quotes; an empty
    /// argument's span is empty, just before the `,` or `)` that ends it).
    pub args: Vec<(Arg, Span)>,
    /// From `(` to `)`.
    pub span: Span,
}

impl FlowSpec {
    /// Every filter, stage by stage, left to right.
    pub fn filters(&self) -> impl Iterator<Item = &FilterSpec> {
        self.stages.iter().flat_map(|s| s.filters.iter())
    }
}

/// What kind of problem a [`GraphError`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GraphErrorKind {
    /// The text is not a graph (a missing `)`, an unterminated string, an empty stage…).
    Syntax,
    /// The text, a flow or a filter is too large.
    Limit,
    /// No class of that name is registered.
    UnknownClass,
    /// Too few or too many arguments for the class.
    Arity,
    /// A bad MBuf size (not a number, too large, smaller than the class needs).
    MBuf,
    /// A source outside the first stage, or a filter in it.
    Placement,
}

/// An error in a graph: what is wrong and where.
///
/// `Display` writes the message only; [`GraphError::render`] adds the line of the text with a
/// caret line under the offending part:
///
/// ```text
/// expected ')' after the arguments of `sampler`
///   (device,eth0) -> (sampler,2,4 -> (bpf,"tcp")
///                                 ^^
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphError {
    kind: GraphErrorKind,
    message: String,
    span: Span,
    text_index: usize,
}

impl GraphError {
    /// An error of `kind` at `span` of text number `text_index`.
    pub fn new(
        kind: GraphErrorKind,
        message: impl Into<String>,
        span: Span,
        text_index: usize,
    ) -> GraphError {
        GraphError {
            kind,
            message: message.into(),
            span,
            text_index,
        }
    }

    /// The kind of error.
    pub fn kind(&self) -> GraphErrorKind {
        self.kind
    }

    /// The message, without the text and caret.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where in the text.
    pub fn span(&self) -> Span {
        self.span
    }

    /// Which text: the index in the list given to [`parse_list`] (0 for [`parse`]).
    pub fn text_index(&self) -> usize {
        self.text_index
    }

    /// The message, then the line of `text` (the text the error is about) with a caret line
    /// under the span. A text of several lines adds the line number to the message.
    pub fn render(&self, text: &str) -> String {
        netsift_lang::span::render(text, self.span, &self.message)
    }
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GraphError {}

/// Parse one graph text: one or more flows separated by `;`.
///
/// ```
/// use netsift_graph::lang::parse;
///
/// let flows = parse("(device,eth0) | (device,eth1) -> (sampler, 2, 4) -> (bytecount,,8)").unwrap();
/// assert_eq!(flows[0].stages.len(), 3);
/// assert_eq!(flows[0].to_string(), "(device,eth0) | (device,eth1) -> (sampler,2,4) -> (bytecount,,8)");
///
/// let text = "(device,eth0) -> (sampler,2,4 -> (bpf,\"tcp\")";
/// assert_eq!(
///     parse(text).unwrap_err().render(text),
///     "expected ')' after the arguments of `sampler`\n  (device,eth0) -> (sampler,2,4 -> (bpf,\"tcp\")\n                                ^^",
/// );
/// ```
pub fn parse(text: &str) -> Result<Vec<FlowSpec>, GraphError> {
    Parser::new(text, 0).graph()
}

/// Parse several graph texts (one argument each on a command line, like `ffpf-flow`); each may
/// hold several flows. Spans are relative to their own text ([`FlowSpec::text_index`],
/// [`GraphError::text_index`]).
pub fn parse_list<S: AsRef<str>>(texts: &[S]) -> Result<Vec<FlowSpec>, GraphError> {
    let mut flows = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        flows.extend(Parser::new(t.as_ref(), i).graph()?);
        if flows.len() > MAX_FLOWS {
            return Err(GraphError::new(
                GraphErrorKind::Limit,
                format!("too many flows (at most {MAX_FLOWS})"),
                Span::new(0, t.as_ref().len()),
                i,
            ));
        }
    }
    Ok(flows)
}

/// What came before the filter the parser expects next.
#[derive(Clone, Copy)]
enum Prev {
    Start,
    Arrow(Span),
    Bar(Span),
}

struct Parser<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
    index: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, index: usize) -> Parser<'a> {
        Parser {
            text,
            b: text.as_bytes(),
            pos: 0,
            index,
        }
    }

    fn err(&self, kind: GraphErrorKind, message: impl Into<String>, span: Span) -> GraphError {
        GraphError::new(kind, message, span, self.index)
    }

    fn syntax(&self, message: impl Into<String>, span: Span) -> GraphError {
        self.err(GraphErrorKind::Syntax, message, span)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn at_arrow(&self) -> bool {
        self.b.get(self.pos..self.pos + 2) == Some(b"->")
    }

    /// The length of a line continuation (`\` newline) at `i`, 0 if none.
    fn continuation_at(&self, i: usize) -> usize {
        match self.b.get(i..) {
            Some([b'\\', b'\n', ..]) => 2,
            Some([b'\\', b'\r', b'\n', ..]) => 3,
            _ => 0,
        }
    }

    /// Skip whitespace, comments and line continuations.
    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_ascii_whitespace() {
                self.pos += 1;
            } else if c == b'#' {
                self.skip_comment();
            } else {
                let n = self.continuation_at(self.pos);
                if n == 0 {
                    break;
                }
                self.pos += n;
            }
        }
    }

    /// Skip a comment at `pos`, up to (not including) the newline.
    fn skip_comment(&mut self) {
        self.pos = self.b[self.pos..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(self.b.len(), |i| self.pos + i);
    }

    /// The span of the token at `pos`, for errors: `->`, one punctuation character, or a run
    /// of other characters; empty at the end.
    fn token_span(&self) -> Span {
        let p = self.pos;
        if p >= self.b.len() {
            return Span::new(p, p);
        }
        if self.at_arrow() {
            return Span::new(p, p + 2);
        }
        let is_punct = |c: u8| b"(),|;\"#".contains(&c) || c.is_ascii_whitespace();
        if is_punct(self.b[p]) {
            return Span::new(p, p + 1);
        }
        let mut e = p;
        while e < self.b.len() && !is_punct(self.b[e]) && self.b.get(e..e + 2) != Some(b"->") {
            e += 1;
        }
        Span::new(p, e.max(next_boundary(self.text, p)))
    }

    fn graph(mut self) -> Result<Vec<FlowSpec>, GraphError> {
        if self.text.len() > MAX_TEXT_LEN {
            return Err(self.err(
                GraphErrorKind::Limit,
                format!(
                    "graph text too long ({} bytes, at most {MAX_TEXT_LEN})",
                    self.text.len()
                ),
                Span::new(MAX_TEXT_LEN, MAX_TEXT_LEN),
            ));
        }
        let mut flows = Vec::new();
        self.skip_ws();
        if self.peek().is_none() {
            return Err(self.syntax(
                "empty graph: expected a flow such as `(device,eth0) -> (bpf,\"tcp\")`",
                self.token_span(),
            ));
        }
        loop {
            flows.push(self.flow()?);
            if flows.len() > MAX_FLOWS {
                return Err(self.err(
                    GraphErrorKind::Limit,
                    format!("too many flows (at most {MAX_FLOWS})"),
                    flows.last().map_or(Span::default(), |f: &FlowSpec| f.span),
                ));
            }
            // `flow` stops at `;` or at the end.
            if self.peek() == Some(b';') {
                self.pos += 1;
                self.skip_ws();
                if self.peek().is_none() {
                    break;
                }
            } else {
                break;
            }
        }
        Ok(flows)
    }

    fn flow(&mut self) -> Result<FlowSpec, GraphError> {
        let mut stages = Vec::new();
        let mut stage = Vec::new();
        let mut prev = Prev::Start;
        let mut count = 0usize;
        loop {
            self.skip_ws();
            if self.peek() == Some(b'(') {
                let f = self.filter()?;
                count += 1;
                if count > MAX_FILTERS_PER_FLOW {
                    return Err(self.err(
                        GraphErrorKind::Limit,
                        format!("too many filters in one flow (at most {MAX_FILTERS_PER_FLOW})"),
                        f.span,
                    ));
                }
                stage.push(f);
            } else {
                return Err(self.expected_filter(prev));
            }
            self.skip_ws();
            match self.peek() {
                Some(b'|') => {
                    prev = Prev::Bar(Span::new(self.pos, self.pos + 1));
                    self.pos += 1;
                }
                Some(b'-') if self.at_arrow() => {
                    prev = Prev::Arrow(Span::new(self.pos, self.pos + 2));
                    self.pos += 2;
                    stages.push(Stage {
                        filters: std::mem::take(&mut stage),
                    });
                }
                None | Some(b';') => {
                    stages.push(Stage { filters: stage });
                    break;
                }
                Some(_) => {
                    return Err(self.syntax(
                        "expected '->', '|', ';' or the end of the flow after a filter",
                        self.token_span(),
                    ));
                }
            }
        }
        let start = stages[0].filters[0].span;
        let end = stages
            .last()
            .and_then(|s| s.filters.last())
            .map_or(start, |f| f.span);
        Ok(FlowSpec {
            stages,
            span: start.to(end),
            text_index: self.index,
        })
    }

    /// The error for something other than `(` where a filter should start.
    fn expected_filter(&self, prev: Prev) -> GraphError {
        let here = self.token_span();
        let at_end = matches!(self.peek(), None | Some(b';'));
        let at_op = at_end || self.at_arrow() || self.peek() == Some(b'|');
        match prev {
            Prev::Arrow(arrow) if at_op => {
                self.syntax("empty stage", if at_end { arrow } else { here })
            }
            Prev::Bar(bar) if at_op => self.syntax("expected a filter after '|'", bar),
            Prev::Start if at_end => self.syntax("empty flow", here),
            Prev::Start if self.peek() == Some(b'|') => {
                self.syntax("expected a filter before '|'", here)
            }
            Prev::Start if at_op => self.syntax("empty stage", here),
            _ => self.syntax("expected '(' to start a filter", here),
        }
    }

    fn filter(&mut self) -> Result<FilterSpec, GraphError> {
        let open = self.pos;
        self.pos += 1;
        self.skip_ws();
        let cstart = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || b"_-.".contains(&c) {
                self.pos += 1;
            } else {
                break;
            }
        }
        let class_span = Span::new(cstart, self.pos);
        if class_span.start == class_span.end {
            self.pos = cstart;
            let msg = if self.peek() == Some(b'"') {
                "expected a class name after '(', not a string"
            } else {
                "expected a class name after '('"
            };
            return Err(self.syntax(msg, self.token_span()));
        }
        let class = self.text[cstart..self.pos].to_string();
        self.skip_ws();
        let mut args = Vec::new();
        match self.peek() {
            Some(b')') => {}
            Some(b',') => loop {
                self.pos += 1;
                let arg = self.arg(&class)?;
                args.push(arg);
                if args.len() > MAX_ARGS_PER_FILTER {
                    return Err(self.err(
                        GraphErrorKind::Limit,
                        format!("too many arguments (at most {MAX_ARGS_PER_FILTER})"),
                        args.last().map_or(class_span, |a: &(Arg, Span)| a.1),
                    ));
                }
                // `arg` stops at `,` or `)`.
                if self.peek() == Some(b')') {
                    break;
                }
            },
            None | Some(b'(' | b';') => return Err(self.missing_paren(&class)),
            Some(b'-') if self.at_arrow() => return Err(self.missing_paren(&class)),
            Some(_) => {
                return Err(self.syntax(
                    format!("expected ',' or ')' after the class name `{class}`"),
                    self.token_span(),
                ));
            }
        }
        self.pos += 1;
        Ok(FilterSpec {
            class,
            class_span,
            args,
            span: Span::new(open, self.pos),
        })
    }

    fn missing_paren(&self, class: &str) -> GraphError {
        self.syntax(
            format!("expected ')' after the arguments of `{class}`"),
            self.token_span(),
        )
    }

    /// One argument, after its `,`; stops at the `,` or `)` that ends it.
    fn arg(&mut self, class: &str) -> Result<(Arg, Span), GraphError> {
        self.skip_ws();
        if self.peek() == Some(b'"') {
            let (text, span) = self.string()?;
            self.skip_ws();
            return match self.peek() {
                Some(b',' | b')') => Ok((Arg { text, quoted: true }, span)),
                None | Some(b'(' | b';') => Err(self.missing_paren(class)),
                Some(b'-') if self.at_arrow() => Err(self.missing_paren(class)),
                Some(_) => Err(self.syntax(
                    "expected ',' or ')' after a quoted argument (a string must be the whole argument)",
                    self.token_span(),
                )),
            };
        }
        let start = self.pos;
        let mut text = String::new();
        // Source span of the non-blank part.
        let mut first: Option<usize> = None;
        let mut last_end = start;
        let mut piece = start;
        loop {
            match self.peek() {
                Some(b',' | b')') => break,
                None | Some(b'(' | b';') => return Err(self.missing_paren(class)),
                Some(b'-') if self.at_arrow() => return Err(self.missing_paren(class)),
                Some(b'"') => {
                    return Err(self.syntax(
                        "a quoted string must be the whole argument",
                        self.token_span(),
                    ));
                }
                Some(b'#') => {
                    text.push_str(&self.text[piece..self.pos]);
                    self.skip_comment();
                    piece = self.pos;
                }
                Some(b'\\') if self.continuation_at(self.pos) > 0 => {
                    text.push_str(&self.text[piece..self.pos]);
                    text.push(' ');
                    self.pos += self.continuation_at(self.pos);
                    piece = self.pos;
                }
                Some(c) => {
                    if !c.is_ascii_whitespace() {
                        first.get_or_insert(self.pos);
                        last_end = next_boundary(self.text, self.pos);
                    }
                    self.pos += 1;
                }
            }
        }
        text.push_str(&self.text[piece..self.pos]);
        let span = match first {
            Some(f) => Span::new(f, last_end),
            None => Span::new(self.pos, self.pos),
        };
        let trimmed = text.trim_matches(|c: char| c.is_ascii_whitespace());
        Ok((Arg::bare(trimmed), span))
    }

    /// A string at `"`: its text and span (quotes included).
    fn string(&mut self) -> Result<(String, Span), GraphError> {
        let start = self.pos;
        self.pos += 1;
        let mut s = String::new();
        let mut piece = self.pos;
        loop {
            match self.peek() {
                None => {
                    return Err(self.syntax("unterminated string", Span::new(start, start + 1)));
                }
                Some(b'"') => {
                    s.push_str(&self.text[piece..self.pos]);
                    self.pos += 1;
                    return Ok((s, Span::new(start, self.pos)));
                }
                Some(b'\\') => match self.b.get(self.pos + 1) {
                    Some(&c @ (b'"' | b'\\')) => {
                        s.push_str(&self.text[piece..self.pos]);
                        s.push(c as char);
                        self.pos += 2;
                        piece = self.pos;
                    }
                    // Kept verbatim; the next character is read normally.
                    _ => self.pos += 1,
                },
                Some(_) => self.pos += 1,
            }
        }
    }
}

/// The first char boundary after `i` (the end of the character at `i`).
fn next_boundary(text: &str, i: usize) -> usize {
    let mut j = (i + 1).min(text.len());
    while !text.is_char_boundary(j) {
        j += 1;
    }
    j
}

/// Whether `text` can be written as a bare argument and read back unchanged.
fn bare_ok(text: &str) -> bool {
    text.trim_matches(|c: char| c.is_ascii_whitespace()) == text
        && !text.contains(|c: char| "(),;\"#".contains(c))
        && !text.contains("->")
        && !text.contains("\\\n")
        && !text.contains("\\\r")
}

/// Write `text` as a string: `"` and `\` escaped.
fn write_quoted(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in text.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("\"")
}

/// The canonical text: `(class,arg,…)`; quoted arguments (and bare ones that could not be read
/// back bare) in double quotes.
impl fmt::Display for FilterSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}", self.class)?;
        for (a, _) in &self.args {
            f.write_str(",")?;
            if a.quoted || !bare_ok(&a.text) {
                write_quoted(f, &a.text)?;
            } else {
                f.write_str(&a.text)?;
            }
        }
        f.write_str(")")
    }
}

/// The canonical text: filters separated by ` | `.
impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, filter) in self.filters.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{filter}")?;
        }
        Ok(())
    }
}

/// The canonical text: stages separated by ` -> `; [`parse`] reads it back to the same flow
/// (spans aside).
impl fmt::Display for FlowSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, stage) in self.stages.iter().enumerate() {
            if i > 0 {
                f.write_str(" -> ")?;
            }
            write!(f, "{stage}")?;
        }
        Ok(())
    }
}

/// A filter of a checked flow: its class, its arguments without the MBuf size, and the MBuf
/// size.
#[derive(Clone)]
pub struct ResolvedFilter {
    /// The class.
    pub class: Arc<dyn FilterClass>,
    /// The arguments for [`FilterClass::instantiate`] (the MBuf size removed).
    pub args: Vec<Arg>,
    /// The MBuf size in bytes (0 when not given and the class needs none).
    pub mbuf_bytes: usize,
    /// The filter in the text.
    pub span: Span,
    /// The index of its stage in the flow (0: the sources).
    pub stage: usize,
}

impl fmt::Debug for ResolvedFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolvedFilter")
            .field("class", &self.class.name())
            .field("args", &self.args)
            .field("mbuf_bytes", &self.mbuf_bytes)
            .field("span", &self.span)
            .field("stage", &self.stage)
            .finish()
    }
}

/// Check one flow against the classes of `registry` and resolve its filters (stage by stage,
/// left to right).
///
/// - Class names are looked up case-insensitively.
/// - A class with arity `(min, max)` takes `min..=max` arguments; one more (`max + 1`) is the
///   MBuf size in bytes (decimal or `0x` hex; empty means 0), at most [`MAX_MBUF_BYTES`] and at
///   least the class's [`FilterClass::min_mbuf`]. Without it the MBuf gets `min_mbuf` bytes.
/// - The first stage holds sources only, and sources appear nowhere else.
///
/// Every error points at the offending class name or argument.
pub fn check(flow: &FlowSpec, registry: &Registry) -> Result<Vec<ResolvedFilter>, GraphError> {
    let idx = flow.text_index;
    let err = |kind, message: String, span| GraphError::new(kind, message, span, idx);
    let mut out = Vec::new();
    for (si, stage) in flow.stages.iter().enumerate() {
        for f in &stage.filters {
            let Some(class) = registry.get(&f.class) else {
                let known: Vec<&str> = registry.iter().map(|c| c.name()).collect();
                return Err(err(
                    GraphErrorKind::UnknownClass,
                    format!(
                        "unknown filter class `{}` (known: {})",
                        f.class,
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                    f.class_span,
                ));
            };
            let name = class.name();
            if si == 0 && !class.is_source() {
                let sources: Vec<&str> = registry
                    .iter()
                    .filter(|c| c.is_source())
                    .map(|c| c.name())
                    .collect();
                return Err(err(
                    GraphErrorKind::Placement,
                    format!(
                        "the first stage must contain only sources, and `{name}` is not a source (sources: {})",
                        if sources.is_empty() {
                            "none".to_string()
                        } else {
                            sources.join(", ")
                        }
                    ),
                    f.class_span,
                ));
            }
            if si > 0 && class.is_source() {
                return Err(err(
                    GraphErrorKind::Placement,
                    format!("the source `{name}` can only appear in the first stage"),
                    f.class_span,
                ));
            }
            let (min, max) = class.arity();
            let n = f.args.len();
            if n > max.saturating_add(1) {
                return Err(err(
                    GraphErrorKind::Arity,
                    format!(
                        "too many arguments for `{name}`: it takes {} and an MBuf size (usage: {})",
                        count_range(min, max),
                        class.usage()
                    ),
                    f.args[max + 1].1,
                ));
            }
            if n < min {
                return Err(err(
                    GraphErrorKind::Arity,
                    format!(
                        "too few arguments for `{name}`: it takes {} (usage: {})",
                        count_range(min, max),
                        class.usage()
                    ),
                    f.span,
                ));
            }
            let mut args: Vec<Arg> = f.args.iter().map(|(a, _)| a.clone()).collect();
            // The MBuf size is the argument after the most a class takes; a class that takes
            // many ([`FilterClass::variadic`]) may end with a bare number instead.
            let trailing = n > min
                && class.variadic()
                && args
                    .last()
                    .is_some_and(|a| !a.quoted && a.number().is_some());
            let mbuf_at = if n == max + 1 || trailing { n - 1 } else { n };
            let mbuf = if mbuf_at < n { args.pop() } else { None };
            let min_mbuf = class.min_mbuf(&args);
            let mbuf_bytes = match mbuf {
                None => min_mbuf,
                Some(a) => {
                    let span = f.args[mbuf_at].1;
                    let bytes = if a.text.trim().is_empty() {
                        0
                    } else {
                        match a.number() {
                            Some(b) if b <= MAX_MBUF_BYTES as u64 => b as usize,
                            Some(b) => {
                                return Err(err(
                                    GraphErrorKind::MBuf,
                                    format!(
                                        "MBuf size {b} of `{name}` is larger than {MAX_MBUF_BYTES} bytes (64 MiB)"
                                    ),
                                    span,
                                ));
                            }
                            None => {
                                return Err(err(
                                    GraphErrorKind::MBuf,
                                    format!(
                                        "the MBuf size of `{name}` must be a number of bytes, not `{}` (usage: {})",
                                        a.text,
                                        class.usage()
                                    ),
                                    span,
                                ));
                            }
                        }
                    };
                    if bytes < min_mbuf {
                        return Err(err(
                            GraphErrorKind::MBuf,
                            format!(
                                "`{name}` needs an MBuf of at least {min_mbuf} bytes, not {bytes}"
                            ),
                            span,
                        ));
                    }
                    bytes
                }
            };
            out.push(ResolvedFilter {
                class: class.clone(),
                args,
                mbuf_bytes,
                span: f.span,
                stage: si,
            });
        }
    }
    Ok(out)
}

/// "2 arguments", "1 to 3 arguments".
fn count_range(min: usize, max: usize) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    if min == max {
        format!("{min} argument{}", plural(min))
    } else {
        format!("{min} to {max} arguments")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::class::{Context, Instance};

    /// A class for tests: a name, an arity, whether it is a source, the MBuf it needs.
    struct TestClass {
        name: &'static str,
        arity: (usize, usize),
        source: bool,
        min_mbuf: usize,
    }

    impl FilterClass for TestClass {
        fn name(&self) -> &'static str {
            self.name
        }
        fn about(&self) -> &'static str {
            "a test class"
        }
        fn usage(&self) -> &'static str {
            "ARGS [, MBUF]"
        }
        fn is_source(&self) -> bool {
            self.source
        }
        fn arity(&self) -> (usize, usize) {
            self.arity
        }
        fn min_mbuf(&self, _args: &[Arg]) -> usize {
            self.min_mbuf
        }
        fn instantiate(&self, _args: &[Arg], _ctx: &Context) -> Result<Instance, crate::Error> {
            Err(crate::Error::new(crate::ErrorKind::Other, "test class"))
        }
    }

    /// Sources `device`, `file`; filters `sampler` (1-2 args), `bpf` (1), `fpl` (1), `jit` (1),
    /// `strsearch` (1-8), `bytecount`/`packetcount` (0-1), `flowcount` (0, MBuf ≥ 4096).
    pub(crate) fn registry() -> Registry {
        let mut r = Registry::new();
        for (name, arity, source, min_mbuf) in [
            ("device", (1, 1), true, 0),
            ("file", (1, 1), true, 0),
            ("sampler", (1, 2), false, 0),
            ("bpf", (1, 1), false, 0),
            ("fpl", (1, 1), false, 0),
            ("jit", (1, 1), false, 0),
            ("strsearch", (1, 8), false, 0),
            ("bytecount", (0, 1), false, 0),
            ("packetcount", (0, 1), false, 0),
            ("flowcount", (0, 0), false, 4096),
        ] {
            r.register(Arc::new(TestClass {
                name,
                arity,
                source,
                min_mbuf,
            }));
        }
        r
    }

    fn one(text: &str) -> FlowSpec {
        let mut flows = parse(text).unwrap_or_else(|e| panic!("{}", e.render(text)));
        assert_eq!(flows.len(), 1);
        flows.remove(0)
    }

    /// The flow as class names per stage.
    fn shape(f: &FlowSpec) -> Vec<Vec<&str>> {
        f.stages
            .iter()
            .map(|s| s.filters.iter().map(|f| f.class.as_str()).collect())
            .collect()
    }

    fn args(f: &FilterSpec) -> Vec<(&str, bool)> {
        f.args
            .iter()
            .map(|(a, _)| (a.text.as_str(), a.quoted))
            .collect()
    }

    fn parse_err(text: &str) -> String {
        match parse(text) {
            Ok(f) => panic!("{text:?} parsed: {f:?}"),
            Err(e) => e.render(text),
        }
    }

    fn check_err(text: &str) -> String {
        let flow = one(text);
        match check(&flow, &registry()) {
            Ok(r) => panic!("{text:?} checked: {r:?}"),
            Err(e) => e.render(text),
        }
    }

    #[test]
    fn paper_flows() {
        let text = "(device,eth0) | (device,eth1) -> (sampler,2,4) -> \\\n (FPL-2,\"...\") | (BPF,\"...\") -> (bytecount,,8)";
        let f = one(text);
        assert_eq!(
            shape(&f),
            [
                vec!["device", "device"],
                vec!["sampler"],
                vec!["FPL-2", "BPF"],
                vec!["bytecount"]
            ]
        );
        let s = &f.stages;
        assert_eq!(args(&s[0].filters[1]), [("eth1", false)]);
        assert_eq!(args(&s[1].filters[0]), [("2", false), ("4", false)]);
        assert_eq!(args(&s[2].filters[1]), [("...", true)]);
        assert_eq!(args(&s[3].filters[0]), [("", false), ("8", false)]);
        assert_eq!(
            &text[s[1].filters[0].span.start..s[1].filters[0].span.end],
            "(sampler,2,4)"
        );
        assert_eq!(
            &text[s[2].filters[0].class_span.start..s[2].filters[0].class_span.end],
            "FPL-2"
        );
        assert_eq!(&text[f.span.start..f.span.end], text);
        // The empty argument sits just before its `,`.
        let empty = s[3].filters[0].args[0].1;
        assert_eq!((empty.start, empty.end), (empty.start, empty.start));
        assert_eq!(&text[empty.start..empty.start + 1], ",");
        assert_eq!(
            f.to_string(),
            "(device,eth0) | (device,eth1) -> (sampler,2,4) -> (FPL-2,\"...\") | (BPF,\"...\") -> (bytecount,,8)"
        );
    }

    #[test]
    fn bar_binds_tighter_than_arrow() {
        assert_eq!(shape(&one("(a) | (b) -> (c)")), [vec!["a", "b"], vec!["c"]]);
        assert_eq!(
            shape(&one("(a)->(b)|(c)|(d)->(e)")),
            [vec!["a"], vec!["b", "c", "d"], vec!["e"]]
        );
    }

    #[test]
    fn strings_bare_args_comments() {
        let text = r#"( bpf , "say \"hi\" \\ \x41" , tcp  port 80 ,"", x\y )"#;
        let f = one(text);
        assert_eq!(
            args(&f.stages[0].filters[0]),
            [
                (r#"say "hi" \ \x41"#, true),
                ("tcp  port 80", false),
                ("", true),
                (r"x\y", false)
            ]
        );
        let (_, sp) = &f.stages[0].filters[0].args[1];
        assert_eq!(&text[sp.start..sp.end], "tcp  port 80");
        let (_, sp) = &f.stages[0].filters[0].args[0];
        assert_eq!(&text[sp.start..sp.end], r#""say \"hi\" \\ \x41""#);

        let text = "# two flows\n(device, eth0)   # the NIC\n  -> (bpf, tcp # a comment in an argument\n and port 80)\n;\n(file,\"a;b.pcap\") -> (packetcount);\n";
        let flows = parse(text).unwrap();
        assert_eq!(flows.len(), 2);
        assert_eq!(
            args(&flows[0].stages[1].filters[0]),
            [("tcp \n and port 80", false)]
        );
        assert_eq!(args(&flows[1].stages[0].filters[0]), [("a;b.pcap", true)]);
        assert_eq!(flows[1].to_string(), "(file,\"a;b.pcap\") -> (packetcount)");
        assert_eq!(shape(&one("(a,)")), [vec!["a"]]);
        assert_eq!(args(&one("(a,)").stages[0].filters[0]), [("", false)]);
        assert_eq!(
            args(&one("(a, x | y)").stages[0].filters[0]),
            [("x | y", false)]
        );
    }

    #[test]
    fn several_texts() {
        let texts = [
            "(device,eth0) -> (bpf,tcp)",
            "(device,eth1) -> (bpf,udp); (file,x) -> (bpf,ip)",
        ];
        let flows = parse_list(&texts).unwrap();
        assert_eq!(
            flows.iter().map(|f| f.text_index).collect::<Vec<_>>(),
            [0, 1, 1]
        );
        let e = parse_list(&["(a)", "(b) -> "]).unwrap_err();
        assert_eq!(e.text_index(), 1);
        assert_eq!(e.render("(b) -> "), "empty stage\n  (b) ->\n      ^^");
    }

    #[test]
    fn syntax_errors_word_for_word() {
        assert_eq!(
            parse_err("(device,eth0) -> (sampler,2,4 -> (bpf,\"tcp\")"),
            "expected ')' after the arguments of `sampler`\n  (device,eth0) -> (sampler,2,4 -> (bpf,\"tcp\")\n                                ^^"
        );
        assert_eq!(
            parse_err("(device,eth0) -> (bpf,\"tcp"),
            "unterminated string\n  (device,eth0) -> (bpf,\"tcp\n                        ^"
        );
        assert_eq!(
            parse_err("(device,eth0) -> -> (bpf,tcp)"),
            "empty stage\n  (device,eth0) -> -> (bpf,tcp)\n                   ^^"
        );
        assert_eq!(
            parse_err("(device,eth0) ->"),
            "empty stage\n  (device,eth0) ->\n                ^^"
        );
        assert_eq!(parse_err("-> (a)"), "empty stage\n  -> (a)\n  ^^");
        assert_eq!(
            parse_err("(a) | -> (b)"),
            "expected a filter after '|'\n  (a) | -> (b)\n      ^"
        );
        assert_eq!(
            parse_err("| (a)"),
            "expected a filter before '|'\n  | (a)\n  ^"
        );
        assert_eq!(
            parse_err("(a) -> bpf"),
            "expected '(' to start a filter\n  (a) -> bpf\n         ^^^"
        );
        assert_eq!(
            parse_err("(a) (b)"),
            "expected '->', '|', ';' or the end of the flow after a filter\n  (a) (b)\n      ^"
        );
        assert_eq!(
            parse_err("(device eth0)"),
            "expected ',' or ')' after the class name `device`\n  (device eth0)\n          ^^^^"
        );
        assert_eq!(
            parse_err("( ,x)"),
            "expected a class name after '('\n  ( ,x)\n    ^"
        );
        assert_eq!(
            parse_err("(\"bpf\")"),
            "expected a class name after '(', not a string\n  (\"bpf\")\n   ^"
        );
        assert_eq!(
            parse_err("(bpf, tcp\"x\")"),
            "a quoted string must be the whole argument\n  (bpf, tcp\"x\")\n           ^"
        );
        assert_eq!(
            parse_err("(bpf, \"x\" y)"),
            "expected ',' or ')' after a quoted argument (a string must be the whole argument)\n  (bpf, \"x\" y)\n            ^"
        );
        assert_eq!(parse_err("(a);;(b)"), "empty flow\n  (a);;(b)\n      ^");
        assert_eq!(
            parse_err("  # nothing\n"),
            "empty graph: expected a flow such as `(device,eth0) -> (bpf,\"tcp\")` (line 2)\n  \n  ^"
        );
        assert_eq!(
            parse_err("(a)\n -> (b,\n"),
            "expected ')' after the arguments of `b` (line 3)\n  \n  ^"
        );
        assert_eq!(
            parse_err("(a)\n  -> (b) x"),
            "expected '->', '|', ';' or the end of the flow after a filter (line 2)\n    -> (b) x\n           ^"
        );
    }

    #[test]
    fn check_resolves_and_splits_the_mbuf() {
        let text = "(DEVICE,eth0) -> (sampler,2) -> (sampler,2,4,0x10) -> (bytecount,,8) | (flowcount) | (flowcount,8192)";
        let r = check(&one(text), &registry()).unwrap();
        let got: Vec<(&str, Vec<&str>, usize, usize)> = r
            .iter()
            .map(|f| {
                (
                    f.class.name(),
                    f.args.iter().map(|a| a.text.as_str()).collect(),
                    f.mbuf_bytes,
                    f.stage,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("device", vec!["eth0"], 0, 0),
                ("sampler", vec!["2"], 0, 1),
                ("sampler", vec!["2", "4"], 16, 2),
                ("bytecount", vec![""], 8, 3),
                ("flowcount", vec![], 4096, 3),
                ("flowcount", vec![], 8192, 3),
            ]
        );
        assert_eq!(&text[r[2].span.start..r[2].span.end], "(sampler,2,4,0x10)");
        // An empty MBuf size is 0.
        let r = check(&one("(device,x) -> (bytecount,,)"), &registry()).unwrap();
        assert_eq!(r[1].mbuf_bytes, 0);
    }

    #[test]
    fn check_errors_word_for_word() {
        assert_eq!(
            check_err("(device,eth0) -> (fpl2,\"x\")"),
            "unknown filter class `fpl2` (known: bpf, bytecount, device, file, flowcount, fpl, jit, packetcount, sampler, strsearch)\n  (device,eth0) -> (fpl2,\"x\")\n                    ^^^^"
        );
        assert_eq!(
            check_err("(device,eth0) -> (sampler,1,2,3,4)"),
            "too many arguments for `sampler`: it takes 1 to 2 arguments and an MBuf size (usage: ARGS [, MBUF])\n  (device,eth0) -> (sampler,1,2,3,4)\n                                  ^"
        );
        assert_eq!(
            check_err("(device,eth0) -> (sampler)"),
            "too few arguments for `sampler`: it takes 1 to 2 arguments (usage: ARGS [, MBUF])\n  (device,eth0) -> (sampler)\n                   ^^^^^^^^^"
        );
        assert_eq!(
            check_err("(device) -> (bpf,tcp)"),
            "too few arguments for `device`: it takes 1 argument (usage: ARGS [, MBUF])\n  (device) -> (bpf,tcp)\n  ^^^^^^^^"
        );
        assert_eq!(
            check_err("(device,eth0) -> (bytecount,,big)"),
            "the MBuf size of `bytecount` must be a number of bytes, not `big` (usage: ARGS [, MBUF])\n  (device,eth0) -> (bytecount,,big)\n                               ^^^"
        );
        assert_eq!(
            check_err("(device,eth0) -> (bytecount,,67108865)"),
            "MBuf size 67108865 of `bytecount` is larger than 67108864 bytes (64 MiB)\n  (device,eth0) -> (bytecount,,67108865)\n                               ^^^^^^^^"
        );
        assert_eq!(
            check_err("(device,eth0) -> (flowcount,8)"),
            "`flowcount` needs an MBuf of at least 4096 bytes, not 8\n  (device,eth0) -> (flowcount,8)\n                              ^"
        );
        assert_eq!(
            check_err("(device,eth0) -> (device,eth1)"),
            "the source `device` can only appear in the first stage\n  (device,eth0) -> (device,eth1)\n                    ^^^^^^"
        );
        assert_eq!(
            check_err("(device,eth0) | (bpf,tcp) -> (packetcount)"),
            "the first stage must contain only sources, and `bpf` is not a source (sources: device, file)\n  (device,eth0) | (bpf,tcp) -> (packetcount)\n                   ^^^"
        );
    }

    #[test]
    fn limits() {
        let many = vec!["(a)"; MAX_FILTERS_PER_FLOW + 1].join("->");
        let e = parse(&many).unwrap_err();
        assert_eq!(e.kind(), GraphErrorKind::Limit);
        assert_eq!(e.message(), "too many filters in one flow (at most 1000)");
        assert!(parse(&vec!["(a)"; MAX_FILTERS_PER_FLOW].join("|")).is_ok());
        let long = format!("(a,\"{}\")", "x".repeat(MAX_TEXT_LEN));
        assert_eq!(parse(&long).unwrap_err().kind(), GraphErrorKind::Limit);
        let args = format!("(a{})", ",x".repeat(MAX_ARGS_PER_FILTER + 1));
        assert_eq!(parse(&args).unwrap_err().kind(), GraphErrorKind::Limit);
        let flows = vec!["(a)"; MAX_FLOWS + 1].join(";");
        assert_eq!(parse(&flows).unwrap_err().kind(), GraphErrorKind::Limit);
    }

    /// xorshift64*: a small deterministic generator for the property tests.
    pub(crate) struct Rng(pub(crate) u64);

    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        pub(crate) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    /// The flow without its spans.
    type Shape = Vec<Vec<(String, Vec<Arg>)>>;

    fn strip(f: &FlowSpec) -> Shape {
        f.stages
            .iter()
            .map(|s| {
                s.filters
                    .iter()
                    .map(|f| {
                        (
                            f.class.clone(),
                            f.args.iter().map(|(a, _)| a.clone()).collect(),
                        )
                    })
                    .collect()
            })
            .collect()
    }

    /// Whether every span of a parsed flow is inside the text and on char boundaries.
    fn spans_ok(text: &str, f: &FlowSpec) -> bool {
        let ok = |s: Span| s.start <= s.end && text.get(s.start..s.end).is_some();
        ok(f.span)
            && f.filters()
                .all(|x| ok(x.span) && ok(x.class_span) && x.args.iter().all(|(_, s)| ok(*s)))
    }

    #[test]
    fn random_text_never_panics_and_round_trips() {
        const PIECES: &[&str] = &[
            "(", ")", ",", "|", "->", "-", ">", ";", "\"", "\\", "\\\n", "#", "\n", " ", "\t", "a",
            "bpf", "x1", "é", "日", "\\\"", "8", "0x", "", "\r\n",
        ];
        const SEEDS: &[&str] = &[
            "(device,eth0) | (device,eth1) -> (sampler,2,4) -> (fpl,\"x\\\"y\") | (bpf,tcp) -> (bytecount,,8)",
            "(a) -> (b, c d ,\"e\") ; (f,,)",
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut parsed = 0;
        for round in 0..20_000 {
            let text: String = if round % 2 == 0 {
                let n = rng.below(24);
                (0..n).map(|_| rng.pick(PIECES)).collect()
            } else {
                // A valid text with a few pieces inserted, replaced or removed.
                let mut t = rng.pick(SEEDS).to_string();
                for _ in 0..1 + rng.below(3) {
                    let mut at = rng.below(t.len() + 1);
                    while !t.is_char_boundary(at) {
                        at -= 1;
                    }
                    let mut end = (at + rng.below(3)).min(t.len());
                    while !t.is_char_boundary(end) {
                        end += 1;
                    }
                    t.replace_range(at..end, rng.pick(PIECES));
                }
                t
            };
            match parse(&text) {
                Ok(flows) => {
                    parsed += 1;
                    for f in &flows {
                        assert!(spans_ok(&text, f), "{text:?}");
                        let canon = f.to_string();
                        let back = one(&canon);
                        assert_eq!(strip(&back), strip(f), "{text:?} -> {canon:?}");
                        assert_eq!(back.to_string(), canon);
                        let _ = check(f, &registry());
                    }
                }
                Err(e) => {
                    let r = e.render(&text);
                    assert!(r.contains('^'), "{text:?}: {r}");
                }
            }
        }
        assert!(parsed > 100, "only {parsed} random texts parsed");
    }

    #[test]
    fn generated_graphs_round_trip() {
        const CLASSES: &[&str] = &["device", "bpf", "FPL-2", "x.y_z", "a"];
        const ARGS: &[&str] = &[
            "",
            "eth0",
            "tcp port 80",
            "a,b",
            "(x)",
            "\"q\"",
            "\\x41",
            "\\",
            "a # b",
            " pad ",
            "->",
            "é日",
            "line\nbreak",
            "x|y",
            "\\\"",
        ];
        let mut rng = Rng(42);
        for _ in 0..3_000 {
            let stages = 1 + rng.below(5);
            let mut flow = FlowSpec {
                stages: Vec::new(),
                span: Span::default(),
                text_index: 0,
            };
            for _ in 0..stages {
                let filters = (0..1 + rng.below(3))
                    .map(|_| FilterSpec {
                        class: rng.pick(CLASSES).to_string(),
                        class_span: Span::default(),
                        args: (0..rng.below(4))
                            .map(|_| {
                                let text = rng.pick(ARGS);
                                let quoted = rng.below(2) == 0;
                                (
                                    Arg {
                                        text: text.to_string(),
                                        quoted: quoted || !bare_ok(text),
                                    },
                                    Span::default(),
                                )
                            })
                            .collect(),
                        span: Span::default(),
                    })
                    .collect();
                flow.stages.push(Stage { filters });
            }
            let text = flow.to_string();
            let back = one(&text);
            assert_eq!(strip(&back), strip(&flow), "{text}");
            assert!(spans_ok(&text, &back));
            // Several flows in one text, and with comments and line breaks between tokens.
            let two = format!("{text} ;\n# c\n{text};");
            let flows = parse(&two).unwrap();
            assert_eq!(flows.len(), 2);
            assert_eq!(strip(&flows[1]), strip(&flow));
            let spaced = text
                .replace(" -> ", " \\\n -> # x\n")
                .replace(" | ", "\n|\t");
            assert_eq!(strip(&one(&spaced)), strip(&flow), "{spaced}");
        }
    }
}
