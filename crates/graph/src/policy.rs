//! Authorisation (FFPF §3.4, modernised): a policy checked over a whole flow when it is
//! instantiated.
//!
//! The paper's daemon compared KeyNote credentials and the host's policy with the flow
//! definition. Here the policy is a small text file; the runtime passes the Unix user name of
//! the flow's owner, the parsed flow ([`FlowSpec`]), its checked filters ([`ResolvedFilter`]) and
//! the callback interval, and gets a [`Decision`] (which rules were checked and which one
//! allowed the flow, for the log) or a [`Denied`] naming the rule — line and text — that
//! denied it and why. Whole-graph rules ("strsearch only after a sampler") can only be checked
//! with the entire flow, which is why the check happens at instantiation.
//!
//! # Format
//!
//! One rule per line; `#` starts a comment (outside strings); blank lines are ignored.
//!
//! ```text
//! default deny|allow                   # the verdict when no rule decides (default: deny)
//! [user NAMES:] allow                  # allow
//! [user NAMES:] allow class C, D, …    # allow if the flow uses no class but C, D, …
//! [user NAMES:] deny                   # deny
//! [user NAMES:] deny class C, D, …     # deny if the flow uses any of C, D, …
//! [user NAMES:] require C after D      # deny unless every C has a stage of only Ds before it
//! [user NAMES:] only "EXPR" [via C, …] # deny unless the flow is restricted to EXPR (below)
//! [user NAMES:] min callback N [unless C]  # deny callbacks every fewer than N packets
//! [user NAMES:] max filters N          # deny flows of more than N filters (sources included)
//! [user NAMES:] max mbuf SIZE          # deny flows whose MBufs total more than SIZE bytes
//! [user NAMES:] only interface IF, …   # deny flows with a `device` source on another
//!                                      # interface (`IF*` matches a prefix)
//! [user NAMES:] allow kernel           # grant classes that load kernel programs (`ebpf`)
//! ```
//!
//! `NAMES` is `*` (everybody) or user names separated by commas; `group NAMES:` instead of
//! `user NAMES:` applies the rule to the members of those groups (primary or supplementary); a
//! rule without `user …:` or `group …:` applies to everybody. A class that loads programs into
//! the kernel is denied to everybody but root unless an `allow kernel` rule applies (checked
//! before the other rules). Class names are compared case-insensitively with the resolved class
//! names. `SIZE` is a number of bytes, optionally followed by `K`/`KiB`, `M`/`MiB` or `G`/`GiB`
//! (powers of 1024).
//!
//! # Evaluation
//!
//! Like a firewall: the rules that apply to the user are evaluated in order and the first one
//! that *matches* decides. `allow` and `deny` match as described; every other rule is a
//! constraint that matches — and denies — only when the flow violates it, and otherwise lets
//! evaluation go on. When no rule matches, the `default` line decides. So put the constraints
//! before the `allow` lines they should guard:
//!
//! ```text
//! default deny
//! user root: allow                      # root is exempt from everything below
//! require strsearch after sampler
//! min callback 1000 unless sampler
//! max mbuf 16MiB
//! user bob: deny class fpl
//! user alice: only "net 198.18.1.0/24"
//! user alice, bob: allow
//! ```
//!
//! # What the rules check, exactly
//!
//! The stages of a flow are fully connected: every filter of a stage feeds every filter of the
//! next (split and join), so a path from a source to a filter in stage `k` passes through
//! exactly one filter of each stage before `k`, in any combination.
//!
//! - `require C after D`: for every filter of class `C` in stage `k` there must be a stage
//!   `j < k` whose filters are *all* of class `D`. This is exact: if every earlier stage has a
//!   filter other than `D`, the path through those filters reaches `C` without a `D`.
//! - `only "EXPR"`: the stage right after the sources (stage 1) must exist and consist only of
//!   filters of the `via` classes (default `bpf`) whose first argument is `EXPR`, or `EXPR and
//!   REST` where `REST` has no `or` (nor `||`) outside parentheses and balanced parentheses
//!   (whitespace is normalised before comparing; the comparison is otherwise textual). Such an
//!   expression implies `EXPR` whatever the relative precedence of `and` and `or`. The
//!   restriction must come first because every filter sees — and may count, store or write to
//!   a file — the packets that reach it. NOTE: a semantically equivalent but differently
//!   written expression (`dst net … or src net …`) is denied; this check is sound, not complete.
//! - `min callback N [unless C]`: if the flow asks for a callback every `n` packets with
//!   `n < N`, it is denied — unless the flow contains a filter of class `C` (the paper's "if no
//!   call is made to a sampling function").
//! - `max filters N` counts every filter of the flow, sources included; `max mbuf SIZE` sums
//!   the MBuf sizes of all of them.

use std::fmt;

use crate::class::Arg;
use crate::lang::{FlowSpec, ResolvedFilter, Span};
use netsift_lang::span::render;

/// A rule as written: its line (1-based) and text (trimmed, without the comment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleRef {
    /// The line in the policy file, from 1.
    pub line: usize,
    /// The rule's text.
    pub text: String,
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: `{}`", self.line, self.text)
    }
}

/// An allowed flow: which rules applied, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The user the flow was checked for.
    pub user: String,
    /// The rule that allowed the flow; `None`: the default (`default allow`, or
    /// [`Policy::allow_all`]).
    pub allowed_by: Option<RuleRef>,
    /// The constraints and conditional rules that applied to the user and were satisfied or
    /// did not match, in order, before the decision.
    pub checked: Vec<RuleRef>,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "flow of user `{}` allowed by ", self.user)?;
        match &self.allowed_by {
            Some(r) => write!(f, "{r}")?,
            None => f.write_str("the default")?,
        }
        if !self.checked.is_empty() {
            let lines: Vec<String> = self.checked.iter().map(|r| r.line.to_string()).collect();
            write!(f, " (checked lines {})", lines.join(", "))?;
        }
        Ok(())
    }
}

