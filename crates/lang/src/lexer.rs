//! The lexer: libpcap's `scanner.l`, rule for rule.
//!
//! flex picks, at each position, the longest match of any rule, and on equal lengths the rule
//! listed first. The rules in order: keywords (case sensitive), whitespace, one-character
//! operators, two-character operators, `$B` (ARCnet address), MAC addresses, numbers, dotted
//! IPv4 (2 to 4 parts), IPv6 addresses, malformed MAC addresses (`B:+(B:+)+`), named constants
//! (`tcp-syn`, `icmp-echo`, …), identifiers `[A-Za-z0-9]([-_.A-Za-z0-9]*[.A-Za-z0-9])?`, escaped
//! identifiers `\name`, and anything else is an error. The consequences are sometimes
//! surprising and are kept on purpose, because tcpdump users write expressions for libpcap:
//! `1-1024` is one identifier (what `portrange` needs), so arithmetic needs spaces around `-`;
//! twelve hex digits are a MAC address; `ipx1` is an identifier, not `ipx` then `1`.

use crate::fxhash::FxHashMap;
use crate::span::{Error, ErrorKind, Span};

/// A keyword token. Synonyms share a variant (`ether`, `link`, `ppp`… are all [`Kw::Link`]).
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kw {
    Dst,
    Src,
    Link,
    Arp,
    Rarp,
    Ip,
    Sctp,
    Tcp,
    Udp,
    Icmp,
    Igmp,
    Igrp,
    Pim,
    Vrrp,
    Carp,
    Radio,
    Ip6,
    Icmp6,
    Ah,
    Esp,
    Atalk,
    Aarp,
    Decnet,
    Lat,
    Sca,
    Moprc,
    Mopdl,
    Iso,
    Esis,
    Isis,
    L1,
    L2,
    Iih,
    Lsp,
    Snp,
    Csnp,
    Psnp,
    Clnp,
    Stp,
    Ipx,
    Netbeui,
    Host,
    Net,
    Mask,
    Port,
    Portrange,
    Proto,
    Protochain,
    Gateway,
    Type,
    Subtype,
    Dir,
    Addr1,
    Addr2,
    Addr3,
    Addr4,
    Ra,
    Ta,
    Less,
    Greater,
    Byte,
    Broadcast,
    Multicast,
    And,
    Or,
    Not,
    Len,
    Inbound,
    Outbound,
    Ifindex,
    Vlan,
    Mpls,
    Pppoed,
    Pppoes,
    Geneve,
    Lane,
    Llc,
    Metac,
    Bcc,
    Oam,
    Oamf4,
    Oamf4ec,
    Oamf4sc,
    Sc,
    Ilmic,
    Vpi,
    Vci,
    Connectmsg,
    Metaconnect,
    PfIfname,
    PfRset,
    PfRnr,
    PfSrnr,
    PfReason,
    PfAction,
    Fisu,
    Lssu,
    Msu,
    Hfisu,
    Hlssu,
    Hmsu,
    Sio,
    Opc,
    Dpc,
    Sls,
    Hsio,
    Hopc,
    Hdpc,
    Hsls,
}