/// A denied flow: the rule that denied it and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The user the flow was checked for.
    pub user: String,
    /// The rule; `None`: no rule allowed the flow and the default is deny.
    pub rule: Option<RuleRef>,
    /// Why, in words.
    pub reason: String,
    /// The offending part of the flow's text (the text [`FlowSpec::text_index`] names), when
    /// one filter or the whole flow is to blame.
    pub span: Option<Span>,
    /// The rules checked before the one that denied, for the log (boxed to keep `Denied`
    /// small).
    pub checked: Box<[RuleRef]>,
}

impl Denied {
    /// The message, then — when a filter is to blame — the flow text with a caret under it.
    pub fn render(&self, flow_text: &str) -> String {
        match self.span {
            Some(span) => render(flow_text, span, &self.to_string()),
            None => self.to_string(),
        }
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "flow of user `{}` denied by ", self.user)?;
        match &self.rule {
            Some(r) => write!(f, "policy {r}")?,
            None => f.write_str("the policy's default")?,
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for Denied {}

/// An error in a policy text: what is wrong and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError {
    message: String,
    span: Span,
    line: usize,
}

impl PolicyError {
    /// The message, without the text and caret.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where in the policy text.
    pub fn span(&self) -> Span {
        self.span
    }

    /// The line, from 1.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The message, then the line of the policy `text` with a caret under the offending token.
    pub fn render(&self, text: &str) -> String {
        render(text, self.span, &self.message)
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for PolicyError {}

/// An authorisation policy: rules evaluated in order, and a default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    rules: Vec<Rule>,
    default_allow: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    at: RuleRef,
    who: Who,
    kind: Kind,
}

/// Whom a rule applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Who {
    Everybody,
    Users(Vec<String>),
    Groups(Vec<String>),
}

impl Who {
    fn applies(&self, p: &Principal) -> bool {
        match self {
            Who::Everybody => true,
            Who::Users(names) => names.contains(&p.user),
            Who::Groups(names) => names.iter().any(|g| p.groups.contains(g)),
        }
    }
}

/// Who asks for a flow, as the policy sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Principal {
    /// The user name.
    pub user: String,
    /// The names of the user's groups (primary and supplementary).
    pub groups: Vec<String>,
    /// Whether the flow runs with root's rights (or the process's own): classes that load
    /// programs into the kernel need no grant.
    pub privileged: bool,
}

impl Principal {
    /// A user of no group, privileged when the name is `root`.
    pub fn user(name: &str) -> Principal {
        Principal {
            user: name.to_string(),
            groups: Vec::new(),
            privileged: name == "root",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Allow(Option<Vec<String>>),
    Deny(Option<Vec<String>>),
    Require {
        class: String,
        after: String,
    },
    Only {
        expr: String,
        via: Vec<String>,
    },
    MinCallback {
        packets: u64,
        unless: Option<String>,
    },
    MaxFilters(u64),
    MaxMbuf(u64),
    /// `only interface A, B*`: every `device` source names one of these interfaces.
    OnlyInterfaces(Vec<String>),
    /// `allow kernel`: the user may use classes that load programs into the kernel.
    AllowKernel,
}

/// `netsiftd`'s policy when it is started without `--policy`: capture for root and the group
/// `netsift` only. Kernel-loading classes (`ebpf`) stay root's: no `allow kernel` rule.
pub const DAEMON_DEFAULT: &str = "\
default deny
user root: allow
group netsift: allow
";

/// The longest policy text accepted, in bytes.
pub const MAX_POLICY_LEN: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    Str(String),
    Comma,
    Colon,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("`{w}`"),
            Tok::Str(_) => "a string".to_string(),
            Tok::Comma => "','".to_string(),
            Tok::Colon => "':'".to_string(),
        }
    }
}

/// The tokens of one line, with absolute spans.
struct Line {
    toks: Vec<(Tok, Span)>,
    i: usize,
    end: Span,
    line: usize,
}

impl Line {
    fn err(&self, message: impl Into<String>, span: Span) -> PolicyError {
        PolicyError {
            message: message.into(),
            span,
            line: self.line,
        }
    }

    fn peek(&self) -> Option<&(Tok, Span)> {
        self.toks.get(self.i)
    }

    fn here(&self) -> Span {
        self.peek().map_or(self.end, |t| t.1)
    }

    fn next(&mut self) -> Option<(Tok, Span)> {
        let t = self.toks.get(self.i).cloned();
        self.i += 1;
        t
    }

    fn word_is(&self, w: &str) -> bool {
        matches!(self.peek(), Some((Tok::Word(x), _)) if x.eq_ignore_ascii_case(w))
    }

    fn expect_word(&mut self, what: &str) -> Result<(String, Span), PolicyError> {
        match self.next() {
            Some((Tok::Word(w), s)) => Ok((w, s)),
            Some((t, s)) => Err(self.err(format!("expected {what}, not {}", t.describe()), s)),
            None => Err(self.err(format!("expected {what}"), self.end)),
        }
    }

    fn keyword(&mut self, kw: &str) -> Result<(), PolicyError> {
        if self.word_is(kw) {
            self.i += 1;
            Ok(())
        } else {
            let what = self
                .peek()
                .map_or(String::new(), |(t, _)| format!(", not {}", t.describe()));
            Err(self.err(format!("expected `{kw}`{what}"), self.here()))
        }
    }

    fn number(&mut self, what: &str) -> Result<u64, PolicyError> {
        let (w, s) = self.expect_word(what)?;
        w.parse()
            .map_err(|_| self.err(format!("expected {what}, not `{w}`"), s))
    }

    /// `C { , C }`
    fn classes(&mut self) -> Result<Vec<String>, PolicyError> {
        let mut out = vec![self.expect_word("a class name")?.0];
        while matches!(self.peek(), Some((Tok::Comma, _))) {
            self.i += 1;
            out.push(self.expect_word("a class name after ','")?.0);
        }
        Ok(out)
    }

    fn finish(&self) -> Result<(), PolicyError> {
        match self.peek() {
            None => Ok(()),
            Some((t, s)) => Err(self.err(
                format!("unexpected {} after the end of the rule", t.describe()),
                *s,
            )),
        }
    }
}