/// Keyword spellings, in scanner order. `&&`, `||` and `!` are handled with the operators.
const KEYWORDS: &[(&str, Kw)] = &[
    ("dst", Kw::Dst),
    ("src", Kw::Src),
    ("link", Kw::Link),
    ("ether", Kw::Link),
    ("ppp", Kw::Link),
    ("slip", Kw::Link),
    ("fddi", Kw::Link),
    ("tr", Kw::Link),
    ("wlan", Kw::Link),
    ("arp", Kw::Arp),
    ("rarp", Kw::Rarp),
    ("ip", Kw::Ip),
    ("sctp", Kw::Sctp),
    ("tcp", Kw::Tcp),
    ("udp", Kw::Udp),
    ("icmp", Kw::Icmp),
    ("igmp", Kw::Igmp),
    ("igrp", Kw::Igrp),
    ("pim", Kw::Pim),
    ("vrrp", Kw::Vrrp),
    ("carp", Kw::Carp),
    ("radio", Kw::Radio),
    ("ip6", Kw::Ip6),
    ("icmp6", Kw::Icmp6),
    ("ah", Kw::Ah),
    ("esp", Kw::Esp),
    ("atalk", Kw::Atalk),
    ("aarp", Kw::Aarp),
    ("decnet", Kw::Decnet),
    ("lat", Kw::Lat),
    ("sca", Kw::Sca),
    ("moprc", Kw::Moprc),
    ("mopdl", Kw::Mopdl),
    ("iso", Kw::Iso),
    ("esis", Kw::Esis),
    ("es-is", Kw::Esis),
    ("isis", Kw::Isis),
    ("is-is", Kw::Isis),
    ("l1", Kw::L1),
    ("l2", Kw::L2),
    ("iih", Kw::Iih),
    ("lsp", Kw::Lsp),
    ("snp", Kw::Snp),
    ("csnp", Kw::Csnp),
    ("psnp", Kw::Psnp),
    ("clnp", Kw::Clnp),
    ("stp", Kw::Stp),
    ("ipx", Kw::Ipx),
    ("netbeui", Kw::Netbeui),
    ("host", Kw::Host),
    ("net", Kw::Net),
    ("mask", Kw::Mask),
    ("port", Kw::Port),
    ("portrange", Kw::Portrange),
    ("proto", Kw::Proto),
    ("protochain", Kw::Protochain),
    ("gateway", Kw::Gateway),
    ("type", Kw::Type),
    ("subtype", Kw::Subtype),
    ("direction", Kw::Dir),
    ("dir", Kw::Dir),
    ("address1", Kw::Addr1),
    ("addr1", Kw::Addr1),
    ("address2", Kw::Addr2),
    ("addr2", Kw::Addr2),
    ("address3", Kw::Addr3),
    ("addr3", Kw::Addr3),
    ("address4", Kw::Addr4),
    ("addr4", Kw::Addr4),
    ("ra", Kw::Ra),
    ("ta", Kw::Ta),
    ("less", Kw::Less),
    ("greater", Kw::Greater),
    ("byte", Kw::Byte),
    ("broadcast", Kw::Broadcast),
    ("multicast", Kw::Multicast),
    ("and", Kw::And),
    ("&&", Kw::And),
    ("or", Kw::Or),
    ("||", Kw::Or),
    ("not", Kw::Not),
    ("len", Kw::Len),
    ("length", Kw::Len),
    ("inbound", Kw::Inbound),
    ("outbound", Kw::Outbound),
    ("ifindex", Kw::Ifindex),
    ("vlan", Kw::Vlan),
    ("mpls", Kw::Mpls),
    ("pppoed", Kw::Pppoed),
    ("pppoes", Kw::Pppoes),
    ("geneve", Kw::Geneve),
    ("lane", Kw::Lane),
    ("llc", Kw::Llc),
    ("metac", Kw::Metac),
    ("bcc", Kw::Bcc),
    ("oam", Kw::Oam),
    ("oamf4", Kw::Oamf4),
    ("oamf4ec", Kw::Oamf4ec),
    ("oamf4sc", Kw::Oamf4sc),
    ("sc", Kw::Sc),
    ("ilmic", Kw::Ilmic),
    ("vpi", Kw::Vpi),
    ("vci", Kw::Vci),
    ("connectmsg", Kw::Connectmsg),
    ("metaconnect", Kw::Metaconnect),
    ("on", Kw::PfIfname),
    ("ifname", Kw::PfIfname),
    ("rset", Kw::PfRset),
    ("ruleset", Kw::PfRset),
    ("rnr", Kw::PfRnr),
    ("rulenum", Kw::PfRnr),
    ("srnr", Kw::PfSrnr),
    ("subrulenum", Kw::PfSrnr),
    ("reason", Kw::PfReason),
    ("action", Kw::PfAction),
    ("fisu", Kw::Fisu),
    ("lssu", Kw::Lssu),
    ("lsu", Kw::Lssu),
    ("msu", Kw::Msu),
    ("hfisu", Kw::Hfisu),
    ("hlssu", Kw::Hlssu),
    ("hmsu", Kw::Hmsu),
    ("sio", Kw::Sio),
    ("opc", Kw::Opc),
    ("dpc", Kw::Dpc),
    ("sls", Kw::Sls),
    ("hsio", Kw::Hsio),
    ("hopc", Kw::Hopc),
    ("hdpc", Kw::Hdpc),
    ("hsls", Kw::Hsls),
];