/// Split one line (`start` is its offset in the whole text) into tokens, up to a comment.
fn tokens(text: &str, start: usize, line: usize) -> Result<(Vec<(Tok, Span)>, usize), PolicyError> {
    let b = text.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    let abs = |a: usize, e: usize| Span::new(start + a, start + e);
    while i < b.len() {
        let c = b[i];
        match c {
            b'#' => return Ok((toks, i)),
            _ if c.is_ascii_whitespace() => i += 1,
            b',' => {
                toks.push((Tok::Comma, abs(i, i + 1)));
                i += 1;
            }
            b':' => {
                toks.push((Tok::Colon, abs(i, i + 1)));
                i += 1;
            }
            b'"' => {
                let open = i;
                let mut s = String::new();
                i += 1;
                let mut piece = i;
                loop {
                    match b.get(i) {
                        None => {
                            return Err(PolicyError {
                                message: "unterminated string".into(),
                                span: abs(open, open + 1),
                                line,
                            });
                        }
                        Some(b'"') => break,
                        Some(b'\\') if matches!(b.get(i + 1), Some(b'"' | b'\\')) => {
                            s.push_str(&text[piece..i]);
                            s.push(b[i + 1] as char);
                            i += 2;
                            piece = i;
                        }
                        Some(_) => i += 1,
                    }
                }
                s.push_str(&text[piece..i]);
                i += 1;
                toks.push((Tok::Str(s), abs(open, i)));
            }
            _ => {
                let w = i;
                while i < b.len() && !b[i].is_ascii_whitespace() && !b",:\"#".contains(&b[i]) {
                    i += 1;
                }
                toks.push((Tok::Word(text[w..i].to_string()), abs(w, i)));
            }
        }
    }
    Ok((toks, b.len()))
}

/// `1048576`, `64K`, `16 MiB`, …
fn size(line: &mut Line) -> Result<u64, PolicyError> {
    let (w, mut span) = line.expect_word("a size in bytes")?;
    let digits = w.find(|c: char| !c.is_ascii_digit()).unwrap_or(w.len());
    let (num, unit) = w.split_at(digits);
    let mut unit = unit.to_ascii_lowercase();
    if unit.is_empty()
        && let Some((Tok::Word(u), us)) = line.peek()
        && u.chars().all(|c| c.is_ascii_alphabetic())
    {
        unit = u.to_ascii_lowercase();
        span = span.to(*us);
        line.i += 1;
    }
    parse_size(&format!("{num}{unit}")).ok_or_else(|| {
        line.err(
            "expected a size in bytes (such as 65536, 64K or 16MiB)",
            span,
        )
    })
}

/// A size in bytes: a number, optionally followed by `B`, `K`/`KiB`, `M`/`MiB` or `G`/`GiB`
/// (powers of 1024, case ignored, white space allowed before the unit); `None` when it is not
/// one or does not fit 64 bits. The policy's `max mbuf` and netsiftd's `--max-memory` read sizes
/// with it.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(1 << shift)
}

impl Policy {
    /// The policy that allows every flow (no rules, default allow): authorisation is
    /// optional (§3.4).
    pub fn allow_all() -> Policy {
        Policy {
            rules: Vec::new(),
            default_allow: true,
        }
    }

    /// `netsiftd`'s policy when none is given ([`DAEMON_DEFAULT`]): root and the members of
    /// the group `netsift` may open flows; nobody else.
    pub fn daemon_default() -> Policy {
        Policy::parse(DAEMON_DEFAULT).expect("the default policy parses")
    }