/// Named numeric constants: they are numbers wherever a number may stand.
const CONSTANTS: &[(&str, u32)] = &[
    ("icmptype", 0),
    ("icmpcode", 1),
    ("icmp-echoreply", 0),
    ("icmp-unreach", 3),
    ("icmp-sourcequench", 4),
    ("icmp-redirect", 5),
    ("icmp-echo", 8),
    ("icmp-routeradvert", 9),
    ("icmp-routersolicit", 10),
    ("icmp-timxceed", 11),
    ("icmp-paramprob", 12),
    ("icmp-tstamp", 13),
    ("icmp-tstampreply", 14),
    ("icmp-ireq", 15),
    ("icmp-ireqreply", 16),
    ("icmp-maskreq", 17),
    ("icmp-maskreply", 18),
    ("icmp6type", 0),
    ("icmp6code", 1),
    ("icmp6-destinationunreach", 1),
    ("icmp6-packettoobig", 2),
    ("icmp6-timeexceeded", 3),
    ("icmp6-parameterproblem", 4),
    ("icmp6-echo", 128),
    ("icmp6-echoreply", 129),
    ("icmp6-multicastlistenerquery", 130),
    ("icmp6-multicastlistenerreportv1", 131),
    ("icmp6-multicastlistenerdone", 132),
    ("icmp6-routersolicit", 133),
    ("icmp6-routeradvert", 134),
    ("icmp6-neighborsolicit", 135),
    ("icmp6-neighboradvert", 136),
    ("icmp6-redirect", 137),
    ("icmp6-routerrenum", 138),
    ("icmp6-nodeinformationquery", 139),
    ("icmp6-nodeinformationresponse", 140),
    ("icmp6-ineighbordiscoverysolicit", 141),
    ("icmp6-ineighbordiscoveryadvert", 142),
    ("icmp6-multicastlistenerreportv2", 143),
    ("icmp6-homeagentdiscoveryrequest", 144),
    ("icmp6-homeagentdiscoveryreply", 145),
    ("icmp6-mobileprefixsolicit", 146),
    ("icmp6-mobileprefixadvert", 147),
    ("icmp6-certpathsolicit", 148),
    ("icmp6-certpathadvert", 149),
    ("icmp6-multicastrouteradvert", 151),
    ("icmp6-multicastroutersolicit", 152),
    ("icmp6-multicastrouterterm", 153),
    ("tcpflags", 13),
    ("tcp-fin", 0x01),
    ("tcp-syn", 0x02),
    ("tcp-rst", 0x04),
    ("tcp-push", 0x08),
    ("tcp-ack", 0x10),
    ("tcp-urg", 0x20),
    ("tcp-ece", 0x40),
    ("tcp-cwr", 0x80),
];

/// Operators and punctuation.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Colon,
    LBracket,
    RBracket,
    Bang,
    Lt,
    Gt,
    LParen,
    RParen,
    Amp,
    Pipe,
    Caret,
    Eq,
    Ge,
    Le,
    Ne,
    Shl,
    Shr,
}

/// One token. Addresses and names carry no text: it is the source under the token's span
/// ([`Token::text`]), so tokens are copied, never allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tok {
    /// A keyword.
    Kw(Kw),
    /// An operator (`not` is [`Kw::Not`]; `!` is [`Op::Bang`]).
    Op(Op),
    /// A number (decimal, `0x` hexadecimal, `0` octal, or a named constant).
    Num(u32),
    /// A dotted IPv4 address of 2 to 4 parts (`10.1`, `192.168.0.1`).
    Hid,
    /// An IPv6 address.
    Hid6,
    /// A MAC address.
    Eid,
    /// An ARCnet address `$xx`.
    Aid,
    /// A name (or an escaped keyword `\name`, whose text is the name without its backslash).
    Id,
}

/// A token with its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// What it is.
    pub tok: Tok,
    /// Where it is.
    pub span: Span,
}

impl Token {
    /// The token's text in `src` (the source it was read from): for an escaped name `\tcp`,
    /// the name without its backslash.
    pub fn text<'a>(&self, src: &'a str) -> &'a str {
        let text = &src[self.span.start..self.span.end];
        match self.tok {
            Tok::Id => text.strip_prefix('\\').unwrap_or(text),
            _ => text,
        }
    }
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// Pattern elements of the address rules; `ends` maps a set of start positions to the set of
/// positions where the element can end (the rules are small enough for this NFA-style walk).
#[derive(Clone, Copy)]
enum El {
    /// 1 to `max` hex digits (`B` = 2, `W` = 4).
    Hex(usize),
    /// Exactly 4 hex digits (`B2`).
    Hex4,
    /// `N`: decimal digits, or `0x`/`0X` and hex digits.
    Num,
    /// A literal string.
    Lit(&'static str),
}

/// Sets of end offsets (relative to the token start) as bitmasks: tokens longer than 127 bytes
/// never match the address rules, which keeps matching allocation-free.
type Ends = u128;
const WINDOW: usize = 127;

fn ends(s: &[u8], at: usize, starts: Ends, el: El) -> Ends {
    let mut out: Ends = 0;
    let byte = |i: usize| s.get(at + i).copied();
    let mut m = starts;
    while m != 0 {
        let p = m.trailing_zeros() as usize;
        m &= m - 1;
        match el {
            El::Hex(max) => {
                let mut q = p;
                while q < WINDOW && q - p < max && byte(q).is_some_and(is_hex) {
                    q += 1;
                    out |= 1 << q;
                }
            }
            El::Hex4 => {
                if p + 4 <= WINDOW && (p..p + 4).all(|i| byte(i).is_some_and(is_hex)) {
                    out |= 1 << (p + 4);
                }
            }
            El::Num => {
                let mut q = p;
                while q < WINDOW && byte(q).is_some_and(|b| b.is_ascii_digit()) {
                    q += 1;
                    out |= 1 << q;
                }
                if byte(p) == Some(b'0') && matches!(byte(p + 1), Some(b'x' | b'X')) {
                    let mut q = p + 2;
                    while q < WINDOW && byte(q).is_some_and(is_hex) {
                        q += 1;
                        out |= 1 << q;
                    }
                }
            }
            El::Lit(l) => {
                if p + l.len() <= WINDOW
                    && s.get(at + p..).is_some_and(|r| r.starts_with(l.as_bytes()))
                {
                    out |= 1 << (p + l.len());
                }
            }
        }
    }
    out
}

/// Longest match of a sequence of elements at `at`, or 0.
fn seq(s: &[u8], at: usize, els: &[El]) -> usize {
    let mut cur: Ends = 1;
    for &el in els {
        cur = ends(s, at, cur, el);
        if cur == 0 {
            return 0;
        }
    }
    (127 - cur.leading_zeros()) as usize
}

/// Longest match of the `MAC` rule.
/// What one scan of the bytes at a token's start tells the address rules: the run of hex digits,
/// separators (`:`, `.`, `-`) and `x`/`X` (numbers' `0x`), and, of its part before any `x`, what
/// [`mac_len`] checks first.
#[derive(Clone, Copy, Default)]
struct Run {
    len: usize,
    colon: bool,
    /// A `.` or `-` after an `x` (the part [`MacRun`] does not count).
    later_sep: bool,
    mac: MacRun,
}

/// The MAC rules' run (hex digits and `:`, `.`, `-`): its length, its separators and how many
/// hex digits start it.
#[derive(Clone, Copy, Default)]
struct MacRun {
    len: usize,
    colons: usize,
    dashes: usize,
    dots: usize,
    hex_prefix: usize,
}

impl Run {
    fn of(s: &[u8]) -> Run {
        let mut r = Run::default();
        let mut in_mac = true;
        for &b in s {
            match b {
                b':' => r.colon = true,
                b'.' | b'-' if !in_mac => r.later_sep = true,
                b'.' | b'-' => {}
                b'x' | b'X' => in_mac = false,
                b if is_hex(b) => {}
                _ => break,
            }
            if in_mac {
                match b {
                    b':' => r.mac.colons += 1,
                    b'.' => r.mac.dots += 1,
                    b'-' => r.mac.dashes += 1,
                    _ if r.mac.hex_prefix == r.mac.len => r.mac.hex_prefix += 1,
                    _ => {}
                }
                r.mac.len += 1;
            }
            r.len += 1;
        }
        r
    }
}

/// Longest match of the `MAC` rule, `run` being the scan of the bytes at `at`.
fn mac_len(s: &[u8], at: usize, run: &MacRun) -> usize {
    // Cheap necessary conditions first: the separated forms need five separators of one kind,
    // `xxxx.xxxx.xxxx` two dots and 14 characters, the bare form 12 hex digits.
    let &MacRun {
        len,
        colons,
        dashes,
        dots,
        hex_prefix,
    } = run;
    let b = El::Hex(2);
    let sep = |c: &'static str| {
        [
            b,
            El::Lit(c),
            b,
            El::Lit(c),
            b,
            El::Lit(c),
            b,
            El::Lit(c),
            b,
            El::Lit(c),
            b,
        ]
    };
    let mut best = 0;
    if colons >= 5 {
        best = best.max(seq(s, at, &sep(":")));
    }
    if dashes >= 5 {
        best = best.max(seq(s, at, &sep("-")));
    }
    if dots >= 5 {
        best = best.max(seq(s, at, &sep(".")));
    }
    if dots >= 2 && len >= 14 {
        best = best.max(seq(
            s,
            at,
            &[El::Hex4, El::Lit("."), El::Hex4, El::Lit("."), El::Hex4],
        ));
    }
    if hex_prefix >= 12 {
        best = best.max(12);
    }
    best
}

/// Longest match of `N` at `at` (decimal digits, or `0x`/`0X` and hex digits), or 0; like
/// every address rule, within the first [`WINDOW`] bytes of the token.
fn num_len(s: &[u8], at: usize) -> usize {
    let run = |from: usize, ok: fn(&u8) -> bool| {
        s.get(at + from..).map_or(0, |r| {
            r.iter()
                .take(WINDOW.saturating_sub(from))
                .take_while(|b| ok(b))
                .count()
        })
    };
    let decimal = run(0, u8::is_ascii_digit);
    let hex = if s.get(at) == Some(&b'0') && matches!(s.get(at + 1), Some(b'x' | b'X')) {
        match run(2, u8::is_ascii_hexdigit) {
            0 => 0,
            n => 2 + n,
        }
    } else {
        0
    };
    decimal.max(hex)
}