    /// Parse a policy text (see the [module documentation](self) for the format).
    ///
    /// ```
    /// use netsift_graph::policy::Policy;
    ///
    /// let policy = Policy::parse("default deny\nuser alice: only \"net 198.18.1.0/24\"\nuser alice: allow\n").unwrap();
    /// assert_eq!(policy.len(), 2);
    /// let text = "user bob deny";
    /// assert_eq!(
    ///     Policy::parse(text).unwrap_err().render(text),
    ///     "expected ':' after the user names, not `deny`\n  user bob deny\n           ^^^^",
    /// );
    /// ```
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        if text.len() > MAX_POLICY_LEN {
            return Err(PolicyError {
                message: format!(
                    "policy too long ({} bytes, at most {MAX_POLICY_LEN})",
                    text.len()
                ),
                span: Span::new(MAX_POLICY_LEN, MAX_POLICY_LEN),
                line: text[..floor(text, MAX_POLICY_LEN)].matches('\n').count() + 1,
            });
        }
        let mut rules = Vec::new();
        let mut default: Option<(bool, usize)> = None;
        let mut start = 0;
        for (n, raw) in text.split('\n').enumerate() {
            let line_no = n + 1;
            let line_start = start;
            start += raw.len() + 1;
            let (toks, code_len) = tokens(raw, line_start, line_no)?;
            if toks.is_empty() {
                continue;
            }
            let code = raw[..code_len].trim();
            let end = line_start + raw[..code_len].trim_end().len();
            let mut l = Line {
                toks,
                i: 0,
                end: Span::new(end, end),
                line: line_no,
            };
            if l.word_is("default") {
                let at = l.here();
                l.i += 1;
                let allow = if l.word_is("allow") {
                    true
                } else if l.word_is("deny") {
                    false
                } else {
                    return Err(l.err("expected `allow` or `deny` after `default`", l.here()));
                };
                l.i += 1;
                l.finish()?;
                if let Some((_, first)) = default {
                    return Err(l.err(format!("`default` given twice (first on line {first})"), at));
                }
                default = Some((allow, line_no));
                continue;
            }
            let who = if l.word_is("user") || l.word_is("group") {
                let group = l.word_is("group");
                let noun = if group { "group" } else { "user" };
                l.i += 1;
                let mut names = vec![l.expect_word(&format!("a {noun} name or `*`"))?.0];
                while matches!(l.peek(), Some((Tok::Comma, _))) {
                    l.i += 1;
                    names.push(l.expect_word(&format!("a {noun} name after ','"))?.0);
                }
                match l.next() {
                    Some((Tok::Colon, _)) => {}
                    Some((t, s)) => {
                        return Err(l.err(
                            format!("expected ':' after the {noun} names, not {}", t.describe()),
                            s,
                        ));
                    }
                    None => {
                        return Err(l.err(
                            format!("expected ':' and a rule after the {noun} names"),
                            l.end,
                        ));
                    }
                }
                if names.iter().any(|n| n == "*") {
                    Who::Everybody
                } else if group {
                    Who::Groups(names)
                } else {
                    Who::Users(names)
                }
            } else {
                Who::Everybody
            };
            let kind = Self::rule(&mut l)?;
            l.finish()?;
            rules.push(Rule {
                at: RuleRef {
                    line: line_no,
                    text: code.to_string(),
                },
                who,
                kind,
            });
        }
        Ok(Policy {
            rules,
            default_allow: default.is_some_and(|d| d.0),
        })
    }

    fn rule(l: &mut Line) -> Result<Kind, PolicyError> {
        let (w, s) = match l.next() {
            Some((Tok::Word(w), s)) => (w.to_ascii_lowercase(), s),
            Some((t, s)) => return Err(l.err(format!("expected a rule, not {}", t.describe()), s)),
            None => return Err(l.err("expected a rule after ':'", l.end)),
        };
        Ok(match w.as_str() {
            "allow" if l.word_is("kernel") => {
                l.i += 1;
                Kind::AllowKernel
            }
            "only" if l.word_is("interface") || l.word_is("interfaces") => {
                l.i += 1;
                let mut names = vec![l.expect_word("an interface name")?.0];
                while matches!(l.peek(), Some((Tok::Comma, _))) {
                    l.i += 1;
                    names.push(l.expect_word("an interface name after ','")?.0);
                }
                Kind::OnlyInterfaces(names)
            }
            "allow" | "deny" => {
                let classes = if l.peek().is_some() {
                    l.keyword("class")?;
                    Some(l.classes()?)
                } else {
                    None
                };
                if w == "allow" {
                    Kind::Allow(classes)
                } else {
                    Kind::Deny(classes)
                }
            }
            "require" => {
                let class = l.expect_word("a class name")?.0;
                l.keyword("after")?;
                let after = l.expect_word("a class name")?.0;
                Kind::Require { class, after }
            }
            "only" => {
                let expr = match l.next() {
                    Some((Tok::Str(e), _)) if !e.trim().is_empty() => e,
                    other => {
                        let span = other.map_or(l.end, |t| t.1);
                        return Err(l.err(
                            "expected a filter expression in double quotes, such as \"net 198.18.1.0/24\"",
                            span,
                        ));
                    }
                };
                let via = if l.word_is("via") {
                    l.i += 1;
                    l.classes()?
                } else {
                    vec!["bpf".to_string()]
                };
                Kind::Only { expr, via }
            }
            "min" => {
                l.keyword("callback")?;
                let packets = l.number("a number of packets")?;
                let unless = if l.word_is("unless") {
                    l.i += 1;
                    Some(l.expect_word("a class name")?.0)
                } else {
                    None
                };
                Kind::MinCallback { packets, unless }
            }
            "max" => {
                if l.word_is("filters") {
                    l.i += 1;
                    Kind::MaxFilters(l.number("a number of filters")?)
                } else if l.word_is("mbuf") {
                    l.i += 1;
                    Kind::MaxMbuf(size(l)?)
                } else {
                    return Err(l.err("expected `filters` or `mbuf` after `max`", l.here()));
                }
            }
            _ => {
                return Err(l.err(
                    format!(
                        "unknown rule `{w}` (expected allow, deny, allow kernel, require, only, only interface, min callback, max filters, max mbuf or default)"
                    ),
                    s,
                ));
            }
        })
    }

    /// Whether flows no rule decides are allowed.
    pub fn default_allows(&self) -> bool {
        self.default_allow
    }

    /// The number of rules (the `default` line not counted).
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the policy has no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Check the flow `flow` of `user` — its filters `resolved` (from
    /// [`check`](crate::lang::check)) and the callback interval in packets, if any — against
    /// the rules, in order.
    pub fn check(
        &self,
        user: &str,
        flow: &FlowSpec,
        resolved: &[ResolvedFilter],
        callback_every: Option<u64>,
    ) -> Result<Decision, Denied> {
        self.check_principal(&Principal::user(user), flow, resolved, callback_every)
    }

    /// [`Policy::check`] for a [`Principal`]: `group` rules apply by its groups, and a flow
    /// with a class that loads programs into the kernel (`ebpf`) is denied unless the
    /// principal is privileged or an `allow kernel` rule applies to it.
    pub fn check_principal(
        &self,
        who: &Principal,
        flow: &FlowSpec,
        resolved: &[ResolvedFilter],
        callback_every: Option<u64>,
    ) -> Result<Decision, Denied> {
        let user = who.user.as_str();
        let mut checked = Vec::new();
        let is = |f: &ResolvedFilter, c: &str| f.class.name().eq_ignore_ascii_case(c);
        let uses = |c: &str| resolved.iter().any(|f| is(f, c));
        if !who.privileged
            && let Some(f) = resolved.iter().find(|f| f.class.loads_kernel_programs())
            && !self
                .rules
                .iter()
                .any(|r| r.kind == Kind::AllowKernel && r.who.applies(who))
        {
            return Err(Denied {
                user: user.to_string(),
                rule: None,
                reason: format!(
                    "`{}` loads programs into the kernel: only root may use it, or users an \
                     `allow kernel` rule names",
                    f.class.name()
                ),
                span: Some(f.span),
                checked: Box::new([]),
            });
        }
        for rule in &self.rules {
            if !rule.who.applies(who) {
                continue;
            }
            let deny = |reason: String, span: Option<Span>, checked: &mut Vec<RuleRef>| Denied {
                user: user.to_string(),
                rule: Some(rule.at.clone()),
                reason,
                span,
                checked: std::mem::take(checked).into(),
            };
            match &rule.kind {
                Kind::Allow(None) => {
                    return Ok(Decision {
                        user: user.to_string(),
                        allowed_by: Some(rule.at.clone()),
                        checked,
                    });
                }
                Kind::Allow(Some(classes)) => {
                    if resolved.iter().all(|f| classes.iter().any(|c| is(f, c))) {
                        return Ok(Decision {
                            user: user.to_string(),
                            allowed_by: Some(rule.at.clone()),
                            checked,
                        });
                    }
                }
                Kind::Deny(None) => {
                    return Err(deny(
                        format!("user `{user}` may not instantiate flows"),
                        None,
                        &mut checked,
                    ));
                }
                Kind::Deny(Some(classes)) => {
                    if let Some(f) = resolved.iter().find(|f| classes.iter().any(|c| is(f, c))) {
                        return Err(deny(
                            format!("the flow uses the class `{}`", f.class.name()),
                            Some(f.span),
                            &mut checked,
                        ));
                    }
                }
                Kind::Require { class, after } => {
                    for f in resolved.iter().filter(|f| is(f, class)) {
                        let guarded = (0..f.stage).any(|j| {
                            let mut stage = resolved.iter().filter(|g| g.stage == j).peekable();
                            stage.peek().is_some() && stage.all(|g| is(g, after))
                        });
                        if !guarded {
                            return Err(deny(
                                format!(
                                    "`{}` must come after `{after}` on every path from the sources (a stage of `{after}` filters only)",
                                    f.class.name()
                                ),
                                Some(f.span),
                                &mut checked,
                            ));
                        }
                    }
                }
                Kind::Only { expr, via } => {
                    if let Some((reason, span)) = unrestricted(flow, resolved, expr, via) {
                        return Err(deny(reason, span, &mut checked));
                    }
                }
                Kind::MinCallback { packets, unless } => {
                    let exempt = unless.as_deref().is_some_and(uses);
                    if let Some(n) = callback_every
                        && n < *packets
                        && !exempt
                    {
                        return Err(deny(
                            format!(
                                "a callback every {n} packets; at least {packets} are required{}",
                                unless
                                    .as_deref()
                                    .map_or(String::new(), |c| format!(" without a `{c}`"))
                            ),
                            None,
                            &mut checked,
                        ));
                    }
                }
                Kind::MaxFilters(max) => {
                    if resolved.len() as u64 > *max {
                        return Err(deny(
                            format!(
                                "the flow has {} filters, at most {max} allowed",
                                resolved.len()
                            ),
                            None,
                            &mut checked,
                        ));
                    }
                }
                Kind::AllowKernel => {}
                Kind::OnlyInterfaces(names) => {
                    let allowed = |i: &str| {
                        names.iter().any(|n| match n.strip_suffix('*') {
                            Some(prefix) => i.starts_with(prefix),
                            None => i == n,
                        })
                    };
                    if let Some(f) = resolved.iter().find(|f| {
                        is(f, "device") && !f.args.first().is_some_and(|a| allowed(a.text.trim()))
                    }) {
                        let name = f.args.first().map_or("", |a| a.text.trim());
                        return Err(deny(
                            format!(
                                "capture on `{name}` is not allowed (only on {})",
                                names.join(", ")
                            ),
                            Some(f.span),
                            &mut checked,
                        ));
                    }
                }
                Kind::MaxMbuf(max) => {
                    let total: u64 = resolved.iter().map(|f| f.mbuf_bytes as u64).sum();
                    if total > *max {
                        return Err(deny(
                            format!("the flow's MBufs total {total} bytes, at most {max} allowed"),
                            None,
                            &mut checked,
                        ));
                    }
                }
            }
            checked.push(rule.at.clone());
        }
        if self.default_allow {
            Ok(Decision {
                user: user.to_string(),
                allowed_by: None,
                checked,
            })
        } else {
            Err(Denied {
                user: user.to_string(),
                rule: None,
                reason: "no rule allows the flow and the default is deny".to_string(),
                span: None,
                checked: checked.into(),
            })
        }
    }
}