/// Longest match of the dotted IPv4 rule (`N.N`, `N.N.N`, `N.N.N.N`). An `N` can only be
/// followed by the `.` after its longest match (a shorter one is followed by a digit), so the
/// groups are read one after the other.
fn hid_len(s: &[u8], at: usize) -> usize {
    let mut end = num_len(s, at);
    let mut best = 0;
    for groups in 2..=4 {
        if end == 0 || end + 1 >= WINDOW || s.get(at + end) != Some(&b'.') {
            break;
        }
        let next = num_len(s, at + end + 1).min(WINDOW - end - 1);
        if next == 0 {
            break;
        }
        end += 1 + next;
        if groups >= 2 {
            best = end;
        }
    }
    best
}

/// The alternatives of the `V6` rule: 8 groups; or `::` with 0 to 7 groups around it; or 6
/// groups (with or without `::`, 0 to 6 around it) followed by a dotted quad.
fn v6_patterns() -> &'static [Vec<El>] {
    static PATTERNS: std::sync::OnceLock<Vec<Vec<El>>> = std::sync::OnceLock::new();
    PATTERNS.get_or_init(|| {
        let w = El::Hex(4);
        let groups = |n: usize| -> Vec<El> {
            let mut v = Vec::new();
            for i in 0..n {
                if i > 0 {
                    v.push(El::Lit(":"));
                }
                v.push(w);
            }
            v
        };
        let quad = [
            El::Num,
            El::Lit("."),
            El::Num,
            El::Lit("."),
            El::Num,
            El::Lit("."),
            El::Num,
        ];
        let mut all = vec![groups(8)];
        for n in 0..=7 {
            for before in 0..=n {
                let mut p = groups(before);
                p.push(El::Lit("::"));
                p.extend(groups(n - before));
                all.push(p);
            }
        }
        let mut p = groups(6);
        p.push(El::Lit(":"));
        p.extend(quad);
        all.push(p);
        for n in 0..=5 {
            for before in 0..=n {
                let after = n - before;
                let mut p = groups(before);
                p.push(El::Lit("::"));
                p.extend(groups(after));
                if after > 0 {
                    p.push(El::Lit(":"));
                }
                p.extend(quad);
                all.push(p);
            }
        }
        all
    })
}

/// Longest match of the `V6` rule.
fn v6_len(s: &[u8], at: usize) -> usize {
    v6_patterns()
        .iter()
        .map(|p| seq(s, at, p))
        .max()
        .unwrap_or(0)
}

/// Longest match of `{B}:+({B}:+)+` (a malformed MAC address).
fn bogus_mac_len(s: &[u8], at: usize) -> usize {
    let mut best = 0;
    let mut starts: Ends = 1;
    for round in 1..=WINDOW {
        let after_b = ends(s, at, starts, El::Hex(2));
        let mut after_colons: Ends = 0;
        let mut m = after_b;
        while m != 0 {
            let p = m.trailing_zeros() as usize;
            m &= m - 1;
            let mut q = p;
            while q < WINDOW && s.get(at + q) == Some(&b':') {
                q += 1;
                after_colons |= 1 << q;
            }
        }
        if after_colons == 0 {
            break;
        }
        if round >= 2 {
            best = best.max((127 - after_colons.leading_zeros()) as usize);
        }
        starts = after_colons;
    }
    best
}

/// Longest match of the identifier rule.
fn id_len(s: &[u8], at: usize) -> usize {
    if at >= s.len() || !s[at].is_ascii_alphanumeric() {
        return 0;
    }
    let mut end = at + 1;
    let mut q = at + 1;
    while q < s.len() && (s[q].is_ascii_alphanumeric() || matches!(s[q], b'-' | b'_' | b'.')) {
        q += 1;
        if s[q - 1].is_ascii_alphanumeric() || s[q - 1] == b'.' {
            end = q;
        }
    }
    end - at
}

/// `table` as a hash map from spelling.
fn table_map<T: Copy>(table: &'static [(&'static str, T)]) -> FxHashMap<&'static [u8], T> {
    table.iter().map(|&(w, v)| (w.as_bytes(), v)).collect()
}

/// The entry of `table` spelled exactly `word`. Keyword and constant spellings are themselves
/// identifiers, so the longest keyword starting at a position can only beat the identifier rule
/// by being exactly the identifier's match (ties go to keywords, listed first).
fn lookup<T: Copy>(table: &FxHashMap<&'static [u8], T>, word: &[u8]) -> Option<(usize, T)> {
    table.get(word).map(|&v| (word.len(), v))
}

/// Convert a `N` token as libpcap's `stou` does: `0x` hex, leading `0` octal, else decimal;
/// 32-bit overflow and non-octal digits are errors.
fn stou(text: &str) -> Result<u32, String> {
    let overflow = || format!("number {text} overflows 32 bits");
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        let mut n: u32 = 0;
        for c in hex.chars() {
            if n > 0x0fff_ffff {
                return Err(overflow());
            }
            n = (n << 4) + c.to_digit(16).unwrap_or(0);
        }
        Ok(n)
    } else if let Some(oct) = text.strip_prefix('0') {
        let mut n: u32 = 0;
        for c in oct.chars() {
            let Some(d) = c.to_digit(8) else {
                return Err(format!("number {text} contains non-octal digit"));
            };
            if n > 0o3777777777 {
                return Err(overflow());
            }
            n = (n << 3) + d;
        }
        Ok(n)
    } else {
        let mut n: u32 = 0;
        for c in text.chars() {
            let d = c.to_digit(10).unwrap_or(0);
            if n > 429_496_729 || (n == 429_496_729 && d > 5) {
                return Err(overflow());
            }
            n = n * 10 + d;
        }
        Ok(n)
    }
}

/// Split `src` into tokens.
pub fn tokenize(src: &str) -> Result<Vec<Token>, Error> {
    // About one token per four bytes of a typical filter; grows if not.
    let mut out = Vec::with_capacity(src.len() / 4 + 2);
    let s = src.as_bytes();
    let mut at = 0;
    let err = |msg: String, span: Span| Err(Error::new(ErrorKind::Lexical, msg, Some(span), src));
    static KW: std::sync::OnceLock<FxHashMap<&'static [u8], Kw>> = std::sync::OnceLock::new();
    static CONST: std::sync::OnceLock<FxHashMap<&'static [u8], u32>> = std::sync::OnceLock::new();
    while at < s.len() {
        let c = s[at];
        if matches!(c, b' ' | b'\t' | b'\r' | b'\n') {
            at += 1;
            continue;
        }
        // Candidates in scanner order: (length, rule index). Longest wins; ties go to the
        // earlier rule.
        let id = id_len(s, at);
        let kw = if s[at..].starts_with(b"&&") {
            Some((2, Kw::And))
        } else if s[at..].starts_with(b"||") {
            Some((2, Kw::Or))
        } else if id > 0 && c.is_ascii_alphabetic() {
            // No keyword or constant starts with a digit (`no_name_starts_with_a_digit`).
            lookup(KW.get_or_init(|| table_map(KEYWORDS)), &s[at..at + id])
        } else {
            None
        };
        let op1 = usize::from(matches!(
            c,
            b'+' | b'-'
                | b'*'
                | b'/'
                | b'%'
                | b':'
                | b'['
                | b']'
                | b'!'
                | b'<'
                | b'>'
                | b'('
                | b')'
                | b'&'
                | b'|'
                | b'^'
                | b'='
        ));
        let op2 = match (c, s.get(at + 1)) {
            (b'>', Some(b'=')) => Some(0),
            (b'<', Some(b'=')) => Some(1),
            (b'!', Some(b'=')) => Some(2),
            (b'=', Some(b'=')) => Some(3),
            (b'<', Some(b'<')) => Some(4),
            (b'>', Some(b'>')) => Some(5),
            _ => None,
        };
        let aid = if c == b'$' {
            seq(s, at + 1, &[El::Hex(2)])
                .checked_add(1)
                .filter(|&l| l > 1)
                .unwrap_or(0)
        } else {
            0
        };
        // Address rules can only start with a hex digit or a colon, and only match within a
        // run of hex digits and separators; IPv6 and malformed MACs need a colon, MACs a
        // separator or twelve hex digits.
        let hexish = is_hex(c) || c == b':';
        let run = if hexish {
            Run::of(&s[at..])
        } else {
            Run::default()
        };
        let sep = run.colon || run.mac.dots > 0 || run.mac.dashes > 0 || run.later_sep;
        let mac = if hexish && (sep || run.len >= 12) {
            mac_len(s, at, &run.mac)
        } else {
            0
        };
        let num = if c.is_ascii_digit() {
            num_len(s, at)
        } else {
            0
        };
        let hid = if c.is_ascii_digit() {
            hid_len(s, at)
        } else {
            0
        };
        let v6 = if hexish && run.colon {
            v6_len(s, at)
        } else {
            0
        };
        let bogus = if is_hex(c) && run.colon {
            bogus_mac_len(s, at)
        } else {
            0
        };
        // A keyword spelled like a constant wins the tie (it is the earlier rule).
        let constant = if id > 0 && kw.is_none() && c.is_ascii_alphabetic() {
            lookup(CONST.get_or_init(|| table_map(CONSTANTS)), &s[at..at + id])
        } else {
            None
        };
        let esc = if c == b'\\' {
            let n = s[at + 1..]
                .iter()
                .take_while(|&&b| !matches!(b, b' ' | b'!' | b'(' | b')' | b'\n' | b'\t'))
                .count();
            if n > 0 { n + 1 } else { 0 }
        } else {
            0
        };
        let candidates = [
            kw.map_or(0, |(l, _)| l),
            op1,
            op2.map_or(0, |_| 2),
            aid,
            mac,
            num,
            hid,
            v6,
            bogus,
            constant.map_or(0, |(l, _)| l),
            id,
            esc,
        ];
        let (rule, len) =
            candidates
                .iter()
                .enumerate()
                .fold(
                    (usize::MAX, 0),
                    |(br, bl), (r, &l)| if l > bl { (r, l) } else { (br, bl) },
                );
        let span = Span::new(at, at + len.max(1));
        if len == 0 {
            // flex's `.` rule: one byte (or one UTF-8 character) that nothing accepts.
            let ch = src[at..].chars().next().unwrap_or('?');
            return err(
                format!("unexpected character '{}'", ch.escape_default()),
                Span::new(at, at + ch.len_utf8()),
            );
        }
        let text = &src[at..at + len];
        let tok = match rule {
            0 => Tok::Kw(kw.map(|(_, k)| k).unwrap_or(Kw::And)),
            1 => Tok::Op(match c {
                b'+' => Op::Plus,
                b'-' => Op::Minus,
                b'*' => Op::Star,
                b'/' => Op::Slash,
                b'%' => Op::Percent,
                b':' => Op::Colon,
                b'[' => Op::LBracket,
                b']' => Op::RBracket,
                b'!' => Op::Bang,
                b'<' => Op::Lt,
                b'>' => Op::Gt,
                b'(' => Op::LParen,
                b')' => Op::RParen,
                b'&' => Op::Amp,
                b'|' => Op::Pipe,
                b'^' => Op::Caret,
                _ => Op::Eq,
            }),
            2 => Tok::Op(match op2 {
                Some(0) => Op::Ge,
                Some(1) => Op::Le,
                Some(2) => Op::Ne,
                Some(3) => Op::Eq,
                Some(4) => Op::Shl,
                _ => Op::Shr,
            }),
            3 => Tok::Aid,
            4 => Tok::Eid,
            5 => match stou(text) {
                Ok(n) => Tok::Num(n),
                Err(m) => return err(m, span),
            },
            6 => Tok::Hid,
            7 => {
                if text.parse::<std::net::Ipv6Addr>().is_err() {
                    return err(format!("bogus IPv6 address {text}"), span);
                }
                Tok::Hid6
            }
            8 => return err(format!("bogus ethernet address {text}"), span),
            9 => Tok::Num(constant.map_or(0, |(_, v)| v)),
            // Rule 11, `\name`: the text (`Token::text`) drops the backslash.
            _ => Tok::Id,
        };
        // `&&` and `||` are keyword spellings of and/or (rule 0 matched 2 bytes); a lone `&`
        // or `|` is an operator.
        out.push(Token { tok, span });
        at += len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tokenizer looks keywords and constants up only for words that start with a letter.
    #[test]
    fn no_name_starts_with_a_digit() {
        for w in KEYWORDS
            .iter()
            .map(|(w, _)| *w)
            .chain(CONSTANTS.iter().map(|(w, _)| *w))
        {
            assert!(!w.as_bytes()[0].is_ascii_digit(), "{w}");
        }
    }

    /// A token as the tests write it: with its text.
    #[derive(Debug, PartialEq)]
    enum Tok {
        Kw(Kw),
        Op(Op),
        Num(u32),
        Hid(String),
        Hid6(String),
        Eid(String),
        Aid(String),
        Id(String),
    }

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s)
            .unwrap()
            .into_iter()
            .map(|t| {
                let text = t.text(s).to_owned();
                match t.tok {
                    super::Tok::Kw(k) => Tok::Kw(k),
                    super::Tok::Op(o) => Tok::Op(o),
                    super::Tok::Num(n) => Tok::Num(n),
                    super::Tok::Hid => Tok::Hid(text),
                    super::Tok::Hid6 => Tok::Hid6(text),
                    super::Tok::Eid => Tok::Eid(text),
                    super::Tok::Aid => Tok::Aid(text),
                    super::Tok::Id => Tok::Id(text),
                }
            })
            .collect()
    }

    fn lex_err(s: &str) -> String {
        tokenize(s).unwrap_err().message().to_owned()
    }

    #[test]
    fn keywords_and_identifiers() {
        assert_eq!(toks("ip"), vec![Tok::Kw(Kw::Ip)]);
        assert_eq!(toks("ipx1"), vec![Tok::Id("ipx1".into())]);
        assert_eq!(toks("IP"), vec![Tok::Id("IP".into())]);
        assert_eq!(toks("es-is"), vec![Tok::Kw(Kw::Esis)]);
        assert_eq!(toks("tcp-syn"), vec![Tok::Num(2)]);
        assert_eq!(toks("tcp-syn1"), vec![Tok::Id("tcp-syn1".into())]);
        assert_eq!(toks("1-1024"), vec![Tok::Id("1-1024".into())]);
        assert_eq!(
            toks("foo-"),
            vec![Tok::Id("foo".into()), Tok::Op(Op::Minus)]
        );
        assert_eq!(toks("\\tcp"), vec![Tok::Id("tcp".into())]);
        assert_eq!(
            toks("a && b || !c"),
            vec![
                Tok::Id("a".into()),
                Tok::Kw(Kw::And),
                Tok::Id("b".into()),
                Tok::Kw(Kw::Or),
                Tok::Op(Op::Bang),
                Tok::Id("c".into())
            ]
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(
            toks("80 0x50 0120"),
            vec![Tok::Num(80), Tok::Num(80), Tok::Num(80)]
        );
        assert_eq!(toks("4294967295"), vec![Tok::Num(u32::MAX)]);
        assert_eq!(lex_err("4294967296"), "number 4294967296 overflows 32 bits");
        assert_eq!(
            lex_err("0x100000000"),
            "number 0x100000000 overflows 32 bits"
        );
        assert_eq!(lex_err("port 08"), "number 08 contains non-octal digit");
    }

    #[test]
    fn addresses() {
        assert_eq!(toks("10.1"), vec![Tok::Hid("10.1".into())]);
        assert_eq!(toks("1.2.3.4"), vec![Tok::Hid("1.2.3.4".into())]);
        assert_eq!(toks("1.2.3.4.5.6"), vec![Tok::Eid("1.2.3.4.5.6".into())]);
        assert_eq!(
            toks("aa:bb:cc:dd:ee:ff"),
            vec![Tok::Eid("aa:bb:cc:dd:ee:ff".into())]
        );
        assert_eq!(
            toks("abcd.ef00.0003"),
            vec![Tok::Eid("abcd.ef00.0003".into())]
        );
        assert_eq!(toks("123456789012"), vec![Tok::Eid("123456789012".into())]);
        assert_eq!(toks("fe80::1"), vec![Tok::Hid6("fe80::1".into())]);
        assert_eq!(toks("::"), vec![Tok::Hid6("::".into())]);
        assert_eq!(
            toks("::ffff:1.2.3.4"),
            vec![Tok::Hid6("::ffff:1.2.3.4".into())]
        );
        assert_eq!(
            toks("fe80::/10"),
            vec![Tok::Hid6("fe80::".into()), Tok::Op(Op::Slash), Tok::Num(10)]
        );
        assert_eq!(toks("$1f"), vec![Tok::Aid("$1f".into())]);
        assert_eq!(
            lex_err("1:2:3:4:5:6:7"),
            "bogus ethernet address 1:2:3:4:5:6:"
        );
        assert_eq!(
            lex_err("ab:cd:ef:0g:00:00"),
            "bogus ethernet address ab:cd:ef:"
        );
        assert_eq!(
            lex_err("::ffff:1.2.3.999"),
            "bogus IPv6 address ::ffff:1.2.3.999"
        );
    }

    #[test]
    fn operators_and_bad_characters() {
        assert_eq!(
            toks("ip[0:2]>=5"),
            vec![
                Tok::Kw(Kw::Ip),
                Tok::Op(Op::LBracket),
                Tok::Num(0),
                Tok::Op(Op::Colon),
                Tok::Num(2),
                Tok::Op(Op::RBracket),
                Tok::Op(Op::Ge),
                Tok::Num(5)
            ]
        );
        assert_eq!(
            toks("a == b != c << d >> e"),
            vec![
                Tok::Id("a".into()),
                Tok::Op(Op::Eq),
                Tok::Id("b".into()),
                Tok::Op(Op::Ne),
                Tok::Id("c".into()),
                Tok::Op(Op::Shl),
                Tok::Id("d".into()),
                Tok::Op(Op::Shr),
                Tok::Id("e".into())
            ]
        );
        let e = tokenize("tcp @ 80").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unexpected character '@'\n  tcp @ 80\n      ^"
        );
    }
}