/// The largest char boundary of `text` at or below `i`.
fn floor(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Why the flow is not restricted to `expr` (see the module documentation), or `None`.
fn unrestricted(
    flow: &FlowSpec,
    resolved: &[ResolvedFilter],
    expr: &str,
    via: &[String],
) -> Option<(String, Option<Span>)> {
    let first: Vec<&ResolvedFilter> = resolved.iter().filter(|f| f.stage == 1).collect();
    if first.is_empty() {
        return Some((
            format!(
                "the flow must be restricted to \"{expr}\" right after its sources, and it has no filter after them"
            ),
            Some(flow.span),
        ));
    }
    for f in first {
        let name = f.class.name();
        if !via.iter().any(|c| c.eq_ignore_ascii_case(name)) {
            return Some((
                format!(
                    "the filters right after the sources must be `{}` filters restricted to \"{expr}\", not `{name}`",
                    via.join("` or `")
                ),
                Some(f.span),
            ));
        }
        let text = f.args.first().map_or("", |a: &Arg| a.text.as_str());
        if !implies(text, expr) {
            return Some((
                format!(
                    "the expression \"{text}\" of `{name}` is not restricted to \"{expr}\" (it must be \"{expr}\" or \"{expr} and …\" without a top-level `or`)"
                ),
                Some(f.span),
            ));
        }
    }
    None
}

/// Whether the filter expression `text` is `expr` or `expr and REST` with no top-level `or`
/// in `REST` (whitespace normalised).
fn implies(text: &str, expr: &str) -> bool {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let (text, expr) = (norm(text), norm(expr));
    if expr.is_empty() {
        return false;
    }
    if text == expr {
        return true;
    }
    let Some(rest) = text
        .strip_prefix(&expr)
        .and_then(|r| r.strip_prefix(" and ").or_else(|| r.strip_prefix(" && ")))
    else {
        return false;
    };
    let mut depth = 0i64;
    let spaced = rest.replace('(', " ( ").replace(')', " ) ");
    for tok in spaced.split_whitespace() {
        match tok {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            t if depth == 0 && (t.eq_ignore_ascii_case("or") || t.contains("||")) => {
                return false;
            }
            _ => {}
        }
    }
    depth == 0 && !rest.trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::tests::registry;
    use crate::lang::{check, parse};

    const POLICY: &str = "\
# the host's policy
default deny
user root: allow                      # root is exempt
require strsearch after sampler
min callback 1000 unless sampler
max filters 6
max mbuf 1 KiB
user bob: deny class fpl, jit
user alice: only \"net 198.18.1.0/24\"
user alice, bob: allow
user carol: allow class device, bpf
";

    fn run(policy: &str, user: &str, flow: &str, cb: Option<u64>) -> Result<Decision, Denied> {
        let p = Policy::parse(policy).unwrap_or_else(|e| panic!("{}", e.render(policy)));
        let f = parse(flow).unwrap().remove(0);
        let r = check(&f, &registry()).unwrap_or_else(|e| panic!("{}", e.render(flow)));
        p.check(user, &f, &r, cb)
    }

    fn allowed_by(user: &str, flow: &str, cb: Option<u64>) -> Option<usize> {
        match run(POLICY, user, flow, cb) {
            Ok(d) => d.allowed_by.map(|r| r.line),
            Err(d) => panic!("{}", d.render(flow)),
        }
    }

    fn denied(user: &str, flow: &str, cb: Option<u64>) -> String {
        match run(POLICY, user, flow, cb) {
            Ok(d) => panic!("allowed: {d}"),
            Err(d) => d.render(flow),
        }
    }

    fn parse_err(text: &str) -> String {
        Policy::parse(text).unwrap_err().render(text)
    }

    #[test]
    fn allow_all_and_default() {
        let f = parse("(device,eth0) -> (fpl,x)").unwrap().remove(0);
        let r = check(&f, &registry()).unwrap();
        let d = Policy::allow_all()
            .check("anyone", &f, &r, Some(1))
            .unwrap();
        assert_eq!(
            d.to_string(),
            "flow of user `anyone` allowed by the default"
        );
        let d = Policy::parse("")
            .unwrap()
            .check("x", &f, &r, None)
            .unwrap_err();
        assert_eq!(
            d.to_string(),
            "flow of user `x` denied by the policy's default: no rule allows the flow and the default is deny"
        );
        assert!(
            Policy::parse("default allow\n")
                .unwrap()
                .check("x", &f, &r, None)
                .is_ok()
        );
        // Nobody but the listed users: dave falls through to the default.
        assert_eq!(
            denied("dave", "(device,eth0) -> (bpf,tcp)", None),
            "flow of user `dave` denied by the policy's default: no rule allows the flow and the default is deny"
        );
    }

    #[test]
    fn first_match_wins_and_decisions_are_logged() {
        let flow = "(device,eth0) -> (strsearch,x)";
        assert_eq!(allowed_by("root", flow, Some(1)), Some(3));
        let d = run(
            POLICY,
            "bob",
            "(device,eth0) -> (sampler,2) -> (bpf,tcp)",
            None,
        )
        .unwrap();
        assert_eq!(
            d.to_string(),
            "flow of user `bob` allowed by line 10: `user alice, bob: allow` (checked lines 4, 5, 6, 7, 8)"
        );
        let d = run(POLICY, "bob", "(device,eth0) -> (fpl,x)", None).unwrap_err();
        assert_eq!(
            d.checked.iter().map(|r| r.line).collect::<Vec<_>>(),
            [4, 5, 6, 7]
        );
        assert_eq!(d.rule.as_ref().map(|r| r.line), Some(8));
    }

    #[test]
    fn require_after() {
        assert_eq!(
            allowed_by(
                "bob",
                "(device,eth0) -> (sampler,2) -> (bpf,tcp) -> (strsearch,x)",
                None
            ),
            Some(10)
        );
        assert_eq!(
            allowed_by(
                "bob",
                "(device,eth0) -> (sampler,2) | (SAMPLER,3) -> (strsearch,x)",
                None
            ),
            Some(10)
        );
        assert_eq!(
            denied("bob", "(device,eth0) -> (strsearch,x)", None),
            "flow of user `bob` denied by policy line 4: `require strsearch after sampler`: `strsearch` must come after `sampler` on every path from the sources (a stage of `sampler` filters only)\n  (device,eth0) -> (strsearch,x)\n                   ^^^^^^^^^^^^^"
        );
        // One path goes through the bpf filter and not the sampler.
        assert_eq!(
            denied(
                "bob",
                "(device,eth0) -> (sampler,2) | (bpf,tcp) -> (strsearch,x)",
                None
            ),
            "flow of user `bob` denied by policy line 4: `require strsearch after sampler`: `strsearch` must come after `sampler` on every path from the sources (a stage of `sampler` filters only)\n  (device,eth0) -> (sampler,2) | (bpf,tcp) -> (strsearch,x)\n                                              ^^^^^^^^^^^^^"
        );
        // A sampler after the search does not help.
        assert!(
            run(
                POLICY,
                "bob",
                "(device,eth0) -> (strsearch,x) -> (sampler,2)",
                None
            )
            .is_err()
        );
    }

    #[test]
    fn only_a_network() {
        for ok in [
            "(device,eth0) -> (bpf,\"net 198.18.1.0/24\") -> (packetcount)",
            "(device,eth0) -> (bpf,  net   198.18.1.0/24 ) -> (packetcount)",
            "(device,eth0) -> (bpf,\"net 198.18.1.0/24 and tcp\")",
            "(device,eth0) -> (bpf,\"net 198.18.1.0/24 and (tcp or udp)\")",
            "(device,eth0) -> (bpf,\"net 198.18.1.0/24 && not port 22\") | (bpf,\"net 198.18.1.0/24\")",
        ] {
            assert_eq!(allowed_by("alice", ok, None), Some(10), "{ok}");
        }
        assert_eq!(
            denied(
                "alice",
                "(device,eth0) -> (packetcount) -> (bpf,\"net 198.18.1.0/24\")",
                None
            ),
            "flow of user `alice` denied by policy line 9: `user alice: only \"net 198.18.1.0/24\"`: the filters right after the sources must be `bpf` filters restricted to \"net 198.18.1.0/24\", not `packetcount`\n  (device,eth0) -> (packetcount) -> (bpf,\"net 198.18.1.0/24\")\n                   ^^^^^^^^^^^^^"
        );
        assert_eq!(
            denied(
                "alice",
                "(device,eth0) -> (bpf,\"net 198.18.1.0/24 and tcp or udp\")",
                None
            ),
            "flow of user `alice` denied by policy line 9: `user alice: only \"net 198.18.1.0/24\"`: the expression \"net 198.18.1.0/24 and tcp or udp\" of `bpf` is not restricted to \"net 198.18.1.0/24\" (it must be \"net 198.18.1.0/24\" or \"net 198.18.1.0/24 and …\" without a top-level `or`)\n  (device,eth0) -> (bpf,\"net 198.18.1.0/24 and tcp or udp\")\n                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"
        );
        for bad in [
            "(device,eth0) -> (bpf,\"net 198.18.1.0/24\") | (bpf,tcp)",
            "(device,eth0) -> (bpf,\"net 198.18.1.0/245\")",
            "(device,eth0) -> (bpf,\"net 198.18.1.0/24 or tcp\")",
            "(device,eth0) -> (bpf,\"net 198.18.1.0/24 and tcp) or (udp\")",
            "(device,eth0) -> (bpf,\"net 198.18.1.0/24 and tcp||udp\")",
            "(device,eth0) -> (bpf,\"tcp and net 198.18.1.0/24\")",
        ] {
            assert!(run(POLICY, "alice", bad, None).is_err(), "{bad}");
        }
        assert_eq!(
            denied("alice", "(device,eth0)", None),
            "flow of user `alice` denied by policy line 9: `user alice: only \"net 198.18.1.0/24\"`: the flow must be restricted to \"net 198.18.1.0/24\" right after its sources, and it has no filter after them\n  (device,eth0)\n  ^^^^^^^^^^^^^"
        );
        // Other users are not restricted; `via` names other classes.
        assert_eq!(
            allowed_by("bob", "(device,eth0) -> (bpf,tcp)", None),
            Some(10)
        );
        let p = "user alice: only \"net 10.0.0.0/8\" via jit, bpf\ndefault allow";
        assert!(
            run(
                p,
                "alice",
                "(device,x) -> (JIT,\"net 10.0.0.0/8 and tcp\")",
                None
            )
            .is_ok()
        );
        assert!(run(p, "alice", "(device,x) -> (fpl,\"net 10.0.0.0/8\")", None).is_err());
    }

    #[test]
    fn callbacks() {
        let flow = "(device,eth0) -> (bpf,tcp)";
        assert_eq!(allowed_by("bob", flow, None), Some(10));
        assert_eq!(allowed_by("bob", flow, Some(1000)), Some(10));
        assert_eq!(
            denied("bob", flow, Some(999)),
            "flow of user `bob` denied by policy line 5: `min callback 1000 unless sampler`: a callback every 999 packets; at least 1000 are required without a `sampler`"
        );
        assert_eq!(
            allowed_by("bob", "(device,eth0) -> (sampler,2) -> (bpf,tcp)", Some(1)),
            Some(10)
        );
    }

    #[test]
    fn classes() {
        assert_eq!(
            denied("bob", "(device,eth0) -> (sampler,2) -> (FPL,x)", None),
            "flow of user `bob` denied by policy line 8: `user bob: deny class fpl, jit`: the flow uses the class `fpl`\n  (device,eth0) -> (sampler,2) -> (FPL,x)\n                                  ^^^^^^^"
        );
        assert_eq!(
            allowed_by(
                "alice",
                "(device,eth0) -> (bpf,\"net 198.18.1.0/24\") -> (fpl,x)",
                None
            ),
            Some(10)
        );
        assert_eq!(
            allowed_by("carol", "(device,eth0) -> (bpf,tcp) -> (bpf,udp)", None),
            Some(11)
        );
        assert_eq!(
            denied("carol", "(device,eth0) -> (bpf,tcp) -> (packetcount)", None),
            "flow of user `carol` denied by the policy's default: no rule allows the flow and the default is deny"
        );
        let p = "user mallory: deny\ndefault allow\n";
        assert_eq!(
            run(p, "mallory", "(device,eth0)", None)
                .unwrap_err()
                .to_string(),
            "flow of user `mallory` denied by policy line 1: `user mallory: deny`: user `mallory` may not instantiate flows"
        );
        assert!(run(p, "bob", "(device,eth0)", None).is_ok());
    }

    #[test]
    fn limits() {
        assert_eq!(
            denied(
                "bob",
                "(device,a) | (device,b) -> (bpf,x) -> (bpf,x) -> (bpf,x) -> (bpf,x) | (bpf,y)",
                None
            ),
            "flow of user `bob` denied by policy line 6: `max filters 6`: the flow has 7 filters, at most 6 allowed"
        );
        assert_eq!(
            allowed_by("bob", "(device,a) -> (bytecount,,1024)", None),
            Some(10)
        );
        assert_eq!(
            denied(
                "bob",
                "(device,a) -> (bytecount,,1024) | (packetcount,,8)",
                None
            ),
            "flow of user `bob` denied by policy line 7: `max mbuf 1 KiB`: the flow's MBufs total 1032 bytes, at most 1024 allowed"
        );
        for (text, bytes) in [
            ("5", 5),
            ("64K", 65536),
            ("2 MiB", 2 << 20),
            ("1g", 1 << 30),
        ] {
            let p = Policy::parse(&format!("max mbuf {text}")).unwrap();
            assert_eq!(p.rules[0].kind, Kind::MaxMbuf(bytes));
        }
        assert_eq!(Policy::parse("# x\n\n  \n").unwrap().len(), 0);
    }

    #[test]
    fn parse_errors_word_for_word() {
        assert_eq!(
            parse_err("require strsearch after sampler\nallowed"),
            "unknown rule `allowed` (expected allow, deny, allow kernel, require, only, only interface, min callback, max filters, max mbuf or default) (line 2)\n  allowed\n  ^^^^^^^"
        );
        assert_eq!(
            parse_err("user alice only \"net 1.2.3.0/24\""),
            "expected ':' after the user names, not `only`\n  user alice only \"net 1.2.3.0/24\"\n             ^^^^"
        );
        assert_eq!(
            parse_err("user alice: only \"net 1.2.3.0/24"),
            "unterminated string\n  user alice: only \"net 1.2.3.0/24\n                   ^"
        );
        assert_eq!(
            parse_err("user alice: only net"),
            "expected a filter expression in double quotes, such as \"net 198.18.1.0/24\"\n  user alice: only net\n                   ^^^"
        );
        assert_eq!(
            parse_err("default deny\ndefault allow"),
            "`default` given twice (first on line 1) (line 2)\n  default allow\n  ^^^^^^^"
        );
        assert_eq!(
            parse_err("default maybe"),
            "expected `allow` or `deny` after `default`\n  default maybe\n          ^^^^^"
        );
        assert_eq!(
            parse_err("min callback lots"),
            "expected a number of packets, not `lots`\n  min callback lots\n               ^^^^"
        );
        assert_eq!(
            parse_err("min callbacks 5"),
            "expected `callback`, not `callbacks`\n  min callbacks 5\n      ^^^^^^^^^"
        );
        assert_eq!(
            parse_err("max mbuf 5 parsecs"),
            "expected a size in bytes (such as 65536, 64K or 16MiB)\n  max mbuf 5 parsecs\n           ^^^^^^^^^"
        );
        assert_eq!(
            parse_err("max memory 5"),
            "expected `filters` or `mbuf` after `max`\n  max memory 5\n      ^^^^^^"
        );
        assert_eq!(
            parse_err("require strsearch sampler"),
            "expected `after`, not `sampler`\n  require strsearch sampler\n                    ^^^^^^^"
        );
        assert_eq!(
            parse_err("deny class fpl, # none\n"),
            "expected a class name after ',' (line 1)\n  deny class fpl, # none\n                 ^"
        );
        assert_eq!(
            parse_err("allow everything"),
            "expected `class`, not `everything`\n  allow everything\n        ^^^^^^^^^^"
        );
        assert_eq!(
            parse_err("max filters 3 4"),
            "unexpected `4` after the end of the rule\n  max filters 3 4\n                ^"
        );
        assert_eq!(
            parse_err("user bob:"),
            "expected a rule after ':'\n  user bob:\n           ^"
        );
        let e = Policy::parse("\n\nfoo").unwrap_err();
        assert_eq!(
            (e.line(), e.to_string().as_str()),
            (
                3,
                "line 3: unknown rule `foo` (expected allow, deny, allow kernel, require, only, only interface, min callback, max filters, max mbuf or default)"
            )
        );
    }

    #[test]
    fn implication() {
        assert!(implies("net 1.0.0.0/8", " net  1.0.0.0/8 "));
        assert!(implies("net 1.0.0.0/8 and (a or b) and c", "net 1.0.0.0/8"));
        assert!(!implies("net 1.0.0.0/8 and", "net 1.0.0.0/8"));
        assert!(!implies("net 1.0.0.0/8 and a OR b", "net 1.0.0.0/8"));
        assert!(!implies("net 1.0.0.0/8 and ((a) or b", "net 1.0.0.0/8"));
        assert!(!implies("anything", ""));
    }

    #[test]
    fn random_policies_never_panic() {
        const PIECES: &[&str] = &[
            "user",
            "alice",
            ":",
            ",",
            "*",
            "allow",
            "deny",
            "class",
            "fpl",
            "require",
            "after",
            "only",
            "\"net 1.0.0.0/8\"",
            "\"",
            "via",
            "min",
            "callback",
            "1000",
            "unless",
            "max",
            "filters",
            "mbuf",
            "64K",
            "default",
            "#",
            "\n",
            " ",
            "\\\"",
            "é",
            "18446744073709551615G",
        ];
        let mut rng = crate::lang::tests::Rng(7);
        for _ in 0..20_000 {
            let text: String = (0..rng.below(16)).map(|_| rng.pick(PIECES)).collect();
            if let Err(e) = Policy::parse(&text) {
                assert!(e.render(&text).contains('^'));
            }
        }
    }

    #[test]
    fn groups_interfaces_and_kernel_grants() {
        let reg = crate::standard_registry();
        let p = Policy::parse(
            "default deny\n\
             user root: allow\n\
             group capture: only interface veth*, lo\n\
             group capture: allow kernel\n\
             group capture: allow\n",
        )
        .unwrap();
        let run = |who: &Principal, text: &str| {
            let spec = parse(text).unwrap().remove(0);
            let resolved = check(&spec, &reg).unwrap();
            p.check_principal(who, &spec, &resolved, None)
        };
        let alice = Principal {
            user: "alice".into(),
            groups: vec!["users".into(), "capture".into()],
            privileged: false,
        };
        let bob = Principal {
            user: "bob".into(),
            groups: vec!["users".into()],
            privileged: false,
        };
        let root = Principal {
            user: "root".into(),
            groups: vec!["root".into()],
            privileged: true,
        };
        assert!(run(&alice, "(device,veth0) -> (bpf,\"tcp\")").is_ok());
        assert!(run(&alice, "(device,lo)").is_ok());
        let e = run(&alice, "(device,eth0) -> (bpf,\"tcp\")").unwrap_err();
        assert!(e.reason.contains("capture on `eth0` is not allowed"), "{e}");
        assert!(
            run(&alice, "(gen,1,10) -> (ebpf,\"tcp\")").is_ok(),
            "granted"
        );
        let e = run(&bob, "(gen,1,10)").unwrap_err();
        assert!(e.rule.is_none(), "the default denies bob: {e}");
        let e = run(&bob, "(gen,1,10) -> (ebpf,\"tcp\")").unwrap_err();
        assert!(e.reason.contains("loads programs into the kernel"), "{e}");
        assert!(run(&root, "(device,eth0) -> (ebpf,\"tcp\")").is_ok());
        // The daemon's default: root and the group `netsift`, kernel classes root's only.
        let d = Policy::daemon_default();
        let member = Principal {
            user: "carol".into(),
            groups: vec!["netsift".into()],
            privileged: false,
        };
        let spec = parse("(gen,1,10) -> (bpf,\"tcp\")").unwrap().remove(0);
        let resolved = check(&spec, &reg).unwrap();
        assert!(d.check_principal(&member, &spec, &resolved, None).is_ok());
        assert!(d.check_principal(&bob, &spec, &resolved, None).is_err());
        assert!(d.check_principal(&root, &spec, &resolved, None).is_ok());
        let spec = parse("(gen,1,10) -> (ebpf,\"tcp\")").unwrap().remove(0);
        let resolved = check(&spec, &reg).unwrap();
        assert!(d.check_principal(&member, &spec, &resolved, None).is_err());
        // Parse errors name the place.
        let e = Policy::parse("group : allow").unwrap_err();
        assert!(e.message().contains("group name"), "{e}");
        let e = Policy::parse("only interface").unwrap_err();
        assert!(e.message().contains("interface name"), "{e}");
    }
}
